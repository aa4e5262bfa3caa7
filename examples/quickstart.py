"""Produce and consume with confluent-kafka against a running minikafka broker.

    scripts/serve &                     # broker on localhost:9092
    .venv/bin/python examples/quickstart.py [--bootstrap HOST:PORT]   # default localhost:9092
"""

from __future__ import annotations

import argparse
import uuid

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic


def main(bootstrap: str = "localhost:9092") -> None:
    topic = f"quickstart-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept until the topic exists (else _DESTROY)
    admin.create_topics([NewTopic(topic, 3, 1)])[topic].result(10)

    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "compression.type": "zstd"})
    for i in range(10):
        producer.produce(topic, key=f"key-{i % 3}", value=f"message {i}", headers={"n": str(i)})
    if producer.flush(30):
        raise SystemExit("some messages were not delivered")

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "quickstart",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    seen = 0
    while seen < 10:
        msg = consumer.poll(5)
        if msg is None:
            break
        if msg.error():
            print("error:", msg.error())
            continue
        seen += 1
        print(f"{msg.topic()}[{msg.partition()}]@{msg.offset()} key={msg.key()!r} value={msg.value()!r} "
              f"headers={msg.headers()}")
    consumer.commit(asynchronous=False)
    consumer.close()
    print(f"consumed {seen} messages")
    if seen < 10:
        raise SystemExit(f"expected 10 messages, consumed {seen}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description="Produce and consume with confluent-kafka against a running broker.")
    ap.add_argument("bootstrap_arg", nargs="?", default=None, metavar="BOOTSTRAP", help=argparse.SUPPRESS)
    ap.add_argument("--bootstrap", default=None, metavar="HOST:PORT", help="a running broker (default localhost:9092)")
    args = ap.parse_args()
    main(args.bootstrap or args.bootstrap_arg or "localhost:9092")
