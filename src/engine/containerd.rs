//! containerd: the wrapper as a runtime of the CRI plugin in `config.toml`:
//! `[plugins.<CRI>.containerd.runtimes.oci-tmpfs]` with `runtime_type =
//! "io.containerd.runc.v2"`, pod/container annotation pass-through for
//! `oci-tmpfs-hook/*` and `options.BinaryName = wrapper`. `<CRI>` depends on
//! the config version ([`cri_plugin`], the one place that maps it). Edits go
//! through `toml_edit`: comments and formatting of everything else are kept,
//! and undo gives back the original bytes.
//!
//! containerd is edited in place, in `config.toml`, not through a drop-in
//! file under `imports`: before containerd 2.0, an imported file replaces the
//! whole `plugins."io.containerd.grpc.v1.cri"` section of the main file
//! (measured with 1.6.20: docs/engines.md#containerd-in-place), which would silently
//! drop settings such as Debian's `cni.bin_dir`. And containerd 1.x drops its
//! built-in `runc` runtime as soon as a config names any runtime, after which
//! the CRI plugin refuses to load (`no corresponding runtime configured in
//! containerd.runtimes for default_runtime_name "runc"`): so a `runc` entry is
//! added too when the config has none, marked so that undo removes it.
//!
//! `doctor` prefers containerd's own view (`containerd config dump`: imports
//! merged, defaults filled) to our reading of one file.

use std::path::{Path, PathBuf};

use toml_edit::{DocumentMut, Item, Table};

use super::check::{Check, Context};
use super::{
    on_path, read_engine_config, wrapper_check, Engine, EngineConfigError, Located, NewText, Profile,
    Registrar, Registration, Site, Way,
};
use crate::names::{rooted, ANNOTATION_GLOB, CONTAINERD_CONFIG, RUNTIME_NAME};

/// The CRI plugin of config version 2 (containerd 1.x; 2.x migrates it).
pub(crate) const CRI_PLUGIN_V2: &str = "io.containerd.grpc.v1.cri";
/// The CRI runtime plugin of config versions 3 (containerd 2.0) and 4
/// (containerd 2.3, which kept the plugin's name and layout:
/// docs/engines.md#containerd-versions).
pub(crate) const CRI_PLUGIN_V3: &str = "io.containerd.cri.v1.runtime";
/// The shim our runtime entry and the added `runc` entry use.
const RUNC_V2: &str = "io.containerd.runc.v2";
/// Marks what setup added to the file, so that undo finds it.
const MARK: &str = "oci-tmpfs-hook setup";

/// The CRI plugin that holds the runtimes in a config of `version`.
pub(crate) fn cri_plugin(version: i64) -> Option<&'static str> {
    match version {
        2 => Some(CRI_PLUGIN_V2),
        3 | 4 => Some(CRI_PLUGIN_V3),
        _ => None,
    }
}

/// containerd's `config.toml`.
pub(crate) struct Containerd;

impl Registrar for Containerd {
    fn profile(&self) -> Profile {
        Profile {
            way: Way::RuntimeWrapper,
            config_flag: "--containerd-config",
            binary: "containerd",
            files: vec![PathBuf::from(CONTAINERD_CONFIG)],
            restart: Some("systemctl restart containerd"),
            reloads: None,
        }
    }

    fn config_file(&self, site: &Site<'_>) -> Result<Located, EngineConfigError> {
        Ok(Located::file(site, CONTAINERD_CONFIG))
    }

    /// Adds our runtime; a marked `runc` entry when the config defines none
    /// (see the module docs); with `default`, `default_runtime_name =
    /// "oci-tmpfs"`, remembering the old value in a comment. A missing file
    /// becomes a minimal `version = 2` one.
    fn add(&self, path: &Path, text: Option<&str>, reg: &Registration<'_>) -> NewText {
        let original = text.unwrap_or("");
        let mut doc = parse(path, original)?;
        let plugin = plugin_of(&mut doc, path, original, true)?;
        let ctd = table_mut(doc.as_table_mut(), &["plugins", plugin, "containerd"], path)?;
        let current_default = match ctd.get("default_runtime_name") {
            None => None,
            Some(item) => Some(
                item.as_str()
                    .ok_or_else(|| EngineConfigError::shape(path, "default_runtime_name is not a string"))?
                    .to_string(),
            ),
        };
        let runtimes = table_mut(ctd, &["runtimes"], path)?;
        if !runtimes.contains_key("runc") && matches!(current_default.as_deref(), None | Some("runc")) {
            runtimes.insert("runc", Item::Table(marked_runc()));
        }
        set_ours(runtimes, reg.wrapper, path, plugin)?;
        if reg.default && current_default.as_deref() != Some(RUNTIME_NAME) {
            set_default(ctd, current_default.as_deref(), path)?;
        }
        Ok(Some(doc.to_string()))
    }

