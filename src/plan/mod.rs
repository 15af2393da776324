//! The decision: what to mount, where, how big. A pure function of the spec,
//! the host settings and the host's RAM; no syscalls and no I/O here, so every
//! decision is unit-tested without root.
//!
//! [`decide`] runs named steps, each in its own file with its own table test:
//! [`enable`] (does the hook act, may it, who owns the mounts), [`sizes`]
//! (bytes for `/tmp` and `/dev/shm` and where they came from), [`targets`]
//! (the temp dirs, what the spec already mounts, nesting) and [`shm`]
//! (grow, mount fresh, or leave `/dev/shm`). The [`Plan`] carries every mount
//! whole (size, inodes, mode, attributes, owner, subdirectories), so the
//! executors (`apply` in the container's namespace, `explain`) only read it.

mod enable;
mod shm;
mod sizes;
mod targets;

use std::collections::HashMap;

use oci_spec::runtime::Spec;
use serde::Serialize;

pub use crate::names::{ANNOTATION_ENABLED, ANNOTATION_SHM_SIZE, ANNOTATION_TMP_SIZE, SHM_PATH};

/// What every annotation of ours starts with.
const ANNOTATION_PREFIX: &str = "oci-tmpfs-hook/";
use crate::settings::{AnnotationPolicy, Settings};
use crate::size::{Basis, Bytes, SizeError};
use crate::target::TargetPath;

/// Everything a decision depends on.
#[derive(Clone, Copy, Debug)]
pub struct Inputs<'a> {
    pub spec: &'a Spec,
    /// Annotations from the state, used where the spec has none.
    pub state_annotations: Option<&'a HashMap<String, String>>,
    pub settings: &'a Settings,
    pub host_ram: Bytes,
}

impl Inputs<'_> {
    /// An annotation of the spec, or of the state when the spec has none.
    /// Ours (`oci-tmpfs-hook/*`) count only under `annotations = "allow"`.
    fn annotation(&self, key: &str) -> Option<&str> {
        if key.starts_with(ANNOTATION_PREFIX) && self.settings.annotations == AnnotationPolicy::Ignore {
            return None;
        }
        self.raw_annotation(key)
    }

    fn raw_annotation(&self, key: &str) -> Option<&str> {
        self.spec
            .annotations()
            .as_ref()
            .or(self.state_annotations)
            .and_then(|a| a.get(key))
            .map(String::as_str)
    }

    /// Our annotations that the host config says to ignore, as notes.
    fn ignored_annotations(&self) -> Vec<Note> {
        if self.settings.annotations != AnnotationPolicy::Ignore {
            return Vec::new();
        }
        [ANNOTATION_ENABLED, ANNOTATION_TMP_SIZE, ANNOTATION_SHM_SIZE]
            .into_iter()
            .filter_map(|key| {
                let value: String = self.raw_annotation(key)?.chars().take(64).collect();
                Some(Note::info(
                    format!("annotation {key}={value:?}"),
                    "ignored: annotations = \"ignore\" in the host config",
                ))
            })
            .collect()
    }
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

/// Where a size setting came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SizeFrom {
    /// Not set anywhere: the built-in default.
    Default,
    /// Set in the host config (even when equal to the default).
    HostConfig,
    /// Set by this annotation of the container.
    Annotation(&'static str),
}

impl std::fmt::Display for SizeFrom {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SizeFrom::Default => "default",
            SizeFrom::HostConfig => "host config",
            SizeFrom::Annotation(key) => key,
        })
    }
}

impl Serialize for SizeFrom {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// How a size was chosen.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Sizing {
    pub bytes: Bytes,
    /// The size as configured, e.g. "25%".
    pub requested: String,
    pub from: SizeFrom,
    pub basis: Basis,
    /// The basis' bytes when the size is a percentage.
    pub basis_bytes: Option<Bytes>,
    /// What brought the size down from what was asked, if anything.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capped: Option<Cap>,
}

/// A limit that a size was brought down to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "by")]
pub enum Cap {
    /// The host config's `max_tmp_size` / `max_shm_size`, for an annotation.
    HostConfig { key: &'static str, max: Bytes, asked: Bytes },
    /// The container's memory limit: a tmpfs it cannot fill without an OOM
    /// kill would turn ENOSPC into a kill (tmpfs pages are charged to the
    /// writer's memory cgroup).
    MemoryLimit { limit: Bytes, asked: Bytes },
}

impl std::fmt::Display for Cap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Cap::HostConfig { key, max, asked } => {
                write!(f, "asked for {}, capped at {key} = {} of the host config", asked.approx(), max.approx())
            }
            Cap::MemoryLimit { limit, asked } => write!(
                f,
                "asked for {}, capped at the memory limit {} (a larger tmpfs would turn ENOSPC into an OOM kill)",
                asked.approx(),
                limit.approx()
            ),
        }
    }
}

