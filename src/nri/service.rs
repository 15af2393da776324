//! The plugin's side of NRI: the `nri.pkg.api.v1alpha1.Plugin` service that
//! the runtime calls. It subscribes to `CreateContainer` only and answers it
//! with the plan's tmpfs mounts ([`super::adjust`]), after growing the pod's
//! engine-made `/dev/shm` on the host by fd (`apply::host::grow_shm`); every
//! other event is acknowledged and ignored.
//!
//! The host config is read again for each container (a ConfigMap update
//! applies to the next container; a config that cannot be read keeps the
//! last good one). A container that cannot be planned is one log line with
//! its namespace/pod/name; under `on_error = "fail"` the request fails (the
//! runtime then fails the container's creation), under `"warn"` the
//! container gets no adjustment.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Instant;

use super::adjust;
use super::proto::{api, api_ttrpc};
use crate::names::SHM_PATH as SHM;
use crate::plan::{self, Inputs};
use crate::settings::{OnError, Settings};
use crate::size::Bytes;
use crate::{apply, input};

/// The event mask answered to `Configure`: `CREATE_CONTAINER` alone
/// (`1 << (event - 1)`; a mask of 0 would mean every event).
pub const EVENTS: i32 = 1 << (api::Event::CREATE_CONTAINER as i32 - 1);

