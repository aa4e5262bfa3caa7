"""Captures of KIP-848 consumer-group and KIP-932 share-group traffic: ``minikafka capture show --groups``,
and the new apis through a pcap export and back."""

from __future__ import annotations

from pathlib import Path

from analysis.group_helpers import (
    C1,
    EXPECTED_SHARE_TOTALS,
    S1,
    S2,
    group_records,
    write_group_capture,
)

from minikafka.capture import read_capture
from minikafka.capture.groups import GroupSummary, acknowledged, acquired
from minikafka.capture.pcap import records_to_packets, write_pcap
from minikafka.cli import main as cli_main


def test_group_summary() -> None:
    summary = GroupSummary()
    for r in group_records():
        summary.add(r)
    assert set(summary.groups) == {"cg", "sg"} and summary.undecodable == 0
    cg, sg = summary.groups["cg"], summary.groups["sg"]
    assert (cg.protocols, cg.members, cg.heartbeats, cg.commits, cg.max_epoch) == ({"consumer"}, {C1}, 3, 1, 1)
    assert (sg.protocols, sg.members, sg.share_fetches, sg.share_acknowledges) == ({"share"}, {S1, S2}, 4, 2)
    assert (sg.acquired, sg.redelivered) == (EXPECTED_SHARE_TOTALS["acquired"], EXPECTED_SHARE_TOTALS["redelivered"])
    assert sg.acks == [EXPECTED_SHARE_TOTALS[k] for k in ("accepted", "released", "rejected")]
    assert sg.acknowledge_errors == 1 and sg.errors == {122: 1}  # SHARE_SESSION_NOT_FOUND, top level


def test_acknowledgement_and_acquisition_counts() -> None:
    acc = [0, 0, 0]
    acknowledged([{"first_offset": 0, "last_offset": 9, "acknowledge_types": [1]},       # 10 accepted
                  {"first_offset": 10, "last_offset": 13, "acknowledge_types": [0, 2, 3, 4]},  # gap, release, reject, renew
                  {"first_offset": 20, "last_offset": 19, "acknowledge_types": [2]},      # empty range
                  {"first_offset": 30, "last_offset": 31, "acknowledge_types": []}], acc)
    assert acc == [10, 1, 1]
    assert acquired([{"first_offset": 0, "last_offset": 4, "delivery_count": 1},
                     {"first_offset": 7, "last_offset": 8, "delivery_count": 3}]) == (7, 2, 3)
    assert acquired(None) == (0, 0, 0)


def test_capture_show_groups(tmp_path: Path, capsys) -> None:
    cap = write_group_capture(tmp_path / "cap")
    assert cli_main(["capture", "show", str(cap), "--groups"]) == 0
    out = capsys.readouterr().out
    for api in ("ConsumerGroupHeartbeat", "ShareGroupHeartbeat", "ShareFetch", "ShareAcknowledge",
                "DescribeShareGroupOffsets", "ConsumerGroupDescribe", "ShareGroupDescribe"):
        assert api in out, api
    assert "groups: 2 group(s)" in out
    assert (f"share group sg: 4 ShareFetch, 2 ShareAcknowledge; {EXPECTED_SHARE_TOTALS['acquired']} record(s) "
            f"acquired ({EXPECTED_SHARE_TOTALS['redelivered']} redelivered), {EXPECTED_SHARE_TOTALS['accepted']} "
            f"accepted, {EXPECTED_SHARE_TOTALS['released']} released, {EXPECTED_SHARE_TOTALS['rejected']} rejected, "
            "1 acknowledgement error(s)") in out
    assert "SHARE_SESSION_NOT_FOUND=1" in out


def test_new_apis_survive_a_pcap_export(tmp_path: Path) -> None:
    recs = group_records()
    pcap = tmp_path / "groups.pcap"
    with open(pcap, "wb") as out:
        write_pcap(out, records_to_packets(recs))
    back = list(read_capture([pcap]))
    assert [(r.api_key, r.api_version, r.correlation_id, r.request, r.response) for r in back] == [
        (r.api_key, r.api_version, r.correlation_id, r.request, r.response) for r in recs]
