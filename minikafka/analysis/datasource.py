"""The ``minikafka`` Spark data source (Spark 4's Python Data Source API): captures and pcaps as DataFrames.

::

    spark.read.format("minikafka").option("table", "partitions").load("capture-dir/")

Options:

* ``path`` (or ``load(path)``): capture directories, ``.mkcap`` files and
  tcpdump ``pcap``/``pcapng`` files, comma-separated.
* ``table``: ``requests`` (default), ``partitions`` or ``topics``
  (schemas in :mod:`minikafka.analysis.decode`), or ``all``: the three in one
  pass, every record decoded once (a ``table`` column and each table's columns
  with a prefix: :data:`~minikafka.analysis.decode.ALL_COLUMNS`).
* ``splitSize``: bytes per input partition (default 32 MiB).  A ``.mkcap`` file
  is split at byte ranges (a task reads the blocks that start in its range,
  the format is made for that); a pcap cannot be split by bytes (TCP streams
  span the file), so it is decoded in ``ceil(size / splitSize)`` tasks that each
  read the whole file and keep the TCP connections hashing to their shard.
* ``ports``: Kafka ports in pcaps (default ``9092``); ``brokerIds``:
  ``port=id,...`` to name the broker of each port in pcaps.
* ``arrow``: ``true`` (default) to hand rows to Spark as Arrow record batches
  of ``batchRows`` rows (default 10000), built from columns with the tables'
  Arrow types; ``false`` to yield Python tuples (Spark converts them value by
  value, several times slower).  The rows are the same either way.
* ``traceDir``: a directory where every task writes which split of which file
  it decoded for which table (a test checks each file is decoded once).

The ``all`` table's batches are built from per-table chunks of rows
(:meth:`~minikafka.analysis.decode.RecordDecoder.iter_all_chunks`), and a task
decodes with Python's cyclic garbage collector off (rows hold no cycles).

Decoding runs in the executors with minikafka's own protocol layer; a table
decodes only the records it needs (``partitions``: Produce, Fetch, ShareFetch,
ShareAcknowledge, Metadata and CreateTopics; ``topics``: Metadata and CreateTopics), stepping over the others
by their length prefix.  Where
it differs from a Spark file source: no partition discovery or globbing, and
rows are computed per task from the raw frames (nothing is cached).
"""

from __future__ import annotations

import gc
import math
import mmap
import os
import struct
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from ..capture.format import (BLOCK_HEADER, BLOCK_MAGIC, FILE_SUFFIX, CaptureRecord, ReadStats, decode_records,
                               iter_blocks)
from .decode import COLUMNS, SCHEMAS, TABLE_API_KEYS, RecordDecoder

DEFAULT_SPLIT = 32 << 20
DEFAULT_BATCH_ROWS = 10000
PCAP_MAGICS = {b"\xd4\xc3\xb2\xa1", b"\xa1\xb2\xc3\xd4", b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\x3c\x4d",
               b"\x0a\x0d\x0d\x0a"}


@dataclass
class CaptureSplit(InputPartition):
    """One task's input: a byte range of a capture file, or one shard of a pcap."""

    path: str
    kind: str  # "mkcap" or "pcap"
    start: int = 0
    end: int = 0
    shard: int = 0
    shards: int = 1


def file_kind(path: Path) -> str | None:
    """"mkcap", "pcap" or None, by name and magic number."""
    if path.name.endswith(FILE_SUFFIX):
        return "mkcap"
    try:
        with open(path, "rb") as fh:
            magic = fh.read(4)
    except OSError:
        return None
    if magic == BLOCK_MAGIC:
        return "mkcap"
    if magic in PCAP_MAGICS:
        return "pcap"
    return None


def input_files(paths: str | list[str]) -> list[tuple[Path, str]]:
    """(file, kind) of every capture or pcap file named or found under directories, sorted."""
    if isinstance(paths, str):
        paths = [p.strip() for p in paths.split(",") if p.strip()]
    out: dict[Path, str] = {}
    for p in map(Path, paths):
        candidates = sorted(q for q in p.rglob("*") if q.is_file()) if p.is_dir() else [p]
        for q in candidates:
            kind = file_kind(q)
            if kind is not None:
                out[q] = kind
    return sorted(out.items(), key=lambda kv: str(kv[0]))


