//! Kubernetes pods as kubelet starts them on CRI-O: CRI-O 1.36's CRI API
//! driven over its socket by the CRI client (tests/cri/cri.py), with our
//! hook in CRI-O's hooks dir as `setup crio` writes it, or with no hook
//! there and the NRI plugin (`oci-tmpfs-hook nri`) on CRI-O's NRI socket.
//! Each test starts its own CRI-O (tests/support/crio.rs) and runs its pod
//! once per runtime handler, runc and crun; each checks what the container
//! sees (its `/proc/self/mountinfo`, through ExecSync) and at which stage
//! the final `config.json` runs our hook.
//!
//! CRI-O is not packaged for Debian: tests/env/crio.sh builds it (and conmon)
//! from source inside the sid environment, so these tests are `#[ignore]`d
//! and `tests/run.sh` runs them there in a leg of their own (`tests/run.sh
//! crio` alone, `--include-ignored`); in
//! bookworm they show as ignored, never as passed.

use crate::support::cri::*;
use crate::support::crio::CrioNode;
use crate::support::pods::*;
use crate::support::*;
use serde_json::json;
use std::process::Command;

/// The runtime handlers the node's config defines.
const HANDLERS: [&str; 2] = ["runc", "crun"];

/// How our hook gets into a CRI-O node's containers.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Way {
    /// The oci-hooks(5) file `setup crio` writes into CRI-O's hooks dir
    /// (stage `prestart`): every container's `config.json` runs it, at
    /// createRuntime (CRI-O's hooks library puts an oci-hooks `prestart`
    /// there: the same moment, docs/design.md#hooks).
    HooksDir,
    /// The NRI plugin: our hook at createRuntime, only where the plan has work.
    Nri,
}

/// Runs `case` once per handler on a fresh node served `way`, and fails
/// with every failed check of both.
fn each_handler(case: &str, way: Way, run: impl FnMut(&mut CrioNode, &mut Report, &str)) {
    each_handler_configured(case, way, "", run);
}

/// [`each_handler`] on a node with `drop_in` in CRI-O's `crio.conf.d`.
fn each_handler_configured(
    case: &str,
    way: Way,
    drop_in: &str,
    mut run: impl FnMut(&mut CrioNode, &mut Report, &str),
) {
    let mut node = CrioNode::start_configured(case, way == Way::HooksDir, drop_in);
    if way == Way::Nri {
        node.start_plugin();
    }
    let mut r = Report::of("crio", case);
    for handler in HANDLERS {
        run(&mut node, &mut r, handler);
    }
    r.finish();
}

/// Checks the stages at which container `id`'s final `config.json` runs our
/// hook: createRuntime for every container through the hooks dir (the hook
/// decides), and through NRI only for a container we `serve`.
fn check_stages(r: &mut Report, node: &CrioNode, what: &str, id: &str, way: Way, serve: bool) {
    let ours = hook_bin().canonicalize().expect("the hook's binary");
    node.check_hook_stages(r, what, id, &ours, way == Way::HooksDir || serve);
    if way == Way::Nri {
        // What the plugin read from CRI-O's request: the read-only signal.
        let log = node.read("plugin.log");
        let line = log.lines().rev().find(|l| l.contains(": read-only root: ")).unwrap_or("(no line)");
        r.seen(&format!("{what}: CRI-O's request"), line.split("nri: ").nth(1).unwrap_or(line));
    }
}

/// A read-only container with a 1 GiB limit, served `way`.
fn read_only(way: Way) -> impl FnMut(&mut CrioNode, &mut Report, &str) {
    move |node, r, handler| {
        let Some(pod) = r.step("RunPodSandbox", node.run_pod("ro", handler, &PodOpts::default())) else {
            return;
        };
        let Some(c) = r.step("start ro 1Gi", node.start_container(&pod, &CtrOpts::ro("app", GI))) else {
            return;
        };
        let what = format!("{handler}: ro 1Gi");
        if let Some(p) = r.step("probe", node.probe(&c)) {
            r.served(&what, &p, 256 * MI, 512 * MI);
        }
        check_stages(r, node, &what, &c, way, true);
        r.step("stop and remove", node.teardown(&pod, &[&c]));
    }
}