    /// Removes our runtime, the marked `runc` entry, and our default (giving
    /// back the one it replaced). What setup created from nothing goes away.
    fn remove(&self, path: &Path, text: Option<&str>) -> NewText {
        let Some(original) = text else { return Ok(None) };
        let mut doc = parse(path, original)?;
        let plugin = plugin_of(&mut doc, path, original, false)?;
        let Some(ctd) = existing_table(doc.as_table_mut(), &["plugins", plugin, "containerd"]) else {
            return Ok(Some(doc.to_string()));
        };
        if let Some(Item::Table(runtimes)) = ctd.get_mut("runtimes") {
            runtimes.remove(RUNTIME_NAME);
            if matches!(runtimes.get("runc"), Some(Item::Table(t)) if has_mark(t.decor().prefix())) {
                runtimes.remove("runc");
            }
        }
        // A header setup made for default_runtime_name alone goes with it.
        if restore_default(ctd) && ctd.iter().all(|(_, item)| item.is_table()) {
            ctd.set_implicit(true);
        }
        let out = doc.to_string();
        if out.trim() == "version = 2" {
            return Ok(None);
        }
        Ok(Some(out))
    }

    fn notes(&self, path: &Path, text: Option<&str>) -> Vec<String> {
        let Some(imports) = text.and_then(imports) else { return Vec::new() };
        vec![format!(
            "{} imports {imports}: before containerd 2.0 an imported file with its own CRI plugin \
             section replaces this file's whole section, runtimes included; check with \
             `containerd config dump`",
            path.display()
        )]
    }

    fn check(&self, ctx: &Context) -> Vec<Check> {
        check(ctx)
    }
}

fn parse(path: &Path, original: &str) -> Result<DocumentMut, EngineConfigError> {
    original.parse().map_err(|e: toml_edit::TomlError| {
        EngineConfigError::syntax(path, original, e.span().map(|s| s.start), e.message())
    })
}

/// The CRI plugin of the document's config version. A file without a
/// `version` is version 1 when it has plugins (refused), else version 2, which
/// is written into it when `insert`.
fn plugin_of(
    doc: &mut DocumentMut,
    path: &Path,
    original: &str,
    insert: bool,
) -> Result<&'static str, EngineConfigError> {
    let version = match doc.get("version") {
        Some(v) => {
            v.as_integer().ok_or_else(|| EngineConfigError::shape(path, "version is not an integer"))?
        }
        None if doc.get("plugins").is_some() => {
            return Err(EngineConfigError::shape(
                path,
                "has no `version`, so containerd reads it as config version 1 (plugins.cri); \
                 convert it to version 2 (see `containerd config default`) and rerun setup",
            ))
        }
        None => {
            if insert {
                let mut item = toml_edit::value(2);
                if !original.trim().is_empty() {
                    item.as_value_mut().expect("a value").decor_mut().set_suffix("");
                }
                doc.insert("version", item);
            }
            2
        }
    };
    cri_plugin(version).ok_or_else(|| {
        EngineConfigError::shape(
            path,
            format!("config version {version} is not supported (only 2 to 4); register the runtime by hand"),
        )
    })
}

/// The `runc` entry containerd 1.x needs once any runtime is named.
fn marked_runc() -> Table {
    let mut runc = Table::new();
    runc["runtime_type"] = toml_edit::value(RUNC_V2);
    runc.decor_mut().set_prefix(format!(
        "\n# Added by {MARK} (removed by --undo): containerd drops its built-in runc runtime\n\
         # when a config names any runtime, and CRI then fails on default_runtime_name \"runc\".\n"
    ));
    runc
}

