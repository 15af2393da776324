//! `node install` as a Kubernetes node runs it
//! (docs/kubernetes.md#the-node-installer-node-install): the node image
//! (deploy/Containerfile over the static binary, built with `docker build` by
//! a dockerd this test starts) run as a real container with a fake host root
//! at `/host`: Debian's containerd config (or the default config of
//! containerd 2.1, version 3, or 2.3, version 4), a CRI-O config and hooks
//! dir, no systemd. Checked:
//! - `node install` writes exactly what `setup containerd` / `setup crio`
//!   write for that root, the binary, the wrapper link and the host config;
//! - a real containerd started on the installed config serves the
//!   `oci-tmpfs` handler to a CRI pod (the CRI suite's case 1);
//! - a second install changes no byte and reports no restart;
//! - uninstall gives back every byte of the host root (the lock file in the
//!   host's `/run` excepted);
//! - two installs at once: both wait on the lock, one installs, the other
//!   then finds nothing to do;
//! - `--restart-mode systemd` without hostPID refuses to restart;
//! - `--wait --uninstall-on-exit` uninstalls on SIGTERM (`docker stop`).
//!
//! Until deploy/build-image.sh lands (the NRI work), the image is built here:
//! the static binary as install.sh builds it, `docker build`, `docker save`.

mod failures;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::daemons::*;
use crate::support::kube::*;
use crate::support::*;
use failures::*;

/// Debian 12's /etc/containerd/config.toml (containerd 1.6.20~ds1), verbatim.
const DEBIAN_CONTAINERD: &str = "version = 2\n\n[plugins]\n  [plugins.\"io.containerd.grpc.v1.cri\"]\n    [plugins.\"io.containerd.grpc.v1.cri\".cni]\n      bin_dir = \"/usr/lib/cni\"\n      conf_dir = \"/etc/cni/net.d\"\n  [plugins.\"io.containerd.internal.v1.opt\"]\n    path = \"/var/lib/containerd/opt\"\n";
/// A CRI-O config naming two hooks dirs, as CRI-O's packages do.
const CRIO_CONF: &str = "[crio.runtime]\nhooks_dir = [\n  \"/usr/share/containers/oci/hooks.d\",\n  \"/etc/containers/oci/hooks.d\",\n]\n";
/// Another vendor's hook in the hooks dir, which must stay.
const OTHER_HOOK: &str = "{\"version\": \"1.0.0\", \"hook\": {\"path\": \"/usr/bin/other-hook\"}, \"when\": {\"always\": true}, \"stages\": [\"prestart\"]}\n";
const SID_ROOT: &str = "/var/cache/oci-tmpfs-hook/sid/root";
const LOCK: &str = "run/oci-tmpfs-hook-node.lock";

/// Replaces `from` by `to` in `text`, which must contain it.
fn subst(text: &str, from: &str, to: &str) -> String {
    assert!(text.contains(from), "the config has no {from:?}:\n{text}");
    text.replacen(from, to, 1)
}

/// Debian's config with this test's private paths (root, state, socket,
/// CNI dirs, opt) and the settings a CRI test needs on this VM.
fn debian_config(run: &Path, image: &str) -> String {
    let p = |s: &str| format!("{:?}", run.join(s));
    let top = format!(
        "version = 2\nroot = {}\nstate = {}\n\n[grpc]\n  address = {}\n\n[ttrpc]\n  address = \"{}.ttrpc\"\n",
        p("root"),
        p("state"),
        p("c.sock"),
        run.join("c.sock").display()
    );
    let mut t = subst(DEBIAN_CONTAINERD, "version = 2\n", &top);
    let cri = "  [plugins.\"io.containerd.grpc.v1.cri\"]\n";
    let extra = format!(
        "{cri}    sandbox_image = {image:?}\n    restrict_oom_score_adj = true\n    stream_server_port = \"0\"\n"
    );
    t = subst(&t, cri, &extra);
    t = subst(&t, "\"/usr/lib/cni\"", &p("cni/bin"));
    t = subst(&t, "\"/etc/cni/net.d\"", &p("cni/conf"));
    subst(&t, "\"/var/lib/containerd/opt\"", &p("opt"))
}

