//! `nri --metrics-address HOST:PORT`: the plugin's Prometheus metrics
//! (docs/nri.md#metrics), in the Prometheus text format (0.0.4) that the
//! `prometheus-client` crate encodes; [`http`] serves them.
//!
//! Nothing here exists until [`serve`] runs: the metrics are one
//! [`OnceLock`] that only `nri --metrics-address` fills, and every hook the
//! policy calls ([`get`]) is a no-op while it is empty. So the hook, the
//! wrapper and a plugin without the flag never build a registry, a thread
//! or a socket.
//!
//! The counters carry no per-container label: the reasons are a fixed set.
//! The per-container series are [`containers`]', computed at scrape time.
//! Not here: the HTTP server ([`http`]), push.

pub(crate) mod containers;
mod http;

use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use prometheus_client::encoding::prometheus_text;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

use crate::plan::{Action, Off, Plan};

pub(crate) use http::serve;

/// The metric names' common prefix.
const PREFIX: &str = "oci_tmpfs_hook_nri";

/// Why a container got no hook (a fixed set: a label value each).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum LeftAlone {
    /// A pod's sandbox (pause) container.
    Sandbox,
    /// Its root is writable (and no annotation turns us on).
    WritableRoot,
    /// `oci-tmpfs-hook/enabled: "false"`.
    DisabledByAnnotation,
    /// No mount namespace of its own: a tmpfs would land in the runtime's,
    /// or in one it shares.
    NoMountNamespace,
    /// Enabled, but every target was left alone (a volume there, a memory
    /// limit below 1 MiB, ...): the plan's notes say which.
    NothingToDo,
}

impl LeftAlone {
    /// Why `plan` has no action, when it has none.
    pub(crate) fn of(plan: &Plan) -> Option<LeftAlone> {
        if plan.has_work() {
            return None;
        }
        Some(match plan.off {
            None => LeftAlone::NothingToDo,
            Some(Off::Sandbox) => LeftAlone::Sandbox,
            Some(Off::NoMountNamespace) => LeftAlone::NoMountNamespace,
            Some(Off::Annotation) => LeftAlone::DisabledByAnnotation,
            Some(Off::WritableRoot) => LeftAlone::WritableRoot,
        })
    }

