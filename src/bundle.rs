//! Lossless edits of a bundle's `config.json`: adding this hook to
//! `hooks.<stage>`. The file is handled as a generic JSON value (a typed view
//! drops the fields it does not know), keeps its key order, indentation
//! style, mode and owner, and is replaced atomically but not fsynced (the
//! bundle is the engine's scratch copy, rewritten at every create:
//! docs/design.md#executors). Adding twice adds once. Reading and writing are [`crate::files`]'s.

use std::ffi::OsStr;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::files::{self, Durability, FileError};
use crate::input::MAX_CONFIG_BYTES;
use crate::stage::Stage;

const CONFIG: &str = "config.json";

/// One entry of `hooks.<stage>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HookEntry {
    pub path: PathBuf,
    pub args: Vec<String>,
}

impl HookEntry {
    /// The entry that runs `binary hook --stage STAGE [--config PATH]`.
    pub fn for_stage(binary: &Path, stage: Stage, config: Option<&Path>) -> HookEntry {
        HookEntry { path: binary.to_path_buf(), args: crate::names::hook_argv(stage, config) }
    }

    fn to_json(&self) -> Value {
        json!({ "path": self.path.display().to_string(), "args": self.args })
    }
}

#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    #[error("opening the bundle {path}")]
    Dir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    File(#[from] FileError),
    #[error("{path} is not valid JSON")]
    Json {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error("{path}: {what} is not a JSON object")]
    Shape { path: PathBuf, what: String },
}

/// Adds `entry` to `config["hooks"][stage]` unless an entry with the same
/// path is there. Returns whether the value changed.
///
/// # Errors
/// When `hooks` or `hooks.<stage>` exist with the wrong JSON type.
pub fn add_hook(config: &mut Value, stage: Stage, entry: &HookEntry) -> Result<bool, String> {
    let root = config.as_object_mut().ok_or("the document")?;
    let hooks = root.entry("hooks").or_insert_with(|| json!({}));
    let hooks = hooks.as_object_mut().ok_or("hooks")?;
    let list = hooks.entry(stage.as_str()).or_insert_with(|| json!([]));
    let list = list.as_array_mut().ok_or_else(|| format!("hooks.{stage}"))?;
    let ours = entry.path.display().to_string();
    if list.iter().any(|h| h.get("path").and_then(Value::as_str) == Some(ours.as_str())) {
        return Ok(false);
    }
    list.push(entry.to_json());
    Ok(true)
}

/// Adds the hook to `<bundle>/config.json`. Returns whether the file changed.
///
/// # Errors
/// A missing or invalid file, or a failed write; the file is then unchanged.
pub fn inject(bundle: &Path, stage: Stage, entry: &HookEntry) -> Result<bool, BundleError> {
    edit(bundle, |config| {
        let path = config.path.to_path_buf();
        add_hook(config.tree()?, stage, entry).map_err(|what| BundleError::Shape { path, what })
    })
}

/// A bundle's `config.json` as read: its bytes, and its JSON tree once
/// [`Config::tree`] asks for it. A caller that only reads (the plan's
/// view, [`crate::oci::Spec`], comes from the bytes) and finds nothing to
/// change never builds the tree (docs/design.md#start-up).
pub struct Config<'a> {
    pub bytes: &'a [u8],
    pub path: &'a Path,
    tree: Option<Value>,
}

impl Config<'_> {
    /// The document as a generic JSON value, for editing.
    ///
    /// # Errors
    /// [`BundleError::Json`] when the file is not JSON.
    pub fn tree(&mut self) -> Result<&mut Value, BundleError> {
        if self.tree.is_none() {
            let tree = serde_json::from_slice(self.bytes)
                .map_err(|source| BundleError::Json { path: self.path.to_path_buf(), source })?;
            self.tree = Some(tree);
        }
        Ok(self.tree.as_mut().expect("the tree was just parsed"))
    }
}

