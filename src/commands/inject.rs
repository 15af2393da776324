//! `oci-tmpfs-hook inject`: add the hook to a bundle for plain runc/crun, or
//! (`--mode spec`) write the plan's mounts into its `config.json` instead.

use std::path::Path;
use std::process::ExitCode;

use crate::bundle::{self, HookEntry};
use crate::cli::InjectArgs;
use crate::names::DEFAULT_CONFIG_PATH;
use crate::settings::Mode;
use crate::{input, spec_mode};

/// Runs `inject`.
///
/// # Errors
/// This binary cannot be found, or the bundle's `config.json` cannot be
/// read, understood or written.
pub fn run(args: &InjectArgs) -> Result<ExitCode, super::Error> {
    if args.mode == Mode::Spec {
        return in_spec(args);
    }
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

/// `inject --mode spec`: the plan's mounts written into config.json.
fn in_spec(args: &InjectArgs) -> Result<ExitCode, super::Error> {
    let settings = match &args.config {
        Some(p) => input::read_settings(p, true)?,
        None => input::read_settings(Path::new(DEFAULT_CONFIG_PATH), false)?,
    };
    let binary = match &args.hook_path {
        Some(p) => p.clone(),
        None => super::this_binary()?,
    };
    let entry = HookEntry::for_stage(&binary, args.stage, args.config.as_deref());
    // The runtime that will run the bundle: runc on PATH unless named.
    let own = crate::runtime::FileId::of(Path::new("/proc/self/exe")).ok();
    let runtime = args
        .runtime
        .clone()
        .or_else(|| crate::runtime::find_runtime(None, std::env::var_os("PATH").as_deref(), own?).ok());
    let unsafe_runtime = runtime.as_deref().and_then(super::runtime::spec_unsafe);
    let cx = spec_mode::Context { id: None, temp_to_hook: unsafe_runtime.as_deref() };
    let outcome = spec_mode::carry_out(&args.bundle, &settings, Some(&entry), &cx)?;
    for line in &outcome.done {
        println!("{line}");
    }
    for n in &outcome.notes {
        println!("{} left alone: {}", n.subject, n.reason);
    }
    if !outcome.changed {
        println!("{}: nothing to write", args.bundle.join("config.json").display());
    }
    Ok(ExitCode::SUCCESS)
}
