//! The hook against real runc and crun containers with a read-only root:
//! what the container sees in `/proc/self/mountinfo`, checked against what
//! `explain` planned for the same bundle.

use std::time::Duration;

use crate::support::*;
use serde_json::{json, Value};

/// Prints the mount table, the mode of /tmp, and whether writes work.
const CHECKS: &str = "cat /proc/self/mountinfo; echo MODE $(stat -c %a /tmp); \
    touch /tmp/probe && echo TMP_WRITE_OK; \
    if [ -d /var/tmp ]; then touch /var/tmp/probe && echo VAR_TMP_WRITE_OK; fi; \
    dd if=/dev/zero of=/dev/shm/blob bs=1M count=80 2>/dev/null && echo SHM_80M_OK; true";

/// Planned sizes from `explain --json`: (target, bytes) of tmpfs mounts, shm bytes.
fn planned(explain: &Value) -> (Vec<(String, u64)>, Option<u64>) {
    let mut tmpfs = Vec::new();
    let mut shm = None;
    for a in explain["plan"]["actions"].as_array().unwrap() {
        match a["action"].as_str().unwrap() {
            "mount_tmpfs" => {
                tmpfs.push((a["target"].as_str().unwrap().to_string(), a["size"]["bytes"].as_u64().unwrap()))
            }
            "shm" => shm = a["size"]["bytes"].as_u64(),
            other => panic!("unknown action {other}"),
        }
    }
    (tmpfs, shm)
}

/// A tmpfs from the hook: rw, nosuid, nodev, mode 1777, exactly `size` bytes.
fn assert_hook_tmpfs(mounts: &[MountInfo], point: &str, size: u64) {
    let m = mount_at(mounts, point).unwrap_or_else(|| panic!("{point} is not a mount: {mounts:#?}"));
    assert_eq!(m.fstype, "tmpfs", "{point}");
    assert_eq!(m.source, "oci-tmpfs-hook", "{point}");
    assert!(m.has("rw") && m.has("nosuid") && m.has("nodev"), "{point}: {:?}", m.mount_options);
    assert!(!m.has("noexec"), "{point}: exec is allowed by default");
    // The kernel omits mode=1777 from the options: it is tmpfs' default.
    assert!(!m.super_options.iter().any(|o| o.starts_with("mode=")), "{point}: {:?}", m.super_options);
    assert_eq!(m.size(), Some(size), "{point}: {:?}", m.super_options);
}

fn read_only_case(runtime: Runtime, stage: &str) {
    require_root();
    let mut b = Bundle::new(&format!("ro-{}-{stage}", runtime.bin()));
    // The image has no /var/tmp; the container names it in TMPDIR.
    b.script(CHECKS).env("TMPDIR=/var/tmp").inject(stage);
    let (tmpfs, shm) = planned(&b.explain());
    assert_eq!(tmpfs.iter().map(|t| t.0.as_str()).collect::<Vec<_>>(), ["/tmp", "/var/tmp"]);
    let run = b.run(runtime);
    run.assert_ok();
    let mounts = run.mounts();
    for (target, size) in &tmpfs {
        assert_hook_tmpfs(&mounts, target, *size);
    }
    let out = run.stdout();
    assert!(out.contains("MODE 1777"), "{out}");
    assert!(out.contains("TMP_WRITE_OK") && out.contains("VAR_TMP_WRITE_OK"), "{out}");
    assert!(out.contains("SHM_80M_OK"), "80 MiB fit in the grown /dev/shm: {out}");
    let shm_mount = mount_at(&mounts, "/dev/shm").expect("/dev/shm");
    assert_eq!(shm_mount.size(), shm, "/dev/shm grown to the planned size");
    assert!(shm_mount.has("noexec") && shm_mount.has("nosuid"), "the spec's flags are kept");
    // The root stays read-only: the hook did not make the image writable.
    let root = mount_at(&mounts, "/").unwrap();
    assert!(root.has("ro"), "{root:?}");
    // Nothing was left in the bundle's rootfs on the host but the new mountpoint dir.
    assert!(b.rootfs().join("var/tmp").is_dir());
    assert!(!b.rootfs().join("tmp/probe").exists(), "writes went to the tmpfs, not the image");
}

