//! The container user's `HOME` in real runc and crun containers with a
//! read-only root (docs/design.md#home-rule), through each executor: none
//! (the problem: the caches under `HOME` are not writable), the hook
//! (`inject --stage prestart`) and the spec executor (`inject --mode spec`,
//! what the runtime wrapper does in spec mode). The container prints its
//! `HOME`, what it can write, create or rename there, which caches it can
//! write, the directory's mode and owner, the image's dotfile and the
//! mounts (tests/support/home.rs's probe).
//!
//! - root, `HOME` from the image's `/etc/passwd` (`/root`, mode 0750, holding
//!   `.profile`): `/root` stays the image's, read-only, and its caches are
//!   root's tmpfs;
//! - uid 1000 whose passwd home `/home/app` the image lacks: made by fd,
//!   the process's, mode 0700, read-only, holding its caches' tmpfs;
//! - uid 1000 with no passwd entry: the runtime gives `HOME=/` (crun 1.8.1
//!   none at all); every executor leaves `/` read-only and mounts the
//!   caches under it;
//! - a volume at `HOME` wins.
//!
//! The hostile `HOME`s, passwd files and image homes of
//! [`hostile_homes_never_open_up_the_image`] (tests/support/home.rs, which
//! the CRI and NRI suites run too) run through both executors and both
//! runtimes: nothing of the image under `HOME` opens up, each gets its
//! note, no tmpfs of ours covers a volume, and nothing is made outside the
//! rootfs.

use std::path::Path;
use std::time::Duration;

use crate::support::home::{self, hostile_cases, ESCAPE, PROBE, ROOT_LINE};
use crate::support::*;
use serde_json::json;

/// How the container gets our mounts: not at all, our hook at `prestart`,
/// `inject --mode spec` (tests/runtimes/home_tools.rs runs through these
/// too).
pub(crate) const EXECUTORS: [Via; 3] = [Via::Bare, Via::Hook("prestart"), Via::InjectSpec];

