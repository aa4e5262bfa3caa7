"""Client benchmarks against one minikafka broker process (issue 6).

    scripts/bench clients --mode producer [--messages N] [--sizes 100,1024] [--big-batch] [--profile]
    scripts/bench clients --mode consumer [--messages N] [--sizes 100,1024] [--profile]
    scripts/bench clients --mode all
    scripts/bench clients --mode perf-test [--messages N] [--sizes 100,1024] [--processes 2] [--repeat K]

Structure: ``start_broker`` runs ``python -m minikafka serve`` as a subprocess; each client has
one function ``produce_<client>(bootstrap, topic, n, size, batch_size) -> seconds`` (and
``consume_<client>`` for the consumer side); ``run_producer_mode`` / ``run_consumer_mode`` print a
table per message size; ``main`` parses ``--mode producer|consumer|all``.

Producer mode: N messages of 100 B and 1 KiB with minikafka's KafkaProducer, kafka-python's
KafkaProducer and aiokafka's AIOKafkaProducer, each with linger.ms=5, batch.size=16 KiB, acks=1,
no compression, to a fresh single-partition topic per run; prints messages/s, MB/s and the
ratio ours / kafka-python.  ``--big-batch`` repeats with batch.size=1 MiB.

``--repeat K`` runs the clients K times in turn (A/B/A/B) and prints the range of each ratio.

Perf-test mode (issue 27): ``minikafka perf-test producer`` (the command, in a subprocess: records/s of its
summary line) with ``--processes 1`` and with ``--processes P``, beside aiokafka's producer, all with acks=1,
linger.ms=5, batch.size=1 MiB, buffer.memory=64 MiB, alternated ``--repeat`` times; prints records/s and the
ranges of perf-test / aiokafka.

Consumer mode: per message size, N messages are pre-produced (confluent-kafka) to a fresh
one-partition topic, then read from offset 0 (assign + seek, no group, default fetch settings) by
minikafka's KafkaConsumer, kafka-python's KafkaConsumer and aiokafka's AIOKafkaConsumer in turn;
prints messages/s, MB/s and the ratios.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import logging
import os
import pstats
import re
import subprocess
import sys
import time
from typing import Callable

from bench_common import free_port, start_broker, stop_broker

# -------------------------------------------------------------------------------------------------
# broker process
# -------------------------------------------------------------------------------------------------


# -------------------------------------------------------------------------------------------------
# producers: one function per client; each returns the elapsed seconds for n messages (all acked)
# -------------------------------------------------------------------------------------------------


def produce_minikafka(bootstrap: str, topic: str, n: int, size: int, batch_size: int) -> float:
    import trio

    from minikafka.client.producer import KafkaProducer

    payload = os.urandom(size)

    async def run() -> float:
        async with KafkaProducer(bootstrap, acks=1, enable_idempotence=False, linger_ms=5,
                                 batch_size=batch_size, buffer_memory=64 << 20) as p:
            await (await p.send(topic, b"warm-up")).get()
            t0 = time.perf_counter()
            send = p.send
            for _ in range(n):
                fut = await send(topic, payload)
            await p.flush()
            elapsed = time.perf_counter() - t0
            await fut.get()
            return elapsed

    return trio.run(run)


def produce_kafka_python(bootstrap: str, topic: str, n: int, size: int, batch_size: int) -> float:
    from kafka import KafkaProducer

    payload = os.urandom(size)
    p = KafkaProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=5, batch_size=batch_size,
                      max_request_size=max(1 << 20, batch_size + 1024))
    try:
        p.send(topic, b"warm-up").get(timeout=30)
        t0 = time.perf_counter()
        for _ in range(n):
            fut = p.send(topic, payload)
        p.flush()
        elapsed = time.perf_counter() - t0
        fut.get(timeout=30)
        return elapsed
    finally:
        p.close()


def produce_aiokafka(bootstrap: str, topic: str, n: int, size: int, batch_size: int) -> float:
    from aiokafka import AIOKafkaProducer

    payload = os.urandom(size)

    async def run() -> float:
        p = AIOKafkaProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=5, max_batch_size=batch_size,
                             max_request_size=max(1 << 20, batch_size + 1024))
        await p.start()
        try:
            await p.send_and_wait(topic, b"warm-up")
            t0 = time.perf_counter()
            for _ in range(n):
                fut = await p.send(topic, payload)
            await p.flush()
            elapsed = time.perf_counter() - t0
            await fut
            return elapsed
        finally:
            await p.stop()

    return asyncio.run(run())


PRODUCERS: dict[str, Callable[[str, str, int, int, int], float]] = {
    "minikafka": produce_minikafka,
    "kafka-python": produce_kafka_python,
    "aiokafka": produce_aiokafka,
}


def ratio_ranges(rates: dict[str, list[float]], ours: str, peers: list[str]) -> str:
    """``ours / peer: lo-hi x`` over runs paired in the order they alternated."""
    parts = []
    for peer in peers:
        ratios = [a / b for a, b in zip(rates[ours], rates[peer])]
        parts.append(f"{ours} / {peer}: {min(ratios):.2f}x" + (f"-{max(ratios):.2f}x" if len(ratios) > 1 else ""))
    return "   ".join(parts)


def run_producer_mode(bootstrap: str, n: int, sizes: list[int], batch_sizes: list[int], profile: bool,
                      repeat: int = 1) -> None:
    print(f"\n== producers: {n} messages per run, acks=1, linger.ms=5, no compression ==")
    run_id = 0
    for batch_size in batch_sizes:
        for size in sizes:
            print(f"\n-- message size {size} B, batch.size {batch_size} B --")
            print(f"{'client':<14}{'msgs/s':>12}{'MB/s':>10}{'seconds':>10}")
            rates: dict[str, list[float]] = {name: [] for name in PRODUCERS}
            for _ in range(repeat):
                for name, fn in PRODUCERS.items():
                    run_id += 1
                    topic = f"bench-{name}-{size}-{batch_size}-{run_id}"
                    if profile and name == "minikafka":
                        prof = cProfile.Profile()
                        elapsed = prof.runcall(fn, bootstrap, topic, n, size, batch_size)
                        pstats.Stats(prof).sort_stats("tottime").print_stats(15)
                    else:
                        elapsed = fn(bootstrap, topic, n, size, batch_size)
                    rates[name].append(n / elapsed)
                    print(f"{name:<14}{n / elapsed:>12,.0f}{n * size / elapsed / 1e6:>10.1f}{elapsed:>10.2f}")
            print("ratio " + ratio_ranges(rates, "minikafka", ["kafka-python", "aiokafka"]))


# -------------------------------------------------------------------------------------------------
# perf-test mode: the `minikafka perf-test producer` command against aiokafka's producer
# -------------------------------------------------------------------------------------------------

PERF_BATCH = 1 << 20
PERF_SUMMARY = re.compile(r"^(\d+) records sent, ([\d.]+) records/sec", re.M)


def perf_test_producer(bootstrap: str, topic: str, n: int, size: int, processes: int) -> float:
    """Records/s of ``minikafka perf-test producer`` (its summary line), run as a command."""
    cmd = [sys.executable, "-m", "minikafka", "perf-test", "producer", "--bootstrap-server", bootstrap,
           "--topic", topic, "--num-records", str(n), "--record-size", str(size), "--no-progress",
           "--processes", str(processes), "--producer-props", "acks=1", "linger.ms=5", f"batch.size={PERF_BATCH}",
           f"buffer.memory={64 << 20}"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    m = PERF_SUMMARY.search(out)
    if m is None or int(m.group(1)) != n:
        raise SystemExit(f"unexpected perf-test output: {out!r}")
    return float(m.group(2))


def run_perf_test_mode(bootstrap: str, n: int, sizes: list[int], processes: int, repeat: int) -> None:
    print(f"\n== perf-test producer vs aiokafka: {n} records per run, acks=1, linger.ms=5, "
          f"batch.size={PERF_BATCH}, {repeat} alternated run(s) ==")
    run_id = 0
    for size in sizes:
        print(f"\n-- record size {size} B --")
        names = ["perf-test", f"perf-test x{processes}", "aiokafka"]
        rates: dict[str, list[float]] = {name: [] for name in names}
        for _ in range(repeat):
            for name in names:
                run_id += 1
                topic = f"bench-perf-{size}-{run_id}"
                if name == "aiokafka":
                    rate = n / produce_aiokafka(bootstrap, topic, n, size, PERF_BATCH)
                else:
                    rate = perf_test_producer(bootstrap, topic, n, size, 1 if name == "perf-test" else processes)
                rates[name].append(rate)
                print(f"{name:<16}{rate:>12,.0f} records/s{rate * size / 1e6:>10.1f} MB/s")
        print("ratio " + ratio_ranges(rates, "perf-test", ["aiokafka"]) + "   "
              + ratio_ranges(rates, f"perf-test x{processes}", ["aiokafka", "perf-test"]))


# -------------------------------------------------------------------------------------------------
# consumers: one function per client; each reads n pre-produced messages from partition 0 of
# ``topic`` from the beginning (assign + seek, no group) and returns the elapsed seconds
# -------------------------------------------------------------------------------------------------


def preproduce(bootstrap: str, topic: str, n: int, size: int) -> None:
    """Fill ``topic`` (one partition) with n messages of ``size`` bytes, with confluent-kafka (fast)."""
    from confluent_kafka import Producer

    payload = os.urandom(size)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1 << 20, "acks": 1,
                  "queue.buffering.max.messages": 1_000_000, "compression.type": "none"})
    for _ in range(n):
        while True:
            try:
                p.produce(topic, payload, partition=0)
                break
            except BufferError:
                p.poll(0.01)
    if p.flush(120):
        raise SystemExit("pre-produce did not complete")


def consume_minikafka(bootstrap: str, topic: str, n: int) -> float:
    import trio

    from minikafka.client.consumer import KafkaConsumer, TopicPartition

    async def run() -> float:
        async with KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False) as c:
            tp = TopicPartition(topic, 0)
            c.assign([tp])
            c.seek(tp, 0)
            got = 0
            t0 = time.perf_counter()
            while got < n:
                for recs in (await c.poll(500)).values():
                    got += len(recs)
            return time.perf_counter() - t0

    return trio.run(run)


def consume_kafka_python(bootstrap: str, topic: str, n: int) -> float:
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        tp = TopicPartition(topic, 0)
        c.assign([tp])
        c.seek(tp, 0)
        got = 0
        t0 = time.perf_counter()
        while got < n:
            for recs in c.poll(timeout_ms=500).values():
                got += len(recs)
        return time.perf_counter() - t0
    finally:
        c.close()


def consume_aiokafka(bootstrap: str, topic: str, n: int) -> float:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def run() -> float:
        c = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
        await c.start()
        try:
            tp = TopicPartition(topic, 0)
            c.assign([tp])
            c.seek(tp, 0)
            got = 0
            t0 = time.perf_counter()
            while got < n:
                for recs in (await c.getmany(timeout_ms=500, max_records=500)).values():
                    got += len(recs)
            return time.perf_counter() - t0
        finally:
            await c.stop()

    return asyncio.run(run())


CONSUMERS: dict[str, Callable[[str, str, int], float]] = {
    "minikafka": consume_minikafka,
    "kafka-python": consume_kafka_python,
    "aiokafka": consume_aiokafka,
}


def run_consumer_mode(bootstrap: str, n: int, sizes: list[int], batch_sizes: list[int], profile: bool) -> None:
    print(f"\n== consumers: {n} pre-produced messages from one partition, from offset 0, no group, "
          "default fetch settings ==")
    for size in sizes:
        topic = f"bench-consume-{size}-{time.time_ns()}"
        preproduce(bootstrap, topic, n, size)
        print(f"\n-- message size {size} B --")
        print(f"{'client':<14}{'msgs/s':>12}{'MB/s':>10}{'seconds':>10}")
        rates: dict[str, float] = {}
        for name, fn in CONSUMERS.items():
            if profile and name == "minikafka":
                prof = cProfile.Profile()
                elapsed = prof.runcall(fn, bootstrap, topic, n)
                pstats.Stats(prof).sort_stats("tottime").print_stats(15)
            else:
                elapsed = fn(bootstrap, topic, n)
            rates[name] = n / elapsed
            print(f"{name:<14}{n / elapsed:>12,.0f}{n * size / elapsed / 1e6:>10.1f}{elapsed:>10.2f}")
        print(f"ratio minikafka / kafka-python: {rates['minikafka'] / rates['kafka-python']:.2f}x   "
              f"minikafka / aiokafka: {rates['minikafka'] / rates['aiokafka']:.2f}x")


# -------------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mode", choices=["producer", "consumer", "all", "perf-test"], default="producer")
    ap.add_argument("--messages", type=int, default=200_000)
    ap.add_argument("--sizes", default="100,1024", help="message sizes in bytes, comma separated")
    ap.add_argument("--big-batch", action="store_true", help="also run with batch.size = 1 MiB")
    ap.add_argument("--profile", action="store_true", help="cProfile minikafka's client")
    ap.add_argument("--repeat", type=int, default=1, help="alternated runs per client (ratios as ranges)")
    ap.add_argument("--processes", type=int, default=2, help="perf-test mode: also run with this many processes")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("kafka").setLevel(logging.ERROR)  # kafka-python warns about its own slow loop
    sizes = [int(s) for s in args.sizes.split(",")]
    batch_sizes = [16384] + ([1 << 20] if args.big_batch else [])
    port = free_port()
    proc, _ = start_broker(port)
    bootstrap = f"127.0.0.1:{port}"
    try:
        if args.mode in ("producer", "all"):
            run_producer_mode(bootstrap, args.messages, sizes, batch_sizes, args.profile, args.repeat)
        if args.mode == "perf-test":
            run_perf_test_mode(bootstrap, args.messages, sizes, args.processes, args.repeat)
        if args.mode in ("consumer", "all"):
            run_consumer_mode(bootstrap, args.messages, sizes, batch_sizes, args.profile)
    finally:
        stop_broker(proc)


if __name__ == "__main__":
    main()
