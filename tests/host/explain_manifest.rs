//! `explain --manifest`: the built binary on Kubernetes manifests (files
//! and stdin, text and JSON), and its one-line refusals of bad input
//! (exit 2). The agreement with real pods is tests/runtimes/manifest.rs.

use std::io::Write as _;
use std::process::{Command, Output, Stdio};

use serde_json::Value;

use crate::support::*;

const MI: u64 = 1 << 20;
const GI: u64 = 1 << 30;

fn explain(args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(hook_bin())
        .arg("explain")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
    child.wait_with_output().unwrap()
}

const TRAINER: &str = r#"apiVersion: apps/v1
kind: Deployment
metadata: {name: trainer, namespace: ml}
spec:
  template:
    metadata:
      annotations: {oci-tmpfs-hook/shm-size: 8Gi}
    spec:
      volumes: [{name: cache, emptyDir: {}}, {name: dshm, emptyDir: {medium: Memory}}]
      containers:
      - name: train
        image: pytorch
        env: [{name: TMPDIR, value: /scratch}]
        resources: {limits: {memory: 16Gi}}
        securityContext: {readOnlyRootFilesystem: true}
      - name: side
        image: busybox
        resources: {limits: {memory: 1Gi}}
        securityContext: {readOnlyRootFilesystem: true}
        volumeMounts: [{name: cache, mountPath: /tmp}]
      - name: rw
        image: busybox
      - name: nolimit
        image: busybox
        securityContext: {readOnlyRootFilesystem: true}
        volumeMounts: [{name: dshm, mountPath: /dev/shm}]
---
apiVersion: v1
kind: Service
metadata: {name: trainer}
"#;

#[test]
fn text_from_stdin_names_sizes_and_reasons() {
    let dir = TempDir::new("explain-manifest-text");
    let config = dir.join("config.toml");
    std::fs::write(&config, "").unwrap();
    let out =
        explain(&["--manifest", "-", "--node-memory", "64Gi", "--config", config.to_str().unwrap()], TRAINER);
    let s = text(&out.stdout);
    assert!(out.status.success(), "{}{s}", text(&out.stderr));
    for want in [
        "node:     64Gi of memory (--node-memory)",
        "stdin: document 1 (Deployment trainer), template spec.template: pod ml/trainer",
        "container train (spec.template.spec.containers[0]; memory limit 16Gi):",
        "acts: securityContext.readOnlyRootFilesystem: true",
        "mount tmpfs on /tmp: size 4Gi (25% of the memory limit 16Gi, from default)",
        "mount tmpfs on /scratch: size 4Gi (25% of the memory limit 16Gi, from default), nosuid,nodev,mode=1777 [$TMPDIR]",
        "to at least 8Gi (8Gi, from oci-tmpfs-hook/shm-size)",
        "volume at /tmp: volume cache (emptyDir)",
        "left alone: /tmp: the spec already mounts it: volume cache (emptyDir)",
        "capped at the memory limit 1Gi",
        "container rw (spec.template.spec.containers[2]; no memory limit):",
        "does nothing: readOnlyRootFilesystem not set (a writable root)",
        "mount tmpfs on /tmp: size 16Gi (25% of the node's RAM 64Gi, from default)",
        "left alone: /dev/shm: volume dshm is mounted there: not the engine's shm, so no executor grows it",
        "pod /dev/shm: 8Gi (containerd's 64Mi tmpfs, grown to its largest container's: train)",
        "stdin: document 2 (Service trainer): no pod template, passed over",
    ] {
        assert!(s.contains(want), "missing {want:?} in:\n{s}");
    }
}

