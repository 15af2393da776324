//! Getting into the container's mount namespace, and proving we are there:
//! `setns(2)` by pidfd at prestart and createRuntime, two independent proofs
//! at createContainer, and a refusal whenever the target cannot be told apart
//! from the host's namespace (docs/design.md#hooks, the `state.pid` trap). No mounts
//! and no path resolution here.

use std::collections::HashSet;
use std::os::fd::AsFd;

use rustix::fs::{Mode, OFlags};
use rustix::io::Errno;
use rustix::process::{Pid, PidfdFlags};
use rustix::thread::{LinkNameSpaceType, ThreadNameSpaceType};

use super::error::{SysError, Syscall};
use crate::stage::Stage;

/// How the hook gets into the container's mount namespace, from the stage it
/// is registered at. [`NsEntry::at`] is the one place startContainer is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NsEntry {
    /// prestart or createRuntime: the runtime's namespaces; `setns` into the
    /// container process's.
    Join(Stage),
    /// createContainer: already in the container's, before pivot_root.
    Inside,
}

impl NsEntry {
    /// The way in at `stage`.
    ///
    /// # Errors
    /// [`SysError::TooLate`] at startContainer: the root is pivoted by then.
    pub(crate) fn at(stage: Stage) -> Result<NsEntry, SysError> {
        match stage {
            Stage::Prestart | Stage::CreateRuntime => Ok(NsEntry::Join(stage)),
            Stage::CreateContainer => Ok(NsEntry::Inside),
            Stage::StartContainer => Err(SysError::TooLate),
        }
    }
}

impl std::fmt::Display for NsEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NsEntry::Join(stage) => stage.fmt(f),
            NsEntry::Inside => Stage::CreateContainer.fmt(f),
        }
    }
}

/// A namespace's identity: device and inode of its nsfs file.
type NsId = (u64, u64);

fn ns_id(path: &str) -> Result<NsId, SysError> {
    let st =
        rustix::fs::stat(path).map_err(|e| SysError::sys(Syscall::Stat, "reading namespace", path, e))?;
    Ok((st.st_dev, st.st_ino))
}

/// A procfs file, whole, in a few large `read`s: procfs gives no size, and
/// `fs::read_to_string` then starts at 32 bytes and doubles (measured with
/// strace on one runc start: 36 reads for the hook's four mountinfo files;
/// now two per file, and pid 1's is read once). By rustix, not `std::fs`:
/// std adds an `fstat` and an `lseek` per file for a size procfs does not
/// give, and musl's `open` an `fcntl` for `O_CLOEXEC`.
fn read_proc(path: &str) -> Option<String> {
    let fd = rustix::fs::open(path, OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty()).ok()?;
    let mut buf = Vec::with_capacity(64 << 10);
    loop {
        if buf.len() == buf.capacity() {
            buf.reserve(buf.capacity());
        }
        // Into the spare capacity: nothing zeroed first, the length kept by rustix.
        match rustix::io::read(&fd, rustix::buffer::spare_capacity(&mut buf)) {
            Ok(0) => break,
            Ok(_) | Err(Errno::INTR) => {}
            Err(_) => return None,
        }
    }
    String::from_utf8(buf).ok()
}

/// Mount ids listed in `/proc/<who>/mountinfo`.
pub(crate) fn mount_ids(who: &str) -> Option<HashSet<u64>> {
    let text = read_proc(&format!("/proc/{who}/mountinfo"))?;
    let ids: HashSet<u64> = text.lines().filter_map(|l| l.split(' ').next()?.parse().ok()).collect();
    (!ids.is_empty()).then_some(ids)
}

/// Pid 1's mount ids, read once per hook run: the namespace checks before
/// and after `setns` both compare with it. A mount the host adds in between
/// is not in the set, but every mount of the host's namespace at the first
/// read still is, so a process in that namespace still shares ids with it.
fn init_mount_ids() -> Option<&'static HashSet<u64>> {
    static IDS: std::sync::OnceLock<Option<HashSet<u64>>> = std::sync::OnceLock::new();
    IDS.get_or_init(|| mount_ids("1")).as_ref()
}

