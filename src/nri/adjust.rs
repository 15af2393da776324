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
//! memory limit, annotations) for [`crate::plan::plan_for`], so the NRI path
//! runs the same pure plan as the hook and the wrapper. Annotations: the
//! pod's (its CRI annotations, where users set ours), then the container's
//! over them (containerd's `io.kubernetes.cri.container-type` among them).
//!
//! The plan decides only whether the container gets our hook; the
//! adjustment never carries a mount ([`adjustment`], docs/nri.md): the hook
//! makes the plan's mounts, and grows the pod's `/dev/shm`, by fd in the
//! container's namespace, judged on the final layout.

use std::collections::HashMap;

use crate::oci::Spec;
use serde_json::{json, Map, Value};

use std::path::PathBuf;

use super::proto::api;
use crate::plan::Plan;
use crate::stage::Stage;

// The prefix of our annotations, the ones copied from the pod.
use crate::names::ANNOTATION_PREFIX;

/// The container files whose `ro` bind says the root is read-only.
pub(crate) const READONLY_SIGNALS: [&str; 2] = ["/etc/hostname", "/etc/resolv.conf"];

/// The OCI namespace types a spec may name (others are left out).
const NAMESPACES: [&str; 8] = ["pid", "network", "ipc", "uts", "mount", "user", "cgroup", "time"];

/// Whether the runtime made the container's root read-only: its
/// `/etc/hostname` or `/etc/resolv.conf` is bound `ro`.
pub(crate) fn readonly_root(ctr: &api::Container) -> bool {
    ctr.mounts.iter().any(|m| {
        READONLY_SIGNALS.contains(&crate::target::normalise(&m.destination).as_str())
            && m.options.iter().any(|o| o == "ro")
    })
}

