//! Paths inside the hostile rootfs (docs/design.md#hostile-rootfs rule 3): every one is
//! resolved with `openat2(2)` `RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS` from an
//! `O_PATH` fd of the rootfs (plus `RESOLVE_NO_XDEV` for temp targets, so that
//! "already a mount point" reads as `EXDEV`); missing directories are made
//! with `mkdirat(2)` on resolved fds; where a path really landed is read back
//! from the fd (a read-only rootfs is written through a writable clone,
//! [`super::mount`]'s). The image's `/etc/passwd` is read here too, by fd
//! and bounded ([`Root::read_passwd`]). No mounts are made here.

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;

use rustix::fs::{FileType, Mode, OFlags, ResolveFlags};
use rustix::io::Errno;

use super::copy::Limits;
use super::error::{SysError, Syscall};
use super::mount;
use super::procfs::{Checked, Proc, PROC_SUPER_MAGIC};
use crate::plan::landing::{self, Entry, Landing, Stop, Tree, Walk};
use crate::plan::{self, HomeDir, Note, Passwd, SpecMount};
use crate::size::Bytes;
use crate::target::{self, TargetPath};

/// How often to retry `openat2` at once when the kernel reports a concurrent
/// rename (`EAGAIN`: any rename on the system during an `RESOLVE_IN_ROOT`
/// walk), before pausing between tries.
const EAGAIN_RETRIES: usize = 16;
/// How long to go on retrying, with short pauses, on a host busy renaming.
const EAGAIN_PATIENCE: std::time::Duration = std::time::Duration::from_millis(500);

/// The container's rootfs, opened: what every preparation resolves from.
/// Only [`Root::open`] makes one, so nothing can resolve before it.
#[derive(Debug)]
pub(crate) struct Root {
    fd: OwnedFd,
    /// The rootfs path as the kernel names it in this mount namespace.
    name: String,
    /// A writable clone of the rootfs mount, made when a directory must be
    /// created and the rootfs mount is already read-only.
    writable: Option<OwnedFd>,
    /// Directories (device, inode) that already have a mount prepared, for
    /// which target, and where they landed: two targets reached through
    /// symlinks (`/var -> /` with `TMPDIR=/var/tmp`, or `/tmp -> /root/tmp`
    /// with `HOME=/root`) must not stack two mounts.
    claimed: Vec<((u64, u64), Claim)>,
}

/// Temp targets: never cross a mount (a volume, or `/tmp` already mounted).
pub(crate) const TARGET: ResolveFlags =
    ResolveFlags::IN_ROOT.union(ResolveFlags::NO_MAGICLINKS).union(ResolveFlags::NO_XDEV);
/// `/dev/shm` is a mount by design: resolve into it, then check what it is.
pub(crate) const SHM: ResolveFlags = ResolveFlags::IN_ROOT.union(ResolveFlags::NO_MAGICLINKS);
/// A path already walked to its real form: no symlink may be left in it (one
/// that appears now is a race, and refused), no mount crossed.
const REAL: ResolveFlags = TARGET.union(ResolveFlags::NO_SYMLINKS);
/// Where a spec mount landed (the hook, after the runtime's mounts): follow
/// everything inside the root, as the runtime did.
const LANDED: ResolveFlags = ResolveFlags::IN_ROOT.union(ResolveFlags::NO_MAGICLINKS);

impl Root {
    /// Opens `rootfs` (`O_PATH`), refusing the host's own `/`.
    ///
    /// # Errors
    /// A rootfs that cannot be opened, or that is the host's root.
    pub(crate) fn open(rootfs: &Path) -> Result<Root, SysError> {
        let shown = rootfs.display().to_string();
        let fd = rustix::fs::open(rootfs, OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())
            .map_err(|e| SysError::sys(Syscall::Open, "opening the rootfs", shown.as_str(), e))?;
        let st = rustix::fs::fstat(&fd)
            .map_err(|e| SysError::sys(Syscall::Stat, "reading the rootfs", shown.as_str(), e))?;
        let host = rustix::fs::stat("/").map_err(|e| SysError::sys(Syscall::Stat, "reading", "/", e))?;
        let name = fd_name(&fd);
        if (st.st_dev, st.st_ino) == (host.st_dev, host.st_ino) || name == "/" || name.is_empty() {
            return Err(SysError::RootIsHost(rootfs.to_path_buf()));
        }
        Ok(Root { fd, name, writable: None, claimed: Vec::new() })
    }

    /// Resolves `rel` inside the root, creating missing directories one
    /// component at a time, each with `mkdirat` on the fd of its resolved
    /// parent. Where the rootfs mount is already read-only (crun at
    /// createContainer), a directory is made through a writable clone.
    ///
    /// # Errors
    /// The `openat2`/`mkdirat` errno, for the caller to read as a skip or not.
    pub(crate) fn resolve_or_create(&mut self, rel: &str, flags: ResolveFlags) -> Result<OwnedFd, Errno> {
        match resolve(&self.fd, rel, flags) {
            Err(Errno::NOENT) => {}
            other => return other,
        }
        let parts: Vec<&str> = rel.split('/').filter(|p| !p.is_empty()).collect();
        let mut parent: Option<OwnedFd> = None;
        for i in 0..parts.len() {
            let prefix = parts[..=i].join("/");
            let fd = match resolve(&self.fd, &prefix, flags) {
                Err(Errno::NOENT) => {
                    let dir = parent.as_ref().unwrap_or(&self.fd);
                    match rustix::fs::mkdirat(dir, parts[i], Mode::from_raw_mode(0o755)) {
                        Ok(()) | Err(Errno::EXIST) => {}
                        Err(Errno::ROFS) => self.mkdir_through_clone(&parts[..=i], flags)?,
                        Err(e) => return Err(e),
                    }
                    resolve(&self.fd, &prefix, flags)?
                }
                other => other?,
            };
            parent = Some(fd);
        }
        parent.ok_or(Errno::INVAL)
    }

