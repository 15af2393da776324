//! GPU containers: a CDI device with a vendor's hooks beside ours
//! (docs/gpu.md). A CDI spec of our own making (`tests/cdi/example.json`,
//! vendor device `example.com/gpu=0`: a device node, an env var, a bind
//! mount under `/usr/lib/example`, createRuntime and createContainer hooks,
//! `tests/cdi/vendor-hook.sh`) goes through real Podman `--device`, with
//! more vendor hooks in the hooks dir after ours, runc and crun, read-only
//! root, and our hook registered at createRuntime (`prestart`) or at
//! createContainer. Podman 4.3 reads CDI specs from `/etc/cdi` and
//! `/var/run/cdi` only: the test writes its spec into `/var/run/cdi` and
//! removes it, one test at a time (two specs of one device conflict).

use crate::support::cri::{CtrOpts, PodOpts};
use crate::support::pods::{Executor, Node as CriNode, Report};
use crate::support::*;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use oci_tmpfs_hook::engine::hooks_dir::oci_hooks_json_at;
use oci_tmpfs_hook::stage::Stage;
use serde_json::{json, Value};

/// The dynamic CDI spec dir every Podman reads.
const CDI_DIR: &str = "/var/run/cdi";
/// One test at a time owns [`CDI_DIR`]'s `example.com/gpu`.
static CDI: Mutex<()> = Mutex::new(());

/// What every container prints: the mount table, the vendor's env, device
/// and library, the vendor files in /tmp, then writes to /tmp and /dev/shm.
const PROBE: &str = "cat /proc/self/mountinfo; echo \"ENV EXAMPLE_GPU=$EXAMPLE_GPU\"; \
    stat -c 'DEV %t:%T %F' /dev/example-gpu0; echo \"LIB $(cat /usr/lib/example/libexample.so.1)\"; \
    for f in /tmp/vendor-*; do [ -e \"$f\" ] && echo \"FILE ${f#/tmp/}\"; done; \
    touch /tmp/probe 2>/dev/null && echo TMP-WRITABLE; \
    dd if=/dev/zero of=/dev/shm/probe bs=1M count=80 2>/dev/null && echo SHM-WRITABLE; true";

/// The vendor hooks in the hooks dir, after ours (lexical order): name,
/// stage, way (see `tests/cdi/vendor-hook.sh`).
const AFTER: [(&str, &str, &str); 3] = [
    ("cr-host-after", "createRuntime", "host"),
    ("cr-ns-after", "createRuntime", "ns"),
    ("cc-after", "createContainer", "ccw"),
];

/// A Podman with private storage and hooks dir, our hook registered at
/// `ours`, the vendor's after it, and the CDI spec installed.
struct Node {
    dir: TempDir,
    runtime: Runtime,
    rootfs: PathBuf,
    spec: PathBuf,
    _bundle: Bundle,
}

