//! The hook with the real engines, as root: Podman (runc and crun) through
//! its hooks dir, Docker through the runtime wrapper registered in a private
//! `daemon.json`, containerd through the wrapper as the runc binary, and the
//! wrapper alone around plain runc. Every engine runs on private paths and is
//! stopped by its pid afterwards; an engine that does not start fails the
//! test (docs/design.md#test-machine has the flags that work on this machine).

use crate::support::daemons;
use crate::support::*;

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;

use oci_tmpfs_hook::engine::hooks_dir::oci_hooks_json;
use serde_json::{json, Value};

/// The mount source the hook gives its tmpfs.
const OURS: &str = "oci-tmpfs-hook";
/// Podman's own /dev/shm default (64000k), Docker's and containerd's (64 MiB).
const PODMAN_SHM: u64 = 64000 * 1024;
const SHM_64M: u64 = 64 * MI;
/// The script every container runs: the mount table, a write to /tmp, then
/// [`SHM_PROBE_MIB`] MiB written into /dev/shm (more than any engine's 64 MiB
/// default, so it succeeds only in a grown, writable /dev/shm).
const PROBE: &str = "cat /proc/self/mountinfo; touch /tmp/probe 2>/dev/null && echo TMP-WRITABLE; \
    dd if=/dev/zero of=/dev/shm/oth-probe bs=1M count=80 2>/dev/null && echo SHM-WRITABLE; \
    rm -f /dev/shm/oth-probe; true";
const SHM_PROBE_MIB: u64 = 80;

// ---------------------------------------------------------------- helpers

/// A busybox rootfs (the harness's bundle, of which only `rootfs/` is used).
fn busybox() -> Bundle {
    Bundle::new("rootfs")
}

/// `dir/oci-tmpfs-runtime`, a symlink to the binary under test: the name
/// that makes it the runtime wrapper, as `install.sh` installs it.
fn wrapper_in(dir: &Path) -> PathBuf {
    let link = dir.join("oci-tmpfs-runtime");
    std::os::unix::fs::symlink(hook_bin(), &link).unwrap();
    link
}

/// Checks the mounts of a read-only container that the hook served: `/tmp`
/// is our tmpfs of `tmp` bytes, nosuid and nodev, and writable; `/dev/shm`
/// is `shm` bytes.
fn assert_served(what: &str, stdout: &str, tmp: u64, shm: u64) {
    let mounts = parse_mountinfo(stdout);
    let t = mount_at(&mounts, "/tmp").unwrap_or_else(|| panic!("{what}: no /tmp mount:\n{stdout}"));
    assert_eq!((t.fstype.as_str(), t.source.as_str()), ("tmpfs", OURS), "{what}: /tmp is not ours: {t:?}");
    assert_eq!(t.size(), Some(tmp), "{what}: /tmp size: {t:?}");
    assert!(t.has("nosuid") && t.has("nodev") && t.has("rw"), "{what}: /tmp options: {t:?}");
    assert!(stdout.contains("TMP-WRITABLE"), "{what}: /tmp is not writable:\n{stdout}");
    let s = mount_at(&mounts, "/dev/shm").unwrap_or_else(|| panic!("{what}: no /dev/shm:\n{stdout}"));
    assert_eq!(s.size(), Some(shm), "{what}: /dev/shm size: {s:?}");
    assert_shm_write(what, stdout, shm);
}

/// The container's write of [`SHM_PROBE_MIB`] MiB into /dev/shm worked
/// exactly when its /dev/shm is that big (a grown but read-only /dev/shm
/// fails here).
fn assert_shm_write(what: &str, stdout: &str, shm: u64) {
    let s = mount_at(&parse_mountinfo(stdout), "/dev/shm").cloned();
    if shm > SHM_PROBE_MIB * MI {
        assert!(
            stdout.contains("SHM-WRITABLE"),
            "{what}: cannot write {SHM_PROBE_MIB} MiB into a /dev/shm of {shm} bytes: {s:?}\n{stdout}"
        );
    } else {
        assert!(
            !stdout.contains("SHM-WRITABLE"),
            "{what}: wrote {SHM_PROBE_MIB} MiB into a {shm}-byte /dev/shm"
        );
    }
}

/// A container the hook must leave alone: no tmpfs of ours anywhere.
fn assert_untouched(what: &str, stdout: &str) {
    let mounts = parse_mountinfo(stdout);
    assert!(!mounts.is_empty(), "{what}: no mount table in the output:\n{stdout}");
    let ours: Vec<_> = mounts.iter().filter(|m| m.source == OURS).collect();
    assert!(ours.is_empty(), "{what}: the hook mounted {ours:?}");
}

fn shm_size(stdout: &str) -> Option<u64> {
    mount_at(&parse_mountinfo(stdout), "/dev/shm").and_then(|m| m.size())
}

/// Total bytes of the filesystem at `path` (statvfs(2) on the path itself).
fn fs_bytes(path: &Path) -> u64 {
    let st = rustix::fs::statvfs(path).unwrap_or_else(|e| panic!("statvfs {}: {e}", path.display()));
    st.f_blocks * st.f_frsize
}

