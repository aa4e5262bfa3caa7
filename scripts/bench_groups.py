"""Consumer-group benchmark: classic vs KIP-848 vs KIP-932 share consumers, with confluent-kafka.

    scripts/bench groups [--messages 200000] [--size 1024] [--repeat 3] [--timeout 60]
                         [--max-poll-records N] [-o KEY=VALUE ...]

The broker runs as its own process (``python -m minikafka serve``, in memory,
``-o group.initial.rebalance.delay.ms=0`` so the classic protocol does not wait
3 s for more members before its first assignment; ``-o`` adds more overrides),
so the client and the broker each get a core, as in the other benchmarks.

1. Consume throughput.  A topic of 6 partitions is filled once with
   ``--messages`` records of ``--size`` bytes (record i on partition i % 6), then
   read in full, each time by one consumer in a fresh group:

   - classic: ``Consumer`` with ``group.protocol=classic`` (JoinGroup/SyncGroup, range);
   - consumer: ``Consumer`` with ``group.protocol=consumer`` (KIP-848, ConsumerGroupHeartbeat);
   - share: ``ShareConsumer`` (KIP-932 ShareFetch, implicit acknowledgement: each poll accepts
     the records of the previous one; a final commit_sync acknowledges the last batch), its
     group set to ``share.auto.offset.reset=earliest`` (IncrementalAlterConfigs on the GROUP
     resource) before it joins.

   The classic and consumer ones use ``scripts/bench broker``'s fetch settings, do
   not commit offsets and are asked for 10000 records at a time.  Timed from
   ``subscribe()`` to the last record (share: to the last acknowledgements committed),
   so a read includes its group's join and first fetch, which are also printed apart
   (subscribe to first record).  Every record's error is checked and its partition
   counted: each partition must yield exactly its records (a share group redelivering
   one would fail the check).  Repeated ``--repeat`` times, the order of the three
   rotated each time; prints MB/s, messages/s, the broker's CPU share, and the medians
   with the ratio of each to classic.

2. Rebalance time.  On an empty topic of 6 partitions, in a fresh group: 3 consumers
   subscribe one after another, then the first one (the classic group's leader) closes.
   Each member polls (``poll(0.05)``) on a thread of its own and publishes its
   ``assignment()`` after every poll and from its on_assign/on_revoke/on_lost callbacks
   (once they have applied the change); a step's time runs from the ``subscribe()`` (or
   ``close()``) call until the members' assignments cover the 6 partitions exactly once
   with every member holding 6/k of them (2 or 3 per member, as every assignor here
   balances).  For classic with the range
   (eager) and the cooperative-sticky assignors and for the consumer protocol (the
   broker's default ``uniform`` assignor), ``--repeat`` runs; prints p50/max per step.
   Members learn of a rebalance from their next heartbeat: classic clients send one
   every ``heartbeat.interval.ms`` (librdkafka: 3 s), KIP-848 ones every
   ``group.consumer.heartbeat.interval.ms`` (the broker's, 5 s, as Kafka), so
   steps that move partitions away from a member take up to that long.

Exits with FAILED and what it saw when a step or a read does not finish within
``--timeout`` seconds.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import psutil
from bench_cluster import pct
from bench_common import (Throughput, client_versions,
                          cpu_seconds, free_port, minikafka_tree, produce_flat_out, start_broker,
                          stop_broker)
from confluent_kafka import Consumer, KafkaException, ShareConsumer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic, ResourceType

PARTITIONS = 6
MODES = ("classic", "consumer", "share")
# As scripts/bench broker's consumer (bench_broker.consume).
FETCH = {"fetch.max.bytes": 52428800, "max.partition.fetch.bytes": 10485760,
         "queued.max.messages.kbytes": 1048576, "queued.min.messages": 2000000, "fetch.queue.backoff.ms": 5}
BATCH = 10000  # records asked of Consumer.consume() at a time
REBALANCES = {"classic range": {"group.protocol": "classic", "partition.assignment.strategy": "range"},
              "classic coop-sticky": {"group.protocol": "classic",
                                      "partition.assignment.strategy": "cooperative-sticky"},
              "consumer (KIP-848)": {"group.protocol": "consumer"}}
STEPS = ("join 1", "join 2", "join 3", "close 1")


def fail(what: str) -> SystemExit:
    return SystemExit(f"FAILED: {what}")


@dataclass
class Read(Throughput):
    mode: str
    first: float  # subscribe to first record, seconds
    seconds: float  # subscribe to last record (share: to its acknowledgement committed)
    messages: int
    size: int
    broker_cpu: float  # share of one core over ``seconds``


def set_share_earliest(admin: AdminClient, group: str) -> None:
    res = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([res])[res].result(10)


def read_all(mode: str, bootstrap: str, admin: AdminClient, topic: str, group: str, args: argparse.Namespace,
             broker: psutil.Process) -> Read:
    """One consumer of ``mode`` in group ``group`` reads ``topic`` (``args.messages`` records) to the end."""
    base = {"bootstrap.servers": bootstrap, "group.id": group, "client.id": f"bench-{mode}"}
    if mode == "share":
        set_share_earliest(admin, group)
        conf = {**base, "share.acknowledgement.mode": "implicit", "fetch.max.bytes": FETCH["fetch.max.bytes"],
                "log_level": 3}  # not the warning that the share consumer is a preview
        if args.max_poll_records:
            conf["max.poll.records"] = args.max_poll_records
        c: Any = ShareConsumer(conf)
        fetch: Callable[[int], Any] = lambda _: c.poll(0.5)
    else:
        c = Consumer({**base, **FETCH, "group.protocol": mode, "enable.auto.commit": False,
                      "auto.offset.reset": "earliest"})
        fetch = lambda batch: c.consume(num_messages=batch, timeout=0.5)
    n = args.messages
    expected = [n // PARTITIONS + (p < n % PARTITIONS) for p in range(PARTITIONS)]
    counts = [0] * PARTITIONS
    got = 0
    first: float | None = None
    try:
        cpu0 = cpu_seconds(broker)
        t0 = last = time.perf_counter()
        c.subscribe([topic])
        while got < n:
            if time.perf_counter() - last > args.timeout:
                where = "no records" if not got else f"{got}/{n} records, then nothing"
                raise fail(f"{mode} consumer: {where} for {args.timeout:.0f} s (per partition {counts})")
            # consume() returns once it has ``num_messages`` records (or at the timeout): 1 the first time, so
            # that the first record's time is when it arrived.
            msgs = fetch(1 if first is None else min(BATCH, n - got))
            if not msgs:
                continue
            for m in msgs:
                err = m.error()
                if err is not None:
                    raise fail(f"{mode} consumer error: {err}")
                counts[m.partition()] += 1
            got += len(msgs)
            last = time.perf_counter()
            if first is None:
                first = last - t0
        if mode == "share":
            c.commit_sync(args.timeout)  # the last poll's implicit acknowledgements
        seconds = time.perf_counter() - t0
        cpu = (cpu_seconds(broker) - cpu0) / seconds
    finally:
        c.close()
    if counts != expected:
        raise fail(f"{mode} consumer read {counts} records per partition, expected {expected}")
    assert first is not None
    return Read(mode, first, seconds, n, args.size, cpu)


class Member:
    """A consumer polling (``poll(0.05)``) on a thread of its own, publishing its assignment after every poll
    and as soon as a rebalance callback changed it (poll serves the callback, then waits out its timeout)."""

    def __init__(self, name: str, conf: dict[str, object], cond: threading.Condition) -> None:
        self.name = name
        self.consumer = Consumer({**conf, "client.id": name})
        # Incremental (cooperative-sticky, KIP-848) or eager (range) rebalances.
        self.incremental = conf.get("partition.assignment.strategy") != "range"
        self.cond = cond
        self.assigned: frozenset[int] = frozenset()
        self.error: BaseException | None = None
        self.closing = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def subscribe(self, topic: str) -> None:
        self.consumer.subscribe([topic], on_assign=self._on_assign, on_revoke=self._on_revoke,
                                on_lost=self._on_revoke)
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()

    # The callbacks do what confluent-kafka does when they do not (assign/unassign), then publish.
    def _on_assign(self, c: Consumer, partitions: list[Any]) -> None:
        if self.incremental:
            c.incremental_assign(partitions)
        else:
            c.assign(partitions)
        self._publish()

    def _on_revoke(self, c: Consumer, partitions: list[Any]) -> None:
        if self.incremental:
            c.incremental_unassign(partitions)
        else:
            c.unassign()
        self._publish()

    def _publish(self) -> None:
        if self.closing:  # close() revokes, but assignment() fails once the handle is being destroyed
            return
        assigned = frozenset(tp.partition for tp in self.consumer.assignment())
        with self.cond:
            self.assigned = assigned
            self.cond.notify_all()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                msg = self.consumer.poll(0.05)
                err = None if msg is None else msg.error()
                if err is not None and err.fatal():
                    raise fail(f"{self.name}: {err}")
                self._publish()
        except BaseException as e:  # noqa: BLE001  (reported by the main thread)
            with self.cond:
                self.error = e
                self.cond.notify_all()

    def close(self) -> None:
        """Close the consumer (its poll thread stopped first: a consumer is not to be used by two threads)."""
        if not self.stop():
            raise fail(f"{self.name}: poll thread did not stop")
        self.closing = True
        self.consumer.close()

    def stop(self) -> bool:
        """Stop the poll thread; whether it stopped (only then may the consumer be closed)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
            return not self._thread.is_alive()
        return True


