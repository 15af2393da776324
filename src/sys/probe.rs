//! The kernel probes behind `doctor` (crate::engine::doctor): each really calls
//! what the hook needs, harmlessly, and says only whether it worked.
//! `openat2(2)` with `RESOLVE_IN_ROOT` on `/`, `fsopen(2)` of a tmpfs
//! context closed without creating or mounting anything, `pidfd_open(2)`
//! on ourselves; nothing mounts or writes.

use rustix::fs::{Mode, OFlags, ResolveFlags};
use rustix::io::Errno;

/// `openat2(RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV)` of
/// `.` from `/`.
///
/// # Errors
/// The errno of the `open` or the `openat2`.
pub(crate) fn openat2_in_root() -> Result<(), Errno> {
    let root = rustix::fs::open("/", OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())?;
    rustix::fs::openat2(
        &root,
        ".",
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
        ResolveFlags::IN_ROOT | ResolveFlags::NO_MAGICLINKS | ResolveFlags::NO_XDEV,
    )
    .map(drop)
}

/// `fsopen("tmpfs")`, the context closed unused.
///
/// # Errors
/// Its errno.
pub(crate) fn fsopen_tmpfs() -> Result<(), Errno> {
    rustix::mount::fsopen("tmpfs", rustix::mount::FsOpenFlags::FSOPEN_CLOEXEC).map(drop)
}

/// `pidfd_open` on this process.
///
/// # Errors
/// Its errno.
pub(crate) fn pidfd_open_self() -> Result<(), Errno> {
    rustix::process::pidfd_open(rustix::process::getpid(), rustix::process::PidfdFlags::empty()).map(drop)
}

/// Whether this process runs as root.
pub(crate) fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// Whether this process has CAP_SYS_ADMIN in its effective set
/// ([capget(2)](https://man7.org/linux/man-pages/man2/capget.2.html)).
///
/// # Errors
/// capget's errno.
pub(crate) fn has_sys_admin() -> Result<bool, Errno> {
    let sets = rustix::thread::capabilities(None)?;
    Ok(sets.effective.contains(rustix::thread::CapabilitySet::SYS_ADMIN))
}
