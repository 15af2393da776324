//! The container user's `HOME` through the real engines
//! (docs/design.md#home-rule): the image every engine runs (root's home
//! `/root` holding a dotfile, no `/etc/passwd` entry for uid 1000), the
//! script that shows what a process can do in its `HOME` (what it can
//! write, create or rename there, which caches it can write), what that
//! output says, and the pod case written once for the ways into a CRI node
//! (the wrapper's two modes, tests/runtimes/home_engines.rs; the NRI
//! plugin, tests/nri/). Docker and Podman are in
//! tests/runtimes/home_engines.rs. And the hostile `HOME`s, passwd files
//! and image homes, written once: through bare runc and crun bundles
//! (tests/runtimes/home.rs) and through a CRI node ([`pod_hostile_homes`]:
//! tests/runtimes/cri.rs, tests/nri/).

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;

use serde_json::json;

use super::cri::*;
use super::pods::*;
use super::*;

/// Root's passwd line with a home of its own.
pub const ROOT_LINE: &str = "root:x:0:0:root:/root:/bin/sh\n";
/// The image's `/etc/passwd`: root's home is `/root`; uid 1000 has no entry.
pub const PASSWD: &str = ROOT_LINE;
/// The image's `/root/.profile`: a dotfile that stays as the image made it.
pub const PROFILE: &str = "export PS1='home-image$ '";
/// The mode of the image's `/root`.
pub const ROOT_MODE: u32 = 0o750;
/// The file a volume at `HOME` holds.
pub const VOLUME_FILE: &str = "from-volume";
pub const VOLUME_TEXT: &str = "the volume's own";

/// Shapes a busybox rootfs into the HOME image: [`PASSWD`], and `/root`
/// ([`ROOT_MODE`]) holding `.profile` ([`PROFILE`]).
pub fn shape_image(rootfs: &Path) {
    std::fs::write(rootfs.join("etc/passwd"), PASSWD).unwrap();
    let root = rootfs.join("root");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join(".profile"), PROFILE).unwrap();
    std::fs::set_permissions(&root, std::fs::Permissions::from_mode(ROOT_MODE)).unwrap();
}

/// A host directory for a volume at `HOME`, holding [`VOLUME_FILE`].
pub fn volume_dir(name: &str) -> TempDir {
    let dir = TempDir::new(name);
    std::fs::write(dir.join(VOLUME_FILE), VOLUME_TEXT).unwrap();
    dir
}

/// The caches [`PROBE`] writes into: where torch.hub and Triton write
/// (docs/design.md#home-caches).
pub const PROBED_CACHES: [&str; 2] = [".cache/torch", ".triton"];

/// What a process shows of its `HOME`: its value, `.profile`, the volume's
/// file, whether it can make a new file there, append to an app kept there
/// (`main.py`) or plant a module beside it (`lib/`), read `secret`; each
/// of the image's files under `HOME` that hold code or keys which it can
/// append to (`OPENED`: `.bashrc`, `.ssh/authorized_keys`, a venv's or
/// pyenv's `python`, a pre-baked model...), each such file it can create
/// (`OPENED`: a `.pth` in the user site, `.bash_profile`,
/// `authorized_keys2`, a file beside the targets of symlinks out of `HOME`),
/// each entry of `HOME` it can rename away (`RENAMED`, put back at once;
/// the first 64 that `ls -A` lists, so that a home of 100,000 files takes
/// no 100,000 processes);
/// which of [`PROBED_CACHES`] it can write and `.triton`'s owner and mode;
/// then the mount table.
pub const PROBE: &str = "printf 'HOME=[%s]\\n' \"${HOME-(unset)}\"; \
    printf 'PROFILE=[%s]\\n' \"$(cat \"$HOME/.profile\" 2>/dev/null)\"; \
    printf 'VOLUME=[%s]\\n' \"$(cat \"$HOME/from-volume\" 2>/dev/null)\"; \
    { echo x > \"$HOME/new\"; } 2>/dev/null && echo HOME-WRITABLE; \
    { echo x >> \"$HOME/main.py\"; } 2>/dev/null && echo APP-WRITABLE; \
    { echo x > \"$HOME/lib/planted.py\"; } 2>/dev/null && echo APP-PLANTED; \
    printf 'SECRET=[%s]\\n' \"$(cat \"$HOME/secret\" 2>/dev/null)\"; \
    for p in .bashrc .profile .ssh/authorized_keys .venv/bin/python .pyenv/versions/3.12/bin/python \
      .local/bin/tool .local/lib/python3.11/site-packages/pkg/__init__.py .cache/huggingface/hub/model.bin .cache/pip/x; do \
      [ -e \"$HOME/$p\" ] && { echo x >> \"$HOME/$p\"; } 2>/dev/null && echo \"OPENED=[$p]\"; done; \
    for p in .bash_profile .local/lib/python3.11/site-packages/evil.pth .local/bin/python3 .ssh/authorized_keys2 \
      .venv/evil.pth .pyenv/evil.pth /opt/data/planted /opt/models/planted; do \
      case $p in /*) f=$p;; *) f=$HOME/$p;; esac; \
      { mkdir -p \"${f%/*}\" && echo x > \"$f\"; } 2>/dev/null && echo \"OPENED=[$p]\"; done; \
    for n in $(ls -A \"$HOME\" 2>/dev/null | head -n 64); do e=${HOME%/}/$n; \
      mv \"$e\" \"$e.mv\" 2>/dev/null && { echo \"RENAMED=[$n]\"; mv \"$e.mv\" \"$e\"; }; done; \
    for c in .cache/torch .triton; do { mkdir -p \"$HOME/$c/probe\" && echo k > \"$HOME/$c/probe/k\"; } 2>/dev/null \
      && echo \"CACHE-WRITABLE=[$c]\"; done; \
    stat -c 'CACHESTAT=[%u %g %a]' \"$HOME/.triton\" 2>/dev/null; \
    stat -c 'STAT=[%u %g %a]' \"$HOME\"; cat /proc/self/mountinfo; true";

