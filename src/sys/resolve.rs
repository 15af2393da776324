//! Paths inside the hostile rootfs (docs/design.md#hostile-rootfs rule 3): every one is
//! resolved with `openat2(2)` `RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS` from an
//! `O_PATH` fd of the rootfs (plus `RESOLVE_NO_XDEV` for temp targets, so that
//! "already a mount point" reads as `EXDEV`); missing directories are made
//! with `mkdirat(2)` on resolved fds; where a path really landed is read back
//! from the fd (a read-only rootfs is written through a writable clone,
//! [`super::mount`]'s). A directory gets one mount of ours ([`clash`]). No
//! mounts are made here; what uses a [`Root`] is in [`super::rootfs`]
//! (the spec executor's placing), [`super::contents`] and [`super::user`].

use std::os::fd::OwnedFd;
use std::path::Path;

use rustix::fs::{FileType, Mode, OFlags, ResolveFlags};
use rustix::io::Errno;

use super::error::{SysError, Syscall};
use super::mount;
use super::procfs::Proc;
use crate::plan::landing::{self, Entry, Landing, Tree};
use crate::plan::{self, Note, SpecMount};
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
    pub(super) fd: OwnedFd,
    /// The host's procfs, opened before any `setns`: where an fd's path is
    /// read and a mountpoint chmod'ed through its magic link, never through
    /// the `/proc` a path names now (docs/design.md#reopen).
    proc: Proc,
    /// The rootfs path as the kernel names it in this mount namespace.
    name: String,
    /// A writable clone of the rootfs mount, made when a directory must be
    /// created and the rootfs mount is already read-only.
    writable: Option<OwnedFd>,
    /// Directories (device, inode) that already have a mount prepared, for
    /// which target, and where they landed: two targets reached through
    /// symlinks (`/var -> /` with `TMPDIR=/var/tmp`, or `/tmp -> /root/tmp`
    /// with `HOME=/root`) must not stack two mounts.
    pub(super) claimed: Vec<((u64, u64), Claim)>,
}

/// Who owns the directories a resolution makes: for a cache under `HOME`,
/// `HOME` and the host ids that own those made at or below it, mode
/// [`plan::HOME_MODE`] (a cache's mountpoint and a missing `HOME` are the
/// process's, not root's: docs/design.md#home-rule); `None`, or above
/// `HOME`: root, mode 0755 ([`plan::Tmpfs::made_for`]).
pub(crate) type MadeFor<'a> = Option<(&'a str, plan::Owner)>;

/// A directory claimed for a target's mount: the target, and where it
/// landed in the rootfs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Claim {
    pub what: String,
    pub real: String,
}

/// Temp targets: never cross a mount (a volume, or `/tmp` already mounted).
pub(crate) const TARGET: ResolveFlags =
    ResolveFlags::IN_ROOT.union(ResolveFlags::NO_MAGICLINKS).union(ResolveFlags::NO_XDEV);
/// `/dev/shm` is a mount by design: resolve into it, then check what it is.
pub(crate) const SHM: ResolveFlags = ResolveFlags::IN_ROOT.union(ResolveFlags::NO_MAGICLINKS);
/// A path already walked to its real form: no symlink may be left in it (one
/// that appears now is a race, and refused), no mount crossed.
pub(super) const REAL: ResolveFlags = TARGET.union(ResolveFlags::NO_SYMLINKS);
/// Where a spec mount landed (the hook, after the runtime's mounts): follow
/// everything inside the root, as the runtime did.
const LANDED: ResolveFlags = ResolveFlags::IN_ROOT.union(ResolveFlags::NO_MAGICLINKS);

