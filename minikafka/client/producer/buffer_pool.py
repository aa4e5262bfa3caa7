"""The producer's memory pool (Kafka's ``org.apache.kafka.clients.producer.internals.BufferPool``).

``total_memory`` bytes (buffer.memory) of which buffers of exactly ``poolable_size`` (batch.size)
are kept on a free list for reuse; other sizes are "allocated" from the non-pooled remainder.
When there is not enough memory, ``allocate`` waits (FIFO, like Java's ``waiters`` deque of
Conditions) up to ``max_time_ms`` and then raises :class:`BufferExhaustedError`.

Deliberate differences: a buffer is a ``bytearray``; a pooled one goes back to the free list as it is
(its bytes stay allocated, as a ByteBuffer's would, and the next batch writes over them), a new one is
empty and the batch sizes it to the capacity it was allocated with, which is what the pool accounts for;
waiting uses Trio events and the injected clock, not a ReentrantLock.
"""

from __future__ import annotations

import logging
from collections import deque
from typing import Callable

import trio

from .errors import BufferExhaustedError, ProducerClosedError

log = logging.getLogger(__name__)


class _Waiter:
    __slots__ = ("event",)

    def __init__(self) -> None:
        self.event = trio.Event()


class BufferPool:
    """A pool of ``total_memory`` bytes with a free list of ``poolable_size`` buffers."""

    def __init__(self, total_memory: int, poolable_size: int, clock: Callable[[], float] = trio.current_time,
                 on_wait: Callable[[float], None] | None = None) -> None:
        self.total_memory = total_memory
        self.poolable_size = poolable_size
        self.clock = clock
        self.free: deque[bytearray] = deque()
        self.waiters: deque[_Waiter] = deque()
        self.non_pooled_available_memory = total_memory
        self.closed = False
        self.on_wait = on_wait  # metrics hook: seconds spent waiting
        self.exhausted_count = 0

    # -- allocation ------------------------------------------------------------------------------
    def try_allocate(self, size: int) -> bytearray | None:
        """Allocate without waiting (None when it would have to wait)."""
        if size == self.poolable_size and self.free:
            return self.free.popleft()
        if self.waiters:
            return None
        if self.non_pooled_available_memory + len(self.free) * self.poolable_size >= size:
            self._free_up(size)
            self.non_pooled_available_memory -= size
            return bytearray()
        return None

    async def allocate(self, size: int, max_time_ms: float) -> bytearray:
        """A buffer of ``size`` bytes, waiting up to ``max_time_ms`` for memory (``BufferPool.allocate``)."""
        if size > self.total_memory:
            raise ValueError(f"Attempt to allocate {size} bytes, but there is a hard limit of "
                             f"{self.total_memory} on memory allocations.")
        if self.closed:
            raise ProducerClosedError("Producer closed while allocating memory")
        buf = self.try_allocate(size)
        if buf is not None:
            self._signal_if_memory_left()
            return buf
        # Not enough memory: wait in FIFO order, accumulating memory as it is freed.
        accumulated = 0
        buffer: bytearray | None = None
        waiter = _Waiter()
        self.waiters.append(waiter)
        start = self.clock()
        deadline = start + max_time_ms / 1000
        done = False
        try:
            while accumulated < size:
                if self.waiters and self.waiters[0] is waiter and (
                        self.free or self.non_pooled_available_memory > 0):
                    pass  # memory is already there for the head waiter
                else:
                    t0 = self.clock()
                    with trio.move_on_at(deadline):
                        await waiter.event.wait()
                    if self.on_wait is not None:
                        self.on_wait(self.clock() - t0)
                    waiter.event = trio.Event()
                if self.closed:
                    raise ProducerClosedError("Producer closed while allocating memory")
                if self.clock() >= deadline and not (self.free or self.non_pooled_available_memory > 0):
                    self.exhausted_count += 1
                    raise BufferExhaustedError(
                        f"Failed to allocate {size} bytes within the configured max blocking time "
                        f"{max_time_ms:.0f} ms. Total memory: {self.total_memory} bytes. Available memory: "
                        f"{self.available_memory} bytes. Poolable size: {self.poolable_size} bytes")
                if accumulated == 0 and size == self.poolable_size and self.free:
                    buffer = self.free.popleft()
                    accumulated = size
                else:
                    self._free_up(size - accumulated)
                    got = min(size - accumulated, self.non_pooled_available_memory)
                    self.non_pooled_available_memory -= got
                    accumulated += got
            done = True
            return buffer if buffer is not None else bytearray()
        finally:
            if not done and accumulated > 0:
                self.non_pooled_available_memory += accumulated  # give back what we took
            try:
                self.waiters.remove(waiter)
            except ValueError:
                pass
            self._signal_if_memory_left()

    def _free_up(self, size: int) -> None:
        """Release free-list buffers into the non-pooled memory until ``size`` is available."""
        while self.free and self.non_pooled_available_memory < size:
            self.free.pop()
            self.non_pooled_available_memory += self.poolable_size

    def _signal_if_memory_left(self) -> None:
        if self.waiters and (self.non_pooled_available_memory > 0 or self.free):
            self.waiters[0].event.set()

    def deallocate(self, buffer: bytearray | None, size: int) -> None:
        """Return a buffer allocated with ``size`` (``BufferPool.deallocate``)."""
        if size == self.poolable_size and buffer is not None:
            self.free.append(buffer)  # not cleared: reused with its memory (a batch tracks its own position)
        else:
            self.non_pooled_available_memory += size
        if self.waiters:
            self.waiters[0].event.set()

    # -- state -----------------------------------------------------------------------------------
    @property
    def available_memory(self) -> int:
        """Unallocated memory plus the free list (``availableMemory``)."""
        return self.non_pooled_available_memory + len(self.free) * self.poolable_size

    @property
    def unallocated_memory(self) -> int:
        return self.non_pooled_available_memory

    @property
    def queued(self) -> int:
        """Number of senders waiting for memory (``queued``); the accumulator treats > 0 as exhausted."""
        return len(self.waiters)

    def close(self) -> None:
        """Wake every waiter with an error (``BufferPool.close``)."""
        self.closed = True
        for w in self.waiters:
            w.event.set()
