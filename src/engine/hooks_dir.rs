//! Podman and CRI-O: engines that run hooks from an oci-hooks(5) dir. Setup
//! writes one file of its own there, `oci-tmpfs-hook.json`, rendered from
//! code so that the installed copies and the template in `hooks/` cannot
//! drift apart; undo removes it. Podman reads its hooks dirs at every
//! container start; CRI-O reads `[crio.runtime] hooks_dir` from its config
//! files at start-up, so the dir is looked up there, and watches those dirs:
//! a new or removed hooks file needs no restart (docs/design.md#crio-hooks-watch).
//!
//! Only rendering, choosing the dir and checking here: the write is
//! [`super::change`]'s.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::check::{Check, Context};
use super::{
    read_engine_config, Engine, EngineConfigError, Located, NewText, Profile, Registrar, Registration, Site,
    Way,
};
use crate::names::{
    hook_argv, rooted, CONTAINERS_CONF, CRIO_CONF, CRIO_CONF_D, ETC_HOOKS_DIR, HOOKS_DIR, HOOK_FILE,
    HOOK_PATH_ENV,
};
use crate::stage::Stage;

/// The oci-hooks(5) file (schema 1.0.0) that Podman and CRI-O read from their
/// hooks dir: always run at `prestart` (the binary decides, as oci-hooks
/// cannot match on `root.readonly`), with a fixed `PATH` only.
pub fn oci_hooks_json(binary: &Path) -> Value {
    oci_hooks_json_at(binary, Stage::Prestart)
}

/// [`oci_hooks_json`] registered at `stage`: `createContainer` runs after
/// every createRuntime hook, a GPU vendor's included (docs/gpu.md).
pub fn oci_hooks_json_at(binary: &Path, stage: Stage) -> Value {
    json!({
        "version": "1.0.0",
        "hook": {
            "path": binary.display().to_string(),
            "args": hook_argv(stage, None),
            "env": [HOOK_PATH_ENV],
        },
        "when": { "always": true },
        "stages": [stage.as_str()],
    })
}

/// The text of the oci-hooks(5) file for `binary` at `stage`.
pub(crate) fn hooks_json(binary: &Path, stage: Stage) -> String {
    let mut text = serde_json::to_string_pretty(&oci_hooks_json_at(binary, stage)).expect("serialising JSON");
    text.push('\n');
    text
}

/// Podman: the hook JSON in its default hooks dir (it also reads
/// `/etc/containers/oci/hooks.d`).
pub(crate) struct Podman;

/// CRI-O: the hook JSON in the first dir of its `hooks_dir`.
pub(crate) struct Crio;

/// Why CRI-O needs no restart after setup.
const CRIO_RELOADS: &str = "CRI-O watches its hooks dirs and loads the change";

impl Registrar for Podman {
    fn profile(&self) -> Profile {
        let ours = [HOOKS_DIR, ETC_HOOKS_DIR].map(|d| Path::new(d).join(HOOK_FILE));
        Profile {
            way: Way::HooksDir,
            config_flag: "--hooks-dir",
            binary: "podman",
            files: ours.into_iter().chain([PathBuf::from(CONTAINERS_CONF)]).collect(),
            // Podman reads its hooks dirs at every container start.
            restart: None,
            reloads: None,
        }
    }

    fn config_file(&self, site: &Site<'_>) -> Result<Located, EngineConfigError> {
        let why = format!("Podman's default hooks dir; {ETC_HOOKS_DIR} works too (--hooks-dir)");
        Ok(given(site).unwrap_or_else(|| in_dir(rooted(site.root, Path::new(HOOKS_DIR)), &why)))
    }

    fn add(&self, _: &Path, _: Option<&str>, reg: &Registration<'_>) -> NewText {
        Ok(Some(hooks_json(reg.hook, reg.stage)))
    }

    fn remove(&self, _: &Path, _: Option<&str>) -> NewText {
        Ok(None)
    }

