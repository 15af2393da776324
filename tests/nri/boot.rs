//! A node's boot, crashes and other plugins, through containerd 2.1: the
//! plugin pre-registered (`node install --nri`, started by containerd before
//! it serves a container), the DaemonSet's probe (`nri --probe`) against a
//! killed containerd, and ours beside other vendors' plugins
//! (`examples/nri_mount.rs`), one at another mount and one that claims
//! `/tmp`.
//!
//! The pre-registered plugin's files go into a host root of the test's own
//! (`node install --nri --host-root DIR/host`), and containerd's NRI
//! `plugin_path` and `plugin_config_path` name the directories there. The
//! link is relative, so containerd runs the binary installed under that
//! root. A plugin that containerd starts writes nothing to a stream the test
//! sees (its stdout and stderr are /dev/null): it logs through the host
//! config's `log_file`, `plugin.log` as for the others.

use std::fmt::Write as _;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::*;

/// The host config that sends the plugin's (and the hook's) log to the
/// test's `plugin.log`.
fn logging_config(node: &Node) -> String {
    format!("log_level = \"info\"\nlog_file = {:?}\n", node.dir.join("plugin.log"))
}

/// `node install --nri` into `DIR/host`, containerd's NRI dirs pointed
/// there, containerd restarted: the plugin is containerd's own.
fn preregister(node: &mut Node, r: &mut Report) -> PathBuf {
    let host = node.dir.join("host");
    std::fs::create_dir_all(host.join("run")).unwrap();
    let out = ok(Command::new(plugin_bin())
        .args(["node", "install", "--nri", "--restart-mode", "none", "--host-root"])
        .arg(&host));
    r.seen("node install --nri", out.trim().replace('\n', " | "));
    r.check(
        out.contains("restart the container runtime to start the pre-registered NRI plugin"),
        "node install --nri did not say to restart the runtime",
    );
    let entry = host.join("opt/nri/plugins/90-oci-tmpfs-hook");
    let link = std::fs::read_link(&entry).map_err(|e| format!("{}: {e}", entry.display()));
    r.seen("the entry", format!("{link:?}"));
    r.check(
        link.as_deref().is_ok_and(|l| l == Path::new("../../../usr/local/bin/oci-tmpfs-hook")),
        format!("the entry is not our relative link: {link:?}"),
    );
    r.check(
        host.join("etc/nri/conf.d/oci-tmpfs-hook.conf").is_file(),
        "no /etc/nri/conf.d/oci-tmpfs-hook.conf",
    );
    let mut config = std::fs::read_to_string(&node.config).unwrap();
    let _ = write!(
        config,
        "  [plugins.\"io.containerd.nri.v1.nri\"]\n    plugin_path = {:?}\n    plugin_config_path = {:?}\n",
        host.join("opt/nri/plugins"),
        host.join("etc/nri/conf.d")
    );
    std::fs::write(&node.config, config).unwrap();
    node.hook = host.join("usr/local/bin/oci-tmpfs-hook").canonicalize().expect("the installed binary");
    node.host_config(&logging_config(node));
    host
}

