#!/usr/bin/env bash
# Scale curves of the metastore alone: for each KEYS size, a fresh 3-node cluster (quorum only,
# fsync on) is loaded with that many 256-byte values, then `put` runs over those keys at C=16.
# Prints the load rate, put ops/s and p99, each node's resident memory, and disk bytes per
# stored byte (space amplification). With CATCHUP=1, the nodes then restart snapshotting every
# 100 entries and keeping no log behind the snapshot, take 500 small writes (so a snapshot is
# built and the log before it dropped), and a fourth node joins as a learner: the time until it
# holds every key is printed; it can only catch up by installing the snapshot.
set -euo pipefail
cd "$(dirname "$0")/../.."
KEYS=${KEYS:-10000 1000000}
DURATION=${DURATION:-10}
read -ra cargo <<<"${CARGO:-cargo}"
"${cargo[@]}" build --release -q -p tools --bins
bin=$PWD/target/release
pids=()
. tools/bench/ferry-cluster.sh
work=""
trap 'stop_all; [ -n "$work" ] && rm -rf "$work"' EXIT
base=${FERRY_BENCH_PORT:-17781}
for n in $KEYS; do
  work=$(mktemp -d "${TMPDIR:-/tmp}/ferry-scale.XXXXXX")
  FERRY_NODE_ARGS="--roles quorum" start_ferry_cluster "$base"
  "$bin/ferry-kv-load" --endpoints "$endpoints" --keys "$n"
  "$bin/ferry-bench" --endpoints "$endpoints" --workload put --clients 16 --keys "$n" --preloaded \
    --duration "$DURATION" --server-pids "$server_pids" --json
  rss=""
  for p in "${pids[@]}"; do
    rss="$rss $(awk '/VmRSS/ {printf "%.0f", $2/1024}' "/proc/$p/status")"
  done
  stored=$((n * (256 + 9)))
  disk=$(du -sb "$work"/ferry1 | cut -f1)
  echo "{\"keys\":$n,\"rss_mib\":\"${rss# }\",\"disk_bytes_node1\":$disk,\"stored_bytes\":$stored,\"space_amplification\":$(awk "BEGIN {printf \"%.2f\", $disk/$stored}")}"
  if [ "${CATCHUP:-0}" = 1 ]; then
    stop_all
    FERRY_NODE_ARGS="--roles quorum --snapshot-every 100 --keep-behind-snapshot 0" start_ferry_cluster "$base"
    "$bin/ferry-kv-load" --endpoints "$endpoints" --keys 500 --per-txn 1 --concurrency 1 >/dev/null
    sleep 5 # snapshots are built in the background
    port4=$((base + 3))
    RUST_LOG=error "$bin/ferry" node --id 4 --data-dir "$work/ferry4" --listen "127.0.0.1:$port4" \
      --join --roles quorum >>"$work/ferry4.log" 2>&1 &
    pids[3]=$!
    sleep 1
    t0=$(date +%s.%N)
    "$bin/ferry" metastore members add-learner --id 4 --addr "127.0.0.1:$port4" --bootstrap-server "$endpoints" >/dev/null
    until "$bin/ferry" metastore status --bootstrap-server "127.0.0.1:$port4" 2>/dev/null |
      awk -v n="$n" '{for (i = 1; i <= NF; i++) if ($i ~ /^keys=/) {split($i, kv, "="); if (kv[2] + 0 >= n) ok = 1}} END {exit !ok}'; do
      sleep 0.05
    done
    t1=$(date +%s.%N)
    echo "{\"keys\":$n,\"catch_up_s\":$(awk "BEGIN {printf \"%.2f\", $t1-$t0}")}"
  fi
  stop_all
  rm -rf "$work"
  work=""
  base=$((base + 10))
done
