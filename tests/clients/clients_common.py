"""Shared helpers for the real-client tests in tests/clients/.

Imported as ``clients_common`` (``tests/`` is on the pytest pythonpath; the
name is unique across the tree).
"""

from __future__ import annotations

import random
import re
import shutil
import subprocess
import time
import uuid
import warnings
from dataclasses import dataclass
from typing import Callable, Iterable, TypeVar

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition

from minikafka.protocol.records import RecordBatchHeader, iter_batches
from minikafka.testing import BrokerThread

import waiting

T = TypeVar("T")

KCAT = shutil.which("kcat")

# KIP-848 broker settings for client tests: members learn of a new assignment within half a second.
KIP848_BROKER_SETTINGS = {"group_consumer_heartbeat_interval_ms": 500, "group_consumer_min_heartbeat_interval_ms": 100,
                          "group_initial_rebalance_delay_ms": 0}


def unique_name(prefix: str) -> str:
    """A fresh name (topic, group, client or transactional id) for one test."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


group_id = unique_name  # a fresh group id for one test


# Record batch compression codec ids (attributes bits 0-2).
CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


@dataclass(frozen=True)
class Msg:
    """One message as produced and as it must be consumed back."""

    partition: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...]


def make_messages(n: int, partitions: int, *, seed: int = 1, tag: str = "m") -> list[Msg]:
    """``n`` deterministic messages spread round-robin over ``partitions``.

    Keys, values and headers vary in size and content; a few keys and values
    are None (null key, tombstone) and a few messages carry no headers.
    """
    rnd = random.Random(seed)
    words = [b"alpha", b"beta", b"gamma", b"delta", b"\x00\xff", "\u00e9t\u00e9".encode()]
    out = []
    for i in range(n):
        key = None if i % 89 == 7 else b"%s-key-%05d" % (tag.encode(), i)
        if i % 97 == 5:
            value = None
        else:
            value = b"%s-%d:" % (tag.encode(), i) + b" ".join(rnd.choice(words) for _ in range(rnd.randrange(0, 60)))
        if i % 31 == 3:
            headers: tuple[tuple[str, bytes], ...] = ()
        else:
            headers = (("idx", str(i).encode()), ("tag", tag.encode()))
            if i % 5 == 0:
                headers += (("bin", bytes(rnd.randrange(256) for _ in range(rnd.randrange(0, 16)))),)
            if i % 11 == 0:
                headers += (("idx", b"dup-name"),)  # repeated header names keep their order
        out.append(Msg(i % partitions, key, value, headers))
    return out


def by_partition(msgs: Iterable[Msg]) -> dict[int, list[Msg]]:
    out: dict[int, list[Msg]] = {}
    for m in msgs:
        out.setdefault(m.partition, []).append(m)
    return out


def wait_for(fn: Callable[[], T], timeout: float = 15, interval: float = 0.05, what: str = "condition") -> T:
    """Call ``fn`` until it returns something truthy; fail after ``timeout`` seconds."""
    return waiting.wait_for(fn, timeout, what, interval)


def stored_batches(b: BrokerThread, topic: str, partition: int) -> list[tuple[RecordBatchHeader, bytes]]:
    """The batches the broker stores for ``topic``-``partition``: each header and the batch's bytes."""

    def read() -> list[tuple[RecordBatchHeader, bytes]]:
        part = b.broker.replica_manager.get(topic, partition)
        assert part is not None, f"{topic}-{partition} not hosted"
        lg = part.log
        info = lg.read(lg.log_start_offset, 1 << 30)
        return [(h, bytes(view)) for chunk in info.chunks for h, view in iter_batches(bytes(chunk))]

    return b.call(read)


def stored_batch_headers(b: BrokerThread, topic: str, partition: int) -> list[RecordBatchHeader]:
    """The headers of the batches the broker stores for ``topic``-``partition``."""
    return [h for h, _ in stored_batches(b, topic, partition)]


# -- confluent-kafka helpers (used by the confluent-kafka and the cross-client tests) --------

