"""The replay report's per-api throughput and latency percentiles (exact nearest-rank)."""

from __future__ import annotations

from minikafka.capture.replay.report import ApiStats, ReplayReport, percentiles
from minikafka.protocol.api import ApiKey as K


def test_nearest_rank_percentiles() -> None:
    values = [float(v) for v in range(1000, 0, -1)]  # 1..1000, unsorted
    p = percentiles(values, {"p50": 0.5, "p90": 0.9, "p99": 0.99, "p99_9": 0.999, "max": 1.0})
    assert p == {"p50": 500.0, "p90": 900.0, "p99": 990.0, "p99_9": 999.0, "max": 1000.0}
    assert percentiles([], {"p50": 0.5}) == {"p50": None}
    assert percentiles([7.0], {"p50": 0.5, "max": 1.0}) == {"p50": 7.0, "max": 7.0}


def _report() -> ReplayReport:
    report = ReplayReport("127.0.0.1:9092", None, duration_s=2.0)
    produce = report.api(K.PRODUCE)
    produce.sent = produce.received = produce.equal = 1000
    produce.replayed_latency_ms = [v / 10 for v in range(1, 1001)]
    produce.captured_latency_ms = [1.0] * 1000
    fetch = report.api(K.FETCH)
    fetch.sent = fetch.received = fetch.equal = 10
    fetch.replayed_latency_ms = [5.0] * 10
    return report


def test_per_api_throughput_and_percentiles_in_to_dict() -> None:
    d = _report().to_dict()["per_api"]
    assert d["Produce"]["requests_per_s"] == 500.0 and d["Fetch"]["requests_per_s"] == 5.0
    rep = d["Produce"]["latency"]["replayed"]
    assert (rep["p50_ms"], rep["p90_ms"], rep["p99_ms"], rep["p99_9_ms"], rep["max_ms"]) == (50.0, 90.0, 99.0, 99.9,
                                                                                            100.0)
    assert rep["count"] == 1000
    assert d["Produce"]["latency"]["captured"] == {"p50_ms": 1.0, "p99_ms": 1.0, "count": 1000}
    assert d["Fetch"]["latency"]["captured"]["p50_ms"] is None


def test_summary_lists_rate_and_percentiles() -> None:
    summary = _report().summary()
    head = next(line for line in summary.splitlines() if line.startswith("api "))
    for column in ("req/s", "p50", "p90", "p99", "p99.9", "max", "captured p50"):
        assert column in head
    produce = next(line for line in summary.splitlines() if line.startswith("Produce "))
    assert produce.split()[7:] == ["0", "500", "|", "50.0", "90.0", "99.0", "99.9", "100.0", "|", "1.0", "1.0"]


def test_merge_keeps_every_latency() -> None:
    a, b = _report(), _report()
    a.merge(b)
    st: ApiStats = a.api(K.PRODUCE)
    assert st.sent == 2000 and len(st.replayed_latency_ms) == 2000
    assert a.to_dict()["per_api"]["Produce"]["requests_per_s"] == 1000.0  # same 2 s: the tasks ran side by side
