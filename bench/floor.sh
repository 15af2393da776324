#!/usr/bin/env bash
# Builds the exec-only floor (bench/execwrap.c) for the runtime REAL at OUT,
# static, with musl-gcc: the C library the shipped binary is built on. A
# static glibc program runs CPUID dozens of times before main, each an exit
# to the hypervisor on a VM (docs/design.md#cpuid), which would lift the
# floor; without musl-gcc it builds with cc and warns. Prints the compiler.
# The floor of bench/spec_floor.sh and bench/exec_gap.py.
#
#   bench/floor.sh REAL OUT
set -Eeuo pipefail
real=${1:?usage: bench/floor.sh REAL OUT} out=${2:?usage: bench/floor.sh REAL OUT}
cc=musl-gcc
command -v musl-gcc >/dev/null || {
  cc=cc
  echo "floor.sh: no musl-gcc (apt-get install musl-tools): the floor is static glibc, slower to start on a VM" >&2
}
"$cc" -static -O2 -DREAL="\"$real\"" -o "$out" "$(dirname "$0")/execwrap.c"
echo "$cc"
