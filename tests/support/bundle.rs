//! Busybox bundles, and real runc/crun containers run with a timeout and a
//! guard that always deletes them.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::{json, Value};

use super::{parse_mountinfo, run_with_stdin, wait_timeout, which, MountInfo};

/// The binary under test.
pub fn hook_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_oci-tmpfs-hook"))
}

/// The runtime wrapper's executor the wrapper suites run with: `spec` (the
/// default) or `hook`, from `OCI_TMPFS_TEST_WRAPPER_MODE` (tests/run.sh runs
/// them in both).
pub fn wrapper_mode() -> &'static str {
    match std::env::var("OCI_TMPFS_TEST_WRAPPER_MODE").as_deref() {
        Ok("hook") => "hook",
        Ok("spec") | Err(_) => "spec",
        Ok(other) => panic!("OCI_TMPFS_TEST_WRAPPER_MODE={other:?}: use spec or hook"),
    }
}

/// Panics unless we are root: CI runs as root, a skip would hide a failure.
pub fn require_root() {
    assert!(rustix::process::geteuid().is_root(), "these tests need root (CI runs them as root)");
}

/// The OCI runtimes under test.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Runtime {
    Runc,
    Crun,
}

impl Runtime {
    pub const ALL: [Runtime; 2] = [Runtime::Runc, Runtime::Crun];

    pub fn bin(self) -> &'static str {
        match self {
            Runtime::Runc => "runc",
            Runtime::Crun => "crun",
        }
    }
}

