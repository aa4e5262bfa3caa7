"""``minikafka dump-log``: print the batches and records of log segment files (Kafka's ``kafka-dump-log.sh``,
``kafka.tools.DumpLogSegments``).

Same option names and output lines as Kafka's tool: ``Dumping <file>``, ``Log starting offset: N``, one
``baseOffset: ... isvalid: true`` line per batch and, with ``--deep-iteration`` / ``--print-data-log``, one
``| offset: ...`` line per record (transaction markers as ``endTxnMarker: COMMIT coordinatorEpoch: N``);
``.index`` files as ``offset: X position: Y`` and ``.timeindex`` files as ``timestamp: X offset: Y``.
The problems Kafka's tool reports on stderr at the end (index entries that point at no batch boundary,
non-consecutive offsets) are reported the same way; a corrupt or torn tail is reported as
``Found N invalid bytes at the end of <file>``.

Differences from Kafka:

* ``--data-dir DIR --topic T --partition P`` dumps every segment of one partition of a minikafka broker
  (``DIR/logs/T-P``, the coordinators' ``DIR/__consumer_offsets-P`` and the like; ``--broker ID`` picks one
  broker of a ``--brokers N`` cluster's data dir).
* Keys and values are printed as UTF-8 text, bytes that are not UTF-8 as ``\\xNN`` escapes (Kafka's
  ``StringDecoder`` replaces them with U+FFFD).  ``--key-decoder-class`` and ``--value-decoder-class`` are
  not offered; :func:`dump_files` takes a :data:`Decoder` (Kafka's ``MessageParser``) instead.
* ``--offsets-decoder``, ``--transaction-log-decoder`` and ``--share-group-state-decoder`` print the
  coordinators' records as Kafka 4's ``CoordinatorRecordMessageParser`` does (:class:`CoordinatorRecordDecoder`),
  but know only the record types minikafka writes (:data:`~minikafka.protocol.coordinator_records.RECORD_SCHEMAS`):
  the others print as ``Unknown record type N at offset O, skipping.``  A transaction's ``transactionStatus`` is
  printed by name (``CompleteCommit``), as Kafka does since KAFKA-20712.  ``--cluster-metadata-decoder``
  prints KRaft metadata records as Kafka does (:func:`cluster_metadata_decoder`: a Kafka broker's or
  controller's ``__cluster_metadata-0`` segments); ``--remote-log-metadata-decoder`` is not offered.
* minikafka's offset and time indexes point at the *base* offset of a batch (Kafka's at its last one), so an
  index entry naming either end of the batch at its position counts as matching.
* No ``.txnindex`` or producer-state snapshot files: minikafka writes none.

Only the record formats (:mod:`minikafka.protocol.records`, :mod:`~minikafka.protocol.coordinator_records`)
are used, never the broker: the files are read, not opened as a ``Log`` (which would recover, i.e. truncate,
them).
"""

from __future__ import annotations

import argparse
import base64
import binascii
import json
import os
import struct
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, TextIO

from ..protocol.compression import CODEC_NAMES
from ..protocol.coordinator_records import (OFFSETS_TOPIC, RECORD_SCHEMAS, SHARE_GROUP_STATE_TOPIC,
                                            TRANSACTION_STATE_TOPIC)
from ..protocol.exceptions import MalformedMessage, ProtocolError, UnsupportedVersion
from ..protocol.json_converter import write_json
from ..protocol.records import (
    BATCH_HEADER_SIZE,
    LOG_APPEND_TIME,
    NO_SEQUENCE,
    ConsumerRecord,
    ControlRecordType,
    CorruptRecordError,
    RecordBatchHeader,
    decode_control_key,
    decode_records,
    read_end_txn_marker,
    read_header,
    recover_batches,
    validate_batch,
)
from ..protocol.schema import Message

#: Kafka's ``MessageParser.parse``: a record -> (key text, payload text); None leaves the field out.
Decoder = Callable[[ConsumerRecord], tuple[str | None, str | None]]