/// Booting with the plugin pre-registered: no plugin but containerd's own. At
/// each containerd (re)start, the pods created the moment CRI answers all get
/// their mounts; `node uninstall` takes the files out again.
#[test]
fn boot_preregistered_plugin_serves_the_first_pods() {
    let mut r = Report::of("nri", "boot-preregistered");
    let mut node = Node::start_with(
        "boot-preregistered",
        Executor::Nri,
        &NodeOpts { without_plugin: true, ..NodeOpts::default() },
    );
    let host = preregister(&mut node, &mut r);
    for round in 0..2 {
        let n = node.registrations();
        let t0 = Instant::now();
        node.restart_daemon();
        let ready = t0.elapsed();
        let regs = node.registrations();
        r.seen(
            &format!("round {round}"),
            format!("CRI ready {ready:?} after the restart; registrations in plugin.log {n} -> {regs}"),
        );
        let mut made = Vec::new();
        for i in 0..3 {
            let name = format!("boot-{round}-{i}");
            let Some(pod) = r.step("RunPodSandbox", node.run_pod(&name, &PodOpts::default())) else {
                continue;
            };
            let c = r.step("start ro 1Gi", node.start_container(&pod, &CtrOpts::ro("app", GI)));
            made.push((pod, c));
        }
        r.seen(&format!("round {round}"), format!("3 pods started {:?} after the restart", t0.elapsed()));
        for (pod, c) in made {
            if let Some(c) = c {
                if let Some(p) = r.step("probe", node.probe(&c)) {
                    r.served(
                        &format!("round {round}, {}", pod.config["metadata"]["name"]),
                        &p,
                        256 * MI,
                        512 * MI,
                    );
                }
                r.executor(&node, &c, true);
                r.step("stop and remove", node.teardown(&pod, &[&c]));
            } else {
                r.step("remove the pod", node.teardown(&pod, &[]));
            }
        }
    }
    let log = node.read("plugin.log");
    r.check(
        log.contains("nri: registered as oci-tmpfs-hook (index 90)"),
        "the plugin did not register under its entry's name and index",
    );
    node.stop_daemon();
    let out = ok(Command::new(plugin_bin()).args(["node", "uninstall", "--host-root"]).arg(&host));
    r.seen("node uninstall", out.trim().replace('\n', " | "));
    r.check(
        out.contains("restart the container runtime to stop the pre-registered NRI plugin"),
        "node uninstall did not say to restart the runtime",
    );
    for gone in ["opt/nri/plugins/90-oci-tmpfs-hook", "etc/nri/conf.d/oci-tmpfs-hook.conf", "opt/nri"] {
        r.check(
            std::fs::symlink_metadata(host.join(gone)).is_err(),
            format!("{gone} is still there after uninstall"),
        );
    }
    r.finish();
}

/// Runs `nri --probe --status-file PATH` as the DaemonSet's exec probe does
/// (in the plugin's mount namespace): (exit 0?, its line).
fn probe(node: &Node, status: &Path) -> (bool, String) {
    let out = Command::new("nsenter")
        .arg(format!("--mount=/proc/{}/ns/mnt", node.holder.id()))
        .arg("--")
        .arg(plugin_bin())
        .args(["nri", "--probe", "--status-file"])
        .arg(status)
        .output()
        .expect("nsenter");
    (out.status.success(), format!("{}{}", text(&out.stdout), text(&out.stderr)).trim().to_string())
}

/// Kills containerd (SIGKILL: a crash, no clean close).
fn kill_daemon(node: &mut Node) {
    if let Some(mut child) = node.daemon.take() {
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// Liveness and readiness: the probe passes while the plugin is registered,
/// fails once containerd is killed (the plugin's process lives on), and
/// passes again after the plugin's registration with the new one.
#[test]
fn boot_probe_follows_the_runtime() {
    let mut r = Report::of("nri", "boot-probe");
    let mut node = Node::start_with(
        "boot-probe",
        Executor::Nri,
        &NodeOpts { without_plugin: true, ..NodeOpts::default() },
    );
    let status = node.dir.join("nri.status");
    node.start_plugin_with(&["--status-file".into(), status.display().to_string()]);
    let (ok, line) = probe(&node, &status);
    r.seen("registered", format!("{ok}: {line}"));
    r.check(
        ok && line.contains("registered oci-tmpfs-hook 90"),
        format!("the probe fails while registered: {line}"),
    );
    kill_daemon(&mut node);
    let t0 = Instant::now();
    let (mut ok, mut line) = probe(&node, &status);
    while ok && t0.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(50));
        (ok, line) = probe(&node, &status);
    }
    r.seen("containerd killed", format!("{ok} after {:?}: {line}", t0.elapsed()));
    r.check(!ok && line.contains("not registered"), format!("the probe passes with containerd dead: {line}"));
    let alive = node.plugin.as_mut().is_some_and(|p| matches!(p.try_wait(), Ok(None)));
    r.check(alive, "the plugin's process died with containerd (the probe must not need that)");
    let n = node.registrations();
    node.start_daemon();
    let waited = node.wait_registered(n + 1);
    let t0 = Instant::now();
    let (mut ok, mut line) = probe(&node, &status);
    while !ok && t0.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(50));
        (ok, line) = probe(&node, &status);
    }
    r.seen("containerd back", format!("registered {waited:?} after CRI; probe {ok}: {line}"));
    r.check(ok, format!("the probe fails after the plugin registered again: {line}"));
    r.finish();
}

/// `examples/nri_mount.rs`, built next to the binary (tests/env/nri.sh).
fn other_plugin_bin() -> PathBuf {
    let bin = hook_bin().parent().expect("target dir").join("examples/nri_mount");
    assert!(bin.is_file(), "{} is missing: cargo build --example nri_mount", bin.display());
    bin
}

