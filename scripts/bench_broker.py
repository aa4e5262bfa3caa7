"""Broker throughput benchmark: confluent-kafka produces then consumes N messages.

The broker runs as its own process (``python -m minikafka serve``), so the
client and the broker each get a core.  Prints, per message size: produce and
consume MB/s and messages/s, with the broker process's CPU use over each
phase (well under 100% means the client, not the broker, set the pace);
then the broker's start-up time (spawn to first
accepted connection), idle RSS and peak RSS.  ``--profile`` runs the broker
under cProfile and prints where its time went.  ``--capture`` runs the whole
benchmark twice, without and with ``serve --capture``, and prints the ratio of
produce throughputs.
"""

from __future__ import annotations

import argparse
import pstats
import tempfile
import time
from pathlib import Path

import psutil
from bench_common import cpu_seconds, free_port, produce_flat_out, start_broker, stop_broker
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def consume(bootstrap: str, topic: str, n: int, partitions: int) -> float:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False,
                  "fetch.max.bytes": 52428800, "max.partition.fetch.bytes": 10485760,
                  "queued.max.messages.kbytes": 1048576, "queued.min.messages": 2000000,
                  "fetch.queue.backoff.ms": 5})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got = 0
    t0 = time.perf_counter()
    while got < n:
        msgs = c.consume(num_messages=min(100000, n - got), timeout=5)
        if not msgs:
            raise SystemExit(f"consumer stalled at {got}/{n}")
        got += len(msgs)
        if msgs[-1].error() is not None:
            raise SystemExit(f"consumer error: {msgs[-1].error()}")
    elapsed = time.perf_counter() - t0
    c.close()
    return elapsed


def run(args: argparse.Namespace, capture_dir: str | None = None) -> dict[int, float]:
    """One broker process through every message size; returns produce MB/s per size."""
    port = free_port()
    bootstrap = f"127.0.0.1:{port}"
    prof = tempfile.mktemp(suffix=".prof") if args.profile else None
    tmp = tempfile.TemporaryDirectory() if args.data_dir else None
    extra = ["--data-dir", tmp.name] if tmp else []
    if capture_dir is not None:
        extra += ["--capture", capture_dir]
    proc, startup = start_broker(port, *extra, profile_to=prof)
    time.sleep(0.5)
    idle_rss = psutil.Process(proc.pid).memory_info().rss / 2**20
    import confluent_kafka

    print(f"client: confluent-kafka {confluent_kafka.version()[0]}, librdkafka {confluent_kafka.libversion()[0]}")
    print(f"broker: {'data dir' if args.data_dir else 'in memory'}, {args.partitions} partition(s)"
          f"{', capture on' if capture_dir else ''}{', under cProfile' if prof else ''}")
    print(f"{'size':>6} {'messages':>9} {'produce MB/s':>13} {'msgs/s':>10} {'broker CPU':>10} "
          f"{'consume MB/s':>13} {'msgs/s':>10} {'broker CPU':>10}")
    broker_proc = psutil.Process(proc.pid)

    def cpu() -> float:
        return cpu_seconds(broker_proc)

    produce_rates: dict[int, float] = {}
    admin = AdminClient({"bootstrap.servers": bootstrap})
    try:
        for size, default_n in ((100, 2_000_000), (1024, 500_000)):
            n = args.messages or default_n
            topic = f"bench-{size}"
            admin.create_topics([NewTopic(topic, args.partitions, 1)])[topic].result(10)
            c0 = cpu()
            tp = produce_flat_out(bootstrap, topic, n, size, args.partitions)
            c1 = cpu()
            tc = consume(bootstrap, topic, n, args.partitions)
            c2 = cpu()
            mb = n * size / 1e6
            produce_rates[size] = mb / tp
            print(f"{size:>6} {n:>9} {mb / tp:>13.1f} {n / tp:>10.0f} {(c1 - c0) / tp:>9.0%} "
                  f"{mb / tc:>13.1f} {n / tc:>10.0f} {(c2 - c1) / tc:>9.0%}")
        print(f"broker start-up to accepting connections: {startup * 1000:.0f} ms")
        print(f"broker idle RSS: {idle_rss:.1f} MB; peak RSS: {peak_rss_mb(proc.pid):.1f} MB")
    finally:
        del admin  # destroyed now, so it does not keep reconnecting to the stopped broker
        stop_broker(proc)
        if tmp:
            tmp.cleanup()
    if prof:
        print("\nbroker profile (top 25 by own time):")
        pstats.Stats(prof).sort_stats("tottime").print_stats(25)
    return produce_rates


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--messages", type=int, default=0, help="messages per size (default: 2M of 100 B, 500k of 1 KiB)")
    ap.add_argument("--partitions", type=int, default=1)
    ap.add_argument("--data-dir", action="store_true", help="broker with a data dir instead of in-memory")
    ap.add_argument("--profile", action="store_true", help="run the broker under cProfile and print a profile")
    ap.add_argument("--capture", action="store_true",
                    help="run without and with --capture (alternating, --repeat times) and print the "
                         "produce throughput ratios")
    ap.add_argument("--repeat", type=int, default=1, help="with --capture: pairs of runs (default 1)")
    args = ap.parse_args()
    if not args.capture:
        run(args)
        return
    offs: list[dict[int, float]] = []
    ons: list[dict[int, float]] = []
    for _ in range(args.repeat):  # alternating, so both see the same machine conditions
        offs.append(run(args))
        with tempfile.TemporaryDirectory() as cap:
            print()
            ons.append(run(args, cap))
            files = sorted(Path(cap).glob("*.mkcap"))
            print(f"capture: {len(files)} file(s), {sum(f.stat().st_size for f in files) / 1e6:.1f} MB\n")
    print("produce throughput with capture on / off:")
    for size in offs[0]:
        runs = ", ".join(f"{on[size]:.1f}/{off[size]:.1f} = {on[size] / off[size]:.0%}" for on, off in zip(ons, offs))
        best_on, best_off = max(on[size] for on in ons), max(off[size] for off in offs)
        print(f"{size:>6} B: runs {runs}; best {best_on:.1f} / {best_off:.1f} MB/s = {best_on / best_off:.0%}")


if __name__ == "__main__":
    main()