/// `--ulimit` flags within this sandbox's hard limits: Podman's default
/// nofile (1048576) is above them (docs/design.md#test-machine). Podman also lowers its own
/// RLIMIT_NPROC to 32768 at start (measured: /proc/<podman>/limits shows
/// 32768 while the calling shell has 96365), and conmon and the runtime
/// inherit that, so nproc may not be above it.
pub(crate) fn ulimit_flags() -> Vec<String> {
    use rustix::process::{getrlimit, Resource};
    let mut flags = Vec::new();
    for (name, res, cap) in [("nofile", Resource::Nofile, u64::MAX), ("nproc", Resource::Nproc, 32768)] {
        if let Some(max) = getrlimit(res).maximum {
            let max = max.min(cap);
            flags.push(format!("--ulimit={name}={max}:{max}"));
        }
    }
    flags
}

// ---------------------------------------------------------------- Podman

/// Podman with private storage, run root, tmp dir and hooks dir.
pub(crate) struct Podman {
    dir: TempDir,
    runtime: Runtime,
}

impl Podman {
    /// A Podman with our hook in its hooks dir.
    pub(crate) fn new(runtime: Runtime) -> Podman {
        let podman = Podman::bare(runtime);
        let hooks = podman.dir.join("hooks.d");
        // Registered the way a platform engineer does it: `setup podman`.
        let mut setup = Command::new(hook_bin());
        setup.args(["setup", "podman", "--hooks-dir"]).arg(&hooks).arg("--hook-path").arg(hook_bin());
        ok(&mut setup);
        let written: Value =
            serde_json::from_slice(&std::fs::read(hooks.join("oci-tmpfs-hook.json")).unwrap()).unwrap();
        assert_eq!(written, oci_hooks_json(&hook_bin()));
        podman
    }

    /// A Podman whose hooks dir is empty: the engine alone.
    pub(crate) fn bare(runtime: Runtime) -> Podman {
        require_root();
        if runtime == Runtime::Crun {
            crun_cgroup_fix();
        }
        let dir = TempDir::short("p");
        std::fs::create_dir_all(dir.join("hooks.d")).unwrap();
        Podman { dir, runtime }
    }

    /// Points the registered hook at a host config of `toml` (its
    /// `--config`); the config's path.
    pub(crate) fn host_config(&self, toml: &str) -> PathBuf {
        let config = self.dir.join("host-config.toml");
        std::fs::write(&config, toml).unwrap();
        let file = self.dir.join("hooks.d/oci-tmpfs-hook.json");
        let mut hook: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
        let args = hook["hook"]["args"].as_array_mut().expect("the hook's args");
        args.extend([json!("--config"), json!(config)]);
        std::fs::write(&file, serde_json::to_vec_pretty(&hook).unwrap()).unwrap();
        config
    }

    pub(crate) fn dir(&self) -> &Path {
        &self.dir.0
    }

    pub(crate) fn cmd(&self) -> Command {
        crate::support::daemons::private_podman(&self.dir, self.runtime)
    }

    /// `podman run --rm FLAGS --rootfs ROOTFS sh -c PROBE`. Podman's
    /// `--rootfs` is a switch: the rootfs is the first positional argument,
    /// so every flag goes before it.
    fn run(&self, flags: &[&str], rootfs: &Path) -> String {
        self.run_script(flags, rootfs, PROBE)
    }

    /// [`Podman::run`] with `sh -c script`.
    pub(crate) fn run_script(&self, flags: &[&str], rootfs: &Path, script: &str) -> String {
        let name = unique("podman");
        let _guard = PodmanGuard { podman: self, name: name.clone() };
        let mut c = self.cmd();
        c.args(["run", "--rm", "--name", &name, "--network=none"]).args(ulimit_flags()).args(flags);
        c.arg("--rootfs").arg(rootfs).args(["/bin/sh", "-c", script]);
        ok(&mut c)
    }
}

/// Removes the Podman container `name` on drop, at once.
pub(crate) struct PodmanGuard<'a> {
    pub(crate) podman: &'a Podman,
    pub(crate) name: String,
}

impl Drop for PodmanGuard<'_> {
    fn drop(&mut self) {
        let _ = output(self.podman.cmd().args(["rm", "--force", "--ignore", "--time=0", &self.name]));
    }
}

/// `--read-only --read-only-tmpfs=false` (the README's advice for Podman 4):
/// the hook's sizes, then the user's own `--tmpfs /tmp`.
fn podman_cases(runtime: Runtime) {
    let podman = Podman::new(runtime);
    let rootfs_bundle = busybox();
    let rootfs = rootfs_bundle.rootfs();
    let ro: &[&str] = &["--read-only", "--read-only-tmpfs=false"];
    let what = |case: &str| format!("podman --runtime {} {case}", runtime.bin());

    // Podman 4.7+ puts `ro` on the /dev/shm bind with --read-only-tmpfs=false,
    // and crun applies it after every hook, on its own mount: the hook
    // stacks a writable clone of that mount over it (docs/design.md#readonly-shm),
    // so /dev/shm is writable with runc and crun alike.
    let served = |case: &str, out: &str, tmp: u64, shm: u64| assert_served(&what(case), out, tmp, shm);

    // Defaults: 25% and 50% of the container's memory limit.
    let out = podman.run(&[ro, &["--memory=1g"]].concat(), &rootfs);
    served("--read-only --read-only-tmpfs=false --memory=1g", &out, 256 * MI, 512 * MI);

    // Annotations set the sizes per container.
    let ann = ["--annotation=oci-tmpfs-hook/tmp-size=96Mi", "--annotation=oci-tmpfs-hook/shm-size=300Mi"];
    let out = podman.run(&[ro, &ann].concat(), &rootfs);
    served("annotations", &out, 96 * MI, 300 * MI);

    // Podman's own --tmpfs /tmp is left alone (its own size, not ours).
    let out = podman.run(&[ro, &["--memory=1g", "--tmpfs=/tmp"]].concat(), &rootfs);
    let mounts = parse_mountinfo(&out);
    let t = mount_at(&mounts, "/tmp").expect("podman --tmpfs /tmp");
    assert_ne!(t.source, OURS, "{}: {t:?}", what("--tmpfs /tmp"));
    assert_ne!(t.size(), Some(256 * MI), "{}: {t:?}", what("--tmpfs /tmp"));
    assert!(out.contains("TMP-WRITABLE"));
    assert_eq!(shm_size(&out), Some(512 * MI), "{}: /dev/shm still grown", what("--tmpfs /tmp"));
    assert_shm_write(&what("--tmpfs /tmp"), &out, 512 * MI);
}