/// A writable-root container with a 1 GiB limit, served `way`.
fn writable(way: Way) -> impl FnMut(&mut CrioNode, &mut Report, &str) {
    move |node, r, handler| {
        let Some(pod) = r.step("RunPodSandbox", node.run_pod("rw", handler, &PodOpts::default())) else {
            return;
        };
        let opts = CtrOpts { readonly: false, ..CtrOpts::ro("rw", GI) };
        let Some(c) = r.step("start rw 1Gi", node.start_container(&pod, &opts)) else { return };
        let what = format!("{handler}: writable root, 1Gi");
        if let Some(p) = r.step("probe", node.probe(&c)) {
            r.untouched(&what, &p, SHM_64M);
        }
        check_stages(r, node, &what, &c, way, false);
        r.step("stop and remove", node.teardown(&pod, &[&c]));
    }
}

/// A read-only container with a 1 GiB limit: `/tmp` our 256 MiB tmpfs and
/// `/dev/shm` (CRI-O's pod shm, 64 MiB) grown to 512 MiB, both writable.
#[test]
#[ignore = "needs CRI-O, built from source in sid: tests/run.sh crio"]
fn read_only_container_gets_sized_tmp_and_shm() {
    each_handler("read-only", Way::HooksDir, read_only(Way::HooksDir));
}

/// A writable-root container: nothing of ours, `/dev/shm` CRI-O's 64 MiB
/// (the hook runs, as for every container, and does nothing).
#[test]
#[ignore = "needs CRI-O, built from source in sid: tests/run.sh crio"]
fn writable_root_container_is_untouched() {
    each_handler("writable", Way::HooksDir, writable(Way::HooksDir));
}

/// A hostPath volume at `/tmp` of a read-only container: the volume wins
/// (no tmpfs of ours there, a file written to `/tmp` lands in the host
/// directory); `/dev/shm` still grows.
#[test]
#[ignore = "needs CRI-O, built from source in sid: tests/run.sh crio"]
fn host_path_volume_at_tmp_wins() {
    each_handler("volume", Way::HooksDir, volume_at_tmp);
}

/// The same under CRI-O's `read_only = true`: the volume wins over CRI-O's
/// own `/tmp` tmpfs and ours.
#[test]
#[ignore = "needs CRI-O, built from source in sid: tests/run.sh crio"]
fn host_path_volume_at_tmp_wins_under_read_only_mode() {
    each_handler_configured("volume-ro", Way::HooksDir, READ_ONLY_MODE, volume_at_tmp);
}

/// CRI-O's server-wide read-only mode, as a `crio.conf.d` file.
const READ_ONLY_MODE: &str = "[crio.runtime]\nread_only = true\n";

/// [`host_path_volume_at_tmp_wins`]'s pod on `handler`.
fn volume_at_tmp(node: &mut CrioNode, r: &mut Report, handler: &str) {
    let volume = node.dir.join(format!("volume-{handler}"));
    std::fs::create_dir_all(&volume).unwrap();
    let Some(pod) = r.step("RunPodSandbox", node.run_pod("vol", handler, &PodOpts::default())) else {
        return;
    };
    let mounts = [vol("/tmp", &volume, "PROPAGATION_PRIVATE")];
    let opts = CtrOpts { mounts: &mounts, ..CtrOpts::ro("app", GI) };
    let Some(c) = r.step("start ro with /tmp volume", node.start_container(&pod, &opts)) else {
        return;
    };
    let what = format!("{handler}: /tmp volume");
    if let Some(p) = r.step("probe", node.probe(&c)) {
        let mounts = parse_mountinfo(&p);
        let ours: Vec<String> = mounts.iter().filter(|m| m.source == OURS).map(mount_line).collect();
        let tmp = mount_at(&mounts, "/tmp");
        let shm = mount_at(&mounts, "/dev/shm").and_then(MountInfo::size);
        r.seen(
            &what,
            format!("/tmp {:?}, /dev/shm {}, mounts of ours {ours:?}", tmp.map(mount_line), sz(shm)),
        );
        r.check(!mounts.is_empty(), format!("{what}: no mount table"));
        r.check(
            tmp.is_some_and(|t| t.source != OURS && t.fstype != "tmpfs"),
            format!("{what}: /tmp is not the volume: {tmp:?}"),
        );
        r.check(ours.is_empty(), format!("{what}: mounts of ours: {ours:?}"));
        r.check(p.contains("TMP-WRITABLE"), format!("{what}: /tmp (the volume) is not writable"));
        r.check(shm == Some(512 * MI), format!("{what}: /dev/shm is {}, want 512Mi", sz(shm)));
        r.check(
            volume.join("probe").is_file(),
            format!("{what}: /tmp/probe did not land in the volume {}", volume.display()),
        );
    }
    check_stages(r, node, &what, &c, Way::HooksDir, true);
    r.step("stop and remove", node.teardown(&pod, &[&c]));
}

