//! A pod template as the facts the plan depends on ([`Pod`],
//! [`Container`]), and [`spec_for`]: the one translation from those facts
//! to the plan's input, the OCI spec containerd's CRI would give the
//! container (root read-only, env, mounts, memory limit, annotations), so
//! that `explain --manifest` runs the same `plan::plan_for` as the hook, the
//! wrapper and the NRI plugin (whose `nri::adjust::spec_of` reads the same
//! facts from a `CreateContainer` request: the tests compare the two).
//! Pure: no I/O.

use crate::oci::Spec;
use serde_json::{json, Map, Value};

use super::doc::{each, opt, req, string_map, At, ManifestError};
use super::quantity;
use crate::names::{CRI_CONTAINER_TYPE, SHM_PATH};

/// Where containerd binds a pod's `/dev/shm` from (its sandbox's tmpfs).
pub(crate) const POD_SHM_SOURCE: &str = "/run/containerd/io.containerd.grpc.v1.cri/sandboxes/ID/shm";

/// containerd's CRI names these in every container's spec.
const CRI_CONTAINER_NAME: &str = "io.kubernetes.cri.container-name";
const CRI_SANDBOX_NAME: &str = "io.kubernetes.cri.sandbox-name";
const CRI_SANDBOX_NAMESPACE: &str = "io.kubernetes.cri.sandbox-namespace";

/// A pod template's facts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Pod {
    pub name: String,
    pub namespace: String,
    /// The template's `metadata.annotations`, in file order.
    pub annotations: Vec<(String, String)>,
    /// `spec.hostIPC`: the node's own `/dev/shm`.
    pub host_ipc: bool,
    /// `spec.volumes`: (name, kind: the volume source's key, `emptyDir`...).
    pub volumes: Vec<(String, String)>,
    /// Init containers first, then the app containers, as kubelet creates them.
    pub containers: Vec<Container>,
    /// Things in the template that the plan cannot see, said once per pod.
    pub notes: Vec<String>,
}

/// How kubelet runs a container of the pod.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Role {
    Init,
    /// An init container with `restartPolicy: Always`.
    Sidecar,
    App,
}

/// A container's facts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Container {
    pub name: String,
    pub role: Role,
    /// Its field path, `spec.template.spec.containers[0]`.
    pub field: String,
    /// `securityContext.readOnlyRootFilesystem`; `None`: not set (false).
    pub read_only: Option<bool>,
    /// `resources.limits.memory` in bytes.
    pub memory_limit: Option<u64>,
    /// `securityContext.runAsUser` and `runAsGroup`, the container's or else
    /// the pod's; `None`: the image's user (unknown here: root assumed).
    pub run_as: (Option<u32>, Option<u32>),
    /// `env` with `$(VAR)` expanded as kubelet does; `None`: from `valueFrom`.
    pub env: Vec<(String, Option<String>)>,
    /// `envFrom` sources, e.g. `configMapRef app-env`.
    pub env_from: Vec<String>,
    /// `volumeMounts`: (mountPath, volume name, readOnly).
    pub mounts: Vec<(String, String, bool)>,
}

/// The node's path kubelet binds a volume from (the pod uid is unknown).
fn volume_source(pod: &Pod, name: &str) -> String {
    let kind = pod.volumes.iter().find(|(n, _)| n == name).map_or("unknown", |(_, k)| k.as_str());
    let plugin = match kind {
        "emptyDir" => "empty-dir".to_string(),
        "configMap" => "configmap".to_string(),
        "downwardAPI" => "downward-api".to_string(),
        "persistentVolumeClaim" => "csi".to_string(),
        other => other.to_ascii_lowercase(),
    };
    format!("/var/lib/kubelet/pods/POD_UID/volumes/kubernetes.io~{plugin}/{name}")
}

