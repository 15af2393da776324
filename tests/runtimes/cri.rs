//! Kubernetes pods as kubelet starts them: containerd's CRI API
//! (`runtime.v1.RuntimeService`, `ImageService`) driven over containerd's
//! socket by a CRI client (tests/cri/cri.py, on the stubs of the
//! `container-runtime-interface-api` package; tests/env/venv.sh installs it),
//! with the `oci-tmpfs` runtime handler that `setup containerd` writes
//! (docs/design.md#pods).
//!
//! Each test starts its own node (tests/support/pods.rs): the containerd
//! found on `PATH` (its version picks the config version: 2 for containerd
//! 1.x, 3 for 2.x; every test prints it) in a private mount namespace, with
//! two handlers, the wrapper in spec mode and in hook mode, and runs its
//! pods through each (the cases themselves are tests/support/cases.rs,
//! which the NRI suite runs too).
//!
//! Images are a busybox-static rootfs in an OCI image layout built here, as
//! app image and as `sandbox_image` (entry: `sleep`), imported with
//! `ctr -n k8s.io images import`. Pods use host networking (no CNI; empty
//! hostname), a cgroup parent of their own and the summed resources, as
//! kubelet sends them.
//!
//! The `hostile_*` cases are the hostile-layout suite of
//! tests/runtimes/hostile_layouts.rs through this path: images with symlinked
//! `/tmp` and `TMPDIR` parents onto private and `Bidirectional` volumes, onto
//! `/proc`, `/sys`, `/dev` and the pod's shm, a volume at `/tmp/data`, small
//! memory limits, a symlinked pod shm parent (see the section's head for what
//! each checks). Nodes live under `/var/lib/oci-tmpfs-test`, whose parents
//! are root's and closed to others, as the pod shm's must be for it to grow
//! (docs/design.md#engine-shm).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{json, Value};

use crate::support::cases::{self, each_way};
use crate::support::cri::*;
use crate::support::home;
use crate::support::pods::*;
use crate::support::*;

// ---------------------------------------------------------------- cases

/// Case 1: One read-only container with a 1 GiB limit: `/tmp` 256 MiB and
/// `/dev/shm` 512 MiB, both writable; 600 MiB into `/dev/shm` is ENOSPC,
/// not an OOM kill.
#[test]
fn case1_read_only_container_gets_sized_tmp_and_shm() {
    each_way(Node::wrapper("case1"), cases::case1);
}

/// Case 2: Pod annotations set the sizes; `max_tmp_size` / `max_shm_size` cap
/// them; `annotations = "ignore"` makes them have no effect.
#[test]
fn case2_pod_annotations_and_their_guardrails() {
    each_way(Node::wrapper("case2"), cases::case2);
}

/// Case 2, the memory-limit cap.
#[test]
fn case2_annotations_above_the_memory_limit_are_capped() {
    each_way(Node::wrapper("case2-limit"), cases::case2_limit);
}

/// Case 3: `/dev/shm` grows to the pod's largest container.
#[test]
fn case3_pod_shm_grows_to_the_largest_container() {
    each_way(Node::wrapper("case3"), cases::case3);
}

/// Case 4: A writable-root container in the `oci-tmpfs` class: untouched.
#[test]
fn case4_writable_root_container_is_untouched() {
    each_way(Node::wrapper("case4"), cases::case4);
}

/// Case 5: `TMPDIR=/scratch`, missing in the image: a tmpfs there.
#[test]
fn case5_tmpdir_missing_in_the_image_gets_a_tmpfs() {
    each_way(Node::wrapper("case5"), cases::case5);
}

/// Case 6: The pause container gets nothing.
#[test]
fn case6_pause_container_gets_nothing() {
    each_way(Node::wrapper("case6"), cases::case6);
}

/// Case 7: A `hostIPC` pod: the node's `/dev/shm` is never resized.
#[test]
fn case7_host_ipc_pod_never_resizes_the_node_shm() {
    each_way(Node::wrapper("case7"), cases::case7);
}

/// Case 8: The default `runc` handler: nothing changes.
#[test]
fn case8_default_runc_handler_changes_nothing() {
    each_way(Node::wrapper("case8"), cases::case8);
}

/// Case 9: containerd restarted while a pod runs.
#[test]
fn case9_containerd_restart_keeps_pods_served() {
    each_way(Node::wrapper("case9"), cases::case9);
}

