//! The decision: what to mount, where, how big. A pure function of the spec,
//! the host config and the host's RAM; no syscalls and no I/O here, so every
//! decision is unit-tested without root.
//!
//! # Entry points
//!
//! | When | Use |
//! |---|---|
//! | All the facts are at hand; nothing of the image is read (NRI, `explain --manifest`) | [`plan_for`] |
//! | The executor can read the image (the hook, the spec executor, `explain`) | [`begin`], then [`finish`] with the image's answers |
//!
//! Given the same facts both make the same plan; `begin`/`finish` only let
//! the executor answer the questions `HOME`'s step asks of the image
//! ([`Question`]).
//!
//! # Steps
//!
//! The plan is made by named steps, each in its own file with its own
//! tests: [`enable`] (does the hook act, may it, who owns the mounts),
//! [`sizes`] (bytes for `/tmp` and `/dev/shm` and where they came from),
//! [`temp_dirs`] (the temp dirs, what the spec already mounts, nesting),
//! [`shm`] (grow, mount fresh, or leave `/dev/shm`) and `home` (`HOME`'s
//! caches). This file composes them; `decision` holds a plan in the
//! making between `begin` and `finish`. The [`Plan`] carries every mount
//! whole (size, inodes, mode, attributes, owner, subdirectories), so the
//! executors (the hook, the spec executor, NRI, `explain`) only read it. The
//! data is [`model`], what it is made from [`facts`]; `landing` is the rule
//! for where a path lands in the container's final layout, which every
//! executor applies. The tests share their helpers in `fixtures`.

mod decision;
mod enable;
mod facts;
#[cfg(test)]
pub(crate) mod fixtures;
mod home;
pub(crate) mod landing;
mod model;
pub(crate) mod report;
mod shm;
mod sizes;
mod temp_dirs;

use std::collections::HashMap;

use crate::oci::Spec;

pub use decision::{Decision, Partial};
use decision::{Ground, Made};
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

/// Entry point for a plan made in one go, reading nothing of the image:
/// the plan for one container as far as `user` tells (NRI and
/// `explain --manifest`), from the spec, the state's annotations (the
/// hook's; none elsewhere), the host config and the host's facts. A plan
/// that needs the image's answer keeps its question ([`Plan::question`])
/// and plans `HOME` as unknown.
///
/// # Errors
/// Invalid annotations, or a container enabled for the hook that names no
/// rootfs.
pub fn plan_for(
    spec: &Spec,
    state_annotations: Option<&HashMap<String, String>>,
    host_config: &HostConfig,
    host: HostFacts,
    user: &UserFacts,
) -> Result<Plan, PlanError> {
    Ok(start(spec, state_annotations, host_config, host.ram, user)?.unanswered(user))
}

/// Entry point for an executor that reads the image, first half: the plan,
/// or the part of it made before `HOME` needs the image's answer
/// ([`Decision::Asks`]), which [`finish`] completes. Nothing is planned twice.
///
/// # Errors
/// As [`plan_for`].
pub fn begin<'a>(
    spec: &'a Spec,
    state_annotations: Option<&'a HashMap<String, String>>,
    host_config: &'a HostConfig,
    host: HostFacts,
    user: &UserFacts,
) -> Result<Decision<'a>, PlanError> {
    start(spec, state_annotations, host_config, host.ram, user)
}

/// Entry point for an executor that reads the image, second half: finishes
/// `decision`, begun with `user`. While it asks what only the image can say
/// ([`Partial::question`]: the passwd entry, then what the image holds at
/// the home), `read` answers into the facts and the part already made is
/// finished with them. At most two reads; a decision that still asks after
/// them is finished with its question open.
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

/// Every step up to `HOME`'s, made once, then `HOME`'s.
fn start<'a>(
    spec: &'a Spec,
    state_annotations: Option<&'a HashMap<String, String>>,
    host_config: &'a HostConfig,
    host_ram: crate::size::Bytes,
    user: &UserFacts,
) -> Result<Decision<'a>, PlanError> {
    let ground = Ground { spec, state_annotations, host_config, host_ram };
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
            nr_inodes: inputs.host_config.nr_inodes,
            mode: TMPFS_MODE,
            nosuid: true,
            nodev: true,
            noexec: inputs.host_config.noexec,
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
        nr_inodes: inputs.host_config.nr_inodes,
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
    use serde_json::json;

    use super::fixtures::{base, plan};
    use super::*;

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
    fn spec_mounts_are_carried_in_order_with_ours_marked() {
        let mut c = base();
        c["mounts"].as_array_mut().unwrap().push(
            json!({"destination": "/run/tmp/", "type": "tmpfs", "source": "oci-tmpfs-hook", "options": []}),
        );
        let p = plan(&c);
        let got: Vec<(&str, bool)> = p.spec_mounts.iter().map(|m| (m.dest.as_str(), m.ours)).collect();
        assert_eq!(got, [("/proc", false), ("/dev", false), ("/dev/shm", false), ("/run/tmp", true)]);
    }
}
