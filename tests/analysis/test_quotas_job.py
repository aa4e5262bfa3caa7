"""Quota what-if replay (SPEC section 4/8) over a capture made with real confluent-kafka producers.

The capture (see :func:`analysis_helpers.quota_capture`): "fast" produces ~3 MB in ~1.5 s, "slow" five
small values, both unthrottled; then "capped" produces ~3 MB against the broker's real produce quota of
1 MB/s.  Quota windows are 2 x 1 s (broker and what-if): with Kafka's default 11 windows the Rate is
averaged over at least 10 s, so 3 MB in 2 s (0.3 MB/s over 10 s) would not be throttled at 1 MB/s.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from analysis_helpers import cached_tables, CAPPED_QUOTA, MB, QUOTA_WINDOWS, decoded, quota_capture

from minikafka.analysis.jobs import AnalysisOptions, quotas
from minikafka.common.clock import ManualClock
from minikafka.metrics import (
    MetricConfig,
    MetricName,
    Metrics,
    Quota,
    QuotaViolationError,
    Rate,
)

pytestmark = [pytest.mark.slow, pytest.mark.clients]

WHATIF = AnalysisOptions(produce_quota={"*": MB}, quota_window_num=QUOTA_WINDOWS["quota_window_num"],
                         quota_window_size_seconds=QUOTA_WINDOWS["quota_window_size_seconds"])


@pytest.fixture(scope="module")
def capture(tmp_path_factory) -> Path:
    cap = tmp_path_factory.mktemp("quotas") / "cap"
    delivered = quota_capture(cap)
    assert delivered == {"fast": 3000, "slow": 5, "capped": 3000}
    return cap


@pytest.fixture(scope="module")
def tables(spark, capture):
    yield from cached_tables(spark, capture)


@pytest.fixture(scope="module")
def whatif(tables) -> dict:
    res = quotas.run(tables, WHATIF)
    return {k: v.toPandas() for k, v in res.items()}


def produce_rows(capture: Path, client: str) -> list[tuple[int, int]]:
    """(time the broker answered in ms, request size) of a client's Produce requests, from the capture
    decoded in plain Python.  A throttled response's captured send time comes after its connection's
    mute, so its throttle is taken off (as the job documents)."""
    req, _ = decoded(capture)
    rows = []
    for r in req[(req.client_id == client) & (req.api_key == 0)].itertuples():
        thr = int(r.throttle_time_ms or 0) * 1_000_000
        done = r.send_ns - thr if r.send_ns - r.receive_ns >= thr else r.send_ns
        rows.append((done // 1_000_000, r.receive_ns // 1_000_000, int(r.request_bytes) - 4))
    return [(t, n) for t, _recv, n in sorted(rows)]


def kafka_throttles(rows: list[tuple[int, int]], quota: float, samples: int, window_s: int) -> list[int]:
    """Kafka's produce throttle per request, driving minikafka.metrics directly: a Sensor with a Rate bound
    by the quota; on violation round((rate - quota) / quota * windowSize) ms (QuotaUtils.throttleTime)."""
    cfg = MetricConfig(samples=samples, time_window_ms=window_s * 1000, quota=Quota.upper_bound(quota))
    sensor = Metrics(clock=ManualClock(0)).sensor("produce", cfg)
    sensor.add(MetricName.of("byte-rate", "Produce"), Rate(), cfg)
    out = []
    for t, nbytes in rows:
        try:
            sensor.record(nbytes, t)
            out.append(0)
        except QuotaViolationError as e:
            window = e.metric.measurable.window_size(e.metric.config, t)
            out.append(math.floor((e.value - e.bound) / e.bound * window + 0.5))
    return out


def test_whatif_throttles_fast_producer_as_kafka_would(whatif, capture) -> None:
    clients = whatif["quota_clients"].set_index("client_id")
    assert {"fast", "slow", "capped"} <= set(clients.index)
    fast, slow = clients.loc["fast"], clients.loc["slow"]
    expected = kafka_throttles(produce_rows(capture, "fast"), MB, 2, 1)
    print(f"\nfast: {fast.produce_bytes} bytes in {fast.duration_s:.2f} s, what-if throttle "
          f"{fast.whatif_throttle_ms} ms over {fast.whatif_throttled_requests} requests (max "
          f"{fast.whatif_max_throttle_ms} ms); independent replay: {sum(expected)} ms, per request {expected}")
    assert 3_000_000 < fast.produce_bytes < 3_100_000 and fast.fetch_bytes == 0
    assert fast.whatif_throttle_ms > 0
    assert fast.whatif_throttle_ms == sum(expected)
    assert fast.whatif_throttled_requests == sum(1 for x in expected if x > 0)
    assert fast.whatif_max_throttle_ms == max(expected)
    assert fast.whatif_produce_throttle_ms == fast.whatif_throttle_ms and fast.whatif_request_throttle_ms == 0
    # The formula's order of magnitude: ~1 MB over the quota per second, over 1-2 s windows -> about a
    # second of throttle per violating request, never more than (3 MB / 1 MB/s) x 2 s windows.
    assert 100 <= fast.whatif_max_throttle_ms <= 6000
    # It produced ~1.5 MB/s open-loop, so it would have been muted a good part of the time and some of
    # its requests would have arrived while muted.
    assert 0 < fast.whatif_muted_ms <= fast.duration_s * 1000 + fast.whatif_max_throttle_ms
    assert fast.delayed_requests > 0 and 0 < fast.delayed_bytes < fast.produce_bytes
    assert fast.captured_throttle_ms == 0  # no broker quota for "fast"
    assert slow.whatif_throttle_ms == 0 and slow.whatif_throttled_requests == 0 and slow.delayed_bytes == 0
    assert 0 < slow.produce_bytes < 5000
    assert fast.produce_quota == MB and slow.produce_quota == MB

    series = whatif["quota_series"]
    fs = series[series.client_id == "fast"]
    assert fs.bytes.sum() == fast.bytes and fs.whatif_throttle_ms.sum() == fast.whatif_throttle_ms
    assert fs.delayed_bytes.sum() == fast.delayed_bytes and len(fs) >= 2
    assert series[series.client_id == "slow"].whatif_throttle_ms.sum() == 0


def test_same_quota_replayed_matches_captured_throttle(whatif, capture) -> None:
    """The broker really throttled "capped" at 1 MB/s; replaying the same quota gives the same throttles, up to
    where the broker's clock read each request against its sample windows.

    Closed loop vs open loop does not matter here: the capture already holds the arrival times the
    throttled client produced (it backed off and was muted), and the replay records the same request
    sizes at the times the broker answered, so the sensor goes through the same states.  What differs
    is only the millisecond at which the broker read its clock vs the capture's timestamps (and, on a
    busy machine, how long the response took to leave), which can move a request across a sample window's
    boundary: one throttled request more or fewer, or one request's throttle a window longer or shorter.
    Measured: ratios 0.985-1.002 (e.g. 2988 ms what-if vs 2992 ms captured over 2 throttled requests); in CI,
    with a core kept busy, 2000 ms against 2989 ms, and 2000 ms ([999, 1001]) against 2991 ms (max 1997) over
    the same 2 requests.  Asserted: the what-if is Kafka's formula over the capture (exactly, as for "fast");
    against the broker, the same number of throttled requests give or take one, and totals apart by at most one
    request's throttle."""
    capped = whatif["quota_clients"].set_index("client_id").loc["capped"]
    expected = kafka_throttles(produce_rows(capture, "capped"), CAPPED_QUOTA, 2, 1)
    print(f"\ncapped: captured throttle {capped.captured_throttle_ms} ms over {capped.captured_throttled_requests} "
          f"requests (max {capped.captured_max_throttle_ms}); what-if (same quota) {capped.whatif_throttle_ms} ms "
          f"over {capped.whatif_throttled_requests} requests (max {capped.whatif_max_throttle_ms}), ratio "
          f"{capped.whatif_vs_captured:.3f}; independent replay per request {[x for x in expected if x]}")
    assert capped.whatif_throttle_ms == sum(expected)
    assert capped.whatif_throttled_requests == sum(1 for x in expected if x > 0)
    assert capped.captured_throttle_ms > 0 and capped.captured_throttled_requests >= 1
    assert abs(capped.whatif_throttled_requests - capped.captured_throttled_requests) <= 1
    # One request's throttle here is at most about the whole quota window (2 x 1 s of samples): a broker that
    # throttled this client twice as long as Kafka's formula (some 3 s more) still fails.
    whole_window_ms = QUOTA_WINDOWS["quota_window_num"] * QUOTA_WINDOWS["quota_window_size_seconds"] * 1000
    one_request = max(whole_window_ms, capped.whatif_max_throttle_ms)
    assert abs(capped.whatif_throttle_ms - capped.captured_throttle_ms) <= 1.2 * one_request + 20
    assert capped.produce_quota == CAPPED_QUOTA


