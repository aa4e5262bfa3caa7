"""Persistence of transaction state: the compacted ``__transaction_state`` partition log.

Models the storage half of Kafka's ``TransactionStateManager``: every change of a transactional id's
:class:`~.metadata.TransactionMetadata` is appended to ``<data_dir>/__transaction_state-<partition>/`` (a
partition log with ``cleanup.policy=compact``, :class:`~minikafka.broker.coordinator_log.CoordinatorLog`) as
Kafka's ``TransactionLogKey(transactional id)`` -> ``TransactionLogValue`` record
(:mod:`minikafka.protocol.coordinator_records`, ``TransactionLog.valueToBytes``); an expired id is a tombstone.
Replay keeps the last record per id.  The partitions of the transaction include, as Kafka's do, the
``__consumer_offsets`` partition of each group whose offsets joined it (``offsets.topic.num.partitions``).

Kafka does not persist the previous producer epoch (a loaded ``TransactionMetadata`` has none); here it is
derived on load from the epoch, as every epoch bump leaves it one below (an epoch 0 after an overflow into
a new producer id: the last epoch of the previous id).  Logs of earlier versions
(``<data_dir>/__transaction_state/transactions.log``, JSON lines) are migrated into the new log on load and
removed.  Deliberate difference: no replication (the cluster's brokers share one coordinator in one
process) and no fsync per change.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from ...common import SYSTEM_CLOCK, Clock, TopicPartition
from ...common.hashing import partition_for_key
from ...protocol.coordinator_records import (TransactionLogKey, TransactionLogValue, TransactionPartitions,
                                             decode_transaction_record, encode_record)
from ...protocol.records import RecordBatchHeader
from ..coordinator_log import (OFFSETS_TOPIC, TRANSACTION_STATE_SEGMENT_BYTES, TRANSACTION_STATE_TOPIC,
                               CoordinatorLog, CoordinatorLogStore, compacted_log_config)
from ..json_lines import replay_json_lines
from ..log import LogConfig
from .metadata import MAX_EPOCH, NO_PRODUCER_EPOCH, TransactionMetadata, TransactionState

log = logging.getLogger(__name__)

S = TransactionState

# Kafka's TransactionState ids, as the transaction log stores them.
STATE_IDS: dict[TransactionState, int] = {
    S.EMPTY: 0, S.ONGOING: 1, S.PREPARE_COMMIT: 2, S.PREPARE_ABORT: 3, S.COMPLETE_COMMIT: 4,
    S.COMPLETE_ABORT: 5, S.DEAD: 6, S.PREPARE_EPOCH_FENCE: 7,
}
STATES_BY_ID: dict[int, TransactionState] = {v: k for k, v in STATE_IDS.items()}

# The JSON-lines log of earlier versions, migrated on load.
LEGACY_DIR_NAME = "__transaction_state"
LEGACY_FILE_NAME = "transactions.log"


def transaction_log_value(meta: TransactionMetadata) -> TransactionLogValue:
    """The record value of ``meta`` (Kafka's ``TransactionLog.valueToBytes``: no partitions when Empty)."""
    parts: tuple[TransactionPartitions, ...] | None = None
    if meta.state != S.EMPTY:
        by_topic: dict[str, set[int]] = {}
        for topic, partition in meta.partitions:
            by_topic.setdefault(topic, set()).add(partition)
        if meta.offsets_partitions:
            by_topic.setdefault(OFFSETS_TOPIC, set()).update(meta.offsets_partitions)
        parts = tuple(TransactionPartitions(t, tuple(sorted(ps))) for t, ps in sorted(by_topic.items()))
    return TransactionLogValue(
        producer_id=meta.producer_id, producer_epoch=meta.producer_epoch, transaction_timeout_ms=meta.timeout_ms,
        transaction_status=STATE_IDS[meta.state], transaction_partitions=parts,
        transaction_last_update_timestamp_ms=meta.last_update_ms, transaction_start_timestamp_ms=meta.start_ms,
        previous_producer_id=meta.last_producer_id, client_transaction_version=meta.client_version)


def metadata_from_record(transactional_id: str, value: TransactionLogValue) -> TransactionMetadata:
    """The metadata a record holds (Kafka's ``TransactionLog.readTxnRecordValue``)."""
    state = STATES_BY_ID.get(value.transaction_status)
    if state is None:
        raise ValueError(f"unknown transaction state id {value.transaction_status}")
    partitions: set[TopicPartition] = set()
    offsets_partitions: set[int] = set()
    if state != S.EMPTY:
        for p in value.transaction_partitions or ():
            if p.topic == OFFSETS_TOPIC:
                offsets_partitions.update(p.partition_ids)
            else:
                partitions.update(TopicPartition(p.topic, i) for i in p.partition_ids)
    if value.producer_epoch > 0:
        last_epoch = value.producer_epoch - 1
    elif value.previous_producer_id >= 0:
        last_epoch = MAX_EPOCH - 1
    else:
        last_epoch = NO_PRODUCER_EPOCH
    return TransactionMetadata(
        transactional_id, value.producer_id, value.producer_epoch, value.transaction_timeout_ms, state,
        last_producer_id=value.previous_producer_id, last_producer_epoch=last_epoch, partitions=partitions,
        start_ms=value.transaction_start_timestamp_ms, last_update_ms=value.transaction_last_update_timestamp_ms,
        client_version=value.client_transaction_version, offsets_partitions=offsets_partitions)


class TransactionStateLog(CoordinatorLogStore):
    """Appends and replays transaction metadata; a no-op without a data dir."""

    def __init__(self, data_dir: Path | None, *, partition: int = 0, config: LogConfig | None = None,
                 clock: Clock = SYSTEM_CLOCK, offsets_topic_partitions: int = 50) -> None:
        self.offsets_topic_partitions = offsets_topic_partitions  # to place migrated groups
        self.data_dir = Path(data_dir) if data_dir is not None else None
        self.partition = partition
        self.config = config or compacted_log_config(TRANSACTION_STATE_SEGMENT_BYTES)
        self.clock = clock
        self.dir = self.data_dir / f"{TRANSACTION_STATE_TOPIC}-{partition}" if self.data_dir is not None else None
        self.legacy_path = self.data_dir / LEGACY_DIR_NAME / LEGACY_FILE_NAME if self.data_dir is not None else None
        self._log: CoordinatorLog | None = None

    def load(self) -> dict[str, TransactionMetadata]:
        """Open the partition log (migrating an old JSON-lines file into it) and replay it."""
        out: dict[str, TransactionMetadata] = {}
        if self.data_dir is None:
            return out
        self._log = CoordinatorLog(self.data_dir, TRANSACTION_STATE_TOPIC, self.partition, self.config,
                                   clock=self.clock)
        if self.legacy_path is not None and self.legacy_path.exists():
            self._migrate(self.legacy_path)

        def apply(h: RecordBatchHeader, key: bytes, value: bytes | None) -> None:
            k, v = decode_transaction_record(key, value)
            if v is None:
                out.pop(k.transactional_id, None)
            else:
                out[k.transactional_id] = metadata_from_record(k.transactional_id, v)

        count = self._log.replay(apply)
        if out:
            log.info("loaded %d transactional ids from %s (%d records)", len(out), self.dir, count)
        return out

    def write(self, meta: TransactionMetadata) -> None:
        if self._log is not None:
            self._log.append([encode_record(TransactionLogKey(meta.transactional_id), transaction_log_value(meta))])

    def remove(self, transactional_id: str) -> None:
        """A tombstone: the id expired."""
        if self._log is not None:
            self._log.append([encode_record(TransactionLogKey(transactional_id), None)])

    def _migrate(self, path: Path) -> None:
        """Replay the JSON-lines log of earlier versions (the last line per id wins), write it here, remove it."""
        assert self._log is not None
        legacy: dict[str, TransactionMetadata] = {}

        def apply(rec: dict[str, Any]) -> None:
            if rec.get("dead"):
                legacy.pop(rec["id"], None)
            else:
                legacy[rec["id"]] = TransactionMetadata.from_json(rec)

        count = replay_json_lines(path, apply)
        for meta in legacy.values():
            meta.offsets_partitions = {partition_for_key(g, self.offsets_topic_partitions) for g in meta.groups}
            self.write(meta)
        self._log.sync()
        path.unlink()
        path.with_name(path.name + ".tmp").unlink(missing_ok=True)
        try:
            path.parent.rmdir()
        except OSError:
            pass  # something else lives there: leave it
        log.info("migrated %d transactional ids (%d records) from %s into %s", len(legacy), count, path, self.dir)
