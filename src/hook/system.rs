//! [`System`], the [`Mounter`] that makes the syscalls through the syscall
//! layer: it joins the namespace ([`crate::sys::ns`]), resolves targets in
//! the rootfs and applies the landing rules ([`crate::sys::resolve`]),
//! builds, attaches and resizes tmpfs mounts ([`crate::sys::mount`]) and
//! copies a target's contents into its tmpfs ([`super::copyup`]). The
//! hook's policy on what it finds there is here (a `/dev/shm` that is the
//! host's, or not the proven engine shm; a spec mount under a target);
//! what is mounted, and with which options, comes from the plan.

use std::os::fd::OwnedFd;
use std::path::Path;

use rustix::fs::FileType;

use super::apply::{Done, Mounter, Prepared};
use super::copyup::{self, Fds, Limits};
use crate::plan::landing::{self, Landing};
use crate::plan::{HomeDir, Note, Passwd, ShmWay, SpecMount, Tmpfs, SHM_PATH};
use crate::size::Bytes;
use crate::sys::mount::{self, is_mount_root};
use crate::sys::ns::{self, NsEntry};
use crate::sys::procfs::Proc;
use crate::sys::resolve::{self, Root};
use crate::sys::{SysError, Syscall};
use crate::target::TargetPath;

/// A prepared effect.
#[derive(Debug)]
pub(crate) enum Pending {
    /// Attach the detached mount `mnt` onto `target`.
    Attach { mnt: OwnedFd, target: OwnedFd, what: String },
    /// Apply the new size configured on the superblock context `fs`, then,
    /// with `writable`, attach that writable clone of the mount over it.
    Reconfigure { fs: OwnedFd, writable: Option<(OwnedFd, OwnedFd)>, what: String },
}

/// The real thing.
#[derive(Debug, Default)]
pub(crate) struct System {
    /// Device of the host's `/dev/shm`, read before joining the container.
    host_shm: Option<u64>,
    /// The host's procfs, opened before joining the container: the image's
    /// files are read through it, never opened by path (docs/design.md#reopen).
    proc: Option<Proc>,
    /// Whether the kernel enforces SELinux labels (selinuxfs is mounted),
    /// read before joining the container when a tmpfs of the plan carries a
    /// label: a label it cannot apply is dropped only when it has none
    /// (docs/design.md#selinux).
    selinux: bool,
    /// Whether any tmpfs of the plan carries a label (else selinuxfs is not
    /// looked at: one `statfs` less per start).
    labelled: bool,
    /// Mounts attached so far, for rollback.
    attached: Vec<OwnedFd>,
    /// The spec's mount destinations, and where they landed once looked up.
    spec_mounts: Vec<SpecMount>,
    landings: Option<Vec<Landing>>,
    /// For a `/dev/shm` the spec binds from the host: the device of the
    /// proven engine shm, or why it is not one (read on the host, before
    /// joining the container: docs/design.md#engine-shm).
    engine_shm: Option<Result<u64, Note>>,
}

impl System {
    /// The real thing, for a container whose `/dev/shm` is bound from
    /// `engine_shm` (proven or not by [`crate::sys::engine_shm::prove`]).
    pub(crate) fn new(engine_shm: Option<Result<u64, Note>>, labelled: bool) -> System {
        System { engine_shm, labelled, ..System::default() }
    }

    /// Where the spec's mounts landed in the container (looked up once).
    ///
    /// # Errors
    /// Where one landed cannot be read.
    fn landings(&mut self, root: &Root) -> Result<&[Landing], SysError> {
        if self.landings.is_none() {
            self.landings = Some(root.landed_mounts(&self.spec_mounts)?);
        }
        Ok(self.landings.as_deref().unwrap_or_default())
    }

