//! The spec executor, run on a bundle by the runtime wrapper (at `create`,
//! where the rootfs is prepared) and by `inject --mode spec`: plan from the
//! bundle's `config.json` ([`plan::begin`], [`plan::finish`] with the
//! rootfs' answers: [`host::answer`]), check every temp target
//! against the rootfs by fd ([`host`]), write the mounts into `config.json`
//! ([`edit`], pure), grow an engine-made `/dev/shm` on the host
//! ([`crate::sys::engine_shm::grow`]). A plan that needs a directory inside
//! a fresh tmpfs (`TMPDIR=/tmp/job`) gets the hook instead.

pub mod bundle;
pub(crate) mod edit;
pub(crate) mod host;
pub(crate) mod route;

use std::path::Path;

use crate::host_config::{HostConfig, Mode};
use crate::input;
use crate::plan;
use crate::stage::Stage;
use crate::sys::{engine_shm, SysError};
use bundle::{BundleError, HookEntry};

/// What the edit did, for the caller to print or log.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Outcome {
    /// Whether `config.json` changed.
    pub changed: bool,
    /// One line per effect.
    pub done: Vec<String>,
    /// What was left alone.
    pub notes: Vec<plan::Note>,
    /// What `HOME`'s caches got ([`plan::HomeWay::line`]), for `inject` to
    /// print: the wrapper logs it with the plan.
    pub home: Option<String>,
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
    Sys(#[from] SysError),
    #[error(transparent)]
    Shape(#[from] edit::ShapeError),
}

/// What the wrapper knows of the call and the runtime, besides the bundle.
pub(crate) struct Launch<'a> {
    /// The container's id, from the runtime's arguments.
    pub id: Option<&'a str>,
    /// What the real runtime may be given (docs/design.md#runtimes): where
    /// it cannot be trusted with our temp-target mounts, or cannot copy a
    /// directory up, the hook carries them. Asked only for a plan with
    /// mounts to write: a bundle already edited, or one with nothing to do,
    /// is handed on without it.
    pub runtime: &'a dyn Fn() -> Verdict,
}

/// What the real runtime may be given (docs/design.md#runtimes), as the
/// wrapper finds it from its version ([`crate::wrapper::real_runtime`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Verdict {
    /// Why it cannot be given our temp-target mounts at all.
    pub spec_unsafe: Option<String>,
    /// Why it cannot be given a directory to copy up.
    pub no_copy_up: Option<String>,
}

/// Carries out the plan for the bundle `dir` in its `config.json`. `hook`
/// is the entry added when the plan needs the hook (none: left alone).
///
/// # Errors
/// The bundle cannot be read or written ([`SpecError::Bundle`]), or planning,
/// the rootfs check or the shm growth failed.
pub(crate) fn carry_out(
    dir: &Path,
    host_config: &HostConfig,
    hook: Option<&HookEntry>,
    cx: &Launch<'_>,
) -> Result<Outcome, SpecError> {
    let mut outcome = Outcome::default();
    outcome.changed = bundle::edit(dir, |config| in_spec(config, dir, host_config, hook, cx, &mut outcome))?;
    Ok(outcome)
}