/// The OCI spec containerd's CRI makes for `ctr` of `pod`, as far as the
/// plan reads it: `root.readonly` from `readOnlyRootFilesystem`; the
/// container's `env` (not the image's: unknown here); containerd's default
/// mounts, kubelet's `/etc/hosts` and `/dev/termination-log`, the volumes at
/// their `mountPath`, `/etc/hostname` and `/etc/resolv.conf` bound `ro`
/// exactly when the root is read-only, and the pod's `/dev/shm` (the node's
/// with `hostIPC`; none from containerd when a volume is mounted there);
/// the memory limit; the pod's annotations (containerd passes ours with
/// `pod_annotations`, NRI hands them over) and CRI's own. The container has
/// its own mount namespace, as every CRI container does.
pub(crate) fn spec_for(pod: &Pod, ctr: &Container) -> Spec {
    let ro = ctr.read_only.unwrap_or(false);
    let mut mounts = vec![
        json!({"destination": "/proc", "type": "proc", "source": "proc", "options": ["nosuid", "noexec", "nodev"]}),
        json!({"destination": "/dev", "type": "tmpfs", "source": "tmpfs", "options": ["nosuid", "strictatime", "mode=755", "size=65536k"]}),
        json!({"destination": "/dev/pts", "type": "devpts", "source": "devpts", "options": ["nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"]}),
        json!({"destination": "/dev/mqueue", "type": "mqueue", "source": "mqueue", "options": ["nosuid", "noexec", "nodev"]}),
        json!({"destination": "/sys", "type": "sysfs", "source": "sysfs", "options": ["nosuid", "noexec", "nodev", "ro"]}),
        json!({"destination": "/sys/fs/cgroup", "type": "cgroup", "source": "cgroup", "options": ["nosuid", "noexec", "nodev", "relatime", "ro"]}),
        bind("/etc/hosts", "/var/lib/kubelet/pods/POD_UID/etc-hosts", false),
        bind("/dev/termination-log", "/var/lib/kubelet/pods/POD_UID/containers/NAME/ID", false),
    ];
    for (path, volume, read_only) in &ctr.mounts {
        mounts.push(bind(path, &volume_source(pod, volume), *read_only));
    }
    let sandbox = "/var/lib/containerd/io.containerd.grpc.v1.cri/sandboxes/ID";
    mounts.push(bind("/etc/hostname", &format!("{sandbox}/hostname"), ro));
    mounts.push(bind("/etc/resolv.conf", &format!("{sandbox}/resolv.conf"), ro));
    let shm_volume = ctr.mounts.iter().any(|(p, _, _)| crate::target::normalise(p) == SHM_PATH);
    if !shm_volume {
        let source = if pod.host_ipc {
            SHM_PATH
        } else {
            "/run/containerd/io.containerd.grpc.v1.cri/sandboxes/ID/shm"
        };
        mounts.push(bind(SHM_PATH, source, false));
    }
    let env: Vec<String> =
        ctr.env.iter().filter_map(|(k, v)| v.as_ref().map(|v| format!("{k}={v}"))).collect();
    let mut annotations: Map<String, Value> =
        pod.annotations.iter().map(|(k, v)| (k.clone(), json!(v))).collect();
    annotations.insert(CRI_CONTAINER_TYPE.into(), json!("container"));
    annotations.insert(CRI_CONTAINER_NAME.into(), json!(ctr.name));
    annotations.insert(CRI_SANDBOX_NAME.into(), json!(pod.name));
    annotations.insert(CRI_SANDBOX_NAMESPACE.into(), json!(pod.namespace));
    let mut linux =
        json!({"namespaces": [{"type": "pid"}, {"type": "ipc"}, {"type": "uts"}, {"type": "mount"}]});
    if let Some(limit) = ctr.memory_limit.filter(|&l| l > 0) {
        linux["resources"] = json!({"memory": {"limit": limit}});
    }
    let config = json!({
        "ociVersion": "1.0.2",
        "root": {"path": "rootfs", "readonly": ro},
        "process": {"cwd": "/", "user": {"uid": ctr.run_as.0.unwrap_or(0), "gid": ctr.run_as.1.unwrap_or(0)}, "args": ["/pause"], "env": env},
        "mounts": mounts,
        "annotations": annotations,
        "linux": linux,
    });
    serde_json::from_value(config).expect("the spec this function builds is valid")
}

