//! What a CRI-O node's admin runs, against a real CRI-O 1.36 on a node that
//! looks like a CRI-O host (tests/support/crio.rs, `CrioOpts::host`): its
//! config at `/etc/crio/crio.conf` with no `hooks_dir`, so CRI-O uses its
//! default `/usr/share/containers/oci/hooks.d`; `/usr/local`, `/var/lib`
//! and `/usr/share/containers` private tmpfs. Each test proves that CRI-O
//! serves a read-only pod with what was installed, without a restart, and
//! that what was taken out again leaves every byte as it was and no pod
//! served:
//! - `install.sh --engines crio`, `setup`'s lines and `doctor`'s;
//! - the node installer (deploy/kubernetes/runtimeclass/daemonset.yaml's
//!   container) from the node image, as a CRI-O container with the node's
//!   root at `/host` (not privileged: see `installer`);
//! - the NRI plugin (deploy/kubernetes/daemonset.yaml's container) from the
//!   node image as a CRI-O container: it registers with CRI-O's NRI, fills
//!   its hook dir, and a read-only pod runs the hook from there.
//!
//! The node image is an empty root with the static binary at
//! `/usr/local/bin/oci-tmpfs-hook` (deploy/Containerfile's content), put
//! into CRI-O's storage with `podman import`; tests/run.sh builds the static
//! binary on the host and names it in `OCI_TMPFS_HOOK_STATIC_BIN`. Run with
//! the CRI-O suite (`tests/run.sh crio`, or `tests/run.sh crio crio_node::`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::{json, Value};

use crate::support::cri::*;
use crate::support::crio::{CrioNode, DEFAULT_HOOKS_DIR};
use crate::support::kube::{snapshot, snapshot_diff};
use crate::support::pods::*;
use crate::support::*;

/// Where install.sh and the node installer put the binary on the host.
const HOOK: &str = "/usr/local/bin/oci-tmpfs-hook";
/// The runtime handler of the installer's and the plugin's pods (the
/// read-only pods run on both: [`read_only_pod`]).
const HANDLER: &str = "runc";

/// The static binary tests/run.sh built for the node image
/// (`OCI_TMPFS_HOOK_STATIC_BIN`); a run without it fails.
fn static_bin() -> PathBuf {
    let bin = std::env::var_os("OCI_TMPFS_HOOK_STATIC_BIN").map(PathBuf::from).expect(
        "OCI_TMPFS_HOOK_STATIC_BIN is not set: the node image's static binary \
         (tests/run.sh crio builds it with packaging/build-static.sh)",
    );
    assert!(bin.is_file(), "OCI_TMPFS_HOOK_STATIC_BIN={}: no such file", bin.display());
    bin
}