/// Adds our runtime, or points an existing one at `wrapper`.
fn set_ours(
    runtimes: &mut Table,
    wrapper: &Path,
    path: &Path,
    plugin: &str,
) -> Result<(), EngineConfigError> {
    let wrapper = wrapper.display().to_string();
    match runtimes.get_mut(RUNTIME_NAME) {
        Some(Item::Table(ours)) => {
            if ours.get("runtime_type").and_then(Item::as_str) != Some(RUNC_V2) {
                ours["runtime_type"] = toml_edit::value(RUNC_V2);
            }
            let options = table_mut(ours, &["options"], path)?;
            if options.get("BinaryName").and_then(Item::as_str) != Some(wrapper.as_str()) {
                options["BinaryName"] = toml_edit::value(wrapper.as_str());
            }
        }
        Some(_) => {
            return Err(EngineConfigError::shape(
                path,
                format!("plugins.\"{plugin}\".containerd.runtimes.{RUNTIME_NAME} is not a table"),
            ))
        }
        None => {
            let mut ours = Table::new();
            ours["runtime_type"] = toml_edit::value(RUNC_V2);
            let globs: toml_edit::Array = [ANNOTATION_GLOB].into_iter().collect();
            ours["pod_annotations"] = toml_edit::value(globs.clone());
            ours["container_annotations"] = toml_edit::value(globs);
            let mut options = Table::new();
            options["BinaryName"] = toml_edit::value(wrapper.as_str());
            ours.insert("options", Item::Table(options));
            runtimes.insert(RUNTIME_NAME, Item::Table(ours));
        }
    }
    Ok(())
}

/// `default_runtime_name = "oci-tmpfs"`, with the value it replaces in a
/// marked comment; only over runc (the wrapper runs runc) or nothing.
fn set_default(ctd: &mut Table, current: Option<&str>, path: &Path) -> Result<(), EngineConfigError> {
    let was = match current {
        None => "unset".to_string(),
        Some("runc") => "\"runc\"".to_string(),
        Some(other) => {
            return Err(EngineConfigError::shape(
                path,
                format!(
                    "default_runtime_name is {other:?}, and the wrapper runs runc (or the host config's \
                     runtime_path), not {other:?}; drop --default or change it yourself"
                ),
            ))
        }
    };
    let mut v = toml_edit::Value::from(RUNTIME_NAME);
    v.decor_mut().set_suffix(format!(" # {MARK} --default; was {was}"));
    ctd.insert("default_runtime_name", Item::Value(v));
    Ok(())
}

/// Undoes [`set_default`]. True when the key is gone (it was unset before).
fn restore_default(ctd: &mut Table) -> bool {
    let name = ctd.get("default_runtime_name");
    if name.and_then(Item::as_str) != Some(RUNTIME_NAME) {
        return false;
    }
    let was = name
        .and_then(Item::as_value)
        .and_then(|v| v.decor().suffix())
        .and_then(|s| s.as_str())
        .and_then(previous_default);
    match was {
        Some(old) => {
            ctd["default_runtime_name"] = toml_edit::value(old);
            false
        }
        None => {
            ctd.remove("default_runtime_name");
            true
        }
    }
}

fn has_mark(raw: Option<&toml_edit::RawString>) -> bool {
    raw.and_then(|r| r.as_str()).is_some_and(|s| s.contains(MARK))
}

/// `"runc"` from a suffix comment `# oci-tmpfs-hook setup --default; was "runc"`;
/// `None` for `was unset` or no mark.
fn previous_default(suffix: &str) -> Option<String> {
    let rest = suffix.split_once(MARK)?.1;
    let was = rest.split_once("was ")?.1.trim();
    let quoted = was.strip_prefix('"')?;
    Some(quoted[..quoted.find('"')?].to_string())
}

/// The table at `keys`, if every step exists and is a table.
fn existing_table<'a>(mut t: &'a mut Table, keys: &[&str]) -> Option<&'a mut Table> {
    for k in keys {
        t = t.get_mut(k)?.as_table_mut()?;
    }
    Some(t)
}

/// The table at `keys`, creating missing steps as implicit tables (no header
/// of their own).
fn table_mut<'a>(
    mut t: &'a mut Table,
    keys: &[&str],
    path: &Path,
) -> Result<&'a mut Table, EngineConfigError> {
    for k in keys {
        let item = t.entry(k).or_insert_with(|| {
            let mut new = Table::new();
            new.set_implicit(true);
            Item::Table(new)
        });
        t = item.as_table_mut().ok_or_else(|| {
            EngineConfigError::shape(path, format!("`{k}` is not a table (inline tables are not edited)"))
        })?;
    }
    Ok(t)
}

