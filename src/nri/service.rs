//! The plugin's side of NRI: the `nri.pkg.api.v1alpha1.Plugin` service that
//! the runtime calls. It subscribes to `CreateContainer` only and answers it
//! with our OCI hook when the plan has work for the container
//! ([`super::adjust`]); every other event is acknowledged and ignored. No
//! mount is adjusted and nothing on the host is touched here: the hook does
//! all of it by fd in the container's namespace (docs/nri.md).
//!
//! The host config is read again for each container (a ConfigMap update
//! applies to the next container; a config that cannot be read keeps the
//! last good one), and a changed one is copied into the hook directory
//! before the answer names it ([`super::install`]). A container that cannot
//! be planned is one log line with its namespace/pod/name; under `on_error =
//! "fail"` the request fails (the runtime then fails the container's
//! creation), under `"warn"` the container gets no adjustment. With
//! `--metrics-address`, each answer, plan and failure is counted
//! ([`super::metrics`]; nothing is counted or built without it).

use std::path::Path;
use std::sync::Mutex;
use std::time::Instant;

use super::adjust::{self, HookSite};
use super::install::{HookDir, InstallError};
use super::proto::{api, api_ttrpc};
use crate::input::{self, ConfigSource, InputError};
use crate::plan::{self, HostFacts};
use crate::settings::{OnError, Settings};

