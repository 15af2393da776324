//! `oci-tmpfs-hook nri`: an NRI (Node Resource Interface) plugin for
//! containerd 2.x and CRI-O. The runtime asks it at each `CreateContainer`;
//! it answers with the same pure plan's tmpfs mounts (the spec executor's
//! [`crate::spec::fresh_mounts`]) and grows the pod's `/dev/shm` on the host,
//! so no runtime config edit, restart or RuntimeClass is needed.
//!
//! [`mux`] is NRI's connection multiplexer, [`session`] one connection (the
//! `ttrpc` crate's server and client over the mux) and the redial loop,
//! [`service`] the plugin's event handling, [`adjust`] the pure mapping
//! between NRI's messages and the plan, [`proto`] the generated API.
//! Not here: a runtime's side (tests play it), CRI-O specifics beyond the
//! shared API, updates of running containers.

pub mod adjust;
pub mod mux;
pub mod proto;
pub mod service;
pub mod session;

pub use service::Handler;
pub use session::{serve_forever, session, Options, SessionError};

/// The environment variable a runtime sets when it starts the plugin itself
/// (pre-registered): the number of the connected socket's fd (3).
pub const PLUGIN_SOCKET_ENV: &str = "NRI_PLUGIN_SOCKET";
/// The name and index a runtime gives a plugin it starts.
pub const PLUGIN_NAME_ENV: &str = "NRI_PLUGIN_NAME";
pub const PLUGIN_IDX_ENV: &str = "NRI_PLUGIN_IDX";
/// The default NRI socket of containerd and CRI-O.
pub const DEFAULT_SOCKET: &str = "/var/run/nri/nri.sock";