    /// Creates the last of `parts` through a writable clone of the rootfs
    /// mount (made once). The clone is detached and private to this process:
    /// the container's own mount stays read-only.
    fn mkdir_through_clone(&mut self, parts: &[&str], flags: ResolveFlags) -> Result<(), Errno> {
        if self.writable.is_none() {
            self.writable = Some(mount::clone_writable(&self.fd).map_err(|(_, e)| e)?);
        }
        let clone = self.writable.as_ref().ok_or(Errno::INVAL)?;
        let (last, parents) = parts.split_last().ok_or(Errno::INVAL)?;
        let rel = if parents.is_empty() { ".".to_string() } else { parents.join("/") };
        let parent = resolve(clone, &rel, flags)?;
        match rustix::fs::mkdirat(&parent, *last, Mode::from_raw_mode(0o755)) {
            Ok(()) | Err(Errno::EXIST) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Resolves the temp target `target` (creating it when missing) and
    /// applies the landing rules: where the path really lands (not outside
    /// the rootfs, not in a denied tree) and one mount per directory. `Err`
    /// inside is the note for a target left alone: a property of the image.
    /// The hook and the spec executor both take targets through here.
    ///
    /// # Errors
    /// A failure that is not a property of the image.
    pub(crate) fn resolve_target(&mut self, target: &TargetPath) -> Result<Result<OwnedFd, Note>, SysError> {
        self.resolve_target_with(target, TARGET, target.as_str())
    }

    /// [`Root::resolve_target`] of `path` with `flags`, named `what` in notes.
    fn resolve_target_with(
        &mut self,
        path: &TargetPath,
        flags: ResolveFlags,
        what: &str,
    ) -> Result<Result<OwnedFd, Note>, SysError> {
        let fd = match self.resolve_or_create(path.relative(), flags) {
            Ok(fd) => fd,
            Err(e) => {
                return match skip_reason(e) {
                    // "Already a mount point" is information; the rest ignores a user's setting.
                    Some(reason) => {
                        Ok(Err(Note { subject: what.into(), reason: reason.into(), warn: e != Errno::XDEV }))
                    }
                    None => Err(SysError::sys(Syscall::Openat2, "resolving inside the rootfs", what, e)),
                };
            }
        };
        let real = match self.landed(&fd) {
            None => return Ok(Err(Note::warn(what, "it resolves outside the rootfs"))),
            Some(real) if target::denied(&real) => {
                let reason = format!("it resolves to {real} inside the container, a system directory");
                return Ok(Err(Note::warn(what, reason)));
            }
            Some(real) => real,
        };
        if let Some(reason) = self.claim(&fd, &real, what)? {
            return Ok(Err(Note::warn(what, reason)));
        }
        Ok(Ok(fd))
    }

    /// What the real in-root path `real` ([`Rootfs::judge_target`]'s)
    /// holds in the image, read-only (for `explain`, as [`contents`] on the
    /// fd the placing gets): a directory not there yet, which the placing
    /// makes empty, or one the placing refuses (a property of the image),
    /// holds nothing.
    ///
    /// # Errors
    /// The `openat2`/`getdents64`/`statx` errno otherwise.
    pub(crate) fn contents_at(&self, real: &TargetPath, limits: &Limits) -> Result<Contents, Errno> {
        match resolve(&self.fd, real.relative(), REAL) {
            Ok(fd) => contents(&fd, limits),
            Err(Errno::NOENT) => Ok(Contents::Empty),
            Err(e) if skip_reason(e).is_some() => Ok(Contents::Empty),
            Err(e) => Err(e),
        }
    }

    /// Gives the directory `fd` (an `O_PATH` fd, chmod'ed through its
    /// `/proc/self/fd` link) `mode` when it has another; whether it did.
    ///
    /// # Errors
    /// `fstat` failing, or a `chmod` refused for another reason than a
    /// rootfs that may not be changed (then the tmpfs keeps the directory's
    /// mode).
    pub(crate) fn set_mode(&self, fd: &OwnedFd, mode: u32, what: &str) -> Result<bool, SysError> {
        let st = rustix::fs::fstat(fd).map_err(|e| SysError::sys(Syscall::Stat, "reading", what, e))?;
        if st.st_mode & 0o7777 == mode {
            return Ok(false);
        }
        let link = format!("/proc/self/fd/{}", fd.as_raw_fd());
        match rustix::fs::chmod(link.as_str(), Mode::from_raw_mode(mode)) {
            Ok(()) => Ok(true),
            // A rootfs we may not change: the tmpfs keeps the directory's mode.
            Err(Errno::ROFS | Errno::PERM | Errno::ACCESS) => Ok(false),
            Err(e) => Err(SysError::sys(Syscall::Fchmod, "setting the mode of the mountpoint", what, e)),
        }
    }

    /// The spec's mount destinations `dests` as they landed in this
    /// (mounted) root: the hook's view of the final layout. A destination
    /// that cannot be opened is left out (the runtime did not mount it).
    pub(crate) fn landed_mounts(&self, mounts: &[SpecMount]) -> Vec<Landing> {
        mounts
            .iter()
            .filter_map(|m| {
                let rel = m.dest.trim_start_matches('/');
                let fd = open_in(&self.fd, rel, OFlags::PATH | OFlags::CLOEXEC, LANDED).ok()?;
                Some(Landing { dest: m.dest.clone(), ours: m.ours, at: self.landed(&fd)? })
            })
            .collect()
    }

    /// This root as a [`landing::Tree`].
    pub(crate) fn tree(&self) -> RootTree<'_> {
        RootTree(&self.fd)
    }

    /// Where `fd` landed, as a path inside the rootfs, or `None` when outside.
    pub(crate) fn landed(&self, fd: &OwnedFd) -> Option<String> {
        let name = fd_name(fd);
        let rest = name.strip_prefix(&self.name)?;
        match rest {
            "" => Some("/".to_string()),
            r if r.starts_with('/') => Some(r.to_string()),
            _ => None,
        }
    }

    /// Claims the directory `fd`, landed at `real`, for `what`, or says why
    /// not ([`clash`]): one mount per directory, none inside another's.
    ///
    /// # Errors
    /// `fstat` failing.
    pub(crate) fn claim(&mut self, fd: &OwnedFd, real: &str, what: &str) -> Result<Option<String>, SysError> {
        let st = rustix::fs::fstat(fd).map_err(|e| SysError::sys(Syscall::Stat, "reading", what, e))?;
        let id = (st.st_dev, st.st_ino);
        if let Some((_, first)) = self.claimed.iter().find(|(d, _)| *d == id) {
            return Ok(Some(format!("it is the same directory as {}", first.what)));
        }
        if let Some(reason) = clash(self.claimed.iter().map(|(_, c)| c), real) {
            return Ok(Some(reason));
        }
        self.claimed.push((id, Claim { what: what.to_string(), real: real.to_string() }));
        Ok(None)
    }
}

/// A directory claimed for a target's mount: the target, and where it
/// landed in the rootfs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Claim {
    pub what: String,
    pub real: String,
}

