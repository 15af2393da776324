//! A read-only container without a mount namespace of its own (no `mount`
//! entry in `linux.namespaces`, or one with a `path`: what runtime-tools'
//! `linux_ns_itype` and `linux_ns_path` run), through real runc and crun:
//! bare, with our hook at each stage, and through the wrapper in spec and
//! hook mode. Nothing can be mounted there safely, so ours leaves it alone
//! (docs/design.md#hostile-rootfs): it starts and runs as it does with the
//! bare runtime, ours writes one warning, and no tmpfs of ours appears in
//! the container, in the namespace it uses, or on the host.
//!
//! A runtime makes its own mounts in whatever namespace the container uses
//! (crun 1.8.1 without a `mount` entry mounts the spec's `/proc`, `/dev`,
//! `/sys` in the runtime's namespace and leaves them there; measured), so no
//! case here runs in the host's: without an entry the runtime itself runs in
//! a fresh private namespace (`unshare -m`; the spec has no mounts, which no
//! runtime makes there anyway, and `/proc` is mounted in the rootfs first),
//! and a joined namespace is a helper process's private one, fresh per run
//! (the runtime `pivot_root`s inside it).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::support::host::{hold_host, HostUse};
use crate::support::*;
use serde_json::json;

/// The `source` of every tmpfs of ours.
const OURS: &str = "oci-tmpfs-hook";
/// The stages a hook of ours may be registered at.
const STAGES: [&str; 3] = ["prestart", "createRuntime", "createContainer"];

/// How the container gets (or lacks) its mount namespace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shape {
    /// No `mount` entry in `linux.namespaces`.
    NoEntry,
    /// A `mount` entry whose `path` is a helper's namespace.
    Joined,
}

/// One finished run.
struct Ran {
    ok: bool,
    stdout: String,
    stderr: String,
    /// Our log file's lines (the hook's and the wrapper's).
    log: Vec<String>,
    /// What the warning must say.
    needle: String,
    /// `config.json` before and after the run.
    config: (Vec<u8>, Vec<u8>),
    /// Our tmpfs mounts in the helper's namespace after the run.
    helper_ours: Vec<MountInfo>,
    /// The stages whose counting hooks ran, once a line per run ([`Via::Bare`]:
    /// the runtime alone, with a shell hook at each stage that counts its runs).
    hook_runs: Vec<String>,
}

impl Ran {
    /// The container's mount table as it printed it: point, type, source, size.
    fn table(&self) -> Vec<(String, String, String, Option<u64>)> {
        parse_mountinfo(&self.stdout)
            .into_iter()
            .map(|m| (m.mount_point.clone(), m.fstype.clone(), m.source.clone(), m.size()))
            .collect()
    }
}

