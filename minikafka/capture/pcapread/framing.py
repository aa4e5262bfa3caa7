"""Kafka framing of one direction of a TCP connection: frames by their size prefix, resynchronisation.

:class:`_RequestFramer` splits the client's stream into request frames,
:class:`_ResponseFramer` the server's into response frames; in step, frames
are cut by :class:`~minikafka.protocol.framing.FrameDecoder`; after a hole (or
at a capture's mid-connection start) each scans for a plausible frame start
and verifies it before going on.
"""

from __future__ import annotations

import logging
import re
import struct
from collections import deque
from itertools import islice
from typing import Any, Protocol

from ...protocol.api import APIS
from ...protocol.exceptions import ProtocolError
from ...protocol.framing import Frame, FrameDecoder
from ..frames import parse_request_frame, parse_response_frame
from ..tcp import TcpStream



class _Conn(Protocol):
    """What a framer needs of its connection (:class:`~.connection._Conn`)."""

    connection_id: str
    dead: bool
    last_corr: int | None
    outstanding: deque
    decoder: Any

    def on_request(self, frame: bytes, ts: int) -> None: ...

    def on_response(self, frame: bytes, ts: int) -> None: ...

log = logging.getLogger(__name__)

CORRELATION_WINDOW = 1_000_000  # how far past the last seen a resynchronised correlation id may be

_I32 = struct.Struct(">i")
_REQ_HEAD = struct.Struct(">ihhih")  # size, api key, version, correlation id, client id length
_CTRL = re.compile(rb"[\x00-\x1f\x7f]")
_REQ_PATTERN = re.compile(b"\\x00[" + b"".join(re.escape(bytes([k])) for k in sorted(APIS)) + b"]\\x00",
                          re.DOTALL)