/// Starts the other plugin in the node's namespace and waits for its
/// registration; its log is `other-NAME.log`.
fn start_other(node: &Node, name: &str, idx: &str, dest: &str) -> Child {
    let log_path = node.dir.join(format!("other-{name}.log"));
    let log = File::create(&log_path).unwrap();
    let mut child = Command::new("nsenter")
        .arg(format!("--mount=/proc/{}/ns/mnt", node.holder.id()))
        .arg("--")
        .arg(other_plugin_bin())
        .args(["--socket", "/var/run/nri/nri.sock", "--name", name, "--idx", idx, "--dest", dest])
        .args(["--source", name, "--size", "8m"])
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .expect("nsenter");
    let t0 = Instant::now();
    while !read_text(&log_path).contains("nri: registered as") {
        if let Ok(Some(status)) = child.try_wait() {
            panic!("the other plugin {name} exited ({status})");
        }
        assert!(t0.elapsed() < Duration::from_secs(10), "the other plugin {name} did not register in 10s");
        std::thread::sleep(Duration::from_millis(20));
    }
    child
}

fn stop_other(mut child: Child) {
    let _ = child.kill();
    let _ = child.wait();
}

/// One pod with a read-only 1 GiB container; its probe output, after the
/// container's checks of our executor (with `/tmp` claimed: their tmpfs at
/// `/tmp` in `config.json`, never a mount of ours, our hook at
/// createRuntime).
fn one_pod(node: &mut Node, r: &mut Report, name: &str, claimed: bool) -> Option<(Pod, String, String)> {
    let pod = r.step("RunPodSandbox", node.run_pod(name, &PodOpts::default()))?;
    let Some(c) =
        r.step(&format!("{name}: start ro 1Gi"), node.start_container(&pod, &CtrOpts::ro("app", GI)))
    else {
        r.step("remove the pod", node.teardown(&pod, &[]));
        return None;
    };
    if claimed {
        hooked_beside(node, r, &c);
    } else {
        r.executor(node, &c, true);
    }
    let Some(p) = r.step("probe", node.probe(&c)) else {
        r.step("stop and remove", node.teardown(&pod, &[&c]));
        return None;
    };
    Some((pod, c, p))
}

/// Container `id`'s `config.json` beside a plugin that claims `/tmp`: no
/// mount of ours, our hook (at createRuntime only).
fn hooked_beside(node: &Node, r: &mut Report, id: &str) {
    let Some(config) = r.step("the final config.json", node.final_config(id)) else { return };
    let mounts =
        config["mounts"].as_array().unwrap_or_else(|| panic!("{id}: config.json has no mounts array"));
    let ours = mounts.iter().filter(|m| m["source"] == OURS).count();
    r.check(ours == 0, format!("{id}: {ours} mounts of ours in config.json"));
    let path = node.hook.display().to_string();
    let at: Vec<&String> = config["hooks"]
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(_, list)| list.as_array().into_iter().flatten().any(|h| h["path"] == path.as_str()))
        .map(|(stage, _)| stage)
        .collect();
    r.seen("executor", format!("our hook in config.json at {at:?}, mounts of ours {ours}"));
    r.check(at == ["createRuntime"], format!("{id}: our hook at {at:?}, want [\"createRuntime\"]"));
}

/// Checks that `point` is the other plugin `name`'s 8 MiB tmpfs.
fn theirs(r: &mut Report, what: &str, probe: &str, point: &str, name: &str) {
    let mounts = parse_mountinfo(probe);
    let m = mount_at(&mounts, point);
    r.seen(what, format!("{point}: {:?}", m.map(|m| (&m.source, m.size()))));
    r.check(
        m.is_some_and(|m| m.source == name && m.fstype == "tmpfs" && m.size() == Some(8 * MI)),
        format!("{what}: {point} is not {name}'s 8 MiB tmpfs: {m:?}"),
    );
}

