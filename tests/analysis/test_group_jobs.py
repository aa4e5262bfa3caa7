"""The analysis jobs on KIP-848 consumer-group and KIP-932 share-group traffic: groups and share-group
consumption (traffic), share sessions (sessions), ShareFetch long polls (latency)."""

from __future__ import annotations

from pathlib import Path

import pytest
from analysis_helpers import cached_tables, decoded
from group_helpers import (
    C1,
    EXPECTED_SHARE_TOTALS,
    S1,
    S2,
    TOPIC,
    TOPIC_ID,
    group_records,
    share_fetch,
    write_group_capture,
)

from minikafka.analysis.jobs import AnalysisOptions, latency, sessions, traffic
from minikafka.analysis.jobs.sessions import (
    _ShareSizeModel,
    next_share_epoch,
    replay_share_sessions,
)
from minikafka.capture.format import encode_block, encode_record
from minikafka.protocol.records import Record, build_batch
from minikafka.common.clock import SYSTEM_CLOCK


def _sessions(cap: Path) -> dict:
    reqs, parts = decoded(cap)
    share = reqs[reqs.api_key.isin([78, 79])]
    sparts = parts[parts.api_key.isin([78, 79])]
    out = {}
    for member, q in share.groupby("member_id"):
        p = sparts[sparts.member_id == member]
        out[member] = replay_share_sessions(q, p).iloc[0]
    return out


def test_share_sessions_of_the_capture(tmp_path: Path) -> None:
    got = _sessions(write_group_capture(tmp_path / "cap"))
    s1, s2 = got[S1], got[S2]
    # S1: opens (epoch 0), fetches (1), acknowledges (2), closes (-1).
    assert (s1.requests, s1.share_fetches, s1.share_acknowledges, s1.opens, s1.closes) == (4, 3, 1, 1, 1)
    assert (s1.max_epoch, s1.out_of_sequence, s1.epoch_errors, s1.complete, s1.max_session_partitions) == (
        2, 0, 0, True, 2)
    assert s1.group_id == "sg" and s1.client_id == f"share-{S1}"
    # Every incremental ShareFetch of S1 named the whole session: nothing to save.
    assert s1.full_request_bytes == s1.request_bytes and s1.full_response_bytes == s1.response_bytes
    # S2 acknowledged before it had a session (SHARE_SESSION_NOT_FOUND), then opened one.
    assert (s2.requests, s2.opens, s2.closes, s2.epoch_errors, s2.out_of_sequence) == (2, 1, 0, 1, 0)


def test_share_session_counterfactual_and_epoch_sequence(tmp_path: Path) -> None:
    """An incremental ShareFetch naming one of the session's two partitions would name both in a full
    one; an epoch out of sequence is counted, and so is the broker's INVALID_SHARE_SESSION_EPOCH."""
    recs = [
        share_fetch(0, 1, S1, 0, [(0, []), (1, [])], []),
        share_fetch(10, 2, S1, 1, [(0, [])],
                    [(0, build_batch([Record(value=b"x")], base_timestamp=SYSTEM_CLOCK.time_ms()), [(0, 0, 1)], 0)]),
        share_fetch(20, 3, S1, 5, [], [], error=123),  # INVALID_SHARE_SESSION_EPOCH
        share_fetch(30, 4, S1, 2, [], []),
    ]
    cap = tmp_path / "cap"
    cap.mkdir()
    (cap / "capture-0-0.mkcap").write_bytes(encode_block([encode_record(r) for r in recs]))
    s = _sessions(cap)[S1]
    assert (s.requests, s.opens, s.out_of_sequence, s.epoch_errors, s.max_epoch) == (4, 1, 1, 1, 5)
    model = _ShareSizeModel()
    p0, both = frozenset({(str(TOPIC_ID), 0)}), frozenset({(str(TOPIC_ID), 0), (str(TOPIC_ID), 1)})
    extra_req = model.request(both, frozenset(), 1) - model.request(p0, frozenset(), 1)
    extra_resp = model.response(both, 1) - model.response(p0, 1)
    assert extra_req > 0 and extra_resp > 0
    # Fetch 2 named p0 only (p1 in its session); fetch 4 named nothing (both in its session).
    empty = frozenset()
    extra_req += model.request(both, empty, 1) - model.request(empty, empty, 1)
    extra_resp += model.response(both, 1) - model.response(empty, 1)
    assert s.full_request_bytes - s.request_bytes == extra_req
    assert s.full_response_bytes - s.response_bytes == extra_resp
    assert next_share_epoch(2**31 - 1) == 1 and next_share_epoch(-1) == 0 and next_share_epoch(3) == 4