/// `inject --mode spec --runtime RUNTIME` on `b` (written already), which is
/// read back; what it printed.
fn inject_spec(b: &mut Bundle, runtime: Runtime) -> String {
    let out = std::process::Command::new(hook_bin())
        .args(["inject", "--mode", "spec", "--runtime"])
        .arg(which(runtime.bin()))
        .arg("--bundle")
        .arg(&b.dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    b.config = serde_json::from_slice(&std::fs::read(b.dir.join("config.json")).unwrap()).unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `inject --mode spec`: the same plan carried out by the runtime from the
/// spec, with no hook in `config.json`; with a second temp target
/// (`TMPDIR=/var/tmp`) too: two tmpfs of ours in the image's own tree, ours
/// first in the mounts (docs/design.md#spec-race).
fn spec_mode_case(runtime: Runtime, tmpdir: bool) {
    require_root();
    let mut b = Bundle::new(&format!("spec-{}", runtime.bin()));
    b.script(CHECKS);
    if tmpdir {
        b.env("TMPDIR=/var/tmp");
    }
    b.write();
    let (tmpfs, shm) = planned(&b.explain());
    let printed = inject_spec(&mut b, runtime);
    if runc_before_1_1_8(runtime) {
        // docs/design.md#runtimes: this runc chmods a tmpfs mountpoint by
        // path after mounting it, so the temp targets go to the hook.
        assert!(printed.contains("the hook carries the temp targets: runc 1.1."), "{printed}");
        assert!(b.config["hooks"]["prestart"][0]["path"].is_string(), "our hook: {}", b.config["hooks"]);
    } else {
        assert!(printed.contains("wrote a tmpfs mount for /tmp into the spec"), "{printed}");
        assert_eq!(printed.contains("wrote a tmpfs mount for /var/tmp into the spec"), tmpdir, "{printed}");
        assert_eq!(b.config["hooks"], Value::Null, "spec mode adds no hook");
    }
    let run = b.run(runtime);
    run.assert_ok();
    let mounts = run.mounts();
    for (target, size) in &tmpfs {
        assert_hook_tmpfs(&mounts, target, *size);
    }
    let out = run.stdout();
    assert!(out.contains("MODE 1777") && out.contains("TMP_WRITE_OK"), "{out}");
    assert_eq!(out.contains("VAR_TMP_WRITE_OK"), tmpdir, "{out}");
    assert!(out.contains("SHM_80M_OK"), "{out}");
    assert_eq!(mount_at(&mounts, "/dev/shm").expect("/dev/shm").size(), shm);
    // A second inject finds the mounts in the spec and writes nothing.
    let again = std::process::Command::new(hook_bin())
        .args(["inject", "--mode", "spec", "--bundle"])
        .arg(&b.dir)
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&again.stdout).contains("nothing to write"));
}

#[test]
fn runc_spec_mode() {
    spec_mode_case(Runtime::Runc, false);
    spec_mode_case(Runtime::Runc, true);
}

#[test]
fn crun_spec_mode() {
    spec_mode_case(Runtime::Crun, false);
    spec_mode_case(Runtime::Crun, true);
}

// Boilerplate: one test per runtime and stage, so that libtest names,
// filters and runs each on its own; the case is `read_only_case`.
#[test]
fn runc_prestart() {
    read_only_case(Runtime::Runc, "prestart");
}

#[test]
fn runc_create_runtime() {
    read_only_case(Runtime::Runc, "createRuntime");
}

#[test]
fn runc_create_container() {
    read_only_case(Runtime::Runc, "createContainer");
}

#[test]
fn crun_prestart() {
    read_only_case(Runtime::Crun, "prestart");
}

#[test]
fn crun_create_runtime() {
    read_only_case(Runtime::Crun, "createRuntime");
}

#[test]
fn crun_create_container() {
    read_only_case(Runtime::Crun, "createContainer");
}