def input_bytes(paths: str | list[str]) -> int | None:
    """The bytes of the capture and pcap files at ``paths`` (None when a path is a URI, not a local file)."""
    names = paths if isinstance(paths, str) else ",".join(str(p) for p in paths)
    if "://" in names:
        return None
    return sum(path.stat().st_size for path, _kind in input_files(names))


def plan_splits(paths: str | list[str], split_size: int = DEFAULT_SPLIT) -> list[CaptureSplit]:
    """The input partitions for ``paths``."""
    splits: list[CaptureSplit] = []
    for path, kind in input_files(paths):
        size = path.stat().st_size
        if size == 0:
            continue
        if kind == "mkcap":
            for start in range(0, size, split_size):
                splits.append(CaptureSplit(str(path), kind, start, min(size, start + split_size)))
        else:
            n = max(1, math.ceil(size / split_size))
            splits.extend(CaptureSplit(str(path), kind, 0, size, i, n) for i in range(n))
    return splits


def _parse_broker_ids(value: str | None) -> dict[str, int] | None:
    if not value:
        return None
    out = {}
    for item in value.split(","):
        k, _, v = item.partition("=")
        out[k.strip()] = int(v)
    return out


def _option(options: Any, name: str, default: Any = None) -> Any:
    """An option by name, case-insensitively: Spark hands the data source its options with lower-case keys."""
    value = options.get(name)
    if value is None:
        value = options.get(name.lower())
    return default if value is None else value


def _first_block(mm: mmap.mmap, start: int, stop: int, size: int, stats: ReadStats | None) -> int | None:
    """Where :func:`iter_blocks` starting at ``start`` would find its first block magic (None: no block
    starts before ``stop``), searched in the mapping itself: a split starting mid-block then does not
    make ``iter_blocks`` copy the whole file to look for it.  Skipped bytes are counted as it would."""
    if start + BLOCK_HEADER.size > size or mm[start:start + len(BLOCK_MAGIC)] == BLOCK_MAGIC:
        return start  # at a block, or too near the end: iter_blocks decides
    nxt = mm.find(BLOCK_MAGIC, start + 1, min(size, stop + len(BLOCK_MAGIC) - 1))
    if nxt < 0 or nxt >= stop:
        if stats is not None:
            stats.skipped_bytes += stop - start
        return None
    if stats is not None:
        stats.skipped_bytes += nxt - start
    return nxt


_RECORD_LENGTH = struct.Struct(">I")
_RECORD_API_KEY = struct.Struct(">h")
_API_KEY_AT = 4 + 8 + 8 + 4  # length, receive ns, send ns, broker id: see minikafka.capture.format


_RECORD_HEAD = struct.Struct(">Iqqihhi")  # length, receive ns, send ns, broker id, api key, version, correlation id
_STR_LEN = struct.Struct(">h").unpack_from
_U32 = struct.Struct(">I").unpack_from
_I32 = struct.Struct(">i").unpack_from
_MAX_NAMES = 4096


def _read_str(buf: memoryview, off: int) -> tuple[str | None, int]:
    """A capture string (int16 length, -1 for null) at ``off``, as :mod:`minikafka.capture.format` reads it."""
    n = _STR_LEN(buf, off)[0]
    off += 2
    if n < 0:
        return None, off
    return bytes(buf[off:off + n]).decode("utf-8", "replace"), off + n


def _names(buf: memoryview, off: int) -> tuple:
    """The five strings after a record's fixed fields: (connection id, peer, server, principal, client id)."""
    conn, off = _read_str(buf, off)
    peer, off = _read_str(buf, off)
    server, off = _read_str(buf, off)
    principal, off = _read_str(buf, off)
    client, off = _read_str(buf, off)
    return conn or "", peer or "", server or "", principal or "", client