/// The signal mounts as the runtime sent them, for a log line:
/// `/etc/hostname [rbind,rprivate,ro]; ...`.
pub(crate) fn signals(ctr: &api::Container) -> String {
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
pub(crate) fn who(pod: Option<&api::PodSandbox>, ctr: &api::Container) -> String {
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
pub(crate) fn spec_of(
    pod: Option<&api::PodSandbox>,
    ctr: &api::Container,
) -> Result<Spec, serde_json::Error> {
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
    // The process's user where the runtime sends it (NRI v0.11+, containerd
    // 2.3 fills it in every Container message); else root, and the hook
    // reads the real one from config.json.
    let (uid, gid) = ctr.user.as_ref().map_or((0, 0), |u| (u.uid, u.gid));
    let config = json!({
        "ociVersion": "1.0.2",
        "root": {"path": "rootfs", "readonly": readonly_root(ctr)},
        "process": {"cwd": "/", "user": {"uid": uid, "gid": gid}, "args": ctr.args, "env": ctr.env},
        "mounts": mounts,
        "annotations": annotations(pod, ctr),
        "linux": linux_json,
    });
    serde_json::from_value(config)
}

/// Where the node has our hook: the binary and the host config it reads,
/// as the runtime (which runs the hook) sees them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct HookSite {
    /// The hook binary on the node.
    pub path: PathBuf,
    /// The host config on the node, passed as `--config`; `None`: the
    /// hook's default path.
    pub config: Option<PathBuf>,
}

/// The stage the adjustment registers the hook at: after the runtime has
/// made the container's mounts, before `pivot_root`, in the runtime's
/// namespace (the hook enters the container's), as the hooks dir does.
pub(crate) const HOOK_STAGE: Stage = Stage::CreateRuntime;

/// Whether `plan` needs our hook: it has something to do, or asks what
/// only the image can say (only an enabled plan does).
pub(crate) fn needs_hook(plan: &Plan) -> bool {
    plan.has_work()
}

/// The adjustment carrying out `plan`: never a mount (the plugin cannot see
/// the rootfs, and containerd resolves an adjusted mount by path after the
/// volumes: docs/nri.md), but our OCI hook at [`HOOK_STAGE`], which makes
/// the plan's mounts by fd in the container's namespace with the landing
/// rules of the hook; and the pod's `oci-tmpfs-hook/*` annotations the
/// container lacks, so that the hook's plan reads what this one read (CRI
/// does not pass pod annotations to the spec unless configured to). A plan
/// with nothing to do adjusts nothing.
pub(crate) fn adjustment(
    plan: &Plan,
    pod: Option<&api::PodSandbox>,
    ctr: &api::Container,
    site: &HookSite,
) -> api::ContainerAdjustment {
    let mut adjust = api::ContainerAdjustment::new();
    if !needs_hook(plan) {
        return adjust;
    }
    let mut hook = api::Hook::new();
    hook.path = site.path.display().to_string();
    hook.args = crate::names::hook_argv(HOOK_STAGE, site.config.as_deref());
    hook.env = vec![crate::names::HOOK_PATH_ENV.to_string()];
    let mut hooks = api::Hooks::new();
    hooks.create_runtime.push(hook);
    adjust.hooks = Some(hooks).into();
    if let Some(pod) = pod {
        adjust.annotations = pod
            .annotations
            .iter()
            .filter(|(k, _)| k.starts_with(ANNOTATION_PREFIX) && !ctr.annotations.contains_key(*k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
    }
    adjust
}

/// What `plan` asks of the hook, for a log line: `/tmp 256Mi, /dev/shm 512Mi`.
pub(crate) fn summary(plan: &Plan) -> String {
    let parts: Vec<String> =
        plan.actions.iter().map(|a| format!("{} {}", a.target(), a.tmpfs().size.bytes)).collect();
    parts.join(", ")
}

/// Pieces of the requests containerd's CRI sends, for the tests here and
/// the manifest path's (`crate::manifest`), which must agree with this one.
#[cfg(test)]
pub(crate) mod fixtures {
    use crate::nri::proto::api;

    /// One mount of a request.
    pub(crate) fn mnt(dest: &str, typ: &str, src: &str, opts: &[&str]) -> api::Mount {
        let mut m = api::Mount::new();
        m.destination = dest.into();
        m.type_ = typ.into();
        m.source = src.into();
        m.options = opts.iter().map(|s| s.to_string()).collect();
        m
    }

    /// A container's `linux`: its own mount namespace, and its memory limit.
    pub(crate) fn linux(limit: Option<i64>) -> api::LinuxContainer {
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
        linux
    }
}

#[cfg(test)]
mod tests {
    use super::fixtures::{linux, mnt};
    use super::*;
    use crate::host_config::HostConfig;
    use crate::size::Bytes;

    const MI: u64 = 1 << 20;
    const GI: u64 = 1 << 30;

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
        c.linux = Some(linux(limit)).into();
        c
    }

    fn plan(pod: Option<&api::PodSandbox>, c: &api::Container, host_config: &HostConfig) -> Plan {
        let spec = spec_of(pod, c).expect("spec");
        crate::plan::fixtures::plan_of(&spec, host_config).expect("plan")
    }

    #[test]
    fn the_user_a_runtime_sends_is_the_specs() {
        let mut c = ctr(true, None);
        let user_of = |c: &api::Container| {
            let spec = spec_of(None, c).expect("spec");
            let u = *spec.process().as_ref().expect("process").user();
            (u.uid(), u.gid())
        };
        assert_eq!(user_of(&c), (0, 0), "none sent (NRI before v0.11): root");
        let mut user = api::User::new();
        user.uid = 1000;
        user.gid = 1001;
        c.user = Some(user).into();
        assert_eq!(user_of(&c), (1000, 1001), "containerd 2.3 sends it");
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

    fn site() -> HookSite {
        HookSite {
            path: PathBuf::from("/opt/oci-tmpfs-hook/oci-tmpfs-hook"),
            config: Some(PathBuf::from("/opt/oci-tmpfs-hook/config.toml")),
        }
    }

    fn adjust(pod: Option<&api::PodSandbox>, c: &api::Container) -> api::ContainerAdjustment {
        adjustment(&plan(pod, c, &HostConfig::default()), pod, c, &site())
    }

    #[test]
    fn read_only_1gi_gets_our_hook_and_no_mount() {
        let c = ctr(true, Some(GI as i64));
        let p = plan(None, &c, &HostConfig::default());
        assert_eq!(summary(&p), format!("/tmp {}, /dev/shm {}", Bytes(256 * MI), Bytes(512 * MI)));
        let adj = adjustment(&p, None, &c, &site());
        assert!(adj.mounts.is_empty(), "{:?}", adj.mounts);
        assert!(adj.annotations.is_empty() && adj.env.is_empty());
        let hooks = adj.hooks.as_ref().expect("hooks");
        assert!(hooks.prestart.is_empty() && hooks.create_container.is_empty());
        assert_eq!(hooks.create_runtime.len(), 1);
        let h = &hooks.create_runtime[0];
        assert_eq!(h.path, "/opt/oci-tmpfs-hook/oci-tmpfs-hook");
        assert_eq!(
            h.args,
            [
                "oci-tmpfs-hook",
                "hook",
                "--stage",
                "createRuntime",
                "--config",
                "/opt/oci-tmpfs-hook/config.toml"
            ]
        );
        assert_eq!(h.env, [crate::names::HOOK_PATH_ENV]);
        let default = HookSite { path: PathBuf::from("/usr/bin/oci-tmpfs-hook"), config: None };
        let h = &adjustment(&p, None, &c, &default).hooks.create_runtime[0].clone();
        assert_eq!(h.args, ["oci-tmpfs-hook", "hook", "--stage", "createRuntime"]);
    }

    #[test]
    fn writable_sandbox_and_annotated() {
        assert_eq!(adjust(None, &ctr(false, Some(GI as i64))), api::ContainerAdjustment::new());
        let mut pause = ctr(true, None);
        pause.annotations.insert("io.kubernetes.cri.container-type".into(), "sandbox".into());
        assert_eq!(adjust(None, &pause), api::ContainerAdjustment::new());
        // Below 1 MiB: no tmpfs at all, so no hook.
        assert_eq!(adjust(None, &ctr(true, Some(512 << 10))), api::ContainerAdjustment::new());
        let mut pod = api::PodSandbox::new();
        pod.annotations.insert("oci-tmpfs-hook/tmp-size".into(), "100Mi".into());
        pod.annotations.insert("oci-tmpfs-hook/enabled".into(), "true".into());
        pod.annotations.insert("oci-tmpfs-hook/shm-size".into(), "1Gi".into());
        pod.annotations.insert("other/key".into(), "x".into());
        let mut c = ctr(false, Some(GI as i64));
        c.annotations.insert("oci-tmpfs-hook/shm-size".into(), "300Mi".into());
        let p = plan(Some(&pod), &c, &HostConfig::default());
        assert_eq!(summary(&p), format!("/tmp {}, /dev/shm {}", Bytes(100 * MI), Bytes(300 * MI)));
        let adj = adjustment(&p, Some(&pod), &c, &site());
        assert_eq!(adj.hooks.create_runtime.len(), 1);
        // Ours only, and not over the container's own.
        let mut copied: Vec<(&str, &str)> =
            adj.annotations.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        copied.sort();
        assert_eq!(copied, [("oci-tmpfs-hook/enabled", "true"), ("oci-tmpfs-hook/tmp-size", "100Mi")]);
        // Disabled by the pod: nothing, not even the annotations.
        pod.annotations.insert("oci-tmpfs-hook/enabled".into(), "false".into());
        assert_eq!(adjust(Some(&pod), &ctr(true, Some(GI as i64))), api::ContainerAdjustment::new());
    }

    #[test]
    fn host_ipc_and_no_namespaces() {
        let mut c = ctr(true, Some(GI as i64));
        c.mounts.retain(|m| m.destination != "/dev/shm");
        c.mounts.push(mnt("/dev/shm", "bind", "/dev/shm", &["rbind", "rprivate", "rw"]));
        c.linux.mut_or_insert_default().namespaces.clear();
        let p = plan(None, &c, &HostConfig::default());
        assert_eq!(summary(&p), format!("/tmp {}", Bytes(256 * MI)));
        assert_eq!(adjustment(&p, None, &c, &site()).hooks.create_runtime.len(), 1);
    }

    /// A cache dir named in the env is a target of the plan, so the hook is
    /// needed for it alone: here `/tmp` is a volume and `/dev/shm` the
    /// host's (never grown), and only `TRITON_CACHE_DIR` gives the hook
    /// something to do.
    #[test]
    fn a_cache_dir_in_the_env_needs_the_hook() {
        let mut c = ctr(true, Some(GI as i64));
        c.mounts.push(mnt(
            "/tmp",
            "bind",
            "/var/lib/kubelet/pods/u/volumes/tmp",
            &["rbind", "rprivate", "rw"],
        ));
        c.mounts.retain(|m| m.destination != "/dev/shm");
        c.mounts.push(mnt("/dev/shm", "bind", "/dev/shm", &["rbind", "rprivate", "rw"]));
        // HOME aside (below): it comes from the image's /etc/passwd.
        let no_home = HostConfig::parse("home = false").unwrap();
        let p = plan(None, &c, &no_home);
        assert!(!needs_hook(&p), "{p:?}");
        // A HOME that only the image's /etc/passwd names is work for the
        // hook too: the plan asks for it, and only the hook can read it.
        let p = plan(None, &c, &HostConfig::default());
        assert!(needs_hook(&p) && p.actions.is_empty() && p.passwd_uid.is_some(), "{p:?}");
        c.env.push("TRITON_CACHE_DIR=/cache/triton".into());
        let p = plan(None, &c, &no_home);
        assert_eq!(summary(&p), format!("/cache/triton {}", Bytes(256 * MI)));
        assert!(needs_hook(&p));
        assert_eq!(adjustment(&p, None, &c, &site()).hooks.create_runtime.len(), 1);
        let off = HostConfig::parse("home = false\nenv_targets = []").unwrap();
        assert!(!needs_hook(&plan(None, &c, &off)));
    }

    /// A container whose mount namespace is an existing one gets no hook
    /// and no error: nothing can be mounted there safely, and the plan
    /// says so in one warning.
    #[test]
    fn a_shared_mount_namespace_gets_no_hook() {
        let mut c = ctr(true, Some(GI as i64));
        c.linux.mut_or_insert_default().namespaces[0].path = "/proc/42/ns/mnt".into();
        let p = plan(None, &c, &HostConfig::default());
        assert!(!needs_hook(&p), "{p:?}");
        assert_eq!(adjustment(&p, None, &c, &site()), api::ContainerAdjustment::new());
        let warnings: Vec<_> = p.notes.iter().filter(|n| n.warn).collect();
        assert_eq!(warnings.len(), 1, "{:?}", p.notes);
        assert!(warnings[0].reason.contains("(path /proc/42/ns/mnt)"), "{:?}", warnings[0]);
    }
}
