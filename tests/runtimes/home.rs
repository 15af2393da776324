//! The container user's `HOME` in real runc and crun containers with a
//! read-only root (docs/design.md#home-plan), through each executor: none
//! (the problem: `HOME` is not writable), the hook (`inject --stage
//! prestart`) and the spec executor (`inject --mode spec`, what the runtime
//! wrapper does in spec mode). The container prints its `HOME`, whether it
//! can write there, the directory's mode and owner, the image's dotfile and
//! the mount at `HOME`.
//!
//! - root, `HOME` from the image's `/etc/passwd` (`/root`, mode 0750, holding
//!   `.profile`): a tmpfs at `/root` with the dotfile copied up, mode 0750,
//!   owner 0;
//! - uid 1000 whose passwd home `/home/app` the image lacks: made by fd,
//!   a tmpfs of mode 0700 owned by 1000:1000;
//! - uid 1000 with no passwd entry: the runtime gives `HOME=/` (crun 1.8.1
//!   none at all); the hook, which cannot set the environment, leaves it
//!   with a warning, and the spec executor sets `HOME=/home/1000` and mounts it;
//! - a volume at `HOME` wins.
//!
//! The hostile `HOME`s and passwd files of [`hostile_homes_are_left_alone`]
//! (tests/support/home.rs, which the CRI and NRI suites run too) run
//! through both executors and both runtimes: each gets its note, no tmpfs
//! of ours covers a volume, and nothing is made outside the rootfs.
//!
//! [`real_programs_write_their_home`] runs the programs that ML containers
//! run under `HOME` (Python's user site, `pip install --user` of a local
//! wheel, `torch.hub`'s cache, Triton's kernel cache manager, from PyPI with
//! no GPU) in the read-only host-root containers of the PyTorch suite.

use std::path::Path;
use std::time::Duration;

use crate::pytorch::{PYTHON, WORK};
use crate::support::home::{self, hostile_cases, ESCAPE, PROBE, ROOT_LINE};
use crate::support::*;
use serde_json::json;

/// How the container gets our mounts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Executor {
    None,
    Hook,
    /// The hook at another stage than `prestart`.
    HookAt(&'static str),
    Spec,
}

const EXECUTORS: [Executor; 3] = [Executor::None, Executor::Hook, Executor::Spec];

/// What one container showed.
#[derive(Debug)]
struct Seen {
    home: String,
    writable: bool,
    /// uid, gid and octal mode of `HOME`.
    stat: String,
    profile: Option<String>,
    /// The filesystem type of the mount at `HOME`, if `HOME` is one.
    mount: Option<String>,
    /// The last `HOME=` of config.json's `process.env` (the one the process
    /// gets) after the executor ran.
    env_home: Option<String>,
    /// The hook's warnings (its log file).
    log: String,
    /// What `inject --mode spec` printed (its notes, on stdout and stderr).
    inject: String,
    /// Everything, for failure messages.
    context: String,
    /// All the probe showed.
    shown: home::Seen,
}

/// A busybox bundle running [`PROBE`] as `uid:gid`, with `passwd` as the
/// image's `/etc/passwd` and `env` added to `process.env`.
fn bundle(name: &str, uid: u32, gid: u32, passwd: &str, env: &[&str]) -> Bundle {
    let mut b = Bundle::new(name);
    std::fs::write(b.rootfs().join("etc/passwd"), passwd).unwrap();
    b.config["process"]["user"] = json!({"uid": uid, "gid": gid});
    for e in env {
        b.env(e);
    }
    b.script(PROBE);
    b
}

/// What one container printed, with its context for failure messages.
struct Printed {
    out: String,
    /// The hook's warnings (its log file).
    log: String,
    /// What `inject --mode spec` printed (its notes, on stdout and stderr).
    inject: String,
    context: String,
}

