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
/// file, a write, the owner and mode, then the mount table.
pub const PROBE: &str = "printf 'HOME=[%s]\\n' \"${HOME-(unset)}\"; \
    printf 'PROFILE=[%s]\\n' \"$(cat \"$HOME/.profile\" 2>/dev/null)\"; \
    printf 'VOLUME=[%s]\\n' \"$(cat \"$HOME/from-volume\" 2>/dev/null)\"; \
    { echo x > \"$HOME/new\"; } 2>/dev/null && echo HOME-WRITABLE; \
    stat -c 'STAT=[%u %g %a]' \"$HOME\"; cat /proc/self/mountinfo; true";

/// [`PROBE`] run by `exec` in a container whose pid 1 is its process: with
/// the `HOME` pid 1 got (an exec'd process gets the engine's environment,
/// which a change to `config.json` reaches only through the wrapper's
/// `exec`: src/spec/exec_home.rs), and the exec's own as `EXEC-HOME`.
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
        Seen {
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

/// The subject of the hook's warning about a `HOME` of `/` that comes from
/// the runtime: no passwd entry for the uid (Docker, CRI, bare runtimes).
pub const NO_ENTRY: &str = "HOME (uid 1000 has no /etc/passwd entry: the runtime gives /)";
/// ... from the passwd line Podman 4 adds (`1000:*:1000:0:container user:/:/bin/sh`).
pub const PODMAN_ENTRY: &str = "HOME=/ (uid 1000's /etc/passwd entry)";
/// ... from the environment (Podman 5 writes `HOME=/` for uid 1000).
pub const ENV_ROOT: &str = "HOME=/";

/// The warning lines of `log` about a `HOME` of `/` that the hook leaves
/// alone (it cannot set the environment).
pub fn root_home_warnings(log: &str) -> Vec<&str> {
    log.lines()
        .filter(|l| {
            l.contains("warning") && l.contains("HOME") && l.contains("the hook cannot set the environment")
        })
        .collect()
}

/// The failed checks of the hook's warnings in `log` about a `HOME` of
/// `/`: exactly one, about `subject`, saying "left alone" once.
pub fn root_home_warning(log: &str, subject: &str) -> Vec<String> {
    let warned = root_home_warnings(log);
    let [line] = warned[..] else {
        return vec![format!("want one warning about HOME=/, found {}: {log}", warned.len())];
    };
    let mut failed = Vec::new();
    if !line.contains(&format!("warning: {subject} left alone: ")) {
        failed.push(format!("the warning is not about {subject:?}: {line}"));
    }
    if line.matches("left alone").count() != 1 {
        failed.push(format!("the warning says \"left alone\" more than once: {line}"));
    }
    failed
}

/// The pod case: a read-only 1 GiB container of the HOME image as root
/// (`HOME=/root`: our tmpfs of 256 MiB, owned 0, the image's mode and
/// `.profile`, writable), as uid 1000 with no passwd entry (the wrapper in
/// spec mode sets `HOME=/home/1000` and mounts it; the hook alone, in hook
/// mode or through NRI, leaves `HOME=/` unwritable with a warning), and
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
        if node.way == Way::Spec {
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
            for f in seen.left_alone("/") {
                r.check(false, format!("uid 1000: {f}"));
            }
            for f in root_home_warning(&ours.join("\n"), NO_ENTRY) {
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
    let (handler, without) = if node.way == Way::Nri {
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
    /// The runtime would give `HOME=/`: left alone by the hook, replaced by
    /// `/home/<uid>` and mounted by the spec executor.
    Fallback,
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
    /// containerd's CRI, from this major version on, refuses the image with
    /// this error at `CreateContainer`, before any runtime runs (so before
    /// the wrapper, the plugin and the hook): it reads the image's
    /// `/etc/passwd` itself for the container's user and its additional
    /// gids, whatever the user.
    pub cri_refuses: Option<(u32, &'static str)>,
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
    // A volume under HOME: HOME stays the image's, the volume visible.
    v.push(Hostile {
        volume_at: "/srv/data",
        ..case("a volume under HOME", 0, "", &["HOME=/srv"], none, "/srv/data", Expect::LeftAlone)
    });
    v
}

/// The hostile passwd files.
pub fn passwd_cases() -> Vec<Hostile> {
    let none: fn(&Path) = untouched;
    vec![
        // containerd: "mount callback failed on ...: too many links".
        Hostile {
            cri_refuses: Some((1, "too many links")),
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
            cri_refuses: Some((2, "exceeds 10485760 bytes")),
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
                    std::fs::File::create(r.join(format!("root/f{i}"))).unwrap();
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
                std::fs::File::create(r.join("root/big")).unwrap().set_len(1 << 30).unwrap();
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
                std::os::unix::net::UnixListener::bind(r.join("root/sock")).unwrap();
                ok(std::process::Command::new("mknod").arg(r.join("root/null")).args(["c", "1", "3"]));
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
            "",
            Expect::Mounted("/home/bob"),
        ),
    ]
}

/// Every hostile case: the environment's, the passwd files', the image homes'.
pub fn hostile_cases() -> Vec<Hostile> {
    env_cases().into_iter().chain(passwd_cases()).chain(image_home_cases()).collect()
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
    if let Some((_, refusal)) = c.cri_refuses.filter(|(major, _)| node.ctd.major >= *major) {
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
/// through `way`.
fn check_home(r: &mut Report, c: &Hostile, way: Way, seen: &Seen) {
    let what = c.name;
    let ours = seen.mount.as_ref().is_some_and(|m| m.source == OURS && m.fstype == "tmpfs");
    let mut fail = |ok: bool, msg: String| r.check(ok, format!("{what}: {msg}"));
    match (c.expect, way) {
        (Expect::Mounted(home), _) => {
            fail(seen.home == home, format!("HOME is {:?}, want {home:?}", seen.home));
            fail(ours && seen.writable, format!("HOME is not our writable tmpfs: {:?}", seen.mount));
        }
        (Expect::Fallback, Way::Spec) => {
            let home = format!("/home/{}", c.uid);
            fail(seen.home == home, format!("HOME is {:?}, want {home:?}", seen.home));
            fail(ours && seen.writable, format!("HOME is not our writable tmpfs: {:?}", seen.mount));
        }
        (Expect::Fallback, Way::Hook | Way::Nri) => {
            fail(seen.home == "/", format!("HOME is {:?}, want \"/\"", seen.home));
            fail(!ours, format!("a tmpfs of ours at HOME: {:?}", seen.mount));
        }
        (Expect::LeftAlone, _) => {
            fail(!ours, format!("a tmpfs of ours at HOME {:?}: {:?}", seen.home, seen.mount))
        }
    }
    match c.name {
        "a home holding device nodes and sockets" => {
            fail(seen.profile == "image profile", format!("HOME/.profile is {:?}", seen.profile));
        }
        "a HOME owned by another uid" => {
            fail(seen.stat == "1000 0 755", format!("HOME's uid gid mode: {:?}", seen.stat))
        }
        _ => {}
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
            (Expect::Fallback, Way::Spec) => Some(format!("/home/{}", c.uid)),
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
        if node.way == Way::Spec {
            let warned = root_home_warnings(&lines);
            r.check(warned.is_empty(), format!("{what}: a warning about HOME=/: {warned:?}"));
        } else {
            let subject = if c.env.is_empty() { NO_ENTRY } else { ENV_ROOT };
            for f in root_home_warning(&lines, subject) {
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
