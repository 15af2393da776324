#!/usr/bin/env bash
# A Debian root of its own for the package test (tests/host/deb.rs): `dpkg -i`,
# doctor, a runc container and `dpkg -r`/`-P` happen in there, so a host
# that already has the product (./install.sh wrote /etc/oci-tmpfs-hook) is
# neither refused nor touched.
#
#   tests/env/pkgroot.sh build                       build the root (idempotent, cached)
#   tests/env/pkgroot.sh run --layer DIR -- CMD ARGS  run CMD in the root, writes going to DIR
#   tests/env/pkgroot.sh path                        print the cached root's path (the overlay's lower)
#   tests/env/pkgroot.sh clean                       remove everything it created
#
# The root is `debootstrap --variant=minbase bookworm` plus runc, from the
# host's Debian mirror (as tests/env/sid.sh picks it), cached under
# $OCI_TMPFS_PKGROOT_DIR (default /var/cache/oci-tmpfs-hook/pkgroot) with a
# stamp of the package list. The cached root is never written: `run` mounts
# an overlay (lower: the root, upper: DIR/upper) so every test starts from
# the same root, and DIR/upper holds exactly what the test changed. Runs
# with the same DIR see each other's writes (dpkg -i, then doctor, ...).
# `run` works as sid.sh's does: a private mount namespace, a fresh /proc,
# /sys and /dev rbound, tmpfs /run and /dev/shm, the checkout, the cargo
# target dir and $OCI_TMPFS_PKGROOT_BINDS bound at the same paths, then
# pivot_root (a chroot breaks prestart hooks, docs/design.md#test-machine).
# When CMD ends, what is left in that namespace is stopped by pid.
set -Eeuo pipefail

BASE=${OCI_TMPFS_PKGROOT_DIR:-/var/cache/oci-tmpfs-hook/pkgroot}
ROOT=$BASE/root
STAMP=$BASE/stamp
SUITE=bookworm
PACKAGES="runc"

me=$(basename "$0")
# shellcheck source=tests/env/root.sh
. "$(dirname "$0")/root.sh"
die() { echo "$me: $*" >&2; exit 1; }


built() { [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$SUITE $PACKAGES" ] && [ -f "$ROOT/.debootstrap-done" ]; }

build() {
  # Boilerplate: the same prologue as tests/env/sid.sh's build (lock, the
  # built check, the mirror, debootstrap present); each builds its own root.
  mkdir -p "$BASE"
  exec 9>"$BASE/lock"
  flock 9
  if built; then return 0; fi
  local t0 m
  t0=$(date +%s)
  m=$(mirror)
  command -v debootstrap >/dev/null || die "step debootstrap: debootstrap is not installed (apt-get install debootstrap)"
  rm -rf --one-file-system "$ROOT" "$STAMP"
  echo "$me: debootstrap --variant=minbase --include=$PACKAGES $SUITE from $m (log $BASE/debootstrap.log)"
  debootstrap --variant=minbase --include="${PACKAGES// /,}" "$SUITE" "$ROOT" "$m" >"$BASE/debootstrap.log" 2>&1 \
    || die "step debootstrap: debootstrap $SUITE $ROOT $m failed: $(grep -E '^(E|W):' "$BASE/debootstrap.log" | tail -n1) (log $BASE/debootstrap.log)"
  # No daemons from maintainer scripts; the same mirror; no apt caches.
  printf '#!/bin/sh\nexit 101\n' >"$ROOT/usr/sbin/policy-rc.d"
  chmod 755 "$ROOT/usr/sbin/policy-rc.d"
  echo "deb $m $SUITE main" >"$ROOT/etc/apt/sources.list"
  rm -rf "$ROOT"/var/cache/apt/archives/*.deb
  touch "$ROOT/.debootstrap-done"
  echo "$SUITE $PACKAGES" >"$STAMP"
  echo "$me: $SUITE root ready in $(( $(date +%s) - t0 ))s, $(du -sh "$ROOT" 2>/dev/null | cut -f1) at $ROOT"
}

# Inside the private namespace: the overlay, the mounts, pivot_root, exec CMD.
inner() {
  local ns_file=$1 layer=$2; shift 2
  readlink /proc/self/ns/mnt >"$ns_file"
  local r=$layer/merged
  mount -t overlay overlay -o "lowerdir=$ROOT,upperdir=$layer/upper,workdir=$layer/work" "$r"
  pivot_into "$r" "${OCI_TMPFS_PKGROOT_BINDS:-}"
  exec env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
    DEBIAN_FRONTEND=noninteractive "$@"
}

run() {
  [ "$(id -u)" = 0 ] || die "step run: needs root"
  local layer=
  while [ $# -gt 0 ]; do
    case "$1" in
      --layer) layer=${2:?--layer needs a directory}; shift 2 ;;
      --) shift; break ;;
      *) break ;;
    esac
  done
  [ -n "$layer" ] || die "usage: $me run --layer DIR -- CMD [ARGS...]"
  [ $# -gt 0 ] || die "usage: $me run --layer DIR -- CMD [ARGS...]"
  build
  exec 9>&-
  mkdir -p "$layer/upper" "$layer/work" "$layer/merged"
  local ns_file status=0
  ns_file=$(mktemp "$BASE/ns.XXXXXX")
  unshare --mount --propagation private -- "$0" __inner "$ns_file" "$layer" "$@" || status=$?
  reap "$ns_file"
  rm -f "$ns_file"
  return "$status"
}

case "${1:-}" in
  build) build ;;
  run) shift; run "$@" ;;
  __inner) shift; inner "$@" ;;
  path) echo "$ROOT" ;;
  clean)
    [ -d "$BASE" ] || exit 0
    exec 9>"$BASE/lock"; flock 9
    rm -rf --one-file-system "$BASE"
    ;;
  *) echo "usage: $me build | run --layer DIR -- CMD [ARGS...] | path | clean" >&2; exit 2 ;;
esac
