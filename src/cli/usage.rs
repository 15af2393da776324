//! `oci-tmpfs-hook usage`: how full each running container's tmpfs of
//! ours and its `/dev/shm` are, as a table (fullest first), JSON or
//! Prometheus text; a warning on stderr for each target past 90%. Reads
//! only; run as root on the host.

use std::process::ExitCode;

use clap::Args;

use crate::error::Error;
use crate::usage::{render, STATE_ROOTS};

#[derive(Clone, Debug, Args)]
pub(crate) struct UsageArgs {
    /// Print JSON: a list of {id, name, pid, memory_limit_bytes,
    /// shmem_bytes, targets: [{path, size_bytes, used_bytes}]}.
    #[arg(long, conflicts_with = "prometheus")]
    pub json: bool,
    /// Print the Prometheus text exposition format (for node-exporter's
    /// textfile collector).
    #[arg(long)]
    pub prometheus: bool,
    /// A runtime state directory to read instead of the defaults (a
    /// runtime's `--root`, one directory per container; a path component
    /// may hold one `*`); repeatable [default: /run/runc, /run/crun,
    /// /run/docker/runtime-*/moby, /run/containerd/runc/*].
    #[arg(long, value_name = "DIR", value_parser = super::absolute_path)]
    pub state_dir: Vec<std::path::PathBuf>,
}

/// Runs `usage`.
///
/// # Errors
/// The host's procfs cannot be opened or read.
pub(crate) fn run(args: &UsageArgs) -> Result<ExitCode, Error> {
    let given: Vec<String> = args.state_dir.iter().map(|d| d.display().to_string()).collect();
    let roots: Vec<&str> =
        if given.is_empty() { STATE_ROOTS.to_vec() } else { given.iter().map(String::as_str).collect() };
    let containers = crate::sys::usage::read_all(&roots)?;
    for line in render::warnings(&containers) {
        log::warn!("{line}");
    }
    let out = if args.json {
        render::json(&containers)
    } else if args.prometheus {
        render::prometheus(&containers)
    } else {
        render::text(&containers)
    };
    std::io::Write::write_all(&mut std::io::stdout(), out.as_bytes())?;
    Ok(ExitCode::SUCCESS)
}
