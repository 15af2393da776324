//! The only module that changes anything: namespaces, path resolution inside
//! the rootfs, and mounts. DESIGN.md §2 is the rule book:
//!
//! - every path inside the rootfs is resolved with `openat2(2)` and
//!   `RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS` from an `O_PATH` fd of the
//!   rootfs, plus `RESOLVE_NO_XDEV` for temp targets, so that "already a mount
//!   point" reads as `EXDEV`;
//! - missing directories are created with `mkdirat(2)` on such fds;
//! - tmpfs instances are built with `fsopen(2)`/`fsconfig(2)`/`fsmount(2)` and
//!   attached with `move_mount(2)` onto the target fd: no path is resolved twice;
//! - `/dev/shm` is grown by `fspick(2)` + `FSCONFIG_CMD_RECONFIGURE` on its
//!   superblock, so every process sharing it sees the new size;
//! - sizes go to the kernel as numbers this program formatted.

use std::collections::HashSet;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::Path;

use rustix::fs::{AtFlags, FileType, Mode, OFlags, ResolveFlags, StatxAttributes, StatxFlags};
use rustix::io::Errno;
use rustix::mount::{
    FsMountFlags, FsOpenFlags, FsPickFlags, MountAttrFlags, MoveMountFlags, OpenTreeFlags, UnmountFlags,
};
use rustix::process::{Pid, PidfdFlags};
use rustix::thread::{LinkNameSpaceType, ThreadNameSpaceType};

use super::{ApplyError, Mounter, Prepared, TmpfsOptions};
use crate::plan::{Owner, SHM_PATH};
use crate::size::Bytes;
use crate::stage::Stage;
use crate::target::{self, TargetPath};

/// `TMPFS_MAGIC` from `<linux/magic.h>`.
const TMPFS_MAGIC: u64 = 0x0102_1994;

/// How often to retry `openat2` when the kernel reports a concurrent rename.
const EAGAIN_RETRIES: usize = 16;

/// A namespace's identity: device and inode of its nsfs file.
type NsId = (u64, u64);

/// A prepared effect.
#[derive(Debug)]
pub enum Pending {
    /// Attach the detached mount `mnt` onto `target`.
    Attach { mnt: OwnedFd, target: OwnedFd, what: String },
    /// Apply the new size configured on the superblock context `fs`.
    Reconfigure { fs: OwnedFd, what: String },
}

/// The real thing.
#[derive(Debug, Default)]
pub struct System {
    /// Device of the host's `/dev/shm`, read before joining the container.
    host_shm: Option<u64>,
    root: Option<OwnedFd>,
    /// The rootfs path as the kernel names it in this mount namespace.
    root_name: String,
    /// A writable clone of the rootfs mount, made when a directory must be
    /// created and the rootfs mount is already read-only.
    writable_root: Option<OwnedFd>,
    /// Mounts attached so far, for rollback.
    attached: Vec<OwnedFd>,
    /// Directories (device, inode) that already have a tmpfs prepared, and
    /// for which target: two targets reached through symlinks (`/var -> /`
    /// with `TMPDIR=/var/tmp`) must not stack two mounts.
    prepared: Vec<((u64, u64), String)>,
}

fn ns_id(path: &str) -> Result<NsId, ApplyError> {
    let st = rustix::fs::stat(path).map_err(|e| ApplyError::sys("reading namespace", path, e))?;
    Ok((st.st_dev, st.st_ino))
}

/// Mount ids listed in `/proc/<who>/mountinfo`.
fn mount_ids(who: &str) -> Option<HashSet<u64>> {
    let text = std::fs::read_to_string(format!("/proc/{who}/mountinfo")).ok()?;
    let ids: HashSet<u64> = text.lines().filter_map(|l| l.split(' ').next()?.parse().ok()).collect();
    (!ids.is_empty()).then_some(ids)
}

/// Whether processes `a` and `b` (pids or `self`) share a mount namespace,
/// or `None` when that cannot be told. `/proc/<pid>/ns/mnt` is the direct
/// answer, but reading it needs ptrace access, which some hosts deny even to
/// root for pid 1 (sandboxes, hardened procfs). The mount ids of
/// `/proc/<pid>/mountinfo` answer too: a mount belongs to exactly one
/// namespace, and copying a namespace gives every mount a new id.
fn same_mount_ns(a: &str, b: &str) -> Option<bool> {
    if let (Ok(x), Ok(y)) = (ns_id(&format!("/proc/{a}/ns/mnt")), ns_id(&format!("/proc/{b}/ns/mnt"))) {
        return Some(x == y);
    }
    let (x, y) = (mount_ids(a)?, mount_ids(b)?);
    Some(!x.is_disjoint(&y))
}

