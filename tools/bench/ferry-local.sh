#!/usr/bin/env bash
# Starts a 3-node Ferry metastore (separate `ferry node` processes, release build, fsync on) on
# loopback, runs ferry-bench against it, and stops it. Extra arguments go to ferry-bench.
#   tools/bench/ferry-local.sh --workload put,txn10,get --clients 1,16,64 --duration 10
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo build --release -q -p tools --bin ferry --bin ferry-bench
bin=target/release
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
. tools/bench/ferry-cluster.sh
start_ferry_cluster "${FERRY_BENCH_PORT:-17701}"
"$bin/ferry-bench" --endpoints "$endpoints" --server-pids "$server_pids" "$@"
