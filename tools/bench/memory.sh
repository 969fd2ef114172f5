#!/usr/bin/env bash
# Memory per partition: a 3-node cluster (separate `ferry node` processes, quorum and broker
# each) takes PARTITIONS (20000) empty partitions with one replica on broker 1, in topics of
# 1,000 made by `ferry topics --create`. Prints each node's resident memory before and after
# SETTLE (30) s, and the growth per partition: broker 1 holds every replica and its metadata,
# brokers 2 and 3 the metadata only. MIMALLOC_PURGE_DELAY=10 makes the nodes give freed memory
# back, so that the figures show live memory rather than the peaks the allocator keeps.
set -euo pipefail
cd "$(dirname "$0")/../.."
PARTITIONS=${PARTITIONS:-20000}
export MIMALLOC_PURGE_DELAY=${MIMALLOC_PURGE_DELAY:-10}
SETTLE=${SETTLE:-30}
read -ra cargo <<<"${CARGO:-cargo}"
"${cargo[@]}" build --release -q -p tools --bin ferry
bin=$PWD/target/release
pids=()
work=$(mktemp -d "${TMPDIR:-/tmp}/ferry-memory.XXXXXX")
. tools/bench/ferry-cluster.sh
trap 'stop_all; rm -rf "$work"' EXIT
base=${FERRY_BENCH_PORT:-17881}
FERRY_KAFKA_BASE=$((base + 10)) start_ferry_cluster "$base"
rss() { for p in "${pids[@]}"; do awk '/VmRSS/ {printf "%d ", $2 / 1024}' "/proc/$p/status"; done; }
before=$(rss)
t=0
while [ $((t * 1000)) -lt "$PARTITIONS" ]; do
  n=$((PARTITIONS - t * 1000))
  [ "$n" -gt 1000 ] && n=1000
  "$bin/ferry" topics --create --topic "mem$t" --replica-assignment "$(seq "$n" | sed 's/.*/1/' | paste -sd, -)" \
    --bootstrap-server "$endpoints" >/dev/null
  t=$((t + 1))
done
sleep "$SETTLE"
after=$(rss)
echo "partitions $PARTITIONS, one replica each on broker 1"
echo "rss MiB before (nodes 1 2 3): $before"
echo "rss MiB after  (nodes 1 2 3): $after"
paste <(tr ' ' '\n' <<<"$before" | grep .) <(tr ' ' '\n' <<<"$after" | grep .) |
  awk -v n="$PARTITIONS" '{printf "node %d: %.1f KiB per partition\n", NR, ($2 - $1) * 1024 / n; s += $2 - $1}
    END {printf "mean over the nodes: %.1f KiB per partition per node\n", s * 1024 / n / NR}'
