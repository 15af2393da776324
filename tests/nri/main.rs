//! The NRI plugin (`oci-tmpfs-hook nri`, docs/nri.md) against a real
//! containerd 2.x with NRI on by default: no runtime class, no handler, no
//! NRI setting in containerd's config. The pod cases of
//! tests/support/cases.rs (which the CRI suite runs through the wrapper)
//! through the plugin, driven over containerd's CRI socket
//! (tests/cri/cri.py), with the plugin running from the built binary in the
//! node's mount namespace, dialling `/var/run/nri/nri.sock` as a
//! DaemonSet's plugin does; and what only NRI has (planning failures, the
//! plugin as a container, a missing hook binary, the bench) and the hostile
//! layouts of tests/support/layouts.rs through the plugin.
//!
//! Run it against sid's containerd 2.1 (docs/design.md#test-machine):
//! `tests/env/nri.sh` (builds, then runs this suite in the sid environment);
//! against containerd 2.3.4, `OCI_TMPFS_HOOK_NRI_CONTAINERD=$(tests/env/containerd.sh build)
//! tests/env/nri.sh` (docs/nri.md#versions). tests/run.sh runs both.
//!
//! Each test starts its own node (tests/support/pods.rs: containerd in a
//! private mount namespace with its own `/etc`, `/dev/shm` and `/run`). The
//! plugin logs at info level to `plugin.log` in the test's directory,
//! printed when a case fails.

#[path = "../support/mod.rs"]
mod support;

use support::cases::{self, each_way};
use support::cri::*;
use support::home;
use support::layouts;
use support::pods::*;
use support::userns;
use support::*;

/// Node boot, crashes and other plugins: the pre-registered plugin serves
/// the first pods, the probe follows the runtime, ours beside other plugins,
/// fail closed.
mod boot;

/// `nri --metrics-address`: the counters move as the pods say; hostile HTTP
/// clients get a 4xx or are dropped.
mod metrics;

/// SIGTERM stops the plugin.
mod stop;

/// The burst bench: pods placed at once, with the plugin, without it, and
/// through the wrapper in hook and spec mode.
mod burst;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};

// ---------------------------------------------------------------- cases

// Boilerplate: one test per case of tests/support/cases.rs, so that libtest
// names, filters and runs each on its own.

/// Case 1 (tests/support/cases.rs): a read-only 1 GiB container.
#[test]
fn case1_read_only_container_gets_sized_tmp_and_shm() {
    each_way(Node::nri("case1"), cases::case1);
}

#[test]
fn case2_pod_annotations_and_their_guardrails() {
    each_way(Node::nri("case2"), cases::case2);
}

#[test]
fn case2_annotations_above_the_memory_limit_are_capped() {
    each_way(Node::nri("case2-limit"), cases::case2_limit);
}

#[test]
fn case3_pod_shm_grows_to_the_largest_container() {
    each_way(Node::nri("case3"), cases::case3);
}

#[test]
fn case4_writable_root_container_is_untouched() {
    each_way(Node::nri("case4"), cases::case4);
}

#[test]
fn case5_tmpdir_missing_in_the_image_gets_a_tmpfs() {
    each_way(Node::nri("case5"), cases::case5);
}

#[test]
fn case6_pause_container_gets_nothing() {
    each_way(Node::nri("case6"), cases::case6);
}

#[test]
fn case7_host_ipc_pod_never_resizes_the_node_shm() {
    each_way(Node::nri("case7"), cases::case7);
}

/// Case 8 through NRI: with the plugin stopped, containers start unchanged.
#[test]
fn case8_plugin_stopped_containers_start_unchanged() {
    each_way(Node::nri("case8"), cases::case8);
}

#[test]
fn case9_containerd_restart_keeps_pods_served() {
    each_way(Node::nri("case9"), cases::case9);
}

