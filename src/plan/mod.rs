//! The decision: what to mount, where, how big. A pure function of the spec,
//! the host settings and the host's RAM; no syscalls and no I/O here, so every
//! decision is unit-tested without root.
//!
//! [`decide`] runs named steps, each in its own file with its own table test:
//! [`enable`] (does the hook act, may it, who owns the mounts), [`sizes`]
//! (bytes for `/tmp` and `/dev/shm` and where they came from), [`temp_dirs`]
//! (the temp dirs, what the spec already mounts, nesting) and [`shm`]
//! (grow, mount fresh, or leave `/dev/shm`). The [`Plan`] carries every mount
//! whole (size, inodes, mode, attributes, owner, subdirectories), so the
//! executors (the hook, the spec executor, NRI, `explain`) only read it. The data is
//! [`model`], what it is made from [`facts`]; this file is [`decide`], and
//! [`plan_for`], the one way every caller makes a plan.

mod enable;
mod facts;
mod home;
pub(crate) mod landing;
mod model;
mod shm;
mod sizes;
mod temp_dirs;

use std::collections::HashMap;

use crate::oci::Spec;

use facts::SpecMounts;
pub use facts::{
    read_paths, DirFacts, Found, HomeDir, HostFacts, Inputs, Passwd, Question, UserFacts, PASSWD_MAX,
};
pub use home::passwd_home;
pub use model::*;

use crate::host_config::HostConfig;
use crate::names::ANNOTATION_PREFIX;
pub use crate::names::{
    ANNOTATION_ENABLED, ANNOTATION_HOME, ANNOTATION_HOME_SIZE, ANNOTATION_SHM_SIZE, ANNOTATION_TMP_SIZE,
    SHM_PATH,
};
use crate::target::TargetPath;

/// The plan for one container as far as `user` tells: what NRI and
/// `explain --manifest` make (they read nothing of the image), from the
/// spec, the state's annotations (the hook's; none elsewhere), the host
/// config and the host's facts. A plan that needs the image's answer keeps
/// its question ([`Plan::question`]) and plans `HOME` as unknown; an
/// executor that can read the image takes [`begin`] and [`finish`] instead.
///
/// # Errors
/// What [`decide`] fails with.
pub fn plan_for(
    spec: &Spec,
    state_annotations: Option<&HashMap<String, String>>,
    settings: &HostConfig,
    host: HostFacts,
    user: &UserFacts,
) -> Result<Plan, PlanError> {
    decide(&Inputs { spec, state_annotations, settings, host_ram: host.ram, user })
}

/// The start of the plan for one container, for an executor that can read
/// the image (the hook, the spec executor, `explain`): the plan, or the
/// part of it made before `HOME` needs the image's answer
/// ([`Decision::Asks`]), which [`finish`] completes. Nothing is planned twice.
///
/// # Errors
/// What [`decide`] fails with.
pub fn begin<'a>(
    spec: &'a Spec,
    state_annotations: Option<&'a HashMap<String, String>>,
    settings: &'a HostConfig,
    host: HostFacts,
    user: &UserFacts,
) -> Result<Decision<'a>, PlanError> {
    start(spec, state_annotations, settings, host.ram, user)
}

/// Finishes `decision`, begun with `user`: while it asks what only the
/// image can say ([`Partial::question`]: the passwd entry, then what the
/// image holds at the home), `read` answers into the facts and the part
/// already made is finished with them. At most two reads; a decision that
/// still asks after them is finished with its question open. The one way
/// every executor that reads the rootfs finishes a plan.
///
/// # Errors
/// What `read` fails with, or a home annotation the answer made invalid.
pub fn finish<E: From<PlanError>>(
    mut decision: Decision<'_>,
    mut user: UserFacts,
    mut read: impl FnMut(&Question, &mut UserFacts) -> Result<(), E>,
) -> Result<Plan, E> {
    for _ in 0..2 {
        let Decision::Asks(partial) = decision else { break };
        read(&partial.question, &mut user)?;
        decision = partial.answer(&user)?;
    }
    Ok(decision.unanswered(&user))
}

/// A plan, or the part of one made before `HOME` needs the image's answer.
pub enum Decision<'a> {
    /// Finished.
    Done(Plan),
    /// Everything but `HOME`'s part, made, and what to read for it.
    Asks(Partial<'a>),
}

impl Decision<'_> {
    /// The plan as far as `user` tells, a question left open
    /// ([`Partial::unanswered`]).
    pub fn unanswered(self, user: &UserFacts) -> Plan {
        match self {
            Decision::Done(plan) => plan,
            Decision::Asks(partial) => partial.unanswered(user),
        }
    }

    /// Whether an executor has anything to do ([`Plan::has_work`]; a
    /// question may bring work).
    pub fn has_work(&self) -> bool {
        match self {
            Decision::Done(plan) => plan.has_work(),
            Decision::Asks(_) => true,
        }
    }

    /// The `/dev/shm` action, which no answer changes: what the hook proves
    /// on the host before it joins the container.
    pub fn shm(&self) -> Option<&Action> {
        match self {
            Decision::Done(plan) => plan.actions.iter().find(|a| matches!(a, Action::Shm { .. })),
            Decision::Asks(partial) => partial.made.shm.as_ref().ok(),
        }
    }

    /// The spec's mounts, as the landing rule needs them.
    pub fn spec_mounts(&self) -> &[SpecMount] {
        match self {
            Decision::Done(plan) => &plan.spec_mounts,
            Decision::Asks(partial) => &partial.made.plan.spec_mounts,
        }
    }

    /// Whether the plan's tmpfs carry a label (each carries the spec's).
    pub fn labelled(&self) -> bool {
        match self {
            Decision::Done(plan) => plan.actions.iter().any(|a| a.tmpfs().label.is_some()),
            Decision::Asks(partial) => partial.made.label.is_some(),
        }
    }
}

/// The part of a plan made before `HOME`: the enablement, the sizes, the
/// temp targets, `/dev/shm`.
pub struct Partial<'a> {
    ground: Ground<'a>,
    /// Boxed: a plan that ends before `HOME` (a writable root) moves no
    /// more than its `Plan`.
    made: Box<Made<'a>>,
    question: Question,
}

impl<'a> Partial<'a> {
    /// What the executor must read.
    pub fn question(&self) -> &Question {
        &self.question
    }

