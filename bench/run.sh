#!/usr/bin/env bash
# What oci-tmpfs-hook costs. One command on a fresh clone, as root:
#
#   bench/run.sh [bench.py options, e.g. --runs 100 --runtimes crun]
#   OCI_TMPFS_BENCH_HOOK=PATH bench/run.sh ...   (that binary only, no builds)
#
# Builds the release binary, the static glibc one install.sh installs (and the
# static musl one when that Rust target is installed), describes the machine, then runs bench/bench.py, which prints
# Markdown tables. Needs runc, crun, busybox-static, GNU time and python3:
#   apt-get install --no-install-recommends runc crun busybox-static time python3
# CI runs it once (tests/run.sh: the installed binary, --runs 2) as a smoke test, no threshold:
# numbers depend on the machine and on whatever else runs on it.
set -Eeuo pipefail
cd "$(dirname "$0")/.."

if [[ ${1:-} == -h || ${1:-} == --help ]]; then
    sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'
    exec /usr/bin/python3 bench/bench.py --help
fi
[[ $(id -u) == 0 ]] || { echo "bench: run as root (it starts containers)" >&2; exit 1; }
for tool in runc crun busybox /usr/bin/time /usr/bin/python3 cargo; do
    command -v "$tool" >/dev/null || { echo "bench: $tool is missing (see the top of $0)" >&2; exit 1; }
done

if [[ -n ${OCI_TMPFS_BENCH_HOOK:-} ]]; then
    # One given binary, no builds (tests/run.sh's smoke run of the installed one).
    hooks=(--hook "static=$(realpath "$OCI_TMPFS_BENCH_HOOK")")
else
echo "bench: building the release binary" >&2
cargo build --release --locked --quiet
hooks=(--hook "gnu=target/release/oci-tmpfs-hook")
# What install.sh installs: glibc, statically linked.
host=$(rustc -vV | sed -n 's/^host: //p')
echo "bench: building the static glibc binary (as install.sh does)" >&2
RUSTFLAGS="${RUSTFLAGS:-} -C target-feature=+crt-static" cargo build --release --locked --quiet --target "$host"
hooks+=(--hook "static=target/$host/release/oci-tmpfs-hook")
musl=x86_64-unknown-linux-musl
if command -v rustup >/dev/null && rustup target list --installed 2>/dev/null | grep -qx "$musl"; then
    echo "bench: building the static $musl binary" >&2
    cargo build --release --locked --quiet --target "$musl"
    hooks+=(--hook "musl=target/$musl/release/oci-tmpfs-hook")
else
    echo "bench: no $musl Rust target (rustup target add $musl): measuring the glibc build only" >&2
fi
fi

# The floor of any wrapper: a static C program that only execs the runtime.
execwraps=()
for rt in runc crun; do
    out="target/bench/execwrap-$rt"
    mkdir -p target/bench
    cc -static -O2 -DREAL="\"$(command -v "$rt")\"" -o "$out" bench/execwrap.c
    execwraps+=(--execwrap "$rt=$PWD/$out")
done
cc -static -O2 -o target/bench/noophook bench/noophook.c
execwraps+=(--noop-hook "$PWD/target/bench/noophook")
cc -static -O2 -o target/bench/mounthook bench/mounthook.c
execwraps+=(--mount-hook "$PWD/target/bench/mounthook")

# crun refuses hybrid cgroups unless hugetlb is a v1 hierarchy (docs/design.md#test-machine), as in .ci/run.
if [[ -d /sys/fs/cgroup/unified ]] && ! mountpoint -q /sys/fs/cgroup/hugetlb; then
    echo "bench: mounting the hugetlb cgroup v1 hierarchy for crun" >&2
    mkdir -p /sys/fs/cgroup/hugetlb
    mount -t cgroup -o hugetlb cgroup /sys/fs/cgroup/hugetlb
fi

echo "## Machine"
echo
echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "- CPUs: $(nproc) ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'))"
echo "- RAM: $(awk '/MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo)"
echo "- kernel: $(uname -r); $(. /etc/os-release && echo "$PRETTY_NAME")"
echo "- runc: $(runc --version | head -1 | awk '{print $3}'); crun: $(crun --version | head -1 | awk '{print $3}')"
echo "- rustc: $(rustc --version | awk '{print $2}')"
echo "- load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "- command: bench/run.sh $*"
echo
echo "## Results"
echo
/usr/bin/python3 bench/bench.py "${hooks[@]}" "${execwraps[@]}" "$@"
echo
echo "Load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
