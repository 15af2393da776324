//! A CRI-O node for the CRI-O suite (tests/runtimes/crio.rs): the CRI-O
//! that tests/env/crio.sh builds (`$OCI_TMPFS_HOOK_CRIO`, with its conmon
//! and pinns beside it), started in a private mount namespace held by a
//! `sleep` ([`super::pods::hold_namespace`]: its own `/etc`, so the host
//! config at `/etc/oci-tmpfs-hook/` is the test's, and its own `/run`), on
//! a config of the test's own: storage under `/var/lib/crio-t-*` and
//! `/run/crio-t-*` (vfs), cgroupfs, runc and crun as runtime handlers, our
//! hook in a hooks dir of its own as `setup crio` writes it, NRI on its own
//! socket, no CNI (host-network pods). The busybox image is put into its
//! storage with Podman (the same containers/storage library), before CRI-O
//! starts, and is the pause image too; [`CrioNode::import`] puts another
//! root in the same way, also while CRI-O runs. CRI calls go through the CRI client
//! (tests/support/cri.rs), the requests as kubelet sends them
//! ([`super::pods::container_request`]). Not here: CNI, the wrapper (CRI-O
//! runs runtimes itself, not through a RuntimeClass binary of ours).
//!
//! [`CrioOpts::host`] makes the namespace a CRI-O host instead, for what a
//! node's admin runs (install.sh, `setup`, `doctor`, the node installer):
//! the config at CRI-O's default paths (`/etc/crio/crio.conf` and
//! `crio.conf.d` in the private `/etc`), no `hooks_dir` (CRI-O's default
//! `/usr/share/containers/oci/hooks.d`), private tmpfs at `/usr/local`,
//! `/var/lib` (CRI-O's storage too) and `/usr/share/containers` (sid's
//! files copied in), no containerd config,
//! `/` a shared mount (a hostPath `/` mounted HostToContainer). More images
//! go in with [`CrioNode::import`] (the node image).

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::{json, Value};

use super::cri::*;
use super::pods::{container_request, hold_namespace, release_namespace, remove_pods, tail, Report};
use super::*;

/// The CRI-O build under test: `$OCI_TMPFS_HOOK_CRIO`, the `crio` binary
/// tests/env/crio.sh built (`conmon` and `pinns` beside it). tests/run.sh
/// sets it; a run without it fails (the suite never skips).
pub fn crio_bin() -> PathBuf {
    let bin = std::env::var_os("OCI_TMPFS_HOOK_CRIO").map(PathBuf::from).expect(
        "OCI_TMPFS_HOOK_CRIO is not set: run the CRI-O suite with `tests/run.sh crio` \
         (it builds CRI-O with tests/env/crio.sh and runs the suite in the sid environment)",
    );
    assert!(bin.is_file(), "OCI_TMPFS_HOOK_CRIO={}: no such file", bin.display());
    bin
}

static NODES: AtomicUsize = AtomicUsize::new(0);

/// CRI-O's default hooks dir, the one a host-like node's CRI-O uses.
pub const DEFAULT_HOOKS_DIR: &str = "/usr/share/containers/oci/hooks.d";

/// How a node is started.
#[derive(Default)]
pub struct CrioOpts<'a> {
    /// Our hook in the node's own hooks dir, by `setup crio --hooks-dir`.
    pub hooked: bool,
    /// A file of CRI-O's `crio.conf.d` (`[crio.runtime]\nread_only = true`, say).
    pub drop_in: &'a str,
    /// A CRI-O host (see the module doc): nothing registered; the hooks dir
    /// is CRI-O's default.
    pub host: bool,
}

