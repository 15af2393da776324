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
//! - a container with `CAP_SYS_ADMIN` that keeps swapping what is at `/tmp`
//!   (its own tmpfs, a bind of the image's `/etc`, a symlink to `/etc`,
//!   nothing) while `usage` reads it, with a thousand mounts to widen the
//!   race: every run exits 0 without a warning, and each figure is one of
//!   its own tmpfs, size and use together, or absent;
//! - containers exiting while `usage` reads, and one stopped but not
//!   deleted: each run exits 0, and a container gone is left out;
//! - a runtime run with `--root` elsewhere: listed with `--state-dir` only;
//! - the same process through Docker (the test's own dockerd, the runtime
//!   wrapper, `--read-only --memory`; its state under its own exec root, so
//!   read with `--state-dir`) and Podman with runc and crun (our hooks dir;
//!   the runtimes' default state, read with no flag): the same figures, and
//!   no name, since neither engine puts one in the runtime's state or spec.

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::engines::{ulimit_flags, DockerGuard, Dockerd, Podman, PodmanGuard};
use crate::support::*;
use oci_tmpfs_hook::process::logger::LOG_ENV;

const MI: u64 = 1 << 20;
const LIMIT: u64 = 512 * MI;

/// The sizes every container here gets: absolute, and one cache.
const HOST_CONFIG: &str =
    "tmp_size = \"64Mi\"\nshm_size = \"128Mi\"\nhome_size = \"16Mi\"\nhome_caches = [\".cache\"]\n";

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
    let mut text = HOST_CONFIG.to_string();
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
    entry_in(&[], id)
}

/// [`entry`] of `usage --json ARGS`.
fn entry_in(args: &[&str], id: &str) -> Option<Value> {
    let out = usage(&[&["--json"], args].concat());
    let v: Value = serde_json::from_slice(&out.stdout).expect("usage --json is JSON");
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
    wait_in(&[], id, ready)
}

