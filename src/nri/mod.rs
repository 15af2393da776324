//! `oci-tmpfs-hook nri`: an NRI (Node Resource Interface) plugin for
//! containerd 2.x and CRI-O. The runtime asks it at each `CreateContainer`;
//! it runs the same pure plan and, when the plan has work, answers with our
//! OCI hook (createRuntime), which makes the mounts and grows the pod's
//! `/dev/shm` by fd in the container's namespace, judged on the final
//! layout; so no runtime config edit, restart or RuntimeClass is needed,
//! and no path-resolved mount leaves the plugin (docs/nri.md).
//!
//! [`stub`] is NRI's side of any plugin: the connection (the runtime's
//! socket or the one it handed us, NRI's multiplexer, registration, the
//! redial loop, the status file, the stop) and the protocol spoken
//! (`Configure`, `Synchronize`, `Shutdown`, the events), behind a narrow
//! [`stub::Plugin`] trait. [`policy`] is our plugin: what each container
//! gets, the host config read again, the hook's copy kept up to date, the
//! metrics counted. [`adjust`] is the pure mapping between NRI's messages
//! and the plan, [`hook_copy`] the hook's copy on the node (`--hook-dir`),
//! [`metrics`] the optional Prometheus metrics and their
//! HTTP server (`--metrics-address`: nothing of it exists without the
//! flag), [`proto`] the generated API.
//! Not here: a runtime's side (tests play it), CRI-O specifics beyond the
//! shared API, updates of running containers.

pub(crate) mod adjust;
pub(crate) mod hook_copy;
pub(crate) mod metrics;
pub(crate) mod policy;
pub mod proto;
pub mod stub;

pub(crate) use policy::Policy;
pub use stub::{DEFAULT_SOCKET, PLUGIN_IDX_ENV, PLUGIN_NAME_ENV, PLUGIN_SOCKET_ENV};
