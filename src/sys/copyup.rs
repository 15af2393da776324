//! Copy-up: what the image (or a vendor's hook before ours) left in a temp
//! directory is copied into our fresh, still detached tmpfs before it is
//! attached over that directory, so mounting it hides nothing
//! (docs/design.md#copy-up). A CDI vendor hook that writes `/tmp/x` at
//! createRuntime or createContainer before ours keeps its file.
//!
//! The source is the image's and hostile: everything is opened by fd from
//! the resolved target, never following a symlink (`O_NOFOLLOW`; a symlink is
//! copied as a symlink, its text untouched), and never crossing into another
//! mount. Regular files, directories and symlinks are copied with their
//! mode, owner and times; device nodes, sockets and fifos are skipped, and a
//! hard link is copied as a file of its own (its identity is lost), each
//! counted into one warning. The work is bounded: at most [`MAX_ENTRIES`]
//! entries, [`MAX_DEPTH`] levels and [`Limits::bytes`] bytes of file data (the
//! tmpfs' size, at most [`MAX_BYTES`]); past a bound, or on any other
//! failure, the copy stops with an error and the caller leaves the target
//! alone ([`CopyError::left_alone`]): the detached tmpfs is dropped, never
//! attached empty over the image's files, and never half copied. An empty
//! directory costs one `openat` and the `getdents64` calls that read its
//! end. Extended attributes are not copied.
//!
//! Only this copy: where the source and the tmpfs come from, and what to do
//! on failure, is the hook's (`crate::hook::System`).

use std::ffi::{CStr, CString};
use std::fmt;
use std::os::fd::{AsFd, OwnedFd};

use rustix::fs::{AtFlags, Dir, FileType, Gid, Mode, OFlags, Stat, Timespec, Timestamps, Uid};
use rustix::io::Errno;

use super::error::Call;
use crate::plan::Note;
use crate::size::Bytes;

/// At most this many entries are copied (a hostile `/tmp` of a million files
/// must not hold the container's start).
pub(crate) const MAX_ENTRIES: u32 = 4096;
/// At most this many directory levels below the target.
pub(crate) const MAX_DEPTH: u32 = 16;
/// At most this many bytes of file data, whatever the tmpfs' size.
pub(crate) const MAX_BYTES: u64 = 64 << 20;

/// The bounds of one copy.
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

/// What one copy did.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Copied {
    /// Entries copied (files, directories, symlinks).
    pub entries: u32,
    /// Bytes of file data copied.
    pub bytes: u64,
    /// Entries left out (device nodes, sockets, fifos, other mounts), and
    /// the first few of their paths.
    pub skipped: u32,
    pub skipped_paths: Vec<String>,
    /// Files with more than one link, copied as files of their own.
    pub hard_links: u32,
}

impl Copied {
    /// The one warning for what was not copied as it was, if anything.
    pub(crate) fn warning(&self) -> Option<String> {
        let mut parts = Vec::new();
        if self.skipped > 0 {
            parts.push(format!(
                "{} entr{} cannot be copied safely and stay hidden (device nodes, sockets, fifos, other mounts: {})",
                self.skipped,
                if self.skipped == 1 { "y" } else { "ies" },
                self.skipped_paths.join(", ")
            ));
        }
        if self.hard_links > 0 {
            parts.push(format!("{} hard-linked file(s) copied as separate files", self.hard_links));
        }
        (!parts.is_empty()).then(|| parts.join("; "))
    }
}

/// Why a copy stopped.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum CopyError {
    /// More than `Limits::entries` entries.
    TooMany(u32),
    /// Deeper than `Limits::depth`.
    TooDeep(u32),
    /// More than `Limits::bytes` of file data.
    TooBig(Bytes),
    /// A system call failed on `path` (relative to the target).
    Sys { call: Call, path: String, errno: Errno },
}

impl CopyError {
    /// The one warning for the target `what` whose copy stopped: nothing of
    /// the image is ever hidden, so the target is left alone rather than
    /// covered by an empty tmpfs (docs/design.md#copy-up).
    pub(crate) fn left_alone(&self, what: &str) -> Note {
        let why = match self {
            CopyError::Sys { .. } => format!("its contents cannot be copied into the tmpfs ({self})"),
            bound => format!("{bound}, past what copy-up takes"),
        };
        Note::warn(
            what,
            format!(
                "{why}: left alone, its files stay visible and it stays read-only; make it a volume, or empty it in the image"
            ),
        )
    }
}

