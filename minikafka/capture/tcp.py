"""TCP reassembly of one direction of a captured connection: segments in, in-order bytes out.

Pure Python, no I/O.  A :class:`TcpStream` models the byte stream one endpoint
sent, as reconstructed from the segments a packet capture holds (not what the
receiving endpoint's kernel saw: a capture may miss packets the peer received).
It is fed segments ``(seq, payload, ts, flags)`` in capture order and hands the
stream to a :class:`StreamSink` as contiguous pieces (``data``) and, where bytes
are known to be missing, as holes of known size (``gap``) so that a framer on
top can resynchronise.

What it handles:

* out-of-order segments: buffered until the hole before them is filled;
* retransmissions, duplicates and overlapping segments: only bytes not yet
  delivered are passed on (the first copy of a byte wins);
* 32-bit sequence wrap-around: sequence numbers are unwrapped to 64-bit stream
  offsets relative to the expected position;
* SYN: the stream starts at ISN + 1; without a SYN (capture started
  mid-stream) it starts at the first segment with data (or FIN) seen, and
  anything before that is lost;
* FIN (the stream is finished once every byte before it was delivered) and RST
  (:meth:`TcpStream.close`);
* holes that never fill (the capture dropped a packet the peer did receive): a
  hole is given up on, reported with ``gap`` and skipped, when more than
  ``max_pending`` bytes wait behind it, when the peer acknowledged data past it
  (:meth:`TcpStream.ack`; the peer had those bytes, so they will not be
  retransmitted), and at the end (:meth:`TcpStream.close`).

Limits: no checksum verification, no window or timestamp (PAWS) checks, urgent
data is treated as data, and a segment's bytes are taken as captured (a
segment truncated by the capture's snap length leaves a hole).
"""

from __future__ import annotations

import heapq
import logging
from typing import Protocol

log = logging.getLogger(__name__)

FIN, SYN, RST, PSH, ACK = 0x01, 0x02, 0x04, 0x08, 0x10
_MASK = 0xFFFFFFFF
_HALF = 1 << 31
DEFAULT_MAX_PENDING = 8 << 20


class StreamSink(Protocol):
    """Where a :class:`TcpStream` delivers its bytes."""

    def data(self, data: bytes | memoryview, ts: int) -> None:
        """The next contiguous bytes of the stream; ``ts`` is the time of the segment they came in."""

    def gap(self, nbytes: int, ts: int) -> None:
        """``nbytes`` bytes of the stream are missing at this point (``ts``: when this was decided)."""


