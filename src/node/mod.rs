//! `node install` / `node uninstall`: install the hook onto a host from a
//! container that sees the host's root at `--host-root` (a DaemonSet with
//! hostPath `/` at `/host`), for Kubernetes nodes whose runtime has no NRI.
//!
//! Install copies this binary and the wrapper symlink into the host's
//! `--bin-dir`, writes the commented host config when the host has none, and
//! runs the engine setup ([`crate::engine::change`], the same plan and writes as
//! `setup ENGINE --root HOST`) for containerd (the `oci-tmpfs` handler) and
//! CRI-O (the hooks JSON in its hooks dir), each when its config is there.
//! Everything is read, parsed and planned before the first write, so a
//! config that does not parse writes nothing. What it will create is
//! recorded in a state file on the host ([`STATE_FILE`]) before it is
//! written, so that uninstall takes out exactly that and gives back every
//! engine file byte for byte, even after a run cut short. One `flock` on
//! [`LOCK_FILE`] under the host root keeps two instances from editing at
//! once; the second waits.
//! With `--nri`, the NRI plugin is pre-registered instead of either
//! ([`preregister`], docs/nri.md#pre-registered), through the same look
//! ahead, record and write.
//!
//! Restarts: containerd reads its config only at start, so it is restarted
//! when its config changed, when a restart is pending from an earlier run
//! (kept in the state file until one succeeds), or when its CRI ([`cri`])
//! says the running daemon lacks the handler (`--restart-mode systemd`: the
//! host's `systemctl restart containerd`, run in pid 1's mount namespace,
//! [`restart`]). CRI-O is never restarted: it watches its hooks dirs and
//! loads a new or removed hooks file itself (docs/design.md#crio-hooks-watch).
//!
//! The files: this one holds what install and uninstall share (the
//! [`Node`] a run works on, its [`Options`], [`NodeError`], the lock, the
//! engine setup both ways) and [`run`], which picks one; [`install`] reads,
//! records and writes an install; [`uninstall`] takes it out again;
//! [`preregister`] is `--nri`'s two files; [`state`] the record on the
//! host; [`restart`] when a runtime is restarted and how, and the
//! confirmation through its CRI ([`cri`]).
//!
//! No engine format is known here: that is [`crate::engine`]'s. Nothing is
//! printed here either: each line of what is done goes, as it is done, to
//! the sink the caller gives [`run`] (`cli::node` prints them).

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use clap::ValueEnum;

use crate::engine::change::{self, ChangeSet};
use crate::engine::{Engine, EngineConfigError, Registration, Request, Site};
use crate::files::FileError;
use crate::names::{rooted, RUNTIME_NAME, WRAPPER_NAME};

pub(crate) mod cri;
pub(crate) mod install;
pub(crate) mod preregister;
pub(crate) mod restart;
pub(crate) mod state;
pub(crate) mod uninstall;

use state::Installed;

/// The state file: what install created on the host.
pub(crate) const STATE_FILE: &str = "/var/lib/oci-tmpfs-hook/node-install.json";
/// The lock both install and uninstall hold (on the host's `/run`, a tmpfs:
/// it goes away at reboot and is never removed while someone may wait on it).
pub(crate) const LOCK_FILE: &str = "/run/oci-tmpfs-hook-node.lock";
/// The binary's name on the host.
pub(crate) use crate::names::BINARY_NAME;
/// The engines a Kubernetes node runs, in the order they are set up.
pub(crate) const NODE_ENGINES: [Engine; 2] = [Engine::Containerd, Engine::Crio];
/// The commented host config written when the host has none.
pub(crate) const HOST_CONFIG: &str = include_str!("../../hooks/config.toml");

