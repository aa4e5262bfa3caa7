"""Partitions hosted by this broker and the append/read paths (Kafka's ``ReplicaManager``).

``append_records`` validates each produce batch by its 61-byte header and
CRC only (records are decoded only where a per-record check of Kafka's
``LogValidator`` can fail: compacted topics, bounded timestamps; see
:mod:`~minikafka.broker.log.validator`), checks idempotent-producer sequences,
and appends; logs return stored batches as opaque chunks.  A change to a
partition wakes only the delayed fetches and produces watching that partition
(:class:`~minikafka.broker.purgatory.DelayedOperationPurgatory`).  It depends
on narrow Protocols (:class:`PartitionStateStore` for the metadata,
:class:`ReplicaFetchers` for the follower side), not on the broker.

In a cluster it also plays Kafka's ``Partition`` leader/follower transitions
(``makeLeader``/``makeFollower``, driven by the shared metadata as LeaderAndIsr
would), and the leader side of replication: each follower's fetch position and
last caught-up time (``updateFollowerFetchState``), the high watermark as the
minimum log end offset over the ISR (``maybeIncrementLeaderHW``), and ISR
shrink/expand (``maybeShrinkIsr``/``maybeExpandIsr``).  A partition with one
replica keeps ``Log.auto_advance_hw`` (HW = LEO), so a lone broker behaves as before.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from ..common import SYSTEM_CLOCK, Clock, TopicMetadata, TopicPartition
from ..common.types import PartitionMetadata
from ..protocol.errors import ErrorCode
from ..protocol.records import (CONTROL_MASK, LOG_OVERHEAD, TRANSACTIONAL_MASK, ControlRecordType,
                                CorruptRecordError, RecordBatchHeader, build_control_batch, iter_batches,
                                read_batches, read_end_txn_marker)
from .config import BrokerConfig
from .log import LogConfig, LogManager
from .log.manager import LogDir
from .log.cleaner_manager import CleanerTarget
from .log.txn_index import AbortedTxn
from .log.validator import INT64_MAX, needs_record_validation, validate_records
from .partition import Partition, ProduceResult, ReplicaState
from .producer_state import BatchMetadata, CompletedTxn, ProducerStateManager
from .purgatory import DelayedOperationPurgatory

if TYPE_CHECKING:
    from ..protocol.bodies import Records

__all__ = ["Partition", "ProduceResult", "ReplicaManager", "ReplicaState", "log_config_for"]

log = logging.getLogger(__name__)


class PartitionStateStore(Protocol):
    """The controller-side metadata the replica manager reads and the ISR changes it asks for."""

    broker_ids: list[int]

    def get_topic(self, name: str) -> TopicMetadata | None: ...

    def all_topics(self) -> list[TopicMetadata]: ...

    def set_isr(self, topic: str, partition: int, isr: list[int], leader: int | None = None,
                leader_epoch: int | None = None) -> bool: ...

    def broker_epoch(self, broker_id: int) -> int:
        """The broker epoch of a live broker's current registration (KIP-903), -1 when it is not live."""
        ...


class ReplicaFetchers(Protocol):
    """The follower side: which partitions this broker fetches from which leader."""

    def add_partition(self, part: Partition, leader_id: int) -> None: ...

    def remove_partition(self, part: Partition) -> None: ...

    def has_partition(self, part: Partition) -> bool: ...


class _NoFetchers:
    def add_partition(self, part: Partition, leader_id: int) -> None:
        pass

    def remove_partition(self, part: Partition) -> None:
        pass

    def has_partition(self, part: Partition) -> bool:
        return False


def _always() -> bool:
    return True


