//! The adversarial suite (SECURITY.md#the-adversarial-suite): hostile
//! images, races, hostile input, load and user namespaces, against real runc
//! and crun and against the hook binary run directly.
//!
//! Besides its own expectation, every case proves that the host is untouched
//! (its mount table, a marker directory outside every rootfs, the size of its
//! `/dev/shm`) and that the hook exited cleanly: no panic, well inside a few
//! seconds. Direct hook runs that must reach the mounting code join a
//! "sleeper": a `sleep` in a fresh private mount namespace made with
//! `unshare`, standing in for a container's init; never a container without a
//! mount namespace (runc would do its own mounts on the host).

use std::os::unix::fs::{symlink, MetadataExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::support::host::{hold_host, HostGuard, HostUse};
use crate::support::*;
use serde_json::{json, Value};

/// The `source` of every tmpfs the hook creates.
const HOOK_SOURCE: &str = "oci-tmpfs-hook";
/// The longest a hook run may take, even on a busy machine.
const QUICK: Duration = Duration::from_secs(5);
/// How long one container run may take.
const CONTAINER: Duration = Duration::from_secs(30);
/// Host markers live here: outside every rootfs and not under `/tmp`, so a
/// rootfs `/tmp -> <marker>` symlink is not a loop.
const MARKER_BASE: &str = "/var/tmp/oci-tmpfs-hook-markers";
/// Mount points of other software that may come and go on a shared machine
/// (engines started by other tests); everything else must be stable, and the
/// suites of this binary that mount on the host wait (`support::host`).
/// crun briefly mounts a private `/tmp/crun.XXXXXX` on the host while it starts a container.
/// `/overlay`: the storage of a Podman with a private `--root` (tests/runtimes/engines.rs
/// of a concurrent test run on the same machine binds `ROOT/overlay` on itself).
const VOLATILE: &[&str] =
    &["docker", "containerd", "/containers/", "podman", "netns", "/run/user/", "/tmp/crun.", "/overlay"];
/// Places inside a container where a hook tmpfs must never appear.
const FORBIDDEN: &[&str] = &["/", "/etc", "/usr", "/bin", "/sbin", "/lib", "/proc", "/sys", "/dev", "/boot"];

// ---------------------------------------------------------------------------
// Host checks

/// A directory on the host outside every rootfs, with known contents.
struct Marker {
    path: PathBuf,
}

impl Marker {
    fn new(name: &str) -> Marker {
        let path = Path::new(MARKER_BASE).join(unique(name));
        std::fs::create_dir_all(path.join("sub")).unwrap();
        std::fs::write(path.join("canary"), b"host data, never shadowed").unwrap();
        Marker { path }
    }

    fn as_str(&self) -> &str {
        self.path.to_str().unwrap()
    }
}

impl Drop for Marker {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

fn all_mounts(pid: &str) -> Vec<MountInfo> {
    // A failed read would pass "nothing of ours on the host".
    let path = format!("/proc/{pid}/mountinfo");
    parse_mountinfo(&std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {path}: {e}")))
}

/// The host's mount table without other software's moving parts.
fn stable_mounts() -> Vec<String> {
    host_mounts().into_iter().filter(|m| !VOLATILE.iter().any(|v| m.contains(v))).collect()
}

fn shm_bytes(path: &str) -> u64 {
    let s = rustix::fs::statvfs(path).unwrap();
    s.f_blocks * s.f_frsize
}

/// What "untouched" is compared against.
struct Host {
    mounts: Vec<String>,
    markers: Vec<(PathBuf, Tree)>,
    shm: u64,
    /// No other suite mounts on the host while the picture is compared.
    _watch: HostGuard,
}

/// Takes the host's picture; checks that needs no "before" run at once.
fn host(markers: &[&Marker]) -> Host {
    let watch = hold_host(HostUse::Watch);
    // crun's cgroup fix mounts on the host once: do it before any picture.
    crun_cgroup_fix();
    Host {
        _watch: watch,
        mounts: stable_mounts(),
        markers: markers.iter().map(|m| (m.path.clone(), tree(&m.path))).collect(),
        shm: shm_bytes("/dev/shm"),
    }
}

/// Panics when a mount of ours is in `mounts` at or under `path`.
fn assert_no_mount_under(mounts: &[MountInfo], path: &str, what: &str) {
    let below = format!("{}/", path.trim_end_matches('/'));
    if let Some(m) = mounts.iter().find(|m| m.mount_point == path || m.mount_point.starts_with(&below)) {
        panic!("{what}: a mount landed on the host marker {path}: {m:?}");
    }
}

impl Host {
    fn assert_untouched(&self, case: &str) {
        for pid in ["1", "self"] {
            let mounts = all_mounts(pid);
            let ours: Vec<_> = mounts.iter().filter(|m| m.source == HOOK_SOURCE).collect();
            assert!(ours.is_empty(), "{case}: a hook tmpfs is in the host's mount table ({pid}): {ours:?}");
            for (path, _) in &self.markers {
                assert_no_mount_under(&mounts, path.to_str().unwrap(), case);
            }
        }
        for (path, before) in &self.markers {
            assert_eq!(&tree(path), before, "{case}: the host marker {} changed", path.display());
        }
        let now = stable_mounts();
        let added: Vec<_> = now.iter().filter(|m| !self.mounts.contains(m)).collect();
        let removed: Vec<_> = self.mounts.iter().filter(|m| !now.contains(m)).collect();
        assert!(
            added.is_empty() && removed.is_empty(),
            "{case}: the host's mount table changed: added {added:?}, removed {removed:?}"
        );
        assert_eq!(shm_bytes("/dev/shm"), self.shm, "{case}: the host's /dev/shm size changed");
    }
}

/// The caches under `HOME=/` that the hook mounts for a uid without a
/// passwd entry (`home_caches`' default).
const ROOT_CACHES: [&str; 5] = ["/.cache", "/.config", "/.triton", "/.cupy", "/.nv"];
// ---------------------------------------------------------------------------
// Container runs

/// Runs `b` and checks that nothing panicked.
fn run(b: &Bundle, rt: Runtime, case: &str) -> Run {
    let started = Instant::now();
    let r = b.run_timeout(rt, CONTAINER);
    assert!(!r.stderr().contains("panicked"), "{case} ({rt:?}): panic: {}", r.stderr());
    assert!(started.elapsed() < CONTAINER, "{case} ({rt:?}): took {:?}", started.elapsed());
    r
}

fn hook_mounts(r: &Run) -> Vec<MountInfo> {
    r.mounts().into_iter().filter(|m| m.source == HOOK_SOURCE).collect()
}

/// Every hook tmpfs in the container is at one of `allowed`, none is at a
/// forbidden place, and none is stacked on another.
fn assert_hook_mounts_within(r: &Run, case: &str, allowed: &[&str]) -> Vec<MountInfo> {
    let ours = hook_mounts(r);
    for m in &ours {
        assert!(
            !FORBIDDEN.contains(&m.mount_point.as_str()),
            "{case}: a hook tmpfs on the container's {}\n{}",
            m.mount_point,
            r.stdout()
        );
        assert!(
            allowed.contains(&m.mount_point.as_str()),
            "{case}: unexpected hook tmpfs at {} (allowed {allowed:?})\n{}",
            m.mount_point,
            r.stdout()
        );
        let n = ours.iter().filter(|o| o.mount_point == m.mount_point).count();
        assert_eq!(n, 1, "{case}: {n} hook tmpfs stacked at {}\n{}", m.mount_point, r.stdout());
    }
    ours
}

/// A hook tmpfs: exactly `size`, mode 1777, nosuid, nodev, no other option.
fn assert_tmpfs(m: &MountInfo, size: u64, case: &str) {
    assert_eq!(m.fstype, "tmpfs", "{case}: {m:?}");
    assert_eq!(m.size(), Some(size), "{case}: size of {m:?}");
    // tmpfs shows its mode only when it is not the default 1777.
    assert!(!m.super_options.iter().any(|o| o.starts_with("mode=")), "{case}: mode of {m:?}");
    assert!(m.has("nosuid") && m.has("nodev"), "{case}: flags of {m:?}");
    for o in &m.super_options {
        let key = o.split('=').next().unwrap();
        assert!(
            ["rw", "ro", "size", "mode", "nr_inodes", "inode64"].contains(&key),
            "{case}: option {o} in {m:?}"
        );
    }
}

/// A bundle whose hook is registered at `stage`, showing the mount table.
fn hooked(name: &str, stage: &str) -> Bundle {
    let mut b = Bundle::new(name);
    b.script(SHOW_MOUNTS).inject(stage);
    b
}

/// The stage used with each runtime: both pre-pivot paths are exercised.
fn stage_for(rt: Runtime) -> &'static str {
    match rt {
        Runtime::Runc => "prestart",
        Runtime::Crun => "createContainer",
    }
}

/// Replaces `rootfs/<rel>` with whatever `make` creates there.
fn replace(b: &Bundle, rel: &str, make: impl FnOnce(&Path)) {
    let p = b.rootfs().join(rel);
    match std::fs::symlink_metadata(&p) {
        Ok(m) if m.is_dir() => std::fs::remove_dir_all(&p).unwrap(),
        Ok(_) => std::fs::remove_file(&p).unwrap(),
        Err(_) => {}
    }
    make(&p);
}

// ---------------------------------------------------------------------------
// Direct hook runs

/// The sleeper ([`Sleeper`], support's) stands in for a container's init
/// at prestart.
impl Sleeper {
    /// Mounts a tmpfs of `size` at `path` inside the sleeper's namespace, as a
    /// runtime mounts the spec's `/dev/shm` before the hook runs.
    fn mount_tmpfs(&self, path: &Path, size: &str) {
        let out = Command::new("nsenter")
            .args(["-t", &self.pid().to_string(), "-m", "mount", "-t", "tmpfs", "-o"])
            .arg(format!("size={size}"))
            .arg("shm")
            .arg(path)
            .output()
            .unwrap();
        assert!(out.status.success(), "nsenter mount: {}", String::from_utf8_lossy(&out.stderr));
    }

    fn hook_mounts(&self) -> Vec<MountInfo> {
        self.mounts().into_iter().filter(|m| m.source == HOOK_SOURCE).collect()
    }
}

/// One direct run of the hook binary.
struct Direct {
    out: Output,
    took: Duration,
}

impl Direct {
    fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.out.stderr).into_owned()
    }
}

