//! SIGTERM and SIGINT for the commands that run until they are told to stop:
//! `nri` and `node install --wait`. Each runs as PID 1 of its container, and
//! the kernel drops a signal that PID 1 has no handler for: without one, a
//! pod's deletion waits out its grace period and ends in SIGKILL. The
//! handler is signal-hook's self-pipe (one write to a socket pair,
//! async-signal-safe); the command reads the other end when it is ready to
//! stop. Not for the hook, which makes no thread before `setns` and which
//! a runtime does not stop.

use std::io::{self, Read as _};
use std::os::unix::net::UnixStream;

/// SIGTERM and SIGINT, caught: a signal that comes before anyone waits is
/// kept, not lost.
#[derive(Debug)]
pub(crate) struct Termination(UnixStream);

impl Termination {
    /// Catches SIGTERM and SIGINT from now on (for the rest of the process).
    ///
    /// # Errors
    /// The socket pair or a handler cannot be set up.
    pub(crate) fn catch() -> io::Result<Termination> {
        let (read, write) = UnixStream::pair()?;
        for sig in [libc::SIGTERM, libc::SIGINT] {
            signal_hook::low_level::pipe::register(sig, write.try_clone()?)?;
        }
        Ok(Termination(read))
    }

    /// Blocks until one of them has come.
    ///
    /// # Errors
    /// The socket pair cannot be read.
    pub(crate) fn wait(mut self) -> io::Result<()> {
        let mut byte = [0u8; 1];
        self.0.read_exact(&mut byte)
    }

    /// Runs `then` on a thread of its own once one of them has come.
    ///
    /// # Errors
    /// The thread cannot be started.
    pub(crate) fn then(self, then: impl FnOnce() + Send + 'static) -> io::Result<()> {
        std::thread::Builder::new().name("termination".into()).spawn(move || match self.wait() {
            Ok(()) => then(),
            Err(e) => log::warn!("reading the SIGTERM/SIGINT socket: {e}; these signals are ignored now"),
        })?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::time::Duration;

    /// A signal raised before anyone waits is kept; `then` runs on it.
    #[test]
    fn a_signal_before_the_wait_is_kept() {
        let t = Termination::catch().unwrap();
        signal_hook::low_level::raise(libc::SIGINT).unwrap();
        let (tx, rx) = mpsc::channel();
        t.then(move || tx.send(()).unwrap()).unwrap();
        rx.recv_timeout(Duration::from_secs(5)).expect("then ran");
    }
}
