"""Replication traffic and phantom throttled bytes (SPEC section 5) from a two-broker capture.

The capture (:func:`analysis_helpers.replication_capture`): brokers 0 and 1, topic "rep" with 4
partitions and RF 2, leaders 0, 1, 0, 1; a confluent-kafka producer sends 25, 35, 45, 55 values to
partitions 0-3 (acks=all), then the followers keep fetching (Fetch v8, sessions) for 2 s.  Every
follower fetch is captured by its leader: the replica fetchers talk to the leaders over TCP.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from analysis_helpers import cached_tables, REP_PARTITIONS, REP_TOPIC, decoded, replication_capture

from minikafka.analysis.jobs import AnalysisOptions, replication

pytestmark = [pytest.mark.slow, pytest.mark.clients]

DELIVERED = {p: 25 + 10 * p for p in range(REP_PARTITIONS)}
LEADER = {p: p % 2 for p in range(REP_PARTITIONS)}
# FetchResponse.sizeOf of an empty response (4 + throttle_time_ms 4 + error_code 2 + session_id 4 + responses):
# no error_code/session_id before v7; compact array + tagged fields from v12.
EMPTY = {**{v: 12 for v in range(4, 7)}, **{v: 18 for v in range(7, 12)}, **{v: 16 for v in range(12, 14)}}
RATE = 1000.0  # a (tiny) leader throttled rate, bytes/s, to show the share the phantom bytes take


@pytest.fixture(scope="module")
def capture(tmp_path_factory) -> Path:
    cap = tmp_path_factory.mktemp("replication") / "cap"
    assert replication_capture(cap) == DELIVERED
    return cap


@pytest.fixture(scope="module")
def rows(capture):
    """The capture decoded in plain Python: follower fetches, their response partitions, produce rows."""
    req, parts = decoded(capture)
    follower = (req.api_key == 1) & (req.replica_id >= 0)
    fparts = parts[(parts.api_key == 1) & (parts.replica_id >= 0) & parts.in_response]
    produce = parts[(parts.api_key == 0) & (parts.topic == REP_TOPIC)]
    return req[follower], fparts, produce


@pytest.fixture(scope="module")
def tables(spark, capture):
    yield from cached_tables(spark, capture)


@pytest.fixture(scope="module")
def plain(tables) -> dict:
    opts = AnalysisOptions(leader_throttled_rate=RATE)
    return {k: v.toPandas() for k, v in replication.run(tables, opts).items()}


def test_empty_response_sizes_from_the_broker() -> None:
    assert replication.empty_sizes() == EMPTY


def test_follower_fetches_replicated_bytes_and_phantom_bytes(plain, rows) -> None:
    fetches, _fparts, produce = rows
    pairs = plain["replication_pairs"].set_index(["leader_id", "follower_id"])
    assert set(pairs.index) == {(0, 1), (1, 0)}
    for (leader, follower), p in pairs.iterrows():
        mine = fetches[(fetches.broker_id == leader) & (fetches.replica_id == follower)]
        versions = sorted(set(mine.api_version))
        phantom = sum(EMPTY[v] for v in mine[mine.has_response].api_version)
        print(f"\nleader {leader} <- follower {follower}: {p.fetches} fetches (v{versions}, {p.full_fetches} full, "
              f"{p.incremental_fetches} incremental) in {p.duration_s:.2f} s, {p.record_bytes} record bytes "
              f"replicated, phantom {p.phantom_bytes} B = {p.phantom_bytes_per_s:.0f} B/s = "
              f"{100 * p.phantom_share_of_rate:.1f}% of a {RATE:.0f} B/s leader throttled rate")
        assert p.fetches == len(mine) >= 5
        assert p.fetch_versions == ",".join(str(v) for v in versions) == "8"
        assert p.full_fetches == 1 and p.incremental_fetches == p.fetches - 1 and p.sessionless_fetches == 0
        assert p.request_bytes == mine.request_bytes.sum() and p.response_bytes == mine.response_bytes.sum()
        # Nothing throttled: the leader records the empty response on every fetch, all of it phantom.
        assert p.phantom_bytes == p.recorded_bytes == p.empty_response_bytes == phantom == 18 * p.fetches
        assert p.throttled_record_bytes == 0
        assert p.phantom_bytes_per_s == pytest.approx(p.phantom_bytes / p.duration_s)
        assert p.phantom_share_of_rate == pytest.approx(p.phantom_bytes_per_s / RATE)
        assert 0.01 < p.phantom_share_of_rate < 1  # 18 B x ~7 fetches/s against 1000 B/s
        led = [q for q in range(REP_PARTITIONS) if LEADER[q] == leader]
        assert p.record_bytes == produce[produce.partition.isin(led)].record_bytes.sum() > 0
        assert p.records == sum(DELIVERED[q] for q in led)
    leaders = plain["replication_leaders"].set_index("leader_id")
    for leader in (0, 1):
        assert leaders.loc[leader, "followers"] == 1
        assert leaders.loc[leader, "phantom_bytes"] == pairs.loc[(leader, 1 - leader), "phantom_bytes"]


def test_replicated_records_and_lag_per_partition(plain, rows) -> None:
    _, _, produce = rows
    parts = plain["replication_partitions"].set_index("partition")
    assert list(parts.topic.unique()) == [REP_TOPIC] and sorted(parts.index) == list(range(REP_PARTITIONS))
    for q, p in parts.iterrows():
        sent = produce[produce.partition == q]
        assert (p.leader_id, p.follower_id) == (LEADER[q], 1 - LEADER[q])
        # What the follower fetched is exactly what the producer sent to the leader.
        assert p.record_bytes == sent.record_bytes.sum() > 0
        assert p.records == sent.record_count.sum() == DELIVERED[q]
        # At the end the follower has caught up with the leader's high watermark.
        assert p.last_high_watermark == DELIVERED[q] and p.last_fetch_offset == DELIVERED[q]
        assert 0 < p.max_fetched_ahead <= DELIVERED[q]
        assert 0 <= p.max_hw_lag <= DELIVERED[q] and p.error_responses == 0
    lag = plain["replication_lag"]
    assert set(lag.partition) == set(range(REP_PARTITIONS))
    for q in range(REP_PARTITIONS):
        lq = lag[lag.partition == q].sort_values("bucket_start")
        assert lq.record_bytes.sum() == parts.loc[q, "record_bytes"]
        assert lq.max_fetched_ahead.max() == parts.loc[q, "max_fetched_ahead"]
        assert lq.max_high_watermark.iloc[-1] == DELIVERED[q]
    series = plain["replication_series"]
    pairs = plain["replication_pairs"].set_index(["leader_id", "follower_id"])
    for (leader, follower), g in series.groupby(["leader_id", "follower_id"]):
        assert g.fetches.sum() == pairs.loc[(leader, follower), "fetches"]
        assert g.record_bytes.sum() == pairs.loc[(leader, follower), "record_bytes"]
        assert g.phantom_bytes.sum() == pairs.loc[(leader, follower), "phantom_bytes"]
        assert g.full_fetches.sum() == 1


def test_throttled_replicas_recorded_bytes(tables, rows) -> None:
    """rep:0:0 throttles partition 0 on its leader 0; rep:3:0 names broker 0, which does not lead
    partition 3 (leader 1), so nothing of leader 1 is throttled (Kafka's leader list semantics)."""
    fetches, fparts, _ = rows
    opts = AnalysisOptions(leader_throttled_replicas=["rep:0:0", "rep:3:0"], leader_throttled_rate=RATE)
    pairs = replication.run(tables, opts)["replication_pairs"].toPandas().set_index("leader_id")
    # Independent sizing at Fetch v8: empty response 18 B; topic "rep" entry: name (2 + 3) + partitions
    # array 4; a partition: index 4 + error 2 + hw 8 + lso 8 + log start 8 + aborted (null) 4 + records 4 + data.
    expected = 0
    throttled_data = 0
    mine = fetches[(fetches.broker_id == 0) & fetches.has_response]
    for f in mine.itertuples():
        ps = fparts[(fparts.broker_id == 0) & (fparts.connection_id == f.connection_id)
                    & (fparts.correlation_id == f.correlation_id) & (fparts.partition == 0)]
        expected += 18 + (9 if len(ps) else 0) + sum(38 + int(b) for b in ps.record_bytes)
        throttled_data += int(ps.record_bytes.sum())
    p0, p1 = pairs.loc[0], pairs.loc[1]
    print(f"\nleader 0 with partition 0 throttled: recorded {p0.recorded_bytes} B (independent: {expected} B), "
          f"of which {p0.throttled_record_bytes} B of records and {p0.phantom_bytes} B phantom")
    assert p0.recorded_bytes == expected
    assert p0.throttled_record_bytes == throttled_data == fparts[(fparts.broker_id == 0)
                                                                 & (fparts.partition == 0)].record_bytes.sum() > 0
    assert p0.phantom_bytes == p0.recorded_bytes - p0.throttled_record_bytes > 18 * p0.fetches
    assert p1.throttled_record_bytes == 0 and p1.recorded_bytes == p1.phantom_bytes == 18 * p1.fetches


def test_report(plain) -> None:
    opts = AnalysisOptions(leader_throttled_rate=RATE)
    sections = replication.report(plain, opts)
    assert [s.title for s in sections] == ["Replication traffic", "Phantom throttled bytes (leader replication quota)",
                                           "Replication lag"]
    phantom = sections[1]
    text = " ".join(phantom.text)
    assert "v8: 18 B" in text and "v12: 16 B" in text and "v4: 12 B" in text and "Phantom bytes eat up to" in text
    _caption, table = phantom.tables[0]
    assert set(table.phantom_bytes) == set(plain["replication_pairs"].phantom_bytes)
    assert all(len(s.figures) >= 1 for s in sections)
    fetches, record_bytes = sections[0].figures[0][1]  # two panels sharing their x axis
    assert sorted(fetches.labels()) == sorted(record_bytes.labels()) == ["0 1", "1 0"]
    phantom = sections[1].figures[0][1]
    assert phantom.series_named("leader throttled rate").values == [RATE] * len(phantom.x)
