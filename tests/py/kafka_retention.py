"""kafka-python against a partition whose log start retention or DeleteRecords moved. Prints
one JSON object. argv: bootstrap servers, topic, partition, then a command:
- `offsets`: the earliest and latest offsets (ListOffsets);
- `produce N AHEAD_MS`: N records at acks=all, stamped AHEAD_MS past now;
- `read-from-zero RESET`: a consumer with auto_offset_reset=RESET (`earliest` or `none`), at
  offset 0, reads what it can: the records' offsets, or the error it got."""
import json
import sys
import time

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import OffsetOutOfRangeError

bootstrap, topic, partition, command = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
servers = bootstrap.split(",")
tp = TopicPartition(topic, partition)


def consumer(reset):
    return KafkaConsumer(
        bootstrap_servers=servers,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset=reset,
        request_timeout_ms=20000,
    )


if command == "offsets":
    c = consumer("earliest")
    print(json.dumps({"earliest": c.beginning_offsets([tp])[tp], "latest": c.end_offsets([tp])[tp]}))
    c.close()
elif command == "produce":
    count, ahead = int(sys.argv[5]), int(sys.argv[6])
    p = KafkaProducer(bootstrap_servers=servers, acks="all", request_timeout_ms=20000)
    stamp = int(time.time() * 1000) + ahead
    futures = [p.send(topic, partition=partition, value=b"v" * 200, timestamp_ms=stamp) for _ in range(count)]
    p.flush()
    print(json.dumps({"offsets": [f.get(timeout=30).offset for f in futures]}))
    p.close()
elif command == "read-from-zero":
    c = consumer(sys.argv[5])
    c.assign([tp])
    c.seek(tp, 0)
    end = c.end_offsets([tp])[tp]
    offsets, error = [], None
    deadline = time.time() + 30
    try:
        while (not offsets or offsets[-1] + 1 < end) and time.time() < deadline:
            for batch in c.poll(timeout_ms=1000).values():
                offsets.extend(r.offset for r in batch)
    except OffsetOutOfRangeError as e:
        error = type(e).__name__
    print(json.dumps({"offsets": offsets, "error": error, "end": end}))
    c.close()
else:
    sys.exit(f"unknown command {command}")
