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
out=${CARGO_TARGET_DIR:-$repo/target}
flags="${RUSTFLAGS:-} -C target-feature=+crt-static"
build() { # RUSTFLAGS [cargo build arguments]
  local cmd=(env RUSTFLAGS="$1" cargo build --release --locked --target "$target" --manifest-path "$repo/Cargo.toml" "${@:2}")
  if [ "$dry" = 1 ]; then echo "+ ${cmd[*]}" >&2; else "${cmd[@]}" >&2; fi
}

# The start path's functions first, in the order a start runs them
# (docs/design.md#start-order): rustup's lld takes them by name from
# packaging/start-order.txt, which holds demangled names without crate hashes.
# A first link in target/start-order writes the link map; its mangled names
# that demangle to a listed one make the ordering file of the second. Without
# lld or c++filt, or for glibc, the link keeps the compiler's order.
gccld=$(rustc --print sysroot)/lib/rustlib/$host/bin/gcc-ld
if [ "$target" = "$musl" ] && [ -x "$gccld/ld.lld" ] && command -v c++filt >/dev/null; then
  probe=$out/start-order
  lld="$flags -C link-arg=-fuse-ld=lld -C link-arg=-B$gccld"
  build "$lld -C link-arg=-Wl,-Map=$probe/map.txt -C link-arg=-Wl,--no-demangle" --target-dir "$probe"
  if [ "$dry" = 1 ]; then
    order=$probe/order-HASH.txt
  else
    # The map's symbol lines (address, address, size, alignment, name).
    awk 'NF == 5 && $5 !~ /[(:]/ && $5 !~ /^\./ { print $5 }' "$probe/map.txt" | sort -u >"$probe/mangled.txt"
    "$repo/packaging/demangle.sh" <"$probe/mangled.txt" | paste - "$probe/mangled.txt" |
      awk -F '\t' 'NR == FNR { if ($0 !~ /^#/) rank[$0] = FNR; next } $1 in rank { print rank[$1] "\t" $2 }' \
        "$repo/packaging/start-order.txt" - | sort -n -k1,1 | cut -f2 >"$probe/order.txt"
    # Named by its content, so that cargo links again when it changes.
    order=$probe/order-$(sha256sum "$probe/order.txt" | cut -c1-16).txt
    mv "$probe/order.txt" "$order"
    echo "build-static.sh: $(wc -l <"$order") functions of the start path linked first ($order)" >&2
  fi
  build "$lld -C link-arg=-Wl,--symbol-ordering-file=$order -C link-arg=-Wl,--no-warn-symbol-ordering"
else
  echo "build-static.sh: no rustup lld or c++filt for $target: the start path's functions keep the compiler's order (a slower start, BENCHMARKS.md#exec-gap)" >&2
  build "$flags"
fi
echo "$out/$target/release/oci-tmpfs-hook"
