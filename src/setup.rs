//! `setup`: registering the hook with an engine. Podman and CRI-O get an
//! oci-hooks(5) JSON file in their hooks dir; Docker gets a `runtimes` entry in
//! `daemon.json`; containerd gets a runtime in its CRI plugin config whose
//! `BinaryName` is the wrapper (`oci-tmpfs-runtime`, a second name of this
//! binary).
//!
//! The edits are pure functions from the file's text to the new text
//! ([`hooks_json`], [`edit_daemon_json`], [`edit_containerd`]): they keep every
//! key, its order, and (TOML) comments and formatting, and they are
//! idempotent. [`plan`] reads the files and calls them; [`apply`] writes the
//! result atomically (temporary file + rename, mode and owner kept) after
//! backing up a file it changes. Nothing here restarts a daemon.
//!
//! containerd is edited in place, in `config.toml`, not through a drop-in
//! file under `imports`: before containerd 2.0, an imported file replaces the
//! whole `plugins."io.containerd.grpc.v1.cri"` section of the main file
//! (containerd issue 5837, changed in 2.0 by PR 9982), which would silently
//! drop settings such as Debian's `cni.bin_dir`. And containerd 1.x drops its
//! built-in `runc` runtime as soon as a config names any runtime, after which
//! the CRI plugin refuses to load (`no corresponding runtime configured in
//! containerd.runtimes for default_runtime_name "runc"`): so a `runc` entry is
//! added too when the config has none, marked so that `--undo` removes it.

use std::fmt::Write as _;
use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

pub use crate::names::{ANNOTATION_GLOB, HOOK_FILE, RUNTIME_NAME, WRAPPER_NAME};

/// Suffix of the backup written before a config file is changed.
pub const BACKUP_SUFFIX: &str = ".bak-oci-tmpfs-hook";
/// Podman's and CRI-O's default hooks dir.
pub const HOOKS_DIR: &str = "/usr/share/containers/oci/hooks.d";
/// The hooks dir for the administrator's own hooks (Podman reads it too).
pub const ETC_HOOKS_DIR: &str = "/etc/containers/oci/hooks.d";
/// CRI-O's main config file and its drop-in dir.
pub const CRIO_CONF: &str = "/etc/crio/crio.conf";
pub const CRIO_CONF_D: &str = "/etc/crio/crio.conf.d";
/// Docker's daemon config.
pub const DAEMON_JSON: &str = "/etc/docker/daemon.json";
/// containerd's config.
pub const CONTAINERD_CONFIG: &str = "/etc/containerd/config.toml";
/// containerd CRI plugin names by config version.
pub const CRI_PLUGIN_V2: &str = "io.containerd.grpc.v1.cri";
pub const CRI_PLUGIN_V3: &str = "io.containerd.cri.v1.runtime";
/// Marks what setup added to a TOML file, so that `--undo` finds it.
const MARK: &str = "oci-tmpfs-hook setup";
/// Largest config file we edit.
const MAX_BYTES: u64 = 4 << 20;

/// An engine that `setup` knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Engine {
    Podman,
    Crio,
    Docker,
    Containerd,
}

impl Engine {
    pub const ALL: [Engine; 4] = [Engine::Podman, Engine::Crio, Engine::Docker, Engine::Containerd];

    pub fn as_str(self) -> &'static str {
        match self {
            Engine::Podman => "podman",
            Engine::Crio => "crio",
            Engine::Docker => "docker",
            Engine::Containerd => "containerd",
        }
    }

    /// The command that makes the engine read its new config; Podman reads
    /// its hooks dir at every container start.
    pub fn restart_command(self) -> Option<&'static str> {
        match self {
            Engine::Podman => None,
            Engine::Crio => Some("systemctl restart crio"),
            Engine::Docker => Some("systemctl restart docker"),
            Engine::Containerd => Some("systemctl restart containerd"),
        }
    }
}

impl std::fmt::Display for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What to set up, and where.
#[derive(Clone, Debug)]
pub struct Options {
    pub engine: Engine,
    /// Remove the registration instead.
    pub undo: bool,
    /// Docker / containerd: make our runtime the default one.
    pub default: bool,
    /// The hook binary, as the engine will see it.
    pub hook: PathBuf,
    /// The wrapper, as the engine will see it.
    pub wrapper: PathBuf,
    /// Prefix of every default system path ("/" on a live system).
    pub root: PathBuf,
    pub hooks_dir: Option<PathBuf>,
    pub daemon_json: Option<PathBuf>,
    pub containerd_config: Option<PathBuf>,
}

/// A config file that setup refuses to touch, or a failed read or write.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(
        "{path}: line {line}, column {column}: {msg}; fix the file and rerun setup (nothing was changed)"
    )]
    Syntax { path: PathBuf, line: usize, column: usize, msg: String },
    #[error("{path}: {what}; nothing was changed")]
    Shape { path: PathBuf, what: String },
    #[error("{path} is not a regular file of at most {MAX_BYTES} bytes, or not UTF-8")]
    NotText { path: PathBuf },
}