/// `usage` on the node: what a pod's container wrote into `/dev/shm`,
/// `/tmp` and `~/.cache`, at their sizes, its shmem and limit.
#[test]
fn usage_shows_what_a_pod_wrote() {
    each_way(Node::nri("usage"), cases::usage);
}

/// `HOME` through the plugin (tests/support/home.rs's pod case): root's
/// `/root` our tmpfs with the image's `.profile`; uid 1000 without a passwd
/// entry keeps `HOME=/`, unwritable, with the hook's warning (the plugin's
/// hook cannot set the environment); a volume at `/root` wins.
#[test]
fn home_through_the_plugin() {
    each_way(Node::nri("home"), home::pod_home);
}

/// The plugin stopped: neither root's `HOME` nor uid 1000's can be written.
#[test]
fn home_without_the_plugin_is_not_writable() {
    let mut node = Node::nri("home-without");
    let mut r = Report::new(&node);
    home::pod_home_without_us(&mut node, &mut r);
    r.finish();
}

/// A `hostUsers: false` pod through the plugin (tests/support/userns.rs):
/// the hook the plugin adds sees the sandbox's user namespace by path and
/// gives `/tmp` and root's `HOME` to the container's root (`0 0` inside),
/// writable, for root and uid 1000; `/dev/shm` grown and writable.
#[test]
fn user_namespaced_pod_owns_its_tmpfs() {
    each_way(userns::node("userns", Executor::Nri), userns::pod_user_namespace);
}

/// Case 10: A container that cannot be planned (a bad size annotation):
/// under `on_error = "warn"` it starts without our mounts, under `"fail"`
/// its creation fails with our message; one log line names it.
#[test]
fn case10_planning_failures_follow_on_error() {
    let mut r = Report::of("nri", "case10");
    let mut node = Node::nri("case10");
    let ann = [(ANN_TMP, "lots")];
    for policy in ["warn", "fail"] {
        node.host_config(&format!("on_error = \"{policy}\"\n"));
        let opts = PodOpts { annotations: &ann, ..PodOpts::default() };
        let name = format!("bad-{policy}");
        let Some(pod) = r.step("RunPodSandbox", node.run_pod(&name, &opts)) else { return r.finish() };
        let started = node.start_container(&pod, &CtrOpts::ro("app", GI));
        r.seen(&format!("on_error = {policy}"), format!("{started:?}"));
        let line = node
            .read("plugin.log")
            .lines()
            .find(|l| l.contains(&format!("default/{name}/app")))
            .map(String::from);
        r.seen("its log line", format!("{line:?}"));
        r.check(
            line.as_ref().is_some_and(|l| l.contains("lots")),
            format!("{policy}: no log line naming default/{name}/app and the value"),
        );
        match (policy, started) {
            ("warn", Ok(c)) => {
                if let Some(p) = r.step("probe", node.probe(&c)) {
                    r.untouched("on_error = warn", &p, SHM_64M);
                }
                r.step("stop and remove", node.teardown(&pod, &[&c]));
            }
            ("fail", Err(e)) => {
                r.check(e.contains("oci-tmpfs-hook"), format!("the failure does not say it is ours: {e}"));
                r.step("stop and remove", node.teardown(&pod, &[]));
            }
            (_, other) => r.check(false, format!("on_error = {policy}: {other:?}")),
        }
    }
    r.finish();
}

// ---------------------------------------------------------------- bench

/// The plugin's resident and peak memory (`VmRSS`, `VmHWM`) in KiB.
fn plugin_memory(node: &Node) -> (u64, u64) {
    let pid = node.plugin.as_ref().expect("the plugin runs").id();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib = |key: &str| -> u64 {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    };
    (kib("VmRSS:"), kib("VmHWM:"))
}

