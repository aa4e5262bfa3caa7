"""Replication quotas (Kafka's ReplicationQuotaManager), SPEC section 5 / issue 5.

How the rates are measured
--------------------------
Kafka's replication quotas use ``SimpleRate``, which does not pad a young
metric's window to ``replication.quota.window.num - 1`` windows (client quotas'
``Rate`` does): its window is max(time since the oldest sample, one window).
A follower catching up therefore first gets about one window's worth (quota x
window size) in its first window, then the rate holds at the quota.  The rate
is measured on the follower (bytes in its log, sampled every 20 ms) over one
whole quota period (11 windows of 1 s = 11 s) after a warm-up of one window
from the first replicated byte.  Fetches are capped at 64 KiB per partition
(``replica.fetch.max.bytes``), the quota's granularity (a throttled partition
is left out while the quota is exceeded, so each excess is at most one fetch).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import trio

from minikafka.broker.cluster import Cluster, serve_cluster
from minikafka.broker.quota.replication_quota_manager import (
    ALL_REPLICAS, ReplicationQuotaManager, parse_throttled_partitions, validate_throttled_replicas)
from minikafka.common.clock import ManualClock
from minikafka.metrics import Metrics
from minikafka.protocol.api import ApiKey
from minikafka.protocol.errors import ErrorCode
from minikafka.broker.request import ResponseObserver
from helpers import batch, produce
from test_cluster import FAST, connect, log_of, wait_until

K = ApiKey
MB = 1_000_000
KIB = 1024
TOPIC, BROKER = 2, 4
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


# -- throttled-replicas parsing --------------------------------------------------------------

def test_parse_throttled_replicas():
    """Kafka's TopicConfigHandler.parseThrottledPartitions: the partitions listed with this broker."""
    assert parse_throttled_partitions("0:1,1:2,2:1", 1) == [0, 2]
    assert parse_throttled_partitions("0:1,1:2,2:1", 2) == [1]
    assert parse_throttled_partitions("0:1", 0) == []
    assert parse_throttled_partitions("*", 5) is ALL_REPLICAS
    assert parse_throttled_partitions(" 0:0 , 3:0 ", 0) == [0, 3]
    assert parse_throttled_partitions("", 0) == [] and parse_throttled_partitions(None, 0) == []
    for bad in ("0", "a:1", "0:1:2", "*,0:1", "0:1,"):
        with pytest.raises(ValueError):
            validate_throttled_replicas(bad)


def test_quota_manager_is_throttled_exceeded_and_record():
    clock = ManualClock(1_000_000)
    q = ReplicationQuotaManager("LeaderReplication", Metrics(clock=clock), rate=1000,
                                window_num=11, window_size_s=1)
    q.update_topic("a", "0:7,2:7,1:8", broker_id=7)
    q.update_topic("b", "*", broker_id=7)
    assert q.is_throttled("a", 0) and q.is_throttled("a", 2) and not q.is_throttled("a", 1)
    assert q.is_throttled("b", 99) and not q.is_throttled("c", 0)
    assert not q.is_quota_exceeded()
    q.record(900)
    assert not q.is_quota_exceeded()  # 900 bytes over one 1 s window (SimpleRate: no padding)
    q.record(200)  # never raises, even over the bound
    assert q.is_quota_exceeded()
    clock.sleep(1500)  # 1100 bytes over 1.5 s
    assert not q.is_quota_exceeded()
    assert q.recorded_bytes == 1100 and q.recorded_count == 2
    q.update_quota(None)
    assert not q.limited and not q.is_quota_exceeded()
    q.update_topic("a", "", broker_id=7)
    assert not q.is_throttled("a", 0)


# -- configuration round trips ------------------------------------------------------------------

def _configs(resp) -> dict[str, tuple[str, int]]:
    return {c.name: (c.value, c.config_source) for c in resp.results[0].configs}


async def _describe(conn, rtype: int, name: str) -> dict[str, tuple[str, int]]:
    resp = await conn.request(K.DESCRIBE_CONFIGS, 4, {"resources": [
        {"resource_type": rtype, "resource_name": name, "configuration_keys": None}]})
    assert resp.results[0].error_code == 0, resp
    return _configs(resp)


