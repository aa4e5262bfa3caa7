"""A KIP-932 share group as the records Kafka keeps of it in ``__consumer_offsets``, and back.

:func:`group_records` is the group as Kafka's ``GroupCoordinatorRecordHelpers`` writes it: its subscribed topics'
metadata (ShareGroupPartitionMetadata), each member's metadata (ShareGroupMemberMetadata), its epoch
(ShareGroupMetadata), the target assignment's epoch and each member's target (ShareGroupTargetAssignmentMetadata /
Member), and each member's current assignment (ShareGroupCurrentMemberAssignment).  The share-group coordinator
writes what changed since it last wrote (:func:`~minikafka.broker.groups.consumer.records.changed_records`);
:func:`rebuild` makes the group from what a partition's replay left of its records.

Deliberate difference: the share-partitions a group initialized are not written (ShareGroupStatePartitionMetadata):
the share-partition leaders initialize a share-partition at its first fetch.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from ...protocol import modern_group_records as r
from ..groups.consumer.model import TopicImage
from ..groups.consumer.records import keyed, topics_metadata
from .group import MemberAssignment, ShareGroup, ShareGroupMember

Records = dict[tuple[type, r.ShareGroupRecordKey], r.ShareGroupRecordValue]
_STABLE = 0  # Kafka's MemberState.STABLE: a share group member has nothing to revoke


def _partitions(a: MemberAssignment) -> r.TopicPartitions:
    return tuple((t, tuple(sorted(ps))) for t, ps in sorted(a.items(), key=lambda item: item[0].int) if ps)


def group_records(group: ShareGroup) -> Records:
    """Every record the group is kept as."""
    return keyed(_group_records(group))


def _group_records(group: ShareGroup) -> Iterator[tuple[r.ShareGroupRecordKey, r.ShareGroupRecordValue]]:
    gid = group.group_id
    yield (r.ShareGroupPartitionMetadataKey(gid),
           r.ShareGroupPartitionMetadataValue(topics_metadata(group.subscription_metadata)))
    for m in group.members.values():
        yield r.ShareGroupMemberMetadataKey(gid, m.member_id), r.ShareGroupMemberMetadataValue(
            m.rack_id, m.client_id, m.client_host, tuple(m.subscribed_topic_names))
    yield r.ShareGroupMetadataKey(gid), r.ShareGroupMetadataValue(group.group_epoch)
    for mid, target in group.target_assignment.items():
        yield r.ShareGroupTargetAssignmentMemberKey(gid, mid), r.ShareGroupTargetAssignmentMemberValue(
            _partitions(target))
    yield (r.ShareGroupTargetAssignmentMetadataKey(gid),
           r.ShareGroupTargetAssignmentMetadataValue(group.assignment_epoch))
    for m in group.members.values():
        yield r.ShareGroupCurrentMemberAssignmentKey(gid, m.member_id), r.ShareGroupCurrentMemberAssignmentValue(
            m.member_epoch, m.previous_member_epoch, _STABLE, _partitions(m.assigned_partitions))


def rebuild(group_id: str, records: Mapping[tuple[type, Any], Any]) -> ShareGroup:
    """The group the records hold (members without session deadlines: the coordinator arms them)."""
    group = ShareGroup(group_id)
    currents: dict[str, r.ShareGroupCurrentMemberAssignmentValue] = {}
    for (_, key), value in records.items():
        if isinstance(value, r.ShareGroupPartitionMetadataValue):
            group.subscription_metadata = {name: TopicImage(tid, name, n) for tid, name, n in value.topics}
        elif isinstance(value, r.ShareGroupMemberMetadataValue):
            group.members[key.member_id] = ShareGroupMember(
                key.member_id, rack_id=value.rack_id, client_id=value.client_id, client_host=value.client_host,
                subscribed_topic_names=tuple(value.subscribed_topic_names))
        elif isinstance(value, r.ShareGroupMetadataValue):
            group.group_epoch = value.epoch
        elif isinstance(value, r.ShareGroupTargetAssignmentMetadataValue):
            group.assignment_epoch = value.assignment_epoch
        elif isinstance(value, r.ShareGroupTargetAssignmentMemberValue):
            group.target_assignment[key.member_id] = {t: set(ps) for t, ps in value.topic_partitions if ps}
        elif isinstance(value, r.ShareGroupCurrentMemberAssignmentValue):
            currents[key.member_id] = value
    for mid, current in currents.items():
        member = group.members.get(mid)
        if member is not None:
            member.member_epoch, member.previous_member_epoch = current.member_epoch, current.previous_member_epoch
            member.assigned_partitions = {t: set(ps) for t, ps in current.assigned_partitions if ps}
    group.target_assignment = {mid: a for mid, a in group.target_assignment.items() if mid in group.members}
    return group
