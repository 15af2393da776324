#!/usr/bin/env bash
# Builds and installs oci-tmpfs-hook and its example host config.
set -Eeuo pipefail

usage() {
  cat <<'USAGE'
Usage: ./install.sh [--prefix DIR] [--dry-run] [--uninstall] [--help]

Builds the release binary with cargo and installs:
  PREFIX/bin/oci-tmpfs-hook                       the hook
  /etc/oci-tmpfs-hook/config.toml                 example host config (kept if present)

  --prefix DIR   install prefix (default /usr/local)
  --dry-run      print what would be done, change nothing
  --uninstall    remove what install put there (a changed config is kept)
  DESTDIR=...    stage everything under DESTDIR (for packaging)
USAGE
}

prefix=/usr/local dry=0 uninstall=0
while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) prefix=${2:?--prefix needs a directory}; shift 2 ;;
    --prefix=*) prefix=${1#*=}; shift ;;
    --dry-run) dry=1; shift ;;
    --uninstall) uninstall=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "install.sh: unknown argument $1" >&2; usage >&2; exit 2 ;;
  esac
done

here=$(cd "$(dirname "$0")" && pwd)
dest=${DESTDIR:-}
bin="$dest$prefix/bin/oci-tmpfs-hook"
confdir="$dest/etc/oci-tmpfs-hook"

run() { if [ "$dry" = 1 ]; then echo "+ $*"; else "$@"; fi; }

if [ "$uninstall" = 1 ]; then
  run rm -f "$bin"
  if [ -f "$confdir/config.toml" ] && cmp -s "$confdir/config.toml" "$here/hooks/config.toml"; then
    run rm -f "$confdir/config.toml"
    run rmdir --ignore-fail-on-non-empty "$confdir"
  fi
  exit 0
fi

if [ -n "${OCI_TMPFS_HOOK_BINARY:-}" ]; then
  built=$OCI_TMPFS_HOOK_BINARY
else
  command -v cargo >/dev/null || { echo "install.sh: cargo not found; install Rust (rustup) or set OCI_TMPFS_HOOK_BINARY" >&2; exit 1; }
  run cargo build --release --locked --manifest-path "$here/Cargo.toml"
  built="$here/target/release/oci-tmpfs-hook"
fi
run install -D -m 0755 "$built" "$bin"
if [ -e "$confdir/config.toml" ]; then
  echo "keeping existing $confdir/config.toml"
else
  run install -D -m 0644 "$here/hooks/config.toml" "$confdir/config.toml"
fi
echo "installed $bin"
