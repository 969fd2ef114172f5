"""Reads a Ferry cluster's metadata with kafka-python, as a Kafka application would: the
brokers and one topic's partitions, printed as JSON (argv: bootstrap servers, topic)."""
import json
import sys

from kafka import KafkaConsumer, TopicPartition

bootstrap, topic = sys.argv[1], sys.argv[2]
consumer = KafkaConsumer(bootstrap_servers=bootstrap.split(","), request_timeout_ms=20000)
topics = consumer.topics()
cluster = consumer._client.cluster
partitions = sorted(consumer.partitions_for_topic(topic) or [])
out = {
    "topics": sorted(topics),
    # kafka-python 2 names it nodeId, 3 node_id.
    "brokers": sorted(getattr(b, "node_id", None) or b.nodeId for b in cluster.brokers()),
    "partitions": partitions,
    "leaders": [cluster.leader_for_partition(TopicPartition(topic, p)) for p in partitions],
}
print(json.dumps(out))
consumer.close()
