#!/usr/bin/env bash
# The test command: as root, on Debian/Ubuntu. Installs what the tests run
# (runc, crun, busybox-static; podman, containerd and docker.io for the
# engine tests; python3-seccomp, uidmap, slirp4netns for the hostile suite;
# python3-torch for the PyTorch end-to-end tests; python3-pip for the home
# suite's pip install --user; python3-venv for the CRI client's and the
# tools venvs; debootstrap for the sid environment) when missing, applies the one machine fix they need
# (docs/design.md#test-machine: crun wants hugetlb as a cgroup v1 hierarchy on hybrid cgroup
# hosts), then runs the whole suite with real containers in two environments:
#
# 1. bookworm: the host's own engines (Debian 12), `cargo test` as always
#    (the `host` and `runtimes` test binaries);
# 2. sid: the NRI suite (tests/env/nri.sh), and the same `runtimes` binary
#    (every real-engine suite) inside a Debian sid root (tests/env/sid.sh,
#    built once and cached), against sid's engines.
#
# Each environment starts with a `== environment NAME: VERSIONS` line. The
# last line sums both: `tests: N passed, N failed`. Arguments go to
# `cargo test`; those after `--` also go to the sid test binaries (a test
# name filter, for example). OCI_TMPFS_ENVS=bookworm or =sid runs only one.
# `tests/run.sh crio` runs only the CRI-O suite (crio_suite, below), which
# the sid environment runs too.
set -Eeuo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "tests/run.sh: run as root (the tests start real containers)" >&2; exit 1; }
envs=${OCI_TMPFS_ENVS:-bookworm,sid}