/// Options of a direct run.
#[derive(Default)]
struct HookCmd<'a> {
    /// Programs to run the hook under (`prlimit`, a seccomp wrapper).
    prefix: Vec<String>,
    env: Vec<(&'a str, String)>,
    cwd: Option<&'a Path>,
}

/// Runs `[prefix..] oci-tmpfs-hook args` with an empty environment (as
/// runtimes do), `stdin` written by a thread; panics when it hangs.
fn hook_direct(args: &[&str], stdin: Vec<u8>, opts: &HookCmd<'_>) -> Direct {
    let bin = hook_bin();
    let mut argv: Vec<String> = opts.prefix.clone();
    argv.push(bin.display().to_string());
    argv.extend(args.iter().map(|s| s.to_string()));
    let started = Instant::now();
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..])
        .env_clear()
        .envs(opts.env.iter().map(|(k, v)| (k, v)))
        .current_dir(opts.cwd.unwrap_or(Path::new("/")));
    let out = run_with_stdin(&mut cmd, stdin, QUICK).unwrap_or_else(|| panic!("the hook hung: {argv:?}"));
    let took = started.elapsed();
    Direct { out, took }
}

fn hook_prestart(stdin: Vec<u8>) -> Direct {
    hook_direct(&["hook", "--stage", "prestart"], stdin, &HookCmd::default())
}

/// The hook was refused cleanly: exit 1, one line naming the reason.
fn assert_refused(d: &Direct, case: &str, needle: &str) {
    let err = d.stderr();
    assert_eq!(d.out.status.code(), Some(1), "{case}: expected exit 1, stderr: {err}");
    assert!(!err.contains("panicked"), "{case}: panic: {err}");
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "{case}: expected one line on stderr, got {lines:?}");
    assert!(lines[0].starts_with("oci-tmpfs-hook:"), "{case}: {err}");
    assert!(lines[0].to_lowercase().contains(&needle.to_lowercase()), "{case}: {needle:?} not in {err}");
    assert!(d.took < QUICK, "{case}: took {:?}", d.took);
}

fn assert_ok(d: &Direct, case: &str) {
    let err = d.stderr();
    assert_eq!(d.out.status.code(), Some(0), "{case}: {err}");
    assert!(!err.contains("panicked"), "{case}: panic: {err}");
    assert!(d.took < QUICK, "{case}: took {:?}", d.took);
}

/// An OCI state document.
fn state(pid: Value, bundle: &Path) -> Vec<u8> {
    state_value(json!({
        "ociVersion": "1.0.2", "id": unique("state"), "status": "creating", "pid": pid, "bundle": bundle,
    }))
}

fn state_value(v: Value) -> Vec<u8> {
    serde_json::to_vec(&v).unwrap()
}

/// Runs under `prlimit` with at most this much address space: bounded memory.
fn memory_capped() -> HookCmd<'static> {
    HookCmd { prefix: vec!["prlimit".into(), "--as=268435456".into(), "--".into()], ..HookCmd::default() }
}

// ---------------------------------------------------------------------------
// 1. /tmp is a symlink

// Boilerplate: each case below opens alike (root, a host marker, the host
// before) and ends with `assert_untouched`; what it runs and checks between
// is its own.
#[test]
fn case01_symlinked_tmp_never_leaves_the_rootfs() {
    require_root();
    let marker = Marker::new("c1");
    let inside = Marker::new("c1-inside");
    let before = host(&[&marker, &inside]);
    for rt in Runtime::ALL {
        let cases: Vec<(&str, String, bool, Vec<&str>)> = vec![
            ("to /etc", "/etc".into(), false, vec![]),
            ("to ../../../..", "../../../..".into(), false, vec![]),
            ("to /", "/".into(), false, vec![]),
            ("to .", ".".into(), false, vec![]),
            ("to /proc/self/root", "/proc/self/root".into(), false, vec![]),
            ("to /proc/self/cwd", "/proc/self/cwd".into(), false, vec![]),
            ("to /dev", "/dev".into(), false, vec![]),
            ("to /sys/fs/cgroup", "/sys/fs/cgroup".into(), false, vec![]),
            ("to /usr (missing)", "/usr".into(), false, vec![]),
            ("to /bin", "/bin".into(), false, vec![]),
            ("to a host dir, absent in the rootfs", marker.as_str().into(), false, vec![]),
            ("to a host dir by ../", format!("../../../../../../..{}", marker.as_str()), false, vec![]),
            (
                "to a host dir's path, present in the rootfs",
                inside.as_str().into(),
                true,
                vec![inside.as_str()],
            ),
        ];
        for (name, link, make_inside, allowed) in cases {
            let case = format!("case 1 /tmp {name} ({rt:?})");
            let b = hooked("c1", stage_for(rt));
            replace(&b, "tmp", |p| symlink(&link, p).unwrap());
            if make_inside {
                std::fs::create_dir_all(b.rootfs().join(&link[1..])).unwrap();
            }
            let r = run(&b, rt, &case);
            r.assert_ok();
            let ours = assert_hook_mounts_within(&r, &case, &allowed);
            if make_inside {
                // A symlink that stays inside the rootfs and lands on an allowed directory is followed.
                assert_eq!(ours.len(), 1, "{case}: {}", r.stdout());
            }
            before.assert_untouched(&case);
        }
    }
}

// ---------------------------------------------------------------------------
// 2. /tmp is not a directory

#[test]
fn case02_tmp_file_fifo_socket_device() {
    require_root();
    let marker = Marker::new("c2");
    let before = host(&[&marker]);
    type Make = fn(&Path);
    let kinds: &[(&str, Make)] = &[
        ("a regular file", |p| std::fs::write(p, b"x").unwrap()),
        ("a FIFO", |p| {
            rustix::fs::mknodat(rustix::fs::CWD, p, rustix::fs::FileType::Fifo, 0o666.into(), 0).unwrap()
        }),
        ("a unix socket", |p| drop(std::os::unix::net::UnixListener::bind(p).unwrap())),
        ("a char device", |p| {
            let dev = rustix::fs::makedev(1, 3);
            rustix::fs::mknodat(rustix::fs::CWD, p, rustix::fs::FileType::CharacterDevice, 0o666.into(), dev)
                .unwrap()
        }),
        ("a symlink to /dev/zero", |p| symlink("/dev/zero", p).unwrap()),
    ];
    for rt in Runtime::ALL {
        for (name, make) in kinds {
            let case = format!("case 2 /tmp is {name} ({rt:?})");
            let b = hooked("c2", stage_for(rt));
            replace(&b, "tmp", make);
            let started = Instant::now();
            let r = run(&b, rt, &case);
            r.assert_ok();
            assert!(started.elapsed() < Duration::from_secs(10), "{case}: took {:?}", started.elapsed());
            assert_hook_mounts_within(&r, &case, &[]);
            before.assert_untouched(&case);
        }
    }
}

