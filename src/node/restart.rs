//! When the host's runtime is restarted, and how.
//!
//! When: containerd reads its config only at start, so [`after_install`]
//! restarts it when its config changed, when a restart is pending from an
//! earlier run (kept in the state file until one succeeds), or when its CRI
//! ([`super::cri`]) says the running daemon lacks the handler, and then
//! waits for the restarted daemon's CRI to list the handler; a runtime
//! starts and stops its pre-registered plugins only with itself, so
//! `--nri` restarts it too, and so does [`after_uninstall`]. CRI-O is never
//! restarted ([`needs_restart`]): it watches its hooks dirs and loads a new
//! or removed hooks file itself. `--restart-mode none` restarts nothing and
//! says what to restart.
//!
//! How: with the host's own `systemctl`. The node image is `scratch`: no `nsenter`, no `chroot`
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

use super::{cri, state, Node, NodeError, Options, RestartMode, NODE_ENGINES};
use crate::engine::{containerd, Engine};
use crate::files;
use crate::names::{CONTAINERD_CONFIG, DEFAULT_PATH, RUNTIME_NAME};

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
            let this = files::this_binary().map_err(exec_err)?;
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

/// Whether a change of `engine`'s config takes a restart (containerd reads
/// it only at start; CRI-O watches its hooks dirs).
pub(super) fn needs_restart(engine: Engine) -> bool {
    engine.restart_command().is_some()
}

/// The pending-restart key of the pre-registered plugin: its runtime starts
/// it only at its own start.
pub(super) const PREREGISTERED: &str = "nri-plugin";

/// A runtime starts and stops its pre-registered plugins with itself
/// (`verb`: what the restart does to ours): containerd is restarted
/// (`--restart-mode systemd`); CRI-O, a runtime whose config is not found,
/// and `--restart-mode none` are told to the user. Whether containerd was
/// restarted.
fn preregistered_restart(node: &mut Node<'_>, verb: &str) -> Result<bool, NodeError> {
    let engines: Vec<Engine> =
        NODE_ENGINES.into_iter().filter(|e| e.detect(&node.args.host_root, false).is_some()).collect();
    let mut restarted = false;
    for engine in &engines {
        if *engine == Engine::Containerd && node.args.restart_mode == RestartMode::Systemd {
            restart(node, *engine, &format!("to {verb} the pre-registered NRI plugin"))?;
            restarted = true;
        } else {
            node.say(format!("{engine}: restart it to {verb} the pre-registered NRI plugin"));
        }
    }
    if engines.is_empty() {
        node.say(format!("node: restart the container runtime to {verb} the pre-registered NRI plugin"));
    }
    Ok(restarted)
}

/// After install: each registered engine that takes restarts is restarted
/// when its config changed now, when a restart is pending from an earlier
/// run, or when its CRI says the running daemon lacks the handler; a
/// daemon whose CRI lists the handler needs none
/// (docs/kubernetes.md#is-the-handler-loaded).
pub(super) fn after_install(node: &mut Node<'_>) -> Result<(), NodeError> {
    if node.state.pending(PREREGISTERED) {
        // Pending until a restart starts the plugin: a refused or failed one
        // is an error here, and the next run tries again.
        if preregistered_restart(node, "start")? {
            node.state.set_pending(PREREGISTERED, false);
            save_state(node)?;
        }
    }
    for engine in NODE_ENGINES.into_iter().filter(|e| needs_restart(*e)) {
        let name = engine.to_string();
        if !node.state.engines.contains(&name) {
            continue;
        }
        let now = node.restarts.contains(&engine);
        let before = node.state.pending(&name) && !now;
        let asked = loaded(node, engine);
        let socket_there = !matches!(asked, Loaded::Unknown { socket_missing: true, .. });
        let why = match asked {
            _ if now => "config changed".to_string(),
            Loaded::Yes => {
                if before {
                    node.state.set_pending(&name, false);
                    save_state(node)?;
                }
                node.say(format!(
                    "{engine}: not restarted: its CRI lists the {RUNTIME_NAME} handler (loaded){}",
                    if before { "; the restart pending from an earlier run is not needed" } else { "" }
                ));
                continue;
            }
            Loaded::No(socket) => {
                node.state.set_pending(&name, true);
                save_state(node)?;
                format!(
                    "its config has the {RUNTIME_NAME} handler but the running {engine} has not loaded it \
                     (its CRI at {} does not list it)",
                    socket.display()
                )
            }
            _ if before => "restart pending from an earlier run".to_string(),
            Loaded::Unknown { what, .. } => {
                node.say(format!("{engine}: not restarted: its config did not change"));
                node.say(format!("{engine}: not asked whether it loaded the {RUNTIME_NAME} handler: {what}"));
                continue;
            }
        };
        restart(node, engine, &why)?;
        if node.args.restart_mode == RestartMode::Systemd {
            if socket_there {
                confirm(node, engine)?;
            } else {
                node.say(format!(
                    "{engine}: not asked whether it loaded the {RUNTIME_NAME} handler: no CRI socket"
                ));
            }
            node.state.set_pending(&name, false);
            save_state(node)?;
        }
    }
    Ok(())
}

