//! The host's procfs, and the one way a file of the hostile rootfs is opened
//! for reading: an `O_PATH` fd, checked (a regular file or a directory,
//! never a device, a FIFO or a socket), is reopened through its own magic
//! link `/proc/thread-self/fd/N`, never by its path again
//! (docs/design.md#reopen). Opening the path a second time would open
//! whatever a rename put there in between: a device node, opened by host
//! root. The procfs handle is opened once, before the hook joins the
//! container's mount namespace, and checked to be the root of a procfs:
//! after `setns` the `/proc` a path names is the container's. No
//! resolution in the rootfs here ([`super::resolve`]'s), and no decision
//! on what a file's contents may be (the passwd read's and copy-up's).

use std::os::fd::{AsFd, AsRawFd, OwnedFd};

use rustix::fs::{AtFlags, FileType, Mode, OFlags, Stat};
use rustix::io::Errno;

use super::error::{SysError, Syscall};

/// procfs' `f_type` (`PROC_SUPER_MAGIC` in `<linux/magic.h>`).
pub(crate) const PROC_SUPER_MAGIC: i64 = 0x9fa0;
/// The inode of a procfs' root directory (`PROC_ROOT_INO` in the kernel's
/// `fs/proc/internal.h`): a `/proc` that is a subdirectory of a procfs
/// bound there has another.
const PROC_ROOT_INO: u64 = 1;

/// An `O_PATH` fd of the root of a procfs, opened in the namespace the
/// caller trusts (the host's, before the hook joins the container's).
#[derive(Debug)]
pub(crate) struct Proc {
    fd: OwnedFd,
}

/// What a check of an `O_PATH` fd saw: the reopened fd must be this file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Checked {
    pub dev: u64,
    pub ino: u64,
    pub kind: FileType,
}

impl Checked {
    /// What `fstat(2)` said.
    // `st_dev` and `st_ino` are u64 here, narrower on some other targets.
    #[allow(clippy::useless_conversion)]
    pub(crate) fn of(st: &Stat) -> Checked {
        Checked {
            dev: u64::from(st.st_dev),
            ino: u64::from(st.st_ino),
            kind: FileType::from_raw_mode(st.st_mode),
        }
    }
}

impl Proc {
    /// Opens `/proc` (`O_PATH | O_DIRECTORY | O_NOFOLLOW`) and checks that
    /// it is the root of a procfs: `fstatfs(2)` says `PROC_SUPER_MAGIC`,
    /// `fstat(2)` says inode 1.
    ///
    /// # Errors
    /// `/proc` cannot be opened, or is not the root of a procfs.
    pub(crate) fn open() -> Result<Proc, SysError> {
        Proc::open_at("/proc")
    }

    /// [`Proc::open`] of `path` (a test opens others).
    fn open_at(path: &'static str) -> Result<Proc, SysError> {
        let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let fd = rustix::fs::open(path, flags, Mode::empty())
            .map_err(|e| SysError::sys(Syscall::Open, "opening the host's procfs", path, e))?;
        let fs = rustix::fs::fstatfs(&fd).map_err(|e| SysError::sys(Syscall::Statfs, "reading", path, e))?;
        // `f_type` is an i64 here, narrower on some other targets.
        #[allow(clippy::useless_conversion)]
        if i64::from(fs.f_type) != PROC_SUPER_MAGIC {
            return Err(SysError::NotProcfs(path));
        }
        let st = rustix::fs::fstat(&fd).map_err(|e| SysError::sys(Syscall::Fstat, "reading", path, e))?;
        // `st_ino` is a u64 here, narrower on some other targets.
        #[allow(clippy::useless_conversion)]
        if u64::from(st.st_ino) != PROC_ROOT_INO {
            return Err(SysError::NotProcfs(path));
        }
        Ok(Proc { fd })
    }

    /// Another handle on the same procfs (`dup(2)`).
    ///
    /// # Errors
    /// `dup(2)` refused (out of fds).
    pub(crate) fn try_clone(&self) -> Result<Proc, SysError> {
        let fd = rustix::io::fcntl_dupfd_cloexec(&self.fd, 0)
            .map_err(|e| SysError::sys(Syscall::Dup, "duplicating the handle of", "/proc", e))?;
        Ok(Proc { fd })
    }