impl Root {
    /// Opens `rootfs` (`O_PATH`), refusing the host's own `/`; `proc` is
    /// the host's procfs, kept ([`Root::landed`], [`Root::set_mode`],
    /// [`Root::proc`]).
    ///
    /// # Errors
    /// A rootfs that cannot be opened, or that is the host's root.
    pub(crate) fn open(rootfs: &Path, proc: Proc) -> Result<Root, SysError> {
        let shown = rootfs.display().to_string();
        let fd = rustix::fs::open(rootfs, OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())
            .map_err(|e| SysError::sys(Syscall::Open, "opening the rootfs", shown.as_str(), e))?;
        let st = rustix::fs::fstat(&fd)
            .map_err(|e| SysError::sys(Syscall::Fstat, "reading the rootfs", shown.as_str(), e))?;
        let host = rustix::fs::stat("/").map_err(|e| SysError::sys(Syscall::Stat, "reading", "/", e))?;
        let name = proc
            .fd_path(&fd)
            .map_err(|e| SysError::sys(Syscall::Readlinkat, "reading the path of", shown.as_str(), e))?;
        if (st.st_dev, st.st_ino) == (host.st_dev, host.st_ino) || name == "/" || name.is_empty() {
            return Err(SysError::RootIsHost(rootfs.to_path_buf()));
        }
        Ok(Root { fd, proc, name, writable: None, claimed: Vec::new() })
    }

