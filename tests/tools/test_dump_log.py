"""`minikafka dump-log` (kafka-dump-log.sh): the batches, records, transaction markers and indexes of segment
files a broker wrote, and of hand-built segments with empty, delete-horizon, corrupt and torn batches; the
coordinator topics' records through --offsets-decoder, --transaction-log-decoder and --share-group-state-decoder."""

from __future__ import annotations

import base64
import io
import json
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from crc32c import crc32c
from tools_helpers import Result, request, run_cli, run_subprocess

from minikafka.broker.config import BrokerConfig
from minikafka.broker.log.index import OffsetIndex, TimeIndex
from minikafka.client.consumer.protocol import Assignment, Subscription, encode_assignment, encode_subscription
from minikafka.common import TopicPartition as TP
from minikafka.common.hashing import partition_for_key
from minikafka.protocol import coordinator_records as cr
from minikafka.protocol.api import ApiKey
from minikafka.protocol.metadata_records import encode_metadata_record
from minikafka.protocol.records import (ATTRIBUTES_OFFSET, CRC_OFFSET, DELETE_HORIZON_MASK, Record, build_batch,
                                        read_header)
from minikafka.testing import BrokerThread
from waiting import wait_for
from minikafka.tools.dump_log import (OFFSET_INDEX_ENTRY, TIME_INDEX_ENTRY, DumpOptions, dump_files,
                                      partition_segments)

SEGMENT = "00000000000000000000"
_FIELD = re.compile(r"(\w+): (\S*)")


def fields(line: str) -> dict[str, str]:
    """``name: value`` pairs of a dump line (the test's values hold no spaces)."""
    return dict(_FIELD.findall(line))


def batches_and_records(lines: list[str]) -> list[tuple[dict[str, str], list[dict[str, str]]]]:
    """Each batch line's fields with the fields of the record lines under it."""
    out: list[tuple[dict[str, str], list[dict[str, str]]]] = []
    for line in lines:
        if line.startswith("baseOffset: "):
            out.append((fields(line), []))
        elif line.startswith("| "):
            out[-1][1].append(fields(line))
    return out


def wait_for_marker(lso: Consumer, end: int) -> None:
    """The coordinator writes a transaction's marker after answering EndTxn: wait until the last stable offset
    (ListOffsets(latest) of a read_committed client) is past it, i.e. the log ends with the marker."""
    wait_for(lambda: lso.get_watermark_offsets(TopicPartition("events", 0), timeout=10, cached=False)[1] >= end,
             20, f"a transaction marker before offset {end}")


@dataclass
class Written:
    """A partition log written by a broker that has stopped, and what its producers were told."""

    data_dir: Path
    segment_dir: Path
    delivered: dict[int, tuple[bytes | None, bytes | None, int]]  # offset -> (key, value, CreateTime)


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Written]:
    """Idempotent records (headers, a null value), a committed transaction of two records and an aborted
    one, each flushed before the next so the log holds them in this order; index entries every batch."""
    data_dir = tmp_path_factory.mktemp("dump-log")
    delivered: dict[int, tuple[bytes | None, bytes | None, int]] = {}

    def on_delivery(err, msg) -> None:
        assert err is None, err
        delivered[msg.offset()] = (msg.key(), msg.value(), msg.timestamp()[1])

    with BrokerThread(BrokerConfig(port=0, data_dir=data_dir, log_index_interval_bytes=1,
                                   group_initial_rebalance_delay_ms=0)) as broker:
        broker.create_topic("events", 1)
        plain = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "linger.ms": 0})
        plain.produce("events", key=b"k1", value=b"v1", headers=[("trace", b"t1"), ("origin", b"o")],
                      on_delivery=on_delivery)
        assert plain.flush(30) == 0
        plain.produce("events", key=b"k2", value=None, on_delivery=on_delivery)  # a tombstone
        assert plain.flush(30) == 0
        lso = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "dump-log-lso",
                        "isolation.level": "read_committed"})
        txn = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "dump-log-txn", "linger.ms": 0})
        txn.init_transactions(30)
        txn.begin_transaction()
        txn.produce("events", key=b"t1", value=b"committed-1", on_delivery=on_delivery)
        assert txn.flush(30) == 0
        txn.produce("events", key=None, value=b"\xffbinary", on_delivery=on_delivery)
        assert txn.flush(30) == 0
        txn.commit_transaction(30)
        wait_for_marker(lso, 5)
        txn.begin_transaction()
        txn.produce("events", key=b"t2", value=b"aborted", on_delivery=on_delivery)
        assert txn.flush(30) == 0
        txn.abort_transaction(30)
        wait_for_marker(lso, 7)
        lso.close()
    yield Written(data_dir, data_dir / "logs" / "events-0", delivered)