/// Host ids that own the new tmpfs roots: the container's root under a user
/// namespace, so that it owns its `/tmp` as it would without one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Owner {
    pub uid: u32,
    pub gid: u32,
}

/// One tmpfs instance, whole: what a fresh mount is made with.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Tmpfs {
    pub size: Sizing,
    pub nr_inodes: Option<u64>,
    /// Mode of its root directory.
    #[serde(serialize_with = "octal")]
    pub mode: u32,
    pub nosuid: bool,
    pub nodev: bool,
    pub noexec: bool,
    /// Owner of its root (and of directories made in it); `None`: root.
    pub owner: Option<Owner>,
}

/// Mode of every fresh tmpfs root and of the directories made in one.
pub const TMPFS_MODE: u32 = 0o1777;

fn octal<S: serde::Serializer>(mode: &u32, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(&format_args!("{mode:o}"))
}

impl Tmpfs {
    /// Its options as `mount(8)` or a runtime spells them, but for the size:
    /// `nosuid`, `nodev`, `noexec` as set, `mode=`, `nr_inodes=`, `uid=`/`gid=`.
    pub fn options(&self) -> Vec<String> {
        let mut opts = Vec::new();
        for (on, name) in [(self.nosuid, "nosuid"), (self.nodev, "nodev"), (self.noexec, "noexec")] {
            if on {
                opts.push(name.to_string());
            }
        }
        opts.push(format!("mode={:o}", self.mode));
        if let Some(n) = self.nr_inodes {
            opts.push(format!("nr_inodes={n}"));
        }
        if let Some(o) = self.owner {
            opts.push(format!("uid={}", o.uid));
            opts.push(format!("gid={}", o.gid));
        }
        opts
    }
}

/// What the spec has at `/dev/shm`.
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

/// How `/dev/shm` is made big enough.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ShmWay {
    /// Reconfigure the tmpfs that is there to the plan's size (never smaller).
    /// Where none is mounted at mount time after all, the fresh tmpfs of the
    /// plan is mounted instead.
    Grow,
    /// Mount the plan's fresh tmpfs: the spec has none.
    Fresh,
}

/// One effect to carry out.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "action")]
pub enum Action {
    /// Mount a fresh tmpfs at `target`.
    MountTmpfs {
        target: TargetPath,
        origins: Vec<Origin>,
        #[serde(flatten)]
        tmpfs: Tmpfs,
        /// Directories (mode [`TMPFS_MODE`]) to create inside the fresh tmpfs
        /// before it is attached, relative to `target`: temp dirs nested in it.
        subdirs: Vec<String>,
    },
    /// Make `/dev/shm` at least `tmpfs.size`, never shrinking it.
    Shm {
        existing: ShmSource,
        way: ShmWay,
        /// The spec mounts it read-only (Podman 5 with `--read-only
        /// --read-only-tmpfs=false`): clear that flag on this mount only, so
        /// the container can use it.
        writable: bool,
        /// The size to reach, and the tmpfs to mount when there is none.
        #[serde(flatten)]
        tmpfs: Tmpfs,
    },
}

/// Something left alone, and why: from the plan or from mounting.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Note {
    /// What was skipped: a path, `NAME=value`, or `/dev/shm`.
    pub subject: String,
    pub reason: String,
    /// Worth a warning (a user's setting is ignored) rather than information.
    pub warn: bool,
}

impl Note {
    /// A note worth a warning: a user's setting is not honoured.
    pub fn warn(subject: impl Into<String>, reason: impl Into<String>) -> Note {
        Note { subject: subject.into(), reason: reason.into(), warn: true }
    }

    /// A note for information: left alone as intended.
    pub fn info(subject: impl Into<String>, reason: impl Into<String>) -> Note {
        Note { subject: subject.into(), reason: reason.into(), warn: false }
    }
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
    /// The spec's mount destinations (normalised), in the order the runtime
    /// mounts them: what the executors judge each target's landing against
    /// (docs/design.md#landing).
    #[serde(skip)]
    pub spec_mounts: Vec<SpecMount>,
}

/// A mount of the spec, as the landing rule needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpecMount {
    /// Its destination, normalised.
    pub dest: String,
    /// One of ours (`source` [`crate::spec::SOURCE`]): from an earlier run.
    pub ours: bool,
}

/// Input that makes a decision impossible.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error("annotation {key}={value:?}")]
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

impl Action {
    /// Where it mounts or what it grows.
    pub fn target(&self) -> &str {
        match self {
            Action::MountTmpfs { target, .. } => target.as_str(),
            Action::Shm { .. } => SHM_PATH,
        }
    }

