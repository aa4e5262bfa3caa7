"""State and plumbing shared by every part of the group coordinator.

:class:`CoordinatorCore` is the in-memory half of Kafka's
``GroupMetadataManager`` (the group cache, loading it from and writing its
records to the ``__consumer_offsets`` log of :mod:`.offset_log`) plus the clocks, the timer loop's wake-up hook and
``validateGroupStatus``.  The request handling is done by the parts
:class:`~.coordinator.GroupCoordinator` composes with it (:mod:`.offsets`, :mod:`.rebalance`, :mod:`.join`,
:mod:`.membership`, :mod:`.consumer`, :mod:`.admin`, :mod:`.timers`), each given this core.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Callable, Protocol

from ...common import OffsetAndMetadata, TopicPartition
from ...common.clock import SYSTEM_CLOCK, Clock
from ...protocol.errors import ErrorCode
from ..config import BrokerConfig
from ..deadline_loop import DeadlineLoop
from .consumer.model import ConsumerGroup, ConsumerGroupState, MemberState
from .metadata import (
    CONSUMER_PROTOCOL_TYPE,
    GROUP_TYPE_CLASSIC,
    GROUP_TYPE_CONSUMER,
    GroupMetadata,
    GroupState,
    JoinResult,
    MemberMetadata,
    SyncResult,
)
from ...protocol.coordinator_records import GroupMemberMetadata
from .consumer import records as consumer_records
from ..coordinator_log import OFFSETS_TOPIC, compacted_log_config
from ..log.cleaner_manager import CleanerTarget
from .offset_log import ConsumerRecordChanges, LoadedGroup, ModernRecords, OffsetLog
from ..coordinator_runtime import CoordinatorShards, Shard, ShardedCoordinator, ShardState
from ...common.hashing import partition_for_key

# One logger for the whole coordinator, whichever module of it logs.
log = logging.getLogger("minikafka.broker.groups.coordinator")

E = ErrorCode
S = GroupState

DEFAULT_RETENTION_CHECK_INTERVAL_S = 600.0  # offsets.retention.check.interval.ms



def _replicated_value(base: OffsetAndMetadata | None, entries: list[tuple[int, OffsetAndMetadata]], hw: int
                      ) -> tuple[OffsetAndMetadata | None, list[tuple[int, OffsetAndMetadata]]]:
    """The value of a committed offset below the high watermark ``hw``, and the writes still above it."""
    while entries and entries[0][0] < hw:
        base = entries.pop(0)[1]
    return base, entries


def _dismiss_members(group: GroupMetadata) -> None:
    """This coordinator no longer has the group: a JoinGroup or SyncGroup its members wait on is answered
    NOT_COORDINATOR (they find the coordinator again)."""
    for member in group.members.values():
        member.resolve_join(JoinResult(member.member_id, E.NOT_COORDINATOR))
        member.resolve_sync(SyncResult(E.NOT_COORDINATOR))


def _member_records(group: GroupMetadata) -> tuple[GroupMemberMetadata, ...]:
    """The members of a Stable classic group as its GroupMetadata record holds them (Kafka's ``storeGroup``):
    their subscription for the group's protocol and their assignment."""
    if group.state != GroupState.STABLE or group.protocol_name is None:
        return ()
    protocol = group.protocol_name
    return tuple(GroupMemberMetadata(m.member_id, m.client_id, m.client_host, m.session_timeout_ms,
                                     m.metadata(protocol), m.assignment, m.rebalance_timeout_ms, m.group_instance_id)
                 for m in group.members.values())


def _record_of(group_type: str, generation: int, protocol: str | None = None, leader: str | None = None,
               members: tuple[GroupMemberMetadata, ...] = ()) -> tuple[object, ...]:
    """What a group's metadata record says (to write it only when that changed)."""
    return (group_type, generation, protocol, leader, members) if members else (group_type, generation)


def _generation(group: GroupMetadata) -> int:
    """A classic group's generation, a consumer group's group epoch (what its metadata record holds)."""
    return group.consumer.group_epoch if group.consumer is not None else group.generation_id


class ShareGroupShards(Protocol):
    """The share-group coordinator, as the group coordinator's shards tell it of the share groups they hold."""

    def load_partition(self, partition: int, groups: dict[str, ModernRecords]) -> None:
        """The partition loaded: ``groups`` are its share groups, by group id, with their records."""
        ...

    def unload_partition(self, partition: int) -> None:
        """The partition is no longer loaded here: its share groups go."""
        ...


class CoordinatorCore(ShardedCoordinator):
    """The group cache, clocks and offsets-log glue of :class:`~.coordinator.GroupCoordinator`."""

    internal_topic = OFFSETS_TOPIC

    def __init__(
        self,
        config: BrokerConfig,
        data_dir: Path | None,
        clock: Callable[[], float] = SYSTEM_CLOCK.monotonic,
        *,
        wall_clock: Clock = SYSTEM_CLOCK,
        retention_check_interval_s: float = DEFAULT_RETENTION_CHECK_INTERVAL_S,
    ) -> None:
        self.config = config
        self.clock = clock
        self.wall_clock = wall_clock
        self.retention_check_interval_s = retention_check_interval_s
        self.groups: dict[str, GroupMetadata] = {}
        # Whether a group id names a share group (one namespace with the share-group coordinator's groups).
        self.share_group_exists: Callable[[str], bool] = self._share_group_pending
        # KIP-932 share groups live on the same partitions, kept by the share-group coordinator (built at their
        # first use, then attached: attach_share_groups): each load hands it the share groups it found, each
        # unload tells it.  What loads found before it was attached waits here, by partition.
        self.share_groups: ShareGroupShards | None = None
        self._share_loaded: dict[int, dict[str, ModernRecords]] = {}
        self._closed = False
        self._timer = DeadlineLoop(clock)  # session, join, sync and rebalance deadlines; offset retention
        self._next_cleanup = clock() + retention_check_interval_s
        self._log: OffsetLog | None = None
        if data_dir is not None:
            log_config = compacted_log_config(config.offsets_topic_segment_bytes, config.topic_defaults())
            self._log = OffsetLog(Path(data_dir), clock=wall_clock, config=log_config)
        # What each group's metadata record last written by _persist_group_metadata said (see _record_of).
        self._persisted_meta: dict[str, tuple[object, ...]] = {}
        # With the coordinator runtime (use_partitions): which broker has each __consumer_offsets partition's
        # shard loaded; the groups of every loaded shard are in self.groups.
        # Offsets committed and not yet replicated, per group: partition -> (the value before them, then each
        # (log offset of its record, value)); OffsetFetch reads what is replicated (Kafka's committed snapshot).
        self._unreplicated: dict[str, dict[TopicPartition, tuple[OffsetAndMetadata | None,
                                                                 list[tuple[int, OffsetAndMetadata]]]]] = {}
        # The member and assignment records of each consumer group as last written (what the next write changes).
        self._consumer_written: dict[str, consumer_records.Records] = {}
        # Groups of an earlier version's local log, written to their partitions as those load (use_partitions).
        self._legacy: dict[str, LoadedGroup] = {}
        if self._log is not None:
            self._load()

    # ------------------------------------------------------------------ the coordinator runtime

    def use_partitions(self) -> None:
        """Keep the groups on the partitions of the replicated ``__consumer_offsets`` topic (Kafka 4's coordinator
        runtime): each partition's shard is loaded on its leader (:meth:`on_election`), writes go to that
        replica, and it is unloaded when leadership moves (:meth:`on_resignation`).  What a coordinator used on
        its own kept in a local log (``<data_dir>/__consumer_offsets-0``, earlier versions) is carried over: each
        group is written to its partition when that is first loaded, and the local log removed once all are."""
        if self._log is not None:
            self._log.close()
            self._legacy = {gid: self._loaded_state(g) for gid, g in self.groups.items()}
            self._legacy_dir = self._log.dir
            self.groups.clear()
            self._persisted_meta.clear()
            if not self._legacy:
                self._drop_legacy_dir()
        self.shards = CoordinatorShards()
        self._log = OffsetLog(None, clock=self.wall_clock, shards=self.shards, partition_for=self.partition_for)

    def partition_for(self, group_id: str) -> int:
        """The group's ``__consumer_offsets`` partition (Kafka's ``partitionFor``)."""
        return partition_for_key(group_id, self.config.offsets_topic_num_partitions)

    def coordinator_error(self, group_id: str, broker_id: int) -> ErrorCode:
        """NONE when broker ``broker_id`` has the group's shard loaded (always, without the runtime);
        COORDINATOR_LOAD_IN_PROGRESS while it loads it; NOT_COORDINATOR otherwise."""
        if self.shards is None:
            return E.NONE
        return self.shards.error_for(self.partition_for(group_id), broker_id) or E.NONE

    async def replicated(self, group_id: str) -> ErrorCode:
        """Wait until the group's records written so far are replicated (``offsets.commit.timeout.ms``)."""
        assert self._log is not None or self.shards is None
        pending = self._log.pending_write(group_id) if self._log is not None else None
        if pending is None:
            return E.NONE
        shard, offset = pending
        return await shard.replica.wait_replicated(offset, self.config.offsets_commit_timeout_ms / 1000)

    def _remember_unreplicated(self, group_id: str, before: dict[TopicPartition, OffsetAndMetadata | None],
                               stored: dict[TopicPartition, OffsetAndMetadata]) -> None:
        """Offsets just written for ``group_id`` (their record's offset is the partition's last written): until
        the high watermark passes it, OffsetFetch answers the values ``before`` them."""
        assert self._log is not None
        pending = self._log.pending_write(group_id)
        if pending is None:
            return
        shard, log_offset = pending
        hw = shard.replica.log.high_watermark
        if log_offset < hw:
            return  # replicated already (an unreplicated partition)
        history = self._unreplicated.setdefault(group_id, {})
        for tp, om in stored.items():
            base, entries = _replicated_value(*history.get(tp, (before.get(tp), [])), hw)
            entries.append((log_offset, om))
            history[tp] = (base, entries)

    def _replicated_offsets(self, group_id: str, offsets: dict[TopicPartition, OffsetAndMetadata]
                            ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """``offsets`` as far as they are replicated: a value whose record the high watermark has not passed yet
        reads as the one before it (Kafka's reads of the committed snapshot: a value a failover could lose is
        never seen)."""
        history = self._unreplicated.get(group_id)
        if not history:
            return dict(offsets)
        shard = self.shards.get(self.partition_for(group_id)) if self.shards is not None else None
        hw = shard.replica.log.high_watermark if shard is not None else 0
        out: dict[TopicPartition, OffsetAndMetadata | None] = dict(offsets)
        for tp in list(history):
            base, entries = _replicated_value(*history[tp], hw)
            if entries:
                out[tp] = base
            else:
                del history[tp]
        if not history:
            del self._unreplicated[group_id]
        return out

    def _load_shard(self, shard: Shard) -> None:
        """Install the groups of the partition's records, members and assignments included."""
        assert self._log is not None
        if self._superseded(shard):
            return
        for gid, loaded in self._log.load_partition(shard.replica).items():
            self._install(gid, loaded)
        self._hand_share_groups(shard.partition, self._log.loaded_share_groups)
        shard.state = ShardState.ACTIVE
        if self._legacy:
            self._carry_over(shard.partition)

    def _carry_over(self, partition: int) -> None:
        """Write the groups of an earlier version's local log that belong to ``partition`` into it (those it
        does not hold yet); the local log goes once every group is carried over."""
        assert self._log is not None
        for gid in [g for g in self._legacy if self.partition_for(g) == partition]:
            loaded = self._legacy.pop(gid)
            if gid in self.groups:
                continue
            if loaded.group_type != GROUP_TYPE_CLASSIC or loaded.generation_id or loaded.protocol_type is not None:
                self._log.write_group_metadata(gid, loaded.group_type, loaded.protocol_type, loaded.generation_id,
                                               protocol=loaded.protocol, leader=loaded.leader, members=loaded.members,
                                               consumer_records=[(k, v) for (_, k), v in
                                                                 loaded.consumer_records.items()])
            if loaded.offsets:
                self._log.commit_offsets(gid, loaded.offsets)
            self._install(gid, loaded)
        if not self._legacy:
            self._drop_legacy_dir()

    def _loaded_state(self, group: GroupMetadata) -> LoadedGroup:
        """What replay would recover of ``group`` (its type, generation, protocol type and offsets)."""
        return LoadedGroup(group.protocol_type, _generation(group), group.group_type, dict(group.offsets),
                           protocol=group.protocol_name, leader=group.leader_id, members=_member_records(group),
                           consumer_records=consumer_records.group_records(group.consumer)
                           if group.consumer is not None else {})

    # ------------------------------------------------------------------ share groups (KIP-932)

    def attach_share_groups(self, shards: ShareGroupShards) -> None:
        """The share-group coordinator is built: it takes the share groups loaded so far and those to come."""
        self.share_groups = shards
        pending, self._share_loaded = self._share_loaded, {}
        for partition, groups in pending.items():
            shards.load_partition(partition, groups)

    def has_share_groups(self) -> bool:
        """Whether loads found share groups no share-group coordinator took yet."""
        return any(self._share_loaded.values())

    def _share_group_pending(self, group_id: str) -> bool:
        return any(group_id in groups for groups in self._share_loaded.values())

    def _hand_share_groups(self, partition: int, groups: dict[str, ModernRecords]) -> None:
        if self.share_groups is not None:
            self.share_groups.load_partition(partition, groups)
        elif groups:
            self._share_loaded[partition] = groups

    def write_share_records(self, group_id: str, records: ConsumerRecordChanges) -> None:
        """A share group's records (or tombstones), where the group's records go."""
        if self._log is not None:
            self._log.write_records(group_id, records)

    def _unload_shard(self, partition: int) -> None:
        """Drop a shard and its groups' in-memory state (members waiting on a join or sync are answered
        NOT_COORDINATOR, as Kafka's ``onResignation``)."""
        assert self.shards is not None
        if self.shards.shards.pop(partition, None) is None:
            return
        self._share_loaded.pop(partition, None)
        if self.share_groups is not None:
            self.share_groups.unload_partition(partition)
        for gid in [g for g in self.groups if self.partition_for(g) == partition]:
            group = self.groups.pop(gid)
            self._persisted_meta.pop(gid, None)
            self._consumer_written.pop(gid, None)
            self._unreplicated.pop(gid, None)
            _dismiss_members(group)
        log.info("unloaded the groups of __consumer_offsets-%d", partition)

    # ------------------------------------------------------------------ infra

    def _now_ms(self) -> int:
        return self.wall_clock.time_ms()

    def _deadline(self, timeout_ms: int) -> float:
        return self.clock() + timeout_ms / 1000.0

    def _schedule_heartbeat(self, member: MemberMetadata, timeout_ms: int | None = None) -> None:
        """Kafka's ``completeAndScheduleNextExpiration``."""
        member.heartbeat_deadline = self._deadline(member.session_timeout_ms if timeout_ms is None else timeout_ms)
        self._schedule(member.heartbeat_deadline)

    def _schedule(self, deadline: float) -> None:
        """Wake the timer loop if ``deadline`` is earlier than its planned wake-up."""
        self._timer.schedule(deadline)

    def _load(self) -> None:
        assert self._log is not None
        for gid, loaded in self._log.load().items():
            self._install(gid, loaded)
        self._hand_share_groups(0, self._log.loaded_share_groups)

    def _install(self, gid: str, loaded: LoadedGroup) -> None:
        """A group as replay recovered it, as Kafka's ``GroupMetadataManager.replay`` and ``onLoaded`` rebuild it:
        a classic group with members in its record comes back Stable with them, their subscriptions and
        assignments; a consumer group with its members, target assignment and each member's current assignment.
        Every member gets a fresh session to heartbeat in."""
        group = GroupMetadata(gid, self._now_ms())
        group.current_state_timestamp = None  # retention counts from commit times
        group.protocol_type = loaded.protocol_type
        group.generation_id = loaded.generation_id
        group.offsets = loaded.offsets
        group.pending_txn_offsets = loaded.pending_txn_offsets
        if loaded.group_type == GROUP_TYPE_CONSUMER:
            consumer = consumer_records.rebuild(gid, loaded.generation_id, loaded.consumer_records)
            self._arm_consumer_members(consumer)
            consumer.update_state(self._now_ms())
            group.group_type, group.consumer = GROUP_TYPE_CONSUMER, consumer
            group.protocol_type = CONSUMER_PROTOCOL_TYPE
            self._consumer_written[gid] = dict(loaded.consumer_records)
        elif loaded.members and loaded.protocol is not None:
            self._install_members(group, loaded)
        self._persisted_meta[gid] = _record_of(loaded.group_type, loaded.generation_id, loaded.protocol,
                                               loaded.leader, loaded.members)
        self.groups[gid] = group

    def _arm_consumer_members(self, cg: ConsumerGroup) -> None:
        """Kafka's ``onLoaded`` for a consumer group: a session timer for every member (a classic one's own
        session timeout), a rebalance timer for those that still have partitions to revoke."""
        for m in cg.members.values():
            session_ms = (m.classic_protocols.session_timeout_ms if m.classic_protocols is not None
                          else self.config.group_consumer_session_timeout_ms)
            m.session_deadline = self._deadline(session_ms)
            self._schedule(m.session_deadline)
            if m.state == MemberState.UNREVOKED_PARTITIONS and m.classic_protocols is None:
                m.rebalance_deadline = self._deadline(m.rebalance_timeout_ms)
                m.rebalance_deadline_epoch = m.member_epoch
                self._schedule(m.rebalance_deadline)

    def _install_members(self, group: GroupMetadata, loaded: LoadedGroup) -> None:
        """The members of a Stable classic group's record, each with a fresh session."""
        assert loaded.protocol is not None
        for rec in loaded.members:
            rebalance_timeout = rec.rebalance_timeout if rec.rebalance_timeout >= 0 else rec.session_timeout
            member = MemberMetadata(rec.member_id, rec.group_instance_id, rec.client_id, rec.client_host,
                                    rebalance_timeout, rec.session_timeout, group.protocol_type or "",
                                    [(loaded.protocol, rec.subscription)])
            member.assignment = rec.assignment
            group.add(member, None)
            self._schedule_heartbeat(member)
        if loaded.leader in group.members:
            group.leader_id = loaded.leader
        group.protocol_name = loaded.protocol
        group.subscribed_topics = group.compute_subscribed_topics()
        group.state = GroupState.STABLE

    def _persist_group_metadata(self, group: GroupMetadata) -> None:
        """Write what changed of the group since last written, in one batch: a classic group's GroupMetadata
        record (its generation and, once Stable, its protocol, leader and members with their subscriptions and
        assignments, as Kafka's ``storeGroup``); a consumer group's ConsumerGroupMetadata record (its group
        epoch) and its member, subscription and assignment records (:mod:`.consumer.records`), or the tombstones
        of those of a consumer group that became a classic one."""
        gid = group.group_id
        group_type, protocol, leader = GROUP_TYPE_CONSUMER, None, None
        members: tuple[GroupMemberMetadata, ...] = ()
        if group.consumer is None:
            group_type, protocol, leader = GROUP_TYPE_CLASSIC, group.protocol_name, group.leader_id
            members = _member_records(group)
            now: consumer_records.Records = {}
        else:
            now = consumer_records.group_records(group.consumer)
        changes = consumer_records.changed_records(self._consumer_written.get(gid, {}), now)
        if now:
            self._consumer_written[gid] = now
        else:
            self._consumer_written.pop(gid, None)
        meta = _record_of(group_type, _generation(group), protocol, leader, members)
        changed = self._persisted_meta.get(gid) != meta
        if not changed and not changes:
            return
        self._persisted_meta[gid] = meta
        if self._log is not None:
            state_ts = group.current_state_timestamp
            self._log.write_group_metadata(gid, group_type, group.protocol_type, _generation(group),
                                           -1 if state_ts is None else state_ts, protocol=protocol, leader=leader,
                                           members=members, consumer_records=changes, metadata=changed)

    def _inactive_error(self, group_id: str | None, need_non_empty: bool) -> ErrorCode | None:
        """Kafka's ``validateGroupStatus``."""
        if group_id is None or (need_non_empty and group_id == ""):
            return E.INVALID_GROUP_ID
        if self._closed:
            return E.COORDINATOR_NOT_AVAILABLE
        return None

    def _share_group_error(self, group_id: str) -> ErrorCode | None:
        """GROUP_ID_NOT_FOUND when ``group_id`` is a share group this coordinator does not hold."""
        if group_id not in self.groups and self.share_group_exists(group_id):
            return E.GROUP_ID_NOT_FOUND
        return None

    def get_group(self, group_id: str) -> GroupMetadata | None:
        return self.groups.get(group_id)

    def close(self) -> None:
        """Stop the timer loop, answer pending requests with NOT_COORDINATOR, close the log."""
        if self._closed:
            return
        self._closed = True
        for group in self.groups.values():
            _dismiss_members(group)
        self._timer.close()
        if self._log is not None:
            self._log.close()

    def now_ms(self) -> int:
        """Wall-clock milliseconds, as stamped on offset commits."""
        return self._now_ms()

    def cleaner_targets(self) -> list[CleanerTarget]:
        """The ``__consumer_offsets`` log for the log cleaner (none without a data dir)."""
        return self._log.cleaner_targets() if self._log is not None else []

    def _remove_group(self, group: GroupMetadata) -> None:
        """The group is deleted or expired: tombstones for its offsets and metadata."""
        offsets = list(group.offsets)
        group.transition_to(S.DEAD, self._now_ms())
        if group.consumer is not None:
            group.consumer.state = ConsumerGroupState.DEAD
        group.offsets.clear()
        group.pending_members.clear()
        self.groups.pop(group.group_id, None)
        self._persisted_meta.pop(group.group_id, None)
        written = self._consumer_written.pop(group.group_id, {})
        if self._log is not None:
            self._log.delete_group(group.group_id, offsets,
                                   [k for k, _ in consumer_records.changed_records(written, {})])
