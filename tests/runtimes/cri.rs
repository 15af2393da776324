//! Kubernetes pods as kubelet starts them: containerd's CRI API
//! (`runtime.v1.RuntimeService`, `ImageService`) driven over containerd's
//! socket by a CRI client (tests/cri/cri.py, on the stubs of the
//! `container-runtime-interface-api` package; tests/env/venv.sh installs it),
//! with the `oci-tmpfs` runtime handler that `setup containerd` writes
//! (issue 10, docs/design.md#pods).
//!
//! Each test starts its own containerd, the one found on `PATH` (its version
//! picks the config version: 2 for containerd 1.x, 3 for 2.x; every test
//! prints it), with a private root, state, socket and config, and stops it by
//! its pid. It runs in a private mount namespace, held by a `sleep` so that
//! containerd can be restarted into it (case 9), in which
//! - `/etc` is an overlay, so the host config the wrapper and the hook read at
//!   their fixed path `/etc/oci-tmpfs-hook/config.toml` is this test's own;
//! - `/dev/shm` is a 64 MiB tmpfs: the "node's" `/dev/shm` that a `hostIPC`
//!   pod gets, small enough that growing it by mistake would show;
//! - `/run` is a tmpfs, so runc's state (`/run/containerd/runc/k8s.io`), the
//!   shims' sockets and NRI's socket are private too.
//!
//! Images are a busybox-static rootfs in an OCI image layout built here, as
//! app image and as `sandbox_image` (entry: `sleep`), imported with
//! `ctr -n k8s.io images import`. Pods use host networking (no CNI; empty
//! hostname), a cgroup parent of their own and the summed resources, as
//! kubelet sends them.
//!
//! Each case records what it saw (printed even when it passes) and checks it
//! all before failing, so a failing run still reports every size.
//!
//! The `hostile_*` cases are issue 16's hostile-layout suite through this
//! path: images with symlinked `/tmp` and `TMPDIR` parents onto private and
//! `Bidirectional` volumes, onto `/proc`, `/sys`, `/dev` and the pod's shm,
//! a volume at `/tmp/data`, small memory limits, a symlinked pod shm parent
//! (see the section's head for what each checks). Nodes live under
//! `/var/lib/oci-tmpfs-test`, whose parents are root's and closed to others,
//! as the pod shm's must be for it to grow (docs/design.md#engine-shm).

use crate::support::cri::*;
use crate::support::*;

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
const HANDLER: &str = "oci-tmpfs";
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
    fn find() -> Containerd {
        let bin = which("containerd");
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
    fn base_config(&self, dir: &TempDir, state: &Path, sandbox_image: &str) -> String {
        let (root, sock) = (dir.join("root"), dir.join("c.sock"));
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

// ------------------------------------------------------------- the node

/// What a pod is started with.
struct PodOpts<'a> {
    handler: &'a str,
    annotations: &'a [(&'a str, &'a str)],
    host_ipc: bool,
    /// The pod's summed memory limit (sent as the sandbox's resources).
    memory: u64,
}

impl Default for PodOpts<'_> {
    fn default() -> Self {
        PodOpts { handler: HANDLER, annotations: &[], host_ipc: false, memory: GI }
    }
}

/// What a container is created with.
struct CtrOpts<'a> {
    name: &'a str,
    readonly: bool,
    memory: Option<u64>,
    env: &'a [(&'a str, &'a str)],
    /// The image reference; the node's busybox image when `None`.
    image: Option<&'a str>,
    /// CRI `Mount`s (`container_path`, `host_path`, `propagation`).
    mounts: &'a [Value],
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
    config: PathBuf,
    sock: PathBuf,
    image: String,
    cgroup_top: String,
    pods: Vec<String>,
    case: String,
    /// containerd's state dir, as its config names it.
    state: PathBuf,
}

/// How a node differs from the usual one.
#[derive(Default)]
struct NodeOpts {
    /// containerd's `state` is a symlink to the real directory, so the pod
    /// shm's path (`<state>/io.containerd.grpc.v1.cri/sandboxes/<id>/shm`)
    /// has a symlinked parent.
    symlinked_state: bool,
}

impl Node {
    fn start(case: &str) -> Node {
        Node::start_with(case, &NodeOpts::default())
    }

