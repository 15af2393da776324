//! The plan carried out in the spec: the spec executor's pure part, next to
//! its checks by fd on the host ([`super::host`]).
//! A pure edit of `config.json` (a generic JSON value, so nothing the
//! typed view does not know is lost): a `tmpfs` entry in `mounts` per
//! temp target, for the runtime to mount with its own in-root resolution (as
//! it does for `docker run --tmpfs`), and `/dev/shm` raised in the spec, or
//! handed back to the caller when it is an engine-made tmpfs bound from the
//! host (that one is grown on the host, by fd, by
//! [`crate::sys::engine_shm::grow`]).
//!
//! Runtimes mount these inside the container's user namespace, where a fresh
//! tmpfs already belongs to the container's root, so no `uid=`/`gid=` is
//! written. Idempotent by construction: a second plan sees these entries as
//! the spec's own mounts and adds nothing. No I/O here.

use serde_json::{json, Map, Value};

use crate::plan::{Action, Plan, ShmSource, ShmWay, Tmpfs, SHM_PATH};
use crate::size::Bytes;

/// The `source` of the entries we write: names them in `mountinfo` as ours.
pub(crate) const SOURCE: &str = crate::names::MOUNT_SOURCE;

/// What the edit did, and what it leaves to the caller.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Edit {
    /// Destinations of the tmpfs entries added.
    pub added: Vec<String>,
    /// `/dev/shm`'s spec tmpfs raised: from (`None`: unsized), to.
    pub raised: Option<(Option<Bytes>, Bytes)>,
    /// An engine-made `/dev/shm` (its host path) to grow on the host to this.
    pub host_shm: Option<(String, Tmpfs)>,
    /// The spec's read-only `/dev/shm` entry was made writable.
    pub writable: bool,
}

/// Why the spec could not be edited: the document has an unexpected shape.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("config.json: {0} is not of the expected JSON type")]
pub(crate) struct ShapeError(&'static str);

/// Whether `plan` can be carried out in the spec alone. Directories nested
/// in a target (`TMPDIR=/tmp/job`) need a directory inside the fresh tmpfs,
/// which no mount entry can express: such a container takes the hook.
pub(crate) fn expressible(plan: &Plan) -> bool {
    plan.actions.iter().all(|a| !matches!(a, Action::MountTmpfs { subdirs, .. } if !subdirs.is_empty()))
}

/// Where the spec executor puts one temp target's tmpfs entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Dest {
    /// The in-root path to mount at: the target's real path.
    pub path: String,
    /// The runtime copies the directory's entries into the tmpfs
    /// (`tmpcopyup`: docs/design.md#tmpcopyup).
    pub copy_up: bool,
}

/// The mount option that has runc and crun copy a directory's entries into
/// the tmpfs mounted over it.
pub(crate) const TMPCOPYUP: &str = "tmpcopyup";

