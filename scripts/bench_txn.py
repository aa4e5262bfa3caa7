"""Transactions benchmark: transactional vs non-transactional (idempotent) produce with confluent-kafka.

    scripts/bench txn [--messages 200000] [--txn-size 1000] [--size 1024] [--partitions 1] [--brokers 1]
                      [--repeat 3] [--in-process]

The broker runs as its own process (``python -m minikafka serve``, in memory;
``--brokers 3``: ``serve --brokers 3``, all brokers in one process, topics with
replication factor 3), so the client and the broker each get a core, as in the
other benchmarks; ``--in-process`` runs it (or the cluster) on a thread of this
process instead (:mod:`minikafka.testing`), sharing the GIL with the producer.
On the same broker, one after the other (alternated ABBA with ``--repeat``),
each on a fresh topic and after a short untimed warm-up on another topic:

- idempotent: one producer (acks=all, enable.idempotence) sends ``--messages``
  records of ``--size`` bytes flat out, timed until all are acknowledged;
- transactional: one producer (a ``transactional.id`` per phase; init_transactions
  once, untimed) sends them as transactions of ``--txn-size`` records
  (begin_transaction, produce, commit_transaction), timed until the last commit
  returned; each commit_transaction call (which flushes that transaction's
  records, then sends EndTxn) is timed on its own.

Both producers have the same batching settings as ``scripts/bench broker``.
After each phase a read_committed consumer reads the topic to the end: it must
see exactly ``--messages`` records, and the log end offsets must be those
records plus, for transactions, one COMMIT marker per transaction and partition
(it exits with FAILED otherwise).  Prints MB/s, messages/s and the broker's CPU share
per phase, the ratio transactional / idempotent, commit_transaction latency
p50/p99/max and the number of transactions; with ``--repeat K``, the medians.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import psutil
from bench_cluster import pct, wait_port
from bench_common import (Throughput, client_versions,
                          cpu_seconds, free_port, minikafka_tree, produce_queued, start_broker,
                          stop_broker)
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

MODES = ("idempotent", "transactional")
# As produce_flat_out (bench_common), plus acks=all and idempotence, which transactions imply.
PRODUCER = {"linger.ms": 5, "batch.size": 1000000, "queue.buffering.max.kbytes": 1048576,
            "queue.buffering.max.messages": 1000000, "acks": "all", "enable.idempotence": True}


@dataclass
class Phase(Throughput):
    mode: str
    seconds: float
    messages: int
    size: int
    broker_cpu: float | None  # share of one core, None in-process
    commits_ms: list[float] = field(default_factory=list)  # one per transaction


def free_ports(n: int) -> int:
    """A port p with p..p+n-1 all free (``serve --brokers N`` listens on consecutive ports)."""
    while True:
        port = free_port()
        try:
            for i in range(1, n):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", port + i))
            return port
        except OSError:
            continue


@contextmanager
def running_broker(brokers: int, in_process: bool) -> Iterator[tuple[str, psutil.Process | None, float]]:
    """A broker (``brokers`` > 1: a cluster) in memory: its bootstrap, its process (None in-process) and its
    start-up seconds."""
    if in_process:
        from minikafka.testing import BrokerThread, ClusterThread

        t0 = time.perf_counter()
        thread = (ClusterThread(brokers) if brokers > 1 else BrokerThread()).start()
        try:
            yield thread.bootstrap, None, time.perf_counter() - t0
        finally:
            thread.stop()
        return
    port = free_ports(brokers)
    proc, startup = start_broker(port, *(["--brokers", str(brokers), "--in-process"] if brokers > 1 else []))
    try:
        for i in range(1, brokers):
            wait_port(port + i)
        yield ",".join(f"127.0.0.1:{port + i}" for i in range(brokers)), psutil.Process(proc.pid), startup
    finally:
        stop_broker(proc)


class Window:
    """The timed part of a phase (``with window:``): its wall seconds and the broker's share of a core."""

    def __init__(self, broker: psutil.Process | None) -> None:
        self.broker = broker
        self.seconds = 0.0
        self.broker_cpu: float | None = None  # None in-process

    def __enter__(self) -> None:
        self._cpu = cpu_seconds(self.broker) if self.broker else 0.0
        self._t0 = time.perf_counter()

    def __exit__(self, *exc: object) -> None:
        self.seconds = time.perf_counter() - self._t0
        if self.broker:
            self.broker_cpu = (cpu_seconds(self.broker) - self._cpu) / self.seconds


def check_delivered(errors: list[object]) -> None:
    if errors:
        raise SystemExit(f"{len(errors)} delivery error(s), e.g. {errors[:3]}")


def producer(bootstrap: str, errors: list[object], **extra: object) -> Producer:
    def on_delivery(err: object, msg: object) -> None:
        if err is not None:
            errors.append(err)

    return Producer({"bootstrap.servers": bootstrap, **PRODUCER, **extra, "on_delivery": on_delivery})