/// What makes the node's namespace a CRI-O host: the private dirs a node's
/// installer writes to (`/usr/local`, CRI-O's default hooks dir under
/// `/usr/share/containers`, with copies of sid's files there, `/var/lib`
/// for its state file, and so CRI-O's storage too, the tests' dirs under
/// [`super::fs::CLOSED_BASE`] moved back in), CRI-O's
/// `/etc/crio`, no containerd config and no host config of ours (whiteouts
/// in the private `/etc`), `/` shared.
fn host_namespace_script(dir: &Path) -> String {
    format!(
        "cp -a /usr/share/containers {usc}; mount -t tmpfs -o mode=755 crion-usc /usr/share/containers; \
         cp -a {usc}/. /usr/share/containers/; mount -t tmpfs -o mode=755 crion-local /usr/local; \
         mkdir /usr/local/bin /usr/local/sbin; mkdir /run/keep; mount --rbind {closed} /run/keep; \
         mount -t tmpfs -o mode=755 crion-var-lib /var/lib; mkdir -p {closed}; mount --move /run/keep {closed}; \
         mkdir -p /etc/crio/crio.conf.d; rm -f /etc/containerd/config.toml; rmdir /etc/oci-tmpfs-hook; \
         mount --make-rshared /;",
        usc = dir.join("usr-share-containers").display(),
        closed = super::fs::CLOSED_BASE,
    )
}

/// One CRI-O in a private mount namespace, with the busybox image.
pub struct CrioNode {
    /// The test's files: the config, the hooks dir, logs, the image tarball.
    pub dir: TempDir,
    /// `crio-t-PID-N`: the names of its storage and run dirs.
    pub name: String,
    /// Holds the mount namespace: `sleep`, started by `unshare`.
    pub holder: Child,
    pub daemon: Option<Child>,
    /// The NRI plugin, when the test started it.
    pub plugin: Option<Child>,
    pub bin: PathBuf,
    /// `/var/lib/crio-t-*`: its storage root.
    pub root: PathBuf,
    /// `/run/crio-t-*` in the node's namespace: run root, sockets, runtimes' state.
    pub run: PathBuf,
    /// The hooks dir its config names, where `setup crio` writes our hook.
    pub hooks_dir: PathBuf,
    /// The CRI socket, as this process reaches it (through the holder's root).
    pub sock: PathBuf,
    pub image: String,
    pub cgroup_top: String,
    pub pods: Vec<String>,
    pub case: String,
    pub version: String,
    /// A CRI-O host ([`CrioOpts::host`]).
    pub host: bool,
}

impl CrioNode {
    /// A node with our hook registered by `setup crio` in its hooks dir.
    pub fn start(case: &str) -> CrioNode {
        CrioNode::start_with(case, true)
    }

    /// A node whose hooks dir has our hook (`setup crio`) when `hooked`,
    /// else nothing (a node served by the NRI plugin).
    pub fn start_with(case: &str, hooked: bool) -> CrioNode {
        CrioNode::start_opts(case, &CrioOpts { hooked, ..CrioOpts::default() })
    }

    /// [`CrioNode::start_with`], with `drop_in` as a file of CRI-O's
    /// `crio.conf.d` (`[crio.runtime]\nread_only = true`, say).
    pub fn start_configured(case: &str, hooked: bool, drop_in: &str) -> CrioNode {
        CrioNode::start_opts(case, &CrioOpts { hooked, drop_in, host: false })
    }

    /// A CRI-O host with nothing of ours ([`CrioOpts::host`]).
    pub fn start_host(case: &str) -> CrioNode {
        CrioNode::start_opts(case, &CrioOpts { host: true, ..CrioOpts::default() })
    }