/// Carries out `plan` in `config`: a tmpfs entry for each temp target
/// that `destination` places (at the in-root path it gives: the target's
/// real path, with no symlink left for the runtime to follow; with
/// [`TMPCOPYUP`] where it says so), nothing for the others (left alone, or
/// left to the hook), and `/dev/shm`. `host_ram`
/// is what an unsized tmpfs has (half of it), so that it is never lowered.
///
/// The temp targets' entries go before every mount of the spec, in the
/// plan's order: a rename in the image after the check can lead one to
/// another directory when the runtime mounts it, and there every later spec
/// mount (a volume, `/proc`) lands on top of it, never under it
/// (docs/design.md#spec-race). A fresh `/dev/shm` goes last, after `/dev`.
///
/// # Errors
/// [`ShapeError`] when `mounts` or a `/dev/shm` entry has the wrong JSON type.
pub(crate) fn put_mounts(
    config: &mut Value,
    plan: &Plan,
    destination: impl Fn(&str) -> Option<Dest>,
    host_ram: Bytes,
) -> Result<Edit, ShapeError> {
    let mut edit = Edit::default();
    if plan.actions.is_empty() {
        return Ok(edit);
    }
    let mounts = config
        .as_object_mut()
        .ok_or(ShapeError("the document"))?
        .entry("mounts")
        .or_insert_with(|| json!([]))
        .as_array_mut()
        .ok_or(ShapeError("mounts"))?;
    let mut first = 0;
    for action in &plan.actions {
        match action {
            Action::MountTmpfs { target, tmpfs, .. } => {
                if let Some(dest) = destination(target.as_str()) {
                    let mut m = TmpfsMount::new(&dest.path, tmpfs);
                    if dest.copy_up {
                        m.options.insert(0, TMPCOPYUP.to_string());
                    }
                    mounts.insert(first, m.to_json());
                    first += 1;
                    edit.added.push(dest.path);
                }
            }
            Action::Shm { existing, way, writable, tmpfs } => {
                if *writable {
                    drop_read_only(mounts);
                    edit.writable = true;
                }
                shm(mounts, existing, *way, tmpfs, host_ram, &mut edit)?;
            }
        }
    }
    Ok(edit)
}

/// One tmpfs mount as a spec (or an NRI adjustment) spells it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct TmpfsMount {
    pub destination: String,
    /// `nosuid`, `nodev`, `noexec` as planned, `mode=`, `nr_inodes=`, `size=`.
    pub options: Vec<String>,
}

impl TmpfsMount {
    /// The mount of `tmpfs` at `destination`.
    pub(crate) fn new(destination: &str, tmpfs: &Tmpfs) -> TmpfsMount {
        TmpfsMount { destination: destination.to_string(), options: tmpfs.spec_options() }
    }

    /// Its `mounts` entry (type `tmpfs`, source [`SOURCE`]).
    pub(crate) fn to_json(&self) -> Value {
        json!({ "destination": self.destination, "type": "tmpfs", "source": SOURCE, "options": self.options })
    }
}

/// The fresh tmpfs mounts of `plan` but for the `refused` targets: the temp
/// targets, and `/dev/shm` when the spec has none. What an executor that can
/// only add mounts (the spec, an NRI adjustment) writes.
pub(crate) fn fresh_mounts(plan: &Plan) -> Vec<TmpfsMount> {
    plan.actions
        .iter()
        .filter_map(|a| match a {
            Action::MountTmpfs { target, tmpfs, .. } => Some(TmpfsMount::new(target.as_str(), tmpfs)),
            Action::Shm { way: ShmWay::Fresh, tmpfs, .. } => Some(TmpfsMount::new(SHM_PATH, tmpfs)),
            Action::Shm { .. } => None,
        })
        .collect()
}

/// What the spec executor would do with a plan, before any rootfs check:
/// for `explain`.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub(crate) struct Preview {
    /// False when the plan needs the hook (a directory inside a fresh tmpfs).
    pub expressible: bool,
    /// The tmpfs entries it would write.
    pub mounts: Vec<PreviewMount>,
    /// What it would do about `/dev/shm`, when anything.
    pub shm: Option<String>,
}

/// A [`TmpfsMount`] as `explain --json` shows it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub(crate) struct PreviewMount {
    pub destination: String,
    pub options: Vec<String>,
}

/// The [`Preview`] of `plan`.
pub(crate) fn preview(plan: &Plan) -> Preview {
    let mounts = fresh_mounts(plan)
        .into_iter()
        .map(|m| PreviewMount { destination: m.destination, options: m.options })
        .collect();
    let shm = plan.actions.iter().find_map(|a| match a {
        Action::Shm { way: ShmWay::Grow, existing: ShmSource::Bind { source }, tmpfs, .. } => Some(format!(
            "grows the engine's /dev/shm on the host ({source}) to {}",
            tmpfs.size.bytes.approx()
        )),
        Action::Shm { way: ShmWay::Grow, tmpfs, .. } => {
            Some(format!("raises the spec's /dev/shm tmpfs to {}", tmpfs.size.bytes.approx()))
        }
        _ => None,
    });
    Preview { expressible: expressible(plan), mounts, shm }
}