/// One `node install`, `node uninstall` or `node restart-unit`: the
/// library's request, made by `cli::node` from its flags.
#[derive(Clone, Debug)]
pub(crate) struct Options {
    pub action: NodeAction,
    /// The host's root as this container sees it.
    pub host_root: PathBuf,
    /// How a runtime whose config changed is restarted.
    pub restart_mode: RestartMode,
    /// Where the binary and the wrapper go on the host (a host path).
    pub bin_dir: PathBuf,
    /// The unit `restart-unit` restarts.
    pub unit: Option<String>,
    /// The NRI plugin, pre-registered, instead of the engine registrations
    /// ([`preregister`]).
    pub nri: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum NodeAction {
    Install,
    Uninstall,
    /// Internal: `systemctl restart UNIT` in pid 1's mount namespace.
    #[value(hide = true)]
    RestartUnit,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum RestartMode {
    Systemd,
    None,
}

/// A failed node install or uninstall.
#[derive(Debug, thiserror::Error)]
pub(crate) enum NodeError {
    #[error("--host-root {0} is not a directory; mount the host's / there (hostPath)")]
    NoHostRoot(PathBuf),
    #[error(
        "--host-root {0} is this container's own root (the same directory as /), not the host's; \
         mount the host's / there (hostPath), or give --host-root / literally to install on the machine this runs on"
    )]
    OwnRoot(PathBuf),
    #[error(
        "{engine} was restarted but has not loaded the {RUNTIME_NAME} handler: {what}; \
         see `journalctl -u {engine}` and `{engine} config dump` on the host, then rerun (the restart stays pending)"
    )]
    NotLoaded { engine: Engine, what: String },
    #[error("locking {path} (the host's /run must exist and be writable)")]
    Lock {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(transparent)]
    File(#[from] FileError),
    #[error(transparent)]
    Config(#[from] EngineConfigError),
    #[error("{path} exists and was not installed by node install; remove it or pick another --bin-dir")]
    NotOurs { path: PathBuf },
    #[error("{path}: {what}; fix or remove it and rerun")]
    State { path: PathBuf, what: String },
    #[error("finding this binary to copy (/proc/self/exe); is /proc mounted?")]
    ThisBinary(#[source] io::Error),
    #[error(transparent)]
    Restart(#[from] restart::RestartError),
}

fn write_err(path: &Path) -> impl FnOnce(io::Error) -> NodeError + '_ {
    move |source| FileError::Write { path: path.to_path_buf(), source }.into()
}

/// One install or uninstall on one host root: what it installed, and what
/// is left to do.
pub(crate) struct Node<'a> {
    pub(crate) args: &'a Options,
    /// Where each line of what is done goes, when it is done.
    out: &'a mut dyn FnMut(&str),
    state: Installed,
    /// Engines whose config changed and need a restart.
    restarts: Vec<Engine>,
    /// Whether anything on the host was written or removed.
    changed: bool,
}

impl<'a> Node<'a> {
    fn new(args: &'a Options, out: &'a mut dyn FnMut(&str)) -> Node<'a> {
        Node { args, out, state: Installed::default(), restarts: Vec::new(), changed: false }
    }

    /// Says one line of what is done: hands it to the caller's sink now.
    pub(crate) fn say(&mut self, line: impl AsRef<str>) {
        (self.out)(line.as_ref());
    }

    /// Says what was written or removed.
    pub(crate) fn did(&mut self, line: impl AsRef<str>) {
        self.changed = true;
        self.say(line);
    }

    /// A host path under the host root.
    pub(crate) fn on_host(&self, p: &Path) -> PathBuf {
        rooted(&self.args.host_root, p)
    }

    fn hook(&self) -> PathBuf {
        self.args.bin_dir.join(BINARY_NAME)
    }

    fn wrapper(&self) -> PathBuf {
        self.args.bin_dir.join(WRAPPER_NAME)
    }

    /// Whether install put host file `p` there.
    pub(crate) fn owns(&self, p: &Path) -> bool {
        self.state.owns(p)
    }

    /// Creates the missing dirs up to host path `dir`, recording them.
    pub(crate) fn make_dirs(&mut self, dir: &Path) -> Result<(), NodeError> {
        let mut missing: Vec<PathBuf> = dir.ancestors().map(Path::to_path_buf).collect();
        missing.reverse();
        for d in missing {
            let real = self.on_host(&d);
            if fs::symlink_metadata(&real).is_err() {
                fs::create_dir(&real).map_err(write_err(&real))?;
                self.did(format!("node: created directory {}", real.display()));
                if !self.state.dirs.contains(&d) {
                    self.state.dirs.push(d);
                }
            }
        }
        Ok(())
    }

    /// The dirs above host path `file` that a write would create, recorded.
    fn note_missing_dirs(&mut self, file: &Path) {
        let mut missing: Vec<PathBuf> = file
            .ancestors()
            .skip(1)
            .take_while(|d| fs::symlink_metadata(self.on_host(d)).is_err())
            .map(Path::to_path_buf)
            .collect();
        missing.reverse();
        for d in missing {
            if !self.state.dirs.contains(&d) {
                self.state.dirs.push(d);
            }
        }
    }

    /// The host path of a path under the host root.
    fn host_path(&self, real: &Path) -> PathBuf {
        match real.strip_prefix(&self.args.host_root) {
            Ok(rel) => Path::new("/").join(rel),
            Err(_) => real.to_path_buf(),
        }
    }
}

