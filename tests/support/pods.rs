//! A Kubernetes node for the pod suites (tests/runtimes/cri.rs through the
//! RuntimeClass wrapper, tests/nri/ through the NRI plugin): a private mount
//! namespace held by a `sleep`, with its own `/etc` (an overlay, so the host
//! config at `/etc/oci-tmpfs-hook/` is the test's), a 64 MiB `/dev/shm`
//! (the node's, which a `hostIPC` pod gets) and `/run` (runc's state, the
//! shims' and NRI's sockets), a containerd in it with a private root, state,
//! socket and config, restartable (case 9) and stopped by its pid, the
//! busybox image imported, and kubelet's CRI calls. What a case saw is
//! recorded in a [`Report`] (printed even when it passes) and checked all
//! before failing, so a failing run still reports every size.
//!
//! The ways in ([`Executor`]): a wrapper node registers two runtime handlers as
//! `setup containerd` writes them, `oci-tmpfs` (the wrapper in spec mode,
//! with `/etc/oci-tmpfs-hook/config.toml`) and `oci-tmpfs-hookmode` (the
//! same wrapper in hook mode, through a script that names its own config
//! `/etc/oci-tmpfs-hook/hook-mode.toml`), so both modes run in one
//! containerd; an NRI node runs the plugin from the built binary in the
//! node's namespace, dialling `/var/run/nri/nri.sock` as a DaemonSet's
//! plugin does, with NRI at containerd 2.x's default (on).

use std::ffi::OsStr;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::cri::*;
use super::*;

/// The mount source the hook gives its tmpfs.
pub const OURS: &str = "oci-tmpfs-hook";
/// containerd's pod `/dev/shm` (hard-coded) and the node's `/dev/shm`.
pub const SHM_64M: u64 = 64 * MI;
pub const ANN_TMP: &str = "oci-tmpfs-hook/tmp-size";
pub const ANN_SHM: &str = "oci-tmpfs-hook/shm-size";
/// The script that shows what a container sees and whether it can write.
pub const PROBE: &str = "cat /proc/self/mountinfo; \
    touch /tmp/probe 2>/dev/null && echo TMP-WRITABLE; \
    touch /dev/shm/probe 2>/dev/null && echo SHM-WRITABLE; true";

/// How a pod's containers on a CRI node get our mounts: the runtime handler
/// a pod names, or the NRI plugin. (A bundle that a test runs with a
/// runtime itself goes through a [`super::bundle::Via`] instead.)
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Executor {
    /// The RuntimeClass handler `oci-tmpfs`: the wrapper in spec mode.
    Spec,
    /// The handler `oci-tmpfs-hookmode`: the wrapper in hook mode.
    Hook,
    /// The NRI plugin (containerd 2.x).
    Nri,
}

impl Executor {
    /// The wrapper's two modes, both served by one wrapper node.
    pub const WRAPPER: [Executor; 2] = [Executor::Spec, Executor::Hook];

    /// The suite's name in what a case prints.
    pub fn suite(self) -> &'static str {
        match self {
            Executor::Spec | Executor::Hook => "cri",
            Executor::Nri => "nri",
        }
    }

    /// Its name in what a case prints.
    pub fn label(self) -> &'static str {
        match self {
            Executor::Spec => "wrapper mode spec",
            Executor::Hook => "wrapper mode hook",
            Executor::Nri => "NRI plugin",
        }
    }

    /// The runtime handler a pod names (NRI: containerd's default, runc).
    pub fn handler(self) -> &'static str {
        match self {
            Executor::Spec => "oci-tmpfs",
            Executor::Hook => "oci-tmpfs-hookmode",
            Executor::Nri => "",
        }
    }

    /// Added to pod names, so the two modes' pods on one node differ.
    pub fn suffix(self) -> &'static str {
        match self {
            Executor::Hook => "-hook",
            Executor::Spec | Executor::Nri => "",
        }
    }

    /// The host config this way reads, in the node's namespace.
    pub fn config_file(self) -> &'static str {
        match self {
            Executor::Spec | Executor::Nri => "/etc/oci-tmpfs-hook/config.toml",
            Executor::Hook => "/etc/oci-tmpfs-hook/hook-mode.toml",
        }
    }

    /// The host config's `mode` line for this way (none for the plugin).
    fn mode_line(self) -> &'static str {
        match self {
            Executor::Spec => "mode = \"spec\"\n",
            Executor::Hook => "mode = \"hook\"\n",
            Executor::Nri => "",
        }
    }
}

