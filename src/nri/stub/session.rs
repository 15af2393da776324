//! One connection to the runtime's NRI socket, and the loop that keeps one.
//!
//! A session: the plugin's ttRPC server (the `ttrpc` crate) listens on a
//! socket in a private directory (mode 0700, removed as soon as the one
//! connection is made, so no other process can reach the service), the
//! runtime's client runs on a socket pair, and [`mux::relay`] joins both to
//! the NRI socket's conns 1 and 2. The plugin registers (`RegisterPlugin`,
//! within the runtime's 5 s), drops its client (nothing else is asked of the
//! runtime), and serves until the socket ends.
//!
//! The `ttrpc` crate speaks to a socket of its own and has no notion of
//! NRI's multiplexer; relaying each conn through a local stream is what lets
//! it run unmodified over the mux.
//!
//! containerd sends no `Shutdown` when it stops: the plugin reads EOF. Every
//! end of a session (EOF, a bad frame, a failed registration) redials, at
//! once and then every [`RETRY`], so containers created after a runtime
//! restart get their mounts within a second of the new socket.
//!
//! A [`Stop`] (SIGTERM or SIGINT: `nri` catches them) ends it all: the
//! session's socket stops being read, so no new request is taken; those in
//! flight are answered ([`mux::relay`]); the connection closes and no
//! redial follows. A pause between dials ends at once.
//!
//! With a [`Status`] file, the plugin writes it once it has registered and
//! removes it as soon as the session ends: `nri --probe` (the DaemonSet's
//! liveness and readiness) reads it, so the probe says whether the plugin is
//! registered with the runtime now, not only whether its process lives.
//!
//! The session serves any [`Plugin`]: the messages it speaks are
//! [`super::protocol`]'s, so this file only carries bytes, dials and
//! registers; what happens to the connection is told to the plugin
//! ([`Plugin::connection`]).

use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use super::mux::{self, MuxError, PLUGIN_CONN, RUNTIME_CONN};
use super::{protocol, Connection, Identity, Plugin, PLUGIN_IDX_ENV, PLUGIN_NAME_ENV, PLUGIN_SOCKET_ENV};
use crate::files::{self, Durability, Perms};

/// Between two dials of a socket that is not there (yet).
pub(crate) const RETRY: Duration = Duration::from_millis(500);
/// Before redialling a socket that was just closed.
const EOF_PAUSE: Duration = Duration::from_millis(50);

