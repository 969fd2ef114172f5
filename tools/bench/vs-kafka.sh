#!/usr/bin/env bash
# Ferry against Apache Kafka 4.x (KRaft) on this machine, one system after the other in one run,
# both driven by Kafka's own tools over the Kafka protocol:
#   - produce: kafka-producer-perf-test, acks=all, replication factor 3, RECORD_BYTES records;
#   - consumer groups (GROUP_ROWS), each once per group protocol of GROUP_PROTOCOLS: `classic`,
#     and KIP-848's `consumer` (its rows end in _848). Both systems run with Kafka's default
#     group.initial.rebalance.delay.ms, 3000 (Ferry's is fixed; kafka-cluster.sh's 0 is set back
#     to the default here), so a new classic group waits 3 s for more members on both:
#       consume: kafka-consumer-perf-test with a group (--group), reading RECORDS of the produce
#         run's records (after RECORDS/5 unmeasured); its fetch.MB.sec and fetch.nMsg.sec, which
#         leave out the group's join (a fraction of a second at RECORDS=20000: noisy);
#       stable: STABLE_MEMBERS (10) Java consumers of one new group, threads of one process,
#         start together; the time until each has partitions and the group is described Stable
#         (tools/bench/GroupBench.java). Classic: Kafka ends the join phase at the end of the
#         first 3 s period in which no member came, so 6 s when they all come at once; Ferry 3 s
#         after the last member came. KIP-848: a partition moves to a new member only after its
#         owner gave it up, each learning it in a heartbeat (every 5 s on both);
#       commits: COMMIT_MEMBERS (16) consumers of one group in one process, each committing
#         (commitSync) after every poll for COMMIT_SECONDS (10) s; commits per second and the
#         p99 commit latency (a commit is answered once the offsets topic's in-sync replicas
#         hold it, on both);
#       failover: one consumer committing in a loop; SIGKILL of its group coordinator's process
#         (found by describing the group; a group is picked whose coordinator is not the active
#         controller, whose loss is the controller failover row's), then the time until a commit
#         succeeds again; the node is started again afterwards. Kafka moves the coordinator once
#         its controller fences the dead broker (broker.session.timeout.ms, 9 s);
#   - reassignment submit of each size in SIZES (empty partitions, metadata only): every
#     partition of a topic on broker 1 moves to broker 2 with one
#     `kafka-reassign-partitions --execute`, started once the system's nodes are idle after
#     creating the partitions (settle); the time until it is accepted, then until `--list`
#     shows no move left;
#   - the same submit by one request from Kafka's Java admin client (SubmitApi.java) for each
#     size in API_SIZES, on partitions of its own, after the runs above: the time to accepted
#     without the tool's JVM start and its reads before the request, the client connected and
#     warmed up (the _api_ rows; not waited for);
#   - cancel: CANCEL partitions on broker 1, one 100 KiB record each (fill-partitions.py), start
#     moving to broker 2 under a 1 B/s throttle (Kafka's first fetch still copies up to 10 MiB,
#     so about 100 partitions may finish); the number still moving, then the time from
#     `--cancel` until none is listed; then the same moves started again by the tool and
#     cancelled by one request from Kafka's Java admin client (SubmitApi.java), timed from the
#     request until none is listed (the _api_ row: the tool's JVM start and its reads are about 3 s of the
#     first row, on both systems);
#   - moves of one partition of MOVE_MB MiB (100 KiB records): throttled between brokers at each
#     rate of RATES MB/s (measured duration over size/rate), unthrottled between brokers, and
#     between the two log dirs of one broker (AlterReplicaLogDirs through the same tool), each
#     in MB/s and against `cp -r` plus `sync` of the same folder; timed from the tool's return
#     (the move accepted) until kafka-python sees it done, from a poller started before the
#     tool, so that neither the tool's JVM nor the poller's start-up is counted;
#   - compaction (COMPACT_MB, 150; 0 leaves it out): one clean of a dirty log of COMPACT_MB MiB
#     (keyed records, 100,000 keys, 100-byte values, 64 MiB segments) by each system's own
#     cleaner code in a process of its own, before the system's nodes start: ferry-compact-bench
#     and tools/bench/CompactBench.java, the same log written the same way; the dirty bytes over
#     the clean's time, median of COMPACT_ROUNDS (5) rounds (Kafka's first rounds run before its
#     JIT has compiled the cleaner);
#   - drain (DRAIN_MB, 512; 0 leaves it out), first on each fresh cluster: DRAIN_PARTITIONS (100)
#     partitions of replication factor 2, each with a replica on broker 3, filled with DRAIN_MB
#     MiB; a steady producer (tools/bench/steady-produce.py: DRAIN_RATE, 200, records of 1 KiB a
#     second, acks=all, to a topic on brokers 1 and 2, which receive the drained replicas) runs
#     DRAIN_IDLE_S (15) s idle, then through the drain; its p99 idle and during the drain, and
#     the drain's time. `bulk`: every move at once with `kafka-reassign-partitions --execute`,
#     unthrottled, on both systems. Ferry only, after the moves are put back: `ferry plan drain
#     --broker 3` with DRAIN_CAP (4) moves into and out of each broker (and DRAIN_THROTTLE B/s
#     if set), then `undrain`; each record's send time and latency go to the scratch dir's
#     steady-*/latencies.csv (KEEP_WORK=1 keeps them);
#   - memory: the summed RSS of the system's processes after the largest submit;
#   - controller failover: SIGKILL of the active controller's process (Ferry's runs beside the
#     Raft leader), then the time until a CreateTopics succeeds again through the survivors
#     (tools/bench/admin-failover.py, the same kafka-python client for both).
# Prints one table (each figure for both, and Ferry/Kafka; n/a where a system refused or failed,
# with the reason on stderr) and the JSON lines behind it. RECORDS=0 and SIZES= leave out the
# produce and submit runs (RECORDS=0 the consume rows too), GROUP_ROWS= the group rows. (Not
# GROUPS: bash keeps that name for the user's group ids.)
#
#   tools/bench/vs-kafka.sh      # 100,000 records; sizes 1000, 10000, 100000; 1 GiB moves
#   RECORDS=20000 SIZES=1000 CANCEL=1000 MOVE_MB=64 RATES=10 tools/bench/vs-kafka.sh  # a quick look
#   RECORDS=20000 SIZES= API_SIZES= CANCEL=0 MOVE_MB=0 tools/bench/vs-kafka.sh  # groups (and
#       produce, memory, controller failover) only
#
# Each tool run starts a JVM (about a second): both systems pay it alike. Kafka's nodes run with
# Kafka's own default heap, 1 GiB (KAFKA_NODE_HEAP), and kafka-cluster.sh's other defaults; Ferry's with tools/bench/ferry-cluster.sh
# (release build, in CARGO_TARGET_DIR if set). A produce run of RECORDS/5 records warms each
# system up first, unmeasured.
# Settings (environment): RECORDS, RECORD_BYTES, SIZES, API_SIZES, CANCEL, MOVE_MB, RATES, SYSTEMS ("kafka ferry"),
# GROUP_ROWS ("consume stable commits failover"), GROUP_PROTOCOLS ("classic consumer"),
# STABLE_MEMBERS, COMMIT_MEMBERS, COMMIT_SECONDS, COMPACT_MB, COMPACT_ROUNDS, DRAIN_MB,
# DRAIN_PARTITIONS, DRAIN_RATE, DRAIN_IDLE_S, DRAIN_CAP, DRAIN_THROTTLE,
# COMPLETE_TIMEOUT (seconds a submit may take to complete, 300), KAFKA_VERSION, KEEP_WORK=1 (keep
# the scratch dir and the nodes' logs),
# FERRY_BENCH_PORT, KAFKA_BASE_PORT, TMPDIR.
set -euo pipefail
cd "$(dirname "$0")/../.."

