//! Building and attaching mounts by fd (docs/design.md#hostile-rootfs rules 4-6): a tmpfs is
//! made detached with `fsopen(2)`/`fsconfig(2)`/`fsmount(2)` from the plan's
//! [`Tmpfs`], directories are made in it while nobody else can see it, and it
//! is attached with `move_mount(2)` onto a resolved fd; `/dev/shm` grows by
//! `fspick(2)` + `FSCONFIG_CMD_RECONFIGURE` on its superblock. Sizes reach the
//! kernel as numbers this program formatted. No path resolution here.

use std::os::fd::{AsRawFd, OwnedFd};

use rustix::fs::{Mode, OFlags};
use rustix::io::Errno;
use rustix::mount::{FsMountFlags, FsOpenFlags, FsPickFlags, MountAttrFlags, MoveMountFlags, UnmountFlags};

use super::syscall::{fail, ApplyError, Call};
use crate::plan::{Owner, Tmpfs};
use crate::size::Bytes;

/// `TMPFS_MAGIC` from `<linux/magic.h>`.
const TMPFS_MAGIC: u64 = 0x0102_1994;

/// `SELINUX_MAGIC` from `<linux/magic.h>`.
const SELINUX_MAGIC: u64 = 0xf97c_ff8c;

/// Whether SELinux is on: selinuxfs is mounted at `/sys/fs/selinux`.
pub(super) fn selinux_enabled() -> bool {
    rustix::fs::statfs("/sys/fs/selinux").is_ok_and(|st| st.f_type as u64 == SELINUX_MAGIC)
}

/// A detached tmpfs built from `t`, with `subdirs` made in it. `what` names
/// the target in errors. `t.label` goes in as `context=`; where the kernel
/// refuses that key (EINVAL, as a kernel without SELinux does) and
/// `selinux` is false, the tmpfs is made without it, since no label would
/// be checked (docs/design.md#selinux).
///
/// # Errors
/// The kernel refused a step.
pub(super) fn build(t: &Tmpfs, subdirs: &[String], what: &str, selinux: bool) -> Result<OwnedFd, ApplyError> {
    let fs = rustix::mount::fsopen("tmpfs", FsOpenFlags::FSOPEN_CLOEXEC).map_err(fail(
        Call::Fsopen,
        "creating a tmpfs context for",
        what,
    ))?;
    let set = |key: &str, value: String, op| {
        rustix::mount::fsconfig_set_string(&fs, key, value).map_err(fail(Call::Fsconfig, op, what))
    };
    set("size", t.size.bytes.0.to_string(), "setting the tmpfs size for")?;
    set("source", "oci-tmpfs-hook".into(), "naming the tmpfs for")?;
    set("mode", format!("{:o}", t.mode), "setting the tmpfs mode for")?;
    if let Some(n) = t.nr_inodes {
        set("nr_inodes", n.to_string(), "setting nr_inodes for")?;
    }
    if let Some(o) = t.owner {
        // Host ids: the fs context belongs to our (initial) user namespace.
        set("uid", o.uid.to_string(), "setting the tmpfs owner for")?;
        set("gid", o.gid.to_string(), "setting the tmpfs group for")?;
    }
    if let Some(label) = &t.label {
        match rustix::mount::fsconfig_set_string(&fs, "context", label.as_str()) {
            Ok(()) => {}
            Err(Errno::INVAL) if !selinux => {
                log::debug!(
                    "{what}: the kernel has no SELinux and refuses context={label:?}: mounted unlabelled"
                );
            }
            Err(e) => {
                return Err(fail(
                    Call::Fsconfig,
                    "setting the SELinux context (the spec's mountLabel) for",
                    what,
                )(e))
            }
        }
    }
    rustix::mount::fsconfig_create(&fs).map_err(fail(Call::Fsconfig, "creating the tmpfs for", what))?;
    let mut attrs = MountAttrFlags::empty();
    for (on, flag) in [
        (t.nosuid, MountAttrFlags::MOUNT_ATTR_NOSUID),
        (t.nodev, MountAttrFlags::MOUNT_ATTR_NODEV),
        (t.noexec, MountAttrFlags::MOUNT_ATTR_NOEXEC),
    ] {
        if on {
            attrs |= flag;
        }
    }
    let mnt = rustix::mount::fsmount(&fs, FsMountFlags::FSMOUNT_CLOEXEC, attrs).map_err(fail(
        Call::Fsmount,
        "making the tmpfs mount for",
        what,
    ))?;
    for dir in subdirs {
        make_dirs(&mnt, dir, t.mode, t.owner).map_err(|(call, e)| {
            ApplyError::sys(call, "creating a directory in the new tmpfs", format!("{what}/{dir}"), e)
        })?;
    }
    Ok(mnt)
}