impl SetupError {
    fn shape(path: &Path, what: impl Into<String>) -> SetupError {
        SetupError::Shape { path: path.to_path_buf(), what: what.into() }
    }
}

/// One file to create, replace or remove.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    pub path: PathBuf,
    /// Current contents, `None` when the file does not exist.
    pub before: Option<String>,
    /// New contents, `None` to remove the file.
    pub after: Option<String>,
    /// Where the current contents are saved first.
    pub backup: Option<PathBuf>,
}

/// What setup will do for one engine.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// Files that change.
    pub changes: Vec<Change>,
    /// Files looked at that are already as they should be.
    pub unchanged: Vec<PathBuf>,
    /// Things the user should know (which dir was picked and why...).
    pub notes: Vec<String>,
}

/// `root` + an absolute system path.
pub fn rooted(root: &Path, path: &Path) -> PathBuf {
    match path.strip_prefix("/") {
        Ok(rel) => root.join(rel),
        Err(_) => root.join(path),
    }
}

// ---------------------------------------------------------------------------
// Podman / CRI-O: the oci-hooks(5) JSON.

/// The text of the oci-hooks(5) file for `binary`.
pub fn hooks_json(binary: &Path) -> String {
    let mut text =
        serde_json::to_string_pretty(&crate::registration::oci_hooks_json(binary)).expect("serialising JSON");
    text.push('\n');
    text
}

/// CRI-O's `[crio.runtime] hooks_dir` (first entry) from its config files,
/// given in the order CRI-O reads them (main file, then drop-ins sorted); the
/// last file that sets it wins.
///
/// # Errors
/// A file that is not valid TOML, or a `hooks_dir` that is not a list of strings.
pub fn crio_hooks_dir(files: &[(PathBuf, String)]) -> Result<Option<PathBuf>, SetupError> {
    let mut found = None;
    for (path, text) in files {
        let doc: toml::Table = toml::from_str(text).map_err(|e| toml_syntax(path, text, &e))?;
        let Some(dirs) = doc.get("crio").and_then(|c| c.get("runtime")).and_then(|r| r.get("hooks_dir"))
        else {
            continue;
        };
        let list = dirs.as_array().ok_or_else(|| SetupError::shape(path, "hooks_dir is not a list"))?;
        let first = list
            .iter()
            .map(|d| d.as_str().ok_or_else(|| SetupError::shape(path, "hooks_dir holds a non-string")))
            .next()
            .transpose()?;
        found = first.map(PathBuf::from);
    }
    Ok(found)
}

fn toml_syntax(path: &Path, text: &str, e: &toml::de::Error) -> SetupError {
    let (line, column) = e.span().map(|s| line_col(text, s.start)).unwrap_or((0, 0));
    SetupError::Syntax { path: path.to_path_buf(), line, column, msg: e.message().trim().replace('\n', ": ") }
}

fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text.as_bytes()[..offset.min(text.len())];
    let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
    let column = before.len() - before.iter().rposition(|&b| b == b'\n').map_or(0, |p| p + 1) + 1;
    (line, column)
}

// ---------------------------------------------------------------------------
// Docker: daemon.json.

/// The new text of `daemon.json` (`None`: remove the file), given its current
/// text (`None`: missing). Adds `runtimes.oci-tmpfs.path = wrapper` (and
/// `default-runtime` with `default`), or with `undo` removes exactly those; a
/// file left as `{}` by `undo` is removed. Keeps every other key and their
/// order, and the file's indentation.
///
/// # Errors
/// Invalid JSON (with line and column), a document or `runtimes` that is not an
/// object, or `--default` over another engine's default runtime.
pub fn edit_daemon_json(
    path: &Path,
    text: Option<&str>,
    wrapper: &Path,
    default: bool,
    undo: bool,
) -> Result<Option<String>, SetupError> {
    let mut doc = match text {
        None if undo => return Ok(None),
        Some(t) if !t.trim().is_empty() => {
            serde_json::from_str::<Value>(t).map_err(|e| SetupError::Syntax {
                path: path.to_path_buf(),
                line: e.line(),
                column: e.column(),
                msg: format!("invalid JSON: {}", strip_position(&e.to_string())),
            })?
        }
        _ => json!({}),
    };
    let obj =
        doc.as_object_mut().ok_or_else(|| SetupError::shape(path, "the document is not a JSON object"))?;
    let wrapper_str = wrapper.display().to_string();
    if undo {
        if let Some(runtimes) = obj.get_mut("runtimes") {
            let runtimes = runtimes
                .as_object_mut()
                .ok_or_else(|| SetupError::shape(path, "runtimes is not an object"))?;
            runtimes.shift_remove(RUNTIME_NAME);
            if runtimes.is_empty() {
                obj.shift_remove("runtimes");
            }
        }
        if obj.get("default-runtime").and_then(Value::as_str) == Some(RUNTIME_NAME) {
            obj.shift_remove("default-runtime");
        }
        if obj.is_empty() {
            return Ok(None);
        }
    } else {
        let runtimes = obj.entry("runtimes").or_insert_with(|| json!({}));
        let runtimes =
            runtimes.as_object_mut().ok_or_else(|| SetupError::shape(path, "runtimes is not an object"))?;
        match runtimes.get_mut(RUNTIME_NAME).and_then(Value::as_object_mut) {
            Some(entry) => {
                if entry.get("path").and_then(Value::as_str) != Some(wrapper_str.as_str()) {
                    entry.insert("path".into(), json!(wrapper_str));
                }
            }
            None => {
                runtimes.insert(RUNTIME_NAME.into(), json!({ "path": wrapper_str }));
            }
        }
        if default {
            match obj.get("default-runtime").and_then(Value::as_str) {
                Some(RUNTIME_NAME) => {}
                None | Some("runc") => {
                    obj.insert("default-runtime".into(), json!(RUNTIME_NAME));
                }
                Some(other) => {
                    return Err(SetupError::shape(
                        path,
                        format!(
                            "default-runtime is {other:?}, and the wrapper runs runc (or the host config's \
                             runtime_path), not {other:?}; drop --default or change default-runtime yourself"
                        ),
                    ))
                }
            }
        }
    }
    Ok(Some(render_json(&doc, text.unwrap_or(""))))
}

