//! The burst bench (run with `--ignored`: `bench/burst.sh`): pods placed at
//! once, as kubelet places a batch, through containerd's CRI, in six arms
//! on one containerd, alternating within each round:
//! - `without`: the runtime (`NRI_BURST_RUNTIME`: `runc`, the default, or
//!   `crun`, as the handler `burst-runtime`'s `BinaryName`), the plugin
//!   stopped;
//! - `plugin`: the same handler, the plugin registered (its adjustment: our
//!   hook at createRuntime, which mounts `/tmp` and grows the pod's
//!   `/dev/shm`);
//! - `hook`: the wrapper in hook mode (the handler `oci-tmpfs-hookmode`, the
//!   plugin stopped): the same hook process, no NRI;
//! - `spec`: the wrapper in spec mode (the handler `oci-tmpfs`): the mounts
//!   written into `config.json`, no hook process; the yardstick of what
//!   mounting alone costs;
//! - `spec-empty`: the spec arm with an image whose `/root` is empty: the
//!   same mounts (`/tmp` and the caches under `/root`: no copy-up of
//!   `HOME` in either since the caches-only rule, docs/design.md#home-rule);
//! - `floor`: the floor of any runtime wrapper (the handler `burst-floor`,
//!   bench/execwrap.c built static: it only execs the runtime): no mounts, no plan,
//!   one exec more per runtime call, as every RuntimeClass wrapper pays.
//!
//! Each burst: `NRI_BURST_PODS` pods (a comma list, default `10,20`), each
//! one read-only container with a 256 MiB limit (tests/nri/bench.py
//! `burst`) of the common image (root's `/root` holding `.bashrc` and
//! `.profile`, `HOME` from its `/etc/passwd`). Each of `NRI_BURST_ROUNDS`
//! rounds (default 3) runs every size in every arm (`NRI_BURST_ARMS`, a
//! comma list, narrows them), the arms' order rotated by one each round.
//! With `NRI_BURST_MIX` set, each round is one burst per size whose pods
//! take the arms in turn: the arms share that burst's load, which a burst
//! of its own does not (one burst's p50 moves by ±20% from the next's).
//! `NRI_BURST_NODE_TMP=tmpfs` puts a tmpfs on the node's `/tmp`, where
//! runc's `tmpcopyup` makes its scratch directories (this VM's is ext4; the
//! common image's home was copied up before the caches-only rule);
//! `NRI_BURST_NODE_TMP=alternate` mounts it for every other round and
//! reports the two kinds of round apart, so that they meet the same hour.
//! `NRI_BURST_CACHES` sets the host config's `home_caches` (a comma list,
//! empty for none), to tell what each cache mount costs.
//! The wrapper and the hook of every arm are the plugin's binary (the
//! static release build, `OCI_TMPFS_HOOK_NRI_BIN`); the wrappers run the
//! same runtime (the host config's `runtime_path`).
//!
//! Printed: per size and arm, p50 and p99 over every pod of every round of
//! RunPodSandbox, CreateContainer, StartContainer and the pod's total, the
//! burst's wall time (median over rounds), each p50's ratio to `without`,
//! the median over rounds of each round's own StartContainer p50 ratios
//! (each pair of the arms run: spec and floor over without; spec and
//! spec-empty over floor; spec over spec-empty), and the plugin's own
//! time per `CreateContainer` in its bursts. It fails
//! only when a pod did not start, or the plugin did not answer each of its
//! arm's CreateContainer exactly once: no bound on a time (the ratios are
//! what it is for).

use std::fmt::Write as _;

use serde_json::{json, Value};

use super::support::cri::*;
use super::support::pods::*;
use super::support::*;
use super::{bench_py, plugin_times, quantile};

/// The bench's arms, in the first round's order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Arm {
    Without,
    Plugin,
    Hook,
    Spec,
    SpecEmpty,
    Floor,
}

/// The floor arm's runtime handler.
const FLOOR: &str = "burst-floor";
/// The handler of `without` and `plugin`: the runtime itself.
const PLAIN: &str = "burst-runtime";

impl Arm {
    const ALL: [Arm; 6] = [Arm::Without, Arm::Plugin, Arm::Hook, Arm::Spec, Arm::SpecEmpty, Arm::Floor];