def ck_to_msg(m) -> Msg:
    return Msg(m.partition(), m.key(), m.value(), tuple(m.headers() or ()))


def ck_produce_all(producer: Producer, topic: str, msgs: list[Msg]) -> list[tuple[int, int]]:
    """Produce ``msgs`` in order; return their delivery reports' ``(partition, offset)``, in produce order."""
    reports: list[tuple[int, int] | None] = [None] * len(msgs)
    errors: list[str] = []

    def report(i: int):
        def cb(err, m) -> None:
            if err is not None:
                errors.append(f"message {i}: {err}")
            else:
                reports[i] = (m.partition(), m.offset())
        return cb

    for i, m in enumerate(msgs):
        while True:
            try:
                producer.produce(topic, value=m.value, key=m.key, headers=list(m.headers), partition=m.partition,
                                 on_delivery=report(i))
                break
            except BufferError:  # local queue full: let deliveries drain
                producer.poll(0.1)
        producer.poll(0)
    remaining = producer.flush(30)
    assert remaining == 0, f"{remaining} messages not delivered"
    assert not errors, errors[:5]
    assert all(r is not None for r in reports)
    return reports  # type: ignore[return-value]


def _ck_read_to_end(bootstrap: str, topic: str, partitions: int, *, expected: int, timeout: float,
                    skip_retriable: bool, **config: object) -> list:
    """Read every partition of ``topic`` from the beginning until each is at its end and ``expected`` records
    came (no group membership); ``skip_retriable`` passes over retriable and transport errors."""
    c = Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"reader-{uuid.uuid4().hex[:8]}",
        "enable.auto.commit": False, "enable.partition.eof": True, "fetch.wait.max.ms": 100, **config,
    })
    try:
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        got: list = []
        eof: set[int] = set()
        deadline = time.monotonic() + timeout
        while not (len(eof) == partitions and len(got) >= expected):
            assert time.monotonic() < deadline, \
                f"read {len(got)}/{expected} messages of {topic}, eof on {sorted(eof)}"
            for m in c.consume(500, 0.2):
                if m.error():
                    if m.error().code() == KafkaError._PARTITION_EOF:
                        eof.add(m.partition())
                        continue
                    if skip_retriable and (m.error().retriable() or m.error().code() == KafkaError._TRANSPORT):
                        continue
                    raise KafkaException(m.error())
                eof.discard(m.partition())
                got.append(m)
        return got
    finally:
        c.close()


def ck_read_all(bootstrap: str, topic: str, partitions: int, expected: int, timeout: float = 30) -> list:
    """Read every partition of ``topic`` from the beginning to its end (no group membership)."""
    return _ck_read_to_end(bootstrap, topic, partitions, expected=expected, timeout=timeout, skip_retriable=False)


def delivered(msgs: Iterable, offset: int) -> set[int]:
    """Partitions among the confluent-kafka messages ``msgs`` that delivered ``offset``."""
    return {m.partition() for m in msgs if m.offset() == offset}


def ck_poll_until(consumer: Consumer, done: Callable[[list], bool], what: str) -> list:
    """Poll ``consumer`` (error-free messages only), collecting messages, until
    ``done(messages)``; return them."""
    got: list = []

    def step() -> bool:
        m = consumer.poll(0.05)
        if m is not None:
            assert m.error() is None, m.error()
            got.append(m)
        return done(got)

    wait_for(step, what=what)
    return got


def kcat_version() -> str:
    if KCAT is None:
        return "kcat not installed"
    out = subprocess.run([KCAT, "-V"], capture_output=True, text=True, timeout=10).stdout
    m = re.search(r"Version (\S+) .*?librdkafka (\S+)", out)
    return f"{m.group(1)} (librdkafka {m.group(2)})" if m else out.strip()


def _version_str(v) -> str:
    return v[0] if isinstance(v, tuple) else str(v)


