#!/usr/bin/env bash
# Builds the node image (deploy/Containerfile: the static oci-tmpfs-hook
# binary on scratch) with `docker build` and saves it as a tarball; no
# registry involved.
#
#   deploy/build-image.sh OUT.tar [TAG]      TAG defaults to oci-tmpfs-hook:latest
#
# The binary is built as install.sh builds it (packaging/build-static.sh:
# static, musl when rustup can give its target, else glibc), unless
# OCI_TMPFS_HOOK_BINARY names one already built. Load the tarball with
# `docker load -i OUT.tar`, or into containerd's CRI namespace with
# `ctr -n k8s.io images import OUT.tar`. Needs a running Docker daemon.
set -Eeuo pipefail
me=deploy/build-image.sh
usage() { echo "usage: $me OUT.tar [TAG]" >&2; exit 2; }
[ $# -ge 1 ] && [ $# -le 2 ] || usage
case "$1" in -h|--help) usage ;; esac
out=$1
tag=${2:-oci-tmpfs-hook:latest}
here=$(cd "$(dirname "$0")/.." && pwd)
die() { echo "$me: $*" >&2; exit 1; }

if [ -n "${OCI_TMPFS_HOOK_BINARY:-}" ]; then
  built=$OCI_TMPFS_HOOK_BINARY
else
  built=$("$here/packaging/build-static.sh" | tail -n 1) || die "building the static binary failed (packaging/build-static.sh, above)"
fi
[ -x "$built" ] || die "$built is not an executable"
# scratch has no loader: refuse a dynamic binary rather than ship one that cannot start.
if command -v file >/dev/null && file -L "$built" | grep -q 'dynamically linked'; then
  die "$built is dynamically linked; the image is FROM scratch (build it static)"
fi
command -v docker >/dev/null || die "docker not found (apt-get install docker.io)"
docker info >/dev/null 2>&1 || die "the Docker daemon is not reachable (systemctl start docker)"

ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
install -m 0755 "$built" "$ctx/oci-tmpfs-hook"
docker build --quiet -f "$here/deploy/Containerfile" -t "$tag" "$ctx" >&2 || die "docker build -t $tag failed"
mkdir -p "$(dirname "$out")"
docker save -o "$out" "$tag" || die "docker save $tag -o $out failed"
echo "$me: $tag saved to $out ($(du -h "$out" | cut -f1))"