/// Beside other plugins. One that adds its own mount (`/other`, index 20):
/// ours coexists, the container gets both. One that claims `/tmp`, before
/// ours (index 10) and after (index 95): the container starts, `/tmp` is
/// theirs, `/dev/shm` still ours, and the log says that `/tmp` was left to
/// the spec's mount.
#[test]
fn boot_beside_other_plugins() {
    let mut r = Report::of("nri", "boot-others");
    let mut node = Node::nri("boot-others");
    let other = start_other(&node, "other-mount", "20", "/other");
    if let Some((pod, c, p)) = one_pod(&mut node, &mut r, "beside-other", false) {
        r.served("with /other at 20", &p, 256 * MI, 512 * MI);
        theirs(&mut r, "with /other at 20", &p, "/other", "other-mount");
        r.step("stop and remove", node.teardown(&pod, &[&c]));
    }
    stop_other(other);
    for idx in ["10", "95"] {
        // The hook's own log (it runs in the runtime, not in the test).
        let hook_log = node.dir.join(format!("hook-{idx}.log"));
        node.host_config(&format!("log_level = \"info\"\nlog_file = {hook_log:?}\n"));
        let name = format!("claims-tmp-{idx}");
        let claim = start_other(&node, &name, idx, "/tmp");
        let pod_name = format!("tmp-claimed-{idx}");
        if let Some((pod, c, p)) = one_pod(&mut node, &mut r, &pod_name, true) {
            theirs(&mut r, &format!("/tmp claimed at {idx}"), &p, "/tmp", &name);
            let shm = mount_at(&parse_mountinfo(&p), "/dev/shm").and_then(MountInfo::size);
            r.check(shm == Some(512 * MI), format!("claimed at {idx}: /dev/shm is {}, want 512Mi", sz(shm)));
            let ours = parse_mountinfo(&p).iter().filter(|m| m.source == OURS).count();
            r.check(ours == 0, format!("claimed at {idx}: {ours} mounts of ours in the container"));
            r.step("stop and remove", node.teardown(&pod, &[&c]));
        }
        stop_other(claim);
        // The hook judges the final layout: it always leaves /tmp, and says so.
        let log = r.read(&hook_log);
        let said: Vec<&str> = log.lines().filter(|l| l.contains("/tmp left alone")).collect();
        r.seen(&format!("/tmp claimed at {idx}: the hook's log"), format!("{said:?}"));
        r.check(
            said.iter().any(|l| l.contains("the spec already mounts it")),
            format!("claimed at {idx}: no hook log line leaving /tmp to the spec's mount:\n{log}"),
        );
        // Before ours (10), the plugin sees their mount and plans no /tmp.
        let plugin = node.read("plugin.log");
        let line =
            plugin.lines().find(|l| l.contains(&format!("default/{pod_name}/app: our hook"))).unwrap_or("");
        r.seen(&format!("/tmp claimed at {idx}: the plugin"), line);
        r.check(
            line.contains("/dev/shm") && (idx == "95" || !line.contains("/tmp ")),
            format!("claimed at {idx}: the plugin's line: {line:?}"),
        );
    }
    node.host_config("");
    r.finish();
}

/// The default validator's settings, appended to containerd's config.
fn validator(node: &Node, required: bool) {
    let mut config = std::fs::read_to_string(&node.config).unwrap();
    let _ = write!(
        config,
        "  [plugins.\"io.containerd.nri.v1.nri\".default_validator]\n    enable = true\n{}    tolerate_missing_plugins_annotation = \"{TOLERATE}\"\n",
        if required { "    required_plugins = [\"oci-tmpfs-hook\"]\n" } else { "" }
    );
    std::fs::write(&node.config, config).unwrap();
}

/// The validator's annotation that lets a pod start without the plugins.
const TOLERATE: &str = "tolerate-missing-nri-plugins.noderesource.dev";
/// The validator's per-pod list of required plugins, for container `app`.
const REQUIRE_APP: &str = "required-plugins.noderesource.dev/container.app";

/// A pod whose container must be refused while our plugin is down, with an
/// error that names us; the pod, to retry in.
fn refused(node: &mut Node, r: &mut Report, name: &str, annotations: &[(&str, &str)]) -> Option<Pod> {
    let opts = PodOpts { annotations, ..PodOpts::default() };
    let pod = r.step("RunPodSandbox", node.run_pod(name, &opts))?;
    let created = node.cri("CreateContainer", node.container_request(&pod, &CtrOpts::ro("app", GI)));
    r.seen(&format!("{name}, plugin down"), format!("{created:?}"));
    r.check(
        created.as_ref().is_err_and(|e| e.contains("required plugin \"oci-tmpfs-hook\" not present")),
        format!("{name}: created while the plugin is down, or refused without naming us: {created:?}"),
    );
    Some(pod)
}

