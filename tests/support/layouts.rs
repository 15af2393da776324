//! The hostile layouts of a CRI node, written once (the suite of
//! tests/runtimes/hostile_layouts.rs, through pods): images whose `/tmp` or
//! `TMPDIR` parent is a symlink onto a volume (private, `Bidirectional`, a
//! memory emptyDir) or into `/proc`, `/sys`, `/dev`, a volume at or through
//! a symlink under `/tmp`. [`LAYOUTS`] is the one list and [`pod_layouts`]
//! the one checker; the CRI suite runs them through both wrapper modes
//! (tests/runtimes/cri.rs), the NRI suite through the plugin (tests/nri/).
//! The node's hook log (`hook.log`, which the wrapper, the hook and the
//! plugin's hook write) and a container's entries of ours in `config.json`
//! are read here too, for the CRI suite's other hostile cases. What differs
//! by way in (which executor `config.json` shows) is [`Report::executor`].

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

use super::cri::*;
use super::pods::*;
use super::*;

/// The canary a volume holds before its container starts.
pub const CANARY: &str = "host data\n";
/// What a container writes through an image's symlink, as `through-link`.
pub const THROUGH: &str = "written through the link\n";

/// One hostile layout: an image with symlinks, maybe a volume, and what
/// must hold.
#[derive(Clone, Copy)]
pub struct Layout<'a> {
    /// What the report calls it.
    pub name: &'a str,
    /// The pod's and the image's name.
    pub slug: &'a str,
    /// Symlinks made in the image, (path, target): each replaces what is there.
    pub links: &'a [(&'a str, &'a str)],
    /// Directories made in the image (volumes' mount points).
    pub dirs: &'a [&'a str],
    pub env: &'a [(&'a str, &'a str)],
    /// The volume's container path, and where it lands (its in-root
    /// resolution: the mount point in the container's mountinfo).
    pub volume: Option<(&'a str, &'a str)>,
    /// The volume's host directory is a tmpfs (kubelet's emptyDir with
    /// `medium: Memory`), mounted in the node's namespace only.
    pub tmpfs_volume: bool,
    /// The volume's propagations, each a pod: `false` private, `true`
    /// `Bidirectional` (the host directory a shared mount).
    pub shared: &'a [bool],
    /// A path the container writes through the symlink: it lands as
    /// `through-link` in the volume's root.
    pub through: Option<&'a str>,
    /// Container paths that must not get our tmpfs.
    pub refused: &'a [&'a str],
    /// Container paths that must be our writable 256 MiB tmpfs.
    pub served: &'a [&'a str],
    /// No mount of ours anywhere in the container.
    pub none_ours: bool,
    /// A system directory the link leads into, and the type of the mount
    /// the runtime made there, which stays on top.
    pub system: Option<(&'a str, &'a str)>,
    /// The one warning line about the container holds each part (one of
    /// its alternatives each).
    pub warning: &'a [&'a [&'a str]],
    /// No symlink on the way: the spec executor decides it alone, so in
    /// spec mode no hook is left in `config.json`, whatever the runc.
    pub spec_alone: bool,
}

const PRIVATE: &[bool] = &[false];
const BOTH: &[bool] = &[false, true];
const SYSTEM_DEV: &[&str] = &["the spec's mount at /dev", "a system directory"];

