//! The node suite's kube node: the static binary, a fake host root, and a
//! containerd started on that host's config that serves a CRI pod.

use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::cri::{cri_call, wait_cri_ready};
use super::pods::{hold_namespace, release_namespace, remove_pods, start_containerd, tail};
use super::*;

// ------------------------------------------------------ the static binary

/// The static binary, built as install.sh builds it
/// (`packaging/build-static.sh`: musl, else glibc with crt-static; the
/// target dir's `<triple>/release` has a lock of its own, so this does not
/// wait on the `cargo test` that runs us). Once per process.
pub fn static_binary() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
        let started = Instant::now();
        let out = ok(Command::new(manifest.join("packaging/build-static.sh")).env_remove("RUSTFLAGS"));
        let bin = PathBuf::from(out.lines().last().expect("build-static.sh prints the binary's path"));
        let file = ok(Command::new("file").arg("-L").arg(&bin));
        assert!(file.contains("statically linked") || file.contains("static-pie"), "not static: {file}");
        say(&format!("node: static binary {} built in {:.0?}", bin.display(), started.elapsed()));
        bin
    })
}

// ------------------------------------------------------- the fake host

/// Every file, dir and symlink under `root`, with its mode and contents
/// (or link target): what "restores every byte" compares.
pub fn snapshot(root: &Path) -> BTreeMap<PathBuf, String> {
    super::walk(root, true)
        .into_iter()
        .map(|e| {
            let m = &e.meta;
            let mode = m.permissions().mode() & 0o7777;
            let what = if m.file_type().is_symlink() {
                format!("link {:?}", std::fs::read_link(&e.path).unwrap())
            } else if m.is_dir() {
                format!("dir {mode:o} {}:{}", m.uid(), m.gid())
            } else {
                format!("file {mode:o} {}:{} {}", m.uid(), m.gid(), text(&std::fs::read(&e.path).unwrap()))
            };
            (e.rel, what)
        })
        .collect()
}

/// The differences between two snapshots, one line each.
pub fn snapshot_diff(a: &BTreeMap<PathBuf, String>, b: &BTreeMap<PathBuf, String>) -> Vec<String> {
    let mut out = Vec::new();
    for (k, v) in a {
        match b.get(k) {
            None => out.push(format!("gone: {}", k.display())),
            Some(w) if w != v => out.push(format!("changed: {}", k.display())),
            _ => {}
        }
    }
    for k in b.keys().filter(|k| !a.contains_key(*k)) {
        out.push(format!("added: {}", k.display()));
    }
    out
}

// ------------------------------------------------------------- the image

/// A busybox-static rootfs as an OCI image layout tarball named
/// `reference`, whose entry is `sleep` (also the pause image).
pub fn build_image(dir: &Path, reference: &str) -> PathBuf {
    let rootfs = Bundle::new("node-rootfs");
    super::cri::build_image(dir, &rootfs.rootfs(), reference)
}

// ----------------------------------------------- containerd on the host

/// The containerd binaries under test.
#[derive(Clone, Debug)]
pub struct Binaries {
    pub containerd: PathBuf,
    pub ctr: PathBuf,
    /// A dir put first on containerd's PATH (its own shim), if any.
    pub path_first: Option<PathBuf>,
}

/// A containerd started on the fake host's config, in a private mount
/// namespace where the host's `bin_dir` and `/etc/oci-tmpfs-hook` are those
/// of the fake host (the paths node install wrote into the config), `/run`
/// is a tmpfs and `/dev/shm` a 64 MiB tmpfs.
pub struct Containerd {
    pub dir: TempDir,
    holder: Child,
    daemon: Option<Child>,
    pub sock: PathBuf,
    bins: Binaries,
    pub cgroup_top: String,
    pub image: String,
    pods: Vec<String>,
}

