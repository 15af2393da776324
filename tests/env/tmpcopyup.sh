#!/bin/bash
# What a runtime's tmpcopyup does with xattrs and with a copy that does not
# fit its tmpfs (docs/design.md#tmpcopyup), by two real containers:
#
#   tests/env/tmpcopyup.sh /usr/sbin/runc        # as root; busybox and python3 needed
#   tests/env/sid.sh run -- bash -c 'tests/env/tmpcopyup.sh /usr/bin/crun'
#
# A busybox bundle whose /d holds a file f, f and d given user.spec36 by
# setxattr: created (not started) with a tmpfs at /d (tmpcopyup, size=10m),
# the xattrs read back through /proc/PID/root. A second bundle whose /big
# holds two 1 MiB files under a tmpfs of size=1m: whether create fails.
set -u
rt=$1; name=$(basename "$rt"); base=/tmp/tmpcopyup-$name-$$
mkdir -p $base/rootfs/{bin,proc,sys,dev,d,big,tmp}
cp /bin/busybox $base/rootfs/bin/busybox 2>/dev/null || cp $(command -v busybox) $base/rootfs/bin/busybox
ln -s busybox $base/rootfs/bin/sh; ln -s busybox $base/rootfs/bin/sleep
echo hello > $base/rootfs/d/f
python3 -c "import os;os.setxattr('$base/rootfs/d/f','user.spec36',b'kept')"
python3 -c "import os;os.setxattr('$base/rootfs/d','user.spec36dir',b'kept')"
head -c 1048576 /dev/urandom > $base/rootfs/big/a; head -c 1048576 /dev/urandom > $base/rootfs/big/b
cd $base
$rt spec >/dev/null 2>&1 || runc spec
python3 - <<PY
import json;c=json.load(open('config.json'))
c['process']['args']=['/bin/sleep','100'];c['process']['terminal']=False
c['root']={'path':'rootfs','readonly':True}
c['mounts'].append({'destination':'/d','type':'tmpfs','source':'tmpfs','options':['tmpcopyup','mode=755','size=10m']})
json.dump(c,open('config.json','w'))
c2=dict(c);c2['mounts']=c['mounts'][:-1]+[{'destination':'/big','type':'tmpfs','source':'tmpfs','options':['tmpcopyup','mode=755','size=1m']}]
import os;os.makedirs('b2',exist_ok=True);json.dump(c2,open('b2/config.json','w'))
PY
cp -a rootfs b2/rootfs
echo "== $($rt --version | head -1)"
id=spec36-x-$$; $rt create --bundle $base $id </dev/null >/dev/null 2>$base/err; echo "create rc=$? $(tail -c 300 $base/err)"
pid=$($rt state $id | python3 -c 'import json,sys;print(json.load(sys.stdin)["pid"])')
python3 -c "
import os
for p in ['/proc/$pid/root/d/f','/proc/$pid/root/d']:
  try: print('xattr', p.split('/root', 1)[1], os.listxattr(p), os.getxattr(p, os.listxattr(p)[0]) if os.listxattr(p) else '')
  except Exception as e: print('xattr', p, 'error', e)
"
grep ' /d ' /proc/$pid/mountinfo
$rt delete -f $id
id=spec36-y-$$; $rt create --bundle $base/b2 $id </dev/null >/dev/null 2>$base/err; echo "create rc=$? $(tail -c 300 $base/err)"
if $rt state $id >/dev/null 2>&1; then pid=$($rt state $id | python3 -c 'import json,sys;print(json.load(sys.stdin)["pid"])'); ls -la /proc/$pid/root/big; grep ' /big ' /proc/$pid/mountinfo; $rt delete -f $id; fi
rm -rf $base