async def _incremental(conn, version: int, rtype: int, name: str, ops, validate_only: bool = False):
    resp = await conn.request(K.INCREMENTAL_ALTER_CONFIGS, version, {
        "resources": [{"resource_type": rtype, "resource_name": name, "configs": [
            {"name": k, "config_operation": op, "value": v} for k, op, v in ops]}],
        "validate_only": validate_only})
    return resp.responses[0]


async def _alter(conn, version: int, rtype: int, name: str, configs: dict, validate_only: bool = False):
    resp = await conn.request(K.ALTER_CONFIGS, version, {
        "resources": [{"resource_type": rtype, "resource_name": name, "configs": [
            {"name": k, "value": v} for k, v in configs.items()]}],
        "validate_only": validate_only})
    return resp.responses[0]


@pytest.mark.parametrize("version", [0, 1])
async def test_incremental_alter_configs_topic_and_broker(version):
    async with serve_cluster(2, **FAST) as cluster:
        cluster.broker(0).create_topic("t", 2, 2)
        conn = await connect(cluster, 1)
        b0, b1 = cluster.broker(0), cluster.broker(1)
        lr = "leader.replication.throttled.replicas"
        fr = "follower.replication.throttled.replicas"

        r = await _incremental(conn, version, TOPIC, "t", [(lr, SET, "0:0,1:1")], validate_only=True)
        assert r.error_code == 0 and lr not in cluster.metadata.topics["t"].configs
        r = await _incremental(conn, version, TOPIC, "t", [(lr, SET, "0:0,1:1"), (fr, SET, "*")])
        assert r.error_code == 0 and r.resource_name == "t"
        assert b0.leader_quota.is_throttled("t", 0) and not b0.leader_quota.is_throttled("t", 1)
        assert b1.leader_quota.is_throttled("t", 1) and not b1.leader_quota.is_throttled("t", 0)
        assert b0.follower_quota.is_throttled("t", 1) and b1.follower_quota.is_throttled("t", 0)
        r = await _incremental(conn, version, TOPIC, "t", [(lr, APPEND, "1:0"), (lr, SUBTRACT, "0:0")])
        assert r.error_code == 0
        assert (await _describe(conn, TOPIC, "t"))[lr] == ("1:1,1:0", 1)
        assert b0.leader_quota.is_throttled("t", 1) and not b0.leader_quota.is_throttled("t", 0)
        r = await _incremental(conn, version, TOPIC, "t", [(fr, DELETE, None)])
        assert r.error_code == 0 and not b0.follower_quota.is_throttled("t", 1)
        assert fr not in (await _describe(conn, TOPIC, "t"))

        bad = await _incremental(conn, version, TOPIC, "t", [(lr, SET, "zero:one")])
        assert bad.error_code == ErrorCode.INVALID_CONFIG
        bad = await _incremental(conn, version, TOPIC, "nope", [(lr, SET, "*")])
        assert bad.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        bad = await _incremental(conn, version, TOPIC, "t", [("retention.ms", APPEND, "5")])
        assert bad.error_code == ErrorCode.INVALID_CONFIG

        # Broker resources: one broker by id, or "" for the cluster-wide default.
        rate = "leader.replication.throttled.rate"
        assert (await _describe(conn, BROKER, "0"))[rate] == (str(2**63 - 1), 5)
        r = await _incremental(conn, version, BROKER, "0", [(rate, SET, "1000000")])
        assert r.error_code == 0
        assert b0.leader_quota.limited and b0.leader_quota.quota.bound == 1e6 and not b1.leader_quota.limited
        assert (await _describe(conn, BROKER, "0"))[rate] == ("1000000", 2)
        r = await _incremental(conn, version, BROKER, "", [("follower.replication.throttled.rate", SET, "500")])
        assert r.error_code == 0
        assert b0.follower_quota.quota.bound == 500 and b1.follower_quota.quota.bound == 500
        assert (await _describe(conn, BROKER, "1"))["follower.replication.throttled.rate"] == ("500", 3)
        r = await _incremental(conn, version, BROKER, "0", [(rate, DELETE, None)])
        assert r.error_code == 0 and not b0.leader_quota.limited
        bad = await _incremental(conn, version, BROKER, "0", [(rate, SET, "-5")])
        assert bad.error_code == ErrorCode.INVALID_CONFIG
        bad = await _incremental(conn, version, BROKER, "0", [("num.partitions", SET, "3")])
        assert bad.error_code == ErrorCode.INVALID_CONFIG
        bad = await _incremental(conn, version, BROKER, "7", [(rate, SET, "1")])
        assert bad.error_code == ErrorCode.INVALID_REQUEST
        await conn.aclose()