    fn start_with(case: &str, opts: &NodeOpts) -> Node {
        require_root();
        let ctd = Containerd::find();
        let dir = TempDir::closed("cri");
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
            config,
            sock,
            image: reference,
            cgroup_top: unique("cri"),
            pods: Vec::new(),
            case: case.to_string(),
            state: PathBuf::new(),
        };
        node.state = node.dir.join("state");
        if opts.symlinked_state {
            std::fs::create_dir(node.dir.join("state-real")).unwrap();
            std::os::unix::fs::symlink("state-real", &node.state).unwrap();
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        while !ready.exists() {
            if let Ok(Some(status)) = node.holder.try_wait() {
                panic!("the mount namespace setup failed ({status}): {}", node.read("ns.log"));
            }
            assert!(Instant::now() < deadline, "the mount namespace was not ready within 20s");
            std::thread::sleep(Duration::from_millis(20));
        }
        node.host_config("");

        // The handler, as a platform engineer registers it: `setup containerd`.
        let wrapper = node.dir.join("oci-tmpfs-runtime");
        std::os::unix::fs::symlink(hook_bin(), &wrapper).unwrap();
        std::fs::write(&node.config, node.ctd.base_config(&node.dir, &node.state, &node.image)).unwrap();
        let mut setup = Command::new(hook_bin());
        setup.args(["setup", "containerd", "--containerd-config"]).arg(&node.config);
        setup.arg("--hook-path").arg(hook_bin()).arg("--runtime-path").arg(&wrapper);
        ok(&mut setup);

        node.start_daemon();
        let runc = ok(Command::new("runc").arg("--version"));
        say(&format!(
            "cri {case}: containerd {} ({}), config version {}, {}",
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

    /// Writes the host config that the wrapper and the hook read on this node,
    /// with the wrapper's executor under test (`OCI_TMPFS_TEST_WRAPPER_MODE`).
    fn host_config(&self, toml: &str) {
        let path = self.ns_path("/etc/oci-tmpfs-hook/config.toml");
        let text = format!("mode = \"{}\"\n{toml}", wrapper_mode());
        std::fs::write(&path, text).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
    }

    /// Whether the final `config.json` of container `id` runs our hook.
    fn runs_our_hook(&self, id: &str) -> Result<bool, String> {
        let path = self.state.join("io.containerd.runtime.v2.task/k8s.io").join(id).join("config.json");
        let text = std::fs::read(&path).map_err(|e| format!("reading {}: {e}", path.display()))?;
        let config: Value = serde_json::from_slice(&text).map_err(|e| e.to_string())?;
        let ours = hook_bin().canonicalize().unwrap().display().to_string();
        let hooks = config["hooks"].as_object().into_iter().flat_map(|h| h.values());
        Ok(hooks.filter_map(Value::as_array).flatten().any(|h| h["path"] == ours.as_str()))
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
        let mut cmd = Command::new(cri_python());
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
                "security_context": {"namespace_options": {"network": "NODE", "pid": "CONTAINER", "ipc": ipc}},
                "resources": {"memory_limit_in_bytes": opts.memory, "cpu_period": 100000, "cpu_shares": 2},
            },
        });
        let r = self.cri("RunPodSandbox", json!({"config": config, "runtime_handler": opts.handler}))?;
        let id = r["pod_sandbox_id"].as_str().expect("pod_sandbox_id").to_string();
        self.pods.push(id.clone());
        Ok(Pod { id, config, ipc })
    }

    /// CreateContainer + StartContainer; the container id.
    fn start_container(&self, pod: &Pod, c: &CtrOpts) -> Result<String, String> {
        let id = self.create_container(pod, c)?;
        self.cri("StartContainer", json!({"container_id": id}))?;
        Ok(id)
    }

