"""A nemesis against a 3-broker cluster under real clients (issue 25), checked as Jepsen's Kafka analyses check:
forty times (about a minute), a random broker is crashed (and restarted), paused (and resumed) or cut off
from everyone (and healed) once the controller has fenced it (any broker but the transactional loop's group
coordinator: see :class:`Nemesis`), while an idempotent acks=all producer writes, a transactional
consume-transform-produce loop runs and a group of consumers commits what it reads.  Then:

* no acknowledged record is lost, none is stored twice by one producer epoch (a copy under a bumped epoch is
  librdkafka's, as against Kafka: see ``cluster_logs.check_copies_across_epoch_bumps``), a consumer reads each
  stored record once, and each partition keeps the acknowledged records in the order they were acknowledged;
* the read_committed output of the transactional loop holds exactly the input records below the offsets the
  loop committed, each once: no transaction shows in part, none twice;
* the consumers' committed offsets never went back, and nothing was read again after its commit succeeded;
* once healed, every replica of every partition of the clients' topics holds the same records.
"""

from __future__ import annotations

import logging
import os
import random
import threading
from collections import Counter, defaultdict
from collections.abc import Callable
from typing import Any

import pytest

import waiting
from minikafka.testing import ClusterThread
from cluster_clients_common import rewind_to_committed
from cluster_logs import check_copies_across_epoch_bumps, data_records, log_of, stored, where_stored
from test_coordinator_failover import CLIENT, FAST, CommittedOffsetsMonitor, CommittingConsumer, _committed_output, fill

pytestmark = [pytest.mark.clients, pytest.mark.slow]

log = logging.getLogger(__name__)

FAULTS = 40
PARTITIONS = 3
LOOP_GROUP = "nemesis-loop"
#: A client that gets nothing done for this long has stalled.  Longer than the clients' own longest waits: the
#: transactional loop may sit in an abort_transaction(60) after a transaction that timed out (30 s) once its
#: records could not be written while a broker was away.
STALL_S = 180
SETTINGS = {**FAST, "replica_lag_time_max_ms": 1000, "replica_socket_timeout_ms": 1000, "min_insync_replicas": 2,
            "default_replication_factor": 3}


class Writer(threading.Thread):
    """An idempotent acks=all confluent-kafka producer writing numbered values, round robin over the partitions,
    about every ``interval_s``; it notes each acknowledged value with its partition and offset."""

    def __init__(self, bootstrap: str, topic: str, interval_s: float = 0.005) -> None:
        super().__init__(daemon=True, name="writer")
        from confluent_kafka import Producer

        # "debug": "eos": its PIDs, epoch bumps and drains are in the report of a failed run (stderr is shown then).
        self.producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                                  "linger.ms": 2, "message.timeout.ms": 120_000, "debug": "eos", **CLIENT})
        self.topic, self.interval_s = topic, interval_s
        self.acked: dict[bytes, tuple[int, int]] = {}
        self.failed: list[tuple[bytes, str]] = []
        self.sent = 0
        self.stop = threading.Event()

    def _delivered(self, err: Any, msg: Any) -> None:
        if err is None:
            self.acked[msg.value()] = (msg.partition(), msg.offset())
        else:
            self.failed.append((msg.value(), str(err)))

    def run(self) -> None:
        while not self.stop.is_set():
            value = b"w%06d" % self.sent
            self.producer.produce(self.topic, value=value, partition=self.sent % PARTITIONS,
                                  on_delivery=self._delivered)
            self.sent += 1
            self.producer.poll(self.interval_s)
        self.producer.flush(120)