/// How a node differs from the usual one.
#[derive(Default)]
pub struct NodeOpts {
    /// containerd's `state` is a symlink to the real directory, so the pod
    /// shm's path (`<state>/io.containerd.grpc.v1.cri/sandboxes/<id>/shm`)
    /// has a symlinked parent.
    pub symlinked_state: bool,
    /// An NRI node whose plugin the test starts itself.
    pub without_plugin: bool,
    /// An NRI node that also registers the wrapper's two handlers (the
    /// burst bench's arms without NRI), their wrapper and hook being
    /// [`plugin_bin`], the plugin's own binary.
    pub handlers: bool,
    /// A CNI network for pods off the node's network (a user-namespaced
    /// pod: [`PodOpts::userns`]): [`POD_NETWORK_PLUGIN`], which gives each
    /// pod's own netns an address to report and changes nothing on the host.
    pub pod_network: bool,
    /// containerd's `state` on a tmpfs in the node's mount namespace, as
    /// `/run/containerd` is on a real node (the test's directory is on this
    /// VM's disk, where replacing a bundle's `config.json` starts ext4's
    /// writeback: docs/design.md#spec-write). Only the node's namespace
    /// sees it.
    pub state_on_tmpfs: bool,
    /// A tmpfs on `/tmp` in the node's mount namespace, as on hosts whose
    /// `/tmp` is one (runc's `tmpcopyup` makes its scratch directories
    /// there). Only the node's namespace sees it.
    pub tmp_on_tmpfs: bool,
}

/// The CNI plugin of [`NodeOpts::pod_network`]: reports one address on
/// `eth0` in the pod's netns and makes nothing (the pods' network is not
/// what the suites test; containerd only needs a CNI answer to run a pod
/// that is not on the host's network).
pub const POD_NETWORK_PLUGIN: &str = r#"#!/bin/sh
cat >/dev/null
case "$CNI_COMMAND" in
ADD) printf '{"cniVersion":"1.0.0","interfaces":[{"name":"eth0","sandbox":"%s"}],"ips":[{"address":"10.213.0.2/24","interface":0}]}' "$CNI_NETNS" ;;
VERSION) printf '{"cniVersion":"1.0.0","supportedVersions":["0.3.0","0.3.1","0.4.0","1.0.0"]}' ;;
esac
"#;

/// One node: a private mount namespace, a containerd in it, the images.
pub struct Node {
    pub dir: TempDir,
    pub ctd: Containerd,
    /// Holds the mount namespace: `sleep`, started by `unshare`.
    pub holder: Child,
    pub daemon: Option<Child>,
    /// The NRI plugin, on an NRI node.
    pub plugin: Option<Child>,
    pub config: PathBuf,
    pub sock: PathBuf,
    pub image: String,
    pub cgroup_top: String,
    pub pods: Vec<String>,
    pub case: String,
    /// containerd's state dir, as its config names it.
    pub state: PathBuf,
    /// The hook binary that `config.json` names (the wrapper's, or the one
    /// the plugin's adjustments name).
    pub hook: PathBuf,
    /// The way in of what the node does next: pods run with its handler.
    pub way: Executor,
    /// An NRI node with the wrapper's handlers too ([`NodeOpts::handlers`]).
    pub handlers: bool,
}

/// The plugin's binary: `$OCI_TMPFS_HOOK_NRI_BIN` (the bench runs the
/// static release build) or the tested one.
pub fn plugin_bin() -> PathBuf {
    std::env::var_os("OCI_TMPFS_HOOK_NRI_BIN").map_or_else(hook_bin, PathBuf::from)
}

/// Starts the `sleep` that holds a node's mount namespace, in which
/// `/dev/shm` is a 64 MiB tmpfs, `/etc` an overlay with its upper layer in
/// `dir`, `/run` a tmpfs, and then `extra` (shell commands) has run; waits
/// until it is ready.
pub fn hold_namespace(dir: &Path, extra: &str) -> Child {
    for d in ["etc-up", "etc-work", "cni/bin", "cni/conf", "logs"] {
        std::fs::create_dir_all(dir.join(d)).unwrap();
    }
    let ready = dir.join("ns-ready");
    let script = format!(
        "set -e; mount -t tmpfs -o size=64m,nosuid,nodev,noexec,mode=1777 shm /dev/shm; \
         mount -t overlay overlay -o lowerdir=/etc,upperdir={up},workdir={work} /etc; \
         mount -t tmpfs -o mode=755 run /run; mkdir -p /etc/oci-tmpfs-hook; {extra} : > {ready}; exec sleep infinity",
        up = dir.join("etc-up").display(),
        work = dir.join("etc-work").display(),
        ready = ready.display()
    );
    let mut holder = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "--", "sh", "-c", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(File::create(dir.join("ns.log")).unwrap())
        .spawn()
        .expect("unshare (util-linux)");
    let deadline = Instant::now() + Duration::from_secs(20);
    while !ready.exists() {
        if let Ok(Some(status)) = holder.try_wait() {
            let log = match std::fs::read_to_string(dir.join("ns.log")) {
                Ok(text) => text,
                Err(e) => format!("(reading {}: {e})", dir.join("ns.log").display()),
            };
            panic!("the mount namespace setup failed ({status}): {log}");
        }
        assert!(Instant::now() < deadline, "the mount namespace was not ready within 20s");
        std::thread::sleep(Duration::from_millis(20));
    }
    holder
}

impl Node {
    /// A node with the wrapper's two handlers.
    pub fn wrapper(case: &str) -> Node {
        Node::start_with(case, Executor::Spec, &NodeOpts::default())
    }

    /// A node with the NRI plugin registered.
    pub fn nri(case: &str) -> Node {
        Node::start_with(case, Executor::Nri, &NodeOpts::default())
    }

