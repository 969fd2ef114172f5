#!/usr/bin/env bash
# What security costs, Ferry against Apache Kafka 4.x (KRaft), in one run: each system as 3 nodes
# on loopback, first with PLAINTEXT Kafka listeners, then with SASL_SSL ones (TLS, SCRAM-SHA-512
# only, no authorizer on either), each on a fresh cluster, driven by Kafka's own client code:
#   - produce: kafka-producer-perf-test, acks=all, a topic of 3 partitions with replication factor
#     3, RECORDS records of RECORD_BYTES (the produce row of vs-kafka.sh), after an unmeasured run
#     of RECORDS/5; records/s, MB/s (2^20, as the tool counts) and the p99 latency;
#   - cpu per MB: the utime+stime of the system's 3 node processes (/proc/<pid>/stat, summed) over
#     the measured produce run (the tool's JVM start and its metadata fetch included, on both),
#     in CPU milliseconds per MB (2^20) of payload produced; replication is in the same processes;
#   - connections: CONNS (200) fresh connections one after the other, each the listener's
#     handshake (TLS, then SASL with SCRAM-SHA-512: Kafka's client sends ApiVersions,
#     SaslHandshake and two SaslAuthenticate) and then one ApiVersions and one Metadata request, as
#     a client's first requests, through Kafka's Java client network layer with one SSL context
#     and login for all (tools/bench/ConnBench.java, after CONN_WARM untimed ones): the median and
#     p99 milliseconds from connect to the Metadata answer, and the nodes' CPU milliseconds per
#     connection.
# Both systems take the same certificates (`ferry certs --host 127.0.0.1`: an ECDSA P-256 server
# certificate, its key and chain in one PEM file, Kafka's ssl.keystore.type=PEM) and the same user
# (`ferry users set-scram`; Kafka's `kafka-storage format --add-scram`), 4096 iterations on both.
# In sasl_ssl mode both systems encrypt their replication too: Kafka's brokers talk to each other
# over SASL_SSL (inter.broker.listener.name; SECURE_INTER_BROKER= puts them back on a PLAINTEXT
# listener of their own), Ferry's nodes over mutual TLS on their gRPC ports.
# Prints one table (each figure for both, Ferry/Kafka, and each system's sasl_ssl/plaintext; n/a
# where a system refused or failed, with the reason on stderr) and the JSON lines behind it.
#
#   CARGO="flock /tmp/ferry-build.lock cargo" tools/bench/vs-kafka-secure.sh
#   RECORDS=20000 CONNS=50 tools/bench/vs-kafka-secure.sh      # a quick look
#
# Kafka's nodes run with Kafka's default heap, 1 GiB (KAFKA_NODE_HEAP), as in vs-kafka.sh; Ferry's
# with tools/bench/ferry-cluster.sh (release build, in CARGO_TARGET_DIR if set).
# Settings (environment): RECORDS, RECORD_BYTES, CONNS, CONN_WARM, SYSTEMS ("kafka ferry"),
# MODES ("plaintext sasl_ssl"), KAFKA_VERSION, KEEP_WORK=1 (keep the scratch dir and the nodes'
# logs), FERRY_BENCH_PORT, KAFKA_BASE_PORT, TMPDIR, CARGO (the cargo command, e.g. one that takes a
# lock).
set -euo pipefail
cd "$(dirname "$0")/../.."

RECORDS=${RECORDS:-100000}
RECORD_BYTES=${RECORD_BYTES:-1024}
CONNS=${CONNS:-200}
CONN_WARM=${CONN_WARM:-50}
SYSTEMS=${SYSTEMS:-kafka ferry}
MODES=${MODES:-plaintext sasl_ssl}

read -ra cargo <<<"${CARGO:-cargo}"
"${cargo[@]}" build --release -q -p tools --bin ferry
kafka_jars=$(tools/kafka-jars.sh | tail -n 1)
bin=${CARGO_TARGET_DIR:-$PWD/target}/release
root=$(mktemp -d "${TMPDIR:-/tmp}/ferry-vs-kafka-secure.XXXXXX")
work=$root
pids=()
. tools/bench/ferry-cluster.sh
kafka_dir=""
cleanup() {
  stop_all
  [ -z "$kafka_dir" ] || tools/bench/kafka-cluster.sh stop "$kafka_dir" >/dev/null 2>&1 || true
  if [ -n "${KEEP_WORK:-}" ]; then echo "kept $root" >&2; else rm -rf "$root"; fi
}
trap cleanup EXIT
results=$root/results.jsonl
: >"$results"
tick=$(getconf CLK_TCK)

