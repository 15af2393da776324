//! Inputs of the hook: the OCI state on stdin, the bundle's `config.json`, the
//! host config and the host's RAM. Every read is bounded and every file is
//! opened without following a final symlink and without blocking on FIFOs
//! (docs/design.md#hostile-rootfs rule 1; the reader is [`crate::files::read`]). Nothing here
//! changes anything.

use std::collections::HashMap;
use std::io::{self, Read};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};

use crate::oci::Spec;
use serde::Deserialize;

use crate::files::{self, FileError};
use crate::host_config::{HostConfig, HostConfigError};
use crate::names::{rooted, CONFIG_ENV, DEFAULT_CONFIG_PATH};
use crate::plan::HostFacts;
use crate::size::Bytes;

/// Largest state document accepted on stdin.
pub const MAX_STATE_BYTES: u64 = 1 << 20;
/// Largest `config.json` (or `runc exec --process` file) accepted.
pub const MAX_SPEC_BYTES: u64 = 8 << 20;
/// Largest host config accepted.
pub const MAX_HOST_CONFIG_BYTES: u64 = 1 << 20;
/// Longest container id we accept (it is printed in every log line).
const MAX_ID_LEN: usize = 1024;

/// The OCI state the runtime writes on the hook's stdin.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct State {
    pub oci_version: String,
    pub id: String,
    #[serde(default)]
    pub status: String,
    /// Absent after the container stopped; 0 or 1 at createContainer (crun, runc).
    #[serde(default)]
    pub pid: Option<i64>,
    pub bundle: PathBuf,
    #[serde(default)]
    pub annotations: Option<HashMap<String, String>>,
    /// crun adds the rootfs path.
    #[serde(default)]
    pub root: Option<PathBuf>,
}