RECORD_INDENT = "|"
INT32_MAX = 2**31 - 1
LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX = ".log", ".index", ".timeindex"
# Kafka's index file entries, as minikafka.broker.log.index declares them (OffsetIndex.ENTRY, TimeIndex.ENTRY);
# the tools do not import the broker, tests/tools/test_dump_log.py checks the two agree.
OFFSET_INDEX_ENTRY = struct.Struct(">ii")  # relative offset, position
TIME_INDEX_ENTRY = struct.Struct(">qi")  # timestamp, relative offset
TIMESTAMP_TYPE_NAMES = {0: "CreateTime", LOG_APPEND_TIME: "LogAppendTime"}


def _text(data: bytes) -> str:
    return data.decode("utf-8", "backslashreplace")


def string_decoder(record: ConsumerRecord) -> tuple[str | None, str | None]:
    """The default decoder (Kafka's ``StringDecoder`` for key and value): UTF-8 text, None for null."""
    return (None if record.key is None else _text(record.key),
            None if record.value is None else _text(record.value))


# -- the coordinator topics' decoders ----------------------------------------------------------------------
_VERSION = struct.Struct(">h")
# Kafka's TransactionState by id, as KAFKA-20712's TransactionLogMessageParser prints transactionStatus.
TRANSACTION_STATES = ("Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort",
                      "Dead", "PrepareEpochFence")
CONSUMER_PROTOCOL_TYPE = "consumer"