    fn check(&self, ctx: &Context) -> Vec<Check> {
        let dirs = [HOOKS_DIR, ETC_HOOKS_DIR].map(|d| rooted(&ctx.root, Path::new(d)));
        vec![hooks_dir_check(Engine::Podman, ctx, &dirs, "Podman's hooks dirs")]
    }
}

impl Registrar for Crio {
    fn profile(&self) -> Profile {
        Profile {
            way: Way::HooksDir,
            config_flag: "--hooks-dir",
            binary: "crio",
            files: vec![PathBuf::from(CRIO_CONF), PathBuf::from(CRIO_CONF_D)],
            restart: None,
            reloads: Some(CRIO_RELOADS),
        }
    }

    fn config_file(&self, site: &Site<'_>) -> Result<Located, EngineConfigError> {
        if let Some(located) = given(site) {
            return Ok(located);
        }
        let (dir, why) = crio_dir_and_why(site.root, crio_hooks_dir(&crio_config_files(site.root)?)?);
        Ok(in_dir(dir, why))
    }

    fn add(&self, path: &Path, text: Option<&str>, reg: &Registration<'_>) -> NewText {
        Podman.add(path, text, reg)
    }

    fn remove(&self, path: &Path, text: Option<&str>) -> NewText {
        Podman.remove(path, text)
    }

    fn check(&self, ctx: &Context) -> Vec<Check> {
        let engine = Engine::Crio;
        let read = crio_config_files(&ctx.root)
            .and_then(|files| Ok((crio_hooks_dir(&files)?, crio_read_only(&files)?)));
        match read {
            Ok((d, read_only)) => {
                let (dir, why) = crio_dir_and_why(&ctx.root, d);
                let mut checks = vec![hooks_dir_check(engine, ctx, &[dir], why)];
                if read_only {
                    // Not a problem of ours: what containers get, said once.
                    checks.push(Check::ok(
                        &engine.to_string(),
                        "read_only = true: every container gets CRI-O's own /tmp, /var/tmp and /run \
                         (noexec, no size), which the hook leaves; torch.compile there needs \
                         TORCHINDUCTOR_CACHE_DIR in a cache of ours (docs/engines.md#cri-o-read-only)",
                    ));
                }
                checks
            }
            Err(e) => {
                vec![Check::problem(&engine.to_string(), crate::error::chain(&e), "fix CRI-O's config")]
            }
        }
    }
}

/// CRI-O's hooks dir under `root` (the one its config names, else its
/// default) and which of the two it is.
fn crio_dir_and_why(root: &Path, configured: Option<PathBuf>) -> (PathBuf, &'static str) {
    match configured {
        Some(dir) => (rooted(root, &dir), "CRI-O's hooks_dir"),
        None => (rooted(root, Path::new(HOOKS_DIR)), "CRI-O's default hooks_dir"),
    }
}

/// The hook file in `--hooks-dir`, when given.
fn given(site: &Site<'_>) -> Option<Located> {
    site.config.map(|dir| in_dir(dir.to_path_buf(), "from --hooks-dir"))
}

/// The hook file in `dir`, chosen because of `why`.
fn in_dir(dir: PathBuf, why: &str) -> Located {
    Located { note: Some(format!("hooks dir {} ({why})", dir.display())), path: dir.join(HOOK_FILE) }
}

/// CRI-O's config files under `root`, in reading order (main file, then the
/// drop-ins sorted).
///
/// # Errors
/// An unreadable file.
pub(crate) fn crio_config_files(root: &Path) -> Result<Vec<(PathBuf, String)>, EngineConfigError> {
    let mut files = Vec::new();
    let main = rooted(root, Path::new(CRIO_CONF));
    if let Some(text) = read_engine_config(&main)? {
        files.push((main, text));
    }
    let dir = rooted(root, Path::new(CRIO_CONF_D));
    let mut dropins: Vec<PathBuf> = match std::fs::read_dir(&dir) {
        Ok(entries) => entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "conf"))
            .collect(),
        Err(_) => Vec::new(),
    };
    dropins.sort();
    for p in dropins {
        if let Some(text) = read_engine_config(&p)? {
            files.push((p, text));
        }
    }
    Ok(files)
}