/// What one container showed.
#[derive(Debug)]
struct Seen {
    home: String,
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
pub(crate) struct Printed {
    pub(crate) out: String,
    /// The hook's log (its log file).
    pub(crate) log: String,
    /// What `inject --mode spec` printed (its notes, on stdout and stderr).
    pub(crate) inject: String,
    pub(crate) context: String,
    /// What `explain` said of the bundle just before the executor ran it.
    pub(crate) explained: Option<verdict::Explained>,
}

/// Registers `executor` (the hook's warnings to a log file), runs the bundle
/// with `rt` within `timeout`, and asserts it ran.
pub(crate) fn run_with(b: &mut Bundle, executor: Via, rt: Runtime, timeout: Duration) -> Printed {
    let (conf, log) = warnings_to_a_file(b);
    // The caches' line is information (docs/design.md#home-rule).
    std::fs::write(&conf, std::fs::read_to_string(&conf).unwrap().replace("\"warn\"", "\"info\"")).unwrap();
    let explain = |b: &Bundle| verdict::explain_for(&b.dir, &conf, rt, executor);
    let (inject, explained) = match executor {
        Via::Bare => {
            b.write();
            (String::new(), None)
        }
        Via::Hook(stage) => {
            b.inject_with_config(stage, &conf);
            (String::new(), explain(b))
        }
        Via::Wrapper(mode) => panic!("the HOME cases run no wrapper (mode {mode})"),
        Via::InjectSpec => {
            b.write();
            let explained = explain(b);
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
            (out, explained)
        }
    };
    let run = b.run_timeout(rt, timeout);
    let out = run.stdout();
    // Only our hook opens the log: no file where no hook of ours ran (none
    // registered, or `inject --mode spec` that registered none); a missing
    // file after our hook was registered fails.
    let log = match read_text_if_any(&log) {
        Some(text) => text,
        None if matches!(executor, Via::Bare | Via::InjectSpec) => String::new(),
        None => panic!("{}: no log file, though our hook was registered ({executor:?})", log.display()),
    };
    let context = format!(
        "{rt:?}, {executor:?}\n--- inject:\n{inject}\n--- stdout:\n{out}\n--- stderr:\n{}\n--- hook log:\n{log}\n--- config:\n{}",
        run.stderr(),
        serde_json::to_string_pretty(&b.config).unwrap()
    );
    assert!(run.output.status.success(), "the container failed: {context}");
    Printed { out, log, inject, context, explained }
}

/// Runs [`PROBE`]'s bundle with `executor` and reads what it printed.
fn start(b: &mut Bundle, executor: Via, rt: Runtime) -> Seen {
    let Printed { out, log, inject, context, explained } = run_with(b, executor, rt, Duration::from_secs(60));
    let shown = home::Seen::parse(&out);
    assert!(shown.home != "(no HOME line)", "no HOME line: {context}");
    // The probe prints the container's mount table: ours where explain said.
    if let Some(explained) = explained {
        explained.assert_did(&parse_mountinfo(&out), &b.config, &context);
    }
    let env_home = b.config["process"]["env"]
        .as_array()
        .and_then(|e| e.iter().rev().find_map(|v| v.as_str()?.strip_prefix("HOME=").map(String::from)));
    Seen {
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

/// Root with an image home (`/root`, 0750, holding `.profile`): `HOME`
/// stays the image's, read-only, nothing of it opens up, and its caches
/// are root's tmpfs; without us no cache can be written.
#[test]
fn roots_home_stays_the_images_and_its_caches_are_writable() {
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
            assert_eq!(s.profile.as_deref(), Some("image profile"), "the image's dotfile: {}", s.context);
            assert_eq!(s.stat, "0 0 750", "the image directory's mode: {}", s.context);
            assert_eq!(s.env_home, None, "HOME came from /etc/passwd, nothing set: {}", s.context);
            let failed = match ex {
                Via::Bare => s.shown.left_alone("/root"),
                Via::Hook(_) | Via::InjectSpec | Via::Wrapper(_) => {
                    s.shown.cached("/root", 0, &home::PROBED_CACHES)
                }
            };
            assert!(failed.is_empty(), "{failed:#?}: {}", s.context);
            // The image's own file is unchanged, and nothing was added.
            assert_eq!(std::fs::read_to_string(b.rootfs().join("root/.profile")).unwrap(), "image profile");
            let listed = home::listing(&b.rootfs().join("root"));
            let made: Vec<&String> = listed.iter().filter(|n| *n != ".profile").collect();
            assert!(
                made.iter().all(|n| [".cache", ".config", ".triton", ".cupy", ".nv"].contains(&n.as_str())),
                "only cache mountpoints were made in the image's /root: {listed:?}"
            );
        }
    }
}

/// `TMPDIR=/root/.tmp` inside root's `HOME=/root`: a temp tmpfs of its own
/// at `/root/.tmp`, mode 1777 and the plan's owner like every temp dir,
/// with what the image's `/root/.tmp` held copied into it; `HOME` itself
/// stays the image's.
#[test]
fn a_temp_dir_inside_home_is_a_temp_tmpfs_of_its_own() {
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
        let actions = b.explain()["plan"]["actions"].as_array().unwrap().clone();
        assert!(actions.iter().any(|a| a["target"] == "/root/.tmp"), "a tmpfs at /root/.tmp: {actions:?}");
        assert!(!actions.iter().any(|a| a["target"] == "/root"), "none at HOME: {actions:?}");
        b.script("stat -c 'TMPDIR %u %g %a' /root/.tmp; stat -c 'HOME %u %g %a' /root; cat /root/.tmp/f; echo; cat /root/.profile; echo; echo x > /root/new && echo HOME-WRITABLE; true");
        let p = run_with(&mut b, Via::Hook("prestart"), rt, Duration::from_secs(60));
        assert!(p.out.contains("TMPDIR 0 0 1777\n"), "the plan's owner and mode: {}", p.context);
        assert!(p.out.contains("HOME 0 0 750\n"), "the image home's mode: {}", p.context);
        assert!(p.out.contains("image tmp file") && p.out.contains("image profile"), "copied: {}", p.context);
        assert!(!p.out.contains("HOME-WRITABLE"), "HOME is read-only: {}", p.context);
    }
}

