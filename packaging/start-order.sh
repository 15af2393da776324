#!/usr/bin/env bash
# Writes packaging/start-order.txt: the functions a wrapper start runs, which
# packaging/build-static.sh links first (docs/design.md#start-order). Run it
# as root after a change to the start path; a stale list only orders less.
#
#   packaging/start-order.sh
#
# It builds the musl binary with symbols, then counts, with callgrind in the
# sid environment (Debian 12's valgrind has no openat2), the wrapper's `run`
# up to its exec of the runtime on the common image (root, /root holding
# dotfiles, HOME from /etc/passwd, as bench/spec_floor.sh): first on a bundle
# it edited, then on a fresh config.json. The runtime is a no-op that answers
# `--version` as crun, so the plan takes the spec path (its tmpfs entries
# in config.json). The list keeps each function once, edited path first,
# demangled and without crate hashes, so that it survives a rebuild.
set -Eeuo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
[[ $(id -u) == 0 ]] || { echo "start-order.sh: run as root (the sid environment)" >&2; exit 1; }
command -v c++filt >/dev/null || { echo "start-order.sh: no c++filt (apt-get install binutils)" >&2; exit 1; }
host=$(rustc -vV | sed -n 's/^host: //p')
target=${host%-gnu}-musl
work=$repo/target/start-order-profile
rm -rf "$work/run" && mkdir -p "$work/run"
CARGO_PROFILE_RELEASE_STRIP=false RUSTFLAGS="-C target-feature=+crt-static" \
  cargo build --release --locked --target "$target" --target-dir "$work" >&2
run=$work/run
mkdir -p "$run/bin"
cp "$work/$target/release/oci-tmpfs-hook" "$run/bin/oci-tmpfs-hook"
ln -s oci-tmpfs-hook "$run/bin/oci-tmpfs-runtime"
printf '#!/bin/sh\n[ "$1" = --version ] && echo "crun version 1.8.1"\nexit 0\n' >"$run/noop"
chmod +x "$run/noop"
printf 'runtime_path = "%s"\n' "$run/noop" >"$run/host.toml"
b=$run/b
bench/common_image.sh "$b"
cp "$b/config.json" "$run/orig.json"
cat >"$run/count.sh" <<EOF
#!/bin/bash
set -e
command -v valgrind >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -q valgrind >/dev/null
export OCI_TMPFS_HOOK_CONFIG=$run/host.toml
cg() { valgrind -q --tool=callgrind --demangle=no --dump-before=execve --callgrind-out-file=$run/\$1.%p "$run/bin/oci-tmpfs-runtime" run --bundle $b x; }
cp $run/orig.json $b/config.json; cg warm # asks the runtime's version once
cp $run/orig.json $b/config.json; cg fresh
cg edited
EOF
chmod +x "$run/count.sh"
tests/env/sid.sh run -- "$run/count.sh" >/dev/null
grep -q '"oci-tmpfs-hook"' "$b/config.json" || { echo "start-order.sh: the wrapper did not write its edit" >&2; exit 1; }
# The dumps before each exec (`.1`): the edited bundle's functions, then
# those only the fresh config.json runs; each part sorted, so the list is
# the same from run to run (callgrind's own order is not).
names() { # DUMP...
  # callgrind marks a recursive call's function with `'N`.
  sed -n 's/^c\{0,1\}fn=([0-9]*) //p' "$@" | grep -v '^0x' | grep -v '^(' | sed "s/'[0-9]*\$//" |
    packaging/demangle.sh | LC_ALL=C sort -u
}
names "$run"/edited.*.1 >"$run/edited.txt"
names "$run"/fresh.*.1 | LC_ALL=C comm -23 - "$run/edited.txt" >"$run/fresh-only.txt"
{
  echo "# The functions a wrapper start runs (packaging/start-order.sh writes this"
  echo "# list; packaging/build-static.sh links them first, in this order:"
  echo "# docs/design.md#start-order): those of an edited bundle, then those only"
  echo "# a fresh config.json runs. Demangled, without crate hashes."
  cat "$run/edited.txt" "$run/fresh-only.txt"
} >packaging/start-order.txt
echo "start-order.sh: $(grep -vc '^#' packaging/start-order.txt) functions in packaging/start-order.txt" >&2
