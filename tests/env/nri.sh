#!/usr/bin/env bash
# Runs the NRI plugin's containerd suite (tests/nri.rs) against sid's
# containerd 2.1 (tests/env/sid.sh), as root:
#
#   tests/env/nri.sh [TEST-FILTER] [-- LIBTEST-ARGS...]
#
# Builds the binary and the suite on this host, installs the CRI client's
# wheels (tests/cri/requirements.txt, for sid's Python, which has no venv
# module) into a cached directory, then runs the suite's binary inside the
# sid environment with that directory on PYTHONPATH.
set -Eeuo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
cd "$here"
[ "$(id -u)" = 0 ] || { echo "nri.sh: run as root (the tests start containerd)" >&2; exit 1; }
sid_root=${OCI_TMPFS_SID_DIR:-/var/cache/oci-tmpfs-hook/sid}/root
tests/env/sid.sh build >/dev/null
pyver=$(chroot "$sid_root" python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
pylib=${OCI_TMPFS_HOOK_NRI_PYLIB:-/var/cache/oci-tmpfs-hook/nri-pylib-py$pyver}
if [ ! -f "$pylib/.complete" ]; then
  echo "nri.sh: installing the CRI client's wheels for Python $pyver into $pylib"
  rm -rf "$pylib"; mkdir -p "$pylib"
  pip3 install --quiet --disable-pip-version-check --no-input --target "$pylib" \
    --python-version "$pyver" --implementation cp --only-binary=:all: \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    -r tests/cri/requirements.txt
  touch "$pylib/.complete"
fi
cargo build --locked --quiet
bin=$(cargo test --locked --test nri --no-run --message-format=json 2>/dev/null \
  | python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == "nri": print(m["executable"])' | tail -n1)
[ -n "$bin" ] || { echo "nri.sh: building tests/nri.rs failed (cargo test --test nri --no-run)" >&2; exit 1; }
OCI_TMPFS_SID_BINDS="$pylib ${OCI_TMPFS_SID_BINDS:-}" \
OCI_TMPFS_ENV="OCI_TMPFS_HOOK_CRI_PYTHONPATH=$pylib" \
  exec tests/env/sid.sh run -- "$bin" --test-threads="${NRI_TEST_THREADS:-2}" "$@"
