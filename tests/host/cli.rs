//! The built binary's commands that need no container: `explain`, `inject`,
//! usage errors, and the hook's refusals of bad input.

use std::process::Command;
use std::time::Duration;

use crate::support::*;
use serde_json::{json, Value};

fn cmd(args: &[&str]) -> std::process::Output {
    Command::new(hook_bin()).args(args).output().unwrap()
}

/// A cache dir named by a default `env_targets` variable is a target, its
/// origin the variable; a relative one is a warning.
#[test]
fn explain_shows_cache_dirs_from_the_env() {
    let mut b = Bundle::new("explain-cache");
    b.env("TRITON_CACHE_DIR=/cache/triton").env("HF_HOME=hf").write();
    let out = cmd(&["explain", "--bundle", b.dir.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let s = text(&out.stdout);
    let line =
        s.lines().find(|l| l.contains("mount tmpfs on /cache/triton: size")).unwrap_or_else(|| panic!("{s}"));
    assert!(line.ends_with("[$TRITON_CACHE_DIR]"), "{line}");
    assert!(s.contains("HF_HOME=hf: not a usable cache dir: is not an absolute path"), "{s}");
}

#[test]
fn explain_text_lists_actions_and_skips() {
    let mut b = Bundle::new("explain");
    b.env("TMPDIR=/var/tmp").env("TEMP=../etc").annotate("oci-tmpfs-hook/tmp-size", "512Mi").write();
    let out = cmd(&["explain", "--bundle", b.dir.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let s = text(&out.stdout);
    assert!(s.contains("acts (root.readonly is true)"), "{s}");
    assert!(s.contains("mount tmpfs on /tmp: size 512Mi (512Mi, from oci-tmpfs-hook/tmp-size)"), "{s}");
    assert!(s.contains("mount tmpfs on /var/tmp: size 512Mi"), "{s}");
    assert!(s.contains("grow /dev/shm (the spec's tmpfs has 64Mi)"), "{s}");
    assert!(s.contains("TEMP=../etc: not a usable temp dir: is not an absolute path"), "{s}");
    assert!(s.contains("hook (Podman, CRI-O, inject"), "{s}");
    assert!(s.contains("spec (oci-tmpfs-runtime, inject --mode spec): writes a tmpfs entry for /tmp"), "{s}");
    assert!(!s.contains("when two or more pass"), "{s}");
    assert!(
        s.contains("when one's directory holds files in the image, the runtime copies them up (tmpcopyup)"),
        "{s}"
    );
    // For a runtime the spec executor trusts, both targets pass in this
    // rootfs, and both go into the spec: ours first keeps every spec mount
    // on top under a rename (docs/design.md#spec-race).
    let crun = b.dir.join("crun");
    std::fs::write(&crun, "#!/bin/sh\necho crun version 1.28\n").unwrap();
    std::fs::set_permissions(&crun, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let out = cmd(&["explain", "--runtime", crun.to_str().unwrap(), "--bundle", b.dir.to_str().unwrap()]);
    let s = text(&out.stdout);
    let spec = "by the spec executor (a tmpfs entry)";
    assert!(s.contains(&format!("  /tmp: {spec}\n")) && s.contains(&format!("  /var/tmp: {spec}\n")), "{s}");
    // The image's /var/tmp holding a file: the runtime copies it up.
    std::fs::create_dir_all(b.rootfs().join("var/tmp")).unwrap();
    std::fs::write(b.rootfs().join("var/tmp/kept"), "image").unwrap();
    let out = cmd(&["explain", "--runtime", crun.to_str().unwrap(), "--bundle", b.dir.to_str().unwrap()]);
    let s = text(&out.stdout);
    let copy = "  /var/tmp: by the spec executor (a tmpfs entry, the runtime copying the image's entries into it (tmpcopyup))";
    assert!(s.contains(copy), "{s}");
    assert!(s.contains("raises the spec's /dev/shm tmpfs to"), "{s}");
}

#[test]
fn explain_json_and_writable_root() {
    let mut b = Bundle::new("explain-json");
    b.readonly(false).write();
    let v = b.explain();
    assert_eq!(v["plan"]["enabled"], json!(false));
    assert_eq!(v["plan"]["actions"], json!([]));
    assert_eq!(v["rootfs"], json!(b.rootfs()));
}

/// A read-only container without a mount namespace of its own: `explain`
/// says the hook does nothing and why, in one note that names a path as
/// given (here a network namespace's file), without calling it a mount
/// namespace.
#[test]
fn explain_without_an_own_mount_namespace() {
    let cases = [
        (json!([{"type": "pid"}]), "linux.namespaces has no \"mount\" entry"),
        (
            json!([{"type": "mount", "path": "/proc/self/ns/net"}]),
            "names an existing namespace (path /proc/self/ns/net): it would share",
        ),
    ];
    for (namespaces, needle) in cases {
        let mut b = Bundle::new("explain-ns");
        b.config["linux"]["namespaces"] = namespaces;
        b.write();
        let out = cmd(&["explain", "--bundle", b.dir.to_str().unwrap()]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        let s = text(&out.stdout);
        assert!(
            s.contains(
                "does nothing (root.readonly is true, but the container has no mount namespace of its own)"
            ),
            "{s}"
        );
        assert!(s.contains("/tmp, the temp dirs and /dev/shm: ") && s.contains(needle), "{s}");
        assert!(!s.contains("mount namespace /proc"), "{s}");
        let v = b.explain();
        assert_eq!((&v["plan"]["enabled"], &v["plan"]["actions"]), (&json!(false), &json!([])));
        let notes = v["plan"]["notes"].as_array().unwrap();
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert_eq!(notes[0]["warn"], json!(true));
    }
}

#[test]
fn explain_uses_the_host_config() {
    let b = Bundle::new("explain-config");
    let cfg = b.dir.join("c.toml");
    std::fs::write(&cfg, "tmp_size = \"1g\"\nextra_targets = [\"/run\"]\n").unwrap();
    let out =
        cmd(&["explain", "--json", "--config", cfg.to_str().unwrap(), "--bundle", b.dir.to_str().unwrap()]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let targets: Vec<&str> =
        v["plan"]["actions"].as_array().unwrap().iter().filter_map(|a| a["target"].as_str()).collect();
    assert_eq!(targets, ["/tmp", "/run"]);
    assert_eq!(v["plan"]["actions"][0]["size"]["bytes"], json!(GI));
}

#[test]
fn explain_errors_are_one_line_exit_1() {
    let cases: Vec<(&str, Vec<String>)> = vec![
        ("missing bundle", vec!["explain".into(), "--bundle".into(), "/nonexistent/bundle".into()]),
        (
            "missing explicit config",
            vec![
                "explain".into(),
                "--bundle".into(),
                "/tmp".into(),
                "--config".into(),
                "/nonexistent/c.toml".into(),
            ],
        ),
    ];
    for (name, args) in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = cmd(&args);
        assert_eq!(out.status.code(), Some(1), "{name}");
        let err = text(&out.stderr);
        assert_eq!(err.lines().count(), 1, "{name}: {err}");
        assert!(err.starts_with("oci-tmpfs-hook: "), "{name}: {err}");
    }
}

#[test]
fn bad_host_config_names_file_and_key() {
    let b = Bundle::new("bad-config");
    let cfg = b.dir.join("c.toml");
    std::fs::write(&cfg, "tmp_sise = \"1g\"\n").unwrap();
    let out = cmd(&["explain", "--config", cfg.to_str().unwrap(), "--bundle", b.dir.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(err.contains("c.toml") && err.contains("tmp_sise"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
}

#[test]
fn usage_errors_exit_2() {
    for args in [&["frobnicate"][..], &["hook", "--stage", "poststop"], &["explain"], &[]] {
        let out = cmd(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out.stderr));
    }
}

#[test]
fn inject_is_idempotent_through_the_binary() {
    let b = Bundle::new("inject");
    let dir = b.dir.to_str().unwrap();
    let first = cmd(&["inject", "--bundle", dir, "--stage", "createRuntime"]);
    assert!(first.status.success(), "{}", text(&first.stderr));
    let once = std::fs::read(b.dir.join("config.json")).unwrap();
    let second = cmd(&["inject", "--bundle", dir, "--stage", "createRuntime"]);
    assert!(second.status.success());
    assert!(text(&second.stdout).contains("unchanged"));
    assert_eq!(std::fs::read(b.dir.join("config.json")).unwrap(), once);
    let v: Value = serde_json::from_slice(&once).unwrap();
    let hooks = v["hooks"]["createRuntime"].as_array().unwrap();
    assert_eq!(hooks.len(), 1);
    assert_eq!(hooks[0]["path"], json!(std::fs::canonicalize(hook_bin()).unwrap()));
    assert_eq!(hooks[0]["args"], json!(["oci-tmpfs-hook", "hook", "--stage", "createRuntime"]));
}

/// `inject --mode spec` says what `HOME`'s caches get, makes each cache's
/// mountpoint the process's, mode 0700 (never 1777 like a temp dir), and on
/// a bundle it edited already changes nothing and plans nothing.
#[test]
fn inject_spec_tells_what_the_caches_get_and_leaves_its_own_edit_alone() {
    let b = Bundle::new("spec36-finished");
    std::fs::write(b.rootfs().join("etc/passwd"), "root:x:0:0:root:/root:/bin/sh\n").unwrap();
    std::fs::create_dir(b.rootfs().join("root")).unwrap();
    let dir = b.dir.to_str().unwrap();
    let crun = b.dir.join("crun");
    std::fs::write(&crun, "#!/bin/sh\n[ \"$1\" = --version ] && echo 'crun version 1.8.1'; exit 0\n")
        .unwrap();
    std::fs::set_permissions(&crun, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let inject = || cmd(&["inject", "--mode", "spec", "--runtime", crun.to_str().unwrap(), "--bundle", dir]);
    let first = inject();
    assert!(first.status.success(), "{}", text(&first.stderr));
    let said = text(&first.stdout);
    assert!(
        said.starts_with("HOME=/root: read-only; cache tmpfs at /root/.cache, /root/.config, /root/.triton"),
        "{said}"
    );
    assert!(said.contains("wrote a tmpfs mount for /root/.triton into the spec"), "{said}");
    assert!(!said.contains("/root mode") && !said.contains("mode 1777 for the runtime\nmade"), "{said}");
    let made = std::fs::metadata(b.rootfs().join("root/.triton")).unwrap();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&made.permissions()) & 0o7777,
        0o700,
        "the mountpoint made for the cache"
    );
    let once = std::fs::read(b.dir.join("config.json")).unwrap();
    assert!(
        String::from_utf8_lossy(&once).contains("\"destination\": \"/root/.triton\""),
        "a cache in the spec"
    );
    assert!(!String::from_utf8_lossy(&once).contains("\"destination\": \"/root\""), "HOME is not");
    std::fs::remove_file(b.rootfs().join("etc/passwd")).unwrap();
    let second = inject();
    assert!(second.status.success(), "{}", text(&second.stderr));
    let said = text(&second.stdout);
    assert!(said.ends_with("config.json: nothing to write\n") && said.lines().count() == 1, "{said}");
    assert_eq!(std::fs::read(b.dir.join("config.json")).unwrap(), once);
}

#[test]
fn hook_refuses_bad_state_with_one_line() {
    let b = Bundle::new("bad-state");
    let bundle = b.dir.to_str().unwrap().to_string();
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("empty", vec![]),
        ("garbage", b"not json at all".to_vec()),
        (
            "missing bundle",
            json!({"ociVersion": "1.0.2", "id": "x", "pid": 5, "bundle": "/nonexistent/b"})
                .to_string()
                .into_bytes(),
        ),
        (
            "relative bundle",
            json!({"ociVersion": "1.0.2", "id": "x", "pid": 5, "bundle": "b"}).to_string().into_bytes(),
        ),
        ("oversized", vec![b' '; 2 << 20]),
        (
            "dead pid",
            json!({"ociVersion": "1.0.2", "id": "x", "pid": 999_999_999, "bundle": bundle})
                .to_string()
                .into_bytes(),
        ),
    ];
    for (name, stdin) in cases {
        let out = run_hook(&["hook", "--stage", "prestart"], &stdin, Duration::from_secs(10));
        assert_eq!(out.status.code(), Some(1), "{name}: {}", text(&out.stderr));
        let err = text(&out.stderr);
        assert_eq!(err.lines().count(), 1, "{name}: {err}");
        assert!(err.starts_with("oci-tmpfs-hook: "), "{name}: {err}");
        assert!(!err.contains("panicked"), "{name}: {err}");
    }
}

/// At prestart the hook joins the mount namespace of the state's pid; a
/// process in the hook's own namespace (here a child of the test, as a
/// runtime's bug or a wrong `--stage` would hand over) is refused before any
/// mount, with one line naming the process.
#[test]
fn hook_refuses_a_process_in_its_own_mount_namespace() {
    let b = Bundle::new("own-ns");
    b.write();
    let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
    let state = json!({"ociVersion": "1.0.2", "id": "own", "pid": child.id(), "bundle": b.dir});
    let out =
        run_hook(&["hook", "--stage", "prestart"], state.to_string().as_bytes(), Duration::from_secs(10));
    let _ = child.kill();
    let _ = child.wait();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    let (pid, parent) = (child.id(), std::process::id());
    assert!(err.contains("the target mount namespace is the hook's own or the host's"), "{err}");
    assert!(err.contains(&format!("process {pid} (sleep, state ")), "{err}");
    assert!(err.contains(&format!(", parent {parent}) is in the hook's")), "{err}");
}

#[test]
fn hook_on_writable_root_does_nothing_silently() {
    let mut b = Bundle::new("rw-direct");
    b.readonly(false).write();
    let state = json!({"ociVersion": "1.0.2", "id": "rw", "pid": 1, "bundle": b.dir});
    let out =
        run_hook(&["hook", "--stage", "prestart"], state.to_string().as_bytes(), Duration::from_secs(10));
    assert_eq!(out.status.code(), Some(0));
    assert!(out.stderr.is_empty() && out.stdout.is_empty());
}
