#!/usr/bin/env python3
"""The wrapper's own time on `create`, without a runtime (BENCHMARKS.md#burst-caches).

As root:

    bench/wrapper_alone.py [--rounds N] LABEL=BINARY[:CACHES] ...

Each arm runs `oci-tmpfs-runtime create` (BINARY under that name) in spec
mode with `runtime_path` set to `true`, so that what is timed is the
wrapper: its exec, reading and writing `config.json`, resolving the rootfs,
making the cache mountpoints, up to its exec of `true`. CACHES, when given,
is the host config's `home_caches` (a comma list; empty for none). The arm
`true` times `true create ...` itself, the floor of any process start.

Each round makes every arm's bundle afresh: an overlay rootfs (the common
image: busybox, `/etc/passwd` with root's entry, `/root` holding `.bashrc`
and `.profile`) over an upper directory on this machine's disk, and the
`config.json` of `runc spec` made read-only; the arms run in a shuffled
order. Printed: per arm, the median and the 10th percentile over the rounds
(ms), and the median over `true`'s.
"""

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("arms", nargs="+", metavar="LABEL=BINARY[:CACHES]")
    args = ap.parse_args()
    true = shutil.which("true")
    busybox = shutil.which("busybox")
    runc = shutil.which("runc")
    if not (true and busybox and runc) or os.geteuid() != 0:
        sys.exit("wrapper_alone: run as root, with true, busybox and runc on PATH")
    work = tempfile.mkdtemp(prefix="oci-tmpfs-wrapper-alone.", dir="/var/tmp")
    try:
        lower = os.path.join(work, "lower")
        for d in ["bin", "root", "etc", "tmp", "proc", "dev", "sys"]:
            os.makedirs(os.path.join(lower, d))
        shutil.copy(busybox, os.path.join(lower, "bin/busybox"))
        os.symlink("busybox", os.path.join(lower, "bin/sh"))
        for f in [".bashrc", ".profile"]:
            with open(os.path.join(lower, "root", f), "w") as out:
                out.write("# " + f + "\n")
        with open(os.path.join(lower, "etc/passwd"), "w") as out:
            out.write("root:x:0:0:root:/root:/bin/sh\n")
        os.chmod(os.path.join(lower, "tmp"), 0o1777)
        subprocess.run([runc, "spec", "--bundle", work], check=True)
        with open(os.path.join(work, "config.json")) as f:
            spec = json.load(f)
        spec["root"]["readonly"] = True
        arms = {"true": None}
        for arg in args.arms:
            label, _, rest = arg.partition("=")
            binary, sep, caches = rest.partition(":")
            cfg = os.path.join(work, label + ".toml")
            with open(cfg, "w") as out:
                out.write('mode = "spec"\nruntime_path = %s\n' % json.dumps(true))
                if sep:
                    listed = [c for c in caches.split(",") if c]
                    out.write("home_caches = %s\n" % json.dumps(listed))
            d = os.path.join(work, "bin-" + label)
            os.makedirs(d)
            os.symlink(os.path.realpath(binary), os.path.join(d, "oci-tmpfs-runtime"))
            arms[label] = (os.path.join(d, "oci-tmpfs-runtime"), cfg)
        times = {a: [] for a in arms}
        for i in range(args.rounds + 1):
            order = list(arms)
            random.shuffle(order)
            for a in order:
                b = os.path.join(work, "b-" + a)
                shutil.rmtree(b, ignore_errors=True)
                for d in ["rootfs", "upper", "work"]:
                    os.makedirs(os.path.join(b, d))
                opts = "lowerdir=%s,upperdir=%s/upper,workdir=%s/work" % (lower, b, b)
                subprocess.run(["mount", "-t", "overlay", "overlay", "-o", opts, b + "/rootfs"], check=True)
                try:
                    with open(os.path.join(b, "config.json"), "w") as out:
                        json.dump(spec, out)
                    env = dict(os.environ)
                    if arms[a] is None:
                        cmd = [true]
                    else:
                        cmd = [arms[a][0]]
                        env["OCI_TMPFS_HOOK_CONFIG"] = arms[a][1]
                    cmd += ["create", "--bundle", b, "wrapper-alone"]
                    start = time.perf_counter()
                    subprocess.run(cmd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, check=True)
                    took = (time.perf_counter() - start) * 1000
                finally:
                    subprocess.run(["umount", b + "/rootfs"], check=True)
                if i:  # round 0 warms the caches (and the runtime version's)
                    times[a].append(took)
        floor = statistics.median(times["true"])
        print("| arm | median | p10 | median over true's |\n|---|---|---|---|")
        for a, v in times.items():
            v.sort()
            m = statistics.median(v)
            print("| %s | %.3f ms | %.3f ms | %.2f× |" % (a, m, v[len(v) // 10], m / floor))
    finally:
        subprocess.run(["umount", "-R", work], stderr=subprocess.DEVNULL)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
