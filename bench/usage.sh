#!/usr/bin/env bash
# `oci-tmpfs-hook usage` against many idle containers (BENCHMARKS.md#usage):
# USAGE_BENCH_CONTAINERS (default 500) runc containers from one read-only
# busybox bundle with our hook injected at prestart, detached, each
# sleeping; then `usage --json` timed USAGE_BENCH_RUNS times (default 5),
# each run checked to list every container with its /tmp and /dev/shm. The
# static release build (packaging/build-static.sh) unless OCI_TMPFS_HOOK
# names another. As root; every container is deleted at the end.
#
#   bench/usage.sh
#   USAGE_BENCH_CONTAINERS=20 USAGE_BENCH_RUNS=2 bench/usage.sh   a smoke run
set -Eeuo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "usage.sh: run as root (it starts containers)" >&2; exit 1; }
n=${USAGE_BENCH_CONTAINERS:-500}
runs=${USAGE_BENCH_RUNS:-5}
bin=${OCI_TMPFS_HOOK:-$(packaging/build-static.sh | tail -n 1)}
[ -x "$bin" ] || { echo "usage.sh: step build: no binary at $bin" >&2; exit 1; }
busybox=$(command -v busybox) || { echo "usage.sh: step rootfs: busybox-static is not installed" >&2; exit 1; }
dir=$(mktemp -d /var/tmp/oci-tmpfs-usage-bench.XXXXXX)
prefix="usage-bench-$$"
cleanup() {
  for i in $(seq 1 "$n"); do runc delete --force "$prefix-$i" >/dev/null 2>&1 || true; done
  rm -rf "$dir"
}
trap cleanup EXIT
mkdir -p "$dir/rootfs/bin" "$dir/rootfs/proc" "$dir/rootfs/sys" "$dir/rootfs/dev" "$dir/rootfs/tmp" \
  "$dir/rootfs/etc" "$dir/rootfs/root"
cp "$busybox" "$dir/rootfs/bin/busybox"
for a in sh sleep; do ln -s busybox "$dir/rootfs/bin/$a"; done
echo 'root:x:0:0:root:/root:/bin/sh' >"$dir/rootfs/etc/passwd"
(cd "$dir" && runc spec)
python3 - "$dir/config.json" <<'PY'
import json, sys
p = sys.argv[1]
c = json.load(open(p))
c["root"]["readonly"] = True
c["process"]["terminal"] = False
c["process"]["args"] = ["sleep", "100000"]
json.dump(c, open(p, "w"))
PY
"$bin" inject --stage prestart --bundle "$dir" >/dev/null
t0=$(date +%s)
for i in $(seq 1 "$n"); do
  runc run --detach --bundle "$dir" "$prefix-$i" </dev/null >/dev/null 2>&1 \
    || { echo "usage.sh: step start: runc run $prefix-$i failed" >&2; exit 1; }
done
echo "usage.sh: $n containers started in $(( $(date +%s) - t0 ))s ($bin)"
python3 - "$bin" "$n" "$runs" "$prefix" <<'PY'
import json, subprocess, sys, time
bin, n, runs, prefix = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
times = []
for _ in range(runs):
    t0 = time.perf_counter()
    out = subprocess.run([bin, "usage", "--json"], capture_output=True, text=True, check=True).stdout
    times.append(time.perf_counter() - t0)
    ours = [c for c in json.loads(out) if c["id"].startswith(prefix + "-")]
    paths = [sorted(t["path"] for t in c["targets"]) for c in ours]
    assert len(ours) == n, f"usage listed {len(ours)} of {n} containers"
    assert all("/tmp" in p and "/dev/shm" in p for p in paths), paths[:3]
times.sort()
print(f"usage --json over {n} idle containers: median {times[len(times) // 2] * 1e3:.0f} ms, "
      f"min {times[0] * 1e3:.0f} ms, max {times[-1] * 1e3:.0f} ms ({runs} runs)")
PY
