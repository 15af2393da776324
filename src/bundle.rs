//! Lossless edits of a bundle's `config.json`: adding this hook to
//! `hooks.<stage>`. The file is handled as a generic JSON value (oci-spec's
//! types drop fields they do not know), keeps its key order, indentation
//! style, mode and owner, and is replaced atomically. Adding twice adds once.

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use rustix::fs::{FileType, Mode, OFlags};
use serde_json::{json, Value};

use crate::stage::Stage;

/// Largest `config.json` we edit.
const MAX_BYTES: u64 = 8 << 20;
const CONFIG: &str = "config.json";
const TEMP: &str = ".config.json.oci-tmpfs-hook";

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
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{path} is not a regular file of at most {MAX_BYTES} bytes")]
    NotRegular { path: PathBuf },
    #[error("{path} is not valid JSON: {source}")]
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

/// True when `config` already runs `binary` at some stage.
pub fn has_hook(config: &Value, binary: &Path) -> bool {
    let ours = binary.display().to_string();
    config.get("hooks").and_then(Value::as_object).is_some_and(|h| {
        h.values()
            .filter_map(Value::as_array)
            .flatten()
            .any(|e| e.get("path").and_then(Value::as_str) == Some(ours.as_str()))
    })
}

/// Adds the hook to `<bundle>/config.json`. Returns whether the file changed.
///
/// # Errors
/// A missing or invalid file, or a failed write; the file is then unchanged.
pub fn inject(bundle: &Path, stage: Stage, entry: &HookEntry) -> Result<bool, BundleError> {
    let path = bundle.join(CONFIG);
    let io_err = |source: io::Error| BundleError::Io { path: path.clone(), source };
    let dir = rustix::fs::open(bundle, OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())
        .map_err(|e| io_err(e.into()))?;
    let fd = rustix::fs::openat(
        &dir,
        CONFIG,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOCTTY,
        Mode::empty(),
    )
    .map_err(|e| io_err(e.into()))?;
    let st = rustix::fs::fstat(&fd).map_err(|e| io_err(e.into()))?;
    if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile || st.st_size as u64 > MAX_BYTES {
        return Err(BundleError::NotRegular { path });
    }
    let mut text = Vec::new();
    File::from(fd).take(MAX_BYTES + 1).read_to_end(&mut text).map_err(io_err)?;
    let mut config: Value =
        serde_json::from_slice(&text).map_err(|source| BundleError::Json { path: path.clone(), source })?;
    let changed = add_hook(&mut config, stage, entry)
        .map_err(|what| BundleError::Shape { path: path.clone(), what })?;
    if !changed {
        return Ok(false);
    }
    let out = render(&config, &text);
    write_replacing(&dir, &out, Mode::from_raw_mode(st.st_mode & 0o7777), st.st_uid, st.st_gid)
        .map_err(io_err)?;
    Ok(true)
}

/// Serialises in the original's style: tab or two-space indentation, or one
/// line; a trailing newline when the original had one.
fn render(config: &Value, original: &[u8]) -> Vec<u8> {
    let indent: Option<&[u8]> = if original.windows(2).any(|w| w == b"\n\t") {
        Some(b"\t")
    } else if original.contains(&b'\n') {
        Some(b"  ")
    } else {
        None
    };
    let mut out = Vec::with_capacity(original.len() + 256);
    match indent {
        Some(indent) => {
            let fmt = serde_json::ser::PrettyFormatter::with_indent(indent);
            let mut ser = serde_json::Serializer::with_formatter(&mut out, fmt);
            serde::Serialize::serialize(config, &mut ser).expect("serialising a JSON value");
        }
        None => serde_json::to_writer(&mut out, config).expect("serialising a JSON value"),
    }
    if original.ends_with(b"\n") {
        out.push(b'\n');
    }
    out
}

/// Writes `bytes` to a temporary file beside `config.json` with the given
/// mode and owner, then renames it over `config.json`.
fn write_replacing(dir: &OwnedFd, bytes: &[u8], mode: Mode, uid: u32, gid: u32) -> io::Result<()> {
    let _ = rustix::fs::unlinkat(dir, TEMP, rustix::fs::AtFlags::empty());
    let fd = rustix::fs::openat(
        dir,
        TEMP,
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o600),
    )?;
    let result = (|| {
        rustix::fs::fchown(&fd, Some(rustix::fs::Uid::from_raw(uid)), Some(rustix::fs::Gid::from_raw(gid)))
            .or_else(|e| if e == rustix::io::Errno::PERM { Ok(()) } else { Err(e) })?;
        rustix::fs::fchmod(&fd, mode)?;
        let mut file = File::from(fd);
        file.write_all(bytes)?;
        file.flush()?;
        rustix::fs::renameat(dir, TEMP, dir, CONFIG)?;
        Ok(())
    })();
    if result.is_err() {
        let _ = rustix::fs::unlinkat(dir, TEMP, rustix::fs::AtFlags::empty());
    }
    result
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
        assert!(has_hook(&v, Path::new("/usr/local/bin/oci-tmpfs-hook")));
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
        assert!(!dir.join(TEMP).exists());
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
        assert!(matches!(inject(&dir, Stage::Prestart, &entry()), Err(BundleError::Io { .. })));
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
