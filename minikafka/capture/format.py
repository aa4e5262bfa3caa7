"""The capture format: rolling ``capture-<broker>-<seq>.mkcap`` files of self-checking blocks.

A file is a sequence of blocks, nothing else (no file header), so a file can be
split at any byte offset: a reader of a byte range scans for the block magic
and trusts a block only when its CRC matches.  A block is::

    magic "MKCB" | payload length u32 | CRC-32C u32 | record count u32 | payload

(big endian; the CRC covers the record count and the payload).  The payload is
``count`` records, each ``length u32`` followed by::

    receive ns i64 | send ns i64 | broker id i32 | api key i16 | api version i16 |
    correlation id i32 | connection id, peer, server, principal: str16 |
    client id: str16 (length -1 = null) | request frame: bytes32 |
    response frame: bytes32 (length -1 = absent, e.g. acks=0 produce) |
    [injected: str16, present when fault injection made the response or a listener follows] |
    [listener: str16, the name of the listener the request came in on]

The bracketed fields are optional trailing fields, added after the format was
first used: a reader takes each one only while the record's length says bytes
remain, so records written before them (ending after the response frame, or
after ``injected``) read with empty values, and an older reader skips fields it
does not know by the record length.  ``principal`` is the connection's
authenticated principal when the request was handled (``User:alice``, a
mapped client-certificate subject, ``User:ANONYMOUS`` before or without
authentication; "" where unknown, as in pcaps).

Times are wall-clock nanoseconds since the epoch; frames are the Kafka frames
without their 4-byte size prefix.  Files are only ever appended to; a writer
never reopens an existing file, so a crash can at most leave a torn last block.
"""

from __future__ import annotations

import logging
import os
import re
import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from crc32c import crc32c

log = logging.getLogger(__name__)

BLOCK_MAGIC = b"MKCB"
BLOCK_HEADER = struct.Struct(">4sIII")
FILE_SUFFIX = ".mkcap"
FILE_RE = re.compile(r"capture-(\d+)-(\d+)\.mkcap$")
MAX_BLOCK_PAYLOAD = 1 << 30

_FIXED = struct.Struct(">qqihhi")
_U32 = struct.Struct(">I")
_I32 = struct.Struct(">i")
_H = struct.Struct(">h")


@dataclass(slots=True)
class CaptureRecord:
    """One request and its response as the broker saw them."""

    receive_ns: int
    send_ns: int
    connection_id: str
    peer: str
    broker_id: int
    principal: str
    client_id: str | None
    api_key: int
    api_version: int
    correlation_id: int
    request: bytes
    response: bytes | None
    server: str = ""
    injected: str = ""  # the fault rules that made the response (fault injection), if any
    listener: str = ""  # the listener the request came in on ("SASL_SSL"; "" in older captures and pcaps)

    @property
    def latency_ns(self) -> int:
        return self.send_ns - self.receive_ns


def _str16(s: str | None) -> bytes:
    if s is None:
        return b"\xff\xff"
    b = s.encode("utf-8")[:32767]
    return _H.pack(len(b)) + b


def _nbytes(b) -> int:
    return b.nbytes if isinstance(b, memoryview) else len(b)


def record_parts(receive_ns: int, send_ns: int, broker_id: int, api_key: int, api_version: int,
                 correlation_id: int, connection_id: str, peer: str, server: str, principal: str,
                 client_id: str | None, request, response: list | None, injected: str = "",
                 listener: str = "") -> tuple[list, int]:
    """One record, length prefix included, as a list of buffers (the frames are not copied) and its size.

    ``request`` is the request frame or a list of buffers it is made of; ``response`` the list of
    buffers the response frame is made of, or None; ``injected`` describes injected faults and
    ``listener`` names the request's listener (optional trailing fields: ``injected`` is written when
    it or a listener is there, ``listener`` when not empty).
    """
    if isinstance(request, list):
        req_parts = request
        req_len = sum(_nbytes(s) for s in request)
    else:
        req_parts = [request]
        req_len = _nbytes(request)
    head = b"".join((
        _FIXED.pack(receive_ns, send_ns, broker_id, api_key, api_version, correlation_id),
        _str16(connection_id), _str16(peer), _str16(server), _str16(principal), _str16(client_id),
        _U32.pack(req_len),
    ))
    if response is None:
        tail = [_I32.pack(-1)]
        resp_len = 0
    else:
        resp_len = sum(_nbytes(s) for s in response)
        tail = [_I32.pack(resp_len), *response]
    if injected or listener:
        tail.append(_str16(injected))
        resp_len += len(tail[-1])
    if listener:
        tail.append(_str16(listener))
        resp_len += len(tail[-1])
    body_len = len(head) + req_len + 4 + resp_len
    return [_U32.pack(body_len) + head, *req_parts, *tail], 4 + body_len


def encode_record(r: CaptureRecord) -> bytes:
    """One record with its length prefix."""
    parts, _size = record_parts(r.receive_ns, r.send_ns, r.broker_id, r.api_key, r.api_version,
                                r.correlation_id, r.connection_id, r.peer, r.server, r.principal,
                                r.client_id, r.request, None if r.response is None else [r.response], r.injected,
                                r.listener)
    return b"".join(parts)


