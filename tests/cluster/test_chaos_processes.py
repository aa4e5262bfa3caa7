"""Chaos on broker processes (issue 26): for 90 s, every few seconds a random broker is killed (SIGKILL), paused
(SIGSTOP) or cut off by a network partition, and once the controller is killed, while an idempotent producer
writes, a transactional consume-transform-produce loop copies its records in a KIP-848 consumer group, and the
group's committed offsets are watched.  Afterwards: no acknowledged record lost and none stored twice by one
producer epoch, the copy read with read_committed holds every input record exactly once (only whole
transactions), the committed offsets never moved back, and every broker holds the same records once the network
healed and every replica caught up."""

from __future__ import annotations

import logging
import random
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

import waiting
from cluster_clients_common import rewind_to_committed
from cluster_logs import DataRecord, check_copies_across_epoch_bumps, data_records
from minikafka.supervisor.processes import CONTROLLER, ProcessCluster

from test_processes import CLIENT_TIMEOUTS, PARTITIONS, SETTINGS, Writer, _consume_all, _create_topic, _metadata

pytestmark = [pytest.mark.clients, pytest.mark.slow]

log = logging.getLogger(__name__)

CHAOS_SECONDS = 90.0
GROUP = "chaos-ctp"
#: The copy loop's member of the KIP-848 group is fenced 10 s after its coordinator last heard of it (Kafka's 45 s
#: would leave the copy idle for most of the chaos after a coordinator was cut off), and preferred leaders come
#: back within seconds, as the failures pile leadership onto the brokers left.
CHAOS_SETTINGS = {**SETTINGS, "group.consumer.session.timeout.ms": "10000",
                  "group.consumer.min.session.timeout.ms": "10000", "leader.imbalance.check.interval.seconds": "5"}