// --------------------------------------------------------- hostile layouts
//
// The hostile-layout suite through the RuntimeClass path: each case is a pod
// with a read-only-root app container of an image built with a hostile
// rootfs, and after each the test checks that
// - no mount table (the real host's, pid 1; this test's; the node's
//   namespace, where containerd runs and a `Bidirectional` volume
//   propagates) got a tmpfs of ours or anything on the volume dir;
// - the volume's canary (written on the host before) is seen in the container;
// - a file the container writes through the symlink reaches the host dir;
// - nothing else was created inside the volume (listed before and after, from
//   this test's and from the node's namespace);
// - the target was left alone with one warning (in the log the host config
//   names, which both the wrapper and the hook write) naming the mount.

const CANARY: &str = "host data\n";
const THROUGH: &str = "written through the link\n";

impl Node {
    /// `prog` run in the node's mount namespace.
    fn in_ns(&self, prog: &str) -> Command {
        let mut c = Command::new("nsenter");
        c.arg(format!("--mount=/proc/{}/ns/mnt", self.holder.id())).arg("--").arg(prog);
        c
    }

    /// A host config that logs at info level to the node's `hook.log`.
    fn logging_config(&self) {
        self.host_config(&format!("log_level = \"info\"\nlog_file = {:?}\n", self.log_path()));
    }

    fn log_path(&self) -> PathBuf {
        self.dir.join("hook.log")
    }

    /// The log's lines about container `id` (the wrapper's and the hook's).
    fn log_of(&self, id: &str) -> Vec<String> {
        let tag = format!("container {id}:");
        let text = std::fs::read_to_string(self.log_path()).unwrap_or_default();
        text.lines().filter(|l| l.contains(&tag)).map(String::from).collect()
    }

    /// The pod's shm on the host (in the node's namespace).
    fn pod_shm(&self, pod: &Pod) -> PathBuf {
        let path = self.state.join("io.containerd.grpc.v1.cri/sandboxes").join(&pod.id).join("shm");
        self.ns_path(path.to_str().unwrap())
    }

    /// The mounts of container `id`'s final `config.json` that are ours:
    /// tmpfs entries with our source, and whether our hook is there.
    fn ours_in_config(&self, id: &str) -> String {
        let path = self.state.join("io.containerd.runtime.v2.task/k8s.io").join(id).join("config.json");
        let Ok(text) = std::fs::read(&path) else { return format!("no {}", path.display()) };
        let config: Value = serde_json::from_slice(&text).unwrap_or(Value::Null);
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
}

/// A CRI volume: a host directory with a canary file, bound at `dest`.
/// `shared` makes it a Kubernetes `Bidirectional` volume: containerd wants
/// its host path on a shared mount, so the directory is bound on itself and
/// made `rshared` in the node's namespace (undone on drop).
struct Volume {
    host: PathBuf,
    dest: String,
    shared: bool,
    holder: u32,
}

impl Volume {
    fn new(node: &Node, dest: &str, shared: bool) -> Volume {
        let host = node.dir.join(unique("vol"));
        std::fs::create_dir(&host).unwrap();
        std::fs::write(host.join("canary"), CANARY).unwrap();
        let v = Volume { host, dest: dest.to_string(), shared, holder: node.holder.id() };
        if shared {
            ok(node.in_ns("mount").arg("--bind").arg(&v.host).arg(&v.host));
            ok(node.in_ns("mount").arg("--make-rshared").arg(&v.host));
        }
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
        json!({"container_path": self.dest, "host_path": self.host, "propagation": self.propagation()})
    }

