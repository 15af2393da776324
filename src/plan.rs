//! The decision: what to mount, where, how big. A pure function of the spec,
//! the host settings and the host's RAM; no syscalls and no I/O here, so every
//! decision is unit-tested without root. `apply` executes a [`Plan`];
//! `explain` prints it.

use std::collections::HashMap;

use oci_spec::runtime::{LinuxNamespaceType, Spec};
use serde::Serialize;

use crate::settings::Settings;
use crate::size::{Basis, Bytes, Size, SizeError};
use crate::target::{self, EnvTarget, TargetPath};

pub use crate::names::{ANNOTATION_ENABLED, ANNOTATION_SHM_SIZE, ANNOTATION_TMP_SIZE, SHM_PATH};

/// Everything a decision depends on.
#[derive(Clone, Copy, Debug)]
pub struct Inputs<'a> {
    pub spec: &'a Spec,
    /// Annotations from the state, used where the spec has none.
    pub state_annotations: Option<&'a HashMap<String, String>>,
    pub settings: &'a Settings,
    pub host_ram: Bytes,
}

/// Where a temp target came from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "name")]
pub enum Origin {
    /// `/tmp`, always.
    Default,
    /// A variable of the container's environment.
    Env(&'static str),
    /// `extra_targets` in the host config.
    HostConfig,
}

/// How a size was chosen.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Sizing {
    pub bytes: Bytes,
    /// The size as configured, e.g. "25%".
    pub requested: String,
    /// Where the setting came from: "default", "host config", or the annotation key.
    pub from: &'static str,
    pub basis: Basis,
    /// The basis' bytes when the size is a percentage.
    pub basis_bytes: Option<Bytes>,
}

/// What the existing `/dev/shm` of the spec is.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum ShmSource {
    /// The spec has no `/dev/shm` mount: mount a fresh tmpfs.
    None,
    /// A private tmpfs in the spec, with its size option if any.
    Tmpfs { size: Option<Bytes> },
    /// A bind of a tmpfs the engine made (Docker, Podman, CRI pods).
    Bind { source: String },
}

/// One effect to carry out.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "action")]
pub enum Action {
    /// Mount a fresh tmpfs (mode 1777, nosuid, nodev) at `target`.
    MountTmpfs {
        target: TargetPath,
        origins: Vec<Origin>,
        size: Sizing,
        nr_inodes: Option<u64>,
        noexec: bool,
        /// Directories (mode 1777) to create inside the fresh tmpfs before it
        /// is attached, relative to `target`: temp dirs nested in it.
        subdirs: Vec<String>,
    },
    /// Make `/dev/shm` at least `size`: grow the existing tmpfs, never shrink,
    /// or mount one (nosuid, nodev, noexec) when there is none.
    Shm { size: Sizing, existing: ShmSource },
}

/// Why something was left alone.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Note {
    /// What was skipped: a path, `NAME=value`, or `/dev/shm`.
    pub subject: String,
    pub reason: String,
    /// Worth a warning (a user's setting is ignored) rather than information.
    pub warn: bool,
}

/// Host ids that own the new tmpfs roots: the container's root under a user
/// namespace, so that it owns its `/tmp` as it would without one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Owner {
    pub uid: u32,
    pub gid: u32,
}

/// The decision.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Plan {
    pub enabled: bool,
    /// Why the hook acts or not.
    pub why: String,
    /// Owner of every fresh tmpfs (and directory made in it); `None`: root.
    pub owner: Option<Owner>,
    pub actions: Vec<Action>,
    pub notes: Vec<Note>,
}

/// Input that makes a decision impossible.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error("annotation {key}={value:?}: {source}")]
    Size {
        key: &'static str,
        value: String,
        #[source]
        source: SizeError,
    },
    #[error("annotation {ANNOTATION_ENABLED}={0:?}: use \"true\" or \"false\"")]
    Enabled(String),
    #[error("the container has no mount namespace of its own (no \"mount\" entry in linux.namespaces); refusing to mount into the runtime's namespace")]
    NoMountNamespace,
    #[error(
        "the container joins the existing mount namespace {0}; refusing to mount into a namespace it shares"
    )]
    SharedMountNamespace(String),
    #[error("config.json has no root.path")]
    NoRoot,
}

fn note(subject: impl Into<String>, reason: impl Into<String>, warn: bool) -> Note {
    Note { subject: subject.into(), reason: reason.into(), warn }
}

