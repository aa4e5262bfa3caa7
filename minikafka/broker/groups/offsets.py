"""Committed offsets of the group coordinator.

Models Kafka's ``GroupCoordinator.handleCommitOffsets`` and
``handleFetchOffsets`` plus ``GroupMetadataManager.cleanupGroupMetadata``
(offset retention); commits and expiries are written to the ``__consumer_offsets`` log
(:mod:`.offset_log`).
For KIP-848 consumer groups the commits and fetches are validated as Kafka 4's
``OffsetMetadataManager`` does with ``ConsumerGroup.validateOffsetCommit`` and
``validateOffsetFetch`` (member epochs; classic members of the group send their
member epoch as the generation); their offsets are stored exactly as a classic
group's, and expire by commit time unless a member subscribes to the topic.
"""

from __future__ import annotations

from ...protocol.errors import ErrorCode
from ...common import TopicPartition
from .consumer.model import ConsumerGroup
from .core import CoordinatorCore, E, S, log
from .metadata import CONSUMER_PROTOCOL_TYPE, UNKNOWN_MEMBER_ID, GroupMetadata, OffsetAndMetadata
from .rebalance import validate_current_member

OFFSET_METADATA_MAX_SIZE = 4096  # offset.metadata.max.bytes


class OffsetMetadataManager:
    """OffsetCommit, TxnOffsetCommit, OffsetFetch, OffsetDelete and offset expiry of the groups of a coordinator
    (Kafka's ``OffsetMetadataManager``, a part of its ``GroupCoordinatorShard``): over ``core``, the groups and
    the ``__consumer_offsets`` records they are kept in."""

    def __init__(self, core: CoordinatorCore) -> None:
        self.core = core

    # -------------------------------------------------------- OffsetCommit

    def commit_offsets(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        offsets: dict[TopicPartition, OffsetAndMetadata],
        *,
        api_version: int = 8,
    ) -> dict[TopicPartition, ErrorCode]:
        """Kafka's ``handleCommitOffsets`` / ``OffsetMetadataManager.commitOffset``; per-partition errors.

        ``generation_id`` is the member epoch for a consumer group (KIP-848).  A commit with a
        generation to a group that does not exist gets GROUP_ID_NOT_FOUND from v9, ILLEGAL_GENERATION
        before, as Kafka answers."""

        def all_(err: ErrorCode) -> dict[TopicPartition, ErrorCode]:
            return {tp: err for tp in offsets}

        err = self.core._inactive_error(group_id, need_non_empty=False) or self.core._share_group_error(group_id)
        if err is not None:
            return all_(err)
        group = self.core.groups.get(group_id)
        if group is None:
            if generation_id >= 0:
                return all_(E.GROUP_ID_NOT_FOUND if api_version >= 9 else E.ILLEGAL_GENERATION)
            # A group that does not use group management: allow the commit.
            group = self.core.groups[group_id] = GroupMetadata(group_id, self.core._now_ms())
        if group.consumer is not None:
            err = validate_consumer_group_offset_commit(group.consumer, member_id, generation_id, api_version,
                                                        transactional=False)
            if err is not None:
                return all_(err)
            self.core._persist_group_metadata(group)
            return self._store_offsets(group, offsets)
        err = self._validate_offset_commit(group, generation_id, member_id, group_instance_id)
        if err is not None:
            return all_(err)
        if group.state == S.COMPLETING_REBALANCE:
            return all_(E.REBALANCE_IN_PROGRESS)
        if group.state in (S.STABLE, S.PREPARING_REBALANCE):
            self.core._schedule_heartbeat(group.get(member_id))
        return self._store_offsets(group, offsets)

    def _validate_offset_commit(self, group: GroupMetadata, generation_id: int, member_id: str,
                                group_instance_id: str | None) -> ErrorCode | None:
        if group.state == S.DEAD:
            return E.COORDINATOR_NOT_AVAILABLE
        if generation_id >= 0 or member_id != UNKNOWN_MEMBER_ID or group_instance_id is not None:
            err = validate_current_member(group, member_id, group_instance_id)
            if err is None and generation_id != group.generation_id:
                err = E.ILLEGAL_GENERATION
            return err
        if group.state != S.EMPTY:
            return E.UNKNOWN_MEMBER_ID  # only members may commit to a group with members
        return None

    def _store_offsets(
        self, group: GroupMetadata, offsets: dict[TopicPartition, OffsetAndMetadata]
    ) -> dict[TopicPartition, ErrorCode]:
        out: dict[TopicPartition, ErrorCode] = {}
        stored: dict[TopicPartition, OffsetAndMetadata] = {}
        before: dict[TopicPartition, OffsetAndMetadata | None] = {}
        for tp, om in offsets.items():
            if len(om.metadata) > OFFSET_METADATA_MAX_SIZE:
                out[tp] = E.OFFSET_METADATA_TOO_LARGE
                continue
            before[tp] = group.offsets.get(tp)
            group.offsets[tp] = stored[tp] = om
            out[tp] = E.NONE
        if self.core._log is not None and stored:
            self.core._log.commit_offsets(group.group_id, stored)
            self.core._remember_unreplicated(group.group_id, before, stored)
        return out

    # ---------------------------------------------------- TxnOffsetCommit

    def txn_commit_offsets(
        self,
        group_id: str,
        producer_id: int,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        offsets: dict[TopicPartition, OffsetAndMetadata],
        *,
        producer_epoch: int = -1,
    ) -> dict[TopicPartition, ErrorCode]:
        """Kafka's ``handleTxnCommitOffsets``: offsets held pending for the producer's transaction, written
        to the log in a transactional batch of the producer (``producer_epoch``).

        With group metadata (KIP-447: a generation, member id or instance id) the member is checked
        as for OffsetCommit, so a zombie from an older generation is fenced (ILLEGAL_GENERATION,
        UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID)."""
        err = self.core._inactive_error(group_id, need_non_empty=True)
        if err is not None:
            return {tp: err for tp in offsets}
        group = self.core.groups.get(group_id)
        if group is None:
            group = self.core.groups[group_id] = GroupMetadata(group_id, self.core._now_ms())
        if group.consumer is not None:
            # The generation carries the member epoch; a stale one is ILLEGAL_GENERATION here.
            err = validate_consumer_group_offset_commit(group.consumer, member_id, generation_id, 9,
                                                        transactional=True)
        elif generation_id >= 0 or member_id != UNKNOWN_MEMBER_ID or group_instance_id is not None:
            err = self._validate_offset_commit(group, generation_id, member_id, group_instance_id)
        elif group.state == S.DEAD:
            err = E.COORDINATOR_NOT_AVAILABLE
        if err is not None:
            return {tp: err for tp in offsets}
        out: dict[TopicPartition, ErrorCode] = {}
        pending = group.pending_txn_offsets.setdefault(producer_id, {})
        stored: dict[TopicPartition, OffsetAndMetadata] = {}
        for tp, om in offsets.items():
            if len(om.metadata) > OFFSET_METADATA_MAX_SIZE:
                out[tp] = E.OFFSET_METADATA_TOO_LARGE
                continue
            pending[tp] = stored[tp] = om
            out[tp] = E.NONE
        if self.core._log is not None and stored:
            self.core._log.commit_txn_offsets(group_id, producer_id, producer_epoch, stored)
        return out

    def complete_txn_partition(self, partition: int, producer_id: int, commit: bool) -> None:
        """The transaction ended for a ``__consumer_offsets`` partition (Kafka's ``scheduleHandleTxnCompletion``
        on the marker there): the producer's pending offsets in every group of the partition are committed or
        dropped, and the partition gets the transaction's marker once, even when its groups were deleted
        meanwhile or are not known yet (a transaction loaded at start-up, before the partition's shard)."""
        for gid, group in self.core.groups.items():
            if producer_id in group.pending_txn_offsets and self.core.partition_for(gid) == partition:
                pending = group.pending_txn_offsets.pop(producer_id)
                if commit:
                    group.offsets.update(pending)
        if self.core._log is not None:
            self.core._log.end_txn(partition, producer_id, commit)

    def txn_offset_groups(self, producer_id: int) -> set[str]:
        """The groups holding offsets of the producer's open transaction (the transaction coordinator finds
        a loaded transaction's groups by them)."""
        return {gid for gid, g in self.core.groups.items() if producer_id in g.pending_txn_offsets}

    def pending_txn_partitions(self, group_id: str) -> set[TopicPartition]:
        """Partitions with offsets in an open transaction (OffsetFetch ``require_stable``: UNSTABLE_OFFSET_COMMIT)."""
        group = self.core.groups.get(group_id)
        if group is None:
            return set()
        return {tp for pending in group.pending_txn_offsets.values() for tp in pending}

    # --------------------------------------------------------- OffsetFetch

    def fetch_offsets(
        self, group_id: str, partitions: list[TopicPartition] | None, require_stable: bool = False,
        *, member_id: str | None = None, member_epoch: int = -1,
    ) -> tuple[ErrorCode, dict[TopicPartition, OffsetAndMetadata | None]]:
        """Kafka's ``handleFetchOffsets``: ``partitions`` None means every committed one.

        An unknown partition maps to None (offset -1, metadata "", no error).  ``member_id`` and
        ``member_epoch`` (OffsetFetch v9+) are checked against a consumer group's members
        (``ConsumerGroup.validateOffsetFetch``); a classic group ignores them as Kafka does.
        """
        err = self.core._inactive_error(group_id, need_non_empty=False) or self.core._share_group_error(group_id)
        if err is not None:
            return err, {}
        group = self.core.groups.get(group_id)
        if group is None or group.state == S.DEAD:
            return E.NONE, {tp: None for tp in (partitions or [])}
        if group.consumer is not None:
            err = validate_consumer_group_offset_fetch(group.consumer, member_id, member_epoch)
            if err is not None:
                return err, {}
        offsets = self.core._replicated_offsets(group_id, group.offsets)
        if partitions is None:
            return E.NONE, dict(sorted((tp, om) for tp, om in offsets.items() if om is not None))
        return E.NONE, {tp: offsets.get(tp) for tp in partitions}

    # -------------------------------------------------------- OffsetDelete

    def delete_offsets(self, group_id: str, topics: dict[str, list[int]]
                       ) -> tuple[ErrorCode, dict[str, dict[int, ErrorCode]]]:
        """Kafka's ``GroupCoordinatorService.deleteOffsets`` / ``OffsetMetadataManager.deleteOffsets``.

        Group errors: COORDINATOR_NOT_AVAILABLE, INVALID_GROUP_ID (empty id), GROUP_ID_NOT_FOUND (no such
        classic or consumer group, a share group included), NON_EMPTY_GROUP (a classic group with members
        that does not use the consumer protocol: its subscriptions are unknown).  Otherwise each partition
        of a topic the group subscribes to gets GROUP_SUBSCRIBED_TO_TOPIC; the others lose their committed
        offset and any pending transactional one (a tombstone in ``__consumer_offsets``)."""
        if self.core._closed:
            return E.COORDINATOR_NOT_AVAILABLE, {}
        if not group_id:
            return E.INVALID_GROUP_ID, {}
        group = self.core.groups.get(group_id)
        if group is None or group.state == S.DEAD:
            return E.GROUP_ID_NOT_FOUND, {}
        if (group.consumer is None and group.state != S.EMPTY
                and group.protocol_type != CONSUMER_PROTOCOL_TYPE):  # ClassicGroup.validateOffsetDelete
            return E.NON_EMPTY_GROUP, {}
        out: dict[str, dict[int, ErrorCode]] = {}
        deleted: list[TopicPartition] = []
        for topic, partitions in topics.items():
            if is_subscribed_to_topic(group, topic):
                out[topic] = dict.fromkeys(partitions, E.GROUP_SUBSCRIBED_TO_TOPIC)
                continue
            out[topic] = dict.fromkeys(partitions, E.NONE)
            for p in partitions:
                tp = TopicPartition(topic, p)
                found = group.offsets.pop(tp, None) is not None
                for pending in group.pending_txn_offsets.values():
                    found = pending.pop(tp, None) is not None or found
                if found:
                    deleted.append(tp)
        if deleted:
            log.info("group %s: deleted the offsets of %d partition(s)", group_id, len(deleted))
            if self.core._log is not None:
                self.core._log.remove_offsets(group_id, deleted)
        return E.NONE, out

    # ---------------------------------------------------------- retention

    def cleanup_group_metadata(self) -> int:
        """Expire offsets past ``offsets.retention.minutes`` and drop Empty groups without offsets.

        Kafka's ``GroupMetadataManager.cleanupGroupMetadata``; returns the number
        of offsets removed.
        """
        now_ms = self.core._now_ms()
        retention_ms = self.core.config.offsets_retention_minutes * 60_000
        removed = 0
        for group in list(self.core.groups.values()):
            if group.consumer is not None:
                expired = expire_consumer_group_offsets(group, now_ms, retention_ms)
                empty = not group.consumer.members
            else:
                expired = group.remove_expired_offsets(now_ms, retention_ms)
                empty = group.state == S.EMPTY and not group.pending_members
            if expired:
                removed += len(expired)
                log.info("group %s: removed %d expired offsets", group.group_id, len(expired))
                if self.core._log is not None:
                    self.core._log.remove_offsets(group.group_id, expired)
            if empty and not group.offsets and not group.pending_txn_offsets:
                log.info("group %s is empty and has no offsets: removing it", group.group_id)
                self.core._remove_group(group)
        return removed


