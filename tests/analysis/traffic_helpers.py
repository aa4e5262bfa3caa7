"""A capture made by real clients (confluent_kafka, statistics on) and the bookkeeping to compare with them.

librdkafka's statistics count, per broker entry, ``tx``/``txbytes`` (requests
sent, bytes including the 4-byte size prefix) and ``rx``/``rxbytes``
(responses received, likewise): the capture's frame sizes exactly, per
connection.  Two systematic differences, both accounted for exactly:

* The bootstrap connection: librdkafka (2.10+) decommissions the
  ``host:port/bootstrap`` broker once Metadata named the real brokers, and its
  stats entry goes with it, so the bootstrap connection's requests (ApiVersions,
  Metadata and for a consumer FindCoordinator) are in no final snapshot.  It is
  the client's first connection in the capture.
* Requests sent while closing: the stats a client can still report are
  emitted before ``close()``; what close sends (a consumer can refresh
  Metadata) is in the capture only.  Requests after the final snapshot are
  taken out, and must all come after ``close()`` began.

A consumer's group coordinator connection is a separate stats entry
(``GroupCoordinator``) and a separate connection in the capture.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from minikafka.broker.config import BrokerConfig
from minikafka.capture import read_capture
from minikafka.capture.format import CaptureRecord
from minikafka.testing import BrokerThread
from waiting import wait_for_no_connections

STATS_INTERVAL_MS = 100
MAX_WAIT_MS = 200
TOPICS = ("tl-a", "tl-b")
PRODUCER_ID = "tl-producer"
CONSUMER_ID = "tl-consumer"
BOOTSTRAP_APIS = {"ApiVersions", "Metadata", "FindCoordinator"}


@dataclass
class ClientRun:
    """One client's statistics: every snapshot, the final one (and its wall-clock time), when close began."""

    client_id: str
    snapshots: list[dict] = field(default_factory=list)
    final: dict | None = None
    final_ns: int = 0
    close_ns: int = 0

    def entries(self) -> dict[str, tuple[int, int, int, int]]:
        """Broker entry name -> (tx, txbytes, rx, rxbytes) in the final snapshot."""
        assert self.final is not None
        return {n: (b["tx"], b["txbytes"], b["rx"], b["rxbytes"]) for n, b in self.final["brokers"].items()}

    def totals(self) -> tuple[int, int, int, int]:
        e = self.entries().values()
        return tuple(sum(x[i] for x in e) for i in range(4))  # type: ignore[return-value]

    def requests_by_api(self) -> Counter:
        """Requests sent per api (librdkafka names normalised: lower case, no trailing s)."""
        assert self.final is not None
        out: Counter = Counter()
        for b in self.final["brokers"].values():
            for api, n in b.get("req", {}).items():
                if n:
                    out[norm_api(api)] += n
        return out


@dataclass
class CaptureRun:
    path: Path
    broker_stats: dict[int, list[int]]
    clients: dict[str, ClientRun]
    produced: int
    consumed: int
    max_wait_ms: int = MAX_WAIT_MS


def norm_api(name: str) -> str:
    """``ApiVersions``/``ApiVersion`` -> ``apiversion``: librdkafka's and Kafka's api names compared."""
    return name.lower().rstrip("s")


_MONO_TO_WALL_NS = time.time_ns() - time.monotonic_ns()


def _counters(s: dict) -> dict[str, tuple[int, int, int, int]]:
    return {n: (b["tx"], b["txbytes"], b["rx"], b["rxbytes"]) for n, b in s["brokers"].items()}


def quiesce(run: ClientRun, poll: Callable[[], Any], settle: int = 3, timeout: float = 10.0) -> None:
    """Poll until ``settle`` consecutive fresh snapshots are equal with every request answered (tx == rx);
    the last of them is the client's final statistics."""
    start = len(run.snapshots)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        poll()
        fresh = run.snapshots[start:]
        if len(fresh) >= settle:
            last = [_counters(s) for s in fresh[-settle:]]
            if all(c == last[-1] for c in last) and all(tx == rx for tx, _, rx, _ in last[-1].values()):
                run.final = fresh[-1]
                # librdkafka's ts is CLOCK_MONOTONIC in microseconds, as Python's monotonic clock.
                run.final_ns = fresh[-1]["ts"] * 1000 + _MONO_TO_WALL_NS
                return
    raise AssertionError(f"{run.client_id}: statistics did not settle")


