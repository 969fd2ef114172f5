"""Waits until a cluster has no move left, polling through one kafka-python admin client every
0.1 s, or (listing reassignments) twice the last poll's time when a long list makes polls slow,
so that the end of a move is seen soon (a Kafka tool run per poll costs a second) without loading
the cluster. Exits 1 on timeout.

    wait-moves.py BOOTSTRAP TIMEOUT                          # no partition reassignment listed
    wait-moves.py BOOTSTRAP TIMEOUT BROKER TOPIC DIR         # TOPIC-0 of BROKER wholly in DIR
    wait-moves.py --go FILE BOOTSTRAP TIMEOUT [...]          # started before the move: see below

With --go, the poller connects first, then waits until FILE exists (the caller creates it once
the move is accepted) before it polls, and prints the wall-clock time (seconds since the epoch)
at which it saw the moves done. Started before the move, its own start-up (Python, the client's
connection, about 0.7 s) is then not counted in the move's time.
"""
import os
import sys
import time

from kafka.admin import KafkaAdminClient

args = sys.argv[1:]
go = None
if args[:1] == ["--go"]:
    go, args = args[1], args[2:]
bootstrap, timeout = args[0].split(","), float(args[1])
dir_move = args[2:5]


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


def connect():
    try:
        return KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=5000)
    except Exception:  # noqa: BLE001 - retried by the caller
        return None


deadline = time.monotonic() + timeout
admin = None
if go is not None:
    while admin is None and time.monotonic() < deadline:
        admin = connect() or time.sleep(0.1)
    while not os.path.exists(go):
        if time.monotonic() >= deadline:
            sys.exit(1)
        time.sleep(0.01)
    deadline = time.monotonic() + timeout
while time.monotonic() < deadline:
    polled = time.monotonic()
    try:
        if admin is None:
            admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=5000)
        if done(admin):
            if go is not None:
                print(f"{time.time():.3f}")
            sys.exit(0)
    except Exception:  # noqa: BLE001 - a failed poll is retried with a new client
        if admin is not None:
            admin.close()
        admin = None
    # A dir move's poll asks about one partition: it never loads the cluster, and one answer
    # slowed by the swap itself must not delay the next poll.
    time.sleep(0.1 if dir_move else max(0.1, 2 * (time.monotonic() - polled)))
sys.exit(1)