/// CRI-O's own `shm-size.crio.io` (allowed for both handlers) beside our
/// plan: CRI-O sizes the pod's `/dev/shm` from the pod's annotation, our
/// hook never shrinks it and grows it to the plan's size: a pod asking
/// 1 GiB keeps 1 GiB, one asking 128 MiB gets our 512 MiB.
#[test]
#[ignore = "needs CRI-O, built from source in sid: tests/run.sh crio"]
fn shm_size_annotation_and_ours_the_larger_wins() {
    each_handler("shm-annotation", Way::HooksDir, |node, r, handler| {
        for (asked, want) in [("1Gi", GI), ("128Mi", 512 * MI)] {
            let ann = [("shm-size.crio.io", asked)];
            let popts = PodOpts { annotations: &ann, ..PodOpts::default() };
            let what = format!("{handler}: shm-size.crio.io {asked}");
            let Some(pod) = r.step(&format!("{what}: RunPodSandbox"), node.run_pod("shm", handler, &popts))
            else {
                continue;
            };
            let Some(c) =
                r.step(&format!("{what}: start"), node.start_container(&pod, &CtrOpts::ro("app", GI)))
            else {
                let _ = node.teardown(&pod, &[]);
                continue;
            };
            if let Some(p) = r.step("probe", node.probe(&c)) {
                let shm = mount_at(&parse_mountinfo(&p), "/dev/shm").and_then(MountInfo::size);
                r.seen(&what, format!("/dev/shm {}", sz(shm)));
                r.check(
                    shm == Some(want),
                    format!("{what}: /dev/shm is {}, want {}", sz(shm), sz(Some(want))),
                );
            }
            r.step("stop and remove", node.teardown(&pod, &[&c]));
        }
    });
}

