"""What oci-tmpfs-hook costs: container start latency, the hook's own wall time,
CPU time and peak memory, how they grow with temp targets and with containers
started at once, and the binary's size. Prints Markdown tables (BENCHMARKS.md
holds a measured copy). Run it through bench/run.sh, as root, with runc, crun,
busybox-static and GNU time installed. Standard library only (Debian's
/usr/bin/python3).

Every container is a busybox-static rootfs running `true` with a read-only
root and `runc spec`'s other defaults (64 MiB /dev/shm). Variants:
  plain   nothing else: the container users have today;
  floor   the hook's mounts (sizes from `explain --json`) written straight into
          config.json, so the runtime mounts them itself: the best any hook
          could do;
  noop    a prestart hook that only reads its stdin (bench/noophook.c,
          static): what running any hook process costs;
  mountfloor  a static C prestart hook that does exactly the hook's mount
          sequence for this plan with no checks (bench/mounthook.c: setns by
          pidfd, fsopen..move_mount for /tmp, fspick to grow /dev/shm): the
          hook executor's physical floor;
  LABEL   `oci-tmpfs-hook inject --stage prestart` with the binary given as
          `--hook LABEL=PATH` (repeatable: e.g. a glibc and a musl build).
The home section's rootfs adds debian:12's /etc/passwd and a /root
(bench/home_rootfs.sh, as bench/callgrind.sh's env and passwd bundles), so that
root's HOME is /root whether it comes from process.env or from the passwd
entry the hook reads (docs/design.md#home-plan).
Latency is the wall time of `<runtime> run` (create, hooks, start, `true`,
exit, delete), measured in rounds that alternate the variants (the order
rotates every round) so that load from anything else on the machine hits all
of them alike.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
RUNTIMES = ["runc", "crun"]
SECTIONS = ["latency", "startup", "home", "wrapper", "hook", "many", "exec", "binary"]
# The startup section's rows, by what their name contains, and the floor each
# is measured against.
STARTUP_FLOORS = {"hook, full plan": "C mount sequence", "hook, writable root": "no-op hook, writable root",
                  "wrapper": "exec-only wrapper, mounts by hand", "mount sequence": "C mount sequence",
                  "no-op hook": "no-op hook, writable root", "exec-only": "exec-only wrapper, mounts by hand"}
MIB = 1 << 20
GNU_TIME = "/usr/bin/time"
WARMUP = 3


def die(msg):
    sys.exit(f"bench: {msg}")


class Bench:
    """A work dir with one shared busybox rootfs and any number of bundles."""

    def __init__(self, hooks, bundles_on_disk=False):
        self.hooks = hooks  # [(label, absolute path)]
        self.tool = hooks[0][1]  # runs inject and explain
        self.work = tempfile.mkdtemp(prefix="oci-tmpfs-hook-bench-")
        self.rootfs = os.path.join(self.work, "rootfs")
        # The bundles on a tmpfs, as Docker's and containerd's are (their
        # state dir, /run/containerd, is on the host's /run tmpfs), unless
        # asked: rewriting config.json costs more on disk (docs/design.md#arena).
        self.bundles = os.path.join(self.work, "bundles")
        os.makedirs(self.bundles)
        self.tmpfs = not bundles_on_disk
        if self.tmpfs:
            subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=0700", "bench-bundles", self.bundles], check=True)
        self.counter = 0
        self._make_rootfs()

    def _make_rootfs(self):
        for d in ["bin", "proc", "sys", "dev", "tmp", "etc"]:
            os.makedirs(os.path.join(self.rootfs, d))
        busybox = next((p for p in ["/bin/busybox", "/usr/bin/busybox"] if os.path.exists(p)), None)
        if not busybox:
            die("busybox is missing: apt-get install busybox-static")
        self.busybox = busybox
        shutil.copy(busybox, os.path.join(self.rootfs, "bin/busybox"))
        for a in ["sh", "true"]:
            os.symlink("busybox", os.path.join(self.rootfs, "bin", a))
        # The extra targets' mount points exist in the image, so the floor and
        # the hook do the same work (neither has to create directories).
        for i in range(1, 16):
            os.makedirs(os.path.join(self.rootfs, f"scratch/t{i}"))

    def settings(self, targets):
        """A host config that gives `targets` temp targets in all (/tmp + extras)."""
        path = os.path.join(self.work, f"config-{targets}.toml")
        with open(path, "w") as f:
            f.write(f"extra_targets = {json.dumps([f'/scratch/t{i}' for i in range(1, targets)])}\n")
        return path

    def floor(self, program, libc=None):
        """A C floor's path: `program` (noophook, mounthook, execwrap-RUNTIME)
        built against `libc` (default: the first floor set given)."""
        dirs = dict(self.floors)
        return os.path.join(dirs[libc] if libc else self.floors[0][1], program)

    def bundle(self, name, variant, targets=1, measure=None, libc=None):
        """variant: "plain", "floor", "noop", "mountfloor" or a hook label;
        measure: None, "wall" or "rss"; libc: the floor set of noop and mountfloor."""
        d = os.path.join(self.bundles, name)
        os.makedirs(d)
        subprocess.run(["runc", "spec", "--bundle", d], check=True)
        path = os.path.join(d, "config.json")
        with open(path) as f:
            cfg = json.load(f)
        cfg["process"]["terminal"] = False
        cfg["process"]["args"] = ["/bin/true"]
        cfg["root"] = {"path": self.rootfs, "readonly": True}
        write_json(path, cfg)
        settings = self.settings(targets)
        if variant == "floor":
            self.write_floor(d, cfg, settings)
        elif variant == "noop":
            cfg["hooks"] = {"prestart": [{"path": self.floor("noophook", libc), "args": ["noophook"]}]}
            write_json(path, cfg)
        elif variant == "mountfloor":
            tmp, shm = self.planned(d, settings)
            cfg["hooks"] = {"prestart": [{"path": self.floor("mounthook", libc),
                                          "args": ["mounthook", self.rootfs, str(tmp[0][1]), str(shm)]}]}
            write_json(path, cfg)
        elif variant != "plain":
            binary = dict(self.hooks)[variant]
            subprocess.run(
                [self.tool, "inject", "--bundle", d, "--stage", "prestart", "--config", settings,
                 "--hook-path", binary],
                check=True, stdout=subprocess.DEVNULL,
            )
            if measure:
                self.wrap_hook(d, measure, self.log(name))
        return d

    def close(self):
        if self.tmpfs:
            subprocess.run(["umount", self.bundles], check=False)

    def log(self, name):
        return os.path.join(self.work, f"{name}.log")

    def wrap_hook(self, bundle, measure, log):
        """Puts hook_timer.py (wall and CPU time) or GNU time (peak memory) in
        front of the injected hook entry."""
        path = os.path.join(bundle, "config.json")
        with open(path) as f:
            cfg = json.load(f)
        entry = cfg["hooks"]["prestart"][0]
        hook = [entry["path"]] + entry["args"][1:]
        if measure == "wall":
            entry["path"] = "/usr/bin/python3"
            entry["args"] = ["python3", os.path.join(HERE, "hook_timer.py"), log] + hook
        else:
            entry["path"] = GNU_TIME
            entry["args"] = ["time", "-f", "%M %x", "-a", "-o", log] + hook
        write_json(path, cfg)

    def planned(self, bundle, settings):
        """The plan's temp targets [(target, bytes)] and /dev/shm bytes, from `explain --json`."""
        out = subprocess.run(
            [self.tool, "explain", "--json", "--bundle", bundle, "--config", settings],
            check=True, capture_output=True, text=True,
        )
        actions = json.loads(out.stdout)["plan"]["actions"]
        tmp = [(a["target"], a["size"]["bytes"]) for a in actions if a["action"] == "mount_tmpfs"]
        shm = next(a["size"]["bytes"] for a in actions if a["action"] == "shm")
        return tmp, shm

    def write_floor(self, bundle, cfg, settings):
        """The hook's plan, as the runtime's own mounts."""
        out = subprocess.run(
            [self.tool, "explain", "--json", "--bundle", bundle, "--config", settings],
            check=True, capture_output=True, text=True,
        )
        for action in json.loads(out.stdout)["plan"]["actions"]:
            size = action["size"]["bytes"]
            if action["action"] == "mount_tmpfs":
                opts = ["nosuid", "nodev", "mode=1777", f"size={size}"] + (["noexec"] if action["noexec"] else [])
                cfg["mounts"].append(
                    {"destination": action["target"], "type": "tmpfs", "source": "tmpfs", "options": opts}
                )
            elif action["action"] == "shm":
                shm = next(m for m in cfg["mounts"] if m["destination"] == "/dev/shm")
                shm["options"] = [o for o in shm["options"] if not o.startswith("size=")] + [f"size={size}"]
        write_json(os.path.join(bundle, "config.json"), cfg)

    # ---- running -------------------------------------------------------

    def spawn(self, runtime, bundle):
        self.counter += 1
        cid = f"othbench-{os.getpid()}-{self.counter}"
        p = subprocess.Popen(
            [runtime, "run", "--bundle", bundle, cid],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )
        return cid, p

    def finish(self, runtime, cid, p, t0):
        """Waits for a `run`; returns ms since t0. Any failure stops the benchmark."""
        try:
            _, err = p.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            p.kill()
            _, err = p.communicate()
            err = b"timed out; " + err
        ms = (time.perf_counter_ns() - t0) / 1e6
        if p.returncode != 0:
            subprocess.run([runtime, "delete", "--force", cid], capture_output=True)
            die(f"{runtime} run {cid} failed: {err.decode(errors='replace').strip()}")
        return ms

    def run_cmd(self, cmd, bundle, env, pristine):
        """`cmd run --bundle BUNDLE ID` with config.json reset to `pristine`
        first (outside the timing); returns ms."""
        with open(os.path.join(bundle, "config.json"), "wb") as f:
            f.write(pristine)
        self.counter += 1
        cid = f"othbench-{os.getpid()}-{self.counter}"
        t0 = time.perf_counter_ns()
        p = subprocess.Popen(cmd + ["run", "--bundle", bundle, cid], env=env,
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        return self.finish(os.path.basename(cmd[0]), cid, p, t0)

    def rotate_cmds(self, runs_of, rounds):
        """{name: stats}: `rounds` rounds of run_cmd over runs_of ({name:
        (cmd, bundle, env, pristine)}), the order rotating every round, after
        WARMUP rounds that are dropped."""
        names = list(runs_of)
        times = {n: [] for n in names}
        for r in range(WARMUP + rounds):
            k = r % len(names)
            for n in names[k:] + names[:k]:
                ms = self.run_cmd(*runs_of[n])
                if r >= WARMUP:
                    times[n].append(ms)
        return {n: stats(x) for n, x in times.items()}

    def run_once(self, runtime, bundle):
        t0 = time.perf_counter_ns()
        cid, p = self.spawn(runtime, bundle)
        return self.finish(runtime, cid, p, t0)

    def alternate(self, runtime, bundles, rounds):
        """{name: [ms, ...]}: `rounds` rounds over all bundles, order rotating."""
        names = list(bundles)
        for _ in range(WARMUP):
            for n in names:
                self.run_once(runtime, bundles[n])
        for n in names:  # the warm-up runs' hook measurements are dropped too
            if os.path.exists(self.log(n)):
                os.unlink(self.log(n))
        times = {n: [] for n in names}
        for r in range(rounds):
            k = r % len(names)
            for n in names[k:] + names[:k]:
                times[n].append(self.run_once(runtime, bundles[n]))
        return times

    def at_once(self, runtime, bundle, count):
        """Starts `count` containers together: (ms until all are done, [ms each])."""
        t0 = time.perf_counter_ns()
        procs = [self.spawn(runtime, bundle) for _ in range(count)]
        each = [self.finish(runtime, cid, p, t0) for cid, p in procs]
        return (time.perf_counter_ns() - t0) / 1e6, each


def write_json(path, value):
    with open(path, "w") as f:
        json.dump(value, f, indent=2)


# ---- statistics and tables --------------------------------------------


def stats(xs):
    xs = sorted(xs)
    q = statistics.quantiles(xs, n=10, method="inclusive") if len(xs) > 1 else [xs[0]] * 9
    return {"median": statistics.median(xs), "p10": q[0], "p90": q[8], "n": len(xs)}


def pct(a, b):
    return f"{(a - b) / b * 100:+.1f}%"


def table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(out)


def read_log(path):
    """Lines of numbers whose last column is the hook's exit code."""
    rows = []
    with open(path) as f:
        for line in f:
            *values, code = line.split()
            if code != "0":
                die(f"the hook exited {code} (see {path})")
            rows.append([float(v) for v in values])
    return rows


def gnu_time_floor():
    """GNU time's max RSS for /bin/true: what any tiny dynamic program shows."""
    out = subprocess.run([GNU_TIME, "-f", "%M", "/bin/true"], capture_output=True, text=True, check=True)
    return int(out.stderr.split()[-1])


# ---- sections ----------------------------------------------------------


def section_latency(b, runtimes, runs):
    rows = []
    labels = [label for label, _ in b.hooks]
    for rt in runtimes:
        variants = ["plain", "floor", "noop", "mountfloor"] + labels
        bundles = {v: b.bundle(f"{rt}-{v}", v) for v in variants}
        t = {n: stats(x) for n, x in b.alternate(rt, bundles, runs).items()}
        base = t["plain"]["median"]
        for v in variants:
            s = t[v]
            rows.append([rt, v, f"{s['median']:.2f}", f"{s['p10']:.2f}", f"{s['p90']:.2f}",
                         f"{s['median'] - base:+.2f}", pct(s["median"], base),
                         pct(s["median"], t["floor"]["median"]), pct(s["median"], t["noop"]["median"]),
                         f"{s['median'] / t['mountfloor']['median']:.3f}"])
        print(f"bench: latency {rt} done", file=sys.stderr)
    return [
        f"### Container start latency (`<runtime> run` of `true`, ms; {runs} alternating rounds)\n",
        table(["runtime", "variant", "median", "p10", "p90", "Δ median vs plain", "vs plain", "vs floor",
               "vs noop", "ratio to mountfloor"], rows),
    ]


def section_wrapper(b, runtimes, runs):
    """The two executors of the runtime wrapper against their floors: every
    variant runs `run` of the same read-only busybox `true`, config.json put
    back as the engine writes it before each run (outside the timing)."""
    by_label = dict(b.hooks)
    label = next((x for x in ["musl", "installed", "glibc"] if x in by_label), b.hooks[0][0])
    binary = by_label[label]
    wrapper = os.path.join(b.work, "oci-tmpfs-runtime")
    os.symlink(binary, wrapper)
    rows = []
    for rt in runtimes:
        real = shutil.which(rt)
        envs = {}
        for mode in ["spec", "hook"]:
            path = os.path.join(b.work, f"wrapper-{rt}-{mode}.toml")
            with open(path, "w") as f:
                f.write(f'mode = "{mode}"\nruntime_path = "{real}"\n')
            envs[mode] = dict(os.environ, OCI_TMPFS_HOOK_CONFIG=path)
        variants = {
            "plain": ([rt], "plain", None),
            "floor (mounts in config.json by hand)": ([rt], "floor", None),
            "exec-only static wrapper": ([b.floor(f"execwrap-{rt}")], "plain", None),
            "oci-tmpfs-runtime, mode spec": ([wrapper], "plain", envs["spec"]),
            "oci-tmpfs-runtime, mode hook": ([wrapper], "plain", envs["hook"]),
            f"hook alone ({label}, inject)": ([rt], label, None),
            "no-op static hook": ([rt], "noop", None),
        }
        runs_of = {}
        for name, (cmd, variant, env) in variants.items():
            d = b.bundle(f"{rt}-w-{len(runs_of)}", variant)
            with open(os.path.join(d, "config.json"), "rb") as f:
                runs_of[name] = (cmd, d, env, f.read())
        names = list(runs_of)
        t = b.rotate_cmds(runs_of, runs)
        base, wrap = t["plain"]["median"], t["exec-only static wrapper"]["median"]
        noop = t["no-op static hook"]["median"]
        for n in names:
            s = t[n]
            rows.append([rt, n, f"{s['median']:.2f}", f"{s['p10']:.2f}", f"{s['p90']:.2f}",
                         f"{s['median'] / base:.3f}", pct(s["median"], wrap), pct(s["median"], noop)])
        print(f"bench: wrapper {rt} done", file=sys.stderr)
    return [
        f"\n### The runtime wrapper's executors (`run` of `true`, ms; {runs} alternating rounds)\n",
        table(["runtime", "start path", "median", "p10", "p90", "vs plain", "vs exec-only wrapper",
               "vs no-op hook"], rows),
    ]


def section_startup(b, runtimes, runs):
    """The start-up targets (BENCHMARKS.md#start-up), each against its
    floor, all in one alternating run per runtime: the hook with the full
    plan against the static C mount sequence (mountfloor), the hook's no-op
    path (writable root) against the no-op hook, and the wrapper in spec mode, on a fresh config.json and on
    the bundle it already edited, against the exec-only wrapper on a bundle
    whose mounts were written by hand (the same runtime work). Every C floor
    runs once per C library it was built with (`--floors`): a static glibc
    program pays glibc's start-up, which a static musl one does not."""
    rows = []
    libcs = [libc for libc, _ in b.floors]
    for rt in runtimes:
        real = shutil.which(rt)
        conf = os.path.join(b.work, f"startup-{rt}.toml")
        with open(conf, "w") as f:
            f.write(f'mode = "spec"\nruntime_path = "{real}"\n')
        env = dict(os.environ, OCI_TMPFS_HOOK_CONFIG=conf)
        runs_of = {}

        def add(name, cmd, variant, env=None, writable=False, edited=False, libc=None):
            d = b.bundle(f"{rt}-s-{len(runs_of)}", variant, libc=libc)
            path = os.path.join(d, "config.json")
            if writable:
                with open(path) as f:
                    cfg = json.load(f)
                cfg["root"]["readonly"] = False
                write_json(path, cfg)
            with open(path, "rb") as f:
                pristine = f.read()
            if edited:  # one run of the wrapper leaves the bundle edited
                b.run_cmd(cmd, d, env, pristine)
                with open(path, "rb") as f:
                    pristine = f.read()
            runs_of[name] = (cmd, d, env, pristine)

        floor_of = {}
        for libc in libcs:
            names = {kind: f"floor {libc}: {kind}" for kind in STARTUP_FLOORS.values()}
            floor_of[libc] = names
            add(names["C mount sequence"], [rt], "mountfloor", libc=libc)
            add(names["no-op hook, writable root"], [rt], "noop", writable=True, libc=libc)
            add(names["exec-only wrapper, mounts by hand"], [b.floor(f"execwrap-{rt}", libc)], "floor")
        for label, binary in b.hooks:
            wdir = os.path.join(b.work, f"wrap-{label}")
            os.makedirs(wdir, exist_ok=True)
            wrapper = os.path.join(wdir, "oci-tmpfs-runtime")
            if not os.path.exists(wrapper):
                os.symlink(binary, wrapper)
            add(f"{label}: hook, full plan", [rt], label)
            add(f"{label}: hook, writable root", [rt], label, writable=True)
            add(f"{label}: wrapper spec, fresh config.json", [wrapper], "plain", env)
            add(f"{label}: wrapper spec, edited bundle", [wrapper], "plain", env, edited=True)
        t = b.rotate_cmds(runs_of, runs)
        for n in runs_of:
            kind = next((k for key, k in STARTUP_FLOORS.items() if key in n), None)
            s = t[n]
            row = [rt, n, f"{s['median']:.2f}", f"{s['p10']:.2f}", f"{s['p90']:.2f}"]
            for libc in libcs:
                f = t[floor_of[libc][kind]]["median"] if kind else s["median"]
                row += [f"{s['median'] - f:+.2f}", f"{s['median'] / f:.3f}"]
            rows.append(row)
        print(f"bench: startup {rt} done", file=sys.stderr)
    header = ["runtime", "variant", "median", "p10", "p90"]
    for libc in libcs:
        header += [f"Δ vs {libc} floor", f"ratio to {libc} floor"]
    return [
        f"\n### Start-up against the floors (`<runtime> run` of `true`, ms; {runs} alternating rounds)\n",
        table(header, rows),
    ]


def section_home(b, runtimes, runs):
    """Where HOME comes from, with the hook at prestart: HOME=/root in
    process.env (no passwd read) against no HOME, where the hook reads the
    image's /etc/passwd for uid 0 (home /root) and plans again. Both end in
    the same mounts (/tmp, /root, /dev/shm grown), so the difference is the
    read and the second plan. One alternating run per runtime over every
    `--hook` binary: `run` of each bundle, ratios to the same binary's
    HOME-in-env row and to the first binary's; and, in the same rotation,
    the hook process itself (hook_timer.py in front of it: wall and CPU ms
    per invocation), which the runtime's own noise does not blur."""
    rootfs = os.path.join(b.work, "rootfs-home")
    if not os.path.exists(rootfs):
        shutil.copytree(b.rootfs, rootfs, symlinks=True)
        # debian:12's /etc/passwd and a /root (bench/home_rootfs.sh).
        subprocess.run([os.path.join(HERE, "home_rootfs.sh"), rootfs, "700"], check=True)
    env_row, read_row = "HOME=/root in process.env", "no HOME, /etc/passwd read"
    rows, hrows = [], []
    for rt in runtimes:
        runs_of, logs = {}, {}
        for label, _ in b.hooks:
            for what in (env_row, read_row):
                for measure in (None, "wall"):
                    name = f"{rt}-home-{len(runs_of)}"
                    d = b.bundle(name, label, measure=measure)
                    path = os.path.join(d, "config.json")
                    with open(path) as f:
                        cfg = json.load(f)
                    cfg["root"]["path"] = rootfs
                    if what == env_row:
                        cfg["process"]["env"].append("HOME=/root")
                    write_json(path, cfg)
                    key = f"{label}: {what}" + (" (timed)" if measure else "")
                    if measure:
                        logs[f"{label}: {what}"] = b.log(name)
                    with open(path, "rb") as f:
                        runs_of[key] = ([rt], d, None, f.read())
        t = b.rotate_cmds(runs_of, runs)
        first = t[f"{b.hooks[0][0]}: {env_row}"]["median"]
        for n in (k for k in runs_of if not k.endswith("(timed)")):
            st = t[n]
            own = t[n.split(": ")[0] + ": " + env_row]["median"]
            rows.append([rt, n, f"{st['median']:.2f}", f"{st['p10']:.2f}", f"{st['p90']:.2f}",
                         f"{st['median'] - own:+.2f}", f"{st['median'] / own:.3f}", f"{st['median'] / first:.3f}"])
        hook = {n: read_log(path)[WARMUP:] for n, path in logs.items()}  # rotate_cmds' warm-up rounds dropped
        for n, lines in hook.items():
            wall, cpu = stats([r[1] for r in lines]), stats([r[2] for r in lines])
            own = hook[n.split(": ")[0] + ": " + env_row]
            own_wall, own_cpu = stats([r[1] for r in own]), stats([r[2] for r in own])
            hrows.append([rt, n, f"{wall['median']:.3f}", f"{wall['p10']:.3f}", f"{wall['p90']:.3f}",
                          f"{(wall['median'] - own_wall['median']) * 1000:+.0f}",
                          f"{(wall['p10'] - own_wall['p10']) * 1000:+.0f}", f"{cpu['median']:.3f}",
                          f"{(cpu['median'] - own_cpu['median']) * 1000:+.0f}", len(lines)])
        print(f"bench: home {rt} done", file=sys.stderr)
    return [
        f"\n### HOME from process.env or from /etc/passwd (`<runtime> run` of `true`, hook at prestart, ms; "
        f"{runs} alternating rounds)\n",
        table(["runtime", "variant", "median", "p10", "p90", "Δ vs its HOME in env", "ratio to its HOME in env",
               f"ratio to {b.hooks[0][0]}: HOME in env"], rows),
        "\n### The hook process alone, same rounds (hook_timer.py: posix_spawn to wait4, ms)\n",
        table(["runtime", "variant", "wall median", "wall p10", "wall p90", "Δ wall median vs its HOME in env (µs)",
               "Δ wall p10 (µs)", "CPU median", "Δ CPU median (µs)", "runs"], hrows),
    ]


def section_hook(b, runtimes, runs):
    rows, lrows = [], []
    for rt in runtimes:
        bundles = {}
        for n in [1, 4, 16]:
            bundles[f"{rt}-floor-{n}"] = b.bundle(f"{rt}-floor-{n}", "floor", targets=n)
            for label, _ in b.hooks:
                bundles[f"{rt}-{label}-{n}"] = b.bundle(f"{rt}-{label}-{n}", label, targets=n)
                for m in ["wall", "rss"]:
                    name = f"{rt}-{label}-{n}-{m}"
                    bundles[name] = b.bundle(name, label, targets=n, measure=m)
        times = b.alternate(rt, bundles, runs)
        for n in [1, 4, 16]:
            fl = stats(times[f"{rt}-floor-{n}"])
            for label, _ in b.hooks:
                wall = read_log(b.log(f"{rt}-{label}-{n}-wall"))
                rss = [r[0] for r in read_log(b.log(f"{rt}-{label}-{n}-rss"))]
                h, t, cpu = stats([r[1] for r in wall]), stats([r[0] for r in wall]), stats([r[2] for r in wall])
                rows.append([rt, label, n, f"{h['median']:.3f}", f"{h['p10']:.3f}", f"{h['p90']:.3f}",
                             f"{t['median']:.3f}", f"{cpu['median']:.3f}", f"{cpu['p90']:.3f}",
                             f"{statistics.median(rss) / 1024:.2f}", f"{max(rss) / 1024:.2f}"])
                hk = stats(times[f"{rt}-{label}-{n}"])
                lrows.append([rt, label, n, f"{fl['median']:.2f}", f"{hk['median']:.2f}",
                              f"{hk['median'] - fl['median']:+.2f}", pct(hk["median"], fl["median"])])
        print(f"bench: hook and targets {rt} done", file=sys.stderr)
    return [
        f"\n### The hook itself, per invocation (prestart; {runs} runs each; /dev/shm grown as well)\n",
        table(["runtime", "binary", "temp targets", "wall median ms", "wall p10", "wall p90",
               "`/bin/true` wall ms", "CPU median ms", "CPU p90", "max RSS median MiB", "max RSS max MiB"], rows),
        f"\nFor scale, GNU time shows {gnu_time_floor() / 1024:.2f} MiB max RSS for `/bin/true`.\n",
        "\n### Start latency by number of temp targets (ms, median)\n",
        table(["runtime", "binary", "temp targets", "floor", "hook", "hook − floor", "vs floor"], lrows),
    ]


def section_many(b, runtimes, rounds):
    rows = []
    variants = ["plain"] + [label for label, _ in b.hooks]
    for rt in runtimes:
        bundles = {v: b.bundle(f"{rt}-many-{v}", v) for v in variants}
        for count in [1, 10, 50]:
            walls = {v: [] for v in variants}
            each = {v: [] for v in variants}
            for r in range(rounds):
                k = r % len(variants)
                for v in variants[k:] + variants[:k]:
                    w, e = b.at_once(rt, bundles[v], count)
                    walls[v].append(w)
                    each[v].extend(e)
            base = statistics.median(walls["plain"])
            for v in variants:
                w = statistics.median(walls[v])
                rows.append([rt, count, v, f"{w:.1f}", pct(w, base), f"{statistics.median(each[v]):.1f}"])
        print(f"bench: at once {rt} done", file=sys.stderr)
    return [
        f"\n### Containers started at once (ms; median of {rounds} alternating rounds)\n",
        table(["runtime", "containers", "variant", "all done", "vs plain", "each (median)"], rows),
    ]


def spawn_cost(argv, runs):
    """Median wall and CPU ms of posix_spawn + wait4 of argv (stdout to /dev/null)."""
    null = os.open(os.devnull, os.O_WRONLY)
    wall, cpu = [], []
    try:
        for _ in range(runs):
            t0 = time.perf_counter_ns()
            pid = os.posix_spawn(argv[0], argv, os.environ, file_actions=[(os.POSIX_SPAWN_DUP2, null, 1)])
            _, status, usage = os.wait4(pid, 0)
            wall.append((time.perf_counter_ns() - t0) / 1e6)
            cpu.append((usage.ru_utime + usage.ru_stime) * 1e3)
            if os.waitstatus_to_exitcode(status) != 0:
                die(f"{argv} exited {os.waitstatus_to_exitcode(status)}")
    finally:
        os.close(null)
    return stats(wall), stats(cpu)


def section_exec(b, runs):
    """What starting a process costs here, outside any container: the floor
    under the hook's own numbers."""
    progs = [("`/bin/true` (coreutils, dynamic)", ["/bin/true"]),
             ("busybox `true` (static)", [b.busybox, "true"])]
    progs += [(f"`{label} --version`", [path, "--version"]) for label, path in b.hooks]
    progs += [(f"`{label} explain` (reads config.json, plans, prints)",
               [path, "explain", "--bundle", b.bundle(f"exec-{label}", "plain")]) for label, path in b.hooks]
    rows = []
    for name, argv in progs:
        w, c = spawn_cost(argv, runs)
        rows.append([name, f"{w['median']:.3f}", f"{w['p90']:.3f}", f"{c['median']:.3f}", f"{c['p90']:.3f}"])
    return [
        f"\n### Process start cost on this machine ({runs} spawns each, no container)\n",
        table(["program", "wall median ms", "wall p90", "CPU median ms", "CPU p90"], rows),
    ]


def section_binary(b):
    rows = []
    for label, path in b.hooks:
        size = os.path.getsize(path)
        kind = "?"
        if shutil.which("file"):
            kind = subprocess.run(["file", "-b", path], capture_output=True, text=True).stdout.strip()
            kind = ", ".join(p for p in kind.split(", ") if "linked" in p or "stripped" in p)
        rows.append([label, os.path.relpath(path), size, f"{size / MIB:.2f}", kind])
    return ["\n### Binary\n", table(["binary", "path", "bytes", "MiB", "file(1)"], rows)]


def parse_hooks(values):
    hooks = []
    for v in values or [os.path.join(HERE, "..", "target", "release", "oci-tmpfs-hook")]:
        label, _, path = v.rpartition("=")
        label = label or ("hook" if not hooks else f"hook{len(hooks) + 1}")
        path = os.path.abspath(path)
        if not os.access(path, os.X_OK):
            die(f"{path} is missing: cargo build --release")
        if label in ("plain", "floor", "noop", "mountfloor") or label in dict(hooks):
            die(f"hook label {label!r} is taken")
        hooks.append((label, path))
    return hooks


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hook", action="append", metavar="[LABEL=]PATH",
                    help="hook binary to measure; repeatable (default: target/release/oci-tmpfs-hook)")
    ap.add_argument("--runs", type=int, default=60, help="alternating rounds per latency row (default 60)")
    ap.add_argument("--rounds", type=int, default=5, help="rounds of the containers-at-once table (default 5)")
    ap.add_argument("--runtimes", default=",".join(RUNTIMES), help="default: " + ",".join(RUNTIMES))
    ap.add_argument("--sections", default=",".join(SECTIONS), help="default: " + ",".join(SECTIONS))
    ap.add_argument("--keep", action="store_true", help="keep the work dir (and its bundles' tmpfs mounted)")
    ap.add_argument("--bundles-on-disk", action="store_true",
                    help="the bundles in the work dir, not on a tmpfs (Podman's are on disk)")
    ap.add_argument("--floors", action="append", metavar="LIBC=DIR", required=True,
                    help="a dir of C floors built against LIBC: noophook, mounthook, execwrap-RUNTIME; "
                         "repeatable, the first is every section's floor (bench/run.sh builds them)")
    args = ap.parse_args()
    if os.geteuid() != 0:
        die("run as root (it starts containers)")
    if not os.access(GNU_TIME, os.X_OK):
        die(f"{GNU_TIME} is missing: apt-get install time")
    runtimes = args.runtimes.split(",")
    for rt in runtimes:
        if not shutil.which(rt):
            die(f"{rt} is missing: apt-get install {rt}")
    sections = args.sections.split(",")
    for s in sections:
        if s not in SECTIONS:
            die(f"unknown section {s!r}; known: {', '.join(SECTIONS)}")

    b = Bench(parse_hooks(args.hook), args.bundles_on_disk)
    b.floors = [(libc, os.path.abspath(d)) for libc, d in (f.split("=", 1) for f in args.floors)]
    for libc, d in b.floors:
        for program in ["noophook", "mounthook"] + [f"execwrap-{rt}" for rt in runtimes]:
            if not os.access(os.path.join(d, program), os.X_OK):
                die(f"{d}/{program} is missing (--floors {libc}=DIR; bench/run.sh builds them)")
    out = [", ".join(f"`{label}` = `{os.path.relpath(p)}`" for label, p in b.hooks)
           + f". {WARMUP} warm-up runs per bundle are dropped.\n"]
    out.append("Bundles on " + ("the work dir's disk" if args.bundles_on_disk else "a tmpfs, as Docker's and containerd's")
               + f", the rootfs on {subprocess.run(['stat', '-f', '-c', '%T', b.work], capture_output=True, text=True).stdout.strip()}.\n")
    try:
        if "latency" in sections:
            out += section_latency(b, runtimes, args.runs)
        if "startup" in sections:
            out += section_startup(b, runtimes, args.runs)
        if "home" in sections:
            out += section_home(b, runtimes, args.runs)
        if "wrapper" in sections:
            out += section_wrapper(b, runtimes, args.runs)
        if "hook" in sections:
            out += section_hook(b, runtimes, args.runs)
        if "many" in sections:
            out += section_many(b, runtimes, args.rounds)
        if "exec" in sections:
            out += section_exec(b, max(args.runs, 300))
        if "binary" in sections:
            out += section_binary(b)
    finally:
        if args.keep:
            print(f"bench: work dir kept: {b.work}", file=sys.stderr)
        else:
            b.close()
            shutil.rmtree(b.work, ignore_errors=True)
    print("\n".join(out))


if __name__ == "__main__":
    main()
