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
    use crate::size::Bytes;

    fn spec(v: serde_json::Value) -> Spec {
        serde_json::from_value(v).expect("valid spec")
    }

    #[test]
    fn enablement_table() {
        let settings = HostConfig::default();
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
                settings: &settings,
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
}
