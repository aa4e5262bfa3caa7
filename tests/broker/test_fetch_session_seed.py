"""The fetch-session seed (SPEC section 3) against a real broker, sizes as the broker saw them.

A follower (replica_id 1) fetches partitions 0..499 of the 1000-partition topic
``test`` with nothing produced: 12031-byte bodies at Fetch v6, a 12043-byte full
fetch at v7 that creates one 500-partition session, then 33-byte incremental
fetches answered with no partitions.  The fetch loop is the example's
(``examples/fetch_session_seed.py``).
"""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from minikafka.broker.broker import Broker
from minikafka.client.connection import KafkaConnection
from minikafka.client.fetch_session import FetchSessionHandler
from minikafka.protocol.api import ApiKey
from minikafka.protocol.headers import parse_request_header_prefix
from minikafka.protocol.messages.fetch import FetchRequest, FetchResponse
from minikafka.broker.request import ResponseObserver
from helpers import wait_until

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "fetch_session_seed.py"


def _load_example():
    spec = importlib.util.spec_from_file_location("fetch_session_seed", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("fetch_session_seed", mod)
    path = list(sys.path)
    try:
        spec.loader.exec_module(mod)
    finally:  # the example puts examples/ on the path (for _tutorial): its clients.py would hide tests/clients
        sys.path[:] = path
    return mod


seed = _load_example()


@dataclass
class Seen:
    """One fetch request as the broker received and answered it."""

    version: int
    body_size: int
    session_id: int
    epoch: int
    request_partitions: int
    response_session_id: int
    response_error: int
    response_partitions: int


def _observe(into: list[Seen]):
    def observe(ctx, frame, response) -> None:
        if ctx.api_key != ApiKey.FETCH:
            return
        hdr = parse_request_header_prefix(frame)
        assert ctx.api_version < 12  # non-flexible: the body follows the v1 header directly
        req = FetchRequest.parse(bytes(frame[hdr.body_offset:]), ctx.api_version)
        assert len(frame) - hdr.body_offset == ctx.body_size
        raw = b"".join(bytes(s) for s in response)
        resp = FetchResponse.parse(raw[4:], ctx.api_version)  # after the v0 response header
        into.append(Seen(
            version=ctx.api_version,
            body_size=ctx.body_size,
            session_id=getattr(req, "session_id", 0) or 0,
            epoch=req.session_epoch if ctx.api_version >= 7 else -1,
            request_partitions=sum(len(t.partitions) for t in req.topics),
            response_session_id=getattr(resp, "session_id", 0) or 0,
            response_error=getattr(resp, "error_code", 0) or 0,
            response_partitions=sum(len(t.partitions) for t in resp.responses),
        ))

    return observe


async def settled(seen: list, n: int, timeout: float = 5) -> list:
    """Wait until the observer saw ``n`` fetches (it runs after the response is sent)."""
    await wait_until(lambda: len(seen) >= n, timeout, f"{n} fetches")
    return seen


@pytest.fixture
async def seeded(broker: Broker) -> Broker:
    broker.create_topic(seed.TOPIC, seed.TOPIC_PARTITIONS)
    return broker


async def test_seed_sessions(seeded: Broker, conn: KafkaConnection):
    seen: list[Seen] = []
    seeded.observe(ResponseObserver(_observe(seen)))
    cache = seeded.fetch_manager.cache

    v6 = await seed.run_fetcher(conn, FetchSessionHandler(0), version=6, fetches=3)
    await settled(seen, 3)
    assert [s.body_size for s in seen] == [12031] * 3
    assert [r.body_size for r in v6] == [12031] * 3
    assert all(s.request_partitions == 500 and s.response_partitions == 500 for s in seen)
    assert cache.num_incremental_fetch_sessions == 0

    seen.clear()
    handler = FetchSessionHandler(0)
    v7 = await seed.run_fetcher(conn, handler, version=7, fetches=6)
    await settled(seen, 6)
    assert [s.body_size for s in seen] == [12043] + [33] * 5
    assert [r.body_size for r in v7] == [12043] + [33] * 5
    assert all(r.ok for r in v7)

    full, incs = seen[0], seen[1:]
    assert (full.session_id, full.epoch, full.request_partitions) == (0, 0, 500)
    assert full.response_error == 0 and full.response_partitions == 500
    session_id = full.response_session_id
    assert session_id != 0
    assert [(s.session_id, s.epoch) for s in incs] == [(session_id, e) for e in range(1, 6)]
    assert all(s.request_partitions == 0 for s in incs)
    # Nothing was produced: no new data, no changed high watermark, so nothing to report.
    assert all((s.response_error, s.response_session_id, s.response_partitions) == (0, session_id, 0)
               for s in incs)
    assert handler.session_id == session_id and len(handler.session_partitions) == 500

    assert cache.num_incremental_fetch_sessions == 1
    assert cache.num_incremental_fetch_partitions_cached == 500
    assert cache.evictions == 0
    assert seed.cache_metrics(seeded) == {"NumIncrementalFetchSessions": 1,
                                          "NumIncrementalFetchPartitionsCached": 500,
                                          "IncrementalFetchSessionEvictions": 0}
    assert full.body_size / incs[0].body_size == pytest.approx(365, abs=0.5)


@pytest.mark.parametrize("version, size", [(6, 12031), (7, 12043)])
async def test_seed_sessionless_stays_full(seeded: Broker, conn: KafkaConnection, version: int, size: int):
    seen: list[Seen] = []
    seeded.observe(ResponseObserver(_observe(seen)))
    rounds = await seed.run_fetcher(conn, FetchSessionHandler(0, use_sessions=False), version=version, fetches=4)
    await settled(seen, 4)
    assert [s.body_size for s in seen] == [size] * 4
    assert all(r.full and r.ok for r in rounds)
    assert all(s.request_partitions == 500 and s.response_partitions == 500 for s in seen)
    if version >= 7:
        assert all((s.session_id, s.epoch, s.response_session_id) == (0, -1, 0) for s in seen)
    assert seeded.fetch_manager.cache.num_incremental_fetch_sessions == 0
    assert seeded.fetch_manager.cache.num_incremental_fetch_partitions_cached == 0


async def test_seed_example_main_runs(capsys):
    await seed.main(incremental=2)
    out = capsys.readouterr().out
    assert "12031 bytes" in out and "12043 bytes" in out and "33 bytes" in out
    assert "= 365x" in out
    assert "NumIncrementalFetchSessions = 1" in out
    assert "NumIncrementalFetchPartitionsCached = 500" in out
