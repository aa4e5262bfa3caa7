"""confluent-kafka (librdkafka) with ``group.protocol=consumer`` (KIP-848) against the broker.

The broker does the assignment (ConsumerGroupHeartbeat); librdkafka reconciles.  Covered: three members
sharing a topic's partitions, one leaving and the others taking over (at-least-once with per-message
commits: every message consumed, none consumed again after its offset was committed), a static member
restarting with its assignment while the others keep theirs, a regex subscription picking up a topic
created after the consumer joined, and the three-member case on a three-broker cluster whose group
coordinator is stopped mid-way.

The broker runs with a 500 ms ``group.consumer.heartbeat.interval.ms`` so that rebalances (which the
client learns of by heartbeating) take a fraction of a second.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pytest
from confluent_kafka import Consumer, ConsumerGroupState, ConsumerGroupType, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient

from clients_common import report_client_versions  # noqa: F401  (session fixture, used via pytestmark)
from clients_common import KIP848_BROKER_SETTINGS, group_id, wait_for

from minikafka.broker.config import BrokerConfig
from minikafka.testing import BrokerThread, ClusterThread

pytestmark = [pytest.mark.clients, pytest.mark.usefixtures("report_client_versions")]

BROKER_SETTINGS = KIP848_BROKER_SETTINGS
PARTITIONS = 6


@pytest.fixture
def broker() -> Iterator[BrokerThread]:
    with BrokerThread(BrokerConfig(port=0, **BROKER_SETTINGS)) as b:
        yield b


gid = group_id


def kip848_consumer(bootstrap: str, group: str, name: str, **extra: object) -> Consumer:
    return Consumer({
        "bootstrap.servers": bootstrap, "group.id": group, "client.id": name, "group.protocol": "consumer",
        "enable.auto.commit": False, "auto.offset.reset": "earliest", "fetch.wait.max.ms": 100,
        "topic.metadata.refresh.interval.ms": 1000, **extra,
    })


def produce(bootstrap: str, topic: str, first: int, count: int, partitions: int = PARTITIONS) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for i in range(first, first + count):
        p.produce(topic, value=b"%d" % i, partition=i % partitions)
    assert p.flush(30) == 0


def parts(c: Consumer) -> set[tuple[str, int]]:
    return {(tp.topic, tp.partition) for tp in c.assignment()}


@dataclass
class Member:
    """One KIP-848 consumer, what it consumed and which of those it committed."""

    name: str
    consumer: Consumer
    consumed: list[tuple[str, int, int, bytes]] = field(default_factory=list)  # (topic, partition, offset, value)
    committed: set[tuple[str, int, int]] = field(default_factory=set)
    commit_errors: list[int] = field(default_factory=list)
    closed: bool = False

    def poll(self, commit: bool = True) -> None:
        m = self.consumer.poll(0.02)
        if m is None:
            return
        if m.error() is not None:
            assert m.error().code() in (KafkaError._PARTITION_EOF,), m.error()
            return
        self.consumed.append((m.topic(), m.partition(), m.offset(), m.value()))
        if commit:
            try:
                self.consumer.commit(message=m, asynchronous=False)
                self.committed.add((m.topic(), m.partition(), m.offset()))
            except KafkaException as exc:  # a commit racing a revocation: at-least-once applies
                self.commit_errors.append(exc.args[0].code())

    def close(self) -> None:
        self.consumer.close()
        self.closed = True


def poll_all(members: list[Member], until, what: str, timeout: float = 30) -> None:
    def step() -> bool:
        for m in members:
            if not m.closed:
                m.poll()
        return until()
    wait_for(step, timeout=timeout, interval=0, what=what)


def stable(members: list[Member], topic: str, partitions: int = PARTITIONS) -> bool:
    """Every live member holds partitions, none twice, all of the topic's, as evenly as the assignor spreads them.

    Evenness tells the target assignment from a reconciliation under way (one member still holding a partition
    it is revoking while the one it goes to waits), which covers the topic as well.
    """
    held = [parts(m.consumer) for m in members if not m.closed]
    union = set().union(*held)
    sizes = [len(h) for h in held]
    return (all(held) and sum(sizes) == len(union) and max(sizes) - min(sizes) <= 1
            and union == {(topic, p) for p in range(partitions)})


def check_at_least_once(members: list[Member], topic: str, total: int) -> None:
    """Every message consumed; a message consumed twice was not committed the first time."""
    values: set[bytes] = set()
    for m in members:
        for (t, p, off, value) in m.consumed:
            if t == topic:
                values.add(value)
    produced = {b"%d" % i for i in range(total)}
    assert values == produced, f"missing {sorted(produced - values)[:10]}"
    # Duplicates: a (partition, offset) consumed by more than one member (or twice by one) must not have been
    # committed by the one that consumed it first.
    by_key: dict[tuple[int, int], list[Member]] = {}
    for m in members:
        for (t, p, off, _) in m.consumed:
            if t == topic:
                by_key.setdefault((p, off), []).append(m)
    dupes = {k: ms for k, ms in by_key.items() if len(ms) > 1}
    for (p, off), ms in dupes.items():
        committers = [m.name for m in ms if (topic, p, off) in m.committed]
        assert len(committers) <= 1, f"{topic}-{p}@{off} committed by {committers} and consumed again"


def group_state(broker: BrokerThread, group: str) -> str:
    """The consumer group's state as the broker's coordinator has it."""
    def read() -> str:
        (d,) = broker.broker.group_coordinator.consumer_group_describe([group])
        return d.group_state
    return broker.call(read)


def describe(bootstrap: str, group: str):
    a = AdminClient({"bootstrap.servers": bootstrap})
    return a.describe_consumer_groups([group], request_timeout=10)[group].result(timeout=15)


# -- three members, one leaves -----------------------------------------------------------------------------


def three_members_one_leaves(bootstrap: str, topic: str, group: str, coordinator_of: Callable[[str], int],
                             stop_coordinator: Callable[[], None] | None = None) -> None:
    members = [Member(f"c{i}", kip848_consumer(bootstrap, group, f"c{i}")) for i in range(3)]
    try:
        for m in members:
            m.consumer.subscribe([topic])
        poll_all(members, lambda: stable(members, topic), "three members sharing the partitions")
        owner = {tp: m.name for m in members for tp in parts(m.consumer)}
        produce(bootstrap, topic, 0, 300)
        poll_all(members, lambda: sum(len(m.consumed) for m in members) >= 300, "the first 300 messages")
        # Once stable, each partition was consumed by exactly one member: its owner.
        for m in members:
            for (t, p, _, _) in m.consumed:
                assert owner[(t, p)] == m.name
        if stop_coordinator is not None:
            stop_coordinator()
            produce(bootstrap, topic, 300, 60)
            poll_all(members, lambda: sum(len(m.consumed) for m in members) >= 360,
                     "messages after the coordinator stopped")
            assert stable(members, topic)
        first = 360 if stop_coordinator is not None else 300
        leaving = members[1]
        leaving.close()
        live = [members[0], members[2]]
        poll_all(members, lambda: stable(live, topic), "the remaining two taking over the leaver's partitions")
        assert set().union(*(parts(m.consumer) for m in live)) == {(topic, p) for p in range(PARTITIONS)}
        produce(bootstrap, topic, first, 300)
        total = first + 300
        poll_all(members, lambda: len({v for m in members for *_, v in m.consumed}) >= total,
                 "every message consumed")
        check_at_least_once(members, topic, total)
        # The leaver's last partitions were continued from its commits: nothing it committed came again.
        for m in live:
            for (t, p, off, _) in m.consumed:
                assert (t, p, off) not in leaving.committed
        # ConsumerGroupDescribe (the admin client asks it first for KIP-848 groups).
        d = describe(bootstrap, group)
        assert d.group_id == group and len(d.members) == 2 and d.type == ConsumerGroupType.CONSUMER
        assert d.state == ConsumerGroupState.STABLE and d.partition_assignor == "uniform"
        assert d.coordinator.id == coordinator_of(group)
        assert sorted(tp.partition for m in d.members for tp in m.assignment.topic_partitions) == list(
            range(PARTITIONS))
    finally:
        for m in members:
            if not m.closed:
                m.close()


def test_three_members_share_partitions_and_take_over_from_a_leaver(broker: BrokerThread) -> None:
    broker.create_topic("kip848-three", PARTITIONS)
    group = gid("g3")
    three_members_one_leaves(broker.bootstrap, "kip848-three", group, lambda g: broker.config.node_id)


def test_three_members_on_a_cluster_survive_the_coordinator_stopping() -> None:
    with ClusterThread(3, replica_fetch_wait_max_ms=50, replica_fetch_backoff_ms=100, **BROKER_SETTINGS) as cluster:
        topic = cluster.create_topic("kip848-cluster", PARTITIONS, 3)
        group = gid("gc")

        def coordinator_of(g: str) -> int:
            return cluster.call(lambda: cluster.cluster.metadata.group_coordinator(g).node_id)

        coordinator = coordinator_of(group)

        def stop() -> None:
            cluster.stop_broker(coordinator)
            new = coordinator_of(group)
            assert new != coordinator and new >= 0

        three_members_one_leaves(cluster.bootstrap, topic, group, coordinator_of, stop_coordinator=stop)


# -- static membership -----------------------------------------------------------------------------------


def test_static_member_restart_keeps_its_assignment(broker: BrokerThread) -> None:
    topic = "kip848-static"
    broker.create_topic(topic, PARTITIONS)
    group = gid("gs")
    static = Member("s", kip848_consumer(broker.bootstrap, group, "s", **{"group.instance.id": "instance-s"}))
    others = [Member(f"d{i}", kip848_consumer(broker.bootstrap, group, f"d{i}")) for i in range(2)]
    members = [static, *others]
    try:
        for m in members:
            m.consumer.subscribe([topic])
        poll_all(members, lambda: stable(members, topic), "three members sharing the partitions")
        mine = parts(static.consumer)
        theirs = [parts(o.consumer) for o in others]
        static.close()  # a static member leaves with epoch -2: its partitions wait for it
        restarted = Member("s2", kip848_consumer(broker.bootstrap, group, "s2", **{"group.instance.id": "instance-s"}))
        restarted.consumer.subscribe([topic])
        live = [restarted, *others]

        def back() -> bool:
            # The others never lose or gain a partition meanwhile.
            assert [parts(o.consumer) for o in others] == theirs
            return parts(restarted.consumer) == mine

        poll_all(live, back, "the restarted static member getting its partitions back")
        # The group settles (every member reconciled at the assignment epoch) with nothing moved.
        poll_all(live, lambda: group_state(broker, group) == "Stable", "the group stable again")
        assert parts(restarted.consumer) == mine and [parts(o.consumer) for o in others] == theirs
        d = describe(broker.bootstrap, group)
        assert len(d.members) == 3
        assert {m.group_instance_id for m in d.members} == {"instance-s", None}
        members = [*live]
    finally:
        for m in [*members, static]:
            if not m.closed:
                m.close()


# -- regex subscription ----------------------------------------------------------------------------------


def test_regex_subscription_picks_up_a_topic_created_later(broker: BrokerThread) -> None:
    broker.create_topic("prefix-existing", 2)
    broker.create_topic("unrelated", 2)
    group = gid("gr")
    m = Member("r", kip848_consumer(broker.bootstrap, group, "r"))
    try:
        m.consumer.subscribe(["^prefix.*"])
        poll_all([m], lambda: parts(m.consumer) == {("prefix-existing", 0), ("prefix-existing", 1)},
                 "the existing matching topic assigned")
        broker.create_topic("prefix-later", 3)
        poll_all([m], lambda: {t for t, _ in parts(m.consumer)} == {"prefix-existing", "prefix-later"},
                 "the topic created later assigned")
        produce(broker.bootstrap, "prefix-later", 0, 30, partitions=3)
        produce(broker.bootstrap, "unrelated", 0, 10, partitions=2)
        poll_all([m], lambda: len([r for r in m.consumed if r[0] == "prefix-later"]) >= 30,
                 "the later topic's messages")
        assert {r[0] for r in m.consumed} == {"prefix-later"}
        # The broker resolved the regex: librdkafka sends it as SubscribedTopicRegex (v1), each of its
        # regex subscriptions in parentheses, joined by "|".
        (sub,) = broker.call(lambda: broker.broker.group_coordinator.consumer_group_describe([group]))[0].members
        assert sub.subscribed_topic_regex == "(^prefix.*)" and sub.subscribed_topic_names == []
        d = describe(broker.bootstrap, group)
        (member,) = d.members
        assert {tp.topic for tp in member.assignment.topic_partitions} == {"prefix-existing", "prefix-later"}
    finally:
        m.close()
