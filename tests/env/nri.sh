#!/usr/bin/env bash
# Runs the NRI plugin's containerd suite (tests/nri/, the `nri` test binary) against sid's
# containerd 2.1 (tests/env/sid.sh), as root:
#
#   tests/env/nri.sh [TEST-FILTER] [LIBTEST-ARGS...]
#   tests/env/nri.sh bench --ignored --nocapture     the bench (BENCHMARKS.md)
#   OCI_TMPFS_HOOK_NRI_CONTAINERD=DIR/containerd tests/env/nri.sh fail_closed --ignored
#                                                    the validator's case: a containerd 2.2+
#                                                    under this directory (docs/nri.md#fail-closed)
#
# Builds the binary, the static release binary (the node image's, case 11;
# OCI_TMPFS_HOOK_NRI_BIN names one instead) and the suite on this host, installs the CRI client's
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
  # pip of the CRI client's venv (tests/env/venv.sh), for sid's Python's wheels.
  pip="$(dirname "$(tests/env/venv.sh)")/pip"
  "$pip" install --quiet --disable-pip-version-check --no-input --target "$pylib" \
    --python-version "$pyver" --implementation cp --only-binary=:all: \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    -r tests/cri/requirements.txt
  touch "$pylib/.complete"
fi
cargo build --locked --quiet
# The other vendors' plugin of tests/nri/boot.rs.
cargo build --locked --quiet --example nri_mount
# The static release binary: the node image's (case 11) and the bench's plugin.
if [ -z "${OCI_TMPFS_HOOK_NRI_BIN:-}" ]; then
  OCI_TMPFS_HOOK_NRI_BIN=$(packaging/build-static.sh | tail -n 1) \
    || { echo "nri.sh: packaging/build-static.sh failed" >&2; exit 1; }
fi
bin=$(cargo test --locked --test nri --no-run --message-format=json 2>/dev/null \
  | python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == "nri": print(m["executable"])' | tail -n1)
[ -n "$bin" ] || { echo "nri.sh: building tests/nri/ failed (cargo test --test nri --no-run)" >&2; exit 1; }
# Another containerd (tests/env/containerd.sh's 2.3.4): its directory first
# on PATH inside (tests/env/sid.sh), so that its shim and ctr go with it.
if [ -n "${OCI_TMPFS_HOOK_NRI_CONTAINERD:-}" ]; then
  export OCI_TMPFS_SID_PATH_FIRST
  OCI_TMPFS_SID_PATH_FIRST=$(dirname "$OCI_TMPFS_HOOK_NRI_CONTAINERD")
  echo "nri.sh: containerd $("$OCI_TMPFS_HOOK_NRI_CONTAINERD" --version | awk '{print $3}') from $OCI_TMPFS_SID_PATH_FIRST"
fi
OCI_TMPFS_SID_BINDS="$pylib ${OCI_TMPFS_SID_BINDS:-}" \
OCI_TMPFS_ENV="OCI_TMPFS_HOOK_CRI_PYTHONPATH=$pylib OCI_TMPFS_HOOK_NRI_BIN=$OCI_TMPFS_HOOK_NRI_BIN ${OCI_TMPFS_HOOK_NRI_CONTAINERD:+OCI_TMPFS_HOOK_NRI_CONTAINERD=$OCI_TMPFS_HOOK_NRI_CONTAINERD} ${NRI_BENCH_ROUNDS:+NRI_BENCH_ROUNDS=$NRI_BENCH_ROUNDS} ${NRI_BENCH_PODS:+NRI_BENCH_PODS=$NRI_BENCH_PODS} ${NRI_BURST_PODS:+NRI_BURST_PODS=$NRI_BURST_PODS} ${NRI_BURST_ROUNDS:+NRI_BURST_ROUNDS=$NRI_BURST_ROUNDS} ${NRI_BURST_RUNTIME:+NRI_BURST_RUNTIME=$NRI_BURST_RUNTIME} ${NRI_BURST_ARMS:+NRI_BURST_ARMS=$NRI_BURST_ARMS} ${NRI_BURST_MIX:+NRI_BURST_MIX=$NRI_BURST_MIX} ${NRI_BURST_NODE_TMP:+NRI_BURST_NODE_TMP=$NRI_BURST_NODE_TMP} ${NRI_BURST_CACHES+NRI_BURST_CACHES=$NRI_BURST_CACHES}" \
  exec tests/env/sid.sh run -- "$bin" --test-threads="${NRI_TEST_THREADS:-2}" "$@"
