#!/usr/bin/env bash
# containerd 2.3.4 (the first LTS line, NRI v0.12) built from its source, for
# the NRI suite's third containerd beside Debian's 1.6 and sid's 2.1
# (docs/nri.md#versions). No registry these machines reach serves it, so the
# source comes as a tarball:
#
#   tests/env/containerd.sh build   build it once (cached) and print the containerd binary's path
#   tests/env/containerd.sh path    print that path if it is built (exit 1 if not)
#   tests/env/containerd.sh clean   remove the build
#
# The source: $OCI_TMPFS_CONTAINERD_SRC (default: shared/containerd beside
# this checkout, then shared/ inside it), holding containerd-2.3.4.tar.xz and
# SHA256SUMS. Without it the script says so in one line and exits 3 (a user's
# clone: the other legs of tests/run.sh are unchanged).
# The build: the tarball's checksum checked, unpacked under
# $OCI_TMPFS_CONTAINERD_DIR (default /var/cache/oci-tmpfs-hook/containerd-2.3.4),
# then containerd, containerd-shim-runc-v2 and ctr built as containerd's
# Makefile builds them, static and offline (-mod=vendor, GOPROXY=off,
# CGO_ENABLED=0), with Debian sid's Go 1.26 inside the sid environment
# (tests/env/sid.sh; golang-1.26-go is in its package list): about 80 s on 2
# cores. A stamp with the tarball's checksum marks a finished build.
set -Eeuo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
me=$(basename "$0")
VERSION=2.3.4
COMMIT=db8809540e1a7a9da5d518876894933ff55692ab
TARBALL=containerd-$VERSION.tar.xz
DIR=${OCI_TMPFS_CONTAINERD_DIR:-/var/cache/oci-tmpfs-hook/containerd-$VERSION}
die() { echo "$me: $*" >&2; exit 1; }

source_dir() {
  local d
  for d in "${OCI_TMPFS_CONTAINERD_SRC:-}" "$here/../shared/containerd" "$here/shared/containerd"; do
    [ -n "$d" ] && [ -f "$d/$TARBALL" ] && { (cd "$d" && pwd); return 0; }
  done
  return 1
}

built() { [ -f "$DIR/stamp" ] && [ -x "$DIR/bin/containerd" ] && [ -x "$DIR/bin/containerd-shim-runc-v2" ]; }

build() {
  local src sum t0
  src=$(source_dir) || {
    echo "$me: no $TARBALL (shared/containerd beside this checkout, or OCI_TMPFS_CONTAINERD_SRC): the containerd $VERSION leg cannot run here" >&2
    exit 3
  }
  sum=$(awk -v f="$TARBALL" '$2 == f || $2 == "*" f { print $1 }' "$src/SHA256SUMS")
  [ -n "$sum" ] || die "step checksum: $src/SHA256SUMS has no line for $TARBALL"
  mkdir -p "$DIR"
  exec 9>"$DIR/lock"
  flock 9
  if built && [ "$(cat "$DIR/stamp")" = "$sum" ]; then echo "$DIR/bin/containerd"; return 0; fi
  t0=$(date +%s)
  echo "$sum  $src/$TARBALL" | sha256sum --check --quiet - >/dev/null 2>&1 \
    || die "step checksum: $src/$TARBALL does not match its SHA256SUMS line"
  rm -rf "$DIR/src" "$DIR/bin" "$DIR/stamp"
  mkdir -p "$DIR/src" "$DIR/bin"
  tar -C "$DIR/src" -xJf "$src/$TARBALL" || die "step unpack: tar -xJf $src/$TARBALL failed"
  "$here/tests/env/sid.sh" build >/dev/null || die "step sid: tests/env/sid.sh build failed"
  echo "$me: building containerd $VERSION with Go 1.26 in the sid environment (log $DIR/build.log)" >&2
  local tree=$DIR/src/containerd-$VERSION
  # shellcheck disable=SC2016
  OCI_TMPFS_SID_BINDS="$DIR ${OCI_TMPFS_SID_BINDS:-}" "$here/tests/env/sid.sh" run -- bash -c '
    set -e; cd "$1"
    export GOFLAGS=-mod=vendor GOPROXY=off GOTOOLCHAIN=local CGO_ENABLED=0 GOCACHE="$2/gocache" HOME=/root
    pkg=github.com/containerd/containerd/v2
    ld="-X $pkg/version.Version=v$3 -X $pkg/version.Revision=$4 -X $pkg/version.Package=$pkg"
    go=/usr/lib/go-1.26/bin/go
    $go build -tags urfave_cli_no_docs -ldflags "$ld" -o "$2/bin/containerd" ./cmd/containerd
    $go build -tags "urfave_cli_no_docs no_grpc" -ldflags "$ld" -o "$2/bin/containerd-shim-runc-v2" ./cmd/containerd-shim-runc-v2
    $go build -tags urfave_cli_no_docs -ldflags "$ld" -o "$2/bin/ctr" ./cmd/ctr
  ' bash "$tree" "$DIR" "$VERSION" "$COMMIT" >"$DIR/build.log" 2>&1 \
    || die "step go build failed: $(tail -n 1 "$DIR/build.log") (log $DIR/build.log)"
  "$DIR/bin/containerd" --version | grep -q " v$VERSION " \
    || die "step check: $DIR/bin/containerd --version does not say v$VERSION"
  rm -rf "$DIR/src" "$DIR/gocache"
  echo "$sum" >"$DIR/stamp"
  echo "$me: containerd $VERSION built in $(($(date +%s) - t0))s" >&2
  echo "$DIR/bin/containerd"
}

case "${1:-}" in
  build) build ;;
  path) built && echo "$DIR/bin/containerd" || exit 1 ;;
  clean) rm -rf "$DIR" ;;
  *) echo "usage: $me build | path | clean" >&2; exit 2 ;;
esac