/// Pid 1's mount namespace, or `None` where procfs denies it: reading
/// `/proc/1/ns/mnt` needs ptrace access, which some hosts deny even to root
/// (sandboxes, hardened procfs). Read once per hook run, before any `setns`,
/// like [`init_mount_ids`].
fn init_ns() -> Option<NsId> {
    static ID: std::sync::OnceLock<Option<NsId>> = std::sync::OnceLock::new();
    *ID.get_or_init(|| ns_id("/proc/1/ns/mnt").ok())
}

/// Whether process `who` (a pid or `self`), whose mount namespace is `id`,
/// is in pid 1's, or `None` when that cannot be told. Pid 1's namespace is
/// the direct answer; where it is denied, the mount ids of
/// `/proc/<pid>/mountinfo` answer too: a mount belongs to exactly one
/// namespace, and copying a namespace gives every mount a new id.
fn in_init_ns(who: &str, id: NsId) -> Option<bool> {
    if let Some(init) = init_ns() {
        return Some(id == init);
    }
    Some(!mount_ids(who)?.is_disjoint(init_mount_ids()?))
}

/// Refuses when process `who`, whose mount namespace is `id`, is in the
/// mount namespace of pid 1 (the host's init in our procfs), or when that
/// cannot be told: never guess.
fn outside_init(who: &str, id: NsId, stage: Stage) -> Result<(), SysError> {
    match in_init_ns(who, id) {
        Some(false) => Ok(()),
        Some(true) => Err(SysError::SameNamespace(stage, format!("{} is in pid 1's", described(who)))),
        None => Err(SysError::InitUnknown),
    }
}

/// Process `who` (a pid or `self`) as a refusal names it: its pid, name,
/// state and parent from `/proc/<who>/status`, so that a refused start says
/// which process the runtime handed over and what it was doing. Read only
/// on that error path.
fn described(who: &str) -> String {
    let status = read_proc(&format!("/proc/{who}/status")).unwrap_or_default();
    let field =
        |name: &str| status.lines().find_map(|l| l.strip_prefix(name)).map_or("?", |v| v.trim()).to_string();
    format!("process {who} ({}, state {}, parent {})", field("Name:"), field("State:"), field("PPid:"))
}

/// Number of pid namespaces this process is in, from `NSpid` in
/// `/proc/self/status`: more than one means we already run inside a container.
pub(super) fn pid_namespace_depth() -> usize {
    read_proc("/proc/self/status")
        .and_then(|s| s.lines().find_map(|l| l.strip_prefix("NSpid:")).map(|v| v.split_whitespace().count()))
        .unwrap_or(1)
}

/// Picks the stage when the registration did not say: inside a pid namespace
/// means createContainer; a live pid in another mount namespace means a
/// runtime-namespace stage; anything else is refused.
///
/// # Errors
/// [`SysError::UnknownStage`].
pub(crate) fn detect_entry(pid: Option<i64>) -> Result<NsEntry, SysError> {
    if pid_namespace_depth() > 1 {
        return Ok(NsEntry::Inside);
    }
    if let Some(p) = pid.filter(|&p| p > 1) {
        let own = ns_id("/proc/self/ns/mnt")?;
        if let Ok(theirs) = ns_id(&format!("/proc/{p}/ns/mnt")) {
            if theirs != own && in_init_ns(&p.to_string(), theirs) == Some(false) {
                return Ok(NsEntry::Join(Stage::CreateRuntime));
            }
        }
    }
    Err(SysError::UnknownStage(pid))
}

/// Gets into the container's mount namespace the way `entry` says.
///
/// # Errors
/// Whenever the namespace reached could be the host's or our own.
pub(crate) fn enter(entry: NsEntry, pid: Option<i64>) -> Result<(), SysError> {
    match entry {
        NsEntry::Inside => {
            // We must already be in the container's mount namespace, before
            // pivot_root. Two independent proofs, both required: the runtime
            // started us inside the container's pid namespace (runc and crun
            // both do), and our mount namespace is not pid 1's (told by mount
            // ids where /proc/1/ns is unreadable).
            if pid_namespace_depth() < 2 {
                return Err(SysError::NotInContainer);
            }
            outside_init("self", ns_id("/proc/self/ns/mnt")?, Stage::CreateContainer)
        }
        NsEntry::Join(stage) => join(stage, pid),
    }
}

