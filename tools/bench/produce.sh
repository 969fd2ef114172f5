#!/usr/bin/env bash
# Produce throughput of a 3-node Ferry cluster (each node quorum member and broker, release
# build) on loopback, against the raw write speed of the disk its data is on, in one run.
#
#   tools/bench/produce.sh                          # C = 16, 3 repetitions of 10 s per acks
#   REPS=1 DURATION=2 tools/bench/produce.sh        # a quick look
#
# Each of REPS repetitions starts a fresh cluster, creates a topic (3 partitions, replication
# factor 3) and runs ferry-bench's produce workload at acks=1, then acks=all. Then it times
#   dd if=/dev/zero of=<temp dir>/dd.test bs=1M count=<MB> conv=fsync
# in the same temp dir as the nodes' data, with <MB> about what one Ferry run wrote to the disk
# (at least 256). Prints medians per acks: records/s, MB/s (payload, 10^6 bytes), latency per
# request, and MB/s as a fraction of dd's. Every replica is on this one disk, so the disk takes
# RF x the payload: that is the "disk MB/s" column.
#
# Settings (environment): REPS, DURATION, WARMUP, CLIENTS, RECORD_BYTES, BATCH_RECORDS,
# PARTITIONS, ACKS, FERRY_BENCH_PORT, TMPDIR (where the data and dd.test go), OUT (keep the JSON
# lines there), CARGO (the cargo command, for example a wrapper that takes a lock).
set -euo pipefail
cd "$(dirname "$0")/../.."

REPS=${REPS:-3}
DURATION=${DURATION:-10}
WARMUP=${WARMUP:-2}
CLIENTS=${CLIENTS:-16}
RECORD_BYTES=${RECORD_BYTES:-1024}
BATCH_RECORDS=${BATCH_RECORDS:-100}
PARTITIONS=${PARTITIONS:-3}
RF=3
ACKS=${ACKS:-1,all}
TOPIC=bench-produce

read -ra cargo <<<"${CARGO:-cargo}"
"${cargo[@]}" build --release -q -p tools --bins
bin=$PWD/target/release
work=$(mktemp -d "${TMPDIR:-/tmp}/ferry-produce.XXXXXX")
results=$work/produce.jsonl
pids=()
. tools/bench/ferry-cluster.sh
trap 'stop_all; rm -rf "$work"' EXIT

base_port=${FERRY_BENCH_PORT:-17721}
# A fresh cluster per repetition keeps the data on the disk to one repetition's (no retention).
for rep in $(seq 1 "$REPS"); do
  echo "== repetition $rep of $REPS" >&2
  start_ferry_cluster $((base_port + 10 * (rep - 1)))
  # The brokers register a moment after the quorum is up; until all RF have, creation fails.
  for try in $(seq 1 150); do
    "$bin/ferry" topics --create --topic "$TOPIC" --partitions "$PARTITIONS" --replication-factor "$RF" \
      --bootstrap-server "$endpoints" 2>"$work/create.err" >&2 && break
    [ "$try" -lt 150 ] || { cat "$work/create.err" >&2; exit 1; }
    sleep 0.2
  done
  # ferry-bench waits for every partition to have a leader and a full ISR before it measures.
  "$bin/ferry-bench" --endpoints "$endpoints" --server-pids "$server_pids" --workload produce \
    --topic "$TOPIC" --acks "$ACKS" --clients "$CLIENTS" --duration "$DURATION" --warmup "$WARMUP" \
    --record-bytes "$RECORD_BYTES" --batch-records "$BATCH_RECORDS" --json \
    | sed "s/^{/{\"rep\":$rep,/" | tee -a "$results" >&2
  "$bin/ferry" topics --describe --topic "$TOPIC" --bootstrap-server "$endpoints" >&2
  stop_all
  echo "data on disk: $(du -sh "$work" | cut -f1)" >&2
  rm -rf "$work"/ferry*
done
[ -z "${OUT:-}" ] || cp "$results" "$OUT"

# dd: about the MB one run put on the disk (RF copies, warm-up included), at least 256, and at
# most half of the free space.
dd_mb=$(python3 - "$results" "$RF" "$DURATION" "$WARMUP" <<'PY'
import json, math, sys
rows = [r for r in (json.loads(l) for l in open(sys.argv[1]) if l.strip()) if "mb_per_sec" in r]
rf, secs = int(sys.argv[2]), float(sys.argv[3]) + float(sys.argv[4])
print(max(256, math.ceil(max(r["mb_per_sec"] for r in rows) * rf * secs)))
PY
)
free_mb=$(($(df -Pk "$work" | awk 'NR == 2 {print $4}') / 1024))
[ "$dd_mb" -le $((free_mb / 2)) ] || dd_mb=$((free_mb / 2))
sync
echo "== dd bs=1M count=$dd_mb conv=fsync" >&2
dd_out=$(LC_ALL=C dd if=/dev/zero of="$work/dd.test" bs=1M count="$dd_mb" conv=fsync 2>&1)
rm -f "$work/dd.test"
echo "$dd_out" | tail -n 1 >&2

python3 - "$results" "$RF" "$dd_mb" "$dd_out" <<'PY'
import json, re, statistics, sys
all_rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
rows = [r for r in all_rows if "mb_per_sec" in r]
rf, dd_mb, dd_out = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
# dd's last line, "N bytes (...) copied, S s, R MB/s": its rate, from N and S for more digits.
m = re.search(r"^(\d+) bytes .*copied, ([0-9.e+-]+) s,", dd_out, re.M)
if not m:
    sys.exit(f"could not read dd's rate from: {dd_out!r}")
dd = int(m.group(1)) / float(m.group(2)) / 1e6
first = rows[0]
print(f"\nproduce: {first['clients']} clients, {first['batch_records']} records of {first['record_bytes']} B "
      f"per request, median of {len({r['rep'] for r in rows})} runs; replication factor {rf}, "
      f"all replicas on one disk")
print(f"dd bs=1M count={dd_mb} conv=fsync on the same disk: {dd:.1f} MB/s")
print(f"{'acks':<5} {'records/s':>10} {'MB/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} {'errors':>7} "
      f"{'MB/s / dd':>10} {'disk MB/s':>10} {'disk / dd':>10}")
for acks in dict.fromkeys(r["acks"] for r in rows):
    runs = [r for r in rows if r["acks"] == acks]
    med = lambda f: statistics.median(r[f] for r in runs)
    mb = med("mb_per_sec")
    print(f"{acks:<5} {med('records_per_sec'):>10.0f} {mb:>8.1f} {med('p50_us') / 1000:>8.2f} "
          f"{med('p99_us') / 1000:>8.2f} {med('max_us') / 1000:>8.2f} {sum(r['errors'] for r in runs):>7} "
          f"{mb / dd:>10.2f} {rf * mb:>10.1f} {rf * mb / dd:>10.2f}")
PY
