//! SIGTERM (a pod's deletion, a rollout, a drain) stops the plugin through
//! containerd 2.1: registered and serving, as PID 1 of a fresh pid
//! namespace (its DaemonSet's container, where the kernel drops a signal
//! that has no handler), and while containerd is down (redialling). Each
//! time it exits 0 within a second, and a container created after the stop
//! starts without our hook, at once.

use std::process::Child;
use std::time::{Duration, Instant};

use super::*;

/// Sends SIGTERM to `pid`.
fn sigterm(pid: u32) {
    use rustix::process::{kill_process, Pid, Signal};
    kill_process(Pid::from_raw(pid as i32).unwrap(), Signal::TERM).unwrap();
}

/// Waits up to a second for `child` to exit 0; how long it took.
fn exits_within_a_second(child: &mut Child, node: &Node, what: &str) -> Duration {
    let t0 = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let log = node.read("plugin.log");
            assert!(status.success(), "{what}: {status} after SIGTERM:\n{log}");
            assert!(!log.contains("panicked"), "{what}:\n{log}");
            return t0.elapsed();
        }
        assert!(
            t0.elapsed() < Duration::from_secs(1),
            "{what}: still running 1s after SIGTERM:\n{}",
            node.read("plugin.log")
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The plugin, in the node's mount namespace, as PID 1 of a new pid
/// namespace (`unshare --fork --pid --mount-proc`); waits for its
/// registration. Returns the `unshare` (which exits with the plugin's
/// status) and the plugin's pid.
fn start_as_pid_1(node: &mut Node) -> (Child, u32) {
    let unshare = node.start_plugin_under(&["unshare", "--fork", "--pid", "--mount-proc"], &[]);
    let children = std::fs::read_to_string(format!("/proc/{unshare}/task/{unshare}/children")).unwrap();
    let pid: u32 = children.split_whitespace().next().expect("unshare's child").parse().unwrap();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let nspid = status
        .lines()
        .find(|l| l.starts_with("NSpid:"))
        .unwrap_or_else(|| panic!("no NSpid line in /proc/{pid}/status:\n{status}"));
    assert!(nspid.ends_with("\t1"), "the plugin is not PID 1 of its namespace: {nspid}");
    (node.plugin.take().unwrap(), pid)
}

/// A read-only container created now: whether our hook is in its spec, and
/// how long its creation and start took.
fn served(node: &Node, pod: &Pod, name: &str) -> (bool, Duration) {
    let t0 = Instant::now();
    let c = node.start_container(pod, &CtrOpts::ro(name, GI)).expect("StartContainer");
    let took = t0.elapsed();
    (node.runs_our_hook(&c).expect("the container's config.json"), took)
}

#[test]
fn sigterm_stops_the_plugin_within_a_second() {
    let mut node = Node::nri("stop");
    let pod = node.run_pod("stop", &PodOpts::default()).expect("RunPodSandbox");
    let (hooked, _) = served(&node, &pod, "before");
    assert!(hooked, "the plugin did not serve the first container:\n{}", node.read("plugin.log"));

    // Registered and serving, a plain process.
    let mut plugin = node.plugin.take().unwrap();
    sigterm(plugin.id());
    let took = exits_within_a_second(&mut plugin, &node, "registered");
    eprintln!("nri stop: registered, exited {took:?} after SIGTERM");
    let (hooked, start) = served(&node, &pod, "after");
    assert!(!hooked, "a container created after the stop got our hook");
    assert!(start < Duration::from_secs(5), "a container after the stop took {start:?}");

    // As PID 1 of a pid namespace.
    let (mut unshare, pid) = start_as_pid_1(&mut node);
    let (hooked, _) = served(&node, &pod, "pid1");
    assert!(hooked, "the PID 1 plugin did not serve:\n{}", node.read("plugin.log"));
    sigterm(pid);
    let took = exits_within_a_second(&mut unshare, &node, "PID 1");
    eprintln!("nri stop: PID 1, exited {took:?} after SIGTERM");

    // containerd down: the plugin redials.
    node.start_plugin();
    node.stop_daemon();
    let t0 = Instant::now();
    while !node.read("plugin.log").contains("redialling") {
        assert!(t0.elapsed() < Duration::from_secs(10), "no redial:\n{}", node.read("plugin.log"));
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(200));
    let mut plugin = node.plugin.take().unwrap();
    sigterm(plugin.id());
    let took = exits_within_a_second(&mut plugin, &node, "redialling");
    eprintln!("nri stop: redialling, exited {took:?} after SIGTERM");
    node.start_daemon();
}