/// serde_json appends " at line L column C"; the error says it separately.
fn strip_position(msg: &str) -> &str {
    msg.rfind(" at line ").map_or(msg, |i| &msg[..i])
}

/// Serialises in the original's style: its indentation unit (two spaces for a
/// new file), or one line when the original was one line.
fn render_json(doc: &Value, original: &str) -> String {
    let indent = if original.trim().is_empty() {
        Some("  ".to_string())
    } else if !original.trim().contains('\n') {
        None
    } else {
        let unit = original
            .lines()
            .skip(1)
            .map(|l| &l[..l.len() - l.trim_start().len()])
            .find(|ws| !ws.is_empty())
            .unwrap_or("  ");
        Some(unit.to_string())
    };
    let mut out = Vec::new();
    match indent {
        Some(unit) => {
            let fmt = serde_json::ser::PrettyFormatter::with_indent(unit.as_bytes());
            let mut ser = serde_json::Serializer::with_formatter(&mut out, fmt);
            serde::Serialize::serialize(doc, &mut ser).expect("serialising JSON");
        }
        None => serde_json::to_writer(&mut out, doc).expect("serialising JSON"),
    }
    let mut text = String::from_utf8(out).expect("serde_json writes UTF-8");
    if original.is_empty() || original.ends_with('\n') {
        text.push('\n');
    }
    text
}

// ---------------------------------------------------------------------------
// containerd: config.toml.

