//! Which executor carries the plan's temp targets, and at which stage: one
//! pure decision, from the plan, the wrapper's mode, the runtime's version
//! and the other parties' hooks in the spec. The wrapper (both modes),
//! `inject --mode spec` and `explain` all take it from [`executor`], so what
//! `explain` says is what the wrapper writes. Whether each target may be
//! mounted at all is the rootfs check's ([`super::host`]); nothing here
//! reads a file.

use std::path::Path;

use serde_json::Value;

use crate::host_config::Mode;
use crate::plan::{Action, Plan};
use crate::stage::Stage;

use super::edit;

/// What the executor is decided from, besides the plan.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Facts<'a> {
    /// The wrapper's executor (the host config's `mode`).
    pub mode: Mode,
    /// Why the runtime cannot be trusted with our temp-target mounts, when
    /// it cannot ([`crate::wrapper::real_runtime::spec_unsafe`], docs/design.md#runtimes).
    pub spec_unsafe: Option<&'a str>,
    /// Other parties' runtime-namespace hooks in the spec
    /// ([`foreign_runtime_hooks`]).
    pub foreign: &'a [String],
}

/// Who mounts the temp targets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Executor {
    /// The spec executor: tmpfs entries in `config.json`.
    Spec,
    /// Our hook, added to `config.json` at `stage`, for `why`.
    Hook { stage: Stage, why: String },
}

/// The executor of `plan`'s temp targets under `facts`:
/// - in hook mode, the hook, at [`hook_stage`];
/// - in spec mode, the hook at `createContainer` when another party's
///   runtime-namespace hook is in the spec (a spec tmpfs would hide what it
///   writes into the image's temp dir: docs/design.md#vendor-hooks-spec);
///   else the hook at `prestart` when a temp dir is nested in another one
///   (no mount entry can make a directory inside a fresh tmpfs) or the
///   runtime cannot be trusted with our mounts (docs/design.md#runtimes);
///   else the spec.
///
/// A plan with no temp target is carried by the spec in spec mode (its
/// `/dev/shm` always is).
pub(crate) fn executor(plan: &Plan, facts: &Facts<'_>) -> Executor {
    if facts.mode == Mode::Hook {
        let why = match facts.foreign.first() {
            Some(first) => format!(
                "mode = \"hook\"; at createContainer, after another party's hook in the runtime's namespaces ({first})"
            ),
            None => "mode = \"hook\"".to_string(),
        };
        return Executor::Hook { stage: hook_stage(facts.foreign), why };
    }
    let temp = plan.actions.iter().any(|a| matches!(a, Action::MountTmpfs { .. }));
    if !temp {
        return Executor::Spec;
    }
    let mut reasons = Vec::new();
    if let Some(first) = facts.foreign.first() {
        reasons.push(format!(
            "the spec runs another party's hook in the runtime's namespaces ({first}), whose writes a spec tmpfs on a temp dir would hide"
        ));
    }
    if !edit::expressible(plan) {
        reasons.push("a temp dir nested in another one needs a directory in the fresh tmpfs".to_string());
    }
    if let Some(why) = facts.spec_unsafe {
        reasons.push(why.to_string());
    }
    if reasons.is_empty() {
        return Executor::Spec;
    }
    Executor::Hook { stage: hook_stage(facts.foreign), why: reasons.join("; ") }
}

/// The stage our hook is added at: `createContainer` when the spec carries
/// another party's runtime-namespace hooks (ours then runs after theirs and
/// copies up what they wrote: docs/design.md#vendor-hooks-spec), else
/// `prestart`.
pub(crate) fn hook_stage(foreign: &[String]) -> Stage {
    if foreign.is_empty() {
        Stage::Prestart
    } else {
        Stage::CreateContainer
    }
}

/// The paths of other parties' hooks that run in the runtime's namespaces
/// (`prestart`, `createRuntime`) in a spec's `hooks` member: a GPU vendor's
/// hook there may write the container's `/tmp` through the host's view of
/// the rootfs, under any tmpfs the spec mounts there, which hides its file
/// (docs/design.md#vendor-hooks). Ours (`ours`, the hook's path) and
/// Docker's `libnetwork-setkey` (it sets a network key, and writes no file
/// of the rootfs) do not count.
pub(crate) fn foreign_runtime_hooks(hooks: &Value, ours: &Path) -> Vec<String> {
    let ours = ours.display().to_string();
    [Stage::Prestart, Stage::CreateRuntime]
        .iter()
        .filter_map(|stage| hooks.get(stage.as_str()).and_then(Value::as_array))
        .flatten()
        .filter(|h| !is_libnetwork_setkey(h))
        .filter_map(|h| h.get("path").and_then(Value::as_str))
        .filter(|path| *path != ours)
        .map(String::from)
        .collect()
}

