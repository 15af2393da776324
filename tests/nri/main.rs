//! The NRI plugin (`oci-tmpfs-hook nri`, issue 12) against a real
//! containerd 2.x with NRI on by default: no runtime class, no handler, no
//! NRI setting in containerd's config. The CRI cases of tests/runtimes/cri.rs (whose
//! harness this copies, since tests/runtimes/cri.rs is another suite's), driven the
//! same way over containerd's CRI socket (tests/cri/cri.py), with the plugin
//! running from the built binary in the node's mount namespace, dialling
//! `/var/run/nri/nri.sock` as a DaemonSet's plugin does.
//!
//! Run it against sid's containerd 2.1 (docs/design.md#test-machine):
//! `tests/env/nri.sh` (builds, then runs this suite in the sid environment).
//!
//! Each test starts its own containerd (private root, state, socket,
//! config), in a private mount namespace held by a `sleep`, in which `/etc`
//! is an overlay (the plugin's host config `/etc/oci-tmpfs-hook/config.toml`
//! is this test's), `/dev/shm` a 64 MiB tmpfs (the node's) and `/run` a
//! tmpfs (so NRI's socket is private too). The plugin logs at info level to
//! `plugin.log` in the test's directory, printed when a case fails.

#[path = "../support/mod.rs"]
mod support;

use support::cri::*;
use support::*;

/// Node boot, crashes and other plugins (issue 18).
mod boot;

use std::fmt::Write as _;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// The mount source the hook gives its tmpfs.
const OURS: &str = "oci-tmpfs-hook";
/// containerd's pod `/dev/shm` (hard-coded) and this test's node `/dev/shm`.
const SHM_64M: u64 = 64 * MI;
const ANN_TMP: &str = "oci-tmpfs-hook/tmp-size";
const ANN_SHM: &str = "oci-tmpfs-hook/shm-size";
/// The script that shows what a container sees and whether it can write.
const PROBE: &str = "cat /proc/self/mountinfo; \
    touch /tmp/probe 2>/dev/null && echo TMP-WRITABLE; \
    touch /dev/shm/probe 2>/dev/null && echo SHM-WRITABLE; true";

// ---------------------------------------------------------------- helpers

// ------------------------------------------------------ containerd binary

/// The containerd under test: the one on `PATH`, and its version.
struct Containerd {
    bin: PathBuf,
    ctr: PathBuf,
    version: String,
    major: u32,
}

impl Containerd {
    /// The one on `PATH`, or `$OCI_TMPFS_HOOK_NRI_CONTAINERD` (another
    /// build, e.g. a containerd 2.2 for the validator's case).
    fn find() -> Containerd {
        let bin = std::env::var_os("OCI_TMPFS_HOOK_NRI_CONTAINERD")
            .map_or_else(|| which("containerd"), PathBuf::from);
        let ctr = which("ctr");
        // "containerd github.com/containerd/containerd[/v2] 1.6.20~ds1 REVISION"
        let out = ok(Command::new(&bin).arg("--version"));
        let version = out.split_whitespace().nth(2).unwrap_or_else(|| panic!("containerd --version: {out}"));
        let major = version
            .trim_start_matches('v')
            .split('.')
            .next()
            .and_then(|m| m.parse().ok())
            .unwrap_or_else(|| panic!("containerd --version: {out}"));
        Containerd { bin, ctr, version: version.to_string(), major }
    }

    /// The config version this containerd is given.
    fn config_version(&self) -> u32 {
        if self.major >= 2 {
            3
        } else {
            2
        }
    }

    /// containerd's config before `setup containerd` adds the handler.
    fn base_config(&self, dir: &TempDir, sandbox_image: &str) -> String {
        let (root, state, sock) = (dir.join("root"), dir.join("state"), dir.join("c.sock"));
        let (cni_bin, cni_conf, opt) = (dir.join("cni/bin"), dir.join("cni/conf"), dir.join("opt"));
        let mut s = format!(
            "version = {}\nroot = {:?}\nstate = {:?}\n\n[grpc]\n  address = {:?}\n\n[ttrpc]\n  address = \"{}.ttrpc\"\n\n[plugins]\n",
            self.config_version(),
            root,
            state,
            sock,
            sock.display()
        );
        if self.major >= 2 {
            let _ = write!(
                s,
                "  [plugins.\"io.containerd.cri.v1.images\".pinned_images]\n    sandbox = {sandbox_image:?}\n\
                 \x20 [plugins.\"io.containerd.cri.v1.runtime\"]\n    restrict_oom_score_adj = true\n\
                 \x20   [plugins.\"io.containerd.cri.v1.runtime\".cni]\n      bin_dir = {cni_bin:?}\n      conf_dir = {cni_conf:?}\n\
                 \x20 [plugins.\"io.containerd.grpc.v1.cri\"]\n    stream_server_port = \"0\"\n"
            );
        } else {
            let _ = write!(
                s,
                "  [plugins.\"io.containerd.grpc.v1.cri\"]\n    sandbox_image = {sandbox_image:?}\n    restrict_oom_score_adj = true\n    stream_server_port = \"0\"\n\
                 \x20   [plugins.\"io.containerd.grpc.v1.cri\".cni]\n      bin_dir = {cni_bin:?}\n      conf_dir = {cni_conf:?}\n"
            );
        }
        let _ = write!(s, "  [plugins.\"io.containerd.internal.v1.opt\"]\n    path = {opt:?}\n");
        s
    }
}

// ------------------------------------------------------------- the image

/// A busybox-static rootfs as an OCI image layout tarball named `reference`,
/// whose entry is `sleep` (so it also serves as the pause image).
fn build_image(dir: &TempDir, rootfs: &Path, reference: &str) -> PathBuf {
    build_image_with(dir, rootfs, reference, &["/bin/sleep", "2147483647"], "image")
}

/// An OCI image layout tarball of `rootfs` named `reference` with
/// `entrypoint`, built in `dir/<name>*`.
fn build_image_with(
    dir: &TempDir,
    rootfs: &Path,
    reference: &str,
    entrypoint: &[&str],
    name: &str,
) -> PathBuf {
    let dir = &TempDir(dir.join(name));
    std::fs::create_dir_all(&dir.0).unwrap();
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
        .arg(rootfs)
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
        "config": {"Entrypoint": entrypoint, "Env": ["PATH=/bin"], "WorkingDir": "/"},
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
    let tar = dir.0.with_extension("tar");
    ok(Command::new("tar").arg("-C").arg(&layout).arg("-cf").arg(&tar).arg("."));
    tar
}

// ------------------------------------------------------------- the node

/// What a pod is started with.
struct PodOpts<'a> {
    handler: &'a str,
    annotations: &'a [(&'a str, &'a str)],
    host_ipc: bool,
    /// The node's pid namespace (the plugin's pod: hostPID).
    host_pid: bool,
    /// The pod's summed memory limit (sent as the sandbox's resources).
    memory: u64,
}

impl Default for PodOpts<'_> {
    fn default() -> Self {
        PodOpts { handler: "", annotations: &[], host_ipc: false, host_pid: false, memory: GI }
    }
}

/// A volume (kubelet's hostPath or emptyDir): CRI's `Mount`.
struct Vol<'a> {
    container_path: &'a str,
    host_path: &'a Path,
    /// `PROPAGATION_PRIVATE` or `PROPAGATION_BIDIRECTIONAL` (the host path
    /// must then be a shared mount).
    propagation: &'a str,
}

/// What a container is created with.
struct CtrOpts<'a> {
    name: &'a str,
    readonly: bool,
    memory: Option<u64>,
    env: &'a [(&'a str, &'a str)],
    /// Another image than the node's busybox.
    image: Option<&'a str>,
    mounts: &'a [Vol<'a>],
}

impl<'a> CtrOpts<'a> {
    /// A read-only container with a memory limit.
    fn ro(name: &'a str, memory: u64) -> CtrOpts<'a> {
        CtrOpts { name, readonly: true, memory: Some(memory), env: &[], image: None, mounts: &[] }
    }
}

/// A pod sandbox: its id and the config it was run with (kubelet sends that
/// config again with every CreateContainer).
struct Pod {
    id: String,
    config: Value,
    ipc: &'static str,
}

/// One node: a private mount namespace, a containerd in it, the images.
struct Node {
    dir: TempDir,
    ctd: Containerd,
    /// Holds the mount namespace: `sleep`, started by `unshare`.
    holder: Child,
    daemon: Option<Child>,
    plugin: Option<Child>,
    config: PathBuf,
    sock: PathBuf,
    image: String,
    cgroup_top: String,
    pods: Vec<String>,
    case: String,
    /// The hook path the plugin's adjustments name (the node's view).
    hook: PathBuf,
}

impl Node {
    fn start(case: &str) -> Node {
        Node::start_with(case, true)
    }

