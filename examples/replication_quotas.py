"""Replication quotas watched: the 18-byte answer on every follower fetch, then a throttled catch-up.

    .venv/bin/python examples/replication_quotas.py [--rate BYTES_PER_S] [--fill-mb MB] [--out DIR]

Starts a cluster of two brokers in this process (minikafka.testing.ClusterThread: the figures come from
inside the brokers, so this tutorial always runs its own cluster) and does two things.

1. The seed experiment (SPEC section 5): topic ``test`` with 1000 partitions and replication factor 2,
   nothing produced.  Each broker follows the 500 partitions the other leads: its first fetch request body
   is 12043 bytes, the next ones 33 (incremental fetch sessions).  On every one of those fetches the
   leader records into its leader replication quota the size of a FetchResponse holding only the
   throttled partitions, 4 + an empty response: 18 bytes at Fetch v7-v11, though nothing is throttled.

2. A throttled catch-up: ``leader.replication.throttled.rate`` set on broker 0 with
   IncrementalAlterConfigs (as kafka-configs.sh does), topic ``slow`` throttled on the leader side
   (``leader.replication.throttled.replicas=*``), topic ``fast`` not.  Broker 1 is stopped while MBs go
   into both and it has left the ISR (after ``replica.lag.time.max.ms``, 1 s here), then started: it
   catches up on ``fast`` at full speed and on ``slow`` at the rate.
"""

from __future__ import annotations

import logging
import sys
import time
from pathlib import Path
from typing import Any

import trio
from confluent_kafka import Producer

from minikafka.broker.request import ResponseObserver
from minikafka.protocol.api import ApiKey
from minikafka.testing import ClusterThread
from minikafka.tools.admin import OP_SET, RESOURCE_BROKER, AdminClient

sys.path.append(str(Path(__file__).resolve().parent))  # examples/_tutorial.py (appended: never hides a module)
from _tutorial import Figures, parser  # noqa: E402

MB = 1_000_000
SEED_PARTITIONS = 1000  # the seed experiment's topic
LAG_TIME_MAX_MS = 1000  # replica.lag.time.max.ms: how soon a stopped follower leaves the ISR
FAST = dict(replica_fetch_wait_max_ms=50, replica_fetch_backoff_ms=50, group_initial_rebalance_delay_ms=0)


def wait_for(what: str, condition, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.02)


def seed(cluster: ClusterThread) -> dict[str, Any]:
    """Part 1: the follower fetch sizes and what each records into the leader quota."""
    seen: dict[int, list[tuple[int, int | None, int]]] = {0: [], 1: []}
    for bid in (0, 1):
        def observe(ctx, frame, response, bid=bid) -> None:
            if ctx.api_key == ApiKey.FETCH:
                seen[bid].append((ctx.body_size, ctx.fetch.leader_quota_recorded if ctx.fetch else None,
                                  ctx.api_version))
        cluster.call(cluster.cluster.broker(bid).observe, ResponseObserver(observe))
    cluster.create_topic("test", SEED_PARTITIONS, 2)
    wait_for("six follower fetches on each broker", lambda: all(len(s) >= 6 for s in seen.values()))
    quota = cluster.call(lambda: cluster.cluster.broker(0).leader_quota)
    sizes = [s for s, _, _ in seen[0][:6]]
    recorded = sorted({r for _, r, _ in seen[0] if r is not None})
    print(f"Part 1: topic 'test', {SEED_PARTITIONS} partitions, RF 2, nothing produced")
    print(f"  broker 1's fetches from broker 0 (Fetch v{seen[0][0][2]}): request bodies {sizes} bytes")
    print(f"  recorded into broker 0's leader quota on each: {recorded} bytes "
          f"({quota.recorded_count} fetches, {quota.recorded_bytes} bytes in all, nothing throttled)")
    return {"seed_partitions": SEED_PARTITIONS, "seed_replication_factor": 2, "fetch_version": seen[0][0][2],
            "first_body": sizes[0], "incremental_body": sizes[1],
            "seed_bodies": sizes, "phantom_bytes": recorded[0] if len(recorded) == 1 else recorded,
            "phantom_fetches": quota.recorded_count, "phantom_total": quota.recorded_bytes}


def fill(bootstrap: str, topic: str, total: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 5, "compression.type": "none",
                         "batch.size": 32768})  # batches well under replica.fetch.max.bytes
    value = b"v" * 1000
    for _ in range(total // len(value)):
        while True:
            try:
                producer.produce(topic, value, partition=0)
                break
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)
    if producer.flush(60):
        raise SystemExit(f"could not produce to {topic}")