/// Why one container got no adjustment.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CreateError {
    #[error("the request does not make an OCI spec")]
    Spec(#[source] serde_json::Error),
    #[error("planning")]
    Plan(#[from] plan::PlanError),
    #[error("putting the host config where the hook reads it")]
    Install(#[from] InstallError),
}

impl CreateError {
    /// The `reason` label of the failed-containers metric.
    pub(crate) fn metric_reason(&self) -> &'static str {
        match self {
            CreateError::Spec(_) => "spec",
            CreateError::Plan(_) => "plan",
            CreateError::Install(_) => "install",
        }
    }
}

/// Why the plugin cannot start serving.
#[derive(Debug, thiserror::Error)]
pub(crate) enum HandlerError {
    #[error(transparent)]
    Input(#[from] InputError),
    #[error("finding this binary (the hook the adjustment names)")]
    ThisBinary(#[source] std::io::Error),
}

/// The host config as read: its settings and its text (`""` for a missing
/// default file: the defaults).
#[derive(Clone, Debug)]
struct Config {
    settings: Settings,
    text: String,
}

/// The plugin's state: where the host config is and where the hook is.
pub(crate) struct Handler {
    config: ConfigSource,
    /// The hook directory the plugin keeps up to date, when it has one.
    dir: Option<HookDir>,
    site: HookSite,
    host: HostFacts,
    last_good: Mutex<Config>,
    /// The config text last copied into the hook directory.
    installed: Mutex<Option<String>>,
}

impl Handler {
    /// A handler reading the host config at `config` (`explicit`: a missing
    /// file is an error, else the defaults). With `dir`, the adjustment names
    /// the copies in that directory (put there by [`Handler::install`]);
    /// without, this binary and `config` (as `--config` when `explicit`).
    ///
    /// # Errors
    /// The host config cannot be read or parsed; the host's RAM is unknown;
    /// this binary cannot be found.
    pub(crate) fn new(config: ConfigSource, dir: Option<HookDir>) -> Result<Handler, HandlerError> {
        let read = read_config(&config)?;
        let site = match &dir {
            Some(d) => d.site(),
            None => HookSite {
                path: crate::files::this_binary().map_err(HandlerError::ThisBinary)?,
                config: config.named().map(Path::to_path_buf),
            },
        };
        Ok(Handler {
            config,
            dir,
            site,
            host: input::host_facts()?,
            last_good: Mutex::new(read),
            installed: Mutex::new(None),
        })
    }

    /// Where the adjustment says the hook is.
    pub(crate) fn site(&self) -> &HookSite {
        &self.site
    }

    /// Puts this binary and the host config into the hook directory, when
    /// there is one; what was written, for a log line.
    ///
    /// # Errors
    /// A write failed, or the directory is missing.
    pub(crate) fn install(&self) -> Result<Vec<String>, InstallError> {
        let Some(dir) = &self.dir else { return Ok(Vec::new()) };
        let mut wrote = Vec::new();
        if dir.put_binary()? {
            wrote.push(format!("{} (this binary)", dir.site().path.display()));
        }
        let text = self.current().text;
        if self.install_config(&text)? {
            wrote.push(format!("{} (the host config)", dir.site().config.unwrap_or_default().display()));
        }
        Ok(wrote)
    }

    /// Copies `text` into the hook directory unless it was the last copied.
    fn install_config(&self, text: &str) -> Result<bool, InstallError> {
        let Some(dir) = &self.dir else { return Ok(false) };
        let mut installed = self.installed.lock().unwrap_or_else(|p| p.into_inner());
        if installed.as_deref() == Some(text) {
            return Ok(false);
        }
        let wrote = dir.put_config(text)?;
        *installed = Some(text.to_string());
        Ok(wrote)
    }

    /// The host config now, or the last good one when it cannot be read.
    fn current(&self) -> Config {
        let mut last = self.last_good.lock().unwrap_or_else(|p| p.into_inner());
        match read_config(&self.config) {
            Ok(c) => {
                apply_logging(&c.settings, &last.settings);
                *last = c;
            }
            Err(e) => log::warn!("nri: {}; keeping the last good host config", crate::error::chain(&e)),
        }
        last.clone()
    }

    /// The host config's text now (see [`Handler::current`]).
    pub(crate) fn config_text(&self) -> String {
        self.current().text
    }

    /// The host config's settings now (see [`Handler::current`]).
    pub(crate) fn settings(&self) -> Settings {
        self.current().settings
    }

    /// The adjustment for one container, under `settings`.
    ///
    /// # Errors
    /// The container cannot be planned.
    pub(crate) fn adjust(
        &self,
        req: &api::CreateContainerRequest,
        settings: &Settings,
    ) -> Result<api::ContainerAdjustment, CreateError> {
        let (pod, ctr) = (req.pod.as_ref(), req.container.get_or_default());
        let who = adjust::who(pod, ctr);
        let planning = Instant::now();
        let spec = adjust::spec_of(pod, ctr).map_err(CreateError::Spec)?;
        // NRI hands the container to our hook, which reads the image's
        // /etc/passwd; NRI sees neither the rootfs nor the process's user.
        let plan = plan::plan_for(&spec, None, settings, self.host, &plan::UserFacts::HOOK)?;
        if let Some(m) = super::metrics::get() {
            m.planned(&plan, planning.elapsed());
        }
        log::debug!("nri: {who}: read-only root: {} ({})", adjust::readonly_root(ctr), adjust::signals(ctr));
        log::debug!("nri: {who}: {}", plan.why);
        if !plan.notes.is_empty() {
            log::info!("nri: {who}: notes of the plan follow");
        }
        crate::logger::decision(&plan);
        let adjustment = adjust::adjustment(&plan, pod, ctr, &self.site);
        if adjust::needs_hook(&plan) {
            let copied: Vec<&String> = adjustment.annotations.keys().collect();
            log::info!(
                "nri: {who}: our hook at {} ({}) for {}; pod annotations copied: {copied:?}",
                adjust::HOOK_STAGE.as_str(),
                self.site.path.display(),
                adjust::summary(&plan)
            );
        } else if !plan.enabled {
            log::info!("nri: {who}: no hook: {}", plan.why);
        } else {
            let left: Vec<String> =
                plan.notes.iter().map(|n| format!("{}: {}", n.subject, n.reason)).collect();
            log::info!("nri: {who}: no hook: nothing to do ({})", left.join("; "));
        }
        Ok(adjustment)
    }

    /// One `CreateContainer`: the host config read again (and copied into
    /// the hook directory when it changed), then the adjustment.
    fn create(
        &self,
        req: &api::CreateContainerRequest,
    ) -> (Result<api::ContainerAdjustment, CreateError>, Settings) {
        let config = self.current();
        if let Some(m) = super::metrics::get() {
            m.config(&config.text);
        }
        let result = self.install_config(&config.text).map_err(CreateError::from).and_then(|wrote| {
            if wrote {
                log::info!("nri: the host config changed; copied it where the hook reads it");
            }
            self.adjust(req, &config.settings)
        });
        (result, config.settings)
    }
}

/// The host config at `source`, with its text.
fn read_config(source: &ConfigSource) -> Result<Config, InputError> {
    let (settings, text) = source.read_with_text()?;
    Ok(Config { settings, text })
}

/// The host config's log level, and its log file when it changed.
pub(crate) fn apply_logging(new: &Settings, old: &Settings) {
    let changed = new.log_file.as_deref().filter(|f| Some(*f) != old.log_file.as_deref());
    crate::logger::configure(new.log_level.filter(), changed);
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
        Ok(super::configured())
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
        Ok(super::synchronized(&req))
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
        let mut resp = api::CreateContainerResponse::new();
        let (result, settings) = self.create(&req);
        let mut refused = None;
        match result {
            Ok(a) => resp.adjust = Some(a).into(),
            Err(e) => {
                let who = adjust::who(req.pod.as_ref(), req.container.get_or_default());
                let line = format!("nri: container {who}: {}", crate::error::chain(&e));
                let fail = settings.on_error == OnError::Fail;
                if let Some(m) = super::metrics::get() {
                    m.failed(e.metric_reason(), fail);
                }
                if fail {
                    log::error!("{line} (on_error = \"fail\": the container is not created)");
                    refused = Some(format!("oci-tmpfs-hook: {line}"));
                } else {
                    log::warn!("{line} (on_error = \"warn\": the container starts without these mounts)");
                }
            }
        }
        let took = started.elapsed();
        if let Some(m) = super::metrics::get() {
            m.answered(took);
        }
        log::debug!("nri: CreateContainer answered in {:.3} ms", took.as_secs_f64() * 1e3);
        match refused {
            Some(msg) => Err(ttrpc::error::get_rpc_status(ttrpc::Code::FAILED_PRECONDITION, msg)),
            None => Ok(resp),
        }
    }

    fn state_change(&self, _: &ttrpc::TtrpcContext, _: api::StateChangeEvent) -> ttrpc::Result<api::Empty> {
        Ok(api::Empty::new())
    }
}
