"""RangeAssignor and RoundRobinAssignor against the examples in Java's javadoc and tests."""

from __future__ import annotations

from minikafka.client.consumer.assignors import RangeAssignor, RoundRobinAssignor, assignor_for
from minikafka.client.consumer.protocol import (Assignment, Subscription, decode_assignment, decode_subscription,
                                                encode_assignment, encode_subscription)
from minikafka.client.fetch_session import TopicPartition as TP


def tps(spec: str) -> list[TP]:
    """'t0p0 t1p2' -> [TP('t0', 0), TP('t1', 2)]"""
    out = []
    for item in spec.split():
        t, p = item.rsplit("p", 1)
        out.append(TP(t, int(p)))
    return out


def subs(**topics: list[str]) -> dict[str, Subscription]:
    return {m: Subscription(ts) for m, ts in topics.items()}


def test_range_javadoc_example() -> None:
    # "C0: [t0p0, t0p1, t1p0, t1p1], C1: [t0p2, t1p2]"
    got = RangeAssignor().assign({"t0": 3, "t1": 3}, subs(C0=["t0", "t1"], C1=["t0", "t1"]))
    assert got == {"C0": tps("t0p0 t0p1 t1p0 t1p1"), "C1": tps("t0p2 t1p2")}


def test_roundrobin_javadoc_examples() -> None:
    # "C0: [t0p0, t0p2, t1p1], C1: [t0p1, t1p0, t1p2]"
    got = RoundRobinAssignor().assign({"t0": 3, "t1": 3}, subs(C0=["t0", "t1"], C1=["t0", "t1"]))
    assert got == {"C0": tps("t0p0 t0p2 t1p1"), "C1": tps("t0p1 t1p0 t1p2")}
    # Unequal subscriptions: "C0: [t0p0], C1: [t1p0], C2: [t1p1, t2p0, t2p1, t2p2]"
    got = RoundRobinAssignor().assign({"t0": 1, "t1": 2, "t2": 3},
                                      subs(C0=["t0"], C1=["t0", "t1"], C2=["t0", "t1", "t2"]))
    assert got == {"C0": tps("t0p0"), "C1": tps("t1p0"), "C2": tps("t1p1 t2p0 t2p1 t2p2")}


def test_range_uneven_and_more_members_than_partitions() -> None:
    # Java's RangeAssignorTest.testTwoConsumersOneTopicThreePartitions / testOnlyAssignsPartitionsFromSubscribedTopics
    got = RangeAssignor().assign({"t": 3}, subs(c1=["t"], c2=["t"]))
    assert got == {"c1": tps("tp0 tp1"), "c2": tps("tp2")}
    got = RangeAssignor().assign({"t": 2}, subs(a=["t"], b=["t"], c=["t"]))
    assert got == {"a": tps("tp0"), "b": tps("tp1"), "c": []}
    # A topic unknown to the metadata is skipped; members sort by member id, not dict order.
    got = RangeAssignor().assign({"t": 4}, subs(z=["t", "missing"], a=["t"]))
    assert got == {"a": tps("tp0 tp1"), "z": tps("tp2 tp3")}


def test_static_members_come_first_ordered_by_instance_id() -> None:
    s = {"m-a": Subscription(["t"]), "m-b": Subscription(["t"], group_instance_id="i-2"),
         "m-c": Subscription(["t"], group_instance_id="i-1")}
    assert RangeAssignor().assign({"t": 3}, s) == {"m-c": tps("tp0"), "m-b": tps("tp1"), "m-a": tps("tp2")}
    assert RoundRobinAssignor().assign({"t": 4}, s) == {"m-c": tps("tp0 tp3"), "m-b": tps("tp1"), "m-a": tps("tp2")}


def test_assignor_names() -> None:
    assert assignor_for("range").name == "range"
    assert assignor_for("org.apache.kafka.clients.consumer.RoundRobinAssignor").name == "roundrobin"


def test_embedded_protocol_roundtrip_all_versions() -> None:
    sub = Subscription(["a", "b"], b"ud", [TP("a", 0), TP("a", 3)], 7, "rack1")
    for v in range(4):
        back = decode_subscription(encode_subscription(sub, v))
        assert back.topics == ["a", "b"] and back.user_data == b"ud"
        assert back.owned_partitions == ([TP("a", 0), TP("a", 3)] if v >= 1 else [])
        assert back.generation_id == (7 if v >= 2 else -1)
        assert back.rack_id == ("rack1" if v >= 3 else None)
    # A v0 subscription is exactly int16 version + topics + nullable user data (Java's layout).
    assert encode_subscription(Subscription(["t"]), 0) == b"\x00\x00" + b"\x00\x00\x00\x01\x00\x01t" + b"\xff\xff\xff\xff"
    asg = Assignment(tps("x0p1 x0p2 y0p0"), None)
    assert decode_assignment(encode_assignment(asg)) == asg
    assert decode_assignment(b"") == Assignment([])