def balanced(members: list[Member]) -> bool:
    """The members' assignments cover every partition once, each member holding 6/k of them (floor or ceiling)."""
    sets = [m.assigned for m in members]
    lo, hi = PARTITIONS // len(members), -(-PARTITIONS // len(members))
    return (sum(map(len, sets)) == PARTITIONS and frozenset().union(*sets) == frozenset(range(PARTITIONS))
            and all(lo <= len(s) <= hi for s in sets))


def settle(members: list[Member], cond: threading.Condition, t0: float, what: str, timeout: float) -> float:
    """Seconds from ``t0`` until ``balanced(members)``; exits on a member's error or after ``timeout``."""
    deadline = t0 + timeout
    with cond:
        while True:
            for m in members:
                if m.error is not None:
                    raise fail(f"{what}: {m.name} poll thread: {m.error}")
            if balanced(members):
                return time.perf_counter() - t0
            left = deadline - time.perf_counter()
            if left <= 0:
                seen = ", ".join(f"{m.name} {sorted(m.assigned)}" for m in members)
                raise fail(f"{what}: assignments not balanced after {timeout:.0f} s ({seen})")
            cond.wait(left)


def rebalance_run(name: str, conf: dict[str, str], bootstrap: str, topic: str, group: str,
                  timeout: float) -> list[float]:
    """3 members join ``group`` one by one, then the first closes: each step's seconds until balanced."""
    cond = threading.Condition()
    base = {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
            "auto.offset.reset": "earliest", **conf}
    members = [Member(f"{group}-m{i}", base, cond) for i in range(3)]
    live: list[Member] = []
    times: list[float] = []
    try:
        for i, m in enumerate(members):
            live.append(m)
            t0 = time.perf_counter()
            m.subscribe(topic)
            times.append(settle(live, cond, t0, f"{name}: join {i + 1}", timeout))
        first = live.pop(0)
        if not first.stop():  # before the clock starts: it waits for a poll(0.05) to return
            raise fail(f"{name}: {first.name}'s poll thread did not stop")
        t0 = time.perf_counter()
        first.close()
        times.append(settle(live, cond, t0, f"{name}: close 1", timeout))
    finally:
        for m in members:
            if not m.closing and m.stop():  # a thread that did not stop keeps its consumer (a daemon thread)
                m.closing = True
                try:
                    m.consumer.close()
                except KafkaException as e:  # not in place of an error being raised
                    print(f"{m.name}: close: {e}", file=sys.stderr)
    return times


