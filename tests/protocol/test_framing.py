"""The sans-I/O frame decoder: frames out of arbitrary byte splits, bounded memory, errors."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, strategies as st

from minikafka.protocol.framing import (
    CLOSED, NEED_DATA, NEED_MEMORY, Frame, FrameDecoder, FrameTooLarge, InvalidFrameSize, MemoryPool,
    TruncatedFrame, encode_frame,
)


def drain(dec: FrameDecoder) -> list[bytes]:
    out = []
    while True:
        ev = dec.next_event()
        if not isinstance(ev, Frame):
            return out
        out.append(bytes(ev.payload))
        dec.pool.release(ev.pooled)


@given(st.lists(st.binary(max_size=300), max_size=8), st.integers(1, 64), st.integers(0, 2**32))
def test_any_split_gives_the_same_frames(payloads, chunk, seed):
    stream = b"".join(encode_frame(p) for p in payloads)
    dec = FrameDecoder(chunk_size=chunk)
    rng = random.Random(seed)
    got: list[bytes] = []
    pos = 0
    while pos < len(stream):
        n = rng.randint(1, 50)
        view = dec.frame_buffer()
        if view is not None and rng.random() < 0.5:  # zero-copy path, as the socket server reads
            n = min(n, len(view), len(stream) - pos)
            view[:n] = stream[pos:pos + n]
            dec.buffer_updated(n)
        else:
            dec.receive_data(stream[pos:pos + n])
        pos += n
        got += drain(dec)
    dec.receive_data(b"")
    assert dec.next_event() is CLOSED
    assert got == payloads


def test_declared_size_is_not_allocated_before_the_bytes_arrive():
    pool = MemoryPool(-1)
    dec = FrameDecoder(max_frame_size=200 << 20, pool=pool, chunk_size=1 << 20)
    dec.receive_data((100 << 20).to_bytes(4, "big") + bytes(64 << 10))
    assert dec.next_event() is NEED_DATA
    assert pool.used == 100 << 20  # charged its declared size, as Kafka's memory pool charges it...
    assert dec.allocated == 1 << 20  # ...but only one chunk of memory exists
    # Filling the first chunk and more: memory follows what arrived (never the declared size).
    dec.receive_data(bytes(3 << 20))
    assert dec.next_event() is NEED_DATA
    arrived = (3 << 20) + (64 << 10)
    assert arrived <= dec.allocated <= 2 * arrived
    assert dec.close() == 100 << 20 and pool.used == 0 and dec.allocated == 0


def test_frame_too_large_and_negative_sizes():
    dec = FrameDecoder(max_frame_size=100)
    dec.receive_data((101).to_bytes(4, "big"))
    with pytest.raises(FrameTooLarge):
        dec.next_event()
    dec = FrameDecoder()
    dec.receive_data((-1).to_bytes(4, "big", signed=True))
    with pytest.raises(InvalidFrameSize):
        dec.next_event()


@pytest.mark.parametrize("stream", [b"\x00\x00", b"\x00\x00\x00\x05ab", b"\x00\x00\x10\x00" + bytes(100)])
def test_end_of_stream_inside_a_frame(stream):
    dec = FrameDecoder()
    dec.receive_data(stream)
    dec.next_event()  # NEED_DATA (or starts filling)
    dec.receive_data(b"")
    with pytest.raises(TruncatedFrame):
        dec.next_event()


def test_exhausted_pool_stops_the_decoder_until_memory_is_released():
    woken = []
    pool = MemoryPool(10, on_release=lambda: woken.append(1))
    a, b = FrameDecoder(pool=pool, small_frame=0), FrameDecoder(pool=pool, small_frame=0)
    a.receive_data(encode_frame(b"x" * 10))
    first = a.next_event()
    assert isinstance(first, Frame) and pool.used == 10
    b.receive_data(encode_frame(b"y" * 4))
    assert b.next_event() is NEED_MEMORY  # nothing charged meanwhile
    assert pool.used == 10
    pool.release(first.pooled)
    assert woken == [1]
    second = b.next_event()
    assert isinstance(second, Frame) and bytes(second.payload) == b"yyyy"


def test_a_started_frame_always_finishes_and_small_frames_are_admitted():
    pool = MemoryPool(5)
    big = FrameDecoder(pool=pool, chunk_size=8, small_frame=4)
    big.receive_data((20).to_bytes(4, "big") + b"a" * 3)
    assert big.next_event() is NEED_DATA and pool.used == 20  # the whole frame's charge, beyond the pool
    other = FrameDecoder(pool=pool, small_frame=4)
    other.receive_data((6).to_bytes(4, "big"))
    assert other.next_event() is NEED_MEMORY  # a second large frame waits for memory
    small = FrameDecoder(pool=pool, small_frame=4)
    small.receive_data(encode_frame(b"tiny"))
    assert bytes(small.next_event().payload) == b"tiny"  # admitted (and charged) while exhausted
    assert pool.used == 24
    big.receive_data(b"b" * 17)  # the started frame grows to its end without asking the pool again
    assert bytes(big.next_event().payload) == b"a" * 3 + b"b" * 17


@given(st.lists(st.binary(max_size=40), min_size=1, max_size=4), st.integers(1, 16), st.integers(0, 2**32),
       st.integers(0, 12))
def test_peek_held_bytes_and_take_see_the_stream_as_sent(payloads, chunk, seed, n):
    """Whatever the decoder holds (read-ahead, a frame's size prefix, a frame half filled in place):
    held_bytes counts it, peek shows its start and take hands it back, in stream order."""
    stream = b"".join(encode_frame(p) for p in payloads)
    rng = random.Random(seed)
    cut = rng.randint(0, len(stream))
    pool = MemoryPool()
    dec = FrameDecoder(pool=pool, chunk_size=chunk)
    done = 0  # stream bytes handed out in frames
    pos = 0
    while pos < cut:
        k = min(rng.randint(1, 20), cut - pos)
        view = dec.frame_buffer()
        if view is not None and rng.random() < 0.5:
            k = min(k, len(view))
            view[:k] = stream[pos:pos + k]
            dec.buffer_updated(k)
        else:
            dec.receive_data(stream[pos:pos + k])
        pos += k
        if rng.random() < 0.7:
            done += sum(4 + len(f) for f in drain(dec))
    rest = stream[done:cut]
    assert dec.held_bytes == len(rest)
    assert dec.peek(n) == rest[:n]
    assert dec.take() == rest
    assert dec.held_bytes == 0 and dec.peek(8) == b"" and pool.used == 0
    dec.receive_data(rest + stream[cut:])  # given back, they frame from where they stood
    assert b"".join(encode_frame(f) for f in drain(dec)) == stream[done:]


def test_take_returns_a_partial_frame_with_its_prefix_and_frees_its_memory():
    pool = MemoryPool(-1)
    dec = FrameDecoder(pool=pool, chunk_size=4)
    dec.receive_data((10).to_bytes(4, "big") + b"abc")
    assert dec.next_event() is NEED_DATA and pool.used == 10 and dec.allocated == 4  # filling in place
    assert dec.buffered == 3 and dec.held_bytes == 7  # buffered leaves out the size prefix
    assert dec.peek(2) == b"\x00\x00" and dec.peek(6) == b"\x00\x00\x00\x0aab"
    assert dec.take() == (10).to_bytes(4, "big") + b"abc"
    assert pool.used == 0 and not dec.in_frame
    dec.receive_data(encode_frame(b"next"))
    assert drain(dec) == [b"next"]