@pytest.mark.parametrize("version", [0, 1, 2])
async def test_alter_configs_replaces_the_resource_configs(version):
    async with serve_cluster(2, **FAST) as cluster:
        cluster.broker(0).create_topic("t", 1, 2, configs={"retention.ms": "1000"})
        conn = await connect(cluster, 0)
        lr = "leader.replication.throttled.replicas"
        r = await _alter(conn, version, TOPIC, "t", {lr: "*"}, validate_only=True)
        assert r.error_code == 0 and cluster.metadata.topics["t"].configs == {"retention.ms": "1000"}
        r = await _alter(conn, version, TOPIC, "t", {lr: "*"})
        assert r.error_code == 0
        # AlterConfigs replaces: retention.ms is back to the broker default.
        described = await _describe(conn, TOPIC, "t")
        assert described[lr] == ("*", 1) and described["retention.ms"][1] == 5
        assert cluster.broker(1).leader_quota.is_throttled("t", 0)
        r = await _alter(conn, version, BROKER, "1", {"follower.replication.throttled.rate": "2000"})
        assert r.error_code == 0 and cluster.broker(1).follower_quota.quota.bound == 2000
        r = await _alter(conn, version, BROKER, "1", {})
        assert r.error_code == 0 and not cluster.broker(1).follower_quota.limited
        r = await _alter(conn, version, TOPIC, "t", {"no.such.config": "1"})
        assert r.error_code == ErrorCode.INVALID_CONFIG
        await conn.aclose()


def test_static_broker_config_keys(tmp_path: Path):
    from minikafka.broker.config import BrokerConfig

    p = tmp_path / "server.properties"
    p.write_text("leader.replication.throttled.rate=1048576\nfollower.replication.throttled.rate=2000\n"
                 "replication.quota.window.num=5\nreplication.quota.window.size.seconds=2\n")
    cfg = BrokerConfig.from_properties(p)
    assert (cfg.leader_replication_throttled_rate, cfg.follower_replication_throttled_rate,
            cfg.replication_quota_window_num, cfg.replication_quota_window_size_seconds) == (1048576, 2000, 5, 2)
    assert BrokerConfig().leader_replication_throttled_rate == -1  # unlimited


# -- the phantom traffic: sizeOfThrottledPartitions of an empty selection ------------------------

@pytest.mark.parametrize("version,size", [(6, 12), (8, 18), (11, 18), (12, 16), (13, 16), (18, 16)])
async def test_leader_quota_records_empty_response_size_on_every_follower_fetch(version, size):
    """Nothing throttled: every follower fetch still records 4 + an empty FetchResponse of the
    request's version into the leader quota (Kafka's KafkaApis.sizeOfThrottledPartitions):
    18 bytes at v7-v11 (4 + throttle_time_ms 4 + error_code 2 + session_id 4 + array length 4),
    12 at v4-v6 (no session_id or error_code), 16 at v12+ (compact array length 1 + tagged fields 1)."""
    async with serve_cluster(2, replica_fetch_request_version=version, **FAST) as cluster:
        cluster.broker(0).create_topic("t", 1, 2)  # leader 0, follower 1
        leader = cluster.broker(0)
        seen: list[int] = []
        leader.leader_quota.observers.append(seen.append)
        conn = await connect(cluster, 0)
        for i in range(3):  # data flows too: an unthrottled partition adds nothing
            assert (await produce(conn, "t", batch([b"x" * 100]), acks=-1)).error_code == 0
        # At least five follower fetches, and none half-handled (recorded into the quota, not yet counted).
        await wait_until(lambda: len(seen) >= 5 and leader.leader_quota.recorded_count == len(seen)
                         == leader.request_stats[K.FETCH][0], what="five follower fetches")
        await conn.aclose()
        fetches = leader.request_stats[K.FETCH][0]  # only the follower fetches from broker 0
        assert len(seen) >= 5 and set(seen) == {size}
        assert leader.leader_quota.recorded_count == len(seen) == fetches
        m = leader.metrics()
        assert m["kafka.server:type=LeaderReplication,name=recorded-bytes-total"] == size * len(seen)
        assert m["kafka.server:type=LeaderReplication,name=byte-rate"] > 0
        assert cluster.broker(1).leader_quota.recorded_count == 0  # broker 1 leads nothing