@pytest.mark.clients
def test_data_dir_dump_shows_every_batch_record_and_marker(written: Written, capsys) -> None:
    r = run_cli(capsys, "dump-log", "--data-dir", str(written.data_dir), "--topic", "events", "--partition", "0",
                "--print-data-log")
    assert (r.rc, r.err) == (0, "")
    log_file = written.segment_dir / f"{SEGMENT}.log"
    assert r.lines[:2] == [f"Dumping {log_file}", "Log starting offset: 0"]
    dumped = batches_and_records(r.lines)
    # 2 idempotent batches, 2 committed transactional ones, COMMIT, 1 aborted one, ABORT
    assert [(b["baseOffset"], b["lastOffset"], b["count"], b["isTransactional"], b["isControl"])
            for b, _ in dumped] == [
        ("0", "0", "1", "false", "false"), ("1", "1", "1", "false", "false"),
        ("2", "2", "1", "true", "false"), ("3", "3", "1", "true", "false"), ("4", "4", "1", "true", "true"),
        ("5", "5", "1", "true", "false"), ("6", "6", "1", "true", "true")]
    position = 0
    for b, _ in dumped:
        assert (b["magic"], b["compresscodec"], b["isvalid"], b["deleteHorizonMs"]) == (
            "2", "none", "true", "OptionalLong.empty")
        assert int(b["position"]) == position
        position += int(b["size"])
    assert position == log_file.stat().st_size
    idempotent_pid = dumped[0][0]["producerId"]
    assert int(idempotent_pid) >= 0 and dumped[1][0]["producerId"] == idempotent_pid
    assert [(b["baseSequence"], b["lastSequence"]) for b, _ in dumped[:2]] == [("0", "0"), ("1", "1")]
    txn_pid = dumped[2][0]["producerId"]
    assert txn_pid != idempotent_pid and {b["producerId"] for b, _ in dumped[2:]} == {txn_pid}
    assert [b["baseSequence"] for b, _ in dumped[2:]] == ["0", "1", "-1", "2", "-1"]

    data = [rec for b, recs in dumped if b["isControl"] == "false" for rec in recs]
    assert [int(rec["offset"]) for rec in data] == sorted(written.delivered) == [0, 1, 2, 3, 5]
    for rec in data:
        key, value, timestamp = written.delivered[int(rec["offset"])]
        assert int(rec["CreateTime"]) == timestamp
        assert int(rec["keySize"]) == (-1 if key is None else len(key))
        assert int(rec["valueSize"]) == (-1 if value is None else len(value))
        assert rec.get("key") == (None if key is None else key.decode())
    assert [rec.get("payload") for rec in data] == ["v1", None, "committed-1", "\\xffbinary", "aborted"]
    assert data[0]["headerKeys"] == "[trace,origin]" and data[1]["headerKeys"] == "[]"
    record_lines = [line for line in r.lines if line.startswith("| ")]
    assert record_lines[1].endswith("headerKeys: [] key: k2")  # a null value prints no payload
    assert record_lines[3].endswith("headerKeys: [] payload: \\xffbinary")  # nor a null key a key
    markers = [line for line in record_lines if "endTxnMarker" in line]
    assert [m.split("headerKeys: [] ")[1] for m in markers] == ["endTxnMarker: COMMIT coordinatorEpoch: 0",
                                                                "endTxnMarker: ABORT coordinatorEpoch: 0"]
    assert [fields(m)["offset"] for m in markers] == ["4", "6"]