// Boilerplate: a table, each entry spelling out its fields (alike by
// design, so that an entry reads on its own).
/// Every hostile layout of a CRI node.
pub const LAYOUTS: &[Layout] = &[
    // A volume after `/tmp` in sort order.
    Layout {
        name: "/tmp -> /vol, volume at /vol",
        slug: "tmp-to-vol",
        links: &[("/tmp", "/vol")],
        dirs: &["/vol"],
        volume: Some(("/vol", "/vol")),
        shared: BOTH,
        through: Some("/tmp/through-link"),
        refused: &["/tmp"],
        warning: &[&["/tmp"], &["the spec's mount at /vol"]],
        ..NONE
    },
    // A volume before `/tmp` in sort order, the link relative.
    Layout {
        name: "/tmp -> data, volume at /data",
        slug: "tmp-to-data",
        links: &[("/tmp", "data")],
        dirs: &["/data"],
        volume: Some(("/data", "/data")),
        shared: BOTH,
        through: Some("/tmp/through-link"),
        refused: &["/tmp"],
        warning: &[&["/tmp"], &["the spec's mount at /data"]],
        ..NONE
    },
    // The same, the link absolute.
    Layout {
        name: "/tmp -> /data, volume at /data",
        slug: "tmp-to-abs-data",
        links: &[("/tmp", "/data")],
        dirs: &["/data"],
        volume: Some(("/data", "/data")),
        shared: BOTH,
        through: Some("/tmp/through-link"),
        refused: &["/tmp"],
        warning: &[&["/tmp"], &["the spec's mount at /data"]],
        ..NONE
    },
    // A symlinked TMPDIR parent (with no `tmp` in the volume: nothing may
    // make one there); `/tmp` is a plain directory and still ours.
    Layout {
        name: "TMPDIR=/scratch/tmp, /scratch -> /vol, volume at /vol",
        slug: "scratch-to-vol",
        links: &[("/scratch", "/vol")],
        dirs: &["/vol"],
        env: &[("TMPDIR", "/scratch/tmp")],
        volume: Some(("/vol", "/vol")),
        shared: BOTH,
        through: Some("/scratch/through-link"),
        refused: &["/scratch/tmp", "/scratch"],
        served: &["/tmp"],
        warning: &[&["/scratch"], &["the spec's mount at /vol"]],
        ..NONE
    },
    // A volume beneath `/tmp`, its mount point made by the runtime: `/tmp`
    // is left alone (a tmpfs there would hide the volume).
    Layout {
        name: "volume at /tmp/data",
        slug: "tmp-data-volume",
        volume: Some(("/tmp/data", "/tmp/data")),
        shared: BOTH,
        through: Some("/tmp/data/through-link"),
        refused: &["/tmp"],
        warning: &[&["/tmp"], &["the spec mounts /tmp/data inside it"]],
        spec_alone: true,
        ..NONE
    },
    // The same, its mount point in the image.
    Layout {
        name: "volume at /tmp/data, made in the image",
        slug: "tmp-data-dir-volume",
        dirs: &["/tmp/data"],
        volume: Some(("/tmp/data", "/tmp/data")),
        shared: BOTH,
        through: Some("/tmp/data/through-link"),
        refused: &["/tmp"],
        warning: &[&["/tmp"], &["the spec mounts /tmp/data inside it"]],
        spec_alone: true,
        ..NONE
    },
    // A volume through a symlink into `/tmp`: it lands at `/tmp/data`.
    Layout {
        name: "/foo -> /tmp, volume at /foo/data",
        slug: "foo-data-volume",
        links: &[("/foo", "/tmp")],
        volume: Some(("/foo/data", "/tmp/data")),
        shared: BOTH,
        through: Some("/foo/data/through-link"),
        refused: &["/tmp"],
        warning: &[&["/tmp"], &["the spec mounts /foo/data inside it"]],
        ..NONE
    },
    // A symlink onto a tmpfs volume (a memory emptyDir at `/run`).
    Layout {
        name: "/tmp -> /run, a memory emptyDir at /run",
        slug: "tmp-to-emptydir-memory",
        links: &[("/tmp", "/run")],
        dirs: &["/run"],
        volume: Some(("/run", "/run")),
        tmpfs_volume: true,
        shared: PRIVATE,
        through: Some("/tmp/through-link"),
        refused: &["/tmp"],
        warning: &[&["/tmp"], &["the spec's mount at /run"]],
        ..NONE
    },
    // Symlinks into the spec's system mounts: refused, nothing of ours
    // anywhere, the runtime's mounts on top.
    Layout {
        name: "/tmp -> /dev",
        slug: "tmp-to-dev",
        links: &[("/tmp", "/dev")],
        refused: &["/tmp", "/dev"],
        none_ours: true,
        system: Some(("/dev", "tmpfs")),
        warning: &[&["/tmp"], SYSTEM_DEV],
        ..NONE
    },
    Layout {
        name: "/tmp -> /dev/shm",
        slug: "tmp-to-dev-shm",
        links: &[("/tmp", "/dev/shm")],
        refused: &["/tmp"],
        none_ours: true,
        warning: &[
            &["/tmp"],
            &["the spec's mount at /dev/shm", "the spec's mount at /dev", "a system directory"],
        ],
        ..NONE
    },
    Layout {
        name: "/tmp -> /proc",
        slug: "tmp-to-proc",
        links: &[("/tmp", "/proc")],
        refused: &["/tmp", "/proc"],
        none_ours: true,
        system: Some(("/proc", "proc")),
        warning: &[&["/tmp"], &["the spec's mount at /proc", "a system directory"]],
        ..NONE
    },
    Layout {
        name: "/tmp -> /sys",
        slug: "tmp-to-sys",
        links: &[("/tmp", "/sys")],
        refused: &["/tmp", "/sys"],
        none_ours: true,
        system: Some(("/sys", "sysfs")),
        warning: &[&["/tmp"], &["the spec's mount at /sys", "a system directory"]],
        ..NONE
    },
];

