//! The spec executor, run on a bundle by the runtime wrapper (at `create`,
//! where the rootfs is prepared) and by `inject --mode spec`: plan from the
//! bundle's `config.json` ([`plan::plan_for`]), check every temp target
//! against the rootfs by fd ([`host`]), write the mounts into `config.json`
//! ([`edit`], pure), grow an engine-made `/dev/shm` on the host
//! ([`crate::hook::engine_shm::grow`]). A plan that needs a directory inside
//! a fresh tmpfs (`TMPDIR=/tmp/job`) gets the hook instead.

pub(crate) mod edit;
pub(crate) mod host;

use std::path::Path;

use crate::bundle::{self, BundleError, HookEntry};
use crate::hook::{engine_shm, ApplyError};
use crate::input;
use crate::plan;
use crate::settings::Settings;
use crate::stage::Stage;

/// What the edit did, for the caller to print or log.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Outcome {
    /// Whether `config.json` changed.
    pub changed: bool,
    /// One line per effect.
    pub done: Vec<String>,
    /// What was left alone.
    pub notes: Vec<plan::Note>,
    /// The plan needs the hook, which was added instead.
    pub hooked: bool,
}

/// What can stop the spec executor.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SpecError {
    #[error(transparent)]
    Bundle(#[from] BundleError),
    #[error("config.json is not an OCI spec")]
    Spec(#[source] serde_json::Error),
    #[error(transparent)]
    Input(#[from] input::InputError),
    #[error(transparent)]
    Plan(#[from] plan::PlanError),
    #[error(transparent)]
    Apply(#[from] ApplyError),
    #[error(transparent)]
    Shape(#[from] edit::ShapeError),
}

/// What the wrapper knows of the call and the runtime, besides the bundle.
#[derive(Debug, Default)]
pub(crate) struct Launch<'a> {
    /// The container's id, from the runtime's arguments.
    pub id: Option<&'a str>,
    /// Why the real runtime cannot be trusted with our temp-target mounts
    /// (docs/design.md#runtimes), when it cannot: the hook carries them.
    pub temp_to_hook: Option<&'a str>,
}

/// Carries out the plan for the bundle `dir` in its `config.json`. `hook`
/// is the entry added when the plan needs the hook (none: left alone).
///
/// # Errors
/// The bundle cannot be read or written ([`SpecError::Bundle`]), or planning,
/// the rootfs check or the shm growth failed.
pub(crate) fn carry_out(
    dir: &Path,
    settings: &Settings,
    hook: Option<&HookEntry>,
    cx: &Launch<'_>,
) -> Result<Outcome, SpecError> {
    let mut outcome = Outcome::default();
    outcome.changed = bundle::edit(dir, |config| in_spec(config, dir, settings, hook, cx, &mut outcome))?;
    Ok(outcome)
}

/// Why the plan's temp targets go to the hook, if they do: a temp dir
/// nested in another one, or a runtime that cannot be trusted with them
/// (`temp_to_hook`, docs/design.md#runtimes).
pub(super) fn needs_hook(plan: &plan::Plan, temp_to_hook: Option<&str>) -> Option<String> {
    let temp = plan.actions.iter().any(|a| matches!(a, plan::Action::MountTmpfs { .. }));
    if !edit::expressible(plan) {
        return Some("a temp dir nested in another one needs a directory in the fresh tmpfs".into());
    }
    temp_to_hook.filter(|_| temp).map(String::from)
}

/// The spec executor on one `config.json` value; returns whether it changed.
fn in_spec(
    config: &mut bundle::Config<'_>,
    dir: &Path,
    settings: &Settings,
    hook: Option<&HookEntry>,
    cx: &Launch<'_>,
    out: &mut Outcome,
) -> Result<bool, SpecError> {
    // The plan's view straight from the bytes; the JSON tree only when
    // there is something to write (docs/design.md#start-up).
    let parsed: crate::oci::Spec = match serde_json::from_slice(config.bytes) {
        Ok(spec) => spec,
        Err(e) => {
            config.tree(&[])?; // not a JSON object: the bundle's error
            return Err(SpecError::Spec(e));
        }
    };
    let host = input::host_facts()?;
    let plan = plan::plan_for(&parsed, None, settings, host)?;
    log::debug!("{}", plan.why);
    crate::logger::decision(&plan);
    if plan.actions.is_empty() {
        return Ok(false);
    }
    let path = config.path.to_path_buf();
    let mut changed = false;
    let placed = match needs_hook(&plan, cx.temp_to_hook) {
        Some(why) => {
            let Some(entry) = hook else { return Ok(false) };
            out.hooked = true;
            out.done.push(format!("the hook carries the temp targets: {why}; added the hook"));
            changed |= bundle::add_hook(config.tree(&["hooks"])?, Stage::Prestart, entry)
                .map_err(|what| BundleError::Shape { path: path.clone(), what })?;
            host::Placed::default()
        }
        None => {
            let rootfs = input::rootfs_path(&parsed, dir).expect("a plan with actions has a root.path");
            host::place_targets(&rootfs, &plan)?
        }
    };
    let edit = edit::put_mounts(config.tree(&["mounts"])?, &plan, |t| placed.destination(t), host.ram)?;
    for (target, dest) in &placed.placed {
        let at = if target == dest { String::new() } else { format!(" at {dest}, where {target} resolves") };
        out.done.push(format!("wrote a tmpfs mount for {target}{at} into the spec"));
    }
    if edit.writable {
        out.done.push("made the spec's read-only /dev/shm writable".into());
    }
    if let Some((from, to)) = edit.raised {
        let from = from.map_or_else(|| "unsized".to_string(), |b| b.approx());
        out.done.push(format!("raised the spec's /dev/shm from {from} to {}", to.approx()));
    }
    out.done
        .extend(placed.chmodded.iter().map(|t| format!("made the mountpoint {t} mode 1777 for the runtime")));
    out.notes.extend(placed.refused.into_iter().map(|(_, n)| n));
    if let Some((source, tmpfs)) = &edit.host_shm {
        let ids = engine_shm::container_ids(cx.id, &parsed, None);
        match engine_shm::grow(Path::new(source), tmpfs.size.bytes, &ids)? {
            Ok(grew) => out.done.push(format!("{grew} (on the host, {source})")),
            Err(note) => out.notes.push(note),
        }
    }
    Ok(changed || !edit.added.is_empty() || edit.raised.is_some() || edit.writable)
}