/// prestart / createRuntime: `setns` into the mount namespace of `pid`.
fn join(stage: Stage, pid: Option<i64>) -> Result<(), SysError> {
    if pid_namespace_depth() > 1 {
        return Err(SysError::InsideContainer(stage));
    }
    let own = ns_id("/proc/self/ns/mnt")?;
    // pid 0 and 1 are what runtimes pass at createContainer; 1 is the host's
    // init in our procfs. Never join those.
    let p = pid
        .filter(|&p| p > 1)
        .and_then(|p| i32::try_from(p).ok())
        .and_then(Pid::from_raw)
        .ok_or(SysError::BadPid(pid, stage))?;
    let raw = i64::from(p.as_raw_nonzero().get());
    let shown = raw.to_string();
    let pidfd = rustix::process::pidfd_open(p, PidfdFlags::empty()).map_err(|e| match e {
        Errno::SRCH => SysError::NoProcess(raw),
        e => SysError::sys(Syscall::PidfdOpen, "opening a pidfd for process", shown.as_str(), e),
    })?;
    let theirs = ns_id(&format!("/proc/{raw}/ns/mnt"))?;
    if theirs == own {
        return Err(SysError::SameNamespace(stage, format!("{} is in the hook's", described(&shown))));
    }
    outside_init(&shown, theirs, stage)?;
    // setns(2) by pidfd (Linux 5.8): bound to the process, not to a pid
    // number that could be reused. Older kernels: the nsfs file, then a
    // check that the pid is still the same process.
    match rustix::thread::move_into_thread_name_spaces(pidfd.as_fd(), ThreadNameSpaceType::MOUNT) {
        Ok(()) => {}
        Err(Errno::INVAL) => {
            let path = format!("/proc/{raw}/ns/mnt");
            let nsfd = rustix::fs::open(path.as_str(), OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty())
                .map_err(|e| SysError::sys(Syscall::Open, "opening", path.as_str(), e))?;
            rustix::process::pidfd_send_signal(&pidfd, rustix::process::Signal::CONT)
                .map_err(|_| SysError::NoProcess(raw))?;
            rustix::thread::move_into_link_name_space(nsfd.as_fd(), Some(LinkNameSpaceType::Mount)).map_err(
                |e| SysError::sys(Syscall::Setns, "joining the mount namespace of", path.as_str(), e),
            )?;
        }
        Err(e) => {
            return Err(SysError::sys(
                Syscall::Setns,
                "joining the mount namespace of process",
                shown.as_str(),
                e,
            ))
        }
    }
    let now = ns_id("/proc/self/ns/mnt")?;
    if now == own {
        let what = format!("still the hook's after joining {}", described(&shown));
        return Err(SysError::SameNamespace(stage, what));
    }
    outside_init("self", now, stage)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mount_namespace_identity() {
        let own = mount_ids("self").unwrap();
        assert!(!own.is_empty());
        assert!(!own.is_disjoint(&mount_ids("thread-self").unwrap()), "one namespace, the same mounts");
        assert_eq!(mount_ids("0"), None);
        // Told one way or the other (pid 1's namespace, else its mount ids).
        assert!(in_init_ns("self", ns_id("/proc/self/ns/mnt").unwrap()).is_some());
    }

    #[test]
    fn a_refusal_names_the_process() {
        let me = described("self");
        let parent = rustix::process::getppid().map_or(0, |p| p.as_raw_nonzero().get());
        assert!(me.starts_with("process self (oci_tmpfs_hook"), "{me}");
        assert!(me.ends_with(&format!(", parent {parent})")) && !me.contains("state ?"), "{me}");
        assert_eq!(described("0"), "process 0 (?, state ?, parent ?)");
    }

    #[test]
    fn start_container_is_too_late() {
        assert!(matches!(NsEntry::at(Stage::StartContainer), Err(SysError::TooLate)));
        assert_eq!(NsEntry::at(Stage::CreateContainer).unwrap(), NsEntry::Inside);
        assert_eq!(NsEntry::at(Stage::CreateRuntime).unwrap(), NsEntry::Join(Stage::CreateRuntime));
    }
}