    /// What is in the directory, seen from this test's namespace and from the
    /// node's (where a mount on it would hide the canary).
    fn listing(&self) -> [Vec<String>; 2] {
        let ns = PathBuf::from(format!("/proc/{}/root{}", self.holder, self.host.display()));
        [tree(&self.host), tree(&ns)]
    }
}

impl Drop for Volume {
    fn drop(&mut self) {
        if self.shared {
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
fn tree(dir: &Path) -> Vec<String> {
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

/// The one warning line about `id` that holds all of `parts` (each part: one
/// of its alternatives); checks there is exactly one.
fn check_warning(r: &mut Report, node: &Node, what: &str, id: &str, parts: &[&[&str]]) {
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

/// One layout whose temp target reaches a volume (or has one beneath it).
struct Layout<'a> {
    name: &'a str,
    /// The image's symlink: (path, target), if any.
    link: Option<(&'a str, &'a str)>,
    /// The volume's container path, and where it lands (its in-root
    /// resolution: the mount point in the container's mountinfo).
    dest: &'a str,
    lands: &'a str,
    env: &'a [(&'a str, &'a str)],
    /// What the container writes: through the symlink into the volume's root.
    through: &'a str,
    /// The warning's substrings (see [`check_warning`]).
    warning: &'a [&'a [&'a str]],
    /// Whether `/tmp` itself is a plain directory that still gets our tmpfs.
    tmp_served: bool,
}

/// The image of `l`: the busybox rootfs with its symlink and the volume's
/// mount point.
fn layout_image(node: &Node, l: &Layout) -> String {
    node.image("hostile", |root| {
        if let Some((path, to)) = l.link {
            let p = root.join(path.trim_start_matches('/'));
            if p.is_dir() {
                std::fs::remove_dir(&p).unwrap();
            }
            std::os::unix::fs::symlink(to, &p).unwrap();
        }
        // Only a mount point of the image's own (never through the symlink:
        // an absolute one would lead out of the rootfs here).
        if l.dest == l.lands && !l.lands.starts_with("/tmp/") {
            std::fs::create_dir_all(root.join(l.lands.trim_start_matches('/'))).unwrap();
        }
    })
}

/// Runs layout `l` in a pod of its own with the volume private or shared,
/// and checks everything (see the section's head).
fn run_layout(node: &mut Node, r: &mut Report, l: &Layout, image: &str, shared: bool) {
    let vol = Volume::new(node, l.dest, shared);
    let what = format!("{} ({})", l.name, vol.propagation());
    let tables = node.mount_tables();
    let listed = vol.listing();
    r.seen(&format!("{what}: volume before"), format!("{:?}", listed[0]));
    let Some(pod) = r.step(&format!("{what}: RunPodSandbox"), node.run_pod("hostile", &PodOpts::default()))
    else {
        return;
    };
    let mounts = [vol.mount()];
    let opts = CtrOpts { image: Some(image), mounts: &mounts, env: l.env, ..CtrOpts::ro("app", GI) };
    let started = r.step(&format!("{what}: start"), node.start_container(&pod, &opts));
    if let Some(c) = &started {
        r.seen(&format!("{what}: config.json"), node.ours_in_config(c));
        let via = Path::new(l.through).parent().unwrap().join("canary");
        let script = format!(
            "cat /proc/self/mountinfo; echo \"CANARY-AT-DEST $(cat {dest}/canary)\"; \
             echo \"CANARY-VIA-LINK $(cat {via})\"; echo -n '{THROUGH}' > {through} && echo WROTE; {probe} true",
            dest = l.dest,
            via = via.display(),
            through = l.through,
            // Only where /tmp is not the volume: the listing after counts every file.
            probe = if l.tmp_served { "touch /tmp/probe 2>/dev/null && echo TMP-WRITABLE;" } else { "" },
        );
        if let Some((_, out, err)) = r.step(&format!("{what}: exec"), node.exec(c, &["sh", "-c", &script])) {
            let mounts = parse_mountinfo(&out);
            let ours: Vec<String> = mounts.iter().filter(|m| m.source == OURS).map(mount_line).collect();
            r.seen(&format!("{what}: mounts of ours in the container"), format!("{ours:?}"));
            let under = |m: &&MountInfo| {
                m.source == OURS
                    && (m.mount_point == l.lands || m.mount_point.starts_with(&format!("{}/", l.lands)))
            };
            r.check(
                !mounts.iter().any(|m| under(&m)),
                format!("{what}: a tmpfs of ours on the volume at {}: {ours:?}", l.lands),
            );
            let at_dest = mount_at(&mounts, l.lands);
            r.check(
                at_dest.is_some_and(|m| m.source != OURS),
                format!("{what}: the volume is not the top mount at {}: {at_dest:?}", l.lands),
            );
            let canary = CANARY.trim_end();
            r.check(
                out.contains(&format!("CANARY-AT-DEST {canary}\n")),
                format!("{what}: the volume's canary is not seen at {}/canary: {}", l.dest, err.trim()),
            );
            r.check(
                out.contains(&format!("CANARY-VIA-LINK {canary}\n")),
                format!("{what}: the volume's canary is not seen at {}: {}", via.display(), err.trim()),
            );
            r.check(out.contains("WROTE"), format!("{what}: writing {} failed: {err}", l.through));
            let tmp = mount_at(&mounts, "/tmp");
            if l.tmp_served {
                r.check(
                    tmp.is_some_and(|t| t.source == OURS && t.size() == Some(256 * MI))
                        && out.contains("TMP-WRITABLE"),
                    format!("{what}: /tmp (a plain directory) is not our writable 256Mi tmpfs: {tmp:?}"),
                );
            } else {
                r.check(tmp.is_none_or(|t| t.source != OURS), format!("{what}: /tmp has our tmpfs: {tmp:?}"));
            }
        }
        let landed = std::fs::read_to_string(vol.host.join("through-link"));
        r.seen(&format!("{what}: host through-link"), format!("{landed:?}"));
        r.check(
            landed.as_deref().ok() == Some(THROUGH),
            format!("{what}: {} did not reach the host's volume dir: {landed:?}", l.through),
        );
        check_warning(r, node, &what, c, l.warning);
    }
    let during = node.mount_tables();
    check_tables(r, &format!("{what}, running"), &tables, &during, &[&vol.host]);
    let ids: Vec<&str> = started.iter().map(String::as_str).collect();
    r.step(&format!("{what}: stop and remove"), node.teardown(&pod, &ids));
    check_tables(r, &format!("{what}, after"), &tables, &node.mount_tables(), &[&vol.host]);
    let mut want = listed.clone();
    if started.is_some() {
        for w in &mut want {
            w.push(format!("through-link file {}", THROUGH.len()));
            w.sort();
        }
    }
    let after = vol.listing();
    r.seen(&format!("{what}: volume after"), format!("{:?}", after[0]));
    r.check(
        after[0] == want[0],
        format!("{what}: the volume dir changed: {:?}, want {:?}", after[0], want[0]),
    );
    r.check(
        after[1] == want[1],
        format!("{what}: the volume dir seen from the node's namespace: {:?}, want {:?}", after[1], want[1]),
    );
}

/// Runs layout `l` with a private and with a `Bidirectional` volume on one
/// node, in each wrapper mode.
fn volume_layout(case: &str, l: &Layout) {
    each_way(Node::wrapper(case), |node, r| {
        node.logging_config();
        let image = layout_image(node, l);
        for shared in [false, true] {
            run_layout(node, r, l, &image, shared);
        }
    });
}

/// `/tmp -> /vol` with a volume at `/vol` (sorts after `/tmp`).
#[test]
fn hostile_tmp_symlink_to_a_volume_at_vol() {
    volume_layout(
        "tmp-to-vol",
        &Layout {
            name: "/tmp -> /vol, volume at /vol",
            link: Some(("/tmp", "/vol")),
            dest: "/vol",
            lands: "/vol",
            env: &[],
            through: "/tmp/through-link",
            warning: &[&["/tmp"], &["the spec's mount at /vol"]],
            tmp_served: false,
        },
    );
}

/// `/tmp -> data` (relative) with a volume at `/data` (sorts before `/tmp`).
#[test]
fn hostile_tmp_symlink_to_a_volume_at_data() {
    volume_layout(
        "tmp-to-data",
        &Layout {
            name: "/tmp -> data, volume at /data",
            link: Some(("/tmp", "data")),
            dest: "/data",
            lands: "/data",
            env: &[],
            through: "/tmp/through-link",
            warning: &[&["/tmp"], &["the spec's mount at /data"]],
            tmp_served: false,
        },
    );
}

/// `TMPDIR=/scratch/tmp` with `/scratch -> /vol` and a volume at `/vol`
/// (with no `tmp` in it: nothing may make one there); `/tmp` is a plain
/// directory and still gets our tmpfs.
#[test]
fn hostile_tmpdir_parent_symlink_to_a_volume() {
    volume_layout(
        "scratch-to-vol",
        &Layout {
            name: "TMPDIR=/scratch/tmp, /scratch -> /vol, volume at /vol",
            link: Some(("/scratch", "/vol")),
            dest: "/vol",
            lands: "/vol",
            env: &[("TMPDIR", "/scratch/tmp")],
            through: "/scratch/through-link",
            warning: &[&["/scratch"], &["the spec's mount at /vol"]],
            tmp_served: true,
        },
    );
}

/// A volume at `/tmp/data`: `/tmp` is left alone (a tmpfs there would hide
/// the volume).
#[test]
fn hostile_volume_at_tmp_data_leaves_tmp_alone() {
    volume_layout(
        "tmp-data-volume",
        &Layout {
            name: "volume at /tmp/data",
            link: None,
            dest: "/tmp/data",
            lands: "/tmp/data",
            env: &[],
            through: "/tmp/data/through-link",
            warning: &[&["/tmp"], &["the spec mounts /tmp/data inside it"]],
            tmp_served: false,
        },
    );
}

/// The image: the busybox rootfs with `/tmp` a symlink to `to`.
fn tmp_link_image(node: &Node, to: &str) -> String {
    node.image("tmplink", |root| {
        std::fs::remove_dir(root.join("tmp")).unwrap();
        std::os::unix::fs::symlink(to, root.join("tmp")).unwrap();
    })
}

/// `/tmp -> /proc`, `/tmp -> /sys`, `/tmp -> /dev`: refused (these are spec
/// mounts, and system directories); nothing of ours is mounted anywhere in
/// the container, and the system mounts are what the runtime made.
#[test]
fn hostile_tmp_symlinks_into_proc_sys_dev_are_refused() {
    each_way(Node::wrapper("tmp-to-system"), |node, r| {
        node.logging_config();
        let tables = node.mount_tables();
        let Some(pod) = r.step("RunPodSandbox", node.run_pod("system", &PodOpts::default())) else {
            return;
        };
        let mut ids = Vec::new();
        for (dir, fstype) in [("/proc", "proc"), ("/sys", "sysfs"), ("/dev", "tmpfs")] {
            let what = format!("/tmp -> {dir}");
            let image = tmp_link_image(node, dir);
            let opts = CtrOpts { image: Some(&image), ..CtrOpts::ro(&dir[1..], GI) };
            let Some(c) = r.step(&format!("{what}: start"), node.start_container(&pod, &opts)) else {
                continue;
            };
            r.seen(&format!("{what}: config.json"), node.ours_in_config(&c));
            if let Some(out) = r.step(&format!("{what}: probe"), node.probe(&c)) {
                let mounts = parse_mountinfo(&out);
                let ours: Vec<String> = mounts.iter().filter(|m| m.source == OURS).map(mount_line).collect();
                let top = mount_at(&mounts, dir);
                r.seen(&what, format!("mounts of ours {ours:?}, {dir}: {:?}", top.map(mount_line)));
                r.check(ours.is_empty(), format!("{what}: mounts of ours in the container: {ours:?}"));
                r.check(
                    top.is_some_and(|m| m.fstype == fstype && m.source != OURS),
                    format!("{what}: {dir} is not the runtime's {fstype}: {top:?}"),
                );
            }
            let dest = format!("the spec's mount at {dir}");
            check_warning(r, node, &what, &c, &[&["/tmp"], &[&dest, "a system directory"]]);
            ids.push(c);
        }
        let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
        r.step("stop and remove", node.teardown(&pod, &ids));
        check_tables(r, "after", &tables, &node.mount_tables(), &[&node.state]);
    });
}

/// A symlink onto a spec mount of tmpfs through CRI: `/tmp -> /dev/shm`,
/// the pod's shm (a tmpfs on the host, bound into the container) under the
/// spec's `/dev` tmpfs. CRI has no other way to give a container a tmpfs
/// mount (its `Mount` is a bind). `/tmp` is left alone; nothing of ours
/// stacks on `/dev/shm`, which is the pod's shm grown as usual; a file
/// written through the link lands in the pod's shm on the host.
#[test]
fn hostile_tmp_symlink_onto_the_pod_shm() {
    each_way(Node::wrapper("tmp-to-shm"), |node, r| {
        node.logging_config();
        let image = tmp_link_image(node, "/dev/shm");
        let tables = node.mount_tables();
        let Some(pod) = r.step("RunPodSandbox", node.run_pod("shm", &PodOpts::default())) else {
            return;
        };
        let opts = CtrOpts { image: Some(&image), ..CtrOpts::ro("app", GI) };
        let what = "/tmp -> /dev/shm";
        if let Some(c) = r.step("start", node.start_container(&pod, &opts)) {
            r.seen("config.json", node.ours_in_config(&c));
            let script =
                format!("cat /proc/self/mountinfo; echo -n '{THROUGH}' > /tmp/through-link && echo WROTE");
            if let Some((_, out, err)) = r.step("exec", node.exec(&c, &["sh", "-c", &script])) {
                let mounts = parse_mountinfo(&out);
                let ours: Vec<String> = mounts.iter().filter(|m| m.source == OURS).map(mount_line).collect();
                let shm = mount_at(&mounts, "/dev/shm");
                r.seen(what, format!("mounts of ours {ours:?}, /dev/shm {:?}", shm.map(mount_line)));
                r.check(ours.is_empty(), format!("{what}: mounts of ours in the container: {ours:?}"));
                r.check(
                    shm.is_some_and(|m| m.source != OURS && m.size() == Some(512 * MI)),
                    format!("{what}: /dev/shm is not the pod's shm grown to 512Mi: {shm:?}"),
                );
                r.check(out.contains("WROTE"), format!("{what}: writing /tmp/through-link: {err}"));
            }
            let landed = std::fs::read_to_string(node.pod_shm(&pod).join("through-link"));
            r.check(
                landed.as_deref().ok() == Some(THROUGH),
                format!("{what}: /tmp/through-link is not in the pod's shm on the host: {landed:?}"),
            );
            let parts: &[&[&str]] = &[
                &["/tmp"],
                &["the spec's mount at /dev/shm", "the spec's mount at /dev", "a system directory"],
            ];
            check_warning(r, node, what, &c, parts);
            r.step("stop and remove", node.teardown(&pod, &[&c]));
        }
        check_tables(r, "after", &tables, &node.mount_tables(), &[&node.state]);
    });
}

/// Memory limits of 512 KiB, 1 MiB and 1 GiB on the container, each in a pod
/// of its own: below 1 MiB no tmpfs at all (a note says `below 1Mi`), 1 MiB
/// a 1 MiB `/tmp` (the pod's 64 MiB shm is never shrunk), 1 GiB the defaults.
/// A container the runtime or the kernel will not start under such a limit
/// is recorded, and the refusal must not be ours.
#[test]
fn hostile_memory_limits_cap_every_size() {
    each_way(Node::wrapper("memory-limits"), |node, r| {
        node.logging_config();
        let tables = node.mount_tables();
        for (limit, tmp, shm) in
            [(512 * 1024, None, SHM_64M), (MI, Some(MI), SHM_64M), (GI, Some(256 * MI), 512 * MI)]
        {
            let what = format!("limit {}", sz(Some(limit)));
            let opts = PodOpts { memory: limit, ..PodOpts::default() };
            let Some(pod) = r.step(&format!("{what}: RunPodSandbox"), node.run_pod("mem", &opts)) else {
                continue;
            };
            let Some(c) =
                r.step(&format!("{what}: create"), node.create_container(&pod, &CtrOpts::ro("app", limit)))
            else {
                continue;
            };
            let started = node.cri("StartContainer", json!({"container_id": c}));
            let log = node.log_of(&c);
            r.seen(&format!("{what}: log"), format!("{log:#?}"));
            let errors: Vec<&String> = log.iter().filter(|l| l.contains(": error: ")).collect();
            r.check(errors.is_empty(), format!("{what}: errors of ours: {errors:?}"));
            let noted = log.iter().any(|l| l.contains("below 1Mi"));
            match started {
                Err(e) => {
                    // Only a limit below what runc's init already uses when the
                    // limit is set (about 2 MiB here: "unable to set memory limit
                    // to 1048576 (current usage: 2097152 ...)") may do this.
                    r.seen(&format!("{what}: StartContainer refused"), &e);
                    r.check(
                        limit <= MI && e.contains("memory limit"),
                        format!("{what}: StartContainer: {e}"),
                    );
                    r.check(!e.contains(OURS), format!("{what}: the refusal is ours: {e}"));
                    // The wrapper runs at create; the hook (mode hook) at prestart,
                    // which a container killed before it never reaches.
                    if node.way == Way::Spec && limit < MI {
                        r.check(noted, format!("{what}: no note `below 1Mi` in the log"));
                    }
                }
                Ok(_) => {
                    r.seen(&format!("{what}: config.json"), node.ours_in_config(&c));
                    if let Some(out) = r.step(&format!("{what}: probe"), node.probe(&c)) {
                        let mounts = parse_mountinfo(&out);
                        let ours: Vec<String> =
                            mounts.iter().filter(|m| m.source == OURS).map(mount_line).collect();
                        let t =
                            mount_at(&mounts, "/tmp").filter(|m| m.source == OURS).and_then(MountInfo::size);
                        let s = mount_at(&mounts, "/dev/shm").and_then(MountInfo::size);
                        r.seen(&what, format!("mounts of ours {ours:?}, /tmp {}, /dev/shm {}", sz(t), sz(s)));
                        match tmp {
                            None => r.check(ours.is_empty(), format!("{what}: mounts of ours: {ours:?}")),
                            Some(want) => r.check(
                                t == Some(want) && out.contains("TMP-WRITABLE"),
                                format!("{what}: /tmp is {}, want our writable {}", sz(t), sz(Some(want))),
                            ),
                        }
                        r.check(
                            s == Some(shm),
                            format!("{what}: /dev/shm is {}, want {}", sz(s), sz(Some(shm))),
                        );
                    }
                    if limit < MI {
                        r.check(noted, format!("{what}: no note `below 1Mi` in the log"));
                    }
                }
            }
            let shm_now = fs_bytes(&node.pod_shm(&pod));
            r.check(
                shm_now == shm,
                format!("{what}: the pod's shm on the host is {}, want {}", sz(Some(shm_now)), sz(Some(shm))),
            );
            r.step(&format!("{what}: stop and remove"), node.teardown(&pod, &[&c]));
        }
        check_tables(r, "after", &tables, &node.mount_tables(), &[&node.state]);
    });
}

/// A symlinked parent of the engine shm: containerd's `state` is a symlink,
/// so the pod shm's path (the source the spec binds at `/dev/shm`) has a
/// symlinked component, which could as well lead to another host tmpfs. It
/// is grown only by a path with no symlink anywhere (docs/design.md#engine-shm),
/// by the spec executor and by the hook alike: it stays 64 MiB, with a
/// warning `without following a symlink`, in every mode.
#[test]
fn hostile_symlinked_pod_shm_parent_is_not_grown_on_the_host() {
    each_way(
        Node::start_with(
            "shm-parent-link",
            Way::Spec,
            &NodeOpts { symlinked_state: true, ..NodeOpts::default() },
        ),
        |node, r| {
            node.logging_config();
            let tables = node.mount_tables();
            let Some(pod) = r.step("RunPodSandbox", node.run_pod("shmlink", &PodOpts::default())) else {
                return;
            };
            let shm_path = node.pod_shm(&pod);
            r.seen("pod shm", shm_path.display());
            let Some(c) = r.step("start", node.start_container(&pod, &CtrOpts::ro("app", GI))) else {
                return;
            };
            r.seen("config.json", node.ours_in_config(&c));
            let spec = node.way == Way::Spec;
            let hooked = node.runs_our_hook(&c).unwrap_or(false);
            r.check(
                hooked == (!spec || runc_before_1_1_8(Runtime::Runc)),
                format!("our hook in config.json is {hooked}"),
            );
            let want = SHM_64M;
            if let Some(p) = r.step("probe", node.probe(&c)) {
                r.served("symlinked state, ro 1Gi", &p, 256 * MI, want);
            }
            let host = fs_bytes(&shm_path);
            r.check(
                host == want,
                format!("the pod's shm on the host is {}, want {}", sz(Some(host)), sz(Some(want))),
            );
            let log = node.log_of(&c);
            r.seen("log", format!("{log:#?}"));
            // The wrapper and the hook it adds (runc before 1.1.8) each say so.
            let n = log
                .iter()
                .filter(|l| l.contains(": warning: ") && l.contains("without following a symlink"))
                .count();
            r.seen("warnings `without following a symlink`", n);
            r.check(n >= 1, "no warning `without following a symlink` in the log");
            r.step("stop and remove", node.teardown(&pod, &[&c]));
            check_tables(r, "after", &tables, &node.mount_tables(), &[&node.dir.0]);
        },
    );
}

/// The control case: `/tmp -> /run/tmp` (nothing is mounted at `/run` in a
/// CRI container) is a safe place: our tmpfs is at `/run/tmp`; the spec
/// executor writes that resolved path into `config.json`, never `/tmp`.
#[test]
fn hostile_tmp_symlink_to_a_safe_place_is_served_at_the_resolved_path() {
    each_way(Node::wrapper("tmp-to-run-tmp"), |node, r| {
        node.logging_config();
        let image = node.image("runtmp", |root| {
            std::fs::remove_dir(root.join("tmp")).unwrap();
            std::fs::create_dir_all(root.join("run/tmp")).unwrap();
            std::os::unix::fs::symlink("/run/tmp", root.join("tmp")).unwrap();
        });
        let tables = node.mount_tables();
        let Some(pod) = r.step("RunPodSandbox", node.run_pod("runtmp", &PodOpts::default())) else {
            return;
        };
        let opts = CtrOpts { image: Some(&image), ..CtrOpts::ro("app", GI) };
        if let Some(c) = r.step("start", node.start_container(&pod, &opts)) {
            r.seen("config.json", node.ours_in_config(&c));
            let path = node.state.join("io.containerd.runtime.v2.task/k8s.io").join(&c).join("config.json");
            let config: Value =
                serde_json::from_slice(&std::fs::read(&path).unwrap_or_default()).unwrap_or_default();
            let dests: Vec<&str> = config["mounts"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|m| m["source"] == OURS)
                .filter_map(|m| m["destination"].as_str())
                .collect();
            let hooked = node.runs_our_hook(&c).unwrap_or(false);
            if node.way == Way::Spec && !runc_before_1_1_8(Runtime::Runc) {
                r.check(
                    dests == ["/run/tmp"] && !hooked,
                    format!("config.json: our tmpfs entries {dests:?} (hook {hooked}), want [\"/run/tmp\"]"),
                );
            } else {
                r.check(
                    dests.is_empty() && hooked,
                    format!("config.json: our entries {dests:?}, our hook {hooked}"),
                );
            }
            if let Some(out) = r.step("probe", node.probe(&c)) {
                let mounts = parse_mountinfo(&out);
                let t = mount_at(&mounts, "/run/tmp");
                r.seen("/run/tmp", format!("{:?}", t.map(mount_line)));
                r.check(
                    t.is_some_and(|t| {
                        t.source == OURS && t.size() == Some(256 * MI) && t.has("nosuid") && t.has("nodev")
                    }),
                    format!("/run/tmp is not our 256Mi tmpfs: {t:?}"),
                );
                r.check(out.contains("TMP-WRITABLE"), "/tmp (-> /run/tmp) is not writable");
                r.check(mount_at(&mounts, "/tmp").is_none(), "a mount at /tmp, a symlink in the image");
            }
            let log = node.log_of(&c);
            let warnings: Vec<&String> = log.iter().filter(|l| l.contains(": warning: ")).collect();
            r.check(warnings.is_empty(), format!("warnings: {warnings:?}"));
            r.step("stop and remove", node.teardown(&pod, &[&c]));
        }
        check_tables(r, "after", &tables, &node.mount_tables(), &[&node.state]);
    });
}

/// A volume at `/foo/data` with `/foo -> /tmp` in the image: it lands at
/// `/tmp/data`, beneath `/tmp`, which is left alone.
#[test]
fn hostile_volume_through_a_symlink_into_tmp_leaves_tmp_alone() {
    volume_layout(
        "foo-data-volume",
        &Layout {
            name: "/foo -> /tmp, volume at /foo/data",
            link: Some(("/foo", "/tmp")),
            dest: "/foo/data",
            lands: "/tmp/data",
            env: &[],
            through: "/foo/data/through-link",
            warning: &[&["/tmp"], &["the spec mounts /foo/data inside it"]],
            tmp_served: false,
        },
    );
}

/// The hostile `HOME`s and passwd files of tests/runtimes/home.rs (written
/// once in tests/support/home.rs) through both handlers of one node, each
/// a read-only container of an image of its own, run as the case's uid
/// with its environment and a volume: `HOME` mounted, left alone or (a
/// `HOME` of `/`) given `/home/<uid>` by the wrapper in spec mode and left
/// alone with the hook's warning in hook mode, as the case says; no volume
/// covered, nothing of ours on the host's or the node's mount table, the
/// case's note in the log ([`home::pod_hostile_homes`]).
#[test]
fn hostile_homes_through_the_wrapper() {
    let mut images = Vec::new();
    each_way(Node::wrapper("home-hostile"), |node, r| home::pod_hostile_homes(node, r, &mut images));
}
