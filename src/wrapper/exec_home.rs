//! The container's `HOME` for a process started later in it (`docker exec`,
//! `kubectl exec`: the engine calls `runtime exec --process FILE ID`).
//!
//! The spec executor sets `HOME` in the bundle's `config.json` when the
//! runtime would give `/` (docs/design.md#home-plan), but an engine builds
//! an exec's process from its own stored spec, which lacks that `HOME`: the
//! runtime would give the exec'd process `/` again. So, before the wrapper
//! execs the real runtime for an `exec`, [`carry_over`] adds the container's
//! `HOME` (the last `HOME=` of its `process.env`) to the process file, when
//! the file has no `HOME` and runs as the container's uid.
//!
//! The bundle is found through the runtime's own state: runc's
//! `<root>/<id>/state.json` (`config.labels` holds `bundle=<path>`), crun's
//! `<root>/<id>/status` (`"bundle"`): docs/design.md#exec-home. Every
//! read is bounded and opened without following a final symlink; the id must
//! be one plain name, as runc's own id check requires. Anything that does not
//! fit leaves the process file alone, with a debug line: an exec never fails
//! because of us. No subprocess, no syscall beyond the reads and the one
//! atomic rewrite of the process file.
//!
//! It sits with the spec executor because it is that executor's second
//! half: the `HOME` it carries over is the one [`crate::spec::carry_out`] wrote
//! into the bundle's `config.json`, read back from there. The wrapper's
//! dispatch ([`super::dispatch`]) calls it on `exec`, with the exec as
//! plain values ([`Exec`]): it does not read the command line, whose
//! grammar is the `runtime` command's.

use std::ffi::{OsStr, OsString};
use std::os::fd::AsFd as _;
use std::path::{Path, PathBuf};

use rustix::fs::{Mode, OFlags};
use serde_json::Value;

use crate::files::{self, Durability, FileError};
use crate::input::{self, MAX_SPEC_BYTES};

/// The most a runtime's state file may hold: runc's `state.json` carries
/// the container's whole seccomp profile (30 KB for Docker's default,
/// measured with runc 1.1.5 and 1.3.6).
const MAX_RUNTIME_STATE_BYTES: u64 = 8 << 20;

/// runc's state file in `<root>/<id>/`, and its root when `--root` is not given.
const RUNC_STATE: &str = "state.json";
const RUNC_ROOT: &str = "/run/runc";
/// crun's state file in `<root>/<id>/`, and its root when `--root` is not given.
const CRUN_STATE: &str = "status";
const CRUN_ROOT: &str = "/run/crun";

/// An `exec` as its command line names it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Exec<'a> {
    /// `--process FILE`: the process, as JSON (what the engines pass).
    pub process: Option<&'a Path>,
    /// The container id.
    pub id: Option<&'a OsStr>,
    /// The command line chooses the user (`--user`) or sets `HOME`
    /// (`--env HOME=...`) itself.
    pub chooses: bool,
    /// The runtime's global `--root`: where it keeps its containers' state.
    pub root: Option<&'a Path>,
}

/// Why the process file was left alone.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ExecHomeError {
    #[error("the exec names no process file (--process)")]
    NoProcessFile,
    #[error("the exec names no container id")]
    NoId,
    #[error("container id {0:?} is not a plain name")]
    BadId(OsString),
    #[error("no state file of runtime {runtime:?} to look for (no --root, not runc or crun)")]
    UnknownRuntime { runtime: String },
    #[error("reading {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: FileError,
    },
    #[error("opening {path}")]
    StateDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("no bundle in {path}")]
    NoBundle { path: PathBuf },
    #[error("the process file {path}: {what}")]
    Process { path: PathBuf, what: String },
    #[error("the bundle's config.json")]
    Config(#[source] input::InputError),
    #[error("writing the process file")]
    Write(#[source] FileError),
}

/// What an exec'd process gets: the container's `HOME`, or why not.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Add `HOME=<this>` to the process's env.
    Add(String),
    /// Leave the process alone, for this reason.
    Keep(String),
}

