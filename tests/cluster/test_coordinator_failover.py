"""A coordinator's broker crashes under real clients (issue 25): confluent-kafka consumers committing as they go
find the new group coordinator, no committed offset goes back and nothing committed is consumed twice; a
transactional consume-transform-produce loop outlives its transaction coordinator's crash with every input
record once in the read_committed output; confluent-kafka share consumers outlive the crash of the broker that
keeps their share-partition state, no accepted record delivered again."""

from __future__ import annotations

import logging
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import pytest

import waiting
from minikafka.testing import ClusterThread

log = logging.getLogger(__name__)

pytestmark = [pytest.mark.clients]

#: Sessions short enough that a crashed broker is fenced within a second; clients that give up on a dead
#: connection as quickly.
FAST = {"broker_session_timeout_ms": 400, "broker_heartbeat_interval_ms": 50, "replica_fetch_wait_max_ms": 50,
        "replica_fetch_backoff_ms": 50, "group_initial_rebalance_delay_ms": 0}
CLIENT = {"socket.timeout.ms": 2000, "reconnect.backoff.max.ms": 200, "retry.backoff.ms": 50,
          "topic.metadata.refresh.interval.ms": 1000}


def fill(bootstrap: str, topic: str, partitions: int, count: int) -> list[bytes]:
    """``count`` records spread over the partitions (idempotent, acks=all); their values."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    values = [b"r%05d" % i for i in range(count)]
    for i, value in enumerate(values):
        producer.produce(topic, value=value, partition=i % partitions)
    assert producer.flush(60) == 0
    return values


class ConsumerThread(threading.Thread):
    """A confluent-kafka consumer (from ``new_consumer()``) subscribed to ``topic`` in its own thread: :meth:`step`
    again and again until stopped, noting ``(partition, offset, value, when it got it, when its commit succeeded or
    None)`` in ``events``.  A consumer whose call hung (a client bug: :func:`waiting.bounded`) is abandoned, never
    touched again, and a new one takes its place, as an application would restart it; any other exception ends
    the thread, kept for the test."""

    def __init__(self, new_consumer: Callable[[], Any], topic: str, events: list, lock: threading.Lock) -> None:
        super().__init__(daemon=True)
        self.new_consumer, self.topic = new_consumer, topic
        self.consumer = self._subscribed()
        self.events, self.lock = events, lock
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.replaced = 0  # consumers abandoned after a call hung

    def _subscribed(self) -> Any:
        consumer = self.new_consumer()
        consumer.subscribe([self.topic])
        return consumer

    def step(self) -> None:
        raise NotImplementedError

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                try:
                    self.step()
                except waiting.Hung as exc:  # (its group's other consumers take its partitions over meanwhile)
                    log.warning("%s: %s; a new consumer takes its place", self.name, exc)
                    self.replaced += 1
                    self.consumer = self._subscribed()
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.error = exc
        finally:
            try:
                waiting.bounded(self.consumer.close, 60)
            except waiting.Hung as exc:
                log.warning("%s: %s; the consumer abandoned", self.name, exc)


class CommittingConsumer(ConsumerThread):
    """A consumer of group ``group`` that commits each record synchronously once it has it."""

    def __init__(self, bootstrap: str, group: str, topic: str, events: list, lock: threading.Lock) -> None:
        from confluent_kafka import Consumer

        super().__init__(lambda: Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                                           "enable.auto.commit": False, "auto.offset.reset": "earliest",
                                           "session.timeout.ms": 6000, "heartbeat.interval.ms": 200, **CLIENT}),
                         topic, events, lock)

    def step(self) -> None:
        from confluent_kafka import KafkaException

        msg = self.consumer.poll(0.1)
        if msg is None or msg.error() is not None:
            return
        consumed_at = time.monotonic()
        committed_at: float | None = None  # the coordinator was away: someone may read it again
        try:
            waiting.bounded(lambda: self.consumer.commit(message=msg, asynchronous=False), 60)
            committed_at = time.monotonic()
        except KafkaException:
            pass
        finally:  # (a commit given up on may still succeed: counted as not committed, someone may read it again)
            with self.lock:
                self.events.append((msg.partition(), msg.offset(), msg.value(), consumed_at, committed_at))


def assert_none_read_after_its_commit(events: list[tuple[int, int, bytes, float, float | None]]) -> None:
    """No record of ``events`` was read again after its commit succeeded."""
    by_record: dict[tuple[int, int], list[tuple[float, float | None]]] = defaultdict(list)
    for p, off, _, read_at, committed_at in events:
        by_record[(p, off)].append((read_at, committed_at))
    for record, reads in by_record.items():
        committed = [c for _, c in reads if c is not None]
        assert not any(read_at > min(committed) for read_at, _ in reads if committed), (record, reads)


class CommittedOffsetsMonitor(threading.Thread):
    """Reads the group's committed offsets over the wire (OffsetFetch from a consumer of the group that does not
    join it, following the coordinator wherever it is) again and again, and notes any that went back."""

    def __init__(self, bootstrap: str, group: str, topic: str, partitions: int) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.group = bootstrap, group
        self.wanted = [(topic, p) for p in range(partitions)]
        self.latest: dict[int, int] = {}
        self.backwards: list[tuple[int, int, int]] = []
        self.reads = 0
        self.stop = threading.Event()

    def run(self) -> None:
        from confluent_kafka import Consumer, KafkaException, TopicPartition

        reader = None
        while not self.stop.is_set():
            if reader is None:
                reader = Consumer({"bootstrap.servers": self.bootstrap, "group.id": self.group,
                                   "enable.auto.commit": False, **CLIENT})
            try:
                result = reader.committed([TopicPartition(t, p) for t, p in self.wanted], timeout=2)
            except KafkaException:
                reader.close()  # the coordinator is away: asked again, afresh
                reader = None
                continue
            self.reads += 1
            for tp in result:
                if tp.offset < 0:
                    continue
                before = self.latest.get(tp.partition, -1)
                if tp.offset < before:
                    self.backwards.append((tp.partition, before, tp.offset))
                self.latest[tp.partition] = max(before, tp.offset)
        if reader is not None:
            reader.close()


def test_consumers_committing_as_they_go_outlive_their_group_coordinators_crash():
    with ClusterThread(3, **FAST) as ct:
        ct.create_topic("in", 6, 3)
        values = fill(ct.bootstrap, "in", 6, 1800)
        events: list[tuple[int, int, bytes, float, float | None]] = []
        lock = threading.Lock()
        monitor = CommittedOffsetsMonitor(ct.bootstrap, "g", "in", 6)
        consumers = [CommittingConsumer(ct.bootstrap, "g", "in", events, lock) for _ in range(3)]
        monitor.start()
        for c in consumers:
            c.start()
        try:
            waiting.wait_for(lambda: len(events) >= 400, 120, interval=0.01)
            coordinator = ct.call(lambda: ct.cluster.metadata.group_coordinator("g").node_id)
            ct.crash_broker(coordinator)
            # The survivors find the new coordinator and read everything; their last commits reach it.
            waiting.wait_for(lambda: monitor.latest == {p: 300 for p in range(6)}, 180, interval=0.05)
            assert ct.call(lambda: ct.cluster.metadata.group_coordinator("g").node_id) != coordinator
        finally:
            for c in consumers:
                c.stop.set()
            monitor.stop.set()
            for c in consumers:
                c.join(30)
            monitor.join(30)
        assert [c.error for c in consumers] == [None] * 3
        with lock:
            got = list(events)
        assert {v for _, _, v, _, _ in got} == set(values)
        assert monitor.backwards == []  # no committed offset went back
        assert monitor.reads > 0
        assert_none_read_after_its_commit(got)


def _committed_output(bootstrap: str, topic: str, expected: int,
                      read_at: list[tuple[int, int]] | None = None) -> list[bytes]:
    """Every record of ``topic`` a read_committed consumer sees (until ``expected`` of them, or 60 s); each
    record's partition and offset are added to ``read_at`` when given."""
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-verifier",
                         "isolation.level": "read_committed", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    consumer.subscribe([topic])
    got: list[bytes] = []

    def take(timeout: float) -> None:
        msg = consumer.poll(timeout)
        if msg is not None and msg.error() is None:
            got.append(msg.value())
            if read_at is not None:
                read_at.append((msg.partition(), msg.offset()))

    deadline = time.monotonic() + 60
    while len(got) < expected and time.monotonic() < deadline:
        take(0.2)
    # A little more, for anything beyond what was expected (a duplicate) to show.
    end = time.monotonic() + 1
    while time.monotonic() < end:
        take(0.1)
    consumer.close()
    return got