impl fmt::Display for CopyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CopyError::TooMany(n) => write!(f, "it has more than {n} entries"),
            CopyError::TooDeep(n) => write!(f, "it is more than {n} directories deep"),
            CopyError::TooBig(b) => write!(f, "it holds more than {b} of file data"),
            CopyError::Sys { call, path, errno } => write!(f, "{call} on {path}: {errno}"),
        }
    }
}

/// Copies the contents of the directory `src` (an `O_PATH` fd of the
/// resolved target) into the directory `dst` (the root of the detached
/// tmpfs). `Ok(None)`: `src` is empty, nothing was made.
///
/// # Errors
/// A bound was passed or a system call failed; what was copied so far stays
/// in `dst`, which the caller then drops, leaving the target alone.
pub(crate) fn copy_up(src: &OwnedFd, dst: &OwnedFd, limits: Limits) -> Result<Option<Copied>, CopyError> {
    let dir = open_dir(src, c".", ".")?;
    let mut copier = Copier { limits, dev: 0, done: Copied::default(), buf: Vec::new() };
    let entries = copier.list(dir, ".")?;
    if entries.is_empty() {
        return Ok(None);
    }
    copier.dev = rustix::fs::fstat(src).map_err(sys(Call::Fstat, "."))?.st_dev;
    copier.buf = vec![0; 64 << 10];
    let dst = open_dir(dst, c".", "the new tmpfs")?;
    let src = open_dir(src, c".", ".")?;
    copier.copy_entries(&src, &dst, entries, "", 1)?;
    Ok(Some(copier.done))
}

/// What the copy does with one entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Treat {
    /// Entered and copied, below the bounds.
    Dir,
    /// Its data copied.
    File,
    /// Copied as a symlink, its text untouched.
    Symlink,
    /// Left out, counted into the warning.
    Skip,
}

/// What to do with an entry of type `kind`, `here` when it is on the
/// target's own device: directories and regular files only there (never
/// into another mount), symlinks as text wherever they are, and nothing
/// else (device nodes, sockets, fifos: never opened).
fn treat(kind: FileType, here: bool) -> Treat {
    match kind {
        FileType::Directory if here => Treat::Dir,
        FileType::RegularFile if here => Treat::File,
        FileType::Symlink => Treat::Symlink,
        _ => Treat::Skip,
    }
}

struct Copier {
    limits: Limits,
    /// The target's device: nothing on another is entered.
    dev: u64,
    done: Copied,
    buf: Vec<u8>,
}

/// How many skipped paths the warning names.
const NAMED_SKIPS: usize = 3;

fn sys<'a>(call: Call, path: &'a str) -> impl FnOnce(Errno) -> CopyError + 'a {
    move |errno| CopyError::Sys { call, path: path.to_string(), errno }
}

fn open_dir(at: impl AsFd, name: &CStr, path: &str) -> Result<OwnedFd, CopyError> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    rustix::fs::openat(at, name, flags, Mode::empty()).map_err(sys(Call::Openat, path))
}

fn join(parent: &str, name: &CStr) -> String {
    let name = name.to_string_lossy();
    if parent.is_empty() {
        name.into_owned()
    } else {
        format!("{parent}/{name}")
    }
}

fn times(st: &Stat) -> Timestamps {
    Timestamps {
        last_access: Timespec { tv_sec: st.st_atime as _, tv_nsec: st.st_atime_nsec as _ },
        last_modification: Timespec { tv_sec: st.st_mtime as _, tv_nsec: st.st_mtime_nsec as _ },
    }
}

impl Copier {
    /// The names in `dir` (without `.` and `..`), counted against the entry
    /// bound as they are read: a huge directory is not read to its end.
    fn list(&mut self, dir: OwnedFd, path: &str) -> Result<Vec<CString>, CopyError> {
        let mut names = Vec::new();
        let mut dir = Dir::new(dir).map_err(sys(Call::Getdents64, path))?;
        while let Some(entry) = dir.read() {
            let entry = entry.map_err(sys(Call::Getdents64, path))?;
            let name = entry.file_name();
            if name == c"." || name == c".." {
                continue;
            }
            self.count()?;
            names.push(name.to_owned());
        }
        Ok(names)
    }

    fn count(&mut self) -> Result<(), CopyError> {
        self.done.entries += 1;
        if self.done.entries > self.limits.entries {
            return Err(CopyError::TooMany(self.limits.entries));
        }
        Ok(())
    }