# The same certificates and user for both systems. SECURE is set per cluster start, the rest is
# read by kafka-cluster.sh and ferry-cluster.sh.
"$bin/ferry" certs --dir "$root/certs" --host 127.0.0.1 >/dev/null
export SECURE_KEYSTORE=$root/certs/server.pem SECURE_TRUSTSTORE=$root/certs/ca.pem SECURE_USER=admin
SECURE_PASSWORD=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')
export SECURE_PASSWORD
export SECURE_INTER_BROKER=${SECURE_INTER_BROKER-1}
cat >"$root/client-sasl_ssl.properties" <<EOF
security.protocol=SASL_SSL
sasl.mechanism=SCRAM-SHA-512
sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="$SECURE_USER" password="$SECURE_PASSWORD";
ssl.truststore.type=PEM
ssl.truststore.location=$SECURE_TRUSTSTORE
EOF

record() { # system mode metric value
  echo "{\"system\":\"$1\",\"mode\":\"$2\",\"metric\":\"$3\",\"value\":$4}" | tee -a "$results"
}
tool() { timeout "${TOOL_TIMEOUT:-600}" tools/kafka-tool.sh "$@"; }

# The client config flag of MODE's tools: none for PLAINTEXT.
client_config() { # mode flag
  [ "$1" = plaintext ] || echo "$2 $root/client-$1.properties"
}

# The utime+stime of the processes, in clock ticks.
cpu_ticks() { # pid...
  # shellcheck disable=SC2046 # one file per PID
  awk '{ t += $14 + $15 } END { print t + 0 }' $(printf '/proc/%s/stat\n' "$@")
}

produce() { # system mode bootstrap pid...
  local sys=$1 mode=$2 bs=$3 line cpu try
  shift 3
  [ "$RECORDS" -gt 0 ] || return 0
  # Retried while the cluster settles (and Ferry's brokers learn the new user).
  for try in $(seq 1 40); do
    # shellcheck disable=SC2046 # the flag and its file, or nothing
    TOOL_TIMEOUT=60 tool kafka-topics --bootstrap-server "$bs" $(client_config "$mode" --command-config) --create --topic perf \
      --replica-assignment 1:2:3,2:3:1,3:1:2 >"$root/create.out" 2>&1 && break
    if [ "$try" -eq 40 ]; then
      echo "$sys ($mode): creating the topic failed: $(tail -n 3 "$root/create.out")" >&2
      for m in produce_records_per_s produce_mb_per_s produce_p99_ms produce_cpu_ms_per_mb; do
        record "$sys" "$mode" "$m" null
      done
      return 0
    fi
    sleep 0.5
  done
  local perf=(kafka-producer-perf-test --topic perf --record-size "$RECORD_BYTES" --throughput -1)
  # shellcheck disable=SC2046 # the flag and its file, or nothing
  tool "${perf[@]}" --num-records $((RECORDS / 5)) --producer-props bootstrap.servers="$bs" acks=all \
    $(client_config "$mode" --producer.config) >/dev/null 2>"$root/perf.err" || true
  cpu=$(cpu_ticks "$@")
  # shellcheck disable=SC2046 # the flag and its file, or nothing
  line=$(tool "${perf[@]}" --num-records "$RECORDS" --producer-props bootstrap.servers="$bs" acks=all \
    $(client_config "$mode" --producer.config) 2>"$root/perf.err" | tail -n 1) || true
  cpu=$(($(cpu_ticks "$@") - cpu))
  echo "$sys ($mode): $line" >&2
  # "N records sent, R records/sec (M MB/sec), A ms avg latency, X ms max latency, p50, p95, p99, p99.9"
  if ! grep -q "^$RECORDS records sent" <<<"$line"; then
    echo "$sys ($mode): the produce run failed: $(grep -v '^\s*at ' "$root/perf.err" | tail -n 3)" >&2
    for m in produce_records_per_s produce_mb_per_s produce_p99_ms produce_cpu_ms_per_mb; do
      record "$sys" "$mode" "$m" null
    done
    return 0
  fi
  record "$sys" "$mode" produce_records_per_s "$(sed -E 's/.*sent, ([0-9.]+) records\/sec.*/\1/' <<<"$line")"
  record "$sys" "$mode" produce_mb_per_s "$(sed -E 's/.*\(([0-9.]+) MB\/sec\).*/\1/' <<<"$line")"
  record "$sys" "$mode" produce_p99_ms "$(sed -E 's/.* ([0-9.]+) ms 99th.*/\1/' <<<"$line")"
  record "$sys" "$mode" produce_cpu_ms_per_mb "$(awk -v c="$cpu" -v t="$tick" -v n="$RECORDS" -v b="$RECORD_BYTES" \
    'BEGIN { printf "%.2f", c * 1000 / t / (n * b / 1048576) }')"
}

