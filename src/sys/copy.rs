//! The calls copy-up makes ([`crate::hook::copyup`]), by fd, behind the
//! narrow [`CopyFs`] trait: open a directory (`O_DIRECTORY`) or take an
//! `O_PATH` fd of a file under a directory fd without following a symlink
//! (`O_NOFOLLOW`), reopen a checked `O_PATH` fd through the host's procfs
//! to read it ([`Proc::reopen`]: never by its name again, so no device
//! swapped in is ever opened, docs/design.md#reopen), list a directory up
//! to a bound, `stat`, make a directory or a file, read and write data,
//! copy a symlink as its text, and set owner, mode and times. [`Fds`] makes
//! them with rustix; a unit test's is a map, so that the walk's decisions
//! (what is copied, what is left out, where it stops) are tested without
//! root. No decision here: what to copy, within which bounds, is copy-up's.

use std::ffi::{CStr, CString};
use std::os::fd::OwnedFd;

use rustix::fs::{AtFlags, Dir, FileType, Gid, Mode, OFlags, Stat, Timespec, Timestamps, Uid};
use rustix::io::Errno;

use super::error::Syscall;
use super::procfs::{Checked, Proc};
use crate::size::Bytes;

/// At most this many entries are copied (a hostile `/tmp` of a million files
/// must not hold the container's start).
pub(crate) const MAX_ENTRIES: u32 = 4096;
/// At most this many directory levels below the target.
pub(crate) const MAX_DEPTH: u32 = 16;
/// At most this many bytes of file data, whatever the tmpfs' size.
pub(crate) const MAX_BYTES: u64 = 64 << 20;

/// The bounds of one copy: the hook's copy-up keeps to them, and the spec
/// executor hands a runtime no directory to copy (`tmpcopyup`) past them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Limits {
    pub entries: u32,
    pub depth: u32,
    pub bytes: u64,
}

impl Limits {
    /// The bounds for a tmpfs of `size`: its size, at most [`MAX_BYTES`].
    pub(crate) fn for_size(size: Bytes) -> Limits {
        Limits { entries: MAX_ENTRIES, depth: MAX_DEPTH, bytes: size.0.min(MAX_BYTES) }
    }
}

/// What copy-up reads of an entry: its `stat`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Meta {
    pub kind: FileType,
    pub dev: u64,
    pub ino: u64,
    /// The permission bits (`& 0o7777`).
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    /// Its size in bytes (`u64::MAX` for a negative one).
    pub size: u64,
    pub nlink: u64,
    pub atime: Timespec,
    pub mtime: Timespec,
}

/// The calls of a copy by fd. Each is one system call (two or three where
/// the walk never looks between them: [`CopyFs::copy_link`],
/// [`CopyFs::set_meta`], which name the one that failed).
pub(crate) trait CopyFs {
    /// An open file or directory.
    type Fd;

