#!/usr/bin/env bash
# What the NRI plugin adds (BENCHMARKS.md#nri-1000; the target: a median
# ratio of at most 1.01 against a start without the plugin): through
# containerd 2.1's CRI in the sid environment, as root,
#   - CRI CreateContainer+StartContainer with the plugin and without it, in
#     one alternating run (NRI_BENCH_ROUNDS pairs, default 30): the ratio;
#   - NRI_BENCH_PODS pods (default 1000) one after the other: the plugin's own
#     time per CreateContainer (p50, p99) and its RSS before, halfway and after;
#   - the same plugin without --metrics-address for a quarter as many pods.
# The bench is tests/nri/main.rs's bench_nri_latency_and_memory (ignored in
# the suite's default run); its plugin is the static release build.
#
#   bench/nri.sh                                   the full run
#   NRI_BENCH_ROUNDS=2 NRI_BENCH_PODS=8 bench/nri.sh   a smoke run (CI: bounds on the plugin's
#                                                      answers, p99 and memory; none on the ratio)
set -Eeuo pipefail
cd "$(dirname "$0")/.."
exec tests/env/nri.sh bench_nri_latency_and_memory --ignored --nocapture
