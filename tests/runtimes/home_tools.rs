//! Real programs that write under the container user's `HOME`, as ML
//! containers run them, in the read-only host-root containers of the
//! PyTorch suite (tests/runtimes/pytorch.rs), on runc and crun, through each
//! executor: none, the hook (`inject --stage prestart`) and the spec
//! executor (`inject --mode spec`). The programs are those of
//! tests/pytorch/home_programs.py: Python's user site and `pip install
//! --user` of a local wheel (both write `~/.local`), `torch.hub`'s cache,
//! Triton's kernel cache manager and a `cache=True` numba function of the
//! image's read-only `/app` (Triton and numba from PyPI, in the venv that
//! tests/env/venv.sh makes from tests/pytorch/tools-requirements.txt; no GPU).
//!
//! `HOME` itself never becomes writable (docs/design.md#home-rule): only
//! the tool caches of `home_caches` get a tmpfs each, on the shallowest
//! directory along the cache's path that the image has missing or empty,
//! the process's, mode 0700, `nosuid,nodev`, exec allowed. So with us the
//! caches work (torch.hub, Triton, numba pass) while what writes elsewhere
//! in `HOME` (`~/.local`) fails as it does without us, and a `~/.cache`
//! holding the image's files keeps them, read-only and whole. After every
//! run the image on the host holds exactly what it held, plus the empty
//! mountpoint directories of the caches (and a missing `HOME` made for the
//! process).
//!
//! 24 containers, the two tests side by side: about 50 s on 2 cores with
//! Debian 12's torch 1.13, 75 s in sid (torch 2.14; 95 s when its venv is
//! made first).

use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::home::{run_with, Printed, EXECUTORS};
use crate::pytorch::{PYTHON, WORK};
use crate::support::*;
use serde_json::json;

/// Who runs the programs. The containers bind the host's `/etc`, so the
/// image's `/etc/passwd` is the host's: root's home is `/root`, and uid
/// 12345 has no entry (asserted).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum User {
    /// root, `HOME=/root` from `/etc/passwd`; the image's `/root` holds
    /// `.bashrc` only.
    Root,
    /// uid 12345 with `HOME=/home/u` in the environment, a home the image
    /// lacks (made for the process).
    HomeEnv,
    /// uid 12345 with no `HOME`: the runtime gives `HOME=/`, crun 1.8.1
    /// none at all (docs/design.md#home).
    NoHome,
}

const USERS: [User; 3] = [User::Root, User::HomeEnv, User::NoHome];

/// The uid of [`User::HomeEnv`] and [`User::NoHome`].
const UID: u32 = 12345;

impl User {
    fn ids(self) -> (u32, u32) {
        match self {
            User::Root => (0, 0),
            User::HomeEnv | User::NoHome => (UID, UID),
        }
    }

    /// The `HOME` the programs see under `rt`: `(unset)` for crun 1.8.1's
    /// missing one.
    fn home(self, rt: Runtime) -> &'static str {
        match self {
            User::Root => "/root",
            User::HomeEnv => "/home/u",
            User::NoHome if crun_181(rt) => "(unset)",
            User::NoHome => "/",
        }
    }

    /// The `HOME` the executors plan for (they cannot know crun 1.8.1
    /// leaves it unset).
    fn planned_home(self) -> &'static str {
        match self {
            User::Root => "/root",
            User::HomeEnv => "/home/u",
            User::NoHome => "/",
        }
    }
}

/// crun before 1.9 gives no `HOME` to a uid without a passwd entry.
fn crun_181(rt: Runtime) -> bool {
    rt == Runtime::Crun && runtime_version(rt) < (1, 9)
}

/// `rel` under `home` (`/rel` for `HOME=/`, `~/rel` for an unset one, which
/// Python leaves as it is).
fn under(home: &str, rel: &str) -> String {
    match home {
        "/" => format!("/{rel}"),
        "(unset)" => format!("~/{rel}"),
        h => format!("{h}/{rel}"),
    }
}

