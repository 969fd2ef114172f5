"""Kills one process and times how long until a CreateTopics through the Kafka protocol succeeds
again (argv: bootstrap list of the surviving brokers, PID to kill, topic name). Each try uses a
new kafka-python admin client with short timeouts, so a dead connection costs both systems the
same. Prints the milliseconds."""
import os
import signal
import sys
import time

from kafka.admin import KafkaAdminClient, NewTopic

bootstrap, pid, topic = sys.argv[1].split(","), int(sys.argv[2]), sys.argv[3]
# Connected and warm before the kill: the first client costs more than the rest.
KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=2000).close()
os.kill(pid, signal.SIGKILL)
started = time.monotonic()
deadline = started + 120
while time.monotonic() < deadline:
    try:
        admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=500,
                                 api_version_auto_timeout_ms=500)
        try:
            admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])
        finally:
            admin.close()
        print(round((time.monotonic() - started) * 1000))
        sys.exit(0)
    except Exception:
        time.sleep(0.01)
sys.exit("no CreateTopics succeeded within 120 s")