/// The last `HOME=` value of `env` (the one a process gets:
/// docs/design.md#env-last).
fn last_home(env: &[String]) -> Option<&str> {
    env.iter().rev().find_map(|e| e.strip_prefix("HOME="))
}

/// Pure: the `HOME` an exec'd process with `exec_env` running as
/// `exec_uid` gets from its container, whose process has `container_env`
/// and runs as `container_uid`. Only the container's own user gets its
/// `HOME`; a process that has a `HOME` keeps it.
pub(crate) fn decide(
    exec_env: &[String],
    exec_uid: u32,
    container_env: &[String],
    container_uid: u32,
) -> Decision {
    if let Some(home) = last_home(exec_env) {
        return Decision::Keep(format!("the exec's env has HOME={home}"));
    }
    let Some(home) = last_home(container_env) else {
        return Decision::Keep("the container's process.env has no HOME".into());
    };
    if exec_uid != container_uid {
        return Decision::Keep(format!(
            "the exec runs as uid {exec_uid}, the container's process as uid {container_uid}"
        ));
    }
    Decision::Add(home.to_string())
}

/// Where to look for the container's state: `(root, file name)` pairs. With
/// `--root`, both runtimes' file names (an engine may give one runtime's
/// root to another: Docker 20.10 gives crun `runtime-runc/moby`); without
/// it, the default root of the runtime the wrapper execs (`runtime`, its file
/// name), none for another runtime.
pub(crate) fn state_files(runtime: &OsStr, root: Option<&Path>) -> Vec<(PathBuf, &'static str)> {
    match root {
        Some(root) => vec![(root.to_path_buf(), RUNC_STATE), (root.to_path_buf(), CRUN_STATE)],
        None if runtime == "runc" => vec![(PathBuf::from(RUNC_ROOT), RUNC_STATE)],
        None if runtime == "crun" => vec![(PathBuf::from(CRUN_ROOT), CRUN_STATE)],
        None => Vec::new(),
    }
}

/// A container id the runtimes accept as a directory name: runc's
/// `validateID` (`^[\w+\-\.]+$`, not `.` or `..`).
pub(crate) fn plain_id(id: &OsStr) -> Option<&str> {
    let id = id.to_str()?;
    let ok = !id.is_empty()
        && id != "."
        && id != ".."
        && id.bytes().all(|b| b.is_ascii_alphanumeric() || b"_+-.".contains(&b));
    ok.then_some(id)
}

/// Pure: the bundle a runtime's state file names, for the container `id`.
/// runc's `state.json`: the last `bundle=` label of `config.labels` (and
/// its `id` must be `id`): runc makes a label of every annotation first and
/// appends its own `bundle=` after them, so an annotation named `bundle`
/// comes earlier and never redirects the read (docs/design.md#exec-home);
/// crun's `status`: `bundle`. Only an absolute path.
pub(crate) fn bundle_in_state(file: &str, bytes: &[u8], id: &str) -> Option<PathBuf> {
    let state: Value = serde_json::from_slice(bytes).ok()?;
    let bundle = if file == RUNC_STATE {
        if state["id"].as_str() != Some(id) {
            return None;
        }
        state["config"]["labels"]
            .as_array()?
            .iter()
            .rev()
            .find_map(|l| l.as_str()?.strip_prefix("bundle="))?
    } else {
        state["bundle"].as_str()?
    };
    let bundle = PathBuf::from(bundle);
    bundle.is_absolute().then_some(bundle)
}

/// Adds the container's `HOME` to the process file of `exec`, when
/// [`decide`] says so; `runtime` is the file name of the real runtime, and
/// `home` the host config's `home`: with `home = false` nothing is read or
/// written. Logs what it did at info, and why it did nothing at debug:
/// never fails.
pub(crate) fn carry_over(exec: &Exec<'_>, runtime: &OsStr, home: bool) {
    if !home {
        log::debug!("exec: home = false in the host config; the process is left alone");
        return;
    }
    if exec.chooses {
        log::debug!("exec: the command line names the user or HOME; the process is left alone");
        return;
    }
    match add_home(exec, runtime) {
        Ok(Decision::Add(home)) => log::info!("exec: set HOME={home} in the process (the container's HOME)"),
        Ok(Decision::Keep(why)) => log::debug!("exec: HOME left alone: {why}"),
        Err(e) => log::debug!("exec: HOME left alone: {}", crate::error::chain(&e)),
    }
}

