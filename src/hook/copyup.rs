//! Copy-up: what the image (or a vendor's hook before ours) left in a temp
//! directory is copied into our fresh, still detached tmpfs before it is
//! attached over that directory, so mounting it hides nothing
//! (docs/design.md#copy-up). A CDI vendor hook that writes `/tmp/x` at
//! createRuntime or createContainer before ours keeps its file.
//!
//! The source is the image's and hostile: everything is opened by fd from
//! the resolved target, never following a symlink (`O_NOFOLLOW`; a symlink is
//! copied as a symlink, its text untouched), and never crossing into another
//! mount; a file is checked on an `O_PATH` fd and read through that fd, never
//! opened by its name (docs/design.md#reopen). Regular files, directories and symlinks are copied with their
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
//! This is the walk and its bounds, the hook's policy; its calls are
//! [`crate::sys::copy`]'s, behind [`CopyFs`], so the walk's decisions are
//! tested on a map too. Only this copy: where the source and the tmpfs come
//! from, and what to do on failure, is [`super::system`]'s.

use std::ffi::{CStr, CString};
use std::fmt;

use rustix::fs::FileType;
use rustix::io::Errno;

use crate::plan::Note;
use crate::size::Bytes;
pub(crate) use crate::sys::copy::Fds;
use crate::sys::copy::{CopyFs, Meta};
use crate::sys::Syscall;

pub(crate) use crate::sys::copy::Limits;
#[cfg(doc)]
use crate::sys::copy::{MAX_BYTES, MAX_DEPTH, MAX_ENTRIES};

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
    Sys { call: Syscall, path: String, errno: Errno },
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
/// tmpfs), with the calls of `fs` ([`Fds`] for the real ones).
/// `Ok(None)`: `src` is empty, nothing was made.
///
/// # Errors
/// A bound was passed or a system call failed; what was copied so far stays
/// in `dst`, which the caller then drops, leaving the target alone.
pub(crate) fn copy_up<F: CopyFs>(
    fs: &mut F,
    src: &F::Fd,
    dst: &F::Fd,
    limits: Limits,
) -> Result<Option<Copied>, CopyError> {
    let mut copier = Copier { fs, limits, dev: 0, done: Copied::default(), buf: Vec::new() };
    let dir = copier.open_dir(src, c".", ".")?;
    let entries = copier.list(dir, ".")?;
    if entries.is_empty() {
        return Ok(None);
    }
    copier.dev = copier.fs.stat(src).map_err(sys(Syscall::Fstat, "."))?.dev;
    copier.buf = vec![0; 64 << 10];
    let dst = copier.open_dir(dst, c".", "the new tmpfs")?;
    let src = copier.open_dir(src, c".", ".")?;
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

struct Copier<'f, F: CopyFs> {
    fs: &'f mut F,
    limits: Limits,
    /// The target's device: nothing on another is entered.
    dev: u64,
    done: Copied,
    buf: Vec<u8>,
}

/// How many skipped paths the warning names.
const NAMED_SKIPS: usize = 3;

fn sys<'a>(call: Syscall, path: &'a str) -> impl FnOnce(Errno) -> CopyError + 'a {
    move |errno| CopyError::Sys { call, path: path.to_string(), errno }
}

fn join(parent: &str, name: &CStr) -> String {
    let name = name.to_string_lossy();
    if parent.is_empty() {
        name.into_owned()
    } else {
        format!("{parent}/{name}")
    }
}