impl Containerd {
    /// `dir` holds root, state and socket (the config names them).
    pub fn start(dir: TempDir, host: &Path, config: &Path, bins: Binaries, image: &str) -> Containerd {
        let binds = format!(
            "mount --bind {host}/etc/oci-tmpfs-hook /etc/oci-tmpfs-hook; \
             mount --bind {host}/usr/local/bin /usr/local/bin;",
            host = host.display()
        );
        let holder = hold_namespace(&dir, &binds);
        let sock = dir.join("c.sock");
        let mut c = Containerd {
            dir,
            holder,
            daemon: None,
            sock,
            bins,
            cgroup_top: unique("node-cri"),
            image: image.to_string(),
            pods: Vec::new(),
        };
        let version = ok(Command::new(&c.bins.containerd).arg("--version"));
        say(&format!("node: starting {}", version.trim()));
        c.start_daemon(config);
        let tar = build_image(&c.dir.0, &c.image);
        // ctr's gRPC dial can time out on a loaded 2-core machine although
        // the CRI just answered on the same socket: a dial timeout is tried
        // again (three times in all); any other failure fails at once.
        let import = || output(c.ctr().args(["images", "import"]).arg(&tar));
        let mut out = import();
        for _ in 0..2 {
            if out.status.success() || !text(&out.stderr).contains("failed to dial") {
                break;
            }
            std::thread::sleep(std::time::Duration::from_secs(2));
            out = import();
        }
        succeeded(
            &format!("ctr images import {} (containerd log: {})", tar.display(), c.read("containerd.log")),
            &out,
        );
        c
    }

    /// The text of `name` in the node's directory, for a failure message:
    /// one that cannot be read says so in its place.
    fn read(&self, name: &str) -> String {
        let path = self.dir.join(name);
        match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) => format!("(reading {}: {e})", path.display()),
        }
    }

    pub fn ctr(&self) -> Command {
        let mut c = Command::new(&self.bins.ctr);
        c.arg("--address").arg(&self.sock).args(["--namespace", "k8s.io"]);
        c
    }

    fn start_daemon(&mut self, config: &Path) {
        let inherited = std::env::var_os("PATH")
            .unwrap_or_else(|| panic!("PATH is not set: containerd finds its shims on it"));
        let path = match &self.bins.path_first {
            Some(first) => {
                let mut p = first.clone().into_os_string();
                p.push(":");
                p.push(&inherited);
                p
            }
            None => inherited,
        };
        let _ = std::fs::remove_file(self.dir.join("containerd.log"));
        let child = start_containerd(&self.holder, &self.bins.containerd, config, &self.dir, Some(&path));
        let daemon = self.daemon.insert(child);
        wait_cri_ready(daemon, &self.sock, &self.dir.join("containerd.log"));
    }

    /// One CRI call through tests/cri/cri.py.
    pub fn cri(&self, method: &str, request: Value) -> Result<Value, String> {
        cri_call(&self.sock, method, &request)
    }

    /// The CRI suite's case 1: a host-network pod with the `oci-tmpfs`
    /// handler, one read-only container with a 1 GiB limit; what PROBE saw.
    pub fn case1_probe(&mut self) -> Result<String, String> {
        let uid = unique("uid");
        let logs = self.dir.join("logs").join(&uid);
        std::fs::create_dir_all(&logs).unwrap();
        let pod_config = json!({
            "metadata": {"name": "ro-1g", "uid": uid, "namespace": "default", "attempt": 0},
            "hostname": "", "log_directory": logs, "dns_config": {},
            "labels": {"io.kubernetes.pod.name": "ro-1g"},
            "linux": {
                "cgroup_parent": format!("/{}/pod{uid}", self.cgroup_top),
                "security_context": {"namespace_options": {"network": "NODE", "pid": "CONTAINER", "ipc": "POD"}},
                "resources": {"memory_limit_in_bytes": GI, "cpu_period": 100000, "cpu_shares": 2},
            },
        });
        let r = self.cri("RunPodSandbox", json!({"config": pod_config, "runtime_handler": "oci-tmpfs"}))?;
        let pod = r["pod_sandbox_id"].as_str().ok_or("no pod_sandbox_id")?.to_string();
        self.pods.push(pod.clone());
        let config = json!({
            "metadata": {"name": "app", "attempt": 0},
            "image": {"image": self.image},
            "command": ["sleep", "100000"],
            "log_path": "app/0.log",
            "linux": {
                "resources": {"cpu_period": 100000, "cpu_shares": 2, "memory_limit_in_bytes": GI},
                "security_context": {
                    "readonly_rootfs": true,
                    "namespace_options": {"network": "NODE", "pid": "CONTAINER", "ipc": "POD"},
                },
            },
        });
        let r = self.cri(
            "CreateContainer",
            json!({"pod_sandbox_id": pod, "config": config, "sandbox_config": pod_config}),
        )?;
        let id = r["container_id"].as_str().ok_or("no container_id")?.to_string();
        self.cri("StartContainer", json!({"container_id": id}))?;
        let probe = "cat /proc/self/mountinfo; touch /tmp/probe && echo TMP-WRITABLE; \
                     touch /dev/shm/probe && echo SHM-WRITABLE; true";
        let r =
            self.cri("ExecSync", json!({"container_id": id, "cmd": ["sh", "-c", probe], "timeout": 100}))?;
        self.cri("StopContainer", json!({"container_id": id, "timeout": 1}))?;
        self.cri("RemoveContainer", json!({"container_id": id}))?;
        Ok(r["stdout"].as_str().unwrap_or("").to_string())
    }
}

