"""The traffic and latency jobs on a capture made by real clients, checked against the broker's and the
clients' own counters (see traffic_helpers for the two things a client's statistics never show)."""

from __future__ import annotations

from collections.abc import Iterator
from itertools import pairwise
from typing import Any

import pytest
from traffic_helpers import (
    BOOTSTRAP_APIS,
    CONSUMER_ID,
    PRODUCER_ID,
    TOPICS,
    CaptureRun,
    capture_records,
    client_accounting,
    make_client_capture,
)

from minikafka.analysis import AnalysisOptions, load_tables
from minikafka.analysis.jobs import latency, traffic
from minikafka.analysis.jobs.traffic import time_bucket, with_client

pytestmark = pytest.mark.clients


@pytest.fixture(scope="module")
def client_run(tmp_path_factory: pytest.TempPathFactory) -> CaptureRun:
    pytest.importorskip("confluent_kafka")
    return make_client_capture(tmp_path_factory.mktemp("traffic"))


@pytest.fixture(scope="module")
def results(spark: Any, client_run: CaptureRun) -> Iterator[dict[str, Any]]:
    tables = load_tables(spark, str(client_run.path)).cache()
    opts = AnalysisOptions(bucket_seconds=0.5)
    t = traffic.run(tables, opts)
    lat = latency.run(tables, opts)
    out = {name: t[name].toPandas() for name in ("summary", "by_client", "connections", "by_topic")}
    out.update({f"latency_{name}": lat[name].toPandas() for name in ("by_api", "by_client", "by_api_time", "fetch")})
    out["requests"] = with_client(tables.requests).withColumn(
        "bucket_start", time_bucket("receive_ns", opts.bucket_seconds)).toPandas()
    yield out
    tables.unpersist()


def test_per_api_totals_equal_broker_counters(client_run: CaptureRun, results: dict[str, Any]) -> None:
    s = results["summary"]
    got = {int(r.api_key): [int(r.requests), int(r.request_bytes), int(r.response_bytes)] for r in s.itertuples()}
    assert got == client_run.broker_stats
    assert (s["responses"] == s["requests"]).all() and (s["decode_errors"] == 0).all()


def test_per_client_totals_equal_client_statistics(client_run: CaptureRun, results: dict[str, Any]) -> None:
    """Requests and bytes per client equal librdkafka's tx/txbytes/rx/rxbytes (which count the 4-byte size
    prefix, as the capture does), per connection and in total, once the bootstrap connection (its stats
    entry is gone) and what close() sent (after the last stats) are taken out, exactly."""
    records = capture_records(client_run.path)
    by_client = results["by_client"].groupby("client_id")[
        ["requests", "request_bytes", "responses", "response_bytes"]].sum()
    assert set(by_client.index) == {PRODUCER_ID, CONSUMER_ID}
    for cid, run in client_run.clients.items():
        acc = client_accounting(run, results["connections"], records)
        boot = acc["bootstrap"]
        if boot is not None:  # librdkafka >= 2.10: the "/bootstrap" entry is gone from the final stats
            apis = set(boot["apis"].split(","))
            assert {"ApiVersions", "Metadata"} <= apis <= BOOTSTRAP_APIS, (cid, apis)
        # Whatever the capture has after the final snapshot, close() sent it.
        assert all(r.receive_ns >= run.close_ns for r in acc["late"]), (cid, acc["late"])
        # Every stats entry is one connection of the capture, to the byte.
        assert sorted(acc["per_connection"].values()) == sorted(run.entries().values()), cid
        late = acc["late"]
        boot_tot = (0, 0, 0, 0) if boot is None else (
            int(boot["requests"]), int(boot["request_bytes"]), int(boot["responses"]), int(boot["response_bytes"]))
        row = by_client.loc[cid]
        expected = (int(row.requests) - boot_tot[0] - len(late),
                    int(row.request_bytes) - boot_tot[1] - sum(len(r.request) + 4 for r in late),
                    int(row.responses) - boot_tot[2] - sum(r.response is not None for r in late),
                    int(row.response_bytes) - boot_tot[3]
                    - sum(len(r.response) + 4 for r in late if r.response is not None))
        assert expected == run.totals(), cid
        assert acc["by_api"] == run.requests_by_api(), cid