@pytest.mark.clients
def test_files_option_in_a_subprocess_and_the_indexes(written: Written, capsys) -> None:
    seg = written.segment_dir / SEGMENT
    r = run_subprocess("dump-log", "--files", f"{seg}.log")  # shallow: batches only
    assert (r.rc, r.err) == (0, "")
    batch_lines = [line for line in r.lines if line.startswith("baseOffset: ")]
    assert len(batch_lines) == 7 and not any(line.startswith("|") for line in r.lines)
    positions = {fields(line)["baseOffset"]: fields(line)["position"] for line in batch_lines}

    r = run_cli(capsys, "dump-log", "--files", f"{seg}.index,{seg}.timeindex")
    assert (r.rc, r.err) == (0, "")
    index_lines = r.lines[1:r.lines.index(f"Dumping {seg}.timeindex")]
    assert r.lines[0] == f"Dumping {seg}.index" and index_lines  # an entry per batch after the first
    for line in index_lines:
        entry = fields(line)
        assert line == f"offset: {entry['offset']} position: {entry['position']}"
        assert positions[entry["offset"]] == entry["position"]
    time_lines = r.lines[r.lines.index(f"Dumping {seg}.timeindex") + 1:]
    assert time_lines and all(re.fullmatch(r"timestamp: \d+ offset: \d+", line) for line in time_lines)

    r = run_cli(capsys, "dump-log", "--files", f"{seg}.index,{seg}.timeindex", "--verify-index-only")
    assert (r.rc, r.lines, r.err) == (0, [f"Dumping {seg}.index", f"Dumping {seg}.timeindex"], "")
    r = run_cli(capsys, "dump-log", "--files", f"{seg}.index", "--index-sanity-check")
    assert (r.rc, r.lines) == (0, [f"Dumping {seg}.index", f"{seg}.index passed sanity check."])


def test_index_entry_formats_are_the_brokers() -> None:
    assert OFFSET_INDEX_ENTRY.format == OffsetIndex.ENTRY.format
    assert TIME_INDEX_ENTRY.format == TimeIndex.ENTRY.format


def _with_delete_horizon(batch: bytes) -> bytes:
    """The batch with attributes bit 6 set (its baseTimestamp is then the delete horizon), CRC redone."""
    b = bytearray(batch)
    b[ATTRIBUTES_OFFSET + 1] |= DELETE_HORIZON_MASK
    b[CRC_OFFSET:CRC_OFFSET + 4] = crc32c(bytes(b[ATTRIBUTES_OFFSET:])).to_bytes(4, "big")
    return bytes(b)