/// The fields a layout leaves out.
const NONE: Layout = Layout {
    name: "",
    slug: "",
    links: &[],
    dirs: &[],
    env: &[],
    volume: None,
    tmpfs_volume: false,
    shared: PRIVATE,
    through: None,
    refused: &[],
    served: &[],
    none_ours: false,
    system: None,
    warning: &[],
    spec_alone: false,
};

/// The layouts of [`LAYOUTS`] that `pick` keeps, each in a pod of its own
/// per propagation, on `node` through its current way, every check made
/// (see [`pod_layout`]).
pub fn pod_layouts(node: &mut Node, r: &mut Report, pick: impl Fn(&Layout) -> bool) {
    node.logging_config();
    for l in LAYOUTS.iter().filter(|l| pick(l)) {
        let image = layout_image(node, l);
        for &shared in l.shared {
            pod_layout(node, r, l, &image, shared);
        }
    }
}

impl Node {
    /// A host config that logs at info level to the node's `hook.log`.
    pub fn logging_config(&self) {
        self.host_config(&format!("log_level = \"info\"\nlog_file = {:?}\n", self.log_path()));
    }

    pub fn log_path(&self) -> PathBuf {
        self.dir.join("hook.log")
    }

    /// The log's lines about container `id` (the wrapper's and the hook's;
    /// the plugin's name no container).
    pub fn log_of(&self, id: &str) -> Vec<String> {
        let tag = format!("container {id}:");
        let text = read_text(self.log_path());
        text.lines().filter(|l| l.contains(&tag)).map(String::from).collect()
    }

    /// The pod's shm on the host (in the node's namespace).
    pub fn pod_shm(&self, pod: &Pod) -> PathBuf {
        let path = self.state.join("io.containerd.grpc.v1.cri/sandboxes").join(&pod.id).join("shm");
        self.ns_path(path.to_str().unwrap())
    }

    /// The mounts of container `id`'s final `config.json` that are ours:
    /// tmpfs entries with our source, and whether our hook is there.
    pub fn ours_in_config(&self, id: &str) -> String {
        let config = match self.final_config(id) {
            Ok(c) => c,
            Err(e) => return e,
        };
        let mounts: Vec<String> = config["mounts"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|m| m["source"] == OURS)
            .map(|m| format!("{} {}", m["destination"].as_str().unwrap_or("?"), m["options"]))
            .collect();
        let hooked = self.runs_our_hook(id).unwrap_or(false);
        format!("tmpfs entries of ours {mounts:?}, our hook {hooked}")
    }

    /// `args` run in the node's mount namespace.
    pub fn in_node_ns(&self, args: &[&str]) -> Command {
        let mut c = Command::new("nsenter");
        c.arg(format!("--mount=/proc/{}/ns/mnt", self.holder.id())).arg("--").args(args);
        c
    }
}

/// The one warning line about `id` that holds all of `parts` (each part: one
/// of its alternatives); checks there is exactly one.
pub fn check_warning(r: &mut Report, node: &Node, what: &str, id: &str, parts: &[&[&str]]) {
    let lines = node.log_of(id);
    let hits: Vec<&String> = lines
        .iter()
        .filter(|l| l.contains(": warning: ") && parts.iter().all(|alts| alts.iter().any(|a| l.contains(a))))
        .collect();
    r.seen(&format!("{what}: log"), format!("{lines:#?}"));
    r.check(
        hits.len() == 1,
        format!("{what}: want one warning line holding {parts:?}, found {}: {lines:#?}", hits.len()),
    );
}