# -- throttled replication rates ---------------------------------------------------------------

async def _fill(cluster: Cluster, topic: str, partition: int, leader: int, total: int) -> None:
    conn = await connect(cluster, leader)
    b = batch([b"v" * 1000] * 30)  # ~30 KB batches, under the 64 KiB fetch cap
    for _ in range(total // len(b) + 1):
        assert (await produce(conn, topic, b, partition=partition, acks=1)).error_code == 0
    await conn.aclose()


async def _sample_sizes(cluster: Cluster, broker_id: int, topic: str, out: list[tuple[float, int]],
                        until: int) -> None:
    """Sample (time, log size) every 20 ms until the log holds ``until`` bytes (or the task is cancelled)."""
    def sample() -> bool:
        size = log_of(cluster, broker_id, topic).size_in_bytes
        out.append((time.monotonic(), size))
        return size >= until

    await wait_until(sample, 120, f"{until} bytes on broker {broker_id}", interval=0.02)


def _bytes_at(samples: list[tuple[float, int]], t: float) -> float:
    """Log size at time t, interpolated between samples."""
    for (t0, s0), (t1, s1) in zip(samples, samples[1:]):
        if t0 <= t <= t1:
            return s0 + (s1 - s0) * ((t - t0) / (t1 - t0) if t1 > t0 else 0)
    raise AssertionError(f"no sample around {t}")


async def _measure_catch_up(cluster: Cluster, follower: int, topic: str, target: int,
                            fast_topic: str | None = None) -> tuple[float, float | None]:
    """Start the follower, wait for one window of warm-up, then measure its rate over one period
    (11 s); returns (bytes/s, seconds the unthrottled topic took to catch up)."""
    samples: list[tuple[float, int]] = []
    fast_done: list[float] = []
    started = time.monotonic()
    await cluster.start_broker(follower)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_sample_sizes, cluster, follower, topic, samples, target)
        if fast_topic is not None:
            leader_log = log_of(cluster, 0, fast_topic)

            async def watch_fast() -> None:
                await wait_until(lambda: log_of(cluster, follower, fast_topic).log_end_offset
                                 == leader_log.log_end_offset, timeout=20, what="unthrottled topic")
                fast_done.append(time.monotonic() - started)
            nursery.start_soon(watch_fast)
        await wait_until(lambda: samples and samples[-1][1] > 0, 10, "the first replicated bytes")
        t0 = next(t for t, s in samples if s > 0)
        # The measured period is [t0 + 1, t0 + 12]: wait for a sample past its end.
        await wait_until(lambda: samples[-1][0] >= t0 + 12.2, 30, "samples over the whole period")
        nursery.cancel_scope.cancel()
    got = _bytes_at(samples, t0 + 12) - _bytes_at(samples, t0 + 1)
    return got / 11, (fast_done[0] if fast_done else None)


