#!/usr/bin/env bash
# The newest engines a Debian host can have: a Debian sid root built with
# debootstrap, the engines installed inside it with apt, and a way to run a
# command against them (docs/design.md#test-machine).
#
#   tests/env/sid.sh build            build or update the sid root (idempotent, cached)
#   tests/env/sid.sh run -- CMD ARGS  run CMD inside it (builds first when needed)
#   tests/env/sid.sh versions         one line: the engine and torch versions inside
#   tests/env/sid.sh clean            remove everything it created
#
# Everything lives under one directory, $OCI_TMPFS_SID_DIR (default
# /var/cache/oci-tmpfs-hook/sid): the root, the logs, a lock and a stamp file
# holding the package list (a changed list updates the root). `run` works in
# a private mount namespace: the sid root bound on itself, a fresh /proc,
# /sys (with /sys/fs/cgroup) and /dev rbound, a tmpfs /run, a 64 MiB tmpfs
# /dev/shm, a fresh /tmp, this checkout and the cargo target dir bound at
# the same paths, then pivot_root into it (a chroot would break prestart hooks: the
# hook joins the container's mount namespace, whose root would be the real
# /). When CMD ends, every process left in that namespace (daemons, shims)
# is stopped by pid, and the namespace and its mounts go with it.
# $OCI_TMPFS_SID_BINDS (paths) are bound in at the same paths too;
# $OCI_TMPFS_SID_PATH_FIRST (a directory) is bound in and put first on the
# command's PATH (another containerd build, with its shim and ctr).
#
# Progress goes to stdout; a step that fails prints one line on stderr naming
# the step (details in the log it names) and exits 1: the newest-version
# suite never passes by skipping.
set -Eeuo pipefail

BASE=${OCI_TMPFS_SID_DIR:-/var/cache/oci-tmpfs-hook/sid}
ROOT=$BASE/root
STAMP=$BASE/stamp
SUITE=sid
# What the suites call (tests/*.rs): the engines; busybox for the test
# images; util-linux (unshare, nsenter, mount, su), passwd (useradd), uidmap,
# slirp4netns and passt (rootless Podman), python3-seccomp (hostile suite);
# python3-torch; python3-pip and python3-venv (the home suite: pip install
# --user, the tools venv); strace (which processes a start runs); Go 1.26
# (tests/env/containerd.sh builds containerd 2.3.4 with it); g++, python3-dev and libtorch-dev for torch.compile (Debian's
# python3-torch headers are dangling symlinks without libtorch-dev); make,
# pkg-config and the -dev packages of libseccomp, gpgme, SQLite and GLib
# (tests/env/crio.sh builds CRI-O and conmon).
PACKAGES="runc crun containerd docker.io docker-cli podman busybox-static python3-torch \
util-linux mount passwd uidmap slirp4netns passt python3-seccomp tar procps \
g++ python3-dev libtorch-dev ca-certificates python3-venv python3-pip strace golang-1.26-go \
make gcc pkg-config libseccomp-dev libgpgme-dev libsqlite3-dev libglib2.0-dev"
PACKAGES=$(echo $PACKAGES | tr ' ' '\n' | sort -u | tr '\n' ' ')
PACKAGES=${PACKAGES% }

me=$(basename "$0")
# shellcheck source=tests/env/root.sh
. "$(dirname "$0")/root.sh"
die() { echo "$me: $*" >&2; exit 1; }


# Runs "$@" inside ROOT with /proc, /sys, /dev mounted, in a private mount
# namespace (for apt and maintainer scripts); all mounts vanish with it.
in_root() {
  unshare --mount --propagation private -- bash -c '
    set -e; r=$1; shift
    mount -t proc proc "$r/proc"
    mount --rbind /sys "$r/sys"
    mount --rbind /dev "$r/dev"
    mount -t tmpfs -o mode=755 tmpfs "$r/run"
    exec chroot "$r" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
      DEBIAN_FRONTEND=noninteractive "$@"' bash "$ROOT" "$@"
}

APT_OPTS=(-o Acquire::Check-Valid-Until=false -o Dpkg::Use-Pty=0 -o APT::Install-Recommends=false)

