//! What a decision depends on ([`Inputs`]): the spec, the state's
//! annotations, the host config and the host's facts, with the lookups the
//! steps share (annotations under the host's policy, the spec's mounts by
//! destination). Values only: [`HostFacts`] and [`UserFacts`] are read by the executors
//! (`crate::input::host_facts`, the passwd read of the fd layer).

use std::collections::HashMap;

use serde::Serialize;

use crate::oci::Spec;

use super::model::Note;
use super::{ANNOTATION_ENABLED, ANNOTATION_PREFIX, ANNOTATION_SHM_SIZE, ANNOTATION_TMP_SIZE};
use crate::host_config::{AnnotationPolicy, HostConfig};
use crate::names::{ANNOTATION_HOME, ANNOTATION_HOME_SIZE};
use crate::size::Bytes;
use crate::target::TargetPath;

/// What the host contributes to a plan besides its config (read by
/// `crate::input::host_facts`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HostFacts {
    /// The host's total RAM (the basis of a percentage without a memory
    /// limit).
    pub ram: Bytes,
}

/// The most of `/etc/passwd` an executor reads: a larger file is not used
/// (docs/design.md#home-plan).
pub const PASSWD_MAX: u64 = 1 << 20;

/// What the image's `/etc/passwd` says of the process's uid, as an
/// executor read it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "value")]
pub enum Passwd {
    /// Not read: the plan asks for it when it needs it.
    #[default]
    NotRead,
    /// No image to read (`explain --manifest`).
    Unknown,
    /// The uid's first entry, with its home field.
    Entry(String),
    /// No entry for the uid, or no `/etc/passwd` at all.
    NoEntry,
    /// A file that cannot be used, and why.
    Unreadable(String),
}

/// What the image holds at the home directory and along each cache's path
/// below it, as an executor read it (resolved in the rootfs by fd, never
/// followed out of it): where each cache's tmpfs goes, if anywhere
/// (docs/design.md#home-rule).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "entries")]
pub enum HomeDir {
    /// Not read: the plan asks for it ([`super::Plan::home_dir`]).
    #[default]
    NotRead,
    /// No image to read (`explain --manifest`).
    Unknown,
    /// `HOME` (the path `""`) and the paths below it that were read
    /// ([`read_paths`]), relative to it: what the image holds at each.
    /// A path below a missing, empty or non-directory entry is not read.
    Read(Vec<(String, Found)>),
}

/// What the image holds at one path.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Found {
    /// Nothing: an executor may make a directory there.
    Missing,
    /// A directory.
    Dir(DirFacts),
    /// A symlink (below `HOME`, no symlink is followed).
    Symlink,
    /// A mount point, or a path that crosses one (a volume).
    Mount,
    /// Anything else (a file, a device, a FIFO), or a path that could not
    /// be read.
    Other,
}

/// A directory of the image, as `fstat` and a listing give it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct DirFacts {
    /// Its owner as the executor sees it: host ids.
    pub owner: super::Owner,
    /// Its permission bits.
    pub mode: u32,
    /// It holds no entry.
    pub empty: bool,
}

/// The paths below `HOME` that an executor reads for the caches `caches`
/// (each relative to `HOME`): every directory along each cache's path,
/// shallowest first, each once.
pub fn read_paths(caches: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for c in caches {
        let parts: Vec<&str> = c.split('/').filter(|p| !p.is_empty()).collect();
        for i in 1..=parts.len() {
            let p = parts[..i].join("/");
            if !out.contains(&p) {
                out.push(p);
            }
        }
    }
    out.sort_by_key(|p| p.matches('/').count());
    out
}

/// What only an executor knows of the container's user.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UserFacts {
    pub passwd: Passwd,
    /// What the image holds at the home's path, and that path.
    pub home_dir: Option<(String, HomeDir)>,
}

impl UserFacts {
    /// An executor that has not read `/etc/passwd` (the hook, NRI, the
    /// spec executor before its read).
    pub const HOOK: UserFacts = UserFacts { passwd: Passwd::NotRead, home_dir: None };

    /// The facts of an executor that reads nothing (`explain --manifest`):
    /// `passwd` and the home's directory unknown.
    pub fn unknown() -> UserFacts {
        UserFacts { passwd: Passwd::Unknown, home_dir: None }
    }

    /// What the image holds at `path`, when this executor read it.
    pub(super) fn home_dir_at(&self, path: &str) -> &HomeDir {
        match &self.home_dir {
            Some((p, facts)) if p == path => facts,
            _ if self.passwd == Passwd::Unknown => &HomeDir::Unknown,
            _ => &HomeDir::NotRead,
        }
    }
}

