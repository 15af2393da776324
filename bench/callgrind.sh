#!/usr/bin/env bash
# Instruction counts (valgrind --tool=callgrind): repeatable on a noisy
# machine, unlike wall time. As root, after bench/run.sh built the binaries:
#
#   bench/callgrind.sh [BINARY]     (default: the static build install.sh installs)
#
# Counts, for one read-only busybox bundle (runc spec defaults, 64 MiB /dev/shm):
#   wrapper spec   `oci-tmpfs-runtime create`, mode spec, up to its exec of the runtime
#   wrapper hook   the same, mode hook (adds the hook entry)
#   hook prestart  `hook --stage prestart` against a container made by `runc create`:
#                  joins its namespace, mounts /tmp, grows /dev/shm
#   hook no-op     `hook --stage prestart` for a writable-root bundle (nothing to do)
# The wrapper's count stops at its exec of the runtime, so the runtime's own
# work is not counted. BINARY must have symbols (`--dump-before=execve`):
#   CARGO_PROFILE_RELEASE_STRIP=false RUSTFLAGS="-C target-feature=+crt-static" \
#     cargo build --release --target x86_64-unknown-linux-gnu --target-dir target/callgrind
# Needs a valgrind that knows openat2 (3.22+; Debian 12 has 3.19): in the sid
# environment, `tests/env/sid.sh run -- bench/callgrind.sh BINARY` after
# `apt-get install valgrind` there.
set -Eeuo pipefail
cd "$(dirname "$0")/.."
[[ $(id -u) == 0 ]] || { echo "callgrind: run as root" >&2; exit 1; }
command -v valgrind >/dev/null || { echo "callgrind: apt-get install valgrind" >&2; exit 1; }
if [[ $# -gt 0 ]]; then
    bin=$(realpath "$1")
else
    bin=$(realpath "target/$(rustc -vV | sed -n 's/^host: //p')/release/oci-tmpfs-hook")
fi
[[ -x $bin ]] || { echo "callgrind: $bin is missing (bench/run.sh builds it)" >&2; exit 1; }
work=$(mktemp -d /tmp/oci-tmpfs-callgrind.XXXXXX)
trap 'runc delete --force oth-cg >/dev/null 2>&1 || true; rm -rf "$work"' EXIT

mkdir -p "$work/b/rootfs/bin" "$work/b/rootfs/tmp" "$work/bin"
cp "$(command -v busybox)" "$work/b/rootfs/bin/busybox"
ln -s busybox "$work/b/rootfs/bin/sh"; ln -s busybox "$work/b/rootfs/bin/sleep"
runc spec --bundle "$work/b"
python3 - "$work/b/config.json" <<'PY'
import json, sys
p = sys.argv[1]; c = json.load(open(p))
c["process"]["terminal"] = False; c["process"]["args"] = ["sleep", "30"]
json.dump(c, open(p, "w"), indent="\t")
PY
cp "$work/b/config.json" "$work/pristine.json"
ln -s "$(command -v busybox)" "$work/bin/true"   # the "runtime" the wrapper execs
ln -s "$bin" "$work/bin/oci-tmpfs-runtime"

count() {  # label, then the command (stdin from $stdin)
    local label=$1; shift
    local out="$work/cg.out"
    local rc=0
    rm -f "$out"*
    # --dump-before=execve: the wrapper's count is written when it execs the
    # runtime (which then runs natively, uncounted); needs symbols.
    valgrind --tool=callgrind --callgrind-out-file="$out" --dump-before=execve "$@" \
        <"${stdin:-/dev/null}" >/dev/null 2>"$work/cg.err" || rc=$?
    [[ $rc == 0 ]] || { echo "callgrind: $label exited $rc:" >&2; grep -v '^==' "$work/cg.err" >&2; return 1; }
    local n
    n=$(cat "$out"* 2>/dev/null | sed -n 's/^summary: //p' | awk '{ s += $1 } END { if (NR) print s }')
    [[ -n $n ]] || { echo "callgrind: no count for $label:" >&2; cat "$work/cg.err" >&2; return 1; }
    printf '| %s | %s |\n' "$label" "$(printf "%'d" "$n")"
}

echo "| path | instructions |"
echo "|---|---|"
for mode in spec hook; do
    printf 'mode = "%s"\nruntime_path = "%s"\n' "$mode" "$work/bin/true" >"$work/$mode.toml"
    cp "$work/pristine.json" "$work/b/config.json"
    OCI_TMPFS_HOOK_CONFIG="$work/$mode.toml" count "wrapper $mode (create, up to the exec)" \
        "$work/bin/oci-tmpfs-runtime" create --bundle "$work/b" oth-cg-w || exit 1
    # The same bundle again: what the wrapper wrote is already in it.
    OCI_TMPFS_HOOK_CONFIG="$work/$mode.toml" count "wrapper $mode, the bundle it already edited" \
        "$work/bin/oci-tmpfs-runtime" create --bundle "$work/b" oth-cg-w || exit 1
done
cp "$work/pristine.json" "$work/b/config.json"
runc create --bundle "$work/b" oth-cg
pid=$(runc state oth-cg | python3 -c 'import json,sys; print(json.load(sys.stdin)["pid"])')
printf '{"ociVersion":"1.0.2","id":"oth-cg","status":"creating","pid":%s,"bundle":"%s"}' "$pid" "$work/b" >"$work/state.json"
# Under Valgrind the hook's setns(2) into the container's mount namespace
# leaves Valgrind's own files behind, and the hook then refuses: not countable.
stdin="$work/state.json" count "hook prestart (joins, mounts /tmp, grows /dev/shm)" "$bin" hook --stage prestart \
    || echo "| hook prestart (joins, mounts /tmp, grows /dev/shm) | not countable under Valgrind (setns) |"
runc delete --force oth-cg
python3 - "$work/b/config.json" <<'PY'
import json, sys
p = sys.argv[1]; c = json.load(open(p)); c["root"]["readonly"] = False
json.dump(c, open(p, "w"), indent="\t")
PY
stdin="$work/state.json" count "hook, writable root (nothing to do)" "$bin" hook --stage prestart
cp "$work/pristine.json" "$work/b/config.json"
count "explain (reads config.json and the host config, plans)" "$bin" explain --bundle "$work/b"
