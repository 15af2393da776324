//! A process started later in a container (`docker exec`, `kubectl exec`)
//! gets the container's `HOME` (docs/design.md#home-plan): the wrapper in
//! spec mode sets `HOME=/home/1000` in the bundle for a uid without a
//! passwd entry, but the engines build an exec's process from their own
//! copy of the spec, which lacks it; the wrapper adds it to the exec's
//! process file (src/wrapper/exec_home.rs). Docker through the wrapper and
//! containerd's CRI through the wrapper's spec-mode handler, each with a
//! read-only root and the image of tests/support/home.rs.

use crate::engines::{DockerGuard, Dockerd};
use crate::support::cri::*;
use crate::support::home::{self, Seen};
use crate::support::pods::*;
use crate::support::*;

use std::process::Command;

/// The wrapper's line for an exec it gave the container's `HOME`.
const SET: &str = "exec: set HOME=/home/1000 in the process";

/// Docker `run -d --read-only --user 1000` through the wrapper (whose real
/// runtime is runc, then crun: they keep their state in different files),
/// then `docker exec`: as the container's user (implicitly and with
/// `-u 1000`) the exec gets `HOME=/home/1000`, our tmpfs, writable; `-u 0`
/// gets root's `/root` from the image's passwd, not ours; `-e HOME=/x`
/// keeps its own. In hook mode nothing sets `HOME`: every exec of uid 1000
/// gets `/` (unset with crun 1.8.1), and so does every exec once the host
/// config says `home = false`.
#[test]
fn docker_exec_gets_the_containers_home() {
    crun_cgroup_fix();
    let d = Dockerd::start();
    let image = unique("home-exec");
    let rootfs = Bundle::new("home-exec-rootfs");
    home::shape_image(&rootfs.rootfs());
    let tar = d.dir.join("home.tar");
    ok(Command::new("tar").arg("-C").arg(rootfs.rootfs()).arg("-cf").arg(&tar).arg("."));
    ok(d.docker().arg("import").arg(&tar).arg(&image));
    for runtime in [Runtime::Runc, Runtime::Crun] {
        docker_exec(&d, &image, runtime);
    }
}