class TransformLoop(threading.Thread):
    """Consume ``in``, write each value to ``out`` and commit the input offsets in the same transaction (up to ten
    records, about ten transactions a second), until stopped; an abortable error aborts and goes back to the
    committed offsets, and a producer whose call hung (a client bug: :func:`waiting.bounded`) is replaced by a new
    one, which fences it and aborts its transaction."""

    def __init__(self, bootstrap: str, group: str) -> None:
        super().__init__(daemon=True, name="transform-loop")
        self.bootstrap, self.group = bootstrap, group
        self.transactions = self.aborted = self.hangs = 0
        self.stop = threading.Event()
        self.error: BaseException | None = None

    def _producer(self) -> Any:
        """A transactional producer, its init_transactions tried again while its error is retriable."""
        from confluent_kafka import KafkaException, Producer

        while True:
            producer = Producer({"bootstrap.servers": self.bootstrap, "transactional.id": "nemesis-transform",
                                 "transaction.timeout.ms": 30_000, "linger.ms": 5, **CLIENT})
            try:
                producer.init_transactions(60)
                return producer
            except KafkaException as exc:
                if not exc.args[0].retriable() or self.stop.is_set():
                    raise
                log.info("transform loop: a new producer: %s", exc.args[0])

    def run(self) -> None:
        from confluent_kafka import Consumer, KafkaException

        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": self.group,
                             "enable.auto.commit": False, "auto.offset.reset": "earliest",
                             "isolation.level": "read_committed", **CLIENT})
        producer = None
        try:
            producer = self._producer()
            consumer.subscribe(["in"])
            while not self.stop.is_set():
                msgs = [m for m in consumer.consume(10, 0.2) if m.error() is None]
                if not msgs:
                    continue
                try:
                    producer.begin_transaction()
                    for m in msgs:
                        producer.produce("out", value=m.value(), partition=m.partition())
                    positions, group = consumer.position(consumer.assignment()), consumer.consumer_group_metadata()
                    # librdkafka 2.16 can block here past its timeout once a coordinator it had cached left the
                    # metadata (its issues 5456 and 5511): the producer is then abandoned.
                    waiting.bounded(lambda: producer.send_offsets_to_transaction(positions, group, 30), 60)
                    self._commit(producer)
                    self.transactions += 1
                    self.stop.wait(0.1)  # a paced loop: its transactions span the nemesis' run
                except waiting.Hung as exc:
                    log.warning("transform loop: %s; a new producer", exc)
                    self.hangs += 1
                    producer = self._producer()
                    rewind_to_committed(consumer, self.stop, "transform loop")
                except KafkaException as exc:
                    err = exc.args[0]
                    if err.fatal() or not (err.txn_requires_abort() or err.retriable()):
                        raise
                    try:
                        producer.abort_transaction(60)
                    except KafkaException as abort_exc:  # a new producer fences this one and aborts its transaction
                        log.info("transform loop: the abort failed: %s; a new producer", abort_exc.args[0])
                        producer = self._producer()
                    self.aborted += 1
                    rewind_to_committed(consumer, self.stop, "transform loop")
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.error = exc
        finally:
            consumer.close()
            if producer is not None:
                producer.flush(30)

    @staticmethod
    def _commit(producer: Any) -> None:
        """Commit, again while the error is retriable (the commit's outcome is then not known yet)."""
        from confluent_kafka import KafkaException

        while True:
            try:
                producer.commit_transaction(60)
                return
            except KafkaException as exc:
                if not exc.args[0].retriable():
                    raise