def test_empty_delete_horizon_corrupt_and_torn_batches(tmp_path: Path, capsys) -> None:
    first = build_batch([Record(0, 0, b"a", b"1"), Record(1, 5, b"b", None)], base_offset=0,
                        base_timestamp=1_000)
    empty = build_batch([], base_offset=2, producer_id=7, producer_epoch=1, is_transactional=True,
                        base_timestamp=2_000)  # all records cleaned away, the batch kept for its producer
    horizon = _with_delete_horizon(build_batch([Record(0, 10, b"c", None)], base_offset=3, base_timestamp=9_000))
    bad_crc = bytearray(build_batch([Record(0, 0, b"d", b"4")], base_offset=4, base_timestamp=3_000))
    bad_crc[-2] ^= 0x01  # the value "4" becomes "5": the CRC no longer matches
    segment = tmp_path / "broker-1" / "logs" / "compacted-0" / f"{SEGMENT}.log"
    segment.parent.mkdir(parents=True)
    segment.write_bytes(first + empty + horizon + bad_crc + b"\x00" * 30)  # a torn tail

    # The data dir of a `serve --brokers N` cluster: found under broker-1.
    assert partition_segments(tmp_path, "compacted", 0) == [segment]
    r = run_cli(capsys, "dump-log", "--data-dir", str(tmp_path), "--topic", "compacted", "--deep-iteration")
    assert r.rc == 0
    lines = r.lines
    assert lines[:2] == [f"Dumping {segment}", "Log starting offset: 0"]
    dumped = batches_and_records(lines)
    assert [(b["baseOffset"], b["lastOffset"], b["count"], b["isvalid"]) for b, _ in dumped] == [
        ("0", "1", "2", "true"), ("2", "1", "0", "true"), ("3", "3", "1", "true"), ("4", "4", "1", "false")]
    assert [[rec["offset"] for rec in recs] for _, recs in dumped] == [["0", "1"], [], ["3"], ["4"]]
    assert dumped[0][1][1]["CreateTime"] == "1005" and dumped[0][1][1]["valueSize"] == "-1"
    assert (dumped[1][0]["producerId"], dumped[1][0]["isTransactional"]) == ("7", "true")
    assert dumped[2][0]["deleteHorizonMs"] == "OptionalLong[9000]"
    assert dumped[2][1][0]["CreateTime"] == "9010"
    assert lines[-1] == f"Found 30 invalid bytes at the end of {SEGMENT}.log"
    assert f"{segment}: unsupported record batch magic 0 at position {segment.stat().st_size - 30}\n" in r.err
    # Offset 2 was cleaned away: Kafka's tool reports the gap.
    assert f"Non-consecutive offsets in {segment}\n  1 is followed by 3\n" in r.err

    # --max-bytes: only the batches wholly within the limit, and no complaint about the rest.
    r = run_cli(capsys, "dump-log", "--files", str(segment), "--max-bytes", str(len(first) + len(empty) + 5))
    assert (r.rc, r.err) == (0, "")
    assert [fields(line)["baseOffset"] for line in r.lines if line.startswith("baseOffset")] == ["0", "2"]

    r = run_cli(capsys, "dump-log", "--data-dir", str(tmp_path), "--topic", "compacted", "--broker", "0")
    assert (r.rc, r.err) == (1, f"minikafka: error: no log directory compacted-0 under {tmp_path / 'broker-0'}\n")


def test_a_decoder_replaces_the_string_decoder(tmp_path: Path) -> None:
    segment = tmp_path / f"{SEGMENT}.log"
    segment.write_bytes(build_batch([Record(0, 0, b"k", b"v"), Record(1, 0, None, b"w")], base_timestamp=1))
    out, err = io.StringIO(), io.StringIO()

    def decoder(record) -> tuple[str | None, str | None]:
        return f"key@{record.offset}", None if record.key is None else record.value.decode().upper()

    rc = dump_files([segment], DumpOptions(print_data_log=True, skip_record_metadata=True, decoder=decoder),
                    out, err)
    assert (rc, err.getvalue()) == (0, "")
    assert out.getvalue().splitlines()[3:] == ["| key: key@0 payload: V", "| key: key@1"]


def test_usage_errors_are_one_line(tmp_path: Path, capsys) -> None:
    r: Result = run_cli(capsys, "dump-log", "--files", str(tmp_path / "missing.log"))
    assert (r.rc, r.out, r.err) == (1, "", f"minikafka: error: no such file: {tmp_path / 'missing.log'}\n")
    r = run_cli(capsys, "dump-log")
    assert (r.rc, r.err) == (1, "minikafka: error: give --files or --data-dir with --topic\n")
    other = tmp_path / "notes.txt"
    other.write_text("x")
    r = run_cli(capsys, "dump-log", "--files", str(other))
    assert (r.rc, r.lines, r.err) == (0, [f"Dumping {other}"], f"Ignoring unknown file {other}\n")