/// Docker's `libnetwork-setkey` prestart hook (`/proc/PID/exe` of dockerd):
/// named in `args[0]` by Docker 20.10 (`libnetwork-setkey -exec-root=...
/// ID NETCTRL`, its `daemon/oci_linux.go`; the wrapper's log of a Docker
/// 20.10.24 start named `/proc/PID/exe` as another party's hook before this
/// was read), in `args[1]` as well by later ones.
fn is_libnetwork_setkey(hook: &Value) -> bool {
    ["/args/0", "/args/1"]
        .iter()
        .any(|p| hook.pointer(p).and_then(Value::as_str) == Some("libnetwork-setkey"))
        && hook
            .get("path")
            .and_then(Value::as_str)
            .is_some_and(|p| p.starts_with("/proc/") && p.ends_with("/exe"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::fixtures::{mount, tmpfs};
    use serde_json::json;

    const OURS: &str = "/usr/local/bin/oci-tmpfs-hook";

    fn plan(temp: &[&str]) -> Plan {
        let mut p = Plan { enabled: true, ..Plan::default() };
        // "/tmp/job" after "/tmp": a directory made inside /tmp's tmpfs.
        for t in temp {
            if let Some(Action::MountTmpfs { target, subdirs, .. }) = p.actions.last_mut() {
                if let Some(rest) = t.strip_prefix(&format!("{}/", target.as_str())) {
                    subdirs.push(rest.to_string());
                    continue;
                }
            }
            p.actions.push(mount(t, tmpfs(1 << 20, None)));
        }
        p
    }

    #[test]
    fn foreign_runtime_hooks_are_other_parties_at_prestart_and_create_runtime() {
        let hooks = json!({
            "prestart": [
                {"path": OURS, "args": ["oci-tmpfs-hook", "hook", "--stage", "prestart"]},
                {"path": "/proc/1/exe", "args": ["libnetwork-setkey", "libnetwork-setkey", "-exec-root=/run/docker"]},
                {"path": "/proc/2/exe", "args": ["libnetwork-setkey", "-exec-root=/var/run/docker", "abc", "def"]},
                {"path": "/usr/bin/nvidia-container-runtime-hook", "args": ["nvidia-container-runtime-hook", "prestart"]}
            ],
            "createRuntime": [{"path": "/usr/bin/vendor", "args": ["vendor"]}],
            "createContainer": [{"path": "/usr/bin/nvidia-cdi-hook", "args": ["nvidia-cdi-hook", "update-ldcache"]}]
        });
        assert_eq!(
            foreign_runtime_hooks(&hooks, Path::new(OURS)),
            ["/usr/bin/nvidia-container-runtime-hook", "/usr/bin/vendor"]
        );
        assert!(foreign_runtime_hooks(&json!({}), Path::new(OURS)).is_empty());
        assert!(foreign_runtime_hooks(&Value::Null, Path::new(OURS)).is_empty());
        let cc_only = json!({"createContainer": [{"path": "/usr/bin/nvidia-cdi-hook"}]});
        assert!(foreign_runtime_hooks(&cc_only, Path::new(OURS)).is_empty());
    }

    #[test]
    fn the_executor_table() {
        let vendor = vec!["/usr/bin/vendor".to_string()];
        let old = Some("runc 1.1.5 chmods a tmpfs mountpoint by path");
        let spec = Mode::Spec;
        let hook = Mode::Hook;
        let (pre, cc) = (Some(Stage::Prestart), Some(Stage::CreateContainer));
        // name, mode, temp targets, spec_unsafe, foreign hooks, the stage handed to.
        type Case<'a> = (&'a str, Mode, &'a [&'a str], Option<&'a str>, &'a [String], Option<Stage>);
        let cases: [Case<'_>; 13] = [
            ("spec: nothing to hand over", spec, &["/tmp"], None, &[], None),
            ("spec: an untrusted runtime: prestart", spec, &["/tmp"], old, &[], pre),
            ("spec: a vendor's runtime hook: createContainer", spec, &["/tmp"], None, &vendor, cc),
            ("spec: both: createContainer", spec, &["/tmp"], old, &vendor, cc),
            ("spec: nested temp dirs: prestart", spec, &["/tmp", "/tmp/job"], None, &[], pre),
            ("spec: nested, and a vendor: createContainer", spec, &["/tmp", "/tmp/job"], None, &vendor, cc),
            ("spec: no temp target, a vendor: the spec", spec, &[], None, &vendor, None),
            ("spec: no temp target, untrusted runtime: the spec", spec, &[], old, &[], None),
            ("hook: prestart", hook, &["/tmp"], None, &[], pre),
            ("hook: a vendor: createContainer", hook, &["/tmp"], None, &vendor, cc),
            ("hook: untrusted runtime: prestart", hook, &["/tmp"], old, &[], pre),
            ("hook: no temp target: still the hook", hook, &[], None, &[], pre),
            ("hook: no temp target, a vendor: createContainer", hook, &[], None, &vendor, cc),
        ];
        for (name, mode, temp, spec_unsafe, foreign, want) in cases {
            let facts = Facts { mode, spec_unsafe, foreign };
            let got = executor(&plan(temp), &facts);
            let stage = match &got {
                Executor::Spec => None,
                Executor::Hook { stage, .. } => Some(*stage),
            };
            assert_eq!(stage, want, "{name}: {got:?}");
        }
        let facts = Facts { mode: spec, spec_unsafe: old, foreign: &vendor };
        let Executor::Hook { why, .. } = executor(&plan(&["/tmp"]), &facts) else { panic!("the hook") };
        assert!(why.contains("/usr/bin/vendor") && why.contains("runc 1.1.5"), "{why}");
    }
}