impl Drop for Containerd {
    fn drop(&mut self) {
        remove_pods(std::mem::take(&mut self.pods), |m, r| self.cri(m, r));
        if let Some(mut child) = self.daemon.take() {
            stop(&mut child, Duration::from_secs(30));
        }
        release_namespace(&mut self.holder, &self.cgroup_top);
        if std::thread::panicking() {
            let log = tail(&self.read("containerd.log"), 40);
            say(&format!("node: containerd log (last 40 lines):\n{log}"));
        }
    }
}

/// Checks case 1's PROBE output: our 256 MiB `/tmp`, a 512 MiB `/dev/shm`,
/// both writable.
pub fn check_case1(probe: &str) -> Vec<String> {
    let mounts = parse_mountinfo(probe);
    let t = mount_at(&mounts, "/tmp");
    let s = mount_at(&mounts, "/dev/shm");
    let mut bad = Vec::new();
    if !t.is_some_and(|t| t.source == "oci-tmpfs-hook" && t.fstype == "tmpfs" && t.size() == Some(256 * MI)) {
        bad.push(format!("/tmp is not our 256Mi tmpfs: {t:?}"));
    }
    if s.and_then(MountInfo::size) != Some(512 * MI) {
        bad.push(format!("/dev/shm is not 512Mi: {s:?}"));
    }
    for w in ["TMP-WRITABLE", "SHM-WRITABLE"] {
        if !probe.contains(w) {
            bad.push(format!("no {w}"));
        }
    }
    say(&format!(
        "node: case 1: /tmp {:?} {:?}, /dev/shm {:?}, {}",
        t.map(|m| &m.source),
        t.and_then(MountInfo::size),
        s.and_then(MountInfo::size),
        if bad.is_empty() { "PASS" } else { "FAILED" }
    ));
    bad
}

/// The python of tests/env/kubernetes-validate.sh (kubernetes-validate, in
/// a venv made once), asked once per process.
pub fn kubernetes_python() -> PathBuf {
    static PY: OnceLock<PathBuf> = OnceLock::new();
    PY.get_or_init(|| {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/env/kubernetes-validate.sh");
        PathBuf::from(ok(&mut Command::new(script)).trim())
    })
    .clone()
}

/// Checks that `resources` (a kustomization's list) names every manifest in
/// `dir`, and that `kubernetes-validate --strict` passes each of them for the
/// oldest and the newest Kubernetes it knows (offline schemas).
pub fn validate_manifests(what: &str, dir: &Path, resources: &[String]) {
    let py = kubernetes_python();
    let mut yamls: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".yaml") && n != "kustomization.yaml")
        .collect();
    yamls.sort();
    let mut listed = resources.to_vec();
    listed.sort();
    assert_eq!(listed, yamls, "the kustomization lists every manifest");
    let versions = ok(Command::new(&py).args([
        "-c",
        "import kubernetes_validate.utils as u\n\
         v = sorted(set(u.all_versions()), key=lambda s: tuple(map(int, s.split('.'))))\n\
         print(v[0], v[-1])",
    ]));
    let versions: Vec<&str> = versions.split_whitespace().collect();
    assert_eq!(versions.len(), 2, "{versions:?}");
    for k in &versions {
        let out = ok(Command::new(&py)
            .args(["-m", "kubernetes_validate", "--strict", "-k", k])
            .args(resources.iter().map(|r| dir.join(r))));
        eprintln!("{what}: kubernetes {k}:\n{out}");
        assert_eq!(out.matches(" passed for resource ").count(), resources.len(), "{out}");
    }
}