#[test]
fn json_from_a_file_with_the_host_config() {
    let dir = TempDir::new("explain-manifest");
    let file = dir.join("trainer.yaml");
    std::fs::write(&file, TRAINER).unwrap();
    let config = dir.join("config.toml");
    std::fs::write(&config, "tmp_size = \"10%\"\nmax_shm_size = \"2Gi\"\n").unwrap();
    let out = explain(
        &[
            "--manifest",
            file.to_str().unwrap(),
            "--json",
            "--node-memory",
            "65842836Ki",
            "--config",
            config.to_str().unwrap(),
        ],
        "",
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["node"]["memory"], 65_842_836u64 * 1024);
    let pod = &v["pods"][0];
    let actions = |i: usize| -> Vec<(String, u64)> {
        pod["containers"][i]["plan"]["actions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| {
                let target = a["target"].as_str().unwrap_or("/dev/shm").to_string();
                (target, a["size"]["bytes"].as_u64().unwrap())
            })
            .collect()
    };
    // 10% of 16Gi, rounded up to a page; the 8Gi annotation capped at 2Gi.
    let tenth = (16 * GI / 10).div_ceil(4096) * 4096;
    assert_eq!(actions(0), [("/tmp".into(), tenth), ("/scratch".into(), tenth), ("/dev/shm".into(), 2 * GI)]);
    assert_eq!(actions(1), [("/dev/shm".to_string(), GI)]);
    assert_eq!(
        pod["shm"],
        serde_json::json!({"kind": "sandbox", "start": 64 * MI, "size": 2 * GI, "by": "train"})
    );
    assert_eq!(v["skipped"][0]["kind"], "Service");
}

#[test]
fn bad_input_is_one_line_naming_the_document_and_the_field() {
    let pod = |spec: &str| format!("apiVersion: v1\nkind: Pod\nmetadata: {{name: p}}\nspec: {spec}\n");
    let cases = [
        ("not YAML", "a: [1, 2\n".to_string(), "stdin: not YAML or JSON: "),
        ("not JSON", "{\"kind\": ".to_string(), "stdin: not YAML or JSON: JSON: "),
        ("not an object", "just text\n".to_string(), "stdin: document 1: not a Kubernetes object"),
        (
            "unknown kind",
            format!(
                "{}---\napiVersion: argoproj.io/v1alpha1\nkind: Rollout\nmetadata: {{name: r}}\n",
                pod("{containers: [{name: a, image: b}]}")
            ),
            "stdin: document 2 (Rollout r): kind: unknown kind \"Rollout\": explain knows Pod, Deployment",
        ),
        ("missing kind", "apiVersion: v1\nmetadata: {name: x}\n".into(), "stdin: document 1: kind: missing"),
        (
            "missing name",
            pod("{containers: [{image: b}]}"),
            "stdin: document 1 (Pod p): spec.containers[0].name: missing",
        ),
        ("missing containers", pod("{}"), "stdin: document 1 (Pod p): spec.containers: missing"),
        (
            "mistyped field",
            pod("{containers: [{name: a, image: b, securityContext: {readOnlyRootFilesystem: \"yes\"}}]}"),
            "spec.containers[0].securityContext.readOnlyRootFilesystem: must be true or false, not a string",
        ),
        (
            "bad quantity",
            pod("{containers: [{name: a, image: b, resources: {limits: {memory: 2GB}}}]}"),
            "spec.containers[0].resources.limits.memory: \"2GB\" is not a Kubernetes quantity",
        ),
        ("empty", "# nothing here\n".into(), "stdin: no Kubernetes object in it"),
    ];
    for (name, input, want) in cases {
        let out = explain(&["--manifest", "-"], &input);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{name}: {err}");
        assert!(out.stdout.is_empty(), "{name}: {}", text(&out.stdout));
        assert_eq!(err.lines().count(), 1, "{name}: {err}");
        assert!(
            err.starts_with("oci-tmpfs-hook: ") && err.contains(want),
            "{name}:\n got: {err}\nwant: {want}"
        );
    }
    // Flags: --node-memory needs --manifest, and a quantity.
    for args in
        [&["--bundle", "/b", "--node-memory", "8Gi"][..], &["--manifest", "-", "--node-memory", "8GB"][..]]
    {
        let out = explain(args, "");
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out.stderr));
    }
    // A file that cannot be read is a failure (exit 1), not a usage error.
    let out = explain(&["--manifest", "/nonexistent/m.yaml"], "");
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
}

