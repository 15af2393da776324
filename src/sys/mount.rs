//! Building and attaching mounts by fd (docs/design.md#hostile-rootfs rules 4-6): a tmpfs is
//! made detached with `fsopen(2)`/`fsconfig(2)`/`fsmount(2)` from the plan's
//! [`Tmpfs`], directories are made in it while nobody else can see it, and it
//! is attached with `move_mount(2)` onto a resolved fd; `/dev/shm` grows by
//! `fspick(2)` + `FSCONFIG_CMD_RECONFIGURE` on its superblock. Sizes reach the
//! kernel as numbers this program formatted; an already read-only mount is
//! made writable by a clone ([`writable_clone`], with `mount_setattr(2)`:
//! the mount path's only `unsafe`, since rustix lacks it). Whether a tmpfs is
//! grown at all is [`growth`], the never-shrink rule; what each effect did
//! is a [`Done`], for the log. No path resolution here, and no choice of
//! what to mount: that comes from the plan.

use std::os::fd::{AsRawFd, OwnedFd};

use std::fmt;

use rustix::fs::{AtFlags, Mode, OFlags, StatxAttributes, StatxFlags};
use rustix::io::Errno;
use rustix::mount::{FsMountFlags, FsOpenFlags, FsPickFlags, MountAttrFlags, MoveMountFlags, OpenTreeFlags};

use super::error::{fail, SysError, Syscall};
use crate::plan::{Owner, Tmpfs, SHM_PATH, TMPFS_MODE};
use crate::size::Bytes;

/// One effect carried out, for the log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Done {
    /// A fresh tmpfs on a temp target.
    Mounted { target: String, size: Bytes },
    /// A fresh tmpfs on `/dev/shm`, where there was none.
    MountedShm { size: Bytes },
    /// `/dev/shm`'s tmpfs resized; `writable`: its read-only flag cleared too.
    GrewShm { from: Bytes, to: Bytes, writable: bool },
    /// `/dev/shm` made writable (big enough already).
    ShmWritable,
}

impl fmt::Display for Done {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Done::Mounted { target, size } => write!(f, "mounted tmpfs on {target} (size {})", size.approx()),
            Done::MountedShm { size } => {
                write!(f, "mounted tmpfs on {SHM_PATH} (there was none; size {})", size.approx())
            }
            Done::GrewShm { from, to, writable } => {
                write!(f, "grew {SHM_PATH} from {} to {}", from.approx(), to.approx())?;
                if *writable {
                    f.write_str(" and made it writable (the spec mounts it read-only)")?;
                }
                Ok(())
            }
            Done::ShmWritable => write!(f, "made {SHM_PATH} writable (the spec mounts it read-only)"),
        }
    }
}

/// `TMPFS_MAGIC` from `<linux/magic.h>`.
pub(crate) const TMPFS_MAGIC: u64 = 0x0102_1994;

/// `SELINUX_MAGIC` from `<linux/magic.h>`.
const SELINUX_MAGIC: u64 = 0xf97c_ff8c;

/// Whether SELinux is on: selinuxfs is mounted at `/sys/fs/selinux`.
pub(crate) fn selinux_enabled() -> bool {
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
pub(crate) fn build(t: &Tmpfs, subdirs: &[String], what: &str, selinux: bool) -> Result<OwnedFd, SysError> {
    let fs = rustix::mount::fsopen("tmpfs", FsOpenFlags::FSOPEN_CLOEXEC).map_err(fail(
        Syscall::Fsopen,
        "creating a tmpfs context for",
        what,
    ))?;
    let set = |key: &str, value: String, op| {
        rustix::mount::fsconfig_set_string(&fs, key, value).map_err(fail(Syscall::Fsconfig, op, what))
    };
    set("size", t.size.bytes.0.to_string(), "setting the tmpfs size for")?;
    set("source", crate::names::MOUNT_SOURCE.into(), "naming the tmpfs for")?;
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
                    Syscall::Fsconfig,
                    "setting the SELinux context (the spec's mountLabel) for",
                    what,
                )(e))
            }
        }
    }
    rustix::mount::fsconfig_create(&fs).map_err(fail(Syscall::Fsconfig, "creating the tmpfs for", what))?;
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
        Syscall::Fsmount,
        "making the tmpfs mount for",
        what,
    ))?;
    // A target nested in another is a temp or cache dir: mode 1777 like
    // every temp dir, whatever the outer tmpfs' mode (a home's is its own).
    for dir in subdirs {
        make_dirs(&mnt, dir, TMPFS_MODE, t.owner).map_err(|(call, e)| {
            SysError::sys(call, "creating a directory in the new tmpfs", format!("{what}/{dir}"), e)
        })?;
    }
    Ok(mnt)
}

