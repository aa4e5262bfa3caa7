"""Real clients where KIP-848 consumer groups meet the classic protocol and committed offsets.

* confluent-kafka with ``group.protocol=consumer`` commits, the broker restarts from its data dir, and a
  second consumer of the group resumes from the committed offsets (the group is still a consumer group).
* A mixed group: one confluent-kafka consumer with ``group.protocol=classic`` and one with
  ``group.protocol=consumer`` in the same group consume a topic together (whichever joins first: the
  classic group is upgraded online, or the classic consumer joins the consumer group as a classic member);
  every message is consumed and the partitions end up split between them.
* kafka-python's and aiokafka's admin clients (classic-only clients) list the groups, with types, and
  read the committed offsets of a KIP-848 consumer group.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka import TopicPartition as CkTopicPartition

from clients_common import report_client_versions  # noqa: F401  (session fixture, used via pytestmark)
from clients_common import KIP848_BROKER_SETTINGS, group_id, wait_for

from minikafka.broker.config import BrokerConfig
from minikafka.testing import BrokerThread

pytestmark = [pytest.mark.clients, pytest.mark.usefixtures("report_client_versions")]

BROKER_SETTINGS = KIP848_BROKER_SETTINGS


@pytest.fixture
def broker() -> Iterator[BrokerThread]:
    with BrokerThread(BrokerConfig(port=0, **BROKER_SETTINGS)) as b:
        yield b


gid = group_id


def consumer(bootstrap: str, group: str, name: str, protocol: str, **extra: object) -> Consumer:
    """A confluent-kafka consumer; a classic one (``strategy``: its assignor, eager ``range`` by default)
    heartbeats every 200 ms."""
    strategy = extra.pop("strategy", "range")
    config: dict[str, object] = {
        "bootstrap.servers": bootstrap, "group.id": group, "client.id": name, "group.protocol": protocol,
        "enable.auto.commit": False, "auto.offset.reset": "earliest", "fetch.wait.max.ms": 100,
        "topic.metadata.refresh.interval.ms": 1000, **extra}
    if protocol == "classic":
        config.update({"session.timeout.ms": 6000, "heartbeat.interval.ms": 200,
                       "partition.assignment.strategy": strategy})
    return Consumer(config)


def produce(bootstrap: str, topic: str, count: int, partitions: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for i in range(count):
        p.produce(topic, value=b"%d" % i, partition=i % partitions)
    assert p.flush(30) == 0


def poll_one(c: Consumer, got: list[tuple[int, int, bytes]]) -> None:
    m = c.poll(0.02)
    if m is None:
        return
    assert m.error() is None or m.error().code() == KafkaError._PARTITION_EOF, m.error()
    if m.error() is None:
        got.append((m.partition(), m.offset(), m.value()))


def parts(c: Consumer) -> set[int]:
    return {tp.partition for tp in c.assignment()}


def test_kip848_commits_survive_a_restart_and_a_new_consumer_resumes(tmp_path: Path) -> None:
    with BrokerThread(BrokerConfig(port=0, data_dir=tmp_path / "data", **BROKER_SETTINGS)) as b:
        bs = b.bootstrap
        topic, group = b.create_topic("resume", 3), gid("resume")
        produce(bs, topic, 30, 3)
        first: list[tuple[int, int, bytes]] = []
        c1 = consumer(bs, group, "first", "consumer")
        try:
            c1.subscribe([topic])
            wait_for(lambda: poll_one(c1, first) or len(first) >= 15, what="the first consumer to read 15")
            c1.commit(asynchronous=False)
            committed = {tp.partition: tp.offset
                         for tp in c1.committed([CkTopicPartition(topic, p) for p in range(3)], timeout=10)}
        finally:
            c1.close()
        # Every partition's committed offset is what the consumer had read (its position).
        consumed_upto = {p: max((o for (q, o, _) in first if q == p), default=-1) + 1 for p in range(3)}
        for p in range(3):
            if consumed_upto[p] > 0:
                assert committed[p] == consumed_upto[p]
            else:  # nothing read there yet: nothing committed
                assert committed[p] < 0

        b.restart()
        group_type = b.call(lambda: b.broker.group_coordinator.groups[group].group_type)  # type: ignore[union-attr]
        assert group_type == "consumer"

        second: list[tuple[int, int, bytes]] = []
        c2 = consumer(bs, group, "second", "consumer")
        try:
            c2.subscribe([topic])
            wait_for(lambda: poll_one(c2, second) or len(first) + len(second) >= 30,
                     what="the second consumer to read the rest")
        finally:
            c2.close()
        # It resumed exactly at the committed offsets: no message read twice, none missed.
        for p in range(3):
            offsets = [o for (q, o, _) in second if q == p]
            if offsets:
                assert min(offsets) == max(committed[p], 0)
        values = [v for (_, _, v) in first + second]
        assert sorted(values, key=int) == [b"%d" % i for i in range(30)]


@pytest.mark.parametrize("first,strategy", [("classic", "range"), ("consumer", "range"),
                                            ("classic", "cooperative-sticky"), ("consumer", "cooperative-sticky")])
def test_classic_and_consumer_protocol_members_share_a_group(broker: BrokerThread, first: str, strategy: str) -> None:
    """With the classic consumer first the classic group is upgraded online when the KIP-848 consumer
    joins; with the KIP-848 consumer first the classic one joins the consumer group as a classic member.
    The classic consumer is eager (``range``) or cooperative (``cooperative-sticky``: it reports the
    partitions it owns when it rejoins and keeps them meanwhile)."""
    bs = broker.bootstrap
    topic, group = broker.create_topic(gid("mixed"), 6), gid("mixed")
    total = 300
    produce(bs, topic, total, 6)
    second = "consumer" if first == "classic" else "classic"
    got: dict[str, list[tuple[int, int, bytes]]] = {first: [], second: []}
    a = consumer(bs, group, f"{first}-member", first, strategy=strategy)
    b = consumer(bs, group, f"{second}-member", second, strategy=strategy)
    try:
        a.subscribe([topic])
        wait_for(lambda: poll_one(a, got[first]) or len(parts(a)) == 6, what=f"the {first} consumer to get all")
        b.subscribe([topic])

        def both_consumed_and_split() -> bool:
            poll_one(a, got[first])
            poll_one(b, got[second])
            pa, pb = parts(a), parts(b)
            consumed = {v for vs in got.values() for (_, _, v) in vs}
            return bool(pa) and bool(pb) and not pa & pb and pa | pb == set(range(6)) and len(consumed) == total

        wait_for(both_consumed_and_split, timeout=60, interval=0,
                 what="both consumers to split the partitions and consume every message")
        g = broker.call(lambda: broker.broker.group_coordinator.groups[group])  # type: ignore[union-attr]
        assert g.group_type == "consumer"
        kinds = sorted(m.uses_classic_protocol for m in g.consumer.members.values())
        assert kinds == [False, True]
    finally:
        a.close()
        b.close()
    # With the KIP-848 member gone the group could only be classic again; once both left it is empty.
    g = broker.call(lambda: broker.broker.group_coordinator.groups[group])  # type: ignore[union-attr]
    members = g.consumer.members if g.consumer is not None else g.members
    assert not members


def test_classic_admin_clients_list_and_read_a_consumer_group(broker: BrokerThread) -> None:
    from aiokafka.admin import AIOKafkaAdminClient
    from kafka import KafkaAdminClient
    from kafka import TopicPartition as KpTopicPartition

    bs = broker.bootstrap
    topic, group = broker.create_topic(gid("admin"), 2), gid("admin-group")
    produce(bs, topic, 10, 2)
    got: list[tuple[int, int, bytes]] = []
    c = consumer(bs, group, "kip848", "consumer")
    try:
        c.subscribe([topic])
        wait_for(lambda: poll_one(c, got) or len(got) >= 10, what="the consumer to read everything")
        c.commit(offsets=[CkTopicPartition(topic, 0, 4), CkTopicPartition(topic, 1, 5)], asynchronous=False)

        kp = KafkaAdminClient(bootstrap_servers=bs, client_id="kp-admin")
        try:
            groups = kp.list_groups()
            mine = [g for g in groups if g["group_id"] == group]
            assert len(mine) == 1
            assert (mine[0]["protocol_type"], mine[0]["group_type"], mine[0]["group_state"]) == (
                "consumer", "consumer", "Stable")
            typed = kp.list_groups(types_filter=["consumer"])
            assert group in {g["group_id"] for g in typed}
            assert group not in {g["group_id"] for g in kp.list_groups(types_filter=["classic"])}
            offsets = kp.list_group_offsets(group)[group]
            assert {tp.partition: om.offset for tp, om in offsets.items() if tp.topic == topic} == {0: 4, 1: 5}
            one = kp.list_group_offsets({group: [KpTopicPartition(topic, 1)]})[group]
            assert [om.offset for om in one.values()] == [5]
            # DescribeGroups (the classic API) does not describe a consumer group: kafka-python sees it Dead.
            described = kp.describe_groups([group])[group]
            assert (described["group_state"], described["members"]) == ("Dead", [])
        finally:
            kp.close()

        async def with_aiokafka() -> tuple[list, dict]:
            admin = AIOKafkaAdminClient(bootstrap_servers=bs)
            await admin.start()
            try:
                return await admin.list_consumer_groups(), await admin.list_consumer_group_offsets(group)
            finally:
                await admin.close()

        listed, ai_offsets = asyncio.run(with_aiokafka())
        assert (group, "consumer") in [tuple(g[:2]) for g in listed]
        assert {tp.partition: om.offset for tp, om in ai_offsets.items() if tp.topic == topic} == {0: 4, 1: 5}
    finally:
        c.close()
