//! One lock for the suites that share the host's mount table.
//!
//! The suites now run as modules of a few test binaries, and libtest runs the
//! tests of one binary in parallel threads, where the binaries used to run one
//! after another. Most suites keep their changes inside private mount
//! namespaces, bundles and temp dirs and cannot see each other. Two kinds of
//! test can: one that compares the whole host mount table before and after
//! (tests/runtimes/hostile.rs), and one that mounts on the host itself (a
//! shared volume bound on itself, a stand-in engine shm). A test of one kind
//! waits until no test of the other kind runs; tests of the same kind run
//! together, as they did inside their own binary.

use std::sync::{Condvar, Mutex};

/// What a test does to the host's mount table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HostUse {
    /// Compares the whole table before and after.
    Watch,
    /// Mounts on the host (undone before the guard drops).
    Change,
}

static GATE: Mutex<(Option<HostUse>, usize)> = Mutex::new((None, 0));
static FREED: Condvar = Condvar::new();

/// Held while a test uses the host's mount table as `HostUse` says.
#[must_use = "the host is shared only while the guard lives"]
pub struct HostGuard(());

/// Waits until no test of the other kind holds the host, then holds it.
pub fn hold_host(kind: HostUse) -> HostGuard {
    let mut gate = GATE.lock().unwrap_or_else(|e| e.into_inner());
    while gate.0.is_some_and(|k| k != kind) {
        gate = FREED.wait(gate).unwrap_or_else(|e| e.into_inner());
    }
    gate.0 = Some(kind);
    gate.1 += 1;
    HostGuard(())
}

impl Drop for HostGuard {
    fn drop(&mut self) {
        let mut gate = GATE.lock().unwrap_or_else(|e| e.into_inner());
        gate.1 -= 1;
        if gate.1 == 0 {
            gate.0 = None;
            FREED.notify_all();
        }
    }
}
