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
base=${FERRY_BENCH_PORT:-17701}
peers="1=127.0.0.1:$base,2=127.0.0.1:$((base + 1)),3=127.0.0.1:$((base + 2))"
for id in 1 2 3; do
  RUST_LOG=error "$bin/ferry" node --id "$id" --data-dir "$work/n$id" \
    --listen "127.0.0.1:$((base + id - 1))" --peers "$peers" >"$work/n$id.log" 2>&1 &
  pids+=($!)
done
eps="127.0.0.1:$base,127.0.0.1:$((base + 1)),127.0.0.1:$((base + 2))"
for _ in $(seq 1 100); do
  "$bin/ferry" kv put /bench-ready 1 --bootstrap-server "$eps" >/dev/null 2>&1 && break
  sleep 0.1
done
"$bin/ferry-bench" --endpoints "$eps" --server-pids "$(IFS=,; echo "${pids[*]}")" "$@"