/// After uninstall: each engine whose config changed is restarted; and
/// when the pre-registered plugin was taken out (`preregistered`) and no
/// containerd restart stopped it, the runtime is restarted to stop it
/// (or the user is told to).
pub(super) fn after_uninstall(node: &mut Node<'_>, preregistered: bool) -> Result<(), NodeError> {
    let mut stopped = false;
    for engine in std::mem::take(&mut node.restarts) {
        restart(node, engine, "config changed")?;
        stopped |= engine == Engine::Containerd;
    }
    if preregistered && !stopped {
        // Until then the running plugin names a hook that is gone.
        preregistered_restart(node, "stop")?;
    }
    Ok(())
}

fn save_state(node: &mut Node<'_>) -> Result<(), NodeError> {
    let on_disk = state::load(node)?;
    state::save(node, on_disk.as_ref())
}

/// What the running daemon's CRI says about our handler.
enum Loaded {
    Yes,
    /// Its CRI answered, at this socket (host path), without the handler.
    No(PathBuf),
    /// No answer: why; `socket_missing` when there is no socket at all.
    Unknown {
        what: String,
        socket_missing: bool,
    },
}

/// Asks the running containerd, through its CRI socket under the host root.
fn loaded(node: &Node<'_>, engine: Engine) -> Loaded {
    if engine != Engine::Containerd {
        return Loaded::Unknown { what: format!("{engine} is not asked"), socket_missing: false };
    }
    let config = node.on_host(Path::new(CONTAINERD_CONFIG));
    let limit = crate::engine::MAX_ENGINE_CONFIG_BYTES;
    let text = files::read_text(&config, limit).ok().flatten().unwrap_or_default();
    let socket = containerd::grpc_address(&text);
    match cri::status(&node.args.host_root, &socket) {
        Ok(s) if containerd::cri_has_runtime(s.config.as_deref(), &s.handlers, &node.wrapper()) => {
            Loaded::Yes
        }
        Ok(_) => Loaded::No(node.on_host(&socket)),
        Err(e) => Loaded::Unknown {
            what: format!("its CRI socket {} does not answer ({e})", node.on_host(&socket).display()),
            socket_missing: e.kind() == io::ErrorKind::NotFound,
        },
    }
}

/// After a restart: waits for the restarted daemon's CRI to list the handler.
fn confirm(node: &mut Node<'_>, engine: Engine) -> Result<(), NodeError> {
    let deadline = std::time::Instant::now() + CONFIRM_TIMEOUT;
    loop {
        let answer = loaded(node, engine);
        if let Loaded::Yes = answer {
            node.say(format!("{engine}: its CRI lists the {RUNTIME_NAME} handler (loaded)"));
            return Ok(());
        }
        if std::time::Instant::now() > deadline {
            let what = match answer {
                Loaded::No(s) => format!("its CRI at {} does not list it", s.display()),
                Loaded::Unknown { what, .. } => what,
                Loaded::Yes => unreachable!("returned above"),
            };
            return Err(NodeError::NotLoaded { engine, what });
        }
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
}

/// How long a restarted containerd has to serve the handler on its CRI.
const CONFIRM_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

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
