"""The decoded tables on KIP-848 consumer-group and KIP-932 share-group traffic (no Spark): api names,
group columns, share fetches counted like fetches, acquisitions and acknowledgements per partition."""

from __future__ import annotations

from group_helpers import (
    C1,
    EXPECTED_SHARE_REQUESTS,
    EXPECTED_SHARE_TOTALS,
    P0_BATCHES,
    P1_BATCH,
    S1,
    S2,
    TOPIC,
    TOPIC_ID,
    group_records,
)

from minikafka.analysis.decode import COLUMNS, RecordDecoder

REQ = [c for c, _ in COLUMNS["requests"]]
PART = [c for c, _ in COLUMNS["partitions"]]


def _rows(table: str) -> list[dict]:
    names = REQ if table == "requests" else PART
    return [dict(zip(names, row)) for row in RecordDecoder("t").iter_rows(group_records(), table)]


def test_requests_name_the_new_apis_and_their_groups() -> None:
    rows = _rows("requests")
    assert all(r["decode_error"] is None for r in rows)
    names = {r["api_name"] for r in rows}
    assert names >= {"ConsumerGroupHeartbeat", "ConsumerGroupDescribe", "ShareGroupHeartbeat", "ShareGroupDescribe",
                     "ShareFetch", "ShareAcknowledge", "DescribeShareGroupOffsets", "OffsetCommit", "OffsetFetch"}
    by = {(r["api_name"], r["member_id"], r["correlation_id"]): r for r in rows}
    join = by[("ConsumerGroupHeartbeat", C1, 1)]
    assert (join["group_id"], join["member_epoch"], join["response_member_epoch"], join["assigned_partitions"]) == (
        "cg", 0, 1, 2)
    hb = by[("ConsumerGroupHeartbeat", C1, 2)]
    assert (hb["member_epoch"], hb["response_member_epoch"], hb["assigned_partitions"]) == (1, 1, None)
    leave = by[("ConsumerGroupHeartbeat", C1, 6)]
    assert (leave["member_epoch"], leave["response_member_epoch"]) == (-1, -1)
    commit = by[("OffsetCommit", C1, 3)]
    assert (commit["group_id"], commit["member_epoch"], commit["api_version"]) == ("cg", 1, 9)
    fetch = by[("OffsetFetch", C1, 4)]  # v9: the group, member and epoch are inside groups[]
    assert (fetch["group_id"], fetch["member_epoch"]) == ("cg", 1)
    describe = [r for r in rows if r["api_name"] in ("ConsumerGroupDescribe", "ShareGroupDescribe",
                                                      "DescribeShareGroupOffsets")]
    assert [r["group_id"] for r in describe] == ["cg", "sg", "sg"]
    share_hb = [r for r in rows if r["api_name"] == "ShareGroupHeartbeat"]
    assert [(r["member_id"], r["response_member_epoch"], r["assigned_partitions"]) for r in share_hb] == [
        (S1, 1, 2), (S2, 2, 2)]
    assert {r["group_id"] for r in rows if r["api_name"] == "Metadata"} == {None}


def test_share_requests_count_records_acquisitions_and_acknowledgements() -> None:
    rows = [r for r in _rows("requests") if r["api_name"] in ("ShareFetch", "ShareAcknowledge")]
    got = [(r["api_name"], r["member_id"], r["fetch_session_epoch"], r["fetch_kind"], r["acquired_records"],
            r["redelivered_records"], r["accepted_records"], r["released_records"], r["rejected_records"],
            r["record_count"], r["error_name"]) for r in rows]
    assert got == EXPECTED_SHARE_REQUESTS
    assert all(r["group_id"] == "sg" and r["fetch_session_id"] is None for r in rows)
    first = rows[0]
    assert (first["request_partitions"], first["response_partitions"], first["max_wait_ms"]) == (2, 2, 500)
    assert first["record_bytes"] == len(P0_BATCHES[0]) + len(P1_BATCH)
    close = rows[-1]
    assert (close["request_partitions"], close["forgotten_partitions"]) == (0, 2)
    fetches = [r for r in rows if r["api_name"] == "ShareFetch"]
    assert sum(r["record_count"] for r in fetches) == EXPECTED_SHARE_TOTALS["records"]
    assert sum(r["record_bytes"] for r in fetches) == EXPECTED_SHARE_TOTALS["record_bytes"]
    for col, key in (("acquired_records", "acquired"), ("redelivered_records", "redelivered"),
                     ("accepted_records", "accepted"), ("released_records", "released"),
                     ("rejected_records", "rejected")):
        assert sum(r[col] or 0 for r in rows) == EXPECTED_SHARE_TOTALS[key], col


def test_share_partition_rows() -> None:
    rows = [r for r in _rows("partitions") if r["api_name"] in ("ShareFetch", "ShareAcknowledge")]
    assert {r["topic"] for r in rows} == {TOPIC} and {r["topic_id"] for r in rows} == {str(TOPIC_ID)}
    assert all(r["group_id"] == "sg" for r in rows)
    second = [r for r in rows if r["api_name"] == "ShareFetch" and r["fetch_session_epoch"] == 1]
    p0, p1 = sorted(second, key=lambda r: r["partition"])
    assert (p0["accepted_records"], p0["acquired_records"], p0["base_offset"], p0["last_offset"]) == (5, 5, 5, 9)
    assert (p1["accepted_records"], p1["released_records"], p1["rejected_records"]) == (2, 1, 1)
    assert (p1["acquired_records"], p1["redelivered_records"], p1["max_delivery_count"]) == (1, 1, 2)
    assert (p0["record_count"], p0["batch_count"], p0["record_bytes"]) == (5, 1, len(P0_BATCHES[1]))
    assert p0["in_request"] and p0["in_response"] and p0["acknowledge_error_code"] == 0
    ack = [r for r in rows if r["api_name"] == "ShareAcknowledge" and r["member_id"] == S1]
    assert {r["partition"]: (r["error_code"], r["acknowledge_error_code"]) for r in ack} == {0: (0, 0), 1: (121, 121)}
    refused = [r for r in rows if r["api_name"] == "ShareAcknowledge" and r["member_id"] == S2]
    assert [(r["in_request"], r["in_response"], r["accepted_records"]) for r in refused] == [(True, False, 1)]
    close = [r for r in rows if r["fetch_kind"] == "close"]
    assert [(r["partition"], r["forgotten"]) for r in close] == [(0, True), (1, True)]
    for col, key in (("acquired_records", "acquired"), ("accepted_records", "accepted"),
                     ("released_records", "released"), ("rejected_records", "rejected")):
        assert sum(r[col] or 0 for r in rows) == EXPECTED_SHARE_TOTALS[key], col
    assert sum(r["record_count"] for r in rows if r["api_name"] == "ShareFetch") == EXPECTED_SHARE_TOTALS["records"]


def test_batched_rows_match_the_per_record_methods() -> None:
    recs = group_records()
    for table in ("requests", "partitions", "topics"):
        dec = RecordDecoder("t")
        one_by_one = []
        for r in recs:
            req, resp, err = dec.parse(r)
            if table == "requests":
                one_by_one.append(dec.request_row(r, req, resp, err))
            elif table == "partitions":
                list(dec.topic_rows(r, resp))
                one_by_one.extend(dec.partition_rows(r, req, resp))
            else:
                one_by_one.extend(dec.topic_rows(r, resp))
        assert list(RecordDecoder("t").iter_rows(recs, table)) == one_by_one, table
        assert all(len(row) == len(COLUMNS[table]) for row in one_by_one)
