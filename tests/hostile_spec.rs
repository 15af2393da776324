//! The hostile cases that apply to the runtime wrapper's spec executor
//! (issue 11): the wrapper checks each target against the prepared rootfs by
//! fd before it writes a mount into `config.json`, and grows an engine-made
//! `/dev/shm` on the host only after checking what it opened. Each case runs
//! a real container through `oci-tmpfs-hook runtime -- run` with runc and
//! crun in spec mode, and checks that the host is untouched: no tmpfs of ours
//! in the host's mount table, a marker dir outside every rootfs unchanged,
//! the host's `/dev/shm` (and a decoy tmpfs) not resized. Root, no skips.

mod common;

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::*;
use serde_json::{json, Value};

const MI: u64 = 1 << 20;
const OURS: &str = "oci-tmpfs-hook";
const SHOW: &str = "cat /proc/self/mountinfo; echo END-MOUNTS; ls -la /tmp/ /etc/ 2>&1 | head -40; true";

/// A directory on the host outside every rootfs, with known contents.
struct Marker(PathBuf);

impl Marker {
    fn new() -> Marker {
        // Not under /tmp: a rootfs /tmp -> /tmp/marker would be a loop.
        let dir = Path::new("/var/tmp").join(unique("spec-marker"));
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        std::fs::write(dir.join("canary"), b"host data").unwrap();
        Marker(dir)
    }

    fn listing(&self) -> Vec<(String, u64)> {
        let mut out: Vec<(String, u64)> = walk(&self.0);
        out.sort();
        out
    }
}

fn walk(dir: &Path) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let m = std::fs::symlink_metadata(e.path()).unwrap();
        out.push((e.path().display().to_string(), if m.is_dir() { 0 } else { m.len() }));
        if m.is_dir() {
            out.extend(walk(&e.path()));
        }
    }
    out
}

impl Drop for Marker {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn fs_bytes(path: &Path) -> u64 {
    let s = rustix::fs::statvfs(path).unwrap();
    s.f_blocks * s.f_frsize
}

/// The host before a case, to compare after it.
struct Before {
    marker_tree: Vec<(String, u64)>,
    shm: u64,
}

fn before(marker: &Marker) -> Before {
    Before { marker_tree: marker.listing(), shm: fs_bytes(Path::new("/dev/shm")) }
}

impl Before {
    fn assert_untouched(&self, marker: &Marker, case: &str) {
        for pid in ["1", "self"] {
            let mounts = parse_mountinfo(
                &std::fs::read_to_string(format!("/proc/{pid}/mountinfo")).unwrap_or_default(),
            );
            let ours: Vec<_> = mounts.iter().filter(|m| m.source == OURS).collect();
            assert!(ours.is_empty(), "{case}: a tmpfs of ours is in the host's mount table: {ours:?}");
            let m = marker.0.display().to_string();
            assert!(
                !mounts.iter().any(|x| x.mount_point == m || x.mount_point.starts_with(&format!("{m}/"))),
                "{case}: a mount landed on the host marker"
            );
        }
        assert_eq!(marker.listing(), self.marker_tree, "{case}: the host marker changed");
        assert_eq!(fs_bytes(Path::new("/dev/shm")), self.shm, "{case}: the host's /dev/shm was resized");
    }
}

/// Runs `b` through the wrapper in spec mode with `rt` as the real runtime.
fn run_wrapped(b: &Bundle, rt: Runtime, case: &str) -> (String, String) {
    if rt == Runtime::Crun {
        crun_cgroup_fix();
    }
    b.write();
    let real = which(rt.bin());
    let config = b.dir.join("host-config.toml");
    std::fs::write(&config, format!("mode = \"spec\"\nlog_level = \"info\"\nruntime_path = {:?}\n", real))
        .unwrap();
    let id = unique("spec");
    let _guard = ContainerGuard { runtime: rt, id: id.clone() };
    let child = Command::new(hook_bin())
        .env("OCI_TMPFS_HOOK_CONFIG", &config)
        .args(["runtime", "--", "run", "--bundle"])
        .arg(&b.dir)
        .arg(&id)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = wait_timeout(child, Duration::from_secs(60)).unwrap_or_else(|| panic!("{case}: timed out"));
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert!(out.status.success(), "{case}: {:?}\nstdout:\n{stdout}\nstderr:\n{stderr}", out.status);
    assert!(!stderr.contains("panicked"), "{case}: {stderr}");
    let config: Value = serde_json::from_slice(&std::fs::read(b.dir.join("config.json")).unwrap()).unwrap();
    assert_eq!(config["hooks"], Value::Null, "{case}: spec mode adds no hook");
    (stdout, stderr)
}

fn which(bin: &str) -> PathBuf {
    std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|d| d.join(bin))
        .find(|p| p.exists())
        .unwrap_or_else(|| panic!("{bin} is installed"))
}

