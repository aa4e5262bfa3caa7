"""Committed offsets of the group coordinator.

Models Kafka's ``GroupCoordinator.handleCommitOffsets`` and
``handleFetchOffsets`` plus ``GroupMetadataManager.cleanupGroupMetadata``
(offset retention); commits and expiries are appended to :mod:`.offset_log`.
"""

from __future__ import annotations

from ...protocol.errors import ErrorCode
from ...common import TopicPartition
from .core import E, S, log
from .metadata import UNKNOWN_MEMBER_ID, GroupMetadata, OffsetAndMetadata
from .offset_log import offset_record, tombstone_record, txn_end_record, txn_offset_record
from .rebalance import RebalanceMixin

OFFSET_METADATA_MAX_SIZE = 4096  # offset.metadata.max.bytes


class OffsetsMixin(RebalanceMixin):
    """OffsetCommit, OffsetFetch and offset expiry."""

    # -------------------------------------------------------- OffsetCommit

    def commit_offsets(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        offsets: dict[TopicPartition, OffsetAndMetadata],
    ) -> dict[TopicPartition, ErrorCode]:
        """Kafka's ``handleCommitOffsets``; per-partition errors."""

        def all_(err: ErrorCode) -> dict[TopicPartition, ErrorCode]:
            return {tp: err for tp in offsets}

        err = self._inactive_error(group_id, need_non_empty=False)
        if err is not None:
            return all_(err)
        group = self.groups.get(group_id)
        if group is None:
            if generation_id >= 0:
                return all_(E.ILLEGAL_GENERATION)
            # A group that does not use group management: allow the commit.
            group = self.groups[group_id] = GroupMetadata(group_id, self._now_ms())
        err = self._validate_offset_commit(group, generation_id, member_id, group_instance_id)
        if err is not None:
            return all_(err)
        if group.state == S.COMPLETING_REBALANCE:
            return all_(E.REBALANCE_IN_PROGRESS)
        if group.state in (S.STABLE, S.PREPARING_REBALANCE):
            self._schedule_heartbeat(group.get(member_id))
        return self._store_offsets(group, offsets)

    def _validate_offset_commit(self, group: GroupMetadata, generation_id: int, member_id: str,
                                group_instance_id: str | None) -> ErrorCode | None:
        if group.state == S.DEAD:
            return E.COORDINATOR_NOT_AVAILABLE
        if generation_id >= 0 or member_id != UNKNOWN_MEMBER_ID or group_instance_id is not None:
            err = self._validate_current_member(group, member_id, group_instance_id)
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
        records = []
        for tp, om in offsets.items():
            if len(om.metadata) > OFFSET_METADATA_MAX_SIZE:
                out[tp] = E.OFFSET_METADATA_TOO_LARGE
                continue
            group.offsets[tp] = om
            records.append(offset_record(group.group_id, tp[0], tp[1], om))
            out[tp] = E.NONE
        self._persist(records)
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
    ) -> dict[TopicPartition, ErrorCode]:
        """Kafka's ``handleTxnCommitOffsets``: offsets held pending for the producer's transaction.

        With group metadata (KIP-447: a generation, member id or instance id) the member is checked
        as for OffsetCommit, so a zombie from an older generation is fenced (ILLEGAL_GENERATION,
        UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID)."""
        err = self._inactive_error(group_id, need_non_empty=True)
        if err is not None:
            return {tp: err for tp in offsets}
        group = self.groups.get(group_id)
        if group is None:
            group = self.groups[group_id] = GroupMetadata(group_id, self._now_ms())
        if generation_id >= 0 or member_id != UNKNOWN_MEMBER_ID or group_instance_id is not None:
            err = self._validate_offset_commit(group, generation_id, member_id, group_instance_id)
        elif group.state == S.DEAD:
            err = E.COORDINATOR_NOT_AVAILABLE
        if err is not None:
            return {tp: err for tp in offsets}
        out: dict[TopicPartition, ErrorCode] = {}
        pending = group.pending_txn_offsets.setdefault(producer_id, {})
        records = []
        for tp, om in offsets.items():
            if len(om.metadata) > OFFSET_METADATA_MAX_SIZE:
                out[tp] = E.OFFSET_METADATA_TOO_LARGE
                continue
            pending[tp] = om
            records.append(txn_offset_record(group_id, producer_id, tp[0], tp[1], om))
            out[tp] = E.NONE
        self._persist(records)
        return out

    def complete_txn_offsets(self, group_id: str, producer_id: int, commit: bool) -> None:
        """The transaction ended (Kafka's ``scheduleHandleTxnCompletion``): its offsets are committed or dropped."""
        group = self.groups.get(group_id)
        pending = group.pending_txn_offsets.pop(producer_id, None) if group is not None else None
        if group is None or pending is None:
            return
        self._persist([txn_end_record(group_id, producer_id, commit)])
        if commit:
            group.offsets.update(pending)

    def pending_txn_partitions(self, group_id: str) -> set[TopicPartition]:
        """Partitions with offsets in an open transaction (OffsetFetch ``require_stable``: UNSTABLE_OFFSET_COMMIT)."""
        group = self.groups.get(group_id)
        if group is None:
            return set()
        return {tp for pending in group.pending_txn_offsets.values() for tp in pending}

    # --------------------------------------------------------- OffsetFetch

    def fetch_offsets(
        self, group_id: str, partitions: list[TopicPartition] | None, require_stable: bool = False
    ) -> tuple[ErrorCode, dict[TopicPartition, OffsetAndMetadata | None]]:
        """Kafka's ``handleFetchOffsets``: ``partitions`` None means every committed one.

        An unknown partition maps to None (offset -1, metadata "", no error).
        """
        err = self._inactive_error(group_id, need_non_empty=False)
        if err is not None:
            return err, {}
        group = self.groups.get(group_id)
        if group is None or group.state == S.DEAD:
            return E.NONE, {tp: None for tp in (partitions or [])}
        if partitions is None:
            return E.NONE, dict(sorted(group.offsets.items()))
        return E.NONE, {tp: group.offsets.get(tp) for tp in partitions}

    # ---------------------------------------------------------- retention

    def cleanup_group_metadata(self) -> int:
        """Expire offsets past ``offsets.retention.minutes`` and drop Empty groups without offsets.

        Kafka's ``GroupMetadataManager.cleanupGroupMetadata``; returns the number
        of offsets removed.
        """
        now_ms = self._now_ms()
        retention_ms = self.config.offsets_retention_minutes * 60_000
        removed = 0
        for group in list(self.groups.values()):
            expired = group.remove_expired_offsets(now_ms, retention_ms)
            if expired:
                removed += len(expired)
                log.info("group %s: removed %d expired offsets", group.group_id, len(expired))
                self._persist([tombstone_record(group.group_id, t, p) for t, p in expired])
            if group.state == S.EMPTY and not group.offsets and not group.pending_members:
                log.info("group %s is empty and has no offsets: removing it", group.group_id)
                self._remove_group(group)
        return removed