/// containerd 2.1's `containerd config default` (sid's binary), with this
/// test's private paths and settings.
fn containerd21_config(run: &Path, image: &str) -> String {
    let bin = Path::new(SID_ROOT).join("usr/bin/containerd");
    assert!(
        bin.exists(),
        "{} is missing: build the sid root (tests/env/sid.sh build, branch arch-sid)",
        bin.display()
    );
    let default = ok(Command::new(&bin).args(["config", "default"]));
    assert!(default.starts_with("version = 3\n"), "containerd 2.1's default config: {default}");
    let t = subst(&default, "sandbox = 'registry.k8s.io/pause:3.10'", &format!("sandbox = '{image}'"));
    private_paths(run, &t, "bin_dirs = ['/usr/lib/cni', '/opt/cni/bin']")
}

/// containerd 2.3.4's `containerd config default` (config version 4: the
/// sockets under `plugins.'io.containerd.server.v1.*'`, an `imports` of
/// `/etc/containerd/conf.d/*.toml`), with this test's private paths and settings.
fn containerd23_config(run: &Path, image: &str) -> String {
    let default = ok(Command::new(containerd23().containerd).args(["config", "default"]));
    assert!(default.starts_with("version = 4\n"), "containerd 2.3's default config: {default}");
    let mut t = subst(&default, "sandbox = 'registry.k8s.io/pause:3.10.2'", &format!("sandbox = '{image}'"));
    t = subst(
        &t,
        "address = '/run/containerd/containerd.sock.ttrpc'",
        &format!("address = '{}.ttrpc'", run.join("c.sock").display()),
    );
    private_paths(run, &t, "bin_dirs = ['/opt/cni/bin']")
}

/// The settings both default configs share, pointed at `run`; `bin_dirs`
/// is the default's CNI setting, which the test's CNI dir replaces.
fn private_paths(run: &Path, default: &str, bin_dirs: &str) -> String {
    let q = |s: &str| format!("'{}'", run.join(s).display());
    let mut t = subst(default, "root = '/var/lib/containerd'", &format!("root = {}", q("root")));
    t = subst(&t, bin_dirs, &format!("bin_dirs = [{}]", q("cni/bin")));
    t = subst(&t, "state = '/run/containerd'", &format!("state = {}", q("state")));
    t = subst(&t, "address = '/run/containerd/containerd.sock'", &format!("address = {}", q("c.sock")));
    t = subst(&t, "restrict_oom_score_adj = false", "restrict_oom_score_adj = true");
    t = subst(&t, "conf_dir = '/etc/cni/net.d'", &format!("conf_dir = {}", q("cni/conf")));
    subst(&t, "path = '/opt/containerd'", &format!("path = {}", q("opt")))
}

/// A systemd-less host root: containerd's config, CRI-O's config and its
/// hooks dir holding another vendor's hook, empty /usr/local/bin, /run, /var/lib.
fn fake_host(dir: &Path, containerd_config: &str) -> PathBuf {
    let host = dir.join("host");
    for d in [
        "etc/containerd",
        "etc/crio/crio.conf.d",
        "usr/share/containers/oci/hooks.d",
        "usr/local/bin",
        "usr/bin",
        "run",
        "var/lib",
    ] {
        std::fs::create_dir_all(host.join(d)).unwrap();
    }
    std::fs::write(host.join("etc/containerd/config.toml"), containerd_config).unwrap();
    std::fs::write(host.join("etc/crio/crio.conf"), CRIO_CONF).unwrap();
    std::fs::write(host.join("usr/share/containers/oci/hooks.d/other.json"), OTHER_HOOK).unwrap();
    std::fs::write(host.join("etc/os-release"), "ID=debian\nVERSION_ID=\"12\"\n").unwrap();
    host
}

/// What `setup containerd` and `setup crio --root` write for a copy of `host`.
fn what_setup_writes(dir: &Path, host: &Path) -> PathBuf {
    let copy = dir.join("setup-copy");
    ok(Command::new("cp").arg("-a").arg(host).arg(&copy));
    for engine in ["containerd", "crio"] {
        ok(Command::new(hook_bin()).args(["setup", engine, "--root"]).arg(&copy).args([
            "--hook-path",
            "/usr/local/bin/oci-tmpfs-hook",
            "--runtime-path",
            "/usr/local/bin/oci-tmpfs-runtime",
        ]));
    }
    copy
}

/// The snapshot without the lock file (left in the host's /run by design).
fn files_of(host: &Path) -> std::collections::BTreeMap<PathBuf, String> {
    let mut s = snapshot(host);
    s.remove(Path::new(LOCK));
    s
}