/// A mount entry for `tmpfs` at `destination`.
fn entry(destination: &str, tmpfs: &Tmpfs) -> Value {
    TmpfsMount::new(destination, tmpfs).to_json()
}

fn shm(
    mounts: &mut Vec<Value>,
    existing: &ShmSource,
    way: ShmWay,
    tmpfs: &Tmpfs,
    host_ram: Bytes,
    edit: &mut Edit,
) -> Result<(), ShapeError> {
    let want = tmpfs.size.bytes;
    match (way, existing) {
        (ShmWay::Grow, ShmSource::Bind { source }) => {
            edit.host_shm = Some((source.clone(), tmpfs.clone()));
            Ok(())
        }
        (ShmWay::Grow, ShmSource::Tmpfs { size }) => {
            let have = size.unwrap_or(Bytes(host_ram.0 / 2));
            if have >= want {
                return Ok(());
            }
            let last = mounts
                .iter_mut()
                .rev()
                .find(|m| {
                    m.get("destination").and_then(Value::as_str).map(crate::target::normalise).as_deref()
                        == Some(SHM_PATH)
                })
                .ok_or(ShapeError("the /dev/shm mount"))?;
            set_size(last.as_object_mut().ok_or(ShapeError("the /dev/shm mount"))?, want)?;
            edit.raised = Some((*size, want));
            Ok(())
        }
        (ShmWay::Grow, ShmSource::None) | (ShmWay::Fresh, _) => {
            // After the spec's /dev mount, which it would otherwise be under.
            mounts.push(entry(SHM_PATH, tmpfs));
            edit.added.push(SHM_PATH.to_string());
            Ok(())
        }
    }
}

/// Drops `ro` from the options of the spec's last `/dev/shm` entry.
fn drop_read_only(mounts: &mut [Value]) {
    let last = mounts.iter_mut().rev().find(|m| {
        m.get("destination").and_then(Value::as_str).map(crate::target::normalise).as_deref()
            == Some(SHM_PATH)
    });
    if let Some(options) = last.and_then(|m| m.get_mut("options")).and_then(Value::as_array_mut) {
        options.retain(|o| o != "ro");
    }
}

