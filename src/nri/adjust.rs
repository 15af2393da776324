//! From an NRI `CreateContainer` request to the plan's inputs, and from the
//! plan to the `ContainerAdjustment`. Pure: no I/O, no syscalls.
//!
//! NRI's `Container` has no read-only-root field. containerd's CRI
//! bind-mounts the pod's `/etc/hostname` and `/etc/resolv.conf` with `ro`
//! exactly when the container's `readonly_rootfs` is set (kubelet's
//! `/etc/hosts` stays `rw` either way), and CRI-O does the same for both
//! files; so a container whose `/etc/hostname` or `/etc/resolv.conf` bind is
//! `ro` is taken as read-only ([`readonly_root`]). The enable annotation
//! (`oci-tmpfs-hook/enabled`, honoured under `annotations = "allow"`) still
//! overrides that either way, as it does for the hook.
//!
//! The request becomes a minimal OCI spec (root, env, mounts, namespaces,
//! memory limit, annotations) for [`crate::plan::decide`], so the NRI path
//! runs the same pure plan as the hook and the wrapper. Annotations: the
//! pod's (its CRI annotations, where users set ours), then the container's
//! over them (containerd's `io.kubernetes.cri.container-type` among them).

use std::collections::HashMap;

use oci_spec::runtime::Spec;
use serde_json::{json, Map, Value};

use super::proto::api;
use crate::plan::{Action, Plan, ShmSource, ShmWay};
use crate::size::Bytes;
use crate::spec::{self, TmpfsMount};

/// The container files whose `ro` bind says the root is read-only.
pub const READONLY_SIGNALS: [&str; 2] = ["/etc/hostname", "/etc/resolv.conf"];

/// The OCI namespace types a spec may name (others are left out).
const NAMESPACES: [&str; 8] = ["pid", "network", "ipc", "uts", "mount", "user", "cgroup", "time"];

/// Whether the runtime made the container's root read-only: its
/// `/etc/hostname` or `/etc/resolv.conf` is bound `ro`.
pub fn readonly_root(ctr: &api::Container) -> bool {
    ctr.mounts.iter().any(|m| {
        READONLY_SIGNALS.contains(&crate::target::normalise(&m.destination).as_str())
            && m.options.iter().any(|o| o == "ro")
    })
}

/// The signal mounts as the runtime sent them, for a log line:
/// `/etc/hostname [rbind,rprivate,ro]; ...`.
pub fn signals(ctr: &api::Container) -> String {
    let found: Vec<String> = ctr
        .mounts
        .iter()
        .filter(|m| READONLY_SIGNALS.contains(&crate::target::normalise(&m.destination).as_str()))
        .map(|m| format!("{} [{}]", m.destination, m.options.join(",")))
        .collect();
    if found.is_empty() {
        "no /etc/hostname or /etc/resolv.conf mount".to_string()
    } else {
        found.join("; ")
    }
}

/// `namespace/pod/container`, for log lines.
pub fn who(pod: Option<&api::PodSandbox>, ctr: &api::Container) -> String {
    match pod {
        Some(p) => format!("{}/{}/{}", p.namespace, p.name, ctr.name),
        None => format!("?/{}/{}", ctr.pod_sandbox_id, ctr.name),
    }
}

/// The annotations the plan sees: the pod's, the container's over them.
fn annotations(pod: Option<&api::PodSandbox>, ctr: &api::Container) -> Map<String, Value> {
    let empty = HashMap::new();
    let pod = pod.map_or(&empty, |p| &p.annotations);
    pod.iter().chain(ctr.annotations.iter()).map(|(k, v)| (k.clone(), json!(v))).collect()
}