fn add_home(exec: &Exec<'_>, runtime: &OsStr) -> Result<Decision, ExecHomeError> {
    let path = exec.process.ok_or(ExecHomeError::NoProcessFile)?;
    let read_err = |source| ExecHomeError::Read { path: path.to_path_buf(), source };
    let contents = files::read(None, path, MAX_SPEC_BYTES).map_err(read_err)?;
    let bad = |what: &str| ExecHomeError::Process { path: path.to_path_buf(), what: what.into() };
    let mut process: Value = serde_json::from_slice(&contents.bytes).map_err(|_| bad("not JSON"))?;
    let (env, uid) = process_view(&process).map_err(bad)?;
    if let Some(home) = last_home(&env) {
        return Ok(Decision::Keep(format!("the exec's env has HOME={home}")));
    }
    let id = exec.id.ok_or(ExecHomeError::NoId)?;
    let id = plain_id(id).ok_or_else(|| ExecHomeError::BadId(id.to_os_string()))?;
    crate::process::logger::set_container(id);
    let bundle = find_bundle(&state_files(runtime, exec.root), id, runtime)?;
    let spec = input::read_spec(&bundle).map_err(ExecHomeError::Config)?;
    let container = spec.process().clone().unwrap_or_default();
    let container_env = container.env().clone().unwrap_or_default();
    let decision = decide(&env, uid, &container_env, container.user().uid());
    if let Decision::Add(home) = &decision {
        let p = process.as_object_mut().ok_or_else(|| bad("not an object"))?;
        let env = p.entry("env").or_insert_with(|| Value::Array(Vec::new()));
        env.as_array_mut()
            .ok_or_else(|| bad("env is not a list"))?
            .push(Value::String(format!("HOME={home}")));
        let text = files::render_json(&process, &String::from_utf8_lossy(&contents.bytes));
        files::replace(path, text.as_bytes(), contents.perms, Durability::Scratch)
            .map_err(ExecHomeError::Write)?;
    }
    Ok(decision)
}

/// A process file's env and uid (0 when it names none, as runc reads it).
fn process_view(process: &Value) -> Result<(Vec<String>, u32), &'static str> {
    let object = process.as_object().ok_or("not an object")?;
    let env = match object.get("env") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(a)) => a
            .iter()
            .map(|e| e.as_str().map(String::from))
            .collect::<Option<_>>()
            .ok_or("env is not strings")?,
        Some(_) => return Err("env is not a list"),
    };
    let uid = match object.get("user").and_then(|u| u.get("uid")) {
        None | Some(Value::Null) => 0,
        Some(uid) => uid.as_u64().and_then(|u| u32::try_from(u).ok()).ok_or("user.uid is not a uid")?,
    };
    Ok((env, uid))
}

