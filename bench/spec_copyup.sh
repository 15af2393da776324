#!/bin/bash
# bench/spec_copyup.sh: BENCHMARKS.md#spec-copyup. Needs the two release builds
# named below (before: f147294, after: this commit) and crun.
# The common image: root, /root holding .bashrc and .profile (0700), HOME
# from /etc/passwd, the default host config; crun 1.8.1 through the wrapper
# (spec mode), before (f147294) and after (this branch), alternating.
set -eu
AFTER=${AFTER:-$PWD/target/release/oci-tmpfs-hook}
BEFORE=${BEFORE:?BEFORE=path of the f147294 release binary}
B=${B:-/tmp/spec-copyup-bench}
rm -rf $B/b; mkdir -p $B/b/rootfs/{bin,proc,sys,dev,etc,tmp,root}
cp /bin/busybox $B/b/rootfs/bin/; ln -s busybox $B/b/rootfs/bin/true; ln -s busybox $B/b/rootfs/bin/sh
echo 'root:x:0:0:root:/root:/bin/sh' > $B/b/rootfs/etc/passwd
echo '# bashrc' > $B/b/rootfs/root/.bashrc; echo '# profile' > $B/b/rootfs/root/.profile; chmod 700 $B/b/rootfs/root
cd $B/b && runc spec && python3 -c "
import json;c=json.load(open('config.json'));c['process']['args']=['/bin/true'];c['process']['terminal']=False;c['root']['readonly']=True
json.dump(c,open('config.json','w'))"
cp config.json config.orig
for v in before after; do mkdir -p $B/$v; done
ln -sf $BEFORE $B/before/oci-tmpfs-runtime
ln -sf $AFTER $B/after/oci-tmpfs-runtime
printf 'runtime_path = "/usr/bin/crun"\n' > $B/host.toml
N=${N:-100}
for v in before after; do : > $B/$v.times; done
for i in $(seq $N); do for v in before after; do
  cp $B/b/config.orig $B/b/config.json
  s=$(date +%s%N); OCI_TMPFS_HOOK_CONFIG=$B/host.toml $B/$v/oci-tmpfs-runtime run --bundle $B/b spec36-bench-$v >/dev/null 2>&1 </dev/null; e=$(date +%s%N)
  echo $(( (e-s)/1000 )) >> $B/$v.times
done; done
for v in before after; do sort -n $B/$v.times | awk -v v=$v '{a[NR]=$1} END {printf "%s: n=%d p50=%d us p10=%d us p90=%d us\n", v, NR, a[int(NR*0.5)], a[int(NR*0.1)+1], a[int(NR*0.9)]}'; done
# The final config.json of each, and the execve's of one start.
for v in before after; do cp $B/b/config.orig $B/b/config.json
  OCI_TMPFS_HOOK_CONFIG=$B/host.toml strace -f -qq -e trace=execve -o $B/$v.execve $B/$v/oci-tmpfs-runtime run --bundle $B/b spec36-bench-$v >/dev/null 2>&1 </dev/null || true
  echo "$v: execve: $(grep -c 'execve(' $B/$v.execve) ($(grep -o 'execve("[^"]*"' $B/$v.execve | sort | uniq -c | tr '\n' ' '))"
  echo "$v: our hook in config.json: $(grep -c -- '"--stage"' $B/b/config.json || true); tmpcopyup: $(grep -c tmpcopyup $B/b/config.json || true)"
done