/// A CRI volume: a host directory with a canary file (a tmpfs, where the
/// layout says so, in the node's namespace), bound at `dest`. `shared`
/// makes it a Kubernetes `Bidirectional` volume: containerd wants its host
/// path on a shared mount, so the directory is bound on itself and made
/// `rshared` in the node's namespace. What was mounted is undone on drop.
struct Volume {
    host: PathBuf,
    /// `host` through the node's namespace (where a tmpfs volume is).
    host_ns: PathBuf,
    dest: String,
    tmpfs: bool,
    shared: bool,
    holder: u32,
}

impl Volume {
    fn new(node: &Node, dest: &str, tmpfs: bool, shared: bool) -> Volume {
        let host = node.dir.join(unique("vol"));
        std::fs::create_dir(&host).unwrap();
        let host_ns = node.ns_path(host.to_str().unwrap());
        let v = Volume { host, host_ns, dest: dest.to_string(), tmpfs, shared, holder: node.holder.id() };
        if tmpfs {
            ok(node.in_node_ns(&["mount", "-t", "tmpfs", "-o", "size=8m,mode=755", "emptydir"]).arg(&v.host));
        }
        if shared {
            ok(node.in_node_ns(&["mount", "--bind"]).arg(&v.host).arg(&v.host));
            ok(node.in_node_ns(&["mount", "--make-rshared"]).arg(&v.host));
        }
        std::fs::write(v.host_ns.join("canary"), CANARY).unwrap();
        v
    }

    fn propagation(&self) -> &'static str {
        if self.shared {
            "PROPAGATION_BIDIRECTIONAL"
        } else {
            "PROPAGATION_PRIVATE"
        }
    }

    /// The CRI `Mount`.
    fn mount(&self) -> Value {
        vol(&self.dest, &self.host, self.propagation())
    }

    /// What is in the directory, seen from this test's namespace and from the
    /// node's (where a mount on it would hide the canary).
    fn listing(&self) -> [Vec<String>; 2] {
        [tree_of(&self.host), tree_of(&self.host_ns)]
    }
}

impl Drop for Volume {
    fn drop(&mut self) {
        if self.shared || self.tmpfs {
            let _ = Command::new("nsenter")
                .arg(format!("--mount=/proc/{}/ns/mnt", self.holder))
                .args(["--", "umount", "--recursive", "--lazy"])
                .arg(&self.host)
                .stderr(Stdio::null())
                .status();
        }
    }
}

/// Every entry under `dir`: relative path, kind and size, sorted.
fn tree_of(dir: &Path) -> Vec<String> {
    let mut out: Vec<String> = walk(dir, false)
        .iter()
        .map(|e| {
            let m = &e.meta;
            let kind = if m.is_dir() {
                "dir"
            } else if m.file_type().is_symlink() {
                "symlink"
            } else {
                "file"
            };
            format!("{} {kind} {}", e.rel.display(), if m.is_dir() { 0 } else { m.len() })
        })
        .collect();
    out.sort();
    out
}

/// The node's mounts at or under `dir` (as "point fstype source"), sorted:
/// what a layout's run may neither add to nor take from.
fn node_mounts_under(node: &Node, dir: &Path) -> Vec<String> {
    let tables = node.mount_tables();
    let prefix = dir.display().to_string();
    let (_, last) = tables.last().expect("the node's mount tables, its own last");
    let mut under: Vec<String> = last
        .iter()
        .filter(|m| m.mount_point.starts_with(&prefix))
        .map(|m| format!("{} {} {}", m.mount_point, m.fstype, m.source))
        .collect();
    under.sort();
    under
}

/// The image of `l`: the busybox rootfs with its directories and symlinks.
fn layout_image(node: &Node, l: &Layout) -> String {
    node.image(l.slug, |root| {
        for d in l.dirs {
            std::fs::create_dir_all(root.join(d.trim_start_matches('/'))).unwrap();
        }
        for (path, to) in l.links {
            let p = root.join(path.trim_start_matches('/'));
            if p.is_dir() {
                std::fs::remove_dir(&p).unwrap();
            }
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::os::unix::fs::symlink(to, &p).unwrap();
        }
    })
}

