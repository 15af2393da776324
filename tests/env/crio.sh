#!/usr/bin/env bash
# CRI-O 1.36.3 with conmon 2.2.1, built from their source, for the CRI-O
# suite (tests/runtimes/crio.rs). No registry these machines reach serves
# either, so the source comes as tarballs:
#
#   tests/env/crio.sh build   build them once (cached) and print the crio binary's path
#   tests/env/crio.sh path    print that path if it is built (exit 1 if not)
#   tests/env/crio.sh clean   remove the build
#
# The source: $OCI_TMPFS_CRIO_SRC (default: shared/cri-o beside this
# checkout, then shared/ inside it), holding cri-o-1.36.3.tar.xz,
# conmon-2.2.1.tar.xz and SHA256SUMS. Without it the script says so in one
# line and exits 3 (a user's clone: the other legs of tests/run.sh are
# unchanged).
# The build: both tarballs' checksums checked, unpacked under
# $OCI_TMPFS_CRIO_DIR (default /var/cache/oci-tmpfs-hook/crio-1.36.3), then
# bin/crio, bin/pinns and bin/conmon built offline (-mod=vendor, GOPROXY=off)
# with Debian sid's Go 1.26 inside the sid environment (tests/env/sid.sh; Go
# and the C libraries are in its package list). crio links the system SQLite
# (the `libsqlite3` tag): the tarball's vendored SQLite amalgamation is a
# stub. 4 to 5 minutes on 2 busy cores. A stamp with the tarballs'
# checksums marks a finished build. The binaries link sid's libraries, so
# they run inside the sid environment only. (`crio --version` says
# GitCommit unknown: the tarball has no git metadata.)
set -Eeuo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
me=$(basename "$0")
VERSION=1.36.3
CONMON_VERSION=2.2.1
TARBALL=cri-o-$VERSION.tar.xz
CONMON_TARBALL=conmon-$CONMON_VERSION.tar.xz
TAGS="containers_image_ostree_stub containers_image_openpgp seccomp exclude_graphdriver_btrfs libsqlite3"
DIR=${OCI_TMPFS_CRIO_DIR:-/var/cache/oci-tmpfs-hook/crio-$VERSION}
die() { echo "$me: $*" >&2; exit 1; }

source_dir() {
  local d
  for d in "${OCI_TMPFS_CRIO_SRC:-}" "$here/../shared/cri-o" "$here/shared/cri-o"; do
    [ -n "$d" ] && [ -f "$d/$TARBALL" ] && [ -f "$d/$CONMON_TARBALL" ] && { (cd "$d" && pwd); return 0; }
  done
  return 1
}

built() { [ -f "$DIR/stamp" ] && [ -x "$DIR/bin/crio" ] && [ -x "$DIR/bin/pinns" ] && [ -x "$DIR/bin/conmon" ]; }

# The SHA256SUMS line for tarball $2 in directory $1, checked against the file.
checked_sum() {
  local sum
  sum=$(awk -v f="$2" '$2 == f || $2 == "*" f { print $1 }' "$1/SHA256SUMS")
  [ -n "$sum" ] || die "step checksum: $1/SHA256SUMS has no line for $2"
  echo "$sum  $1/$2" | sha256sum --check --quiet - >/dev/null 2>&1 \
    || die "step checksum: $1/$2 does not match its SHA256SUMS line"
  echo "$sum"
}

build() {
  local src sum t0
  src=$(source_dir) || {
    echo "$me: no $TARBALL and $CONMON_TARBALL (shared/cri-o beside this checkout, or OCI_TMPFS_CRIO_SRC): the CRI-O suite cannot run here" >&2
    exit 3
  }
  sum=$(awk -v a="$TARBALL" -v b="$CONMON_TARBALL" '$2 == a || $2 == b || $2 == "*" a || $2 == "*" b' "$src/SHA256SUMS" | sort | sha256sum | cut -d' ' -f1)
  mkdir -p "$DIR"
  exec 9>"$DIR/lock"
  flock 9
  if built && [ "$(cat "$DIR/stamp")" = "$sum" ]; then echo "$DIR/bin/crio"; return 0; fi
  t0=$(date +%s)
  checked_sum "$src" "$TARBALL" >/dev/null
  checked_sum "$src" "$CONMON_TARBALL" >/dev/null
  rm -rf "$DIR/src" "$DIR/bin" "$DIR/stamp"
  mkdir -p "$DIR/src" "$DIR/bin"
  tar -C "$DIR/src" -xJf "$src/$TARBALL" || die "step unpack: tar -xJf $src/$TARBALL failed"
  tar -C "$DIR/src" -xJf "$src/$CONMON_TARBALL" || die "step unpack: tar -xJf $src/$CONMON_TARBALL failed"
  "$here/tests/env/sid.sh" build >/dev/null || die "step sid: tests/env/sid.sh build failed"
  echo "$me: building CRI-O $VERSION and conmon $CONMON_VERSION with Go 1.26 in the sid environment (log $DIR/build.log)" >&2
  # shellcheck disable=SC2016
  OCI_TMPFS_SID_BINDS="$DIR ${OCI_TMPFS_SID_BINDS:-}" "$here/tests/env/sid.sh" run -- bash -c '
    set -e; dir=$1 version=$2 conmon_version=$3 tags=$4
    export PATH=/usr/lib/go-1.26/bin:$PATH GOFLAGS=-mod=vendor GOPROXY=off GOTOOLCHAIN=local CGO_ENABLED=1 \
      GOCACHE="$dir/gocache" HOME=/root
    cd "$dir/src/cri-o-$version"
    go build -trimpath -tags "$tags" -o "$dir/bin/crio" ./cmd/crio
    make -C pinns
    cp bin/pinns "$dir/bin/pinns"
    cd "$dir/src/conmon-$conmon_version"
    make GIT_COMMIT="v$conmon_version"
    cp bin/conmon "$dir/bin/conmon"
  ' bash "$DIR" "$VERSION" "$CONMON_VERSION" "$TAGS" >"$DIR/build.log" 2>&1 \
    || die "step build failed: $(tail -n 1 "$DIR/build.log") (log $DIR/build.log)"
  OCI_TMPFS_SID_BINDS="$DIR ${OCI_TMPFS_SID_BINDS:-}" "$here/tests/env/sid.sh" run -- "$DIR/bin/crio" --version 2>/dev/null \
    | grep -qwF "$VERSION" \
    || die "step check: $DIR/bin/crio --version does not say $VERSION"
  rm -rf "$DIR/src" "$DIR/gocache"
  echo "$sum" >"$DIR/stamp"
  echo "$me: CRI-O $VERSION and conmon $CONMON_VERSION built in $(($(date +%s) - t0))s" >&2
  echo "$DIR/bin/crio"
}

case "${1:-}" in
  build) build ;;
  path) built && echo "$DIR/bin/crio" || exit 1 ;;
  clean) rm -rf "$DIR" ;;
  *) echo "usage: $me build | path | clean" >&2; exit 2 ;;
esac
