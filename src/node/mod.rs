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
//! ([`crate::nri::preinstall`], docs/nri.md#pre-registered), through the
//! same plan, record and write.
//!
//! Restarts: containerd reads its config only at start, so it is restarted
//! when its config changed, when a restart is pending from an earlier run
//! (kept in the state file until one succeeds), or when its CRI ([`cri`])
//! says the running daemon lacks the handler (`--restart-mode systemd`: the
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

use crate::engine::change::{self, ChangeSet, BACKUP_SUFFIX};
use crate::engine::{containerd, ConfigError, Engine, Registration, Request, Site, Way};
use crate::files::{self, Durability, FileError, Perms};
use crate::names::{rooted, DEFAULT_CONFIG_PATH, RUNTIME_NAME, WRAPPER_NAME};

pub(crate) mod cri;
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
/// `restart-unit`), printing what it does.
///
/// # Errors
/// The host root is missing or is this container's own root, a file cannot
/// be read or written, an engine config is malformed, a restart fails.
pub(crate) fn run(args: &Options) -> Result<(), NodeError> {
    check_host_root(args)?;
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

/// What install does with one of its own files (binary, link, host config).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Put {
    /// Already as it should be (the host config: there at all).
    Same,
    Create,
    /// Ours (in the state file) with other contents: replaced.
    Replace,
}

/// Everything an install writes, worked out before its first write.
struct InstallPlan {
    /// This binary: its path and bytes.
    this: PathBuf,
    bytes: Vec<u8>,
    binary: Put,
    wrapper: Put,
    host_config: Put,
    engines: Vec<(Engine, ChangeSet)>,
    /// `--nri`: the pre-registered plugin's entry and config.
    nri: Option<crate::nri::preinstall::Plan>,
}

fn install(node: &mut Node<'_>) -> Result<(), NodeError> {
    let old = state::load(node)?;
    node.state = old.clone().unwrap_or_default();
    // Every read, parse and plan first: a config that does not parse, a file
    // that is not ours, stops the run before anything is written.
    let plan = plan_install(node)?;
    record(node, &plan);
    // The record is on the host before the files it names: a run cut short
    // leaves every file it may have written recorded, for uninstall.
    state::save(node, old.as_ref())?;
    let saved = node.state.clone();
    apply_install(node, &plan)?;
    state::save(node, Some(&saved))?;
    finish_install(node)
}

fn plan_install(node: &mut Node<'_>) -> Result<InstallPlan, NodeError> {
    let this = files::this_binary().map_err(NodeError::ThisBinary)?;
    let bytes = files::read(None, &this, MAX_BINARY_BYTES)?.bytes;
    let binary = plan_binary(node, &bytes)?;
    let wrapper = plan_wrapper(node)?;
    let host_config = plan_host_config(node);
    let found: Vec<Engine> =
        NODE_ENGINES.into_iter().filter(|e| e.detect(&node.args.host_root, false).is_some()).collect();
    let nri = if node.args.nri { Some(crate::nri::preinstall::plan(node, &node.hook())?) } else { None };
    if nri.is_none() && found.is_empty() {
        node.say(format!(
            "node: no containerd or CRI-O config under {}: no engine registered",
            node.args.host_root.display()
        ));
    }
    let mut engines = Vec::new();
    for engine in found.into_iter().filter(|_| nri.is_none()) {
        engines.push((engine, plan_engine(node, engine, false)?));
    }
    Ok(InstallPlan { this, bytes, binary, wrapper, host_config, engines, nri })
}

