"""Waits until a cluster lists no partition reassignment (argv: bootstrap list, timeout in
seconds), polling through one kafka-python admin client every 0.1 s, or twice the last poll's time
when a long list makes polls slow, so that the end of a move is seen soon (a Kafka tool run per
poll costs a second) without loading the cluster. Exits 1 on timeout."""
import sys
import time

from kafka.admin import KafkaAdminClient

bootstrap, timeout = sys.argv[1].split(","), float(sys.argv[2])
deadline = time.monotonic() + timeout
admin = None
pause = 0.1
while time.monotonic() < deadline:
    polled = time.monotonic()
    try:
        if admin is None:
            admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=5000)
        if not admin.list_partition_reassignments():
            sys.exit(0)
    except Exception:  # noqa: BLE001 - a failed poll is retried with a new client
        if admin is not None:
            admin.close()
        admin = None
    pause = max(0.1, 2 * (time.monotonic() - polled))
    time.sleep(pause)
sys.exit(1)
