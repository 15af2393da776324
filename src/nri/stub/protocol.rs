//! The NRI protocol the stub speaks, in one place: NRI v0.8.0's
//! `nri.pkg.api.v1alpha1` ([`PROTOCOL`], `proto/nri/api.proto`), the one
//! containerd 2.1 is built with. The plugin's ttRPC service
//! ([`service`]: `Configure` answered with the event mask [`events`],
//! `Synchronize` with no update, `Shutdown`, `CreateContainer`, and
//! `StateChange`, which carries every other event, `RemoveContainer` among
//! them, and is acknowledged), and
//! the one call the plugin makes, `RegisterPlugin` ([`register`]).
//!
//! Besides `proto/nri/api.proto`, everything a newer protocol changes is
//! here: one call per event instead of `StateChange`, a version exchange at
//! registration. The session
//! ([`super::session`]) only carries bytes and the [`super::Plugin`] trait
//! only decisions; neither builds or reads a request or an answer.

use std::collections::HashMap;
use std::os::fd::IntoRawFd;
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::time::Duration;

use super::{Identity, Plugin, Refusal, Runtime};
use crate::nri::proto::{api, api_ttrpc};

/// The protocol spoken: its package and the NRI release it is taken from.
pub const PROTOCOL: &str = "nri.pkg.api.v1alpha1 (NRI v0.8.0)";

/// The event mask answered to `Configure`: `CREATE_CONTAINER`
/// (`1 << (event - 1)`; a mask of 0 would mean every event), and
/// `REMOVE_CONTAINER` for a plugin that wants it ([`events`]).
pub(crate) const EVENTS: i32 = 1 << (api::Event::CREATE_CONTAINER as i32 - 1);

/// The event mask for a plugin: [`EVENTS`], with `REMOVE_CONTAINER` when it
/// `wants_removals`.
pub(crate) fn events(wants_removals: bool) -> i32 {
    let remove = 1 << (api::Event::REMOVE_CONTAINER as i32 - 1);
    if wants_removals {
        EVENTS | remove
    } else {
        EVENTS
    }
}

/// The deadline of `RegisterPlugin` (the runtime allows 5 s).
const REGISTER_TIMEOUT: Duration = Duration::from_secs(4);

/// The methods of a ttRPC server, by name.
pub(super) type Methods = HashMap<String, Box<dyn ttrpc::MethodHandler + Send + Sync>>;

/// The ttRPC service that serves `plugin` on the plugin's conn: v0.8.0's
/// methods, and NRI v0.12's `RemoveContainer` ([`RemoveContainer`]).
pub(super) fn service<P: Plugin>(plugin: &Arc<P>) -> Methods {
    let mut methods = api_ttrpc::create_plugin(Arc::new(Service(Arc::clone(plugin))));
    methods.insert(REMOVE_CONTAINER.to_string(), Box::new(RemoveContainer(Arc::clone(plugin))));
    methods
}

/// NRI v0.12's own call for a removal (`rpc RemoveContainer`), which a
/// runtime of v0.12 or later (containerd 2.3) sends instead of `StateChange`:
/// it falls back to `StateChange` only on `Unimplemented`, and a Rust ttRPC
/// server answers an unknown method `InvalidArgument`.
const REMOVE_CONTAINER: &str = "/nri.pkg.api.v1alpha1.Plugin/RemoveContainer";

/// [`REMOVE_CONTAINER`] for a [`Plugin`]. Its request, `RemoveContainerRequest
/// { PodSandbox pod = 1; Container container = 2; }`, has the fields of
/// v0.8.0's `CreateContainerRequest`, which decodes it; its answer,
/// `RemoveContainerResponse {}`, is empty, as `Empty` encodes.
struct RemoveContainer<P>(Arc<P>);