/// Why a target landed at `real` cannot have its own tmpfs beside the
/// directories `claimed` already, if it cannot: `real` is inside one of
/// them or holds one. Only the paths the targets name are nested by the
/// plan (`TMPDIR=/tmp/job` is a directory made in `/tmp`'s tmpfs); two that
/// a symlink nests (`/tmp -> /root/tmp` with `HOME=/root`) would stack two
/// tmpfs, one hiding the other, so the later is left alone. The same
/// directory is the caller's (by inode).
pub(crate) fn clash<'a>(claimed: impl IntoIterator<Item = &'a Claim>, real: &str) -> Option<String> {
    let c = claimed.into_iter().find(|c| {
        c.real != real && (landing::at_or_under(real, &c.real) || landing::at_or_under(&c.real, real))
    })?;
    let (how, first) = (if landing::at_or_under(real, &c.real) { "inside" } else { "above" }, &c.what);
    Some(format!(
        "it resolves to {real}, {how} {}, where {first} lands and gets a tmpfs of ours: two would stack, one hiding the other",
        c.real
    ))
}

/// The rootfs as the spec executor (and `explain`) judges and places its
/// temp targets before the runtime mounts anything (docs/design.md#landing):
/// a [`Tree`] to walk, and the few steps by fd the placing takes. [`Root`]
/// is the real one; a unit test's is a map (`super::fake::FakeRoot`), so
/// that the decisions (what is left alone and why, what goes to the hook)
/// are tested without root. Generic, not `dyn`: the real one costs nothing
/// more.
pub(crate) trait Rootfs: Tree + Sized {
    /// A resolved directory.
    type Dir;

    /// The read-only half of [`Rootfs::place_target`] (for `explain` too):
    /// [`judge`] on this root; `Ok` is the real in-root path, `Err` the
    /// note for a target left alone.
    fn judge_target(&mut self, target: &TargetPath, landings: &[Landing]) -> Result<TargetPath, Note> {
        judge(self, target, landings)
    }

    /// The spec executor's landing rule for the temp target `target` in the
    /// prepared (bare) rootfs, before the runtime mounts anything: walk it
    /// ([`landing::walk`]), judge the walk against where the spec's mounts
    /// will land (`landings`), then resolve the real path it found
    /// ([`Rootfs::resolve_real`]). `Ok` is the real in-root path to write
    /// as the mount's destination, with its directory.
    ///
    /// # Errors
    /// A failure that is not a property of the image.
    fn place_target(
        &mut self,
        target: &TargetPath,
        landings: &[Landing],
    ) -> Result<Result<(TargetPath, Self::Dir), Note>, SysError> {
        let real = match self.judge_target(target, landings) {
            Ok(real) => real,
            Err(note) => return Ok(Err(note)),
        };
        Ok(self.resolve_real(&real, target.as_str())?.map(|dir| (real, dir)))
    }