def validate_consumer_group_offset_commit(consumer: ConsumerGroup, member_id: str, member_epoch: int,
                                          api_version: int, transactional: bool) -> ErrorCode | None:
    """Kafka's ``ConsumerGroup.validateOffsetCommit`` with ``OffsetMetadataManager``'s error mapping.

    A negative epoch with an empty group is an admin or simple commit.  Otherwise the member must
    exist (UNKNOWN_MEMBER_ID); a KIP-848 member must use OffsetCommit v9+ (UNSUPPORTED_VERSION) and
    its current epoch (STALE_MEMBER_EPOCH); a classic member inside the group sends its member epoch
    as the generation (ILLEGAL_GENERATION).  TxnOffsetCommit answers ILLEGAL_GENERATION for a stale
    epoch of either kind."""
    if member_epoch < 0 and not consumer.members:
        return None
    member = consumer.members.get(member_id)
    if member is None:
        return E.UNKNOWN_MEMBER_ID
    if not transactional and not member.uses_classic_protocol and api_version < 9:
        return E.UNSUPPORTED_VERSION
    if member_epoch != member.member_epoch:
        if member.uses_classic_protocol or transactional:
            return E.ILLEGAL_GENERATION
        return E.STALE_MEMBER_EPOCH
    return None


def validate_consumer_group_offset_fetch(consumer: ConsumerGroup, member_id: str | None,
                                         member_epoch: int) -> ErrorCode | None:
    """Kafka's ``ConsumerGroup.validateOffsetFetch``: no member id and a negative epoch (admin clients,
    classic consumers) fetch freely; otherwise the member and its epoch must be current."""
    if member_id is None and member_epoch < 0:
        return None
    member = consumer.members.get(member_id) if member_id is not None else None
    if member is None:
        return E.UNKNOWN_MEMBER_ID
    if member_epoch != member.member_epoch:
        return E.ILLEGAL_GENERATION if member.uses_classic_protocol else E.STALE_MEMBER_EPOCH
    return None


