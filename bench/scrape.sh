#!/usr/bin/env bash
# The NRI plugin's per-container series (BENCHMARKS.md#scrape): the plugin as
# shipped (the static release build) tracks 500 containers, each in a memory
# cgroup of its own made under the host's cgroupfs, and is scraped 20 times;
# the median must stay under 50 ms. As root.
#
#   bench/scrape.sh
#
# The memory bound (10,000 containers under 8 MiB) is a test of the suite:
# tests/host/nri_protocol.rs's metrics_track_10000_containers_*.
set -Eeuo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "scrape.sh: run as root (it makes memory cgroups)" >&2; exit 1; }
exec cargo test --locked --test host -- --ignored --exact nri_protocol::bench_scrape_500_containers --nocapture