/// Podman's own defaults: a writable root is left alone; plain `--read-only`
/// (Podman's own tmpfs on /tmp) keeps its /tmp, and /dev/shm is grown and writable.
fn podman_own_tmpfs_cases(runtime: Runtime) {
    let podman = Podman::new(runtime);
    let rootfs_bundle = busybox();
    let rootfs = rootfs_bundle.rootfs();
    let what = |case: &str| format!("podman --runtime {} {case}", runtime.bin());

    // A writable root: nothing added, /dev/shm at Podman's default.
    let out = podman.run(&["--memory=1g"], &rootfs);
    assert_untouched(&what("writable root"), &out);
    assert_eq!(shm_size(&out), Some(PODMAN_SHM), "{}", what("writable root"));
    assert_shm_write(&what("writable root"), &out, PODMAN_SHM);

    // Podman's default --read-only-tmpfs=true mounts /tmp itself: left alone.
    // /dev/shm is grown there too, and writable (Podman 5's
    // --read-only-tmpfs=false is what makes /dev and /dev/shm read-only).
    let out = podman.run(&["--read-only", "--memory=1g"], &rootfs);
    let t = mount_at(&parse_mountinfo(&out), "/tmp").cloned().expect("podman's read-only tmpfs");
    assert_ne!(t.source, OURS, "{}: {t:?}", what("--read-only"));
    assert!(out.contains("TMP-WRITABLE"), "{}: /tmp writable:\n{out}", what("--read-only"));
    assert_eq!(shm_size(&out), Some(512 * MI), "{}: /dev/shm grown", what("--read-only"));
    assert_shm_write(&what("--read-only"), &out, 512 * MI);

    // Podman 5's workaround for its read-only /dev/shm: a tmpfs of the
    // user's own there (unsized: the kernel's default, half of RAM, which
    // mountinfo does not print). Our /tmp; that /dev/shm writable, and not
    // shrunk to our 512 MiB.
    let what = what("--read-only-tmpfs=false --mount type=tmpfs,destination=/dev/shm");
    let flags =
        ["--read-only", "--read-only-tmpfs=false", "--mount=type=tmpfs,destination=/dev/shm", "--memory=1g"];
    let out = podman.run(&flags, &rootfs);
    let mounts = parse_mountinfo(&out);
    let t = mount_at(&mounts, "/tmp").unwrap_or_else(|| panic!("{what}: no /tmp:\n{out}"));
    assert_eq!((t.source.as_str(), t.size()), (OURS, Some(256 * MI)), "{what}: {t:?}");
    assert!(out.contains("TMP-WRITABLE"), "{what}: /tmp writable:\n{out}");
    let shm = mount_at(&mounts, "/dev/shm").unwrap_or_else(|| panic!("{what}: no /dev/shm:\n{out}"));
    assert!(shm.size().is_none_or(|s| s >= 512 * MI), "{what}: /dev/shm shrunk: {shm:?}");
    assert!(out.contains("SHM-WRITABLE"), "{what}: /dev/shm not writable: {shm:?}\n{out}");
}

// Boilerplate: one test per runtime and case, so that libtest names,
// filters and runs each on its own.
#[test]
fn podman_runc_uses_the_hooks_dir() {
    podman_cases(Runtime::Runc);
}

#[test]
fn podman_crun_uses_the_hooks_dir() {
    podman_cases(Runtime::Crun);
}

#[test]
fn podman_runc_own_tmpfs_left_alone() {
    podman_own_tmpfs_cases(Runtime::Runc);
}

#[test]
fn podman_crun_own_tmpfs_left_alone() {
    podman_own_tmpfs_cases(Runtime::Crun);
}

// ------------------------------------------------- Docker and containerd

/// A private dockerd (and the containerd it starts), stopped by pid on drop.
///
/// It runs in its own mount namespace whose `/dev/shm` is a 64 MiB tmpfs:
/// that is the "host" /dev/shm a `--ipc=host` container gets, small enough
/// that growing it by mistake would show (the real host's is as big as RAM
/// here, which the hook's sizes can never exceed).
pub(crate) struct Dockerd {
    inner: daemons::Dockerd,
    namespaces: Vec<String>,
}