/// CRI-O's `[crio.runtime] hooks_dir` (first entry) from its config files,
/// given in the order CRI-O reads them; the last file that sets it wins.
///
/// # Errors
/// A file that is not valid TOML, or a `hooks_dir` that is not a list of strings.
pub(crate) fn crio_hooks_dir(files: &[(PathBuf, String)]) -> Result<Option<PathBuf>, EngineConfigError> {
    let Some((path, dirs)) = crio_runtime_key(files, "hooks_dir")? else {
        return Ok(None);
    };
    let list = dirs.as_array().ok_or_else(|| EngineConfigError::shape(path, "hooks_dir is not a list"))?;
    let first = list
        .iter()
        .map(|d| d.as_str().ok_or_else(|| EngineConfigError::shape(path, "hooks_dir holds a non-string")))
        .next()
        .transpose()?;
    Ok(first.map(PathBuf::from))
}

/// CRI-O's `[crio.runtime] read_only` (false when unset): every container's
/// root read-only, with CRI-O's own tmpfs at `/run`, `/tmp` and `/var/tmp`.
///
/// # Errors
/// As [`crio_hooks_dir`]; a `read_only` that is not a boolean.
pub(crate) fn crio_read_only(files: &[(PathBuf, String)]) -> Result<bool, EngineConfigError> {
    match crio_runtime_key(files, "read_only")? {
        None => Ok(false),
        Some((path, v)) => {
            v.as_bool().ok_or_else(|| EngineConfigError::shape(path, "read_only is not a boolean"))
        }
    }
}

/// The value of `[crio.runtime] KEY` in the last of `files` that sets it,
/// with that file.
fn crio_runtime_key<'a>(
    files: &'a [(PathBuf, String)],
    key: &str,
) -> Result<Option<(&'a Path, toml::Value)>, EngineConfigError> {
    let mut found = None;
    for (path, text) in files {
        let doc: toml::Table = toml::from_str(text)
            .map_err(|e| EngineConfigError::syntax(path, text, e.span().map(|s| s.start), e.message()))?;
        if let Some(v) = doc.get("crio").and_then(|c| c.get("runtime")).and_then(|r| r.get(key)) {
            found = Some((path.as_path(), v.clone()));
        }
    }
    Ok(found)
}

