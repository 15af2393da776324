//! `explain --manifest`: what the pods of a Kubernetes manifest would get
//! on a node, before anything runs. [`doc`] reads YAML or JSON documents
//! and names every problem by document and field; [`workloads`] finds each
//! pod template (a Pod, or a workload's template); [`pod`] turns a template
//! into the plan's input with [`pod::spec_for`], the one translation;
//! [`explain`] runs `plan::plan_for` for each container and the pod's shared
//! `/dev/shm`. Pure: the caller reads the file and the node's facts, and
//! prints. Nothing here runs on the hook's or the wrapper's path.

pub(crate) mod doc;
pub(crate) mod pod;
pub(crate) mod quantity;

use serde::Serialize;
use serde_json::Value;

use crate::host_config::HostConfig;
use crate::plan::{self, Action, Plan, ShmSource};
use crate::size::Bytes;
use doc::{opt, req, At, DocRef, ManifestError};
pub(crate) use pod::{Container, Pod, Role};

/// containerd's pod `/dev/shm` (`sandbox_shm`'s default, 64 MiB), which
/// each app container grows.
pub(crate) const SANDBOX_SHM: Bytes = Bytes(64 << 20);

/// The kinds with a pod template, and where it is.
const WORKLOADS: [(&str, &str); 9] = [
    ("Pod", ""),
    ("Deployment", "spec.template"),
    ("StatefulSet", "spec.template"),
    ("DaemonSet", "spec.template"),
    ("ReplicaSet", "spec.template"),
    ("ReplicationController", "spec.template"),
    ("Job", "spec.template"),
    ("CronJob", "spec.jobTemplate.spec.template"),
    ("PodTemplate", "template"),
];

/// Kubernetes kinds without a pod template, passed over with a line (a
/// manifest usually carries its Service and ConfigMap).
const OTHER_KINDS: [&str; 26] = [
    "Service",
    "ConfigMap",
    "Secret",
    "ServiceAccount",
    "Namespace",
    "Role",
    "RoleBinding",
    "ClusterRole",
    "ClusterRoleBinding",
    "PersistentVolume",
    "PersistentVolumeClaim",
    "StorageClass",
    "Ingress",
    "IngressClass",
    "NetworkPolicy",
    "HorizontalPodAutoscaler",
    "PodDisruptionBudget",
    "LimitRange",
    "ResourceQuota",
    "PriorityClass",
    "RuntimeClass",
    "CustomResourceDefinition",
    "Endpoints",
    "EndpointSlice",
    "ServiceMonitor",
    "ValidatingAdmissionPolicy",
];

/// One pod template found in a document.
#[derive(Debug)]
pub(crate) struct Workload {
    pub doc: DocRef,
    /// Where the template is in the document (`spec.template`; empty for a Pod).
    pub template: &'static str,
    pub pod: Pod,
}

/// The pod templates of `docs`, and the documents passed over (kinds
/// without one).
///
/// # Errors
/// An unknown kind, a missing or mistyped field, or no document at all.
pub(crate) fn workloads(file: &str, docs: &[Value]) -> Result<(Vec<Workload>, Vec<DocRef>), ManifestError> {
    if docs.is_empty() {
        return Err(ManifestError::Empty { file: file.to_string() });
    }
    let (mut found, mut skipped) = (Vec::new(), Vec::new());
    for (i, d) in docs.iter().enumerate() {
        object(file, &(i + 1).to_string(), d, &mut found, &mut skipped)?;
    }
    Ok((found, skipped))
}

fn object(
    file: &str,
    index: &str,
    value: &Value,
    found: &mut Vec<Workload>,
    skipped: &mut Vec<DocRef>,
) -> Result<(), ManifestError> {
    let mut doc = DocRef { file: file.to_string(), index: index.to_string(), kind: None, name: None };
    let at = At { doc: &doc, path: String::new(), value };
    if !value.is_object() {
        return Err(at.error("not a Kubernetes object (a mapping with apiVersion and kind)"));
    }
    let kind = req(&at, "kind", |k| k.str().map(str::to_string))?;
    let meta = opt(&at, "metadata", |m| {
        let name = opt(m, "name", |n| n.str().map(str::to_string))?;
        let generate = opt(m, "generateName", |n| n.str().map(str::to_string))?;
        let ns = opt(m, "namespace", |n| n.str().map(str::to_string))?;
        Ok((name.or(generate), ns))
    })?;
    doc.kind = Some(kind.clone());
    let (name, namespace) = meta.unwrap_or_default();
    doc.name.clone_from(&name);
    let at = At { doc: &doc, path: String::new(), value };
    req(&at, "apiVersion", |k| k.str().map(|_| ()))?;
    if kind == "List" || kind.ends_with("List") && value.get("items").is_some() {
        let items = opt(&at, "items", |i| i.array().map(<[Value]>::to_vec))?.unwrap_or_default();
        for (j, item) in items.iter().enumerate() {
            object(file, &format!("{index}.items[{j}]"), item, found, skipped)?;
        }
        return Ok(());
    }
    let Some((_, path)) = WORKLOADS.iter().find(|(k, _)| *k == kind) else {
        if OTHER_KINDS.contains(&kind.as_str()) {
            skipped.push(doc);
            return Ok(());
        }
        let known: Vec<&str> = WORKLOADS.iter().map(|(k, _)| *k).collect();
        let problem = format!("unknown kind {kind:?}: explain knows {}", known.join(", "));
        return Err(ManifestError::Field { doc: Box::new(doc), field: "kind".into(), problem });
    };
    let Some(name) = name else { return Err(at.missing("metadata.name")) };
    let template = template_at(&at, path)?;
    let pod = pod::read(&template, &name, namespace.as_deref().unwrap_or("default"))?;
    found.push(Workload { doc: doc.clone(), template: path, pod });
    Ok(())
}

