"""The KIP-848 server assignors (``uniform`` and ``range``) as pure functions: balance, stickiness,
co-partitioning, heterogeneous subscriptions."""

from __future__ import annotations

import random
import uuid

import pytest

from minikafka.broker.groups.consumer.assignors import (
    MemberSubscriptionSpec,
    RangeAssignor,
    UniformAssignor,
    configured_assignors,
)
from minikafka.broker.groups.consumer.model import Assignment

T1, T2, T3 = (uuid.UUID(int=i) for i in (1, 2, 3))


def spec(*topics: uuid.UUID, assignment: Assignment | None = None) -> MemberSubscriptionSpec:
    return MemberSubscriptionSpec(frozenset(topics), assignment or {})


def sizes(result: dict[str, Assignment]) -> dict[str, int]:
    return {m: sum(len(p) for p in a.values()) for m, a in result.items()}


def all_partitions(result: dict[str, Assignment]) -> list[tuple[uuid.UUID, int]]:
    return sorted(((t, p) for a in result.values() for t, ps in a.items() for p in ps), key=str)


def assert_complete_and_exclusive(result: dict[str, Assignment], counts: dict[uuid.UUID, int]) -> None:
    got = all_partitions(result)
    assert len(got) == len(set(got)), "a partition is assigned twice"
    assert set(got) == {(t, p) for t, n in counts.items() for p in range(n)}


