"""minikafka's own consumer with ``group_protocol="consumer"`` (KIP-848) against a minikafka broker
started by the test: members split the partitions, a member closing hands its partitions over with no
record lost (commit before revocation, revoke before assign), a regex subscription picks up a topic
created later, a static member gets its partitions back, and our member shares a group with
confluent-kafka's ``group.protocol=consumer`` member (librdkafka).

No fixed sleeps: every wait is for a condition, bounded by a deadline (``wait_until``).
"""

from __future__ import annotations

import re
import threading
from typing import AsyncIterator, Iterable

import pytest
import trio
from helpers import batch, produce, wait_until

from minikafka.broker.broker import Broker, serve_broker
from minikafka.broker.config import BrokerConfig
from minikafka.client.connection import KafkaConnection
from minikafka.client.consumer import ConsumerRebalanceListener, KafkaConsumer, TopicPartition
from minikafka.client.consumer.membership_manager import MemberState

HEARTBEAT_MS = 100


@pytest.fixture
async def broker() -> AsyncIterator[Broker]:
    """A broker whose consumer groups heartbeat every 100 ms (Kafka's minimum is 5 s by default)."""
    cfg = BrokerConfig(port=0, group_initial_rebalance_delay_ms=0, group_consumer_heartbeat_interval_ms=HEARTBEAT_MS,
                       group_consumer_min_heartbeat_interval_ms=HEARTBEAT_MS, group_consumer_session_timeout_ms=6000,
                       group_consumer_min_session_timeout_ms=6000)
    async with serve_broker(cfg) as b:
        yield b


@pytest.fixture
async def conn(broker: Broker) -> AsyncIterator[KafkaConnection]:
    c = await KafkaConnection.connect("127.0.0.1", broker.port, client_id="kip848-test")
    try:
        yield c
    finally:
        await c.aclose()


def boot(broker: Broker) -> str:
    return f"127.0.0.1:{broker.port}"


def member(broker: Broker, *topics: str, **kw: object) -> KafkaConsumer:
    settings: dict = dict(bootstrap_servers=boot(broker), group_id="kip848", group_protocol="consumer",
                          auto_offset_reset="earliest", auto_commit_interval_ms=200)
    settings.update(kw)
    return KafkaConsumer(*topics, **settings)


async def put(conn: KafkaConnection, topic: str, partitions: int, per_partition: int, tag: str) -> set[bytes]:
    sent = set()
    for p in range(partitions):
        vals = [f"{tag}-{topic}-{p}-{i}".encode() for i in range(per_partition)]
        await produce(conn, topic, batch(vals), partition=p)
        sent.update(vals)
    return sent


def parts(c: KafkaConsumer) -> set[int]:
    return {tp.partition for tp in c.assignment()}


class Recorder(ConsumerRebalanceListener):
    def __init__(self) -> None:
        self.events: list[tuple[str, set[TopicPartition]]] = []

    def on_partitions_revoked(self, partitions: set[TopicPartition]) -> None:
        self.events.append(("revoked", partitions))

    def on_partitions_assigned(self, partitions: set[TopicPartition]) -> None:
        self.events.append(("assigned", partitions))

    def on_partitions_lost(self, partitions: set[TopicPartition]) -> None:
        self.events.append(("lost", partitions))


class Poller:
    """Each consumer polls in its own task, appending (consumer index, partition, value) to ``seen``."""

    def __init__(self, consumers: Iterable[KafkaConsumer]) -> None:
        self.consumers = list(consumers)
        self.seen: list[tuple[int, int, bytes]] = []
        self.scopes = [trio.CancelScope() for _ in self.consumers]

    async def run(self) -> None:
        async with trio.open_nursery() as n:
            for i, c in enumerate(self.consumers):
                n.start_soon(self._loop, i, c)

    async def _loop(self, i: int, c: KafkaConsumer) -> None:
        with self.scopes[i]:
            while True:
                for tp, recs in (await c.poll(50)).items():
                    self.seen.extend((i, tp.partition, r.value) for r in recs)

    def stop(self, i: int | None = None) -> None:
        for j, scope in enumerate(self.scopes):
            if i is None or i == j:
                scope.cancel()


