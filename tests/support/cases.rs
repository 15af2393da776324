//! The pod cases, written once and run over each way in ([`Executor`]): case 1
//! to case 9 of docs/design.md#pods through the RuntimeClass wrapper in
//! spec mode and in hook mode (both handlers of one node:
//! tests/runtimes/cri.rs) and through the NRI plugin (tests/nri/). Where a
//! way differs (which executor `config.json` shows, NRI's read-only signal,
//! what "without us" means in case 8, the plugin registering again in
//! case 9) it is the node's `way`, not a copy.

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use super::cri::*;
use super::pods::*;
use super::*;

/// Runs `case` on `node` once per way into it (spec and hook mode on a
/// wrapper node, the plugin on an NRI node), each from the empty host
/// config, and fails with every failed check of every way.
pub fn each_way(mut node: Node, mut case: impl FnMut(&mut Node, &mut Report)) {
    let mut r = Report::new(&node);
    for way in node.ways() {
        node.way = way;
        r.way(way);
        node.host_config("");
        case(&mut node, &mut r);
    }
    r.finish();
}

/// Case 1: One read-only container with a 1 GiB limit: `/tmp` 256 MiB and
/// `/dev/shm` 512 MiB, both writable; 600 MiB into `/dev/shm` is ENOSPC,
/// not an OOM kill.
pub fn case1(node: &mut Node, r: &mut Report) {
    let Some(pod) = r.step("RunPodSandbox", node.run_pod("ro-1g", &PodOpts::default())) else {
        return;
    };
    let Some(c) = r.step("start ro 1Gi", node.start_container(&pod, &CtrOpts::ro("app", GI))) else {
        return;
    };
    if let Some(p) = r.step("probe", node.probe(&c)) {
        r.served("ro 1Gi", &p, 256 * MI, 512 * MI);
    }
    r.executor(node, &c, true);
    if node.way == Executor::Nri {
        r.signal(node, "default/ro-1g/app", true);
    }
    let dd = "dd if=/dev/zero of=/dev/shm/fill bs=1M count=600; e=$?; rm -f /dev/shm/fill; exit $e";
    if let Some((code, out, err)) = r.step("dd 600Mi", node.exec(&c, &["sh", "-c", dd])) {
        r.seen("dd 600 MiB into /dev/shm", format!("exit {code}: {}", err.trim().replace('\n', " | ")));
        r.check(
            code != 0 && err.contains("No space left on device"),
            format!("dd of 600 MiB into /dev/shm: exit {code}, want ENOSPC: {out}{err}"),
        );
    }
    if let Some((status, _)) = r.step("ContainerStatus", node.status(&c)) {
        let (state, reason) =
            (status["state"].as_str().unwrap_or("?"), status["reason"].as_str().unwrap_or(""));
        let kills = node.oom_kills(&pod, &c);
        r.seen("after dd", format!("state {state}, reason {reason:?}, cgroup oom_kill {kills:?}"));
        r.check(
            state == "CONTAINER_RUNNING" && reason != "OOMKilled",
            format!("container after dd: {state} {reason}"),
        );
        r.check(kills.unwrap_or(0) == 0, format!("the memory cgroup counted {kills:?} OOM kills"));
    }
    r.step("stop and remove", node.teardown(&pod, &[&c]));
}

