//! The spec executor's side effects, run by the wrapper on the host before it
//! execs the runtime: the check of each temp target against the prepared
//! rootfs (the same landing rules as in the container's namespace, by fd),
//! and the growth of an engine-made `/dev/shm` (Docker's per-container shm, a
//! CRI pod's shm) on the host, by fd. What to check and grow comes from the
//! plan; nothing here decides sizes.

use std::os::fd::OwnedFd;
use std::path::Path;

use rustix::fs::{Mode, OFlags, ResolveFlags};

use super::error::{ApplyError, Call};
use super::resolve::Root;
use super::{mount, system, Done};
use crate::landing;
use crate::plan::{Action, Note, Plan, SHM_PATH};
use crate::size::Bytes;

/// Where the spec executor puts each temp target.
#[derive(Debug, Default)]
pub(crate) struct Placed {
    /// Targets placed: the target, and the real in-root path to mount at.
    pub placed: Vec<(String, String)>,
    /// Targets left alone, each with its note.
    pub refused: Vec<(String, Note)>,
    /// Mountpoint directories whose mode was set to the tmpfs' mode.
    pub chmodded: Vec<String>,
}

impl Placed {
    /// The destination for `target`, when it was placed.
    pub(crate) fn destination(&self, target: &str) -> Option<String> {
        self.placed.iter().find(|(t, _)| t == target).map(|(_, d)| d.clone())
    }
}

/// Applies the landing rule (docs/design.md#landing) to every temp target
/// of `plan` in the prepared `rootfs`, before the runtime mounts anything:
/// each target is walked in-root, judged against where the spec's mounts
/// will land, and resolved to its real path with the hook's rules (missing
/// directories made by fd in the image's own rootfs, one mount per
/// directory). Each mountpoint directory gets the mode of its tmpfs: runc
/// before 1.1.8 gives a tmpfs from the spec the mode of the directory it
/// covers, whatever `mode=` says (docs/design.md#runc-tmpfs-mode).
///
/// # Errors
/// A rootfs that cannot be opened, or a failure that is not a property of
/// the image.
pub(crate) fn place_targets(rootfs: &Path, plan: &Plan) -> Result<Placed, ApplyError> {
    let mut root = Root::open(rootfs)?;
    let landings = landing::landings(&mut root.tree(), &plan.spec_mounts);
    let mut out = Placed::default();
    for action in &plan.actions {
        let Action::MountTmpfs { target, tmpfs, .. } = action else { continue };
        let what = target.as_str();
        match root.place_target(target, &landings)? {
            Err(note) => out.refused.push((what.to_string(), note)),
            Ok((real, fd)) => {
                if set_mode(&fd, tmpfs.mode, real.as_str())? {
                    out.chmodded.push(real.to_string());
                }
                out.placed.push((what.to_string(), real.to_string()));
            }
        }
    }
    Ok(out)
}

/// Where the executors put one temp target, read-only (for `explain`).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case", tag = "executor")]
pub(crate) enum Route {
    /// The spec executor writes a tmpfs entry at `destination` (the hook
    /// mounts at the same directory by fd).
    Spec { destination: String },
    /// The wrapper leaves it to the hook, for this reason.
    Hook { why: String },
    /// Every executor leaves it alone.
    None { why: String, warn: bool },
}

/// [`Route`] of each temp target of `plan` in `rootfs`, as the spec
/// executor would judge it (docs/design.md#landing); nothing is created or
/// changed. `temp_to_hook`: why the wrapper would hand them to the hook.
///
/// # Errors
/// A rootfs that cannot be opened.
pub(crate) fn routes(
    rootfs: &Path,
    plan: &Plan,
    temp_to_hook: Option<&str>,
) -> Result<Vec<(String, Route)>, ApplyError> {
    let root = Root::open(rootfs)?;
    let landings = landing::landings(&mut root.tree(), &plan.spec_mounts);
    let nested = !crate::spec::expressible(plan);
    let mut out = Vec::new();
    for action in &plan.actions {
        let Action::MountTmpfs { target, .. } = action else { continue };
        let route = match root.judge_target(target, &landings) {
            Err(note) => Route::None { why: note.reason, warn: note.warn },
            Ok(_) if nested => Route::Hook {
                why: "a temp dir nested in another one needs a directory in the fresh tmpfs".into(),
            },
            Ok(_) if temp_to_hook.is_some() => Route::Hook { why: temp_to_hook.unwrap_or_default().into() },
            Ok(real) => Route::Spec { destination: real.to_string() },
        };
        out.push((target.to_string(), route));
    }
    Ok(out)
}

/// Gives the directory `fd` (an `O_PATH` fd, chmod'ed through its
/// `/proc/self/fd` link) `mode` when it has another; whether it did.
fn set_mode(fd: &OwnedFd, mode: u32, what: &str) -> Result<bool, ApplyError> {
    let st = rustix::fs::fstat(fd).map_err(|e| ApplyError::sys(Call::Stat, "reading", what, e))?;
    if st.st_mode & 0o7777 == mode {
        return Ok(false);
    }
    let link = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(fd));
    match rustix::fs::chmod(link.as_str(), Mode::from_raw_mode(mode)) {
        Ok(()) => Ok(true),
        // A rootfs we may not change: the tmpfs keeps the directory's mode.
        Err(rustix::io::Errno::ROFS | rustix::io::Errno::PERM | rustix::io::Errno::ACCESS) => Ok(false),
        Err(e) => Err(ApplyError::sys(Call::Fchmod, "setting the mode of the mountpoint", what, e)),
    }
}