/// The mountpoints of the default `home_caches` (hooks/config.toml) under a
/// home that holds none of them: the first directory of each cache's path,
/// `.cache` and `.config` shared.
const EMPTY_HOME_MOUNTS: [&str; 5] = [".cache", ".config", ".triton", ".cupy", ".nv"];

/// The same under a home whose `.cache` holds the image's `pip/x` and
/// `huggingface/hub/model.bin`: each missing tool directory in `.cache`
/// gets its own; `pip` and `huggingface` hold files and are left alone.
const FILLED_HOME_MOUNTS: [&str; 9] = [
    ".cache/torch",
    ".cache/torch_extensions",
    ".cache/numba",
    ".cache/vllm",
    ".cache/matplotlib",
    ".config",
    ".triton",
    ".cupy",
    ".nv",
];

/// A program of tests/pytorch/home_programs.py: the directory it makes and
/// writes in (relative to `HOME`), and whether that is in one of
/// `home_caches`.
struct Program {
    name: &'static str,
    writes: &'static str,
    cache: bool,
}

const PROGRAMS: [Program; 5] = [
    Program { name: "user_base", writes: ".local/lib", cache: false },
    Program { name: "pip_user", writes: ".local", cache: false },
    Program { name: "torch_hub", writes: ".cache/torch/hub", cache: true },
    Program { name: "triton", writes: ".triton/cache", cache: true },
    Program { name: "numba", writes: ".cache/numba", cache: true },
];

/// Where the image keeps the app whose numba function is cached.
const APP: &str = "/app";
/// Where the local wheel for `pip install --user` is bound.
const WHEEL: &str = "/wheel";

/// Each program's command line in the container.
fn argv(name: &str, tools: &Path) -> String {
    let script = format!("{WORK}/home_programs.py");
    let tools = tools.display();
    match name {
        "user_base" | "torch_hub" => format!("{PYTHON} {script} {name}"),
        "pip_user" => format!("{PYTHON} {script} {name} {WHEEL}/hf_probe-1.0-py3-none-any.whl"),
        "triton" => format!("{tools} {script} {name}"),
        "numba" => format!("{tools} {script} {name} {APP}"),
        _ => unreachable!("{name}"),
    }
}

/// A local wheel (`hf_probe`, pure Python) in `dir`, made with `zipfile`.
fn local_wheel(dir: &Path) {
    let make = r#"import sys, zipfile
d = sys.argv[1]
files = {
    "hf_probe/__init__.py": "VALUE = 1\n",
    "hf_probe-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: hf-probe\nVersion: 1.0\n",
    "hf_probe-1.0.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: oci-tmpfs-hook-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}
record = "".join(f"{n},,\n" for n in files) + "hf_probe-1.0.dist-info/RECORD,,\n"
with zipfile.ZipFile(f"{d}/hf_probe-1.0-py3-none-any.whl", "w") as z:
    for n, t in files.items():
        z.writestr(n, t)
    z.writestr("hf_probe-1.0.dist-info/RECORD", record)
"#;
    ok(std::process::Command::new(PYTHON).args(["-c", make]).arg(dir));
}

/// The tools' venv (tests/env/venv.sh: Triton and numba from PyPI, made
/// with Debian's python so that the host-root container runs it): its
/// python.
fn tools_python() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = ok(std::process::Command::new(root.join("tests/env/venv.sh"))
        .arg(root.join("tests/pytorch/tools-requirements.txt"))
        .arg("triton.runtime.cache, numba")
        .arg(PYTHON));
    PathBuf::from(out.trim())
}

