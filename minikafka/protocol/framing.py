"""Kafka's size-prefixed frames, sans I/O: bytes in, frames out (in the manner of h11's ``Connection``).

Every Kafka request and response travels as an int32 size followed by that
many bytes.  :class:`FrameDecoder` turns a byte stream into those payloads
and never touches a socket: the caller feeds it (``receive_data``, or
``frame_buffer`` + ``buffer_updated`` to let the socket write straight into a
frame's memory) and asks :meth:`FrameDecoder.next_event` for what it has:
a :class:`Frame`, ``NEED_DATA``, ``NEED_MEMORY`` (the shared
:class:`MemoryPool` is exhausted) or ``CLOSED``.

Memory is bounded the way Kafka bounds it, and then some:

* a frame's declared size is never allocated before its bytes arrive: its
  buffer grows in chunks of at most ``chunk_size`` (or, for frames larger than
  that, at most doubling what already arrived), so a client that declares
  100 MB and sends 64 KiB holds one chunk;
* sizes above ``max_frame_size`` (Kafka's ``socket.request.max.bytes``) or
  below zero raise :class:`FrameTooLarge` / :class:`InvalidFrameSize` at once,
  as Kafka's ``InvalidReceiveException`` does;
* bytes read ahead of a frame boundary are at most ``read_size``: the decoder
  asks for no more data while it still holds a whole frame;
* as in Kafka's ``SimpleMemoryPool`` (``queued.max.request.bytes``), a frame is
  charged its declared size to the optional :class:`MemoryPool` when its size
  prefix arrives, so a frame that started always has the memory to finish and
  frames cannot wait on each other; when the pool is exhausted the decoder says
  ``NEED_MEMORY`` and reads nothing more.  The caller releases the charge once
  the frame has been handled.  Deliberate difference: frames of at most
  ``small_frame`` bytes (default ``read_size``) are always admitted (and
  charged), so that large partial frames cannot starve small requests; their
  memory is bounded per connection by ``read_size``.

Used by the broker's socket server, the client connection, wire replay and
the pcap reader.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Callable
from typing import NamedTuple

from .exceptions import FrameError, FrameTooLarge, InvalidFrameSize, TruncatedFrame

__all__ = [
    "CLOSED", "NEED_DATA", "NEED_MEMORY", "Frame", "FrameDecoder", "FrameError", "FrameTooLarge",
    "InvalidFrameSize", "MemoryPool", "TruncatedFrame", "encode_frame", "frame_size_prefix",
]

DEFAULT_READ_SIZE = 256 * 1024
DEFAULT_CHUNK_SIZE = 1 << 20
UNBOUNDED = 0x7FFFFFFF
_SIZE = struct.Struct(">i")


class _Sentinel(enum.Enum):
    NEED_DATA = "NEED_DATA"
    NEED_MEMORY = "NEED_MEMORY"
    CLOSED = "CLOSED"

    def __repr__(self) -> str:
        return self.value


NEED_DATA = _Sentinel.NEED_DATA
"""Feed more bytes before asking again."""
NEED_MEMORY = _Sentinel.NEED_MEMORY
"""The memory pool is exhausted: stop reading until it has room (Kafka mutes the channel)."""
CLOSED = _Sentinel.CLOSED
"""The peer closed the stream at a frame boundary."""


class Frame(NamedTuple):
    """One frame's payload (without its size prefix) and the bytes charged to the pool for it."""

    payload: bytearray
    pooled: int


Event = Frame | _Sentinel


class MemoryPool:
    """Bytes of request frames held across all connections (Kafka's ``SimpleMemoryPool``).

    ``size`` < 0 means unbounded.  Like Kafka's non-strict pool, an allocation
    succeeds while any memory is left, so the pool can overshoot by at most one
    allocation (here a chunk).  ``on_release`` is called after each release, so
    an I/O layer can wake connections waiting for memory; the pool itself does
    no I/O.
    """

    def __init__(self, size: int = -1, on_release: Callable[[], None] | None = None) -> None:
        self.size = size
        self.used = 0
        self.on_release = on_release

    @property
    def bounded(self) -> bool:
        return self.size >= 0

    @property
    def available(self) -> int:
        return UNBOUNDED if self.size < 0 else self.size - self.used

    @property
    def is_out_of_memory(self) -> bool:
        return self.size >= 0 and self.used >= self.size

    def try_allocate(self, nbytes: int, *, force: bool = False) -> bool:
        """Charge ``nbytes``; False (nothing charged) when the pool is exhausted, unless ``force``."""
        if not force and self.size >= 0 and self.used >= self.size and nbytes > 0:
            return False
        self.used += nbytes
        return True

    def release(self, nbytes: int) -> None:
        if nbytes:
            self.used -= nbytes
            if self.on_release is not None:
                self.on_release()