/// A bind mount as containerd writes one.
fn bind(destination: &str, source: &str, read_only: bool) -> Value {
    let rw = if read_only { "ro" } else { "rw" };
    json!({"destination": destination, "type": "bind", "source": source, "options": ["rbind", "rprivate", rw]})
}

/// Reads the pod template at `template` (its `metadata` and `spec`);
/// `namespace` is the object's.
///
/// # Errors
/// A missing or mistyped field the plan reads (or that the API server
/// requires: `containers`, each container's `name` and `image`).
pub(crate) fn read(template: &At<'_>, fallback_name: &str, namespace: &str) -> Result<Pod, ManifestError> {
    let meta = opt(template, "metadata", |m| {
        let name = opt(m, "name", |n| n.str().map(str::to_string))?;
        let annotations = opt(m, "annotations", string_map)?.unwrap_or_default();
        Ok((name, annotations))
    })?;
    let (name, annotations) = meta.unwrap_or_default();
    req(template, "spec", |spec| {
        let host_ipc = opt(spec, "hostIPC", At::bool)?.unwrap_or(false);
        let volumes = each(spec, "volumes", |v| {
            let name = req(v, "name", |n| n.str().map(str::to_string))?;
            let kind =
                v.object()?.keys().find(|k| *k != "name").cloned().unwrap_or_else(|| "emptyDir".into());
            Ok((name, kind))
        })?;
        let mut notes = Vec::new();
        if let Some(ro) =
            opt(spec, "securityContext", |sc| opt(sc, "readOnlyRootFilesystem", At::bool))?.flatten()
        {
            notes.push(format!(
                "{}.securityContext.readOnlyRootFilesystem: {ro}: not a field of a pod's securityContext \
                 (PodSecurityContext has none; the API server drops or refuses it): set it on each container",
                spec.path
            ));
        }
        if let Some(mem) =
            opt(spec, "resources", |r| opt(r, "limits", |l| opt(l, "memory", memory)))?.flatten().flatten()
        {
            notes.push(format!(
                "{}.resources.limits.memory: {mem} bytes for the whole pod: not a container's limit, which is what \
                 the plan sizes from (a container without one is sized from the node's RAM)",
                spec.path
            ));
        }
        if opt(spec, "hostUsers", At::bool)? == Some(false) {
            notes.push("hostUsers: false: the tmpfs would be owned by the pod's mapped root, which only the node knows".into());
        }
        let pod_user = opt(spec, "securityContext", |sc| opt(sc, "runAsUser", At::id))?.flatten();
        let pod_group = opt(spec, "securityContext", |sc| opt(sc, "runAsGroup", At::id))?.flatten();
        let mut containers = each(spec, "initContainers", |c| container(c, true, &volumes))?;
        containers.extend(each(spec, "containers", |c| container(c, false, &volumes))?);
        for c in &mut containers {
            c.run_as = (c.run_as.0.or(pod_user), c.run_as.1.or(pod_group));
        }
        if !containers.iter().any(|c| c.role == Role::App) {
            return Err(ManifestError::Field {
                doc: Box::new(spec.doc.clone()),
                field: super::doc::join(&spec.path, "containers"),
                problem: "missing (a pod needs at least one container)".into(),
            });
        }
        Ok(Pod {
            name: name.unwrap_or_else(|| fallback_name.to_string()),
            namespace: namespace.to_string(),
            annotations,
            host_ipc,
            volumes,
            containers,
            notes,
        })
    })
}

/// A memory quantity: a string (`1Gi`) or a plain number of bytes.
fn memory(at: &At<'_>) -> Result<u64, ManifestError> {
    let text = match at.value {
        Value::Number(n) => n.to_string(),
        _ => at.str()?.to_string(),
    };
    quantity::bytes(&text).map_err(|e| at.error(e.to_string()))
}

