//! The hook's copy on the node, where the adjustment names it: the plugin's
//! own binary and its host config, copied into a host directory (the
//! DaemonSet's hostPath, `--hook-dir`), so that the runtime, which runs the
//! hook on the node, finds both. A plugin that runs on the node itself
//! (pre-registered, or started by hand) names its own binary instead and
//! copies nothing ([`HookDir`] absent).
//!
//! Each file is written only when its bytes or mode differ, atomically and
//! durably ([`crate::files::replace`]: temporary file, fsync, rename): a
//! rare write that a node crash must not leave half done, and a hook binary
//! the runtime may be executing at that moment keeps running from the old
//! inode. Not here: removing the files (a hook still named by a running
//! container's spec must stay; docs/nri.md says how to uninstall).

use std::path::{Path, PathBuf};

use super::adjust::HookSite;
use crate::files::{self, Durability, FileError, Perms};
use crate::input::MAX_HOST_CONFIG_BYTES;

// The binary's file name in the hook directory.
use crate::names::BINARY_NAME as BINARY;
/// The host config's file name in the hook directory.
pub(crate) const CONFIG: &str = "config.toml";
/// The largest binary copied (the static release binary is a few MiB).
const MAX_BINARY_BYTES: u64 = 256 << 20;

/// Why the hook could not be copied onto the node.
#[derive(Debug, thiserror::Error)]
pub(crate) enum HookDirError {
    #[error("finding this binary")]
    ThisBinary(#[source] std::io::Error),
    #[error("--hook-dir-mount {0}: not a directory (mount the node's --hook-dir there)")]
    NoDir(PathBuf),
    #[error(transparent)]
    File(#[from] FileError),
}

/// The host directory that holds the hook: `node` as the runtime sees it,
/// `mount` as this process sees it (the same path when the plugin runs on
/// the node).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct HookDir {
    pub node: PathBuf,
    pub mount: PathBuf,
}

impl HookDir {
    /// Where the adjustment finds the hook: the copies in this directory.
    pub(crate) fn site(&self) -> HookSite {
        HookSite { path: self.node.join(BINARY), config: Some(self.node.join(CONFIG)) }
    }

    /// Copies this binary into the directory (mode 0755) unless it is there.
    /// Returns whether it wrote.
    ///
    /// # Errors
    /// The directory is missing, this binary cannot be read, or a write fails.
    pub(crate) fn put_binary(&self) -> Result<bool, HookDirError> {
        let this = crate::files::this_binary().map_err(HookDirError::ThisBinary)?;
        let bytes = files::read(None, &this, MAX_BINARY_BYTES)?.bytes;
        self.put(BINARY, &bytes, 0o755, MAX_BINARY_BYTES)
    }

    /// Writes the host config `text` into the directory (mode 0644) unless
    /// the same is there. Returns whether it wrote.
    ///
    /// # Errors
    /// The directory is missing, or a write fails.
    pub(crate) fn put_config(&self, text: &str) -> Result<bool, HookDirError> {
        self.put(CONFIG, text.as_bytes(), 0o644, MAX_HOST_CONFIG_BYTES)
    }

    fn put(&self, name: &str, bytes: &[u8], mode: u32, limit: u64) -> Result<bool, HookDirError> {
        if !self.mount.is_dir() {
            return Err(HookDirError::NoDir(self.mount.clone()));
        }
        let path = self.mount.join(name);
        if same(&path, bytes, mode, limit) {
            return Ok(false);
        }
        files::replace(&path, bytes, Perms::new(mode), Durability::Durable)?;
        Ok(true)
    }
}

/// Whether `path` is a regular file (not a symlink) holding `bytes` with
/// permission bits `mode`.
fn same(path: &Path, bytes: &[u8], mode: u32, limit: u64) -> bool {
    match files::read(None, path, limit) {
        Ok(c) => c.perms.mode == mode && c.bytes == bytes,
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn dir(name: &str) -> PathBuf {
        files::temp_dir(&format!("nri-hook-copy-{name}"))
    }

    #[test]
    fn writes_when_different_only() {
        let d = dir("config");
        let hd = HookDir { node: PathBuf::from("/opt/oci-tmpfs-hook"), mount: d.clone() };
        assert_eq!(
            hd.site(),
            HookSite {
                path: PathBuf::from("/opt/oci-tmpfs-hook/oci-tmpfs-hook"),
                config: Some(PathBuf::from("/opt/oci-tmpfs-hook/config.toml")),
            }
        );
        assert!(hd.put_config("tmp_size = \"1Gi\"\n").unwrap());
        let path = d.join(CONFIG);
        let ino = std::fs::metadata(&path).unwrap();
        assert_eq!(ino.permissions().mode() & 0o7777, 0o644);
        assert!(!hd.put_config("tmp_size = \"1Gi\"\n").unwrap(), "same bytes: no write");
        assert_eq!(std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&path).unwrap()), {
            std::os::unix::fs::MetadataExt::ino(&ino)
        });
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
        assert!(hd.put_config("tmp_size = \"1Gi\"\n").unwrap(), "another mode: rewritten");
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o7777, 0o644);
        assert!(hd.put_config("").unwrap());
        assert_eq!(std::fs::read(&path).unwrap(), b"");
        // A symlink planted in its place is replaced, not followed.
        let elsewhere = d.join("elsewhere");
        std::fs::write(&elsewhere, "keep").unwrap();
        std::fs::remove_file(&path).unwrap();
        std::os::unix::fs::symlink(&elsewhere, &path).unwrap();
        assert!(hd.put_config("").unwrap());
        assert_eq!(std::fs::read(&elsewhere).unwrap(), b"keep");
        assert!(std::fs::symlink_metadata(&path).unwrap().is_file());
        let missing = HookDir { node: d.clone(), mount: d.join("nope") };
        assert!(matches!(missing.put_config(""), Err(HookDirError::NoDir(_))));
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn binary_is_this_one() {
        let d = dir("binary");
        let hd = HookDir { node: d.clone(), mount: d.clone() };
        assert!(hd.put_binary().unwrap());
        assert!(!hd.put_binary().unwrap());
        let this = std::fs::read(crate::files::this_binary().unwrap()).unwrap();
        assert_eq!(std::fs::read(d.join(BINARY)).unwrap(), this);
        assert_eq!(std::fs::metadata(d.join(BINARY)).unwrap().permissions().mode() & 0o7777, 0o755);
        let _ = std::fs::remove_dir_all(&d);
    }
}
