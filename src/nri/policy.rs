//! Our plugin's policy: what each container gets. It implements the
//! stub's [`Plugin`] (`super::stub`, which owns the connection and the
//! protocol) for `CreateContainer` alone, and answers it with our OCI hook
//! when the plan has work for the container ([`super::adjust`]). No mount is
//! adjusted and nothing on the host is touched here but the hook's copy:
//! the hook does all of it by fd in the container's namespace
//! (docs/nri.md).
//!
//! The host config is read again for each container (a ConfigMap update
//! applies to the next container; a config that cannot be read keeps the
//! last good one), and a changed one is copied into the hook directory
//! before the answer names it ([`super::hook_copy`]). A container that
//! cannot be planned is one log line with its namespace/pod/name; under
//! `on_error = "fail"` the plugin refuses it (the runtime then fails the
//! container's creation), under `"warn"` the container gets no adjustment.
//! With `--metrics-address`, each answer, plan, failure and what happened
//! to the connection is counted, and each container handed to the hook has
//! its series until the runtime removes it ([`super::metrics`]; nothing is
//! counted, built or subscribed to without it).

use std::path::Path;
use std::sync::Mutex;
use std::time::Instant;

use super::adjust::{self, HookSite};
use super::hook_copy::{HookDir, HookDirError};
use super::metrics;
use super::proto::api;
use super::stub::{Connection, Plugin, Refusal, Runtime};
use crate::host_config::{HostConfig, OnError};
use crate::input::{self, HostConfigSource, InputError};
use crate::plan::{self, HostFacts};

