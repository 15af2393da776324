//! Real PyTorch (Debian's `python3-torch`) in read-only containers, end to end.
//!
//! The container's rootfs is empty mount point directories: the host's `/usr`
//! and `/etc` (and `/bin`, `/lib*`, `/sbin` where they are not symlinks into
//! `/usr`) come in through read-only bind mounts, the workload scripts of
//! `tests/pytorch/` at `/work`, `root.readonly` is true and `/dev/shm` is the
//! default 64 MiB of `runc spec` (Podman's default is 64 MiB too). Each script
//! prints one `PASS <name>` or `FAIL <name>: <error>` line.
//!
//! Without the hook every workload fails with the error PyTorch users search
//! for (asserted, so the test proves the problem exists); with the hook,
//! registered through `inject` (runc, crun) or through a Podman hooks dir
//! (Podman with runc and with crun), every workload passes. The heavy
//! DataLoader case runs once without the hook and once per registration path.
//! `torch.compile` (default Inductor backend, CPU; PyTorch 2.x, so the sid
//! environment of tests/env/sid.sh, whose root has g++, python3-dev and
//! libtorch-dev) fails without the hook, passes with it, and fails with the
//! documented `failed to map segment from shared object` when the host
//! config sets `noexec = true`; with PyTorch 1.13 (Debian 12), which has no
//! `torch.compile`, those tests assert and print just that. Errors that
//! changed between versions are asserted per version: PyTorch 2.14's
//! DataLoader fails with a clean `No space left on device (28)` where 1.13
//! had a bus error, and Podman 5's `--read-only-tmpfs=false` makes
//! `/dev/shm` read-only. Every container has a timeout. Root, `python3-torch`, runc, crun and Podman
//! are required: these tests fail loudly without them (`.ci/run` installs them).
//! About 80 s on 2 busy cores; each DataLoader run peaks at 2-3 GiB of memory.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use crate::support::*;
use serde_json::json;

/// Debian's interpreter, which `python3-torch` belongs to (a pyenv `python3`
/// on the host's PATH does not matter inside the container).
pub(crate) const PYTHON: &str = "/usr/bin/python3";
/// Where the workload scripts are mounted in the container.
pub(crate) const WORK: &str = "/work";
/// Light workloads (imports of torch take a few seconds each).
const LIGHT_TIMEOUT: Duration = Duration::from_secs(180);
/// The DataLoader case moves a few GiB through /dev/shm.
const HEAVY_TIMEOUT: Duration = Duration::from_secs(300);
/// Without the hook, the side that should answer never does (PyTorch 2.14's
/// DataLoader feeder fails with ENOSPC and the parent waits; the
/// file-descriptor strategy's child never gets its tensor): the scripts' wait
/// for it, in seconds, instead of their 60 and 20. The error they assert is
/// printed within about 2 s of the start here, and the wait bounded the
/// unhooked runs (sid's unhooked DataLoader took 68 s with the 60 s wait).
const UNHOOKED_WAIT: &str = "TORCH_TEST_WAIT=10";
/// The same for the DataLoader, whose worker first fills a 256 MiB batch:
/// with both cores busy (load average 12) its error had not come after 10 s
/// (a clean-clone CI run on 2026-12-02), so it gets longer.
const UNHOOKED_DATALOADER_WAIT: &str = "TORCH_TEST_WAIT=30";

/// `share_memory_()` and `Module.share_memory()` with the `file_system`
/// strategy: libshm's manager cannot create its socket dir in a read-only temp dir.
const MANAGER_ERROR: &str = "could not generate a random directory for manager socket";
/// Python's `tempfile` with a read-only `/tmp` and no temp variable set.
const NO_TEMP_DIR_ERROR: &str =
    "No usable temporary directory found in ['/tmp', '/var/tmp', '/usr/tmp', '/']";
/// The same with `TEMP=/var/tmp`, a directory missing from the image.
const NO_VAR_TMP_ERROR: &str =
    "No usable temporary directory found in ['/var/tmp', '/tmp', '/var/tmp', '/usr/tmp', '/']";