/// The non-empty `imports` list of a containerd config, for a warning.
fn imports(text: &str) -> Option<String> {
    let doc: toml::Table = toml::from_str(text).ok()?;
    let list = doc.get("imports")?.as_array()?;
    let names: Vec<&str> = list.iter().filter_map(toml::Value::as_str).collect();
    (!names.is_empty()).then(|| names.join(", "))
}

// ---------------------------------------------------------------------------
// doctor

/// Our runtime is registered, runs this binary, and the default runtime
/// exists (else the CRI plugin does not load).
fn check(ctx: &Context) -> Vec<Check> {
    let engine = Engine::Containerd;
    let what = "containerd";
    let path = rooted(&ctx.root, Path::new(CONTAINERD_CONFIG));
    let text = match read_engine_config(&path) {
        Ok(Some(t)) => t,
        Ok(None) => {
            return vec![Check::problem(what, format!("{} is missing", path.display()), engine.setup_fix())]
        }
        Err(e) => return vec![Check::problem(what, crate::error::chain(&e), engine.setup_fix())],
    };
    let mut checks = Vec::new();
    let (text, source) = effective(ctx, &path, text, &mut checks);
    let doc: toml::Table = match toml::from_str(&text) {
        Ok(v) => v,
        Err(e) => {
            let msg = format!("{}: invalid TOML: {}", source.display(), e.message());
            return vec![Check::problem(what, msg, "fix the file")];
        }
    };
    let version = doc.get("version").and_then(toml::Value::as_integer);
    let Some(plugin) = version.and_then(cri_plugin) else {
        return vec![Check::problem(
            what,
            format!("{}: config version {version:?} is not 2, 3 or 4", source.display()),
            "convert the config to version 2 (containerd 1.x), 3 (containerd 2.0-2.2) or 4 (2.3 and later)",
        )];
    };
    let ctd = doc.get("plugins").and_then(|p| p.get(plugin)).and_then(|c| c.get("containerd"));
    checks.push(runtime_check(ctx, &source, plugin, ctd));
    checks.extend(default_check(&source, plugin, ctd));
    checks
}

/// The config as containerd merges it (`config dump`), with where it came
/// from; the file itself under `--root`, where the binary on PATH is not the
/// one that will read it, or when the dump fails (a problem is added then).
fn effective(ctx: &Context, path: &Path, text: String, checks: &mut Vec<Check>) -> (String, PathBuf) {
    let bin = if ctx.search_path { on_path("containerd") } else { None };
    let Some(bin) = bin else { return (text, path.to_path_buf()) };
    match dump(&bin, path) {
        Ok(dump) => {
            (dump, PathBuf::from(format!("{} (as `containerd config dump` merges it)", path.display())))
        }
        Err(why) => {
            checks.push(Check::problem(
                "containerd",
                format!("`containerd --config {} config dump` fails: {why}", path.display()),
                "fix the config until `containerd config dump` accepts it",
            ));
            (text, path.to_path_buf())
        }
    }
}

fn runtime_check(ctx: &Context, source: &Path, plugin: &str, ctd: Option<&toml::Value>) -> Check {
    let engine = Engine::Containerd;
    let ours = ctd.and_then(|c| c.get("runtimes")).and_then(|r| r.get(RUNTIME_NAME));
    let Some(rt) = ours else {
        return Check::problem(
            "containerd",
            format!("{} has no plugins.\"{plugin}\".containerd.runtimes.{RUNTIME_NAME}", source.display()),
            engine.setup_fix(),
        );
    };
    let rtype = rt.get("runtime_type").and_then(toml::Value::as_str);
    let binary = rt.get("options").and_then(|o| o.get("BinaryName")).and_then(toml::Value::as_str);
    match (rtype, binary) {
        (Some(RUNC_V2), Some(b)) => wrapper_check(engine, ctx, source, b),
        _ => Check::problem(
            "containerd",
            format!(
                "{}: runtime {RUNTIME_NAME} needs runtime_type = \"{RUNC_V2}\" and options.BinaryName",
                source.display()
            ),
            engine.setup_fix(),
        ),
    }
}