    /// Resolves the real in-root path `real` (no symlink left, no mount
    /// crossed), making missing directories, with the hook's rules (one
    /// mount per directory); notes name `what`.
    ///
    /// # Errors
    /// A failure that is not a property of the image.
    fn resolve_real(&mut self, real: &TargetPath, what: &str) -> Result<Result<Self::Dir, Note>, SysError>;

    /// The mode and owner (host uid) of the directory at `target` when the
    /// image has one.
    fn dir_stat(&self, target: &TargetPath) -> Option<(u32, u32)>;

    /// What the directory `dir` holds, against the copy bounds `limits`
    /// ([`contents`]).
    ///
    /// # Errors
    /// The directory cannot be read.
    fn contents(&self, dir: &Self::Dir, limits: &Limits) -> Result<Contents, Errno>;

    /// What the real in-root path `real` holds in the image, read-only:
    /// one not there yet holds nothing.
    ///
    /// # Errors
    /// The directory cannot be read.
    fn contents_at(&self, real: &TargetPath, limits: &Limits) -> Result<Contents, Errno>;

    /// Gives `dir` `mode` when it has another; whether it did.
    ///
    /// # Errors
    /// The mode cannot be read or set for another reason than a rootfs
    /// that may not be changed.
    fn set_mode(&mut self, dir: &Self::Dir, mode: u32, what: &str) -> Result<bool, SysError>;
}

impl Tree for Root {
    fn entry(&mut self, path: &str) -> Entry {
        self.tree().entry(path)
    }
}

impl Rootfs for Root {
    type Dir = OwnedFd;

    fn resolve_real(&mut self, real: &TargetPath, what: &str) -> Result<Result<OwnedFd, Note>, SysError> {
        self.resolve_target_with(real, REAL, what)
    }

    fn dir_stat(&self, target: &TargetPath) -> Option<(u32, u32)> {
        Root::dir_stat(self, target)
    }

    fn contents(&self, dir: &OwnedFd, limits: &Limits) -> Result<Contents, Errno> {
        contents(dir, limits)
    }

    fn contents_at(&self, real: &TargetPath, limits: &Limits) -> Result<Contents, Errno> {
        Root::contents_at(self, real, limits)
    }

    fn set_mode(&mut self, dir: &OwnedFd, mode: u32, what: &str) -> Result<bool, SysError> {
        Root::set_mode(self, dir, mode, what)
    }
}

/// The landing rule's judgement of the temp target `target` in `tree` (a
/// bare rootfs): walk it ([`landing::walk`]); a spec mount it reaches,
/// crosses or sits over (`landings`) leaves it alone (ours already covering
/// it: information; a volume: a warning naming the symlinks), as does a
/// real path in a system directory, a walk that stopped (not a directory,
/// a mount, a loop) or a dangling symlink. `Ok` is the real in-root path.
pub(crate) fn judge(
    tree: &mut impl Tree,
    target: &TargetPath,
    landings: &[Landing],
) -> Result<TargetPath, Note> {
    let what = target.as_str();
    let w = landing::walk(tree, what);
    // A spec mount first: it explains a symlink dangling in the bare
    // rootfs (`/tmp -> /vol`, where the runtime makes /vol for the volume).
    if let Some(conflict) = landing::judge(&w, landings) {
        if conflict.landing().ours {
            let reason = format!("our tmpfs at {} covers it already", conflict.landing().dest);
            return Err(Note::info(what, reason));
        }
        return Err(Note::warn(what, conflict.reason(&w)));
    }
    // A loop stops the walk where it began: `real` is then not where the
    // path leads (`/tmp -> /tmp` stops at `/`), so it is named first.
    if matches!(w.stopped, Some(Stop::Loop)) {
        return Err(Note::warn(what, walk_refusal(&w).expect("a stopped walk is refused")));
    }
    if target::denied(&w.real) {
        let reason =
            format!("it resolves to {} inside the container, a system directory{}", w.real, w.through());
        return Err(Note::warn(what, reason));
    }
    if let Some(reason) = walk_refusal(&w) {
        return Err(Note::warn(what, reason));
    }
    target::validate(&w.real)
        .map_err(|e| Note::warn(what, format!("it resolves to {}, which {e}{}", w.real, w.through())))
}

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

/// The first entry of the directory `fd` whose name does not start with a
/// dot, if any (an app, a site, data in a home).
///
/// # Errors
/// The `openat2`/`getdents64` errno.
fn first_plain_entry(fd: &OwnedFd) -> Result<Option<String>, Errno> {
    let dir = open_in(fd, ".", OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, REAL)?;
    let mut buf = [std::mem::MaybeUninit::uninit(); DIRENT_BUF];
    let mut list = rustix::fs::RawDir::new(&dir, &mut buf);
    while let Some(entry) = list.next() {
        let entry = entry?;
        let name = entry.file_name().to_bytes();
        if !name.starts_with(b".") {
            return Ok(Some(String::from_utf8_lossy(name).into_owned()));
        }
    }
    Ok(None)
}

/// sysfs' `f_type` (procfs' is [`PROC_SUPER_MAGIC`]): a passwd that leads
/// there is not the image's.
const SYSFS_MAGIC: i64 = 0x6265_6572;