/// One bench.py call with `request` on stdin: its JSON answer.
fn bench_py(node: &Node, args: &[&str], request: &Value) -> Value {
    let mut cmd = cri_command();
    cmd.arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/nri/bench.py"))
        .arg("--socket")
        .arg(&node.sock)
        .args(args);
    let out = run_with_stdin(&mut cmd, serde_json::to_vec(request).unwrap(), Duration::from_secs(3600))
        .expect("bench.py timed out");
    assert!(out.status.success(), "bench.py {args:?}: {}", text(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn stats(v: &mut [f64]) -> String {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let mean = v.iter().sum::<f64>() / v.len() as f64;
    format!(
        "median {:.1} ms, mean {:.1} ms, min {:.1} ms, max {:.1} ms (n={})",
        v[v.len() / 2] * 1e3,
        mean * 1e3,
        v[0] * 1e3,
        v[v.len() - 1] * 1e3,
        v.len()
    )
}

/// The plugin's own times per `CreateContainer` (its debug line
/// "CreateContainer answered in X ms"), in ms.
fn plugin_times(node: &Node) -> Vec<f64> {
    node.read("plugin.log")
        .lines()
        .filter_map(|l| l.split("CreateContainer answered in ").nth(1)?.strip_suffix(" ms")?.parse().ok())
        .collect()
}

/// The `q` quantile (0..1) of sorted `v`.
fn quantile(v: &[f64], q: f64) -> f64 {
    v[((v.len() - 1) as f64 * q).round() as usize]
}

/// The most the plugin's own p99 time per `CreateContainer` may be: its
/// work is a pure plan and an answer (about 0.5 ms under a load of 10,
/// BENCHMARKS.md#nri-1000); a blocking call in it (a timeout, a retry, a
/// synchronous write) breaks this, a busy machine does not.
const BENCH_MAX_P99_MS: f64 = 100.0;
/// The most the plugin's peak memory (`VmHWM`) may be: about 4 MiB measured.
const BENCH_MAX_HWM_KIB: u64 = 32 << 10;
/// The most the plugin's `VmRSS` may grow over the second half of the pods,
/// after the first half touched most of what it needs once: 12 KiB measured
/// over the second 500 of 1,000 pods, about 330 KiB over the second 4 of 8
/// (the smoke run), so a leak of 4 KiB a pod breaks it at 1,000.
const BENCH_MAX_GROWTH_KIB: u64 = 2 << 10;

/// The bench (run with `--ignored`: `bench/nri.sh`, and `tests/run.sh`'s
/// smoke run of 2 rounds and 8 pods): what the plugin adds to a container
/// start, against a median ratio target of 1.01 (BENCHMARKS.md#nri-1000).
/// The plugin serves metrics (`--metrics-address`).
/// 1. CRI CreateContainer + StartContainer of a read-only 1 GiB container
///    with the plugin (its adjustment: our hook at createRuntime, which
///    mounts `/tmp` and grows the pod's `/dev/shm`) and without it,
///    alternating (`NRI_BENCH_ROUNDS` pairs, default 30), timed inside one
///    client process: the median ratio.
/// 2. `NRI_BENCH_PODS` pods (default 1000), one after the other, each
///    RunPodSandbox, the container created, started, stopped and removed,
///    then the pod stopped and removed, in two halves: the plugin's RSS
///    idle and after each half (flat under churn?); its own time per
///    CreateContainer over the pods (p50, p99, from its debug line), and
///    the latency histogram's count and mean from a scrape.
/// 3. The cost of `--metrics-address`: the plugin restarted without it,
///    `NRI_BENCH_PODS / 4` pods more, the same numbers.
///
/// It fails, after printing every number, when the plugin did not answer
/// every pod's `CreateContainer` exactly once (its debug lines, and the
/// histogram's count), or a bound above is broken: `BENCH_MAX_P99_MS`,
/// `BENCH_MAX_HWM_KIB`, `BENCH_MAX_GROWTH_KIB`. The ratio of step 1 has no
/// bound: at the load CI runs under, it cannot resolve ±10 ms.
#[test]
#[ignore = "a bench (minutes): bench/nri.sh runs it, and tests/run.sh as a smoke run with its bounds"]
fn bench_nri_latency_and_memory() {
    let env = |k: &str, d: usize| std::env::var(k).ok().and_then(|v| v.parse().ok()).unwrap_or(d);
    let rounds = env("NRI_BENCH_ROUNDS", 30);
    let pods = env("NRI_BENCH_PODS", 1000);
    let mut node = Node::nri("bench");
    let metrics_args = ["--metrics-address".to_string(), "127.0.0.1:0".to_string()];
    node.stop_plugin();
    node.start_plugin_with(&metrics_args);
    let idle = plugin_memory(&node);
    let pod = node.run_pod("bench", &PodOpts::default()).expect("RunPodSandbox");
    let request = node.container_request(&pod, &CtrOpts::ro("bench", GI));
    let secs = |v: &Value| v["seconds"].as_f64().unwrap();
    // Warm-up: the image's first unpack, the pod's shm grown once.
    for _ in 0..3 {
        bench_py(&node, &["start"], &request);
    }
    let (mut with, mut without) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        with.push(secs(&bench_py(&node, &["start"], &request)));
        node.stop_plugin();
        without.push(secs(&bench_py(&node, &["start"], &request)));
        node.start_plugin_with(&metrics_args);
    }
    let (w, wo) = (stats(&mut with), stats(&mut without));
    let ratio = with[with.len() / 2] / without[without.len() / 2];
    let delta = (with[with.len() / 2] - without[without.len() / 2]) * 1e3;
    say(&format!("nri bench: containerd {}, plugin {}", node.ctd.version, plugin_bin().display()));
    say(&format!("nri bench: CreateContainer+StartContainer with the plugin (our hook):  {w}"));
    say(&format!("nri bench: CreateContainer+StartContainer without the plugin:         {wo}"));
    say(&format!("nri bench: median ratio with/without: {ratio:.3}, median difference {delta:.1} ms"));
    let _ = node.teardown(&pod, &[]);
    // 2: pods, with metrics, in one plugin process.
    let mut pod_request = request.clone();
    pod_request["runtime_handler"] = json!(Executor::Nri.handler());
    let addr = metrics_addr(&node);
    let fresh = plugin_memory(&node);
    let mark = plugin_times(&node).len();
    let half = (pods / 2).max(1);
    let first = bench_py(&node, &["pods", &half.to_string()], &pod_request);
    let after_half = plugin_memory(&node);
    let second = bench_py(&node, &["pods", &half.to_string()], &pod_request);
    let after_all = plugin_memory(&node);
    let on = own_times(&node, mark);
    let (count, mean) = scrape_metrics(addr);
    say(&format!(
        "nri bench: plugin memory idle (registered, no container): VmRSS {} KiB, VmHWM {} KiB",
        idle.0, idle.1
    ));
    say(&format!(
        "nri bench: {} pods ({:.0} s and {:.0} s per half): VmRSS {} KiB before, {} KiB after {half}, {} KiB after {}; VmHWM {} KiB",
        2 * half,
        secs(&first),
        secs(&second),
        fresh.0,
        after_half.0,
        after_all.0,
        2 * half,
        after_all.1
    ));
    say(&format!(
        "nri bench: the plugin's own time per CreateContainer over the pods, --metrics-address on: {on}"
    ));
    say(&format!("nri bench: its latency histogram: count {count}, mean {:.3} ms", mean * 1e3));
    // 3: the same plugin without metrics.
    node.stop_plugin();
    node.start_plugin();
    let fresh_off = plugin_memory(&node);
    let mark = plugin_times(&node).len();
    let quarter = (pods / 4).max(1);
    bench_py(&node, &["pods", &quarter.to_string()], &pod_request);
    let after_off = plugin_memory(&node);
    let off = own_times(&node, mark);
    say(&format!(
        "nri bench: the plugin's own time per CreateContainer, {quarter} pods, --metrics-address off: {off}"
    ));
    say(&format!(
        "nri bench: plugin memory without metrics: VmRSS {} KiB fresh, {} KiB after {quarter} pods (with metrics: {} KiB fresh)",
        fresh_off.0, after_off.0, fresh.0
    ));
    let mut broken = Vec::new();
    for (what, own, want) in [("metrics on", &on, 2 * half), ("metrics off", &off, quarter)] {
        if own.n != want {
            broken.push(format!("{what}: {} CreateContainer answers for {want} pods", own.n));
        }
        if own.p99 > BENCH_MAX_P99_MS {
            broken.push(format!("{what}: p99 {:.3} ms over {BENCH_MAX_P99_MS} ms", own.p99));
        }
    }
    if count != (2 * half) as f64 {
        broken.push(format!("the histogram counts {count} answers for {} pods", 2 * half));
    }
    for (what, hwm) in [("metrics on", after_all.1), ("metrics off", after_off.1)] {
        if hwm > BENCH_MAX_HWM_KIB {
            broken.push(format!("{what}: VmHWM {hwm} KiB over {BENCH_MAX_HWM_KIB} KiB"));
        }
    }
    let growth = after_all.0.saturating_sub(after_half.0);
    if growth > BENCH_MAX_GROWTH_KIB {
        broken.push(format!(
            "VmRSS grew {growth} KiB over the second {half} pods, over {BENCH_MAX_GROWTH_KIB} KiB"
        ));
    }
    assert!(broken.is_empty(), "nri bench:\n  {}", broken.join("\n  "));
}

/// The plugin's own times per `CreateContainer` over some pods, in ms.
struct Own {
    p50: f64,
    p99: f64,
    max: f64,
    n: usize,
}

impl std::fmt::Display for Own {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms (n={})", self.p50, self.p99, self.max, self.n)
    }
}

/// The plugin's own times per CreateContainer from the `mark`th on (all
/// zero, n = 0, when there are none).
fn own_times(node: &Node, mark: usize) -> Own {
    let mut own: Vec<f64> = plugin_times(node).split_off(mark);
    own.sort_by(|a, b| a.partial_cmp(b).unwrap());
    if own.is_empty() {
        return Own { p50: 0.0, p99: 0.0, max: 0.0, n: 0 };
    }
    Own { p50: quantile(&own, 0.5), p99: quantile(&own, 0.99), max: own[own.len() - 1], n: own.len() }
}

/// `nri: metrics at http://ADDR/metrics`, the last in the plugin's log.
fn metrics_addr(node: &Node) -> std::net::SocketAddr {
    node.read("plugin.log")
        .lines()
        .rev()
        .find_map(|l| l.split("nri: metrics at http://").nth(1)?.strip_suffix("/metrics"))
        .and_then(|a| a.parse().ok())
        .expect("the plugin's metrics address in its log")
}

/// The adjustment latency histogram of one scrape: count and mean (s).
fn scrape_metrics(addr: std::net::SocketAddr) -> (f64, f64) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).expect("the metrics endpoint");
    s.write_all(b"GET /metrics HTTP/1.1\r\n\r\n").unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let get = |name: &str| -> f64 {
        out.lines()
            .find_map(|l| l.strip_prefix(&format!("oci_tmpfs_hook_nri_adjustment_duration_seconds_{name} ")))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0)
    };
    let (count, sum) = (get("count"), get("sum"));
    (count, sum / count.max(1.0))
}

