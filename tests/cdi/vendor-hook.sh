#!/bin/sh
# A stand-in for a GPU vendor's OCI hook, run by tests/runtimes/cdi.rs from
# the CDI spec tests/cdi/example.json and from a hooks-dir file. It is the
# vendor's code, not ours: a shell script is fine here.
#
#   vendor-hook.sh NAME WAY ROOTFS   (the OCI state on stdin)
#
# ROOTFS "-": the bundle's rootfs, from the state's bundle and its
# config.json's root.path (the CRI case, where the path is containerd's).
#
# WAY host: at createRuntime, writes ROOTFS/tmp/vendor-NAME through the
#           runtime namespace's view of the rootfs.
# WAY ns:   at createRuntime, writes it from inside the container's mount
#           namespace (nsenter -t PID -m), the way nvidia-container-cli works.
# WAY cc:   at createContainer (already in the container's mount namespace),
#           writes it and mounts a tmpfs of its own on ROOTFS/run/example-hook,
#           as NVIDIA's CDI hooks do under /run/nvidia-ctk-hook.
# WAY ccw:  at createContainer, only writes it.
# A write that fails is reported on stderr only (the test then misses the
# file); the hook itself fails only when its own mount fails.
set -u
name=$1 way=$2 rootfs=$3
state=$(cat)
if [ "$rootfs" = - ]; then
  bundle=$(printf '%s' "$state" | sed -n 's/.*"bundle": *"\([^"]*\)".*/\1/p')
  rootfs=$(tr -d '\n' <"$bundle/config.json" | sed -n 's/.*"root": *{ *"path": *"\([^"]*\)".*/\1/p')
  case $rootfs in /*) ;; *) rootfs=$bundle/$rootfs ;; esac
fi
file=$rootfs/tmp/vendor-$name
case $way in
host)
  echo "$name" >"$file" || echo "vendor-hook $name: cannot write $file" >&2 ;;
ns)
  pid=$(printf '%s' "$state" | sed -n 's/.*"pid": *\([0-9][0-9]*\).*/\1/p')
  nsenter -t "$pid" -m sh -c 'echo "$1" >"$2"' sh "$name" "$file" \
    || echo "vendor-hook $name: cannot write $file in pid $pid's mount namespace" >&2 ;;
cc)
  echo "$name" >"$file" || echo "vendor-hook $name: cannot write $file" >&2
  mkdir -p "$rootfs/run/example-hook" 2>/dev/null
  mount -t tmpfs -o size=1m,mode=755 example-hook "$rootfs/run/example-hook" ;;
ccw)
  echo "$name" >"$file" || echo "vendor-hook $name: cannot write $file" >&2 ;;
*)
  echo "vendor-hook: unknown way $way" >&2; exit 2 ;;
esac
exit 0
