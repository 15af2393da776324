//! The NRI plugin's Kubernetes manifests (deploy/kubernetes) validate,
//! strictly (no unknown fields), against the API schemas of the oldest and
//! the newest Kubernetes versions `kubernetes-validate` carries (offline;
//! tests/env/kubernetes-validate.sh installs it from PyPI once); the
//! kustomization lists every manifest; the DaemonSet's args and the
//! ConfigMap's host config are ones the binary accepts; the DaemonSet asks
//! for no more than it needs (four hostPaths, the NRI socket's directory,
//! the hook's, the log's and the cgroupfs read-only; no host PID, no
//! capability: docs/nri.md), and
//! its ConfigMap sets a log file in the log directory it mounts, which the
//! plugin writes (docs/kubernetes.md#where-the-warnings-go); its metrics port
//! and the optional monitoring manifests (deploy/kubernetes/monitoring:
//! the ServiceMonitor against the part of the Prometheus Operator's
//! ServiceMonitor schema it uses, in tests/host/schemas).

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::support::kube::{kubernetes_python as python, validate_manifests};
use crate::support::*;

const DIR: &str = "deploy/kubernetes";

/// The DaemonSet's hostPath volumes (name, path), sorted.
const HOST_PATHS: [(&str, &str); 4] = [
    ("cgroup", "/sys/fs/cgroup"),
    ("hook-dir", "/opt/oci-tmpfs-hook"),
    ("log-dir", "/var/log/oci-tmpfs-hook"),
    ("nri-socket", "/var/run/nri"),
];

/// A YAML file as JSON (PyYAML comes with kubernetes-validate).
fn load(py: &Path, file: &Path) -> Value {
    let code = format!("import yaml, json\nprint(json.dumps(yaml.safe_load(open({:?}))))", file);
    serde_json::from_str(&ok(Command::new(py).arg("-c").arg(code))).unwrap()
}

#[test]
fn nri_manifests_validate_on_oldest_and_newest_kubernetes() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(DIR);
    let py = python();
    let kustomization = load(&py, &dir.join("kustomization.yaml"));
    let resources: Vec<String> = kustomization["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap().to_string())
        .collect();
    validate_manifests("nri manifests", &dir, &resources);
}