/// Case 11: The plugin from the node image, as the DaemonSet runs it: a
/// real container of its own pod (host network, pod PID), read-only root,
/// every capability dropped, seccomp RuntimeDefault; its host paths are the
/// NRI socket's directory and the hook directory (node path
/// `<case>/hook-dir`, mounted at /host/opt/oci-tmpfs-hook; plus the
/// ConfigMap's and the emptyDir's stand-ins). Before it registers it has
/// copied its binary (0755) and host config (0644) there; then a read-only
/// pod gets its mounts from the hook the adjustment names, the pod's shm
/// grown in the container's namespace. The image is the Containerfile's
/// content (the static binary at /usr/local/bin on an empty root), built
/// here as an OCI layout: the test host runs no Docker daemon
/// (deploy/build-image.sh makes the same image with `docker build`).
/// `OCI_TMPFS_HOOK_NRI_BIN` names the static binary (tests/env/nri.sh builds it).
#[test]
fn case11_plugin_from_the_node_image_as_a_container() {
    let mut r = Report::of("nri", "case11");
    let Some(bin) = std::env::var_os("OCI_TMPFS_HOOK_NRI_BIN").map(PathBuf::from) else {
        panic!("case11 needs OCI_TMPFS_HOOK_NRI_BIN: the static binary (tests/env/nri.sh builds it)");
    };
    let mut node = Node::nri("case11");
    node.stop_plugin();
    let root = node.dir.join("plugin-image-root");
    std::fs::create_dir_all(root.join("usr/local/bin")).unwrap();
    std::fs::copy(&bin, root.join("usr/local/bin/oci-tmpfs-hook")).unwrap();
    let reference = format!("docker.io/library/{}:latest", unique("oci-tmpfs-hook"));
    let tar =
        build_image_with(&node.dir, &root, &reference, &["/usr/local/bin/oci-tmpfs-hook"], "plugin-image");
    ok(node.ctr().args(["images", "import"]).arg(&tar));
    for d in ["cm", "plugin-tmp", "hook-dir"] {
        std::fs::create_dir_all(node.dir.join(d)).unwrap();
    }
    let hook_dir = node.dir.join("hook-dir");
    let cm = "log_level = \"debug\"\n";
    std::fs::write(node.dir.join("cm/config.toml"), cm).unwrap();
    let opts = PodOpts { memory: 64 * MI, ..PodOpts::default() };
    let Some(plugin_pod) = r.step("RunPodSandbox (plugin)", node.run_pod("nri-plugin", &opts)) else {
        return r.finish();
    };
    let (cm_dir, tmp) = (node.dir.join("cm"), node.dir.join("plugin-tmp"));
    let config = nri_plugin_container(&reference, Path::new("/var/run/nri"), &hook_dir, &cm_dir, &tmp);
    let created = node.cri(
        "CreateContainer",
        json!({"pod_sandbox_id": plugin_pod.id, "config": config, "sandbox_config": plugin_pod.config}),
    );
    let Some(pc) = r.step("CreateContainer (plugin)", created) else { return r.finish() };
    let pc = pc["container_id"]
        .as_str()
        .unwrap_or_else(|| panic!("CreateContainer answered no id: {pc}"))
        .to_string();
    let Some(_) = r.step("StartContainer (plugin)", node.cri("StartContainer", json!({"container_id": pc})))
    else {
        return r.finish();
    };
    let logs = node
        .dir
        .join("logs")
        .join(plugin_pod.config["metadata"]["uid"].as_str().unwrap())
        .join("nri-plugin/0.log");
    r.plugin_registered(&logs, Duration::from_secs(15));
    let (hb, hc) = r.hook_dir_filled(&hook_dir, &bin, cm);
    node.hook = hb.clone();
    let opts = PodOpts { memory: 2 * GI, ..PodOpts::default() };
    if let Some(pod) = r.step("RunPodSandbox", node.run_pod("served", &opts)) {
        if let Some(c) = r.step("start ro 1Gi", node.start_container(&pod, &CtrOpts::ro("app", GI))) {
            if let Some(p) = r.step("probe", node.probe(&c)) {
                r.served("ro 1Gi, plugin in a container", &p, 256 * MI, 512 * MI);
            }
            r.executor(&node, &c, true);
            if let Some(config) = r.step("the final config.json", node.final_config(&c)) {
                let args = &config["hooks"]["createRuntime"][0]["args"];
                r.check(
                    args[4] == "--config" && args[5] == hc.display().to_string().as_str(),
                    format!("the hook does not read the hook dir's config: {args}"),
                );
            }
            r.step("stop and remove", node.teardown(&pod, &[&c]));
        }
    }
    let text = r.read(&logs);
    let lines: Vec<&str> =
        text.lines().filter(|l| l.contains("our hook at") || l.contains("wrote")).collect();
    r.seen("plugin container's log", format!("{lines:?}"));
    r.step("stop the plugin", node.teardown(&plugin_pod, &[&pc]));
    r.finish();
}

