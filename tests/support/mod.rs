//! The harness every test binary shares: bundles and real runtime runs
//! (`bundle`), mount tables (`mountinfo`), temporary directories and tree
//! snapshots (`fs`), running commands (`process`), private daemons
//! (`daemons`), the CRI client (`cri`), the kube node of the node suite
//! (`kube`), and the lock for suites that watch the host (`host`). Root tests
//! fail loudly without root or a runtime; they never skip.
#![allow(dead_code, unreachable_pub)]

pub mod bundle;
pub mod cri;
pub mod daemons;
pub mod fs;
pub mod host;
pub mod kube;
pub mod mountinfo;
pub mod process;

pub use bundle::*;
pub use fs::*;
pub use mountinfo::*;
pub use process::*;
