"""Bounded memory and connection limits under hostile clients.

* A frame's declared size is not allocated before its bytes arrive: 40 connections each declaring a
  100 MB request and sending 64 KiB of it leave a broker process small and answering.
* ``queued.max.request.bytes``: when the memory pool is exhausted, connections that need memory wait
  (Kafka mutes them) until memory is released, then carry on.
* ``max.connections`` (wait), ``max.connections.per.ip`` (refused), ``connections.max.idle.ms`` (closed).
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import psutil
import pytest
import trio

from helpers import api_versions_v0
import waiting
from minikafka.broker.broker import Broker, serve_broker
from minikafka.broker.config import BrokerConfig
from minikafka.client.connection import KafkaConnection
from minikafka.protocol.api import ApiKey

MiB = 1 << 20


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def broker_process() -> Iterator[tuple[int, psutil.Process]]:
    """``minikafka serve`` in its own process (so its RSS is the broker's alone)."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "minikafka", "serve", "--port", str(port),
                             "--log-level", "WARNING"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        assert proc.stdout is not None and b"ready" in proc.stdout.readline()
        yield port, psutil.Process(proc.pid)
    finally:
        proc.terminate()
        proc.wait(30)


def api_versions_round_trip(port: int) -> float:
    """Seconds a new client takes to connect and get its ApiVersions answered."""
    from minikafka.protocol.headers import RequestHeader

    t0 = time.perf_counter()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        body = RequestHeader.build({"request_api_key": 18, "request_api_version": 0, "correlation_id": 7,
                                    "client_id": "probe"}, 1)
        s.sendall(len(body).to_bytes(4, "big") + body)
        size = int.from_bytes(s.recv(4, socket.MSG_WAITALL), "big")
        resp = s.recv(size, socket.MSG_WAITALL)
    assert int.from_bytes(resp[:4], "big") == 7 and resp[4:6] == b"\x00\x00"
    return time.perf_counter() - t0


@pytest.mark.slow
def test_forty_declared_100mb_frames_keep_the_broker_small_and_answering(broker_process) -> None:
    port, proc = broker_process
    hostile = []
    try:
        for _ in range(40):
            s = socket.create_connection(("127.0.0.1", port))
            s.sendall((100_000_000).to_bytes(4, "big") + b"\x00\x01\x00\x09" + bytes(64 * 1024 - 4))
            hostile.append(s)
        # Measure once every connection's 64 KiB reached the broker's host (nothing left to send).
        answered = api_versions_round_trip(port)
        waiting.wait_for(lambda: all(_unread(s) == 0 for s in hostile), 30, "the partial frames to reach the broker")
        rss = proc.memory_info().rss / MiB
        answered = max(answered, api_versions_round_trip(port))
        print(f"\n40 x 100 MB partial frames: broker RSS {rss:.0f} MB, new client's ApiVersions in "
              f"{answered * 1000:.1f} ms")
        assert rss <= 300 and answered < 1
    finally:
        for s in hostile:
            s.close()


def _unread(s: socket.socket) -> int:
    """Bytes this side sent that the peer's host has not acknowledged yet (Linux SIOCOUTQ)."""
    import fcntl
    import struct
    import termios

    return struct.unpack("i", fcntl.ioctl(s.fileno(), termios.TIOCOUTQ, b"\0\0\0\0"))[0]


async def _api_versions(conn: KafkaConnection) -> int:
    return (await conn.request(ApiKey.API_VERSIONS, 3, {"client_software_name": "t",
                                                       "client_software_version": "1"})).error_code


async def wait_for(cond, what: str, timeout: float = 10) -> None:
    await waiting.wait_until(cond, timeout, what)


async def test_exhausted_memory_pool_holds_large_requests_until_memory_frees() -> None:
    """Kafka's queued.max.request.bytes: a request is charged its declared size when its size arrives;
    while the pool is exhausted, connections with large requests read nothing more; small requests
    (at most 256 KiB) are still admitted, so partial large frames cannot starve them."""
    async with serve_broker(BrokerConfig(port=0, queued_max_request_bytes=MiB)) as broker:
        hog = await trio.open_tcp_stream("127.0.0.1", broker.port)
        await hog.send_all((5 * MiB).to_bytes(4, "big") + bytes(100_000))  # declares 5 MiB, sends 100 KB
        await wait_for(lambda: broker.pool.is_out_of_memory, "the pool to be exhausted")
        small = await KafkaConnection.connect("127.0.0.1", broker.port)
        assert await _api_versions(small) == 0  # a small request is admitted
        large = await trio.open_tcp_stream("127.0.0.1", broker.port)
        result: list[bytes] = []

        async def ask() -> None:
            result.append(await api_versions_v0(large, 5, "big", trailing=300_000))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(ask)
            await wait_for(lambda: broker.server._memory_freed is not None, "a connection waiting for memory")
            assert not result  # held back: no memory for its 300 KB
            await hog.aclose()  # the partial frame's charge goes back to the pool
        assert result[0][:4] == (5).to_bytes(4, "big") and result[0][4:6] == b"\x00\x00"
        await wait_for(lambda: broker.pool.used == 0, "every charge released")
        await small.aclose()
        await large.aclose()


async def test_max_connections_per_ip_refuses_the_extra_one() -> None:
    async with serve_broker(BrokerConfig(port=0, max_connections_per_ip=2)) as broker:
        kept = [await KafkaConnection.connect("127.0.0.1", broker.port) for _ in range(2)]
        for c in kept:
            assert await _api_versions(c) == 0
        extra = await trio.open_tcp_stream("127.0.0.1", broker.port)
        with trio.fail_after(10):
            assert await extra.receive_some(10) == b""  # closed by the broker
        assert broker.server.refused == 1
        for c in kept:
            await c.aclose()
        await extra.aclose()


async def test_max_connections_waits_for_a_free_slot() -> None:
    async with serve_broker(BrokerConfig(port=0, max_connections=1)) as broker:
        first = await KafkaConnection.connect("127.0.0.1", broker.port)
        assert await _api_versions(first) == 0
        second = await KafkaConnection.connect("127.0.0.1", broker.port)  # in the kernel's backlog
        result: list[int] = []

        async def ask() -> None:
            result.append(await _api_versions(second))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(ask)
            await wait_for(lambda: broker.server.open_connections == 1, "one open connection")
            await trio.testing.wait_all_tasks_blocked(0.05)
            assert not result and broker.server.open_connections == 1
            await first.aclose()
        assert result == [0]
        await second.aclose()


async def test_idle_connections_are_closed() -> None:
    async with serve_broker(BrokerConfig(port=0, connections_max_idle_ms=100)) as broker:
        conn = await KafkaConnection.connect("127.0.0.1", broker.port)
        assert await _api_versions(conn) == 0
        with trio.fail_after(10):
            assert await conn.receive_frame() is None  # the broker closed it
        await wait_for(lambda: broker.server.open_connections == 0, "the connection to be gone")
        await conn.aclose()


def test_broker_keeps_nothing_after_hostile_connections_close(tmp_path) -> None:
    """The pool's accounting returns to zero once partial frames are dropped."""
    async def main() -> None:
        async with serve_broker(BrokerConfig(port=0)) as broker:
            for _ in range(5):
                s = await trio.open_tcp_stream("127.0.0.1", broker.port)
                await s.send_all((50 * MiB).to_bytes(4, "big") + bytes(200_000))
                await wait_for(lambda: broker.pool.used > 0, "memory held for the partial frame")
                await s.aclose()
                await wait_for(lambda: broker.pool.used == 0, "memory released")
            assert isinstance(broker, Broker)

    trio.run(main)