/// CRI-O's server-wide `read_only = true`: every container's root is
/// read-only and CRI-O mounts its own tmpfs at `/tmp`, `/var/tmp` and `/run`
/// (`noexec`, no size). Measured, with our hook in the hooks dir, for a pod
/// that asks for a read-only root and one that does not: where `/tmp` comes
/// from, its options and size, whether a file there can be run, and what
/// `/dev/shm` is. Our plan leaves an engine's tmpfs at a target alone (a
/// spec mount there: docs/design.md#landing), so `/tmp` stays CRI-O's,
/// unsized and `noexec`; the pod's `/dev/shm` is still grown.
#[test]
#[ignore = "needs CRI-O, built from source in sid: tests/run.sh crio"]
fn read_only_server_mode_keeps_crios_tmp() {
    let mut node = CrioNode::start_configured("read-only-server", true, READ_ONLY_MODE);
    let mut r = Report::of("crio", "read-only-server");
    for handler in HANDLERS {
        for readonly in [true, false] {
            let what = format!("{handler}: read_only = true, readOnlyRootFilesystem {readonly}");
            let Some(pod) =
                r.step(&format!("{what}: RunPodSandbox"), node.run_pod("ros", handler, &PodOpts::default()))
            else {
                continue;
            };
            let opts = CtrOpts { readonly, ..CtrOpts::ro("app", GI) };
            let Some(c) = r.step(&format!("{what}: start"), node.start_container(&pod, &opts)) else {
                let _ = node.teardown(&pod, &[]);
                continue;
            };
            if let Some(p) = r.step("probe", node.probe(&c)) {
                let mounts = parse_mountinfo(&p);
                let tmp = mount_at(&mounts, "/tmp");
                let shm = mount_at(&mounts, "/dev/shm").and_then(MountInfo::size);
                let run = node.exec(&c, &["sh", "-c", "cp /bin/busybox /tmp/bb && /tmp/bb true && echo RAN"]);
                let ran = matches!(&run, Ok((0, out, _)) if out.contains("RAN"));
                r.seen(
                    &what,
                    format!(
                        "/tmp {:?} size {} (unsized: half of RAM), a file in /tmp runs: {ran} ({run:?}), /dev/shm {}",
                        tmp.map(mount_line),
                        sz(tmp.and_then(MountInfo::size)),
                        sz(shm)
                    ),
                );
                r.check(
                    tmp.is_some_and(|t| t.fstype == "tmpfs" && t.source != OURS),
                    format!("{what}: /tmp is not CRI-O's tmpfs: {tmp:?}"),
                );
                r.check(
                    tmp.is_some_and(|t| t.mount_options.iter().any(|o| o == "noexec")) && !ran,
                    format!("{what}: CRI-O's /tmp is not noexec: {tmp:?}, ran: {ran}"),
                );
                r.check(shm == Some(512 * MI), format!("{what}: /dev/shm is {}, want 512Mi", sz(shm)));
            }
            r.step("stop and remove", node.teardown(&pod, &[&c]));
        }
    }
    r.finish();
}

/// NRI fails open on CRI-O: with NRI on and no plugin registered (the
/// plugin down), a read-only pod starts without our mounts: no tmpfs of
/// ours, `/dev/shm` CRI-O's 64 MiB.
#[test]
#[ignore = "needs CRI-O, built from source in sid: tests/run.sh crio"]
fn nri_plugin_down_pods_start_without_our_mounts() {
    let mut node = CrioNode::start_with("nri-down", false);
    let mut r = Report::of("crio", "nri-down");
    for handler in HANDLERS {
        let what = format!("{handler}: ro 1Gi, no plugin");
        let Some(pod) =
            r.step(&format!("{what}: RunPodSandbox"), node.run_pod("down", handler, &PodOpts::default()))
        else {
            continue;
        };
        let Some(c) = r.step(&format!("{what}: start"), node.start_container(&pod, &CtrOpts::ro("app", GI)))
        else {
            let _ = node.teardown(&pod, &[]);
            continue;
        };
        if let Some(p) = r.step("probe", node.probe(&c)) {
            r.untouched(&what, &p, SHM_64M);
        }
        r.step("stop and remove", node.teardown(&pod, &[&c]));
    }
    r.finish();
}

/// CRI-O's NRI default validator with `nri_validator_reject_oci_hook_adjustment`
/// refuses what our plugin adjusts (an OCI hook): a read-only pod's
/// container is not created, and the error names the validator; a
/// writable-root pod, which the plugin adjusts nothing for, starts. On such
/// a node the plugin cannot serve: the hooks dir can (docs/engines.md#cri-o).
#[test]
#[ignore = "needs CRI-O, built from source in sid: tests/run.sh crio"]
fn nri_validator_rejecting_oci_hooks_refuses_our_adjustment() {
    let drop_in = "[crio.nri.default_validator]\nnri_enable_default_validator = true\n\
                   nri_validator_reject_oci_hook_adjustment = true\n";
    let mut node = CrioNode::start_configured("nri-validator", false, drop_in);
    node.start_plugin();
    let mut r = Report::of("crio", "nri-validator");
    for handler in HANDLERS {
        for readonly in [true, false] {
            let what = format!("{handler}: readOnlyRootFilesystem {readonly}, hooks rejected");
            let Some(pod) =
                r.step(&format!("{what}: RunPodSandbox"), node.run_pod("val", handler, &PodOpts::default()))
            else {
                continue;
            };
            let opts = CtrOpts { readonly, ..CtrOpts::ro("app", GI) };
            match (node.start_container(&pod, &opts), readonly) {
                (Err(e), true) => {
                    r.seen(&what, format!("refused: {e}"));
                    r.check(
                        e.to_lowercase().contains("hook"),
                        format!("{what}: the refusal names no hook: {e}"),
                    );
                    r.step("remove", node.teardown(&pod, &[]));
                }
                (Ok(c), true) => {
                    r.check(false, format!("{what}: created, though the validator rejects OCI hooks"));
                    r.step("stop and remove", node.teardown(&pod, &[&c]));
                }
                (Ok(c), false) => {
                    r.seen(&what, "started");
                    r.step("stop and remove", node.teardown(&pod, &[&c]));
                }
                (Err(e), false) => {
                    r.check(false, format!("{what}: not started: {e}"));
                    let _ = node.teardown(&pod, &[]);
                }
            }
        }
    }
    r.finish();
}