async def test_three_members_split_then_one_leaves_and_nothing_is_lost(broker: Broker, conn) -> None:
    broker.create_topic("kip848-split", 6, 1)
    listeners = [Recorder() for _ in range(3)]
    async with member(broker, group_remote_assignor="uniform") as c0, member(broker) as c1, member(broker) as c2:
        for c, rec in zip((c0, c1, c2), listeners):
            c.subscribe(["kip848-split"], listener=rec)
        poller = Poller((c0, c1, c2))
        seen = poller.seen
        async with trio.open_nursery() as n:
            n.start_soon(poller.run)
            # The broker splits six partitions two, two and two.
            await wait_until(lambda: all(len(parts(c)) == 2 for c in (c0, c1, c2)), 20, "the split")
            assert parts(c0) | parts(c1) | parts(c2) == set(range(6))
            sent = await put(conn, "kip848-split", 6, 20, "r1")
            await wait_until(lambda: {v for _, _, v in seen} == sent, 20, "every record")
            for i, p, _ in seen:  # each record from the member owning its partition
                assert p in parts((c0, c1, c2)[i])
            # c2 closes (auto-commit, leave with epoch -1): c0 and c1 take its partitions over.
            c2_parts = parts(c2)
            poller.stop(2)
            await c2.close()
            await wait_until(lambda: parts(c0) | parts(c1) == set(range(6)) and len(parts(c0)) + len(parts(c1)) == 6,
                             20, "c0 and c1 to take c2's partitions over")
            sent2 = await put(conn, "kip848-split", 6, 10, "r2")
            await wait_until(lambda: sent2 <= {v for _, _, v in seen}, 20, "the second records")
            poller.stop()
    values = [v for _, _, v in seen]
    assert set(values) == sent | sent2  # nothing lost
    assert len(values) == len(set(values))  # and, committed before every revocation, nothing twice
    taken_over = {p for i, p, v in seen if v in sent2 and p in c2_parts}
    assert taken_over == c2_parts and all(i in (0, 1) for i, p, v in seen if v in sent2)
    # Rebalance callbacks: c2 had its partitions assigned, then revoked when it closed.
    assigned_to_c2 = set().union(*(tps for kind, tps in listeners[2].events if kind == "assigned"))
    assert {TopicPartition("kip848-split", p) for p in c2_parts} <= assigned_to_c2
    assert listeners[2].events[-1] == ("revoked", {TopicPartition("kip848-split", p) for p in c2_parts})
    assert not any(kind == "lost" for rec in listeners for kind, _ in rec.events)


@pytest.mark.parametrize("protocol", ["consumer", "classic"])
async def test_regex_subscription_picks_up_a_later_topic(broker: Broker, conn, protocol: str) -> None:
    """The same ``subscribe(pattern=...)`` with both protocols: the broker matches it (consumer) or the
    client does (classic, every ``metadata_max_age_ms``)."""
    broker.create_topic(f"{protocol}-re-a", 2, 1)
    broker.create_topic(f"{protocol}-other", 1, 1)
    kw: dict = dict(group_id=f"regex-{protocol}", group_protocol=protocol)
    if protocol == "classic":
        kw.update(heartbeat_interval_ms=100, session_timeout_ms=6000, metadata_max_age_ms=300)
    async with member(broker, **kw) as c:
        c.subscribe(pattern=re.compile(f"{protocol}-re-.*"))
        with trio.fail_after(20):
            while {tp.topic for tp in c.assignment()} != {f"{protocol}-re-a"}:
                await c.poll(50)
        broker.create_topic(f"{protocol}-re-b", 3, 1)
        with trio.fail_after(20):
            while len(c.assignment()) != 5:
                await c.poll(50)
        assert {tp.topic for tp in c.assignment()} == {f"{protocol}-re-a", f"{protocol}-re-b"}
        sent = await put(conn, f"{protocol}-re-b", 3, 5, "late")
        await put(conn, f"{protocol}-other", 1, 5, "not-matched")
        got: set[bytes] = set()
        with trio.fail_after(20):
            while got != sent:
                for tp, recs in (await c.poll(50)).items():
                    assert tp.topic == f"{protocol}-re-b"
                    got.update(r.value for r in recs)