    /// Opens the directory `name` under `at` to read it, never following a
    /// symlink (`openat(2)` `O_RDONLY | O_DIRECTORY | O_NOFOLLOW`).
    ///
    /// # Errors
    /// The errno.
    fn open_dir(&mut self, at: &Self::Fd, name: &CStr) -> Result<Self::Fd, Errno>;
    /// The names in `dir`, without `.` and `..`, read with `getdents64(2)`;
    /// `None` as soon as there are more than `room`: a huge directory is not
    /// read to its end.
    ///
    /// # Errors
    /// The errno.
    fn list(&mut self, dir: Self::Fd, room: u32) -> Result<Option<Vec<CString>>, Errno>;
    /// `fstat(2)`.
    ///
    /// # Errors
    /// The errno.
    fn stat(&mut self, fd: &Self::Fd) -> Result<Meta, Errno>;
    /// `fstatat(2)` of `name` under `dir`, not following a symlink.
    ///
    /// # Errors
    /// The errno.
    fn stat_at(&mut self, dir: &Self::Fd, name: &CStr) -> Result<Meta, Errno>;
    /// `mkdirat(2)` mode 0700.
    ///
    /// # Errors
    /// The errno (`EEXIST` for one there already).
    fn mkdir(&mut self, dir: &Self::Fd, name: &CStr) -> Result<(), Errno>;
    /// An `O_PATH | O_NOFOLLOW` fd of `name` under `dir`, to check before it
    /// is opened: nothing is opened (a device node's driver never runs).
    ///
    /// # Errors
    /// The errno.
    fn open_path(&mut self, dir: &Self::Fd, name: &CStr) -> Result<Self::Fd, Errno>;
    /// Opens the file `fd` holds (an `O_PATH` fd that `meta` describes, a
    /// regular file) to read it, by the fd, never by a name: through the
    /// host's procfs ([`Proc::reopen`]), `O_NONBLOCK` and `O_NOCTTY`.
    ///
    /// # Errors
    /// The errno; `EINVAL` for anything but a regular file or a directory
    /// (nothing opened), `ESTALE` for a file other than `meta`'s.
    fn reopen(&mut self, fd: &Self::Fd, meta: &Meta) -> Result<Self::Fd, Errno>;
    /// Creates the file `name` under `dir`, mode 0600, to write it
    /// (`O_CREAT | O_EXCL | O_NOFOLLOW`).
    ///
    /// # Errors
    /// The errno.
    fn create(&mut self, dir: &Self::Fd, name: &CStr) -> Result<Self::Fd, Errno>;
    /// `read(2)` into `buf`.
    ///
    /// # Errors
    /// The errno.
    fn read(&mut self, fd: &Self::Fd, buf: &mut [u8]) -> Result<usize, Errno>;
    /// `write(2)` of `buf`, or part of it.
    ///
    /// # Errors
    /// The errno.
    fn write(&mut self, fd: &Self::Fd, buf: &[u8]) -> Result<usize, Errno>;
    /// Copies the symlink `name` under `src` to `dst` as its text, with the
    /// owner and times of `meta`: `readlinkat(2)`, `symlinkat(2)`,
    /// `fchownat(2)`, `utimensat(2)`.
    ///
    /// # Errors
    /// The call that failed, and its errno.
    fn copy_link(
        &mut self,
        src: &Self::Fd,
        dst: &Self::Fd,
        name: &CStr,
        meta: &Meta,
    ) -> Result<(), (Syscall, Errno)>;
    /// Gives `fd` the owner, then the mode (a chown clears set-id bits),
    /// then the times of `meta`: `fchown(2)`, `fchmod(2)`, `futimens(2)`.
    ///
    /// # Errors
    /// The call that failed, and its errno.
    fn set_meta(&mut self, fd: &Self::Fd, meta: &Meta) -> Result<(), (Syscall, Errno)>;
}

/// The real calls, by rustix, reading files through the host's procfs
/// `proc` (opened before the hook joined the container's namespace).
#[derive(Debug)]
pub(crate) struct Fds<'p> {
    proc: &'p Proc,
}

impl<'p> Fds<'p> {
    /// The real calls, reopening files through `proc`.
    pub(crate) fn new(proc: &'p Proc) -> Fds<'p> {
        Fds { proc }
    }
}

// `st_dev`, `st_ino` and `st_nlink` are u64 here, narrower on some other targets.
#[allow(clippy::useless_conversion)]
fn meta(st: &Stat) -> Meta {
    Meta {
        kind: FileType::from_raw_mode(st.st_mode),
        dev: u64::from(st.st_dev),
        ino: u64::from(st.st_ino),
        mode: st.st_mode & 0o7777,
        uid: st.st_uid,
        gid: st.st_gid,
        size: u64::try_from(st.st_size).unwrap_or(u64::MAX),
        nlink: u64::from(st.st_nlink),
        atime: Timespec { tv_sec: st.st_atime as _, tv_nsec: st.st_atime_nsec as _ },
        mtime: Timespec { tv_sec: st.st_mtime as _, tv_nsec: st.st_mtime_nsec as _ },
    }
}

fn times(meta: &Meta) -> Timestamps {
    Timestamps { last_access: meta.atime, last_modification: meta.mtime }
}

impl CopyFs for Fds<'_> {
    type Fd = OwnedFd;

