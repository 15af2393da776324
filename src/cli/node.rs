//! `oci-tmpfs-hook node install|uninstall --host-root DIR`: the node
//! installer ([`crate::node`]), and its container mode: with `--wait` it
//! stays up after install until SIGTERM or SIGINT, and with
//! `--uninstall-on-exit` it uninstalls then (a DaemonSet's pod deleted).
//! It prints each line the installer says it does, as it does it.

use std::process::ExitCode;

use std::path::PathBuf;

use clap::Args;

use crate::error::{Error, EXIT_USAGE};
use crate::node::{self, NodeAction, Options, RestartMode};
use crate::process::termination::Termination;

/// `node install` / `node uninstall`.
#[derive(Clone, Debug, Args)]
pub(crate) struct NodeArgs {
    /// install or uninstall.
    #[arg(value_enum)]
    pub action: NodeAction,
    /// The host's root as this container sees it (hostPath / mounted at /host).
    #[arg(long, value_name = "DIR")]
    pub host_root: PathBuf,
    /// How a runtime whose config changed is restarted: systemd (the host's
    /// `systemctl restart`, needs hostPID) or none (print what to restart).
    #[arg(long, value_enum, default_value_t = RestartMode::Systemd)]
    pub restart_mode: RestartMode,
    /// Where the binary and the wrapper go on the host.
    #[arg(long, value_name = "DIR", default_value = "/usr/local/bin", value_parser = super::absolute_path)]
    pub bin_dir: PathBuf,
    /// After install, wait for SIGTERM or SIGINT (a DaemonSet's container).
    #[arg(long)]
    pub wait: bool,
    /// With --wait: uninstall when the signal comes (pod deleted).
    #[arg(long, requires = "wait")]
    pub uninstall_on_exit: bool,
    /// Pre-register the NRI plugin (/opt/nri/plugins/90-oci-tmpfs-hook and
    /// /etc/nri/conf.d/oci-tmpfs-hook.conf, started by the runtime at its
    /// start) instead of registering the runtime handler or hooks file.
    #[arg(long)]
    pub nri: bool,
    /// The unit restarted by the internal restart-unit action.
    #[arg(long, hide = true, value_name = "UNIT")]
    pub unit: Option<String>,
}

impl NodeArgs {
    /// The library's request for `action`.
    fn options(&self, action: NodeAction) -> Options {
        Options {
            action,
            host_root: self.host_root.clone(),
            restart_mode: self.restart_mode,
            bin_dir: self.bin_dir.clone(),
            unit: self.unit.clone(),
            nri: self.nri,
        }
    }
}

/// Runs `node`.
///
/// # Errors
/// What [`node::run`] fails with; a signal handler that cannot be set.
pub(crate) fn run(args: &NodeArgs) -> Result<ExitCode, Error> {
    // Before the install: a SIGTERM during it is then not lost (as pid 1 of
    // its container, this process would otherwise ignore SIGTERM).
    let signals = if args.wait { Some(Termination::catch()?) } else { None };
    match node::run(&args.options(args.action), &mut print) {
        // A host root that is our own root is a wrong flag: a usage error.
        Err(e @ node::NodeError::OwnRoot(_)) => {
            super::print_error(&e);
            return Ok(ExitCode::from(EXIT_USAGE));
        }
        done => done?,
    }
    let Some(signals) = signals else { return Ok(ExitCode::SUCCESS) };
    let then = if args.uninstall_on_exit { "; uninstalling then" } else { "" };
    println!("node: waiting for SIGTERM{then}");
    signals.wait()?;
    if args.uninstall_on_exit {
        println!("node: signal received: uninstalling");
        node::run(&args.options(NodeAction::Uninstall), &mut print)?;
    } else {
        println!("node: signal received: exiting, the installation stays");
    }
    Ok(ExitCode::SUCCESS)
}

/// The library's sink for what `node` does: each line printed as it comes.
fn print(line: &str) {
    println!("{line}");
}