class TcpStream:
    """The bytes one endpoint of a TCP connection sent, reassembled from captured segments.

    Stream offsets count data bytes from the first one (ISN + 1 after a SYN, or
    the first segment seen); ``offset`` is how far the stream was delivered or
    skipped.  ``finished`` becomes true once the FIN was reached or the stream
    was closed; later segments are ignored.
    """

    __slots__ = ("_heap", "_pending", "base", "duplicate_bytes", "fin_offset", "finished", "gap_bytes", "gaps",
                 "late_segments", "max_pending", "offset", "out_of_order", "pending_bytes", "saw_syn",
                 "segments", "sink", "started")

    def __init__(self, sink: StreamSink, max_pending: int = DEFAULT_MAX_PENDING) -> None:
        self.sink = sink
        self.max_pending = max_pending
        self.started = False
        self.saw_syn = False
        self.base = 0  # sequence number of stream offset 0
        self.offset = 0
        self.fin_offset: int | None = None
        self.finished = False
        self._pending: dict[int, tuple[bytes, int]] = {}  # offset -> (data, ts), beyond a hole
        self._heap: list[int] = []  # the offsets in _pending
        self.pending_bytes = 0
        self.segments = 0
        self.duplicate_bytes = 0
        self.out_of_order = 0
        self.gaps = 0
        self.gap_bytes = 0
        self.late_segments = 0

    def _unwrap(self, seq: int) -> int:
        """The stream offset of ``seq``: the one congruent mod 2**32 nearest to ``offset``."""
        d = (seq - self.base - self.offset) & _MASK
        if d >= _HALF:
            d -= 1 << 32
        return self.offset + d

    def segment(self, seq: int, payload: bytes | memoryview, ts: int, flags: int = ACK) -> None:
        """One captured segment of this direction (``flags``: the TCP flags byte)."""
        if self.finished:
            if payload:
                self.late_segments += 1
            return
        self.segments += 1
        if flags & SYN:
            if not self.started:
                self.base = (seq + 1) & _MASK
                self.started = self.saw_syn = True
            seq = (seq + 1) & _MASK  # data in a SYN (TCP fast open) follows the SYN's sequence number
        if not self.started:
            if not payload and not flags & FIN:
                return  # a bare ACK does not anchor a stream we joined mid-way
            self.base = seq
            self.started = True
        off = self._unwrap(seq)
        n = len(payload)
        if flags & FIN and self.fin_offset is None:
            self.fin_offset = off + n
        if n:
            self._add(off, payload, ts)
        if flags & RST:
            self.close(ts)
        elif self.fin_offset is not None and self.offset >= self.fin_offset:
            self.finished = True

    def _add(self, off: int, payload: bytes | memoryview, ts: int) -> None:
        n = len(payload)
        cur = self.offset
        end = off + n
        if end <= cur:
            self.duplicate_bytes += n
            return
        if off <= cur:
            if off < cur:
                self.duplicate_bytes += cur - off
                payload = memoryview(payload)[cur - off:]
            self.offset = end
            self.sink.data(payload, ts)
            if self._heap:
                self._drain()
            return
        self.out_of_order += 1
        old = self._pending.get(off)
        if old is not None:
            if len(old[0]) >= n:
                self.duplicate_bytes += n
                return
            self.pending_bytes -= len(old[0])
        else:
            heapq.heappush(self._heap, off)
        self._pending[off] = (bytes(payload), ts)
        self.pending_bytes += n
        while self.pending_bytes > self.max_pending and self._heap:
            self._skip_gap(ts)

    def _drain(self) -> None:
        """Deliver the buffered segments that now continue the stream."""
        heap = self._heap
        while heap and heap[0] <= self.offset:
            off = heapq.heappop(heap)
            data, ts = self._pending.pop(off)
            self.pending_bytes -= len(data)
            end = off + len(data)
            if end <= self.offset:
                self.duplicate_bytes += len(data)
                continue
            skip = self.offset - off
            self.duplicate_bytes += skip
            self.offset = end
            self.sink.data(memoryview(data)[skip:] if skip else data, ts)

    def _skip_gap(self, ts: int) -> None:
        """Give up on the hole before the first buffered segment."""
        n = self._heap[0] - self.offset
        self.gaps += 1
        self.gap_bytes += n
        log.debug("tcp stream: giving up on %d missing bytes at offset %d", n, self.offset)
        self.offset = self._heap[0]
        self.sink.gap(n, ts)
        self._drain()

    @property
    def has_pending(self) -> bool:
        """Whether segments wait behind a hole."""
        return bool(self._heap)

    def ack(self, ack_seq: int, ts: int) -> None:
        """The peer acknowledged everything before ``ack_seq``: holes it covers will never fill."""
        if not self._heap:
            return
        acked = self._unwrap(ack_seq)
        while self._heap and self._heap[0] <= acked:
            self._skip_gap(ts)
        if self.fin_offset is not None and self.offset >= self.fin_offset:
            self.finished = True

    def close(self, ts: int) -> None:
        """End of the stream (RST, or end of the capture): skip remaining holes, deliver everything."""
        while self._heap:
            self._skip_gap(ts)
        if self.fin_offset is not None and self.offset < self.fin_offset:
            n = self.fin_offset - self.offset
            self.gaps += 1
            self.gap_bytes += n
            self.offset = self.fin_offset
            self.sink.gap(n, ts)
        self.finished = True

    def anchor(self, seq: int) -> None:
        """Start the stream at ``seq`` (known from the peer's SYN-ACK when the SYN itself was missed)."""
        if not self.started:
            self.base = seq & _MASK
            self.started = self.saw_syn = True
