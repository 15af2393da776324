//! The spec executor run on a bundle, for the runtime wrapper (at `create`,
//! where the rootfs is prepared) and for `inject --mode spec`: plan from the
//! bundle's `config.json`, check every temp target against the rootfs by fd
//! (`apply::host`), write the mounts into `config.json` (`spec`), grow an
//! engine-made `/dev/shm` on the host. A plan that needs a directory inside a
//! fresh tmpfs (`TMPDIR=/tmp/job`) gets the hook instead.

use std::path::Path;

use serde_json::Value;

use crate::bundle::{self, BundleError, HookEntry};
use crate::plan::{self, Inputs};
use crate::settings::Settings;
use crate::stage::Stage;
use crate::{apply, input, spec};

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
    Apply(#[from] apply::ApplyError),
    #[error(transparent)]
    Shape(#[from] spec::ShapeError),
    #[error("config.json has no usable root.path")]
    NoRootfs,
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
) -> Result<Outcome, SpecError> {
    let mut outcome = Outcome::default();
    outcome.changed =
        bundle::edit(dir, |config, path| in_spec(config, path, dir, settings, hook, &mut outcome))?;
    Ok(outcome)
}

/// The spec executor on one `config.json` value; returns whether it changed.
fn in_spec(
    config: &mut Value,
    path: &Path,
    dir: &Path,
    settings: &Settings,
    hook: Option<&HookEntry>,
    out: &mut Outcome,
) -> Result<bool, SpecError> {
    let parsed = serde_json::from_value(config.clone()).map_err(SpecError::Spec)?;
    let host_ram = input::host_ram()?;
    let plan = plan::decide(&Inputs { spec: &parsed, state_annotations: None, settings, host_ram })?;
    log::debug!("{}", plan.why);
    crate::logger::plan(&plan);
    if !plan.enabled || plan.actions.is_empty() {
        return Ok(false);
    }
    if !spec::expressible(&plan) {
        let Some(entry) = hook else { return Ok(false) };
        out.hooked = true;
        out.done.push(
            "a temp dir nested in another one needs a directory in the fresh tmpfs: added the hook".into(),
        );
        return bundle::add_hook(config, Stage::Prestart, entry)
            .map_err(|what| BundleError::Shape { path: path.to_path_buf(), what }.into());
    }
    let rootfs = input::rootfs_path(&parsed, dir).ok_or(SpecError::NoRootfs)?;
    let checked = apply::host::check_targets(&rootfs, &plan)?;
    let names: Vec<&str> = checked.refused.iter().map(|(t, _)| t.as_str()).collect();
    let edit = spec::edit(config, &plan, &names, host_ram)?;
    out.done.extend(edit.added.iter().map(|t| format!("wrote a tmpfs mount for {t} into the spec")));
    if edit.writable {
        out.done.push("made the spec's read-only /dev/shm writable".into());
    }
    if let Some((from, to)) = edit.raised {
        let from = from.map_or_else(|| "unsized".to_string(), |b| b.approx());
        out.done.push(format!("raised the spec's /dev/shm from {from} to {}", to.approx()));
    }
    out.done.extend(
        checked.chmodded.iter().map(|t| format!("made the mountpoint {t} mode 1777 for the runtime")),
    );
    out.notes.extend(checked.refused.into_iter().map(|(_, n)| n));
    if let Some((source, tmpfs)) = &edit.host_shm {
        match apply::host::grow_shm(Path::new(source), tmpfs.size.bytes)? {
            Ok(grew) => out.done.push(format!("{grew} (on the host, {source})")),
            Err(note) => out.notes.push(note),
        }
    }
    Ok(!edit.added.is_empty() || edit.raised.is_some() || edit.writable)
}
