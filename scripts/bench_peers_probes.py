"""The confluent-kafka probes of ``scripts/bench peers`` (the real client, as issue 27's table was measured).

Each takes a bootstrap address and a topic of one partition that the caller created for it, and returns
its figures.  librdkafka logs only errors here, so the table is not interleaved with its notices.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import time
from typing import Any

from bench_broker import consume
from bench_common import produce_flat_out, produce_queued
from confluent_kafka import Consumer, Producer, TopicPartition

QUIET = {"log_level": 3}


def percentile(values: list[float], q: float) -> float:
    """The ``q``-th percentile (0-100) of ``values``, nearest rank."""
    ordered = sorted(values)
    return ordered[min(len(ordered), max(1, math.ceil(q / 100 * len(ordered)))) - 1]


def single_record_produce(bootstrap: str, topic: str, n: int, acks: str) -> tuple[float, float]:
    """Produce requests/s with one 100 B record per request (linger.ms=0, batch.num.messages=1, 5 in flight);
    returns (records/s, records per Produce request as librdkafka's statistics count them)."""
    stats: list[dict[str, Any]] = []
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "batch.num.messages": 1,
                  "max.in.flight.requests.per.connection": 5, "acks": acks,
                  "queue.buffering.max.messages": max(100000, n + 1), "statistics.interval.ms": 100,
                  "stats_cb": lambda s: stats.append(json.loads(s)), **QUIET})
    payload = os.urandom(100)
    p.produce(topic, payload, partition=0)  # warm-up: connection and metadata
    if p.flush(30):
        raise RuntimeError("warm-up record not delivered")
    t0 = time.perf_counter()
    produce_queued(p, topic, payload, n, 1)
    left = p.flush(120)
    elapsed = time.perf_counter() - t0
    if left:
        raise RuntimeError(f"{left} records not delivered")
    seen = len(stats)
    deadline = time.perf_counter() + 2
    while len(stats) == seen and time.perf_counter() < deadline:  # statistics taken after the last ack
        p.poll(0.05)
    requests = sum(b.get("req", {}).get("Produce", 0) for b in stats[-1]["brokers"].values()) if stats else 0
    return n / elapsed, (n + 1) / requests if requests else float("nan")


def ack_latency(bootstrap: str, topic: str, n: int, warmup: int, acks: str) -> tuple[float, float]:
    """Produce acknowledgement latency, one 100 B record at a time (linger.ms=0): produce, poll until its
    delivery callback, repeat; (p50, p99) in ms after ``warmup`` records."""
    acked: list[int] = []
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": acks, **QUIET,
                  "on_delivery": lambda err, msg: acked.append(time.perf_counter_ns() if err is None else -1)})
    payload = os.urandom(100)
    samples: list[float] = []
    for i in range(warmup + n):
        acked.clear()
        t0 = time.perf_counter_ns()
        p.produce(topic, payload, partition=0)
        deadline = time.perf_counter() + 10
        while not acked:
            p.poll(1)
            if time.perf_counter() > deadline:
                raise RuntimeError("no delivery report within 10 s")
        if acked[0] < 0:
            raise RuntimeError("delivery failed")
        if i >= warmup:
            samples.append((acked[0] - t0) / 1e6)
    p.flush(10)
    return statistics.median(samples), percentile(samples, 99)


def end_to_end_latency(bootstrap: str, topic: str, n: int, interval: float, acks: str) -> tuple[float, float]:
    """End-to-end latency (p50, p99 in ms): a consumer assigned to the partition and caught up, long-polling
    (librdkafka's default fetch.wait.max.ms, 500); a record every ``interval`` seconds carrying
    ``time.perf_counter_ns()``; latency = when the consumer returns it - that stamp (same host)."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": acks, **QUIET})
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-peers-e2e", "enable.auto.commit": False,
                  **QUIET})
    c.assign([TopicPartition(topic, 0, 0)])

    def receive(stamp: int) -> int:
        deadline = time.perf_counter() + 10
        while time.perf_counter() < deadline:
            m = c.poll(1)
            if m is None:
                continue
            if m.error() is not None:
                raise RuntimeError(f"consumer error: {m.error()}")
            if int.from_bytes(m.value() or b"", "big") == stamp:
                return time.perf_counter_ns()
        raise RuntimeError("record not consumed within 10 s")

    try:
        for _ in range(3):  # warm-up: the consumer is assigned, fetching and caught up
            stamp = time.perf_counter_ns()
            p.produce(topic, stamp.to_bytes(8, "big"), partition=0)
            p.poll(0)
            receive(stamp)
        samples: list[float] = []
        start = time.perf_counter()
        for i in range(n):
            wait = start + i * interval - time.perf_counter()
            if wait > 0:
                time.sleep(wait)
            stamp = time.perf_counter_ns()
            p.produce(topic, stamp.to_bytes(8, "big"), partition=0)
            p.poll(0)
            samples.append((receive(stamp) - stamp) / 1e6)
        p.flush(10)
    finally:
        c.close()
    return statistics.median(samples), percentile(samples, 99)


def throughput_1k(bootstrap: str, topic: str, n: int) -> tuple[float, float]:
    """1 KiB produce then consume MB/s, as ``scripts/bench broker`` measures them (acks=1)."""
    mb = n * 1024 / 1e6
    produce = mb / produce_flat_out(bootstrap, topic, n, 1024, 1, acks="1")
    return produce, mb / consume(bootstrap, topic, n, 1)