/// What every test here needs: root, torch, the runtimes, the venv, and no
/// passwd entry for [`UID`] on the host (whose `/etc` the containers bind).
fn setup() -> PathBuf {
    crate::pytorch::require_all();
    for rt in Runtime::ALL {
        which(rt.bin());
    }
    assert!(
        !std::fs::read_to_string("/etc/passwd")
            .expect("the host's /etc/passwd")
            .lines()
            .any(|l| l.split(':').nth(2) == Some(&UID.to_string())),
        "uid {UID} has no entry in the host's /etc/passwd, which the containers bind"
    );
    tools_python()
}

/// A host-root bundle: the image's `/root` (mode 0700) holding `.bashrc`,
/// its app at [`APP`] (tests/pytorch/hf_numba_probe.py), the wheel and the
/// tools' venv bound read-only at directories the image has, run as
/// `user`. Without us `/tmp` is a tmpfs made by hand, as teams do today:
/// what still fails is `HOME`.
fn bundle(name: &str, ex: Via, user: User, wheel: &Path, tools: &Path) -> Bundle {
    let mut b = crate::pytorch::torch_bundle(name);
    let rootfs = b.rootfs();
    std::fs::create_dir(rootfs.join("root")).unwrap();
    std::fs::write(rootfs.join("root/.bashrc"), "image dotfile").unwrap();
    std::fs::set_permissions(rootfs.join("root"), std::fs::Permissions::from_mode(0o700)).unwrap();
    std::fs::create_dir(rootfs.join(APP.trim_start_matches('/'))).unwrap();
    let module = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/pytorch/hf_numba_probe.py");
    std::fs::copy(module, rootfs.join(APP.trim_start_matches('/')).join("hf_numba_probe.py")).unwrap();
    let venv = tools.parent().and_then(Path::parent).expect("a venv's bin/python").to_path_buf();
    let mounts = b.config["mounts"].as_array_mut().unwrap();
    for (at, source) in [(Path::new(WHEEL), wheel), (venv.as_path(), venv.as_path())] {
        // Made here, so that the runtime makes nothing in the image.
        std::fs::create_dir_all(rootfs.join(at.strip_prefix("/").unwrap())).unwrap();
        mounts.push(json!({"destination": at, "type": "bind", "source": source, "options": ["rbind", "ro"]}));
    }
    if ex == Via::Bare {
        // runc before 1.1.8 gives the tmpfs the mode of the directory
        // under it (docs/design.md#runc-tmpfs-mode).
        std::fs::set_permissions(rootfs.join("tmp"), std::fs::Permissions::from_mode(0o1777)).unwrap();
        mounts.push(json!({"destination": "/tmp", "type": "tmpfs", "source": "tmpfs", "options": ["nosuid", "nodev", "mode=1777"]}));
    }
    let (uid, gid) = user.ids();
    b.config["process"]["user"] = json!({"uid": uid, "gid": gid});
    if user == User::HomeEnv {
        b.env("HOME=/home/u");
    }
    b
}

/// Sets the process to a script that prints `HOME` and root's dotfile,
/// runs the programs named, prints the owner and mode of each of `dirs`,
/// runs `extra` and prints the mount table.
fn script(b: &mut Bundle, programs: &[&str], tools: &Path, dirs: &[String], extra: &str) {
    let mut s = String::from("echo \"HOME=${HOME-(unset)}\"\necho \"DOTFILE $(cat /root/.bashrc 2>&1)\"\n");
    for p in programs {
        s.push_str(&argv(p, tools));
        s.push('\n');
    }
    for d in dirs {
        s.push_str(&format!("stat -c 'STAT %n %u %g %a' '{d}' 2>&1\n"));
    }
    s.push_str(extra);
    s.push_str("cat /proc/self/mountinfo\n");
    b.config["process"]["args"] = json!(["/bin/sh", "-c", s]);
}

/// The image on the host: each entry's relative path, and for a file its
/// size and modification time (`None` for a directory).
type Image = BTreeMap<String, Option<(u64, i64, i64)>>;

