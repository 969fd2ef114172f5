#!/usr/bin/env bash
# A 3-node Apache Kafka 4.x cluster in KRaft mode on 127.0.0.1, for benchmarks that compare Ferry
# with Kafka. Every node is broker and controller (node ids 1, 2, 3, static controller quorum) with
# two log dirs, DIR/n<i>/d0 and DIR/n<i>/d1 (so JBOD moves can be compared), its metadata log in
# DIR/n<i>/meta, its config in DIR/n<i>/server.properties, stdout+stderr in DIR/n<i>/server.log and
# its PID in DIR/n<i>/pid. The jars come from Maven through tools/kafka-jars.sh (cached).
#
#   tools/bench/kafka-cluster.sh start DIR              # formats DIR on first use, starts the nodes
#       that are not running, waits until all 3 brokers serve; last stdout line: the bootstrap list
#   tools/bench/kafka-cluster.sh stop DIR [ID...]       # SIGTERM, SIGKILL after KAFKA_STOP_TIMEOUT
#   tools/bench/kafka-cluster.sh pids DIR               # "<node id> <pid>" per running node
#   tools/bench/kafka-cluster.sh active-controller DIR  # node id of the active KRaft controller
#
# Environment (start reads all but KAFKA_STOP_TIMEOUT; the other commands find the ports in DIR):
#   KAFKA_VERSION, FERRY_KAFKA_JARS  as in tools/kafka-jars.sh (default Kafka 4.4.0)
#   KAFKA_BASE_PORT        node i's broker listener: 127.0.0.1:KAFKA_BASE_PORT+i-1 (default 19092)
#   KAFKA_CONTROLLER_PORT  node i's controller listener: ...+i-1 (default KAFKA_BASE_PORT+100)
#   KAFKA_HEAP_OPTS        heap of each node (default -Xmx512m -Xms256m)
#   KAFKA_JVM_PERFORMANCE_OPTS  GC flags (default those of Kafka's kafka-run-class.sh)
#   KAFKA_OPTS             more JVM flags for each node
#   KAFKA_LOG_LEVEL        root log level of the nodes (default INFO)
#   KAFKA_EXTRA_CONFIG     lines appended to every server.properties (they override the defaults)
#   KAFKA_START_TIMEOUT    seconds start waits for the cluster (default 120)
#   KAFKA_STOP_TIMEOUT     seconds stop waits after SIGTERM before SIGKILL (default 30)
#   SECURE=1               the client listener (KAFKA_BASE_PORT+i-1) is SASL_SSL with SCRAM-SHA-512
#       only; the brokers talk to each other on a PLAINTEXT listener REPLICATION at
#       KAFKA_REPLICATION_PORT+i-1 (default KAFKA_BASE_PORT+200), or, with SECURE_INTER_BROKER=1,
#       over SASL_SSL too (SCRAM-SHA-512 as SECURE_USER, trusting SECURE_TRUSTSTORE). Needs
#       SECURE_KEYSTORE (PEM: the certificate chain and the unencrypted private key, as `ferry
#       certs` writes server.pem), SECURE_TRUSTSTORE (PEM CA of that certificate, for the clients)
#       and SECURE_PASSWORD; SECURE_USER (default admin) gets a SCRAM-SHA-512 credential when DIR
#       is formatted (`kafka-storage format --add-scram`: on the first start only). Writes
#       DIR/client.properties, a Kafka client config for that user, which the commands here use.
set -euo pipefail
tools="$(cd "$(dirname "$0")/.." && pwd)"
usage() { echo "usage: $0 start|stop|pids|active-controller DIR [ID...]" >&2; exit 2; }
[ $# -ge 2 ] || usage
cmd=$1
[ "$cmd" = start ] && mkdir -p "$2"
[ -d "$2" ] || { echo "kafka-cluster: no directory $2" >&2; exit 1; }
# The physical path: a node's command line holds it, and stop matches on it.
dir="$(cd "$2" && pwd -P)"
shift 2
java_bin="${JAVA_HOME:+$JAVA_HOME/bin/}java"
# The GC flags of Kafka's own kafka-run-class.sh, so the nodes run as a stock install would.
gc_opts="-server -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35"
gc_opts+=" -XX:+ExplicitGCInvokesConcurrent -Djava.awt.headless=true"
jars=""

tool() { # CLASS ARGS...: runs a Kafka tool class for at most 30 s, logging only errors (to stderr)
  [ -n "$jars" ] || jars="$("$tools/kafka-jars.sh" | tail -n 1)"
  timeout 30 "$java_bin" -Xmx256m -Dlog4j2.configurationFile="$tools/kafka-log4j2.properties" \
    -Dferry.log.level=ERROR -cp "$jars/*" "$@"
}

pid_of() { # ID: the PID of node ID if it runs, else fails
  local pid
  pid="$(cat "$dir/n$1/pid" 2>/dev/null)" || return 1
  # The command line must be this node's, so a reused PID (or a zombie) never counts.
  tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" |
    grep -qF "kafka.Kafka $dir/n$1/server.properties" || return 1
  echo "$pid"
}

stop_nodes() { # ID...
  local i pid live=() deadline=$((SECONDS + ${KAFKA_STOP_TIMEOUT:-30}))
  for i in "$@"; do
    if pid="$(pid_of "$i")"; then kill -TERM "$pid" 2>/dev/null || true; live+=("$i"); fi
  done
  while [ ${#live[@]} -gt 0 ]; do
    local still=()
    for i in "${live[@]}"; do pid_of "$i" >/dev/null && still+=("$i"); done
    live=("${still[@]+"${still[@]}"}")
    [ ${#live[@]} -gt 0 ] || break
    if [ $SECONDS -ge $deadline ]; then
      for i in "${live[@]}"; do
        pid="$(pid_of "$i")" || continue
        echo "kafka-cluster: node $i ignored SIGTERM, sending SIGKILL" >&2
        kill -KILL "$pid" 2>/dev/null || true
      done
      deadline=$((SECONDS + 10))
    fi
    sleep 0.2
  done
  for i in "$@"; do rm -f "$dir/n$i/pid"; done
}

fail_start() { # MESSAGE: shows the logs' tails, stops the cluster, exits
  echo "kafka-cluster: $1" >&2
  for i in 1 2 3; do
    echo "== tail of $dir/n$i/server.log" >&2
    tail -n 20 "$dir/n$i/server.log" >&2 || true
  done
  stop_nodes 1 2 3
  exit 1
}

new_uuid() { # a cluster id as `kafka-storage random-uuid` makes it, without starting a JVM
  local id
  # 16 random bytes in URL-safe base64 without padding; Kafka avoids a leading '-' too.
  id=-
  while [ "${id:0:1}" = - ]; do
    id="$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=')"
  done
  echo "$id"
}

port_used() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# The listener lines of node I's server.properties.
listener_config() { # I base ctl repl
  local port=$(($2 + $1 - 1)) ctl=$(($3 + $1 - 1)) repl=$(($4 + $1 - 1))
  if [ -z "${SECURE:-}" ]; then
    cat <<EOF
listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$ctl
advertised.listeners=PLAINTEXT://127.0.0.1:$port
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
inter.broker.listener.name=PLAINTEXT
EOF
    return
  fi
  local jaas="org.apache.kafka.common.security.scram.ScramLoginModule required"
  if [ -n "${SECURE_INTER_BROKER:-}" ]; then
    cat <<EOF
listeners=SASL_SSL://127.0.0.1:$port,CONTROLLER://127.0.0.1:$ctl
advertised.listeners=SASL_SSL://127.0.0.1:$port
listener.security.protocol.map=SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT
inter.broker.listener.name=SASL_SSL
sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=$jaas username="${SECURE_USER:-admin}" password="$SECURE_PASSWORD";
ssl.truststore.type=PEM
ssl.truststore.location=$SECURE_TRUSTSTORE
EOF
  else
    # The broker's SCRAM login module needs a JAAS entry even when it never logs in itself.
    cat <<EOF
listeners=SASL_SSL://127.0.0.1:$port,CONTROLLER://127.0.0.1:$ctl,REPLICATION://127.0.0.1:$repl
advertised.listeners=SASL_SSL://127.0.0.1:$port,REPLICATION://127.0.0.1:$repl
listener.security.protocol.map=SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT,REPLICATION:PLAINTEXT
inter.broker.listener.name=REPLICATION
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=$jaas;
EOF
  fi
  cat <<EOF
sasl.enabled.mechanisms=SCRAM-SHA-512
ssl.keystore.type=PEM
ssl.keystore.location=$SECURE_KEYSTORE
EOF
}

write_client_config() { # DIR/client.properties when SECURE=1; removed otherwise
  if [ -z "${SECURE:-}" ]; then
    rm -f "$dir/client.properties"
    return
  fi
  cat >"$dir/client.properties" <<EOF
security.protocol=SASL_SSL
sasl.mechanism=SCRAM-SHA-512
sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="${SECURE_USER:-admin}" password="$SECURE_PASSWORD";
ssl.truststore.type=PEM
ssl.truststore.location=$SECURE_TRUSTSTORE
EOF
}

# The tools' --command-config when DIR's cluster asks for a login (none otherwise).
command_config() { [ ! -f "$dir/client.properties" ] || echo "--command-config $dir/client.properties"; }

start() {
  local base=${KAFKA_BASE_PORT:-19092} i n p v
  local ctl=${KAFKA_CONTROLLER_PORT:-$((base + 100))}
  local repl=${KAFKA_REPLICATION_PORT:-$((base + 200))}
  local ports=("$base" "$ctl") scram=()
  if [ -n "${SECURE:-}" ]; then
    for v in SECURE_KEYSTORE SECURE_TRUSTSTORE SECURE_PASSWORD; do
      [ -n "${!v:-}" ] || { echo "kafka-cluster: SECURE=1 needs $v" >&2; exit 1; }
    done
    for v in "$SECURE_KEYSTORE" "$SECURE_TRUSTSTORE"; do
      [ -f "$v" ] || { echo "kafka-cluster: no file $v" >&2; exit 1; }
    done
    [ -n "${SECURE_INTER_BROKER:-}" ] || ports+=("$repl")
    scram=(--add-scram "SCRAM-SHA-512=[name=${SECURE_USER:-admin},password=$SECURE_PASSWORD]")
  fi
  local voters="1@127.0.0.1:$ctl,2@127.0.0.1:$((ctl + 1)),3@127.0.0.1:$((ctl + 2))"
  local bootstrap="127.0.0.1:$base,127.0.0.1:$((base + 1)),127.0.0.1:$((base + 2))"
  jars="$("$tools/kafka-jars.sh" | tail -n 1)"
  [ -f "$dir/cluster-id" ] || new_uuid >"$dir/cluster-id"
  local started=$SECONDS todo=()
  for i in 1 2 3; do pid_of "$i" >/dev/null || todo+=("$i"); done
  # Checked before any node starts: a port held by something else would fake readiness.
  for i in "${todo[@]+"${todo[@]}"}"; do
    for p in "${ports[@]}"; do
      p=$((p + i - 1))
      port_used "$p" || continue
      echo "kafka-cluster: 127.0.0.1:$p is in use (see KAFKA_BASE_PORT, KAFKA_CONTROLLER_PORT, KAFKA_REPLICATION_PORT)" >&2
      exit 1
    done
  done
  for i in "${todo[@]+"${todo[@]}"}"; do
    n="$dir/n$i"
    mkdir -p "$n"
    # The metadata log has a dir of its own so that d0 and d1 hold only partitions.
    cat >"$n/server.properties" <<EOF
process.roles=broker,controller
node.id=$i
controller.quorum.voters=$voters
$(listener_config "$i" "$base" "$ctl" "$repl")
controller.listener.names=CONTROLLER
log.dirs=$n/d0,$n/d1
metadata.log.dir=$n/meta
num.partitions=1
auto.create.topics.enable=false
offsets.topic.replication.factor=3
transaction.state.log.replication.factor=3
transaction.state.log.min.isr=2
group.initial.rebalance.delay.ms=0
${KAFKA_EXTRA_CONFIG:-}
EOF
    if [ ! -f "$n/meta/meta.properties" ]; then
      tool kafka.tools.StorageTool format --config "$n/server.properties" \
        --cluster-id "$(cat "$dir/cluster-id")" --ignore-formatted "${scram[@]+"${scram[@]}"}" \
        >>"$n/server.log" 2>&1 ||
        fail_start "formatting node $i failed"
    fi
    # shellcheck disable=SC2086 # the *_OPTS hold several flags
    nohup "$java_bin" ${KAFKA_HEAP_OPTS:--Xmx512m -Xms256m} \
      ${KAFKA_JVM_PERFORMANCE_OPTS:-$gc_opts} \
      ${KAFKA_OPTS:-} -Dlog4j2.configurationFile="$tools/kafka-log4j2.properties" \
      -Dferry.log.level="${KAFKA_LOG_LEVEL:-INFO}" -cp "$jars/*" \
      kafka.Kafka "$n/server.properties" </dev/null >>"$n/server.log" 2>&1 &
    echo $! >"$n/pid"
  done
  echo "$bootstrap" >"$dir/bootstrap"
  write_client_config
  # Ready: the metadata every broker serves lists all 3 brokers (registered and unfenced).
  local deadline=$((SECONDS + ${KAFKA_START_TIMEOUT:-120})) out
  while :; do
    for i in 1 2 3; do pid_of "$i" >/dev/null || fail_start "node $i exited"; done
    # shellcheck disable=SC2046 # the flag and its file, or nothing
    out="$(tool org.apache.kafka.tools.BrokerApiVersionsCommand \
      --bootstrap-server "$bootstrap" $(command_config) 2>&1)" || true
    [ "$(grep -oE '\(id: [0-9]+' <<<"$out" | sort -u | wc -l)" -lt 3 ] || break
    [ $SECONDS -lt $deadline ] || fail_start "not ready after ${KAFKA_START_TIMEOUT:-120} s"
    sleep 1
  done
  echo "kafka-cluster: 3 nodes ready in $((SECONDS - started)) s" >&2
  echo "$bootstrap"
}

case "$cmd" in
  start) [ $# -eq 0 ] || usage; start ;;
  stop)
    [ $# -gt 0 ] || set -- 1 2 3
    for i; do case "$i" in 1|2|3) ;; *) usage ;; esac; done
    stop_nodes "$@" ;;
  pids) for i in 1 2 3; do pid="$(pid_of "$i")" && echo "$i $pid"; done; true ;;
  active-controller)
    [ -f "$dir/bootstrap" ] || { echo "kafka-cluster: $dir was never started" >&2; exit 1; }
    # shellcheck disable=SC2046 # the flag and its file, or nothing
    out="$(tool org.apache.kafka.tools.MetadataQuorumCommand \
      --bootstrap-server "$(cat "$dir/bootstrap")" $(command_config) describe --status)"
    sed -n 's/^LeaderId:[[:space:]]*\([0-9]*\).*/\1/p' <<<"$out" | grep . ;;
  *) usage ;;
esac