RECORDS=${RECORDS:-100000}
RECORD_BYTES=${RECORD_BYTES:-1024}
SIZES=${SIZES-1000 10000 100000}
API_SIZES=${API_SIZES-1000 10000}
CANCEL=${CANCEL:-10000}
MOVE_MB=${MOVE_MB:-1024}
RATES=${RATES-10 50}
SYSTEMS=${SYSTEMS:-kafka ferry}
GROUP_ROWS=${GROUP_ROWS-consume stable commits failover}
GROUP_PROTOCOLS=${GROUP_PROTOCOLS-classic consumer}
STABLE_MEMBERS=${STABLE_MEMBERS:-10}
COMMIT_MEMBERS=${COMMIT_MEMBERS:-16}
COMMIT_SECONDS=${COMMIT_SECONDS:-10}
COMPACT_MB=${COMPACT_MB:-150}
COMPACT_ROUNDS=${COMPACT_ROUNDS:-5}
DRAIN_MB=${DRAIN_MB:-512}
DRAIN_PARTITIONS=${DRAIN_PARTITIONS:-100}
DRAIN_RATE=${DRAIN_RATE:-200}
DRAIN_IDLE_S=${DRAIN_IDLE_S:-15}
DRAIN_CAP=${DRAIN_CAP:-4}

cargo build --release -q -p tools --bin ferry
if [ "$COMPACT_MB" -gt 0 ] && ! cargo build --release -q -p tools --bin ferry-compact-bench; then
  echo "ferry-compact-bench did not build: Ferry's compaction figure is n/a" >&2
fi
kafka_jars=$(tools/kafka-jars.sh | tail -n 1)
bin=${CARGO_TARGET_DIR:-$PWD/target}/release
work=$(mktemp -d "${TMPDIR:-/tmp}/ferry-vs-kafka.XXXXXX")
pids=()
. tools/bench/ferry-cluster.sh
kafka_dir=$work/kafka
poller=""
cleanup() {
  [ -z "$poller" ] || kill "$poller" 2>/dev/null || true
  stop_all
  [ -d "$kafka_dir" ] && tools/bench/kafka-cluster.sh stop "$kafka_dir" >/dev/null 2>&1 || true
  if [ -n "${KEEP_WORK:-}" ]; then echo "kept $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT
results=$work/results.jsonl
: >"$results"

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }
record() { # system metric value
  echo "{\"system\":\"$1\",\"metric\":\"$2\",\"value\":$3}" | tee -a "$results"
}
# A tool run that hangs (Kafka's admin client can, after an error in its own thread) fails after
# TOOL_TIMEOUT seconds instead of holding the run.
tool() { timeout "${TOOL_TIMEOUT:-900}" tools/kafka-tool.sh "$@"; }

# Creates TOPIC with the replica list ASSIGNMENT (kafka-topics --replica-assignment), retrying
# while the cluster settles.
create() { # bootstrap topic assignment
  for try in $(seq 1 120); do
    tool kafka-topics --bootstrap-server "$1" --create --topic "$2" --replica-assignment "$3" \
      >"$work/create.out" 2>&1 && return 0
    if [ "$try" -eq 120 ] || grep -q "PolicyViolation\|InvalidRequest\|InvalidReplicaAssignment" "$work/create.out"; then
      cat "$work/create.out" >&2
      return 1
    fi
    sleep 0.5
  done
}