class _Framer:
    """Splits one direction's byte stream into Kafka frames, resynchronising after holes.

    In step (``synced``), frames follow each other by their size prefixes: the
    bytes go to ``dec``, a :class:`FrameDecoder`, once the head of each frame
    looks plausible.  Out of step, the bytes are held in ``buf`` (from ``pos``
    on) and scanned for candidate frame starts (``cands``, positions in
    ``buf``; ``scan_pos``: where scanning goes on); the first candidate whose
    whole frame arrived and verifies puts the framer back in step there, the
    rest of ``buf`` going to ``dec``.  ``synced`` None means "decide at the
    first byte": in step if the stream's start (SYN) was seen.
    """

    __slots__ = ("buf", "cands", "checked", "conn", "dec", "frames", "max_frame", "pos", "scan_pos", "skip",
                 "start_ts", "stats", "stream", "synced")

    MAX_CANDIDATES = 256

    def __init__(self, conn: _Conn, max_frame: int) -> None:
        self.conn = conn
        self.stats = conn.decoder.stats
        self.stream: TcpStream | None = None
        self.max_frame = max_frame
        self.dec = FrameDecoder(max_frame)
        self.checked = False  # the head of the frame in ``dec`` was found plausible
        self.buf = bytearray()
        self.pos = 0
        self.synced: bool | None = None
        self.cands: list[int] = []
        self.scan_pos = 0
        self.skip = 0
        self.start_ts = 0
        self.frames = 0

    # StreamSink
    def data(self, data: bytes | memoryview, ts: int) -> None:
        if self.conn.dead:
            return
        if self.synced is None:
            self.synced = self.stream is not None and self.stream.saw_syn
        if self.skip:
            k = min(self.skip, len(data))
            self.skip -= k
            self.stats.skipped_bytes += k
            if k == len(data):
                return
            data = memoryview(data)[k:]
        if self.synced:
            dec = self.dec
            if not dec.held_bytes:
                self.start_ts = ts
            if data:  # (empty data would tell the decoder the stream ended)
                dec.receive_data(data)
        else:
            if self.pos == len(self.buf):
                self.start_ts = ts
            self.buf += data
        self._parse(ts)

    def _held(self) -> int:
        """Bytes held: in the decoder (in step) or ``buf`` (out of step)."""
        return self.dec.held_bytes + len(self.buf) - self.pos

    def gap(self, nbytes: int, ts: int) -> None:
        self.stats.gaps += 1
        self.stats.gap_bytes += nbytes
        if self.conn.dead:
            return
        avail = self._held()
        if self.skip:
            if nbytes <= self.skip:
                self.skip -= nbytes
                return
            self.skip = 0
            self.synced = False
        elif self.synced and avail >= 4:
            (size,) = _I32.unpack_from(self.dec.peek(4))
            remaining = 4 + size - avail
            if 0 <= size <= self.max_frame and nbytes <= remaining:
                self.skip = remaining - nbytes  # the frame is lost, the next one starts in step
                self.stats.lost_frames += 1
            else:
                self.synced = False
        else:
            if self.synced and avail:
                self.stats.lost_frames += 1
            self.synced = False
        self.stats.skipped_bytes += avail
        self._drop()
        if not self.synced:
            log.debug("%s: %s out of step after a %d-byte hole", self.conn.connection_id, type(self).__name__,
                      nbytes)

    def end(self) -> None:
        """End of the stream: a partial frame left is lost."""
        avail = self._held()
        if avail and self.synced:
            self.stats.lost_frames += 1
        self.stats.skipped_bytes += avail
        self._drop()

    def _drop(self) -> None:
        """Forget every byte held."""
        self.dec.close()
        self.checked = False
        self.buf = bytearray()
        self.pos = self.scan_pos = 0
        self.cands.clear()

    def _parse(self, ts: int) -> None:
        dec = self.dec
        while True:
            if not self.synced:
                if not self._resync():
                    break
                with memoryview(self.buf) as mv:  # back in step at pos: the decoder takes over from there
                    dec.receive_data(mv[self.pos:])
                self.buf = bytearray()
                self.pos = 0
            if not self.checked:  # the next frame's head, before the decoder commits to it
                head = dec.peek(8)
                if len(head) < 4:
                    break
                (size,) = _I32.unpack_from(head)
                ok = self._plausible(head, size)
                if ok is None:
                    break
                if not ok:
                    if self._not_kafka():
                        return
                    log.debug("%s: implausible %s frame, resynchronising", self.conn.connection_id,
                              type(self).__name__)
                    self.synced = False
                    self.stats.skipped_bytes += 1
                    self.buf = dec.take()
                    self.pos = self.scan_pos = 1
                    continue
                self.checked = True
            event = dec.next_event()  # sizes above max_frame are implausible: never FrameTooLarge
            if event.__class__ is not Frame:
                break
            self.checked = False
            dec.pool.release(event.pooled)  # (unbounded pool: charged only while being filled)
            self.frames += 1
            self._frame(bytes(event.payload), self.start_ts, ts)
            self.start_ts = ts
            if self.conn.dead:
                return
        buf, pos = self.buf, self.pos
        if pos == len(buf):
            buf.clear()
            self.pos = self.scan_pos = 0
            self.cands.clear()
        elif pos >= 65536 and 2 * pos >= len(buf):
            del buf[:pos]
            self.pos = 0
            self.scan_pos -= pos
            self.cands[:] = [c - pos for c in self.cands]

    def _resync(self) -> bool:
        """Look for the way back into step; True (and ``pos`` there) once found."""
        buf, cands = self.buf, self.cands
        while True:
            c, found = self._find(self.scan_pos)
            if not found:
                self.scan_pos = c
                break
            cands.append(c)
            self.scan_pos = c + 1
        if len(cands) > self.MAX_CANDIDATES:
            del cands[:len(cands) - self.MAX_CANDIDATES]
        n = len(buf)
        rejected = 0
        for c in cands:
            (size,) = _I32.unpack_from(buf, c)
            end = c + 4 + size
            if end > n:
                continue
            with memoryview(buf) as mv:
                frame = bytes(mv[c + 4:end])
            if self._verify(frame):
                self.stats.skipped_bytes += c - self.pos
                self.pos = c
                self.synced = True
                self.stats.resyncs += 1
                cands.clear()
                self.scan_pos = 0
                log.debug("%s: %s back in step", self.conn.connection_id, type(self).__name__)
                return True
            rejected += 1
        if rejected:
            cands[:] = [c for c in cands if c + 4 + _I32.unpack_from(buf, c)[0] > n]
        keep = cands[0] if cands else self.scan_pos
        self.stats.skipped_bytes += keep - self.pos
        self.pos = keep
        return False

    def _not_kafka(self) -> bool:
        return False

    # per direction
    def _plausible(self, head: bytes, size: int) -> bool | None:
        """Whether a frame of ``size`` starting with ``head`` (its first 4 to 8 bytes, size prefix
        included) is believable in step (None: need more bytes)."""
        raise NotImplementedError

    def _find(self, start: int) -> tuple[int, bool]:
        """(c, True): a candidate frame start at c >= start; (c, False): none before c, keep from c on."""
        raise NotImplementedError

    def _verify(self, frame: bytes) -> bool:
        """Whether a candidate's whole frame is what it seems."""
        raise NotImplementedError

    def _frame(self, frame: bytes, start_ts: int, ts: int) -> None:
        raise NotImplementedError