/// [`PROBE`] run by `exec` in a container whose pid 1 is its process, with
/// the `HOME` pid 1 got (an exec'd process gets the engine's environment).
pub fn probe_as_pid1() -> String {
    format!(
        "h=$(busybox tr '\\0' '\\n' </proc/1/environ | grep '^HOME='); \
         if [ -n \"$h\" ]; then HOME=${{h#HOME=}}; else unset HOME; fi; {PROBE}"
    )
}

/// What [`PROBE`]'s output says.
#[derive(Debug)]
pub struct Seen {
    pub home: String,
    pub profile: String,
    pub volume: String,
    /// A new file could be made in `HOME`.
    pub writable: bool,
    /// uid, gid and octal mode of `HOME`.
    pub stat: String,
    /// The top mount at `HOME`, if `HOME` is a mount point.
    pub mount: Option<MountInfo>,
    /// `main.py` in `HOME` could be appended to.
    pub app_writable: bool,
    /// A module could be planted in `HOME/lib`.
    pub app_planted: bool,
    /// What `HOME/secret` reads.
    pub secret: String,
    /// The image's files that could be appended to, and the files that
    /// could be created, under `HOME` or beside a symlink's target.
    pub opened: Vec<String>,
    /// The entries of `HOME` that could be renamed away.
    pub renamed: Vec<String>,
    /// The caches of [`PROBED_CACHES`] the process could write into.
    pub caches: Vec<String>,
    /// uid, gid and octal mode of `HOME/.triton`.
    pub cache_stat: String,
    /// The top mount at `HOME/.triton`, if it is a mount point.
    pub cache_mount: Option<MountInfo>,
    pub out: String,
}

impl Seen {
    pub fn parse(out: &str) -> Seen {
        let field = |key: &str| {
            out.lines()
                .find_map(|l| l.strip_prefix(&format!("{key}=[")).and_then(|v| v.strip_suffix(']')))
                .map(String::from)
        };
        let all = |key: &str| -> Vec<String> {
            out.lines()
                .filter_map(|l| l.strip_prefix(&format!("{key}=["))?.strip_suffix(']'))
                .map(String::from)
                .collect()
        };
        let home = field("HOME").unwrap_or_else(|| "(no HOME line)".into());
        let mounts = parse_mountinfo(out);
        let mount = mounts.iter().rev().find(|m| m.mount_point == home).cloned();
        // crun 1.8.1 leaves HOME unset for a uid without an entry: `$HOME/.triton` is `/.triton`.
        let base = if home == "(unset)" { "" } else { home.trim_end_matches('/') };
        let cache_at = format!("{base}/.triton");
        let cache_mount = mounts.iter().rev().find(|m| m.mount_point == cache_at).cloned();
        Seen {
            app_writable: out.lines().any(|l| l == "APP-WRITABLE"),
            app_planted: out.lines().any(|l| l == "APP-PLANTED"),
            secret: field("SECRET").unwrap_or_else(|| "(no SECRET line)".into()),
            opened: all("OPENED"),
            renamed: all("RENAMED"),
            caches: all("CACHE-WRITABLE"),
            // `stat` prints no line when there is no `HOME/.triton`.
            cache_stat: field("CACHESTAT").unwrap_or_else(|| "(no HOME/.triton)".into()),
            cache_mount,
            profile: field("PROFILE").unwrap_or_else(|| "(no PROFILE line)".into()),
            volume: field("VOLUME").unwrap_or_else(|| "(no VOLUME line)".into()),
            writable: out.lines().any(|l| l == "HOME-WRITABLE"),
            stat: field("STAT").unwrap_or_else(|| "(no STAT line)".into()),
            mount,
            home,
            out: out.to_string(),
        }
    }

    /// One line of what was seen, for a report.
    pub fn summary(&self) -> String {
        format!(
            "HOME={}, {}, stat {:?}, .profile {:?}, mount {}, caches {:?}, opened {:?}, renamed {:?}",
            self.home,
            if self.writable { "writable" } else { "NOT writable" },
            self.stat,
            self.profile,
            self.mount.as_ref().map_or("none".into(), |m| format!(
                "{} {} {}",
                m.fstype,
                m.source,
                sz(m.size())
            )),
            self.caches,
            self.opened,
            self.renamed,
        )
    }

    /// The failed checks that nothing of the image under `HOME` opened up:
    /// no new file in `HOME`, none of its files appended to or created, no
    /// entry renamed away, the app's files and modules as they were.
    pub fn sealed(&self) -> Vec<String> {
        let mut failed = Vec::new();
        let mut check = |ok: bool, what: String| {
            if !ok {
                failed.push(what);
            }
        };
        check(!self.writable, format!("a new file could be made in HOME {:?}", self.home));
        check(self.opened.is_empty(), format!("files under HOME opened up: {:?}", self.opened));
        check(self.renamed.is_empty(), format!("entries of HOME renamed away: {:?}", self.renamed));
        check(!self.app_writable, "the app's main.py could be written".into());
        check(!self.app_planted, "a module could be planted beside the app".into());
        failed
    }

    /// The failed checks of a `HOME` at `home` that stays the image's,
    /// read-only ([`Seen::sealed`]), with `caches` of [`PROBED_CACHES`]
    /// writable and, where `.triton` is one, it is our tmpfs of `uid`,
    /// mode 0700 (docs/design.md#home-rule).
    pub fn cached(&self, home: &str, uid: u32, caches: &[&str]) -> Vec<String> {
        let mut failed = self.sealed();
        let mut check = |ok: bool, what: String| {
            if !ok {
                failed.push(what);
            }
        };
        check(self.home == home, format!("HOME is {:?}, want {home:?}", self.home));
        check(
            self.mount.as_ref().is_none_or(|m| m.source != OURS),
            format!("HOME has a mount of ours: {:?}", self.mount),
        );
        check(self.caches == caches, format!("the caches written: {:?}, want {caches:?}", self.caches));
        if caches.contains(&".triton") {
            check(
                self.cache_mount.as_ref().is_some_and(|m| m.source == OURS && m.fstype == "tmpfs"),
                format!("HOME/.triton is not our tmpfs: {:?}", self.cache_mount),
            );
            let stat: Vec<&str> = self.cache_stat.split(' ').collect();
            check(
                stat.len() == 3 && stat[0] == uid.to_string() && stat[2] == "700",
                format!("HOME/.triton's uid gid mode {:?}, want uid {uid} mode 700", self.cache_stat),
            );
        }
        failed
    }

