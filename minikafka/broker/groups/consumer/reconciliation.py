"""Reconciliation of a member's current assignment towards its target (Kafka's ``CurrentAssignmentBuilder``).

The state machine of the KIP-848 protocol, as Kafka 4.1 runs it for one member on each of its
heartbeats:

* ``STABLE`` at the target epoch: nothing to do (unless the subscription changed: partitions of topics
  no longer subscribed are taken away).
* a newer target: partitions the member keeps stay assigned; those it must give up become *pending
  revocation* and the member stays at its epoch in ``UNREVOKED_PARTITIONS`` until it reports (owned
  partitions in its heartbeat) that it no longer holds them.
* then it moves to the target epoch and receives the new partitions that are free; a partition still
  held by another member (its partition epoch is set) is withheld and the member waits in
  ``UNRELEASED_PARTITIONS`` until it is released.  So no partition is ever owned by two members.

:func:`reconcile` is pure: it takes the member and returns the member's next :class:`ReconciledState`.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

from .model import NO_PARTITION_EPOCH, Assignment, ConsumerGroupMember, MemberState


class MemberFencedError(Exception):
    """The member is in a state the coordinator cannot reconcile from (FENCED_MEMBER_EPOCH)."""


@dataclass(frozen=True)
class ReconciledState:
    """The reconciliation fields of a :class:`ConsumerGroupMember` after one step."""

    member_epoch: int
    previous_member_epoch: int
    state: MemberState
    assigned_partitions: Assignment
    partitions_pending_revocation: Assignment

    def apply(self, member: ConsumerGroupMember) -> None:
        member.member_epoch = self.member_epoch
        member.previous_member_epoch = self.previous_member_epoch
        member.state = self.state
        member.assigned_partitions = self.assigned_partitions
        member.partitions_pending_revocation = self.partitions_pending_revocation


def current_state(member: ConsumerGroupMember) -> ReconciledState:
    return ReconciledState(member.member_epoch, member.previous_member_epoch, member.state,
                           member.assigned_partitions, member.partitions_pending_revocation)


def _owns_any(owned: Assignment | None, partitions: Assignment) -> bool:
    """Kafka's ``ownsRevokedPartitions``: unknown ownership (None) counts as still owning."""
    if owned is None:
        return True
    return any(partitions.get(t, set()) & ps for t, ps in owned.items())


def reconcile(
    member: ConsumerGroupMember,
    target_epoch: int,
    target: Assignment,
    subscribed_topic_ids: AbstractSet[uuid.UUID],
    partition_epoch: Callable[[uuid.UUID, int], int],
    owned: Assignment | None,
    subscription_changed: bool = False,
) -> ReconciledState:
    """One step of Kafka's ``CurrentAssignmentBuilder.build`` for ``member``.

    ``subscribed_topic_ids``: the topics the member subscribes to that exist (by name or regex);
    ``partition_epoch``: the epoch of a partition's current owner, or -1 when it is free; ``owned``: the
    partitions the member reported owning in this heartbeat (None when it did not say).
    """
    state = member.state
    if state == MemberState.STABLE:
        if member.member_epoch != target_epoch:
            return _next_assignment(member, member.member_epoch, target_epoch, target, subscribed_topic_ids,
                                    partition_epoch, owned)
        if subscription_changed:
            return _drop_unsubscribed(member, subscribed_topic_ids, owned)
        return current_state(member)
    if state == MemberState.UNREVOKED_PARTITIONS:
        if _owns_any(owned, member.partitions_pending_revocation):
            if subscription_changed:
                return _drop_unsubscribed(member, subscribed_topic_ids, owned)
            return current_state(member)
        return _next_assignment(member, member.member_epoch, target_epoch, target, subscribed_topic_ids,
                                partition_epoch, owned)
    if state == MemberState.UNRELEASED_PARTITIONS:
        return _next_assignment(member, member.member_epoch, target_epoch, target, subscribed_topic_ids,
                                partition_epoch, owned)
    # UNKNOWN: only a member that owns nothing can start over.
    if owned is None or any(owned.values()):
        raise MemberFencedError("The consumer group member is in a unknown state. "
                                "The member must abandon all its partitions and rejoin.")
    return _next_assignment(member, target_epoch, target_epoch, target, subscribed_topic_ids, partition_epoch,
                            owned)


def _epoch_update(member: ConsumerGroupMember, epoch: int) -> tuple[int, int]:
    """Kafka's ``Builder.updateMemberEpoch``: (new epoch, previous epoch)."""
    return epoch, member.member_epoch


def _drop_unsubscribed(member: ConsumerGroupMember, subscribed: AbstractSet[uuid.UUID],
                       owned: Assignment | None) -> ReconciledState:
    """Kafka's ``updateCurrentAssignment``: take away the partitions of topics no longer subscribed."""
    assigned = member.assigned_partitions
    if not subscribed and not member.partitions_pending_revocation:
        new_assigned: Assignment = {}
        pending: Assignment = {t: set(ps) for t, ps in assigned.items() if ps}
    else:
        new_assigned = {t: set(ps) for t, ps in assigned.items() if t in subscribed and ps}
        pending = {t: set(ps) for t, ps in member.partitions_pending_revocation.items() if ps}
        for t, ps in assigned.items():
            if t not in subscribed and ps:
                pending.setdefault(t, set()).update(ps)
    if new_assigned == {t: ps for t, ps in assigned.items() if ps}:
        return current_state(member)
    epoch, previous = _epoch_update(member, member.member_epoch)
    if pending and _owns_any(owned, pending):
        return ReconciledState(epoch, previous, MemberState.UNREVOKED_PARTITIONS, new_assigned, pending)
    return ReconciledState(epoch, previous, member.state, new_assigned, member.partitions_pending_revocation)


def _next_assignment(
    member: ConsumerGroupMember,
    member_epoch: int,
    target_epoch: int,
    target: Assignment,
    subscribed: AbstractSet[uuid.UUID],
    partition_epoch: Callable[[uuid.UUID, int], int],
    owned: Assignment | None,
) -> ReconciledState:
    """Kafka's ``computeNextAssignment``."""
    new_assigned: Assignment = {}
    pending_revocation: Assignment = {}
    pending_assignment: Assignment = {}
    has_unreleased = False
    for topic_id in set(target) | set(member.assigned_partitions):
        wanted = target.get(topic_id, set()) if topic_id in subscribed else set()
        current = member.assigned_partitions.get(topic_id, set())
        keep = current & wanted
        revoke = current - keep
        to_assign = wanted - keep
        mine_pending = member.partitions_pending_revocation.get(topic_id, set())
        unreleased = {p for p in to_assign
                      if partition_epoch(topic_id, p) != NO_PARTITION_EPOCH and p not in mine_pending}
        if unreleased:
            has_unreleased = True
            to_assign -= unreleased
        if keep:
            new_assigned[topic_id] = keep
        if revoke:
            pending_revocation[topic_id] = revoke
        if to_assign:
            pending_assignment[topic_id] = to_assign
    if pending_revocation and _owns_any(owned, pending_revocation):
        epoch, previous = _epoch_update(member, member_epoch)
        return ReconciledState(epoch, previous, MemberState.UNREVOKED_PARTITIONS, new_assigned, pending_revocation)
    for topic_id, partitions in pending_assignment.items():
        new_assigned.setdefault(topic_id, set()).update(partitions)
    epoch, previous = _epoch_update(member, target_epoch)
    state = MemberState.UNRELEASED_PARTITIONS if has_unreleased else MemberState.STABLE
    return ReconciledState(epoch, previous, state, new_assigned, {})