produce() { # system bootstrap
  [ "$RECORDS" -gt 0 ] || return 0
  create "$2" perf "1:2:3,2:3:1,3:1:2"
  local line
  # Unmeasured first: both systems' JIT (the tool's, and Kafka's brokers') and caches warm up.
  tool kafka-producer-perf-test --topic perf --num-records $((RECORDS / 5)) --record-size "$RECORD_BYTES" \
    --throughput -1 --producer-props bootstrap.servers="$2" acks=all >/dev/null
  line=$(tool kafka-producer-perf-test --topic perf --num-records "$RECORDS" --record-size "$RECORD_BYTES" \
    --throughput -1 --producer-props bootstrap.servers="$2" acks=all | tail -n 1)
  echo "$1: $line" >&2
  # "N records sent, R records/sec (M MB/sec), A ms avg latency, X ms max latency, p50, p95, p99, p99.9"
  record "$1" produce_records_per_s "$(echo "$line" | sed -E 's/.*sent, ([0-9.]+) records\/sec.*/\1/')"
  record "$1" produce_mb_per_s "$(echo "$line" | sed -E 's/.*\(([0-9.]+) MB\/sec\).*/\1/')"
  record "$1" produce_p99_ms "$(echo "$line" | sed -E 's/.* ([0-9.]+) ms 99th.*/\1/')"
}

# The group rows (GROUP_ROWS): each for each protocol of GROUP_PROTOCOLS.
has_row() { [[ " $GROUP_ROWS " == *" $1 "* ]]; }
# A metric's tag for a group protocol: none for classic, _848 for KIP-848's consumer protocol.
proto_tag() { [ "$1" = classic ] || echo _848; }
group_bench() { # mode bootstrap protocol topic args...: tools/bench/GroupBench.java
  timeout 300 java -Xmx512m -Dlog4j2.configurationFile=tools/kafka-log4j2.properties \
    -Dferry.log.level=ERROR -cp "$kafka_jars/*" tools/bench/GroupBench.java "$@"
}

# kafka-consumer-perf-test with a group, over the produce run's records.
consume() { # system bootstrap protocol
  local sys=$1 tag line props=$work/consumer-$3.properties
  tag=$(proto_tag "$3")
  if [ "$RECORDS" -eq 0 ]; then
    echo "$sys: RECORDS=0: no records to consume" >&2
    return 0
  fi
  echo "group.protocol=$3" >"$props"
  # --messages and --consumer.config, which every 4.x takes (4.4 warns they are deprecated).
  tool kafka-consumer-perf-test --bootstrap-server "$2" --topic perf --messages $((RECORDS / 5)) \
    --group "cperf-warm-$3" --consumer.config "$props" >/dev/null 2>&1 || true
  # "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec,
  # rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec": the line under the header.
  line=$(tool kafka-consumer-perf-test --bootstrap-server "$2" --topic perf --messages "$RECORDS" \
    --group "cperf-$3" --consumer.config "$props" 2>"$work/consume.err" | sed -n '/^start.time/{n;p;}') || true
  echo "$sys ($3): $line" >&2
  # It stops after the poll that reaches RECORDS, so it may count a few more.
  if ! awk -F', ' -v n="$RECORDS" '{ exit !($5 >= n) }' <<<"$line"; then
    echo "$sys: kafka-consumer-perf-test ($3) did not read $RECORDS records: $(tail -n 2 "$work/consume.err")" >&2
    record "$sys" "consume${tag}_mb_per_s" null
    record "$sys" "consume${tag}_records_per_s" null
    return 0
  fi
  record "$sys" "consume${tag}_mb_per_s" "$(awk -F', ' '{print $9}' <<<"$line")"
  record "$sys" "consume${tag}_records_per_s" "$(awk -F', ' '{printf "%.0f", $10}' <<<"$line")"
}

# The group rows but the failover, which kills a node and runs last (group_failover).
groups() { # system bootstrap
  local sys=$1 bs=$2 p tag out
  for p in $GROUP_PROTOCOLS; do
    tag=$(proto_tag "$p")
    if has_row consume; then consume "$sys" "$bs" "$p"; fi
    if has_row stable; then
      out=$(group_bench stable "$bs" "$p" "stable$tag" "$STABLE_MEMBERS") || out=null
      record "$sys" "group_stable_${STABLE_MEMBERS}${tag}_ms" "$out"
    fi
    if has_row commits; then
      if out=$(group_bench commits "$bs" "$p" "commits$tag" "$COMMIT_MEMBERS" "$COMMIT_SECONDS"); then
        record "$sys" "commits_${COMMIT_MEMBERS}${tag}_per_s" "${out% *}"
        record "$sys" "commit_${COMMIT_MEMBERS}${tag}_p99_ms" "${out#* }"
      else
        record "$sys" "commits_${COMMIT_MEMBERS}${tag}_per_s" null
        record "$sys" "commit_${COMMIT_MEMBERS}${tag}_p99_ms" null
      fi
    fi
  done
}

# Coordinator failover, once per protocol: GroupBench kills the coordinator's node (never the
# node AVOID) and times until a commit succeeds again; RESTART (a command) then starts the node
# again. PIDS_OF prints "<node id>=<pid>,..." and AVOID_OF the active controller's node id, each
# asked again before each kill.
group_failover() { # system bootstrap pids_of avoid_of restart
  local sys=$1 p tag out
  has_row failover || return 0
  for p in $GROUP_PROTOCOLS; do
    tag=$(proto_tag "$p")
    if out=$(group_bench failover "$2" "$p" "failover$tag" "$($4)" "$($3)"); then
      echo "$sys ($p): a commit succeeded ${out% *} ms after node ${out#* } was killed" >&2
      record "$sys" "group_failover${tag}_ms" "${out% *}"
    else
      record "$sys" "group_failover${tag}_ms" null
    fi
    $5
  done
}

