//! `oci-tmpfs-hook node install|uninstall --host-root DIR`: the node
//! installer ([`crate::node`]), and its container mode: with `--wait` it
//! stays up after install until SIGTERM or SIGINT, and with
//! `--uninstall-on-exit` it uninstalls then (a DaemonSet's pod deleted).

use std::io::Read as _;
use std::os::unix::net::UnixStream;
use std::process::ExitCode;

use crate::node::{self, NodeAction, NodeArgs};

/// Runs `node`.
///
/// # Errors
/// What [`node::run`] fails with; a signal handler that cannot be set.
pub fn run(args: &NodeArgs) -> Result<ExitCode, super::Error> {
    // Before the install: a SIGTERM during it is then not lost (as pid 1 of
    // its container, this process would otherwise ignore SIGTERM).
    let signals = if args.wait { Some(signal_pipe()?) } else { None };
    node::run(args)?;
    let Some(mut pipe) = signals else { return Ok(ExitCode::SUCCESS) };
    let then = if args.uninstall_on_exit { "; uninstalling then" } else { "" };
    println!("node: waiting for SIGTERM{then}");
    let mut byte = [0u8; 1];
    pipe.read_exact(&mut byte)?;
    if args.uninstall_on_exit {
        println!("node: signal received: uninstalling");
        node::run(&NodeArgs { action: NodeAction::Uninstall, wait: false, ..args.clone() })?;
    } else {
        println!("node: signal received: exiting, the installation stays");
    }
    Ok(ExitCode::SUCCESS)
}

/// A socket that becomes readable when SIGTERM or SIGINT arrives.
fn signal_pipe() -> std::io::Result<UnixStream> {
    let (read, write) = UnixStream::pair()?;
    for sig in [libc::SIGTERM, libc::SIGINT] {
        signal_hook::low_level::pipe::register(sig, write.try_clone()?)?;
    }
    Ok(read)
}
