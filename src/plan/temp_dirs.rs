//! Step 3 of the plan: the temp dirs to mount. The candidates (`/tmp`, the
//! container's `TMPDIR`/`TEMP`/`TMP`/`TEMPDIR`, the cache dirs named by the
//! variables of the host config's `env_targets`, its `extra_targets`),
//! deduplicated; those the spec already mounts left alone;
//! targets nested in another one turned into directories in the outer tmpfs.
//! Pure: the landing rules that need the rootfs are the executors'
//! (`hook`, `spec::host`).

use super::{Inputs, Note, Origin, SpecMounts};
use crate::target::{self, EnvTarget, TargetPath};

/// A temp target and the reasons for it, in first-seen order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Candidate {
    pub(super) path: TargetPath,
    pub(super) origins: Vec<Origin>,
}

/// An outermost target, with the targets nested in it as subdirectories.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Nested {
    pub(super) target: TargetPath,
    pub(super) origins: Vec<Origin>,
    /// The origins of `target` itself (not of the dirs nested in it).
    pub(super) own_origins: Vec<Origin>,
    pub(super) subdirs: Vec<String>,
}

/// `/tmp`, the environment's temp dirs, its cache dirs (`env_targets`), the
/// host config's extra targets, in that order, deduplicated; an unusable
/// environment value is a warning.
pub(super) fn temp_targets(inputs: &Inputs<'_>, notes: &mut Vec<Note>) -> Vec<Candidate> {
    let mut found: Vec<(TargetPath, Origin)> = vec![(tmp(), Origin::Default)];
    let env: Vec<&str> = inputs
        .spec
        .process()
        .as_ref()
        .and_then(|p| p.env().as_ref())
        .map(|e| e.iter().map(String::as_str).collect())
        .unwrap_or_default();
    for t in target::from_env(&inputs.host_config.env_targets, env.iter().copied()) {
        match t {
            EnvTarget::Ok { var, path } => found.push((path, Origin::Env(var))),
            EnvTarget::Skipped { var, value, reason } => {
                let what = if var.is_temp_var() { "temp" } else { "cache" };
                notes
                    .push(Note::warn(format!("{var}={value}"), format!("not a usable {what} dir: {reason}")));
            }
        }
    }
    found.extend(inputs.host_config.extra_targets.iter().map(|p| (p.clone(), Origin::HostConfig)));
    let mut out: Vec<Candidate> = Vec::new();
    for (path, origin) in found {
        add(&mut out, path, origin);
    }
    out
}

/// Adds a target, or one more origin to a target already there.
pub(super) fn add(candidates: &mut Vec<Candidate>, path: TargetPath, origin: Origin) {
    match candidates.iter_mut().find(|c| c.path == path) {
        Some(c) if !c.origins.contains(&origin) => c.origins.push(origin),
        Some(_) => {}
        None => candidates.push(Candidate { path, origins: vec![origin] }),
    }
}

fn tmp() -> TargetPath {
    target::validate("/tmp").expect("/tmp is a valid target")
}

/// Drops the candidates that the spec mounts, or that lie inside a spec
/// mount (a volume); warns about temp dirs too long for PyTorch's socket
/// (`torch_shm_manager` puts it in the temp dir, never in a cache dir).
pub(super) fn not_spec_mounted(
    candidates: Vec<Candidate>,
    spec: &SpecMounts<'_>,
    notes: &mut Vec<Note>,
) -> Vec<Candidate> {
    let mut kept = Vec::new();
    for c in candidates {
        let subject = describe(&c);
        if let Some(m) = spec.last_at(c.path.as_str()) {
            notes.push(Note::info(subject, already_mounted(m)));
            continue;
        }
        if let Some(d) = spec.containing(&c.path) {
            notes.push(Note::info(subject, format!("it lies inside the spec's mount at {d}")));
            continue;
        }
        if let Some(d) = spec.inside(&c.path) {
            let reason = format!("the spec mounts {d} inside it, which a tmpfs over it would hide");
            notes.push(Note::warn(subject, reason));
            continue;
        }
        if c.path.as_str().len() > target::TORCH_SOCKET_MAX && c.origins.iter().any(Origin::is_temp_dir) {
            notes.push(Note::warn(
                subject,
                format!(
                    "mounted, but longer than {} bytes: PyTorch's torch_shm_manager socket under it will not fit a unix socket path",
                    target::TORCH_SOCKET_MAX
                ),
            ));
        }
        kept.push(c);
    }
    kept
}