/// What a plan needs an executor to read before it is finished.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Question {
    /// The image's `/etc/passwd` entry of this uid.
    Passwd(u32),
    /// What the image holds at this home directory and at these paths
    /// below it ([`read_paths`]).
    HomeDir(String, Vec<String>),
}

/// Everything a decision depends on.
#[derive(Clone, Copy, Debug)]
pub struct Inputs<'a> {
    pub spec: &'a Spec,
    /// Annotations from the state, used where the spec has none.
    pub state_annotations: Option<&'a HashMap<String, String>>,
    pub host_config: &'a HostConfig,
    pub host_ram: Bytes,
    /// What the executor knows of the container's user.
    pub user: &'a UserFacts,
}

impl Inputs<'_> {
    /// An annotation of the spec, or of the state when the spec has none.
    /// Ours (`oci-tmpfs-hook/*`) count only under `annotations = "allow"`.
    pub(super) fn annotation(&self, key: &str) -> Option<&str> {
        if key.starts_with(ANNOTATION_PREFIX) && self.host_config.annotations == AnnotationPolicy::Ignore {
            return None;
        }
        self.raw_annotation(key)
    }

    pub(super) fn raw_annotation(&self, key: &str) -> Option<&str> {
        self.spec
            .annotations()
            .as_ref()
            .or(self.state_annotations)
            .and_then(|a| a.get(key))
            .map(String::as_str)
    }

    /// Our annotations that the host config says to ignore, as notes.
    pub(super) fn ignored_annotations(&self) -> Vec<Note> {
        if self.host_config.annotations != AnnotationPolicy::Ignore {
            return Vec::new();
        }
        [ANNOTATION_ENABLED, ANNOTATION_TMP_SIZE, ANNOTATION_SHM_SIZE, ANNOTATION_HOME, ANNOTATION_HOME_SIZE]
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

/// The spec's mounts with normalised destinations, for comparing paths.
pub(super) struct SpecMounts<'a>(pub(super) Vec<(String, &'a crate::oci::Mount)>);

impl<'a> SpecMounts<'a> {
    pub(super) fn of(spec: &'a Spec) -> SpecMounts<'a> {
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
    pub(super) fn last_at(&self, dest: &str) -> Option<&'a crate::oci::Mount> {
        self.0.iter().rev().find(|(d, _)| d == dest).map(|(_, m)| *m)
    }

    /// The destination of a mount that lies strictly inside `path`.
    pub(super) fn inside(&self, path: &TargetPath) -> Option<&str> {
        let prefix = format!("{path}/");
        self.0.iter().find(|(d, _)| d.starts_with(&prefix)).map(|(d, _)| d.as_str())
    }

    /// The destination of a mount (other than `/`) that `path` lies inside.
    pub(super) fn containing(&self, path: &TargetPath) -> Option<&str> {
        self.0.iter().find(|(d, _)| d != "/" && path.is_under(d)).map(|(d, _)| d.as_str())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use serde_json::json;

    use super::*;
    use crate::plan::fixtures::{base, decide_with, tmpfs_targets, with, GI, MI, RAM};
    use crate::plan::{plan_for, HostFacts, ANNOTATION_TMP_SIZE};

    #[test]
    fn state_annotations_used_when_spec_has_none() {
        let spec: Spec = serde_json::from_value(base()).unwrap();
        let ann = HashMap::from([(ANNOTATION_TMP_SIZE.to_string(), "64m".to_string())]);
        let p = plan_for(&spec, Some(&ann), &HostConfig::default(), HostFacts { ram: RAM }, &UserFacts::HOOK)
            .unwrap();
        assert_eq!(tmpfs_targets(&p)[0].1, 64 * MI);
    }

    #[test]
    fn ignored_annotations_are_noted() {
        let s = HostConfig::parse("annotations = \"ignore\"").unwrap();
        let c =
            with(base(), "/annotations", json!({ANNOTATION_TMP_SIZE: "1Mi", ANNOTATION_ENABLED: "false"}));
        let p = decide_with(&c, &s).unwrap();
        assert!(p.enabled, "the enable annotation is ignored too");
        assert_eq!(tmpfs_targets(&p), vec![("/tmp".into(), 4 * GI)]);
        assert_eq!(p.notes.iter().filter(|n| n.reason.contains("ignore")).count(), 2, "{:?}", p.notes);
    }
}