/// `/tmp -> /root/.triton` in the image, an empty directory there, with
/// root's `HOME=/root`: `/tmp` lands on the directory the `.triton` cache
/// would get, and two tmpfs there would stack, one hiding the other. The
/// hook mounts the first (`/tmp`'s, mode 1777) and leaves the cache alone
/// with a warning naming both: `/tmp` is writable, and nothing of ours is
/// hidden.
#[test]
fn a_temp_dir_a_symlink_puts_on_a_cache_is_one_tmpfs() {
    require_root();
    for rt in Runtime::ALL {
        let mut b = bundle("home-tmplink", 0, 0, ROOT_LINE, &[]);
        let home = b.rootfs().join("root");
        std::fs::create_dir_all(home.join(".triton")).unwrap();
        std::fs::write(home.join(".profile"), "image profile").unwrap();
        std::fs::remove_dir(b.rootfs().join("tmp")).unwrap();
        std::os::unix::fs::symlink("/root/.triton", b.rootfs().join("tmp")).unwrap();
        b.script(
            "echo x > /tmp/new && echo TMP-WRITABLE; stat -c 'MODE %a' /root/.triton; cat /root/.profile; echo; cat /proc/self/mountinfo",
        );
        let p = run_with(&mut b, Via::Hook("prestart"), rt, Duration::from_secs(60));
        assert!(p.out.contains("TMP-WRITABLE") && p.out.contains("image profile"), "{}", p.context);
        assert!(p.out.contains("MODE 1777"), "/tmp's tmpfs is the one there: {}", p.context);
        let ours: Vec<_> = parse_mountinfo(&p.out)
            .into_iter()
            .filter(|m| m.fstype == "tmpfs" && m.source == "oci-tmpfs-hook")
            .map(|m| m.mount_point)
            .collect();
        assert_eq!(
            ours.iter().filter(|m| *m == "/root/.triton").count(),
            1,
            "one tmpfs at /root/.triton: {}",
            p.context
        );
        assert!(
            p.log.contains("/root/.triton left alone: it is the same directory as /tmp"),
            "the warning names both: {}",
            p.context
        );
        assert!(!home.join(".triton/new").exists(), "nothing written into the image");
    }
}

/// A user whose passwd home the image lacks: `HOME` is made (by fd, in the
/// rootfs) as a plain directory of its uid and gid, mode 0700, read-only
/// like the rest of the root, holding the caches' tmpfs.
#[test]
fn a_missing_home_is_made_for_the_user_to_hold_its_caches() {
    require_root();
    let passwd = format!("{ROOT_LINE}app:x:1000:1000::/home/app:/bin/sh\n");
    for rt in Runtime::ALL {
        for ex in EXECUTORS {
            let mut b = bundle("home-missing", 1000, 1000, &passwd, &[]);
            let s = start(&mut b, ex, rt);
            if ex == Via::Bare {
                assert!(!s.shown.caches.iter().any(|c| c == ".triton"), "without us: {}", s.context);
                continue;
            }
            let failed = s.shown.cached("/home/app", 1000, &home::PROBED_CACHES);
            assert!(failed.is_empty(), "{failed:#?}: {}", s.context);
            assert_eq!(s.stat, "1000 1000 700", "{}", s.context);
            assert_eq!(s.mount, None, "no tmpfs at HOME: {}", s.context);
        }
    }
}

