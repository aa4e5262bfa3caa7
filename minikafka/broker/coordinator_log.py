"""One partition of a coordinator's internal topic: ``__consumer_offsets``, ``__transaction_state``,
``__share_group_state``.

Models what Kafka's coordinators write through ``CoordinatorRuntime`` / ``TransactionStateManager``: key/value
records (:mod:`minikafka.protocol.coordinator_records`) in v2 record batches appended to a partition log with
``cleanup.policy=compact``, so the log cleaner keeps only the latest record per key and drops tombstones after
``delete.retention.ms``.  Offsets committed inside a transaction are written as Kafka's group coordinator
writes them: a *transactional* batch under the producer id and epoch, closed by a COMMIT or ABORT control batch
(:meth:`CoordinatorLog.end_txn`); aborted transactions enter the log's aborted-transactions index, as a
partition leader's do, so the cleaner removes their records.  Replay (:meth:`CoordinatorLog.replay`) hands
every record and marker to the coordinator's loader and rebuilds that index; a torn tail is cut by the log's
own recovery, a record that does not decode is skipped with a warning.

Deliberate differences from Kafka: the partition is a local log under the data dir
(``<data_dir>/<topic>-<partition>/``), not a replicated topic partition (the brokers of a cluster share one
coordinator in one process); appends reach the OS at once (no fsync per write); no producer-state snapshots.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from pathlib import Path

from ..common import SYSTEM_CLOCK, Clock
from ..protocol.records import (NO_PRODUCER_EPOCH, NO_PRODUCER_ID, ControlRecordType, Record, RecordBatchHeader,
                                build_batch, build_control_batch)
from .coordinator_runtime import OnMarker, OnRecord, replay_log
from .log import Log, LogConfig
from .log.cleaner_manager import CleanerTarget
from .log.txn_index import AbortedTxn

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"
TRANSACTION_STATE_TOPIC = "__transaction_state"
SHARE_GROUP_STATE_TOPIC = "__share_group_state"
OFFSETS_TOPIC_SEGMENT_BYTES = 100 * 1024 * 1024  # offsets.topic.segment.bytes
TRANSACTION_STATE_SEGMENT_BYTES = 100 * 1024 * 1024  # transaction.state.log.segment.bytes
SHARE_GROUP_STATE_SEGMENT_BYTES = 100 * 1024 * 1024  # share.coordinator.state.topic.segment.bytes
COORDINATOR_LEADER_EPOCH = 0  # the partition is never led by anyone else



def has_local_log(data_dir: Path | None, topic: str, legacy_dir: str, legacy_file: str) -> bool:
    """Whether ``data_dir`` holds the local ``<topic>-0`` log of a coordinator used on its own (or the JSON-lines
    ``<legacy_dir>/<legacy_file>`` of an earlier version): what a coordinator on the replicated partitions carries
    over into them."""
    return data_dir is not None and ((data_dir / f"{topic}-0").is_dir()
                                     or (data_dir / legacy_dir / legacy_file).exists())


def compacted_log_config(segment_bytes: int, topic_defaults: Mapping[str, str] | None = None) -> LogConfig:
    """The LogConfig of an internal topic: ``cleanup.policy=compact`` and its ``segment.bytes``, the
    broker's cleaner defaults (``delete.retention.ms``, ``min.cleanable.dirty.ratio``, compaction lags)
    from ``topic_defaults`` (:meth:`~minikafka.broker.config.BrokerConfig.topic_defaults`) when given."""
    d = topic_defaults or {}
    base = LogConfig()
    return LogConfig(
        segment_bytes=segment_bytes,
        cleanup_policy=frozenset({"compact"}),
        delete_retention_ms=int(d.get("delete.retention.ms", base.delete_retention_ms)),
        min_cleanable_dirty_ratio=float(d.get("min.cleanable.dirty.ratio", base.min_cleanable_dirty_ratio)),
        min_compaction_lag_ms=int(d.get("min.compaction.lag.ms", base.min_compaction_lag_ms)),
        max_compaction_lag_ms=int(d.get("max.compaction.lag.ms", base.max_compaction_lag_ms)),
    )


class CoordinatorLog:
    """A compacted partition log of coordinator records, with the transactions open in it."""

    def __init__(self, data_dir: Path, topic: str, partition: int, config: LogConfig, *,
                 clock: Clock = SYSTEM_CLOCK) -> None:
        self.topic = topic
        self.partition = partition
        self.name = f"{topic}-{partition}"
        self.clock = clock  # stamps the batches and markers
        self.log = Log(topic, partition, config, Path(data_dir) / self.name)
        # Transactions with data in the log and no marker yet: producer id -> (first offset, producer epoch).
        self.open_txns: dict[int, tuple[int, int]] = {}
        self.records_written = 0

    # -- writes ---------------------------------------------------------------------------------------------
    def append(self, records: Iterable[tuple[bytes, bytes | None]], *, producer_id: int = NO_PRODUCER_ID,
               producer_epoch: int = NO_PRODUCER_EPOCH, transactional: bool = False) -> int:
        """Append ``(key, value)`` records (value None: a tombstone) as one batch; returns its first offset,
        -1 when there was nothing to write.  ``transactional``: the batch belongs to the open transaction of
        ``producer_id``, until :meth:`end_txn`."""
        recs = [Record(offset_delta=i, key=k, value=v) for i, (k, v) in enumerate(records)]
        if not recs:
            return -1
        now = self.clock.time_ms()
        batch = build_batch(recs, producer_id=producer_id, producer_epoch=producer_epoch,
                            is_transactional=transactional, base_timestamp=now)
        info = self.log.append_as_leader([bytearray(batch)], COORDINATOR_LEADER_EPOCH, now)
        if transactional:
            first = self.open_txns.get(producer_id, (info.first_offset, producer_epoch))[0]
            self.open_txns[producer_id] = (first, producer_epoch)
        self.records_written += len(recs)
        return info.first_offset

    def end_txn(self, producer_id: int, commit: bool) -> bool:
        """Write the COMMIT or ABORT marker of ``producer_id``'s open transaction (none open: nothing, False)."""
        txn = self.open_txns.get(producer_id)
        if txn is None:
            return False
        now = self.clock.time_ms()
        marker = build_control_batch(ControlRecordType.COMMIT if commit else ControlRecordType.ABORT,
                                     producer_id=producer_id, producer_epoch=txn[1], timestamp=now)
        info = self.log.append_as_leader([bytearray(marker)], COORDINATOR_LEADER_EPOCH, now)
        self._complete_txn(producer_id, commit, info.first_offset)
        return True

    def _complete_txn(self, producer_id: int, commit: bool, marker_offset: int) -> None:
        """The marker at ``marker_offset`` closed the producer's transaction; an abort enters the index with
        the last stable offset after it (Kafka's ``ProducerStateManager.lastStableOffset``)."""
        txn = self.open_txns.pop(producer_id, None)
        if txn is None or commit:
            return
        lso = min((first for first, _ in self.open_txns.values()), default=marker_offset + 1)
        index = self.log.txn_index
        if not index.entries or index.entries[-1].last_offset < marker_offset:
            index.append(AbortedTxn(producer_id, txn[0], marker_offset, lso))

    # -- replay ---------------------------------------------------------------------------------------------
    def replay(self, on_record: OnRecord, on_marker: OnMarker | None = None) -> int:
        """Hand every record of the log, in order, to ``on_record`` and every transaction marker to
        ``on_marker``; rebuilds the open transactions and the aborted-transactions index.  A record
        ``on_record`` rejects (ValueError, KeyError, TypeError) or without a key is skipped with a warning.
        Returns the number of records applied."""
        lg = self.log
        self.open_txns.clear()
        lg.txn_index.clear()
        current: list[RecordBatchHeader] = []

        def batch(h: RecordBatchHeader) -> None:
            current[:] = [h]
            if not h.is_control and h.is_transactional and h.producer_id >= 0 and h.producer_id not in self.open_txns:
                self.open_txns[h.producer_id] = (h.base_offset, h.producer_epoch)

        def marker(producer_id: int, commit: bool) -> None:
            self._complete_txn(producer_id, commit, current[0].base_offset)
            if on_marker is not None:
                on_marker(producer_id, commit)

        applied = replay_log(lg, self.name, on_record, marker, batch)
        self.records_written = applied
        return applied

    # -- the log cleaner ------------------------------------------------------------------------------------
    def last_stable_offset(self) -> int:
        """The first offset of the earliest open transaction, else the log end offset: the cleaner stops there."""
        return min((first for first, _ in self.open_txns.values()), default=self.log.log_end_offset)

    def cleaner_target(self) -> CleanerTarget:
        """This log for the log cleaner (no producer state to keep: coordinators write no idempotent batches)."""
        return CleanerTarget(self.name, self.log, self.last_stable_offset, dict)

    # -- lifecycle ------------------------------------------------------------------------------------------
    def sync(self) -> None:
        """fsync what was written (after a migration, before the old file goes)."""
        self.log.flush(fsync=True)

    def close(self) -> None:
        self.log.close()


class CoordinatorLogStore:
    """What the three coordinator stores share: their optional :class:`CoordinatorLog` (None in memory),
    its figures, its place in the log cleaner and its closing."""

    _log: CoordinatorLog | None = None

    @property
    def log(self) -> CoordinatorLog | None:
        return self._log

    @property
    def records_written(self) -> int:
        """Records replayed on load plus those appended since."""
        return self._log.records_written if self._log is not None else 0

    def cleaner_targets(self) -> list[CleanerTarget]:
        """This partition for the log cleaner (which stops at the first offset of an open transaction)."""
        return [self._log.cleaner_target()] if self._log is not None else []

    def close(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None
