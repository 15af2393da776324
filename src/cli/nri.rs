//! `oci-tmpfs-hook nri`: the NRI plugin ([`crate::nri`]). Reads the host
//! config once to fail fast on a bad one ([`crate::nri::Policy`]), puts its
//! binary and host config into `--hook-dir` (when given) before it
//! registers, so that no adjustment names a hook the node lacks, then runs
//! the stub ([`crate::nri::stub::run`]: the runtime's socket, or the
//! connection a runtime handed it). With `--probe`, it only reads
//! `--status-file` and says whether the running plugin is registered now
//! (the DaemonSet's probes). With `--metrics-address`, it serves Prometheus
//! metrics ([`crate::nri::metrics`]) before it registers. SIGTERM or SIGINT
//! stops it ([`crate::nri::stub::Stop`]): the requests in flight answered,
//! the NRI connection closed, exit 0, within a second.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;

use super::{absolute_path, HostConfigArg};
use crate::error::Error;
use crate::nri::hook_copy::HookDir;
use crate::nri::stub::{self, Identity, Status, Stop};
use crate::nri::{self, Policy};
use crate::process::termination::Termination;

/// The longest a stop may take before the process exits anyway: a request
/// that does not end, or a stop during the copy into --hook-dir (atomic,
/// so never half done).
const STOP_LIMIT: Duration = Duration::from_millis(900);

#[derive(Clone, Debug, Args)]
pub(crate) struct NriArgs {
    /// The runtime's NRI socket.
    #[arg(long, value_name = "PATH", default_value = crate::nri::DEFAULT_SOCKET)]
    pub socket: PathBuf,
    /// The plugin's name, as the runtime lists it: letters, digits and
    /// `_ . + -` only (containerd 2.3 and later refuse anything else).
    #[arg(long, default_value = crate::names::NRI_NAME)]
    pub name: String,
    /// The plugin's index: two digits, its place among the runtime's plugins
    /// (late, so that it sees the mounts other plugins add).
    #[arg(long, default_value = crate::names::NRI_IDX)]
    pub idx: String,
    /// The node's directory for the hook, as the runtime sees it: the
    /// plugin copies its own binary and host config there (when they
    /// differ) and each adjustment names DIR/oci-tmpfs-hook with --config
    /// DIR/config.toml. Without it (a plugin on the node itself), the
    /// adjustment names this binary and --config as given.
    #[arg(long, value_name = "DIR", value_parser = absolute_path)]
    pub hook_dir: Option<PathBuf>,
    /// Where the plugin sees --hook-dir (its hostPath mount in a pod, e.g.
    /// /host/opt/oci-tmpfs-hook) [default: --hook-dir].
    #[arg(long, value_name = "DIR", requires = "hook_dir")]
    pub hook_dir_mount: Option<PathBuf>,
    /// No longer used (the hook grows the pod's /dev/shm): accepted so that
    /// an older DaemonSet's args still start.
    #[arg(long, value_name = "DIR", hide = true)]
    pub host_root: Option<PathBuf>,
    /// A file the plugin keeps while it is registered with the runtime:
    /// written at each registration, removed when the connection ends.
    #[arg(long, value_name = "PATH")]
    pub status_file: Option<PathBuf>,
    /// Do not run: exit 0 when the plugin that keeps --status-file is
    /// registered with the runtime now, else 1 (liveness and readiness).
    #[arg(long, requires = "status_file")]
    pub probe: bool,
    /// Where the node's cgroupfs is, for the per-container series of
    /// --metrics-address (in a pod: a read-only hostPath of
    /// /sys/fs/cgroup, e.g. /host/sys/fs/cgroup).
    #[arg(long, value_name = "DIR", default_value = "/sys/fs/cgroup", value_parser = absolute_path)]
    pub cgroup_root: PathBuf,
    /// Serve Prometheus metrics at http://HOST:PORT/metrics (off by
    /// default; port 0: one the kernel picks, logged at start).
    #[arg(long, value_name = "HOST:PORT", conflicts_with = "probe")]
    pub metrics_address: Option<String>,
    #[command(flatten)]
    pub config: HostConfigArg,
}

/// Runs the plugin.
///
/// # Errors
/// A bad index or host config; a pre-registered connection that ended.
pub(crate) fn run(args: &NriArgs) -> Result<ExitCode, Error> {
    let status = Status(args.status_file.clone());
    if args.probe {
        return probe(status.0.as_deref().unwrap_or(Path::new("")));
    }
    // First: as PID 1 of its container the plugin would ignore SIGTERM
    // without a handler, and a pod's deletion would end in SIGKILL.
    let stop = Arc::new(Stop::default());
    let stopping = Arc::clone(&stop);
    let status_file = status.clone();
    Termination::catch()?.then(move || {
        log::info!(
            "nri: SIGTERM or SIGINT: answering the requests in flight, then closing the NRI connection"
        );
        stopping.request();
        std::thread::sleep(STOP_LIMIT);
        log::warn!("nri: still stopping {STOP_LIMIT:?} after the signal; exiting now");
        let _ = status_file.clear();
        std::process::exit(0);
    })?;
    if let (Some(path), Err(e)) = (&status.0, status.clear()) {
        return Err(format!("--status-file {}: removing the old one: {e}", path.display()).into());
    }
    let source = args.config.source(Path::new("/"));
    let dir = args.hook_dir.as_ref().map(|node| HookDir {
        node: node.clone(),
        mount: args.hook_dir_mount.clone().unwrap_or_else(|| node.clone()),
    });
    let policy = Arc::new(Policy::new(source, dir)?);
    nri::policy::apply_logging(&policy.host_config(), &crate::host_config::HostConfig::default());
    if args.host_root.is_some() {
        log::warn!("nri: --host-root is no longer used (the hook grows the pod's /dev/shm); ignored");
    }
    if let Some(addr) = &args.metrics_address {
        // Only here: nothing of the metrics exists without the flag.
        let bound = nri::metrics::serve(addr, &policy.config_text(), &args.cgroup_root)?;
        log::info!("nri: metrics at http://{bound}/metrics");
    }
    for wrote in policy.copy_hook()? {
        log::info!("nri: wrote {wrote}");
    }
    log::info!(
        "nri: the adjustments name the hook {}{}",
        policy.site().path.display(),
        policy.site().config.as_ref().map(|c| format!(" --config {}", c.display())).unwrap_or_default()
    );
    let asked = Identity { socket: args.socket.clone(), name: args.name.clone(), idx: args.idx.clone() };
    if !stop.requested() {
        stub::run(asked, &policy, &status, &stop)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// `nri --probe`: one line on stdout and 0 when registered; one line on
/// stderr and 1 when not.
fn probe(path: &Path) -> Result<ExitCode, Error> {
    match stub::probe(path) {
        Ok(line) => {
            println!("nri: {line}");
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => Ok(super::print_error(&e)),
    }
}