/// The new text of containerd's `config.toml` (`None`: remove), given its
/// current text (`None`: missing; a minimal `version = 2` file is created).
///
/// Adds `[plugins.<CRI>.containerd.runtimes.oci-tmpfs]` with `runtime_type =
/// "io.containerd.runc.v2"`, pod/container annotation pass-through for
/// `oci-tmpfs-hook/*`, and `options.BinaryName = wrapper`; a marked `runc`
/// entry when the config defines none (see the module docs); with `default`,
/// `default_runtime_name = "oci-tmpfs"`, remembering the old value in a
/// comment. `<CRI>` is `io.containerd.grpc.v1.cri` for config version 2 and
/// `io.containerd.cri.v1.runtime` for version 3. `undo` removes exactly what
/// was added. Comments and formatting of everything else are kept.
///
/// # Errors
/// Invalid TOML (with line and column), config version 1 or unknown, or a
/// section of the wrong type.
pub fn edit_containerd(
    path: &Path,
    text: Option<&str>,
    wrapper: &Path,
    default: bool,
    undo: bool,
) -> Result<Option<String>, SetupError> {
    use toml_edit::{DocumentMut, Item};
    let original = match text {
        None if undo => return Ok(None),
        None => "",
        Some(t) => t,
    };
    let mut doc: DocumentMut = original.parse().map_err(|e: toml_edit::TomlError| {
        let (line, column) = e.span().map(|s| line_col(original, s.start)).unwrap_or((0, 0));
        let msg = e.message().trim().replace('\n', ": ");
        SetupError::Syntax { path: path.to_path_buf(), line, column, msg }
    })?;
    let version = match doc.get("version") {
        Some(v) => v.as_integer().ok_or_else(|| SetupError::shape(path, "version is not an integer"))?,
        None if doc.get("plugins").is_some() => {
            return Err(SetupError::shape(
                path,
                "has no `version`, so containerd reads it as config version 1 (plugins.cri); \
                 convert it to version 2 (see `containerd config default`) and rerun setup",
            ))
        }
        None => {
            if !undo {
                let mut item = toml_edit::value(2);
                if !original.trim().is_empty() {
                    item.as_value_mut().expect("a value").decor_mut().set_suffix("");
                }
                doc.insert("version", item);
            }
            2
        }
    };
    let plugin = match version {
        2 => CRI_PLUGIN_V2,
        3 => CRI_PLUGIN_V3,
        n => {
            return Err(SetupError::shape(
                path,
                format!("config version {n} is not supported (only 2 and 3); register the runtime by hand"),
            ))
        }
    };
    let wrapper_str = wrapper.display().to_string();
    let ctd_keys = ["plugins", plugin, "containerd"];
    if undo {
        let Some(ctd) = existing_table(doc.as_table_mut(), &ctd_keys) else {
            return Ok(Some(doc.to_string()));
        };
        let mut emptied = false;
        if let Some(Item::Table(runtimes)) = ctd.get_mut("runtimes") {
            runtimes.remove(RUNTIME_NAME);
            let ours =
                matches!(runtimes.get("runc"), Some(Item::Table(t)) if decor_has_mark(t.decor().prefix()));
            if ours {
                runtimes.remove("runc");
            }
        }
        let name = ctd.get("default_runtime_name");
        if name.and_then(Item::as_str) == Some(RUNTIME_NAME) {
            let was = name
                .and_then(Item::as_value)
                .and_then(|v| v.decor().suffix())
                .and_then(|s| s.as_str())
                .and_then(previous_default);
            match was {
                Some(old) => {
                    ctd["default_runtime_name"] = toml_edit::value(old);
                }
                None => {
                    ctd.remove("default_runtime_name");
                    emptied = true;
                }
            }
        }
        // A header setup made for default_runtime_name alone goes with it.
        if emptied && ctd.iter().all(|(_, item)| item.is_table()) {
            ctd.set_implicit(true);
        }
        let out = doc.to_string();
        // What setup creates from nothing goes away entirely.
        if out.trim() == "version = 2" {
            return Ok(None);
        }
        return Ok(Some(out));
    }

    let ctd = table_mut(doc.as_table_mut(), &ctd_keys, path)?;
    let current_default = match ctd.get("default_runtime_name") {
        None => None,
        Some(item) => Some(
            item.as_str()
                .ok_or_else(|| SetupError::shape(path, "default_runtime_name is not a string"))?
                .to_string(),
        ),
    };
    {
        let runtimes = table_mut(ctd, &["runtimes"], path)?;
        if !runtimes.contains_key("runc") && matches!(current_default.as_deref(), None | Some("runc")) {
            let mut runc = toml_edit::Table::new();
            runc["runtime_type"] = toml_edit::value("io.containerd.runc.v2");
            runc.decor_mut().set_prefix(format!(
                "\n# Added by {MARK} (removed by --undo): containerd drops its built-in runc runtime\n\
                 # when a config names any runtime, and CRI then fails on default_runtime_name \"runc\".\n"
            ));
            runtimes.insert("runc", Item::Table(runc));
        }
        match runtimes.get_mut(RUNTIME_NAME) {
            Some(Item::Table(ours)) => {
                if ours.get("runtime_type").and_then(Item::as_str) != Some("io.containerd.runc.v2") {
                    ours["runtime_type"] = toml_edit::value("io.containerd.runc.v2");
                }
                let options = table_mut(ours, &["options"], path)?;
                if options.get("BinaryName").and_then(Item::as_str) != Some(wrapper_str.as_str()) {
                    options["BinaryName"] = toml_edit::value(wrapper_str.as_str());
                }
            }
            Some(_) => {
                return Err(SetupError::shape(
                    path,
                    format!("plugins.\"{plugin}\".containerd.runtimes.{RUNTIME_NAME} is not a table"),
                ))
            }
            None => {
                let mut ours = toml_edit::Table::new();
                ours["runtime_type"] = toml_edit::value("io.containerd.runc.v2");
                let globs: toml_edit::Array = [ANNOTATION_GLOB].into_iter().collect();
                ours["pod_annotations"] = toml_edit::value(globs.clone());
                ours["container_annotations"] = toml_edit::value(globs);
                let mut options = toml_edit::Table::new();
                options["BinaryName"] = toml_edit::value(wrapper_str.as_str());
                ours.insert("options", Item::Table(options));
                runtimes.insert(RUNTIME_NAME, Item::Table(ours));
            }
        }
    }
    if default && current_default.as_deref() != Some(RUNTIME_NAME) {
        let was = match current_default.as_deref() {
            None => "unset".to_string(),
            Some("runc") => "\"runc\"".to_string(),
            Some(other) => {
                return Err(SetupError::shape(
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
    }
    Ok(Some(doc.to_string()))
}

fn decor_has_mark(raw: Option<&toml_edit::RawString>) -> bool {
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
fn existing_table<'a>(mut t: &'a mut toml_edit::Table, keys: &[&str]) -> Option<&'a mut toml_edit::Table> {
    for k in keys {
        t = t.get_mut(k)?.as_table_mut()?;
    }
    Some(t)
}

/// The table at `keys`, creating missing steps as implicit tables (no header
/// of their own).
fn table_mut<'a>(
    mut t: &'a mut toml_edit::Table,
    keys: &[&str],
    path: &Path,
) -> Result<&'a mut toml_edit::Table, SetupError> {
    for k in keys {
        let item = t.entry(k).or_insert_with(|| {
            let mut new = toml_edit::Table::new();
            new.set_implicit(true);
            toml_edit::Item::Table(new)
        });
        t = item.as_table_mut().ok_or_else(|| {
            SetupError::shape(path, format!("`{k}` is not a table (inline tables are not edited)"))
        })?;
    }
    Ok(t)
}

// ---------------------------------------------------------------------------
// Planning (reads) and applying (writes).

/// Reads a config file: `None` when missing.
///
/// # Errors
/// Unreadable, not a regular file, too big, not UTF-8.
pub fn read_text(path: &Path) -> Result<Option<String>, SetupError> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(SetupError::Io { path: path.to_path_buf(), source }),
    };
    let meta = file.metadata().map_err(|source| SetupError::Io { path: path.to_path_buf(), source })?;
    if !meta.is_file() || meta.len() > MAX_BYTES {
        return Err(SetupError::NotText { path: path.to_path_buf() });
    }
    let mut bytes = Vec::new();
    file.take(MAX_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|source| SetupError::Io { path: path.to_path_buf(), source })?;
    String::from_utf8(bytes).map(Some).map_err(|_| SetupError::NotText { path: path.to_path_buf() })
}