    /// The failed checks of a `HOME` at `home` left alone: no mount of
    /// ours there, nothing under it writable, no cache either.
    pub fn left_alone(&self, home: &str) -> Vec<String> {
        let mut failed = self.sealed();
        if self.home != home {
            failed.push(format!("HOME is {:?}, want {home:?}", self.home));
        }
        if self.mount.as_ref().is_some_and(|m| m.source == OURS) {
            failed.push(format!("HOME has a mount of ours: {:?}", self.mount));
        }
        if !self.caches.is_empty() {
            failed.push(format!("caches written in a HOME left alone: {:?}", self.caches));
        }
        failed
    }

    /// The failed checks of a `HOME` of `/` (or none, crun 1.8.1) for `uid`:
    /// `/` stays read-only, and the caches under it are the process's
    /// writable tmpfs (docs/design.md#home-rule).
    pub fn root_caches(&self, uid: u32) -> Vec<String> {
        let home = if self.home == "(unset)" { "(unset)" } else { "/" };
        self.cached(home, uid, &PROBED_CACHES)
    }

    /// The failed checks of a volume at `HOME` (`/root`): its file seen,
    /// writable, nothing of ours there.
    pub fn volume(&self) -> Vec<String> {
        let mut failed = Vec::new();
        if self.home != "/root" {
            failed.push(format!("HOME is {:?}, want /root", self.home));
        }
        if self.volume != VOLUME_TEXT {
            failed.push(format!("the volume's file reads {:?}", self.volume));
        }
        if self.mount.as_ref().is_none_or(|m| m.source == OURS || m.fstype == "tmpfs") {
            failed.push(format!("HOME is not the volume: {:?}", self.mount));
        }
        if !self.writable {
            failed.push("the volume at HOME is not writable".into());
        }
        failed
    }
}

/// The warning lines of `log` about a `HOME` of `/` (the runtime's, for a
/// uid without a passwd entry).
pub fn root_home_warnings(log: &str) -> Vec<&str> {
    log.lines()
        .filter(|l| l.contains("warning") && (l.contains("HOME=/") || l.contains("the runtime gives /")))
        .collect()
}

/// The failed checks of the hook's log `log` about a `HOME` of `/`: no
/// warning, and one line saying that the caches under `/` get a tmpfs
/// (docs/design.md#home-rule).
pub fn root_home_caches(log: &str) -> Vec<String> {
    let mut failed = Vec::new();
    let warned = root_home_warnings(log);
    if !warned.is_empty() {
        failed.push(format!("a warning about HOME=/: {warned:?}"));
    }
    let said: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("HOME=/: read-only; cache tmpfs at /.cache, /.config, /.triton"))
        .collect();
    if said.len() != 1 {
        failed.push(format!("want one line about the caches under /, found {}: {log}", said.len()));
    }
    failed
}

/// The pod case: a read-only 1 GiB container of the HOME image as root
/// (`HOME=/root` stays the image's, read-only, `.profile` as the image made
/// it; its caches are root's writable tmpfs), as uid 1000 with no passwd
/// entry (`HOME=/`, read-only, the caches under it writable, in every way
/// in), and with a volume at `/root` (the volume wins). pid 1's `HOME` is
/// the one checked.
pub fn pod_home(node: &mut Node, r: &mut Report) {
    let log = node.dir.join(format!("home{}.log", node.way.suffix()));
    node.host_config(&format!("log_level = \"info\"\nlog_file = {log:?}\n"));
    let image = node.image("home", shape_image);
    let Some(pod) = r.step("RunPodSandbox", node.run_pod("home", &PodOpts::default())) else { return };
    let probe = probe_as_pid1();
    let run = |r: &mut Report, name: &str, opts: CtrOpts| -> Option<(String, Seen)> {
        let c = r.step(&format!("{name}: start"), node.start_container(&pod, &opts))?;
        let (_, out, _) = r.step(&format!("{name}: probe"), node.exec(&c, &["sh", "-c", &probe]))?;
        let seen = Seen::parse(&out);
        r.seen(name, seen.summary());
        Some((c, seen))
    };
    let mut ids = Vec::new();

    let root = CtrOpts { image: Some(&image), ..CtrOpts::ro("root", GI) };
    if let Some((c, seen)) = run(r, "root", root) {
        for f in seen.cached("/root", 0, &PROBED_CACHES) {
            r.check(false, format!("root: {f}"));
        }
        r.check(seen.profile == PROFILE, format!("root: .profile is {:?}", seen.profile));
        ids.push(c);
    }

    let user = CtrOpts { image: Some(&image), user: Some(1000), ..CtrOpts::ro("uid1000", GI) };
    if let Some((c, seen)) = run(r, "uid 1000", user) {
        let text = r.read(&log);
        let ours: Vec<&str> = text.lines().filter(|l| l.contains(&c)).collect();
        for f in seen.root_caches(1000) {
            r.check(false, format!("uid 1000: {f}"));
        }
        for f in root_home_caches(&ours.join("\n")) {
            r.check(false, format!("uid 1000: {f}"));
        }
        ids.push(c);
    }

    let host = volume_dir("home-volume");
    let mounts = [vol("/root", &host.0, "PROPAGATION_PRIVATE")];
    let volume = CtrOpts { image: Some(&image), mounts: &mounts, ..CtrOpts::ro("volume", GI) };
    if let Some((c, seen)) = run(r, "volume at /root", volume) {
        for f in seen.volume() {
            r.check(false, format!("volume at /root: {f}"));
        }
        ids.push(c);
    }
    let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
    r.step("stop and remove", node.teardown(&pod, &ids));
}