impl Node {
    fn new(runtime: Runtime, ours: Option<Stage>) -> Node {
        require_root();
        if runtime == Runtime::Crun {
            crun_cgroup_fix();
        }
        let dir = TempDir::short("cdi");
        let bundle = Bundle::new("cdi");
        let rootfs = bundle.rootfs();
        // The image ships the vendor's mount points.
        for d in ["run/example-hook", "usr/lib/example"] {
            std::fs::create_dir_all(rootfs.join(d)).unwrap();
        }
        let lib = dir.join("lib");
        std::fs::create_dir_all(&lib).unwrap();
        std::fs::write(lib.join("libexample.so.1"), "example-lib\n").unwrap();
        let hook = dir.join("vendor-hook.sh");
        std::fs::copy(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cdi/vendor-hook.sh"), &hook).unwrap();
        let hooks = dir.join("hooks.d");
        std::fs::create_dir_all(&hooks).unwrap();
        let write = |name: &str, v: &Value| std::fs::write(hooks.join(name), v.to_string()).unwrap();
        if let Some(stage) = ours {
            write("oci-tmpfs-hook.json", &oci_hooks_json_at(&hook_bin(), stage));
        }
        for (name, at, way) in AFTER {
            let entry = json!({
                "version": "1.0.0",
                "hook": {
                    "path": hook.display().to_string(),
                    "args": ["vendor-hook", name, way, rootfs.display().to_string()],
                    "env": ["PATH=/usr/sbin:/usr/bin:/sbin:/bin"],
                },
                "when": { "always": true },
                "stages": [at],
            });
            write(&format!("zz-example-{name}.json"), &entry);
        }
        let template =
            std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cdi/example.json"))
                .unwrap();
        let text = template
            .replace("@LIBDIR@", &lib.display().to_string())
            .replace("@HOOK@", &hook.display().to_string())
            .replace("@ROOTFS@", &rootfs.display().to_string());
        std::fs::create_dir_all(CDI_DIR).unwrap();
        let spec = Path::new(CDI_DIR).join(format!("{}.json", unique("cdi")));
        std::fs::write(&spec, text).unwrap();
        Node { dir, runtime, rootfs, spec, _bundle: bundle }
    }

    fn podman(&self) -> Command {
        crate::support::daemons::private_podman(&self.dir, self.runtime)
    }

    /// The `hooks` of the `config.json` Podman writes for the device
    /// (`podman create` + `init`: the runtime's create runs the hooks too).
    fn hooks_of_config(&self) -> Value {
        let name = format!("cdi-{}", unique("i"));
        let mut c = self.podman();
        c.args([
            "create",
            "--name",
            &name,
            "--network=none",
            "--ulimit=nofile=1024:1024",
            "--ulimit=nproc=1024:1024",
        ]);
        c.args(["--read-only", "--read-only-tmpfs=false", "--device=example.com/gpu=0"]);
        c.arg("--rootfs").arg(&self.rootfs).arg("/bin/true");
        ok(&mut c);
        ok(self.podman().args(["init", &name]));
        let dir = ok(self.podman().args(["inspect", "--format", "{{.StaticDir}}", &name]));
        let config: Value =
            serde_json::from_slice(&std::fs::read(Path::new(dir.trim()).join("config.json")).unwrap())
                .unwrap();
        let _ = output(self.podman().args(["rm", "--force", "--ignore", &name]));
        // That start's vendor hooks wrote into the image's /tmp too.
        for f in std::fs::read_dir(self.rootfs.join("tmp")).unwrap() {
            std::fs::remove_file(f.unwrap().path()).unwrap();
        }
        config["hooks"].clone()
    }

    /// `podman run` of [`PROBE`] with the device, read-only root, 1 GiB.
    fn run(&self) -> String {
        let name = format!("cdi-{}", unique("p"));
        let mut c = self.podman();
        c.args(["run", "--rm", "--name", &name, "--network=none"]);
        c.args(["--ulimit=nofile=1024:1024", "--ulimit=nproc=1024:1024"]);
        c.args(["--read-only", "--read-only-tmpfs=false", "--memory=1g", "--device=example.com/gpu=0"]);
        c.arg("--rootfs").arg(&self.rootfs).args(["/bin/sh", "-c", PROBE]);
        let out = output(&mut c);
        let _ = output(self.podman().args(["rm", "--force", "--ignore", &name]));
        succeeded(&format!("podman --runtime {} --device example.com/gpu=0", self.runtime.bin()), &out)
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.spec);
    }
}

/// The vendor files the container saw in /tmp.
fn files(out: &str) -> Vec<String> {
    let mut f: Vec<String> =
        out.lines().filter_map(|l| l.strip_prefix("FILE vendor-")).map(String::from).collect();
    f.sort();
    f
}

/// Every vendor hook's name, sorted.
const ALL: [&str; 6] =
    ["cc-after", "cc-before", "cr-host-after", "cr-host-before", "cr-ns-after", "cr-ns-before"];