def test_index_entries_that_miss_a_batch_are_reported(tmp_path: Path, capsys) -> None:
    first = build_batch([Record(0, 0, b"a", b"1"), Record(1, 0, b"b", b"2")], base_offset=100, base_timestamp=50)
    second = build_batch([Record(0, 0, b"c", b"3")], base_offset=102, base_timestamp=40)
    seg = tmp_path / "00000000000000000100"
    Path(f"{seg}.log").write_bytes(first + second)
    # Right: the first batch by its base offset (minikafka's entries) and by its last (Kafka's). Wrong: 101 at
    # the position of the second batch. Then a zero entry: the unused tail of a pre-allocated Kafka index.
    Path(f"{seg}.index").write_bytes(b"".join(OFFSET_INDEX_ENTRY.pack(rel, pos) for rel, pos in
                                              [(0, 0), (1, 0), (1, len(first)), (0, 0)]))
    Path(f"{seg}.timeindex").write_bytes(b"".join(TIME_INDEX_ENTRY.pack(ts, rel) for ts, rel in
                                                  [(50, 0), (45, 2)]))
    r = run_cli(capsys, "dump-log", "--files", f"{seg}.index,{seg}.timeindex")
    assert r.rc == 0
    assert r.lines == [f"Dumping {seg}.index", "offset: 100 position: 0", "offset: 101 position: 0",
                       f"offset: 101 position: {len(first)}",
                       f"Dumping {seg}.timeindex", "timestamp: 50 offset: 100", "timestamp: 45 offset: 102"]
    assert r.err == (f"Mismatches in :{seg}.index\n  Index offset: 101, log offset: 102\n"
                     f"Found timestamp mismatch in :{seg}.timeindex\n  Index timestamp: 45, log timestamp: 40\n"
                     f"Found out of order timestamp in :{seg}.timeindex\n"
                     f"  Index timestamp: 45, Previously indexed timestamp: 50\n")


# -- the coordinator topics' decoders ------------------------------------------------------------------------
_KEY_PAYLOAD = re.compile(r"^\| .*?key: (.*?)(?: payload: (.*))?$")


def decoded(lines: list[str]) -> list[tuple[Any, Any]]:
    """(key, payload) of each data record line: JSON parsed, other text (``<DELETE>``, ``... skipping.``)
    as it is, None when the line has none (the test's JSON holds no " payload: ")."""
    def parse(text: str | None) -> Any:
        return json.loads(text) if text is not None and text.startswith("{") else text

    return [(parse(m[1]), parse(m[2])) for m in map(_KEY_PAYLOAD.match, lines) if m]


def wait_for_txn_state(bootstrap: str, transactional_id: str, state: str) -> None:
    """The coordinator completes a transaction (CompleteCommit) after answering EndTxn: wait until
    DescribeTransactions shows ``state``."""
    wait_for(lambda: request(bootstrap, ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [transactional_id]})
             .transaction_states[0].transaction_state == state, 20, f"{transactional_id} to reach {state}")