/// The node image in `node`'s storage: an empty root with `bin` at
/// `/usr/local/bin/oci-tmpfs-hook`, its entrypoint; the reference.
fn node_image(node: &CrioNode, bin: &Path) -> String {
    let root = node.dir.join("node-image-root");
    std::fs::create_dir_all(root.join("usr/local/bin")).unwrap();
    std::fs::copy(bin, root.join("usr/local/bin/oci-tmpfs-hook")).unwrap();
    let reference = "localhost/oci-tmpfs-hook:latest";
    node.import(&root, reference, r#"["/usr/local/bin/oci-tmpfs-hook"]"#);
    reference.to_string()
}

/// Every file of the host dirs that installing may change, as the node's
/// namespace has them (a dir that is not there: one entry saying so).
fn host_files(node: &CrioNode) -> BTreeMap<PathBuf, String> {
    let mut all = BTreeMap::new();
    for dir in
        ["/usr/local", "/usr/share/containers", "/etc/crio", "/etc/oci-tmpfs-hook", "/var/lib/oci-tmpfs-hook"]
    {
        let at = node.ns_path(dir);
        if !at.exists() {
            all.insert(PathBuf::from(dir), "absent".to_string());
            continue;
        }
        all.extend(snapshot(&at).into_iter().map(|(rel, what)| (Path::new(dir).join(rel), what)));
    }
    all
}

/// [`read_only_pod_on`] once on each runtime handler, runc and crun.
fn read_only_pod(r: &mut Report, node: &mut CrioNode, what: &str, hook: &Path, served: bool) {
    for handler in ["runc", "crun"] {
        read_only_pod_on(r, node, handler, what, hook, served);
    }
}

/// A read-only pod with a 1 GiB limit on `node`, on runtime `handler`: served by the hook at
/// `hook` (our 256 MiB `/tmp`, `/dev/shm` grown to 512 MiB, that hook in its
/// final `config.json` at createRuntime) when `served`, else untouched (no
/// mount of ours, CRI-O's 64 MiB `/dev/shm`, no such hook).
fn read_only_pod_on(
    r: &mut Report,
    node: &mut CrioNode,
    handler: &str,
    what: &str,
    hook: &Path,
    served: bool,
) {
    let what = &format!("{handler}: {what}");
    let Some(pod) =
        r.step(&format!("{what}: RunPodSandbox"), node.run_pod("ro", handler, &PodOpts::default()))
    else {
        return;
    };
    let Some(c) =
        r.step(&format!("{what}: start ro 1Gi"), node.start_container(&pod, &CtrOpts::ro("app", GI)))
    else {
        let _ = node.teardown(&pod, &[]);
        return;
    };
    if let Some(p) = r.step(&format!("{what}: probe"), node.probe(&c)) {
        if served {
            r.served(what, &p, 256 * MI, 512 * MI);
        } else {
            r.untouched(what, &p, SHM_64M);
        }
    }
    node.check_hook_stages(r, what, &c, hook, served);
    r.step(&format!("{what}: stop and remove"), node.teardown(&pod, &[&c]));
}

/// Checks that `out` has every one of `lines` as a line of its own.
fn has_lines(r: &mut Report, what: &str, out: &str, lines: &[&str]) {
    for want in lines {
        r.check(out.lines().any(|l| l == *want), format!("{what}: no line {want:?} in:\n{out}"));
    }
}

/// `oci-tmpfs-hook doctor` run as `bin` in the node's namespace: its output
/// (it exits 1 here: Docker and containerd are on sid's PATH, unregistered).
fn doctor(node: &CrioNode, bin: &Path) -> String {
    text(&output(&mut node.in_ns(Command::new(bin).arg("doctor"))).stdout)
}

/// install.sh on a CRI-O host: `engines` finds CRI-O by its config file;
/// `install.sh --engines crio` puts our hook file into CRI-O's default hooks
/// dir and says so (the dir, why that one, no restart); CRI-O serves a
/// read-only pod started next, without a restart; `doctor` reports the file
/// and the dir it checked; `install.sh --uninstall` takes every byte out
/// again, CRI-O stops serving without a restart, and `doctor` says what is
/// missing with the fix.
#[test]
#[ignore = "needs CRI-O, built from source in sid: tests/run.sh crio"]
fn install_sh_setup_and_doctor_on_a_crio_host() {
    let mut node = CrioNode::start_host("install-sh");
    let mut r = Report::of("crio_node", "install.sh");
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let hook = Path::new(HOOK);

    // CRI-O is found by /etc/crio/crio.conf: its binary is not on PATH.
    let engines = node.ns(Command::new(hook_bin()).arg("engines"));
    r.seen("engines", engines.replace('\n', " "));
    r.check(engines.lines().any(|l| l == "crio"), format!("engines does not list crio: {engines}"));
    let before = host_files(&node);

    // --engines crio: `engines` also finds Docker, Podman and containerd by
    // their binaries on sid's PATH, which no private mount can take away
    // without taking the rest of /usr/bin; install.sh alone would register
    // them too, which a CRI-O node does not have.
    let mut install = Command::new(repo.join("install.sh"));
    install.arg("--binary").arg(hook_bin()).args(["--engines", "crio"]);
    let out = node.ns(&mut install);
    r.seen("install.sh --engines crio", format!("\n{out}"));
    let file = Path::new(DEFAULT_HOOKS_DIR).join("oci-tmpfs-hook.json");
    has_lines(
        &mut r,
        "install.sh",
        &out,
        &[
            &format!("crio: hooks dir {DEFAULT_HOOKS_DIR} (CRI-O's default hooks_dir)"),
            &format!("crio: created {}", file.display()),
            "crio: no restart needed: CRI-O watches its hooks dirs and loads the change",
            &format!("installed {HOOK}"),
        ],
    );
    r.check(!out.contains("systemctl"), format!("install.sh asks for a restart: {out}"));
    let written = std::fs::read_to_string(node.ns_path(&file)).unwrap_or_default();
    r.check(
        written == std::fs::read_to_string(repo.join("hooks/oci-tmpfs-hook.json")).unwrap(),
        format!("{} is not hooks/oci-tmpfs-hook.json (the file for {HOOK}): {written:?}", file.display()),
    );

    read_only_pod(&mut r, &mut node, "installed, CRI-O not restarted", hook, true);

    let report = doctor(&node, hook);
    r.seen("doctor", format!("\n{report}"));
    has_lines(
        &mut r,
        "doctor",
        &report,
        &[
            "ok       crio: found (/etc/crio/crio.conf)",
            &format!(
                "ok       crio: {} (CRI-O's default hooks_dir) runs this binary at prestart",
                file.display()
            ),
        ],
    );

    let mut uninstall = Command::new(repo.join("install.sh"));
    uninstall.args(["--uninstall", "--engines", "crio"]);
    let out = node.ns(&mut uninstall);
    r.seen("install.sh --uninstall --engines crio", format!("\n{out}"));
    has_lines(
        &mut r,
        "install.sh --uninstall",
        &out,
        &[
            &format!("crio: removed {}", file.display()),
            "crio: no restart needed: CRI-O watches its hooks dirs and loads the change",
        ],
    );
    let left = snapshot_diff(&before, &host_files(&node));
    r.check(left.is_empty(), format!("install.sh --uninstall left differences: {left:?}"));

    read_only_pod(&mut r, &mut node, "uninstalled, CRI-O not restarted", hook, false);

    let report = doctor(&node, &hook_bin());
    r.seen("doctor after uninstall", format!("\n{report}"));
    has_lines(
        &mut r,
        "doctor after uninstall",
        &report,
        &[&format!(
            "problem  crio: no oci-tmpfs-hook.json in {DEFAULT_HOOKS_DIR} (CRI-O's default hooks_dir); \
             fix: oci-tmpfs-hook setup crio"
        )],
    );
    r.finish();
}

/// The node installer's container as runtimeclass/daemonset.yaml has it
/// (the node's `/` at `/host`, HostToContainer) running `args` from
/// `image`, but not privileged: CRI-O 1.36 gives a privileged container
/// every capability up to the kernel's last, not those of its own bounding
/// set, and root on this VM lacks CAP_SYS_RESOURCE, so runc cannot start one
/// ("unable to apply caps"). `privileged` is there for `--restart-mode
/// systemd` (setns into pid 1), which a CRI-O node never needs; writing the
/// node's files as root takes CRI-O's default capabilities only.
fn installer(image: &str, name: &str, args: &[&str]) -> Value {
    json!({
        "metadata": {"name": name, "attempt": 0},
        "image": {"image": image, "user_specified_image": image},
        "args": args,
        "mounts": [{"container_path": "/host", "host_path": "/", "propagation": "PROPAGATION_HOST_TO_CONTAINER"}],
        "log_path": format!("{name}/0.log"),
        "linux": {
            "resources": {"memory_limit_in_bytes": 64 * MI, "cpu_period": 100000, "cpu_shares": 10},
            "security_context": {
                "namespace_options": {"network": "NODE", "pid": "CONTAINER", "ipc": "POD"},
            },
        },
    })
}

/// The node installer from the node image on a CRI-O node, as
/// runtimeclass/daemonset.yaml runs it but with `--restart-mode none` (CRI-O
/// is never restarted, so no hostPID) and not privileged (see [`installer`]):
/// `node install --wait` puts the static
/// binary, the runtime link and the host config into the node's
/// `/usr/local/bin` and `/etc/oci-tmpfs-hook`, and our hook file into
/// CRI-O's default hooks dir, and says CRI-O needs no restart; CRI-O serves
/// a read-only pod with that binary; the container stops on SIGTERM with
/// exit 0; `node uninstall` (the same image) gives back every byte, and a
/// new pod is not served.
#[test]
#[ignore = "needs CRI-O, built from source in sid: tests/run.sh crio"]
fn node_installer_from_the_node_image_on_a_crio_node() {
    let bin = static_bin();
    let mut node = CrioNode::start_host("node-installer");
    let mut r = Report::of("crio_node", "node-installer");
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let image = node_image(&node, &bin);
    let before = host_files(&node);
    let opts = PodOpts { memory: 64 * MI, ..PodOpts::default() };
    let pod = node.run_pod("installer", HANDLER, &opts).expect("the installer's pod");

    let args = ["node", "install", "--host-root", "/host", "--restart-mode", "none", "--wait"];
    let config = installer(&image, "install", &args);
    let log = node.log_path(&pod, &config);
    let installer_id = node.start_config(&pod, config).expect("the installer's container");
    let out = wait_for_text(&log, "node: waiting for SIGTERM", Duration::from_secs(30)).unwrap_or_default();
    r.seen("node install --wait", format!("\n{out}"));
    for want in [
        "node: waiting for SIGTERM",
        "crio: no restart needed: CRI-O watches its hooks dirs and loads the change",
        &format!("crio: created /host{DEFAULT_HOOKS_DIR}/oci-tmpfs-hook.json"),
    ] {
        r.check(out.contains(want), format!("node install: no {want:?} in its log"));
    }
    r.check(!out.contains("containerd"), "node install touched containerd on a CRI-O node");
    let same = |a: &Path, b: &Path| std::fs::read(a).ok().is_some_and(|x| std::fs::read(b).ok() == Some(x));
    let file = Path::new(DEFAULT_HOOKS_DIR).join("oci-tmpfs-hook.json");
    for (on_node, want) in [
        (file.clone(), repo.join("hooks/oci-tmpfs-hook.json")),
        (PathBuf::from(HOOK), bin.clone()),
        (PathBuf::from("/etc/oci-tmpfs-hook/config.toml"), repo.join("hooks/config.toml")),
    ] {
        r.check(
            same(&node.ns_path(&on_node), &want),
            format!("{} on the node is not {}", on_node.display(), want.display()),
        );
    }
    let link = std::fs::read_link(node.ns_path("/usr/local/bin/oci-tmpfs-runtime")).ok();
    r.check(link.as_deref() == Some(Path::new("oci-tmpfs-hook")), format!("oci-tmpfs-runtime -> {link:?}"));

    read_only_pod(&mut r, &mut node, "installed by the node image", Path::new(HOOK), true);

    r.step(
        "stop the installer",
        node.cri("StopContainer", json!({"container_id": installer_id, "timeout": 10})),
    );
    let code = node.wait_exited(&installer_id, Duration::from_secs(15));
    r.seen("the installer on SIGTERM", format!("{code:?}"));
    r.check(code == Ok(0), format!("the installer did not exit 0 on SIGTERM: {code:?}"));

    let args = ["node", "uninstall", "--host-root", "/host", "--restart-mode", "none"];
    let config = installer(&image, "uninstall", &args);
    let log = node.log_path(&pod, &config);
    if let Some(id) = r.step("start node uninstall", node.start_config(&pod, config)) {
        let code = node.wait_exited(&id, Duration::from_secs(30));
        r.seen("node uninstall", format!("{code:?}:\n{}", read_text_if_any(&log).unwrap_or_default()));
        r.check(code == Ok(0), format!("node uninstall did not exit 0: {code:?}"));
    }
    let left = snapshot_diff(&before, &host_files(&node));
    r.check(left.is_empty(), format!("node uninstall left differences: {left:?}"));
    read_only_pod(&mut r, &mut node, "uninstalled", Path::new(HOOK), false);
    r.step("remove the installer's pod", node.teardown(&pod, &[]));
    r.finish();
}

/// The NRI plugin from the node image on a CRI-O node, as
/// deploy/kubernetes/daemonset.yaml runs it (its args and mounts: the NRI
/// socket's dir, the hook dir with `--hook-dir`/`--hook-dir-mount`, the
/// ConfigMap's config read-only, `/tmp`; a read-only root, every capability
/// dropped, uid 0): it registers with CRI-O's NRI, copies its binary (0755)
/// and the config (0644) into the hook dir, and a read-only pod is served by
/// the hook there, reading that config.
#[test]
#[ignore = "needs CRI-O, built from source in sid: tests/run.sh crio"]
fn nri_plugin_from_the_node_image_on_a_crio_node() {
    let bin = static_bin();
    let mut node = CrioNode::start_with("nri-daemonset", false);
    let mut r = Report::of("crio_node", "nri-daemonset");
    let image = node_image(&node, &bin);
    let (cm_dir, tmp, hook_dir) =
        (node.dir.join("cm"), node.dir.join("plugin-tmp"), node.dir.join("hook-dir"));
    for d in [&cm_dir, &tmp, &hook_dir] {
        std::fs::create_dir_all(d).unwrap();
    }
    let cm = "log_level = \"debug\"\n";
    std::fs::write(cm_dir.join("config.toml"), cm).unwrap();
    let opts = PodOpts { memory: 64 * MI, ..PodOpts::default() };
    let pod = node.run_pod("nri-plugin", HANDLER, &opts).expect("the plugin's pod");
    // CRI-O's NRI socket is `nri.sock` in its run dir: that dir is the hostPath.
    let config = nri_plugin_container(&image, &node.run, &hook_dir, &cm_dir, &tmp);
    let log = node.log_path(&pod, &config);
    let plugin = r.step("start the plugin", node.start_config(&pod, config));
    r.plugin_registered(&log, Duration::from_secs(15));
    let (hb, hc) = r.hook_dir_filled(&hook_dir, &bin, cm);

    read_only_pod(&mut r, &mut node, "served by the plugin's hook dir", &hb, true);
    // The hook reads the hook dir's config: the pod above is gone, so one more.
    if let Some(pod) = r.step("RunPodSandbox", node.run_pod("cfg", HANDLER, &PodOpts::default())) {
        if let Some(c) = r.step("start ro 1Gi", node.start_container(&pod, &CtrOpts::ro("app", GI))) {
            if let Some(config) = r.step("the final config.json", node.final_config(&c)) {
                let args = &config["hooks"]["createRuntime"][0]["args"];
                let reads = args.as_array().is_some_and(|a| {
                    a.windows(2).any(|w| w[0] == "--config" && w[1] == hc.display().to_string().as_str())
                });
                r.seen("the hook's args", args);
                r.check(reads, format!("the hook does not read the hook dir's config: {args}"));
            }
            r.step("stop and remove", node.teardown(&pod, &[&c]));
        }
    }
    let text = r.read(&log);
    let lines: Vec<&str> =
        text.lines().filter(|l| l.contains("our hook at") || l.contains("wrote")).collect();
    r.seen("plugin container's log", format!("{lines:?}"));
    let ids: Vec<&str> = plugin.iter().map(String::as_str).collect();
    r.step("stop the plugin", node.teardown(&pod, &ids));
    r.finish();
}