/// The request as the OCI spec the plan reads.
///
/// # Errors
/// A field the spec types refuse (never expected from a runtime).
pub fn spec_of(pod: Option<&api::PodSandbox>, ctr: &api::Container) -> Result<Spec, serde_json::Error> {
    let mounts: Vec<Value> = ctr
        .mounts
        .iter()
        .map(|m| {
            json!({"destination": m.destination, "type": m.type_, "source": m.source, "options": m.options})
        })
        .collect();
    let linux = ctr.linux.as_ref();
    let mut namespaces: Vec<Value> = linux
        .map(|l| &l.namespaces[..])
        .unwrap_or_default()
        .iter()
        .filter(|n| NAMESPACES.contains(&n.type_.as_str()))
        .map(|n| {
            if n.path.is_empty() {
                json!({"type": n.type_})
            } else {
                json!({"type": n.type_, "path": n.path})
            }
        })
        .collect();
    if namespaces.is_empty() {
        // NRI covers CRI containers only, and each has a mount namespace of
        // its own; a runtime that sends no namespaces means that one.
        namespaces.push(json!({"type": "mount"}));
    }
    let mut linux_json = json!({ "namespaces": namespaces });
    let limit = linux
        .and_then(|l| l.resources.as_ref())
        .and_then(|r| r.memory.as_ref())
        .and_then(|m| m.limit.as_ref())
        .map(|l| l.value);
    if let Some(limit) = limit {
        linux_json["resources"] = json!({"memory": {"limit": limit}});
    }
    let config = json!({
        "ociVersion": "1.0.2",
        "root": {"path": "rootfs", "readonly": readonly_root(ctr)},
        "process": {"cwd": "/", "user": {"uid": 0, "gid": 0}, "args": ctr.args, "env": ctr.env},
        "mounts": mounts,
        "annotations": annotations(pod, ctr),
        "linux": linux_json,
    });
    serde_json::from_value(config)
}

/// The adjustment carrying out `plan`: a tmpfs mount per fresh mount of the
/// spec executor ([`spec::fresh_mounts`]); a mount on a destination the
/// spec already has replaces it.
pub fn adjustment(plan: &Plan) -> api::ContainerAdjustment {
    let mut adjust = api::ContainerAdjustment::new();
    adjust.mounts = spec::fresh_mounts(plan, &[]).iter().map(mount).collect();
    adjust
}

fn mount(m: &TmpfsMount) -> api::Mount {
    let mut out = api::Mount::new();
    out.destination = m.destination.clone();
    out.type_ = "tmpfs".to_string();
    out.source = spec::SOURCE.to_string();
    out.options = m.options.clone();
    out
}