/// The vendor files a container is measured to lose, and why
/// (docs/design.md#vendor-hooks): a createRuntime hook that runs after ours
/// and writes through the runtime namespace's view of the rootfs writes
/// under our tmpfs, which is mounted in the container's namespace only; and
/// crun 1.8.1 (bookworm's) makes the root read-only before the
/// createContainer hooks, so a vendor's createContainer write into the
/// image's /tmp fails there, with or without us (see
/// [`crun_control_without_our_hook`]); crun 1.28 (sid's)
/// does not. `ours_listed` is the list Podman put our hook in: Podman 4.3
/// keeps a prestart hook in `prestart`, which runs before every
/// createRuntime hook; Podman 5.8 moves it to `createRuntime`, after the CDI
/// spec's. Every other file reaches the container: written into our tmpfs,
/// or into the image's /tmp before ours and copied up.
fn lost(runtime: Runtime, ours: Option<Stage>, ours_listed: Option<&str>) -> Vec<&'static str> {
    let mut lost = match ours_listed {
        Some("prestart") => vec!["cr-host-after", "cr-host-before"],
        Some("createRuntime") => vec!["cr-host-after"],
        _ => vec![],
    };
    let crun_ro_before_cc = runtime == Runtime::Crun && runtime_version(Runtime::Crun) < (1, 28);
    if crun_ro_before_cc && ours != Some(Stage::Prestart) && ours != Some(Stage::CreateRuntime) {
        lost.push("cc-before");
        if ours.is_none() {
            // Nothing of ours on /tmp: every later createContainer write fails too.
            lost.push("cc-after");
        }
    }
    lost.sort_unstable();
    lost
}

/// The stage list of `hooks` that holds our hook.
fn listed_in(hooks: &Value) -> Option<&'static str> {
    let ours = hook_bin().display().to_string();
    ["prestart", "createRuntime", "createContainer"].into_iter().find(|stage| {
        hooks[*stage].as_array().is_some_and(|l| l.iter().any(|h| h["path"].as_str() == Some(ours.as_str())))
    })
}

/// One container with the device and every vendor hook, our hook registered
/// at `ours` (none: not at all); checks what it saw and what the host keeps.
fn device_with_vendor_hooks(runtime: Runtime, ours: Option<Stage>) -> String {
    let _lock = CDI.lock().unwrap_or_else(|e| e.into_inner());
    let node = Node::new(runtime, ours);
    let hooks = node.hooks_of_config();
    let out = node.run();
    let what = match ours {
        Some(s) => format!("podman --runtime {} --device example.com/gpu=0, our hook at {s}", runtime.bin()),
        None => format!("podman --runtime {} --device example.com/gpu=0, no hook of ours", runtime.bin()),
    };
    let saw = files(&out);
    let listed = listed_in(&hooks);
    say(&format!("{what} (listed in {listed:?}): vendor files in /tmp {saw:?}"));
    // Podman lists a CDI spec's hooks before the hooks dir's, in each stage.
    for stage in ["createRuntime", "createContainer"] {
        let names: Vec<String> = hooks[stage]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|h| h["args"].get(1).and_then(Value::as_str).map(String::from))
            .collect();
        let before = names.iter().position(|n| n.ends_with("-before"));
        let after = names.iter().position(|n| n.ends_with("-after"));
        assert!(before < after, "{what}: {stage} hooks out of order: {names:?}");
    }
    assert_eq!(listed.is_some(), ours.is_some(), "{what}: our hook in config.json: {hooks}");
    let lost = lost(runtime, ours, listed);
    let want: Vec<&str> = ALL.into_iter().filter(|f| !lost.contains(f)).collect();
    assert_eq!(saw, want, "{what}: the vendor files in /tmp\n{out}");

    // Theirs: env, device node, library, and their own tmpfs still mounted.
    assert!(out.contains("ENV EXAMPLE_GPU=0"), "{what}: the CDI env\n{out}");
    assert!(out.contains("DEV 1:3 character special file"), "{what}: the CDI device node\n{out}");
    assert!(out.contains("LIB example-lib"), "{what}: the CDI mount\n{out}");
    let mounts = parse_mountinfo(&out);
    let theirs = mount_at(&mounts, "/run/example-hook")
        .unwrap_or_else(|| panic!("{what}: no /run/example-hook\n{out}"));
    assert_eq!(
        (theirs.fstype.as_str(), theirs.source.as_str()),
        ("tmpfs", "example-hook"),
        "{what}: {theirs:?}"
    );
    // Ours: /tmp and /dev/shm sized from --memory=1g, writable.
    if ours.is_some() {
        let tmp = mount_at(&mounts, "/tmp").unwrap_or_else(|| panic!("{what}: no /tmp\n{out}"));
        let shm = mount_at(&mounts, "/dev/shm").unwrap_or_else(|| panic!("{what}: no /dev/shm\n{out}"));
        assert_eq!((tmp.source.as_str(), tmp.size()), ("oci-tmpfs-hook", Some(256 * MI)), "{what}: {tmp:?}");
        assert_eq!(shm.size(), Some(512 * MI), "{what}: {shm:?}");
        assert!(out.contains("TMP-WRITABLE") && out.contains("SHM-WRITABLE"), "{what}: writes\n{out}");
    } else {
        let tmp = mount_at(&mounts, "/tmp");
        assert!(tmp.is_none_or(|t| t.source != "oci-tmpfs-hook"), "{what}: {tmp:?}");
    }
    // The host: nothing of either left mounted.
    let host = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let left: Vec<_> = parse_mountinfo(&host)
        .into_iter()
        .filter(|m| {
            Path::new(&m.mount_point).starts_with(&node.rootfs)
                || Path::new(&m.mount_point).starts_with(&*node.dir)
                || m.source == "example-hook"
        })
        .collect();
    assert!(left.is_empty(), "{what}: left mounted on the host: {left:?}");
    out
}