/// The pod case without us (containerd's default runc handler beside the
/// wrapper's, or the NRI plugin stopped): root's `HOME=/root` and uid
/// 1000's `HOME=/` are not writable in a read-only container, nor any
/// cache under them.
pub fn pod_home_without_us(node: &mut Node, r: &mut Report) {
    let (handler, without) = if node.way == Executor::Nri {
        node.stop_plugin();
        (None, "plugin stopped")
    } else {
        (Some(""), "runc handler")
    };
    let image = node.image("home", shape_image);
    let opts = PodOpts { handler, ..PodOpts::default() };
    let Some(pod) = r.step("RunPodSandbox", node.run_pod("home-without", &opts)) else { return };
    let probe = probe_as_pid1();
    let mut ids = Vec::new();
    for (name, uid, home) in [("root", None, "/root"), ("uid1000", Some(1000), "/")] {
        let opts = CtrOpts { image: Some(&image), user: uid, ..CtrOpts::ro(name, GI) };
        let Some(c) = r.step(&format!("{without}, {name}: start"), node.start_container(&pod, &opts)) else {
            continue;
        };
        if let Some((_, out, _)) = r.step("probe", node.exec(&c, &["sh", "-c", &probe])) {
            let seen = Seen::parse(&out);
            r.seen(&format!("{without}, {name}"), seen.summary());
            for f in seen.left_alone(home) {
                r.check(false, format!("{without}, {name}: {f}"));
            }
        }
        ids.push(c);
    }
    let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
    r.step("stop and remove", node.teardown(&pod, &ids));
}

// ------------------------------------------------------- hostile HOMEs
//
// The hostile `HOME`s and passwd files, written once: tests/runtimes/home.rs
// runs them through bare runc and crun bundles, [`pod_hostile_homes`]
// through a CRI node (both wrapper modes, and the NRI plugin).

/// What a hostile case must end in. In every case nothing of the image
/// under `HOME` opens up ([`Seen::sealed`]), unless `HOME` is a volume.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expect {
    /// `HOME` and every cache under it get no tmpfs of ours.
    LeftAlone,
    /// `HOME` stays the image's, read-only; these caches of
    /// [`PROBED_CACHES`] are the process's, writable.
    Caches(&'static str, &'static [&'static str]),
    /// The runtime gives `HOME=/` (crun 1.8.1 none): `/` stays read-only,
    /// the caches under it are the process's, writable, in every executor.
    RootCaches,
}

/// Both caches of [`PROBED_CACHES`].
pub const BOTH: &[&str] = &PROBED_CACHES;

/// One hostile layout.
pub struct Hostile {
    pub name: &'static str,
    pub uid: u32,
    pub passwd: String,
    pub env: &'static [&'static str],
    /// Makes it in the rootfs.
    pub make: fn(&Path),
    /// Where the volume (a host dir holding `mine`) is mounted.
    pub volume_at: &'static str,
    /// A part of the warning the hook logs or the spec executor prints
    /// (empty: none asserted).
    pub note: &'static str,
    pub expect: Expect,
    /// containerd's CRI, from the first (major, minor) version on and before
    /// the second, refuses the image with this error at `CreateContainer`,
    /// before any runtime runs (so before the wrapper, the plugin and the
    /// hook): it reads the image's `/etc/passwd` itself for the container's
    /// user and its additional gids, whatever the user. Other versions
    /// create the container, and the case runs as any other.
    pub cri_refuses: Option<CriRefusal>,
}

impl Hostile {
    /// The home that keeps an app, for a case that expects its caches only.
    pub fn app_home(&self) -> Option<&'static str> {
        match self.expect {
            Expect::Caches(home, _) => Some(home.trim_start_matches('/')),
            _ => None,
        }
    }

    /// `HOME` is the volume, or reaches it: the volume's to write.
    pub fn home_is_volume(&self) -> bool {
        self.name.starts_with("HOME") && self.name.contains("volume")
    }
}

/// A home that `make` never creates outside the rootfs: the passwd case
/// that tries to reach it through `..`.
pub const ESCAPE: &str = "/oth-home-escape";

/// A case with its volume at `/data`; `passwd` lines follow root's.
pub fn case(
    name: &'static str,
    uid: u32,
    passwd: &str,
    env: &'static [&'static str],
    make: fn(&Path),
    note: &'static str,
    expect: Expect,
) -> Hostile {
    let passwd = if passwd.is_empty() { ROOT_LINE.to_string() } else { format!("{ROOT_LINE}{passwd}") };
    Hostile { name, uid, passwd, env, make, volume_at: "/data", note, expect, cri_refuses: None }
}

/// Does nothing to the rootfs.
pub fn untouched(_: &Path) {}

/// The hostile `HOME`s of the environment.
pub fn env_cases() -> Vec<Hostile> {
    let none: fn(&Path) = untouched;
    let mut v = vec![
        case("HOME=/", 1000, "", &["HOME=/"], none, "", Expect::RootCaches),
        case("HOME=/etc", 0, "", &["HOME=/etc"], none, "system directory", Expect::LeftAlone),
        case("HOME=/proc/self", 0, "", &["HOME=/proc/self"], none, "system directory", Expect::LeftAlone),
        case("a relative HOME", 0, "", &["HOME=home/u"], none, "not an absolute path", Expect::LeftAlone),
        case("a HOME with ..", 0, "", &["HOME=/home/../etc"], none, "'..'", Expect::LeftAlone),
        case("an empty HOME", 0, "", &["HOME="], none, "is empty", Expect::LeftAlone),
        // runc and crun keep the last (docs/design.md#env-last).
        case(
            "two HOME= entries",
            0,
            "",
            &["HOME=/first", "HOME=/second"],
            none,
            "",
            Expect::Caches("/second", BOTH),
        ),
        case(
            "HOME a symlink to a volume",
            0,
            "",
            &["HOME=/home/u"],
            |r| {
                std::fs::create_dir(r.join("home")).unwrap();
                std::os::unix::fs::symlink("/data", r.join("home/u")).unwrap();
            },
            "",
            Expect::LeftAlone,
        ),
        case("HOME itself a volume", 0, "", &["HOME=/data"], none, "", Expect::LeftAlone),
        case(
            "HOME a file",
            0,
            "",
            &["HOME=/homefile"],
            |r| std::fs::write(r.join("homefile"), "x").unwrap(),
            "other than a directory",
            Expect::LeftAlone,
        ),
        case(
            "HOME a FIFO",
            0,
            "",
            &["HOME=/homefifo"],
            |r| mkfifo(&r.join("homefifo")),
            "other than a directory",
            Expect::LeftAlone,
        ),
    ];
    // A volume under HOME: HOME stays the image's, the volume visible, the
    // caches beside it the process's.
    v.push(Hostile {
        volume_at: "/srv/data",
        ..case("a volume under HOME", 0, "", &["HOME=/srv"], none, "", Expect::Caches("/srv", BOTH))
    });
    // A volume at a cache (a model store at ~/.cache/huggingface): the
    // volume wins, and the other caches, in .cache and beside it, still
    // get theirs.
    v.push(Hostile {
        volume_at: "/root/.cache/huggingface",
        ..case(
            "a volume at .cache/huggingface",
            0,
            "",
            &[],
            |r| std::fs::create_dir_all(r.join("root")).unwrap(),
            "",
            Expect::Caches("/root", BOTH),
        )
    });
    v
}

