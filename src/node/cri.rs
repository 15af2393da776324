//! Asking the running containerd what it has loaded: one CRI
//! `RuntimeService/Status` call with `verbose = true` on its gRPC socket,
//! reached through the host root (the hostPath mount): no network, no
//! hostPID, no binary in the (`scratch`) node image. The answer holds the
//! runtime handlers the daemon serves (`runtime_handlers`, CRI v1.30+,
//! containerd 2.x) and, in `info["config"]`, the CRI plugin's config as the
//! daemon loaded it at its start (containerd 1.6 and 2.x); see
//! docs/kubernetes.md#is-the-handler-loaded.
//!
//! The call is the smallest gRPC client there is, written here: HTTP/2 with
//! prior knowledge (RFC 9113 §3.3) over the unix socket, the request headers
//! as HPACK literals without indexing (RFC 7541 §6.2.2), one DATA frame with
//! the length-prefixed message, and the response's DATA frames read until the
//! stream ends; the response headers are not decoded (an error answer has no
//! message, which is how a failed call is told).

use std::io::{self, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use rustix::fs::{Mode, OFlags, ResolveFlags};

/// How long one CRI call may take.
const TIMEOUT: Duration = Duration::from_secs(10);
/// Largest response read (a verbose Status is a few KiB).
const MAX_RESPONSE: usize = 4 << 20;
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const DATA: u8 = 0x0;
const HEADERS: u8 = 0x1;
const RST_STREAM: u8 = 0x3;
const SETTINGS: u8 = 0x4;
const PING: u8 = 0x6;
const GOAWAY: u8 = 0x7;
const WINDOW_UPDATE: u8 = 0x8;
const END_STREAM: u8 = 0x1;
const ACK: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const PADDED: u8 = 0x8;

/// What a CRI `Status` said.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct CriStatus {
    /// `runtime_handlers[].name` (empty before CRI v1.30).
    pub handlers: Vec<String>,
    /// `info["config"]`: the CRI plugin's config as loaded, JSON.
    pub config: Option<String>,
}

/// The CRI `Status` of the daemon whose socket is host path `socket` under
/// `host_root` (resolved inside the host root, `RESOLVE_IN_ROOT`).
///
/// # Errors
/// No socket there, no answer, or an answer that is not a Status.
pub(crate) fn status(host_root: &Path, socket: &Path) -> io::Result<CriStatus> {
    let root = crate::files::open_dir(host_root)?;
    let rel = socket.strip_prefix("/").unwrap_or(socket);
    let how = ResolveFlags::IN_ROOT | ResolveFlags::NO_MAGICLINKS;
    let fd = rustix::fs::openat2(&root, rel, OFlags::PATH | OFlags::CLOEXEC, Mode::empty(), how)?;
    // connect(2) takes a path: the O_PATH handle's, so that what is reached
    // is what was resolved inside the host root.
    let mut conn = UnixStream::connect(format!("/proc/self/fd/{}", fd.as_raw_fd()))?;
    conn.set_read_timeout(Some(TIMEOUT))?;
    conn.set_write_timeout(Some(TIMEOUT))?;
    // StatusRequest { verbose: true }.
    let message = call(&mut conn, "/runtime.v1.RuntimeService/Status", &[0x08, 0x01])?;
    parse_status(&message).ok_or_else(|| bad("the CRI Status answer is not a StatusResponse"))
}

fn bad(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.to_string())
}

fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len() as u32;
    let mut f = Vec::with_capacity(9 + payload.len());
    f.extend_from_slice(&len.to_be_bytes()[1..]);
    f.extend_from_slice(&[kind, flags]);
    f.extend_from_slice(&stream.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// One header as an HPACK literal without indexing, new name, no Huffman.
fn literal(out: &mut Vec<u8>, name: &str, value: &str) {
    out.push(0);
    for s in [name, value] {
        assert!(s.len() < 127, "a header of one byte's length");
        out.push(s.len() as u8);
        out.extend_from_slice(s.as_bytes());
    }
}

/// One unary gRPC call on stream 1; the response message.
fn call(conn: &mut UnixStream, path: &str, request: &[u8]) -> io::Result<Vec<u8>> {
    let mut out = PREFACE.to_vec();
    // SETTINGS_INITIAL_WINDOW_SIZE = 4 MiB, and as much for the connection.
    out.extend(frame(SETTINGS, 0, 0, &[0x00, 0x04, 0x00, 0x40, 0x00, 0x00]));
    out.extend(frame(WINDOW_UPDATE, 0, 0, &(4u32 << 20).to_be_bytes()));
    let mut headers = Vec::new();
    for (n, v) in [
        (":method", "POST"),
        (":scheme", "http"),
        (":path", path),
        (":authority", "localhost"),
        ("content-type", "application/grpc"),
        ("te", "trailers"),
    ] {
        literal(&mut headers, n, v);
    }
    out.extend(frame(HEADERS, END_HEADERS, 1, &headers));
    let mut body = vec![0];
    body.extend_from_slice(&(request.len() as u32).to_be_bytes());
    body.extend_from_slice(request);
    out.extend(frame(DATA, END_STREAM, 1, &body));
    conn.write_all(&out)?;

    let mut data = Vec::new();
    loop {
        let mut head = [0u8; 9];
        conn.read_exact(&mut head)?;
        let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
        let (kind, flags) = (head[3], head[4]);
        let stream = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff;
        if len > MAX_RESPONSE || data.len() + len > MAX_RESPONSE {
            return Err(bad("the CRI answer is too large"));
        }
        let mut payload = vec![0u8; len];
        conn.read_exact(&mut payload)?;
        match kind {
            SETTINGS if flags & ACK == 0 => conn.write_all(&frame(SETTINGS, ACK, 0, &[]))?,
            PING if flags & ACK == 0 => conn.write_all(&frame(PING, ACK, 0, &payload))?,
            GOAWAY => return Err(bad("the CRI socket closed the connection (GOAWAY)")),
            RST_STREAM if stream == 1 => return Err(bad("the CRI socket reset the call (RST_STREAM)")),
            DATA if stream == 1 => {
                let body = if flags & PADDED != 0 {
                    let pad = *payload.first().unwrap_or(&0) as usize;
                    payload.get(1..payload.len().saturating_sub(pad)).unwrap_or_default()
                } else {
                    &payload[..]
                };
                data.extend_from_slice(body);
                if flags & END_STREAM != 0 {
                    break;
                }
            }
            HEADERS if stream == 1 && flags & END_STREAM != 0 => break,
            _ => {}
        }
    }
    // One length-prefixed, uncompressed message; none is a gRPC error.
    match data.as_slice() {
        [0, a, b, c, d, rest @ ..] if u32::from_be_bytes([*a, *b, *c, *d]) as usize == rest.len() => {
            Ok(rest.to_vec())
        }
        [] => {
            Err(bad("the CRI Status call failed (a gRPC error, no answer): is this containerd's CRI socket?"))
        }
        _ => Err(bad("the CRI answer is not one uncompressed gRPC message")),
    }
}

/// A protobuf varint at the start of `buf`, and what follows it.
fn varint(buf: &[u8]) -> Option<(u64, &[u8])> {
    let mut v = 0u64;
    for (i, b) in buf.iter().enumerate().take(10) {
        v |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Some((v, &buf[i + 1..]));
        }
    }
    None
}

/// The length-delimited fields of a protobuf message, `(number, bytes)`;
/// other wire types are skipped.
fn fields(mut buf: &[u8]) -> Option<Vec<(u64, &[u8])>> {
    let mut out = Vec::new();
    while !buf.is_empty() {
        let (key, rest) = varint(buf)?;
        buf = match key & 7 {
            0 => varint(rest)?.1,
            1 => rest.get(8..)?,
            5 => rest.get(4..)?,
            2 => {
                let (len, rest) = varint(rest)?;
                let len = usize::try_from(len).ok()?;
                out.push((key >> 3, rest.get(..len)?));
                rest.get(len..)?
            }
            _ => return None,
        };
    }
    Some(out)
}

/// `StatusResponse`: 2 `info` (map entries: 1 key, 2 value), 3
/// `runtime_handlers` (1 `name`).
fn parse_status(message: &[u8]) -> Option<CriStatus> {
    let mut status = CriStatus::default();
    let text = |b: &[u8]| String::from_utf8(b.to_vec()).ok();
    for (number, bytes) in fields(message)? {
        let inner = fields(bytes)?;
        let field = |n| inner.iter().find(|(k, _)| *k == n).map(|(_, v)| *v);
        match number {
            2 if field(1) == Some(b"config".as_slice()) => status.config = text(field(2).unwrap_or_default()),
            3 => status.handlers.push(text(field(1).unwrap_or_default())?),
            _ => {}
        }
    }
    Some(status)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_response_fields() {
        // status {}, info {"config": "{}"}, info {"golang": "x"}, runtime_handlers {name: "runc"}
        let mut m = vec![0x0a, 0x00];
        m.extend([0x12, 0x0c, 0x0a, 0x06]);
        m.extend(b"config");
        m.extend([0x12, 0x02]);
        m.extend(b"{}");
        m.extend([0x12, 0x0b, 0x0a, 0x06]);
        m.extend(b"golang");
        m.extend([0x12, 0x01, b'x']);
        m.extend([0x1a, 0x06, 0x0a, 0x04]);
        m.extend(b"runc");
        let s = parse_status(&m).unwrap();
        assert_eq!(s, CriStatus { handlers: vec!["runc".into()], config: Some("{}".into()) });
        assert_eq!(parse_status(&[0x12, 0x05, 0x00]), None, "truncated");
    }

    #[test]
    fn frames_have_the_nine_byte_header() {
        assert_eq!(frame(SETTINGS, ACK, 0, &[]), [0, 0, 0, 4, 1, 0, 0, 0, 0]);
        let mut h = Vec::new();
        literal(&mut h, "te", "trailers");
        assert_eq!(h, b"\x00\x02te\x08trailers");
    }
}
