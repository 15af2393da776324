//! What a directory of the image holds, read by fd without following
//! anything: the spec executor's bounded scan before it chooses `tmpcopyup`
//! ([`contents`]), and whether a directory under a home is empty
//! ([`is_empty`]).

use std::os::fd::OwnedFd;

use rustix::fs::{FileType, Mode, OFlags};
use rustix::io::Errno;

use super::copy::Limits;
use super::resolve::{open_in, resolve, skip_reason, Root, REAL};
use crate::size::Bytes;
use crate::target::TargetPath;

/// What a target's directory holds in the image, for the spec executor: a
/// tmpfs from the spec over it either hides nothing, or is given the
/// runtime's `tmpcopyup` within the hook's copy bounds, or is the hook's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Contents {
    /// Nothing but `.` and `..`.
    Empty,
    /// Files, directories and symlinks within the bounds, on the
    /// directory's own filesystem: what a runtime's `tmpcopyup` copies as
    /// the hook's copy-up would (docs/design.md#tmpcopyup).
    Fits,
    /// Past a bound, or an entry no copy should take (a device node, a
    /// socket, a FIFO, another mount), and why.
    Past(String),
}

/// What the directory `fd` (an `O_PATH` fd of a resolved directory) holds,
/// against `limits` (the hook's copy-up bounds, [`Limits`]): `fd` reopened
/// `O_RDONLY | O_DIRECTORY` by `openat2(fd, ".")` in-root (no symlink or
/// mount crossed), read with `getdents64(2)`; each entry `statx`ed without
/// following a symlink, each subdirectory opened `O_NOFOLLOW | O_DIRECTORY`
/// under its parent's fd, never by a path. Entries and depth count as the
/// hook's copy-up counts them, bytes by each regular file's `st_size` in
/// whole pages (a sparse file counts its apparent size: runtimes copy it in
/// full; a tmpfs holds a file in pages). It stops
/// at the first entry past a bound, and reads nothing of a file. An empty
/// directory costs one `openat2` and two `getdents64` (the second reads the
/// end).
///
/// # Errors
/// The `openat2`/`getdents64`/`statx` errno.
pub(crate) fn contents(fd: &OwnedFd, limits: &Limits) -> Result<Contents, Errno> {
    let dir = open_in(fd, ".", OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, REAL)?;
    let mut scan = Scan { limits, dev: None, entries: 0, bytes: 0 };
    match scan.dir(dir, "", 1)? {
        Some(past) => Ok(Contents::Past(past)),
        None if scan.entries == 0 => Ok(Contents::Empty),
        None => Ok(Contents::Fits),
    }
}

/// The `getdents64(2)` buffer of one directory read, on the stack (a
/// home's dot-files fit in one call; a scan holds one per level).
const DIRENT_BUF: usize = 2048;

/// The unit a tmpfs holds a file's data in (the smallest page size).
const PAGE: u64 = 4096;

/// The running count of [`contents`].
struct Scan<'a> {
    limits: &'a Limits,
    /// The directory's device, read at its first subdirectory.
    dev: Option<u64>,
    entries: u32,
    bytes: u64,
}

impl Scan<'_> {
    /// Scans the open directory `dir` (at `path`, relative to the target,
    /// `depth` levels down); `Some` names what is past the bounds.
    fn dir(&mut self, dir: OwnedFd, path: &str, depth: u32) -> Result<Option<String>, Errno> {
        use rustix::fs::{AtFlags, StatxFlags};
        let mut buf = [std::mem::MaybeUninit::uninit(); DIRENT_BUF];
        let mut list = rustix::fs::RawDir::new(&dir, &mut buf);
        while let Some(entry) = list.next() {
            let entry = entry?;
            let name = entry.file_name();
            if name == c"." || name == c".." {
                continue;
            }
            let rel = format!("{path}/{}", name.to_string_lossy());
            self.entries += 1;
            if self.entries > self.limits.entries {
                return Ok(Some(format!("more than {} entries", self.limits.entries)));
            }
            let st = rustix::fs::statx(
                &dir,
                name,
                AtFlags::SYMLINK_NOFOLLOW,
                StatxFlags::TYPE | StatxFlags::SIZE,
            )?;
            let dev = rustix::fs::makedev(st.stx_dev_major, st.stx_dev_minor);
            match FileType::from_raw_mode(st.stx_mode.into()) {
                FileType::RegularFile => {
                    self.bytes = self.bytes.saturating_add(st.stx_size.div_ceil(PAGE) * PAGE);
                    if self.bytes > self.limits.bytes {
                        return Ok(Some(format!(
                            "more than {} of file data",
                            Bytes(self.limits.bytes).approx()
                        )));
                    }
                }
                FileType::Symlink => {}
                FileType::Directory => {
                    let own = *self.dev.get_or_insert(rustix::fs::fstat(&dir)?.st_dev);
                    if dev != own {
                        return Ok(Some(format!("another mount at .{rel}")));
                    }
                    if depth > self.limits.depth {
                        return Ok(Some(format!("more than {} directories deep", self.limits.depth)));
                    }
                    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
                    let sub = rustix::fs::openat(&dir, name, flags, Mode::empty())?;
                    if let Some(past) = self.dir(sub, &rel, depth + 1)? {
                        return Ok(Some(past));
                    }
                }
                kind => {
                    let what = match kind {
                        FileType::Fifo => "a FIFO",
                        FileType::Socket => "a socket",
                        _ => "a device node",
                    };
                    return Ok(Some(format!("{what} at .{rel}")));
                }
            }
        }
        Ok(None)
    }
}

/// Whether the directory `fd` (an `O_PATH` fd) holds no entry: its first
/// `getdents64` batch read, past `.` and `..`.
///
/// # Errors
/// The `openat`/`getdents64` errno.
pub(super) fn is_empty(fd: &OwnedFd) -> Result<bool, Errno> {
    let dir = open_in(fd, ".", OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, REAL)?;
    let mut buf = [std::mem::MaybeUninit::uninit(); DIRENT_BUF];
    let mut list = rustix::fs::RawDir::new(&dir, &mut buf);
    while let Some(entry) = list.next() {
        let entry = entry?;
        let name = entry.file_name().to_bytes();
        if name != b"." && name != b".." {
            return Ok(false);
        }
    }
    Ok(true)
}

/// What the real in-root path `real` ([`super::rootfs::Rootfs::judge_target`]'s)
/// holds in the image, read-only (for `explain`, as [`contents`] on the
/// fd the placing gets): a directory not there yet, which the placing
/// makes empty, or one the placing refuses (a property of the image),
/// holds nothing.
///
/// # Errors
/// The `openat2`/`getdents64`/`statx` errno otherwise.
pub(crate) fn contents_at(root: &Root, real: &TargetPath, limits: &Limits) -> Result<Contents, Errno> {
    match resolve(&root.fd, real.relative(), REAL) {
        Ok(fd) => contents(&fd, limits),
        Err(Errno::NOENT) => Ok(Contents::Empty),
        Err(e) if skip_reason(e).is_some() => Ok(Contents::Empty),
        Err(e) => Err(e),
    }
}