/// Why a target the spec mounts is left, with what the container gets
/// there when it is a tmpfs that will not do for a temp dir: `noexec`
/// (code built there cannot run: Inductor's kernels) or no `size` (up to
/// half of RAM, charged to the container). CRI-O's `read_only = true` gives
/// both (docs/engines.md#cri-o-read-only).
fn already_mounted(m: &crate::oci::Mount) -> String {
    let opts: &[String] = m.options().as_deref().unwrap_or_default();
    let tmpfs = m.typ().as_deref() == Some("tmpfs");
    let noexec = tmpfs && opts.iter().any(|o| o == "noexec");
    let no_size = tmpfs && !opts.iter().any(|o| o.starts_with("size="));
    let what = match (noexec, no_size) {
        (false, false) => return "the spec already mounts it".to_string(),
        (true, true) => "a noexec tmpfs with no size",
        (true, false) => "a noexec tmpfs",
        (false, true) => "a tmpfs with no size",
    };
    let mut reason = format!("the spec already mounts it: {what}, left as it is");
    if noexec {
        reason.push_str(" (code built there cannot run: point TORCHINDUCTOR_CACHE_DIR at a cache of ours)");
    }
    reason
}

/// How a note names a candidate: `TMPDIR=/x` for one from the environment.
fn describe(c: &Candidate) -> String {
    match c.origins.first() {
        Some(Origin::Env(var)) => format!("{var}={}", c.path),
        _ => c.path.to_string(),
    }
}

