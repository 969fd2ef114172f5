#!/usr/bin/env python3
"""A steady producer for vs-kafka.sh's drain rows, the same for both systems: RATE records a
second of BYTES bytes to TOPIC, acks=all, one at a time on schedule (librdkafka, linger 0). Each
record's latency, send to acknowledgement, counts in the phase it was sent in: `idle` until the
file DIR/drain exists, then `drain` until DIR/stop exists (or MAX_S seconds, a bound). Prints one
JSON line: per phase the records acknowledged and their p50 and p99 in ms; and the records never
acknowledged. Each acknowledged record's send time (s since the start), phase and latency (ms) go
to DIR/latencies.csv, to line slow records up with the nodes' logs.

  steady-produce.py BOOTSTRAP TOPIC RATE BYTES DIR
"""
import json
import os
import sys
import time

from confluent_kafka import Producer

MAX_S = 1800
# How often the phase files are looked at.
LOOK_EVERY_S = 0.05


def quantile(xs, q):
    if not xs:
        return None
    xs = sorted(xs)
    return round(xs[min(len(xs) - 1, int(q * len(xs)))], 2)


def main():
    bootstrap, topic, rate, size, folder = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "linger.ms": 0,
            "message.timeout.ms": 30000,
        }
    )
    latencies = {"idle": [], "drain": []}
    errors = [0]
    timeline = []

    def delivered(phase, sent):
        def callback(err, _msg):
            if err is not None:
                errors[0] += 1
            else:
                ms = (time.monotonic() - sent) * 1000.0
                latencies[phase].append(ms)
                timeline.append((sent - start, phase, ms))

        return callback

    payload = os.urandom(size)
    start = time.monotonic()
    sent = 0
    phase, looked = "idle", 0.0
    while True:
        now = time.monotonic()
        if now - looked >= LOOK_EVERY_S:
            looked = now
            if os.path.exists(os.path.join(folder, "stop")) or now - start > MAX_S:
                break
            if os.path.exists(os.path.join(folder, "drain")):
                phase = "drain"
        due = start + sent / rate
        if now < due:
            producer.poll(min(due - now, LOOK_EVERY_S))
            continue
        try:
            producer.produce(topic, payload, on_delivery=delivered(phase, now))
        except BufferError:
            errors[0] += 1
        sent += 1
        producer.poll(0)
    producer.flush(35)
    out = {"errors": errors[0]}
    for name, xs in latencies.items():
        out[name] = {"count": len(xs), "p50_ms": quantile(xs, 0.5), "p99_ms": quantile(xs, 0.99)}
    with open(os.path.join(folder, "latencies.csv"), "w") as f:
        f.write("sent_s,phase,ms\n")
        for sent_s, phase_, ms in timeline:
            f.write(f"{sent_s:.4f},{phase_},{ms:.3f}\n")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