/// Decides what to mount.
///
/// # Errors
/// Invalid annotations, or a container that must not be touched although the
/// hook is enabled for it (no mount namespace of its own).
pub fn decide(inputs: &Inputs<'_>) -> Result<Plan, PlanError> {
    let spec = inputs.spec;
    let annotation = |key: &str| -> Option<&str> {
        spec.annotations().as_ref().or(inputs.state_annotations).and_then(|a| a.get(key)).map(String::as_str)
    };
    let readonly = spec.root().as_ref().and_then(|r| r.readonly()).unwrap_or(false);
    let (enabled, why) = match annotation(ANNOTATION_ENABLED) {
        Some("true") => (true, format!("annotation {ANNOTATION_ENABLED}=true")),
        Some("false") => (false, format!("annotation {ANNOTATION_ENABLED}=false")),
        Some(other) => return Err(PlanError::Enabled(other.to_string())),
        None if readonly => (true, "root.readonly is true".to_string()),
        None => (false, "the root filesystem is writable".to_string()),
    };
    let mut plan = Plan { enabled, why, ..Plan::default() };
    if !enabled {
        return Ok(plan);
    }
    if spec.root().as_ref().is_none_or(|r| r.path().as_os_str().is_empty()) {
        return Err(PlanError::NoRoot);
    }
    check_mount_namespace(spec)?;
    plan.owner = container_root_owner(spec);

    let settings = inputs.settings;
    let memory_limit = spec
        .linux()
        .as_ref()
        .and_then(|l| l.resources().as_ref())
        .and_then(|r| r.memory().as_ref())
        .and_then(|m| m.limit())
        .and_then(|l| u64::try_from(l).ok())
        .filter(|&l| l > 0)
        .map(Bytes);
    let sizing = |key: &'static str, configured: Size, default: Size| -> Result<Sizing, PlanError> {
        let (size, from) = match annotation(key) {
            Some(text) => {
                let size = text.parse::<Size>().map_err(|source| PlanError::Size {
                    key,
                    value: text.chars().take(64).collect(),
                    source,
                })?;
                (size, key)
            }
            None if configured == default => (configured, "default"),
            None => (configured, "host config"),
        };
        let (bytes, basis) = size.resolve(memory_limit, inputs.host_ram);
        let basis_bytes = match basis {
            Basis::Absolute => None,
            Basis::MemoryLimit => memory_limit,
            Basis::HostRam => Some(inputs.host_ram),
        };
        Ok(Sizing { bytes, requested: size.to_string(), from, basis, basis_bytes })
    };
    let tmp_size = sizing(ANNOTATION_TMP_SIZE, settings.tmp_size, crate::settings::DEFAULT_TMP_SIZE)?;
    let shm_size = sizing(ANNOTATION_SHM_SIZE, settings.shm_size, crate::settings::DEFAULT_SHM_SIZE)?;

    // Candidate targets, in order: /tmp, the environment's, the host config's.
    let mut candidates: Vec<(TargetPath, Origin)> = Vec::new();
    candidates.push((target::validate("/tmp").expect("/tmp is valid"), Origin::Default));
    let env: Vec<&str> = spec
        .process()
        .as_ref()
        .and_then(|p| p.env().as_ref())
        .map(|e| e.iter().map(String::as_str).collect())
        .unwrap_or_default();
    for found in target::from_env(env.iter().copied()) {
        match found {
            EnvTarget::Ok { var, path } => candidates.push((path, Origin::Env(var))),
            EnvTarget::Skipped { var, value, reason } => {
                plan.notes.push(note(
                    format!("{var}={value}"),
                    format!("not a usable temp dir: {reason}"),
                    true,
                ));
            }
        }
    }
    for path in &settings.extra_targets {
        candidates.push((path.clone(), Origin::HostConfig));
    }

    let spec_mounts: Vec<(String, &oci_spec::runtime::Mount)> = spec
        .mounts()
        .as_ref()
        .map(|ms| ms.iter().map(|m| (normalise(&m.destination().to_string_lossy()), m)).collect())
        .unwrap_or_default();

    let mut chosen: Vec<(TargetPath, Vec<Origin>)> = Vec::new();
    for (path, origin) in candidates {
        if let Some((_, origins)) = chosen.iter_mut().find(|(p, _)| *p == path) {
            if !origins.contains(&origin) {
                origins.push(origin);
            }
            continue;
        }
        let subject = describe(&path, &origin);
        if spec_mounts.iter().any(|(d, _)| d == path.as_str()) {
            plan.notes.push(note(subject, "the spec already mounts it", false));
            continue;
        }
        if let Some((d, _)) = spec_mounts.iter().find(|(d, _)| d != "/" && path.is_under(d)) {
            plan.notes.push(note(subject, format!("it lies inside the spec's mount at {d}"), false));
            continue;
        }
        if path.as_str().len() > target::TORCH_SOCKET_MAX {
            plan.notes.push(note(
                subject.clone(),
                format!(
                    "mounted, but longer than {} bytes: PyTorch's torch_shm_manager socket under it will not fit a unix socket path",
                    target::TORCH_SOCKET_MAX
                ),
                true,
            ));
        }
        chosen.push((path, vec![origin]));
    }
    // A target inside another one (TMPDIR=/tmp/job) is a directory created in
    // the outer tmpfs, not a second mount.
    let outer: Vec<TargetPath> = chosen
        .iter()
        .map(|(p, _)| p.clone())
        .filter(|p| !chosen.iter().any(|(q, _)| p.is_under(q.as_str())))
        .collect();
    for top in outer {
        let mut origins = Vec::new();
        let mut subdirs = Vec::new();
        for (p, o) in &chosen {
            if *p == top {
                origins.extend(o.iter().cloned());
            } else if p.is_under(top.as_str()) {
                subdirs.push(p.as_str()[top.as_str().len() + 1..].to_string());
                origins.extend(o.iter().cloned());
            }
        }
        subdirs.sort();
        plan.actions.push(Action::MountTmpfs {
            target: top,
            origins,
            size: tmp_size.clone(),
            nr_inodes: settings.nr_inodes,
            noexec: settings.noexec,
            subdirs,
        });
    }

    // /dev/shm
    let existing = match spec_mounts.iter().rev().find(|(d, _)| d == SHM_PATH) {
        None => ShmSource::None,
        Some((_, m)) => {
            let is_bind = m.options().as_ref().is_some_and(|o| o.iter().any(|x| x == "bind" || x == "rbind"))
                || m.typ().as_deref() == Some("bind");
            let source = m.source().as_ref().map(|s| s.to_string_lossy().into_owned());
            if is_bind {
                ShmSource::Bind { source: source.unwrap_or_default() }
            } else if m.typ().as_deref() == Some("tmpfs") || m.typ().is_none() {
                let size = m
                    .options()
                    .as_ref()
                    .and_then(|o| o.iter().rev().find_map(|x| x.strip_prefix("size=")))
                    .and_then(tmpfs_option_size);
                ShmSource::Tmpfs { size }
            } else {
                plan.notes.push(note(
                    SHM_PATH,
                    format!("the spec mounts a {:?} filesystem there", m.typ()),
                    true,
                ));
                return Ok(plan);
            }
        }
    };
    match &existing {
        ShmSource::Bind { source } if normalise(source) == SHM_PATH => {
            plan.notes.push(note(SHM_PATH, "it is the host's /dev/shm (host IPC); never resized", false));
        }
        ShmSource::Tmpfs { size: Some(have) } if *have >= shm_size.bytes => {
            plan.notes.push(note(
                SHM_PATH,
                format!("the spec already gives it {have}, not less than {}; never shrunk", shm_size.bytes),
                false,
            ));
        }
        _ => plan.actions.push(Action::Shm { size: shm_size, existing }),
    }
    Ok(plan)
}