/// Adds `entry` (a `prestart` entry) to the bundle `dir` at the stage the
/// wrapper's hook mode uses ([`route::executor`] in hook mode: after another
/// party's runtime-namespace hooks). Returns whether the file changed.
///
/// # Errors
/// As [`bundle::inject`].
pub(crate) fn inject_hook(dir: &Path, entry: &HookEntry) -> Result<bool, BundleError> {
    bundle::edit(dir, |config| {
        let path = config.path.to_path_buf();
        let hooks = config.tree(&["hooks"])?;
        let stage = route::hook_stage(&route::foreign_runtime_hooks(&hooks["hooks"], &entry.path));
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

/// Whether `config.json` (`bytes`) holds this executor's finished edit
/// already: a tmpfs entry of ours (source [`edit::SOURCE`]), or our hook
/// `hook` at a stage this executor adds it at (`prestart`,
/// `createContainer`; an engine's hooks dir puts ours at `createRuntime`,
/// which is no edit of ours). An edit is written whole (one atomic replace
/// of the file), so a bundle the wrapper edited before (a runtime's `create`
/// called again on it, `inject --mode spec` then the wrapper) is handed to
/// the runtime at once, unplanned, and without the OCI spec's parser: only
/// the `mounts` entries' type and source are read (docs/design.md#start-up).
fn finished(bytes: &[u8], hook: Option<&HookEntry>) -> bool {
    // Not UTF-8: not JSON, so no edit of ours.
    let Ok(text) = std::str::from_utf8(bytes) else { return false };
    // A substring search (the standard library's two-way), not a compare at
    // every offset: this runs at every start.
    let holds = |value: &str| text.contains(&serde_json::to_string(value).expect("a string serialises"));
    if holds(edit::SOURCE) {
        #[derive(serde::Deserialize)]
        struct Mounts {
            mounts: Option<Vec<Mount>>,
        }
        #[derive(serde::Deserialize)]
        struct Mount {
            #[serde(rename = "type")]
            typ: Option<String>,
            source: Option<String>,
        }
        let ours = |m: &Mount| m.typ.as_deref() == Some("tmpfs") && m.source.as_deref() == Some(edit::SOURCE);
        if serde_json::from_slice::<Mounts>(bytes).is_ok_and(|c| c.mounts.iter().flatten().any(ours)) {
            return true;
        }
    }
    // Our hook's path in the bytes, then its `hooks` entry by value.
    let Some(path) = hook.map(|h| h.path.to_string_lossy().into_owned()) else { return false };
    if !holds(&path) {
        return false;
    }
    #[derive(serde::Deserialize)]
    struct Hooks {
        #[serde(default)]
        hooks: std::collections::HashMap<String, Vec<serde_json::Value>>,
    }
    serde_json::from_slice::<Hooks>(bytes).is_ok_and(|h| {
        [Stage::Prestart, Stage::CreateContainer]
            .iter()
            .filter_map(|stage| h.hooks.get(stage.as_str()))
            .flatten()
            .any(|e| e.get("path").and_then(serde_json::Value::as_str) == Some(&path))
    })
}

/// The lines for what the edit `edit` and the placing `placed` did.
fn tell(out: &mut Outcome, placed: &host::Placed, edit: &edit::Edit) {
    for (target, dest) in &placed.placed {
        let at = if target == dest { String::new() } else { format!(" at {dest}, where {target} resolves") };
        let copy = if placed.copy_up.contains(target) {
            ", which the runtime fills with the image's entries (tmpcopyup)"
        } else {
            ""
        };
        out.done.push(format!("wrote a tmpfs mount for {target}{at} into the spec{copy}"));
    }
    if edit.writable {
        out.done.push("made the spec's read-only /dev/shm writable".into());
    }
    if let Some((from, to)) = edit.raised {
        let from = from.map_or_else(|| "unsized".to_string(), |b| b.approx());
        out.done.push(format!("raised the spec's /dev/shm from {from} to {}", to.approx()));
    }
    out.done.extend(
        placed
            .chmodded
            .iter()
            .map(|(t, mode)| format!("made the mountpoint {t} mode {mode:o} for the runtime")),
    );
}

/// The plan for `spec` as the spec executor makes it, before the runtime
/// mounts anything: with the rootfs' `/etc/passwd` when `HOME` depends on
/// it, and what the image holds under `HOME`, read from `root` (none: no
/// `root.path`, the questions unanswered). `explain` plans through here too.
///
/// # Errors
/// Planning failed, or the rootfs could not be read to answer it.
pub(crate) fn plan_in(
    spec: &crate::oci::Spec,
    host_config: &HostConfig,
    host: plan::HostFacts,
    root: Option<&mut host::LazyRoot<'_>>,
) -> Result<plan::Plan, SpecError> {
    let user = plan::UserFacts::HOOK;
    let begun = plan::begin(spec, None, host_config, host, &user)?;
    match root {
        Some(root) => {
            plan::finish(begun, user, |q, user| host::answer(root, spec, q, user).map_err(SpecError::from))
        }
        None => Ok(begun.unanswered(&user)),
    }
}

/// The spec executor on one `config.json` value; returns whether it changed.
fn in_spec(
    config: &mut bundle::Config<'_>,
    dir: &Path,
    host_config: &HostConfig,
    hook: Option<&HookEntry>,
    cx: &Launch<'_>,
    out: &mut Outcome,
) -> Result<bool, SpecError> {
    if finished(config.bytes, hook) {
        log::debug!("config.json already holds this executor's edit: passed through as it is");
        return Ok(false);
    }
    // The plan's view straight from the bytes; the JSON tree only when
    // there is something to write (docs/design.md#start-up).
    let parsed: crate::oci::Spec = match serde_json::from_slice(config.bytes) {
        Ok(spec) => {
            config.parsed();
            spec
        }
        Err(e) => {
            config.tree(&[])?; // not a JSON object: the bundle's error
            return Err(SpecError::Spec(e));
        }
    };
    let host = input::host_facts()?;
    let rootfs = input::rootfs_path(&parsed, dir);
    let mut root = rootfs.as_deref().map(host::LazyRoot::new);
    let plan = plan_in(&parsed, host_config, host, root.as_mut())?;
    log::debug!("{}", plan.why);
    out.home = plan.home.as_ref().map(plan::HomeWay::line);
    if !plan.has_work() {
        crate::process::logger::emit(crate::plan::report::decision(&plan));
        return Ok(false);
    }
    let verdict = (cx.runtime)();
    let path = config.path.to_path_buf();
    let mut changed = false;
    let foreign = match hook {
        Some(h) => route::foreign_runtime_hooks(&config.tree(&["hooks"])?["hooks"], &h.path),
        None => Vec::new(),
    };
    let facts =
        route::Facts { mode: Mode::Spec, spec_unsafe: verdict.spec_unsafe.as_deref(), foreign: &foreign };
    let lazy = root.as_mut().expect("a plan with actions has a root.path");
    let placed = match host::carrier(&plan, &facts, verdict.no_copy_up.as_deref(), move || lazy.root())? {
        host::Carrier::Spec(placed) => {
            crate::process::logger::emit(crate::plan::report::decision(&plan));
            placed
        }
        host::Carrier::Hook { stage, why, .. } => {
            let Some(entry) = hook else {
                crate::process::logger::emit(crate::plan::report::decision(&plan));
                return Ok(false);
            };
            // The hook plans again from this config.json and logs what it
            // leaves alone: warned once, by it.
            log::debug!("the plan's notes are the hook's to log");
            out.hooked = true;
            let at = if stage == Stage::Prestart { String::new() } else { format!(" at {stage}") };
            out.done.push(format!("the hook carries the temp targets: {why}; added the hook{at}"));
            changed |= bundle::add_hook(config.tree(&["hooks"])?, stage, &entry_at(entry, stage))
                .map_err(|what| BundleError::Shape { path: path.clone(), what })?;
            host::Placed::default()
        }
    };
    let edit = edit::put_mounts(config.tree(&["mounts"])?, &plan, |t| placed.destination(t), host.ram)?;
    tell(out, &placed, &edit);
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

    #[test]
    fn hook_mode_goes_after_a_vendor_runtime_hook() {
        let stage = |hooks: serde_json::Value| {
            route::hook_stage(&route::foreign_runtime_hooks(&hooks, Path::new(OURS)))
        };
        assert_eq!(stage(json!({"createRuntime": [{"path": "/usr/bin/vendor"}]})), Stage::CreateContainer);
        assert_eq!(stage(json!({"prestart": [{"path": OURS}]})), Stage::Prestart);
        assert_eq!(stage(json!({})), Stage::Prestart);
    }

    /// The finished edit is recognised from the mounts' type and source
    /// alone, or from our hook at a stage of ours; anything else is planned.
    #[test]
    fn finished_reads_only_what_marks_the_edit() {
        let hook = HookEntry::for_stage(Path::new(OURS), Stage::Prestart, None);
        let is = |v: serde_json::Value| finished(v.to_string().as_bytes(), Some(&hook));
        let ours = json!({"destination": "/tmp", "type": "tmpfs", "source": edit::SOURCE});
        assert!(is(json!({"mounts": [{"destination": "/proc", "type": "proc"}, ours]})));
        let pretty = serde_json::to_string_pretty(&json!({"process": {}, "mounts": [ours]})).unwrap();
        assert!(finished(pretty.as_bytes(), None));
        assert!(!is(json!({"mounts": [{"destination": "/tmp", "type": "bind", "source": edit::SOURCE}]})));
        assert!(!is(json!({"mounts": [{"destination": "/tmp", "type": "tmpfs", "source": "tmpfs"}]})));
        assert!(!is(json!({"mounts": null})));
        assert!(!is(json!({"process": {"args": [edit::SOURCE]}})));
        assert!(!finished(b"not json \"oci-tmpfs-hook\"", Some(&hook)));
        assert!(is(json!({"hooks": {"prestart": [{"path": OURS}]}})));
        assert!(is(json!({"hooks": {"createContainer": [{"path": OURS}]}})));
        assert!(!is(json!({"hooks": {"createRuntime": [{"path": OURS}]}})));
    }

    /// The runtime's version (a file read, or a process run once) is asked
    /// only for a plan with mounts to write: not for a bundle edited before,
    /// nor for one with nothing to do (a writable root).
    #[test]
    fn the_runtime_is_asked_only_for_mounts_to_write() {
        let dir = crate::files::temp_dir("spec-ask");
        std::fs::create_dir(dir.join("rootfs")).unwrap();
        let ask = || -> Verdict { panic!("the runtime's version was asked") };
        let launch = Launch { id: None, runtime: &ask };
        let ours = json!({"destination": "/tmp", "type": "tmpfs", "source": edit::SOURCE});
        for config in [
            json!({"ociVersion": "1.0.2", "root": {"path": "rootfs", "readonly": true}, "mounts": [ours]}),
            json!({"ociVersion": "1.0.2", "root": {"path": "rootfs", "readonly": false}, "mounts": []}),
        ] {
            std::fs::write(dir.join("config.json"), config.to_string()).unwrap();
            let out = carry_out(&dir, &HostConfig::default(), None, &launch).unwrap();
            assert!(!out.changed, "{config}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
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