def block_header(parts: Iterable, payload_len: int, count: int) -> bytes:
    """The header of a block whose payload is the concatenation of ``parts`` (CRC computed over them)."""
    crc = crc32c(_U32.pack(count))
    for part in parts:
        crc = crc32c(part, crc)
    return BLOCK_HEADER.pack(BLOCK_MAGIC, payload_len, crc, count)


def encode_block(records: Iterable[bytes], count: int | None = None) -> bytes:
    """A block of already encoded records (as :func:`encode_record` returns them)."""
    records = list(records)
    payload = b"".join(records)
    n = len(records) if count is None else count
    return block_header([payload], len(payload), n) + payload


def _read_str(buf: memoryview, off: int) -> tuple[str | None, int]:
    (n,) = _H.unpack_from(buf, off)
    off += 2
    if n < 0:
        return None, off
    return bytes(buf[off:off + n]).decode("utf-8", "replace"), off + n


def decode_records(payload: memoryview | bytes, count: int) -> list[CaptureRecord]:
    """The records of one block's payload."""
    buf = memoryview(payload)
    out = []
    off = 0
    for _ in range(count):
        (length,) = _U32.unpack_from(buf, off)
        off += 4
        end = off + length
        recv, send, broker, key, ver, corr = _FIXED.unpack_from(buf, off)
        p = off + _FIXED.size
        conn, p = _read_str(buf, p)
        peer, p = _read_str(buf, p)
        server, p = _read_str(buf, p)
        principal, p = _read_str(buf, p)
        client, p = _read_str(buf, p)
        (n,) = _U32.unpack_from(buf, p)
        p += 4
        req = bytes(buf[p:p + n])
        p += n
        (m,) = _I32.unpack_from(buf, p)
        p += 4
        resp = None if m < 0 else bytes(buf[p:p + m])
        p += max(m, 0)
        injected, p = _read_str(buf, p) if p < end else ("", p)
        listener, p = _read_str(buf, p) if p < end else ("", p)
        out.append(CaptureRecord(recv, send, conn or "", peer or "", broker, principal or "", client,
                                 key, ver, corr, req, resp, server or "", injected or "", listener or ""))
        off = end
    if off != len(buf):
        raise ValueError(f"block payload has {len(buf) - off} trailing bytes")
    return out


@dataclass
class ReadStats:
    """What a reader met besides good blocks."""

    blocks: int = 0
    records: int = 0
    corrupt_blocks: int = 0
    torn_bytes: int = 0
    skipped_bytes: int = 0


def iter_blocks(data: bytes | memoryview, start: int = 0, end: int | None = None,
                stats: ReadStats | None = None, name: str = "") -> Iterator[tuple[int, int, memoryview]]:
    """(offset, record count, payload) of every valid block whose header starts in [start, end).

    A block with a bad CRC is skipped (and counted); bytes that are not a block
    are scanned over to the next magic; a block running past the end of the data
    is a torn tail and ends the iteration.
    """
    buf = memoryview(data)
    size = len(buf)
    stop = size if end is None else min(end, size)
    stats = stats if stats is not None else ReadStats()
    off = start
    while off < stop:
        if off + BLOCK_HEADER.size > size:
            stats.torn_bytes += size - off
            return
        if bytes(buf[off:off + 4]) != BLOCK_MAGIC:
            nxt = bytes(buf).find(BLOCK_MAGIC, off + 1) if off + 1 < size else -1
            if nxt < 0 or nxt >= stop:
                stats.skipped_bytes += stop - off
                return
            stats.skipped_bytes += nxt - off
            off = nxt
            continue
        _, length, crc, count = BLOCK_HEADER.unpack_from(buf, off)
        body_start = off + BLOCK_HEADER.size
        if length > MAX_BLOCK_PAYLOAD or body_start + length > size:
            # Either a torn tail or a damaged length field: try resyncing after it.
            nxt = bytes(buf).find(BLOCK_MAGIC, off + 1)
            if nxt < 0:
                stats.torn_bytes += size - off
                log.warning("%s: torn block at offset %d (%d bytes), stopping", name, off, size - off)
                return
            stats.corrupt_blocks += 1
            off = nxt
            continue
        payload = buf[body_start:body_start + length]
        if crc32c(payload, crc32c(_U32.pack(count))) != crc:
            stats.corrupt_blocks += 1
            log.warning("%s: block at offset %d fails its CRC, skipped", name, off)
            nxt = bytes(buf).find(BLOCK_MAGIC, off + 1)
            if nxt < 0:
                return
            off = nxt
            continue
        stats.blocks += 1
        stats.records += count
        yield off, count, payload
        off = body_start + length


def capture_files(paths: Iterable[str | os.PathLike]) -> list[Path]:
    """The capture files named or found (``*.mkcap``) in directories, by broker and sequence."""
    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            out.extend(p.glob(f"*{FILE_SUFFIX}"))
        else:
            out.append(p)

    def key(path: Path) -> tuple:
        m = FILE_RE.search(path.name)
        return (int(m.group(1)), int(m.group(2)), str(path)) if m else (1 << 62, 0, str(path))

    return sorted(set(out), key=key)


def read_file(path: str | os.PathLike, stats: ReadStats | None = None, start: int = 0,
              end: int | None = None) -> Iterator[CaptureRecord]:
    """Every record of one capture file (or of the blocks starting in a byte range of it)."""
    data = Path(path).read_bytes()
    for _off, count, payload in iter_blocks(data, start, end, stats, str(path)):
        yield from decode_records(payload, count)
