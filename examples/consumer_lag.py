"""The consumer's fetcher and its lag, watched: a consumer working through a backlog while records keep coming.

    .venv/bin/python examples/consumer_lag.py [--backlog N] [--produce-rate R] [--process-rate R] [--out DIR]
    .venv/bin/python examples/consumer_lag.py --bootstrap localhost:9092      # any Kafka broker

A backlog is produced first into a topic of 3 partitions; then minikafka's own consumer
(minikafka.client.consumer.KafkaConsumer, a model of the Java client) joins a group and reads it while a
producer keeps adding records at --produce-rate.  The application handles --process-rate records/s, so
the lag falls by the difference.  The fetcher fetches ahead (fetch sessions, a bounded queue of fetched
chunks) and records the lag of each partition from the high watermark in each fetch response, as the
Java consumer's records-lag and records-lag-max do; the script prints them after each poll.
"""

from __future__ import annotations

import logging
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import trio

from minikafka.client.consumer import KafkaConsumer
from minikafka.client.producer import KafkaProducer
from minikafka.testing import BrokerThread
from minikafka.tools.admin import AdminClient

sys.path.append(str(Path(__file__).resolve().parent))  # examples/_tutorial.py (appended: never hides a module)
from _tutorial import Figures, parser  # noqa: E402

PARTITIONS = 3
CAUGHT_UP = 50  # records behind on every partition that count as caught up


async def produce(bootstrap: str, topic: str, count: int, rate: float | None, stop: trio.Event | None = None) -> int:
    """Send ``count`` records (at ``rate`` records/s, or as fast as possible); returns how many were sent."""
    sent = 0
    async with KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, client_id="lag-producer") as producer:
        start = time.monotonic()
        while sent < count and not (stop is not None and stop.is_set()):
            await producer.send(topic, b"y" * 100, key=str(sent % 97).encode())
            sent += 1
            if rate is not None and sent % 20 == 0:
                await trio.sleep(max(0.0, start + sent / rate - time.monotonic()))
        await producer.flush()
    return sent


async def run(bootstrap: str, backlog: int, produce_rate: float, process_rate: float, seconds: float
              ) -> dict[str, Any]:
    topic = f"lag-{uuid.uuid4().hex[:6]}"
    async with AdminClient(bootstrap) as admin:
        await admin.create_topics([{"name": topic, "num_partitions": PARTITIONS, "replication_factor": -1,
                                    "assignments": [], "configs": []}])
    await produce(bootstrap, topic, backlog, None)
    print(f"backlog of {backlog} records in {topic!r} ({PARTITIONS} partitions); the application handles "
          f"{process_rate:.0f} records/s while {produce_rate:.0f} records/s keep coming")
    series: list[tuple[float, float | None, list[int | None]]] = []
    consumed = 0
    stop = trio.Event()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(produce, bootstrap, topic, 10**9, produce_rate, stop)
        async with KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=f"lag-demo-{topic}",
                                 auto_offset_reset="earliest", max_poll_records=200) as consumer:
            start = time.monotonic()
            caught_up_at = None
            while time.monotonic() - start < seconds:
                batches = await consumer.poll(timeout_ms=500)
                n = sum(len(records) for records in batches.values())
                consumed += n
                await trio.sleep(n / process_rate)  # the application's work
                t = time.monotonic() - start
                lag_max = consumer.metric("records-lag-max")
                lags = [consumer.lag((topic, p)) for p in range(PARTITIONS)]
                series.append((round(t, 3), lag_max, lags))
                if len(series) % 10 == 1:
                    print(f"  t={t:5.2f} s  consumed {consumed:6d}  lag per partition {lags}  "
                          f"records-lag-max {lag_max}")
                if caught_up_at is None and n and all(lag is not None and lag < CAUGHT_UP for lag in lags):
                    caught_up_at = t
                    print(f"  t={t:5.2f} s  caught up: lag per partition {lags}")
                    if t > 1.0:
                        break
            await consumer.commit()
        stop.set()
    first = next(((t, lags) for t, _, lags in series if all(v is not None for v in lags)), None)
    return {"topic_partitions": PARTITIONS, "caught_up_threshold": CAUGHT_UP, "backlog": backlog,
            "produce_rate": int(produce_rate),
            "process_rate": int(process_rate), "consumed": consumed, "polls": len(series),
            "initial_lag": sum(first[1]) if first else None,
            "caught_up_seconds": None if caught_up_at is None else round(caught_up_at, 2),
            "expected_seconds": round(backlog / (process_rate - produce_rate), 2) if process_rate > produce_rate
            else None,
            "series": series}


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--backlog", type=int, default=9000, help="records produced before consuming (default 9000)")
    ap.add_argument("--produce-rate", type=float, default=1000, help="records/s produced meanwhile (default 1000)")
    ap.add_argument("--process-rate", type=float, default=4000,
                    help="records/s the consuming application handles (default 4000)")
    ap.add_argument("--seconds", type=float, default=60, help="give up after this long (default 60)")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    broker = None if args.bootstrap else BrokerThread(group_initial_rebalance_delay_ms=0).start()
    try:
        values = trio.run(run, args.bootstrap or broker.bootstrap, args.backlog, args.produce_rate,
                          args.process_rate, args.seconds)
    finally:
        if broker is not None:
            broker.stop()
    series = values.pop("series")
    figures = Figures("consumer", args.out)
    figures.values.update(values)
    ts = [t for t, _, _ in series]
    figures.chart("lag", "Consumer lag while working through a backlog", "seconds since the consumer started",
                  "records behind the high watermark",
                  [(f"partition {p}", ts, [lags[p] if lags[p] is not None else float("nan") for _, _, lags in series])
                   for p in range(PARTITIONS)])
    figures["series_seconds"] = ts
    figures.write()
    if values["caught_up_seconds"] is None:
        raise SystemExit("the consumer did not catch up")


if __name__ == "__main__":
    main()