impl Root {
    /// What the rootfs' `/etc/passwd` says of `uid` (docs/design.md#home-plan).
    /// Resolved with `RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS`, so a symlink
    /// (to the host's `/etc/passwd`, say) stays inside the root, as the
    /// runtime's own lookup after `pivot_root` does. Only a regular file on
    /// neither procfs nor sysfs is read (checked on an `O_PATH` fd, which is
    /// then reopened through `proc`, not by its path: no device or FIFO is
    /// ever opened, docs/design.md#reopen), at most
    /// [`plan::PASSWD_MAX`] bytes.
    ///
    /// # Errors
    /// As [`passwd_in`].
    pub(crate) fn read_passwd(&self, proc: &Proc, uid: u32) -> Result<Passwd, SysError> {
        passwd_in(proc, &self.fd, "etc/passwd", uid)
    }

    /// The mode and owner (host uid) of the directory at `target` when
    /// the image has one (resolved as a target is, without creating
    /// anything).
    pub(crate) fn dir_stat(&self, target: &TargetPath) -> Option<(u32, u32)> {
        let fd = resolve(&self.fd, target.relative(), TARGET).ok()?;
        rustix::fs::fstat(&fd).ok().map(|st| (st.st_mode & 0o7777, st.st_uid))
    }

    /// What the image holds at the home `path` (docs/design.md#home-rule):
    /// resolved as a target is (in-root, no mount crossed, nothing made),
    /// its owner and mode by `fstat`, and its entries read (`getdents64`)
    /// up to the first one whose name does not start with a dot. A path
    /// that is not a directory, crosses a mount (a volume) or cannot be
    /// resolved is [`HomeDir::Other`]: the landing rules then say why it is
    /// left alone.
    pub(crate) fn home_dir(&self, path: &TargetPath) -> HomeDir {
        let fd = match resolve(&self.fd, path.relative(), TARGET) {
            Ok(fd) => fd,
            Err(Errno::NOENT) => return HomeDir::Missing,
            Err(_) => return HomeDir::Other,
        };
        let Ok(st) = rustix::fs::fstat(&fd) else { return HomeDir::Other };
        let Ok(plain) = first_plain_entry(&fd) else { return HomeDir::Other };
        HomeDir::Dir(plan::DirFacts {
            owner: plan::Owner { uid: st.st_uid, gid: st.st_gid },
            mode: st.st_mode & 0o7777,
            plain,
        })
    }
}

/// A host directory, opened `O_PATH` (a bind's source: the passwd read of
/// the spec executor), to read in with [`passwd_in`].
///
/// # Errors
/// It cannot be opened as a directory.
pub(crate) fn open_host_dir(dir: &Path) -> Result<OwnedFd, Errno> {
    rustix::fs::open(dir, OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())
}

/// The device of the host's `/dev/shm`, read in the host's namespace before
/// the hook joins the container's; `None` when it cannot be read.
pub(crate) fn host_shm_dev() -> Option<u64> {
    rustix::fs::stat(plan::SHM_PATH).ok().map(|s| s.st_dev)
}

/// What `fd` is (its type) and the device it is on.
///
/// # Errors
/// `fstat(2)` failed; `what` names it.
pub(crate) fn kind_and_dev(fd: &OwnedFd, what: &str) -> Result<(FileType, u64), SysError> {
    let st = rustix::fs::fstat(fd).map_err(|e| SysError::sys(Syscall::Stat, "reading", what, e))?;
    Ok((FileType::from_raw_mode(st.st_mode), st.st_dev))
}

/// What the passwd file `rel` under the directory `dir` says of `uid`, read
/// as [`Root::read_passwd`] says: `rel` resolved with `dir` as its root,
/// the file read through `proc`.
///
/// # Errors
/// `openat2(2)` missing from the kernel (`ENOSYS`): not a property of the
/// image, and nothing else can be resolved safely either.
pub(crate) fn passwd_in(proc: &Proc, dir: &OwnedFd, rel: &str, uid: u32) -> Result<Passwd, SysError> {
    let flags = ResolveFlags::IN_ROOT.union(ResolveFlags::NO_MAGICLINKS);
    let path = match open_in(dir, rel, OFlags::PATH | OFlags::CLOEXEC, flags) {
        Ok(fd) => fd,
        Err(Errno::NOENT) => return Ok(Passwd::NoEntry),
        Err(Errno::NOSYS) => {
            return Err(SysError::sys(
                Syscall::Openat2,
                "resolving inside the rootfs",
                "/etc/passwd",
                Errno::NOSYS,
            ))
        }
        Err(e) => return Ok(Passwd::Unreadable(format!("cannot be opened ({e})"))),
    };
    Ok(passwd_from(proc, &path, uid))
}