GROUP = "transform-loop"


def _transform_loop(ct: ClusterThread, count: int, crash_after: int) -> dict[str, Any]:
    """Consume ``in``, produce each value to ``out`` and commit the offsets in the same transaction, until
    every input is committed; crash the transaction coordinator's broker in the middle of transaction
    ``crash_after`` (records produced, offsets sent, not yet committed).  Returns what happened."""
    from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

    producer = Producer({"bootstrap.servers": ct.bootstrap, "transactional.id": "transform",
                         "transaction.timeout.ms": 20_000, "linger.ms": 5, **CLIENT})
    producer.init_transactions(30)
    # The group's coordinator is another broker than the transaction's ("transform" would put both on
    # partition 32 of their topics, so on one broker): librdkafka 2.16's send_offsets_to_transaction hangs,
    # past its timeout, when the group coordinator it cached is gone (librdkafka issues 5511 and 5456).
    consumer = Consumer({"bootstrap.servers": ct.bootstrap, "group.id": GROUP, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed", **CLIENT})
    consumer.subscribe(["in"])
    stats: dict[str, Any] = {"transactions": 0, "aborted": 0, "crashed": None}
    done = 0
    deadline = time.monotonic() + 180
    while done < count and time.monotonic() < deadline:
        msgs = [m for m in consumer.consume(100, 0.3) if m.error() is None]
        if not msgs:
            continue
        producer.begin_transaction()
        for m in msgs:
            producer.produce("out", value=m.value(), partition=m.partition())
        positions = consumer.position(consumer.assignment())
        producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), 30)
        if stats["transactions"] == crash_after and stats["crashed"] is None:
            stats["crashed"] = ct.call(lambda: ct.cluster.metadata.transaction_coordinator("transform").node_id)
            assert ct.call(lambda: ct.cluster.metadata.group_coordinator(GROUP).node_id) != stats["crashed"]
            ct.crash_broker(stats["crashed"])
        while True:
            try:
                producer.commit_transaction(60)
                stats["transactions"] += 1
                done += len(msgs)
                break
            except KafkaException as exc:
                err = exc.args[0]
                if err.retriable():
                    continue
                if not err.txn_requires_abort():
                    raise
                producer.abort_transaction(60)
                stats["aborted"] += 1
                # Back to the committed offsets: the aborted records are read and produced again.
                committed = consumer.committed(consumer.assignment(), 30)
                for tp in committed:
                    consumer.seek(TopicPartition(tp.topic, tp.partition, max(tp.offset, 0)))
                done = sum(max(tp.offset, 0) for tp in committed)
                break
    consumer.close()
    producer.flush(30)
    stats["done"] = done
    return stats


