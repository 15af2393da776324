//! The hostile cases that apply to the runtime wrapper's spec executor
//! (docs/design.md#executors): the wrapper checks each target against the prepared rootfs by
//! fd before it writes a mount into `config.json`, and grows an engine-made
//! `/dev/shm` on the host only after checking what it opened. Each case runs
//! a real container through `oci-tmpfs-hook runtime -- run` with runc and
//! crun in spec mode, and checks that the host is untouched: no tmpfs of ours
//! in the host's mount table, a marker dir outside every rootfs unchanged,
//! the host's `/dev/shm` (and a decoy tmpfs) not resized. Root, no skips.

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::support::host::{hold_host, HostGuard, HostUse};
use crate::support::*;
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
        let mut out: Vec<(String, u64)> = walk(&self.0, true)
            .iter()
            .map(|e| (e.path.display().to_string(), if e.meta.is_dir() { 0 } else { e.meta.len() }))
            .collect();
        out.sort();
        out
    }
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
            let mounts = parse_mountinfo(&read_text(format!("/proc/{pid}/mountinfo")));
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
    run_wrapped_as(b, rt, case, &unique("spec"))
}

/// [`run_wrapped`] as container `id`.
fn run_wrapped_as(b: &Bundle, rt: Runtime, case: &str, id: &str) -> (String, String) {
    let (stdout, stderr, config) = wrap(b, rt, case, id);
    if runc_before_1_1_8(rt) {
        // runc < 1.1.8 chmods a tmpfs mountpoint by path after mounting it:
        // the wrapper hands the temp targets to our hook there
        // (docs/design.md#runtimes), so spec mode shows our hook.
        assert_eq!(
            our_hook_stages(&config),
            ["prestart"],
            "{case}: runc {:?} in spec mode: our hook in {}",
            runtime_version(rt),
            config["hooks"]
        );
    } else {
        assert_eq!(config["hooks"], Value::Null, "{case}: spec mode adds no hook: {stderr}");
    }
    (stdout, stderr)
}

/// The stages at which `config` runs our hook.
fn our_hook_stages(config: &Value) -> Vec<String> {
    let ours = hook_bin().display().to_string();
    let hooks = config["hooks"].as_object().into_iter().flatten();
    hooks
        .filter(|(_, list)| list.as_array().is_some_and(|l| l.iter().any(|h| h["path"] == ours.as_str())))
        .map(|(stage, _)| stage.clone())
        .collect()
}

/// The destinations of the tmpfs entries of ours in `config`.
fn our_spec_entries(config: &Value) -> Vec<String> {
    let mounts = config["mounts"].as_array().into_iter().flatten();
    mounts
        .filter(|m| m["source"] == OURS)
        .filter_map(|m| m["destination"].as_str())
        .map(String::from)
        .collect()
}

/// Runs `b` through the wrapper in spec mode as container `id`: its
/// stdout, its stderr with the hook's log lines, and the `config.json` the
/// wrapper left.
fn wrap(b: &Bundle, rt: Runtime, case: &str, id: &str) -> (String, String, Value) {
    if rt == Runtime::Crun {
        crun_cgroup_fix();
    }
    b.write();
    let real = which(rt.bin());
    let config = b.dir.join("host-config.toml");
    // A log file: where the runtime does not show a hook's stderr (runc on
    // success), it is the only place the hook's lines reach.
    let log = b.dir.join("ours.log");
    let _ = std::fs::remove_file(&log);
    std::fs::write(
        &config,
        format!("mode = \"spec\"\nlog_level = \"info\"\nruntime_path = {real:?}\nlog_file = {log:?}\n"),
    )
    .unwrap();
    let _guard = ContainerGuard { runtime: rt, id: id.to_string() };
    let child = Command::new(hook_bin())
        .env("OCI_TMPFS_HOOK_CONFIG", &config)
        .args(["runtime", "--", "run", "--bundle"])
        .arg(&b.dir)
        .arg(id)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = wait_timeout(child, Duration::from_secs(60)).unwrap_or_else(|| panic!("{case}: timed out"));
    // stderr, then the hook's lines from the log (the wrapper's are in both).
    // No log file: the wrapper failed before it opened it, which the status
    // check below reports; a run that succeeded must have left one.
    let logged = read_text_if_any(&log);
    let hook_lines: String = match &logged {
        Some(text) => text
            .lines()
            .filter(|l| !String::from_utf8_lossy(&out.stderr).contains(*l))
            .map(|l| format!("{l}\n"))
            .collect(),
        None => format!("(no log file {})\n", log.display()),
    };
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        format!("{}{hook_lines}", String::from_utf8_lossy(&out.stderr)),
    );
    assert!(out.status.success(), "{case}: {:?}\nstdout:\n{stdout}\nstderr:\n{stderr}", out.status);
    assert!(logged.is_some(), "{case}: the wrapper ran but wrote no log file {}", log.display());
    assert!(!stderr.contains("panicked"), "{case}: {stderr}");
    let config: Value = serde_json::from_slice(&std::fs::read(b.dir.join("config.json")).unwrap()).unwrap();
    (stdout, stderr, config)
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

