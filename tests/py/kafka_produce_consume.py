"""Produces records with kafka-python at acks=all (keys, headers, explicit timestamps), then
reads the partition back with a consumer that uses assign() and no group, as a Kafka
application would. Prints one JSON object: the offsets the producer was given and every record
read (argv: bootstrap servers, topic, partition, count)."""
import json
import sys
import time

from kafka import KafkaConsumer, KafkaProducer, TopicPartition

bootstrap, topic, partition, count = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
servers = bootstrap.split(",")
producer = KafkaProducer(bootstrap_servers=servers, acks="all", request_timeout_ms=20000)
futures = [
    producer.send(
        topic,
        partition=partition,
        key=f"py-key-{i}".encode(),
        value=f"py-value-{i}".encode() * 3,
        headers=[("n", str(i).encode()), ("from", b"kafka-python")],
        timestamp_ms=1_700_000_000_000 + i,
    )
    for i in range(count)
]
producer.flush()
offsets = [f.get(timeout=30).offset for f in futures]
producer.close()

tp = TopicPartition(topic, partition)
consumer = KafkaConsumer(bootstrap_servers=servers, group_id=None, enable_auto_commit=False, request_timeout_ms=20000)
consumer.assign([tp])
consumer.seek_to_beginning(tp)
end = consumer.end_offsets([tp])[tp]
records = []
deadline = time.time() + 60
while consumer.position(tp) < end and time.time() < deadline:
    for batch in consumer.poll(timeout_ms=1000).values():
        for r in batch:
            records.append({
                "offset": r.offset,
                "key": r.key.decode() if r.key is not None else None,
                "value": r.value.decode(),
                "headers": [[k, v.decode()] for k, v in r.headers],
                "timestamp": r.timestamp,
            })
consumer.close()
print(json.dumps({"offsets": offsets, "end": end, "records": records}))
