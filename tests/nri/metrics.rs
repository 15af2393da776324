//! `nri --metrics-address` (docs/nri.md#metrics) against containerd 2.1: the
//! plugin's endpoint scraped over loopback before and after a few pods, each
//! counter checked to move as those pods say; then malformed and hostile HTTP
//! clients (garbage, an oversize head, a wrong method and path, slowloris
//! connections holding every client slot): each gets a 4xx or is dropped, and
//! a pod created while they hold their connections still gets its mounts from
//! the plugin, which never waits for them. The per-container series follow
//! a container's cgroup and go with it.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use super::*;

/// The address the plugin logged (`nri: metrics at http://ADDR/metrics`), last.
fn metrics_addr(node: &Node) -> SocketAddr {
    node.read("plugin.log")
        .lines()
        .rev()
        .find_map(|l| l.split("nri: metrics at http://").nth(1)?.strip_suffix("/metrics"))
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("no metrics address in the plugin's log:\n{}", node.read("plugin.log")))
}

/// Sends `request` raw and reads the whole answer (the server closes).
fn raw(addr: SocketAddr, request: &[u8]) -> std::io::Result<String> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    s.write_all(request)?;
    let mut out = Vec::new();
    s.read_to_end(&mut out)?;
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// The status code of an HTTP answer.
fn status(answer: &str) -> u16 {
    answer.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0)
}

/// `GET /metrics`: each sample `name{labels}` with its value.
fn scrape(addr: SocketAddr) -> Result<BTreeMap<String, f64>, String> {
    let answer = raw(addr, b"GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n").map_err(|e| e.to_string())?;
    if status(&answer) != 200 {
        return Err(format!("GET /metrics: {answer}"));
    }
    let body = answer.split_once("\r\n\r\n").map(|x| x.1).unwrap_or("");
    Ok(body
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| {
            let (k, v) = l.rsplit_once(' ')?;
            Some((k.to_string(), v.parse().ok()?))
        })
        .collect())
}

const P: &str = "oci_tmpfs_hook_nri_";

/// The value of `name` (prefixed) in a scrape; 0 when absent.
fn val(m: &BTreeMap<String, f64>, name: &str) -> f64 {
    m.get(&format!("{P}{name}")).copied().unwrap_or(0.0)
}

/// The change of `name` between two scrapes.
fn delta(before: &BTreeMap<String, f64>, after: &BTreeMap<String, f64>, name: &str) -> f64 {
    val(after, name) - val(before, name)
}

/// A node whose plugin serves metrics on a port of loopback the kernel picks.
fn metrics_node(case: &str) -> (Node, SocketAddr) {
    let mut node = Node::nri(case);
    node.stop_plugin();
    node.start_plugin_with(&["--metrics-address".into(), "127.0.0.1:0".into()]);
    let addr = metrics_addr(&node);
    (node, addr)
}

/// Before and after four pods (read-only 1 GiB; writable root; disabled by
/// annotation; a bad size annotation under `on_error = "warn"`), every
/// counter moves by what those pods did.
/// The runtime that configured the plugin, in `runtime_info`: containerd
/// 2.3 sends its NRI version (v0.12, which has the validator); 2.1 sends none.
fn runtime_info(r: &mut Report, node: &Node, scrape: &BTreeMap<String, f64>) {
    let runtime: Vec<&String> =
        scrape.keys().filter(|k| k.starts_with(&format!("{P}runtime_info{{"))).collect();
    r.seen("runtime_info", format!("{runtime:?}"));
    let sends = node.ctd.major_minor() >= (2, 3);
    let labels = if sends { "nri_version=\"v0.12" } else { "nri_version=\"\",validator=\"unknown\"" };
    r.check(
        runtime.len() == 1
            && runtime[0].starts_with(&format!("{P}runtime_info{{runtime=\"containerd\""))
            && runtime[0].contains(labels)
            && (!sends || runtime[0].contains("validator=\"yes\"")),
        format!("runtime_info for containerd {}: {runtime:?}", node.ctd.version),
    );
}

