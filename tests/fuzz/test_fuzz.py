"""Fuzzing the broker (slow; run in CI): mutated real-client frames, random valid bodies per API and version.

* 20,000 mutated frames from the corpus of real-client requests (every API the clients send, CreateTopics
  included) go to a broker in its own process over 16 connections, while a probe client keeps asking
  ApiVersions: the broker stays up, answers a new client within 1 s throughout, its RSS stays within
  300 MB, and it logs no internal error (a failing handler would log a traceback).
* hypothesis-generated valid request bodies for every API and version go to an in-process broker: every
  one is answered (or, for requests Kafka leaves waiting, left waiting) and none makes a handler fail.
"""

from __future__ import annotations

import logging
import os
import random
import socket
import subprocess
import sys
from pathlib import Path

import psutil
import pytest
import trio
from hypothesis import HealthCheck, given, settings

from fuzz_corpus import apis_of, capture_corpus, mutate, sample
from helpers import api_versions_v0
from minikafka.broker.config import BrokerConfig
from minikafka.broker.request import ObserverBase, Response
from minikafka.protocol.api import APIS
from minikafka.protocol.headers import RequestHeader, request_header_version
from minikafka.testing import BrokerThread

pytestmark = pytest.mark.slow

MUTATED_FRAMES = int(os.environ.get("MINIKAFKA_FUZZ_FRAMES", "20000"))
WORKERS = 16
FRAMES_PER_CONNECTION = 50
RESPONSE_WAIT_S = 0.3  # how long a fuzzing connection waits for an answer before moving on
MiB = 1 << 20


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[int, int, bytes]]:
    return capture_corpus(tmp_path_factory.mktemp("fuzz-capture"))


def test_corpus_covers_what_the_clients_send(corpus) -> None:
    names = apis_of(corpus)
    print(f"\ncorpus: {len(corpus)} frames, {len(names)} APIs: {', '.join(sorted(names))}")
    assert {"Produce", "Fetch", "Metadata", "CreateTopics", "DeleteTopics", "CreatePartitions", "JoinGroup",
            "SyncGroup", "OffsetCommit", "OffsetFetch", "DescribeConfigs", "IncrementalAlterConfigs",
            "InitProducerId", "ListOffsets", "DeleteRecords", "DescribeClientQuotas", "AlterClientQuotas",
            "ApiVersions", "FindCoordinator", "DescribeGroups", "ListGroups", "DeleteGroups"} <= names


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def _probe(port: int) -> float:
    """Seconds for a new client to connect and have its ApiVersions v0 answered."""
    t0 = trio.current_time()
    async with await trio.open_tcp_stream("127.0.0.1", port) as stream:
        await api_versions_v0(stream)
    return trio.current_time() - t0


class Attack:
    """Fuzzing connections: each sends up to FRAMES_PER_CONNECTION mutated frames, reading what comes back.

    Each worker draws its mutations from its own generator (seeded from ``seed`` and its index), so a
    worker's sequence of frames is the same on every run.
    """

    def __init__(self, port: int, frames: list[bytes], seed: int) -> None:
        self.port = port
        self.frames = frames
        self.seed = seed
        self.sent = 0
        self.responses = 0
        self.closed_by_broker = 0

    def next_frame(self, rng: random.Random) -> bytes:
        frame = mutate(rng.choice(self.frames), self.frames, rng)
        size = len(frame)
        if rng.random() < 0.03:  # a size prefix that lies
            size = rng.choice([size + rng.randint(1, 1000), 0x7FFFFFFF, -1 & 0xFFFFFFFF, 0])
        return (size & 0xFFFFFFFF).to_bytes(4, "big") + frame

    async def connection(self, rng: random.Random) -> None:
        try:
            stream = await trio.open_tcp_stream("127.0.0.1", self.port)
        except OSError:
            return
        async with stream:
            with trio.move_on_after(FRAMES_PER_CONNECTION * RESPONSE_WAIT_S):
                for _ in range(FRAMES_PER_CONNECTION):
                    if self.sent >= MUTATED_FRAMES:
                        return
                    self.sent += 1
                    try:
                        await stream.send_all(self.next_frame(rng))
                        with trio.move_on_after(RESPONSE_WAIT_S):
                            data = await stream.receive_some(1 << 20)
                            if not data:
                                self.closed_by_broker += 1
                                return
                            self.responses += 1
                    except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                        self.closed_by_broker += 1
                        return

    async def worker(self, index: int) -> None:
        rng = random.Random(self.seed * 1000 + index)
        while self.sent < MUTATED_FRAMES:
            await self.connection(rng)