class Nemesis(threading.Thread):
    """Fault after fault: once the clients have made ``progress`` since the last fault and every replica is back
    in sync (so one broker at a time is away), one random broker is crashed, paused or cut off from everyone
    until the controller has fenced it (its leadership moved), then restarted, resumed or healed."""

    def __init__(self, ct: ClusterThread, seed: int, progress: Callable[[], tuple[int, ...]],
                 step: tuple[int, ...]) -> None:
        """``progress()``: the clients' counters; a fault waits until each grew by ``step`` since the last."""
        super().__init__(daemon=True, name="nemesis")
        self.ct, self.rng, self.progress, self.step = ct, random.Random(seed), progress, step
        self.done: list[tuple[str, int]] = []
        self.stop = threading.Event()
        self.error: BaseException | None = None

    def _out_of_sync(self) -> list[str]:
        """The partitions with a replica out of the ISR, or no leader: each with its replicas' log end offsets."""
        cluster = self.ct.cluster
        out = []
        for t in cluster.metadata.topics.values():
            for p in t.partitions:
                if len(p.isr) != len(p.replicas) or p.leader < 0:
                    ends = {}
                    for b in p.replicas:
                        part = cluster.brokers[b].replica_manager.get(t.name, p.partition) if b in cluster.brokers \
                            else None
                        ends[b] = (part.log.log_end_offset, part.log.high_watermark, part.leader_epoch) \
                            if part is not None else None
                    out.append(f"{t.name}-{p.partition} leader {p.leader} epoch {p.leader_epoch} isr {p.isr} {ends}")
        return out

    def _fetchers(self) -> str:
        """The paused brokers, the network partitions and each broker's replica fetchers: the leader each fetches
        from, its rounds, whether it is connected, and its partitions not in sync (for the failure message)."""
        cluster = self.ct.cluster
        out = [f"paused {sorted(cluster.links.paused)} partitions {list(cluster.links.partitions.values())}"]
        for b, broker in sorted(cluster.brokers.items()):
            manager = broker._fetcher_manager
            for leader, f in sorted(manager.fetchers.items()) if manager is not None else []:
                behind = {f"{tp.topic}-{tp.partition}": (st.fetch_offset, st.truncating, st.delayed_until, st.lag)
                          for tp, st in f.partitions.items() if not st.in_sync or st.lag}
                out.append(f"broker {b} from {leader}: rounds {f.rounds} connected {f.conn is not None} {behind}")
        return "\n".join(out)

    def _coordinators(self) -> str:
        """For the clients' groups and transactional id: the internal partition, its leader, ISR and leader epoch,
        and the broker that has its shard loaded, in which state; then the unfenced brokers (for the failure
        message)."""
        cluster = self.ct.cluster
        out = []
        for what, shards, topic, partition in [
                (g, cluster.group_coordinator.shards, "__consumer_offsets", cluster.group_coordinator.partition_for(g))
                for g in (LOOP_GROUP, "nemesis-readers")] + [
                ("nemesis-transform", cluster.txn_coordinator.state.shards, "__transaction_state",
                 cluster.txn_coordinator.state.partition_for("nemesis-transform"))]:
            t = cluster.metadata.get_topic(topic)
            pm = t.partitions[partition] if t is not None else None
            shard = shards.get(partition) if shards is not None else None
            out.append(f"{what}: {topic}-{partition} leader {pm.leader if pm else None} "
                       f"epoch {pm.leader_epoch if pm else None} isr {pm.isr if pm else None} shard "
                       f"{(shard.broker_id, shard.state.value, shard.replica.leading) if shard else None}")
        return "; ".join(out) + f"; live brokers {sorted(cluster.metadata.live)}"

    def _wait(self, condition: Callable[[], bool], what: str, timeout_s: float = 60) -> bool:
        """Wait (``timeout_s`` at most) for ``condition``; False when stopped meanwhile."""
        waiting.wait_for(lambda: self.stop.is_set() or condition(), timeout_s, what, 0.02)
        return not self.stop.is_set()

    def _progressed(self, since: tuple[int, ...]) -> bool:
        return all(now >= before + step for now, before, step in zip(self.progress(), since, self.step))

    def _work_round(self, since: tuple[int, ...]) -> bool:
        """Wait until each client did a round of work (``step``) since ``since``, however slowly the machine lets
        them, as long as each that has not yet done its round gets something done within every STALL_S (a stalled
        client fails the test); False when stopped meanwhile."""
        while not self._progressed(since):
            window = self.progress()
            behind = [i for i, (now, before, step) in enumerate(zip(window, since, self.step)) if now < before + step]

            def moved() -> bool:
                now = self.progress()
                return self._progressed(since) or all(now[i] > window[i] for i in behind)

            if not self._wait(moved, "the clients making progress", STALL_S):
                return False
        return True

    def run(self) -> None:
        ct = self.ct
        try:
            while not self.stop.is_set():
                since = self.progress()
                try:
                    if not self._work_round(since):
                        return
                except AssertionError:
                    log.error("no progress in %d s after %s: (writes, transactions, reads) %s then %s", STALL_S,
                              self.done[-1:], since, self.progress())
                    log.error("the clients' coordinators: %s", ct.call(self._coordinators))
                    raise
                try:
                    self._wait(lambda: not ct.call(self._out_of_sync), "every replica back in sync")
                except AssertionError:
                    log.error("out of sync after 60 s: %s", ct.call(self._out_of_sync))
                    log.error("links and fetchers: %s", ct.call(self._fetchers))
                    raise
                # Any broker but the loop's group coordinator: librdkafka 2.16's send_offsets_to_transaction hangs,
                # past its timeout, once the group coordinator it cached has left the metadata (librdkafka issues
                # 5511 and 5456).  The loop's transaction coordinator, and every partition leader, may be hit.
                spared = ct.call(lambda: ct.cluster.metadata.group_coordinator(LOOP_GROUP).node_id)
                victim = self.rng.choice([b for b in ct.broker_ids if b != spared])
                fault = self.rng.choice(["crash", "pause", "isolate"])
                log.info("nemesis: %s broker %d", fault, victim)
                {"crash": ct.crash_broker, "pause": ct.pause_broker, "isolate": ct.isolate_broker}[fault](victim)
                waiting.wait_for(lambda: victim not in ct.call(lambda: list(ct.cluster.metadata.live)), 60,
                                 f"broker {victim} fenced", 0.02)
                {"crash": ct.start_broker, "pause": ct.resume_broker, "isolate": lambda _: ct.heal_network()}[
                    fault](victim)
                self.done.append((fault, victim))
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.error = exc


