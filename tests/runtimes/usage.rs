//! `oci-tmpfs-hook usage` against real detached runc and crun containers
//! (docs/usage.md), each started through our hook and through the
//! runtime wrapper in spec mode, with a memory limit:
//!
//! - a process that writes 100 MiB into `/dev/shm`, 30 MiB into `/tmp` and
//!   5 MiB into `$HOME/.cache`, then sleeps: `usage --json` shows each
//!   within 1 MiB, at the host config's sizes, the cgroup's shmem at least
//!   their sum, and the limit; `--prometheus` and the table say the same;
//! - a target past 90%: marked `!`, and one warning naming the setting;
//! - an image whose `/tmp` is a symlink to `/etc`: every figure shown is
//!   one of the container's own tmpfs, never the host's `/etc`;
//! - containers exiting while `usage` reads, and one stopped but not
//!   deleted: each run exits 0, and a container gone is left out;
//! - a runtime run with `--root` elsewhere: listed with `--state-dir` only.

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::support::*;

const MI: u64 = 1 << 20;
const LIMIT: u64 = 512 * MI;

/// The ways in under test.
fn ways(rt: Runtime) -> [Via; 2] {
    let stage = match rt {
        Runtime::Runc => "createRuntime",
        Runtime::Crun => "prestart",
    };
    [Via::Hook(stage), Via::WRAPPER_SPEC]
}

/// A bundle for root with `HOME=/root` (in the image, empty), a memory
/// limit, our host config (absolute sizes, one cache) and `script`.
fn bundle(rt: Runtime, via: Via, script: &str) -> Bundle {
    let mut b = Bundle::new("usage");
    std::fs::create_dir_all(b.rootfs().join("root")).unwrap();
    std::fs::write(b.rootfs().join("etc/passwd"), "root:x:0:0:root:/root:/bin/sh\n").unwrap();
    b.env("HOME=/root");
    b.config["linux"]["resources"]["memory"] = json!({ "limit": LIMIT });
    b.script(script);
    let config = b.dir.join("host-config.toml");
    let mut text =
        "tmp_size = \"64Mi\"\nshm_size = \"128Mi\"\nhome_size = \"16Mi\"\nhome_caches = [\".cache\"]\n"
            .to_string();
    if let Via::Wrapper(mode) = via {
        text.push_str(&format!(
            "mode = {mode:?}\nruntime_path = {:?}\n",
            which(rt.bin()).display().to_string()
        ));
    }
    std::fs::write(&config, text).unwrap();
    match via {
        Via::Hook(stage) => {
            b.inject_with_config(stage, &config);
        }
        _ => b.write(),
    }
    b
}

/// Starts `b` detached as `id` through `via`; the guard deletes it.
fn start(b: &Bundle, rt: Runtime, via: Via, id: &str) -> ContainerGuard {
    if rt == Runtime::Crun {
        crun_cgroup_fix();
    }
    let guard = ContainerGuard { runtime: rt, id: id.to_string() };
    let mut cmd = match via {
        Via::Wrapper(_) => {
            let mut c = Command::new(hook_bin());
            c.env("OCI_TMPFS_HOOK_CONFIG", b.dir.join("host-config.toml")).args(["runtime", "--"]);
            c
        }
        _ => Command::new(rt.bin()),
    };
    cmd.args(["run", "-d", "--bundle"]).arg(&b.dir).arg(id);
    // The container keeps the stdio it is given: a pipe would stay open.
    let log = b.dir.join(format!("{id}.stderr"));
    let err = std::fs::File::create(&log).unwrap();
    let child = cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(err).spawn().unwrap();
    let out = wait_timeout(child, Duration::from_secs(60)).unwrap_or_else(|| panic!("{id}: start timed out"));
    let stderr = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(out.status.success(), "{id} ({via:?}): {stderr}");
    guard
}

/// `usage` with `args`, asserted to exit 0.
fn usage(args: &[&str]) -> Output {
    let out = Command::new(hook_bin()).arg("usage").args(args).output().unwrap();
    assert!(out.status.success(), "usage {args:?}: {:?}\n{}", out.status, text(&out.stderr));
    out
}

/// `usage --json`'s entry for `id`, if it lists it.
fn entry(id: &str) -> Option<Value> {
    let v: Value = serde_json::from_slice(&usage(&["--json"]).stdout).expect("usage --json is JSON");
    v.as_array().expect("a list").iter().find(|c| c["id"] == id).cloned()
}

/// The target at `path` of an entry.
fn target<'a>(c: &'a Value, path: &str) -> Option<&'a Value> {
    c["targets"].as_array()?.iter().find(|t| t["path"] == path)
}

fn used(c: &Value, path: &str) -> u64 {
    target(c, path).and_then(|t| t["used_bytes"].as_u64()).unwrap_or(0)
}