/// Nothing of the image is hidden (docs/design.md#image-files): an image
/// `/tmp` that holds files (a dotfile, a subdirectory, a symlink) gets a
/// spec entry with `tmpcopyup` (docs/design.md#tmpcopyup), the runtime
/// copying them into the tmpfs, mode 1777, no hook; with a FIFO beside
/// them (which runc's copy fails the start on) it goes to our hook at
/// `prestart`, whose copy-up puts the files into the tmpfs and leaves the
/// FIFO out; an empty one goes into the spec without `tmpcopyup`. runc
/// before 1.1.8 takes the hook for every temp target.
#[test]
fn spec_mode_gives_an_image_tmp_that_holds_files_to_the_runtimes_copy_or_the_hook() {
    require_root();
    let marker = Marker::new();
    const LOOK: &str = "cat /proc/self/mountinfo; echo END-MOUNTS; cat /tmp/.dotfile /tmp/sub/f; echo; \
        ls -l /tmp/link; stat -c 'MODE %a' /tmp; touch /tmp/new && echo WRITABLE; true";
    for (rt, fifo) in Runtime::ALL.into_iter().flat_map(|rt| [(rt, false), (rt, true)]) {
        let case = format!("an image /tmp that holds files, a FIFO {fifo} ({rt:?})");
        let host = before(&marker);
        let mut b = Bundle::new("spec-files");
        // Root's home is /tmp here: no HOME target, whose caches-only rule
        // would nest cache dirs in /tmp (tests/runtimes/home.rs has homes).
        b.script(LOOK).annotate("oci-tmpfs-hook/tmp-size", "32Mi").annotate("oci-tmpfs-hook/home", "false");
        let tmp = b.rootfs().join("tmp");
        std::fs::write(tmp.join(".dotfile"), b"image-dot").unwrap();
        std::fs::create_dir(tmp.join("sub")).unwrap();
        std::fs::write(tmp.join("sub/f"), b"image-sub").unwrap();
        symlink("/etc/passwd", tmp.join("link")).unwrap();
        if fifo {
            assert!(std::process::Command::new("mkfifo").arg(tmp.join("fifo")).status().unwrap().success());
            // A target left alone, in a plan the wrapper hands to the hook:
            // the hook plans again and says so; the wrapper does not too.
            b.env("TMPDIR=/etc/scratch");
        }
        let (stdout, stderr, config) = wrap(&b, rt, &case, &unique("spec"));
        if fifo {
            let log = std::fs::read_to_string(b.dir.join("ours.log")).expect("the wrapper's log file");
            let said: Vec<&str> = log.lines().filter(|l| l.contains("/etc/scratch")).collect();
            assert_eq!(said.len(), 1, "{case}: TMPDIR=/etc/scratch is warned once:\n{log}");
        }
        if runc_before_1_1_8(rt) || fifo {
            assert_eq!(our_hook_stages(&config), ["prestart"], "{case}: our hook carries /tmp: {stderr}");
            assert_eq!(our_spec_entries(&config), Vec::<String>::new(), "{case}: no spec tmpfs for /tmp");
        } else {
            assert_eq!(config["hooks"], Value::Null, "{case}: no hook: {stderr}");
            assert_eq!(our_spec_entries(&config), ["/tmp"], "{case}: the spec carries /tmp: {stderr}");
            let tmp_entry = config["mounts"].as_array().unwrap().iter().find(|m| m["destination"] == "/tmp");
            let options = &tmp_entry.expect("/tmp's entry")["options"];
            assert!(options.as_array().unwrap().iter().any(|o| o == "tmpcopyup"), "{case}: {options}");
        }
        if fifo && !runc_before_1_1_8(rt) {
            assert!(stderr.contains("the image's /tmp holds a FIFO at ./fifo"), "{case}: says why: {stderr}");
        }
        assert_eq!(ours_at(&stdout), ["/tmp"], "{case}: {stdout}");
        let after = stdout.split("END-MOUNTS").nth(1).unwrap_or("");
        assert!(after.contains("image-dotimage-sub"), "{case}: the image's files: {after}");
        assert!(after.contains("link -> /etc/passwd"), "{case}: the symlink, as a symlink: {after}");
        assert!(after.contains("MODE 1777"), "{case}: the tmpfs' mode: {after}");
        assert!(after.contains("WRITABLE"), "{case}: /tmp writable: {after}");
        assert!(!tmp.join("new").exists(), "{case}: the write went to the tmpfs, not the image");
        host.assert_untouched(&marker, &case);
    }
    for rt in Runtime::ALL {
        let case = format!("an empty image /tmp ({rt:?})");
        let host = before(&marker);
        let mut b = Bundle::new("spec-files");
        b.script(LOOK).annotate("oci-tmpfs-hook/tmp-size", "32Mi");
        let (stdout, stderr, config) = wrap(&b, rt, &case, &unique("spec"));
        if runc_before_1_1_8(rt) {
            assert_eq!(our_hook_stages(&config), ["prestart"], "{case}: {stderr}");
        } else {
            assert_eq!(config["hooks"], Value::Null, "{case}: no hook: {stderr}");
            assert_eq!(our_spec_entries(&config), ["/tmp"], "{case}: the spec carries /tmp: {stderr}");
        }
        assert!(!stderr.contains("holds files"), "{case}: {stderr}");
        let tmp_entry =
            config["mounts"].as_array().unwrap().iter().find(|m| m["destination"] == "/tmp").cloned();
        // No /tmp entry (the hook's runc) has no tmpcopyup either.
        assert!(!tmp_entry.is_some_and(|e| e.to_string().contains("tmpcopyup")), "{case}: nothing to copy");
        assert_eq!(ours_at(&stdout), ["/tmp"], "{case}: {stdout}");
        assert!(stdout.contains("WRITABLE"), "{case}: /tmp writable: {stdout}");
        host.assert_untouched(&marker, &case);
    }
}