def test_records_by_topic(client_run: CaptureRun, results: dict[str, Any]) -> None:
    t = results["by_topic"].set_index("topic")
    assert set(t.index) == set(TOPICS)
    assert int(t["produce_records"].sum()) == client_run.produced == client_run.consumed
    assert int(t["fetch_records"].sum()) == client_run.produced
    assert (t["produce_record_bytes"] == t["fetch_record_bytes"]).all()


def test_latency_percentiles(results: dict[str, Any]) -> None:
    b = results["latency_by_api"]
    cols = ["p50_ms", "p90_ms", "p99_ms", "p99_9_ms", "max_ms"]
    for row in b[cols].itertuples(index=False):
        assert all(x <= y for x, y in pairwise(row)), row
    assert (b["p50_ms"] >= 0).all()
    everything = b[b["api_name"] == latency.ALL]
    assert int(everything["requests"].iloc[0]) == int(results["summary"]["responses"].sum())
    per_api = b[(b["api_name"] != latency.ALL) & b["api_version"].isna()].set_index("api_name")["requests"]
    assert per_api.to_dict() == results["summary"].set_index("api_name")["responses"].to_dict()


def test_latency_percentiles_are_exact_nearest_ranks(results: dict[str, Any]) -> None:
    """Every group of the capture is smaller than the percentiles' accuracy: each percentile of each table is
    the exact nearest-rank latency of its group (per api and version, api, client, bucket; "ALL" included)."""
    import math

    import numpy as np

    r = results["requests"]
    r = r[r["has_response"].fillna(False).astype(bool) & r["latency_ms"].notna()]
    assert len(r) < latency.ACCURACY

    def expected(group: Any) -> list[float]:
        x = np.sort(group["latency_ms"].to_numpy())
        return [float(x[max(0, math.ceil(q * len(x)) - 1)]) for _, q in latency.PERCENTILES]

    cols = [f"{name}_ms" for name, _ in latency.PERCENTILES]
    checked = 0
    for table, key in (("by_api", "api_version"), ("by_client", "client_id"), ("by_api_time", "bucket_start")):
        for row in results[f"latency_{table}"].itertuples(index=False):
            sel = np.ones(len(r), dtype=bool)
            if row.api_name != latency.ALL:
                sel &= (r["api_name"] == row.api_name).to_numpy()
            value = getattr(row, key)
            if not (table == "by_api" and (value is None or value != value)):  # a per-api row: every version
                sel &= (r[key] == value).to_numpy()
            group = r[sel]
            assert len(group) == row.requests, (table, row)
            assert [getattr(row, c) for c in cols] == pytest.approx(expected(group), rel=1e-12), (table, row)
            checked += 1
    assert checked > 10


def test_fetch_long_polls_near_max_wait(client_run: CaptureRun, results: dict[str, Any]) -> None:
    f = results["latency_fetch"]
    row = f[(f["role"] == "consumer") & (f["client_id"] == CONSUMER_ID)].iloc[0]
    wait = client_run.max_wait_ms
    assert int(row.max_wait_ms) == wait
    assert row.at_max_wait >= 3  # the consumer long-polled ~1 s with nothing left
    assert row.fraction_at_max_wait == pytest.approx(row.at_max_wait / row.requests)
    # Long polls answered at (or, on a loaded machine, after) their max wait: no upper bound, which would
    # measure the machine's speed rather than the analysis.
    assert 0.95 * wait <= row.p50_ms_at_max_wait <= row.max_ms_at_max_wait
    assert row.requests_early >= 1 and row.max_ms_early < wait  # the fetches that found records
    assert row.p50_ms <= row.p99_ms <= row.max_ms
