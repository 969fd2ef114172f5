#!/usr/bin/env bash
# Runs one of Apache Kafka's command-line tools by its script name, with the jars kafka-jars.sh
# fetches (KAFKA_VERSION picks the version):  tools/kafka-tool.sh NAME ARGS...
# NAME: kafka-topics, kafka-console-producer, kafka-console-consumer, kafka-reassign-partitions,
# kafka-log-dirs, kafka-configs, kafka-leader-election, kafka-producer-perf-test,
# kafka-consumer-perf-test, kafka-dump-log, kafka-get-offsets, kafka-delete-records, kafka-consumer-groups,
# kafka-verifiable-producer, kafka-verifiable-consumer, kafka-e2e-latency, kafka-cluster, kafka-features,
# kafka-metadata-quorum, kafka-broker-api-versions, kafka-acls.
# Logs go to stderr at WARN (KAFKA_TOOL_LOG_LEVEL sets the level); KAFKA_HEAP_OPTS replaces -Xmx256m.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
[ $# -ge 1 ] || { echo "usage: $0 NAME [ARGS...]" >&2; exit 2; }
name="$1"
shift
# Candidate main classes, newest first: several moved from kafka_2.13 (Scala) to kafka-tools.
case "$name" in
  kafka-topics) classes="org.apache.kafka.tools.TopicCommand kafka.admin.TopicCommand" ;;
  kafka-console-producer) classes="org.apache.kafka.tools.ConsoleProducer kafka.tools.ConsoleProducer" ;;
  kafka-console-consumer) classes="org.apache.kafka.tools.consumer.ConsoleConsumer kafka.tools.ConsoleConsumer" ;;
  kafka-reassign-partitions) classes="org.apache.kafka.tools.reassign.ReassignPartitionsCommand kafka.admin.ReassignPartitionsCommand" ;;
  kafka-log-dirs) classes="org.apache.kafka.tools.LogDirsCommand kafka.admin.LogDirsCommand" ;;
  kafka-configs) classes="org.apache.kafka.tools.ConfigCommand kafka.admin.ConfigCommand" ;;
  kafka-leader-election) classes="org.apache.kafka.tools.LeaderElectionCommand kafka.admin.LeaderElectionCommand" ;;
  kafka-producer-perf-test) classes="org.apache.kafka.tools.ProducerPerformance" ;;
  kafka-consumer-perf-test) classes="org.apache.kafka.tools.ConsumerPerformance kafka.tools.ConsumerPerformance" ;;
  kafka-dump-log) classes="org.apache.kafka.tools.DumpLogSegments kafka.tools.DumpLogSegments" ;;
  kafka-get-offsets) classes="org.apache.kafka.tools.GetOffsetShell kafka.tools.GetOffsetShell" ;;
  kafka-delete-records) classes="org.apache.kafka.tools.DeleteRecordsCommand kafka.admin.DeleteRecordsCommand" ;;
  kafka-consumer-groups) classes="org.apache.kafka.tools.consumer.group.ConsumerGroupCommand kafka.admin.ConsumerGroupCommand" ;;
  kafka-verifiable-producer) classes="org.apache.kafka.tools.VerifiableProducer" ;;
  kafka-verifiable-consumer) classes="org.apache.kafka.tools.VerifiableConsumer" ;;
  kafka-features) classes="org.apache.kafka.tools.FeatureCommand kafka.admin.FeatureCommand" ;;
  kafka-cluster) classes="org.apache.kafka.tools.ClusterTool kafka.tools.ClusterTool" ;;
  kafka-metadata-quorum) classes="org.apache.kafka.tools.MetadataQuorumCommand" ;;
  kafka-broker-api-versions) classes="org.apache.kafka.tools.BrokerApiVersionsCommand kafka.admin.BrokerApiVersionsCommand" ;;
  kafka-acls) classes="org.apache.kafka.tools.AclCommand kafka.admin.AclCommand" ;;
  kafka-e2e-latency) classes="org.apache.kafka.tools.EndToEndLatency kafka.tools.EndToEndLatency" ;;
  *) echo "kafka-tool: unknown tool '$name'" >&2; exit 2 ;;
esac
dir="$("$here/kafka-jars.sh" | tail -n 1)"
main=""
for c in $classes; do
  if grep -qxF "${c//.//}.class" "$dir/.classes"; then main="$c"; break; fi
done
[ -n "$main" ] || { echo "kafka-tool: none of $classes in $dir" >&2; exit 1; }
# shellcheck disable=SC2086 # KAFKA_HEAP_OPTS holds several options
exec "${JAVA_HOME:+$JAVA_HOME/bin/}java" ${KAFKA_HEAP_OPTS:--Xmx256m} \
  -Dlog4j2.configurationFile="$here/kafka-log4j2.properties" \
  -Dlog4j.configuration="file:$here/kafka-log4j.properties" \
  -Dferry.log.level="${KAFKA_TOOL_LOG_LEVEL:-WARN}" \
  -cp "$dir/*" "$main" "$@"