/// The value at dotted `path` under `at` (the document itself when empty).
fn template_at<'a>(at: &At<'a>, path: &str) -> Result<At<'a>, ManifestError> {
    let mut cur = at.clone();
    for part in path.split('.').filter(|p| !p.is_empty()) {
        let value = cur.get(part)?.ok_or_else(|| cur.missing(part))?;
        cur = At { doc: at.doc, path: doc::join(&cur.path, part), value };
    }
    Ok(cur)
}

/// What a container would get.
#[derive(Debug, Serialize)]
pub(crate) struct ContainerReport {
    pub name: String,
    pub role: Role,
    pub field: String,
    /// `readOnlyRootFilesystem` as set (`None`: not set, so false).
    pub read_only_root_filesystem: Option<bool>,
    pub memory_limit: Option<Bytes>,
    /// The plan, as every executor would make it; `Err`: the hook fails
    /// the container's start (under `on_error = "fail"`).
    #[serde(serialize_with = "plan_or_error")]
    pub plan: Result<Plan, plan::PlanError>,
    /// Each volume mount: (mountPath, `volume NAME (KIND)`).
    pub volumes: Vec<(String, String)>,
    /// What the plan cannot know from the manifest.
    pub unknown: Vec<String>,
    /// The `HOME` tmpfs the plan assumes (the image's `/etc/passwd` home
    /// is unknown here, see [`assumed_home`]): not in the plan's actions,
    /// counted in `memory`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub assumed_home: Option<plan::Tmpfs>,
    /// What the plan's tmpfs sizes, and the assumed `HOME`'s, add up to,
    /// against the memory limit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory: Option<plan::MemoryUse>,
    /// Why the plan's `/dev/shm` growth will not happen: a volume is there,
    /// and every executor grows only a proven engine shm
    /// (docs/design.md#engine-shm), which a volume never is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shm_left_alone: Option<String>,
}

fn plan_or_error<S: serde::Serializer>(
    plan: &Result<Plan, plan::PlanError>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match plan {
        Ok(p) => p.serialize(s),
        Err(e) => serde_json::json!({ "error": crate::error::chain(e) }).serialize(s),
    }
}

/// The pod's shared `/dev/shm` once every container has started.
#[derive(Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub(crate) enum PodShm {
    /// `hostIPC`: the node's own, never resized.
    Host,
    /// containerd's 64 MiB tmpfs, grown to the largest size a container asked for.
    Sandbox { start: Bytes, size: Bytes, by: Option<String> },
}

/// What a pod template's pods would get.
#[derive(Debug, Serialize)]
pub(crate) struct PodReport {
    pub doc: DocRef,
    pub template: &'static str,
    pub namespace: String,
    pub name: String,
    pub notes: Vec<String>,
    pub containers: Vec<ContainerReport>,
    pub shm: PodShm,
}