@pytest.mark.clients
def test_coordinator_topics_of_a_broker_decoded(tmp_path: Path, capsys) -> None:
    """A group's committed offsets (plain and within a transaction) and a transactional id's states, as a
    stopped broker left them in its replicas D/logs/__consumer_offsets-0 and D/logs/__transaction_state-0."""
    with BrokerThread(BrokerConfig(port=0, data_dir=tmp_path, group_initial_rebalance_delay_ms=0,
                                   offsets_topic_num_partitions=1,
                                   transaction_state_log_num_partitions=1)) as broker:
        broker.create_topic("orders", 2)
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "dump-group",
                             "enable.auto.commit": False})
        consumer.commit(offsets=[TopicPartition("orders", 1, 42)], asynchronous=False)
        txn = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "dump-txn", "linger.ms": 0})
        txn.init_transactions(30)
        txn.begin_transaction()
        txn.produce("orders", key=b"k", value=b"v", partition=0)
        assert txn.flush(30) == 0
        txn.send_offsets_to_transaction([TopicPartition("orders", 0, 7)], consumer.consumer_group_metadata(), 30)
        txn.commit_transaction(30)
        consumer.close()
        wait_for_txn_state(broker.bootstrap, "dump-txn", "CompleteCommit")
    # The broker's replica of __consumer_offsets-0 (one partition here), in its log dir as any topic's.
    assert partition_segments(tmp_path, "__consumer_offsets", 0)[0].parent == tmp_path / "logs" / "__consumer_offsets-0"

    r = run_cli(capsys, "dump-log", "--data-dir", str(tmp_path), "--topic", "__consumer_offsets",
                "--partition", "0", "--offsets-decoder")
    assert (r.rc, r.err) == (0, "")
    offsets = [(k, v) for k, v in decoded(r.lines) if isinstance(k, dict) and k["type"] == "1"]
    plain = [v for k, v in offsets if k["data"] == {"group": "dump-group", "topic": "orders", "partition": 1}]
    assert len(plain) == 1
    assert plain[0]["version"] == "3"  # no expire timestamp: v3, as Kafka writes it
    assert {k: plain[0]["data"][k] for k in ("offset", "leaderEpoch", "metadata")} == {
        "offset": 42, "leaderEpoch": -1, "metadata": ""}
    assert plain[0]["data"]["commitTimestamp"] > 0 and "expireTimestamp" not in plain[0]["data"]
    in_txn = [v for k, v in offsets if k["data"] == {"group": "dump-group", "topic": "orders", "partition": 0}]
    assert [v["data"]["offset"] for v in in_txn] == [7]
    # The transactional offset commit is in the producer's batch, then its COMMIT marker (not decoded).
    txn_batches = [b for b, _ in batches_and_records(r.lines) if b["isTransactional"] == "true"]
    assert [b["isControl"] for b in txn_batches] == ["false", "true"]
    assert [line.split("headerKeys: [] ")[1] for line in r.lines if "endTxnMarker" in line] == [
        "endTxnMarker: COMMIT coordinatorEpoch: 0"]

    r = run_cli(capsys, "dump-log", "--data-dir", str(tmp_path), "--topic", "__transaction_state",
                "--partition", "0", "--transaction-log-decoder")
    assert (r.rc, r.err) == (0, "")
    states = decoded(r.lines)
    assert {json.dumps(k) for k, _ in states} == {json.dumps({"type": "0", "data": {"transactionalId": "dump-txn"}})}
    values = [v["data"] for _, v in states if isinstance(v, dict)]
    assert [v["transactionStatus"] for v in values][-3:] == ["Ongoing", "PrepareCommit", "CompleteCommit"]
    assert {v["producerId"] for v in values} == {values[0]["producerId"]}
    assert values[0]["transactionStatus"] == "Empty" and values[0]["transactionPartitions"] is None
    ongoing = next(v for v in values if v["transactionStatus"] == "PrepareCommit")
    # The group's __consumer_offsets partition (one partition here).
    assert sorted((p["topic"], p["partitionIds"]) for p in ongoing["transactionPartitions"]) == [
        ("__consumer_offsets", [partition_for_key("dump-group", 1)]), ("orders", [0])]
    # The producer id the coordinator recorded is the one on the transaction's batch in orders-0.
    r = run_cli(capsys, "dump-log", "--data-dir", str(tmp_path), "--topic", "orders", "--partition", "0")
    assert {int(b["producerId"]) for b in txn_batches} == {values[-1]["producerId"]}
    assert {int(b["producerId"]) for b, _ in batches_and_records(r.lines)} == {values[-1]["producerId"]}


def _segment(tmp_path: Path, records: list[tuple[bytes | None, bytes | None]]) -> Path:
    segment = tmp_path / f"{SEGMENT}.log"
    segment.write_bytes(build_batch([Record(i, 0, k, v) for i, (k, v) in enumerate(records)], base_timestamp=1))
    return segment


