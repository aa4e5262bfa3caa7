"""minikafka's own Trio clients: produce with batching metrics, consume in a group with lag.

    python examples/clients.py              # starts its own broker
    python examples/clients.py --bootstrap HOST:PORT    # or uses a running one (any Kafka broker)
"""

from __future__ import annotations

import argparse

import trio

from minikafka.broker.broker import serve_broker
from minikafka.broker.config import BrokerConfig
from minikafka.client.consumer import KafkaConsumer
from minikafka.client.producer import KafkaProducer


async def run(bootstrap: str) -> None:
    async with KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, compression_type="lz4") as producer:
        for i in range(10_000):
            await producer.send("clients-demo", f"event {i}".encode(), key=f"user-{i % 50}".encode())
        await producer.flush()
        m = producer.metrics()
        print({k: round(v, 2) for k, v in m.items() if k in (
            "record-send-rate", "batch-size-avg", "records-per-request-avg", "record-queue-time-avg",
            "request-latency-avg", "buffer-available-bytes")})

    async with KafkaConsumer("clients-demo", bootstrap_servers=bootstrap, group_id="demo",
                             auto_offset_reset="earliest", max_poll_records=1000) as consumer:
        seen = 0
        while seen < 10_000:
            batches = await consumer.poll(timeout_ms=1000)
            seen += sum(len(records) for records in batches.values())
            lag_max = consumer.metric("records-lag-max")
            print(f"consumed {seen:6d}   records-lag-max {lag_max}")
        await consumer.commit()


async def main() -> None:
    ap = argparse.ArgumentParser(description="minikafka's own Trio clients: produce, then consume in a group.")
    ap.add_argument("bootstrap_arg", nargs="?", default=None, metavar="BOOTSTRAP", help=argparse.SUPPRESS)
    ap.add_argument("--bootstrap", default=None, metavar="HOST:PORT", help="a running broker (default: start one)")
    args = ap.parse_args()
    bootstrap = args.bootstrap or args.bootstrap_arg
    if bootstrap:
        await run(bootstrap)
        return
    async with serve_broker(BrokerConfig(port=0, num_partitions=3, group_initial_rebalance_delay_ms=0)) as broker:
        await run(f"127.0.0.1:{broker.port}")


if __name__ == "__main__":
    trio.run(main)