/// Where the engine-shm stand-ins live: root-owned 0755 directories all
/// the way down, as an engine's state dir (`/var/lib/docker/containers`);
/// not under /tmp, whose 1777 the spec executor refuses as a parent.
const ENGINE_BASE: &str = "/var/lib/oci-tmpfs-test";

/// A directory tree under [`ENGINE_BASE`] for one case, removed on drop
/// with every tmpfs mounted in it. Those mounts are on the host:
/// tests/runtimes/hostile.rs's mount-table pictures wait until they are gone.
struct EngineDir(PathBuf, HostGuard);

impl EngineDir {
    fn new() -> EngineDir {
        let dir = Path::new(ENGINE_BASE).join(unique("engine"));
        mkdirs(&dir);
        EngineDir(dir, hold_host(HostUse::Change))
    }

    /// A tmpfs of `size` at `rel` (made with root-owned 0755 parents).
    fn tmpfs(&self, rel: &str, size: &str) -> PathBuf {
        let dir = self.0.join(rel);
        mkdirs(&dir);
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "decoy"])
            .arg(&dir)
            .status();
        assert!(ok.is_ok_and(|s| s.success()), "mounting a tmpfs on {}", dir.display());
        dir
    }

    /// Each tmpfs mounted under this tree: (mount point, size in bytes).
    fn tmpfs_sizes(&self) -> Vec<(String, u64)> {
        self.mounts()
            .into_iter()
            .filter(|m| m.fstype == "tmpfs")
            .map(|m| {
                let size = fs_bytes(Path::new(&m.mount_point));
                (m.mount_point, size)
            })
            .collect()
    }

    fn mounts(&self) -> Vec<MountInfo> {
        let base = format!("{}/", self.0.display());
        let text = read_text("/proc/self/mountinfo");
        parse_mountinfo(&text).into_iter().filter(|m| m.mount_point.starts_with(&base)).collect()
    }
}

