//! Step 1 of the plan: does the hook act for this container, may it, and who
//! owns what it mounts. Pure: reads the spec and its annotations only.

use crate::oci::{LinuxNamespaceType, Spec};

use super::{Inputs, Owner, PlanError, ANNOTATION_ENABLED};
use crate::names::{CRIO_CONTAINER_TYPE, CRI_CONTAINER_TYPE, SANDBOX};

/// Whether the hook acts, and why.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Verdict {
    pub(super) enabled: bool,
    pub(super) why: String,
}

/// Off for a pod's sandbox (pause) container, whatever it asks: nothing runs
/// there but pause, and a `/dev/shm` grown there (sized from host RAM, as it
/// has no memory limit) would be the pod's for good, since shm never shrinks.
/// Else on when the root is read-only, unless the enable annotation says
/// otherwise.
pub(super) fn enablement(inputs: &Inputs<'_>) -> Result<Verdict, PlanError> {
    for key in [CRI_CONTAINER_TYPE, CRIO_CONTAINER_TYPE] {
        if inputs.annotation(key) == Some(SANDBOX) {
            let why = format!("a pod sandbox container ({key}={SANDBOX}): nothing runs there but pause");
            return Ok(Verdict { enabled: false, why });
        }
    }
    let readonly = inputs.spec.root().as_ref().and_then(|r| r.readonly()).unwrap_or(false);
    let (enabled, why) = match inputs.annotation(ANNOTATION_ENABLED) {
        Some("true") => (true, format!("annotation {ANNOTATION_ENABLED}=true")),
        Some("false") => (false, format!("annotation {ANNOTATION_ENABLED}=false")),
        Some(other) => return Err(PlanError::Enabled(other.to_string())),
        None if readonly => (true, "root.readonly is true".to_string()),
        None => (false, "the root filesystem is writable".to_string()),
    };
    Ok(Verdict { enabled, why })
}

/// A container the hook may act on: it names its rootfs and has a mount
/// namespace of its own (never the runtime's, never a shared one).
pub(super) fn check_container(spec: &Spec) -> Result<(), PlanError> {
    if spec.root().as_ref().is_none_or(|r| r.path().as_os_str().is_empty()) {
        return Err(PlanError::NoRoot);
    }
    let ns = spec
        .linux()
        .as_ref()
        .and_then(|l| l.namespaces().as_ref())
        .and_then(|n| n.iter().find(|n| n.typ() == LinuxNamespaceType::Mount));
    match ns {
        None => Err(PlanError::NoMountNamespace),
        Some(n) => match n.path() {
            Some(p) if !p.as_os_str().is_empty() => {
                Err(PlanError::SharedMountNamespace(p.display().to_string()))
            }
            _ => Ok(()),
        },
    }
}

/// The host ids the container's uid 0 and gid 0 map to, when it has a user
/// namespace of its own with mappings that cover them.
pub(super) fn container_root_owner(spec: &Spec) -> Option<Owner> {
    let linux = spec.linux().as_ref()?;
    let own_userns = linux.namespaces().as_ref()?.iter().any(|n| {
        n.typ() == LinuxNamespaceType::User && n.path().as_ref().is_none_or(|p| p.as_os_str().is_empty())
    });
    if !own_userns {
        return None;
    }
    let root_of = |maps: &Option<Vec<crate::oci::LinuxIdMapping>>| -> Option<u32> {
        maps.as_ref()?.iter().find(|m| m.container_id() == 0 && m.size() > 0).map(|m| m.host_id())
    };
    Some(Owner { uid: root_of(linux.uid_mappings())?, gid: root_of(linux.gid_mappings())? })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::settings::Settings;
    use crate::size::Bytes;

    fn spec(v: serde_json::Value) -> Spec {
        serde_json::from_value(v).expect("valid spec")
    }

    #[test]
    fn enablement_table() {
        let settings = Settings::default();
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
            let inputs =
                Inputs { spec: &s, state_annotations: None, settings: &settings, host_ram: Bytes(1 << 30) };
            assert_eq!(enablement(&inputs).map(|v| v.enabled), want, "{name}");
        }
    }

    #[test]
    fn container_check_table() {
        let cases = [
            ("own mount ns", json!({"path": "r"}), json!([{"type": "mount"}]), Ok(())),
            ("no mount ns", json!({"path": "r"}), json!([{"type": "pid"}]), Err(PlanError::NoMountNamespace)),
            (
                "joined mount ns",
                json!({"path": "r"}),
                json!([{"type": "mount", "path": "/proc/1/ns/mnt"}]),
                Err(PlanError::SharedMountNamespace("/proc/1/ns/mnt".into())),
            ),
            ("empty root path", json!({"path": ""}), json!([{"type": "mount"}]), Err(PlanError::NoRoot)),
        ];
        for (name, root, namespaces, want) in cases {
            let s = spec(json!({"ociVersion": "1.0.2", "root": root, "linux": {"namespaces": namespaces}}));
            assert_eq!(check_container(&s), want, "{name}");
        }
    }
}