def test_a_transform_loop_outlives_its_transaction_coordinators_crash_with_every_record_once():
    with ClusterThread(3, **FAST) as ct:
        ct.create_topic("in", 3, 3)
        ct.create_topic("out", 3, 3)
        values = fill(ct.bootstrap, "in", 3, 900)
        stats = _transform_loop(ct, len(values), crash_after=3)
        assert stats["crashed"] is not None and stats["done"] == len(values), stats
        assert ct.call(lambda: ct.cluster.metadata.transaction_coordinator("transform").node_id) != stats["crashed"]
        out = _committed_output(ct.bootstrap, "out", len(values))
        assert sorted(out) == sorted(values)  # every input record once: none lost, none twice


class AcceptingShareConsumer(ConsumerThread):
    """A share consumer of share group ``group`` that accepts every record it gets and commits the
    acknowledgements synchronously."""

    def __init__(self, bootstrap: str, group: str, topic: str, events: list, lock: threading.Lock) -> None:
        from confluent_kafka import ShareConsumer

        super().__init__(lambda: ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                                                "share.acknowledgement.mode": "explicit", **CLIENT}),
                         topic, events, lock)

    def step(self) -> None:
        from confluent_kafka import AcknowledgeType, KafkaException

        msgs = [m for m in self.consumer.poll(0.2) if m.error() is None]
        if not msgs:
            return
        got_at = time.monotonic()
        for m in msgs:
            self.consumer.acknowledge(m, AcknowledgeType.ACCEPT)
        try:
            results = self.consumer.commit_sync(30)
            failed = {tp.partition for tp, err in results.items() if err is not None}
        except KafkaException:
            failed = {m.partition() for m in msgs}  # the acknowledgements may or may not have been taken
        committed_at = time.monotonic()
        with self.lock:
            self.events.extend((m.partition(), m.offset(), m.value(), got_at,
                                None if m.partition() in failed else committed_at) for m in msgs)