# The CRI-O suite (tests/runtimes/crio.rs and crio_node.rs): CRI-O 1.36.3
# and conmon built from their source (tests/env/crio.sh, cached), the static
# binary (the node image's, crio_node.rs) built here, then the `runtimes`
# binary's `crio::` and `crio_node::` tests inside the sid root (crio links
# sid's libraries), --include-ignored, filtered by the arguments (default
# both). Exit 3: no source here (a user's clone), nothing run.
crio_suite() {
  local crio crio_status=0 bin crio_dir static t0 status=0
  t0=$(date +%s)
  crio=$(tests/env/crio.sh build) || crio_status=$?
  if [ "$crio_status" != 0 ]; then
    echo "tests/run.sh: step crio: tests/env/crio.sh build exited $crio_status" >&2
    return "$([ "$crio_status" = 3 ] && echo 3 || echo 1)"
  fi
  static=$(packaging/build-static.sh | tail -n 1) && [ -x "$static" ] \
    || { echo "tests/run.sh: step static: packaging/build-static.sh failed" >&2; return 1; }
  bin=$(cargo test --locked --test runtimes --no-run --message-format=json 2>/dev/null \
    | grep -o '"executable":"[^"]*/deps/runtimes-[0-9a-f]*"' | sed 's/^"executable":"//; s/"$//' | tail -n1)
  [ -n "$bin" ] || { echo "tests/run.sh: step build: cargo test --test runtimes --no-run failed" >&2; return 1; }
  crio_dir=$(dirname "$(dirname "$crio")")
  echo "== CRI-O ${crio_dir##*/crio-} in sid"
  if [ $# = 0 ]; then set -- crio:: crio_node::; fi
  OCI_TMPFS_SID_BINDS="$crio_dir" OCI_TMPFS_ENV="OCI_TMPFS_HOOK_CRIO=$crio OCI_TMPFS_HOOK_STATIC_BIN=$static" \
    tests/env/sid.sh run -- bash -c 'cd "$1"; shift; exec "$@"' bash "$PWD" "$bin" --include-ignored "$@" \
    || status=$?
  echo "== CRI-O suite took $(( $(date +%s) - t0 ))s"
  return "$status"
}

# `tests/run.sh crio [LIBTEST ARGS...]`: the CRI-O suite alone.
if [ "${1:-}" = crio ]; then
  shift
  tests/env/sid.sh build || { echo "tests/run.sh: step sid: tests/env/sid.sh build failed" >&2; exit 1; }
  crio_suite "$@"
  exit
fi

need=()
for pkg in runc crun busybox-static containerd docker.io podman python3-seccomp util-linux uidmap slirp4netns python3-torch python3-venv python3-pip debootstrap lintian file musl-tools strace; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || need+=("$pkg")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "tests/run.sh: installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

if [ -d /sys/fs/cgroup/unified ] && ! mountpoint -q /sys/fs/cgroup/hugetlb; then
  mkdir -p /sys/fs/cgroup/hugetlb
  mount -t cgroup -o hugetlb cgroup /sys/fs/cgroup/hugetlb
fi

# The CRI suite's client (tests/cri/cri.py) runs in a cached venv from PyPI.
cri_python=$(tests/env/venv.sh)
echo "tests/run.sh: CRI client: $cri_python"

log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
took() { echo "== $1 took $(( $(date +%s) - $2 ))s"; }

# The sid root is built (or found cached) first: the bookworm suites use
# sid's containerd binary too (tests/host/node.rs's containerd 2.1 case).
sid_built=0
if tests/env/sid.sh build; then sid_built=1; fi
# containerd 2.3.4 (the first LTS line, NRI v0.12), built once from its
# source inside sid (tests/env/containerd.sh): a third containerd for the
# NRI suite, the CRI cases, setup and the node installer. Without the
# source (a user's clone) one line says so; .ci/run requires it.
# (Without the sid root it cannot be built: the sid failure line covers it.)
ctd=""
ctd_leg=0
if [ "$sid_built" = 1 ]; then
  ctd_status=0
  ctd=$(tests/env/containerd.sh build) || ctd_status=$?
  if [ "$ctd_status" = 0 ]; then
    ctd_leg=1
  elif [ "$ctd_status" = 3 ] && [ -z "${OCI_TMPFS_REQUIRE_CONTAINERD_23:-}" ]; then
    echo "tests/run.sh: no containerd 2.3.4 source here (shared/containerd): its leg did not run" | tee -a "$log"
  else
    echo "test result: FAILED. 0 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out (containerd 2.3.4 build)" >>"$log"
    status=1
  fi
fi

if [[ ,$envs, == *,bookworm,* ]]; then
  t0=$(date +%s)
  echo "== environment bookworm: $(tests/env/versions.sh)"
  # --no-fail-fast: every suite runs and counts, as in sid.
  cargo test --locked --no-fail-fast "$@" 2>&1 | tee -a "$log" || status=$?
  # The node installer on containerd 2.3.4's default config (version 4),
  # with this host's runc.
  if [ "$ctd_leg" = 1 ]; then
    echo "== containerd 2.3.4: the node installer"
    OCI_TMPFS_HOOK_NRI_CONTAINERD=$ctd cargo test --locked --no-fail-fast --test host -- --ignored \
      node::node_image_installs_on_containerd_23_default_config 2>&1 | tee -a "$log" || status=$?
  fi
  # The wrapper's other executor: Docker and containerd through the wrapper
  # again with mode = "hook" (and Docker's HOME cases) (the CRI suite runs both modes in each node).
  echo "== environment bookworm, wrapper mode hook"
  OCI_TMPFS_TEST_WRAPPER_MODE=hook cargo test --locked --no-fail-fast --test runtimes -- \
    engines::docker_and_containerd home_engines::docker home_exec::docker 2>&1 | tee -a "$log" || status=$?
  # The start-up bench as a smoke test of the installed binary: 2 rounds, no
  # threshold (BENCHMARKS.md has the measured tables).
  echo "== bench smoke (bench/run.sh --sections startup --runs 2)"
  OCI_TMPFS_BENCH_HOOK=$(command -v oci-tmpfs-hook || echo /usr/local/bin/oci-tmpfs-hook) \
    bench/run.sh --sections startup --runs 2 2>&1 | tee -a "$log" | tail -n 4 || status=1
  # The GPU script's harness on the CPU, small, as a smoke test of the script
  # (docs/gpu.md#gpu-script): one row, every executor and user.
  echo "== gpu script smoke (tests/gpu/run.sh --cpu --rows share_memory)"
  OCI_TMPFS_HOOK="$PWD/target/debug/oci-tmpfs-hook" tests/gpu/run.sh --cpu --rows share_memory 2>&1 \
    | tee -a "$log" | tail -n 3 || status=1
  took "environment bookworm" "$t0"
fi

if [[ ,$envs, == *,sid,* ]]; then
  t0=$(date +%s)
  # The libtest arguments: whatever follows `--`.
  test_args=()
  seen=0
  for a in "$@"; do
    if [ $seen = 1 ]; then test_args+=("$a"); elif [ "$a" = -- ]; then seen=1; fi
  done
  # The sid root (built once, then cached); a failure is one line and fails the run.
  if [ "$sid_built" != 1 ]; then
    echo "tests/run.sh: the sid environment could not be built (see the line above): the sid suites did not run" | tee -a "$log"
    echo "test result: FAILED. 0 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out (sid environment)" >>"$log"
    status=1
  else
    echo "== environment sid: $(tests/env/sid.sh versions)"
    # The NRI plugin against sid's containerd 2.1 (the `nri` test binary is
    # left out of cargo test: it needs containerd 2.x).
    tests/env/nri.sh 2>&1 | tee -a "$log" || status=1
    # The same suite against containerd 2.3.4, and the validator's
    # fail-closed case that only 2.2+ can run.
    if [ "$ctd_leg" = 1 ]; then
      t1=$(date +%s)
      echo "== containerd 2.3.4: the NRI suite"
      OCI_TMPFS_HOOK_NRI_CONTAINERD=$ctd tests/env/nri.sh 2>&1 | tee -a "$log" || status=1
      OCI_TMPFS_HOOK_NRI_CONTAINERD=$ctd tests/env/nri.sh fail_closed --ignored 2>&1 | tee -a "$log" || status=1
      took "containerd 2.3.4 (NRI suite)" "$t1"
    fi
    # The NRI bench as a smoke test: a few rounds; generous bounds on the plugin's own
    # time and memory, none on the ratio (BENCHMARKS.md).
    NRI_BENCH_ROUNDS=2 NRI_BENCH_PODS=8 bench/nri.sh 2>&1 | tee -a "$log" || status=1
    # The burst bench as a smoke test: 4 pods at once, one round of each arm
    # (BENCHMARKS.md#nri-burst has the measured tables).
    NRI_BURST_PODS=4 NRI_BURST_ROUNDS=1 bench/burst.sh 2>&1 | tee -a "$log" || status=1
    # The `runtimes` binary built above, run inside sid.
    bin=$(cargo test --locked --test runtimes --no-run --message-format=json 2>/dev/null \
      | grep -o '"executable":"[^"]*/deps/runtimes-[0-9a-f]*"' | sed 's/^"executable":"//; s/"$//' | tail -n1)
    [ -n "$bin" ] || { echo "tests/run.sh: building the runtimes test binary failed (cargo test --test runtimes --no-run)" >&2; exit 1; }
    # Run from the project directory, as cargo runs test binaries.
    in_project='cd "$1"; shift; exec "$@"'
    echo "     Running sid ${bin##*/}"
    # --include-ignored: the cases that need sid's engines (cdi::cri_*,
    # containerd 1.7+) are ignored in bookworm and run here.
    # The package test's Debian root is bound in, for the Docker case's
    # Debian image, which only reads it (engines::docker_runs_the_common_image_*).
    OCI_TMPFS_SID_BINDS="$(tests/env/pkgroot.sh path)" \
      tests/env/sid.sh run -- bash -c "$in_project" bash "$PWD" "$bin" --include-ignored --skip crio:: --skip crio_node:: "${test_args[@]}" 2>&1 \
      | tee -a "$log" || status=1
    # The CRI cases (RuntimeClass and NRI) against containerd 2.3.4 too, its
    # directory first on PATH (its shim and ctr), and `setup containerd` on
    # its default config (version 4).
    if [ "$ctd_leg" = 1 ]; then
      echo "== containerd 2.3.4: the CRI cases and setup"
      OCI_TMPFS_SID_PATH_FIRST=$(dirname "$ctd") OCI_TMPFS_ENV="OCI_TMPFS_HOOK_NRI_CONTAINERD=$ctd" \
        tests/env/sid.sh run -- bash -c "$in_project" bash "$PWD" "$bin" --include-ignored \
        cri:: setup::real_containerd_loads_the_setup_config 2>&1 | tee -a "$log" || status=1
    fi
    # CRI-O 1.36.3, built once from its source: its own leg, as containerd
    # 2.3.4's. Without the source (a user's clone) one line says so; .ci/run
    # requires it.
    # A name filter after `--` runs it only when the filter names it.
    crio_status=0
    if [ ${#test_args[@]} = 0 ]; then
      crio_suite 2>&1 | tee -a "$log" || crio_status=${PIPESTATUS[0]}
    elif [[ " ${test_args[*]} " == *crio* ]]; then
      crio_suite "${test_args[@]}" 2>&1 | tee -a "$log" || crio_status=${PIPESTATUS[0]}
    fi
    if [ "$crio_status" = 3 ] && [ -z "${OCI_TMPFS_REQUIRE_CRIO:-}" ]; then
      echo "tests/run.sh: no CRI-O source here (shared/cri-o): its leg did not run" | tee -a "$log"
    elif [ "$crio_status" != 0 ]; then
      [ "$crio_status" = 3 ] && echo "test result: FAILED. 0 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out (CRI-O build)" >>"$log"
      status=1
    fi
    # Docker and containerd through the wrapper again with mode = "hook", as in bookworm.
    echo "== environment sid, wrapper mode hook"
    OCI_TMPFS_ENV=OCI_TMPFS_TEST_WRAPPER_MODE=hook tests/env/sid.sh run -- bash -c "$in_project" bash "$PWD" \
      "$bin" engines::docker_and_containerd home_engines::docker home_exec::docker 2>&1 | tee -a "$log" || status=1
  fi
  took "environment sid" "$t0"
fi

# One closing line over every test binary of both environments: "N passed, N failed".
# A suite that exited non-zero without a failure line (a test binary that
# aborted, or did not build) is said, not summed as passing.
awk -v status="$status" '/^test result:/ { p += $4; f += $6 }
  END { printf "tests: %d passed, %d failed%s\n", p, f,
        (status != 0 && f == 0) ? " (and a suite that exited non-zero with no failure counted: it aborted or did not build, see above)" : "" }' "$log"
exit "$status"