    /// An `O_PATH` fd of `/proc/<pid>` in this procfs. What is opened
    /// through it is that process's: once it exits, each open under it
    /// fails (`ESRCH` or `ENOENT`), whatever process gets the pid next.
    ///
    /// # Errors
    /// The errno of `openat(2)`: `ENOENT` for a pid that is gone.
    pub(crate) fn open_pid(&self, pid: i32) -> Result<OwnedFd, Errno> {
        let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        rustix::fs::openat(&self.fd, pid.to_string().as_str(), flags, Mode::empty())
    }

    /// The magic link of `fd` in this procfs, relative to its root.
    fn link(fd: &impl AsFd) -> String {
        format!("thread-self/fd/{}", fd.as_fd().as_raw_fd())
    }

    /// The path the kernel gives `fd`: `readlinkat(2)` of its magic link in
    /// this procfs, whatever `/proc` names in the namespace joined since.
    ///
    /// # Errors
    /// The errno of `readlinkat(2)`.
    pub(crate) fn fd_path(&self, fd: &impl AsFd) -> Result<String, Errno> {
        rustix::fs::readlinkat(&self.fd, Proc::link(fd).as_str(), Vec::new())
            .map(|c| c.to_string_lossy().into_owned())
    }

    /// Gives the file `fd` holds (an `O_PATH` fd) `mode`: `fchmodat(2)`
    /// through its magic link in this procfs (an `O_PATH` fd cannot be
    /// `fchmod`ed), which is followed to that very file.
    ///
    /// # Errors
    /// The errno of `fchmodat(2)`.
    pub(crate) fn chmod_fd(&self, fd: &impl AsFd, mode: u32) -> Result<(), Errno> {
        rustix::fs::chmodat(&self.fd, Proc::link(fd).as_str(), Mode::from_raw_mode(mode), AtFlags::empty())
    }

    /// Detaches (`umount2(2)` `MNT_DETACH`) the mount whose root `fd` holds,
    /// through its magic link in this procfs: `umount2` takes no directory
    /// fd, so the path is resolved from this procfs as the working
    /// directory, which is then restored.
    ///
    /// # Errors
    /// The errno of `umount2(2)`, or of saving or changing the working directory.
    pub(crate) fn detach_fd(&self, fd: &impl AsFd) -> Result<(), Errno> {
        let cwd = rustix::fs::open(".", OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())?;
        rustix::process::fchdir(&self.fd)?;
        let done = rustix::mount::unmount(Proc::link(fd).as_str(), rustix::mount::UnmountFlags::DETACH);
        let back = rustix::process::fchdir(&cwd);
        done.and(back)
    }