/// Refuses when process `who` is in the mount namespace of pid 1 (the
/// host's init in our procfs), or when that cannot be told: never guess.
fn outside_init(who: &str, stage: Stage) -> Result<(), ApplyError> {
    match same_mount_ns(who, "1") {
        Some(false) => Ok(()),
        Some(true) => Err(ApplyError::SameNamespace(stage)),
        None => Err(ApplyError::InitUnknown),
    }
}

/// The error for a syscall the kernel does not have (`ENOSYS`), naming the
/// Linux version that added it.
fn unsupported(call: &'static str) -> ApplyError {
    let since = match call {
        "openat2" => "5.6",
        "pidfd_open" => "5.3",
        _ => "5.2", // fsopen, fsconfig, fsmount, move_mount, fspick
    };
    ApplyError::Unsupported { call, since }
}

/// Maps `e` from `call` to an [`ApplyError`]: `ENOSYS` names the kernel needed.
fn sys_err(call: &'static str, op: &'static str, path: impl Into<String>, e: Errno) -> ApplyError {
    if e == Errno::NOSYS {
        unsupported(call)
    } else {
        ApplyError::sys(op, path, e)
    }
}

/// Number of pid namespaces this process is in, from `NSpid` in
/// `/proc/self/status`: more than one means we already run inside a container.
pub fn pid_namespace_depth() -> usize {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find_map(|l| l.strip_prefix("NSpid:")).map(|v| v.split_whitespace().count()))
        .unwrap_or(1)
}

/// Picks the stage when the registration did not say: inside a pid namespace
/// means createContainer; a live pid in another mount namespace means a
/// runtime-namespace stage; anything else is refused.
///
/// # Errors
/// [`ApplyError::UnknownStage`].
pub fn detect_stage(pid: Option<i64>) -> Result<Stage, ApplyError> {
    if pid_namespace_depth() > 1 {
        return Ok(Stage::CreateContainer);
    }
    if let Some(p) = pid.filter(|&p| p > 1) {
        let own = ns_id("/proc/self/ns/mnt")?;
        if let Ok(theirs) = ns_id(&format!("/proc/{p}/ns/mnt")) {
            if theirs != own && same_mount_ns(&p.to_string(), "1") == Some(false) {
                return Ok(Stage::CreateRuntime);
            }
        }
    }
    Err(ApplyError::UnknownStage(pid))
}

