//! Private engines: the one dockerd launcher of the suites (its own paths,
//! mount namespace and `daemon.json`, stopped by pid on drop) and a Podman
//! on paths of its own. What the suites do with them (the wrapper's
//! registration, the probes) stays with the suites; the node suite's image
//! build is the one exception.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::kube::static_binary;
use super::*;

/// `podman` with its storage, run root, temp dir and hooks dir
/// (`dir/hooks.d`) all under `dir`, `runtime` as its OCI runtime, cgroupfs
/// and file events: a Podman of the test's own, beside the host's.
pub fn private_podman(dir: &Path, runtime: Runtime) -> Command {
    let mut c = Command::new("podman");
    c.arg("--root")
        .arg(dir.join("storage"))
        .arg("--runroot")
        .arg(dir.join("rr"))
        .arg("--tmpdir")
        .arg(dir.join("tmp"))
        .arg("--hooks-dir")
        .arg(dir.join("hooks.d"))
        .args(["--runtime", runtime.bin(), "--cgroup-manager=cgroupfs", "--events-backend=file"]);
    c
}

/// The flags of a private `dockerd` under `dir` (its data and exec roots,
/// pidfile and `dir/docker.sock`), configured by `daemon_json`, with no
/// network set-up.
pub fn dockerd_flags(dir: &Path, daemon_json: &Path) -> Vec<std::ffi::OsString> {
    let mut flags: Vec<std::ffi::OsString> =
        ["--iptables=false", "--ip6tables=false", "--bridge=none"].map(Into::into).to_vec();
    for (flag, path) in [
        ("--data-root", dir.join("data")),
        ("--exec-root", dir.join("exec")),
        ("--pidfile", dir.join("docker.pid")),
        ("--config-file", daemon_json.to_path_buf()),
    ] {
        flags.push(flag.into());
        flags.push(path.into());
    }
    flags.push("-H".into());
    flags.push(format!("unix://{}", dir.join("docker.sock").display()).into());
    flags
}

/// A private dockerd, the one launcher of the suites: its data, exec
/// root, pidfile and socket under `dir`, configured by a `daemon.json` of the
/// caller's, started in a mount namespace of its own (`unshare --mount
/// --propagation private`), ready once `CLI version` answers, and stopped by
/// pid on drop (SIGTERM, so that it stops the containerd it started).
pub struct Dockerd {
    child: Child,
    sock: PathBuf,
    /// The docker client the suite drives it with.
    cli: PathBuf,
    /// Where it keeps everything (and, for `dir_owned`, removed after it stops).
    pub dir: PathBuf,
    dir_owned: Option<TempDir>,
    stopped: bool,
}

/// What a caller adds to the plain private dockerd.
#[derive(Default)]
pub struct DockerdOptions<'a> {
    /// The docker client (`docker` on `PATH` unless named).
    pub cli: Option<&'a str>,
    /// Variables set for dockerd (and what it starts: containerd, runtimes).
    pub env: Vec<(&'a str, PathBuf)>,
    /// Mount a tmpfs of this many MiB on the namespace's `/dev/shm` first.
    pub shm_mib: Option<u64>,
}

impl Dockerd {
    /// A dockerd under a new `TempDir`, with `{}` as its `daemon.json`.
    pub fn start() -> Dockerd {
        let dir = TempDir::new("node-dockerd");
        let daemon_json = dir.join("daemon.json");
        std::fs::write(&daemon_json, "{}").unwrap();
        Dockerd::launch_owned(dir, &daemon_json, DockerdOptions::default())
    }

    /// [`Dockerd::launch`] under `dir`, which is removed after dockerd stops.
    pub fn launch_owned(dir: TempDir, daemon_json: &Path, opts: DockerdOptions) -> Dockerd {
        let mut d = Dockerd::launch(&dir, daemon_json, opts);
        d.dir_owned = Some(dir);
        d
    }

    /// A dockerd under `dir`, configured by `daemon_json`, started and
    /// answering (it panics with dockerd's log when it exits or does not
    /// answer within 60 s).
    pub fn launch(dir: &Path, daemon_json: &Path, opts: DockerdOptions) -> Dockerd {
        require_root();
        let sock = dir.join("docker.sock");
        let log = File::create(dir.join("dockerd.log")).unwrap();
        let mut cmd = Command::new("unshare");
        cmd.args(["--mount", "--propagation", "private", "--"]);
        if let Some(mib) = opts.shm_mib {
            let script =
                format!("mount -t tmpfs -o size={mib}m,nosuid,nodev,noexec shm /dev/shm && exec \"$@\"");
            cmd.args(["sh", "-c", &script, "sh"]);
        }
        for (k, v) in &opts.env {
            cmd.env(k, v);
        }
        let child = cmd
            .arg("dockerd")
            .args(dockerd_flags(dir, daemon_json))
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("starting dockerd (apt-get install docker.io)");
        let cli = PathBuf::from(opts.cli.unwrap_or("docker"));
        let mut d = Dockerd { child, sock, cli, dir: dir.to_path_buf(), dir_owned: None, stopped: false };
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok(Some(status)) = d.child.try_wait() {
                panic!("dockerd exited ({status}):\n{}", d.log());
            }
            if d.sock.exists() && output(d.docker().arg("version")).status.success() {
                return d;
            }
            assert!(Instant::now() < deadline, "dockerd did not answer within 60s:\n{}", d.log());
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Stops it (SIGTERM, SIGKILL after 30 s), once: what a caller cleans up
    /// after it goes first in the caller's `Drop`.
    pub fn stop(&mut self) {
        if !std::mem::replace(&mut self.stopped, true) {
            stop(&mut self.child, Duration::from_secs(30));
        }
    }

    /// dockerd's own log.
    pub fn log(&self) -> String {
        read_text(self.dir.join("dockerd.log"))
    }

    /// Its pid (`unshare` execs it, through `sh` where `/dev/shm` was mounted).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The client, pointed at this dockerd.
    pub fn docker(&self) -> Command {
        let mut c = Command::new(&self.cli);
        c.arg("-H").arg(format!("unix://{}", self.sock.display()));
        c
    }

    /// The node image: deploy/Containerfile over the static binary, built
    /// with `docker build`, saved with `docker save` (what
    /// deploy/build-image.sh will do); its tag.
    pub fn build_node_image(&self) -> String {
        let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
        let ctx = self.dir.join("context");
        std::fs::create_dir_all(&ctx).unwrap();
        std::fs::copy(static_binary(), ctx.join("oci-tmpfs-hook")).unwrap();
        let tag = format!("localhost/oci-tmpfs-hook-node:{}", unique("test"));
        ok(self
            .docker()
            .args(["build", "--network", "none", "-q", "-t", &tag, "-f"])
            .arg(manifest.join("deploy/Containerfile"))
            .arg(&ctx));
        let tar = self.dir.join("node-image.tar");
        ok(self.docker().args(["save", "-o"]).arg(&tar).arg(&tag));
        say(&format!("node: image {tag} built, saved as {} bytes", std::fs::metadata(&tar).unwrap().len()));
        tag
    }

    /// `docker run --rm -v HOST:/host IMAGE node ACTION --host-root /host ARGS`.
    pub fn node(&self, image: &str, host: &Path, action: &str, args: &[&str]) -> Command {
        let mut c = self.docker();
        c.args(["run", "--rm", "--network", "none", "--name", &unique("node"), "-v"])
            .arg(format!("{}:/host", host.display()))
            .args([image, "node", action, "--host-root", "/host"])
            .args(args);
        c
    }
}

impl Drop for Dockerd {
    fn drop(&mut self) {
        self.stop();
    }
}
