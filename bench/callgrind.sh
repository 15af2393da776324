#!/usr/bin/env bash
# Instruction counts (valgrind --tool=callgrind): repeatable on a noisy
# machine, unlike wall time. As root, after bench/run.sh built the binaries:
#
#   bench/callgrind.sh [[LABEL=]BINARY ...]   (default: the static build install.sh installs)
#
# One column per BINARY (before/after builds side by side). Each path is
# counted on three read-only busybox bundles (runc spec defaults, 64 MiB
# /dev/shm), which differ only in where HOME comes from (docs/design.md#home-plan):
#   spec      `runc spec` as it is: no HOME in process.env, no /etc/passwd
#             (the bundle of the earlier tables: their rows are this one's)
#   env       HOME=/root in process.env, an /etc/passwd with root's entry
#             and /root in the image: no passwd read
#   passwd    the same image, no HOME in process.env: the executor reads
#             /etc/passwd for uid 0 (home /root) and plans again
# Paths:
#   wrapper spec   `oci-tmpfs-runtime create`, mode spec, up to its exec of
#                  the runtime (reads /etc/passwd on the host, as the hook would)
#   wrapper hook   the same, mode hook (adds the hook entry)
#   hook prestart  `hook --stage prestart` run by `runc run` (valgrind as the
#                  hook entry): joins the namespace, mounts /tmp (and /root
#                  in env and passwd), grows /dev/shm
#   hook no-op     `hook --stage prestart` for a writable-root bundle (nothing to do)
# The wrapper's count stops at its exec of the runtime, so the runtime's own
# work is not counted. BINARY must have symbols (`--dump-before=execve`):
#   CARGO_PROFILE_RELEASE_STRIP=false RUSTFLAGS="-C target-feature=+crt-static" \
#     cargo build --release --target x86_64-unknown-linux-gnu --target-dir target/callgrind
# Needs a valgrind that knows openat2 (3.22+; Debian 12 has 3.19): in the sid
# environment, `tests/env/sid.sh run -- bench/callgrind.sh BINARY` after
# `apt-get install valgrind` there. With strace installed, it also prints
# the system calls the last BINARY's hook (prestart) and wrapper (spec
# mode) make on etc/passwd in each bundle, and how many openat2, openat and
# read calls each makes in all. OCI_TMPFS_CG_ID names the containers
# (default oth-cg-PID).
set -Eeuo pipefail
cd "$(dirname "$0")/.."
[[ $(id -u) == 0 ]] || { echo "callgrind: run as root" >&2; exit 1; }
command -v valgrind >/dev/null || { echo "callgrind: apt-get install valgrind" >&2; exit 1; }
[[ $# -gt 0 ]] || set -- "instructions=target/$(rustc -vV | sed -n 's/^host: //p')/release/oci-tmpfs-hook"
labels=() bins=()
for arg in "$@"; do
    label=instructions path=$arg
    if [[ $arg == *=* ]]; then label=${arg%%=*} path=${arg#*=}; fi
    [[ -x $path ]] || { echo "callgrind: $path is missing (bench/run.sh builds it)" >&2; exit 1; }
    labels+=("$label") bins+=("$(realpath "$path")")
done
id=${OCI_TMPFS_CG_ID:-oth-cg-$$}
work=$(mktemp -d /tmp/oci-tmpfs-callgrind.XXXXXX)
trap 'runc delete --force "$id" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
bundles=(spec env passwd)
declare -A about=(
    [spec]="runc spec: no HOME, no /etc/passwd"
    [env]="HOME=/root in process.env"
    [passwd]="no HOME, /etc/passwd gives /root"
)

mkdir -p "$work/bin"
ln -s "$(command -v busybox)" "$work/bin/true"   # the "runtime" the wrapper execs
for b in "${bundles[@]}"; do
    d=$work/$b
    mkdir -p "$d/rootfs/bin" "$d/rootfs/tmp"
    cp "$(command -v busybox)" "$d/rootfs/bin/busybox"
    for a in sh sleep true; do ln -s busybox "$d/rootfs/bin/$a"; done
    if [[ $b != spec ]]; then
        bench/home_rootfs.sh "$d/rootfs"
    fi
    runc spec --bundle "$d"
    python3 - "$d/config.json" "$b" <<'PY'
import json, sys
p, b = sys.argv[1:]; c = json.load(open(p))
c["process"]["terminal"] = False; c["process"]["args"] = ["sleep", "30"]
if b == "env":
    c["process"]["env"].append("HOME=/root")
json.dump(c, open(p, "w"), indent="\t")
PY
    cp "$d/config.json" "$work/$b.json"
done

# hook_entry BUNDLE ARGV...: config.json for `runc run` of `true` with ARGV
# (a program in front of the hook) as its prestart hook.
hook_entry() {
    python3 - "$work/$1/config.json" "$work/$1.json" "${@:2}" <<'PY'
import json, sys
out, pristine, *argv = sys.argv[1:]; c = json.load(open(pristine))
c["process"]["args"] = ["true"]
c["hooks"] = {"prestart": [{"path": argv[0], "args": argv}]}
json.dump(c, open(out, "w"), indent="\t")
PY
}

declare -A n
count() {  # key, then the command (stdin from $stdin); sets n[key]
    local key=$1; shift
    local out="$work/cg.out"
    local rc=0
    rm -f "$out"*
    # --dump-before=execve: the wrapper's count is written when it execs the
    # runtime (which then runs natively, uncounted); needs symbols.
    valgrind --tool=callgrind --callgrind-out-file="$out" --dump-before=execve "$@" \
        <"${stdin:-/dev/null}" >/dev/null 2>"$work/cg.err" || rc=$?
    [[ $rc == 0 ]] || { echo "callgrind: $key exited $rc:" >&2; grep -v '^==' "$work/cg.err" >&2; return 1; }
    n[$key]=$(cat "$out"* 2>/dev/null | sed -n 's/^summary: //p' | awk '{ s += $1 } END { if (NR) print s }')
    [[ -n ${n[$key]} ]] || { echo "callgrind: no count for $key:" >&2; cat "$work/cg.err" >&2; return 1; }
}

# `runc run` with valgrind as the prestart hook: the hook joins the
# container's namespace before pivot_root, as it does in production (after
# `runc create` the container's /proc no longer shows the hook's /proc/self).
count_prestart() {  # key, binary, bundle
    local out="$work/cg.out"
    rm -f "$out"*
    hook_entry "$3" "$(command -v valgrind)" --tool=callgrind --callgrind-out-file="$out" "$2" hook --stage prestart
    runc run --bundle "$work/$3" "$id" </dev/null >/dev/null 2>"$work/cg.err" \
        || { echo "callgrind: runc run ($1) failed:" >&2; grep -v '==' "$work/cg.err" >&2; return 1; }
    n[$1]=$(cat "$out"* 2>/dev/null | sed -n 's/^summary: //p' | awk '{ s += $1 } END { if (NR) print s }')
    [[ -n ${n[$1]} ]] || { echo "callgrind: no count for $1" >&2; return 1; }
}

paths=(
    "wrapper spec (create, up to the exec)"
    "wrapper spec, the bundle it already edited"
    "wrapper hook (create, up to the exec)"
    "wrapper hook, the bundle it already edited"
    "hook prestart (runc run: joins, mounts, grows /dev/shm)"
    "hook, writable root (nothing to do)"
    "explain (reads config.json and the host config, plans)"
)
for i in "${!bins[@]}"; do
    bin=${bins[$i]} l=${labels[$i]}
    ln -sfn "$bin" "$work/bin/oci-tmpfs-runtime"
    for b in "${bundles[@]}"; do
        d=$work/$b
        k=0
        for mode in spec hook; do
            printf 'mode = "%s"\nruntime_path = "%s"\n' "$mode" "$work/bin/true" >"$work/$mode.toml"
            cp "$work/$b.json" "$d/config.json"
            OCI_TMPFS_HOOK_CONFIG="$work/$mode.toml" count "$l|$b|$((k++))" \
                "$work/bin/oci-tmpfs-runtime" create --bundle "$d" "$id-w"
            # The same bundle again: what the wrapper wrote is already in it.
            OCI_TMPFS_HOOK_CONFIG="$work/$mode.toml" count "$l|$b|$((k++))" \
                "$work/bin/oci-tmpfs-runtime" create --bundle "$d" "$id-w"
        done
        count_prestart "$l|$b|$((k++))" "$bin" "$b"
        python3 - "$d/config.json" "$work/$b.json" <<'PY'
import json, sys
out, pristine = sys.argv[1:]; c = json.load(open(pristine)); c["root"]["readonly"] = False
json.dump(c, open(out, "w"), indent="\t")
PY
        printf '{"ociVersion":"1.0.2","id":"%s","status":"creating","pid":%s,"bundle":"%s"}' \
            "$id" "$$" "$d" >"$work/state.json"
        stdin="$work/state.json" count "$l|$b|$((k++))" "$bin" hook --stage prestart
        cp "$work/$b.json" "$d/config.json"
        count "$l|$b|$((k++))" "$bin" explain --bundle "$d"
    done
done

header="| path | bundle |" rule="|---|---|"
for l in "${labels[@]}"; do header+=" $l |" rule+="---|"; done
echo "$header"
echo "$rule"
for k in "${!paths[@]}"; do
    for b in "${bundles[@]}"; do
        row="| ${paths[$k]} | $b: ${about[$b]} |"
        # Thousands grouped by hand: printf's %'d needs a locale that has them.
        for l in "${labels[@]}"; do row+=" $(sed ':a;s/\B[0-9]\{3\}\>/,&/;ta' <<<"${n[$l|$b|$k]}") |"; done
        echo "$row"
    done
done

command -v strace >/dev/null || exit 0
# The calls on etc/passwd: from its open to the close of each fd it gave.
on_passwd() {
    awk '
        { line = $0; sub(/^[0-9]+ +/, "", line) }
        line ~ /^open(at2?)?\(.*"[^"]*etc\/passwd"/ {
            print line
            if (match(line, /= [0-9]+$/)) fds[substr(line, RSTART + 2)] = 1
            next
        }
        match(line, /^[a-z0-9_]+\([0-9]+[,)]/) {
            fd = substr(line, RSTART, RLENGTH); sub(/^[a-z0-9_]+\(/, "", fd); sub(/[,)]$/, "", fd)
            if (fd in fds) { print line; if (line ~ /^close\(/) delete fds[fd] }
        }' "$1"
}
traced=openat2,openat,read,fstat,fstatfs,newfstatat,statx,close
echo
echo "System calls on etc/passwd (\`strace -f -e trace=$traced\`, ${labels[-1]}):"
for b in "${bundles[@]}"; do
    hook_entry "$b" "$(command -v strace)" -f -o "$work/hook.st" -e trace="$traced" -s 64 "${bins[-1]}" hook --stage prestart
    runc run --bundle "$work/$b" "$id" </dev/null >/dev/null 2>"$work/st.err" \
        || { echo "callgrind: runc run (strace, $b) failed:" >&2; cat "$work/st.err" >&2; exit 1; }
    printf 'mode = "spec"\nruntime_path = "%s"\n' "$work/bin/true" >"$work/spec.toml"
    cp "$work/$b.json" "$work/$b/config.json"
    ln -sfn "${bins[-1]}" "$work/bin/oci-tmpfs-runtime"
    # Up to its exec of the runtime: the lines before the second execve.
    OCI_TMPFS_HOOK_CONFIG="$work/spec.toml" strace -o "$work/wrapper.all" -e trace="$traced,execve" -s 64 \
        "$work/bin/oci-tmpfs-runtime" create --bundle "$work/$b" "$id-w" </dev/null >/dev/null
    awk '/^execve\(/ && seen++ { exit } { print }' "$work/wrapper.all" >"$work/wrapper.st"
    for who in hook wrapper; do
        total=$(grep -cE '^([0-9]+ +)?(openat2|openat|read)\(' "$work/$who.st" || true)
        if [[ $who == hook ]]; then what="hook prestart"; else what="wrapper spec, up to its exec"; fi
        echo
        echo "$b, $what: $total openat2/openat/read calls in all; on etc/passwd:"
        echo '```'
        on_passwd "$work/$who.st" | grep . || echo "(none)"
        echo '```'
    done
done