@pytest.mark.parametrize("members,partitions", [(1, 5), (3, 7), (3, 12), (4, 2), (5, 23)])
def test_uniform_homogeneous_is_balanced(members: int, partitions: int) -> None:
    counts = {T1: partitions, T2: partitions // 2 + 1}
    result = UniformAssignor().assign({f"m{i}": spec(T1, T2) for i in range(members)}, counts)
    assert_complete_and_exclusive(result, counts)
    s = sizes(result)
    assert max(s.values()) - min(s.values()) <= 1


def test_uniform_is_sticky_when_a_member_joins_and_leaves() -> None:
    counts = {T1: 12}
    a = UniformAssignor()
    first = a.assign({m: spec(T1) for m in ("a", "b", "c")}, counts)
    # A fourth member joins: everyone keeps 3 of its 4 partitions, the newcomer gets the three freed ones.
    second = a.assign({m: spec(T1, assignment=first.get(m)) for m in ("a", "b", "c", "d")}, counts)
    assert_complete_and_exclusive(second, counts)
    assert sizes(second) == {"a": 3, "b": 3, "c": 3, "d": 3}
    for m in ("a", "b", "c"):
        assert second[m][T1] <= first[m][T1]
    # "b" leaves: the others keep all theirs and share b's.
    third = a.assign({m: spec(T1, assignment=second[m]) for m in ("a", "c", "d")}, counts)
    assert_complete_and_exclusive(third, counts)
    assert sizes(third) == {"a": 4, "c": 4, "d": 4}
    for m in ("a", "c", "d"):
        assert second[m][T1] <= third[m][T1]


def test_uniform_recomputation_without_change_moves_nothing() -> None:
    counts = {T1: 10, T2: 3}
    a = UniformAssignor()
    first = a.assign({m: spec(T1, T2) for m in ("x", "y", "z")}, counts)
    again = a.assign({m: spec(T1, T2, assignment=first[m]) for m in ("x", "y", "z")}, counts)
    assert again == first


def test_uniform_drops_partitions_of_deleted_or_unsubscribed_topics() -> None:
    counts = {T1: 4}
    current = {"a": {T1: {0, 1}, T2: {0, 1}}, "b": {T1: {2, 3}, T2: {2}}}
    result = UniformAssignor().assign({m: spec(T1, assignment=a) for m, a in current.items()}, counts)
    assert result == {"a": {T1: {0, 1}}, "b": {T1: {2, 3}}}


def test_uniform_heterogeneous_balances_within_each_topics_subscribers() -> None:
    counts = {T1: 6, T2: 6, T3: 2}
    members = {"a": spec(T1), "b": spec(T1, T2), "c": spec(T2, T3), "d": spec(T3)}
    result = UniformAssignor().assign(members, counts)
    assert_complete_and_exclusive(result, counts)
    for m, a in result.items():
        assert set(a) <= members[m].subscribed_topic_ids
    s = sizes(result)
    # a only takes T1, d only T3: b and c spread T1 and T2 so that nobody could give a partition to a
    # subscriber of it with two fewer partitions.
    assert max(s.values()) - min(s.values()) <= 2
    for m, a in result.items():
        for t in a:
            for other, sub in members.items():
                if t in sub.subscribed_topic_ids:
                    assert s[m] - s[other] <= 1


def test_uniform_heterogeneous_is_sticky() -> None:
    counts = {T1: 8, T2: 4}
    members = {"a": spec(T1), "b": spec(T1, T2), "c": spec(T2)}
    first = UniformAssignor().assign(members, counts)
    again = UniformAssignor().assign({m: spec(*members[m].subscribed_topic_ids, assignment=first[m])
                                      for m in members}, counts)
    assert again == first


def test_range_assigns_co_partitioned_ranges() -> None:
    counts = {T1: 7, T2: 7}
    result = RangeAssignor().assign({m: spec(T1, T2) for m in ("m1", "m2", "m3")}, counts)
    assert_complete_and_exclusive(result, counts)
    assert result["m1"] == {T1: {0, 1, 2}, T2: {0, 1, 2}}
    assert result["m2"] == {T1: {3, 4}, T2: {3, 4}}
    assert result["m3"] == {T1: {5, 6}, T2: {5, 6}}


def test_range_is_sticky_and_keeps_topics_aligned() -> None:
    counts = {T1: 6, T2: 6}
    a = RangeAssignor()
    first = a.assign({m: spec(T1, T2) for m in ("m1", "m2")}, counts)
    second = a.assign({m: spec(T1, T2, assignment=first.get(m)) for m in ("m1", "m2", "m3")}, counts)
    assert_complete_and_exclusive(second, counts)
    for m in ("m1", "m2"):
        assert second[m][T1] <= first[m][T1]
        assert second[m][T1] == second[m][T2]  # co-partitioned: same partitions of both topics
    assert second["m3"][T1] == second["m3"][T2]
    assert sizes(second) == {"m1": 4, "m2": 4, "m3": 4}


def test_range_more_members_than_partitions() -> None:
    counts = {T1: 2}
    result = RangeAssignor().assign({m: spec(T1) for m in ("a", "b", "c")}, counts)
    assert_complete_and_exclusive(result, counts)
    assert sorted(sizes(result).values()) == [0, 1, 1]


def test_random_memberships_stay_complete() -> None:
    rnd = random.Random(7)
    topics = [uuid.UUID(int=i) for i in range(1, 6)]
    for _ in range(200):
        counts = {t: rnd.randrange(1, 9) for t in topics}
        n = rnd.randrange(1, 7)
        members = {f"m{i}": spec(*rnd.sample(topics, rnd.randrange(1, len(topics) + 1))) for i in range(n)}
        subscribed = {t for s in members.values() for t in s.subscribed_topic_ids}
        wanted = {t: c for t, c in counts.items() if t in subscribed}
        for assignor in (UniformAssignor(), RangeAssignor()):
            result = assignor.assign(members, counts)
            assert_complete_and_exclusive(result, wanted)
            for m, a in result.items():
                assert set(a) <= members[m].subscribed_topic_ids


def test_configured_assignors_keep_order_and_map_class_names() -> None:
    assert configured_assignors("uniform,range") == ["uniform", "range"]
    assert configured_assignors("org.apache.kafka.coordinator.group.assignor.RangeAssignor, uniform") == [
        "range", "uniform"]
    assert configured_assignors("nope") == ["uniform"]
