#!/usr/bin/env bash
# What oci-tmpfs-hook costs. One command on a fresh clone, as root:
#
#   bench/run.sh [bench.py options, e.g. --runs 100 --runtimes crun]
#   OCI_TMPFS_BENCH_HOOK=PATH bench/run.sh ...   (that binary only, no builds)
#   OCI_TMPFS_BENCH_HOOK="A=PATH B=PATH" ...     (those, labelled, no builds)
#
# Builds the static binary install.sh installs (musl), the static and the
# dynamic glibc builds, and the C floors, describes the machine, then runs
# bench/bench.py, which prints Markdown tables. Needs runc, crun, busybox-static,
# GNU time and python3; musl-tools for C floors against musl too:
#   apt-get install --no-install-recommends runc crun busybox-static time python3 musl-tools
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

hooks=()
if [[ -n ${OCI_TMPFS_BENCH_HOOK:-} ]]; then
    # Given binaries, no builds: PATH (tests/run.sh's smoke run of the installed
    # one), or space-separated LABEL=PATH (experiments on variant builds).
    for h in $OCI_TMPFS_BENCH_HOOK; do
        if [[ $h == *=* ]]; then hooks+=(--hook "${h%%=*}=$(realpath "${h#*=}")"); else hooks+=(--hook "installed=$(realpath "$h")"); fi
    done
else
    # What install.sh installs (packaging/build-static.sh: musl when rustup has
    # or can add its target), and the two glibc builds beside it.
    echo "bench: building the static binary (as install.sh does)" >&2
    shipped=$(packaging/build-static.sh | tail -n 1)
    host=$(rustc -vV | sed -n 's/^host: //p')
    if [[ $shipped == */$host/* ]]; then
        hooks+=(--hook "glibc=$shipped")
    else
        hooks+=(--hook "musl=$shipped")
        echo "bench: building the static glibc binary" >&2
        RUSTFLAGS="${RUSTFLAGS:-} -C target-feature=+crt-static" cargo build --release --locked --quiet --target "$host"
        hooks+=(--hook "glibc=target/$host/release/oci-tmpfs-hook")
    fi
    echo "bench: building the dynamic glibc binary (cargo build --release)" >&2
    cargo build --release --locked --quiet
    hooks+=(--hook "dynamic=target/release/oci-tmpfs-hook")
fi

# The C floors, static, against each C library there is a compiler for (musl
# first, the first set is every section's floor): the exec-only wrapper, the
# no-op hook and the hook's mount sequence (bench/*.c).
floors=()
compilers=()
if command -v musl-gcc >/dev/null; then compilers+=("musl=musl-gcc"); fi
compilers+=("glibc=cc")
# musl-gcc sees no kernel headers (mounthook.c needs <linux/mount.h>): the
# uapi ones only, through a dir of links.
uapi=target/bench/uapi
mkdir -p "$uapi"
for d in /usr/include/linux /usr/include/asm-generic /usr/include/"$(gcc -print-multiarch)"/asm; do
    [[ -e $uapi/$(basename "$d") ]] || ln -s "$d" "$uapi/$(basename "$d")"
done
for c in "${compilers[@]}"; do
    libc=${c%%=*} cc=${c#*=} dir="target/bench/${c%%=*}"
    mkdir -p "$dir"
    if [[ $libc == musl ]]; then cc="$cc -idirafter $uapi"; fi
    for rt in runc crun; do
        $cc -static -O2 -DREAL="\"$(command -v "$rt")\"" -o "$dir/execwrap-$rt" bench/execwrap.c
    done
    $cc -static -O2 -o "$dir/noophook" bench/noophook.c
    $cc -static -O2 -o "$dir/mounthook" bench/mounthook.c
    floors+=(--floors "$libc=$PWD/$dir")
done
[[ ${#compilers[@]} -gt 1 ]] || echo "bench: no musl-gcc (apt-get install musl-tools): the C floors are glibc's only" >&2
cc -O2 -o target/bench/cpuid bench/cpuid.c

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
echo "- CPUID: $(target/bench/cpuid) µs per instruction (a VM exit under virtualization; glibc's start-up runs dozens: docs/design.md#cpuid)"
echo "- load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "- command: bench/run.sh $*"
echo
echo "## Results"
echo
/usr/bin/python3 bench/bench.py "${hooks[@]}" "${floors[@]}" "$@"
echo
echo "Load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