def print_read(r: Read) -> None:
    print(f"{r.mode:<10} {r.messages:>9} {r.mbs:>7.1f} {r.msgs:>8.0f} {r.broker_cpu:>10.0%} {r.first * 1000:>8.0f}")


def override(value: str) -> str:
    if "=" not in value:
        raise argparse.ArgumentTypeError(f"{value!r}: expected KEY=VALUE")
    return value


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=200_000, help="records in the topic read (default 200000)")
    ap.add_argument("--size", type=int, default=1024, help="record value bytes (default 1024)")
    ap.add_argument("--repeat", type=int, default=3,
                    help="reads per consumer kind and rebalance runs per protocol (default 3); medians, p50/max")
    ap.add_argument("--timeout", type=float, default=60,
                    help="seconds a read may go without records, or a rebalance step may take (default 60)")
    ap.add_argument("--max-poll-records", type=int, default=0,
                    help="the share consumer's max.poll.records (default: librdkafka's)")
    ap.add_argument("-o", "--override", type=override, action="append", default=[], metavar="KEY=VALUE",
                    help="another server.properties key for the broker (repeatable), e.g. "
                         "-o group.consumer.min.heartbeat.interval.ms=1000 "
                         "-o group.consumer.heartbeat.interval.ms=1000")
    ap.add_argument("--skip", choices=("read", "rebalance"), action="append", default=[],
                    help="leave out a part (repeatable)")
    args = ap.parse_args()
    if min(args.messages, args.size, args.repeat) < 1 or args.timeout <= 0 or args.max_poll_records < 0:
        ap.error("--messages, --size and --repeat must be at least 1, --timeout positive, --max-poll-records >= 0")

    source = minikafka_tree()
    overrides = ["group.initial.rebalance.delay.ms=0", *args.override]
    port = free_port()
    bootstrap = f"127.0.0.1:{port}"
    proc, startup = start_broker(port, *(a for o in overrides for a in ("-o", o)))
    broker = psutil.Process(proc.pid)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    try:
        print(f"client: {client_versions()}")
        print(f"broker: minikafka from {source}, in its own process, in memory, started in {startup * 1000:.0f} ms; "
              f"-o {' -o '.join(overrides)}")
        if "read" not in args.skip:
            reads(bootstrap, admin, broker, args)
        if "rebalance" not in args.skip:
            rebalances(bootstrap, admin, args)
    finally:
        del admin  # destroyed now, so it does not keep reconnecting to the stopped broker
        stop_broker(proc)


