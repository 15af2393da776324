//! Restarting the host's runtime after its config changed, with the host's
//! own `systemctl`. The node image is `scratch`: no `nsenter`, no `chroot`
//! binary, and the host's binaries need the host's libraries. So a child of
//! this binary (`node restart-unit`) joins pid 1's mount namespace with
//! setns(2) and execs `systemctl restart UNIT` there: the host's own root,
//! libraries and systemd sockets. nsenter(1)'s way, not chroot's: systemctl
//! under a chroot sees that its root differs from pid 1's and ignores the
//! request ("Running in chroot, ignoring command"). pid 1 has to be the
//! host's init, so the pod needs `hostPID: true`; this is checked first
//! (pid 1's root must be the `--host-root` directory) and refused otherwise,
//! so a container without hostPID can never restart anything by mistake.

use std::fs;
use std::io;
use std::os::fd::AsFd;
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::{Node, Options, RestartMode};
use crate::engine::Engine;
use crate::names::DEFAULT_PATH;

/// A restart that could not be done.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RestartError {
    #[error(
        "--restart-mode systemd: pid 1's root is not {host_root}, so pid 1 is not the host's init; \
         run the pod with hostPID: true, or use --restart-mode none and restart {unit} yourself"
    )]
    NotHostPid1 { host_root: PathBuf, unit: String },
    #[error("node restart-unit needs --unit UNIT (it is run by node install, not by hand)")]
    NoUnit,
    #[error("reading {path} for --restart-mode systemd; the pod needs hostPID: true and privileged")]
    Stat {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("joining pid 1's mount namespace (/proc/1/ns/mnt); the container must be privileged")]
    Setns(#[source] io::Error),
    #[error("running the host's systemctl restart {unit}")]
    Exec {
        unit: String,
        #[source]
        source: io::Error,
    },
    #[error("the host's systemctl restart {unit} failed ({status}); see journalctl -u {unit} on the host")]
    Failed { unit: String, status: std::process::ExitStatus },
}

/// The systemd unit of an engine's restart command (`systemctl restart UNIT`).
fn unit_of(engine: Engine) -> String {
    let cmd = engine.restart_command().unwrap_or("");
    cmd.rsplit(' ').next().unwrap_or("").to_string()
}

/// Restarts `engine` as `--restart-mode` says, and says what was done;
/// `why` says why it is restarted ("config changed"...).
///
/// # Errors
/// pid 1 is not the host's init, or the restart failed.
pub(crate) fn restart(node: &mut Node<'_>, engine: Engine, why: &str) -> Result<(), RestartError> {
    let unit = unit_of(engine);
    let cmd = format!("systemctl restart {unit}");
    match node.args.restart_mode {
        RestartMode::None => {
            node.say(format!(
                "{engine}: {why}; not restarted (--restart-mode none): run `{cmd}` on the host"
            ));
        }
        RestartMode::Systemd => {
            node.say(format!("{engine}: {why}; restarting: {cmd} (the host's, in pid 1's mount namespace)"));
            check_pid1(&node.args.host_root, &unit)?;
            let exec_err = |source| RestartError::Exec { unit: unit.clone(), source };
            let this = crate::files::this_binary().map_err(exec_err)?;
            let status = Command::new(this)
                .args(["node", "restart-unit", "--host-root"])
                .arg(&node.args.host_root)
                .args(["--unit", &unit])
                .status()
                .map_err(exec_err)?;
            if !status.success() {
                return Err(RestartError::Failed { unit, status });
            }
            node.say(format!("{engine}: restarted"));
        }
    }
    Ok(())
}

/// Refuses unless pid 1's root is the host root: hostPID, and the right host.
fn check_pid1(host_root: &Path, unit: &str) -> Result<(), RestartError> {
    let stat =
        |p: &Path| fs::metadata(p).map_err(|source| RestartError::Stat { path: p.to_path_buf(), source });
    let (pid1, host) = (stat(Path::new("/proc/1/root"))?, stat(host_root)?);
    if (pid1.dev(), pid1.ino()) != (host.dev(), host.ino()) {
        return Err(RestartError::NotHostPid1 { host_root: host_root.to_path_buf(), unit: unit.to_string() });
    }
    Ok(())
}

/// `node restart-unit`: joins pid 1's mount namespace and execs the host's
/// `systemctl restart UNIT`. Returns only on failure.
///
/// # Errors
/// pid 1 is not the host's init, setns or exec failed.
pub(crate) fn restart_unit(args: &Options) -> Result<std::convert::Infallible, RestartError> {
    let Some(unit) = args.unit.clone().filter(|u| !u.is_empty() && !u.starts_with('-')) else {
        return Err(RestartError::NoUnit);
    };
    check_pid1(&args.host_root, &unit)?;
    let ns = fs::File::open("/proc/1/ns/mnt").map_err(RestartError::Setns)?;
    rustix::thread::move_into_link_name_space(ns.as_fd(), Some(rustix::thread::LinkNameSpaceType::Mount))
        .map_err(|e| RestartError::Setns(e.into()))?;
    std::env::set_current_dir("/").map_err(RestartError::Setns)?;
    let source =
        Command::new("systemctl").env_clear().env("PATH", DEFAULT_PATH).args(["restart", &unit]).exec();
    Err(RestartError::Exec { unit, source })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units() {
        assert_eq!(unit_of(Engine::Containerd), "containerd");
    }

    #[test]
    fn a_fake_root_is_not_pid1s() {
        let dir = std::env::temp_dir();
        let err = check_pid1(&dir, "containerd").unwrap_err().to_string();
        assert!(err.contains("hostPID"), "{err}");
    }
}
