"""Responses of pipelined requests: in order, written together, never held behind a request that waits
(:class:`~minikafka.broker.server.ResponseQueue`)."""

from __future__ import annotations

import socket
import struct

import pytest
import trio

from minikafka.broker.request import ObserverBase, Request, RequestContext, Response
from minikafka.common import SYSTEM_CLOCK
from minikafka import iovec
from minikafka.broker.server import ResponseQueue, SocketTransport
from minikafka.client.connection import KafkaConnection
from minikafka.protocol.api import ApiKey
from minikafka.protocol.framing import encode_frame

from helpers import batch, create, produce, wait_until

K = ApiKey


class SentOrder(ObserverBase):
    """The correlation ids and send times the broker told its observers, in the order it told them."""

    def __init__(self) -> None:
        self.sent: list[tuple[int, int]] = []

    def on_response_sent(self, response: Response) -> None:
        self.sent.append((response.request.context.correlation_id, response.sent_ns))


@pytest.fixture
def writes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The number of buffers of every ``writev`` made (the real one): the broker's plaintext connections write
    through it; the tests' raw client sends through its Trio stream."""
    calls: list[int] = []
    real = iovec.os.writev

    def counted(fd: int, views: list[memoryview]) -> int:
        calls.append(len(views))
        return real(fd, views)

    monkeypatch.setattr(iovec.os, "writev", counted)
    return calls


def _requests(conn: KafkaConnection, *calls: tuple[int, int, dict | None]) -> tuple[bytes, list[int]]:
    """Several request frames as one byte string (one send: the broker reads them in one go)."""
    data, corrs = b"", []
    for corr, (api_key, version, body) in enumerate(calls, start=100):
        data += encode_frame(conn.encode_request(api_key, version, body, corr))
        corrs.append(corr)
    return data, corrs


async def _correlation_ids(conn: KafkaConnection, n: int) -> list[int]:
    got = []
    for _ in range(n):
        frame = await conn.receive_frame()
        assert frame is not None
        got.append(struct.unpack_from(">i", frame)[0])
    return got


async def test_pipelined_requests_read_together_are_answered_in_order_with_one_write(broker, conn, writes):
    order = SentOrder()
    broker.apis.observers.append(order)
    data, corrs = _requests(conn, *[(K.METADATA, 12, {"topics": []})] * 4, (K.API_VERSIONS, 3, None))
    await conn.stream.send_all(data)
    with trio.fail_after(10):
        assert await _correlation_ids(conn, 5) == corrs
    assert len(writes) == 1  # the five responses left together
    assert [corr for corr, _ in order.sent] == corrs  # and were told in request order ...
    assert len({sent_ns for _, sent_ns in order.sent}) == 1  # ... as sent by that one write