/// Polls `usage --json` until `id` shows `ready`, for at most 30 s.
fn wait_for(id: &str, ready: impl Fn(&Value) -> bool) -> Value {
    let t0 = Instant::now();
    loop {
        let c = entry(id);
        match c {
            Some(c) if ready(&c) => return c,
            _ if t0.elapsed() > Duration::from_secs(30) => panic!("{id}: never ready: {c:?}"),
            _ => std::thread::sleep(Duration::from_millis(200)),
        }
    }
}

const FILL: &str = "dd if=/dev/zero of=/dev/shm/f bs=1M count=100 2>/dev/null; \
    dd if=/dev/zero of=/tmp/f bs=1M count=30 2>/dev/null; \
    mkdir -p \"$HOME/.cache\"; dd if=/dev/zero of=\"$HOME/.cache/f\" bs=1M count=5 2>/dev/null; \
    touch /tmp/done; sleep 120";

/// What each way in gives, within 1 MiB of what the process wrote, at the
/// configured sizes, charged to the cgroup, under its limit.
#[test]
fn usage_shows_what_each_container_wrote() {
    require_root();
    for rt in Runtime::ALL {
        for via in ways(rt) {
            let b = bundle(rt, via, FILL);
            let id = format!("usage-{}", unique("fill"));
            let _guard = start(&b, rt, via, &id);
            let c = wait_for(&id, |c| used(c, "/tmp") >= 30 * MI && used(c, "/root/.cache") >= 5 * MI);
            let case = format!("{rt:?} {via:?}: {c:#}");
            for (path, size, wrote) in [
                ("/dev/shm", 128 * MI, 100 * MI),
                ("/tmp", 64 * MI, 30 * MI),
                ("/root/.cache", 16 * MI, 5 * MI),
            ] {
                let t = target(&c, path).unwrap_or_else(|| panic!("{path} missing: {case}"));
                assert_eq!(t["size_bytes"], size, "{path}: {case}");
                assert!(used(&c, path).abs_diff(wrote) <= MI, "{path}: {case}");
            }
            assert_eq!(c["memory_limit_bytes"], LIMIT, "{case}");
            assert!(c["shmem_bytes"].as_u64().unwrap() >= 135 * MI, "{case}");
            assert!(c["pid"].as_u64().unwrap() > 1, "{case}");
            assert_eq!(c["name"], Value::Null, "no CRI annotation: {case}");
            let prom = text(&usage(&["--prometheus"]).stdout);
            let line = format!(
                "oci_tmpfs_hook_container_tmpfs_size_bytes{{id=\"{id}\",name=\"\",target=\"/tmp\"}} {}",
                64 * MI
            );
            assert!(prom.lines().any(|l| l == line), "{case}\n{prom}");
            let table = text(&usage(&[]).stdout);
            assert!(
                table.lines().any(|l| l.starts_with(&id) && l.contains("/dev/shm") && l.contains("78%")),
                "{table}"
            );
        }
    }
}

/// A target past 90%: `!` in the table, one warning naming the container,
/// the target and the setting; the CRI name from the annotations.
#[test]
fn usage_warns_of_a_full_target() {
    require_root();
    let rt = Runtime::Crun;
    let via = Via::Hook("prestart");
    let mut b = bundle(rt, via, "dd if=/dev/zero of=/tmp/f bs=1M count=60 2>/dev/null; sleep 120");
    b.annotate("io.kubernetes.cri.container-name", "web").annotate("io.kubernetes.cri.sandbox-name", "shop");
    b.annotate("io.kubernetes.cri.sandbox-namespace", "prod");
    let config = b.dir.join("host-config.toml");
    b.inject_with_config("prestart", &config);
    let id = format!("usage-{}", unique("full"));
    let _guard = start(&b, rt, via, &id);
    let c = wait_for(&id, |c| used(c, "/tmp") >= 60 * MI);
    assert_eq!(c["name"], "prod/shop/web", "{c:#}");
    let out = usage(&[]);
    let table = text(&out.stdout);
    assert!(table.lines().any(|l| l.starts_with(&id) && l.contains("/tmp") && l.contains("93%!")), "{table}");
    let stderr = text(&out.stderr);
    let ours: Vec<&str> = stderr.lines().filter(|l| l.contains(&id)).collect();
    assert_eq!(ours.len(), 1, "{stderr}");
    assert!(ours[0].contains("/tmp is 93% full") && ours[0].contains("tmp_size"), "{stderr}");
    assert!(ours[0].contains("oci-tmpfs-hook/tmp-size") && ours[0].contains("prod/shop/web"), "{stderr}");
}

