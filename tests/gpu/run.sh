#!/usr/bin/env bash
# GPU workloads in read-only runc containers, without us and with each of our
# executors, as three users; prints one Markdown table (docs/gpu.md#gpu-script).
#
#   tests/gpu/run.sh [--cpu] [--python PY] [--runtime RUNC] [--rows R,..]
#                    [--executors none,hook,spec] [--users root,u1000,noentry]
#                    [--timeout S] [--jobs N] [--log FILE] [--prefix ID]
#
# Needs root, runc, a Python with torch (default /usr/bin/python3 if it
# imports torch, else python3 on PATH; a venv outside /root works) and our
# binary: $OCI_TMPFS_HOOK, else oci-tmpfs-hook on PATH. Without --cpu, an
# NVIDIA GPU (/dev/nvidia*) that torch sees; Triton and CuPy rows run when
# the Python imports them. --cpu is the dry run: the same bundles, executors
# and users, with the rows' CPU variants. No network. Exits 0 when every
# cell with us that is expected to pass passed (tests/gpu/harness.py says
# what is expected). Every container is deleted and every bundle removed,
# also on Ctrl-C and SIGTERM.
set -Eeuo pipefail
here=$(cd "$(dirname "$0")" && pwd)

usage() { sed -n '2,/^set -E/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
for a in "$@"; do
  case "$a" in -h|--help) usage; python3 "$here/harness.py" --help | sed -n '/^options:/,$p'; exit 0 ;; esac
done

[ "$(id -u)" = 0 ] || { echo "tests/gpu/run.sh: run as root (it starts runc containers)" >&2; exit 2; }
hook=${OCI_TMPFS_HOOK:-$(command -v oci-tmpfs-hook || true)}
if [ -z "$hook" ] || [ ! -x "$hook" ]; then
  echo "tests/gpu/run.sh: no oci-tmpfs-hook: set OCI_TMPFS_HOOK=/path/to/oci-tmpfs-hook or put it on PATH" >&2
  exit 2
fi
hook=$(realpath "$hook")
py=$(command -v python3) || { echo "tests/gpu/run.sh: no python3 for the harness" >&2; exit 2; }

work=$(mktemp -d "${TMPDIR:-/tmp}/oci-tmpfs-gpu.XXXXXX")
child=

# Deletes every container the harness started (it lists them in
# $work/containers) and removes the bundles, unless something is still
# mounted under them (then says so and leaves them).
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if [ -n "$child" ] && kill -0 "$child" 2>/dev/null; then
    kill -TERM "$child" 2>/dev/null || true
    wait "$child" 2>/dev/null || true
  fi
  if [ -f "$work/containers" ]; then
    local rt id
    rt=$(runtime_arg "$@")
    while read -r id; do
      "$rt" delete --force "$id" >/dev/null 2>&1 || true
    done <"$work/containers"
  fi
  if grep -qF " $work/" /proc/self/mountinfo; then
    echo "tests/gpu/run.sh: mounts are left under $work; not removing it:" >&2
    grep -F " $work/" /proc/self/mountinfo >&2
    exit 1
  fi
  rm -rf --one-file-system "$work"
  exit "$rc"
}

# The runtime the harness was told to use (for the trap's deletes).
runtime_arg() {
  local prev=
  for a in "$@"; do
    case "$a" in --runtime=*) echo "${a#--runtime=}"; return ;; esac
    if [ "$prev" = --runtime ]; then echo "$a"; return; fi
    prev=$a
  done
  command -v runc || echo runc
}

args=("$@")
trap 'cleanup "${args[@]}"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# In the background, so that a signal to this script reaches the trap at
# once (bash runs traps only after a foreground command ends); the trap
# then stops the harness, which deletes its containers itself.
"$py" "$here/harness.py" --workdir "$work" --hook "$hook" "$@" &
child=$!
wait "$child"
