"""Writes to a compacted topic's partition 0 with kafka-python and prints the end offset as
JSON. Commands (after the bootstrap servers and the topic):
  produce COUNT KEYS TOMB_EVERY  COUNT records, key k{i % KEYS} = v{i}-..., then a tombstone
                                 for every key k{j} with j % TOMB_EVERY == 0
  fill PREFIX COUNT              COUNT records each with a key of its own, {PREFIX}{n}
  keyless                        one record without a key: the error it gets, if any
"""
import json
import sys

from kafka import KafkaProducer

bootstrap, topic, command = sys.argv[1], sys.argv[2], sys.argv[3]
servers = bootstrap.split(",")
PAD = "x" * 90


def produce(pairs):
    producer = KafkaProducer(bootstrap_servers=servers, acks="all", linger_ms=20, request_timeout_ms=20000)
    last = None
    for key, value in pairs:
        last = producer.send(topic, partition=0, key=key.encode(), value=None if value is None else value.encode())
    producer.flush()
    end = last.get(timeout=60).offset + 1
    producer.close()
    return end


if command == "produce":
    count, keys, tomb_every = int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
    pairs = [(f"k{i % keys}", f"v{i}-{PAD}") for i in range(count)]
    pairs += [(f"k{j}", None) for j in range(keys) if j % tomb_every == 0]
    print(json.dumps({"end": produce(pairs)}))
elif command == "fill":
    prefix, count = sys.argv[4], int(sys.argv[5])
    print(json.dumps({"end": produce([(f"{prefix}{n}", f"filler-{PAD}") for n in range(count)])}))
elif command == "keyless":
    producer = KafkaProducer(bootstrap_servers=servers, acks="all", request_timeout_ms=20000)
    try:
        producer.send(topic, partition=0, value=b"no key").get(timeout=60)
        print(json.dumps({"error": None}))
    except Exception as e:  # the broker's refusal, by its Kafka error's name
        print(json.dumps({"error": type(e).__name__}))
    producer.close()
else:
    sys.exit(f"unknown command {command}")