async def test_a_request_that_waits_does_not_hold_the_responses_before_it(broker, conn):
    await create(conn, "parked")
    fetch_body = {"replica_id": -1, "max_wait_ms": 30_000, "min_bytes": 1, "max_bytes": 1 << 20, "topics": [
        {"topic": "parked", "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}]}
    data, corrs = _requests(conn, (K.API_VERSIONS, 3, None), (K.METADATA, 12, {"topics": []}),
                            (K.FETCH, 12, fetch_body), (K.API_VERSIONS, 3, None))
    await conn.stream.send_all(data)
    with trio.fail_after(10):  # well before the long poll's 30 s
        assert await _correlation_ids(conn, 2) == corrs[:2]
    assert broker.delayed_fetch.watched() == 1  # the fetch still waits, its predecessors answered
    async with await KafkaConnection.connect("127.0.0.1", broker.port) as producer:
        await produce(producer, "parked", batch([b"wake"]))
    with trio.fail_after(10):
        frame = await conn.receive_frame()
        assert frame is not None
        corr, body = conn.decode_response(K.FETCH, 12, frame)
        assert corr == corrs[2] and body.responses[0].partitions[0].high_watermark == 1
        assert await _correlation_ids(conn, 1) == corrs[3:]


class SentApis(ObserverBase):
    """(api key, correlation id) of each response the broker told as sent, in that order."""

    def __init__(self) -> None:
        self.sent: list[tuple[int, int]] = []

    def on_response_sent(self, response: Response) -> None:
        ctx = response.request.context
        self.sent.append((ctx.api_key, ctx.correlation_id))


async def test_a_delayed_fetch_completed_by_a_produce_is_answered_before_the_produce(broker, conn):
    """Kafka's DelayedFetch.tryComplete: the append completes the waiting fetch and its response is written by
    the producer's connection before the produce's own; the consumer connection's order still holds."""
    await create(conn, "early")
    order = SentApis()
    broker.apis.observers.append(order)
    fetch_body = {"replica_id": -1, "max_wait_ms": 30_000, "min_bytes": 1, "max_bytes": 1 << 20, "topics": [
        {"topic": "early", "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}]}
    data, corrs = _requests(conn, (K.FETCH, 12, fetch_body), (K.API_VERSIONS, 3, None))
    await conn.stream.send_all(data)
    await wait_until(lambda: broker.delayed_fetch.parked() == 1, what="the fetch waits")
    async with await KafkaConnection.connect("127.0.0.1", broker.port) as producer:
        assert (await produce(producer, "early", batch([b"now"]), acks=1)).error_code == 0
    with trio.fail_after(10):
        frame = await conn.receive_frame()
        assert frame is not None
        corr, body = conn.decode_response(K.FETCH, 12, frame)
        assert corr == corrs[0] and body.responses[0].partitions[0].high_watermark == 1
        assert await _correlation_ids(conn, 1) == corrs[1:]  # the request after it, answered after it
    await wait_until(lambda: len(order.sent) == 3, what="every response told as sent")
    assert [api for api, _ in order.sent] == [K.FETCH, K.PRODUCE, K.API_VERSIONS]
    assert broker.delayed_fetch.parked() == 0 and broker.delayed_fetch.watched() == 0


async def test_a_delayed_fetch_below_min_bytes_waits_on_through_appends(broker, conn):
    await create(conn, "minbytes")
    value = b"x" * 100
    fetch_body = {"replica_id": -1, "max_wait_ms": 30_000, "min_bytes": 2 * len(batch([value])) - 1,
                  "max_bytes": 1 << 20, "topics": [{"topic": "minbytes", "partitions": [
                      {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}]}
    data, corrs = _requests(conn, (K.FETCH, 12, fetch_body))
    await conn.stream.send_all(data)
    await wait_until(lambda: broker.delayed_fetch.parked() == 1, what="the fetch waits")
    async with await KafkaConnection.connect("127.0.0.1", broker.port) as producer:
        await produce(producer, "minbytes", batch([value]), acks=1)
        assert broker.delayed_fetch.parked() == 1  # one batch is not min_bytes: it waits on
        await produce(producer, "minbytes", batch([value]), acks=1)
    with trio.fail_after(10):
        frame = await conn.receive_frame()
        assert frame is not None
        corr, body = conn.decode_response(K.FETCH, 12, frame)
    assert corr == corrs[0] and body.responses[0].partitions[0].high_watermark == 2
    assert len(bytes(body.responses[0].partitions[0].records)) >= fetch_body["min_bytes"]


async def test_acks_zero_between_pipelined_requests_is_told_in_its_turn(broker, conn):
    await create(conn, "acks0")
    order = SentOrder()
    broker.apis.observers.append(order)
    produce_body = {"acks": 0, "timeout_ms": 1000, "topic_data": [
        {"name": "acks0", "partition_data": [{"index": 0, "records": batch([b"fire-and-forget"])}]}]}
    data, corrs = _requests(conn, (K.API_VERSIONS, 3, None), (K.PRODUCE, 9, produce_body), (K.API_VERSIONS, 3, None))
    await conn.stream.send_all(data)
    with trio.fail_after(10):
        assert await _correlation_ids(conn, 2) == [corrs[0], corrs[2]]  # no response to acks=0
    await wait_until(lambda: len(order.sent) == 3, what="every request told as sent")
    assert [corr for corr, _ in order.sent] == corrs


def _response(corr: int, payload: bytes) -> Response:
    ctx = RequestContext(api_key=K.API_VERSIONS, api_version=3, correlation_id=corr, client_id="t", connection_id="c")
    return Response(Request(ctx, {}, bytearray()), [corr.to_bytes(4, "big"), payload])


def _fill(sock: socket.socket) -> int:
    """Write into non-blocking ``sock`` until its buffers are full; the number of bytes written."""
    total = 0
    while True:
        try:
            total += sock.send(b"\0" * 65536)
        except BlockingIOError:
            return total


async def _receive(sock: trio.socket.SocketType, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = await sock.recv(1 << 20)
        assert chunk, "closed early"
        data += chunk
    return data


async def test_a_write_the_full_socket_cannot_take_before_a_wait_finishes_in_the_background():
    sa, sb = socket.socketpair()
    sa.setblocking(False)
    sa.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    a, b = trio.socket.from_stdlib_socket(sa), trio.socket.from_stdlib_socket(sb)
    with a, b:
        filled = _fill(sa)
        told: list[Response] = []
        async with trio.open_nursery() as nursery:
            queue = ResponseQueue(SocketTransport(a), SYSTEM_CLOCK, told.append, nursery)
            first = _response(1, b"first")
            queue.add(first)
            queue.before_park()  # the socket takes nothing: a task of the nursery finishes the write
            assert told == []
            second = _response(2, b"second")
            queue.add(second)  # the waiting request's response, after it
            received = await _receive(b, filled)  # the client reads again ...
            await queue.flush()  # ... and what was queued leaves, the first response first
            expected = encode_frame(b"\0\0\0\x01first") + encode_frame(b"\0\0\0\x02second")
            received += await _receive(b, filled + len(expected) - len(received))
        assert received[filled:] == expected
        assert told == [first, second] and first.sent_ns > 0 and second.sent_ns >= first.sent_ns


async def test_responses_queued_when_the_client_vanished_are_still_told_in_order():
    a, b = trio.socket.socketpair()
    told: list[Response] = []
    with a:
        b.close()
        async with trio.open_nursery() as nursery:
            queue = ResponseQueue(SocketTransport(a), SYSTEM_CLOCK, told.append, nursery)
            responses = [_response(i, b"r") for i in range(3)]
            for r in responses:
                queue.add(r)
            with pytest.raises(OSError):
                await queue.flush()
            queue.abandon()
    assert told == responses and all(r.sent_ns > 0 for r in responses)
