//! The spec executor's side effects, run by the wrapper on the host before it
//! execs the runtime: the check of each temp target against the prepared
//! rootfs (the same landing rules as in the container's namespace, by fd),
//! and the growth of an engine-made `/dev/shm` (Docker's per-container shm, a
//! CRI pod's shm) on the host, by fd. What to check and grow comes from the
//! plan; nothing here decides sizes.

use std::os::fd::OwnedFd;
use std::path::Path;

use rustix::fs::{Mode, OFlags};

use super::error::{ApplyError, Call};
use super::resolve::Root;
use super::{mount, system, Done};
use crate::plan::{Action, Note, Plan, SHM_PATH};
use crate::size::Bytes;

/// What the check of the targets found.
#[derive(Debug, Default)]
pub(crate) struct Checked {
    /// Targets left alone, each with its note.
    pub refused: Vec<(String, Note)>,
    /// Mountpoint directories whose mode was set to the tmpfs' mode.
    pub chmodded: Vec<String>,
}

/// Resolves every temp target of `plan` in the prepared `rootfs` with the
/// hook's rules (in-root resolution, missing directories made by fd, where
/// the path lands, one mount per directory), and gives each mountpoint
/// directory the mode of its tmpfs: runc gives a tmpfs from the spec the mode
/// of the directory it covers, whatever `mode=` says (runc 1.1.5, measured).
///
/// # Errors
/// A rootfs that cannot be opened, or a failure that is not a property of
/// the image.
pub(crate) fn check_targets(rootfs: &Path, plan: &Plan) -> Result<Checked, ApplyError> {
    let mut root = Root::open(rootfs)?;
    let mut checked = Checked::default();
    for action in &plan.actions {
        let Action::MountTmpfs { target, tmpfs, .. } = action else { continue };
        let what = target.as_str();
        match root.resolve_target(target)? {
            Err(note) => checked.refused.push((what.to_string(), note)),
            Ok(fd) => {
                if set_mode(&fd, tmpfs.mode, what)? {
                    checked.chmodded.push(what.to_string());
                }
            }
        }
    }
    Ok(checked)
}

/// Gives the directory `fd` (an `O_PATH` fd, chmod'ed through its
/// `/proc/self/fd` link) `mode` when it has another; whether it did.
fn set_mode(fd: &OwnedFd, mode: u32, what: &str) -> Result<bool, ApplyError> {
    let st = rustix::fs::fstat(fd).map_err(|e| ApplyError::sys(Call::Stat, "reading", what, e))?;
    if st.st_mode & 0o7777 == mode {
        return Ok(false);
    }
    let link = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(fd));
    match rustix::fs::chmod(link.as_str(), Mode::from_raw_mode(mode)) {
        Ok(()) => Ok(true),
        // A rootfs we may not change: the tmpfs keeps the directory's mode.
        Err(rustix::io::Errno::ROFS | rustix::io::Errno::PERM | rustix::io::Errno::ACCESS) => Ok(false),
        Err(e) => Err(ApplyError::sys(Call::Fchmod, "setting the mode of the mountpoint", what, e)),
    }
}

/// Grows the engine-made tmpfs at `source` on the host to `size`, never
/// shrinking it. `source` is opened `O_PATH|O_NOFOLLOW|O_DIRECTORY`, and must
/// be the root of a tmpfs mount that is not the host's own `/dev/shm`.
///
/// # Errors
/// The kernel refused the resize; what is not a growable engine shm is a note.
pub(crate) fn grow_shm(source: &Path, size: Bytes) -> Result<Result<Done, Note>, ApplyError> {
    let shown = source.display().to_string();
    let note =
        |reason: String, warn| Ok(Err(Note { subject: format!("{SHM_PATH} (from {shown})"), reason, warn }));
    let flags = OFlags::PATH | OFlags::NOFOLLOW | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let fd = match rustix::fs::open(source, flags, Mode::empty()) {
        Ok(fd) => fd,
        Err(e) => {
            return note(
                format!("its source cannot be opened as a directory without following a symlink: {e}"),
                true,
            )
        }
    };
    let st = rustix::fs::fstat(&fd).map_err(|e| ApplyError::sys(Call::Stat, "reading", shown.as_str(), e))?;
    let host = rustix::fs::stat(SHM_PATH).ok().map(|s| s.st_dev);
    if Some(st.st_dev) == host {
        return note("it is the host's own /dev/shm (host IPC); never resized".into(), false);
    }
    if !system::is_mount_root(&fd)? {
        return note("its source is not the root of a mount".into(), true);
    }
    let Some(current) = mount::tmpfs_size(&fd, &shown)? else {
        return note("its source is not a tmpfs".into(), true);
    };
    if current >= size {
        return note(format!("it already has {current}, not less than {size}; never shrunk"), false);
    }
    let fs = mount::resize(&fd, size, &shown)?;
    mount::reconfigure(&fs, &shown)?;
    Ok(Ok(Done::GrewShm { from: current, to: size, writable: false }))
}