/// CRI-O's config files under `root`, in reading order.
///
/// # Errors
/// An unreadable file.
pub fn crio_config_files(root: &Path) -> Result<Vec<(PathBuf, String)>, SetupError> {
    let mut files = Vec::new();
    let main = rooted(root, Path::new(CRIO_CONF));
    if let Some(text) = read_text(&main)? {
        files.push((main, text));
    }
    let dir = rooted(root, Path::new(CRIO_CONF_D));
    let mut dropins: Vec<PathBuf> = match fs::read_dir(&dir) {
        Ok(entries) => entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "conf"))
            .collect(),
        Err(_) => Vec::new(),
    };
    dropins.sort();
    for p in dropins {
        if let Some(text) = read_text(&p)? {
            files.push((p, text));
        }
    }
    Ok(files)
}

/// The hooks dir setup writes to for Podman or CRI-O, and why.
///
/// # Errors
/// An invalid CRI-O config.
pub fn hooks_dir(opts: &Options) -> Result<(PathBuf, String), SetupError> {
    if let Some(d) = &opts.hooks_dir {
        return Ok((d.clone(), "from --hooks-dir".into()));
    }
    if opts.engine == Engine::Crio {
        let files = crio_config_files(&opts.root)?;
        if let Some(dir) = crio_hooks_dir(&files)? {
            return Ok((rooted(&opts.root, &dir), "CRI-O's hooks_dir".into()));
        }
        return Ok((rooted(&opts.root, Path::new(HOOKS_DIR)), "CRI-O's default hooks_dir".into()));
    }
    Ok((
        rooted(&opts.root, Path::new(HOOKS_DIR)),
        format!("Podman's default hooks dir; {ETC_HOOKS_DIR} works too (--hooks-dir)"),
    ))
}

/// The config file setup edits for Docker or containerd.
pub fn config_file(opts: &Options) -> PathBuf {
    match opts.engine {
        Engine::Docker => {
            opts.daemon_json.clone().unwrap_or_else(|| rooted(&opts.root, Path::new(DAEMON_JSON)))
        }
        Engine::Containerd => {
            opts.containerd_config.clone().unwrap_or_else(|| rooted(&opts.root, Path::new(CONTAINERD_CONFIG)))
        }
        Engine::Podman | Engine::Crio => match hooks_dir(opts) {
            Ok((d, _)) => d.join(HOOK_FILE),
            Err(_) => rooted(&opts.root, Path::new(HOOKS_DIR)).join(HOOK_FILE),
        },
    }
}

/// Reads the engine's files and works out every change. Writes nothing.
///
/// # Errors
/// Unreadable or malformed files, or a config setup will not edit.
pub fn plan(opts: &Options) -> Result<Plan, SetupError> {
    let mut plan = Plan::default();
    let (path, after) = match opts.engine {
        Engine::Podman | Engine::Crio => {
            let (dir, why) = hooks_dir(opts)?;
            plan.notes.push(format!("hooks dir {} ({why})", dir.display()));
            let path = dir.join(HOOK_FILE);
            (path, if opts.undo { None } else { Some(hooks_json(&opts.hook)) })
        }
        Engine::Docker => {
            let path = config_file(opts);
            let before = read_text(&path)?;
            let after = edit_daemon_json(&path, before.as_deref(), &opts.wrapper, opts.default, opts.undo)?;
            (path, after)
        }
        Engine::Containerd => {
            let path = config_file(opts);
            let before = read_text(&path)?;
            let after = edit_containerd(&path, before.as_deref(), &opts.wrapper, opts.default, opts.undo)?;
            if let Some(imports) = before.as_deref().and_then(containerd_imports) {
                plan.notes.push(format!(
                    "{} imports {imports}: before containerd 2.0 an imported file with its own CRI plugin \
                     section replaces this file's whole section, runtimes included; check with \
                     `containerd config dump`",
                    path.display()
                ));
            }
            (path, after)
        }
    };
    let before = read_text(&path)?;
    if before == after {
        plan.unchanged.push(path);
        return Ok(plan);
    }
    // The original is saved before setup first changes it; undo only takes
    // out what setup put in, so it needs no backup of its own.
    let backup = match (&before, opts.engine) {
        (Some(text), Engine::Docker | Engine::Containerd) if !opts.undo => Some(backup_path(&path, text)?),
        _ => None,
    };
    plan.changes.push(Change { path, before, after, backup });
    Ok(plan)
}