    /// The tmpfs it makes, or the size it grows to.
    pub fn tmpfs(&self) -> &Tmpfs {
        match self {
            Action::MountTmpfs { tmpfs, .. } | Action::Shm { tmpfs, .. } => tmpfs,
        }
    }
}

/// Decides what to mount.
///
/// # Errors
/// Invalid annotations, or a container that must not be touched although the
/// hook is enabled for it (no mount namespace of its own).
pub fn decide(inputs: &Inputs<'_>) -> Result<Plan, PlanError> {
    let verdict = enable::enablement(inputs)?;
    let mut plan = Plan { enabled: verdict.enabled, why: verdict.why, ..Plan::default() };
    plan.notes.extend(inputs.ignored_annotations());
    if !plan.enabled {
        return Ok(plan);
    }
    enable::check_container(inputs.spec)?;
    plan.owner = enable::container_root_owner(inputs.spec);
    if let Some(limit) = sizes::memory_limit(inputs.spec).filter(|l| l.0 < crate::size::MIN_BYTES) {
        // Every size is capped at the memory limit, and no tmpfs is smaller
        // than MIN_BYTES: none fits (docs/design.md#sizes).
        plan.notes.push(Note::warn(
            "/tmp, the temp dirs and /dev/shm",
            format!(
                "the memory limit {limit} is below 1Mi, the smallest tmpfs mounted: no tmpfs, nothing grown"
            ),
        ));
        return Ok(plan);
    }
    let sizes = sizes::sizes(inputs)?;
    let spec_mounts = SpecMounts::of(inputs.spec);
    plan.spec_mounts = spec_mounts
        .0
        .iter()
        .map(|(dest, m)| SpecMount {
            dest: dest.clone(),
            ours: m.source().as_ref().is_some_and(|s| s.as_os_str() == crate::names::MOUNT_SOURCE),
        })
        .collect();

    let targets = targets::temp_targets(inputs, &mut plan.notes);
    let targets = targets::not_spec_mounted(targets, &spec_mounts, &mut plan.notes);
    for nested in targets::nest(targets) {
        let tmpfs = Tmpfs {
            size: sizes.tmp.clone(),
            nr_inodes: inputs.settings.nr_inodes,
            mode: TMPFS_MODE,
            nosuid: true,
            nodev: true,
            noexec: inputs.settings.noexec,
            owner: plan.owner,
        };
        plan.actions.push(Action::MountTmpfs {
            target: nested.target,
            origins: nested.origins,
            tmpfs,
            subdirs: nested.subdirs,
        });
    }
    match shm::shm(&spec_mounts, sizes.shm, plan.owner) {
        Ok(action) => plan.actions.push(action),
        Err(note) => plan.notes.push(note),
    }
    Ok(plan)
}

/// The spec's mounts with normalised destinations, for comparing paths.
struct SpecMounts<'a>(Vec<(String, &'a oci_spec::runtime::Mount)>);

impl<'a> SpecMounts<'a> {
    fn of(spec: &'a Spec) -> SpecMounts<'a> {
        SpecMounts(
            spec.mounts()
                .as_ref()
                .map(|ms| {
                    ms.iter()
                        .map(|m| (crate::target::normalise(&m.destination().to_string_lossy()), m))
                        .collect()
                })
                .unwrap_or_default(),
        )
    }

    /// The last mount at exactly `dest` (what the container sees there).
    fn last_at(&self, dest: &str) -> Option<&'a oci_spec::runtime::Mount> {
        self.0.iter().rev().find(|(d, _)| d == dest).map(|(_, m)| *m)
    }

    /// The destination of a mount that lies strictly inside `path`.
    fn inside(&self, path: &TargetPath) -> Option<&str> {
        let prefix = format!("{path}/");
        self.0.iter().find(|(d, _)| d.starts_with(&prefix)).map(|(d, _)| d.as_str())
    }