def run_idempotent(bootstrap: str, topic: str, warmup_topic: str, args: argparse.Namespace, window: Window) -> None:
    errors: list[object] = []
    p = producer(bootstrap, errors)
    payload = os.urandom(args.size)
    produce_queued(p, warmup_topic, payload, args.txn_size, args.partitions)  # connections, metadata, producer id
    if p.flush(60):
        raise SystemExit("idempotent warm-up not delivered")
    check_delivered(errors)
    with window:
        produce_queued(p, topic, payload, args.messages, args.partitions)
        left = p.flush(300)
    if left:
        raise SystemExit(f"idempotent: {left} messages not delivered")
    check_delivered(errors)


def run_transactional(bootstrap: str, topic: str, warmup_topic: str, args: argparse.Namespace,
                      transactional_id: str, window: Window) -> list[float]:
    errors: list[object] = []
    p = producer(bootstrap, errors, **{"transactional.id": transactional_id})
    payload = os.urandom(args.size)
    p.init_transactions(30)
    p.begin_transaction()  # warm-up: one transaction on another topic
    produce_queued(p, warmup_topic, payload, args.txn_size, args.partitions)
    p.commit_transaction(60)
    check_delivered(errors)
    commits: list[float] = []
    with window:
        for start in range(0, args.messages, args.txn_size):
            p.begin_transaction()
            produce_queued(p, topic, payload, min(args.txn_size, args.messages - start), args.partitions, start)
            c0 = time.perf_counter()
            p.commit_transaction(60)
            commits.append((time.perf_counter() - c0) * 1000)
    check_delivered(errors)
    return commits