/// Case 12: The hook binary missing on the node (the hook dir emptied after
/// the plugin filled it): the container fails to start with the runtime's
/// hook error (fail closed, never a container without its mounts); a
/// plugin restart puts the binary back and the next container is served.
#[test]
fn case12_hook_binary_missing_on_the_node_fails_closed() {
    let mut r = Report::of("nri", "case12");
    let mut node = Node::nri("case12");
    node.stop_plugin();
    let hook_dir = node.dir.join("hook-dir");
    std::fs::create_dir_all(&hook_dir).unwrap();
    let args = ["--hook-dir".to_string(), hook_dir.display().to_string()];
    node.start_plugin_with(&args);
    node.hook = hook_dir.join("oci-tmpfs-hook");
    r.check(node.hook.is_file(), "the plugin did not put its binary into --hook-dir");
    let _ = std::fs::remove_file(&node.hook);
    let Some(pod) = r.step("RunPodSandbox", node.run_pod("missing", &PodOpts::default())) else {
        return r.finish();
    };
    let started = node.start_container(&pod, &CtrOpts::ro("app", GI));
    r.seen("start with the hook missing", format!("{started:?}"));
    match &started {
        Ok(c) => r.check(false, format!("the container {c} started without its hook")),
        Err(e) => r.check(
            e.contains("createRuntime hook") && e.contains(&node.hook.display().to_string()),
            format!("not the runtime's hook error naming the path: {e}"),
        ),
    }
    r.step("remove the failed pod", node.teardown(&pod, &[]));
    node.stop_plugin();
    node.start_plugin_with(&args);
    r.check(node.hook.is_file(), "the restarted plugin did not put its binary back");
    if let Some(pod) = r.step("RunPodSandbox", node.run_pod("back", &PodOpts::default())) {
        if let Some(c) = r.step("start ro 1Gi", node.start_container(&pod, &CtrOpts::ro("app", GI))) {
            if let Some(p) = r.step("probe", node.probe(&c)) {
                r.served("ro 1Gi, hook back", &p, 256 * MI, 512 * MI);
            }
            r.executor(&node, &c, true);
            r.step("stop and remove", node.teardown(&pod, &[&c]));
        }
    }
    r.finish();
}