def decode_block_records(payload: memoryview, count: int, names: dict[bytes, tuple]) -> list[CaptureRecord]:
    """``decode_records(payload, count)`` (the same records, the same errors), with the five strings of a
    record (connection, peer, server, principal, client id: the same few over and over) decoded once per
    distinct byte string and remembered in ``names``."""
    head, str_len, u32, i32 = _RECORD_HEAD.unpack_from, _STR_LEN, _U32, _I32
    out: list[CaptureRecord] = []
    append = out.append
    off = 0
    for _ in range(count):
        length, recv, send, broker, key, ver, corr = head(payload, off)
        end = off + 4 + length
        p = q = off + _RECORD_HEAD.size
        for _i in range(5):
            n = str_len(payload, q)[0]
            q += 2 + n if n > 0 else 2
        raw = bytes(payload[p:q])
        strings = names.get(raw)
        if strings is None:
            if len(names) >= _MAX_NAMES:
                names.clear()
            strings = names[raw] = _names(payload, p)
        conn, peer, server, principal, client = strings
        n = u32(payload, q)[0]
        q += 4
        req = bytes(payload[q:q + n])
        q += n
        m = i32(payload, q)[0]
        q += 4
        resp = None
        if m >= 0:
            resp = bytes(payload[q:q + m])
            q += m
        injected = listener = None
        if q < end:
            injected, q = _read_str(payload, q)
            if q < end:
                listener, q = _read_str(payload, q)
        append(CaptureRecord(recv, send, conn, peer, broker, principal, client, key, ver, corr, req, resp, server,
                             injected or "", listener or ""))
        off = end
    if off != len(payload):
        raise ValueError(f"block payload has {len(payload) - off} trailing bytes")
    return out


def _records(payload: memoryview, count: int, api_keys: frozenset[int] | None,
             names: dict[bytes, tuple] | None = None) -> list:
    """``decode_records(payload, count)``, or only the records of ``api_keys``: the others are stepped
    over by their length prefix, not decoded (a table that reads a few apis skips most records)."""
    if api_keys is None:
        return decode_block_records(payload, count, {} if names is None else names)
    out = []
    off = 0
    end = len(payload)
    length_at, key_at = _RECORD_LENGTH.unpack_from, _RECORD_API_KEY.unpack_from
    for _ in range(count):
        (length,) = length_at(payload, off)
        nxt = off + 4 + length
        if key_at(payload, off + _API_KEY_AT)[0] in api_keys:
            out.extend(decode_records(payload[off:nxt], 1))
        off = nxt
    if off != end:
        raise ValueError(f"block payload has {end - off} trailing bytes")
    return out