def _compact_json(obj: Any) -> str:
    """Jackson's ``JsonNode.toString``: no spaces, non-ASCII characters as they are."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


class DecodeError(ValueError):
    """A record a coordinator decoder cannot print at all (Kafka's tool fails the same way)."""


class CoordinatorRecordDecoder:
    """Kafka's ``CoordinatorRecordMessageParser``: a coordinator topic's record as
    ``{"type":"<record type>","data":{...}}`` (key) and ``{"version":"<value version>","data":{...}}``
    (value), ``<DELETE>`` for a tombstone; a record of an unknown type or that does not decode prints one
    ``... skipping.`` key and no payload.  ``value_json`` may rewrite a value's JSON (Kafka's
    ``valueAsJson``)."""

    def __init__(self, schemas: Mapping[int, tuple[Message, Message]],
                 value_json: Callable[[int, dict[str, Any]], dict[str, Any]] | None = None) -> None:
        self.schemas = schemas
        self.value_json = value_json

    def __call__(self, record: ConsumerRecord) -> tuple[str | None, str | None]:
        if record.key is None:
            raise DecodeError(f"Failed to decode message at offset {record.offset} using the specified decoder "
                              "(message had a missing key)")
        key = memoryview(record.key)
        if len(key) < 2:
            return f"Error at offset {record.offset}, skipping. Could not read version from key's buffer.", None
        (record_type,) = _VERSION.unpack_from(key)
        schemas = self.schemas.get(record_type)
        if schemas is None:
            return f"Unknown record type {record_type} at offset {record.offset}, skipping.", None
        try:
            key_json = {"type": str(record_type), "data": self._json(schemas[0], record_type, key[2:])}
            if record.value is None:
                return _compact_json(key_json), "<DELETE>"
            value = memoryview(record.value)
            if len(value) < 2:
                raise MalformedMessage("Could not read version from value's buffer.")
            (version,) = _VERSION.unpack_from(value)
            data = self._json(schemas[1], version, value[2:])
            if self.value_json is not None:
                data = self.value_json(record_type, data)
        except ProtocolError as exc:  # bytes that do not parse: Kafka prints the error and goes on
            return f"Error at offset {record.offset}, skipping. {exc}", None
        return _compact_json(key_json), _compact_json({"version": str(version), "data": data})

    @staticmethod
    def _json(message: Message, version: int, body: memoryview) -> dict[str, Any]:
        if not message.supports(version):
            raise UnsupportedVersion(f"Can't read version {version} of {message.name}", None, version)
        return write_json(message, message.parse(body, version), version)


def _embedded_json(data: Any, message: Message) -> Any:
    """A version-prefixed embedded message (base64 in the JSON) as its JSON; unchanged when it does not
    decode (Kafka swallows the error and keeps the bytes)."""
    try:
        raw = base64.b64decode(data, validate=True)
        (version,) = _VERSION.unpack_from(raw)
        return write_json(message, message.parse(memoryview(raw)[2:], version), version)
    except (binascii.Error, struct.error, ProtocolError):  # not base64, no version, or does not parse
        return data


def _group_value_json(record_type: int, data: dict[str, Any]) -> dict[str, Any]:
    """``OffsetsMessageParser.prepareGroupMetadataValue``: the members' subscriptions and assignments of a
    classic group of the consumer protocol decoded (ConsumerProtocolSubscription / Assignment)."""
    if record_type != 2 or data.get("protocolType") != CONSUMER_PROTOCOL_TYPE:
        return data
    from ..client.consumer.protocol import ConsumerProtocolAssignment, ConsumerProtocolSubscription

    for member in data.get("members") or ():
        if "subscription" in member:
            member["subscription"] = _embedded_json(member["subscription"], ConsumerProtocolSubscription)
        if "assignment" in member:
            member["assignment"] = _embedded_json(member["assignment"], ConsumerProtocolAssignment)
    return data


def _transaction_value_json(record_type: int, data: dict[str, Any]) -> dict[str, Any]:
    """The transaction's state by name (Kafka since KAFKA-20712; 4.0 to 4.2 print the id)."""
    status = data.get("transactionStatus")
    if isinstance(status, int) and 0 <= status < len(TRANSACTION_STATES):
        data["transactionStatus"] = TRANSACTION_STATES[status]
    return data


def offsets_decoder() -> CoordinatorRecordDecoder:
    """``--offsets-decoder`` (Kafka's ``OffsetsMessageParser``): ``__consumer_offsets`` records."""
    return CoordinatorRecordDecoder(RECORD_SCHEMAS[OFFSETS_TOPIC], _group_value_json)


def transaction_log_decoder() -> CoordinatorRecordDecoder:
    """``--transaction-log-decoder`` (``TransactionLogMessageParser``): ``__transaction_state`` records."""
    return CoordinatorRecordDecoder(RECORD_SCHEMAS[TRANSACTION_STATE_TOPIC], _transaction_value_json)


def share_group_state_decoder() -> CoordinatorRecordDecoder:
    """``--share-group-state-decoder`` (``ShareGroupStateMessageParser``): ``__share_group_state`` records."""
    return CoordinatorRecordDecoder(RECORD_SCHEMAS[SHARE_GROUP_STATE_TOPIC])


def cluster_metadata_decoder(record: ConsumerRecord) -> tuple[str | None, str | None]:
    """``--cluster-metadata-decoder`` (Kafka's ``ClusterMetadataLogMessageParser``): a ``__cluster_metadata``
    record (no key) as ``{"type":"TOPIC_RECORD","version":0,"data":{...}}``; one that does not decode prints
    ``Error at O, skipping. ...`` as its payload."""
    from ..protocol.metadata_records import METADATA_RECORDS, decode_metadata_record

    try:
        if record.value is None:
            raise MalformedMessage("the record has no value")
        decoded = decode_metadata_record(record.value)
        message = METADATA_RECORDS[decoded.type]
        text = _compact_json({"type": _upper_snake(decoded.name), "version": decoded.version,
                              "data": write_json(message, decoded.data, decoded.version)})
    except ProtocolError as exc:
        text = f"Error at {record.offset}, skipping. {exc}"
    return None, text


def _upper_snake(name: str) -> str:
    """A record's name as Kafka's ``MetadataRecordType`` names it: RegisterBrokerRecord -> REGISTER_BROKER_RECORD."""
    return "".join(f"_{c}" if c.isupper() and i else c for i, c in enumerate(name)).upper()


@dataclass
class DumpOptions:
    """What to print (Kafka's ``DumpLogSegmentsOptions``)."""

    print_data_log: bool = False
    deep_iteration: bool = False
    skip_record_metadata: bool = False
    max_bytes: int = INT32_MAX
    verify_index_only: bool = False
    index_sanity_check: bool = False
    decoder: Decoder = string_decoder

    @property
    def deep(self) -> bool:
        return self.deep_iteration or self.print_data_log


@dataclass
class DumpProblems:
    """What Kafka's tool collects while dumping and prints on stderr at the end (keyed by absolute path)."""

    index_mismatches: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    non_consecutive: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    time_index_mismatches: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    time_index_out_of_order: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    offsets_not_found: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    failed: bool = False  # a sanity check failed (exit status 1)

    @staticmethod
    def add(table: dict[str, list[tuple[int, int]]], path: Path, pair: tuple[int, int]) -> None:
        table.setdefault(str(path.absolute()), []).append(pair)

    def report(self, err: TextIO) -> None:
        for name, pairs in self.index_mismatches.items():
            err.write(f"Mismatches in :{name}\n")
            err.writelines(f"  Index offset: {a}, log offset: {b}\n" for a, b in pairs)
        for name, pairs in self.time_index_mismatches.items():
            err.write(f"Found timestamp mismatch in :{name}\n")
            err.writelines(f"  Index timestamp: {a}, log timestamp: {b}\n" for a, b in pairs)
        for name, pairs in self.time_index_out_of_order.items():
            err.write(f"Found out of order timestamp in :{name}\n")
            err.writelines(f"  Index timestamp: {a}, Previously indexed timestamp: {b}\n" for a, b in pairs)
        for pairs in self.offsets_not_found.values():
            err.write("The following indexed offsets are not found in the log.\n")
            err.writelines(f"Indexed offset: {a}, found log offset: {b}\n" for a, b in pairs)
        for name, pairs in self.non_consecutive.items():
            err.write(f"Non-consecutive offsets in {name}\n")
            err.writelines(f"  {a} is followed by {b}\n" for a, b in pairs)


# -- formatting ---------------------------------------------------------------------------------------
def _bool(flag: bool) -> str:
    return "true" if flag else "false"


def format_batch(h: RecordBatchHeader, position: int, valid: bool) -> str:
    """Kafka's batch line (``DumpLogSegments.printBatchLevel``) of a v2 batch at byte ``position``."""
    horizon = f"OptionalLong[{h.base_timestamp}]" if h.has_delete_horizon else "OptionalLong.empty"
    return (f"baseOffset: {h.base_offset} lastOffset: {h.last_offset} count: {h.record_count} "
            f"baseSequence: {h.base_sequence} lastSequence: {h.last_sequence} producerId: {h.producer_id} "
            f"producerEpoch: {h.producer_epoch} partitionLeaderEpoch: {h.partition_leader_epoch} "
            f"isTransactional: {_bool(h.is_transactional)} isControl: {_bool(h.is_control)} "
            f"deleteHorizonMs: {horizon} position: {position} "
            f"{TIMESTAMP_TYPE_NAMES[h.timestamp_type]}: {h.max_timestamp} size: {h.size} magic: {h.magic} "
            f"compresscodec: {CODEC_NAMES.get(h.compression, h.compression)} crc: {h.crc} isvalid: {_bool(valid)}")


def _record_sequence(h: RecordBatchHeader, offset_delta: int) -> int:
    """``DefaultRecord.sequence``: the batch's base sequence plus the offset delta, wrapping at int32."""
    base = h.base_sequence
    if base == NO_SEQUENCE:
        return NO_SEQUENCE
    if base > INT32_MAX - offset_delta:
        return offset_delta - (INT32_MAX - base) - 1
    return base + offset_delta


def _control_text(batch: memoryview, rec: ConsumerRecord) -> str:
    """What Kafka prints after a control record's metadata."""
    try:
        _, type_id = decode_control_key(rec.key)
    except CorruptRecordError:
        return " controlType: UNKNOWN(-1)"
    if type_id in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        try:
            control_type, coordinator_epoch = read_end_txn_marker(batch)
        except CorruptRecordError as exc:
            return f" endTxnMarker: invalid ({exc})"
        return f" endTxnMarker: {ControlRecordType(control_type).name} coordinatorEpoch: {coordinator_epoch}"
    try:
        name = ControlRecordType(type_id).name
    except ValueError:
        name = "UNKNOWN"
    return f" controlType: {name}({type_id})"


def format_record(h: RecordBatchHeader, batch: memoryview, rec: ConsumerRecord, opts: DumpOptions) -> str:
    """Kafka's record line (``| offset: ... payload: ...``) of one record of the batch ``h``."""
    line = f"{RECORD_INDENT} "
    prefix = ""
    if not opts.skip_record_metadata:
        key_size = -1 if rec.key is None else len(rec.key)
        value_size = -1 if rec.value is None else len(rec.value)
        line += (f"offset: {rec.offset} {TIMESTAMP_TYPE_NAMES[rec.timestamp_type]}: {rec.timestamp} "
                 f"keySize: {key_size} valueSize: {value_size} "
                 f"sequence: {_record_sequence(h, rec.offset - h.base_offset)} "
                 f"headerKeys: [{','.join(k for k, _ in rec.headers)}]")
        prefix = " "
        if h.is_control:
            line += _control_text(batch, rec)
    if opts.print_data_log and not h.is_control:
        key, payload = opts.decoder(rec)
        if key is not None:
            line += f"{prefix}key: {key}"
        if payload is not None:
            line += f" payload: {payload}"
    return line


# -- files ------------------------------------------------------------------------------------------
def _base_offset(path: Path) -> int | None:
    """The base offset a segment file is named after (``00000000000000000042.log`` -> 42)."""
    stem = path.name.split(".")[0]
    return int(stem) if stem.isdigit() else None


def _read(path: Path, limit: int = -1) -> bytes:
    with open(path, "rb") as f:
        return f.read(limit)


def dump_log(path: Path, opts: DumpOptions, problems: DumpProblems, out: TextIO, err: TextIO) -> None:
    """Print a ``.log`` file's batches (and records with ``opts.deep``), as ``DumpLogSegments.dumpLog``.

    A batch whose CRC does not match is printed with ``isvalid: false`` and its records are still shown;
    the dump stops at the first structurally broken or torn batch and reports the bytes after it."""
    base = _base_offset(path)
    if base is not None:
        out.write(f"Log starting offset: {base}\n")
    data = _read(path, opts.max_bytes)
    scan = recover_batches(data, check_crc=False)
    view = memoryview(data)
    last_offset = -1
    for position, h in scan.batches:
        batch = view[position:position + h.size]
        try:
            validate_batch(batch, check_crc=True)
            valid = True
        except CorruptRecordError:
            valid = False
        out.write(format_batch(h, position, valid) + "\n")
        if not opts.deep:
            continue
        try:
            records = decode_records(batch, check_crc=False)
        except CorruptRecordError as exc:
            err.write(f"Cannot read the records of the batch at position {position} of {path}: {exc}\n")
            continue
        for rec in records:
            if last_offset != -1 and rec.offset != last_offset + 1:
                problems.add(problems.non_consecutive, path, (last_offset, rec.offset))
            last_offset = rec.offset
            out.write(format_record(h, batch, rec, opts) + "\n")
    trailing = len(data) - scan.valid_bytes
    if trailing > 0 and opts.max_bytes == INT32_MAX:
        out.write(f"Found {trailing} invalid bytes at the end of {path.name}\n")
        err.write(f"{path}: {scan.error}\n")


def _log_batches(index_path: Path) -> list[tuple[int, RecordBatchHeader]] | None:
    """``(position, header)`` of the batches of the ``.log`` file next to an index, None if there is none."""
    log_path = index_path.with_name(index_path.name.split(".")[0] + LOG_SUFFIX)
    if not log_path.is_file():
        return None
    return recover_batches(_read(log_path), check_crc=False).batches


def _batch_at(fd: int, position: int) -> RecordBatchHeader | None:
    header = os.pread(fd, BATCH_HEADER_SIZE, position)
    return read_header(header) if len(header) == BATCH_HEADER_SIZE else None


def dump_index(path: Path, opts: DumpOptions, problems: DumpProblems, out: TextIO, err: TextIO) -> None:
    """Print a ``.index`` file's entries (``offset: X position: Y``), as ``DumpLogSegments.dumpIndex``, and
    record the entries that do not point at a batch starting or ending at their offset."""
    base = _base_offset(path) or 0
    data = _read(path)
    entries = [(base + rel, pos) for rel, pos in
               OFFSET_INDEX_ENTRY.iter_unpack(data[:len(data) - len(data) % OFFSET_INDEX_ENTRY.size])]
    if not entries:
        out.write(f"{path} is empty.\n")
        return
    log_path = path.with_name(path.name.split(".")[0] + LOG_SUFFIX)
    if opts.index_sanity_check:
        size = log_path.stat().st_size if log_path.is_file() else None
        reason = _offset_index_insane(data, entries, base, size)
        _sanity_result(path, reason, problems, out, err)
        return
    fd = os.open(log_path, os.O_RDONLY) if log_path.is_file() else None
    try:
        for i, (offset, position) in enumerate(entries):
            if offset == base and i > 0:  # the zero-filled tail of a pre-allocated (Kafka) index
                return
            if fd is not None:
                h = _batch_at(fd, position)
                if h is None or offset not in (h.base_offset, h.last_offset):
                    problems.add(problems.index_mismatches, path, (offset, -1 if h is None else h.last_offset))
            if not opts.verify_index_only:
                out.write(f"offset: {offset} position: {position}\n")
    finally:
        if fd is not None:
            os.close(fd)


def _offset_index_insane(data: bytes, entries: list[tuple[int, int]], base: int, log_size: int | None
                         ) -> str | None:
    if len(data) % OFFSET_INDEX_ENTRY.size:
        return f"size {len(data)} is not a multiple of {OFFSET_INDEX_ENTRY.size}"
    for (o1, p1), (o2, p2) in zip(entries, entries[1:]):
        if o2 <= o1 or p2 <= p1:
            return f"entry (offset {o2}, position {p2}) does not follow (offset {o1}, position {p1})"
    if entries[-1][0] < base:
        return f"the last offset {entries[-1][0]} is less than the base offset {base}"
    if log_size is not None and entries[-1][1] >= log_size:
        return f"position {entries[-1][1]} is beyond the log's {log_size} bytes"
    return None


def _sanity_result(path: Path, reason: str | None, problems: DumpProblems, out: TextIO, err: TextIO) -> None:
    if reason is None:
        out.write(f"{path} passed sanity check.\n")
    else:
        err.write(f"{path} failed sanity check: {reason}\n")
        problems.failed = True


def dump_time_index(path: Path, opts: DumpOptions, problems: DumpProblems, out: TextIO, err: TextIO) -> None:
    """Print a ``.timeindex`` file's entries (``timestamp: X offset: Y``), as ``DumpLogSegments.dumpTimeIndex``,
    and record entries naming no batch, whose timestamp is not that batch's, or not increasing."""
    base = _base_offset(path) or 0
    data = _read(path)
    entries = [(ts, base + rel) for ts, rel in
               TIME_INDEX_ENTRY.iter_unpack(data[:len(data) - len(data) % TIME_INDEX_ENTRY.size])]
    if opts.index_sanity_check:
        reason = None
        if len(data) % TIME_INDEX_ENTRY.size:
            reason = f"size {len(data)} is not a multiple of {TIME_INDEX_ENTRY.size}"
        elif entries and entries[-1][0] < entries[0][0]:
            reason = f"the last timestamp {entries[-1][0]} is less than the first {entries[0][0]}"
        elif entries and entries[-1][1] < base:
            reason = f"the last offset {entries[-1][1]} is less than the base offset {base}"
        _sanity_result(path, reason, problems, out, err)
        return
    batches = _log_batches(path)
    prev_ts = -1
    for i, (ts, offset) in enumerate(entries):
        if offset == base and i > 0:  # the zero-filled tail of a pre-allocated (Kafka) index
            return
        if batches is not None:
            h = next((h for _, h in batches if h.last_offset >= offset), None)
            if h is None or offset not in (h.base_offset, h.last_offset):
                problems.add(problems.offsets_not_found, path, (offset, -1 if h is None else h.last_offset))
            else:
                if h.max_timestamp != ts:
                    problems.add(problems.time_index_mismatches, path, (ts, h.max_timestamp))
                if prev_ts >= ts:
                    problems.add(problems.time_index_out_of_order, path, (ts, prev_ts))
        if not opts.verify_index_only:
            out.write(f"timestamp: {ts} offset: {offset}\n")
        prev_ts = ts


def dump_files(paths: list[Path], opts: DumpOptions | None = None, out: TextIO | None = None,
               err: TextIO | None = None) -> int:
    """Dump each file by its suffix (``.log``, ``.index``, ``.timeindex``; others are ignored with a note),
    then report the problems found on ``err``.  Returns the exit status (1 if an index failed its sanity
    check)."""
    opts = opts or DumpOptions()
    out = out or sys.stdout
    err = err or sys.stderr
    problems = DumpProblems()
    dumpers = {LOG_SUFFIX: dump_log, INDEX_SUFFIX: dump_index, TIME_INDEX_SUFFIX: dump_time_index}
    for path in paths:
        out.write(f"Dumping {path}\n")
        dumper = dumpers.get(path.suffix)
        if dumper is None:
            err.write(f"Ignoring unknown file {path}\n")
            continue
        dumper(path, opts, problems, out, err)
    out.flush()
    problems.report(err)
    return 1 if problems.failed else 0


def partition_segments(data_dir: Path, topic: str, partition: int, broker: int | None = None) -> list[Path]:
    """The ``.log`` files, oldest first, of a partition under a minikafka data dir: ``DIR/logs/T-P`` (a
    broker's data dir), ``DIR/T-P`` (its ``logs`` dir, or a coordinator topic's partition such as
    ``DIR/__consumer_offsets-0``) or, in a ``--brokers N`` cluster's data dir, every ``DIR/broker-<id>/logs/T-P``
    or ``DIR/broker-<id>/T-P`` (only broker ``broker``'s if given)."""
    name = f"{topic}-{partition}"
    if broker is not None:
        roots = [data_dir / f"broker-{broker}"]
    elif (data_dir / "logs" / name).is_dir() or (data_dir / name).is_dir():
        roots = [data_dir]
    else:
        brokers = [d for d in data_dir.glob("broker-*") if d.name[7:].isdigit() and d.is_dir()]
        roots = sorted(brokers, key=lambda d: int(d.name[7:])) or [data_dir]
    dirs = [next((d for d in (root / "logs" / name, root / name) if d.is_dir()), None) for root in roots]
    if not any(dirs):
        raise FileNotFoundError(f"no log directory {name} under {roots[0] if broker is not None else data_dir}")
    segments: list[Path] = []
    for d in filter(None, dirs):
        segments.extend(sorted((p for p in d.glob("*" + LOG_SUFFIX) if _base_offset(p) is not None),
                               key=lambda p: _base_offset(p) or 0))
    return segments


# -- command line -----------------------------------------------------------------------------------
def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "dump-log", help="print the batches and records of log segment files (kafka-dump-log.sh)",
        description="Print the batches, records and indexes of log segment files, as kafka-dump-log.sh does.")
    p.add_argument("--files", action="append", default=[], metavar="FILE1,FILE2,...",
                   help="comma-separated .log, .index and .timeindex files to dump (repeatable)")
    p.add_argument("--data-dir", type=Path, default=None, metavar="DIR",
                   help="a broker's --data-dir: dump every segment of --topic/--partition (from DIR/logs/T-P, "
                        "or DIR/T-P for __consumer_offsets, __transaction_state and __share_group_state); for a "
                        "'serve --brokers N' data dir, every broker's replica (DIR/broker-<id>) or --broker's")
    p.add_argument("--topic", default=None, help="with --data-dir: the topic")
    p.add_argument("--partition", type=int, default=0, help="with --data-dir: the partition (default 0)")
    p.add_argument("--broker", type=int, default=None, metavar="ID",
                   help="with the data dir of a --brokers N cluster: only broker ID's replica")
    p.add_argument("--print-data-log", action="store_true",
                   help="print each record's key and value too (implies --deep-iteration)")
    p.add_argument("--deep-iteration", action="store_true", help="print each record's offset, timestamp, sizes, "
                                                                  "sequence and header keys")
    p.add_argument("--skip-record-metadata", action="store_true", help="leave out the records' metadata")
    p.add_argument("--offsets-decoder", action="store_true",
                   help="print the records as __consumer_offsets records (implies --print-data-log)")
    p.add_argument("--transaction-log-decoder", action="store_true",
                   help="print the records as __transaction_state records (implies --print-data-log)")
    p.add_argument("--share-group-state-decoder", action="store_true",
                   help="print the records as __share_group_state records (implies --print-data-log)")
    p.add_argument("--cluster-metadata-decoder", action="store_true",
                   help="print the records as KRaft's __cluster_metadata records (implies --print-data-log)")
    p.add_argument("--max-bytes", type=int, default=INT32_MAX, metavar="SIZE",
                   help="read at most SIZE bytes of each .log file (default: all)")
    p.add_argument("--verify-index-only", action="store_true",
                   help="check the index entries against the log without printing them")
    p.add_argument("--index-sanity-check", action="store_true",
                   help="only check that the index files are sane (as a broker does when loading a log)")
    p.set_defaults(run_tool=run)