const DOCKER: &str = "/usr/bin/docker";

/// The launcher's own: `dir`, `docker()`, `pid()`.
impl std::ops::Deref for Dockerd {
    type Target = daemons::Dockerd;

    fn deref(&self) -> &daemons::Dockerd {
        &self.inner
    }
}

impl Dockerd {
    pub(crate) fn start() -> Dockerd {
        Dockerd::start_with(wrapper_mode(), None)
    }

    /// [`Dockerd::start`] with the wrapper in `mode`, and `runtime` as its
    /// host config's `runtime_path` (none: runc on `PATH`).
    pub(crate) fn start_with(mode: &str, runtime: Option<&Path>) -> Dockerd {
        Dockerd::start_configured(mode, runtime, "")
    }

    /// [`Dockerd::start_with`], the wrapper's host config ending with `toml`.
    pub(crate) fn start_configured(mode: &str, runtime: Option<&Path>, toml: &str) -> Dockerd {
        require_root();
        let dir = TempDir::new("dockerd");
        let wrapper = wrapper_in(&dir.0);
        let daemon_json = dir.join("daemon.json");
        // Registered the way a platform engineer does it: `setup docker`.
        let mut setup = Command::new(hook_bin());
        setup.args(["setup", "docker", "--daemon-json"]).arg(&daemon_json);
        setup.arg("--hook-path").arg(hook_bin()).arg("--runtime-path").arg(&wrapper);
        ok(&mut setup);
        let written: Value = serde_json::from_slice(&std::fs::read(&daemon_json).unwrap()).unwrap();
        assert_eq!(written["runtimes"]["oci-tmpfs"]["path"], json!(wrapper));
        // The wrapper's host config: the executor under test, and a log of
        // what it (and, in hook mode, the hook) did.
        let host_config = dir.join("host-config.toml");
        let wrapper_log = dir.join("wrapper.log");
        std::fs::write(
            &host_config,
            format!(
                "mode = \"{mode}\"\nlog_level = \"info\"\nlog_file = {:?}\n{}{toml}",
                wrapper_log,
                match runtime {
                    Some(r) => format!("runtime_path = {r:?}\n"),
                    None => String::new(), // the wrapper finds the runtime itself
                }
            ),
        )
        .unwrap();
        let opts = daemons::DockerdOptions {
            cli: Some(DOCKER),
            env: vec![("OCI_TMPFS_HOOK_CONFIG", host_config)],
            shm_mib: Some(SHM_64M / MI),
        };
        Dockerd { inner: daemons::Dockerd::launch_owned(dir, &daemon_json, opts), namespaces: Vec::new() }
    }

    /// The daemon's own /dev/shm, seen through its root.
    fn daemon_shm(&self) -> PathBuf {
        PathBuf::from(format!("/proc/{}/root/dev/shm", self.pid()))
    }

    /// `docker run --rm --network none FLAGS IMAGE sh -c PROBE`.
    fn run(&self, flags: &[&str], image: &str) -> String {
        self.run_script(flags, image, PROBE)
    }

    /// [`Dockerd::run`] with `sh -c script`.
    pub(crate) fn run_script(&self, flags: &[&str], image: &str, script: &str) -> String {
        let name = unique("docker");
        let _guard = DockerGuard { dockerd: self, name: name.clone() };
        ok(self
            .docker()
            .args(["run", "--rm", "--name", &name, "--network", "none"])
            .args(flags)
            .args([image, "sh", "-c", script]))
    }

    /// The wrapper's log (and, where the hook runs, the hook's).
    pub(crate) fn wrapper_log(&self) -> String {
        read_text(self.dir.join("wrapper.log"))
    }

    fn containerd_sock(&self) -> PathBuf {
        self.dir.join("exec/containerd/containerd.sock")
    }

    fn ctr(&self, namespace: &str) -> Command {
        let mut c = Command::new("ctr");
        c.arg("--address").arg(self.containerd_sock()).args(["--namespace", namespace]);
        c
    }
}

impl Drop for Dockerd {
    fn drop(&mut self) {
        self.inner.stop();
        // runc state of the containerd namespaces lives on the host's /run.
        for ns in &self.namespaces {
            let _ = std::fs::remove_dir(Path::new("/run/containerd/runc").join(ns));
        }
    }
}

/// Removes the container `name` (`docker rm --force`) on drop.
pub(crate) struct DockerGuard<'a> {
    pub(crate) dockerd: &'a Dockerd,
    pub(crate) name: String,
}

impl Drop for DockerGuard<'_> {
    fn drop(&mut self) {
        let _ = output(self.dockerd.docker().args(["rm", "--force", &self.name]));
    }
}

struct CtrGuard<'a> {
    dockerd: &'a Dockerd,
    namespace: &'a str,
    id: String,
}

impl Drop for CtrGuard<'_> {
    fn drop(&mut self) {
        let _ = output(self.dockerd.ctr(self.namespace).args(["task", "delete", "--force", &self.id]));
        let _ = output(self.dockerd.ctr(self.namespace).args(["container", "delete", &self.id]));
    }
}