// ------------------------------------------------------- hostile layouts

/// Every hostile layout with a volume (tests/support/layouts.rs, which the
/// CRI suite runs through the wrapper): a symlinked `/tmp` or `TMPDIR`
/// parent onto a private, shared or memory volume sorting after `/tmp`
/// (`/vol`) and before it (`/data`), a volume at or through a symlink into
/// `/tmp/data`, through the plugin: the volume always wins and stays on
/// top, nothing of ours reaches any host table, the hook's log says why.
#[test]
fn hostile_symlinks_to_volumes() {
    each_way(Node::nri("hostile-volumes"), |node, r| layouts::pod_layouts(node, r, |l| l.volume.is_some()));
}

/// The hostile `HOME`s and passwd files of tests/runtimes/home.rs (written
/// once in tests/support/home.rs) through the plugin, each a read-only
/// container of an image of its own, run as the case's uid with its
/// environment and a volume: `HOME` mounted or left alone as the case says;
/// a `HOME` of `/` left alone with the hook's warning (the plugin's hook
/// cannot set the environment); no volume covered, nothing of ours on the
/// host's or the node's mount table, the case's note in the hook's log
/// ([`home::pod_hostile_homes`]).
#[test]
fn hostile_homes_through_the_plugin() {
    let mut images = Vec::new();
    each_way(Node::nri("home-hostile"), |node, r| home::pod_hostile_homes(node, r, &mut images));
}

