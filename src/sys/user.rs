//! What the image says of the container's user: its `/etc/passwd` entry
//! ([`Root::read_passwd`], [`passwd_in`]), read by fd, bounded and through
//! procfs, and what it holds at the home ([`Root::home_dir`]).

use std::os::fd::OwnedFd;

use rustix::fs::{FileType, OFlags, ResolveFlags};
use rustix::io::Errno;

use super::contents::first_plain_entry;
use super::error::{SysError, Syscall};
use super::procfs::{Checked, Proc, PROC_SUPER_MAGIC};
use super::resolve::{open_in, resolve, Root, TARGET};
use crate::plan::{self, HomeDir, Passwd};
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
