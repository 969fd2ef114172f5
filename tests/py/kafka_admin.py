"""Drives Ferry's Kafka admin APIs with kafka-python's admin client, one step per call, and
prints the outcome as JSON (argv: bootstrap servers, step).
Steps: create (topic "adm" on brokers 1 and 2, then the same again), configs (APPEND and
SUBTRACT on a throttled-replicas list, then the legacy AlterConfigs that replaces every config,
then APPEND on a config that is not a list), grow (partitions 1 to 2, then a refused shrink),
move (partition 0 to brokers 1 and 4), list, cancel (twice: the second finds nothing to
cancel), cluster."""
import json
import sys

from kafka import TopicPartition
from kafka.admin import AlterConfigOp, ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic

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
elif step == "configs":
    LEADERS = "leader.replication.throttled.replicas"
    topic = lambda configs: [ConfigResource(ConfigResourceType.TOPIC, "adm", configs=configs)]
    # The client checks each name against the configs the broker describes, defaults included.
    alter = lambda configs, incremental=True: admin.alter_configs(topic(configs), incremental=incremental)

    def described():
        r = admin.describe_configs(topic(None))
        return {k: v.get("value") for k, v in r["topic"]["adm"].items()}

    # Each change answers "OK" or the error's name and message.
    outcome = lambda r: r["topic"]["adm"]
    out = {"alters": []}
    out["alters"].append(outcome(alter({LEADERS: (AlterConfigOp.SET, "0:1"), "retention.ms": (AlterConfigOp.SET, "86400000")})))
    out["alters"].append(outcome(alter({LEADERS: (AlterConfigOp.APPEND, "0:2,1:1")})))
    out["alters"].append(outcome(alter({LEADERS: (AlterConfigOp.SUBTRACT, "0:1")})))
    out["after_append_subtract"] = described()
    # The legacy AlterConfigs: the client sends every config to keep, the broker drops the rest.
    out["alters"].append(outcome(alter({"retention.ms": "5000"}, incremental=False)))
    out["after_replace"] = described()
    out["alters"].append(outcome(admin.reset_configs(topic([LEADERS]), incremental=False)))
    out["after_reset"] = described()
    out["append_to_non_list"] = outcome(alter({"retention.ms": (AlterConfigOp.APPEND, "1")}))
elif step == "grow":
    admin.create_partitions({"adm": 2})
    try:
        admin.create_partitions({"adm": 1})
        shrink = None
    except Exception as e:
        shrink = type(e).__name__
    out = {"grown": 2, "shrink": shrink}
elif step == "move":
    out = {"moved": errors(admin.alter_partition_reassignments({tp: [1, 4]}))}
elif step == "list":
    listed = admin.list_partition_reassignments()
    out = {"moving": [[t.topic, t.partition, v] for t, v in sorted(listed.items())]}
elif step == "cancel":
    out = {
        # adm-1 is not moving: Kafka answers it alone and cancels adm-0.
        "cancelled": errors(admin.alter_partition_reassignments({tp: None, TopicPartition("adm", 1): None})),
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