fn container(c: &At<'_>, init: bool, volumes: &[(String, String)]) -> Result<Container, ManifestError> {
    let name = req(c, "name", |n| n.str().map(str::to_string))?;
    req(c, "image", |n| n.str().map(|_| ()))?;
    let always = opt(c, "restartPolicy", |r| r.str().map(|s| s == "Always"))?.unwrap_or(false);
    let role = match (init, always) {
        (false, _) => Role::App,
        (true, true) => Role::Sidecar,
        (true, false) => Role::Init,
    };
    let read_only = opt(c, "securityContext", |sc| opt(sc, "readOnlyRootFilesystem", At::bool))?.flatten();
    let run_as = (
        opt(c, "securityContext", |sc| opt(sc, "runAsUser", At::id))?.flatten(),
        opt(c, "securityContext", |sc| opt(sc, "runAsGroup", At::id))?.flatten(),
    );
    let memory_limit =
        opt(c, "resources", |r| opt(r, "limits", |l| opt(l, "memory", memory)))?.flatten().flatten();
    let mut env: Vec<(String, Option<String>)> = Vec::new();
    for (key, value, from) in each(c, "env", |e| {
        let name = req(e, "name", |n| n.str().map(str::to_string))?;
        let value = opt(e, "value", |v| v.str().map(str::to_string))?;
        let from = opt(e, "valueFrom", |v| v.object().map(|_| ()))?;
        Ok((name, value, from.is_some()))
    })? {
        let value = if from { None } else { Some(expand(&value.unwrap_or_default(), &env)) };
        // kubelet: a later entry of the same name wins.
        env.retain(|(n, _)| *n != key);
        env.push((key, value));
    }
    let env_from = each(c, "envFrom", |e| {
        for key in ["configMapRef", "secretRef"] {
            if let Some(n) = opt(e, key, |r| opt(r, "name", |n| n.str().map(str::to_string)))? {
                return Ok(format!("{key} {}", n.unwrap_or_default()));
            }
        }
        Ok("a source".to_string())
    })?;
    let mounts = each(c, "volumeMounts", |m| {
        let volume = req(m, "name", |n| n.str().map(str::to_string))?;
        if !volumes.iter().any(|(n, _)| *n == volume) {
            return Err(m.error(format!("name: no volume {volume:?} in the pod's volumes")));
        }
        let path = req(m, "mountPath", |p| p.str().map(str::to_string))?;
        let read_only = opt(m, "readOnly", At::bool)?.unwrap_or(false);
        Ok((path, volume, read_only))
    })?;
    Ok(Container {
        name,
        role,
        field: c.path.to_string(),
        read_only,
        memory_limit,
        run_as,
        env,
        env_from,
        mounts,
    })
}

/// kubelet's `$(VAR)` expansion of an env value: a variable defined
/// earlier in the list is substituted, `$$` is a `$`, anything else stays.
fn expand(value: &str, env: &[(String, Option<String>)]) -> String {
    let mut out = String::new();
    let mut rest = value;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
        } else if let Some((name, tail)) = after.strip_prefix('(').and_then(|a| a.split_once(')')) {
            match env.iter().find(|(n, _)| n == name).and_then(|(_, v)| v.as_ref()) {
                Some(v) => out.push_str(v),
                None => {
                    out.push_str("$(");
                    out.push_str(name);
                    out.push(')');
                }
            }
            rest = tail;
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_expansion_as_kubelet() {
        let env = vec![("BASE".to_string(), Some("/scratch".to_string())), ("SECRET".to_string(), None)];
        for (value, want) in [
            ("$(BASE)/tmp", "/scratch/tmp"),
            ("$$(BASE)", "$(BASE)"),
            ("$(NOPE)/x", "$(NOPE)/x"),
            ("$(SECRET)", "$(SECRET)"),
            ("a$b", "a$b"),
            ("$(BASE", "$(BASE"),
        ] {
            assert_eq!(expand(value, &env), want, "{value}");
        }
    }
}
