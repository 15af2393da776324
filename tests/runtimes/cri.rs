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
//! tests/runtimes/hostile_layouts.rs through this path: the layouts written
//! once in tests/support/layouts.rs (symlinked `/tmp` and `TMPDIR` parents
//! onto volumes and into `/proc`, `/sys`, `/dev`, volumes under `/tmp`), and
//! this suite's own: `/tmp` onto the pod's shm, small memory limits, a
//! symlinked pod shm parent, a safe symlink target. Nodes live under `/var/lib/oci-tmpfs-test`, whose parents
//! are root's and closed to others, as the pod shm's must be for it to grow
//! (docs/design.md#engine-shm).

use serde_json::{json, Value};

use crate::support::cases::{self, each_way};
use crate::support::cri::*;
use crate::support::home;
use crate::support::layouts::{self, check_warning, THROUGH};
use crate::support::pods::*;
use crate::support::userns;
use crate::support::*;

// ---------------------------------------------------------------- cases

// Boilerplate: one test per case of tests/support/cases.rs, so that libtest
// names, filters and runs each on its own.

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
// The hostile-layout suite through the RuntimeClass path: the layouts and
// their checks are tests/support/layouts.rs (which the NRI suite runs too);
// the cases below it are the CRI suite's own.

/// Every hostile layout with a volume (tests/support/layouts.rs): a
/// symlinked `/tmp` or `TMPDIR` parent onto a private, `Bidirectional` or
/// memory volume, a volume at or through a symlink into `/tmp/data`, in a
/// pod each, through both wrapper modes: the volume always wins and stays
/// on top, nothing of ours reaches any host table, one warning says why.
/// `usage` on the node: what a pod's container wrote into `/dev/shm`,
/// `/tmp` and `~/.cache`, at their sizes, its shmem and limit.
#[test]
fn usage_shows_what_a_pod_wrote() {
    each_way(Node::wrapper("usage"), cases::usage);
}

#[test]
fn hostile_layouts_with_a_volume() {
    each_way(Node::wrapper("layouts-volume"), |node, r| {
        layouts::pod_layouts(node, r, |l| l.volume.is_some())
    });
}

/// Every hostile layout into a system directory (tests/support/layouts.rs):
/// `/tmp -> /proc`, `/sys`, `/dev`, `/dev/shm`, refused in both wrapper
/// modes; nothing of ours is mounted anywhere in the container, and the
/// system mounts are what the runtime made.
#[test]
fn hostile_layouts_into_system_dirs() {
    each_way(Node::wrapper("layouts-system"), |node, r| {
        layouts::pod_layouts(node, r, |l| l.volume.is_none())
    });
}

/// The image: the busybox rootfs with `/tmp` a symlink to `to`.
fn tmp_link_image(node: &Node, to: &str) -> String {
    node.image("tmplink", |root| {
        std::fs::remove_dir(root.join("tmp")).unwrap();
        std::os::unix::fs::symlink(to, root.join("tmp")).unwrap();
    })
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
                    if node.way == Executor::Spec && limit < MI {
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
            Executor::Spec,
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
            let spec = node.way == Executor::Spec;
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
            let config: Value = serde_json::from_str(&read_text(&path))
                .unwrap_or_else(|e| panic!("{}: not JSON: {e}", path.display()));
            let dests: Vec<&str> = config["mounts"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|m| m["source"] == OURS)
                .filter_map(|m| m["destination"].as_str())
                .collect();
            let hooked = node.runs_our_hook(&c).unwrap_or(false);
            if node.way == Executor::Spec && !runc_before_1_1_8(Runtime::Runc) {
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

/// A `hostUsers: false` pod (tests/support/userns.rs) through both
/// handlers: the app containers join the sandbox's user namespace by path;
/// `/tmp` and root's `HOME` are the container root's (`0 0` inside),
/// writable, `HOME` listable and `mkdir $HOME/.triton` works, for root and
/// uid 1000; `/dev/shm` grown and writable; nothing of ours on the host.
/// containerd 2.x only: ignored in bookworm (1.6), run in sid.
#[test]
#[ignore = "needs containerd 2.x (user-namespaced pods): tests/run.sh runs it in sid"]
fn user_namespaced_pod_owns_its_tmpfs() {
    userns::require_containerd_2();
    each_way(userns::node("userns", Executor::Spec), userns::pod_user_namespace);
}