def verify_committed(bootstrap: str, topic: str, partitions: int, expected: int, markers: int,
                     timeout: float = 30) -> str:
    """Read ``topic`` to its last stable offsets with read_committed: exit unless exactly ``expected`` records
    (and, with ``markers`` > 0, log end offsets of records + markers); a line saying what was found."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-txn-verify", "enable.auto.commit": False,
                  "isolation.level": "read_committed", "enable.partition.eof": True,
                  "fetch.max.bytes": 52428800, "max.partition.fetch.bytes": 10485760,
                  "queued.max.messages.kbytes": 1048576, "fetch.queue.backoff.ms": 5})
    tps = [TopicPartition(topic, p, 0) for p in range(partitions)]
    c.assign(tps)
    got, at_end = 0, set[int]()
    t0 = time.perf_counter()
    deadline = t0 + timeout
    try:
        # Done once every partition reported EOF (at its last stable offset) after the last record: the
        # last markers may land after the producer's commit returned (EndTxn is answered before them).
        while len(at_end) < partitions or got < expected:
            if time.perf_counter() > deadline:
                raise SystemExit(f"FAILED: read_committed consumer saw {got}/{expected} committed records of "
                                 f"{topic} after {timeout:.0f} s (partitions at end: {sorted(at_end)})")
            for msg in c.consume(num_messages=100000, timeout=0.5):
                err, partition = msg.error(), msg.partition() or 0
                if err is None:
                    got += 1
                    at_end.discard(partition)
                elif err.code() == KafkaError._PARTITION_EOF:
                    at_end.add(partition)
                else:
                    raise SystemExit(f"FAILED: consumer error on {topic}: {err}")
        seconds = time.perf_counter() - t0
        ends = sum(c.get_watermark_offsets(tp, timeout=10)[1] for tp in tps)
    finally:
        c.close()
    if got != expected:
        raise SystemExit(f"FAILED: read_committed consumer saw {got} records of {topic}, expected {expected}")
    if ends != expected + markers:
        raise SystemExit(f"FAILED: {topic}'s log end offsets sum to {ends}, expected {expected} records + "
                         f"{markers} markers")
    what = f" + {markers} COMMIT markers" if markers else ""
    return (f"read_committed: {got}/{expected} committed records ({seconds:.1f} s); log end offsets {ends} = "
            f"records{what}")


def phase(mode: str, run: int, bootstrap: str, admin: AdminClient, args: argparse.Namespace,
          broker: psutil.Process | None) -> tuple[Phase, str]:
    topic, warmup = f"bench-txn-{run}-{mode}", f"bench-txn-{run}-{mode}-warmup"
    for t in (topic, warmup):
        admin.create_topics([NewTopic(t, args.partitions, args.brokers)])[t].result(10)
    time.sleep(0.5)  # leaders and replicas settle (as scripts/bench cluster)
    window = Window(broker)
    commits: list[float] = []
    if mode == "idempotent":
        run_idempotent(bootstrap, topic, warmup, args, window)
    else:
        commits = run_transactional(bootstrap, topic, warmup, args, f"bench-txn-{run}", window)
    # One marker per transaction on each partition it wrote to.
    markers = sum(min(args.partitions, min(args.txn_size, args.messages - s))
                  for s in range(0, args.messages, args.txn_size)) if commits else 0
    checked = verify_committed(bootstrap, topic, args.partitions, args.messages, markers)
    for t in (topic, warmup):  # the in-memory logs go, so later phases do not run on a fuller broker
        admin.delete_topics([t])[t].result(10)
    return Phase(mode, window.seconds, args.messages, args.size, window.broker_cpu, commits), checked


def print_phase(ph: Phase, checked: str) -> None:
    cpu = "-" if ph.broker_cpu is None else f"{ph.broker_cpu:.0%}"
    if ph.commits_ms:
        c = ph.commits_ms
        lat = f"{len(c):>6} {pct(c, 0.5):>7.1f} {pct(c, 0.99):>7.1f} {max(c):>7.1f}"
    else:
        lat = f"{'-':>6} {'-':>7} {'-':>7} {'-':>7}"
    print(f"{ph.mode:<14} {ph.messages:>9} {ph.mbs:>7.1f} {ph.msgs:>8.0f} {cpu:>10} {lat}")
    print(f"{'':<14} {checked}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=200_000, help="records per phase (default 200000)")
    ap.add_argument("--txn-size", type=int, default=1000, help="records per transaction (default 1000)")
    ap.add_argument("--size", type=int, default=1024, help="record value bytes (default 1024)")
    ap.add_argument("--partitions", type=int, default=1, help="partitions of the topic (default 1)")
    ap.add_argument("--brokers", type=int, default=1,
                    help="brokers (default 1; N > 1: an N-broker cluster in one process, topics with RF N)")
    ap.add_argument("--repeat", type=int, default=3, help="pairs of phases, alternated ABBA (default 3); medians")
    ap.add_argument("--in-process", action="store_true",
                    help="run the broker/cluster on a thread of this process (minikafka.testing) instead of its own "
                         "process")
    args = ap.parse_args()
    if min(args.messages, args.txn_size, args.size, args.partitions, args.brokers, args.repeat) < 1:
        ap.error("every count must be at least 1")

    source = minikafka_tree()
    with running_broker(args.brokers, args.in_process) as (bootstrap, broker, startup):
        print(f"client: {client_versions()}")
        where = "on a thread of this process" if args.in_process else "in its own process"
        what = "1 broker" if args.brokers == 1 else f"{args.brokers} brokers, RF {args.brokers}"
        print(f"broker: minikafka from {source}, {what}, {where}, in memory, started in {startup * 1000:.0f} ms; "
              f"{args.partitions} partition(s), {args.messages} records of {args.size} B per phase, "
              f"transactions of {args.txn_size}")
        print(f"{'mode':<14} {'messages':>9} {'MB/s':>7} {'msgs/s':>8} {'broker CPU':>10} {'txns':>6} "
              f"{'commit p50':>7} {'p99':>7} {'max ms':>7}")
        admin = AdminClient({"bootstrap.servers": bootstrap})
        results: dict[str, list[Phase]] = {m: [] for m in MODES}
        try:
            for run in range(args.repeat):  # ABBA, so both modes see the same machine conditions
                for mode in MODES if run % 2 == 0 else MODES[::-1]:
                    ph, checked = phase(mode, run, bootstrap, admin, args, broker)
                    results[mode].append(ph)
                    print_phase(ph, checked)
        finally:
            del admin  # destroyed now, so it does not keep reconnecting to the stopped broker

    idem, txn = ([p.mbs for p in results[m]] for m in MODES)
    commits = [c for p in results["transactional"] for c in p.commits_ms]
    runs = f"median of {args.repeat} runs" if args.repeat > 1 else "1 run"
    print(f"\n{runs}:")
    for mode, mbs in zip(MODES, (idem, txn)):
        med = statistics.median(mbs)
        print(f"  {mode:<14} {med:>6.1f} MB/s {med * 1e6 / args.size:>8.0f} msgs/s")
    print(f"  transactional / idempotent: {statistics.median(txn) / statistics.median(idem):.2f}x")
    print(f"  commit_transaction over {len(commits)} transactions of {args.txn_size}: p50 {pct(commits, 0.5):.1f} ms, "
          f"p99 {pct(commits, 0.99):.1f} ms, max {max(commits):.1f} ms, mean {statistics.mean(commits):.1f} ms")
    # librdkafka waits a fixed 20 ms before retrying an AddPartitionsToTxn answered CONCURRENT_TRANSACTIONS (the
    # previous transaction's markers not written yet); commit_transaction waits for that registration.
    slow = sum(c >= 20 for c in commits)
    print(f"  commits of 20 ms or more: {slow} ({slow / len(commits):.0%}; a next transaction's AddPartitionsToTxn "
          f"answered CONCURRENT_TRANSACTIONS costs librdkafka's fixed 20 ms retry backoff)")


if __name__ == "__main__":
    main()
