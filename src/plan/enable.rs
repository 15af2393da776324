//! Step 1 of the plan: does the hook act for this container, may it, and who
//! owns what it mounts. Pure: reads the spec and its annotations only.

use crate::oci::{LinuxNamespaceType, Spec};

use super::{Inputs, Note, Off, Owner, PlanError, ANNOTATION_ENABLED};
use crate::names::{CRIO_CONTAINER_TYPE, CRI_CONTAINER_TYPE, SANDBOX};

/// Whether the hook acts, and why.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Enablement {
    pub(super) enabled: bool,
    pub(super) why: String,
    /// Why not, when not enabled.
    pub(super) off: Option<Off>,
}

/// Off for a pod's sandbox (pause) container, whatever it asks: nothing runs
/// there but pause, and a `/dev/shm` grown there (sized from host RAM, as it
/// has no memory limit) would be the pod's for good, since shm never shrinks.
/// Else on when the root is read-only, unless the enable annotation says
/// otherwise.
pub(super) fn enablement(inputs: &Inputs<'_>) -> Result<Enablement, PlanError> {
    for key in [CRI_CONTAINER_TYPE, CRIO_CONTAINER_TYPE] {
        if inputs.annotation(key) == Some(SANDBOX) {
            let why = format!("a pod sandbox container ({key}={SANDBOX}): nothing runs there but pause");
            return Ok(Enablement { enabled: false, why, off: Some(Off::Sandbox) });
        }
    }
    let readonly = inputs.spec.root().as_ref().and_then(|r| r.readonly()).unwrap_or(false);
    let (off, why) = match inputs.annotation(ANNOTATION_ENABLED) {
        Some("true") => (None, format!("annotation {ANNOTATION_ENABLED}=true")),
        Some("false") => (Some(Off::Annotation), format!("annotation {ANNOTATION_ENABLED}=false")),
        Some(other) => return Err(PlanError::Enabled(other.to_string())),
        None if readonly => (None, "root.readonly is true".to_string()),
        None => (Some(Off::WritableRoot), "the root filesystem is writable".to_string()),
    };
    Ok(Enablement { enabled: off.is_none(), why, off })
}

/// A container the hook may act on names its rootfs.
pub(super) fn check_container(spec: &Spec) -> Result<(), PlanError> {
    if spec.root().as_ref().is_none_or(|r| r.path().as_os_str().is_empty()) {
        return Err(PlanError::NoRoot);
    }
    Ok(())
}

/// What the plan's `why` ends with for a container left alone by
/// [`unserved`].
pub(super) const NO_OWN_MOUNT_NAMESPACE: &str = "the container has no mount namespace of its own";

/// Why nothing can be mounted for this container, when nothing can: it has
/// no mount namespace of its own, so a tmpfs made for it would land in the
/// runtime's namespace (no `mount` entry in `linux.namespaces`) or in one it
/// shares (an entry with a `path`). The runtime runs such a container;
/// the plan leaves it alone, with this warning (docs/design.md#hostile-rootfs).
/// A path is named as given: it may not be a mount namespace at all.
pub(super) fn unserved(spec: &Spec) -> Option<Note> {
    let ns = spec
        .linux()
        .as_ref()
        .and_then(|l| l.namespaces().as_ref())
        .and_then(|n| n.iter().find(|n| n.typ() == LinuxNamespaceType::Mount));
    let reason = match ns.map(|n| n.path()) {
        None => format!(
            "{NO_OWN_MOUNT_NAMESPACE} (linux.namespaces has no \"mount\" entry): a tmpfs mounted for it would land in the runtime's; add a \"mount\" entry without a path to get them"
        ),
        Some(Some(p)) if !p.as_os_str().is_empty() => format!(
            "the container's \"mount\" entry in linux.namespaces names an existing namespace (path {}): it would share every tmpfs mounted for it with whatever else is there; drop the path to get them",
            p.display()
        ),
        Some(_) => return None,
    };
    Some(Note::warn(UNSERVED_SUBJECT, reason))
}

/// What a container left alone by [`unserved`] does not get.
pub(super) const UNSERVED_SUBJECT: &str = "/tmp, the temp dirs and /dev/shm";

/// The host ids the container's uid 0 and gid 0 map to, when it has a user
/// namespace with mappings that cover them.
pub(super) fn container_root_owner(spec: &Spec) -> Option<Owner> {
    let linux = spec.linux().as_ref()?;
    if !in_user_namespace(linux) {
        return None;
    }
    let root_of = |maps: &Option<Vec<crate::oci::LinuxIdMapping>>| -> Option<u32> {
        maps.as_ref()?.iter().find(|m| m.container_id() == 0 && m.size() > 0).map(|m| m.host_id())
    };
    Some(Owner { uid: root_of(linux.uid_mappings())?, gid: root_of(linux.gid_mappings())? })
}

