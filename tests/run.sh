#!/usr/bin/env bash
# The test command: as root, on Debian/Ubuntu. Installs what the tests run
# (runc, crun, busybox-static; podman, containerd and docker.io for the
# engine tests; python3-seccomp, uidmap, slirp4netns for the hostile suite;
# python3-torch for the PyTorch end-to-end tests; python3-venv for the CRI
# client's venv) when missing, applies the one machine fix they
# need (DESIGN.md §4: crun wants hugetlb as a cgroup v1 hierarchy on hybrid
# cgroup hosts), then runs the whole suite with real containers.
set -Eeuo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "tests/run.sh: run as root (the tests start real containers)" >&2; exit 1; }

need=()
for pkg in runc crun busybox-static containerd docker.io podman python3-seccomp util-linux uidmap slirp4netns python3-torch python3-venv; do
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
cargo test --locked "$@" 2>&1 | tee "$log" || status=$?
# One closing line over every test binary: "N passed, N failed".
awk '/^test result:/ { p += $4; f += $6 } END { printf "tests: %d passed, %d failed\n", p, f }' "$log"
exit "$status"
