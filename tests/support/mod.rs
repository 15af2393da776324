//! The harness every test binary shares: bundles and real runtime runs
//! (`bundle`), mount tables (`mountinfo`), temporary directories, the one
//! tree walk and sizes (`fs`), running commands (`process`), the one private
//! dockerd launcher and a private Podman (`daemons`), the CRI client,
//! containerd and pod options (`cri`), a CRI-O node (`crio`), the CRI node and its report (`pods`),
//! the pod cases written once (`cases`), the hostile layouts of a pod
//! written once (`layouts`), the node suite's fake host (`kube`), the lock
//! for suites that watch the host (`host`), the container user's `HOME`
//! through the engines (`home`), the `hostUsers: false` pod written once
//! (`userns`), the hostile suites' rename race (`race`), and `explain` held to what an
//! executor did (`verdict`). Root tests fail loudly without root or a runtime; they never
//! skip.
#![allow(dead_code, unreachable_pub)]

pub mod bundle;
pub mod cases;
pub mod cri;
pub mod crio;
pub mod daemons;
pub mod fs;
pub mod home;
pub mod host;
pub mod kube;
pub mod layouts;
pub mod mountinfo;
pub mod pods;
pub mod process;
pub mod race;
pub mod userns;
pub mod verdict;

pub use bundle::*;
pub use fs::*;
pub use mountinfo::*;
pub use process::*;
