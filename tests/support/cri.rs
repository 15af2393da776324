//! The CRI client (tests/cri/cri.py, in the venv of tests/env/venv.sh).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use super::ok;

/// The CRI client's python: `$OCI_TMPFS_HOOK_CRI_PYTHON` when set (one that
/// can import `cri_api`), else the venv of tests/env/venv.sh (created once).
pub fn cri_python() -> &'static Path {
    static PY: OnceLock<PathBuf> = OnceLock::new();
    PY.get_or_init(|| {
        if let Some(py) = std::env::var_os("OCI_TMPFS_HOOK_CRI_PYTHON") {
            return PathBuf::from(py);
        }
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/env/venv.sh");
        PathBuf::from(ok(&mut Command::new(&script)).trim())
    })
}

/// The CRI client's command: `python3` with `$OCI_TMPFS_HOOK_CRI_PYTHONPATH`
/// as its `PYTHONPATH` when that is set (the sid environment has no venv
/// module: tests/env/nri.sh installs the client's wheels into a directory),
/// else [`cri_python`].
pub fn cri_command() -> Command {
    if let Some(dir) = std::env::var_os("OCI_TMPFS_HOOK_CRI_PYTHONPATH") {
        let mut c = Command::new("python3");
        c.env("PYTHONPATH", dir);
        return c;
    }
    Command::new(cri_python())
}

pub fn cri_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cri/cri.py")
}

/// The `major:minor` of the top mount at `point` in a mountinfo text.
pub fn device_at(mountinfo: &str, point: &str) -> Option<String> {
    mountinfo
        .lines()
        .rev()
        .find(|l| l.split(' ').nth(4) == Some(point))
        .and_then(|l| l.split(' ').nth(2))
        .map(String::from)
}