#[test]
fn writable_root_gets_nothing() {
    require_root();
    for runtime in Runtime::ALL {
        let mut plain = Bundle::new("rw-plain");
        plain.readonly(false).script(SHOW_MOUNTS).write();
        let mut hooked = Bundle::new("rw-hooked");
        hooked.readonly(false).script(SHOW_MOUNTS).env("TMPDIR=/var/tmp").inject("prestart");
        assert_eq!(hooked.explain()["plan"]["enabled"], json!(false));
        let shape = |r: &Run| -> Vec<(String, String, Option<u64>)> {
            r.mounts().into_iter().map(|m| (m.mount_point.clone(), m.fstype.clone(), m.size())).collect()
        };
        let a = plain.run(runtime);
        let b = hooked.run(runtime);
        a.assert_ok();
        b.assert_ok();
        assert_eq!(shape(&a), shape(&b), "{}: the hook added or changed mounts", runtime.bin());
        assert!(b.stderr().is_empty(), "quiet when there is nothing to do: {}", b.stderr());
        assert!(!hooked.rootfs().join("var/tmp").exists());
    }
}

#[test]
fn annotations_set_the_sizes() {
    require_root();
    for runtime in Runtime::ALL {
        let mut b = Bundle::new("annotations");
        b.script(SHOW_MOUNTS)
            .annotate("oci-tmpfs-hook/tmp-size", "96Mi")
            .annotate("oci-tmpfs-hook/shm-size", "200m")
            .inject("prestart");
        let run = b.run(runtime);
        run.assert_ok();
        let mounts = run.mounts();
        assert_hook_tmpfs(&mounts, "/tmp", 96 * MI);
        assert_eq!(mount_at(&mounts, "/dev/shm").unwrap().size(), Some(200 * MI));
    }
}

#[test]
fn annotation_forces_writable_root_on_and_read_only_off() {
    require_root();
    let mut on = Bundle::new("force-on");
    on.readonly(false).script(SHOW_MOUNTS).annotate("oci-tmpfs-hook/enabled", "true").inject("prestart");
    let run = on.run(Runtime::Runc);
    run.assert_ok();
    assert_eq!(mount_at(&run.mounts(), "/tmp").map(|m| m.source.as_str()), Some("oci-tmpfs-hook"));

    let mut off = Bundle::new("force-off");
    off.script(SHOW_MOUNTS).annotate("oci-tmpfs-hook/enabled", "false").inject("prestart");
    let run = off.run(Runtime::Runc);
    run.assert_ok();
    assert!(mount_at(&run.mounts(), "/tmp").is_none());
    assert_eq!(mount_at(&run.mounts(), "/dev/shm").unwrap().size(), Some(64 * MI));
}

#[test]
fn a_larger_shm_in_the_spec_is_kept() {
    require_root();
    let mut b = Bundle::new("big-shm");
    b.script(SHOW_MOUNTS)
        .shm_options(&["nosuid", "noexec", "nodev", "mode=1777", "size=256m"])
        .annotate("oci-tmpfs-hook/shm-size", "128Mi")
        .inject("prestart");
    let run = b.run(Runtime::Crun);
    run.assert_ok();
    assert_eq!(mount_at(&run.mounts(), "/dev/shm").unwrap().size(), Some(256 * MI));
    assert_hook_tmpfs(&run.mounts(), "/tmp", planned(&b.explain()).0[0].1);
}

#[test]
fn memory_limit_is_the_basis_of_percent_sizes() {
    require_root();
    let mut b = Bundle::new("memlimit");
    b.script(SHOW_MOUNTS);
    b.config["linux"]["resources"]["memory"] = json!({"limit": GI});
    b.inject("prestart");
    let (tmpfs, shm) = planned(&b.explain());
    assert_eq!(tmpfs[0].1, GI / 4);
    assert_eq!(shm, Some(GI / 2));
    let run = b.run(Runtime::Runc);
    run.assert_ok();
    assert_hook_tmpfs(&run.mounts(), "/tmp", GI / 4);
    assert_eq!(mount_at(&run.mounts(), "/dev/shm").unwrap().size(), Some(GI / 2));
}