/// [`docker_exec_gets_the_containers_home`] with `runtime` as the wrapper's
/// real runtime (the host config's `runtime_path`).
fn docker_exec(d: &Dockerd, image: &str, runtime: Runtime) {
    let path = ["/usr/bin", "/usr/sbin"]
        .iter()
        .map(|dir| std::path::Path::new(dir).join(runtime.bin()))
        .find(|p| p.exists())
        .unwrap_or_else(|| panic!("no {} in /usr/bin or /usr/sbin", runtime.bin()));
    let config = d.dir.join("host-config.toml");
    let text = std::fs::read_to_string(&config).unwrap();
    let text: String =
        text.lines().filter(|l| !l.starts_with("runtime_path")).map(|l| format!("{l}\n")).collect();
    std::fs::write(&config, format!("{text}runtime_path = {path:?}\n")).unwrap();
    let name = unique("home-exec");
    let _guard = DockerGuard { dockerd: d, name: name.clone() };
    ok(d.docker()
        .args(["run", "-d", "--name", &name, "--network", "none", "--runtime", "oci-tmpfs"])
        .args(["--read-only", "--memory", "1g", "--user", "1000", image, "sleep", "1000"]));
    let what = |flags: &[&str]| format!("{}: docker exec {flags:?} ({} mode)", runtime.bin(), wrapper_mode());
    let exec = |flags: &[&str]| -> Seen {
        let before = d.wrapper_log().len();
        let seen =
            Seen::parse(&ok(d.docker().arg("exec").args(flags).args([&name, "sh", "-c", home::PROBE])));
        let log = d.wrapper_log().split_off(before);
        let said: Vec<&str> = log.lines().filter(|l| l.contains("exec:")).collect();
        say(&format!("{}: {}; wrapper: {said:?}", what(flags), seen.summary()));
        assert_eq!(
            log.contains(SET),
            wrapper_mode() == "spec" && seen.home == "/home/1000",
            "{}: the wrapper's log:\n{log}",
            what(flags)
        );
        seen
    };
    let spec = wrapper_mode() == "spec";
    for flags in [&[][..], &["-u", "1000"]] {
        let seen = exec(flags);
        let failed = if spec {
            seen.served("/home/1000", (1000, 0), 0o700, 256 * MI, false)
        } else {
            // crun 1.8.1 leaves HOME unset for a uid without a passwd entry,
            // crun 1.28 and runc give / (docs/design.md#home).
            let crun_unset = runtime == Runtime::Crun && seen.home == "(unset)";
            seen.left_alone(if crun_unset { "(unset)" } else { "/" })
        };
        assert!(failed.is_empty(), "{}:\n  {}\n{}", what(flags), failed.join("\n  "), seen.out);
    }
    let root = exec(&["-u", "0"]);
    let failed = root.left_alone("/root");
    assert!(failed.is_empty(), "{}:\n  {}\n{}", what(&["-u", "0"]), failed.join("\n  "), root.out);
    let own = exec(&["-e", "HOME=/x"]);
    assert_eq!(own.home, "/x", "{}:\n{}", what(&["-e", "HOME=/x"]), own.out);
    if spec {
        // home = false in the host config now: the same exec as the
        // container's user is left alone (the runtime's HOME, no line),
        // though the container kept the HOME it got at its start.
        std::fs::write(&config, format!("{text}runtime_path = {path:?}\nhome = false\n")).unwrap();
        let before = d.wrapper_log().len();
        let off = exec(&[]);
        let log = d.wrapper_log().split_off(before);
        std::fs::write(&config, format!("{text}runtime_path = {path:?}\n")).unwrap();
        assert!(!log.contains(SET), "{}, home = false: the wrapper's log:\n{log}", what(&[]));
        assert_ne!(off.home, "/home/1000", "{}, home = false:\n{}", what(&[]), off.out);
    }
}

/// containerd's CRI, the wrapper's spec-mode handler, a read-only 1 GiB
/// container with `run_as_user` 1000 and no passwd entry: an `ExecSync`
/// (what `kubectl exec` sends) gets `HOME=/home/1000`, our tmpfs, writable,
/// and the wrapper says it set it.
#[test]
fn cri_exec_gets_the_containers_home() {
    let mut node = Node::wrapper("home-exec");
    let mut r = Report::new(&node);
    r.way(Executor::Spec);
    let log = node.dir.join("home-exec.log");
    node.host_config(&format!("log_level = \"info\"\nlog_file = {log:?}\n"));
    let image = node.image("home", home::shape_image);
    if let Some(pod) = r.step("RunPodSandbox", node.run_pod("home-exec", &PodOpts::default())) {
        let opts = CtrOpts { image: Some(&image), user: Some(1000), ..CtrOpts::ro("uid1000", GI) };
        if let Some(c) = r.step("start", node.start_container(&pod, &opts)) {
            let before = std::fs::read_to_string(&log).unwrap_or_default().len();
            if let Some((code, out, err)) = r.step("exec", node.exec(&c, &["sh", "-c", home::PROBE])) {
                let seen = Seen::parse(&out);
                r.seen("exec as uid 1000", seen.summary());
                r.check(code == 0, format!("exec: exit {code}: {err}"));
                for f in seen.served("/home/1000", (1000, 0), 0o700, 256 * MI, false) {
                    r.check(false, format!("exec: {f}"));
                }
                let text = std::fs::read_to_string(&log).unwrap_or_default().split_off(before);
                let said: Vec<&str> = text.lines().filter(|l| l.contains(&c) && l.contains(SET)).collect();
                r.check(said.len() == 1, format!("the wrapper's line {SET:?} for {c}: {said:?}\n{text}"));
            }
            r.step("stop and remove", node.teardown(&pod, &[&c]));
        }
    }
    r.finish();
}