/// `ctr run --rm --runc-binary WRAPPER FLAGS IMAGE ID sh -c PROBE`: the same
/// `BinaryName` path a containerd config with `options.BinaryName` takes.
fn ctr_run(d: &Dockerd, namespace: &str, flags: &[&str], image: &str) -> String {
    let id = unique("ctr");
    let _guard = CtrGuard { dockerd: d, namespace, id: id.clone() };
    let wrapper = d.dir.join("oci-tmpfs-runtime");
    ok(d.ctr(namespace)
        .args(["run", "--rm", "--runc-binary"])
        .arg(&wrapper)
        .args(flags)
        .args([image, &id, "sh", "-c", PROBE]))
}

/// A Debian image: tests/env/pkgroot.sh's bookworm minbase root, imported
/// into `d`: root's `/root` (0700) holds `.bashrc` and `.profile`, and
/// `/etc/passwd` gives root `/root`. Built when missing; the sid
/// environment sees the host's through a bind (tests/run.sh).
fn debian_image(d: &Dockerd) -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/env/pkgroot.sh");
    let root = PathBuf::from(ok(Command::new(&script).arg("path")).trim());
    if !root.join(".debootstrap-done").exists() {
        ok(Command::new(&script).arg("build"));
    }
    for dot in [".bashrc", ".profile"] {
        assert!(root.join("root").join(dot).is_file(), "the Debian root's /root/{dot}");
    }
    let image = unique("debian");
    let tar = d.dir.join("debian.tar");
    ok(Command::new("tar").arg("-C").arg(&root).arg("-cf").arg(&tar).arg("."));
    ok(d.docker().args(["import"]).arg(&tar).arg(&image));
    std::fs::remove_file(&tar).unwrap();
    image
}