def stuck(ct: ClusterThread, threads: list[threading.Thread]) -> str:
    """What a thread that did not stop is doing, and the transactional loop's transaction as its coordinator has it
    (for the failure message)."""
    meta = ct.call(lambda: ct.cluster.txn_coordinator.describe("nemesis-transform"))
    return f"transaction: {meta}\n" + waiting.stacks(threads)


def replicas_converged(ct: ClusterThread) -> bool:
    """Every replica of every partition of the clients' topics holds the same records (the internal topics'
    replicas are compacted each by its own broker's cleaner, so are not byte for byte the same, as in Kafka)."""
    def check() -> bool:
        cluster = ct.cluster
        for topic in cluster.metadata.topics.values():
            if topic.name.startswith("__"):
                continue
            for p in topic.partitions:
                logs = [cluster.broker(b).replica_manager.get(topic.name, p.partition).log for b in p.replicas]
                if len({lg.log_end_offset for lg in logs}) != 1 or len({lg.high_watermark for lg in logs}) != 1:
                    return False
                if len({tuple(stored(lg)) for lg in logs}) != 1:
                    return False
        return True
    return ct.call(check)


def leader_records(cluster: Any, topic: str) -> dict[int, list[Any]]:
    """The data records below the high watermark of each partition of ``topic``, as its leader holds them (in the
    cluster's thread)."""
    out = {}
    for p in cluster.metadata.get_topic(topic).partitions:
        lg = log_of(cluster, p.leader, topic, p.partition)
        out[p.partition] = [r for r in data_records(lg) if r[0] < lg.high_watermark]
    return out