// Boilerplate: one test per runtime and stage, so that libtest names,
// filters and runs each on its own; the case is `device_with_vendor_hooks`.
#[test]
fn runc_hook_at_prestart() {
    device_with_vendor_hooks(Runtime::Runc, Some(Stage::Prestart));
}

#[test]
fn runc_hook_at_create_runtime() {
    device_with_vendor_hooks(Runtime::Runc, Some(Stage::CreateRuntime));
}

#[test]
fn runc_hook_at_create_container() {
    device_with_vendor_hooks(Runtime::Runc, Some(Stage::CreateContainer));
}

#[test]
fn crun_hook_at_prestart() {
    device_with_vendor_hooks(Runtime::Crun, Some(Stage::Prestart));
}

#[test]
fn crun_hook_at_create_runtime() {
    device_with_vendor_hooks(Runtime::Crun, Some(Stage::CreateRuntime));
}

#[test]
fn crun_hook_at_create_container() {
    device_with_vendor_hooks(Runtime::Crun, Some(Stage::CreateContainer));
}

/// The control: no hook of ours. With crun 1.8.1 a vendor's createContainer
/// write into the image's /tmp fails here too (crun's read-only root, not
/// our hook); with crun 1.28 it works.
#[test]
fn crun_control_without_our_hook() {
    device_with_vendor_hooks(Runtime::Crun, None);
}

/// `setup podman --stage createContainer` writes the hooks JSON at that
/// stage; `--stage` for an engine without a hooks dir is a usage error.
#[test]
fn setup_registers_the_stage_asked_for() {
    let root = TempDir::new("cdi-setup");
    let hooks = root.join("hooks.d");
    std::fs::create_dir_all(&hooks).unwrap();
    let mut c = Command::new(hook_bin());
    c.args(["setup", "podman", "--stage", "createContainer", "--hooks-dir"]).arg(&hooks);
    c.arg("--hook-path").arg(hook_bin());
    ok(&mut c);
    let written: Value =
        serde_json::from_slice(&std::fs::read(hooks.join("oci-tmpfs-hook.json")).unwrap()).unwrap();
    assert_eq!(written, oci_hooks_json_at(&hook_bin(), Stage::CreateContainer));
    let out = output(
        Command::new(hook_bin())
            .args(["setup", "docker", "--stage", "createContainer", "--root"])
            .arg(&*root),
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("--stage does not apply to docker"), "{}", text(&out.stderr));
}

