"""kcat (Debian's, with its own builtin librdkafka) against the broker: metadata
listing, producing from stdin (keys, headers, snappy) and consuming back."""

from __future__ import annotations

import json
import subprocess

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from clients_common import (
    CODECS,
    KCAT,
    kcat_version,
    report_client_versions,  # noqa: F401  (session fixture, used via pytestmark)
    stored_batch_headers,
)

pytestmark = [
    pytest.mark.clients,
    pytest.mark.skipif(KCAT is None, reason="kcat binary not found on PATH"),
    pytest.mark.usefixtures("report_client_versions"),
]


def kcat(*args: str, input: bytes | None = None, timeout: float = 30) -> bytes:
    """Run kcat; fail the test (with its stderr) unless it exits 0."""
    r = subprocess.run([KCAT, *args], input=input, capture_output=True, timeout=timeout)
    assert r.returncode == 0, f"kcat {' '.join(args)} exited {r.returncode}: {r.stderr.decode(errors='replace')}"
    return r.stdout


def consume_json(bootstrap: str, topic: str, *extra: str) -> list[dict]:
    out = kcat("-C", "-b", bootstrap, "-t", topic, "-o", "beginning", "-e", "-q", "-J", *extra)
    return [json.loads(line) for line in out.decode().splitlines() if line.strip()]


def create(bootstrap: str, name: str, partitions: int) -> None:
    a = AdminClient({"bootstrap.servers": bootstrap})
    a.create_topics([NewTopic(name, partitions, 1)], operation_timeout=5)[name].result(timeout=10)


def test_kcat_version() -> None:
    v = kcat_version()
    print(v)
    assert v.startswith("1."), v


def test_list_metadata(broker_thread) -> None:
    bs = broker_thread.bootstrap
    create(bs, "kc-three", 3)
    create(bs, "kc-one", 1)
    md = json.loads(kcat("-L", "-b", bs, "-J"))
    node = broker_thread.config.node_id
    assert md["brokers"] == [{"id": node, "name": bs}]
    assert md["controllerid"] == node
    topics = {t["topic"]: t for t in md["topics"]}
    assert {"kc-three", "kc-one"} <= set(topics)
    parts = sorted(topics["kc-three"]["partitions"], key=lambda p: p["partition"])
    assert [p["partition"] for p in parts] == [0, 1, 2]
    for p in parts:
        assert p["leader"] == node and p["replicas"] == [{"id": node}] and p["isrs"] == [{"id": node}]
        assert "error" not in p
    assert "error" not in topics["kc-three"]

    # One topic only; and the plain text listing.
    one = json.loads(kcat("-L", "-b", bs, "-t", "kc-one", "-J"))
    assert [t["topic"] for t in one["topics"]] == ["kc-one"]
    text = kcat("-L", "-b", bs).decode()
    assert " 1 brokers:" in text and f"broker {node} at {bs} (controller)" in text
    assert 'topic "kc-three" with 3 partitions:' in text


def test_produce_keys_and_plain_then_consume(broker_thread) -> None:
    bs = broker_thread.bootstrap
    # Keyed (-K:), one partition: exact order, with headers on every message.
    lines = [f"key-{i}:value {i} \u00e9" for i in range(200)] + [":empty key", "c:"]
    kcat("-P", "-b", bs, "-t", "kc-keyed", "-K:", "-H", "src=kcat", "-H", "n=1",
         input=("\n".join(lines) + "\n").encode())
    out = kcat("-C", "-b", bs, "-t", "kc-keyed", "-o", "beginning", "-e", "-q", "-f", "%k|%s|%h|%o\n")
    expected = [f"{ln.split(':', 1)[0]}|{ln.split(':', 1)[1]}|src=kcat,n=1|{i}" for i, ln in enumerate(lines)]
    assert out.decode().splitlines() == expected

    # Plain (no key): null keys in JSON output.
    plain = [f"plain line {i}" for i in range(50)]
    kcat("-P", "-b", bs, "-t", "kc-plain", input=("\n".join(plain) + "\n").encode())
    recs = consume_json(bs, "kc-plain")
    assert [r["payload"] for r in recs] == plain
    assert all(r["key"] is None for r in recs)
    assert [r["offset"] for r in recs] == list(range(len(plain)))

    # Keyed over 3 partitions: per-key partitioning, per-partition order kept.
    create(bs, "kc-spread", 3)
    spread = [(f"user-{i % 17}", f"event-{i}") for i in range(300)]
    kcat("-P", "-b", bs, "-t", "kc-spread", "-K:", input="".join(f"{k}:{v}\n" for k, v in spread).encode())
    recs = consume_json(bs, "kc-spread")
    assert sorted((r["key"], r["payload"]) for r in recs) == sorted(spread)
    part_of: dict[str, int] = {}
    for r in recs:
        assert part_of.setdefault(r["key"], r["partition"]) == r["partition"], "a key spans partitions"
    assert len(set(part_of.values())) > 1
    for p in range(3):
        got = [(r["key"], r["payload"]) for r in recs if r["partition"] == p]
        assert got == [kv for kv in spread if part_of[kv[0]] == p]
        assert [r["offset"] for r in recs if r["partition"] == p] == list(range(len(got)))


