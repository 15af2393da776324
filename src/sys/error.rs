//! The syscall layer's one error, [`SysError`]: what can stop resolving,
//! mounting, joining a namespace or growing an engine's shm, with every
//! failed system call typed by [`Syscall`] (the call, what it was doing, on
//! which path, and the kernel that added it, so `ENOSYS` names the Linux
//! version needed without matching strings). Copy-up names its calls with
//! the same [`Syscall`]. No policy here: which failure is a skip and which an
//! error is the caller's.

use std::fmt;
use std::io;
use std::path::PathBuf;

use rustix::io::Errno;

use crate::stage::Stage;

/// A system call this layer makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Syscall {
    Open,
    Openat,
    Openat2,
    Mkdirat,
    Fchown,
    Fchownat,
    Fchmod,
    Fchmodat,
    Dup,
    Stat,
    Fstat,
    Fstatat,
    Read,
    Write,
    Readlinkat,
    Symlinkat,
    Utimensat,
    Futimens,
    Getdents64,
    Statfs,
    Statx,
    PidfdOpen,
    Setns,
    Fsopen,
    Fsconfig,
    Fsmount,
    Fspick,
    MoveMount,
    OpenTree,
    MountSetattr,
}

impl Syscall {
    /// Its name in section 2 of the manual.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Syscall::Open => "open",
            Syscall::Openat => "openat",
            Syscall::Openat2 => "openat2",
            Syscall::Mkdirat => "mkdirat",
            Syscall::Fchown => "fchown",
            Syscall::Fchownat => "fchownat",
            Syscall::Fchmod => "fchmod",
            Syscall::Fchmodat => "fchmodat",
            Syscall::Dup => "dup",
            Syscall::Stat => "stat",
            Syscall::Fstat => "fstat",
            Syscall::Fstatat => "fstatat",
            Syscall::Read => "read",
            Syscall::Write => "write",
            Syscall::Readlinkat => "readlinkat",
            Syscall::Symlinkat => "symlinkat",
            Syscall::Utimensat => "utimensat",
            Syscall::Futimens => "futimens",
            Syscall::Getdents64 => "getdents64",
            Syscall::Statfs => "fstatfs",
            Syscall::Statx => "statx",
            Syscall::PidfdOpen => "pidfd_open",
            Syscall::Setns => "setns",
            Syscall::Fsopen => "fsopen",
            Syscall::Fsconfig => "fsconfig",
            Syscall::Fsmount => "fsmount",
            Syscall::Fspick => "fspick",
            Syscall::MoveMount => "move_mount",
            Syscall::OpenTree => "open_tree",
            Syscall::MountSetattr => "mount_setattr",
        }
    }

    /// The Linux version that added it, for calls younger than 5.0.
    pub(crate) fn since(self) -> Option<&'static str> {
        match self {
            Syscall::Openat2 => Some("5.6"),
            Syscall::PidfdOpen => Some("5.3"),
            Syscall::Fsopen
            | Syscall::Fsconfig
            | Syscall::Fsmount
            | Syscall::Fspick
            | Syscall::MoveMount
            | Syscall::OpenTree => Some("5.2"),
            Syscall::MountSetattr => Some("5.12"),
            _ => None,
        }
    }
}

impl fmt::Display for Syscall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}(2)", self.name())
    }
}

/// What can stop the syscall layer: a refusal to join or mount (the
/// namespace cannot be told from the host's, the rootfs is the host's), a
/// call the kernel lacks, or a failed call.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SysError {
    #[error("the hook cannot act at startContainer (the root is already pivoted and read-only); register it at prestart, createRuntime or createContainer")]
    TooLate,
    #[error("the state's pid {0:?} is not a container process the hook can join (stage {1}); check the hook's --stage")]
    BadPid(Option<i64>, Stage),
    #[error("container process {0} no longer exists")]
    NoProcess(i64),
    #[error("the target mount namespace is the hook's own or the host's ({1}); refusing to mount (stage {0}: is --stage right?)")]
    SameNamespace(Stage, String),
    #[error("the hook runs in a pid namespace, as at createContainer, but was told stage {0}; register it with --stage createContainer")]
    InsideContainer(Stage),
    #[error("at createContainer the hook must run inside the container's pid namespace, and it does not (run by hand, or a container sharing the host's pid namespace); refusing to mount. Register the hook at prestart or createRuntime instead")]
    NotInContainer,
    #[error("cannot tell the hook stage from the state (pid {0:?}); pass --stage")]
    UnknownStage(Option<i64>),
    #[error("cannot tell this mount namespace from the host's (neither /proc/1/ns/mnt nor /proc/1/mountinfo is readable); refusing to mount")]
    InitUnknown,
    #[error("{call} is not available in this kernel (Linux {since} or later is needed); refusing to mount without it")]
    Unsupported { call: Syscall, since: &'static str },
    #[error("{0} is not the root of a procfs, through which the image's files are opened by fd; mount proc at /proc on the host")]
    NotProcfs(&'static str),
    #[error("the rootfs {0} is the host's root directory; refusing")]
    RootIsHost(PathBuf),
    #[error("{op} {path}")]
    Sys {
        call: Syscall,
        op: &'static str,
        path: String,
        #[source]
        source: io::Error,
    },
}

impl SysError {
    /// The error for `call` failing with `e` while doing `op` on `path`;
    /// `ENOSYS` from a call younger than 5.0 names the kernel needed.
    pub(crate) fn sys(call: Syscall, op: &'static str, path: impl Into<String>, e: Errno) -> Self {
        match (e, call.since()) {
            (Errno::NOSYS, Some(since)) => SysError::Unsupported { call, since },
            _ => SysError::Sys { call, op, path: path.into(), source: e.into() },
        }
    }
}

/// `map_err` helper: `.map_err(fail(Syscall::Fsopen, "creating a tmpfs for", path))`.
pub(crate) fn fail<'a>(call: Syscall, op: &'static str, path: &'a str) -> impl Fn(Errno) -> SysError + 'a {
    move |e| SysError::sys(call, op, path, e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enosys_names_the_kernel_only_for_young_calls() {
        let cases = [
            (Syscall::Openat2, Errno::NOSYS, Some("5.6")),
            (Syscall::Fspick, Errno::NOSYS, Some("5.2")),
            (Syscall::PidfdOpen, Errno::NOSYS, Some("5.3")),
            (Syscall::Open, Errno::NOSYS, None),
            (Syscall::Openat2, Errno::PERM, None),
        ];
        for (call, e, want) in cases {
            let got = match SysError::sys(call, "doing", "/x", e) {
                SysError::Unsupported { since, .. } => Some(since),
                _ => None,
            };
            assert_eq!(got, want, "{call} {e:?}");
        }
        let text = SysError::sys(Syscall::Fsopen, "x", "/x", Errno::NOSYS).to_string();
        assert!(text.starts_with("fsopen(2) is not available") && text.contains("Linux 5.2"), "{text}");
    }
}
