"""The decoding behind the analysis tables: one record at a time vs the data source's batched path,
Arrow batches vs tuples, batch_stats vs iter_batches -- on a capture of real client traffic."""

from __future__ import annotations

import dataclasses
import random
import time
from pathlib import Path

import pytest

from helpers import damaged_variants
from minikafka.analysis import datasource
from minikafka.analysis.decode import COLUMNS, SCHEMAS, RecordDecoder, _errors, batch_stats, response_errors
from minikafka.capture import read_capture
from minikafka.protocol.records import InvalidRecordError, Record, build_batch, iter_batches
from minikafka.common.clock import SYSTEM_CLOCK

TABLES = ("requests", "partitions", "topics")


@pytest.fixture(scope="module")
def capture(tmp_path_factory) -> Path:
    """One broker, capture on: two producers (two topics, a few partitions), a consumer group member
    fetching, admin calls (CreateTopics, Metadata)."""
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    from minikafka.broker.config import BrokerConfig
    from minikafka.testing import BrokerThread

    cap = tmp_path_factory.mktemp("decode") / "cap"
    cfg = BrokerConfig(port=0, capture_dir=cap, group_initial_rebalance_delay_ms=0)
    with BrokerThread(cfg) as bt:
        admin = AdminClient({"bootstrap.servers": bt.bootstrap, "log_level": 3})
        for f in admin.create_topics([NewTopic("dec-a", 3, 1), NewTopic("dec-b", 1, 1)]).values():
            f.result(10)
        c = Consumer({"bootstrap.servers": bt.bootstrap, "group.id": "dec", "auto.offset.reset": "earliest",
                      "fetch.wait.max.ms": 50, "log_level": 3})
        c.subscribe(["dec-a", "dec-b"])
        p1 = Producer({"bootstrap.servers": bt.bootstrap, "client.id": "p1", "linger.ms": 0, "log_level": 3})
        p2 = Producer({"bootstrap.servers": bt.bootstrap, "client.id": "p2", "linger.ms": 5, "acks": "all",
                       "log_level": 3})
        got = 0
        for i in range(600):
            p1.produce("dec-a", b"a%d" % i + b"x" * (i % 50), partition=i % 3)
            if i % 3 == 0:
                p2.produce("dec-b", b"b%d" % i)
            if i % 50 == 0:
                p1.poll(0)
                p2.poll(0)
                got += len(c.consume(500, 0.05))
        assert p1.flush(15) == 0 and p2.flush(15) == 0
        deadline = time.monotonic() + 15
        while got < 800 and time.monotonic() < deadline:
            got += len(c.consume(500, 0.1))
        c.close()
        admin.list_topics(timeout=5)
        del p1, p2, admin
    return cap


@pytest.fixture(scope="module")
def records(capture: Path) -> list:
    recs = list(read_capture([capture]))
    assert {0, 1, 3, 19} <= {r.api_key for r in recs}  # Produce, Fetch, Metadata, CreateTopics
    return recs


def _mutants(records: list, n: int = 400) -> list:
    """Damaged copies of records: truncated or flipped frames, unknown api keys and versions, no response."""
    rng = random.Random(7)
    out = []
    for r in rng.sample(records, min(n, len(records))):
        k = rng.randrange(7)
        if k == 0:
            out.append(dataclasses.replace(r, request=r.request[:rng.randrange(len(r.request))]))
        elif k == 1 and r.response:
            out.append(dataclasses.replace(r, response=r.response[:rng.randrange(len(r.response))]))
        elif k == 2:
            out.append(dataclasses.replace(r, api_key=rng.choice([5, 99, 0, 1, 3])))
        elif k == 3:
            out.append(dataclasses.replace(r, api_version=rng.randrange(20)))
        elif k == 4:
            b = bytearray(r.request)
            b[rng.randrange(len(b))] = rng.randrange(256)
            out.append(dataclasses.replace(r, request=bytes(b)))
        elif k == 5:
            out.append(dataclasses.replace(r, response=None))
        else:
            out.append(dataclasses.replace(r, request=b""))
    return out


def _one_by_one(records: list) -> dict[str, list]:
    """The rows of every table through the decoder's public per-record methods (parse, request_row,
    partition_rows, topic_rows), as a caller decoding records itself would."""
    out: dict[str, list] = {t: [] for t in TABLES}
    dec = RecordDecoder("src")
    for r in records:
        req, resp, err = dec.parse(r)
        out["topics"].extend(dec.topic_rows(r, resp))
        out["requests"].append(dec.request_row(r, req, resp, err))
        out["partitions"].extend(dec.partition_rows(r, req, resp))
    return out


