//! `explain` says what the wrapper does: on the same bundles, the executor
//! and stage that `explain --json` gives each temp target are the ones the
//! wrapper (`oci-tmpfs-runtime create`, in spec and in hook mode) and
//! `inject --mode spec` write into `config.json`. The bundles cover the
//! other parties' hooks of the GPU suite (a CDI spec's `createRuntime` and
//! `createContainer` hooks as an engine puts them into the spec, the hooks
//! dir's vendor hooks after ours, NVIDIA's legacy `prestart` hook, Docker's
//! `libnetwork-setkey`), rootfs layouts (a plain `/tmp`, a nested
//! `TMPDIR=/tmp/job`, a second temp dir `TMPDIR=/var/tmp`, `/tmp` a symlink
//! to `/etc` or to `../var/tmp`, files in the image's `/tmp` (a `tmpcopyup`
//! entry where the runtime copies as the hook does), past the copy bounds
//! or holding a FIFO (the hook), a rootfs without `/etc/passwd` (`HOME=/`,
//! its caches under `/`), `HOME=/root` holding the image's dotfiles, a home
//! keeping an app, and another uid's home (its caches left alone; `HOME`
//! itself never a target); root's home is `/tmp` in the others), and
//! the runtime versions that move temp targets to the hook (runc before and
//! after 1.1.8, crun 1.29.0 and 1.29.1, youki, which is not known to copy
//! up: docs/design.md#runtimes). The
//! runtime is a script that answers `--version` as that release does and
//! creates nothing: what is checked is the wrapper's edit of the bundle.

use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use serde_json::{json, Value};

use crate::support::*;

/// Other parties' hooks, as a spec carries them.
fn hook_layouts(vendor: &str) -> Vec<(&'static str, Value)> {
    let h = |name: &str, way: &str| json!({"path": vendor, "args": ["vendor-hook", name, way, "/rootfs"]});
    vec![
        ("no hooks", json!(null)),
        (
            "a CDI spec's hooks (createRuntime host and ns, createContainer)",
            json!({
                "createRuntime": [h("cr-host-before", "host"), h("cr-ns-before", "ns")],
                "createContainer": [h("cc-before", "cc")],
            }),
        ),
        (
            "ours at createRuntime, the hooks dir's vendor hooks after it",
            json!({
                "createRuntime": [
                    {"path": hook_bin().display().to_string(), "args": ["oci-tmpfs-hook", "hook", "--stage", "createRuntime"]},
                    h("cr-host-after", "host"), h("cr-ns-after", "ns"),
                ],
                "createContainer": [h("cc-after", "ccw")],
            }),
        ),
        ("a createContainer hook only", json!({"createContainer": [h("update-ldcache", "cc")]})),
        (
            "NVIDIA's legacy prestart hook",
            json!({"prestart": [{"path": "/usr/bin/nvidia-container-runtime-hook", "args": ["nvidia-container-runtime-hook", "prestart"]}]}),
        ),
        (
            "Docker's libnetwork-setkey",
            json!({"prestart": [{"path": "/proc/1/exe", "args": ["libnetwork-setkey", "libnetwork-setkey", "-exec-root=/run/docker"]}]}),
        ),
    ]
}

