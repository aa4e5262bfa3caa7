"""Log compaction (the log cleaner, minikafka/broker/log/cleaner*.py) seen by real clients:

1. confluent-kafka writes 200,000 records over 1,000 keys, deleting 100 keys with tombstones, to a compacted
   topic with 1 MiB segments, with a plain, an idempotent and a transactional producer (the latter aborting some
   transactions); once cleaned, a consumer reads one record per key, its latest value at the offset it was
   written at; the tombstones stay for ``delete.retention.ms`` and a later cleaning removes them;
2. kafka-python and aiokafka read a cleaned topic (gaps, emptied batches, transaction markers, rewritten
   compressed batches, delete horizons) and get the same records as confluent-kafka;
3. ``minikafka serve`` killed with SIGKILL while it cleans, several times, loses no acknowledged write;
4. a 3-broker cluster: every replica ends with the same records after cleaning, a follower restarted empty
   copies the cleaned log, and a leader change changes nothing a consumer sees;
5. ``/metrics`` has the cleaner's gauges;
6. an open transaction bounds the cleaning (the last stable offset): a committed value stays while a
   transaction that may abort overwrites it;
7. offsets for times (ListOffsets by timestamp) find the records the cleaning kept, with all three clients.
"""

from __future__ import annotations

import asyncio
import os
import random
import re
import signal
import subprocess
import sys
import time
import urllib.request
import uuid
import warnings
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families

from clients_common import ck_read_isolated, ck_wait_stable, stored_batch_headers, wait_for
from clients_common import report_client_versions  # noqa: F401  (session fixture, used via pytestmark)
from minikafka.broker.cluster import Cluster
from minikafka.broker.log import Log
from minikafka.protocol.records import decode_records
from minikafka.testing import BrokerThread, ClusterThread

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka

pytestmark = [pytest.mark.clients, pytest.mark.usefixtures("report_client_versions")]

ROOT = Path(__file__).resolve().parents[2]
MIB = 1 << 20
DELETE_RETENTION_MS = 300


def compacted_configs(segment_bytes: int = MIB, **extra: str) -> dict[str, str]:
    return {"cleanup.policy": "compact", "segment.bytes": str(segment_bytes), "min.cleanable.dirty.ratio": "0.01",
            "delete.retention.ms": str(DELETE_RETENTION_MS), **extra}


# -- what was written, and what a compacted topic must hold --------------------------------------

Rec = tuple[int, bytes, "bytes | None"]  # (offset, key, value) as stored and as read back