async def test_static_member_gets_its_partitions_back(broker: Broker, conn) -> None:
    broker.create_topic("kip848-static", 4, 1)
    static = dict(group_id="static-g")
    async with member(broker, "kip848-static", group_instance_id="a", **static) as a:
        b = member(broker, "kip848-static", group_instance_id="b", **static)
        async with b:
            with trio.fail_after(20):
                while not (len(parts(a)) == 2 and len(parts(b)) == 2):
                    await a.poll(50)
                    await b.poll(50)
            before = parts(b)
        # b left with epoch -2: the broker keeps its partitions for it (no rebalance for a)...
        assert b.coordinator is not None and b.coordinator.state == MemberState.UNSUBSCRIBED
        for _ in range(5):
            await a.poll(HEARTBEAT_MS)
        assert len(parts(a)) == 2
        # ...and a new consumer with the same instance id gets them back.
        async with member(broker, "kip848-static", group_instance_id="b", **static) as b2:
            with trio.fail_after(20):
                while parts(b2) != before:
                    await b2.poll(50)
            assert len(parts(a)) == 2 and parts(a).isdisjoint(before)


async def test_commit_and_group_metadata_use_the_member_epoch(broker: Broker, conn) -> None:
    broker.create_topic("kip848-commit", 2, 1)
    sent = await put(conn, "kip848-commit", 2, 5, "c")
    async with member(broker, "kip848-commit", group_id="commit-g", enable_auto_commit=False) as c:
        got: set[bytes] = set()
        with trio.fail_after(20):
            while got != sent:
                for recs in (await c.poll(50)).values():
                    got.update(r.value for r in recs)
        await c.commit()
        assert {await c.committed(TopicPartition("kip848-commit", p)) for p in range(2)} == {5}
        meta = c.group_metadata()
        assert meta.generation_id >= 1 and meta.member_id == c.coordinator.member_id  # type: ignore[union-attr]
    # A new member of the group resumes from the commit.
    async with member(broker, "kip848-commit", group_id="commit-g") as c2:
        with trio.fail_after(20):
            while len(c2.assignment()) != 2:
                await c2.poll(50)
        assert await c2.poll(300) == {}
        assert {await c2.position(TopicPartition("kip848-commit", p)) for p in range(2)} == {5}


def confluent_member(bootstrap: str, topic: str, stop: threading.Event, seen: list, assigned: list) -> None:
    from confluent_kafka import Consumer
    kc = Consumer({"bootstrap.servers": bootstrap, "group.id": "mixed848", "group.protocol": "consumer",
                   "auto.offset.reset": "earliest", "enable.auto.commit": True, "auto.commit.interval.ms": 200,
                   "client.id": "librdkafka-member"})
    kc.subscribe([topic])
    try:
        while not stop.is_set():
            m = kc.poll(0.05)
            if m is not None and m.error() is None:
                seen.append((m.partition(), m.offset(), m.value()))
            assigned[:] = [sorted(tp.partition for tp in kc.assignment())]
    finally:
        kc.close()  # commits and leaves the group


@pytest.mark.clients
async def test_group_shared_with_confluent_kafka(broker: Broker, conn) -> None:
    broker.create_topic("kip848-mixed", 6, 1)
    stop = threading.Event()
    ck_seen: list = []
    ck_assigned: list = [[]]
    ours: list = []
    async with member(broker, "kip848-mixed", group_id="mixed848") as c:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(lambda: trio.to_thread.run_sync(
                confluent_member, boot(broker), "kip848-mixed", stop, ck_seen, ck_assigned))
            with trio.fail_after(30):  # both members of one group, three partitions each
                while not (len(parts(c)) == 3 and len(ck_assigned[0]) == 3):
                    await c.poll(50)
            assert parts(c).isdisjoint(ck_assigned[0]) and parts(c) | set(ck_assigned[0]) == set(range(6))
            sent = await put(conn, "kip848-mixed", 6, 20, "r1")
            with trio.fail_after(30):
                while len(ours) + len(ck_seen) < len(sent):
                    for tp, recs in (await c.poll(50)).items():
                        ours.extend((tp.partition, r.offset, r.value) for r in recs)
            assert {p for p, _, _ in ours} == parts(c)
            assert {p for p, _, _ in ck_seen} == set(ck_assigned[0])
            stop.set()  # librdkafka closes: commits, leaves; our member takes over the six partitions
        with trio.fail_after(30):
            while len(c.assignment()) != 6:
                await c.poll(50)
        sent2 = await put(conn, "kip848-mixed", 6, 5, "r2")
        before = len(ours)
        with trio.fail_after(30):
            while len(ours) - before < len(sent2):
                for tp, recs in (await c.poll(50)).items():
                    ours.extend((tp.partition, r.offset, r.value) for r in recs)
        assert await c.poll(300) == {}
    values = [v for _, _, v in ours] + [v for _, _, v in ck_seen]
    assert set(values) == sent | sent2  # nothing lost
    assert len(values) == len(set(values))  # and nothing twice: both committed before giving partitions up


