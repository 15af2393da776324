//! The container user's `HOME` through the real engines
//! (docs/design.md#home-plan), each with a read-only root and the image of
//! tests/support/home.rs (root's home `/root` holding `.profile`, no
//! `/etc/passwd` entry for uid 1000): Docker through the runtime wrapper,
//! Podman (runc and crun) through its hooks dir, and containerd's CRI
//! through the wrapper's two handlers (the NRI plugin runs the same pod
//! case in tests/nri/). Each engine also runs without us, where the same
//! `HOME` cannot be written: the problem the feature solves.
//!
//! Where the engines differ (docs/design.md#home): Podman sets
//! `HOME=/root` for root itself and, for `--user 1000`, adds a passwd line
//! whose home is `/` (Podman 5 also puts `HOME=/` in the environment); the
//! others leave `HOME` to the runtime, which reads the image's passwd. So a
//! uid without an entry gets `HOME=/` everywhere, and its caches under `/`
//! (docs/design.md#home-rule).

use crate::engines::{Dockerd, Podman};
use crate::support::cases::each_way;
use crate::support::home::{self, Seen};
use crate::support::pods::*;
use crate::support::*;

use std::path::Path;
use std::process::Command;

/// Panics with every failed check of `what`.
#[track_caller]
fn assert_none(what: &str, failed: &[String], seen: &Seen) {
    assert!(failed.is_empty(), "{what}:\n  {}\nsaw: {}\n{}", failed.join("\n  "), seen.summary(), seen.out);
}

/// A busybox rootfs shaped into the HOME image.
fn home_rootfs() -> Bundle {
    let b = Bundle::new("home-rootfs");
    home::shape_image(&b.rootfs());
    b
}

// ---------------------------------------------------------------- Docker

/// Docker (`--read-only --runtime oci-tmpfs --memory 1g`): root's `/root`
/// stays the image's, read-only, with `.profile`, and its caches are
/// root's; `--user 1000` keeps `HOME=/` read-only with the caches under it
/// writable, in both wrapper modes; a volume at `/root` wins. Without
/// `--runtime` (plain runc) no cache can be written.
#[test]
fn docker_home_through_the_wrapper() {
    let d = Dockerd::start();
    let image = unique("home");
    let rootfs = home_rootfs();
    let tar = d.dir.join("home.tar");
    ok(Command::new("tar").arg("-C").arg(rootfs.rootfs()).arg("-cf").arg(&tar).arg("."));
    ok(d.docker().arg("import").arg(&tar).arg(&image));
    let rt = ["--runtime", "oci-tmpfs", "--read-only", "--memory", "1g"];

    let seen = Seen::parse(&d.run_script(&rt, &image, home::PROBE));
    say(&format!("docker, root: {}", seen.summary()));
    assert_none("docker, root", &seen.cached("/root", 0, &home::PROBED_CACHES), &seen);
    assert_eq!(seen.profile, home::PROFILE, "docker, root: {}", seen.out);

    let before = d.wrapper_log().len();
    let seen = Seen::parse(&d.run_script(&[&rt[..], &["--user", "1000"]].concat(), &image, home::PROBE));
    say(&format!("docker, --user 1000 ({} mode): {}", wrapper_mode(), seen.summary()));
    let log = d.wrapper_log().split_off(before);
    let warned = home::root_home_warnings(&log);
    say(&format!("docker, --user 1000: warnings about HOME=/: {warned:?}"));
    assert_none(&format!("docker, --user 1000, {} mode", wrapper_mode()), &seen.root_caches(1000), &seen);
    assert_none(
        &format!("docker, --user 1000, {} mode", wrapper_mode()),
        &home::root_home_caches(&log),
        &seen,
    );

    let host = home::volume_dir("home-volume");
    let volume = format!("{}:/root", host.0.display());
    let seen = Seen::parse(&d.run_script(&[&rt[..], &["-v", &volume]].concat(), &image, home::PROBE));
    say(&format!("docker, -v DIR:/root: {}", seen.summary()));
    assert_none("docker, -v DIR:/root", &seen.volume(), &seen);

    // Without the wrapper: the default runc, the same image and flags.
    for (user, home) in [("0", "/root"), ("1000", "/")] {
        let flags = ["--read-only", "--memory", "1g", "--user", user];
        let seen = Seen::parse(&d.run_script(&flags, &image, home::PROBE));
        say(&format!("docker without the wrapper, --user {user}: {}", seen.summary()));
        assert_none(&format!("docker without the wrapper, --user {user}"), &seen.left_alone(home), &seen);
    }
}