/// Creates `rel` (and its parents) with `mode` inside a fresh, still detached
/// tmpfs: nobody else can see it yet, and `O_NOFOLLOW` keeps it that simple.
fn make_dirs(mnt: &OwnedFd, rel: &str, mode: u32, owner: Option<Owner>) -> Result<(), (Call, Errno)> {
    let open = |dir: &OwnedFd, name: &str| {
        rustix::fs::openat(
            dir,
            name,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| (Call::Open, e))
    };
    let mut dir = open(mnt, ".")?;
    for part in rel.split('/').filter(|p| !p.is_empty()) {
        match rustix::fs::mkdirat(&dir, part, Mode::from_raw_mode(0o700)) {
            Ok(()) | Err(Errno::EXIST) => {}
            Err(e) => return Err((Call::Mkdirat, e)),
        }
        dir = open(&dir, part)?;
        if let Some(o) = owner {
            let (uid, gid) = (rustix::fs::Uid::from_raw(o.uid), rustix::fs::Gid::from_raw(o.gid));
            rustix::fs::fchown(&dir, Some(uid), Some(gid)).map_err(|e| (Call::Fchown, e))?;
        }
        rustix::fs::fchmod(&dir, Mode::from_raw_mode(mode)).map_err(|e| (Call::Fchmod, e))?;
    }
    Ok(())
}

/// The size of the tmpfs whose root `fd` is, or `None` for another filesystem.
///
/// # Errors
/// `fstatfs` failing.
pub(super) fn tmpfs_size(fd: &OwnedFd, what: &str) -> Result<Option<Bytes>, ApplyError> {
    let sfs = rustix::fs::fstatfs(fd).map_err(|e| ApplyError::sys(Call::Statfs, "reading", what, e))?;
    if sfs.f_type as u64 != TMPFS_MAGIC {
        return Ok(None);
    }
    Ok(Some(Bytes((sfs.f_blocks as u64).saturating_mul(sfs.f_bsize as u64))))
}

/// Whether a tmpfs of `current` bytes is grown to `size`: never shrunk, so
/// `Err` (why not) when it has at least that much already.
pub(super) fn growth(current: Bytes, size: Bytes) -> Result<(), String> {
    if current >= size {
        return Err(format!("it already has {current}, not less than {size}; never shrunk"));
    }
    Ok(())
}

/// A superblock context of the mount `fd` with the new size set, to apply
/// with [`reconfigure`].
///
/// # Errors
/// The kernel refused.
pub(super) fn resize(fd: &OwnedFd, size: Bytes, what: &str) -> Result<OwnedFd, ApplyError> {
    let fs = rustix::mount::fspick(fd, "", FsPickFlags::FSPICK_EMPTY_PATH | FsPickFlags::FSPICK_CLOEXEC)
        .map_err(fail(Call::Fspick, "picking the superblock of", what))?;
    rustix::mount::fsconfig_set_string(&fs, "size", size.0.to_string()).map_err(fail(
        Call::Fsconfig,
        "setting the size of",
        what,
    ))?;
    Ok(fs)
}

/// Applies a context made by [`resize`].
///
/// # Errors
/// The kernel refused.
pub(super) fn reconfigure(fs: &OwnedFd, what: &str) -> Result<(), ApplyError> {
    rustix::mount::fsconfig_reconfigure(fs).map_err(fail(Call::Fsconfig, "resizing the tmpfs of", what))
}

/// Attaches the detached mount `mnt` onto the resolved directory `target`.
///
/// # Errors
/// The kernel refused.
pub(super) fn attach(mnt: &OwnedFd, target: &OwnedFd, what: &str) -> Result<(), ApplyError> {
    rustix::mount::move_mount(
        mnt,
        "",
        target,
        "",
        MoveMountFlags::MOVE_MOUNT_F_EMPTY_PATH | MoveMountFlags::MOVE_MOUNT_T_EMPTY_PATH,
    )
    .map_err(fail(Call::MoveMount, "attaching the tmpfs on", what))
}

/// Detaches an attached mount (rollback, best effort).
pub(super) fn detach(mnt: &OwnedFd) {
    let link = format!("/proc/self/fd/{}", mnt.as_raw_fd());
    if let Err(e) = rustix::mount::unmount(link.as_str(), UnmountFlags::DETACH) {
        log::error!("detaching a tmpfs after a failed mount: {e}");
    }
}