    /// The decision again from `HOME`'s step, with `user` holding the answer.
    ///
    /// # Errors
    /// A home annotation the answer made invalid.
    pub fn answer(self, user: &UserFacts) -> Result<Decision<'a>, PlanError> {
        at_home(self.ground, self.made, user)
    }

    /// The plan with its question left open (`HOME` unknown): what an
    /// executor that cannot read the image carries out.
    pub fn unanswered(self, user: &UserFacts) -> Plan {
        let step = match self.question {
            Question::Passwd(uid) => home::Step::Ask(uid),
            Question::HomeDir(ref path, ref paths) => home::Step::Look(path.clone(), paths.clone()),
        };
        complete(&self.ground.inputs(user), self.made, step)
    }
}

/// What a decision is made from, besides what the executor knows of the
/// user: kept by a [`Partial`] for the answer.
#[derive(Clone, Copy)]
struct Ground<'a> {
    spec: &'a Spec,
    state_annotations: Option<&'a HashMap<String, String>>,
    settings: &'a HostConfig,
    host_ram: crate::size::Bytes,
}

impl<'a> Ground<'a> {
    fn inputs<'u>(self, user: &'u UserFacts) -> Inputs<'u>
    where
        'a: 'u,
    {
        Inputs {
            spec: self.spec,
            state_annotations: self.state_annotations,
            settings: self.settings,
            host_ram: self.host_ram,
            user,
        }
    }
}

/// What [`decide`] made before `HOME`'s step.
struct Made<'a> {
    plan: Plan,
    sizes: sizes::Sizes,
    spec_mounts: SpecMounts<'a>,
    label: Option<String>,
    targets: Vec<temp_dirs::Candidate>,
    temp_dirs: Vec<TargetPath>,
    /// `/dev/shm`'s action, or why it is left alone.
    shm: Result<Action, Note>,
}

/// Decides what to mount, as far as `inputs.user` tells ([`plan_for`]).
///
/// # Errors
/// Invalid annotations, or a container enabled for the hook that names no
/// rootfs.
pub fn decide(inputs: &Inputs<'_>) -> Result<Plan, PlanError> {
    let begun = start(inputs.spec, inputs.state_annotations, inputs.settings, inputs.host_ram, inputs.user)?;
    Ok(begun.unanswered(inputs.user))
}

/// Every step up to `HOME`'s, made once, then `HOME`'s.
fn start<'a>(
    spec: &'a Spec,
    state_annotations: Option<&'a HashMap<String, String>>,
    settings: &'a HostConfig,
    host_ram: crate::size::Bytes,
    user: &UserFacts,
) -> Result<Decision<'a>, PlanError> {
    let ground = Ground { spec, state_annotations, settings, host_ram };
    match before_home(spec, &ground.inputs(user))? {
        Ok(made) => at_home(ground, made, user),
        Err(plan) => Ok(Decision::Done(plan)),
    }
}

/// `HOME`'s step, from what `user` tells: a question keeps the part made
/// (`made`) for the answer, anything else completes it.
fn at_home<'a>(ground: Ground<'a>, made: Box<Made<'a>>, user: &UserFacts) -> Result<Decision<'a>, PlanError> {
    let inputs = ground.inputs(user);
    let question = match home::home(&inputs, &made.temp_dirs)? {
        home::Step::Ask(uid) => Question::Passwd(uid),
        home::Step::Look(path, paths) => Question::HomeDir(path, paths),
        step => return Ok(Decision::Done(complete(&inputs, made, step))),
    };
    Ok(Decision::Asks(Partial { ground, made, question }))
}

/// Every step before `HOME`'s: the plan itself when it ends there (not
/// enabled, no mount namespace of its own, a memory limit no tmpfs fits).
fn before_home<'a>(spec: &'a Spec, inputs: &Inputs<'_>) -> Result<Result<Box<Made<'a>>, Plan>, PlanError> {
    let verdict = enable::enablement(inputs)?;
    let mut plan = Plan { enabled: verdict.enabled, why: verdict.why, off: verdict.off, ..Plan::default() };
    plan.notes.extend(inputs.ignored_annotations());
    if !plan.enabled {
        return Ok(Err(plan));
    }
    enable::check_container(inputs.spec)?;
    if let Some(note) = enable::unserved(inputs.spec) {
        plan.enabled = false;
        plan.off = Some(Off::NoMountNamespace);
        plan.why = format!("{}, but {}", plan.why, enable::NO_OWN_MOUNT_NAMESPACE);
        plan.notes.push(note);
        return Ok(Err(plan));
    }
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
        return Ok(Err(plan));
    }
    let sizes = sizes::sizes(inputs)?;
    let spec_mounts = SpecMounts::of(spec);
    plan.spec_mounts = spec_mounts
        .0
        .iter()
        .map(|(dest, m)| SpecMount {
            dest: dest.clone(),
            ours: m.source().as_ref().is_some_and(|s| s.as_os_str() == crate::names::MOUNT_SOURCE),
        })
        .collect();
    let label = mount_label(inputs.spec);
    let targets = temp_dirs::temp_targets(inputs, &mut plan.notes);
    let temp_dirs: Vec<TargetPath> = targets
        .iter()
        .filter(|c| c.origins.iter().any(Origin::is_temp_dir))
        .map(|c| c.path.clone())
        .collect();
    let shm = shm::shm(&spec_mounts, sizes.shm.clone(), plan.owner, label.clone());
    Ok(Ok(Box::new(Made { plan, sizes, spec_mounts, label, targets, temp_dirs, shm })))
}