/// Why the plugin cannot start.
#[derive(Debug, thiserror::Error)]
pub(crate) enum StartError {
    #[error("--idx {0:?}: NRI wants exactly two digits, e.g. 10")]
    Idx(String),
    #[error("--name {0:?}: containerd 2.3 and later refuse it; use letters, digits and _ . + - only (e.g. oci-tmpfs-hook)")]
    Name(String),
    #[error("{env}={value:?}: not a file descriptor number the runtime passed")]
    Fd { env: &'static str, value: String },
    #[error(transparent)]
    Session(#[from] SessionError),
}

/// Runs `plugin` as `asked` (the socket, name and index from the command
/// line), unless the runtime started it: then the runtime's
/// `NRI_PLUGIN_NAME` and `NRI_PLUGIN_IDX` win, and with `NRI_PLUGIN_SOCKET`
/// the plugin serves the connection the runtime handed it (pre-registered)
/// until that one ends; else it serves the socket. Either way, until `stop`.
///
/// # Errors
/// A bad index; a pre-registered connection that is not one, or that ended
/// with an error.
pub(crate) fn run<P: Plugin>(
    asked: Identity,
    plugin: &Arc<P>,
    status: &Status,
    stop: &Stop,
) -> Result<(), StartError> {
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let mut opts = Identity {
        socket: socket_path(&asked.socket.to_string_lossy()).to_path_buf(),
        name: env(PLUGIN_NAME_ENV).unwrap_or(asked.name),
        idx: env(PLUGIN_IDX_ENV).unwrap_or(asked.idx),
    };
    if !valid_idx(&opts.idx) {
        return Err(StartError::Idx(std::mem::take(&mut opts.idx)));
    }
    // Refused at start, not retried every 500 ms against a runtime that
    // refuses every registration.
    if !valid_name(&opts.name) {
        return Err(StartError::Name(std::mem::take(&mut opts.name)));
    }
    if let Some(value) = env(PLUGIN_SOCKET_ENV) {
        let stream = inherited(&value)?;
        // The runtime closing its connection is the normal end here.
        return match session(stream, &opts, plugin, status, stop) {
            Ok(()) | Err(SessionError::Mux(MuxError::Eof)) => Ok(()),
            Err(_) if stop.requested() => Ok(()),
            Err(e) => Err(e.into()),
        };
    }
    serve(&opts, plugin, status, stop);
    Ok(())
}

/// What ends the plugin. Requested once, it shuts the read side of the
/// current session's NRI socket (so the session takes no new request,
/// answers those in flight and ends: [`mux::relay`]), ends a pause between
/// dials at once, and no dial follows.
#[derive(Debug, Default)]
pub struct Stop {
    state: Mutex<StopState>,
    woken: Condvar,
}

#[derive(Debug, Default)]
struct StopState {
    requested: bool,
    /// The current session's NRI socket.
    socket: Option<UnixStream>,
}

impl Stop {
    /// Stops the plugin (again: nothing more).
    pub fn request(&self) {
        let mut state = self.lock();
        state.requested = true;
        if let Some(socket) = state.socket.take() {
            let _ = socket.shutdown(std::net::Shutdown::Read);
        }
        self.woken.notify_all();
    }

    /// Whether a stop was requested.
    pub fn requested(&self) -> bool {
        self.lock().requested
    }

    fn lock(&self) -> MutexGuard<'_, StopState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits `pause`, or less when a stop is requested meanwhile; whether
    /// one is.
    fn pause(&self, pause: Duration) -> bool {
        let state = self.lock();
        let (state, _) =
            self.woken.wait_timeout_while(state, pause, |s| !s.requested).unwrap_or_else(|p| p.into_inner());
        state.requested
    }

    /// `socket` is the current session's: a stop shuts its read side, at
    /// once when one was requested already.
    fn watch(&self, socket: &UnixStream) -> io::Result<()> {
        let mut state = self.lock();
        if state.requested {
            return socket.shutdown(std::net::Shutdown::Read);
        }
        state.socket = Some(socket.try_clone()?);
        Ok(())
    }

    /// The session is over: nothing to shut.
    fn unwatch(&self) {
        self.lock().socket = None;
    }
}

/// Why a session could not be set up or ended.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("connecting to the NRI socket {path}")]
    Connect {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("setting up the local ttRPC socket in {path}")]
    Local {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("starting the plugin's ttRPC service")]
    Ttrpc(#[source] ttrpc::Error),
    #[error("registering as {name} (index {idx}) with the runtime")]
    Register {
        name: String,
        idx: String,
        #[source]
        source: ttrpc::Error,
    },
    #[error(transparent)]
    Mux(#[from] MuxError),
}

/// Runs sessions of `plugin`, redialling after each end, until `stop`.
/// Logs each end once.
pub fn serve<P: Plugin>(opts: &Identity, plugin: &Arc<P>, status: &Status, stop: &Stop) {
    let mut warned = false;
    let mut connected = false;
    while !stop.requested() {
        let why = match UnixStream::connect(&opts.socket) {
            Ok(stream) => {
                warned = false;
                if connected {
                    plugin.connection(Connection::Reconnected);
                }
                connected = true;
                session(stream, opts, plugin, status, stop)
            }
            Err(source) => Err(SessionError::Connect { path: opts.socket.clone(), source }),
        };
        if stop.requested() {
            break;
        }
        match why {
            Err(SessionError::Mux(MuxError::Eof)) => {
                log::warn!("nri: the runtime closed the NRI socket; redialling {}", opts.socket.display());
                // At once (a restarted runtime's socket is back within a
                // fraction of a second), but never in a hot loop.
                stop.pause(EOF_PAUSE);
                continue;
            }
            Err(e @ SessionError::Connect { .. }) if warned => {
                log::debug!("nri: {}", crate::error::chain(&e))
            }
            Err(e @ SessionError::Connect { .. }) => {
                warned = true;
                log::warn!("nri: {}; retrying every {RETRY:?}", crate::error::chain(&e));
            }
            Err(e) => log::warn!("nri: {}; redialling", crate::error::chain(&e)),
            Ok(()) => {}
        }
        stop.pause(RETRY);
    }
    log::info!("nri: stopped; not connected to {}", opts.socket.display());
}

/// One session over `stream`, until it ends or `stop` ends it.
///
/// # Errors
/// Why it ended: [`MuxError::Eof`] when the runtime closed the socket or a
/// stop shut it.
pub fn session<P: Plugin>(
    stream: UnixStream,
    opts: &Identity,
    plugin: &Arc<P>,
    status: &Status,
    stop: &Stop,
) -> Result<(), SessionError> {
    let dir = PrivateDir::new()?;
    let path = dir.0.join("plugin.sock");
    let mut server = ttrpc::Server::new()
        .bind(&format!("unix://{}", path.display()))
        .map_err(SessionError::Ttrpc)?
        .register_service(protocol::service(plugin))
        .set_thread_count_default(2)
        .set_thread_count_min(1)
        .set_thread_count_max(4);
    server.start().map_err(SessionError::Ttrpc)?;
    let dir_path = dir.0.clone();
    let local = |source| SessionError::Local { path: dir_path.clone(), source };
    let to_server = UnixStream::connect(&path).map_err(local)?;
    drop(dir);
    let (ours, theirs) = UnixStream::pair().map_err(local)?;
    let socket = stream.try_clone().map_err(local)?;
    stop.watch(&socket).map_err(local)?;
    let relay =
        std::thread::spawn(move || mux::relay(stream, vec![(PLUGIN_CONN, to_server), (RUNTIME_CONN, ours)]));
    let registered = protocol::register(theirs, opts).map_err(|source| SessionError::Register {
        name: opts.name.clone(),
        idx: opts.idx.clone(),
        source,
    });
    if registered.is_err() {
        let _ = socket.shutdown(std::net::Shutdown::Both);
    } else {
        log::info!("nri: registered as {} (index {}) on {}", opts.name, opts.idx, opts.socket.display());
        status.registered(opts);
        plugin.connection(Connection::Registered);
    }
    let ended = relay.join().unwrap_or(MuxError::Eof);
    stop.unwatch();
    status.ended();
    plugin.connection(Connection::Ended);
    server.shutdown();
    registered?;
    Err(ended.into())
}

/// The file that says the plugin is registered with the runtime now (none:
/// no file kept).
#[derive(Clone, Debug, Default)]
pub struct Status(pub Option<PathBuf>);

/// The first word of a status file while the plugin is registered.
pub(crate) const REGISTERED: &str = "registered";

impl Status {
    /// Removes a file left by an earlier process (one killed before it
    /// could): nothing is registered before this process registers.
    ///
    /// # Errors
    /// The file exists and cannot be removed.
    pub fn clear(&self) -> io::Result<()> {
        match self.0.as_deref().map(std::fs::remove_file) {
            Some(Err(e)) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }

    /// Writes `registered NAME IDX SOCKET pid=PID` (atomically: a probe
    /// never reads half of it).
    fn registered(&self, opts: &Identity) {
        let Some(path) = &self.0 else { return };
        let line = format!(
            "{REGISTERED} {} {} {} pid={}\n",
            opts.name,
            opts.idx,
            opts.socket.display(),
            std::process::id()
        );
        if let Err(e) = files::replace(path, line.as_bytes(), Perms::new(0o644), Durability::Scratch) {
            log::warn!("nri: writing the status file: {}", crate::error::chain(&e));
        }
    }

    /// The session ended: the plugin is no longer registered.
    fn ended(&self) {
        if let Err(e) = self.clear() {
            let path = self.0.as_deref().unwrap_or(Path::new("")).display();
            log::warn!("nri: removing the status file {path}: {e}");
        }
    }
}

/// Why `nri --probe` fails: the plugin is not registered now.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ProbeError {
    #[error(
        "not registered with the runtime now: {path} is missing (the plugin is not connected; see its log)"
    )]
    Missing { path: PathBuf },
    #[error("reading {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{path}: not a status file of `nri --status-file`: {text:?}")]
    Bad { path: PathBuf, text: String },
    #[error("not registered with the runtime now: {path} was written by pid {pid}, which is gone")]
    Gone { path: PathBuf, pid: u32 },
}

/// `nri --probe`: what the status file at `path` says, when the plugin
/// that wrote it is alive and registered now.
///
/// # Errors
/// The file is missing (no session), unreadable or malformed, or its
/// writer is gone (killed before it could remove it).
pub(crate) fn probe(path: &Path) -> Result<String, ProbeError> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(ProbeError::Missing { path: path.to_path_buf() })
        }
        Err(source) => return Err(ProbeError::Read { path: path.to_path_buf(), source }),
    };
    let bad = || ProbeError::Bad { path: path.to_path_buf(), text: text.clone() };
    let line = text.trim_end();
    let pid: u32 = line
        .strip_prefix(REGISTERED)
        .and_then(|rest| rest.rsplit_once(" pid="))
        .and_then(|(_, pid)| pid.parse().ok())
        .ok_or_else(bad)?;
    if !Path::new(&format!("/proc/{pid}")).exists() {
        return Err(ProbeError::Gone { path: path.to_path_buf(), pid });
    }
    Ok(line.to_string())
}