/// Registers `executor` (the hook's warnings to a log file), runs the bundle
/// with `rt` within `timeout`, and asserts it ran.
fn run_with(b: &mut Bundle, executor: Executor, rt: Runtime, timeout: Duration) -> Printed {
    let (conf, log) = warnings_to_a_file(b);
    let inject = match executor {
        Executor::None => {
            b.write();
            String::new()
        }
        Executor::Hook => {
            b.inject_with_config("prestart", &conf);
            String::new()
        }
        Executor::HookAt(stage) => {
            b.inject_with_config(stage, &conf);
            String::new()
        }
        Executor::Spec => {
            b.write();
            let out = std::process::Command::new(hook_bin())
                .args(["inject", "--mode", "spec", "--config"])
                .arg(&conf)
                .arg("--runtime")
                .arg(which(rt.bin()))
                .arg("--bundle")
                .arg(&b.dir)
                .output()
                .unwrap();
            let status = out.status;
            let out =
                format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
            assert!(status.success(), "inject --mode spec: {status}: {out}");
            b.config = serde_json::from_slice(&std::fs::read(b.dir.join("config.json")).unwrap()).unwrap();
            out
        }
    };
    let run = b.run_timeout(rt, timeout);
    let out = run.stdout();
    let log = std::fs::read_to_string(&log).unwrap_or_default();
    let context = format!(
        "{rt:?}, {executor:?}\n--- inject:\n{inject}\n--- stdout:\n{out}\n--- stderr:\n{}\n--- hook log:\n{log}\n--- config:\n{}",
        run.stderr(),
        serde_json::to_string_pretty(&b.config).unwrap()
    );
    assert!(run.output.status.success(), "the container failed: {context}");
    Printed { out, log, inject, context }
}

/// Runs [`PROBE`]'s bundle with `executor` and reads what it printed.
fn start(b: &mut Bundle, executor: Executor, rt: Runtime) -> Seen {
    let Printed { out, log, inject, context } = run_with(b, executor, rt, Duration::from_secs(60));
    let shown = home::Seen::parse(&out);
    assert!(shown.home != "(no HOME line)", "no HOME line: {context}");
    let env_home = b.config["process"]["env"]
        .as_array()
        .and_then(|e| e.iter().rev().find_map(|v| v.as_str()?.strip_prefix("HOME=").map(String::from)));
    Seen {
        writable: shown.writable,
        stat: shown.stat.clone(),
        profile: Some(shown.profile.clone()).filter(|p| !p.is_empty()),
        mount: shown.mount.as_ref().map(|m| m.fstype.clone()),
        home: shown.home.clone(),
        shown,
        env_home,
        log,
        inject,
        context,
    }
}

/// Root with an image home: a tmpfs at `/root` keeps the dotfile and the
/// directory's mode; without us `HOME` is read-only.
#[test]
fn root_gets_a_writable_home_with_the_images_files() {
    require_root();
    for rt in Runtime::ALL {
        for ex in EXECUTORS {
            let mut b = bundle("home-root", 0, 0, ROOT_LINE, &[]);
            std::fs::create_dir(b.rootfs().join("root")).unwrap();
            std::fs::write(b.rootfs().join("root/.profile"), "image profile").unwrap();
            std::fs::set_permissions(
                b.rootfs().join("root"),
                std::os::unix::fs::PermissionsExt::from_mode(0o750),
            )
            .unwrap();
            let s = start(&mut b, ex, rt);
            assert_eq!(s.home, "/root", "{}", s.context);
            assert_eq!(s.profile.as_deref(), Some("image profile"), "the image's dotfile: {}", s.context);
            assert_eq!(s.stat, "0 0 750", "the image directory's mode: {}", s.context);
            assert_eq!(s.env_home, None, "HOME came from /etc/passwd, nothing set: {}", s.context);
            match ex {
                Executor::None => {
                    assert!(!s.writable && s.mount.is_none(), "without us HOME is read-only: {}", s.context);
                }
                Executor::Hook | Executor::HookAt(_) | Executor::Spec => {
                    assert!(s.writable, "HOME is writable: {}", s.context);
                    assert_eq!(s.mount.as_deref(), Some("tmpfs"), "{}", s.context);
                }
            }
            // The image's own file is unchanged.
            assert_eq!(std::fs::read_to_string(b.rootfs().join("root/.profile")).unwrap(), "image profile");
            assert!(!b.rootfs().join("root/new").exists(), "nothing written into the image");
        }
    }
}