connections() { # system mode bootstrap pid...
  local sys=$1 mode=$2 bs=$3 out cfg=- median p99 ticks
  shift 3
  [ "$CONNS" -gt 0 ] || return 0
  [ "$mode" = plaintext ] || cfg=$root/client-$mode.properties
  if out=$(timeout 600 java -Xmx512m -Dlog4j2.configurationFile=tools/kafka-log4j2.properties \
    -Dferry.log.level=ERROR -cp "$kafka_jars/*" tools/bench/ConnBench.java "$bs" "$cfg" "$CONNS" \
    "$CONN_WARM" "$(IFS=,; echo "$*")" 2>"$root/conn.err"); then
    read -r median p99 ticks <<<"$out"
    record "$sys" "$mode" conn_median_ms "$median"
    record "$sys" "$mode" conn_p99_ms "$p99"
    record "$sys" "$mode" conn_server_cpu_ms "$(awk -v c="$ticks" -v t="$tick" -v n="$CONNS" \
      'BEGIN { printf "%.3f", c * 1000 / t / n }')"
  else
    echo "$sys ($mode): the connection bench failed: $(grep -v '^\s*at ' "$root/conn.err" | tail -n 3)" >&2
    for m in conn_median_ms conn_p99_ms conn_server_cpu_ms; do record "$sys" "$mode" "$m" null; done
  fi
}

secure_flag() { [ "$1" = plaintext ] || echo 1; }

run_kafka() { # mode
  local mode=$1 bootstrap
  kafka_dir=$root/kafka-$mode
  if ! bootstrap=$(SECURE=$(secure_flag "$mode") KAFKA_HEAP_OPTS=${KAFKA_NODE_HEAP:--Xmx1g -Xms1g} \
    tools/bench/kafka-cluster.sh start "$kafka_dir" | tail -n 1); then
    echo "kafka ($mode): the cluster did not start (its logs are above)" >&2
    for m in produce_records_per_s produce_mb_per_s produce_p99_ms produce_cpu_ms_per_mb \
      conn_median_ms conn_p99_ms conn_server_cpu_ms; do record kafka "$mode" "$m" null; done
    kafka_dir=""
    return 0
  fi
  local node_pids
  mapfile -t node_pids < <(tools/bench/kafka-cluster.sh pids "$kafka_dir" | awk '{print $2}')
  produce kafka "$mode" "$bootstrap" "${node_pids[@]}"
  connections kafka "$mode" "$bootstrap" "${node_pids[@]}"
  tools/bench/kafka-cluster.sh stop "$kafka_dir" >/dev/null
  kafka_dir=""
}

run_ferry() { # mode
  local mode=$1 base=${FERRY_BENCH_PORT:-17761}
  export FERRY_KAFKA_BASE=$((base + 10))
  local bootstrap="127.0.0.1:$FERRY_KAFKA_BASE,127.0.0.1:$((FERRY_KAFKA_BASE + 1)),127.0.0.1:$((FERRY_KAFKA_BASE + 2))"
  # A data dir of its own per mode (ferry-cluster.sh puts the nodes' dirs and logs in $work).
  work=$root/ferry-$mode
  mkdir -p "$work"
  if ! SECURE=$(secure_flag "$mode") FERRY_TWO_LOG_DIRS=1 start_ferry_cluster "$base"; then
    echo "ferry ($mode): the cluster did not start: $(tail -n 3 "$work/ferry1.log")" >&2
    for m in produce_records_per_s produce_mb_per_s produce_p99_ms produce_cpu_ms_per_mb \
      conn_median_ms conn_p99_ms conn_server_cpu_ms; do record ferry "$mode" "$m" null; done
    stop_all
    work=$root
    return 0
  fi
  local node_pids=("${pids[@]}")
  produce ferry "$mode" "$bootstrap" "${node_pids[@]}"
  connections ferry "$mode" "$bootstrap" "${node_pids[@]}"
  stop_all
  work=$root
}

for s in $SYSTEMS; do
  for m in $MODES; do "run_$s" "$m"; done
done

echo
python3 - "$results" <<'EOF'
import json, sys
rows, modes = {}, []
for line in open(sys.argv[1]):
    r = json.loads(line)
    rows.setdefault((r["metric"], r["mode"]), {})[r["system"]] = r["value"]
    if r["mode"] not in modes:
        modes.append(r["mode"])
num = lambda x: isinstance(x, (int, float)) and not isinstance(x, bool)
ratio = lambda a, b: a / b if num(a) and num(b) and b else None
print(f"{'metric':<44}{'kafka':>12}{'ferry':>12}{'ferry/kafka':>13}")
def row(name, v, fmt="g"):
    show = lambda x: "n/a" if x is None else format(x, fmt)
    k, f = v.get("kafka"), v.get("ferry")
    r = ratio(f, k)
    print(f"{name:<44}{show(k) if 'kafka' in v else '-':>12}{show(f) if 'ferry' in v else '-':>12}"
          f"{'-' if r is None else f'{r:.2f}':>13}")
for metric in dict.fromkeys(m for m, _ in rows):
    for mode in modes:
        if (metric, mode) in rows:
            row(f"{metric} {mode}", rows[(metric, mode)])
    plain = rows.get((metric, "plaintext"), {})
    for mode in modes:
        if mode == "plaintext" or (metric, mode) not in rows:
            continue
        sec = rows[(metric, mode)]
        over = {s: ratio(sec.get(s), plain.get(s)) for s in ("kafka", "ferry") if s in sec and s in plain}
        if over:
            row(f"{metric} {mode}/plaintext", over, ".2f")
EOF
