"""The request path leaves no reference cycles behind: each request's frame, context and response are freed by
reference counting when it is answered, not by the cyclic garbage collector (whose passes a cycle per request
would make frequent, and which would keep every request's memory until it ran)."""

from __future__ import annotations

import gc

import trio

from minikafka.broker.broker import Broker
from minikafka.client.connection import KafkaConnection
from minikafka.protocol.api import ApiKey
from minikafka.protocol.framing import encode_frame

from helpers import create

K = ApiKey


async def test_answered_requests_leave_no_cyclic_garbage(broker: Broker, conn: KafkaConnection):
    await create(conn, "t")
    fetch = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "topics": [
        {"topic": "t", "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}]}
    calls = [(K.FETCH, 12, fetch), (K.METADATA, 12, {"topics": [{"name": "t"}]}), (K.API_VERSIONS, 3, None)]
    frames = b"".join(encode_frame(conn.encode_request(k, v, b, corr)) for corr, (k, v, b) in enumerate(calls * 20))

    async def round_trip() -> None:
        await conn.stream.send_all(frames)
        with trio.fail_after(10):
            for _ in range(len(calls) * 20):
                assert await conn.receive_frame() is not None

    await round_trip()  # first of each version: entries, compiled code, caches
    gc.collect()
    gc.disable()
    try:
        await round_trip()
        garbage = gc.collect()
    finally:
        gc.enable()
    assert garbage == 0
