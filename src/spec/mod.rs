//! The spec executor, run on a bundle by the runtime wrapper (at `create`,
//! where the rootfs is prepared) and by `inject --mode spec`: plan from the
//! bundle's `config.json` ([`plan::plan_for`]), check every temp target
//! against the rootfs by fd ([`host`]), write the mounts into `config.json`
//! ([`edit`], pure), grow an engine-made `/dev/shm` on the host
//! ([`crate::hook::engine_shm::grow`]). A plan that needs a directory inside
//! a fresh tmpfs (`TMPDIR=/tmp/job`) gets the hook instead.

pub(crate) mod edit;
pub(crate) mod host;

use std::path::Path;

use serde_json::Value;

use crate::bundle::{self, BundleError, HookEntry};
use crate::hook::{engine_shm, ApplyError};
use crate::input;
use crate::plan;
use crate::settings::Settings;
use crate::stage::Stage;

/// What the edit did, for the caller to print or log.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Outcome {
    /// Whether `config.json` changed.
    pub changed: bool,
    /// One line per effect.
    pub done: Vec<String>,
    /// What was left alone.
    pub notes: Vec<plan::Note>,
    /// The plan needs the hook, which was added instead.
    pub hooked: bool,
}

/// What can stop the spec executor.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SpecError {
    #[error(transparent)]
    Bundle(#[from] BundleError),
    #[error("config.json is not an OCI spec")]
    Spec(#[source] serde_json::Error),
    #[error(transparent)]
    Input(#[from] input::InputError),
    #[error(transparent)]
    Plan(#[from] plan::PlanError),
    #[error(transparent)]
    Apply(#[from] ApplyError),
    #[error(transparent)]
    Shape(#[from] edit::ShapeError),
}

/// What the wrapper knows of the call and the runtime, besides the bundle.
#[derive(Debug, Default)]
pub(crate) struct Launch<'a> {
    /// The container's id, from the runtime's arguments.
    pub id: Option<&'a str>,
    /// Why the real runtime cannot be trusted with our temp-target mounts
    /// (docs/design.md#runtimes), when it cannot: the hook carries them.
    pub temp_to_hook: Option<&'a str>,
}

/// Carries out the plan for the bundle `dir` in its `config.json`. `hook`
/// is the entry added when the plan needs the hook (none: left alone).
///
/// # Errors
/// The bundle cannot be read or written ([`SpecError::Bundle`]), or planning,
/// the rootfs check or the shm growth failed.
pub(crate) fn carry_out(
    dir: &Path,
    settings: &Settings,
    hook: Option<&HookEntry>,
    cx: &Launch<'_>,
) -> Result<Outcome, SpecError> {
    let mut outcome = Outcome::default();
    outcome.changed = bundle::edit(dir, |config| in_spec(config, dir, settings, hook, cx, &mut outcome))?;
    Ok(outcome)
}

/// Why the plan's temp targets go to the hook, if they do: a temp dir
/// nested in another one, or a runtime that cannot be trusted with them
/// (`temp_to_hook`, docs/design.md#runtimes).
pub(super) fn needs_hook(plan: &plan::Plan, temp_to_hook: Option<&str>) -> Option<String> {
    let temp = plan.actions.iter().any(|a| matches!(a, plan::Action::MountTmpfs { .. }));
    if !edit::expressible(plan) {
        return Some("a temp dir nested in another one needs a directory in the fresh tmpfs".into());
    }
    temp_to_hook.filter(|_| temp).map(String::from)
}

/// The paths of other parties' hooks that run in the runtime's namespaces
/// (`prestart`, `createRuntime`): a GPU vendor's hook there may write the
/// container's `/tmp` through the host's view of the rootfs, under any tmpfs
/// the spec mounts there, which hides its file (docs/design.md#vendor-hooks).
/// Ours (`ours`, the hook's path) and Docker's `libnetwork-setkey` (it sets
/// a network key, and writes no file of the rootfs) do not count.
pub(super) fn foreign_runtime_hooks(config: &Value, ours: &Path) -> Vec<String> {
    let ours = ours.display().to_string();
    [Stage::Prestart, Stage::CreateRuntime]
        .iter()
        .filter_map(|stage| config.pointer(&format!("/hooks/{stage}")).and_then(Value::as_array))
        .flatten()
        .filter(|h| h.pointer("/args/1").and_then(Value::as_str) != Some("libnetwork-setkey"))
        .filter_map(|h| h.get("path").and_then(Value::as_str))
        .filter(|path| *path != ours)
        .map(String::from)
        .collect()
}

/// Whether the temp targets go to the hook, why, and at which stage: the
/// hook at `createContainer` when other parties' runtime-namespace hooks
/// are in the spec (it runs after them, and copies up what they wrote:
/// docs/design.md#vendor-hooks), else at `prestart` when [`needs_hook`]
/// says so.
pub(super) fn handover(
    plan: &plan::Plan,
    temp_to_hook: Option<&str>,
    foreign: &[String],
) -> Option<(String, Stage)> {
    let temp = plan.actions.iter().any(|a| matches!(a, plan::Action::MountTmpfs { .. }));
    let why = needs_hook(plan, temp_to_hook);
    match foreign.first() {
        Some(first) if temp => {
            let mut reason = format!(
                "the spec runs another party's hook in the runtime's namespaces ({first}), whose writes a spec tmpfs on a temp dir would hide"
            );
            if let Some(also) = why {
                reason = format!("{reason}; {also}");
            }
            Some((reason, Stage::CreateContainer))
        }
        _ => why.map(|w| (w, Stage::Prestart)),
    }
}

/// The stage the wrapper's hook mode adds our hook at: `createContainer`
/// when the spec carries another party's runtime-namespace hooks (after
/// them: docs/design.md#vendor-hooks-spec), else `prestart`.
pub(crate) fn hook_mode_stage(config: &Value, ours: &Path) -> Stage {
    if foreign_runtime_hooks(config, ours).is_empty() {
        Stage::Prestart
    } else {
        Stage::CreateContainer
    }
}

/// Adds `entry` (a `prestart` entry) to the bundle `dir` at
/// [`hook_mode_stage`]. Returns whether the file changed.
///
/// # Errors
/// As [`bundle::inject`].
pub(crate) fn inject_hook(dir: &Path, entry: &HookEntry) -> Result<bool, BundleError> {
    bundle::edit(dir, |config| {
        let path = config.path.to_path_buf();
        let hooks = config.tree(&["hooks"])?;
        let stage = hook_mode_stage(hooks, &entry.path);
        bundle::add_hook(hooks, stage, &entry_at(entry, stage))
            .map_err(|what| BundleError::Shape { path, what })
    })
}

/// `entry` registered at `stage` instead (its `--stage` argument).
fn entry_at(entry: &HookEntry, stage: Stage) -> HookEntry {
    let mut e = entry.clone();
    if let Some(i) = e.args.iter().position(|a| a == "--stage") {
        if let Some(v) = e.args.get_mut(i + 1) {
            *v = stage.as_str().to_string();
        }
    }
    e
}

/// The spec executor on one `config.json` value; returns whether it changed.
fn in_spec(
    config: &mut bundle::Config<'_>,
    dir: &Path,
    settings: &Settings,
    hook: Option<&HookEntry>,
    cx: &Launch<'_>,
    out: &mut Outcome,
) -> Result<bool, SpecError> {
    // The plan's view straight from the bytes; the JSON tree only when
    // there is something to write (docs/design.md#start-up).
    let parsed: crate::oci::Spec = match serde_json::from_slice(config.bytes) {
        Ok(spec) => spec,
        Err(e) => {
            config.tree(&[])?; // not a JSON object: the bundle's error
            return Err(SpecError::Spec(e));
        }
    };
    let host = input::host_facts()?;
    let plan = plan::plan_for(&parsed, None, settings, host)?;
    log::debug!("{}", plan.why);
    crate::logger::decision(&plan);
    if plan.actions.is_empty() {
        return Ok(false);
    }
    let path = config.path.to_path_buf();
    let mut changed = false;
    let foreign = match hook {
        Some(h) => foreign_runtime_hooks(config.tree(&["hooks"])?, &h.path),
        None => Vec::new(),
    };
    let placing = match handover(&plan, cx.temp_to_hook, &foreign) {
        Some(to_hook) => Err(to_hook),
        None => {
            let rootfs = input::rootfs_path(&parsed, dir).expect("a plan with actions has a root.path");
            match host::place_targets(&rootfs, &plan)? {
                host::Placing::Spec(placed) => Ok(placed),
                host::Placing::Hook(why) => Err((why, Stage::Prestart)),
            }
        }
    };
    let placed = match placing {
        Ok(placed) => placed,
        Err((why, stage)) => {
            let Some(entry) = hook else { return Ok(false) };
            out.hooked = true;
            let at = if stage == Stage::Prestart { String::new() } else { format!(" at {stage}") };
            out.done.push(format!("the hook carries the temp targets: {why}; added the hook{at}"));
            changed |= bundle::add_hook(config.tree(&["hooks"])?, stage, &entry_at(entry, stage))
                .map_err(|what| BundleError::Shape { path: path.clone(), what })?;
            host::Placed::default()
        }
    };
    let edit = edit::put_mounts(config.tree(&["mounts"])?, &plan, |t| placed.destination(t), host.ram)?;
    for (target, dest) in &placed.placed {
        let at = if target == dest { String::new() } else { format!(" at {dest}, where {target} resolves") };
        out.done.push(format!("wrote a tmpfs mount for {target}{at} into the spec"));
    }
    if edit.writable {
        out.done.push("made the spec's read-only /dev/shm writable".into());
    }
    if let Some((from, to)) = edit.raised {
        let from = from.map_or_else(|| "unsized".to_string(), |b| b.approx());
        out.done.push(format!("raised the spec's /dev/shm from {from} to {}", to.approx()));
    }
    out.done
        .extend(placed.chmodded.iter().map(|t| format!("made the mountpoint {t} mode 1777 for the runtime")));
    out.notes.extend(placed.refused.into_iter().map(|(_, n)| n));
    if let Some((source, tmpfs)) = &edit.host_shm {
        let ids = engine_shm::container_ids(cx.id, &parsed, None);
        match engine_shm::grow(Path::new(source), tmpfs.size.bytes, &ids)? {
            Ok(grew) => out.done.push(format!("{grew} (on the host, {source})")),
            Err(note) => out.notes.push(note),
        }
    }
    Ok(changed || !edit.added.is_empty() || edit.raised.is_some() || edit.writable)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const OURS: &str = "/usr/local/bin/oci-tmpfs-hook";

    fn plan(temp: bool) -> plan::Plan {
        let mut p = plan::Plan { enabled: true, ..plan::Plan::default() };
        if temp {
            p.actions.push(plan::Action::MountTmpfs {
                target: crate::target::validate("/tmp").unwrap(),
                origins: vec![plan::Origin::Default],
                tmpfs: plan::Tmpfs {
                    size: plan::Sizing {
                        bytes: crate::size::Bytes(1 << 20),
                        requested: "1Mi".into(),
                        from: plan::SizeFrom::Default,
                        basis: crate::size::Basis::Absolute,
                        basis_bytes: None,
                        capped: None,
                    },
                    nr_inodes: None,
                    mode: plan::TMPFS_MODE,
                    nosuid: true,
                    nodev: true,
                    noexec: false,
                    owner: None,
                    label: None,
                },
                subdirs: vec![],
            });
        }
        p
    }

    #[test]
    fn foreign_runtime_hooks_are_other_parties_at_prestart_and_create_runtime() {
        let config = json!({"hooks": {
            "prestart": [
                {"path": OURS, "args": ["oci-tmpfs-hook", "hook", "--stage", "prestart"]},
                {"path": "/proc/1/exe", "args": ["libnetwork-setkey", "libnetwork-setkey", "-exec-root=/run/docker"]},
                {"path": "/usr/bin/nvidia-container-runtime-hook", "args": ["nvidia-container-runtime-hook", "prestart"]}
            ],
            "createRuntime": [{"path": "/usr/bin/vendor", "args": ["vendor"]}],
            "createContainer": [{"path": "/usr/bin/nvidia-cdi-hook", "args": ["nvidia-cdi-hook", "update-ldcache"]}]
        }});
        assert_eq!(
            foreign_runtime_hooks(&config, Path::new(OURS)),
            ["/usr/bin/nvidia-container-runtime-hook", "/usr/bin/vendor"]
        );
        assert!(foreign_runtime_hooks(&json!({}), Path::new(OURS)).is_empty());
        let cc_only = json!({"hooks": {"createContainer": [{"path": "/usr/bin/nvidia-cdi-hook"}]}});
        assert!(foreign_runtime_hooks(&cc_only, Path::new(OURS)).is_empty());
    }

    #[test]
    fn handover_table() {
        let vendor = vec!["/usr/bin/vendor".to_string()];
        let old = Some("runc 1.1.5 chmods a tmpfs mountpoint by path");
        // name, a temp target, temp_to_hook, foreign hooks, the stage handed to.
        type Case<'a> = (&'a str, bool, Option<&'a str>, &'a [String], Option<Stage>);
        let cases: [Case<'_>; 6] = [
            ("nothing to hand over", true, None, &[], None),
            ("an old runc: prestart", true, old, &[], Some(Stage::Prestart)),
            ("a vendor's runtime hook: createContainer", true, None, &vendor, Some(Stage::CreateContainer)),
            ("both: createContainer", true, old, &vendor, Some(Stage::CreateContainer)),
            ("no temp target, a vendor: nothing", false, None, &vendor, None),
            ("no temp target, old runc: nothing", false, old, &[], None),
        ];
        for (name, temp, temp_to_hook, foreign, want) in cases {
            let got = handover(&plan(temp), temp_to_hook, foreign);
            assert_eq!(got.as_ref().map(|(_, s)| *s), want, "{name}: {got:?}");
        }
        let (why, _) = handover(&plan(true), old, &vendor).unwrap();
        assert!(why.contains("/usr/bin/vendor") && why.contains("runc 1.1.5"), "{why}");
    }

    #[test]
    fn hook_mode_goes_after_a_vendor_runtime_hook() {
        let vendor = json!({"hooks": {"createRuntime": [{"path": "/usr/bin/vendor"}]}});
        assert_eq!(hook_mode_stage(&vendor, Path::new(OURS)), Stage::CreateContainer);
        let ours = json!({"hooks": {"prestart": [{"path": OURS}]}});
        assert_eq!(hook_mode_stage(&ours, Path::new(OURS)), Stage::Prestart);
        assert_eq!(hook_mode_stage(&json!({}), Path::new(OURS)), Stage::Prestart);
    }

    #[test]
    fn entry_at_changes_only_the_stage() {
        let e = HookEntry::for_stage(Path::new(OURS), Stage::Prestart, Some(Path::new("/etc/x.toml")));
        let cc = entry_at(&e, Stage::CreateContainer);
        assert_eq!(
            cc.args,
            ["oci-tmpfs-hook", "hook", "--stage", "createContainer", "--config", "/etc/x.toml"]
        );
        assert_eq!(cc.path, e.path);
    }
}
