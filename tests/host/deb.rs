//! The Debian package (docs/engines.md#the-debian-package), for real but in a
//! Debian root of its own (tests/env/pkgroot.sh: a cached bookworm minbase
//! root with runc, under an overlay per test, entered with unshare and
//! pivot_root), so a host that already has the product (./install.sh wrote
//! /etc/oci-tmpfs-hook) is neither refused nor touched. Built by
//! packaging/deb/build.sh around the static binary, lintian clean (its
//! overrides explained in packaging/deb/lintian-overrides); then, in the
//! root: `dpkg -i`, `oci-tmpfs-hook doctor`, a runc container whose prestart
//! hook is the one in the installed hooks JSON, `dpkg -r` (the conffile
//! stays), `dpkg -P`: every path of the package and every `*oci-tmpfs*` name
//! under /usr, /etc and dpkg's database is byte for byte as it was before,
//! and the overlay's upper layer shows nothing else changed but dpkg's own
//! records. The package edits no engine config (its postinst only prints the
//! setup commands).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Instant;

use crate::support::kube::*;
use crate::support::*;
use serde_json::{json, Value};

const PKG: &str = "oci-tmpfs-hook";

/// The package test's root: tests/env/pkgroot.sh's cached Debian root under
/// an overlay whose upper layer (and so every write) is this test's own.
/// Dropping it drops the layer: the cached root is never written.
struct Root {
    layer: TempDir,
    binds: Vec<PathBuf>,
}

impl Root {
    /// Builds (or finds cached) the root; `binds` are host paths the root
    /// sees at the same path (the .deb, the bundle).
    fn new(binds: &[&Path]) -> Root {
        let started = Instant::now();
        ok(Command::new(script()).arg("build"));
        say(&format!("deb: the package root (tests/env/pkgroot.sh build) in {:.0?}", started.elapsed()));
        Root { layer: TempDir::new("deb-root"), binds: binds.iter().map(|p| p.to_path_buf()).collect() }
    }

    /// `args` run inside the root.
    fn cmd(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(script());
        let binds: Vec<String> = self.binds.iter().map(|p| p.display().to_string()).collect();
        cmd.env("OCI_TMPFS_PKGROOT_BINDS", binds.join(" "))
            .arg("run")
            .arg("--layer")
            .arg(&self.layer.0)
            .arg("--")
            .args(args);
        cmd
    }

    fn output(&self, args: &[&str]) -> Output {
        output(&mut self.cmd(args))
    }

    /// Runs `args` in the root; its stdout, or a panic with both streams.
    fn ok(&self, args: &[&str]) -> String {
        ok(&mut self.cmd(args))
    }

    fn exists(&self, path: &str) -> bool {
        self.output(&["test", "-e", path]).status.success()
    }