// ---------------------------------------------------------------------------
// 3. /tmp missing

#[test]
fn case03_missing_tmp_is_created_inside_the_rootfs() {
    require_root();
    let before = host(&[]);
    // At prestart (and createRuntime) the rootfs is still writable: missing
    // directories are created inside it. crun runs createContainer after the
    // read-only remount: there they are created through a private writable
    // clone of the same rootfs mount, still resolved inside the rootfs.
    for (rt, stage) in
        [(Runtime::Runc, "prestart"), (Runtime::Crun, "prestart"), (Runtime::Crun, "createContainer")]
    {
        let case = format!("case 3 missing /tmp and TMPDIR ({rt:?} {stage})");
        let top = unique("c3-missing");
        let mut b = Bundle::new("c3");
        b.script(SHOW_MOUNTS).env(&format!("TMPDIR=/{top}/deep/er")).inject(stage);
        replace(&b, "tmp", |_| {});
        let r = run(&b, rt, &case);
        r.assert_ok();
        let ours = assert_hook_mounts_within(&r, &case, &["/tmp", &format!("/{top}/deep/er")]);
        assert_eq!(ours.len(), 2, "{case}: {}", r.stdout());
        assert!(b.rootfs().join("tmp").symlink_metadata().unwrap().is_dir(), "{case}: rootfs/tmp");
        assert!(b.rootfs().join(&top).join("deep/er").symlink_metadata().unwrap().is_dir(), "{case}");
        assert!(!Path::new("/").join(&top).exists(), "{case}: created on the host");
        before.assert_untouched(&case);
    }
}

// ---------------------------------------------------------------------------
// 4. A temp target behind a symlinked component

#[test]
fn case04_tmpdir_behind_a_symlinked_component() {
    require_root();
    let marker = Marker::new("c4");
    let before = host(&[&marker]);
    for rt in Runtime::ALL {
        // (name, /var link, TMPDIR, allowed hook mounts, expected count)
        let cases: Vec<(&str, String, &str, Vec<&str>, usize)> = vec![
            ("/var -> / with TMPDIR=/var/tmp", "/".into(), "/var/tmp", vec!["/tmp"], 1),
            ("/var -> .. with TMPDIR=/var/tmp", "..".into(), "/var/tmp", vec!["/tmp"], 1),
            ("/var -> host marker", marker.as_str().into(), "/var/tmp", vec!["/tmp"], 1),
            (
                "/var -> ../../.. host marker",
                format!("../../../../../..{}", marker.as_str()),
                "/var/tmp",
                vec!["/tmp"],
                1,
            ),
            ("/var -> /etc", "/etc".into(), "/var/tmp", vec!["/tmp"], 1),
            ("/var -> /proc/self/cwd", "/proc/self/cwd".into(), "/var/tmp", vec!["/tmp"], 1),
            ("/var -> /dev", "/dev".into(), "/var/shm", vec!["/tmp"], 1),
            ("/var -> /sys", "/sys".into(), "/var/fs/cgroup", vec!["/tmp"], 1),
        ];
        for (name, link, tmpdir, allowed, count) in cases {
            let case = format!("case 4 {name} ({rt:?})");
            let mut b = Bundle::new("c4");
            b.script(SHOW_MOUNTS).env(&format!("TMPDIR={tmpdir}")).inject(stage_for(rt));
            replace(&b, "var", |p| symlink(&link, p).unwrap());
            let r = run(&b, rt, &case);
            r.assert_ok();
            let ours = assert_hook_mounts_within(&r, &case, &allowed);
            assert_eq!(ours.len(), count, "{case}: {}", r.stdout());
            before.assert_untouched(&case);
        }
    }
}

// ---------------------------------------------------------------------------
// 5. A race against RENAME_EXCHANGE