impl Drop for EngineDir {
    fn drop(&mut self) {
        let mut inside: Vec<String> = self.mounts().into_iter().map(|m| m.mount_point).collect();
        inside.sort();
        for m in inside.iter().rev() {
            let _ = Command::new("umount").arg("-l").arg(m).status();
        }
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `create_dir_all` with mode 0755 on every directory it makes.
fn mkdirs(dir: &Path) {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new().recursive(true).mode(0o755).create(dir).unwrap();
}

fn bind_shm(b: &mut Bundle, source: &Path) {
    let mounts = b.config["mounts"].as_array_mut().unwrap();
    let shm = mounts.iter_mut().find(|m| m["destination"] == "/dev/shm").unwrap();
    *shm = json!({"destination": "/dev/shm", "type": "bind", "source": source, "options": ["rbind", "rprivate"]});
}

/// Where a case's shm source is: made in the case's tree, for container
/// `id`, next to a 64 MiB `decoy` tmpfs.
type Source = fn(&EngineDir, &str, &Path) -> PathBuf;

#[test]
fn spec_mode_grows_only_a_real_engine_shm_on_the_host() {
    require_root();
    let marker = Marker::new();
    for rt in Runtime::ALL {
        // The engine's shm (at <state>/<container id>/shm, as Docker's and a
        // CRI pod's are): grown on the host, by fd, to the container's size.
        let case = format!("engine shm ({rt:?})");
        let id = unique("spec");
        let dirs = EngineDir::new();
        let engine = dirs.tmpfs(&format!("{id}/shm"), "64m");
        let host = before(&marker);
        let mut b = Bundle::new("spec-shm");
        b.script(SHOW).annotate("oci-tmpfs-hook/shm-size", "80Mi");
        bind_shm(&mut b, &engine);
        let (stdout, stderr) = run_wrapped_as(&b, rt, &case, &id);
        assert_eq!(fs_bytes(&engine), 80 * MI, "{case}: {stderr}");
        assert_eq!(
            mount_at(&mounts_of(&stdout), "/dev/shm").and_then(MountInfo::size),
            Some(80 * MI),
            "{case}"
        );
        assert!(stderr.contains("grew /dev/shm from 64Mi to 80Mi (on the host"), "{case}: {stderr}");
        host.assert_untouched(&marker, &case);

        // --ipc=host, a symlink to a tmpfs, a symlinked parent, a plain
        // directory, a tmpfs whose path lacks the container's id: never
        // resized. The others are at <tree>/<id>/shm, with the run's id.
        let cases: [(&str, Source, &str); 5] = [
            ("host IPC", |_, _, _| PathBuf::from("/dev/shm"), "host's /dev/shm"),
            (
                "a symlink to a tmpfs",
                |d, id, decoy| {
                    mkdirs(&d.0.join(id));
                    let link = d.0.join(id).join("shm");
                    symlink(decoy, &link).unwrap();
                    link
                },
                "without following a symlink",
            ),
            (
                "a symlinked parent reaching a tmpfs at <real>/<id>/shm",
                |d, id, _| {
                    d.tmpfs(&format!("real/{id}/shm"), "64m");
                    symlink(d.0.join("real"), d.0.join("link")).unwrap();
                    d.0.join("link").join(id).join("shm")
                },
                "without following a symlink",
            ),
            (
                "a plain directory",
                |d, id, _| {
                    let dir = d.0.join(id).join("shm");
                    mkdirs(&dir);
                    dir
                },
                "not the root of a mount",
            ),
            (
                "a tmpfs without the container's id in its path",
                |d, _, _| d.tmpfs("other/shm", "64m"),
                "not the engine's shm",
            ),
        ];
        for (name, source, reason) in cases {
            let case = format!("shm source is {name} ({rt:?})");
            let id = unique("spec");
            let dirs = EngineDir::new();
            let decoy = dirs.tmpfs("decoy", "64m");
            let source = source(&dirs, &id, &decoy);
            let host = before(&marker);
            let mut b = Bundle::new("spec-shm");
            b.script(SHOW).annotate("oci-tmpfs-hook/shm-size", "80Mi");
            bind_shm(&mut b, &source);
            let (_, stderr) = run_wrapped_as(&b, rt, &case, &id);
            assert!(stderr.contains(reason), "{case}: {stderr}");
            assert_eq!(fs_bytes(&decoy), 64 * MI, "{case}: the decoy tmpfs was resized\n{stderr}");
            // Every tmpfs of the case (the decoy, one reached through the source) keeps its size.
            for (at, size) in dirs.tmpfs_sizes() {
                assert_eq!(size, 64 * MI, "{case}: the tmpfs at {at} was resized\n{stderr}");
            }
            host.assert_untouched(&marker, &case);
        }
    }
}
