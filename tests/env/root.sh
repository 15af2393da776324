# Sourced by tests/env/sid.sh and tests/env/pkgroot.sh: what their Debian
# roots share. Each caller sets `me` (its name, for messages) first.

# The Debian mirror the host uses (deb.debian.org unless configured otherwise;
# OCI_TMPFS_SID_MIRROR overrides it).
mirror() {
  if [ -n "${OCI_TMPFS_SID_MIRROR:-}" ]; then echo "$OCI_TMPFS_SID_MIRROR"; return; fi
  local m
  m=$(grep -rhoE '(URIs:|deb) +https?://[^ ]+/debian/?( |$)' /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null \
      | grep -v security | head -n1 | awk '{print $2}') || true
  echo "${m:-http://deb.debian.org/debian}"
}

# The paths bound into a root at the same absolute path: this checkout, the
# cargo target dir, and the words of $1 (extra paths).
binds() {
  local repo target extra
  repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)
  echo "$repo"
  target=${CARGO_TARGET_DIR:-$repo/target}
  [ -d "$target" ] && echo "$(cd "$target" && pwd -P)"
  for extra in ${1:-}; do echo "$extra"; done
}

# In a private mount namespace, with the root already mounted at $1: a fresh
# /proc, /sys and /dev rbound, a 64 MiB tmpfs /dev/shm, a tmpfs /run, the
# binds (extra paths: $2), then pivot_root into it (a chroot would break
# prestart hooks: docs/design.md#test-machine). Mount extra things under
# $1 before calling it; exec the command after.
pivot_into() {
  local r=$1 p
  mount -t proc proc "$r/proc"
  mount --rbind /sys "$r/sys"
  mount --rbind /dev "$r/dev"
  mount -t tmpfs -o size=64m,nosuid,nodev,noexec,mode=1777 shm "$r/dev/shm"
  mount -t tmpfs -o mode=755,nosuid,nodev tmpfs "$r/run"
  while read -r p; do
    [ -e "$p" ] || continue
    mkdir -p "$r$p"
    mount --rbind "$p" "$r$p"
  done < <(binds "${2:-}" | awk '!seen[$0]++')
  mkdir -p "$r/.oldroot"
  cd "$r"
  pivot_root . .oldroot
  cd /
  umount -l /.oldroot
  rmdir /.oldroot 2>/dev/null || true
}

# Stops every process still in the mount namespace whose id is in the file
# $1, and every process for which the function named $2 (if any) says yes
# given its /proc/PID; $3 names the namespace in the message.
reap() {
  local ns pids p i also=${2:-} name=${3:-root}
  ns=$(cat "$1" 2>/dev/null) || return 0
  [ -n "$ns" ] || return 0
  for i in 1 2 3 4 5 6 7 8 9 10 11; do
    pids=()
    for p in /proc/[0-9]*; do
      if [ "$(readlink "$p/ns/mnt" 2>/dev/null)" = "$ns" ] || { [ -n "$also" ] && "$also" "$p" "$1"; }; then
        pids+=("${p#/proc/}")
      fi
    done
    [ ${#pids[@]} -eq 0 ] && return 0
    if [ "$i" = 1 ]; then echo "$me: stopping what was left running in the $name namespace: ${pids[*]}" >&2; fi
    if [ "$i" -lt 10 ]; then kill -TERM "${pids[@]}" 2>/dev/null || true; else kill -KILL "${pids[@]}" 2>/dev/null || true; fi
    sleep 0.5
  done
}