#[test]
fn host_config_sizes_extra_targets_and_noexec() {
    require_root();
    let mut b = Bundle::new("hostcfg");
    let cfg = b.dir.join("host.toml");
    std::fs::write(
        &cfg,
        "tmp_size = \"48Mi\"\nshm_size = \"300Mi\"\nextra_targets = [\"/run\", \"/scratch/a\"]\nnoexec = true\nnr_inodes = 4096\n",
    )
    .unwrap();
    b.script(SHOW_MOUNTS).inject_with_config("createRuntime", &cfg);
    let run = b.run(Runtime::Crun);
    run.assert_ok();
    let mounts = run.mounts();
    for point in ["/tmp", "/run", "/scratch/a"] {
        let m = mount_at(&mounts, point).unwrap_or_else(|| panic!("{point} missing"));
        assert_eq!(m.size(), Some(48 * MI), "{point}");
        assert!(m.has("noexec"), "{point}");
        assert!(m.super_options.iter().any(|o| o == "nr_inodes=4096"), "{point}: {:?}", m.super_options);
    }
    assert_eq!(mount_at(&mounts, "/dev/shm").unwrap().size(), Some(300 * MI));
}

#[test]
fn a_spec_tmpfs_on_tmp_is_left_alone() {
    require_root();
    let mut b = Bundle::new("spec-tmp");
    b.script(SHOW_MOUNTS);
    b.config["mounts"].as_array_mut().unwrap().push(json!({
        "destination": "/tmp", "type": "tmpfs", "source": "tmpfs", "options": ["nosuid", "size=10m"]
    }));
    b.inject("prestart");
    let run = b.run(Runtime::Runc);
    run.assert_ok();
    let mounts = run.mounts();
    let tmp = mount_at(&mounts, "/tmp").unwrap();
    assert_eq!((tmp.source.as_str(), tmp.size()), ("tmpfs", Some(10 * MI)));
    assert_eq!(mounts.iter().filter(|m| m.mount_point == "/tmp").count(), 1);
}

