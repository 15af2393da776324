//! The node suite's kube node: the static binary, a fake host root, and a
//! containerd started on that host's config that serves a CRI pod.

use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::cri::cri_python;
use super::*;

// ------------------------------------------------------ the static binary

/// The static binary, built as install.sh builds it (glibc with
/// crt-static; the target dir's `<triple>/release` has a lock of its own, so
/// this does not wait on the `cargo test` that runs us). Once per process.
pub fn static_binary() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
        let host = ok(Command::new("rustc").arg("-vV"));
        let triple =
            host.lines().find_map(|l| l.strip_prefix("host: ")).expect("rustc -vV: host").to_string();
        let target_dir = std::env::var_os("CARGO_TARGET_DIR").map_or(manifest.join("target"), PathBuf::from);
        let started = Instant::now();
        ok(Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
            .args(["build", "--release", "--locked", "--target", &triple, "--manifest-path"])
            .arg(manifest.join("Cargo.toml"))
            .env("RUSTFLAGS", "-C target-feature=+crt-static")
            .env("CARGO_TARGET_DIR", &target_dir));
        let bin = target_dir.join(&triple).join("release/oci-tmpfs-hook");
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
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, String>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
        entries.sort();
        for p in entries {
            let m = std::fs::symlink_metadata(&p).unwrap();
            let rel = p.strip_prefix(root).unwrap().to_path_buf();
            let mode = m.permissions().mode() & 0o7777;
            let what = if m.file_type().is_symlink() {
                format!("link {:?}", std::fs::read_link(&p).unwrap())
            } else if m.is_dir() {
                walk(root, &p, out);
                format!("dir {mode:o} {}:{}", m.uid(), m.gid())
            } else {
                format!("file {mode:o} {}:{} {}", m.uid(), m.gid(), text(&std::fs::read(&p).unwrap()))
            };
            out.insert(rel, what);
        }
    }
    let mut out = BTreeMap::new();
    walk(root, root, &mut out);
    out
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
    let layout = dir.join("layout");
    let blobs = layout.join("blobs/sha256");
    std::fs::create_dir_all(&blobs).unwrap();
    let blob = |path: &Path| -> (String, u64) {
        let sum = ok(Command::new("sha256sum").arg(path));
        let digest = sum.split_whitespace().next().unwrap().to_string();
        let size = std::fs::metadata(path).unwrap().len();
        std::fs::rename(path, blobs.join(&digest)).unwrap();
        (format!("sha256:{digest}"), size)
    };
    let layer_tar = dir.join("layer.tar");
    ok(Command::new("tar")
        .args(["--owner=0", "--group=0", "--numeric-owner", "-C"])
        .arg(rootfs.rootfs())
        .arg("-cf")
        .arg(&layer_tar)
        .arg("."));
    let (layer, layer_size) = blob(&layer_tar);
    let write_json = |name: &str, v: &Value| -> (String, u64) {
        let p = dir.join(name);
        std::fs::write(&p, serde_json::to_vec(v).unwrap()).unwrap();
        blob(&p)
    };
    let config = json!({
        "architecture": "amd64", "os": "linux",
        "config": {"Entrypoint": ["/bin/sleep", "2147483647"], "Env": ["PATH=/bin"], "WorkingDir": "/"},
        "rootfs": {"type": "layers", "diff_ids": [layer]},
    });
    let (config, config_size) = write_json("config.json", &config);
    let manifest = json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": config, "size": config_size},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": layer, "size": layer_size}],
    });
    let (manifest, manifest_size) = write_json("manifest.json", &manifest);
    let index = json!({"schemaVersion": 2, "manifests": [{
        "mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": manifest, "size": manifest_size,
        "platform": {"architecture": "amd64", "os": "linux"},
        "annotations": {"io.containerd.image.name": reference, "org.opencontainers.image.ref.name": "latest"},
    }]});
    std::fs::write(layout.join("index.json"), serde_json::to_vec(&index).unwrap()).unwrap();
    std::fs::write(layout.join("oci-layout"), br#"{"imageLayoutVersion":"1.0.0"}"#).unwrap();
    let tar = dir.join("image.tar");
    ok(Command::new("tar").arg("-C").arg(&layout).arg("-cf").arg(&tar).arg("."));
    tar
}

