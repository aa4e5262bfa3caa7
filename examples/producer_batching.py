"""The producer's accumulator and sender, watched: what linger.ms does to batches, requests and latency.

    .venv/bin/python examples/producer_batching.py [--records N] [--lingers 0,5,20] [--out DIR]
    .venv/bin/python examples/producer_batching.py --bootstrap localhost:9092      # any Kafka broker

minikafka's own producer (minikafka.client.producer.KafkaProducer, a model of the Java client) sends the
same records once per linger.ms value: send() appends each record to its partition's batch in the
RecordAccumulator; the Sender drains ready batches (full, or older than linger.ms) per leader into Produce
requests.  The figures are the producer's own metrics under the Java client's names: batch-size-avg,
records-per-request-avg, record-queue-time-avg (how long records waited in the accumulator),
request-latency-avg and the requests sent.
"""

from __future__ import annotations

import logging
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import trio

from minikafka.client.producer import KafkaProducer
from minikafka.testing import BrokerThread

sys.path.append(str(Path(__file__).resolve().parent))  # examples/_tutorial.py (appended: never hides a module)
from _tutorial import Figures, parser  # noqa: E402

METRICS = ("batch-size-avg", "records-per-request-avg", "record-queue-time-avg", "request-latency-avg",
           "record-send-rate")


async def run_once(bootstrap: str, topic: str, linger_ms: int, records: int, value_size: int,
                   rate: float) -> dict[str, Any]:
    """Send ``records`` values at about ``rate`` records/s with this linger.ms; return the producer's metrics."""
    value = b"x" * value_size
    async with KafkaProducer(bootstrap_servers=bootstrap, linger_ms=linger_ms, batch_size=16384, acks=1,
                             client_id=f"batching-linger-{linger_ms}") as producer:
        await (await producer.send(topic, b"warm-up")).get()  # metadata and connection before timing
        start = time.monotonic()
        for i in range(records):
            await producer.send(topic, value, key=str(i % 64).encode())
            if i % 50 == 49:  # an application producing at a steady rate, not one burst
                await trio.sleep(max(0.0, start + (i + 1) / rate - time.monotonic()))
        await producer.flush()
        elapsed = time.monotonic() - start
        m = producer.metrics()
    got = {name: round(m.get(name, 0.0), 2) for name in METRICS}
    got["requests"] = int(m.get("request-total", 0) or 0)
    got["linger_ms"] = linger_ms
    got["seconds"] = round(elapsed, 2)
    return got


async def run(bootstrap: str, lingers: list[int], records: int, value_size: int, rate: float) -> list[dict]:
    topic = f"batching-{uuid.uuid4().hex[:6]}"
    rows = []
    print(f"{records} records of {value_size} B at ~{rate:.0f} records/s to {topic!r} on {bootstrap}")
    print(f"{'linger.ms':>9} {'batch-size-avg':>15} {'records/request':>16} {'queue-time ms':>14} "
          f"{'latency ms':>11} {'requests':>9}")
    for linger in lingers:
        row = await run_once(bootstrap, topic, linger, records, value_size, rate)
        rows.append(row)
        print(f"{linger:>9} {row['batch-size-avg']:>15.0f} {row['records-per-request-avg']:>16.1f} "
              f"{row['record-queue-time-avg']:>14.2f} {row['request-latency-avg']:>11.2f} {row['requests']:>9}")
    return rows


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--records", type=int, default=5000, help="records per run (default 5000)")
    ap.add_argument("--rate", type=float, default=5000, help="records/s the application sends (default 5000)")
    ap.add_argument("--value-size", type=int, default=100)
    ap.add_argument("--lingers", default="0,5,20", help="linger.ms values, comma-separated (default 0,5,20)")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    lingers = [int(v) for v in args.lingers.split(",")]
    broker = None if args.bootstrap else BrokerThread(num_partitions=3).start()
    try:
        rows = trio.run(run, args.bootstrap or broker.bootstrap, lingers, args.records, args.value_size, args.rate)
    finally:
        if broker is not None:
            broker.stop()
    figures = Figures("producer", args.out)
    figures.values.update(records=args.records, value_size=args.value_size, rate=int(args.rate), runs=rows)
    for row in rows:
        for key, value in row.items():
            figures[f"linger_{row['linger_ms']}_{key.replace('-', '_')}"] = value
    first, last = rows[0], rows[-1]
    figures["request_ratio"] = round(first["requests"] / max(1, last["requests"]), 1)
    labels = [f"linger.ms={r['linger_ms']}" for r in rows]
    figures.chart("records-per-request", "Records per Produce request", "", "records per request",
                  [("records-per-request-avg", labels, [r["records-per-request-avg"] for r in rows])], kind="bar")
    figures.chart("queue-time", "What batching costs: time in the accumulator and per request", "", "ms",
                  [("record-queue-time-avg", labels, [r["record-queue-time-avg"] for r in rows]),
                   ("request-latency-avg", labels, [r["request-latency-avg"] for r in rows])], kind="bar")
    figures.write()


if __name__ == "__main__":
    main()