#[test]
fn bad_annotation_fails_the_start_with_one_clear_line() {
    require_root();
    let mut b = Bundle::new("bad-size");
    b.script(SHOW_MOUNTS).annotate("oci-tmpfs-hook/tmp-size", "1G,mode=4777").inject("prestart");
    let run = b.run(Runtime::Runc);
    assert!(!run.output.status.success(), "the start must fail");
    let err = run.stderr();
    assert!(err.contains("oci-tmpfs-hook: container") && err.contains("oci-tmpfs-hook/tmp-size"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn on_error_warn_starts_the_container_without_mounts() {
    require_root();
    let mut b = Bundle::new("warn");
    let cfg = b.dir.join("host.toml");
    std::fs::write(&cfg, "on_error = \"warn\"\n").unwrap();
    b.script(SHOW_MOUNTS).annotate("oci-tmpfs-hook/shm-size", "0").inject_with_config("prestart", &cfg);
    let run = b.run(Runtime::Runc);
    run.assert_ok();
    assert!(mount_at(&run.mounts(), "/tmp").is_none(), "no half-applied plan");
    assert_eq!(mount_at(&run.mounts(), "/dev/shm").unwrap().size(), Some(64 * MI));
}

#[test]
fn start_container_stage_is_refused_clearly() {
    require_root();
    let b = Bundle::new("start-stage");
    let state =
        json!({"ociVersion": "1.0.2", "id": "late", "status": "created", "pid": 4242, "bundle": b.dir});
    let out = run_hook(
        &["hook", "--stage", "startContainer"],
        state.to_string().as_bytes(),
        Duration::from_secs(10),
    );
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("oci-tmpfs-hook: container late: "), "{err}");
    assert!(err.contains("register it at prestart, createRuntime or createContainer"), "{err}");
}

#[test]
fn two_registrations_mount_once() {
    require_root();
    for runtime in Runtime::ALL {
        let mut b = Bundle::new("twice");
        b.script(SHOW_MOUNTS).inject("prestart").inject("createContainer");
        let run = b.run(runtime);
        run.assert_ok();
        let mounts = run.mounts();
        assert_eq!(mounts.iter().filter(|m| m.mount_point == "/tmp").count(), 1, "{}", runtime.bin());
    }
}

/// The trap of docs/design.md#hooks (`state.pid`): a createContainer hook that is not really inside
/// the container must not mount into the bundle's rootfs from the host.
#[test]
fn create_container_outside_a_container_is_refused() {
    require_root();
    let b = Bundle::new("cc-outside");
    let before = host_mounts();
    for pid in [0, 1] {
        let state = json!({"ociVersion": "1.0.2", "id": "outside", "status": "creating", "pid": pid, "bundle": b.dir});
        for args in [&["hook", "--stage", "createContainer"][..], &["hook"][..]] {
            let out = run_hook(args, state.to_string().as_bytes(), Duration::from_secs(10));
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(1), "{args:?} pid {pid}: {err}");
            assert_eq!(err.lines().count(), 1, "{err}");
        }
    }
    assert_eq!(host_mounts(), before, "nothing mounted on the host");
    let rootfs = b.rootfs().display().to_string();
    let table = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(!table.contains(&rootfs), "a mount landed in the bundle's rootfs on the host:\n{table}");
}

/// TMPDIR inside /tmp: one tmpfs on /tmp with the directory made in it.
#[test]
fn nested_tmpdir_is_created_inside_the_tmp_tmpfs() {
    require_root();
    for runtime in Runtime::ALL {
        let mut b = Bundle::new("nested");
        b.script("cat /proc/self/mountinfo; echo MODE $(stat -c %a /tmp/job/work); touch /tmp/job/work/f && echo NESTED_OK")
            .env("TMPDIR=/tmp/job/work")
            .inject("prestart");
        let run = b.run(runtime);
        run.assert_ok();
        assert_eq!(run.mounts().iter().filter(|m| m.mount_point.starts_with("/tmp")).count(), 1);
        assert!(run.stdout().contains("MODE 1777") && run.stdout().contains("NESTED_OK"), "{}", run.stdout());
        assert!(!b.rootfs().join("tmp/job").exists(), "created in the tmpfs, not in the image");
    }
}

/// SELinux: a spec with `linux.mountLabel` (what Podman and CRI-O write on
/// an enforcing host). Every tmpfs of the plan carries it (`explain`); the
/// hook passes it as `context=`, which this kernel, without SELinux,
/// refuses with EINVAL, so the hook mounts unlabelled and says so in its
/// debug log (docs/design.md#selinux); in spec mode the runtime adds it to
/// the entries itself. Either way the container starts and writes /tmp.
fn mount_label_case(runtime: Runtime, hooked: bool) {
    require_root();
    const LABEL: &str = "system_u:object_r:container_file_t:s0:c4,c5";
    let selinux = std::path::Path::new("/sys/fs/selinux/enforce").exists();
    let name = format!("label-{}-{}", runtime.bin(), if hooked { "hook" } else { "spec" });
    let mut b = Bundle::new(&name);
    b.script(CHECKS);
    b.config["linux"]["mountLabel"] = json!(LABEL);
    b.write();
    let explained = b.explain();
    let actions = explained["plan"]["actions"].as_array().unwrap();
    assert_eq!(actions.len(), 2, "{explained}");
    for a in actions {
        assert_eq!(a["label"], LABEL, "{a}");
    }
    let log = b.dir.join("hook.log");
    if hooked {
        let config = b.dir.join("host.toml");
        std::fs::write(&config, format!("log_level = \"debug\"\nlog_file = {log:?}\n")).unwrap();
        b.inject_with_config("prestart", &config);
    } else {
        inject_spec(&mut b, runtime);
        assert_eq!(b.config["linux"]["mountLabel"], LABEL, "the label is kept");
        for m in b.config["mounts"].as_array().unwrap() {
            // A mount without options has no context= either.
            let labelled = m["options"]
                .as_array()
                .is_some_and(|opts| opts.iter().any(|o| o.as_str().unwrap().starts_with("context=")));
            assert!(!labelled, "{m}");
        }
    }
    let run = b.run(runtime);
    run.assert_ok();
    let out = run.stdout();
    assert!(out.contains("TMP_WRITE_OK") && out.contains("SHM_80M_OK"), "{out}");
    let (tmpfs, _) = planned(&explained);
    assert_hook_tmpfs(&run.mounts(), "/tmp", tmpfs[0].1);
    if hooked {
        let text = read_text(&log);
        assert_eq!(
            text.contains("refuses context="),
            !selinux,
            "selinux {selinux}: the hook's log says whether the label was dropped:\n{text}"
        );
    }
}

#[test]
fn mount_label_crun_hook() {
    mount_label_case(Runtime::Crun, true);
}

#[test]
fn mount_label_crun_spec_mode() {
    mount_label_case(Runtime::Crun, false);
}

/// runc (1.1.5 and 1.3.6, measured) adds `context="LABEL"` to every tmpfs it
/// mounts, `/dev` first, and a kernel without SELinux refuses that with
/// EINVAL: with no hook at all, no runc container with a `mountLabel`
/// starts here. On an SELinux host the full case runs.
#[test]
fn mount_label_runc() {
    require_root();
    if std::path::Path::new("/sys/fs/selinux/enforce").exists() {
        mount_label_case(Runtime::Runc, true);
        mount_label_case(Runtime::Runc, false);
        return;
    }
    let mut b = Bundle::new("label-runc-plain");
    b.script("true");
    b.config["linux"]["mountLabel"] = json!("system_u:object_r:container_file_t:s0:c4,c5");
    b.write();
    let run = b.run_timeout(Runtime::Runc, Duration::from_secs(30));
    let err = run.stderr();
    assert!(!run.output.status.success(), "runc started a labelled container without SELinux: {err}");
    assert!(err.contains("context=") && err.contains("invalid argument"), "{err}");
}

/// Prints the mount table, then for each of `dirs` its mode and whether a
/// write there worked.
fn dir_checks(dirs: &[&str]) -> String {
    format!(
        "cat /proc/self/mountinfo; for d in {}; do echo MODE $d $(stat -c %a $d); \
         touch $d/probe-$(id -u) && echo WRITE_OK $d; done; true",
        dirs.join(" ")
    )
}

/// A read-only bundle run as `uid` whose env names cache dirs the image
/// does not have: Triton's and the XDG cache (`/root` is absent too).
fn cache_bundle(name: &str, uid: u32) -> Bundle {
    let mut b = Bundle::new(name);
    // HOME=/tmp: uid 1000 has no passwd entry, and its HOME is not what
    // these cases are about (tests/runtimes/home.rs).
    b.script(&dir_checks(&["/tmp", "/cache/triton", "/root/.cache"]))
        .env("TRITON_CACHE_DIR=/cache/triton")
        .env("XDG_CACHE_HOME=/root/.cache")
        .env("HOME=/tmp");
    b.config["process"]["user"] = json!({"uid": uid, "gid": uid});
    b
}

/// Every planned tmpfs is ours, mode 1777 and written by the container's
/// user; nothing reached the image.
fn assert_writable_tmpfs(b: &Bundle, run: &Run, tmpfs: &[(String, u64)], case: &str) {
    run.assert_ok();
    let mounts = run.mounts();
    for (target, size) in tmpfs {
        assert_hook_tmpfs(&mounts, target, *size);
    }
    let out = run.stdout();
    for (target, _) in tmpfs {
        assert!(out.contains(&format!("MODE {target} 1777")), "{case}: {out}");
        assert!(out.contains(&format!("WRITE_OK {target}\n")), "{case}: {out}");
        assert!(b.rootfs().join(&target[1..]).is_dir(), "{case}: the mountpoint {target} was made");
    }
    let leaked: Vec<_> = walk_names(&b.rootfs()).into_iter().filter(|p| p.contains("probe-")).collect();
    assert!(leaked.is_empty(), "{case}: writes went to the image: {leaked:?}");
}

/// The names of every file under `dir` (not following symlinks).
fn walk_names(dir: &std::path::Path) -> Vec<String> {
    walk(dir, false).iter().map(|e| e.path.display().to_string()).collect()
}

/// The hook: `TRITON_CACHE_DIR` and `XDG_CACHE_HOME` (default
/// `env_targets`) each get a tmpfs sized like `/tmp`, writable as root and
/// as uid 1000.
#[test]
fn cache_dirs_in_the_env_get_a_tmpfs_from_the_hook() {
    require_root();
    for runtime in Runtime::ALL {
        for uid in [0, 1000] {
            let case = format!("{} uid {uid}", runtime.bin());
            let mut b = cache_bundle(&format!("cache-hook-{}-{uid}", runtime.bin()), uid);
            b.inject("createRuntime");
            let (tmpfs, _) = planned(&b.explain());
            let targets: Vec<&str> = tmpfs.iter().map(|t| t.0.as_str()).collect();
            assert_eq!(targets, ["/tmp", "/cache/triton", "/root/.cache"], "{case}");
            assert!(tmpfs.iter().all(|t| t.1 == tmpfs[0].1), "{case}: sized like /tmp: {tmpfs:?}");
            assert_writable_tmpfs(&b, &b.run(runtime), &tmpfs, &case);
        }
    }
}

/// The spec executor (`inject --mode spec`, what the wrapper runs): with
/// `/tmp` and two cache dirs, three tmpfs of ours in the image's own tree,
/// and with `/tmp` the spec's own and one cache dir, the spec carries them
/// (but on runc before 1.1.8: docs/design.md#runtimes; ours first in the
/// mounts: docs/design.md#spec-race). Writable as root and as uid 1000 either way.
#[test]
fn cache_dirs_in_the_env_get_a_tmpfs_in_spec_mode() {
    require_root();
    for runtime in Runtime::ALL {
        for uid in [0, 1000] {
            let case = format!("{} uid {uid}, two cache dirs", runtime.bin());
            let mut b = cache_bundle(&format!("cache-spec-{}-{uid}", runtime.bin()), uid);
            b.write();
            let (tmpfs, _) = planned(&b.explain());
            assert_eq!(tmpfs.len(), 3, "{case}: {tmpfs:?}");
            let printed = inject_spec(&mut b, runtime);
            let carrier = if runc_before_1_1_8(runtime) {
                "the hook carries the temp targets: runc 1.1."
            } else {
                "wrote a tmpfs mount for /tmp into the spec"
            };
            assert!(printed.contains(carrier), "{case}: {printed}");
            assert_writable_tmpfs(&b, &b.run(runtime), &tmpfs, &case);

            let case = format!("{} uid {uid}, one cache dir", runtime.bin());
            let mut b = Bundle::new(&format!("cache-spec1-{}-{uid}", runtime.bin()));
            b.script(&dir_checks(&["/cache/triton"])).env("TRITON_CACHE_DIR=/cache/triton").env("HOME=/tmp");
            b.config["process"]["user"] = json!({"uid": uid, "gid": uid});
            b.config["mounts"].as_array_mut().unwrap().push(
                json!({"destination": "/tmp", "type": "tmpfs", "source": "tmpfs", "options": ["nosuid", "nodev", "mode=1777"]}),
            );
            b.write();
            let (tmpfs, _) = planned(&b.explain());
            assert_eq!(tmpfs.iter().map(|t| t.0.as_str()).collect::<Vec<_>>(), ["/cache/triton"], "{case}");
            let printed = inject_spec(&mut b, runtime);
            if runc_before_1_1_8(runtime) {
                assert!(
                    printed.contains("the hook carries the temp targets: runc 1.1."),
                    "{case}: {printed}"
                );
            } else {
                assert!(
                    printed.contains("wrote a tmpfs mount for /cache/triton into the spec"),
                    "{case}: {printed}"
                );
                assert_eq!(b.config["hooks"], Value::Null, "{case}: spec mode adds no hook");
            }
            assert_writable_tmpfs(&b, &b.run(runtime), &tmpfs, &case);
        }
    }
}