/// Through the NRI plugin on CRI-O's NRI socket, no hook in the hooks dir:
/// a read-only container gets `/tmp` and the grown `/dev/shm` from the hook
/// the plugin adds at createRuntime.
#[test]
#[ignore = "needs CRI-O, built from source in sid: tests/run.sh crio"]
fn nri_read_only_container_gets_sized_tmp_and_shm() {
    each_handler("nri-read-only", Way::Nri, read_only(Way::Nri));
}

/// Through the NRI plugin: a writable-root container gets no hook at all.
#[test]
#[ignore = "needs CRI-O, built from source in sid: tests/run.sh crio"]
fn nri_writable_root_container_is_untouched() {
    each_handler("nri-writable", Way::Nri, writable(Way::Nri));
}

/// PyTorch (sid's python3-torch 2.x, with g++ for Inductor) in a read-only
/// pod on a CRI-O node with `read_only = true`, with our hook in the hooks
/// dir and without: CRI-O's own `/tmp` (noexec, unsized) is the temp dir
/// either way, since our plan leaves an engine's mount at a target alone.
/// Measured on runc, each script the container's command:
/// - `torch.compile` (Inductor, CPU) builds its kernels under
///   `/tmp/torchinductor_root` and cannot load them ("failed to map segment
///   from shared object"), with the hook and without;
/// - with `TORCHINDUCTOR_CACHE_DIR` in `~/.cache/torch`, the HOME cache our
///   hook mounts, it passes; without the hook that directory is the
///   read-only image and it fails;
/// - `share_memory` (torch_shm_manager's socket in `/tmp`, the tensor in
///   `/dev/shm`) passes either way: CRI-O's `/tmp` is writable.
#[test]
#[ignore = "needs CRI-O, built from source in sid: tests/run.sh crio"]
fn read_only_server_mode_pytorch() {
    const NOEXEC: &str = "failed to map segment from shared object";
    const CACHE: (&str, &str) = ("TORCHINDUCTOR_CACHE_DIR", "/root/.cache/torch/inductor");
    let mut r = Report::of("crio", "read-only-server-pytorch");
    let scripts = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/pytorch");
    let rootfs = torch_image_root();
    for hooked in [false, true] {
        let case = if hooked { "torch-hooked" } else { "torch-bare" };
        let mut node = CrioNode::start_configured(case, hooked, READ_ONLY_MODE);
        let image = format!("localhost/{}:latest", unique("crio-torch"));
        node.import(&rootfs.0, &image, r#"["/usr/bin/python3"]"#);
        let arms: [Arm; 3] = [
            ("compile", &[], &[], Err(NOEXEC)),
            (
                "compile",
                &[CACHE],
                &["/root/.cache/torch"],
                if hooked { Ok(()) } else { Err("Read-only file system") },
            ),
            ("share_memory", &[], &[], Ok(())),
        ];
        for (script, env, args, want) in arms {
            let what = format!("{case}: {script} {env:?}");
            let out = run_torch(&mut node, &mut r, &image, &scripts, script, env, args);
            let Some(out) = out else { continue };
            let line = out.lines().find(|l| l.starts_with("PASS ") || l.starts_with("FAIL ")).unwrap_or("");
            r.seen(&what, line);
            match want {
                Ok(()) => {
                    r.check(line == format!("PASS {script}"), format!("{what}: want PASS, got:\n{out}"))
                }
                Err(e) => r.check(
                    line.starts_with(&format!("FAIL {script}")) && out.contains(e),
                    format!("{what}: want FAIL with {e:?}, got:\n{out}"),
                ),
            }
        }
    }
    r.finish();
}

/// One PyTorch run: the script, its environment and arguments, and its
/// outcome (`Err`: a FAIL line with this in the output).
type Arm = (
    &'static str,
    &'static [(&'static str, &'static str)],
    &'static [&'static str],
    Result<(), &'static str>,
);