/// containerd versions (major, minor) from which and before which its CRI
/// refuses a hostile image at `CreateContainer`, and the error's words.
pub type CriRefusal = ((u32, u32), (u32, u32), &'static str);

/// The hostile passwd files.
pub fn passwd_cases() -> Vec<Hostile> {
    let none: fn(&Path) = untouched;
    vec![
        // containerd before 2.3: "mount callback failed on ...: too many
        // links"; 2.3.4 creates the container.
        Hostile {
            cri_refuses: Some(((1, 0), (2, 3), "too many links")),
            ..case(
                "/etc/passwd a symlink to the host's",
                1000,
                "",
                &[],
                |r| {
                    std::fs::remove_file(r.join("etc/passwd")).unwrap();
                    std::os::unix::fs::symlink("../../../../../../etc/passwd", r.join("etc/passwd")).unwrap();
                },
                "cannot be opened",
                Expect::LeftAlone,
            )
        },
        // containerd 2.x: "mount callback failed on ...: .../etc/passwd
        // exceeds 10485760 bytes".
        Hostile {
            cri_refuses: Some(((2, 0), (u32::MAX, 0), "exceeds 10485760 bytes")),
            ..case(
                "a 100 MB /etc/passwd",
                1000,
                "",
                &[],
                |r| {
                    // Valid lines (runc reads them all), none for uid 1000.
                    use std::io::Write;
                    let mut f = std::io::BufWriter::new(std::fs::File::create(r.join("etc/passwd")).unwrap());
                    f.write_all(ROOT_LINE.as_bytes()).unwrap();
                    for i in 0..4_000_000u32 {
                        writeln!(f, "u{i}:x:{}:0::/h:/bin/sh", 2000 + i).unwrap();
                    }
                },
                "larger than 1Mi",
                Expect::LeftAlone,
            )
        },
        case(
            "a passwd home of /../..",
            1000,
            "u:x:1000:0::/../../oth-home-escape:/bin/sh\n",
            &[],
            none,
            "'..'",
            Expect::LeftAlone,
        ),
        case(
            "two entries for one uid",
            1000,
            "a:x:1000:0::/home/first:/bin/sh\nb:x:1000:0::/home/second:/bin/sh\n",
            &[],
            none,
            "",
            Expect::Caches("/home/first", BOTH),
        ),
        case(
            "binary garbage in /etc/passwd",
            1000,
            "",
            &[],
            |r| std::fs::write(r.join("etc/passwd"), b"\x00\x01garbage:::\n\x7fELF\xff\xfe:1000:x").unwrap(),
            "",
            Expect::RootCaches,
        ),
    ]
}

/// The hostile image homes: past what a copy of the home could hold, a
/// home holding device nodes and sockets, and another uid's. `HOME` is
/// never copied: its caches work whatever it holds.
pub fn image_home_cases() -> Vec<Hostile> {
    vec![
        case(
            "an image home with 100,000 files",
            0,
            "",
            &[],
            |r| {
                std::fs::create_dir(r.join("root")).unwrap();
                for i in 0..100_000 {
                    std::fs::File::create(r.join(format!("root/.f{i}"))).unwrap();
                }
            },
            "",
            Expect::Caches("/root", BOTH),
        ),
        case(
            "an image home with a 1 GiB file",
            0,
            "",
            &[],
            |r| {
                std::fs::create_dir(r.join("root")).unwrap();
                std::fs::File::create(r.join("root/.big")).unwrap().set_len(1 << 30).unwrap();
            },
            "",
            Expect::Caches("/root", BOTH),
        ),
        case(
            "a home holding device nodes and sockets",
            0,
            "",
            &[],
            |r| {
                std::fs::create_dir(r.join("root")).unwrap();
                std::fs::write(r.join("root/.profile"), "image profile").unwrap();
                std::os::unix::net::UnixListener::bind(r.join("root/.sock")).unwrap();
                ok(std::process::Command::new("mknod").arg(r.join("root/.null")).args(["c", "1", "3"]));
            },
            "",
            Expect::Caches("/root", BOTH),
        ),
        case(
            "a HOME owned by another uid",
            1000,
            "u:x:1000:0::/home/bob:/bin/sh\n",
            &[],
            |r| {
                std::fs::create_dir_all(r.join("home/bob")).unwrap();
                std::os::unix::fs::chown(r.join("home/bob"), Some(1001), Some(1001)).unwrap();
            },
            "belongs to uid 1001",
            Expect::LeftAlone,
        ),
    ]
}

/// What an image's home holds when it is more than a home: written by
/// `make` of [`security_cases`] (`dir`, owned by `uid`, mode 0755).
fn app_home(r: &Path, dir: &str, uid: u32, files: &[(&str, &str)]) {
    let home = r.join(dir.trim_start_matches('/'));
    std::fs::create_dir_all(&home).unwrap();
    for (name, text) in files {
        let f = home.join(name);
        std::fs::create_dir_all(f.parent().unwrap()).unwrap();
        std::fs::write(&f, text).unwrap();
        std::os::unix::fs::chown(&f, Some(uid), Some(uid)).unwrap();
        std::os::unix::fs::chown(f.parent().unwrap(), Some(uid), Some(uid)).unwrap();
    }
    std::os::unix::fs::chown(&home, Some(uid), Some(uid)).unwrap();
    std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// The app every [`security_cases`] home keeps, and what it says.
pub const APP: &str = "print('the app')\n";

/// A read-only root is a security control (docs/design.md#home-rule): the
/// homes whose files a writable `HOME` would open up. An app kept in its
/// user's home, php-fpm's site under `www-data`'s, a Node app under
/// `node`'s: `HOME` stays the image's, only the caches are writable. uid
/// 1000 with `HOME=/root`: root's home, left alone.
pub fn security_cases() -> Vec<Hostile> {
    vec![
        case(
            "an app kept in its user's home",
            1000,
            "app:x:1000:1000::/home/app:/bin/sh\n",
            &[],
            |r| {
                app_home(
                    r,
                    "/home/app",
                    1000,
                    &[("main.py", APP), ("lib/util.py", "x = 1\n"), (".profile", PROFILE)],
                )
            },
            "",
            Expect::Caches("/home/app", BOTH),
        ),
        case(
            "php-fpm's site in www-data's home",
            33,
            "www-data:x:33:33:www-data:/var/www:/usr/sbin/nologin\n",
            &[],
            |r| {
                app_home(
                    r,
                    "/var/www",
                    33,
                    &[("main.py", APP), ("html/index.php", "<?php echo 1;"), ("lib/x.php", "")],
                )
            },
            "",
            Expect::Caches("/var/www", BOTH),
        ),
        case(
            "a Node app in node's home",
            1000,
            "node:x:1000:1000::/home/node:/bin/sh\n",
            &[],
            |r| {
                app_home(r, "/home/node", 1000, &[("main.py", APP), ("app/index.js", "1;"), ("lib/m.js", "")])
            },
            "",
            Expect::Caches("/home/node", BOTH),
        ),
        case(
            "uid 1000 with HOME=/root",
            1000,
            "",
            &["HOME=/root"],
            |r| {
                let root = r.join("root");
                std::fs::create_dir_all(&root).unwrap();
                std::fs::write(root.join(".bashrc"), "echo root's bashrc").unwrap();
                std::fs::write(root.join("secret"), "root's").unwrap();
                std::fs::set_permissions(root.join("secret"), std::fs::Permissions::from_mode(0o644))
                    .unwrap();
                std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o700)).unwrap();
            },
            "TRITON_CACHE_DIR",
            Expect::LeftAlone,
        ),
    ]
}

