//! NRI's connection multiplexer: one unix socket carries several byte
//! streams ("conns"), each chunk as a frame `u32 BE conn id | u32 BE length |
//! payload`. Conn 1 carries the plugin's ttRPC service (the runtime is the
//! client), conn 2 the runtime's (the plugin is the client).
//!
//! [`relay`] joins each conn to a local unix stream, so that an unmodified
//! ttRPC server and client (the `ttrpc` crate, which speaks to a socket of
//! its own) run over the mux. A conn is a byte stream: frames are not
//! messages, and the local stream reassembles them. Frames written here carry
//! at most [`MAX_WRITE`] payload bytes: containerd reads each conn through a
//! 4 KiB buffer and drops a plugin that sends more in one frame. Frames read
//! are checked before anything is allocated: an unknown conn or a length over
//! [`MAX_FRAME`] ends the session with an error, never a panic.

use std::io::{self, Read, Write};
use std::net::Shutdown;
use std::os::unix::net::UnixStream;
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

/// The conn of the plugin's service (`nri.pkg.api.v1alpha1.Plugin`).
pub const PLUGIN_CONN: u32 = 1;
/// The conn of the runtime's service (`nri.pkg.api.v1alpha1.Runtime`).
pub const RUNTIME_CONN: u32 = 2;
/// The most payload bytes one frame written here carries.
pub const MAX_WRITE: usize = 4096;
/// The longest frame accepted from the socket: ttRPC's own message limit
/// (4 MiB) plus its header; a frame never needs more than one message.
pub const MAX_FRAME: u32 = (4 << 20) + 10;
/// Bytes of a frame header.
pub const HEADER: usize = 8;
/// How long [`relay`] waits, once the socket ends, for the local streams to
/// answer what they already took.
pub const DRAIN: Duration = Duration::from_millis(500);