/// The non-empty `imports` list of a containerd config, for a warning.
fn containerd_imports(text: &str) -> Option<String> {
    let doc: toml::Table = toml::from_str(text).ok()?;
    let list = doc.get("imports")?.as_array()?;
    let names: Vec<&str> = list.iter().filter_map(toml::Value::as_str).collect();
    (!names.is_empty()).then(|| names.join(", "))
}

/// `FILE.bak-oci-tmpfs-hook`, or `.1`, `.2`... when that holds something
/// else; an existing backup with the same contents is reused.
fn backup_path(path: &Path, contents: &str) -> Result<PathBuf, SetupError> {
    let base = format!("{}{BACKUP_SUFFIX}", path.display());
    for n in 0..1000 {
        let candidate = PathBuf::from(if n == 0 { base.clone() } else { format!("{base}.{n}") });
        match read_text(&candidate) {
            Ok(None) => return Ok(candidate),
            Ok(Some(old)) if old == contents => return Ok(candidate),
            _ => continue,
        }
    }
    Err(SetupError::shape(path, "a thousand backups exist already; clean them up"))
}

/// Carries out a plan: backups first, then each file replaced atomically.
///
/// # Errors
/// A failed write; files already replaced stay replaced (each has its backup).
pub fn apply(plan: &Plan) -> Result<(), SetupError> {
    for change in &plan.changes {
        let io_err = |source| SetupError::Io { path: change.path.clone(), source };
        let meta = fs::metadata(&change.path).ok();
        if let (Some(backup), Some(before)) = (&change.backup, &change.before) {
            if read_text(backup)?.as_deref() != Some(before.as_str()) {
                write_atomic(backup, before.as_bytes(), meta.as_ref())
                    .map_err(|source| SetupError::Io { path: backup.clone(), source })?;
            }
        }
        match &change.after {
            Some(text) => {
                if let Some(parent) = change.path.parent() {
                    fs::create_dir_all(parent).map_err(io_err)?;
                }
                write_atomic(&change.path, text.as_bytes(), meta.as_ref()).map_err(io_err)?;
            }
            None => match fs::remove_file(&change.path) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(io_err(e)),
                _ => {}
            },
        }
    }
    Ok(())
}