/// Whether the container runs in a user namespace: one of its own (an
/// entry without a path) or one it joins (an entry with a path, as
/// containerd's CRI gives each app container of a `hostUsers: false` pod,
/// with the sandbox's `uidMappings`/`gidMappings` beside it:
/// docs/design.md#user-namespaces). Either way the spec's mappings say
/// which host ids its ids are.
pub(super) fn in_user_namespace(linux: &crate::oci::Linux) -> bool {
    linux.namespaces().as_ref().is_some_and(|ns| ns.iter().any(|n| n.typ() == LinuxNamespaceType::User))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::host_config::HostConfig;
    use crate::plan::enable;
    use crate::plan::fixtures::{base, plan, shm, tmpfs_targets, with, GI, MI};
    use crate::plan::{
        Action, Plan, ShmSource, SizeFrom, ANNOTATION_ENABLED, ANNOTATION_SHM_SIZE, ANNOTATION_TMP_SIZE,
    };
    use crate::size::Bytes;

    fn spec(v: serde_json::Value) -> Spec {
        serde_json::from_value(v).expect("valid spec")
    }

    #[test]
    fn enablement_table() {
        let host_config = HostConfig::default();
        let cases = [
            ("read-only root", json!({"path": "r", "readonly": true}), None, Ok(true)),
            ("writable root", json!({"path": "r", "readonly": false}), None, Ok(false)),
            ("readonly unset", json!({"path": "r"}), None, Ok(false)),
            ("forced on", json!({"path": "r"}), Some("true"), Ok(true)),
            ("forced off", json!({"path": "r", "readonly": true}), Some("false"), Ok(false)),
            ("bad value", json!({"path": "r"}), Some("yes"), Err(PlanError::Enabled("yes".into()))),
            ("containerd sandbox", json!({"path": "r", "readonly": true}), Some("sandbox:cri"), Ok(false)),
            (
                "CRI-O sandbox, forced on",
                json!({"path": "r", "readonly": true}),
                Some("sandbox:crio"),
                Ok(false),
            ),
            (
                "containerd app container",
                json!({"path": "r", "readonly": true}),
                Some("container:cri"),
                Ok(true),
            ),
        ];
        for (name, root, annotation, want) in cases {
            let mut v = json!({"ociVersion": "1.0.2", "root": root});
            match annotation.and_then(|a| a.split_once(':')) {
                Some((kind, "cri")) => v["annotations"] = json!({ CRI_CONTAINER_TYPE: kind }),
                Some((kind, _)) => {
                    v["annotations"] = json!({ CRIO_CONTAINER_TYPE: kind, ANNOTATION_ENABLED: "true" })
                }
                None => {
                    if let Some(a) = annotation {
                        v["annotations"] = json!({ ANNOTATION_ENABLED: a });
                    }
                }
            }
            let s = spec(v);
            let inputs = Inputs {
                spec: &s,
                state_annotations: None,
                host_config: &host_config,
                host_ram: Bytes(1 << 30),
                user: &crate::plan::UserFacts::HOOK,
            };
            assert_eq!(enablement(&inputs).map(|v| v.enabled), want, "{name}");
        }
    }

    #[test]
    fn container_check_table() {
        let cases = [
            ("own mount ns", json!({"path": "r"}), Ok(())),
            ("empty root path", json!({"path": ""}), Err(PlanError::NoRoot)),
        ];
        for (name, root, want) in cases {
            let s = spec(
                json!({"ociVersion": "1.0.2", "root": root, "linux": {"namespaces": [{"type": "mount"}]}}),
            );
            assert_eq!(check_container(&s), want, "{name}");
        }
    }

    /// A container without a mount namespace of its own is left alone with
    /// one warning that says why, and names a path as given, without
    /// claiming what it is.
    #[test]
    fn unserved_table() {
        type Case = (&'static str, serde_json::Value, Option<&'static [&'static str]>);
        let cases: [Case; 6] = [
            ("own mount ns", json!([{"type": "pid"}, {"type": "mount"}]), None),
            ("own mount ns, empty path", json!([{"type": "mount", "path": ""}]), None),
            (
                "no mount entry",
                json!([{"type": "pid"}]),
                Some(&["no mount namespace of its own", "runtime's"]),
            ),
            ("no namespaces", json!([]), Some(&["no \"mount\" entry"])),
            (
                "joined mount ns",
                json!([{"type": "mount", "path": "/proc/1/ns/mnt"}]),
                Some(&["names an existing namespace (path /proc/1/ns/mnt): it would share"]),
            ),
            (
                "a network namespace as the mount namespace",
                json!([{"type": "mount", "path": "/proc/self/ns/net"}]),
                Some(&["(path /proc/self/ns/net)"]),
            ),
        ];
        for (name, namespaces, want) in cases {
            let s = spec(
                json!({"ociVersion": "1.0.2", "root": {"path": "r"}, "linux": {"namespaces": namespaces}}),
            );
            let note = unserved(&s);
            match (want, &note) {
                (None, None) => {}
                (Some(needles), Some(n)) => {
                    assert!(n.warn && n.subject == UNSERVED_SUBJECT, "{name}: {n:?}");
                    for needle in needles {
                        assert!(n.reason.contains(needle), "{name}: {needle:?} not in {:?}", n.reason);
                    }
                    assert!(!n.reason.contains("mount namespace /proc"), "{name}: {:?}", n.reason);
                }
                _ => panic!("{name}: {note:?}"),
            }
        }
        let none = spec(json!({"ociVersion": "1.0.2", "root": {"path": "r"}}));
        assert!(unserved(&none).is_some(), "no linux section: no mount namespace");
    }

    #[test]
    fn read_only_root_gets_tmp_and_shm() {
        let p = plan(&base());
        assert!(p.enabled);
        assert_eq!(tmpfs_targets(&p), vec![("/tmp".into(), 4 * GI)]);
        assert_eq!(shm(&p), Some((8 * GI, ShmSource::Tmpfs { size: Some(Bytes(64 * MI)) })));
    }

    #[test]
    fn writable_root_is_left_alone() {
        let p = plan(&with(base(), "/root/readonly", json!(false)));
        assert!(!p.enabled && p.actions.is_empty());
        let p = plan(&with(base(), "/root", json!({"path": "rootfs"})));
        assert!(!p.enabled && p.actions.is_empty());
    }

    #[test]
    fn annotations_override() {
        type Case = (&'static str, serde_json::Value, bool, Option<u64>, Option<u64>);
        let cases: &[Case] = &[
            ("force on", json!({"path": "rootfs"}), true, Some(4 * GI), Some(8 * GI)),
            ("force off", json!({"path": "rootfs", "readonly": true}), false, None, None),
        ];
        for (name, root, on, tmp, shm_size) in cases {
            let mut c = with(base(), "/root", root.clone());
            let v = if *on { "true" } else { "false" };
            c = with(c, "/annotations", json!({ ANNOTATION_ENABLED: v }));
            let p = plan(&c);
            assert_eq!(p.enabled, *on, "{name}");
            assert_eq!(tmpfs_targets(&p).first().map(|t| t.1), *tmp, "{name}");
            assert_eq!(shm(&p).map(|s| s.0), *shm_size, "{name}");
        }
        let c =
            with(base(), "/annotations", json!({ANNOTATION_TMP_SIZE: "512Mi", ANNOTATION_SHM_SIZE: "2g"}));
        let p = plan(&c);
        assert_eq!(tmpfs_targets(&p), vec![("/tmp".into(), 512 * MI)]);
        assert_eq!(shm(&p).unwrap().0, 2 * GI);
        let Action::MountTmpfs { tmpfs, .. } = &p.actions[0] else { panic!() };
        assert_eq!(tmpfs.size.from, SizeFrom::Annotation(ANNOTATION_TMP_SIZE));
    }

    /// Without a mount namespace of its own (no entry, or one with a path)
    /// nothing can be mounted safely: the container is left alone with one
    /// warning, not refused.
    #[test]
    fn without_an_own_mount_namespace_the_container_is_left_alone() {
        let cases = [
            ("no mount entry", json!([{"type": "pid"}]), "no \"mount\" entry"),
            ("joined", json!([{"type": "mount", "path": "/proc/1/ns/mnt"}]), "(path /proc/1/ns/mnt)"),
            (
                "not a mount ns",
                json!([{"type": "mount", "path": "/proc/self/ns/net"}]),
                "(path /proc/self/ns/net)",
            ),
        ];
        for (name, namespaces, needle) in cases {
            for (enabled_by, c) in [
                ("read-only root", base()),
                (
                    "annotation",
                    with(
                        with(base(), "/root/readonly", json!(false)),
                        "/annotations",
                        json!({ANNOTATION_ENABLED: "true"}),
                    ),
                ),
            ] {
                let p = plan(&with(c, "/linux/namespaces", namespaces.clone()));
                assert!(!p.enabled && p.actions.is_empty(), "{name}, {enabled_by}: {p:?}");
                assert!(p.why.ends_with(enable::NO_OWN_MOUNT_NAMESPACE), "{name}: {}", p.why);
                assert_eq!(p.off, Some(Off::NoMountNamespace), "{name}, {enabled_by}");
                let warnings: Vec<&Note> = p.notes.iter().filter(|n| n.warn).collect();
                assert_eq!(warnings.len(), 1, "{name}, {enabled_by}: {:?}", p.notes);
                assert!(warnings[0].reason.contains(needle), "{name}: {:?}", warnings[0].reason);
            }
        }
        // Not enabled: no warning, nothing to do.
        let c = with(with(base(), "/linux/namespaces", json!([])), "/root/readonly", json!(false));
        let p = plan(&c);
        assert!(!p.enabled && p.notes.is_empty(), "{p:?}");
    }

    #[test]
    fn user_namespace_root_owns_the_tmpfs() {
        let mut c = base();
        c["linux"]["namespaces"].as_array_mut().unwrap().push(json!({"type": "user"}));
        c["linux"]["uidMappings"] = json!([{"containerID": 0, "hostID": 100000, "size": 65536}]);
        c["linux"]["gidMappings"] = json!([{"containerID": 0, "hostID": 200000, "size": 65536}]);
        assert_eq!(plan(&c).owner, Some(Owner { uid: 100000, gid: 200000 }));
        // A user namespace joined by path (a hostUsers: false pod's app
        // container) maps through the spec's mappings as well.
        let mut joined = c.clone();
        joined["linux"]["namespaces"][2] = json!({"type": "user", "path": "/proc/9/ns/user"});
        assert_eq!(plan(&joined).owner, Some(Owner { uid: 100000, gid: 200000 }));
        // Joined without mappings in the spec, unmapped root, or no user
        // namespace: root.
        let mut bare = joined.clone();
        bare["linux"].as_object_mut().unwrap().remove("uidMappings");
        assert_eq!(plan(&bare).owner, None);
        let mut unmapped = c.clone();
        unmapped["linux"]["uidMappings"] = json!([{"containerID": 1000, "hostID": 100000, "size": 1}]);
        assert_eq!(plan(&unmapped).owner, None);
        assert_eq!(plan(&base()).owner, None);
    }

    /// An app container of a `hostUsers: false` pod as containerd's CRI
    /// writes it (the sandbox's user namespace by path, its mappings, the
    /// pod shm bound at `/dev/shm`): every tmpfs the hook mounts, `/tmp` and
    /// a fresh `/dev/shm` alike, and the pod shm it grows, belong to the host
    /// ids of the container's root; `/tmp`'s spec entry names no owner (the
    /// runtime mounts it inside the namespace, where it is root's already).
    #[test]
    fn a_joined_user_namespace_maps_the_owner_of_every_tmpfs() {
        let root = Owner { uid: 1 << 20, gid: (1 << 20) + 65536 };
        let mut c = with(base(), "/annotations", json!({"io.kubernetes.cri.container-type": "container"}));
        c["linux"]["namespaces"]
            .as_array_mut()
            .unwrap()
            .push(json!({"type": "user", "path": "/proc/42/ns/user"}));
        c["linux"]["uidMappings"] = json!([{"containerID": 0, "hostID": root.uid, "size": 65536}]);
        c["linux"]["gidMappings"] = json!([{"containerID": 0, "hostID": root.gid, "size": 65536}]);
        c["mounts"][2] = json!({"destination": "/dev/shm", "type": "bind", "source": "/run/containerd/io.containerd.grpc.v1.cri/sandboxes/p/shm", "options": ["rbind", "rprivate", "rw"]});
        let owners = |p: &Plan| -> Vec<(String, Option<Owner>, Vec<String>)> {
            p.actions
                .iter()
                .map(|a| match a {
                    Action::MountTmpfs { target, tmpfs, .. } => {
                        (target.to_string(), tmpfs.owner, tmpfs.spec_options())
                    }
                    Action::Shm { way, tmpfs, .. } => {
                        (format!("/dev/shm {way:?}"), tmpfs.owner, tmpfs.options())
                    }
                })
                .collect()
        };
        let ids = [format!("uid={}", root.uid), format!("gid={}", root.gid)];
        let p = plan(&c);
        let got = owners(&p);
        assert_eq!(got.len(), 2, "{p:?}");
        assert_eq!((got[0].0.as_str(), got[0].1), ("/tmp", Some(root)));
        assert!(!got[0].2.iter().any(|o| o.starts_with("uid=") || o.starts_with("gid=")), "{:?}", got[0].2);
        assert_eq!((got[1].0.as_str(), got[1].1), ("/dev/shm Grow", Some(root)));
        let Action::MountTmpfs { tmpfs, .. } = &p.actions[0] else { panic!("{p:?}") };
        assert!(ids.iter().all(|i| tmpfs.options().contains(i)), "the hook's options: {:?}", tmpfs.options());
        // No /dev/shm in the spec: the fresh one is the container root's too.
        c["mounts"].as_array_mut().unwrap().remove(2);
        let got = owners(&plan(&c));
        assert_eq!((got[1].0.as_str(), got[1].1), ("/dev/shm Fresh", Some(root)));
        assert!(ids.iter().all(|i| got[1].2.contains(i)), "{:?}", got[1].2);
    }
}
