#!/usr/bin/env bash
# Pods placed at once (BENCHMARKS.md#nri-burst): a batch of pods, each one
# read-only container with a 256 MiB limit, created together through
# containerd 2.1's CRI in the sid environment, as root, in six arms on one
# containerd, alternating within each round: without the plugin, with it,
# the wrapper in hook mode (the same hook, no NRI), the wrapper in spec
# mode (no hook process), the same on an image whose /root is empty (no
# tmpcopyup), and the floor of any wrapper (a static C program that only
# execs the runtime). The runtime is runc, or NRI_BURST_RUNTIME=crun.
# containerd's state is on a tmpfs, as /run/containerd is. Per arm: p50 and p99 of RunPodSandbox,
# CreateContainer, StartContainer and each pod's total, the burst's wall
# time, the ratios to "without", and the rounds' own paired ratios.
# The bench is tests/nri/burst.rs's bench_nri_burst (ignored in the suite's
# default run); the plugin, wrapper and hook are the static release binary.
#
#   bench/burst.sh                                  10 and 20 pods, 3 rounds
#   NRI_BURST_PODS=10,20,50 NRI_BURST_ROUNDS=5 bench/burst.sh
#   NRI_BURST_PODS=20 NRI_BURST_RUNTIME=crun bench/burst.sh   the arms on crun
#   NRI_BURST_ARMS=spec,spec-empty bench/burst.sh   only these arms (and without)
#   NRI_BURST_MIX=1 NRI_BURST_ARMS=spec NRI_BURST_ROUNDS=100 bench/burst.sh
#                                                   the arms' pods in one burst each round
#   NRI_BURST_CACHES=.cache/torch,.triton ...      the host config's home_caches (empty: none)
#   NRI_BURST_NODE_TMP=tmpfs ...                    the node's /tmp on a tmpfs (runc's copy-up scratch)
#   NRI_BURST_NODE_TMP=alternate ...                a tmpfs there every other round, the two reported apart
#   NRI_BURST_PODS=4 NRI_BURST_ROUNDS=1 bench/burst.sh    the smoke run (fails only when
#                                                   a pod did not start or the plugin
#                                                   missed a CreateContainer)
set -Eeuo pipefail
cd "$(dirname "$0")/.."
exec tests/env/nri.sh bench_nri_burst --ignored --nocapture
