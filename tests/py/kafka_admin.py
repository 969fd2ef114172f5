"""Drives Ferry's Kafka admin APIs with kafka-python's admin client, one step per call, and
prints the outcome as JSON (argv: bootstrap servers, step).
Steps: create (topic "adm" on brokers 1 and 2, then the same again), move (partition 0 to
brokers 1 and 4), list, cancel (twice: the second finds nothing to cancel), cluster."""
import json
import sys

from kafka import TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

bootstrap, step = sys.argv[1], sys.argv[2]
admin = KafkaAdminClient(bootstrap_servers=bootstrap.split(","), request_timeout_ms=30000)
tp = TopicPartition("adm", 0)


def errors(result):
    """A partition-keyed result as [topic, partition, error name or null]."""
    return [[t.topic, t.partition, None if e is None else e.__name__] for t, e in sorted(result.items())]


if step == "create":
    topic = lambda: NewTopic("adm", num_partitions=-1, replication_factor=-1, replica_assignments={0: [1, 2]})
    admin.create_topics([topic()])
    try:
        admin.create_topics([topic()])
        again = None
    except Exception as e:  # the error Kafka's code maps to
        again = type(e).__name__
    out = {"first": "created", "again": again}
elif step == "move":
    out = {"moved": errors(admin.alter_partition_reassignments({tp: [1, 4]}))}
elif step == "list":
    listed = admin.list_partition_reassignments()
    out = {"moving": [[t.topic, t.partition, v] for t, v in sorted(listed.items())]}
elif step == "cancel":
    out = {
        "cancelled": errors(admin.alter_partition_reassignments({tp: None})),
        "again": errors(admin.alter_partition_reassignments({tp: None})),
    }
elif step == "cluster":
    c = admin.describe_cluster()
    ids = sorted(b.get("broker_id", b.get("node_id")) for b in c["brokers"])
    out = {"brokers": ids, "controller": c["controller_id"]}
else:
    raise SystemExit(f"unknown step {step}")
admin.close()
print(json.dumps(out, default=str))
