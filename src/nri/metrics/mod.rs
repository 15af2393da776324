//! `nri --metrics-address HOST:PORT`: the plugin's Prometheus metrics
//! (docs/nri.md#metrics), in the Prometheus text format (0.0.4) that the
//! `prometheus-client` crate encodes, served at `GET /metrics` by a small
//! HTTP/1.x server of std's `TcpListener` in threads of its own.
//!
//! Nothing here exists until [`serve`] runs: the metrics are one
//! [`OnceLock`] that only `nri --metrics-address` fills, and every hook the
//! service and the session call ([`get`]) is a no-op while it is empty. So
//! the hook, the wrapper and a plugin without the flag never build a
//! registry, a thread or a socket.
//!
//! The server is bounded, so that no client can stall the plugin (which
//! answers the runtime on threads of its own, never waiting for this) or
//! hold every scrape: at most [`MAX_CLIENTS`] connections at once (more are
//! closed at once), a request head of at most [`MAX_HEAD`] bytes (else 431),
//! [`DEADLINE`] for the whole head however slowly it trickles in (a
//! slowloris is dropped then), [`DEADLINE`] to write the answer. Only `GET
//! /metrics` is served; another path is 404, another method 405, a head
//! that is not HTTP/1.x 400. Each answer closes its connection.
//!
//! Not here: TLS or authentication (bind it to the pod's IP or loopback and
//! let the network policy decide), push, per-container labels (their
//! number would grow without bound: the reasons are a fixed set).

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use prometheus_client::encoding::prometheus_text;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

use crate::plan::{Action, Plan};

/// The most connections served at once; one more is closed unanswered.
pub(crate) const MAX_CLIENTS: usize = 16;
/// The longest request head (request line and headers) read.
pub(crate) const MAX_HEAD: usize = 8 * 1024;
/// The time a client has to send its whole head, and then to take the answer.
pub(crate) const DEADLINE: Duration = Duration::from_secs(5);

/// The metric names' common prefix.
const PREFIX: &str = "oci_tmpfs_hook_nri";

/// Why a container got no hook (a fixed set: a label value each).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum LeftAlone {
    /// A pod's sandbox (pause) container.
    Sandbox,
    /// Its root is writable (and no annotation turns us on).
    WritableRoot,
    /// `oci-tmpfs-hook/enabled: "false"`.
    DisabledByAnnotation,
    /// No mount namespace of its own: a tmpfs would land in the runtime's,
    /// or in one it shares.
    NoMountNamespace,
    /// Enabled, but every target was left alone (a volume there, a memory
    /// limit below 1 MiB, ...): the plan's notes say which.
    NothingToDo,
}

impl LeftAlone {
    /// Why `plan` has no action, when it has none.
    pub(crate) fn of(plan: &Plan) -> Option<LeftAlone> {
        if !plan.actions.is_empty() {
            return None;
        }
        Some(if plan.enabled {
            LeftAlone::NothingToDo
        } else if plan.why.starts_with("a pod sandbox container") {
            LeftAlone::Sandbox
        } else if plan.why.ends_with(crate::plan::NO_OWN_MOUNT_NAMESPACE) {
            LeftAlone::NoMountNamespace
        } else if plan.why.ends_with("=false") {
            LeftAlone::DisabledByAnnotation
        } else {
            LeftAlone::WritableRoot
        })
    }