/// `TMPDIR=/root/.tmp` inside root's `HOME=/root` (a home of dot-entries,
/// so a tmpfs of its own): the home's tmpfs holds `.tmp` as the plan made
/// it, mode 1777 like every temp dir, with what the image's `/root/.tmp`
/// held copied into it; copy-up does not give it the image directory's
/// owner and mode (here uid 1000, 0755).
#[test]
fn a_temp_dir_inside_home_keeps_the_plans_owner_and_mode() {
    require_root();
    for rt in Runtime::ALL {
        let mut b = bundle("home-tmpdir", 0, 0, ROOT_LINE, &["TMPDIR=/root/.tmp"]);
        let home = b.rootfs().join("root");
        std::fs::create_dir_all(home.join(".tmp")).unwrap();
        std::fs::write(home.join(".profile"), "image profile").unwrap();
        std::fs::write(home.join(".tmp/f"), "image tmp file").unwrap();
        std::fs::set_permissions(&home, std::os::unix::fs::PermissionsExt::from_mode(0o750)).unwrap();
        std::fs::set_permissions(home.join(".tmp"), std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        rustix::fs::chown(home.join(".tmp"), Some(rustix::fs::Uid::from_raw(1000)), None).unwrap();
        b.write();
        let subdirs = b.explain()["plan"]["actions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["target"] == "/root")
            .map(|a| a["subdirs"].clone())
            .expect("a tmpfs at /root");
        assert_eq!(subdirs, json!([".tmp"]), "the plan makes /root/.tmp inside the home's tmpfs");
        b.script("stat -c 'TMPDIR %u %g %a' /root/.tmp; stat -c 'HOME %u %g %a' /root; cat /root/.tmp/f; echo; cat /root/.profile; echo");
        let p = run_with(&mut b, Executor::Hook, rt, Duration::from_secs(60));
        // Made by the plan: the tmpfs' owner (root), mode 1777; the home
        // keeps the image directory's mode (docs/design.md#home-rule).
        assert!(p.out.contains("TMPDIR 0 0 1777\n"), "the plan's owner and mode: {}", p.context);
        assert!(p.out.contains("HOME 0 0 750\n"), "the image home's mode: {}", p.context);
        assert!(p.out.contains("image tmp file") && p.out.contains("image profile"), "copied: {}", p.context);
    }
}

/// `/tmp -> /root/.tmp` in the image with root's `HOME=/root` (a home of
/// dot-entries, so a tmpfs of its own): `/tmp` lands
/// inside the home, and two tmpfs there would stack, one hiding the other.
/// The hook mounts the first (`/tmp`'s, at `/root/.tmp`) and leaves the home
/// alone with a warning naming both: `/tmp` is writable, the home's files
/// are there, and nothing of ours is hidden.
#[test]
fn a_temp_dir_a_symlink_puts_inside_home_is_one_tmpfs() {
    require_root();
    for rt in Runtime::ALL {
        let mut b = bundle("home-tmplink", 0, 0, ROOT_LINE, &[]);
        let home = b.rootfs().join("root");
        std::fs::create_dir_all(home.join(".tmp")).unwrap();
        std::fs::write(home.join(".profile"), "image profile").unwrap();
        std::fs::remove_dir(b.rootfs().join("tmp")).unwrap();
        std::os::unix::fs::symlink("/root/.tmp", b.rootfs().join("tmp")).unwrap();
        b.script(
            "echo x > /tmp/new && echo TMP-WRITABLE; cat /root/.profile; echo; cat /proc/self/mountinfo",
        );
        let p = run_with(&mut b, Executor::Hook, rt, Duration::from_secs(60));
        assert!(p.out.contains("TMP-WRITABLE") && p.out.contains("image profile"), "{}", p.context);
        let ours: Vec<_> = parse_mountinfo(&p.out)
            .into_iter()
            .filter(|m| m.fstype == "tmpfs" && m.source == "oci-tmpfs-hook")
            .map(|m| m.mount_point)
            .collect();
        assert_eq!(ours, ["/root/.tmp"], "/tmp's tmpfs, at its real path, and no other: {}", p.context);
        assert!(
            p.log.contains("/root left alone: it resolves to /root, above /root/.tmp, where /tmp lands"),
            "the warning names both: {}",
            p.context
        );
        assert!(
            !home.join(".tmp/new").exists() && !home.join("new").exists(),
            "nothing written into the image"
        );
    }
}

/// A user whose passwd home the image lacks gets it made (by fd, in the
/// rootfs), mode 0700, owned by its uid and gid.
#[test]
fn a_missing_home_is_made_and_owned_by_the_user() {
    require_root();
    let passwd = format!("{ROOT_LINE}app:x:1000:1000::/home/app:/bin/sh\n");
    for rt in Runtime::ALL {
        for ex in EXECUTORS {
            let mut b = bundle("home-missing", 1000, 1000, &passwd, &[]);
            let s = start(&mut b, ex, rt);
            assert_eq!(s.home, "/home/app", "{}", s.context);
            if ex == Executor::None {
                assert!(!s.writable, "without us: {}", s.context);
                continue;
            }
            assert!(s.writable, "{}", s.context);
            assert_eq!(s.stat, "1000 1000 700", "{}", s.context);
            assert_eq!(s.mount.as_deref(), Some("tmpfs"), "{}", s.context);
        }
    }
}

/// No passwd entry and no `HOME`: the runtime would give `/`. The spec
/// executor sets `HOME=/home/1000` and mounts it; the hook cannot set the
/// environment, so it keeps `/` read-only and mounts the caches under it.
#[test]
fn a_user_without_a_home_gets_one_where_the_environment_can_be_set() {
    require_root();
    for rt in Runtime::ALL {
        let crun_181 = rt == Runtime::Crun && runtime_version(rt) < (1, 9);
        for ex in EXECUTORS {
            let mut b = bundle("home-none", 1000, 0, ROOT_LINE, &[]);
            let s = start(&mut b, ex, rt);
            match ex {
                Executor::None | Executor::Hook | Executor::HookAt(_) => {
                    // crun 1.8.1 leaves HOME out of the environment (docs/design.md#home).
                    let want = if crun_181 { "(unset)" } else { "/" };
                    assert_eq!(s.home, want, "{}", s.context);
                    assert!(!s.writable && s.env_home.is_none(), "{}", s.context);
                    if ex == Executor::None {
                        assert!(s.shown.caches.is_empty(), "without us: {}", s.context);
                    } else {
                        let failed = s.shown.root_caches(1000);
                        assert!(failed.is_empty(), "{failed:?}: {}", s.context);
                    }
                }
                Executor::Spec => {
                    assert_eq!(s.env_home.as_deref(), Some("/home/1000"), "{}", s.context);
                    assert_eq!(s.home, "/home/1000", "{}", s.context);
                    assert!(s.writable, "{}", s.context);
                    assert_eq!(s.stat, "1000 0 700", "{}", s.context);
                    assert_eq!(s.mount.as_deref(), Some("tmpfs"), "{}", s.context);
                }
            }
            if ex == Executor::Hook {
                let failed = home::root_home_caches(&s.log);
                assert!(failed.is_empty(), "the hook's log: {failed:?}: {}", s.context);
            }
        }
    }
}

/// A volume at `HOME` is the user's: nothing of ours is mounted over it.
#[test]
fn a_volume_at_home_wins() {
    require_root();
    for rt in Runtime::ALL {
        for ex in [Executor::Hook, Executor::Spec] {
            let vol = TempDir::new("home-vol");
            std::fs::write(vol.join(".profile"), "volume profile").unwrap();
            let mut b = bundle("home-vol", 0, 0, ROOT_LINE, &["HOME=/data"]);
            std::fs::create_dir(b.rootfs().join("data")).unwrap();
            b.config["mounts"].as_array_mut().unwrap().push(json!({
                "destination": "/data", "type": "bind", "source": vol.join(""), "options": ["rbind", "rw"]
            }));
            let s = start(&mut b, ex, rt);
            assert_eq!(s.profile.as_deref(), Some("volume profile"), "{}", s.context);
            assert_ne!(s.mount.as_deref(), Some("tmpfs"), "no tmpfs over the volume: {}", s.context);
            assert!(vol.join("new").exists(), "the container wrote into its volume: {}", s.context);
        }
    }
}

/// Every hostile `HOME` and passwd file, through the hook and the spec
/// executor, on runc and crun: the container starts, what must be left
/// alone is (with its note where it is a warning), no volume is covered,
/// and nothing is made outside the rootfs.
#[test]
fn hostile_homes_are_left_alone() {
    require_root();
    for rt in Runtime::ALL {
        for ex in [Executor::Hook, Executor::Spec] {
            for c in hostile_cases() {
                let vol = TempDir::new("home-hostile-vol");
                std::fs::write(vol.join("mine"), "volume").unwrap();
                let mut b = bundle("home-hostile", c.uid, 0, &c.passwd, c.env);
                (c.make)(&b.rootfs());
                std::fs::create_dir_all(b.rootfs().join(c.volume_at.trim_start_matches('/'))).unwrap();
                b.config["mounts"].as_array_mut().unwrap().push(json!({
                    "destination": c.volume_at, "type": "bind", "source": vol.join(""), "options": ["rbind", "rw"]
                }));
                let s = start(&mut b, ex, rt);
                let what = format!("{}, {rt:?}, {ex:?}: {}", c.name, s.context);
                assert!(!Path::new(ESCAPE).exists() && !Path::new("/home/first").exists(), "{what}");
                assert_eq!(std::fs::read_to_string(vol.join("mine")).unwrap(), "volume", "{what}");
                assert!(!vol.join("new").exists() || c.name.contains("volume"), "{what}");
                if !c.note.is_empty() {
                    assert!(s.log.contains(c.note) || s.inject.contains(c.note), "want {:?}: {what}", c.note);
                }
                let failed = home::home_failures(&c, ex == Executor::Spec, &s.shown);
                assert!(failed.is_empty(), "{failed:#?}: {what}");
                // The image's app is as the image made it.
                if let Some(main) = c
                    .app_home()
                    .and_then(|d| std::fs::read_to_string(b.rootfs().join(d).join("main.py")).ok())
                {
                    assert_eq!(main, home::APP, "{what}");
                }
                if ex == Executor::Hook {
                    let had = c.env.iter().rev().find_map(|e| e.strip_prefix("HOME=")).map(String::from);
                    assert_eq!(s.env_home, had, "the hook never changes the environment: {what}");
                }
            }
        }
    }
}

/// The homes a writable `HOME` would open up (an app kept in its user's
/// home, php-fpm's site, a Node app, uid 1000 with `HOME=/root`) and the
/// runtime's `HOME=/`, through the hook at each stage it is registered at,
/// on runc and crun: the app's files stay as the image made them, nothing
/// new appears beside them, only the caches are the process's.
#[test]
fn homes_stay_as_the_image_made_them_at_every_stage() {
    require_root();
    let cases: Vec<home::Hostile> = home::security_cases()
        .into_iter()
        .chain(home::env_cases().into_iter().filter(|c| c.name == "HOME=/"))
        .collect();
    for rt in Runtime::ALL {
        for stage in ["createRuntime", "createContainer"] {
            for c in &cases {
                let mut b = bundle("home-stage", c.uid, 0, &c.passwd, c.env);
                (c.make)(&b.rootfs());
                let s = start(&mut b, Executor::HookAt(stage), rt);
                let what = format!("{}, {rt:?}, {stage}: {}", c.name, s.context);
                let failed = home::home_failures(c, false, &s.shown);
                assert!(failed.is_empty(), "{failed:#?}: {what}");
                if !c.note.is_empty() {
                    assert!(s.log.contains(c.note), "want {:?}: {what}", c.note);
                }
            }
        }
    }
}

/// The programs of tests/pytorch/home_programs.py, each with its argument.
fn programs(triton: &Path) -> Vec<(String, Vec<String>)> {
    let script = format!("{WORK}/home_programs.py");
    let py = |name: &str, python: &str, args: &[&str]| {
        let mut argv = vec![python.to_string(), script.clone(), name.to_string()];
        argv.extend(args.iter().map(|a| a.to_string()));
        (name.to_string(), argv)
    };
    let triton = triton.display().to_string();
    vec![
        py("user_base", PYTHON, &[]),
        py("pip_user", PYTHON, &["/wheel/hf_probe-1.0-py3-none-any.whl"]),
        py("torch_hub", PYTHON, &[]),
        py("triton", &triton, &[]),
    ]
}

/// A local wheel (`hf_probe`, pure Python) in `dir`, made with `zipfile`.
fn local_wheel(dir: &Path) {
    let make = r#"import sys, zipfile
d = sys.argv[1]
files = {
    "hf_probe/__init__.py": "VALUE = 1\n",
    "hf_probe-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: hf-probe\nVersion: 1.0\n",
    "hf_probe-1.0.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: oci-tmpfs-hook-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}
record = "".join(f"{n},,\n" for n in files) + "hf_probe-1.0.dist-info/RECORD,,\n"
with zipfile.ZipFile(f"{d}/hf_probe-1.0-py3-none-any.whl", "w") as z:
    for n, t in files.items():
        z.writestr(n, t)
    z.writestr("hf_probe-1.0.dist-info/RECORD", record)
"#;
    ok(std::process::Command::new(PYTHON).args(["-c", make]).arg(dir));
}

/// The Triton venv (tests/env/venv.sh, PyPI's wheel, made with Debian's
/// python so that the host-root container runs it): its python.
fn triton_python() -> std::path::PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = ok(std::process::Command::new(root.join("tests/env/venv.sh"))
        .arg(root.join("tests/pytorch/triton-requirements.txt"))
        .arg("triton.runtime.cache")
        .arg(PYTHON));
    std::path::PathBuf::from(out.trim())
}

/// Who runs the programs: root (its home `/root` from the host's
/// `/etc/passwd`, which the container binds), or uid 12345, which has no
/// entry there; `HOME` in the environment for the hook, which cannot set it.
#[derive(Clone, Copy, Debug)]
enum User {
    Root,
    NoEntry { home_env: bool },
}

/// Each program, as root and as a uid without a passwd entry, on runc and
/// crun: without us (and with a writable `/tmp` made by hand) each fails on
/// the read-only `HOME` with its own error;
/// with the hook (uid 12345 given `HOME=/home/u`, a home the image lacks) and
/// with the spec executor (uid 12345 given no `HOME`: it sets
/// `HOME=/home/12345`) each passes, and root's dotfile in the image's
/// `/root` is there, unchanged. Through the hook, uid 12345 with no `HOME`
/// (the runtime's `/`) gets the caches under `/`: Triton's cache manager and
/// torch.hub pass, and what writes elsewhere in `HOME` still fails.
#[test]
fn real_programs_write_their_home() {
    crate::pytorch::require_all();
    let triton = triton_python();
    let wheel = TempDir::new("home-wheel");
    local_wheel(&wheel.join(""));
    assert!(
        std::fs::metadata("/etc/passwd").is_ok()
            && !std::fs::read_to_string("/etc/passwd")
                .unwrap()
                .lines()
                .any(|l| l.split(':').nth(2) == Some("12345")),
        "uid 12345 has no entry in the host's /etc/passwd, which the containers bind"
    );
    let venv = triton.parent().and_then(Path::parent).expect("a venv's bin/python").to_path_buf();
    for rt in Runtime::ALL {
        for ex in EXECUTORS {
            let users = match ex {
                Executor::Hook => {
                    vec![User::Root, User::NoEntry { home_env: true }, User::NoEntry { home_env: false }]
                }
                _ => vec![User::Root, User::NoEntry { home_env: false }],
            };
            for user in users {
                let mut b = programs_bundle(ex, user, &wheel.join(""), &venv, &triton);
                let s = run_with(&mut b, ex, rt, Duration::from_secs(300));
                let what = format!("{rt:?}, {ex:?}, {user:?}: {}", s.context);
                // crun 1.8.1 leaves HOME out for a uid without a passwd entry
                // (docs/design.md#home).
                let crun_181 = rt == Runtime::Crun && runtime_version(rt) < (1, 9);
                let want_home = match (user, ex) {
                    (User::Root, _) => "/root",
                    (User::NoEntry { home_env: true }, _) => "/home/u",
                    (User::NoEntry { home_env: false }, Executor::Spec) => "/home/12345",
                    (User::NoEntry { home_env: false }, _) if crun_181 => "(unset)",
                    (User::NoEntry { home_env: false }, _) => "/",
                };
                for (name, _) in programs(&triton) {
                    let line = s.out.lines().find(|l| {
                        l.starts_with(&format!("PASS {name}")) || l.starts_with(&format!("FAIL {name}:"))
                    });
                    let line = line.unwrap_or_else(|| panic!("no line for {name}: {what}"));
                    match ex {
                        Executor::None => {
                            assert!(line.starts_with("FAIL "), "{name} passed without us: {what}");
                            // The path each program tried: under /root, /, or
                            // (HOME unset) the relative `~`.
                            let under = match want_home {
                                "/root" => "'/root/",
                                "/" => "'/.",
                                _ => "'~",
                            };
                            assert!(
                                (line.contains("Read-only file system")
                                    || line.contains("Permission denied"))
                                    && line.contains(under),
                                "{name}: the read-only HOME {want_home} is the error: {line}: {what}"
                            );
                        }
                        // HOME=/ through the hook: the caches under / are
                        // writable (Triton's ~/.triton, torch.hub's ~/.cache),
                        // nothing else of / (Python's user site, pip --user);
                        // crun 1.8.1 gives no HOME, so `~` stays relative.
                        Executor::Hook if matches!(user, User::NoEntry { home_env: false }) => {
                            let cache = matches!(name.as_str(), "triton" | "torch_hub") && !crun_181;
                            if cache {
                                assert!(
                                    line.starts_with("PASS "),
                                    "{name} failed with the caches under /: {line}: {what}"
                                );
                            } else {
                                assert!(
                                    line.starts_with("FAIL "),
                                    "{name} wrote outside the caches under /: {line}: {what}"
                                );
                            }
                        }
                        Executor::Hook | Executor::HookAt(_) | Executor::Spec => {
                            assert!(line.starts_with("PASS "), "{name} failed with us: {line}: {what}");
                        }
                    }
                }
                assert!(s.out.lines().any(|l| l == format!("HOME={want_home}")), "HOME={want_home}: {what}");
                if matches!(user, User::Root) {
                    assert!(s.out.contains("DOTFILE image dotfile"), "the image's dotfile: {what}");
                }
                assert_eq!(
                    std::fs::read_to_string(b.rootfs().join("root/.bashrc")).unwrap(),
                    "image dotfile"
                );
                assert_eq!(
                    std::fs::read_dir(b.rootfs().join("root")).unwrap().count(),
                    1,
                    "the image's /root gained nothing"
                );
            }
        }
    }
}

/// A host-root bundle for [`real_programs_write_their_home`]: root's home
/// `/root` in the image holding a dotfile, the wheel and the Triton venv
/// bound read-only, run as `user`, running every program.
fn programs_bundle(ex: Executor, user: User, wheel: &Path, venv: &Path, triton: &Path) -> Bundle {
    let mut b = crate::pytorch::torch_bundle("home-programs");
    std::fs::create_dir(b.rootfs().join("root")).unwrap();
    std::fs::write(b.rootfs().join("root/.bashrc"), "image dotfile").unwrap();
    std::fs::set_permissions(b.rootfs().join("root"), std::os::unix::fs::PermissionsExt::from_mode(0o700))
        .unwrap();
    let mounts = b.config["mounts"].as_array_mut().unwrap();
    for (at, source) in [("/wheel", wheel.to_path_buf()), (venv.to_str().unwrap(), venv.to_path_buf())] {
        mounts.push(json!({"destination": at, "type": "bind", "source": source, "options": ["rbind", "ro"]}));
    }
    if ex == Executor::None {
        // `--tmpfs /tmp` by hand, as teams do today: what still
        // fails is HOME. (runc before 1.1.8 gives the tmpfs the
        // mode of the directory under it: docs/design.md#runc-tmpfs-mode.)
        std::fs::set_permissions(
            b.dir.join("rootfs/tmp"),
            std::os::unix::fs::PermissionsExt::from_mode(0o1777),
        )
        .unwrap();
        mounts.push(json!({"destination": "/tmp", "type": "tmpfs", "source": "tmpfs", "options": ["nosuid", "nodev", "mode=1777"]}));
    }
    match user {
        User::Root => {}
        User::NoEntry { home_env } => {
            b.config["process"]["user"] = json!({"uid": 12345, "gid": 12345});
            if home_env {
                b.env("HOME=/home/u");
            }
        }
    }
    let mut script = String::from("echo \"DOTFILE $(cat \"$HOME/.bashrc\" 2>&1)\"\n");
    for (_, argv) in programs(triton) {
        script.push_str(&argv.join(" "));
        script.push('\n');
    }
    b.config["process"]["args"] = json!(["/bin/sh", "-c", script]);
    b
}