fn mounts_of(stdout: &str) -> Vec<MountInfo> {
    parse_mountinfo(stdout.split("END-MOUNTS").next().unwrap_or(""))
}

fn ours_at(stdout: &str) -> Vec<String> {
    mounts_of(stdout).into_iter().filter(|m| m.source == OURS).map(|m| m.mount_point).collect()
}

#[test]
fn spec_mode_refuses_what_lands_in_a_system_dir_or_is_not_a_dir() {
    require_root();
    let marker = Marker::new();
    for rt in Runtime::ALL {
        // (case, how the image's /tmp and /var look, env, mounts of ours expected, refusal in the log)
        type Layout = fn(&Path, &Path);
        type Case = (&'static str, Layout, &'static [&'static str], &'static [&'static str], &'static str);
        let cases: [Case; 5] = [
            (
                "/tmp -> /etc",
                |r, _| {
                    std::fs::remove_dir(r.join("tmp")).unwrap();
                    symlink("/etc", r.join("tmp")).unwrap();
                },
                &[],
                &[],
                "resolves to /etc inside the container",
            ),
            (
                // Inside the rootfs the marker's path does not exist.
                "/tmp -> the host marker",
                |r, m| {
                    std::fs::remove_dir(r.join("tmp")).unwrap();
                    symlink(m, r.join("tmp")).unwrap();
                },
                &[],
                &[],
                "it is a dangling symlink in the image",
            ),
            (
                "/tmp is a FIFO",
                |r, _| {
                    std::fs::remove_dir(r.join("tmp")).unwrap();
                    rustix::fs::mknodat(
                        rustix::fs::CWD,
                        r.join("tmp"),
                        rustix::fs::FileType::Fifo,
                        rustix::fs::Mode::from_raw_mode(0o644),
                        0,
                    )
                    .unwrap();
                },
                &[],
                &[],
                "something other than a directory",
            ),
            (
                "/tmp is a file",
                |r, _| {
                    std::fs::remove_dir(r.join("tmp")).unwrap();
                    std::fs::write(r.join("tmp"), b"x").unwrap();
                },
                &[],
                &[],
                "something other than a directory",
            ),
            (
                "TMPDIR=/var/tmp under /var -> /etc",
                |r, _| {
                    std::fs::remove_dir(r.join("var")).unwrap();
                    symlink("/etc", r.join("var")).unwrap();
                },
                &["TMPDIR=/var/tmp"],
                &["/tmp"],
                "resolves to /etc/tmp inside the container",
            ),
        ];
        for (name, layout, env, want, refusal) in cases {
            let case = format!("{name} ({rt:?})");
            let host = before(&marker);
            let mut b = Bundle::new("spec-hostile");
            b.script(SHOW).annotate("oci-tmpfs-hook/tmp-size", "32Mi");
            for e in env {
                b.env(e);
            }
            layout(&b.rootfs(), &marker.0);
            let (stdout, stderr) = run_wrapped(&b, rt, &case);
            assert_eq!(
                ours_at(&stdout),
                want.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
                "{case}: {stderr}"
            );
            if !refusal.is_empty() {
                assert!(stderr.contains(refusal) && stderr.contains("warning:"), "{case}: {stderr}");
            }
            host.assert_untouched(&marker, &case);
        }
    }
}

/// A tmpfs on the host standing in for an engine-made one (Docker's
/// per-container shm, a CRI pod's shm).
struct HostTmpfs(PathBuf);

impl HostTmpfs {
    fn new(size: &str) -> HostTmpfs {
        let dir = std::env::temp_dir().join(unique("spec-shm"));
        std::fs::create_dir_all(&dir).unwrap();
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "decoy"])
            .arg(&dir)
            .status();
        assert!(ok.is_ok_and(|s| s.success()), "mounting a tmpfs on {}", dir.display());
        HostTmpfs(dir)
    }
}

