//! `oci-tmpfs-hook hook`: the hook itself ([`crate::hook`]), with the host
//! config's `on_error` policy.

use std::io;
use std::path::Path;
use std::process::ExitCode;

use clap::Args;

use super::ConfigArg;
use crate::error::{chain, Error};
use crate::settings::OnError;
use crate::stage::Stage;

#[derive(Clone, Debug, Args)]
pub(crate) struct HookArgs {
    /// The stage the hook is registered at. Without it the stage is
    /// inferred, and refused when it cannot be told safely.
    #[arg(long, value_parser = clap::value_parser!(Stage))]
    pub stage: Option<Stage>,
    #[command(flatten)]
    pub config: ConfigArg,
}

/// Runs the hook. With `on_error = "warn"` a failure after the host config
/// is read is logged and the hook exits 0.
///
/// # Errors
/// The host config cannot be used, or (`on_error = "fail"`) anything after.
pub(crate) fn run(args: &HookArgs) -> Result<ExitCode, Error> {
    let settings = args.config.source(Path::new("/")).read()?;
    crate::logger::configure(settings.log_level.filter(), settings.log_file.as_deref());
    match crate::hook::run(args.stage, &settings, io::stdin().lock()) {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(e) if settings.on_error == OnError::Warn => {
            log::warn!("{} (on_error = \"warn\": the container starts without these mounts)", chain(&e));
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => Err(e.into()),
    }
}