fn image(rootfs: &Path) -> Image {
    walk(rootfs, true)
        .into_iter()
        .map(|e| {
            let row = (!e.meta.is_dir()).then(|| (e.meta.len(), e.meta.mtime(), e.meta.mtime_nsec()));
            (e.rel.display().to_string(), row)
        })
        .collect()
}

/// The image lost and changed nothing, and gained nothing but those of
/// the directories `made` (relative to the rootfs) it lacked.
fn image_unchanged(rootfs: &Path, before: &Image, made: &[String], what: &str) {
    let after = image(rootfs);
    for (path, row) in before {
        assert_eq!(after.get(path), Some(row), "the image's {path} changed or went: {what}");
    }
    let new: Vec<&String> = after.keys().filter(|p| !before.contains_key(*p)).collect();
    let mut want: Vec<&String> = made.iter().filter(|p| !before.contains_key(*p)).collect();
    want.sort();
    want.dedup();
    assert_eq!(new, want, "the image gained only the mountpoints (and a home made): {what}");
    for p in want {
        assert_eq!(after[p], None, "{p} is a directory: {what}");
    }
}

/// `rel` (relative to the rootfs) and each directory above it: a
/// mountpoint and what may have been made for it.
fn with_parents(rel: &str) -> Vec<String> {
    Path::new(rel).ancestors().filter(|p| *p != Path::new("")).map(|p| p.display().to_string()).collect()
}

/// The tmpfs mounts in the container at or under `home` (for `HOME=/`,
/// at its dot-directories), by mount point.
fn home_mounts(out: &str, home: &str) -> BTreeMap<String, MountInfo> {
    let in_home = |m: &str| match home {
        "/" => m.starts_with("/."),
        h => m == h || m.starts_with(&format!("{h}/")),
    };
    parse_mountinfo(out)
        .into_iter()
        .filter(|m| m.fstype == "tmpfs" && in_home(&m.mount_point))
        .map(|m| (m.mount_point.clone(), m))
        .collect()
}

/// One line of what a run showed: `HOME`, each program's verdict, and the
/// tmpfs mounts at or under `home`.
fn summary(out: &str, home: &str) -> String {
    let home_line = out.lines().find(|l| l.starts_with("HOME=")).unwrap_or("(no HOME line)");
    let verdicts: Vec<&str> = out
        .lines()
        .filter_map(|l| l.strip_prefix("PASS ").or_else(|| l.strip_prefix("FAIL ")).map(|_| l))
        .map(|l| l.split(':').next().unwrap_or(l))
        .collect();
    let mounts: Vec<String> = home_mounts(out, home).into_keys().collect();
    format!("{home_line}; {}; tmpfs {mounts:?}", verdicts.join(", "))
}

/// The line a program printed, `PASS NAME` or `FAIL NAME: error`.
fn line<'a>(out: &'a str, name: &str, what: &str) -> &'a str {
    out.lines()
        .find(|l| l.starts_with(&format!("PASS {name}")) || l.starts_with(&format!("FAIL {name}:")))
        .unwrap_or_else(|| panic!("no line for {name}: {what}"))
}

/// A program's failure on the read-only `HOME` (`home` as the program saw
/// it): its own error names the first directory it could not make on its
/// way to the one it writes in; numba's names none: it found no directory
/// to cache in, and home_programs.py adds the user-wide one.
fn assert_read_only_failure(line: &str, prog: &Program, home: &str, what: &str) {
    let name = prog.name;
    assert!(line.starts_with("FAIL "), "{name} passed on a read-only HOME {home}: {line}: {what}");
    let path = line
        .rsplit_once(": '")
        .and_then(|(_, p)| p.split_once('\''))
        .map(|(p, _)| p)
        .unwrap_or_else(|| panic!("{name}: no path in its error: {line}: {what}"));
    let error = if name == "numba" {
        "no locator available for file '/app/hf_numba_probe.py'"
    } else if line.contains("Permission denied") {
        "Permission denied"
    } else {
        "Read-only file system"
    };
    let wanted = under(home, prog.writes);
    assert!(
        line.contains(error) && path != "/" && Path::new(&wanted).starts_with(path),
        "{name}: the read-only HOME {home} is the error ({error}, on the way to {wanted}): {line}: {what}"
    );
}

