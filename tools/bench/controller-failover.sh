#!/usr/bin/env bash
# Time from SIGKILL of the active controller's process to the next controller's first committed
# action (its `/controller` record), on three `ferry node` processes. Repeats REPS times,
# restarting the killed node in between, and prints each time and the median.
set -euo pipefail
cd "$(dirname "$0")/../.."
REPS=${REPS:-5}
read -ra cargo <<<"${CARGO:-cargo}"
"${cargo[@]}" build --release -q -p tools --bins
bin=$PWD/target/release
work=$(mktemp -d "${TMPDIR:-/tmp}/ferry-failover.XXXXXX")
pids=()
. tools/bench/ferry-cluster.sh
trap 'stop_all; rm -rf "$work"' EXIT
base=${FERRY_BENCH_PORT:-17751}
start_ferry_cluster "$base"

controller_rev() { # endpoints -> mod revision of /controller, empty when unreadable
  "$bin/ferry" kv get /controller -v --bootstrap-server "$1" 2>/dev/null |
    sed -n 's/.*mod_revision=\([0-9]*\).*/\1/p'
}
raft_leader() {
  "$bin/ferry" metastore status --bootstrap-server "$endpoints" 2>/dev/null |
    sed -n 's/.*leader=\([0-9]*\) .*/\1/p' | grep -v '^0$' | head -1
}

times=()
for rep in $(seq 1 "$REPS"); do
  rev=""
  for _ in $(seq 1 300); do
    rev=$(controller_rev "$endpoints") && [ -n "$rev" ] && leader=$(raft_leader) && [ -n "$leader" ] && break
    sleep 0.1
  done
  others=$(for id in 1 2 3; do [ "$id" = "$leader" ] || printf '127.0.0.1:%s,' $((base + id - 1)); done)
  others=${others%,}
  t0=$(date +%s%N)
  kill -9 "${pids[leader - 1]}"
  while :; do
    new=$(controller_rev "$others") || true
    if [ -n "$new" ] && [ "$new" != "$rev" ]; then break; fi
    sleep 0.005
  done
  t1=$(date +%s%N)
  ms=$(((t1 - t0) / 1000000))
  times+=("$ms")
  echo "repetition $rep: killed node $leader; next controller committed after $ms ms"
  wait "${pids[leader - 1]}" 2>/dev/null || true
  start_ferry_node "$leader" "$base"
  sleep 2
done
sorted=$(printf '%s\n' "${times[@]}" | sort -n)
median=$(echo "$sorted" | sed -n "$(((REPS + 1) / 2))p")
echo "controller failover, SIGKILL to first committed action: median $median ms over $REPS (all: $(echo $sorted))"