def read_split(split: CaptureSplit, options: dict[str, str] | None = None,
               stats: ReadStats | None = None, api_keys: frozenset[int] | None = None) -> Iterator[Any]:
    """The :class:`~minikafka.capture.format.CaptureRecord`s of one split (with ``api_keys``: at least
    those of these apis; of a capture file, only those)."""
    options = options or {}
    if split.kind == "mkcap":
        with open(split.path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size == 0:
                return
            mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
            try:
                start = _first_block(mm, split.start, min(split.end, size), size, stats)
                if start is None:
                    return
                view = memoryview(mm)
                names: dict[bytes, tuple] = {}
                try:
                    for _off, count, payload in iter_blocks(view, start, split.end, stats, split.path):
                        yield from _records(payload, count, api_keys, names)
                        del payload
                finally:
                    view.release()
            finally:
                try:
                    mm.close()
                except BufferError:  # records still hold views of the file: it is unmapped with the last of them
                    pass
        return
    from ..capture.pcapread import read_pcap

    ports = {int(p) for p in _option(options, "ports", "9092").split(",") if p.strip()}
    yield from read_pcap(split.path, ports=ports, broker_ids=_parse_broker_ids(_option(options, "brokerIds")),
                         shard=(split.shard, split.shards) if split.shards > 1 else None)


class CaptureReader(DataSourceReader):
    """Plans splits on the driver, decodes them in the executors."""

    def __init__(self, options: Mapping[str, str], table: str) -> None:
        self.options = dict(options)
        self.table = table

    def partitions(self) -> list[CaptureSplit]:
        paths = _option(self.options, "path") or _option(self.options, "paths")
        if not paths:
            raise ValueError("the minikafka data source needs a path (capture directory, .mkcap or pcap files)")
        return plan_splits(paths, int(_option(self.options, "splitSize", DEFAULT_SPLIT)))

    def read(self, partition: InputPartition) -> Iterator[Any]:
        """The rows of one split: Arrow record batches (option ``arrow``, the default) or tuples."""
        assert isinstance(partition, CaptureSplit)
        decoder = RecordDecoder(os.path.basename(partition.path))
        trace = _option(self.options, "traceDir")
        if trace:
            _trace_read(trace, partition, self.table)
        records = read_split(partition, self.options, api_keys=TABLE_API_KEYS.get(self.table))
        arrow = _true(_option(self.options, "arrow", "true"))
        batch_rows = int(_option(self.options, "batchRows", DEFAULT_BATCH_ROWS))
        if self.table == "all" and arrow:
            return _without_gc(all_chunk_batches(decoder.iter_all_chunks(records, batch_rows)))
        rows = decoder.iter_rows(records, self.table)
        if not arrow:
            return rows
        return _without_gc(arrow_batches(rows, self.table, batch_rows))


def _without_gc(items: Iterator[Any]) -> Iterator[Any]:
    """``items``, with Python's cyclic garbage collector off while they are made (on again after, if it was).

    Decoding allocates a few tuples per request and keeps a batch of rows alive: the collector would scan
    them again and again (a fifth of the decoding time) for cycles that the rows, records and Arrow arrays
    never form; their memory is freed by reference counting as usual."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield from items
    finally:
        if enabled:
            gc.enable()


def decode_tables_here(options: Mapping[str, str]) -> dict[str, Any]:
    """The ``requests``, ``partitions`` and ``topics`` tables of the captures named by ``options`` (as the
    data source takes them), decoded here, each as one Arrow table: what a small capture needs instead of
    Python workers started for its splits.  Every split is read once, for the three tables at once (and
    traced as the ``all`` table's would be)."""
    import pyarrow as pa

    from .decode import ALL_KINDS

    reader = CaptureReader(options, "all")
    batch_rows = int(_option(reader.options, "batchRows", DEFAULT_BATCH_ROWS))
    trace = _option(reader.options, "traceDir")
    schemas = {t: arrow_schema(t) for t in ALL_KINDS}
    batches: dict[str, list[Any]] = {t: [] for t in ALL_KINDS}
    pending: dict[str, list[tuple]] = {t: [] for t in ALL_KINDS}
    for split in reader.partitions():
        if trace:
            _trace_read(trace, split, "all")
        decoder = RecordDecoder(os.path.basename(split.path))
        for table, row in decoder.iter_all(read_split(split, reader.options)):
            rows = pending[table]
            rows.append(row)
            if len(rows) >= batch_rows:
                batches[table].append(rows_to_batch(rows, schemas[table]))
                rows.clear()
    for table, rows in pending.items():
        if rows:
            batches[table].append(rows_to_batch(rows, schemas[table]))
    return {t: pa.Table.from_batches(batches[t], schema=schemas[t]) for t in ALL_KINDS}


def _trace_read(directory: str, split: CaptureSplit, table: str) -> None:
    """Option ``traceDir``: one line per split read (table, file, byte range) appended to a file of its own in
    ``directory``, so that a test or a curious user can see what was decoded how often."""
    name = f"read-{os.getpid()}-{os.urandom(4).hex()}.txt"
    with open(os.path.join(directory, name), "a", encoding="utf-8") as fh:
        fh.write(f"{table}\t{split.path}\t{split.start}\t{split.end}\t{split.shard}\n")


def _true(value: Any) -> bool:
    return str(value).strip().lower() not in ("false", "0", "no", "off")


_ARROW_TYPES = {"string": "string", "int": "int32", "bigint": "int64", "double": "float64", "boolean": "bool_"}


def arrow_schema(table: str) -> Any:
    """The Arrow schema of a table, as Spark expects batches of its DDL schema (every column nullable)."""
    import pyarrow as pa

    return pa.schema([pa.field(name, getattr(pa, _ARROW_TYPES[typ])(), nullable=True)
                      for name, typ in COLUMNS[table]])


def _spark_string(value: Any) -> Any:
    """What Spark's own conversion of a tuple value makes of a non-``str`` in a string column."""
    if value is None or type(value) is str:
        return value
    if value is True:
        return "true"
    if value is False:
        return "false"
    return str(value)


def rows_to_batch(rows: list[tuple], schema: Any) -> Any:
    """One Arrow record batch of ``rows`` (tuples in the schema's column order)."""
    import pyarrow as pa

    arrays = []
    n = len(rows)
    for col, field in zip(zip(*rows), schema, strict=True):
        first = col[0] if n else None
        try:
            # A column holding one value throughout (null, often: columns of other apis) is made without a
            # look at each value: counting runs in C, converting a value costs far more.
            if n and col.count(first) == n and (first is None or type(first) in (int, str)):
                arrays.append(pa.nulls(n, type=field.type) if first is None
                              else pa.repeat(pa.scalar(first, type=field.type), n))
            else:
                arrays.append(pa.array(col, type=field.type))
        except (pa.ArrowTypeError, pa.ArrowInvalid):
            if field.type != pa.string():
                raise
            arrays.append(pa.array([_spark_string(v) for v in col], type=field.type))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def arrow_batches(rows: Iterator[tuple], table: str, batch_rows: int = DEFAULT_BATCH_ROWS) -> Iterator[Any]:
    """``rows`` as Arrow record batches of ``batch_rows`` rows (the last one shorter)."""
    schema = arrow_schema(table)
    batch: list[tuple] = []
    append = batch.append
    for row in rows:
        append(row)
        if len(batch) >= batch_rows:
            yield rows_to_batch(batch, schema)
            batch.clear()
    if batch:
        yield rows_to_batch(batch, schema)


class _AllBatcher:
    """Arrow record batches of the ``all`` table, one table's rows at a time: that table's columns built
    with its own schema, the other tables' columns null arrays (no per-value work)."""

    def __init__(self) -> None:
        from .decode import ALL_KINDS

        self.schema = arrow_schema("all")
        self.schemas = {t: arrow_schema(t) for t in ALL_KINDS}
        self.spans: dict[str, tuple[int, int]] = {}
        at = 1
        for t in ALL_KINDS:
            self.spans[t] = (at, at + len(self.schemas[t]))
            at += len(self.schemas[t])

    def batch(self, table: str, rows: list[tuple]) -> Any:
        import pyarrow as pa

        from .decode import ALL_KINDS

        n = len(rows)
        own = rows_to_batch(rows, self.schemas[table])
        lo, hi = self.spans[table]
        arrays = [pa.array(_full_int32(n, ALL_KINDS[table]), type=pa.int32())]
        for i, field in enumerate(self.schema):
            if i == 0:
                continue
            arrays.append(own.column(i - lo) if lo <= i < hi else pa.nulls(n, type=field.type))
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)


def all_batches(rows: Iterator[tuple[str, tuple]], batch_rows: int = DEFAULT_BATCH_ROWS) -> Iterator[Any]:
    """Arrow record batches of the ``all`` table from :meth:`RecordDecoder.iter_all`'s (table, row) pairs:
    each batch holds the rows of one table (built with that table's schema), the other tables' columns
    null arrays (no per-value work)."""
    from .decode import ALL_KINDS

    batcher = _AllBatcher()
    pending: dict[str, list[tuple]] = {t: [] for t in ALL_KINDS}
    for table, row in rows:
        rows_of = pending[table]
        rows_of.append(row)
        if len(rows_of) >= batch_rows:
            yield batcher.batch(table, rows_of)
            rows_of.clear()
    for table, rows_of in pending.items():
        if rows_of:
            yield batcher.batch(table, rows_of)


def all_chunk_batches(chunks: Iterator[tuple[str, list[tuple]]]) -> Iterator[Any]:
    """Arrow record batches of the ``all`` table from :meth:`RecordDecoder.iter_all_chunks`' (table, rows)
    chunks, one batch per chunk (as :func:`all_batches` makes them)."""
    batcher = _AllBatcher()
    for table, rows in chunks:
        yield batcher.batch(table, rows)


def _full_int32(n: int, value: int) -> Any:
    import numpy as np

    return np.full(n, value, dtype=np.int32)


class MinikafkaDataSource(DataSource):
    """``format("minikafka")``: requests, per-partition Produce/Fetch detail, or topic ids of captures."""

    @classmethod
    def name(cls) -> str:
        return "minikafka"

    def schema(self) -> str:
        table = self.options.get("table", "requests")
        if table not in SCHEMAS:
            raise ValueError(f"unknown table {table!r}: one of {', '.join(SCHEMAS)}")
        return SCHEMAS[table]

    def reader(self, schema: Any) -> DataSourceReader:
        return CaptureReader(self.options, self.options.get("table", "requests"))
