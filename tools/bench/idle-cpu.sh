#!/usr/bin/env bash
# The CPU an idle Ferry cluster uses for the partitions it holds: three `ferry node` processes
# (quorum and broker each, two log dirs), TOPICS topics of PER_TOPIC partitions with their one
# replica on broker 1 (created with Kafka's kafka-topics), then nothing. Once the brokers have
# created the partitions' logs (the nodes' summed CPU under a quarter of a core over 5 s; at most
# SETTLE seconds: on a filesystem with much churn, the kernel's inode allocation alone can take a
# core for a minute), prints each node's share of one core over SECS seconds.
#
#   tools/bench/idle-cpu.sh                      # 4 topics of 5,000 partitions, 60 s
#   TOPICS=20 PER_TOPIC=5000 tools/bench/idle-cpu.sh
set -euo pipefail
cd "$(dirname "$0")/../.."

TOPICS=${TOPICS:-4}
PER_TOPIC=${PER_TOPIC:-5000}
SETTLE=${SETTLE:-300}
SECS=${SECS:-60}

cargo build --release -q -p tools --bins
tools/kafka-jars.sh >/dev/null
bin=$PWD/target/release
work=$(mktemp -d "${TMPDIR:-/tmp}/ferry-idle-cpu.XXXXXX")
pids=()
. tools/bench/ferry-cluster.sh
trap 'stop_all; rm -rf "$work"' EXIT

base=${FERRY_BENCH_PORT:-17861}
export FERRY_KAFKA_BASE=$((base + 10)) FERRY_TWO_LOG_DIRS=1
start_ferry_cluster "$base"
bootstrap=127.0.0.1:$FERRY_KAFKA_BASE
assignment=$(seq "$PER_TOPIC" | sed 's/.*/1/' | paste -sd, -)
for t in $(seq 1 "$TOPICS"); do
  tools/kafka-tool.sh kafka-topics --bootstrap-server "$bootstrap" --create --topic "idle-$t" \
    --replica-assignment "$assignment" >/dev/null
done
ticks() { for p in "${pids[@]}"; do awk '{print $14 + $15}' "/proc/$p/stat"; done; }
sum() { paste -sd+ - | awk -F+ '{ t = 0; for (i = 1; i <= NF; i++) t += $i; print t }'; }
hz=$(getconf CLK_TCK)
waited=0
prev=$(ticks | sum)
while [ "$waited" -lt "$SETTLE" ]; do
  sleep 5
  waited=$((waited + 5))
  now=$(ticks | sum)
  [ $((now - prev)) -lt $((hz * 5 / 4)) ] && break
  prev=$now
done
mapfile -t before < <(ticks)
sleep "$SECS"
mapfile -t after < <(ticks)
echo "partitions $((TOPICS * PER_TOPIC)) (all led by broker 1), settled after $waited s, idle for $SECS s"
for i in 0 1 2; do
  awk -v n=$((i + 1)) -v d=$((after[i] - before[i])) -v hz="$hz" -v s="$SECS" \
    'BEGIN { printf "node %d: %.1f%% of one core\n", n, 100 * d / hz / s }'
done