def make_client_capture(tmp: Path, n: int = 400, max_wait_ms: int = MAX_WAIT_MS) -> CaptureRun:
    """A producer (n records over two topics, ~1.5 s) and a consumer (reads them, then long-polls ~1 s)
    against a capturing broker, both with statistics every :data:`STATS_INTERVAL_MS`."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    cap = tmp / "cap"
    prun, crun = ClientRun(PRODUCER_ID), ClientRun(CONSUMER_ID)
    with BrokerThread(BrokerConfig(port=0, capture_dir=cap, group_initial_rebalance_delay_ms=0)) as bt:
        p = Producer({"bootstrap.servers": bt.bootstrap, "client.id": PRODUCER_ID, "linger.ms": 5,
                      "statistics.interval.ms": STATS_INTERVAL_MS,
                      "stats_cb": lambda s: prun.snapshots.append(json.loads(s))})
        for i in range(n):
            p.produce(TOPICS[i % 2], b"value-%06d-" % i + b"x" * (20 + i % 50))
            if i % 40 == 39:
                p.flush(10)
                time.sleep(0.15)  # fixed wait: the workload's pace (statistics windows over ~1.5 s are measured)
        assert p.flush(10) == 0
        quiesce(prun, lambda: p.poll(0.05))
        prun.close_ns = time.time_ns()
        p.close()

        c = Consumer({"bootstrap.servers": bt.bootstrap, "group.id": "tl-group", "client.id": CONSUMER_ID,
                      "enable.auto.commit": False, "fetch.wait.max.ms": max_wait_ms,
                      "statistics.interval.ms": STATS_INTERVAL_MS,
                      "stats_cb": lambda s: crun.snapshots.append(json.loads(s))})
        parts = [TopicPartition(t, 0, 0) for t in TOPICS]
        c.assign(parts)
        got = 0
        deadline = time.time() + 20
        while got < n and time.time() < deadline:
            got += len([m for m in c.consume(100, timeout=0.5) if m.error() is None])
        t_idle = time.monotonic()
        while time.monotonic() - t_idle < 5.5 * max_wait_ms / 1000:  # nothing left: long polls
            got += len([m for m in c.consume(100, timeout=0.1) if m.error() is None])
        c.pause([TopicPartition(t, 0) for t in TOPICS])
        quiesce(crun, lambda: c.consume(10, timeout=0.05))
        crun.close_ns = time.time_ns()
        c.close()
        wait_for_no_connections(bt)
        broker_stats = bt.call(lambda: {k: list(v) for k, v in bt.broker.request_stats.items()})
    return CaptureRun(cap, broker_stats, {PRODUCER_ID: prun, CONSUMER_ID: crun}, n, got, max_wait_ms)


def capture_records(path: Path) -> list[CaptureRecord]:
    return list(read_capture([path]))


def client_accounting(run: ClientRun, connections: Any, records: list[CaptureRecord]) -> dict[str, Any]:
    """What the capture (the traffic job's ``connections`` table, as pandas) says minus what the client
    cannot report (see the module docstring), per connection and in total, with what was left out.

    Returns ``per_connection`` (connection id -> (requests, request bytes, responses, response bytes)),
    ``bootstrap`` (the bootstrap connection's row or None if the stats still have its entry),
    ``late`` (records after the final snapshot) and ``by_api`` (requests per api, normalised names).
    """
    from minikafka.capture.frames import api_name

    conns = connections[connections["client_id"] == run.client_id].sort_values("first_ts")
    mine = [r for r in records if r.client_id == run.client_id]
    late = [r for r in mine if r.receive_ns > run.final_ns]
    has_bootstrap_entry = any(n.endswith("/bootstrap") for n in run.entries())
    bootstrap = None if has_bootstrap_entry else conns.iloc[0]
    per: dict[str, tuple[int, int, int, int]] = {}
    for row in conns.itertuples():
        if bootstrap is not None and row.connection_id == bootstrap["connection_id"]:
            continue
        gone = [r for r in late if r.connection_id == row.connection_id]
        per[row.connection_id] = (
            int(row.requests) - len(gone),
            int(row.request_bytes) - sum(len(r.request) + 4 for r in gone),
            int(row.responses) - sum(r.response is not None for r in gone),
            int(row.response_bytes) - sum(len(r.response) + 4 for r in gone if r.response is not None))
    boot_id = None if bootstrap is None else bootstrap["connection_id"]
    by_api: Counter = Counter(norm_api(api_name(r.api_key)) for r in mine
                              if r.connection_id != boot_id and r.receive_ns <= run.final_ns)
    return {"per_connection": per, "bootstrap": bootstrap, "late": late, "by_api": by_api}
