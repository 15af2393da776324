//! The Debian package (issue 13), on this machine for real: built by
//! packaging/deb/build.sh around the static binary, lintian clean (its
//! overrides explained in packaging/deb/lintian-overrides), `dpkg -i`,
//! `oci-tmpfs-hook doctor`, a runc container whose prestart hook is the one
//! in the installed hooks JSON, `dpkg -r` (the conffile stays), `dpkg -P`:
//! every path of the package and every `*oci-tmpfs*` name under /usr, /etc
//! and dpkg's database is as it was before. The package edits no engine
//! config (its postinst only prints the setup commands), so nothing else
//! on the machine changes. A guard purges the package if the test fails.

mod common;
#[path = "node/harness.rs"]
mod harness;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use common::*;
use harness::*;
use serde_json::{json, Value};

const PKG: &str = "oci-tmpfs-hook";

/// dpkg ARGS, retried while another dpkg or apt holds the lock.
fn dpkg(args: &[&str]) -> Output {
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let out = output(Command::new("dpkg").args(args).env("DEBIAN_FRONTEND", "noninteractive"));
        let err = text(&out.stderr);
        if out.status.success() || !err.contains("lock") || Instant::now() > deadline {
            return out;
        }
        std::thread::sleep(Duration::from_secs(2));
    }
}

fn dpkg_ok(args: &[&str]) -> String {
    let out = dpkg(args);
    assert!(out.status.success(), "dpkg {args:?}: {}\n{}", text(&out.stdout), text(&out.stderr));
    text(&out.stdout)
}

/// Purges the package when the test ends, whatever happened.
struct Purge;

impl Drop for Purge {
    fn drop(&mut self) {
        let _ = dpkg(&["-P", PKG]);
    }
}

/// What is at each watched path: the package's paths and every
/// `*oci-tmpfs*` name under /usr, /etc and dpkg's info dir.
fn watched(package_paths: &[PathBuf]) -> BTreeMap<PathBuf, String> {
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
                Ok(m) => format!("file {} bytes", m.len()),
            };
            (p, what)
        })
        .collect()
}

#[test]
fn deb_installs_runs_a_container_and_purges_to_nothing() {
    require_root();
    let status = output(Command::new("dpkg-query").args(["-W", "-f", "${Status}", PKG]));
    assert!(
        !text(&status.stdout).contains("installed"),
        "{PKG} is already installed on this machine; dpkg -P it first"
    );
    for p in ["/etc/oci-tmpfs-hook", "/usr/bin/oci-tmpfs-hook"] {
        assert!(
            !Path::new(p).exists(),
            "{p} exists; this test installs the package for real: remove it first"
        );
    }
    let started = Instant::now();
    let out_dir = TempDir::new("deb");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("packaging/deb/build.sh");
    let built = ok(Command::new(&script).arg("--binary").arg(static_binary()).arg("--out").arg(&out_dir.0));
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
    let before = watched(&package_paths);

    let _purge = Purge;
    let installed = dpkg_ok(&["-i", deb.to_str().unwrap()]);
    say(&format!("deb: dpkg -i:\n{installed}"));
    assert!(
        installed.contains("oci-tmpfs-hook setup containerd && systemctl restart containerd"),
        "{installed}"
    );
    let doctor = output(Command::new("/usr/bin/oci-tmpfs-hook").arg("doctor"));
    let report = text(&doctor.stdout);
    say(&format!(
        "deb: oci-tmpfs-hook doctor (exit {:?}):\n{report}{}",
        doctor.status.code(),
        text(&doctor.stderr)
    ));
    let hook_line =
        "ok       podman: /usr/share/containers/oci/hooks.d/oci-tmpfs-hook.json runs this binary at prestart";
    assert!(report.lines().any(|l| l == hook_line), "doctor: {report}");
    assert!(report.contains("ok       config: /etc/oci-tmpfs-hook/config.toml parsed"), "doctor: {report}");

    // runc with the installed hook, as Podman would register it.
    let json: Value = serde_json::from_slice(
        &std::fs::read("/usr/share/containers/oci/hooks.d/oci-tmpfs-hook.json").expect("the hooks JSON"),
    )
    .unwrap();
    let mut bundle = Bundle::new("deb-runc");
    bundle.script(SHOW_MOUNTS);
    bundle.config["hooks"] = json!({ "prestart": [json["hook"].clone()] });
    bundle.write();
    let run = bundle.run(Runtime::Runc);
    run.assert_ok();
    let tmp = mount_at(&run.mounts(), "/tmp").cloned();
    say(&format!("deb: runc container, /tmp: {tmp:?}"));
    assert!(tmp.is_some_and(|m| m.source == "oci-tmpfs-hook" && m.fstype == "tmpfs"), "{}", run.stdout());

    dpkg_ok(&["-r", PKG]);
    assert!(!Path::new("/usr/bin/oci-tmpfs-hook").exists(), "dpkg -r left the binary");
    assert!(Path::new("/etc/oci-tmpfs-hook/config.toml").exists(), "dpkg -r keeps the conffile");
    dpkg_ok(&["-P", PKG]);
    let after = watched(&package_paths);
    let diff: Vec<String> = before
        .iter()
        .chain(after.iter())
        .filter(|(p, _)| before.get(*p) != after.get(*p))
        .map(|(p, _)| format!("{}: before {:?}, after {:?}", p.display(), before.get(p), after.get(p)))
        .collect();
    assert!(diff.is_empty(), "dpkg -P left differences:\n{}", diff.join("\n"));
    say(&format!("deb: PASS in {:.0?} ({} paths watched)", started.elapsed(), after.len()));
}