/// A directory only this user can enter, removed on drop.
struct PrivateDir(PathBuf);

impl PrivateDir {
    fn new() -> Result<PrivateDir, SessionError> {
        use std::sync::atomic::{AtomicU64, Ordering};
        static N: AtomicU64 = AtomicU64::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("oci-tmpfs-hook-nri.{}.{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&path)
            .map_err(|source| SessionError::Local { path: path.clone(), source })?;
        Ok(PrivateDir(path))
    }
}

impl Drop for PrivateDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Whether `name` is a plugin name every runtime accepts: not empty, only
/// `[A-Za-z0-9_.+-]` (containerd 2.3 and later refuse anything else at
/// registration; 2.1 took a space).
pub fn valid_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"_.+-".contains(&b))
}

/// Whether `idx` is what NRI accepts: exactly two digits.
pub fn valid_idx(idx: &str) -> bool {
    idx.len() == 2 && idx.bytes().all(|b| b.is_ascii_digit())
}

/// The socket path of a dial target: `unix://` prefix allowed.
pub fn socket_path(s: &str) -> &Path {
    Path::new(s.strip_prefix("unix://").unwrap_or(s))
}

/// The connected socket a runtime passed as fd `value` (3).
fn inherited(value: &str) -> Result<UnixStream, StartError> {
    let bad = || StartError::Fd { env: PLUGIN_SOCKET_ENV, value: value.to_string() };
    let fd: i32 = value.parse().map_err(|_| bad())?;
    if fd < 3 {
        return Err(bad());
    }
    // It must be an open socket: fstat it through /proc before owning it.
    let meta = std::fs::metadata(format!("/proc/self/fd/{fd}")).map_err(|_| bad())?;
    if !std::os::unix::fs::FileTypeExt::is_socket(&meta.file_type()) {
        return Err(bad());
    }
    Ok(own_fd(fd))
}

