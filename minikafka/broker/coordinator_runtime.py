"""Coordinators on the partitions of their internal topics, as Kafka 4's coordinator runtime runs them.

Kafka's ``CoordinatorRuntime`` runs one shard of a coordinator per partition of its internal topic
(``__consumer_offsets`` for the group coordinator), on the broker that leads that partition: the shard is
*loaded* by replaying the partition's records when the broker becomes its leader (``CoordinatorLoader``;
COORDINATOR_LOAD_IN_PROGRESS until done), writes its state changes as records to the partition as its leader
(``CoordinatorPartitionWriter``) and answers a write's request once the records are replicated (the high
watermark passed them), and is *unloaded* when leadership moves away (NOT_COORDINATOR from then on, its
in-memory state dropped: the next leader rebuilds it from the replicated records).

Here: :class:`CoordinatorReplica` is the leader replica a shard writes to (appends through the broker's
:class:`~minikafka.broker.replica_manager.ReplicaManager`, so followers fetch them as any records, the high
watermark moves with the ISR, transactional offset batches open transactions the markers close);
:class:`CoordinatorShards` keeps which broker each partition's shard is loaded on and whether it is still
loading; :func:`replay_log` reads a partition's records back.  A coordinator (the group coordinator) is
told of elections and resignations by the brokers' replica managers and keeps its state per shard.

Deliberate differences: the brokers of one process share one coordinator object, holding every loaded
shard (each bound to the broker that leads its partition: requests to any other broker are NOT_COORDINATOR,
also to a cut-off former leader that would serve stale state in Kafka); a small partition is loaded at once,
in the election (:data:`SYNC_LOAD_MAX_BYTES`), a larger one in a task.  The group coordinator answers an offset
commit, the SyncGroup that completes a classic rebalance and a ConsumerGroupHeartbeat once their records are
replicated (a JoinGroup, whose generation Kafka writes only with the members' assignments, at once); reads see
only replicated offsets.  A group whose shard moves is rebuilt from its records, members and assignments
included, as Kafka 4 rebuilds it.  The transaction
coordinator runs on ``__transaction_state`` the same way (:mod:`~minikafka.broker.txn.state_manager`), the
share coordinator on ``__share_group_state`` (:mod:`~minikafka.broker.share.state_coordinator`); all three
follow leadership through :class:`ShardedCoordinator`.
"""

from __future__ import annotations

import enum
import logging
import shutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import trio

from ..common import Clock
from ..protocol.errors import ErrorCode
from ..protocol.records import (NO_PRODUCER_EPOCH, NO_PRODUCER_ID, ConsumerRecord, ControlRecordType,
                                CorruptRecordError, Record, RecordBatchHeader, build_batch, decode_records,
                                read_end_txn_marker)
from .log import Log
from .partition import Partition, ProduceResult
from .purgatory import DelayedOperationPurgatory

log = logging.getLogger(__name__)

#: A partition log up to this size is replayed in the election itself (no COORDINATOR_LOAD_IN_PROGRESS); a
#: larger one by a task, the shard answering COORDINATOR_LOAD_IN_PROGRESS meanwhile.
SYNC_LOAD_MAX_BYTES = 1 << 20
#: Batches replayed between two checkpoints of a loading task.
LOAD_BATCHES_PER_TURN = 256

# What a coordinator's loader gets: each data record (its batch header, key, value or None) and each
# transaction marker (producer id, committed).
OnRecord = Callable[[RecordBatchHeader, bytes, "bytes | None"], None]
OnMarker = Callable[[int, bool], None]


class CoordinatorAppender(Protocol):
    """The part of a broker's replica manager a coordinator shard writes through."""

    delayed_produce: DelayedOperationPurgatory

    def append_records(self, part: Partition, records: bytes | bytearray | memoryview, now_ms: int,
                       max_message_bytes: int, *, check_records: bool = True) -> ProduceResult: ...

    def write_txn_marker(self, part: Partition, producer_id: int, producer_epoch: int, coordinator_epoch: int,
                         commit: bool, transaction_version: int = 0) -> ErrorCode: ...

    def isr(self, part: Partition) -> list[int]: ...