/// Why a session over the mux ended.
#[derive(Debug, thiserror::Error)]
pub enum MuxError {
    #[error("the runtime closed the NRI socket")]
    Eof,
    #[error("the NRI socket closed inside a frame of conn {conn} ({got} of {want} bytes)")]
    Truncated { conn: u32, got: usize, want: usize },
    #[error("reading the NRI socket")]
    Read(#[source] io::Error),
    #[error("writing the NRI socket")]
    Write(#[source] io::Error),
    #[error("a frame of {len} bytes on conn {conn} from the NRI socket, over the {MAX_FRAME}-byte limit")]
    Oversized { conn: u32, len: u32 },
    #[error("a frame for conn {0} from the NRI socket, which is neither 1 (plugin) nor 2 (runtime)")]
    UnknownConn(u32),
}

/// One frame's header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub conn: u32,
    pub len: u32,
}

impl Header {
    fn parse(b: [u8; HEADER]) -> Header {
        Header {
            conn: u32::from_be_bytes([b[0], b[1], b[2], b[3]]),
            len: u32::from_be_bytes([b[4], b[5], b[6], b[7]]),
        }
    }
}

/// Reads exactly `buf.len()` bytes; `Ok(n < len)` at EOF.
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// Reads one frame into `payload` (replacing its contents), checking its
/// header against `known` conns and [`MAX_FRAME`] first.
///
/// # Errors
/// EOF, a read error, a truncated, oversized or unknown-conn frame.
pub fn read_frame(r: &mut impl Read, known: &[u32], payload: &mut Vec<u8>) -> Result<u32, MuxError> {
    let mut head = [0u8; HEADER];
    match read_full(r, &mut head).map_err(MuxError::Read)? {
        0 => return Err(MuxError::Eof),
        HEADER => {}
        got => return Err(MuxError::Truncated { conn: 0, got, want: HEADER }),
    }
    let h = Header::parse(head);
    if !known.contains(&h.conn) {
        return Err(MuxError::UnknownConn(h.conn));
    }
    if h.len > MAX_FRAME {
        return Err(MuxError::Oversized { conn: h.conn, len: h.len });
    }
    payload.clear();
    payload.resize(h.len as usize, 0);
    let got = read_full(r, payload).map_err(MuxError::Read)?;
    if got < payload.len() {
        return Err(MuxError::Truncated { conn: h.conn, got, want: payload.len() });
    }
    Ok(h.conn)
}

/// Writes `data` on `conn` as frames of at most [`MAX_WRITE`] payload bytes,
/// each with one `write_all` (header and payload together).
///
/// # Errors
/// The socket's write error.
pub fn write_frames(w: &mut impl Write, conn: u32, data: &[u8]) -> io::Result<()> {
    let mut frame = Vec::with_capacity(HEADER + MAX_WRITE.min(data.len()));
    for chunk in data.chunks(MAX_WRITE) {
        frame.clear();
        frame.extend_from_slice(&conn.to_be_bytes());
        frame.extend_from_slice(&(chunk.len() as u32).to_be_bytes());
        frame.extend_from_slice(chunk);
        w.write_all(&frame)?;
    }
    Ok(())
}

/// Relays between the NRI `socket` and one local stream per conn until the
/// socket ends (EOF, an error, a bad frame, or its read side shut by the
/// plugin's stop); then it forwards nothing more to the local streams, each
/// of which reads its end, and keeps relaying what they write back until
/// each has closed (a ttRPC server answers the requests in flight, then
/// closes), for at most [`DRAIN`]; then it shuts every stream down and
/// returns why. A local stream that closes stops its own conn only: the
/// runtime's client conn is dropped after registration, and frames still
/// arriving for a closed conn are discarded.
///
/// # Errors
/// Always: the reason the session ended ([`MuxError::Eof`] for a clean close).
pub fn relay(socket: UnixStream, locals: Vec<(u32, UnixStream)>) -> MuxError {
    let writer = match socket.try_clone() {
        Ok(w) => Arc::new(Mutex::new(w)),
        Err(e) => return MuxError::Read(e),
    };
    let known: Vec<u32> = locals.iter().map(|(c, _)| *c).collect();
    let mut outs = Vec::new();
    let mut pumps = Vec::new();
    let (done, pumped) = mpsc::channel();
    for (conn, local) in locals {
        match local.try_clone() {
            Ok(out) => outs.push((conn, Some(out))),
            Err(e) => return MuxError::Read(e),
        }
        let (writer, socket, done) = (Arc::clone(&writer), socket.try_clone(), done.clone());
        pumps.push(std::thread::spawn(move || {
            pump(local, conn, &writer, socket.ok());
            let _ = done.send(());
        }));
    }
    let why = demux(&socket, &known, &mut outs);
    let open = || outs.iter().filter_map(|(_, o)| o.as_ref());
    for out in open() {
        let _ = out.shutdown(Shutdown::Write);
    }
    let deadline = Instant::now() + DRAIN;
    for _ in 0..pumps.len() {
        if pumped.recv_timeout(deadline.saturating_duration_since(Instant::now())).is_err() {
            break;
        }
    }
    let _ = socket.shutdown(Shutdown::Both);
    for out in open() {
        let _ = out.shutdown(Shutdown::Both);
    }
    for p in pumps {
        let _ = p.join();
    }
    why
}

/// The socket to the local streams, until the socket ends.
fn demux(socket: &UnixStream, known: &[u32], outs: &mut [(u32, Option<UnixStream>)]) -> MuxError {
    let mut reader = socket;
    let mut payload = Vec::new();
    loop {
        let conn = match read_frame(&mut reader, known, &mut payload) {
            Ok(c) => c,
            Err(e) => return e,
        };
        let Some(slot) = outs.iter_mut().find(|(c, _)| *c == conn) else { continue };
        if let Some(out) = &mut slot.1 {
            if out.write_all(&payload).is_err() {
                log::debug!("nri: conn {conn} closed on our side; discarding what arrives for it");
                slot.1 = None;
            }
        }
    }
}

/// One local stream to the socket, framed, until either ends. A socket write
/// error ends the whole session (the demux sees the shutdown).
fn pump(mut local: UnixStream, conn: u32, writer: &Mutex<UnixStream>, socket: Option<UnixStream>) {
    let mut buf = vec![0u8; MAX_WRITE];
    loop {
        let n = match local.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        let mut w = match writer.lock() {
            Ok(w) => w,
            Err(poisoned) => poisoned.into_inner(),
        };
        if let Err(e) = write_frames(&mut *w, conn, &buf[..n]) {
            log::warn!("nri: {}", crate::error::chain(&MuxError::Write(e)));
            if let Some(s) = &socket {
                let _ = s.shutdown(Shutdown::Both);
            }
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_in_chunks_of_at_most_4096() {
        let data: Vec<u8> = (0..10_000u32).map(|i| i as u8).collect();
        let mut wire = Vec::new();
        write_frames(&mut wire, 2, &data).unwrap();
        let mut r = &wire[..];
        let (mut back, mut p, mut sizes) = (Vec::new(), Vec::new(), Vec::new());
        while !r.is_empty() {
            assert_eq!(read_frame(&mut r, &[1, 2], &mut p).unwrap(), 2);
            sizes.push(p.len());
            back.extend_from_slice(&p);
        }
        assert_eq!(back, data);
        assert_eq!(sizes, [4096, 4096, 1808]);
    }

    #[test]
    fn bad_frames_are_errors() {
        let cases: [(&str, Vec<u8>, &str); 4] = [
            ("empty", vec![], "closed the NRI socket"),
            ("short header", vec![0, 0, 0, 1, 0], "inside a frame"),
            ("unknown conn", [7u32.to_be_bytes(), 1u32.to_be_bytes()].concat(), "conn 7"),
            ("oversized", [1u32.to_be_bytes(), u32::MAX.to_be_bytes()].concat(), "over the"),
        ];
        for (name, wire, want) in cases {
            let err = read_frame(&mut &wire[..], &[1, 2], &mut Vec::new()).unwrap_err();
            assert!(err.to_string().contains(want), "{name}: {err}");
        }
        let truncated = [[0, 0, 0, 1, 0, 0, 0, 9].as_slice(), b"abc"].concat();
        let err = read_frame(&mut &truncated[..], &[1], &mut Vec::new()).unwrap_err();
        assert!(matches!(err, MuxError::Truncated { conn: 1, got: 3, want: 9 }), "{err}");
    }

    /// The read side of the socket shut (the plugin's stop) while a request
    /// is in flight: the service reads the end of its input, and its answer,
    /// written after that, still reaches the runtime before the socket
    /// closes; a request sent after the stop reaches nobody.
    #[test]
    fn a_stop_lets_the_request_in_flight_be_answered() {
        let (mut runtime, plugin) = UnixStream::pair().unwrap();
        let (mut service, local) = UnixStream::pair().unwrap();
        let shut = plugin.try_clone().unwrap();
        let relay = std::thread::spawn(move || relay(plugin, vec![(PLUGIN_CONN, local)]));
        write_frames(&mut runtime, PLUGIN_CONN, b"request").unwrap();
        let mut got = [0u8; 7];
        service.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"request");
        shut.shutdown(Shutdown::Read).unwrap();
        // The service sees no more requests: its input ends.
        let mut rest = Vec::new();
        service.read_to_end(&mut rest).unwrap();
        assert!(rest.is_empty(), "{rest:?}");
        assert!(write_frames(&mut runtime, PLUGIN_CONN, b"late").is_err(), "a request after the stop");
        std::thread::sleep(Duration::from_millis(50));
        service.write_all(b"answer").unwrap();
        drop(service);
        let mut payload = Vec::new();
        assert_eq!(read_frame(&mut runtime, &[PLUGIN_CONN], &mut payload).unwrap(), PLUGIN_CONN);
        assert_eq!(payload, b"answer");
        assert!(matches!(read_frame(&mut runtime, &[PLUGIN_CONN], &mut payload), Err(MuxError::Eof)));
        assert!(matches!(relay.join().unwrap(), MuxError::Eof));
    }

    /// A local stream that never closes holds the relay for [`DRAIN`] at
    /// most.
    #[test]
    fn the_drain_is_bounded() {
        let (runtime, plugin) = UnixStream::pair().unwrap();
        let (_service, local) = UnixStream::pair().unwrap();
        let t0 = Instant::now();
        let relay = std::thread::spawn(move || relay(plugin, vec![(PLUGIN_CONN, local)]));
        drop(runtime);
        assert!(matches!(relay.join().unwrap(), MuxError::Eof));
        let took = t0.elapsed();
        assert!(took >= DRAIN && took < DRAIN * 3, "{took:?}");
    }
}