/// Runs a read-only busybox container of `shape` with `rt`, `way`.
fn run(rt: Runtime, shape: Shape, way: Via) -> Ran {
    let mut b = Bundle::new(&format!("ns-{}-{shape:?}", rt.bin()));
    b.script("cat /proc/self/mountinfo; echo RAN");
    let helper = (shape == Shape::Joined).then(Sleeper::new);
    let needle = match &helper {
        None => {
            let linux = b.config["linux"].as_object_mut().unwrap();
            linux["namespaces"].as_array_mut().unwrap().retain(|n| n["type"] != "mount");
            // runc refuses these without a mount namespace of its own.
            linux.remove("maskedPaths");
            linux.remove("readonlyPaths");
            b.config["mounts"] = json!([]);
            "linux.namespaces has no \"mount\" entry".to_string()
        }
        Some(h) => {
            let ns = b.config["linux"]["namespaces"].as_array_mut().unwrap();
            let mnt = ns.iter_mut().find(|n| n["type"] == "mount").unwrap();
            mnt["path"] = json!(h.ns());
            format!("names an existing namespace (path {})", h.ns())
        }
    };
    let real = which(rt.bin());
    let log = b.dir.join("ours.log");
    let cfg = b.dir.join("host.toml");
    let mode = match way {
        Via::Wrapper(mode) => mode,
        _ => "spec",
    };
    std::fs::write(&cfg, format!("mode = {mode:?}\nruntime_path = {real:?}\nlog_file = {log:?}\n")).unwrap();
    match way {
        Via::Hook(stage) => {
            b.inject_with_config(stage, &cfg);
        }
        Via::Bare => {
            let runs = b.dir.join("hook-runs");
            for stage in STAGES {
                // The hook reads the state the runtime writes to its stdin
                // first: crun fails a hook that exits before its write
                // ("writing to pipe: Broken pipe").
                let count = format!("while read -r _; do :; done; echo {stage} >> {}", runs.display());
                b.config["hooks"][stage] = json!([{"path": "/bin/sh", "args": ["sh", "-c", count]}]);
            }
            b.write();
        }
        Via::Wrapper(_) => b.write(),
        Via::InjectSpec => panic!("no mount namespace case runs through inject --mode spec"),
    }
    let config_before = std::fs::read(b.dir.join("config.json")).unwrap();
    let id = unique("ns-c");
    let mut argv: Vec<PathBuf> = Vec::new();
    if shape == Shape::NoEntry {
        let script = "mount -t proc proc \"$0/proc\" && exec \"$@\"";
        for a in ["unshare", "-m", "--propagation", "private", "sh", "-c", script] {
            argv.push(a.into());
        }
        argv.push(b.rootfs());
    }
    match way {
        Via::Wrapper(_) => argv.extend([hook_bin(), "runtime".into(), "--".into()]),
        _ => argv.push(real.clone()),
    }
    argv.extend(["run".into(), "--bundle".into(), b.dir.clone(), PathBuf::from(&id)]);
    let _guard = ContainerGuard { runtime: rt, id: id.clone() };
    let child = Command::new(&argv[0])
        .args(&argv[1..])
        .env("OCI_TMPFS_HOOK_CONFIG", &cfg)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = wait_timeout(child, Duration::from_secs(60)).unwrap_or_else(|| panic!("{argv:?} timed out"));
    let helper_ours = match &helper {
        Some(h) => h.mounts(),
        None => Vec::new(), // no helper: no joined namespace to look in
    };
    // Only ours opens the log, and only the bare run's shell hooks write
    // hook-runs: a missing file is an empty one where its writer never ran,
    // and a failure where it did.
    let lines = |path: &Path, written: bool| -> Vec<String> {
        match (read_text_if_any(path), written) {
            (Some(text), _) => text.lines().map(String::from).collect(),
            (None, false) => Vec::new(),
            (None, true) => panic!("{}: no such file after a run through {way:?}", path.display()),
        }
    };
    Ran {
        ok: out.status.success(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        log: lines(&log, way != Via::Bare),
        needle,
        config: (config_before, std::fs::read(b.dir.join("config.json")).unwrap()),
        helper_ours: helper_ours.into_iter().filter(|m| m.source == OURS).collect(),
        hook_runs: lines(&b.dir.join("hook-runs"), way == Via::Bare),
    }
}

/// Our mounts in the host's mount table (pid 1's and ours), and any mount
/// under the test bundles.
fn host_ours() -> Vec<MountInfo> {
    let bundles = std::env::temp_dir().join("oci-tmpfs-hook-tests").display().to_string();
    ["1", "self"]
        .iter()
        .flat_map(|pid| parse_mountinfo(&std::fs::read_to_string(format!("/proc/{pid}/mountinfo")).unwrap()))
        .filter(|m| m.source == OURS || Path::new(&m.mount_point).starts_with(&bundles))
        .collect()
}

fn left_alone(rt: Runtime) {
    require_root();
    let _watch = hold_host(HostUse::Watch);
    crun_cgroup_fix();
    let before = host_ours();
    for shape in [Shape::NoEntry, Shape::Joined] {
        let bare = run(rt, shape, Via::Bare);
        let what = format!("{} {shape:?} bare", rt.bin());
        assert!(bare.ok && bare.stdout.contains("RAN"), "{what}: {}\n{}", bare.stdout, bare.stderr);
        assert!(bare.log.is_empty(), "{what}: {:?}", bare.log);
        assert!(bare.table().iter().any(|m| m.0 == "/proc"), "{what}: {}", bare.stdout);
        // How often the runtime runs a hook of each stage: runc 1.1.5 runs
        // prestart and createRuntime hooks twice for a container without a
        // mount entry (measured), and ours warns at each run.
        let runs = |stage: &str| bare.hook_runs.iter().filter(|s| *s == stage).count();
        assert!(STAGES.iter().all(|s| runs(s) > 0), "{what}: hooks ran {:?}", bare.hook_runs);
        let ways = STAGES.map(Via::Hook).into_iter().chain([Via::Wrapper("spec"), Via::Wrapper("hook")]);
        for way in ways {
            let r = run(rt, shape, way);
            let what = format!("{} {shape:?} {way:?}", rt.bin());
            assert!(
                r.ok && r.stdout.contains("RAN"),
                "{what}: the container did not run:\n{}\n{}",
                r.stdout,
                r.stderr
            );
            assert_eq!(r.table(), bare.table(), "{what}: mounts differ from the bare runtime's");
            assert!(
                !parse_mountinfo(&r.stdout).iter().any(|m| m.source == OURS),
                "{what}: a tmpfs of ours in the container:\n{}",
                r.stdout
            );
            assert!(r.helper_ours.is_empty(), "{what}: ours in the joined namespace: {:?}", r.helper_ours);
            let ours_ran = match way {
                Via::Hook(stage) => runs(stage),
                Via::Wrapper("hook") => runs("prestart"),
                _ => 1,
            };
            assert_eq!(r.log.len(), ours_ran, "{what}: one warning a run of ours: {:?}", r.log);
            let line = &r.log[0];
            assert!(r.log.iter().all(|l| l == line), "{what}: {:?}", r.log);
            assert!(
                line.contains(": warning: /tmp, the temp dirs and /dev/shm left alone: "),
                "{what}: {line}"
            );
            assert!(line.contains(&r.needle), "{what}: {:?} not in {line}", r.needle);
            for l in r.stderr.lines().filter(|l| l.contains("oci-tmpfs-hook")) {
                assert_eq!(l, line, "{what}: stderr: {}", r.stderr);
            }
            if way == Via::Wrapper("spec") {
                assert!(r.config.0 == r.config.1, "{what}: config.json changed");
            }
            assert_eq!(host_ours(), before, "{what}: the host's mount table");
        }
    }
}

// Boilerplate: one test per runtime, so that libtest names, filters and
// runs each on its own.
#[test]
fn runc_no_own_mount_namespace_is_left_alone() {
    left_alone(Runtime::Runc);
}

#[test]
fn crun_no_own_mount_namespace_is_left_alone() {
    left_alone(Runtime::Crun);
}