/// An image root for PyTorch from the sid root (CRI-O's host here): `/usr`
/// comes in as a read-only volume, the image has its merged-usr links,
/// `/etc/passwd` (root's HOME `/root`, empty), `/etc/group`, the loader's
/// cache and `/etc/alternatives`.
fn torch_image_root() -> TempDir {
    let root = TempDir::new("crio-torch-root");
    for d in ["usr", "etc", "root", "work", "tmp", "var/tmp", "run", "dev", "proc", "sys"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    for (link, to) in [("bin", "usr/bin"), ("lib", "usr/lib"), ("lib64", "usr/lib64"), ("sbin", "usr/sbin")] {
        std::os::unix::fs::symlink(to, root.join(link)).unwrap();
    }
    std::fs::write(root.join("etc/passwd"), "root:x:0:0:root:/root:/bin/sh\n").unwrap();
    std::fs::write(root.join("etc/group"), "root:x:0:\n").unwrap();
    std::fs::copy("/etc/ld.so.cache", root.join("etc/ld.so.cache")).expect("/etc/ld.so.cache");
    // libblas.so.3 and friends are links through /etc/alternatives.
    ok(Command::new("cp").args(["-a", "/etc/alternatives"]).arg(root.join("etc")));
    root
}

/// Runs `tests/pytorch/SCRIPT.py ARGS` as the command of a read-only
/// container (4 GiB) in a pod of its own; its output, once it has exited
/// (within 300 s), or `None` with the failed step in the report.
fn run_torch(
    node: &mut CrioNode,
    r: &mut Report,
    image: &str,
    scripts: &std::path::Path,
    script: &str,
    env: &[(&str, &str)],
    args: &[&str],
) -> Option<String> {
    let mut env = env.to_vec();
    env.push(("PATH", "/usr/bin:/bin"));
    let pod =
        r.step(&format!("{script}: RunPodSandbox"), node.run_pod("torch", "runc", &PodOpts::default()))?;
    let mounts = [
        json!({"container_path": "/usr", "host_path": "/usr", "readonly": true}),
        json!({"container_path": "/work", "host_path": scripts, "readonly": true}),
    ];
    let opts = CtrOpts { env: &env, image: Some(image), mounts: &mounts, ..CtrOpts::ro("torch", 4 * GI) };
    let mut config = container_request(image, &pod, &opts)["config"].clone();
    let mut command = vec![json!("python3"), json!(format!("/work/{script}.py"))];
    command.extend(args.iter().map(|a| json!(a)));
    config["command"] = json!(command);
    let log = node.log_path(&pod, &config);
    let Some(id) = r.step(&format!("{script}: start"), node.start_config(&pod, config)) else {
        let _ = node.teardown(&pod, &[]);
        return None;
    };
    let t0 = std::time::Instant::now();
    let exited = node.wait_exited(&id, std::time::Duration::from_secs(300));
    // CRI's log format: "TIME STREAM TAG text" per line.
    let out: String =
        r.read(&log).lines().map(|l| l.splitn(4, ' ').nth(3).unwrap_or(l)).collect::<Vec<_>>().join("\n");
    say(&format!("crio {script} ({:.0?}, {exited:?}):\n{}", t0.elapsed(), tail(&out, 20)));
    r.step(&format!("{script}: exit"), exited);
    r.step(&format!("{script}: stop and remove"), node.teardown(&pod, &[&id]));
    Some(out)
}
