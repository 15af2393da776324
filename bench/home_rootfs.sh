#!/usr/bin/env bash
# Makes ROOTFS an image with a home for root, as debian:12 has it: debian:12's
# /etc/passwd (base-passwd: 18 entries, 839 bytes) and a /root of MODE (octal,
# default 755), so that root's HOME is /root whether it comes from
# process.env or from the passwd file. The one maker of that image for
# bench/callgrind.sh and bench.py's home section; it copies no busybox and
# writes no config.json (each caller has its own bundle).
#
#   bench/home_rootfs.sh ROOTFS [MODE]
set -Eeuo pipefail
[[ $# -ge 1 && $# -le 2 ]] || { echo "usage: bench/home_rootfs.sh ROOTFS [MODE]" >&2; exit 2; }
rootfs=$1 mode=${2:-755}
mkdir -p "$rootfs/etc"
mkdir -p -m "$mode" "$rootfs/root"
cat >"$rootfs/etc/passwd" <<'EOF'
root:x:0:0:root:/root:/bin/bash
daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin
bin:x:2:2:bin:/bin:/usr/sbin/nologin
sys:x:3:3:sys:/dev:/usr/sbin/nologin
sync:x:4:65534:sync:/bin:/bin/sync
games:x:5:60:games:/usr/games:/usr/sbin/nologin
man:x:6:12:man:/var/cache/man:/usr/sbin/nologin
lp:x:7:7:lp:/var/spool/lpd:/usr/sbin/nologin
mail:x:8:8:mail:/var/mail:/usr/sbin/nologin
news:x:9:9:news:/var/spool/news:/usr/sbin/nologin
uucp:x:10:10:uucp:/var/spool/uucp:/usr/sbin/nologin
proxy:x:13:13:proxy:/bin:/usr/sbin/nologin
www-data:x:33:33:www-data:/var/www:/usr/sbin/nologin
backup:x:34:34:backup:/var/backups:/usr/sbin/nologin
list:x:38:38:Mailing List Manager:/var/list:/usr/sbin/nologin
irc:x:39:39:ircd:/run/ircd:/usr/sbin/nologin
_apt:x:42:65534::/nonexistent:/usr/sbin/nologin
nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin
EOF