class NotLeaderError(Exception):
    """The replica no longer leads its partition: the shard's write is refused (NOT_COORDINATOR)."""


class CoordinatorReplica:
    """The leader replica of one internal-topic partition, as its coordinator shard writes to it (Kafka's
    ``CoordinatorPartitionWriter``) on broker ``broker_id``."""

    def __init__(self, broker_id: int, appender: CoordinatorAppender, part: Partition, clock: Clock,
                 min_insync_replicas: Callable[[], int] = lambda: 1) -> None:
        self.broker_id = broker_id
        self.appender = appender
        self.part = part
        self.clock = clock  # stamps the batches
        self.min_insync_replicas = min_insync_replicas  # the topic's min.insync.replicas

    def enough_replicas(self) -> bool:
        """Whether an acks=all write may be taken: the ISR is at least ``min.insync.replicas`` (else Kafka's
        append fails with NOT_ENOUGH_REPLICAS)."""
        return not self.part.is_replicated or len(self.appender.isr(self.part)) >= self.min_insync_replicas()

    @property
    def log(self) -> Log:
        return self.part.log

    @property
    def leading(self) -> bool:
        return self.part.is_leader and not self.part.log.closed

    def append(self, records: Iterable[tuple[bytes, bytes | None]], *, producer_id: int = NO_PRODUCER_ID,
               producer_epoch: int = NO_PRODUCER_EPOCH, transactional: bool = False) -> int:
        """Append ``(key, value)`` records as one batch (a transactional one of ``producer_id``); returns its last
        offset (-1: nothing to write).  NotLeaderError when the replica no longer leads."""
        recs = [Record(offset_delta=i, key=k, value=v) for i, (k, v) in enumerate(records)]
        if not recs:
            return -1
        if not self.leading:
            raise NotLeaderError(f"broker {self.broker_id} no longer leads {self.part.topic}-{self.part.index}")
        now = self.clock.time_ms()
        batch = build_batch(recs, producer_id=producer_id, producer_epoch=producer_epoch,
                            is_transactional=transactional, base_timestamp=now)
        result = self.appender.append_records(self.part, memoryview(bytearray(batch)), now, 1 << 30,
                                              check_records=False)  # built here: every record has its key
        if result.error:
            raise NotLeaderError(f"append to {self.part.topic}-{self.part.index} failed: {result.error.name}")
        return result.last_offset

    def end_txn(self, producer_id: int, commit: bool) -> bool:
        """Write the COMMIT or ABORT marker of ``producer_id``'s transaction open in this partition (none open:
        nothing, False)."""
        if not self.leading or producer_id not in self.part.producers.ongoing:
            return False
        entry = self.part.producers.producers.get(producer_id)
        epoch = entry.epoch if entry is not None else NO_PRODUCER_EPOCH
        coordinator_epoch = max(entry.coordinator_epoch, 0) if entry is not None else 0  # (the coordinator is 0)
        return self.appender.write_txn_marker(self.part, producer_id, epoch, coordinator_epoch, commit) == 0

    async def wait_replicated(self, offset: int, timeout_s: float) -> ErrorCode:
        """Wait until the high watermark passed ``offset``: NONE; NOT_COORDINATOR when leadership moves first,
        REQUEST_TIMED_OUT after ``timeout_s``."""
        part = self.part
        if self.leading and part.log.high_watermark > offset:
            return ErrorCode.NONE  # (an unreplicated partition: at once)
        deadline = trio.current_time() + timeout_s
        with self.appender.delayed_produce.watch([part.tp]) as watch:
            while True:
                if not self.leading:
                    return ErrorCode.NOT_COORDINATOR
                if part.log.high_watermark > offset:
                    return ErrorCode.NONE
                if trio.current_time() >= deadline:
                    return ErrorCode.REQUEST_TIMED_OUT
                await watch.wait(deadline)