    fn label(self) -> &'static str {
        match self {
            LeftAlone::Sandbox => "sandbox",
            LeftAlone::WritableRoot => "writable_root",
            LeftAlone::DisabledByAnnotation => "disabled_by_annotation",
            LeftAlone::NoMountNamespace => "no_mount_namespace",
            LeftAlone::NothingToDo => "nothing_to_do",
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabel {
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FailedLabels {
    reason: &'static str,
    /// The host config's `on_error`: `fail` (the container was not created)
    /// or `warn` (it started without our hook).
    on_error: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TargetLabel {
    /// `tmp` (`/tmp` and the temp dirs) or `shm` (`/dev/shm`).
    target: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct InfoLabels {
    version: &'static str,
    /// FNV-1a (64 bits, hex) of the host config's text as last read: equal
    /// on nodes with equal configs, changed when the ConfigMap changed.
    config_hash: String,
}

/// Every metric of the plugin, and the registry that encodes them.
pub(crate) struct Metrics {
    registry: Registry,
    seen: Counter,
    acted_on: Counter,
    left_alone: Family<ReasonLabel, Counter>,
    failed: Family<FailedLabels, Counter>,
    granted: Family<TargetLabel, Histogram>,
    plan_seconds: Histogram,
    adjustment_seconds: Histogram,
    registrations: Counter,
    reconnects: Counter,
    registered: Gauge,
    info: Family<InfoLabels, Gauge>,
    config_hash: Mutex<String>,
}

/// Latency buckets: 25 µs doubling to 1.6 s (NRI's request timeout is 2 s).
fn seconds_histogram() -> Histogram {
    Histogram::new(exponential_buckets(25e-6, 2.0, 17))
}

/// Size buckets: 1 MiB, times 4, to 1 TiB.
fn bytes_histogram() -> Histogram {
    Histogram::new(exponential_buckets(1_048_576.0, 4.0, 11))
}

impl Metrics {
    fn new() -> Metrics {
        let mut registry = Registry::with_prefix(PREFIX);
        let m = Metrics {
            seen: Counter::default(),
            acted_on: Counter::default(),
            left_alone: Family::default(),
            failed: Family::default(),
            granted: Family::new_with_constructor(bytes_histogram as fn() -> Histogram),
            plan_seconds: seconds_histogram(),
            adjustment_seconds: seconds_histogram(),
            registrations: Counter::default(),
            reconnects: Counter::default(),
            registered: Gauge::default(),
            info: Family::default(),
            config_hash: Mutex::new(String::new()),
            registry: Registry::default(),
        };
        registry.register("containers_seen", "CreateContainer requests answered", m.seen.clone());
        registry.register(
            "containers_acted_on",
            "containers whose adjustment names our hook",
            m.acted_on.clone(),
        );
        registry.register(
            "containers_left_alone",
            "containers given an empty adjustment, by reason",
            m.left_alone.clone(),
        );
        registry.register(
            "containers_failed",
            "containers that could not be planned, by reason and the host config's on_error",
            m.failed.clone(),
        );
        registry.register(
            "tmpfs_granted_bytes",
            "the size of each tmpfs our hook is asked to mount or grow, by target",
            m.granted.clone(),
        );
        registry.register(
            "plan_duration_seconds",
            "time to turn one CreateContainer request into a plan",
            m.plan_seconds.clone(),
        );
        registry.register(
            "adjustment_duration_seconds",
            "time to answer one CreateContainer (host config read, plan, adjustment)",
            m.adjustment_seconds.clone(),
        );
        registry.register("registrations", "successful RegisterPlugin calls", m.registrations.clone());
        registry.register(
            "reconnects",
            "connections to the runtime's NRI socket after the first",
            m.reconnects.clone(),
        );
        registry.register("registered", "1 while registered with the runtime", m.registered.clone());
        registry.register("info", "the plugin's version and host config hash", m.info.clone());
        Metrics { registry, ..m }
    }

    /// One container answered in `took`: seen, and its outcome.
    pub(crate) fn answered(&self, took: Duration) {
        self.seen.inc();
        self.adjustment_seconds.observe(took.as_secs_f64());
    }

    /// The plan made for one container, in `took`.
    pub(crate) fn planned(&self, plan: &Plan, took: Duration) {
        self.plan_seconds.observe(took.as_secs_f64());
        match LeftAlone::of(plan) {
            Some(why) => {
                self.left_alone.get_or_create(&ReasonLabel { reason: why.label() }).inc();
            }
            None => {
                self.acted_on.inc();
                for action in &plan.actions {
                    let target = match action {
                        Action::MountTmpfs { .. } => "tmp",
                        Action::Shm { .. } => "shm",
                    };
                    #[allow(clippy::cast_precision_loss)] // sizes far below 2^53
                    let bytes = action.tmpfs().size.bytes.0 as f64;
                    self.granted.get_or_create(&TargetLabel { target }).observe(bytes);
                }
            }
        }
    }

    /// A container that could not be planned (`reason`: a fixed word).
    pub(crate) fn failed(&self, reason: &'static str, fail: bool) {
        let on_error = if fail { "fail" } else { "warn" };
        self.failed.get_or_create(&FailedLabels { reason, on_error }).inc();
    }

    /// The host config as read now (`text`); the info metric follows it.
    pub(crate) fn config(&self, text: &str) {
        let hash = format!("{:016x}", fnv1a(text.as_bytes()));
        let mut last = self.config_hash.lock().unwrap_or_else(|p| p.into_inner());
        if *last == hash {
            return;
        }
        let old = InfoLabels { version: env!("CARGO_PKG_VERSION"), config_hash: std::mem::take(&mut *last) };
        self.info.remove(&old);
        self.info.get_or_create(&InfoLabels { config_hash: hash.clone(), ..old }).set(1);
        *last = hash;
    }

    /// `RegisterPlugin` succeeded.
    pub(crate) fn registered(&self) {
        self.registrations.inc();
        self.registered.set(1);
    }

    /// The session ended: no longer registered.
    pub(crate) fn session_ended(&self) {
        self.registered.set(0);
    }

    /// A new connection to the runtime after an earlier one.
    pub(crate) fn reconnected(&self) {
        self.reconnects.inc();
    }

    /// The text of `/metrics`.
    fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String does not fail.
        let _ = prometheus_text::encode(&mut out, &self.registry);
        out
    }
}

/// 64-bit FNV-1a: a change detector, not a cryptographic hash.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

static METRICS: OnceLock<Metrics> = OnceLock::new();

/// The metrics, when `--metrics-address` was given.
pub(crate) fn get() -> Option<&'static Metrics> {
    METRICS.get()
}

/// Why the metrics endpoint cannot start.
#[derive(Debug, thiserror::Error)]
pub(crate) enum MetricsError {
    #[error("--metrics-address {addr}: listening")]
    Bind {
        addr: String,
        #[source]
        source: io::Error,
    },
    #[error("--metrics-address {0}: serving twice")]
    Twice(String),
}

/// Makes the metrics (the host config's text `config` in the info metric),
/// binds `addr` and serves `GET /metrics` from a thread of its own; the
/// address bound (a port 0 is chosen by the kernel).
///
/// # Errors
/// `addr` cannot be bound (in use, not an address of this host).
pub(crate) fn serve(addr: &str, config: &str) -> Result<SocketAddr, MetricsError> {
    let bind = |source| MetricsError::Bind { addr: addr.to_string(), source };
    let listener = TcpListener::bind(addr).map_err(bind)?;
    let local = listener.local_addr().map_err(bind)?;
    METRICS.set(Metrics::new()).map_err(|_| MetricsError::Twice(addr.to_string()))?;
    let metrics = get().unwrap_or_else(|| unreachable!("set above"));
    metrics.config(config);
    std::thread::Builder::new()
        .name("nri-metrics".into())
        .spawn(move || accept(&listener, metrics))
        .map_err(bind)?;
    Ok(local)
}

/// The accept loop: each client on a thread of its own, at most
/// [`MAX_CLIENTS`] at once.
fn accept(listener: &TcpListener, metrics: &'static Metrics) {
    let active = Arc::new(AtomicUsize::new(0));
    for stream in listener.incoming() {
        let stream = match stream {
            Ok(s) => s,
            Err(e) => {
                // EMFILE and the like: back off instead of spinning.
                log::debug!("nri: metrics: accept: {e}");
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
        };
        if active.fetch_add(1, Ordering::AcqRel) >= MAX_CLIENTS {
            active.fetch_sub(1, Ordering::AcqRel);
            log::debug!("nri: metrics: {MAX_CLIENTS} clients already; closing a new one");
            continue;
        }
        let slot = Slot(Arc::clone(&active));
        let spawned = std::thread::Builder::new().name("nri-metrics-client".into()).spawn(move || {
            let _slot = slot;
            if let Err(e) = client(stream, metrics) {
                log::debug!("nri: metrics: a client: {e}");
            }
        });
        if let Err(e) = spawned {
            log::warn!("nri: metrics: starting a client's thread: {e}");
        }
    }
}

/// A taken place among the [`MAX_CLIENTS`], given back on drop.
struct Slot(Arc<AtomicUsize>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// What a request head asks for.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Route {
    Metrics,
    /// An answer with this status and no metrics.
    Status(u16),
}

/// Judges a request head (without its empty line): `GET /metrics` over
/// HTTP/1.0 or 1.1, headers `Name: value`.
pub(crate) fn route(head: &[u8]) -> Route {
    let Ok(head) = std::str::from_utf8(head) else { return Route::Status(400) };
    let mut lines = head.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l));
    let mut parts = lines.next().unwrap_or("").split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Route::Status(400);
    };
    let token = |s: &str| {
        !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
    };
    if !token(method) || !target.starts_with('/') || !matches!(version, "HTTP/1.0" | "HTTP/1.1") {
        return Route::Status(400);
    }
    if lines.any(|h| h.split_once(':').is_none_or(|(name, _)| !token(name))) {
        return Route::Status(400);
    }
    let path = target.split_once('?').map_or(target, |(p, _)| p);
    match (method, path) {
        ("GET", "/metrics") => Route::Metrics,
        (_, "/metrics") => Route::Status(405),
        _ => Route::Status(404),
    }
}

/// Why a client got no answer.
#[derive(Debug, thiserror::Error)]
enum ClientError {
    #[error("no whole request head within {DEADLINE:?}")]
    Slow,
    #[error(transparent)]
    Io(#[from] io::Error),
}

/// Serves one connection: reads its head within [`DEADLINE`], answers, closes.
fn client(mut stream: TcpStream, metrics: &Metrics) -> Result<(), ClientError> {
    let head = match read_head(&mut stream)? {
        Head::Whole(head) => head,
        Head::TooLarge => return answer(&mut stream, 431, "", ""),
        Head::Closed => return Ok(()),
    };
    match route(&head) {
        Route::Metrics => answer(&mut stream, 200, prometheus_text::CONTENT_TYPE, &metrics.encode()),
        Route::Status(code) => answer(&mut stream, code, "", ""),
    }
}

enum Head {
    Whole(Vec<u8>),
    TooLarge,
    /// The client closed before a whole head.
    Closed,
}

/// Reads up to the empty line that ends a head, within [`DEADLINE`] in all.
fn read_head(stream: &mut TcpStream) -> Result<Head, ClientError> {
    let deadline = Instant::now() + DEADLINE;
    let mut head = Vec::with_capacity(1024);
    let mut buf = [0u8; 1024];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(ClientError::Slow);
        }
        stream.set_read_timeout(Some(left))?;
        let n = match stream.read(&mut buf) {
            Ok(0) => return Ok(Head::Closed),
            Ok(n) => n,
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
                return Err(ClientError::Slow)
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e.into()),
        };
        let from = head.len().saturating_sub(3);
        head.extend_from_slice(&buf[..n]);
        if let Some(end) = end_of_head(&head[from..]) {
            head.truncate(from + end);
            return Ok(if head.len() > MAX_HEAD { Head::TooLarge } else { Head::Whole(head) });
        }
        if head.len() > MAX_HEAD {
            return Ok(Head::TooLarge);
        }
    }
}