def test_huge_quota_throttles_nobody(tables) -> None:
    opts = AnalysisOptions(produce_quota={"*": 1e12}, fetch_quota={"*": 1e12}, request_quota={"*": 1e9},
                           **QUOTA_WINDOWS)
    clients = quotas.run(tables, opts)["quota_clients"].toPandas().set_index("client_id")
    assert {"fast", "slow", "capped"} <= set(clients.index)
    assert (clients.whatif_throttle_ms == 0).all() and (clients.whatif_throttled_requests == 0).all()
    assert (clients.delayed_bytes == 0).all() and (clients.whatif_muted_ms == 0).all()
    assert clients.loc["capped", "captured_throttle_ms"] > 0  # what the broker did is still shown


def test_request_quota_throttle_is_bounded_by_one_window(capture) -> None:
    """Request-percentage quotas (latency as handler time): Kafka bounds their throttle by one window."""
    import pandas as pd

    req, _ = decoded(capture)
    r = req[req.client_id == "slow"]
    rows = pd.DataFrame({
        "broker_id": r.broker_id, "client_id": r.client_id, "principal": r.principal,
        "connection_id": r.connection_id, "api_key": r.api_key, "api_name": r.api_name,
        "receive_ms": r.receive_ns // 1_000_000, "record_ms": r.send_ns // 1_000_000,
        "produce_bytes": (r.request_bytes - 4).where(r.api_key == 0, 0), "fetch_bytes": 0,
        "request_ns": (r.send_ns - r.receive_ns).astype(float), "has_response": r.has_response,
        "captured_throttle_ms": r.throttle_time_ms.fillna(0)})
    settings = quotas.settings_of(AnalysisOptions(request_quota={"slow": 0.0001}, **QUOTA_WINDOWS))
    out = quotas.replay_client(rows, settings)
    assert len(out) == len(r) and (out.request_throttle_ms > 0).any()
    assert out.request_throttle_ms.max() <= 1000 and (out.produce_throttle_ms == 0).all()
    assert (out.throttle_ms == out.request_throttle_ms).all()


