#!/usr/bin/env python3
"""The runtime wrapper's own time at a container start (BENCHMARKS.md#exec-gap):
from the kernel's exec of the wrapper to its exec of the real runtime, read
from the sched:sched_process_exec tracepoint (`perf record`), so the runtime's
start and the container's do not blur it. Beside it, each arm's whole
`RUNTIME run` against the floor's, as the median of the rounds' ratios.

As root: bench/exec_gap.py [--runtime crun] [--rounds 200] [--copies 4]
                           LABEL=BINARY ...

Arms, alternating (the order rotates every round):
  floor        bench/execwrap.c built by bench/floor.sh (static, musl-gcc)
               over the bundle the wrapper edited;
  LABEL/edited the wrapper of build LABEL over that same bundle;
  LABEL/fresh  the same over the original config.json, copied in before each
               start (every arm's start copies its config.json in).
Each build runs from --copies copies of its file, taken in turn: where a
file's pages sit in the page cache moves its start by up to ~0.1 ms on a
virtual machine, so one copy can flatter or wrong a build (BENCHMARKS.md#exec-gap).

The bundle is the common image (bench/common_image.sh: root, /root holding
.bashrc and .profile, HOME from /etc/passwd), the default host config, on a
tmpfs. Needs perf, busybox, musl-tools (or cc), and the runtime.
"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def sh(*cmd, **kw):
    return subprocess.run(cmd, check=True, **kw)


def make_bundle(work, runtime):
    b = os.path.join(work, "b")
    sh(os.path.join(HERE, "common_image.sh"), b, stdout=subprocess.DEVNULL)
    shutil.copy(os.path.join(b, "config.json"), os.path.join(work, "orig.json"))
    with open(os.path.join(work, "host.toml"), "w") as f:
        f.write('runtime_path = "%s"\n' % runtime)
    return b


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runtime", default="crun")
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--copies", type=int, default=4)
    ap.add_argument("builds", nargs="+", metavar="LABEL=BINARY")
    a = ap.parse_args()
    runtime = shutil.which(a.runtime) or sys.exit("exec_gap: no %s" % a.runtime)
    work = tempfile.mkdtemp(prefix="exec-gap.")
    sh("mount", "-t", "tmpfs", "-o", "size=256m,mode=0700", "exec-gap", work)
    try:
        run(a, runtime, work)
    finally:
        subprocess.run(["umount", work])
        os.rmdir(work)


def run(a, runtime, work):
    b = make_bundle(work, runtime)
    env = dict(os.environ, OCI_TMPFS_HOOK_CONFIG=os.path.join(work, "host.toml"))
    floor = os.path.join(work, "floor", "execwrap")
    os.makedirs(os.path.dirname(floor))
    cc = sh(os.path.join(HERE, "floor.sh"), runtime, floor, stdout=subprocess.PIPE, text=True).stdout.strip()
    builds = []
    for spec in a.builds:
        label, path = spec.split("=", 1)
        copies = []
        for k in range(a.copies):
            d = os.path.join(work, "%s.%d" % (label, k))
            os.makedirs(d)
            shutil.copy(path, os.path.join(d, "bin"))
            os.symlink("bin", os.path.join(d, "oci-tmpfs-runtime"))
            copies.append(os.path.join(d, "oci-tmpfs-runtime"))
        builds.append((label, copies))
    # The edit, made once by the first build: the floor's bundle.
    orig = os.path.join(work, "orig.json")
    shutil.copy(orig, os.path.join(b, "config.json"))
    sh(builds[0][1][0], "run", "--bundle", b, "exec-gap", env=env,
       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    edited = os.path.join(work, "edited.json")
    shutil.copy(os.path.join(b, "config.json"), edited)
    with open(edited) as f:
        text = f.read()
    if "tmpcopyup" not in text or '"--stage"' in text:
        sys.exit("exec_gap: the edit is not the common image's (tmpcopyup, no hook)")
    arms = [("floor", lambda r: floor, edited)]
    for label, copies in builds:
        for kind, src in (("edited", edited), ("fresh", orig)):
            arms.append(("%s/%s" % (label, kind), lambda r, c=copies: c[r % len(c)], src))
    trace = os.path.join(work, "perf.data")
    perf = subprocess.Popen(["perf", "record", "-q", "-a", "-o", trace, "-e", "sched:sched_process_exec"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1)
    wall = {name: [] for name, _, _ in arms}
    starts = []  # (arm, pid) in start order
    for r in range(a.rounds + 3):
        k = r % len(arms)
        for name, binary, src in arms[k:] + arms[:k]:
            shutil.copyfile(src, os.path.join(b, "config.json"))
            t = time.perf_counter_ns()
            p = subprocess.Popen([binary(r), "run", "--bundle", b, "exec-gap"], env=env,
                                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            rc = p.wait()
            e = time.perf_counter_ns()
            if rc != 0:
                sys.exit("exec_gap: %s exited %d" % (name, rc))
            if r >= 3:  # three warm-up rounds
                wall[name].append((e - t) / 1000)
                starts.append((name, p.pid))
    perf.send_signal(2)
    perf.wait()
    out = subprocess.run(["perf", "script", "-i", trace, "-F", "pid,time,trace"],
                         check=True, capture_output=True, text=True).stdout
    execs = {}  # pid -> [(time, filename)]
    for line in out.splitlines():
        m = re.match(r"\s*(\d+)\s+([\d.]+):\s+filename=(\S+)", line)
        if m:
            execs.setdefault(int(m.group(1)), []).append((float(m.group(2)), m.group(3)))
    gap = {name: [] for name, _, _ in arms}
    for name, pid in starts:
        seen = execs.get(pid, [])
        at_runtime = [t for t, f in seen if f == runtime]
        if len(seen) >= 2 and at_runtime:
            gap[name].append((at_runtime[0] - seen[0][0]) * 1e6)
    print("runtime: %s; %d rounds, alternating; %d copies of each build; floor built by %s"
          % (subprocess.run([runtime, "--version"], capture_output=True, text=True).stdout.splitlines()[0],
             a.rounds, a.copies, cc))
    print()
    print("| arm | exec to runtime exec, p50 (p25–p75) | start p50 | start / floor |")
    print("|---|---|---|---|")
    base = wall["floor"]
    for name, _, _ in arms:
        g = sorted(gap[name])
        q = statistics.quantiles(g, n=4) if len(g) > 1 else [0, 0, 0]
        ratio = statistics.median(x / y for x, y in zip(wall[name], base))
        print("| %s | %.0f µs (%.0f–%.0f), n=%d | %.2f ms | %.3f |"
              % (name, statistics.median(g), q[0], q[2], len(g), statistics.median(wall[name]) / 1000, ratio))


if __name__ == "__main__":
    main()