fn default_check(source: &Path, plugin: &str, ctd: Option<&toml::Value>) -> Option<Check> {
    let runtimes = ctd.and_then(|c| c.get("runtimes")).and_then(toml::Value::as_table)?;
    let default =
        ctd.and_then(|c| c.get("default_runtime_name")).and_then(toml::Value::as_str).unwrap_or("runc");
    if runtimes.contains_key(default) {
        return None;
    }
    Some(Check::problem(
        "containerd",
        format!(
            "{}: default_runtime_name {default:?} is not among the configured runtimes, so the CRI plugin \
             will not load",
            source.display()
        ),
        format!(
            "add [plugins.\"{plugin}\".containerd.runtimes.{default}] or {}",
            Engine::Containerd.setup_fix()
        ),
    ))
}

/// `containerd --config PATH config dump`, bounded to ten seconds. Its
/// output is read while it runs, so a dump larger than a pipe's buffer does
/// not stall it.
fn dump(bin: &Path, config: &Path) -> Result<String, String> {
    use std::io::Read;
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};
    let mut child = Command::new(bin)
        .arg("--config")
        .arg(config)
        .args(["config", "dump"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| e.to_string())?;
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_end(&mut buf);
            }
            buf
        })
    };
    let stdout = drain(child.stdout.take().map(|p| Box::new(p) as Box<dyn Read + Send>));
    let stderr = drain(child.stderr.take().map(|p| Box::new(p) as Box<dyn Read + Send>));
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return Err("timed out".into());
            }
        }
    };
    let out = stdout.join().unwrap_or_default();
    if !status.success() {
        let err = stderr.join().unwrap_or_default();
        let err = String::from_utf8_lossy(&err);
        return Err(err.lines().last().unwrap_or("failed").trim().to_string());
    }
    String::from_utf8(out).map_err(|_| "not UTF-8".into())
}

/// containerd's default gRPC socket (`[grpc] address`), where its CRI is served.
pub(crate) const DEFAULT_GRPC_ADDRESS: &str = "/run/containerd/containerd.sock";

/// The socket a containerd on config `text` serves its CRI on: `[grpc]
/// address` (the same key in config versions 2 and 3), else the default.
pub(crate) fn grpc_address(text: &str) -> PathBuf {
    let doc: Option<toml::Table> = toml::from_str(text).ok();
    let address = doc.as_ref().and_then(|d| d.get("grpc")).and_then(|g| g.get("address"));
    PathBuf::from(address.and_then(toml::Value::as_str).unwrap_or(DEFAULT_GRPC_ADDRESS))
}