/// A DataLoader worker writing a batch larger than what is left of /dev/shm
/// (PyTorch 1.13: SIGBUS in the worker).
const BUS_ERROR: &str = "This might be caused by insufficient shared memory (shm)";
/// The same with PyTorch 2.14: the worker's feeder thread fails cleanly (the
/// parent then times out waiting for the batch).
const SHM_NO_SPACE: &str = "unable to allocate shared memory(shm) for file </torch_";
const SHM_NO_SPACE_END: &str = ">: No space left on device (28)";
/// Podman 5's read-only `/dev/shm` (with `--read-only-tmpfs=false`), with
/// the `file_descriptor` strategy: the segment itself cannot be created.
const SHM_READ_ONLY: &str = "in read-write mode: Read-only file system (30)";

/// One workload: a script, its environment and arguments, and the error it
/// must fail with when the hook is not there.
struct Case {
    name: &'static str,
    /// `KEY=VALUE` for this script only (the hook does not read it).
    env: &'static str,
    script: &'static str,
    args: &'static [&'static str],
    error: &'static str,
    /// The error is printed by a worker or a feeder thread, on stderr; the
    /// FAIL line only says that the other side never answered.
    error_on_stderr: bool,
    /// The error PyTorch 2.x gives instead, when it changed (2.14: a clean
    /// ENOSPC where 1.13 had a bus error).
    error_torch2: Option<&'static str>,
    /// The error under Podman 5 (4.7+) `--read-only --read-only-tmpfs=false`,
    /// which mounts `/dev/shm` read-only, when it differs.
    error_podman5: Option<&'static str>,
}

impl Case {
    const fn new(name: &'static str, script: &'static str, error: &'static str) -> Case {
        Case {
            name,
            env: "",
            script,
            args: &[],
            error,
            error_on_stderr: false,
            error_torch2: None,
            error_podman5: None,
        }
    }
}

/// The workloads with the container's default temp dir (`/tmp`).
const DEFAULT_CASES: &[Case] = &[
    Case::new("share_memory", "share_memory.py", MANAGER_ERROR),
    // PyTorch's default strategy: the fd travels over a unix socket that
    // multiprocessing creates in the temp dir; the child waits forever.
    Case {
        env: "SHARING_STRATEGY=file_descriptor",
        error_on_stderr: true,
        error_podman5: Some(SHM_READ_ONLY),
        ..Case::new("share_memory_file_descriptor", "share_memory.py", NO_TEMP_DIR_ERROR)
    },
    Case::new("hogwild", "hogwild.py", MANAGER_ERROR),
    Case::new("tempfile", "tempfile_write.py", NO_TEMP_DIR_ERROR),
];

/// The container's own choice, `TEMP=/var/tmp` (the image has no `/var`): the
/// scripts check that the temp file and the manager socket land in `/var/tmp`.
const TEMP_ENV: &str = "TEMP=/var/tmp";
const TEMP_CASES: &[Case] = &[
    Case { args: &["/var/tmp"], ..Case::new("share_memory", "share_memory.py", MANAGER_ERROR) },
    Case { args: &["/var/tmp"], ..Case::new("tempfile", "tempfile_write.py", NO_VAR_TMP_ERROR) },
];

/// 256 MiB batches, 4 of them (2 per worker): each batch alone is 4 times the
/// default /dev/shm, so it fails on the first batch every time without the
/// hook (measured here: with 2 workers, 16 MiB batches already fail at 64 MiB
/// and 12 MiB ones pass), while the whole run stays around 2 GiB of memory.
const DATALOADER: Case = Case {
    args: &["256", "4"],
    error_on_stderr: true,
    error_torch2: Some(SHM_NO_SPACE),
    ..Case::new("dataloader", "dataloader.py", BUS_ERROR)
};

/// `torch.compile` (default Inductor backend, CPU) of a small model: without
/// a temp dir it fails at `import torch._dynamo` (PyTorch 2.14, measured).
const COMPILE: Case = Case::new("compile", "compile.py", NO_TEMP_DIR_ERROR);
/// Inductor loads its kernels from the temp dir: with `noexec = true` in the
/// host config (a documented failure) `dlopen` fails with this.
const NOEXEC_ERROR: &str = "failed to map segment from shared object";
/// compile.py's line and exit status where torch has no torch.compile (1.13).
const COMPILE_UNSUPPORTED: &str = "UNSUPPORTED compile: torch ";

