//! `oci-tmpfs-hook doctor`: print one line per check, exit 0 when all is well.

use std::path::PathBuf;
use std::process::ExitCode;

use crate::cli::{self, DoctorArgs};
use crate::doctor::{self, Context};

/// Runs `doctor`. A problem found is exit 1, not an error.
///
/// # Errors
/// This binary cannot be found.
pub fn run(args: &DoctorArgs) -> Result<ExitCode, super::Error> {
    let binary = super::this_binary()?;
    let root = args.root.clone().unwrap_or_else(|| PathBuf::from("/"));
    let (config, config_explicit) = args.config.resolve(&root);
    let search_path = cli::search_path(args.root.as_deref());
    let ctx = Context { root, binary, config, config_explicit, search_path };
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
        Ok(ExitCode::from(super::EXIT_FAILED))
    }
}