class CopyLoop:
    """Kafka's consume-transform-produce loop: records of ``source`` copied to ``target`` in transactions that
    commit the group's offsets with them; an aborted or failed transaction rewinds to the committed offsets, a
    producer whose call hung (a client bug: :func:`waiting.bounded`) is replaced by a new one, which fences it."""

    def __init__(self, bootstrap: str, source: str, target: str) -> None:
        self.bootstrap, self.source, self.target = bootstrap, source, target
        self.committed: dict[int, list[int]] = {p: [] for p in range(PARTITIONS)}  # as read after each commit
        self.commits = self.aborts = self.hangs = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.failure: BaseException | None = None

    def _producer(self):
        from confluent_kafka import Producer

        producer = Producer({"bootstrap.servers": self.bootstrap, "transactional.id": "chaos-copier",
                             "transaction.timeout.ms": 60000, "message.timeout.ms": 60000, "linger.ms": 5,
                             **CLIENT_TIMEOUTS})
        producer.init_transactions(120)
        return producer

    def _consumer(self):
        from confluent_kafka import Consumer

        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": GROUP, "group.protocol": "consumer",
                             "enable.auto.commit": False, "auto.offset.reset": "earliest",
                             "isolation.level": "read_committed", "socket.timeout.ms": 5000})
        consumer.subscribe([self.source])
        return consumer

    def _new_producer(self):
        """A new transactional producer (fencing the one before), tried again while init_transactions fails."""
        from confluent_kafka import KafkaException

        while True:
            try:
                return self._producer()
            except KafkaException as exc:
                if self._stop.is_set():
                    raise
                log.info("copy loop: a new producer: %s", exc.args[0])

    def _commit(self, producer) -> None:
        """commit_transaction, retried while its error is retriable (librdkafka's advice) and the loop runs (a
        commit left undecided is completed or aborted by the next producer's init_transactions)."""
        from confluent_kafka import KafkaException

        for attempt in range(10):
            try:
                waiting.bounded(lambda: producer.commit_transaction(30), 60)
                return
            except KafkaException as exc:
                if not exc.args[0].retriable() or attempt == 9 or self._stop.is_set():
                    raise

    def _watch_committed(self, consumer) -> None:
        """The group's committed offsets as read after a commit (not read: the next commit's reading says)."""
        from confluent_kafka import KafkaException, TopicPartition

        try:
            committed = consumer.committed([TopicPartition(self.source, p) for p in range(PARTITIONS)], timeout=30)
        except KafkaException as exc:
            log.info("copy loop: reading the committed offsets: %s", exc.args[0])
            return
        for tp in committed:
            if tp.offset >= 0:
                self.committed[tp.partition].append(tp.offset)

    def _run(self) -> None:
        from confluent_kafka import KafkaException, TopicPartition

        consumer = None
        try:
            producer, consumer = self._producer(), self._consumer()
            while not self._stop.is_set():
                msgs = [m for m in consumer.consume(200, 0.5) if m.error() is None]
                if not msgs:
                    continue
                try:
                    producer.begin_transaction()
                    for m in msgs:
                        producer.produce(self.target, value=m.value(), partition=m.partition())
                    # Positions from the records read, not consumer.position(consumer.assignment()): those calls
                    # keep the GIL while they wait for librdkafka's main thread and a partition's lock, which its
                    # issue 5476's deadlock (a leader cut off mid-OffsetForLeaderEpoch) holds for ever, freezing
                    # the whole test process (tests/hang_watchdog.py).
                    last = {m.partition(): m.offset() for m in msgs}
                    positions = [TopicPartition(self.source, p, offset + 1) for p, offset in sorted(last.items())]
                    group = consumer.consumer_group_metadata()
                    waiting.bounded(lambda: producer.send_offsets_to_transaction(positions, group, 60), 90)
                    self._commit(producer)
                    self.commits += 1
                    self._watch_committed(consumer)
                except waiting.Hung as exc:
                    log.info("copy loop: %s; a new producer", exc)
                    self.hangs += 1
                    producer = self._new_producer()
                    rewind_to_committed(consumer, self._stop, "copy loop")
                except KafkaException as exc:
                    error = exc.args[0]
                    log.info("copy loop: %s", error)
                    if error.txn_requires_abort():
                        try:
                            waiting.bounded(lambda: producer.abort_transaction(60), 90)
                        except waiting.Hung:
                            producer = self._new_producer()
                        self.aborts += 1
                    else:  # fatal: a new producer (fencing the old one and aborting its transaction)
                        producer = self._new_producer()
                    rewind_to_committed(consumer, self._stop, "copy loop")
        except BaseException as exc:  # reported by the test
            self.failure = exc
        finally:  # a loop that failed leaves its group too (its consumer would go on heartbeating, holding its
            # partitions from the next loop's member until its rebalance timeout)
            if consumer is not None:
                self._close(consumer)

    def _close(self, consumer) -> None:
        """Close the consumer, abandoned if that blocks: a KIP-848 member whose group coordinator left the metadata
        (a crashed or cut-off broker) is never looked up again by librdkafka 2.16 (its issues 5456 and 5511), so
        it stops heartbeating (the coordinator fences it once its session expires) and its close, which leaves the
        group through that coordinator, never returns."""
        try:
            waiting.bounded(consumer.close, 60)
        except waiting.Hung as exc:
            log.warning("copy loop: %s; the consumer abandoned", exc)
            self.hangs += 1

    def __enter__(self) -> CopyLoop:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(300)
        # A loop still running would fence the next one's producer (the same transactional.id) and share its group.
        assert not self._thread.is_alive() or exc[0] is not None, f"the copy loop did not stop: {self._where()}"

    def _where(self) -> str:
        """Where the loop's thread is (for the failure message)."""
        return f"{self.commits} commits, {self.aborts} aborts, {self.hangs} hangs; at\n{waiting.stacks([self._thread])}"

    def wait_until_copied(self, ends: dict[int, int]) -> None:
        """Until the group committed every input record (the copy is complete)."""
        waiting.wait_for(lambda: self.failure is not None or all(
            self.committed[p] and self.committed[p][-1] >= end for p, end in ends.items()), 180, interval=0.2)