fn assert_same_file(a: &Path, b: &Path) {
    let (x, y) = (std::fs::read(a), std::fs::read(b));
    assert!(x.is_ok() && x.as_ref().ok() == y.as_ref().ok(), "{} and {} differ", a.display(), b.display());
}

/// The whole story on one fake host with `config`; containerd `bins` then
/// serves a CRI pod from the installed config.
fn install_serve_reinstall_uninstall(label: &str, config: fn(&Path, &str) -> String, bins: Binaries) {
    require_root();
    let started = Instant::now();
    let d = Dockerd::start();
    let image = d.build_node_image();
    let work = TempDir::new("node");
    let run_dir = TempDir::new("node-ctd");
    let pod_image = format!("docker.io/library/{}:latest", unique("busybox"));
    let host = fake_host(&work.0, &config(&run_dir.0, &pod_image));
    let expected = what_setup_writes(&work.0, &host);
    let before = files_of(&host);

    let first = ok(&mut d.node(&image, &host, "install", &["--restart-mode", "none"]));
    say(&format!("node {label}: first install:\n{first}"));
    for f in [
        "etc/containerd/config.toml",
        "etc/containerd/config.toml.bak-oci-tmpfs-hook",
        "usr/share/containers/oci/hooks.d/oci-tmpfs-hook.json",
        "usr/share/containers/oci/hooks.d/other.json",
    ] {
        assert_same_file(&host.join(f), &expected.join(f));
    }
    assert_same_file(&host.join("usr/local/bin/oci-tmpfs-hook"), static_binary());
    assert_eq!(
        std::fs::read_link(host.join("usr/local/bin/oci-tmpfs-runtime")).unwrap(),
        Path::new("oci-tmpfs-hook")
    );
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    assert_same_file(&host.join("etc/oci-tmpfs-hook/config.toml"), &manifest.join("hooks/config.toml"));
    assert!(first.contains("containerd: config changed; not restarted (--restart-mode none)"), "{first}");
    assert!(first.contains("crio: no restart needed"), "{first}");

    let installed = files_of(&host);
    let second = ok(&mut d.node(&image, &host, "install", &["--restart-mode", "none"]));
    say(&format!("node {label}: second install:\n{second}"));
    assert_eq!(
        snapshot_diff(&installed, &files_of(&host)),
        Vec::<String>::new(),
        "the second install changed files"
    );
    // The first run's restart was not done: it stays pending.
    assert!(second.contains("containerd: restart pending from an earlier run; not restarted"), "{second}");
    assert!(second.ends_with("node: nothing changed\n") && !second.contains("restarting"), "{second}");

    // The restart, done by the test: a containerd started on the installed config.
    let ctd_config = host.join("etc/containerd/config.toml");
    let mut ctd = Containerd::start(run_dir, &host, &ctd_config, bins, &pod_image);
    let probe = ctd.case1_probe().unwrap_or_else(|e| panic!("node {label}: CRI case 1: {e}"));
    let bad = check_case1(&probe);
    assert!(bad.is_empty(), "node {label}: CRI case 1: {bad:?}\n{probe}");
    drop(ctd);

    let out = ok(&mut d.node(&image, &host, "uninstall", &["--restart-mode", "none"]));
    say(&format!("node {label}: uninstall:\n{out}"));
    assert_eq!(snapshot_diff(&before, &files_of(&host)), Vec::<String>::new(), "uninstall left differences");
    say(&format!("node {label}: PASS in {:.0?}", started.elapsed()));
}

/// Debian 12's containerd 1.6 (the one on PATH) on Debian's config.
#[test]
fn node_image_installs_on_debian_containerd_16_and_crio() {
    let bins = Binaries { containerd: "containerd".into(), ctr: "ctr".into(), path_first: None };
    install_serve_reinstall_uninstall("containerd 1.6 (Debian config)", debian_config, bins);
}

/// containerd 2.1 (Debian sid's binary and shim) on its default config.
#[test]
fn node_image_installs_on_containerd_21_default_config() {
    let shim_dir = TempDir::new("node-sid-shim");
    let bins = sid_binaries(&shim_dir);
    install_serve_reinstall_uninstall("containerd 2.1 (default config)", containerd21_config, bins);
}

/// containerd 2.3.4 (built from its source by tests/env/containerd.sh, run
/// with the host's runc) on its default config, version 4.
#[test]
#[ignore = "needs containerd 2.3.4: OCI_TMPFS_HOOK_NRI_CONTAINERD=$(tests/env/containerd.sh build) (tests/run.sh runs it)"]
fn node_image_installs_on_containerd_23_default_config() {
    install_serve_reinstall_uninstall("containerd 2.3 (default config)", containerd23_config, containerd23());
}