/// Reads `<bundle>/config.json`, lets `change` edit it (it returns whether
/// it changed anything, or an error of its own), and writes it back when it
/// did, in the file's own style.
///
/// # Errors
/// A missing or invalid file, `change`'s error, or a failed write; the file
/// is then unchanged.
pub fn edit<E: From<BundleError>>(
    bundle: &Path,
    change: impl FnOnce(&mut Config<'_>) -> Result<bool, E>,
) -> Result<bool, E> {
    let path = bundle.join(CONFIG);
    let dir =
        files::open_dir(bundle).map_err(|source| BundleError::Dir { path: bundle.to_path_buf(), source })?;
    let old = files::read(Some(dir.as_fd()), &path, MAX_CONFIG_BYTES).map_err(BundleError::from)?;
    let mut config = Config { bytes: &old.bytes, path: &path, tree: None };
    if !change(&mut config)? {
        return Ok(false);
    }
    // A change with no tree changed nothing.
    let Some(tree) = config.tree else { return Ok(false) };
    // Valid JSON is UTF-8 (RFC 8259 §8.1; serde_json refuses anything else).
    let original = String::from_utf8_lossy(&old.bytes);
    let out = files::render_json(&tree, &original);
    files::replace_at(dir.as_fd(), OsStr::new(CONFIG), &path, out.as_bytes(), old.perms, Durability::Scratch)
        .map_err(BundleError::from)?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn entry() -> HookEntry {
        HookEntry::for_stage(Path::new("/usr/local/bin/oci-tmpfs-hook"), Stage::Prestart, None)
    }

    #[test]
    fn adds_once() {
        let mut v = json!({"ociVersion": "1.0.2", "x-unknown": {"keep": [1, 2]}});
        assert_eq!(add_hook(&mut v, Stage::Prestart, &entry()), Ok(true));
        assert_eq!(add_hook(&mut v, Stage::Prestart, &entry()), Ok(false));
        assert_eq!(v["hooks"]["prestart"].as_array().unwrap().len(), 1);
        assert_eq!(v["hooks"]["prestart"][0]["args"][3], "prestart");
        assert_eq!(v["x-unknown"], json!({"keep": [1, 2]}));
        assert_eq!(v["hooks"]["prestart"][0]["path"], "/usr/local/bin/oci-tmpfs-hook");
    }

    #[test]
    fn keeps_other_hooks() {
        let mut v =
            json!({"hooks": {"prestart": [{"path": "/bin/other"}], "poststop": [{"path": "/bin/x"}]}});
        add_hook(&mut v, Stage::Prestart, &entry()).unwrap();
        assert_eq!(v["hooks"]["prestart"][0]["path"], "/bin/other");
        assert_eq!(v["hooks"]["prestart"][1]["path"], "/usr/local/bin/oci-tmpfs-hook");
        assert_eq!(v["hooks"]["poststop"][0]["path"], "/bin/x");
    }

    #[test]
    fn refuses_wrong_shapes() {
        for mut v in [json!([]), json!({"hooks": []}), json!({"hooks": {"prestart": {}}})] {
            assert!(add_hook(&mut v, Stage::Prestart, &entry()).is_err(), "{v}");
        }
    }

    #[test]
    fn config_path_goes_into_args() {
        let e = HookEntry::for_stage(Path::new("/h"), Stage::CreateContainer, Some(Path::new("/etc/x.toml")));
        assert_eq!(
            e.args,
            ["oci-tmpfs-hook", "hook", "--stage", "createContainer", "--config", "/etc/x.toml"]
        );
    }

    /// Lossless and idempotent on what `runc spec` writes.
    #[test]
    fn inject_file_is_lossless_idempotent_and_keeps_mode() {
        let dir = std::env::temp_dir().join(format!("oth-bundle-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let status = std::process::Command::new("runc").args(["spec", "--bundle"]).arg(&dir).status();
        assert!(matches!(status, Ok(s) if s.success()), "runc spec: {status:?} (.ci/run installs runc)");
        let path = dir.join("config.json");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
        let before: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        assert!(inject(&dir, Stage::Prestart, &entry()).unwrap());
        let once = std::fs::read(&path).unwrap();
        assert!(!inject(&dir, Stage::Prestart, &entry()).unwrap());
        assert_eq!(std::fs::read(&path).unwrap(), once);
        assert!(once.windows(2).any(|w| w == b"\n\t"), "tab indentation kept");
        let mut after: Value = serde_json::from_slice(&once).unwrap();
        after.as_object_mut().unwrap().remove("hooks");
        assert_eq!(after, before, "nothing but hooks changed");
        let keys_before: Vec<_> = before.as_object().unwrap().keys().cloned().collect();
        let keys_after: Vec<_> = after.as_object().unwrap().keys().cloned().collect();
        assert_eq!(keys_before, keys_after, "key order kept");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode, 0o640);
        let names: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, ["config.json"], "no temporary file left");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn inject_refuses_garbage_and_leaves_it() {
        let dir = std::env::temp_dir().join(format!("oth-bundle-bad-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(CONFIG), b"{not json").unwrap();
        assert!(matches!(inject(&dir, Stage::Prestart, &entry()), Err(BundleError::Json { .. })));
        assert_eq!(std::fs::read(dir.join(CONFIG)).unwrap(), b"{not json");
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(matches!(inject(&dir, Stage::Prestart, &entry()), Err(BundleError::Dir { .. })));
    }

    proptest::proptest! {
        #[test]
        fn add_hook_never_loses_a_field(keys in proptest::collection::vec("[a-z]{1,8}", 0..8), vals in proptest::collection::vec(0i64..100, 0..8)) {
            let mut v = json!({});
            for (k, x) in keys.iter().zip(vals.iter()) {
                if k != "hooks" { v[k] = json!(x); }
            }
            let before = v.clone();
            add_hook(&mut v, Stage::CreateRuntime, &entry()).unwrap();
            let again = v.clone();
            proptest::prop_assert!(!add_hook(&mut v, Stage::CreateRuntime, &entry()).unwrap());
            proptest::prop_assert_eq!(&v, &again);
            v.as_object_mut().unwrap().remove("hooks");
            proptest::prop_assert_eq!(v, before);
        }
    }
}