/// Runs one pod annotated `tmp-size` / `shm-size` = `asked`, with a
/// read-only 1 GiB container, under host config `host`, and checks that the
/// annotations reach the container's spec and that `/tmp` and `/dev/shm`
/// come out as `want`.
pub fn annotated_pod(
    node: &mut Node,
    r: &mut Report,
    part: &str,
    host: &str,
    asked: [&str; 2],
    want: [u64; 2],
) {
    node.host_config(host);
    let ann = [(ANN_TMP, asked[0]), (ANN_SHM, asked[1])];
    let opts = PodOpts { annotations: &ann, ..PodOpts::default() };
    let Some(pod) = r.step(&format!("{part}: RunPodSandbox"), node.run_pod(part, &opts)) else {
        // The wrapper's own error does not reach CRI's message: say what
        // `doctor` makes of the host config.
        let path = node.ns_path(node.way.config_file());
        let out = output_with(Command::new(hook_bin()).arg("doctor").arg("--config").arg(&path), b"");
        let doctor = text(&out.stdout);
        r.seen(&format!("{part}: doctor"), doctor.lines().find(|l| l.contains(" config:")).unwrap_or("?"));
        return;
    };
    let Some(c) = r.step(&format!("{part}: start"), node.start_container(&pod, &CtrOpts::ro("app", GI)))
    else {
        return;
    };
    // Through NRI: the plugin gets the pod's annotations with each request;
    // CRI does not pass them to the container's spec, so the adjustment
    // copies ours there for the hook.
    if let Some((_, info)) = r.step(&format!("{part}: ContainerStatus"), node.status(&c)) {
        let spec = &info["runtimeSpec"]["annotations"];
        r.seen(
            &format!("{part}: spec annotations"),
            format!("tmp-size {}, shm-size {}", spec[ANN_TMP], spec[ANN_SHM]),
        );
        r.check(
            spec[ANN_TMP] == asked[0] && spec[ANN_SHM] == asked[1],
            format!("{part}: pod annotations did not reach the container's spec: {spec}"),
        );
    }
    if let Some(p) = r.step(&format!("{part}: probe"), node.probe(&c)) {
        r.served(part, &p, want[0], want[1]);
    }
    r.step(&format!("{part}: stop and remove"), node.teardown(&pod, &[&c]));
}

/// Case 2: Pod annotations set the sizes; `max_tmp_size` / `max_shm_size` cap
/// them (with a warning naming the annotation and the cap); `annotations =
/// "ignore"` makes them have no effect.
pub fn case2(node: &mut Node, r: &mut Report) {
    let asked = ["100Mi", "300Mi"];
    annotated_pod(node, r, "annotations", "", asked, [100 * MI, 300 * MI]);

    // One log per way: a way's warnings are its own.
    let log = node.dir.join(format!("hook{}.log", node.way.suffix()));
    let capped = format!(
        "max_tmp_size = \"64Mi\"\nmax_shm_size = \"200Mi\"\nlog_file = {log:?}\nlog_level = \"warn\"\n"
    );
    annotated_pod(node, r, "over max_*_size", &capped, asked, [64 * MI, 200 * MI]);
    let text = r.read(&log);
    r.seen("hook log", format!("{:?}", text.lines().collect::<Vec<_>>()));
    for (key, cap, bytes) in [(ANN_TMP, "64Mi", 64 * MI), (ANN_SHM, "200Mi", 200 * MI)] {
        let warned =
            text.lines().any(|l| l.contains(key) && (l.contains(cap) || l.contains(&bytes.to_string())));
        r.check(warned, format!("no warning naming {key} and the cap {cap} in the hook's log: {text:?}"));
    }

    annotated_pod(node, r, "annotations = ignore", "annotations = \"ignore\"\n", asked, [256 * MI, 512 * MI]);
}

/// Case 2, the memory-limit cap: no tmpfs larger than the container's memory
/// limit, whatever an annotation asks (a tmpfs it cannot fill without an OOM
/// kill turns ENOSPC into a kill).
pub fn case2_limit(node: &mut Node, r: &mut Report) {
    annotated_pod(node, r, "2Gi and 3Gi asked, 1Gi limit", "", ["2Gi", "3Gi"], [GI, GI]);
}