/// Every hostile layout into a system directory (tests/support/layouts.rs):
/// `/tmp -> /proc`, `/sys`, `/dev`, `/dev/shm` through the plugin: refused,
/// nothing of ours anywhere in the container, the runtime's mounts on top.
#[test]
fn hostile_symlinks_into_system_dirs() {
    each_way(Node::nri("hostile-system"), |node, r| layouts::pod_layouts(node, r, |l| l.volume.is_none()));
}

/// The memory limit caps every size. 512 KiB: no hook, a note `below 1Mi`;
/// 1 MiB: the hook for `/tmp` 1 MiB and `/dev/shm` at most 1 MiB; 1 GiB:
/// 256 MiB and 512 MiB, seen in the container. runc 1.3 cannot start a
/// container under 512 KiB or 1 MiB at all (its init already uses ~3.3 MiB of the
/// cgroup: "unable to set memory limit"), so for those two the plugin's
/// decision is checked, and that the failure is runc's cgroup error, not a
/// hook's.
#[test]
fn memory_limits_cap_every_size() {
    let mut r = Report::of("nri", "memory-limits");
    let mut node = Node::nri("memory-limits");
    for (name, limit) in [("limit-512k", 512 << 10), ("limit-1m", MI), ("limit-1g", GI)] {
        let Some(pod) = r.step(&format!("{name}: RunPodSandbox"), node.run_pod(name, &PodOpts::default()))
        else {
            continue;
        };
        let started = node.start_container(&pod, &CtrOpts::ro("app", limit));
        let log = node.read("plugin.log");
        let line = log.lines().rfind(|l| l.contains(&format!("default/{name}/app: "))).unwrap_or("");
        r.seen(&format!("{name}: the plugin"), line);
        match (limit, started) {
            (GI, Ok(c)) => {
                if let Some(p) = r.step(&format!("{name}: probe"), node.probe(&c)) {
                    r.served(name, &p, 256 * MI, 512 * MI);
                }
                r.executor(&node, &c, true);
                r.step(&format!("{name}: stop and remove"), node.teardown(&pod, &[&c]));
            }
            (GI, Err(e)) => {
                r.check(false, format!("{name}: {e}"));
                let _ = node.teardown(&pod, &[]);
            }
            (_, started) => {
                r.seen(&format!("{name}: start"), format!("{started:?}"));
                r.check(
                    started
                        .as_ref()
                        .is_err_and(|e| e.contains("unable to set memory limit") && !e.contains("hook")),
                    format!("{name}: not runc's cgroup refusal: {started:?}"),
                );
                if let Ok(c) = &started {
                    let _ = node.teardown(&pod, &[c]);
                } else {
                    let _ = node.teardown(&pod, &[]);
                }
            }
        }
        if limit < MI {
            r.check(
                log.lines().any(|l| l.contains("below 1Mi")),
                format!("{name}: no note `below 1Mi` in the plugin's log"),
            );
            r.check(line.contains("no hook"), format!("{name}: the plugin added the hook: {line}"));
        } else if limit == MI {
            r.check(
                line.contains("our hook at createRuntime")
                    && line.contains("/tmp 1Mi")
                    && line.contains("/dev/shm 1Mi"),
                format!("{name}: not the hook for /tmp 1Mi and /dev/shm 1Mi: {line}"),
            );
        }
    }
    let ours = ours_on(&node.mount_tables());
    r.check(ours.is_empty(), format!("tmpfs of ours on the host: {ours:?}"));
    r.finish();
}
