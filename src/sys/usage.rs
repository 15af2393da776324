//! The reads `usage` makes on a live host: the runtimes' state
//! directories, and for each container's init process, through one fd of
//! its `/proc/<pid>` (checked to be the process the state names by its
//! start time), its `mountinfo`, its cgroup's memory figures, and each
//! target reached by fd in its root: `openat2(2)` `RESOLVE_IN_ROOT |
//! RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS` from `/proc/<pid>/root`,
//! then `fstat(2)` and `fstatfs(2)` of that fd, whose device must be the
//! mount's and whose filesystem a tmpfs, else the target is left out
//! (docs/design.md#usage). Nothing is written, nothing mounted, nothing
//! run; which mounts are targets and how they are shown is
//! [`crate::usage`]'s.

use std::io::Read as _;
use std::os::fd::OwnedFd;
use std::path::Path;

use rustix::fs::{Mode, OFlags, ResolveFlags};
use rustix::io::Errno;

use super::error::{SysError, Syscall};
use super::mount::TMPFS_MAGIC;
use super::procfs::Proc;
use super::resolve::open_in;
use crate::usage::{self, CgroupPlace, Container, Kind, StateEntry, Target, MAX_FILE_BYTES};

/// A target's mount point inside the container's root: no symlink, no
/// magic link, nothing above the root.
const IN_ROOT: ResolveFlags =
    ResolveFlags::IN_ROOT.union(ResolveFlags::NO_SYMLINKS).union(ResolveFlags::NO_MAGICLINKS);
/// A file under a cgroup hierarchy's mount.
const BENEATH: ResolveFlags =
    ResolveFlags::BENEATH.union(ResolveFlags::NO_SYMLINKS).union(ResolveFlags::NO_MAGICLINKS);

/// The host's memory cgroup hierarchies, opened: v1's `memory` and v2's.
#[derive(Debug)]
struct Cgroups {
    v1: Option<Hierarchy>,
    v2: Option<Hierarchy>,
}

/// A cgroup hierarchy's mount: its directory, and the cgroup it shows.
#[derive(Debug)]
struct Hierarchy {
    dir: OwnedFd,
    root: String,
}

/// Every running container in the state directories `roots` (patterns, as
/// [`usage::STATE_ROOTS`]) that has a target, in the order found. A
/// container that is gone, or whose pid is now another process's, is left
/// out; one that cannot be read for another reason is left out with a
/// warning.
///
/// # Errors
/// The host's procfs cannot be opened or read.
pub(crate) fn read_all(roots: &[&str]) -> Result<Vec<Container>, SysError> {
    let proc = Proc::open()?;
    let cgroups = host_cgroups(&proc)?;
    let mut seen_pids = Vec::new();
    let mut out = Vec::new();
    for dir in roots.iter().flat_map(|r| expand(r)) {
        for entry in states_in(&dir) {
            if seen_pids.contains(&entry.pid) {
                continue;
            }
            seen_pids.push(entry.pid);
            match read_container(&proc, &cgroups, &entry) {
                Ok(Some(c)) => out.push(c),
                Ok(None) => log::debug!("container {}: gone, or nothing of ours", entry.id),
                Err(e) => log::warn!("container {}: left out: {}", entry.id, crate::error::chain(&e)),
            }
        }
    }
    Ok(out)
}

/// The directories `pattern` names, each component holding at most one
/// `*`; none when a directory on the way is missing.
fn expand(pattern: &str) -> Vec<std::path::PathBuf> {
    let mut dirs = vec![std::path::PathBuf::from("/")];
    for part in pattern.split('/').filter(|p| !p.is_empty()) {
        let mut next = Vec::new();
        for dir in &dirs {
            if !part.contains('*') {
                next.push(dir.join(part));
                continue;
            }
            let Ok(list) = std::fs::read_dir(dir) else { continue };
            let mut names: Vec<String> =
                list.filter_map(|e| e.ok()?.file_name().into_string().ok()).collect();
            names.sort();
            next.extend(names.iter().filter(|n| usage::component_matches(part, n)).map(|n| dir.join(n)));
        }
        dirs = next;
    }
    dirs.retain(|d| d.is_dir());
    dirs
}

