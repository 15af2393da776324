//! `oci-tmpfs-hook nri`: an NRI (Node Resource Interface) plugin for
//! containerd 2.x and CRI-O. The runtime asks it at each `CreateContainer`;
//! it runs the same pure plan and, when the plan has work, answers with our
//! OCI hook (createRuntime), which makes the mounts and grows the pod's
//! `/dev/shm` by fd in the container's namespace, judged on the final
//! layout; so no runtime config edit, restart or RuntimeClass is needed,
//! and no path-resolved mount leaves the plugin (docs/nri.md).
//!
//! [`mux`] is NRI's connection multiplexer, [`session`] one connection (the
//! `ttrpc` crate's server and client over the mux), the redial loop, and
//! the runtime's `NRI_PLUGIN_*` environment and inherited socket,
//! [`service`] the plugin's event handling, [`adjust`] the pure mapping
//! between NRI's messages and the plan, [`install`] the hook's copy on the
//! node, [`metrics`] the optional Prometheus endpoint
//! (`--metrics-address`: nothing of it exists without the flag), [`proto`]
//! the generated API.
//! Not here: a runtime's side (tests play it), CRI-O specifics beyond the
//! shared API, updates of running containers.

pub(crate) mod adjust;
pub(crate) mod install;
pub(crate) mod metrics;
pub mod mux;
pub mod proto;
pub(crate) mod service;
pub mod session;

pub(crate) use service::Handler;
pub(crate) use session::Identity;

/// The environment variable a runtime sets when it starts the plugin itself
/// (pre-registered): the number of the connected socket's fd (3).
pub const PLUGIN_SOCKET_ENV: &str = "NRI_PLUGIN_SOCKET";
/// The name and index a runtime gives a plugin it starts.
pub const PLUGIN_NAME_ENV: &str = "NRI_PLUGIN_NAME";
pub const PLUGIN_IDX_ENV: &str = "NRI_PLUGIN_IDX";
/// The default NRI socket of containerd and CRI-O.
pub const DEFAULT_SOCKET: &str = "/var/run/nri/nri.sock";

/// The event mask answered to `Configure`: `CREATE_CONTAINER` alone
/// (`1 << (event - 1)`; a mask of 0 would mean every event).
pub const EVENTS: i32 = 1 << (proto::api::Event::CREATE_CONTAINER as i32 - 1);

/// The answer to `Configure` of a plugin that wants [`EVENTS`].
pub fn configured() -> proto::api::ConfigureResponse {
    let mut resp = proto::api::ConfigureResponse::new();
    resp.events = EVENTS;
    resp
}

/// The answer to `Synchronize` of a plugin that updates no container.
pub fn synchronized(req: &proto::api::SynchronizeRequest) -> proto::api::SynchronizeResponse {
    let mut resp = proto::api::SynchronizeResponse::new();
    resp.more = req.more;
    resp
}