/// Grows the engine-made tmpfs at `source` on the host to `size`, never
/// shrinking it, once [`prove_engine_shm`] holds for it.
///
/// # Errors
/// The kernel refused the resize; what is not a growable engine shm is a note.
pub(crate) fn grow_shm(source: &Path, size: Bytes, ids: &[&str]) -> Result<Result<Done, Note>, ApplyError> {
    let shown = source.display().to_string();
    let fd = match prove_engine_shm(&shown, ids)? {
        Ok((fd, _)) => fd,
        Err(note) => return Ok(Err(note)),
    };
    let Some(current) = mount::tmpfs_size(&fd, &shown)? else {
        return Ok(Err(shm_note(&shown, "its source is not a tmpfs".into(), true)));
    };
    if current >= size {
        let reason = format!("it already has {current}, not less than {size}; never shrunk");
        return Ok(Err(shm_note(&shown, reason, false)));
    }
    let fs = mount::resize(&fd, size, &shown)?;
    mount::reconfigure(&fs, &shown)?;
    Ok(Ok(Done::GrewShm { from: current, to: size, writable: false }))
}

fn shm_note(shown: &str, reason: String, warn: bool) -> Note {
    Note { subject: format!("{SHM_PATH} (from {shown})"), reason, warn }
}

/// Proves that the host path `source`, which the spec binds at `/dev/shm`,
/// is an engine's shm for this container (docs/design.md#engine-shm), so
/// that growing it grows no user's volume: it is absolute and normalised,
/// and opened component by component from `/` without following any
/// symlink; every directory above it is owned by root (or by whoever runs
/// this, a rootless engine's user) and closed to others (unless sticky, as
/// `/tmp`); it is named `shm` and one of its components is one of `ids`
/// (the container's id, its pod sandbox's id) or another container's id
/// (64 hex digits: Docker's `--ipc=container:`); it is the root of a mount,
/// and not the host's own `/dev/shm`. `Ok` is its `O_PATH` fd and device.
///
/// # Errors
/// `fstat`/`statx` failing on what was opened.
pub(crate) fn prove_engine_shm(
    source: &str,
    ids: &[&str],
) -> Result<Result<(OwnedFd, u64), Note>, ApplyError> {
    let note = |reason: String, warn| Ok(Err(shm_note(source, reason, warn)));
    let host = rustix::fs::stat(SHM_PATH).ok().map(|s| s.st_dev);
    let fd = match open_trusted(source) {
        Ok(fd) => fd,
        Err(reason) => return note(reason, true),
    };
    let st = rustix::fs::fstat(&fd).map_err(|e| ApplyError::sys(Call::Stat, "reading", source, e))?;
    if Some(st.st_dev) == host {
        return note("it is the host's own /dev/shm (host IPC); never resized".into(), false);
    }
    let parts: Vec<&str> = source.split('/').filter(|p| !p.is_empty()).collect();
    let an_id = |p: &&str| ids.contains(p) || (p.len() == 64 && p.bytes().all(|b| b.is_ascii_hexdigit()));
    if parts.last() != Some(&"shm") || !parts.iter().any(an_id) {
        let ids = if ids.is_empty() { "none known".to_string() } else { ids.join(", ") };
        return note(
            format!("its source is not named .../<container or pod id>/.../shm (this container's ids: {ids}): not the engine's shm, and a volume at /dev/shm wins"),
            true,
        );
    }
    if !system::is_mount_root(&fd)? {
        return note("its source is not the root of a mount".into(), true);
    }
    Ok(Ok((fd, st.st_dev)))
}

/// Opens the absolute, normalised `path` as an `O_PATH` directory, one
/// component at a time from `/` (`openat2` `RESOLVE_NO_SYMLINKS |
/// RESOLVE_BENEATH` from each parent), checking that every parent is owned
/// by root (or by this process's user) and not writable by group or others
/// unless sticky. `Err` is why
/// not, for a note.
fn open_trusted(path: &str) -> Result<OwnedFd, String> {
    if !path.starts_with('/') || crate::target::normalise(path) != path || path.split('/').any(|p| p == "..")
    {
        return Err("its source is not a normalised absolute path".into());
    }
    let dir = OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let mut fd = rustix::fs::open("/", dir, Mode::empty()).map_err(|e| format!("opening /: {e}"))?;
    let mut at = String::new();
    for part in path.split('/').filter(|p| !p.is_empty()) {
        let st = rustix::fs::fstat(&fd).map_err(|e| format!("reading {at}/: {e}"))?;
        let open_to_others = st.st_mode & 0o022 != 0 && st.st_mode & 0o1000 == 0;
        let owner_ok = st.st_uid == 0 || st.st_uid == rustix::process::geteuid().as_raw();
        if !owner_ok || open_to_others {
            return Err(format!(
                "its parent {}/ is not owned by root and closed to others (uid {}, mode {:o}): not a trusted engine path",
                at,
                st.st_uid,
                st.st_mode & 0o7777
            ));
        }
        at.push('/');
        at.push_str(part);
        let flags = ResolveFlags::NO_SYMLINKS | ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS;
        fd = rustix::fs::openat2(&fd, part, dir, Mode::empty(), flags).map_err(|e| {
            format!("its source cannot be opened as a directory without following a symlink ({at}: {e})")
        })?;
    }
    Ok(fd)
}