/// Holds [`LOCK_FILE`] under the host root until dropped; says so when it
/// has to wait for another instance.
pub(crate) fn lock(node: &mut Node<'_>) -> Result<fs::File, NodeError> {
    use rustix::fs::{flock, FlockOperation};
    let path = node.on_host(Path::new(LOCK_FILE));
    let lock_err = |source| NodeError::Lock { path: path.clone(), source };
    let file =
        fs::OpenOptions::new().create(true).truncate(false).write(true).open(&path).map_err(lock_err)?;
    if flock(&file, FlockOperation::NonBlockingLockExclusive).is_err() {
        node.say(format!("node: waiting for another node install or uninstall (lock {})", path.display()));
        flock(&file, FlockOperation::LockExclusive).map_err(|e| lock_err(e.into()))?;
    }
    Ok(file)
}

/// Refuses a host root that is this process's own `/` (a symlink to `/`, a
/// bind mount of it...), unless `--host-root /` was given literally:
/// docs/kubernetes.md#the-host-root.
fn check_host_root(args: &Options) -> Result<(), NodeError> {
    use std::os::unix::fs::MetadataExt;
    let host = match fs::metadata(&args.host_root) {
        Ok(m) if m.is_dir() => m,
        _ => return Err(NodeError::NoHostRoot(args.host_root.clone())),
    };
    let own = fs::metadata("/").map_err(|source| FileError::Open { path: "/".into(), source })?;
    if (host.dev(), host.ino()) == (own.dev(), own.ino()) && args.host_root.as_os_str() != "/" {
        return Err(NodeError::OwnRoot(args.host_root.clone()));
    }
    Ok(())
}

/// Runs `node install` or `node uninstall` (or, for the restart's child,
/// `restart-unit`), handing `out` each line of what it does as it does it.
///
/// # Errors
/// The host root is missing or is this container's own root, a file cannot
/// be read or written, an engine config is malformed, a restart fails.
pub(crate) fn run(args: &Options, out: &mut dyn FnMut(&str)) -> Result<(), NodeError> {
    check_host_root(args)?;
    // The restart child runs while its parent holds the lock: no lock here.
    if args.action == NodeAction::RestartUnit {
        match restart::restart_unit(args)? {}
    }
    let mut node = Node::new(args, out);
    let _lock = lock(&mut node)?;
    match args.action {
        NodeAction::Install => install::install(&mut node)?,
        _ => uninstall::uninstall(&mut node)?,
    }
    Ok(())
}

/// What install does with one of its own files (binary, link, host config,
/// the pre-registered plugin's entry and config).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Put {
    /// Already as it should be (the host config: there at all).
    Same,
    Create,
    /// Ours (in the state file) with other contents: replaced.
    Replace,
}

/// The setup of `engine` rooted at the host root, read and worked out
/// (nothing written); with `undo`, its removal.
fn plan_engine(node: &mut Node<'_>, engine: Engine, undo: bool) -> Result<ChangeSet, NodeError> {
    let (hook, wrapper) = (node.hook(), node.wrapper());
    let req = Request { engine, site: Site { root: &node.args.host_root, config: None }, undo };
    let reg =
        Registration { hook: &hook, wrapper: &wrapper, default: false, stage: crate::stage::Stage::Prestart };
    let plan = change::propose(&req, &reg)?;
    for line in plan.note_lines(engine).into_iter().chain(plan.unchanged_lines(engine, undo)) {
        node.say(line);
    }
    Ok(plan)
}

/// Writes a planned engine setup (or, with `undo`, its removal).
fn apply_engine(node: &mut Node<'_>, engine: Engine, plan: &ChangeSet, undo: bool) -> Result<(), NodeError> {
    change::write(plan)?;
    for change in &plan.changes {
        node.did(change.line(engine, false));
        if change.after.is_none() {
            let host = node.host_path(&change.path);
            node.state.files.retain(|f| *f != host);
        }
    }
    let name = engine.to_string();
    if undo {
        node.state.engines.retain(|e| *e != name);
    }
    if !plan.changes.is_empty() && !restart::needs_restart(engine) {
        if let Some(line) = engine.after_change() {
            node.say(line);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_config_is_the_template() {
        assert!(HOST_CONFIG.starts_with("# oci-tmpfs-hook host configuration"));
    }
}
