//! `oci-tmpfs-hook inject`: add the hook to a bundle for plain runc/crun, or
//! (`--mode spec`) write the plan's mounts into its `config.json` instead.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;

use super::absolute_path;
use crate::error::Error;
use crate::host_config::Mode;
use crate::input::HostConfigSource;
use crate::spec;
use crate::spec::bundle::{self, HookEntry};
use crate::stage::Stage;

#[derive(Clone, Debug, Args)]
pub(crate) struct InjectArgs {
    /// The bundle directory (holds config.json).
    #[arg(long, short = 'b', value_name = "DIR")]
    pub bundle: PathBuf,
    /// The stage to register at.
    #[arg(long, default_value = "prestart", value_parser = clap::value_parser!(Stage))]
    pub stage: Stage,
    /// Path of the hook binary written into config.json [default: this binary].
    #[arg(long, value_name = "PATH", value_parser = absolute_path)]
    pub hook_path: Option<PathBuf>,
    /// Host config file the hook should read (passed as --config); with
    /// `--mode spec`, the one the plan is made from.
    #[arg(long, value_name = "PATH")]
    pub config: Option<PathBuf>,
    /// `hook`: add the hook; `spec`: write the plan's mounts into
    /// config.json now (the rootfs must be in place), no hook at the start.
    #[arg(long, value_enum, default_value = "hook")]
    pub mode: crate::host_config::Mode,
    /// With `--mode spec`: the runtime that will run the bundle [default:
    /// runc on PATH]. Temp targets go to the hook on runc before 1.1.8
    /// and crun 1.29.0, which change a tmpfs's mode after mounting it.
    #[arg(long, value_name = "PATH", value_parser = absolute_path)]
    pub runtime: Option<PathBuf>,
}

/// Runs `inject`.
///
/// # Errors
/// This binary cannot be found, or the bundle's `config.json` cannot be
/// read, understood or written.
pub(crate) fn run(args: &InjectArgs) -> Result<ExitCode, Error> {
    if args.mode == Mode::Spec {
        return in_spec(args);
    }
    let binary = match &args.hook_path {
        Some(p) => p.clone(),
        None => crate::files::this_binary()?,
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
fn in_spec(args: &InjectArgs) -> Result<ExitCode, Error> {
    let host_config = HostConfigSource::new(args.config.as_deref(), Path::new("/")).read()?;
    let binary = match &args.hook_path {
        Some(p) => p.clone(),
        None => crate::files::this_binary()?,
    };
    let entry = HookEntry::for_stage(&binary, args.stage, args.config.as_deref());
    let runtime = || crate::wrapper::real_runtime::bundle_verdict(args.runtime.as_deref(), &host_config);
    let launch = spec::Launch { id: None, runtime: &runtime };
    let outcome = spec::carry_out(&args.bundle, &host_config, Some(&entry), &launch)?;
    if let Some(home) = &outcome.home {
        println!("{home}");
    }
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