/// Runs layout `l` in a pod of its own, its volume private or shared, and
/// checks (docs/design.md#landing):
/// - no mount table (the real host's, pid 1; this test's; the node's
///   namespace, where containerd runs and a `Bidirectional` volume
///   propagates) got a tmpfs of ours or anything on the volume dir, and the
///   node's mounts under it are what they were (while it runs and after);
/// - in the container: the refused paths not ours, the served ones our
///   writable 256 MiB tmpfs, nothing of ours on or under the volume, which
///   is the top mount where it lands (as a system directory's mount is),
///   nothing of ours at all where the layout says so;
/// - the volume's canary seen at its path and through the symlink, and a
///   file written through the symlink in the host dir, nothing else created
///   in the volume (listed before and after, from this test's and from the
///   node's namespace);
/// - the target left alone with one warning (in the log the host config
///   names) naming the mount; the executor in `config.json` the way's.
fn pod_layout(node: &mut Node, r: &mut Report, l: &Layout, image: &str, shared: bool) {
    let vol = l.volume.map(|(dest, _)| Volume::new(node, dest, l.tmpfs_volume, shared));
    let what = match &vol {
        Some(v) => format!("{} ({})", l.name, v.propagation()),
        None => l.name.to_string(),
    };
    // The volume's host dir; without one, containerd's state once the pod
    // is gone (while it runs, the pod's own mounts are there).
    let state = node.state.clone();
    let watched: Vec<&Path> = vol.iter().map(|v| v.host.as_path()).collect();
    let watched_after: Vec<&Path> = if vol.is_some() { watched.clone() } else { vec![&state] };
    let tables = node.mount_tables();
    let node_before = vol.as_ref().map(|v| node_mounts_under(node, &v.host));
    let listed = vol.as_ref().map(Volume::listing);
    if let Some(listed) = &listed {
        r.seen(&format!("{what}: volume before"), format!("{:?}", listed[1]));
    }
    let Some(pod) = r.step(&format!("{what}: RunPodSandbox"), node.run_pod(l.slug, &PodOpts::default()))
    else {
        return;
    };
    let mounts: Vec<Value> = vol.iter().map(Volume::mount).collect();
    let opts = CtrOpts { image: Some(image), mounts: &mounts, env: l.env, ..CtrOpts::ro("app", GI) };
    let started = r.step(&format!("{what}: start"), node.start_container(&pod, &opts));
    if let Some(c) = &started {
        r.seen(&format!("{what}: config.json"), node.ours_in_config(c));
        let mut script = String::from("cat /proc/self/mountinfo;");
        if let (Some(through), Some((dest, _))) = (l.through, l.volume) {
            let via = Path::new(through).parent().unwrap().join("canary");
            script += &format!(
                " echo \"CANARY-AT-DEST $(cat {dest}/canary)\"; echo \"CANARY-VIA-LINK $(cat {via})\"; \
                 echo -n '{THROUGH}' > {through} && echo WROTE;",
                via = via.display(),
            );
        }
        // Only where /tmp is not the volume: the listing after counts every file.
        if l.served.contains(&"/tmp") {
            script += " touch /tmp/probe 2>/dev/null && echo TMP-WRITABLE;";
        }
        script += " true";
        if let Some((_, out, err)) = r.step(&format!("{what}: exec"), node.exec(c, &["sh", "-c", &script])) {
            inside(r, l, &what, &out, &err);
        }
        if let Some(v) = &vol {
            let landed = std::fs::read_to_string(v.host_ns.join("through-link"));
            r.seen(&format!("{what}: host through-link"), format!("{landed:?}"));
            r.check(
                landed.as_deref().ok() == Some(THROUGH),
                format!("{what}: {:?} did not reach the host's volume dir: {landed:?}", l.through),
            );
        }
        check_warning(r, node, &what, c, l.warning);
        if node.way == Executor::Spec && l.spec_alone {
            let hooked = node.runs_our_hook(c);
            r.check(
                hooked == Ok(false),
                format!(
                    "{what}: spec mode leaves the hook nothing, yet our hook in config.json is {hooked:?}"
                ),
            );
        } else {
            r.executor(node, c, true);
        }
    }
    let during = node.mount_tables();
    check_tables(r, &format!("{what}, running"), &tables, &during, &watched);
    check_no_ours(r, &format!("{what}, running"), &during);
    let node_during = vol.as_ref().map(|v| node_mounts_under(node, &v.host));
    r.check(
        node_during == node_before,
        format!("{what}: the node's mounts under the volume changed: {node_before:?} -> {node_during:?}"),
    );
    let ids: Vec<&str> = started.iter().map(String::as_str).collect();
    r.step(&format!("{what}: stop and remove"), node.teardown(&pod, &ids));
    let after = node.mount_tables();
    check_tables(r, &format!("{what}, after"), &tables, &after, &watched_after);
    check_no_ours(r, &format!("{what}, after"), &after);
    let node_after = vol.as_ref().map(|v| node_mounts_under(node, &v.host));
    r.check(
        node_after == node_before,
        format!("{what}: after removal, the node's mounts changed: {node_before:?} -> {node_after:?}"),
    );
    let (Some(v), Some(mut want)) = (&vol, listed) else { return };
    if started.is_some() {
        // A tmpfs volume is only in the node's namespace: this test's view
        // of the directory stays empty.
        for w in &mut want[usize::from(v.tmpfs)..] {
            w.push(format!("through-link file {}", THROUGH.len()));
            w.sort();
        }
    }
    let after = v.listing();
    r.seen(&format!("{what}: volume after"), format!("{:?}", after[1]));
    r.check(
        after[0] == want[0],
        format!("{what}: the volume dir changed: {:?}, want {:?}", after[0], want[0]),
    );
    r.check(
        after[1] == want[1],
        format!("{what}: the volume dir seen from the node's namespace: {:?}, want {:?}", after[1], want[1]),
    );
}