    /// What is at each watched path in the root: the package's paths and
    /// every `*oci-tmpfs*` name under /usr, /etc and dpkg's info dir; a
    /// file by its size and SHA-256.
    fn watched(&self, package_paths: &[PathBuf]) -> BTreeMap<PathBuf, String> {
        const SCRIPT: &str = r#"{ for p in "$@"; do echo "$p"; done
  find /usr /etc /var/lib/dpkg/info -xdev -name '*oci-tmpfs*'; } | LC_ALL=C sort -u | while read -r p; do
  if [ -L "$p" ]; then echo "$p	link $(readlink "$p")"
  elif [ -d "$p" ]; then echo "$p	dir"
  elif [ -e "$p" ]; then echo "$p	file $(stat -c %s "$p") bytes sha256 $(sha256sum <"$p" | cut -d' ' -f1)"
  else echo "$p	absent"; fi
done"#;
        let mut args = vec!["sh", "-c", SCRIPT, "sh"];
        args.extend(package_paths.iter().map(|p| p.to_str().unwrap()));
        self.ok(&args)
            .lines()
            .filter_map(|l| l.split_once('\t'))
            .map(|(p, what)| (PathBuf::from(p), what.to_string()))
            .collect()
    }

    /// Every entry of the overlay's upper layer: what the test changed in
    /// the root (a whiteout is a deletion).
    fn changes(&self) -> Vec<PathBuf> {
        let upper = self.layer.join("upper");
        let found = ok(Command::new("find").arg(&upper).args(["-mindepth", "1", "-not", "-type", "d"]));
        found.lines().map(|l| PathBuf::from(l.strip_prefix(upper.to_str().unwrap()).unwrap())).collect()
    }

    /// After `dpkg -P`: nothing changed in the root but dpkg's log, locks
    /// and backup, and its status file is byte for byte the cached root's.
    fn assert_only_dpkg_records_changed(&self) {
        let changes = self.changes();
        say(&format!("deb: the root's changes after dpkg -P: {changes:?}"));
        let records = [
            "/var/log/dpkg.log",
            "/var/lib/dpkg/lock",
            "/var/lib/dpkg/lock-frontend",
            "/var/lib/dpkg/triggers/Lock",
            "/var/lib/dpkg/status-old",
            "/var/lib/dpkg/status",
        ];
        let other: Vec<&PathBuf> =
            changes.iter().filter(|p| !records.iter().any(|r| Path::new(r) == *p)).collect();
        assert!(other.is_empty(), "dpkg -P left changes in the root: {other:?}");
        let lower = PathBuf::from(ok(Command::new(script()).arg("path")).trim()).join("var/lib/dpkg/status");
        // (Read from the upper layer, where dpkg's rewrite of it went: a `cat`
        // in the root would outgrow the pipe that `output` reads only at exit.)
        let upper = self.layer.join("upper/var/lib/dpkg/status");
        let status_now = std::fs::read(&upper).unwrap_or_else(|e| panic!("reading {}: {e}", upper.display()));
        assert!(
            std::fs::read(&lower).unwrap() == status_now,
            "dpkg -P left the root's /var/lib/dpkg/status different from {}",
            lower.display()
        );
    }
}

/// The host's side of "untouched": what is at the package's paths and at
/// every `*oci-tmpfs*` name under /usr, /etc and dpkg's info dir (what
/// ./install.sh put there included).
fn host_watched(package_paths: &[PathBuf]) -> BTreeMap<PathBuf, String> {
    let mut paths: Vec<PathBuf> = package_paths.to_vec();
    let found = ok(Command::new("find").args([
        "/usr",
        "/etc",
        "/var/lib/dpkg/info",
        "-xdev",
        "-name",
        "*oci-tmpfs*",
    ]));
    paths.extend(found.lines().map(PathBuf::from));
    paths
        .into_iter()
        .map(|p| {
            let what = match std::fs::symlink_metadata(&p) {
                Err(_) => "absent".to_string(),
                Ok(m) if m.file_type().is_symlink() => format!("link {:?}", std::fs::read_link(&p).unwrap()),
                Ok(m) if m.is_dir() => "dir".to_string(),
                Ok(_) => format!("file {:?}", std::fs::read(&p).map(|b| b.len())),
            };
            (p, what)
        })
        .collect()
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/env/pkgroot.sh")
}

/// A runc container in the root whose prestart hook is the one in the
/// installed hooks JSON, as Podman would register it: /tmp is our tmpfs.
fn runc_with_the_installed_hook(root: &Root, bundle: &mut Bundle) {
    let json: Value =
        serde_json::from_str(&root.ok(&["cat", "/usr/share/containers/oci/hooks.d/oci-tmpfs-hook.json"]))
            .expect("the hooks JSON");
    bundle.script(SHOW_MOUNTS);
    bundle.config["hooks"] = json!({ "prestart": [json["hook"].clone()] });
    bundle.write();
    let id = unique("c");
    let run = root.output(&[
        "sh",
        "-c",
        r#"runc run --bundle "$1" "$2" </dev/null; rc=$?; runc delete --force "$2" 2>/dev/null; exit $rc"#,
        "sh",
        bundle.dir.to_str().unwrap(),
        &id,
    ]);
    assert!(
        run.status.success(),
        "runc run in the package root: {:?}\nstdout:\n{}\nstderr:\n{}",
        run.status,
        text(&run.stdout),
        text(&run.stderr)
    );
    let tmp = mount_at(&parse_mountinfo(&text(&run.stdout)), "/tmp").cloned();
    say(&format!("deb: runc container, /tmp: {tmp:?}"));
    assert!(
        tmp.is_some_and(|m| m.source == "oci-tmpfs-hook" && m.fstype == "tmpfs"),
        "{}",
        text(&run.stdout)
    );
}