def run(args: argparse.Namespace) -> int:
    from .common import ToolError, reported_error, run_reporting

    def work() -> int:
        paths = [Path(f) for item in args.files for f in item.split(",") if f]
        if args.data_dir is not None:
            if not args.topic:
                raise ToolError("--data-dir needs --topic")
            try:
                paths += partition_segments(args.data_dir, args.topic, args.partition, args.broker)
            except FileNotFoundError as exc:
                raise ToolError(str(exc)) from None
        if not paths:
            raise ToolError("give --files or --data-dir with --topic")
        missing = [str(p) for p in paths if not p.is_file()]
        if missing:
            raise ToolError(f"no such file: {', '.join(missing)}")
        if args.max_bytes < 0:
            raise ToolError("--max-bytes must not be negative")
        # Kafka's precedence when several are given: offsets, transaction log, share group state, cluster metadata.
        decoder: Decoder | None = (offsets_decoder() if args.offsets_decoder
                                   else transaction_log_decoder() if args.transaction_log_decoder
                                   else share_group_state_decoder() if args.share_group_state_decoder
                                   else cluster_metadata_decoder if args.cluster_metadata_decoder else None)
        opts = DumpOptions(print_data_log=args.print_data_log or decoder is not None,
                           deep_iteration=args.deep_iteration, skip_record_metadata=args.skip_record_metadata,
                           max_bytes=args.max_bytes, verify_index_only=args.verify_index_only,
                           index_sanity_check=args.index_sanity_check, decoder=decoder or string_decoder)
        return dump_files(paths, opts)

    return run_reporting(work, reported_error)


__all__ = ["CoordinatorRecordDecoder", "DecodeError", "Decoder", "DumpOptions", "DumpProblems", "add_parser",
           "dump_files", "dump_index", "dump_log", "dump_time_index", "format_batch", "format_record",
           "offsets_decoder", "cluster_metadata_decoder", "partition_segments", "run", "share_group_state_decoder",
           "string_decoder", "transaction_log_decoder"]
