"""The per-record checks of Kafka's ``LogValidator`` on produce (``validateRecord``: ``validateKey`` and
``validateTimestamp``), reported as KIP-467 record errors.

A compacted topic refuses records without a key (INVALID_RECORD); a CreateTime topic refuses records whose
timestamp lies more than ``message.timestamp.before.max.ms`` before or ``message.timestamp.after.max.ms``
after the broker's clock (INVALID_TIMESTAMP, KIP-937); a LogAppendTime topic refuses batches a producer
marked LogAppendTime (INVALID_TIMESTAMP).  A batch with any such record is refused whole, naming each
failing record by its index (Kafka's ``RecordValidationException`` and ``ProduceResponse.RecordError``),
with Kafka's texts.

Records are decoded only when one of these checks can fail (:func:`needs_record_validation`): on an
ordinary topic (delete policy, unbounded timestamps, CreateTime) batches stay opaque.  Deliberate
difference: Kafka accepts one batch per partition and numbers the records within it; minikafka accepts
several, numbers the records across the partition's produce data, and stops at the first batch refused
(as Kafka stops at its one batch).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import NamedTuple

from ...common import TopicPartition
from ...protocol.errors import ErrorCode
from ...protocol.records import (NO_TIMESTAMP, TIMESTAMP_TYPE_MASK, ConsumerRecord, RecordBatchHeader,
                                 decode_records)
from .unified import LogConfig

__all__ = ["INT64_MAX", "NO_KEY_COMPACTED_MESSAGE", "RecordError", "RecordValidationFailure", "needs_record_validation",
           "validate_records"]

INT64_MAX = (1 << 63) - 1  # Long.MAX_VALUE: an unbounded timestamp.{before,after}.max.ms
NO_KEY_COMPACTED_MESSAGE = "Compacted topic cannot accept message without key in topic partition"


def _long(v: int) -> int:
    """``v`` as a Java ``long`` (two's-complement wrap), for the bounds Kafka prints."""
    return ((v + (1 << 63)) & ((1 << 64) - 1)) - (1 << 63)


class RecordError(NamedTuple):
    """One refused record (Kafka's ``ProduceResponse.RecordError``): its index in the partition's
    produce data and why."""

    batch_index: int
    message: str | None

    def __str__(self) -> str:
        message = "null" if self.message is None else f"'{self.message}'"
        return f"RecordError(batchIndex={self.batch_index}, message={message})"


class RecordValidationFailure(NamedTuple):
    """A refused batch (Kafka's ``RecordValidationException``): the partition's error code and message,
    and the record errors."""

    error: ErrorCode
    message: str
    record_errors: tuple[RecordError, ...]


def needs_record_validation(config: LogConfig, batches: Sequence[tuple[RecordBatchHeader, object]]) -> bool:
    """Whether any record of ``batches`` can fail a per-record check on a log with ``config``: the
    topic is compacted, a CreateTime topic has a finite timestamp bound, or a LogAppendTime topic got
    a batch the producer marked LogAppendTime."""
    if "compact" in config.cleanup_policy:
        return True
    if config.message_timestamp_type != "LogAppendTime":
        return config.timestamp_before_max_ms < INT64_MAX or config.timestamp_after_max_ms < INT64_MAX
    return any(h.attributes & TIMESTAMP_TYPE_MASK for h, _ in batches)


def _record_str(r: ConsumerRecord) -> str:
    """Kafka's ``DefaultRecord.toString``."""
    return (f"DefaultRecord(offset={r.offset}, timestamp={r.timestamp}, key={len(r.key or b'')} bytes, "
            f"value={len(r.value or b'')} bytes)")


def validate_records(batches: Iterable[tuple[RecordBatchHeader, memoryview]], config: LogConfig,
                     tp: TopicPartition, now_ms: int) -> RecordValidationFailure | None:
    """Kafka's ``validateRecord`` for every record of the (CRC-checked) produce batches of partition
    ``tp``; the first refused batch's failure, or None when every record passes.

    Stops before a control batch (the caller refuses it, as Kafka's ``validateBatch`` does before its
    records).  Raises ``CorruptRecordError`` (or ``InvalidRecordError``) when records cannot be decoded.
    """
    compact = "compact" in config.cleanup_policy
    create_time = config.message_timestamp_type != "LogAppendTime"
    before, after = config.timestamp_before_max_ms, config.timestamp_after_max_ms
    where = f"{tp.topic}-{tp.partition}"
    index = 0
    for h, view in batches:
        if h.is_control:
            break
        log_append_time_batch = bool(h.attributes & TIMESTAMP_TYPE_MASK)
        errors: list[RecordError] = []
        invalid_timestamp = False
        for r in decode_records(view, check_crc=False):
            if compact and r.key is None:  # validateKey
                errors.append(RecordError(
                    index, f"{NO_KEY_COMPACTED_MESSAGE} {where}"))
            elif create_time and r.timestamp != NO_TIMESTAMP:  # validateTimestamp
                diff = _long(now_ms - r.timestamp)
                if diff > before or _long(-diff) > after:
                    invalid_timestamp = True
                    errors.append(RecordError(
                        index, f"Timestamp {r.timestamp} of message with offset {r.offset} is out of range. "
                               f"The timestamp should be within [{_long(now_ms - before)}, "
                               f"{_long(now_ms + after)}]"))
            elif log_append_time_batch:
                invalid_timestamp = True
                errors.append(RecordError(
                    index, f"Invalid timestamp type in message {_record_str(r)}. Producer should not set "
                           f"timestamp type to LogAppendTime."))
            index += 1
        if errors:  # processRecordErrors
            if invalid_timestamp:
                return RecordValidationFailure(ErrorCode.INVALID_TIMESTAMP,
                                               "One or more records have been rejected due to invalid timestamp",
                                               tuple(errors))
            shown = ", ".join(str(e) for e in errors[:3])
            return RecordValidationFailure(
                ErrorCode.INVALID_RECORD,
                f"One or more records have been rejected due to {len(errors)} record errors in total, and only "
                f"showing the first three errors at most: [{shown}]", tuple(errors))
    return None
