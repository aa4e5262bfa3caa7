"""BufferPool: free list, FIFO waiting, blocking until memory frees, BufferExhaustedError after max.block.ms."""

from __future__ import annotations

import pytest
import trio

from minikafka.client.producer import BufferExhaustedError, BufferPool


async def test_free_list_reuses_poolable_buffers() -> None:
    pool = BufferPool(1024, 256)
    a = await pool.allocate(256, 0)
    b = await pool.allocate(300, 0)  # non-poolable size comes from the unpooled memory
    assert pool.available_memory == 1024 - 556
    a += b"data"
    pool.deallocate(a, 256)
    pool.deallocate(b, 300)
    assert pool.available_memory == 1024
    assert len(pool.free) == 1 and pool.unallocated_memory == 768
    again = await pool.allocate(256, 0)
    assert again is a and again.startswith(b"data")  # the same buffer, with its memory (a batch writes over it)
    # a large allocation frees up pooled buffers
    pool.deallocate(again, 256)
    big = await pool.allocate(1024, 0)
    assert pool.available_memory == 0 and not pool.free
    pool.deallocate(big, 1024)


async def test_too_large_allocation_is_refused() -> None:
    pool = BufferPool(1024, 256)
    with pytest.raises(ValueError):
        await pool.allocate(2048, 1000)


async def test_exhaustion_blocks_then_times_out(autojump_clock) -> None:
    pool = BufferPool(512, 256)
    a = await pool.allocate(256, 0)
    b = await pool.allocate(256, 0)
    t0 = trio.current_time()
    with pytest.raises(BufferExhaustedError):
        await pool.allocate(256, 60000)
    assert trio.current_time() - t0 == pytest.approx(60.0)
    assert pool.queued == 0
    pool.deallocate(a, 256)
    pool.deallocate(b, 256)
    assert pool.available_memory == 512


async def test_blocked_allocation_succeeds_when_memory_is_freed_fifo(autojump_clock) -> None:
    pool = BufferPool(512, 256)
    held = [await pool.allocate(256, 0), await pool.allocate(256, 0)]
    order: list[str] = []

    async def want(name: str, size: int) -> None:
        buf = await pool.allocate(size, 60000)
        order.append(name)
        await trio.sleep(1)
        pool.deallocate(buf, size)

    async with trio.open_nursery() as n:
        n.start_soon(want, "first", 256)
        await trio.sleep(0.1)
        n.start_soon(want, "second", 512)
        await trio.sleep(0.1)
        n.start_soon(want, "third", 256)
        await trio.sleep(0.1)
        assert pool.queued == 3
        await trio.sleep(5)
        assert order == []  # exhausted: everybody waits
        pool.deallocate(held.pop(), 256)
        await trio.sleep(0.01)
        assert order == ["first"]
        pool.deallocate(held.pop(), 256)
    # second needed all 512 bytes: it had to wait for first to give its buffer back, third after it
    assert order == ["first", "second", "third"]
    assert pool.available_memory == 512