/// Case 3: Two read-only containers of 1 GiB and 4 GiB in one pod: `/dev/shm`
/// 512 MiB after the first, 2 GiB after the second, one mount for both.
pub fn case3(node: &mut Node, r: &mut Report) {
    let opts = PodOpts { memory: 5 * GI, ..PodOpts::default() };
    let Some(pod) = r.step("RunPodSandbox", node.run_pod("two", &opts)) else { return };
    let Some(a) = r.step("start ro 1Gi", node.start_container(&pod, &CtrOpts::ro("small", GI))) else {
        return;
    };
    if let Some(p) = r.step("probe small", node.probe(&a)) {
        r.served("1Gi container, alone", &p, 256 * MI, 512 * MI);
    }
    let Some(b) = r.step("start ro 4Gi", node.start_container(&pod, &CtrOpts::ro("big", 4 * GI))) else {
        return;
    };
    let pb = r.text("probe big", node.probe(&b));
    r.served("4Gi container", &pb, GI, 2 * GI);
    let pa = r.text("probe small again", node.probe(&a));
    let sa = mount_at(&parse_mountinfo(&pa), "/dev/shm").and_then(MountInfo::size);
    r.seen("1Gi container after the 4Gi one", format!("/dev/shm {}", sz(sa)));
    r.check(sa == Some(2 * GI), format!("the 1Gi container sees /dev/shm {}, want 2Gi", sz(sa)));
    let (da, db) = (device_at(&pa, "/dev/shm"), device_at(&pb, "/dev/shm"));
    r.seen("/dev/shm device", format!("small {da:?}, big {db:?}"));
    r.check(da.is_some() && da == db, format!("not one /dev/shm: {da:?} vs {db:?}"));
    r.step("write in small", node.exec(&a, &["sh", "-c", "echo shared > /dev/shm/mark"]));
    let seen = r.text("read in big", node.exec(&b, &["cat", "/dev/shm/mark"]).map(|x| x.1));
    r.check(
        seen.trim() == "shared",
        format!("a file written in /dev/shm by one is not seen by the other: {seen:?}"),
    );
    r.step("stop and remove", node.teardown(&pod, &[&a, &b]));
}

/// Case 4: A writable-root container in the `oci-tmpfs` class: untouched, and the
/// pod's `/dev/shm` stays 64 MiB.
pub fn case4(node: &mut Node, r: &mut Report) {
    let Some(pod) = r.step("RunPodSandbox", node.run_pod("rw", &PodOpts::default())) else {
        return;
    };
    let opts = CtrOpts { readonly: false, ..CtrOpts::ro("rw", GI) };
    let Some(c) = r.step("start rw 1Gi", node.start_container(&pod, &opts)) else { return };
    if let Some(p) = r.step("probe", node.probe(&c)) {
        r.untouched("writable root, 1Gi", &p, SHM_64M);
    }
    r.executor(node, &c, false);
    if node.way == Executor::Nri {
        r.signal(node, "default/rw/rw", false);
    }
    r.step("stop and remove", node.teardown(&pod, &[&c]));
}

/// Case 5: `TMPDIR=/scratch`, missing in the image: a tmpfs there.
pub fn case5(node: &mut Node, r: &mut Report) {
    let Some(pod) = r.step("RunPodSandbox", node.run_pod("tmpdir", &PodOpts::default())) else {
        return;
    };
    let env = [("TMPDIR", "/scratch")];
    let opts = CtrOpts { env: &env, ..CtrOpts::ro("app", GI) };
    let Some(c) = r.step("start", node.start_container(&pod, &opts)) else { return };
    let script =
        "cat /proc/self/mountinfo; touch /scratch/probe && echo SCRATCH-WRITABLE; echo TMPDIR=$TMPDIR";
    if let Some((_, out, _)) = r.step("probe", node.exec(&c, &["sh", "-c", script])) {
        let mounts = parse_mountinfo(&out);
        let s = mount_at(&mounts, "/scratch");
        let t = mount_at(&mounts, "/tmp");
        r.seen(
            "TMPDIR=/scratch, 1Gi",
            format!(
                "/scratch {} (source {}), {}, /tmp {}",
                sz(s.and_then(MountInfo::size)),
                s.map_or("-", |m| m.source.as_str()),
                if out.contains("SCRATCH-WRITABLE") { "writable" } else { "NOT writable" },
                sz(t.and_then(MountInfo::size))
            ),
        );
        r.check(out.contains("TMPDIR=/scratch"), "TMPDIR did not reach the container");
        r.check(
            s.is_some_and(|s| s.source == OURS && s.fstype == "tmpfs"),
            format!("/scratch is not our tmpfs: {s:?}"),
        );
        r.check(
            s.and_then(MountInfo::size) == Some(256 * MI),
            format!("/scratch is {}, want 256Mi", sz(s.and_then(MountInfo::size))),
        );
        r.check(out.contains("SCRATCH-WRITABLE"), "/scratch is not writable");
        r.check(
            t.is_some_and(|t| t.source == OURS) && t.and_then(MountInfo::size) == Some(256 * MI),
            format!("/tmp: {t:?}"),
        );
    }
    r.step("stop and remove", node.teardown(&pod, &[&c]));
}