def _share_coordinator_apart(ct: ClusterThread, topic: str, partitions: int) -> tuple[str, int]:
    """A share group whose share coordinator of ``topic``-0 is neither its group coordinator nor, once leaders
    moved away from it, the leader of a partition of ``topic``: (the group, that broker)."""
    from minikafka.broker.share.partition_state import ShareStateKey

    def place() -> tuple[str, int]:
        cluster = ct.cluster
        cluster.broker(0).ensure_offsets_topic()
        state = cluster.shared.share.state
        state.ensure_topic()
        for i in range(100):
            group = f"share-{i}"
            partition = state.partition_for(ShareStateKey(group, topic, 0))
            assert partition is not None
            coordinator = cluster.metadata.internal_partition_leader("__share_group_state", partition)
            if coordinator != cluster.metadata.group_coordinator(group).node_id:
                break
        cluster.broker(0).group_configs.set_overrides(group, {"share.auto.offset.reset": "earliest"})
        for p, pm in enumerate(cluster.metadata.topics[topic].partitions):
            if pm.leader == coordinator:
                cluster.metadata.move_leader(topic, p, next(b for b in pm.isr if b != coordinator))
        return group, coordinator

    return ct.call(place)


def test_share_consumers_outlive_their_share_coordinators_crash():
    """Three confluent-kafka share consumers accept what they get; the broker that keeps the state of their
    share-partition ``sq``-0 crashes, and more records come: they carry on, every record is accepted, and none
    comes back once its acceptance committed."""
    from minikafka.broker.share.partition_state import ShareStateKey

    # Records whose acknowledgement was refused while no broker had the state (COORDINATOR_NOT_AVAILABLE) come
    # back once their 2 s locks expire.
    with ClusterThread(3, **FAST, group_share_record_lock_duration_ms=2000) as ct:
        ct.create_topic("sq", 3, 3)
        waiting.wait_for(lambda: ct.call(lambda: all(len(pm.isr) == 3 for pm in
                                                     ct.cluster.metadata.topics["sq"].partitions)), 30)
        group, coordinator = _share_coordinator_apart(ct, "sq", 3)
        values = fill(ct.bootstrap, "sq", 3, 300)
        events: list[tuple[int, int, bytes, float, float | None]] = []
        lock = threading.Lock()
        consumers = [AcceptingShareConsumer(ct.bootstrap, group, "sq", events, lock) for _ in range(3)]
        for c in consumers:
            c.start()

        def accepted() -> set[bytes]:
            with lock:
                return {v for _, _, v, _, committed in events if committed is not None}

        def coordinator_now() -> int:
            partition = ct.cluster.shared.share.state.partition_for(ShareStateKey(group, "sq", 0))
            return ct.cluster.metadata.internal_partition_leader("__share_group_state", partition)

        from confluent_kafka import Producer

        producer = Producer({"bootstrap.servers": ct.bootstrap, "enable.idempotence": True, "linger.ms": 5})
        try:
            waiting.wait_for(lambda: accepted() == set(values), 120, interval=0.01)
            producer.list_topics("sq", timeout=10)  # the leaders known before the crash: more records at once after
            ct.crash_broker(coordinator)
            values += [b"s%05d" % i for i in range(300)]
            for i, value in enumerate(values[300:]):
                producer.produce("sq", value=value, partition=i % 3)
            assert producer.flush(60) == 0
            # The survivors' acknowledgements reach the next share coordinator of sq-0, which loaded its state.
            waiting.wait_for(lambda: accepted() == set(values), 180, interval=0.05)
            assert ct.call(coordinator_now) not in (-1, coordinator)
        finally:
            for c in consumers:
                c.stop.set()
            for c in consumers:
                c.join(30)
        assert [c.error for c in consumers] == [None] * 3
        with lock:
            got = list(events)
        assert_none_read_after_its_commit(got)  # nothing delivered again once its acceptance was committed
