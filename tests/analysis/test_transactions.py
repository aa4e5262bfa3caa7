"""Transactional traffic (KIP-98) in the analysis tables and jobs, from a synthetic capture.

The capture (:mod:`txn_helpers`): transactional and plain Produce batches, commit and abort markers,
read_committed fetches answered up to a last stable offset below the high watermark (with an aborted
transaction listed), read_uncommitted fetches and a follower fetch.  Every expected number is computed
from the helper's specs of the log and of each fetch.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest
from analysis_helpers import cached_tables, decoded
from txn_helpers import (
    FETCHES,
    LOG,
    PRODUCES,
    T0_NS,
    TOPIC,
    FetchSpec,
    batch_totals,
    expected_lag,
    txn_records,
    write_txn_capture,
)

from minikafka.analysis.decode import COLUMNS, RecordDecoder
from minikafka.analysis.jobs import AnalysisOptions, lag, replication, traffic

OPTS = AnalysisOptions(bucket_seconds=1.0)
TXN_COUNTS = ["control_bytes", "control_batch_count", "commit_markers", "abort_markers",
              "transactional_batch_count", "transactional_record_count"]
CONSUMERS = [s for s in FETCHES if s.replica_id < 0]


def _ns(spec: FetchSpec) -> int:
    return T0_NS + spec.t_ms * 1_000_000


@pytest.fixture(scope="module")
def capture(tmp_path_factory) -> Path:
    return write_txn_capture(tmp_path_factory.mktemp("txn") / "cap")


@pytest.fixture(scope="module")
def rows(capture):
    return decoded(capture)


@pytest.fixture(scope="module")
def tables(spark, capture):
    yield from cached_tables(spark, capture)


# -- the decoded tables (plain Python) ------------------------------------------------------------
def test_the_scenario_is_meaningful() -> None:
    """LSO < HW in some read_committed fetches, markers of both kinds, an aborted transaction listed, and a
    read_committed lag that differs from what the HW would give."""
    rc = [s for s in CONSUMERS if s.isolation_level == 1]
    assert any(s.last_stable_offset < s.high_watermark for s in rc)
    assert any(s.aborted for s in rc)
    assert {b.kind for b in LOG} == {"data", "commit", "abort"}
    hw_lag = [max(0, s.high_watermark - expected_lag(s)["position"]) for s in rc]
    assert [expected_lag(s)["lag"] for s in rc] != hw_lag


def test_partition_rows_count_control_batches_apart(rows) -> None:
    _req, parts = rows
    fetch = parts[parts.api_key == 1].sort_values("receive_ns")
    assert len(fetch) == len(FETCHES)
    for spec, row in zip(sorted(FETCHES, key=lambda s: s.t_ms), fetch.itertuples()):
        assert (row.client_id, row.receive_ns, row.fetch_offset) == (spec.client_id, _ns(spec), spec.fetch_offset)
        want = batch_totals(spec.returned)
        got = {k: getattr(row, k) for k in want}
        assert got == want, spec
        assert (row.high_watermark, row.last_stable_offset) == (spec.high_watermark, spec.last_stable_offset)
        assert row.aborted_transactions == len(spec.aborted or ())
        assert row.isolation_level == spec.isolation_level
        if spec.returned:  # offsets span data and control batches alike
            assert (row.base_offset, row.last_offset) == (spec.returned[0], max(b.last for b in LOG
                                                                                if b.base in spec.returned))
        else:
            assert row.base_offset is None or row.base_offset != row.base_offset  # None / NaN
    produce = parts[parts.api_key == 0].sort_values("receive_ns")
    assert len(produce) == len(PRODUCES)
    for (_t, batch), row in zip(PRODUCES, produce.itertuples()):
        want = batch_totals((batch.base,))
        assert {k: getattr(row, k) for k in want} == want
        assert (row.base_offset, row.last_offset) == (batch.base, batch.last)
        assert row.transactional_record_count == (batch.records if batch.transactional else 0)


def test_request_rows_sum_their_partitions(rows) -> None:
    req, parts = rows
    for r in req.itertuples():
        mine = parts[parts.correlation_id == r.correlation_id]
        assert r.record_bytes == mine.record_bytes.sum() and r.record_count == mine.record_count.sum()
        for col in TXN_COUNTS:
            assert getattr(r, col) == mine[col].sum(), col
    produce = req[req.api_key == 0].sort_values("receive_ns")
    assert list(produce.transactional_id.fillna("-")) == [b.transactional_id or "-" for _t, b in PRODUCES]
    assert produce.isolation_level.isna().all() and produce.aborted_transactions.isna().all()
    fetch = req[req.api_key == 1].sort_values("receive_ns")
    by_time = sorted(FETCHES, key=lambda s: s.t_ms)
    assert list(fetch.isolation_level) == [s.isolation_level for s in by_time]
    assert list(fetch.aborted_transactions) == [len(s.aborted or ()) for s in by_time]
    assert fetch.transactional_id.isna().all()
    # Control batches are not data: the record counts of every fetch are its data records only.
    assert fetch.record_count.sum() == sum(batch_totals(s.returned)["record_count"] for s in FETCHES)


def test_write_txn_markers_requests_count_the_markers_asked_for() -> None:
    from txn_helpers import _record

    markers = [{"producer_id": 1, "producer_epoch": 0, "transaction_result": True, "coordinator_epoch": 0,
                "topics": [{"name": "a", "partition_indexes": [0, 1, 2]}, {"name": "b", "partition_indexes": [0]}]},
               {"producer_id": 2, "producer_epoch": 0, "transaction_result": False, "coordinator_epoch": 0,
                "topics": [{"name": "a", "partition_indexes": [1]}]}]
    resp = {"markers": [{"producer_id": m["producer_id"], "topics": [
        {"name": t["name"], "partitions": [{"partition_index": i, "error_code": 0} for i in t["partition_indexes"]]}
        for t in m["topics"]]} for m in markers]}
    rec = _record(0, "0-coord", "coordinator", 27, 1, 5, {"markers": markers}, resp)
    names = [c for c, _ in COLUMNS["requests"]]
    (row,) = RecordDecoder("t").iter_rows([rec], "requests")
    r = dict(zip(names, row))
    assert r["decode_error"] is None and r["api_name"] == "WriteTxnMarkers"
    want_commit = sum(len(t["partition_indexes"]) for m in markers if m["transaction_result"] for t in m["topics"])
    want_abort = sum(len(t["partition_indexes"]) for m in markers if not m["transaction_result"] for t in m["topics"])
    assert (r["commit_markers"], r["abort_markers"]) == (want_commit, want_abort)


def test_list_offsets_requests_say_their_isolation_level() -> None:
    """A read_committed consumer asks ListOffsets (v2+) for the LSO with isolation_level 1."""
    from txn_helpers import _record

    names = [c for c, _ in COLUMNS["requests"]]
    rows = []
    for corr, (version, level) in enumerate([(1, None), (2, 0), (7, 1)]):
        req = {"replica_id": -1, "topics": [{"name": TOPIC, "partitions": [
            {"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1, "max_num_offsets": 1}]}]}
        if level is not None:
            req["isolation_level"] = level
        resp = {"throttle_time_ms": 0, "topics": [{"name": TOPIC, "partitions": [
            {"partition_index": 0, "error_code": 0, "old_style_offsets": [], "timestamp": -1, "offset": 9,
             "leader_epoch": -1}]}]}
        (row,) = RecordDecoder("t").iter_rows([_record(corr, "0-c", "c", 2, version, corr, req, resp)], "requests")
        rows.append(dict(zip(names, row)))
    assert all(r["decode_error"] is None for r in rows)
    assert [r["isolation_level"] for r in rows] == [0, 0, 1]  # before v2 there is no such field: read_uncommitted


def test_new_columns_are_appended() -> None:
    """The columns earlier versions had keep their positions; the transaction columns come after them (and
    before any appended later: the requests table's ``listener``, issue 15, then the group columns of
    issue 14 in both tables)."""
    req = [c for c, _ in COLUMNS["requests"]]
    parts = [c for c, _ in COLUMNS["partitions"]]
    txn = ["transactional_id", "isolation_level", *TXN_COUNTS, "aborted_transactions"]
    assert req.index("injected") == 38 and req[39:39 + len(txn)] == txn and req[39 + len(txn)] == "listener"
    assert req[40 + len(txn)] == "group_id"
    assert parts.index("batch_count") == 30 and parts[31:31 + len(TXN_COUNTS) + 3] == [
        *TXN_COUNTS, "aborted_transactions", "isolation_level", "group_id"]


# -- through Spark --------------------------------------------------------------------------------
def test_spark_tables_hold_the_decoded_rows(tables, capture) -> None:
    names = [c for c, _ in COLUMNS["partitions"]]
    want = sorted(tuple(row) for row in RecordDecoder("capture-0-0.mkcap").iter_rows(txn_records(), "partitions"))
    got = sorted(tuple(r[c] for c in names) for r in tables.partitions.collect())
    assert got == want


def _expected_series() -> dict[tuple[str, int], list[FetchSpec]]:
    by: dict[tuple[str, int], list[FetchSpec]] = defaultdict(list)
    for s in CONSUMERS:
        by[(s.client_id, s.t_ms // int(OPTS.bucket_seconds * 1000))].append(s)
    return {k: sorted(v, key=lambda s: s.t_ms) for k, v in by.items()}


@pytest.fixture(scope="module")
def lag_results(tables) -> dict:
    return {k: v.toPandas() for k, v in lag.run(tables, OPTS).items()}


def test_lag_uses_the_lso_under_read_committed(lag_results) -> None:
    lp = lag_results["lag_partitions"].set_index("client_id")
    assert set(lp.index) == {s.client_id for s in CONSUMERS}
    for client in lp.index:
        specs = sorted((s for s in CONSUMERS if s.client_id == client), key=lambda s: s.t_ms)
        exp = [expected_lag(s) for s in specs]
        p = lp.loc[client]
        print(f"\n{client}: {p.isolation_level}, lags {[e['lag'] for e in exp]}, final LSO {p.final_lso}, "
              f"final HW {p.final_high_watermark}")
        assert (p.topic, p.partition, p.isolation_level) == (TOPIC, 0, exp[0]["isolation_level"])
        assert p.fetches == len(specs)
        assert p.records == sum(batch_totals(s.returned)["record_count"] for s in specs)
        assert p.first_lag_before == exp[0]["lag_before"] and p.first_lag == exp[0]["lag"]
        assert p.max_lag == max(e["lag"] for e in exp) and p.final_lag == exp[-1]["lag"]
        assert p.avg_lag == pytest.approx(sum(e["lag"] for e in exp) / len(exp))
        assert p.final_position == exp[-1]["position"]
        assert (p.final_high_watermark, p.final_lso) == (specs[-1].high_watermark, specs[-1].last_stable_offset)
        assert p.control_batches == sum(batch_totals(s.returned)["control_batch_count"] for s in specs)
        assert p.commit_markers == sum(batch_totals(s.returned)["commit_markers"] for s in specs)
        assert p.abort_markers == sum(batch_totals(s.returned)["abort_markers"] for s in specs)
        assert p.aborted_transactions == sum(len(s.aborted or ()) for s in specs)
    assert lp.loc["rc-consumer", "isolation_level"] == "read_committed"
    assert lp.loc["ru-consumer", "isolation_level"] == "read_uncommitted"


def test_lag_series_per_bucket(lag_results) -> None:
    series = lag_results["lag_series"]
    expected = _expected_series()
    assert len(series) == len(expected)
    epoch = T0_NS // 10**9
    for r in series.itertuples():
        bucket = int(r.bucket_start.timestamp()) - epoch
        specs = expected[(r.client_id, bucket)]
        exp = [expected_lag(s) for s in specs]
        assert r.isolation_level == exp[-1]["isolation_level"]
        assert r.fetches == len(specs) and r.last_lag == exp[-1]["lag"] and r.max_lag == max(e["lag"] for e in exp)
        assert r.max_lag_before == max(e["lag_before"] for e in exp) and r.last_position == exp[-1]["position"]
        assert (r.last_high_watermark, r.last_lso) == (specs[-1].high_watermark, specs[-1].last_stable_offset)
        assert r.records == sum(batch_totals(s.returned)["record_count"] for s in specs)
        assert r.control_batches == sum(batch_totals(s.returned)["control_batch_count"] for s in specs)
        assert r.aborted_transactions == sum(len(s.aborted or ()) for s in specs)
    clients = lag_results["lag_clients"]
    for r in clients.itertuples():
        bucket = int(r.bucket_start.timestamp()) - epoch
        specs = expected[(r.client_id, bucket)]
        assert (r.partitions, r.fetches, r.total_lag) == (1, len(specs), expected_lag(specs[-1])["lag"])
        assert r.isolation_level == expected_lag(specs[-1])["isolation_level"]


def test_lag_tables_keep_their_columns_first(lag_results) -> None:
    assert list(lag_results["lag_series"].columns) == [
        "client_id", "topic", "partition", "bucket_start", "fetches", "records", "max_lag", "avg_lag", "last_lag",
        "max_lag_before", "last_high_watermark", "last_position",
        "isolation_level", "last_lso", "control_batches", "commit_markers", "abort_markers", "aborted_transactions"]
    assert list(lag_results["lag_clients"].columns) == [
        "client_id", "bucket_start", "partitions", "fetches", "records", "max_lag", "total_lag", "isolation_level"]
    assert list(lag_results["lag_partitions"].columns) == [
        "client_id", "topic", "partition", "fetches", "records", "first_lag_before", "first_lag", "max_lag",
        "avg_lag", "final_lag", "final_high_watermark", "final_position", "first_ts", "last_ts",
        "isolation_level", "final_lso", "control_batches", "commit_markers", "abort_markers", "aborted_transactions"]


def test_lag_report_names_the_isolation_level(lag_results) -> None:
    (s,) = lag.report(lag_results, OPTS)
    text = " ".join(s.text)
    assert "last stable offset" in text and "1 of 2 client partition(s) fetched read_committed" in text
    labels = set(s.figures[0][1].labels())
    assert labels == {s.client_id for s in CONSUMERS}


# -- traffic and replication ----------------------------------------------------------------------
def test_traffic_counts_transactional_traffic(tables) -> None:
    res = {k: v.toPandas() for k, v in traffic.run(tables, OPTS).items()}
    (t,) = res["by_topic"].itertuples()
    consumer = [batch_totals(s.returned) for s in CONSUMERS]
    follower = [batch_totals(s.returned) for s in FETCHES if s.replica_id >= 0]
    produced = [batch_totals((b.base,)) for _t, b in PRODUCES]
    assert t.produce_record_bytes == sum(x["record_bytes"] for x in produced)
    assert t.produce_records == sum(x["record_count"] for x in produced)
    assert t.produce_transactional_batches == sum(x["transactional_batch_count"] for x in produced)
    assert t.produce_transactional_records == sum(x["transactional_record_count"] for x in produced)
    assert t.fetch_record_bytes == sum(x["record_bytes"] for x in consumer)
    assert t.fetch_records == sum(x["record_count"] for x in consumer)
    assert t.fetch_control_bytes == sum(x["control_bytes"] for x in consumer)
    assert t.fetch_control_batches == sum(x["control_batch_count"] for x in consumer)
    assert t.fetch_commit_markers == sum(x["commit_markers"] for x in consumer)
    assert t.fetch_abort_markers == sum(x["abort_markers"] for x in consumer)
    assert t.fetch_transactional_records == sum(x["transactional_record_count"] for x in consumer)
    assert t.fetch_aborted_transactions == sum(len(s.aborted or ()) for s in CONSUMERS)
    assert t.replica_fetch_record_bytes == sum(x["record_bytes"] for x in follower)
    assert t.replica_fetch_control_bytes == sum(x["control_bytes"] for x in follower)
    assert t.replica_fetch_control_batches == sum(x["control_batch_count"] for x in follower)
    btt = res["by_topic_time"]
    assert list(btt.columns[:11]) == [
        "bucket_start", "topic", "produce_record_bytes", "produce_records", "fetch_record_bytes", "fetch_records",
        "replica_fetch_record_bytes", "replica_fetch_records", "produce_bytes_per_s", "fetch_bytes_per_s",
        "produce_transactional_batches"]
    assert btt.fetch_control_batches.sum() == t.fetch_control_batches
    sections = traffic.report(res, OPTS)
    assert any("abort markers" in p for sec in sections for p in sec.text)


def test_replication_counts_markers_apart(tables) -> None:
    res = {k: v.toPandas() for k, v in replication.run(
        tables, AnalysisOptions(bucket_seconds=1.0, leader_throttled_replicas=[f"{TOPIC}:*"])).items()}
    (spec,) = [s for s in FETCHES if s.replica_id >= 0]
    want = batch_totals(spec.returned)
    (p,) = res["replication_pairs"].itertuples()
    assert (p.leader_id, p.follower_id) == (0, spec.replica_id)
    assert p.record_bytes == want["record_bytes"] and p.records == want["record_count"]
    assert (p.control_bytes, p.control_batches) == (want["control_bytes"], want["control_batch_count"])
    assert (p.commit_markers, p.abort_markers) == (want["commit_markers"], want["abort_markers"])
    # Markers are replicated data: the throttled partition's record bytes and size include them.
    assert p.throttled_record_bytes == want["record_bytes"] + want["control_bytes"]
    size = replication.throttled_size(0, spec.version, [
        {"topic": TOPIC, "topic_id": None, "partition": 0,
         "record_bytes": want["record_bytes"] + want["control_bytes"]}], {TOPIC: "*"})
    assert p.recorded_bytes == size
    assert list(res["replication_pairs"].columns[-4:]) == ["control_bytes", "control_batches", "commit_markers",
                                                           "abort_markers"]
    (rp,) = res["replication_partitions"].itertuples()
    assert (rp.last_high_watermark, rp.last_lso) == (spec.high_watermark, spec.last_stable_offset)
    assert rp.control_batches == want["control_batch_count"] and rp.abort_markers == want["abort_markers"]
    assert rp.max_fetched_ahead == max(b.last for b in LOG) + 1 - spec.fetch_offset
    (rl,) = res["replication_lag"].itertuples()
    assert (rl.max_high_watermark, rl.max_lso, rl.control_bytes) == (
        spec.high_watermark, spec.last_stable_offset, want["control_bytes"])

