#!/usr/bin/env bash
# Reassignment at scale, metadata only: three quorum-only `ferry node` processes with broker ids
# registered but no brokers running, so submit and cancel-all are timed on the metastore alone
# (nothing else competes for the two cores). Prints ferry-reassign-bench's table, including the
# peak resident memory of the quorum nodes. PARTITIONS picks the sizes.
set -euo pipefail
cd "$(dirname "$0")/../.."
PARTITIONS=${PARTITIONS:-10000,100000}
read -ra cargo <<<"${CARGO:-cargo}"
"${cargo[@]}" build --release -q -p tools --bins
bin=$PWD/target/release
work=$(mktemp -d "${TMPDIR:-/tmp}/ferry-reassign-scale.XXXXXX")
pids=()
. tools/bench/ferry-cluster.sh
# KEEP_WORK=1 keeps the nodes' data dirs and logs.
trap 'stop_all; if [ -n "${KEEP_WORK:-}" ]; then echo "kept $work" >&2; else rm -rf "$work"; fi' EXIT
FERRY_NODE_ARGS="--roles quorum ${FERRY_EXTRA_NODE_ARGS:-}" start_ferry_cluster "${FERRY_BENCH_PORT:-17761}"
"$bin/ferry-reassign-bench" --bootstrap-server "$endpoints" --partitions "$PARTITIONS" \
  --fake-brokers 1,2,3 --no-complete --server-pids "$server_pids" \
  --cluster-credential-file "$work/ferry1/cluster-credential"