def log_config_for(topic: TopicMetadata, defaults: dict[str, str]) -> LogConfig:
    """Topic configs over broker defaults, as a LogConfig."""
    cfg = {**defaults, **topic.configs}
    return LogConfig(
        segment_bytes=int(cfg["segment.bytes"]),
        retention_ms=int(cfg["retention.ms"]),
        retention_bytes=int(cfg["retention.bytes"]),
        message_timestamp_type=cfg["message.timestamp.type"],
        index_interval_bytes=int(cfg["index.interval.bytes"]),
        segment_ms=int(cfg["segment.ms"]),
        cleanup_policy=frozenset(v.strip() for v in cfg["cleanup.policy"].split(",") if v.strip()),
        delete_retention_ms=int(cfg["delete.retention.ms"]),
        min_cleanable_dirty_ratio=float(cfg["min.cleanable.dirty.ratio"]),
        min_compaction_lag_ms=int(cfg["min.compaction.lag.ms"]),
        max_compaction_lag_ms=int(cfg["max.compaction.lag.ms"]),
        max_message_bytes=int(cfg["max.message.bytes"]),
        timestamp_before_max_ms=_timestamp_bound(cfg, "message.timestamp.before.max.ms"),
        timestamp_after_max_ms=_timestamp_bound(cfg, "message.timestamp.after.max.ms"),
    )


def _timestamp_bound(cfg: dict[str, str], key: str) -> int:
    """A KIP-937 timestamp bound; left at its default (unbounded) it falls back to the deprecated
    ``message.timestamp.difference.max.ms``, as Kafka 3.6+ ``LogConfig`` does."""
    value = int(cfg[key])
    if value == INT64_MAX:
        return int(cfg.get("message.timestamp.difference.max.ms", INT64_MAX))
    return value


