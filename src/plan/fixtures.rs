//! Test-only helpers, one set for every test of the plan and its
//! executors: specs as JSON ([`base`], [`with`], [`user_env`]), plans made
//! from them ([`plan`], [`decide_with`], [`plan_of`], [`home_plan_in`],
//! [`home_plan`]), what the tests read of a plan ([`tmpfs_targets`],
//! [`shm`]), and tmpfs and actions built by hand for the executors' unit
//! tests ([`tmpfs`], [`mount`]). Every plan here is made on a 16 GiB host
//! ([`RAM`]) from what the hook knows of the user before it reads the image
//! ([`UserFacts::HOOK`]); [`home_plan_in`] then answers the image's questions.

use serde_json::json;

use super::*;
use crate::size::{Basis, Bytes};

/// A tmpfs of `bytes` as the plan makes one for a temp target
/// (mode 1777, `nosuid,nodev`), owned by `owner`.
pub(crate) fn tmpfs(bytes: u64, owner: Option<Owner>) -> Tmpfs {
    let size = Sizing {
        bytes: Bytes(bytes),
        requested: "x".into(),
        from: SizeFrom::Default,
        basis: Basis::Absolute,
        basis_bytes: None,
        capped: None,
    };
    Tmpfs {
        size,
        nr_inodes: None,
        mode: TMPFS_MODE,
        nosuid: true,
        nodev: true,
        noexec: false,
        owner,
        user: None,
        image_owner: None,
        own_from: None,
        label: None,
    }
}

/// The plan for `spec` on a 16 GiB host, as the hook makes it before
/// reading `/etc/passwd`.
pub(crate) fn plan_of(spec: &Spec, host_config: &HostConfig) -> Result<Plan, PlanError> {
    plan_for(spec, None, host_config, HostFacts { ram: RAM }, &UserFacts::HOOK)
}

/// A tmpfs on `target` (always a target: [`Origin::Default`]).
pub(crate) fn mount(target: &str, tmpfs: Tmpfs) -> Action {
    Action::MountTmpfs {
        target: crate::target::validate(target).unwrap(),
        origins: vec![Origin::Default],
        tmpfs,
        subdirs: vec![],
    }
}

/// 1 GiB, 1 MiB, and the RAM of the host every plan here is made on.
pub(super) const GI: u64 = 1 << 30;
pub(super) const MI: u64 = 1 << 20;
pub(super) const RAM: Bytes = Bytes(16 * GI);

/// A `runc spec`-like config: read-only root, own mount namespace, /dev/shm 64 MiB.
pub(super) fn base() -> serde_json::Value {
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

/// The plan for `config` (a spec as JSON) under `host_config`: [`plan_of`].
pub(super) fn decide_with(config: &serde_json::Value, host_config: &HostConfig) -> Result<Plan, PlanError> {
    let spec: Spec = serde_json::from_value(config.clone()).expect("valid spec");
    plan_of(&spec, host_config)
}

/// The plan for `config` under the default host config.
pub(super) fn plan(config: &serde_json::Value) -> Plan {
    decide_with(config, &HostConfig::default()).expect("plan")
}

/// Each tmpfs the plan mounts: its target and size in bytes.
pub(super) fn tmpfs_targets(plan: &Plan) -> Vec<(String, u64)> {
    plan.actions
        .iter()
        .filter_map(|a| match a {
            Action::MountTmpfs { target, tmpfs, .. } => Some((target.to_string(), tmpfs.size.bytes.0)),
            _ => None,
        })
        .collect()
}

/// The plan's `/dev/shm` action: its size in bytes and what the spec mounts there.
pub(super) fn shm(plan: &Plan) -> Option<(u64, ShmSource)> {
    plan.actions.iter().find_map(|a| match a {
        Action::Shm { tmpfs, existing, .. } => Some((tmpfs.size.bytes.0, existing.clone())),
        _ => None,
    })
}

/// `config` with `value` set at the JSON pointer `pointer`.
pub(super) fn with(
    mut config: serde_json::Value,
    pointer: &str,
    value: serde_json::Value,
) -> serde_json::Value {
    let (parent, key) = pointer.rsplit_once('/').unwrap();
    config.pointer_mut(parent).unwrap().as_object_mut().unwrap().insert(key.to_string(), value);
    config
}

/// A plan finished as an executor finishes it ([`finish`]): `passwd`
/// is what it reads of the image's /etc/passwd (`NotRead`: the plan's
/// first question goes unanswered), `read` what it finds at the home
/// and below it (path, what is there; `""` is `HOME`; a path not given
/// is missing).
pub(super) fn home_plan_in(
    config: &serde_json::Value,
    host_config: &HostConfig,
    passwd: Passwd,
    read: &[(&str, Found)],
) -> Plan {
    let spec: Spec = serde_json::from_value(config.clone()).expect("valid spec");
    let user = UserFacts::HOOK;
    let first = begin(&spec, None, host_config, HostFacts { ram: RAM }, &user).expect("plan");
    let read: Vec<(String, Found)> = read.iter().map(|(p, e)| (p.to_string(), e.clone())).collect();
    finish(first, user, |q, user| {
        match q {
            Question::Passwd(_) => user.passwd = passwd.clone(),
            Question::HomeDir(path, paths) => {
                // What an executor reads: HOME, then each path below it
                // that the plan asks for, under a directory holding files.
                let mut got = vec![read.iter().find(|(p, _)| p.is_empty()).cloned().expect("HOME's entry")];
                for p in paths {
                    let parent = p.rsplit_once('/').map_or("", |(d, _)| d);
                    let walk_on =
                        got.iter().any(|(q, e)| q == parent && matches!(e, Found::Dir(d) if !d.empty));
                    if walk_on {
                        let e = read.iter().find(|(q, _)| q == p).map_or(Found::Missing, |(_, e)| e.clone());
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
pub(super) fn home_plan(
    config: &serde_json::Value,
    host_config: &HostConfig,
    passwd: Passwd,
    uid: u32,
) -> Plan {
    home_plan_in(config, host_config, passwd, &[("", dir(uid, false))])
}

/// A directory of host uid `uid`, empty or holding files.
pub(super) fn dir(uid: u32, empty: bool) -> Found {
    Found::Dir(DirFacts { owner: Owner { uid, gid: uid }, mode: 0o755, empty })
}

/// [`base`] run as `uid:gid` with the environment `env` (no `PATH`).
pub(super) fn user_env(uid: u32, gid: u32, env: &[&str]) -> serde_json::Value {
    let mut c = base();
    c["process"]["user"] = json!({"uid": uid, "gid": gid});
    c["process"]["env"] = json!(env);
    c
}