    /// The destination of a mount (other than `/`) that `path` lies inside.
    fn containing(&self, path: &TargetPath) -> Option<&str> {
        self.0.iter().find(|(d, _)| d != "/" && path.is_under(d)).map(|(d, _)| d.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::target;
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
                Action::MountTmpfs { target, tmpfs, .. } => Some((target.to_string(), tmpfs.size.bytes.0)),
                _ => None,
            })
            .collect()
    }

    fn shm(plan: &Plan) -> Option<(u64, ShmSource)> {
        plan.actions.iter().find_map(|a| match a {
            Action::Shm { tmpfs, existing, .. } => Some((tmpfs.size.bytes.0, existing.clone())),
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
        let Action::MountTmpfs { tmpfs, .. } = &p.actions[0] else { panic!() };
        assert_eq!(tmpfs.size.from, SizeFrom::Annotation(ANNOTATION_TMP_SIZE));
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
        let Action::MountTmpfs { tmpfs, .. } = &p.actions[0] else { panic!() };
        assert!(tmpfs.noexec && tmpfs.nosuid && tmpfs.nodev && tmpfs.mode == TMPFS_MODE);
        assert_eq!(tmpfs.nr_inodes, Some(5000));
        assert_eq!(tmpfs.size.from, SizeFrom::HostConfig);
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
    fn pod_sandbox_gets_nothing_and_app_containers_grow_the_pod_shm() {
        let mut sandbox = with(
            base(),
            "/annotations",
            json!({"io.kubernetes.cri.container-type": "sandbox", ANNOTATION_ENABLED: "true"}),
        );
        sandbox["mounts"].as_array_mut().unwrap().push(
            json!({"destination": "/dev/shm", "type": "bind", "source": "/run/containerd/io.containerd.grpc.v1.cri/sandboxes/p/shm", "options": ["rbind", "ro"]}),
        );
        let p = plan(&sandbox);
        assert!(!p.enabled && p.actions.is_empty(), "{p:?}");
        assert!(p.why.contains("sandbox"), "{}", p.why);

        let mut app = with(base(), "/annotations", json!({"io.kubernetes.cri.container-type": "container"}));
        app = with(app, "/linux/resources", json!({"memory": {"limit": GI}}));
        app["mounts"][2] = json!({"destination": "/dev/shm", "type": "bind", "source": "/run/containerd/io.containerd.grpc.v1.cri/sandboxes/p/shm", "options": ["rbind", "rprivate", "rw"]});
        let p = plan(&app);
        assert_eq!(tmpfs_targets(&p), vec![("/tmp".into(), 256 * MI)]);
        let (bytes, existing) = shm(&p).unwrap();
        assert_eq!(bytes, 512 * MI);
        assert!(matches!(existing, ShmSource::Bind { .. }));
    }

    #[test]
    fn no_tmpfs_larger_than_the_memory_limit() {
        let c = with(base(), "/linux/resources", json!({"memory": {"limit": GI}}));
        let c = with(c, "/annotations", json!({ANNOTATION_SHM_SIZE: "4g"}));
        let p = plan(&c);
        let Some(Action::Shm { tmpfs, .. }) = p.actions.last() else { panic!() };
        assert_eq!(tmpfs.size.bytes.0, GI);
        assert_eq!(tmpfs.size.capped, Some(Cap::MemoryLimit { limit: Bytes(GI), asked: Bytes(4 * GI) }));
    }

    #[test]
    fn memory_limit_table() {
        // (limit, /tmp bytes, /dev/shm bytes): below 1 MiB nothing at all;
        // at 1 MiB the spec's 64 MiB /dev/shm is above the plan's: never shrunk.
        type Case = (u64, Option<u64>, Option<u64>);
        let cases: [Case; 4] = [
            (512 << 10, None, None),
            ((1 << 20) - 4096, None, None),
            (MI, Some(MI), None),
            (GI, Some(GI / 4), Some(GI / 2)),
        ];
        for (limit, want_tmp, want_shm) in cases {
            let c = with(base(), "/linux/resources", json!({"memory": {"limit": limit}}));
            let p = plan(&c);
            assert_eq!(tmpfs_targets(&p).first().map(|(_, b)| *b), want_tmp, "limit {limit}");
            assert_eq!(shm(&p).map(|(b, _)| b), want_shm, "limit {limit}");
            if want_tmp.is_none() {
                assert!(p.enabled && p.actions.is_empty(), "limit {limit}");
                assert!(p.notes.iter().any(|n| n.warn && n.reason.contains("below 1Mi")), "{:?}", p.notes);
            }
        }
    }

    #[test]
    fn spec_mounts_are_carried_in_order_with_ours_marked() {
        let mut c = base();
        c["mounts"].as_array_mut().unwrap().push(
            json!({"destination": "/run/tmp/", "type": "tmpfs", "source": "oci-tmpfs-hook", "options": []}),
        );
        let p = plan(&c);
        let got: Vec<(&str, bool)> = p.spec_mounts.iter().map(|m| (m.dest.as_str(), m.ours)).collect();
        assert_eq!(got, [("/proc", false), ("/dev", false), ("/dev/shm", false), ("/run/tmp", true)]);
    }

    #[test]
    fn ignored_annotations_are_noted() {
        let s = Settings::parse("annotations = \"ignore\"").unwrap();
        let c =
            with(base(), "/annotations", json!({ANNOTATION_TMP_SIZE: "1Mi", ANNOTATION_ENABLED: "false"}));
        let p = decide_with(&c, &s).unwrap();
        assert!(p.enabled, "the enable annotation is ignored too");
        assert_eq!(tmpfs_targets(&p), vec![("/tmp".into(), 4 * GI)]);
        assert_eq!(p.notes.iter().filter(|n| n.reason.contains("ignore")).count(), 2, "{:?}", p.notes);
    }
}