/// No passwd entry and no `HOME`: the runtime gives `/` (crun 1.8.1 leaves
/// `HOME` out). Every executor keeps `/` read-only and mounts the caches
/// under it, and says so in one line; none sets `HOME`.
#[test]
fn a_user_without_a_passwd_entry_gets_its_caches_under_the_root() {
    require_root();
    for rt in Runtime::ALL {
        let crun_181 = rt == Runtime::Crun && runtime_version(rt) < (1, 9);
        for ex in EXECUTORS {
            let mut b = bundle("home-none", 1000, 0, ROOT_LINE, &[]);
            let s = start(&mut b, ex, rt);
            // crun 1.8.1 leaves HOME out of the environment (docs/design.md#home).
            let want = if crun_181 { "(unset)" } else { "/" };
            assert_eq!(s.home, want, "{}", s.context);
            assert_eq!(s.env_home, None, "no executor sets HOME: {}", s.context);
            let failed = match ex {
                Via::Bare => s.shown.left_alone(want),
                _ => s.shown.root_caches(1000),
            };
            assert!(failed.is_empty(), "{failed:#?}: {}", s.context);
            // The hook logs it; `inject --mode spec` prints it (and where
            // it hands the targets to the hook, the hook logs it too).
            if ex != Via::Bare {
                let log = home::root_home_caches(&s.log);
                let printed = home::root_home_caches(&s.inject);
                assert!(log.is_empty() || printed.is_empty(), "{log:?} {printed:?}: {}", s.context);
            }
        }
    }
}

/// A volume at `HOME` is the user's: nothing of ours is mounted over it.
#[test]
fn a_volume_at_home_wins() {
    require_root();
    for rt in Runtime::ALL {
        for ex in [Via::Hook("prestart"), Via::InjectSpec] {
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

/// Every hostile `HOME`, passwd file and image home, through the hook and
/// the spec executor, on runc and crun: the container starts, nothing of
/// the image under `HOME` opens up, only the caches the case expects are
/// writable, each case's note is said, no volume is covered, no executor
/// changes the environment, and nothing is made outside the rootfs.
#[test]
fn hostile_homes_never_open_up_the_image() {
    require_root();
    for rt in Runtime::ALL {
        for ex in [Via::Hook("prestart"), Via::InjectSpec] {
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
                assert!(!vol.join("new").exists() || c.home_is_volume(), "{what}");
                if !c.note.is_empty() {
                    assert!(s.log.contains(c.note) || s.inject.contains(c.note), "want {:?}: {what}", c.note);
                }
                let failed = home::home_failures(&c, &s.shown);
                assert!(failed.is_empty(), "{failed:#?}: {what}");
                // The image's app is as the image made it.
                // A home without an app (no main.py in the image) has none to compare.
                if let Some(main) =
                    c.app_home().and_then(|d| read_text_if_any(b.rootfs().join(d).join("main.py")))
                {
                    assert_eq!(main, home::APP, "{what}");
                }
                let had = c.env.iter().rev().find_map(|e| e.strip_prefix("HOME=")).map(String::from);
                assert_eq!(s.env_home, had, "no executor changes the environment: {what}");
            }
        }
    }
}

/// The homes a writable `HOME` would open up (an app kept in its user's
/// home, php-fpm's site, a Node app, uid 1000 with `HOME=/root`, the homes
/// whose dot-entries hold code) and the runtime's `HOME=/`, through the hook
/// at each stage it is registered at, on runc and crun: the image's files
/// stay as the image made them, nothing new appears beside them, only the
/// caches are the process's.
#[test]
fn homes_stay_as_the_image_made_them_at_every_stage() {
    require_root();
    let cases: Vec<home::Hostile> = home::security_cases()
        .into_iter()
        .chain(home::dotfile_cases())
        .chain(home::cache_cases())
        .chain(home::env_cases().into_iter().filter(|c| c.name == "HOME=/"))
        .collect();
    for rt in Runtime::ALL {
        for stage in ["createRuntime", "createContainer"] {
            for c in &cases {
                let mut b = bundle("home-stage", c.uid, 0, &c.passwd, c.env);
                (c.make)(&b.rootfs());
                let s = start(&mut b, Via::Hook(stage), rt);
                let what = format!("{}, {rt:?}, {stage}: {}", c.name, s.context);
                let failed = home::home_failures(c, &s.shown);
                assert!(failed.is_empty(), "{failed:#?}: {what}");
                if !c.note.is_empty() {
                    assert!(s.log.contains(c.note), "want {:?}: {what}", c.note);
                }
            }
        }
    }
}