/// A file of `text` at `rel` under the rootfs `r`, its directories made,
/// the file and its directories up to `top` (relative to `r`) owned by
/// `uid`.
fn put(r: &Path, rel: &str, text: &str, top: &str, uid: u32) {
    assert!(Path::new(rel).starts_with(top), "{top} is not above {rel}");
    let f = r.join(rel);
    std::fs::create_dir_all(f.parent().unwrap()).unwrap();
    std::fs::write(&f, text).unwrap();
    let mut p = f.as_path();
    loop {
        std::os::unix::fs::chown(p, Some(uid), Some(uid)).unwrap();
        if p == r.join(top) {
            break;
        }
        p = p.parent().unwrap();
    }
}

/// Dot-entries hold code (docs/design.md#home-rule): homes as real images
/// build them, where a writable `HOME`, or a copy of it, would let a
/// process plant code that a later process runs or replace what it runs.
/// `HOME` stays the image's; only the caches are the process's.
pub fn dotfile_cases() -> Vec<Hostile> {
    let app = "app:x:1000:1000::/home/app:/bin/sh\n";
    vec![
        // `pip install --user`, then `USER app`: the home holds only `.local`.
        case(
            "pip install --user, then USER app",
            1000,
            app,
            &[],
            |r| {
                put(
                    r,
                    "home/app/.local/lib/python3.11/site-packages/pkg/__init__.py",
                    "x = 1\n",
                    "home/app",
                    1000,
                );
                put(r, "home/app/.local/bin/tool", "#!/bin/sh\n", "home/app", 1000);
            },
            "",
            Expect::Caches("/home/app", BOTH),
        ),
        // The PyTorch and CUDA images' /root.
        case(
            "root's home holding .bashrc and .profile",
            0,
            "",
            &[],
            |r| {
                put(r, "root/.bashrc", "# image bashrc\n", "root", 0);
                put(r, "root/.profile", "image profile", "root", 0);
            },
            "",
            Expect::Caches("/root", BOTH),
        ),
        case(
            "an sshd's home",
            1000,
            "sshd:x:1000:1000::/home/sshd:/bin/sh\n",
            &[],
            |r| {
                put(r, "home/sshd/.ssh/authorized_keys", "ssh-ed25519 AAAA image\n", "home/sshd", 1000);
                std::fs::set_permissions(r.join("home/sshd/.ssh"), std::fs::Permissions::from_mode(0o700))
                    .unwrap();
            },
            "",
            Expect::Caches("/home/sshd", BOTH),
        ),
        case(
            "interpreters in HOME",
            0,
            "",
            &[],
            |r| {
                put(r, "root/.pyenv/versions/3.12/bin/python", "#!/bin/sh\n", "root", 0);
                put(r, "root/.venv/bin/python", "#!/bin/sh\n", "root", 0);
            },
            "",
            Expect::Caches("/root", BOTH),
        ),
        // Root-owned entries in a user's home: a tmpfs of the process's
        // would let it rename them away and put its own in their place.
        case(
            "root-owned entries in a user's home",
            1000,
            app,
            &[],
            |r| {
                put(r, "home/app/main.py", APP, "home/app", 1000);
                for f in [".venv/bin/python", ".bashrc", ".ssh/authorized_keys", ".config/app.toml"] {
                    let top = f.split('/').next().unwrap();
                    put(r, &format!("home/app/{f}"), "root's\n", &format!("home/app/{top}"), 0);
                }
            },
            ".config/matplotlib left alone",
            Expect::Caches("/home/app", BOTH),
        ),
    ]
}