/// A pod whose container the validator lets start while our plugin is down
/// (it tolerates missing plugins, or does not require ours).
fn starts_anyway(node: &mut Node, r: &mut Report, name: &str, annotations: &[(&str, &str)]) {
    let opts = PodOpts { annotations, ..PodOpts::default() };
    let Some(pod) = r.step("RunPodSandbox", node.run_pod(name, &opts)) else { return };
    let started = node.start_container(&pod, &CtrOpts::ro("app", GI));
    r.seen(&format!("{name}, plugin down"), format!("{started:?}"));
    r.check(started.is_ok(), format!("{name}: refused while the plugin is down: {started:?}"));
    let ids: Vec<String> = started.into_iter().collect();
    let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
    r.step("stop and remove", node.teardown(&pod, &ids));
}

/// The pod annotations of our DaemonSet (deploy/kubernetes/daemonset.yaml).
fn daemonset_pod_annotations() -> Vec<(String, String)> {
    use saphyr::{LoadableYamlNode, Yaml};
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/kubernetes/daemonset.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    let docs = Yaml::load_from_str(&text).unwrap();
    let ds = docs.iter().find(|d| d["kind"].as_str() == Some("DaemonSet")).expect("a DaemonSet");
    let annotations =
        ds["spec"]["template"]["metadata"]["annotations"].as_mapping().expect("pod annotations");
    annotations
        .iter()
        .map(|(k, v)| (k.as_str().unwrap().to_string(), v.as_str().expect("a string value").to_string()))
        .collect()
}

/// Retries the refused pod's container with the plugin back: served.
fn served_now(node: &mut Node, r: &mut Report, pod: &Pod, what: &str) {
    if let Some(c) =
        r.step(&format!("{what}: start ro 1Gi"), node.start_container(pod, &CtrOpts::ro("app", GI)))
    {
        if let Some(p) = r.step("probe", node.probe(&c)) {
            r.served(what, &p, 256 * MI, 512 * MI);
        }
        r.executor(node, &c, true);
        r.step("stop and remove", node.teardown(pod, &[&c]));
    }
}

/// Fail closed, with containerd 2.2+'s default validator (NRI v0.10;
/// containerd 2.1 has none): node-wide `required_plugins`, then the per-pod
/// annotation. A container created while our plugin is down is refused with
/// an error that names us, and starts, with its mounts, once the plugin is
/// back; a pod annotated to tolerate missing plugins (the static-pod remedy),
/// and our DaemonSet's own pod with its manifest's annotations, start while
/// it is down. Needs `OCI_TMPFS_HOOK_NRI_CONTAINERD`
/// (docs/nri.md#fail-closed).
#[test]
#[ignore = "needs containerd 2.2+: OCI_TMPFS_HOOK_NRI_CONTAINERD=... tests/env/nri.sh fail_closed --ignored"]
fn fail_closed_with_the_default_validator() {
    let mut r = Report::of("nri", "fail-closed");
    let mut node = Node::start_with(
        "fail-closed",
        Executor::Nri,
        &NodeOpts { without_plugin: true, ..NodeOpts::default() },
    );
    let v = node.ctd.major_minor();
    assert!(v >= (2, 2), "the default validator needs containerd 2.2+, found {}", node.ctd.version);
    validator(&node, true);
    node.restart_daemon();
    if let Some(pod) = refused(&mut node, &mut r, "required", &[]) {
        starts_anyway(&mut node, &mut r, "tolerates", &[(TOLERATE, "true")]);
        // Our DaemonSet's pod is not held back by the plugin it runs: its
        // manifest's annotations, as the pod gets them.
        let ds = daemonset_pod_annotations();
        r.check(
            ds.iter().any(|(k, v)| k == TOLERATE && v == "true"),
            format!("the DaemonSet's pod does not tolerate a missing plugin: {ds:?}"),
        );
        let ds: Vec<(&str, &str)> = ds.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        starts_anyway(&mut node, &mut r, "daemonset-pod", &ds);
        node.start_plugin();
        served_now(&mut node, &mut r, &pod, "required, plugin back");
    }
    node.stop_plugin();
    // Per pod: no node-wide list; only the annotated pod needs us.
    std::fs::write(&node.config, node.ctd.base_config(&node.dir, &node.state, &node.image)).unwrap();
    validator(&node, false);
    node.restart_daemon();
    let annotated = [(REQUIRE_APP, "[\"oci-tmpfs-hook\"]")];
    if let Some(pod) = refused(&mut node, &mut r, "annotated", &annotated) {
        starts_anyway(&mut node, &mut r, "unannotated", &[]);
        node.start_plugin();
        served_now(&mut node, &mut r, &pod, "annotated, plugin back");
    }
    r.finish();
}