#[allow(unsafe_code)]
fn own_fd(fd: i32) -> UnixStream {
    use std::os::fd::FromRawFd;
    // SAFETY: `fd` is an open socket (checked above) that the runtime passed
    // to this process for the plugin alone; nothing else in this process
    // owns or closes it, and this is called once.
    unsafe { UnixStream::from_raw_fd(fd) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read as _;
    use std::os::fd::{AsRawFd, IntoRawFd};
    use std::time::Instant;

    #[test]
    fn plugin_names_a_runtime_refuses_are_refused_at_start() {
        for ok in ["oci-tmpfs-hook", "a", "A_b.c+d-9"] {
            assert!(valid_name(ok), "{ok:?}");
        }
        for bad in ["", "oci tmpfs", "a/b", "a:b", "é", "a\tb"] {
            assert!(!valid_name(bad), "{bad:?}");
        }
        // `run` returns at once, naming the flag and what is allowed.
        use crate::nri::proto::api;
        struct Nothing;
        impl crate::nri::stub::Plugin for Nothing {
            fn create_container(
                &self,
                _: Option<&api::PodSandbox>,
                _: &api::Container,
            ) -> Result<Option<api::ContainerAdjustment>, crate::nri::stub::Refusal> {
                Ok(None)
            }
        }
        let asked =
            Identity { socket: "/nonexistent/nri.sock".into(), name: "oci tmpfs".into(), idx: "90".into() };
        let err = run(asked, &Arc::new(Nothing), &Status::default(), &Stop::default()).unwrap_err();
        assert!(err.to_string().contains("letters, digits and _ . + -"), "{err}");
    }

    #[test]
    fn only_an_inherited_socket_above_stdio_is_taken() {
        let refused = |value: &str| matches!(inherited(value), Err(StartError::Fd { .. }));
        // Not a number, stdin/stdout/stderr, a negative fd, one not open.
        for value in ["", "x", "3x", "0", "1", "2", "-1", "999999"] {
            assert!(refused(value), "{value:?}");
        }
        // An open file that is not a socket is left open and not taken.
        let file = std::fs::File::open("/proc/self/status").unwrap();
        assert!(refused(&file.as_raw_fd().to_string()));
        assert!(std::fs::metadata(format!("/proc/self/fd/{}", file.as_raw_fd())).is_ok());
        // A socket is taken: what is written on its peer is read from it.
        let (ours, mut theirs) = UnixStream::pair().unwrap();
        let fd = ours.into_raw_fd();
        let mut taken = inherited(&fd.to_string()).expect("a socket above 2");
        std::io::Write::write_all(&mut theirs, b"ok").unwrap();
        let mut got = [0u8; 2];
        taken.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"ok");
    }

    /// A stop ends a pause at once, and shuts the read side of the watched
    /// socket; a socket watched after the stop is shut at once.
    #[test]
    fn a_stop_ends_the_pause_and_the_reads() {
        let stop = Arc::new(Stop::default());
        let (a, _peer) = UnixStream::pair().unwrap();
        stop.watch(&a).unwrap();
        let t0 = Instant::now();
        let stopping = Arc::clone(&stop);
        let requester = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            stopping.request();
        });
        assert!(stop.pause(Duration::from_secs(10)), "the pause ended without a stop");
        assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
        requester.join().unwrap();
        assert_eq!((&a).read(&mut [0u8; 1]).unwrap(), 0, "the watched socket still reads");
        let (b, _peer) = UnixStream::pair().unwrap();
        stop.watch(&b).unwrap();
        assert_eq!((&b).read(&mut [0u8; 1]).unwrap(), 0, "a socket watched after the stop still reads");
        assert!(stop.pause(Duration::from_secs(10)) && stop.requested());
        assert!(!Stop::default().pause(Duration::from_millis(1)));
    }
}