    /// Resolves `rel` inside the root, creating missing directories one
    /// component at a time, each with `mkdirat` on the fd of its resolved
    /// parent, owned as `made` says. Where the rootfs mount is already
    /// read-only (crun at createContainer), a directory is made through a
    /// writable clone.
    ///
    /// # Errors
    /// The `openat2`/`mkdirat` errno, for the caller to read as a skip or not.
    pub(crate) fn resolve_or_create(
        &mut self,
        rel: &str,
        flags: ResolveFlags,
        made: MadeFor<'_>,
    ) -> Result<OwnedFd, Errno> {
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
                    let (mode, owner) = made_as(made, &prefix);
                    match rustix::fs::mkdirat(dir, parts[i], Mode::from_raw_mode(mode)) {
                        Ok(()) => own(dir, parts[i], owner)?,
                        Err(Errno::EXIST) => {}
                        Err(Errno::ROFS) => self.mkdir_through_clone(&parts[..=i], flags, mode, owner)?,
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
    fn mkdir_through_clone(
        &mut self,
        parts: &[&str],
        flags: ResolveFlags,
        mode: u32,
        owner: Option<plan::Owner>,
    ) -> Result<(), Errno> {
        if self.writable.is_none() {
            self.writable = Some(mount::clone_writable(&self.fd).map_err(|(_, e)| e)?);
        }
        let clone = self.writable.as_ref().ok_or(Errno::INVAL)?;
        let (last, parents) = parts.split_last().ok_or(Errno::INVAL)?;
        let rel = if parents.is_empty() { ".".to_string() } else { parents.join("/") };
        let parent = resolve(clone, &rel, flags)?;
        match rustix::fs::mkdirat(&parent, *last, Mode::from_raw_mode(mode)) {
            Ok(()) => own(&parent, last, owner),
            Err(Errno::EXIST) => Ok(()),
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
    pub(crate) fn resolve_target(
        &mut self,
        target: &TargetPath,
        made: MadeFor<'_>,
    ) -> Result<Result<OwnedFd, Note>, SysError> {
        self.resolve_target_with(target, TARGET, target.as_str(), made)
    }

    /// [`Root::resolve_target`] of `path` with `flags`, named `what` in notes.
    pub(super) fn resolve_target_with(
        &mut self,
        path: &TargetPath,
        flags: ResolveFlags,
        what: &str,
        made: MadeFor<'_>,
    ) -> Result<Result<OwnedFd, Note>, SysError> {
        let fd = match self.resolve_or_create(path.relative(), flags, made) {
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
        let real = match self.landed(&fd, what)? {
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

    /// Gives the directory `fd` (an `O_PATH` fd, chmod'ed through its magic
    /// link in the host's procfs) `mode` when it has another; whether it did.
    ///
    /// # Errors
    /// `fstat` failing, or a `chmod` refused for another reason than a
    /// rootfs that may not be changed (then the tmpfs keeps the directory's
    /// mode).
    pub(crate) fn set_mode(&self, fd: &OwnedFd, mode: u32, what: &str) -> Result<bool, SysError> {
        let st = rustix::fs::fstat(fd).map_err(|e| SysError::sys(Syscall::Fstat, "reading", what, e))?;
        if st.st_mode & 0o7777 == mode {
            return Ok(false);
        }
        match self.proc.chmod_fd(fd, mode) {
            Ok(()) => Ok(true),
            // A rootfs we may not change: the tmpfs keeps the directory's mode.
            Err(Errno::ROFS | Errno::PERM | Errno::ACCESS) => Ok(false),
            Err(e) => Err(SysError::sys(Syscall::Fchmodat, "setting the mode of the mountpoint", what, e)),
        }
    }

    /// The spec's mount destinations `dests` as they landed in this
    /// (mounted) root: the hook's view of the final layout. A destination
    /// that cannot be opened is left out (the runtime did not mount it).
    ///
    /// # Errors
    /// The path of an opened destination cannot be read.
    pub(crate) fn landed_mounts(&self, mounts: &[SpecMount]) -> Result<Vec<Landing>, SysError> {
        let mut out = Vec::new();
        for m in mounts {
            let rel = m.dest.trim_start_matches('/');
            let Ok(fd) = open_in(&self.fd, rel, OFlags::PATH | OFlags::CLOEXEC, LANDED) else { continue };
            if let Some(at) = self.landed(&fd, &m.dest)? {
                out.push(Landing { dest: m.dest.clone(), ours: m.ours, at });
            }
        }
        Ok(out)
    }

    /// The host's procfs this root was opened with.
    pub(crate) fn proc(&self) -> &Proc {
        &self.proc
    }

    /// Where `fd` (opened for `what`) landed, as a path inside the rootfs,
    /// or `None` when outside.
    ///
    /// # Errors
    /// Its path cannot be read from the host's procfs.
    pub(crate) fn landed(&self, fd: &OwnedFd, what: &str) -> Result<Option<String>, SysError> {
        let name = self
            .proc
            .fd_path(fd)
            .map_err(|e| SysError::sys(Syscall::Readlinkat, "reading where it landed:", what, e))?;
        let Some(rest) = name.strip_prefix(&self.name) else { return Ok(None) };
        Ok(match rest {
            "" => Some("/".to_string()),
            r if r.starts_with('/') => Some(r.to_string()),
            _ => None,
        })
    }
}

/// A host directory, opened `O_PATH` (a bind's source: the passwd read of
/// the spec executor), to read in with [`super::user::passwd_in`].
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
    let st = rustix::fs::fstat(fd).map_err(|e| SysError::sys(Syscall::Fstat, "reading", what, e))?;
    Ok((FileType::from_raw_mode(st.st_mode), st.st_dev))
}

/// `openat2(root, rel, O_PATH|O_DIRECTORY)` inside the root, retried on `EAGAIN`.
/// `EAGAIN` says only "retry": the rename seqlock the kernel checks is
/// global, so a host renaming busily (a package manager, another container's
/// rename race) can make 16 tries in a row fail; after those the walk is
/// retried with 1 ms pauses for up to [`EAGAIN_PATIENCE`].
pub(super) fn resolve(root: &OwnedFd, rel: &str, flags: ResolveFlags) -> Result<OwnedFd, Errno> {
    open_in(root, rel, OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC, flags)
}

/// `openat2(root, rel, oflags)` with `flags`, retried on `EAGAIN` (see [`resolve`]).
pub(super) fn open_in(
    root: &OwnedFd,
    rel: &str,
    oflags: OFlags,
    flags: ResolveFlags,
) -> Result<OwnedFd, Errno> {
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

/// The mode and owner of a directory made at `rel` (no leading `/`) for
/// `made`.
fn made_as(made: MadeFor<'_>, rel: &str) -> (u32, Option<plan::Owner>) {
    match made {
        Some((home, owner)) => {
            let home = home.trim_matches('/');
            if home.is_empty() || rel == home || rel.starts_with(&format!("{home}/")) {
                (plan::HOME_MODE, Some(owner))
            } else {
                (0o755, None)
            }
        }
        None => (0o755, None),
    }
}

/// Gives the directory `name` just made in `dir` to `owner` (`None`: it
/// stays root's). `AT_SYMLINK_NOFOLLOW`: a symlink swapped in meanwhile is
/// changed itself, never what it points to.
fn own(dir: &OwnedFd, name: &str, owner: Option<plan::Owner>) -> Result<(), Errno> {
    let Some(o) = owner else { return Ok(()) };
    rustix::fs::chownat(
        dir,
        name,
        Some(rustix::fs::Uid::from_raw(o.uid)),
        Some(rustix::fs::Gid::from_raw(o.gid)),
        rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
    )
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

/// Claims the directory at the real path `real` for `what` in `claimed`,
/// or says why not: the same directory as an earlier target's, or a
/// [`clash`] with one. For a rootfs judged by path (a map, or `explain`'s
/// read-only view), where a real path names one directory: it has no
/// symlink left and crosses no mount.
pub(crate) fn claim_path(claimed: &mut Vec<Claim>, real: &str, what: &str) -> Option<String> {
    if let Some(first) = claimed.iter().find(|c| c.real == real) {
        return Some(format!("it is the same directory as {}", first.what));
    }
    if let Some(reason) = clash(claimed.iter(), real) {
        return Some(reason);
    }
    claimed.push(Claim { what: what.to_string(), real: real.to_string() });
    None
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

impl Root {
    /// This root as a [`landing::Tree`].
    pub(crate) fn tree(&self) -> RootTree<'_> {
        RootTree(&self.fd)
    }

    /// Claims the directory `fd`, landed at `real`, for `what`, or says why
    /// not ([`clash`]): one mount per directory, none inside another's.
    ///
    /// # Errors
    /// `fstat` failing.
    pub(crate) fn claim(&mut self, fd: &OwnedFd, real: &str, what: &str) -> Result<Option<String>, SysError> {
        let st = rustix::fs::fstat(fd).map_err(|e| SysError::sys(Syscall::Fstat, "reading", what, e))?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::landing::Entry;
    use crate::sys::contents::{contents, Contents};
    use crate::sys::copy::Limits;
    use crate::sys::fake::FakeRoot;
    use crate::sys::rootfs::Rootfs;

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
        let first = root.place_target(&t("/tmp"), &[], None).unwrap().unwrap();
        assert_eq!((first.0.as_str(), first.1.as_str()), ("/tmp", "/tmp"));
        let second = root.place_target(&t("/var/tmp"), &[], None).unwrap().unwrap_err();
        assert_eq!(second, Note::warn("/var/tmp", "it is the same directory as /tmp"));
        let made = root.place_target(&t("/data/cache"), &[], None).unwrap().unwrap();
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
        assert_eq!(root.place_target(&t("/tmp"), &[], None).unwrap().unwrap().0.as_str(), "/root/tmp");
        let home = root.place_target(&t("/root"), &[], None).unwrap().unwrap_err();
        assert_eq!(
            home,
            Note::warn(
                "/root",
                "it resolves to /root, above /root/tmp, where /tmp lands and gets a tmpfs of ours: two would stack, one hiding the other"
            )
        );
        let mut root = FakeRoot::new(&layout);
        assert!(root.place_target(&t("/root"), &[], None).unwrap().is_ok());
        let tmp = root.place_target(&t("/tmp"), &[], None).unwrap().unwrap_err();
        assert!(
            tmp.warn && tmp.reason.starts_with("it resolves to /root/tmp, inside /root, where /root lands"),
            "{tmp:?}"
        );
        assert!(root.place_target(&t("/rootx"), &[], None).unwrap().is_ok(), "a sibling is not nested");
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
