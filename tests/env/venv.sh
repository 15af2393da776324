#!/usr/bin/env bash
# A Python venv from PyPI: by default the CRI client's (tests/cri/cri.py);
# created once, cached under one directory, rebuilt when the requirements
# file or the Python changes. Idempotent and safe to run concurrently
# (flock). Prints the venv's python on stdout, nothing else.
#
#   tests/env/venv.sh                        # the CRI client's venv
#   tests/env/venv.sh REQUIREMENTS MODULE [PYTHON]
#                                            # another: MODULE must import; PYTHON
#                                            # (default python3 on PATH) makes it
#   OCI_TMPFS_HOOK_VENV_DIR=DIR              # cache directory [default: /var/cache/oci-tmpfs-hook/venv]
#
# The home suite's tools venv (Triton and numba, from
# tests/pytorch/tools-requirements.txt) is made with /usr/bin/python3, so
# that a container given the host's /usr runs it. Needs the venv module
# (Debian: python3-venv) and PyPI.
set -Eeuo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
req=${1:-$here/cri/requirements.txt}
module=${2:-cri_api.v1.api_pb2_grpc}
cache=${OCI_TMPFS_HOOK_VENV_DIR:-/var/cache/oci-tmpfs-hook/venv}
py=${3:-$(command -v python3)} || { echo "venv.sh: no python3 on PATH (apt-get install python3-venv)" >&2; exit 1; }
pyver=$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
# One venv per Python version (the sid environment has another Python) and
# per requirements file.
key="py$pyver-$(printf '%s\n' "$py" | cat - "$req" | sha256sum | cut -c1-12)"
dir="$cache/$key"
mkdir -p "$cache"
exec 9>"$cache/.lock"
flock 9
if [ -x "$dir/bin/python" ] && [ -f "$dir/.complete" ] && "$dir/bin/python" -c "import $module" 2>/dev/null; then
  echo "$dir/bin/python"
  exit 0
fi
echo "venv.sh: creating $dir" >&2
rm -rf "$dir"
"$py" -m venv "$dir" >&2 || { echo "venv.sh: python3 -m venv failed (apt-get install python3-venv)" >&2; exit 1; }
"$dir/bin/pip" install --quiet --disable-pip-version-check --no-input -r "$req" >&2 \
  || { echo "venv.sh: pip install -r $req failed" >&2; exit 1; }
"$dir/bin/python" -c "import $module" >&2
touch "$dir/.complete"
echo "$dir/bin/python"