    /// The ways into this node.
    pub fn ways(&self) -> Vec<Executor> {
        match self.way {
            Executor::Nri if self.handlers => vec![Executor::Nri, Executor::Spec, Executor::Hook],
            Executor::Nri => vec![Executor::Nri],
            Executor::Spec | Executor::Hook => Executor::WRAPPER.to_vec(),
        }
    }

    pub fn start_with(case: &str, way: Executor, opts: &NodeOpts) -> Node {
        require_root();
        let ctd = Containerd::find();
        let dir = TempDir::closed("cri");
        for d in ["etc-up", "etc-work", "cni/bin", "cni/conf", "logs"] {
            std::fs::create_dir_all(dir.join(d)).unwrap();
        }
        let state = dir.join("state");
        let mut extra = if opts.state_on_tmpfs {
            std::fs::create_dir_all(&state).unwrap();
            format!("mount -t tmpfs -o mode=711 state {};", state.display())
        } else {
            String::new()
        };
        if opts.tmp_on_tmpfs {
            extra.push_str("mount -t tmpfs -o mode=1777 nodetmp /tmp;");
        }
        let holder = hold_namespace(&dir, &extra);
        let reference = format!("docker.io/library/{}:latest", unique("busybox"));
        let sock = dir.join("c.sock");
        let config = dir.join("config.toml");
        let hook = if way == Executor::Nri { plugin_bin() } else { hook_bin() };
        let mut node = Node {
            state,
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
            hook: hook.canonicalize().expect("the hook's binary"),
            way,
            handlers: way == Executor::Nri && opts.handlers,
        };
        if opts.symlinked_state {
            std::fs::create_dir(node.dir.join("state-real")).unwrap();
            std::os::unix::fs::symlink("state-real", &node.state).unwrap();
        }
        node.host_config("");
        let mut config = node.ctd.base_config(&node.dir, &node.state, &node.image);
        if opts.pod_network {
            // containerd brings the pod's `lo` up itself (no `loopback` plugin).
            config = config.replacen("conf_dir = ", "use_internal_loopback = true\n      conf_dir = ", 1);
        }
        std::fs::write(&node.config, config).unwrap();
        if opts.pod_network {
            let plugin = node.dir.join("cni/bin/oth-pod-net");
            std::fs::write(&plugin, POD_NETWORK_PLUGIN).unwrap();
            std::fs::set_permissions(&plugin, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
            let conf =
                json!({"cniVersion": "1.0.0", "name": "oth-pod-net", "plugins": [{"type": "oth-pod-net"}]});
            std::fs::write(node.dir.join("cni/conf/10-oth-pod-net.conflist"), conf.to_string()).unwrap();
        }
        if way == Executor::Nri {
            // containerd's own config: paths only, NRI left at its default (on).
            assert!(
                node.ctd.major >= 2,
                "the NRI suite needs containerd 2.x (NRI on by default), found {}",
                node.ctd.version
            );
        }
        if way != Executor::Nri {
            node.register_handlers(&hook_bin());
        } else if node.handlers {
            node.register_handlers(&plugin_bin());
        }
        node.start_daemon();
        if way == Executor::Nri && !opts.without_plugin {
            node.start_plugin();
        }
        let runc = ok(Command::new("runc").arg("--version"));
        say(&format!(
            "{} {case}: containerd {} ({}), config version {}, {}",
            way.suite(),
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

    /// The handlers, as a platform engineer registers one: `setup
    /// containerd` writes `oci-tmpfs`; its hook-mode twin is the same
    /// entries under another name, whose binary is a script that names the
    /// hook-mode config (`OCI_TMPFS_HOOK_CONFIG`) and execs the wrapper.
    /// `bin` is the wrapper's and the hook's binary.
    fn register_handlers(&self, bin: &Path) {
        let wrapper = self.dir.join("oci-tmpfs-runtime");
        std::os::unix::fs::symlink(bin, &wrapper).unwrap();
        let mut setup = Command::new(hook_bin());
        setup.args(["setup", "containerd", "--containerd-config"]).arg(&self.config);
        setup.arg("--hook-path").arg(bin).arg("--runtime-path").arg(&wrapper);
        ok(&mut setup);
        let twin = self.dir.join("oci-tmpfs-runtime-hookmode");
        let script = format!(
            "#!/bin/sh\nOCI_TMPFS_HOOK_CONFIG={} exec {} \"$@\"\n",
            Executor::Hook.config_file(),
            wrapper.display()
        );
        std::fs::write(&twin, script).unwrap();
        std::fs::set_permissions(&twin, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        let written = std::fs::read_to_string(&self.config).unwrap();
        let start = written
            .find(".runtimes.oci-tmpfs]")
            .and_then(|i| written[..i].rfind('['))
            .expect("setup containerd wrote the oci-tmpfs runtime");
        // Its tables end at the first line after the options' header that
        // is another header, a comment or empty.
        let options = start + written[start..].find(".runtimes.oci-tmpfs.options]").expect("its options");
        let mut end = options + written[options..].find('\n').map_or(written.len() - options, |i| i + 1);
        while end < written.len() {
            let line = written[end..].lines().next().unwrap_or("");
            let t = line.trim_start();
            if t.is_empty() || t.starts_with('[') || t.starts_with('#') {
                break;
            }
            end += line.len() + 1;
        }
        let binary = format!("BinaryName = {:?}", wrapper.display().to_string());
        let entries = written[start..end.min(written.len())]
            .replace(".runtimes.oci-tmpfs]", ".runtimes.oci-tmpfs-hookmode]")
            .replace(".runtimes.oci-tmpfs.options]", ".runtimes.oci-tmpfs-hookmode.options]")
            .replace(&binary, &format!("BinaryName = {:?}", twin.display().to_string()));
        assert!(entries.contains("oci-tmpfs-runtime-hookmode"), "the twin's entries: {entries}");
        std::fs::write(&self.config, format!("{written}\n{entries}")).unwrap();
    }

    /// The text of `name` in the node's directory (a log): empty while no
    /// such file exists yet (a plugin that has not logged anything, its log
    /// opened by the plugin itself), a panic naming the file for any other
    /// error.
    pub fn read(&self, name: &str) -> String {
        read_text_if_any(self.dir.join(name)).unwrap_or_default()
    }

    /// The namespace's view of `path` (its `/etc`, `/dev/shm`).
    pub fn ns_path(&self, path: &str) -> PathBuf {
        PathBuf::from(format!("/proc/{}/root{path}", self.holder.id()))
    }

    /// Writes `toml` as the host config of every way into this node: the
    /// one the plugin reads, or those the two handlers' wrappers (and the
    /// hook they add) read, each with its `mode`.
    pub fn host_config(&self, toml: &str) {
        for way in self.ways() {
            let path = self.ns_path(way.config_file());
            let text = format!("{}{toml}", way.mode_line());
            std::fs::write(&path, text).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
        }
    }

    /// The final `config.json` of container `id`, as the runtime got it.
    pub fn final_config(&self, id: &str) -> Result<Value, String> {
        let path = self.state.join("io.containerd.runtime.v2.task/k8s.io").join(id).join("config.json");
        let text = std::fs::read(&path).map_err(|e| format!("reading {}: {e}", path.display()))?;
        serde_json::from_slice(&text).map_err(|e| e.to_string())
    }

    /// Whether the final `config.json` of container `id` runs our hook.
    pub fn runs_our_hook(&self, id: &str) -> Result<bool, String> {
        let config = self.final_config(id)?;
        let ours = self.hook.display().to_string();
        let hooks = config["hooks"].as_object().into_iter().flat_map(|h| h.values());
        Ok(hooks.filter_map(Value::as_array).flatten().any(|h| h["path"] == ours.as_str()))
    }

    pub fn ctr(&self) -> Command {
        let mut c = Command::new(&self.ctd.ctr);
        c.arg("--address").arg(&self.sock).args(["--namespace", "k8s.io"]);
        c
    }

    /// Starts containerd in the node's mount namespace and waits for CRI.
    pub fn start_daemon(&mut self) {
        let daemon = start_containerd(&self.holder, &self.ctd.bin, &self.config, &self.dir, None);
        wait_cri_ready(self.daemon.insert(daemon), &self.sock, &self.dir.join("containerd.log"));
    }

    /// Stops containerd by its pid (SIGTERM; the shims and pods keep running).
    pub fn stop_daemon(&mut self) {
        if let Some(mut child) = self.daemon.take() {
            stop(&mut child, Duration::from_secs(30));
        }
    }

    pub fn restart_daemon(&mut self) {
        self.stop_daemon();
        self.start_daemon();
    }

    /// One CRI call: the response, or the gRPC error as "CODE: details".
    pub fn cri(&self, method: &str, request: Value) -> Result<Value, String> {
        cri_call(&self.sock, method, &request)
    }

    /// RunPodSandbox as kubelet sends it for a host-network pod.
    /// The pod's name is `name` with the way's suffix (`-hook` in hook mode),
    /// its handler `opts.handler` or the way's.
    pub fn run_pod(&mut self, name: &str, opts: &PodOpts) -> Result<Pod, String> {
        let name = &format!("{name}{}", self.way.suffix());
        let handler = opts.handler.unwrap_or(self.way.handler());
        let uid = unique("uid");
        let pid = if opts.host_pid { "NODE" } else { "CONTAINER" };
        let ipc = if opts.host_ipc { "NODE" } else { "POD" };
        let logs = self.dir.join("logs").join(&uid);
        std::fs::create_dir_all(&logs).unwrap();
        let annotations: serde_json::Map<String, Value> =
            opts.annotations.iter().map(|(k, v)| (k.to_string(), json!(v))).collect();
        let mut config = json!({
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
        if let Some(host_id) = opts.userns {
            let ns = &mut config["linux"]["security_context"]["namespace_options"];
            ns["network"] = json!("POD");
            let map = json!([{"host_id": host_id, "container_id": 0, "length": 65536}]);
            ns["userns_options"] = json!({"mode": "POD", "uids": map, "gids": map});
        }
        let r = self.cri("RunPodSandbox", json!({"config": config, "runtime_handler": handler}))?;
        let id = r["pod_sandbox_id"].as_str().expect("pod_sandbox_id").to_string();
        self.pods.push(id.clone());
        Ok(Pod { id, config, ipc })
    }

    /// CreateContainer + StartContainer; the container id.
    pub fn start_container(&self, pod: &Pod, c: &CtrOpts) -> Result<String, String> {
        let id = self.create_container(pod, c)?;
        self.cri("StartContainer", json!({"container_id": id}))?;
        Ok(id)
    }

    /// CreateContainer; the container id.
    pub fn create_container(&self, pod: &Pod, c: &CtrOpts) -> Result<String, String> {
        let r = self.cri("CreateContainer", self.container_request(pod, c))?;
        Ok(r["container_id"].as_str().expect("container_id").to_string())
    }

    /// The CreateContainer request kubelet sends for `c` in `pod`.
    pub fn container_request(&self, pod: &Pod, c: &CtrOpts) -> Value {
        container_request(&self.image, pod, c)
    }

    /// Imports an image of the busybox rootfs changed by `shape`; its reference.
    pub fn image(&self, name: &str, shape: impl FnOnce(&Path)) -> String {
        let rootfs = Bundle::new("cri-image-rootfs");
        shape(&rootfs.rootfs());
        let dir = TempDir::closed("cri-image");
        let reference = format!("docker.io/library/{}:latest", unique(name));
        let tar = build_image(&dir, &rootfs.rootfs(), &reference);
        ok(self.ctr().args(["images", "import"]).arg(&tar));
        reference
    }

    /// ExecSync: (exit code, stdout, stderr).
    pub fn exec(&self, id: &str, cmd: &[&str]) -> Result<(i64, String, String), String> {
        exec_sync(&self.sock, id, cmd)
    }

    /// What a container sees: PROBE's output.
    pub fn probe(&self, id: &str) -> Result<String, String> {
        self.exec(id, &["sh", "-c", PROBE]).map(|(_, out, _)| out)
    }

    /// ContainerStatus (verbose): the status and the parsed info.
    pub fn status(&self, id: &str) -> Result<(Value, Value), String> {
        let r = self.cri("ContainerStatus", json!({"container_id": id, "verbose": true}))?;
        let info =
            r["info"]["info"].as_str().and_then(|s| serde_json::from_str(s).ok()).unwrap_or(Value::Null);
        Ok((r["status"].clone(), info))
    }

    /// The host pid of the pod's sandbox (pause) process.
    pub fn sandbox_pid(&self, pod: &Pod) -> Result<u32, String> {
        let r = self.cri("PodSandboxStatus", json!({"pod_sandbox_id": pod.id, "verbose": true}))?;
        let info: Value =
            r["info"]["info"].as_str().and_then(|s| serde_json::from_str(s).ok()).unwrap_or(Value::Null);
        info["pid"].as_u64().map(|p| p as u32).ok_or_else(|| format!("no pid in the sandbox info: {r}"))
    }

    /// StopContainer + RemoveContainer, then StopPodSandbox + RemovePodSandbox.
    pub fn teardown(&mut self, pod: &Pod, containers: &[&str]) -> Result<(), String> {
        teardown_pod(&self.sock, &mut self.pods, pod, containers)
    }

    /// The memory cgroup's OOM-kill count of a container (cgroup v1 or v2).
    pub fn oom_kills(&self, pod: &Pod, id: &str) -> Option<u64> {
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

    /// How many times the plugin has registered, from its log.
    pub fn registrations(&self) -> usize {
        self.read("plugin.log").lines().filter(|l| l.contains("nri: registered as")).count()
    }

    /// Starts the plugin in the node's mount namespace and waits until it
    /// has registered (one more time than before).
    pub fn start_plugin(&mut self) {
        self.start_plugin_with(&[]);
    }

    /// [`Node::start_plugin`] with `args` after `nri --socket ...`.
    pub fn start_plugin_with(&mut self, args: &[String]) {
        self.start_plugin_under(&[], args);
    }

    /// [`Node::start_plugin_with`], the plugin run by the command `under`
    /// (`unshare --fork --pid`: as PID 1). Returns the pid of what was
    /// started (`under`'s, or the plugin's).
    pub fn start_plugin_under(&mut self, under: &[&str], args: &[String]) -> u32 {
        let before = self.registrations();
        let log = File::options().create(true).append(true).open(self.dir.join("plugin.log")).unwrap();
        let child = Command::new("nsenter")
            .arg(format!("--mount=/proc/{}/ns/mnt", self.holder.id()))
            .arg("--")
            .args(under)
            .arg(plugin_bin())
            .args(["nri", "--socket", "/var/run/nri/nri.sock"])
            .args(args)
            .env("OCI_TMPFS_HOOK_LOG", "debug")
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("nsenter (util-linux)");
        let pid = child.id();
        self.plugin = Some(child);
        self.wait_registered(before + 1);
        pid
    }

    /// Waits up to 10 s for the plugin's `n`th registration.
    pub fn wait_registered(&mut self, n: usize) -> Duration {
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
    pub fn stop_plugin(&mut self) {
        if let Some(mut child) = self.plugin.take() {
            stop(&mut child, Duration::from_secs(10));
        }
    }

    /// Kills by pid, after containerd, what is left of this node.
    pub fn kill_leftovers(&self) {
        kill_leftovers(self.holder.id(), &self.cgroup_top);
    }
}

/// The CreateContainer request kubelet sends for `c` in `pod` (any CRI
/// runtime's), the image `image` unless `c` names one.
pub fn container_request(image: &str, pod: &Pod, c: &CtrOpts) -> Value {
    let envs: Vec<Value> = c.env.iter().map(|(k, v)| json!({"key": k, "value": v})).collect();
    let mut resources = json!({"cpu_period": 100000, "cpu_shares": 2});
    if let Some(m) = c.memory {
        resources["memory_limit_in_bytes"] = json!(m);
        // kubelet's Burstable score for a memory request of `m`.
        let info = rustix::system::sysinfo();
        let ram = (info.totalram as u64).saturating_mul(u64::from(info.mem_unit.max(1)));
        resources["oom_score_adj"] = json!((1000 - (1000 * m / ram.max(1)) as i64).clamp(2, 999));
    }
    // kubelet sends the image as the pod spec names it too (CRI-O 1.36
    // refuses a CreateContainer without it: "user specified image not
    // specified").
    let image = c.image.unwrap_or(image);
    let mut config = json!({
        "metadata": {"name": c.name, "attempt": 0},
        "image": {"image": image, "user_specified_image": image},
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
    // The pod's network and user namespace, as kubelet repeats them.
    let pod_ns = &pod.config["linux"]["security_context"]["namespace_options"];
    let ns = &mut config["linux"]["security_context"]["namespace_options"];
    ns["network"] = pod_ns["network"].clone();
    if let Some(userns) = pod_ns.get("userns_options") {
        ns["userns_options"] = userns.clone();
    }
    if let Some(uid) = c.user {
        config["linux"]["security_context"]["run_as_user"] = json!({"value": uid});
    }
    json!({"pod_sandbox_id": pod.id, "config": config, "sandbox_config": pod.config})
}

/// Starts containerd `bin` on `config` in the mount namespace `holder`
/// holds, logging to `dir/containerd.log` (appended: a restart keeps the
/// first run's lines), with `path` as its `PATH` when given.
pub fn start_containerd(
    holder: &Child,
    bin: &Path,
    config: &Path,
    dir: &Path,
    path: Option<&OsStr>,
) -> Child {
    let log = File::options().create(true).append(true).open(dir.join("containerd.log")).unwrap();
    let mut cmd = Command::new("nsenter");
    cmd.arg(format!("--mount=/proc/{}/ns/mnt", holder.id())).arg("--").arg(bin).arg("--config").arg(config);
    if let Some(path) = path {
        cmd.env("PATH", path);
    }
    cmd.stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .expect("nsenter (util-linux)")
}

/// Kills by pid what is left of a node after containerd: the processes in
/// the mount namespace that `holder` holds (shims) and in the cgroups under
/// `cgroup_top` (containers), then those cgroups.
pub fn kill_leftovers(holder: u32, cgroup_top: &str) {
    use rustix::process::{kill_process, Pid, Signal};
    let kill = |pid: i32| {
        if let Some(p) = Pid::from_raw(pid) {
            let _ = kill_process(p, Signal::KILL);
        }
    };
    let holder = holder as i32;
    let ns = std::fs::read_link(format!("/proc/{holder}/ns/mnt")).ok();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else { continue };
        if pid != holder && ns.is_some() && std::fs::read_link(entry.path().join("ns/mnt")).ok() == ns {
            kill(pid);
        }
    }
    let mut dirs = Vec::new();
    for h in std::fs::read_dir("/sys/fs/cgroup").into_iter().flatten().flatten() {
        collect_dirs(&h.path().join(cgroup_top), &mut dirs);
    }
    collect_dirs(&Path::new("/sys/fs/cgroup").join(cgroup_top), &mut dirs);
    for d in &dirs {
        // Best effort: a cgroup that is gone already has no process to kill.
        let Ok(procs) = std::fs::read_to_string(d.join("cgroup.procs")) else { continue };
        for pid in procs.lines() {
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

/// `dir` and every directory under it, deepest first.
pub fn collect_dirs(dir: &Path, out: &mut Vec<PathBuf>) {
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

/// Removes the pods `pods` a node's daemon still runs, through its CRI
/// (`cri`: method and request), for a node's drop: errors are ignored.
pub fn remove_pods(pods: Vec<String>, cri: impl Fn(&str, Value) -> Result<Value, String>) {
    for id in pods {
        let _ = cri("StopPodSandbox", json!({"pod_sandbox_id": id}));
        let _ = cri("RemovePodSandbox", json!({"pod_sandbox_id": id}));
    }
}

/// Ends a node's mount namespace: what is left in it and in its cgroups
/// under `cgroup_top` killed ([`kill_leftovers`]), then its holder killed
/// and reaped.
pub fn release_namespace(holder: &mut Child, cgroup_top: &str) {
    use rustix::process::{kill_process, Pid, Signal};
    kill_leftovers(holder.id(), cgroup_top);
    if let Some(pid) = Pid::from_raw(holder.id() as i32) {
        let _ = kill_process(pid, Signal::KILL);
    }
    let _ = holder.wait();
}

/// The last `n` lines of `text`, for a failing test's report.
pub fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

impl Drop for Node {
    fn drop(&mut self) {
        // A host config the wrapper refuses would fail every runc call.
        for way in self.ways() {
            let _ = std::fs::write(self.ns_path(way.config_file()), way.mode_line());
        }
        if self.daemon.is_some() {
            remove_pods(std::mem::take(&mut self.pods), |m, r| self.cri(m, r));
        }
        self.stop_daemon();
        self.stop_plugin();
        release_namespace(&mut self.holder, &self.cgroup_top);
        if std::thread::panicking() {
            // Already unwinding: a second panic here would abort the whole
            // test binary, so a log that cannot be read is said, not raised.
            let shown = |name: &str| {
                let path = self.dir.join(name);
                std::fs::read_to_string(&path)
                    .unwrap_or_else(|e| format!("(reading {}: {e})", path.display()))
            };
            let suite = self.way.suite();
            let log = tail(&shown("containerd.log"), 40);
            say(&format!("{suite} {}: containerd log (last 40 lines):\n{log}", self.case));
            if self.way == Executor::Nri {
                say(&format!("{suite} {}: plugin log:\n{}", self.case, shown("plugin.log")));
            }
        }
    }
}

// ------------------------------------------------------------- checking

impl Node {
    /// The mount tables that must not change: the real host's (pid 1), this
    /// test's, the node namespace's.
    pub fn mount_tables(&self) -> Vec<(String, Vec<MountInfo>)> {
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

/// A mount as one line: point, type, source, super options.
pub fn mount_line(m: &MountInfo) -> String {
    format!("{} {} {} {}", m.mount_point, m.fstype, m.source, m.super_options.join(","))
}

/// Checks that no table in `after` has a mount of ours or a mount at or
/// under one of `watched` (host paths) that `before` did not have, and that
/// the node's namespace (the last table, ours alone) has no mount of ours.
pub fn check_tables(
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

/// The mounts of ours on any of `tables` (as "file: point size"): there
/// must be none on the host's, this test's or the node's.
pub fn ours_on(tables: &[(String, Vec<MountInfo>)]) -> Vec<String> {
    tables
        .iter()
        .flat_map(|(file, t)| t.iter().filter(|m| m.source == OURS).map(move |m| (file, m)))
        .map(|(file, m)| format!("{file}: {} {}", m.mount_point, sz(m.size())))
        .collect()
}

/// What one case saw and which of its checks failed. The checks fail the
/// test only in [`Report::finish`]: a report dropped unfinished panics, so a
/// case that forgets to finish fails instead of passing unchecked.
#[must_use = "a report fails its test only in finish()"]
pub struct Report {
    /// `cri CASE` or `nri CASE`, and the way in, once one is set.
    label: String,
    case: String,
    failures: Vec<String>,
    finished: bool,
}

impl Report {
    pub fn new(node: &Node) -> Report {
        let case = format!("{} {}", node.way.suite(), node.case);
        Report { label: case.clone(), case, failures: Vec::new(), finished: false }
    }

    /// A report of `suite`'s `case` (for a case that runs one way only).
    pub fn of(suite: &str, case: &str) -> Report {
        let case = format!("{suite} {case}");
        Report { label: case.clone(), case, failures: Vec::new(), finished: false }
    }

    /// What follows is through `way`.
    pub fn way(&mut self, way: Executor) {
        self.label = format!("{} ({})", self.case, way.label());
    }

    pub fn seen(&self, what: &str, value: impl std::fmt::Display) {
        say(&format!("{}: {what}: {value}", self.label));
    }

    pub fn check(&mut self, ok: bool, what: impl Into<String>) {
        if !ok {
            let what = what.into();
            say(&format!("{}: FAILED: {what}", self.label));
            self.failures.push(format!("{}: {what}", self.label));
        }
    }

    /// A step that has to work for the rest to mean anything.
    /// The text a step gave. A failed step is a failure of the case
    /// already: its text is then empty, so that the checks that follow say
    /// what they miss and the case still runs to its teardown.
    pub fn text(&mut self, what: &str, r: Result<String, String>) -> String {
        self.step(what, r).unwrap_or_default() // failed: empty, and the case failed already
    }

    /// The text of the file at `path`. A file that cannot be read is a
    /// failure of the case, naming the path; the text is then empty (the
    /// case has failed, so a check that the text lacks something cannot pass
    /// it), and the case still runs to its teardown.
    pub fn read(&mut self, path: &Path) -> String {
        let read = std::fs::read_to_string(path).map_err(|e| format!("{e}"));
        self.text(&format!("reading {}", path.display()), read)
    }

    pub fn step<T>(&mut self, what: &str, r: Result<T, String>) -> Option<T> {
        match r {
            Ok(v) => Some(v),
            Err(e) => {
                self.check(false, format!("{what}: {e}"));
                None
            }
        }
    }

    /// Waits up to `timeout` for the plugin's log at `log` (its container's)
    /// to say it registered, and checks that it did.
    pub fn plugin_registered(&mut self, log: &Path, timeout: Duration) {
        let t0 = Instant::now();
        // No file: the container has written nothing.
        let text = wait_for_text(log, "nri: registered as", timeout)
            .unwrap_or_else(|| format!("(no log file {})", log.display()));
        let registered = text.contains("nri: registered as");
        self.seen("plugin container registered", format!("{registered} after {:?}", t0.elapsed()));
        self.check(registered, format!("the plugin's container did not register: {text}"));
    }

    /// Checks that the plugin copied binary `bin` (0755) and the config
    /// `config` (0644) into `hook_dir`; their paths there.
    pub fn hook_dir_filled(&mut self, hook_dir: &Path, bin: &Path, config: &str) -> (PathBuf, PathBuf) {
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &Path| std::fs::metadata(p).map(|m| m.permissions().mode() & 0o7777).unwrap_or(0);
        let (hb, hc) = (hook_dir.join("oci-tmpfs-hook"), hook_dir.join("config.toml"));
        self.seen("hook dir", format!("binary {:o}, config {:o}", mode(&hb), mode(&hc)));
        self.check(
            std::fs::read(&hb).ok() == std::fs::read(bin).ok() && mode(&hb) == 0o755,
            "the hook dir has not this binary, 0755",
        );
        self.check(
            std::fs::read_to_string(&hc).ok().as_deref() == Some(config) && mode(&hc) == 0o644,
            "the hook dir has not the ConfigMap's config, 0644",
        );
        (hb, hc)
    }

    /// Checks a container's `/tmp` (ours, `tmp` bytes, nosuid/nodev,
    /// writable) and `/dev/shm` (`shm` bytes, writable) from PROBE's output.
    pub fn served(&mut self, what: &str, probe: &str, tmp: u64, shm: u64) {
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
    pub fn untouched(&mut self, what: &str, mountinfo: &str, shm: u64) {
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

    /// Checks the executor in container `id`'s final `config.json`, for the
    /// node's way in: through the wrapper (`served`: our hook there in hook
    /// mode, and in spec mode on a runc before 1.1.8, which gets the temp
    /// targets through the hook: docs/design.md#runtimes), or NRI.
    pub fn executor(&mut self, node: &Node, id: &str, served: bool) {
        match node.way {
            Executor::Nri => self.plugin_executor(node, id, served),
            // A container we do not serve may still have the hook (it then does nothing).
            Executor::Spec | Executor::Hook if !served => {}
            Executor::Spec | Executor::Hook => {
                let Some(hooked) = self.step("the final config.json", node.runs_our_hook(id)) else { return };
                let want = node.way == Executor::Hook || runc_before_1_1_8(Runtime::Runc);
                self.seen("executor", format!("{}: our hook in config.json: {hooked}", node.way.label()));
                self.check(
                    hooked == want,
                    format!(
                        "{}, runc {:?}: our hook in config.json is {hooked}",
                        node.way.label(),
                        runtime_version(Runtime::Runc)
                    ),
                );
            }
        }
    }

    /// The NRI plugin's executor: never a mount of ours in `config.json`
    /// (the plugin writes no path-resolved mount), and our hook at
    /// createRuntime (`node.hook` with PATH in its environment) iff
    /// `hooked`, at no other stage.
    fn plugin_executor(&mut self, node: &Node, id: &str, hooked: bool) {
        let Some(config) = self.step("the final config.json", node.final_config(id)) else { return };
        let ours: Vec<&Value> = config["mounts"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|m| m["source"] == OURS || m["type"] == "tmpfs" && m["destination"] == "/tmp")
            .collect();
        self.check(ours.is_empty(), format!("{id}: mounts of ours in config.json: {ours:?}"));
        // No hooks member: no hook at any stage.
        let hooks = config["hooks"].as_object().into_iter().flatten();
        let path = node.hook.display().to_string();
        let mut at: Vec<String> = Vec::new();
        for (stage, list) in hooks {
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
    pub fn signal(&mut self, node: &Node, who: &str, readonly: bool) {
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

    /// Prints the case's verdict and fails the test with every failed check.
    pub fn finish(mut self) {
        self.finished = true;
        say(&format!(
            "{}: {}",
            self.case,
            if self.failures.is_empty() {
                "PASS".to_string()
            } else {
                format!("{} checks failed", self.failures.len())
            }
        ));
        assert!(self.failures.is_empty(), "{}:\n  {}", self.case, self.failures.join("\n  "));
    }
}

impl Drop for Report {
    /// An unfinished report would let its failed checks pass: that fails the
    /// test, unless it is failing already (a second panic would abort).
    fn drop(&mut self) {
        if !self.finished && !std::thread::panicking() {
            panic!("{}: the report was never finished: its checks were not asserted", self.case);
        }
    }
}