def test_no_acknowledged_record_is_lost_or_doubled_through_crashes_pauses_and_partitions():
    # NEMESIS_SEED=<seed> plays the faults of a failed run again (the clients' timing still differs).
    seed = int(os.environ.get("NEMESIS_SEED") or random.randrange(1 << 30))
    log.info("nemesis seed %d", seed)
    with ClusterThread(3, **SETTINGS) as ct:
        for topic in ("jepsen", "in", "out"):
            ct.create_topic(topic, PARTITIONS, 3)
        inputs = fill(ct.bootstrap, "in", PARTITIONS, 6000)
        writer = Writer(ct.bootstrap, "jepsen")
        loop = TransformLoop(ct.bootstrap, LOOP_GROUP)
        events: list[tuple[int, int, bytes, float, float | None]] = []
        lock = threading.Lock()
        readers = [CommittingConsumer(ct.bootstrap, "nemesis-readers", "jepsen", events, lock) for _ in range(2)]
        monitor = CommittedOffsetsMonitor(ct.bootstrap, "nemesis-readers", "jepsen", PARTITIONS)
        nemesis = Nemesis(ct, seed, lambda: (len(writer.acked), loop.transactions, len(events)), (300, 5, 50))
        threads: list[Any] = [writer, loop, *readers, monitor]
        for t in threads:
            t.start()
        waiting.wait_for(lambda: len(writer.acked) >= 100 and loop.transactions >= 3, 60, "the clients under way")
        nemesis.start()
        waiting.wait_for(lambda: len(nemesis.done) >= FAULTS or nemesis.error is not None, 600,
                         f"{FAULTS} faults")
        nemesis.stop.set()
        nemesis.join(90)
        if nemesis.error is not None:
            log.error("the nemesis stopped: %s; the clients' errors: loop %r, readers %r", stuck(ct, threads),
                      loop.error, [r.error for r in readers])
        assert nemesis.error is None, (seed, nemesis.error)
        ct.heal_network()
        for b in ct.broker_ids:
            if ct.broker_state(b) == "paused":
                ct.resume_broker(b)
            elif b not in ct.running_brokers:
                ct.start_broker(b)
        for t in threads:
            t.stop.set()
        for t in threads:
            t.join(180)
        assert loop.error is None and [r.error for r in readers] == [None, None], seed
        log.info("nemesis %s; %d of %d writes acknowledged; %d transactions, %d aborted, %d hung; %d records read, "
                 "%s readers replaced", nemesis.done, len(writer.acked), writer.sent, loop.transactions, loop.aborted,
                 loop.hangs, len(events), [r.replaced for r in readers])

        # No acknowledged write lost, none doubled, each partition in acknowledgement order.
        if any(t.is_alive() for t in threads):
            log.error("threads still running: %s", stuck(ct, threads))
        assert writer.acked and [t.name for t in threads if t.is_alive()] == [], seed
        acked_by_partition: dict[int, list[tuple[int, bytes]]] = defaultdict(list)
        for value, (partition, offset) in writer.acked.items():
            if offset is not None:  # (None: a retry answered DUPLICATE_SEQUENCE_NUMBER, delivered at an unknown offset)
                acked_by_partition[partition].append((offset, value))
        read_at: list[tuple[int, int]] = []
        stored_values = _committed_output(ct.bootstrap, "jepsen", len(writer.acked), read_at)
        # Each partition's leader holds each value once, or again only under a bumped producer epoch (a copy
        # librdkafka sent again: see check_copies_across_epoch_bumps); a consumer reads what is stored, once.
        stored_records = ct.call(lambda: leader_records(ct.cluster, "jepsen"))
        twice = {v for v, n in Counter(stored_values).items() if n > 1}
        # (Where each copy was read and is stored goes in the messages: CI shortens a failed run's log.)
        details = ("read twice", sorted(twice), "read at", [(v, at) for v, at in zip(stored_values, read_at)
                                                            if v in twice],
                   "stored", ct.call(lambda: where_stored(ct.cluster, "jepsen", twice)), writer.failed[:20])
        for partition, records in stored_records.items():
            check_copies_across_epoch_bumps(records, f"jepsen-{partition} (seed {seed})")
        assert Counter(stored_values) == Counter(v for records in stored_records.values() for _, v, _, _ in records), (
            seed, "the records read are not those stored", details)
        if twice:
            log.warning("values stored again under a bumped producer epoch: %s", details)
        assert set(writer.acked) <= set(stored_values), (seed, sorted(set(writer.acked) - set(stored_values))[:10])
        assert set(stored_values) <= {b"w%06d" % i for i in range(writer.sent)}
        for partition, entries in acked_by_partition.items():
            by_offset = [v for _, v in sorted(entries)]
            assert by_offset == sorted(by_offset), (seed, partition)  # acknowledged order kept

        # The transactional loop: exactly the inputs below its committed offsets, each once.
        from confluent_kafka import Consumer, TopicPartition

        probe = Consumer({"bootstrap.servers": ct.bootstrap, "group.id": LOOP_GROUP, **CLIENT})
        committed = {tp.partition: max(tp.offset, 0)
                     for tp in probe.committed([TopicPartition("in", p) for p in range(PARTITIONS)], timeout=30)}
        probe.close()
        expected = {v for i, v in enumerate(inputs) if i // PARTITIONS < committed[i % PARTITIONS]}
        assert loop.transactions >= 10, (seed, loop.transactions)
        output = _committed_output(ct.bootstrap, "out", len(expected))
        assert len(output) == len(set(output)), (seed, "an input transformed twice")
        assert set(output) == expected, (seed, len(output), len(expected))

        # The readers: committed offsets never went back, nothing read again after its commit.
        assert monitor.backwards == [] and monitor.reads > 0, seed
        with lock:
            got = list(events)
        by_record: dict[tuple[int, int], list[tuple[float, float | None]]] = defaultdict(list)
        for p, off, _, consumed_at, committed_at in got:
            by_record[(p, off)].append((consumed_at, committed_at))
        for record, reads in by_record.items():
            done = [c for _, c in reads if c is not None]
            assert not (done and any(consumed > min(done) for consumed, _ in reads)), (seed, record, reads)

        # Every replica the same.
        waiting.wait_for(lambda: replicas_converged(ct), 60, "every replica holding the same records", 0.2)
