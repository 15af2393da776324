//! `explain --manifest` (docs/explain.md) against real pods: for pods as the
//! CRI suite creates them (tests/support/cases.rs: containerd's CRI API, the
//! RuntimeClass wrapper in spec and in hook mode), the equivalent manifest
//! explained with the node's host config must agree with what each real
//! container sees on every size: `/tmp`, each `TMPDIR`, and the pod's
//! `/dev/shm` once all its containers run; a container explain leaves alone
//! has no mount of ours, and a volume at `/tmp` stays the volume.

use std::io::Write as _;
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::support::cases::each_way;
use crate::support::cri::*;
use crate::support::pods::*;
use crate::support::*;

/// A container of a test pod, as CRI gets it and as a manifest writes it.
struct Ctr {
    name: &'static str,
    readonly: bool,
    memory: u64,
    env: &'static [(&'static str, &'static str)],
    /// A hostPath volume at `/tmp`.
    tmp_volume: bool,
}

const fn ro(name: &'static str, memory: u64) -> Ctr {
    Ctr { name, readonly: true, memory, env: &[], tmp_volume: false }
}

/// A test pod.
struct PodCase {
    name: &'static str,
    annotations: &'static [(&'static str, &'static str)],
    host_ipc: bool,
    containers: &'static [Ctr],
}

const PODS: [PodCase; 3] = [
    PodCase {
        name: "mixed",
        annotations: &[],
        host_ipc: false,
        containers: &[
            ro("small", GI),
            Ctr { env: &[("TMPDIR", "/scratch")], ..ro("big", 4 * GI) },
            Ctr { readonly: false, ..ro("rw", GI) },
            Ctr { tmp_volume: true, ..ro("vol", 2 * GI) },
        ],
    },
    PodCase {
        name: "annotated",
        annotations: &[(ANN_TMP, "100Mi"), (ANN_SHM, "3Gi")],
        host_ipc: false,
        containers: &[ro("app", GI), Ctr { env: &[("TEMP", "/var/tmp")], ..ro("other", 8 * GI) }],
    },
    PodCase { name: "hostipc", annotations: &[], host_ipc: true, containers: &[ro("app", GI)] },
];

/// The manifest for `pod`: a Deployment whose template is the pod.
fn manifest(pod: &PodCase, host_dir: &str) -> String {
    let mut y = format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: {}}}\nspec:\n  template:\n",
        pod.name
    );
    y.push_str("    metadata:\n      annotations:\n");
    for (k, v) in pod.annotations {
        y.push_str(&format!("        {k}: \"{v}\"\n"));
    }
    if pod.annotations.is_empty() {
        y.push_str("        {}\n");
    }
    y.push_str(&format!(
        "    spec:\n      hostIPC: {}\n      volumes:\n      - name: vol\n        hostPath: {{path: {host_dir}}}\n      containers:\n",
        pod.host_ipc
    ));
    for c in pod.containers {
        y.push_str(&format!("      - name: {}\n        image: busybox\n", c.name));
        y.push_str(&format!("        securityContext: {{readOnlyRootFilesystem: {}}}\n", c.readonly));
        y.push_str(&format!("        resources: {{limits: {{memory: {}Mi}}}}\n", c.memory / MI));
        for (k, v) in c.env {
            y.push_str(&format!("        env: [{{name: {k}, value: \"{v}\"}}]\n"));
        }
        if c.tmp_volume {
            y.push_str("        volumeMounts: [{name: vol, mountPath: /tmp}]\n");
        }
    }
    y
}

/// `explain --manifest - --json` with the node's host config for its way.
fn explain(node: &Node, yaml: &str) -> Result<Value, String> {
    let config = node.ns_path(node.way.config_file());
    let mut child = Command::new(hook_bin())
        .args(["explain", "--manifest", "-", "--json", "--config"])
        .arg(&config)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| e.to_string())?;
    child.stdin.take().unwrap().write_all(yaml.as_bytes()).map_err(|e| e.to_string())?;
    let out = child.wait_with_output().map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(format!("explain --manifest: {}", text(&out.stderr)));
    }
    serde_json::from_slice(&out.stdout).map_err(|e| e.to_string())
}

/// What explain planned for a container: (target, bytes), `/dev/shm` included.
fn planned(c: &Value) -> Vec<(String, u64)> {
    let actions = c["plan"]["actions"]
        .as_array()
        .unwrap_or_else(|| panic!("explain has no plan.actions for container {}: {}", c["name"], c["plan"]));
    actions
        .iter()
        .map(|a| {
            let target = a["target"].as_str().unwrap_or("/dev/shm").to_string();
            (target, a["size"]["bytes"].as_u64().unwrap_or(0))
        })
        .collect()
}

