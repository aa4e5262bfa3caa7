"""The server-side partition assignors of KIP-848 consumer groups: ``uniform`` and ``range``.

Models Kafka's ``ConsumerGroupPartitionAssignor`` implementations: :class:`UniformAssignor` (Kafka's
``UniformAssignor`` with ``OptimizedUniformAssignmentBuilder`` for homogeneous subscriptions and a
general builder for heterogeneous ones) and :class:`RangeAssignor` (Kafka 4's sticky, co-partitioning
``RangeAssignor``).  Both are pure functions of the members' subscriptions and current target
assignments and of the partition counts of the subscribed topics, so the coordinator calls them
directly and the tests exercise them without a broker.

Deliberate differences from Kafka:

* Members are visited in member-id order (Kafka iterates hash maps), which makes every assignment
  deterministic.
* Heterogeneous subscriptions use a simpler builder than Kafka's ``UniformHeterogeneousAssignmentBuilder``
  with the same goals: keep every still-valid partition of the current target assignment, hand out the
  rest to the least-loaded subscriber, then move partitions from a member to a less loaded subscriber
  of the same topic while their loads differ by more than one.
* Neither assignor is rack aware.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from .model import Assignment


class PartitionAssignorError(Exception):
    """Kafka's ``PartitionAssignorException``: the assignor cannot assign (answered UNKNOWN_SERVER_ERROR)."""


@dataclass(frozen=True)
class MemberSubscriptionSpec:
    """What an assignor knows of one member (Kafka's ``MemberSubscriptionAndAssignmentImpl``)."""

    subscribed_topic_ids: frozenset[uuid.UUID]
    assignment: Assignment = field(default_factory=dict)  # the member's current target assignment
    instance_id: str | None = None
    rack_id: str | None = None


def is_homogeneous(members: Mapping[str, MemberSubscriptionSpec]) -> bool:
    """Kafka's ``SubscriptionType.HOMOGENEOUS``: every member subscribes to the same topics."""
    subscriptions = {m.subscribed_topic_ids for m in members.values()}
    return len(subscriptions) <= 1


class ServerAssignor(Protocol):
    """Kafka's ``ConsumerGroupPartitionAssignor``."""

    @property
    def name(self) -> str: ...

    def assign(self, members: Mapping[str, MemberSubscriptionSpec],
               partition_counts: Mapping[uuid.UUID, int]) -> dict[str, Assignment]:
        """The new target assignment of every member; ``partition_counts`` has every subscribed topic
        that exists (topics missing from it are ignored)."""
        ...


def _add(target: dict[str, Assignment], member_id: str, topic_id: uuid.UUID, partition: int) -> None:
    target[member_id].setdefault(topic_id, set()).add(partition)


def _valid_current(spec: MemberSubscriptionSpec, partition_counts: Mapping[uuid.UUID, int]
                   ) -> list[tuple[uuid.UUID, int]]:
    """The member's current target partitions that still exist and that it still subscribes to, sorted."""
    out: list[tuple[uuid.UUID, int]] = []
    for topic_id, partitions in spec.assignment.items():
        n = partition_counts.get(topic_id)
        if n is None or topic_id not in spec.subscribed_topic_ids:
            continue
        out.extend((topic_id, p) for p in partitions if 0 <= p < n)
    out.sort(key=lambda tp: (str(tp[0]), tp[1]))
    return out