/// The rest of [`passwd_in`], once `path` (an `O_PATH` fd of the file) is
/// open: checked, then reopened through `proc` to be read, never opened by
/// its path again (docs/design.md#reopen).
fn passwd_from(proc: &Proc, path: &OwnedFd, uid: u32) -> Passwd {
    let st = match rustix::fs::fstat(path) {
        Ok(st) => st,
        Err(e) => return Passwd::Unreadable(format!("cannot be read ({e})")),
    };
    if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
        return Passwd::Unreadable("is not a regular file".into());
    }
    // `f_type` is an i64 here, narrower on some other targets.
    #[allow(clippy::useless_conversion)]
    if rustix::fs::fstatfs(path)
        .is_ok_and(|fs| matches!(i64::from(fs.f_type), PROC_SUPER_MAGIC | SYSFS_MAGIC))
    {
        return Passwd::Unreadable("leads into /proc or /sys".into());
    }
    let too_big = || Passwd::Unreadable(format!("is larger than {}", Bytes(plan::PASSWD_MAX).approx()));
    if u64::try_from(st.st_size).unwrap_or(u64::MAX) > plan::PASSWD_MAX {
        return too_big();
    }
    // The file checked, whatever its path names by now (a rename swapping
    // a device node in): never the path again.
    let file = match proc.reopen(path, Checked::of(&st)) {
        Ok(fd) => fd,
        Err(Errno::STALE) => return Passwd::Unreadable("changed while it was read".into()),
        Err(e) => return Passwd::Unreadable(format!("cannot be opened ({e})")),
    };
    // Room for the whole file and the end: two reads, not a doubling probe
    // from 32 bytes (seven reads for an 839-byte file: BENCHMARKS.md#home-lookup).
    let size = usize::try_from(st.st_size).unwrap_or(0).min(plan::PASSWD_MAX as usize);
    let mut bytes = Vec::with_capacity(size + 1);
    let read = std::io::Read::read_to_end(
        &mut std::io::Read::take(std::fs::File::from(file), plan::PASSWD_MAX + 1),
        &mut bytes,
    );
    match read {
        Ok(_) if bytes.len() as u64 > plan::PASSWD_MAX => too_big(),
        Ok(_) => plan::passwd_home(&bytes, uid),
        Err(e) => Passwd::Unreadable(format!("cannot be read ({e})")),
    }
}

/// `openat2(root, rel, O_PATH|O_DIRECTORY)` inside the root, retried on `EAGAIN`.
/// `EAGAIN` says only "retry": the rename seqlock the kernel checks is
/// global, so a host renaming busily (a package manager, another container's
/// rename race) can make 16 tries in a row fail; after those the walk is
/// retried with 1 ms pauses for up to [`EAGAIN_PATIENCE`].
fn resolve(root: &OwnedFd, rel: &str, flags: ResolveFlags) -> Result<OwnedFd, Errno> {
    open_in(root, rel, OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC, flags)
}

/// `openat2(root, rel, oflags)` with `flags`, retried on `EAGAIN` (see [`resolve`]).
fn open_in(root: &OwnedFd, rel: &str, oflags: OFlags, flags: ResolveFlags) -> Result<OwnedFd, Errno> {
    let open = || rustix::fs::openat2(root, rel, oflags, Mode::empty(), flags);
    for _ in 0..EAGAIN_RETRIES {
        match open() {
            Err(Errno::AGAIN) => {}
            other => return other,
        }
    }
    let t0 = std::time::Instant::now();
    while t0.elapsed() < EAGAIN_PATIENCE {
        std::thread::sleep(std::time::Duration::from_millis(1));
        match open() {
            Err(Errno::AGAIN) => {}
            other => return other,
        }
    }
    Err(Errno::AGAIN)
}

/// Why a walk rules its target out before any conflict is looked at, if it
/// does: the same reasons the hook gives for the same layouts.
fn walk_refusal(w: &Walk) -> Option<String> {
    let errno = match w.stopped {
        None if w.missing > 0 && !w.links.is_empty() => Errno::NOENT,
        None => return None,
        Some(Stop::NotDir) => Errno::NOTDIR,
        Some(Stop::Mount) => Errno::XDEV,
        Some(Stop::Loop) => Errno::LOOP,
        Some(Stop::Unreadable(e)) => e,
    };
    let reason = skip_reason(errno).map_or_else(|| format!("it cannot be resolved: {errno}"), String::from);
    Some(format!("{reason}{}", w.through()))
}

/// A rootfs fd as a [`landing::Tree`]: each path is opened with `openat2`
/// `RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS | RESOLVE_NO_XDEV` and
/// `O_PATH | O_NOFOLLOW`, so that a trailing symlink is read, never followed.
pub(crate) struct RootTree<'a>(&'a OwnedFd);

impl Tree for RootTree<'_> {
    fn entry(&mut self, path: &str) -> Entry {
        let oflags = OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let fd = match open_in(self.0, path.trim_start_matches('/'), oflags, REAL) {
            Ok(fd) => fd,
            Err(Errno::NOENT) => return Entry::Missing,
            Err(Errno::XDEV) => return Entry::Mount,
            Err(e) => return Entry::Unreadable(e),
        };
        match rustix::fs::fstat(&fd).map(|st| rustix::fs::FileType::from_raw_mode(st.st_mode)) {
            Ok(rustix::fs::FileType::Directory) => Entry::Dir,
            Ok(rustix::fs::FileType::Symlink) => match rustix::fs::readlinkat(&fd, "", Vec::new()) {
                Ok(to) => Entry::Link(to.to_string_lossy().into_owned()),
                Err(e) => Entry::Unreadable(e),
            },
            Ok(_) => Entry::NotDir,
            Err(e) => Entry::Unreadable(e),
        }
    }
}