impl Drop for HostTmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
        let _ = std::fs::remove_dir(&self.0);
    }
}

fn bind_shm(b: &mut Bundle, source: &Path) {
    let mounts = b.config["mounts"].as_array_mut().unwrap();
    let shm = mounts.iter_mut().find(|m| m["destination"] == "/dev/shm").unwrap();
    *shm = json!({"destination": "/dev/shm", "type": "bind", "source": source, "options": ["rbind", "rprivate"]});
}

#[test]
fn spec_mode_grows_only_a_real_engine_shm_on_the_host() {
    require_root();
    let marker = Marker::new();
    for rt in Runtime::ALL {
        // The engine's shm: grown on the host, by fd, to the container's size.
        let case = format!("engine shm ({rt:?})");
        let engine = HostTmpfs::new("64m");
        let host = before(&marker);
        let mut b = Bundle::new("spec-shm");
        b.script(SHOW).annotate("oci-tmpfs-hook/shm-size", "80Mi");
        bind_shm(&mut b, &engine.0);
        let (stdout, stderr) = run_wrapped(&b, rt, &case);
        assert_eq!(fs_bytes(&engine.0), 80 * MI, "{case}: {stderr}");
        assert_eq!(
            mount_at(&mounts_of(&stdout), "/dev/shm").and_then(MountInfo::size),
            Some(80 * MI),
            "{case}"
        );
        assert!(stderr.contains("grew /dev/shm from 64Mi to 80Mi (on the host"), "{case}: {stderr}");
        host.assert_untouched(&marker, &case);

        // --ipc=host, a symlink to a tmpfs, a plain directory: never resized.
        let decoy = HostTmpfs::new("64m");
        let link = std::env::temp_dir().join(unique("spec-shm-link"));
        symlink(&decoy.0, &link).unwrap();
        let plain = std::env::temp_dir().join(unique("spec-shm-dir"));
        std::fs::create_dir_all(&plain).unwrap();
        for (name, source, reason) in [
            ("host IPC", PathBuf::from("/dev/shm"), "host's /dev/shm"),
            ("a symlink to a tmpfs", link.clone(), "without following a symlink"),
            ("a plain directory", plain.clone(), "not the root of a mount"),
        ] {
            let case = format!("shm source is {name} ({rt:?})");
            let host = before(&marker);
            let mut b = Bundle::new("spec-shm");
            b.script(SHOW).annotate("oci-tmpfs-hook/shm-size", "80Mi");
            bind_shm(&mut b, &source);
            let (_, stderr) = run_wrapped(&b, rt, &case);
            assert!(stderr.contains(reason), "{case}: {stderr}");
            assert_eq!(fs_bytes(&decoy.0), 64 * MI, "{case}: the decoy tmpfs was resized");
            host.assert_untouched(&marker, &case);
        }
        let _ = std::fs::remove_file(&link);
        let _ = std::fs::remove_dir(&plain);
    }
}