def _chaos(cluster: ProcessCluster, writer: Writer, seconds: float, rng: random.Random) -> list[str]:
    """One failure at a time until ``seconds`` have passed, each undone once the producer made progress with it
    in place (fencing and a new leader, for a victim that led), then progress again before the next; the
    controller is killed once, midway.  The pace is the cluster's: a few seconds a failure."""
    done: list[str] = []
    deadline = time.monotonic() + seconds
    controller_at = time.monotonic() + seconds / 2
    while time.monotonic() < deadline:
        if controller_at is not None and time.monotonic() >= controller_at:
            action, victim = "kill", CONTROLLER
            controller_at = None
        else:
            action, victim = rng.choice(["kill", "pause", "isolate"]), str(rng.choice(list(cluster.brokers)))
        done.append(f"{action} {victim}")
        log.info("chaos: %s %s", action, victim)
        getattr(cluster, action)(victim)
        writer.wait_for(writer.count + rng.randint(200, 600))
        if action == "kill":
            cluster.start(victim)
        elif action == "pause":
            cluster.resume(victim)
        else:
            cluster.heal()
        writer.wait_for(writer.count + rng.randint(100, 300))
    return done


def _replica_records(data_dir: Path, broker: int, topic: str, partition: int) -> list[DataRecord]:
    """A replica's data records, read from its broker's data directory."""
    from minikafka.broker.log import Log, LogConfig

    path = next((data_dir / f"broker-{broker}").rglob(f"{topic}-{partition}"))
    lg = Log(topic, partition, LogConfig(), path)
    try:
        return data_records(lg)
    finally:
        lg.close()


def test_chaos_on_processes(tmp_path: Path):
    rng = random.Random(26)
    with ProcessCluster(3, tmp_path, overrides=CHAOS_SETTINGS, network=True) as cluster:
        _create_topic(cluster, "chaos-in")
        _create_topic(cluster, "chaos-out")
        with Writer(cluster.bootstrap, "chaos-in") as writer, CopyLoop(cluster.bootstrap, "chaos-in",
                                                                      "chaos-out") as copier:
            writer.wait_for(200)
            actions = _chaos(cluster, writer, CHAOS_SECONDS, rng)
            writer.wait_for(writer.count + 200)  # still writing once the chaos is over
        log.info("chaos: %s; copy loop: %d commits, %d aborts, %d producers replaced after a hang",
                 ", ".join(actions), copier.commits, copier.aborts, copier.hangs)
        assert copier.failure is None, copier.failure
        consumed = _consume_all(cluster.bootstrap, "chaos-in")
        # No acknowledged record lost, in order per partition (a copy an epoch bump wrote again is checked below).
        for p in range(PARTITIONS):
            first_seen = list(dict.fromkeys(consumed[p]))
            assert first_seen == sorted(first_seen), f"chaos-in-{p}: out of order"
            assert not set(writer.acked[p]) - set(consumed[p])
        # The copy holds every input record once: only whole, committed transactions are read.
        with CopyLoop(cluster.bootstrap, "chaos-in", "chaos-out") as copier2:
            copier2.wait_until_copied({p: len(consumed[p]) for p in range(PARTITIONS)})
        assert copier.failure is None and copier2.failure is None, (copier.failure, copier2.failure)
        assert copier.commits > 0
        copied = _consume_all(cluster.bootstrap, "chaos-out")
        for p in range(PARTITIONS):
            counts = Counter(copied[p])
            assert counts == Counter(consumed[p]), f"partition {p}: the copy differs from its input"
            # Committed offsets never moved back.
            offsets = copier.committed[p] + copier2.committed[p]
            assert offsets == sorted(offsets), f"partition {p}: committed offsets moved back: {offsets}"
        # Every broker converges to the same records.
        waiting.wait_for(lambda: all(len(p.isrs) == 3 for t in ("chaos-in", "chaos-out")
                                     for p in _metadata(cluster.bootstrap, t).partitions.values()), 60)
    for topic in ("chaos-in", "chaos-out"):
        for p in range(PARTITIONS):
            replicas = [_replica_records(tmp_path, b, topic, p) for b in range(3)]
            assert replicas[0] == replicas[1] == replicas[2], f"{topic}-{p}: the replicas differ"
    for p in range(PARTITIONS):
        check_copies_across_epoch_bumps(_replica_records(tmp_path, 0, "chaos-in", p), f"chaos-in-{p}")
