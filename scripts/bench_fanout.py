"""Fan-out benchmark (issue 11): a flat-out producer alone vs with idle consumers long-polling other partitions.

    scripts/bench fanout [--messages 300000] [--repeat 2] [--consumers 100] [--tree PATH]

The broker runs as its own process (``python -m minikafka serve``; ``--tree``:
from another minikafka source tree).  A confluent-kafka producer sends 1 KiB
messages flat out to ``fanout-produce`` (1 partition, re-created empty for each
phase), alternately alone and while ``--consumers`` librdkafka consumers -- in
a separate process, each assigned one partition of ``fanout-idle`` at offset 0
-- long-poll their empty partitions (fetch.wait.max.ms 500).  That process is
started before each "with" phase, measuring starts once every consumer has had
a Fetch response for its partition (so all are in their long-poll loops), and
it is stopped after the phase.  Prints per phase MB/s and the CPU shares of the
broker, producer and consumers processes, then best and median MB/s per kind of
phase and the ratios with/alone.
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import time
from multiprocessing.synchronize import Event
from pathlib import Path

import psutil
from bench_common import (client_versions, cpu_seconds, free_port, minikafka_tree, produce_flat_out, start_broker,
                          stop_broker)
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

PRODUCE_TOPIC = "fanout-produce"
IDLE_TOPIC = "fanout-idle"
SIZE = 1024


def run_consumers(bootstrap: str, n: int, ready: Event, stop: Event) -> None:
    """Consumers' process: ``n`` consumers, consumer i assigned partition i of IDLE_TOPIC; sets ``ready`` once
    each has had a Fetch response for its partition, then keeps them polling until ``stop`` is set."""
    consumers = [Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-fanout", "enable.auto.commit": False})
                 for _ in range(n)]
    tps = [TopicPartition(IDLE_TOPIC, i, 0) for i in range(n)]
    for c, tp in zip(consumers, tps):
        c.assign([tp])
    while not stop.is_set():
        for c in consumers:
            if (msg := c.poll(0)) is not None:
                raise SystemExit(f"unexpected on {IDLE_TOPIC}: {msg.error() or 'a message'}")
        # The cached high watermark is only known once a Fetch response for the partition came back.
        if not ready.is_set() and all(c.get_watermark_offsets(tp, cached=True)[1] >= 0
                                      for c, tp in zip(consumers, tps)):
            ready.set()
        stop.wait(0.1)
    for c in consumers:
        c.close()


def start_consumers(bootstrap: str, n: int, timeout: float = 60) -> tuple[multiprocessing.Process, Event]:
    """Start the consumers' process and wait until all its consumers are fetching; return it and its stop event."""
    mp = multiprocessing.get_context("spawn")  # not fork: the parent has librdkafka threads
    ready, stop = mp.Event(), mp.Event()
    proc = mp.Process(target=run_consumers, args=(bootstrap, n, ready, stop), daemon=True)
    t0 = time.perf_counter()
    proc.start()
    while not ready.wait(0.1):
        if not proc.is_alive() or time.perf_counter() - t0 > timeout:
            proc.kill()
            raise SystemExit("the consumers did not all start fetching")
    print(f"  {n} consumers fetching after {time.perf_counter() - t0:.1f} s")
    return proc, stop


def stop_consumers(proc: multiprocessing.Process, stop: Event) -> None:
    stop.set()
    proc.join(30)
    if proc.is_alive():
        proc.kill()
        proc.join()


def fresh_topic(admin: AdminClient, topic: str) -> None:
    """(Re)create ``topic`` (1 partition) empty: the broker slows down as its in-memory logs grow, so every
    phase starts with none of the previous phases' data."""
    if topic in admin.list_topics(timeout=10).topics:
        admin.delete_topics([topic])[topic].result(10)
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(10)


def measure(bootstrap: str, n: int, procs: list[psutil.Process]) -> tuple[float, list[float]]:
    """Produce ``n`` messages flat out; MB/s, and the CPU share of each of ``procs`` meanwhile."""
    before = [cpu_seconds(p) for p in procs]
    seconds = produce_flat_out(bootstrap, PRODUCE_TOPIC, n, SIZE)
    return n * SIZE / 1e6 / seconds, [(cpu_seconds(p) - c) / seconds for p, c in zip(procs, before)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=300_000, help="1 KiB messages per phase (default 300000)")
    ap.add_argument("--repeat", type=int, default=2, help="pairs of phases alone / with consumers (default 2)")
    ap.add_argument("--consumers", type=int, default=100, help="idle consumers (and partitions) (default 100)")
    ap.add_argument("--tree", metavar="PATH", type=Path, help="run the broker from this minikafka source tree")
    args = ap.parse_args()

    port = free_port()
    bootstrap = f"127.0.0.1:{port}"
    source = minikafka_tree(args.tree)
    broker, _ = start_broker(port, tree=args.tree)
    broker_cpu, producer_cpu = psutil.Process(broker.pid), psutil.Process()
    print(f"client: {client_versions()}")
    print(f"broker: minikafka from {source}, in memory; {args.messages} messages of {SIZE} B per phase, "
          f"{args.consumers} idle consumers")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    rates: dict[str, list[float]] = {"alone": [], "with": []}
    try:
        admin.create_topics([NewTopic(IDLE_TOPIC, args.consumers, 1)])[IDLE_TOPIC].result(10)
        print(f"{'phase':<15} {'MB/s':>7} {'msgs/s':>7} {'broker CPU':>10} {'producer CPU':>12} "
              f"{'consumers CPU':>13}")
        for _ in range(args.repeat):  # alternating, so both see the same machine conditions
            for phase in rates:
                fresh_topic(admin, PRODUCE_TOPIC)
                consumers = start_consumers(bootstrap, args.consumers) if phase == "with" else None
                try:
                    mbs, cpu = measure(bootstrap, args.messages, [broker_cpu, producer_cpu] +
                                       ([psutil.Process(consumers[0].pid)] if consumers else []))
                finally:
                    if consumers:
                        stop_consumers(*consumers)
                rates[phase].append(mbs)
                shares = [f"{c:.0%}" for c in cpu] + ["-"] * (3 - len(cpu))
                print(f"{phase + ' consumers' * bool(consumers):<15} {mbs:>7.1f} {mbs * 1e6 / SIZE:>7.0f} "
                      f"{shares[0]:>10} {shares[1]:>12} {shares[2]:>13}")
    finally:
        del admin  # destroyed now, so it does not keep reconnecting to the stopped broker
        stop_broker(broker)
    for phase, mbs in rates.items():
        print(f"{phase:<5}: best {max(mbs):.1f} MB/s, median {statistics.median(mbs):.1f} MB/s")
    print(f"with / alone: best {max(rates['with']) / max(rates['alone']):.2f}x, "
          f"median {statistics.median(rates['with']) / statistics.median(rates['alone']):.2f}x")


if __name__ == "__main__":
    main()