    /// A target the landing rules ruled out: when a spec mount is why (a
    /// volume reached through a symlink), the note names the symlink and
    /// the mount (docs/design.md#landing).
    ///
    /// # Errors
    /// As [`System::landings`].
    fn explain(&mut self, root: &Root, target: &TargetPath, note: Note) -> Result<Note, SysError> {
        let w = landing::walk(&mut root.tree(), target.as_str());
        Ok(match landing::judge(&w, self.landings(root)?) {
            Some(c) => Note::warn(target.as_str(), c.reason(&w)),
            None => note,
        })
    }
}

/// Where a resolution error leaves `/dev/shm`: a skip with a warning (a
/// property of the image) or an error.
fn shm_resolve_failed(e: rustix::io::Errno) -> Result<Prepared<Pending>, SysError> {
    match resolve::skip_reason(e) {
        Some(reason) => Ok(Prepared::Skip(Note::warn(SHM_PATH, reason))),
        None => Err(SysError::sys(Syscall::Openat2, "resolving inside the rootfs", SHM_PATH, e)),
    }
}

/// A note on `/dev/shm`, left alone.
fn shm_note(reason: impl Into<String>, warn: bool) -> Note {
    Note { subject: SHM_PATH.into(), reason: reason.into(), warn }
}

/// Where `/dev/shm` landed in the container, and what is there (`read`: its
/// type and device, read only where it landed at `/dev/shm`): the device
/// when it is the container's own directory, else why it is left alone.
/// Elsewhere (through a symlink), not a directory, or the host's own
/// `/dev/shm` (host IPC: never resized).
fn shm_place(
    landed: Option<&str>,
    read: Option<(FileType, u64)>,
    host_shm: Option<u64>,
) -> Result<u64, Note> {
    let (kind, dev) = match (landed, read) {
        (Some(SHM_PATH), Some(read)) => read,
        (other, _) => {
            let to = other.unwrap_or("a place outside the rootfs");
            return Err(shm_note(format!("it resolves to {to} instead"), true));
        }
    };
    if kind != FileType::Directory {
        return Err(shm_note("it is not a directory", true));
    }
    if Some(dev) == host_shm {
        return Err(shm_note("it is the host's own /dev/shm (host IPC); never resized", false));
    }
    Ok(dev)
}

/// What `/dev/shm` is, once it is the container's directory ([`shm_place`]).
#[derive(Debug, PartialEq, Eq)]
enum ShmKind {
    /// Left alone.
    Skip(Note),
    /// No mount there: the plan's fresh tmpfs goes on it.
    Bare,
    /// A mount, to judge by its size ([`shm_size`]).
    Mounted,
}

/// [`ShmKind`] of the directory of device `dev`: whether it is a mount's
/// root, and, for a `/dev/shm` the spec binds from the host, the device of
/// the proven engine shm or why it is not one (`engine`). A bind from the
/// host is grown only when it is that engine shm.
fn shm_kind(mount_root: bool, engine: Option<&Result<u64, Note>>, dev: u64) -> ShmKind {
    if !mount_root {
        return ShmKind::Bare;
    }
    match engine {
        Some(Err(note)) => ShmKind::Skip(note.clone()),
        Some(Ok(engine)) if *engine != dev => {
            ShmKind::Skip(shm_note("it is not the engine's shm the spec binds there", true))
        }
        _ => ShmKind::Mounted,
    }
}

/// What the hook does with a mounted `/dev/shm` of `current` bytes (`None`:
/// not a tmpfs), for the plan's `size`, `writable` when the spec mounts it
/// read-only and the plan makes it writable.
#[derive(Debug, PartialEq, Eq)]
enum ShmSize {
    /// Left alone.
    Skip(Note),
    /// Big enough: only a writable clone over it.
    Writable,
    /// Grown from `from`, on its own superblock (plus the writable clone).
    Grow { from: Bytes },
}

