//! The NRI stub: everything between a plugin's decisions and the runtime.
//! It owns the connection ([`session`]: the socket, or the one a runtime
//! handed a pre-registered plugin; registration; the redial loop; the
//! status file; the stop), NRI's multiplexer ([`mux`]) and the protocol
//! ([`protocol`]: `Configure`, `Synchronize`, `Shutdown`, the events, and
//! the version spoken, [`PROTOCOL`]). A plugin implements [`Plugin`]: the
//! events it wants, each a method that takes the runtime's request and
//! returns its answer; every other method has a default that does nothing.
//!
//! Ours (`super::policy`) and the example's other vendor
//! (`examples/nri_mount.rs`) are both plugins of this stub. A newer NRI
//! protocol (one call per event, a version exchange) is a change of
//! [`protocol`] alone; the trait stays.
//!
//! Not here: any policy (what a container gets), the metrics (a plugin
//! counts what [`Plugin::connection`] tells it), the runtime's side (tests
//! play it), updates of containers the runtime did not ask about.

pub mod mux;
pub(crate) mod protocol;
pub mod session;

use super::proto::api;

pub use protocol::PROTOCOL;
pub(crate) use session::{probe, run};
pub use session::{serve, valid_idx, Status, Stop};

/// Who the plugin is and where it connects.
#[derive(Clone, Debug)]
pub struct Identity {
    pub socket: std::path::PathBuf,
    /// Plugin name, as the runtime lists it.
    pub name: String,
    /// Two digits: the plugin's place in the runtime's order.
    pub idx: String,
}

/// The environment variable a runtime sets when it starts the plugin itself
/// (pre-registered): the number of the connected socket's fd (3).
pub const PLUGIN_SOCKET_ENV: &str = "NRI_PLUGIN_SOCKET";
/// The name and index a runtime gives a plugin it starts.
pub const PLUGIN_NAME_ENV: &str = "NRI_PLUGIN_NAME";
pub const PLUGIN_IDX_ENV: &str = "NRI_PLUGIN_IDX";
/// The NRI API this plugin speaks (proto/nri/api.proto's source), sent at
/// registration: a runtime of NRI v0.12 or later logs it (an empty one as
/// "with NRI version unknown").
pub const NRI_VERSION: &str = "v0.12.0";

/// The default NRI socket of containerd and CRI-O.
pub const DEFAULT_SOCKET: &str = "/var/run/nri/nri.sock";

/// An NRI plugin as the stub serves it. The stub subscribes it to
/// `CreateContainer` ([`Plugin::create_container`]), and to
/// `RemoveContainer` where it asks ([`Plugin::wants_removals`]); the rest
/// are news about the connection, with defaults that do nothing.
pub trait Plugin: Send + Sync + 'static {
    /// The runtime configured the plugin (once per connection, before any
    /// event).
    fn configure(&self, _runtime: &Runtime<'_>) {}

    /// The runtime's pods and containers at registration, in parts while
    /// `more`. The stub answers that the plugin updates none of them.
    fn synchronize(&self, _pods: &[api::PodSandbox], _containers: &[api::Container], _more: bool) {}

    /// The runtime is shutting the plugin down (containerd sends none when it
    /// stops: the connection then just ends, [`Connection::Ended`]).
    fn shutdown(&self) {}

    /// A container is being created: its adjustment (`None`: the answer
    /// carries none), or a refusal, which fails the container's creation.
    ///
    /// # Errors
    /// The plugin refuses the container.
    fn create_container(
        &self,
        pod: Option<&api::PodSandbox>,
        container: &api::Container,
    ) -> Result<Option<api::ContainerAdjustment>, Refusal>;

    /// Whether the plugin wants [`Plugin::remove_container`] (asked at
    /// each `Configure`; without, the runtime sends no removal).
    fn wants_removals(&self) -> bool {
        false
    }

    /// The runtime removed a container (only when
    /// [`Plugin::wants_removals`]).
    fn remove_container(&self, _container: &api::Container) {}

    /// What happened to the connection (for a plugin that counts it).
    fn connection(&self, _event: Connection) {}
}

/// What `Configure` says about the runtime.
#[derive(Clone, Copy, Debug)]
pub struct Runtime<'a> {
    pub name: &'a str,
    pub version: &'a str,
    /// Its timeout for each request to the plugin, in milliseconds.
    pub request_timeout_ms: i64,
    /// The plugin's text of the runtime's NRI config (pre-registered: its
    /// `conf.d` file), or `""`.
    pub config: &'a str,
    /// The runtime's NRI version (NRI v0.12 and later send it; `""` from
    /// older ones, such as containerd 2.1's).
    pub nri_version: &'a str,
}

/// A plugin's refusal of a container: the message the runtime's error
/// carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal(pub String);

/// News about the connection to the runtime.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Connection {
    /// Connected to the socket again, after an earlier connection.
    Reconnected,
    /// `RegisterPlugin` succeeded.
    Registered,
    /// The connection ended: no longer registered.
    Ended,
}