def test_mutated_real_client_frames(corpus, tmp_path: Path) -> None:
    frames = sample(corpus)
    port = _free_port()
    log_path = tmp_path / "broker.log"
    with log_path.open("wb") as log_file:
        proc = subprocess.Popen([sys.executable, "-m", "minikafka", "serve", "--port", str(port),
                                 "--log-level", "WARNING", "-o", "group.initial.rebalance.delay.ms=0"],
                                stdout=subprocess.PIPE, stderr=log_file)
    try:
        assert proc.stdout is not None and b"ready" in proc.stdout.readline()
        broker = psutil.Process(proc.pid)
        attack = Attack(port, frames, seed=int(os.environ.get("MINIKAFKA_FUZZ_SEED", "20261123")))
        probes: list[float] = []
        peak_rss = [0.0]

        async def watch(stop: trio.Event) -> None:
            while not stop.is_set():
                probes.append(await _probe(port))
                peak_rss[0] = max(peak_rss[0], broker.memory_info().rss / MiB)
                with trio.move_on_after(0.2):
                    await stop.wait()

        async def steady(stop: trio.Event | None, count: int = 0) -> float:
            """A well-behaved client's request rate: ApiVersions back to back on one connection, until
            ``stop`` is set (or ``count`` requests)."""
            n, t0 = 0, trio.current_time()
            async with await trio.open_tcp_stream("127.0.0.1", port) as stream:
                while (stop is not None and not stop.is_set()) or (stop is None and n < count):
                    await api_versions_v0(stream, n, "steady")
                    n += 1
            return n / (trio.current_time() - t0)

        async def main() -> tuple[float, float, float]:
            rates: dict[str, float] = {}
            stop = trio.Event()
            t0 = trio.current_time()
            async with trio.open_nursery() as nursery:
                nursery.start_soon(watch, stop)

                async def under_attack() -> None:
                    rates["attack"] = await steady(stop)

                nursery.start_soon(under_attack)
                async with trio.open_nursery() as workers:
                    for index in range(WORKERS):
                        workers.start_soon(attack.worker, index)
                elapsed = trio.current_time() - t0
                stop.set()
            probes.append(await _probe(port))
            return elapsed, rates["attack"], await steady(None, 3000)

        elapsed, attacked_rate, alone_rate = trio.run(main)
        peak_rss[0] = max(peak_rss[0], broker.memory_info().rss / MiB)
        log = log_path.read_text(errors="replace")
        internal = [line for line in log.splitlines() if "Traceback" in line or "error handling" in line]
        print(f"\nfuzz: {attack.sent} mutated frames of {len(frames)} corpus frames in {elapsed:.1f} s "
              f"({attack.sent / elapsed:.0f} frames/s), {attack.responses} answered, {attack.closed_by_broker} "
              f"connections closed by the broker; probe ApiVersions max {max(probes) * 1000:.0f} ms over "
              f"{len(probes)} probes; broker peak RSS {peak_rss[0]:.0f} MB; a steady client's requests/s "
              f"{attacked_rate:.0f} under attack, {alone_rate:.0f} alone")
        assert proc.poll() is None, "the broker died"
        assert attack.sent == MUTATED_FRAMES
        assert max(probes) < 1.0
        assert peak_rss[0] <= 300
        assert internal == [], "\n".join(internal[:20])
    finally:
        proc.terminate()
        proc.wait(30)


# -- random valid bodies -------------------------------------------------------------------------------
class HandlerFailures(ObserverBase, logging.Handler):
    """Responses built because a handler raised (KafkaApis answers them with an error response), and any
    error the broker logged (a connection closed after an internal error)."""

    def __init__(self) -> None:
        logging.Handler.__init__(self, logging.ERROR)
        self.failed: list[str] = []

    def on_response(self, response: Response) -> None:
        if response.error:
            ctx = response.request.context
            self.failed.append(f"{APIS[ctx.api_key].name} v{ctx.api_version}: error {response.error}")

    def emit(self, record: logging.LogRecord) -> None:
        self.failed.append(record.getMessage())


@pytest.fixture(scope="module")
def fuzz_broker():
    failures = HandlerFailures()
    logger = logging.getLogger("minikafka")
    logger.addHandler(failures)
    try:
        with BrokerThread(BrokerConfig(port=0, group_initial_rebalance_delay_ms=0)) as broker:
            broker.call(broker.broker.observe, failures)
            yield broker, failures
    finally:
        logger.removeHandler(failures)


API_VERSIONS = [(key, v) for key, api in sorted(APIS.items()) for v in range(api.min_version, api.max_version + 1)]


def _request(key: int, version: int, body: dict, corr: int) -> bytes:
    api = APIS[key]
    header = RequestHeader.build({"request_api_key": key, "request_api_version": version, "correlation_id": corr,
                                  "client_id": "hypothesis"}, request_header_version(key, api.is_flexible(version)))
    frame = header + api.request.build(body, version)
    return len(frame).to_bytes(4, "big") + frame


@pytest.mark.parametrize("key,version", API_VERSIONS, ids=[f"{APIS[k].name}-v{v}" for k, v in API_VERSIONS])
def test_random_valid_bodies(fuzz_broker, key: int, version: int) -> None:
    from message_strategies import message_strategy

    broker, failures = fuzz_broker
    corr = iter(range(1, 1 << 30))

    @settings(max_examples=40, deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(message_strategy(APIS[key].request, version, True))
    def send(body: dict) -> None:
        with socket.create_connection(("127.0.0.1", broker.port), timeout=5) as s:
            s.sendall(_request(key, version, body, next(corr)))
            s.settimeout(0.5)
            try:
                s.recv(1 << 20)  # an answer, a close, or (JoinGroup, long polls, acks=0) nothing yet
            except (TimeoutError, ConnectionResetError):
                pass

    send()
    assert failures.failed == []
    assert broker._thread is not None and broker._thread.is_alive()