/// Creates `rel` (and its parents) with `mode` inside a fresh, still detached
/// tmpfs: nobody else can see it yet, and `O_NOFOLLOW` keeps it that simple.
fn make_dirs(mnt: &OwnedFd, rel: &str, mode: u32, owner: Option<Owner>) -> Result<(), (Syscall, Errno)> {
    let open = |dir: &OwnedFd, name: &str| {
        rustix::fs::openat(
            dir,
            name,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| (Syscall::Open, e))
    };
    let mut dir = open(mnt, ".")?;
    for part in rel.split('/').filter(|p| !p.is_empty()) {
        match rustix::fs::mkdirat(&dir, part, Mode::from_raw_mode(0o700)) {
            Ok(()) | Err(Errno::EXIST) => {}
            Err(e) => return Err((Syscall::Mkdirat, e)),
        }
        dir = open(&dir, part)?;
        if let Some(o) = owner {
            let (uid, gid) = (rustix::fs::Uid::from_raw(o.uid), rustix::fs::Gid::from_raw(o.gid));
            rustix::fs::fchown(&dir, Some(uid), Some(gid)).map_err(|e| (Syscall::Fchown, e))?;
        }
        rustix::fs::fchmod(&dir, Mode::from_raw_mode(mode)).map_err(|e| (Syscall::Fchmod, e))?;
    }
    Ok(())
}

/// The size of the tmpfs whose root `fd` is, or `None` for another filesystem.
///
/// # Errors
/// `fstatfs` failing.
pub(crate) fn tmpfs_size(fd: &OwnedFd, what: &str) -> Result<Option<Bytes>, SysError> {
    let sfs = rustix::fs::fstatfs(fd).map_err(|e| SysError::sys(Syscall::Statfs, "reading", what, e))?;
    if sfs.f_type as u64 != TMPFS_MAGIC {
        return Ok(None);
    }
    Ok(Some(Bytes((sfs.f_blocks as u64).saturating_mul(sfs.f_bsize as u64))))
}