    /// CreateContainer; the container id.
    fn create_container(&self, pod: &Pod, c: &CtrOpts) -> Result<String, String> {
        let envs: Vec<Value> = c.env.iter().map(|(k, v)| json!({"key": k, "value": v})).collect();
        let mut resources = json!({"cpu_period": 100000, "cpu_shares": 2});
        if let Some(m) = c.memory {
            resources["memory_limit_in_bytes"] = json!(m);
            // kubelet's Burstable score for a memory request of `m`.
            let info = rustix::system::sysinfo();
            let ram = (info.totalram as u64).saturating_mul(u64::from(info.mem_unit.max(1)));
            resources["oom_score_adj"] = json!((1000 - (1000 * m / ram.max(1)) as i64).clamp(2, 999));
        }
        let config = json!({
            "metadata": {"name": c.name, "attempt": 0},
            "image": {"image": c.image.unwrap_or(&self.image)},
            "command": ["sleep", "100000"],
            "envs": envs,
            "mounts": c.mounts,
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
        let r = self.cri(
            "CreateContainer",
            json!({"pod_sandbox_id": pod.id, "config": config, "sandbox_config": pod.config}),
        )?;
        Ok(r["container_id"].as_str().expect("container_id").to_string())
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
        self.kill_leftovers();
        if let Some(pid) = Pid::from_raw(self.holder.id() as i32) {
            let _ = kill_process(pid, Signal::KILL);
        }
        let _ = self.holder.wait();
        if std::thread::panicking() {
            let log = self.read("containerd.log");
            let tail: Vec<&str> = log.lines().rev().take(40).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            say(&format!("cri {}: containerd log (last 40 lines):\n{}", self.case, tail.join("\n")));
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
        say(&format!("cri {}: {what}: {value}", self.case));
    }

    fn check(&mut self, ok: bool, what: impl Into<String>) {
        if !ok {
            let what = what.into();
            say(&format!("cri {}: FAILED: {what}", self.case));
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

    fn finish(self) {
        say(&format!(
            "cri {}: {}",
            self.case,
            if self.failures.is_empty() {
                "PASS".to_string()
            } else {
                format!("{} checks failed", self.failures.len())
            }
        ));
        assert!(self.failures.is_empty(), "cri {}:\n  {}", self.case, self.failures.join("\n  "));
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
    if let Some(hooked) = r.step("the final config.json", node.runs_our_hook(&c)) {
        let mode = wrapper_mode();
        let want = mode == "hook" || runc_before_1_1_8(Runtime::Runc);
        r.seen("executor", format!("wrapper mode {mode}: our hook in config.json: {hooked}"));
        r.check(
            hooked == want,
            format!(
                "wrapper mode {mode}, runc {:?}: our hook in config.json is {hooked}",
                runtime_version(Runtime::Runc)
            ),
        );
    }
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
/// read-only 1 GiB container, under host config `host`, and checks that the
/// annotations reach the container's spec and that `/tmp` and `/dev/shm`
/// come out as `want`.
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
    if let Some((_, info)) = r.step(&format!("{part}: ContainerStatus"), node.status(&c)) {
        let spec = &info["runtimeSpec"]["annotations"];
        r.seen(
            &format!("{part}: spec annotations"),
            format!("tmp-size {}, shm-size {}", spec[ANN_TMP], spec[ANN_SHM]),
        );
        r.check(
            spec[ANN_TMP] == asked[0] && spec[ANN_SHM] == asked[1],
            format!("{part}: pod annotations did not reach the container's spec: {spec}"),
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

/// Case 8: The default `runc` handler: nothing changes.
#[test]
fn case8_default_runc_handler_changes_nothing() {
    let mut r = Report::new("case8");
    let mut node = Node::start("case8");
    let opts = PodOpts { handler: "", ..PodOpts::default() };
    let Some(pod) = r.step("RunPodSandbox", node.run_pod("runc", &opts)) else { return r.finish() };
    let Some(c) = r.step("start ro 1Gi", node.start_container(&pod, &CtrOpts::ro("app", GI))) else {
        return r.finish();
    };
    if let Some(p) = r.step("probe", node.probe(&c)) {
        r.untouched("runc handler, ro 1Gi", &p, SHM_64M);
        r.check(!p.contains("TMP-WRITABLE"), "/tmp is writable under plain runc with a read-only root");
    }
    if let Some(pid) = r.step("sandbox pid", node.sandbox_pid(&pod)) {
        let mi = std::fs::read_to_string(format!("/proc/{pid}/mountinfo")).unwrap_or_default();
        r.untouched("runc handler, pause container", &mi, SHM_64M);
    }
    r.step("stop and remove", node.teardown(&pod, &[&c]));
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
    node.restart_daemon();
    r.seen("containerd", "restarted");
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

// ------------------------------------------- hostile layouts (issue 16)
//
// The hostile-layout suite through the RuntimeClass path: each case is a pod
// with a read-only-root app container of an image built with a hostile
// rootfs, and after each the test checks that
// - no mount table (the real host's, pid 1; this test's; the node's
//   namespace, where containerd runs and a `Bidirectional` volume
//   propagates) got a tmpfs of ours or anything on the volume dir;
// - the volume's canary (written on the host before) is seen in the container;
// - a file the container writes through the symlink reaches the host dir;
// - nothing else was created inside the volume (listed before and after, from
//   this test's and from the node's namespace);
// - the target was left alone with one warning (in the log the host config
//   names, which both the wrapper and the hook write) naming the mount.

const CANARY: &str = "host data\n";
const THROUGH: &str = "written through the link\n";

impl Node {
    /// Imports an image of the busybox rootfs changed by `shape`; its reference.
    fn image(&self, name: &str, shape: impl FnOnce(&Path)) -> String {
        let rootfs = Bundle::new("cri-hostile-rootfs");
        shape(&rootfs.rootfs());
        let dir = TempDir::closed("cri-image");
        let reference = format!("docker.io/library/{}:latest", unique(name));
        let tar = build_image(&dir, &rootfs.rootfs(), &reference);
        ok(self.ctr().args(["images", "import"]).arg(&tar));
        reference
    }

    /// `prog` run in the node's mount namespace.
    fn in_ns(&self, prog: &str) -> Command {
        let mut c = Command::new("nsenter");
        c.arg(format!("--mount=/proc/{}/ns/mnt", self.holder.id())).arg("--").arg(prog);
        c
    }

    /// A host config that logs at info level to the node's `hook.log`.
    fn logging_config(&self) {
        self.host_config(&format!("log_level = \"info\"\nlog_file = {:?}\n", self.log_path()));
    }

    fn log_path(&self) -> PathBuf {
        self.dir.join("hook.log")
    }

    /// The log's lines about container `id` (the wrapper's and the hook's).
    fn log_of(&self, id: &str) -> Vec<String> {
        let tag = format!("container {id}:");
        let text = std::fs::read_to_string(self.log_path()).unwrap_or_default();
        text.lines().filter(|l| l.contains(&tag)).map(String::from).collect()
    }

    /// The pod's shm on the host (in the node's namespace).
    fn pod_shm(&self, pod: &Pod) -> PathBuf {
        let path = self.state.join("io.containerd.grpc.v1.cri/sandboxes").join(&pod.id).join("shm");
        self.ns_path(path.to_str().unwrap())
    }

    /// The mounts of container `id`'s final `config.json` that are ours:
    /// tmpfs entries with our source, and whether our hook is there.
    fn ours_in_config(&self, id: &str) -> String {
        let path = self.state.join("io.containerd.runtime.v2.task/k8s.io").join(id).join("config.json");
        let Ok(text) = std::fs::read(&path) else { return format!("no {}", path.display()) };
        let config: Value = serde_json::from_slice(&text).unwrap_or(Value::Null);
        let mounts: Vec<String> = config["mounts"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|m| m["source"] == OURS)
            .map(|m| format!("{} {}", m["destination"].as_str().unwrap_or("?"), m["options"]))
            .collect();
        let hooked = self.runs_our_hook(id).unwrap_or(false);
        format!("tmpfs entries of ours {mounts:?}, our hook {hooked}")
    }

    /// The mount tables that must not change: the real host's (pid 1), this
    /// test's, the node namespace's.
    fn mount_tables(&self) -> Vec<(String, Vec<MountInfo>)> {
        let pids = ["1".to_string(), "self".to_string(), self.holder.id().to_string()];
        pids.iter()
            .map(|pid| {
                let file = format!("/proc/{pid}/mountinfo");
                let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{file}: {e}"));
                (file, parse_mountinfo(&text))
            })
            .collect()
    }
}

fn mount_line(m: &MountInfo) -> String {
    format!("{} {} {} {}", m.mount_point, m.fstype, m.source, m.super_options.join(","))
}

/// Checks that no table in `after` has a mount of ours or a mount at or
/// under one of `watched` (host paths) that `before` did not have, and that
/// the node's namespace (the last table, ours alone) has no mount of ours.
fn check_tables(
    r: &mut Report,
    what: &str,
    before: &[(String, Vec<MountInfo>)],
    after: &[(String, Vec<MountInfo>)],
    watched: &[&Path],
) {
    for (i, ((file, b), (_, a))) in before.iter().zip(after).enumerate() {
        let old: Vec<String> = b.iter().map(mount_line).collect();
        // A table seen from another root (sid's) shows a path with a prefix.
        let touches = |m: &MountInfo| watched.iter().any(|w| m.mount_point.contains(w.to_str().unwrap()));
        let new: Vec<String> = a
            .iter()
            .filter(|m| m.source == OURS || touches(m))
            .map(mount_line)
            .filter(|l| !old.contains(l))
            .collect();
        r.check(new.is_empty(), format!("{what}: {file} has new mounts of ours or on the volume: {new:?}"));
        if i == after.len() - 1 {
            let ours: Vec<String> = a.iter().filter(|m| m.source == OURS).map(mount_line).collect();
            r.check(
                ours.is_empty(),
                format!("{what}: the node's namespace ({file}) has mounts of ours: {ours:?}"),
            );
        }
    }
}

/// A CRI volume: a host directory with a canary file, bound at `dest`.
/// `shared` makes it a Kubernetes `Bidirectional` volume: containerd wants
/// its host path on a shared mount, so the directory is bound on itself and
/// made `rshared` in the node's namespace (undone on drop).
struct Volume {
    host: PathBuf,
    dest: String,
    shared: bool,
    holder: u32,
}

impl Volume {
    fn new(node: &Node, dest: &str, shared: bool) -> Volume {
        let host = node.dir.join(unique("vol"));
        std::fs::create_dir(&host).unwrap();
        std::fs::write(host.join("canary"), CANARY).unwrap();
        let v = Volume { host, dest: dest.to_string(), shared, holder: node.holder.id() };
        if shared {
            ok(node.in_ns("mount").arg("--bind").arg(&v.host).arg(&v.host));
            ok(node.in_ns("mount").arg("--make-rshared").arg(&v.host));
        }
        v
    }

    fn propagation(&self) -> &'static str {
        if self.shared {
            "PROPAGATION_BIDIRECTIONAL"
        } else {
            "PROPAGATION_PRIVATE"
        }
    }

    /// The CRI `Mount`.
    fn mount(&self) -> Value {
        json!({"container_path": self.dest, "host_path": self.host, "propagation": self.propagation()})
    }

    /// What is in the directory, seen from this test's namespace and from the
    /// node's (where a mount on it would hide the canary).
    fn listing(&self) -> [Vec<String>; 2] {
        let ns = PathBuf::from(format!("/proc/{}/root{}", self.holder, self.host.display()));
        [tree(&self.host), tree(&ns)]
    }
}

impl Drop for Volume {
    fn drop(&mut self) {
        if self.shared {
            let _ = Command::new("nsenter")
                .arg(format!("--mount=/proc/{}/ns/mnt", self.holder))
                .args(["--", "umount", "--recursive", "--lazy"])
                .arg(&self.host)
                .stderr(Stdio::null())
                .status();
        }
    }
}

/// Every entry under `dir`: relative path, kind and size, sorted.
fn tree(dir: &Path) -> Vec<String> {
    fn walk(base: &Path, dir: &Path, out: &mut Vec<String>) {
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let Ok(m) = std::fs::symlink_metadata(e.path()) else { continue };
            let rel = e.path().strip_prefix(base).unwrap().display().to_string();
            let kind = if m.is_dir() {
                "dir"
            } else if m.file_type().is_symlink() {
                "symlink"
            } else {
                "file"
            };
            out.push(format!("{rel} {kind} {}", if m.is_dir() { 0 } else { m.len() }));
            if m.is_dir() {
                walk(base, &e.path(), out);
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

/// The one warning line about `id` that holds all of `parts` (each part: one
/// of its alternatives); checks there is exactly one.
fn check_warning(r: &mut Report, node: &Node, what: &str, id: &str, parts: &[&[&str]]) {
    let lines = node.log_of(id);
    let hits: Vec<&String> = lines
        .iter()
        .filter(|l| l.contains(": warning: ") && parts.iter().all(|alts| alts.iter().any(|a| l.contains(a))))
        .collect();
    r.seen(&format!("{what}: log"), format!("{lines:#?}"));
    r.check(
        hits.len() == 1,
        format!("{what}: want one warning line holding {parts:?}, found {}: {lines:#?}", hits.len()),
    );
}

/// One layout whose temp target reaches a volume (or has one beneath it).
struct Layout<'a> {
    name: &'a str,
    /// The image's symlink: (path, target), if any.
    link: Option<(&'a str, &'a str)>,
    /// The volume's container path, and where it lands (its in-root
    /// resolution: the mount point in the container's mountinfo).
    dest: &'a str,
    lands: &'a str,
    env: &'a [(&'a str, &'a str)],
    /// What the container writes: through the symlink into the volume's root.
    through: &'a str,
    /// The warning's substrings (see [`check_warning`]).
    warning: &'a [&'a [&'a str]],
    /// Whether `/tmp` itself is a plain directory that still gets our tmpfs.
    tmp_served: bool,
}

/// The image of `l`: the busybox rootfs with its symlink and the volume's
/// mount point.
fn layout_image(node: &Node, l: &Layout) -> String {
    node.image("hostile", |root| {
        if let Some((path, to)) = l.link {
            let p = root.join(path.trim_start_matches('/'));
            if p.is_dir() {
                std::fs::remove_dir(&p).unwrap();
            }
            std::os::unix::fs::symlink(to, &p).unwrap();
        }
        // Only a mount point of the image's own (never through the symlink:
        // an absolute one would lead out of the rootfs here).
        if l.dest == l.lands && !l.lands.starts_with("/tmp/") {
            std::fs::create_dir_all(root.join(l.lands.trim_start_matches('/'))).unwrap();
        }
    })
}

/// Runs layout `l` in a pod of its own with the volume private or shared,
/// and checks everything (see the section's head).
fn run_layout(node: &mut Node, r: &mut Report, l: &Layout, image: &str, shared: bool) {
    let vol = Volume::new(node, l.dest, shared);
    let what = format!("{} ({})", l.name, vol.propagation());
    let tables = node.mount_tables();
    let listed = vol.listing();
    r.seen(&format!("{what}: volume before"), format!("{:?}", listed[0]));
    let Some(pod) = r.step(&format!("{what}: RunPodSandbox"), node.run_pod("hostile", &PodOpts::default()))
    else {
        return;
    };
    let mounts = [vol.mount()];
    let opts = CtrOpts { image: Some(image), mounts: &mounts, env: l.env, ..CtrOpts::ro("app", GI) };
    let started = r.step(&format!("{what}: start"), node.start_container(&pod, &opts));
    if let Some(c) = &started {
        r.seen(&format!("{what}: config.json"), node.ours_in_config(c));
        let via = Path::new(l.through).parent().unwrap().join("canary");
        let script = format!(
            "cat /proc/self/mountinfo; echo \"CANARY-AT-DEST $(cat {dest}/canary)\"; \
             echo \"CANARY-VIA-LINK $(cat {via})\"; echo -n '{THROUGH}' > {through} && echo WROTE; {probe} true",
            dest = l.dest,
            via = via.display(),
            through = l.through,
            // Only where /tmp is not the volume: the listing after counts every file.
            probe = if l.tmp_served { "touch /tmp/probe 2>/dev/null && echo TMP-WRITABLE;" } else { "" },
        );
        if let Some((_, out, err)) = r.step(&format!("{what}: exec"), node.exec(c, &["sh", "-c", &script])) {
            let mounts = parse_mountinfo(&out);
            let ours: Vec<String> = mounts.iter().filter(|m| m.source == OURS).map(mount_line).collect();
            r.seen(&format!("{what}: mounts of ours in the container"), format!("{ours:?}"));
            let under = |m: &&MountInfo| {
                m.source == OURS
                    && (m.mount_point == l.lands || m.mount_point.starts_with(&format!("{}/", l.lands)))
            };
            r.check(
                !mounts.iter().any(|m| under(&m)),
                format!("{what}: a tmpfs of ours on the volume at {}: {ours:?}", l.lands),
            );
            let at_dest = mount_at(&mounts, l.lands);
            r.check(
                at_dest.is_some_and(|m| m.source != OURS),
                format!("{what}: the volume is not the top mount at {}: {at_dest:?}", l.lands),
            );
            let canary = CANARY.trim_end();
            r.check(
                out.contains(&format!("CANARY-AT-DEST {canary}\n")),
                format!("{what}: the volume's canary is not seen at {}/canary: {}", l.dest, err.trim()),
            );
            r.check(
                out.contains(&format!("CANARY-VIA-LINK {canary}\n")),
                format!("{what}: the volume's canary is not seen at {}: {}", via.display(), err.trim()),
            );
            r.check(out.contains("WROTE"), format!("{what}: writing {} failed: {err}", l.through));
            let tmp = mount_at(&mounts, "/tmp");
            if l.tmp_served {
                r.check(
                    tmp.is_some_and(|t| t.source == OURS && t.size() == Some(256 * MI))
                        && out.contains("TMP-WRITABLE"),
                    format!("{what}: /tmp (a plain directory) is not our writable 256Mi tmpfs: {tmp:?}"),
                );
            } else {
                r.check(tmp.is_none_or(|t| t.source != OURS), format!("{what}: /tmp has our tmpfs: {tmp:?}"));
            }
        }
        let landed = std::fs::read_to_string(vol.host.join("through-link"));
        r.seen(&format!("{what}: host through-link"), format!("{landed:?}"));
        r.check(
            landed.as_deref().ok() == Some(THROUGH),
            format!("{what}: {} did not reach the host's volume dir: {landed:?}", l.through),
        );
        check_warning(r, node, &what, c, l.warning);
    }
    let during = node.mount_tables();
    check_tables(r, &format!("{what}, running"), &tables, &during, &[&vol.host]);
    let ids: Vec<&str> = started.iter().map(String::as_str).collect();
    r.step(&format!("{what}: stop and remove"), node.teardown(&pod, &ids));
    check_tables(r, &format!("{what}, after"), &tables, &node.mount_tables(), &[&vol.host]);
    let mut want = listed.clone();
    if started.is_some() {
        for w in &mut want {
            w.push(format!("through-link file {}", THROUGH.len()));
            w.sort();
        }
    }
    let after = vol.listing();
    r.seen(&format!("{what}: volume after"), format!("{:?}", after[0]));
    r.check(
        after[0] == want[0],
        format!("{what}: the volume dir changed: {:?}, want {:?}", after[0], want[0]),
    );
    r.check(
        after[1] == want[1],
        format!("{what}: the volume dir seen from the node's namespace: {:?}, want {:?}", after[1], want[1]),
    );
}

/// Runs layout `l` with a private and with a `Bidirectional` volume on one node.
fn volume_layout(case: &str, l: &Layout) {
    let mut r = Report::new(case);
    let mut node = Node::start(case);
    node.logging_config();
    let image = layout_image(&node, l);
    for shared in [false, true] {
        run_layout(&mut node, &mut r, l, &image, shared);
    }
    r.finish();
}

/// `/tmp -> /vol` with a volume at `/vol` (sorts after `/tmp`).
#[test]
fn hostile_tmp_symlink_to_a_volume_at_vol() {
    volume_layout(
        "tmp-to-vol",
        &Layout {
            name: "/tmp -> /vol, volume at /vol",
            link: Some(("/tmp", "/vol")),
            dest: "/vol",
            lands: "/vol",
            env: &[],
            through: "/tmp/through-link",
            warning: &[&["/tmp"], &["the spec's mount at /vol"]],
            tmp_served: false,
        },
    );
}

/// `/tmp -> data` (relative) with a volume at `/data` (sorts before `/tmp`).
#[test]
fn hostile_tmp_symlink_to_a_volume_at_data() {
    volume_layout(
        "tmp-to-data",
        &Layout {
            name: "/tmp -> data, volume at /data",
            link: Some(("/tmp", "data")),
            dest: "/data",
            lands: "/data",
            env: &[],
            through: "/tmp/through-link",
            warning: &[&["/tmp"], &["the spec's mount at /data"]],
            tmp_served: false,
        },
    );
}

/// `TMPDIR=/scratch/tmp` with `/scratch -> /vol` and a volume at `/vol`
/// (with no `tmp` in it: nothing may make one there); `/tmp` is a plain
/// directory and still gets our tmpfs.
#[test]
fn hostile_tmpdir_parent_symlink_to_a_volume() {
    volume_layout(
        "scratch-to-vol",
        &Layout {
            name: "TMPDIR=/scratch/tmp, /scratch -> /vol, volume at /vol",
            link: Some(("/scratch", "/vol")),
            dest: "/vol",
            lands: "/vol",
            env: &[("TMPDIR", "/scratch/tmp")],
            through: "/scratch/through-link",
            warning: &[&["/scratch"], &["the spec's mount at /vol"]],
            tmp_served: true,
        },
    );
}

/// A volume at `/tmp/data`: `/tmp` is left alone (a tmpfs there would hide
/// the volume).
#[test]
fn hostile_volume_at_tmp_data_leaves_tmp_alone() {
    volume_layout(
        "tmp-data-volume",
        &Layout {
            name: "volume at /tmp/data",
            link: None,
            dest: "/tmp/data",
            lands: "/tmp/data",
            env: &[],
            through: "/tmp/data/through-link",
            warning: &[&["/tmp"], &["the spec mounts /tmp/data inside it"]],
            tmp_served: false,
        },
    );
}

/// The image: the busybox rootfs with `/tmp` a symlink to `to`.
fn tmp_link_image(node: &Node, to: &str) -> String {
    node.image("tmplink", |root| {
        std::fs::remove_dir(root.join("tmp")).unwrap();
        std::os::unix::fs::symlink(to, root.join("tmp")).unwrap();
    })
}

/// `/tmp -> /proc`, `/tmp -> /sys`, `/tmp -> /dev`: refused (these are spec
/// mounts, and system directories); nothing of ours is mounted anywhere in
/// the container, and the system mounts are what the runtime made.
#[test]
fn hostile_tmp_symlinks_into_proc_sys_dev_are_refused() {
    let mut r = Report::new("tmp-to-system");
    let mut node = Node::start("tmp-to-system");
    node.logging_config();
    let tables = node.mount_tables();
    let Some(pod) = r.step("RunPodSandbox", node.run_pod("system", &PodOpts::default())) else {
        return r.finish();
    };
    let mut ids = Vec::new();
    for (dir, fstype) in [("/proc", "proc"), ("/sys", "sysfs"), ("/dev", "tmpfs")] {
        let what = format!("/tmp -> {dir}");
        let image = tmp_link_image(&node, dir);
        let opts = CtrOpts { image: Some(&image), ..CtrOpts::ro(&dir[1..], GI) };
        let Some(c) = r.step(&format!("{what}: start"), node.start_container(&pod, &opts)) else { continue };
        r.seen(&format!("{what}: config.json"), node.ours_in_config(&c));
        if let Some(out) = r.step(&format!("{what}: probe"), node.probe(&c)) {
            let mounts = parse_mountinfo(&out);
            let ours: Vec<String> = mounts.iter().filter(|m| m.source == OURS).map(mount_line).collect();
            let top = mount_at(&mounts, dir);
            r.seen(&what, format!("mounts of ours {ours:?}, {dir}: {:?}", top.map(mount_line)));
            r.check(ours.is_empty(), format!("{what}: mounts of ours in the container: {ours:?}"));
            r.check(
                top.is_some_and(|m| m.fstype == fstype && m.source != OURS),
                format!("{what}: {dir} is not the runtime's {fstype}: {top:?}"),
            );
        }
        let dest = format!("the spec's mount at {dir}");
        check_warning(&mut r, &node, &what, &c, &[&["/tmp"], &[&dest, "a system directory"]]);
        ids.push(c);
    }
    let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
    r.step("stop and remove", node.teardown(&pod, &ids));
    check_tables(&mut r, "after", &tables, &node.mount_tables(), &[&node.state]);
    r.finish();
}

/// A symlink onto a spec mount of tmpfs through CRI: `/tmp -> /dev/shm`,
/// the pod's shm (a tmpfs on the host, bound into the container) under the
/// spec's `/dev` tmpfs. CRI has no other way to give a container a tmpfs
/// mount (its `Mount` is a bind). `/tmp` is left alone; nothing of ours
/// stacks on `/dev/shm`, which is the pod's shm grown as usual; a file
/// written through the link lands in the pod's shm on the host.
#[test]
fn hostile_tmp_symlink_onto_the_pod_shm() {
    let mut r = Report::new("tmp-to-shm");
    let mut node = Node::start("tmp-to-shm");
    node.logging_config();
    let image = tmp_link_image(&node, "/dev/shm");
    let tables = node.mount_tables();
    let Some(pod) = r.step("RunPodSandbox", node.run_pod("shm", &PodOpts::default())) else {
        return r.finish();
    };
    let opts = CtrOpts { image: Some(&image), ..CtrOpts::ro("app", GI) };
    let what = "/tmp -> /dev/shm";
    if let Some(c) = r.step("start", node.start_container(&pod, &opts)) {
        r.seen("config.json", node.ours_in_config(&c));
        let script =
            format!("cat /proc/self/mountinfo; echo -n '{THROUGH}' > /tmp/through-link && echo WROTE");
        if let Some((_, out, err)) = r.step("exec", node.exec(&c, &["sh", "-c", &script])) {
            let mounts = parse_mountinfo(&out);
            let ours: Vec<String> = mounts.iter().filter(|m| m.source == OURS).map(mount_line).collect();
            let shm = mount_at(&mounts, "/dev/shm");
            r.seen(what, format!("mounts of ours {ours:?}, /dev/shm {:?}", shm.map(mount_line)));
            r.check(ours.is_empty(), format!("{what}: mounts of ours in the container: {ours:?}"));
            r.check(
                shm.is_some_and(|m| m.source != OURS && m.size() == Some(512 * MI)),
                format!("{what}: /dev/shm is not the pod's shm grown to 512Mi: {shm:?}"),
            );
            r.check(out.contains("WROTE"), format!("{what}: writing /tmp/through-link: {err}"));
        }
        let landed = std::fs::read_to_string(node.pod_shm(&pod).join("through-link"));
        r.check(
            landed.as_deref().ok() == Some(THROUGH),
            format!("{what}: /tmp/through-link is not in the pod's shm on the host: {landed:?}"),
        );
        let parts: &[&[&str]] =
            &[&["/tmp"], &["the spec's mount at /dev/shm", "the spec's mount at /dev", "a system directory"]];
        check_warning(&mut r, &node, what, &c, parts);
        r.step("stop and remove", node.teardown(&pod, &[&c]));
    }
    check_tables(&mut r, "after", &tables, &node.mount_tables(), &[&node.state]);
    r.finish();
}

/// Memory limits of 512 KiB, 1 MiB and 1 GiB on the container, each in a pod
/// of its own: below 1 MiB no tmpfs at all (a note says `below 1Mi`), 1 MiB
/// a 1 MiB `/tmp` (the pod's 64 MiB shm is never shrunk), 1 GiB the defaults.
/// A container the runtime or the kernel will not start under such a limit
/// is recorded, and the refusal must not be ours.
#[test]
fn hostile_memory_limits_cap_every_size() {
    let mut r = Report::new("memory-limits");
    let mut node = Node::start("memory-limits");
    node.logging_config();
    let tables = node.mount_tables();
    for (limit, tmp, shm) in
        [(512 * 1024, None, SHM_64M), (MI, Some(MI), SHM_64M), (GI, Some(256 * MI), 512 * MI)]
    {
        let what = format!("limit {}", sz(Some(limit)));
        let opts = PodOpts { memory: limit, ..PodOpts::default() };
        let Some(pod) = r.step(&format!("{what}: RunPodSandbox"), node.run_pod("mem", &opts)) else {
            continue;
        };
        let Some(c) =
            r.step(&format!("{what}: create"), node.create_container(&pod, &CtrOpts::ro("app", limit)))
        else {
            continue;
        };
        let started = node.cri("StartContainer", json!({"container_id": c}));
        let log = node.log_of(&c);
        r.seen(&format!("{what}: log"), format!("{log:#?}"));
        let errors: Vec<&String> = log.iter().filter(|l| l.contains(": error: ")).collect();
        r.check(errors.is_empty(), format!("{what}: errors of ours: {errors:?}"));
        let noted = log.iter().any(|l| l.contains("below 1Mi"));
        match started {
            Err(e) => {
                // Only a limit below what runc's init already uses when the
                // limit is set (about 2 MiB here: "unable to set memory limit
                // to 1048576 (current usage: 2097152 ...)") may do this.
                r.seen(&format!("{what}: StartContainer refused"), &e);
                r.check(limit <= MI && e.contains("memory limit"), format!("{what}: StartContainer: {e}"));
                r.check(!e.contains(OURS), format!("{what}: the refusal is ours: {e}"));
                // The wrapper runs at create; the hook (mode hook) at prestart,
                // which a container killed before it never reaches.
                if wrapper_mode() == "spec" && limit < MI {
                    r.check(noted, format!("{what}: no note `below 1Mi` in the log"));
                }
            }
            Ok(_) => {
                r.seen(&format!("{what}: config.json"), node.ours_in_config(&c));
                if let Some(out) = r.step(&format!("{what}: probe"), node.probe(&c)) {
                    let mounts = parse_mountinfo(&out);
                    let ours: Vec<String> =
                        mounts.iter().filter(|m| m.source == OURS).map(mount_line).collect();
                    let t = mount_at(&mounts, "/tmp").filter(|m| m.source == OURS).and_then(MountInfo::size);
                    let s = mount_at(&mounts, "/dev/shm").and_then(MountInfo::size);
                    r.seen(&what, format!("mounts of ours {ours:?}, /tmp {}, /dev/shm {}", sz(t), sz(s)));
                    match tmp {
                        None => r.check(ours.is_empty(), format!("{what}: mounts of ours: {ours:?}")),
                        Some(want) => r.check(
                            t == Some(want) && out.contains("TMP-WRITABLE"),
                            format!("{what}: /tmp is {}, want our writable {}", sz(t), sz(Some(want))),
                        ),
                    }
                    r.check(s == Some(shm), format!("{what}: /dev/shm is {}, want {}", sz(s), sz(Some(shm))));
                }
                if limit < MI {
                    r.check(noted, format!("{what}: no note `below 1Mi` in the log"));
                }
            }
        }
        let shm_now = fs_bytes(&node.pod_shm(&pod));
        r.check(
            shm_now == shm,
            format!("{what}: the pod's shm on the host is {}, want {}", sz(Some(shm_now)), sz(Some(shm))),
        );
        r.step(&format!("{what}: stop and remove"), node.teardown(&pod, &[&c]));
    }
    check_tables(&mut r, "after", &tables, &node.mount_tables(), &[&node.state]);
    r.finish();
}

/// A symlinked parent of the engine shm: containerd's `state` is a symlink,
/// so the pod shm's path (the source the spec binds at `/dev/shm`) has a
/// symlinked component, which could as well lead to another host tmpfs. It
/// is grown only by a path with no symlink anywhere (docs/design.md#engine-shm),
/// by the spec executor and by the hook alike: it stays 64 MiB, with a
/// warning `without following a symlink`, in every mode.
#[test]
fn hostile_symlinked_pod_shm_parent_is_not_grown_on_the_host() {
    let mut r = Report::new("shm-parent-link");
    let mut node = Node::start_with("shm-parent-link", &NodeOpts { symlinked_state: true });
    node.logging_config();
    let tables = node.mount_tables();
    let Some(pod) = r.step("RunPodSandbox", node.run_pod("shmlink", &PodOpts::default())) else {
        return r.finish();
    };
    let shm_path = node.pod_shm(&pod);
    r.seen("pod shm", shm_path.display());
    let Some(c) = r.step("start", node.start_container(&pod, &CtrOpts::ro("app", GI))) else {
        return r.finish();
    };
    r.seen("config.json", node.ours_in_config(&c));
    let spec = wrapper_mode() == "spec";
    let hooked = node.runs_our_hook(&c).unwrap_or(false);
    r.check(
        hooked == (!spec || runc_before_1_1_8(Runtime::Runc)),
        format!("our hook in config.json is {hooked}"),
    );
    let want = SHM_64M;
    if let Some(p) = r.step("probe", node.probe(&c)) {
        r.served("symlinked state, ro 1Gi", &p, 256 * MI, want);
    }
    let host = fs_bytes(&shm_path);
    r.check(
        host == want,
        format!("the pod's shm on the host is {}, want {}", sz(Some(host)), sz(Some(want))),
    );
    let log = node.log_of(&c);
    r.seen("log", format!("{log:#?}"));
    // The wrapper and the hook it adds (runc before 1.1.8) each say so.
    let n =
        log.iter().filter(|l| l.contains(": warning: ") && l.contains("without following a symlink")).count();
    r.seen("warnings `without following a symlink`", n);
    r.check(n >= 1, "no warning `without following a symlink` in the log");
    r.step("stop and remove", node.teardown(&pod, &[&c]));
    check_tables(&mut r, "after", &tables, &node.mount_tables(), &[&node.dir.0]);
    r.finish();
}

/// The control case: `/tmp -> /run/tmp` (nothing is mounted at `/run` in a
/// CRI container) is a safe place: our tmpfs is at `/run/tmp`; the spec
/// executor writes that resolved path into `config.json`, never `/tmp`.
#[test]
fn hostile_tmp_symlink_to_a_safe_place_is_served_at_the_resolved_path() {
    let mut r = Report::new("tmp-to-run-tmp");
    let mut node = Node::start("tmp-to-run-tmp");
    node.logging_config();
    let image = node.image("runtmp", |root| {
        std::fs::remove_dir(root.join("tmp")).unwrap();
        std::fs::create_dir_all(root.join("run/tmp")).unwrap();
        std::os::unix::fs::symlink("/run/tmp", root.join("tmp")).unwrap();
    });
    let tables = node.mount_tables();
    let Some(pod) = r.step("RunPodSandbox", node.run_pod("runtmp", &PodOpts::default())) else {
        return r.finish();
    };
    let opts = CtrOpts { image: Some(&image), ..CtrOpts::ro("app", GI) };
    if let Some(c) = r.step("start", node.start_container(&pod, &opts)) {
        r.seen("config.json", node.ours_in_config(&c));
        let path = node.state.join("io.containerd.runtime.v2.task/k8s.io").join(&c).join("config.json");
        let config: Value =
            serde_json::from_slice(&std::fs::read(&path).unwrap_or_default()).unwrap_or_default();
        let dests: Vec<&str> = config["mounts"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|m| m["source"] == OURS)
            .filter_map(|m| m["destination"].as_str())
            .collect();
        let hooked = node.runs_our_hook(&c).unwrap_or(false);
        if wrapper_mode() == "spec" && !runc_before_1_1_8(Runtime::Runc) {
            r.check(
                dests == ["/run/tmp"] && !hooked,
                format!("config.json: our tmpfs entries {dests:?} (hook {hooked}), want [\"/run/tmp\"]"),
            );
        } else {
            r.check(
                dests.is_empty() && hooked,
                format!("config.json: our entries {dests:?}, our hook {hooked}"),
            );
        }
        if let Some(out) = r.step("probe", node.probe(&c)) {
            let mounts = parse_mountinfo(&out);
            let t = mount_at(&mounts, "/run/tmp");
            r.seen("/run/tmp", format!("{:?}", t.map(mount_line)));
            r.check(
                t.is_some_and(|t| {
                    t.source == OURS && t.size() == Some(256 * MI) && t.has("nosuid") && t.has("nodev")
                }),
                format!("/run/tmp is not our 256Mi tmpfs: {t:?}"),
            );
            r.check(out.contains("TMP-WRITABLE"), "/tmp (-> /run/tmp) is not writable");
            r.check(mount_at(&mounts, "/tmp").is_none(), "a mount at /tmp, a symlink in the image");
        }
        let log = node.log_of(&c);
        let warnings: Vec<&String> = log.iter().filter(|l| l.contains(": warning: ")).collect();
        r.check(warnings.is_empty(), format!("warnings: {warnings:?}"));
        r.step("stop and remove", node.teardown(&pod, &[&c]));
    }
    check_tables(&mut r, "after", &tables, &node.mount_tables(), &[&node.state]);
    r.finish();
}

/// A volume at `/foo/data` with `/foo -> /tmp` in the image: it lands at
/// `/tmp/data`, beneath `/tmp`, which is left alone.
#[test]
fn hostile_volume_through_a_symlink_into_tmp_leaves_tmp_alone() {
    volume_layout(
        "foo-data-volume",
        &Layout {
            name: "/foo -> /tmp, volume at /foo/data",
            link: Some(("/foo", "/tmp")),
            dest: "/foo/data",
            lands: "/tmp/data",
            env: &[],
            through: "/foo/data/through-link",
            warning: &[&["/tmp"], &["the spec mounts /foo/data inside it"]],
            tmp_served: false,
        },
    );
}
