//! What the image says of the container's user: its `/etc/passwd` entry
//! ([`Root::read_passwd`], [`passwd_in`]), read by fd, bounded and through
//! procfs, and what it holds at the home and along its caches' paths
//! ([`Root::home_dir`]).

use std::os::fd::OwnedFd;

use rustix::fs::{FileType, OFlags, ResolveFlags};
use rustix::io::Errno;

use super::contents::is_empty;
use super::error::{SysError, Syscall};
use super::procfs::{Checked, Proc, PROC_SUPER_MAGIC};
use super::resolve::{open_in, resolve, Root, TARGET};
use crate::plan::{self, Found, HomeDir, Passwd};
use crate::size::Bytes;
use crate::target::TargetPath;

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

    /// What the image holds at the home `home` and at `paths` below it
    /// (docs/design.md#home-rule). `HOME` is resolved as a target is
    /// (in-root, no mount crossed, nothing made); each path below it from
    /// `HOME`'s fd with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
    /// RESOLVE_NO_XDEV`, so no symlink is followed at any step and a
    /// mount (a volume) is seen as one. A directory's owner and mode come
    /// from `fstat`, whether it is empty from `getdents64`. A path below a
    /// missing, empty or non-directory entry is not read: the plan walks no
    /// further there.
    pub(crate) fn home_dir(&self, home: &str, paths: &[String]) -> HomeDir {
        let rel = home.trim_start_matches('/');
        let home_fd = match resolve(&self.fd, if rel.is_empty() { "." } else { rel }, TARGET) {
            Ok(fd) => fd,
            Err(e) => return HomeDir::Read(vec![(String::new(), entry_of(e))]),
        };
        let mut read = vec![(String::new(), dir_entry(&home_fd))];
        for p in paths {
            let parent = p.rsplit_once('/').map_or("", |(d, _)| d);
            let walk_on = read.iter().any(|(q, e)| q == parent && matches!(e, Found::Dir(d) if !d.empty));
            if !walk_on {
                continue;
            }
            let got =
                match open_in(&home_fd, p, OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC, BELOW_HOME) {
                    Ok(fd) => match rustix::fs::fstat(&fd) {
                        Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::Directory => {
                            dir_entry(&fd)
                        }
                        Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::Symlink => Found::Symlink,
                        _ => Found::Other,
                    },
                    Err(e) => entry_of(e),
                };
            read.push((p.clone(), got));
        }
        HomeDir::Read(read)
    }
}

/// Below `HOME`: no symlink at any step, no mount crossed, nothing above
/// `HOME` reached.
const BELOW_HOME: ResolveFlags = ResolveFlags::BENEATH
    .union(ResolveFlags::NO_SYMLINKS)
    .union(ResolveFlags::NO_MAGICLINKS)
    .union(ResolveFlags::NO_XDEV);

/// What a failed resolution says of the image: nothing there, a symlink
/// (`ELOOP` under `RESOLVE_NO_SYMLINKS`), a mount (`EXDEV`), or something
/// else (a file where a directory is walked through, an error).
fn entry_of(e: Errno) -> Found {
    match e {
        Errno::NOENT => Found::Missing,
        Errno::LOOP => Found::Symlink,
        Errno::XDEV => Found::Mount,
        _ => Found::Other,
    }
}

