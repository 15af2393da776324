//! The metrics' HTTP server: `GET /metrics` (docs/nri.md#metrics), a
//! small HTTP/1.x server of std's `TcpListener` in threads of its own,
//! started only by `nri --metrics-address` ([`serve`]).
//!
//! It is bounded, so that no client can stall the plugin (which answers
//! the runtime on threads of its own, never waiting for this) or hold every
//! scrape: at most [`MAX_CLIENTS`] connections at once (more are closed at
//! once), a request head of at most [`MAX_HEAD`] bytes (else 431),
//! [`DEADLINE`] for the whole head however slowly it trickles in (a
//! slowloris is dropped then), [`DEADLINE`] to write the answer. Only `GET
//! /metrics` is served; another path is 404, another method 405, a head
//! that is not HTTP/1.x 400. Each answer closes its connection.
//!
//! Not here: what is counted ([`super`]), TLS or authentication (bind it to
//! the pod's IP or loopback and let the network policy decide).

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use prometheus_client::encoding::prometheus_text;

use super::Metrics;

/// The most connections served at once; one more is closed unanswered.
pub(crate) const MAX_CLIENTS: usize = 16;
/// The longest request head (request line and headers) read.
pub(crate) const MAX_HEAD: usize = 8 * 1024;
/// The time a client has to send its whole head, and then to take the answer.
pub(crate) const DEADLINE: Duration = Duration::from_secs(5);

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

/// Makes the metrics (the host config's text `config` in the info metric,
/// the node's cgroupfs at `cgroup_root` for the per-container series),
/// binds `addr` and serves `GET /metrics` from a thread of its own; the
/// address bound (a port 0 is chosen by the kernel).
///
/// # Errors
/// `addr` cannot be bound (in use, not an address of this host).
pub(crate) fn serve(addr: &str, config: &str, cgroup_root: &Path) -> Result<SocketAddr, MetricsError> {
    let bind = |source| MetricsError::Bind { addr: addr.to_string(), source };
    let listener = TcpListener::bind(addr).map_err(bind)?;
    let local = listener.local_addr().map_err(bind)?;
    let metrics = super::init(config, cgroup_root.to_path_buf())
        .ok_or_else(|| MetricsError::Twice(addr.to_string()))?;
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
pub(crate) enum Asked {
    Metrics,
    /// An answer with this status and no metrics.
    Status(u16),
}

/// Judges a request head (without its empty line): `GET /metrics` over
/// HTTP/1.0 or 1.1, headers `Name: value`.
pub(crate) fn asked(head: &[u8]) -> Asked {
    let Ok(head) = std::str::from_utf8(head) else { return Asked::Status(400) };
    let mut lines = head.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l));
    let mut parts = lines.next().unwrap_or("").split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Asked::Status(400);
    };
    let token = |s: &str| {
        !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
    };
    if !token(method) || !target.starts_with('/') || !matches!(version, "HTTP/1.0" | "HTTP/1.1") {
        return Asked::Status(400);
    }
    if lines.any(|h| h.split_once(':').is_none_or(|(name, _)| !token(name))) {
        return Asked::Status(400);
    }
    let path = target.split_once('?').map_or(target, |(p, _)| p);
    match (method, path) {
        ("GET", "/metrics") => Asked::Metrics,
        (_, "/metrics") => Asked::Status(405),
        _ => Asked::Status(404),
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
    match asked(&head) {
        Asked::Metrics => answer(&mut stream, 200, prometheus_text::CONTENT_TYPE, &metrics.encode()),
        Asked::Status(code) => answer(&mut stream, code, "", ""),
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
    fn asks() {
        let cases: &[(&str, &[u8], Asked)] = &[
            ("get metrics", b"GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: */*", Asked::Metrics),
            ("http 1.0, no headers", b"GET /metrics HTTP/1.0", Asked::Metrics),
            ("a query", b"GET /metrics?x=1 HTTP/1.1\r\nHost: x", Asked::Metrics),
            ("bare lf", b"GET /metrics HTTP/1.1\nHost: x", Asked::Metrics),
            ("post", b"POST /metrics HTTP/1.1\r\nHost: x", Asked::Status(405)),
            ("head", b"HEAD /metrics HTTP/1.1", Asked::Status(405)),
            ("another path", b"GET / HTTP/1.1", Asked::Status(404)),
            ("a prefix", b"GET /metricsx HTTP/1.1", Asked::Status(404)),
            ("garbage", b"\x16\x03\x01\x02\x00\x01", Asked::Status(400)),
            ("no version", b"GET /metrics", Asked::Status(400)),
            ("http 2", b"GET /metrics HTTP/2.0", Asked::Status(400)),
            ("two spaces", b"GET  /metrics HTTP/1.1", Asked::Status(400)),
            ("absolute form", b"GET http://x/metrics HTTP/1.1", Asked::Status(400)),
            ("bad header", b"GET /metrics HTTP/1.1\r\nno colon here", Asked::Status(400)),
            ("empty", b"", Asked::Status(400)),
        ];
        for (name, head, want) in cases {
            assert_eq!(asked(head), *want, "{name}");
        }
    }

    #[test]
    fn end_of_head_finds_either_ending() {
        assert_eq!(end_of_head(b"GET / HTTP/1.1\r\n\r\nbody"), Some(14));
        assert_eq!(end_of_head(b"GET / HTTP/1.1\n\n"), Some(14));
        assert_eq!(end_of_head(b"GET / HTTP/1.1\r\nHost: x\r\n"), None);
    }
}