fn fd_name(fd: &impl AsRawFd) -> String {
    let link = format!("/proc/self/fd/{}", fd.as_raw_fd());
    rustix::fs::readlink(link.as_str(), Vec::new())
        .map(|c| c.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// `openat2(root, rel, O_PATH|O_DIRECTORY)` inside the root, retried on `EAGAIN`.
fn resolve(root: &OwnedFd, rel: &str, flags: ResolveFlags) -> Result<OwnedFd, Errno> {
    let mut last = Errno::AGAIN;
    for _ in 0..EAGAIN_RETRIES {
        match rustix::fs::openat2(
            root,
            rel,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
            flags,
        ) {
            Err(Errno::AGAIN) => last = Errno::AGAIN,
            other => return other,
        }
    }
    Err(last)
}

/// Like [`resolve`], creating missing directories one component at a time,
/// each with `mkdirat` on the fd of its (resolved) parent. Where the rootfs
/// mount is already read-only (crun at createContainer), the directory is
/// created through `writable`, a writable clone of the same rootfs mount.
fn resolve_or_create(
    root: &OwnedFd,
    rel: &str,
    flags: ResolveFlags,
    writable: &mut Option<OwnedFd>,
) -> Result<OwnedFd, Errno> {
    match resolve(root, rel, flags) {
        Err(Errno::NOENT) => {}
        other => return other,
    }
    let parts: Vec<&str> = rel.split('/').filter(|p| !p.is_empty()).collect();
    let mut parent: Option<OwnedFd> = None;
    for i in 0..parts.len() {
        let prefix = parts[..=i].join("/");
        let fd = match resolve(root, &prefix, flags) {
            Err(Errno::NOENT) => {
                let dir = parent.as_ref().unwrap_or(root);
                match rustix::fs::mkdirat(dir, parts[i], Mode::from_raw_mode(0o755)) {
                    Ok(()) | Err(Errno::EXIST) => {}
                    Err(Errno::ROFS) => mkdir_through_clone(root, &parts[..=i], flags, writable)?,
                    Err(e) => return Err(e),
                }
                resolve(root, &prefix, flags)?
            }
            other => other?,
        };
        parent = Some(fd);
    }
    parent.ok_or(Errno::INVAL)
}

/// Creates the last of `parts` through a writable clone of the rootfs mount
/// (made once, kept in `writable`). The clone is detached and private to this
/// process: the container's own mount stays read-only.
fn mkdir_through_clone(
    root: &OwnedFd,
    parts: &[&str],
    flags: ResolveFlags,
    writable: &mut Option<OwnedFd>,
) -> Result<(), Errno> {
    if writable.is_none() {
        let clone = rustix::mount::open_tree(
            root,
            "",
            OpenTreeFlags::OPEN_TREE_CLONE | OpenTreeFlags::OPEN_TREE_CLOEXEC | OpenTreeFlags::AT_EMPTY_PATH,
        )?;
        clear_read_only(&clone)?;
        *writable = Some(clone);
    }
    let clone = writable.as_ref().expect("set above");
    let (last, parents) = parts.split_last().ok_or(Errno::INVAL)?;
    let parent = if parents.is_empty() {
        resolve(clone, ".", flags)?
    } else {
        resolve(clone, &parents.join("/"), flags)?
    };
    match rustix::fs::mkdirat(&parent, *last, Mode::from_raw_mode(0o755)) {
        Ok(()) | Err(Errno::EXIST) => Ok(()),
        Err(e) => Err(e),
    }
}

/// `mount_setattr(2)` (Linux 5.12) clearing `MOUNT_ATTR_RDONLY` on a detached
/// mount; rustix has no wrapper for it.
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

/// Creates `rel` (and its parents), mode 1777, inside a fresh, still detached
/// tmpfs: nobody else can see it yet, and `O_NOFOLLOW` keeps it that simple.
fn make_dirs_1777(mnt: &OwnedFd, rel: &str, owner: Option<Owner>) -> Result<(), Errno> {
    let mut dir =
        rustix::fs::openat(mnt, ".", OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())?;
    for part in rel.split('/').filter(|p| !p.is_empty()) {
        match rustix::fs::mkdirat(&dir, part, Mode::from_raw_mode(0o700)) {
            Ok(()) | Err(Errno::EXIST) => {}
            Err(e) => return Err(e),
        }
        dir = rustix::fs::openat(
            &dir,
            part,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        if let Some(o) = owner {
            rustix::fs::fchown(
                &dir,
                Some(rustix::fs::Uid::from_raw(o.uid)),
                Some(rustix::fs::Gid::from_raw(o.gid)),
            )?;
        }
        rustix::fs::fchmod(&dir, Mode::from_raw_mode(0o1777))?;
    }
    Ok(())
}

/// A temp target that the image's layout rules out: why, and whether to warn.
fn skip_reason(err: Errno) -> Option<&'static str> {
    Some(match err {
        Errno::XDEV => {
            "it is already a mount point, or its path crosses one (a volume, or a symlink into another mount)"
        }
        Errno::NOTDIR => "the image has something other than a directory there",
        Errno::LOOP => "its path has a symlink loop or a /proc magic link",
        Errno::NOENT => "it is a dangling symlink in the image",
        Errno::ROFS => "it is missing and the rootfs cannot be written to create it",
        Errno::NAMETOOLONG => "its path is too long",
        _ => return None,
    })
}

impl System {
    /// Where `fd` landed, as a path inside the rootfs, or `None` when outside.
    fn landed(&self, fd: &OwnedFd) -> Option<String> {
        let name = fd_name(fd);
        let rest = name.strip_prefix(&self.root_name)?;
        match rest {
            "" => Some("/".to_string()),
            r if r.starts_with('/') => Some(r.to_string()),
            _ => None,
        }
    }

    fn new_tmpfs(
        &self,
        size: Bytes,
        nr_inodes: Option<u64>,
        owner: Option<Owner>,
        attrs: MountAttrFlags,
        what: &str,
    ) -> Result<OwnedFd, ApplyError> {
        let err = |call, op| move |e: Errno| sys_err(call, op, what.to_string(), e);
        let fs = rustix::mount::fsopen("tmpfs", FsOpenFlags::FSOPEN_CLOEXEC)
            .map_err(err("fsopen", "creating a tmpfs context for"))?;
        let set = |key: &str, value: String, op| {
            rustix::mount::fsconfig_set_string(&fs, key, value).map_err(err("fsconfig", op))
        };
        set("size", size.0.to_string(), "setting the tmpfs size for")?;
        set("source", "oci-tmpfs-hook".into(), "naming the tmpfs for")?;
        set("mode", "1777".into(), "setting the tmpfs mode for")?;
        if let Some(n) = nr_inodes {
            set("nr_inodes", n.to_string(), "setting nr_inodes for")?;
        }
        if let Some(o) = owner {
            // Host ids: the fs context belongs to our (initial) user namespace.
            set("uid", o.uid.to_string(), "setting the tmpfs owner for")?;
            set("gid", o.gid.to_string(), "setting the tmpfs group for")?;
        }
        rustix::mount::fsconfig_create(&fs).map_err(err("fsconfig", "creating the tmpfs for"))?;
        rustix::mount::fsmount(&fs, FsMountFlags::FSMOUNT_CLOEXEC, attrs)
            .map_err(err("fsmount", "making the tmpfs mount for"))
    }
}

impl Mounter for System {
    type Pending = Pending;

    fn enter(&mut self, stage: Stage, pid: Option<i64>) -> Result<(), ApplyError> {
        // Before anything else: what the host's /dev/shm is (DESIGN.md §2 rule 6).
        self.host_shm = rustix::fs::stat(SHM_PATH).ok().map(|s| s.st_dev);
        let own = ns_id("/proc/self/ns/mnt")?;
        match stage {
            Stage::StartContainer => Err(ApplyError::TooLate),
            Stage::CreateContainer => {
                // We must already be in the container's mount namespace, before
                // pivot_root. Two independent proofs, both required: the
                // runtime started us inside the container's pid namespace (runc
                // and crun both do), and our mount namespace is not pid 1's
                // (told by mount ids where /proc/1/ns is unreadable).
                if pid_namespace_depth() < 2 {
                    return Err(ApplyError::NotInContainer);
                }
                outside_init("self", stage)
            }
            Stage::Prestart | Stage::CreateRuntime => {
                if pid_namespace_depth() > 1 {
                    return Err(ApplyError::InsideContainer(stage));
                }
                // pid 0 and 1 are what runtimes pass at createContainer; 1 is
                // the host's init in our procfs. Never join those.
                let p = pid
                    .filter(|&p| p > 1)
                    .and_then(|p| i32::try_from(p).ok())
                    .and_then(Pid::from_raw)
                    .ok_or(ApplyError::BadPid(pid, stage))?;
                let raw = i64::from(p.as_raw_nonzero().get());
                let pidfd = rustix::process::pidfd_open(p, PidfdFlags::empty()).map_err(|e| match e {
                    Errno::SRCH => ApplyError::NoProcess(raw),
                    e => sys_err("pidfd_open", "opening a pidfd for process", raw.to_string(), e),
                })?;
                let theirs = ns_id(&format!("/proc/{raw}/ns/mnt"))?;
                if theirs == own {
                    return Err(ApplyError::SameNamespace(stage));
                }
                outside_init(&raw.to_string(), stage)?;
                // setns(2) by pidfd (Linux 5.8): bound to the process, not to a
                // pid number that could be reused.
                match rustix::thread::move_into_thread_name_spaces(pidfd.as_fd(), ThreadNameSpaceType::MOUNT)
                {
                    Ok(()) => {}
                    Err(Errno::INVAL) => {
                        let path = format!("/proc/{raw}/ns/mnt");
                        let nsfd =
                            rustix::fs::open(path.as_str(), OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty())
                                .map_err(|e| ApplyError::sys("opening", path.clone(), e))?;
                        // The pid must still be the same process after the open.
                        rustix::process::pidfd_send_signal(&pidfd, rustix::process::Signal::CONT)
                            .map_err(|_| ApplyError::NoProcess(raw))?;
                        rustix::thread::move_into_link_name_space(
                            nsfd.as_fd(),
                            Some(LinkNameSpaceType::Mount),
                        )
                        .map_err(|e| ApplyError::sys("joining the mount namespace of", path, e))?;
                    }
                    Err(e) => {
                        return Err(ApplyError::sys(
                            "joining the mount namespace of process",
                            raw.to_string(),
                            e,
                        ))
                    }
                }
                let now = ns_id("/proc/self/ns/mnt")?;
                if now == own {
                    return Err(ApplyError::SameNamespace(stage));
                }
                outside_init("self", stage)
            }
        }
    }

    fn open_root(&mut self, rootfs: &Path) -> Result<(), ApplyError> {
        let shown = rootfs.display().to_string();
        let fd = rustix::fs::open(rootfs, OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())
            .map_err(|e| ApplyError::sys("opening the rootfs", shown.clone(), e))?;
        let st =
            rustix::fs::fstat(&fd).map_err(|e| ApplyError::sys("reading the rootfs", shown.clone(), e))?;
        let host = rustix::fs::stat("/").map_err(|e| ApplyError::sys("reading", "/", e))?;
        self.root_name = fd_name(&fd);
        if (st.st_dev, st.st_ino) == (host.st_dev, host.st_ino)
            || self.root_name == "/"
            || self.root_name.is_empty()
        {
            return Err(ApplyError::RootIsHost(rootfs.to_path_buf()));
        }
        self.root = Some(fd);
        Ok(())
    }

    fn prepare_tmpfs(
        &mut self,
        target: &TargetPath,
        opts: TmpfsOptions,
    ) -> Result<Prepared<Pending>, ApplyError> {
        let flags = ResolveFlags::IN_ROOT | ResolveFlags::NO_MAGICLINKS | ResolveFlags::NO_XDEV;
        let fd = match resolve_or_create(
            self.root.as_ref().expect("open_root before prepare"),
            target.relative(),
            flags,
            &mut self.writable_root,
        ) {
            Ok(fd) => fd,
            Err(e) => {
                return match skip_reason(e) {
                    Some(reason) => Ok(Prepared::Skip { reason: reason.to_string(), warn: e != Errno::XDEV }),
                    None => Err(sys_err("openat2", "resolving inside the rootfs", target.to_string(), e)),
                }
            }
        };
        // The rules apply to where the path lands, not only to its text.
        match self.landed(&fd) {
            None => {
                return Ok(Prepared::Skip { reason: "it resolves outside the rootfs".into(), warn: true });
            }
            Some(real) if target::denied(&real) => {
                return Ok(Prepared::Skip {
                    reason: format!("it resolves to {real} inside the container, a system directory"),
                    warn: true,
                });
            }
            Some(_) => {}
        }
        let st = rustix::fs::fstat(&fd).map_err(|e| ApplyError::sys("reading", target.to_string(), e))?;
        let id = (st.st_dev, st.st_ino);
        if let Some((_, first)) = self.prepared.iter().find(|(d, _)| *d == id) {
            return Ok(Prepared::Skip { reason: format!("it is the same directory as {first}"), warn: true });
        }
        self.prepared.push((id, target.to_string()));
        let mut attrs = MountAttrFlags::MOUNT_ATTR_NOSUID | MountAttrFlags::MOUNT_ATTR_NODEV;
        if opts.noexec {
            attrs |= MountAttrFlags::MOUNT_ATTR_NOEXEC;
        }
        let mnt = self.new_tmpfs(opts.size, opts.nr_inodes, opts.owner, attrs, target.as_str())?;
        for dir in &opts.subdirs {
            make_dirs_1777(&mnt, dir, opts.owner).map_err(|e| {
                ApplyError::sys("creating a directory in the new tmpfs", format!("{target}/{dir}"), e)
            })?;
        }
        Ok(Prepared::Ready(Pending::Attach { mnt, target: fd, what: target.to_string() }))
    }

    fn prepare_shm(&mut self, size: Bytes, owner: Option<Owner>) -> Result<Prepared<Pending>, ApplyError> {
        let skip = |reason: String, warn| Ok(Prepared::Skip { reason, warn });
        // /dev/shm is a mount by design: no RESOLVE_NO_XDEV, check what we reach.
        let flags = ResolveFlags::IN_ROOT | ResolveFlags::NO_MAGICLINKS;
        let fd = match resolve_or_create(
            self.root.as_ref().expect("open_root before prepare"),
            &SHM_PATH[1..],
            flags,
            &mut self.writable_root,
        ) {
            Ok(fd) => fd,
            Err(e) => {
                return match skip_reason(e) {
                    Some(reason) => skip(reason.to_string(), true),
                    None => Err(sys_err("openat2", "resolving inside the rootfs", SHM_PATH, e)),
                }
            }
        };
        match self.landed(&fd) {
            Some(real) if real == SHM_PATH => {}
            other => {
                return skip(
                    format!(
                        "it resolves to {} instead",
                        other.as_deref().unwrap_or("a place outside the rootfs")
                    ),
                    true,
                )
            }
        }
        let st = rustix::fs::fstat(&fd).map_err(|e| ApplyError::sys("reading", SHM_PATH, e))?;
        if FileType::from_raw_mode(st.st_mode) != FileType::Directory {
            return skip("it is not a directory".into(), true);
        }
        if Some(st.st_dev) == self.host_shm {
            return skip("it is the host's own /dev/shm (host IPC); never resized".into(), false);
        }
        let sx = rustix::fs::statx(&fd, "", AtFlags::EMPTY_PATH, StatxFlags::BASIC_STATS)
            .map_err(|e| ApplyError::sys("reading", SHM_PATH, e))?;
        let is_mount = sx.stx_attributes_mask.contains(StatxAttributes::MOUNT_ROOT)
            && sx.stx_attributes.contains(StatxAttributes::MOUNT_ROOT);
        if !is_mount {
            let attrs = MountAttrFlags::MOUNT_ATTR_NOSUID
                | MountAttrFlags::MOUNT_ATTR_NODEV
                | MountAttrFlags::MOUNT_ATTR_NOEXEC;
            let mnt = self.new_tmpfs(size, None, owner, attrs, SHM_PATH)?;
            return Ok(Prepared::Ready(Pending::Attach { mnt, target: fd, what: SHM_PATH.into() }));
        }
        let sfs = rustix::fs::fstatfs(&fd).map_err(|e| ApplyError::sys("reading", SHM_PATH, e))?;
        if sfs.f_type as u64 != TMPFS_MAGIC {
            return skip("it is a mount of a filesystem other than tmpfs".into(), true);
        }
        let current = Bytes((sfs.f_blocks as u64).saturating_mul(sfs.f_bsize as u64));
        if current >= size {
            return skip(format!("it already has {current}, not less than {size}; never shrunk"), false);
        }
        let err = |call, op| move |e: Errno| sys_err(call, op, SHM_PATH, e);
        let fs = rustix::mount::fspick(&fd, "", FsPickFlags::FSPICK_EMPTY_PATH | FsPickFlags::FSPICK_CLOEXEC)
            .map_err(err("fspick", "picking the superblock of"))?;
        rustix::mount::fsconfig_set_string(&fs, "size", size.0.to_string())
            .map_err(err("fsconfig", "setting the size of"))?;
        Ok(Prepared::Ready(Pending::Reconfigure { fs, what: SHM_PATH.into() }))
    }

    fn commit(&mut self, pending: Pending) -> Result<(), ApplyError> {
        match pending {
            Pending::Attach { mnt, target, what } => {
                rustix::mount::move_mount(
                    &mnt,
                    "",
                    &target,
                    "",
                    MoveMountFlags::MOVE_MOUNT_F_EMPTY_PATH | MoveMountFlags::MOVE_MOUNT_T_EMPTY_PATH,
                )
                .map_err(|e| sys_err("move_mount", "attaching the tmpfs on", what, e))?;
                self.attached.push(mnt);
                Ok(())
            }
            Pending::Reconfigure { fs, what } => rustix::mount::fsconfig_reconfigure(&fs)
                .map_err(|e| sys_err("fsconfig", "resizing the tmpfs of", what, e)),
        }
    }

    fn rollback(&mut self) {
        for mnt in self.attached.drain(..).rev() {
            let link = format!("/proc/self/fd/{}", mnt.as_raw_fd());
            if let Err(e) = rustix::mount::unmount(link.as_str(), UnmountFlags::DETACH) {
                log::error!("detaching a tmpfs after a failed mount: {e}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mount_namespace_identity() {
        assert_eq!(same_mount_ns("self", "self"), Some(true));
        assert!(mount_ids("self").is_some_and(|ids| !ids.is_empty()));
        assert_eq!(same_mount_ns("self", "0"), None);
        assert!(matches!(unsupported("openat2"), ApplyError::Unsupported { since: "5.6", .. }));
    }
}