@pytest.fixture(scope="module")
def tables(spark, tmp_path_factory):
    yield from cached_tables(spark, write_group_capture(tmp_path_factory.mktemp("groups") / "cap"))


def test_traffic_groups_and_share_groups(tables) -> None:
    res = traffic.run(tables, AnalysisOptions())
    groups = res["groups"].toPandas().set_index("group_id")
    assert set(groups.index) == {"cg", "sg"}
    cg, sg = groups.loc["cg"], groups.loc["sg"]
    assert (cg.protocols, cg.members, cg.heartbeats, cg.joins, cg.offset_commits, cg.max_epoch) == (
        "consumer", 1, 3, 1, 1, 1)
    assert (sg.protocols, sg.members, sg.joins, sg.max_epoch) == ("share", 2, 2, 2)
    assert sg.error_responses == 2 and sg.errors == "INVALID_RECORD_STATE=1, SHARE_SESSION_NOT_FOUND=1"
    shares = res["share_groups"].toPandas()
    assert len(shares) == 1
    row = shares.iloc[0]
    assert (row.group_id, row.topic, row.members) == ("sg", TOPIC, 2)
    assert (row.records, row.record_bytes, row.acquired_records, row.redelivered_records) == (
        EXPECTED_SHARE_TOTALS["records"], EXPECTED_SHARE_TOTALS["record_bytes"], EXPECTED_SHARE_TOTALS["acquired"],
        EXPECTED_SHARE_TOTALS["redelivered"])
    assert (row.accepted_records, row.released_records, row.rejected_records) == (
        EXPECTED_SHARE_TOTALS["accepted"], EXPECTED_SHARE_TOTALS["released"], EXPECTED_SHARE_TOTALS["rejected"])
    assert (row.max_delivery_count, row.acknowledge_errors) == (2, 1)
    by_topic = res["by_topic"].toPandas().set_index("topic")
    assert by_topic.loc[TOPIC, "share_fetch_records"] == EXPECTED_SHARE_TOTALS["records"]
    assert by_topic.loc[TOPIC, "share_acquired_records"] == EXPECTED_SHARE_TOTALS["acquired"]
    assert by_topic.loc[TOPIC, "fetch_records"] == 0
    summary = res["summary"].toPandas().set_index("api_name")
    assert summary.loc["ShareFetch", "requests"] == 4 and summary.loc["ConsumerGroupHeartbeat", "requests"] == 3
    assert summary.loc["ShareAcknowledge", "errors"] == "INVALID_RECORD_STATE=1, SHARE_SESSION_NOT_FOUND=1"
    sections = traffic.report({k: v.toPandas() for k, v in res.items()}, AnalysisOptions())
    text = " ".join(t for s in sections if s.title == "Groups" for t in s.text)
    assert f"{EXPECTED_SHARE_TOTALS['acquired']:,} records were acquired" in text


def test_sessions_and_latency_jobs(tables) -> None:
    res = sessions.run(tables, AnalysisOptions())
    shares = res["share_sessions"].toPandas().set_index("member_id")
    assert set(shares.index) == {S1, S2}
    assert (shares.loc[S1, "opens"], shares.loc[S1, "closes"], shares.loc[S2, "epoch_errors"]) == (1, 1, 1)
    assert shares.loc[S1, "saving_ratio"] == pytest.approx(1.0)
    assert len(res["per_fetch"].toPandas()) == 0  # no Fetch at all
    text = " ".join(sessions.report({k: v.toPandas() for k, v in res.items()}, AnalysisOptions())[0].text)
    assert "Share sessions (KIP-932): 2 session(s)" in text
    fetch = latency.run(tables, AnalysisOptions())["fetch"].toPandas()
    share = fetch[(fetch.role == "share_consumer") & (fetch.client_id == "ALL")]
    assert share.requests.iloc[0] == 4 and set(fetch.role) == {"share_consumer"}


def test_member_ids_are_client_made(tables) -> None:
    """The requests table's member ids are those the clients chose (KIP-848 v1, KIP-932)."""
    members = {r.member_id for r in tables.requests.where("member_id is not null").select("member_id").collect()}
    assert members == {C1, S1, S2}
    assert len(group_records()) == tables.requests.count()