    fn open_dir(&mut self, at: &OwnedFd, name: &CStr) -> Result<OwnedFd, Errno> {
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        rustix::fs::openat(at, name, flags, Mode::empty())
    }

    fn list(&mut self, dir: OwnedFd, room: u32) -> Result<Option<Vec<CString>>, Errno> {
        let mut names = Vec::new();
        let mut dir = Dir::new(dir)?;
        while let Some(entry) = dir.read() {
            let entry = entry?;
            let name = entry.file_name();
            if name == c"." || name == c".." {
                continue;
            }
            if names.len() >= room as usize {
                return Ok(None);
            }
            names.push(name.to_owned());
        }
        Ok(Some(names))
    }

    fn stat(&mut self, fd: &OwnedFd) -> Result<Meta, Errno> {
        rustix::fs::fstat(fd).map(|st| meta(&st))
    }

    fn stat_at(&mut self, dir: &OwnedFd, name: &CStr) -> Result<Meta, Errno> {
        rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW).map(|st| meta(&st))
    }

    fn mkdir(&mut self, dir: &OwnedFd, name: &CStr) -> Result<(), Errno> {
        rustix::fs::mkdirat(dir, name, Mode::from_raw_mode(0o700))
    }

    fn open_path(&mut self, dir: &OwnedFd, name: &CStr) -> Result<OwnedFd, Errno> {
        rustix::fs::openat(dir, name, OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC, Mode::empty())
    }

    fn reopen(&mut self, fd: &OwnedFd, meta: &Meta) -> Result<OwnedFd, Errno> {
        self.proc.reopen(fd, Checked { dev: meta.dev, ino: meta.ino, kind: meta.kind })
    }

    fn create(&mut self, dir: &OwnedFd, name: &CStr) -> Result<OwnedFd, Errno> {
        let create = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        rustix::fs::openat(dir, name, create, Mode::from_raw_mode(0o600))
    }

    fn read(&mut self, fd: &OwnedFd, buf: &mut [u8]) -> Result<usize, Errno> {
        rustix::io::read(fd, buf)
    }

    fn write(&mut self, fd: &OwnedFd, buf: &[u8]) -> Result<usize, Errno> {
        rustix::io::write(fd, buf)
    }

    fn copy_link(
        &mut self,
        src: &OwnedFd,
        dst: &OwnedFd,
        name: &CStr,
        meta: &Meta,
    ) -> Result<(), (Syscall, Errno)> {
        // Its text, never what it points to.
        let text = rustix::fs::readlinkat(src, name, Vec::new()).map_err(|e| (Syscall::Readlinkat, e))?;
        rustix::fs::symlinkat(text.as_c_str(), dst, name).map_err(|e| (Syscall::Symlinkat, e))?;
        let (uid, gid) = (Uid::from_raw(meta.uid), Gid::from_raw(meta.gid));
        rustix::fs::chownat(dst, name, Some(uid), Some(gid), AtFlags::SYMLINK_NOFOLLOW)
            .map_err(|e| (Syscall::Fchownat, e))?;
        rustix::fs::utimensat(dst, name, &times(meta), AtFlags::SYMLINK_NOFOLLOW)
            .map_err(|e| (Syscall::Utimensat, e))
    }

    fn set_meta(&mut self, fd: &OwnedFd, meta: &Meta) -> Result<(), (Syscall, Errno)> {
        let (uid, gid) = (Uid::from_raw(meta.uid), Gid::from_raw(meta.gid));
        rustix::fs::fchown(fd, Some(uid), Some(gid)).map_err(|e| (Syscall::Fchown, e))?;
        rustix::fs::fchmod(fd, Mode::from_raw_mode(meta.mode)).map_err(|e| (Syscall::Fchmod, e))?;
        rustix::fs::futimens(fd, &times(meta)).map_err(|e| (Syscall::Futimens, e))
    }
}
