"""Real KIP-848 consumers and KIP-932 share consumers (confluent-kafka 2.16) against a capturing broker: the
analysis tables name the new APIs with the counts the clients saw, and ``minikafka replay`` of the capture
against a fresh broker answers every request the same, or with a difference compare.py documents."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from analysis_helpers import cached_tables
from group_helpers import CLIENT_MESSAGES, CLIENT_SETTINGS, client_group_capture

from minikafka.analysis.jobs import AnalysisOptions, lag, sessions, traffic
from minikafka.broker.config import BrokerConfig
from minikafka.capture import read_capture
from minikafka.capture.frames import api_name
from minikafka.capture.replay import ReplayOptions, run_replay
from minikafka.capture.replay.compare import (
    ACQUISITION_RACE,
    IGNORED_FIELDS,
    MEMBERSHIP_TIMING,
)
from minikafka.testing import BrokerThread

pytestmark = [pytest.mark.clients, pytest.mark.slow]

NEW_APIS = ("ConsumerGroupHeartbeat", "ShareGroupHeartbeat", "ShareFetch", "ShareAcknowledge")


@pytest.fixture(scope="module")
def capture(tmp_path_factory) -> tuple[Path, dict[str, int]]:
    cap = tmp_path_factory.mktemp("groups") / "cap"
    seen = client_group_capture(cap)
    assert seen["consumed"] >= CLIENT_MESSAGES and seen["accepted"] + seen["rejected"] == CLIENT_MESSAGES
    return cap, seen


@pytest.fixture(scope="module")
def tables(spark, capture):
    yield from cached_tables(spark, capture[0])


def test_tables_name_the_new_apis_with_the_clients_counts(tables, capture) -> None:
    from pyspark.sql import functions as F

    cap, seen = capture
    recs = list(read_capture([cap]))
    per_api = Counter(api_name(r.api_key) for r in recs)
    got = {r.api_name: r["count"] for r in tables.requests.groupBy("api_name").count().collect()}
    assert got == dict(per_api)
    assert all(got.get(a, 0) > 0 for a in NEW_APIS), got
    assert tables.requests.where(F.col("decode_error").isNotNull()).count() == 0
    groups = {(r.api_name, r.group_id): r.members for r in tables.requests.where(F.col("group_id").isNotNull())
              .groupBy("api_name", "group_id").agg(F.countDistinct("member_id").alias("members")).collect()}
    assert groups[("ConsumerGroupHeartbeat", "cg")] == 3 and groups[("ShareGroupHeartbeat", "sg")] == 2
    assert groups[("ShareFetch", "sg")] == 2 and ("OffsetCommit", "cg") in groups
    commits = tables.requests.where("api_name = 'OffsetCommit'").select("api_version", "member_epoch").collect()
    assert {r.api_version for r in commits} == {9} and all(r.member_epoch > 0 for r in commits)
    # Consumer-group fetches return at least every value once (at-least-once across the rebalance).
    fetched = tables.partitions.where("api_name = 'Fetch' and topic = 'kt'").agg(F.sum("record_count")).first()[0]
    assert fetched >= CLIENT_MESSAGES

    # Share fetches: each acquired record is acknowledged once as accepted, released or rejected, as the clients did.
    share = traffic.run(tables, AnalysisOptions())["share_groups"].toPandas()
    assert list(share.group_id) == ["sg"] and list(share.topic) == ["st"] and share.members.iloc[0] == 2
    row = share.iloc[0]
    assert (row.accepted_records, row.released_records, row.rejected_records) == (
        seen["accepted"], seen["released"], seen["rejected"])
    assert row.acquired_records == seen["share_received"] == seen["accepted"] + seen["released"] + seen["rejected"]
    assert row.redelivered_records == seen["released"] and row.max_delivery_count == 2
    assert row.records >= CLIENT_MESSAGES and row.acknowledge_errors == 0
    groups_table = traffic.run(tables, AnalysisOptions())["groups"].toPandas().set_index("group_id")
    assert groups_table.loc["cg", "protocols"] == "consumer" and groups_table.loc["sg", "protocols"] == "share"
    assert groups_table.loc["cg", "members"] == 3 and groups_table.loc["cg", "offset_commits"] == seen["consumed"]
    # The lag job reads KIP-848 consumers' fetches as any consumer's: every partition of "kt" ends caught up.
    lags = lag.run(tables, AnalysisOptions())["lag_partitions"].toPandas()
    lags = lags[lags.topic == "kt"]
    assert set(lags.partition) == set(range(6)) and (lags.final_lag == 0).all()
    assert set(lags.client_id) <= {"kc0", "kc1", "kc2"}
    # Share sessions: each member opened one and closed it when it left.
    shares = sessions.run(tables, AnalysisOptions())["share_sessions"].toPandas()
    assert len(shares) == 2 and set(shares.opens) == {1} and set(shares.closes) == {1}
    assert shares.epoch_errors.sum() == 0 and shares.out_of_sequence.sum() == 0


def test_replay_answers_the_same_or_as_documented(capture) -> None:
    cap, _seen = capture
    recs = list(read_capture([cap]))
    with BrokerThread(BrokerConfig(port=0, **CLIENT_SETTINGS)) as target:
        report = run_replay([cap], ReplayOptions("127.0.0.1", target.port, speed=None))
    assert report.requests == len(recs) and report.failed == 0 and report.connections_failed == 0, report.summary()
    for name, st in ((st.name, st) for st in report.per_api.values()):
        assert st.differing == 0, (name, st.to_dict())
        for path in st.expected_differences:
            field = path.rsplit(".", 1)[-1]
            assert (path.endswith((MEMBERSHIP_TIMING, ACQUISITION_RACE)) or field in IGNORED_FIELDS
                    or field in ("base_timestamp", "max_timestamp")), (name, path)
    for name in NEW_APIS + ("OffsetCommit",):
        assert report.by_name(name).received > 0, name
    assert report.mappings["member"]["mapped"] >= 5 and report.mappings["mepoch"]["mapped"] >= 5