fn describe(path: &TargetPath, origin: &Origin) -> String {
    match origin {
        Origin::Env(var) => format!("{var}={path}"),
        _ => path.to_string(),
    }
}

/// The host ids the container's uid 0 and gid 0 map to, when it has a user
/// namespace of its own with mappings that cover them.
fn container_root_owner(spec: &Spec) -> Option<Owner> {
    let linux = spec.linux().as_ref()?;
    let own_userns = linux.namespaces().as_ref()?.iter().any(|n| {
        n.typ() == LinuxNamespaceType::User && n.path().as_ref().is_none_or(|p| p.as_os_str().is_empty())
    });
    if !own_userns {
        return None;
    }
    let root_of = |maps: &Option<Vec<oci_spec::runtime::LinuxIdMapping>>| -> Option<u32> {
        maps.as_ref()?.iter().find(|m| m.container_id() == 0 && m.size() > 0).map(|m| m.host_id())
    };
    Some(Owner { uid: root_of(linux.uid_mappings())?, gid: root_of(linux.gid_mappings())? })
}

fn check_mount_namespace(spec: &Spec) -> Result<(), PlanError> {
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

/// Collapses repeated and trailing slashes, for comparing mount destinations.
fn normalise(path: &str) -> String {
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty() && *p != ".").collect();
    format!("/{}", parts.join("/"))
}

