"""Writes one record of SIZE bytes to every partition of each TOPIC:COUNT, through the Kafka
protocol with kafka-python, so that a move of those partitions has data to copy (argv: bootstrap
list, SIZE, TOPIC:COUNT...). Waits until every record is acknowledged (acks=1)."""
import sys

from kafka import KafkaProducer

bootstrap, size = sys.argv[1].split(","), int(sys.argv[2])
producer = KafkaProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=20, batch_size=1 << 16,
                         max_request_size=1 << 22, request_timeout_ms=60000,
                         max_block_ms=300000)
value = b"x" * size
for spec in sys.argv[3:]:
    topic, count = spec.rsplit(":", 1)
    for partition in range(int(count)):
        producer.send(topic, value, partition=partition)
producer.flush(timeout=600)
producer.close()