/// Case 6: The pause container: nothing mounted in it, and the pod's `/dev/shm`
/// still 64 MiB before any app container starts.
pub fn case6(node: &mut Node, r: &mut Report) {
    let Some(pod) = r.step("RunPodSandbox", node.run_pod("pause", &PodOpts::default())) else {
        return;
    };
    if let Some(pid) = r.step("sandbox pid", node.sandbox_pid(&pod)) {
        let mi = r.read(Path::new(&format!("/proc/{pid}/mountinfo")));
        r.untouched(&format!("pause container (pid {pid})"), &mi, SHM_64M);
    }
    r.executor(node, &pod.id, false);
    r.step("stop and remove", node.teardown(&pod, &[]));
}

/// Case 7: A `hostIPC` pod: the node's `/dev/shm` is never resized.
pub fn case7(node: &mut Node, r: &mut Report) {
    let node_shm = node.ns_path("/dev/shm");
    let real_shm = fs_bytes(Path::new("/dev/shm"));
    let before = fs_bytes(&node_shm);
    r.seen("node /dev/shm before", sz(Some(before)));
    r.check(before == SHM_64M, format!("the node's /dev/shm starts at {}", sz(Some(before))));
    let opts = PodOpts { host_ipc: true, ..PodOpts::default() };
    let Some(pod) = r.step("RunPodSandbox", node.run_pod("hostipc", &opts)) else { return };
    let Some(c) = r.step("start ro 1Gi", node.start_container(&pod, &CtrOpts::ro("app", GI))) else {
        return;
    };
    if let Some(p) = r.step("probe", node.probe(&c)) {
        r.served("hostIPC, ro 1Gi", &p, 256 * MI, SHM_64M);
    }
    let after = fs_bytes(&node_shm);
    r.seen("node /dev/shm after", sz(Some(after)));
    r.check(
        after == before,
        format!("the node's /dev/shm went from {} to {}", sz(Some(before)), sz(Some(after))),
    );
    r.check(fs_bytes(Path::new("/dev/shm")) == real_shm, "the real host's /dev/shm changed");
    r.step("stop and remove", node.teardown(&pod, &[&c]));
}

/// Case 8: Without the way in, nothing changes: a pod of the default `runc`
/// handler beside the wrapper's, or any pod while the NRI plugin is stopped
/// (its containers start at once: NRI costs nothing when no plugin is
/// connected).
pub fn case8(node: &mut Node, r: &mut Report) {
    let (name, handler, without) = if node.way == Executor::Nri {
        node.stop_plugin();
        ("stopped", None, "plugin stopped")
    } else {
        ("runc", Some(""), "runc handler")
    };
    let opts = PodOpts { handler, ..PodOpts::default() };
    let Some(pod) = r.step("RunPodSandbox", node.run_pod(name, &opts)) else { return };
    let t0 = Instant::now();
    let Some(c) = r.step("start ro 1Gi", node.start_container(&pod, &CtrOpts::ro("app", GI))) else {
        return;
    };
    r.seen(&format!("CreateContainer + StartContainer, {without}"), format!("{:?}", t0.elapsed()));
    if let Some(p) = r.step("probe", node.probe(&c)) {
        r.untouched(&format!("{without}, ro 1Gi"), &p, SHM_64M);
        r.check(!p.contains("TMP-WRITABLE"), format!("/tmp is writable with a read-only root, {without}"));
    }
    if let Some(pid) = r.step("sandbox pid", node.sandbox_pid(&pod)) {
        let mi = r.read(Path::new(&format!("/proc/{pid}/mountinfo")));
        r.untouched(&format!("{without}, pause container"), &mi, SHM_64M);
    }
    r.executor(node, &c, false);
    r.step("stop and remove", node.teardown(&pod, &[&c]));
}

