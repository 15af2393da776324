//! The syscall layer under both fd executors, the hook ([`crate::hook`]) and
//! the spec executor ([`crate::spec`]): every system call the mount path
//! makes, by fd, each failure typed by one error ([`SysError`], whose
//! [`Syscall`] names the call). [`resolve`] walks the hostile rootfs with
//! `openat2(2)` in-root ([`resolve::Root`]: temp targets, one mount per
//! directory); [`rootfs`] judges and places the spec executor's targets on
//! it (the landing rule by fd); [`contents`] reads what a directory of the
//! image holds (the bounded scan before `tmpcopyup`); [`user`] reads the
//! image's `/etc/passwd` and what it holds at the home; [`probe`] is
//! `doctor`'s kernel checks; [`mount`] builds, attaches, grows
//! and clones tmpfs mounts (`fsopen`/`fsmount`/`move_mount`/`fspick`,
//! `mount_setattr`, the never-shrink rule); [`ns`] gets into a container's
//! mount namespace and proves it is not the host's; [`procfs`] opens the
//! host's procfs before that, through which a checked `O_PATH` fd is
//! reopened to be read (never its path again); [`engine_shm`] proves
//! and grows an engine-made `/dev/shm` on the host; [`copy`] holds the
//! calls copy-up makes (the walk and its bounds are the hook's); [`usage`]
//! reads how full a running container's tmpfs of ours are, by fd in its root.
//!
//! What it is not: no plan is made here (what to mount, how big, which
//! targets: [`crate::plan`]), and no order of effects (the hook's
//! [`crate::hook::apply`], the spec executor's `config.json` edit). The
//! decisions that read the rootfs (what is left alone, and why) sit behind
//! the narrow [`rootfs::Rootfs`] trait, and copy-up's walk behind
//! [`copy::CopyFs`], so that the executors' unit tests run them against a
//! map instead of a rootfs; the real implementations are generic
//! parameters, not `dyn`.

pub(crate) mod contents;
pub(crate) mod copy;
pub(crate) mod engine_shm;
pub(crate) mod error;
pub(crate) mod mount;
pub(crate) mod ns;
pub(crate) mod probe;
pub(crate) mod procfs;
pub(crate) mod resolve;
pub(crate) mod rootfs;
pub(crate) mod usage;
pub(crate) mod user;

pub(crate) use error::{SysError, Syscall};

#[cfg(test)]
pub(crate) mod fake;