    /// Opens the file `fd` holds (an `O_PATH` fd that `checked` describes)
    /// for reading, through `thread-self/fd/N` of this procfs: the magic
    /// link is followed to the very file the fd holds, whatever its path
    /// names now. `O_RDONLY | O_NONBLOCK | O_NOCTTY`, plus `O_DIRECTORY`
    /// for a directory. Only a regular file or a directory is opened; the
    /// new fd must be the same file, of the same type.
    ///
    /// # Errors
    /// `EINVAL` for anything but a regular file or a directory, before any
    /// open; `ESTALE` when the fd opened is not the file checked (the
    /// procfs walk led elsewhere); else the errno of `openat(2)` or
    /// `fstat(2)`.
    pub(crate) fn reopen(&self, fd: &impl AsFd, checked: Checked) -> Result<OwnedFd, Errno> {
        let mut flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
        match checked.kind {
            FileType::RegularFile => {}
            FileType::Directory => flags |= OFlags::DIRECTORY,
            _ => return Err(Errno::INVAL),
        }
        // The last component is a magic link and must be followed: no
        // `O_NOFOLLOW`, no `RESOLVE_NO_MAGICLINKS` (docs/design.md#reopen).
        let file = rustix::fs::openat(&self.fd, Proc::link(fd).as_str(), flags, Mode::empty())?;
        if Checked::of(&rustix::fs::fstat(&file)?) != checked {
            return Err(Errno::STALE);
        }
        Ok(file)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    /// An fd's path, a chmod and a detach go through the handle's own
    /// magic links, not through the `/proc` a path names; a failed detach
    /// leaves the working directory where it was.
    #[test]
    fn paths_modes_and_detach_go_through_the_handle() {
        let proc = Proc::open().unwrap().try_clone().unwrap();
        let dir = std::env::temp_dir().join(format!("oth-procfs-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).unwrap();
        let fd = o_path(dir.to_str().unwrap());
        assert_eq!(proc.fd_path(&fd).unwrap(), dir.to_str().unwrap());
        proc.chmod_fd(&fd, 0o701).unwrap();
        let mode = std::fs::metadata(&dir).map(|m| std::os::unix::fs::PermissionsExt::mode(&m.permissions()));
        assert_eq!(mode.unwrap() & 0o7777, 0o701);
        let cwd = std::env::current_dir().unwrap();
        // Not a mount: umount2 refuses, and the working directory is back.
        assert_eq!(proc.detach_fd(&fd), Err(Errno::INVAL));
        assert_eq!(std::env::current_dir().unwrap(), cwd);
        std::fs::remove_dir(&dir).unwrap();
    }

    fn o_path(path: &str) -> OwnedFd {
        rustix::fs::open(path, OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC, Mode::empty()).unwrap()
    }

    fn checked(fd: &OwnedFd) -> Checked {
        Checked::of(&rustix::fs::fstat(fd).unwrap())
    }

    /// Only the root of a procfs is taken: not another filesystem, not a
    /// directory inside a procfs.
    #[test]
    fn only_the_root_of_a_procfs_is_taken() {
        assert!(Proc::open().is_ok());
        for path in ["/proc/1", "/proc/sys", "/", "/dev"] {
            let e = Proc::open_at(path).unwrap_err();
            assert!(matches!(e, SysError::NotProcfs(p) if p == path), "{path}: {e}");
        }
    }

    /// The reopened fd reads the file the `O_PATH` fd holds, even once its
    /// path names another file; a directory reopens as a directory.
    #[test]
    fn the_checked_file_is_reopened_not_its_path() {
        let proc = Proc::open().unwrap();
        let dir = std::env::temp_dir().join(format!("oci-tmpfs-reopen-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let (a, b) = (dir.join("a"), dir.join("b"));
        std::fs::write(&a, "checked").unwrap();
        std::fs::write(&b, "swapped in").unwrap();
        let fd = o_path(a.to_str().unwrap());
        let seen = checked(&fd);
        rustix::fs::renameat_with(
            rustix::fs::CWD,
            &a,
            rustix::fs::CWD,
            &b,
            rustix::fs::RenameFlags::EXCHANGE,
        )
        .unwrap();
        let mut text = String::new();
        std::fs::File::from(proc.reopen(&fd, seen).unwrap()).read_to_string(&mut text).unwrap();
        assert_eq!(text, "checked");
        let d = o_path(dir.to_str().unwrap());
        let opened = proc.reopen(&d, checked(&d)).unwrap();
        assert!(rustix::fs::Dir::new(opened).is_ok(), "a directory reopens O_DIRECTORY");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A device node is refused before any open (`/dev/null` would open),
    /// and an fd that is not the file checked is refused after.
    #[test]
    fn a_device_is_never_opened_and_another_file_never_taken() {
        let proc = Proc::open().unwrap();
        let null = o_path("/dev/null");
        assert_eq!(proc.reopen(&null, checked(&null)).unwrap_err(), Errno::INVAL);
        let passwd = o_path("/etc/passwd");
        let other = Checked { ino: checked(&passwd).ino + 1, ..checked(&passwd) };
        assert_eq!(proc.reopen(&passwd, other).unwrap_err(), Errno::STALE);
        let dir = Checked { kind: FileType::Directory, ..checked(&passwd) };
        assert_eq!(proc.reopen(&passwd, dir).unwrap_err(), Errno::NOTDIR, "O_DIRECTORY on a file");
    }
}
