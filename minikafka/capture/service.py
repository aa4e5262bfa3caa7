"""The broker side of capture: a bounded channel from the request path to a writer task.

The socket server calls :meth:`CaptureService.record` after each response went
out; that only puts a reference to the request context, the request frame and
the response segments into a bounded Trio memory channel (records are dropped,
counted and logged when it is full; the request path never waits).  The writer
task, run in the broker's nursery, encodes the record headers and writes full
blocks (or what it has every ``flush_interval`` seconds, and on shutdown) from a
worker thread: the frames are never copied or joined, the CRC-32C (which
releases the GIL) and the write run in that thread.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import trio

from ..common import SYSTEM_CLOCK, Clock
from .format import record_parts
from .writer import DEFAULT_BLOCK_BYTES, DEFAULT_ROLL_BYTES, CaptureFileWriter

if TYPE_CHECKING:
    from ..broker.request import RequestContext

log = logging.getLogger(__name__)


def _size(buffers: Any) -> int:
    if isinstance(buffers, list):
        return sum(b.nbytes if isinstance(b, memoryview) else len(b) for b in buffers)
    return buffers.nbytes if isinstance(buffers, memoryview) else len(buffers)


class CaptureService:
    """Receives (request, response) pairs from the broker and writes them to a capture directory."""

    def __init__(self, directory, broker_id: int, server: str = "", *, queue_size: int = 20000,
                 max_pending_bytes: int = 256 << 20, block_bytes: int = DEFAULT_BLOCK_BYTES,
                 roll_bytes: int = DEFAULT_ROLL_BYTES, flush_interval: float = 1.0,
                 clock: Clock = SYSTEM_CLOCK) -> None:
        self.writer = CaptureFileWriter(directory, broker_id, block_bytes=block_bytes, roll_bytes=roll_bytes)
        self.broker_id = broker_id
        self.server = server
        self.flush_interval = flush_interval
        self._send, self._receive = trio.open_memory_channel(queue_size)
        self.dropped = 0
        self.max_pending_bytes = max_pending_bytes
        self.pending_bytes = 0  # frame bytes handed over and not yet written
        self.captured = 0
        self._last_drop_log = 0.0
        self._handed = 0
        self.clock = clock
        # Monotonic (what the request context holds) to wall-clock nanoseconds.
        self._wall_offset = clock.time_ns() - clock.monotonic_ns()

    def record(self, ctx: RequestContext, frame: Any, response: list | None, injected: str = "") -> None:
        """Hand one answered request to the writer (called right after its response was sent).

        ``frame`` is the request frame or a list of buffers making it up; ``response`` the response's buffers
        or None; ``injected`` the fault rules that made the response, if any.  Dropped (and counted) when the
        writer is too far behind, by count or by bytes; never waits.
        """
        size = _size(frame) + (_size(response) if response is not None else 0)
        if self.pending_bytes + size > self.max_pending_bytes and self.pending_bytes:
            self._drop()
            return
        try:
            self._send.send_nowait((ctx, frame, response, self.clock.monotonic_ns(), size, injected))
        except trio.WouldBlock:
            self._drop()
            return
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return
        self.pending_bytes += size

    def _drop(self) -> None:
        self.dropped += 1
        now = self.clock.monotonic_ns() / 1e9
        if now - self._last_drop_log >= 10 or self.dropped == 1:
            self._last_drop_log = now
            log.warning("capture: writer behind, %d record(s) dropped so far", self.dropped)

    def _to_parts(self, item: tuple, parts: list) -> int:
        """Append one record's buffers to ``parts``; returns its size."""
        ctx, frame, response, sent_ns, _, injected = item
        off = self._wall_offset
        rec, size = record_parts(ctx.received_ns + off, sent_ns + off, self.broker_id, ctx.api_key,
                                 ctx.api_version, ctx.correlation_id, ctx.connection_id, ctx.peer, self.server,
                                 ctx.principal, ctx.client_id, frame, response, injected, ctx.listener)
        parts.extend(rec)
        return size

    def _write(self, parts: list, size: int, count: int) -> None:
        self.writer.write_parts(parts, size, count)

    def _to_parts_counted(self, item: tuple, parts: list) -> int:
        self.captured += 1
        self._handed += item[4]
        return self._to_parts(item, parts)

    async def run(self) -> None:
        """The writer task: runs until cancelled, then writes what is left and closes the file."""
        block_bytes = self.writer.block_bytes
        parts: list = []
        size = count = 0
        try:
            while True:
                with trio.move_on_after(self.flush_interval):
                    while size < block_bytes:
                        size += self._to_parts_counted(await self._receive.receive(), parts)
                        count += 1
                if count:
                    # Cleared only once written: a cancellation that arrives first (to_thread checks for one
                    # before the thread starts) leaves the block to the finally below, which writes it.
                    handed = self._handed
                    try:
                        await trio.to_thread.run_sync(self._write, parts, size, count)
                    except trio.Cancelled:
                        raise
                    except BaseException:
                        parts, size, count = [], 0, 0  # a failed write is not tried again
                        raise
                    parts, size, count, self._handed = [], 0, 0, 0
                    self.pending_bytes -= handed
        finally:
            # Synchronous from here on: nothing a cancellation could interrupt.
            try:
                while True:
                    size += self._to_parts_counted(self._receive.receive_nowait(), parts)
                    count += 1
            except (trio.WouldBlock, trio.EndOfChannel, trio.ClosedResourceError):
                pass
            self._receive.close()
            try:
                if count:
                    self._write(parts, size, count)
                self.writer.close()
            except Exception:  # I/O at shutdown (disk full, directory gone): logged, the broker stops anyway
                log.exception("capture: could not write the last block")
            log.log(logging.WARNING if self.dropped else logging.INFO,
                    "capture: %d record(s) written in %d block(s), %d dropped",
                    self.writer.records_written, self.writer.blocks_written, self.dropped)
