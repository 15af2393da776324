//! The container user's `HOME` through the real engines
//! (docs/design.md#home-plan): the image every engine runs (root's home
//! `/root` holding a dotfile, no `/etc/passwd` entry for uid 1000), the
//! script that shows what a process got in its `HOME`, what that output
//! says, and the pod case written once for the ways into a CRI node (the
//! wrapper's two modes, tests/runtimes/home_engines.rs; the NRI plugin,
//! tests/nri/). Docker and Podman are in tests/runtimes/home_engines.rs.
//! And the hostile `HOME`s and passwd files, written once: through bare
//! runc and crun bundles (tests/runtimes/home.rs) and through a CRI node
//! ([`pod_hostile_homes`]: tests/runtimes/cri.rs, tests/nri/).

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
/// The image's `/root/.profile`: a dotfile the home's tmpfs must not hide.
pub const PROFILE: &str = "export PS1='home-image$ '";
/// The mode of the image's `/root`: a home tmpfs takes the image directory's
/// mode, so a mode other than the default 0700 shows it was copied.
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

/// What a process shows of its `HOME`: its value, `.profile`, the volume's
/// file, a write, the owner and mode, what it can do to an app kept there
/// (append to `main.py`, plant a module in `lib/`, read `secret`), which
/// caches it can write (`.cache`, `.triton`) and the first one's owner and
/// mode, then the mount table.
pub const PROBE: &str = "printf 'HOME=[%s]\\n' \"${HOME-(unset)}\"; \
    printf 'PROFILE=[%s]\\n' \"$(cat \"$HOME/.profile\" 2>/dev/null)\"; \
    printf 'VOLUME=[%s]\\n' \"$(cat \"$HOME/from-volume\" 2>/dev/null)\"; \
    { echo x > \"$HOME/new\"; } 2>/dev/null && echo HOME-WRITABLE; \
    { echo x >> \"$HOME/main.py\"; } 2>/dev/null && echo APP-WRITABLE; \
    { echo x > \"$HOME/lib/planted.py\"; } 2>/dev/null && echo APP-PLANTED; \
    printf 'SECRET=[%s]\\n' \"$(cat \"$HOME/secret\" 2>/dev/null)\"; \
    for c in .cache .triton; do { mkdir -p \"$HOME/$c/probe\" && echo k > \"$HOME/$c/probe/k\"; } 2>/dev/null \
      && echo \"CACHE-WRITABLE=[$c]\"; done; \
    stat -c 'CACHESTAT=[%u %g %a]' \"$HOME/.cache\" 2>/dev/null; \
    stat -c 'STAT=[%u %g %a]' \"$HOME\"; cat /proc/self/mountinfo; true";

/// [`PROBE`] run by `exec` in a container whose pid 1 is its process: with
/// the `HOME` pid 1 got (an exec'd process gets the engine's environment,
/// which a change to `config.json` reaches only through the wrapper's
/// `exec`: src/wrapper/exec_home.rs), and the exec's own as `EXEC-HOME`.
pub fn probe_as_pid1() -> String {
    format!(
        "printf 'EXEC-HOME=[%s]\\n' \"${{HOME-(unset)}}\"; \
         h=$(busybox tr '\\0' '\\n' </proc/1/environ | grep '^HOME='); \
         if [ -n \"$h\" ]; then HOME=${{h#HOME=}}; else unset HOME; fi; {PROBE}"
    )
}

