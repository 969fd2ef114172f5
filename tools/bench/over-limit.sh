#!/usr/bin/env bash
# Requests over each default limit against three `ferry node` processes (quorum only, broker ids
# registered but no brokers running): each must be refused naming its limit. Prints every
# refusal with the nodes' peak resident memory after it, and their memory before.
set -euo pipefail
cd "$(dirname "$0")/../.."
read -ra cargo <<<"${CARGO:-cargo}"
"${cargo[@]}" build --release -q -p tools --bins
bin=$PWD/target/release
work=$(mktemp -d "${TMPDIR:-/tmp}/ferry-over-limit.XXXXXX")
pids=()
. tools/bench/ferry-cluster.sh
trap 'stop_all; rm -rf "$work"' EXIT
FERRY_NODE_ARGS="--roles quorum" start_ferry_cluster "${FERRY_BENCH_PORT:-17771}"
"$bin/ferry-reassign-bench" --bootstrap-server "$endpoints" --over-limit \
  --fake-brokers 1,2,3 --server-pids "$server_pids" \
  --cluster-credential-file "$work/ferry1/cluster-credential"
