//! `explain` against what an executor did. `explain --json` is asked about
//! a bundle just before an executor runs it, as that executor will see it
//! (the same host config, runtime and mode); after the run, the
//! container's tmpfs of ours must sit at exactly the destinations
//! `explain` gave, and a spec executor's `config.json` must hold exactly
//! the entries and hook `explain` said it would. The suites that run
//! hostile layouts and `HOME`s through real containers take this check on
//! every run, so a rule that `explain` missed fails there.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use serde_json::Value;

use super::bundle::{hook_bin, Runtime, Via};
use super::process::{ok, which};

/// The `source` of every tmpfs of ours.
const OURS: &str = "oci-tmpfs-hook";

/// What `explain --json` said of a bundle before `via` ran it.
pub struct Explained {
    pub doc: Value,
    via: Via,
}

/// `explain --json` on the bundle `dir` as it stands, for `via` running
/// it with `rt` under the host config `config`: the wrapper's mode for the
/// wrapper and `inject --mode spec`, hook mode for our hook. `None` for
/// [`Via::Bare`]: nothing of ours runs.
pub fn explain_for(dir: &Path, config: &Path, rt: Runtime, via: Via) -> Option<Explained> {
    let mode = match via {
        Via::Bare => return None,
        Via::Hook(_) => "hook",
        Via::InjectSpec => "spec",
        Via::Wrapper(mode) => mode,
    };
    let out = ok(Command::new(hook_bin())
        .args(["explain", "--json", "--mode", mode, "--config"])
        .arg(config)
        .arg("--runtime")
        .arg(which(rt.bin()))
        .arg("--bundle")
        .arg(dir));
    let doc: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("explain --json: {e}: {out}"));
    Some(Explained { doc, via })
}

impl Explained {
    /// Each temp target's route.
    fn targets(&self) -> Vec<Value> {
        match self.doc["targets"].as_array() {
            Some(t) => t.clone(),
            // No plan to carry out (a writable root): no target.
            None if self.doc["wrapper"].is_null() => Vec::new(),
            None => panic!("explain judged no target against the rootfs: {}", self.doc),
        }
    }

    /// The destinations `explain` gave a tmpfs of ours, by the executor
    /// `by` (`spec`, `hook`) or by either.
    fn destinations(&self, by: Option<&str>) -> BTreeSet<String> {
        self.targets()
            .iter()
            .filter(|t| t["executor"] != "none" && by.is_none_or(|by| t["executor"] == by))
            .map(|t| {
                let d = t["destination"].as_str();
                d.unwrap_or_else(|| panic!("a route without a destination: {t}")).to_string()
            })
            .collect()
    }

    /// Asserts the run did what `explain` said: `mounts` (the container's
    /// mount table as it printed it) holds tmpfs of ours, `/dev/shm`
    /// aside, at exactly `explain`'s destinations; for a spec executor,
    /// `config` (`config.json` as the runtime read it) holds our entries
    /// at exactly its spec routes, and our hook only where it said the hook.
    pub fn assert_did(&self, mounts: &[super::MountInfo], config: &Value, case: &str) {
        let said = self.destinations(None);
        let did: BTreeSet<String> = mounts
            .iter()
            .filter(|m| m.source == OURS && m.fstype == "tmpfs" && m.mount_point != "/dev/shm")
            .map(|m| m.mount_point.clone())
            .collect();
        assert_eq!(
            did, said,
            "{case}: our tmpfs in the container against explain ({:?}): {}",
            self.via, self.doc
        );
        if matches!(self.via, Via::Hook(_)) {
            return;
        }
        let entries: BTreeSet<String> = config["mounts"]
            .as_array()
            .unwrap_or_else(|| panic!("{case}: config.json has no mounts: {config}"))
            .iter()
            .filter(|m| m["source"] == OURS && m["destination"] != "/dev/shm")
            .map(|m| m["destination"].as_str().expect("a mount's destination").to_string())
            .collect();
        let ours = hook_bin().display().to_string();
        let stages: BTreeSet<String> = config["hooks"]
            .as_object()
            .into_iter()
            .flatten()
            .filter(|(_, list)| list.as_array().is_some_and(|l| l.iter().any(|h| h["path"] == ours.as_str())))
            .map(|(stage, _)| stage.clone())
            .collect();
        let wrapper = &self.doc["wrapper"];
        let hook: BTreeSet<String> = match wrapper["executor"].as_str() {
            Some("hook") => [wrapper["stage"].as_str().expect("the hook's stage").to_string()].into(),
            _ => BTreeSet::new(),
        };
        assert_eq!(
            (entries, stages),
            (self.destinations(Some("spec")), hook),
            "{case}: config.json's entries and hook of ours against explain ({:?}): {}",
            self.via,
            self.doc
        );
    }
}