class _RequestFramer(_Framer):
    """Client to server: request frames."""

    __slots__ = ()

    def _plausible(self, head: bytes, size: int) -> bool | None:
        if size < 8 or size > self.max_frame:
            return False
        if len(head) < 8:
            return None
        api_key, version = struct.unpack_from(">hh", head, 4)
        return 0 <= api_key <= 255 and 0 <= version <= 127

    def _not_kafka(self) -> bool:
        stream = self.stream
        if self.frames == 0 and stream is not None and stream.saw_syn and not stream.gaps:
            conn = self.conn
            conn.dead = True
            conn.decoder.stats.non_kafka_connections += 1
            log.info("%s: not Kafka (first request frame implausible), ignored", conn.connection_id)
            self._drop()
            return True
        return False

    def _find(self, start: int) -> tuple[int, bool]:
        buf = self.buf
        n = len(buf)
        last = self.conn.last_corr
        p = start + 4
        while True:
            m = _REQ_PATTERN.search(buf, p)
            if m is None:
                return max(start, n - 13), False
            c = m.start() - 4
            if c + 14 > n:
                return c, False
            size, api_key, version, corr, cid = _REQ_HEAD.unpack_from(buf, c)
            api = APIS[api_key]
            if (10 <= size <= self.max_frame and api.min_version <= version <= api.max_version
                    and (corr >= 0 if last is None else last < corr <= last + CORRELATION_WINDOW)
                    and -1 <= cid <= size - 10):
                head_end = c + 14 + max(cid, 0)
                flexible = api.is_flexible(version)
                if head_end + flexible > n:
                    return c, False
                client = bytes(buf[c + 14:head_end])
                try:
                    client.decode("utf-8")
                    ok = _CTRL.search(client) is None and (not flexible or buf[head_end] < 16)
                except UnicodeDecodeError:
                    ok = False
                if ok:
                    return c, True
            p = m.start() + 1

    def _verify(self, frame: bytes) -> bool:
        try:
            parse_request_frame(frame)
        except ProtocolError:  # does not parse: not a request frame
            return False
        return True

    def _frame(self, frame: bytes, start_ts: int, ts: int) -> None:
        self.conn.on_request(frame, ts)


class _ResponseFramer(_Framer):
    """Server to client: response frames."""

    __slots__ = ()

    def _plausible(self, head: bytes, size: int) -> bool | None:
        return 4 <= size <= self.max_frame

    def _find(self, start: int) -> tuple[int, bool]:
        buf = self.buf
        n = len(buf)
        best: int | None = None
        for p in islice(self.conn.outstanding, 64):
            needle = _I32.pack(p.corr)
            i = buf.find(needle, start + 4, n if best is None else best + 4)
            while i >= 0:
                (size,) = _I32.unpack_from(buf, i - 4)
                if 4 <= size <= self.max_frame:
                    best = i - 4
                    break
                i = buf.find(needle, i + 1, n if best is None else best + 4)
        if best is None:
            return max(start, n - 7), False
        return best, True

    def _verify(self, frame: bytes) -> bool:
        (corr,) = _I32.unpack_from(frame)
        for p in self.conn.outstanding:
            if p.corr == corr:
                if p.api_key not in APIS:
                    return True
                try:
                    parse_response_frame(frame, p.api_key, p.api_version)
                except ProtocolError:  # does not parse: not this response
                    return False
                return True
        return False

    def _frame(self, frame: bytes, start_ts: int, ts: int) -> None:
        self.conn.on_response(frame, start_ts)
