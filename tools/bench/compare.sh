#!/usr/bin/env bash
# Ferry's metastore side by side with etcd and ZooKeeper on this machine, driven by the same
# load generator (ferry-bench) in one run. Each system runs as 3 members on loopback with its
# default durability (fsync on), alone on the machine while it is measured.
#
#   tools/bench/compare.sh                      # C = 1,16,64, 3 repetitions of 10 s each
#   REPS=1 DURATION=2 tools/bench/compare.sh    # a quick look
#
# It installs etcd-server, zookeeper and protobuf-compiler (for the etcd client) when missing,
# and stops everything it started. Results: JSON lines in $OUT (default bench-results.jsonl),
# then a table of medians and Ferry's ratio to each of the others.
set -euo pipefail
cd "$(dirname "$0")/../.."

REPS=${REPS:-3}
DURATION=${DURATION:-10}
WARMUP=${WARMUP:-2}
CLIENTS=${CLIENTS:-1,16,64}
SYSTEMS=${SYSTEMS:-ferry etcd zookeeper}
OUT=${OUT:-bench-results.jsonl}

need=()
command -v etcd >/dev/null || need+=(etcd-server)
[ -x /usr/share/zookeeper/bin/zkServer.sh ] || need+=(zookeeper)
command -v protoc >/dev/null || need+=(protobuf-compiler)
if [ ${#need[@]} -gt 0 ]; then
  echo "installing ${need[*]}" >&2
  sudo_cmd=""; [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -q "${need[@]}" >/dev/null
fi

cargo build --release -q -p tools --features etcd --bin ferry --bin ferry-bench
bin=$PWD/target/release
work=$(mktemp -d)
pids=()
. tools/bench/ferry-cluster.sh
trap 'stop_all; rm -rf "$work"' EXIT

wait_ready() { # command...
  for _ in $(seq 1 300); do "$@" >/dev/null 2>&1 && return 0; sleep 0.2; done
  echo "cluster did not become ready: $*" >&2; return 1
}

start_ferry() { start_ferry_cluster 27701; }

start_etcd() {
  local cluster="e1=http://127.0.0.1:28801,e2=http://127.0.0.1:28802,e3=http://127.0.0.1:28803"
  for i in 1 2 3; do
    etcd --name "e$i" --data-dir "$work/etcd$i" \
      --listen-client-urls "http://127.0.0.1:2870$i" --advertise-client-urls "http://127.0.0.1:2870$i" \
      --listen-peer-urls "http://127.0.0.1:2880$i" --initial-advertise-peer-urls "http://127.0.0.1:2880$i" \
      --initial-cluster "$cluster" --initial-cluster-state new --initial-cluster-token bench \
      >"$work/etcd$i.log" 2>&1 &
    pids+=($!)
  done
  endpoints="127.0.0.1:28701,127.0.0.1:28702,127.0.0.1:28703"
  server_pids=$(IFS=,; echo "${pids[*]}")
  wait_ready timeout 10 "$bin/ferry-bench" --backend etcd --endpoints "$endpoints" \
    --workload put --clients 1 --duration 0.1 --warmup 0 --keys 1 --json
}

start_zookeeper() {
  for i in 1 2 3; do
    mkdir -p "$work/zk$i"
    echo "$i" >"$work/zk$i/myid"
    cat >"$work/zk$i.cfg" <<CFG
tickTime=2000
initLimit=10
syncLimit=5
dataDir=$work/zk$i
clientPort=2970$i
admin.enableServer=false
4lw.commands.whitelist=*
server.1=127.0.0.1:29801:29901
server.2=127.0.0.1:29802:29902
server.3=127.0.0.1:29803:29903
CFG
    /usr/share/zookeeper/bin/zkServer.sh start-foreground "$work/zk$i.cfg" >"$work/zk$i.log" 2>&1 &
    pids+=($!)
  done
  endpoints="127.0.0.1:29701,127.0.0.1:29702,127.0.0.1:29703"
  # start-foreground execs the JVM, so these pids are the servers'.
  server_pids=$(IFS=,; echo "${pids[*]}")
  wait_ready timeout 10 "$bin/ferry-bench" --backend zookeeper --endpoints 127.0.0.1:29701 \
    --workload put --clients 1 --duration 0.1 --warmup 0 --keys 1 --json
}

: >"$OUT"
for sys in $SYSTEMS; do
  echo "== $sys" >&2
  "start_$sys"
  for rep in $(seq 1 "$REPS"); do
    "$bin/ferry-bench" --backend "$sys" --endpoints "$endpoints" --server-pids "$server_pids" \
      --workload put,txn10,get --clients "$CLIENTS" --duration "$DURATION" --warmup "$WARMUP" --json \
      | sed "s/^{/{\"rep\":$rep,/" >>"$OUT"
  done
  "$bin/ferry-bench" --backend "$sys" --endpoints "$endpoints" --workload bigvalue --json >>"$OUT" || true
  stop_all
done

python3 - "$OUT" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
runs, big = {}, {}
for r in rows:
    if r["workload"] == "bigvalue":
        big[r["backend"]] = r["partitions"]
        continue
    runs.setdefault((r["workload"], r["clients"], r["backend"]), []).append(r)
systems = sorted({b for (_, _, b) in runs}, key=lambda b: (b != "ferry", b))
med = {k: {f: statistics.median(x[f] or 0 for x in v) for f in ("ops_per_sec", "p50_us", "p99_us", "server_cpu_us_per_op")} for k, v in runs.items()}
print(f"{'workload':<8} {'C':>3} " + " ".join(f"{s+' ops/s':>16} {'p50 ms':>7} {'p99 ms':>7} {'cpu µs':>7}" for s in systems) + "  ratios (ferry/other ops/s)")
for (w, c) in sorted({(w, c) for (w, c, _) in runs}, key=lambda k: (["put", "txn10", "get"].index(k[0]), k[1])):
    cells, ratios = [], []
    for s in systems:
        m = med.get((w, c, s))
        if not m:
            cells.append(f"{'-':>16} {'-':>7} {'-':>7} {'-':>7}"); continue
        cells.append(f"{m['ops_per_sec']:>16.0f} {m['p50_us']/1000:>7.2f} {m['p99_us']/1000:>7.2f} {m['server_cpu_us_per_op']:>7.0f}")
        f = med.get((w, c, "ferry"))
        if s != "ferry" and f and m["ops_per_sec"]:
            ratios.append(f"{s} {f['ops_per_sec']/m['ops_per_sec']:.2f}x")
    print(f"{w:<8} {c:>3} " + " ".join(cells) + "  " + ", ".join(ratios))
if big:
    print("largest reassignment in one atomic request: " + ", ".join(f"{b} {n} partitions" for b, n in big.items()))
PY
