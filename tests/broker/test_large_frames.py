"""Large Produce frames over a plaintext socket: the broker reads them straight into the frame, woken only
once much of the rest has arrived (``SO_RCVLOWAT``), and stores their batches byte for byte (an in-memory
log copies large batches into its own regions)."""

from __future__ import annotations

import struct

import trio

from minikafka.protocol.errors import ErrorCode
from minikafka.protocol.records import iter_batches

from helpers import K, batch, create, fetch, produce


async def stored_batches(conn, topic: str, offset: int) -> list[bytes]:
    """The batches one Fetch returns from ``offset`` (CRCs checked)."""
    got = await fetch(conn, topic, offset)
    assert got.error_code == ErrorCode.NONE
    return [bytes(view) for _, view in iter_batches(memoryview(got.records), check_crc=True)]


def produce_frame(conn, topic: str, records: bytes, correlation_id: int) -> bytes:
    frame = conn.encode_request(K.PRODUCE, 9, {"acks": 1, "timeout_ms": 1000, "topic_data": [
        {"name": topic, "partition_data": [{"index": 0, "records": records}]}]}, correlation_id)
    return struct.pack(">i", len(frame)) + frame


async def test_large_frame_trickled_in_pieces_then_small_requests(conn) -> None:
    """A 1 MB Produce request sent in uneven pieces with pauses (the last ones smaller than any low-water
    mark), then a small request on the same connection: both are answered, in order, and the stored batch
    reads back exactly as sent but for the offsets the broker assigned."""
    await create(conn, "big")
    first = batch([bytes([i % 251]) * 330_000 for i in range(3)])  # just under max.message.bytes
    data = produce_frame(conn, "big", first, 41)
    pieces = [1, 3, 70_000, 200_000, 1000, 500_000]
    pos = 0
    for n in pieces:
        await conn.stream.send_all(data[pos:pos + n])
        pos += n
    while pos < len(data):  # the rest in pieces below any low-water mark
        await conn.stream.send_all(data[pos:pos + 50_000])
        pos += 50_000
    with trio.fail_after(10):  # a low-water mark never reached would leave the frame unread
        resp = await conn.receive_frame()
    assert resp is not None and struct.unpack_from(">i", resp)[0] == 41
    small = await produce(conn, "big", batch([b"after"]), acks=1)
    assert small.error_code == ErrorCode.NONE and small.base_offset == 3
    stored = (await stored_batches(conn, "big", 0))[:1] + await stored_batches(conn, "big", 3)
    assert len(stored) == 2
    assert stored[0][16:] == first[16:]  # all but baseOffset (0 as sent) and partitionLeaderEpoch
    assert stored[0][:8] == (0).to_bytes(8, "big") and stored[1][:8] == (3).to_bytes(8, "big")


async def test_large_frames_back_to_back_in_one_write(conn) -> None:
    """Three large frames written in one go (the broker's read-ahead holds the start of the next): each
    is answered, and the log holds their batches in order, byte for byte."""
    await create(conn, "burst")
    batches = [batch([bytes([k]) * 200_000, bytes([k + 1]) * 100_000]) for k in range(3)]
    await conn.stream.send_all(b"".join(produce_frame(conn, "burst", b, 100 + i) for i, b in enumerate(batches)))
    for i in range(3):
        with trio.fail_after(10):
            resp = await conn.receive_frame()
        assert resp is not None and struct.unpack_from(">i", resp)[0] == 100 + i
    stored = await stored_batches(conn, "burst", 0)
    assert [s[16:] for s in stored] == [b[16:] for b in batches]
    assert [int.from_bytes(s[:8], "big") for s in stored] == [0, 2, 4]