SNAPPY_LINES = [f"k{i}:snappy payload {i} " + "abc" * (i % 40) for i in range(3000)]


def produce_snappy(bootstrap: str, topic: str) -> None:
    kcat("-P", "-b", bootstrap, "-t", topic, "-z", "snappy", "-K:", "-X", "linger.ms=50",
         input=("\n".join(SNAPPY_LINES) + "\n").encode())


def test_snappy_produce_and_consume(broker_thread) -> None:
    bs = broker_thread.bootstrap
    produce_snappy(bs, "kc-snappy")
    headers = stored_batch_headers(broker_thread, "kc-snappy", 0)
    assert sum(h.record_count for h in headers) == len(SNAPPY_LINES)
    assert all(h.compression == CODECS["snappy"] for h in headers)

    out = kcat("-C", "-b", bs, "-t", "kc-snappy", "-o", "beginning", "-e", "-q", "-f", "%k:%s\n")
    assert out.decode().splitlines() == SNAPPY_LINES
    # Tail of the topic by relative offset.
    out = kcat("-C", "-b", bs, "-t", "kc-snappy", "-o", "-3", "-e", "-q", "-f", "%o %k\n")
    assert out.decode().splitlines() == ["2997 k2997", "2998 k2998", "2999 k2999"]


def test_snappy_batches_are_stored_compressed(broker_thread) -> None:
    produce_snappy(broker_thread.bootstrap, "kc-snappy-stored")
    headers = stored_batch_headers(broker_thread, "kc-snappy-stored", 0)
    assert sum(h.record_count for h in headers) == len(SNAPPY_LINES)
    assert any(h.compression == CODECS["snappy"] and h.record_count > 1 for h in headers), (
        f"kcat -z snappy stored codecs {sorted({h.compression for h in headers})}")


def test_balanced_consumer_group_resumes(broker_thread) -> None:
    """kcat -G commits on exit; a second run of the same group only gets new messages."""
    bs = broker_thread.bootstrap
    create(bs, "kc-group", 2)
    kcat("-P", "-b", bs, "-t", "kc-group", "-p", "0", input=b"a\nb\nc\n")
    kcat("-P", "-b", bs, "-t", "kc-group", "-p", "1", input=b"d\ne\n")

    def group_run() -> list[str]:
        # Not "-o beginning": with -G, kcat's rebalance callback assigns every partition at
        # that offset, overriding the committed ones. auto.offset.reset only applies to
        # partitions without a committed offset.
        out = kcat("-b", bs, "-G", "kc-g", "-X", "auto.offset.reset=earliest", "-e", "-q", "-f", "%p:%s\n",
                   "-X", "session.timeout.ms=6000", "-X", "heartbeat.interval.ms=200", "kc-group")
        return out.decode().splitlines()

    first = group_run()
    assert sorted(first) == ["0:a", "0:b", "0:c", "1:d", "1:e"]
    assert [x for x in first if x.startswith("0:")] == ["0:a", "0:b", "0:c"]

    c = Consumer({"bootstrap.servers": bs, "group.id": "kc-g"})
    try:
        committed = c.committed([TopicPartition("kc-group", 0), TopicPartition("kc-group", 1)], timeout=10)
        assert [tp.offset for tp in committed] == [3, 2]
    finally:
        c.close()

    kcat("-P", "-b", bs, "-t", "kc-group", "-p", "1", input=b"f\n")
    assert group_run() == ["1:f"]
