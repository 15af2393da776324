//! `oci-tmpfs-hook inject`: add the hook to a bundle for plain runc/crun.

use std::process::ExitCode;

use crate::bundle::{self, HookEntry};
use crate::cli::InjectArgs;

/// Runs `inject`.
///
/// # Errors
/// This binary cannot be found, or the bundle's `config.json` cannot be
/// read, understood or written.
pub fn run(args: &InjectArgs) -> Result<ExitCode, super::Error> {
    let binary = match &args.hook_path {
        Some(p) => p.clone(),
        None => super::this_binary()?,
    };
    let entry = HookEntry::for_stage(&binary, args.stage, args.config.as_deref());
    let config = args.bundle.join("config.json");
    if bundle::inject(&args.bundle, args.stage, &entry)? {
        println!("added {} at {} to {}", binary.display(), args.stage, config.display());
    } else {
        println!("{} already runs {}; unchanged", config.display(), binary.display());
    }
    Ok(ExitCode::SUCCESS)
}