impl Case {
    /// The error this environment gives without the hook, and why that one.
    fn expected_error(&self, podman: bool) -> (&'static str, String) {
        let torch = torch_version();
        let podman_v = if podman { podman_version() } else { (0, 0) };
        match (self.error_podman5, self.error_torch2) {
            (Some(e), _) if podman && podman_v >= (4, 7) => {
                (e, format!("Podman {}.{}", podman_v.0, podman_v.1))
            }
            (_, Some(e)) if torch.0 >= 2 => (e, format!("torch {}.{}", torch.0, torch.1)),
            _ => (self.error, format!("torch {}.{}", torch.0, torch.1)),
        }
    }
}

/// The torch version inside this environment (1.13 on Debian 12, 2.14 on sid).
fn torch_version() -> (u32, u32) {
    static V: std::sync::OnceLock<(u32, u32)> = std::sync::OnceLock::new();
    *V.get_or_init(|| {
        let out =
            Command::new(PYTHON).args(["-c", "import torch; print(torch.__version__)"]).output().unwrap();
        let v = String::from_utf8_lossy(&out.stdout).trim().to_string();
        println!("python3-torch {v}");
        let mm = major_minor(&v);
        assert!(mm.0 > 0, "torch version {v:?}");
        mm
    })
}

/// How the hook is registered, if at all.
#[derive(Clone, Copy, Debug)]
enum Via {
    /// Plain runc/crun, no hook.
    Nothing(Runtime),
    /// `oci-tmpfs-hook inject --stage prestart` into config.json.
    Inject(Runtime),
    /// Podman with this OCI runtime; the hook in a `--hooks-dir` when `true`.
    Podman(Runtime, bool),
}

impl Via {
    fn hooked(self) -> bool {
        match self {
            Via::Nothing(_) => false,
            Via::Inject(_) => true,
            Via::Podman(_, hooked) => hooked,
        }
    }
}

/// What a container printed.
struct Outcome {
    what: String,
    /// Run by Podman (whose version changes some errors).
    podman: bool,
    success: bool,
    stdout: String,
    stderr: String,
}