    fn name(self) -> &'static str {
        match self {
            Arm::Without => "without",
            Arm::Plugin => "plugin",
            Arm::Hook => "hook",
            Arm::Spec => "spec",
            Arm::SpecEmpty => "spec-empty",
            Arm::Floor => "floor",
        }
    }

    fn handler(self) -> &'static str {
        match self {
            Arm::Without | Arm::Plugin => PLAIN,
            Arm::Hook => Executor::Hook.handler(),
            Arm::Spec | Arm::SpecEmpty => Executor::Spec.handler(),
            Arm::Floor => FLOOR,
        }
    }
}

/// The arms to run: `NRI_BURST_ARMS`, a comma list of arm names (default
/// all six; `without`, the base of every ratio, is always run).
fn arms_run() -> Vec<Arm> {
    let Ok(list) = std::env::var("NRI_BURST_ARMS") else { return Arm::ALL.to_vec() };
    let names: Vec<&str> = list.split(',').map(str::trim).collect();
    for name in &names {
        assert!(Arm::ALL.iter().any(|a| a.name() == *name), "NRI_BURST_ARMS: no arm {name:?}");
    }
    Arm::ALL.into_iter().filter(|a| *a == Arm::Without || names.contains(&a.name())).collect()
}

/// Registers the plain and the floor arms' handlers, as `BinaryName`s of
/// runc-shim runtimes: `runtime` itself, and bench/execwrap.c built static
/// to exec it; then restarts containerd on the config.
fn register_plain_and_floor(node: &mut Node, runtime: &std::path::Path) {
    let wrap = node.dir.join("execwrap-runtime");
    let source = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/execwrap.c");
    ok(std::process::Command::new("cc")
        .args(["-static", "-O2"])
        .arg(format!("-DREAL=\"{}\"", runtime.display()))
        .arg("-o")
        .arg(&wrap)
        .arg(&source));
    let plugin = "plugins.\"io.containerd.cri.v1.runtime\".containerd.runtimes";
    let mut config = std::fs::read_to_string(&node.config).unwrap();
    for (name, binary) in [(PLAIN, runtime), (FLOOR, wrap.as_path())] {
        let _ = write!(
            config,
            "\n[{plugin}.{name}]\n  runtime_type = \"io.containerd.runc.v2\"\n[{plugin}.{name}.options]\n  BinaryName = {:?}\n",
            binary.display().to_string()
        );
    }
    std::fs::write(&node.config, config).unwrap();
    node.restart_daemon();
}

/// The common image (root, its `/etc/passwd` home `/root` holding `.bashrc`
/// and `.profile`, every Debian-based image's; `HOME` from the passwd), and
/// the same with an empty `/root`: both get the same cache tmpfs under
/// `/root`, and neither a copy of it.
fn images(node: &Node) -> (String, String) {
    let image = node.image("burst-common", |r| {
        std::fs::write(r.join("etc/passwd"), "root:x:0:0:root:/root:/bin/sh\n").unwrap();
        std::fs::create_dir_all(r.join("root")).unwrap();
        std::fs::write(r.join("root/.bashrc"), "# bashrc\n").unwrap();
        std::fs::write(r.join("root/.profile"), "# profile\n").unwrap();
    });
    let empty = node.image("burst-empty-home", |r| {
        std::fs::write(r.join("etc/passwd"), "root:x:0:0:root:/root:/bin/sh\n").unwrap();
        std::fs::create_dir_all(r.join("root")).unwrap();
    });
    (image, empty)
}

/// The CRI calls timed per pod (bench.py's keys), and the burst's wall time.
const CALLS: [&str; 4] = ["run", "create", "start", "total"];

/// What one arm saw at one size, over all rounds (seconds).
#[derive(Default)]
struct Seen {
    per_call: [Vec<f64>; 4],
    walls: Vec<f64>,
    /// Each round's StartContainer p50 (its own pods only).
    start_p50: Vec<f64>,
}

fn p(v: &[f64], q: f64) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.partial_cmp(b).unwrap());
    quantile(&s, q)
}

