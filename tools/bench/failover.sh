#!/usr/bin/env bash
# Failover on loopback: three quorum-only `ferry node` processes with the binary's default Raft
# tuning; N leader kills and N leader pauses, each timed to a new leader and to the first
# successful linearizable read and write. Prints ferry-failover-bench's table and JSON lines.
#
#   tools/bench/failover.sh                          # 20 kills, 20 pauses
#   tools/bench/failover.sh --kills 3 --pauses 3     # a quick look
#   tools/bench/failover.sh --node-arg=--election-min-ms=300 --node-arg=--election-max-ms=600
#
# Every argument goes to ferry-failover-bench (see its --help).
set -euo pipefail
cd "$(dirname "$0")/../.."
read -ra cargo <<<"${CARGO:-cargo}"
"${cargo[@]}" build --release -q -p tools --bin ferry --bin ferry-failover-bench
exec "$PWD/target/release/ferry-failover-bench" "$@"