/// [`wait_for`] with `usage --json ARGS`.
fn wait_in(args: &[&str], id: &str, ready: impl Fn(&Value) -> bool) -> Value {
    let t0 = Instant::now();
    loop {
        let c = entry_in(args, id);
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

/// Whether [`FILL`] has written all it writes, as `usage` shows it.
fn filled(c: &Value) -> bool {
    used(c, "/tmp") >= 30 * MI && used(c, "/root/.cache") >= 5 * MI
}

/// What [`FILL`] wrote, as `usage` shows it: each target within 1 MiB,
/// at the host config's size ([`HOST_CONFIG`]), their sum charged to the
/// cgroup as shmem, and the limit asked for ([`LIMIT`]).
#[track_caller]
fn assert_filled(case: &str, c: &Value) {
    for (path, size, wrote) in
        [("/dev/shm", 128 * MI, 100 * MI), ("/tmp", 64 * MI, 30 * MI), ("/root/.cache", 16 * MI, 5 * MI)]
    {
        let t = target(c, path).unwrap_or_else(|| panic!("{path} missing: {case}"));
        assert_eq!(t["size_bytes"], size, "{path}: {case}");
        assert!(used(c, path).abs_diff(wrote) <= MI, "{path}: {case}");
    }
    assert_eq!(c["memory_limit_bytes"], LIMIT, "{case}");
    assert!(c["shmem_bytes"].as_u64().unwrap() >= 135 * MI, "{case}");
    assert!(c["pid"].as_u64().unwrap() > 1, "{case}");
}

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
            let c = wait_for(&id, filled);
            let case = format!("{rt:?} {via:?}: {c:#}");
            assert_filled(&case, &c);
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

/// The hostile container of [`usage_reads_mounts_swapped_while_read`],
/// with `CAP_SYS_ADMIN` in its own mount namespace: it keeps the hook's
/// `/tmp` at `/mnt/h` (2 MiB written), mounts tmpfs of its own, with our
/// mount source, at `/mnt/a` (7 MiB, 1 MiB written) and `/mnt/b` (13 MiB,
/// 3 MiB written), makes its root writable (the bundle's, in its namespace
/// only), and grows 1,024 mounts under `/mnt/m` (ten `--rbind`s, each
/// doubling), which widen the window between `usage` reading `mountinfo`
/// and opening a target. Then, forever, `/tmp` is in turn a
/// bind of `/mnt/h`, `/mnt/a`, `/mnt/b` and of the image's `/etc` (a
/// directory of the host's root filesystem), `/mnt/b` stacked on
/// `/mnt/a`, a fresh 5 MiB tmpfs, nothing, and a symlink to `/etc`.
const SWAP: &str = "b=busybox; \
    $b mount --bind /tmp /mnt/h && $b dd if=/dev/zero of=/mnt/h/f bs=1M count=2 2>/dev/null && \
    $b mount -t tmpfs -o size=7m oci-tmpfs-hook /mnt/a && $b dd if=/dev/zero of=/mnt/a/f bs=1M count=1 2>/dev/null && \
    $b mount -t tmpfs -o size=13m oci-tmpfs-hook /mnt/b && $b dd if=/dev/zero of=/mnt/b/f bs=1M count=3 2>/dev/null && \
    $b umount /tmp && $b mount -o remount,bind,rw / || exit 1; \
    $b mount -t tmpfs -o size=1m many /mnt/m || exit 1; \
    for i in 1 2 3 4 5 6 7 8 9 10; do $b mkdir /mnt/m/$i && $b mount --rbind /mnt/m /mnt/m/$i || exit 1; done; \
    while :; do \
      for s in /mnt/h /mnt/a /mnt/b /etc; do $b mount --bind $s /tmp; $b umount /tmp; done; \
      $b mount --bind /mnt/a /tmp; $b mount --bind /mnt/b /tmp; $b umount /tmp; $b umount /tmp; \
      $b mount -t tmpfs -o size=5m oci-tmpfs-hook /tmp; $b umount /tmp; \
      $b rmdir /tmp && $b ln -s /etc /tmp && $b rm /tmp && $b mkdir -m 1777 /tmp; \
    done";

/// The (size, used) of every tmpfs [`SWAP`] puts at `/tmp`.
const SWAPPED: [(u64, u64); 4] = [(64 * MI, 2 * MI), (7 * MI, MI), (13 * MI, 3 * MI), (5 * MI, 0)];

/// A container that swaps its mounts while `usage` reads them ([`SWAP`]),
/// through the hook on runc and crun: each of 150 runs exits 0 and warns of
/// nothing, and every figure shown for `/tmp` and `/mnt/*` is one of the
/// container's own tmpfs, size and use together, or absent: never the
/// host's root filesystem (under the image's `/etc`, or the host's `/etc`
/// through the symlink), never one tmpfs's size with another's use. The
/// runs did meet the swaps: `/tmp` was seen in two states at least, and
/// was at least once left out because what `mountinfo` named had changed
/// by the time it was opened (`usage`'s debug log says so).
#[test]
fn usage_reads_mounts_swapped_while_read() {
    require_root();
    let host = rustix::fs::statfs("/").unwrap();
    let host = (host.f_blocks * host.f_bsize as u64, (host.f_blocks - host.f_bfree) * host.f_bsize as u64);
    for (rt, stage) in [(Runtime::Runc, "createRuntime"), (Runtime::Crun, "prestart")] {
        let via = Via::Hook(stage);
        let mut b = bundle(rt, via, SWAP);
        for set in ["bounding", "effective", "permitted"] {
            b.config["process"]["capabilities"][set].as_array_mut().unwrap().push(json!("CAP_SYS_ADMIN"));
        }
        for d in ["mnt/h", "mnt/a", "mnt/b", "mnt/m"] {
            std::fs::create_dir_all(b.rootfs().join(d)).unwrap();
        }
        let config = b.dir.join("host-config.toml");
        b.inject_with_config(stage, &config);
        let id = format!("usage-{}", unique("swap"));
        let _guard = start(&b, rt, via, &id);
        wait_for(&id, |c| used(c, "/mnt/b") == 3 * MI);
        let mut seen = std::collections::BTreeMap::new();
        let mut raced = std::collections::BTreeMap::new();
        for _ in 0..150 {
            let out =
                Command::new(hook_bin()).args(["usage", "--json"]).env(LOG_ENV, "debug").output().unwrap();
            let stderr = text(&out.stderr);
            assert!(out.status.success(), "{rt:?}: {:?}\n{stderr}", out.status);
            // Only the debug lines of a target left out: no warning.
            let prefix = format!("container {id}: ");
            for l in stderr.lines().filter(|l| l.contains(&prefix)) {
                let (_, rest) = l.split_once(&prefix).unwrap();
                let left_out = rest.split_once(" left out: ").filter(|(path, _)| path.starts_with('/'));
                let (path, why) = left_out.unwrap_or_else(|| panic!("{rt:?}: {l}\n{stderr}"));
                let why = why.split(':').next().unwrap_or(why);
                *raced.entry(format!("{path}: {why}")).or_insert(0) += 1;
            }
            let v: Value = serde_json::from_slice(&out.stdout).unwrap();
            let c = v.as_array().unwrap().iter().find(|c| c["id"] == id.as_str());
            let c = c.unwrap_or_else(|| panic!("{rt:?}: {id} not listed: {v:#}"));
            for t in c["targets"].as_array().unwrap() {
                let figures = (t["size_bytes"].as_u64().unwrap(), t["used_bytes"].as_u64().unwrap());
                match t["path"].as_str().unwrap() {
                    "/dev/shm" => assert_eq!(figures.0, 128 * MI, "{rt:?}: {c:#}"),
                    "/root/.cache" => assert_eq!(figures, (16 * MI, 0), "{rt:?}: {c:#}"),
                    path => assert!(
                        SWAPPED.contains(&figures),
                        "{rt:?}: {path} shows {figures:?}, none of the container's tmpfs {SWAPPED:?} \
                         (the host's / is {host:?}): {c:#}"
                    ),
                }
            }
            let tmp = target(c, "/tmp").map(|t| (t["size_bytes"].as_u64(), t["used_bytes"].as_u64()));
            *seen.entry(tmp).or_insert(0) += 1;
        }
        say(&format!("{rt:?}: /tmp as 150 runs of usage saw it: {seen:?}; left out: {raced:?}"));
        assert!(seen.len() >= 2, "{rt:?}: /tmp never changed while read: {seen:?}");
        let met = raced.iter().filter(|(k, _)| k.starts_with("/tmp: ")).map(|(_, n)| n).sum::<u32>();
        assert!(met > 0, "{rt:?}: /tmp never changed between mountinfo and its open: {raced:?}");
    }
}

// ------------------------------------------------------ Docker and Podman

/// The image the engines run: the busybox rootfs with root's home `/root`
/// (empty), as [`bundle`]'s.
fn engine_image() -> Bundle {
    let b = Bundle::new("usage-image");
    std::fs::create_dir_all(b.rootfs().join("root")).unwrap();
    std::fs::write(b.rootfs().join("etc/passwd"), "root:x:0:0:root:/root:/bin/sh\n").unwrap();
    b
}

/// Docker (`--runtime oci-tmpfs --read-only --memory 512m`, the test's own
/// dockerd with the wrapper registered and [`HOST_CONFIG`]'s sizes): what
/// [`FILL`] wrote, as for runc and crun; no name (Docker keeps it in its
/// data root, not in the runtime's state nor the spec).
#[test]
fn usage_of_a_docker_container() {
    let d = Dockerd::start_configured(wrapper_mode(), None, HOST_CONFIG);
    let image = unique("usage-image");
    let rootfs = engine_image();
    let tar = d.dir.join("image.tar");
    ok(Command::new("tar").arg("-C").arg(rootfs.rootfs()).arg("-cf").arg(&tar).arg("."));
    ok(d.docker().arg("import").arg(&tar).arg(&image));
    let name = unique("usage-docker");
    let _guard = DockerGuard { dockerd: &d, name: name.clone() };
    let flags = ["--runtime", "oci-tmpfs", "--read-only", "--memory", "512m", "--network", "none"];
    let mut run = d.docker();
    run.args(["run", "-d", "--name", &name]).args(flags).args([&image, "sh", "-c", FILL]);
    let id = ok(&mut run).trim().to_string();
    // Docker has the runtime keep its state under its exec root, in
    // `runtime-*/moby` (`runtime-runc/moby` here, though ours ran it): the
    // default list has `/run/docker/runtime-*/moby`, a dockerd's with the
    // default exec root; this one's is its own, so it is given.
    let states = format!("{}/runtime-*/moby", d.dir.join("exec").display());
    let c = wait_in(&["--state-dir", &states], &id, filled);
    let case = format!("docker {} mode: {c:#}", wrapper_mode());
    assert_filled(&case, &c);
    assert_eq!(c["name"], Value::Null, "{case}");
    assert_eq!(entry(&id), None, "not under the default /run/docker");
}

/// Podman (`--read-only --read-only-tmpfs=false --memory=512m`, our hook
/// from its hooks dir with [`HOST_CONFIG`]'s sizes): what [`FILL`] wrote,
/// read from the runtime's default state directory with no flag; no name
/// (Podman keeps it in its database, not in the runtime's state nor the
/// spec).
fn podman_usage(runtime: Runtime) {
    let podman = Podman::new(runtime);
    podman.host_config(HOST_CONFIG);
    let image = engine_image();
    let name = unique("usage-podman");
    let _guard = PodmanGuard { podman: &podman, name: name.clone() };
    let mut run = podman.cmd();
    run.args(["run", "-d", "--name", &name, "--network=none"]).args(ulimit_flags());
    run.args(["--read-only", "--read-only-tmpfs=false", "--memory=512m", "--rootfs"]).arg(image.rootfs());
    let id = ok(run.args(["sh", "-c", FILL])).trim().to_string();
    // Podman's `--runroot` is its own; as root it leaves the runtime its
    // default `--root`, which the default list holds.
    let state = PathBuf::from(format!("/run/{}", runtime.bin())).join(&id);
    assert!(state.is_dir(), "{} is not where the defaults look", state.display());
    let c = wait_for(&id, filled);
    let case = format!("podman --runtime {}: {c:#}", runtime.bin());
    assert_filled(&case, &c);
    assert_eq!(c["name"], Value::Null, "{case}");
}

// Boilerplate: one test per runtime, so that libtest names, filters and
// runs each on its own.
#[test]
fn usage_of_a_podman_runc_container() {
    podman_usage(Runtime::Runc);
}

#[test]
fn usage_of_a_podman_crun_container() {
    podman_usage(Runtime::Crun);
}