impl Outcome {
    fn from_output(what: String, out: &Output) -> Outcome {
        Outcome {
            what,
            podman: false,
            success: out.status.success(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    fn context(&self) -> String {
        format!("{}\n--- stdout:\n{}\n--- stderr:\n{}", self.what, self.stdout, self.stderr)
    }

    /// The workload's one result line.
    fn result_line(&self, name: &str) -> &str {
        let pass = format!("PASS {name}");
        let fail = format!("FAIL {name}:");
        self.stdout
            .lines()
            .find(|l| l.trim_end() == pass || l.starts_with(&fail))
            .unwrap_or_else(|| panic!("no PASS/FAIL line for {name}: {}", self.context()))
    }

    fn assert_passed(&self, case: &Case) {
        let line = self.result_line(case.name);
        assert!(line.starts_with("PASS "), "{} failed with the hook: {line}\n{}", case.name, self.context());
    }

    /// The workload failed, with its real PyTorch/Python error.
    fn assert_failed(&self, case: &Case) {
        let line = self.result_line(case.name);
        assert!(line.starts_with("FAIL "), "{} passed without the hook: {}", case.name, self.context());
        let (error, where_) = case.expected_error(self.podman);
        // The errors raised in the script itself are on its FAIL line; a
        // worker's or feeder thread's (and Podman 5's read-only /dev/shm,
        // which now comes first) go to stderr or to that line.
        let text = if case.error_on_stderr { format!("{line}\n{}", self.stderr) } else { line.to_string() };
        assert!(
            text.contains(error),
            "{} ({where_}): want {error:?} in {text:?}\n{}",
            case.name,
            self.context()
        );
        if error == SHM_NO_SPACE {
            assert!(
                text.contains(SHM_NO_SPACE_END),
                "{}: {SHM_NO_SPACE_END:?}: {}",
                case.name,
                self.context()
            );
        }
    }

    /// The container's mount table (the script starts with `cat /proc/self/mountinfo`).
    fn mounts(&self) -> Vec<MountInfo> {
        parse_mountinfo(&self.stdout)
    }
}

fn scripts_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/pytorch")
}

/// Root and Debian's torch (the runtimes and Podman fail loudly where they are
/// spawned): CI installs them all.
pub(crate) fn require_all() {
    require_root();
    let out = Command::new(PYTHON).args(["-c", "import torch"]).output();
    assert!(
        matches!(&out, Ok(o) if o.status.success()),
        "{PYTHON} cannot import torch: apt-get install --no-install-recommends python3-torch \
         (.ci/run installs it): {out:?}"
    );
}

/// The top-level host directories the container reuses, and whether each is
/// a symlink (merged /usr: recreated as the same symlink) or a directory (bound).
fn host_dirs() -> Vec<(&'static str, Option<PathBuf>)> {
    ["/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"]
        .into_iter()
        .filter_map(|d| {
            let meta = std::fs::symlink_metadata(d).ok()?;
            if meta.file_type().is_symlink() {
                Some((d, Some(std::fs::read_link(d).unwrap())))
            } else if meta.is_dir() {
                Some((d, None))
            } else {
                None
            }
        })
        .collect()
}

/// A bundle whose rootfs reuses the host's system dirs read-only, with the
/// workload scripts at `/work`, a read-only root and `runc spec`'s 64 MiB
/// `/dev/shm`. The image has `/tmp` but no `/var`.
pub(crate) fn torch_bundle(name: &str) -> Bundle {
    let dir = std::env::temp_dir().join("oci-tmpfs-hook-tests").join(unique(name));
    let rootfs = dir.join("rootfs");
    for d in ["proc", "sys", "dev", "tmp", "work"] {
        std::fs::create_dir_all(rootfs.join(d)).unwrap();
    }
    let out = Command::new("runc").args(["spec", "--bundle"]).arg(&dir).output().expect("runc is installed");
    assert!(out.status.success(), "runc spec: {}", String::from_utf8_lossy(&out.stderr));
    let mut config: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("config.json")).unwrap()).unwrap();
    config["process"]["terminal"] = json!(false);
    config["root"]["readonly"] = json!(true);
    let mounts = config["mounts"].as_array_mut().unwrap();
    for (d, link) in host_dirs() {
        let at = rootfs.join(d.trim_start_matches('/'));
        match link {
            Some(target) => std::os::unix::fs::symlink(target, at).unwrap(),
            None => {
                std::fs::create_dir_all(at).unwrap();
                mounts
                    .push(json!({"destination": d, "type": "bind", "source": d, "options": ["rbind", "ro"]}));
            }
        }
    }
    mounts.push(json!({
        "destination": WORK, "type": "bind", "source": scripts_dir(), "options": ["rbind", "ro"]
    }));
    let b = Bundle { dir, config };
    b.write();
    b
}

/// A shell script that prints the mount table, runs each case and exits 1
/// if any failed.
fn script(cases: &[Case]) -> String {
    let mut s = String::from("cat /proc/self/mountinfo; rc=0");
    for c in cases {
        s.push_str(&format!("; {} {PYTHON} {WORK}/{}", c.env, c.script));
        for a in c.args {
            s.push(' ');
            s.push_str(a);
        }
        s.push_str(" || rc=1");
    }
    s.push_str("; exit $rc");
    s
}

/// Runs `cases` in one container registered `via`, with extra `env`.
fn run_cases(via: Via, env: &[&str], cases: &[Case], timeout: Duration) -> Outcome {
    run_cases_with(via, env, cases, timeout, None)
}