/// The hook JSON in the first of `dirs` that has it: valid, at prestart for
/// every container, running this binary. `dirs_are` names the dirs (the
/// engine's default, or the one its config sets) in the report.
fn hooks_dir_check(engine: Engine, ctx: &Context, dirs: &[PathBuf], dirs_are: &str) -> Check {
    let what = &engine.to_string();
    let Some(path) = dirs.iter().map(|d| d.join(HOOK_FILE)).find(|p| p.exists()) else {
        let names: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
        return Check::problem(
            what,
            format!("no {HOOK_FILE} in {} ({dirs_are})", names.join(" or ")),
            engine.setup_fix(),
        );
    };
    let text = match read_engine_config(&path) {
        Ok(Some(t)) => t,
        Ok(None) => return Check::problem(what, format!("{} vanished", path.display()), engine.setup_fix()),
        Err(e) => return Check::problem(what, crate::error::chain(&e), engine.setup_fix()),
    };
    let doc: Value = match serde_json::from_str(&text) {
        Ok(v) => v,
        Err(e) => {
            return Check::problem(what, format!("{}: invalid JSON: {e}", path.display()), engine.setup_fix())
        }
    };
    let hook_path = doc.pointer("/hook/path").and_then(Value::as_str).unwrap_or("");
    let stages = [Stage::Prestart, Stage::CreateRuntime, Stage::CreateContainer];
    let Some(stage) = stages.into_iter().find(|s| doc == oci_hooks_json_at(Path::new(hook_path), *s)) else {
        return Check::problem(
            what,
            format!("{} differs from what setup writes (stage, args, env or when)", path.display()),
            engine.setup_fix(),
        );
    };
    match ctx.is_this_binary(Path::new(hook_path)) {
        Ok(()) => Check::ok(what, format!("{} ({dirs_are}) runs this binary at {stage}", path.display())),
        Err(why) => Check::problem(what, format!("{}: {why}", path.display()), engine.setup_fix()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOOK: &str = "/usr/local/bin/oci-tmpfs-hook";

    #[test]
    fn template_in_hooks_dir_is_the_rendering() {
        let file: Value = serde_json::from_str(include_str!("../../hooks/oci-tmpfs-hook.json"))
            .expect("hooks/oci-tmpfs-hook.json");
        assert_eq!(file, oci_hooks_json(Path::new("/usr/local/bin/oci-tmpfs-hook")));
        // Same text too, key order included: the file is what `setup` writes.
        let mut text = serde_json::to_string_pretty(&file).unwrap();
        text.push('\n');
        assert_eq!(include_str!("../../hooks/oci-tmpfs-hook.json"), text);
    }

    #[test]
    fn points_at_the_binary() {
        let v = oci_hooks_json(Path::new("/opt/bin/oci-tmpfs-hook"));
        assert_eq!(v["hook"]["path"], "/opt/bin/oci-tmpfs-hook");
        assert_eq!(v["stages"], json!(["prestart"]));
    }

    #[test]
    fn a_stage_of_choice_is_in_the_args_and_the_stages() {
        let v = oci_hooks_json_at(Path::new(HOOK), Stage::CreateContainer);
        assert_eq!(v["stages"], json!(["createContainer"]));
        assert_eq!(v["hook"]["args"], json!(["oci-tmpfs-hook", "hook", "--stage", "createContainer"]));
    }

    #[test]
    fn hooks_json_exact() {
        assert_eq!(
            hooks_json(Path::new(HOOK), Stage::Prestart),
            r#"{
  "version": "1.0.0",
  "hook": {
    "path": "/usr/local/bin/oci-tmpfs-hook",
    "args": [
      "oci-tmpfs-hook",
      "hook",
      "--stage",
      "prestart"
    ],
    "env": [
      "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    ]
  },
  "when": {
    "always": true
  },
  "stages": [
    "prestart"
  ]
}
"#
        );
    }

    #[test]
    fn crio_hooks_dir_last_file_wins() {
        let files = vec![
            (
                PathBuf::from("/etc/crio/crio.conf"),
                "[crio.runtime]\nhooks_dir = [\"/a\", \"/b\"]\n".to_string(),
            ),
            (
                PathBuf::from("/etc/crio/crio.conf.d/10.conf"),
                "[crio.image]\npause_image = \"x\"\n".to_string(),
            ),
        ];
        assert_eq!(crio_hooks_dir(&files).unwrap(), Some(PathBuf::from("/a")));
        let mut more = files.clone();
        more.push((
            PathBuf::from("/etc/crio/crio.conf.d/20.conf"),
            "[crio.runtime]\nhooks_dir = [\"/c\"]\n".into(),
        ));
        assert_eq!(crio_hooks_dir(&more).unwrap(), Some(PathBuf::from("/c")));
        assert_eq!(crio_hooks_dir(&[]).unwrap(), None);
        let bad = vec![(PathBuf::from("/etc/crio/crio.conf"), "[crio.runtime\n".to_string())];
        assert!(matches!(crio_hooks_dir(&bad), Err(EngineConfigError::Syntax { line: 1, .. })));
    }

    #[test]
    fn crio_read_only_is_read_and_doctor_says_what_it_means() {
        let file = |name: &str, text: &str| (PathBuf::from(name), text.to_string());
        let base = file("/etc/crio/crio.conf", "[crio.runtime]\nread_only = true\n");
        assert!(!crio_read_only(&[]).unwrap(), "unset: false");
        assert!(crio_read_only(std::slice::from_ref(&base)).unwrap());
        let off = file("/etc/crio/crio.conf.d/20.conf", "[crio.runtime]\nread_only = false\n");
        assert!(!crio_read_only(&[base.clone(), off]).unwrap(), "the last file that sets it wins");
        let bad = file("/etc/crio/crio.conf.d/30.conf", "[crio.runtime]\nread_only = \"yes\"\n");
        assert!(matches!(crio_read_only(&[base, bad]), Err(EngineConfigError::Shape { .. })));

        let root = std::env::temp_dir().join(format!("oth-crio-ro-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("etc/crio/crio.conf.d")).unwrap();
        let ctx = Context {
            root: root.clone(),
            binary: PathBuf::from("/nonexistent"),
            config: crate::input::HostConfigSource::new(None, &root),
            search_path: false,
        };
        let said = |ctx: &Context| Crio.check(ctx).iter().map(Check::line).collect::<Vec<_>>();
        assert!(!said(&ctx).iter().any(|l| l.contains("read_only")), "{:?}", said(&ctx));
        std::fs::write(root.join("etc/crio/crio.conf.d/50-ro.conf"), "[crio.runtime]\nread_only = true\n")
            .unwrap();
        let lines = said(&ctx);
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(
            lines[1].starts_with("ok       crio: read_only = true: every container gets CRI-O's own /tmp")
        );
        assert!(lines[1].contains("docs/engines.md#cri-o-read-only"), "{lines:?}");
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn crio_needs_no_restart_and_doctor_names_the_dir_it_checked() {
        assert_eq!(Engine::Crio.restart_command(), None);
        assert_eq!(
            Engine::Crio.after_change().as_deref(),
            Some("crio: no restart needed: CRI-O watches its hooks dirs and loads the change")
        );
        assert_eq!(Engine::Crio.setup_fix(), "oci-tmpfs-hook setup crio");
        assert_eq!(Engine::Podman.after_change(), None);
        let root = std::env::temp_dir().join(format!("oth-crio-doctor-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("etc/crio")).unwrap();
        std::fs::write(root.join("etc/crio/crio.conf"), "[crio]\n").unwrap();
        let config = crate::input::HostConfigSource { path: root.join("config.toml"), explicit: false };
        let ctx = Context { root: root.clone(), binary: PathBuf::from("/x"), config, search_path: false };
        let lines: Vec<String> = Crio.check(&ctx).iter().map(Check::line).collect();
        let default = root.join("usr/share/containers/oci/hooks.d");
        assert_eq!(
            lines,
            [format!(
                "problem  crio: no oci-tmpfs-hook.json in {} (CRI-O's default hooks_dir); fix: oci-tmpfs-hook setup crio",
                default.display()
            )]
        );
        std::fs::write(root.join("etc/crio/crio.conf"), "[crio.runtime]\nhooks_dir = [\"/h\"]\n").unwrap();
        let lines: Vec<String> = Crio.check(&ctx).iter().map(Check::line).collect();
        assert!(lines[0].contains(&format!("{} (CRI-O's hooks_dir)", root.join("h").display())), "{lines:?}");
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn hooks_dir_choice() {
        let root = std::env::temp_dir().join(format!("oth-hooks-dir-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("etc/crio/crio.conf.d")).unwrap();
        let site = Site { root: &root, config: None };
        let podman = Podman.config_file(&site).unwrap();
        assert_eq!(podman.path, root.join("usr/share/containers/oci/hooks.d/oci-tmpfs-hook.json"));
        assert_eq!(Crio.config_file(&site).unwrap().path, podman.path, "CRI-O's default");
        std::fs::write(
            root.join("etc/crio/crio.conf.d/50-hooks.conf"),
            "[crio.runtime]\nhooks_dir = [\"/etc/hooks\"]\n",
        )
        .unwrap();
        assert_eq!(Crio.config_file(&site).unwrap().path, root.join("etc/hooks/oci-tmpfs-hook.json"));
        let given = Site { root: &root, config: Some(Path::new("/custom")) };
        let located = Crio.config_file(&given).unwrap();
        assert_eq!(located.path, Path::new("/custom/oci-tmpfs-hook.json"));
        assert_eq!(located.note.as_deref(), Some("hooks dir /custom (from --hooks-dir)"));
        std::fs::remove_dir_all(&root).unwrap();
    }
}