/// Why one container got no adjustment.
#[derive(Debug, thiserror::Error)]
pub enum CreateError {
    #[error("the request does not make an OCI spec")]
    Spec(#[source] serde_json::Error),
    #[error("planning")]
    Plan(#[from] plan::PlanError),
    #[error("growing the pod's /dev/shm on the host")]
    Apply(#[from] apply::ApplyError),
    #[error(transparent)]
    Input(#[from] input::InputError),
}

/// The plugin's state: where the host config is and how to reach the host.
pub struct Handler {
    config: PathBuf,
    explicit: bool,
    /// Where the host's `/` is seen (`/proc/1/root` from a pod with host PID).
    host_root: PathBuf,
    host_ram: Bytes,
    last_good: Mutex<Settings>,
}

impl Handler {
    /// A handler reading the host config at `config` (`explicit`: a missing
    /// file is an error, else the defaults) and the host at `host_root`.
    ///
    /// # Errors
    /// The host config cannot be read or parsed; the host's RAM is unknown.
    pub fn new(config: &Path, explicit: bool, host_root: &Path) -> Result<Handler, input::InputError> {
        let settings = input::read_settings(config, explicit)?;
        Ok(Handler {
            config: config.to_path_buf(),
            explicit,
            host_root: host_root.to_path_buf(),
            host_ram: input::host_ram()?,
            last_good: Mutex::new(settings),
        })
    }

    /// The host config now, or the last good one when it cannot be read.
    pub fn settings(&self) -> Settings {
        let mut last = self.last_good.lock().unwrap_or_else(|p| p.into_inner());
        match input::read_settings(&self.config, self.explicit) {
            Ok(s) => {
                apply_logging(&s, &last);
                *last = s;
            }
            Err(e) => log::warn!("nri: {}; keeping the last good host config", crate::commands::chain(&e)),
        }
        last.clone()
    }

    /// The adjustment for one container, with the pod's shm grown.
    ///
    /// # Errors
    /// The container cannot be planned or its pod's shm cannot be grown.
    pub fn adjust(
        &self,
        req: &api::CreateContainerRequest,
        settings: &Settings,
    ) -> Result<api::ContainerAdjustment, CreateError> {
        let (pod, ctr) = (req.pod.as_ref(), req.container.get_or_default());
        let who = adjust::who(pod, ctr);
        let spec = adjust::spec_of(pod, ctr).map_err(CreateError::Spec)?;
        let plan = plan::decide(&Inputs {
            spec: &spec,
            state_annotations: None,
            settings,
            host_ram: self.host_ram,
        })?;
        log::debug!("nri: {who}: read-only root: {} ({})", adjust::readonly_root(ctr), adjust::signals(ctr));
        log::debug!("nri: {who}: {}", plan.why);
        if !plan.notes.is_empty() {
            log::info!("nri: {who}: notes of the plan follow");
        }
        crate::logger::plan(&plan);
        let adjustment = adjust::adjustment(&plan);
        if let Some((source, size)) = adjust::host_shm(&plan) {
            let ids: Vec<&str> =
                pod.map(|p| p.id.as_str()).into_iter().chain([ctr.pod_sandbox_id.as_str()]).collect();
            self.grow(&who, source, size, &ids)?;
        }
        for m in &adjustment.mounts {
            log::info!("nri: {who}: tmpfs at {} ({})", m.destination, m.options.join(","));
        }
        Ok(adjustment)
    }

    /// Grows the pod's shm at host path `source` to `size`, by fd.
    fn grow(&self, who: &str, source: &str, size: Bytes, ids: &[&str]) -> Result<(), apply::ApplyError> {
        let path = self.host_root.join(source.trim_start_matches('/'));
        if self.host_root != Path::new("/")
            && same_fs(&path, &self.host_root.join(SHM.trim_start_matches('/')))
        {
            log::info!("nri: {who}: {SHM} (from {source}) is the host's own /dev/shm; never resized");
            return Ok(());
        }
        match apply::host::grow_shm(&path, size, ids)? {
            Ok(done) => log::info!("nri: {who}: {done} (on the host, {source})"),
            Err(note) if note.warn => log::warn!("nri: {who}: {} left alone: {}", note.subject, note.reason),
            Err(note) => log::info!("nri: {who}: {} left alone: {}", note.subject, note.reason),
        }
        Ok(())
    }
}

/// The host config's log level, and its log file when it changed.
pub fn apply_logging(new: &Settings, old: &Settings) {
    let changed = new.log_file.as_deref().filter(|f| Some(*f) != old.log_file.as_deref());
    crate::logger::configure(new.log_level.filter(), changed);
}

/// Whether two paths are on one filesystem (`st_dev`), when both stat.
fn same_fs(a: &Path, b: &Path) -> bool {
    match (rustix::fs::stat(a), rustix::fs::stat(b)) {
        (Ok(x), Ok(y)) => x.st_dev == y.st_dev,
        _ => false,
    }
}

impl api_ttrpc::Plugin for Handler {
    fn configure(
        &self,
        _: &ttrpc::TtrpcContext,
        req: api::ConfigureRequest,
    ) -> ttrpc::Result<api::ConfigureResponse> {
        log::info!(
            "nri: configured by {} {} (request timeout {} ms); subscribing to CreateContainer",
            req.runtime_name,
            req.runtime_version,
            req.request_timeout
        );
        let mut resp = api::ConfigureResponse::new();
        resp.events = EVENTS;
        Ok(resp)
    }

    fn synchronize(
        &self,
        _: &ttrpc::TtrpcContext,
        req: api::SynchronizeRequest,
    ) -> ttrpc::Result<api::SynchronizeResponse> {
        log::debug!(
            "nri: synchronize: {} pods, {} containers, more: {}",
            req.pods.len(),
            req.containers.len(),
            req.more
        );
        let mut resp = api::SynchronizeResponse::new();
        resp.more = req.more;
        Ok(resp)
    }

    fn shutdown(&self, _: &ttrpc::TtrpcContext, _: api::Empty) -> ttrpc::Result<api::Empty> {
        log::info!("nri: the runtime is shutting the plugin down");
        Ok(api::Empty::new())
    }

    fn create_container(
        &self,
        _: &ttrpc::TtrpcContext,
        req: api::CreateContainerRequest,
    ) -> ttrpc::Result<api::CreateContainerResponse> {
        let started = Instant::now();
        let settings = self.settings();
        let mut resp = api::CreateContainerResponse::new();
        match self.adjust(&req, &settings) {
            Ok(a) => resp.adjust = Some(a).into(),
            Err(e) => {
                let who = adjust::who(req.pod.as_ref(), req.container.get_or_default());
                let line = format!("nri: container {who}: {}", crate::commands::chain(&e));
                if settings.on_error == OnError::Fail {
                    log::error!("{line} (on_error = \"fail\": the container is not created)");
                    return Err(ttrpc::error::get_rpc_status(
                        ttrpc::Code::FAILED_PRECONDITION,
                        format!("oci-tmpfs-hook: {line}"),
                    ));
                }
                log::warn!("{line} (on_error = \"warn\": the container starts without these mounts)");
            }
        }
        log::debug!("nri: CreateContainer answered in {:?}", started.elapsed());
        Ok(resp)
    }

    fn state_change(&self, _: &ttrpc::TtrpcContext, _: api::StateChangeEvent) -> ttrpc::Result<api::Empty> {
        Ok(api::Empty::new())
    }
}