#[test]
fn case05_rename_exchange_race_never_reaches_the_host() {
    require_root();
    let marker = Marker::new("c5");
    let before = host(&[&marker]);
    let marker_path = marker.as_str().to_string();
    const RUNS_PER_RUNTIME: usize = 110;
    let started = Instant::now();
    let outcomes: Vec<(Runtime, usize, usize, usize, usize)> = std::thread::scope(|s| {
        let handles: Vec<_> = Runtime::ALL
            .into_iter()
            .map(|rt| {
                let marker_path = marker_path.clone();
                s.spawn(move || {
                    let b = hooked("c5", stage_for(rt));
                    symlink(&marker_path, b.rootfs().join("tmp-link")).unwrap();
                    // With crun the marker's path also exists inside the rootfs: the symlink then
                    // resolves to that copy, which may get the tmpfs; the host's never does.
                    if rt == Runtime::Crun {
                        std::fs::create_dir_all(b.rootfs().join(&marker_path[1..])).unwrap();
                    }
                    let (mut mounted, mut on_copy, mut left_alone) = (0, 0, 0);
                    let swaps = race::under_swaps(&[b.rootfs().as_ref()], RUNS_PER_RUNTIME, false, |i, _| {
                        let case = format!("case 5 race run {i} ({rt:?})");
                        let r = run(&b, rt, &case);
                        r.assert_ok();
                        // The tmpfs lands on the real directory, wherever the swap left its name.
                        let ours = assert_hook_mounts_within(&r, &case, &["/tmp", "/tmp-link", &marker_path]);
                        assert!(ours.len() <= 1, "{case}: {}", r.stdout());
                        for m in &ours {
                            assert_tmpfs(m, m.size().unwrap(), &case);
                        }
                        match ours.first() {
                            None => left_alone += 1,
                            Some(m) if m.mount_point == marker_path => on_copy += 1,
                            Some(_) => mounted += 1,
                        }
                        let host_table = all_mounts("1");
                        assert_no_mount_under(&host_table, &marker_path, &case);
                        assert!(!host_table.iter().any(|m| m.source == HOOK_SOURCE), "{case}: host mount");
                    });
                    (rt, mounted, on_copy, left_alone, swaps)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    eprintln!(
        "case 5: {outcomes:?} (runtime, on the real tmp, on the rootfs copy of the marker path, left alone, swaps) in {:?}",
        started.elapsed()
    );
    let total: usize = outcomes.iter().map(|(_, m, c, l, _)| m + c + l).sum();
    assert!(total >= 200, "case 5: only {total} containers");
    before.assert_untouched("case 5 race");
}

// ---------------------------------------------------------------------------
// 6. The host's own /dev/shm

#[test]
fn case06_host_dev_shm_is_never_resized() {
    require_root();
    let marker = Marker::new("c6");
    symlink("/dev/shm", marker.path.join("shm-link")).unwrap();
    let sub = format!("/dev/shm/{}", unique("c6-sub"));
    std::fs::create_dir(&sub).unwrap();
    let before = host(&[&marker]);
    // The "host" is the runtimes' mount namespace, this test's own: pid 1's
    // on a plain host, the sid environment's own 64 MiB /dev/shm in tests/env/sid.sh.
    let host_shm_lines = || -> Vec<MountInfo> {
        all_mounts("self").into_iter().filter(|m| m.mount_point == "/dev/shm").collect()
    };
    let shm_before = host_shm_lines();
    let sources = [
        "/dev/shm".to_string(),
        "/dev//shm/".to_string(),
        marker.path.join("shm-link").display().to_string(),
        sub.clone(),
    ];
    for rt in Runtime::ALL {
        for source in &sources {
            let case = format!("case 6 /dev/shm binds {source} ({rt:?})");
            let mut b = Bundle::new("c6");
            b.script(SHOW_MOUNTS).annotate("oci-tmpfs-hook/shm-size", "100%");
            let mounts = b.config["mounts"].as_array_mut().unwrap();
            let shm = mounts.iter_mut().find(|m| m["destination"] == "/dev/shm").unwrap();
            *shm = json!({"destination": "/dev/shm", "type": "bind", "source": source,
                          "options": ["rbind", "rw", "nosuid", "nodev"]});
            b.inject(stage_for(rt));
            let r = run(&b, rt, &case);
            r.assert_ok();
            assert_hook_mounts_within(&r, &case, &["/tmp"]);
            let inside = mount_at(&r.mounts(), "/dev/shm").cloned().expect("/dev/shm in the container");
            // The top one: what `/dev/shm` resolves to (sid.sh mounts its own over the host's).
            let top = shm_before.last().expect("a /dev/shm in the runtimes' namespace");
            assert_eq!(inside.size(), top.size(), "{case}: {inside:?}");
            assert_eq!(host_shm_lines(), shm_before, "{case}");
            before.assert_untouched(&case);
        }
    }
    std::fs::remove_dir(&sub).unwrap();
}

// ---------------------------------------------------------------------------
// 7. Hostile state JSON

#[test]
fn case07_hostile_state_json() {
    require_root();
    let b = Bundle::new("c7");
    let bundle = b.dir.clone();
    let before = host(&[]);
    let other = Sleeper::new();
    // A host process in the host's own mount namespace, not us.
    let mut same_ns = Command::new("sleep").arg("300").spawn().unwrap();
    let gone = {
        let mut c = Command::new("true").spawn().unwrap();
        let pid = c.id();
        c.wait().unwrap();
        pid
    };
    let pid_max: i64 = std::fs::read_to_string("/proc/sys/kernel/pid_max").unwrap().trim().parse().unwrap();
    let with = |pid: Value| state(pid, &bundle);
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("empty", vec![], "not valid JSON"),
        ("not JSON", b"hello".to_vec(), "not valid JSON"),
        ("binary", (0..=255u8).cycle().take(5000).collect(), "not valid JSON"),
        ("100 MB", vec![b' '; 100 << 20], "larger than"),
        ("deeply nested", format!("{}{}", "[".repeat(50_000), "]".repeat(50_000)).into_bytes(), "JSON"),
        ("pid missing", state_value(json!({"ociVersion": "1", "id": "x", "bundle": bundle})), "pid"),
        ("pid 0", with(json!(0)), "pid"),
        ("pid -1", with(json!(-1)), "pid"),
        ("pid a string", with(json!("1")), "not valid JSON"),
        ("pid a float", with(json!(1e30)), "not valid JSON"),
        (
            "pid huge",
            br#"{"ociVersion":"1","id":"x","bundle":"/","pid":99999999999999999999}"#.to_vec(),
            "JSON",
        ),
        ("pid 2^32", with(json!(1u64 << 32)), "pid"),
        ("pid above pid_max", with(json!(pid_max + 1)), "process"),
        ("pid not existing", with(json!(gone)), "process"),
        ("pid 1, the host's init", with(json!(1)), "pid"),
        ("pid of the test process", with(json!(std::process::id())), "refusing"),
        ("pid of a host process", with(json!(same_ns.id())), "refusing"),
        (
            "relative bundle",
            state_value(json!({"ociVersion": "1", "id": "x", "pid": other.pid(), "bundle": "b"})),
            "absolute",
        ),
        (
            "empty bundle",
            state_value(json!({"ociVersion": "1", "id": "x", "pid": other.pid(), "bundle": ""})),
            "absolute",
        ),
        ("missing bundle", state(json!(other.pid()), Path::new("/nonexistent/bundle")), "nonexistent"),
        (
            "id with a newline",
            state_value(json!({"ociVersion": "1", "id": "a\nb", "pid": other.pid(), "bundle": bundle})),
            "id",
        ),
        (
            "id of 1 MiB",
            state_value(
                json!({"ociVersion": "1", "id": "a".repeat(1 << 19), "pid": other.pid(), "bundle": bundle}),
            ),
            "id",
        ),
    ];
    for (name, stdin, needle) in cases {
        let case = format!("case 7 state {name}");
        let d = hook_direct(&["hook", "--stage", "prestart"], stdin, &memory_capped());
        assert_refused(&d, &case, needle);
        before.assert_untouched(&case);
    }
    // pid 1 at every stage, and with the stage inferred: never the host.
    for args in [
        &["hook", "--stage", "createRuntime"][..],
        &["hook", "--stage", "createContainer"],
        &["hook", "--stage", "startContainer"],
        &["hook"],
    ] {
        let case = format!("case 7 pid 1 with {args:?}");
        let d = hook_direct(args, with(json!(1)), &HookCmd::default());
        assert_refused(&d, &case, "");
        before.assert_untouched(&case);
    }
    assert!(other.hook_mounts().is_empty(), "case 7: the bystander namespace got a mount");
    let _ = same_ns.kill();
    let _ = same_ns.wait();
}

// ---------------------------------------------------------------------------
// 8. Hostile config.json

#[test]
fn case08_hostile_config_json() {
    require_root();
    let target = Sleeper::new();
    let before = host(&[]);
    let good = Bundle::new("c8-good");
    let good_config = std::fs::read(good.dir.join("config.json")).unwrap();
    type Make = Box<dyn Fn(&Path)>;
    let write = |text: Vec<u8>| -> Make { Box::new(move |p: &Path| std::fs::write(p, &text).unwrap()) };
    let with_root = |path: &str| {
        let mut v: Value = serde_json::from_slice(&good_config).unwrap();
        v["root"]["path"] = json!(path);
        serde_json::to_vec(&v).unwrap()
    };
    let root_slash = with_root("/");
    let root_dotdot = with_root("../../../../../../..");
    let root_link = with_root("rootlink");
    let good_path = good.dir.join("config.json");
    let cases: Vec<(&str, Make, &str)> = vec![
        ("missing", Box::new(|_: &Path| {}), "opening"),
        ("garbage", write(b"\x00\xffgarbage{".to_vec()), "not a valid OCI config"),
        ("wrong shape", write(br#"{"ociVersion":"1","root":"x"}"#.to_vec()), "not a valid OCI config"),
        (
            "deeply nested",
            write(format!("{}{}", "[".repeat(1_000_000), "]".repeat(1_000_000)).into_bytes()),
            "not a valid OCI config",
        ),
        (
            "deeply nested field",
            write(
                format!(
                    r#"{{"ociVersion":"1","annotations":{{"a":{}1{}}}}}"#,
                    "[".repeat(100_000),
                    "]".repeat(100_000)
                )
                .into_bytes(),
            ),
            "not a valid OCI config",
        ),
        (
            "1 GiB sparse",
            Box::new(|p: &Path| std::fs::File::create(p).unwrap().set_len(1 << 30).unwrap()),
            "larger than",
        ),
        ("9 MiB", write(vec![b' '; 9 << 20]), "larger than"),
        (
            "a FIFO",
            Box::new(|p: &Path| {
                rustix::fs::mknodat(rustix::fs::CWD, p, rustix::fs::FileType::Fifo, 0o644.into(), 0).unwrap()
            }),
            "not a regular file",
        ),
        ("a symlink to /dev/zero", Box::new(|p: &Path| symlink("/dev/zero", p).unwrap()), "opening"),
        ("a symlink to a good config", Box::new(move |p: &Path| symlink(&good_path, p).unwrap()), "opening"),
        (
            "/dev/zero itself",
            Box::new(|p: &Path| {
                let dev = rustix::fs::makedev(1, 5);
                rustix::fs::mknodat(
                    rustix::fs::CWD,
                    p,
                    rustix::fs::FileType::CharacterDevice,
                    0o644.into(),
                    dev,
                )
                .unwrap()
            }),
            "not a regular file",
        ),
        ("a directory", Box::new(|p: &Path| std::fs::create_dir(p).unwrap()), "not a regular file"),
        (
            "a unix socket",
            Box::new(|p: &Path| drop(std::os::unix::net::UnixListener::bind(p).unwrap())),
            "opening",
        ),
        ("root.path is /", write(root_slash), "host's root"),
        ("root.path climbs to /", write(root_dotdot), "host's root"),
        ("root.path is a symlink to /", write(root_link), "host's root"),
    ];
    for (name, make, needle) in cases {
        let case = format!("case 8 config.json {name}");
        let dir = std::env::temp_dir().join("oci-tmpfs-hook-tests").join(unique("c8"));
        std::fs::create_dir_all(dir.join("rootfs/tmp")).unwrap();
        symlink("/", dir.join("rootlink")).unwrap();
        make(&dir.join("config.json"));
        let d =
            hook_direct(&["hook", "--stage", "prestart"], state(json!(target.pid()), &dir), &memory_capped());
        assert_refused(&d, &case, needle);
        assert!(target.hook_mounts().is_empty(), "{case}: a mount in the target namespace");
        before.assert_untouched(&case);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

// ---------------------------------------------------------------------------
// 9. Hostile sizes

const BAD_SIZES: &[&str] = &[
    "0",
    "-1",
    "1e30",
    "99999999999999999999999",
    "50%%",
    "101%",
    "0%",
    "1G,mode=4777",
    "1G,nr_inodes=0",
    "size=0",
    "１２３",
    "",
    " 1G",
    "1G\n",
    "1G\0",
    "\0",
    "1.5G",
];

#[test]
fn case09_hostile_sizes_are_refused_before_anything() {
    require_root();
    let target = Sleeper::new();
    let before = host(&[]);
    let huge = "9".repeat(1 << 20);
    let mut values: Vec<&str> = BAD_SIZES.to_vec();
    values.push(&huge);
    for key in ["oci-tmpfs-hook/tmp-size", "oci-tmpfs-hook/shm-size"] {
        for value in &values {
            let case = format!("case 9 annotation {key}={:?}", value.chars().take(20).collect::<String>());
            let mut b = Bundle::new("c9");
            b.annotate(key, value).write();
            let d = hook_direct(
                &["hook", "--stage", "prestart"],
                state(json!(target.pid()), &b.dir),
                &memory_capped(),
            );
            assert_refused(&d, &case, key);
            assert!(target.hook_mounts().is_empty(), "{case}: mounted");
            before.assert_untouched(&case);
        }
    }
    // The same values in the host config.
    let b = Bundle::new("c9-host");
    for key in ["tmp_size", "shm_size"] {
        for value in BAD_SIZES.iter().chain(["-1"].iter()) {
            let case = format!("case 9 host config {key}={value:?}");
            let conf = b.dir.join("host.toml");
            let text = match *value {
                "-1" => format!("{key} = -1\n"),
                v => format!("{key} = {}\n", toml_string(v)),
            };
            std::fs::write(&conf, text).unwrap();
            let d = hook_direct(
                &["hook", "--stage", "prestart", "--config", conf.to_str().unwrap()],
                state(json!(target.pid()), &b.dir),
                &HookCmd::default(),
            );
            assert_refused(&d, &case, "host config");
            assert!(target.hook_mounts().is_empty(), "{case}: mounted");
            before.assert_untouched(&case);
        }
    }
    for (name, text) in [("nr_inodes 0", "nr_inodes = 0\n"), ("nr_inodes -1", "nr_inodes = -1\n")] {
        let case = format!("case 9 host config {name}");
        let conf = b.dir.join("host.toml");
        std::fs::write(&conf, text).unwrap();
        let d = hook_direct(
            &["hook", "--stage", "prestart", "--config", conf.to_str().unwrap()],
            state(json!(target.pid()), &b.dir),
            &HookCmd::default(),
        );
        assert_refused(&d, &case, "host config");
    }
}

#[test]
fn case09_sizes_in_containers_are_exact_or_refused() {
    require_root();
    let before = host(&[]);
    for rt in Runtime::ALL {
        // Refused: the container does not start, and nothing is mounted unlimited.
        for value in ["0", "1G,mode=4777", "1G,nr_inodes=0"] {
            let case = format!("case 9 container annotation tmp-size={value:?} ({rt:?})");
            let mut b = Bundle::new("c9c");
            b.script("cat /proc/self/mountinfo; echo STARTED").annotate("oci-tmpfs-hook/tmp-size", value);
            b.inject(stage_for(rt));
            let r = run(&b, rt, &case);
            assert!(!r.output.status.success(), "{case}: started\n{}", r.stdout());
            assert!(!r.stdout().contains("STARTED"), "{case}");
            if rt == Runtime::Runc {
                // runc passes the hook's stderr on; crun does not (docs/design.md#hooks).
                assert!(r.stderr().contains("oci-tmpfs-hook/tmp-size"), "{case}: {}", r.stderr());
            }
            before.assert_untouched(&case);
        }
        // Accepted: exactly that size, mode 1777, nothing else.
        for (value, bytes) in [
            ("64Mi", 64 * MI),
            ("64m", 64 * MI),
            ("67108864", 64 * MI),
            ("65536KiB", 64 * MI),
            ("1", MI),
            ("3000000", 3_002_368),
        ] {
            let case = format!("case 9 container annotation tmp-size={value} ({rt:?})");
            let mut b = Bundle::new("c9c");
            b.script(SHOW_MOUNTS)
                .env("TMPDIR=/scratch")
                .annotate("oci-tmpfs-hook/tmp-size", value)
                .annotate("oci-tmpfs-hook/shm-size", "96Mi");
            b.inject(stage_for(rt));
            std::fs::create_dir(b.rootfs().join("scratch")).unwrap();
            let r = run(&b, rt, &case);
            r.assert_ok();
            let ours = assert_hook_mounts_within(&r, &case, &["/tmp", "/scratch"]);
            assert_eq!(ours.len(), 2, "{case}: {}", r.stdout());
            for m in &ours {
                assert_tmpfs(m, bytes, &case);
            }
            let shm = mount_at(&r.mounts(), "/dev/shm").cloned().unwrap();
            assert_eq!(shm.size(), Some(96 * MI), "{case}: {shm:?}");
            before.assert_untouched(&case);
        }
        // A percentage of the memory limit.
        let case = format!("case 9 50% of a 256Mi limit ({rt:?})");
        let mut b = Bundle::new("c9c");
        b.script(SHOW_MOUNTS).annotate("oci-tmpfs-hook/tmp-size", "50%");
        b.config["linux"]["resources"]["memory"] = json!({"limit": 256 * MI});
        b.inject(stage_for(rt));
        let r = run(&b, rt, &case);
        r.assert_ok();
        let ours = assert_hook_mounts_within(&r, &case, &["/tmp"]);
        assert_tmpfs(&ours[0], 128 * MI, &case);
        before.assert_untouched(&case);
    }
}

// ---------------------------------------------------------------------------
// 10. Hostile temp env

#[test]
fn case10_hostile_temp_env() {
    require_root();
    let before = host(&[]);
    let long = format!("/{}", "a".repeat(4999));
    let cases: Vec<(&str, Vec<String>, Vec<&str>, bool)> = vec![
        ("../../etc", vec!["TMPDIR=../../etc".into()], vec!["/tmp"], true),
        ("relative", vec!["TMPDIR=tmp".into()], vec!["/tmp"], true),
        ("/", vec!["TMPDIR=/".into()], vec!["/tmp"], true),
        ("/proc", vec!["TMPDIR=/proc".into()], vec!["/tmp"], true),
        ("/sys/fs/cgroup", vec!["TMPDIR=/sys/fs/cgroup".into()], vec!["/tmp"], true),
        ("/dev", vec!["TEMP=/dev".into()], vec!["/tmp"], true),
        ("/dev/shm", vec!["TMP=/dev/shm".into()], vec!["/tmp"], true),
        ("/tmp/../etc", vec!["TMPDIR=/tmp/../etc".into()], vec!["/tmp"], true),
        ("//tmp", vec!["TMPDIR=//tmp".into()], vec!["/tmp"], false),
        ("/etc/x", vec!["TEMPDIR=/etc/x".into()], vec!["/tmp"], true),
        ("5000 bytes", vec![format!("TMPDIR={long}")], vec!["/tmp"], true),
        ("empty", vec!["TMPDIR=".into()], vec!["/tmp"], true),
        ("a newline", vec!["TMPDIR=rel\noci-tmpfs-hook: forged line".into()], vec!["/tmp"], true),
        // The process gets the last (docs/design.md#env-last).
        (
            "given twice",
            vec!["TMPDIR=/first".into(), "TMPDIR=/second".into()],
            vec!["/tmp", "/second"],
            false,
        ),
        (
            "every variable",
            vec!["TMPDIR=/a".into(), "TEMP=/b".into(), "TMP=/c".into(), "TEMPDIR=/d".into()],
            vec!["/tmp", "/a", "/b", "/c", "/d"],
            false,
        ),
    ];
    for (name, env, allowed, warns) in cases {
        let case = format!("case 10 env {name}");
        let mut b = Bundle::new("c10");
        let (conf, log) = warnings_to_a_file(&b);
        b.script(SHOW_MOUNTS);
        for e in &env {
            b.env(e);
        }
        b.inject_with_config("prestart", &conf);
        let r = run(&b, Runtime::Runc, &case);
        r.assert_ok();
        let ours = assert_hook_mounts_within(&r, &case, &allowed);
        assert_eq!(ours.len(), allowed.len(), "{case}: {}", r.stdout());
        let text = read_text(&log);
        for line in text.lines() {
            assert!(line.starts_with("oci-tmpfs-hook: container "), "{case}: forged log line {line:?}");
        }
        assert_eq!(
            text.lines().any(|l| l.contains("warning") && l.contains("left alone")),
            warns,
            "{case}: log {text:?}"
        );
        before.assert_untouched(&case);
    }
    // An entry without '=' (runc refuses to start such a container; the hook ignores it).
    let case = "case 10 env entry without =";
    let mut b = Bundle::new("c10-noeq");
    b.env("TMPDIR").env("TEMP=/scratch").write();
    let target = Sleeper::new();
    let d = hook_prestart(state(json!(target.pid()), &b.dir));
    assert_ok(&d, case);
    let mut points: Vec<String> = target.hook_mounts().into_iter().map(|m| m.mount_point).collect();
    points.sort();
    let root = b.rootfs().display().to_string();
    assert_eq!(
        points,
        [format!("{root}/dev/shm"), format!("{root}/scratch"), format!("{root}/tmp")],
        "{case}"
    );
    before.assert_untouched(case);
    // Not UTF-8: runc's Go decoder accepts it; the hook refuses the config cleanly.
    let case = "case 10 env not UTF-8";
    let b = Bundle::new("c10-utf8");
    let text = std::fs::read_to_string(b.dir.join("config.json")).unwrap();
    let mut bytes = text.replacen("\"TERM=xterm\"", "\"TMPDIR=/x\u{1}\"", 1).into_bytes();
    let at = bytes.windows(2).position(|w| w == b"\x01\"").unwrap();
    bytes[at] = 0xff;
    std::fs::write(b.dir.join("config.json"), bytes).unwrap();
    let target = Sleeper::new();
    let d = hook_prestart(state(json!(target.pid()), &b.dir));
    assert_refused(&d, case, "not a valid OCI config");
    before.assert_untouched(case);
}

// ---------------------------------------------------------------------------
// 11. No mount namespace of its own

/// Nothing can be mounted safely for a container without a mount namespace
/// of its own: the hook leaves it alone, exits 0 and says why in one
/// warning, at every stage, and mounts nothing anywhere. A path is named as
/// given, never called a mount namespace (here: a network namespace's file).
#[test]
fn case11_no_own_mount_namespace_is_left_alone_with_one_warning() {
    require_root();
    let target = Sleeper::new();
    let before = host(&[]);
    let other_ns = format!("/proc/{}/ns/mnt", target.pid());
    let cases: Vec<(&str, Value, String)> = vec![
        ("no mount entry", json!([{"type": "pid"}, {"type": "ipc"}]), "no \"mount\" entry".into()),
        ("no namespaces at all", json!([]), "no \"mount\" entry".into()),
        (
            "a path to another namespace",
            json!([{"type": "pid"}, {"type": "mount", "path": other_ns}]),
            format!("names an existing namespace (path {other_ns})"),
        ),
        (
            "a path to the host's",
            json!([{"type": "mount", "path": "/proc/1/ns/mnt"}]),
            "names an existing namespace (path /proc/1/ns/mnt)".into(),
        ),
        (
            "a network namespace's file",
            json!([{"type": "mount", "path": "/proc/self/ns/net"}]),
            "names an existing namespace (path /proc/self/ns/net)".into(),
        ),
    ];
    for (name, namespaces, needle) in &cases {
        for stage in ["prestart", "createRuntime", "createContainer"] {
            let case = format!("case 11 {name} at {stage}");
            let mut b = Bundle::new("c11");
            b.config["linux"]["namespaces"] = namespaces.clone();
            b.write();
            let d = hook_direct(
                &["hook", "--stage", stage],
                state(json!(target.pid()), &b.dir),
                &HookCmd::default(),
            );
            assert_ok(&d, &case);
            let err = d.stderr();
            let lines: Vec<&str> = err.lines().collect();
            assert_eq!(lines.len(), 1, "{case}: one warning: {lines:?}");
            assert!(lines[0].contains(": warning: ") && lines[0].contains(needle.as_str()), "{case}: {err}");
            assert!(!lines[0].contains("mount namespace /proc"), "{case}: {err}");
            assert!(target.hook_mounts().is_empty(), "{case}: mounted");
            before.assert_untouched(&case);
        }
    }
    // A writable root without the annotation is not the hook's business at all.
    let mut b = Bundle::new("c11-rw");
    b.readonly(false).config["linux"]["namespaces"] = json!([]);
    b.write();
    let d = hook_prestart(state(json!(target.pid()), &b.dir));
    assert_ok(&d, "case 11 writable root");
    assert!(d.stderr().is_empty(), "case 11 writable root: {}", d.stderr());
    before.assert_untouched("case 11 writable root");
}

// ---------------------------------------------------------------------------
// 12. Registered twice

#[test]
fn case12_registered_twice_mounts_once() {
    require_root();
    let before = host(&[]);
    let stage_pairs: &[(&str, &str)] = &[
        ("prestart", "createRuntime"),
        ("prestart", "createContainer"),
        ("createRuntime", "createContainer"),
    ];
    for rt in Runtime::ALL {
        for (first, second) in stage_pairs {
            let case = format!("case 12 {first} + {second} ({rt:?})");
            let mut b = Bundle::new("c12");
            b.script(SHOW_MOUNTS)
                .env("TMPDIR=/var/tmp")
                .annotate("oci-tmpfs-hook/tmp-size", "32Mi")
                .annotate("oci-tmpfs-hook/shm-size", "80Mi")
                .inject(first)
                .inject(second);
            let r = run(&b, rt, &case);
            r.assert_ok();
            let ours = assert_hook_mounts_within(&r, &case, &["/tmp", "/var/tmp"]);
            assert_eq!(ours.len(), 2, "{case}: {}", r.stdout());
            assert_eq!(mount_at(&r.mounts(), "/dev/shm").unwrap().size(), Some(80 * MI), "{case}");
            before.assert_untouched(&case);
        }
        // The same entry twice by hand.
        let case = format!("case 12 same entry twice by hand ({rt:?})");
        let mut b = Bundle::new("c12");
        b.script(SHOW_MOUNTS).inject(stage_for(rt));
        let stage = stage_for(rt);
        let entry = b.config["hooks"][stage][0].clone();
        b.config["hooks"][stage].as_array_mut().unwrap().push(entry);
        let r = run(&b, rt, &case);
        r.assert_ok();
        assert_eq!(assert_hook_mounts_within(&r, &case, &["/tmp"]).len(), 1, "{case}");
        before.assert_untouched(&case);
    }
}

// ---------------------------------------------------------------------------
// 13. Load

#[test]
fn case13_fifty_containers_at_once() {
    require_root();
    let before = host(&[]);
    let started = Instant::now();
    let ids: Vec<(Runtime, String)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..50u64)
            .map(|i| {
                s.spawn(move || {
                    let rt = if i % 2 == 0 { Runtime::Runc } else { Runtime::Crun };
                    let case = format!("case 13 container {i} ({rt:?})");
                    let size = (16 + i) * MI;
                    let mut b = Bundle::new("c13");
                    b.script(SHOW_MOUNTS)
                        .env("TMPDIR=/var/tmp")
                        .annotate("oci-tmpfs-hook/tmp-size", &format!("{}Mi", 16 + i))
                        .inject(stage_for(rt));
                    std::fs::create_dir(b.rootfs().join("var/tmp")).unwrap();
                    let r = run(&b, rt, &case);
                    r.assert_ok();
                    let ours = assert_hook_mounts_within(&r, &case, &["/tmp", "/var/tmp"]);
                    assert_eq!(ours.len(), 2, "{case}: {}", r.stdout());
                    for m in &ours {
                        assert_tmpfs(m, size, &case);
                    }
                    (rt, r.id.clone())
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    eprintln!("case 13: 50 containers in {:?}", started.elapsed());
    for (rt, id) in &ids {
        let state_dir = Path::new("/run").join(rt.bin()).join(id);
        assert!(!state_dir.exists(), "case 13: left over {}", state_dir.display());
    }
    before.assert_untouched("case 13");
}

// ---------------------------------------------------------------------------
// 14. User namespaces

/// `chown -h -R` without following symlinks.
fn chown_tree(path: &Path, uid: u32, gid: u32) {
    std::os::unix::fs::lchown(path, Some(uid), Some(gid)).unwrap();
    if std::fs::symlink_metadata(path).unwrap().is_dir() {
        for e in std::fs::read_dir(path).unwrap() {
            chown_tree(&e.unwrap().path(), uid, gid);
        }
    }
}

#[test]
fn case14_user_namespace_containers_can_use_their_tmp() {
    require_root();
    let before = host(&[]);
    for rt in Runtime::ALL {
        // The container's root, then an unprivileged user (a Dockerfile USER).
        for (who, user) in
            [("root", json!({"uid": 0, "gid": 0})), ("uid 1000", json!({"uid": 1000, "gid": 1000}))]
        {
            let case = format!("case 14 user namespace, {who} ({rt:?})");
            let mut b = Bundle::new("c14");
            b.script(
                "cat /proc/self/mountinfo; id; echo OWNER $(stat -c %u:%g /tmp /scratch/deep); \
                 touch /tmp/f /scratch/deep/f /dev/shm/f && mkdir /tmp/d && echo > /tmp/d/x && rm -r /tmp/d && echo TMP_OK",
            )
            .env("TMPDIR=/scratch/deep")
            .annotate("oci-tmpfs-hook/shm-size", "80Mi");
            b.config["process"]["user"] = user;
            b.config["linux"]["namespaces"].as_array_mut().unwrap().push(json!({"type": "user"}));
            b.config["linux"]["uidMappings"] = json!([{"containerID": 0, "hostID": 100000, "size": 65536}]);
            b.config["linux"]["gidMappings"] = json!([{"containerID": 0, "hostID": 100000, "size": 65536}]);
            // prestart: /scratch/deep is created in the still writable rootfs.
            b.inject("prestart");
            chown_tree(&b.rootfs(), 100000, 100000);
            let r = run(&b, rt, &case);
            r.assert_ok();
            // uid 1000 has no passwd entry: HOME=/, whose caches get a
            // tmpfs each, the user's (docs/design.md#home-rule).
            let mut allowed = vec!["/tmp", "/scratch/deep"];
            if who == "uid 1000" {
                allowed.extend(ROOT_CACHES);
            }
            let ours = assert_hook_mounts_within(&r, &case, &allowed);
            assert_eq!(ours.len(), allowed.len(), "{case}: {}", r.stdout());
            assert!(r.stdout().contains("TMP_OK"), "{case}:\n{}\n{}", r.stdout(), r.stderr());
            // The container's root owns its tmpfs, as it would without a user namespace.
            assert!(r.stdout().contains("OWNER 0:0 0:0"), "{case}:\n{}", r.stdout());
            assert_eq!(mount_at(&r.mounts(), "/dev/shm").unwrap().size(), Some(80 * MI), "{case}");
            before.assert_untouched(&case);
        }
    }
}

/// The unprivileged user for rootless Podman, made on first use with its
/// subordinate id ranges; returns its uid and gid.
fn rootless_user() -> (u32, u32) {
    const USER: &str = "oth-rootless";
    if !Command::new("id").arg(USER).output().unwrap().status.success() {
        let out = Command::new("useradd").args(["-m", "-s", "/bin/sh", USER]).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success() || err.contains("already exists"), "useradd: {err}");
    }
    for file in ["/etc/subuid", "/etc/subgid"] {
        // No file yet: appending the line creates it.
        let listed =
            read_text_if_any(file).is_some_and(|t| t.lines().any(|l| l.starts_with(&format!("{USER}:"))));
        if !listed {
            let mut f = std::fs::OpenOptions::new().append(true).create(true).open(file).unwrap();
            std::io::Write::write_all(&mut f, format!("{USER}:400000:65536\n").as_bytes()).unwrap();
        }
    }
    let id = |flag: &str| -> u32 {
        let out = Command::new("id").args([flag, USER]).output().unwrap();
        String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
    };
    (id("-u"), id("-g"))
}

/// Stops the rootless Podman pause process (it keeps the user namespace of
/// `uid` alive after the containers are gone), by the pid Podman recorded.
struct PauseGuard(u32);

impl Drop for PauseGuard {
    fn drop(&mut self) {
        // Podman 4.3 keeps it under /tmp/podman-run-UID, Podman 5 under /tmp/storage-run-UID.
        let Some(pid) = ["podman-run", "storage-run"].iter().find_map(|dir| {
            let file = format!("/tmp/{dir}-{}/libpod/tmp/pause.pid", self.0);
            std::fs::read_to_string(&file).ok().and_then(|p| p.trim().parse::<i32>().ok())
        }) else {
            return;
        };
        let owned = std::fs::metadata(format!("/proc/{pid}")).is_ok_and(|m| m.uid() == self.0);
        if let (true, Some(pid)) = (owned, rustix::process::Pid::from_raw(pid)) {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
        }
    }
}

#[test]
fn case14_rootless_podman() {
    require_root();
    let before = host(&[]);
    let (uid, gid) = rootless_user();
    let _pause = PauseGuard(uid);
    // The bundle gives the busybox rootfs and the cleanup; Podman makes its own config.
    let b = Bundle::new("c14-podman");
    let dir = b.dir.clone();
    let hook = dir.join("oci-tmpfs-hook");
    std::fs::copy(hook_bin(), &hook).unwrap();
    std::fs::create_dir(dir.join("hooks")).unwrap();
    std::fs::create_dir(b.rootfs().join("var/tmp")).unwrap();
    let log = dir.join("hook.log");
    let conf = dir.join("host.toml");
    std::fs::write(
        &conf,
        format!("log_file = {}\nlog_level = \"info\"\n", toml_string(log.to_str().unwrap())),
    )
    .unwrap();
    // An oci-hooks(5) file as Podman reads it; Podman runs prestart hooks as createRuntime.
    let hooks_json = json!({
        "version": "1.0.0",
        "hook": {"path": hook, "args": ["oci-tmpfs-hook", "hook", "--stage", "createRuntime", "--config", conf],
                 "env": ["PATH=/usr/bin:/bin"]},
        "when": {"always": true},
        "stages": ["prestart"],
    });
    std::fs::write(dir.join("hooks/oci-tmpfs-hook.json"), serde_json::to_vec(&hooks_json).unwrap()).unwrap();
    chown_tree(&dir, uid, gid);
    for (who, user) in [("root", ""), ("uid 1000", "--user 1000:1000")] {
        let case = format!("case 14 rootless Podman, {who}");
        // Flags before --rootfs: podman run stops parsing flags at the first positional.
        // This sandbox caps rlimits: pass the session's own hard limits, nproc at most 32768
        // (crun in the rootless user namespace cannot raise it further here; docs/design.md#test-machine).
        let cmd = format!(
            "np=$(ulimit -Hu); [ \"$np\" = unlimited ] || [ \"$np\" -gt 32768 ] && np=32768; \
             cd /tmp && podman --storage-driver vfs --cgroup-manager cgroupfs --events-backend file run --rm \
             --network none --read-only --read-only-tmpfs=false --hooks-dir {hooks} \
             --ulimit nofile=$(ulimit -Hn):$(ulimit -Hn) --ulimit nproc=$np:$np {user} \
             --env TMPDIR=/var/tmp --annotation oci-tmpfs-hook/tmp-size=40Mi \
             --rootfs {rootfs} sh -c 'cat /proc/self/mountinfo; touch /tmp/f /var/tmp/f && echo TMP_OK; touch /dev/shm/f && echo SHM_OK; true'",
            hooks = dir.join("hooks").display(),
            rootfs = b.rootfs().display(),
        );
        let child = Command::new("su")
            .args(["-", "oth-rootless", "-s", "/bin/bash", "-c", &cmd])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let out =
            wait_timeout(child, Duration::from_secs(120)).unwrap_or_else(|| panic!("{case}: timed out"));
        let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        let log_text = read_text(&log);
        assert!(out.status.success(), "{case}: {stdout}\n{stderr}\nhook log:\n{log_text}");
        assert!(!stderr.contains("panicked"), "{case}: {stderr}");
        assert!(stdout.contains("TMP_OK"), "{case}: {stdout}\n{stderr}");
        // Podman 4.7+ binds /dev/shm read-only with --read-only-tmpfs=false.
        // Rootless, the hook runs in the user namespace, where the engine's
        // shm path cannot be proven (its parents show as the overflow uid):
        // it leaves /dev/shm alone and says so, so it stays read-only there
        // (docs/design.md#readonly-shm; rootful, it is made writable).
        let shm = mount_at(&parse_mountinfo(&stdout), "/dev/shm").cloned();
        let shm_ro = shm.as_ref().is_some_and(|m| m.has("ro"));
        assert_eq!(stdout.contains("SHM_OK"), !shm_ro, "{case}: {shm:?}\n{stdout}");
        assert!(
            !shm_ro || podman_version() >= (4, 7),
            "{case}: a read-only /dev/shm before Podman 4.7: {stdout}"
        );
        assert!(
            !shm_ro || log_text.contains("/dev/shm") && log_text.contains("not a trusted engine path"),
            "{case}: a read-only /dev/shm the hook did not explain:\n{log_text}"
        );
        let ours: Vec<MountInfo> =
            parse_mountinfo(&stdout).into_iter().filter(|m| m.source == HOOK_SOURCE).collect();
        let mut points: Vec<&str> = ours.iter().map(|m| m.mount_point.as_str()).collect();
        points.sort();
        // uid 1000's HOME=/ (Podman's passwd line or env): its caches too
        // (docs/design.md#home-rule).
        let mut want = vec!["/tmp", "/var/tmp"];
        if who == "uid 1000" {
            want.extend(ROOT_CACHES);
        }
        want.sort();
        assert_eq!(points, want, "{case}: {stdout}");
        for m in &ours {
            // The temp dirs are sized by the annotation; the caches by home_size.
            if !ROOT_CACHES.contains(&m.mount_point.as_str()) {
                assert_eq!(m.size(), Some(40 * MI), "{case}: {m:?}");
            }
            assert!(m.has("nosuid") && m.has("nodev"), "{case}: {m:?}");
        }
        assert!(log_text.contains("mounted tmpfs on /tmp"), "{case}: hook log {log_text}");
        before.assert_untouched(&case);
    }
}

// ---------------------------------------------------------------------------
// 15. Environment hygiene

#[test]
fn case15_hook_environment_does_not_change_its_behaviour() {
    require_root();
    let before = host(&[]);
    let mut b = Bundle::new("c15");
    b.env("TMPDIR=/var/tmp").annotate("oci-tmpfs-hook/tmp-size", "48Mi").write();
    let rootfs = b.rootfs();
    let outcome = |opts: &HookCmd<'_>, case: &str| {
        let target = Sleeper::new();
        let d = hook_direct(&["hook", "--stage", "prestart"], state(json!(target.pid()), &b.dir), opts);
        let err = d.stderr();
        assert_eq!(d.out.status.code(), Some(0), "{case}: {err}");
        assert!(!err.contains("panicked"), "{case}: {err}");
        // The dynamic loader complains about LD_PRELOAD; the hook itself says nothing.
        assert!(err.lines().all(|l| l.contains("LD_PRELOAD")), "{case}: {err}");
        let mounts: Vec<(String, Option<u64>, Vec<String>)> = target
            .hook_mounts()
            .into_iter()
            .map(|m| (m.mount_point.clone(), m.size(), m.super_options.clone()))
            .collect();
        before.assert_untouched(case);
        mounts
    };
    let clean = outcome(&HookCmd::default(), "case 15 clean environment");
    // /tmp, /var/tmp, and /dev/shm (not a mount in the sleeper's namespace: a fresh one).
    assert_eq!(clean.len(), 3, "case 15: {clean:?}");
    let hostile_env = vec![
        ("LD_PRELOAD", "/nonexistent/libevil.so".to_string()),
        ("LD_LIBRARY_PATH", rootfs.join("lib").display().to_string()),
        ("TMPDIR", "/etc".to_string()),
        ("TMP", rootfs.display().to_string()),
        ("TEMP", "../..".to_string()),
        ("PATH", rootfs.join("bin").display().to_string()),
        ("HOME", rootfs.display().to_string()),
        ("RUST_BACKTRACE", "full".to_string()),
    ];
    for cwd in [rootfs.clone(), rootfs.join("tmp"), PathBuf::from("/etc")] {
        let case = format!("case 15 hostile environment, cwd {}", cwd.display());
        let opts = HookCmd { env: hostile_env.clone(), cwd: Some(&cwd), ..HookCmd::default() };
        assert_eq!(outcome(&opts, &case), clean, "{case}");
    }
}

// ---------------------------------------------------------------------------
// 16. Kernel features unavailable

/// Runs the hook under a seccomp filter that fails `syscalls` with ENOSYS, as
/// on a kernel without them (python3-seccomp, from .ci/run).
fn without_syscalls(syscalls: &str) -> HookCmd<'static> {
    const PY: &str = "import errno, os, sys, seccomp\n\
        f = seccomp.SyscallFilter(defaction=seccomp.ALLOW)\n\
        for name in sys.argv[1].split(','):\n    f.add_rule(seccomp.ERRNO(errno.ENOSYS), name)\n\
        f.load()\n\
        os.execv(sys.argv[2], sys.argv[2:])\n";
    HookCmd {
        prefix: vec!["/usr/bin/python3".into(), "-c".into(), PY.into(), syscalls.into()],
        ..HookCmd::default()
    }
}

#[test]
fn case16_missing_kernel_features_are_a_clean_refusal() {
    require_root();
    let before = host(&[]);
    let b = Bundle::new("c16");
    for (syscalls, needle) in [
        ("openat2", "openat2"),
        ("fsopen", "fsopen"),
        ("fsopen,fsconfig,fsmount,move_mount", "fsopen"),
        ("pidfd_open", "pidfd_open"),
        ("fspick", "fspick"),
    ] {
        let case = format!("case 16 without {syscalls}");
        let target = Sleeper::new();
        // As a runtime mounts the spec's /dev/shm: the hook grows it with fspick.
        std::fs::create_dir_all(b.rootfs().join("dev/shm")).unwrap();
        target.mount_tmpfs(&b.rootfs().join("dev/shm"), "1m");
        let d = hook_direct(
            &["hook", "--stage", "prestart"],
            state(json!(target.pid()), &b.dir),
            &without_syscalls(syscalls),
        );
        assert_refused(&d, &case, needle);
        assert!(d.stderr().contains("Linux"), "{case}: the message names the kernel needed: {}", d.stderr());
        assert!(target.hook_mounts().is_empty(), "{case}: mounted without {syscalls}");
        before.assert_untouched(&case);
    }
}

// ---------------------------------------------------------------------------
// 17. An image /tmp past copy-up's bounds

/// The md5 of `path` on the host, as busybox `md5sum` prints it.
fn md5_on_host(path: &Path) -> String {
    let out = Command::new("md5sum").arg(path).output().unwrap();
    assert!(out.status.success(), "md5sum {}", path.display());
    String::from_utf8_lossy(&out.stdout).split(' ').next().unwrap().to_string()
}

#[test]
fn case17_an_image_tmp_past_the_copy_up_bounds_is_left_alone() {
    require_root();
    let before = host(&[]);
    // (name, what the image's /tmp holds, what the container prints, the bound in the warning)
    type Fill = fn(&Path) -> String;
    let cases: [(&str, Fill, &str); 2] = [
        (
            "a 100 MiB file (past 64 MiB of data)",
            |tmp| {
                // Not sparse: every byte is data, so only the byte bound trips.
                let chunk: Vec<u8> = (0..MI).map(|i| (i % 251) as u8 + 1).collect();
                let mut f = std::fs::File::create(tmp.join("big")).unwrap();
                for _ in 0..100 {
                    std::io::Write::write_all(&mut f, &chunk).unwrap();
                }
                format!("SIZE={} {}", 100 * MI, md5_on_host(&tmp.join("big")))
            },
            "more than 64Mi of file data",
        ),
        (
            "5000 empty files (past 4096 entries)",
            |tmp| {
                for i in 0..5000 {
                    std::fs::File::create(tmp.join(format!("f{i}"))).unwrap();
                }
                "ENTRIES=5000".to_string()
            },
            "more than 4096 entries",
        ),
    ];
    for rt in Runtime::ALL {
        for (name, fill, bound) in cases {
            let case = format!("case 17 the image's /tmp holds {name} ({rt:?})");
            let mut b = Bundle::new("c17");
            let (conf, log) = warnings_to_a_file(&b);
            symlink("busybox", b.rootfs().join("bin/md5sum")).unwrap();
            let want = fill(&b.rootfs().join("tmp"));
            // A tmpfs big enough for the file: only copy-up's own bound trips.
            b.script(
                "cat /proc/self/mountinfo; \
                 if [ -f /tmp/big ]; then echo SIZE=$(stat -c %s /tmp/big) $(md5sum /tmp/big); \
                 else echo ENTRIES=$(ls /tmp | wc -l); fi; \
                 touch /tmp/new 2>/dev/null && echo WRITABLE; true",
            )
            .annotate("oci-tmpfs-hook/tmp-size", "1Gi");
            b.inject_with_config(stage_for(rt), &conf);
            let r = run(&b, rt, &case);
            r.assert_ok();
            // Nothing of the image hidden: no tmpfs of ours over /tmp (it
            // stays the image's, read-only), every byte of it still there.
            assert_hook_mounts_within(&r, &case, &[]);
            let stdout = r.stdout();
            let got = stdout.lines().find(|l| l.starts_with("SIZE=") || l.starts_with("ENTRIES="));
            let got = got.map(|l| l.trim_end_matches(" /tmp/big").to_string());
            assert_eq!(got.as_deref(), Some(want.as_str()), "{case}: {stdout}");
            assert!(!stdout.contains("WRITABLE"), "{case}: /tmp stays the image's, read-only");
            let text = read_text(&log);
            let warnings: Vec<&str> = text.lines().filter(|l| l.contains("warning")).collect();
            assert_eq!(warnings.len(), 1, "{case}: one warning: {text}");
            for needle in ["/tmp", bound, "left alone", "make it a volume, or empty it in the image"] {
                assert!(warnings[0].contains(needle), "{case}: the warning says {needle:?}: {text}");
            }
            before.assert_untouched(&case);
        }
    }
}
