//! The Kubernetes manifests of deploy/kubernetes/runtimeclass validate,
//! strictly (no unknown fields), against the API schemas of the oldest and
//! the newest Kubernetes versions `kubernetes-validate` carries (offline;
//! tests/env/kubernetes-validate.sh installs it from PyPI once); the
//! kustomization lists every manifest; the DaemonSet's args are ones the
//! binary accepts.

use std::path::Path;
use std::process::Command;

use crate::support::kube::kubernetes_python as python;
use crate::support::*;

const DIR: &str = "deploy/kubernetes/runtimeclass";

/// The `resources:` of the kustomization.
fn kustomized(dir: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(dir.join("kustomization.yaml")).unwrap();
    let mut out = Vec::new();
    let mut inside = false;
    for line in text.lines() {
        if !line.starts_with(' ') && !line.starts_with('-') {
            inside = line.trim_end() == "resources:";
            continue;
        }
        if let Some(item) = line.trim().strip_prefix("- ").filter(|_| inside) {
            out.push(item.trim().to_string());
        }
    }
    out
}

#[test]
fn runtimeclass_manifests_validate_on_oldest_and_newest_kubernetes() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(DIR);
    let py = python();
    let resources = kustomized(&dir);
    let mut yamls: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".yaml") && n != "kustomization.yaml")
        .collect();
    yamls.sort();
    let mut listed = resources.clone();
    listed.sort();
    assert_eq!(listed, yamls, "the kustomization lists every manifest");

    let versions = ok(Command::new(&py).args([
        "-c",
        "import kubernetes_validate.utils as u\n\
         v = sorted(set(u.all_versions()), key=lambda s: tuple(map(int, s.split('.'))))\n\
         print(v[0], v[-1])",
    ]));
    let versions: Vec<&str> = versions.split_whitespace().collect();
    assert_eq!(versions.len(), 2, "{versions:?}");
    for k in &versions {
        let out = ok(Command::new(&py)
            .args(["-m", "kubernetes_validate", "--strict", "-k", k])
            .args(resources.iter().map(|r| dir.join(r))));
        eprintln!("manifests: kubernetes {k}:\n{out}");
        assert_eq!(out.matches(" passed for resource ").count(), resources.len(), "{out}");
    }

    // The DaemonSet's args parse (exit 1 for the missing host root, not 2 for usage).
    let args = ok(Command::new(&py).arg("-c").arg(format!(
        "import yaml, json\nd = yaml.safe_load(open({:?}))\nprint(json.dumps(d['spec']['template']['spec']['containers'][0]['args']))",
        dir.join("daemonset.yaml")
    )));
    let mut args: Vec<String> = serde_json::from_str(&args).unwrap();
    let root = args.iter().position(|a| a == "--host-root").expect("--host-root") + 1;
    args[root] = "/nonexistent/oci-tmpfs-hook-host".into();
    let out = Command::new(crate::support::hook_bin()).args(&args).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
    assert!(err.contains("is not a directory; mount the host's / there"), "{err}");
}