/// [`run_cases`], the hook (registered by `inject`) reading the host config
/// text `host_config` when given.
fn run_cases_with(
    via: Via,
    env: &[&str],
    cases: &[Case],
    timeout: Duration,
    host_config: Option<&str>,
) -> Outcome {
    let names: Vec<&str> = cases.iter().map(|c| c.name).collect();
    let mut b = torch_bundle("torch");
    let sh = script(cases);
    match via {
        Via::Nothing(rt) | Via::Inject(rt) => {
            b.script(&sh);
            for e in env {
                b.env(e);
            }
            match host_config {
                Some(text) if via.hooked() => {
                    let cfg = b.dir.join("host.toml");
                    std::fs::write(&cfg, text).unwrap();
                    b.inject_with_config("prestart", &cfg);
                }
                Some(_) => panic!("a host config needs the hook"),
                None if via.hooked() => {
                    b.inject("prestart");
                }
                None => {}
            }
            let run = b.run_timeout(rt, timeout);
            Outcome::from_output(format!("{via:?} {env:?} {names:?} ({})", run.id), &run.output)
        }
        Via::Podman(rt, hooked) => {
            assert!(host_config.is_none(), "host configs are for the inject cases");
            let out = podman_run(&b.rootfs(), rt, hooked, env, &sh, timeout);
            let mut o = Outcome::from_output(format!("{via:?} {env:?} {names:?}"), &out);
            o.podman = true;
            o
        }
    }
}

/// Removes a Podman container whatever happened.
struct PodmanGuard(String);