@pytest.mark.slow
async def test_leader_quota_holds_a_catching_up_follower_to_the_rate(tmp_path: Path):
    """Leader quota 1 MB/s, topic `slow` throttled on the leader side (`*`); the follower was
    down while ~14 MB went in, so it is out of the ISR and catches up at the quota.  An
    unthrottled topic replicated by the same fetcher catches up at full speed meanwhile."""
    async with serve_cluster(2, data_dir=tmp_path, replica_fetch_max_bytes=64 * KIB,
                             leader_replication_throttled_rate=MB, **FAST) as cluster:
        b0 = cluster.broker(0)
        b0.create_topic("slow", assignments={0: [0, 1]},
                        configs={"leader.replication.throttled.replicas": "*"})
        b0.create_topic("fast", assignments={0: [0, 1]})
        await cluster.stop_broker(1)
        await _fill(cluster, "slow", 0, 0, 14 * MB)
        await _fill(cluster, "fast", 0, 0, 4 * MB)
        assert b0.leader_quota.throttled_partition_count() == 1  # `slow` only
        rate, fast_s = await _measure_catch_up(cluster, 1, "slow", 14 * MB, fast_topic="fast")
        print(f"\nleader quota {MB / 1e6:.1f} MB/s: follower replicated {rate / 1e6:.3f} MB/s over one "
              f"11 s period; unthrottled 4 MB topic caught up in {fast_s:.2f} s")
        assert abs(rate / MB - 1) <= 0.10
        assert fast_s is not None and fast_s < 3.0  # at the quota it would take 4 s
        assert b0.leader_quota.recorded_bytes >= 11 * MB
        assert b0.leader_quota.rate() == pytest.approx(MB, rel=0.15)
        # Throttled replication still converges.
        await wait_until(lambda: log_of(cluster, 1, "slow").log_end_offset
                         == log_of(cluster, 0, "slow").log_end_offset, timeout=10, what="convergence")


@pytest.mark.slow
async def test_follower_quota_holds_its_fetches_to_the_rate(tmp_path: Path):
    """Follower quota 1 MB/s on broker 1 (set at run time), `follower.replication.throttled.replicas`
    = 0:1: the follower leaves the partition out of its fetches while its quota is exceeded."""
    async with serve_cluster(2, data_dir=tmp_path, replica_fetch_max_bytes=64 * KIB, **FAST) as cluster:
        b0 = cluster.broker(0)
        b0.create_topic("slow", assignments={0: [0, 1]},
                        configs={"follower.replication.throttled.replicas": "0:1"})
        conn = await connect(cluster, 0)
        r = await _incremental(conn, 1, BROKER, "1", [("follower.replication.throttled.rate", SET, str(MB))])
        assert r.error_code == 0
        await conn.aclose()
        await cluster.stop_broker(1)
        await _fill(cluster, "slow", 0, 0, 14 * MB)
        rate, _ = await _measure_catch_up(cluster, 1, "slow", 14 * MB)
        b1 = cluster.broker(1)
        skips = sum(f.throttled_skips for f in b1.fetcher_manager.fetchers.values())
        print(f"\nfollower quota {MB / 1e6:.1f} MB/s: replicated {rate / 1e6:.3f} MB/s over one 11 s period "
              f"({skips} fetches left the partition out)")
        assert abs(rate / MB - 1) <= 0.10
        assert skips > 0 and b1.follower_quota.recorded_bytes >= 11 * MB
        assert b1.follower_quota.throttled_partition_count() == 1
        assert b0.leader_quota.recorded_bytes == 18 * b0.leader_quota.recorded_count  # nothing leader-throttled
        await wait_until(lambda: log_of(cluster, 1, "slow").log_end_offset
                         == log_of(cluster, 0, "slow").log_end_offset, timeout=10, what="convergence")


async def test_leader_quota_records_the_throttled_partitions_of_each_response():
    """A throttled partition in the response counts with its records, as Kafka's FetchResponse.sizeOf
    of the selection: at v11, 18 + topic (name 2 + 1, partition array 4) + partition (index 4,
    error 2, high watermark 8, last stable offset 8, log start 8, aborted null 4, preferred read
    replica 4, records length 4) = 67 bytes + the records.  Unlimited rate: nothing is held back."""
    async with serve_cluster(2, replica_fetch_request_version=11, **FAST) as cluster:
        cluster.broker(0).create_topic("t", 1, 2, configs={"leader.replication.throttled.replicas": "*"})
        cluster.broker(0).create_topic("u", 1, 2)  # not throttled: never counted
        leader = cluster.broker(0)
        seen: list[int] = []
        leader.leader_quota.observers.append(seen.append)
        conn = await connect(cluster, 0)
        b = batch([b"x" * 500])
        assert (await produce(conn, "u", b, acks=-1)).error_code == 0
        assert (await produce(conn, "t", b, acks=-1)).error_code == 0
        await wait_until(lambda: 67 + len(b) in seen, what="the fetch that carried the batch")
        await conn.aclose()
        assert set(seen) <= {18, 67, 67 + len(b)}  # 67: the HW moving, no records
        assert log_of(cluster, 1, "t").log_end_offset == 1