    fn skip(&mut self, path: String) {
        self.done.entries -= 1;
        self.done.skipped += 1;
        if self.done.skipped_paths.len() < NAMED_SKIPS {
            self.done.skipped_paths.push(path);
        }
    }

    fn copy_entries(
        &mut self,
        src: &OwnedFd,
        dst: &OwnedFd,
        names: Vec<CString>,
        parent: &str,
        depth: u32,
    ) -> Result<(), CopyError> {
        for name in names {
            let path = join(parent, &name);
            let st = match rustix::fs::statat(src, &name, AtFlags::SYMLINK_NOFOLLOW) {
                Ok(st) => st,
                // Gone since it was listed.
                Err(Errno::NOENT) => {
                    self.done.entries -= 1;
                    continue;
                }
                Err(e) => return Err(sys(Call::Fstatat, &path)(e)),
            };
            match treat(FileType::from_raw_mode(st.st_mode), st.st_dev == self.dev) {
                Treat::Dir => self.copy_dir(src, dst, &name, &path, depth)?,
                Treat::File => self.copy_file(src, dst, &name, &path, &st)?,
                Treat::Symlink => self.copy_symlink(src, dst, &name, &path, &st)?,
                Treat::Skip => self.skip(format!("/{path}")),
            }
        }
        Ok(())
    }

    fn copy_dir(
        &mut self,
        src: &OwnedFd,
        dst: &OwnedFd,
        name: &CStr,
        path: &str,
        depth: u32,
    ) -> Result<(), CopyError> {
        if depth > self.limits.depth {
            return Err(CopyError::TooDeep(self.limits.depth));
        }
        let from = open_dir(src, name, path)?;
        let st = rustix::fs::fstat(&from).map_err(sys(Call::Fstat, path))?;
        if st.st_dev != self.dev {
            // Swapped for a mount point since its stat.
            self.skip(format!("/{path}"));
            return Ok(());
        }
        let names = self.list(open_dir(&from, c".", path)?, path)?;
        match rustix::fs::mkdirat(dst, name, Mode::from_raw_mode(0o700)) {
            // A directory the plan made already (a nested target): kept as the plan made it.
            Ok(()) | Err(Errno::EXIST) => {}
            Err(e) => return Err(sys(Call::Mkdirat, path)(e)),
        }
        let to = open_dir(dst, name, path)?;
        self.copy_entries(&from, &to, names, path, depth + 1)?;
        self.set_meta(&to, &st, path)
    }

    fn copy_file(
        &mut self,
        src: &OwnedFd,
        dst: &OwnedFd,
        name: &CStr,
        path: &str,
        st: &Stat,
    ) -> Result<(), CopyError> {
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
        let from = rustix::fs::openat(src, name, flags, Mode::empty()).map_err(sys(Call::Openat, path))?;
        let now = rustix::fs::fstat(&from).map_err(sys(Call::Fstat, path))?;
        if (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino)
            || FileType::from_raw_mode(now.st_mode) != FileType::RegularFile
        {
            // Swapped since its stat: not what was looked at.
            self.skip(format!("/{path}"));
            return Ok(());
        }
        if now.st_nlink > 1 {
            self.done.hard_links += 1;
        }
        // Past the bound by its size alone: stop before reading it (a
        // sparse 1 GiB file would be read 64 MiB deep, docs/design.md#home-copy).
        if self.done.bytes.saturating_add(u64::try_from(now.st_size).unwrap_or(u64::MAX)) > self.limits.bytes
        {
            return Err(CopyError::TooBig(Bytes(self.limits.bytes)));
        }
        let create = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let to = rustix::fs::openat(dst, name, create, Mode::from_raw_mode(0o600))
            .map_err(sys(Call::Openat, path))?;
        loop {
            let n = rustix::io::read(&from, &mut self.buf[..]).map_err(sys(Call::Read, path))?;
            if n == 0 {
                break;
            }
            self.done.bytes += n as u64;
            if self.done.bytes > self.limits.bytes {
                return Err(CopyError::TooBig(Bytes(self.limits.bytes)));
            }
            let mut chunk = &self.buf[..n];
            while !chunk.is_empty() {
                let w = rustix::io::write(&to, chunk).map_err(sys(Call::Write, path))?;
                chunk = &chunk[w..];
            }
        }
        self.set_meta(&to, &now, path)
    }

