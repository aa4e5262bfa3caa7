"""The transaction coordinator's state on the ``__transaction_state`` partitions (Kafka's
``TransactionStateManager``).

Each transactional id belongs to partition ``abs(id.hashCode) % transaction.state.log.num.partitions`` of the
replicated, compacted ``__transaction_state`` topic; the broker leading that partition is the id's
coordinator.  When a broker becomes a partition's leader the partition is *loaded*: its records are replayed
into the cache (the last ``TransactionLogValue`` per id, a tombstone removes one), COORDINATOR_LOAD_IN_PROGRESS
meanwhile for a large partition; when leadership moves it is *unloaded* (NOT_COORDINATOR there, its ids
dropped from the cache, the markers it was sending given up: the new leader sends them again).  A state
change is appended to the leader replica as Kafka's ``TransactionLogKey`` -> ``TransactionLogValue`` record
and is durable once the high watermark passes it; :meth:`TransactionStateManager.replicated` waits for that
(``request.timeout.ms``, COORDINATOR_NOT_AVAILABLE after).  A partition's coordinator epoch (on the markers it
sends) is its leader epoch, so a partition fences the markers of a deposed coordinator.

Without :meth:`TransactionStateManager.use_partitions` (a coordinator used on its own, as unit tests use it)
the ids are kept in one local log (:mod:`.state_log`, ``<data_dir>/__transaction_state-0``); such a local log,
also one an earlier version left, is carried over into the partitions as they load.

Deliberate differences: the brokers of one process share one manager holding every loaded partition (each
bound to the broker that leads it); a request is answered after its record is replicated, but a concurrent
request for the same id is not held back meanwhile (Kafka's ``pendingState``); a write that times out is not
undone in memory (the record stays in the leader's log: the state is the one a failover would reload once it
is replicated).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from ...common import Clock
from ...common.hashing import partition_for_key
from ...protocol.coordinator_records import TransactionLogKey, decode_transaction_record, encode_record
from ...protocol.errors import ErrorCode
from ...protocol.records import RecordBatchHeader
from ..config import BrokerConfig
from ..coordinator_log import TRANSACTION_STATE_TOPIC, compacted_log_config
from ..coordinator_log import has_local_log as has_local_coordinator_log
from ..coordinator_runtime import CoordinatorShards, NotLeaderError, Shard, ShardedCoordinator, ShardState, replay_log
from ..log.cleaner_manager import CleanerTarget
from .metadata import TransactionMetadata
from .state_log import LEGACY_DIR_NAME, LEGACY_FILE_NAME, TransactionStateLog, metadata_from_record, \
    transaction_log_value

log = logging.getLogger(__name__)

E = ErrorCode


def has_local_log(data_dir: Path | None) -> bool:
    """Whether ``data_dir`` holds a local ``__transaction_state`` log to carry over
    (:func:`~..coordinator_log.has_local_log`)."""
    return has_local_coordinator_log(data_dir, TRANSACTION_STATE_TOPIC, LEGACY_DIR_NAME, LEGACY_FILE_NAME)


class TransactionStateManager(ShardedCoordinator):
    """The cache of transactional ids of the loaded ``__transaction_state`` partitions, their loading and
    unloading, and the writes of their state changes."""

    internal_topic = TRANSACTION_STATE_TOPIC

    def __init__(self, config: BrokerConfig, data_dir: Path | None, clock: Clock) -> None:
        self.config = config
        self.clock = clock
        self.local_log = TransactionStateLog(
            data_dir, clock=clock, offsets_topic_partitions=config.offsets_topic_num_partitions,
            config=compacted_log_config(config.transaction_state_log_segment_bytes, config.topic_defaults()))
        self.txns: dict[str, TransactionMetadata] = self.local_log.load()
        self._legacy: dict[str, TransactionMetadata] = {}
        self.written: dict[int, int] = {}  # the last offset written to each partition
        # Told of the ids a load brings (to resume their completion) and of a partition unloaded.
        self.on_load: Callable[[list[TransactionMetadata]], None] = lambda metas: None
        self.on_unload: Callable[[int], None] = lambda partition: None

    # -- the partitions --------------------------------------------------------------------------------
    def use_partitions(self) -> None:
        """Keep the ids on the replicated ``__transaction_state`` partitions; what the local log held is
        written to each id's partition when that first loads, and the local log removed once all are."""
        if self.local_log.log is not None:
            self._legacy = dict(self.txns)
            self._legacy_dir = self.local_log.dir
            self.local_log.close()
            self.txns.clear()
            if not self._legacy:
                self._drop_legacy_dir()
        self.local_log = TransactionStateLog(None)
        self.shards = CoordinatorShards()

    @property
    def legacy(self) -> dict[str, TransactionMetadata]:
        """Ids of a local log still to carry over into their partitions."""
        return self._legacy

    def partition_for(self, transactional_id: str) -> int:
        """The id's ``__transaction_state`` partition (Kafka's ``partitionFor``)."""
        return partition_for_key(transactional_id, self.config.transaction_state_log_num_partitions)

    def coordinator_error(self, transactional_id: str, broker_id: int) -> ErrorCode:
        """NONE when broker ``broker_id`` has the id's partition loaded (always, for a coordinator on its own);
        COORDINATOR_LOAD_IN_PROGRESS while it loads it; NOT_COORDINATOR otherwise."""
        if self.shards is None:
            return E.NONE
        return self.shards.error_for(self.partition_for(transactional_id), broker_id) or E.NONE

    def write_error(self, transactional_id: str) -> ErrorCode:
        """Whether a state change of the id can be written now: COORDINATOR_NOT_AVAILABLE while its partition's
        ISR is below ``min.insync.replicas`` (Kafka's append fails with NOT_ENOUGH_REPLICAS, which the coordinator
        answers so); checked before the change is made, so a refused write changes nothing."""
        shard = self.shard_of(transactional_id)
        if shard is not None and not shard.replica.enough_replicas():
            return E.COORDINATOR_NOT_AVAILABLE
        return E.NONE

    def shard_of(self, transactional_id: str) -> Shard | None:
        """The loaded partition of the id (None for a coordinator on its own, or when it is not loaded)."""
        return self.shards.active(self.partition_for(transactional_id)) if self.shards is not None else None

    def coordinator_epoch(self, transactional_id: str) -> int:
        """The coordinator epoch of the id's markers: its partition's leader epoch (0 on its own)."""
        shard = self.shard_of(transactional_id)
        return shard.replica.part.leader_epoch if shard is not None else 0

    def _load_shard(self, shard: Shard) -> None:
        if self._superseded(shard):
            return
        loaded: dict[str, TransactionMetadata] = {}

        def apply(h: RecordBatchHeader, key: bytes, value: bytes | None) -> None:
            k, v = decode_transaction_record(key, value)
            if v is None:
                loaded.pop(k.transactional_id, None)
            else:
                loaded[k.transactional_id] = metadata_from_record(k.transactional_id, v)

        name = f"{TRANSACTION_STATE_TOPIC}-{shard.partition}"
        count = replay_log(shard.replica.log, name, apply)
        for tid in [t for t in self._legacy if self.partition_for(t) == shard.partition]:
            meta = self._legacy.pop(tid)
            if tid not in loaded:
                loaded[tid] = meta
                self._append(shard, meta)
        if not self._legacy:
            self._drop_legacy_dir()
        self.txns.update(loaded)
        shard.state = ShardState.ACTIVE
        if loaded:
            log.info("loaded %d transactional ids from %s on broker %d (%d records)", len(loaded), name,
                     shard.broker_id, count)
        self.on_load(list(loaded.values()))

    def _unload_shard(self, partition: int) -> None:
        assert self.shards is not None
        if self.shards.shards.pop(partition, None) is None:
            return
        for tid in [t for t in self.txns if self.partition_for(t) == partition]:
            del self.txns[tid]
        self.written.pop(partition, None)
        self.on_unload(partition)
        log.info("unloaded the transactional ids of %s-%d", TRANSACTION_STATE_TOPIC, partition)

    # -- writes ------------------------------------------------------------------------------------------
    def write(self, meta: TransactionMetadata) -> int:
        """Append ``meta``'s state; the offset of its record (-1: written locally, or not at all because the
        partition is no longer loaded here)."""
        if self.shards is None:
            self.local_log.write(meta)
            return -1
        shard = self.shard_of(meta.transactional_id)
        return self._append(shard, meta) if shard is not None else -1

    def remove(self, transactional_id: str) -> None:
        """A tombstone: the id expired."""
        if self.shards is None:
            self.local_log.remove(transactional_id)
            return
        shard = self.shard_of(transactional_id)
        if shard is not None:
            self._append_record(shard, encode_record(TransactionLogKey(transactional_id), None))

    def _append(self, shard: Shard, meta: TransactionMetadata) -> int:
        return self._append_record(shard, encode_record(TransactionLogKey(meta.transactional_id),
                                                        transaction_log_value(meta)))

    def _append_record(self, shard: Shard, record: tuple[bytes, bytes | None]) -> int:
        try:
            offset = shard.replica.append([record])
        except NotLeaderError as exc:
            log.info("transaction state not written: %s", exc)
            return -1
        self.written[shard.partition] = offset
        return offset

    async def replicated(self, transactional_id: str, offset: int | None = None) -> ErrorCode:
        """Wait until the id's records written so far (up to ``offset``) are replicated: NONE; NOT_COORDINATOR
        when its partition moved first; COORDINATOR_NOT_AVAILABLE after ``request.timeout.ms`` (Kafka maps
        the append's errors so)."""
        if self.shards is None:
            return E.NONE
        partition = self.partition_for(transactional_id)
        shard = self.shards.get(partition)
        if shard is None or shard.state is not ShardState.ACTIVE:
            return E.NOT_COORDINATOR
        last = self.written.get(partition, -1) if offset is None else offset
        if last < 0:
            return E.NONE
        code = await shard.replica.wait_replicated(last, self.config.request_timeout_ms / 1000)
        return E.COORDINATOR_NOT_AVAILABLE if code == E.REQUEST_TIMED_OUT else code

    def cleaner_targets(self) -> list[CleanerTarget]:
        """The local log for the log cleaner (the partitions are compacted by their brokers' cleaners)."""
        return self.local_log.cleaner_targets()

    def close(self) -> None:
        self.local_log.close()
