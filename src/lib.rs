//! oci-tmpfs-hook: an OCI runtime hook that gives containers with a read-only
//! root a size-limited, writable `/tmp` (and the temp dirs their environment
//! names) and a bigger `/dev/shm`, mounted by file descriptor inside the
//! container's mount namespace before the user's process starts.
//!
//! Layers, each importing only the ones below it (no import circle):
//! - [`cli`]: one file per subcommand, its flags and a thin `run`; the
//!   runtime wrapper's is `runtime`, in front of [`wrapper`].
//! - [`wrapper`]: the runtime wrapper: runc's command-line grammar, what
//!   each call gets (the spec executor on `create`, the `HOME` an `exec`
//!   carries over), the real runtime found and judged by its version.
//! - the executors, each taking a [`plan::Plan`] from [`plan::begin`] and
//!   [`plan::finish`] (NRI: [`plan::plan_for`], which reads nothing):
//!   [`spec`] (tmpfs entries written into `config.json`, checked on the
//!   rootfs by fd), [`hook`] (by fd in the container's namespace), [`nri`] (the NRI plugin, which hands
//!   containers to the hook); beside them [`node`] (the node installer),
//!   over [`engine`] (each engine's registration, its changes and its
//!   checks, and `doctor`'s checks, [`engine::doctor`]).
//! - [`sys`]: the syscall layer under both fd executors, [`spec`] and
//!   [`hook`] (openat2 in the rootfs, the mount calls, namespaces, an
//!   engine's shm, copy-up's calls, `doctor`'s kernel probes), with one
//!   typed error.
//! - [`manifest`]: `explain --manifest`, Kubernetes pod templates as the
//!   plan's input (pure; off the hook's and the wrapper's path).
//! - [`usage`]: the `usage` command's pure half (state files, `mountinfo`,
//!   the table, JSON and Prometheus text); its reads are [`sys::usage`]'s.
//! - [`input`] (bounded reads of the state, `config.json` and the host
//!   config, and the host's facts, which it gives the plan as
//!   [`plan::HostFacts`]); the spec executor's `config.json` edits are
//!   [`spec::bundle`].
//! - [`plan`], pure: what to mount, [`plan::landing`], the landing rule
//!   the hook and the spec executor share, and [`plan::report`], how a plan
//!   and an executor's outcome are worded for the log.
//! - values and helpers: [`host_config`], [`size`], [`target`], [`stage`],
//!   [`names`], [`files`], [`cgroup`] (a container's memory cgroup, read
//!   from the host), and [`error`] at the bottom; [`process`], what
//!   belongs to the process: its allocator, its log backend, SIGTERM and
//!   SIGINT for the commands that run until stopped.

pub(crate) mod cgroup;
pub mod cli;
pub mod engine;
pub mod error;
pub(crate) mod files;
pub(crate) mod hook;
pub mod host_config;
pub mod input;
pub(crate) mod manifest;
pub(crate) mod names;
pub(crate) mod node;
pub mod nri;
pub mod oci;
pub mod plan;
pub mod process;
pub mod size;
pub(crate) mod spec;
pub mod stage;
pub(crate) mod sys;
pub(crate) mod wrapper;

/// The spec executor's `config.json` edits, public for the property tests.
pub use spec::bundle;
pub mod target;
pub(crate) mod usage;
