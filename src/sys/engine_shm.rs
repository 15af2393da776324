//! An engine-made `/dev/shm` (Docker's per-container shm, a CRI pod's shm)
//! bound into the container: proven to be the engine's on the host, by fd,
//! before anything grows it (docs/design.md#engine-shm), and grown there by
//! the spec executor ([`grow`]); the hook proves it before joining the
//! container and grows it inside (`crate::hook::System`). The never-shrink rule
//! both follow is [`super::mount::growth`]. Which `/dev/shm` the plan grows
//! is the plan's.

use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::path::Path;

use rustix::fs::{Mode, OFlags, ResolveFlags};

use super::error::{SysError, Syscall};
use super::mount::{self, Done};
use crate::plan::{Note, SHM_PATH};
use crate::size::Bytes;

/// The ids an engine shm's path may name: the container's (when known) and
/// its pod sandbox's (annotation `io.kubernetes.cri.sandbox-id`, from the
/// spec, else the state).
pub(crate) fn container_ids<'a>(
    id: Option<&'a str>,
    spec: &'a crate::oci::Spec,
    state_annotations: Option<&'a HashMap<String, String>>,
) -> Vec<&'a str> {
    let sandbox = spec
        .annotations()
        .as_ref()
        .or(state_annotations)
        .and_then(|a| a.get(crate::names::CRI_SANDBOX_ID))
        .map(String::as_str);
    id.into_iter().chain(sandbox).collect()
}

/// Grows the engine-made tmpfs at `source` on the host to `size`, never
/// shrinking it, once [`prove`] holds for it.
///
/// # Errors
/// The kernel refused the resize; what is not a growable engine shm is a note.
pub(crate) fn grow(source: &Path, size: Bytes, ids: &[&str]) -> Result<Result<Done, Note>, SysError> {
    let shown = source.display().to_string();
    let fd = match prove(&shown, ids)? {
        Ok((fd, _)) => fd,
        Err(note) => return Ok(Err(note)),
    };
    let Some(current) = mount::tmpfs_size(&fd, &shown)? else {
        return Ok(Err(shm_note(&shown, "its source is not a tmpfs".into(), true)));
    };
    if let Err(reason) = mount::growth(current, size) {
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
pub(crate) fn prove(source: &str, ids: &[&str]) -> Result<Result<(OwnedFd, u64), Note>, SysError> {
    let note = |reason: String, warn| Ok(Err(shm_note(source, reason, warn)));
    let host = rustix::fs::stat(SHM_PATH).ok().map(|s| s.st_dev);
    let fd = match open_trusted(source) {
        Ok(fd) => fd,
        Err(reason) => return note(reason, true),
    };
    let st = rustix::fs::fstat(&fd).map_err(|e| SysError::sys(Syscall::Fstat, "reading", source, e))?;
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
    if !mount::is_mount_root(&fd)? {
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