/// A target inside another one (`TMPDIR=/tmp/job`) is a directory created in
/// the outer tmpfs, not a second mount. Keeps the order of the outer ones.
pub(super) fn nest(candidates: Vec<Candidate>) -> Vec<Nested> {
    let is_inner = |p: &TargetPath| candidates.iter().any(|q| p.is_under(q.path.as_str()));
    let mut out = Vec::new();
    for top in candidates.iter().filter(|c| !is_inner(&c.path)) {
        let mut origins = Vec::new();
        let mut subdirs = Vec::new();
        for c in &candidates {
            if c.path == top.path {
                origins.extend(c.origins.iter().cloned());
            } else if c.path.is_under(top.path.as_str()) {
                subdirs.push(c.path.as_str()[top.path.as_str().len() + 1..].to_string());
                origins.extend(c.origins.iter().cloned());
            }
        }
        subdirs.sort();
        out.push(Nested { target: top.path.clone(), origins, own_origins: top.origins.clone(), subdirs });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    use crate::host_config::HostConfig;
    use crate::plan::fixtures::{base, decide_with, plan, tmpfs_targets, with, GI};
    use crate::plan::{Action, Plan};

    fn cand(path: &str, origins: &[Origin]) -> Candidate {
        Candidate { path: target::validate(path).unwrap(), origins: origins.to_vec() }
    }

    #[test]
    fn nest_table() {
        let env = |v: &str| Origin::Env(target::EnvVar::parse(v).unwrap());
        type Case = (&'static str, Vec<Candidate>, Vec<(&'static str, Vec<&'static str>)>);
        let cases: Vec<Case> = vec![
            (
                "flat",
                vec![cand("/tmp", &[Origin::Default]), cand("/var/tmp", &[env("TMPDIR")])],
                vec![("/tmp", vec![]), ("/var/tmp", vec![])],
            ),
            (
                "nested sorted",
                vec![
                    cand("/tmp", &[Origin::Default]),
                    cand("/tmp/job/x", &[env("TMPDIR")]),
                    cand("/tmp/a", &[env("TEMP")]),
                ],
                vec![("/tmp", vec!["a", "job/x"])],
            ),
            (
                "parent after child",
                vec![cand("/scratch/a", &[Origin::HostConfig]), cand("/scratch", &[Origin::HostConfig])],
                vec![("/scratch", vec!["a"])],
            ),
            (
                "sibling prefix is not nesting",
                vec![cand("/tmp", &[]), cand("/tmpx", &[])],
                vec![("/tmp", vec![]), ("/tmpx", vec![])],
            ),
        ];
        for (name, input, want) in cases {
            let got: Vec<(String, Vec<String>)> =
                nest(input).into_iter().map(|n| (n.target.to_string(), n.subdirs)).collect();
            let want: Vec<(String, Vec<String>)> = want
                .into_iter()
                .map(|(t, s)| (t.to_string(), s.into_iter().map(String::from).collect()))
                .collect();
            assert_eq!(got, want, "{name}");
        }
    }

    #[test]
    fn spec_mount_filter_table() {
        let spec: crate::oci::Spec = serde_json::from_value(serde_json::json!({
            "ociVersion": "1.0.2",
            "mounts": [
                {"destination": "/tmp/", "type": "tmpfs", "source": "tmpfs"},
                {"destination": "/data", "type": "bind", "source": "/srv", "options": ["rbind"]},
                {"destination": "/", "type": "bind", "source": "/x"},
                {"destination": "/scratch/data", "type": "bind", "source": "/vol", "options": ["rbind"]},
                {"destination": "/run", "type": "tmpfs", "source": "tmpfs",
                 "options": ["rw", "noexec", "nosuid", "nodev", "tmpcopyup"]},
                {"destination": "/var/x", "type": "tmpfs", "source": "tmpfs", "options": ["noexec", "size=1m"]},
                {"destination": "/sized", "type": "tmpfs", "source": "tmpfs", "options": ["size=1m"]}
            ]
        }))
        .unwrap();
        let mounts = SpecMounts::of(&spec);
        let long = format!("/{}", "x".repeat(80));
        let cases = [
            ("/tmp", false, "already mounts it: a tmpfs with no size, left as it is"),
            ("/data/tmp", false, "inside the spec's mount at /data"),
            ("/var/tmp", true, ""),
            (long.as_str(), true, "PyTorch"),
            ("/scratch", false, "mounts /scratch/data inside it"),
            ("/run", false, "already mounts it: a noexec tmpfs with no size, left as it is (code built"),
            ("/var/x", false, "already mounts it: a noexec tmpfs, left"),
            ("/sized", false, "the spec already mounts it"),
            ("/data", false, "the spec already mounts it"),
        ];
        for (path, kept, reason) in cases {
            let mut notes = Vec::new();
            let out = not_spec_mounted(vec![cand(path, &[Origin::Default])], &mounts, &mut notes);
            assert_eq!(out.len() == 1, kept, "{path}");
            assert_eq!(
                notes.iter().any(|n| n.reason.contains(reason)),
                !reason.is_empty(),
                "{path}: {notes:?}"
            );
            if ["/sized", "/data"].contains(&path) {
                assert_eq!(notes[0].reason, "the spec already mounts it", "{path}: a sized tmpfs, a volume");
            }
        }
    }

    fn env(var: &str) -> Origin {
        Origin::Env(target::EnvVar::parse(var).unwrap())
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
            let mut host_config = HostConfig::default();
            if let Some(list) = list {
                host_config.env_targets = list.iter().map(|v| target::EnvVar::parse(v).unwrap()).collect();
            }
            let mut c = base();
            c["process"]["env"].as_array_mut().unwrap().extend(env.iter().map(|e| json!(e)));
            let p = decide_with(&c, &host_config).expect(&name);
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
}