/// A program passed, writing in its cache under `home`.
fn assert_wrote(out: &str, line: &str, prog: &Program, home: &str, what: &str) {
    assert!(line.starts_with("PASS "), "{} failed with us: {line}: {what}", prog.name);
    let wrote = format!("{}: wrote {}/", prog.name, under(home, prog.writes));
    assert!(out.lines().any(|l| l.starts_with(&wrote)), "{wrote}...: {what}");
}

/// The caches' tmpfs under `home` are exactly `mounts`, each the process's
/// (`uid gid`), mode 0700, `nosuid,nodev`, exec allowed; `HOME` itself is
/// none.
fn assert_cache_mounts(p: &Printed, home: &str, mounts: &[&str], ids: (u32, u32), what: &str) {
    let ours = home_mounts(&p.out, home);
    let want: Vec<String> = mounts.iter().map(|m| under(home, m)).collect();
    assert_eq!(ours.keys().cloned().collect::<Vec<_>>(), sorted(&want), "the caches' tmpfs: {what}");
    for m in &want {
        let mi = &ours[m];
        assert!(
            mi.has("nosuid") && mi.has("nodev") && !mi.has("noexec"),
            "{m}: nosuid,nodev, exec allowed: {:?}: {what}",
            mi.mount_options
        );
        let stat = format!("STAT {m} {} {} 700", ids.0, ids.1);
        assert!(p.out.lines().any(|l| l == stat), "{stat}: {what}");
    }
}

fn sorted(v: &[String]) -> Vec<String> {
    let mut v = v.to_vec();
    v.sort();
    v
}

/// Each program, as root with its image home `/root`, as uid 12345 with
/// `HOME=/home/u` (missing from the image) and as uid 12345 with no `HOME`
/// (the runtime's `/`), on runc and crun. Without us every program fails
/// on the read-only `HOME` with its own error. With the hook and with the
/// spec executor the caches under `HOME` get a tmpfs each, and `HOME`
/// none: torch.hub, Triton and numba pass, writing under their cache, and
/// Python's user site and `pip install --user` still fail on `~/.local`
/// (docs/design.md#home-rule: nothing new appears in `HOME`). crun 1.8.1
/// leaves `HOME` unset for uid 12345 with no `HOME`, so every program
/// fails there, with us too (`~` is a relative path in `/`). After each run
/// the image gained only the caches' empty mountpoints (and the home made
/// for uid 12345) and root's `.bashrc` is as the image made it.
#[test]
fn tools_write_their_caches_and_nothing_else_of_home() {
    let tools = setup();
    let wheel = TempDir::new("home-tools-wheel");
    local_wheel(&wheel.join(""));
    let names: Vec<&str> = PROGRAMS.iter().map(|p| p.name).collect();
    for rt in Runtime::ALL {
        for ex in EXECUTORS {
            for user in USERS {
                let mut b = bundle("home-tools", ex, user, &wheel.join(""), &tools);
                let planned = user.planned_home();
                let dirs: Vec<String> = EMPTY_HOME_MOUNTS.iter().map(|m| under(planned, m)).collect();
                script(&mut b, &names, &tools, &dirs, "");
                let before = image(&b.rootfs());
                let p = run_with(&mut b, ex, rt, Duration::from_secs(300));
                let home = user.home(rt);
                let what = format!("{rt:?}, {ex:?}, {user:?}: {}", p.context);
                say(&format!("{rt:?}, {ex:?}, {user:?}: {}", summary(&p.out, planned)));
                assert!(p.out.lines().any(|l| l == format!("HOME={home}")), "HOME={home}: {what}");
                if user == User::Root {
                    assert!(p.out.contains("DOTFILE image dotfile"), "the image's /root/.bashrc: {what}");
                }
                for prog in &PROGRAMS {
                    let l = line(&p.out, prog.name, &what);
                    match ex {
                        // The caches of ours, where the program has a HOME.
                        Via::Hook(_) | Via::InjectSpec | Via::Wrapper(_)
                            if prog.cache && home != "(unset)" =>
                        {
                            assert_wrote(&p.out, l, prog, home, &what);
                        }
                        _ => assert_read_only_failure(l, prog, home, &what),
                    }
                }
                // The mountpoints, made in the image; a missing HOME made
                // with them.
                let made: Vec<String> = match ex {
                    Via::Bare => {
                        assert!(home_mounts(&p.out, planned).is_empty(), "no tmpfs without us: {what}");
                        Vec::new()
                    }
                    Via::Hook(_) | Via::InjectSpec | Via::Wrapper(_) => {
                        assert_cache_mounts(&p, planned, &EMPTY_HOME_MOUNTS, user.ids(), &what);
                        dirs.iter().flat_map(|d| with_parents(d.trim_start_matches('/'))).collect()
                    }
                };
                image_unchanged(&b.rootfs(), &before, &made, &what);
                assert_eq!(
                    std::fs::read_to_string(b.rootfs().join("root/.bashrc")).unwrap(),
                    "image dotfile"
                );
                if user == User::HomeEnv && ex != Via::Bare {
                    let meta = std::fs::metadata(b.rootfs().join("home/u")).unwrap();
                    assert_eq!(
                        (meta.uid(), meta.gid(), meta.mode() & 0o7777),
                        (UID, UID, 0o700),
                        "the home made for uid {UID}: {what}"
                    );
                }
            }
        }
    }
}

