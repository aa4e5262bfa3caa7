"""The share-group partition assignor (Kafka's ``SimpleAssignor``, name ``simple``).

Unlike a consumer group's, a share group's partitions may be assigned to several members at once: records
are handed out record by record by the share partitions, so the assignment only has to spread the load.
As Kafka's ``SimpleHomogeneousAssignmentBuilder`` / ``SimpleHeterogeneousAssignmentBuilder``:

* every subscribed partition goes to at least one member, and each partition to
  ``ceil(members / partitions)`` members (its *desired sharing*), so with more members than partitions
  partitions are shared;
* balance: each member's count differs from another's by at most one, out of
  ``sharing * partitions`` assignments in total;
* stickiness: a member keeps what it had where balance allows.

When every member subscribes to the same topics the balance is computed over all their partitions at
once; otherwise topic by topic over the members subscribing to each topic (Kafka's heterogeneous case).

Deliberate difference: where Kafka hands the larger per-member counts out by member index, this gives
them to the members already holding the most partitions (fewer moves); members are ordered by id, so the
result is deterministic.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence

TopicIdPartition = tuple[uuid.UUID, int]
MemberAssignment = dict[uuid.UUID, set[int]]

ASSIGNOR_NAME = "simple"


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _assign_pool(partitions: Sequence[TopicIdPartition], members: Sequence[str],
                 current: Mapping[str, set[TopicIdPartition]]) -> dict[str, set[TopicIdPartition]]:
    """Spread ``partitions`` over ``members`` (each partition to ``ceil(M/P)`` members, balanced, sticky).

    ``current``: what each member holds now (only partitions of the pool are kept)."""
    out: dict[str, set[TopicIdPartition]] = {m: set() for m in members}
    if not partitions or not members:
        return out
    pool = set(partitions)
    sharing = _ceil_div(len(members), len(partitions))
    total = sharing * len(partitions)
    counts = sorted((_ceil_div(total * (i + 1), len(members)) - _ceil_div(total * i, len(members))
                     for i in range(len(members))), reverse=True)
    kept = {m: sorted(current.get(m, set()) & pool) for m in members}
    # The larger targets go to the members holding the most already (ties: by member id).
    by_holdings = sorted(members, key=lambda m: (-len(kept[m]), m))
    desired = dict(zip(by_holdings, counts))
    holders: dict[TopicIdPartition, list[str]] = {tp: [] for tp in partitions}
    for m in members:
        for tp in kept[m][:desired[m]]:  # revoke what a member holds beyond its target
            holders[tp].append(m)
            out[m].add(tp)
    # Revoke partitions shared by more members than desired, from the fullest members first.
    for tp in partitions:
        extra = len(holders[tp]) - sharing
        if extra > 0:
            for m in sorted(holders[tp], key=lambda x: (len(out[x]) - desired[x], x), reverse=True)[:extra]:
                holders[tp].remove(m)
                out[m].discard(tp)
    # Hand out what is missing, cycling over the members below their target.
    unfilled = [m for m in members if len(out[m]) < desired[m]]
    for tp in partitions:
        need = sharing - len(holders[tp])
        for m in list(unfilled):
            if need <= 0:
                break
            if tp in out[m]:
                continue
            out[m].add(tp)
            holders[tp].append(m)
            need -= 1
            if len(out[m]) >= desired[m]:
                unfilled.remove(m)
        if unfilled:  # rotate so the next partitions start with other members
            unfilled = unfilled[1:] + unfilled[:1]
    # Never leave a partition without a member (the tolerated imbalance of Kafka's builders aside).
    for tp in partitions:
        if not holders[tp]:
            m = min(members, key=lambda x: (len(out[x]), x))
            out[m].add(tp)
            holders[tp].append(m)
    return out


def simple_assign(subscriptions: Mapping[str, frozenset[uuid.UUID]], partition_counts: Mapping[uuid.UUID, int],
                  current: Mapping[str, Mapping[uuid.UUID, set[int]]]) -> dict[str, MemberAssignment]:
    """The target assignment of a share group.

    ``subscriptions``: member id -> the ids of the (existing) topics it subscribes to;
    ``partition_counts``: topic id -> partitions; ``current``: the members' current target assignment."""
    members = sorted(subscriptions)
    held: dict[str, set[TopicIdPartition]] = {
        m: {(t, p) for t, ps in current.get(m, {}).items() for p in ps} for m in members}
    result: dict[str, set[TopicIdPartition]] = {m: set() for m in members}
    topics = sorted({t for s in subscriptions.values() for t in s if t in partition_counts}, key=str)
    homogeneous = len({subscriptions[m] for m in members}) <= 1
    if homogeneous:
        pools: list[tuple[list[TopicIdPartition], list[str]]] = [
            ([(t, p) for t in topics for p in range(partition_counts[t])], members)]
    else:
        pools = [([(t, p) for p in range(partition_counts[t])], [m for m in members if t in subscriptions[m]])
                 for t in topics]
    for partitions, pool_members in pools:
        for m, tps in _assign_pool(partitions, pool_members, held).items():
            result[m] |= tps
    out: dict[str, MemberAssignment] = {}
    for m, tps in result.items():
        assignment: MemberAssignment = {}
        for t, p in tps:
            assignment.setdefault(t, set()).add(p)
        out[m] = assignment
    return out
