//! `node install` / `node uninstall`: install the hook onto a host from a
//! container that sees the host's root at `--host-root` (a DaemonSet with
//! hostPath `/` at `/host`), for Kubernetes nodes whose runtime has no NRI.
//!
//! Install copies this binary and the wrapper symlink into the host's
//! `--bin-dir`, writes the commented host config when the host has none, and
//! runs the engine setup ([`crate::engine::change`], the same plan and writes as
//! `setup ENGINE --root HOST`) for containerd (the `oci-tmpfs` handler) and
//! CRI-O (the hooks JSON in its hooks dir), each when its config is there.
//! With `--nri`, the NRI plugin is pre-registered instead of either
//! ([`crate::nri::preinstall`], docs/nri.md#pre-registered).
//! What it created is recorded in a state file on the host
//! ([`STATE_FILE`]), so that uninstall takes out exactly that and gives back
//! every engine file byte for byte. One `flock` on [`LOCK_FILE`] under the
//! host root keeps two instances from editing at once; the second waits.
//!
//! Restarts: containerd reads its config only at start, so it is restarted
//! when its config changed, and only then (`--restart-mode systemd`: the
//! host's `systemctl restart containerd`, run in pid 1's mount namespace,
//! [`restart`]). CRI-O is never restarted: it watches its hooks dirs
//! (containers/common `pkg/hooks` `Monitor`, fsnotify) and loads a new or
//! removed hooks file itself.
//!
//! No engine format is known here: that is [`crate::engine`]'s.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use clap::ValueEnum;

use crate::engine::change::{self, BACKUP_SUFFIX};
use crate::engine::{ConfigError, Engine, Registration, Request, Site, Way};
use crate::files::{self, Durability, FileError, Perms};
use crate::names::{rooted, DEFAULT_CONFIG_PATH, WRAPPER_NAME};

pub(crate) mod restart;
pub(crate) mod state;

use state::Installed;