/// What [`PROBE`]'s output says.
#[derive(Debug)]
pub struct Seen {
    pub home: String,
    pub exec_home: Option<String>,
    pub profile: String,
    pub volume: String,
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
    /// The caches (`.cache`, `.triton`) the process could write into.
    pub caches: Vec<String>,
    /// uid, gid and octal mode of `HOME/.cache`.
    pub cache_stat: String,
    /// The top mount at `HOME/.cache`, if it is a mount point.
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
        let home = field("HOME").unwrap_or_else(|| "(no HOME line)".into());
        let mounts = parse_mountinfo(out);
        let mount = mounts.iter().rev().find(|m| m.mount_point == home).cloned();
        // crun 1.8.1 leaves HOME unset for a uid without an entry: `$HOME/.cache` is `/.cache`.
        let base = if home == "(unset)" { "" } else { home.trim_end_matches('/') };
        let cache_at = format!("{base}/.cache");
        let cache_mount = mounts.iter().rev().find(|m| m.mount_point == cache_at).cloned();
        Seen {
            app_writable: out.lines().any(|l| l == "APP-WRITABLE"),
            app_planted: out.lines().any(|l| l == "APP-PLANTED"),
            secret: field("SECRET").unwrap_or_default(),
            caches: out
                .lines()
                .filter_map(|l| l.strip_prefix("CACHE-WRITABLE=[")?.strip_suffix(']'))
                .map(String::from)
                .collect(),
            cache_stat: field("CACHESTAT").unwrap_or_default(),
            cache_mount,
            exec_home: field("EXEC-HOME"),
            profile: field("PROFILE").unwrap_or_default(),
            volume: field("VOLUME").unwrap_or_default(),
            writable: out.lines().any(|l| l == "HOME-WRITABLE"),
            stat: field("STAT").unwrap_or_default(),
            mount,
            home,
            out: out.to_string(),
        }
    }

    /// One line of what was seen, for a report.
    pub fn summary(&self) -> String {
        format!(
            "HOME={}{}, {}, stat {:?}, .profile {:?}, mount {}",
            self.home,
            self.exec_home.as_ref().map_or(String::new(), |e| format!(" (an exec's HOME={e})")),
            if self.writable { "writable" } else { "NOT writable" },
            self.stat,
            self.profile,
            self.mount.as_ref().map_or("none".into(), |m| format!(
                "{} {} {}",
                m.fstype,
                m.source,
                sz(m.size())
            )),
        )
    }

    /// The failed checks of a `HOME` at `home` that is our tmpfs of `size`
    /// bytes, owned by `owner` (uid gid) with `mode`, writable, holding
    /// the image's `.profile` iff `profile`.
    pub fn served(&self, home: &str, owner: (u32, u32), mode: u32, size: u64, profile: bool) -> Vec<String> {
        let mut failed = Vec::new();
        let mut check = |ok: bool, what: String| {
            if !ok {
                failed.push(what);
            }
        };
        check(self.home == home, format!("HOME is {:?}, want {home:?}", self.home));
        let m = self.mount.as_ref();
        check(
            m.is_some_and(|m| m.fstype == "tmpfs" && m.source == OURS),
            format!("HOME is not our tmpfs: {m:?}"),
        );
        check(
            m.and_then(MountInfo::size) == Some(size),
            format!("HOME's tmpfs is {}, want {}", sz(m.and_then(MountInfo::size)), sz(Some(size))),
        );
        check(
            m.is_some_and(|m| m.has("nosuid") && m.has("nodev") && m.has("rw")),
            format!("HOME's options: {m:?}"),
        );
        check(self.writable, "HOME is not writable".into());
        let want = format!("{} {} {mode:o}", owner.0, owner.1);
        check(self.stat == want, format!("HOME's uid gid mode are {:?}, want {want:?}", self.stat));
        let want = if profile { PROFILE } else { "" };
        check(self.profile == want, format!("HOME/.profile is {:?}, want {want:?}", self.profile));
        failed
    }

    /// The failed checks of a `HOME` at `home` left alone: no mount of ours
    /// there, and not writable.
    pub fn left_alone(&self, home: &str) -> Vec<String> {
        let mut failed = Vec::new();
        if self.home != home {
            failed.push(format!("HOME is {:?}, want {home:?}", self.home));
        }
        if self.mount.as_ref().is_some_and(|m| m.source == OURS) {
            failed.push(format!("HOME has a mount of ours: {:?}", self.mount));
        }
        if self.writable {
            failed.push("HOME is writable".into());
        }
        failed
    }

    /// The failed checks of a `HOME` of `/` (or none, crun 1.8.1) for `uid`
    /// through the hook: `/` stays read-only, and the caches under it are
    /// the process's writable tmpfs (docs/design.md#home-rule).
    pub fn root_caches(&self, uid: u32) -> Vec<String> {
        let mut failed = Vec::new();
        let mut check = |ok: bool, what: String| {
            if !ok {
                failed.push(what);
            }
        };
        check(self.home == "/" || self.home == "(unset)", format!("HOME is {:?}, want /", self.home));
        check(!self.writable, "a new file could be made in /".into());
        check(self.caches == [".cache", ".triton"], format!("the caches written: {:?}", self.caches));
        check(
            self.cache_mount.as_ref().is_some_and(|m| m.source == OURS && m.fstype == "tmpfs"),
            format!("/.cache is not our tmpfs: {:?}", self.cache_mount),
        );
        check(
            self.cache_stat.starts_with(&format!("{uid} ")) && self.cache_stat.ends_with(" 700"),
            format!("/.cache's uid gid mode {:?}, want uid {uid} mode 700", self.cache_stat),
        );
        failed
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
/// uid without a passwd entry) other than the one that says the caches
/// under it get a tmpfs.
pub fn root_home_warnings(log: &str) -> Vec<&str> {
    log.lines()
        .filter(|l| l.contains("warning") && (l.contains("HOME=/") || l.contains("the runtime gives /")))
        .filter(|l| !l.contains("caches only"))
        .collect()
}

/// The failed checks of the hook's log `log` about a `HOME` of `/`: no
/// warning, and one line saying that the caches under `/` get a tmpfs
/// instead (docs/design.md#home-rule).
pub fn root_home_caches(log: &str) -> Vec<String> {
    let mut failed = Vec::new();
    let warned = root_home_warnings(log);
    if !warned.is_empty() {
        failed.push(format!("a warning about HOME=/: {warned:?}"));
    }
    let said: Vec<&str> =
        log.lines().filter(|l| l.contains("HOME=/: caches only: /.cache, /.triton")).collect();
    if said.len() != 1 {
        failed.push(format!("want one line about the caches under /, found {}: {log}", said.len()));
    }
    failed
}

/// The pod case: a read-only 1 GiB container of the HOME image as root
/// (`HOME=/root`: our tmpfs of 256 MiB, owned 0, the image's mode and
/// `.profile`, writable), as uid 1000 with no passwd entry (the wrapper in
/// spec mode sets `HOME=/home/1000` and mounts it; the hook alone, in hook
/// mode or through NRI, keeps `HOME=/` read-only and mounts the caches
/// under it), and
/// with a volume at `/root` (the volume wins). pid 1's `HOME` is the one
/// checked; an exec's is reported, and checked in spec mode (the wrapper
/// gives the exec the `HOME` it set: tests/runtimes/home_exec.rs).
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
        for f in seen.served("/root", (0, 0), ROOT_MODE, 256 * MI, true) {
            r.check(false, format!("root: {f}"));
        }
        ids.push(c);
    }

    let user = CtrOpts { image: Some(&image), user: Some(1000), ..CtrOpts::ro("uid1000", GI) };
    if let Some((c, seen)) = run(r, "uid 1000", user) {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let ours: Vec<&str> = text.lines().filter(|l| l.contains(&c)).collect();
        let warned = root_home_warnings(&ours.join("\n")).len();
        if node.way == Executor::Spec {
            for f in seen.served("/home/1000", (1000, 0), 0o700, 256 * MI, false) {
                r.check(false, format!("uid 1000: {f}"));
            }
            r.check(warned == 0, format!("uid 1000: a warning about HOME=/: {ours:#?}"));
            // The wrapper gives an exec the HOME it set for pid 1.
            r.check(
                seen.exec_home.as_deref() == Some("/home/1000"),
                format!("uid 1000: an exec's HOME is {:?}, want /home/1000", seen.exec_home),
            );
        } else {
            for f in seen.root_caches(1000) {
                r.check(false, format!("uid 1000: {f}"));
            }
            for f in root_home_caches(&ours.join("\n")) {
                r.check(false, format!("uid 1000: {f}"));
            }
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
/// 1000's `HOME=/` are not writable in a read-only container.
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

/// What a hostile case must end in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expect {
    /// `HOME` gets no tmpfs of ours, whatever the executor.
    LeftAlone,
    /// A tmpfs of ours at this `HOME`, writable.
    Mounted(&'static str),
    /// The runtime would give `HOME=/`: the hook (and NRI, through it)
    /// mounts the caches under `/`, the spec executor replaces it by
    /// `/home/<uid>` and mounts that.
    Fallback,
    /// `HOME` stays the image's, read-only: nothing in it changes and
    /// nothing new appears beside what it holds; its caches are the
    /// process's, writable.
    Caches(&'static str),
}

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
            Expect::Caches(home) => Some(home.trim_start_matches('/')),
            _ => None,
        }
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
        case("HOME=/", 1000, "", &["HOME=/"], none, "", Expect::Fallback),
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
            Expect::Mounted("/second"),
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
            "/data",
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
    // A volume under HOME: HOME stays the image's, the volume visible; the
    // mountpoint `data` is more than a dot-entry, so the caches get a tmpfs.
    v.push(Hostile {
        volume_at: "/srv/data",
        ..case("a volume under HOME", 0, "", &["HOME=/srv"], none, "caches only", Expect::Caches("/srv"))
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
            Expect::Mounted("/home/first"),
        ),
        case(
            "binary garbage in /etc/passwd",
            1000,
            "",
            &[],
            |r| std::fs::write(r.join("etc/passwd"), b"\x00\x01garbage:::\n\x7fELF\xff\xfe:1000:x").unwrap(),
            "",
            Expect::Fallback,
        ),
    ]
}

/// The hostile image homes.
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
            "left alone",
            Expect::LeftAlone,
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
            "left alone",
            Expect::LeftAlone,
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
            "cannot be copied safely",
            Expect::Mounted("/root"),
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
            "not to the process (uid 1000)",
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
            Expect::Caches("/home/app"),
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
            Expect::Caches("/var/www"),
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
            Expect::Caches("/home/node"),
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

/// Every hostile case: the environment's, the passwd files', the image
/// homes', and the homes a writable `HOME` would open up.
pub fn hostile_cases() -> Vec<Hostile> {
    env_cases().into_iter().chain(passwd_cases()).chain(image_home_cases()).chain(security_cases()).collect()
}

/// The failed checks of what case `c` saw of its `HOME` (`seen`), through
/// the spec executor (`spec`: it can set the environment) or another.
pub fn home_failures(c: &Hostile, spec: bool, seen: &Seen) -> Vec<String> {
    let mut failed = Vec::new();
    let ours = seen.mount.as_ref().is_some_and(|m| m.source == OURS && m.fstype == "tmpfs");
    let mut fail = |ok: bool, msg: String| {
        if !ok {
            failed.push(msg);
        }
    };
    let caches = |home: &str, fail: &mut dyn FnMut(bool, String)| {
        fail(seen.home == home, format!("HOME is {:?}, want {home:?}", seen.home));
        fail(!ours, format!("a tmpfs of ours at HOME: {:?}", seen.mount));
        fail(!seen.writable, "a new file could be made in HOME".into());
        fail(seen.caches == [".cache", ".triton"], format!("the caches written: {:?}", seen.caches));
        fail(
            seen.cache_mount.as_ref().is_some_and(|m| m.source == OURS && m.fstype == "tmpfs"),
            format!("HOME/.cache is not our tmpfs: {:?}", seen.cache_mount),
        );
        let stat: Vec<&str> = seen.cache_stat.split(' ').collect();
        fail(
            stat.len() == 3 && stat[0] == c.uid.to_string() && stat[2] == "700",
            format!("HOME/.cache's uid gid mode {:?}, want uid {} mode 700", seen.cache_stat, c.uid),
        );
    };
    match (c.expect, spec) {
        (Expect::Mounted(home), _) => {
            fail(seen.home == home, format!("HOME is {:?}, want {home:?}", seen.home));
            fail(ours && seen.writable, format!("HOME is not our writable tmpfs: {:?}", seen.mount));
        }
        (Expect::Fallback, true) => {
            let home = format!("/home/{}", c.uid);
            fail(seen.home == home, format!("HOME is {:?}, want {home:?}", seen.home));
            fail(ours && seen.writable, format!("HOME is not our writable tmpfs: {:?}", seen.mount));
        }
        (Expect::Fallback, false) => {
            // crun 1.8.1 gives no HOME at all (docs/design.md#home).
            let home = if seen.home == "(unset)" { "(unset)" } else { "/" };
            caches(home, &mut fail);
        }
        (Expect::Caches(home), _) => {
            caches(home, &mut fail);
            fail(!seen.app_writable, "the app's main.py could be written".into());
            fail(!seen.app_planted, "a module could be planted beside the app".into());
        }
        (Expect::LeftAlone, _) => {
            fail(!ours, format!("a tmpfs of ours at HOME {:?}: {:?}", seen.home, seen.mount));
            // A HOME that is (or reaches) a volume is the volume's to write.
            if !c.name.contains("volume") {
                fail(!seen.writable, format!("HOME {:?} is writable", seen.home));
                fail(
                    seen.caches.is_empty(),
                    format!("caches written in a HOME left alone: {:?}", seen.caches),
                );
            }
        }
    }
    match c.name {
        "a home holding device nodes and sockets" => {
            fail(seen.profile == "image profile", format!("HOME/.profile is {:?}", seen.profile));
        }
        "uid 1000 with HOME=/root" => {
            fail(seen.secret.is_empty(), format!("uid 1000 read root's file: {:?}", seen.secret));
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
/// nothing is made outside the rootfs; the hook never changes the
/// environment (the spec executor only for a fallback); the case's note is
/// in the log, and a `HOME=/` left alone gets the hook's one warning.
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
    let out = r.step(&format!("{what}: probe"), node.exec(&id, &["sh", "-c", &script])).map(|x| x.1);
    let seen = Seen::parse(&out.unwrap_or_default());
    r.seen(what, seen.summary());
    check_home(r, c, node.way, &seen);
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
/// through `way` ([`home_failures`]).
fn check_home(r: &mut Report, c: &Hostile, way: Executor, seen: &Seen) {
    for f in home_failures(c, way == Executor::Spec, seen) {
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
    fail(
        listed == [MINE] || c.name.contains("volume"),
        format!("the volume holds {listed:?}, want only {MINE:?}"),
    );
}

/// The checks of [`pod_hostile_homes`] on container `id`'s final
/// `config.json` (the `HOME` the runtime got: only the spec executor sets
/// one, only for a fallback) and on its lines in `log` (the case's note; the
/// hook's one warning about a `HOME` of `/` it leaves).
fn check_env_and_log(node: &Node, r: &mut Report, c: &Hostile, id: &str, log: &Path) {
    let what = c.name;
    // The environment the runtime got.
    if let Some(config) = r.step(&format!("{what}: the final config.json"), node.final_config(id)) {
        let env = config["process"]["env"].as_array().cloned().unwrap_or_default();
        let got = last_home(env.iter().filter_map(serde_json::Value::as_str));
        let asked = last_home(c.env.iter().copied());
        let want = match (c.expect, node.way) {
            (Expect::Fallback, Executor::Spec) => Some(format!("/home/{}", c.uid)),
            _ => asked,
        };
        r.check(got == want, format!("{what}: config.json's HOME is {got:?}, want {want:?}"));
    }
    // The log: the note, and the hook's warning about a HOME of / it leaves.
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().filter(|l| l.contains(&format!("container {id}:"))).collect();
    let lines = lines.join("\n");
    r.seen(&format!("{what}: log"), &lines);
    if !c.note.is_empty() {
        r.check(lines.contains(c.note), format!("{what}: want {:?} in the log", c.note));
    }
    if c.expect == Expect::Fallback {
        if node.way == Executor::Spec {
            let warned = root_home_warnings(&lines);
            r.check(warned.is_empty(), format!("{what}: a warning about HOME=/: {warned:?}"));
        } else {
            for f in root_home_caches(&lines) {
                r.check(false, format!("{what}: {f}"));
            }
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
