#!/bin/sh
# One line: the OS and the engine, Python and PyTorch versions of the root it
# runs in (the host, or the sid root through `tests/env/sid.sh versions`).
v() { dpkg-query -W -f='${Version}' "$1" 2>/dev/null || echo none; }
first() { "$@" 2>/dev/null | head -n1; }
os=$(. /etc/os-release 2>/dev/null; echo "${PRETTY_NAME:-unknown}")
runc=$(first runc --version | sed 's/^runc version //')
crun=$(first crun --version | sed 's/^crun version //')
containerd=$(first /usr/bin/containerd --version | awk '{print $3}' | sed 's/^v//')
podman=$(first podman --version | awk '{print $3}')
docker=$(first /usr/sbin/dockerd --version | sed 's/^Docker version \([^,]*\),.*/\1/')
python=$(first /usr/bin/python3 -c 'import platform; print(platform.python_version())')
echo "$os ($(cat /etc/debian_version 2>/dev/null)): runc ${runc:-none}, crun ${crun:-none}, containerd ${containerd:-none}, podman ${podman:-none}, docker ${docker:-none}, python3 ${python:-none}, python3-torch $(v python3-torch), kernel $(uname -r)"