/// Writes `bytes` to a temporary file in the same dir, with the mode and
/// owner of `like` (0644 for a new file), then renames it over `path`.
fn write_atomic(path: &Path, bytes: &[u8], like: Option<&fs::Metadata>) -> io::Result<()> {
    let name = path.file_name().ok_or_else(|| io::Error::other("no file name"))?;
    let tmp = path.with_file_name(format!(".{}.oci-tmpfs-hook-tmp", name.to_string_lossy()));
    let _ = fs::remove_file(&tmp);
    let result = (|| {
        let mut file = fs::OpenOptions::new().write(true).create_new(true).open(&tmp)?;
        let mode = like.map_or(0o644, |m| m.mode() & 0o7777);
        if let Some(m) = like {
            match std::os::unix::fs::fchown(&file, Some(m.uid()), Some(m.gid())) {
                Err(e) if e.kind() != io::ErrorKind::PermissionDenied => return Err(e),
                _ => {}
            }
        }
        file.set_permissions(fs::Permissions::from_mode(mode))?;
        file.write_all(bytes)?;
        file.sync_all()?;
        fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// A line diff of a change, `diff -u` style with three lines of context.
pub fn diff(change: &Change) -> String {
    let old: Vec<&str> = change.before.as_deref().map_or(Vec::new(), |t| t.lines().collect());
    let new: Vec<&str> = change.after.as_deref().map_or(Vec::new(), |t| t.lines().collect());
    let mut out = String::new();
    let name = change.path.display();
    let _ =
        writeln!(out, "--- {}", if change.before.is_some() { name.to_string() } else { "/dev/null".into() });
    let _ =
        writeln!(out, "+++ {}", if change.after.is_some() { name.to_string() } else { "/dev/null".into() });
    // Longest common subsequence table (config files are small).
    let (n, m) = (old.len(), new.len());
    let mut lcs = vec![vec![0u32; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i][j] =
                if old[i] == new[j] { lcs[i + 1][j + 1] + 1 } else { lcs[i + 1][j].max(lcs[i][j + 1]) };
        }
    }
    let mut ops: Vec<(char, &str)> = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < n || j < m {
        if i < n && j < m && old[i] == new[j] {
            ops.push((' ', old[i]));
            i += 1;
            j += 1;
        } else if i < n && (j == m || lcs[i + 1][j] >= lcs[i][j + 1]) {
            ops.push(('-', old[i]));
            i += 1;
        } else {
            ops.push(('+', new[j]));
            j += 1;
        }
    }
    const CONTEXT: usize = 3;
    let near_change = |k: usize| {
        let lo = k.saturating_sub(CONTEXT);
        let hi = (k + CONTEXT + 1).min(ops.len());
        ops[lo..hi].iter().any(|(c, _)| *c != ' ')
    };
    let mut skipped = false;
    for (k, (c, line)) in ops.iter().enumerate() {
        if *c == ' ' && !near_change(k) {
            skipped = true;
            continue;
        }
        if skipped {
            out.push_str("@@\n");
            skipped = false;
        }
        let _ = writeln!(out, "{c}{line}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const WRAPPER: &str = "/usr/local/bin/oci-tmpfs-runtime";
    const HOOK: &str = "/usr/local/bin/oci-tmpfs-hook";

    fn docker(text: Option<&str>, default: bool, undo: bool) -> Result<Option<String>, SetupError> {
        edit_daemon_json(Path::new("/etc/docker/daemon.json"), text, Path::new(WRAPPER), default, undo)
    }

    fn ctd(text: Option<&str>, default: bool, undo: bool) -> Result<Option<String>, SetupError> {
        edit_containerd(Path::new("/etc/containerd/config.toml"), text, Path::new(WRAPPER), default, undo)
    }

    #[test]
    fn hooks_json_exact() {
        assert_eq!(
            hooks_json(Path::new(HOOK)),
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
    fn docker_new_file_exact() {
        let out = docker(None, false, false).unwrap().unwrap();
        assert_eq!(
            out,
            "{\n  \"runtimes\": {\n    \"oci-tmpfs\": {\n      \"path\": \"/usr/local/bin/oci-tmpfs-runtime\"\n    }\n  }\n}\n"
        );
        assert_eq!(docker(Some(&out), false, false).unwrap().unwrap(), out, "idempotent");
        assert_eq!(docker(Some(&out), false, true).unwrap(), None, "undo of a file setup created removes it");
    }

    #[test]
    fn docker_keeps_other_keys_order_and_indent() {
        let original = "{\n    \"log-driver\": \"journald\",\n    \"runtimes\": {\n        \"nvidia\": {\"path\": \"nvidia-container-runtime\"}\n    },\n    \"data-root\": \"/srv/docker\"\n}\n";
        let out = docker(Some(original), true, false).unwrap().unwrap();
        assert_eq!(
            out,
            "{\n    \"log-driver\": \"journald\",\n    \"runtimes\": {\n        \"nvidia\": {\n            \"path\": \"nvidia-container-runtime\"\n        },\n        \"oci-tmpfs\": {\n            \"path\": \"/usr/local/bin/oci-tmpfs-runtime\"\n        }\n    },\n    \"data-root\": \"/srv/docker\",\n    \"default-runtime\": \"oci-tmpfs\"\n}\n"
        );
        assert_eq!(docker(Some(&out), true, false).unwrap().unwrap(), out);
        let undone = docker(Some(&out), false, true).unwrap().unwrap();
        let v: Value = serde_json::from_str(&undone).unwrap();
        let orig: Value = serde_json::from_str(original).unwrap();
        assert_eq!(v, orig);
        let keys: Vec<_> = v.as_object().unwrap().keys().cloned().collect();
        assert_eq!(keys, ["log-driver", "runtimes", "data-root"]);
    }

    #[test]
    fn docker_updates_a_stale_path_and_keeps_default_of_others() {
        let old = r#"{"runtimes": {"oci-tmpfs": {"path": "/opt/old/oci-tmpfs-runtime", "runtimeArgs": ["--debug"]}}}"#;
        let out = docker(Some(old), false, false).unwrap().unwrap();
        assert_eq!(
            out,
            r#"{"runtimes":{"oci-tmpfs":{"path":"/usr/local/bin/oci-tmpfs-runtime","runtimeArgs":["--debug"]}}}"#
        );
        let err = docker(Some(r#"{"default-runtime": "nvidia"}"#), true, false).unwrap_err();
        assert!(err.to_string().contains("default-runtime is \"nvidia\""), "{err}");
        let runc = docker(Some(r#"{"default-runtime": "runc"}"#), true, false).unwrap().unwrap();
        assert!(runc.contains(r#""default-runtime":"oci-tmpfs""#), "{runc}");
        // undo leaves someone else's default alone
        let undone = docker(Some(r#"{"default-runtime": "nvidia", "runtimes": {}}"#), false, true).unwrap();
        assert_eq!(undone.as_deref(), Some("{\"default-runtime\":\"nvidia\"}"));
    }

    #[test]
    fn docker_malformed_is_refused_with_line() {
        let cases: &[(&str, &str, usize)] = &[
            ("trailing comma", "{\n  \"a\": 1,\n}\n", 3),
            ("not json", "runtimes = 1\n", 1),
            ("unclosed", "{\n  \"a\": [1,\n", 3),
        ];
        for (name, text, line) in cases {
            match docker(Some(text), false, false) {
                Err(SetupError::Syntax { line: l, ref msg, .. }) => {
                    assert_eq!(l, *line, "case {name}: {msg}")
                }
                other => panic!("case {name}: {other:?}"),
            }
        }
        let err = docker(Some("{\n  \"a\": 1,\n}\n"), false, false).unwrap_err().to_string();
        assert!(err.starts_with("/etc/docker/daemon.json: line 3, column 1: invalid JSON"), "{err}");
        for shape in ["[]", r#"{"runtimes": []}"#] {
            assert!(matches!(docker(Some(shape), false, false), Err(SetupError::Shape { .. })), "{shape}");
        }
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
        assert!(ctd(Some("version = 4\n"), false, false).unwrap_err().to_string().contains("version 4"));
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
            Err(e @ SetupError::Syntax { line: 3, .. }) => assert!(!e.to_string().contains('\n'), "{e}"),
            other => panic!("{other:?}"),
        }
        let dup = "version = 2\n[grpc]\na = 1\na = 2\n";
        let err = ctd(Some(dup), false, false).unwrap_err().to_string();
        assert!(err.contains("line 4"), "{err}");
        assert!(!err.contains('\n'), "{err}");
        let shape = "version = 2\nplugins = 1\n";
        assert!(matches!(ctd(Some(shape), false, false), Err(SetupError::Shape { .. })));
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
        assert!(matches!(crio_hooks_dir(&bad), Err(SetupError::Syntax { line: 1, .. })));
    }

    fn temp_root(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("oth-setup-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn opts(engine: Engine, root: &Path) -> Options {
        Options {
            engine,
            undo: false,
            default: false,
            hook: PathBuf::from(HOOK),
            wrapper: PathBuf::from(WRAPPER),
            root: root.to_path_buf(),
            hooks_dir: None,
            daemon_json: None,
            containerd_config: None,
        }
    }

    #[test]
    fn plan_apply_docker_backup_mode_idempotent_undo() {
        let root = temp_root("docker");
        let path = root.join("etc/docker/daemon.json");
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        let original = "{\n  \"debug\": true\n}\n";
        fs::write(&path, original).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();
        let o = opts(Engine::Docker, &root);
        let p = plan(&o).unwrap();
        assert_eq!(p.changes.len(), 1);
        let backup = root.join("etc/docker/daemon.json.bak-oci-tmpfs-hook");
        assert_eq!(p.changes[0].backup.as_deref(), Some(backup.as_path()));
        apply(&p).unwrap();
        assert_eq!(fs::read_to_string(&backup).unwrap(), original);
        assert_eq!(fs::metadata(&path).unwrap().permissions().mode() & 0o7777, 0o600);
        assert_eq!(fs::metadata(&backup).unwrap().permissions().mode() & 0o7777, 0o600);
        let written = fs::read_to_string(&path).unwrap();
        assert!(written.contains("\"oci-tmpfs\""));
        let again = plan(&o).unwrap();
        assert!(again.changes.is_empty() && again.unchanged == [path.clone()], "{again:?}");
        let undo = plan(&Options { undo: true, ..o.clone() }).unwrap();
        apply(&undo).unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), original);
        assert_eq!(fs::read_to_string(&backup).unwrap(), original);
        let names: Vec<_> =
            fs::read_dir(root.join("etc/docker")).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names.len(), 2, "no temp file, no second backup: {names:?}");
        // a later setup over a changed file keeps the first backup and adds another
        fs::write(&path, "{\"debug\": false}\n").unwrap();
        let p = plan(&o).unwrap();
        assert_eq!(p.changes[0].backup, Some(PathBuf::from(format!("{}.1", backup.display()))));
        fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn plan_podman_and_crio_dirs() {
        let root = temp_root("hooks");
        let p = plan(&opts(Engine::Podman, &root)).unwrap();
        let path = root.join("usr/share/containers/oci/hooks.d/oci-tmpfs-hook.json");
        assert_eq!(p.changes[0].path, path);
        apply(&p).unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), hooks_json(Path::new(HOOK)));
        assert!(plan(&opts(Engine::Podman, &root)).unwrap().changes.is_empty());
        fs::create_dir_all(root.join("etc/crio/crio.conf.d")).unwrap();
        fs::write(
            root.join("etc/crio/crio.conf.d/50-hooks.conf"),
            "[crio.runtime]\nhooks_dir = [\"/etc/hooks\"]\n",
        )
        .unwrap();
        let p = plan(&opts(Engine::Crio, &root)).unwrap();
        assert_eq!(p.changes[0].path, root.join("etc/hooks/oci-tmpfs-hook.json"));
        let undo = plan(&Options { undo: true, ..opts(Engine::Podman, &root) }).unwrap();
        assert_eq!(undo.changes[0].after, None);
        apply(&undo).unwrap();
        assert!(!path.exists());
        fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn diff_shows_changed_lines_with_context() {
        let change = Change {
            path: PathBuf::from("/f"),
            before: Some("a\nb\nc\nd\ne\nf\ng\nh\n".into()),
            after: Some("a\nb\nc\nd\nE\nf\ng\nh\n".into()),
            backup: None,
        };
        assert_eq!(diff(&change), "--- /f\n+++ /f\n@@\n b\n c\n d\n-e\n+E\n f\n g\n h\n");
    }
}
