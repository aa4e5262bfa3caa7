"""The fetch-session seed experiment (SPEC section 3): how much KIP-227 saves a follower.

    .venv/bin/python examples/fetch_session_seed.py [--incremental N] [--max-wait-ms MS] [--out DIR]
    .venv/bin/python examples/fetch_session_seed.py --bootstrap localhost:9092

Starts an in-process broker on a free port (or uses the one --bootstrap names), creates topic ``test`` with 1000
partitions and, acting as a follower (replica_id 1), fetches partitions
0..499 with nothing produced, through minikafka's FetchSessionHandler over a raw
KafkaConnection: first pinned to Fetch v6 (no sessions: 12031 bytes
per request body), then at v7: one full fetch that creates a session (12043
bytes) and incremental fetches naming no partitions (33 bytes each).  Prints
each body size (as encoded and as the broker saw it), the saving, and the
broker's session-cache metrics.

run_fetcher is the reusable fetch loop (the tests import it).
"""

from __future__ import annotations

import argparse
import logging
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trio

from minikafka.broker.broker import serve_broker
from minikafka.broker.config import BrokerConfig
from minikafka.broker.request import ResponseObserver
from minikafka.client.connection import KafkaConnection
from minikafka.client.fetch_session import FetchSessionHandler, PartitionData
from minikafka.protocol.api import ApiKey
from minikafka.protocol.messages.fetch import FetchRequest

sys.path.append(str(Path(__file__).resolve().parent))  # examples/_tutorial.py (appended: never hides a module)
from _tutorial import Figures, parser, split_bootstrap  # noqa: E402

log = logging.getLogger(__name__)

TOPIC = "test"
TOPIC_PARTITIONS = 1000
FOLLOWED = range(500)
REPLICA_ID = 1
PARTITION_MAX_BYTES = 1048576
MAX_BYTES = 10485760


@dataclass(frozen=True, slots=True)
class FetchRound:
    """One fetch as the client sent it and what came back."""

    version: int
    session_id: int             # in the request (0 before v7)
    epoch: int                  # in the request (-1 before v7)
    full: bool
    body_size: int              # request body bytes (after the request header)
    sent_partitions: int
    response_session_id: int
    response_error: int
    response_partitions: int
    ok: bool                    # FetchSessionHandler.handle_response's verdict


async def run_fetcher(
    conn: KafkaConnection,
    handler: FetchSessionHandler,
    *,
    version: int,
    fetches: int,
    topic: str = TOPIC,
    partitions: range | list[int] = FOLLOWED,
    topic_id: uuid.UUID | None = None,
    replica_id: int = REPLICA_ID,
    fetch_offset: int = 0,
    log_start_offset: int = 0,
    partition_max_bytes: int = PARTITION_MAX_BYTES,
    max_wait_ms: int = 0,
    min_bytes: int = 1,
    max_bytes: int = MAX_BYTES,
) -> list[FetchRound]:
    """Fetch the same partitions ``fetches`` times through ``handler``; one FetchRound each.

    Nothing moves the fetch positions (the seed produces nothing), so after the
    first full fetch a session-holding handler sends empty incremental fetches.
    """
    rounds = []
    for _ in range(fetches):
        builder = handler.new_builder()
        for p in partitions:
            data = PartitionData(topic, topic_id or uuid.UUID(int=0), p, fetch_offset, log_start_offset,
                                 partition_max_bytes)
            builder.add(data.tp, data)
        data = builder.build()
        body = data.to_request(version, replica_id=replica_id, max_wait_ms=max_wait_ms, min_bytes=min_bytes,
                               max_bytes=max_bytes)
        size = len(FetchRequest.build(body, version))
        try:
            resp = await conn.request(ApiKey.FETCH, version, body)
        except Exception as exc:
            handler.handle_error(exc)
            raise
        ok = handler.handle_response(resp, version)
        rounds.append(FetchRound(
            version=version,
            session_id=body.get("session_id", 0),
            epoch=body.get("session_epoch", -1),
            full=data.is_full,
            body_size=size,
            sent_partitions=len(data.to_send),
            response_session_id=_get(resp, "session_id", 0),
            response_error=_get(resp, "error_code", 0),
            response_partitions=sum(len(t.partitions) for t in resp.responses),
            ok=ok,
        ))
        log.debug("fetch v%d %s: %d bytes", version, data, size)
    return rounds


def _get(obj: Any, name: str, default: int) -> int:
    value = getattr(obj, name, default)
    return default if value is None else value


def cache_metrics(broker) -> dict[str, int]:
    """The broker's fetch-session cache metrics (zeros if the broker has no session cache)."""
    cache = getattr(getattr(broker, "fetch_manager", None), "cache", None)
    return {
        "NumIncrementalFetchSessions": getattr(cache, "num_incremental_fetch_sessions", 0),
        "NumIncrementalFetchPartitionsCached": getattr(cache, "num_incremental_fetch_partitions_cached", 0),
        "IncrementalFetchSessionEvictions": getattr(cache, "evictions", 0),
    }