@pytest.mark.parametrize("protocol", ["consumer", "classic"])
async def test_rebalance_listener_with_both_protocols(broker: Broker, conn, protocol: str) -> None:
    """The same listener API: the first member gets all four partitions, gives some up when a second
    member joins (the classic protocol is eager: it revokes everything and is assigned again), and
    its positions are committed first (auto-commit) so the second member starts where it stopped."""
    broker.create_topic(f"listen-{protocol}", 4, 1)
    sent = await put(conn, f"listen-{protocol}", 4, 5, "l")
    kw: dict = dict(group_id=f"listen-{protocol}", group_protocol=protocol)
    if protocol == "classic":
        kw.update(heartbeat_interval_ms=100, session_timeout_ms=6000)
    first, second = Recorder(), Recorder()
    got: list[bytes] = []
    all_tps = {TopicPartition(f"listen-{protocol}", p) for p in range(4)}

    def assigned(rec: Recorder) -> set[TopicPartition]:
        return set().union(*(tps for kind, tps in rec.events if kind == "assigned"))

    async with member(broker, **kw) as a:
        a.subscribe([f"listen-{protocol}"], listener=first)
        with trio.fail_after(20):
            while len(got) < len(sent):
                got.extend(r.value for recs in (await a.poll(50)).values() for r in recs)
        assert assigned(first) == all_tps and [k for k, _ in first.events] == ["assigned"] * len(first.events)
        async with member(broker, **kw) as b:
            b.subscribe([f"listen-{protocol}"], listener=second)
            poller = Poller((a, b))  # both poll at once (a classic join waits for every member)
            async with trio.open_nursery() as n:
                n.start_soon(poller.run)
                await wait_until(lambda: len(a.assignment()) == len(b.assignment()) == 2, 20, "two partitions each")
                poller.stop()
            assert poller.seen == []  # everything was consumed by a and committed before it gave partitions up
            revoked = set().union(*(tps for kind, tps in first.events if kind == "revoked"))
            assert b.assignment() <= revoked and assigned(second) >= b.assignment()
            assert not any(kind == "lost" for kind, _ in first.events + second.events)
            for tp in b.assignment():  # b resumes from a's commits
                assert await b.position(tp) == 5


async def test_member_survives_its_coordinator_stopping() -> None:
    """Cluster mode: the coordinator broker stops; the member finds the new coordinator (a connection
    error, then FindCoordinator), keeps its membership and partitions (the group state is the
    cluster's), and consumes what is produced afterwards."""
    from minikafka.broker.cluster import serve_cluster
    from minikafka.client.producer import KafkaProducer

    settings = dict(replica_fetch_wait_max_ms=50, replica_fetch_backoff_ms=50, group_initial_rebalance_delay_ms=0,
                    group_consumer_heartbeat_interval_ms=HEARTBEAT_MS,
                    group_consumer_min_heartbeat_interval_ms=HEARTBEAT_MS)
    async with serve_cluster(3, **settings) as cluster:
        cluster.broker(0).create_topic("kip848-ha", 2, 3)
        got: set[bytes] = set()
        async with KafkaProducer(cluster.bootstrap, acks="all") as producer, \
                KafkaConsumer("kip848-ha", bootstrap_servers=cluster.bootstrap, group_id="ha848",
                              group_protocol="consumer", auto_offset_reset="earliest") as c:
            sent = {f"before-{i}".encode() for i in range(10)}
            for v in sorted(sent):
                await producer.send("kip848-ha", v, partition=int(v[-1:]) % 2)
            await producer.flush()
            with trio.fail_after(30):
                while got != sent:
                    got.update(r.value for recs in (await c.poll(50)).values() for r in recs)
            coord = c.coordinator
            assert coord is not None and coord.coordinator_id is not None
            old_coordinator, member_id, epoch = coord.coordinator_id, coord.member_id, coord.generation
            await cluster.stop_broker(old_coordinator)
            sent2 = {f"after-{i}".encode() for i in range(10)}
            for v in sorted(sent2):
                await producer.send("kip848-ha", v, partition=int(v[-1:]) % 2)
            await producer.flush()
            with trio.fail_after(30):
                while not sent2 <= got or coord.coordinator_id == old_coordinator:
                    got.update(r.value for recs in (await c.poll(50)).values() for r in recs)
            assert coord.member_id == member_id and coord.generation == epoch  # never fenced, never rejoined
            assert coord.state == MemberState.STABLE and len(c.assignment()) == 2