/// `/tmp -> /etc` in the image: whatever the executor made of it, every
/// figure `usage` shows is a tmpfs mount of the container's own
/// mountinfo, and none is the host's `/etc`.
#[test]
fn usage_never_stats_through_a_symlink() {
    require_root();
    let etc = rustix::fs::statfs("/etc").unwrap();
    let host_etc = etc.f_blocks as u64 * etc.f_bsize as u64;
    for rt in Runtime::ALL {
        for via in ways(rt) {
            let b = bundle(rt, via, "sleep 120");
            let rootfs = b.rootfs();
            std::fs::remove_dir(rootfs.join("tmp")).unwrap();
            std::os::unix::fs::symlink("/etc", rootfs.join("tmp")).unwrap();
            let id = format!("usage-{}", unique("link"));
            let _guard = start(&b, rt, via, &id);
            let c = wait_for(&id, |_| true);
            let pid = c["pid"].as_u64().unwrap();
            let mounts = std::fs::read_to_string(format!("/proc/{pid}/mountinfo")).unwrap();
            let tmpfs: Vec<MountInfo> =
                parse_mountinfo(&mounts).into_iter().filter(|m| m.fstype == "tmpfs").collect();
            for t in c["targets"].as_array().unwrap() {
                let path = t["path"].as_str().unwrap();
                assert!(
                    tmpfs.iter().any(|m| m.mount_point == path),
                    "{rt:?} {via:?}: {path} is no tmpfs: {c:#}"
                );
                assert_ne!(
                    t["size_bytes"].as_u64(),
                    Some(host_etc),
                    "{rt:?} {via:?}: the host's /etc: {c:#}"
                );
            }
            assert!(target(&c, "/dev/shm").is_some(), "{rt:?} {via:?}: {c:#}");
        }
    }
}

/// Containers that exit while `usage` reads: every run exits 0 and warns
/// of none of them; a container stopped but not deleted (its state file
/// naming a pid that is gone) is left out.
#[test]
fn usage_skips_containers_gone_mid_read() {
    require_root();
    let rt = Runtime::Runc;
    let via = Via::Hook("createRuntime");
    let b = bundle(rt, via, "dd if=/dev/zero of=/dev/shm/f bs=1M count=8 2>/dev/null; sleep 0.5");
    let ids: Vec<String> = (0..4).map(|_| format!("usage-{}", unique("gone"))).collect();
    let mut guards = Vec::new();
    let t0 = Instant::now();
    for id in &ids {
        guards.push(start(&b, rt, via, id));
        let out = usage(&["--json"]);
        assert!(!text(&out.stderr).contains("usage-"), "{}", text(&out.stderr));
    }
    while t0.elapsed() < Duration::from_secs(3) {
        let out = usage(&["--json"]);
        let stderr = text(&out.stderr);
        assert!(!ids.iter().any(|id| stderr.contains(id.as_str())), "{stderr}");
    }
    for id in &ids {
        let state = PathBuf::from("/run/runc").join(id).join("state.json");
        assert!(state.exists(), "{id} is stopped, not deleted");
        assert_eq!(entry(id), None, "{id} has exited");
    }
    drop(guards);
}

/// A runtime run with `--root` elsewhere keeps its state where the defaults
/// do not look: `usage` lists its container only with `--state-dir`.
#[test]
fn usage_reads_the_state_dir_it_is_given() {
    require_root();
    for rt in Runtime::ALL {
        if rt == Runtime::Crun {
            crun_cgroup_fix();
        }
        let b = bundle(rt, Via::Hook("prestart"), "touch /tmp/done; sleep 120");
        let root = TempDir::new("usage-root");
        let id = unique("usage-root");
        let err = std::fs::File::create(b.dir.join("run.stderr")).unwrap();
        let child = Command::new(rt.bin())
            .arg("--root")
            .arg(&*root)
            .args(["run", "-d", "--bundle"])
            .arg(&b.dir)
            .arg(&id)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(err)
            .spawn()
            .unwrap();
        let out = wait_timeout(child, Duration::from_secs(60)).expect("the start");
        let delete = || {
            let _ =
                Command::new(rt.bin()).arg("--root").arg(&*root).args(["delete", "--force", &id]).status();
        };
        if !out.status.success() {
            delete();
            panic!("{rt:?} --root run: {}", read_text(b.dir.join("run.stderr")));
        }
        let listed = |args: &[&str]| -> Option<Value> {
            let v: Value = serde_json::from_slice(&usage(args).stdout).expect("usage --json is JSON");
            v.as_array().expect("a list").iter().find(|c| c["id"] == id.as_str()).cloned()
        };
        let dir = root.display().to_string();
        let given = listed(&["--json", "--state-dir", &dir]);
        let default = listed(&["--json"]);
        delete();
        assert!(default.is_none(), "{rt:?}: listed without --state-dir: {default:?}");
        let c = given.unwrap_or_else(|| panic!("{rt:?}: not listed with --state-dir {dir}"));
        assert!(target(&c, "/tmp").is_some() && target(&c, "/dev/shm").is_some(), "{rt:?}: {c}");
    }
}
