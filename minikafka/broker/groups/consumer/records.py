"""A KIP-848 consumer group as the records Kafka keeps of it in ``__consumer_offsets``, and back.

:func:`group_records` is the group as Kafka's ``GroupCoordinatorRecordHelpers`` writes it: its subscribed
topics' metadata (ConsumerGroupPartitionMetadata), each member's metadata (ConsumerGroupMemberMetadata), the
target assignment's epoch and each member's target (ConsumerGroupTargetAssignmentMetadata / Member), and each
member's current assignment (ConsumerGroupCurrentMemberAssignment); the group epoch is its
ConsumerGroupMetadata record, written with them.  The coordinator writes what changed since it last wrote
(:func:`changed_records`: upserts, then tombstones for the records of members gone).  :func:`rebuild` makes the
group from the records a partition's replay left (Kafka's ``GroupMetadataManager.replay`` then ``onLoaded``).

Deliberate differences: the regular expressions' resolutions are not written (Kafka 4 writes
ConsumerGroupRegularExpression records): a loaded group resolves them again from its subscribed topics; the
racks of partitions are not written (Kafka stopped using them in 4.0).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from ....protocol import modern_group_records as r
from .model import Assignment, ClassicMemberMetadata, ConsumerGroup, ConsumerGroupMember, MemberState, TopicImage
from .subscription import metadata_hash, resolve_regex

#: The records by :func:`record_id` (the keys of different record types are equal tuples: ``("g", "m")``).
Records = dict[tuple[type, r.ConsumerGroupRecordKey], r.ConsumerGroupRecordValue]


def record_id(key: r.ModernGroupRecordKey) -> tuple[type, r.ModernGroupRecordKey]:
    """What tells a record apart from another group record: its key and the key's type."""
    return type(key), key

#: Kafka's ``MemberState`` values in ConsumerGroupCurrentMemberAssignment records.
STATE_IDS = {MemberState.STABLE: 0, MemberState.UNREVOKED_PARTITIONS: 1, MemberState.UNRELEASED_PARTITIONS: 2,
             MemberState.UNKNOWN: 127}
STATES = {v: k for k, v in STATE_IDS.items()}


def _partitions(a: Assignment) -> r.TopicPartitions:
    return tuple((t, tuple(sorted(ps))) for t, ps in sorted(a.items(), key=lambda item: item[0].int) if ps)


def _assignment(parts: r.TopicPartitions) -> Assignment:
    return {t: set(ps) for t, ps in parts if ps}


def topics_metadata(images: Mapping[str, TopicImage]) -> tuple[tuple[uuid.UUID, str, int], ...]:
    """A group's subscribed topics as its PartitionMetadata record holds them: (id, name, partitions)."""
    return tuple((img.topic_id, img.name, img.num_partitions) for _, img in sorted(images.items()))


def keyed(records: Iterable[tuple[Any, Any]]) -> dict[tuple[type, Any], Any]:
    """``(key, value)`` records by :func:`record_id`."""
    return {(type(k), k): v for k, v in records}


def group_records(cg: ConsumerGroup) -> Records:
    """Every record the group is kept as besides its epoch, in the order Kafka writes them."""
    return keyed(_group_records(cg))


def _group_records(cg: ConsumerGroup) -> Iterator[tuple[r.ConsumerGroupRecordKey, r.ConsumerGroupRecordValue]]:
    gid = cg.group_id
    yield (r.ConsumerGroupPartitionMetadataKey(gid),
           r.ConsumerGroupPartitionMetadataValue(topics_metadata(cg.subscribed_topics)))
    for m in cg.members.values():
        classic = None
        if m.classic_protocols is not None:
            classic = r.ClassicMemberMetadataValue(m.classic_protocols.session_timeout_ms,
                                                   tuple(m.classic_protocols.supported_protocols))
        yield r.ConsumerGroupMemberMetadataKey(gid, m.member_id), r.ConsumerGroupMemberMetadataValue(
            m.instance_id, m.rack_id, m.client_id, m.client_host, tuple(m.subscribed_topic_names),
            m.subscribed_topic_regex, m.rebalance_timeout_ms, m.server_assignor, classic)
    for mid, target in cg.target_assignment.items():
        yield (r.ConsumerGroupTargetAssignmentMemberKey(gid, mid),
               r.ConsumerGroupTargetAssignmentMemberValue(_partitions(target)))
    yield (r.ConsumerGroupTargetAssignmentMetadataKey(gid),
           r.ConsumerGroupTargetAssignmentMetadataValue(cg.assignment_epoch))
    for m in cg.members.values():
        yield r.ConsumerGroupCurrentMemberAssignmentKey(gid, m.member_id), r.ConsumerGroupCurrentMemberAssignmentValue(
            m.member_epoch, m.previous_member_epoch, STATE_IDS[m.state], _partitions(m.assigned_partitions),
            _partitions(m.partitions_pending_revocation))