/// The directory `fd` as the plan reads it: owner, mode, and whether it is
/// empty (an unreadable one counts as holding files: it is never covered).
fn dir_entry(fd: &OwnedFd) -> Found {
    let Ok(st) = rustix::fs::fstat(fd) else { return Found::Other };
    if FileType::from_raw_mode(st.st_mode) != FileType::Directory {
        return Found::Other;
    }
    Found::Dir(plan::DirFacts {
        owner: plan::Owner { uid: st.st_uid, gid: st.st_gid },
        mode: st.st_mode & 0o7777,
        empty: matches!(is_empty(fd), Ok(true)),
    })
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{DirFacts, Owner};

    /// What the image holds at a home and below it, read by fd from a real
    /// tree: missing, empty, holding files, a symlink (never followed, even
    /// one that stays inside the root), a file; nothing read below a
    /// directory that is missing, empty or not a directory, and nothing
    /// above `HOME` reached.
    #[test]
    fn home_dir_reads_each_path_below_home_without_following_a_symlink() {
        let dir = crate::files::temp_dir("home-dir");
        let home = dir.join("home/u");
        std::fs::create_dir_all(home.join(".cache/pip")).unwrap();
        std::fs::write(home.join(".cache/pip/x"), "pip's").unwrap();
        std::fs::create_dir(home.join(".cupy")).unwrap();
        std::fs::write(home.join(".nv"), "a file").unwrap();
        std::os::unix::fs::symlink("/home/u/.cache", home.join(".triton")).unwrap();
        std::os::unix::fs::symlink("../../..", home.join(".config")).unwrap();
        let root = Root::open(&dir, crate::sys::procfs::Proc::open().unwrap()).unwrap();
        let paths: Vec<String> = [
            ".cache",
            ".config",
            ".triton",
            ".cupy",
            ".nv",
            ".cache/pip",
            ".cache/torch",
            ".cupy/k",
            ".nv/x",
        ]
        .iter()
        .map(|p| p.to_string())
        .collect();
        let HomeDir::Read(read) = root.home_dir("/home/u", &paths) else { panic!("not read") };
        let kinds: Vec<(&str, &str)> = read
            .iter()
            .map(|(p, e)| {
                let k = match e {
                    Found::Missing => "missing",
                    Found::Dir(DirFacts { empty: true, .. }) => "empty",
                    Found::Dir(_) => "files",
                    Found::Symlink => "symlink",
                    Found::Mount => "mount",
                    Found::Other => "other",
                };
                (p.as_str(), k)
            })
            .collect();
        assert_eq!(
            kinds,
            [
                ("", "files"),
                (".cache", "files"),
                (".config", "symlink"),
                (".triton", "symlink"),
                (".cupy", "empty"),
                (".nv", "other"),
                (".cache/pip", "files"),
                (".cache/torch", "missing"),
            ]
        );
        let me = Owner { uid: rustix::process::getuid().as_raw(), gid: rustix::process::getgid().as_raw() };
        assert!(matches!(read[0].1, Found::Dir(DirFacts { owner, .. }) if owner == me), "{read:?}");
        // A missing HOME is read as missing, and nothing below it.
        assert_eq!(root.home_dir("/home/v", &paths), HomeDir::Read(vec![(String::new(), Found::Missing)]));
        // HOME=/ reads from the root itself.
        let HomeDir::Read(read) = root.home_dir("/", &["home".to_string()]) else { panic!() };
        assert!(
            matches!(read[1], (ref p, Found::Dir(DirFacts { empty: false, .. })) if p == "home"),
            "{read:?}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// The directories made for a cache's mountpoint at or below `HOME` are
    /// the process's, mode 0700; those above `HOME` root's usual 0755.
    #[test]
    fn directories_made_for_a_cache_belong_to_the_process() {
        let dir = crate::files::temp_dir("make-for");
        let mut root = Root::open(&dir, crate::sys::procfs::Proc::open().unwrap()).unwrap();
        // As root (the suite's usual case): another uid, as for uid 1000's home.
        let me = match rustix::process::getuid().as_raw() {
            0 => Owner { uid: 4321, gid: 4322 },
            uid => Owner { uid, gid: rustix::process::getgid().as_raw() },
        };
        root.resolve_or_create("home/u/.cache", super::super::resolve::TARGET, Some(("/home/u", me)))
            .unwrap();
        root.resolve_or_create("srv/x", super::super::resolve::TARGET, None).unwrap();
        let mode = |p: &str| {
            let st = rustix::fs::stat(dir.join(p)).unwrap();
            (st.st_mode & 0o7777, st.st_uid)
        };
        assert_eq!(mode("home"), (0o755, rustix::process::getuid().as_raw()), "above HOME");
        assert_eq!(mode("home/u"), (0o700, me.uid), "a missing HOME");
        assert_eq!(mode("home/u/.cache"), (0o700, me.uid), "the mountpoint");
        assert_eq!(mode("srv/x").0, 0o755, "another target's");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