// ----------------------------------------------- containerd on the host

/// The containerd binaries under test.
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
        for d in ["etc-up", "etc-work", "logs"] {
            std::fs::create_dir_all(dir.join(d)).unwrap();
        }
        let ready = dir.join("ns-ready");
        let script = format!(
            "set -e; mount -t tmpfs -o size=64m,nosuid,nodev,noexec,mode=1777 shm /dev/shm; \
             mount -t overlay overlay -o lowerdir=/etc,upperdir={up},workdir={work} /etc; \
             mkdir -p /etc/oci-tmpfs-hook; mount --bind {host}/etc/oci-tmpfs-hook /etc/oci-tmpfs-hook; \
             mount --bind {host}/usr/local/bin /usr/local/bin; \
             mount -t tmpfs -o mode=755 run /run; : > {ready}; exec sleep infinity",
            up = dir.join("etc-up").display(),
            work = dir.join("etc-work").display(),
            host = host.display(),
            ready = ready.display()
        );
        let holder = Command::new("unshare")
            .args(["--mount", "--propagation", "private", "--", "sh", "-c", &script])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(File::create(dir.join("ns.log")).unwrap())
            .spawn()
            .expect("unshare (util-linux)");
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
        let deadline = Instant::now() + Duration::from_secs(20);
        while !ready.exists() {
            if let Ok(Some(status)) = c.holder.try_wait() {
                panic!("the mount namespace setup failed ({status}): {}", c.read("ns.log"));
            }
            assert!(Instant::now() < deadline, "the mount namespace was not ready within 20s");
            std::thread::sleep(Duration::from_millis(20));
        }
        let version = ok(Command::new(&c.bins.containerd).arg("--version"));
        say(&format!("node: starting {}", version.trim()));
        c.start_daemon(config);
        let tar = build_image(&c.dir.0, &c.image);
        ok(c.ctr().args(["images", "import"]).arg(&tar));
        c
    }

    fn read(&self, name: &str) -> String {
        std::fs::read_to_string(self.dir.join(name)).unwrap_or_default()
    }

    pub fn ctr(&self) -> Command {
        let mut c = Command::new(&self.bins.ctr);
        c.arg("--address").arg(&self.sock).args(["--namespace", "k8s.io"]);
        c
    }

    fn start_daemon(&mut self, config: &Path) {
        let log = File::create(self.dir.join("containerd.log")).unwrap();
        let mut path = std::env::var_os("PATH").unwrap_or_default();
        if let Some(first) = &self.bins.path_first {
            let mut p = first.clone().into_os_string();
            p.push(":");
            p.push(&path);
            path = p;
        }
        let child = Command::new("nsenter")
            .arg(format!("--mount=/proc/{}/ns/mnt", self.holder.id()))
            .arg("--")
            .arg(&self.bins.containerd)
            .arg("--config")
            .arg(config)
            .env("PATH", path)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("nsenter (util-linux)");
        self.daemon = Some(child);
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(Ok(Some(status))) = self.daemon.as_mut().map(Child::try_wait) {
                panic!("containerd exited ({status}):\n{}", self.read("containerd.log"));
            }
            if self.sock.exists() {
                if let Ok(status) = self.cri("Status", json!({})) {
                    let conditions = status["status"]["conditions"].as_array().cloned().unwrap_or_default();
                    if conditions.iter().any(|c| c["type"] == "RuntimeReady" && c["status"] == true) {
                        return;
                    }
                }
            }
            assert!(
                Instant::now() < deadline,
                "containerd's CRI not ready in 60s:\n{}",
                self.read("containerd.log")
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// One CRI call through tests/cri/cri.py.
    pub fn cri(&self, method: &str, request: Value) -> Result<Value, String> {
        let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut cmd = Command::new(cri_python());
        cmd.arg(manifest.join("tests/cri/cri.py")).arg("--socket").arg(&self.sock);
        cmd.args(["--timeout", "100", method]);
        let Some(out) = run_with_stdin(&mut cmd, serde_json::to_vec(&request).unwrap(), TIMEOUT) else {
            return Err(format!("{method}: cri.py timed out"));
        };
        let answer: Value = serde_json::from_slice(&out.stdout)
            .map_err(|e| format!("{method}: cri.py gave no JSON ({e}): {}", text(&out.stderr)))?;
        if answer["ok"] == true {
            Ok(answer["response"].clone())
        } else {
            Err(format!("{method}: {}: {}", answer["code"], answer["details"]))
        }
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

    /// Kills by pid what is left in this node's mount namespace and cgroups.
    fn kill_leftovers(&self) {
        use rustix::process::{kill_process, Pid, Signal};
        let kill = |pid: i32| {
            if let Some(p) = Pid::from_raw(pid) {
                let _ = kill_process(p, Signal::KILL);
            }
        };
        let holder = self.holder.id() as i32;
        let ns = std::fs::read_link(format!("/proc/{holder}/ns/mnt")).ok();
        for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else { continue };
            if pid != holder && ns.is_some() && std::fs::read_link(entry.path().join("ns/mnt")).ok() == ns {
                kill(pid);
            }
        }
        let mut dirs = Vec::new();
        for h in std::fs::read_dir("/sys/fs/cgroup").into_iter().flatten().flatten() {
            collect_dirs(&h.path().join(&self.cgroup_top), &mut dirs);
        }
        collect_dirs(&Path::new("/sys/fs/cgroup").join(&self.cgroup_top), &mut dirs);
        for d in &dirs {
            for pid in std::fs::read_to_string(d.join("cgroup.procs")).unwrap_or_default().lines() {
                if let Ok(pid) = pid.trim().parse() {
                    kill(pid);
                }
            }
        }
        for _ in 0..50 {
            dirs.retain(|d| std::fs::remove_dir(d).is_err() && d.exists());
            if dirs.is_empty() {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

fn collect_dirs(dir: &Path, out: &mut Vec<PathBuf>) {
    if !dir.is_dir() {
        return;
    }
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
            collect_dirs(&e.path(), out);
        }
    }
    out.push(dir.to_path_buf());
}

impl Drop for Containerd {
    fn drop(&mut self) {
        use rustix::process::{kill_process, Pid, Signal};
        for id in std::mem::take(&mut self.pods) {
            let _ = self.cri("StopPodSandbox", json!({"pod_sandbox_id": id}));
            let _ = self.cri("RemovePodSandbox", json!({"pod_sandbox_id": id}));
        }
        if let Some(mut child) = self.daemon.take() {
            if let Some(pid) = Pid::from_raw(child.id() as i32) {
                let _ = kill_process(pid, Signal::TERM);
            }
            let deadline = Instant::now() + Duration::from_secs(30);
            while !matches!(child.try_wait(), Ok(Some(_))) {
                if Instant::now() > deadline {
                    let _ = child.kill();
                    let _ = child.wait();
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        self.kill_leftovers();
        if let Some(pid) = Pid::from_raw(self.holder.id() as i32) {
            let _ = kill_process(pid, Signal::KILL);
        }
        let _ = self.holder.wait();
        if std::thread::panicking() {
            let log = self.read("containerd.log");
            let tail: Vec<&str> = log.lines().rev().take(40).collect::<Vec<_>>().into_iter().rev().collect();
            say(&format!("node: containerd log (last 40 lines):\n{}", tail.join("\n")));
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

/// The python of tests/env/kubernetes-validate.sh (kubernetes-validate, in a venv made once).
pub fn kubernetes_python() -> PathBuf {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/env/kubernetes-validate.sh");
    PathBuf::from(ok(&mut Command::new(script)).trim())
}
