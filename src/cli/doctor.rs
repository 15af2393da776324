//! `oci-tmpfs-hook doctor`: print one line per check, exit 0 when all is well.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use super::HostConfigArg;
use crate::engine::check::Context;
use crate::engine::doctor;
use crate::error::{Error, EXIT_FAILED};

#[derive(Clone, Debug, Args)]
pub(crate) struct DoctorArgs {
    #[command(flatten)]
    pub config: HostConfigArg,
    /// Look for engine configs (and the default host config) under DIR;
    /// engines are then detected by their config files only.
    #[arg(long, value_name = "DIR")]
    pub root: Option<PathBuf>,
}

/// Runs `doctor`. A problem found is exit 1, not an error.
///
/// # Errors
/// This binary cannot be found.
pub(crate) fn run(args: &DoctorArgs) -> Result<ExitCode, Error> {
    let binary = crate::files::this_binary()?;
    let root = args.root.clone().unwrap_or_else(|| PathBuf::from("/"));
    let config = args.config.source(&root);
    let search_path = super::search_path(args.root.as_deref());
    let ctx = Context { root, binary, config, search_path };
    let checks = doctor::run_all(&ctx);
    for c in &checks {
        println!("{}", c.line());
    }
    let problems = checks.iter().filter(|c| !c.ok).count();
    if problems == 0 {
        println!("all well");
        Ok(ExitCode::SUCCESS)
    } else {
        println!("{problems} problem(s)");
        Ok(ExitCode::from(EXIT_FAILED))
    }
}