class FrameDecoder:
    """Size-prefixed frames out of a byte stream, with bounded buffering.

    Feed bytes with :meth:`receive_data` (copied; ``b""`` means end of stream),
    or, while a frame is being filled, let the socket write straight into it:
    ``view = frame_buffer()``, ``recv_into(view)``, :meth:`buffer_updated`.
    Then call :meth:`next_event` until it returns ``NEED_DATA``.
    """

    def __init__(self, max_frame_size: int = UNBOUNDED, *, pool: MemoryPool | None = None,
                 read_size: int = DEFAULT_READ_SIZE, chunk_size: int = DEFAULT_CHUNK_SIZE,
                 small_frame: int | None = None) -> None:
        self.max_frame_size = max_frame_size
        self.pool = pool if pool is not None else MemoryPool()
        self.read_size = read_size
        self.chunk_size = chunk_size
        self.small_frame = read_size if small_frame is None else small_frame
        self._buf = bytearray()  # bytes received and not yet part of a frame handed out
        self._frame: bytearray | None = None  # a frame being filled in place
        self._frame_size = 0  # its declared size
        self._frame_have = 0  # bytes of it received
        self._pooled = 0  # bytes charged to the pool for it
        self._view: memoryview | None = None
        self._eof = False

    # -- state -------------------------------------------------------------------
    @property
    def buffered(self) -> int:
        """Bytes held and not yet handed out (read-ahead plus any partial frame)."""
        return len(self._buf) + self._frame_have

    @property
    def allocated(self) -> int:
        """Bytes of memory the decoder holds (read-ahead and the partial frame's buffer)."""
        return len(self._buf) + (len(self._frame) if self._frame is not None else 0)

    @property
    def in_frame(self) -> bool:
        """True while part of a frame (or of its size prefix) has arrived and the rest has not."""
        return self._frame is not None or bool(self._buf)

    @property
    def at_eof(self) -> bool:
        return self._eof

    @property
    def held_bytes(self) -> int:
        """Stream bytes received and not yet handed out in a frame, counting a partial frame's size
        prefix (unlike :attr:`buffered`): what :meth:`take` would return."""
        return len(self._buf) + (4 + self._frame_have if self._frame is not None else 0)

    def peek(self, n: int) -> bytes:
        """A copy of the first ``n`` (or fewer, if fewer are held) of the :attr:`held_bytes`, in stream
        order: the next frame's size prefix and its start.  Nothing is consumed."""
        if self._frame is None:
            return bytes(self._buf[:n])
        out = bytearray(frame_size_prefix(self._frame_size)[:n])
        if n > 4:
            have = self._frame_have
            out += memoryview(self._frame)[:min(n - 4, have)]
            if n - 4 > have:
                out += self._buf[:n - 4 - have]
        return bytes(out)

    def take(self) -> bytearray:
        """Remove and return every held byte, in stream order (a partial frame with its size prefix,
        then what was read past it), returning the partial frame's memory to the pool: the decoder is
        left empty, at the start of a frame, for a caller that frames the rest of the stream another
        way (the pcap reader resynchronising after a hole).  End of stream stays as it was."""
        self._release_view()
        if self._frame is None:
            out = self._buf
        else:
            out = bytearray(frame_size_prefix(self._frame_size))
            out += memoryview(self._frame)[:self._frame_have]
            out += self._buf
        self._buf = bytearray()
        self.close()
        return out

    # -- input -------------------------------------------------------------------
    def receive_data(self, data: bytes | bytearray | memoryview) -> None:
        """Feed bytes (copied); empty means the peer closed the stream."""
        if data:
            self._buf += data
        else:
            self._eof = True

    def frame_buffer(self) -> memoryview | None:
        """The unfilled memory of the frame being received, to ``recv_into`` (report with
        :meth:`buffer_updated`); None when no frame is being filled (then read at most
        ``read_size`` bytes and :meth:`receive_data` them)."""
        self._release_view()
        frame = self._frame
        if frame is None or self._buf or self._frame_have == len(frame):
            return None
        self._view = memoryview(frame)[self._frame_have:]
        return self._view

    def buffer_updated(self, nbytes: int) -> None:
        """``nbytes`` were written into the last :meth:`frame_buffer` view (0: end of stream)."""
        self._release_view()
        if nbytes == 0:
            self._eof = True
        self._frame_have += nbytes

    def _release_view(self) -> None:
        if self._view is not None:
            self._view.release()
            self._view = None

    # -- output ------------------------------------------------------------------
    def next_event(self) -> Event:
        """The next complete frame, or what the decoder needs before it can produce one.

        Raises :class:`FrameTooLarge` / :class:`InvalidFrameSize` for a bad size
        prefix and :class:`TruncatedFrame` when the stream ended mid-frame.
        """
        if self._view is not None:
            self._release_view()
        if self._frame is not None:
            return self._continue_frame()
        buf = self._buf
        if len(buf) < 4:
            if self._eof:
                if buf:
                    raise TruncatedFrame("stream closed inside a frame's size prefix")
                return CLOSED
            return NEED_DATA
        size = _SIZE.unpack_from(buf)[0]
        if size < 0:
            raise InvalidFrameSize(f"invalid frame size {size}")
        if size > self.max_frame_size:
            raise FrameTooLarge(size, self.max_frame_size)
        whole = len(buf) - 4 >= size
        if not whole and self._eof:
            raise TruncatedFrame(f"stream closed {size - len(buf) + 4} bytes before the end of a "
                                 f"{size}-byte frame")
        # Charged its declared size now (Kafka's memory pool), admitted anyway when small.
        if not self.pool.try_allocate(size, force=size <= self.small_frame):
            return NEED_MEMORY
        if whole:  # read ahead already: cut it out
            payload = buf[4:4 + size]
            del buf[:4 + size]
            return Frame(payload, size)
        # Fill the frame in place: one chunk now, more as its bytes arrive.
        have = len(buf) - 4
        frame = bytearray(min(size, max(self.chunk_size, have)))
        frame[:have] = memoryview(buf)[4:]
        buf.clear()
        self._frame, self._frame_size, self._frame_have, self._pooled = frame, size, have, size
        return NEED_DATA

    def _continue_frame(self) -> Event:
        frame = self._frame
        assert frame is not None
        while True:
            if self._frame_have == self._frame_size:
                self._frame = None
                pooled = self._pooled
                self._frame_size = self._frame_have = self._pooled = 0
                return Frame(frame, pooled)
            if self._frame_have == len(frame):
                # Full: grow by a chunk, or by as much as already arrived (geometric for huge frames).
                frame += bytes(min(self._frame_size - len(frame), max(self.chunk_size, len(frame))))
            if not self._buf:
                break
            n = min(len(self._buf), len(frame) - self._frame_have)
            frame[self._frame_have:self._frame_have + n] = memoryview(self._buf)[:n]
            del self._buf[:n]
            self._frame_have += n
        if self._eof:
            raise TruncatedFrame(f"stream closed {self._frame_size - self._frame_have} bytes before the "
                                 f"end of a {self._frame_size}-byte frame")
        return NEED_DATA

    def close(self) -> int:
        """Drop whatever is buffered and return the partial frame's bytes to the pool."""
        self._release_view()
        pooled = self._pooled
        self._frame = None
        self._frame_size = self._frame_have = self._pooled = 0
        self._buf = bytearray()
        self.pool.release(pooled)
        return pooled


def frame_size_prefix(size: int) -> bytes:
    """The 4-byte big-endian size prefix of a frame of ``size`` bytes."""
    return size.to_bytes(4, "big", signed=True)


def encode_frame(payload: bytes | bytearray | memoryview) -> bytes:
    """A whole frame: size prefix plus payload (copied; for small frames)."""
    return frame_size_prefix(len(payload)) + bytes(payload)
