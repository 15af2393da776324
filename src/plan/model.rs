//! The plan as data: [`Plan`], its [`Action`]s with each [`Tmpfs`] whole,
//! the [`Note`]s that say why something was left alone, and where sizes came
//! from. Made by [`super::plan_for`] or [`super::begin`] and
//! [`super::finish`], read by every executor and `explain`.

use serde::Serialize;

use super::{ANNOTATION_ENABLED, SHM_PATH};
use crate::size::{Basis, Bytes, SizeError};
use crate::target::{EnvVar, TargetPath};

/// Where the home came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HomeFrom {
    /// `HOME=` in `process.env` (its last).
    Env,
    /// The uid's `/etc/passwd` entry in the image.
    Passwd,
    /// Neither: no `/etc/passwd` entry for the uid, so the runtime gives `/`.
    NoEntry,
}

/// Where a temp target came from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "name")]
pub enum Origin {
    /// `/tmp`, always.
    Default,
    /// A variable of the container's environment: a temp one (`TMPDIR`...)
    /// or one of the host config's `env_targets`.
    Env(EnvVar),
    /// `extra_targets` in the host config.
    HostConfig,
    /// A cache under the container user's `HOME` (`home_caches`), and
    /// where `HOME` came from. `HOME` itself is never a target.
    HomeCache(HomeFrom),
}

impl Origin {
    /// True unless the origin is a cache variable (`env_targets`): `/tmp`, a
    /// temp variable and `extra_targets` are temp dirs.
    pub fn is_temp_dir(&self) -> bool {
        match self {
            Origin::Env(var) => var.is_temp_var(),
            Origin::Default | Origin::HostConfig => true,
            Origin::HomeCache(_) => false,
        }
    }
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
    /// Owner of its root (and of directories made in it), in host ids;
    /// `None`: root.
    pub owner: Option<Owner>,
    /// For a cache under `HOME`: the process's container-side ids, which
    /// own its root where the runtime mounts it (a spec entry, made inside
    /// the container's user namespace); `None`: its root.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user: Option<Owner>,
    /// For a cache under `HOME`: the image's directory there, when it has
    /// one, must belong to this host uid (the process's), else the target
    /// is left alone: a tmpfs never opens up a directory the image gave to
    /// someone else (docs/design.md#home-rule). Checked on the resolved
    /// directory itself, as the executor places it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image_owner: Option<u32>,
    /// For a cache under `HOME`: `HOME`. The directories an executor makes
    /// for the mountpoint at or below it (a missing `HOME`, the
    /// mountpoint) belong to `owner`, mode [`super::HOME_MODE`], not to
    /// root (docs/design.md#home-rule).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub own_from: Option<String>,
    /// The SELinux label of its files, the spec's `linux.mountLabel`, which
    /// the hook passes as `context=` (docs/design.md#selinux); `None`: none.
    pub label: Option<String>,
}

/// Mode of every fresh tmpfs root and of the directories made in one.
pub const TMPFS_MODE: u32 = 0o1777;

fn octal<S: serde::Serializer>(mode: &u32, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(&format_args!("{mode:o}"))
}

impl Tmpfs {
    /// Its options as `mount(8)` or a runtime spells them, but for the size:
    /// `nosuid`, `nodev`, `noexec` as set, `mode=`, `nr_inodes=`, `uid=`/`gid=`,
    /// `context="LABEL"`.
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
        if let Some(label) = &self.label {
            opts.push(format!("context=\"{label}\""));
        }
        opts
    }

    /// Who owns the directories an executor makes for its mountpoint: a
    /// cache's `HOME` and owner ([`Tmpfs::own_from`]); `None`: root.
    pub fn made_for(&self) -> Option<(&str, Owner)> {
        self.own_from.as_deref().zip(self.owner)
    }

    /// The options of its entry in a spec's `mounts`: [`Tmpfs::options`]
    /// with the container-side owner for the host's (a runtime mounts spec
    /// entries inside the container's user namespace, where a fresh tmpfs
    /// already belongs to its root; a home is the process's) and
    /// the label (the runtime adds `context=` from `linux.mountLabel` to
    /// every spec mount itself: docs/design.md#selinux), then `size=`.
    pub fn spec_options(&self) -> Vec<String> {
        let mut opts = Tmpfs { owner: self.user, label: None, ..self.clone() }.options();
        opts.push(format!("size={}", self.size.bytes.0));
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

/// Why the hook does not act for a container: the fixed set that `why`
/// words (a metric's label, a test's check).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Off {
    /// A pod's sandbox (pause) container.
    Sandbox,
    /// Its root is writable and no annotation turns the hook on.
    WritableRoot,
    /// The enable annotation says `false`.
    Annotation,
    /// No mount namespace of its own.
    NoMountNamespace,
}

/// The decision.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Plan {
    pub enabled: bool,
    /// Why the hook acts or not.
    pub why: String,
    /// Why not, when `enabled` is false.
    #[serde(skip)]
    pub off: Option<Off>,
    /// Owner of every fresh tmpfs (and directory made in it); `None`: root.
    pub owner: Option<Owner>,
    pub actions: Vec<Action>,
    pub notes: Vec<Note>,
    /// The spec's mount destinations (normalised), in the order the runtime
    /// mounts them: what the executors judge each target's landing against
    /// (docs/design.md#landing).
    #[serde(skip)]
    pub spec_mounts: Vec<SpecMount>,
    /// `HOME` depends on the image's `/etc/passwd` entry for this uid, left
    /// unanswered (NRI, `explain --manifest`): an executor that can read the
    /// rootfs answers it instead ([`super::begin`], [`super::finish`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub passwd_uid: Option<u32>,
    /// The caches depend on what the image holds at this directory and at
    /// these paths below it, left unanswered: an executor that can read
    /// the rootfs answers it instead ([`super::UserFacts::home_dir`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub home_dir: Option<(String, Vec<String>)>,
    /// What `HOME`'s caches get, when the plan decided it (docs/design.md#home-rule).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub home: Option<HomeWay>,
}