/// [`ShmSize`]: never another filesystem, never shrunk.
fn shm_size(current: Option<Bytes>, size: Bytes, writable: bool) -> ShmSize {
    let Some(current) = current else {
        return ShmSize::Skip(shm_note("it is a mount of a filesystem other than tmpfs", true));
    };
    match mount::growth(current, size) {
        Ok(()) => ShmSize::Grow { from: current },
        Err(_) if writable => ShmSize::Writable,
        Err(reason) => ShmSize::Skip(shm_note(reason, false)),
    }
}

impl Mounter for System {
    type Root = Root;
    type Pending = Pending;

    fn enter(&mut self, entry: NsEntry, pid: Option<i64>) -> Result<(), SysError> {
        // Before anything else: what the host's /dev/shm is (docs/design.md#hostile-rootfs rule 6).
        self.host_shm = resolve::host_shm_dev();
        self.selinux = self.labelled && mount::selinux_enabled();
        // After `setns`, "/proc" is the container's view (docs/design.md#reopen).
        self.proc = Some(Proc::open()?);
        ns::enter(entry, pid)
    }

    fn open_root(&mut self, rootfs: &Path, spec_mounts: &[SpecMount]) -> Result<Root, SysError> {
        self.spec_mounts = spec_mounts.to_vec();
        self.landings = None;
        Root::open(rootfs, self.proc.as_ref().ok_or(SysError::NotProcfs("/proc"))?.try_clone()?)
    }

    fn read_passwd(&mut self, root: &mut Root, uid: u32) -> Result<Passwd, SysError> {
        root.read_passwd(self.proc.as_ref().ok_or(SysError::NotProcfs("/proc"))?, uid)
    }

    fn read_home_dir(&mut self, root: &mut Root, path: &str, paths: &[String]) -> HomeDir {
        root.home_dir(path, paths)
    }

    fn prepare_tmpfs(
        &mut self,
        root: &mut Root,
        target: &TargetPath,
        tmpfs: &Tmpfs,
        subdirs: &[String],
    ) -> Result<Prepared<Pending>, SysError> {
        let what = target.as_str();
        // A cache under HOME is left alone where the image gives its
        // directory to another uid (read before a missing one is made).
        let image = if tmpfs.image_owner.is_some() { root.dir_stat(target) } else { None };
        if let Some(note) = landing::not_the_processs(what, image.map(|(_, uid)| uid), tmpfs.image_owner) {
            return Ok(Prepared::Skip(note));
        }
        // The rules apply to where the path lands, not only to its text; a
        // cache's mountpoint made here is the process's.
        let fd = match root.resolve_target(target, tmpfs.made_for())? {
            Ok(fd) => fd,
            Err(note) => return Ok(Prepared::Skip(self.explain(root, target, note)?)),
        };
        // A spec mount that landed below the target (a volume at /tmp/data,
        // or one whose path leads there through a symlink) stays visible.
        if let Some(real) = root.landed(&fd, what)? {
            let beneath =
                self.landings(root)?.iter().find(|l| l.at != real && landing::at_or_under(&l.at, &real));
            if let Some(l) = beneath {
                let reason = format!(
                    "it resolves to {real}, and the spec mounts {} inside it (at {}), which a tmpfs over it would hide",
                    l.dest, l.at
                );
                return Ok(Prepared::Skip(Note::warn(what, reason)));
            }
        }
        let mnt = mount::build(tmpfs, subdirs, what, self.selinux)?;
        let done = Done::Mounted { target: what.to_string(), size: tmpfs.size.bytes };
        Ok(Prepared::Ready(Pending::Attach { mnt, target: fd, what: what.to_string() }, done))
    }

