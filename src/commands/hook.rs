//! `oci-tmpfs-hook hook`: the hook itself.

use std::io;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::apply;
use crate::cli::HookArgs;
use crate::input::{self, InputError};
use crate::plan::{self, Inputs, PlanError};
use crate::settings::{OnError, Settings};
use crate::stage::Stage;

/// Everything that can stop the hook after the host config is read.
#[derive(Debug, thiserror::Error)]
pub enum HookError {
    #[error(transparent)]
    Input(#[from] InputError),
    #[error(transparent)]
    Plan(#[from] PlanError),
    #[error(transparent)]
    Apply(#[from] apply::ApplyError),
    #[error("config.json in {0} has no usable root.path")]
    NoRootfs(PathBuf),
}

/// Runs the hook. With `on_error = "warn"` a failure after the host config
/// is read is logged and the hook exits 0.
///
/// # Errors
/// The host config cannot be used, or (`on_error = "fail"`) anything after.
pub fn run(args: &HookArgs) -> Result<ExitCode, super::Error> {
    let stage = args.stage;
    let (path, explicit) = args.config.resolve(Path::new("/"));
    let settings = input::read_settings(&path, explicit)?;
    crate::logger::configure(settings.log_level.filter(), settings.log_file.as_deref());
    match execute(stage, &settings, io::stdin().lock()) {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(e) if settings.on_error == OnError::Warn => {
            log::warn!(
                "{} (on_error = \"warn\": the container starts without these mounts)",
                super::chain(&e)
            );
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => Err(e.into()),
    }
}

fn execute(stage: Option<Stage>, settings: &Settings, stdin: impl io::Read) -> Result<(), HookError> {
    let state = input::read_state(stdin)?;
    crate::logger::set_container(&state.id);
    if stage == Some(Stage::StartContainer) {
        return Err(apply::ApplyError::TooLate.into());
    }
    let spec = input::read_spec(&state.bundle)?;
    let host_ram = input::host_ram()?;
    let plan = plan::decide(&Inputs {
        spec: &spec,
        state_annotations: state.annotations.as_ref(),
        settings,
        host_ram,
    })?;
    log::debug!("{}", plan.why);
    crate::logger::plan(&plan);
    if !plan.enabled || plan.actions.is_empty() {
        return Ok(());
    }
    let stage = match stage {
        Some(s) => s,
        None => apply::detect_stage(state.pid)?,
    };
    let rootfs =
        input::rootfs_path(&spec, &state.bundle).ok_or_else(|| HookError::NoRootfs(state.bundle.clone()))?;
    let engine_shm = engine_shm(&plan, &state.id, &spec, state.annotations.as_ref())?;
    let report = apply::apply(&mut apply::System::new(engine_shm), &plan, stage, state.pid, &rootfs)?;
    crate::logger::outcome(&report.notes, &report.done);
    Ok(())
}

/// For a `/dev/shm` the spec binds from the host and the plan grows: whether
/// that source is the engine's shm for this container, proven on the host
/// before the hook joins the container (docs/design.md#engine-shm): a
/// user's volume at `/dev/shm` is never grown.
fn engine_shm(
    plan: &plan::Plan,
    id: &str,
    spec: &oci_spec::runtime::Spec,
    state_annotations: Option<&std::collections::HashMap<String, String>>,
) -> Result<Option<Result<u64, plan::Note>>, HookError> {
    let source = plan.actions.iter().find_map(|a| match a {
        plan::Action::Shm { existing: plan::ShmSource::Bind { source }, way: plan::ShmWay::Grow, .. } => {
            Some(source.as_str())
        }
        _ => None,
    });
    let Some(source) = source else { return Ok(None) };
    let sandbox = spec
        .annotations()
        .as_ref()
        .or(state_annotations)
        .and_then(|a| a.get(crate::names::CRI_SANDBOX_ID))
        .map(String::as_str);
    let ids: Vec<&str> = std::iter::once(id).chain(sandbox).collect();
    Ok(Some(apply::host::prove_engine_shm(source, &ids)?.map(|(_, dev)| dev)))
}