/// Case 9: containerd restarted while a pod runs: the mounts stay, and a new
/// container of the pod still gets its own.
pub fn case9(node: &mut Node, r: &mut Report) {
    let opts = PodOpts { memory: 3 * GI, ..PodOpts::default() };
    let Some(pod) = r.step("RunPodSandbox", node.run_pod("restart", &opts)) else { return };
    let Some(a) = r.step("start ro 1Gi", node.start_container(&pod, &CtrOpts::ro("first", GI))) else {
        return;
    };
    if let Some(p) = r.step("probe before restart", node.probe(&a)) {
        r.served("1Gi, before the restart", &p, 256 * MI, 512 * MI);
    }
    if node.way == Executor::Nri {
        let n = node.registrations();
        node.restart_daemon();
        let waited = node.wait_registered(n + 1);
        r.seen(
            "containerd",
            format!("restarted; the plugin registered again {waited:?} after CRI was ready"),
        );
    } else {
        node.restart_daemon();
        r.seen("containerd", "restarted");
    }
    if let Some(p) = r.step("probe after restart", node.probe(&a)) {
        r.served("1Gi, after the restart", &p, 256 * MI, 512 * MI);
    }
    let Some(b) =
        r.step("start ro 2Gi after restart", node.start_container(&pod, &CtrOpts::ro("second", 2 * GI)))
    else {
        return;
    };
    if let Some(p) = r.step("probe new", node.probe(&b)) {
        r.served("2Gi, started after the restart", &p, 512 * MI, GI);
    }
    let pa = r.text("probe first again", node.probe(&a));
    let sa = mount_at(&parse_mountinfo(&pa), "/dev/shm").and_then(MountInfo::size);
    r.seen("1Gi container after the 2Gi one", format!("/dev/shm {}", sz(sa)));
    r.check(sa == Some(GI), format!("the first container sees /dev/shm {}, want 1Gi", sz(sa)));
    r.step("stop and remove", node.teardown(&pod, &[&a, &b]));
}

/// What a container writes for `usage`: 100 MiB into `/dev/shm`, 30 MiB
/// into `/tmp` and 5 MiB into `$HOME/.cache`.
pub const USAGE_FILL: &str = "dd if=/dev/zero of=/dev/shm/fill bs=1M count=100 2>/dev/null && \
    dd if=/dev/zero of=/tmp/fill bs=1M count=30 2>/dev/null && \
    dd if=/dev/zero of=\"$HOME/.cache/fill\" bs=1M count=5 2>/dev/null && echo FILLED";