/// The engine-made `/dev/shm` (its host path) to grow on the host, and to
/// what: the pod's shm that CRI binds into every container of the pod.
pub fn host_shm(plan: &Plan) -> Option<(&str, Bytes)> {
    if !plan.enabled {
        return None;
    }
    plan.actions.iter().find_map(|a| match a {
        Action::Shm { existing: ShmSource::Bind { source }, way: ShmWay::Grow, tmpfs, .. } => {
            Some((source.as_str(), tmpfs.size.bytes))
        }
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{decide, Inputs};
    use crate::settings::Settings;

    const MI: u64 = 1 << 20;
    const GI: u64 = 1 << 30;

    fn mnt(dest: &str, typ: &str, src: &str, opts: &[&str]) -> api::Mount {
        let mut m = api::Mount::new();
        m.destination = dest.into();
        m.type_ = typ.into();
        m.source = src.into();
        m.options = opts.iter().map(|s| s.to_string()).collect();
        m
    }

    /// A container as containerd 2.1's CRI sends it (mounts as measured).
    fn ctr(readonly: bool, limit: Option<i64>) -> api::Container {
        let ro = if readonly { "ro" } else { "rw" };
        let mut c = api::Container::new();
        c.name = "app".into();
        c.env = vec!["PATH=/bin".into()];
        c.annotations.insert("io.kubernetes.cri.container-type".into(), "container".into());
        c.mounts = vec![
            mnt("/proc", "proc", "proc", &["nosuid", "noexec", "nodev"]),
            mnt("/dev", "tmpfs", "tmpfs", &["nosuid", "strictatime", "mode=755", "size=65536k"]),
            mnt("/etc/hosts", "bind", "/var/lib/kubelet/pods/u/etc-hosts", &["rbind", "rprivate", "rw"]),
            mnt(
                "/etc/hostname",
                "bind",
                "/var/lib/containerd/sandboxes/p/hostname",
                &["rbind", "rprivate", ro],
            ),
            mnt(
                "/etc/resolv.conf",
                "bind",
                "/var/lib/containerd/sandboxes/p/resolv.conf",
                &["rbind", "rprivate", ro],
            ),
            mnt(
                "/dev/shm",
                "bind",
                "/run/containerd/io.containerd.grpc.v1.cri/sandboxes/p/shm",
                &["rbind", "rprivate", "rw"],
            ),
        ];
        let mut linux = api::LinuxContainer::new();
        let mut ns = api::LinuxNamespace::new();
        ns.type_ = "mount".into();
        linux.namespaces.push(ns);
        if let Some(l) = limit {
            let mut v = api::OptionalInt64::new();
            v.value = l;
            let mut mem = api::LinuxMemory::new();
            mem.limit = Some(v).into();
            let mut res = api::LinuxResources::new();
            res.memory = Some(mem).into();
            linux.resources = Some(res).into();
        }
        c.linux = Some(linux).into();
        c
    }

    fn plan(pod: Option<&api::PodSandbox>, c: &api::Container, settings: &Settings) -> Plan {
        let spec = spec_of(pod, c).expect("spec");
        decide(&Inputs { spec: &spec, state_annotations: None, settings, host_ram: Bytes(16 * GI) })
            .expect("plan")
    }

    #[test]
    fn readonly_signal_table() {
        let mut odd = ctr(false, None);
        odd.mounts.push(mnt("/etc//hostname/", "bind", "/x", &["ro"]));
        let cases = [
            ("ro binds", ctr(true, None), true),
            ("rw binds", ctr(false, None), false),
            ("ro later bind", odd, true),
        ];
        for (name, c, want) in cases {
            assert_eq!(readonly_root(&c), want, "{name}");
        }
    }

    #[test]
    fn read_only_1gi_gets_tmp_and_the_pod_shm_grown() {
        let p = plan(None, &ctr(true, Some(GI as i64)), &Settings::default());
        let adj = adjustment(&p);
        assert_eq!(adj.mounts.len(), 1);
        let m = &adj.mounts[0];
        assert_eq!(
            (m.destination.as_str(), m.type_.as_str(), m.source.as_str()),
            ("/tmp", "tmpfs", "oci-tmpfs-hook")
        );
        assert_eq!(m.options, ["nosuid", "nodev", "mode=1777", &format!("size={}", 256 * MI)]);
        assert_eq!(
            host_shm(&p),
            Some(("/run/containerd/io.containerd.grpc.v1.cri/sandboxes/p/shm", Bytes(512 * MI)))
        );
    }

    #[test]
    fn writable_sandbox_and_annotated() {
        assert!(adjustment(&plan(None, &ctr(false, Some(GI as i64)), &Settings::default()))
            .mounts
            .is_empty());
        let mut pause = ctr(true, None);
        pause.annotations.insert("io.kubernetes.cri.container-type".into(), "sandbox".into());
        let p = plan(None, &pause, &Settings::default());
        assert!(adjustment(&p).mounts.is_empty() && host_shm(&p).is_none());
        let mut pod = api::PodSandbox::new();
        pod.annotations.insert("oci-tmpfs-hook/tmp-size".into(), "100Mi".into());
        pod.annotations.insert("oci-tmpfs-hook/enabled".into(), "true".into());
        let p = plan(Some(&pod), &ctr(false, Some(GI as i64)), &Settings::default());
        assert_eq!(adjustment(&p).mounts[0].options.last().unwrap(), &format!("size={}", 100 * MI));
    }

    #[test]
    fn host_ipc_and_no_namespaces() {
        let mut c = ctr(true, Some(GI as i64));
        c.mounts.retain(|m| m.destination != "/dev/shm");
        c.mounts.push(mnt("/dev/shm", "bind", "/dev/shm", &["rbind", "rprivate", "rw"]));
        c.linux.mut_or_insert_default().namespaces.clear();
        let p = plan(None, &c, &Settings::default());
        assert_eq!(host_shm(&p), None);
        assert_eq!(adjustment(&p).mounts.len(), 1);
    }
}