/// Why one container got no adjustment.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CreateError {
    #[error("the request does not make an OCI spec")]
    Spec(#[source] serde_json::Error),
    #[error("planning")]
    Plan(#[from] plan::PlanError),
    #[error("putting the host config where the hook reads it")]
    Copy(#[from] HookDirError),
}

impl CreateError {
    /// The `reason` label of the failed-containers metric.
    pub(crate) fn metric_reason(&self) -> &'static str {
        match self {
            CreateError::Spec(_) => "spec",
            CreateError::Plan(_) => "plan",
            CreateError::Copy(_) => "install",
        }
    }
}

/// Why the plugin cannot start serving.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PolicyError {
    #[error(transparent)]
    Input(#[from] InputError),
    #[error("finding this binary (the hook the adjustment names)")]
    ThisBinary(#[source] std::io::Error),
}

/// The host config as read: its values and its text (`""` for a missing
/// default file: the defaults).
#[derive(Clone, Debug)]
struct ConfigRead {
    host_config: HostConfig,
    text: String,
}

/// Our plugin: where the host config is and where the hook is.
pub(crate) struct Policy {
    config: HostConfigSource,
    /// The hook directory the plugin keeps up to date, when it has one.
    dir: Option<HookDir>,
    site: HookSite,
    host: HostFacts,
    last_good: Mutex<ConfigRead>,
    /// The config text last copied into the hook directory.
    copied: Mutex<Option<String>>,
}

impl Policy {
    /// The plugin, reading the host config at `config` (`explicit`: a
    /// missing file is an error, else the defaults). With `dir`, the
    /// adjustment names the copies in that directory (put there by
    /// [`Policy::copy_hook`]); without, this binary and `config` (as
    /// `--config` when `explicit`).
    ///
    /// # Errors
    /// The host config cannot be read or parsed; the host's RAM is unknown;
    /// this binary cannot be found.
    pub(crate) fn new(config: HostConfigSource, dir: Option<HookDir>) -> Result<Policy, PolicyError> {
        let read = read_host_config(&config)?;
        let site = match &dir {
            Some(d) => d.site(),
            None => HookSite {
                path: crate::files::this_binary().map_err(PolicyError::ThisBinary)?,
                config: config.named().map(Path::to_path_buf),
            },
        };
        Ok(Policy {
            config,
            dir,
            site,
            host: input::host_facts()?,
            last_good: Mutex::new(read),
            copied: Mutex::new(None),
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
    pub(crate) fn copy_hook(&self) -> Result<Vec<String>, HookDirError> {
        let Some(dir) = &self.dir else { return Ok(Vec::new()) };
        let mut wrote = Vec::new();
        if dir.put_binary()? {
            wrote.push(format!("{} (this binary)", dir.site().path.display()));
        }
        let text = self.current().text;
        if self.copy_config(&text)? {
            wrote.push(format!("{} (the host config)", dir.site().config.unwrap_or_default().display()));
        }
        Ok(wrote)
    }

    /// Copies `text` into the hook directory unless it was the last copied.
    fn copy_config(&self, text: &str) -> Result<bool, HookDirError> {
        let Some(dir) = &self.dir else { return Ok(false) };
        let mut copied = self.copied.lock().unwrap_or_else(|p| p.into_inner());
        if copied.as_deref() == Some(text) {
            return Ok(false);
        }
        let wrote = dir.put_config(text)?;
        *copied = Some(text.to_string());
        Ok(wrote)
    }

    /// The host config now, or the last good one when it cannot be read.
    fn current(&self) -> ConfigRead {
        let mut last = self.last_good.lock().unwrap_or_else(|p| p.into_inner());
        match read_host_config(&self.config) {
            Ok(c) => {
                apply_logging(&c.host_config, &last.host_config);
                *last = c;
            }
            Err(e) => log::warn!("nri: {}; keeping the last good host config", crate::error::chain(&e)),
        }
        last.clone()
    }

    /// The host config's text now (see [`Policy::current`]).
    pub(crate) fn config_text(&self) -> String {
        self.current().text
    }

    /// The host config now (see [`Policy::current`]).
    pub(crate) fn host_config(&self) -> HostConfig {
        self.current().host_config
    }

    /// The adjustment for one container, under `host_config`.
    ///
    /// # Errors
    /// The container cannot be planned.
    pub(crate) fn adjust(
        &self,
        pod: Option<&api::PodSandbox>,
        ctr: &api::Container,
        host_config: &HostConfig,
    ) -> Result<api::ContainerAdjustment, CreateError> {
        let who = adjust::who(pod, ctr);
        let planning = Instant::now();
        let spec = adjust::spec_of(pod, ctr).map_err(CreateError::Spec)?;
        // NRI hands the container to our hook, which reads the image's
        // /etc/passwd; NRI sees neither the rootfs nor the process's user.
        let plan = plan::plan_for(&spec, None, host_config, self.host, &plan::UserFacts::HOOK)?;
        if let Some(m) = metrics::get() {
            m.planned(&plan, planning.elapsed());
        }
        log::debug!("nri: {who}: read-only root: {} ({})", adjust::readonly_root(ctr), adjust::signals(ctr));
        log::debug!("nri: {who}: {}", plan.why);
        if !plan.notes.is_empty() {
            log::info!("nri: {who}: notes of the plan follow");
        }
        crate::process::logger::emit(crate::plan::report::decision(&plan));
        let adjustment = adjust::adjustment(&plan, pod, ctr, &self.site);
        track(pod, ctr, &plan);
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
        pod: Option<&api::PodSandbox>,
        ctr: &api::Container,
    ) -> (Result<api::ContainerAdjustment, CreateError>, HostConfig) {
        let config = self.current();
        if let Some(m) = metrics::get() {
            m.config(&config.text);
        }
        let result = self.copy_config(&config.text).map_err(CreateError::from).and_then(|wrote| {
            if wrote {
                log::info!("nri: the host config changed; copied it where the hook reads it");
            }
            self.adjust(pod, ctr, &config.host_config)
        });
        (result, config.host_config)
    }
}

/// With `--metrics-address`, the container `ctr` of `pod`, planned as
/// `plan`, among the per-container series while the plan hands it to our
/// hook ([`metrics::containers`]).
fn track(pod: Option<&api::PodSandbox>, ctr: &api::Container, plan: &plan::Plan) {
    let Some(m) = metrics::get() else { return };
    if !adjust::needs_hook(plan) {
        return;
    }
    let (namespace, name) = pod.map_or(("", ""), |p| (p.namespace.as_str(), p.name.as_str()));
    let cgroups_path = ctr.linux.as_ref().map_or("", |l| l.cgroups_path.as_str());
    m.track(&ctr.id, [namespace, name, &ctr.name], cgroups_path, plan);
}

/// The host config at `source`, with its text.
fn read_host_config(source: &HostConfigSource) -> Result<ConfigRead, InputError> {
    let (host_config, text) = source.read_with_text()?;
    Ok(ConfigRead { host_config, text })
}

/// The host config's log level, and its log file when it changed.
pub(crate) fn apply_logging(new: &HostConfig, old: &HostConfig) {
    let changed = new.log_file.as_deref().filter(|f| Some(*f) != old.log_file.as_deref());
    crate::process::logger::configure(new.log_level.filter(), changed);
}

impl Plugin for Policy {
    fn configure(&self, runtime: &Runtime<'_>) {
        let nri = match runtime.nri_version {
            "" => "its NRI version unsent: NRI before v0.12".to_string(),
            v => format!("NRI {v}"),
        };
        let validator = metrics::validator(runtime.nri_version);
        log::info!(
            "nri: configured by {} {} ({nri}; NRI's validator: {validator}; request timeout {} ms); subscribing to CreateContainer",
            runtime.name,
            runtime.version,
            runtime.request_timeout_ms
        );
        if let Some(m) = metrics::get() {
            m.configured(runtime.name, runtime.version, runtime.nri_version);
        }
    }

    fn synchronize(&self, pods: &[api::PodSandbox], containers: &[api::Container], more: bool) {
        log::debug!("nri: synchronize: {} pods, {} containers, more: {}", pods.len(), containers.len(), more);
        if metrics::get().is_none() {
            return;
        }
        // The containers that ran before this connection (a restarted
        // plugin or runtime): planned again, quietly, for their series.
        let host_config = self.current().host_config;
        for ctr in containers {
            let pod = pods.iter().find(|p| p.id == ctr.pod_sandbox_id);
            let plan = adjust::spec_of(pod, ctr).ok().and_then(|spec| {
                plan::plan_for(&spec, None, &host_config, self.host, &plan::UserFacts::HOOK).ok()
            });
            if let Some(plan) = plan {
                track(pod, ctr, &plan);
            }
        }
    }

    fn shutdown(&self) {
        log::info!("nri: the runtime is shutting the plugin down");
    }

    fn create_container(
        &self,
        pod: Option<&api::PodSandbox>,
        ctr: &api::Container,
    ) -> Result<Option<api::ContainerAdjustment>, Refusal> {
        let started = Instant::now();
        let (result, host_config) = self.create(pod, ctr);
        let answer = match result {
            Ok(a) => Ok(Some(a)),
            Err(e) => {
                let who = adjust::who(pod, ctr);
                let line = format!("nri: container {who}: {}", crate::error::chain(&e));
                let fail = host_config.on_error == OnError::Fail;
                if let Some(m) = metrics::get() {
                    m.failed(e.metric_reason(), fail);
                }
                if fail {
                    log::error!("{line} (on_error = \"fail\": the container is not created)");
                    Err(Refusal(crate::process::logger::prefixed(None, &line)))
                } else {
                    log::warn!("{line} (on_error = \"warn\": the container starts without these mounts)");
                    Ok(None)
                }
            }
        };
        let took = started.elapsed();
        if let Some(m) = metrics::get() {
            m.answered(took);
        }
        log::debug!("nri: CreateContainer answered in {:.3} ms", took.as_secs_f64() * 1e3);
        answer
    }

    fn wants_removals(&self) -> bool {
        metrics::get().is_some()
    }

    fn remove_container(&self, container: &api::Container) {
        if let Some(m) = metrics::get() {
            m.removed(&container.id);
        }
    }

    fn connection(&self, event: Connection) {
        let Some(m) = metrics::get() else { return };
        match event {
            Connection::Reconnected => m.reconnected(),
            Connection::Registered => m.registered(),
            Connection::Ended => m.session_ended(),
        }
    }
}