/// Case usage: a read-only container with a 1 GiB limit (root, `HOME`
/// `/root`) writes
/// [`USAGE_FILL`]; `oci-tmpfs-hook usage --json` on the node lists it by
/// its CRI name with each target within 1 MiB of what was written, at its
/// planned size (`/tmp` 256 MiB, `/dev/shm` 512 MiB, `~/.cache` one fifth
/// of the 256 MiB `home_size`, whole MiB), the cgroup's shmem at least their
/// sum, and the limit.
pub fn usage(node: &mut Node, r: &mut Report) {
    let Some(pod) = r.step("RunPodSandbox", node.run_pod("usage", &PodOpts::default())) else {
        return;
    };
    // root's HOME `/root`, empty: its caches get a tmpfs each.
    let image = node.image("usage", |root| {
        std::fs::write(root.join("etc/passwd"), "root:x:0:0:root:/root:/bin/sh\n").unwrap();
        std::fs::create_dir_all(root.join("root")).unwrap();
    });
    let opts = CtrOpts { image: Some(&image), ..CtrOpts::ro("app", GI) };
    let Some(c) = r.step("start ro 1Gi", node.start_container(&pod, &opts)) else {
        return;
    };
    let fill = node.exec(&c, &["sh", "-c", USAGE_FILL]);
    r.check(
        matches!(&fill, Ok((0, out, _)) if out.contains("FILLED")),
        format!("writing 100, 30 and 5 MiB: {fill:?}"),
    );
    let pod_name = pod.config["metadata"]["name"].as_str().expect("the pod's name").to_string();
    let cache = (51 * MI, 5 * MI);
    usage_sees(
        r,
        node,
        &c,
        &pod_name,
        &[("/dev/shm", 512 * MI, 100 * MI), ("/tmp", 256 * MI, 30 * MI)],
        cache,
    );
    r.step("stop and remove", node.teardown(&pod, &[&c]));
}

/// `oci-tmpfs-hook usage --json` on `node` (in the mount namespace its
/// containerd runs in) lists container `id` of `pod` by its CRI name,
/// each of `targets` (path, size, bytes written) at its size and within
/// 1 MiB of what was written, the target under `HOME` ending in `/.cache`
/// likewise (`cache`: size, written; none when zero written), the cgroup's
/// shmem at least all that, and the 1 GiB limit.
pub fn usage_sees(
    r: &mut Report,
    node: &Node,
    id: &str,
    pod: &str,
    targets: &[(&str, u64, u64)],
    cache: (u64, u64),
) {
    let out = Command::new("nsenter")
        .arg(format!("--mount=/proc/{}/ns/mnt", node.holder.id()))
        .arg("--")
        .arg(hook_bin())
        .args(["usage", "--json"])
        .output();
    let Some(out) = r.step("usage --json", out.map_err(|e| e.to_string())) else { return };
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    r.check(
        out.status.success(),
        format!("usage --json: {:?}: {}", out.status, String::from_utf8_lossy(&out.stderr)),
    );
    let doc: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
    let Some(c) = doc.as_array().and_then(|a| a.iter().find(|c| c["id"] == id)) else {
        return r.check(false, format!("usage --json does not list {id}: {text}"));
    };
    r.seen("usage --json", c);
    let listed = c["targets"].as_array().cloned().unwrap_or_default();
    let near = |v: &serde_json::Value, want: u64| v.as_u64().is_some_and(|b| b.abs_diff(want) <= MI);
    r.check(c["name"] == format!("default/{pod}/app"), format!("usage's name {}", c["name"]));
    let mut wrote = 0;
    let cache_target = listed.iter().find(|t| t["path"].as_str().is_some_and(|p| p.ends_with("/.cache")));
    let mut expect: Vec<(String, Option<&serde_json::Value>, u64, u64)> = targets
        .iter()
        .map(|(p, size, w)| (p.to_string(), listed.iter().find(|t| t["path"] == *p), *size, *w))
        .collect();
    if cache.1 > 0 {
        expect.push(("$HOME/.cache".to_string(), cache_target, cache.0, cache.1));
    }
    for (path, t, size, w) in expect {
        wrote += w;
        r.check(
            t.is_some_and(|t| near(&t["used_bytes"], w) && t["size_bytes"] == size),
            format!("usage's {path} {t:?}, want {size} bytes with {w} used"),
        );
    }
    r.check(
        c["shmem_bytes"].as_u64().is_some_and(|b| b >= wrote),
        format!("usage's shmem {}, want at least {wrote}", c["shmem_bytes"]),
    );
    r.check(c["memory_limit_bytes"] == GI, format!("usage's limit {}", c["memory_limit_bytes"]));
}
