#!/usr/bin/env bash
# The Python venv holding `kubernetes-validate` (the Kubernetes API schemas,
# offline) for tests/host/manifests.rs: created once from PyPI, cached, rebuilt
# when tests/env/kubernetes-validate.txt or the Python changes. Safe to run
# concurrently (flock). Prints the venv's python on stdout, nothing else.
#
#   OCI_TMPFS_HOOK_VENV_DIR=DIR  # cache directory [default: /var/cache/oci-tmpfs-hook/venv]
set -Eeuo pipefail
here=$(cd "$(dirname "$0")" && pwd)
req="$here/kubernetes-validate.txt"
cache=${OCI_TMPFS_HOOK_VENV_DIR:-/var/cache/oci-tmpfs-hook/venv}
py=$(command -v python3) || { echo "kubernetes-validate.sh: no python3 on PATH (apt-get install python3-venv)" >&2; exit 1; }
pyver=$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
dir="$cache/kubernetes-validate-py$pyver-$(sha256sum "$req" | cut -c1-12)"
# Boilerplate: the steps of tests/env/venv.sh, kept apart because this
# venv's cache key (the directory name) is its own.
mkdir -p "$cache"
exec 9>"$cache/.lock"
flock 9
if [ -x "$dir/bin/python" ] && [ -f "$dir/.complete" ]; then
  echo "$dir/bin/python"
  exit 0
fi
echo "kubernetes-validate.sh: creating $dir" >&2
rm -rf "$dir"
"$py" -m venv "$dir" >&2 || { echo "kubernetes-validate.sh: python3 -m venv failed (apt-get install python3-venv)" >&2; exit 1; }
"$dir/bin/pip" install --quiet --disable-pip-version-check --no-input -r "$req" >&2 \
  || { echo "kubernetes-validate.sh: pip install -r $req failed" >&2; exit 1; }
"$dir/bin/python" -c 'import kubernetes_validate' >&2
touch "$dir/.complete"
echo "$dir/bin/python"
