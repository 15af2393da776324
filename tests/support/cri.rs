//! The CRI side of a node: the CRI client (tests/cri/cri.py, in the venv of
//! tests/env/venv.sh), the containerd binary under test and its config, the
//! busybox image, and what pods and containers are started with.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use serde_json::{json, Value};

use super::{ok, run_with_stdin, text, which, TempDir, GI, MI, TIMEOUT};

/// The CRI client's python: `$OCI_TMPFS_HOOK_CRI_PYTHON` when set (one that
/// can import `cri_api`), else the venv of tests/env/venv.sh (created once).
pub fn cri_python() -> &'static Path {
    static PY: OnceLock<PathBuf> = OnceLock::new();
    PY.get_or_init(|| {
        if let Some(py) = std::env::var_os("OCI_TMPFS_HOOK_CRI_PYTHON") {
            return PathBuf::from(py);
        }
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/env/venv.sh");
        PathBuf::from(ok(&mut Command::new(&script)).trim())
    })
}

/// The CRI client's command: `python3` with `$OCI_TMPFS_HOOK_CRI_PYTHONPATH`
/// as its `PYTHONPATH` when that is set (the sid environment has no venv
/// module: tests/env/nri.sh installs the client's wheels into a directory),
/// else [`cri_python`].
pub fn cri_command() -> Command {
    if let Some(dir) = std::env::var_os("OCI_TMPFS_HOOK_CRI_PYTHONPATH") {
        let mut c = Command::new("python3");
        c.env("PYTHONPATH", dir);
        return c;
    }
    Command::new(cri_python())
}

pub fn cri_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cri/cri.py")
}

/// ExecSync of `cmd` in container `id` through the CRI socket `sock`:
/// (exit code, stdout, stderr).
pub fn exec_sync(sock: &Path, id: &str, cmd: &[&str]) -> Result<(i64, String, String), String> {
    let r = cri_call(sock, "ExecSync", &json!({"container_id": id, "cmd": cmd, "timeout": 100}))?;
    let out = |k: &str| r[k].as_str().unwrap_or("").to_string();
    Ok((r["exit_code"].as_i64().unwrap_or(-1), out("stdout"), out("stderr")))
}

/// StopContainer + RemoveContainer of each of `containers`, then
/// StopPodSandbox + RemovePodSandbox of `pod`, through `sock`; `pods` (the
/// node's list of pods to remove on drop) forgets it.
pub fn teardown_pod(
    sock: &Path,
    pods: &mut Vec<String>,
    pod: &Pod,
    containers: &[&str],
) -> Result<(), String> {
    for id in containers {
        cri_call(sock, "StopContainer", &json!({"container_id": id, "timeout": 1}))?;
        cri_call(sock, "RemoveContainer", &json!({"container_id": id}))?;
    }
    cri_call(sock, "StopPodSandbox", &json!({"pod_sandbox_id": pod.id}))?;
    cri_call(sock, "RemovePodSandbox", &json!({"pod_sandbox_id": pod.id}))?;
    pods.retain(|p| *p != pod.id);
    Ok(())
}