# One clean of the same dirty log by each system's own cleaner code, in a process of its own.
compaction() { # system
  [ "$COMPACT_MB" -gt 0 ] || return 0
  local out
  rm -rf "$work/compact"
  if [ "$1" = kafka ]; then
    out=$(java -Xmx1g -Dlog4j2.configurationFile=tools/kafka-log4j2.properties -Dferry.log.level=ERROR \
      -cp "$kafka_jars/*" tools/bench/CompactBench.java "$work/compact" "$COMPACT_MB" "$COMPACT_ROUNDS" 2>"$work/compact.err") || true
  else
    out=$("$bin/ferry-compact-bench" --work-dir "$work/compact" --size-mib "$COMPACT_MB" \
      --rounds "$COMPACT_ROUNDS" 2>"$work/compact.err") || true
  fi
  # "compaction throughput (...): median M MB/s, min A, max B", the last line of either.
  out=$(sed -n 's/.*median \([0-9.]*\) MB\/s.*/\1/p' <<<"$out")
  [ -n "$out" ] || echo "$1: the compaction bench failed: $(tail -n 3 "$work/compact.err")" >&2
  record "$1" compaction_mb_per_s "${out:-null}"
}

# Kafka's controller takes at most 10,000 records per request (a topic of 10,000 partitions is
# 10,001), so the partitions are spread over topics of at most this many.
TOPIC_PARTITIONS=5000

# Creates TOTAL partitions on broker 1 in topics PREFIX-0, PREFIX-1, ... of at most PER_TOPIC
# each, and sets the caller's `specs` to their "topic:count".
create_on_broker_1() { # bootstrap prefix total per_topic
  local left=$3 count t=0
  specs=()
  while [ "$left" -gt 0 ]; do
    count=$((left < $4 ? left : $4))
    create "$1" "$2-$t" "$(seq "$count" | sed 's/.*/1/' | paste -sd, -)" || return 1
    specs+=("$2-$t:$count")
    left=$((left - count))
    t=$((t + 1))
  done
}

