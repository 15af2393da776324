//! Temporary directories (one `TempDir`) and sizes of filesystems.

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use super::unique;

/// Where nodes, their images and stand-ins for engine state live, as on a
/// real node (`/var/lib/containerd`): root-owned 0755 directories from `/`
/// down. An engine shm is grown only under directories closed to others
/// (docs/design.md#engine-shm).
pub const CLOSED_BASE: &str = "/var/lib/oci-tmpfs-test";

/// A directory removed (with everything in it) on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    /// Under the system temp dir's `oci-tmpfs-hook-tests/`.
    pub fn new(name: &str) -> TempDir {
        let dir = std::env::temp_dir().join("oci-tmpfs-hook-tests").join(unique(name));
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    /// Directly under the temp dir: Podman refuses a run root longer than 50 bytes.
    pub fn short(name: &str) -> TempDir {
        let dir = std::env::temp_dir().join(unique(name));
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    /// Under `CLOSED_BASE`, root-owned 0755 from `/` down.
    pub fn closed(name: &str) -> TempDir {
        let base = Path::new(CLOSED_BASE);
        std::fs::create_dir_all(base).unwrap();
        std::fs::set_permissions(base, std::fs::Permissions::from_mode(0o755)).unwrap();
        let dir = base.join(unique(name));
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        TempDir(dir)
    }

    pub fn join(&self, p: impl AsRef<Path>) -> PathBuf {
        self.0.join(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Total bytes of the filesystem at `path`.
pub fn fs_bytes(path: &Path) -> u64 {
    let st = rustix::fs::statvfs(path).unwrap_or_else(|e| panic!("statvfs {}: {e}", path.display()));
    st.f_blocks * st.f_frsize
}

/// A size as the kernel prints it, and in MiB/GiB when it is round.
pub fn sz(bytes: Option<u64>) -> String {
    use super::{GI, MI};
    match bytes {
        None => "none".to_string(),
        Some(b) if b % GI == 0 => format!("{}Gi", b / GI),
        Some(b) if b % MI == 0 => format!("{}Mi", b / MI),
        Some(b) => format!("{}k ({:.2}Gi)", b / 1024, b as f64 / GI as f64),
    }
}
