"""Broker throughput benchmark: confluent-kafka produces then consumes N messages.

The broker runs as its own process (``python -m minikafka serve``), so the
client and the broker each get a core.  Prints, per message size: produce and
consume MB/s and messages/s, with the broker process's CPU use over each
phase (well under 100% means the client, not the broker, set the pace);
then the broker's start-up time (spawn to first
accepted connection), idle RSS and peak RSS.  ``--profile`` runs the broker
under cProfile and prints where its time went.  ``--capture`` runs the whole
benchmark twice, without and with ``serve --capture``, and prints the ratios of
throughputs.  ``--baseline PATH`` runs it with the broker from this source tree
and from the minikafka source tree PATH (e.g. a ``git worktree`` of an older
commit) and prints the new/baseline ratios.  With either, ``--repeat K``
runs K pairs alternated (ABBA order) and the ratios are of the best and of the
median runs.
"""

from __future__ import annotations

import argparse
import pstats
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import psutil
from bench_common import (ROOT, client_versions, cpu_seconds, free_port, minikafka_tree, produce_flat_out,
                          start_broker, stop_broker)
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

Rates = dict[int, tuple[float, float]]  # message size -> (produce MB/s, consume MB/s)


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


def default_messages(size: int) -> int:
    return min(2_000_000, 512_000_000 // size)  # 2M of 100 B, 500k of 1 KiB


def run(args: argparse.Namespace, capture_dir: str | None = None, tree: Path | None = None) -> Rates:
    """One broker process (from source tree ``tree``, default the installed one) through every message size."""
    port = free_port()
    bootstrap = f"127.0.0.1:{port}"
    prof = tempfile.mktemp(suffix=".prof") if args.profile else None
    tmp = tempfile.TemporaryDirectory() if args.data_dir else None
    extra = ["--data-dir", tmp.name] if tmp else []
    if capture_dir is not None:
        extra += ["--capture", capture_dir]
    source = minikafka_tree(tree)
    proc, startup = start_broker(port, *extra, profile_to=prof, tree=tree)
    time.sleep(0.5)
    idle_rss = psutil.Process(proc.pid).memory_info().rss / 2**20
    print(f"client: {client_versions()}")
    print(f"broker: minikafka from {source}, {'data dir' if args.data_dir else 'in memory'}, "
          f"{args.partitions} partition(s)"
          f"{', capture on' if capture_dir else ''}{', under cProfile' if prof else ''}")
    print(f"{'size':>6} {'messages':>9} {'produce MB/s':>13} {'msgs/s':>10} {'broker CPU':>10} "
          f"{'consume MB/s':>13} {'msgs/s':>10} {'broker CPU':>10}")
    broker_proc = psutil.Process(proc.pid)

    def cpu() -> float:
        return cpu_seconds(broker_proc)

    rates: Rates = {}
    admin = AdminClient({"bootstrap.servers": bootstrap})
    try:
        for size in args.sizes:
            n = args.messages or default_messages(size)
            topic = f"bench-{size}"
            admin.create_topics([NewTopic(topic, args.partitions, 1)])[topic].result(10)
            c0 = cpu()
            tp = produce_flat_out(bootstrap, topic, n, size, args.partitions)
            c1 = cpu()
            tc = consume(bootstrap, topic, n, args.partitions)
            c2 = cpu()
            mb = n * size / 1e6
            rates[size] = (mb / tp, mb / tc)
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
    return rates


def run_captured(args: argparse.Namespace) -> Rates:
    """``run`` with ``serve --capture`` into a temporary directory; prints the capture's size."""
    with tempfile.TemporaryDirectory() as cap:
        rates = run(args, cap)
        files = sorted(Path(cap).glob("*.mkcap"))
        print(f"capture: {len(files)} file(s), {sum(f.stat().st_size for f in files) / 1e6:.1f} MB")
    return rates


def alternated(repeat: int, run_a: Callable[[], Rates],
               run_b: Callable[[], Rates]) -> tuple[list[Rates], list[Rates]]:
    """``repeat`` pairs of runs in ABBA order, so both see the same machine conditions; the A and the B results."""
    a: list[Rates] = []
    b: list[Rates] = []
    for i in range(repeat):
        for first in (True, False) if i % 2 == 0 else (False, True):
            (a if first else b).append(run_a() if first else run_b())
            print()
    return a, b


def print_ratios(title: str, news: list[Rates], olds: list[Rates]) -> None:
    """Per size and phase: each run's MB/s new/old, then the ratios of the best and of the median runs."""
    print(f"{title}:")
    for size in news[0]:
        for i, phase in enumerate(("produce", "consume")):
            new, old = [r[size][i] for r in news], [r[size][i] for r in olds]
            runs = ", ".join(f"{a:.1f}/{b:.1f}" for a, b in zip(new, old))
            best, median = max(new) / max(old), statistics.median(new) / statistics.median(old)
            print(f"{size:>6} B {phase}: runs {runs} MB/s; best {best:.1%}, median {median:.1%}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--messages", type=int, default=0, help="messages per size (default: 2M of 100 B, 500k of 1 KiB)")
    ap.add_argument("--sizes", type=lambda s: [int(x) for x in s.split(",")], default=[100, 1024],
                    help="message sizes in bytes, comma-separated (default 100,1024)")
    ap.add_argument("--partitions", type=int, default=1)
    ap.add_argument("--data-dir", action="store_true", help="broker with a data dir instead of in-memory")
    ap.add_argument("--profile", action="store_true", help="run the broker under cProfile and print a profile")
    ap.add_argument("--capture", action="store_true",
                    help="run without and with --capture (alternating, --repeat times) and print the "
                         "throughput ratios")
    ap.add_argument("--baseline", metavar="PATH", type=Path,
                    help="also run the broker from the minikafka source tree PATH (alternating, --repeat "
                         "times) and print the throughput ratios this tree / PATH")
    ap.add_argument("--repeat", type=int, default=1, help="with --capture or --baseline: pairs of runs (default 1)")
    args = ap.parse_args()
    if args.capture and args.baseline:
        ap.error("--capture and --baseline do not combine")
    if args.baseline:
        news, olds = alternated(args.repeat, lambda: run(args, tree=ROOT), lambda: run(args, tree=args.baseline))
        print_ratios(f"throughput {ROOT} / {args.baseline.resolve()}", news, olds)
    elif args.capture:
        offs, ons = alternated(args.repeat, lambda: run(args), lambda: run_captured(args))
        print_ratios("throughput with capture on / off", ons, offs)
    else:
        run(args)


if __name__ == "__main__":
    main()
