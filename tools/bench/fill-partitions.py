"""Writes one record of SIZE bytes to every partition of each TOPIC:COUNT, through the Kafka
protocol with kafka-python, so that a move of those partitions has data to copy (argv: bootstrap
list, SIZE, TOPIC:COUNT...). Waits until every record is acknowledged (acks=1); a send that
failed (a partition just created, whose leader is not known yet) is sent again, for up to ten
rounds. Without that, a fifth of 10,000 new partitions stayed empty, and their moves finished at
once whatever the throttle. Exits 1 if any partition is still without its record."""
import sys
import time

from kafka import KafkaProducer

bootstrap, size = sys.argv[1].split(","), int(sys.argv[2])
producer = KafkaProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=20, batch_size=1 << 16,
                         max_request_size=1 << 22, request_timeout_ms=60000,
                         max_block_ms=300000)
value = b"x" * size
left = [(topic, partition)
        for topic, count in (spec.rsplit(":", 1) for spec in sys.argv[3:])
        for partition in range(int(count))]
for _ in range(10):
    sent = [(tp, producer.send(tp[0], value, partition=tp[1])) for tp in left]
    producer.flush(timeout=600)
    left = [tp for tp, future in sent if not future.succeeded()]
    if not left:
        break
    time.sleep(1)
producer.close()
if left:
    print(f"{len(left)} partitions without their record, first {left[0]}", file=sys.stderr)
    sys.exit(1)