    fn copy_up(
        &mut self,
        pending: &mut Pending,
        target: &TargetPath,
        tmpfs: &Tmpfs,
    ) -> Result<Option<Note>, Note> {
        let Pending::Attach { mnt, target: dir, .. } = pending else { return Ok(None) };
        let what = target.as_str();
        let Some(proc) = &self.proc else {
            return Err(Note::warn(
                what,
                "its contents cannot be read without the host's procfs: left alone",
            ));
        };
        match copyup::copy_up(&mut Fds::new(proc), dir, mnt, Limits::for_size(tmpfs.size.bytes)) {
            Ok(None) => Ok(None),
            Ok(Some(copied)) => {
                log::debug!(
                    "{what}: copied {} entries ({} bytes) into the tmpfs",
                    copied.entries,
                    copied.bytes
                );
                Ok(copied.warning().map(|w| Note::warn(format!("some contents of {what}"), w)))
            }
            // Never half copied, never an empty tmpfs over the image's
            // files: the caller drops the detached tmpfs.
            Err(e) => Err(e.left_alone(what)),
        }
    }

    fn prepare_shm(
        &mut self,
        root: &mut Root,
        way: ShmWay,
        writable: bool,
        tmpfs: &Tmpfs,
    ) -> Result<Prepared<Pending>, SysError> {
        let fd = match root.resolve_or_create(&SHM_PATH[1..], resolve::SHM, None) {
            Ok(fd) => fd,
            Err(e) => return shm_resolve_failed(e),
        };
        let landed = root.landed(&fd, SHM_PATH)?;
        // Not read where it landed elsewhere: judged on the landing alone.
        let read = match landed.as_deref() {
            Some(SHM_PATH) => Some(resolve::kind_and_dev(&fd, SHM_PATH)?),
            _ => None,
        };
        let dev = match shm_place(landed.as_deref(), read, self.host_shm) {
            Ok(dev) => dev,
            Err(note) => return Ok(Prepared::Skip(note)),
        };
        match shm_kind(is_mount_root(&fd)?, self.engine_shm.as_ref(), dev) {
            ShmKind::Skip(note) => Ok(Prepared::Skip(note)),
            ShmKind::Bare => {
                if way == ShmWay::Grow {
                    log::info!("{SHM_PATH}: the spec mounts one, but none is there at hook time: mounting the plan's fresh tmpfs");
                }
                let mnt = mount::build(tmpfs, &[], SHM_PATH, self.selinux)?;
                let done = Done::MountedShm { size: tmpfs.size.bytes };
                Ok(Prepared::Ready(Pending::Attach { mnt, target: fd, what: SHM_PATH.into() }, done))
            }
            ShmKind::Mounted => match shm_size(mount::tmpfs_size(&fd, SHM_PATH)?, tmpfs.size.bytes, writable)
            {
                ShmSize::Skip(note) => Ok(Prepared::Skip(note)),
                ShmSize::Writable => {
                    let mnt = mount::writable_clone(&fd, SHM_PATH)?;
                    let pending = Pending::Attach { mnt, target: fd, what: SHM_PATH.into() };
                    Ok(Prepared::Ready(pending, Done::ShmWritable))
                }
                ShmSize::Grow { from } => {
                    let size = tmpfs.size.bytes;
                    let fs = mount::resize(&fd, size, SHM_PATH)?;
                    let clone =
                        if writable { Some((mount::writable_clone(&fd, SHM_PATH)?, fd)) } else { None };
                    Ok(Prepared::Ready(
                        Pending::Reconfigure { fs, writable: clone, what: SHM_PATH.into() },
                        Done::GrewShm { from, to: size, writable },
                    ))
                }
            },
        }
    }

    fn commit(&mut self, pending: Pending) -> Result<(), SysError> {
        match pending {
            Pending::Attach { mnt, target, what } => {
                mount::attach(&mnt, &target, &what)?;
                self.attached.push(mnt);
                Ok(())
            }
            Pending::Reconfigure { fs, writable, what } => {
                mount::reconfigure(&fs, &what)?;
                if let Some((mnt, target)) = writable {
                    mount::attach(&mnt, &target, &what)?;
                    self.attached.push(mnt);
                }
                Ok(())
            }
        }
    }

