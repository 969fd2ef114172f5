#!/usr/bin/env bash
# Kafka's own kafka-producer-perf-test against a 3-node Ferry cluster (release build, each node
# quorum member and broker) over the Kafka protocol, at acks=all and acks=1, next to the raw
# write speed of the same disk, in one run. The producer runs with its defaults otherwise
# (idempotent, lz4 off, linger 5 ms in Kafka 4.x).
#
#   tools/bench/kafka-produce.sh                    # 200,000 records of 1 KiB per acks
#   RECORDS=50000 tools/bench/kafka-produce.sh      # a quick look
#
# Topic: 3 partitions, replication factor 3, all replicas on one disk. Then
#   dd if=/dev/zero of=<temp dir>/dd.test bs=1M count=<MB> conv=fsync
# with <MB> what the run put on the disk (RF x payload, at least 256). Prints each run's summary
# line as the tool prints it, then a table: records/s, MB/s (payload, as the tool counts it, 2^20),
# latency percentiles, and MB/s over dd's MB/s.
#
# Settings (environment): RECORDS, RECORD_BYTES, PARTITIONS, ACKS, FERRY_BENCH_PORT, TMPDIR,
# CARGO (the cargo command, for example a wrapper that takes a lock).
set -euo pipefail
cd "$(dirname "$0")/../.."

RECORDS=${RECORDS:-200000}
RECORD_BYTES=${RECORD_BYTES:-1024}
PARTITIONS=${PARTITIONS:-3}
ACKS=${ACKS:-all 1}
RF=3
TOPIC=bench-kafka

read -ra cargo <<<"${CARGO:-cargo}"
"${cargo[@]}" build --release -q -p tools --bins
tools/kafka-jars.sh >/dev/null
bin=$PWD/target/release
work=$(mktemp -d "${TMPDIR:-/tmp}/ferry-kafka-produce.XXXXXX")
pids=()
. tools/bench/ferry-cluster.sh
trap 'stop_all; rm -rf "$work"' EXIT

base_port=${FERRY_BENCH_PORT:-17741}
export FERRY_KAFKA_BASE=$((base_port + 10))
bootstrap="127.0.0.1:$FERRY_KAFKA_BASE,127.0.0.1:$((FERRY_KAFKA_BASE + 1)),127.0.0.1:$((FERRY_KAFKA_BASE + 2))"
start_ferry_cluster "$base_port"
for try in $(seq 1 150); do
  tools/kafka-tool.sh kafka-topics --bootstrap-server "$bootstrap" --create --topic "$TOPIC" \
    --partitions "$PARTITIONS" --replication-factor "$RF" >"$work/create.out" 2>&1 && break
  [ "$try" -lt 150 ] || { cat "$work/create.out" >&2; exit 1; }
  sleep 0.5
done
tools/kafka-tool.sh kafka-topics --bootstrap-server "$bootstrap" --describe --topic "$TOPIC" >&2

: >"$work/summary"
for acks in $ACKS; do
  echo "== kafka-producer-perf-test acks=$acks" >&2
  line=$(tools/kafka-tool.sh kafka-producer-perf-test --topic "$TOPIC" --num-records "$RECORDS" \
    --record-size "$RECORD_BYTES" --throughput -1 \
    --producer-props bootstrap.servers="$bootstrap" acks="$acks" | tail -n 1)
  echo "$line" >&2
  echo "$acks|$line" >>"$work/summary"
done
echo "data on disk: $(du -sh "$work" | cut -f1)" >&2
stop_all

payload_mb=$(( RECORDS * RECORD_BYTES * $(echo "$ACKS" | wc -w) / 1000000 ))
dd_mb=$(( payload_mb * RF > 256 ? payload_mb * RF : 256 ))
sync
dd_out=$(LC_ALL=C dd if=/dev/zero of="$work/dd.test" bs=1M count="$dd_mb" conv=fsync 2>&1)
rm -f "$work/dd.test"
echo "== dd bs=1M count=$dd_mb conv=fsync: $(echo "$dd_out" | tail -n 1)" >&2

python3 - "$work/summary" "$dd_out" "$RECORD_BYTES" "$PARTITIONS" <<'PY'
import re, sys
summary, dd_out, size, parts = open(sys.argv[1]).read(), sys.argv[2], sys.argv[3], sys.argv[4]
m = re.search(r"^(\d+) bytes .*copied, ([0-9.e+-]+) s,", dd_out, re.M)
dd = int(m.group(1)) / float(m.group(2)) / 2**20
print(f"\nkafka-producer-perf-test, {size} B records, topic of {parts} partitions, replication factor 3, one disk")
print(f"dd bs=1M conv=fsync on the same disk: {dd:.1f} MB/s (2^20)")
print(f"{'acks':<5} {'records/s':>10} {'MB/s':>7} {'avg ms':>7} {'p50':>6} {'p95':>6} {'p99':>6} {'p99.9':>7} {'max ms':>7} {'MB/s / dd':>9}")
num = r"([0-9.]+)"
for row in summary.strip().splitlines():
    acks, line = row.split("|", 1)
    f = lambda pat: float(re.search(pat, line).group(1))
    rps, mbs = f(num + r" records/sec"), f(r"\(" + num + r" MB/sec\)")
    print(f"{acks:<5} {rps:>10.0f} {mbs:>7.2f} {f(num + r' ms avg latency'):>7.1f} {f(num + r' ms 50th'):>6.0f} "
          f"{f(num + r' ms 95th'):>6.0f} {f(num + r' ms 99th'):>6.0f} {f(num + r' ms 99.9th'):>7.0f} "
          f"{f(num + r' ms max latency'):>7.0f} {mbs / dd:>9.2f}")
PY