/// The path the kernel gives an fd (`/proc/self/fd/N`).
fn fd_name(fd: &impl AsRawFd) -> String {
    let link = format!("/proc/self/fd/{}", fd.as_raw_fd());
    rustix::fs::readlink(link.as_str(), Vec::new())
        .map(|c| c.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// A temp target that the image's layout rules out: why (a skip, not an error).
pub(crate) fn skip_reason(err: Errno) -> Option<&'static str> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::fake::FakeRoot;

    /// The scan on a real directory: empty; dotfiles, a symlink and a
    /// subdirectory within the bounds; and each bound and each entry no
    /// copy takes (a FIFO, a socket) past them.
    #[test]
    fn contents_scans_within_the_copy_bounds() {
        let dir = std::env::temp_dir().join(format!("oth-contents-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let scan = |limits: &Limits| {
            let fd =
                rustix::fs::open(&dir, OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())
                    .unwrap();
            contents(&fd, limits).unwrap()
        };
        let wide = Limits { entries: 10, depth: 2, bytes: 1 << 20 };
        assert_eq!(scan(&wide), Contents::Empty);
        std::fs::write(dir.join(".bashrc"), [b'x'; 5000]).unwrap();
        std::os::unix::fs::symlink("/nowhere", dir.join(".link")).unwrap();
        std::fs::create_dir_all(dir.join(".config/a")).unwrap();
        assert_eq!(scan(&wide), Contents::Fits);
        // 5000 bytes hold two pages.
        let past = |c: Contents| match c {
            Contents::Past(why) => why,
            other => panic!("{other:?}"),
        };
        assert_eq!(past(scan(&Limits { bytes: 8191, ..wide })), "more than 8191 (~8.0Ki) of file data");
        assert_eq!(scan(&Limits { bytes: 8192, ..wide }), Contents::Fits);
        assert_eq!(past(scan(&Limits { entries: 3, ..wide })), "more than 3 entries");
        assert_eq!(past(scan(&Limits { depth: 1, ..wide })), "more than 1 directories deep");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            dir.join(".config/fifo"),
            FileType::Fifo,
            Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        assert_eq!(past(scan(&wide)), "a FIFO at ./.config/fifo");
        std::fs::remove_file(dir.join(".config/fifo")).unwrap();
        let _sock = std::os::unix::net::UnixListener::bind(dir.join("s")).unwrap();
        assert_eq!(past(scan(&wide)), "a socket at ./s");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    fn landing(dest: &str, ours: bool) -> Landing {
        Landing { dest: dest.into(), ours, at: dest.into() }
    }

    /// What the landing rule leaves alone in a bare rootfs, and why: each
    /// case names the layout, the spec's mounts, and the real path or the
    /// note (warning or not, and words its reason must hold).
    #[test]
    fn judge_table() {
        let dir = || Entry::Dir;
        let link = FakeRoot::link;
        type Case<'a> =
            (&'a str, Vec<(&'a str, Entry)>, &'a str, Vec<Landing>, Result<&'a str, (bool, &'a str)>);
        let cases: Vec<Case> = vec![
            ("a plain directory", vec![("/tmp", dir())], "/tmp", vec![], Ok("/tmp")),
            ("a missing one, made later", vec![], "/data/cache", vec![], Ok("/data/cache")),
            (
                "a symlink to another directory lands there",
                vec![("/tmp", link("/scratch")), ("/scratch", dir())],
                "/tmp",
                vec![],
                Ok("/scratch"),
            ),
            (
                "a symlink into a volume is left alone",
                vec![("/tmp", link("/data"))],
                "/tmp",
                vec![landing("/data", false)],
                Err((true, "it resolves to /data through the symlink /tmp -> /data: the spec's mount at /data")),
            ),
            (
                "a path through a volume",
                vec![("/tmp", link("/data/t"))],
                "/tmp",
                vec![landing("/data", false)],
                Err((true, "under the spec's mount at /data")),
            ),
            (
                "a volume beneath it would be hidden",
                vec![("/tmp", dir())],
                "/tmp",
                vec![landing("/tmp/data", false)],
                Err((true, "the spec mounts /tmp/data inside it")),
            ),
            (
                "ours covers it already",
                vec![("/tmp", dir())],
                "/tmp",
                vec![landing("/tmp", true)],
                Err((false, "our tmpfs at /tmp covers it already")),
            ),
            (
                "a symlink into a system directory",
                vec![("/tmp", link("/etc")), ("/etc", dir())],
                "/tmp",
                vec![],
                Err((true, "it resolves to /etc inside the container, a system directory through the symlink /tmp -> /etc")),
            ),
            (
                "a symlink to the root",
                vec![("/tmp", link("/"))],
                "/tmp",
                vec![],
                Err((true, "it resolves to / inside the container, a system directory")),
            ),
            (
                "a file",
                vec![("/tmp", Entry::NotDir)],
                "/tmp",
                vec![],
                Err((true, "the image has something other than a directory there")),
            ),
            ("a mount already", vec![("/tmp", Entry::Mount)], "/tmp", vec![], Err((true, "already a mount point"))),
            (
                "a dangling symlink",
                vec![("/tmp", link("/gone"))],
                "/tmp",
                vec![],
                Err((true, "it is a dangling symlink in the image through the symlink /tmp -> /gone")),
            ),
            (
                "a symlink loop right under the root",
                vec![("/tmp", link("/tmp"))],
                "/tmp",
                vec![],
                Err((true, "its path has a symlink loop")),
            ),
            (
                "a symlink loop",
                vec![("/data", dir()), ("/data/x", link("/data/x"))],
                "/data/x",
                vec![],
                Err((true, "its path has a symlink loop")),
            ),
        ];
        for (name, entries, target, landings, want) in cases {
            let mut root = FakeRoot::new(&entries);
            let got = root.judge_target(&target::validate(target).unwrap(), &landings);
            match (got, want) {
                (Ok(real), Ok(want)) => assert_eq!(real.as_str(), want, "{name}"),
                (Err(note), Err((warn, words))) => {
                    assert_eq!(note.subject, target, "{name}");
                    assert_eq!(note.warn, warn, "{name}: {}", note.reason);
                    assert!(note.reason.contains(words), "{name}: {}", note.reason);
                }
                (got, want) => panic!("{name}: got {got:?}, want {want:?}"),
            }
            assert!(root.calls.is_empty(), "{name}: judging makes nothing: {:?}", root.calls);
        }
    }

    /// Placing resolves the judged real path, makes what is missing, and
    /// places one mount per directory: two targets led to one directory
    /// (`/var -> /` with `/tmp` and `/var/tmp`) are one mount and a note.
    #[test]
    fn place_target_makes_the_real_path_once() {
        let mut root = FakeRoot::new(&[("/var", FakeRoot::link("/")), ("/tmp", Entry::Dir)]);
        let t = |p: &str| target::validate(p).unwrap();
        let first = root.place_target(&t("/tmp"), &[]).unwrap().unwrap();
        assert_eq!((first.0.as_str(), first.1.as_str()), ("/tmp", "/tmp"));
        let second = root.place_target(&t("/var/tmp"), &[]).unwrap().unwrap_err();
        assert_eq!(second, Note::warn("/var/tmp", "it is the same directory as /tmp"));
        let made = root.place_target(&t("/data/cache"), &[]).unwrap().unwrap();
        assert_eq!(made.1, "/data/cache");
        assert_eq!(root.calls, ["mkdir /data", "mkdir /data/cache"]);
    }

    /// Two targets a symlink nests (`/tmp -> /root/tmp` with `HOME=/root`)
    /// are one tmpfs and a note naming both, whichever comes first; a
    /// sibling whose name merely starts the same is not nested.
    #[test]
    fn a_target_inside_another_through_a_symlink_is_left_alone() {
        let layout =
            [("/tmp", FakeRoot::link("/root/tmp")), ("/root", Entry::Dir), ("/root/tmp", Entry::Dir)];
        let t = |p: &str| target::validate(p).unwrap();
        let mut root = FakeRoot::new(&layout);
        assert_eq!(root.place_target(&t("/tmp"), &[]).unwrap().unwrap().0.as_str(), "/root/tmp");
        let home = root.place_target(&t("/root"), &[]).unwrap().unwrap_err();
        assert_eq!(
            home,
            Note::warn(
                "/root",
                "it resolves to /root, above /root/tmp, where /tmp lands and gets a tmpfs of ours: two would stack, one hiding the other"
            )
        );
        let mut root = FakeRoot::new(&layout);
        assert!(root.place_target(&t("/root"), &[]).unwrap().is_ok());
        let tmp = root.place_target(&t("/tmp"), &[]).unwrap().unwrap_err();
        assert!(
            tmp.warn && tmp.reason.starts_with("it resolves to /root/tmp, inside /root, where /root lands"),
            "{tmp:?}"
        );
        assert!(root.place_target(&t("/rootx"), &[]).unwrap().is_ok(), "a sibling is not nested");
    }

    #[test]
    fn clash_table() {
        let claim = |what: &str, real: &str| Claim { what: what.into(), real: real.into() };
        let claimed = [claim("/tmp", "/root/tmp"), claim("TMPDIR=/scratch", "/data/scratch")];
        let cases = [
            ("/root", Some("above /root/tmp, where /tmp lands")),
            ("/root/tmp/x", Some("inside /root/tmp, where /tmp lands")),
            ("/data", Some("above /data/scratch, where TMPDIR=/scratch lands")),
            ("/root/tmp", None),
            ("/root/tm", None),
            ("/data/scratch2", None),
            ("/var/tmp", None),
        ];
        for (real, want) in cases {
            let got = clash(&claimed, real);
            match want {
                Some(words) => assert!(got.as_deref().is_some_and(|g| g.contains(words)), "{real}: {got:?}"),
                None => assert_eq!(got, None, "{real}"),
            }
        }
    }

    #[test]
    fn skip_reasons_are_for_the_image_only() {
        for e in [Errno::XDEV, Errno::NOTDIR, Errno::LOOP, Errno::NOENT, Errno::ROFS, Errno::NAMETOOLONG] {
            assert!(skip_reason(e).is_some(), "{e:?}: a property of the image");
        }
        for e in [Errno::PERM, Errno::IO, Errno::NOSYS, Errno::AGAIN] {
            assert!(skip_reason(e).is_none(), "{e:?}: an error");
        }
    }
}