/// The plan completed from `HOME`'s step `step`; a question (`Ask`,
/// `Look`) is kept in the plan, unanswered.
fn complete(inputs: &Inputs<'_>, made: Box<Made<'_>>, step: home::Step) -> Plan {
    let Made { mut plan, sizes, spec_mounts, label, mut targets, temp_dirs: _, shm } = *made;
    let home = match step {
        home::Step::None => None,
        home::Step::Ask(uid) => {
            plan.passwd_uid = Some(uid);
            None
        }
        home::Step::Look(path, paths) => {
            plan.home_dir = Some((path, paths));
            None
        }
        home::Step::Left(note) => {
            let home = note.subject.clone();
            plan.home = Some(HomeWay::LeftAlone { home, why: note.reason.clone() });
            plan.notes.push(note);
            None
        }
        home::Step::Mount(h) => Some(h),
    };
    // Each cache's tmpfs, as the image allows (docs/design.md#home-rule).
    let (cache_tmpfs, each) = match &home {
        Some(h) => cache_tmpfs(inputs, h, &sizes.home, &label, &mut targets),
        None => (None, crate::size::Bytes(0)),
    };
    let targets = temp_dirs::not_spec_mounted(targets, &spec_mounts, &mut plan.notes);
    if let Some(h) = home {
        let mounts = h
            .mounts
            .iter()
            .filter(|p| targets.iter().any(|c| &c.path == *p))
            .map(ToString::to_string)
            .collect();
        plan.home =
            Some(HomeWay::Caches { home: h.path, mounts, budget: sizes.home.bytes, each, left: h.left });
    }
    for nested in temp_dirs::nest(targets) {
        let temp = Tmpfs {
            size: sizes.tmp.clone(),
            nr_inodes: inputs.settings.nr_inodes,
            mode: TMPFS_MODE,
            nosuid: true,
            nodev: true,
            noexec: inputs.settings.noexec,
            owner: plan.owner,
            user: None,
            image_owner: None,
            own_from: None,
            label: label.clone(),
        };
        // A cache's tmpfs, unless a temp dir shares its path (a temp dir
        // stays mode 1777 for every user).
        let tmpfs = match &cache_tmpfs {
            Some(t)
                if nested.own_origins.iter().any(|o| matches!(o, Origin::HomeCache(_)))
                    && !nested.own_origins.iter().any(Origin::is_temp_dir) =>
            {
                t.clone()
            }
            _ => temp,
        };
        plan.actions.push(Action::MountTmpfs {
            target: nested.target,
            origins: nested.origins,
            tmpfs,
            subdirs: nested.subdirs,
        });
    }
    match shm {
        Ok(action) => plan.actions.push(action),
        Err(note) => plan.notes.push(note),
    }
    plan
}

/// The tmpfs of each cache of `h` (the process's, mode [`HOME_MODE`],
/// exec allowed), its mountpoints added to `targets`, and the size of each:
/// the caches share `size` (`home_size`), so each gets its share, at
/// least the smallest tmpfs.
fn cache_tmpfs(
    inputs: &Inputs<'_>,
    h: &home::Home,
    size: &Sizing,
    label: &Option<String>,
    targets: &mut Vec<temp_dirs::Candidate>,
) -> (Option<Tmpfs>, crate::size::Bytes) {
    if h.mounts.is_empty() {
        return (None, crate::size::Bytes(0));
    }
    for p in &h.mounts {
        temp_dirs::add(targets, p.clone(), Origin::HomeCache(h.from));
    }
    let n = h.mounts.len() as u64;
    // Whole MiB, so that each share reads as a size; never below the
    // smallest tmpfs.
    let share = (size.bytes.0 / n) & !(crate::size::MIN_BYTES - 1);
    let each = crate::size::Bytes(share.max(crate::size::MIN_BYTES));
    let mut sizing = size.clone();
    if n > 1 {
        sizing.requested = format!("{} shared by {n}", size.requested);
    }
    sizing.bytes = each;
    let tmpfs = Tmpfs {
        size: sizing,
        nr_inodes: inputs.settings.nr_inodes,
        mode: HOME_MODE,
        nosuid: true,
        nodev: true,
        // Triton and torch_extensions load the .so files they build there.
        noexec: false,
        owner: Some(h.host),
        user: Some(h.user),
        image_owner: Some(h.host.uid),
        own_from: Some(h.path.clone()),
        label: label.clone(),
    };
    (Some(tmpfs), each)
}

/// The spec's memory limit (`linux.resources.memory.limit`, when positive).
pub fn memory_limit(spec: &Spec) -> Option<crate::size::Bytes> {
    sizes::memory_limit(spec)
}

/// Mode of each cache tmpfs' root, and of a directory made for its
/// mountpoint (a missing `HOME`, the mountpoint itself).
pub const HOME_MODE: u32 = 0o700;