def client_versions() -> dict[str, str]:
    """Versions of every real client these tests drive."""
    import confluent_kafka

    with warnings.catch_warnings():  # kafka-python 3 loads its schemas with importlib.resources' legacy API
        warnings.simplefilter("ignore", DeprecationWarning)
        import kafka

    return {
        "confluent-kafka": _version_str(confluent_kafka.version()),
        "librdkafka": confluent_kafka.libversion()[0],
        "kafka-python": kafka.__version__,
        "kcat": kcat_version(),
    }


_reported = False


@pytest.fixture(scope="session")
def report_client_versions(request: pytest.FixtureRequest, record_testsuite_property) -> dict[str, str]:
    """Write the client versions to the terminal once per session (and to junit xml)."""
    global _reported
    versions = client_versions()
    if not _reported:
        _reported = True
        line = "client versions: " + ", ".join(f"{k} {v}" for k, v in versions.items())
        tr = request.config.pluginmanager.getplugin("terminalreporter")
        capman = request.config.pluginmanager.getplugin("capturemanager")
        if tr is not None and capman is not None:
            with capman.global_and_fixture_disabled():
                tr.write_line("")
                tr.write_line(line)
        else:  # pragma: no cover
            print(line)
        for k, v in versions.items():
            record_testsuite_property(f"version.{k}", v)
    return versions


# -- transactions (confluent-kafka helpers for tests/clients/test_transactions_clients.py and
#    tests/cluster/test_cluster_transactions.py) ------------------------------------------

def ck_offsets_client(bootstrap: str, *, committed: bool) -> Consumer:
    """A consumer to ask end offsets with (:func:`ck_end_offsets`) under one isolation level."""
    return Consumer({"bootstrap.servers": bootstrap, "group.id": f"offsets-{uuid.uuid4().hex[:8]}",
                     "isolation.level": "read_committed" if committed else "read_uncommitted",
                     "topic.metadata.refresh.interval.ms": 1000})


def ck_end_offsets(bootstrap: str, topic: str, partitions: int, *, committed: bool,
                   client: Consumer | None = None) -> dict[int, int]:
    """Each partition's end offset by ListOffsets(latest): the LSO under ``committed`` (read_committed),
    else the high watermark.

    Pass a ``client`` (:func:`ck_offsets_client`, same isolation) to ask repeatedly: a new librdkafka
    client may take a second or more before its first request (it replaces its bootstrap connections)."""
    c = client or ck_offsets_client(bootstrap, committed=committed)
    try:
        return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10, cached=False)[1]
                for p in range(partitions)}
    finally:
        if client is None:
            c.close()


def ck_wait_stable(bootstrap: str, topic: str, partitions: int, timeout: float = 20) -> dict[int, int]:
    """Wait until no transaction holds any partition's LSO back (LSO == high watermark); return the offsets."""
    committed = ck_offsets_client(bootstrap, committed=True)
    uncommitted = ck_offsets_client(bootstrap, committed=False)

    def stable() -> dict[int, int] | None:
        try:
            lso = ck_end_offsets(bootstrap, topic, partitions, committed=True, client=committed)
            hw = ck_end_offsets(bootstrap, topic, partitions, committed=False, client=uncommitted)
        except KafkaException:  # e.g. a leader moving: ask again
            return None
        return hw if lso == hw else None

    try:
        return wait_for(stable, timeout=timeout, interval=0.1, what=f"{topic}: LSO == high watermark")
    finally:
        committed.close()
        uncommitted.close()


def ck_read_isolated(bootstrap: str, topic: str, partitions: int, *, committed: bool, timeout: float = 30) -> list:
    """Every record of ``topic`` a consumer reads from the beginning up to each partition's end (the LSO under
    ``committed``: read_committed, else the high watermark), with no group membership.

    Call it once the partitions are stable (:func:`ck_wait_stable`) to read everything."""
    return _ck_read_to_end(bootstrap, topic, partitions, expected=0, timeout=timeout, skip_retriable=True,
                           **{"isolation.level": "read_committed" if committed else "read_uncommitted",
                              "topic.metadata.refresh.interval.ms": 1000})
