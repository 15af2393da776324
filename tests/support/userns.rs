//! A `hostUsers: false` pod (docs/design.md#user-namespaces), written once
//! and run over each way into a CRI node: the wrapper's two modes
//! (tests/runtimes/cri.rs) and the NRI plugin (tests/nri/). containerd's
//! CRI (2.x) gives each app container of such a pod the sandbox's user
//! namespace by path, with the sandbox's `uidMappings`/`gidMappings`
//! beside it; the tmpfs of ours must belong to the container's own ids
//! there, not to host ids the namespace does not map (which show as 65534
//! and lock root out of a `HOME` of mode 0700).

use serde_json::Value;

use super::cri::*;
use super::home::{self, Seen};
use super::pods::*;
use super::*;

/// The host id the pod's ids 0 to 65535 start at (kubelet hands out
/// multiples of 65536 above the host's own ids).
pub const HOST_ID: u32 = 16 * 65536;

/// A node for the case: `way`'s (the wrapper's handlers, or the NRI
/// plugin), with the pod network a user-namespaced pod needs.
pub fn node(case: &str, way: Executor) -> Node {
    Node::start_with(case, way, &NodeOpts { pod_network: true, ..NodeOpts::default() })
}

/// The case needs containerd 2.x (measured with sid's 2.1.9; bookworm's
/// 1.6 predates CRI's user namespaces): so the CRI suite's case is
/// `#[ignore]`d, and tests/run.sh runs it in the sid environment.
pub fn require_containerd_2() {
    let ctd = Containerd::find();
    assert!(
        ctd.major >= 2,
        "containerd {} has no user-namespaced pods: run it in the sid environment (tests/run.sh)",
        ctd.version
    );
}

/// What a container shows beyond [`home::probe_as_pid1`]'s `HOME` lines
/// (which include the caches `$HOME/.cache/torch` and `$HOME/.triton` it can
/// write): its uid map, `/tmp`'s and `/dev/shm`'s owner and mode and
/// whether it can write them, whether it can list its `HOME`.
fn probe() -> String {
    format!(
        "{}; printf 'UIDMAP=[%s]\\n' \"$(busybox tr -s ' ' </proc/self/uid_map)\"; \
         printf 'ID=[%s]\\n' \"$(id -u)\"; \
         stat -c 'TMP=[%u %g %a]' /tmp; stat -c 'SHM=[%u %g %a]' /dev/shm; \
         touch /tmp/p-$(id -u) 2>/dev/null && echo TMP-WRITABLE; \
         touch /dev/shm/p-$(id -u) 2>/dev/null && echo SHM-WRITABLE; \
         ls \"$HOME\" >/dev/null 2>&1 && echo HOME-LISTED; true",
        home::probe_as_pid1()
    )
}

/// The value of a `KEY=[...]` line of the probe's output.
fn field<'a>(out: &'a str, key: &str) -> &'a str {
    out.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix("=[")?.strip_suffix(']'))
        .unwrap_or("(none)")
        .trim()
}

/// The user namespace of container `id`'s final `config.json`: its path
/// and the host id its uid 0 maps to.
fn userns_in_config(config: &Value) -> (Option<String>, Option<u64>) {
    let linux = &config["linux"];
    let path = linux["namespaces"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|n| n["type"] == "user")
        .map(|n| n["path"].as_str().unwrap_or("").to_string());
    let root = linux["uidMappings"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|m| m["containerID"] == 0)
        .and_then(|m| m["hostID"].as_u64());
    (path, root)
}