def test_offsets_decoder_prints_what_kafka_prints(tmp_path: Path, capsys) -> None:
    subscription = encode_subscription(Subscription(["orders"], owned_partitions=[TP("orders", 0)],
                                                    generation_id=3))
    assignment = encode_assignment(Assignment([TP("orders", 0), TP("orders", 1)], b"\x01"))
    member = cr.GroupMemberMetadata("m-1", "c", "/127.0.0.1", 45000, subscription, assignment, 300000)
    segment = _segment(tmp_path, [
        cr.encode_record(cr.OffsetCommitKey("g", "orders", 1), cr.OffsetCommitValue(42, "m", 1000)),
        cr.encode_record(cr.OffsetCommitKey("g", "orders", 2), cr.OffsetCommitValue(7, "", 1000,
                                                                                     expire_timestamp=2000)),
        cr.encode_record(cr.OffsetCommitKey("g", "orders", 1), None),
        cr.encode_record(cr.GroupMetadataKey("g"), cr.GroupMetadataValue("consumer", 3, "range", "m-1", 1234,
                                                                         (member,))),
        cr.encode_record(cr.GroupMetadataKey("other"), cr.GroupMetadataValue("connect", 1, None, None, -1,
                                                                             (member._replace(assignment=b""),))),
        cr.encode_record(cr.ConsumerGroupMetadataKey("g2"), cr.ConsumerGroupMetadataValue(5)),
        (b"\x00\x0f\x00\x01g", b"\x00\x00"),  # a record type minikafka does not write (share state partitions)
        (cr.encode_key(cr.OffsetCommitKey("g", "orders", 3)), b"\x00\x09xx"),  # a value version nobody knows
    ])
    r = run_cli(capsys, "dump-log", "--files", str(segment), "--offsets-decoder", "--skip-record-metadata")
    assert (r.rc, r.err) == (0, "")
    members = ('[{"memberId":"m-1","groupInstanceId":null,"clientId":"c","clientHost":"/127.0.0.1",'
               '"rebalanceTimeout":300000,"sessionTimeout":45000,')
    assert r.lines[3:] == [
        '| key: {"type":"1","data":{"group":"g","topic":"orders","partition":1}} '
        'payload: {"version":"3","data":{"offset":42,"leaderEpoch":-1,"metadata":"m","commitTimestamp":1000}}',
        '| key: {"type":"1","data":{"group":"g","topic":"orders","partition":2}} '
        'payload: {"version":"1","data":{"offset":7,"metadata":"","commitTimestamp":1000,"expireTimestamp":2000}}',
        '| key: {"type":"1","data":{"group":"g","topic":"orders","partition":1}} payload: <DELETE>',
        '| key: {"type":"2","data":{"group":"g"}} payload: {"version":"3","data":{"protocolType":"consumer",'
        '"generation":3,"protocol":"range","leader":"m-1","currentStateTimestamp":1234,"members":' + members +
        '"subscription":{"topics":["orders"],"userData":null,"ownedPartitions":[{"topic":"orders","partitions":[0]}],'
        '"generationId":3,"rackId":null},'
        '"assignment":{"assignedPartitions":[{"topic":"orders","partitions":[0,1]}],"userData":"AQ=="}}]}}',
        # Not the consumer protocol: the embedded bytes stay base64.
        '| key: {"type":"2","data":{"group":"other"}} payload: {"version":"3","data":{"protocolType":"connect",'
        '"generation":1,"protocol":null,"leader":null,"currentStateTimestamp":-1,"members":' + members +
        f'"subscription":"{base64.b64encode(subscription).decode()}","assignment":""}}]}}}}',
        '| key: {"type":"3","data":{"groupId":"g2"}} payload: {"version":"0","data":{"epoch":5}}',
        "| key: Unknown record type 15 at offset 6, skipping.",
        "| key: Error at offset 7, skipping. Can't read version 9 of OffsetCommitValue",
    ]