#[test]
fn deb_installs_runs_a_container_and_purges_to_nothing() {
    require_root();
    let started = Instant::now();
    let out_dir = TempDir::new("deb");
    let build_sh = Path::new(env!("CARGO_MANIFEST_DIR")).join("packaging/deb/build.sh");
    let built = ok(Command::new(&build_sh).arg("--binary").arg(static_binary()).arg("--out").arg(&out_dir.0));
    let deb = PathBuf::from(built.lines().last().expect("build.sh prints the .deb"));
    let lintian = output(Command::new("lintian").arg(&deb));
    say(&format!(
        "deb: lintian: exit {:?}\n{}{}",
        lintian.status.code(),
        text(&lintian.stdout),
        text(&lintian.stderr)
    ));
    assert!(lintian.status.success() && !text(&lintian.stdout).contains("E: "), "lintian");
    let listing = ok(Command::new("dpkg-deb").arg("-c").arg(&deb));
    let package_paths: Vec<PathBuf> = listing
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .map(|p| PathBuf::from(p.trim_start_matches('.').trim_end_matches('/')))
        .filter(|p| p.as_os_str().len() > 1)
        .collect();

    let host_before = host_watched(&package_paths);

    let mut bundle = Bundle::new("deb-runc");
    let root = Root::new(&[&out_dir.0, &bundle.dir]);
    let status = root.output(&["dpkg-query", "-W", "-f", "${Status}", PKG]);
    assert!(!text(&status.stdout).contains("installed"), "{PKG} is already installed in the package root");
    for p in ["/etc/oci-tmpfs-hook", "/usr/bin/oci-tmpfs-hook"] {
        assert!(!root.exists(p), "{p} exists in the package root");
    }
    let before = root.watched(&package_paths);

    let installed = root.ok(&["dpkg", "-i", deb.to_str().unwrap()]);
    say(&format!("deb: dpkg -i:\n{installed}"));
    assert!(
        installed.contains("oci-tmpfs-hook setup containerd && systemctl restart containerd"),
        "{installed}"
    );
    let doctor = root.output(&["/usr/bin/oci-tmpfs-hook", "doctor"]);
    let report = text(&doctor.stdout);
    say(&format!(
        "deb: oci-tmpfs-hook doctor (exit {:?}):\n{report}{}",
        doctor.status.code(),
        text(&doctor.stderr)
    ));
    let hook_line =
        "ok       podman: /usr/share/containers/oci/hooks.d/oci-tmpfs-hook.json (Podman's hooks dirs) runs this binary at prestart";
    assert!(report.lines().any(|l| l == hook_line), "doctor: {report}");
    assert!(report.contains("ok       config: /etc/oci-tmpfs-hook/config.toml parsed"), "doctor: {report}");

    runc_with_the_installed_hook(&root, &mut bundle);

    root.ok(&["dpkg", "-r", PKG]);
    assert!(!root.exists("/usr/bin/oci-tmpfs-hook"), "dpkg -r left the binary");
    assert!(root.exists("/etc/oci-tmpfs-hook/config.toml"), "dpkg -r keeps the conffile");
    root.ok(&["dpkg", "-P", PKG]);
    let after = root.watched(&package_paths);
    let diff: Vec<String> = before
        .iter()
        .chain(after.iter())
        .filter(|(p, _)| before.get(*p) != after.get(*p))
        .map(|(p, _)| format!("{}: before {:?}, after {:?}", p.display(), before.get(p), after.get(p)))
        .collect();
    assert!(diff.is_empty(), "dpkg -P left differences:\n{}", diff.join("\n"));
    root.assert_only_dpkg_records_changed();
    // And the host is as it was: the product ./install.sh put there included.
    let host_after = host_watched(&package_paths);
    assert!(host_before == host_after, "the host changed:\nbefore {host_before:?}\nafter {host_after:?}");
    say(&format!("deb: PASS in {:.0?} ({} paths watched)", started.elapsed(), after.len()));
}
