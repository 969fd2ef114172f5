"""Kills one process and times how long until a CreateTopics through the Kafka protocol succeeds
again (argv: bootstrap list of the surviving brokers, PID to kill, topic name). Each try uses a
new kafka-python admin client with short timeouts, so a dead connection costs both systems the
same. Prints the milliseconds."""
import os
import signal
import sys
import time

from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import TopicAlreadyExistsError

bootstrap, pid, topic = sys.argv[1].split(","), int(sys.argv[2]), sys.argv[3]
# Connected and warm before the kill: the first client costs more than the rest.
KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=2000).close()
os.kill(pid, signal.SIGKILL)
started = time.monotonic()
deadline = started + 120
last = None
while time.monotonic() < deadline:
    try:
        admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=1000)
        try:
            admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])
        finally:
            admin.close()
    except TopicAlreadyExistsError:
        # An earlier try committed, only its answer came too late.
        pass
    except Exception as e:  # noqa: BLE001 - any failure means: not yet
        last = e
        time.sleep(0.01)
        continue
    print(round((time.monotonic() - started) * 1000))
    sys.exit(0)
sys.exit(f"no CreateTopics succeeded within 120 s; the last error: {last!r}")