@dataclass
class Delivered:
    """Delivery reports of one or more producers: ``(offset, key, value, aborted)`` of every record written."""

    records: list[tuple[int, bytes, bytes | None, bool]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def callback(self, aborted: bool = False) -> Callable:
        def cb(err, m) -> None:
            if err is not None:
                self.errors.append(str(err))
            else:
                self.records.append((m.offset(), m.key(), m.value(), aborted))
        return cb

    def latest(self) -> dict[bytes, tuple[int, bytes | None]]:
        """Each key's last committed write: ``key -> (offset, value)``."""
        out: dict[bytes, tuple[int, bytes | None]] = {}
        for offset, key, value, aborted in sorted(self.records):
            if not aborted:
                out[key] = (offset, value)
        return out

    def compacted(self, *, tombstones: bool, tombstones_from: int = 0) -> list[Rec]:
        """What a fully cleaned topic holds: each key's latest record, deleted keys' tombstones only while
        ``tombstones`` (before a cleaning after their delete horizon), or from offset ``tombstones_from`` on."""
        return sorted((o, k, v) for k, (o, v) in self.latest().items()
                      if v is not None or (tombstones and o >= tombstones_from))


def workload(n: int, keys: int, deletes: int, *, seed: int, tag: str) -> list[tuple[bytes, bytes | None]]:
    """``n`` writes over ``keys`` keys: ``deletes`` keys get a tombstone at moments spread over the second half
    and are never written again; 20 keys get a tombstone in the first half and are written again later."""
    rnd = random.Random(seed)
    pool = [b"key-%04d" % i for i in range(keys)]
    doomed = rnd.sample(pool, deletes)
    delete_at = dict(zip(sorted(rnd.sample(range(n // 2, n), deletes)), doomed))
    resurrect_at = set(rnd.sample(range(n // 4), 20))
    live = list(pool)
    out: list[tuple[bytes, bytes | None]] = []
    for i in range(n):
        if i in delete_at:
            key = delete_at[i]
            live.remove(key)
            out.append((key, None))
        elif i in resurrect_at:
            out.append((rnd.choice([k for k in live if k not in doomed]), None))
        else:
            out.append((rnd.choice(live), b"%s-%07d-" % (tag.encode(), i) + rnd.randbytes(rnd.randrange(8, 40))))
    return out


def produce(p: Producer, topic: str, items: list[tuple[bytes, bytes | None]], delivered: Delivered,
            aborted: bool = False) -> None:
    cb = delivered.callback(aborted)
    for key, value in items:
        while True:
            try:
                p.produce(topic, key=key, value=value, partition=0, on_delivery=cb)
                break
            except BufferError:  # local queue full: let deliveries drain
                p.poll(0.05)
        p.poll(0)


def flush(p: Producer, delivered: Delivered) -> None:
    assert p.flush(60) == 0, "messages not delivered"
    assert not delivered.errors, delivered.errors[:5]


def fill(bootstrap: str, topic: str, delivered: Delivered, tag: str) -> None:
    """More than a segment's worth of records with keys of their own: what was written before is then in
    inactive segments (the cleaner never touches the active one) and the log is dirty again."""
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    produce(p, topic, [(b"fill-%s-%05d" % (tag.encode(), i), b"f" * 1000) for i in range(1100)], delivered)
    flush(p, delivered)


def ck_read(bootstrap: str, topic: str, *, committed: bool = False, start: int | None = None,
            timeout: float = 30) -> list[Rec]:
    """Every record of partition 0 of ``topic`` a confluent-kafka consumer reads from the beginning (or from
    offset ``start``) to the end (the LSO when ``committed``), in order."""
    if start is None:
        msgs = ck_read_isolated(bootstrap, topic, 1, committed=committed)
    else:
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{uuid.uuid4().hex[:8]}",
                      "enable.auto.commit": False, "enable.partition.eof": True, "fetch.wait.max.ms": 100,
                      "isolation.level": "read_committed" if committed else "read_uncommitted"})
        try:
            c.assign([TopicPartition(topic, 0, start)])
            msgs, deadline = [], time.monotonic() + timeout
            while True:
                assert time.monotonic() < deadline, f"confluent-kafka read {len(msgs)} records from {start}"
                m = c.poll(0.2)
                if m is None:
                    continue
                if m.error():
                    if m.error().code() == KafkaError._PARTITION_EOF:
                        break
                    raise KafkaException(m.error())
                msgs.append(m)
        finally:
            c.close()
    got = [(m.offset(), m.key(), m.value()) for m in msgs]
    offsets = [r[0] for r in got]
    assert offsets == sorted(set(offsets)), "offsets not increasing"
    return got


def kp_read(bootstrap: str, topic: str, *, committed: bool = False, start: int | None = None,
            timeout: float = 30) -> list[Rec]:
    """The same with kafka-python, up to the end offset (LSO when ``committed``)."""
    c = kafka.KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, fetch_max_wait_ms=100,
                            request_timeout_ms=10000,
                            isolation_level="read_committed" if committed else "read_uncommitted")
    try:
        tp = kafka.TopicPartition(topic, 0)
        c.assign([tp])
        if start is None:
            c.seek_to_beginning(tp)
        else:
            c.seek(tp, start)
        end = c.end_offsets([tp])[tp]
        got: list[Rec] = []
        deadline = time.monotonic() + timeout
        while c.position(tp) < end:
            assert time.monotonic() < deadline, f"kafka-python stuck at {c.position(tp)} (end {end})"
            for records in c.poll(timeout_ms=100).values():
                got.extend((r.offset, r.key, r.value) for r in records)
        return got
    finally:
        c.close()


def aio_read(bootstrap: str, topic: str, *, committed: bool = False, start: int | None = None,
             timeout: float = 30) -> list[Rec]:
    """The same with aiokafka."""
    from aiokafka import AIOKafkaConsumer
    from aiokafka.structs import TopicPartition as ATopicPartition

    async def read() -> list[Rec]:
        c = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, fetch_max_wait_ms=100,
                             isolation_level="read_committed" if committed else "read_uncommitted")
        await c.start()
        try:
            tp = ATopicPartition(topic, 0)
            c.assign([tp])
            if start is None:
                await c.seek_to_beginning(tp)
            else:
                c.seek(tp, start)
            end = (await c.end_offsets([tp]))[tp]
            got: list[Rec] = []
            deadline = time.monotonic() + timeout
            while await c.position(tp) < end:
                assert time.monotonic() < deadline, f"aiokafka stuck at {await c.position(tp)} (end {end})"
                for records in (await c.getmany(timeout_ms=100)).values():
                    got.extend((r.offset, r.key, r.value) for r in records)
            return got
        finally:
            await c.stop()

    return asyncio.run(read())


def log_of(bt: BrokerThread, topic: str) -> Log:
    assert bt.broker is not None
    part = bt.broker.replica_manager.get(topic, 0)
    assert part is not None
    return part.log


def clean(bt: BrokerThread) -> int:
    """Run the broker's cleaner until no log is cleanable; the number of cleanings."""
    assert bt.broker is not None
    return bt.run(bt.broker.log_cleaner.clean_until_idle)


def wait_cleaned(bt: BrokerThread, topic: str) -> None:
    """Wait for the background cleaner to have cleaned ``topic``-0 up to its active segment."""
    assert bt.broker is not None
    cleaner = bt.broker.log_cleaner
    name = f"{topic}-0"

    def done() -> bool:
        lg = log_of(bt, topic)
        return name not in cleaner.manager.in_progress and \
            cleaner.manager.checkpoints.get(name, -1) >= lg.active_segment.base_offset
    wait_for(lambda: bt.call(done), timeout=60, what=f"the cleaner to clean {name}")


def wait_past_delete_horizons(headers) -> None:
    """Wait until the wall clock is past every tombstone's delete horizon (a batch's base timestamp once the
    cleaner stamped it), as a later cleaning must see it to remove them."""
    horizon = max((h.base_timestamp for h in headers if h.has_delete_horizon), default=0)
    wait_for(lambda: time.time_ns() // 1_000_000 > horizon, timeout=DELETE_RETENTION_MS / 1000 + 10,
             what="the delete horizon")


def check_tombstones_kept_or_removed(got: list[Rec], delivered: Delivered) -> None:
    """With the cleaner running in the background, a key deleted early may have lost its tombstone already:
    each live key once, latest value, deleted keys as a tombstone at their last offset or not at all."""
    want = delivered.compacted(tombstones=True)
    assert [r for r in got if r[2] is not None] == [r for r in want if r[2] is not None]
    assert {r for r in got if r[2] is None} <= {r for r in want if r[2] is None}


# -- 1. confluent-kafka: latest value per key, tombstones, idempotent and transactional producers -------

N_RECORDS = 200_000
N_KEYS = 1_000
N_DELETES = 100


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["plain", "idempotent", "transactional"])
def test_confluent_compacted_topic_keeps_the_latest_value_per_key(tmp_path: Path, kind: str) -> None:
    # The plain producer's topic is cleaned by the broker's own cleaner as it comes (every 50 ms); the other
    # two by explicit passes, so that the log before and after each cleaning can be compared.
    background = kind == "plain"
    with BrokerThread(data_dir=tmp_path, log_cleaner_enable=background, log_cleaner_backoff_ms=50) as bt:
        bs = bt.bootstrap
        topic = bt.create_topic(f"compact-{kind}", 1, 1, compacted_configs())
        items = workload(N_RECORDS, N_KEYS, N_DELETES, seed=len(kind), tag=kind)
        delivered = Delivered()
        common = {"bootstrap.servers": bs, "linger.ms": 20, "batch.size": 256 * 1024,
                  "queue.buffering.max.messages": 1_000_000, "queue.buffering.max.kbytes": 1 << 20}
        if kind == "plain":
            p = Producer({**common, "acks": "all", "enable.idempotence": False})
            produce(p, topic, items, delivered)
            flush(p, delivered)
        elif kind == "idempotent":
            p = Producer({**common, "enable.idempotence": True, "compression.type": "lz4"})
            produce(p, topic, items, delivered)
            flush(p, delivered)
        else:
            p = Producer({**common, "transactional.id": f"compact-{uuid.uuid4().hex[:8]}",
                          "compression.type": "zstd"})
            p.init_transactions(30)
            rnd = random.Random(5)
            for n, start in enumerate(range(0, N_RECORDS, 5000)):
                p.begin_transaction()
                produce(p, topic, items[start:start + 5000], delivered)
                flush(p, delivered)
                p.commit_transaction(30)
                if n % 4 == 1:  # an aborted transaction over every key, deleted ones too, some tombstones
                    p.begin_transaction()
                    junk = [(b"key-%04d" % rnd.randrange(N_KEYS),
                             None if rnd.randrange(10) == 0 else b"aborted-%d" % i) for i in range(1000)]
                    produce(p, topic, junk, delivered, aborted=True)
                    flush(p, delivered)  # written to the log (abort_transaction purges unsent records)
                    p.abort_transaction(30)
            assert sum(1 for r in delivered.records if r[3]) == 10 * 1000
        assert len(delivered.records) - sum(1 for r in delivered.records if r[3]) == N_RECORDS
        deleted = {k for k, (_, v) in delivered.latest().items() if v is None}
        assert len(deleted) == N_DELETES
        if kind == "transactional":  # before cleaning: a read_committed consumer's latest values
            ck_wait_stable(bs, topic, 1)
            before = {k: (o, v) for o, k, v in ck_read(bs, topic, committed=True)}
            assert before == delivered.latest()
        if not background:
            assert bt.call(lambda: log_of(bt, topic).num_segments) > 5

        def fill_clean_read(tag: str) -> list:
            """More records (so the log is dirty again and the main data cleanable), a cleaning, a read."""
            fill(bs, topic, delivered, tag)
            if background:
                wait_cleaned(bt, topic)
            else:
                assert clean(bt) >= 1
            return ck_read(bs, topic)

        got = fill_clean_read("a")
        if background:
            check_tombstones_kept_or_removed(got, delivered)
        else:  # one record per key at its offset, the deleted keys' tombstones too (for delete.retention.ms)
            assert got == delivered.compacted(tombstones=True)
        if kind == "transactional":  # aborted records gone; read_committed reads the same as before cleaning
            assert not any(v is not None and v.startswith(b"aborted") for _, _, v in got)
            assert ck_read(bs, topic, committed=True) == got
            assert {k: (o, v) for o, k, v in got} == before | {k: v for k, v in delivered.latest().items()
                                                               if k.startswith(b"fill")}

        # A later cleaning, after the tombstones' delete horizon, removes them.
        wait_past_delete_horizons(stored_batch_headers(bt, topic, 0))
        got = fill_clean_read("b")
        assert got == delivered.compacted(tombstones=False)
        assert not {k for _, k, _ in got} & deleted


# -- 2. kafka-python and aiokafka read what confluent-kafka reads -------------------------------------

@pytest.mark.slow
def test_kafka_python_and_aiokafka_read_a_cleaned_topic_as_confluent_does(tmp_path: Path) -> None:
    with BrokerThread(data_dir=tmp_path, log_cleaner_enable=False) as bt:
        bs = bt.bootstrap
        topic = bt.create_topic("compact-3clients", 1, 1, compacted_configs(256 * 1024))
        keys = [b"key-%03d" % i for i in range(500)]
        rnd = random.Random(7)
        delivered = Delivered()
        # An idempotent producer (lz4): every record of it is overwritten later, so the cleaner keeps its last
        # batch only, emptied (its sequence numbers stay known).
        p = Producer({"bootstrap.servers": bs, "enable.idempotence": True, "compression.type": "lz4",
                      "linger.ms": 20})
        produce(p, topic, [(rnd.choice(keys), b"idem-%d-" % i + rnd.randbytes(30)) for i in range(20_000)],
                delivered)
        flush(p, delivered)
        # A transactional producer (gzip): every key in a committed transaction, then committed and aborted
        # ones (the aborted ones resurrect and delete keys: no effect).
        t = Producer({"bootstrap.servers": bs, "transactional.id": f"c3-{uuid.uuid4().hex[:8]}",
                      "compression.type": "gzip", "linger.ms": 20})
        t.init_transactions(30)
        for n in range(8):
            abort = n % 3 == 2
            t.begin_transaction()
            items = [(k, b"txn-%d-%d" % (n, i)) for i, k in enumerate(keys)] if n == 0 else \
                [(rnd.choice(keys), None if rnd.randrange(8) == 0 else b"txn-%d-%d" % (n, i)) for i in range(2000)]
            produce(t, topic, items, delivered, aborted=abort)
            flush(t, delivered)
            if abort:
                t.abort_transaction(30)
            else:
                t.commit_transaction(30)
        # A plain producer (snappy) deletes 50 keys.
        p = Producer({"bootstrap.servers": bs, "compression.type": "snappy", "linger.ms": 20})
        produce(p, topic, [(k, None) for k in rnd.sample(keys, 50)], delivered)
        flush(p, delivered)
        fill(bs, topic, delivered, "a")
        ck_wait_stable(bs, topic, 1)
        assert clean(bt) >= 1

        stored = stored_batch_headers(bt, topic, 0)
        # What the clients have to cope with: emptied batches, transaction markers, delete horizons, gaps.
        assert any(h.record_count == 0 and not h.is_control for h in stored)
        assert any(h.is_control and h.record_count for h in stored)
        assert any(h.has_delete_horizon for h in stored)
        assert any(a.next_offset < b.base_offset for a, b in zip(stored, stored[1:]))

        def all_read(tombstones: bool) -> None:
            want = delivered.compacted(tombstones=tombstones)
            for committed in (False, True):
                assert ck_read(bs, topic, committed=committed) == want
                assert kp_read(bs, topic, committed=committed) == want, f"kafka-python, committed={committed}"
                assert aio_read(bs, topic, committed=committed) == want, f"aiokafka, committed={committed}"

        all_read(tombstones=True)
        # Reading from an offset the cleaning removed starts at the next record kept (a consumer resuming
        # from a committed offset does this).
        kept = [r[0] for r in delivered.compacted(tombstones=True)]
        gaps = [o + 1 for o, nxt in zip(kept, kept[1:]) if nxt > o + 1]
        for start in (gaps[0], gaps[len(gaps) // 2], gaps[-1]):
            want = [r for r in delivered.compacted(tombstones=True) if r[0] >= start]
            assert ck_read(bs, topic, start=start) == want
            assert kp_read(bs, topic, start=start) == want, f"kafka-python from {start}"
            assert aio_read(bs, topic, start=start) == want, f"aiokafka from {start}"
        wait_past_delete_horizons(stored)
        fill(bs, topic, delivered, "b")
        assert clean(bt) >= 1
        all_read(tombstones=False)


# -- 3. SIGKILL while cleaning ---------------------------------------------------------------------

@dataclass
class ServeProcess:
    """``minikafka serve`` in a process of its own."""

    proc: subprocess.Popen
    bootstrap: str
    http: str


def start_serve(data_dir: Path, log_path: Path, *overrides: str) -> ServeProcess:
    args = [sys.executable, "-m", "minikafka", "serve", "--port", "0", "--http-port", "0", "--data-dir",
            str(data_dir), "--log-level", "INFO"]
    for o in overrides:
        args += ["-o", o]
    with open(log_path, "ab") as err:
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=err, cwd=ROOT, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    m = re.search(r"ready on (\S+) \(.*\), HTTP on (\S+);", line)
    if not m:
        proc.kill()
        proc.wait(10)
        pytest.fail(f"minikafka serve did not start: {line!r}; see {log_path}")
    return ServeProcess(proc, m.group(1), m.group(2))


def in_flight_cleaning(d: Path) -> list[str]:
    """The files of a cleaning not swapped in yet (``.cleaned``: not committed, ``.swap``: committed)."""
    return sorted(n for n in os.listdir(d) if n.endswith((".cleaned", ".swap")))


def checkpointed(logs_dir: Path, topic: str) -> int:
    """The partition's offset in the cleaner's ``cleaner-offset-checkpoint`` (-1: none yet)."""
    try:
        lines = (logs_dir / "cleaner-offset-checkpoint").read_text().splitlines()
    except FileNotFoundError:
        return -1
    for line in lines[2:]:
        t, part, offset = line.split()
        if (t, part) == (topic, "0"):
            return int(offset)
    return -1


def kill_test_value(counter: int) -> bytes:
    return b"%d|" % counter + bytes([counter % 251]) * (100 + counter % 100)


@pytest.mark.slow
def test_sigkill_during_cleanings_loses_no_acknowledged_write(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    topic = "compact-kill"
    logs_dir = data_dir / "logs"  # where `serve --data-dir` keeps the partitions' logs
    pdir = logs_dir / f"{topic}-0"
    overrides = ("log.cleaner.backoff.ms=50",)
    keys = [b"key-%03d" % i for i in range(300)]
    rnd = random.Random(11)
    # Every record produced: its key and whether it is a tombstone (else its value is kill_test_value(counter)),
    # by counter (a header of the record).
    sent_key = array("H")
    sent_tombstone = bytearray()
    acked: dict[bytes, int] = {}  # key -> its latest acknowledged counter
    killed_mid_cleaning: list[list[str]] = []
    srv = start_serve(data_dir, tmp_path / "broker.log", *overrides)
    try:
        a = AdminClient({"bootstrap.servers": srv.bootstrap})
        a.create_topics([NewTopic(topic, 1, 1, config=compacted_configs(
            128 * 1024, **{"delete.retention.ms": "100"}))])[topic].result(30)
        del a

        for r in range(6):
            # Kill at the first sight of a cleaning in flight once the round had `threshold` records acknowledged
            # (every third round: at `threshold`, wherever the cleaner is).
            threshold = 2000 + 2000 * r
            at_any_moment = r % 3 == 2
            reports = [0, 0]  # acknowledged, failed

            def report(c: int, err, m) -> None:
                if err is None:
                    k = keys[sent_key[c]]
                    acked[k] = max(acked.get(k, -1), c)
                    reports[0] += 1
                else:
                    reports[1] += 1

            p = Producer({"bootstrap.servers": srv.bootstrap, "enable.idempotence": True, "linger.ms": 5,
                          "log_level": 0})
            round_start = len(sent_key)
            deadline = time.monotonic() + 120
            while True:
                assert srv.proc.poll() is None, f"the broker died on its own; see {tmp_path / 'broker.log'}"
                assert time.monotonic() < deadline, f"round {r}: {reports} records acknowledged, failed"
                if len(sent_key) - round_start - sum(reports) > 5000:  # keep pace with the broker
                    p.poll(0.005)
                    continue
                for _ in range(20):
                    c = len(sent_key)
                    ki = rnd.randrange(len(keys))
                    tombstone = rnd.randrange(50) == 0
                    p.produce(topic, key=keys[ki], value=None if tombstone else kill_test_value(c), partition=0,
                              headers=[("n", b"%d" % c)], on_delivery=partial(report, c))
                    sent_key.append(ki)
                    sent_tombstone.append(tombstone)
                p.poll(0)
                if reports[0] >= threshold and (at_any_moment or in_flight_cleaning(pdir)
                                                or reports[0] > threshold + 50_000):
                    srv.proc.send_signal(signal.SIGKILL)
                    break
            srv.proc.wait(30)
            left = in_flight_cleaning(pdir)
            if left:
                killed_mid_cleaning.append(left)
            p.purge()
            p.flush(0)  # the reports of what was acknowledged before the kill; the rest failed
            del p

            # (The files of the interrupted cleaning are gone once the log loads: its records are checked here;
            # the files themselves cannot be, the restarted broker's cleaner starts at once.)
            srv = start_serve(data_dir, tmp_path / "broker.log", *overrides)
            got = ck_read_isolated(srv.bootstrap, topic, 1, committed=False)
            offsets = [m.offset() for m in got]
            assert offsets == sorted(set(offsets))
            latest: dict[bytes, int] = {}
            for m in got:
                c = int(dict(m.headers())["n"])
                produced = (keys[sent_key[c]], None if sent_tombstone[c] else kill_test_value(c))
                assert (m.key(), m.value()) == produced, f"offset {m.offset()}: not what was produced"
                latest[m.key()] = c
            for k, c in acked.items():
                if k in latest:
                    assert latest[k] >= c, f"round {r}: {k!r} went back from {c} to {latest[k]}"
                else:  # only a tombstone written at or after the acknowledged write removes a key
                    assert any(sent_tombstone[i] and keys[sent_key[i]] == k for i in range(c, len(sent_key))), \
                        f"round {r}: {k!r} lost"
        assert killed_mid_cleaning, "no kill happened while a cleaning was in flight"

        # After all this, the cleaner still compacts the log: one record per key below the active segment.
        def active_base() -> int:
            return max(int(n.split(".")[0]) for n in os.listdir(pdir) if n.endswith(".log"))
        wait_for(lambda: checkpointed(logs_dir, topic) >= active_base(), timeout=60,
                 what="the cleaner to catch up")
        active = active_base()
        below = [m.key() for m in ck_read_isolated(srv.bootstrap, topic, 1, committed=False) if m.offset() < active]
        assert len(below) == len(set(below))
        # No cleaning ever failed on what the kills left behind.
        assert cleaner_gauges(srv.http)["kafka_log_logcleanermanager_uncleanable_partitions_count"] == 0
        assert not re.search(r"cleaning of \S+ failed", (tmp_path / "broker.log").read_text())
    finally:
        srv.proc.kill()
        srv.proc.wait(30)


# -- 4. a cluster of 3, replication factor 3 -------------------------------------------------------------

def hosted_logs(cluster: Cluster, topic: str) -> dict[int, Log]:
    """Each running broker's replica of ``topic``-0 (call it on the cluster's loop)."""
    out = {}
    for bid, b in cluster.brokers.items():
        part = b.replica_manager.get(topic, 0)
        assert part is not None
        out[bid] = part.log
    return out


def replica_logs(ct: ClusterThread, topic: str) -> dict[int, Log]:
    return ct.call(hosted_logs, ct.cluster, topic)


def replica_records(ct: ClusterThread, topic: str) -> dict[int, list[Rec]]:
    """Each running broker's replica of ``topic``-0, decoded."""
    def decode(lg: Log) -> list[Rec]:
        return [(r.offset, r.key, r.value) for h, view in lg.iter_batches_from(lg.log_start_offset)
                if not h.is_control for r in decode_records(view)]
    return {bid: ct.call(decode, lg) for bid, lg in replica_logs(ct, topic).items()}


def replica_batches(ct: ClusterThread, topic: str) -> dict[int, list]:
    def headers(lg: Log) -> list:
        return [h for h, _ in lg.iter_batches_from(lg.log_start_offset)]
    return {bid: ct.call(headers, lg) for bid, lg in replica_logs(ct, topic).items()}


def wait_in_sync(ct: ClusterThread, topic: str) -> None:
    """Wait until every running replica is in the ISR, has the leader's records and knows they are committed."""
    def synced() -> bool:
        logs = hosted_logs(ct.cluster, topic)
        leader = logs[ct.cluster.leader(topic, 0)]
        isr = ct.cluster.metadata.topics[topic].partitions[0].isr
        return set(isr) == set(logs) and \
            all(lg.log_end_offset == leader.log_end_offset == lg.high_watermark for lg in logs.values())
    wait_for(lambda: ct.call(synced), timeout=30, what=f"the replicas of {topic}-0 in sync")


def clean_all(ct: ClusterThread) -> None:
    for bid in ct.running_brokers:
        broker = ct.cluster.brokers[bid]
        assert ct.run(broker.log_cleaner.clean_until_idle) >= 1, f"broker {bid} cleaned nothing"


@pytest.mark.slow
def test_cluster_replicas_end_with_the_same_records_and_a_leader_change_changes_nothing() -> None:
    with ClusterThread(3, log_cleaner_enable=False, replica_fetch_wait_max_ms=50,
                       replica_fetch_backoff_ms=100) as ct:
        topic = ct.create_topic("compact-rf3", 1, 3, compacted_configs(256 * 1024, **{"min.insync.replicas": "2"}))
        delivered = Delivered()
        p = Producer({"bootstrap.servers": ct.bootstrap, "enable.idempotence": True, "compression.type": "lz4",
                      "linger.ms": 20, "topic.metadata.refresh.interval.ms": 1000})
        produce(p, topic, workload(30_000, 500, 50, seed=3, tag="one"), delivered)
        flush(p, delivered)
        fill(ct.bootstrap, topic, delivered, "a")
        wait_in_sync(ct, topic)
        clean_all(ct)
        want = delivered.compacted(tombstones=True)
        assert replica_records(ct, topic) == {b: want for b in ct.broker_ids}
        assert ck_read(ct.bootstrap, topic) == want

        # A follower restarted without its log (in memory) copies the cleaned log from the leader: batch for batch.
        leader = ct.leader(topic, 0)
        f1, f2 = [b for b in ct.broker_ids if b != leader]
        ct.stop_broker(f1)
        ct.start_broker(f1)
        wait_in_sync(ct, topic)
        batches = replica_batches(ct, topic)
        assert batches[f1] == batches[leader]
        assert replica_records(ct, topic)[f1] == want

        # A leader change: the consumer reads the same records from the new leader.
        ct.move_leader(topic, 0, f1)
        assert ck_read(ct.bootstrap, topic) == want

        # More writes, the leadership moving again in the middle of them, after the tombstones' delete horizon:
        # the next cleaning of every replica removes the tombstones of the first round and keeps the new ones.
        wait_past_delete_horizons([h for hs in replica_batches(ct, topic).values() for h in hs])
        second = workload(20_000, 500, 50, seed=4, tag="two")
        phase_two = max(r[0] for r in delivered.records) + 1
        produce(p, topic, second[:10_000], delivered)
        flush(p, delivered)
        ct.move_leader(topic, 0, f2)
        produce(p, topic, second[10_000:], delivered)
        flush(p, delivered)
        fill(ct.bootstrap, topic, delivered, "b")
        wait_in_sync(ct, topic)
        clean_all(ct)
        want = delivered.compacted(tombstones=True, tombstones_from=phase_two)
        assert len([r for r in want if r[2] is None]) >= 40  # the second round's deletes
        assert replica_records(ct, topic) == {b: want for b in ct.broker_ids}
        assert ck_read(ct.bootstrap, topic) == want


# -- 5. the cleaner's gauges on /metrics ------------------------------------------------------------------

def cleaner_gauges(http: str) -> dict[str, float]:
    with urllib.request.urlopen(f"http://{http}/metrics", timeout=30) as resp:
        text = resp.read().decode()
    return {s.name: s.value for f in text_string_to_metric_families(text) for s in f.samples
            if s.name.startswith(("kafka_log_logcleaner_", "kafka_log_logcleanermanager_"))}


RECOPY = "kafka_log_logcleaner_cleaner_recopy_percent"
MAX_DIRTY = "kafka_log_logcleanermanager_max_dirty_percent"
SINCE_LAST_RUN = "kafka_log_logcleanermanager_time_since_last_run_ms"


def test_metrics_show_the_cleaners_gauges() -> None:
    with BrokerThread(http_port=0, log_cleaner_enable=False) as bt:
        assert bt.http_address is not None and bt.broker is not None
        http = bt.http_address
        before = cleaner_gauges(http)
        assert before[RECOPY] == before[MAX_DIRTY] == before[SINCE_LAST_RUN] == 0
        topic = bt.create_topic("compact-metrics", 1, 1, compacted_configs(64 * 1024))
        delivered = Delivered()
        p = Producer({"bootstrap.servers": bt.bootstrap, "linger.ms": 5, "batch.size": 16 * 1024})

        def write(keys: range, tag: bytes) -> None:
            produce(p, topic, [(b"key-%05d" % i, tag + b"-%05d-" % i + bytes(80)) for i in keys], delivered)
            flush(p, delivered)

        def segments() -> tuple[list[tuple[int, int, int]], int]:
            """``(base, next offset, size)`` of the inactive segments, and the active one's base offset."""
            lg = log_of(bt, topic)
            return [(s.base_offset, s.next_offset, s.size) for s in lg.segments[:-1]], lg.active_segment.base_offset

        def clean_once_and_scrape() -> tuple[dict[str, float], float]:
            started = time.monotonic()
            assert bt.run(bt.broker.log_cleaner.clean_once)
            return cleaner_gauges(http), time.monotonic() - started

        # 1. 4,000 keys, then 1,000 of them again: the first cleaning reads a log with nothing clean in it.
        write(range(4000), b"one")
        write(range(1000), b"two")
        inactive, _ = bt.call(segments)
        read = sum(size for _, _, size in inactive)
        gauges, elapsed = clean_once_and_scrape()
        cleaned, active = bt.call(segments)
        written = sum(size for _, _, size in cleaned)
        assert gauges[MAX_DIRTY] == 100
        assert 50 < gauges[RECOPY] == int(100 * written / read) < 100
        assert 0 <= gauges[SINCE_LAST_RUN] <= elapsed * 1000 + 1

        # 2. 1,000 keys again: dirty bytes / (clean + dirty bytes) of the log when the cleaner chose it.
        write(range(1000, 2000), b"three")
        inactive, active = bt.call(segments)
        clean_bytes = sum(size for _, next_offset, size in inactive if next_offset <= cleaned[-1][1])
        dirty_bytes = sum(size for base, _, size in inactive if base >= cleaned[-1][1])
        assert clean_bytes and dirty_bytes
        gauges, elapsed = clean_once_and_scrape()
        cleaned, _ = bt.call(segments)
        assert gauges[MAX_DIRTY] == int(100 * dirty_bytes / (clean_bytes + dirty_bytes))
        assert gauges[RECOPY] == int(100 * sum(size for _, _, size in cleaned) / (clean_bytes + dirty_bytes))
        assert 0 <= gauges[SINCE_LAST_RUN] <= elapsed * 1000 + 1
        # No cleaner runs meanwhile (log.cleaner.enable=false): the time since the last run grows.
        wait_for(lambda: cleaner_gauges(http)[SINCE_LAST_RUN] > gauges[SINCE_LAST_RUN], what="the gauge to grow")


# -- 6. an open transaction bounds the cleaning ------------------------------------------------------------

def test_an_open_transaction_bounds_the_cleaning(tmp_path: Path) -> None:
    """The cleaner stops at the last stable offset: a record of a transaction still open must not make the
    cleaner drop the committed value it would replace, as the transaction may yet abort."""
    with BrokerThread(data_dir=tmp_path, log_cleaner_enable=False) as bt:
        bs = bt.bootstrap
        topic = bt.create_topic("compact-open-txn", 1, 1, compacted_configs(64 * 1024))
        keys = [b"key-%03d" % i for i in range(200)]
        delivered = Delivered()
        p = Producer({"bootstrap.servers": bs, "linger.ms": 5})
        for n in range(4):  # more than a segment
            produce(p, topic, [(k, b"committed-%d-%d-" % (n, i) + bytes(150)) for i, k in enumerate(keys)],
                    delivered)
        flush(p, delivered)
        t = Producer({"bootstrap.servers": bs, "transactional.id": f"open-{uuid.uuid4().hex[:8]}", "linger.ms": 5})
        t.init_transactions(30)
        t.begin_transaction()
        produce(t, topic, [(k, b"open-%d" % i) for i, k in enumerate(keys)], delivered, aborted=True)
        flush(t, delivered)
        fill(bs, topic, delivered, "a")  # after the transaction's records: beyond the LSO
        lso = min(o for o, _, _, aborted in delivered.records if aborted)
        assert clean(bt) >= 1
        assert bt.call(lambda: bt.broker.log_cleaner.manager.checkpoints[f"{topic}-0"]) <= lso
        committed = {k: (o, v) for o, k, v in ck_read(bs, topic, committed=True)}
        assert committed == {k: ov for k, ov in delivered.latest().items() if ov[0] < lso}
        t.abort_transaction(30)
        ck_wait_stable(bs, topic, 1)
        fill(bs, topic, delivered, "b")
        assert clean(bt) >= 1
        want = delivered.compacted(tombstones=True)
        assert {k: v for _, k, v in want if k in keys} == {k: b"committed-3-%d-" % i + bytes(150)
                                                          for i, k in enumerate(keys)}
        assert ck_read(bs, topic, committed=True) == want
        assert ck_read(bs, topic) == want


# -- 7. offsets for times on a cleaned topic ---------------------------------------------------------------

def test_offsets_for_times_find_the_records_the_cleaning_kept(tmp_path: Path) -> None:
    """ListOffsets by timestamp answers the first record kept with a timestamp at or after the one asked, never
    a batch the cleaner emptied (it keeps its maxTimestamp, and its offsets, but no record)."""
    from aiokafka import AIOKafkaConsumer
    from aiokafka.structs import TopicPartition as ATopicPartition

    with BrokerThread(data_dir=tmp_path, log_cleaner_enable=False) as bt:
        bs = bt.bootstrap
        topic = bt.create_topic("compact-times", 1, 1, compacted_configs(64 * 1024))
        base = 1_700_000_000_000  # record i of the topic has timestamp base + i
        rnd = random.Random(3)
        p = Producer({"bootstrap.servers": bs, "enable.idempotence": True, "linger.ms": 5, "batch.size": 4096})
        for i in range(6000):
            p.produce(topic, key=b"key-%03d" % rnd.randrange(300), value=b"v%d-" % i + bytes(50), partition=0,
                      timestamp=base + i)
        for i in range(6000, 8000):  # keys of their own: the records above are in inactive segments
            p.produce(topic, key=b"fill-%05d" % i, value=bytes(100), partition=0, timestamp=base + i)
        assert p.flush(30) == 0
        assert clean(bt) >= 1
        kept = [(m.offset(), m.timestamp()[1]) for m in ck_read_isolated(bs, topic, 1, committed=False)]
        assert all(ts == base + o for o, ts in kept)
        emptied = [h for h in stored_batch_headers(bt, topic, 0) if h.record_count == 0 and not h.is_control]
        assert emptied
        asked = sorted({h.max_timestamp for h in emptied} | {ts for _, ts in kept[::97]} | {base - 5, base + 8000})
        want = {t: next((o for o, ts in kept if ts >= t), -1) for t in asked}
        assert want[base - 5] == kept[0][0] and want[base + 8000] == -1

        c = Consumer({"bootstrap.servers": bs, "group.id": f"times-{uuid.uuid4().hex[:8]}"})
        try:
            got = {t: c.offsets_for_times([TopicPartition(topic, 0, t)], timeout=10)[0].offset for t in asked}
            assert got == want
        finally:
            c.close()
        k = kafka.KafkaConsumer(bootstrap_servers=bs, request_timeout_ms=10000)
        try:
            tp = kafka.TopicPartition(topic, 0)
            found = {t: k.offsets_for_times({tp: t})[tp] for t in asked}
            assert {t: -1 if f is None else f.offset for t, f in found.items()} == want
            assert all(f is None or f.timestamp == base + f.offset for f in found.values())
        finally:
            k.close()

        async def aio() -> dict[int, int]:
            a = AIOKafkaConsumer(bootstrap_servers=bs)
            await a.start()
            try:
                atp = ATopicPartition(topic, 0)
                out = {}
                for t in asked:
                    f = (await a.offsets_for_times({atp: t}))[atp]
                    out[t] = -1 if f is None else f.offset
                return out
            finally:
                await a.stop()

        assert asyncio.run(aio()) == want