#[test]
fn metrics_count_what_the_plugin_did() {
    let mut r = Report::of("nri", "metrics-counters");
    let (mut node, addr) = metrics_node("metrics-counters");
    let Some(before) = r.step("scrape before", scrape(addr)) else { return r.finish() };
    r.seen("before", format!("{before:?}"));
    r.check(
        val(&before, "registrations_total") == 1.0,
        "registrations_total is not 1 after one registration",
    );
    r.check(val(&before, "registered") == 1.0, "registered is not 1 while registered");
    r.check(
        before.keys().any(|k| k.starts_with(&format!("{P}info{{version=\"{}\"", env!("CARGO_PKG_VERSION")))),
        "no info sample with the version",
    );
    runtime_info(&mut r, &node, &before);
    node.host_config("on_error = \"warn\"\n");
    let mut started = Vec::new();
    let ro = CtrOpts::ro("app", GI);
    let rw = CtrOpts { readonly: false, ..CtrOpts::ro("app", GI) };
    let off = [("oci-tmpfs-hook/enabled", "false")];
    let bad = [(ANN_TMP, "lots")];
    type Case<'a> = (&'a str, &'a [(&'a str, &'a str)], &'a CtrOpts<'a>);
    let pods: [Case; 4] =
        [("m-ro", &[], &ro), ("m-rw", &[], &rw), ("m-off", &off, &ro), ("m-bad", &bad, &ro)];
    for (name, ann, opts) in pods {
        let popts = PodOpts { annotations: ann, ..PodOpts::default() };
        let Some(pod) = r.step(&format!("{name}: RunPodSandbox"), node.run_pod(name, &popts)) else {
            continue;
        };
        match r.step(&format!("{name}: start"), node.start_container(&pod, opts)) {
            Some(c) => {
                if name == "m-ro" {
                    if let Some(p) = r.step("m-ro: probe", node.probe(&c)) {
                        r.served("m-ro", &p, 256 * MI, 512 * MI);
                    }
                }
                started.push((pod, c));
            }
            None => {
                let _ = node.teardown(&pod, &[]);
            }
        }
    }
    let Some(after) = r.step("scrape after", scrape(addr)) else { return r.finish() };
    // The scrape as text, for docs/nri.md and the README (with --nocapture).
    if let Ok(text) = raw(addr, b"GET /metrics HTTP/1.1\r\n\r\n") {
        r.seen("the scrape after the pods", format!("\n{text}"));
    }
    let changed: BTreeMap<&String, f64> =
        after.iter().filter(|(k, v)| before.get(*k) != Some(v)).map(|(k, v)| (k, *v)).collect();
    r.seen("changed", format!("{changed:?}"));
    let want = [
        ("containers_seen_total", 4.0),
        ("containers_acted_on_total", 1.0),
        ("containers_left_alone_total{reason=\"writable_root\"}", 1.0),
        ("containers_left_alone_total{reason=\"disabled_by_annotation\"}", 1.0),
        ("containers_failed_total{reason=\"plan\",on_error=\"warn\"}", 1.0),
        ("tmpfs_granted_bytes_count{target=\"tmp\"}", 1.0),
        ("tmpfs_granted_bytes_sum{target=\"tmp\"}", (256 * MI) as f64),
        ("tmpfs_granted_bytes_count{target=\"shm\"}", 1.0),
        ("tmpfs_granted_bytes_sum{target=\"shm\"}", (512 * MI) as f64),
        // The bad annotation fails inside the plan: three plans were made.
        ("plan_duration_seconds_count", 3.0),
        ("adjustment_duration_seconds_count", 4.0),
        ("registrations_total", 0.0),
        ("reconnects_total", 0.0),
    ];
    for (name, d) in want {
        let got = delta(&before, &after, name);
        r.check(got == d, format!("{name} moved by {got}, want {d}"));
    }
    // 256 MiB lies in the (64 MiB, 256 MiB] bucket.
    r.check(
        delta(&before, &after, "tmpfs_granted_bytes_bucket{target=\"tmp\",le=\"2.68435456e+08\"}") == 1.0
            && delta(&before, &after, "tmpfs_granted_bytes_bucket{target=\"tmp\",le=\"6.7108864e+07\"}")
                == 0.0,
        "the /tmp size is not in the 256 MiB bucket",
    );
    let sum = delta(&before, &after, "adjustment_duration_seconds_sum");
    r.check(sum > 0.0 && sum < 2.0, format!("adjustment_duration_seconds_sum moved by {sum} s"));
    // The host config changed (on_error): the info metric follows it.
    let hash = |m: &BTreeMap<String, f64>| {
        m.keys()
            .find(|k| k.starts_with(&format!("{P}info{{")))
            .cloned()
            .unwrap_or_else(|| panic!("no {P}info sample in {:?}", m.keys().collect::<Vec<_>>()))
    };
    r.check(hash(&before) != hash(&after), format!("the config hash did not change: {}", hash(&after)));
    r.check(
        after.keys().filter(|k| k.starts_with(&format!("{P}info{{"))).count() == 1,
        "more than one info sample",
    );
    // A runtime restart: registered again, one reconnect.
    let n = node.registrations();
    node.restart_daemon();
    node.wait_registered(n + 1);
    if let Some(again) = r.step("scrape after the restart", scrape(addr)) {
        r.check(delta(&after, &again, "registrations_total") == 1.0, "registrations_total did not move by 1");
        r.check(delta(&after, &again, "reconnects_total") >= 1.0, "reconnects_total did not move");
        r.check(val(&again, "registered") == 1.0, "registered is not 1 after the restart");
    }
    for (pod, c) in &started {
        let _ = node.teardown(pod, &[c]);
    }
    r.finish();
}

