#!/usr/bin/env bash
# The wrapper in spec mode against the floor (BENCHMARKS.md#spec-floor): the
# common image (root, /root holding .bashrc and .profile, HOME from
# /etc/passwd, the default host config) started by `RUNTIME run`, alternating:
#   floor   a static C exec-only wrapper (bench/execwrap.c) over the bundle with
#           the same mounts written in by hand (the config.json the wrapper
#           writes), no hook process;
#   edited  the wrapper over that same, already edited bundle (it recognises
#           its own edit and execs the runtime);
#   fresh   the wrapper over the original config.json, copied in before each
#           start (it plans, reads the image, writes the mounts);
#   copy    the floor again with the same copy of config.json before each
#           start, so that `fresh` is compared with a start that pays the copy.
# As root: bench/spec_floor.sh [RUNTIME] [ROUNDS]   (default crun, 100)
# Needs the static binary install.sh installs (or OCI_TMPFS_BENCH_HOOK=PATH).
set -Eeuo pipefail
cd "$(dirname "$0")/.."
rt=$(command -v "${1:-crun}")
rounds=${2:-100}
ours=${OCI_TMPFS_BENCH_HOOK:-/usr/local/bin/oci-tmpfs-hook}
work=$(mktemp -d /tmp/spec-floor.XXXXXX)
# The bundle on a tmpfs, where containerd and Docker keep theirs (under
# /run/containerd): replacing config.json on ext4 costs ~0.15 ms more, the
# writeback ext4 starts when a file is renamed over another
# (docs/design.md#spec-write). OCI_TMPFS_BENCH_DISK=1 keeps it on disk.
[ -n "${OCI_TMPFS_BENCH_DISK:-}" ] || mount -t tmpfs -o size=64m,mode=0700 spec-floor "$work"
trap 'umount "$work" 2>/dev/null; rm -rf "$work"' EXIT
# The floor in musl (bench/floor.sh). OCI_TMPFS_BENCH_FLOOR=PATH: a floor
# built elsewhere (the sid root has no musl-gcc: bench/floor.sh /usr/sbin/runc PATH
# on the host).
if [ -n "${OCI_TMPFS_BENCH_FLOOR:-}" ]; then
    floor_cc="given ($OCI_TMPFS_BENCH_FLOOR)"
    cp "$OCI_TMPFS_BENCH_FLOOR" "$work/execwrap"
else
    floor_cc=$(bench/floor.sh "$rt" "$work/execwrap")
fi
ln -s "$ours" "$work/oci-tmpfs-runtime"
printf 'runtime_path = "%s"\n' "$rt" >"$work/host.toml"
b=$work/b
bench/common_image.sh "$b"
cp "$b/config.json" "$work/orig.json"
OCI_TMPFS_HOOK_CONFIG=$work/host.toml "$ours" inject --mode spec --runtime "$rt" --bundle "$b" >"$work/inject.out"
cp "$b/config.json" "$work/edited.json"
grep -q tmpcopyup "$work/edited.json" || { echo "spec_floor: the edit has no tmpcopyup: $(cat "$work/inject.out")" >&2; exit 1; }
if grep -q -- '"--stage"' "$work/edited.json"; then echo "spec_floor: the edit holds our hook" >&2; exit 1; fi

start() { # ARM
    local bin=$work/execwrap
    case $1 in
        edited | fresh) bin=$work/oci-tmpfs-runtime ;;
    esac
    case $1 in
        fresh) cp "$work/orig.json" "$b/config.json" ;;
        copy) cp "$work/edited.json" "$b/config.json" ;;
        *) ;;
    esac
    # The clock is bash's own ($EPOCHREALTIME, microseconds): a `date`
    # process on each side put ~1.8 ms of its own fork, exec and exit inside
    # every start, which pulled each ratio towards 1 (BENCHMARKS.md#spec-floor-clock).
    local s e
    s=${EPOCHREALTIME//[^0-9]/}
    OCI_TMPFS_HOOK_CONFIG=$work/host.toml "$bin" run --bundle "$b" "spec-floor-$$" >/dev/null 2>&1 </dev/null
    e=${EPOCHREALTIME//[^0-9]/}
    echo $((e - s)) >>"$work/$1.us"
    if [ "$1" = fresh ] || [ "$1" = copy ]; then cp "$work/edited.json" "$b/config.json"; fi
}
arms=(floor edited copy fresh)
cp "$work/edited.json" "$b/config.json"
for _ in 1 2 3; do for a in "${arms[@]}"; do start "$a"; done; done # warm-up
for a in "${arms[@]}"; do : >"$work/$a.us"; done
for _ in $(seq "$rounds"); do for a in "${arms[@]}"; do start "$a"; done; done
median() { sort -n "$1" | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
# The ratio of each round's two starts, then their median: a round's arms
# run back to back, so what drifts over minutes (the other core's load, the
# page cache) cancels; the median of each arm is printed beside it.
paired() { # ARM BASE
    paste "$work/$1.us" "$work/$2.us" | awk '{printf "%.4f\n", $1 / $2}' | sort -n |
        awk '{a[NR]=$1} END {printf "%.3f", a[int((NR+1)/2)]}'
}
echo "runtime: $("$rt" --version | head -n1); floor built by $floor_cc; $rounds rounds, alternating; median start (us), median of the rounds' ratios"
for a in "${arms[@]}"; do
    base=floor
    [ "$a" = fresh ] && base=copy
    echo "$a: $(median "$work/$a.us") us ($(paired "$a" "$base") of $base)"
done
# No hook process: the execve's of one start of each wrapper arm.
for a in edited fresh; do
    [ "$a" = fresh ] && cp "$work/orig.json" "$b/config.json"
    OCI_TMPFS_HOOK_CONFIG=$work/host.toml strace -f -qq -e trace=execve -o "$work/$a.execve" \
        "$work/oci-tmpfs-runtime" run --bundle "$b" "spec-floor-$$" >/dev/null 2>&1 </dev/null || true
    echo "$a: execve: $(grep -o 'execve("[^"]*"' "$work/$a.execve" | sort | uniq -c | tr -s ' \n' ' ')"
    cp "$work/edited.json" "$b/config.json"
done