/// The spec's `linux.mountLabel`: the SELinux label every tmpfs of the plan
/// carries (docs/design.md#selinux). An empty one is none.
fn mount_label(spec: &crate::oci::Spec) -> Option<String> {
    let label = spec.linux().as_ref()?.mount_label().as_ref()?;
    (!label.is_empty()).then(|| label.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::size::Bytes;
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

    fn decide_with(config: &serde_json::Value, settings: &HostConfig) -> Result<Plan, PlanError> {
        let spec: Spec = serde_json::from_value(config.clone()).expect("valid spec");
        decide(&Inputs {
            spec: &spec,
            state_annotations: None,
            settings,
            host_ram: RAM,
            user: &crate::plan::UserFacts::HOOK,
        })
    }

    fn plan(config: &serde_json::Value) -> Plan {
        decide_with(config, &HostConfig::default()).expect("plan")
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

    fn env(var: &str) -> Origin {
        Origin::Env(target::EnvVar::parse(var).unwrap())
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
            settings: &HostConfig::default(),
            host_ram: RAM,
            user: &UserFacts::HOOK,
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
            let err = decide_with(&c, &HostConfig::default()).expect_err(value);
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
                "TMPDIR=/ignored-first",
                "TMPDIR=/var/tmp",
                "TEMP=/var/tmp/",
                "TMP=/tmp",
                "TEMPDIR=/etc",
                "PATH=/bin"
            ]),
        );
        let p = plan(&c);
        assert_eq!(tmpfs_targets(&p), vec![("/tmp".into(), 4 * GI), ("/var/tmp".into(), 4 * GI)]);
        let Action::MountTmpfs { origins, .. } = &p.actions[1] else { panic!() };
        assert_eq!(origins, &vec![env("TMPDIR"), env("TEMP")]);
        assert!(p.notes.iter().any(|n| n.subject == "TEMPDIR=/etc" && n.warn));
    }

    /// A tmpfs target of a plan: path, subdirectories, origins.
    type Mounted = (String, Vec<String>, Vec<String>);

    fn mounted(target: &str, subdirs: &[&str], origins: &[&str]) -> Mounted {
        let strings = |v: &[&str]| v.iter().map(|s| s.to_string()).collect();
        (target.to_string(), strings(subdirs), strings(origins))
    }

    fn tmpfs_mounts(p: &Plan) -> Vec<Mounted> {
        p.actions
            .iter()
            .filter_map(|a| match a {
                Action::MountTmpfs { target, origins, subdirs, .. } => {
                    let origins = origins
                        .iter()
                        .map(|o| match o {
                            Origin::Default => "always".to_string(),
                            Origin::Env(v) => v.to_string(),
                            Origin::HostConfig => "extra_targets".to_string(),
                            Origin::HomeCache(from) => format!("cache ({from:?})"),
                        })
                        .collect();
                    Some((target.to_string(), subdirs.clone(), origins))
                }
                Action::Shm { .. } => None,
            })
            .collect()
    }

    /// name, env, `env_targets` (None: the default), the tmpfs mounts, the
    /// warnings (each a part of one).
    type EnvCase = (String, Vec<String>, Option<Vec<&'static str>>, Vec<Mounted>, Vec<&'static str>);

    fn env_target_cases() -> Vec<EnvCase> {
        let tmp = || mounted("/tmp", &[], &["always"]);
        let long = format!("/{}", "c".repeat(80));
        let mut cases: Vec<EnvCase> = target::DEFAULT_ENV_TARGETS
            .iter()
            .map(|&var| {
                let want = vec![tmp(), mounted("/cache/x", &[], &[var])];
                (format!("default {var}"), vec![format!("{var}=/cache/x")], None, want, vec![])
            })
            .collect();
        let mut case = |name: &str, env: &[&str], list, want, warnings| {
            cases.push((name.to_string(), env.iter().map(|e| e.to_string()).collect(), list, want, warnings));
        };
        case(
            "a custom list replaces the default",
            &["MY_CACHE=/my", "TRITON_CACHE_DIR=/cache/triton"],
            Some(vec!["MY_CACHE"]),
            vec![tmp(), mounted("/my", &[], &["MY_CACHE"])],
            vec![],
        );
        case(
            "an empty list turns them off, not the temp vars",
            &["TRITON_CACHE_DIR=/cache/triton", "TMPDIR=/scratch"],
            Some(vec![]),
            vec![tmp(), mounted("/scratch", &[], &["TMPDIR"])],
            vec![],
        );
        case(
            "a relative value is skipped with a warning",
            &["HF_HOME=.cache/hf"],
            None,
            vec![tmp()],
            vec!["HF_HOME=.cache/hf: not a usable cache dir: is not an absolute path"],
        );
        case(
            "a system path is skipped with a warning",
            &["XDG_CACHE_HOME=/usr/cache", "TORCH_HOME=/tmp/../etc"],
            None,
            vec![tmp()],
            vec![
                "XDG_CACHE_HOME=/usr/cache: not a usable cache dir: lies in a system directory",
                "TORCH_HOME",
            ],
        );
        case(
            "a cache dir in /tmp is a directory in its tmpfs",
            &["TRITON_CACHE_DIR=/tmp/triton"],
            None,
            vec![mounted("/tmp", &["triton"], &["always", "TRITON_CACHE_DIR"])],
            vec![],
        );
        case(
            "two vars naming one dir: one tmpfs",
            &["TRITON_CACHE_DIR=/cache", "CUPY_CACHE_DIR=/cache/", "TMPDIR=/cache"],
            None,
            vec![tmp(), mounted("/cache", &[], &["TMPDIR", "TRITON_CACHE_DIR", "CUPY_CACHE_DIR"])],
            vec![],
        );
        case(
            "the last occurrence of a var counts, as the runtimes give it",
            &["HF_HOME=/hf", "HF_HOME=/second"],
            None,
            vec![tmp(), mounted("/second", &[], &["HF_HOME"])],
            vec![],
        );
        case(
            "a long cache dir has no PyTorch warning",
            &[&format!("HF_HOME={long}")],
            None,
            vec![tmp(), mounted(&long, &[], &["HF_HOME"])],
            vec![],
        );
        case(
            "a long dir named by TMPDIR too has it",
            &[&format!("HF_HOME={long}"), &format!("TMPDIR={long}")],
            None,
            vec![tmp(), mounted(&long, &[], &["TMPDIR", "HF_HOME"])],
            vec!["PyTorch"],
        );
        cases
    }

    /// The cache dirs named by `env_targets`, as the plan mounts them: each
    /// target with its subdirectories and origins, sized like `/tmp`, and
    /// the warnings.
    #[test]
    fn env_targets_table() {
        for (name, env, list, want, warnings) in env_target_cases() {
            let mut settings = HostConfig::default();
            if let Some(list) = list {
                settings.env_targets = list.iter().map(|v| target::EnvVar::parse(v).unwrap()).collect();
            }
            let mut c = base();
            c["process"]["env"].as_array_mut().unwrap().extend(env.iter().map(|e| json!(e)));
            let p = decide_with(&c, &settings).expect(&name);
            assert_eq!(tmpfs_mounts(&p), want, "{name}");
            assert!(tmpfs_targets(&p).iter().all(|t| t.1 == 4 * GI), "{name}: sized like /tmp");
            let warned: Vec<String> =
                p.notes.iter().filter(|n| n.warn).map(|n| format!("{}: {}", n.subject, n.reason)).collect();
            assert_eq!(warned.len(), warnings.len(), "{name}: {warned:?}");
            for w in warnings {
                assert!(warned.iter().any(|n| n.contains(w)), "{name}: {w:?} not in {warned:?}");
            }
        }
    }

    /// A cache dir under a volume, or that is one, is left alone.
    #[test]
    fn env_targets_on_a_volume_are_left_alone() {
        let mut c = base();
        c["mounts"]
            .as_array_mut()
            .unwrap()
            .push(json!({"destination": "/data", "type": "bind", "source": "/srv", "options": ["rbind"]}));
        c["process"]["env"] = json!(["HF_HOME=/data/hf", "TORCH_HOME=/data"]);
        let p = plan(&c);
        assert_eq!(tmpfs_targets(&p), vec![("/tmp".into(), 4 * GI)]);
        assert!(p.notes.iter().any(|n| n.subject == "HF_HOME=/data/hf" && !n.warn), "{:?}", p.notes);
        assert!(p.notes.iter().any(|n| n.subject == "TORCH_HOME=/data" && !n.warn), "{:?}", p.notes);
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
        assert_eq!(origins, &[Origin::Default, env("TMPDIR"), env("TEMP")]);
        // Order does not matter: the parent may come after the child.
        let s = HostConfig {
            extra_targets: vec![
                target::validate("/scratch/a").unwrap(),
                target::validate("/scratch").unwrap(),
            ],
            ..HostConfig::default()
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
    fn the_mount_label_goes_on_every_tmpfs() {
        let label = "system_u:object_r:container_file_t:s0:c1,c2";
        let mut c = base();
        c["mounts"].as_array_mut().unwrap().remove(2); // a fresh /dev/shm too
        c["linux"]["mountLabel"] = json!(label);
        let p = plan(&c);
        assert_eq!(p.actions.len(), 2, "{p:?}");
        for a in &p.actions {
            let (Action::MountTmpfs { tmpfs, .. } | Action::Shm { tmpfs, .. }) = a;
            assert_eq!(tmpfs.label.as_deref(), Some(label), "{a:?}");
            assert_eq!(tmpfs.options().last().unwrap(), &format!("context=\"{label}\""));
            assert!(!tmpfs.spec_options().iter().any(|o| o.starts_with("context=")), "the runtime adds it");
        }
        for none in [json!(""), serde_json::Value::Null] {
            c["linux"]["mountLabel"] = none;
            let p = plan(&c);
            let (Action::MountTmpfs { tmpfs, .. } | Action::Shm { tmpfs, .. }) = &p.actions[0];
            assert_eq!(tmpfs.label, None);
        }
    }

    #[test]
    fn host_settings_apply() {
        let s = HostConfig::parse("tmp_size = \"1g\"\nshm_size = \"2g\"\nextra_targets = [\"/run\"]\nnoexec = true\nnr_inodes = 5000").unwrap();
        let p = decide_with(&base(), &s).unwrap();
        assert_eq!(tmpfs_targets(&p), vec![("/tmp".into(), GI), ("/run".into(), GI)]);
        let Action::MountTmpfs { tmpfs, .. } = &p.actions[0] else { panic!() };
        assert!(tmpfs.noexec && tmpfs.nosuid && tmpfs.nodev && tmpfs.mode == TMPFS_MODE);
        assert_eq!(tmpfs.nr_inodes, Some(5000));
        assert_eq!(tmpfs.size.from, SizeFrom::HostConfig);
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
        assert_eq!(p.off, Some(Off::Sandbox));

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
        let s = HostConfig::parse("annotations = \"ignore\"").unwrap();
        let c =
            with(base(), "/annotations", json!({ANNOTATION_TMP_SIZE: "1Mi", ANNOTATION_ENABLED: "false"}));
        let p = decide_with(&c, &s).unwrap();
        assert!(p.enabled, "the enable annotation is ignored too");
        assert_eq!(tmpfs_targets(&p), vec![("/tmp".into(), 4 * GI)]);
        assert_eq!(p.notes.iter().filter(|n| n.reason.contains("ignore")).count(), 2, "{:?}", p.notes);
    }

    /// A plan finished as an executor finishes it ([`finish`]): `passwd`
    /// is what it reads of the image's /etc/passwd (`NotRead`: the plan's
    /// first question goes unanswered), `read` what it finds at the home
    /// and below it (path, what is there; `""` is `HOME`; a path not given
    /// is missing).
    fn home_plan_in(
        config: &serde_json::Value,
        settings: &HostConfig,
        passwd: Passwd,
        read: &[(&str, Found)],
    ) -> Plan {
        let spec: Spec = serde_json::from_value(config.clone()).expect("valid spec");
        let user = UserFacts::HOOK;
        let first = begin(&spec, None, settings, HostFacts { ram: RAM }, &user).expect("plan");
        let read: Vec<(String, Found)> = read.iter().map(|(p, e)| (p.to_string(), e.clone())).collect();
        finish(first, user, |q, user| {
            match q {
                Question::Passwd(_) => user.passwd = passwd.clone(),
                Question::HomeDir(path, paths) => {
                    // What an executor reads: HOME, then each path below it
                    // that the plan asks for, under a directory holding files.
                    let mut got =
                        vec![read.iter().find(|(p, _)| p.is_empty()).cloned().expect("HOME's entry")];
                    for p in paths {
                        let parent = p.rsplit_once('/').map_or("", |(d, _)| d);
                        let walk_on =
                            got.iter().any(|(q, e)| q == parent && matches!(e, Found::Dir(d) if !d.empty));
                        if walk_on {
                            let e =
                                read.iter().find(|(q, _)| q == p).map_or(Found::Missing, |(_, e)| e.clone());
                            got.push((p.clone(), e));
                        }
                    }
                    user.home_dir = Some((path.clone(), HomeDir::Read(got)));
                }
            }
            Ok::<(), PlanError>(())
        })
        .expect("plan")
    }

    /// The plan of a home whose directory in the image is the process's
    /// (host uid `uid`), holding files, and nothing of the caches.
    fn home_plan(config: &serde_json::Value, settings: &HostConfig, passwd: Passwd, uid: u32) -> Plan {
        home_plan_in(config, settings, passwd, &[("", dir(uid, false))])
    }

    /// A directory of host uid `uid`, empty or holding files.
    fn dir(uid: u32, empty: bool) -> Found {
        Found::Dir(DirFacts { owner: Owner { uid, gid: uid }, mode: 0o755, empty })
    }

    /// The targets that are caches under `HOME`.
    fn caches_of(p: &Plan) -> Vec<String> {
        p.actions
            .iter()
            .filter_map(|a| match a {
                Action::MountTmpfs { target, origins, .. }
                    if origins.iter().any(|o| matches!(o, Origin::HomeCache(_))) =>
                {
                    Some(target.to_string())
                }
                _ => None,
            })
            .collect()
    }

    /// The caches left alone, each with its reason.
    fn left_of(p: &Plan) -> Vec<(String, String)> {
        match &p.home {
            Some(HomeWay::Caches { left, .. }) => {
                left.iter().map(|l| (l.cache.clone(), l.why.clone())).collect()
            }
            _ => Vec::new(),
        }
    }

    /// How many caches are neither mounted nor under a mount: each is left
    /// alone with a reason.
    fn left_count(s: &HostConfig, p: &Plan) -> usize {
        let Some(HomeWay::Caches { home, mounts, .. }) = &p.home else { return 0 };
        let base = home.trim_end_matches('/');
        s.home_caches
            .iter()
            .filter(|c| {
                let full = format!("{base}/{c}");
                !mounts.iter().any(|m| full == *m || full.starts_with(&format!("{m}/")))
            })
            .count()
    }

    /// The top-level cache directories of the default `home_caches` under
    /// `home`, in the list's order: what a home holding none of them gets.
    fn tops(home: &str) -> Vec<String> {
        let base = home.trim_end_matches('/');
        [".cache", ".config", ".triton", ".cupy", ".nv"].iter().map(|c| format!("{base}/{c}")).collect()
    }

    fn user_env(uid: u32, gid: u32, env: &[&str]) -> serde_json::Value {
        let mut c = base();
        c["process"]["user"] = json!({"uid": uid, "gid": gid});
        c["process"]["env"] = json!(env);
        c
    }

    #[test]
    fn the_default_caches_are_the_tools_own_directories() {
        let s = HostConfig::default();
        assert_eq!(
            read_paths(&s.home_caches),
            [
                ".cache",
                ".config",
                ".triton",
                ".cupy",
                ".nv",
                ".cache/torch",
                ".cache/torch_extensions",
                ".cache/huggingface",
                ".cache/pip",
                ".cache/numba",
                ".cache/vllm",
                ".cache/matplotlib",
                ".config/matplotlib",
                ".config/vllm"
            ]
        );
        // Keras uses /tmp/.keras when HOME itself is not writable: a tmpfs at
        // ~/.keras would never be used (docs/design.md#home-caches).
        assert!(!s.home_caches.iter().any(|c| c.contains("keras")));
    }

    #[test]
    fn home_comes_from_env_then_passwd_then_the_runtimes_root() {
        let s = HostConfig::default();
        // HOME in the env: no passwd read, whatever the executor.
        let p = home_plan(&user_env(0, 0, &["HOME=/root"]), &s, Passwd::NotRead, 0);
        assert_eq!((caches_of(&p), p.passwd_uid), (tops("/root"), None));
        // HOME from the image's passwd entry.
        let p = home_plan(&user_env(1000, 1000, &[]), &s, Passwd::Entry("/home/app".into()), 1000);
        assert_eq!(caches_of(&p), tops("/home/app"));
        // No entry: the runtime's `/`, whose caches are made in `/` (root's).
        let p = home_plan(&user_env(1000, 1000, &[]), &s, Passwd::NoEntry, 0);
        assert_eq!(caches_of(&p), tops("/"));
        assert!(matches!(&p.home, Some(HomeWay::Caches { home, .. }) if home == "/"), "{:?}", p.home);
        // Not read yet: the plan asks, first for the passwd entry, then for the home.
        let p = decide_with(&user_env(1000, 1000, &[]), &s).unwrap();
        assert_eq!(p.question(), Some(Question::Passwd(1000)));
        let p = decide_with(&user_env(0, 0, &["HOME=/root"]), &s).unwrap();
        assert_eq!(p.question(), Some(Question::HomeDir("/root".into(), read_paths(&s.home_caches))));
        assert!(caches_of(&p).is_empty(), "nothing planned before the answer");
    }

    #[test]
    fn home_itself_never_gets_a_tmpfs() {
        let s = HostConfig::default();
        for read in [
            vec![("", Found::Missing)],
            vec![("", dir(0, true))],
            vec![("", dir(0, false))],
            vec![("", dir(0, false)), (".cache", dir(0, true))],
        ] {
            let p = home_plan_in(&user_env(0, 0, &["HOME=/root"]), &s, Passwd::NotRead, &read);
            assert!(!tmpfs_targets(&p).iter().any(|(t, _)| t == "/root"), "{read:?}: {p:?}");
            assert!(caches_of(&p).iter().all(|c| c.starts_with("/root/.")), "{read:?}: {p:?}");
        }
    }

    /// Where each cache's tmpfs goes, from what the image holds: the
    /// shallowest directory below HOME along its path that is missing or
    /// empty and may be the process's; a symlink, a file, a mount, another
    /// uid's directory leave the cache alone, and the image's files stay.
    #[test]
    fn home_rule_table() {
        let s = HostConfig::default();
        let other_cache = |home: &str, mount: &[&str]| {
            let mut v: Vec<String> = mount.iter().map(|m| format!("{home}/{m}")).collect();
            v.extend([".config", ".triton", ".cupy", ".nv"].iter().map(|c| format!("{home}/{c}")));
            v
        };
        type Case<'a> = (&'a str, u32, Vec<(&'a str, Found)>, Vec<String>, &'a [(&'a str, &'a str)]);
        let filled_cache = [
            ("", dir(0, false)),
            (".cache", dir(0, false)),
            (".cache/pip", dir(0, false)),
            (".cache/huggingface", dir(0, false)),
            (".cache/torch", dir(0, true)),
        ];
        let cases: Vec<Case<'_>> = vec![
            ("a home of the process's, none of the caches", 0, vec![("", dir(0, false))], tops("/h"), &[]),
            ("a home missing from the image", 1000, vec![("", Found::Missing)], tops("/h"), &[]),
            ("an empty home of the process's", 1000, vec![("", dir(1000, true))], tops("/h"), &[]),
            (
                "another uid's empty home",
                1000,
                vec![("", dir(0, true))],
                vec![],
                &[(".nv", "belongs to uid 0")],
            ),
            (
                "an empty .cache of the process's takes every .cache/*",
                1000,
                vec![("", dir(1000, false)), (".cache", dir(1000, true))],
                tops("/h"),
                &[],
            ),
            (
                "a .cache holding the image's files: each tool's own directory",
                0,
                filled_cache.to_vec(),
                other_cache(
                    "/h",
                    &[
                        ".cache/torch",
                        ".cache/torch_extensions",
                        ".cache/numba",
                        ".cache/vllm",
                        ".cache/matplotlib",
                    ],
                ),
                &[
                    (".cache/huggingface", "holds the image's files"),
                    (".cache/pip", "holds the image's files"),
                ],
            ),
            (
                "another uid's home: no mountpoint is made in it",
                1000,
                vec![("", dir(0, false))],
                vec![],
                &[(".cache/torch", "belongs to uid 0"), (".triton", "belongs to uid 0")],
            ),
            (
                "another uid's empty .cache",
                1000,
                vec![("", dir(1000, false)), (".cache", dir(0, true))],
                other_cache("/h", &[]),
                &[(".cache/torch", "gives /h/.cache to uid 0")],
            ),
            (
                "another uid's .cache holding files",
                1000,
                vec![("", dir(1000, false)), (".cache", dir(0, false))],
                other_cache("/h", &[]),
                &[(".cache/huggingface", "/h/.cache belongs to uid 0")],
            ),
            (
                "a .cache that is a symlink out of HOME",
                0,
                vec![("", dir(0, false)), (".cache", Found::Symlink)],
                other_cache("/h", &[]),
                &[(".cache/torch", "symlink"), (".cache/pip", "symlink")],
            ),
            (
                "a .cache that is a file",
                0,
                vec![("", dir(0, false)), (".cache", Found::Other)],
                other_cache("/h", &[]),
                &[(".cache/numba", "something other than a directory")],
            ),
            (
                "a .cache that is a mount",
                0,
                vec![("", dir(0, false)), (".cache", Found::Mount)],
                other_cache("/h", &[]),
                &[(".cache/torch", "mount point")],
            ),
            (
                "a tool's directory that is a symlink",
                0,
                vec![("", dir(0, false)), (".cache", dir(0, false)), (".cache/torch", Found::Symlink)],
                other_cache(
                    "/h",
                    &[
                        ".cache/torch_extensions",
                        ".cache/huggingface",
                        ".cache/pip",
                        ".cache/numba",
                        ".cache/vllm",
                        ".cache/matplotlib",
                    ],
                ),
                &[(".cache/torch", "symlink")],
            ),
        ];
        for (name, uid, read, want, left) in cases {
            let p = home_plan_in(&user_env(uid, uid, &["HOME=/h"]), &s, Passwd::NotRead, &read);
            let mut got = caches_of(&p);
            got.sort();
            let mut want = want.clone();
            want.sort();
            assert_eq!(got, want, "{name}");
            let l = left_of(&p);
            for (cache, why) in left {
                assert!(
                    l.iter().any(|(c, w)| c == cache && w.contains(why)),
                    "{name}: {cache}: {why}: {l:#?}"
                );
            }
            assert_eq!(l.len(), left_count(&s, &p), "{name}");
        }
    }

    #[test]
    fn a_home_that_is_not_a_directory_or_a_volume_is_left_alone() {
        let s = HostConfig::default();
        for (read, why, warn) in
            [(Found::Mount, "a volume", false), (Found::Other, "something other than a directory", true)]
        {
            let p = home_plan_in(&user_env(0, 0, &["HOME=/h"]), &s, Passwd::NotRead, &[("", read)]);
            assert!(caches_of(&p).is_empty(), "{p:?}");
            assert!(p.notes.iter().any(|n| n.warn == warn && n.reason.contains(why)), "{:?}", p.notes);
            assert!(matches!(p.home, Some(HomeWay::LeftAlone { .. })));
        }
        // A volume at HOME, or above it, in the spec.
        for dest in ["/h", "/"] {
            let mut c = user_env(0, 0, &["HOME=/h/u"]);
            let dest = if dest == "/" { "/h" } else { dest };
            c["mounts"]
                .as_array_mut()
                .unwrap()
                .push(json!({"destination": dest, "type": "bind", "source": "/srv"}));
            let p = home_plan(&c, &s, Passwd::NotRead, 0);
            assert!(caches_of(&p).is_empty() && p.home_dir.is_none(), "{p:?}");
        }
        // HOME in a temp dir: its tmpfs holds the caches.
        let p = home_plan(&user_env(0, 0, &["HOME=/tmp/u"]), &s, Passwd::NotRead, 0);
        assert!(caches_of(&p).is_empty() && p.notes.iter().any(|n| n.reason.contains("temp tmpfs")), "{p:?}");
    }

    /// A volume on a cache's path: never covered; the walk goes past a
    /// directory holding one, which the runtime makes (root's) when missing.
    #[test]
    fn a_volume_under_home_is_never_covered() {
        let s = HostConfig::default();
        let mut c = user_env(0, 0, &["HOME=/root"]);
        c["mounts"]
            .as_array_mut()
            .unwrap()
            .push(json!({"destination": "/root/.cache/huggingface", "type": "bind", "source": "/srv/hf"}));
        let p = home_plan_in(&c, &s, Passwd::NotRead, &[("", dir(0, false))]);
        let got = caches_of(&p);
        assert!(
            got.contains(&"/root/.cache/torch".to_string()) && got.contains(&"/root/.triton".to_string()),
            "{got:?}"
        );
        assert!(
            !got.iter().any(|g| g == "/root/.cache" || g.starts_with("/root/.cache/huggingface")),
            "{got:?}"
        );
        assert!(left_of(&p).iter().any(|(c, w)| c == ".cache/huggingface" && w.contains("volume")));
        // uid 1000: the runtime's .cache is root's, so no mountpoint in it.
        let mut c1000 = c.clone();
        c1000["process"]["user"] = json!({"uid": 1000, "gid": 1000});
        c1000["process"]["env"] = json!(["HOME=/root"]);
        let p = home_plan_in(&c1000, &s, Passwd::NotRead, &[("", dir(1000, false))]);
        assert!(!caches_of(&p).iter().any(|g| g.starts_with("/root/.cache")), "{p:?}");
        assert!(caches_of(&p).contains(&"/root/.triton".to_string()));
        // An empty .cache in the image holding a volume: the other
        // .cache/* caches get their own directories, never .cache itself.
        let p = home_plan_in(&c, &s, Passwd::NotRead, &[("", dir(0, false)), (".cache", dir(0, true))]);
        let got = caches_of(&p);
        assert!(
            got.contains(&"/root/.cache/torch".to_string()) && !got.contains(&"/root/.cache".to_string()),
            "{got:?}"
        );
        // A volume at .cache: every .cache/* cache is the volume's.
        let mut c = user_env(0, 0, &["HOME=/root"]);
        c["mounts"]
            .as_array_mut()
            .unwrap()
            .push(json!({"destination": "/root/.cache", "type": "bind", "source": "/srv"}));
        let p = home_plan_in(&c, &s, Passwd::NotRead, &[("", dir(0, false))]);
        assert!(!caches_of(&p).iter().any(|g| g.starts_with("/root/.cache")), "{p:?}");
        assert_eq!(caches_of(&p).len(), 4, "{p:?}");
    }

    /// Each cache tmpfs is the process's, mode 0700, exec allowed, and the
    /// caches share `home_size`.
    #[test]
    fn cache_tmpfs_share_home_size_and_belong_to_the_process() {
        let s = HostConfig::parse("noexec = true").unwrap();
        let p = home_plan_in(
            &user_env(1000, 100, &["HOME=/home/u"]),
            &s,
            Passwd::NotRead,
            &[("", Found::Missing)],
        );
        let caches: Vec<&Tmpfs> = p
            .actions
            .iter()
            .filter_map(|a| match a {
                Action::MountTmpfs { origins, tmpfs, .. }
                    if origins.iter().any(|o| matches!(o, Origin::HomeCache(_))) =>
                {
                    Some(tmpfs)
                }
                _ => None,
            })
            .collect();
        assert_eq!(caches.len(), 5);
        let budget = 4 * GI; // 25% of the 16 GiB host
        for t in &caches {
            assert_eq!(t.size.bytes.0, ((budget / 5) >> 20) << 20, "whole MiB: {t:?}");
            assert_eq!((t.mode, t.noexec, t.nosuid, t.nodev), (HOME_MODE, false, true, true));
            assert_eq!(t.owner, Some(Owner { uid: 1000, gid: 100 }));
            assert_eq!(t.user, Some(Owner { uid: 1000, gid: 100 }));
            assert_eq!((t.image_owner, t.own_from.as_deref()), (Some(1000), Some("/home/u")));
        }
        let line = p.home.as_ref().unwrap().line();
        assert!(line.contains("home_size 4Gi shared") && line.contains("read-only"), "{line}");
        // The temp tmpfs keep `noexec`.
        assert!(p.actions.iter().any(|a| a.target() == "/tmp" && a.tmpfs().noexec));
        // Off by the setting or the annotation; a bad annotation is an error.
        let off = HostConfig::parse("home = false").unwrap();
        assert!(caches_of(&home_plan(&user_env(0, 0, &["HOME=/root"]), &off, Passwd::NotRead, 0)).is_empty());
        let c = with(user_env(0, 0, &["HOME=/root"]), "/annotations", json!({ANNOTATION_HOME: "false"}));
        assert!(caches_of(&home_plan(&c, &s, Passwd::NotRead, 0)).is_empty());
        let c = with(user_env(0, 0, &["HOME=/root"]), "/annotations", json!({ANNOTATION_HOME: "yes"}));
        assert!(decide_with(&c, &s).is_err());
    }

    #[test]
    fn memory_use_sums_every_tmpfs_against_the_limit() {
        let mut c = user_env(0, 0, &["HOME=/root", "TMPDIR=/scratch"]);
        c["linux"]["resources"] = json!({"memory": {"limit": 4 * GI}});
        let p = home_plan(&c, &HostConfig::default(), Passwd::NotRead, 0);
        // /tmp, /scratch at 1Gi each, the caches 1Gi together, /dev/shm at 2Gi.
        let m = p.memory_use(memory_limit(&serde_json::from_value(c.clone()).unwrap()));
        assert_eq!(
            (m.tmpfs_total, m.limit),
            (Bytes(4 * GI + (((GI / 5) >> 20) << 20) * 5), Some(Bytes(4 * GI)))
        );
        assert!(m.over() && m.line().contains("over the memory limit 4Gi"), "{}", m.line());
        let small = HostConfig::parse("home_size = \"10%\"\ntmp_size = \"10%\"").unwrap();
        let m = home_plan(&c, &small, Passwd::NotRead, 0).memory_use(Some(Bytes(4 * GI)));
        assert!(!m.over() && m.line().contains("within the memory limit"), "{}", m.line());
        assert!(!plan(&base()).memory_use(None).over());
    }

    #[test]
    fn bad_homes_are_left_alone_with_a_note() {
        let s = HostConfig::default();
        let cases: &[(&[&str], &str)] = &[
            (&["HOME=/etc"], "system directory"),
            (&["HOME=/proc/self"], "system directory"),
            (&["HOME=/usr/local"], "system directory"),
            (&["HOME=home/u"], "not an absolute path"),
            (&["HOME=/home/../etc"], "'..'"),
            (&["HOME="], "is empty"),
        ];
        for (env, why) in cases {
            let p = home_plan(&user_env(1000, 1000, env), &s, Passwd::NotRead, 1000);
            assert_eq!((caches_of(&p), p.passwd_uid), (vec![], None), "{env:?}");
            assert!(p.notes.iter().any(|n| n.warn && n.reason.contains(why)), "{env:?}: {:?}", p.notes);
            assert_eq!(tmpfs_targets(&p), vec![("/tmp".into(), 4 * GI)], "{env:?}");
        }
        // A passwd home of /../.. (normalises to /) is refused.
        let p = home_plan(&user_env(9, 9, &[]), &s, Passwd::Entry("/../..".into()), 9);
        assert!(
            caches_of(&p).is_empty() && p.notes.iter().any(|n| n.reason.contains("'..'")),
            "{:?}",
            p.notes
        );
        // Two HOME= entries: the last is the one the process gets.
        let p = home_plan(&user_env(0, 0, &["HOME=/first", "HOME=/second"]), &s, Passwd::NotRead, 0);
        assert_eq!(caches_of(&p), tops("/second"));
        // Notes say it once, without "left alone" twice.
        for (case, p) in [
            (
                "unreadable",
                home_plan(&user_env(1000, 0, &[]), &s, Passwd::Unreadable("is not a regular file".into()), 0),
            ),
            ("unknown", home_plan(&user_env(1000, 0, &[]), &s, Passwd::Unknown, 0)),
        ] {
            let home: Vec<&Note> = p.notes.iter().filter(|n| n.subject.contains("HOME")).collect();
            assert_eq!(home.len(), 1, "{case}: {:?}", p.notes);
            assert!(!home[0].reason.to_lowercase().contains("left alone"), "{case}: {:?}", home[0]);
        }
    }

    /// Under a user namespace the caches belong to the process's host ids,
    /// and the image's directories are compared in host ids.
    #[test]
    fn home_owner_in_a_user_namespace() {
        let mut c = user_env(1000, 1000, &["HOME=/home/u"]);
        c["linux"]["namespaces"]
            .as_array_mut()
            .unwrap()
            .push(json!({"type": "user", "path": "/proc/3/ns/user"}));
        c["linux"]["uidMappings"] = json!([{"containerID": 0, "hostID": 100000, "size": 65536}]);
        c["linux"]["gidMappings"] = json!([{"containerID": 0, "hostID": 200000, "size": 65536}]);
        let p = home_plan(&c, &HostConfig::default(), Passwd::NotRead, 101000);
        assert_eq!(caches_of(&p), tops("/home/u"));
        let t = p.actions.iter().find(|a| a.target() == "/home/u/.triton").unwrap().tmpfs();
        assert_eq!(
            (t.owner, t.user),
            (Some(Owner { uid: 101000, gid: 201000 }), Some(Owner { uid: 1000, gid: 1000 }))
        );
        // The container's uid 1000 is host 101000: a home of host uid 1000 is not its own.
        let p = home_plan(&c, &HostConfig::default(), Passwd::NotRead, 1000);
        assert!(caches_of(&p).is_empty(), "{p:?}");
        // Unmapped: left alone with a note.
        c["linux"]["uidMappings"] = json!([{"containerID": 0, "hostID": 100000, "size": 1}]);
        let p = home_plan(&c, &HostConfig::default(), Passwd::NotRead, 101000);
        assert!(caches_of(&p).is_empty() && p.notes.iter().any(|n| n.reason.contains("maps no host id")));
    }
}
