//! The spec executor's checks on the host, run by the wrapper before it
//! execs the runtime: each temp target against the prepared rootfs (the
//! same landing rules as in the container's namespace, by fd, with the
//! hook's resolver). The growth of an engine-made `/dev/shm` is the hook's
//! [`crate::hook::engine_shm`]. What to check comes from the plan; nothing
//! here decides sizes.

use std::os::fd::OwnedFd;
use std::path::Path;

use rustix::fs::Mode;

use crate::hook::resolve::Root;
use crate::hook::{ApplyError, Call};
use crate::landing;
use crate::plan::{Action, Note, Plan};

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

/// Where one temp target goes, read-only (for `explain`).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case", tag = "executor")]
pub(crate) enum Route {
    /// The spec executor writes a tmpfs entry at `destination`.
    Spec { destination: String },
    /// Our hook mounts it by fd, added at `stage`, for this reason.
    Hook { stage: String, why: String },
    /// Every executor leaves it alone.
    None { why: String, warn: bool },
}

/// [`Route`] of each temp target of `plan` in `rootfs`: the rootfs check's
/// verdict (docs/design.md#landing: a target refused there is refused by
/// the hook too), then `carrier`'s executor ([`super::route::carrier`]).
/// Nothing is created or changed.
///
/// # Errors
/// A rootfs that cannot be opened.
pub(crate) fn routes(
    rootfs: &Path,
    plan: &Plan,
    carrier: &super::route::Carrier,
) -> Result<Vec<(String, Route)>, ApplyError> {
    use super::route::Carrier;
    let root = Root::open(rootfs)?;
    let landings = landing::landings(&mut root.tree(), &plan.spec_mounts);
    let mut out = Vec::new();
    for action in &plan.actions {
        let Action::MountTmpfs { target, .. } = action else { continue };
        let route = match (root.judge_target(target, &landings), carrier) {
            (Err(note), _) => Route::None { why: note.reason, warn: note.warn },
            (Ok(_), Carrier::Hook { stage, why }) => {
                Route::Hook { stage: stage.to_string(), why: why.clone() }
            }
            (Ok(real), Carrier::Spec) => Route::Spec { destination: real.to_string() },
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