def batch_records(h: RecordBatchHeader, view: memoryview, name: str) -> list[ConsumerRecord]:
    """The records of the batch ``h`` of log ``name`` (none for an empty batch the cleaner kept; none, with a
    warning, for one that does not decode)."""
    if h.record_count <= 0:
        return []
    try:
        return decode_records(view, check_crc=False)
    except CorruptRecordError as exc:
        log.warning("%s: skipping unreadable batch at offset %d: %s", name, h.base_offset, exc)
        return []


def replay_log(lg: Log, name: str, on_record: OnRecord, on_marker: OnMarker | None = None,
               on_batch: Callable[[RecordBatchHeader], None] | None = None) -> int:
    """Hand every record of ``lg``, in order, to ``on_record`` and every transaction marker to ``on_marker``
    (Kafka's ``CoordinatorLoaderImpl``); ``on_batch`` first sees each batch's header.  A record ``on_record``
    rejects (ValueError, KeyError, TypeError) or without a key is skipped with a warning, as is a batch that
    does not decode.  Returns the records applied."""
    applied = 0
    for h, view in lg.iter_batches_from(lg.log_start_offset):
        if on_batch is not None:
            on_batch(h)
        if h.is_control:
            if h.producer_id < 0:
                continue
            try:
                control_type, _ = read_end_txn_marker(view)
            except CorruptRecordError as exc:
                log.warning("%s: skipping unreadable control batch at offset %d: %s", name, h.base_offset, exc)
                continue
            if on_marker is not None and control_type in (ControlRecordType.COMMIT, ControlRecordType.ABORT):
                on_marker(h.producer_id, control_type == ControlRecordType.COMMIT)
            continue
        for rec in batch_records(h, view, name):
            if rec.key is None:
                log.warning("%s: skipping a record without a key at offset %d", name, rec.offset)
                continue
            try:
                on_record(h, rec.key, rec.value)
                applied += 1
            except (ValueError, KeyError, TypeError) as exc:
                log.warning("%s: skipping unreadable record at offset %d: %s", name, rec.offset, exc)
    return applied


class ShardState(enum.Enum):
    LOADING = "loading"
    ACTIVE = "active"


@dataclass
class Shard:
    """One partition's shard: the replica it is loaded from and writes to, and whether it is loaded yet."""

    partition: int
    replica: CoordinatorReplica
    state: ShardState = ShardState.LOADING

    @property
    def broker_id(self) -> int:
        return self.replica.broker_id


class CoordinatorShards:
    """Which broker each partition's shard is loaded on (Kafka's ``CoordinatorRuntime.coordinators``), and the
    error a request for one of its keys gets on a given broker."""

    def __init__(self) -> None:
        self.shards: dict[int, Shard] = {}

    def get(self, partition: int) -> Shard | None:
        return self.shards.get(partition)

    def active(self, partition: int) -> Shard | None:
        """The partition's shard if it is loaded and its replica still leads."""
        shard = self.shards.get(partition)
        return shard if shard is not None and shard.state is ShardState.ACTIVE and shard.replica.leading else None

    def error_for(self, partition: int, broker_id: int) -> ErrorCode | None:
        """None when ``broker_id`` has the partition's shard loaded; COORDINATOR_LOAD_IN_PROGRESS while it loads
        it; NOT_COORDINATOR otherwise."""
        shard = self.shards.get(partition)
        if shard is None or shard.broker_id != broker_id or not shard.replica.leading:
            return ErrorCode.NOT_COORDINATOR
        if shard.state is ShardState.LOADING:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return None

    def elect(self, replica: CoordinatorReplica, unload: Callable[[int], None]) -> tuple[Shard, bool] | None:
        """``replica``'s broker leads its partition now (Kafka's ``onElection``): the partition's current shard is
        ``unload``-ed and a new one, LOADING, takes its place; returns it and whether it is small enough to load at
        once (:data:`SYNC_LOAD_MAX_BYTES`).  None when ``replica`` is already the shard's."""
        partition = replica.part.index
        current = self.shards.get(partition)
        if current is not None and current.replica is replica:
            return None
        unload(partition)
        shard = self.shards[partition] = Shard(partition, replica)
        return shard, replica.log.size_in_bytes <= SYNC_LOAD_MAX_BYTES

    def loaded_on(self, broker_id: int, partition: int) -> bool:
        """Whether the partition's shard is (being) loaded on ``broker_id`` (what a resignation there unloads)."""
        shard = self.shards.get(partition)
        return shard is not None and shard.broker_id == broker_id

    def on_broker(self, broker_id: int) -> list[int]:
        """The partitions whose shard is (being) loaded on ``broker_id``."""
        return [p for p, s in self.shards.items() if s.broker_id == broker_id]