built() { [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$PACKAGES" ] && [ -x "$ROOT/usr/bin/runc" ]; }

build() {
  # Boilerplate: the same prologue as tests/env/pkgroot.sh's build (lock, the
  # built check, the mirror, debootstrap present); each builds its own root.
  mkdir -p "$BASE"
  exec 9>"$BASE/lock"
  flock 9
  if built; then return 0; fi
  local t0 m
  t0=$(date +%s)
  m=$(mirror)
  command -v debootstrap >/dev/null || die "step debootstrap: debootstrap is not installed (apt-get install debootstrap)"
  if [ ! -f "$ROOT/.debootstrap-done" ]; then
    rm -rf "$ROOT"
    echo "$me: debootstrap --variant=minbase $SUITE from $m (log $BASE/debootstrap.log)"
    debootstrap --variant=minbase "$SUITE" "$ROOT" "$m" >"$BASE/debootstrap.log" 2>&1 \
      || die "step debootstrap: debootstrap $SUITE $ROOT $m failed: $(grep -E '^(E|W):' "$BASE/debootstrap.log" | tail -n1) (log $BASE/debootstrap.log)"
    touch "$ROOT/.debootstrap-done"
  fi
  # No daemons from maintainer scripts; the host's DNS; the same mirror.
  printf '#!/bin/sh\nexit 101\n' >"$ROOT/usr/sbin/policy-rc.d"
  chmod 755 "$ROOT/usr/sbin/policy-rc.d"
  cp -L /etc/resolv.conf "$ROOT/etc/resolv.conf" 2>/dev/null || true
  echo "deb $m $SUITE main" >"$ROOT/etc/apt/sources.list"
  echo "$me: apt-get install $PACKAGES (log $BASE/apt.log)"
  in_root apt-get "${APT_OPTS[@]}" update >"$BASE/apt.log" 2>&1 \
    || die "step apt-get update in the sid root failed: $(grep -E '^(E|W):' "$BASE/apt.log" | tail -n1) (log $BASE/apt.log)"
  # shellcheck disable=SC2086
  in_root apt-get "${APT_OPTS[@]}" -y install $PACKAGES >>"$BASE/apt.log" 2>&1 \
    || die "step apt-get install in the sid root failed: $(grep -E '^E:' "$BASE/apt.log" | tail -n1) (log $BASE/apt.log)"
  in_root apt-get clean >>"$BASE/apt.log" 2>&1 || true
  echo "$PACKAGES" >"$STAMP"
  echo "$me: sid root ready in $(( $(date +%s) - t0 ))s, $(du -sh "$ROOT" 2>/dev/null | cut -f1) at $ROOT"
}

# Inside the private namespace: the mounts, pivot_root, exec CMD.
inner() {
  local ns_file=$1 tmp=$2; shift 2
  readlink /proc/self/ns/mnt >"$ns_file"
  mount --bind "$ROOT" "$ROOT"
  mount --bind "$tmp" "$ROOT/tmp"
  # The host's CA bundle: what it trusts (a proxy's CA included) reaches pip
  # inside too (the CRI client's venv is made there from PyPI).
  local ca=/etc/ssl/certs/ca-certificates.crt
  if [ -f "$ca" ] && [ -f "$ROOT$ca" ]; then mount --bind "$ca" "$ROOT$ca"; fi
  pivot_into "$ROOT" "${OCI_TMPFS_SID_BINDS:-} ${OCI_TMPFS_SID_PATH_FIRST:-}"
  exec env -i PATH="${OCI_TMPFS_SID_PATH_FIRST:+$OCI_TMPFS_SID_PATH_FIRST:}/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
    HOME=/root LANG=C.UTF-8 \
    OCI_TMPFS_SID_RUN="$(basename "$ns_file")" \
    ${RUST_BACKTRACE:+RUST_BACKTRACE=$RUST_BACKTRACE} ${OCI_TMPFS_ENV:-} "$@"
}

# What `reap` stops besides the run's namespace: a process of this run whose
# / is the sid root (rootless Podman's pause process has namespaces of its
# own; "of this run": its environment carries this run's OCI_TMPFS_SID_RUN,
# so concurrent runs never stop each other's).
of_this_run() {
  [ "$(awk '$5 == "/" { print $4; exit }' "$1/mountinfo" 2>/dev/null)" = "$ROOT" ] \
    && tr '\0' '\n' <"$1/environ" 2>/dev/null | grep -qxF "OCI_TMPFS_SID_RUN=$(basename "$2")"
}

run() {
  [ "$(id -u)" = 0 ] || die "step run: needs root"
  build
  exec 9>&-
  local ns_file tmp status=0
  ns_file=$(mktemp "$BASE/ns.XXXXXX")
  # A /tmp of its own per run (rootless Podman keeps state in /tmp/*-run-UID,
  # which must not mix with the host's older Podman).
  tmp=$(mktemp -d "$BASE/tmp.XXXXXX")
  chmod 1777 "$tmp"
  unshare --mount --propagation private -- "$0" __inner "$ns_file" "$tmp" "$@" || status=$?
  reap "$ns_file" of_this_run sid
  rm -rf --one-file-system "$ns_file" "$tmp"
  return "$status"
}

versions() {
  build >/dev/null
  exec 9>&-
  in_root sh -s <"$(dirname "$0")/versions.sh"
}

case "${1:-}" in
  build) build ;;
  run)
    shift
    [ "${1:-}" = -- ] && shift
    [ $# -gt 0 ] || die "usage: $me run -- CMD [ARGS...]"
    run "$@"
    ;;
  __inner) shift; inner "$@" ;;
  versions) versions ;;
  clean)
    [ -d "$BASE" ] || exit 0
    exec 9>"$BASE/lock"; flock 9
    rm -rf --one-file-system "$BASE"
    ;;
  *) echo "usage: $me build | run -- CMD [ARGS...] | versions | clean" >&2; exit 2 ;;
esac