/// What of ours a bundle goes through when a test runs it with a runtime
/// itself, no engine in between. (A CRI node's way in, a runtime handler
/// or the NRI plugin, is [`super::pods::Executor`].)
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Via {
    /// Nothing of ours: the runtime alone.
    Bare,
    /// Our hook, registered in `config.json` by `inject` at this stage;
    /// the runtime runs it.
    Hook(&'static str),
    /// `inject --mode spec`: the spec executor edits `config.json` (or, for
    /// a runc before 1.1.8, registers our hook for the temp targets) before
    /// the runtime runs the bundle.
    InjectSpec,
    /// The runtime wrapper, `oci-tmpfs-hook runtime --`, in this mode
    /// (`"spec"` or `"hook"`), which then runs the runtime.
    Wrapper(&'static str),
}

impl Via {
    /// The wrapper in spec mode: the spec executor at `run`.
    pub const WRAPPER_SPEC: Via = Via::Wrapper("spec");
}

/// crun refuses hybrid cgroups here unless hugetlb is a v1 hierarchy (docs/design.md#test-machine).
pub fn crun_cgroup_fix() {
    let dir = Path::new("/sys/fs/cgroup/hugetlb");
    if Path::new("/sys/fs/cgroup/unified").exists() && !is_mountpoint(dir) {
        let _ = std::fs::create_dir_all(dir);
        let status =
            Command::new("mount").args(["-t", "cgroup", "-o", "hugetlb", "cgroup"]).arg(dir).status();
        // A concurrent test may have mounted it first.
        assert!(is_mountpoint(dir), "mounting the hugetlb cgroup for crun: {status:?}");
    }
}

fn is_mountpoint(dir: &Path) -> bool {
    std::fs::read_to_string("/proc/self/mountinfo")
        .map(|m| parse_mountinfo(&m).iter().any(|x| Path::new(&x.mount_point) == dir))
        .unwrap_or(false)
}

static COUNTER: AtomicUsize = AtomicUsize::new(0);

/// A unique name for a container or directory.
pub fn unique(name: &str) -> String {
    format!("oth-{name}-{}-{}", std::process::id(), COUNTER.fetch_add(1, Ordering::Relaxed))
}

/// Busybox applets the tests use.
const APPLETS: &[&str] = &[
    "sh", "cat", "mount", "df", "stat", "touch", "ls", "grep", "true", "sleep", "echo", "id", "mkdir", "dd",
    "rm", "test", "head", "wc", "su", "chmod", "env",
];

/// A bundle on disk: a busybox rootfs and a `runc spec` config with a
/// read-only root, no terminal, and a shell script as the process.
pub struct Bundle {
    pub dir: PathBuf,
    pub config: Value,
}

impl Bundle {
    /// A fresh bundle under the system temp dir.
    pub fn new(name: &str) -> Bundle {
        let dir = std::env::temp_dir().join("oci-tmpfs-hook-tests").join(unique(name));
        let rootfs = dir.join("rootfs");
        for d in ["bin", "proc", "sys", "dev", "etc", "tmp", "var"] {
            std::fs::create_dir_all(rootfs.join(d)).unwrap();
        }
        let busybox = ["/bin/busybox", "/usr/bin/busybox"]
            .into_iter()
            .find(|p| Path::new(p).exists())
            .expect("busybox-static is installed (.ci/run installs it)");
        std::fs::copy(busybox, rootfs.join("bin/busybox")).unwrap();
        for a in APPLETS {
            std::os::unix::fs::symlink("busybox", rootfs.join("bin").join(a)).unwrap();
        }
        // root's home is /tmp: the HOME every runtime gives it is then
        // covered by /tmp's tmpfs, and the suites about other targets see
        // no HOME of its own (tests/runtimes/home.rs has those).
        std::fs::write(
            rootfs.join("etc/passwd"),
            "root:x:0:0:root:/tmp:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/sh\n",
        )
        .unwrap();
        std::fs::write(rootfs.join("etc/group"), "root:x:0:\nnogroup:x:65534:\n").unwrap();
        let out =
            Command::new("runc").args(["spec", "--bundle"]).arg(&dir).output().expect("runc is installed");
        assert!(out.status.success(), "runc spec: {}", String::from_utf8_lossy(&out.stderr));
        let mut config: Value =
            serde_json::from_slice(&std::fs::read(dir.join("config.json")).unwrap()).unwrap();
        config["process"]["terminal"] = json!(false);
        config["root"]["readonly"] = json!(true);
        let mut b = Bundle { dir, config };
        b.script("true");
        b.write();
        b
    }

    pub fn rootfs(&self) -> PathBuf {
        self.dir.join("rootfs")
    }

    /// Sets the container's process to `sh -c script`.
    pub fn script(&mut self, script: &str) -> &mut Self {
        self.config["process"]["args"] = json!(["sh", "-c", script]);
        self
    }

    /// Appends `KEY=VALUE` entries to `process.env`.
    pub fn env(&mut self, entry: &str) -> &mut Self {
        self.config["process"]["env"].as_array_mut().unwrap().push(json!(entry));
        self
    }

    pub fn annotate(&mut self, key: &str, value: &str) -> &mut Self {
        if !self.config["annotations"].is_object() {
            self.config["annotations"] = json!({});
        }
        self.config["annotations"][key] = json!(value);
        self
    }

    pub fn readonly(&mut self, ro: bool) -> &mut Self {
        self.config["root"]["readonly"] = json!(ro);
        self
    }

    /// Replaces the options of the spec's `/dev/shm` mount.
    pub fn shm_options(&mut self, options: &[&str]) -> &mut Self {
        let mounts = self.config["mounts"].as_array_mut().unwrap();
        let shm = mounts.iter_mut().find(|m| m["destination"] == "/dev/shm").expect("runc spec has /dev/shm");
        shm["options"] = json!(options);
        self
    }

    /// Writes `config` to `config.json`.
    pub fn write(&self) {
        std::fs::write(self.dir.join("config.json"), serde_json::to_vec_pretty(&self.config).unwrap())
            .unwrap();
    }

    /// Writes the config, then registers the hook with `inject` at `stage`.
    pub fn inject(&mut self, stage: &str) -> &mut Self {
        self.inject_args(stage, &[])
    }

    /// Like [`Bundle::inject`], with the hook reading the host config `config`.
    pub fn inject_with_config(&mut self, stage: &str, config: &Path) -> &mut Self {
        self.inject_args(stage, &["--config".as_ref(), config.as_os_str()])
    }

    fn inject_args(&mut self, stage: &str, extra: &[&std::ffi::OsStr]) -> &mut Self {
        self.write();
        let out = Command::new(hook_bin())
            .args(["inject", "--stage", stage])
            .args(extra)
            .arg("--bundle")
            .arg(&self.dir)
            .output()
            .unwrap();
        assert!(out.status.success(), "inject: {}", String::from_utf8_lossy(&out.stderr));
        self.config = serde_json::from_slice(&std::fs::read(self.dir.join("config.json")).unwrap()).unwrap();
        self
    }

    /// `explain --json` for this bundle.
    pub fn explain(&self) -> Value {
        let out =
            Command::new(hook_bin()).args(["explain", "--json", "--bundle"]).arg(&self.dir).output().unwrap();
        assert!(out.status.success(), "explain: {}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// Runs the container to completion with `runtime`; the container is
    /// always deleted afterwards. Panics after `timeout`.
    pub fn run(&self, runtime: Runtime) -> Run {
        self.run_timeout(runtime, Duration::from_secs(60))
    }

    pub fn run_timeout(&self, runtime: Runtime, timeout: Duration) -> Run {
        if runtime == Runtime::Crun {
            crun_cgroup_fix();
        }
        self.write();
        let id = unique("c");
        let _guard = ContainerGuard { runtime, id: id.clone() };
        let child = Command::new(runtime.bin())
            .arg("run")
            .arg("--bundle")
            .arg(&self.dir)
            .arg(&id)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("runtime is installed");
        let output =
            wait_timeout(child, timeout).unwrap_or_else(|| panic!("{} run {id} timed out", runtime.bin()));
        Run { output, id }
    }
}

impl Drop for Bundle {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Deletes a container whatever happened.
pub struct ContainerGuard {
    pub runtime: Runtime,
    pub id: String,
}

impl Drop for ContainerGuard {
    fn drop(&mut self) {
        let _ = Command::new(self.runtime.bin())
            .args(["delete", "--force", &self.id])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// A finished container run.
pub struct Run {
    pub output: Output,
    pub id: String,
}

impl Run {
    pub fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.output.stdout).into_owned()
    }

    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.output.stderr).into_owned()
    }

    /// Panics with both streams unless the container exited 0.
    pub fn assert_ok(&self) -> &Self {
        assert!(
            self.output.status.success(),
            "container {} failed: {:?}\nstdout:\n{}\nstderr:\n{}",
            self.id,
            self.output.status,
            self.stdout(),
            self.stderr()
        );
        self
    }

    /// Mounts listed by a container script that ran `cat /proc/self/mountinfo`.
    pub fn mounts(&self) -> Vec<MountInfo> {
        parse_mountinfo(&self.stdout())
    }
}

/// Runs the hook binary directly with `stdin` and an empty environment, as
/// runtimes do, returning its output.
pub fn run_hook(args: &[&str], stdin: &[u8], timeout: Duration) -> Output {
    run_with_stdin(Command::new(hook_bin()).args(args).env_clear(), stdin.to_vec(), timeout)
        .expect("hook timed out")
}

/// The script most tests run: the mount table, then the caller's checks.
pub const SHOW_MOUNTS: &str = "cat /proc/self/mountinfo";

pub const MI: u64 = 1 << 20;
pub const GI: u64 = 1 << 30;

/// The first `MAJOR.MINOR` in a version text ("podman version 5.8.6").
pub fn major_minor(text: &str) -> (u32, u32) {
    let v =
        text.split_whitespace().find(|w| w.chars().next().is_some_and(|c| c.is_ascii_digit())).unwrap_or("");
    let mut parts = v.split(|c: char| !c.is_ascii_digit()).filter_map(|p| p.parse().ok());
    (parts.next().unwrap_or(0), parts.next().unwrap_or(0))
}

/// Podman's version, (major, minor), asked once.
pub fn podman_version() -> (u32, u32) {
    static V: std::sync::OnceLock<(u32, u32)> = std::sync::OnceLock::new();
    *V.get_or_init(|| {
        let out = Command::new("podman").arg("--version").output().expect("podman is installed");
        major_minor(&String::from_utf8_lossy(&out.stdout))
    })
}

/// A runtime's version, (major, minor), asked once per runtime.
pub fn runtime_version(rt: Runtime) -> (u32, u32) {
    static V: [std::sync::OnceLock<(u32, u32)>; 2] = [std::sync::OnceLock::new(), std::sync::OnceLock::new()];
    *V[rt as usize].get_or_init(|| {
        let out = Command::new(rt.bin()).arg("--version").output().expect("the runtime is installed");
        major_minor(String::from_utf8_lossy(&out.stdout).lines().next().unwrap_or(""))
    })
}

/// `runtime` is a runc older than 1.1.8, to which the wrapper's spec
/// executor hands no temp target (docs/design.md#runtimes).
pub fn runc_before_1_1_8(runtime: Runtime) -> bool {
    if runtime != Runtime::Runc {
        return false;
    }
    let out = Command::new(which("runc")).arg("--version").output().expect("runc --version");
    let text = String::from_utf8_lossy(&out.stdout);
    let version = text.lines().next().and_then(|l| l.split_whitespace().nth(2)).expect("runc version N");
    let parts: Vec<u32> =
        version.split(['.', '+', '-', '~']).take(3).map(|p| p.parse().unwrap_or(0)).collect();
    parts < vec![1, 1, 8]
}

/// A host config in `b`'s directory that logs warnings to a file there
/// (runc drops a hook's stderr when it succeeds): the config's path and
/// the log's.
pub fn warnings_to_a_file(b: &Bundle) -> (std::path::PathBuf, std::path::PathBuf) {
    let log = b.dir.join("hook.log");
    let conf = b.dir.join("host.toml");
    let text = format!("log_file = {}\nlog_level = \"warn\"\n", toml_string(log.to_str().unwrap()));
    std::fs::write(&conf, text).unwrap();
    (conf, log)
}

/// `v` as a TOML basic string.
pub fn toml_string(v: &str) -> String {
    let mut out = String::from("\"");
    for c in v.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}
