"""The ``minikafka`` Spark data source (Spark 4's Python Data Source API): captures and pcaps as DataFrames.

::

    spark.read.format("minikafka").option("table", "partitions").load("capture-dir/")

Options:

* ``path`` (or ``load(path)``): capture directories, ``.mkcap`` files and
  tcpdump ``pcap``/``pcapng`` files, comma-separated.
* ``table``: ``requests`` (default), ``partitions`` or ``topics``
  (schemas in :mod:`minikafka.analysis.decode`).
* ``splitSize``: bytes per input partition (default 32 MiB).  A ``.mkcap`` file
  is split at byte ranges (a task reads the blocks that start in its range,
  the format is made for that); a pcap cannot be split by bytes (TCP streams
  span the file), so it is decoded in ``ceil(size / splitSize)`` tasks that each
  read the whole file and keep the TCP connections hashing to their shard.
* ``ports``: Kafka ports in pcaps (default ``9092``); ``brokerIds``:
  ``port=id,...`` to name the broker of each port in pcaps.

Decoding runs in the executors with minikafka's own protocol layer.  Where
it differs from a Spark file source: no partition discovery or globbing, and
rows are computed per task from the raw frames (nothing is cached).
"""

from __future__ import annotations

import math
import mmap
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from ..capture.format import BLOCK_MAGIC, FILE_SUFFIX, ReadStats, decode_records, iter_blocks
from .decode import SCHEMAS, RecordDecoder

DEFAULT_SPLIT = 32 << 20
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


def read_split(split: CaptureSplit, options: dict[str, str] | None = None,
               stats: ReadStats | None = None) -> Iterator[Any]:
    """The :class:`~minikafka.capture.format.CaptureRecord`s of one split."""
    options = options or {}
    if split.kind == "mkcap":
        with open(split.path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size == 0:
                return
            with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
                view = memoryview(mm)
                try:
                    for _off, count, payload in iter_blocks(view, split.start, split.end, stats, split.path):
                        yield from decode_records(payload, count)
                        del payload
                finally:
                    view.release()
        return
    from ..capture.pcapread import read_pcap

    ports = {int(p) for p in options.get("ports", "9092").split(",") if p.strip()}
    yield from read_pcap(split.path, ports=ports, broker_ids=_parse_broker_ids(options.get("brokerIds")),
                         shard=(split.shard, split.shards) if split.shards > 1 else None)


class CaptureReader(DataSourceReader):
    """Plans splits on the driver, decodes them in the executors."""

    def __init__(self, options: dict[str, str], table: str) -> None:
        self.options = dict(options)
        self.table = table

    def partitions(self) -> list[InputPartition]:
        paths = self.options.get("path") or self.options.get("paths")
        if not paths:
            raise ValueError("the minikafka data source needs a path (capture directory, .mkcap or pcap files)")
        return plan_splits(paths, int(self.options.get("splitSize", DEFAULT_SPLIT)))

    def read(self, partition: InputPartition) -> Iterator[tuple]:
        assert isinstance(partition, CaptureSplit)
        decoder = RecordDecoder(os.path.basename(partition.path))
        for rec in read_split(partition, self.options):
            yield from decoder.rows(rec, self.table)


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
