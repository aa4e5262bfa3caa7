"""Snapshots of the ``__cluster_metadata`` log (KIP-630), as Kafka's controller writes them.

A snapshot is the whole metadata state at an offset, as records: a file
``<end offset:020d>-<epoch:010d>.checkpoint`` in the log's directory holding record batches: a control batch
with a ``SnapshotHeaderRecord`` first, the metadata records (Kafka's ``RecordsSnapshotWriter``: batches from
offset 0), a control batch with a ``SnapshotFooterRecord`` last.  The end offset is the offset of the first
record the snapshot does not hold.  :func:`state_records` says what it holds, in the order Kafka's
``MetadataImage.write`` puts it (features, brokers, topics, configs, quotas, producer ids, ACLs, SCRAM, tokens).

A controller writes one when ``metadata.log.max.record.bytes.between.snapshots`` bytes were appended since the
last (or ``metadata.log.max.snapshot.interval.ms`` passed with something appended), then deletes the log's
segments wholly below it past ``metadata.max.retention.bytes`` / ``metadata.max.retention.ms``
(``KafkaMetadataLog.cleanSnapshots``); it replays the latest snapshot and the log after it when it starts.  A
broker whose fetch offset is below the log's start is told the snapshot's id in the Fetch answer and reads it
with FetchSnapshot.
"""

from __future__ import annotations

import logging
import os
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from ..protocol.exceptions import MetadataRecordError
from ..protocol.metadata_records import MetadataRecord, decode_metadata_record
from ..protocol.records import ControlRecordType, Record, build_batch, decode_control_key, iter_batches
from .coordinator_runtime import batch_records
from .metadata_image import MetadataState
from .metadata_log import (METADATA_TOPIC, ClusterMetadataLog, TopicImage, acl_records, config_records,
                           feature_records, producer_ids_record, quota_record, register_broker_record, scram_records,
                           token_records, topic_image_records)

log = logging.getLogger(__name__)

SUFFIX = ".checkpoint"
#: Records per batch in a snapshot file.
BATCH_RECORDS = 500
_HEADER_VALUE = struct.Struct(">hq")  # SnapshotHeaderRecord v0: version, last contained log timestamp
_FOOTER_VALUE = struct.Struct(">h")  # SnapshotFooterRecord v0: version
_CONTROL_KEY = struct.Struct(">hh")


@dataclass(frozen=True)
class SnapshotId:
    """Kafka's ``OffsetAndEpoch`` of a snapshot: the log end offset it holds up to, and that offset's epoch."""

    end_offset: int
    epoch: int

    @property
    def file_name(self) -> str:
        return f"{self.end_offset:020d}-{self.epoch:010d}{SUFFIX}"

    @classmethod
    def of(cls, path: Path) -> SnapshotId | None:
        """The id a file name gives (None: not a snapshot)."""
        stem, _, ext = path.name.partition(".")
        offset, dash, epoch = stem.partition("-")
        if "." + ext != SUFFIX or not dash or not offset.isdigit() or not epoch.isdigit():
            return None
        return cls(int(offset), int(epoch))


def state_records(image: dict[str, TopicImage], state: MetadataState) -> list[bytes]:
    """The records that rebuild ``image`` (the topics as the log wrote them) and ``state`` from nothing."""
    out = feature_records(state.features)
    for broker_id, (epoch, endpoints, rack, fenced) in sorted(state.brokers.items()):
        out.append(register_broker_record(broker_id, epoch, endpoints, {}, rack, fenced=fenced))
    for topic in image.values():
        out += topic_image_records(topic)
    for resource_type, resources in sorted(state.configs.items()):
        for name, configs in resources.items():
            out += config_records(resource_type, name, dict(configs))
    for entity, values in state.quotas.items():
        out += [quota_record(entity, key, value) for key, value in values.items()]
    if state.next_producer_id:
        out.append(producer_ids_record(-1, -1, state.next_producer_id))
    out += acl_records(dict(state.acls), [])
    out += scram_records(dict(state.scram), [])
    out += token_records(list(state.tokens.values()), [])
    return out


def _control(kind: ControlRecordType, value: bytes, timestamp: int) -> bytes:
    return build_batch([Record(key=_CONTROL_KEY.pack(0, kind), value=value)], base_timestamp=timestamp,
                       is_control=True)


def write_snapshot(directory: Path, snapshot_id: SnapshotId, records: list[bytes], timestamp: int) -> Path:
    """Write a snapshot file (to a temporary name, fsynced, then renamed, as Kafka's ``FileRawSnapshotWriter``
    freezes one); returns its path."""
    path = directory / snapshot_id.file_name
    tmp = directory / (snapshot_id.file_name + ".part")
    batches = [_control(ControlRecordType.SNAPSHOT_HEADER, _HEADER_VALUE.pack(0, timestamp) + b"\x00", timestamp)]
    for start in range(0, len(records), BATCH_RECORDS):
        chunk = records[start:start + BATCH_RECORDS]
        batches.append(build_batch([Record(offset_delta=i, value=v) for i, v in enumerate(chunk)],
                                   base_offset=start, base_timestamp=timestamp))
    batches.append(_control(ControlRecordType.SNAPSHOT_FOOTER, _FOOTER_VALUE.pack(0) + b"\x00", timestamp))
    with open(tmp, "wb") as f:
        f.write(b"".join(batches))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fd = os.open(directory, os.O_RDONLY)  # (the rename made durable before the log below it may go)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    return path


