//! Private daemons, each in its own mount namespace with its own paths,
//! stopped by pid on drop.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::kube::static_binary;
use super::*;

/// A private dockerd in its own mount namespace, stopped by pid on drop.
pub struct Dockerd {
    dir: TempDir,
    child: Child,
    sock: PathBuf,
}

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

impl Dockerd {
    pub fn start() -> Dockerd {
        require_root();
        let dir = TempDir::new("node-dockerd");
        let sock = dir.join("docker.sock");
        let log = File::create(dir.join("dockerd.log")).unwrap();
        let daemon_json = dir.join("daemon.json");
        std::fs::write(&daemon_json, "{}").unwrap();
        let child = Command::new("unshare")
            .args(["--mount", "--propagation", "private", "--", "dockerd"])
            .args(dockerd_flags(&dir, &daemon_json))
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("starting dockerd (apt-get install docker.io)");
        let mut d = Dockerd { dir, child, sock };
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

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("dockerd.log")).unwrap_or_default()
    }

    pub fn docker(&self) -> Command {
        let mut c = Command::new("docker");
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
        stop(&mut self.child, Duration::from_secs(30));
    }
}