/// The containerd 2.3.4 build that `OCI_TMPFS_HOOK_NRI_CONTAINERD` names,
/// with its ctr and its shim (the same directory, first on containerd's PATH).
fn containerd23() -> Binaries {
    let bin = std::env::var_os("OCI_TMPFS_HOOK_NRI_CONTAINERD")
        .map(PathBuf::from)
        .expect("OCI_TMPFS_HOOK_NRI_CONTAINERD=$(tests/env/containerd.sh build)");
    let dir = bin.parent().expect("a directory").to_path_buf();
    Binaries { ctr: dir.join("ctr"), containerd: bin, path_first: Some(dir) }
}

/// Debian sid's containerd and ctr, with its shim first on containerd's
/// PATH through a link in `shim_dir` (removed with it).
fn sid_binaries(shim_dir: &TempDir) -> Binaries {
    let sid = Path::new(SID_ROOT);
    std::os::unix::fs::symlink(
        sid.join("usr/bin/containerd-shim-runc-v2"),
        shim_dir.join("containerd-shim-runc-v2"),
    )
    .unwrap();
    Binaries {
        containerd: sid.join("usr/bin/containerd"),
        ctr: sid.join("usr/bin/ctr"),
        path_first: Some(shim_dir.0.clone()),
    }
}