    fn copy_symlink(
        &mut self,
        src: &OwnedFd,
        dst: &OwnedFd,
        name: &CStr,
        path: &str,
        st: &Stat,
    ) -> Result<(), CopyError> {
        // Its text, never what it points to.
        let text = rustix::fs::readlinkat(src, name, Vec::new()).map_err(sys(Call::Readlinkat, path))?;
        rustix::fs::symlinkat(text.as_c_str(), dst, name).map_err(sys(Call::Symlinkat, path))?;
        let (uid, gid) = (Uid::from_raw(st.st_uid), Gid::from_raw(st.st_gid));
        rustix::fs::chownat(dst, name, Some(uid), Some(gid), AtFlags::SYMLINK_NOFOLLOW)
            .map_err(sys(Call::Fchownat, path))?;
        rustix::fs::utimensat(dst, name, &times(st), AtFlags::SYMLINK_NOFOLLOW)
            .map_err(sys(Call::Utimensat, path))
    }

    /// Owner, then mode (a chown clears set-id bits), then times (last: making
    /// the entries of a directory changes its mtime).
    fn set_meta(&mut self, to: &OwnedFd, st: &Stat, path: &str) -> Result<(), CopyError> {
        let (uid, gid) = (Uid::from_raw(st.st_uid), Gid::from_raw(st.st_gid));
        rustix::fs::fchown(to, Some(uid), Some(gid)).map_err(sys(Call::Fchown, path))?;
        rustix::fs::fchmod(to, Mode::from_raw_mode(st.st_mode & 0o7777)).map_err(sys(Call::Fchmod, path))?;
        rustix::fs::futimens(to, &times(st)).map_err(sys(Call::Futimens, path))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{symlink, MetadataExt, PermissionsExt};
    use std::path::Path;

    fn o_path(p: &Path) -> OwnedFd {
        rustix::fs::open(p, OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty()).unwrap()
    }

    fn dirs(name: &str) -> (std::path::PathBuf, std::path::PathBuf) {
        let base = std::env::temp_dir().join(format!("oci-tmpfs-copyup-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let (src, dst) = (base.join("src"), base.join("dst"));
        std::fs::create_dir_all(&src).unwrap();
        std::fs::create_dir_all(&dst).unwrap();
        (src, dst)
    }

    fn copy(src: &Path, dst: &Path, limits: Limits) -> Result<Option<Copied>, CopyError> {
        copy_up(&o_path(src), &o_path(dst), limits)
    }

    const BIG: Limits = Limits { entries: 100, depth: 4, bytes: 1 << 20 };

    #[test]
    fn an_empty_directory_copies_nothing() {
        let (src, dst) = dirs("empty");
        assert_eq!(copy(&src, &dst, BIG), Ok(None));
    }

    #[test]
    fn files_dirs_and_symlinks_keep_mode_times_and_text() {
        let (src, dst) = dirs("tree");
        std::fs::create_dir(src.join("d")).unwrap();
        std::fs::write(src.join("d/f"), b"vendor").unwrap();
        std::fs::set_permissions(src.join("d/f"), std::fs::Permissions::from_mode(0o640)).unwrap();
        std::fs::set_permissions(src.join("d"), std::fs::Permissions::from_mode(0o750)).unwrap();
        // Pointing out of the tree: copied as text, not followed.
        symlink("/etc/shadow", src.join("l")).unwrap();
        let copied = copy(&src, &dst, BIG).unwrap().unwrap();
        assert_eq!((copied.entries, copied.bytes, copied.warning()), (3, 6, None));
        assert_eq!(std::fs::read(dst.join("d/f")).unwrap(), b"vendor");
        let (a, b) =
            (std::fs::metadata(src.join("d/f")).unwrap(), std::fs::metadata(dst.join("d/f")).unwrap());
        assert_eq!((b.mode(), b.mtime(), b.mtime_nsec()), (a.mode(), a.mtime(), a.mtime_nsec()));
        let d = std::fs::metadata(dst.join("d")).unwrap();
        assert_eq!(d.mode() & 0o7777, 0o750);
        assert_eq!(d.mtime(), std::fs::metadata(src.join("d")).unwrap().mtime());
        assert_eq!(std::fs::read_link(dst.join("l")).unwrap(), Path::new("/etc/shadow"));
    }

    #[test]
    fn fifos_are_left_out_and_hard_links_named_once() {
        let (src, dst) = dirs("odd");
        rustix::fs::mkfifoat(rustix::fs::CWD, src.join("fifo"), Mode::from_raw_mode(0o600)).unwrap();
        std::fs::write(src.join("a"), b"x").unwrap();
        std::fs::hard_link(src.join("a"), src.join("b")).unwrap();
        let copied = copy(&src, &dst, BIG).unwrap().unwrap();
        assert_eq!((copied.entries, copied.skipped, copied.hard_links), (2, 1, 2));
        let warning = copied.warning().unwrap();
        assert!(warning.contains("/fifo") && warning.contains("2 hard-linked"), "{warning}");
        assert!(!dst.join("fifo").exists());
    }

    #[test]
    fn the_bounds_stop_the_copy() {
        let (src, dst) = dirs("bounds");
        for i in 0..5 {
            std::fs::write(src.join(format!("f{i}")), vec![0u8; 1000]).unwrap();
        }
        let few = Limits { entries: 4, ..BIG };
        assert_eq!(copy(&src, &dst, few), Err(CopyError::TooMany(4)));
        let (src2, dst2) = dirs("bytes");
        std::fs::write(src2.join("f"), vec![0u8; 5000]).unwrap();
        assert_eq!(copy(&src2, &dst2, Limits { bytes: 4096, ..BIG }), Err(CopyError::TooBig(Bytes(4096))));
        // Judged by its size before a byte is read: a sparse 1 GiB file
        // stops the copy with nothing of it made.
        let (src5, dst5) = dirs("sparse");
        std::fs::File::create(src5.join("big")).unwrap().set_len(1 << 30).unwrap();
        assert_eq!(copy(&src5, &dst5, Limits { bytes: 4096, ..BIG }), Err(CopyError::TooBig(Bytes(4096))));
        assert!(!dst5.join("big").exists(), "nothing made for a file past the bound");
        let (src3, dst3) = dirs("deep");
        std::fs::create_dir_all(src3.join("a/b/c")).unwrap();
        assert_eq!(copy(&src3, &dst3, Limits { depth: 2, ..BIG }), Err(CopyError::TooDeep(2)));
        let (_, dst4) = dirs("deep-enough");
        assert!(copy(&src3, &dst4, Limits { depth: 3, ..BIG }).is_ok());
    }

    /// Only directories, regular files and symlinks are copied; a device
    /// node, socket or fifo is never opened, and nothing on another mount
    /// is entered or read.
    #[test]
    fn what_each_entry_gets() {
        let cases = [
            (FileType::Directory, true, Treat::Dir),
            (FileType::RegularFile, true, Treat::File),
            (FileType::Symlink, true, Treat::Symlink),
            (FileType::Symlink, false, Treat::Symlink),
            (FileType::Directory, false, Treat::Skip),
            (FileType::RegularFile, false, Treat::Skip),
            (FileType::CharacterDevice, true, Treat::Skip),
            (FileType::BlockDevice, true, Treat::Skip),
            (FileType::Fifo, true, Treat::Skip),
            (FileType::Socket, true, Treat::Skip),
            (FileType::Unknown, true, Treat::Skip),
        ];
        for (kind, here, want) in cases {
            assert_eq!(treat(kind, here), want, "{kind:?} on the target's device: {here}");
        }
    }

    #[test]
    fn a_stopped_copy_leaves_the_target_alone_and_says_why() {
        let sys = CopyError::Sys { call: Call::Openat, path: "d/f".into(), errno: Errno::ACCESS };
        let cases = [
            (CopyError::TooMany(MAX_ENTRIES), "it has more than 4096 entries, past what copy-up takes"),
            (CopyError::TooDeep(MAX_DEPTH), "it is more than 16 directories deep, past what copy-up takes"),
            (
                CopyError::TooBig(Bytes(MAX_BYTES)),
                "it holds more than 64Mi of file data, past what copy-up takes",
            ),
            (sys, "its contents cannot be copied into the tmpfs (openat(2) on d/f: "),
        ];
        for (e, why) in cases {
            let note = e.left_alone("/root");
            assert!(note.warn, "{e}: a warning");
            assert_eq!(note.subject, "/root");
            assert!(note.reason.starts_with(why), "{e}: {}", note.reason);
            assert!(
                note.reason.contains("left alone, its files stay visible and it stays read-only")
                    && note.reason.ends_with("make it a volume, or empty it in the image"),
                "{e}: says what happens and what to do: {}",
                note.reason
            );
        }
    }
}