def snapshots(directory: Path) -> list[tuple[SnapshotId, Path]]:
    """The snapshots in ``directory``, oldest first."""
    found = [(sid, p) for p in directory.glob("*" + SUFFIX) if (sid := SnapshotId.of(p)) is not None]
    return sorted(found, key=lambda item: (item[0].end_offset, item[0].epoch))


def read_snapshot(data: bytes | memoryview, where: str) -> Iterator[MetadataRecord]:
    """The metadata records of a snapshot's bytes (MetadataRecordError when it is not whole: no footer)."""
    footer = False
    for h, view in iter_batches(data):
        if h.is_control:
            for rec in batch_records(h, view, where):
                footer = footer or decode_control_key(rec.key)[1] == ControlRecordType.SNAPSHOT_FOOTER
            continue
        for rec in batch_records(h, view, where):
            yield decode_metadata_record(rec.value or b"")
    if not footer:
        raise MetadataRecordError(f"{where}: no snapshot footer (an incomplete snapshot)")


def latest_snapshot(mlog: ClusterMetadataLog) -> tuple[SnapshotId, Path] | None:
    found = snapshots(mlog.directory)
    return found[-1] if found else None


def maybe_snapshot(mlog: ClusterMetadataLog, state: Callable[[], list[bytes]], epoch: int) -> SnapshotId | None:
    """After an append: a snapshot of ``state()`` at the log's end when its policy says one is due (bytes
    appended, or time passed with something appended), then the log cleaned below it."""
    now = mlog.clock.time_ms()
    policy = mlog.policy
    due = mlog.bytes_since_snapshot >= policy.max_bytes_between or (  # (an interval of 0: no timed snapshots)
        mlog.bytes_since_snapshot > 0 and 0 < policy.max_interval_ms <= now - mlog.last_snapshot_ms)
    if not due:
        return None
    snapshot_id = SnapshotId(mlog.end_offset, epoch)
    write_snapshot(mlog.directory, snapshot_id, state(), now)
    mlog.bytes_since_snapshot, mlog.last_snapshot_ms = 0, now
    _clean(mlog, snapshot_id.end_offset, now)
    for old, path in snapshots(mlog.directory):  # (those the log no longer needs: below its start)
        if old.end_offset < mlog.log.log_start_offset and old != snapshot_id:
            path.unlink(missing_ok=True)
    log.info("%s-0: snapshot at offset %d (log start %d)", METADATA_TOPIC, snapshot_id.end_offset,
             mlog.log.log_start_offset)
    return snapshot_id


def _clean(mlog: ClusterMetadataLog, snapshot_offset: int, now_ms: int) -> None:
    """Delete the oldest segments wholly below the snapshot while the log is over retention (bytes or age):
    Kafka's ``KafkaMetadataLog.cleanSnapshots``."""
    lg, policy = mlog.log, mlog.policy
    lg.high_watermark = lg.log_end_offset  # (one voter: everything appended is committed)
    size, start = lg.size_in_bytes, lg.log_start_offset
    for seg, following in zip(lg.segments, lg.segments[1:]):
        if following.base_offset > snapshot_offset:
            break
        over_size = policy.retention_bytes >= 0 and size > policy.retention_bytes  # (-1: no limit)
        too_old = policy.retention_ms >= 0 and now_ms - seg.largest_timestamp > policy.retention_ms
        if not (over_size or too_old):
            break
        size -= seg.size
        start = following.base_offset
    if start > lg.log_start_offset:
        lg.delete_records_before(start)


def snapshot_and_log_records(mlog: ClusterMetadataLog) -> Iterator[tuple[int, MetadataRecord]]:
    """What a controller replays when it starts: its latest snapshot's records, then the log's after it (the
    whole log without a snapshot); MetadataRecordError when the log starts after offset 0 with no snapshot."""
    latest = latest_snapshot(mlog)
    if latest is None:
        if mlog.log.log_start_offset > 0:
            raise MetadataRecordError(f"{mlog.directory} starts at offset {mlog.log.log_start_offset} and has no "
                                      "snapshot")
        yield from mlog.records()
        return
    snapshot_id, path = latest
    for rec in read_snapshot(path.read_bytes(), str(path)):
        yield snapshot_id.end_offset - 1, rec
    yield from mlog.records(snapshot_id.end_offset)
