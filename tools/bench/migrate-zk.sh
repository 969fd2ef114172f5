#!/usr/bin/env bash
# Times `ferry migrate-zk` on a ZooKeeper holding TOPICS topics of PARTITIONS partitions each
# (10,000 x 10 by default, every 100th topic with a reassignment in flight): first --dry-run,
# then the import into a 3-node Ferry metastore (one transaction), then --verify and a re-run.
# Starts a standalone ZooKeeper (the Debian `zookeeper` package) and the Ferry nodes on loopback.
set -euo pipefail
cd "$(dirname "$0")/../.."
TOPICS=${TOPICS:-10000}
PARTITIONS=${PARTITIONS:-10}
read -ra cargo <<<"${CARGO:-cargo}"
"${cargo[@]}" build --release -q -p tools --bin ferry --bin ferry-zk-load
bin=$PWD/target/release
work=$(mktemp -d "${TMPDIR:-/tmp}/ferry-migrate-zk.XXXXXX")
pids=()
. tools/bench/ferry-cluster.sh
trap 'stop_all; rm -rf "$work"' EXIT
zk_port=${ZK_BENCH_PORT:-29711}

mkdir -p "$work/zk"
# forceSync=no only speeds up loading the fixture; the migration itself only reads.
cat >"$work/zk.cfg" <<CFG
tickTime=2000
dataDir=$work/zk
clientPort=$zk_port
clientPortAddress=127.0.0.1
admin.enableServer=false
maxClientCnxns=0
forceSync=no
CFG
ZOO_LOG_DIR=$work JVMFLAGS="-Xmx2g" /usr/share/zookeeper/bin/zkServer.sh start-foreground "$work/zk.cfg" \
  >"$work/zk.log" 2>&1 &
pids+=($!)
start_ferry_cluster "${FERRY_BENCH_PORT:-17781}"

for _ in $(seq 1 100); do (exec 3<>"/dev/tcp/127.0.0.1/$zk_port") 2>/dev/null && break; sleep 0.2; done
# Kafka brokers 1-3 are the three Ferry nodes (quorum and broker each).
"$bin/ferry-zk-load" --zookeeper "127.0.0.1:$zk_port" --topics "$TOPICS" --partitions "$PARTITIONS" \
  --brokers 3 --replication-factor 2

timed() { # label, command... ; prints the label, the wall time, the exit code, stderr and the
  # last line of stdout
  local label=$1
  shift
  local t0 t1 code=0
  t0=$(date +%s%N)
  "$@" >"$work/out" 2>"$work/err" || code=$?
  t1=$(date +%s%N)
  printf '%-10s %6d ms (exit %d)\n' "$label" $(((t1 - t0) / 1000000)) "$code"
  sed 's/^/    /' "$work/err"
  tail -n 1 "$work/out" | sed 's/^/    /'
}
migrate=("$bin/ferry" migrate-zk --zookeeper "127.0.0.1:$zk_port" --bootstrap-server "$endpoints")
timed dry-run "${migrate[@]}" --dry-run
echo "    dry-run output: $(wc -l <"$work/out") lines, $(wc -c <"$work/out") bytes"
timed import "${migrate[@]}"
# Ferry acts on the import at once (brokers create the replicas, leaders adjust ISRs, moves
# complete), so verify lists what changed since, and a re-run refuses to undo it.
timed verify "${migrate[@]}" --verify
timed re-run "${migrate[@]}"
echo "metastore data on disk after the import: $(du -sh "$work/ferry1" | cut -f1) per node"