/// The case: one pod with `userns_options` (mode POD, ids 0 to 65535 from
/// [`HOST_ID`]), of the HOME image (tests/support/home.rs), two read-only
/// 1 GiB containers, as root and as uid 1000 (no passwd entry). Each runs
/// in the sandbox's user namespace joined by path with the mappings beside
/// it (checked in its final `config.json` and its `/proc/self/uid_map`),
/// and sees:
/// - `/tmp` our 256 MiB tmpfs, owned `0 0` mode 1777 in the container, writable;
/// - `/dev/shm` grown to 512 MiB, writable;
/// - root: `HOME=/root` the image's, listable, read-only, its caches
///   (`$HOME/.cache/torch`, `$HOME/.triton`) tmpfs of ours owned by uid 0 in
///   the container, written ([`Seen::cached`]);
/// - uid 1000: `HOME=/` read-only, its caches under `/` tmpfs of ours owned
///   by uid 1000 in the container, written ([`Seen::root_caches`],
///   docs/design.md#home-rule).
///
/// No mount of ours reaches the host's, this test's or the node's mount
/// table, while the pod runs or after.
pub fn pod_user_namespace(node: &mut Node, r: &mut Report) {
    let t0 = std::time::Instant::now();
    let image = node.image("userns-home", home::shape_image);
    let tables = node.mount_tables();
    let opts = PodOpts { userns: Some(HOST_ID), ..PodOpts::default() };
    let Some(pod) = r.step("RunPodSandbox", node.run_pod("userns", &opts)) else { return };
    let script = probe();
    let mut ids = Vec::new();
    for (name, uid) in [("root", None), ("uid1000", Some(1000))] {
        let opts = CtrOpts { image: Some(&image), user: uid, ..CtrOpts::ro(name, GI) };
        let Some(c) = r.step(&format!("{name}: start"), node.start_container(&pod, &opts)) else { continue };
        ids.push(c.clone());
        if let Some(config) = r.step(&format!("{name}: the final config.json"), node.final_config(&c)) {
            let (path, root) = userns_in_config(&config);
            r.seen(
                &format!("{name}: config.json's user namespace"),
                format!("path {path:?}, uid 0 -> {root:?}"),
            );
            r.check(
                path.as_deref().is_some_and(|p| !p.is_empty()) && root == Some(u64::from(HOST_ID)),
                format!("{name}: not the sandbox's user namespace by path with uid 0 -> {HOST_ID}: {path:?} {root:?}"),
            );
        }
        let Some((_, out, _)) = r.step(&format!("{name}: probe"), node.exec(&c, &["sh", "-c", &script]))
        else {
            continue;
        };
        let seen = Seen::parse(&out);
        let (tmp, shm, map) = (field(&out, "TMP"), field(&out, "SHM"), field(&out, "UIDMAP"));
        let has = |line: &str| out.lines().any(|l| l == line);
        r.seen(name, format!("uid {} (uid_map {map}), /tmp {tmp}, /dev/shm {shm}", field(&out, "ID")));
        r.seen(
            &format!("{name}: HOME"),
            format!(
                "{}; listed {}, caches written {:?} ($HOME/.triton {:?})",
                seen.summary(),
                has("HOME-LISTED"),
                seen.caches,
                seen.cache_stat
            ),
        );
        let want_id = uid.unwrap_or(0).to_string();
        r.check(field(&out, "ID") == want_id, format!("{name}: runs as uid {}", field(&out, "ID")));
        r.check(map == format!("0 {HOST_ID} 65536"), format!("{name}: uid_map {map:?}"));
        r.served(name, &out, 256 * MI, 512 * MI);
        r.check(tmp == "0 0 1777", format!("{name}: /tmp's uid gid mode are {tmp:?}, want \"0 0 1777\""));
        // Root's HOME stays the image's, its caches root's; uid 1000 has
        // no passwd entry: HOME=/, the caches under it its own.
        let failed = match uid {
            None => seen.cached("/root", 0, &home::PROBED_CACHES),
            Some(_) => seen.root_caches(1000),
        };
        for f in failed {
            r.check(false, format!("{name}: {f}"));
        }
        r.check(uid.is_some() || has("HOME-LISTED"), "root: ls $HOME failed");
        check_tables(r, &format!("{name}, running"), &tables, &node.mount_tables(), &[]);
    }
    let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
    r.step("stop and remove", node.teardown(&pod, &ids));
    check_tables(r, "after the pod", &tables, &node.mount_tables(), &[]);
    r.seen("took", format!("{:.1?}", t0.elapsed()));
}