def test_batched_rows_match_the_per_record_methods(records: list) -> None:
    recs = records + _mutants(records)
    expected = _one_by_one(recs)
    decode_error = [name for name, _ in COLUMNS["requests"]].index("decode_error")
    assert any(row[decode_error] is not None for row in expected["requests"])  # some decode errors
    for table in TABLES:
        assert list(RecordDecoder("src").iter_rows(recs, table)) == expected[table], table
        dec = RecordDecoder("src")
        assert [row for r in recs for row in dec.rows(r, table)] == expected[table], table
        width = len(COLUMNS[table])
        assert all(len(row) == width for row in expected[table])


def test_rows_of_real_traffic(records: list) -> None:
    rows = {t: list(RecordDecoder("src").iter_rows(records, t)) for t in TABLES}
    names = [c for c, _ in COLUMNS["requests"]]
    reqs = [dict(zip(names, row)) for row in rows["requests"]]
    assert len(reqs) == len(records)
    assert all(r["decode_error"] is None for r in reqs)
    produce = [r for r in reqs if r["api_name"] == "Produce"]
    assert sum(r["record_count"] for r in produce) == 800
    assert all(r["request_partitions"] == r["response_partitions"] for r in produce)
    fetch = [r for r in reqs if r["api_name"] == "Fetch"]
    assert fetch and sum(r["record_count"] for r in fetch) >= 800
    pnames = [c for c, _ in COLUMNS["partitions"]]
    parts = [dict(zip(pnames, row)) for row in rows["partitions"]]
    assert {p["topic"] for p in parts} == {"dec-a", "dec-b"}
    assert sum(p["record_count"] for p in parts if p["api_name"] == "Produce") == 800
    assert {t[1] for t in rows["topics"]} >= {"dec-a", "dec-b"}


def _batch_stats_reference(records) -> tuple[int, int, int, int, int]:
    """batch_stats as it was defined, over iter_batches (no CRC check, truncated tail allowed)."""
    if records is None:
        return 0, 0, 0, -1, -1
    count = batches = 0
    first = last = -1
    try:
        for h, _view in iter_batches(records, check_crc=False, allow_truncated_tail=True):
            count += h.record_count
            batches += 1
            if first < 0:
                first = h.base_offset
            last = h.last_offset
    except InvalidRecordError:
        pass
    return len(records), count, batches, first, last


def test_batch_stats_matches_iter_batches() -> None:
    rng = random.Random(3)
    batches = []
    for i in range(6):
        b = bytearray(build_batch([Record(value=b"v" * rng.randrange(40)) for _ in range(1 + i)],
                                  compression=i % 2, base_timestamp=SYSTEM_CLOCK.time_ms()))
        b[0:8] = (100 * i).to_bytes(8, "big")
        batches.append(bytes(b))
    cases = [None, b"", b"\x00" * 10] + batches + [b"".join(batches[:3]), b"".join(batches)]
    cases += damaged_variants(rng, cases[3:], 60, [8, 9, 10, 11, 16, 21, 22, 57, 58])
    for c in cases:
        assert batch_stats(c) == _batch_stats_reference(c)
        if c is not None:
            assert batch_stats(memoryview(c)) == _batch_stats_reference(memoryview(c))


def _random_body(node, rng: random.Random, depth: int = 0) -> dict:
    """A body for a response KStruct: arrays of structs with 0-2 entries, error codes often non-zero."""
    from minikafka.protocol import types as T

    o: dict = {}
    for name, sub, _default in node.fields:
        if name == "error_code":
            o[name] = rng.choice([0, 0, -1, rng.randrange(1, 120)])
        elif isinstance(sub, T.KStruct):
            o[name] = _random_body(sub, rng, depth + 1)
        elif isinstance(sub, T.KArray) and isinstance(sub.subcon, T.KStruct) and depth < 4:
            o[name] = None if sub.nullable and rng.random() < 0.2 else [
                _random_body(sub.subcon, rng, depth + 1) for _ in range(rng.randrange(3))]
    for name, sub, _default in (node.tagged.values() if node.flexible else ()):
        if isinstance(sub, T.KStruct) and rng.random() < 0.5:
            o[name] = _random_body(sub, rng, depth + 1)
    return o


def test_compiled_error_walk_matches_the_generic_one(records: list) -> None:
    """response_errors (a walker compiled per api version) finds the error codes _errors finds, in order."""
    from minikafka.protocol.api import APIS

    rng = random.Random(11)
    checked = 0
    for key, api in APIS.items():
        for version in range(api.min_version, api.max_version + 1):
            for _ in range(15):
                try:
                    raw = api.response.build(_random_body(api.response.construct(version), rng), version)
                except Exception:  # noqa: BLE001, S112 - a body the generator cannot make valid: skipped
                    continue
                body = api.response.parse(raw, version)
                expected: list[int] = []
                _errors(body, expected)
                assert response_errors(key, version, body) == expected, (api.name, version)
                checked += 1
    assert checked > 1000
    dec = RecordDecoder()
    for r in records:
        _req, resp, _err = dec.parse(r)
        if resp is not None:
            expected = []
            _errors(resp, expected)
            assert response_errors(r.api_key, r.api_version, resp) == expected