fn run_pod(node: &mut Node, r: &mut Report, pod: &PodCase) {
    let host_dir = node.dir.join(format!("vol-{}", pod.name));
    std::fs::create_dir_all(&host_dir).unwrap();
    let yaml = manifest(pod, &host_dir.display().to_string());
    let Some(explained) = r.step(&format!("{}: explain", pod.name), explain(node, &yaml)) else { return };
    let report = &explained["pods"][0];
    let opts = PodOpts {
        annotations: pod.annotations,
        host_ipc: pod.host_ipc,
        memory: 16 * GI,
        ..PodOpts::default()
    };
    let Some(p) = r.step(&format!("{}: RunPodSandbox", pod.name), node.run_pod(pod.name, &opts)) else {
        return;
    };
    let volume = [vol("/tmp", &host_dir, "PROPAGATION_PRIVATE")];
    let mut ids = Vec::new();
    for c in pod.containers {
        let opts = CtrOpts {
            name: c.name,
            readonly: c.readonly,
            memory: Some(c.memory),
            env: c.env,
            image: None,
            mounts: if c.tmp_volume { &volume } else { &[] },
            user: None,
        };
        match r.step(&format!("{}: start {}", pod.name, c.name), node.start_container(&p, &opts)) {
            Some(id) => ids.push(id),
            None => return,
        }
    }
    // The pod's /dev/shm as explain has it once every container runs.
    let want_shm = match report["shm"]["kind"].as_str() {
        Some("sandbox") => report["shm"]["size"].as_u64(),
        _ => Some(SHM_64M), // hostIPC: the node's 64 MiB /dev/shm, never resized
    };
    r.seen(&format!("{}: pod /dev/shm", pod.name), format!("explain {} ({})", sz(want_shm), report["shm"]));
    for (c, id) in pod.containers.iter().zip(&ids) {
        let who = format!("{}/{}", pod.name, c.name);
        let explained =
            report["containers"].as_array().and_then(|cs| cs.iter().find(|x| x["name"] == c.name));
        let Some(explained) = explained else {
            r.check(false, format!("{who}: not in explain's report"));
            continue;
        };
        let Some(probe) = r.step(&format!("{who}: probe"), node.probe(id)) else { continue };
        let mounts = parse_mountinfo(&probe);
        let plan = planned(explained);
        let seen: Vec<(String, Option<u64>)> =
            plan.iter().map(|(t, _)| (t.clone(), mount_at(&mounts, t).and_then(MountInfo::size))).collect();
        r.seen(&format!("{who}: explain"), format!("{plan:?}"));
        r.seen(&format!("{who}: seen"), format!("{seen:?}"));
        for ((target, bytes), (_, got)) in plan.iter().zip(&seen) {
            if target == "/dev/shm" {
                continue; // the pod's, checked below
            }
            r.check(
                *got == Some(*bytes),
                format!("{who}: {target}: explain {}, container {}", sz(Some(*bytes)), sz(*got)),
            );
            let ours = mount_at(&mounts, target).is_some_and(|m| m.source == OURS);
            r.check(ours, format!("{who}: {target} is not our tmpfs"));
        }
        let tmp = mount_at(&mounts, "/tmp");
        if !plan.iter().any(|(t, _)| t == "/tmp") {
            // Left alone by explain: the container has no tmpfs of ours there.
            r.check(
                tmp.is_none_or(|m| m.source != OURS),
                format!("{who}: /tmp is ours, explain left it alone"),
            );
        }
        let shm = mount_at(&mounts, "/dev/shm").and_then(MountInfo::size);
        r.check(shm == want_shm, format!("{who}: /dev/shm: explain {}, container {}", sz(want_shm), sz(shm)));
    }
    let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
    r.step(&format!("{}: stop and remove", pod.name), node.teardown(&p, &refs));
}

/// Every size `explain --manifest` gives for the CRI suite's kinds of pod
/// (sized by the memory limit, by `TMPDIR`, by pod annotations, a writable
/// root, a volume at `/tmp`, `hostIPC`) is what the real containers see.
#[test]
fn explain_manifest_agrees_with_real_pods() {
    each_way(Node::wrapper("manifest"), |node, r| {
        for pod in &PODS {
            run_pod(node, r, pod);
        }
    });
}