    /// A node started as `opts` says.
    pub fn start_opts(case: &str, opts: &CrioOpts) -> CrioNode {
        require_root();
        assert!(!(opts.host && opts.hooked), "a host-like node starts with nothing of ours");
        let bin = crio_bin();
        let version = ok(Command::new(&bin).arg("--version"));
        let version = version
            .lines()
            .find_map(|l| l.strip_prefix("crio version "))
            .unwrap_or_else(|| panic!("crio --version: {version}"))
            .trim()
            .to_string();
        let dir = TempDir::closed("crio");
        let n = NODES.fetch_add(1, Ordering::Relaxed);
        let name = format!("crio-t-{}-{n}", std::process::id());
        let holder =
            hold_namespace(&dir, &if opts.host { host_namespace_script(&dir) } else { String::new() });
        let root = PathBuf::from(format!("/var/lib/{name}"));
        let run = PathBuf::from(format!("/run/{name}"));
        let sock = PathBuf::from(format!("/proc/{}/root{}/crio.sock", holder.id(), run.display()));
        let mut node = CrioNode {
            hooks_dir: if opts.host { PathBuf::from(DEFAULT_HOOKS_DIR) } else { dir.join("hooks.d") },
            dir,
            name,
            holder,
            daemon: None,
            plugin: None,
            bin,
            root,
            run,
            sock,
            image: "localhost/crio-busybox:latest".to_string(),
            cgroup_top: format!("crio-{}", unique("cg")),
            pods: Vec::new(),
            case: case.to_string(),
            version,
            host: opts.host,
        };
        for d in ["hooks.d", "cni/conf", "cni/bin", "nri/plugins", "nri/conf.d", "crio.conf.d", "logs"] {
            std::fs::create_dir_all(node.dir.join(d)).unwrap();
        }
        if node.host {
            node.ns(Command::new("mkdir").arg("-p").arg(&node.root));
        } else {
            std::fs::create_dir_all(&node.root).unwrap();
        }
        node.ns(Command::new("mkdir").arg("-p").arg(&node.run));
        if opts.hooked {
            node.register_hook();
        }
        node.import_image();
        std::fs::write(node.config_file(), node.config()).unwrap();
        if !opts.drop_in.is_empty() {
            std::fs::write(node.config_dir().join("50-test.conf"), opts.drop_in).unwrap();
        }
        std::fs::write(node.dir.join("policy.json"), r#"{"default":[{"type":"insecureAcceptAnything"}]}"#)
            .unwrap();
        node.start_daemon();
        say(&format!(
            "crio {case}: CRI-O {} ({}), {}, {}",
            node.version,
            node.bin.display(),
            ok(Command::new("runc").arg("--version")).lines().next().unwrap_or("runc ?"),
            ok(Command::new("crun").arg("--version")).lines().next().unwrap_or("crun ?"),
        ));
        node
    }

    /// Runs `cmd` in the node's mount namespace; its stdout.
    pub fn ns(&self, cmd: &mut Command) -> String {
        ok(&mut self.in_ns(cmd))
    }

    /// `cmd` (program and arguments) as a command run in the node's mount namespace.
    pub fn in_ns(&self, cmd: &Command) -> Command {
        let mut c = Command::new("nsenter");
        c.arg(format!("--mount=/proc/{}/ns/mnt", self.holder.id())).arg("--").arg(cmd.get_program());
        c.args(cmd.get_args());
        c
    }

    /// `path` of the node's namespace, as this process reaches it (through
    /// the holder's root).
    pub fn ns_path(&self, path: impl AsRef<Path>) -> PathBuf {
        let path = path.as_ref();
        PathBuf::from(format!("/proc/{}/root", self.holder.id())).join(path.strip_prefix("/").unwrap_or(path))
    }

    /// CRI-O's main config file, as this process reaches it: the test's
    /// own, or `/etc/crio/crio.conf` of a host-like node.
    fn config_file(&self) -> PathBuf {
        if self.host {
            self.ns_path("/etc/crio/crio.conf")
        } else {
            self.dir.join("crio.conf")
        }
    }

    /// CRI-O's drop-in dir, as this process reaches it.
    fn config_dir(&self) -> PathBuf {
        if self.host {
            self.ns_path("/etc/crio/crio.conf.d")
        } else {
            self.dir.join("crio.conf.d")
        }
    }

    /// The conmon and pinns built beside crio.
    fn beside(&self, name: &str) -> PathBuf {
        self.bin.with_file_name(name)
    }

    /// Our hook as a platform engineer registers it: `setup crio` with the
    /// hooks dir this CRI-O's config names.
    fn register_hook(&self) {
        let mut setup = Command::new(hook_bin());
        setup.args(["setup", "crio", "--hooks-dir"]).arg(&self.hooks_dir);
        setup.arg("--hook-path").arg(hook_bin().canonicalize().expect("the hook's binary"));
        ok(&mut setup);
    }

    /// The busybox rootfs as an image in CRI-O's storage, before CRI-O
    /// starts (entry `sleep`, so it serves as the pause image).
    fn import_image(&self) {
        let rootfs = Bundle::new("crio-rootfs");
        self.import(&rootfs.rootfs(), &self.image, r#"["/bin/sleep", "2147483647"]"#);
    }

    /// The tree `rootfs` as image `reference` in CRI-O's storage (`podman
    /// import`, `PATH=/bin`), its entrypoint `entrypoint` (a JSON array).
    /// CRI-O finds an image imported while it runs (the same storage).
    pub fn import(&self, rootfs: &Path, reference: &str, entrypoint: &str) {
        let tar = self.dir.join(format!("{}.tar", unique("image")));
        ok(Command::new("tar").args(["--numeric-owner", "-C"]).arg(rootfs).arg("-cf").arg(&tar).arg("."));
        let mut podman = Command::new("podman");
        podman
            .arg("--root")
            .arg(self.root.join("storage"))
            .arg("--runroot")
            .arg(self.run.join("storage"))
            .args(["--storage-driver", "vfs", "--cgroup-manager", "cgroupfs", "--events-backend", "none"])
            .arg("--tmpdir")
            .arg(self.run.join("podman"))
            .args(["import", "--change", "ENV PATH=/bin", "--change"])
            .arg(format!("ENTRYPOINT {entrypoint}"))
            .arg(&tar)
            .arg(reference);
        self.ns(&mut podman);
        let _ = std::fs::remove_file(&tar);
    }

    /// CRI-O's config: every path it writes is this node's.
    fn config(&self) -> String {
        let (root, run, dir) = (&self.root, &self.run, &*self.dir);
        let conmon = self.beside("conmon");
        let runtime = |name: &str| {
            format!(
                "[crio.runtime.runtimes.{name}]\nruntime_path = {:?}\nruntime_type = \"oci\"\n\
                 runtime_root = {:?}\nmonitor_path = {conmon:?}\nmonitor_cgroup = \"pod\"\n\
                 allowed_annotations = [\"shm-size.crio.io\"]\n",
                which(name),
                run.join(name),
            )
        };
        format!(
            "[crio]\nroot = {:?}\nrunroot = {:?}\nstorage_driver = \"vfs\"\nlog_dir = {:?}\n\
             version_file = {:?}\nversion_file_persist = {:?}\nclean_shutdown_file = {:?}\n\n\
             [crio.api]\nlisten = {:?}\nstream_address = \"127.0.0.1\"\nstream_port = \"0\"\n\n\
             [crio.runtime]\ndefault_runtime = \"runc\"\ncgroup_manager = \"cgroupfs\"\n{}\
             namespaces_dir = {:?}\npinns_path = {:?}\ncontainer_exits_dir = {:?}\n\
             container_attach_socket_dir = {:?}\nirqbalance_config_file = {:?}\n\
             irqbalance_config_restore_file = \"\"\n\n{}\n{}\n\
             [crio.image]\npause_image = {:?}\nsignature_policy = {:?}\n\n\
             [crio.network]\nnetwork_dir = {:?}\nplugin_dirs = [{:?}]\n\n\
             [crio.nri]\nenable_nri = true\nnri_listen = {:?}\nnri_plugin_dir = {:?}\nnri_plugin_config_dir = {:?}\n",
            root.join("storage"),
            run.join("storage"),
            dir.join("logs"),
            run.join("version"),
            root.join("version"),
            root.join("clean.shutdown"),
            run.join("crio.sock"),
            // A host-like node's CRI-O uses its default hooks dir.
            if self.host { String::new() } else { format!("hooks_dir = [{:?}]\n", self.hooks_dir) },
            run.join("ns"),
            self.beside("pinns"),
            run.join("exits"),
            run.join("attach"),
            dir.join("irqbalance"),
            runtime("runc"),
            runtime("crun"),
            self.image,
            dir.join("policy.json"),
            dir.join("cni/conf"),
            dir.join("cni/bin"),
            run.join("nri.sock"),
            dir.join("nri/plugins"),
            dir.join("nri/conf.d"),
        )
    }

    /// Starts CRI-O in the node's namespace and waits for its CRI.
    pub fn start_daemon(&mut self) {
        let log = File::options().create(true).append(true).open(self.dir.join("crio.log")).unwrap();
        let mut crio = Command::new(&self.bin);
        if !self.host {
            // A host-like node's CRI-O reads its default paths.
            crio.arg("--config").arg(self.dir.join("crio.conf"));
            crio.arg("--config-dir").arg(self.dir.join("crio.conf.d"));
        }
        let child = self
            .in_ns(crio.args(["--log-level", "debug"]))
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("nsenter (util-linux)");
        wait_cri_ready(self.daemon.insert(child), &self.sock, &self.dir.join("crio.log"));
    }

    /// One CRI call: the response, or the gRPC error as "CODE: details".
    pub fn cri(&self, method: &str, request: Value) -> Result<Value, String> {
        cri_call(&self.sock, method, &request)
    }

    /// RunPodSandbox as kubelet sends it for a host-network pod named
    /// `crio-NAME`, on runtime handler `handler` (`runc`, `crun`).
    pub fn run_pod(&mut self, name: &str, handler: &str, opts: &PodOpts) -> Result<Pod, String> {
        let name = format!("crio-{name}-{handler}");
        let uid = unique("uid");
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
                "security_context": {"namespace_options": {"network": "NODE", "pid": "CONTAINER", "ipc": "POD"}},
                "resources": {"memory_limit_in_bytes": opts.memory, "cpu_period": 100000, "cpu_shares": 2},
            },
        });
        let r = self.cri("RunPodSandbox", json!({"config": config, "runtime_handler": handler}))?;
        let id = r["pod_sandbox_id"].as_str().expect("pod_sandbox_id").to_string();
        self.pods.push(id.clone());
        Ok(Pod { id, config, ipc: "POD" })
    }

    /// CreateContainer + StartContainer; the container id.
    pub fn start_container(&self, pod: &Pod, c: &CtrOpts) -> Result<String, String> {
        self.start_config(pod, container_request(&self.image, pod, c)["config"].clone())
    }

    /// CreateContainer of CRI container config `config` in `pod`, then
    /// StartContainer; the container id.
    pub fn start_config(&self, pod: &Pod, config: Value) -> Result<String, String> {
        // kubelet makes the container's log dir (conmon only opens the file).
        std::fs::create_dir_all(self.log_path(pod, &config).parent().unwrap()).unwrap();
        let request = json!({"pod_sandbox_id": pod.id, "config": config, "sandbox_config": pod.config});
        let r = self.cri("CreateContainer", request)?;
        let id = r["container_id"].as_str().expect("container_id").to_string();
        self.cri("StartContainer", json!({"container_id": id}))?;
        Ok(id)
    }

    /// The log file of the container of CRI config `config` in `pod`.
    pub fn log_path(&self, pod: &Pod, config: &Value) -> PathBuf {
        let logs = pod.config["log_directory"].as_str().expect("log_directory");
        PathBuf::from(logs).join(config["log_path"].as_str().expect("log_path"))
    }

    /// Waits up to `timeout` for container `id` to exit; its exit code.
    pub fn wait_exited(&self, id: &str, timeout: Duration) -> Result<i64, String> {
        let t0 = std::time::Instant::now();
        loop {
            let r = self.cri("ContainerStatus", json!({"container_id": id}))?;
            if r["status"]["state"] == "CONTAINER_EXITED" {
                return r["status"]["exit_code"].as_i64().ok_or_else(|| format!("no exit code: {r}"));
            }
            if t0.elapsed() > timeout {
                return Err(format!("container {id} still {} after {timeout:?}", r["status"]["state"]));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// ExecSync: (exit code, stdout, stderr).
    pub fn exec(&self, id: &str, cmd: &[&str]) -> Result<(i64, String, String), String> {
        exec_sync(&self.sock, id, cmd)
    }

    /// What a container sees: PROBE's output.
    pub fn probe(&self, id: &str) -> Result<String, String> {
        self.exec(id, &["sh", "-c", super::pods::PROBE]).map(|(_, out, _)| out)
    }

    /// StopContainer + RemoveContainer, then StopPodSandbox + RemovePodSandbox.
    pub fn teardown(&mut self, pod: &Pod, containers: &[&str]) -> Result<(), String> {
        teardown_pod(&self.sock, &mut self.pods, pod, containers)
    }

    /// The final `config.json` of container `id`, as CRI-O handed it to the
    /// runtime (in its run root, in the node's namespace).
    pub fn final_config(&self, id: &str) -> Result<Value, String> {
        let path = self.ns_path(self.run.join(format!("storage/vfs-containers/{id}/userdata/config.json")));
        let text = std::fs::read(&path).map_err(|e| format!("reading {}: {e}", path.display()))?;
        serde_json::from_slice(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Checks in `r` that container `id`'s final `config.json` runs the hook
    /// binary at `hook` at createRuntime when `runs`, else at no stage.
    pub fn check_hook_stages(&self, r: &mut Report, what: &str, id: &str, hook: &Path, runs: bool) {
        let Some(at) = r.step(&format!("{what}: the final config.json"), self.hook_stages(id, hook)) else {
            return;
        };
        let want: &[&str] = if runs { &["createRuntime"] } else { &[] };
        r.seen(what, format!("{} in config.json at {at:?}", hook.display()));
        r.check(at == want, format!("{what}: {} at {at:?} in config.json, want {want:?}", hook.display()));
    }

    /// The stages at which container `id`'s final `config.json` runs the
    /// hook binary at `path` (as CRI-O's namespace names it).
    pub fn hook_stages(&self, id: &str, path: &Path) -> Result<Vec<String>, String> {
        let config = self.final_config(id)?;
        let mut at = Vec::new();
        for (stage, list) in config["hooks"].as_object().into_iter().flatten() {
            let hooks = list.as_array().into_iter().flatten();
            at.extend(hooks.filter(|h| h["path"] == path.to_str().unwrap()).map(|_| stage.clone()));
        }
        Ok(at)
    }

    /// Starts the NRI plugin (the tested binary) in the node's namespace on
    /// CRI-O's NRI socket, and waits up to 10 s until it has registered.
    pub fn start_plugin(&mut self) {
        let log = File::options().create(true).append(true).open(self.dir.join("plugin.log")).unwrap();
        let mut plugin = Command::new(hook_bin().canonicalize().expect("the hook's binary"));
        plugin.arg("nri").arg("--socket").arg(self.run.join("nri.sock"));
        let child = self
            .in_ns(&plugin)
            .env("OCI_TMPFS_HOOK_LOG", "debug")
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("nsenter (util-linux)");
        self.plugin = Some(child);
        let t0 = std::time::Instant::now();
        while !self.read("plugin.log").contains("nri: registered as") {
            if let Some(Ok(Some(status))) = self.plugin.as_mut().map(Child::try_wait) {
                panic!("the plugin exited ({status}):\n{}", self.read("plugin.log"));
            }
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "the plugin did not register with CRI-O within 10s:\n{}",
                self.read("plugin.log")
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The text of `name` in the node's directory (a log), or why not.
    pub fn read(&self, name: &str) -> String {
        let path = self.dir.join(name);
        std::fs::read_to_string(&path).unwrap_or_else(|e| format!("(reading {}: {e})", path.display()))
    }
}

impl Drop for CrioNode {
    fn drop(&mut self) {
        if self.daemon.is_some() {
            remove_pods(std::mem::take(&mut self.pods), |m, r| self.cri(m, r));
        }
        if let Some(mut child) = self.plugin.take() {
            stop(&mut child, Duration::from_secs(10));
        }
        if let Some(mut child) = self.daemon.take() {
            stop(&mut child, Duration::from_secs(30));
        }
        release_namespace(&mut self.holder, &self.cgroup_top);
        if std::thread::panicking() {
            let log = tail(&self.read("crio.log"), 60);
            say(&format!("crio {}: crio log (last 60 lines):\n{log}", self.case));
            if self.dir.join("plugin.log").exists() {
                say(&format!("crio {}: plugin log:\n{}", self.case, self.read("plugin.log")));
            }
        }
        // Only its own dirs: the run root went with the namespace's /run.
        let _ = std::fs::remove_dir_all(&self.root);
    }
}
