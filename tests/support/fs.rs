//! Temporary directories (one `TempDir`), the one walk of a directory
//! tree (`walk`, and `tree`, the listing the hostile suites compare before
//! and after), and sizes of filesystems. What a suite keeps of each entry
//! (contents, kinds, sizes) is a map over `walk`'s result in the suite.

use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
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

/// A `TempDir` is its path.
impl std::ops::Deref for TempDir {
    type Target = Path;

    fn deref(&self) -> &Path {
        &self.0
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

/// One entry [`walk`] found.
pub struct Entry {
    pub path: PathBuf,
    /// `path` relative to the walked directory.
    pub rel: PathBuf,
    /// Its own metadata (a symlink's, not its target's).
    pub meta: std::fs::Metadata,
}

/// Every entry under `dir` (not `dir` itself), a directory before what it
/// holds, in the order `read_dir` gives; symlinks are not followed.
/// `strict`: a directory or entry that cannot be read panics (a tree the
/// test made and must see whole); otherwise it is passed over (a tree a race
/// may change while it is read, compared with an earlier listing: what
/// vanished shows as a difference there).
pub fn walk(dir: &Path, strict: bool) -> Vec<Entry> {
    fn go(base: &Path, dir: &Path, strict: bool, out: &mut Vec<Entry>) {
        let entries = match std::fs::read_dir(dir) {
            Ok(entries) => entries,
            Err(e) if strict => panic!("read_dir {}: {e}", dir.display()),
            Err(_) => return,
        };
        for e in entries {
            let path = match e {
                Ok(e) => e.path(),
                Err(e) if strict => panic!("read_dir {}: {e}", dir.display()),
                Err(_) => continue,
            };
            let meta = match std::fs::symlink_metadata(&path) {
                Ok(m) => m,
                Err(e) if strict => panic!("lstat {}: {e}", path.display()),
                Err(_) => continue,
            };
            let is_dir = meta.is_dir();
            let rel = path.strip_prefix(base).unwrap().to_path_buf();
            out.push(Entry { path: path.clone(), rel, meta });
            if is_dir {
                go(base, &path, strict, out);
            }
        }
    }
    let mut out = Vec::new();
    go(dir, dir, strict, &mut out);
    out
}

/// Every entry under a directory, the directory itself as ".": relative
/// path -> (mode, size, uid, gid), sizes of directories as 0.
pub type Tree = BTreeMap<String, (u32, u64, u32, u32)>;

/// The [`Tree`] of `dir`, read leniently (see [`walk`]): what a hostile
/// case compares before and after to prove a host directory untouched.
pub fn tree(dir: &Path) -> Tree {
    let row = |m: &std::fs::Metadata| (m.mode(), if m.is_dir() { 0 } else { m.len() }, m.uid(), m.gid());
    let mut out: Tree =
        walk(dir, false).iter().map(|e| (e.rel.display().to_string(), row(&e.meta))).collect();
    if let Ok(m) = std::fs::symlink_metadata(dir) {
        out.insert(".".into(), (m.mode(), 0, m.uid(), m.gid()));
    }
    out
}

/// The text of the file at `path`; a panic naming the path when it cannot
/// be read. For a read whose text an assertion checks: a failed read must
/// fail the test, not hand it an empty text that a negative check passes.
#[track_caller]
pub fn read_text(path: impl AsRef<Path>) -> String {
    let path = path.as_ref();
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// Waits up to `timeout` for the file at `path` to hold `needle`; its text
/// then or at the deadline, `None` while there is no file.
pub fn wait_for_text(path: &Path, needle: &str, timeout: std::time::Duration) -> Option<String> {
    let t0 = std::time::Instant::now();
    loop {
        let text = read_text_if_any(path);
        if text.as_deref().is_some_and(|t| t.contains(needle)) || t0.elapsed() > timeout {
            return text;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// The text of the file at `path`, or `None` when there is no file there
/// (a log that nothing of ours has opened, a file a wait polls for); any
/// other error panics naming the path.
#[track_caller]
pub fn read_text_if_any(path: impl AsRef<Path>) -> Option<String> {
    let path = path.as_ref();
    match std::fs::read_to_string(path) {
        Ok(text) => Some(text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => panic!("reading {}: {e}", path.display()),
    }
}