@pytest.mark.parametrize("version,first,rest,phantom", [(8, 12043, 33, 18), (6, 12031, 12031, 12)])
async def test_seed_experiment_1000_partitions_rf2_request_sizes_and_phantom(version, first, rest, phantom):
    """The seed experiment end to end: two brokers, topic `test` with 1000 partitions and RF 2, no
    data.  Each follower fetches its 500 partitions from the other broker: the first request body
    is 12043 bytes at v8 (17 + session 8 + topics 14 + 500 x 24 + forgotten 4), the following
    incremental ones 33 (nothing changed); pinned to v6 (no sessions) every body is 12031.  Each
    of those fetches records the empty throttled-partition response into the leader quota."""
    async with serve_cluster(2, replica_fetch_request_version=version, **FAST) as cluster:
        seen: dict[int, list[tuple[int, int | None]]] = {0: [], 1: []}
        for bid in (0, 1):
            def observe(ctx, frame, response, bid=bid) -> None:
                if ctx.api_key == K.FETCH:
                    seen[bid].append((ctx.body_size, ctx.fetch.leader_quota_recorded if ctx.fetch else None))
            cluster.broker(bid).observe(ResponseObserver(observe))
        cluster.broker(0).create_topic("test", 1000, 2)
        await wait_until(lambda: all(len(s) >= 4 for s in seen.values()), timeout=10, what="fetches")
        for bid in (0, 1):
            sizes = [s for s, _ in seen[bid]]
            assert sizes[0] == first and set(sizes[1:]) == {rest}, sizes[:5]
            assert {r for _, r in seen[bid]} == {phantom}
            q = cluster.broker(bid).leader_quota
            assert q.recorded_bytes == phantom * q.recorded_count and q.recorded_count >= len(seen[bid])


class SteppingTimer:
    """Handler time that does not depend on the machine: every reading is 0.25 ms after the last, so each
    request (or consumer fetch) is charged exactly 0.25 ms of handler time."""

    def __init__(self) -> None:
        self.ns = 0

    def task_ns(self) -> int:
        self.ns += 250_000
        return self.ns


async def test_follower_fetches_exempt_from_request_quota():
    """A tiny request quota for every client never throttles replica fetchers (Kafka answers them with
    sendResponseExemptThrottle), while a consumer's fetches under the same quota are throttled.

    The handler time is injected (0.25 ms a request): 0.01% of the 10 s quota window is 1 ms, so the
    consumer's 5th fetch is throttled on any machine, and followers, charged the same, never are."""
    async with serve_cluster(2, client_quotas=["client-id=<default>:request_percentage=0.01"],
                             timer=SteppingTimer(), **FAST) as cluster:
        throttles: dict[str, list[int]] = {"follower": [], "consumer": []}

        def observe(ctx, frame, response) -> None:
            if ctx.api_key == ApiKey.FETCH:
                kind = "follower" if ctx.fetch is not None and ctx.client_id.startswith("broker-") \
                    else "consumer"
                throttles[kind].append(ctx.throttle_time_ms)

        for bid in (0, 1):
            cluster.broker(bid).observe(ResponseObserver(observe))
        cluster.broker(0).create_topic("t", 2, 2)
        conn = await connect(cluster, 0)
        for _ in range(30):
            await conn.request(ApiKey.FETCH, 11, {
                "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
                "session_id": 0, "session_epoch": -1, "topics": [], "forgotten_topics_data": [], "rack_id": ""})
            if any(throttles["consumer"]):
                break
        await wait_until(lambda: len(throttles["follower"]) >= 20, timeout=10, what="follower fetches")
        await conn.aclose()
        assert set(throttles["follower"]) == {0}
        assert any(throttles["consumer"])
