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
        Root::open(rootfs, self.proc.as_ref().ok_or(SysError::NotProcfs("/proc"))?)
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
        let skip = |reason: String, warn| Ok(Prepared::Skip(Note { subject: SHM_PATH.into(), reason, warn }));
        let fd = match root.resolve_or_create(&SHM_PATH[1..], resolve::SHM, None) {
            Ok(fd) => fd,
            Err(e) => return shm_resolve_failed(e),
        };
        match root.landed(&fd, SHM_PATH)? {
            Some(real) if real == SHM_PATH => {}
            other => {
                let to = other.as_deref().unwrap_or("a place outside the rootfs");
                return skip(format!("it resolves to {to} instead"), true);
            }
        }
        let (kind, dev) = resolve::kind_and_dev(&fd, SHM_PATH)?;
        if kind != FileType::Directory {
            return skip("it is not a directory".into(), true);
        }
        if Some(dev) == self.host_shm {
            return skip("it is the host's own /dev/shm (host IPC); never resized".into(), false);
        }
        if !is_mount_root(&fd)? {
            if way == ShmWay::Grow {
                log::info!("{SHM_PATH}: the spec mounts one, but none is there at hook time: mounting the plan's fresh tmpfs");
            }
            let mnt = mount::build(tmpfs, &[], SHM_PATH, self.selinux)?;
            let done = Done::MountedShm { size: tmpfs.size.bytes };
            return Ok(Prepared::Ready(Pending::Attach { mnt, target: fd, what: SHM_PATH.into() }, done));
        }
        match &self.engine_shm {
            Some(Err(note)) => return Ok(Prepared::Skip(note.clone())),
            Some(Ok(engine)) if *engine != dev => {
                return skip("it is not the engine's shm the spec binds there".into(), true);
            }
            _ => {}
        }
        let Some(current) = mount::tmpfs_size(&fd, SHM_PATH)? else {
            return skip("it is a mount of a filesystem other than tmpfs".into(), true);
        };
        let size = tmpfs.size.bytes;
        if let Err(reason) = mount::growth(current, size) {
            if writable {
                let mnt = mount::writable_clone(&fd, SHM_PATH)?;
                let pending = Pending::Attach { mnt, target: fd, what: SHM_PATH.into() };
                return Ok(Prepared::Ready(pending, Done::ShmWritable));
            }
            return skip(reason, false);
        }
        let fs = mount::resize(&fd, size, SHM_PATH)?;
        let clone = if writable { Some((mount::writable_clone(&fd, SHM_PATH)?, fd)) } else { None };
        Ok(Prepared::Ready(
            Pending::Reconfigure { fs, writable: clone, what: SHM_PATH.into() },
            Done::GrewShm { from: current, to: size, writable },
        ))
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