/// Rootfs layouts: a name, the env entries, and what to make in the rootfs.
type Layout = (&'static str, &'static [&'static str], fn(&Path));

fn rootfs_layouts() -> Vec<Layout> {
    vec![
        ("a plain /tmp", &[], |_| {}),
        ("TMPDIR=/tmp/job, nested", &["TMPDIR=/tmp/job"], |_| {}),
        ("TMPDIR=/var/tmp, two tmpfs of ours in the image", &["TMPDIR=/var/tmp"], |_| {}),
        ("/tmp -> /etc, TMPDIR=/scratch", &["TMPDIR=/scratch"], |r| {
            std::fs::remove_dir(r.join("tmp")).unwrap();
            std::os::unix::fs::symlink("/etc", r.join("tmp")).unwrap();
        }),
        ("files in the image's /tmp (the hook copies them up)", &[], |r| {
            std::fs::write(r.join("tmp/.dotfile"), b"image").unwrap();
            std::fs::create_dir(r.join("tmp/sub")).unwrap();
        }),
        ("/tmp -> ../var/tmp", &[], |r| {
            std::fs::create_dir_all(r.join("var/tmp")).unwrap();
            std::fs::remove_dir(r.join("tmp")).unwrap();
            std::os::unix::fs::symlink("../var/tmp", r.join("tmp")).unwrap();
        }),
        ("no /etc/passwd: HOME=/, its caches under /", &[], |r| {
            std::fs::remove_file(r.join("etc/passwd")).unwrap();
        }),
        ("HOME=/root, holding the image's dotfile", &["HOME=/root"], |r| {
            std::fs::create_dir(r.join("root")).unwrap();
            std::fs::write(r.join("root/.profile"), b"image").unwrap();
        }),
        ("HOME=/root, holding .bashrc and .profile, files in /tmp: tmpcopyup", &["HOME=/root"], |r| {
            std::fs::create_dir(r.join("root")).unwrap();
            std::fs::write(r.join("root/.bashrc"), b"image").unwrap();
            std::fs::write(r.join("root/.profile"), b"image").unwrap();
            std::fs::write(r.join("tmp/.X0-lock"), b"image").unwrap();
        }),
        ("a 100 MiB sparse file in /tmp: past the bounds", &[], |r| {
            std::fs::File::create(r.join("tmp/.big")).unwrap().set_len(100 << 20).unwrap();
        }),
        ("a FIFO in /tmp", &[], |r| {
            let fifo = r.join("tmp/.fifo");
            assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        }),
        ("HOME=/srv/app keeping an app", &["HOME=/srv/app"], |r| {
            std::fs::create_dir_all(r.join("srv/app/.cache")).unwrap();
            std::fs::write(r.join("srv/app/main.py"), b"app").unwrap();
        }),
        ("HOME=/srv/bob, another uid's: its caches left alone", &["HOME=/srv/bob"], |r| {
            std::fs::create_dir_all(r.join("srv/bob")).unwrap();
            std::os::unix::fs::chown(r.join("srv/bob"), Some(1001), Some(1001)).unwrap();
        }),
    ]
}

/// The runtime releases: what `--version` prints.
const RUNTIMES: [&str; 5] = [
    "runc version 1.1.5",
    "runc version 1.3.6",
    "crun version 1.29",
    "crun version 1.29.1",
    "youki version 0.5.3",
];

/// What a bundle's `config.json` carries of ours after an executor ran:
/// the destinations of our tmpfs entries (not `/dev/shm`), and the stages
/// of our hook.
#[derive(Debug, PartialEq, Eq)]
struct Carried {
    spec: BTreeSet<String>,
    /// Those of `spec` the runtime copies up (`tmpcopyup`).
    copy_up: BTreeSet<String>,
    hook: BTreeSet<String>,
    /// The first `HOME=` of `process.env`.
    home: Option<String>,
}

/// The first `HOME=` of a config's `process.env`.
fn home_of(config: &Value) -> Option<String> {
    config["process"]["env"]
        .as_array()?
        .iter()
        .find_map(|e| e.as_str()?.strip_prefix("HOME=").map(String::from))
}

fn carried(bundle: &Path) -> Carried {
    let config: Value = serde_json::from_slice(&std::fs::read(bundle.join("config.json")).unwrap()).unwrap();
    let ours: Vec<&Value> = config["mounts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["source"] == "oci-tmpfs-hook" && m["destination"] != "/dev/shm")
        .collect();
    let dest = |m: &&Value| m["destination"].as_str().unwrap().to_string();
    let spec = ours.iter().map(dest).collect();
    let copy_up = ours
        .iter()
        .filter(|m| m["options"].as_array().unwrap().iter().any(|o| o == "tmpcopyup"))
        .map(dest)
        .collect();
    let ours = hook_bin().display().to_string();
    let hook = config["hooks"]
        .as_object()
        .into_iter()
        .flatten()
        .flat_map(|(stage, list)| list.as_array().unwrap().iter().map(move |h| (stage, h)))
        .filter(|(_, h)| h["path"] == ours.as_str())
        .map(|(stage, _)| stage.clone())
        .collect();
    Carried { spec, copy_up, hook, home: home_of(&config) }
}

/// What `explain --json` says the wrapper will carry, in the same terms.
/// `before`: the stages our hook already had in the bundle, `home` its HOME,
/// which every executor leaves as it is.
fn explained(doc: &Value, before: &BTreeSet<String>, home: Option<String>) -> Carried {
    let targets =
        doc["targets"].as_array().cloned().unwrap_or_else(|| panic!("explain has no targets list: {doc}"));
    let dest = |t: &Value| t["destination"].as_str().unwrap().to_string();
    let spec = targets.iter().filter(|t| t["executor"] == "spec").map(dest).collect();
    let copy_up =
        targets.iter().filter(|t| t["executor"] == "spec" && t["copy_up"] == true).map(dest).collect();
    let mut hook = before.clone();
    if doc["wrapper"]["executor"] == "hook" {
        hook.insert(doc["wrapper"]["stage"].as_str().unwrap().to_string());
    }
    for t in targets.iter().filter(|t| t["executor"] == "hook") {
        assert_eq!(t["stage"], doc["wrapper"]["stage"], "a target's stage is the wrapper's: {doc}");
    }
    // No executor sets HOME (docs/design.md#home-rule): the bundle's own.
    Carried { spec, copy_up, hook, home }
}

fn script(dir: &Path, name: &str, body: &str) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// What HOME's caches get, and what a `/tmp` holding entries gets
/// (docs/design.md#tmpcopyup), as `explain` says for one case: `HOME` is
/// never a target, its caches are where the image lets them be; with a
/// runtime that copies up and takes
/// our mounts, in spec mode with no other party's runtime-namespace hook,
/// `tmpcopyup` entries within the bounds, else the hook at `prestart`; two
/// temp dirs of ours in the image stay in the spec (docs/design.md#spec-race).
fn expect_copy_up(doc: &Value, case: &str, version: &str, mode: &str, hooks_name: &str, layout_name: &str) {
    let copies = ["runc version 1.3.6", "crun version 1.29.1"].contains(&version);
    let no_vendor = hooks_name == "no hooks" || hooks_name.contains("libnetwork");
    let wants = match layout_name {
        c if c.contains(": tmpcopyup") && copies => Some(("spec", "/tmp")),
        c if c.contains(": tmpcopyup") => Some(("hook", "")),
        c if c.contains("past the bounds") || c.contains("a FIFO") => Some(("hook", "")),
        c if c.contains("two tmpfs of ours") && copies => Some(("spec", "")),
        _ => None,
    };
    // What explain says HOME's caches get (docs/design.md#home-rule).
    let way = doc["plan"]["home"]["way"].as_str().unwrap_or("");
    let mounts = doc["plan"]["home"]["mounts"].as_array().map_or(0, Vec::len);
    let said = match layout_name {
        c if c.contains("its caches left alone") => way == "caches" && mounts == 0,
        c if c.starts_with("HOME=") || c.contains("HOME=/") => way == "caches" && mounts > 0,
        _ => true,
    };
    assert!(said, "{case}: explain's home: {}", doc["plan"]["home"]);
    let targets: Vec<&str> =
        doc["plan"]["actions"].as_array().unwrap().iter().filter_map(|a| a["target"].as_str()).collect();
    let home = doc["plan"]["home"]["home"].as_str().unwrap_or("");
    assert!(home.is_empty() || !targets.contains(&home), "{case}: HOME {home} is a target");
    let (Some((executor, copy_up)), "spec", true) = (wants, mode, no_vendor) else { return };
    assert_eq!(doc["wrapper"]["executor"], executor, "{case}: {doc}");
    let want: BTreeSet<String> = copy_up.split(", ").filter(|s| !s.is_empty()).map(String::from).collect();
    assert_eq!(want, explained(doc, &BTreeSet::new(), None).copy_up, "{case}: {doc}");
    if executor == "hook" {
        assert_eq!(doc["wrapper"]["stage"], "prestart", "{case}: {doc}");
    }
}

#[test]
fn explain_the_wrapper_and_inject_agree_on_every_route() {
    require_root();
    let dir = TempDir::new("routing");
    let template = Bundle::new("routing");
    let vendor = script(&dir, "vendor-hook", "exit 0");
    let wrapper = dir.join("oci-tmpfs-runtime");
    std::os::unix::fs::symlink(hook_bin(), &wrapper).unwrap();
    let mut seen = BTreeSet::new();
    let mut n = 0;
    for (r, version) in RUNTIMES.iter().enumerate() {
        let runtime = script(
            &dir,
            &format!("runtime-{r}"),
            &format!("[ \"$1\" = --version ] && {{ echo '{version}'; echo 'spec: 1.2.0'; }}; exit 0"),
        );
        for mode in ["spec", "hook"] {
            let config = dir.join(format!("config-{r}-{mode}.toml"));
            std::fs::write(&config, format!("mode = \"{mode}\"\nruntime_path = \"{}\"\n", runtime.display()))
                .unwrap();
            for (hooks_name, hooks) in hook_layouts(&vendor.display().to_string()) {
                for (layout_name, env, make) in rootfs_layouts() {
                    let case = format!("{version}, {mode} mode, {hooks_name}, {layout_name}");
                    // Three copies of one bundle: explain reads one, the
                    // wrapper and inject --mode spec each edit their own.
                    let bundles: Vec<_> = (0..3)
                        .map(|i| {
                            let b = dir.join(format!("b{n}-{i}"));
                            for d in ["bin", "proc", "sys", "dev", "etc", "tmp", "var"] {
                                std::fs::create_dir_all(b.join("rootfs").join(d)).unwrap();
                            }
                            std::fs::write(b.join("rootfs/etc/passwd"), "root:x:0:0:root:/tmp:/bin/sh\n")
                                .unwrap();
                            make(&b.join("rootfs"));
                            let mut c = template.config.clone();
                            for e in env {
                                c["process"]["env"].as_array_mut().unwrap().push(json!(e));
                            }
                            if !hooks.is_null() {
                                c["hooks"] = hooks.clone();
                            }
                            std::fs::write(b.join("config.json"), serde_json::to_vec_pretty(&c).unwrap())
                                .unwrap();
                            b
                        })
                        .collect();
                    n += 1;
                    let before = carried(&bundles[0]);
                    let out = ok(Command::new(hook_bin())
                        .args(["explain", "--json", "--config"])
                        .arg(&config)
                        .arg("--runtime")
                        .arg(&runtime)
                        .arg("--bundle")
                        .arg(&bundles[0]));
                    let doc: Value = serde_json::from_str(&out).unwrap();
                    assert_eq!(doc["wrapper"]["mode"], mode, "{case}: {doc}");
                    let want = explained(&doc, &before.hook, before.home);
                    expect_copy_up(&doc, &case, version, mode, hooks_name, layout_name);

                    let id = format!("routing-{n}");
                    ok(Command::new(&wrapper)
                        .env("OCI_TMPFS_HOOK_CONFIG", &config)
                        .args([
                            "--root",
                            "/run/routing",
                            "--log",
                            "/dev/null",
                            "--log-format",
                            "json",
                            "create",
                            "--bundle",
                        ])
                        .arg(&bundles[1])
                        .args(["--pid-file", "/dev/null", &id]));
                    assert_eq!(carried(&bundles[1]), want, "the wrapper against explain: {case}: {doc}");

                    if mode == "spec" {
                        ok(Command::new(hook_bin())
                            .args(["inject", "--mode", "spec", "--config"])
                            .arg(&config)
                            .arg("--runtime")
                            .arg(&runtime)
                            .arg("--bundle")
                            .arg(&bundles[2]));
                        assert_eq!(
                            carried(&bundles[2]),
                            want,
                            "inject --mode spec against explain: {case}: {doc}"
                        );
                    }
                    let executor = doc["wrapper"]["executor"].as_str().unwrap_or("none").to_string();
                    seen.insert((executor, doc["wrapper"]["stage"].as_str().unwrap_or("-").to_string()));
                }
            }
        }
    }
    // Every executor and stage was reached, so the agreement was not vacuous.
    let want: BTreeSet<(String, String)> = [("spec", "-"), ("hook", "prestart"), ("hook", "createContainer")]
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
    assert_eq!(seen, want, "{n} bundles");
}

/// `explain` without `--runtime` judges the runtime the wrapper execs: the
/// host config's `runtime_path` (here a crun that takes our mounts), not
/// runc on `PATH` (here a runc 1.1.5, which would send `/tmp` to the hook).
#[test]
fn explain_follows_the_host_configs_runtime_path() {
    require_root();
    let dir = TempDir::new("spec36-runtime-path");
    let path_dir = dir.join("path");
    std::fs::create_dir(&path_dir).unwrap();
    script(&path_dir, "runc", "[ \"$1\" = --version ] && echo 'runc version 1.1.5'; exit 0");
    let crun = script(&dir, "crun", "[ \"$1\" = --version ] && echo 'crun version 1.8.1'; exit 0");
    let config = dir.join("config.toml");
    std::fs::write(&config, format!("mode = \"spec\"\nruntime_path = \"{}\"\n", crun.display())).unwrap();
    let template = Bundle::new("spec36-runtime-path");
    let b = dir.join("b");
    for d in ["bin", "proc", "sys", "dev", "etc", "tmp"] {
        std::fs::create_dir_all(b.join("rootfs").join(d)).unwrap();
    }
    std::fs::write(b.join("rootfs/etc/passwd"), "root:x:0:0:root:/tmp:/bin/sh\n").unwrap();
    std::fs::write(b.join("config.json"), serde_json::to_vec_pretty(&template.config).unwrap()).unwrap();
    let explain = |config: &Path| {
        let out = ok(Command::new(hook_bin())
            .env("PATH", &path_dir)
            .args(["explain", "--json", "--config"])
            .arg(config)
            .arg("--bundle")
            .arg(&b));
        serde_json::from_str::<Value>(&out).unwrap()
    };
    let doc = explain(&config);
    assert_eq!(doc["wrapper"]["executor"], "spec", "runtime_path's crun: {doc}");
    // Without runtime_path, runc on PATH.
    let bare = dir.join("bare.toml");
    std::fs::write(&bare, "mode = \"spec\"\n").unwrap();
    let doc = explain(&bare);
    assert_eq!(doc["wrapper"]["executor"], "hook", "PATH's runc 1.1.5: {doc}");
    assert!(doc["wrapper"]["why"].as_str().unwrap().contains("runc 1.1.5"), "{doc}");
}

/// A runtime whose version cannot be read (it prints nothing, prints no
/// `NAME version X.Y.Z`, or does not answer) gets the hook from the wrapper
/// in spec mode, never a tmpfs entry of ours, and `explain` says so; a
/// runtime that hangs on `--version` holds the start back by the bounded
/// wait only (docs/design.md#runtimes).
#[test]
fn a_runtime_whose_version_cannot_be_read_gets_the_hook() {
    require_root();
    let dir = TempDir::new("routing-unknown");
    let template = Bundle::new("routing-unknown");
    let wrapper = dir.join("oci-tmpfs-runtime");
    std::os::unix::fs::symlink(hook_bin(), &wrapper).unwrap();
    let answers = [
        ("prints nothing", "exit 0"),
        ("prints garbage", "echo 'garbage 0.0.0'; exit 0"),
        ("hangs", "exec sleep 60"),
    ];
    for (i, (name, answer)) in answers.iter().enumerate() {
        let runtime = script(
            &dir,
            &format!("runtime-{i}"),
            &format!("[ \"$1\" = --version ] && {{ {answer}; }}; exit 0"),
        );
        let config = dir.join(format!("config-{i}.toml"));
        std::fs::write(&config, format!("mode = \"spec\"\nruntime_path = \"{}\"\n", runtime.display()))
            .unwrap();
        let b = dir.join(format!("b{i}"));
        for d in ["bin", "proc", "sys", "dev", "etc", "tmp"] {
            std::fs::create_dir_all(b.join("rootfs").join(d)).unwrap();
        }
        std::fs::write(b.join("rootfs/etc/passwd"), "root:x:0:0:root:/tmp:/bin/sh\n").unwrap();
        std::fs::write(b.join("config.json"), serde_json::to_vec_pretty(&template.config).unwrap()).unwrap();
        let started = std::time::Instant::now();
        ok(Command::new(&wrapper)
            .env("OCI_TMPFS_HOOK_CONFIG", &config)
            .args(["--root", "/run/routing-unknown", "create", "--bundle"])
            .arg(&b)
            .arg(format!("routing-unknown-{i}")));
        let took = started.elapsed();
        assert!(
            took < std::time::Duration::from_secs(10),
            "a runtime that {name}: the wrapper took {took:?}"
        );
        let got = carried(&b);
        assert!(got.spec.is_empty(), "a runtime that {name}: tmpfs entries of ours: {got:?}");
        assert_eq!(got.hook, BTreeSet::from(["prestart".to_string()]), "a runtime that {name}: {got:?}");
        let out = ok(Command::new(hook_bin())
            .args(["explain", "--json", "--config"])
            .arg(&config)
            .arg("--bundle")
            .arg(&b));
        let doc: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("explain --json: {e}: {out}"));
        assert_eq!(doc["wrapper"]["executor"], "hook", "a runtime that {name}: {doc}");
        let why = doc["wrapper"]["why"].as_str().unwrap_or_else(|| panic!("no wrapper.why: {doc}"));
        assert!(why.contains("cannot be read"), "a runtime that {name}: {why}");
    }
}