/// No table has a mount of ours (see [`ours_on`]).
fn check_no_ours(r: &mut Report, what: &str, tables: &[(String, Vec<MountInfo>)]) {
    let ours = ours_on(tables);
    r.check(ours.is_empty(), format!("{what}: tmpfs of ours on the host: {ours:?}"));
}

/// The checks of [`pod_layout`] on what the container saw: its mountinfo,
/// then the canary lines, `WROTE` and `TMP-WRITABLE` where asked.
fn inside(r: &mut Report, l: &Layout, what: &str, out: &str, err: &str) {
    let mounts = parse_mountinfo(out);
    let ours: Vec<String> = mounts.iter().filter(|m| m.source == OURS).map(mount_line).collect();
    r.seen(&format!("{what}: mounts of ours in the container"), format!("{ours:?}"));
    r.check(!l.none_ours || ours.is_empty(), format!("{what}: mounts of ours in the container: {ours:?}"));
    for p in l.refused {
        let m = mount_at(&mounts, p);
        r.check(m.is_none_or(|m| m.source != OURS), format!("{what}: our tmpfs at {p}: {m:?}"));
    }
    for p in l.served {
        let m = mount_at(&mounts, p);
        r.check(
            m.is_some_and(|t| t.source == OURS && t.size() == Some(256 * MI)),
            format!("{what}: {p} (a plain directory) is not our 256Mi tmpfs: {m:?}"),
        );
        if *p == "/tmp" {
            r.check(out.contains("TMP-WRITABLE"), format!("{what}: /tmp is not writable"));
        }
    }
    if let Some((dir, fstype)) = l.system {
        let top = mount_at(&mounts, dir);
        r.check(
            top.is_some_and(|m| m.fstype == fstype && m.source != OURS),
            format!("{what}: {dir} is not the runtime's {fstype}: {top:?}"),
        );
    }
    let Some((dest, lands)) = l.volume else { return };
    let under = |m: &&MountInfo| {
        m.source == OURS && (m.mount_point == lands || m.mount_point.starts_with(&format!("{lands}/")))
    };
    r.check(
        !mounts.iter().any(|m| under(&m)),
        format!("{what}: a tmpfs of ours on the volume at {lands}: {ours:?}"),
    );
    let top = mount_at(&mounts, lands);
    r.check(
        top.is_some_and(|m| m.source != OURS),
        format!("{what}: the volume is not the top mount at {lands}: {top:?}"),
    );
    let Some(through) = l.through else { return };
    let canary = CANARY.trim_end();
    r.check(
        out.contains(&format!("CANARY-AT-DEST {canary}\n")),
        format!("{what}: the volume's canary is not seen at {dest}/canary: {}", err.trim()),
    );
    r.check(
        out.contains(&format!("CANARY-VIA-LINK {canary}\n")),
        format!("{what}: the volume's canary is not seen through the link ({through}): {}", err.trim()),
    );
    r.check(out.contains("WROTE"), format!("{what}: writing {through} failed: {err}"));
}