/// A pod with `TMPDIR=/scratch`, `runAsUser: 1000` and a 1Gi limit, whose
/// HOME comes from the image's /etc/passwd: `explain --manifest` counts the
/// HOME it assumes (the image is unknown there) in the sum, and agrees with
/// `explain --bundle` on the spec containerd makes for that container, over
/// an image whose /etc/passwd gives uid 1000 a home: /tmp, /scratch and
/// HOME at 256Mi, the pod's /dev/shm grown to 512Mi, 1280Mi, over 1Gi.
#[test]
fn manifest_and_bundle_sum_the_same_home() {
    const POD: &str = r#"apiVersion: v1
kind: Pod
metadata: {name: scratch}
spec:
  containers:
  - name: app
    image: app
    env: [{name: TMPDIR, value: /scratch}]
    resources: {limits: {memory: 1Gi}}
    securityContext: {readOnlyRootFilesystem: true, runAsUser: 1000, runAsGroup: 1000}
"#;
    let dir = TempDir::new("explain-manifest-home");
    let config = dir.join("config.toml");
    std::fs::write(&config, "").unwrap();
    let config = config.to_str().unwrap();
    let manifest = explain(&["--manifest", "-", "--node-memory", "64Gi", "--config", config], POD);
    let s = text(&manifest.stdout);
    assert!(manifest.status.success(), "{}{s}", text(&manifest.stderr));
    for want in [
        "assumed: cache tmpfs under HOME (uid 1000's home in the image's /etc/passwd, unknown here, holding none of the caches): 255Mi together (25% shared by 5)",
        "memory (with the assumed HOME): the tmpfs sizes add up to 1279Mi (~1.2Gi), over the memory limit 1Gi",
    ] {
        assert!(s.contains(want), "missing {want:?} in:\n{s}");
    }

    // The container's spec as containerd's CRI writes it (the parts the
    // plan reads), over a rootfs whose /etc/passwd names uid 1000's home.
    let bundle = dir.join("bundle");
    std::fs::create_dir_all(bundle.join("rootfs/etc")).unwrap();
    std::fs::write(
        bundle.join("rootfs/etc/passwd"),
        "root:x:0:0::/root:/bin/sh\napp:x:1000:1000::/home/app:/bin/sh\n",
    )
    .unwrap();
    let bind = |dest: &str, src: &str| serde_json::json!({"destination": dest, "type": "bind", "source": src, "options": ["rbind", "rprivate", "rw"]});
    let spec = serde_json::json!({
        "ociVersion": "1.0.2",
        "root": {"path": "rootfs", "readonly": true},
        "process": {"cwd": "/", "user": {"uid": 1000, "gid": 1000}, "args": ["sleep", "1"], "env": ["PATH=/bin", "TMPDIR=/scratch"]},
        "mounts": [
            {"destination": "/proc", "type": "proc", "source": "proc"},
            {"destination": "/dev", "type": "tmpfs", "source": "tmpfs", "options": ["nosuid", "strictatime", "mode=755", "size=65536k"]},
            bind("/etc/hosts", "/var/lib/kubelet/pods/POD_UID/etc-hosts"),
            bind("/dev/shm", "/run/containerd/io.containerd.grpc.v1.cri/sandboxes/ID/shm"),
        ],
        "annotations": {"io.kubernetes.cri.container-type": "container"},
        "linux": {"namespaces": [{"type": "pid"}, {"type": "ipc"}, {"type": "mount"}], "resources": {"memory": {"limit": GI}}},
    });
    std::fs::write(bundle.join("config.json"), spec.to_string()).unwrap();
    let out = explain(&["--bundle", bundle.to_str().unwrap(), "--json", "--config", config], "");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let by_bundle: Value = serde_json::from_slice(&out.stdout).unwrap();
    let manifest = explain(&["--manifest", "-", "--json", "--node-memory", "64Gi", "--config", config], POD);
    assert!(manifest.status.success(), "{}", text(&manifest.stderr));
    let by_manifest: Value = serde_json::from_slice(&manifest.stdout).unwrap();
    let c = &by_manifest["pods"][0]["containers"][0];
    // The image lacks /home/app: its caches' top directories each get a
    // share of home_size, as the manifest assumes.
    let caches: u64 = by_bundle["plan"]["actions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["target"].as_str().is_some_and(|t| t.starts_with("/home/app/")))
        .map(|a| a["size"]["bytes"].as_u64().unwrap())
        .sum();
    assert_eq!(c["assumed_home"]["size"]["bytes"], caches, "the same caches' total: {by_bundle}");
    assert_eq!(c["memory"], by_bundle["memory"], "the same sum against the same limit");
    assert_eq!(c["memory"]["tmpfs_total"], GI + 255 * MI);
}