def test_replay_without_quotas_is_the_replay_that_throttles_nobody(capture) -> None:
    """With no what-if quota the replay skips the broker's managers (nothing can be throttled): its rows are
    those of the request-by-request replay under quotas too large to throttle anybody, bounds aside."""
    import pandas as pd

    req, _ = decoded(capture)
    rows = pd.DataFrame({
        "broker_id": req.broker_id, "client_id": req.client_id, "principal": req.principal,
        "connection_id": req.connection_id, "api_key": req.api_key, "api_name": req.api_name,
        "receive_ms": req.receive_ns // 1_000_000, "record_ms": req.send_ns.fillna(req.receive_ns) // 1_000_000,
        "produce_bytes": (req.request_bytes - 4).where(req.api_key == 0, 0),
        "fetch_bytes": (req.response_body_bytes.fillna(0) + 4).where(req.api_key == 1, 0),
        "request_ns": (req.send_ns - req.receive_ns).astype(float), "has_response": req.has_response,
        "captured_throttle_ms": req.throttle_time_ms.fillna(0)})
    plain = quotas.replay_client(rows, quotas.settings_of(AnalysisOptions(**QUOTA_WINDOWS)))
    huge = quotas.replay_client(rows, quotas.settings_of(AnalysisOptions(
        produce_quota={"*": 1e15}, fetch_quota={"*": 1e15}, request_quota={"*": 1e12}, **QUOTA_WINDOWS)))
    assert len(plain) == len(rows) > 0 and (huge.throttle_ms == 0).all()
    assert plain[["produce_quota", "fetch_quota", "request_quota"]].isna().all().all()
    assert (huge.produce_quota == 1e15).all()
    bounds = ["produce_quota", "fetch_quota", "request_quota"]
    pd.testing.assert_frame_equal(plain.drop(columns=bounds), huge.drop(columns=bounds))


