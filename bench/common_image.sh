#!/usr/bin/env bash
# The common image as a bundle: root, /root (0700) holding .bashrc and
# .profile, HOME from /etc/passwd; `runc spec`'s defaults with a read-only
# root, running busybox `true`. The bundle of bench/spec_floor.sh,
# bench/exec_gap.py and packaging/start-order.sh.
#
#   bench/common_image.sh DIR    (DIR/config.json, DIR/rootfs)
set -Eeuo pipefail
b=${1:?usage: bench/common_image.sh DIR}
mkdir -p "$b"/rootfs/{bin,proc,sys,dev,etc,tmp,root}
cp "$(command -v busybox)" "$b/rootfs/bin/"
ln -s busybox "$b/rootfs/bin/true"
echo 'root:x:0:0:root:/root:/bin/sh' >"$b/rootfs/etc/passwd"
echo '# bashrc' >"$b/rootfs/root/.bashrc"
echo '# profile' >"$b/rootfs/root/.profile"
chmod 700 "$b/rootfs/root"
(cd "$b" && runc spec)
python3 - "$b/config.json" <<'PY'
import json, sys
p = sys.argv[1]
c = json.load(open(p))
c["process"].update(args=["/bin/true"], terminal=False)
c["root"]["readonly"] = True
json.dump(c, open(p, "w"))
PY
