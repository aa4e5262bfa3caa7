"""Persistence of the group coordinator: the compacted ``__consumer_offsets`` partition log.

Models the storage half of Kafka's group coordinator (``GroupMetadataManager`` / ``OffsetMetadataManager``
writing through the coordinator runtime, and ``CoordinatorLoaderImpl`` replaying the partition when the broker
becomes its leader).  ``<data_dir>/__consumer_offsets-<partition>/`` is a partition log
(:class:`~minikafka.broker.coordinator_log.CoordinatorLog`) with ``cleanup.policy=compact``, holding Kafka's
records (:mod:`minikafka.protocol.coordinator_records`):

``OffsetCommitKey(group, topic, partition)`` -> ``OffsetCommitValue``
    a committed offset; a tombstone when it expires (``offsets.retention.minutes``) or its group is deleted;
``GroupMetadataKey(group)`` -> ``GroupMetadataValue``
    a classic group's protocol type and generation and, once its leader's assignment is in, its protocol,
    leader and members with their subscriptions and assignments (Kafka's ``storeGroup``);
``ConsumerGroupMetadataKey(group)`` -> ``ConsumerGroupMetadataValue``, with the group's other records
    a KIP-848 consumer group's group epoch; its subscribed topics, its members' metadata, its target assignment
    and each member's current assignment (:mod:`.consumer.records`), each written when it changes, tombstoned
    when its member leaves.  When a group changes type the new type's record is written, then a tombstone for
    the old one (Kafka writes the old type's tombstones on conversion); deleting a group writes a tombstone for
    each of its offsets, member records and its metadata record;
TxnOffsetCommit
    ``OffsetCommit`` records in a *transactional* batch of the producer, pending until the transaction's
    COMMIT or ABORT marker (a control batch, written when the transaction coordinator completes it).

Replay applies the records in log order: a metadata tombstone removes the group (its offsets and pending
transactional offsets with it) unless the group has since moved to the other type.  Logs written before
this format (``<data_dir>/__consumer_offsets/offsets.log``, JSON lines) are replayed once with the old code
path, their live state written into the new log, and the old file removed.

Run by a broker or cluster, the records go to the partition of each group's shard on the replicated
``__consumer_offsets`` topic (``shards``: :mod:`~minikafka.broker.coordinator_runtime`), written to its leader
replica and replicated as any records; :meth:`OffsetLog.load_partition` replays a partition when its shard
loads.  Used on its own, one local partition log under ``data_dir`` (``<data_dir>/__consumer_offsets-0``, which
earlier versions wrote and a broker now carries over into the topic).

Deliberate differences from Kafka: no fsync per commit (a process crash loses nothing, a
power cut may lose the tail); a consumer group's regular expressions are resolved again on load rather than
written (ConsumerGroupRegularExpression records).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...common import SYSTEM_CLOCK, Clock, OffsetAndMetadata, TopicPartition
from ...protocol.coordinator_records import (ConsumerGroupMetadataKey, ConsumerGroupMetadataValue,
                                             GroupMemberMetadata, GroupMetadataKey, GroupMetadataValue,
                                             GroupRecordValue, OffsetCommitKey, OffsetCommitValue,
                                             decode_group_record, encode_record)
from ...protocol.modern_group_records import (SHARE_GROUP_KEYS, ConsumerGroupRecordKey, ConsumerGroupRecordValue,
                                              ModernGroupRecordKey, ShareGroupMetadataKey, ShareGroupRecordKey,
                                              ShareGroupRecordValue)
from ...protocol.records import NO_PRODUCER_EPOCH, RecordBatchHeader
from ..coordinator_log import has_local_log as has_local_coordinator_log
from ..coordinator_log import (OFFSETS_TOPIC, OFFSETS_TOPIC_SEGMENT_BYTES, CoordinatorLog, CoordinatorLogStore,
                               compacted_log_config)
from ..coordinator_runtime import CoordinatorReplica, CoordinatorShards, NotLeaderError, Shard, replay_log
from ..json_lines import replay_json_lines
from ..log import LogConfig
from .metadata import CONSUMER_PROTOCOL_TYPE, GROUP_TYPE_CLASSIC, GROUP_TYPE_CONSUMER

log = logging.getLogger(__name__)

GROUP_TYPES = (GROUP_TYPE_CLASSIC, GROUP_TYPE_CONSUMER)

# The JSON-lines log of earlier versions, migrated on load.
LEGACY_DIR_NAME = "__consumer_offsets"
LEGACY_FILE_NAME = "offsets.log"


@dataclass
class LoadedGroup:
    """What replay recovered for one group."""

    protocol_type: str | None = None
    generation_id: int = 0  # a consumer group's group epoch
    group_type: str = GROUP_TYPE_CLASSIC
    offsets: dict[TopicPartition, OffsetAndMetadata] = field(default_factory=dict)
    # A classic group's protocol, leader and members (their subscription and assignment) at its last record.
    protocol: str | None = None
    leader: str | None = None
    members: tuple[GroupMemberMetadata, ...] = ()
    # A consumer group's other records (members, target and current assignments, subscribed topics), by
    # (key type, key).
    consumer_records: dict[tuple[type, ConsumerGroupRecordKey], ConsumerGroupRecordValue] = field(default_factory=dict)
    pending_txn_offsets: dict[int, dict[TopicPartition, OffsetAndMetadata]] = field(default_factory=dict)


ConsumerRecordChanges = Iterable[tuple[ModernGroupRecordKey, GroupRecordValue | None]]
#: A share group's records by (key type, key), as replay leaves them.
ModernRecords = dict[tuple[type, ShareGroupRecordKey], ShareGroupRecordValue]


def _offset_value(om: OffsetAndMetadata) -> OffsetCommitValue:
    return OffsetCommitValue(om.offset, om.metadata, om.commit_timestamp, om.leader_epoch,
                             -1 if om.expire_timestamp is None else om.expire_timestamp)


def _offset_records(group_id: str, offsets: Mapping[TopicPartition, OffsetAndMetadata]
                    ) -> list[tuple[bytes, bytes | None]]:
    return [encode_record(OffsetCommitKey(group_id, tp[0], tp[1]), _offset_value(om))
            for tp, om in offsets.items()]


def _metadata_key(group_id: str, group_type: str) -> GroupMetadataKey | ConsumerGroupMetadataKey:
    return ConsumerGroupMetadataKey(group_id) if group_type == GROUP_TYPE_CONSUMER else GroupMetadataKey(group_id)


def has_local_log(data_dir: Path | None) -> bool:
    """Whether ``data_dir`` holds a local ``__consumer_offsets`` log to carry over
    (:func:`~..coordinator_log.has_local_log`)."""
    return has_local_coordinator_log(data_dir, OFFSETS_TOPIC, LEGACY_DIR_NAME, LEGACY_FILE_NAME)


class OffsetLog(CoordinatorLogStore):
    """The records of the groups: in one local ``__consumer_offsets`` partition log under ``data_dir`` (a
    coordinator used on its own), or, with ``shards``, in the partition of each group's shard
    (``partition_for(group)``), written to its leader replica (:mod:`~minikafka.broker.coordinator_runtime`)."""

    def __init__(self, data_dir: Path | None, *, partition: int = 0, config: LogConfig | None = None,
                 clock: Clock = SYSTEM_CLOCK, shards: CoordinatorShards | None = None,
                 partition_for: Callable[[str], int] | None = None) -> None:
        self.data_dir = Path(data_dir) if data_dir is not None else None
        self.partition = partition
        self.config = config or compacted_log_config(OFFSETS_TOPIC_SEGMENT_BYTES)
        self.clock = clock
        self.dir = self.data_dir / f"{OFFSETS_TOPIC}-{partition}" if self.data_dir is not None else None
        self.legacy_path = self.data_dir / LEGACY_DIR_NAME / LEGACY_FILE_NAME if self.data_dir is not None else None
        self._log: CoordinatorLog | None = None
        self.shards = shards
        self.partition_for = partition_for or (lambda group_id: 0)
        # The last offset written to each partition (a write is answered once the high watermark passed it).
        self.written: dict[int, int] = {}
        # The type of each group's live (not tombstoned) metadata record.
        self._meta_types: dict[str, str] = {}
        # The share groups' records the last load found (KIP-932: the share-group coordinator keeps them).
        self.loaded_share_groups: dict[str, ModernRecords] = {}

    def load(self) -> dict[str, LoadedGroup]:
        """Open the local partition log (migrating an old JSON-lines file into it) and replay it."""
        assert self.data_dir is not None and self.legacy_path is not None
        self._log = CoordinatorLog(self.data_dir, OFFSETS_TOPIC, self.partition, self.config, clock=self.clock)
        if self.legacy_path.exists():
            self._migrate()
        replay = _Replay(self._meta_types)
        count = self._log.replay(replay.record, replay.marker)
        log.info("loaded %d groups from %s (%d records)", len(replay.groups), self.dir, count)
        self.loaded_share_groups = replay.share_groups
        return replay.groups

    def load_partition(self, replica: CoordinatorReplica) -> dict[str, LoadedGroup]:
        """Replay a shard's partition from its leader replica (Kafka's ``CoordinatorLoaderImpl``)."""
        types: dict[str, str] = {}
        replay = _Replay(types)
        part = replica.part
        count = replay_log(replica.log, f"{part.topic}-{part.index}", replay.record, replay.marker)
        for gid in [g for g in self._meta_types if self.partition_for(g) == part.index]:
            del self._meta_types[gid]
        self._meta_types.update(types)
        self.written.pop(part.index, None)
        log.info("broker %d loaded %d groups from %s-%d (%d records)", replica.broker_id, len(replay.groups),
                 part.topic, part.index, count)
        self.loaded_share_groups = replay.share_groups
        return replay.groups

    def _append(self, group_id: str, records: list[tuple[bytes, bytes | None]], **kw: Any) -> None:
        """Append ``records`` where the group's records go: the local log, or its shard's leader replica (not
        loaded there, or its replica no longer leads: nothing is written, the state goes with the shard)."""
        if self.shards is None:
            if self._log is not None:
                self._log.append(records, **kw)
            return
        partition = self.partition_for(group_id)
        shard = self.shards.active(partition)
        if shard is None:
            log.debug("group %s: partition %d is not loaded here; %d record(s) not written", group_id, partition,
                      len(records))
            return
        try:
            last = shard.replica.append(records, **kw)
        except NotLeaderError as exc:
            log.info("group %s: %s", group_id, exc)
            return
        if last >= 0:
            self.written[partition] = last

    def pending_write(self, group_id: str) -> tuple[Shard, int] | None:
        """The group's shard and the last offset written to its partition (None: nothing to wait for)."""
        if self.shards is None:
            return None
        partition = self.partition_for(group_id)
        shard = self.shards.get(partition)
        last = self.written.get(partition)
        return None if shard is None or last is None else (shard, last)

    # -- writes ---------------------------------------------------------------------------------------------
    def commit_offsets(self, group_id: str, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        """OffsetCommit records."""
        self._append(group_id, _offset_records(group_id, offsets))

    def commit_txn_offsets(self, group_id: str, producer_id: int, producer_epoch: int,
                           offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        """OffsetCommit records in a transactional batch of the producer (TxnOffsetCommit)."""
        self._append(group_id, _offset_records(group_id, offsets), producer_id=producer_id,
                     producer_epoch=producer_epoch, transactional=True)

    def end_txn(self, partition: int, producer_id: int, commit: bool) -> None:
        """The COMMIT or ABORT marker of ``producer_id``'s transaction in ``partition``, if it is open there (the
        local log, whatever ``partition``, without shards)."""
        if self.shards is None:
            if self._log is not None:
                self._log.end_txn(producer_id, commit)
            return
        shard = self.shards.active(partition)
        if shard is not None:
            shard.replica.end_txn(producer_id, commit)

    def remove_offsets(self, group_id: str, partitions: Iterable[TopicPartition]) -> None:
        """OffsetCommit tombstones (expired or deleted offsets)."""
        self._append(group_id, [encode_record(OffsetCommitKey(group_id, tp[0], tp[1]), None) for tp in partitions])

    def write_group_metadata(self, group_id: str, group_type: str, protocol_type: str | None, generation: int,
                             current_state_timestamp: int = -1, *, protocol: str | None = None,
                             leader: str | None = None, members: tuple[GroupMemberMetadata, ...] = (),
                             consumer_records: ConsumerRecordChanges = (), metadata: bool = True) -> None:
        """The group's GroupMetadata record (classic: its generation, protocol, leader and members with their
        subscription and assignment) or ConsumerGroupMetadata record (its group epoch), then a tombstone for the
        other type's record if the group had one; with ``consumer_records`` (a consumer group's member and
        assignment records, or their tombstones) in the same batch.  ``metadata`` False: only those."""
        if self._log is None and self.shards is None:
            return
        records = [encode_record(k, v) for k, v in consumer_records]
        if metadata:
            value: GroupRecordValue
            if group_type == GROUP_TYPE_CONSUMER:
                value = ConsumerGroupMetadataValue(generation)
            else:
                value = GroupMetadataValue(protocol_type or "", generation, protocol, leader, current_state_timestamp,
                                           members)
            records.append(encode_record(_metadata_key(group_id, group_type), value))
            previous = self._meta_types.get(group_id)
            if previous is not None and previous != group_type:
                records.append(encode_record(_metadata_key(group_id, previous), None))
            self._meta_types[group_id] = group_type
        if records:
            self._append(group_id, records)

    def write_records(self, group_id: str, records: ConsumerRecordChanges) -> None:
        """Records of a modern group (or their tombstones) where the group's records go."""
        encoded = [encode_record(k, v) for k, v in records]
        if encoded and (self._log is not None or self.shards is not None):
            self._append(group_id, encoded)

    def delete_group(self, group_id: str, partitions: Iterable[TopicPartition],
                     consumer_keys: Iterable[ModernGroupRecordKey] = ()) -> None:
        """The group is gone: tombstones for its offsets, a consumer group's member and assignment records and its
        metadata record (GroupMetadata when it never had one, as Kafka writes for a classic group)."""
        if self._log is None and self.shards is None:
            return
        records = [encode_record(OffsetCommitKey(group_id, tp[0], tp[1]), None) for tp in partitions]
        records += [encode_record(k, None) for k in consumer_keys]
        group_type = self._meta_types.pop(group_id, GROUP_TYPE_CLASSIC)
        records.append(encode_record(_metadata_key(group_id, group_type), None))
        self._append(group_id, records)

    # -- the log cleaner, lifecycle -------------------------------------------------------------------------
    # -- migration of the JSON-lines log ---------------------------------------------------------------------
    def _migrate(self) -> None:
        assert self._log is not None and self.legacy_path is not None
        legacy: dict[str, LoadedGroup] = {}
        count = replay_json_lines(self.legacy_path, lambda rec: _apply_legacy(legacy, rec))
        for gid, g in legacy.items():
            if g.group_type != GROUP_TYPE_CLASSIC or g.generation_id or g.protocol_type is not None:
                self.write_group_metadata(gid, g.group_type, g.protocol_type, g.generation_id)
            self.commit_offsets(gid, g.offsets)
            for pid, pending in g.pending_txn_offsets.items():
                self.commit_txn_offsets(gid, pid, NO_PRODUCER_EPOCH, pending)
        self._meta_types.clear()  # rebuilt by the replay that follows
        self._log.sync()
        self.legacy_path.unlink()
        self.legacy_path.with_suffix(".log.compacting").unlink(missing_ok=True)
        try:
            self.legacy_path.parent.rmdir()
        except OSError:
            pass  # something else lives there: leave it
        log.info("migrated %d groups (%d records) from %s into %s", len(legacy), count, self.legacy_path, self.dir)


class _Replay:
    """Applies ``__consumer_offsets`` records in log order (Kafka's ``GroupCoordinatorShard.replay``)."""

    def __init__(self, meta_types: dict[str, str]) -> None:
        self.groups: dict[str, LoadedGroup] = {}
        self.meta_types = meta_types
        self.meta_types.clear()
        self.pending: dict[int, set[str]] = {}  # producer id -> groups with its transactional offsets
        # The share groups' records (KIP-932; the share-group coordinator keeps those groups), by group id.
        self.share_groups: dict[str, ModernRecords] = {}

    def record(self, h: RecordBatchHeader, key: bytes, value: bytes | None) -> None:
        k, v = decode_group_record(key, value)
        if isinstance(k, OffsetCommitKey):
            tp = TopicPartition(k.topic, k.partition)
            if not isinstance(v, OffsetCommitValue):  # a tombstone drops pending transactional offsets too
                g = self.groups.get(k.group)
                if g is not None:
                    g.offsets.pop(tp, None)
                    for pending in g.pending_txn_offsets.values():
                        pending.pop(tp, None)
                return
            om = OffsetAndMetadata(v.offset, v.leader_epoch, v.metadata, v.commit_timestamp,
                                   None if v.expire_timestamp < 0 else v.expire_timestamp)
            group = self.groups.setdefault(k.group, LoadedGroup())
            if h.is_transactional and h.producer_id >= 0:
                group.pending_txn_offsets.setdefault(h.producer_id, {})[tp] = om
                self.pending.setdefault(h.producer_id, set()).add(k.group)
            else:
                group.offsets[tp] = om
        elif isinstance(k, GroupMetadataKey):
            self._metadata(k.group, GROUP_TYPE_CLASSIC, v)
        elif isinstance(k, ConsumerGroupMetadataKey):
            self._metadata(k.group_id, GROUP_TYPE_CONSUMER, v)
        elif type(k) in SHARE_GROUP_KEYS:
            if isinstance(k, ShareGroupMetadataKey) and v is None:
                self.share_groups.pop(k.group_id, None)  # (Kafka writes the group's epoch tombstone last)
            elif v is not None or k.group_id in self.share_groups:
                _put(self.share_groups.setdefault(k.group_id, {}), k, v)
        else:
            _put(self.groups.setdefault(k.group_id, LoadedGroup()).consumer_records, k, v)

    def _metadata(self, group_id: str, group_type: str, v: GroupRecordValue | None) -> None:
        if v is None:
            live = self.meta_types.get(group_id)
            if live is not None and live != group_type:
                return  # the tombstone of the type the group left
            self.meta_types.pop(group_id, None)
            self.groups.pop(group_id, None)
            return
        g = self.groups.setdefault(group_id, LoadedGroup())
        if isinstance(v, ConsumerGroupMetadataValue):
            g.protocol_type, g.generation_id = CONSUMER_PROTOCOL_TYPE, v.epoch
        elif isinstance(v, GroupMetadataValue):
            g.protocol_type, g.generation_id = v.protocol_type or None, v.generation
            g.protocol, g.leader, g.members = v.protocol, v.leader, tuple(v.members)
        else:
            raise TypeError(f"a {type(v).__name__} under a group metadata key")
        g.group_type = group_type
        self.meta_types[group_id] = group_type

    def marker(self, producer_id: int, commit: bool) -> None:
        for gid in self.pending.pop(producer_id, ()):
            g = self.groups.get(gid)
            pending = g.pending_txn_offsets.pop(producer_id, None) if g is not None else None
            if g is not None and pending and commit:
                g.offsets.update(pending)


def _put(records: dict[Any, Any], key: ModernGroupRecordKey, value: GroupRecordValue | None) -> None:
    """Apply one modern group record to what a group's records hold (by :func:`record_id`)."""
    if value is None:
        records.pop((type(key), key), None)
    else:
        records[(type(key), key)] = value


def _apply_legacy(groups: dict[str, LoadedGroup], rec: dict[str, Any]) -> None:
    """One record of the old JSON-lines log (``{"t": "o"|"x"|"g"|"d"|"to"|"te", "g": group, ...}``)."""
    kind = rec["t"]
    gid = rec["g"]
    if not isinstance(gid, str):
        raise TypeError("group id is not a string")
    if kind in ("o", "to"):
        om = OffsetAndMetadata(
            offset=int(rec["o"]), leader_epoch=int(rec.get("e", -1)), metadata=rec.get("m") or "",
            commit_timestamp=int(rec.get("ct", 0)),
            expire_timestamp=None if rec.get("xt") is None else int(rec["xt"]),
        )
        tp = TopicPartition(str(rec["tp"]), int(rec["p"]))
        group = groups.setdefault(gid, LoadedGroup())
        if kind == "o":
            group.offsets[tp] = om
        else:
            group.pending_txn_offsets.setdefault(int(rec["pid"]), {})[tp] = om
    elif kind == "te":
        g = groups.get(gid)
        pending = g.pending_txn_offsets.pop(int(rec["pid"]), None) if g is not None else None
        if g is not None and pending and rec.get("c"):
            g.offsets.update(pending)
    elif kind == "x":
        g = groups.get(gid)
        if g is not None:
            g.offsets.pop(TopicPartition(str(rec["tp"]), int(rec["p"])), None)
    elif kind == "g":
        group_type = rec.get("gt", GROUP_TYPE_CLASSIC)
        if group_type not in GROUP_TYPES:
            raise ValueError(f"unknown group type {group_type!r}")
        g = groups.setdefault(gid, LoadedGroup())
        g.protocol_type = rec.get("pt")
        g.generation_id = int(rec.get("gen", 0))
        g.group_type = group_type
    elif kind == "d":
        groups.pop(gid, None)
    else:
        raise ValueError(f"unknown record type {kind!r}")