#[derive(Debug, thiserror::Error)]
pub enum InputError {
    #[error("reading the OCI state from stdin")]
    ReadState(#[source] io::Error),
    #[error("the OCI state on stdin is larger than {MAX_STATE_BYTES} bytes")]
    StateTooLarge,
    #[error("the OCI state on stdin is not valid JSON state")]
    StateJson(#[source] serde_json::Error),
    #[error("the OCI state has an invalid container id (empty, too long or with control characters)")]
    StateId,
    #[error("the OCI state's bundle {0:?} is not an absolute path")]
    StateBundle(PathBuf),
    #[error("opening {path}")]
    Bundle {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(transparent)]
    File(#[from] FileError),
    #[error("{path} is not a valid OCI config")]
    ConfigJson {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error("host config {path}")]
    HostConfig {
        path: PathBuf,
        #[source]
        source: HostConfigError,
    },
    #[error("reading the host's memory size")]
    HostRam(#[source] io::Error),
}

/// Reads and validates the state from `reader`, at most [`MAX_STATE_BYTES`].
///
/// # Errors
/// I/O, size, JSON, and an id or bundle that cannot be right.
pub fn read_state(reader: impl Read) -> Result<State, InputError> {
    let mut buf = Vec::new();
    reader.take(MAX_STATE_BYTES + 1).read_to_end(&mut buf).map_err(InputError::ReadState)?;
    if buf.len() as u64 > MAX_STATE_BYTES {
        return Err(InputError::StateTooLarge);
    }
    let state: State = serde_json::from_slice(&buf).map_err(InputError::StateJson)?;
    if state.id.is_empty() || state.id.len() > MAX_ID_LEN || state.id.chars().any(char::is_control) {
        return Err(InputError::StateId);
    }
    if !state.bundle.is_absolute() {
        return Err(InputError::StateBundle(state.bundle));
    }
    Ok(state)
}

/// Reads `<bundle>/config.json`.
///
/// # Errors
/// A missing bundle, a config that is not a bounded regular file, bad JSON.
pub fn read_spec(bundle: &Path) -> Result<Spec, InputError> {
    let (path, bytes) = read_config_json(bundle)?;
    serde_json::from_slice(&bytes).map_err(|source| InputError::ConfigJson { path, source })
}

/// The bytes of the bundle's `config.json` (bounded, opened by fd), and its path.
fn read_config_json(bundle: &Path) -> Result<(PathBuf, Vec<u8>), InputError> {
    let path = bundle.join("config.json");
    let dir = files::open_dir(bundle)
        .map_err(|source| InputError::Bundle { path: bundle.to_path_buf(), source })?;
    let config = files::read(Some(dir.as_fd()), &path, MAX_SPEC_BYTES)?;
    Ok((path, config.bytes))
}

/// The bundle's `config.json` as [`read_spec`] reads it, and its `hooks`
/// member (`null` when it has none), from one read.
///
/// # Errors
/// As [`read_spec`].
pub fn read_spec_and_hooks(bundle: &Path) -> Result<(Spec, serde_json::Value), InputError> {
    /// One parse: the plan's view and the `hooks` member beside it.
    #[derive(serde::Deserialize)]
    struct WithHooks {
        #[serde(flatten)]
        spec: Spec,
        #[serde(default)]
        hooks: serde_json::Value,
    }
    let (path, bytes) = read_config_json(bundle)?;
    let both: WithHooks =
        serde_json::from_slice(&bytes).map_err(|source| InputError::ConfigJson { path, source })?;
    Ok((both.spec, both.hooks))
}

/// Where the host config is read from: the one way every command finds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostConfigSource {
    pub path: PathBuf,
    /// Named explicitly: a missing file is an error (else: the defaults).
    pub explicit: bool,
}

impl HostConfigSource {
    /// `named` when given, else the default path under `root` ("/" on a
    /// live system).
    pub fn new(named: Option<&Path>, root: &Path) -> HostConfigSource {
        match named {
            Some(p) => HostConfigSource { path: p.to_path_buf(), explicit: true },
            None => HostConfigSource { path: rooted(root, Path::new(DEFAULT_CONFIG_PATH)), explicit: false },
        }
    }

    /// The wrapper's: the file `OCI_TMPFS_HOOK_CONFIG` names, else the
    /// default (an engine starts the wrapper with no arguments of ours).
    pub fn from_env() -> HostConfigSource {
        let named = std::env::var_os(CONFIG_ENV).map(PathBuf::from);
        HostConfigSource::new(named.as_deref(), Path::new("/"))
    }

    /// The file, when it was named (what a hook entry passes as `--config`).
    pub fn named(&self) -> Option<&Path> {
        self.explicit.then_some(self.path.as_path())
    }

    /// Reads the host config; a missing file at the default path means
    /// the defaults.
    ///
    /// # Errors
    /// What [`HostConfigSource::read_with_text`] fails with.
    pub fn read(&self) -> Result<HostConfig, InputError> {
        self.read_with_text().map(|(host_config, _)| host_config)
    }

    /// [`HostConfigSource::read`], and the file's text (`""` for a missing
    /// default file), for whoever passes the file on (the NRI plugin).
    ///
    /// # Errors
    /// An unreadable or invalid file, or a missing file that was named
    /// explicitly.
    pub fn read_with_text(&self) -> Result<(HostConfig, String), InputError> {
        let path = &self.path;
        let bytes = match files::read(None, path, MAX_HOST_CONFIG_BYTES) {
            Err(e) if !self.explicit && e.is_not_found() => {
                return Ok((HostConfig::default(), String::new()))
            }
            other => other?.bytes,
        };
        let text = String::from_utf8(bytes).map_err(|_| FileError::NotUtf8 { path: path.to_path_buf() })?;
        let host_config = HostConfig::parse(&text)
            .map_err(|source| InputError::HostConfig { path: path.to_path_buf(), source })?;
        Ok((host_config, text))
    }
}

/// What the plan needs of the host (for `plan::plan_for`).
///
/// # Errors
/// What [`host_ram`] fails with.
pub fn host_facts() -> Result<HostFacts, InputError> {
    Ok(HostFacts { ram: host_ram()? })
}

/// The host's total RAM.
///
/// # Errors
/// Only if `sysinfo(2)` fails.
pub fn host_ram() -> Result<Bytes, InputError> {
    let info = rustix::system::sysinfo();
    let total = (info.totalram as u64).saturating_mul(u64::from(info.mem_unit.max(1)));
    if total == 0 {
        return Err(InputError::HostRam(io::Error::other("sysinfo reports no RAM")));
    }
    Ok(Bytes(total))
}

/// The rootfs path: `root.path` from the spec, relative to the bundle when relative.
pub fn rootfs_path(spec: &Spec, bundle: &Path) -> Option<PathBuf> {
    let root = spec.root().as_ref()?;
    let path = root.path();
    if path.as_os_str().is_empty() {
        return None;
    }
    Some(if path.is_absolute() { path.clone() } else { bundle.join(path) })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(text: &str) -> Result<State, InputError> {
        read_state(text.as_bytes())
    }

    #[test]
    fn reads_runc_and_crun_state() {
        let s = state(r#"{"ociVersion":"1.0.2","id":"c1","status":"creating","pid":42,"bundle":"/b","annotations":{"a":"b"}}"#).unwrap();
        assert_eq!((s.id.as_str(), s.pid, s.bundle.as_path()), ("c1", Some(42), Path::new("/b")));
        let s = state(
            r#"{"ociVersion":"1.0.0","id":"c2","status":"created","pid":0,"bundle":"/b","root":"/b/rootfs"}"#,
        )
        .unwrap();
        assert_eq!(s.root.as_deref(), Some(Path::new("/b/rootfs")));
    }

    #[test]
    fn rejects_bad_state() {
        let cases: &[(&str, &str)] = &[
            ("empty", ""),
            ("not json", "hello"),
            ("no id", r#"{"ociVersion":"1","bundle":"/b"}"#),
            ("empty id", r#"{"ociVersion":"1","id":"","bundle":"/b"}"#),
            ("control id", r#"{"ociVersion":"1","id":"a\nb","bundle":"/b"}"#),
            ("relative bundle", r#"{"ociVersion":"1","id":"a","bundle":"b"}"#),
            ("pid string", r#"{"ociVersion":"1","id":"a","bundle":"/b","pid":"1"}"#),
            ("pid huge", r#"{"ociVersion":"1","id":"a","bundle":"/b","pid":99999999999999999999}"#),
            ("deep", &format!("{}{}", "[".repeat(100000), "]".repeat(100000))),
        ];
        for (name, text) in cases {
            let err = state(text).expect_err(name);
            assert!(!err.to_string().is_empty(), "{name}");
        }
        let big = vec![b' '; (MAX_STATE_BYTES + 10) as usize];
        assert!(matches!(read_state(&big[..]), Err(InputError::StateTooLarge)));
    }

    #[test]
    fn host_config_file_missing_is_default_only_when_implicit() {
        let read_host_config =
            |path: &Path, explicit| HostConfigSource { path: path.to_path_buf(), explicit }.read();
        let missing = Path::new("/nonexistent/oci-tmpfs-hook.toml");
        assert_eq!(read_host_config(missing, false).unwrap(), HostConfig::default());
        assert!(read_host_config(missing, true).is_err());
    }

    #[test]
    fn config_must_be_a_bounded_regular_file() {
        let dir = std::env::temp_dir().join(format!("oth-input-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("config.json"),
            r#"{"ociVersion":"1.0.2","root":{"path":"rootfs","readonly":true}}"#,
        )
        .unwrap();
        let spec = read_spec(&dir).unwrap();
        assert_eq!(rootfs_path(&spec, &dir), Some(dir.join("rootfs")));
        std::fs::remove_file(dir.join("config.json")).unwrap();
        std::os::unix::fs::symlink("/dev/zero", dir.join("config.json")).unwrap();
        assert!(matches!(read_spec(&dir), Err(InputError::File(FileError::Symlink { .. }))));
        std::fs::remove_file(dir.join("config.json")).unwrap();
        std::fs::create_dir(dir.join("config.json")).unwrap();
        assert!(read_spec(&dir).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
