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
    let report = apply::apply(&mut apply::System::default(), &plan, stage, state.pid, &rootfs)?;
    crate::logger::outcome(&report.notes, &report.done);
    Ok(())
}