/// The common image under Docker `--read-only` through the wrapper in spec
/// mode: root, `/root` holding `.bashrc` and `.profile`, `HOME` from
/// `/etc/passwd`. Every process dockerd and its containerd start is traced
/// (`strace -f -e trace=execve`): the wrapper and the runtime run, our hook
/// never does; `/root` stays the image's, read-only, holding its dotfiles,
/// and its caches (`/root/.triton`, ...) are tmpfs entries of the spec
/// (docs/design.md#home-rule).
#[test]
fn docker_runs_the_common_image_with_no_hook_process() {
    // crun copies a directory up on every host (bookworm's runc 1.1.5 does
    // not, and gets the hook: docs/design.md#runtimes).
    let d = Dockerd::start_with("spec", Some(&which("crun")));
    let image = debian_image(&d);
    let dockerd = d.pid().to_string();
    let containerd = ok(Command::new("pgrep").args(["-P", &dockerd, "-x", "containerd"]));
    let containerd = containerd.trim();
    assert!(!containerd.is_empty(), "dockerd's containerd");
    let trace = d.dir.join("execve.trace");
    let mut strace = Command::new("strace")
        .args(["-f", "-qq", "-s", "256", "-e", "trace=execve", "-o"])
        .arg(&trace)
        .args(["-p", &dockerd, "-p", containerd])
        .stdin(std::process::Stdio::null())
        .spawn()
        .expect("strace (apt-get install strace)");
    // strace writes nothing before an event: attached once containerd
    // (which starts the shim, which starts the wrapper) has a tracer.
    let attached = || {
        read_text(format!("/proc/{containerd}/status"))
            .lines()
            .any(|l| l.starts_with("TracerPid:") && l.split_whitespace().nth(1) != Some("0"))
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !attached() {
        assert!(std::time::Instant::now() < deadline, "strace did not attach to containerd");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let out = d.run_script(
        &["--runtime", "oci-tmpfs", "--read-only"],
        &image,
        "ls -A /root; echo; stat -c 'HOME-DIR %a %u:%g' /root; grep ' /root' /proc/self/mountinfo; \
         touch /root/new && echo WRITABLE; touch /root/.triton/k && echo CACHE-WRITABLE; echo HOME=$HOME",
    );
    let _ = Command::new("kill").args(["-INT", &strace.id().to_string()]).status();
    let _ = strace.wait();
    let trace = std::fs::read_to_string(&trace).unwrap();
    let execs: Vec<&str> = trace.lines().filter(|l| l.contains("execve(")).collect();
    let log = d.wrapper_log();
    let seen = |what: &str| execs.iter().any(|l| l.contains(what));
    assert!(seen("oci-tmpfs-runtime\""), "the trace holds the wrapper's execve:\n{trace}");
    assert!(seen("crun\""), "the trace holds the runtime's execve:\n{trace}");
    let hooks: Vec<&&str> = execs.iter().filter(|l| l.contains("\"hook\", \"--stage\"")).collect();
    assert!(hooks.is_empty(), "no hook process: {hooks:#?}\nwrapper log:\n{log}");
    assert!(log.contains("wrote a tmpfs mount for /root/.triton into the spec"), "{log}");
    for want in [".bashrc", ".profile", "HOME-DIR 700 0:0", "CACHE-WRITABLE", "HOME=/root"] {
        assert!(out.contains(want), "{want}: {out}");
    }
    assert!(!out.lines().any(|l| l == "WRITABLE"), "HOME stays read-only: {out}");
    assert!(!out.lines().any(|l| l.contains(" /root ")), "no mount at /root: {out}");
    let cache_mount = out
        .lines()
        .find(|l| l.contains(" /root/.triton "))
        .unwrap_or_else(|| panic!("no mount at /root/.triton: {out}"));
    assert!(cache_mount.contains(&format!(" - tmpfs {OURS} ")), "/root/.triton: {cache_mount}");
}

#[test]
fn docker_and_containerd_use_the_wrapper() {
    let mut d = Dockerd::start();
    let image = unique("busybox");
    let rootfs_bundle = busybox();
    let tar = d.dir.join("rootfs.tar");
    ok(Command::new("tar").arg("-C").arg(rootfs_bundle.rootfs()).arg("-cf").arg(&tar).arg("."));
    ok(d.docker().args(["import"]).arg(&tar).arg(&image));

    let real_host_shm = fs_bytes(Path::new("/dev/shm"));
    let daemon_shm = fs_bytes(&d.daemon_shm());
    assert_eq!(daemon_shm, SHM_64M, "dockerd's private /dev/shm");

    // Docker: --read-only gets a sized, writable /tmp and a grown /dev/shm.
    let rt = ["--runtime", "oci-tmpfs", "--read-only", "--memory", "1g"];
    let out = d.run(&rt, &image);
    assert_served("docker --read-only --memory 1g", &out, 256 * MI, 512 * MI);
    // Which executor did it: in spec mode the wrapper wrote the mounts and no
    // hook ran; in hook mode the hook mounted them.
    let log = d.wrapper_log();
    let (wrote, hooked) =
        (log.contains("wrote a tmpfs mount for /tmp into the spec"), log.contains("mounted tmpfs on /tmp"));
    match wrapper_mode() {
        // docs/design.md#runtimes: runc before 1.1.8 gets the hook in spec mode too.
        "spec" if runc_before_1_1_8(Runtime::Runc) => assert!(
            hooked && !wrote && log.contains("the hook carries the temp targets"),
            "docker, spec mode, runc before 1.1.8: wrapper log:\n{log}"
        ),
        "spec" => assert!(wrote && !hooked, "docker, spec mode: wrapper log:\n{log}"),
        _ => assert!(hooked && !wrote, "docker, hook mode: wrapper log:\n{log}"),
    }
    // Docker 20.10's default IPC mode is private: a tmpfs in the spec.
    let grown = ["raised the spec's /dev/shm from 64Mi to 512Mi", "grew /dev/shm from 64Mi to 512Mi"];
    assert!(grown.iter().any(|g| log.contains(g)), "docker: /dev/shm grown: {log}");

    // --shm-size 2g is bigger than the configured 50% of 1g: not shrunk.
    let out = d.run(&[&rt[..], &["--shm-size", "2g"]].concat(), &image);
    assert_served("docker --shm-size 2g", &out, 256 * MI, 2 * GI);

    // --ipc=host: the daemon's ("host's") /dev/shm is never resized.
    let out = d.run(&[&rt[..], &["--ipc=host"]].concat(), &image);
    assert_served("docker --ipc=host", &out, 256 * MI, SHM_64M);
    assert_eq!(fs_bytes(&d.daemon_shm()), SHM_64M, "the daemon's /dev/shm changed");

    // --ipc=container:A shares A's /dev/shm: grown in place (both see it),
    // never shrunk by a container with a smaller limit.
    let a = unique("ipc-owner");
    let owner = DockerGuard { dockerd: &d, name: a.clone() };
    ok(d.docker()
        .args(["run", "-d", "--name", &a, "--network", "none", "--ipc", "shareable"])
        .args(rt)
        .args([&image, "sleep", "120"]));
    let in_a = || ok(d.docker().args(["exec", &a, "cat", "/proc/self/mountinfo"]));
    assert_eq!(shm_size(&in_a()), Some(512 * MI), "docker --ipc shareable: /dev/shm");
    let joined = format!("container:{a}");
    let out = d.run(&["--runtime", "oci-tmpfs", "--read-only", "--memory", "2g", "--ipc", &joined], &image);
    assert_served("docker --ipc container:A --memory 2g", &out, 512 * MI, GI);
    assert_eq!(shm_size(&in_a()), Some(GI), "A sees the /dev/shm grown by the container sharing it");
    let out = d.run(&["--runtime", "oci-tmpfs", "--read-only", "--memory", "512m", "--ipc", &joined], &image);
    assert_served("docker --ipc container:A --memory 512m", &out, 128 * MI, GI);
    drop(owner);

    // The user's own --tmpfs /tmp is left alone; /dev/shm still grown.
    let out = d.run(&[&rt[..], &["--tmpfs", "/tmp:size=10m"]].concat(), &image);
    let t = mount_at(&parse_mountinfo(&out), "/tmp").cloned().expect("docker --tmpfs /tmp");
    assert_eq!((t.source.as_str(), t.size()), ("tmpfs", Some(10 * MI)), "docker --tmpfs /tmp: {t:?}");
    assert_eq!(shm_size(&out), Some(512 * MI), "docker --tmpfs /tmp: /dev/shm");
    assert_shm_write("docker --tmpfs /tmp", &out, 512 * MI);

    // A writable root: the wrapper adds the hook, the hook does nothing.
    let out = d.run(&["--runtime", "oci-tmpfs", "--memory", "1g"], &image);
    assert_untouched("docker, writable root", &out);
    assert_eq!(shm_size(&out), Some(SHM_64M), "docker, writable root: /dev/shm");
    assert_shm_write("docker, writable root", &out, SHM_64M);

    // Without --runtime the default runc runs, unwrapped.
    let out = d.run(&["--read-only"], &image);
    assert_untouched("docker without the wrapper", &out);

    // containerd (the one dockerd started), with the wrapper as runc binary.
    let ns = unique("ns");
    d.namespaces.push(ns.clone());
    let archive = d.dir.join("image.tar");
    ok(d.docker().args(["save", "-o"]).arg(&archive).arg(&image));
    ok(d.ctr(&ns).args(["images", "import"]).arg(&archive));
    let reference = format!("docker.io/library/{image}:latest");

    let out = ctr_run(&d, &ns, &["--read-only", "--memory-limit", &GI.to_string()], &reference);
    assert_served("ctr run --read-only --memory-limit 1g", &out, 256 * MI, 512 * MI);

    // Kubernetes-style annotations reach the spec: the sizes follow them.
    let ann = [
        "--read-only",
        "--annotation",
        "oci-tmpfs-hook/tmp-size=96Mi",
        "--annotation",
        "oci-tmpfs-hook/shm-size=200Mi",
    ];
    let out = ctr_run(&d, &ns, &ann, &reference);
    assert_served("ctr run with annotations", &out, 96 * MI, 200 * MI);

    let out = ctr_run(&d, &ns, &[], &reference);
    assert_untouched("ctr run, writable root", &out);
    assert_eq!(shm_size(&out), Some(SHM_64M), "ctr run, writable root: /dev/shm");
    assert_shm_write("ctr run, writable root", &out, SHM_64M);

    // Nothing leaked onto the host.
    assert_eq!(fs_bytes(Path::new("/dev/shm")), real_host_shm, "the host's /dev/shm changed");
    assert_eq!(fs_bytes(&d.daemon_shm()), SHM_64M, "the daemon's /dev/shm changed");
    let _ = output(d.ctr(&ns).args(["images", "remove", &reference]));
}

// ------------------------------------------------ the wrapper alone, runc

/// `runc --root` dir private to a test, and the containers in it deleted.
struct RuncRoot {
    dir: TempDir,
    ids: Vec<String>,
}

impl RuncRoot {
    fn new() -> RuncRoot {
        RuncRoot { dir: TempDir::new("runc-root"), ids: Vec::new() }
    }

    fn id(&mut self) -> String {
        let id = unique("wrapped");
        self.ids.push(id.clone());
        id
    }
}

impl Drop for RuncRoot {
    fn drop(&mut self) {
        for id in &self.ids {
            let _ =
                output(Command::new("runc").arg("--root").arg(&self.dir.0).args(["delete", "--force", id]));
        }
    }
}

/// A host config in `dir` that puts the wrapper in hook mode.
fn hook_mode(dir: &Path) -> PathBuf {
    let path = dir.join("hook-mode.toml");
    std::fs::write(&path, "mode = \"hook\"\n").unwrap();
    path
}

fn hooks_of(bundle: &Path) -> Value {
    let config: Value = serde_json::from_slice(&std::fs::read(bundle.join("config.json")).unwrap()).unwrap();
    config["hooks"].clone()
}

#[test]
fn wrapper_adds_the_hook_once_and_execs_runc() {
    require_root();
    let bin = TempDir::new("wrapper-bin");
    let wrapper = wrapper_in(&bin.0);
    let mut root = RuncRoot::new();
    let mut b = Bundle::new("wrapped");
    b.script(&format!("{PROBE}; exit 7")).annotate("oci-tmpfs-hook/tmp-size", "80Mi");
    b.write();

    // As the engines call it: globals, then `run --bundle DIR ID`.
    let id = root.id();
    let out = output(
        Command::new(&wrapper)
            .env("OCI_TMPFS_HOOK_CONFIG", hook_mode(&bin.0))
            .arg("--root")
            .arg(&root.dir.0)
            .args(["--log-format", "json", "run", "--bundle"])
            .arg(&b.dir)
            .arg(&id),
    );
    // exec: the container's own exit status comes back.
    assert_eq!(out.status.code(), Some(7), "stderr: {}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let t = mount_at(&parse_mountinfo(&stdout), "/tmp").cloned().expect("/tmp mounted");
    assert_eq!((t.source.as_str(), t.size()), (OURS, Some(80 * MI)));
    let hooks = hooks_of(&b.dir);
    let own = hook_bin().canonicalize().unwrap();
    assert_eq!(
        hooks,
        json!({"prestart": [{"path": own.display().to_string(),
            "args": ["oci-tmpfs-hook", "hook", "--stage", "prestart", "--config", hook_mode(&bin.0)]}]}),
        "the hook reads the host config the wrapper read"
    );

    // `oci-tmpfs-hook runtime -- ...`, bundle = the current directory: the
    // hook is already there and is not added twice.
    let id = root.id();
    let out = output(
        Command::new(hook_bin())
            .env("OCI_TMPFS_HOOK_CONFIG", hook_mode(&bin.0))
            .args(["runtime", "--", "--root"])
            .arg(&root.dir.0)
            .args(["run", &id])
            .current_dir(&b.dir),
    );
    assert_eq!(out.status.code(), Some(7), "stderr: {}", text(&out.stderr));
    assert!(text(&out.stdout).contains("TMP-WRITABLE"));
    assert_eq!(hooks_of(&b.dir), hooks, "the hook was added twice");

    // Anything else passes straight through.
    let ours = ok(Command::new(&wrapper).arg("--version"));
    assert_eq!(ours, ok(Command::new("runc").arg("--version")));
}

#[test]
fn wrapper_writes_the_mounts_into_the_spec_and_runs_no_hook() {
    require_root();
    let bin = TempDir::new("wrapper-bin");
    let wrapper = wrapper_in(&bin.0);
    let mut root = RuncRoot::new();
    let mut b = Bundle::new("wrapped-spec");
    b.script(&format!("{PROBE}; exit 7"))
        .annotate("oci-tmpfs-hook/tmp-size", "80Mi")
        .annotate("oci-tmpfs-hook/shm-size", "96Mi");
    b.write();
    let config = bin.join("spec-mode.toml");
    std::fs::write(&config, "mode = \"spec\"\nlog_level = \"info\"\n").unwrap();
    let old_runc = runc_before_1_1_8(Runtime::Runc);
    for round in 0..2 {
        let id = root.id();
        let out = output(
            Command::new(&wrapper)
                .env("OCI_TMPFS_HOOK_CONFIG", &config)
                .arg("--root")
                .arg(&root.dir.0)
                .args(["run", "--bundle"])
                .arg(&b.dir)
                .arg(&id),
        );
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(7), "round {round}: {err}");
        let stdout = text(&out.stdout);
        let mounts = parse_mountinfo(&stdout);
        let t = mount_at(&mounts, "/tmp").cloned().expect("/tmp mounted");
        assert_eq!((t.source.as_str(), t.size()), (OURS, Some(80 * MI)), "round {round}");
        assert!(stdout.contains("TMP-WRITABLE"), "round {round}: {stdout}");
        let shm = mount_at(&mounts, "/dev/shm").cloned().expect("/dev/shm");
        assert_eq!(shm.size(), Some(96 * MI), "round {round}");
        if old_runc {
            // docs/design.md#runtimes: this runc chmods a tmpfs mountpoint by
            // path after mounting it; the temp targets go to the hook, once.
            let hooks = hooks_of(&b.dir);
            assert_eq!(hooks["prestart"].as_array().map(Vec::len), Some(1), "round {round}: {hooks}");
        } else {
            // No hook: none in config.json, so the runtime started no process of ours.
            assert_eq!(hooks_of(&b.dir), Value::Null, "round {round}");
        }
        if round == 0 {
            let wrote = if old_runc {
                "the hook carries the temp targets: runc 1.1."
            } else {
                "wrote a tmpfs mount for /tmp into the spec"
            };
            assert!(err.contains(wrote), "{err}");
            assert!(err.contains("raised the spec's /dev/shm from 64Mi to 96Mi"), "{err}");
        }
    }
    let config_json: Value =
        serde_json::from_slice(&std::fs::read(b.dir.join("config.json")).unwrap()).unwrap();
    let ours: Vec<&Value> =
        config_json["mounts"].as_array().unwrap().iter().filter(|m| m["source"] == OURS).collect();
    assert_eq!(
        ours.len(),
        usize::from(!old_runc),
        "written once over two runs (none for the hook): {ours:?}"
    );
}

#[test]
fn wrapper_passes_unreadable_bundles_to_runc() {
    require_root();
    let bin = TempDir::new("wrapper-bin");
    let wrapper = wrapper_in(&bin.0);
    let mut root = RuncRoot::new();
    let bundle = TempDir::new("bad-bundle");

    // No config.json: our warning, then runc's own error.
    let id = root.id();
    let out = output(
        Command::new(&wrapper).arg("--root").arg(&root.dir.0).arg("create").arg("-b").arg(&bundle.0).arg(&id),
    );
    let err = text(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("oci-tmpfs-hook: ") && err.contains("warning:") && err.contains("nothing is mounted"),
        "{err}"
    );
    assert!(err.contains("JSON specification file config.json not found"), "runc's error is kept: {err}");

    // Invalid JSON: left byte for byte as it was, runc reports it.
    std::fs::write(bundle.join("config.json"), "{not json").unwrap();
    let id = root.id();
    let out = output(
        Command::new(&wrapper)
            .arg("--root")
            .arg(&root.dir.0)
            .arg("create")
            .arg(format!("--bundle={}", bundle.0.display()))
            .arg(&id),
    );
    let err = text(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("is not valid JSON"), "{err}");
    assert!(err.contains("runc create failed"), "runc's error is kept: {err}");
    assert_eq!(std::fs::read_to_string(bundle.join("config.json")).unwrap(), "{not json");
}

#[test]
fn wrapper_without_a_runtime_says_so() {
    let bin = TempDir::new("wrapper-bin");
    let wrapper = wrapper_in(&bin.0);
    // Only our own name on PATH as `runc`: never exec ourselves.
    std::os::unix::fs::symlink(hook_bin(), bin.join("runc")).unwrap();
    for (path, expect) in
        [(bin.join("empty-dir"), "no runc on PATH"), (bin.0.clone(), "is this wrapper itself")]
    {
        std::fs::create_dir_all(bin.join("empty-dir")).unwrap();
        let out = output(Command::new(&wrapper).args(["state", "x"]).env("PATH", OsStr::new(&path)));
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert_eq!(err.lines().count(), 1, "one line: {err}");
        assert!(err.starts_with("oci-tmpfs-hook: ") && err.contains(expect), "{err}");
    }
}