/// The plugin's container mounts the node's cgroupfs read-only where its
/// `--cgroup-root` says (the per-container series read it).
fn assert_cgroup_read_only(c: &Value) {
    let cgroup = c["volumeMounts"].as_array().unwrap().iter().find(|m| m["name"] == "cgroup");
    assert!(cgroup.is_some_and(|m| m["readOnly"] == true && m["mountPath"] == "/host/sys/fs/cgroup"), "{c}");
    let args: Vec<&str> = c["args"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    let at = args.iter().position(|a| *a == "--cgroup-root").map(|i| args[i + 1]);
    assert_eq!(at, Some("/host/sys/fs/cgroup"), "{args:?}");
}

#[test]
fn daemonset_asks_only_for_what_it_needs_and_its_args_run() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(DIR);
    let py = python();
    let ds = load(&py, &dir.join("daemonset.yaml"));
    let pod = &ds["spec"]["template"]["spec"];
    assert_eq!(pod["priorityClassName"], "system-node-critical");
    // The plugin exits within a second of SIGTERM (docs/nri.md#stopping):
    // a grace period of a few seconds only bounds one that does not.
    let grace = pod["terminationGracePeriodSeconds"].as_u64().unwrap_or(30);
    assert!((2..=5).contains(&grace), "terminationGracePeriodSeconds {grace}");
    let mut host_paths: Vec<(&str, &str)> = pod["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| Some((v["name"].as_str()?, v.get("hostPath")?["path"].as_str()?)))
        .collect();
    host_paths.sort();
    assert_eq!(host_paths, HOST_PATHS, "the socket's, the hook's, the log's directories, the cgroupfs");
    // The hook grows the pod's /dev/shm: no host PID, capability or AppArmor exception.
    assert!(pod.get("hostPID").is_none_or(|v| v == false), "{pod}");
    // Its only annotations: the scrape ones, naming the `metrics` port that
    // --metrics-address listens on (docs/nri.md#metrics), and the NRI
    // validator's toleration, so that a node requiring this plugin still
    // starts the plugin's own pod (docs/nri.md#fail-closed).
    let annotations = &ds["spec"]["template"]["metadata"]["annotations"];
    assert_eq!(
        annotations,
        &serde_json::json!({
            "prometheus.io/scrape": "true",
            "prometheus.io/port": "9464",
            "prometheus.io/path": "/metrics",
            "tolerate-missing-nri-plugins.noderesource.dev": "true",
        })
    );
    let c = &pod["containers"][0];
    let sc = &c["securityContext"];
    assert_ne!(sc["privileged"], true);
    assert_eq!(sc["capabilities"]["drop"], serde_json::json!(["ALL"]));
    assert!(sc["capabilities"].get("add").is_none(), "{sc}");
    assert_eq!(sc["readOnlyRootFilesystem"], true);
    let mounted: Vec<(&str, &str)> = c["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["name"].as_str().unwrap(), m["mountPath"].as_str().unwrap()))
        .collect();
    assert!(mounted.contains(&("hook-dir", "/host/opt/oci-tmpfs-hook")), "{mounted:?}");
    // The log directory at the node's path: one log_file for hook and plugin.
    assert!(mounted.contains(&("log-dir", "/var/log/oci-tmpfs-hook")), "{mounted:?}");
    assert_cgroup_read_only(c);
    let args: Vec<&str> = c["args"].as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
    let after = |flag: &str| args.iter().position(|a| *a == flag).map(|i| args[i + 1]);
    assert_eq!(after("--hook-dir"), Some("/opt/oci-tmpfs-hook"), "{args:?}");
    assert_eq!(after("--hook-dir-mount"), Some("/host/opt/oci-tmpfs-hook"), "{args:?}");
    assert!(!args.contains(&"--host-root"), "{args:?}");
    assert_eq!(after("--metrics-address"), Some("0.0.0.0:9464"), "{args:?}");
    assert_eq!(
        c["ports"],
        serde_json::json!([{"name": "metrics", "containerPort": 9464, "protocol": "TCP"}])
    );
    assert!(
        c["resources"]["requests"]["memory"].is_string() && c["resources"]["limits"]["memory"].is_string()
    );

    let tmp = std::env::temp_dir().join(crate::support::unique("nri-manifests"));
    std::fs::create_dir_all(&tmp).unwrap();
    let (config, logged) = configmap_here(&py, &dir, &tmp);

    // The args run: with the socket and config pointed here, the plugin
    // starts, says once that the socket is missing, and keeps waiting.
    let mut args: Vec<String> =
        c["args"].as_array().unwrap().iter().map(|a| a.as_str().unwrap().to_string()).collect();
    let mut set = |flag: &str, value: &Path| {
        let i = args.iter().position(|a| a == flag).unwrap_or_else(|| panic!("no {flag} in {args:?}")) + 1;
        args[i] = value.display().to_string();
    };
    set("--socket", &tmp.join("nri.sock"));
    set("--config", &config);
    set("--status-file", &tmp.join("registered"));
    let hook_dir = tmp.join("hook-dir");
    std::fs::create_dir_all(&hook_dir).unwrap();
    set("--hook-dir-mount", &hook_dir);
    // A port of loopback the kernel picks, not the pod's 9464.
    set("--metrics-address", Path::new("127.0.0.1:0"));
    let log = tmp.join("plugin.log");
    let mut child = Command::new(crate::support::hook_bin())
        .args(&args)
        .env("TMPDIR", &tmp)
        .env("OCI_TMPFS_HOOK_LOG", "info")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    // Copying the (debug) binary durably takes a moment before it dials.
    let t0 = std::time::Instant::now();
    let mut err = String::new();
    while t0.elapsed() < Duration::from_secs(20) && !err.contains("connecting to the NRI socket") {
        std::thread::sleep(Duration::from_millis(100));
        err = read_text(&log);
    }
    std::thread::sleep(Duration::from_millis(300));
    let scraped = scrape_logged(&err);
    let running = matches!(child.try_wait(), Ok(None));
    let _ = child.kill();
    let _ = child.wait();
    let installed = (hook_dir.join("oci-tmpfs-hook").is_file(), hook_dir.join("config.toml").is_file());
    // Read before the directory goes; a failed read fails the check below.
    let in_file = std::fs::read_to_string(&logged).map_err(|e| format!("reading {}: {e}", logged.display()));
    let _ = std::fs::remove_dir_all(&tmp);
    let in_file = in_file.unwrap_or_else(|e| panic!("{e}"));
    assert!(in_file.contains("connecting to the NRI socket"), "the plugin's log_file holds:\n{in_file}");
    assert!(running, "{args:?} exited: {err}");
    assert!(err.contains("connecting to the NRI socket"), "{err}");
    assert_eq!(installed, (true, true), "the plugin did not fill --hook-dir-mount: {err}");
    // Not registered (no runtime here), and saying so.
    assert!(scraped.starts_with("HTTP/1.1 200 OK\r\n"), "{scraped}");
    assert!(scraped.contains("\noci_tmpfs_hook_nri_registered 0\n"), "{scraped}");
}

/// The ConfigMap's host config, written into `tmp` with its `log_file` in
/// `tmp` too (the config's path, the log's): it parses (doctor's config
/// line), and it sets a log file in the log directory the DaemonSet mounts,
/// where the hook's warnings go and nowhere else
/// (docs/kubernetes.md#where-the-warnings-go).
fn configmap_here(py: &Path, dir: &Path, tmp: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let cm = load(py, &dir.join("configmap.yaml"));
    let text = cm["data"]["config.toml"].as_str().unwrap();
    let parsed: toml::Value = toml::from_str(text).unwrap();
    assert_eq!(
        parsed.get("log_file").and_then(|v| v.as_str()),
        Some("/var/log/oci-tmpfs-hook/oci-tmpfs-hook.log"),
        "the ConfigMap's log_file:\n{text}"
    );
    let logged = tmp.join("oci-tmpfs-hook.log");
    let text = text.replace("\"/var/log/oci-tmpfs-hook/oci-tmpfs-hook.log\"", &format!("{logged:?}"));
    let config = tmp.join("config.toml");
    std::fs::write(&config, &text).unwrap();
    let doctor =
        Command::new(crate::support::hook_bin()).arg("doctor").arg("--config").arg(&config).output().unwrap();
    let doctor = String::from_utf8_lossy(&doctor.stdout).into_owned();
    assert!(doctor.lines().any(|l| l.starts_with("ok") && l.contains("config:")), "{doctor}");
    (config, logged)
}

/// `GET /metrics` from the address in a plugin's log line
/// `nri: metrics at http://ADDR/metrics`: the whole answer.
fn scrape_logged(log: &str) -> String {
    use std::io::{Read, Write};
    let addr = log
        .lines()
        .find_map(|l| l.split("nri: metrics at http://").nth(1)?.strip_suffix("/metrics"))
        .unwrap_or_else(|| panic!("no metrics address in the log: {log}"));
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

/// The optional monitoring manifests (deploy/kubernetes/monitoring): the
/// kustomization lists all three; the Service validates with
/// kubernetes-validate (oldest and newest Kubernetes) and selects the
/// DaemonSet's pods on its `metrics` port; the ServiceMonitor and the
/// PrometheusRule (whose alert reads the per-container series by name)
/// validate against the Prometheus Operator's schemas as far as the
/// manifests use them (written here from the operator's API reference:
/// tests/host/schemas),
/// strictly: an object with `properties` admits no other field unless the
/// schema says `x-kubernetes-preserve-unknown-fields` (as the API server's
/// strict field validation). The same check refuses a misspelt field, so it
/// can fail.
#[test]
fn monitoring_manifests_validate_service_servicemonitor_and_rule() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join(DIR);
    let dir = root.join("monitoring");
    let py = python();
    let kustomization = load(&py, &dir.join("kustomization.yaml"));
    assert_eq!(
        kustomization["resources"],
        serde_json::json!(["service.yaml", "servicemonitor.yaml", "prometheusrule.yaml"])
    );
    let versions = ok(Command::new(&py).args([
        "-c",
        "import kubernetes_validate.utils as u\n\
         v = sorted(set(u.all_versions()), key=lambda s: tuple(map(int, s.split('.'))))\n\
         print(v[0], v[-1])",
    ]));
    for k in versions.split_whitespace() {
        let out = ok(Command::new(&py)
            .args(["-m", "kubernetes_validate", "--strict", "-k", k])
            .arg(dir.join("service.yaml")));
        assert!(out.contains(" passed for resource "), "kubernetes {k}: {out}");
    }
    let svc = load(&py, &dir.join("service.yaml"));
    let ds = load(&py, &root.join("daemonset.yaml"));
    assert_eq!(svc["metadata"]["namespace"], ds["metadata"]["namespace"]);
    assert_eq!(svc["spec"]["selector"], ds["spec"]["selector"]["matchLabels"]);
    assert_eq!(svc["spec"]["ports"][0]["targetPort"], "metrics");
    let sm = load(&py, &dir.join("servicemonitor.yaml"));
    assert_eq!(sm["spec"]["selector"]["matchLabels"], svc["metadata"]["labels"]);
    assert_eq!(sm["spec"]["endpoints"][0]["port"], svc["spec"]["ports"][0]["name"]);
    let schemas = root.join("../../tests/host/schemas");
    let check = r#"
import json, sys, yaml, jsonschema
crd = yaml.safe_load(open(sys.argv[1]))
schema = next(v for v in crd["spec"]["versions"] if v["name"] == "v1")["schema"]["openAPIV3Schema"]
def strict(s):
    if isinstance(s, dict):
        if "properties" in s and not s.get("x-kubernetes-preserve-unknown-fields"):
            s.setdefault("additionalProperties", False)
        for v in list(s.values()):
            strict(v)
    elif isinstance(s, list):
        for v in s:
            strict(v)
strict(schema)
doc = yaml.safe_load(open(sys.argv[2]))
assert doc["apiVersion"] == crd["spec"]["group"] + "/v1" and doc["kind"] == crd["spec"]["names"]["kind"], doc
v = jsonschema.Draft7Validator(schema)
bad = json.loads(json.dumps(doc))
spec = bad["spec"]
one = spec["endpoints"][0] if "endpoints" in spec else spec["groups"][0]["rules"][0]
good, typo = ("port", "prot") if "port" in one else ("expr", "exrp")
one[typo] = one.pop(good)
errors = [e.message for e in v.iter_errors(doc)]
refused = [e.message for e in v.iter_errors(bad)]
print(json.dumps({"errors": errors, "misspelt_refused": refused}))
"#;
    for (schema, file, misspelt) in [
        ("servicemonitor-v1-subset.yaml", "servicemonitor.yaml", "prot"),
        ("prometheusrule-v1-subset.yaml", "prometheusrule.yaml", "exrp"),
    ] {
        let out = ok(Command::new(&py).arg("-c").arg(check).arg(schemas.join(schema)).arg(dir.join(file)));
        let v: Value = serde_json::from_str(out.trim()).unwrap();
        assert_eq!(v["errors"], serde_json::json!([]), "{file}: {out}");
        assert!(
            v["misspelt_refused"]
                .as_array()
                .is_some_and(|a| a.iter().any(|e| e.as_str().unwrap_or("").contains(misspelt))),
            "{file}: {out}"
        );
    }
    // The alerts read the series the plugin and `usage --prometheus` serve, by their names.
    let rule = load(&py, &dir.join("prometheusrule.yaml"));
    let exprs: Vec<&str> = rule["spec"]["groups"][0]["rules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["expr"].as_str().unwrap())
        .collect();
    let reads = [
        ["oci_tmpfs_hook_container_shmem_bytes", "oci_tmpfs_hook_container_memory_limit_bytes"],
        ["oci_tmpfs_hook_container_tmpfs_used_bytes", "oci_tmpfs_hook_container_tmpfs_size_bytes"],
    ];
    assert_eq!(exprs.len(), reads.len(), "{exprs:?}");
    for (expr, series) in exprs.iter().zip(reads) {
        assert!(series.iter().all(|s| expr.contains(s)), "the alert's expr does not read {series:?}: {expr}");
    }
    assert_eq!(rule["metadata"]["namespace"], ds["metadata"]["namespace"]);
}

/// The DaemonSet's readiness and liveness probes run `nri --probe` on the
/// status file its args name (docs/nri.md); as written, that command says
/// "not registered" (exit 1) when no plugin keeps the file.
#[test]
fn daemonset_probes_read_the_plugins_status_file() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(DIR);
    let ds = load(&python(), &dir.join("daemonset.yaml"));
    let c = &ds["spec"]["template"]["spec"]["containers"][0];
    let strings = |v: &Value| -> Vec<String> {
        v.as_array().unwrap().iter().map(|a| a.as_str().unwrap().to_string()).collect()
    };
    let args = strings(&c["args"]);
    let at = args.iter().position(|a| a == "--status-file").unwrap_or_else(|| panic!("{args:?}"));
    let status = &args[at + 1];
    for probe in ["readinessProbe", "livenessProbe"] {
        let cmd = strings(&c[probe]["exec"]["command"]);
        assert_eq!(
            cmd,
            ["/usr/local/bin/oci-tmpfs-hook", "nri", "--probe", "--status-file", status],
            "{probe}"
        );
    }
    let mut cmd = strings(&c["livenessProbe"]["exec"]["command"]);
    let missing = std::env::temp_dir().join(crate::support::unique("no-plugin")).join("registered");
    *cmd.last_mut().unwrap() = missing.display().to_string();
    let out = Command::new(crate::support::hook_bin()).args(&cmd[1..]).output().unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(said.contains("not registered with the runtime now"), "{said}");
}