@pytest.mark.parametrize("bucket_seconds", [1.0, 0.3])
def test_without_quotas_spark_sums_what_the_replay_tasks_sum(tables, monkeypatch, bucket_seconds) -> None:
    """With no what-if quota the job sums the traffic up in Spark, no Python task: both tables are those the
    replay tasks give (the tasks forced), principals mapped to quota users alike."""
    import functools

    import pandas as pd

    opts = AnalysisOptions(bucket_seconds=bucket_seconds, **QUOTA_WINDOWS)
    spark_sums = {k: v.toPandas() for k, v in quotas.run(tables, opts).items()}
    monkeypatch.setattr(quotas, "replay", functools.partial(quotas.replay, in_tasks=True))
    tasks = {k: v.toPandas() for k, v in quotas.run(tables, opts).items()}
    assert len(spark_sums["quota_clients"]) >= 3 and len(spark_sums["quota_series"]) > 3
    assert spark_sums["quota_clients"].captured_throttle_ms.sum() > 0
    for name, frame in tasks.items():
        pd.testing.assert_frame_equal(spark_sums[name], frame, obj=name)


def test_quota_users_in_spark_are_the_brokers(spark) -> None:
    """:func:`quotas._unthrottled` maps principals to quota users in Spark as the broker does."""
    import pandas as pd

    principals = ["User:alice", "User:", "ANONYMOUS", "", "User:CN=a,O=b:c", ":x", "plain", "Group:ops"]
    rows = spark.createDataFrame(pd.DataFrame({
        "broker_id": 0, "client_id": "c", "principal": principals, "receive_ms": 1000, "record_ms": 1001,
        "produce_bytes": 1, "fetch_bytes": 0, "captured_throttle_ms": 0}))
    got = {r.principal: r.user for r in quotas._unthrottled(rows, 1.0).where("kind = 'c'").collect()}
    assert got == {p: quotas.quota_user(p) for p in principals}


def test_task_buckets_are_sparks_time_buckets(spark) -> None:
    """A replay task puts each request in its time bucket in pandas (:func:`quotas.bucket_micros`): the same
    bucket Spark's ``time_bucket`` gives, whatever the bucket length (doubles floored alike)."""
    import random

    from pyspark.sql import functions as F

    from minikafka.analysis.jobs.traffic import time_bucket

    rng = random.Random(27)
    epoch_ms = 1_795_903_937_009
    values = [epoch_ms + rng.randrange(0, 10**8) for _ in range(400)] + [0, 1, 999, epoch_ms, 2**41 + 7]
    df = spark.createDataFrame([(v,) for v in values], "receive_ms bigint").withColumn(
        "receive_ns", F.col("receive_ms") * F.lit(1_000_000))
    for seconds in (1.0, 0.25, 3.0, 0.001, 7.3, 1e-7):
        got = df.select("receive_ms", F.unix_micros(time_bucket("receive_ns", seconds)).alias("us")).collect()
        spark_us = {r.receive_ms: r.us for r in got}
        ours = quotas.bucket_micros(values, seconds)
        assert [spark_us[v] for v in values] == ours.tolist(), seconds


def test_report(whatif) -> None:
    sections = quotas.report(whatif, WHATIF)
    assert len(sections) == 1
    s = sections[0]
    text = " ".join(s.text)
    assert "Open-loop" in text and "latency" in text and "1,000,000 bytes/s" in text
    _caption, table = s.tables[0]
    assert list(table.client_id[:1]) == ["fast"] and table.whatif_throttle_ms.iloc[0] > 0
    assert len(s.figures) == 3
    chart = s.figures[0][1]
    assert "fast" in chart.labels() and len(chart.series_named("fast").values) == len(chart.x)
    rate = s.figures[1][1]
    assert rate.y_label == "bytes/s" and not rate.empty