    /// A node whose containerd is up; with `plugin`, ours is registered too.
    fn start_with(case: &str, plugin: bool) -> Node {
        require_root();
        let ctd = Containerd::find();
        let dir = TempDir::new("cri");
        for d in ["etc-up", "etc-work", "cni/bin", "cni/conf", "logs"] {
            std::fs::create_dir_all(dir.join(d)).unwrap();
        }
        let ready = dir.join("ns-ready");
        let script = format!(
            "set -e; mount -t tmpfs -o size=64m,nosuid,nodev,noexec,mode=1777 shm /dev/shm; \
             mount -t overlay overlay -o lowerdir=/etc,upperdir={up},workdir={work} /etc; \
             mount -t tmpfs -o mode=755 run /run; mkdir -p /etc/oci-tmpfs-hook; : > {ready}; exec sleep infinity",
            up = dir.join("etc-up").display(),
            work = dir.join("etc-work").display(),
            ready = ready.display()
        );
        let holder = Command::new("unshare")
            .args(["--mount", "--propagation", "private", "--", "sh", "-c", &script])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(File::create(dir.join("ns.log")).unwrap())
            .spawn()
            .expect("unshare (util-linux)");
        let reference = format!("docker.io/library/{}:latest", unique("busybox"));
        let sock = dir.join("c.sock");
        let config = dir.join("config.toml");
        let mut node = Node {
            dir,
            ctd,
            holder,
            daemon: None,
            plugin: None,
            config,
            sock,
            image: reference,
            cgroup_top: unique("cri"),
            pods: Vec::new(),
            case: case.to_string(),
            hook: plugin_bin().canonicalize().expect("the plugin's binary"),
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while !ready.exists() {
            if let Ok(Some(status)) = node.holder.try_wait() {
                panic!("the mount namespace setup failed ({status}): {}", node.read("ns.log"));
            }
            assert!(Instant::now() < deadline, "the mount namespace was not ready within 20s");
            std::thread::sleep(Duration::from_millis(20));
        }
        node.host_config("");

        // containerd's own config: paths only, NRI left at its default (on).
        assert!(
            node.ctd.major >= 2,
            "the NRI suite needs containerd 2.x (NRI on by default), found {}",
            node.ctd.version
        );
        std::fs::write(&node.config, node.ctd.base_config(&node.dir, &node.image)).unwrap();

        node.start_daemon();
        if plugin {
            node.start_plugin();
        }
        let runc = ok(Command::new("runc").arg("--version"));
        say(&format!(
            "nri {case}: containerd {} ({}), config version {}, {}",
            node.ctd.version,
            node.ctd.bin.display(),
            node.ctd.config_version(),
            runc.lines().next().unwrap_or("runc ?")
        ));
        let rootfs = Bundle::new("cri-rootfs");
        let tar = build_image(&node.dir, &rootfs.rootfs(), &node.image);
        ok(node.ctr().args(["images", "import"]).arg(&tar));
        node
    }

    fn read(&self, name: &str) -> String {
        std::fs::read_to_string(self.dir.join(name)).unwrap_or_default()
    }

    /// The namespace's view of `path` (its `/etc`, `/dev/shm`).
    fn ns_path(&self, path: &str) -> PathBuf {
        PathBuf::from(format!("/proc/{}/root{path}", self.holder.id()))
    }

    /// Writes the host config that the plugin reads (for each container).
    fn host_config(&self, toml: &str) {
        let path = self.ns_path("/etc/oci-tmpfs-hook/config.toml");
        std::fs::write(&path, toml).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
    }

    /// How many times the plugin has registered, from its log.
    fn registrations(&self) -> usize {
        self.read("plugin.log").lines().filter(|l| l.contains("nri: registered as")).count()
    }

    /// Starts the plugin in the node's mount namespace and waits until it
    /// has registered (one more time than before).
    fn start_plugin(&mut self) {
        self.start_plugin_with(&[]);
    }

    /// [`Node::start_plugin`] with `args` after `nri --socket ...`.
    fn start_plugin_with(&mut self, args: &[String]) {
        let before = self.registrations();
        let log = File::options().create(true).append(true).open(self.dir.join("plugin.log")).unwrap();
        let child = Command::new("nsenter")
            .arg(format!("--mount=/proc/{}/ns/mnt", self.holder.id()))
            .arg("--")
            .arg(plugin_bin())
            .args(["nri", "--socket", "/var/run/nri/nri.sock"])
            .args(args)
            .env("OCI_TMPFS_HOOK_LOG", "debug")
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("nsenter (util-linux)");
        self.plugin = Some(child);
        self.wait_registered(before + 1);
    }

    /// Waits up to 10 s for the plugin's `n`th registration.
    fn wait_registered(&mut self, n: usize) -> Duration {
        let t0 = Instant::now();
        while self.registrations() < n {
            if let Some(Ok(Some(status))) = self.plugin.as_mut().map(Child::try_wait) {
                panic!("the plugin exited ({status}):\n{}", self.read("plugin.log"));
            }
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "the plugin did not register within 10s:\n{}",
                self.read("plugin.log")
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        t0.elapsed()
    }

    /// Stops the plugin by its pid (SIGTERM).
    fn stop_plugin(&mut self) {
        use rustix::process::{kill_process, Pid, Signal};
        let Some(mut child) = self.plugin.take() else { return };
        if let Some(pid) = Pid::from_raw(child.id() as i32) {
            let _ = kill_process(pid, Signal::TERM);
        }
        if wait_status(&mut child, Duration::from_secs(10)).is_none() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// The final `config.json` of container `id`, as the runtime got it.
    fn final_config(&self, id: &str) -> Result<Value, String> {
        let path = self.dir.join("state/io.containerd.runtime.v2.task/k8s.io").join(id).join("config.json");
        let text = std::fs::read(&path).map_err(|e| format!("reading {}: {e}", path.display()))?;
        serde_json::from_slice(&text).map_err(|e| e.to_string())
    }

    fn ctr(&self) -> Command {
        let mut c = Command::new(&self.ctd.ctr);
        c.arg("--address").arg(&self.sock).args(["--namespace", "k8s.io"]);
        c
    }

    /// Starts containerd in the node's mount namespace and waits for CRI.
    fn start_daemon(&mut self) {
        let log = File::options().create(true).append(true).open(self.dir.join("containerd.log")).unwrap();
        let child = Command::new("nsenter")
            .arg(format!("--mount=/proc/{}/ns/mnt", self.holder.id()))
            .arg("--")
            .arg(&self.ctd.bin)
            .arg("--config")
            .arg(&self.config)
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

    /// Stops containerd by its pid (SIGTERM; the shims and pods keep running).
    fn stop_daemon(&mut self) {
        use rustix::process::{kill_process, Pid, Signal};
        let Some(mut child) = self.daemon.take() else { return };
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

    fn restart_daemon(&mut self) {
        self.stop_daemon();
        self.start_daemon();
    }

    /// One CRI call: the response, or the gRPC error as "CODE: details".
    fn cri(&self, method: &str, request: Value) -> Result<Value, String> {
        let mut cmd = cri_command();
        cmd.arg(cri_script()).arg("--socket").arg(&self.sock).args(["--timeout", "100", method]);
        // No panic here: the cleanup in Drop calls this too.
        let Some(out) = run_with_stdin(&mut cmd, serde_json::to_vec(&request).unwrap(), TIMEOUT) else {
            return Err(format!("{method}: cri.py timed out after {TIMEOUT:?}"));
        };
        let answer: Value = match serde_json::from_slice(&out.stdout) {
            Ok(v) => v,
            Err(e) => {
                return Err(format!(
                    "{method}: cri.py gave no JSON ({e}): {:?}\nstdout: {}\nstderr: {}",
                    out.status,
                    text(&out.stdout),
                    text(&out.stderr)
                ))
            }
        };
        if answer["ok"] == true {
            Ok(answer["response"].clone())
        } else {
            Err(format!(
                "{method}: {}: {}",
                answer["code"].as_str().unwrap_or("?"),
                answer["details"].as_str().unwrap_or("")
            ))
        }
    }

    /// RunPodSandbox as kubelet sends it for a host-network pod.
    fn run_pod(&mut self, name: &str, opts: &PodOpts) -> Result<Pod, String> {
        let uid = unique("uid");
        let ipc = if opts.host_ipc { "NODE" } else { "POD" };
        let pid = if opts.host_pid { "NODE" } else { "CONTAINER" };
        let logs = self.dir.join("logs").join(&uid);
        std::fs::create_dir_all(&logs).unwrap();
        let annotations: serde_json::Map<String, Value> =
            opts.annotations.iter().map(|(k, v)| (k.to_string(), json!(v))).collect();
        let config = json!({
            "metadata": {"name": name, "uid": uid, "namespace": "default", "attempt": 0},
            "hostname": "",
            "log_directory": logs,
            "dns_config": {},
            "labels": {"io.kubernetes.pod.name": name, "io.kubernetes.pod.namespace": "default", "io.kubernetes.pod.uid": uid},
            "annotations": annotations,
            "linux": {
                "cgroup_parent": format!("/{}/pod{uid}", self.cgroup_top),
                "security_context": {"namespace_options": {"network": "NODE", "pid": pid, "ipc": ipc}},
                "resources": {"memory_limit_in_bytes": opts.memory, "cpu_period": 100000, "cpu_shares": 2},
            },
        });
        let r = self.cri("RunPodSandbox", json!({"config": config, "runtime_handler": opts.handler}))?;
        let id = r["pod_sandbox_id"].as_str().expect("pod_sandbox_id").to_string();
        self.pods.push(id.clone());
        Ok(Pod { id, config, ipc })
    }

    /// The CreateContainer request kubelet sends for `c` in `pod`.
    fn container_request(&self, pod: &Pod, c: &CtrOpts) -> Value {
        let envs: Vec<Value> = c.env.iter().map(|(k, v)| json!({"key": k, "value": v})).collect();
        let mut resources = json!({"cpu_period": 100000, "cpu_shares": 2});
        if let Some(m) = c.memory {
            resources["memory_limit_in_bytes"] = json!(m);
            // kubelet's Burstable score for a memory request of `m`.
            let info = rustix::system::sysinfo();
            let ram = (info.totalram as u64).saturating_mul(u64::from(info.mem_unit.max(1)));
            resources["oom_score_adj"] = json!((1000 - (1000 * m / ram.max(1)) as i64).clamp(2, 999));
        }
        let mounts: Vec<Value> = c
            .mounts
            .iter()
            .map(|v| json!({"container_path": v.container_path, "host_path": v.host_path, "propagation": v.propagation}))
            .collect();
        let config = json!({
            "metadata": {"name": c.name, "attempt": 0},
            "image": {"image": c.image.unwrap_or(&self.image)},
            "mounts": mounts,
            "command": ["sleep", "100000"],
            "envs": envs,
            "labels": {"io.kubernetes.container.name": c.name},
            "log_path": format!("{}/0.log", c.name),
            "linux": {
                "resources": resources,
                "security_context": {
                    "readonly_rootfs": c.readonly,
                    "namespace_options": {"network": "NODE", "pid": "CONTAINER", "ipc": pod.ipc},
                },
            },
        });
        json!({"pod_sandbox_id": pod.id, "config": config, "sandbox_config": pod.config})
    }

    /// CreateContainer + StartContainer; the container id.
    fn start_container(&self, pod: &Pod, c: &CtrOpts) -> Result<String, String> {
        let r = self.cri("CreateContainer", self.container_request(pod, c))?;
        let id = r["container_id"].as_str().expect("container_id").to_string();
        self.cri("StartContainer", json!({"container_id": id}))?;
        Ok(id)
    }

    /// ExecSync: (exit code, stdout, stderr).
    fn exec(&self, id: &str, cmd: &[&str]) -> Result<(i64, String, String), String> {
        let r = self.cri("ExecSync", json!({"container_id": id, "cmd": cmd, "timeout": 100}))?;
        let out = |k: &str| r[k].as_str().unwrap_or("").to_string();
        Ok((r["exit_code"].as_i64().unwrap_or(-1), out("stdout"), out("stderr")))
    }

    /// What a container sees: PROBE's output.
    fn probe(&self, id: &str) -> Result<String, String> {
        self.exec(id, &["sh", "-c", PROBE]).map(|(_, out, _)| out)
    }

    /// ContainerStatus (verbose): the status and the parsed info.
    fn status(&self, id: &str) -> Result<(Value, Value), String> {
        let r = self.cri("ContainerStatus", json!({"container_id": id, "verbose": true}))?;
        let info =
            r["info"]["info"].as_str().and_then(|s| serde_json::from_str(s).ok()).unwrap_or(Value::Null);
        Ok((r["status"].clone(), info))
    }

    /// The host pid of the pod's sandbox (pause) process.
    fn sandbox_pid(&self, pod: &Pod) -> Result<u32, String> {
        let r = self.cri("PodSandboxStatus", json!({"pod_sandbox_id": pod.id, "verbose": true}))?;
        let info: Value =
            r["info"]["info"].as_str().and_then(|s| serde_json::from_str(s).ok()).unwrap_or(Value::Null);
        info["pid"].as_u64().map(|p| p as u32).ok_or_else(|| format!("no pid in the sandbox info: {r}"))
    }

    /// StopContainer + RemoveContainer, then StopPodSandbox + RemovePodSandbox.
    fn teardown(&mut self, pod: &Pod, containers: &[&str]) -> Result<(), String> {
        for id in containers {
            self.cri("StopContainer", json!({"container_id": id, "timeout": 1}))?;
            self.cri("RemoveContainer", json!({"container_id": id}))?;
        }
        self.cri("StopPodSandbox", json!({"pod_sandbox_id": pod.id}))?;
        self.cri("RemovePodSandbox", json!({"pod_sandbox_id": pod.id}))?;
        self.pods.retain(|p| *p != pod.id);
        Ok(())
    }

    /// The memory cgroup's OOM-kill count of a container (cgroup v1 or v2).
    fn oom_kills(&self, pod: &Pod, id: &str) -> Option<u64> {
        let parent = pod.config["linux"]["cgroup_parent"].as_str()?;
        [
            (format!("/sys/fs/cgroup/memory{parent}/{id}/memory.oom_control"), "oom_kill "),
            (format!("/sys/fs/cgroup{parent}/{id}/memory.events"), "oom_kill "),
        ]
        .iter()
        .find_map(|(file, key)| {
            let t = std::fs::read_to_string(file).ok()?;
            t.lines().find_map(|l| l.strip_prefix(key)).and_then(|n| n.trim().parse().ok())
        })
    }

    /// Kills by pid, after containerd, what is left of this node: processes
    /// in its mount namespace (shims) and in its cgroups (containers).
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
        // Deepest first; a cgroup empties shortly after its last process dies.
        for _ in 0..50 {
            dirs.retain(|d| std::fs::remove_dir(d).is_err() && d.exists());
            if dirs.is_empty() {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// The plugin's binary: `$OCI_TMPFS_HOOK_NRI_BIN` (the bench runs the
/// static release build) or the tested one.
fn plugin_bin() -> PathBuf {
    std::env::var_os("OCI_TMPFS_HOOK_NRI_BIN").map_or_else(hook_bin, PathBuf::from)
}

/// `dir` and every directory under it, deepest first.
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

impl Drop for Node {
    fn drop(&mut self) {
        use rustix::process::{kill_process, Pid, Signal};
        // A host config the wrapper refuses would fail every runc call.
        let _ = std::fs::write(self.ns_path("/etc/oci-tmpfs-hook/config.toml"), "");
        if self.daemon.is_some() {
            for id in std::mem::take(&mut self.pods) {
                let _ = self.cri("StopPodSandbox", json!({"pod_sandbox_id": id}));
                let _ = self.cri("RemovePodSandbox", json!({"pod_sandbox_id": id}));
            }
        }
        self.stop_daemon();
        self.stop_plugin();
        self.kill_leftovers();
        if let Some(pid) = Pid::from_raw(self.holder.id() as i32) {
            let _ = kill_process(pid, Signal::KILL);
        }
        let _ = self.holder.wait();
        if std::thread::panicking() {
            let log = self.read("containerd.log");
            let tail: Vec<&str> = log.lines().rev().take(40).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            say(&format!("nri {}: containerd log (last 40 lines):\n{}", self.case, tail.join("\n")));
            say(&format!("nri {}: plugin log:\n{}", self.case, self.read("plugin.log")));
        }
    }
}

// ------------------------------------------------------------- checking

/// What one case saw and which of its checks failed.
struct Report {
    case: String,
    failures: Vec<String>,
}

impl Report {
    fn new(case: &str) -> Report {
        Report { case: case.to_string(), failures: Vec::new() }
    }

    fn seen(&self, what: &str, value: impl std::fmt::Display) {
        say(&format!("nri {}: {what}: {value}", self.case));
    }

    fn check(&mut self, ok: bool, what: impl Into<String>) {
        if !ok {
            let what = what.into();
            say(&format!("nri {}: FAILED: {what}", self.case));
            self.failures.push(what);
        }
    }

    /// A step that has to work for the rest to mean anything.
    fn step<T>(&mut self, what: &str, r: Result<T, String>) -> Option<T> {
        match r {
            Ok(v) => Some(v),
            Err(e) => {
                self.check(false, format!("{what}: {e}"));
                None
            }
        }
    }

    /// Checks a container's `/tmp` (ours, `tmp` bytes, nosuid/nodev,
    /// writable) and `/dev/shm` (`shm` bytes, writable) from PROBE's output.
    fn served(&mut self, what: &str, probe: &str, tmp: u64, shm: u64) {
        let mounts = parse_mountinfo(probe);
        let t = mount_at(&mounts, "/tmp");
        let s = mount_at(&mounts, "/dev/shm");
        self.seen(
            what,
            format!(
                "/tmp {} (source {}), /dev/shm {}, tmp {}, shm {}",
                sz(t.and_then(MountInfo::size)),
                t.map_or("-", |m| m.source.as_str()),
                sz(s.and_then(MountInfo::size)),
                if probe.contains("TMP-WRITABLE") { "writable" } else { "NOT writable" },
                if probe.contains("SHM-WRITABLE") { "writable" } else { "NOT writable" },
            ),
        );
        self.check(
            t.is_some_and(|t| t.source == OURS && t.fstype == "tmpfs"),
            format!("{what}: /tmp is not our tmpfs: {t:?}"),
        );
        self.check(
            t.and_then(MountInfo::size) == Some(tmp),
            format!("{what}: /tmp is {}, want {}", sz(t.and_then(MountInfo::size)), sz(Some(tmp))),
        );
        self.check(
            t.is_some_and(|t| t.has("nosuid") && t.has("nodev") && t.has("rw")),
            format!("{what}: /tmp options: {t:?}"),
        );
        self.check(probe.contains("TMP-WRITABLE"), format!("{what}: /tmp is not writable"));
        self.check(
            s.and_then(MountInfo::size) == Some(shm),
            format!("{what}: /dev/shm is {}, want {}", sz(s.and_then(MountInfo::size)), sz(Some(shm))),
        );
        self.check(probe.contains("SHM-WRITABLE"), format!("{what}: /dev/shm is not writable"));
    }

    /// Checks that nothing of ours is mounted and `/dev/shm` is `shm` bytes.
    fn untouched(&mut self, what: &str, mountinfo: &str, shm: u64) {
        let mounts = parse_mountinfo(mountinfo);
        let ours: Vec<&MountInfo> = mounts.iter().filter(|m| m.source == OURS).collect();
        let s = mount_at(&mounts, "/dev/shm").and_then(MountInfo::size);
        let tmp = mount_at(&mounts, "/tmp").map(|m| format!("{} {}", m.fstype, sz(m.size())));
        self.seen(
            what,
            format!(
                "mounts of ours: {:?}, /tmp mount: {}, /dev/shm {}",
                ours.iter().map(|m| format!("{} {}", m.mount_point, sz(m.size()))).collect::<Vec<_>>(),
                tmp.as_deref().unwrap_or("none"),
                sz(s)
            ),
        );
        self.check(!mounts.is_empty(), format!("{what}: no mount table"));
        self.check(ours.is_empty(), format!("{what}: the hook mounted {ours:?}"));
        self.check(s == Some(shm), format!("{what}: /dev/shm is {}, want {}", sz(s), sz(Some(shm))));
    }

    /// Checks the executor in container `id`'s final `config.json`: never a
    /// mount of ours (the plugin writes no path-resolved mount), and our hook
    /// at createRuntime (`node.hook` with PATH in its environment) iff
    /// `hooked`, at no other stage.
    fn executor(&mut self, node: &Node, id: &str, hooked: bool) {
        let Some(config) = self.step("the final config.json", node.final_config(id)) else { return };
        let ours: Vec<&Value> = config["mounts"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|m| m["source"] == OURS || m["type"] == "tmpfs" && m["destination"] == "/tmp")
            .collect();
        self.check(ours.is_empty(), format!("{id}: mounts of ours in config.json: {ours:?}"));
        let hooks = config["hooks"].as_object().cloned().unwrap_or_default();
        let path = node.hook.display().to_string();
        let mut at: Vec<String> = Vec::new();
        for (stage, list) in &hooks {
            for h in list.as_array().into_iter().flatten() {
                if h["path"] == path.as_str() || h["args"][1] == "hook" {
                    at.push(stage.clone());
                    if stage == "createRuntime" {
                        let args: Vec<&str> =
                            h["args"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
                        self.check(
                            h["path"] == path.as_str()
                                && args[..4] == ["oci-tmpfs-hook", "hook", "--stage", "createRuntime"],
                            format!("{id}: our hook entry: {h}"),
                        );
                        self.check(
                            h["env"].as_array().is_some_and(|e| {
                                e.iter().any(|v| v.as_str().is_some_and(|v| v.starts_with("PATH=")))
                            }),
                            format!("{id}: our hook has no PATH: {h}"),
                        );
                    }
                }
            }
        }
        self.seen("executor", format!("our hook in config.json at {at:?}, mounts of ours {}", ours.len()));
        let want: Vec<String> = if hooked { vec!["createRuntime".into()] } else { Vec::new() };
        self.check(at == want, format!("{id}: our hook at {at:?}, want {want:?}"));
    }

    /// Checks the read-only signal in containerd's real request for `who`
    /// (the plugin's debug line): both files bound `ro` iff `readonly`.
    fn signal(&mut self, node: &Node, who: &str, readonly: bool) {
        let log = node.read("plugin.log");
        let line = log.lines().find(|l| l.contains(&format!("nri: {who}: read-only root:"))).unwrap_or("");
        self.seen("containerd's request", line.split("read-only root: ").nth(1).unwrap_or("(no line)"));
        let want = if readonly { "ro]" } else { "rw]" };
        for file in ["/etc/hostname [", "/etc/resolv.conf ["] {
            let bound = line.split("; ").find(|p| p.contains(file)).unwrap_or("");
            self.check(
                bound.ends_with(want) || bound.contains(&format!(",{want}")),
                format!("{who}: {file}...] not {want} in: {line}"),
            );
        }
        self.check(
            line.contains(&format!("read-only root: {readonly}")),
            format!("{who}: read-only root is not {readonly}: {line}"),
        );
    }

    fn finish(self) {
        say(&format!(
            "nri {}: {}",
            self.case,
            if self.failures.is_empty() {
                "PASS".to_string()
            } else {
                format!("{} checks failed", self.failures.len())
            }
        ));
        assert!(self.failures.is_empty(), "nri {}:\n  {}", self.case, self.failures.join("\n  "));
    }
}

// ---------------------------------------------------------------- cases

/// Case 1: One read-only container with a 1 GiB limit: `/tmp` 256 MiB and
/// `/dev/shm` 512 MiB, both writable; 600 MiB into `/dev/shm` is ENOSPC,
/// not an OOM kill.
#[test]
fn case1_read_only_container_gets_sized_tmp_and_shm() {
    let mut r = Report::new("case1");
    let mut node = Node::start("case1");
    let Some(pod) = r.step("RunPodSandbox", node.run_pod("ro-1g", &PodOpts::default())) else {
        return r.finish();
    };
    let Some(c) = r.step("start ro 1Gi", node.start_container(&pod, &CtrOpts::ro("app", GI))) else {
        return r.finish();
    };
    if let Some(p) = r.step("probe", node.probe(&c)) {
        r.served("ro 1Gi", &p, 256 * MI, 512 * MI);
    }
    r.executor(&node, &c, true);
    r.signal(&node, "default/ro-1g/app", true);
    let dd = "dd if=/dev/zero of=/dev/shm/fill bs=1M count=600; e=$?; rm -f /dev/shm/fill; exit $e";
    if let Some((code, out, err)) = r.step("dd 600Mi", node.exec(&c, &["sh", "-c", dd])) {
        r.seen("dd 600 MiB into /dev/shm", format!("exit {code}: {}", err.trim().replace('\n', " | ")));
        r.check(
            code != 0 && err.contains("No space left on device"),
            format!("dd of 600 MiB into /dev/shm: exit {code}, want ENOSPC: {out}{err}"),
        );
    }
    if let Some((status, _)) = r.step("ContainerStatus", node.status(&c)) {
        let (state, reason) =
            (status["state"].as_str().unwrap_or("?"), status["reason"].as_str().unwrap_or(""));
        let kills = node.oom_kills(&pod, &c);
        r.seen("after dd", format!("state {state}, reason {reason:?}, cgroup oom_kill {kills:?}"));
        r.check(
            state == "CONTAINER_RUNNING" && reason != "OOMKilled",
            format!("container after dd: {state} {reason}"),
        );
        r.check(kills.unwrap_or(0) == 0, format!("the memory cgroup counted {kills:?} OOM kills"));
    }
    r.step("stop and remove", node.teardown(&pod, &[&c]));
    r.finish();
}

/// Runs one pod annotated `tmp-size` / `shm-size` = `asked`, with a
/// read-only 1 GiB container, under host config `host`, and checks that
/// `/tmp` and `/dev/shm` come out as `want`.
fn annotated_pod(node: &mut Node, r: &mut Report, part: &str, host: &str, asked: [&str; 2], want: [u64; 2]) {
    node.host_config(host);
    let ann = [(ANN_TMP, asked[0]), (ANN_SHM, asked[1])];
    let opts = PodOpts { annotations: &ann, ..PodOpts::default() };
    let Some(pod) = r.step(&format!("{part}: RunPodSandbox"), node.run_pod(part, &opts)) else {
        // The wrapper's own error does not reach CRI's message: say what
        // `doctor` makes of the host config.
        let path = node.ns_path("/etc/oci-tmpfs-hook/config.toml");
        let out = output_with(Command::new(hook_bin()).arg("doctor").arg("--config").arg(&path), b"");
        let doctor = text(&out.stdout);
        r.seen(&format!("{part}: doctor"), doctor.lines().find(|l| l.contains(" config:")).unwrap_or("?"));
        return;
    };
    let Some(c) = r.step(&format!("{part}: start"), node.start_container(&pod, &CtrOpts::ro("app", GI)))
    else {
        return;
    };
    // NRI hands the plugin the pod's annotations with each request; CRI does
    // not pass them to the container's spec, so the adjustment copies ours
    // there for the hook.
    if let Some((_, info)) = r.step(&format!("{part}: ContainerStatus"), node.status(&c)) {
        let spec = &info["runtimeSpec"]["annotations"];
        r.seen(
            &format!("{part}: spec annotations"),
            format!("tmp-size {}, shm-size {}", spec[ANN_TMP], spec[ANN_SHM]),
        );
        r.check(
            spec[ANN_TMP] == asked[0] && spec[ANN_SHM] == asked[1],
            format!("{part}: the pod's annotations are not in the spec: {spec}"),
        );
    }
    if let Some(p) = r.step(&format!("{part}: probe"), node.probe(&c)) {
        r.served(part, &p, want[0], want[1]);
    }
    r.step(&format!("{part}: stop and remove"), node.teardown(&pod, &[&c]));
}

/// Case 2: Pod annotations set the sizes; `max_tmp_size` / `max_shm_size` cap
/// them (with a warning naming the annotation and the cap); `annotations =
/// "ignore"` makes them have no effect.
#[test]
fn case2_pod_annotations_and_their_guardrails() {
    let mut r = Report::new("case2");
    let mut node = Node::start("case2");
    let asked = ["100Mi", "300Mi"];
    annotated_pod(&mut node, &mut r, "annotations", "", asked, [100 * MI, 300 * MI]);

    let log = node.dir.join("hook.log");
    let capped = format!(
        "max_tmp_size = \"64Mi\"\nmax_shm_size = \"200Mi\"\nlog_file = {log:?}\nlog_level = \"warn\"\n"
    );
    annotated_pod(&mut node, &mut r, "over max_*_size", &capped, asked, [64 * MI, 200 * MI]);
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    r.seen("hook log", format!("{:?}", text.lines().collect::<Vec<_>>()));
    for (key, cap, bytes) in [(ANN_TMP, "64Mi", 64 * MI), (ANN_SHM, "200Mi", 200 * MI)] {
        let warned =
            text.lines().any(|l| l.contains(key) && (l.contains(cap) || l.contains(&bytes.to_string())));
        r.check(warned, format!("no warning naming {key} and the cap {cap} in the hook's log: {text:?}"));
    }

    annotated_pod(
        &mut node,
        &mut r,
        "annotations = ignore",
        "annotations = \"ignore\"\n",
        asked,
        [256 * MI, 512 * MI],
    );
    r.finish();
}

/// Case 2, the memory-limit cap: no tmpfs larger than the container's memory
/// limit, whatever an annotation asks (a tmpfs it cannot fill without an OOM
/// kill turns ENOSPC into a kill).
#[test]
fn case2_annotations_above_the_memory_limit_are_capped() {
    let mut r = Report::new("case2-limit");
    let mut node = Node::start("case2-limit");
    annotated_pod(&mut node, &mut r, "2Gi and 3Gi asked, 1Gi limit", "", ["2Gi", "3Gi"], [GI, GI]);
    r.finish();
}

/// Case 3: Two read-only containers of 1 GiB and 4 GiB in one pod: `/dev/shm`
/// 512 MiB after the first, 2 GiB after the second, one mount for both.
#[test]
fn case3_pod_shm_grows_to_the_largest_container() {
    let mut r = Report::new("case3");
    let mut node = Node::start("case3");
    let opts = PodOpts { memory: 5 * GI, ..PodOpts::default() };
    let Some(pod) = r.step("RunPodSandbox", node.run_pod("two", &opts)) else { return r.finish() };
    let Some(a) = r.step("start ro 1Gi", node.start_container(&pod, &CtrOpts::ro("small", GI))) else {
        return r.finish();
    };
    if let Some(p) = r.step("probe small", node.probe(&a)) {
        r.served("1Gi container, alone", &p, 256 * MI, 512 * MI);
    }
    let Some(b) = r.step("start ro 4Gi", node.start_container(&pod, &CtrOpts::ro("big", 4 * GI))) else {
        return r.finish();
    };
    let pb = r.step("probe big", node.probe(&b)).unwrap_or_default();
    r.served("4Gi container", &pb, GI, 2 * GI);
    let pa = r.step("probe small again", node.probe(&a)).unwrap_or_default();
    let sa = mount_at(&parse_mountinfo(&pa), "/dev/shm").and_then(MountInfo::size);
    r.seen("1Gi container after the 4Gi one", format!("/dev/shm {}", sz(sa)));
    r.check(sa == Some(2 * GI), format!("the 1Gi container sees /dev/shm {}, want 2Gi", sz(sa)));
    let (da, db) = (device_at(&pa, "/dev/shm"), device_at(&pb, "/dev/shm"));
    r.seen("/dev/shm device", format!("small {da:?}, big {db:?}"));
    r.check(da.is_some() && da == db, format!("not one /dev/shm: {da:?} vs {db:?}"));
    r.step("write in small", node.exec(&a, &["sh", "-c", "echo shared > /dev/shm/mark"]));
    let seen =
        r.step("read in big", node.exec(&b, &["cat", "/dev/shm/mark"])).map(|x| x.1).unwrap_or_default();
    r.check(
        seen.trim() == "shared",
        format!("a file written in /dev/shm by one is not seen by the other: {seen:?}"),
    );
    r.step("stop and remove", node.teardown(&pod, &[&a, &b]));
    r.finish();
}

/// Case 4: A writable-root container in the `oci-tmpfs` class: untouched, and the
/// pod's `/dev/shm` stays 64 MiB.
#[test]
fn case4_writable_root_container_is_untouched() {
    let mut r = Report::new("case4");
    let mut node = Node::start("case4");
    let Some(pod) = r.step("RunPodSandbox", node.run_pod("rw", &PodOpts::default())) else {
        return r.finish();
    };
    let opts = CtrOpts { readonly: false, ..CtrOpts::ro("rw", GI) };
    let Some(c) = r.step("start rw 1Gi", node.start_container(&pod, &opts)) else { return r.finish() };
    if let Some(p) = r.step("probe", node.probe(&c)) {
        r.untouched("writable root, 1Gi", &p, SHM_64M);
    }
    r.executor(&node, &c, false);
    r.signal(&node, "default/rw/rw", false);
    r.step("stop and remove", node.teardown(&pod, &[&c]));
    r.finish();
}

/// Case 5: `TMPDIR=/scratch`, missing in the image: a tmpfs there.
#[test]
fn case5_tmpdir_missing_in_the_image_gets_a_tmpfs() {
    let mut r = Report::new("case5");
    let mut node = Node::start("case5");
    let Some(pod) = r.step("RunPodSandbox", node.run_pod("tmpdir", &PodOpts::default())) else {
        return r.finish();
    };
    let env = [("TMPDIR", "/scratch")];
    let opts = CtrOpts { env: &env, ..CtrOpts::ro("app", GI) };
    let Some(c) = r.step("start", node.start_container(&pod, &opts)) else { return r.finish() };
    let script =
        "cat /proc/self/mountinfo; touch /scratch/probe && echo SCRATCH-WRITABLE; echo TMPDIR=$TMPDIR";
    if let Some((_, out, _)) = r.step("probe", node.exec(&c, &["sh", "-c", script])) {
        let mounts = parse_mountinfo(&out);
        let s = mount_at(&mounts, "/scratch");
        let t = mount_at(&mounts, "/tmp");
        r.seen(
            "TMPDIR=/scratch, 1Gi",
            format!(
                "/scratch {} (source {}), {}, /tmp {}",
                sz(s.and_then(MountInfo::size)),
                s.map_or("-", |m| m.source.as_str()),
                if out.contains("SCRATCH-WRITABLE") { "writable" } else { "NOT writable" },
                sz(t.and_then(MountInfo::size))
            ),
        );
        r.check(out.contains("TMPDIR=/scratch"), "TMPDIR did not reach the container");
        r.check(
            s.is_some_and(|s| s.source == OURS && s.fstype == "tmpfs"),
            format!("/scratch is not our tmpfs: {s:?}"),
        );
        r.check(
            s.and_then(MountInfo::size) == Some(256 * MI),
            format!("/scratch is {}, want 256Mi", sz(s.and_then(MountInfo::size))),
        );
        r.check(out.contains("SCRATCH-WRITABLE"), "/scratch is not writable");
        r.check(
            t.is_some_and(|t| t.source == OURS) && t.and_then(MountInfo::size) == Some(256 * MI),
            format!("/tmp: {t:?}"),
        );
    }
    r.step("stop and remove", node.teardown(&pod, &[&c]));
    r.finish();
}

/// Case 6: The pause container: nothing mounted in it, and the pod's `/dev/shm`
/// still 64 MiB before any app container starts.
#[test]
fn case6_pause_container_gets_nothing() {
    let mut r = Report::new("case6");
    let mut node = Node::start("case6");
    let Some(pod) = r.step("RunPodSandbox", node.run_pod("pause", &PodOpts::default())) else {
        return r.finish();
    };
    if let Some(pid) = r.step("sandbox pid", node.sandbox_pid(&pod)) {
        let mi = std::fs::read_to_string(format!("/proc/{pid}/mountinfo")).unwrap_or_default();
        r.untouched(&format!("pause container (pid {pid})"), &mi, SHM_64M);
    }
    r.executor(&node, &pod.id, false);
    r.step("stop and remove", node.teardown(&pod, &[]));
    r.finish();
}

/// Case 7: A `hostIPC` pod: the node's `/dev/shm` is never resized.
#[test]
fn case7_host_ipc_pod_never_resizes_the_node_shm() {
    let mut r = Report::new("case7");
    let mut node = Node::start("case7");
    let node_shm = node.ns_path("/dev/shm");
    let real_shm = fs_bytes(Path::new("/dev/shm"));
    let before = fs_bytes(&node_shm);
    r.seen("node /dev/shm before", sz(Some(before)));
    r.check(before == SHM_64M, format!("the node's /dev/shm starts at {}", sz(Some(before))));
    let opts = PodOpts { host_ipc: true, ..PodOpts::default() };
    let Some(pod) = r.step("RunPodSandbox", node.run_pod("hostipc", &opts)) else { return r.finish() };
    let Some(c) = r.step("start ro 1Gi", node.start_container(&pod, &CtrOpts::ro("app", GI))) else {
        return r.finish();
    };
    if let Some(p) = r.step("probe", node.probe(&c)) {
        r.served("hostIPC, ro 1Gi", &p, 256 * MI, SHM_64M);
    }
    let after = fs_bytes(&node_shm);
    r.seen("node /dev/shm after", sz(Some(after)));
    r.check(
        after == before,
        format!("the node's /dev/shm went from {} to {}", sz(Some(before)), sz(Some(after))),
    );
    r.check(fs_bytes(Path::new("/dev/shm")) == real_shm, "the real host's /dev/shm changed");
    r.step("stop and remove", node.teardown(&pod, &[&c]));
    r.finish();
}

/// Case 8: With the plugin stopped, containers start unchanged (and at
/// once: NRI costs nothing when no plugin is connected).
#[test]
fn case8_plugin_stopped_containers_start_unchanged() {
    let mut r = Report::new("case8");
    let mut node = Node::start("case8");
    node.stop_plugin();
    let Some(pod) = r.step("RunPodSandbox", node.run_pod("stopped", &PodOpts::default())) else {
        return r.finish();
    };
    let t0 = Instant::now();
    let Some(c) = r.step("start ro 1Gi", node.start_container(&pod, &CtrOpts::ro("app", GI))) else {
        return r.finish();
    };
    r.seen("CreateContainer + StartContainer without the plugin", format!("{:?}", t0.elapsed()));
    if let Some(p) = r.step("probe", node.probe(&c)) {
        r.untouched("plugin stopped, ro 1Gi", &p, SHM_64M);
        r.check(!p.contains("TMP-WRITABLE"), "/tmp is writable with a read-only root and no plugin");
    }
    r.executor(&node, &c, false);
    r.step("stop and remove", node.teardown(&pod, &[&c]));
    r.finish();
}

/// Case 10: A container that cannot be planned (a bad size annotation):
/// under `on_error = "warn"` it starts without our mounts, under `"fail"`
/// its creation fails with our message; one log line names it.
#[test]
fn case10_planning_failures_follow_on_error() {
    let mut r = Report::new("case10");
    let mut node = Node::start("case10");
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

/// Case 9: containerd restarted while a pod runs: the mounts stay, and a new
/// container of the pod still gets its own.
#[test]
fn case9_containerd_restart_keeps_pods_served() {
    let mut r = Report::new("case9");
    let mut node = Node::start("case9");
    let opts = PodOpts { memory: 3 * GI, ..PodOpts::default() };
    let Some(pod) = r.step("RunPodSandbox", node.run_pod("restart", &opts)) else { return r.finish() };
    let Some(a) = r.step("start ro 1Gi", node.start_container(&pod, &CtrOpts::ro("first", GI))) else {
        return r.finish();
    };
    if let Some(p) = r.step("probe before restart", node.probe(&a)) {
        r.served("1Gi, before the restart", &p, 256 * MI, 512 * MI);
    }
    let n = node.registrations();
    node.restart_daemon();
    let waited = node.wait_registered(n + 1);
    r.seen("containerd", format!("restarted; the plugin registered again {waited:?} after CRI was ready"));
    if let Some(p) = r.step("probe after restart", node.probe(&a)) {
        r.served("1Gi, after the restart", &p, 256 * MI, 512 * MI);
    }
    let Some(b) =
        r.step("start ro 2Gi after restart", node.start_container(&pod, &CtrOpts::ro("second", 2 * GI)))
    else {
        return r.finish();
    };
    if let Some(p) = r.step("probe new", node.probe(&b)) {
        r.served("2Gi, started after the restart", &p, 512 * MI, GI);
    }
    let pa = r.step("probe first again", node.probe(&a)).unwrap_or_default();
    let sa = mount_at(&parse_mountinfo(&pa), "/dev/shm").and_then(MountInfo::size);
    r.seen("1Gi container after the 2Gi one", format!("/dev/shm {}", sz(sa)));
    r.check(sa == Some(GI), format!("the first container sees /dev/shm {}, want 1Gi", sz(sa)));
    r.step("stop and remove", node.teardown(&pod, &[&a, &b]));
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

/// The bench (not a timed test; run with `--ignored`): CRI CreateContainer +
/// StartContainer of a read-only 1 GiB container with the plugin (its
/// adjustment: our hook at createRuntime, which mounts `/tmp` and grows the
/// pod's `/dev/shm`) and without it, alternating (`NRI_BENCH_ROUNDS` pairs,
/// default 30), timed inside one client process; the plugin's own time per
/// CreateContainer (p50, p99, from its log); then the plugin's memory idle
/// and after `NRI_BENCH_CHURN` (default 1000) containers created, started,
/// stopped and removed, twice.
#[test]
#[ignore]
fn bench_nri_latency_and_memory() {
    let rounds: usize = std::env::var("NRI_BENCH_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(30);
    let churn: usize = std::env::var("NRI_BENCH_CHURN").ok().and_then(|v| v.parse().ok()).unwrap_or(1000);
    let mut node = Node::start("bench");
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
        node.start_plugin();
    }
    let after_rounds = plugin_memory(&node);
    let (w, wo) = (stats(&mut with), stats(&mut without));
    let ratio = with[with.len() / 2] / without[without.len() / 2];
    let delta = (with[with.len() / 2] - without[without.len() / 2]) * 1e3;
    let t0 = Instant::now();
    let churned = bench_py(&node, &["churn", &churn.to_string()], &request);
    let after = plugin_memory(&node);
    // As many again: growth that goes on is a leak, a plateau is not.
    let again = bench_py(&node, &["churn", &churn.to_string()], &request);
    let after_again = plugin_memory(&node);
    let mut own = plugin_times(&node);
    own.sort_by(|a, b| a.partial_cmp(b).unwrap());
    say(&format!("nri bench: containerd {}, plugin {}", node.ctd.version, plugin_bin().display()));
    say(&format!("nri bench: CreateContainer+StartContainer with the plugin (our hook):  {w}"));
    say(&format!("nri bench: CreateContainer+StartContainer without the plugin:         {wo}"));
    say(&format!("nri bench: median ratio with/without: {ratio:.3}, median difference {delta:.1} ms"));
    say(&format!(
        "nri bench: the plugin's own time per CreateContainer: p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms (n={})",
        quantile(&own, 0.5),
        quantile(&own, 0.99),
        own[own.len() - 1],
        own.len()
    ));
    say(&format!(
        "nri bench: plugin memory idle (registered, no container): VmRSS {} KiB, VmHWM {} KiB",
        idle.0, idle.1
    ));
    say(&format!(
        "nri bench: plugin memory after the {rounds} rounds (restarted each round): VmRSS {} KiB",
        after_rounds.0
    ));
    say(&format!(
        "nri bench: after {churn} more containers ({:.0} s, {:?} wall): VmRSS {} KiB, VmHWM {} KiB",
        secs(&churned),
        t0.elapsed(),
        after.0,
        after.1
    ));
    say(&format!(
        "nri bench: after {churn} more ({:.0} s): VmRSS {} KiB, VmHWM {} KiB",
        secs(&again),
        after_again.0,
        after_again.1
    ));
    let _ = node.teardown(&pod, &[]);
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
    let mut r = Report::new("case11");
    let Some(bin) = std::env::var_os("OCI_TMPFS_HOOK_NRI_BIN").map(PathBuf::from) else {
        panic!("case11 needs OCI_TMPFS_HOOK_NRI_BIN: the static binary (tests/env/nri.sh builds it)");
    };
    let mut node = Node::start("case11");
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
    let config = plugin_container_config(&node, &reference, &hook_dir);
    let created = node.cri(
        "CreateContainer",
        json!({"pod_sandbox_id": plugin_pod.id, "config": config, "sandbox_config": plugin_pod.config}),
    );
    let Some(pc) = r.step("CreateContainer (plugin)", created) else { return r.finish() };
    let pc = pc["container_id"].as_str().unwrap_or_default().to_string();
    let Some(_) = r.step("StartContainer (plugin)", node.cri("StartContainer", json!({"container_id": pc})))
    else {
        return r.finish();
    };
    let logs = node
        .dir
        .join("logs")
        .join(plugin_pod.config["metadata"]["uid"].as_str().unwrap())
        .join("nri-plugin/0.log");
    let t0 = Instant::now();
    let registered = loop {
        let text = std::fs::read_to_string(&logs).unwrap_or_default();
        if text.contains("nri: registered as") || t0.elapsed() > Duration::from_secs(15) {
            break text;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    r.seen(
        "plugin container registered",
        format!("{} after {:?}", registered.contains("nri: registered as"), t0.elapsed()),
    );
    r.check(
        registered.contains("nri: registered as"),
        format!("the plugin's container did not register: {registered}"),
    );
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &Path| std::fs::metadata(p).map(|m| m.permissions().mode() & 0o7777).unwrap_or(0);
    let (hb, hc) = (hook_dir.join("oci-tmpfs-hook"), hook_dir.join("config.toml"));
    r.seen("hook dir", format!("binary {:o}, config {:o}", mode(&hb), mode(&hc)));
    r.check(
        std::fs::read(&hb).ok() == std::fs::read(&bin).ok() && mode(&hb) == 0o755,
        "the hook dir has not this binary, 0755",
    );
    r.check(
        std::fs::read_to_string(&hc).ok().as_deref() == Some(cm) && mode(&hc) == 0o644,
        "the hook dir has not the ConfigMap's config, 0644",
    );
    node.hook = hb.clone();
    let opts = PodOpts { memory: 2 * GI, ..PodOpts::default() };
    if let Some(pod) = r.step("RunPodSandbox", node.run_pod("served", &opts)) {
        if let Some(c) = r.step("start ro 1Gi", node.start_container(&pod, &CtrOpts::ro("app", GI))) {
            if let Some(p) = r.step("probe", node.probe(&c)) {
                r.served("ro 1Gi, plugin in a container", &p, 256 * MI, 512 * MI);
            }
            r.executor(&node, &c, true);
            if let Some(Value::Object(hooks)) = node.final_config(&c).ok().map(|v| v["hooks"].clone()) {
                let args = &hooks["createRuntime"][0]["args"];
                r.check(
                    args[4] == "--config" && args[5] == hc.display().to_string().as_str(),
                    format!("the hook does not read the hook dir's config: {args}"),
                );
            }
            r.step("stop and remove", node.teardown(&pod, &[&c]));
        }
    }
    let text = std::fs::read_to_string(&logs).unwrap_or_default();
    let lines: Vec<&str> =
        text.lines().filter(|l| l.contains("our hook at") || l.contains("wrote")).collect();
    r.seen("plugin container's log", format!("{lines:?}"));
    r.step("stop the plugin", node.teardown(&plugin_pod, &[&pc]));
    r.finish();
}

/// The plugin's CRI container config, as the DaemonSet asks for it.
fn plugin_container_config(node: &Node, reference: &str, hook_dir: &Path) -> Value {
    json!({
        "metadata": {"name": "nri-plugin", "attempt": 0},
        "image": {"image": reference},
        "args": ["nri", "--socket", "/var/run/nri/nri.sock", "--config", "/etc/oci-tmpfs-hook/config.toml",
                 "--hook-dir", hook_dir, "--hook-dir-mount", "/host/opt/oci-tmpfs-hook"],
        "mounts": [
            {"container_path": "/var/run/nri", "host_path": "/var/run/nri"},
            {"container_path": "/host/opt/oci-tmpfs-hook", "host_path": hook_dir},
            {"container_path": "/etc/oci-tmpfs-hook", "host_path": node.dir.join("cm"), "readonly": true},
            {"container_path": "/tmp", "host_path": node.dir.join("plugin-tmp")},
        ],
        "log_path": "nri-plugin/0.log",
        "linux": {
            "resources": {"memory_limit_in_bytes": 64 * MI, "cpu_period": 100000, "cpu_shares": 2},
            "security_context": {
                "readonly_rootfs": true,
                "run_as_user": {"value": 0},
                "capabilities": {"drop_capabilities": ["ALL"]},
                "seccomp": {"profile_type": "RuntimeDefault"},
                "namespace_options": {"network": "NODE", "pid": "CONTAINER", "ipc": "POD"},
            },
        },
    })
}

/// Case 12: The hook binary missing on the node (the hook dir emptied after
/// the plugin filled it): the container fails to start with the runtime's
/// hook error (fail closed, never a container without its mounts); a
/// plugin restart puts the binary back and the next container is served.
#[test]
fn case12_hook_binary_missing_on_the_node_fails_closed() {
    let mut r = Report::new("case12");
    let mut node = Node::start("case12");
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

/// One hostile (or just unusual) layout: an image with symlinks, maybe a
/// volume, and what must hold (issue 16's suite, through NRI).
#[derive(Default)]
struct Hostile<'a> {
    name: &'a str,
    /// Symlinks made in the image: (path, target).
    links: &'a [(&'a str, &'a str)],
    /// Directories made in the image (the volumes' mount points).
    dirs: &'a [&'a str],
    env: &'a [(&'a str, &'a str)],
    /// The volume's container path.
    volume: Option<&'a str>,
    /// The volume's host directory is a tmpfs (kubelet's emptyDir with
    /// `medium: Memory`).
    tmpfs_volume: bool,
    /// Bidirectional propagation (the host directory a shared mount).
    shared: bool,
    /// A path the container writes through the symlink, and where that
    /// must land in the volume's host directory.
    through: Option<(&'a str, &'a str)>,
    /// Container paths that must not get our tmpfs.
    refused: &'a [&'a str],
    /// Container paths that must get our tmpfs (the safe targets).
    served: &'a [&'a str],
    /// The hook's log says why, with one of these.
    why: &'a [&'a str],
}

/// The refusal texts for a target reaching or crossing a spec mount at `dest`.
const REACHES_VOL: &[&str] = &["the spec's mount at /vol"];
const REACHES_DATA: &[&str] = &["the spec's mount at /data"];

impl Node {
    /// The node's busybox image with `links` and `dirs` made in its rootfs
    /// (`links` replace what is there), imported; its reference.
    fn import_image(&self, name: &str, links: &[(&str, &str)], dirs: &[&str]) -> String {
        let bundle = Bundle::new(&format!("img-{name}"));
        let rootfs = bundle.rootfs();
        for d in dirs {
            std::fs::create_dir_all(rootfs.join(d.trim_start_matches('/'))).unwrap();
        }
        for (path, target) in links {
            let p = rootfs.join(path.trim_start_matches('/'));
            let _ = std::fs::remove_dir(&p);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::os::unix::fs::symlink(target, &p).unwrap();
        }
        let reference = format!("docker.io/library/{}:latest", unique(name));
        let tar =
            build_image_with(&self.dir, &rootfs, &reference, &["/bin/sleep", "2147483647"], &unique(name));
        ok(self.ctr().args(["images", "import"]).arg(&tar));
        let _ = std::fs::remove_dir_all(&bundle.dir);
        reference
    }

    /// Runs `script` in the node's mount namespace.
    fn in_ns(&self, script: &str) -> String {
        ok(Command::new("nsenter")
            .arg(format!("--mount=/proc/{}/ns/mnt", self.holder.id()))
            .args(["--", "sh", "-c", script]))
    }

    /// The node's mount table (the namespace containerd and runc run in).
    fn mount_table(&self) -> String {
        std::fs::read_to_string(format!("/proc/{}/mountinfo", self.holder.id())).unwrap_or_default()
    }
}

/// Mounts of ours on the host tables (pid 1's, this process's, the node's),
/// and the node's mounts under `dir` (as "point fstype source").
fn host_view(node: &Node, dir: &Path) -> (Vec<String>, Vec<String>) {
    let mut ours = Vec::new();
    for (name, table) in [
        ("/proc/1/mountinfo", std::fs::read_to_string("/proc/1/mountinfo").unwrap_or_default()),
        ("/proc/self/mountinfo", std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default()),
        ("the node's mountinfo", node.mount_table()),
    ] {
        for m in parse_mountinfo(&table).into_iter().filter(|m| m.source == OURS) {
            ours.push(format!("{name}: {} {}", m.mount_point, sz(m.size())));
        }
    }
    let prefix = dir.display().to_string();
    let mut under: Vec<String> = parse_mountinfo(&node.mount_table())
        .into_iter()
        .filter(|m| m.mount_point.starts_with(&prefix))
        .map(|m| format!("{} {} {}", m.mount_point, m.fstype, m.source))
        .collect();
    under.sort();
    (ours, under)
}

/// The names in a directory, sorted.
fn listing(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// The checks of [`hostile`] on what the container saw (`out`: its
/// mountinfo, `===`, the canary read through the link, `===`, `WROTE`) and
/// on the volume's host directory (`host`: through the node's namespace,
/// and as named).
fn inside(r: &mut Report, h: &Hostile, out: &str, host: (&Path, &Path), before: &[String], canary: &str) {
    let (name, (host_ns, host_dir)) = (h.name, host);
    let mut parts = out.split("===\n");
    let mounts = parse_mountinfo(parts.next().unwrap_or(""));
    let ours: Vec<String> = mounts
        .iter()
        .filter(|m| m.source == OURS)
        .map(|m| format!("{} {}", m.mount_point, sz(m.size())))
        .collect();
    r.seen(&format!("{name}: the container's mounts of ours"), format!("{ours:?}"));
    for p in h.refused {
        let m = mount_at(&mounts, p);
        r.check(m.is_none_or(|m| m.source != OURS), format!("{name}: our tmpfs at {p}: {m:?}"));
    }
    if let Some(v) = h.volume {
        let on_vol: Vec<&String> = ours
            .iter()
            .filter(|m| *m == v || m.starts_with(&format!("{v}/")) || m.starts_with(&format!("{v} ")))
            .collect();
        r.check(on_vol.is_empty(), format!("{name}: ours on the volume {v}: {on_vol:?}"));
        let m = mount_at(&mounts, v);
        r.check(
            m.is_some_and(|m| m.source != OURS),
            format!("{name}: the volume at {v} is not on top: {m:?}"),
        );
    }
    for p in h.served {
        let m = mount_at(&mounts, p);
        r.check(m.is_some_and(|m| m.source == OURS), format!("{name}: {p} is not our tmpfs: {m:?}"));
    }
    if let Some((path, rel)) = h.through {
        let seen = parts.next().unwrap_or("").trim().to_string();
        r.check(seen == canary, format!("{name}: the volume's canary through the link: {seen:?}"));
        r.check(
            parts.next().unwrap_or("").contains("WROTE"),
            format!("{name}: writing {path} failed: {out}"),
        );
        let landed = std::fs::read_to_string(host_ns.join(rel)).unwrap_or_default();
        r.check(
            landed.trim() == format!("x-{name}"),
            format!("{name}: {path} did not reach the host's {}: {landed:?}", host_dir.join(rel).display()),
        );
        let mut want = before.to_vec();
        want.push(rel.to_string());
        want.sort();
        let after = listing(host_ns);
        r.check(after == want, format!("{name}: the volume holds {after:?}, want {want:?}"));
    }
}

/// Runs one hostile layout in a pod of its own and checks all of issue 16's
/// rules: no tmpfs of ours on any host table and nothing new mounted under
/// the volume's host directory (while it runs and after); the volume's
/// canary visible in the container; a file written through the symlink in
/// the host directory; nothing else created in the volume; the refused
/// targets not ours and the hook's log saying why; the safe ones ours.
fn hostile(node: &mut Node, r: &mut Report, h: &Hostile) {
    let name = h.name;
    let image = node.import_image(name, h.links, h.dirs);
    let host_dir = node.dir.join(format!("vol-{name}"));
    std::fs::create_dir_all(&host_dir).unwrap();
    if h.tmpfs_volume {
        node.in_ns(&format!("mount -t tmpfs -o size=8m,mode=755 emptydir {}", host_dir.display()));
    }
    if h.shared {
        node.in_ns(&format!("mount --bind {0} {0} && mount --make-shared {0}", host_dir.display()));
    }
    // Through the node's namespace: a tmpfs volume is only there.
    let host_ns = node.ns_path(&host_dir.display().to_string());
    let canary = format!("canary of {name}");
    if h.volume.is_some() {
        std::fs::write(host_ns.join("canary"), &canary).unwrap();
    }
    let before = listing(&host_ns);
    let (_, mounts_before) = host_view(node, &host_dir);
    let vol = h.volume.map(|v| Vol {
        container_path: v,
        host_path: &host_dir,
        propagation: if h.shared { "PROPAGATION_BIDIRECTIONAL" } else { "PROPAGATION_PRIVATE" },
    });
    let vols: Vec<Vol> = vol.into_iter().collect();
    let opts = CtrOpts { env: h.env, image: Some(&image), mounts: &vols, ..CtrOpts::ro(name, GI) };
    let Some(pod) = r.step(&format!("{name}: RunPodSandbox"), node.run_pod(name, &PodOpts::default())) else {
        return;
    };
    let Some(c) = r.step(&format!("{name}: start"), node.start_container(&pod, &opts)) else {
        let _ = node.teardown(&pod, &[]);
        return;
    };
    let mut script = String::from("cat /proc/self/mountinfo; echo ===");
    if let Some((path, _)) = h.through {
        let parent = Path::new(path).parent().unwrap().display().to_string();
        let _ = write!(script, "; cat {parent}/canary; echo; echo ===; echo x-{name} > {path} && echo WROTE");
    }
    let out = r.step(&format!("{name}: exec"), node.exec(&c, &["sh", "-c", &script])).map(|x| x.1);
    inside(r, h, &out.unwrap_or_default(), (&host_ns, &host_dir), &before, &canary);
    let (ours_host, mounts_running) = host_view(node, &host_dir);
    r.check(ours_host.is_empty(), format!("{name}: tmpfs of ours on the host: {ours_host:?}"));
    r.check(
        mounts_running == mounts_before,
        format!(
            "{name}: the node's mounts under the test dir changed: {mounts_before:?} -> {mounts_running:?}"
        ),
    );
    r.executor(node, &c, true);
    let log = node.read("hook.log");
    // The hook's lines name the container (the plugin's do not).
    let hook_lines = format!("container {c}: ");
    let why: Vec<&str> = log
        .lines()
        .filter(|l| {
            l.contains(&hook_lines) && h.refused.iter().any(|p| l.contains(p)) && l.contains("warning")
        })
        .collect();
    r.seen(&format!("{name}: the hook's warnings"), format!("{why:?}"));
    if !h.why.is_empty() {
        r.check(
            why.iter().any(|l| h.why.iter().any(|w| l.contains(w))),
            format!("{name}: no warning with one of {:?} in the hook's log:\n{log}", h.why),
        );
    }
    r.step(&format!("{name}: stop and remove"), node.teardown(&pod, &[&c]));
    let (ours_host, mounts_after) = host_view(node, &host_dir);
    r.check(ours_host.is_empty(), format!("{name}: after removal, tmpfs of ours on the host: {ours_host:?}"));
    r.check(
        mounts_after == mounts_before,
        format!("{name}: after removal, the node's mounts changed: {mounts_before:?} -> {mounts_after:?}"),
    );
    if let Some((_, rel)) = h.through {
        let mut want = before.clone();
        want.push(rel.to_string());
        want.sort();
        r.check(
            listing(&host_ns) == want,
            format!("{name}: after removal the volume holds {:?}", listing(&host_ns)),
        );
    }
}

/// A node whose host config logs the hook's warnings to `hook.log`.
fn hostile_node(case: &str) -> Node {
    let node = Node::start(case);
    node.host_config(&format!("log_file = {:?}\nlog_level = \"info\"\n", node.dir.join("hook.log")));
    node
}

/// Issue 16: symlinked `/tmp` and a symlinked TMPDIR parent reaching a
/// volume, private and shared, with the volume sorting after `/tmp`
/// (`/vol`) and before it (`/data`): the volume always wins.
#[test]
fn hostile_symlinks_to_volumes() {
    let mut r = Report::new("hostile-volumes");
    let mut node = hostile_node("hostile-volumes");
    for shared in [false, true] {
        let sfx = if shared { "shared" } else { "private" };
        let cases = [
            Hostile {
                name: &format!("tmp-to-vol-{sfx}"),
                links: &[("/tmp", "/vol")],
                dirs: &["/vol"],
                volume: Some("/vol"),
                shared,
                through: Some(("/tmp/through-link", "through-link")),
                refused: &["/tmp"],
                why: REACHES_VOL,
                ..Hostile::default()
            },
            Hostile {
                name: &format!("tmp-to-data-{sfx}"),
                links: &[("/tmp", "/data")],
                dirs: &["/data"],
                volume: Some("/data"),
                shared,
                through: Some(("/tmp/through-link", "through-link")),
                refused: &["/tmp"],
                why: REACHES_DATA,
                ..Hostile::default()
            },
            Hostile {
                name: &format!("scratch-to-vol-{sfx}"),
                links: &[("/scratch", "/vol")],
                dirs: &["/vol"],
                env: &[("TMPDIR", "/scratch/tmp")],
                volume: Some("/vol"),
                shared,
                through: Some(("/scratch/through-link", "through-link")),
                refused: &["/scratch/tmp", "/scratch"],
                served: &["/tmp"],
                why: REACHES_VOL,
                ..Hostile::default()
            },
        ];
        for h in &cases {
            hostile(&mut node, &mut r, h);
        }
    }
    r.finish();
}

/// Issue 16: a symlink onto a tmpfs (a memory emptyDir at `/run`, the
/// spec's `/dev` tmpfs, the pod's `/dev/shm`), into `/proc` and `/sys`, and
/// a volume at `/tmp/data`: none gets our tmpfs over or under it.
#[test]
fn hostile_system_dirs_tmpfs_and_a_volume_beneath() {
    let mut r = Report::new("hostile-system");
    let mut node = hostile_node("hostile-system");
    let cases = [
        Hostile {
            name: "tmp-to-emptydir-memory",
            links: &[("/tmp", "/run")],
            dirs: &["/run"],
            volume: Some("/run"),
            tmpfs_volume: true,
            through: Some(("/tmp/through-link", "through-link")),
            refused: &["/tmp"],
            why: &["the spec's mount at /run"],
            ..Hostile::default()
        },
        Hostile {
            name: "tmp-to-dev",
            links: &[("/tmp", "/dev")],
            refused: &["/tmp", "/dev"],
            why: &["the spec's mount at /dev", "a system directory"],
            ..Hostile::default()
        },
        Hostile {
            name: "tmp-to-dev-shm",
            links: &[("/tmp", "/dev/shm")],
            refused: &["/tmp"],
            why: &["the spec's mount at /dev", "a system directory"],
            ..Hostile::default()
        },
        Hostile {
            name: "tmp-to-proc",
            links: &[("/tmp", "/proc")],
            refused: &["/tmp", "/proc"],
            why: &["the spec's mount at /proc", "a system directory"],
            ..Hostile::default()
        },
        Hostile {
            name: "tmp-to-sys",
            links: &[("/tmp", "/sys")],
            refused: &["/tmp", "/sys"],
            why: &["the spec's mount at /sys", "a system directory"],
            ..Hostile::default()
        },
        Hostile {
            name: "volume-at-tmp-data",
            dirs: &["/tmp/data"],
            volume: Some("/tmp/data"),
            through: Some(("/tmp/data/through-link", "through-link")),
            refused: &["/tmp"],
            why: &["the spec mounts /tmp/data inside it"],
            ..Hostile::default()
        },
    ];
    for h in &cases {
        hostile(&mut node, &mut r, h);
    }
    r.finish();
}

/// Issue 16: the memory limit caps every size. 512 KiB: no hook, a note
/// `below 1Mi`; 1 MiB: the hook for `/tmp` 1 MiB and `/dev/shm` at most
/// 1 MiB; 1 GiB: 256 MiB and 512 MiB, seen in the container. runc 1.3
/// cannot start a container under 512 KiB or 1 MiB at all (its init already
/// uses ~3.3 MiB of the cgroup: "unable to set memory limit"), so for those
/// two the plugin's decision is checked, and that the failure is runc's
/// cgroup error, not a hook's.
#[test]
fn memory_limits_cap_every_size() {
    let mut r = Report::new("memory-limits");
    let mut node = Node::start("memory-limits");
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
    let (ours, _) = host_view(&node, &node.dir.0);
    r.check(ours.is_empty(), format!("tmpfs of ours on the host: {ours:?}"));
    r.finish();
}