class UniformAssignor:
    """Kafka's ``uniform`` assignor: balance first, then stickiness."""

    name = "uniform"

    def assign(self, members: Mapping[str, MemberSubscriptionSpec],
               partition_counts: Mapping[uuid.UUID, int]) -> dict[str, Assignment]:
        if not members:
            return {}
        if is_homogeneous(members):
            return self._homogeneous(members, partition_counts)
        return self._heterogeneous(members, partition_counts)

    @staticmethod
    def _homogeneous(members: Mapping[str, MemberSubscriptionSpec],
                     partition_counts: Mapping[uuid.UUID, int]) -> dict[str, Assignment]:
        """Kafka's ``OptimizedUniformAssignmentBuilder``: quotas of total/members (+1 for the first
        total%members), sticky partitions kept up to the quota, the rest handed out round robin."""
        member_ids = sorted(members)
        target: dict[str, Assignment] = {m: {} for m in member_ids}
        topics = sorted((t for t in next(iter(members.values())).subscribed_topic_ids if t in partition_counts),
                        key=str)
        if not topics:
            return target
        total = sum(partition_counts[t] for t in topics)
        min_quota, extra = divmod(total, len(member_ids))
        unassigned = {(t, p) for t in topics for p in range(partition_counts[t])}
        remaining: dict[str, int] = {}  # members that may still take partitions -> partitions below min quota
        for member_id in member_ids:
            current = _valid_current(members[member_id], partition_counts)
            for tp in current[:min_quota]:
                _add(target, member_id, *tp)
                unassigned.discard(tp)
            if len(current) > min_quota and extra > 0:
                _add(target, member_id, *current[min_quota])
                unassigned.discard(current[min_quota])
                extra -= 1
            elif len(current) <= min_quota:
                remaining[member_id] = min_quota - len(current)
        queue = [m for m in member_ids if m in remaining]
        for tp in sorted(unassigned, key=lambda tp: (str(tp[0]), tp[1])):
            for _ in range(len(queue)):
                member_id = queue.pop(0)
                took = False
                if remaining[member_id] > 0:
                    remaining[member_id] -= 1
                    took = True
                elif extra > 0:
                    extra -= 1
                    remaining[member_id] = -1  # got its extra partition: full
                    took = True
                if took:
                    _add(target, member_id, *tp)
                if remaining[member_id] > 0 or (remaining[member_id] == 0 and extra > 0):
                    queue.append(member_id)
                if took:
                    break
            else:
                raise PartitionAssignorError("Partitions were left unassigned")
        return target

    @staticmethod
    def _heterogeneous(members: Mapping[str, MemberSubscriptionSpec],
                       partition_counts: Mapping[uuid.UUID, int]) -> dict[str, Assignment]:
        """Sticky, then least-loaded placement, then moves between subscribers until balanced."""
        member_ids = sorted(members)
        target: dict[str, Assignment] = {m: {} for m in member_ids}
        load = dict.fromkeys(member_ids, 0)
        owner: dict[tuple[uuid.UUID, int], str] = {}
        subscribers: dict[uuid.UUID, list[str]] = {}
        for member_id in member_ids:
            for t in members[member_id].subscribed_topic_ids:
                if t in partition_counts:
                    subscribers.setdefault(t, []).append(member_id)
        for member_id in member_ids:
            for tp in _valid_current(members[member_id], partition_counts):
                if tp not in owner:  # a partition two current targets name goes to the first
                    owner[tp] = member_id
                    load[member_id] += 1
        # Most constrained topics first, then partitions in order.
        for t in sorted(subscribers, key=lambda t: (len(subscribers[t]), str(t))):
            for p in range(partition_counts[t]):
                if (t, p) not in owner:
                    best = min(subscribers[t], key=lambda m: (load[m], m))
                    owner[(t, p)] = best
                    load[best] += 1
        # Balance: move a partition to a subscriber of its topic holding at least two fewer partitions.
        # Every move lowers the sum of squared loads, so this ends.
        moved = True
        while moved:
            moved = False
            for tp in sorted(owner, key=lambda tp: (-load[owner[tp]], str(tp[0]), tp[1])):
                current = owner[tp]
                lightest = min(subscribers[tp[0]], key=lambda m: (load[m], m))
                if load[current] - load[lightest] > 1:
                    owner[tp] = lightest
                    load[current] -= 1
                    load[lightest] += 1
                    moved = True
        for (t, p), member_id in owner.items():
            _add(target, member_id, t, p)
        return target


class RangeAssignor:
    """Kafka 4's server-side ``range`` assignor: per topic, contiguous ranges over the subscribers in
    member-id order (so co-partitioned topics line up), keeping each member's current partitions up to
    its quota."""

    name = "range"

    def assign(self, members: Mapping[str, MemberSubscriptionSpec],
               partition_counts: Mapping[uuid.UUID, int]) -> dict[str, Assignment]:
        member_ids = sorted(members)
        target: dict[str, Assignment] = {m: {} for m in member_ids}
        members_per_topic: dict[uuid.UUID, list[str]] = {}
        for member_id in member_ids:
            for t in members[member_id].subscribed_topic_ids:
                if t in partition_counts:
                    members_per_topic.setdefault(t, []).append(member_id)
        for topic_id, subscribers in members_per_topic.items():
            n = partition_counts[topic_id]
            min_quota, with_extra = divmod(n, len(subscribers))
            sticky: set[int] = set()
            unfilled: list[tuple[str, int]] = []
            for member_id in subscribers:
                current = sorted(p for p in members[member_id].assignment.get(topic_id, ()) if 0 <= p < n)
                for p in current[:min_quota]:
                    sticky.add(p)
                    _add(target, member_id, topic_id, p)
                remaining = min_quota - len(current)
                if remaining < 0 and with_extra > 0:
                    with_extra -= 1
                    sticky.add(current[min_quota])
                    _add(target, member_id, topic_id, current[min_quota])
                else:
                    unfilled.append((member_id, remaining))
            free = [p for p in range(n) if p not in sticky]
            start = 0
            for member_id, remaining in unfilled:
                if with_extra > 0:
                    remaining += 1
                    with_extra -= 1
                if remaining > 0:
                    for p in free[start:start + remaining]:
                        _add(target, member_id, topic_id, p)
                    start += remaining
        return target


ASSIGNORS: dict[str, ServerAssignor] = {a.name: a for a in (UniformAssignor(), RangeAssignor())}


def configured_assignors(names: str) -> list[str]:
    """The assignor names of ``group.consumer.assignors`` that this broker knows, in order (the first
    is the default).  Kafka also accepts class names; their simple names are mapped to ``uniform`` and
    ``range``."""
    out = []
    for raw in names.split(","):
        name = raw.strip()
        simple = name.rsplit(".", 1)[-1]
        if simple == "UniformAssignor":
            name = "uniform"
        elif simple == "RangeAssignor":
            name = "range"
        if name in ASSIGNORS and name not in out:
            out.append(name)
    return out or ["uniform"]
