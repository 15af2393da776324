//! `setup`, `doctor` and `install.sh` run as built, against temporary roots;
//! and a containerd config written by `setup` loaded by a real containerd.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::support::daemons::{Dockerd, DockerdOptions};
use crate::support::{hook_bin, ok, require_root, succeeded, text, unique};

const HOOK: &str = "/usr/local/bin/oci-tmpfs-hook";
const WRAPPER: &str = "/usr/local/bin/oci-tmpfs-runtime";

/// A temporary root, removed on drop.
struct Root(PathBuf);

impl Root {
    fn new(name: &str) -> Root {
        let dir = std::env::temp_dir().join(unique(name));
        fs::create_dir_all(&dir).unwrap();
        Root(dir.canonicalize().unwrap())
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.0.join(rel.trim_start_matches('/'))
    }

    fn write(&self, rel: &str, text: &str) -> PathBuf {
        let p = self.path(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(&p, text).unwrap();
        p
    }

    fn read(&self, rel: &str) -> String {
        fs::read_to_string(self.path(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
    }

    /// Every file and symlink under the root (relative path -> contents or
    /// "-> target"), to compare trees before and after.
    fn tree(&self) -> BTreeMap<String, String> {
        crate::support::walk(&self.0, true)
            .into_iter()
            .filter(|e| !e.meta.is_dir())
            .map(|e| {
                let what = if e.meta.file_type().is_symlink() {
                    format!("-> {}", fs::read_link(&e.path).unwrap().display())
                } else {
                    String::from_utf8(fs::read(&e.path).unwrap()).unwrap_or_else(|_| "<binary>".into())
                };
                (e.rel.display().to_string(), what)
            })
            .collect()
    }

    fn root_arg(&self) -> String {
        self.0.display().to_string()
    }
}

impl Drop for Root {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn run(bin: &Path, args: &[&str]) -> Output {
    Command::new(bin).args(args).stdin(Stdio::null()).output().expect("running the binary")
}

fn setup(root: &Root, args: &[&str]) -> Output {
    let r = root.root_arg();
    let mut all = vec!["setup"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--root", &r, "--hook-path", HOOK, "--runtime-path", WRAPPER]);
    run(&hook_bin(), &all)
}

#[track_caller]
fn assert_ok(out: &Output) -> String {
    succeeded("exit", out)
}

#[test]
fn docker_twice_is_unchanged_and_undo_restores() {
    let root = Root::new("docker");
    let original = "{\n    \"log-driver\": \"journald\",\n    \"storage-driver\": \"overlay2\"\n}\n";
    let path = root.write("/etc/docker/daemon.json", original);
    fs::set_permissions(&path, fs::Permissions::from_mode(0o640)).unwrap();

    let first = assert_ok(&setup(&root, &["docker"]));
    assert!(first.contains("docker: updated"), "{first}");
    assert!(first.contains("systemctl restart docker"), "{first}");
    let configured = root.read("/etc/docker/daemon.json");
    assert_eq!(
        configured,
        "{\n    \"log-driver\": \"journald\",\n    \"storage-driver\": \"overlay2\",\n    \"runtimes\": {\n        \"oci-tmpfs\": {\n            \"path\": \"/usr/local/bin/oci-tmpfs-runtime\"\n        }\n    }\n}\n"
    );
    assert_eq!(root.read("/etc/docker/daemon.json.bak-oci-tmpfs-hook"), original);
    assert_eq!(fs::metadata(&path).unwrap().permissions().mode() & 0o7777, 0o640, "mode kept");

    let tree = root.tree();
    let second = assert_ok(&setup(&root, &["docker"]));
    assert!(second.contains("already set up; unchanged"), "{second}");
    assert!(!second.contains("systemctl restart"), "{second}");
    assert_eq!(root.tree(), tree, "second run changes nothing");

    let undo = assert_ok(&setup(&root, &["docker", "--undo"]));
    assert!(undo.contains("docker: updated"), "{undo}");
    assert_eq!(root.read("/etc/docker/daemon.json"), original, "undo restores the bytes");
    let again = assert_ok(&setup(&root, &["docker", "--undo"]));
    assert!(again.contains("has no registration; unchanged"), "{again}");
}

#[test]
fn docker_default_and_dry_run_writes_nothing() {
    let root = Root::new("docker-dry");
    root.write("/etc/docker/daemon.json", "{\"debug\": true}\n");
    let before = root.tree();
    let out = assert_ok(&setup(&root, &["docker", "--default", "--dry-run"]));
    assert!(out.contains("would update"), "{out}");
    assert!(out.contains("-{\"debug\": true}"), "diff shows the old line: {out}");
    assert!(out.contains("+{\"debug\":true,\"runtimes\":{\"oci-tmpfs\":{\"path\":\"/usr/local/bin/oci-tmpfs-runtime\"}},\"default-runtime\":\"oci-tmpfs\"}"), "{out}");
    assert!(out.contains("dry run: nothing written"), "{out}");
    assert_eq!(root.tree(), before, "dry run wrote nothing");

    assert_ok(&setup(&root, &["docker", "--default"]));
    assert_eq!(
        root.read("/etc/docker/daemon.json"),
        "{\"debug\":true,\"runtimes\":{\"oci-tmpfs\":{\"path\":\"/usr/local/bin/oci-tmpfs-runtime\"}},\"default-runtime\":\"oci-tmpfs\"}\n"
    );
    assert_ok(&setup(&root, &["docker", "--undo"]));
    assert_eq!(root.read("/etc/docker/daemon.json"), "{\"debug\":true}\n");
}

#[test]
fn malformed_configs_are_refused_with_file_and_line() {
    let root = Root::new("bad");
    let bad_json = "{\n  \"debug\": true,\n  \"runtimes\": {\n}\n";
    root.write("/etc/docker/daemon.json", bad_json);
    let bad_toml = "version = 2\n# comment\n[plugins.\"io.containerd.grpc.v1.cri\"\nx = 1\n";
    root.write("/etc/containerd/config.toml", bad_toml);
    let before = root.tree();
    for (engine, file, line) in [("docker", "daemon.json", "line 5"), ("containerd", "config.toml", "line 3")]
    {
        let out = setup(&root, &[engine]);
        assert_eq!(out.status.code(), Some(1), "{engine}: {out:?}");
        let err = text(&out.stderr);
        assert!(err.contains(file) && err.contains(line), "{engine}: {err}");
        assert_eq!(err.lines().count(), 1, "one line: {err}");
    }
    assert_eq!(root.tree(), before, "nothing written");
}

#[test]
fn containerd_keeps_comments_and_undo_restores() {
    let root = Root::new("containerd");
    let original = "# containerd config, managed by hand\nversion = 2\nroot = \"/var/lib/containerd\" # big disk\n\n[plugins]\n  [plugins.\"io.containerd.grpc.v1.cri\"]\n    sandbox_image = \"registry.k8s.io/pause:3.6\" # pinned\n    [plugins.\"io.containerd.grpc.v1.cri\".cni]\n      bin_dir = \"/usr/lib/cni\"\n";
    root.write("/etc/containerd/config.toml", original);
    let out = assert_ok(&setup(&root, &["containerd"]));
    assert!(out.contains("systemctl restart containerd"), "{out}");
    let configured = root.read("/etc/containerd/config.toml");
    assert!(configured.starts_with(original), "everything before is kept verbatim:\n{configured}");
    assert!(configured.contains(
        "[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.oci-tmpfs.options]\nBinaryName = \"/usr/local/bin/oci-tmpfs-runtime\"\n"
    ));
    assert_eq!(root.read("/etc/containerd/config.toml.bak-oci-tmpfs-hook"), original);
    let tree = root.tree();
    assert!(assert_ok(&setup(&root, &["containerd"])).contains("unchanged"));
    assert_eq!(root.tree(), tree);
    assert_ok(&setup(&root, &["containerd", "--undo"]));
    assert_eq!(root.read("/etc/containerd/config.toml"), original);
}

#[test]
fn podman_and_crio_hooks_json() {
    let root = Root::new("hooks");
    let out = assert_ok(&setup(&root, &["podman"]));
    assert!(!out.contains("restart"), "podman needs no restart: {out}");
    let expected = "{\n  \"version\": \"1.0.0\",\n  \"hook\": {\n    \"path\": \"/usr/local/bin/oci-tmpfs-hook\",\n    \"args\": [\n      \"oci-tmpfs-hook\",\n      \"hook\",\n      \"--stage\",\n      \"prestart\"\n    ],\n    \"env\": [\n      \"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\"\n    ]\n  },\n  \"when\": {\n    \"always\": true\n  },\n  \"stages\": [\n    \"prestart\"\n  ]\n}\n";
    assert_eq!(root.read("/usr/share/containers/oci/hooks.d/oci-tmpfs-hook.json"), expected);

    root.write("/etc/crio/crio.conf", "[crio.runtime]\nhooks_dir = [\"/etc/containers/oci/hooks.d\"]\n");
    let out = assert_ok(&setup(&root, &["crio"]));
    assert!(
        out.contains("crio: no restart needed: CRI-O watches its hooks dirs") && !out.contains("systemctl"),
        "{out}"
    );
    assert_eq!(root.read("/etc/containers/oci/hooks.d/oci-tmpfs-hook.json"), expected);

    let custom = root.path("/custom");
    let custom_arg = custom.display().to_string();
    assert_ok(&setup(&root, &["podman", "--hooks-dir", &custom_arg]));
    assert_eq!(fs::read_to_string(custom.join("oci-tmpfs-hook.json")).unwrap(), expected);

    assert_ok(&setup(&root, &["podman", "--undo"]));
    assert!(!root.path("/usr/share/containers/oci/hooks.d/oci-tmpfs-hook.json").exists());
}

#[test]
fn setup_usage_errors() {
    let root = Root::new("usage");
    let out = setup(&root, &["podman", "--daemon-json", "/x"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let out = run(&hook_bin(), &["setup", "docker", "--hook-path", "relative/bin"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let out = run(&hook_bin(), &["setup", "kubernetes"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
}

fn install(dest: Option<&Root>, args: &[&str]) -> Output {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("install.sh");
    let mut cmd = Command::new("bash");
    cmd.arg(script).args(args).env("OCI_TMPFS_HOOK_BINARY", hook_bin()).stdin(Stdio::null());
    match dest {
        Some(d) => cmd.env("DESTDIR", &d.0),
        None => cmd.env_remove("DESTDIR"),
    };
    cmd.output().expect("running install.sh")
}

#[test]
fn install_dry_run_changes_nothing() {
    let dest = Root::new("install-dry");
    let out = install(Some(&dest), &["--dry-run", "--engines", "docker,podman", "--prefix", "/usr"]);
    let stdout = assert_ok(&out);
    assert!(stdout.contains("+ install -D -m 0755"), "{stdout}");
    assert!(stdout.contains("+ ln -sfn oci-tmpfs-hook"), "{stdout}");
    assert!(stdout.contains("docker: would create"), "{stdout}");
    assert!(stdout.contains("podman: would create"), "{stdout}");
    assert!(stdout.contains("dry run: nothing changed"), "{stdout}");
    assert!(dest.tree().is_empty(), "{:?}", dest.tree());
    let bad = install(Some(&dest), &["--engines", "docker,kubernetes"]);
    assert_eq!(bad.status.code(), Some(2), "{bad:?}");
}

#[test]
fn install_destdir_then_doctor_then_uninstall() {
    let dest = Root::new("install");
    let out = install(Some(&dest), &["--engines", "docker,podman", "--prefix", "/usr"]);
    assert_ok(&out);
    let tree = dest.tree();
    let names: Vec<&str> = tree.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        [
            "etc/docker/daemon.json",
            "etc/oci-tmpfs-hook/config.toml",
            "usr/bin/oci-tmpfs-hook",
            "usr/bin/oci-tmpfs-runtime",
            "usr/share/containers/oci/hooks.d/oci-tmpfs-hook.json",
        ]
    );
    assert_eq!(tree["usr/bin/oci-tmpfs-runtime"], "-> oci-tmpfs-hook");
    assert_eq!(
        tree["etc/docker/daemon.json"],
        "{\n  \"runtimes\": {\n    \"oci-tmpfs\": {\n      \"path\": \"/usr/bin/oci-tmpfs-runtime\"\n    }\n  }\n}\n"
    );
    assert!(tree["usr/share/containers/oci/hooks.d/oci-tmpfs-hook.json"]
        .contains("\"path\": \"/usr/bin/oci-tmpfs-hook\""));
    assert_eq!(
        tree["etc/oci-tmpfs-hook/config.toml"],
        fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("hooks/config.toml")).unwrap()
    );
    assert_eq!(fs::read(dest.path("/usr/bin/oci-tmpfs-hook")).unwrap(), fs::read(hook_bin()).unwrap());

    // Idempotent.
    assert_ok(&install(Some(&dest), &["--engines", "docker,podman", "--prefix", "/usr"]));
    assert_eq!(dest.tree(), tree);

    // The installed binary's doctor, looking under DESTDIR, is content.
    let installed = dest.path("/usr/bin/oci-tmpfs-hook");
    let doctor = run(&installed, &["doctor", "--root", &dest.root_arg()]);
    let report = text(&doctor.stdout);
    assert!(
        report.contains("ok       docker: ") && report.contains("which resolves to this binary"),
        "{report}"
    );
    assert!(report.contains("runs this binary at prestart"), "{report}");
    if rustix::process::geteuid().is_root() {
        assert_eq!(doctor.status.code(), Some(0), "{report}");
        assert!(report.ends_with("all well\n"), "{report}");
    } else {
        // Without root, only the privilege-dependent checks may fail.
        assert_eq!(doctor.status.code(), Some(1), "{report}");
        for line in report.lines().filter(|l| l.starts_with("problem")) {
            assert!(line.contains("privileges") || line.contains("fsopen"), "{line}");
        }
    }
    // The test binary is not the installed one: doctor says so.
    let other = run(&hook_bin(), &["doctor", "--root", &dest.root_arg()]);
    assert_eq!(other.status.code(), Some(1), "{}", text(&other.stdout));
    assert!(text(&other.stdout).contains("not this binary"), "{}", text(&other.stdout));

    let out = install(Some(&dest), &["--uninstall", "--engines", "docker,podman", "--prefix", "/usr"]);
    assert_ok(&out);
    assert!(dest.tree().is_empty(), "uninstall leaves no file: {:?}", dest.tree());
}

/// Every container start runs the installed binary (the hook, the
/// wrapper), so re-running install.sh on a busy host must leave each start
/// the old binary or the new one, never a missing or half-written file.
/// Twenty installs alternate two different binaries (the second is the
/// first with four bytes appended, so each install replaces the file) while
/// a shell runs the installed binary in a loop: no run may fail.
#[test]
fn reinstalling_never_fails_a_start_that_runs_the_binary() {
    let dest = Root::new("install-race");
    let first = hook_bin();
    let mut bytes = fs::read(&first).unwrap();
    bytes.extend_from_slice(&[0; 4]);
    let second = dest.path("/other/oci-tmpfs-hook");
    fs::create_dir_all(second.parent().unwrap()).unwrap();
    fs::write(&second, bytes).unwrap();
    fs::set_permissions(&second, fs::Permissions::from_mode(0o755)).unwrap();
    let args = |bin: &Path| {
        ["--engines", "none", "--prefix", "/usr", "--binary", bin.to_str().unwrap()].map(String::from)
    };
    let install_with = |bin: &Path| {
        let args = args(bin);
        assert_ok(&install(Some(&dest), &args.iter().map(String::as_str).collect::<Vec<_>>()))
    };
    install_with(&first);
    let installed = dest.path("/usr/bin/oci-tmpfs-hook");
    let link = || {
        std::os::unix::fs::MetadataExt::ino(
            &fs::symlink_metadata(dest.path("/usr/bin/oci-tmpfs-runtime")).unwrap(),
        )
    };
    let link_before = link();

    // The runs are a shell's children, not this process's: a fork of the
    // test process would inherit, for a moment, a file another test is
    // writing (a bundle's busybox), and that test's container could then
    // fail to exec it (ETXTBSY).
    let stop = dest.path("/stop");
    let script = format!(
        "ok=0 failed=0; while [ ! -e '{}' ]; do if '{}' --version >/dev/null 2>&1; then ok=$((ok+1)); else failed=$((failed+1)); fi; done; echo $ok $failed",
        stop.display(),
        installed.display()
    );
    let runner =
        Command::new("sh").args(["-c", &script]).stdin(Stdio::null()).stdout(Stdio::piped()).spawn().unwrap();
    for round in 0..20 {
        let out = install_with(if round % 2 == 0 { &second } else { &first });
        assert!(out.contains("installed"), "{out}");
    }
    fs::write(&stop, "").unwrap();
    let counts = text(&runner.wait_with_output().unwrap().stdout);
    let [runs, failed]: [u32; 2] =
        counts.split_whitespace().map(|n| n.parse().unwrap()).collect::<Vec<_>>().try_into().unwrap();
    assert_eq!(failed, 0, "runs failed during the installs ({runs} ran)");
    assert!(runs >= 20, "the runs overlapped the installs: {runs} runs");
    assert_eq!(
        fs::read(&installed).unwrap(),
        fs::read(&first).unwrap(),
        "the last install's binary is in place"
    );
    let left: Vec<_> = fs::read_dir(dest.path("/usr/bin")).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left.len(), 2, "the binary and the wrapper link, no staged file: {left:?}");
    assert_eq!(link(), link_before, "the wrapper link, right already, is left alone");
    // The same binary again is left in place: nothing for a start to race.
    let out = install_with(&first);
    assert!(out.contains("keeping") && out.contains("the same binary"), "{out}");
}

#[test]
fn doctor_reports_problems_with_fixes() {
    let root = Root::new("doctor");
    root.write(
        "/etc/docker/daemon.json",
        "{\"runtimes\": {\"oci-tmpfs\": {\"path\": \"/nonexistent/oci-tmpfs-runtime\"}}}",
    );
    root.write("/etc/containerd/config.toml", "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.other]\nruntime_type = \"io.containerd.runc.v2\"\n");
    root.write("/etc/oci-tmpfs-hook/config.toml", "tmp_size = \"2Gi\"\nruntime_path = \"/usr/sbin/runc\"\n");
    let out = run(&hook_bin(), &["doctor", "--root", &root.root_arg()]);
    let report = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{report}");
    assert!(
        report.contains("config.toml parsed\n         tmp_size = 2Gi\n         shm_size = 50%"),
        "{report}"
    );
    let problem = |needle: &str| {
        report.lines().any(|l| l.starts_with("problem") && l.contains(needle) && l.contains("; fix: "))
    };
    assert!(problem("runtime oci-tmpfs: "), "{report}");
    assert!(
        problem("has no plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.oci-tmpfs"),
        "{report}"
    );
    assert!(problem("default_runtime_name \"runc\" is not among the configured runtimes"), "{report}");
    assert!(problem("runtime_path /usr/sbin/runc does not exist"), "{report}");

    root.write("/etc/oci-tmpfs-hook/config.toml", "tmp_size = \"lots\"\n");
    let out = run(&hook_bin(), &["doctor", "--root", &root.root_arg()]);
    assert!(text(&out.stdout).lines().any(|l| l.starts_with("problem  config:")), "{}", text(&out.stdout));
}

/// Debian's packaged `/etc/containerd/config.toml` (bookworm's 1.6 and sid's
/// 2.1 ship the same version 2 file); the installed one when present.
const DEBIAN_CONTAINERD: &str = "version = 2\n\n[plugins]\n  [plugins.\"io.containerd.grpc.v1.cri\"]\n    [plugins.\"io.containerd.grpc.v1.cri\".cni]\n      bin_dir = \"/usr/lib/cni\"\n      conf_dir = \"/etc/cni/net.d\"\n  [plugins.\"io.containerd.internal.v1.opt\"]\n    path = \"/var/lib/containerd/opt\"\n";

/// `containerd --version`, e.g. `containerd 2.1.9+unknown` or `containerd github.com/containerd/containerd 1.6.20~ds1`.
fn containerd_version(containerd: &Path) -> String {
    let out = Command::new(containerd).arg("--version").output().expect("containerd --version");
    text(&out.stdout).trim().to_string()
}

/// The table at `path` in a parsed TOML document.
fn toml_at<'a>(v: &'a toml::Value, path: &[&str]) -> Option<&'a toml::Value> {
    path.iter().try_fold(v, |v, k| v.get(*k))
}

/// Puts this daemon's root, state, sockets and plugin dirs under `root`
/// (so it collides with no other containerd on the machine), whatever the
/// file's version and layout.
fn privatise_containerd_config(config: &Path, root: &Root) -> PathBuf {
    let mut doc: toml_edit::DocumentMut = fs::read_to_string(config).unwrap().parse().unwrap();
    let p = |rel: &str| root.path(rel).display().to_string();
    let sock = root.path("/run/c.sock");
    doc["root"] = toml_edit::value(p("/var/lib/containerd"));
    doc["state"] = toml_edit::value(p("/run/containerd"));
    let (grpc, ttrpc) = (sock.display().to_string(), format!("{}.ttrpc", sock.display()));
    // Config version 4 (containerd 2.3) keeps the sockets in the server
    // plugins' tables; older versions at the top.
    let v4 = doc.get("version").and_then(toml_edit::Item::as_integer).is_some_and(|v| v >= 4);
    if !v4 {
        doc["grpc"]["address"] = toml_edit::value(&grpc);
        doc["ttrpc"]["address"] = toml_edit::value(&ttrpc);
    }
    if let Some(plugins) = doc.get_mut("plugins").and_then(|t| t.as_table_like_mut()) {
        for (plugin, address) in
            [("io.containerd.server.v1.grpc", &grpc), ("io.containerd.server.v1.ttrpc", &ttrpc)]
        {
            if let Some(server) = plugins.get_mut(plugin) {
                server["address"] = toml_edit::value(address.as_str());
            }
        }
        // Default configs name host paths for these plugins.
        if let Some(opt) = plugins.get_mut("io.containerd.internal.v1.opt") {
            opt["path"] = toml_edit::value(p("/opt"));
        }
        if let Some(nri) = plugins.get_mut("io.containerd.nri.v1.nri") {
            nri["socket_path"] = toml_edit::value(p("/run/nri.sock"));
            nri["plugin_path"] = toml_edit::value(p("/nri/plugins"));
            nri["plugin_config_path"] = toml_edit::value(p("/nri/conf.d"));
        }
    }
    fs::write(config, doc.to_string()).unwrap();
    sock
}

/// containerd itself loads what `setup containerd` wrote, starting from no
/// file, from Debian's packaged file and from `containerd config default`
/// (version 2 on 1.6, 3 on 2.1, 4 on 2.3; 2.x migrates an older file on
/// load): `containerd config dump` shows our runtime with its `BinaryName`
/// under the CRI runtime plugin of the version it runs, and the CRI plugin
/// comes up with it (it would not without the added runc entry, see
/// `marked_runc` in src/engine/containerd.rs).
#[test]
fn real_containerd_loads_the_setup_config() {
    require_root();
    // Debian's, or another build (tests/run.sh runs this again on 2.3.4).
    let containerd = std::env::var_os("OCI_TMPFS_HOOK_NRI_CONTAINERD")
        .map_or_else(|| PathBuf::from("/usr/bin/containerd"), PathBuf::from);
    let containerd = containerd.as_path();
    assert!(containerd.exists(), "{} is not installed (.ci/run installs it)", containerd.display());
    let version = containerd_version(containerd);
    println!("containerd: {version}");
    let default = Command::new(containerd).args(["config", "default"]).output().unwrap();
    let default = assert_ok(&default);
    // The host's file as Debian ships it; once `./install.sh` (the README's
    // first command) has set it up, Debian's text as it was before that.
    let debian = fs::read_to_string("/etc/containerd/config.toml")
        .ok()
        .filter(|t| !t.contains("oci-tmpfs"))
        .unwrap_or_else(|| DEBIAN_CONTAINERD.into());
    for (start, original) in [
        ("no file", None),
        ("Debian's file", Some(debian.as_str())),
        ("config default", Some(default.as_str())),
    ] {
        let what = format!("{version}, setup containerd from {start}");
        real_containerd_case(containerd, &what, original);
    }
}

fn real_containerd_case(containerd: &Path, what: &str, original: Option<&str>) {
    let root = Root::new("ctd");
    if let Some(text) = original {
        root.write("/etc/containerd/config.toml", text);
    }
    let out = assert_ok(&setup(&root, &["containerd"]));
    assert!(out.contains("systemctl restart containerd"), "{what}: {out}");
    let config = root.path("/etc/containerd/config.toml");
    let written = fs::read_to_string(&config).unwrap();
    let sock = privatise_containerd_config(&config, &root);

    let dump =
        Command::new(containerd).arg("--config").arg(&config).args(["config", "dump"]).output().unwrap();
    let dump = assert_ok(&dump);
    let parsed: toml::Value =
        toml::from_str(&dump).unwrap_or_else(|e| panic!("{what}: config dump is not TOML: {e}\n{dump}"));
    let runtimes = ["io.containerd.cri.v1.runtime", "io.containerd.grpc.v1.cri"]
        .iter()
        .find_map(|plugin| toml_at(&parsed, &["plugins", plugin, "containerd", "runtimes"]))
        .unwrap_or_else(|| panic!("{what}: no CRI runtimes in config dump:\n{dump}"));
    let ours =
        toml_at(runtimes, &["oci-tmpfs"]).unwrap_or_else(|| panic!("{what}: no oci-tmpfs runtime:\n{dump}"));
    assert_eq!(
        toml_at(ours, &["options", "BinaryName"]).and_then(|v| v.as_str()),
        Some("/usr/local/bin/oci-tmpfs-runtime"),
        "{what}: BinaryName in config dump:\n{dump}"
    );
    assert_eq!(
        toml_at(ours, &["runtime_type"]).and_then(|v| v.as_str()),
        Some("io.containerd.runc.v2"),
        "{what}"
    );
    let annotations = |key: &str| {
        toml_at(ours, &[key])
            .and_then(|v| v.as_array())
            .cloned()
            .unwrap_or_else(|| panic!("{what}: no {key} array: {dump}"))
    };
    assert!(
        annotations("pod_annotations").iter().any(|v| v.as_str() == Some("oci-tmpfs-hook/*")),
        "{what}: {dump}"
    );
    assert!(
        annotations("container_annotations").iter().any(|v| v.as_str() == Some("oci-tmpfs-hook/*")),
        "{what}"
    );
    if original.is_some_and(|o| o.contains("bin_dir = \"/usr/lib/cni\"")) {
        // 1.6 keeps `bin_dir`; 2.x migrates it to `bin_dirs`.
        assert!(
            dump.contains("bin_dir = \"/usr/lib/cni\"") || dump.contains("bin_dirs = ['/usr/lib/cni']"),
            "{what}: Debian's setting kept: {dump}"
        );
    }

    let log = fs::File::create(root.path("/containerd.log")).unwrap();
    let mut daemon = Command::new(containerd)
        .arg("--config")
        .arg(&config)
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap();
    struct Kill<'a>(&'a mut std::process::Child);
    impl Drop for Kill<'_> {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let _guard = Kill(&mut daemon);
    let deadline = Instant::now() + Duration::from_secs(30);
    let plugins = loop {
        let out = Command::new("ctr").arg("--address").arg(&sock).args(["plugins", "ls"]).output().unwrap();
        let listing = text(&out.stdout);
        if out.status.success() && listing.contains("io.containerd.grpc.v1") {
            break listing;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: containerd did not come up: {}",
            root.read("/containerd.log")
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    let cri =
        plugins.lines().find(|l| l.contains("io.containerd.grpc.v1") && l.contains(" cri ")).unwrap_or("");
    assert!(
        cri.trim_end().ends_with("ok"),
        "{what}: CRI plugin: {cri:?}\n{plugins}\nwritten:\n{written}\nlog:\n{}",
        root.read("/containerd.log")
    );
    // The CRI config it runs, as it logs it: Go's %+v on 1.6, JSON on 2.x.
    let log = root.read("/containerd.log");
    let (runtime, annotations) = if log.contains("msg=\"starting cri plugin\" config=\"{") {
        (
            r#"\"oci-tmpfs\":{\"runtimeType\":\"io.containerd.runc.v2\""#,
            r#"\"PodAnnotations\":[\"oci-tmpfs-hook/*\"]"#,
        )
    } else {
        ("oci-tmpfs:{Type:io.containerd.runc.v2", "PodAnnotations:[oci-tmpfs-hook/*]")
    };
    assert!(log.contains(runtime), "{what}: the CRI config it runs lists our runtime ({runtime}): {log}");
    assert!(log.contains(annotations), "{what}: annotations pass through ({annotations}): {log}");
}

/// dockerd itself loads what `setup docker --default` wrote: `docker info`
/// lists the runtime and names it the default.
#[test]
fn real_dockerd_loads_the_setup_daemon_json() {
    require_root();
    let dockerd = Path::new("/usr/sbin/dockerd");
    assert!(dockerd.exists(), "dockerd is not installed (.ci/run installs docker.io)");
    let root = Root::new("dockerd");
    let wrapper = root.path("/bin/oci-tmpfs-runtime");
    fs::create_dir_all(wrapper.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(hook_bin(), &wrapper).unwrap();
    let config = root.write("/etc/docker/daemon.json", "{\n  \"log-level\": \"warn\"\n}\n");
    let wrapper_arg = wrapper.display().to_string();
    let out = run(
        &hook_bin(),
        &[
            "setup",
            "docker",
            "--default",
            "--daemon-json",
            &config.display().to_string(),
            "--runtime-path",
            &wrapper_arg,
        ],
    );
    assert_ok(&out);
    let d = Dockerd::launch(&root.0, &config, DockerdOptions::default());
    let info = ok(d.docker().arg("info"));
    let runtimes = info.lines().find(|l| l.trim_start().starts_with("Runtimes:")).unwrap_or("");
    assert!(runtimes.split_whitespace().any(|w| w == "oci-tmpfs"), "{info}");
    assert!(info.contains("Default Runtime: oci-tmpfs"), "{info}");
}