/// The containers of one state directory: a runc `state.json`, else a
/// crun `status` (with the `config.json` beside it), in each subdirectory.
fn states_in(dir: &Path) -> Vec<StateEntry> {
    let Ok(list) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut ids: Vec<String> = list.filter_map(|e| e.ok()?.file_name().into_string().ok()).collect();
    ids.sort();
    let read = |p: &Path| crate::files::read(None, p, MAX_FILE_BYTES).ok().map(|c| c.bytes);
    ids.iter()
        .filter_map(|id| {
            let d = dir.join(id);
            if let Some(state) = read(&d.join("state.json")) {
                return usage::parse_runc_state(id, &state);
            }
            let status = read(&d.join("status"))?;
            usage::parse_crun_status(id, &status, read(&d.join("config.json")).as_deref())
        })
        .collect()
}

/// Whether a read under `pid_dir` that failed with `e` failed because
/// the process is gone or going: `ENOENT` or `ESRCH`, or anything else
/// (an exiting task's `mountinfo` reads `EINVAL` once its mount namespace
/// is gone) from a process exiting or no more.
fn gone(pid_dir: &OwnedFd, e: Errno) -> bool {
    e == Errno::NOENT || e == Errno::SRCH || read_at(pid_dir, "stat").map_or(true, |s| usage::exited(&s))
}

/// What one container shows, `None` when it is gone (or its pid is another
/// process's now) or has no target.
fn read_container(proc: &Proc, cgroups: &Cgroups, entry: &StateEntry) -> Result<Option<Container>, SysError> {
    let shown = format!("/proc/{}", entry.pid);
    let fail = |call, op, e| SysError::sys(call, op, shown.as_str(), e);
    let pid_dir = match proc.open_pid(entry.pid) {
        Err(Errno::NOENT | Errno::SRCH) => return Ok(None),
        other => other.map_err(|e| fail(Syscall::Openat, "opening", e))?,
    };
    let same = |stat: &str| entry.start.is_none_or(|s| usage::start_time(stat) == Some(s));
    match read_at(&pid_dir, "stat") {
        Err(e) if gone(&pid_dir, e) => return Ok(None),
        Err(e) => return Err(fail(Syscall::Read, "reading the stat of", e)),
        Ok(stat) if !same(&stat) || usage::exited(&stat) => return Ok(None),
        Ok(_) => {}
    }
    let mountinfo = match read_at(&pid_dir, "mountinfo") {
        Err(e) if gone(&pid_dir, e) => return Ok(None),
        other => other.map_err(|e| fail(Syscall::Read, "reading the mountinfo of", e))?,
    };
    let mounts = usage::parse_mountinfo(&mountinfo);
    let wanted = usage::targets(&mounts);
    if wanted.is_empty() {
        return Ok(None);
    }
    // The magic link is followed to the process's root, in its mount namespace.
    let root = match rustix::fs::openat(
        &pid_dir,
        "root",
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    ) {
        Err(e) if gone(&pid_dir, e) => return Ok(None),
        other => other.map_err(|e| fail(Syscall::Openat, "opening the root of", e))?,
    };
    let targets: Vec<Target> = wanted.iter().filter_map(|m| read_target(&root, m, &entry.id)).collect();
    let (memory_limit_bytes, shmem_bytes) = match read_at(&pid_dir, "cgroup") {
        Err(e) if gone(&pid_dir, e) => return Ok(None),
        other => memory(cgroups, &other.map_err(|e| fail(Syscall::Read, "reading the cgroup of", e))?),
    };
    // Still there once all is read: the figures are a live container's.
    if read_at(&pid_dir, "stat").map_or(true, |s| usage::exited(&s)) || targets.is_empty() {
        return Ok(None);
    }
    Ok(Some(Container {
        id: entry.id.clone(),
        name: entry.name.clone(),
        pid: entry.pid,
        memory_limit_bytes,
        shmem_bytes,
        targets,
    }))
}