/// The state file: what install created on the host.
pub(crate) const STATE_FILE: &str = "/var/lib/oci-tmpfs-hook/node-install.json";
/// The lock both install and uninstall hold (on the host's `/run`, a tmpfs:
/// it goes away at reboot and is never removed while someone may wait on it).
pub(crate) const LOCK_FILE: &str = "/run/oci-tmpfs-hook-node.lock";
/// The binary's name on the host.
pub(crate) const BINARY_NAME: &str = "oci-tmpfs-hook";
/// The engines a Kubernetes node runs, in the order they are set up.
pub(crate) const NODE_ENGINES: [Engine; 2] = [Engine::Containerd, Engine::Crio];
/// The commented host config written when the host has none.
pub(crate) const HOST_CONFIG: &str = include_str!("../../hooks/config.toml");
/// Largest binary copied (the static release build is a few MiB; a debug
/// build with debug info, which the tests install, is about 90 MiB).
const MAX_BINARY_BYTES: u64 = 256 << 20;

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
    /// ([`crate::nri::preinstall`]).
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
    #[error("locking {path} (the host's /run must exist and be writable)")]
    Lock {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(transparent)]
    File(#[from] FileError),
    #[error(transparent)]
    Config(#[from] ConfigError),
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
    state: Installed,
    /// Engines whose config changed and need a restart.
    restarts: Vec<Engine>,
    /// Whether anything on the host was written or removed.
    changed: bool,
}

impl<'a> Node<'a> {
    fn new(args: &'a Options) -> Node<'a> {
        Node { args, state: Installed::default(), restarts: Vec::new(), changed: false }
    }

    /// Prints one line of what was done.
    pub(crate) fn say(&mut self, line: impl AsRef<str>) {
        println!("{}", line.as_ref());
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

    /// Records host file `p` as installed (uninstall removes it).
    pub(crate) fn record(&mut self, p: &Path) {
        self.state.add_file(p);
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

/// Runs `node install` or `node uninstall` (or, for the restart's child,
/// `restart-unit`), printing what it does.
///
/// # Errors
/// The host root is missing, a file cannot be read or written, an engine
/// config is malformed, a restart fails.
pub(crate) fn run(args: &Options) -> Result<(), NodeError> {
    if !args.host_root.is_dir() {
        return Err(NodeError::NoHostRoot(args.host_root.clone()));
    }
    // The restart child runs while its parent holds the lock: no lock here.
    if args.action == NodeAction::RestartUnit {
        match restart::restart_unit(args)? {}
    }
    let mut node = Node::new(args);
    let _lock = lock(&mut node)?;
    match args.action {
        NodeAction::Install => install(&mut node)?,
        _ => uninstall(&mut node)?,
    }
    Ok(())
}

fn install(node: &mut Node<'_>) -> Result<(), NodeError> {
    let old = state::load(node)?;
    node.state = old.clone().unwrap_or_default();
    let bin_dir = node.args.bin_dir.clone();
    node.make_dirs(&bin_dir)?;
    put_binary(node)?;
    put_wrapper(node)?;
    put_host_config(node)?;
    let engines: Vec<Engine> =
        NODE_ENGINES.into_iter().filter(|e| e.detect(&node.args.host_root, false).is_some()).collect();
    if node.args.nri {
        let hook = node.hook();
        if crate::nri::preinstall::install(node, &hook)? {
            preregistered_restart(node, "start");
        }
    } else if engines.is_empty() {
        node.say(format!(
            "node: no containerd or CRI-O config under {}: no engine registered",
            node.args.host_root.display()
        ));
    }
    for engine in engines.into_iter().filter(|_| !node.args.nri) {
        register(node, engine, false)?;
    }
    state::save(node, old.as_ref())?;
    finish(node)
}

fn uninstall(node: &mut Node<'_>) -> Result<(), NodeError> {
    let Some(state) = state::load(node)? else {
        let path = node.on_host(Path::new(STATE_FILE));
        node.say(format!("node: {} is missing: nothing was installed here by node install", path.display()));
        return Ok(());
    };
    node.state = state;
    for name in node.state.engines.clone() {
        let engine = Engine::from_str(&name, false).map_err(|_| NodeError::State {
            path: node.on_host(Path::new(STATE_FILE)),
            what: format!("unknown engine {name:?}"),
        })?;
        register(node, engine, true)?;
    }
    let preregistered = node.owns(&crate::nri::preinstall::entry());
    remove_files(node)?;
    if preregistered {
        // Until then the running plugin names a hook that is gone.
        preregistered_restart(node, "stop");
    }
    let state_file = node.on_host(Path::new(STATE_FILE));
    fs::remove_file(&state_file).map_err(write_err(&state_file))?;
    node.did(format!("node: removed {}", state_file.display()));
    remove_dirs(node);
    finish(node)
}

/// A runtime starts and stops its pre-registered plugins with itself
/// (`verb`: what the restart does to ours): containerd is restarted (as for
/// a changed config); CRI-O, and a runtime whose config is not found, are
/// named.
fn preregistered_restart(node: &mut Node<'_>, verb: &str) {
    let engines: Vec<Engine> =
        NODE_ENGINES.into_iter().filter(|e| e.detect(&node.args.host_root, false).is_some()).collect();
    for engine in &engines {
        if *engine == Engine::Containerd && node.args.restart_mode == RestartMode::Systemd {
            node.restarts.push(*engine);
        } else {
            node.say(format!("{engine}: restart it to {verb} the pre-registered NRI plugin"));
        }
    }
    if engines.is_empty() {
        node.say(format!("node: restart the container runtime to {verb} the pre-registered NRI plugin"));
    }
}

/// Restarts what needs it, and says when nothing changed.
fn finish(node: &mut Node<'_>) -> Result<(), NodeError> {
    let restarts = std::mem::take(&mut node.restarts);
    for engine in NODE_ENGINES {
        if engine.restart_command().is_none() || engine.way() == Way::HooksDir {
            continue;
        }
        if !restarts.contains(&engine) {
            if node.state.engines.iter().any(|e| *e == engine.to_string()) {
                node.say(format!("{engine}: not restarted: its config did not change"));
            }
            continue;
        }
        restart::restart(node, engine)?;
    }
    if !node.changed {
        node.say("node: nothing changed");
    }
    Ok(())
}

/// The setup of `engine` rooted at the host root, applied; with `undo`,
/// its removal.
fn register(node: &mut Node<'_>, engine: Engine, undo: bool) -> Result<(), NodeError> {
    let (hook, wrapper) = (node.hook(), node.wrapper());
    let req = Request { engine, site: Site { root: &node.args.host_root, config: None }, undo };
    let reg = Registration { hook: &hook, wrapper: &wrapper, default: false };
    let plan = change::propose(&req, &reg)?;
    for line in plan.note_lines(engine).into_iter().chain(plan.unchanged_lines(engine, undo)) {
        node.say(line);
    }
    for change in &plan.changes {
        let host = node.host_path(&change.path);
        if change.before.is_none() {
            node.note_missing_dirs(&host);
            node.state.add_file(&host);
        }
        if let Some(b) = &change.backup {
            if !b.exists() {
                node.state.add_file(&node.host_path(b));
            }
        }
    }
    change::write(&plan)?;
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
    } else if !node.state.engines.contains(&name) {
        node.state.engines.push(name);
    }
    if !plan.changes.is_empty() {
        if engine.way() == Way::HooksDir {
            node.say(format!(
                "{engine}: no restart needed: CRI-O watches its hooks dirs and loads the change"
            ));
        } else {
            node.restarts.push(engine);
        }
    }
    Ok(())
}

/// Copies this binary to the host, unless the same bytes are there.
fn put_binary(node: &mut Node<'_>) -> Result<(), NodeError> {
    let this = files::this_binary().map_err(NodeError::ThisBinary)?;
    let bytes = files::read(None, &this, MAX_BINARY_BYTES)?.bytes;
    let host = node.hook();
    let real = node.on_host(&host);
    match files::read(None, &real, MAX_BINARY_BYTES) {
        Ok(c) if c.bytes == bytes => {
            node.say(format!("node: {} is this binary; unchanged", real.display()));
            return Ok(());
        }
        Ok(_) if !node.state.owns(&host) => return Err(NodeError::NotOurs { path: real }),
        Err(e) if !e.is_not_found() => return Err(e.into()),
        existing => {
            files::replace(&real, &bytes, Perms::new(0o755), Durability::Durable)?;
            let verb = if existing.is_ok() { "updated" } else { "created" };
            node.did(format!("node: {verb} {} (copied from {})", real.display(), this.display()));
        }
    }
    node.state.add_file(&host);
    Ok(())
}

/// The wrapper symlink `oci-tmpfs-runtime -> oci-tmpfs-hook` next to it.
fn put_wrapper(node: &mut Node<'_>) -> Result<(), NodeError> {
    let host = node.wrapper();
    let real = node.on_host(&host);
    match fs::read_link(&real) {
        Ok(target) if target == Path::new(BINARY_NAME) => {
            node.say(format!("node: {} -> {BINARY_NAME}; unchanged", real.display()));
            return Ok(());
        }
        Ok(_) if node.state.owns(&host) => fs::remove_file(&real).map_err(write_err(&real))?,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        _ => return Err(NodeError::NotOurs { path: real }),
    }
    std::os::unix::fs::symlink(BINARY_NAME, &real).map_err(write_err(&real))?;
    node.did(format!("node: created {} -> {BINARY_NAME}", real.display()));
    node.state.add_file(&host);
    Ok(())
}

/// The commented host config, when the host has none.
fn put_host_config(node: &mut Node<'_>) -> Result<(), NodeError> {
    let host = PathBuf::from(DEFAULT_CONFIG_PATH);
    let real = node.on_host(&host);
    if fs::symlink_metadata(&real).is_ok() {
        node.say(format!("node: {} exists; unchanged", real.display()));
        return Ok(());
    }
    node.make_dirs(host.parent().expect("the host config has a parent"))?;
    files::replace(&real, HOST_CONFIG.as_bytes(), Perms::new(0o644), Durability::Durable)?;
    node.did(format!("node: created {} (the commented defaults)", real.display()));
    node.state.add_file(&host);
    Ok(())
}

/// Removes the files install created; a host config edited since, or a
/// backup that differs from the restored file, is kept.
fn remove_files(node: &mut Node<'_>) -> Result<(), NodeError> {
    for host in node.state.files.clone() {
        let real = node.on_host(&host);
        let keep = if host == Path::new(DEFAULT_CONFIG_PATH) {
            let now = files::read_text(&real, 1 << 20).ok().flatten();
            now.is_some_and(|t| t != HOST_CONFIG).then_some("edited since install")
        } else if let Some(original) = backup_of(&host) {
            let restored = fs::read(node.on_host(&original)).ok();
            (fs::read(&real).ok() != restored).then_some("differs from the restored file")
        } else {
            None
        };
        if let Some(why) = keep {
            node.say(format!("node: kept {} ({why})", real.display()));
            continue;
        }
        match fs::remove_file(&real) {
            Ok(()) => node.did(format!("node: removed {}", real.display())),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(write_err(&real)(e)),
        }
    }
    node.state.files.clear();
    Ok(())
}

/// The file a setup backup `FILE.bak-oci-tmpfs-hook[.N]` saves.
fn backup_of(path: &Path) -> Option<PathBuf> {
    let text = path.to_str()?;
    let (file, _) = text.split_once(BACKUP_SUFFIX)?;
    Some(PathBuf::from(file))
}

/// Removes the dirs install created, deepest first, when empty.
fn remove_dirs(node: &mut Node<'_>) {
    for host in node.state.dirs.clone().iter().rev() {
        let real = node.on_host(host);
        if fs::remove_dir(&real).is_ok() {
            node.did(format!("node: removed directory {}", real.display()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backup_names_map_to_their_file() {
        assert_eq!(
            backup_of(Path::new("/etc/containerd/config.toml.bak-oci-tmpfs-hook")),
            Some(PathBuf::from("/etc/containerd/config.toml"))
        );
        assert_eq!(
            backup_of(Path::new("/etc/c.toml.bak-oci-tmpfs-hook.2")),
            Some(PathBuf::from("/etc/c.toml"))
        );
        assert_eq!(backup_of(Path::new("/usr/local/bin/oci-tmpfs-hook")), None);
    }

    #[test]
    fn host_config_is_the_template() {
        assert!(HOST_CONFIG.starts_with("# oci-tmpfs-hook host configuration"));
    }
}