/// What the plan gives the container user's `HOME`: never `HOME` itself.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "way")]
pub enum HomeWay {
    /// `HOME` stays the image's, read-only; each of `mounts` gets a tmpfs
    /// of the process's, the caches sharing `budget` (`each` apiece);
    /// each cache of `left` is left alone, and why.
    Caches { home: String, mounts: Vec<String>, budget: Bytes, each: Bytes, left: Vec<CacheLeft> },
    /// `HOME` and its caches get nothing, and why.
    LeftAlone { home: String, why: String },
}

/// A cache of `home_caches` left alone, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CacheLeft {
    /// Its path under `HOME` (`.cache/huggingface`).
    pub cache: String,
    pub why: String,
    /// Worth a warning: the image's layout keeps a tool's cache from
    /// working (another uid's directory, a symlink, a file), rather than
    /// keeping the image's own files or a volume as intended.
    #[serde(skip)]
    pub warn: bool,
}

impl HomeWay {
    /// Worth a warning rather than information: `HOME` left alone for
    /// another reason than a volume, or a cache left alone by the image's
    /// layout.
    pub fn warn(&self) -> bool {
        match self {
            HomeWay::Caches { left, .. } => left.iter().any(|l| l.warn),
            HomeWay::LeftAlone { .. } => false,
        }
    }

    /// One line for `explain` and the log: the cache mounts and the
    /// budget they share, then each cache left alone and why; or why
    /// `HOME` is left alone.
    pub fn line(&self) -> String {
        match self {
            HomeWay::Caches { home, mounts, budget, each, left } => {
                let mut line = if mounts.is_empty() {
                    format!("HOME={home}: read-only; no cache tmpfs")
                } else {
                    format!(
                        "HOME={home}: read-only; cache tmpfs at {} (home_size {} shared: {} each)",
                        mounts.join(", "),
                        budget.approx(),
                        each.approx()
                    )
                };
                for l in left {
                    line.push_str(&format!("; {} left alone: {}", l.cache, l.why));
                }
                line
            }
            HomeWay::LeftAlone { home, why } => format!("HOME={home}: left alone: {why}"),
        }
    }
}

impl Plan {
    /// What an executor must read before this plan is finished, if anything.
    pub fn question(&self) -> Option<super::Question> {
        match (self.passwd_uid, &self.home_dir) {
            (Some(uid), _) => Some(super::Question::Passwd(uid)),
            (None, Some((path, paths))) => Some(super::Question::HomeDir(path.clone(), paths.clone())),
            (None, None) => None,
        }
    }

    /// Whether an executor has anything to do: an action, or a question
    /// whose answer may bring one. The one test of "work" for every
    /// executor (the hook, the spec executor, NRI).
    pub fn has_work(&self) -> bool {
        !self.actions.is_empty() || self.question().is_some()
    }
}

/// A mount of the spec, as the landing rule needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpecMount {
    /// Its destination, normalised.
    pub dest: String,
    /// One of ours (`source` [`crate::names::MOUNT_SOURCE`]): from an earlier run.
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
    #[error("annotation {key}={value:?}: use \"true\" or \"false\"")]
    Flag { key: &'static str, value: String },
    #[error("config.json has no root.path")]
    NoRoot,
}

/// What the plan's tmpfs sizes add up to, against the container's memory
/// limit: sizes are caps, not allocations, but a tmpfs page written is
/// charged to the writer's memory cgroup, so tmpfs filled together past the
/// limit end in an OOM kill rather than ENOSPC.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct MemoryUse {
    /// The sum of every tmpfs size of the plan (each fresh tmpfs, and the
    /// size `/dev/shm` reaches).
    pub tmpfs_total: Bytes,
    /// The container's memory limit, if it has one.
    pub limit: Option<Bytes>,
}

impl MemoryUse {
    /// True when the tmpfs, filled, could take more than the limit.
    pub fn over(&self) -> bool {
        self.limit.is_some_and(|l| self.tmpfs_total > l)
    }

    /// One line for `explain`.
    pub fn line(&self) -> String {
        let total = self.tmpfs_total.approx();
        match self.limit {
            None => format!("the tmpfs sizes add up to {total}; no memory limit (each is capped by RAM)"),
            Some(l) if self.over() => format!(
                "the tmpfs sizes add up to {total}, over the memory limit {}: filled together they end in an OOM kill, not ENOSPC (each is within the limit; lower tmp_size, home_size or shm_size, or raise the limit)",
                l.approx()
            ),
            Some(l) => format!("the tmpfs sizes add up to {total}, within the memory limit {}", l.approx()),
        }
    }
}

impl Plan {
    /// What its tmpfs sizes add up to against `limit` (the spec's memory limit).
    pub fn memory_use(&self, limit: Option<Bytes>) -> MemoryUse {
        let tmpfs_total = Bytes(self.actions.iter().map(|a| a.tmpfs().size.bytes.0).sum());
        MemoryUse { tmpfs_total, limit }
    }
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