/// The target at `m`'s mount point, reached by fd in `root`; `None`
/// (logged) when it cannot be reached without a symlink, or what is there
/// is not that mount's tmpfs (it changed since `mountinfo` was read).
fn read_target(root: &OwnedFd, m: &usage::Mount, id: &str) -> Option<Target> {
    let rel = m.mount_point.trim_start_matches('/');
    let skip = |why: String| {
        log::debug!("container {id}: {} left out: {why}", m.mount_point);
        None
    };
    if rel.is_empty() {
        return skip("the root".into());
    }
    let fd = match open_in(root, rel, OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC, IN_ROOT) {
        Ok(fd) => fd,
        Err(e) => return skip(format!("openat2: {e}")),
    };
    let (st, fs) = match (rustix::fs::fstat(&fd), rustix::fs::fstatfs(&fd)) {
        (Ok(st), Ok(fs)) => (st, fs),
        (Err(e), _) | (_, Err(e)) => return skip(format!("fstat: {e}")),
    };
    let dev = st.st_dev;
    if (rustix::fs::major(dev), rustix::fs::minor(dev)) != (m.major, m.minor) {
        return skip(format!(
            "device {}:{}, not {}:{}",
            rustix::fs::major(dev),
            rustix::fs::minor(dev),
            m.major,
            m.minor
        ));
    }
    // `f_type` is an i64 here, narrower on some other targets.
    #[allow(clippy::useless_conversion)]
    if i64::from(fs.f_type) as u64 != TMPFS_MAGIC {
        return skip("not a tmpfs".into());
    }
    let bsize = fs.f_bsize as u64;
    // `f_blocks` and `f_bfree` are u64 here, narrower on some other targets.
    #[allow(clippy::unnecessary_cast)]
    let (blocks, free) = (fs.f_blocks as u64, fs.f_bfree as u64);
    Some(Target {
        path: m.mount_point.clone(),
        size_bytes: blocks.saturating_mul(bsize),
        used_bytes: blocks.saturating_sub(free).saturating_mul(bsize),
        kind: Kind::of(&m.mount_point, st.st_mode),
    })
}

/// The memory limit and shmem of the cgroup `/proc/<pid>/cgroup` names;
/// `None` each when it cannot be read.
fn memory(cgroups: &Cgroups, text: &str) -> (Option<u64>, Option<u64>) {
    let (h, path, v1) = match usage::memory_cgroup(text) {
        Some(CgroupPlace::V1(p)) => (cgroups.v1.as_ref(), p, true),
        Some(CgroupPlace::V2(p)) => (cgroups.v2.as_ref(), p, false),
        None => return (None, None),
    };
    let Some(h) = h else { return (None, None) };
    let rel = match path.strip_prefix(h.root.as_str()) {
        Some(rest) if h.root != "/" => rest,
        _ => path.as_str(),
    };
    let rel = rel.trim_matches('/');
    let file = |name: &str| {
        let p = if rel.is_empty() { name.to_string() } else { format!("{rel}/{name}") };
        let fd = open_in(&h.dir, &p, OFlags::RDONLY | OFlags::CLOEXEC, BENEATH).ok()?;
        read_fd(fd).ok()
    };
    let limit_file = if v1 { "memory.limit_in_bytes" } else { "memory.max" };
    let limit = file(limit_file).and_then(|t| crate::cgroup::limit_of(&t)).map(|b| b.0);
    let shmem = file("memory.stat").and_then(|t| crate::cgroup::shmem_of(&t)).map(|b| b.0);
    (limit, shmem)
}

/// The host's memory cgroup hierarchies, from its own `mountinfo`.
fn host_cgroups(proc: &Proc) -> Result<Cgroups, SysError> {
    let me = rustix::process::getpid().as_raw_nonzero().get();
    let fail = |e| SysError::sys(Syscall::Read, "reading", "/proc/self/mountinfo", e);
    let text = read_at(&proc.open_pid(me).map_err(fail)?, "mountinfo").map_err(fail)?;
    let mounts = usage::parse_mountinfo(&text);
    let open = |v1: bool| {
        let m = mounts.iter().find(|m| usage::is_memory_hierarchy(m, v1))?;
        let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let dir = rustix::fs::open(m.mount_point.as_str(), flags, Mode::empty()).ok()?;
        Some(Hierarchy { dir, root: m.root.clone() })
    };
    Ok(Cgroups { v1: open(true), v2: open(false) })
}

/// The file `name` under the directory fd `dir`, read whole (bounded).
fn read_at(dir: &OwnedFd, name: &str) -> Result<String, Errno> {
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    read_fd(rustix::fs::openat(dir, name, flags, Mode::empty())?)
}

/// What `fd` holds, at most [`MAX_FILE_BYTES`], as text.
fn read_fd(fd: OwnedFd) -> Result<String, Errno> {
    let mut bytes = Vec::new();
    std::fs::File::from(fd)
        .take(MAX_FILE_BYTES)
        .read_to_end(&mut bytes)
        .map_err(|e| e.raw_os_error().map_or(Errno::IO, Errno::from_raw_os_error))?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}
