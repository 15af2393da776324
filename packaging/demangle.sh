#!/usr/bin/env bash
# Symbol names on stdin, demangled on stdout, one per line, without what a
# rebuild changes: v0's crate hashes (`core[588c82a733c31a0f]`) and legacy
# mangling's hash suffix (`::h0123456789abcdef`). packaging/start-order.sh
# writes packaging/start-order.txt through it, and packaging/build-static.sh
# matches a link's symbols against that list through it, so the two read
# names the same way (docs/design.md#start-order). Needs c++filt (binutils).
set -Eeuo pipefail
c++filt | sed -E 's/\[[0-9a-f]+\]//g; s/::h[0-9a-f]{16}$//'