/// The image's probe of its filled `~/.cache`, run as root: the model's
/// sha256, whether it opens for append, whether a new file can be made in
/// `huggingface` and in `pip`, and `pip/x`.
const IMAGE_CACHE_PY: &str = r#"import errno, hashlib
model = "/root/.cache/huggingface/hub/model.bin"
h = hashlib.sha256()
with open(model, "rb") as f:
    for block in iter(lambda: f.read(1 << 20), b""):
        h.update(block)
print("MODEL", h.hexdigest(), flush=True)
for what, path, mode in (
    ("APPEND", model, "ab"),
    ("NEW-HF", "/root/.cache/huggingface/new", "xb"),
    ("NEW-PIP", "/root/.cache/pip/new", "xb"),
):
    try:
        open(path, mode).close()
        print(what, "written", flush=True)
    except OSError as e:
        print(what, errno.errorcode.get(e.errno, e.errno), flush=True)
with open("/root/.cache/pip/x") as f:
    print("PIP", f.read(), flush=True)
"#;

/// The model's size: large enough that a copy of it into a tmpfs, or a
/// tmpfs hiding it, would show.
const MODEL_BYTES: u64 = 300 * MI;

/// The sha256 of `path`, by Debian's python (OpenSSL's, fast on 300 MiB).
fn sha256(path: &Path) -> String {
    let code = "import hashlib, sys\nh = hashlib.sha256()\nwith open(sys.argv[1], 'rb') as f:\n    for b in iter(lambda: f.read(1 << 20), b''):\n        h.update(b)\nprint(h.hexdigest())";
    ok(std::process::Command::new(PYTHON).args(["-c", code]).arg(path)).trim().to_string()
}