/// Where the head ends in `bytes`: the offset of its `\r\n\r\n` (or `\n\n`).
fn end_of_head(bytes: &[u8]) -> Option<usize> {
    let crlf = bytes.windows(4).position(|w| w == b"\r\n\r\n");
    let lf = bytes.windows(2).position(|w| w == b"\n\n");
    match (crlf, lf) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

fn reason(code: u16) -> &'static str {
    match code {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        431 => "Request Header Fields Too Large",
        _ => "",
    }
}

/// Writes the answer within [`DEADLINE`] and closes; after an error status,
/// reads what the client still sends for a moment, so that closing does
/// not reset the connection before the client reads the status.
fn answer(stream: &mut TcpStream, code: u16, content_type: &str, body: &str) -> Result<(), ClientError> {
    stream.set_write_timeout(Some(DEADLINE))?;
    let mut out = format!("HTTP/1.1 {code} {}\r\nConnection: close\r\n", reason(code));
    if !content_type.is_empty() {
        out.push_str(&format!("Content-Type: {content_type}\r\n"));
    }
    if code == 405 {
        out.push_str("Allow: GET\r\n");
    }
    out.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
    stream.write_all(out.as_bytes())?;
    stream.flush()?;
    let _ = stream.shutdown(std::net::Shutdown::Write);
    if code != 200 {
        // At most 64 KiB and 1 s in all: a trickling client gets no more.
        let until = Instant::now() + Duration::from_secs(1);
        let mut sink = [0u8; 4096];
        let mut drained = 0;
        loop {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() || drained > 64 * 1024 || stream.set_read_timeout(Some(left)).is_err() {
                break;
            }
            match stream.read(&mut sink) {
                Ok(n @ 1..) => drained += n,
                _ => break,
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes() {
        let cases: &[(&str, &[u8], Route)] = &[
            ("get metrics", b"GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: */*", Route::Metrics),
            ("http 1.0, no headers", b"GET /metrics HTTP/1.0", Route::Metrics),
            ("a query", b"GET /metrics?x=1 HTTP/1.1\r\nHost: x", Route::Metrics),
            ("bare lf", b"GET /metrics HTTP/1.1\nHost: x", Route::Metrics),
            ("post", b"POST /metrics HTTP/1.1\r\nHost: x", Route::Status(405)),
            ("head", b"HEAD /metrics HTTP/1.1", Route::Status(405)),
            ("another path", b"GET / HTTP/1.1", Route::Status(404)),
            ("a prefix", b"GET /metricsx HTTP/1.1", Route::Status(404)),
            ("garbage", b"\x16\x03\x01\x02\x00\x01", Route::Status(400)),
            ("no version", b"GET /metrics", Route::Status(400)),
            ("http 2", b"GET /metrics HTTP/2.0", Route::Status(400)),
            ("two spaces", b"GET  /metrics HTTP/1.1", Route::Status(400)),
            ("absolute form", b"GET http://x/metrics HTTP/1.1", Route::Status(400)),
            ("bad header", b"GET /metrics HTTP/1.1\r\nno colon here", Route::Status(400)),
            ("empty", b"", Route::Status(400)),
        ];
        for (name, head, want) in cases {
            assert_eq!(route(head), *want, "{name}");
        }
    }

    #[test]
    fn end_of_head_finds_either_ending() {
        assert_eq!(end_of_head(b"GET / HTTP/1.1\r\n\r\nbody"), Some(14));
        assert_eq!(end_of_head(b"GET / HTTP/1.1\n\n"), Some(14));
        assert_eq!(end_of_head(b"GET / HTTP/1.1\r\nHost: x\r\n"), None);
    }

    fn plan_of(config: serde_json::Value) -> Plan {
        let spec: crate::oci::Spec = serde_json::from_value(config).unwrap();
        let host = crate::plan::HostFacts { ram: crate::size::Bytes(8 << 30) };
        crate::plan::plan_for(
            &spec,
            None,
            &crate::settings::Settings::default(),
            host,
            &crate::plan::UserFacts::HOOK,
        )
        .unwrap()
    }

    /// The reasons read the plan's own words: a change of wording there
    /// fails here, not silently in a dashboard.
    #[test]
    fn left_alone_reasons_follow_the_plan() {
        let spec_ns = |readonly: bool, ann: serde_json::Value, ns: serde_json::Value| {
            serde_json::json!({
                "ociVersion": "1.0.2",
                "root": {"path": "rootfs", "readonly": readonly},
                "process": {"cwd": "/", "user": {"uid": 0, "gid": 0}, "args": ["sh"]},
                "annotations": ann,
                "linux": {"namespaces": ns},
            })
        };
        let spec = |readonly: bool, ann: serde_json::Value| {
            spec_ns(readonly, ann, serde_json::json!([{"type": "mount"}]))
        };
        let none = serde_json::json!({});
        let cases = [
            ("read-only", spec(true, none.clone()), None),
            ("writable", spec(false, none.clone()), Some(LeftAlone::WritableRoot)),
            (
                "sandbox",
                spec(true, serde_json::json!({"io.kubernetes.cri.container-type": "sandbox"})),
                Some(LeftAlone::Sandbox),
            ),
            (
                "disabled",
                spec(true, serde_json::json!({"oci-tmpfs-hook/enabled": "false"})),
                Some(LeftAlone::DisabledByAnnotation),
            ),
            (
                "a joined mount namespace",
                spec_ns(true, none.clone(), serde_json::json!([{"type": "mount", "path": "/proc/9/ns/mnt"}])),
                Some(LeftAlone::NoMountNamespace),
            ),
            (
                "no mount namespace, enabled by annotation",
                spec_ns(false, serde_json::json!({"oci-tmpfs-hook/enabled": "true"}), serde_json::json!([])),
                Some(LeftAlone::NoMountNamespace),
            ),
            (
                "enabled on a writable root",
                spec(false, serde_json::json!({"oci-tmpfs-hook/enabled": "true"})),
                None,
            ),
        ];
        for (name, config, want) in cases {
            assert_eq!(LeftAlone::of(&plan_of(config)), want, "{name}");
        }
    }

    #[test]
    fn fnv1a_known_values() {
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
    }
}