    fn rollback(&mut self) {
        let Some(proc) = &self.proc else {
            log::error!(
                "cannot detach the tmpfs mounts after a failed mount: the host's procfs was never opened"
            );
            return;
        };
        for mnt in self.attached.drain(..).rev() {
            mount::detach(proc, &mnt);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOST: u64 = 7;
    const MI: u64 = 1 << 20;

    /// `/dev/shm` is taken only where it lands at `/dev/shm`, a directory,
    /// and not the host's own: each other case is left alone with its
    /// reason, a warning but for host IPC.
    #[test]
    fn shm_is_taken_only_at_its_own_directory() {
        let dir = Some((FileType::Directory, 9));
        assert_eq!(shm_place(Some(SHM_PATH), dir, Some(HOST)), Ok(9));
        assert_eq!(shm_place(Some(SHM_PATH), dir, None), Ok(9));
        let left = |n: Result<u64, Note>| n.map_err(|n| (n.reason, n.warn)).err();
        assert_eq!(
            left(shm_place(Some("/etc"), None, Some(HOST))),
            Some(("it resolves to /etc instead".into(), true))
        );
        assert_eq!(
            left(shm_place(None, None, Some(HOST))),
            Some(("it resolves to a place outside the rootfs instead".into(), true))
        );
        assert_eq!(
            left(shm_place(Some(SHM_PATH), Some((FileType::RegularFile, 9)), Some(HOST))),
            Some(("it is not a directory".into(), true))
        );
        let host = left(shm_place(Some(SHM_PATH), Some((FileType::Directory, HOST)), Some(HOST))).unwrap();
        assert!(host.0.contains("host's own") && !host.1, "{host:?}");
    }

    /// A bare directory gets the fresh tmpfs; a mount is judged by size,
    /// unless the spec binds it from the host and it is not the proven
    /// engine shm (or could not be proven one).
    #[test]
    fn a_mounted_shm_is_grown_only_when_it_is_the_engines() {
        assert_eq!(shm_kind(false, None, 9), ShmKind::Bare);
        let unproven = Err(shm_note("its source is not the engine's", true));
        assert_eq!(shm_kind(false, Some(&unproven), 9), ShmKind::Bare);
        assert_eq!(shm_kind(true, None, 9), ShmKind::Mounted);
        assert_eq!(shm_kind(true, Some(&Ok(9)), 9), ShmKind::Mounted);
        let ShmKind::Skip(other) = shm_kind(true, Some(&Ok(8)), 9) else { panic!("grew another shm") };
        assert!(other.reason.contains("not the engine's shm") && other.warn, "{other:?}");
        assert_eq!(
            shm_kind(true, Some(&unproven), 9),
            ShmKind::Skip(shm_note("its source is not the engine's", true))
        );
    }

    /// Never another filesystem, never shrunk: a big enough `/dev/shm` only
    /// becomes writable when the plan asks, else is left alone (no warning).
    #[test]
    fn a_mounted_shm_grows_and_never_shrinks() {
        let (small, big) = (Bytes(64 * MI), Bytes(1024 * MI));
        assert_eq!(shm_size(Some(small), big, false), ShmSize::Grow { from: small });
        assert_eq!(shm_size(Some(small), big, true), ShmSize::Grow { from: small });
        assert_eq!(shm_size(Some(big), small, true), ShmSize::Writable);
        assert_eq!(shm_size(Some(big), big, true), ShmSize::Writable);
        let ShmSize::Skip(kept) = shm_size(Some(big), small, false) else { panic!("shrunk") };
        assert!(kept.reason.contains("never shrunk") && !kept.warn, "{kept:?}");
        let ShmSize::Skip(other) = shm_size(None, big, true) else { panic!("not a tmpfs, taken") };
        assert!(other.reason.contains("other than tmpfs") && other.warn, "{other:?}");
    }
}