impl<P: Plugin> ttrpc::MethodHandler for RemoveContainer<P> {
    fn handler(&self, ctx: ttrpc::TtrpcContext, req: ttrpc::Request) -> ttrpc::Result<()> {
        use protobuf::Message as _;
        let mut res = ttrpc::Response::new();
        match api::CreateContainerRequest::parse_from_bytes(&req.payload) {
            Ok(r) => {
                if let Some(c) = r.container.as_ref() {
                    self.0.remove_container(c);
                }
                res.set_status(ttrpc::get_status(ttrpc::Code::OK, String::new()));
                res.payload =
                    api::Empty::new().write_to_bytes().map_err(|e| ttrpc::Error::Others(e.to_string()))?;
            }
            Err(e) => res.set_status(ttrpc::get_status(ttrpc::Code::INVALID_ARGUMENT, e.to_string())),
        }
        ttrpc::response_to_channel(ctx.mh.stream_id, res, ctx.res_tx)
    }
}

/// `Runtime.RegisterPlugin` over the runtime's conn (`theirs`); the client
/// is dropped after (its socket closes; the relay then discards that conn).
///
/// # Errors
/// The call failed or timed out.
pub(super) fn register(theirs: UnixStream, opts: &Identity) -> Result<(), ttrpc::Error> {
    let client = ttrpc::Client::new(theirs.into_raw_fd())?;
    let runtime = api_ttrpc::RuntimeClient::new(client);
    let mut req = api::RegisterPluginRequest::new();
    req.plugin_name = opts.name.clone();
    req.plugin_idx = opts.idx.clone();
    req.NRI_version = super::NRI_VERSION.to_string();
    runtime.register_plugin(ttrpc::context::with_duration(REGISTER_TIMEOUT), &req)?;
    Ok(())
}

/// A [`Plugin`] as the generated `nri.pkg.api.v1alpha1.Plugin` service.
struct Service<P>(Arc<P>);

impl<P: Plugin> api_ttrpc::Plugin for Service<P> {
    fn configure(
        &self,
        _: &ttrpc::TtrpcContext,
        req: api::ConfigureRequest,
    ) -> ttrpc::Result<api::ConfigureResponse> {
        self.0.configure(&Runtime {
            name: &req.runtime_name,
            version: &req.runtime_version,
            request_timeout_ms: req.request_timeout,
            config: &req.config,
            nri_version: &req.NRI_version,
        });
        let mut resp = api::ConfigureResponse::new();
        resp.events = events(self.0.wants_removals());
        Ok(resp)
    }

    fn synchronize(
        &self,
        _: &ttrpc::TtrpcContext,
        req: api::SynchronizeRequest,
    ) -> ttrpc::Result<api::SynchronizeResponse> {
        self.0.synchronize(&req.pods, &req.containers, req.more);
        let mut resp = api::SynchronizeResponse::new();
        resp.more = req.more;
        Ok(resp)
    }

    fn shutdown(&self, _: &ttrpc::TtrpcContext, _: api::Empty) -> ttrpc::Result<api::Empty> {
        self.0.shutdown();
        Ok(api::Empty::new())
    }

    fn create_container(
        &self,
        _: &ttrpc::TtrpcContext,
        req: api::CreateContainerRequest,
    ) -> ttrpc::Result<api::CreateContainerResponse> {
        match self.0.create_container(req.pod.as_ref(), req.container.get_or_default()) {
            Ok(adjust) => {
                let mut resp = api::CreateContainerResponse::new();
                resp.adjust = adjust.into();
                Ok(resp)
            }
            Err(Refusal(msg)) => Err(ttrpc::error::get_rpc_status(ttrpc::Code::FAILED_PRECONDITION, msg)),
        }
    }

    fn state_change(&self, _: &ttrpc::TtrpcContext, req: api::StateChangeEvent) -> ttrpc::Result<api::Empty> {
        if req.event.enum_value() == Ok(api::Event::REMOVE_CONTAINER) {
            if let Some(c) = req.container.as_ref() {
                self.0.remove_container(c);
            }
        }
        Ok(api::Empty::new())
    }
}