    fn label(self) -> &'static str {
        match self {
            LeftAlone::Sandbox => "sandbox",
            LeftAlone::WritableRoot => "writable_root",
            LeftAlone::DisabledByAnnotation => "disabled_by_annotation",
            LeftAlone::NoMountNamespace => "no_mount_namespace",
            LeftAlone::NothingToDo => "nothing_to_do",
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabel {
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FailedLabels {
    reason: &'static str,
    /// The host config's `on_error`: `fail` (the container was not created)
    /// or `warn` (it started without our hook).
    on_error: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TargetLabel {
    /// `tmp` (`/tmp` and the temp dirs) or `shm` (`/dev/shm`).
    target: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct InfoLabels {
    version: &'static str,
    /// FNV-1a (64 bits, hex) of the host config's text as last read: equal
    /// on nodes with equal configs, changed when the ConfigMap changed.
    config_hash: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RuntimeLabels {
    /// The runtime's name and version, as its `Configure` said.
    runtime: String,
    version: String,
    /// Its NRI version, `""` where it sends none (before NRI v0.12).
    nri_version: String,
    /// Whether it has NRI's default validator (`required_plugins`,
    /// docs/nri.md#fail-closed): `yes` where it sends its NRI version (the
    /// validator came with v0.10), `unknown` where it sends none.
    validator: &'static str,
}

/// Whether a runtime whose NRI version is `nri_version` (`""`: unsent) has
/// NRI's default validator: every runtime that sends its version does (NRI
/// v0.12 sends it; v0.10 brought the validator); one that sends none may be
/// v0.10 or v0.11 (containerd 2.2, with it) or older (2.1, without).
pub(crate) fn validator(nri_version: &str) -> &'static str {
    if nri_version.is_empty() {
        "unknown"
    } else {
        "yes"
    }
}

/// Every metric of the plugin, and the registry that encodes them.
pub(crate) struct Metrics {
    registry: Registry,
    seen: Counter,
    acted_on: Counter,
    left_alone: Family<ReasonLabel, Counter>,
    failed: Family<FailedLabels, Counter>,
    granted: Family<TargetLabel, Histogram>,
    plan_seconds: Histogram,
    adjustment_seconds: Histogram,
    registrations: Counter,
    reconnects: Counter,
    registered: Gauge,
    info: Family<InfoLabels, Gauge>,
    config_hash: Mutex<String>,
    runtime: Family<RuntimeLabels, Gauge>,
    containers: containers::Containers,
    /// Where the node's cgroupfs is, for the per-container series.
    cgroup_root: PathBuf,
}

/// Latency buckets: 25 µs doubling to 1.6 s (NRI's request timeout is 2 s).
fn seconds_histogram() -> Histogram {
    Histogram::new(exponential_buckets(25e-6, 2.0, 17))
}

/// Size buckets: 1 MiB, times 4, to 1 TiB.
fn bytes_histogram() -> Histogram {
    Histogram::new(exponential_buckets(1_048_576.0, 4.0, 11))
}

impl Metrics {
    fn new(cgroup_root: PathBuf) -> Metrics {
        let mut registry = Registry::with_prefix(PREFIX);
        let m = Metrics {
            seen: Counter::default(),
            acted_on: Counter::default(),
            left_alone: Family::default(),
            failed: Family::default(),
            granted: Family::new_with_constructor(bytes_histogram as fn() -> Histogram),
            plan_seconds: seconds_histogram(),
            adjustment_seconds: seconds_histogram(),
            registrations: Counter::default(),
            reconnects: Counter::default(),
            registered: Gauge::default(),
            info: Family::default(),
            config_hash: Mutex::new(String::new()),
            runtime: Family::default(),
            containers: containers::Containers::default(),
            cgroup_root,
            registry: Registry::default(),
        };
        registry.register("containers_seen", "CreateContainer requests answered", m.seen.clone());
        registry.register(
            "containers_acted_on",
            "containers whose adjustment names our hook",
            m.acted_on.clone(),
        );
        registry.register(
            "containers_left_alone",
            "containers given an empty adjustment, by reason",
            m.left_alone.clone(),
        );
        registry.register(
            "containers_failed",
            "containers that could not be planned, by reason and the host config's on_error",
            m.failed.clone(),
        );
        registry.register(
            "tmpfs_granted_bytes",
            "the size of each tmpfs our hook is asked to mount or grow, by target",
            m.granted.clone(),
        );
        registry.register(
            "plan_duration_seconds",
            "time to turn one CreateContainer request into a plan",
            m.plan_seconds.clone(),
        );
        registry.register(
            "adjustment_duration_seconds",
            "time to answer one CreateContainer (host config read, plan, adjustment)",
            m.adjustment_seconds.clone(),
        );
        registry.register("registrations", "successful RegisterPlugin calls", m.registrations.clone());
        registry.register(
            "reconnects",
            "connections to the runtime's NRI socket after the first",
            m.reconnects.clone(),
        );
        registry.register("registered", "1 while registered with the runtime", m.registered.clone());
        registry.register("info", "the plugin's version and host config hash", m.info.clone());
        registry.register(
            "runtime_info",
            "the runtime that configured the plugin last, its NRI version, and whether it has NRI's validator",
            m.runtime.clone(),
        );
        Metrics { registry, ..m }
    }

    /// One container answered in `took`: seen, and its outcome.
    pub(crate) fn answered(&self, took: Duration) {
        self.seen.inc();
        self.adjustment_seconds.observe(took.as_secs_f64());
    }

    /// The plan made for one container, in `took`.
    pub(crate) fn planned(&self, plan: &Plan, took: Duration) {
        self.plan_seconds.observe(took.as_secs_f64());
        match LeftAlone::of(plan) {
            Some(why) => {
                self.left_alone.get_or_create(&ReasonLabel { reason: why.label() }).inc();
            }
            None => {
                self.acted_on.inc();
                for action in &plan.actions {
                    let target = match action {
                        Action::MountTmpfs { .. } => "tmp",
                        Action::Shm { .. } => "shm",
                    };
                    #[allow(clippy::cast_precision_loss)] // sizes far below 2^53
                    let bytes = action.tmpfs().size.bytes.0 as f64;
                    self.granted.get_or_create(&TargetLabel { target }).observe(bytes);
                }
            }
        }
    }

    /// A container that could not be planned (`reason`: a fixed word).
    pub(crate) fn failed(&self, reason: &'static str, fail: bool) {
        let on_error = if fail { "fail" } else { "warn" };
        self.failed.get_or_create(&FailedLabels { reason, on_error }).inc();
    }

    /// The host config as read now (`text`); the info metric follows it.
    pub(crate) fn config(&self, text: &str) {
        let hash = format!("{:016x}", fnv1a(text.as_bytes()));
        let mut last = self.config_hash.lock().unwrap_or_else(|p| p.into_inner());
        if *last == hash {
            return;
        }
        let old = InfoLabels { version: env!("CARGO_PKG_VERSION"), config_hash: std::mem::take(&mut *last) };
        self.info.remove(&old);
        self.info.get_or_create(&InfoLabels { config_hash: hash.clone(), ..old }).set(1);
        *last = hash;
    }

    /// The runtime's `Configure`: the runtime info metric names it alone.
    pub(crate) fn configured(&self, name: &str, version: &str, nri_version: &str) {
        let now = RuntimeLabels {
            runtime: name.to_string(),
            version: version.to_string(),
            nri_version: nri_version.to_string(),
            validator: validator(nri_version),
        };
        self.runtime.clear();
        self.runtime.get_or_create(&now).set(1);
    }

    /// `RegisterPlugin` succeeded.
    pub(crate) fn registered(&self) {
        self.registrations.inc();
        self.registered.set(1);
    }

    /// The session ended: no longer registered.
    pub(crate) fn session_ended(&self) {
        self.registered.set(0);
    }

    /// The container `id` (`who`: its namespace, pod and name) in the cgroup
    /// `cgroups_path`, handed to our hook as `plan`: its series, until
    /// [`Metrics::removed`].
    pub(crate) fn track(&self, id: &str, who: [&str; 3], cgroups_path: &str, plan: &Plan) {
        self.containers.track(id, who, cgroups_path, plan);
    }

    /// The runtime removed the container `id`.
    pub(crate) fn removed(&self, id: &str) {
        self.containers.remove(id);
    }

    /// A new connection to the runtime after an earlier one.
    pub(crate) fn reconnected(&self) {
        self.reconnects.inc();
    }

    /// The text of `/metrics`.
    pub(super) fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String does not fail.
        let _ = prometheus_text::encode(&mut out, &self.registry);
        self.containers.encode(&self.cgroup_root, &mut out);
        out
    }
}

/// 64-bit FNV-1a: a change detector, not a cryptographic hash.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

static METRICS: OnceLock<Metrics> = OnceLock::new();

/// The metrics, when `--metrics-address` was given.
pub(crate) fn get() -> Option<&'static Metrics> {
    METRICS.get()
}

/// Makes the metrics, the host config's text `config` in the info metric,
/// the node's cgroupfs at `cgroup_root`; `None` when they were made already.
fn init(config: &str, cgroup_root: PathBuf) -> Option<&'static Metrics> {
    METRICS.set(Metrics::new(cgroup_root)).ok()?;
    let metrics = get()?;
    metrics.config(config);
    Some(metrics)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan_of(config: serde_json::Value) -> Plan {
        let spec: crate::oci::Spec = serde_json::from_value(config).unwrap();
        let host = crate::plan::HostFacts { ram: crate::size::Bytes(8 << 30) };
        crate::plan::plan_for(
            &spec,
            None,
            &crate::host_config::HostConfig::default(),
            host,
            &crate::plan::UserFacts::HOOK,
        )
        .unwrap()
    }

    /// The reasons read the plan's own words: a change of wording there
    /// fails here, not silently in a dashboard.
    #[test]
    fn left_alone_reasons_follow_the_plan() {
        let spec_ns = |readonly: bool, ann: serde_json::Value, ns: serde_json::Value| {
            serde_json::json!({
                "ociVersion": "1.0.2",
                "root": {"path": "rootfs", "readonly": readonly},
                "process": {"cwd": "/", "user": {"uid": 0, "gid": 0}, "args": ["sh"]},
                "annotations": ann,
                "linux": {"namespaces": ns},
            })
        };
        let spec = |readonly: bool, ann: serde_json::Value| {
            spec_ns(readonly, ann, serde_json::json!([{"type": "mount"}]))
        };
        let none = serde_json::json!({});
        let cases = [
            ("read-only", spec(true, none.clone()), None),
            ("writable", spec(false, none.clone()), Some(LeftAlone::WritableRoot)),
            (
                "sandbox",
                spec(true, serde_json::json!({"io.kubernetes.cri.container-type": "sandbox"})),
                Some(LeftAlone::Sandbox),
            ),
            (
                "disabled",
                spec(true, serde_json::json!({"oci-tmpfs-hook/enabled": "false"})),
                Some(LeftAlone::DisabledByAnnotation),
            ),
            (
                "a joined mount namespace",
                spec_ns(true, none.clone(), serde_json::json!([{"type": "mount", "path": "/proc/9/ns/mnt"}])),
                Some(LeftAlone::NoMountNamespace),
            ),
            (
                "no mount namespace, enabled by annotation",
                spec_ns(false, serde_json::json!({"oci-tmpfs-hook/enabled": "true"}), serde_json::json!([])),
                Some(LeftAlone::NoMountNamespace),
            ),
            (
                "enabled on a writable root",
                spec(false, serde_json::json!({"oci-tmpfs-hook/enabled": "true"})),
                None,
            ),
        ];
        for (name, config, want) in cases {
            assert_eq!(LeftAlone::of(&plan_of(config)), want, "{name}");
        }
    }

    #[test]
    fn fnv1a_known_values() {
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
    }

    /// The runtime info names the runtime that configured the plugin last,
    /// alone (a restarted containerd, upgraded, replaces the old sample),
    /// and says whether it has the validator from its NRI version.
    #[test]
    fn runtime_info_follows_the_last_configure() {
        let m = Metrics::new(PathBuf::from("/nonexistent"));
        m.configured("containerd", "2.1.9", "");
        let text = m.encode();
        assert!(
            text.contains(
                "oci_tmpfs_hook_nri_runtime_info{runtime=\"containerd\",version=\"2.1.9\",nri_version=\"\",validator=\"unknown\"} 1"
            ),
            "{text}"
        );
        m.configured("containerd", "v2.3.4", "v0.12.0");
        let text = m.encode();
        let samples: Vec<&str> =
            text.lines().filter(|l| l.starts_with("oci_tmpfs_hook_nri_runtime_info{")).collect();
        assert_eq!(
            samples,
            ["oci_tmpfs_hook_nri_runtime_info{runtime=\"containerd\",version=\"v2.3.4\",nri_version=\"v0.12.0\",validator=\"yes\"} 1"],
            "{text}"
        );
    }
}