/// Docker `--read-only` through the wrapper in spec mode, its
/// `runtime_path` crun (runc on the host is 1.1.5, which takes the hook),
/// on the common image: root, `/root` holding `.bashrc` and `.profile`, its
/// `HOME` from `/etc/passwd`. The wrapper writes the caches' tmpfs into the
/// spec, with no copy-up (the common image's home holds none of them), and
/// adds no hook: no hook process runs (the hook logs each mount it makes
/// into the same log, `mounted tmpfs on`, and none is there). `/root` stays
/// the image's, read-only, with its dotfiles; the caches are root's.
#[test]
fn docker_root_home_with_dotfiles_runs_no_hook_process() {
    let crun = ["/usr/bin/crun", "/usr/sbin/crun"].into_iter().find(|p| Path::new(p).exists()).expect("crun");
    let d = Dockerd::start_with("spec", Some(Path::new(crun)));
    let image = unique("home-dotfiles");
    let rootfs = home_rootfs();
    std::fs::write(rootfs.rootfs().join("root/.bashrc"), "# the image's bashrc\n").unwrap();
    let tar = d.dir.join("home.tar");
    ok(Command::new("tar").arg("-C").arg(rootfs.rootfs()).arg("-cf").arg(&tar).arg("."));
    ok(d.docker().arg("import").arg(&tar).arg(&image));
    let rt = ["--runtime", "oci-tmpfs", "--read-only", "--memory", "1g"];
    let script = format!("cat /root/.bashrc; {}", home::PROBE);
    let out = d.run_script(&rt, &image, &script);
    let seen = Seen::parse(&out);
    say(&format!("docker, root, crun, dotfiles: {}", seen.summary()));
    assert_none("docker, root, dotfiles", &seen.cached("/root", 0, &home::PROBED_CACHES), &seen);
    assert!(out.contains("# the image's bashrc"), "the image's .bashrc: {out}");
    let log = d.wrapper_log();
    assert!(log.contains("wrote a tmpfs mount for /root/.triton into the spec"), "wrapper log:\n{log}");
    assert!(!log.contains("tmpcopyup"), "no copy-up of the home: {log}");
    assert!(!log.contains("added the hook") && !log.contains("mounted tmpfs on"), "a hook ran:\n{log}");
}

// ---------------------------------------------------------------- Podman

/// Podman `--read-only --memory 1g` with `runtime` and our hooks dir: root's
/// `/root` stays the image's, read-only, with `.profile`, its caches root's;
/// `--user 1000` keeps the `HOME=/` Podman gives it, read-only, with the
/// caches under it writable; a volume at `/root` wins. With an empty hooks
/// dir no cache can be written.
fn podman_home(runtime: Runtime) {
    let podman = Podman::new(runtime);
    let log = podman.dir().join("hook.log");
    podman.host_config(&format!("log_level = \"info\"\nlog_file = {log:?}\n"));
    let rootfs = home_rootfs();
    let what = |case: &str| format!("podman {:?} --runtime {} {case}", podman_version(), runtime.bin());
    let ro = ["--read-only", "--memory=1g"];

    let seen = Seen::parse(&podman.run_script(&ro, &rootfs.rootfs(), home::PROBE));
    say(&format!("{}: {}", what("root"), seen.summary()));
    assert_none(&what("root"), &seen.cached("/root", 0, &home::PROBED_CACHES), &seen);

    let before = read_text(&log).len();
    let seen =
        Seen::parse(&podman.run_script(&[&ro[..], &["--user=1000"]].concat(), &rootfs.rootfs(), home::PROBE));
    say(&format!("{}: {}", what("--user 1000"), seen.summary()));
    // Podman 5 writes HOME=/ into the environment; Podman 4 leaves it to
    // the runtime, which finds the passwd line Podman adds: either way the
    // hook keeps / read-only and mounts the caches under it.
    assert_none(&what("--user 1000"), &seen.root_caches(1000), &seen);
    let text = read_text(&log).split_off(before);
    assert_none(&what("--user 1000"), &home::root_home_caches(&text), &seen);

    let host = home::volume_dir("home-volume");
    let volume = format!("--volume={}:/root", host.0.display());
    let seen = Seen::parse(&podman.run_script(
        &[&ro[..], &[volume.as_str()]].concat(),
        &rootfs.rootfs(),
        home::PROBE,
    ));
    say(&format!("{}: {}", what("--volume DIR:/root"), seen.summary()));
    assert_none(&what("--volume DIR:/root"), &seen.volume(), &seen);

    let bare = Podman::bare(runtime);
    for (user, home) in [("0", "/root"), ("1000", "/")] {
        let flag = format!("--user={user}");
        let seen = Seen::parse(&bare.run_script(
            &[&ro[..], &[flag.as_str()]].concat(),
            &rootfs.rootfs(),
            home::PROBE,
        ));
        let case = format!("without the hook, --user {user}");
        say(&format!("{}: {}", what(&case), seen.summary()));
        assert_none(&what(&case), &seen.left_alone(home), &seen);
    }
}

// Boilerplate: one test per runtime, so that libtest names, filters and
// runs each on its own.
#[test]
fn podman_runc_home_through_the_hooks_dir() {
    podman_home(Runtime::Runc);
}

#[test]
fn podman_crun_home_through_the_hooks_dir() {
    podman_home(Runtime::Crun);
}

// ------------------------------------------------------------ containerd

/// Pods through the wrapper's two handlers: tests/support/home.rs's pod case.
#[test]
fn cri_home_through_the_wrapper() {
    each_way(Node::wrapper("home"), home::pod_home);
}

/// Pods of containerd's default runc handler on the same node: neither
/// root's `HOME` nor uid 1000's, nor any cache under them, can be written.
#[test]
fn cri_home_without_the_wrapper_is_not_writable() {
    let mut node = Node::wrapper("home-without");
    let mut r = Report::new(&node);
    home::pod_home_without_us(&mut node, &mut r);
    r.finish();
}