async def create_seed_topic(bootstrap: str, topic: str = TOPIC, partitions: int = TOPIC_PARTITIONS) -> None:
    """CreateTopics over the wire (a topic already there is fine: the seed only reads it)."""
    from minikafka.protocol.errors import ErrorCode
    from minikafka.tools.admin import AdminClient

    async with AdminClient(bootstrap) as admin:
        code, message = (await admin.create_topics([{
            "name": topic, "num_partitions": partitions, "replication_factor": 1, "assignments": [],
            "configs": []}]))[topic]
    if code not in (0, ErrorCode.TOPIC_ALREADY_EXISTS):
        raise SystemExit(f"creating {topic!r}: error {code} {message}")


async def experiment(host: str, port: int, incremental: int, max_wait_ms: int, broker=None) -> dict[str, Any]:
    """Run the seed against host:port; print each fetch and return the figures."""
    seen: list[int] = []
    if broker is not None:
        def observe(ctx, frame, response) -> None:
            if ctx.api_key == ApiKey.FETCH:
                seen.append(ctx.body_size)

        broker.observe(ResponseObserver(observe))
    print(f"broker {host}:{port}; topic {TOPIC!r} with {TOPIC_PARTITIONS} partitions; "
          f"follower (replica_id {REPLICA_ID}) fetches partitions {FOLLOWED.start}..{FOLLOWED.stop - 1}")
    async with await KafkaConnection.connect(host, port, client_id="seed-follower") as conn:
        v6 = await run_fetcher(conn, FetchSessionHandler(0), version=6, fetches=3, max_wait_ms=max_wait_ms)
        v7 = await run_fetcher(conn, FetchSessionHandler(0), version=7, fetches=1 + incremental,
                               max_wait_ms=max_wait_ms)
    if broker is not None:
        with trio.move_on_after(5):  # observers run just after the response went out
            while len(seen) < len(v6) + len(v7):
                await trio.sleep(0.001)
    broker_sizes = iter(seen + ["?"] * (len(v6) + len(v7) - len(seen)))
    print("\nFetch v6 (no sessions):")
    for r in v6:
        print(f"  full fetch         request body {r.body_size:6d} bytes (broker saw {next(broker_sizes)}), "
              f"{r.response_partitions} partitions back")
    print("Fetch v7 (incremental fetch sessions):")
    for r in v7:
        kind = "full fetch " if r.full else "incremental"
        print(f"  {kind} s={r.session_id:<10d} e={r.epoch:<2d} request body {r.body_size:6d} bytes "
              f"(broker saw {next(broker_sizes)}), {r.response_partitions} partitions back, "
              f"session {r.response_session_id}")
    full = v7[0].body_size
    inc = [r.body_size for r in v7[1:] if not r.full]
    figures: dict[str, Any] = {
        "partitions": len(FOLLOWED), "topic_partitions": TOPIC_PARTITIONS,
        "v6_bytes": v6[0].body_size, "full_bytes": full, "session_fields_bytes": full - v6[0].body_size,
        "incremental_fetches": len(inc), "session_id_assigned": v7[0].response_session_id != 0,
        "v6_rounds": [r.body_size for r in v6], "v7_rounds": [r.body_size for r in v7],
        "broker_saw": seen,
    }
    if inc:
        figures["incremental_bytes"] = inc[0]
        figures["saving"] = round(full / inc[0])
        print(f"\nsaving per fetch: {full} / {inc[0]} bytes = {full / inc[0]:.0f}x "
              f"(v6 {v6[0].body_size} bytes, +{full - v6[0].body_size} for the v7 session fields)")
    else:
        print("\nno incremental fetches: the broker answered sessionless (session_id 0)")
    if broker is not None:
        for name, value in cache_metrics(broker).items():
            print(f"{name} = {value}")
            figures[name] = value
    return figures


async def main(incremental: int = 5, max_wait_ms: int = 0, bootstrap: str | None = None,
               out: Path | None = None) -> dict[str, Any]:
    if bootstrap is not None:
        await create_seed_topic(bootstrap)
        host, port = split_bootstrap(bootstrap)
        values = await experiment(host, port, incremental, max_wait_ms)
    else:
        async with serve_broker(BrokerConfig(port=0)) as broker:
            broker.create_topic(TOPIC, TOPIC_PARTITIONS)
            values = await experiment("127.0.0.1", broker.port, incremental, max_wait_ms, broker)
    figures = Figures("fetch_sessions", out)
    figures.values.update(values)
    rounds = [f"v6 #{i + 1}" for i in range(len(values["v6_rounds"]))] + \
             ["v7 full"] + [f"v7 inc #{i + 1}" for i in range(len(values["v7_rounds"]) - 1)]
    figures.chart("bytes", "Fetch request body per fetch (500 partitions followed)", "fetch",
                  "request body bytes (log scale)",
                  [("request body", rounds, values["v6_rounds"] + values["v7_rounds"])], kind="bar", logy=True)
    figures.write()
    return values


if __name__ == "__main__":
    ap = parser(__doc__.split("\n\n")[0])
    ap.add_argument("--incremental", type=int, default=5, help="incremental fetches after the full one")
    ap.add_argument("--max-wait-ms", type=int, default=0, help="max_wait_ms of each fetch (the seed used 500)")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    trio.run(main, args.incremental, args.max_wait_ms, args.bootstrap, args.out)