/// `install.sh --stage createContainer` passes the stage to the hooks-dir
/// engines only: Podman's JSON at createContainer, Docker's daemon.json as
/// always.
#[test]
fn install_sh_passes_the_stage_to_the_hooks_dir_engines() {
    let dest = TempDir::new("cdi-install");
    let out = output(
        Command::new("bash")
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("install.sh"))
            .args(["--engines", "podman,docker", "--prefix", "/usr", "--stage", "createContainer"])
            .env("OCI_TMPFS_HOOK_BINARY", hook_bin())
            .env("DESTDIR", &*dest),
    );
    succeeded("install.sh --stage createContainer", &out);
    let json: Value = serde_json::from_slice(
        &std::fs::read(dest.join("usr/share/containers/oci/hooks.d/oci-tmpfs-hook.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(json, oci_hooks_json_at(Path::new("/usr/bin/oci-tmpfs-hook"), Stage::CreateContainer));
    assert!(dest.join("etc/docker/daemon.json").exists(), "{}", text(&out.stdout));
}

/// The wrapper in spec mode around runc, for a spec that carries a vendor's
/// createRuntime hook writing `/tmp` through the host's view of the rootfs
/// (as a CDI spec through containerd's `enable_cdi` would): a spec tmpfs on
/// /tmp would hide that file, so the temp targets go to our hook at
/// createContainer, after the vendor's (docs/design.md#vendor-hooks).
#[test]
fn wrapper_hands_temp_targets_to_the_hook_after_a_vendor_runtime_hook() {
    require_root();
    for mode in ["spec", "hook"] {
        wrapper_after_a_vendor_runtime_hook(mode);
    }
}

/// The wrapper in `mode` around runc, for a bundle with a vendor's
/// host-view createRuntime hook: our hook at createContainer, the file kept.
fn wrapper_after_a_vendor_runtime_hook(mode: &str) {
    let what = format!("the wrapper in {mode} mode");
    let dir = TempDir::new("cdi-wrapper");
    let wrapper = dir.join("oci-tmpfs-runtime");
    std::os::unix::fs::symlink(hook_bin(), &wrapper).unwrap();
    let config = dir.join("mode.toml");
    std::fs::write(&config, format!("mode = \"{mode}\"\nlog_level = \"info\"\n")).unwrap();
    let hook = dir.join("vendor-hook.sh");
    std::fs::copy(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cdi/vendor-hook.sh"), &hook).unwrap();
    let mut b = Bundle::new("cdi-wrapped");
    let rootfs = b.rootfs().display().to_string();
    b.config["hooks"] = json!({"createRuntime": [{
        "path": hook.display().to_string(),
        "args": ["vendor-hook", "wrapped", "host", rootfs],
        "env": ["PATH=/usr/sbin:/usr/bin:/sbin:/bin"],
    }]});
    b.script("cat /proc/self/mountinfo; cat /tmp/vendor-wrapped && echo VENDOR-FILE; touch /tmp/p && echo TMP-WRITABLE");
    b.write();
    let runc_root = dir.join("runc-root");
    let id = unique("cdi-wrapped");
    let out = output(
        Command::new(&wrapper)
            .env("OCI_TMPFS_HOOK_CONFIG", &config)
            .arg("--root")
            .arg(&runc_root)
            .args(["run", "--bundle"])
            .arg(&b.dir)
            .arg(&id),
    );
    let _ = output(Command::new("runc").arg("--root").arg(&runc_root).args(["delete", "--force", &id]));
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{what}: {stderr}\n{stdout}");
    let tmp = mount_at(&parse_mountinfo(&stdout), "/tmp").cloned();
    assert_eq!(tmp.as_ref().map(|t| t.source.as_str()), Some("oci-tmpfs-hook"), "{what}: {stdout}");
    assert!(stdout.contains("VENDOR-FILE") && stdout.contains("TMP-WRITABLE"), "{what}: {stderr}\n{stdout}");
    if mode == "spec" {
        assert!(stderr.contains("added the hook at createContainer"), "{what}: {stderr}");
    }
    let written: Value = serde_json::from_slice(&std::fs::read(b.dir.join("config.json")).unwrap()).unwrap();
    let ours = &written["hooks"]["createContainer"][0];
    assert_eq!(ours["args"][3], "createContainer", "{what}: {}", written["hooks"]);
    assert!(written["hooks"].get("prestart").is_none(), "{what}: {}", written["hooks"]);
    let spec_tmp = written["mounts"].as_array().unwrap().iter().any(|m| m["destination"] == "/tmp");
    assert!(!spec_tmp, "{what}: no spec tmpfs on /tmp: {}", written["mounts"]);
}

// ------------------------------------------------ containerd's CRI, with CDI

/// The vendor files that reach a CRI container, by way in, measured with
/// containerd 2.1.9 and runc 1.3.6 (sid). containerd puts the CDI spec's
/// hooks into the spec before the runtime is called. The wrapper in spec
/// mode sees another party's createRuntime hooks and hands the temp targets
/// to our hook at createContainer; in hook mode it adds our hook at
/// createContainer for the same reason (at `prestart`, which runs before
/// every createRuntime hook, the host-view write was hidden: measured
/// before that rule). NRI's adjustment appends our hook to `createRuntime`,
/// after the CDI spec's, and copy-up keeps what they wrote. Every file
/// arrives, by every way.
fn cri_lost(_way: Executor) -> &'static [&'static str] {
    &[]
}

/// containerd has CDI from 1.7 (`enable_cdi`, on by default in 2.x);
/// bookworm's 1.6.20 has none. So the CRI CDI cases are `#[ignore]`d, and
/// tests/run.sh runs them (`--include-ignored`) in the sid environment
/// only: in bookworm they show as ignored, never as passed. Run anywhere
/// else, they fail on a containerd without CDI.
fn require_cdi() {
    let ctd = crate::support::cri::Containerd::find();
    assert!(
        ctd.major >= 2 || !ctd.version.starts_with("1.6."),
        "containerd {} has no CDI (1.7+): run the CRI CDI cases in the sid environment",
        ctd.version
    );
}

/// A pod whose container asks for `example.com/gpu=0` through the CRI
/// field `CDI_devices`, on `node`, for each of its ways in.
fn cri_device(mut node: CriNode) {
    let hook = node.dir.join("vendor-hook.sh");
    std::fs::copy(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cdi/vendor-hook.sh"), &hook).unwrap();
    let lib = node.dir.join("lib");
    std::fs::create_dir_all(&lib).unwrap();
    std::fs::write(lib.join("libexample.so.1"), "example-lib\n").unwrap();
    let template =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cdi/example.json"))
            .unwrap();
    let text = template
        .replace("@LIBDIR@", &lib.display().to_string())
        .replace("@HOOK@", &hook.display().to_string())
        .replace("@ROOTFS@", "-");
    // containerd's default cdi_spec_dirs; this node's /run is its own.
    let dir = node.ns_path("/run/cdi");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("example.json"), text).unwrap();
    let mut r = Report::new(&node);
    for way in node.ways() {
        node.way = way;
        r.way(way);
        node.host_config("");
        let Some(pod) = r.step("RunPodSandbox", node.run_pod("cdi", &PodOpts::default())) else { continue };
        let mut req = node.container_request(&pod, &CtrOpts::ro("gpu", GI));
        req["config"]["CDI_devices"] = json!([{"name": "example.com/gpu=0"}]);
        let Some(c) = r.step("CreateContainer with CDI_devices", node.cri("CreateContainer", req)) else {
            continue;
        };
        let id = c["container_id"]
            .as_str()
            .unwrap_or_else(|| panic!("CreateContainer answered no id: {c}"))
            .to_string();
        r.step("StartContainer", node.cri("StartContainer", json!({"container_id": id})));
        if let Some((code, out, err)) = r.step("probe", node.exec(&id, &["sh", "-c", PROBE])) {
            r.check(code == 0, format!("probe exit {code}: {err}"));
            let saw = files(&out);
            r.seen("vendor files in /tmp", format!("{saw:?}"));
            let want: Vec<String> = ["cc-before", "cr-host-before", "cr-ns-before"]
                .into_iter()
                .filter(|f| !cri_lost(way).contains(f))
                .map(String::from)
                .collect();
            r.check(saw == want, format!("vendor files in /tmp: {saw:?}, want {want:?}"));
            r.check(out.contains("ENV EXAMPLE_GPU=0"), "the CDI env");
            r.check(out.contains("DEV 1:3 character special file"), "the CDI device node");
            r.check(out.contains("LIB example-lib"), "the CDI mount");
            let mounts = parse_mountinfo(&out);
            let theirs = mount_at(&mounts, "/run/example-hook").map(|m| m.source.clone());
            r.check(theirs.as_deref() == Some("example-hook"), format!("/run/example-hook: {theirs:?}"));
            r.served("ro 1Gi with a CDI device", &out, 256 * MI, 512 * MI);
        }
        r.step("stop and remove", node.teardown(&pod, &[&id]));
    }
    r.finish();
}

/// The RuntimeClass way: the wrapper's handlers (spec and hook mode).
#[test]
#[ignore = "needs containerd 1.7+ (CDI): tests/run.sh runs it in sid"]
fn cri_runtime_class_pod_with_a_cdi_device() {
    require_cdi();
    cri_device(CriNode::wrapper("cdi"));
}

/// The NRI way: the plugin's adjustment.
#[test]
#[ignore = "needs containerd 1.7+ (CDI): tests/run.sh runs it in sid"]
fn cri_nri_pod_with_a_cdi_device() {
    require_cdi();
    cri_device(CriNode::nri("cdi"));
}

// ------------------------------------------------ copy-up, hostile image

/// Copy-up in a real runc container (docs/design.md#copy-up): what the
/// image's `/tmp` holds shows in our tmpfs with its mode and times, a
/// symlink as a symlink (not followed), a fifo and a device node stay out
/// with one warning; a `/tmp` of more entries than the bound is left alone
/// (its files stay visible), with one warning, and the container starts.
#[test]
fn copy_up_in_a_real_container_with_a_hostile_tmp() {
    require_root();
    let dir = TempDir::new("cdi-copyup");
    let log = dir.join("hook.log");
    let config = dir.join("config.toml");
    std::fs::write(&config, format!("log_file = {:?}\nlog_level = \"warn\"\n", log.display().to_string()))
        .unwrap();
    let mut b = Bundle::new("cdi-copyup");
    let tmp = b.rootfs().join("tmp");
    std::fs::create_dir(tmp.join("d")).unwrap();
    std::fs::write(tmp.join("d/f"), "vendor\n").unwrap();
    std::fs::set_permissions(tmp.join("d/f"), std::os::unix::fs::PermissionsExt::from_mode(0o640)).unwrap();
    std::os::unix::fs::symlink("/etc/shadow", tmp.join("l")).unwrap();
    rustix::fs::mknodat(
        rustix::fs::CWD,
        tmp.join("fifo"),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
    rustix::fs::mknodat(
        rustix::fs::CWD,
        tmp.join("null"),
        rustix::fs::FileType::CharacterDevice,
        rustix::fs::Mode::from_raw_mode(0o666),
        rustix::fs::makedev(1, 3),
    )
    .unwrap();
    b.script("cat /proc/self/mountinfo; stat -c 'STAT %n %a' /tmp/d/f; cat /tmp/d/f; ls -l /tmp/l; ls /tmp/fifo /tmp/null 2>&1; true");
    b.inject_with_config("prestart", &config);
    let run = b.run(Runtime::Runc);
    run.assert_ok();
    let out = run.stdout();
    let t = mount_at(&parse_mountinfo(&out), "/tmp").cloned();
    assert_eq!(t.as_ref().map(|t| t.source.as_str()), Some("oci-tmpfs-hook"), "{out}");
    assert!(out.contains("STAT /tmp/d/f 640") && out.contains("vendor"), "{out}");
    assert!(out.contains("/tmp/l -> /etc/shadow"), "the symlink as a symlink: {out}");
    assert!(!out.contains("\n/tmp/fifo") && !out.contains("\n/tmp/null"), "fifo and device left out: {out}");
    let warned = read_text(&log);
    assert!(warned.contains("2 entries cannot be copied safely") && warned.contains("/fifo"), "{warned}");

    // More entries than the bound: /tmp left alone (the image's, every file
    // visible), one warning, a start.
    for i in 0..4200 {
        std::fs::write(tmp.join(format!("f{i}")), "").unwrap();
    }
    std::fs::write(&log, "").unwrap();
    let started = std::time::Instant::now();
    let run = b.run(Runtime::Runc);
    run.assert_ok();
    let took = started.elapsed();
    let out = run.stdout();
    let t = mount_at(&parse_mountinfo(&out), "/tmp").cloned();
    assert_ne!(t.as_ref().map(|t| t.source.as_str()), Some("oci-tmpfs-hook"), "no tmpfs of ours: {out}");
    assert!(out.contains("vendor"), "the image's files stay visible: {out}");
    let warned = read_text(&log);
    assert!(warned.contains("more than 4096 entries") && warned.contains("left alone"), "{warned}");
    say(&format!("copy-up: a /tmp of 4200+ entries left alone, the container ran in {took:?}"));
}
