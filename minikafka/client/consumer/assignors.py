"""Partition assignors run by the group leader (Java's ``RangeAssignor`` and ``RoundRobinAssignor``).

Both follow Java's ``AbstractPartitionAssignor``: ``assign(partitions_per_topic,
subscriptions)`` maps member id -> assigned partitions, where
``partitions_per_topic`` gives the partition count of every subscribed topic
known to the metadata (topics missing from it are skipped).  Members are
ordered as Java's ``MemberInfo``: static members (with a group instance id)
first, by instance id, then dynamic members by member id.

Deliberate differences: no rack-aware assignment (KIP-881) and no
co-partitioning check; with no racks Java produces the same result.
"""

from __future__ import annotations

import itertools
from typing import Mapping

from ..fetch_session import TopicPartition
from .protocol import Subscription

__all__ = ["PartitionAssignor", "RangeAssignor", "RoundRobinAssignor", "ASSIGNORS", "assignor_for", "member_order"]


def member_order(member_id: str, group_instance_id: str | None) -> tuple:
    """Java's ``MemberInfo.compareTo`` as a sort key."""
    if group_instance_id is not None:
        return (0, group_instance_id, member_id)
    return (1, member_id, "")


class PartitionAssignor:
    """Java's ``ConsumerPartitionAssignor`` (eager protocol only)."""

    name = ""

    def assign(self, partitions_per_topic: Mapping[str, int],
               subscriptions: Mapping[str, Subscription]) -> dict[str, list[TopicPartition]]:
        raise NotImplementedError

    def subscription_user_data(self, topics: set[str]) -> bytes | None:
        return None


class RangeAssignor(PartitionAssignor):
    """Java's ``RangeAssignor``: per topic, contiguous ranges of partitions, the first
    ``partitions % members`` members (in member order) getting one extra.

    Example (Java's javadoc): members C0, C1 both subscribed to t0, t1 with 3
    partitions each -> C0: [t0p0, t0p1, t1p0, t1p1], C1: [t0p2, t1p2].
    """

    name = "range"

    def assign(self, partitions_per_topic: Mapping[str, int],
               subscriptions: Mapping[str, Subscription]) -> dict[str, list[TopicPartition]]:
        consumers_per_topic: dict[str, list[tuple]] = {}
        for member_id, sub in subscriptions.items():
            for topic in sub.topics:
                consumers_per_topic.setdefault(topic, []).append(member_order(member_id, sub.group_instance_id))
        assignment: dict[str, list[TopicPartition]] = {m: [] for m in subscriptions}
        for topic, members in consumers_per_topic.items():
            n = partitions_per_topic.get(topic)
            if n is None:
                continue
            members = sorted(set(members))
            ids = [m[1] if m[0] == 1 else m[2] for m in members]
            per, extra = divmod(n, len(ids))
            for i, member_id in enumerate(ids):
                start = per * i + min(i, extra)
                length = per + (1 if i + 1 <= extra else 0)
                assignment[member_id].extend(TopicPartition(topic, p) for p in range(start, start + length))
        return assignment


class RoundRobinAssignor(PartitionAssignor):
    """Java's ``RoundRobinAssignor``: all partitions of all subscribed topics (topics
    sorted by name, partitions by number) dealt round-robin over the members in
    member order, skipping members not subscribed to the partition's topic.

    Examples (Java's javadoc): C0, C1 on t0, t1 with 3 partitions each ->
    C0: [t0p0, t0p2, t1p1], C1: [t0p1, t1p0, t1p2].  C0 on t0; C1 on t0, t1;
    C2 on t0, t1, t2 (1, 2, 3 partitions) -> C0: [t0p0], C1: [t1p0],
    C2: [t1p1, t2p0, t2p1, t2p2].
    """

    name = "roundrobin"

    def assign(self, partitions_per_topic: Mapping[str, int],
               subscriptions: Mapping[str, Subscription]) -> dict[str, list[TopicPartition]]:
        assignment: dict[str, list[TopicPartition]] = {m: [] for m in subscriptions}
        order = sorted(subscriptions, key=lambda m: member_order(m, subscriptions[m].group_instance_id))
        if not order:
            return assignment
        topics = sorted({t for s in subscriptions.values() for t in s.topics})
        subscribed = {m: set(subscriptions[m].topics) for m in order}
        ring = itertools.cycle(order)
        peek = next(ring)
        for topic in topics:
            n = partitions_per_topic.get(topic)
            if n is None:
                continue
            for p in range(n):
                while topic not in subscribed[peek]:
                    peek = next(ring)
                assignment[peek].append(TopicPartition(topic, p))
                peek = next(ring)
        return assignment


ASSIGNORS: dict[str, type[PartitionAssignor]] = {"range": RangeAssignor, "roundrobin": RoundRobinAssignor}


def assignor_for(name: str) -> PartitionAssignor:
    """An assignor by its protocol name (Java's class names are accepted too)."""
    key = name.rsplit(".", 1)[-1].lower().removesuffix("assignor")
    key = {"round_robin": "roundrobin"}.get(key, key)
    if key not in ASSIGNORS:
        raise ValueError(f"unknown partition assignment strategy {name!r} (known: {sorted(ASSIGNORS)})")
    return ASSIGNORS[key]()