/// The bundle of container `id`, from the first of `candidates` that exists.
fn find_bundle(
    candidates: &[(PathBuf, &'static str)],
    id: &str,
    runtime: &OsStr,
) -> Result<PathBuf, ExecHomeError> {
    if candidates.is_empty() {
        return Err(ExecHomeError::UnknownRuntime { runtime: runtime.to_string_lossy().into_owned() });
    }
    let mut last = None;
    for (root, file) in candidates {
        let path = root.join(id).join(file);
        match read_state(root, id, file) {
            Ok(bytes) => return bundle_in_state(file, &bytes, id).ok_or(ExecHomeError::NoBundle { path }),
            Err(e) => last = Some(e),
        }
    }
    Err(last.expect("candidates is not empty"))
}

/// The bytes of `<root>/<id>/<file>`; neither `<id>` nor `<file>` may be a
/// symlink.
fn read_state(root: &Path, id: &str, file: &str) -> Result<Vec<u8>, ExecHomeError> {
    let dir_path = root.join(id);
    let dir = files::open_dir(root)
        .and_then(|r| {
            rustix::fs::openat(
                r.as_fd(),
                id,
                OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::empty(),
            )
            .map_err(Into::into)
        })
        .map_err(|source| ExecHomeError::StateDir { path: dir_path.clone(), source })?;
    let path = dir_path.join(file);
    files::read(Some(dir.as_fd()), &path, MAX_RUNTIME_STATE_BYTES)
        .map(|c| c.bytes)
        .map_err(|source| ExecHomeError::Read { path, source })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    /// A name, the exec's env and uid, the container's env and uid, and
    /// the `HOME` to add (`None`: keep).
    type Case<'a> = (&'a str, Vec<String>, u32, Vec<String>, u32, Option<&'a str>);

    #[test]
    fn decisions() {
        let ours = strings(&["PATH=/bin", "HOME=/home/1000"]);
        let docker_exec = strings(&["PATH=/bin", "HOSTNAME=7ad0b36af38b"]);
        let cases: &[Case<'_>] = &[
            (
                "docker exec as the container's user",
                docker_exec.clone(),
                1000,
                ours.clone(),
                1000,
                Some("/home/1000"),
            ),
            (
                "the container's last HOME counts",
                strings(&["PATH=/bin"]),
                1000,
                strings(&["HOME=/a", "X=1", "HOME=/b"]),
                1000,
                Some("/b"),
            ),
            ("an exec with no env at all", Vec::new(), 0, strings(&["HOME=/home/0"]), 0, Some("/home/0")),
            ("docker exec -u 0 in a uid 1000 container", docker_exec.clone(), 0, ours.clone(), 1000, None),
            ("an exec as another uid", docker_exec.clone(), 1001, ours.clone(), 1000, None),
            ("the exec has a HOME of its own", strings(&["HOME=/mine"]), 1000, ours.clone(), 1000, None),
            ("the exec's HOME is empty: still its own", strings(&["HOME="]), 1000, ours.clone(), 1000, None),
            ("the container has no HOME", docker_exec.clone(), 1000, strings(&["PATH=/bin"]), 1000, None),
            ("HOMEX= is not HOME", docker_exec, 1000, strings(&["HOMEX=/x"]), 1000, None),
        ];
        for (name, exec_env, exec_uid, container_env, container_uid, want) in cases {
            let got = decide(exec_env, *exec_uid, container_env, *container_uid);
            match want {
                Some(home) => assert_eq!(got, Decision::Add(home.to_string()), "{name}"),
                None => assert!(matches!(got, Decision::Keep(_)), "{name}: {got:?}"),
            }
        }
    }

    #[test]
    fn where_the_state_is() {
        let r = |root: &str, f| (PathBuf::from(root), f);
        let root = Path::new("/d/exec/runtime-runc/moby");
        assert_eq!(
            state_files(OsStr::new("runc"), Some(root)),
            [r("/d/exec/runtime-runc/moby", "state.json"), r("/d/exec/runtime-runc/moby", "status")]
        );
        assert_eq!(
            state_files(OsStr::new("crun"), Some(root)),
            [r("/d/exec/runtime-runc/moby", "state.json"), r("/d/exec/runtime-runc/moby", "status")]
        );
        assert_eq!(state_files(OsStr::new("runc"), None), [r("/run/runc", "state.json")]);
        assert_eq!(state_files(OsStr::new("crun"), None), [r("/run/crun", "status")]);
        assert_eq!(state_files(OsStr::new("youki"), None), []);
    }

    #[test]
    fn plain_ids() {
        for id in ["7ad0b36af38b3fa6cfb1dd573854124130c2b9a234fbc7ef9a84f3697ba0c0fd", "recid", "a.b_c+d-e"] {
            assert_eq!(plain_id(OsStr::new(id)), Some(id), "{id}");
        }
        for id in ["", ".", "..", "../x", "a/b", "/abs", "a b", "é"] {
            assert_eq!(plain_id(OsStr::new(id)), None, "{id:?}");
        }
    }

    /// The state files as runc 1.1.5/1.3.6 and crun 1.8.1/1.28 wrote them
    /// for Docker here (trimmed to the members read; crun 1.28 escapes `/`).
    #[test]
    fn bundles_in_real_state_files() {
        let runc = br#"{"id":"7ad0b36af38b","init_process_pid":1,"config":{"rootfs":"/x","labels":["bundle=/rd/exec/containerd/daemon/io.containerd.runtime.v2.task/moby/7ad0b36af38b"]},"rootless":false}"#;
        let bundle =
            Some(PathBuf::from("/rd/exec/containerd/daemon/io.containerd.runtime.v2.task/moby/7ad0b36af38b"));
        assert_eq!(bundle_in_state("state.json", runc, "7ad0b36af38b"), bundle);
        assert_eq!(bundle_in_state("state.json", runc, "other"), None, "another container's state");
        let crun_1_8 = br#"{
    "pid": 9891,
    "rootfs": "/d/data/overlay2/e6bd/merged",
    "bundle": "/d/exec/containerd/daemon/io.containerd.runtime.v2.task/moby/ede4c1b248a7",
    "owner": "root"
}"#;
        assert_eq!(
            bundle_in_state("status", crun_1_8, "ede4c1b248a7"),
            Some(PathBuf::from("/d/exec/containerd/daemon/io.containerd.runtime.v2.task/moby/ede4c1b248a7"))
        );
        let crun_1_28 = br#"{"pid": 27059, "bundle": "\/tmp\/d\/exec\/moby\/3771b556cf47", "owner": "root"}"#;
        assert_eq!(
            bundle_in_state("status", crun_1_28, "3771b556cf47"),
            Some(PathBuf::from("/tmp/d/exec/moby/3771b556cf47"))
        );
        // An annotation named `bundle` is a label too, before runc's own.
        let annotated =
            br#"{"id":"i","config":{"labels":["bundle=/annotation","a=1","bundle=/real/bundle"]}}"#;
        assert_eq!(bundle_in_state("state.json", annotated, "i"), Some(PathBuf::from("/real/bundle")));
        for (file, bytes) in [
            ("state.json", &br#"{"id":"i","config":{"labels":["bundle=relative"]}}"#[..]),
            ("state.json", br#"{"id":"i","config":{"labels":["other=1"]}}"#),
            ("state.json", br#"{"id":"i","config":{}}"#),
            ("status", br#"{"bundle": 7}"#),
            ("status", b"not json"),
        ] {
            assert_eq!(bundle_in_state(file, bytes, "i"), None, "{file}: {}", String::from_utf8_lossy(bytes));
        }
    }

    #[test]
    fn process_files() {
        let docker = serde_json::json!({"user":{"uid":1000,"gid":0,"additionalGids":[0]},"args":["sh"],"env":["PATH=/bin","HOSTNAME=7ad0b36af38b"],"cwd":"/"});
        assert_eq!(process_view(&docker), Ok((strings(&["PATH=/bin", "HOSTNAME=7ad0b36af38b"]), 1000)));
        assert_eq!(process_view(&serde_json::json!({"args": ["sh"]})), Ok((Vec::new(), 0)));
        for bad in [
            serde_json::json!([]),
            serde_json::json!({"env": "HOME=/x"}),
            serde_json::json!({"env": [1]}),
            serde_json::json!({"user": {"uid": -1}}),
            serde_json::json!({"user": {"uid": 1u64 << 32}}),
        ] {
            assert!(process_view(&bad).is_err(), "{bad}");
        }
    }

    /// A runtime root holding container `id`'s state (`file`, runc's or
    /// crun's), its bundle with `container_env` and uid, and a process file
    /// as Docker writes it.
    struct Setup {
        dir: PathBuf,
        root: PathBuf,
        process: PathBuf,
    }

    impl Drop for Setup {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }

    fn setup(name: &str, file: &str, container: &Value, exec: &Value) -> Setup {
        let dir = files::temp_dir(&format!("exec-home-{name}"));
        let (root, bundle) = (dir.join("root"), dir.join("bundle"));
        std::fs::create_dir_all(root.join("ID")).unwrap();
        std::fs::create_dir_all(&bundle).unwrap();
        let state = if file == RUNC_STATE {
            serde_json::json!({"id": "ID", "config": {"labels": [format!("bundle={}", bundle.display())]}})
        } else {
            serde_json::json!({"pid": 1, "bundle": bundle})
        };
        std::fs::write(root.join("ID").join(file), state.to_string()).unwrap();
        std::fs::write(bundle.join("config.json"), container.to_string()).unwrap();
        let process = dir.join("runc-process1");
        std::fs::write(&process, exec.to_string()).unwrap();
        Setup { dir, root, process }
    }

    /// The exec of the process file in `s`'s container, with its root.
    fn exec_line(s: &Setup) -> Exec<'_> {
        Exec { process: Some(&s.process), id: Some(OsStr::new("ID")), chooses: false, root: Some(&s.root) }
    }

    fn env_of(path: &Path) -> Value {
        let v: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
        v["env"].clone()
    }

    #[test]
    fn adds_the_containers_home_through_each_runtimes_state() {
        use std::os::unix::fs::PermissionsExt as _;
        let container =
            serde_json::json!({"process": {"user": {"uid": 1000}, "env": ["PATH=/bin", "HOME=/home/1000"]}});
        let exec = serde_json::json!({"user": {"uid": 1000, "gid": 0}, "args": ["sh"], "env": ["PATH=/bin"], "cwd": "/"});
        for file in [RUNC_STATE, CRUN_STATE] {
            let s = setup(file, file, &container, &exec);
            std::fs::set_permissions(&s.process, std::fs::Permissions::from_mode(0o600)).unwrap();
            let got = add_home(&exec_line(&s), OsStr::new("runc")).unwrap();
            assert_eq!(got, Decision::Add("/home/1000".into()), "{file}");
            let after: Value = serde_json::from_slice(&std::fs::read(&s.process).unwrap()).unwrap();
            assert_eq!(after["env"], serde_json::json!(["PATH=/bin", "HOME=/home/1000"]), "{file}");
            assert_eq!(after["args"], exec["args"], "{file}: the rest is kept");
            let mode = std::fs::metadata(&s.process).unwrap().permissions().mode() & 0o7777;
            assert_eq!(mode, 0o600, "{file}: the file's mode is kept");
            // Again: the file has a HOME now, and is not changed.
            let got = add_home(&exec_line(&s), OsStr::new("runc")).unwrap();
            assert!(matches!(got, Decision::Keep(_)), "{file}: {got:?}");
            assert_eq!(env_of(&s.process), serde_json::json!(["PATH=/bin", "HOME=/home/1000"]));
        }
    }

    /// An annotation `bundle=<another bundle>` on the container is a label
    /// of runc's state before runc's own `bundle=`: the exec gets the HOME
    /// of the container's real bundle, not the other one's.
    #[test]
    fn an_annotation_named_bundle_does_not_redirect_the_read() {
        let container = serde_json::json!({"process": {"user": {"uid": 1000}, "env": ["HOME=/home/1000"]}});
        let exec = serde_json::json!({"user": {"uid": 1000}, "env": ["PATH=/bin"]});
        let s = setup("annotated", RUNC_STATE, &container, &exec);
        let decoy = s.dir.join("decoy");
        std::fs::create_dir_all(&decoy).unwrap();
        let other = serde_json::json!({"process": {"user": {"uid": 1000}, "env": ["HOME=/decoy"]}});
        std::fs::write(decoy.join("config.json"), other.to_string()).unwrap();
        let state = s.root.join("ID").join(RUNC_STATE);
        let mut v: Value = serde_json::from_slice(&std::fs::read(&state).unwrap()).unwrap();
        let real = v["config"]["labels"][0].clone();
        v["config"]["labels"] = serde_json::json!([format!("bundle={}", decoy.display()), "x=1", real]);
        std::fs::write(&state, v.to_string()).unwrap();
        let got = add_home(&exec_line(&s), OsStr::new("runc")).unwrap();
        assert_eq!(got, Decision::Add("/home/1000".into()));
        assert_eq!(env_of(&s.process), serde_json::json!(["PATH=/bin", "HOME=/home/1000"]));
    }

    /// With `home = false` in the host config, an exec that would get the
    /// container's HOME is left alone, its process file untouched.
    #[test]
    fn home_false_leaves_every_exec_alone() {
        let container = serde_json::json!({"process": {"user": {"uid": 1000}, "env": ["HOME=/home/1000"]}});
        let exec = serde_json::json!({"user": {"uid": 1000}, "env": ["PATH=/bin"]});
        let s = setup("home-false", RUNC_STATE, &container, &exec);
        let before = std::fs::read(&s.process).unwrap();
        carry_over(&exec_line(&s), OsStr::new("runc"), false);
        assert_eq!(std::fs::read(&s.process).unwrap(), before, "home = false: the process file changed");
        carry_over(&exec_line(&s), OsStr::new("runc"), true);
        assert_eq!(env_of(&s.process), serde_json::json!(["PATH=/bin", "HOME=/home/1000"]), "home = true");
    }

    /// [`add_home`]'s error for `line`, checking that the process file is
    /// unchanged.
    fn refused(s: &Setup, line: &Exec<'_>, runtime: &str) -> ExecHomeError {
        let before = std::fs::read(&s.process).unwrap();
        let err = add_home(line, OsStr::new(runtime)).unwrap_err();
        assert_eq!(std::fs::read(&s.process).unwrap(), before, "{err:?}: the process file changed");
        err
    }

    #[test]
    fn leaves_the_process_alone() {
        let container = serde_json::json!({"process": {"user": {"uid": 1000}, "env": ["HOME=/home/1000"]}});
        let exec = serde_json::json!({"user": {"uid": 1000}, "env": ["PATH=/bin"]});

        let s = setup("as-root", RUNC_STATE, &container, &serde_json::json!({"user": {"uid": 0}, "env": []}));
        let got = add_home(&exec_line(&s), OsStr::new("runc")).unwrap();
        assert!(matches!(got, Decision::Keep(_)), "another uid: {got:?}");
        assert_eq!(env_of(&s.process), serde_json::json!([]));

        let s = setup("symlinked-dir", RUNC_STATE, &container, &exec);
        std::fs::rename(s.root.join("ID"), s.root.join("real")).unwrap();
        std::os::unix::fs::symlink("real", s.root.join("ID")).unwrap();
        let err = refused(&s, &exec_line(&s), "runc");
        assert!(matches!(err, ExecHomeError::StateDir { .. }), "a symlinked state dir: {err:?}");

        let s = setup("symlinked-state", RUNC_STATE, &container, &exec);
        std::fs::rename(s.root.join("ID/state.json"), s.dir.join("elsewhere.json")).unwrap();
        std::os::unix::fs::symlink(s.dir.join("elsewhere.json"), s.root.join("ID/state.json")).unwrap();
        let err = refused(&s, &exec_line(&s), "runc");
        assert!(matches!(err, ExecHomeError::Read { .. }), "a symlinked state file: {err:?}");

        let s = setup("bad-id", RUNC_STATE, &container, &exec);
        let line = Exec { id: Some(OsStr::new("../root/ID")), ..exec_line(&s) };
        assert!(matches!(refused(&s, &line, "runc"), ExecHomeError::BadId(_)));

        let s = setup("no-root", RUNC_STATE, &container, &exec);
        let err = refused(&s, &Exec { root: None, ..exec_line(&s) }, "youki");
        assert!(matches!(err, ExecHomeError::UnknownRuntime { .. }), "{err:?}");

        let s = setup("missing-state", RUNC_STATE, &container, &exec);
        std::fs::remove_file(s.root.join("ID/state.json")).unwrap();
        let err = refused(&s, &exec_line(&s), "runc");
        assert!(matches!(err, ExecHomeError::Read { .. }), "{err:?}");
        // carry_over logs the same refusal and never fails.
        let before = std::fs::read(&s.process).unwrap();
        carry_over(&exec_line(&s), OsStr::new("runc"), true);
        assert_eq!(std::fs::read(&s.process).unwrap(), before);

        let s = setup("chooses", RUNC_STATE, &container, &exec);
        let before = std::fs::read(&s.process).unwrap();
        carry_over(&Exec { chooses: true, ..exec_line(&s) }, OsStr::new("runc"), true);
        assert_eq!(std::fs::read(&s.process).unwrap(), before, "a command line that chooses the user");
    }
}