/// The caches themselves, as images hold them: a symlink out of `HOME`
/// (never followed), and what dropped a whole home before (a large
/// `.local`, a pre-baked model in `.cache`): the image's files stay, the
/// other caches still work.
pub fn cache_cases() -> Vec<Hostile> {
    let app = "app:x:1000:1000::/home/app:/bin/sh\n";
    vec![
        case(
            "a cache that is a symlink into the app",
            1000,
            app,
            &[],
            |r| {
                put(r, "home/app/main.py", APP, "home/app", 1000);
                put(r, "home/app/lib/util.py", "x = 1\n", "home/app", 1000);
                std::os::unix::fs::symlink("/home/app/lib", r.join("home/app/.cache")).unwrap();
            },
            "a symlink in the image",
            Expect::Caches("/home/app", &[".triton"]),
        ),
        case(
            "caches that are symlinks to data and models",
            0,
            "",
            &[],
            |r| {
                put(r, "opt/data/set.csv", "1,2\n", "opt/data", 0);
                put(r, "opt/models/m.bin", "weights", "opt/models", 0);
                put(r, "root/.profile", "image profile", "root", 0);
                std::os::unix::fs::symlink("/opt/data", r.join("root/.cache")).unwrap();
                std::os::unix::fs::symlink("/opt/models", r.join("root/.triton")).unwrap();
            },
            "a symlink in the image",
            Expect::Caches("/root", &[]),
        ),
        case(
            "a 5,000-file .local",
            0,
            "",
            &[],
            |r| {
                std::fs::create_dir_all(r.join("root/.local/lib")).unwrap();
                for i in 0..5000 {
                    std::fs::File::create(r.join(format!("root/.local/lib/m{i}.py"))).unwrap();
                }
            },
            "",
            Expect::Caches("/root", BOTH),
        ),
        case(
            "a pre-baked model in .cache/huggingface",
            0,
            "",
            &[],
            |r| {
                put(r, "root/.cache/huggingface/hub/model.bin", &"w".repeat(1 << 20), "root", 0);
                put(r, "root/.cache/pip/x", "pip's", "root", 0);
            },
            ".cache/huggingface left alone",
            Expect::Caches("/root", BOTH),
        ),
    ]
}

/// Every hostile case: the environment's, the passwd files', the image
/// homes', and the homes a writable `HOME` would open up.
pub fn hostile_cases() -> Vec<Hostile> {
    env_cases()
        .into_iter()
        .chain(passwd_cases())
        .chain(image_home_cases())
        .chain(security_cases())
        .chain(dotfile_cases())
        .chain(cache_cases())
        .collect()
}

/// The failed checks of what case `c` saw of its `HOME` (`seen`): the same
/// in every executor (docs/design.md#home-rule).
pub fn home_failures(c: &Hostile, seen: &Seen) -> Vec<String> {
    let mut failed = match c.expect {
        Expect::Caches(home, caches) => seen.cached(home, c.uid, caches),
        Expect::RootCaches => seen.root_caches(c.uid),
        Expect::LeftAlone => {
            let mut failed = Vec::new();
            if seen.mount.as_ref().is_some_and(|m| m.source == OURS) {
                failed.push(format!("a tmpfs of ours at HOME {:?}: {:?}", seen.home, seen.mount));
            }
            // A HOME that is (or reaches) a volume is the volume's to write.
            if !c.home_is_volume() {
                failed.extend(seen.sealed());
                if !seen.caches.is_empty() {
                    failed.push(format!("caches written in a HOME left alone: {:?}", seen.caches));
                }
            }
            failed
        }
    };
    match c.name {
        "a home holding device nodes and sockets" | "caches that are symlinks to data and models"
            if seen.profile != "image profile" =>
        {
            failed.push(format!("HOME/.profile is {:?}", seen.profile));
        }
        "uid 1000 with HOME=/root" if !seen.secret.is_empty() => {
            failed.push(format!("uid 1000 read root's file: {:?}", seen.secret));
        }
        _ => {}
    }
    failed
}

/// `mkfifo(1)`.
pub fn mkfifo(p: &Path) {
    ok(std::process::Command::new("mkfifo").arg(p));
}

/// The file a hostile case's volume holds, and its text.
const MINE: &str = "mine";
const MINE_TEXT: &str = "volume";

/// The last `HOME=` of a list of `KEY=value` entries.
fn last_home<'a>(env: impl DoubleEndedIterator<Item = &'a str>) -> Option<String> {
    env.rev().find_map(|e| e.strip_prefix("HOME=")).map(String::from)
}

/// The hostile cases through a CRI node (tests/runtimes/cri.rs: the
/// wrapper's two handlers; tests/nri/: the plugin), each in a read-only
/// container of its own in one pod per way, of an image built from the
/// busybox rootfs with the case's `/etc/passwd` and `make` (built once per
/// node: `images`), run as the case's uid with its environment and a volume
/// (a host directory holding a file) at its `volume_at`. For each: the
/// container starts; `HOME` (pid 1's) is as the case expects; where it is
/// left alone, nothing of ours is at it; the volume's file is seen in the
/// container and unchanged on the host, and no tmpfs of ours is at the
/// volume or above it; no mount of ours or on the volume appears in the
/// host's, this test's or the node's mount table, while it runs or after;
/// nothing is made outside the rootfs; no executor changes the
/// environment; the case's note is in the log, and a `HOME=/` gets one line
/// about its caches and no warning.
pub fn pod_hostile_homes(node: &mut Node, r: &mut Report, images: &mut Vec<String>) {
    let cases = hostile_cases();
    if images.is_empty() {
        let t0 = std::time::Instant::now();
        for (i, c) in cases.iter().enumerate() {
            images.push(node.image(&format!("home-hostile-{i}"), |root| {
                std::fs::write(root.join("etc/passwd"), &c.passwd).unwrap();
                (c.make)(root);
                std::fs::create_dir_all(root.join(c.volume_at.trim_start_matches('/'))).unwrap();
            }));
        }
        r.seen("images", format!("{} built and imported in {:?}", images.len(), t0.elapsed()));
    }
    let log = node.dir.join(format!("home-hostile{}.log", node.way.suffix()));
    node.host_config(&format!("log_level = \"info\"\nlog_file = {log:?}\n"));
    let tables = node.mount_tables();
    let Some(pod) = r.step("RunPodSandbox", node.run_pod("home-hostile", &PodOpts::default())) else {
        return;
    };
    for (i, c) in cases.iter().enumerate() {
        hostile_home(node, r, &pod, c, &images[i], &log, i);
    }
    r.step("stop and remove the pod", node.teardown(&pod, &[]));
    check_tables(r, "after the pod", &tables, &node.mount_tables(), &[&node.dir.0]);
}