/// Root's `~/.cache` holding the image's files, `pip/x` and a 300 MiB
/// `huggingface/hub/model.bin` of random bytes, on runc and crun. With the
/// hook and with the spec executor each missing tool directory in `.cache`
/// gets its own tmpfs (`.cache/torch`, `.cache/numba`, ...), and `.triton`
/// one of its own: torch.hub, Triton and numba pass. `.cache`,
/// `.cache/pip` and `.cache/huggingface`, which hold the image's files,
/// get none: inside, the model has the host's sha256, does not open for
/// append (EROFS), and no new file can be made beside it or in `pip`.
/// Without us the three programs fail on the read-only `HOME` and the files
/// are there, read-only, alike. After each run the image's files on the
/// host are unchanged (the model's sha256, and the listing: only the
/// caches' empty mountpoints are new).
#[test]
fn a_cache_dir_the_image_filled_keeps_its_files() {
    let tools = setup();
    let wheel = TempDir::new("home-tools-nowheel");
    // One model, linked into each image: written once.
    let models = TempDir::new("home-tools-model");
    let model = models.join("model.bin");
    let mut random = std::fs::File::open("/dev/urandom").unwrap();
    let written = std::io::copy(
        &mut std::io::Read::take(&mut random, MODEL_BYTES),
        &mut std::fs::File::create(&model).unwrap(),
    )
    .unwrap();
    assert_eq!(written, MODEL_BYTES);
    let sum = sha256(&model);
    let programs = ["torch_hub", "triton", "numba"];
    for rt in Runtime::ALL {
        for ex in EXECUTORS {
            let mut b = bundle("home-tools-filled", ex, User::Root, &wheel.join(""), &tools);
            let cache = b.rootfs().join("root/.cache");
            std::fs::create_dir_all(cache.join("pip")).unwrap();
            std::fs::write(cache.join("pip/x"), "image pip file").unwrap();
            std::fs::create_dir_all(cache.join("huggingface/hub")).unwrap();
            std::fs::hard_link(&model, cache.join("huggingface/hub/model.bin"))
                .expect("the bundle and the model are in one temp dir");
            std::fs::write(b.rootfs().join("app/image_cache.py"), IMAGE_CACHE_PY).unwrap();
            let dirs: Vec<String> = FILLED_HOME_MOUNTS.iter().map(|m| under("/root", m)).collect();
            script(&mut b, &programs, &tools, &dirs, &format!("{PYTHON} {APP}/image_cache.py\n"));
            let before = image(&b.rootfs());
            let p = run_with(&mut b, ex, rt, Duration::from_secs(300));
            let what = format!("{rt:?}, {ex:?}, filled ~/.cache: {}", p.context);
            say(&format!("{rt:?}, {ex:?}, filled ~/.cache: {}", summary(&p.out, "/root")));
            for prog in PROGRAMS.iter().filter(|p| programs.contains(&p.name)) {
                let l = line(&p.out, prog.name, &what);
                if ex == Via::Bare {
                    assert_read_only_failure(l, prog, "/root", &what);
                } else {
                    assert_wrote(&p.out, l, prog, "/root", &what);
                }
            }
            for want in [
                format!("MODEL {sum}"),
                "APPEND EROFS".to_string(),
                "NEW-HF EROFS".to_string(),
                "NEW-PIP EROFS".to_string(),
                "PIP image pip file".to_string(),
            ] {
                assert!(p.out.lines().any(|l| l == want), "{want}: {what}");
            }
            let made = match ex {
                Via::Bare => {
                    assert!(home_mounts(&p.out, "/root").is_empty(), "no tmpfs without us: {what}");
                    Vec::new()
                }
                Via::Hook(_) | Via::InjectSpec | Via::Wrapper(_) => {
                    assert_cache_mounts(&p, "/root", &FILLED_HOME_MOUNTS, (0, 0), &what);
                    dirs.iter().map(|d| d.trim_start_matches('/').to_string()).collect()
                }
            };
            image_unchanged(&b.rootfs(), &before, &made, &what);
            assert_eq!(
                sha256(&cache.join("huggingface/hub/model.bin")),
                sum,
                "the model on the host: {what}"
            );
        }
    }
}
