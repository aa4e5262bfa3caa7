"""Writes capture blocks to rolling files (no Trio here; see :mod:`.service` for the broker side)."""

from __future__ import annotations

import logging
import os
from io import FileIO
from pathlib import Path

from ..iovec import writev_all
from .format import (
    FILE_RE,
    FILE_SUFFIX,
    CaptureRecord,
    block_header,
    encode_block,
    encode_record,
)

log = logging.getLogger(__name__)

DEFAULT_BLOCK_BYTES = 1 << 20
DEFAULT_ROLL_BYTES = 256 << 20
_SMALL = 16 * 1024
DROP_CACHE_BYTES = 32 << 20


def _nbytes(b) -> int:
    return b.nbytes if isinstance(b, memoryview) else len(b)


class CaptureFileWriter:
    """Buffers encoded records and appends full blocks to ``capture-<broker>-<seq>.mkcap`` files.

    A new file is started when the current one reaches ``roll_bytes``; existing
    files are never reopened, so a new writer starts after the highest sequence
    number already in the directory.
    """

    def __init__(self, directory: str | os.PathLike, broker_id: int = 0, *,
                 block_bytes: int = DEFAULT_BLOCK_BYTES, roll_bytes: int = DEFAULT_ROLL_BYTES,
                 fsync: bool = False) -> None:
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.broker_id = broker_id
        self.block_bytes = block_bytes
        self.roll_bytes = roll_bytes
        self.fsync = fsync
        seqs = [int(m.group(2)) for p in self.dir.glob(f"capture-{broker_id}-*{FILE_SUFFIX}")
                if (m := FILE_RE.search(p.name)) and int(m.group(1)) == broker_id]
        self.seq = max(seqs, default=-1)
        self._file: FileIO | None = None
        self._file_size = 0
        self._cache_from = 0
        self.pending: list[bytes] = []
        self.pending_bytes = 0
        self.records_written = 0
        self.blocks_written = 0
        self.bytes_written = 0
        self.files: list[Path] = []

    def add(self, record: CaptureRecord) -> bool:
        """Buffer one record; True when a full block is waiting to be flushed."""
        data = encode_record(record)
        self.pending.append(data)
        self.pending_bytes += len(data)
        return self.pending_bytes >= self.block_bytes

    def take_block(self) -> tuple[bytes, int] | None:
        """The pending records as one block (and its record count), leaving nothing pending."""
        if not self.pending:
            return None
        block = encode_block(self.pending)
        n = len(self.pending)
        self.pending = []
        self.pending_bytes = 0
        return block, n

    def write_block(self, block: bytes, count: int) -> None:
        """Append a block, rolling to a new file first when the current one is full (thread-safe
        as long as one thread writes at a time)."""
        f = self._file
        if f is None or self._file_size >= self.roll_bytes:
            f = self._roll()
        writev_all(f.fileno(), [block])
        if self.fsync:
            os.fsync(f.fileno())
        self._file_size += len(block)
        self.bytes_written += len(block)
        self.blocks_written += 1
        self.records_written += count

    def write_parts(self, parts: list, payload_len: int, count: int) -> None:
        """Append a block whose payload is the concatenation of ``parts`` (records as
        :func:`~.format.record_parts` makes them), without joining the large ones: small parts
        are coalesced, then everything goes out with ``writev``."""
        f = self._file
        if f is None or self._file_size >= self.roll_bytes:
            f = self._roll()
        header = block_header(parts, payload_len, count)
        iov: list = [header]
        small: list = []
        for part in parts:
            if _nbytes(part) < _SMALL:
                small.append(part)
                continue
            if small:
                iov.append(b"".join(small))
                small = []
            iov.append(part)
        if small:
            iov.append(b"".join(small))
        writev_all(f.fileno(), iov)
        if self.fsync:
            os.fsync(f.fileno())
        size = len(header) + payload_len
        self._file_size += size
        self._maybe_drop_cache(f.fileno())
        self.bytes_written += size
        self.blocks_written += 1
        self.records_written += count

    def _maybe_drop_cache(self, fd: int) -> None:
        """Every ``DROP_CACHE_BYTES``, write the current file's (``fd``) pages out and drop them from
        the page cache, so that capturing does not fill memory with pages nobody reads soon."""
        if self._file_size - self._cache_from < DROP_CACHE_BYTES or not hasattr(os, "posix_fadvise"):
            return
        os.fdatasync(fd)
        os.posix_fadvise(fd, self._cache_from, self._file_size - self._cache_from, os.POSIX_FADV_DONTNEED)
        self._cache_from = self._file_size

    def flush(self) -> None:
        """Write whatever is pending as a block."""
        taken = self.take_block()
        if taken is not None:
            self.write_block(*taken)

    def _roll(self) -> FileIO:
        """Close the current file and open the next one (returned)."""
        if self._file is not None:
            self._file.close()
        self.seq += 1
        path = self.dir / f"capture-{self.broker_id}-{self.seq:06d}{FILE_SUFFIX}"
        self._file = open(path, "xb", buffering=0)
        self._file_size = 0
        self._cache_from = 0
        self.files.append(path)
        log.info("capture: writing %s", path)
        return self._file

    def close(self) -> None:
        """Flush and close the current file."""
        self.flush()
        if self._file is not None:
            self._file.close()
            self._file = None
