"""The share coordinator on the ``__share_group_state`` partitions (Kafka's ``ShareCoordinatorService``, with a
``ShareCoordinatorShard`` per partition).

The state of a share-partition (key ``groupId:topicId:partition``, Kafka's ``SharePartitionKey``) belongs to
partition ``abs(key.hashCode) % share.coordinator.state.topic.num.partitions`` of the replicated, compacted
``__share_group_state`` topic, created at the first use of a share-partition with
``share.coordinator.state.topic.replication.factor`` replicas and ``share.coordinator.state.topic.min.isr`` as its
``min.insync.replicas`` (both capped at the running brokers).  The broker leading a partition is the share
coordinator of its keys.  When a broker becomes a partition's leader the partition is *loaded* by replaying its
``ShareSnapshotKey`` -> ``ShareSnapshotValue`` records (the last per key, a tombstone removes one, a record of a
deleted topic is ignored), COORDINATOR_LOAD_IN_PROGRESS meanwhile for a large partition; when leadership moves it
is *unloaded*.

The share-partition leaders (:class:`~.manager.SharePartitionManager`, on the brokers leading the data partitions)
read a share-partition's state when they initialize it (Kafka's ReadShareGroupState) and write each change as a
new snapshot (WriteShareGroupState); an acknowledgement is answered once its snapshot is replicated
(``share.coordinator.write.timeout.ms``).  A snapshot with an older state epoch than the stored one is refused with
FENCED_STATE_EPOCH: AlterShareGroupOffsets started the share-partition over meanwhile.  A share-partition leader
that cannot be served gets COORDINATOR_LOAD_IN_PROGRESS while the partition loads, and COORDINATOR_NOT_AVAILABLE
when the partition has no leader, when that leader is out of its reach (paused, or across a network partition),
or, for a write, when the partition's ISR is below ``min.insync.replicas``.

Deliberate differences: the share-partition leaders call the coordinator within the process (no
ReadShareGroupState / WriteShareGroupState on the wire, no retries of their own: a ShareFetch that cannot
initialize a share-partition answers COORDINATOR_NOT_AVAILABLE for it, and the consumer fetches again); only
snapshots are written (Kafka writes ``ShareUpdate`` records between them); no leader epochs are kept (-1).  The
brokers of one process share one coordinator object holding every loaded partition (each bound to the broker that
leads it).  What a store of an earlier version kept (:class:`~.partition_state.ShareStateStore`,
``<data_dir>/__share_group_state-0``) is carried over into the partitions as they load, from the first use of a
share-partition on (which creates the topic).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from ...common.hashing import partition_for_key
from ...protocol.coordinator_records import ShareSnapshotKey, encode_record
from ...protocol.errors import ErrorCode
from ...protocol.json_converter import kafka_uuid
from ...protocol.records import RecordBatchHeader
from ..coordinator_log import SHARE_GROUP_STATE_TOPIC
from ..coordinator_runtime import (CoordinatorShards, NotLeaderError, Shard, ShardedCoordinator, ShardState,
                                   replay_log)
from ..log.cleaner_manager import CleanerTarget
from .partition_state import (PersistedShareState, ShareStateKey, ShareStateStore, TopicIds, next_snapshot_epoch,
                              persisted_state, read_share_record, snapshot_value)

log = logging.getLogger(__name__)

E = ErrorCode


@dataclass(slots=True)
class _Snapshot:
    """The last snapshot of a share-partition: its state, snapshot epoch, and the topic id it was written under."""

    state: PersistedShareState
    snapshot_epoch: int
    topic_id: uuid.UUID


class ShareCoordinator(ShardedCoordinator):
    """The share-partition states of the loaded ``__share_group_state`` partitions, their loading and unloading,
    and the writes of their snapshots: a :class:`~.partition_state.SharePersister` for every broker's
    share-partition leader.

    ``reachable(broker, coordinator)``: whether broker ``broker`` reaches broker ``coordinator`` (a cluster's
    links); ``ensure_topic`` creates ``__share_group_state`` if it does not exist yet."""

    internal_topic = SHARE_GROUP_STATE_TOPIC

    def __init__(self, num_partitions: int, topics: TopicIds, *, write_timeout_ms: int = 5000,
                 ensure_topic: Callable[[], None] = lambda: None,
                 reachable: Callable[[int, int], bool] = lambda broker, coordinator: True,
                 legacy: ShareStateStore | None = None) -> None:
        self.num_partitions = num_partitions
        self.topics = topics
        self.write_timeout_ms = write_timeout_ms
        self.ensure_topic = ensure_topic
        self.reachable = reachable
        self.shards = CoordinatorShards()
        self._states: dict[int, dict[ShareStateKey, _Snapshot]] = {}  # by loaded partition
        self._written: dict[ShareStateKey, tuple[Shard, int]] = {}  # the shard and offset of each key's last write
        self._legacy: dict[ShareStateKey, PersistedShareState] = {}
        if legacy is not None:
            self._legacy = {k: state for k in legacy.keys() if (state := legacy.get(k)) is not None}
            self._legacy_dir = legacy.dir
            legacy.close()
            if not self._legacy:
                self._drop_legacy_dir()

    # -- where a key lives --------------------------------------------------------------------------------
    def _locate(self, key: ShareStateKey) -> tuple[uuid.UUID, int] | None:
        """The key's topic id and ``__share_group_state`` partition (None when its topic does not exist)."""
        topic = self.topics.get_topic(key.topic)
        if topic is None:
            return None
        coordinator_key = f"{key.group_id}:{kafka_uuid(topic.topic_id)}:{key.partition}"
        return topic.topic_id, partition_for_key(coordinator_key, self.num_partitions)

    def partition_for(self, key: ShareStateKey) -> int | None:
        """The key's ``__share_group_state`` partition (None when its topic does not exist)."""
        located = self._locate(key)
        return located[1] if located is not None else None

    def _shard(self, located: tuple[uuid.UUID, int] | None) -> tuple[Shard | None, ErrorCode]:
        """The loaded shard of a key ``_locate`` found, or the error a share-partition leader gets for it."""
        if located is None:
            return None, E.UNKNOWN_TOPIC_OR_PARTITION
        assert self.shards is not None
        shard = self.shards.get(located[1])
        if shard is None:
            self.ensure_topic()  # Kafka's persister looks the coordinator up, which creates the topic
            shard = self.shards.get(located[1])
        if shard is None or not shard.replica.leading:
            return None, E.COORDINATOR_NOT_AVAILABLE
        if shard.state is ShardState.LOADING:
            return None, E.COORDINATOR_LOAD_IN_PROGRESS
        return shard, E.NONE

    def state_error(self, key: ShareStateKey, broker_id: int, *, write: bool = False) -> ErrorCode:
        shard, err = self._shard(self._locate(key))
        if shard is None:
            return err
        if not self.reachable(broker_id, shard.broker_id):
            return E.COORDINATOR_NOT_AVAILABLE
        if write and not shard.replica.enough_replicas():
            return E.COORDINATOR_NOT_AVAILABLE  # Kafka's acks=all append: NOT_ENOUGH_REPLICAS
        return E.NONE

    def _snapshot(self, key: ShareStateKey, located: tuple[uuid.UUID, int] | None) -> _Snapshot | None:
        snap = self._states.get(located[1], {}).get(key) if located is not None else None
        if snap is None or located is None or snap.topic_id != located[0]:
            return None  # (a topic deleted and made again: the old one's state is not the new one's)
        return snap

    # -- reads ---------------------------------------------------------------------------------------------
    def get(self, key: ShareStateKey) -> PersistedShareState | None:
        """The state of ``key`` if its partition is loaded and holds one."""
        snap = self._snapshot(key, self._locate(key))
        return snap.state if snap is not None else None

    def keys(self, group_id: str | None = None) -> list[ShareStateKey]:
        """The share-partitions with state in the loaded partitions (of one group)."""
        self.ensure_topic()
        return [k for states in self._states.values() for k in states
                if (group_id is None or k.group_id == group_id) and self._snapshot(k, self._locate(k)) is not None]

    # -- writes --------------------------------------------------------------------------------------------
    def put(self, key: ShareStateKey, state: PersistedShareState) -> ErrorCode:
        located = self._locate(key)
        shard, err = self._shard(located)
        if shard is None or located is None:
            log.info("state of %s not written: %s", key, err.name)
            return err
        old = self._snapshot(key, located)
        if old is not None and state.state_epoch < old.state.state_epoch:
            return E.FENCED_STATE_EPOCH
        if old is not None and old.state == state:
            return E.NONE
        topic_id = located[0]
        epoch = next_snapshot_epoch(old.snapshot_epoch if old is not None else None)
        record = encode_record(ShareSnapshotKey(key.group_id, topic_id, key.partition), snapshot_value(epoch, state))
        if not self._append(shard, key, record):
            return E.COORDINATOR_NOT_AVAILABLE
        self._states.setdefault(shard.partition, {})[key] = _Snapshot(state, epoch, topic_id)
        return E.NONE

    def delete(self, key: ShareStateKey) -> bool:
        """A tombstone: the share-partition's state is forgotten (False when there was none, or its partition
        is not loaded)."""
        located = self._locate(key)
        shard, _ = self._shard(located)
        snap = self._snapshot(key, located)
        if shard is None or snap is None:
            return False
        del self._states[shard.partition][key]
        self._append(shard, key, encode_record(ShareSnapshotKey(key.group_id, snap.topic_id, key.partition), None))
        return True

    def _append(self, shard: Shard, key: ShareStateKey, record: tuple[bytes, bytes | None]) -> bool:
        try:
            offset = shard.replica.append([record])
        except NotLeaderError as exc:
            log.info("share-partition state not written: %s", exc)
            return False
        self._written[key] = shard, offset
        return True

    async def replicated(self, key: ShareStateKey) -> ErrorCode:
        """Wait until the last write of ``key`` is replicated: NONE; COORDINATOR_NOT_AVAILABLE when its partition
        moved first or after ``share.coordinator.write.timeout.ms``."""
        written = self._written.get(key)
        if written is None:
            return E.NONE
        shard, offset = written
        code = await shard.replica.wait_replicated(offset, self.write_timeout_ms / 1000)
        if self._written.get(key) == written and code == E.NONE:
            del self._written[key]
        return E.NONE if code == E.NONE else E.COORDINATOR_NOT_AVAILABLE

    # -- loading and unloading -----------------------------------------------------------------------------
    def _load_shard(self, shard: Shard) -> None:
        if self._superseded(shard):
            return
        states: dict[ShareStateKey, _Snapshot] = {}
        unknown: set[uuid.UUID] = set()

        def apply(h: RecordBatchHeader, raw_key: bytes, raw_value: bytes | None) -> None:
            read = read_share_record(self.topics, raw_key, raw_value, unknown)
            if read is None:
                return
            key, topic_id, v = read
            if v is None:
                states.pop(key, None)
            else:
                states[key] = _Snapshot(persisted_state(v), v.snapshot_epoch, topic_id)

        name = f"{SHARE_GROUP_STATE_TOPIC}-{shard.partition}"
        count = replay_log(shard.replica.log, name, apply)
        self._states[shard.partition] = states
        shard.state = ShardState.ACTIVE
        if unknown:
            log.info("%s: ignored the state of %d deleted topic(s)", name, len(unknown))
        if states:
            log.info("loaded the state of %d share-partitions from %s on broker %d (%d records)", len(states), name,
                     shard.broker_id, count)
        self._carry_over(shard.partition)

    def _carry_over(self, partition: int) -> None:
        """Write what a local store held for ``partition``'s keys (those it does not hold yet); the store's
        directory goes once everything is carried over."""
        if not self._legacy:
            return
        for key in [k for k in self._legacy if self.partition_for(k) in (partition, None)]:
            state = self._legacy.pop(key)
            located = self._locate(key)
            if located is not None and self._snapshot(key, located) is None:
                self.put(key, state)
        if not self._legacy:
            self._drop_legacy_dir()

    def _unload_shard(self, partition: int) -> None:
        assert self.shards is not None
        if self.shards.shards.pop(partition, None) is None:
            return
        self._states.pop(partition, None)
        for key in [k for k, (shard, _) in self._written.items() if shard.partition == partition]:
            del self._written[key]
        log.info("unloaded the share-partition states of %s-%d", SHARE_GROUP_STATE_TOPIC, partition)

    def cleaner_targets(self) -> list[CleanerTarget]:
        """None: the partitions are compacted by their brokers' log cleaners."""
        return []

    def close(self) -> None:
        """Nothing to close: the partitions are the brokers' replicas."""