/// Whether a running containerd has loaded our runtime with `wrapper`, from
/// its CRI `Status`: `info["config"]` is the CRI plugin's config as loaded,
/// as JSON (`containerd.runtimes.NAME.options.BinaryName`, containerd 1.6
/// and 2.x); without it, the runtime handler list (CRI v1.30+).
pub(crate) fn cri_has_runtime(config: Option<&str>, handlers: &[String], wrapper: &Path) -> bool {
    let config: Option<serde_json::Value> = config.and_then(|c| serde_json::from_str(c).ok());
    match config.as_ref().and_then(|c| c.pointer("/containerd/runtimes")) {
        Some(runtimes) => {
            let binary = runtimes.get(RUNTIME_NAME).and_then(|r| r.pointer("/options/BinaryName"));
            binary.and_then(serde_json::Value::as_str) == wrapper.to_str()
        }
        None => handlers.iter().any(|h| h == RUNTIME_NAME),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WRAPPER: &str = "/usr/local/bin/oci-tmpfs-runtime";

    fn ctd(text: Option<&str>, default: bool, undo: bool) -> Result<Option<String>, EngineConfigError> {
        super::super::new_text(&Containerd, "/etc/containerd/config.toml", text, WRAPPER, default, undo)
    }

    #[test]
    fn plugin_by_version() {
        assert_eq!(cri_plugin(2), Some("io.containerd.grpc.v1.cri"));
        assert_eq!(cri_plugin(3), Some("io.containerd.cri.v1.runtime"));
        assert_eq!(cri_plugin(4), Some("io.containerd.cri.v1.runtime"));
        assert_eq!(cri_plugin(1), None);
        assert_eq!(cri_plugin(5), None);
    }

    #[test]
    fn imports_are_noted() {
        let notes =
            Containerd.notes(Path::new("/c.toml"), Some("version = 2\nimports = [\"/etc/x.toml\"]\n"));
        assert!(notes.len() == 1 && notes[0].starts_with("/c.toml imports /etc/x.toml: "), "{notes:?}");
        assert!(Containerd.notes(Path::new("/c.toml"), Some("version = 2\n")).is_empty());
    }

    const DEBIAN: &str = r#"version = 2

[plugins]
  [plugins."io.containerd.grpc.v1.cri"]
    [plugins."io.containerd.grpc.v1.cri".cni]
      bin_dir = "/usr/lib/cni"
      conf_dir = "/etc/cni/net.d"
  [plugins."io.containerd.internal.v1.opt"]
    path = "/var/lib/containerd/opt"
"#;

    #[test]
    fn containerd_debian_config_exact_idempotent_undo() {
        let out = ctd(Some(DEBIAN), false, false).unwrap().unwrap();
        assert_eq!(
            out,
            r#"version = 2

[plugins]
  [plugins."io.containerd.grpc.v1.cri"]
    [plugins."io.containerd.grpc.v1.cri".cni]
      bin_dir = "/usr/lib/cni"
      conf_dir = "/etc/cni/net.d"

# Added by oci-tmpfs-hook setup (removed by --undo): containerd drops its built-in runc runtime
# when a config names any runtime, and CRI then fails on default_runtime_name "runc".
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
runtime_type = "io.containerd.runc.v2"

[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.oci-tmpfs]
runtime_type = "io.containerd.runc.v2"
pod_annotations = ["oci-tmpfs-hook/*"]
container_annotations = ["oci-tmpfs-hook/*"]

[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.oci-tmpfs.options]
BinaryName = "/usr/local/bin/oci-tmpfs-runtime"
  [plugins."io.containerd.internal.v1.opt"]
    path = "/var/lib/containerd/opt"
"#
        );
        assert_eq!(ctd(Some(&out), false, false).unwrap().unwrap(), out, "idempotent");
        assert_eq!(ctd(Some(&out), false, true).unwrap().unwrap(), DEBIAN, "undo restores the bytes");
    }

    #[test]
    fn containerd_default_and_undo() {
        let out = ctd(Some(DEBIAN), true, false).unwrap().unwrap();
        assert!(
            out.contains(
                "[plugins.\"io.containerd.grpc.v1.cri\".containerd]\ndefault_runtime_name = \"oci-tmpfs\" # oci-tmpfs-hook setup --default; was unset\n"
            ),
            "{out}"
        );
        assert_eq!(ctd(Some(&out), true, false).unwrap().unwrap(), out, "idempotent");
        assert_eq!(ctd(Some(&out), false, true).unwrap().unwrap(), DEBIAN);

        let with_runc = "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".containerd]\n  default_runtime_name = \"runc\" # mine\n  snapshotter = \"overlayfs\"\n";
        let out = ctd(Some(with_runc), true, false).unwrap().unwrap();
        assert!(
            out.contains(
                "default_runtime_name = \"oci-tmpfs\" # oci-tmpfs-hook setup --default; was \"runc\"\n"
            ),
            "{out}"
        );
        let undone = ctd(Some(&out), false, true).unwrap().unwrap();
        let v: toml::Table = toml::from_str(&undone).unwrap();
        assert_eq!(v, toml::from_str::<toml::Table>(with_runc).unwrap());

        let other = "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".containerd]\ndefault_runtime_name = \"kata\"\n";
        assert!(ctd(Some(other), true, false).unwrap_err().to_string().contains("\"kata\""));
        let kept = ctd(Some(other), false, false).unwrap().unwrap();
        assert!(!kept.contains("runtimes.runc]"), "runc is not added when the default is another runtime");
    }

    #[test]
    fn containerd_missing_file_and_comments_kept() {
        let out = ctd(None, false, false).unwrap().unwrap();
        assert!(out.starts_with("version = 2\n"), "{out}");
        let v: toml::Table = toml::from_str(&out).unwrap();
        let rt = &v["plugins"]["io.containerd.grpc.v1.cri"]["containerd"]["runtimes"];
        assert_eq!(rt["oci-tmpfs"]["options"]["BinaryName"].as_str(), Some(WRAPPER));
        assert_eq!(rt["runc"]["runtime_type"].as_str(), Some("io.containerd.runc.v2"));
        assert_eq!(ctd(None, false, true).unwrap(), None);
        assert_eq!(ctd(Some(&out), false, true).unwrap(), None, "undo of a file setup created removes it");

        let commented =
            "# my containerd\nversion = 2 # two\n\n# grpc\n[grpc]\n  address = \"/run/c.sock\" # sock\n";
        let out = ctd(Some(commented), false, false).unwrap().unwrap();
        assert!(out.starts_with(commented), "{out}");
        assert_eq!(ctd(Some(&out), false, true).unwrap().unwrap(), commented);
    }

    #[test]
    fn containerd_v3_and_unversioned() {
        let v3 = "version = 3\n";
        let out = ctd(Some(v3), true, false).unwrap().unwrap();
        let v: toml::Table = toml::from_str(&out).unwrap();
        let c = &v["plugins"]["io.containerd.cri.v1.runtime"]["containerd"];
        assert_eq!(c["runtimes"]["oci-tmpfs"]["options"]["BinaryName"].as_str(), Some(WRAPPER));
        assert_eq!(c["default_runtime_name"].as_str(), Some("oci-tmpfs"));
        assert_eq!(ctd(Some(&out), false, true).unwrap().unwrap(), v3);

        let only_root = "root = \"/var/lib/containerd\"\n";
        let out = ctd(Some(only_root), false, false).unwrap().unwrap();
        assert!(out.starts_with("root = \"/var/lib/containerd\"\nversion = 2\n"), "{out}");

        let v1 = "[plugins.cri]\n  sandbox_image = \"x\"\n";
        assert!(ctd(Some(v1), false, false).unwrap_err().to_string().contains("version 1"));
        // Version 4 (containerd 2.3) keeps version 3's CRI runtime plugin.
        let v4 = ctd(Some("version = 4\n"), false, false).unwrap().unwrap();
        let v: toml::Table = toml::from_str(&v4).unwrap();
        let c = &v["plugins"]["io.containerd.cri.v1.runtime"]["containerd"];
        assert_eq!(c["runtimes"]["oci-tmpfs"]["options"]["BinaryName"].as_str(), Some(WRAPPER));
        assert!(ctd(Some("version = 5\n"), false, false).unwrap_err().to_string().contains("version 5"));
    }

    #[test]
    fn containerd_updates_stale_binary() {
        let old = "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.oci-tmpfs]\n  runtime_type = \"io.containerd.runc.v2\"\n  [plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.oci-tmpfs.options]\n    BinaryName = \"/opt/old\"\n    SystemdCgroup = true\n[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc]\n  runtime_type = \"io.containerd.runc.v2\"\n";
        let out = ctd(Some(old), false, false).unwrap().unwrap();
        assert_eq!(out, old.replace("/opt/old", WRAPPER));
    }

    #[test]
    fn containerd_malformed_is_refused_with_line() {
        let bad = "version = 2\n\n[plugins\n";
        match ctd(Some(bad), false, false) {
            Err(e @ EngineConfigError::Syntax { line: 3, .. }) => {
                assert!(!e.to_string().contains('\n'), "{e}")
            }
            other => panic!("{other:?}"),
        }
        let dup = "version = 2\n[grpc]\na = 1\na = 2\n";
        let err = ctd(Some(dup), false, false).unwrap_err().to_string();
        assert!(err.contains("line 4"), "{err}");
        assert!(!err.contains('\n'), "{err}");
        let shape = "version = 2\nplugins = 1\n";
        assert!(matches!(ctd(Some(shape), false, false), Err(EngineConfigError::Shape { .. })));
    }

    #[test]
    fn grpc_address_and_loaded_runtime() {
        assert_eq!(grpc_address("version = 2\n"), Path::new(DEFAULT_GRPC_ADDRESS));
        assert_eq!(grpc_address("version = 3\n[grpc]\naddress = '/x/c.sock'\n"), Path::new("/x/c.sock"));
        assert_eq!(grpc_address("not toml ["), Path::new(DEFAULT_GRPC_ADDRESS));
        let w = Path::new(WRAPPER);
        let ours = format!(
            r#"{{"containerd":{{"runtimes":{{"oci-tmpfs":{{"options":{{"BinaryName":"{WRAPPER}"}}}}}}}}}}"#
        );
        assert!(cri_has_runtime(Some(&ours), &[], w));
        assert!(!cri_has_runtime(Some(&ours), &[], Path::new("/opt/other")));
        let runc_only = r#"{"containerd":{"runtimes":{"runc":{}}}}"#;
        assert!(!cri_has_runtime(Some(runc_only), &["oci-tmpfs".into()], w), "the config wins");
        assert!(cri_has_runtime(None, &["runc".into(), "oci-tmpfs".into()], w));
        assert!(!cri_has_runtime(None, &["runc".into()], w));
    }
}
