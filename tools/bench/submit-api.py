"""Times one AlterPartitionReassignments request through kafka-python's admin client, so that a
submit or cancel is timed without the Kafka tool's JVM start and its own reads before the request
(argv: bootstrap list, the tool's plan file, then `cancel` or the broker id every partition moves
to, and optionally a file to write the wall-clock time the request was sent, in seconds since the
epoch). The client is connected and has the cluster's metadata before the clock starts. Prints
the seconds; exits 1, with the reason on stderr, if the request or any partition is refused. A
cancel of a partition whose move finished first (NoReassignmentInProgress, a race Kafka answers
per partition) is only counted on stderr."""
import json
import sys
import time

from kafka import TopicPartition
from kafka.admin import KafkaAdminClient

bootstrap, plan, target = sys.argv[1].split(","), sys.argv[2], sys.argv[3]
wall_file = sys.argv[4] if len(sys.argv) > 4 else None
with open(plan) as f:
    partitions = json.load(f)["partitions"]
replicas = None if target == "cancel" else [int(target)]
moves = {TopicPartition(p["topic"], p["partition"]): replicas for p in partitions}

admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=600000)
admin.list_partition_reassignments()  # connected to the controller, metadata loaded
wall = time.time()
started = time.monotonic()
results = admin.alter_partition_reassignments(moves, timeout_ms=600000)
elapsed = time.monotonic() - started
admin.close()
if wall_file:
    with open(wall_file, "w") as f:
        f.write(f"{wall:.3f}")
finished = {tp for tp, err in results.items() if target == "cancel" and "NoReassignmentInProgress" in str(err)}
if finished:
    print(f"{len(finished)} of {len(moves)} moves had finished before the cancel", file=sys.stderr)
refused = {tp: err for tp, err in results.items() if err is not None and tp not in finished}
if refused:
    tp, err = next(iter(refused.items()))
    print(f"{len(refused)} of {len(moves)} partitions refused, first {tp}: {err}", file=sys.stderr)
    sys.exit(1)
print(f"{elapsed:.3f}")
