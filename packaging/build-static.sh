#!/usr/bin/env bash
# Builds the static release binary that every way of installing ships
# (install.sh, packaging/deb/build.sh through it, deploy/build-image.sh) and
# prints its path on the last line of stdout; cargo's output goes to stderr.
#
#   packaging/build-static.sh [--dry-run]    (--dry-run: print the commands only)
#
# musl when its Rust target is there or rustup can add it, else glibc with
# crt-static. musl starts several hundred microseconds sooner on a virtual
# machine: glibc's start-up runs CPUID dozens of times, and each one exits to
# the hypervisor (docs/design.md#cpuid). The explicit --target keeps the
# static flag off build scripts and proc macros.
set -Eeuo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
dry=0
case "${1:-}" in
  --dry-run) dry=1 ;;
  "") ;;
  *) echo "build-static.sh: unknown argument $1 (usage: $0 [--dry-run])" >&2; exit 2 ;;
esac
command -v cargo >/dev/null || { echo "build-static.sh: cargo not found; install Rust (rustup), or give the installer a built binary (--binary PATH or OCI_TMPFS_HOOK_BINARY)" >&2; exit 1; }

host=$(rustc -vV | sed -n 's/^host: //p')
musl=${host%-gnu}-musl
target=$host
if [ "$musl" != "$host" ] && command -v rustup >/dev/null; then
  if rustup target list --installed 2>/dev/null | grep -qx "$musl"; then
    target=$musl
  elif [ "$dry" = 1 ]; then
    echo "+ rustup target add $musl" >&2
    target=$musl
  elif rustup target add "$musl" >&2; then
    target=$musl
  else
    echo "build-static.sh: rustup target add $musl failed: building glibc with crt-static (slower start, BENCHMARKS.md#start-up)" >&2
  fi
fi
cmd=(env RUSTFLAGS="${RUSTFLAGS:-} -C target-feature=+crt-static"
  cargo build --release --locked --target "$target" --manifest-path "$repo/Cargo.toml")
if [ "$dry" = 1 ]; then
  echo "+ ${cmd[*]}" >&2
else
  "${cmd[@]}" >&2
fi
echo "${CARGO_TARGET_DIR:-$repo/target}/$target/release/oci-tmpfs-hook"