def test_arrow_batches_hold_the_rows(records: list) -> None:
    pa = pytest.importorskip("pyarrow")
    recs = records + _mutants(records)
    for table in TABLES:
        rows = list(RecordDecoder("src").iter_rows(recs, table))
        batches = list(datasource.arrow_batches(iter(rows), table, batch_rows=97))
        assert all(b.schema == datasource.arrow_schema(table) for b in batches)
        assert all(b.num_rows == 97 for b in batches[:-1])
        got = [tuple(d.values()) for b in batches for d in b.to_pylist()]
        assert got == rows, table
    # A value Spark would coerce into a string column is coerced the same way.
    schema = pa.schema([pa.field("s", pa.string()), pa.field("n", pa.int32())])
    batch = datasource.rows_to_batch([("x", 1), (True, 2), (7, None), (None, 3)], schema)
    assert batch.column(0).to_pylist() == ["x", "true", "7", None]


def test_arrow_schema_is_what_spark_expects(spark) -> None:
    from pyspark.sql.pandas.types import to_arrow_schema

    for table in TABLES:
        spark_schema = spark.createDataFrame([], SCHEMAS[table]).schema
        assert to_arrow_schema(spark_schema, timezone="UTC").equals(datasource.arrow_schema(table))


def test_data_source_arrow_and_tuples_agree(spark, capture: Path, records: list) -> None:
    from minikafka.analysis.tables import read_table

    for table in TABLES:
        arrow = [tuple(r) for r in read_table(spark, str(capture), table).collect()]
        tuples = [tuple(r) for r in read_table(spark, str(capture), table, arrow="false").collect()]
        assert arrow == tuples, table
    expected = list(RecordDecoder(next(capture.glob("*.mkcap")).name).iter_rows(records, "requests"))
    got = [tuple(r) for r in read_table(spark, str(capture), "requests").collect()]
    assert len(got) == len(records)
    assert sorted(got, key=repr) == sorted(expected, key=repr)


def test_options_are_case_insensitive(spark, capture: Path) -> None:
    """Spark hands the data source lower-cased option names; splitSize still splits."""
    from minikafka.analysis.tables import read_table

    whole = read_table(spark, str(capture), "requests")
    split = read_table(spark, str(capture), "requests", splitSize=16384)
    assert whole.rdd.getNumPartitions() == 1
    assert split.rdd.getNumPartitions() > 1
    assert sorted(map(tuple, split.collect()), key=repr) == sorted(map(tuple, whole.collect()), key=repr)


def test_splits_read_every_record_once(capture: Path, records: list) -> None:
    for split_size in (4096, 65536, 1 << 30):
        splits = datasource.plan_splits(str(capture), split_size)
        assert [r for s in splits for r in datasource.read_split(s)] == records


def test_read_split_matches_iter_blocks_on_damaged_files(capture: Path, tmp_path: Path) -> None:
    """A split starting mid-block finds the next block as iter_blocks would, skipped bytes counted alike."""
    from minikafka.capture.format import ReadStats, decode_records, iter_blocks

    rng = random.Random(2)
    data = bytearray(next(capture.glob("*.mkcap")).read_bytes())
    for _ in range(8):
        i = rng.randrange(len(data))
        data[i:i + rng.randrange(1, 100)] = rng.randbytes(rng.randrange(1, 150))
    data += b"MKCB" + rng.randbytes(40)
    path = tmp_path / "damaged.mkcap"
    path.write_bytes(bytes(data))
    cuts = sorted({0, len(data), *(rng.randrange(len(data)) for _ in range(30)), *(len(data) - k for k in range(20))})
    for _ in range(100):
        start, end = sorted(rng.sample(cuts, 2))
        ref_stats, stats = ReadStats(), ReadStats()
        ref = [r for _o, n, p in iter_blocks(bytes(data), start, end, ref_stats) for r in decode_records(p, n)]
        got = list(datasource.read_split(datasource.CaptureSplit(str(path), "mkcap", start, end), {}, stats))
        assert got == ref and stats == ref_stats, (start, end)


def test_tables_read_only_the_records_they_need(capture: Path) -> None:
    from minikafka.analysis.decode import TABLE_API_KEYS

    for split_size in (65536, 1 << 30):
        for split in datasource.plan_splits(str(capture), split_size):
            for table in TABLES:
                all_records = RecordDecoder("s").iter_rows(datasource.read_split(split), table)
                needed = datasource.read_split(split, api_keys=TABLE_API_KEYS[table])
                assert list(RecordDecoder("s").iter_rows(needed, table)) == list(all_records), table
