"""KafkaConnection's framing: responses of any size, read through FrameDecoder (socket or other stream)."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from minikafka.client.connection import KafkaConnection, read_frame
from minikafka.protocol.api import APIS, ApiKey
from minikafka.protocol.framing import FrameDecoder, MemoryPool, encode_frame
from minikafka.protocol.headers import encode_response_header, parse_request_header


def socket_pair() -> tuple[trio.SocketStream, trio.SocketStream]:
    a, b = trio.socket.socketpair()
    return trio.SocketStream(a), trio.SocketStream(b)


async def test_large_and_pipelined_frames_arrive_whole_then_none_at_close():
    ours, theirs = socket_pair()
    big = bytes(range(256)) * (3 * 4096 + 17)  # ~3 MiB: several of the decoder's chunks, filled in place
    stream = encode_frame(b"first") + encode_frame(big) + encode_frame(b"") + encode_frame(b"last")

    async def peer() -> None:
        for i in range(0, len(stream), 70_001):
            await theirs.send_all(stream[i:i + 70_001])
        await theirs.aclose()

    class Counting(FrameDecoder):
        in_place = 0

        def buffer_updated(self, nbytes: int) -> None:
            self.in_place += nbytes
            super().buffer_updated(nbytes)

    decoder = Counting(pool=MemoryPool())  # its own pool: the default one is shared
    got = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(peer)
        while (frame := await read_frame(ours, decoder)) is not None:
            got.append(bytes(frame))
    assert got == [b"first", big, b"", b"last"]
    assert decoder.in_place > len(big) // 2  # the socket wrote most of the big frame into its buffer
    assert await read_frame(ours, decoder) is None
    assert decoder.pool.used == 0


async def test_other_streams_are_read_with_receive_some():
    ours, theirs = trio.testing.memory_stream_pair()
    await theirs.send_all(encode_frame(b"x" * 100_000) + encode_frame(b"y")[:3])
    decoder = FrameDecoder(chunk_size=1000)
    assert await read_frame(ours, decoder) == b"x" * 100_000
    await theirs.aclose()
    assert await read_frame(ours, decoder) is None  # closed inside the next frame's size prefix


async def test_negative_frame_size_is_a_connection_error():
    ours, theirs = socket_pair()
    await theirs.send_all((-2).to_bytes(4, "big", signed=True))
    with pytest.raises(ConnectionError, match="invalid frame size"):
        await read_frame(ours, FrameDecoder())


async def test_request_and_decode_response():
    ours, theirs = socket_pair()
    api = APIS[ApiKey.METADATA]

    async def broker() -> None:
        frame = await read_frame(theirs, FrameDecoder())
        hdr = parse_request_header(frame)
        assert (hdr.api_key, hdr.api_version, hdr.client_id) == (ApiKey.METADATA, 12, "t")
        body = api.response.build({"brokers": [], "topics": [], "cluster_id": "c"}, 12)
        await theirs.send_all(encode_frame(encode_response_header(hdr.correlation_id, 1) + body))

    conn = KafkaConnection(ours, client_id="t")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(broker)
        resp = await conn.request(ApiKey.METADATA, 12, {"topics": None})
    assert resp.cluster_id == "c"
    await theirs.aclose()
    assert await conn.receive_frame() is None
    with pytest.raises(ConnectionError):
        await conn.receive(ApiKey.METADATA, 12)
    await conn.aclose()