/// Two installs at once wait on the lock and do the work once; systemd
/// mode without hostPID refuses to restart; --wait --uninstall-on-exit
/// uninstalls on SIGTERM.
#[test]
fn node_installs_lock_refuse_restart_and_uninstall_on_sigterm() {
    require_root();
    let d = Dockerd::start();
    let image = d.build_node_image();
    let work = TempDir::new("node-lock");
    let host = fake_host(&work.0, DEBIAN_CONTAINERD);
    let before = files_of(&host);

    // The test holds the lock; both installs must wait, then run one by one.
    let lock = std::fs::File::create(host.join(LOCK)).unwrap();
    rustix::fs::flock(&lock, rustix::fs::FlockOperation::LockExclusive).unwrap();
    let spawn = || {
        d.node(&image, &host, "install", &["--restart-mode", "none"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (mut a, mut b) = (spawn(), spawn());
    // Both installs are blocked in flock(2) on the lock the test holds.
    let deadline = Instant::now() + TIMEOUT;
    while lock_waiters(&host.join(LOCK)) < 2 {
        assert!(
            a.try_wait().unwrap().is_none() && b.try_wait().unwrap().is_none(),
            "an install did not wait for the lock"
        );
        assert!(Instant::now() < deadline, "the installs did not both wait on the lock within {TIMEOUT:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(lock);
    let outs: Vec<String> = [a, b]
        .into_iter()
        .map(|c| {
            let o = wait_timeout(c, TIMEOUT).expect("install timed out");
            assert!(o.status.success(), "install failed: {}", text(&o.stderr));
            text(&o.stdout)
        })
        .collect();
    for o in &outs {
        say(&format!("node lock: concurrent install:\n{o}"));
        assert!(o.starts_with("node: waiting for another node install or uninstall"), "{o}");
    }
    let did = outs.iter().filter(|o| o.contains("containerd: updated")).count();
    let idle = outs.iter().filter(|o| o.ends_with("node: nothing changed\n")).count();
    assert_eq!((did, idle), (1, 1), "one install does the work, the other finds it done: {outs:?}");

    // systemd restart mode without hostPID: refused, after the files are restored.
    let out = output(&mut d.node(&image, &host, "uninstall", &["--restart-mode", "systemd"]));
    let err = text(&out.stderr);
    say(&format!("node lock: uninstall, systemd mode, no hostPID:\n{}{err}", text(&out.stdout)));
    assert!(!out.status.success() && err.contains("hostPID: true") && err.lines().count() == 1, "{err}");
    assert_eq!(snapshot_diff(&before, &files_of(&host)), Vec::<String>::new());

    // The DaemonSet's container: install, wait, uninstall on SIGTERM.
    let name = unique("node-wait");
    ok(d.docker()
        .args(["run", "-d", "--network", "none", "--name", &name, "-v"])
        .arg(format!("{}:/host", host.display()))
        .args([
            &image,
            "node",
            "install",
            "--host-root",
            "/host",
            "--restart-mode",
            "none",
            "--wait",
            "--uninstall-on-exit",
        ]));
    let state = host.join("var/lib/oci-tmpfs-hook/node-install.json");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !state.exists() {
        assert!(Instant::now() < deadline, "the waiting install did not install");
        std::thread::sleep(Duration::from_millis(100));
    }
    ok(d.docker().args(["stop", "-t", "30", &name]));
    let logs = output(d.docker().args(["logs", &name]));
    let exit = ok(d.docker().args(["inspect", "-f", "{{.State.ExitCode}}", &name]));
    let _ = output(d.docker().args(["rm", "-f", &name]));
    let logs = text(&logs.stdout);
    say(&format!("node lock: --wait --uninstall-on-exit:\n{logs}"));
    assert_eq!(exit.trim(), "0", "{logs}");
    assert!(logs.contains("node: signal received: uninstalling"), "{logs}");
    assert_eq!(snapshot_diff(&before, &files_of(&host)), Vec::<String>::new());
}

/// How many processes wait in flock(2) for `file`: its `->` lines in
/// /proc/locks (proc(5)), which name the file by device and inode.
fn lock_waiters(file: &Path) -> usize {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(file).unwrap();
    let id = format!("{:02x}:{:02x}:{}", rustix::fs::major(m.dev()), rustix::fs::minor(m.dev()), m.ino());
    let locks = std::fs::read_to_string("/proc/locks").unwrap();
    locks.lines().filter(|l| l.contains(" -> FLOCK ") && l.split_whitespace().any(|w| w == id)).count()
}

/// `--restart-mode systemd` for real, against a fake init: a private pid
/// namespace whose pid 1 (`sleep`) has pivoted into a fake host root holding
/// busybox and a `systemctl` that logs its arguments; the installer runs in
/// that pid namespace (its own /proc) and restarts through setns into pid 1's
/// mount namespace. Installs restart once, a second install not at all,
/// uninstall once more. The machine's systemd is never reachable: pid 1 of
/// that namespace is the fake init.
#[test]
fn node_restart_mode_systemd_runs_the_hosts_systemctl_in_pid1s_namespace() {
    require_root();
    let work = TempDir::new("node-systemd");
    let host = fake_host(&work.0, DEBIAN_CONTAINERD);
    let busybox = ["/bin/busybox", "/usr/bin/busybox"].into_iter().find(|p| Path::new(p).exists()).unwrap();
    std::fs::create_dir_all(host.join("bin")).unwrap();
    std::fs::copy(busybox, host.join("bin/busybox")).unwrap();
    for applet in ["sh", "sleep", "umount", "echo"] {
        std::os::unix::fs::symlink("busybox", host.join("bin").join(applet)).unwrap();
    }
    std::fs::write(host.join("bin/systemctl"), "#!/bin/sh\necho \"$@\" >> /systemctl.log\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(host.join("bin/systemctl"), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::create_dir_all(host.join("old-root")).unwrap();
    let before = files_of(&host);

    let init_script = format!(
        "set -e; mount --bind {h} {h}; cd {h}; pivot_root . old-root; exec /bin/sh -c 'umount -l /old-root; exec sleep 1000'",
        h = host.display()
    );
    let unshare = Command::new("unshare")
        .args(["--pid", "--fork", "--mount", "--propagation", "private", "--", "sh", "-c", &init_script])
        .spawn()
        .expect("unshare");
    let mut guard = InitGuard { unshare, init: None };
    // The pid of the fake init, as the machine sees it: unshare's child.
    let children = format!("/proc/{0}/task/{0}/children", guard.unshare.id());
    let deadline = Instant::now() + Duration::from_secs(20);
    let init_pid = loop {
        let first = read_text(&children);
        if let Some(pid) = first.split_whitespace().next().and_then(|p| p.parse::<i32>().ok()) {
            guard.init = Some(pid);
            let exe = std::fs::read_link(format!("/proc/{pid}/exe"));
            if exe.is_ok_and(|e| e.ends_with("busybox")) {
                break pid.to_string();
            }
        }
        assert!(Instant::now() < deadline, "the fake init did not start");
        std::thread::sleep(Duration::from_millis(50));
    };
    let node = |action: &str| {
        let script = format!(
            "mount -t proc proc /proc && exec {bin} node {action} --host-root {h} --restart-mode systemd",
            bin = hook_bin().display(),
            h = host.display()
        );
        output(
            Command::new("nsenter")
                .args([
                    "--target",
                    &init_pid,
                    "--pid",
                    "--",
                    "unshare",
                    "--mount",
                    "--propagation",
                    "private",
                ])
                .args(["--", "sh", "-c", &script]),
        )
    };
    let log = || read_text(host.join("systemctl.log"));
    let mut outs = Vec::new();
    for (action, want) in [
        ("install", "restart containerd\n"),
        ("install", "restart containerd\n"),
        ("uninstall", "restart containerd\nrestart containerd\n"),
    ] {
        let out = node(action);
        let shown = format!("{}{}", text(&out.stdout), text(&out.stderr));
        say(&format!("node systemd: {action}:\n{shown}"));
        outs.push((out.status.success(), shown, log()));
        if log() != want {
            break;
        }
    }
    drop(guard);
    for (i, (ok, shown, logged)) in outs.iter().enumerate() {
        assert!(ok, "run {i} failed: {shown}");
        let want =
            ["restart containerd\n", "restart containerd\n", "restart containerd\nrestart containerd\n"][i];
        assert_eq!(logged, want, "run {i}: systemctl calls: {shown}");
    }
    assert!(outs[0].1.contains("containerd: restarted"), "{}", outs[0].1);
    assert!(outs[1].1.contains("containerd: not restarted: its config did not change"), "{}", outs[1].1);
    let mut after = files_of(&host);
    after.remove(Path::new("systemctl.log"));
    assert_eq!(snapshot_diff(&before, &after), Vec::<String>::new());
}

/// Kills the fake init (pid 1 of its namespace: the namespace goes with it)
/// and the `unshare` that started it (`--fork` does not take its child along).
struct InitGuard {
    unshare: std::process::Child,
    init: Option<i32>,
}

impl Drop for InitGuard {
    fn drop(&mut self) {
        if let Some(pid) = self.init.and_then(rustix::process::Pid::from_raw) {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
        }
        let _ = self.unshare.kill();
        let _ = self.unshare.wait();
    }
}

/// A containerd config that is not TOML stops the install before its first
/// write: exit 1, one line naming the file, and the fake host byte for byte
/// as it was (the lock file in /run excepted, by design). So does another
/// vendor's oci-tmpfs-runtime in --bin-dir (the binary's place free): refused
/// before the binary is copied.
#[test]
fn node_broken_config_writes_nothing() {
    require_root();
    let broken = DEBIAN_CONTAINERD.replace("[plugins]\n", "[plugins\n");
    let cases: [(&str, &str, Option<&str>, &str); 2] = [
        ("broken config", &broken, None, "etc/containerd/config.toml: line 3"),
        (
            "foreign wrapper",
            DEBIAN_CONTAINERD,
            Some("/opt/other/runtime"),
            "was not installed by node install",
        ),
    ];
    for (label, config, wrapper, want) in cases {
        let work = TempDir::new("node-refused");
        let host = fake_host(&work.0, config);
        if let Some(target) = wrapper {
            std::os::unix::fs::symlink(target, host.join("usr/local/bin/oci-tmpfs-runtime")).unwrap();
        }
        let before = files_of(&host);
        let out = node_in_ns(&host, "install", &["--restart-mode", "none"], &[], &[]);
        say(&format!("node {label}:\n{}", shown(&out)));
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{label}: {}", shown(&out));
        assert!(err.lines().count() == 1 && err.contains(want), "{label}: {err}");
        assert_eq!(snapshot_diff(&before, &files_of(&host)), Vec::<String>::new(), "{label}: files written");
    }
}

/// A first install that fails midway (CRI-O's hooks dir read-only: the
/// containerd config is written, the hooks file is not), then a good one,
/// then uninstall: the host is back byte for byte, the files the first run
/// wrote included.
#[test]
fn node_failed_first_run_then_good_second_then_uninstall_restores_every_byte() {
    require_root();
    let work = TempDir::new("node-midway");
    let host = fake_host(&work.0, DEBIAN_CONTAINERD);
    let before = files_of(&host);
    let hooks = host.join("usr/share/containers/oci/hooks.d");
    let first = node_in_ns(&host, "install", &["--restart-mode", "none"], &[], &[&hooks]);
    say(&format!("node midway: first install, hooks dir read-only:\n{}", shown(&first)));
    assert_eq!(first.status.code(), Some(1), "{}", shown(&first));
    assert!(text(&first.stderr).contains("oci-tmpfs-hook.json"), "{}", shown(&first));
    assert!(host.join("usr/local/bin/oci-tmpfs-hook").exists(), "the first run wrote the binary");
    let recorded = state_of(&host);
    let files = recorded["files"]
        .as_array()
        .cloned()
        .unwrap_or_else(|| panic!("the state has no files list: {recorded}"));
    for f in [
        "/usr/local/bin/oci-tmpfs-hook",
        "/usr/local/bin/oci-tmpfs-runtime",
        "/etc/oci-tmpfs-hook/config.toml",
    ] {
        assert!(files.iter().any(|v| v == f), "{f} is not recorded after the failed run: {recorded}");
    }
    let second = node_in_ns(&host, "install", &["--restart-mode", "none"], &[], &[]);
    say(&format!("node midway: second install:\n{}", shown(&second)));
    assert!(second.status.success(), "{}", shown(&second));
    assert!(text(&second.stdout).contains("crio: created"), "{}", shown(&second));
    let out = node_in_ns(&host, "uninstall", &["--restart-mode", "none"], &[], &[]);
    say(&format!("node midway: uninstall:\n{}", shown(&out)));
    assert!(out.status.success(), "{}", shown(&out));
    assert_eq!(snapshot_diff(&before, &files_of(&host)), Vec::<String>::new(), "uninstall left differences");
}

/// `node install --wait` as PID 1 of a fresh pid namespace (the node
/// DaemonSet's container, where the kernel drops a signal that has no
/// handler): SIGTERM ends the wait within a second, with exit 0.
#[test]
fn node_wait_as_pid_1_exits_within_a_second_of_sigterm() {
    require_root();
    let work = TempDir::new("node-wait-pid1");
    let host = fake_host(&work.0, DEBIAN_CONTAINERD);
    let out = work.0.join("out");
    let mut child = Command::new("unshare")
        .args(["--fork", "--pid", "--mount-proc", "--propagation", "private"])
        .arg(hook_bin())
        .args(["node", "install", "--host-root"])
        .arg(&host)
        .args(["--restart-mode", "none", "--wait"])
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let read = || read_text(&out);
    let t0 = Instant::now();
    while !read().contains("node: waiting for SIGTERM") {
        assert!(t0.elapsed() < TIMEOUT, "the install did not reach its wait:\n{}", read());
        assert!(child.try_wait().unwrap().is_none(), "the install exited:\n{}", read());
        std::thread::sleep(Duration::from_millis(20));
    }
    let unshare = child.id();
    let children = std::fs::read_to_string(format!("/proc/{unshare}/task/{unshare}/children")).unwrap();
    let pid1: i32 = children.split_whitespace().next().expect("unshare's child").parse().unwrap();
    use rustix::process::{kill_process, Pid, Signal};
    kill_process(Pid::from_raw(pid1).unwrap(), Signal::TERM).unwrap();
    let t0 = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(t0.elapsed() < Duration::from_secs(1), "still waiting 1s after SIGTERM:\n{}", read());
        std::thread::sleep(Duration::from_millis(5));
    };
    say(&format!("node wait as PID 1: exited {:?} after SIGTERM", t0.elapsed()));
    assert!(status.success(), "{status}:\n{}", read());
    assert!(read().ends_with("node: signal received: exiting, the installation stays\n"), "{}", read());
}

/// `--host-root` a symlink to `/` is this process's own root: refused with
/// exit 2 and one line, nothing written (no lock file, no state file: the
/// machine's / is compared before and after).
#[test]
fn node_refuses_a_host_root_that_is_its_own_root() {
    require_root();
    let work = TempDir::new("node-own-root");
    let link = work.join("host");
    std::os::unix::fs::symlink("/", &link).unwrap();
    let watched =
        ["run/oci-tmpfs-hook-node.lock", "var/lib/oci-tmpfs-hook", "usr/local/bin/oci-tmpfs-runtime"];
    let present = || watched.map(|p| Path::new("/").join(p).exists());
    let before = present();
    let etc_containerd = std::fs::read("/etc/containerd/config.toml").ok();
    for args in [&["--restart-mode", "none"][..], &["--restart-mode", "systemd"][..]] {
        let out =
            output(Command::new(hook_bin()).args(["node", "install", "--host-root"]).arg(&link).args(args));
        say(&format!("node own root: {args:?}:\n{}", shown(&out)));
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{}", shown(&out));
        assert!(err.lines().count() == 1 && err.contains("is this container's own root"), "{err}");
        assert!(text(&out.stdout).is_empty(), "{}", shown(&out));
    }
    assert_eq!(present(), before, "a refused install wrote on /");
    assert_eq!(std::fs::read("/etc/containerd/config.toml").ok(), etc_containerd);
}

/// A refused restart stays pending (exit 1 while it is, in systemd mode; said
/// at every run in none mode) until the running containerd's CRI lists the
/// handler; and a containerd started on the old config (handler not loaded)
/// is told from one started on the installed config (loaded), through its
/// real CRI socket.
fn pending_until_loaded(label: &str, config: fn(&Path, &str) -> String, bins: &Binaries) {
    require_root();
    let work = TempDir::new("node-pending");
    let run_dir = TempDir::new("node-pending-ctd");
    let run_path = run_dir.0.clone();
    let pod_image = format!("docker.io/library/{}:latest", unique("busybox"));
    let original = config(&run_path, &pod_image);
    let host = fake_host(&work.0, &original);
    bind_target(&host, &run_path);
    let before = files_of(&host);
    let node_action = |action: &str, args: &[&str]| {
        let out = node_in_ns(&host, action, args, &[&run_path], &[]);
        say(&format!("node pending {label}: {action} {args:?}:\n{}", shown(&out)));
        out
    };
    let node = |args: &[&str]| node_action("install", args);
    let systemd: &[&str] = &["--restart-mode", "systemd"];
    let none: &[&str] = &["--restart-mode", "none"];

    // The config changes; the restart is refused (pid 1 is not the fake host's).
    let first = node(systemd);
    assert_eq!(first.status.code(), Some(1), "{}", shown(&first));
    assert!(text(&first.stderr).contains("hostPID: true"), "{}", shown(&first));
    assert_eq!(pending(&host), ["containerd"], "{}", state_of(&host));
    let again = node(systemd);
    assert_eq!(again.status.code(), Some(1), "a rerun forgot the restart: {}", shown(&again));
    assert!(
        text(&again.stdout).contains("containerd: restart pending from an earlier run"),
        "{}",
        shown(&again)
    );
    assert_eq!(pending(&host), ["containerd"]);

    // A containerd on the old config: its CRI answers without the handler.
    let old_config = work.join("old-config.toml");
    std::fs::write(&old_config, &original).unwrap();
    let ctd = Containerd::start(run_dir, &host, &old_config, bins.clone(), &pod_image);
    let out = node(none);
    assert!(out.status.success(), "{}", shown(&out));
    let said = text(&out.stdout);
    assert!(said.contains("the running containerd has not loaded it (its CRI at"), "{said}");
    assert!(said.contains("not restarted (--restart-mode none)"), "{said}");
    assert_eq!(pending(&host), ["containerd"]);
    let refused = node(systemd);
    assert_eq!(refused.status.code(), Some(1), "{}", shown(&refused));
    drop(ctd);

    // A containerd on the installed config: its CRI lists the handler.
    std::fs::create_dir_all(&run_path).unwrap();
    let ctd = Containerd::start(
        TempDir(run_path.clone()),
        &host,
        &host.join("etc/containerd/config.toml"),
        bins.clone(),
        &pod_image,
    );
    for (i, args) in [systemd, none].into_iter().enumerate() {
        let out = node(args);
        assert!(out.status.success(), "{}", shown(&out));
        let said = text(&out.stdout);
        assert!(
            said.contains("containerd: not restarted: its CRI lists the oci-tmpfs handler (loaded)"),
            "{said}"
        );
        assert_eq!(said.contains("the restart pending from an earlier run is not needed"), i == 0, "{said}");
        assert!(pending(&host).is_empty(), "{}", state_of(&host));
        assert_eq!(said.ends_with("node: nothing changed\n"), i == 1, "{said}");
    }
    let out = node_action("uninstall", none);
    assert!(out.status.success(), "{}", shown(&out));
    drop(ctd);
    assert_eq!(snapshot_diff(&before, &files_of(&host)), Vec::<String>::new(), "uninstall left differences");
}

#[test]
fn node_restart_stays_pending_until_containerd_16_has_loaded_the_handler() {
    let bins = Binaries { containerd: "containerd".into(), ctr: "ctr".into(), path_first: None };
    pending_until_loaded("containerd 1.6", debian_config, &bins);
}

#[test]
fn node_restart_stays_pending_until_containerd_21_has_loaded_the_handler() {
    let shim_dir = TempDir::new("node-sid-shim");
    pending_until_loaded("containerd 2.1", containerd21_config, &sid_binaries(&shim_dir));
}