/// The plans for every container of `w`'s pods on a node with `host_config`
/// and `ram`, and the pod's `/dev/shm`. The pause container gets nothing
/// (it is a pod sandbox) and is not listed.
pub(crate) fn explain(w: &Workload, host_config: &HostConfig, ram: Bytes) -> PodReport {
    let p = &w.pod;
    let mut containers = Vec::new();
    let mut shm = if p.host_ipc {
        PodShm::Host
    } else {
        PodShm::Sandbox { start: SANDBOX_SHM, size: SANDBOX_SHM, by: None }
    };
    for c in &p.containers {
        let spec = pod::spec_for(p, c);
        // The image's /etc/passwd is unknown here: the plan says what it assumes.
        let user = plan::UserFacts::unknown();
        let plan = plan::plan_for(&spec, None, host_config, plan::HostFacts { ram }, &user);
        if let (Ok(plan), PodShm::Sandbox { size, by, .. }) = (&plan, &mut shm) {
            // The pod's shm is a bind from containerd's sandbox dir; a
            // volume at /dev/shm is the container's own.
            for a in &plan.actions {
                if let Action::Shm { existing: ShmSource::Bind { source }, tmpfs, .. } = a {
                    if source == pod::POD_SHM_SOURCE && tmpfs.size.bytes > *size {
                        *size = tmpfs.size.bytes;
                        *by = Some(c.name.clone());
                    }
                }
            }
        }
        let shm_left_alone = c
            .mounts
            .iter()
            .find(|(path, _, _)| crate::target::normalise(path) == crate::names::SHM_PATH)
            .map(|(_, v, _)| {
                format!(
                    "volume {v} is mounted there: not the engine's shm, so no executor grows it \
                     (a volume always wins); the pod's shm is not this container's"
                )
            });
        let volumes = c
            .mounts
            .iter()
            .map(|(path, v, ro)| {
                let kind = p.volumes.iter().find(|(n, _)| n == v).map_or("?", |(_, k)| k.as_str());
                let ro = if *ro { ", read-only" } else { "" };
                (path.clone(), format!("volume {v} ({kind}{ro})"))
            })
            .collect();
        let assumed_home = plan.as_ref().ok().and_then(|_| assumed_home(&spec, host_config, ram));
        let memory =
            plan.as_ref().ok().filter(|p| !p.actions.is_empty() || assumed_home.is_some()).map(|p| {
                let mut m = p.memory_use(c.memory_limit.map(Bytes));
                m.tmpfs_total = Bytes(m.tmpfs_total.0 + assumed_home.as_ref().map_or(0, |t| t.size.bytes.0));
                m
            });
        containers.push(ContainerReport {
            name: c.name.clone(),
            role: c.role,
            field: c.field.clone(),
            read_only_root_filesystem: c.read_only,
            memory_limit: c.memory_limit.map(Bytes),
            assumed_home,
            memory,
            plan,
            volumes,
            unknown: unknown(c, host_config),
            shm_left_alone,
        });
    }
    PodReport {
        doc: w.doc.clone(),
        template: w.template,
        namespace: p.namespace.clone(),
        name: p.name.clone(),
        notes: p.notes.clone(),
        containers,
        shm,
    }
}

/// Where [`assumed_home`] plans the home: a path no manifest mounts or
/// names, so that nothing else shares or hides it.
const ASSUMED_HOME: &str = "/oci-tmpfs-hook/assumed-home";

/// The cache tmpfs a container of `spec` gets under its `HOME` when that
/// comes from the image's `/etc/passwd` (no `HOME` in its env): that file
/// is unknown here, and the plan (made with [`plan::Passwd::Unknown`]) says
/// what it assumes in a note. This is those caches' tmpfs, made by the same
/// plan under a home at [`ASSUMED_HOME`] that holds none of them, as one
/// tmpfs sized by their total: `home_size` (the `oci-tmpfs-hook/home-size`
/// annotation within `max_home_size`, and the memory limit), as on the
/// node. `None` when the container gets no such caches (`home = false`,
/// its env's `HOME`, a plan that does nothing).
fn assumed_home(spec: &crate::oci::Spec, host_config: &HostConfig, ram: Bytes) -> Option<plan::Tmpfs> {
    let user = plan::UserFacts {
        passwd: plan::Passwd::Entry(ASSUMED_HOME.into()),
        home_dir: Some((
            ASSUMED_HOME.into(),
            plan::HomeDir::Read(vec![(String::new(), plan::Found::Missing)]),
        )),
    };
    let plan = plan::plan_for(spec, None, host_config, plan::HostFacts { ram }, &user).ok()?;
    let caches: Vec<plan::Tmpfs> = plan
        .actions
        .into_iter()
        .filter_map(|a| match a {
            Action::MountTmpfs { target, tmpfs, .. } if target.is_under(ASSUMED_HOME) => Some(tmpfs),
            _ => None,
        })
        .collect();
    let total = caches.iter().map(|t| t.size.bytes.0).sum();
    let mut first = caches.into_iter().next()?;
    first.size.bytes = Bytes(total);
    Some(first)
}

/// The temp- and cache-dir inputs a manifest cannot show: `valueFrom` and
/// `envFrom` values, and the image's own `ENV` (containerd puts it first).
fn unknown(c: &Container, host_config: &HostConfig) -> Vec<String> {
    let named = |k: &str| {
        crate::target::TEMP_VARS.contains(&k) || host_config.env_targets.iter().any(|v| v.as_str() == k)
    };
    let mut out: Vec<String> = c
        .env
        .iter()
        .filter(|(k, v)| v.is_none() && named(k))
        .map(|(k, _)| format!("{k} comes from valueFrom: its directory would be a target too"))
        .collect();
    let cache = if host_config.env_targets.is_empty() { "" } else { " or an env_targets variable" };
    for from in &c.env_from {
        out.push(format!(
            "envFrom {from}: a TMPDIR, TEMP, TMP or TEMPDIR{cache} there would be a target too"
        ));
    }
    out
}

#[cfg(test)]
mod tests;