def catch_up(cluster: ClusterThread, rate: float, fill_mb: float) -> dict[str, Any]:
    """Part 2: a follower catching up on a throttled and an unthrottled topic."""
    def log_size(bid: int, topic: str) -> int:
        return cluster.call(lambda: cluster.cluster.broker(bid).replica_manager.get(topic, 0).log.size_in_bytes)

    def create() -> None:
        b0 = cluster.cluster.broker(0)
        b0.create_topic("slow", assignments={0: [0, 1]}, configs={"leader.replication.throttled.replicas": "*"})
        b0.create_topic("fast", assignments={0: [0, 1]})
    cluster.delete_topic("test")  # part 1's 1000 partitions would only slow broker 1's restart
    cluster.call(create)

    async def set_rate() -> None:
        async with AdminClient(cluster.bootstrap) as admin:
            await admin.alter_configs(RESOURCE_BROKER, "0", [("leader.replication.throttled.rate", OP_SET,
                                                              str(int(rate)))])
    trio.run(set_rate)
    cluster.stop_broker(1)
    fill(cluster.bootstrap, "slow", int(fill_mb * MB))
    fill(cluster.bootstrap, "fast", int(fill_mb * MB))
    target = {t: log_size(0, t) for t in ("slow", "fast")}
    # Leader-side throttling applies to a follower out of the ISR: wait for the leader to drop broker 1.
    wait_for("broker 1 to leave the ISR", lambda: cluster.call(
        lambda: all(1 not in cluster.cluster.metadata.topics[t].partitions[0].isr for t in ("slow", "fast"))))
    print(f"\nPart 2: broker 1 stopped while {target['slow'] / MB:.1f} MB went into 'slow' (throttled on the "
          f"leader at {rate / MB:.2f} MB/s) and {target['fast'] / MB:.1f} MB into 'fast'; broker 1 starts")
    cluster.start_broker(1)
    start = time.monotonic()
    samples: list[tuple[float, int, int]] = []
    deadline = start + 60
    while time.monotonic() < deadline:
        slow, fast = log_size(1, "slow"), log_size(1, "fast")
        samples.append((time.monotonic() - start, slow, fast))
        if slow >= target["slow"] and fast >= target["fast"]:
            break
        time.sleep(0.1)
    fast_done = next((t for t, _, f in samples if f >= target["fast"]), None)
    slow_done = next((t for t, s, _ in samples if s >= target["slow"]), None)
    # Over the whole catch-up (SimpleRate lets the first window's worth through at once, then holds the rate),
    # and once that allowance is spent: between 40% and 95% of the way.
    measured = target["slow"] / slow_done if slow_done else None
    mid = [(t, s) for t, s, _ in samples if 0.4 * target["slow"] <= s <= 0.95 * target["slow"]]
    steady = (mid[-1][1] - mid[0][1]) / (mid[-1][0] - mid[0][0]) if len(mid) > 1 and mid[-1][0] > mid[0][0] else None
    for t, s, f in samples[::10]:
        print(f"  t={t:5.1f} s   slow {s / MB:6.2f} MB   fast {f / MB:6.2f} MB")
    if fast_done and slow_done and measured:
        print(f"  'fast' caught up in {fast_done:.2f} s; 'slow' in {slow_done:.2f} s, "
              f"{measured / MB:.2f} MB/s on average"
              + (f", {steady / MB:.2f} MB/s once the first window's allowance was spent" if steady else ""))
    else:
        raise SystemExit("broker 1 did not catch up in 60 s")
    return {"rate": int(rate), "rate_mb_s": round(rate / MB, 3), "lag_time_max_s": LAG_TIME_MAX_MS / 1000,
            "fill_mb": round(target["slow"] / MB, 2),
            "fast_seconds": None if fast_done is None else round(fast_done, 2),
            "slow_seconds": None if slow_done is None else round(slow_done, 2),
            "measured_mb_s": None if measured is None else round(measured / MB, 3),
            "steady_mb_s": None if steady is None else round(steady / MB, 3),
            "series": samples}


def main() -> None:
    ap = parser(__doc__)
    ap.set_defaults(bootstrap=None)
    ap.add_argument("--rate", type=float, default=MB, metavar="BYTES_PER_S",
                    help="leader.replication.throttled.rate for part 2 (default 1000000)")
    ap.add_argument("--fill-mb", type=float, default=3.0, help="MB produced into each topic in part 2 (default 3)")
    args = ap.parse_args()
    if args.bootstrap is not None:
        ap.error("this tutorial watches inside the brokers, so it runs its own two-broker cluster (no --bootstrap)")
    logging.basicConfig(level=logging.WARNING)
    figures = Figures("replication", args.out)
    with ClusterThread(2, replication_quota_window_num=3, replica_fetch_max_bytes=64 * 1024,
                       replica_lag_time_max_ms=LAG_TIME_MAX_MS, **FAST) as cluster:
        figures.values.update(seed(cluster))
        figures.values.update(catch_up(cluster, args.rate, args.fill_mb))
    series = figures.values.pop("series")
    ts = [round(t, 2) for t, _, _ in series]
    figures.chart("catch-up", "Broker 1 catching up after a restart", "seconds after start",
                  "MB in broker 1's log",
                  [("slow (throttled)", ts, [s / MB for _, s, _ in series]),
                   ("fast (not throttled)", ts, [f / MB for _, _, f in series])])
    figures["series_seconds"] = ts
    figures.write()


if __name__ == "__main__":
    main()