/// Replaces every `size=` option of a mount entry with `bytes`.
fn set_size(mount: &mut Map<String, Value>, bytes: Bytes) -> Result<(), ShapeError> {
    let options = mount.entry("options").or_insert_with(|| json!([]));
    let options = options.as_array_mut().ok_or(ShapeError("the /dev/shm mount's options"))?;
    options.retain(|o| !o.as_str().is_some_and(|s| s.starts_with("size=")));
    options.push(json!(format!("size={}", bytes.0)));
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::host_config::HostConfig;

    const GI: u64 = 1 << 30;
    const MI: u64 = 1 << 20;

    fn config(shm: Value, env: &[&str]) -> Value {
        json!({
            "ociVersion": "1.0.2",
            "process": {"args": ["sh"], "cwd": "/", "env": env, "user": {"uid": 0, "gid": 0}},
            "root": {"path": "rootfs", "readonly": true},
            "mounts": [
                {"destination": "/proc", "type": "proc", "source": "proc"},
                {"destination": "/dev", "type": "tmpfs", "source": "tmpfs", "options": ["nosuid", "mode=755"]},
                shm
            ],
            "linux": {"namespaces": [{"type": "mount"}], "resources": {"memory": {"limit": GI}}},
            "x-unknown-field": {"kept": true}
        })
    }

    fn plan_of(config: &Value, host_config: &HostConfig) -> Plan {
        let spec = serde_json::from_value(config.clone()).unwrap();
        crate::plan::fixtures::plan_of(&spec, host_config).unwrap()
    }

    fn run(mut config: Value, host_config: &HostConfig, refused: &[&str]) -> (Value, Edit) {
        let plan = plan_of(&config, host_config);
        let place = |t: &str| (!refused.contains(&t)).then(|| Dest { path: t.to_string(), copy_up: false });
        let edit = put_mounts(&mut config, &plan, place, Bytes(16 * GI)).unwrap();
        (config, edit)
    }

    fn mount<'a>(config: &'a Value, dest: &str) -> Vec<&'a Value> {
        config["mounts"].as_array().unwrap().iter().filter(|m| m["destination"] == dest).collect()
    }

    #[test]
    fn temp_targets_become_tmpfs_entries() {
        let shm = json!({"destination": "/dev/shm", "type": "tmpfs", "source": "shm", "options": ["nosuid", "size=65536k"]});
        let host_config = HostConfig::parse("nr_inodes = 5000\nnoexec = true").unwrap();
        let (out, edit) = run(config(shm, &["TMPDIR=/var/tmp"]), &host_config, &[]);
        assert_eq!(edit.added, ["/tmp", "/var/tmp"]);
        assert_eq!(
            mount(&out, "/tmp")[0],
            &json!({"destination": "/tmp", "type": "tmpfs", "source": SOURCE,
                "options": ["nosuid", "nodev", "noexec", "mode=1777", "nr_inodes=5000", format!("size={}", 256 * MI)]})
        );
        assert_eq!(out["x-unknown-field"], json!({"kept": true}));
        // /dev/shm: the spec's 64 MiB raised to 512 MiB (50% of the 1 GiB limit).
        assert_eq!(edit.raised, Some((Some(Bytes(64 * MI)), Bytes(512 * MI))));
        assert_eq!(mount(&out, "/dev/shm")[0]["options"], json!(["nosuid", format!("size={}", 512 * MI)]));
    }

    #[test]
    fn temp_targets_go_before_every_spec_mount_and_a_fresh_shm_last() {
        let proc = json!({"destination": "/proc2", "type": "proc", "source": "proc"});
        let (out, _) = run(config(proc, &["TMPDIR=/var/tmp"]), &HostConfig::default(), &[]);
        let dests: Vec<&str> =
            out["mounts"].as_array().unwrap().iter().map(|m| m["destination"].as_str().unwrap()).collect();
        assert_eq!(dests, ["/tmp", "/var/tmp", "/proc", "/dev", "/proc2", "/dev/shm"]);
    }

    #[test]
    fn the_mount_label_is_left_to_the_runtime() {
        let shm =
            json!({"destination": "/dev/shm", "type": "tmpfs", "source": "shm", "options": ["size=65536k"]});
        let mut c = config(shm, &[]);
        c["linux"]["mountLabel"] = json!("system_u:object_r:container_file_t:s0:c7,c8");
        let (out, _) = run(c, &HostConfig::default(), &[]);
        assert_eq!(out["linux"]["mountLabel"], "system_u:object_r:container_file_t:s0:c7,c8");
        for m in out["mounts"].as_array().unwrap() {
            let opts = m["options"].as_array().map(Vec::as_slice).unwrap_or_default();
            assert!(!opts.iter().any(|o| o.as_str().unwrap().starts_with("context=")), "{m}");
        }
    }

    #[test]
    fn a_second_run_adds_nothing() {
        let shm =
            json!({"destination": "/dev/shm", "type": "tmpfs", "source": "shm", "options": ["size=65536k"]});
        let (once, _) = run(config(shm, &["TEMP=/scratch"]), &HostConfig::default(), &[]);
        let (twice, edit) = run(once.clone(), &HostConfig::default(), &[]);
        assert_eq!(once, twice);
        assert_eq!(edit, Edit::default());
    }

    #[test]
    fn shm_table() {
        let cases = [
            (
                "none: a fresh entry",
                json!({"destination": "/proc2", "type": "proc", "source": "proc"}),
                true,
                None,
                false,
            ),
            (
                "unsized tmpfs is half of RAM: never lowered",
                json!({"destination": "/dev/shm", "type": "tmpfs", "source": "shm"}),
                false,
                None,
                false,
            ),
            (
                "engine bind: grown on the host",
                json!({"destination": "/dev/shm", "type": "bind", "source": "/var/lib/docker/c/shm", "options": ["rbind"]}),
                false,
                None,
                true,
            ),
            (
                "host IPC: untouched",
                json!({"destination": "/dev/shm", "type": "bind", "source": "/dev/shm", "options": ["rbind"]}),
                false,
                None,
                false,
            ),
        ];
        for (name, shm, fresh, raised, host) in cases {
            let (out, edit) = run(config(shm, &[]), &HostConfig::default(), &[]);
            assert_eq!(edit.added.contains(&SHM_PATH.to_string()), fresh, "{name}");
            assert_eq!(edit.raised, raised, "{name}");
            assert_eq!(edit.host_shm.is_some(), host, "{name}");
            if fresh {
                let m = mount(&out, "/dev/shm");
                assert_eq!(
                    m[0]["options"],
                    json!(["nosuid", "nodev", "noexec", "mode=1777", format!("size={}", 512 * MI)]),
                    "{name}"
                );
                let last = out["mounts"].as_array().unwrap().last().unwrap();
                assert_eq!(last["destination"], "/dev/shm", "{name}: after /dev");
            }
        }
    }

    #[test]
    fn placed_targets_are_written_at_their_real_path() {
        let shm =
            json!({"destination": "/dev/shm", "type": "tmpfs", "source": "shm", "options": ["size=1g"]});
        let mut c = config(shm, &[]);
        let plan = plan_of(&c, &HostConfig::default());
        let place = |t: &str| (t == "/tmp").then(|| Dest { path: "/run/tmp".to_string(), copy_up: true });
        let edit = put_mounts(&mut c, &plan, place, Bytes(16 * GI)).unwrap();
        assert_eq!(edit.added, ["/run/tmp"]);
        // A directory the runtime copies up: tmpcopyup, before the plan's options.
        assert_eq!(c["mounts"][0]["options"][0], TMPCOPYUP, "{c}");
        assert!(mount(&c, "/tmp").is_empty());
        assert_eq!(mount(&c, "/run/tmp")[0]["source"], SOURCE);
    }

    #[test]
    fn refused_targets_are_not_written() {
        let shm =
            json!({"destination": "/dev/shm", "type": "tmpfs", "source": "shm", "options": ["size=1g"]});
        let (out, edit) = run(config(shm, &["TMPDIR=/var/tmp"]), &HostConfig::default(), &["/tmp"]);
        assert_eq!(edit.added, ["/var/tmp"]);
        assert!(mount(&out, "/tmp").is_empty());
    }

    #[test]
    fn nested_targets_need_the_hook() {
        let shm = json!({"destination": "/dev/shm", "type": "tmpfs", "source": "shm"});
        let c = config(shm, &["TMPDIR=/tmp/job"]);
        assert!(!expressible(&plan_of(&c, &HostConfig::default())));
        assert!(expressible(&plan_of(
            &config(json!({"destination": "/x", "type": "proc"}), &["TMPDIR=/var/tmp"]),
            &HostConfig::default()
        )));
    }

    #[test]
    fn shapes_are_checked() {
        let plan =
            plan_of(&config(json!({"destination": "/x", "type": "proc"}), &[]), &HostConfig::default());
        let mut bad = json!({"mounts": {"not": "a list"}});
        let place = |t: &str| Some(Dest { path: t.to_string(), copy_up: false });
        assert_eq!(put_mounts(&mut bad, &plan, place, Bytes(GI)), Err(ShapeError("mounts")));
        let mut bad = json!([1, 2]);
        assert_eq!(put_mounts(&mut bad, &plan, place, Bytes(GI)), Err(ShapeError("the document")));
    }
}