/// Whether a tmpfs of `current` bytes is grown to `size`: never shrunk, so
/// `Err` (why not) when it has at least that much already.
pub(crate) fn growth(current: Bytes, size: Bytes) -> Result<(), String> {
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
pub(crate) fn resize(fd: &OwnedFd, size: Bytes, what: &str) -> Result<OwnedFd, SysError> {
    let fs = rustix::mount::fspick(fd, "", FsPickFlags::FSPICK_EMPTY_PATH | FsPickFlags::FSPICK_CLOEXEC)
        .map_err(fail(Syscall::Fspick, "picking the superblock of", what))?;
    rustix::mount::fsconfig_set_string(&fs, "size", size.0.to_string()).map_err(fail(
        Syscall::Fsconfig,
        "setting the size of",
        what,
    ))?;
    Ok(fs)
}

/// Applies a context made by [`resize`].
///
/// # Errors
/// The kernel refused.
pub(crate) fn reconfigure(fs: &OwnedFd, what: &str) -> Result<(), SysError> {
    rustix::mount::fsconfig_reconfigure(fs).map_err(fail(Syscall::Fsconfig, "resizing the tmpfs of", what))
}

/// Attaches the detached mount `mnt` onto the resolved directory `target`.
///
/// # Errors
/// The kernel refused.
pub(crate) fn attach(mnt: &OwnedFd, target: &OwnedFd, what: &str) -> Result<(), SysError> {
    rustix::mount::move_mount(
        mnt,
        "",
        target,
        "",
        MoveMountFlags::MOVE_MOUNT_F_EMPTY_PATH | MoveMountFlags::MOVE_MOUNT_T_EMPTY_PATH,
    )
    .map_err(fail(Syscall::MoveMount, "attaching the tmpfs on", what))
}

/// Detaches an attached mount (rollback, best effort), through its magic
/// link in the host's procfs `proc`.
pub(crate) fn detach(proc: &super::procfs::Proc, mnt: &OwnedFd) {
    if let Err(e) = proc.detach_fd(mnt) {
        log::error!("detaching a tmpfs after a failed mount: umount2: {e}");
    }
}

/// A writable clone of the mount whose root `mnt` is: detached, the same
/// superblock (the same files, the same size), with its read-only flag
/// cleared, to be attached over it. Not the mount itself: crun re-applies a
/// spec's `ro` to its own mount after every hook has run, by the fd it kept
/// (docs/design.md#readonly-shm), so a flag cleared there does not last; a
/// mount stacked on it does.
///
/// # Errors
/// `open_tree(2)` or `mount_setattr(2)` refused (a flag locked by a user
/// namespace: EPERM).
pub(crate) fn writable_clone(mnt: &OwnedFd, what: &str) -> Result<OwnedFd, SysError> {
    clone_writable(mnt).map_err(|(call, e)| match call {
        Syscall::OpenTree => SysError::sys(call, "cloning the mount, to make it writable:", what, e),
        _ => SysError::sys(call, "making the mount writable:", what, e),
    })
}

/// [`writable_clone`] with the failed call and its errno: `open_tree(2)`
/// `OPEN_TREE_CLONE`, then [`clear_read_only`].
pub(super) fn clone_writable(mnt: &OwnedFd) -> Result<OwnedFd, (Syscall, Errno)> {
    let clone = rustix::mount::open_tree(
        mnt,
        "",
        OpenTreeFlags::OPEN_TREE_CLONE | OpenTreeFlags::OPEN_TREE_CLOEXEC | OpenTreeFlags::AT_EMPTY_PATH,
    )
    .map_err(|e| (Syscall::OpenTree, e))?;
    clear_read_only(&clone).map_err(|e| (Syscall::MountSetattr, e))?;
    Ok(clone)
}

/// `mount_setattr(2)` (Linux 5.12) clearing `MOUNT_ATTR_RDONLY` on a mount
/// (detached, or the root of one, by fd); rustix has no wrapper for it.
#[allow(unsafe_code)]
fn clear_read_only(mnt: &OwnedFd) -> Result<(), Errno> {
    /// `struct mount_attr` from `<linux/mount.h>`.
    #[repr(C)]
    struct MountAttr {
        attr_set: u64,
        attr_clr: u64,
        propagation: u64,
        userns_fd: u64,
    }
    // MOUNT_ATTR_SIZE_VER0: the size the kernel reads for this layout.
    const _: () = assert!(std::mem::size_of::<MountAttr>() == 32);
    const MOUNT_ATTR_RDONLY: u64 = 0x1;
    let attr = MountAttr { attr_set: 0, attr_clr: MOUNT_ATTR_RDONLY, propagation: 0, userns_fd: 0 };
    // SAFETY: the path is a NUL-terminated empty string, `attr` is a valid
    // `struct mount_attr` that outlives the call, and its size is passed.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            mnt.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_EMPTY_PATH,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    if rc < 0 {
        return Err(Errno::from_io_error(&std::io::Error::last_os_error()).unwrap_or(Errno::INVAL));
    }
    Ok(())
}

/// Whether `fd` is the root of a mount (`STATX_ATTR_MOUNT_ROOT`, Linux 5.8).
///
/// # Errors
/// `statx` failing.
pub(crate) fn is_mount_root(fd: &OwnedFd) -> Result<bool, SysError> {
    let sx = rustix::fs::statx(fd, "", AtFlags::EMPTY_PATH, StatxFlags::BASIC_STATS)
        .map_err(|e| SysError::sys(Syscall::Statx, "reading", SHM_PATH, e))?;
    Ok(sx.stx_attributes_mask.contains(StatxAttributes::MOUNT_ROOT)
        && sx.stx_attributes.contains(StatxAttributes::MOUNT_ROOT))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tmpfs is grown only to more than it has: never shrunk, and the
    /// reason says so.
    #[test]
    fn growth_never_shrinks() {
        assert_eq!(growth(Bytes(64 << 20), Bytes(1 << 30)), Ok(()));
        let same = growth(Bytes(1 << 30), Bytes(1 << 30)).unwrap_err();
        assert!(same.ends_with("never shrunk"), "{same}");
        assert!(growth(Bytes(2 << 30), Bytes(1 << 30)).is_err());
    }

    #[test]
    fn done_lines_say_what_was_done() {
        let cases = [
            (
                Done::Mounted { target: "/tmp".into(), size: Bytes(4 << 30) },
                "mounted tmpfs on /tmp (size 4Gi)",
            ),
            (
                Done::MountedShm { size: Bytes(1 << 29) },
                "mounted tmpfs on /dev/shm (there was none; size 512Mi)",
            ),
            (
                Done::GrewShm { from: Bytes(64 << 20), to: Bytes(12_342_044 << 10), writable: false },
                "grew /dev/shm from 64Mi to 12342044Ki (~11.8Gi)",
            ),
        ];
        for (done, want) in cases {
            assert_eq!(done.to_string(), want);
        }
    }
}