class ReplicaManager:
    """Owns this broker's partitions and their logs.

    Every change to a partition (append, high watermark, log start offset,
    leadership, deletion) completes the delayed fetches and produces waiting
    on that partition only (:meth:`partition_changed`).
    """

    def __init__(self, node_id: int, config: BrokerConfig, metadata: PartitionStateStore, *,
                 clock: Clock = SYSTEM_CLOCK, fetchers: ReplicaFetchers | None = None,
                 delayed_fetch: DelayedOperationPurgatory | None = None,
                 delayed_produce: DelayedOperationPurgatory | None = None) -> None:
        self.node_id = node_id
        self.config = config
        self.metadata = metadata
        self.clock = clock
        self.fetchers: ReplicaFetchers = fetchers or _NoFetchers()
        self.delayed_fetch = delayed_fetch or DelayedOperationPurgatory("Fetch")
        self.delayed_produce = delayed_produce or DelayedOperationPurgatory("Produce")
        # Each of log.dirs keeps its partitions in <dir>/logs and is reported as <dir>.
        self.log_manager = LogManager(None, clock, log_dirs=[LogDir.of(d, d / "logs") for d in config.all_log_dirs])
        self.partitions: dict[TopicPartition, Partition] = {}
        self.isr_shrinks = 0
        self.isr_expands = 0
        # Whether an AlterPartition would reach the controller now (a broker of a cluster: not paused, not cut off).
        self.controller_reachable: Callable[[], bool] = _always
        # A broker whose controller is in another process sends ISR changes there (AlterPartitionManager.submit:
        # False until the answer is applied, then on_isr_changed); None: the shared metadata is the controller.
        self.alter_partition: Callable[[Partition, list[int]], bool] | None = None
        # Told (partition, leading) when this broker becomes or stops being a partition's leader, or the replica
        # goes: Kafka's ReplicaManager calls the coordinators' onElection / onResignation for their topics.
        self.leadership_listener: Callable[[Partition, bool], None] | None = None

    # -- partitions --------------------------------------------------------
    def load(self) -> None:
        """Open the logs of every known topic (start-up with a data dir)."""
        defaults = self.config.topic_defaults()
        topics = self.metadata.all_topics()
        configs = {t.name: log_config_for(t, defaults) for t in topics}
        replicated = {(t.name, p.partition) for t in topics for p in t.partitions if len(p.replicas) > 1}
        self.log_manager.load_existing(configs, replicated)
        for topic in topics:
            self.remove_stray_logs(topic)
            self.ensure_partitions(topic)

    def ensure_partitions(self, topic: TopicMetadata) -> None:
        """Create local partitions for every replica of ``topic`` this broker hosts."""
        cfg = log_config_for(topic, self.config.topic_defaults())
        me = self.node_id
        for pm in topic.partitions:
            key = TopicPartition(topic.name, pm.partition)
            if me in pm.replicas and key not in self.partitions:
                lg = self.log_manager.get_or_create(topic.name, pm.partition, cfg)
                if len(pm.replicas) > 1:
                    lg.auto_advance_hw = False  # the leader advances it from follower positions
                part = self.partitions[key] = Partition(topic.name, pm.partition, lg, pm.leader_epoch,
                                                        local_id=me, leader_id=pm.leader, replicas=list(pm.replicas))
                if lg.log_end_offset > lg.log_start_offset:
                    self.rebuild_producer_state(part)  # a loaded log: open transactions, aborted index
                if part.is_leader and not part.is_replicated:
                    self._tell_leadership(part, True)  # (a replicated one is made leader by apply_leadership)

    def remove_stale_replicas(self, topic: TopicMetadata) -> list[int]:
        """Drop the local replicas of ``topic`` this broker no longer hosts (a reassignment completed or was
        cancelled without it): Kafka's StopReplica with ``deletePartition``.  Each stops fetching, stops
        leading (waiting requests wake to NOT_LEADER_OR_FOLLOWER), and its log is deleted.  Returns the
        partitions removed."""
        removed = []
        for (name, index), part in list(self.partitions.items()):
            if name != topic.name:
                continue
            pm = topic.partition(index)
            if pm is None or self.node_id in pm.replicas:
                continue
            del self.partitions[part.tp]
            self.fetchers.remove_partition(part)
            part.leader_id, part.remote = -1, {}
            self.partition_changed(part.tp)
            self._tell_leadership(part, False)
            self.log_manager.delete_partition(name, index)
            log.info("broker %d: replica of %s-%d removed (replicas now %s); its log is deleted", self.node_id,
                     name, index, pm.replicas)
            removed.append(index)
        return removed

    def remove_stray_logs(self, topic: TopicMetadata) -> None:
        """At start-up, delete the logs of ``topic`` whose partition no longer has this broker as a replica
        (moved away while it was down: Kafka's stray replicas, KAFKA-14616)."""
        registered = set(self.metadata.broker_ids)
        if self.node_id not in registered:
            return  # not this cluster's metadata (a lone broker started with another node.id): keep the data
        for index in self.log_manager.partitions(topic.name):
            pm = topic.partition(index)
            if pm is not None and self.node_id not in pm.replicas and registered.issuperset(pm.replicas):
                log.info("broker %d: deleting stray log %s-%d (replicas %s)", self.node_id, topic.name, index,
                         pm.replicas)
                self.log_manager.delete_partition(topic.name, index)

    def apply_log_config(self, topic: TopicMetadata) -> None:
        """A topic's configs changed (IncrementalAlterConfigs): its logs take the new LogConfig."""
        cfg = log_config_for(topic, self.config.topic_defaults())
        for (name, index), part in self.partitions.items():
            if name == topic.name:
                part.log.config = cfg
                future = self.log_manager.get_future(name, index)
                if future is not None:
                    future.config = cfg

    def cleaner_targets(self) -> list[CleanerTarget]:
        """This broker's replicas of compacted topics, for the log cleaner; not those moving to another log
        dir (Kafka's ``abortAndPauseCleaning`` until the future log is swapped in)."""
        moving = self.log_manager.future_logs
        return [CleanerTarget(f"{tp[0]}-{tp[1]}", part.log, _lso_of(part), _producers_of(part))
                for tp, part in self.partitions.items() if part.log.config.compact and tp not in moving]

    def remove_topic(self, name: str) -> None:
        for key in [k for k in self.partitions if k[0] == name]:
            part = self.partitions.pop(key)
            self.fetchers.remove_partition(part)
            self._tell_leadership(part, False)
            self.partition_changed(key)  # waiting requests re-read and report the topic as gone
        self.log_manager.delete_topic(name)

    def max_producer_id(self) -> int:
        """The largest producer id found in the hosted logs (-1 if none), so that ids handed out after
        a restart do not reuse one (Kafka's ProducerIdManager persists its blocks instead)."""
        return max((pid for part in self.partitions.values() for pid in part.producers.producers), default=-1)

    def get(self, topic: str, index: int) -> Partition | None:
        return self.partitions.get((topic, index))  # type: ignore[call-overload]  # == TopicPartition(topic, index)

    # -- append ------------------------------------------------------------
    def append_records(self, part: Partition, records: Records, now_ms: int, max_message_bytes: int, *,
                       check_records: bool = True) -> ProduceResult:
        """Validate and append one partition's produce data (Kafka's ``appendToLocalLog``).

        ``records`` is normally a writable memoryview into the request frame; the
        batches are stamped with offsets in place and stored without copying.  ``check_records`` False: a
        coordinator's own records (``AppendOrigin.Coordinator``), not decoded again for the per-record checks.
        """
        if not records:
            return ProduceResult(ErrorCode.CORRUPT_MESSAGE, message="empty records")
        if isinstance(records, list):  # chunks (a Python caller's): one contiguous copy
            records = b"".join(records)
        writable = isinstance(records, memoryview) and not records.readonly
        buf = records if writable else bytearray(records)
        batches, corrupt = read_batches(buf, produce=True)
        for header, _view in batches:
            if header.batch_length + LOG_OVERHEAD > max_message_bytes:
                return ProduceResult(
                    ErrorCode.MESSAGE_TOO_LARGE,
                    message=f"batch of {header.size} bytes exceeds max.message.bytes={max_message_bytes}",
                )
        if corrupt is not None:  # bad CRC or structure (InvalidRecordError is a subclass)
            return ProduceResult(ErrorCode.CORRUPT_MESSAGE, message=str(corrupt))
        if not batches:
            return ProduceResult(ErrorCode.CORRUPT_MESSAGE, message="no complete record batch")
        lg = part.log
        if check_records and needs_record_validation(lg.config, batches):  # compacted, timestamp-bounded: decode
            try:
                failure = validate_records(batches, lg.config, part.tp, now_ms)
            except CorruptRecordError as exc:
                return ProduceResult(ErrorCode.CORRUPT_MESSAGE, message=str(exc))
            if failure is not None:
                log.debug("Error processing append operation on partition %s-%d: %s", part.topic, part.index,
                         failure.message)
                return ProduceResult(failure.error, -1, -1, lg.log_start_offset, failure.message,
                                     record_errors=failure.record_errors)
        # Idempotence: every batch of an idempotent producer must be in sequence; transactional batches
        # must come from a producer id, and a producer with a transaction open here sends only those.
        producers = part.producers
        idempotent = False  # producer state to update: idempotent batches, and a coordinator's transactional ones
        for header, _view in batches:
            attributes = header.attributes
            if attributes & CONTROL_MASK:
                return ProduceResult(ErrorCode.INVALID_RECORD, message="clients may not produce control batches")
            producer_id = header.producer_id
            if producer_id < 0:
                if attributes & TRANSACTIONAL_MASK:
                    return ProduceResult(ErrorCode.INVALID_RECORD,
                                         message="transactional batch without a producer id")
                continue
            err = producers.check_transactional(producer_id, header.producer_epoch,
                                                bool(attributes & TRANSACTIONAL_MASK))
            if err:
                return ProduceResult(err, message=err.name)
            if attributes & TRANSACTIONAL_MASK:
                idempotent = True  # (a coordinator's TxnOffsetCommit batch has no sequence)
            if header.base_sequence >= 0:
                idempotent = True
                last_seq = header.base_sequence + header.last_offset_delta
                check = producers.check(producer_id, header.producer_epoch, header.base_sequence, last_seq,
                                        bool(attributes & TRANSACTIONAL_MASK))
                if check.error:
                    return ProduceResult(check.error, message=check.error.name)
                if check.duplicate is not None:
                    if len(batches) == 1:
                        d = check.duplicate
                        return ProduceResult(ErrorCode.NONE, d.first_offset, -1, lg.log_start_offset,
                                             last_offset=d.last_offset)
                    return ProduceResult(ErrorCode.DUPLICATE_SEQUENCE_NUMBER)
        if len(batches) == 1:
            header, view = batches[0]
            info = lg.append_as_leader((view,), part.leader_epoch, now_ms, (header,))
        else:
            info = lg.append_as_leader([v for _, v in batches], part.leader_epoch, now_ms, [h for h, _ in batches])
        if idempotent:
            offset = info.first_offset
            for header, _ in batches:
                if header.producer_id >= 0 and (header.base_sequence >= 0 or header.is_transactional):
                    last = offset + header.last_offset_delta
                    producers.update(
                        header.producer_id,
                        header.producer_epoch,
                        BatchMetadata(header.base_sequence, header.base_sequence + header.last_offset_delta,
                                      offset, last, header.max_timestamp),
                        header.is_transactional,
                    )
                offset += header.last_offset_delta + 1
        if not lg.auto_advance_hw:
            self.maybe_increment_hw(part)
        self.delayed_fetch.check_and_complete(part.tp)
        return ProduceResult(ErrorCode.NONE, info.first_offset, info.log_append_time, lg.log_start_offset,
                             last_offset=info.last_offset)

    def append_as_follower(self, part: Partition, records: bytes | memoryview) -> None:
        """Store replicated batches and rebuild producer state from them, as a Kafka follower
        does, so idempotent producers carry on after a failover."""
        part.log.append_as_follower(records)
        self._update_producers(part, records)
        self.delayed_fetch.check_and_complete(part.tp)

    def replace_current_with_future(self, part: Partition) -> None:
        """A replica moved to another log dir: its caught-up future log becomes its log (Kafka's
        ``Partition.maybeReplaceCurrentWithFutureReplica``); producer state is unchanged, as the logs are.
        A failed swap may have reopened the log: the partition takes the log manager's either way."""
        try:
            part.log = self.log_manager.replace_current_with_future(part.topic, part.index)
        finally:
            part.log = self.log_manager.logs.get(part.tp, part.log)
            self.partition_changed(part.tp)

    def delete_records(self, part: Partition, offset: int) -> int:
        """DeleteRecords: move the log start offset to ``offset`` (-1: the high watermark); returns
        the new low watermark.  Raises ``OffsetOutOfRangeError`` past the high watermark."""
        lg = part.log
        low = lg.delete_records_before(lg.high_watermark if offset == -1 else offset)
        self.partition_changed(part.tp)  # waiting fetches see the new log start
        return low

    def rebuild_producer_state(self, part: Partition) -> None:
        """Kafka ``rebuildProducerState`` (after a load or a truncation): replay the whole local log,
        which also rebuilds the open transactions and the aborted-transactions index."""
        part.producers = ProducerStateManager()
        lg = part.log
        lg.txn_index.clear()
        for h, view in lg.iter_batches_from(lg.log_start_offset):
            self._update_producer(part, h, view)

    def _update_producers(self, part: Partition, records: bytes | memoryview) -> None:
        for h, view in iter_batches(records, check_crc=False):
            self._update_producer(part, h, view)

    @staticmethod
    def _update_producer(part: Partition, h: RecordBatchHeader, view: memoryview) -> None:
        """Producer state from one stored batch (a follower's or a reload's view of the leader's appends)."""
        if h.producer_id < 0:
            return
        if h.is_control:
            try:
                control_type, coordinator_epoch = read_end_txn_marker(view)
            except CorruptRecordError:
                return
            if control_type in (ControlRecordType.COMMIT, ControlRecordType.ABORT):
                done = part.producers.complete_txn(h.producer_id, h.producer_epoch, coordinator_epoch,
                                                   h.base_offset, control_type == ControlRecordType.ABORT,
                                                   h.max_timestamp, part.log.log_start_offset)
                _index_aborted(part, done)
            return
        if h.base_sequence >= 0 or h.is_transactional:
            part.producers.update(h.producer_id, h.producer_epoch, BatchMetadata(
                h.base_sequence, h.base_sequence + h.last_offset_delta, h.base_offset,
                h.base_offset + h.last_offset_delta, h.max_timestamp), h.is_transactional)

    # -- transaction markers (Kafka's ReplicaManager for WriteTxnMarkers) -----------
    def write_txn_marker(self, part: Partition, producer_id: int, producer_epoch: int, coordinator_epoch: int,
                         commit: bool, transaction_version: int = 0) -> ErrorCode:
        """Append a COMMIT or ABORT marker for one producer as leader (``appendRecords`` with
        ``AppendOrigin.Coordinator``): closes its open transaction; an abort enters the index.
        ``transaction_version`` (WriteTxnMarkers v2, KIP-1228) picks the producer-epoch check."""
        if not part.is_leader:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        err = part.producers.check_marker(producer_id, producer_epoch, coordinator_epoch, transaction_version)
        if err:
            return err
        now_ms = self.clock.time_ms()
        lg = part.log
        batch = bytearray(build_control_batch(ControlRecordType.COMMIT if commit else ControlRecordType.ABORT,
                                              producer_id=producer_id, producer_epoch=producer_epoch,
                                              coordinator_epoch=coordinator_epoch, timestamp=now_ms))
        lso = part.last_stable_offset
        info = lg.append_as_leader([memoryview(batch)], part.leader_epoch, now_ms)
        done = part.producers.complete_txn(producer_id, producer_epoch, coordinator_epoch, info.first_offset,
                                           not commit, now_ms, lg.log_start_offset)
        _index_aborted(part, done, lso)
        if not lg.auto_advance_hw:
            self.maybe_increment_hw(part)
        self.partition_changed(part.tp)  # the LSO moved: read_committed fetches may complete
        return ErrorCode.NONE

    # -- leadership (Kafka's makeLeader / makeFollower) --------------------
    def apply_leadership(self, topic_name: str | None = None) -> None:
        """Bring local partitions (of one topic, or all) in line with the shared metadata,
        as a LeaderAndIsr request would: become leader or follower where that changed."""
        md = self.metadata
        for (name, index), part in list(self.partitions.items()):
            if topic_name is not None and name != topic_name:
                continue
            topic = md.get_topic(name)
            if topic is None or index >= topic.num_partitions:
                continue
            pm = topic.partitions[index]
            part.replicas = list(pm.replicas)
            if pm.leader == part.local_id:
                if not part.is_leader or part.leader_epoch != pm.leader_epoch or (
                        part.is_replicated and not part.remote):
                    self.make_leader(part, pm)
                else:
                    self.maybe_increment_hw(part)  # the ISR may have lost a stopped broker
            elif pm.leader != part.leader_id or pm.leader_epoch != part.leader_epoch or (
                    pm.leader >= 0 and not self.fetchers.has_partition(part)):
                self.make_follower(part, pm)

    def make_leader(self, part: Partition, pm: PartitionMetadata) -> None:
        """Kafka ``Partition.makeLeader``: new epoch in the epoch cache, fresh follower states
        (in-sync followers count as caught up now), stop fetching, maybe advance the HW."""
        now = self.clock.time_ms()
        was = part.leader_id
        part.leader_id, part.leader_epoch = part.local_id, pm.leader_epoch
        self.fetchers.remove_partition(part)
        lg = part.log
        if part.is_replicated:
            lg.auto_advance_hw = False
            if pm.leader_epoch > lg.latest_epoch():
                lg.epoch_cache.assign(pm.leader_epoch, lg.log_end_offset)
        part.remote = {b: ReplicaState(b, last_caught_up_time_ms=now if b in pm.isr else 0)
                       for b in pm.replicas if b != part.local_id}
        log.info("broker %d: leader of %s-%d at epoch %d (was %d), LEO %d HW %d", part.local_id, part.topic,
                 part.index, pm.leader_epoch, was, lg.log_end_offset, lg.high_watermark)
        self.maybe_increment_hw(part)
        self.partition_changed(part.tp)
        self._tell_leadership(part, True)

    def _tell_leadership(self, part: Partition, leading: bool) -> None:
        if self.leadership_listener is not None:
            self.leadership_listener(part, leading)

    def make_follower(self, part: Partition, pm: PartitionMetadata) -> None:
        """Kafka ``Partition.makeFollower`` + ``ReplicaFetcherManager.addFetcherForPartitions``:
        follow the new leader, truncating first (OffsetForLeaderEpoch) before fetching."""
        part.leader_id, part.leader_epoch = pm.leader, pm.leader_epoch
        part.remote = {}
        part.log.auto_advance_hw = False
        self.fetchers.remove_partition(part)
        if pm.leader >= 0:
            self.fetchers.add_partition(part, pm.leader)
        log.info("broker %d: follower of %s-%d, leader %d epoch %d, LEO %d", part.local_id, part.topic,
                 part.index, pm.leader, pm.leader_epoch, part.log.log_end_offset)
        self.partition_changed(part.tp)  # waiting fetches and produces see NOT_LEADER_OR_FOLLOWER
        self._tell_leadership(part, False)

    # -- leader side of replication ----------------------------------------
    def record_follower_fetch(self, part: Partition, replica_id: int, fetch_offset: int, now_ms: int,
                              broker_epoch: int = -1) -> None:
        """Kafka ``Partition.updateFollowerFetchState``: position, last caught-up time, the broker epoch the
        follower fetched with (Fetch v15+, KIP-903; -1 when not sent), ISR expansion and high watermark."""
        if replica_id not in part.replicas or replica_id == part.local_id:
            return
        st = part.remote.get(replica_id)
        if st is None:
            st = part.remote[replica_id] = ReplicaState(replica_id)
        st.broker_epoch = broker_epoch
        leo = part.log.log_end_offset
        if fetch_offset >= leo:
            st.last_caught_up_time_ms = max(st.last_caught_up_time_ms, now_ms)
        elif fetch_offset >= st.last_fetch_leader_log_end_offset:
            st.last_caught_up_time_ms = max(st.last_caught_up_time_ms, st.last_fetch_time_ms)
        st.log_end_offset = fetch_offset
        st.last_fetch_leader_log_end_offset = leo
        st.last_fetch_time_ms = now_ms
        self._maybe_expand_isr(part, st)
        self.maybe_increment_hw(part)

    def _partition_metadata(self, part: Partition) -> PartitionMetadata | None:
        topic = self.metadata.get_topic(part.topic)
        return topic.partition(part.index) if topic is not None else None

    def isr(self, part: Partition) -> list[int]:
        if not part.is_replicated:
            return [part.local_id]
        pm = self._partition_metadata(part)
        return list(pm.isr) if pm is not None else [part.local_id]

    def _isr_eligible(self, st: ReplicaState) -> bool:
        """Kafka ``Partition.isReplicaIsrEligible`` (KIP-903): the follower is live and fetched with the broker
        epoch of its current registration, or with none (-1, an older Fetch version)."""
        current = self.metadata.broker_epoch(st.broker_id)
        return current >= 0 and st.broker_epoch in (-1, current)

    def _maybe_expand_isr(self, part: Partition, st: ReplicaState) -> None:
        pm = self._partition_metadata(part)
        if pm is None or st.broker_id in pm.isr:
            return
        if st.log_end_offset >= part.log.high_watermark and self._isr_eligible(st):
            old_isr = list(pm.isr)
            new_isr = sorted(set(old_isr) | {st.broker_id}, key=pm.replicas.index)
            if self._alter_isr(part, new_isr):
                log.info("broker %d: expanded ISR of %s-%d from %s to %s", part.local_id, part.topic, part.index,
                         old_isr, new_isr)
                self.isr_expands += 1

    def maybe_shrink_isr(self, now_ms: int) -> None:
        """Kafka ``Partition.maybeShrinkIsr``: drop followers not caught up for replica.lag.time.max.ms."""
        lag_max = self.config.replica_lag_time_max_ms
        for part in list(self.partitions.values()):
            if not part.is_leader or not part.is_replicated:
                continue
            pm = self._partition_metadata(part)
            if pm is None:
                continue
            out = [b for b in pm.isr if b != part.local_id and
                   now_ms - (part.remote[b].last_caught_up_time_ms if b in part.remote else 0) > lag_max]
            if out:
                new_isr = [b for b in pm.isr if b not in out]
                old_isr = list(pm.isr)
                if self._alter_isr(part, new_isr):
                    log.info("broker %d: shrank ISR of %s-%d from %s to %s (out of sync: %s)", part.local_id,
                             part.topic, part.index, old_isr, new_isr, out)
                    self.isr_shrinks += 1
                    self.maybe_increment_hw(part)

    def _alter_isr(self, part: Partition, isr: list[int]) -> bool:
        """Ask the controller for an ISR change (Kafka's AlterPartition, with this leader's epoch); False when
        it cannot be reached (:attr:`controller_reachable`) or refuses (a stale leader)."""
        if not self.controller_reachable():
            return False
        if self.alter_partition is not None:
            return self.alter_partition(part, isr)
        return self.metadata.set_isr(part.topic, part.index, isr, part.local_id, part.leader_epoch)

    def on_isr_changed(self, part: Partition, old: list[int], new: list[int]) -> None:
        """The controller applied an ISR change this leader sent (another process's controller answered):
        ``old`` as the leader asked, ``new`` as applied."""
        log.info("broker %d: %s ISR of %s-%d from %s to %s", part.local_id,
                 "expanded" if len(new) > len(old) else "shrank", part.topic, part.index, old, new)
        if len(new) > len(old):
            self.isr_expands += 1
        elif len(new) < len(old):
            self.isr_shrinks += 1
        self.maybe_increment_hw(part)

    def replication_metrics(self) -> dict[str, float]:
        """Kafka's ``kafka.server:type=ReplicaManager`` gauges (ISR changes as totals)."""
        leaders = [p for p in self.partitions.values() if p.is_leader]
        under = sum(1 for p in leaders if p.is_replicated and len(self.isr(p)) < len(p.replicas))
        prefix = "kafka.server:type=ReplicaManager,name="
        return {prefix + "PartitionCount": len(self.partitions), prefix + "LeaderCount": len(leaders),
                prefix + "UnderReplicatedPartitions": under, prefix + "IsrShrinksTotal": self.isr_shrinks,
                prefix + "IsrExpandsTotal": self.isr_expands}

    def maybe_increment_hw(self, part: Partition) -> bool:
        """Kafka ``Partition.maybeIncrementLeaderHW``: HW = min LEO over the maximal ISR (the ISR and that of an
        AlterPartition in flight: :attr:`Partition.pending_isr`), never backwards."""
        lg = part.log
        if not part.is_leader or lg.auto_advance_hw:
            return False
        new_hw = lg.log_end_offset
        isr = self.isr(part)
        for b in isr if part.pending_isr is None else set(isr) | set(part.pending_isr):
            if b == part.local_id:
                continue
            st = part.remote.get(b)
            new_hw = min(new_hw, st.log_end_offset if st is not None else -1)
        if new_hw > lg.high_watermark:
            lg.high_watermark = new_hw
            self.partition_changed(part.tp)  # consumers waiting below the HW and acks=all produces
            return True
        return False

    def set_follower_high_watermark(self, part: Partition, leader_hw: int) -> None:
        """A follower's HW: min(leader HW, local log end); wakes waiters when it moved."""
        lg = part.log
        hw = min(leader_hw, lg.log_end_offset)
        if hw != lg.high_watermark:
            lg.high_watermark = hw
            self.partition_changed(part.tp)

    # -- delayed operations (Kafka's tryCompleteDelayedFetch / Produce) ------
    def partition_changed(self, tp: TopicPartition) -> None:
        """Wake the fetches and produces waiting on ``tp`` (and only those)."""
        self.delayed_fetch.check_and_complete(tp)
        self.delayed_produce.check_and_complete(tp)


def _lso_of(part: Partition) -> Callable[[], int]:
    return lambda: part.last_stable_offset


def _producers_of(part: Partition) -> Callable[[], dict[int, tuple[int, int]]]:
    """Each producer's last data offset (-1: none) and epoch (Kafka ``lastRecordsOfActiveProducers``)."""
    def snapshot() -> dict[int, tuple[int, int]]:
        return {pid: (e.batches[-1].last_offset if e.batches else -1, e.epoch)
                for pid, e in part.producers.producers.items()}
    return snapshot


def _index_aborted(part: Partition, done: CompletedTxn | None, lso: int | None = None) -> None:
    """Record an aborted transaction in the partition's index (once, however often it is replayed)."""
    if done is not None and done.is_aborted:
        idx = part.log.txn_index
        if not idx.entries or idx.entries[-1].last_offset < done.last_offset:
            idx.append(AbortedTxn(done.producer_id, done.first_offset, done.last_offset,
                                  part.last_stable_offset if lso is None else lso))