/// One CRI call on containerd's socket `sock`: the response, or the gRPC
/// error as "METHOD: CODE: details" (never a panic: cleanups call it too).
pub fn cri_call(sock: &Path, method: &str, request: &Value) -> Result<Value, String> {
    let mut cmd = cri_command();
    cmd.arg(cri_script()).arg("--socket").arg(sock).args(["--timeout", "100", method]);
    let Some(out) = run_with_stdin(&mut cmd, serde_json::to_vec(request).unwrap(), TIMEOUT) else {
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

/// Waits up to 60 s for containerd (`daemon`, logging to `log`) to say on
/// `sock` that its CRI runtime is ready; panics with its log if it exits
/// or does not.
pub fn wait_cri_ready(daemon: &mut std::process::Child, sock: &Path, log: &Path) {
    // For the failure messages: a log that cannot be read says so in its place.
    let read = || match std::fs::read_to_string(log) {
        Ok(text) => text,
        Err(e) => format!("(reading {}: {e})", log.display()),
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        if let Ok(Some(status)) = daemon.try_wait() {
            panic!("containerd exited ({status}):\n{}", read());
        }
        if sock.exists() {
            if let Ok(status) = cri_call(sock, "Status", &json!({})) {
                // No conditions yet: not ready.
                let conditions = status["status"]["conditions"].as_array();
                if conditions
                    .is_some_and(|c| c.iter().any(|c| c["type"] == "RuntimeReady" && c["status"] == true))
                {
                    return;
                }
            }
        }
        assert!(std::time::Instant::now() < deadline, "containerd's CRI not ready in 60s:\n{}", read());
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

/// The `major:minor` of the top mount at `point` in a mountinfo text.
pub fn device_at(mountinfo: &str, point: &str) -> Option<String> {
    mountinfo
        .lines()
        .rev()
        .find(|l| l.split(' ').nth(4) == Some(point))
        .and_then(|l| l.split(' ').nth(2))
        .map(String::from)
}

// ------------------------------------------------------ containerd binary

/// The containerd under test: the one on `PATH`, and its version.
pub struct Containerd {
    pub bin: PathBuf,
    pub ctr: PathBuf,
    pub version: String,
    pub major: u32,
}

impl Containerd {
    /// Its (major, minor) version ("v2.3.4", "2.1.9+unknown", "1.6.20~ds1").
    pub fn major_minor(&self) -> (u32, u32) {
        super::bundle::major_minor(self.version.trim_start_matches('v'))
    }

    /// The one on `PATH`, or `$OCI_TMPFS_HOOK_NRI_CONTAINERD` (another
    /// build, e.g. a containerd 2.2 for the NRI validator's case).
    pub fn find() -> Containerd {
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

    /// The config version this containerd is given: its newest, as its
    /// `containerd config default` writes (2 on 1.x, 3 on 2.0-2.2, 4 from
    /// 2.3 on), so that `setup containerd` meets what a node has.
    pub fn config_version(&self) -> u32 {
        match self.major_minor() {
            (0 | 1, _) => 2,
            (2, 0..=2) => 3,
            _ => 4,
        }
    }

    /// The CNI binaries' setting: `bin_dirs` (a list) from 2.1 on, where
    /// `bin_dir` is deprecated (2.3 warns, 2.4 removes it); `bin_dir` before.
    fn cni_bin(&self, dir: &Path) -> String {
        if self.major_minor() >= (2, 1) {
            format!("bin_dirs = [{dir:?}]")
        } else {
            format!("bin_dir = {dir:?}")
        }
    }

    /// containerd's config before `setup containerd` adds the handler.
    pub fn base_config(&self, dir: &TempDir, state: &Path, sandbox_image: &str) -> String {
        let (root, sock) = (dir.join("root"), dir.join("c.sock"));
        let (cni_bin, cni_conf, opt) = (dir.join("cni/bin"), dir.join("cni/conf"), dir.join("opt"));
        let version = self.config_version();
        let mut s = format!("version = {version}\nroot = {root:?}\nstate = {state:?}\n\n");
        let ttrpc = format!("{}.ttrpc", sock.display());
        if version >= 4 {
            // Version 4 keeps the sockets in the server plugins' tables (its
            // `config default`); a top-level [grpc] is not read.
            let _ = write!(
                s,
                "[plugins]\n  [plugins.\"io.containerd.server.v1.grpc\"]\n    address = {sock:?}\n\
                 \x20 [plugins.\"io.containerd.server.v1.ttrpc\"]\n    address = {ttrpc:?}\n"
            );
        } else {
            let _ =
                write!(s, "[grpc]\n  address = {sock:?}\n\n[ttrpc]\n  address = {ttrpc:?}\n\n[plugins]\n");
        }
        if self.major >= 2 {
            let _ = write!(
                s,
                "  [plugins.\"io.containerd.cri.v1.images\".pinned_images]\n    sandbox = {sandbox_image:?}\n\
                 \x20 [plugins.\"io.containerd.cri.v1.runtime\"]\n    restrict_oom_score_adj = true\n\
                 \x20   [plugins.\"io.containerd.cri.v1.runtime\".cni]\n      {}\n      conf_dir = {cni_conf:?}\n\
                 \x20 [plugins.\"io.containerd.grpc.v1.cri\"]\n    stream_server_port = \"0\"\n",
                self.cni_bin(&cni_bin)
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

/// A busybox-static rootfs as an OCI image layout tarball named `reference`,
/// whose entry is `sleep` (so it also serves as the pause image).
pub fn build_image(dir: &Path, rootfs: &Path, reference: &str) -> PathBuf {
    build_image_with(dir, rootfs, reference, &["/bin/sleep", "2147483647"], "image")
}

/// An OCI image layout tarball of `rootfs` named `reference` with
/// `entrypoint`, built in `dir/<name>*`.
pub fn build_image_with(
    dir: &Path,
    rootfs: &Path,
    reference: &str,
    entrypoint: &[&str],
    name: &str,
) -> PathBuf {
    let dir = &dir.join(name);
    std::fs::create_dir_all(dir).unwrap();
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
    // Owners as the rootfs has them (root's, but where a case gave a home
    // to its user: docs/design.md#home-rule compares them).
    let layer_tar = dir.join("layer.tar");
    ok(Command::new("tar").args(["--numeric-owner", "-C"]).arg(rootfs).arg("-cf").arg(&layer_tar).arg("."));
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
    let tar = dir.with_extension("tar");
    ok(Command::new("tar").arg("-C").arg(&layout).arg("-cf").arg(&tar).arg("."));
    tar
}

// ------------------------------------------------------------- pods

/// What a pod is started with.
pub struct PodOpts<'a> {
    /// The runtime handler; `None`: the one of the node's way in
    /// (`oci-tmpfs`, its hook-mode twin, or containerd's default for NRI).
    pub handler: Option<&'a str>,
    pub annotations: &'a [(&'a str, &'a str)],
    pub host_ipc: bool,
    /// The node's pid namespace (the plugin's pod: hostPID).
    pub host_pid: bool,
    /// The pod's summed memory limit (sent as the sandbox's resources).
    pub memory: u64,
    /// `hostUsers: false`: a user namespace for the pod, its ids 0 to 65535
    /// mapped from this host id on (as kubelet sends it, uids and gids
    /// alike), on the pod network, which the node must have
    /// ([`super::pods::NodeOpts::pod_network`]): kubelet refuses
    /// `hostNetwork` with it, and containerd 2.1.9 pins the namespace through
    /// the pod's netns ("failed to pin user namespace: failed to open
    /// netns()" on the host's network).
    pub userns: Option<u32>,
}

impl Default for PodOpts<'_> {
    fn default() -> Self {
        PodOpts {
            handler: None,
            annotations: &[],
            host_ipc: false,
            host_pid: false,
            memory: GI,
            userns: None,
        }
    }
}

/// The NRI plugin's CRI container config as deploy/kubernetes/daemonset.yaml
/// asks for it, from image `reference`: its args (the socket in
/// `/var/run/nri`, the ConfigMap's config, `--hook-dir HOOK_DIR
/// --hook-dir-mount /host/opt/oci-tmpfs-hook`), hostPath `nri_dir` (the NRI
/// socket's dir) and `hook_dir`, the ConfigMap dir `config_dir` read-only,
/// `tmp` at `/tmp`; uid 0, every capability dropped, seccomp
/// RuntimeDefault, a read-only root, 64 MiB.
pub fn nri_plugin_container(
    reference: &str,
    nri_dir: &Path,
    hook_dir: &Path,
    config_dir: &Path,
    tmp: &Path,
) -> Value {
    json!({
        "metadata": {"name": "nri-plugin", "attempt": 0},
        "image": {"image": reference, "user_specified_image": reference},
        "args": ["nri", "--socket", "/var/run/nri/nri.sock", "--config", "/etc/oci-tmpfs-hook/config.toml",
                 "--hook-dir", hook_dir, "--hook-dir-mount", "/host/opt/oci-tmpfs-hook"],
        "mounts": [
            {"container_path": "/var/run/nri", "host_path": nri_dir},
            {"container_path": "/host/opt/oci-tmpfs-hook", "host_path": hook_dir},
            {"container_path": "/etc/oci-tmpfs-hook", "host_path": config_dir, "readonly": true},
            {"container_path": "/tmp", "host_path": tmp},
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

/// A volume (kubelet's hostPath or emptyDir): CRI's `Mount`. `propagation`
/// is `PROPAGATION_PRIVATE` or `PROPAGATION_BIDIRECTIONAL` (the host path
/// must then be a shared mount).
pub fn vol(container_path: &str, host_path: &Path, propagation: &str) -> Value {
    json!({"container_path": container_path, "host_path": host_path, "propagation": propagation})
}

/// What a container is created with.
pub struct CtrOpts<'a> {
    pub name: &'a str,
    pub readonly: bool,
    pub memory: Option<u64>,
    pub env: &'a [(&'a str, &'a str)],
    /// The image reference; the node's busybox image when `None`.
    pub image: Option<&'a str>,
    /// CRI `Mount`s ([`vol`]).
    pub mounts: &'a [Value],
    /// `run_as_user`; the image's user (root here) when `None`.
    pub user: Option<u32>,
}

impl<'a> CtrOpts<'a> {
    /// A read-only container with a memory limit.
    pub fn ro(name: &'a str, memory: u64) -> CtrOpts<'a> {
        CtrOpts { name, readonly: true, memory: Some(memory), env: &[], image: None, mounts: &[], user: None }
    }
}

/// A pod sandbox: its id and the config it was run with (kubelet sends that
/// config again with every CreateContainer).
pub struct Pod {
    pub id: String,
    pub config: Value,
    pub ipc: &'static str,
}