/// Puts into the state what the plan writes (and what it found right), so
/// that it is recorded before it is written.
fn record(node: &mut Node<'_>, plan: &InstallPlan) {
    let own = [
        (node.hook(), plan.binary),
        (node.wrapper(), plan.wrapper),
        (PathBuf::from(DEFAULT_CONFIG_PATH), plan.host_config),
    ];
    let nri = plan.nri.as_ref().map(crate::nri::preinstall::Plan::files).unwrap_or_default();
    for (host, put) in own.into_iter().chain(nri) {
        if put == Put::Same {
            node.state.add_found(&host);
        } else {
            node.note_missing_dirs(&host);
            node.state.add_file(&host);
        }
    }
    for (engine, set) in &plan.engines {
        for change in &set.changes {
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
        let name = engine.to_string();
        if !node.state.engines.contains(&name) {
            node.state.engines.push(name.clone());
        }
        if !set.changes.is_empty() && needs_restart(*engine) {
            node.state.set_pending(&name, true);
            node.restarts.push(*engine);
        }
    }
    if plan.nri.as_ref().is_some_and(crate::nri::preinstall::Plan::entry_changes) {
        node.state.set_pending(PREREGISTERED, true);
    }
}

/// Whether a change of `engine`'s config takes a restart (containerd reads
/// it only at start; CRI-O watches its hooks dirs).
fn needs_restart(engine: Engine) -> bool {
    engine.restart_command().is_some() && engine.way() != Way::HooksDir
}

fn apply_install(node: &mut Node<'_>, plan: &InstallPlan) -> Result<(), NodeError> {
    let bin_dir = node.args.bin_dir.clone();
    node.make_dirs(&bin_dir)?;
    let real = node.on_host(&node.hook());
    if plan.binary != Put::Same {
        files::replace(&real, &plan.bytes, Perms::new(0o755), Durability::Durable)?;
        let verb = if plan.binary == Put::Replace { "updated" } else { "created" };
        node.did(format!("node: {verb} {} (copied from {})", real.display(), plan.this.display()));
    }
    let real = node.on_host(&node.wrapper());
    if plan.wrapper != Put::Same {
        if plan.wrapper == Put::Replace {
            fs::remove_file(&real).map_err(write_err(&real))?;
        }
        std::os::unix::fs::symlink(BINARY_NAME, &real).map_err(write_err(&real))?;
        node.did(format!("node: created {} -> {BINARY_NAME}", real.display()));
    }
    if plan.host_config != Put::Same {
        let host = PathBuf::from(DEFAULT_CONFIG_PATH);
        node.make_dirs(host.parent().expect("the host config has a parent"))?;
        let real = node.on_host(&host);
        files::replace(&real, HOST_CONFIG.as_bytes(), Perms::new(0o644), Durability::Durable)?;
        node.did(format!("node: created {} (the commented defaults)", real.display()));
    }
    for (engine, set) in &plan.engines {
        apply_engine(node, *engine, set, false)?;
    }
    if let Some(nri) = &plan.nri {
        crate::nri::preinstall::apply(node, nri)?;
    }
    Ok(())
}

/// The pending-restart key of the pre-registered plugin: its runtime starts
/// it only at its own start.
const PREREGISTERED: &str = "nri-plugin";

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
            restart::restart(node, *engine, &format!("to {verb} the pre-registered NRI plugin"))?;
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

fn uninstall(node: &mut Node<'_>) -> Result<(), NodeError> {
    let Some(state) = state::load(node)? else {
        let path = node.on_host(Path::new(STATE_FILE));
        node.say(format!("node: {} is missing: nothing was installed here by node install", path.display()));
        return Ok(());
    };
    node.state = state;
    let mut plans = Vec::new();
    for name in node.state.engines.clone() {
        let engine = Engine::from_str(&name, false).map_err(|_| NodeError::State {
            path: node.on_host(Path::new(STATE_FILE)),
            what: format!("unknown engine {name:?}"),
        })?;
        plans.push((engine, plan_engine(node, engine, true)?));
    }
    for (engine, set) in &plans {
        apply_engine(node, *engine, set, true)?;
        if !set.changes.is_empty() && needs_restart(*engine) {
            node.restarts.push(*engine);
        }
    }
    let preregistered = node.owns(&crate::nri::preinstall::entry());
    remove_files(node)?;
    let state_file = node.on_host(Path::new(STATE_FILE));
    fs::remove_file(&state_file).map_err(write_err(&state_file))?;
    node.did(format!("node: removed {}", state_file.display()));
    remove_dirs(node);
    let mut stopped = false;
    for engine in std::mem::take(&mut node.restarts) {
        restart::restart(node, engine, "config changed")?;
        stopped |= engine == Engine::Containerd;
    }
    if preregistered && !stopped {
        // Until then the running plugin names a hook that is gone.
        preregistered_restart(node, "stop")?;
    }
    if !node.changed {
        node.say("node: nothing changed");
    }
    Ok(())
}

/// After install: each registered engine that takes restarts is restarted
/// when its config changed now, when a restart is pending from an earlier
/// run, or when its CRI says the running daemon lacks the handler; a
/// daemon whose CRI lists the handler needs none
/// (docs/kubernetes.md#is-the-handler-loaded).
fn finish_install(node: &mut Node<'_>) -> Result<(), NodeError> {
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
        restart::restart(node, engine, &why)?;
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
    if !node.changed {
        node.say("node: nothing changed");
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
    let config = node.on_host(Path::new(crate::names::CONTAINERD_CONFIG));
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
    if !plan.changes.is_empty() && !needs_restart(engine) {
        node.say(format!("{engine}: no restart needed: CRI-O watches its hooks dirs and loads the change"));
    }
    Ok(())
}

/// This binary at the host's `--bin-dir`: there already, to create, or ours
/// to update; another file there is refused.
fn plan_binary(node: &mut Node<'_>, bytes: &[u8]) -> Result<Put, NodeError> {
    let host = node.hook();
    let real = node.on_host(&host);
    match files::read(None, &real, MAX_BINARY_BYTES) {
        Ok(c) if c.bytes == bytes => {
            node.say(format!("node: {} is this binary; unchanged", real.display()));
            Ok(Put::Same)
        }
        Ok(_) if node.state.owns(&host) => Ok(Put::Replace),
        Ok(_) => Err(NodeError::NotOurs { path: real }),
        Err(e) if e.is_not_found() => Ok(Put::Create),
        Err(e) => Err(e.into()),
    }
}

/// The wrapper symlink `oci-tmpfs-runtime -> oci-tmpfs-hook` next to it.
fn plan_wrapper(node: &mut Node<'_>) -> Result<Put, NodeError> {
    let host = node.wrapper();
    let real = node.on_host(&host);
    match fs::read_link(&real) {
        Ok(target) if target == Path::new(BINARY_NAME) => {
            node.say(format!("node: {} -> {BINARY_NAME}; unchanged", real.display()));
            Ok(Put::Same)
        }
        Ok(_) if node.state.owns(&host) => Ok(Put::Replace),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Put::Create),
        _ => Err(NodeError::NotOurs { path: real }),
    }
}

/// The commented host config, when the host has none.
fn plan_host_config(node: &mut Node<'_>) -> Put {
    let real = node.on_host(Path::new(DEFAULT_CONFIG_PATH));
    if fs::symlink_metadata(&real).is_ok() {
        node.say(format!("node: {} exists; unchanged", real.display()));
        return Put::Same;
    }
    Put::Create
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