/// A pod's container handed to our hook gets its own series: the tmpfs
/// sizes planned for it, and, read from its memory cgroup at scrape time,
/// its limit and the shmem it is charged for once it wrote 100 MiB into
/// `/dev/shm` (which `usage` on the node shows too); a container left alone
/// (a writable root) gets none; the series go when the runtime removes the
/// container.
#[test]
fn metrics_per_container_follow_the_cgroup_and_go_with_the_container() {
    let mut r = Report::of("nri", "metrics-per-container");
    let (mut node, addr) = metrics_node("metrics-per-container");
    let labels = |pod: &str| format!("{{namespace=\"default\",pod=\"{pod}\",container=\"app\"");
    let mut started = Vec::new();
    for (name, readonly) in [("mc-ro", true), ("mc-rw", false)] {
        let Some(pod) = r.step(&format!("{name}: RunPodSandbox"), node.run_pod(name, &PodOpts::default()))
        else {
            continue;
        };
        let opts = CtrOpts { readonly, ..CtrOpts::ro("app", GI) };
        match r.step(&format!("{name}: start"), node.start_container(&pod, &opts)) {
            Some(c) => started.push((name, pod, c)),
            None => {
                let _ = node.teardown(&pod, &[]);
            }
        }
    }
    let Some((_, ro_pod, ro)) = started.iter().find(|(n, _, _)| *n == "mc-ro") else { return r.finish() };
    let pod_name = |pod: &Pod| pod.config["metadata"]["name"].as_str().expect("the pod's name").to_string();
    let fill = node.exec(ro, &["dd", "if=/dev/zero", "of=/dev/shm/fill", "bs=1M", "count=100"]);
    r.check(matches!(fill, Ok((0, _, _))), format!("writing 100 MiB into /dev/shm: {fill:?}"));
    let shm = [("/dev/shm", 512 * MI, 100 * MI), ("/tmp", 256 * MI, 0)];
    cases::usage_sees(&mut r, &node, ro, &pod_name(ro_pod), &shm, (0, 0));
    let Some(m) = r.step("scrape", scrape(addr)) else { return r.finish() };
    let text = raw(addr, b"GET /metrics HTTP/1.1\r\n\r\n").unwrap_or_default();
    r.seen(
        "the per-container series",
        format!(
            "\n{}",
            text.lines().filter(|l| l.contains("oci_tmpfs_hook_container_")).collect::<Vec<_>>().join("\n")
        ),
    );
    let get = |m: &BTreeMap<String, f64>, series: &str, extra: &str| {
        m.get(&format!("oci_tmpfs_hook_container_{series}{}{extra}}}", labels(&pod_name(ro_pod)))).copied()
    };
    let shmem = get(&m, "shmem_bytes", "");
    r.check(
        shmem.is_some_and(|b| b >= (100 * MI) as f64),
        format!("shmem_bytes {shmem:?}, want at least 100 MiB"),
    );
    let limit = get(&m, "memory_limit_bytes", "");
    r.check(limit == Some(GI as f64), format!("memory_limit_bytes {limit:?}, want {GI}"));
    let tmp = get(&m, "tmpfs_size_bytes", ",target=\"/tmp\"");
    r.check(tmp == Some((256 * MI) as f64), format!("tmpfs_size_bytes /tmp {tmp:?}, want 256 MiB"));
    let shm = get(&m, "tmpfs_size_bytes", ",target=\"/dev/shm\"");
    r.check(shm == Some((512 * MI) as f64), format!("tmpfs_size_bytes /dev/shm {shm:?}, want 512 MiB"));
    for (_, pod, _) in started.iter().filter(|(n, _, _)| *n == "mc-rw") {
        let rw = labels(&pod_name(pod));
        r.check(!m.keys().any(|k| k.contains(&rw)), "a series for the writable-root container");
    }
    for (_, pod, c) in &started {
        let _ = r.step("teardown", node.teardown(pod, &[c]));
    }
    // The runtime tells the plugin of a removal after RemoveContainer
    // returns: the series go within a few seconds.
    let t0 = Instant::now();
    let left = loop {
        let Some(after) = r.step("scrape after the removal", scrape(addr)) else { break Vec::new() };
        let left: Vec<String> =
            after.into_keys().filter(|k| k.starts_with("oci_tmpfs_hook_container_")).collect();
        if left.is_empty() || t0.elapsed() > Duration::from_secs(10) {
            break left;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    r.seen("series gone after the removal", format!("{:.1} s", t0.elapsed().as_secs_f64()));
    r.check(left.is_empty(), format!("series left 10 s after the containers were removed: {left:?}"));
    r.finish();
}

/// Malformed requests get a 4xx; slowloris clients, holding every client
/// slot, are dropped after the server's deadline; a pod created while they
/// hold on still gets its mounts, and a scrape after them works.
#[test]
fn metrics_hostile_clients_never_stall_the_plugin() {
    let mut r = Report::of("nri", "metrics-hostile");
    let (mut node, addr) = metrics_node("metrics-hostile");
    let big = format!("GET /metrics HTTP/1.1\r\nX-Big: {}\r\n\r\n", "a".repeat(64 * 1024));
    let cases: [(&str, &[u8], u16); 6] = [
        ("garbage", b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03\r\n\r\n", 400),
        ("not HTTP", b"hello there\r\n\r\n", 400),
        ("oversize head", big.as_bytes(), 431),
        ("POST", b"POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n", 405),
        ("another path", b"GET /debug/pprof HTTP/1.1\r\n\r\n", 404),
        ("HTTP/2 preface", b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 400),
    ];
    for (name, req, want) in cases {
        match raw(addr, req) {
            Ok(a) => {
                r.seen(name, a.lines().next().unwrap_or(""));
                r.check(status(&a) == want, format!("{name}: {:?}, want {want}", a.lines().next()));
            }
            // Dropped is allowed for the oversize head (a reset after the 431).
            Err(e) => r.check(want == 431, format!("{name}: {e}")),
        }
    }
    // Slowloris: more connections than the server serves at once (16), each
    // with a head begun and never finished.
    let t0 = Instant::now();
    let slow: Vec<TcpStream> = (0..20)
        .filter_map(|_| {
            let mut s = TcpStream::connect(addr).ok()?;
            s.write_all(b"GET /metr").ok()?;
            Some(s)
        })
        .collect();
    r.seen("slow clients connected", slow.len());
    let Some(pod) = r.step("RunPodSandbox", node.run_pod("m-slow", &PodOpts::default())) else {
        return r.finish();
    };
    let created = Instant::now();
    if let Some(c) =
        r.step("start while slow clients hold on", node.start_container(&pod, &CtrOpts::ro("app", GI)))
    {
        r.seen("create+start while held", format!("{:?}", created.elapsed()));
        if let Some(p) = r.step("probe", node.probe(&c)) {
            r.served("while slow clients hold on", &p, 256 * MI, 512 * MI);
        }
        r.step("stop and remove", node.teardown(&pod, &[&c]));
    }
    // Every slow client is closed by the server within its deadline (5 s).
    let mut closed = 0;
    for mut s in slow {
        let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
        let mut b = [0u8; 64];
        // EOF, or a reset: either is a close.
        if !matches!(s.read(&mut b), Ok(n) if n > 0) {
            closed += 1;
        }
    }
    let held = t0.elapsed();
    r.seen("slow clients closed by the server", format!("{closed} after {held:?}"));
    r.check(closed == 20, format!("only {closed} of 20 slow clients were closed"));
    r.check(held < Duration::from_secs(15), format!("the slow clients were held {held:?}"));
    match scrape(addr) {
        Ok(m) => r.check(val(&m, "containers_acted_on_total") == 1.0, "acted_on is not 1 after the slow pod"),
        Err(e) => r.check(false, format!("scrape after the slow clients: {e}")),
    }
    r.check(node.plugin.as_mut().is_some_and(|p| p.try_wait().ok().flatten().is_none()), "the plugin exited");
    r.finish();
}