/// A tmpfs `size=` option as the kernel reads it: a number with an optional
/// k/m/g/t/p/e suffix. Percent sizes are left unknown.
fn tmpfs_option_size(text: &str) -> Option<Bytes> {
    let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    let n: u64 = digits.parse().ok()?;
    let shift = match unit {
        "" => 0,
        "k" | "K" => 10,
        "m" | "M" => 20,
        "g" | "G" => 30,
        "t" | "T" => 40,
        _ => return None,
    };
    n.checked_mul(1 << shift).map(Bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const GI: u64 = 1 << 30;
    const MI: u64 = 1 << 20;
    const RAM: Bytes = Bytes(16 * GI);

    /// A `runc spec`-like config: read-only root, own mount namespace, /dev/shm 64 MiB.
    fn base() -> serde_json::Value {
        json!({
            "ociVersion": "1.0.2",
            "process": {"args": ["sh"], "cwd": "/", "user": {"uid": 0, "gid": 0}, "env": ["PATH=/bin", "TERM=xterm"]},
            "root": {"path": "rootfs", "readonly": true},
            "mounts": [
                {"destination": "/proc", "type": "proc", "source": "proc"},
                {"destination": "/dev", "type": "tmpfs", "source": "tmpfs", "options": ["nosuid", "strictatime", "mode=755", "size=65536k"]},
                {"destination": "/dev/shm", "type": "tmpfs", "source": "shm", "options": ["nosuid", "noexec", "nodev", "mode=1777", "size=65536k"]}
            ],
            "linux": {"namespaces": [{"type": "pid"}, {"type": "mount"}]}
        })
    }

    fn decide_with(config: &serde_json::Value, settings: &Settings) -> Result<Plan, PlanError> {
        let spec: Spec = serde_json::from_value(config.clone()).expect("valid spec");
        decide(&Inputs { spec: &spec, state_annotations: None, settings, host_ram: RAM })
    }

    fn plan(config: &serde_json::Value) -> Plan {
        decide_with(config, &Settings::default()).expect("plan")
    }

    fn tmpfs_targets(plan: &Plan) -> Vec<(String, u64)> {
        plan.actions
            .iter()
            .filter_map(|a| match a {
                Action::MountTmpfs { target, size, .. } => Some((target.to_string(), size.bytes.0)),
                _ => None,
            })
            .collect()
    }

    fn shm(plan: &Plan) -> Option<(u64, ShmSource)> {
        plan.actions.iter().find_map(|a| match a {
            Action::Shm { size, existing } => Some((size.bytes.0, existing.clone())),
            _ => None,
        })
    }

    fn with(mut config: serde_json::Value, pointer: &str, value: serde_json::Value) -> serde_json::Value {
        let (parent, key) = pointer.rsplit_once('/').unwrap();
        config.pointer_mut(parent).unwrap().as_object_mut().unwrap().insert(key.to_string(), value);
        config
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
        let Action::MountTmpfs { size, .. } = &p.actions[0] else { panic!() };
        assert_eq!(size.from, ANNOTATION_TMP_SIZE);
    }

    #[test]
    fn state_annotations_used_when_spec_has_none() {
        let spec: Spec = serde_json::from_value(base()).unwrap();
        let ann = HashMap::from([(ANNOTATION_TMP_SIZE.to_string(), "64m".to_string())]);
        let p = decide(&Inputs {
            spec: &spec,
            state_annotations: Some(&ann),
            settings: &Settings::default(),
            host_ram: RAM,
        })
        .unwrap();
        assert_eq!(tmpfs_targets(&p)[0].1, 64 * MI);
    }

    #[test]
    fn bad_annotations_are_errors() {
        for (key, value) in [
            (ANNOTATION_TMP_SIZE, "1G,mode=4777"),
            (ANNOTATION_SHM_SIZE, "0"),
            (ANNOTATION_TMP_SIZE, ""),
            (ANNOTATION_ENABLED, "yes"),
        ] {
            let c = with(base(), "/annotations", json!({ key: value }));
            let err = decide_with(&c, &Settings::default()).expect_err(value);
            assert!(err.to_string().contains(key), "{err}");
        }
    }

    #[test]
    fn memory_limit_is_the_basis_when_positive() {
        let c = with(base(), "/linux/resources", json!({"memory": {"limit": 4 * GI}}));
        let p = plan(&c);
        assert_eq!(tmpfs_targets(&p)[0].1, GI);
        assert_eq!(shm(&p).unwrap().0, 2 * GI);
        for limit in [json!(0), json!(-1)] {
            let c = with(base(), "/linux/resources", json!({"memory": {"limit": limit}}));
            assert_eq!(tmpfs_targets(&plan(&c))[0].1, 4 * GI);
        }
    }

    #[test]
    fn env_targets_are_added_deduplicated_and_validated() {
        let c = with(
            base(),
            "/process/env",
            json!([
                "TMPDIR=/var/tmp",
                "TEMP=/var/tmp/",
                "TMP=/tmp",
                "TEMPDIR=/etc",
                "TMPDIR=/ignored-second",
                "PATH=/bin"
            ]),
        );
        let p = plan(&c);
        assert_eq!(tmpfs_targets(&p), vec![("/tmp".into(), 4 * GI), ("/var/tmp".into(), 4 * GI)]);
        let Action::MountTmpfs { origins, .. } = &p.actions[1] else { panic!() };
        assert_eq!(origins, &vec![Origin::Env("TMPDIR"), Origin::Env("TEMP")]);
        assert!(p.notes.iter().any(|n| n.subject == "TEMPDIR=/etc" && n.warn));
    }

    #[test]
    fn long_target_warns_but_mounts() {
        let long = format!("/{}", "x".repeat(80));
        let c = with(base(), "/process/env", json!([format!("TMPDIR={long}")]));
        let p = plan(&c);
        assert!(tmpfs_targets(&p).iter().any(|t| t.0 == long));
        assert!(p.notes.iter().any(|n| n.reason.contains("PyTorch")));
    }

    #[test]
    fn nested_targets_become_directories_in_the_outer_tmpfs() {
        let c = with(base(), "/process/env", json!(["TMPDIR=/tmp/job/x", "TEMP=/tmp/a"]));
        let p = plan(&c);
        assert_eq!(tmpfs_targets(&p), vec![("/tmp".into(), 4 * GI)]);
        let Action::MountTmpfs { subdirs, origins, .. } = &p.actions[0] else { panic!() };
        assert_eq!(subdirs, &["a".to_string(), "job/x".to_string()]);
        assert_eq!(origins, &[Origin::Default, Origin::Env("TMPDIR"), Origin::Env("TEMP")]);
        // Order does not matter: the parent may come after the child.
        let s = Settings {
            extra_targets: vec![
                target::validate("/scratch/a").unwrap(),
                target::validate("/scratch").unwrap(),
            ],
            ..Settings::default()
        };
        let p = decide_with(&base(), &s).unwrap();
        assert_eq!(tmpfs_targets(&p).iter().map(|t| t.0.as_str()).collect::<Vec<_>>(), ["/tmp", "/scratch"]);
        let Action::MountTmpfs { subdirs, .. } = &p.actions[1] else { panic!() };
        assert_eq!(subdirs, &["a".to_string()]);
    }

    #[test]
    fn spec_mounts_are_respected() {
        let mut c = base();
        c["mounts"]
            .as_array_mut()
            .unwrap()
            .push(json!({"destination": "/tmp/", "type": "tmpfs", "source": "tmpfs"}));
        c["mounts"]
            .as_array_mut()
            .unwrap()
            .push(json!({"destination": "/data", "type": "bind", "source": "/srv", "options": ["rbind"]}));
        c = with(c, "/process/env", json!(["TMPDIR=/data/tmp"]));
        let p = plan(&c);
        assert!(tmpfs_targets(&p).is_empty());
        assert!(p.notes.iter().any(|n| n.subject == "/tmp" && n.reason.contains("already mounts")));
        assert!(p.notes.iter().any(|n| n.subject == "TMPDIR=/data/tmp" && n.reason.contains("/data")));
    }

    #[test]
    fn shm_never_shrinks_and_never_the_hosts() {
        let mut c = base();
        c["mounts"][2]["options"] = json!(["nosuid", "size=32g"]);
        assert_eq!(shm(&plan(&c)), None);
        assert!(plan(&c).notes.iter().any(|n| n.subject == SHM_PATH && n.reason.contains("never shrunk")));

        let mut c = base();
        c["mounts"][2] = json!({"destination": "/dev/shm", "type": "bind", "source": "/dev/shm", "options": ["rbind", "rprivate"]});
        assert_eq!(shm(&plan(&c)), None);

        let mut c = base();
        c["mounts"][2] = json!({"destination": "/dev/shm", "type": "bind", "source": "/var/lib/docker/containers/x/mounts/shm", "options": ["rbind"]});
        assert_eq!(
            shm(&plan(&c)).unwrap().1,
            ShmSource::Bind { source: "/var/lib/docker/containers/x/mounts/shm".into() }
        );

        let mut c = base();
        c["mounts"].as_array_mut().unwrap().remove(2);
        assert_eq!(shm(&plan(&c)).unwrap().1, ShmSource::None);

        let mut c = base();
        c["mounts"][2]["options"] = json!(["nosuid"]);
        assert_eq!(shm(&plan(&c)).unwrap().1, ShmSource::Tmpfs { size: None });
    }

    #[test]
    fn host_settings_apply() {
        let s = Settings::parse("tmp_size = \"1g\"\nshm_size = \"2g\"\nextra_targets = [\"/run\"]\nnoexec = true\nnr_inodes = 5000").unwrap();
        let p = decide_with(&base(), &s).unwrap();
        assert_eq!(tmpfs_targets(&p), vec![("/tmp".into(), GI), ("/run".into(), GI)]);
        let Action::MountTmpfs { noexec, nr_inodes, size, .. } = &p.actions[0] else { panic!() };
        assert!(*noexec);
        assert_eq!(*nr_inodes, Some(5000));
        assert_eq!(size.from, "host config");
    }

    #[test]
    fn mount_namespace_is_required() {
        let c = with(base(), "/linux/namespaces", json!([{"type": "pid"}]));
        assert_eq!(decide_with(&c, &Settings::default()), Err(PlanError::NoMountNamespace));
        let c = with(base(), "/linux/namespaces", json!([{"type": "mount", "path": "/proc/1/ns/mnt"}]));
        assert!(matches!(decide_with(&c, &Settings::default()), Err(PlanError::SharedMountNamespace(_))));
        // Not enabled: no error, nothing to do.
        let c = with(with(base(), "/linux/namespaces", json!([])), "/root/readonly", json!(false));
        assert!(!plan(&c).enabled);
    }

    #[test]
    fn user_namespace_root_owns_the_tmpfs() {
        let mut c = base();
        c["linux"]["namespaces"].as_array_mut().unwrap().push(json!({"type": "user"}));
        c["linux"]["uidMappings"] = json!([{"containerID": 0, "hostID": 100000, "size": 65536}]);
        c["linux"]["gidMappings"] = json!([{"containerID": 0, "hostID": 200000, "size": 65536}]);
        assert_eq!(plan(&c).owner, Some(Owner { uid: 100000, gid: 200000 }));
        // Joined user namespace, unmapped root, or no user namespace: root.
        let mut joined = c.clone();
        joined["linux"]["namespaces"][2] = json!({"type": "user", "path": "/proc/9/ns/user"});
        assert_eq!(plan(&joined).owner, None);
        let mut unmapped = c.clone();
        unmapped["linux"]["uidMappings"] = json!([{"containerID": 1000, "hostID": 100000, "size": 1}]);
        assert_eq!(plan(&unmapped).owner, None);
        assert_eq!(plan(&base()).owner, None);
    }

    #[test]
    fn tmpfs_option_sizes() {
        assert_eq!(tmpfs_option_size("65536k"), Some(Bytes(64 * MI)));
        assert_eq!(tmpfs_option_size("2g"), Some(Bytes(2 * GI)));
        assert_eq!(tmpfs_option_size("1048576"), Some(Bytes(MI)));
        assert_eq!(tmpfs_option_size("50%"), None);
    }
}