def is_subscribed_to_topic(group: GroupMetadata, topic: str) -> bool:
    """Kafka's ``Group.isSubscribedToTopic``: a consumer group when a member subscribes to the topic (by name
    or through a regex); a classic group when its consumer-protocol members do, or, its subscriptions
    unknown, whenever it uses the consumer protocol."""
    if group.consumer is not None:
        return topic in group.consumer.subscribed_topic_names()
    if group.subscribed_topics is not None:
        return topic in group.subscribed_topics
    return group.protocol_type == CONSUMER_PROTOCOL_TYPE


def expire_consumer_group_offsets(group: GroupMetadata, now_ms: int, retention_ms: int) -> list[TopicPartition]:
    """Offsets of a consumer group past retention (Kafka's ``OffsetExpirationConditionImpl`` on the
    commit timestamp), except those of topics a member subscribes to; removes and returns them."""
    assert group.consumer is not None
    subscribed = group.consumer.subscribed_topic_names()
    keys = []
    for tp, om in group.offsets.items():
        if tp.topic in subscribed:
            continue
        if (now_ms >= om.expire_timestamp if om.expire_timestamp is not None
                else now_ms - om.commit_timestamp >= retention_ms):
            keys.append(tp)
    for tp in keys:
        del group.offsets[tp]
    return keys
