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
    for t in target::from_env(&inputs.settings.env_targets, env.iter().copied()) {
        match t {
            EnvTarget::Ok { var, path } => found.push((path, Origin::Env(var))),
            EnvTarget::Skipped { var, value, reason } => {
                let what = if var.is_temp_var() { "temp" } else { "cache" };
                notes
                    .push(Note::warn(format!("{var}={value}"), format!("not a usable {what} dir: {reason}")));
            }
        }
    }
    found.extend(inputs.settings.extra_targets.iter().map(|p| (p.clone(), Origin::HostConfig)));
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
        if spec.last_at(c.path.as_str()).is_some() {
            notes.push(Note::info(subject, "the spec already mounts it"));
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
                {"destination": "/scratch/data", "type": "bind", "source": "/vol", "options": ["rbind"]}
            ]
        }))
        .unwrap();
        let mounts = SpecMounts::of(&spec);
        let long = format!("/{}", "x".repeat(80));
        let cases = [
            ("/tmp", false, "already mounts"),
            ("/data/tmp", false, "inside the spec's mount at /data"),
            ("/var/tmp", true, ""),
            (long.as_str(), true, "PyTorch"),
            ("/scratch", false, "mounts /scratch/data inside it"),
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
        }
    }
}