def changed_records(before: Mapping[Any, Any], now: Mapping[Any, Any]
                    ) -> list[tuple[r.ModernGroupRecordKey, r.ModernGroupRecordValue | None]]:
    """What to write to go from ``before`` to ``now``: each new or changed record, then a tombstone for each one
    gone (a member's current assignment first, its metadata last, as Kafka removes a member)."""
    out: list[tuple[r.ModernGroupRecordKey, r.ModernGroupRecordValue | None]] = [
        (rid[1], v) for rid, v in now.items() if before.get(rid) != v]
    gone = [rid for rid in before if rid not in now]
    out += [(rid[1], None) for rid in sorted(gone, key=lambda rid: _TOMBSTONE_ORDER.get(rid[0], 2))]
    return out


# Tombstones go as Kafka writes them: a member's current assignment, then its target, then the rest, a share
# group's epoch last.
_TOMBSTONE_ORDER: dict[type, int] = {
    r.ConsumerGroupCurrentMemberAssignmentKey: 0, r.ShareGroupCurrentMemberAssignmentKey: 0,
    r.ConsumerGroupTargetAssignmentMemberKey: 1, r.ShareGroupTargetAssignmentMemberKey: 1,
    r.ShareGroupMetadataKey: 3}


def rebuild(group_id: str, epoch: int, records: Records) -> ConsumerGroup:
    """The group the records hold (members without timers: the coordinator arms them)."""
    cg = ConsumerGroup(group_id)
    cg.group_epoch = epoch
    cg.assignment_epoch = epoch
    currents: dict[str, r.ConsumerGroupCurrentMemberAssignmentValue] = {}
    for (_, key), value in records.items():
        if isinstance(value, r.ConsumerGroupPartitionMetadataValue):
            cg.subscribed_topics = {name: TopicImage(tid, name, n) for tid, name, n in value.topics}
        elif isinstance(value, r.ConsumerGroupMemberMetadataValue):
            assert isinstance(key, r.ConsumerGroupMemberMetadataKey)
            cg.members[key.member_id] = _member(key.member_id, value)
        elif isinstance(value, r.ConsumerGroupTargetAssignmentMetadataValue):
            cg.assignment_epoch = value.assignment_epoch
        elif isinstance(value, r.ConsumerGroupTargetAssignmentMemberValue):
            assert isinstance(key, r.ConsumerGroupTargetAssignmentMemberKey)
            cg.target_assignment[key.member_id] = _assignment(value.topic_partitions)
        elif isinstance(value, r.ConsumerGroupCurrentMemberAssignmentValue):
            assert isinstance(key, r.ConsumerGroupCurrentMemberAssignmentKey)
            currents[key.member_id] = value
    for mid, current in currents.items():
        member = cg.members.get(mid)
        if member is None:
            continue  # (Kafka writes a member's metadata first: a current assignment alone is a leftover)
        member.member_epoch, member.previous_member_epoch = current.member_epoch, current.previous_member_epoch
        member.state = STATES.get(current.state, MemberState.UNKNOWN)
        member.assigned_partitions = _assignment(current.assigned_partitions)
        member.partitions_pending_revocation = _assignment(current.partitions_pending_revocation)
        cg.add_partition_epochs(member.assigned_partitions, member.member_epoch)
        cg.add_partition_epochs(member.partitions_pending_revocation, member.member_epoch)
    cg.target_assignment = {mid: a for mid, a in cg.target_assignment.items() if mid in cg.members}
    cg.static_members = {m.instance_id: m.member_id for m in cg.members.values() if m.instance_id is not None}
    cg.metadata_hash = metadata_hash(cg.subscribed_topics)
    names = set(cg.subscribed_topics)
    for regex in {m.subscribed_topic_regex for m in cg.members.values() if m.subscribed_topic_regex}:
        cg.resolved_regexes[regex] = resolve_regex(regex, names)
    return cg


def _member(member_id: str, value: r.ConsumerGroupMemberMetadataValue) -> ConsumerGroupMember:
    cm = value.classic_member_metadata
    return ConsumerGroupMember(
        member_id, instance_id=value.instance_id, rack_id=value.rack_id, client_id=value.client_id,
        client_host=value.client_host, rebalance_timeout_ms=value.rebalance_timeout_ms,
        subscribed_topic_names=list(value.subscribed_topic_names), subscribed_topic_regex=value.subscribed_topic_regex,
        server_assignor=value.server_assignor, classic_protocols=None if cm is None else ClassicMemberMetadata(
            cm.session_timeout_ms, list(cm.supported_protocols)))

