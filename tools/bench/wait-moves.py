"""Waits until a cluster has no move left, polling through one kafka-python admin client every
0.1 s, or twice the last poll's time when a long list makes polls slow, so that the end of a move
is seen soon (a Kafka tool run per poll costs a second) without loading the cluster. Exits 1 on
timeout.

    wait-moves.py BOOTSTRAP TIMEOUT                          # no partition reassignment listed
    wait-moves.py BOOTSTRAP TIMEOUT BROKER TOPIC DIR         # TOPIC-0 of BROKER wholly in DIR
"""
import sys
import time

from kafka.admin import KafkaAdminClient

bootstrap, timeout = sys.argv[1].split(","), float(sys.argv[2])
dir_move = sys.argv[3:6]


def done(admin):
    if not dir_move:
        return not admin.list_partition_reassignments()
    broker, topic, target = int(dir_move[0]), dir_move[1], dir_move[2]
    found = []
    for b in admin.describe_log_dirs(brokers=[broker]):
        for d in b["log_dirs"]:
            for t in d["topics"]:
                for p in t["partitions"]:
                    if t["name"] == topic and p["partition_index"] == 0:
                        found.append((d["log_dir"], p["is_future_key"]))
    return found == [(target, False)]


deadline = time.monotonic() + timeout
admin = None
while time.monotonic() < deadline:
    polled = time.monotonic()
    try:
        if admin is None:
            admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=5000)
        if done(admin):
            sys.exit(0)
    except Exception:  # noqa: BLE001 - a failed poll is retried with a new client
        if admin is not None:
            admin.close()
        admin = None
    time.sleep(max(0.1, 2 * (time.monotonic() - polled)))
sys.exit(1)