def reads(bootstrap: str, admin: AdminClient, broker: psutil.Process, args: argparse.Namespace) -> None:
    topic = "bench-groups-read"
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(10)
    seconds = produce_flat_out(bootstrap, topic, args.messages, args.size, PARTITIONS)
    print(f"\n1. consume throughput: {args.messages} records of {args.size} B in {PARTITIONS} partitions "
          f"(filled once at {args.messages * args.size / 1e6 / seconds:.1f} MB/s), one consumer in a fresh group "
          f"per read; MB/s from subscribe to its last record, first = subscribe to first record")
    print(f"{'mode':<10} {'messages':>9} {'MB/s':>7} {'msgs/s':>8} {'broker CPU':>10} {'first ms':>8}")
    results: dict[str, list[Read]] = {m: [] for m in MODES}
    for run in range(args.repeat):
        for mode in MODES[run % 3:] + MODES[:run % 3]:  # rotated, so each sees the same machine conditions
            r = read_all(mode, bootstrap, admin, topic, f"bench-groups-{run}-{mode}", args, broker)
            results[mode].append(r)
            print_read(r)
    runs = f"median of {args.repeat} reads" if args.repeat > 1 else "1 read"
    print(f"{runs}:")
    classic = statistics.median(r.mbs for r in results["classic"])
    for mode in MODES:
        mbs = statistics.median(r.mbs for r in results[mode])
        first = statistics.median(r.first for r in results[mode])
        print(f"  {mode:<10} {mbs:>7.1f} MB/s {mbs * 1e6 / args.size:>8.0f} msgs/s  {mbs / classic:>5.2f}x classic  "
              f"first record {first * 1000:.0f} ms")


def rebalances(bootstrap: str, admin: AdminClient, args: argparse.Namespace) -> None:
    topic = "bench-groups-rebalance"
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(10)
    print(f"\n2. rebalance time, ms: 3 consumers subscribe one after another to a topic of {PARTITIONS} partitions, "
          f"then the first closes; from subscribe()/close() until the assignments cover every partition once, "
          f"balanced ({args.repeat} run(s) each)")
    print(f"{'protocol':<20} " + " ".join(f"{s + ' p50':>12} {'max':>6}" for s in STEPS))
    for name, conf in REBALANCES.items():
        runs = [rebalance_run(name, conf, bootstrap, topic, f"bench-groups-rb-{i}-{name.split()[0]}-"
                              f"{conf.get('partition.assignment.strategy', 'server')}", args.timeout)
                for i in range(args.repeat)]
        cols = []
        for step in range(len(STEPS)):
            ms = [r[step] * 1000 for r in runs]
            cols.append(f"{pct(ms, 0.5):>12.0f} {max(ms):>6.0f}")
        print(f"{name:<20} " + " ".join(cols))


if __name__ == "__main__":
    main()