# Writes to FILE the plan that moves every partition of the caller's `specs` to broker 2.
plan_to_broker_2() { # file
  {
    printf '{"version":1,"partitions":['
    for tc in "${specs[@]}"; do
      seq 0 $((${tc#*:} - 1)) | sed "s/.*/{\"topic\":\"${tc%:*}\",\"partition\":&,\"replicas\":[2]}/"
    done | paste -sd, -
    printf ']}\n'
  } >"$1"
}

# One AlterPartitionReassignments from Kafka's Java admin client, timed (tools/bench/SubmitApi.java).
submit_api_call() { # bootstrap plan (broker|cancel) [wall-clock file]
  java -Xmx512m -Dlog4j2.configurationFile=tools/kafka-log4j2.properties \
    -Dlog4j.configuration=file:tools/kafka-log4j.properties -Dferry.log.level=WARN \
    -cp "$kafka_jars/*" tools/bench/SubmitApi.java "$@"
}

# The PIDs of SYSTEM's nodes.
system_pids() { # system
  if [ "$1" = kafka ]; then
    tools/bench/kafka-cluster.sh pids "$kafka_dir" | awk '{print $2}'
  else
    printf '%s\n' "${pids[@]}"
  fi
}

# Waits until SYSTEM's nodes are idle (under 15% of one core, summed, over 1 s; at most 30 s), so
# that a timed request does not share the CPU with the system still taking in the partitions
# just created (both systems create each partition's log on its brokers after the request).
cpu_ticks() { # system
  # shellcheck disable=SC2046 # one PID per word
  awk '{ t += $14 + $15 } END { print t + 0 }' $(system_pids "$1" | sed 's|.*|/proc/&/stat|') 2>/dev/null
}
settle() { # system
  local tick prev cpu
  tick=$(getconf CLK_TCK)
  prev=$(cpu_ticks "$1")
  for _ in $(seq 1 30); do
    sleep 1
    cpu=$(cpu_ticks "$1")
    [ $((cpu - prev)) -le $((tick * 15 / 100)) ] && return 0
    prev=$cpu
  done
  echo "$1: still busy after 30 s; timing the request anyway" >&2
}

submit() { # system bootstrap size
  local n=$3 plan started accepted out specs=()
  # A system that cannot create the partitions (a Kafka broker fenced under the load) gets n/a
  # for this size, and the run goes on.
  if ! create_on_broker_1 "$2" "rs$n" "$n" "$TOPIC_PARTITIONS"; then
    echo "$1: creating the $n partitions to move failed" >&2
    record "$1" "submit_${n}_accepted_s" null
    record "$1" "submit_${n}_complete_s" null
    return 0
  fi
  plan=$work/plan-$1-$n.json
  plan_to_broker_2 "$plan"
  settle "$1"
  # A topic just created may not be in every broker's metadata yet: that answer is retried,
  # and only the last try is timed.
  poller_start "$2"
  for _ in $(seq 1 30); do
    started=$(now)
    out=$(tool kafka-reassign-partitions --bootstrap-server "$2" --reassignment-json-file "$plan" --execute 2>&1) || true
    accepted=$(since "$started")
    grep -q "UnknownTopicOrPartition" <<<"$out" || break
    sleep 1
  done
  if ! grep -q "Successfully started partition reassignment" <<<"$out"; then
    echo "$1 refused a submit of $n partitions: $(tail -n 3 <<<"$out")" >&2
    poller_stop
    record "$1" "submit_${n}_accepted_s" null
    record "$1" "submit_${n}_complete_s" null
    return 0
  fi
  record "$1" "submit_${n}_accepted_s" "$accepted"
  if poller_wait "$started"; then
    record "$1" "submit_${n}_complete_s" "$secs"
  else
    echo "$1: moves of $n partitions not complete after ${COMPLETE_TIMEOUT:-300} s" >&2
    record "$1" "submit_${n}_complete_s" null
  fi
}

# SIZE new partitions on broker 1 moved to broker 2 by one AlterPartitionReassignments from
# kafka-python, timed from the request to its answer. Last in a run: the moves are not waited
# for, and Kafka's tool refuses a submit while any move is in progress.
submit_api() { # system bootstrap size
  local n=$3 plan specs=() secs
  if ! create_on_broker_1 "$2" "ra$n" "$n" "$TOPIC_PARTITIONS"; then
    echo "$1: creating the $n partitions of the API submit failed" >&2
    record "$1" "submit_${n}_api_accepted_s" null
    return 0
  fi
  plan=$work/plan-api-$1-$n.json
  plan_to_broker_2 "$plan"
  settle "$1"
  for _ in $(seq 1 30); do
    secs=$(submit_api_call "$2" "$plan" 2 2>"$work/api.err") && break
    grep -q "UnknownTopicOrPartition" "$work/api.err" || break
    sleep 1
  done
  if [ -z "$secs" ]; then
    echo "$1 refused an API submit of $n partitions: $(tail -n 1 "$work/api.err")" >&2
    secs=null
  fi
  record "$1" "submit_${n}_api_accepted_s" "$secs"
}

# One partition moving to broker TO (and, given, into log dir DIR): the Kafka tool's plan file.
plan_one() { # topic to [dir]
  local dirs=""
  [ -z "${3:-}" ] || dirs=",\"log_dirs\":[\"$3\"]"
  echo "{\"version\":1,\"partitions\":[{\"topic\":\"$1\",\"partition\":0,\"replicas\":[$2]$dirs}]}" >"$work/one.json"
  echo "$work/one.json"
}

# A poller of the moves (wait-moves.py --go: no move listed, or with BROKER TOPIC DIR, TOPIC-0
# of BROKER wholly in DIR), started before the move is submitted so that its own start-up (about
# 0.7 s) is not timed. `poller_wait STARTED` releases it once the move is accepted and sets
# `secs` to the seconds from STARTED until it saw the moves done; it fails after
# COMPLETE_TIMEOUT s. `poller_stop` ends it when the move was refused.
poller_start() { # bootstrap [broker topic dir]
  rm -f "$work/go" "$work/done-at"
  python3 tools/bench/wait-moves.py --go "$work/go" "$1" "${COMPLETE_TIMEOUT:-300}" "${@:2}" >"$work/done-at" &
  poller=$!
}
poller_wait() { # started
  touch "$work/go"
  local rc=0
  wait "$poller" || rc=$?
  poller=""
  [ "$rc" -eq 0 ] || return 1
  secs=$(awk -v a="$1" -v b="$(cat "$work/done-at")" 'BEGIN { printf "%.2f", b - a }')
}
poller_stop() {
  kill "$poller" 2>/dev/null || true
  wait "$poller" 2>/dev/null || true
  poller=""
}

# "<log dir> <is future 0|1> <bytes>" per replica of TOPIC-0 on broker BROKER.
replica_dirs() { # bootstrap broker topic
  tool kafka-log-dirs --bootstrap-server "$1" --describe --broker-list "$2" --topic-list "$3" 2>/dev/null |
    python3 -c '
import json, sys
for line in sys.stdin:
    if line.startswith("{"):
        for b in json.loads(line)["brokers"]:
            for d in b["logDirs"]:
                for p in d["partitions"]:
                    print(d["logDir"], int(p["isFuture"]), p["size"])'
}

mb_per_s() { awk -v b="$1" -v s="$2" 'BEGIN { printf "%.1f", b / 1e6 / s }'; }

moves() { # system bootstrap
  [ "$MOVE_MB" -gt 0 ] || return 0
  local sys=$1 bs=$2 at=1 to plan started bytes dir other moved
  create "$bs" mv "1"
  tool kafka-producer-perf-test --topic mv --num-records $((MOVE_MB * 10)) --record-size 104857 \
    --throughput -1 --producer-props bootstrap.servers="$bs" acks=1 batch.size=1048576 linger.ms=5 \
    max.request.size=4194304 >/dev/null
  bytes=$(replica_dirs "$bs" 1 mv | awk '$2 == 0 {print $3}')
  echo "$sys: mv-0 holds $bytes bytes" >&2
  for rate in $RATES unthrottled; do
    to=$((3 - at))
    plan=$(plan_one mv "$to")
    local throttle=()
    [ "$rate" = unthrottled ] || throttle=(--throttle $((rate * 1000000)))
    # Timed from the tool's return (the move is accepted by then), so that its JVM's start,
    # about a second, does not count as copying time.
    poller_start "$bs"
    tool kafka-reassign-partitions --bootstrap-server "$bs" --reassignment-json-file "$plan" --execute "${throttle[@]}" >/dev/null
    started=$(now)
    if ! poller_wait "$started"; then
      echo "$sys: the $rate move of mv-0 did not complete" >&2
      record "$sys" "move_${rate}_s" null
      return 0
    fi
    # Clears the throttles, as an operator would after the move.
    tool kafka-reassign-partitions --bootstrap-server "$bs" --reassignment-json-file "$plan" --verify >/dev/null 2>&1 || true
    if [ "$rate" = unthrottled ]; then
      record "$sys" move_brokers_mb_per_s "$(mb_per_s "$bytes" "$secs")"
    else
      record "$sys" "move_${rate}mb_s_over_ideal" "$(awk -v s="$secs" -v b="$bytes" -v r="$rate" 'BEGIN { printf "%.3f", s / (b / (r * 1e6)) }')"
    fi
    at=$to
  done
  # Between the two log dirs of broker $at (each system names them .../d0 and .../d1).
  dir=$(replica_dirs "$bs" "$at" mv | awk '$2 == 0 {print $1}')
  other="${dir%/d?}/d$((1 - ${dir: -1}))"
  plan=$(plan_one mv "$at" "$other")
  poller_start "$bs" "$at" mv "$other"
  tool kafka-reassign-partitions --bootstrap-server "$bs" --reassignment-json-file "$plan" --execute >/dev/null
  started=$(now)
  moved=""
  if poller_wait "$started"; then
    moved=$secs
  else
    echo "$sys: the dir move of mv-0 did not complete" >&2
  fi
  record "$sys" move_dirs_mb_per_s "$([ -z "$moved" ] && echo null || mb_per_s "$bytes" "$moved")"
  # The same folder copied by cp -r, then synced, on the same file system.
  started=$(now)
  cp -r "$other/mv-0" "$other/../cp-copy" && sync
  secs=$(since "$started")
  rm -rf "$other/../cp-copy"
  record "$sys" cp_sync_mb_per_s "$(mb_per_s "$bytes" "$secs")"
  [ -z "$moved" ] || record "$sys" move_dirs_over_cp "$(awk -v m="$moved" -v c="$secs" 'BEGIN { printf "%.2f", c / m }')"
}

# Kafka's tool writes a throttled move's replicas into each topic's
# *.replication.throttled.replicas config, one string, which its client cannot send past 32,767
# bytes ("'value' field is too long to be serialized", after which the tool hangs): at about
# 5,000 moving partitions of one topic. The cancel run's topics stay well under that.
CANCEL_TOPIC_PARTITIONS=1000

cancel() { # system bootstrap
  [ "$CANCEL" -gt 0 ] || return 0
  local sys=$1 bs=$2 specs=() plan moving started
  if ! create_on_broker_1 "$bs" cx "$CANCEL" "$CANCEL_TOPIC_PARTITIONS" ||
    ! python3 tools/bench/fill-partitions.py "$bs" 102400 "${specs[@]}"; then
    echo "$sys: creating or filling the cancel run's partitions failed" >&2
    record "$sys" "cancel_${CANCEL}_moving" null
    record "$sys" "cancel_${CANCEL}_s" null
    return 0
  fi
  plan=$work/cancel-$sys.json
  plan_to_broker_2 "$plan"
  if ! tool kafka-reassign-partitions --bootstrap-server "$bs" --reassignment-json-file "$plan" --execute --throttle 1 >"$work/cancel.out" 2>&1; then
    echo "$sys: the throttled submit of $CANCEL moves failed: $(grep -m1 -i "error\|exception" "$work/cancel.out")" >&2
  fi
  moving=$(tool kafka-reassign-partitions --bootstrap-server "$bs" --list 2>&1 | grep -c "adding: 2" || true)
  record "$sys" "cancel_${CANCEL}_moving" "$moving"
  poller_start "$bs"
  started=$(now)
  if ! tool kafka-reassign-partitions --bootstrap-server "$bs" --reassignment-json-file "$plan" --cancel >"$work/cancel.out" 2>&1; then
    echo "$sys: the cancel of $CANCEL moves failed: $(grep -v '^\s*at ' "$work/cancel.out" | tail -n 5)" >&2
  fi
  if poller_wait "$started"; then
    record "$sys" "cancel_${CANCEL}_s" "$secs"
  else
    echo "$sys: the cancel of $CANCEL moves did not roll back" >&2
    record "$sys" "cancel_${CANCEL}_s" null
  fi
  cancel_api "$sys" "$bs" "$plan"
}

# The cancel run's moves started again (by the tool, untimed) and cancelled by one
# AlterPartitionReassignments from kafka-python, timed from the request until none is listed.
cancel_api() { # system bootstrap plan
  local sys=$1 bs=$2 plan=$3 moving
  if ! tool kafka-reassign-partitions --bootstrap-server "$bs" --reassignment-json-file "$plan" --execute --throttle 1 >"$work/cancel.out" 2>&1; then
    echo "$sys: the second throttled submit of $CANCEL moves failed: $(grep -m1 -i "error\|exception" "$work/cancel.out")" >&2
  fi
  moving=$(tool kafka-reassign-partitions --bootstrap-server "$bs" --list 2>&1 | grep -c "adding: 2" || true)
  record "$sys" "cancel_${CANCEL}_api_moving" "$moving"
  poller_start "$bs"
  if ! submit_api_call "$bs" "$plan" cancel "$work/sent-at" >/dev/null 2>"$work/api.err"; then
    echo "$sys refused an API cancel of $CANCEL moves: $(tail -n 1 "$work/api.err")" >&2
  fi
  if [ -s "$work/sent-at" ] && poller_wait "$(cat "$work/sent-at")"; then
    record "$sys" "cancel_${CANCEL}_api_s" "$secs"
  else
    [ -z "$poller" ] || poller_stop
    echo "$sys: the API cancel of $CANCEL moves did not roll back" >&2
    record "$sys" "cancel_${CANCEL}_api_s" null
  fi
  rm -f "$work/sent-at"
}

# The drain rows' reassignment files: every partition of `dr` from broker 3 to the broker it does
# not hold (away), and back.
drain_plans() {
  local p o away="" back=""
  for p in $(seq 0 $((DRAIN_PARTITIONS - 1))); do
    o=$((1 + p % 2))
    away+="{\"topic\":\"dr\",\"partition\":$p,\"replicas\":[$((3 - o)),$o]},"
    back+="{\"topic\":\"dr\",\"partition\":$p,\"replicas\":[3,$o]},"
  done
  echo "{\"version\":1,\"partitions\":[${away%,}]}" >"$work/drain-away.json"
  echo "{\"version\":1,\"partitions\":[${back%,}]}" >"$work/drain-back.json"
}

# One drain under the steady producer: DRAIN_IDLE_S s idle, then `start` (a function) starts the
# drain and `wait_end` waits for its end; records the drain's seconds and the producer's p99s.
drain_once() { # system bootstrap tag start wait_end
  local sys=$1 bs=$2 tag=$3 d=$work/steady-$3 producer started
  rm -rf "$d" && mkdir -p "$d"
  python3 tools/bench/steady-produce.py "$bs" steady "$DRAIN_RATE" 1024 "$d" >"$d/out" 2>"$d/err" &
  producer=$!
  sleep "$DRAIN_IDLE_S"
  touch "$d/drain"
  started=$(now)
  if "$4" "$bs" && "$5" "$bs" "$started"; then
    record "$sys" "drain_${tag}_s" "$(since "$started")"
  else
    echo "$sys: the $tag drain did not end" >&2
    record "$sys" "drain_${tag}_s" null
  fi
  touch "$d/stop"
  wait "$producer" || echo "$sys: the steady producer failed: $(tail -n 3 "$d/err")" >&2
  python3 - "$d/out" "$sys" "$tag" "$results" <<'PY'
import json, sys
out, sys_, tag, results = sys.argv[1:]
try:
    r = json.loads(open(out).read().strip().splitlines()[-1])
except (IndexError, ValueError):
    r = {"idle": {}, "drain": {}, "errors": None}
idle, drain = r["idle"].get("p99_ms"), r["drain"].get("p99_ms")
rows = {
    f"drain_{tag}_idle_p99_ms": idle,
    f"drain_{tag}_p99_ms": drain,
    f"drain_{tag}_p99_over_idle": round(drain / idle, 2) if idle and drain else None,
    f"drain_{tag}_produce_errors": r["errors"],
}
with open(results, "a") as f:
    for metric, value in rows.items():
        line = json.dumps({"system": sys_, "metric": metric, "value": value})
        print(line)
        f.write(line + "\n")
PY
}

drain_bulk_start() { # bootstrap
  poller_start "$1"
  tool kafka-reassign-partitions --bootstrap-server "$1" --reassignment-json-file "$work/drain-away.json" \
    --execute >"$work/drain.out" 2>&1 || { poller_stop; cat "$work/drain.out" >&2; return 1; }
}
drain_bulk_wait() { poller_wait "$2"; }
drain_plan_start() { # bootstrap
  "$bin/ferry" plan drain --bootstrap-server "$endpoints" --broker 3 --max-moves-into-broker "$DRAIN_CAP" \
    --max-moves-out-of-broker "$DRAIN_CAP" ${DRAIN_THROTTLE:+--throttle "$DRAIN_THROTTLE"} >"$work/plan.out" 2>&1 || { cat "$work/plan.out" >&2; return 1; }
  plan_id=$(sed -n 's/^Started plan \([0-9]*\);.*/\1/p' "$work/plan.out" | head -1)
  [ -n "$plan_id" ] || { cat "$work/plan.out" >&2; return 1; }
}
drain_plan_wait() { # bootstrap started
  local try
  for try in $(seq 1 $((${COMPLETE_TIMEOUT:-300} * 2))); do
    "$bin/ferry" plan show "$plan_id" --bootstrap-server "$endpoints" 2>/dev/null | grep -q "^Plan $plan_id: .*, done" && return 0
    sleep 0.5
  done
  return 1
}

drain() { # system bootstrap
  [ "$DRAIN_MB" -gt 0 ] || return 0
  local sys=$1 bs=$2 p assignment=""
  for p in $(seq 0 $((DRAIN_PARTITIONS - 1))); do assignment+="3:$((1 + p % 2)),"; done
  create "$bs" dr "${assignment%,}"
  create "$bs" steady "1:2,2:1"
  tool kafka-producer-perf-test --topic dr --num-records $((DRAIN_MB * 10)) --record-size 104857 \
    --throughput -1 --producer-props bootstrap.servers="$bs" acks=1 batch.size=1048576 linger.ms=5 \
    max.request.size=4194304 >/dev/null
  drain_plans
  drain_once "$sys" "$bs" bulk drain_bulk_start drain_bulk_wait
  [ "$sys" = ferry ] || return 0
  # Back onto broker 3 (untimed), then the capped plan.
  poller_start "$bs"
  tool kafka-reassign-partitions --bootstrap-server "$bs" --reassignment-json-file "$work/drain-back.json" \
    --execute >/dev/null 2>&1 && poller_wait "$(now)" || { poller_stop; echo "$sys: the moves back failed" >&2; return 0; }
  drain_once "$sys" "$bs" plan_capped drain_plan_start drain_plan_wait
  "$bin/ferry" plan undrain --bootstrap-server "$endpoints" --broker 3 >/dev/null
}

memory() { # system pid...
  local sys=$1 kib=0
  shift
  for p in "$@"; do kib=$((kib + $(awk '/VmRSS/ {print $2}' "/proc/$p/status"))); done
  record "$sys" rss_mib $((kib / 1024))
}

# The survivors' Kafka addresses when node KILLED of three at BASE.. goes.
survivors() { # base killed
  for id in 1 2 3; do [ "$id" = "$2" ] || printf '127.0.0.1:%s,' $(($1 + id - 1)); done | sed 's/,$//'
}

failover() { # system base killed pid
  local ms
  if ms=$(python3 tools/bench/admin-failover.py "$(survivors "$2" "$3")" "$4" "failover-$1"); then
    record "$1" controller_failover_ms "$ms"
  else
    record "$1" controller_failover_ms null
  fi
}

# Starts Kafka's nodes that are not running; prints the bootstrap list.
kafka_start() {
  # Kafka's own default heap (kafka-server-start.sh): with 512 MiB a broker ran out of memory
  # taking in the cancel run's 10,000 moving partitions. Kafka's default initial rebalance delay,
  # as Ferry's.
  KAFKA_HEAP_OPTS=${KAFKA_NODE_HEAP:--Xmx1g -Xms1g} \
    KAFKA_EXTRA_CONFIG="group.initial.rebalance.delay.ms=3000${KAFKA_EXTRA_CONFIG:+
$KAFKA_EXTRA_CONFIG}" tools/bench/kafka-cluster.sh start "$kafka_dir" | tail -n 1
}
kafka_pids() { tools/bench/kafka-cluster.sh pids "$kafka_dir" | awk '{print $1 "=" $2}' | paste -sd, -; }
kafka_active() { tools/bench/kafka-cluster.sh active-controller "$kafka_dir"; }
kafka_restart() { kafka_start >/dev/null; }

run_kafka() {
  local bootstrap
  compaction kafka
  bootstrap=$(kafka_start)
  drain kafka "$bootstrap"
  produce kafka "$bootstrap"
  groups kafka "$bootstrap"
  moves kafka "$bootstrap"
  cancel kafka "$bootstrap"
  for n in $SIZES; do submit kafka "$bootstrap" "$n"; done
  # shellcheck disable=SC2046 # one PID per word
  memory kafka $(tools/bench/kafka-cluster.sh pids "$kafka_dir" | awk '{print $2}')
  for n in $API_SIZES; do submit_api kafka "$bootstrap" "$n"; done
  group_failover kafka "$bootstrap" kafka_pids kafka_active kafka_restart
  local active
  active=$(tools/bench/kafka-cluster.sh active-controller "$kafka_dir")
  failover kafka "${KAFKA_BASE_PORT:-19092}" "$active" \
    "$(tools/bench/kafka-cluster.sh pids "$kafka_dir" | awk -v n="$active" '$1 == n {print $2}')"
  tools/bench/kafka-cluster.sh stop "$kafka_dir" >/dev/null
}

ferry_pids() { for id in 1 2 3; do echo "$id=${pids[id - 1]}"; done | paste -sd, -; }
# Ferry's active controller runs beside the Raft leader.
ferry_leader() {
  "$bin/ferry" metastore status --bootstrap-server "$endpoints" 2>/dev/null |
    sed -n 's/.*leader=\([0-9]*\) .*/\1/p' | grep -v '^0$' | head -1
}
# Starts again each node whose process is gone (reaped, or a zombie), and waits until its Kafka
# listener answers Metadata with all 3 brokers.
ferry_restart() {
  local id p
  for id in 1 2 3; do
    p=${pids[id - 1]}
    [ ! -e "/proc/$p" ] || grep -q '^[0-9]* (.*) Z' "/proc/$p/stat" || continue
    wait "$p" 2>/dev/null || true
    FERRY_TWO_LOG_DIRS=1 start_ferry_node "$id" "$base"
    for try in $(seq 1 240); do
      kcat -L -m 2 -b "127.0.0.1:$((FERRY_KAFKA_BASE + id - 1))" 2>/dev/null | grep -q '^ 3 brokers:' && break
      [ "$try" -lt 240 ] || echo "ferry: node $id, started again, does not serve after 120 s" >&2
      sleep 0.5
    done
  done
}

run_ferry() {
  local base=${FERRY_BENCH_PORT:-17761}
  export FERRY_KAFKA_BASE=$((base + 10))
  local bootstrap="127.0.0.1:$FERRY_KAFKA_BASE,127.0.0.1:$((FERRY_KAFKA_BASE + 1)),127.0.0.1:$((FERRY_KAFKA_BASE + 2))"
  compaction ferry
  FERRY_TWO_LOG_DIRS=1 start_ferry_cluster "$base"
  drain ferry "$bootstrap"
  produce ferry "$bootstrap"
  groups ferry "$bootstrap"
  moves ferry "$bootstrap"
  cancel ferry "$bootstrap"
  for n in $SIZES; do submit ferry "$bootstrap" "$n"; done
  memory ferry "${pids[@]}"
  for n in $API_SIZES; do submit_api ferry "$bootstrap" "$n"; done
  group_failover ferry "$bootstrap" ferry_pids ferry_leader ferry_restart
  local leader
  leader=$(ferry_leader)
  failover ferry "$FERRY_KAFKA_BASE" "$leader" "${pids[leader - 1]}"
  stop_all
}

for s in $SYSTEMS; do "run_$s"; done

echo
python3 - "$results" <<'EOF'
import json, sys
rows = {}
for line in open(sys.argv[1]):
    r = json.loads(line)
    rows.setdefault(r["metric"], {})[r["system"]] = r["value"]
print(f"{'metric':<32}{'kafka':>12}{'ferry':>12}{'ferry/kafka':>13}")
for metric, v in rows.items():
    k, f = v.get("kafka"), v.get("ferry")
    ratio = f"{f / k:.2f}" if isinstance(k, (int, float)) and isinstance(f, (int, float)) and k else "-"
    show = lambda x: "n/a" if x is None else f"{x:g}"
    print(f"{metric:<32}{show(k) if 'kafka' in v else '-':>12}{show(f) if 'ferry' in v else '-':>12}{ratio:>13}")
EOF