impl<F: CopyFs> Copier<'_, F> {
    fn open_dir(&mut self, at: &F::Fd, name: &CStr, path: &str) -> Result<F::Fd, CopyError> {
        self.fs.open_dir(at, name).map_err(sys(Syscall::Openat, path))
    }

    /// The names in `dir` (without `.` and `..`), counted against the entry
    /// bound as they are read: a huge directory is not read to its end.
    fn list(&mut self, dir: F::Fd, path: &str) -> Result<Vec<CString>, CopyError> {
        let room = self.limits.entries.saturating_sub(self.done.entries);
        let Some(names) = self.fs.list(dir, room).map_err(sys(Syscall::Getdents64, path))? else {
            return Err(CopyError::TooMany(self.limits.entries));
        };
        self.done.entries += names.len() as u32;
        Ok(names)
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
        src: &F::Fd,
        dst: &F::Fd,
        names: Vec<CString>,
        parent: &str,
        depth: u32,
    ) -> Result<(), CopyError> {
        for name in names {
            let path = join(parent, &name);
            let st = match self.fs.stat_at(src, &name) {
                Ok(st) => st,
                // Gone since it was listed.
                Err(Errno::NOENT) => {
                    self.done.entries -= 1;
                    continue;
                }
                Err(e) => return Err(sys(Syscall::Fstatat, &path)(e)),
            };
            match treat(st.kind, st.dev == self.dev) {
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
        src: &F::Fd,
        dst: &F::Fd,
        name: &CStr,
        path: &str,
        depth: u32,
    ) -> Result<(), CopyError> {
        if depth > self.limits.depth {
            return Err(CopyError::TooDeep(self.limits.depth));
        }
        let from = self.open_dir(src, name, path)?;
        let st = self.fs.stat(&from).map_err(sys(Syscall::Fstat, path))?;
        if st.dev != self.dev {
            // Swapped for a mount point since its stat.
            self.skip(format!("/{path}"));
            return Ok(());
        }
        let listed = self.open_dir(&from, c".", path)?;
        let names = self.list(listed, path)?;
        // A directory the plan made already (a nested target: `TMPDIR=/root/tmp`
        // in the home's tmpfs) is filled, and kept as the plan made it: its
        // owner and mode are the plan's, not the image's.
        let planned = match self.fs.mkdir(dst, name) {
            Ok(()) => false,
            Err(Errno::EXIST) => true,
            Err(e) => return Err(sys(Syscall::Mkdirat, path)(e)),
        };
        let to = self.open_dir(dst, name, path)?;
        self.copy_entries(&from, &to, names, path, depth + 1)?;
        if planned {
            return Ok(());
        }
        self.set_meta(&to, &st, path)
    }

    fn copy_file(
        &mut self,
        src: &F::Fd,
        dst: &F::Fd,
        name: &CStr,
        path: &str,
        st: &Meta,
    ) -> Result<(), CopyError> {
        // Checked on an `O_PATH` fd, then read through that fd, never
        // opened by its name: a device node renamed in meanwhile is never
        // opened (docs/design.md#reopen).
        let at = self.fs.open_path(src, name).map_err(sys(Syscall::Openat, path))?;
        let now = self.fs.stat(&at).map_err(sys(Syscall::Fstat, path))?;
        if (now.dev, now.ino) != (st.dev, st.ino) || now.kind != FileType::RegularFile {
            // Swapped since its stat: not what was looked at.
            self.skip(format!("/{path}"));
            return Ok(());
        }
        if now.nlink > 1 {
            self.done.hard_links += 1;
        }
        // Past the bound by its size alone: stop before reading it (a
        // sparse 1 GiB file would be read 64 MiB deep, docs/design.md#home-copy).
        if self.done.bytes.saturating_add(now.size) > self.limits.bytes {
            return Err(CopyError::TooBig(Bytes(self.limits.bytes)));
        }
        let from = self.fs.reopen(&at, &now).map_err(sys(Syscall::Openat, path))?;
        let to = self.fs.create(dst, name).map_err(sys(Syscall::Openat, path))?;
        loop {
            let n = self.fs.read(&from, &mut self.buf[..]).map_err(sys(Syscall::Read, path))?;
            if n == 0 {
                break;
            }
            self.done.bytes += n as u64;
            if self.done.bytes > self.limits.bytes {
                return Err(CopyError::TooBig(Bytes(self.limits.bytes)));
            }
            let mut chunk = &self.buf[..n];
            while !chunk.is_empty() {
                let w = self.fs.write(&to, chunk).map_err(sys(Syscall::Write, path))?;
                chunk = &chunk[w..];
            }
        }
        self.set_meta(&to, &now, path)
    }

    fn copy_symlink(
        &mut self,
        src: &F::Fd,
        dst: &F::Fd,
        name: &CStr,
        path: &str,
        st: &Meta,
    ) -> Result<(), CopyError> {
        self.fs.copy_link(src, dst, name, st).map_err(|(call, e)| sys(call, path)(e))
    }

    /// Owner, then mode (a chown clears set-id bits), then times (last: making
    /// the entries of a directory changes its mtime).
    fn set_meta(&mut self, to: &F::Fd, st: &Meta, path: &str) -> Result<(), CopyError> {
        self.fs.set_meta(to, st).map_err(|(call, e)| sys(call, path)(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::copy::{MAX_BYTES, MAX_DEPTH, MAX_ENTRIES};
    use rustix::fs::{Mode, OFlags, Timespec};
    use std::os::fd::OwnedFd;
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
        let proc = crate::sys::procfs::Proc::open().unwrap();
        copy_up(&mut Fds::new(&proc), &o_path(src), &o_path(dst), limits)
    }

    const BIG: Limits = Limits { entries: 100, depth: 4, bytes: 1 << 20 };

    /// A source tree as a map, for the walk's decisions without root (a
    /// device node needs root to make): path (relative to the target, `""`
    /// the target) -> what is there. The fds are paths, `src:` or `dst:`;
    /// every call that touches an entry is recorded.
    #[derive(Default)]
    struct MapFs {
        nodes: std::collections::BTreeMap<String, Node>,
        calls: Vec<String>,
        /// Read offsets of the files opened.
        read: std::collections::HashMap<String, usize>,
        /// Directories in the new tmpfs before the copy (made by the plan).
        made: Vec<String>,
        /// What got the owner, mode and times of its source.
        metas: Vec<String>,
    }

    #[derive(Clone)]
    struct Node {
        kind: FileType,
        dev: u64,
        data: Vec<u8>,
        /// Its size by `stat` (a sparse file's is more than its data).
        size: u64,
        /// Another file once opened (a rename between `stat` and `open`).
        swapped: bool,
        /// The type its `O_PATH` fd shows (a device node renamed in).
        became: Option<FileType>,
        /// Listed, but gone by its `stat`.
        gone: bool,
    }

    impl MapFs {
        fn new(entries: &[(&str, FileType)]) -> MapFs {
            let mut t = MapFs::default();
            t.add("", FileType::Directory, 1, b"");
            for (path, kind) in entries {
                t.add(path, *kind, 1, b"x");
            }
            t
        }

        fn add(&mut self, path: &str, kind: FileType, dev: u64, data: &[u8]) -> &mut Node {
            let node = Node {
                kind,
                dev,
                data: data.to_vec(),
                size: data.len() as u64,
                swapped: false,
                became: None,
                gone: false,
            };
            self.nodes.entry(path.to_string()).or_insert(node)
        }

        fn path(at: &str, name: &CStr) -> String {
            let name = name.to_str().unwrap();
            let (side, at) = at.split_once(':').unwrap();
            match (at, name) {
                (at, ".") => format!("{side}:{at}"),
                ("", name) => format!("{side}:{name}"),
                (at, name) => format!("{side}:{at}/{name}"),
            }
        }

        fn node(&self, fd: &str) -> Result<&Node, Errno> {
            match fd.split_once(':').unwrap() {
                ("src", p) => self.nodes.get(p).filter(|n| !n.gone).ok_or(Errno::NOENT),
                _ => Err(Errno::NOENT),
            }
        }

        fn meta(&self, fd: &str, opened: bool) -> Result<Meta, Errno> {
            if fd.starts_with("dst:") {
                let dir = Timespec { tv_sec: 0, tv_nsec: 0 };
                let kind = FileType::Directory;
                return Ok(Meta {
                    kind,
                    dev: 9,
                    ino: 0,
                    mode: 0o755,
                    uid: 0,
                    gid: 0,
                    size: 0,
                    nlink: 1,
                    atime: dir,
                    mtime: dir,
                });
            }
            let n = self.node(fd)?;
            let ino = fd.len() as u64 + u64::from(opened && n.swapped);
            let t = Timespec { tv_sec: 1, tv_nsec: 0 };
            Ok(Meta {
                kind: if opened { n.became.unwrap_or(n.kind) } else { n.kind },
                dev: n.dev,
                ino,
                mode: 0o644,
                uid: 0,
                gid: 0,
                size: n.size,
                nlink: 1,
                atime: t,
                mtime: t,
            })
        }
    }

    impl CopyFs for MapFs {
        type Fd = String;

        fn open_dir(&mut self, at: &String, name: &CStr) -> Result<String, Errno> {
            let fd = MapFs::path(at, name);
            if fd.starts_with("src:") && self.node(&fd)?.kind != FileType::Directory {
                return Err(Errno::NOTDIR);
            }
            Ok(fd)
        }

        fn list(&mut self, dir: String, room: u32) -> Result<Option<Vec<CString>>, Errno> {
            let dir = dir.strip_prefix("src:").unwrap().to_string();
            let mut names = Vec::new();
            for path in self.nodes.keys().filter(|p| !p.is_empty()) {
                let (parent, name) = path.rsplit_once('/').unwrap_or(("", path));
                if parent == dir {
                    if names.len() >= room as usize {
                        self.calls.push(format!("list {dir}: stopped"));
                        return Ok(None);
                    }
                    names.push(CString::new(name).unwrap());
                }
            }
            Ok(Some(names))
        }

        fn stat(&mut self, fd: &String) -> Result<Meta, Errno> {
            self.meta(fd, true)
        }

        fn stat_at(&mut self, dir: &String, name: &CStr) -> Result<Meta, Errno> {
            self.meta(&MapFs::path(dir, name), false)
        }

        fn mkdir(&mut self, dir: &String, name: &CStr) -> Result<(), Errno> {
            let fd = MapFs::path(dir, name);
            self.calls.push(format!("mkdir {fd}"));
            match self.made.contains(&fd) {
                true => Err(Errno::EXIST),
                false => Ok(()),
            }
        }

        fn open_path(&mut self, dir: &String, name: &CStr) -> Result<String, Errno> {
            let fd = MapFs::path(dir, name);
            self.calls.push(format!("path {fd}"));
            Ok(fd)
        }

        fn reopen(&mut self, fd: &String, meta: &Meta) -> Result<String, Errno> {
            self.calls.push(format!("open {fd}"));
            match meta.kind {
                FileType::RegularFile | FileType::Directory => Ok(fd.clone()),
                _ => panic!("{fd}: a {:?} is opened", meta.kind),
            }
        }

        fn create(&mut self, dir: &String, name: &CStr) -> Result<String, Errno> {
            let fd = MapFs::path(dir, name);
            self.calls.push(format!("create {fd}"));
            Ok(fd)
        }

        fn read(&mut self, fd: &String, buf: &mut [u8]) -> Result<usize, Errno> {
            let data = self.node(fd)?.data.clone();
            let at = self.read.entry(fd.clone()).or_default();
            let n = (data.len() - *at).min(buf.len());
            buf[..n].copy_from_slice(&data[*at..*at + n]);
            *at += n;
            Ok(n)
        }

        fn write(&mut self, fd: &String, buf: &[u8]) -> Result<usize, Errno> {
            self.calls.push(format!("write {fd} {}", buf.len()));
            Ok(buf.len())
        }

        fn copy_link(
            &mut self,
            _: &String,
            dst: &String,
            name: &CStr,
            _: &Meta,
        ) -> Result<(), (Syscall, Errno)> {
            self.calls.push(format!("link {}", MapFs::path(dst, name)));
            Ok(())
        }

        fn set_meta(&mut self, fd: &String, _: &Meta) -> Result<(), (Syscall, Errno)> {
            self.metas.push(fd.clone());
            Ok(())
        }
    }

    fn walk(tree: &mut MapFs, limits: Limits) -> Result<Option<Copied>, CopyError> {
        copy_up(tree, &"src:".to_string(), &"dst:".to_string(), limits)
    }

    /// Device nodes, sockets and fifos are left out and never opened; the
    /// warning names the first three.
    #[test]
    fn devices_sockets_and_fifos_are_never_opened() {
        let mut tree = MapFs::new(&[
            ("null", FileType::CharacterDevice),
            ("sda", FileType::BlockDevice),
            ("fifo", FileType::Fifo),
            ("sock", FileType::Socket),
            ("f", FileType::RegularFile),
        ]);
        let copied = walk(&mut tree, BIG).unwrap().unwrap();
        assert_eq!((copied.entries, copied.skipped, copied.bytes), (1, 4, 1));
        assert_eq!(copied.skipped_paths, ["/fifo", "/null", "/sda"]);
        assert_eq!(tree.calls, ["path src:f", "open src:f", "create dst:f", "write dst:f 1"]);
    }

    /// A directory the plan made in the new tmpfs (`TMPDIR=/root/tmp` in
    /// the home's, mode 1777) gets what the image's directory of that name
    /// holds, and keeps the plan's owner and mode: only what copy-up made
    /// takes the image's.
    #[test]
    fn a_directory_the_plan_made_keeps_its_owner_and_mode() {
        let mut tree = MapFs::new(&[("tmp", FileType::Directory), ("cache", FileType::Directory)]);
        tree.add("tmp/f", FileType::RegularFile, 1, b"x");
        tree.made.push("dst:tmp".into());
        let copied = walk(&mut tree, BIG).unwrap().unwrap();
        assert_eq!(copied.entries, 3);
        assert!(tree.calls.contains(&"create dst:tmp/f".to_string()), "filled: {:?}", tree.calls);
        assert_eq!(tree.metas, ["dst:cache", "dst:tmp/f"], "the plan's tmp keeps its owner and mode");
    }

    /// Nothing on another mount is entered or read; a symlink there is
    /// copied as its text.
    #[test]
    fn another_mount_is_not_entered() {
        let mut tree = MapFs::new(&[]);
        tree.add("vol", FileType::Directory, 2, b"");
        tree.add("vol/secret", FileType::RegularFile, 2, b"s");
        tree.add("f", FileType::RegularFile, 2, b"s");
        tree.add("l", FileType::Symlink, 2, b"");
        let copied = walk(&mut tree, BIG).unwrap().unwrap();
        assert_eq!((copied.entries, copied.skipped), (1, 2));
        assert_eq!(tree.calls, ["link dst:l"]);
    }

    /// Each bound stops the walk where it is passed: the entry bound while
    /// listing (the rest is not read), the depth bound before the deeper
    /// directory is opened, the byte bound by a file's size before a byte
    /// of it is read or its copy made.
    #[test]
    fn the_bounds_stop_the_walk() {
        let mut tree = MapFs::new(&[("a", FileType::RegularFile), ("b", FileType::RegularFile)]);
        tree.add("d", FileType::Directory, 1, b"");
        tree.add("d/c", FileType::RegularFile, 1, b"x");
        tree.add("d/e", FileType::RegularFile, 1, b"x");
        assert_eq!(walk(&mut tree, Limits { entries: 4, ..BIG }), Err(CopyError::TooMany(4)));
        assert_eq!(tree.calls.last().unwrap(), "list d: stopped");
        assert!(walk(&mut MapFs::new(&[("a", FileType::RegularFile)]), Limits { entries: 1, ..BIG }).is_ok());

        let mut deep = MapFs::new(&[("a", FileType::Directory), ("a/b", FileType::Directory)]);
        deep.add("a/b/c", FileType::RegularFile, 1, b"x");
        assert_eq!(walk(&mut deep, Limits { depth: 1, ..BIG }), Err(CopyError::TooDeep(1)));
        assert_eq!(deep.calls, ["mkdir dst:a"], "a/b is never made");

        let mut big = MapFs::new(&[]);
        big.add("sparse", FileType::RegularFile, 1, b"").size = 1 << 30;
        assert_eq!(walk(&mut big, Limits { bytes: 4096, ..BIG }), Err(CopyError::TooBig(Bytes(4096))));
        assert_eq!(big.calls, ["path src:sparse"], "nothing opened or made for a file past the bound");
    }

    /// What changed between its `stat` and its `open` is left out (a file
    /// swapped for another), and what is gone is not counted.
    #[test]
    fn a_swapped_file_is_left_out_and_a_gone_one_not_counted() {
        let mut tree = MapFs::new(&[("f", FileType::RegularFile)]);
        tree.add("swapped", FileType::RegularFile, 1, b"x").swapped = true;
        tree.add("gone", FileType::RegularFile, 1, b"x").gone = true;
        let copied = walk(&mut tree, BIG).unwrap().unwrap();
        assert_eq!(
            (copied.entries, copied.skipped, copied.skipped_paths.as_slice()),
            (1, 1, &["/swapped".to_string()][..])
        );
        assert_eq!(
            tree.calls,
            ["path src:f", "open src:f", "create dst:f", "write dst:f 1", "path src:swapped"],
            "the swapped one is looked at by O_PATH only"
        );
    }

    /// A regular file by its `stat` whose `O_PATH` fd is a device node (a
    /// rename swapped one in) is left out and never opened: only an
    /// `O_PATH` fd of it is taken, and the file read is reopened from the
    /// checked fd, not by its name (`MapFs::reopen` panics on a device).
    #[test]
    fn a_device_swapped_in_is_never_opened() {
        let mut tree = MapFs::new(&[("f", FileType::RegularFile)]);
        let dev = tree.add("dev", FileType::RegularFile, 1, b"x");
        (dev.swapped, dev.became) = (true, Some(FileType::CharacterDevice));
        tree.add("same", FileType::RegularFile, 1, b"x").became = Some(FileType::BlockDevice);
        let copied = walk(&mut tree, BIG).unwrap().unwrap();
        assert_eq!(
            (copied.entries, copied.skipped_paths.as_slice()),
            (1, &["/dev".into(), "/same".into()][..])
        );
        assert_eq!(
            tree.calls,
            ["path src:dev", "path src:f", "open src:f", "create dst:f", "write dst:f 1", "path src:same"]
        );
    }

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
        let sys = CopyError::Sys { call: Syscall::Openat, path: "d/f".into(), errno: Errno::ACCESS };
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