impl Drop for PodmanGuard {
    fn drop(&mut self) {
        let _ = Command::new("podman")
            .args(["rm", "--force", "--time", "0", &self.0])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// A hooks dir for Podman: empty, or with an oci-hooks(5) entry for the
/// binary under test (always on: the binary decides from `root.readonly`).
fn hooks_dir(hooked: bool) -> TempDir {
    let dir = TempDir::new("hooks");
    if hooked {
        let entry = json!({
            "version": "1.0.0",
            "hook": {
                "path": hook_bin(),
                "args": ["oci-tmpfs-hook", "hook", "--stage", "prestart"],
                "env": ["PATH=/usr/bin:/bin"]
            },
            "when": {"always": true},
            "stages": ["prestart"]
        });
        std::fs::write(dir.0.join("oci-tmpfs-hook.json"), serde_json::to_vec_pretty(&entry).unwrap())
            .unwrap();
    }
    dir
}

/// Limits to pass to `podman --ulimit`. Podman's defaults (nofile 1048576)
/// can be above what a sandbox allows, and the runtime then fails with
/// `setrlimit RLIMIT_NOFILE: Operation not permitted`; ask for our own hard
/// limit instead. Podman 4.3 runs conmon, and so the runtime, with
/// RLIMIT_NPROC at most 32768 (its `--ulimit` default here; observed in
/// conmon's /proc/PID/limits), so nproc may not ask for more than that.
fn ulimits() -> [String; 2] {
    use rustix::process::{getrlimit, Resource};
    let hard = |r| getrlimit(r).maximum.unwrap_or(u64::MAX);
    let nofile = hard(Resource::Nofile).min(1 << 20);
    let nproc = hard(Resource::Nproc).min(32768);
    [format!("--ulimit=nofile={nofile}:{nofile}"), format!("--ulimit=nproc={nproc}:{nproc}")]
}

/// The read-only flags, with and without the hook: `--read-only-tmpfs=false`
/// (no writable tmpfs of Podman's anywhere: the failures users see, and with
/// the hook our sized tmpfs everywhere). Podman 4.7+ binds `/dev/shm`
/// read-only there, and crun applies that after the hooks: the hook's
/// writable clone over it is what the DataLoader and shared tensors use.
const PODMAN_READ_ONLY: &[&str] = &["--read-only", "--read-only-tmpfs=false"];

/// `podman run --rootfs` with the same host binds as [`torch_bundle`], a
/// read-only root without Podman's own tmpfs mounts, and `hooks_dir`.
/// Podman's options must all come before `--rootfs DIR`: everything after
/// the rootfs path is the command.
fn podman_run(rootfs: &Path, rt: Runtime, hooked: bool, env: &[&str], sh: &str, timeout: Duration) -> Output {
    if rt == Runtime::Crun {
        crun_cgroup_fix();
    }
    let hooks = hooks_dir(hooked);
    let name = unique("podman");
    let _guard = PodmanGuard(name.clone());
    let mut cmd = Command::new("podman");
    cmd.args(["run", "--rm", "--name", &name, "--runtime", rt.bin()])
        .arg("--hooks-dir")
        .arg(&hooks.0)
        .args(PODMAN_READ_ONLY)
        .arg("--network=none")
        .args(ulimits());
    for (d, link) in host_dirs() {
        if link.is_none() {
            cmd.arg("-v").arg(format!("{d}:{d}:ro"));
        }
    }
    cmd.arg("-v").arg(format!("{}:{WORK}:ro", scripts_dir().display()));
    for e in env {
        cmd.arg("-e").arg(e);
    }
    cmd.arg("--rootfs").arg(rootfs).args(["sh", "-c", sh]);
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("podman is installed (.ci/run installs it)");
    wait_timeout(child, timeout).unwrap_or_else(|| panic!("podman run {name} timed out"))
}

/// Without the hook: every light workload fails with its real error, in the
/// default temp dir and with `TEMP=/var/tmp`.
fn without_hook(via: Via) {
    require_all();
    let run = run_cases(via, &[UNHOOKED_WAIT], DEFAULT_CASES, LIGHT_TIMEOUT);
    assert!(!run.success, "the container succeeded without the hook: {}", run.context());
    for c in DEFAULT_CASES {
        run.assert_failed(c);
    }
    let run = run_cases(via, &[TEMP_ENV, UNHOOKED_WAIT], TEMP_CASES, LIGHT_TIMEOUT);
    assert!(!run.success, "the container succeeded without the hook: {}", run.context());
    for c in TEMP_CASES {
        run.assert_failed(c);
    }
}

/// With the hook: every light workload passes, on the hook's tmpfs mounts.
fn with_hook(via: Via) {
    require_all();
    let run = run_cases(via, &[], DEFAULT_CASES, LIGHT_TIMEOUT);
    for c in DEFAULT_CASES {
        run.assert_passed(c);
    }
    assert!(run.success, "{}", run.context());
    assert_hook_mounts(&run, &["/tmp"]);
    let run = run_cases(via, &[TEMP_ENV], TEMP_CASES, LIGHT_TIMEOUT);
    for c in TEMP_CASES {
        run.assert_passed(c);
    }
    assert!(run.success, "{}", run.context());
    assert_hook_mounts(&run, &["/tmp", "/var/tmp"]);
}

/// The temp dirs are the hook's tmpfs mounts and /dev/shm grew past 64 MiB,
/// writable (the workloads write there).
fn assert_hook_mounts(run: &Outcome, temp_dirs: &[&str]) {
    let mounts = run.mounts();
    for d in temp_dirs {
        let m = mount_at(&mounts, d).unwrap_or_else(|| panic!("{d} is not a mount: {}", run.context()));
        assert_eq!((m.fstype.as_str(), m.source.as_str()), ("tmpfs", "oci-tmpfs-hook"), "{d}: {m:?}");
    }
    let shm = mount_at(&mounts, "/dev/shm").expect("/dev/shm is mounted");
    assert!(shm.size().unwrap_or(0) > 64 * MI, "/dev/shm was not grown: {shm:?}");
    assert!(shm.has("rw"), "/dev/shm is read-only: {shm:?}");
}

/// The DataLoader with and without the hook.
fn dataloader(via: Via) {
    require_all();
    let env: &[&str] = if via.hooked() { &[] } else { &[UNHOOKED_DATALOADER_WAIT] };
    let run = run_cases(via, env, std::slice::from_ref(&DATALOADER), HEAVY_TIMEOUT);
    if via.hooked() {
        run.assert_passed(&DATALOADER);
        assert!(run.success, "{}", run.context());
        assert_hook_mounts(&run, &["/tmp"]);
    } else {
        assert!(!run.success, "{}", run.context());
        run.assert_failed(&DATALOADER);
    }
}

#[test]
fn torch_fails_without_hook_runc() {
    without_hook(Via::Nothing(Runtime::Runc));
}

#[test]
fn torch_fails_without_hook_crun() {
    without_hook(Via::Nothing(Runtime::Crun));
}

#[test]
fn torch_fails_without_hook_podman() {
    without_hook(Via::Podman(Runtime::Crun, false));
}

#[test]
fn torch_passes_with_hook_runc_inject() {
    with_hook(Via::Inject(Runtime::Runc));
}

#[test]
fn torch_passes_with_hook_crun_inject() {
    with_hook(Via::Inject(Runtime::Crun));
}

#[test]
fn torch_passes_with_hook_podman_runc() {
    with_hook(Via::Podman(Runtime::Runc, true));
}

#[test]
fn torch_passes_with_hook_podman_crun() {
    with_hook(Via::Podman(Runtime::Crun, true));
}

#[test]
fn dataloader_bus_error_without_hook_runc() {
    dataloader(Via::Nothing(Runtime::Runc));
}

#[test]
fn dataloader_passes_with_hook_runc_inject() {
    dataloader(Via::Inject(Runtime::Runc));
}

#[test]
fn dataloader_passes_with_hook_crun_inject() {
    dataloader(Via::Inject(Runtime::Crun));
}

#[test]
fn dataloader_passes_with_hook_podman_crun() {
    dataloader(Via::Podman(Runtime::Crun, true));
}

// ------------------------------------------------------------ torch.compile

/// Runs the compile case `via`; `None` (after asserting compile.py's
/// UNSUPPORTED line and exit 3) where this torch has no torch.compile.
fn run_compile(via: Via, host_config: Option<&str>) -> Option<Outcome> {
    require_all();
    let torch = torch_version();
    let run = run_cases_with(via, &[], std::slice::from_ref(&COMPILE), HEAVY_TIMEOUT, host_config);
    if torch.0 < 2 {
        assert!(run.stdout.contains(COMPILE_UNSUPPORTED), "torch {torch:?}: {}", run.context());
        assert!(!run.success, "{}", run.context());
        println!(
            "torch {}.{} has no torch.compile: compile.py says so (asserted), nothing to compile",
            torch.0, torch.1
        );
        return None;
    }
    // The result line, in the test's output (with --nocapture or on failure).
    println!("{}: {}", run.what, run.result_line(COMPILE.name).chars().take(400).collect::<String>());
    Some(run)
}

#[test]
fn torch_compile_fails_without_hook_runc() {
    if let Some(run) = run_compile(Via::Nothing(Runtime::Runc), None) {
        assert!(!run.success, "{}", run.context());
        run.assert_failed(&COMPILE);
    }
}

fn compile_with_hook(via: Via) {
    if let Some(run) = run_compile(via, None) {
        run.assert_passed(&COMPILE);
        assert!(run.success, "{}", run.context());
        assert_hook_mounts(&run, &["/tmp"]);
        let tmp = mount_at(&run.mounts(), "/tmp").cloned().unwrap();
        assert!(!tmp.has("noexec"), "the default /tmp allows exec: {tmp:?}");
        assert!(
            run.stdout.contains("built under /tmp/torchinductor_"),
            "kernels in the temp dir: {}",
            run.context()
        );
    }
}

#[test]
fn torch_compile_passes_with_hook_runc_inject() {
    compile_with_hook(Via::Inject(Runtime::Runc));
}

#[test]
fn torch_compile_passes_with_hook_crun_inject() {
    compile_with_hook(Via::Inject(Runtime::Crun));
}

#[test]
fn torch_compile_passes_with_hook_podman_runc() {
    compile_with_hook(Via::Podman(Runtime::Runc, true));
}

/// The documented failure: `noexec = true` in the host config makes the
/// temp dir noexec, and Inductor cannot load the kernels it built there.
#[test]
fn torch_compile_fails_with_noexec_temp_dir() {
    if let Some(run) = run_compile(Via::Inject(Runtime::Runc), Some("noexec = true\n")) {
        let tmp = mount_at(&run.mounts(), "/tmp").cloned().expect("/tmp mounted");
        assert_eq!(tmp.source, "oci-tmpfs-hook", "{tmp:?}");
        assert!(tmp.has("noexec"), "{tmp:?}");
        assert!(!run.success, "{}", run.context());
        let case = Case { error: NOEXEC_ERROR, ..COMPILE };
        run.assert_failed(&case);
    }
}