class ShardedCoordinator:
    """What every coordinator on its internal topic's partitions does when leadership moves (Kafka's
    ``CoordinatorRuntime.scheduleLoadOperation`` / ``scheduleUnloadOperation``): an election loads the
    partition's shard on its new leader (at once when small, else by a task of :meth:`run_loads`), a resignation
    or a departed broker unloads it.  A coordinator says how to load one shard (:meth:`_load_shard`: replay the
    replica's records, then mark it ACTIVE) and how to drop one (:meth:`_unload_shard`); ``internal_topic`` names
    its topic.  An earlier version's local log (``_legacy_dir``) is removed by :meth:`_drop_legacy_dir` once
    everything in it was carried over into the partitions."""

    internal_topic = ""
    shards: CoordinatorShards | None = None  # None: a coordinator used on its own, without partitions
    _tasks: trio.Nursery | None = None  # where loads of large partitions run
    _legacy_dir: Path | None = None

    def on_election(self, replica: CoordinatorReplica) -> None:
        """``replica``'s broker leads its partition now: the partition's shard moves there and is loaded from the
        replica's records (COORDINATOR_LOAD_IN_PROGRESS meanwhile, for a large partition)."""
        elected = self.shards.elect(replica, self._unload_shard) if self.shards is not None else None
        if elected is None:
            return
        shard, at_once = elected
        if at_once or self._tasks is None:
            self._load_shard(shard)
        else:
            self._tasks.start_soon(self._load_later, shard)

    def on_resignation(self, broker_id: int, partition: int) -> None:
        """``broker_id`` no longer leads the partition: its shard is unloaded there."""
        if self.shards is not None and self.shards.loaded_on(broker_id, partition):
            self._unload_shard(partition)

    def on_broker_gone(self, broker_id: int) -> None:
        """The broker stopped or crashed: every shard loaded on it goes, with its in-memory state."""
        if self.shards is not None:
            for partition in self.shards.on_broker(broker_id):
                self._unload_shard(partition)

    async def run_loads(self) -> None:
        """Load large partitions in tasks until cancelled."""
        try:
            async with trio.open_nursery() as nursery:
                self._tasks = nursery
                await trio.sleep_forever()
        finally:
            self._tasks = None

    async def _load_later(self, shard: Shard) -> None:
        await trio.lowlevel.checkpoint()
        self._load_shard(shard)

    def _superseded(self, shard: Shard) -> bool:
        """Whether ``shard`` is no longer its partition's (another election came) or no longer leads."""
        return self.shards is None or self.shards.get(shard.partition) is not shard or not shard.replica.leading

    def _load_shard(self, shard: Shard) -> None:
        raise NotImplementedError

    def _unload_shard(self, partition: int) -> None:
        raise NotImplementedError

    def _drop_legacy_dir(self) -> None:
        """The local log of an earlier version holds nothing more to carry over: it goes."""
        if self._legacy_dir is not None and self._legacy_dir.exists():
            shutil.rmtree(self._legacy_dir, ignore_errors=True)
            log.info("removed %s: what it held is on %s", self._legacy_dir, self.internal_topic)
        self._legacy_dir = None