#[test]
#[ignore = "a bench (minutes): bench/burst.sh runs it, and tests/run.sh as a smoke run"]
fn bench_nri_burst() {
    let rounds: usize = std::env::var("NRI_BURST_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(3);
    let sizes: Vec<usize> = std::env::var("NRI_BURST_PODS")
        .unwrap_or_else(|_| "10,20".into())
        .split(',')
        .map(|n| n.trim().parse().expect("NRI_BURST_PODS: a comma list of pod counts"))
        .collect();
    // containerd's state (the bundles) on a tmpfs, as on a node: the spec
    // arm rewrites each config.json there.
    let node_tmp = std::env::var("NRI_BURST_NODE_TMP").ok();
    let node_tmp = node_tmp.as_deref().unwrap_or(""); // unset: as empty, the node's /tmp as it is
    let opts = NodeOpts {
        handlers: true,
        state_on_tmpfs: true,
        tmp_on_tmpfs: node_tmp == "tmpfs",
        ..NodeOpts::default()
    };
    let alternate = node_tmp == "alternate";
    assert!(
        ["", "tmpfs", "alternate"].contains(&node_tmp),
        "NRI_BURST_NODE_TMP: tmpfs or alternate, not {node_tmp:?}"
    );
    // What the tables are kept apart by: the size, and with `alternate` the
    // node's /tmp (the even rounds on this VM's disk, the odd on a tmpfs).
    let groups: Vec<String> = if alternate {
        sizes
            .iter()
            .flat_map(|n| [format!("{n} pods, /tmp on disk"), format!("{n} pods, /tmp a tmpfs")])
            .collect()
    } else {
        sizes.iter().map(|n| format!("{n} pods")).collect()
    };
    let group = |si: usize, round: usize| if alternate { 2 * si + round % 2 } else { si };
    let mut node = Node::start_with("burst", Executor::Nri, &opts);
    let runtime = which(&std::env::var("NRI_BURST_RUNTIME").unwrap_or_else(|_| "runc".into()));
    register_plain_and_floor(&mut node, &runtime);
    // NRI_BURST_CACHES: the host config's `home_caches` (a comma list; the
    // default list when unset), to see what each cache mount costs.
    let caches = match std::env::var("NRI_BURST_CACHES") {
        Ok(list) => {
            let list: Vec<&str> = list.split(',').map(str::trim).filter(|c| !c.is_empty()).collect();
            format!("home_caches = {list:?}\n")
        }
        Err(_) => String::new(),
    };
    node.host_config(&format!("runtime_path = {:?}\n{caches}", runtime.display().to_string()));
    // The pod and container every burst copies (bench.py makes the pods unique).
    let pod =
        node.run_pod("burst", &PodOpts { memory: 256 * MI, ..PodOpts::default() }).expect("RunPodSandbox");
    let (image, empty) = images(&node);
    let mut request =
        node.container_request(&pod, &CtrOpts { image: Some(&image), ..CtrOpts::ro("burst", 256 * MI) });
    node.teardown(&pod, &[]).expect("the template pod's teardown");
    let image_of = |arm: Arm| json!({"image": if arm == Arm::SpecEmpty { &empty } else { &image }});
    // Warm-up: the images' first unpack, each handler's first shim.
    let arms = arms_run();
    for &arm in arms.iter().filter(|&&a| a != Arm::Without) {
        request["runtime_handler"] = json!(arm.handler());
        request["config"]["image"] = image_of(arm);
        bench_py(&node, &["burst", "2"], &request);
    }
    let mut seen: Vec<Vec<Seen>> =
        groups.iter().map(|_| Arm::ALL.iter().map(|_| Seen::default()).collect()).collect();
    // The plugin's own time per CreateContainer in its bursts (ms).
    let mut own: Vec<Vec<f64>> = groups.iter().map(|_| Vec::new()).collect();
    let mut broken = Vec::new();
    let mixed = std::env::var_os("NRI_BURST_MIX").is_some();
    assert!(!mixed || !arms.contains(&Arm::Plugin), "NRI_BURST_MIX: the plugin arm takes a burst of its own");
    if mixed {
        node.stop_plugin();
    }
    for round in 0..rounds {
        if alternate && round % 2 == 1 {
            ok(&mut node.in_node_ns(&["mount", "-t", "tmpfs", "-o", "mode=1777", "nodetmp", "/tmp"]));
        }
        for (si, &n) in sizes.iter().enumerate() {
            let si = group(si, round);
            // With `alternate`, a round pair shares one order: each kind of
            // round sees every order.
            let turn = if alternate { round / 2 } else { round };
            let order: Vec<Arm> = (0..arms.len()).map(|k| arms[(k + turn) % arms.len()]).collect();
            if mixed {
                let label = format!("round {round}, {} mixed", groups[si]);
                broken.extend(mixed_burst(&node, &request, &order, n, &image_of, &mut seen[si], &label));
                continue;
            }
            let label = format!("round {round}, {}", groups[si]);
            let (wrong, times) =
                separate_bursts(&mut node, &mut request, &order, n, &image_of, &mut seen[si], &label);
            broken.extend(wrong);
            own[si].extend(times);
        }
        if alternate && round % 2 == 1 {
            ok(&mut node.in_node_ns(&["umount", "/tmp"]));
        }
    }
    node.stop_plugin();
    // Only the report's text: a runtime that cannot say its version says so.
    let version = match std::process::Command::new(&runtime).arg("--version").output() {
        Ok(o) => text(&o.stdout),
        Err(e) => format!("{} --version: {e}", runtime.display()),
    };
    say(&format!(
        "nri burst: containerd {}, {}, {} CPUs, {rounds} rounds, plugin/wrapper/hook {}",
        node.ctd.version,
        version.lines().next().unwrap_or("runtime ?"),
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        plugin_bin().display()
    ));
    tables(&groups, &arms, &seen, &own);
    assert!(broken.is_empty(), "nri burst:\n  {}", broken.join("\n  "));
}

/// One burst per arm in `order`, each of `n` pods, the plugin running for
/// its own arm only; what went wrong, if anything, and the plugin's own
/// times per CreateContainer.
fn separate_bursts(
    node: &mut Node,
    request: &mut Value,
    order: &[Arm],
    n: usize,
    image_of: &dyn Fn(Arm) -> Value,
    seen: &mut [Seen],
    label: &str,
) -> (Vec<String>, Vec<f64>) {
    let mut broken = Vec::new();
    let mut own = Vec::new();
    for &arm in order {
        let running = node.plugin.is_some();
        if arm == Arm::Plugin && !running {
            node.start_plugin();
        } else if arm != Arm::Plugin && running {
            node.stop_plugin();
        }
        let mark = plugin_times(node).len();
        request["runtime_handler"] = json!(arm.handler());
        request["config"]["image"] = image_of(arm);
        let out = bench_py(node, &["burst", &n.to_string()], request);
        let times = plugin_times(node).split_off(mark);
        let answers = times.len();
        if arm == Arm::Plugin {
            if answers != n {
                broken.push(format!("{label}: the plugin answered {answers} CreateContainer"));
            }
            own.extend(times);
        }
        let pods: Vec<&Value> = out["pods"].as_array().expect("bench.py burst: pods").iter().collect();
        if pods.len() != n {
            broken.push(format!("{label}, {}: {} pods started", arm.name(), pods.len()));
        }
        record(&mut seen[arm as usize], &pods, &out, label, arm);
    }
    (broken, own)
}

/// One burst whose pods take the arms in `order` in turn (pod i the arm
/// i mod k), so that the arms share the burst's load; what went wrong, if
/// anything.
fn mixed_burst(
    node: &Node,
    request: &Value,
    order: &[Arm],
    n: usize,
    image_of: &dyn Fn(Arm) -> Value,
    seen: &mut [Seen],
    label: &str,
) -> Option<String> {
    let mix: Vec<_> = order
        .iter()
        .map(|&a| json!({"runtime_handler": a.handler(), "image": image_of(a)["image"]}))
        .collect();
    let mut request = request.clone();
    request["mix"] = json!(mix);
    let out = bench_py(node, &["burst", &n.to_string()], &request);
    let pods = out["pods"].as_array().expect("bench.py burst: pods");
    for (j, &arm) in order.iter().enumerate() {
        let own: Vec<&Value> = pods.iter().filter(|p| p["arm"] == j).collect();
        record(&mut seen[arm as usize], &own, &out, label, arm);
    }
    (pods.len() != n).then(|| format!("{label}: {} pods started", pods.len()))
}

/// Adds one burst's pods of `arm` to what it saw, and prints the round's line.
fn record(s: &mut Seen, pods: &[&Value], out: &Value, round: &str, arm: Arm) {
    for pod in pods {
        for (c, call) in CALLS.iter().enumerate() {
            s.per_call[c].push(pod[call].as_f64().expect("a time"));
        }
    }
    let wall = out["seconds"].as_f64().expect("the burst's wall time");
    s.walls.push(wall);
    let start = p(&s.per_call[2][s.per_call[2].len() - pods.len()..], 0.5);
    s.start_p50.push(start);
    say(&format!(
        "nri burst: {round}, {:<7}: wall {:.0} ms, StartContainer p50 {:.0} ms",
        arm.name(),
        wall * 1e3,
        start * 1e3
    ));
}

/// The geometric mean of the rounds' ratios and its 90% interval, from
/// 4000 resamples of the rounds (a round is the unit that shares a load).
fn geomean_interval(ratios: &[f64]) -> (f64, f64, f64) {
    if ratios.is_empty() {
        return (f64::NAN, f64::NAN, f64::NAN);
    }
    let geo = |v: &mut dyn Iterator<Item = f64>, n: usize| (v.map(f64::ln).sum::<f64>() / n as f64).exp();
    let n = ratios.len();
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut means: Vec<f64> = (0..4000)
        .map(|_| {
            let mut pick = (0..n).map(|_| {
                // xorshift64: a fixed seed, so a log is reproducible.
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                ratios[(state % n as u64) as usize]
            });
            geo(&mut pick, n)
        })
        .collect();
    means.sort_by(|a, b| a.partial_cmp(b).unwrap());
    (geo(&mut ratios.iter().copied(), n), means[200], means[3800])
}

/// Prints the tables: per group (a size, and with `alternate` the node's
/// `/tmp`) and arm, p50 / p99 of each call and the burst's median wall
/// time; each over `without`'s; the plugin's own time.
fn tables(groups: &[String], arms: &[Arm], seen: &[Vec<Seen>], own: &[Vec<f64>]) {
    let mut table = String::from(
        "| burst | arm | RunPodSandbox p50 / p99 | CreateContainer p50 / p99 | StartContainer p50 / p99 | pod total p50 / p99 | burst wall (median) |\n|---|---|---|---|---|---|---|\n",
    );
    let mut ratios = String::from(
        "| burst | arm | RunPodSandbox | CreateContainer | StartContainer | pod total | burst wall |\n|---|---|---|---|---|---|---|\n",
    );
    for (si, n) in groups.iter().enumerate() {
        let base = &seen[si][Arm::Without as usize];
        for &arm in arms {
            let s = &seen[si][arm as usize];
            let _ = write!(table, "| {n} | {} |", arm.name());
            let _ = write!(ratios, "| {n} | {} |", arm.name());
            for c in 0..CALLS.len() {
                let v = &s.per_call[c];
                let _ = write!(table, " {:.0} / {:.0} ms |", p(v, 0.5) * 1e3, p(v, 0.99) * 1e3);
                let _ = write!(ratios, " {:.3} |", p(v, 0.5) / p(&base.per_call[c], 0.5));
            }
            let _ = writeln!(table, " {:.0} ms |", p(&s.walls, 0.5) * 1e3);
            let _ = writeln!(ratios, " {:.3} |", p(&s.walls, 0.5) / p(&base.walls, 0.5));
        }
    }
    // Each round's arms ran back to back, or in one burst: their ratios
    // share the round's load.
    let paired = |si: usize, a: Arm, b: Arm| -> Vec<f64> {
        let (a, b) = (&seen[si][a as usize].start_p50, &seen[si][b as usize].start_p50);
        a.iter().zip(b).map(|(x, y)| x / y).collect()
    };
    let pairs = [
        (Arm::Spec, Arm::Without),
        (Arm::Floor, Arm::Without),
        (Arm::Spec, Arm::Floor),
        (Arm::SpecEmpty, Arm::Floor),
        (Arm::Spec, Arm::SpecEmpty),
        (Arm::SpecEmpty, Arm::Without),
    ];
    for (si, n) in groups.iter().enumerate() {
        let each: Vec<String> = pairs
            .iter()
            .filter(|(a, b)| arms.contains(a) && arms.contains(b))
            .map(|&(a, b)| {
                let ratios = paired(si, a, b);
                let (geo, low, high) = geomean_interval(&ratios);
                format!(
                    "{}/{} {:.3} (geometric mean {geo:.3}, 90% {low:.3}-{high:.3})",
                    a.name(),
                    b.name(),
                    p(&ratios, 0.5)
                )
            })
            .collect();
        say(&format!(
            "nri burst: {n}: StartContainer p50, median of the rounds' own ratios: {}",
            each.join(", ")
        ));
    }
    for (si, n) in groups.iter().enumerate() {
        if let (Some(max), false) = (own[si].iter().copied().reduce(f64::max), own[si].is_empty()) {
            say(&format!(
                "nri burst: {n}: the plugin's own time per CreateContainer p50 {:.3} ms, p99 {:.3} ms, max {max:.3} ms (n={})",
                p(&own[si], 0.5),
                p(&own[si], 0.99),
                own[si].len()
            ));
        }
    }
    say(&format!("nri burst: per pod over all rounds (ms):\n{table}"));
    say(&format!("nri burst: p50 (burst wall: median) over `without`'s:\n{ratios}"));
}