/// One hostile case of [`pod_hostile_homes`], container number `i` of `pod`.
fn hostile_home(node: &mut Node, r: &mut Report, pod: &Pod, c: &Hostile, image: &str, log: &Path, i: usize) {
    let what = c.name;
    let vol_dir = node.dir.join(unique("home-vol"));
    std::fs::create_dir(&vol_dir).unwrap();
    std::fs::write(vol_dir.join(MINE), MINE_TEXT).unwrap();
    let tables = node.mount_tables();
    let env: Vec<(&str, &str)> = c.env.iter().map(|e| e.split_once('=').expect("KEY=value")).collect();
    let mounts = [vol(c.volume_at, &vol_dir, "PROPAGATION_PRIVATE")];
    let name = format!("case{i}");
    let opts = CtrOpts {
        image: Some(image),
        user: Some(c.uid),
        env: &env,
        mounts: &mounts,
        ..CtrOpts::ro(&name, GI)
    };
    let started = node.start_container(pod, &opts);
    let v = node.ctd.major_minor();
    if let Some((_, _, refusal)) = c.cri_refuses.filter(|(from, until, _)| (*from..*until).contains(&v)) {
        r.seen(&format!("{what}: start"), format!("{started:?}"));
        r.check(
            started.as_ref().is_err_and(|e| e.contains("CreateContainer") && e.contains(refusal)),
            format!("{what}: not containerd's refusal {refusal:?} at CreateContainer: {started:?}"),
        );
        if let Ok(id) = started {
            remove(node, r, what, &id);
        }
        check_tables(r, &format!("{what}, after"), &tables, &node.mount_tables(), &[&vol_dir]);
        return;
    }
    let Some(id) = r.step(&format!("{what}: start"), started) else { return };
    let script = format!("printf 'MINE=[%s]\\n' \"$(cat {}/{MINE} 2>&1)\"; {}", c.volume_at, probe_as_pid1());
    let out = r.text(&format!("{what}: probe"), node.exec(&id, &["sh", "-c", &script]).map(|x| x.1));
    let seen = Seen::parse(&out);
    r.seen(what, seen.summary());
    check_home(r, c, &seen);
    check_volume(r, c, &seen, &vol_dir);
    for p in [ESCAPE, "/home/first"] {
        r.check(!Path::new(p).exists(), format!("{what}: {p} exists on the host"));
        r.check(!node.ns_path(p).exists(), format!("{what}: {p} exists on the node"));
    }
    check_env_and_log(node, r, c, &id, log);
    check_tables(r, &format!("{what}, running"), &tables, &node.mount_tables(), &[&vol_dir]);
    remove(node, r, what, &id);
    check_tables(r, &format!("{what}, after"), &tables, &node.mount_tables(), &[&vol_dir]);
}

/// The checks of [`pod_hostile_homes`] on what case `c` saw of its `HOME`
/// ([`home_failures`]).
fn check_home(r: &mut Report, c: &Hostile, seen: &Seen) {
    for f in home_failures(c, seen) {
        r.check(false, format!("{}: {f}", c.name));
    }
}

/// The checks of [`pod_hostile_homes`] on case `c`'s volume (host directory
/// `vol_dir`): its file seen in the container and unchanged, no tmpfs of
/// ours at or above it, nothing written into it unless it is `HOME`.
fn check_volume(r: &mut Report, c: &Hostile, seen: &Seen, vol_dir: &Path) {
    let what = c.name;
    let mut fail = |ok: bool, msg: String| r.check(ok, format!("{what}: {msg}"));
    let mine = seen.out.lines().find_map(|l| l.strip_prefix("MINE=[")?.strip_suffix(']')).unwrap_or("");
    fail(mine == MINE_TEXT, format!("the volume's file at {} reads {mine:?}", c.volume_at));
    let mounts = parse_mountinfo(&seen.out);
    let covering: Vec<String> = mounts
        .iter()
        .filter(|m| m.source == OURS)
        .filter(|m| c.volume_at == m.mount_point || c.volume_at.starts_with(&format!("{}/", m.mount_point)))
        .map(mount_line)
        .collect();
    fail(covering.is_empty(), format!("a tmpfs of ours at or above the volume: {covering:?}"));
    fail(
        std::fs::read_to_string(vol_dir.join(MINE)).ok().as_deref() == Some(MINE_TEXT),
        "the volume's file changed on the host".into(),
    );
    let listed = listing(vol_dir);
    fail(listed == [MINE] || c.home_is_volume(), format!("the volume holds {listed:?}, want only {MINE:?}"));
}

/// The checks of [`pod_hostile_homes`] on container `id`'s final
/// `config.json` (the `HOME` the runtime got: the one asked for, no
/// executor sets one) and on its lines in `log` (the case's note; one line
/// about the caches under a `HOME` of `/`, no warning).
fn check_env_and_log(node: &Node, r: &mut Report, c: &Hostile, id: &str, log: &Path) {
    let what = c.name;
    // The environment the runtime got.
    if let Some(config) = r.step(&format!("{what}: the final config.json"), node.final_config(id)) {
        match config["process"]["env"].as_array() {
            Some(env) => {
                let got = last_home(env.iter().filter_map(serde_json::Value::as_str));
                let want = last_home(c.env.iter().copied());
                r.check(got == want, format!("{what}: config.json's HOME is {got:?}, want {want:?}"));
            }
            None => r.check(false, format!("{what}: config.json has no process.env")),
        }
    }
    // The log: the note, and the hook's warning about a HOME of / it leaves.
    let text = r.read(log);
    let lines: Vec<&str> = text.lines().filter(|l| l.contains(&format!("container {id}:"))).collect();
    let lines = lines.join("\n");
    r.seen(&format!("{what}: log"), &lines);
    if !c.note.is_empty() {
        r.check(lines.contains(c.note), format!("{what}: want {:?} in the log", c.note));
    }
    if c.expect == Expect::RootCaches {
        for f in root_home_caches(&lines) {
            r.check(false, format!("{what}: {f}"));
        }
    }
}

/// StopContainer and RemoveContainer of container `id`.
fn remove(node: &Node, r: &mut Report, what: &str, id: &str) {
    let stop = node.cri("StopContainer", json!({"container_id": id, "timeout": 1}));
    r.step(&format!("{what}: StopContainer"), stop);
    r.step(&format!("{what}: RemoveContainer"), node.cri("RemoveContainer", json!({"container_id": id})));
}

/// The names in a directory, sorted.
pub fn listing(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}