def test_transaction_and_share_state_decoders(tmp_path: Path, capsys) -> None:
    segment = _segment(tmp_path, [
        cr.encode_record(cr.TransactionLogKey("tx"), cr.TransactionLogValue(
            5, 1, 60000, 2, (cr.TransactionPartitions("orders", (0, 1)),), 100, 90, previous_producer_id=4)),
        cr.encode_record(cr.TransactionLogKey("tx"), cr.TransactionLogValue(5, 1, 60000, 0, None, 100, -1)),
        cr.encode_record(cr.TransactionLogKey("tx"), None),
    ])
    r = run_cli(capsys, "dump-log", "--files", str(segment), "--transaction-log-decoder", "--skip-record-metadata")
    assert (r.rc, r.err) == (0, "")
    key = '| key: {"type":"0","data":{"transactionalId":"tx"}} '
    assert r.lines[3:] == [
        # Tagged fields only when not their default (previousProducerId here, clientTransactionVersion never).
        key + 'payload: {"version":"1","data":{"producerId":5,"previousProducerId":4,"producerEpoch":1,'
        '"transactionTimeoutMs":60000,"transactionStatus":"PrepareCommit","transactionPartitions":'
        '[{"topic":"orders","partitionIds":[0,1]}],"transactionLastUpdateTimestampMs":100,'
        '"transactionStartTimestampMs":90}}',
        key + 'payload: {"version":"1","data":{"producerId":5,"producerEpoch":1,"transactionTimeoutMs":60000,'
        '"transactionStatus":"Empty","transactionPartitions":null,"transactionLastUpdateTimestampMs":100,'
        '"transactionStartTimestampMs":-1}}',
        key + "payload: <DELETE>",
    ]

    topic_id = uuid.UUID(int=0x0123456789ABCDEF0123456789ABCDEF)
    segment = _segment(tmp_path, [cr.encode_record(cr.ShareSnapshotKey("sg", topic_id, 2), cr.ShareSnapshotValue(
        1, 0, 3, 10, (cr.ShareStateBatch(10, 12, 2, 1),)))])
    r = run_cli(capsys, "dump-log", "--files", str(segment), "--share-group-state-decoder")
    assert (r.rc, r.err) == (0, "")
    assert r.lines[3].endswith(
        ' headerKeys: [] key: {"type":"0","data":{"groupId":"sg","topicId":"ASNFZ4mrze8BI0VniavN7w","partition":2}} '
        'payload: {"version":"0","data":{"snapshotEpoch":1,"stateEpoch":0,"leaderEpoch":3,"startOffset":10,'
        '"stateBatches":[{"firstOffset":10,"lastOffset":12,"deliveryState":2,"deliveryCount":1}]}}')

    # A record without a key stops the dump, as Kafka's tool does.
    segment = _segment(tmp_path, [(None, b"\x00\x00")])
    r = run_cli(capsys, "dump-log", "--files", str(segment), "--share-group-state-decoder")
    assert (r.rc, r.err) == (1, "minikafka: error: Failed to decode message at offset 0 using the specified "
                                "decoder (message had a missing key)\n")


def test_cluster_metadata_decoder_prints_kraft_records_as_kafka_does(tmp_path: Path, capsys) -> None:
    topic_id = uuid.UUID(int=0x0123456789ABCDEF0123456789ABCDEF)
    segment = _segment(tmp_path, [
        # A TopicRecord as Kafka's MetadataRecordSerde frames it (frame 1, type 2, version 0), written by hand.
        (None, b"\x01\x02\x00\x07orders" + topic_id.bytes + b"\x00"),
        (None, encode_metadata_record("PartitionChangeRecord", {"partition_id": 1, "topic_id": topic_id,
                                                                "isr": [2, 3], "leader": 3}, version=0)),
        (None, encode_metadata_record("FenceBrokerRecord", {"id": 1, "epoch": 42})),
        (None, b"\x01\x7f\x00"),  # a record type nobody knows
    ])
    r = run_cli(capsys, "dump-log", "--files", str(segment), "--cluster-metadata-decoder", "--skip-record-metadata")
    assert (r.rc, r.err) == (0, "")
    assert r.lines[3:] == [  # no key: Kafka prints the record indent, then " payload: ..."
        '|  payload: {"type":"TOPIC_RECORD","version":0,"data":{"name":"orders","topicId":"ASNFZ4mrze8BI0VniavN7w"}}',
        # Tagged fields only when not their default (no replicas, no leader recovery state).
        '|  payload: {"type":"PARTITION_CHANGE_RECORD","version":0,"data":{"partitionId":1,'
        '"topicId":"ASNFZ4mrze8BI0VniavN7w","isr":[2,3],"leader":3}}',
        '|  payload: {"type":"FENCE_BROKER_RECORD","version":0,"data":{"id":1,"epoch":42}}',
        "|  payload: Error at 3, skipping. unknown metadata record type 127",
    ]
