"""Transactions across broker failures: three brokers, a topic with replication factor 3 and
min.insync.replicas 2, a confluent-kafka transactional producer writing a stream of transactions
(acks=all), and one broker stopped in the middle of it:

* the leader of output partitions (not the transaction coordinator): once with a transaction's
  records in flight, once (after it came back and leads again) after a commit was acknowledged but
  before its markers reached that leader (WriteTxnMarkers to it failing, by an injected fault);
* the transaction coordinator (FindCoordinator names the lowest live broker: stopping broker 0
  moves it to broker 1), stopped while it holds the response to an EndTxn it has handled.

Afterwards every transaction the client saw committed is visible whole under read_committed, none
is half visible, and the aborted or failed ones are not visible at all; the same holds once the
broker is back (and, for the leader, once it leads its partitions again).
"""

from __future__ import annotations

import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition

from clients.clients_common import ck_end_offsets, ck_read_isolated, ck_wait_stable, wait_for
from minikafka.testing import ClusterThread

pytestmark = [pytest.mark.clients]

TOPIC = "txn-stream"
PARTS = 3
# Leaders 1, 2, 1: broker 0 (the transaction and group coordinator) leads nothing.
ASSIGNMENTS = {0: [1, 2, 0], 1: [2, 0, 1], 2: [1, 0, 2]}
N_TXNS = 24
PER_PARTITION = 4  # records per partition per transaction


@contextmanager
def cluster(data_dir: Path | None = None) -> Iterator[ClusterThread]:
    """Three brokers (in memory, or with logs under ``data_dir``) and the topic, created."""
    settings = {} if data_dir is None else {"data_dir": data_dir}
    with ClusterThread(3, replica_fetch_wait_max_ms=50, replica_fetch_backoff_ms=100,
                       group_initial_rebalance_delay_ms=0,
                       transaction_abort_timed_out_transaction_cleanup_interval_ms=100, **settings) as ct:
        c = ct.cluster
        ct.call(lambda: c.broker(0).create_topic(TOPIC, configs={"min.insync.replicas": "2"},
                                                 assignments=ASSIGNMENTS))
        assert [ct.leader(TOPIC, p) for p in range(PARTS)] == [1, 2, 1]
        yield ct


def producer_for(bootstrap: str, transactional_id: str) -> Producer:
    return Producer({
        "bootstrap.servers": bootstrap, "transactional.id": transactional_id, "acks": "all",
        "linger.ms": 5, "retry.backoff.ms": 50, "retry.backoff.max.ms": 200,
        "transaction.timeout.ms": 30000, "message.timeout.ms": 25000,
        "topic.metadata.refresh.interval.ms": 1000, "reconnect.backoff.max.ms": 200,
    })


def txn_records(k: int) -> list[tuple[int, bytes]]:
    return [(p, b"t%03d-p%d-%d" % (k, p, i)) for i in range(PER_PARTITION) for p in range(PARTS)]


class Stream:
    """Runs transactions with one producer, re-created after a fatal error, and records each one's outcome:
    "committed" (commit_transaction returned), "aborted" (abort_transaction returned) or "unknown"
    (the producer failed fatally in the middle: it may or may not have committed)."""

    def __init__(self, bootstrap: str, transactional_id: str) -> None:
        self.bootstrap = bootstrap
        self.transactional_id = transactional_id
        self.outcome: dict[int, str] = {}
        self.errors: list[str] = []
        self.producer = self._new_producer()

    def _new_producer(self) -> Producer:
        p = producer_for(self.bootstrap, self.transactional_id)
        p.init_transactions(60)
        return p

    def run(self, k: int, *, abort: bool = False, mid: Callable[[], None] | None = None,
            before_commit: Callable[[], None] | None = None) -> str:
        """One transaction; ``mid`` runs once half its records are written (flushed), ``before_commit``
        when all are produced (the second half possibly still in flight)."""
        p = self.producer
        records = txn_records(k)
        try:
            p.begin_transaction()
            for i, (partition, value) in enumerate(records):
                if mid is not None and i == len(records) // 2:
                    assert p.flush(60) == 0
                    mid()
                while True:
                    try:
                        p.produce(TOPIC, value=value, partition=partition)
                        break
                    except BufferError:
                        p.poll(0.05)
                p.poll(0)
            if abort:
                assert p.flush(60) == 0  # in the log, then aborted
            if before_commit is not None:
                before_commit()
            if abort:
                p.abort_transaction(60)
                self.outcome[k] = "aborted"
            else:
                self._commit(p)
                self.outcome[k] = "committed"
        except KafkaException as exc:
            err: KafkaError = exc.args[0]
            self.errors.append(f"txn {k}: {err}")
            if err.txn_requires_abort() and not err.fatal():
                p.abort_transaction(60)
                self.outcome[k] = "aborted"
            else:
                self.outcome[k] = "unknown"
                try:
                    p.flush(1)
                except KafkaException:  # the fatal error again
                    pass
                self.producer = self._new_producer()  # fences the old one, aborting what it left open
        return self.outcome[k]

    @staticmethod
    def _commit(p: Producer) -> None:
        deadline = time.monotonic() + 60
        while True:
            try:
                p.commit_transaction(30)
                return
            except KafkaException as exc:
                if not exc.args[0].retriable() or time.monotonic() > deadline:
                    raise

    def close(self) -> None:
        try:
            self.producer.flush(5)
        except KafkaException:  # a fatal error, reported where it happened
            pass


def check_visibility(bootstrap: str, outcome: dict[int, str]) -> None:
    """read_committed: each committed transaction whole, exactly once; aborted ones absent; unknown ones whole
    or absent."""
    ck_wait_stable(bootstrap, TOPIC, PARTS, timeout=30)
    got = ck_read_isolated(bootstrap, TOPIC, PARTS, committed=True)
    seen = Counter((m.partition(), m.value()) for m in got)
    assert not [r for r, n in seen.items() if n > 1], "duplicates"
    by_txn: dict[int, set[tuple[int, bytes]]] = defaultdict(set)
    for partition, value in seen:
        by_txn[int(value[1:4])].add((partition, value))
    assert set(by_txn) <= set(outcome), sorted(set(by_txn) - set(outcome))
    for k, result in sorted(outcome.items()):
        want = set(txn_records(k))
        have = by_txn.get(k, set())
        if result == "committed":
            assert have == want, f"committed transaction {k}: {len(have)}/{len(want)} records visible"
        elif result == "aborted":
            assert not have, f"aborted transaction {k}: {len(have)} records visible"
        else:
            assert have in (set(), want), f"transaction {k} half visible: {len(have)}/{len(want)} records"
    # Per partition, the committed transactions in commit order.
    for p in range(PARTS):
        order = [int(m.value()[1:4]) for m in got if m.partition() == p]
        assert order == sorted(order), p
    # read_uncommitted sees at least as much.
    everything = {(m.partition(), m.value()) for m in ck_read_isolated(bootstrap, TOPIC, PARTS, committed=False)}
    assert set(seen) <= everything


class LiveReader:
    """A read_committed consumer reading the topic from the beginning while the stream runs, across the
    failovers: it must never get a record of an aborted transaction, even for a moment."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.seen: list[tuple[int, bytes]] = []
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="live-reader", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "live-reader", "enable.auto.commit": False,
                      "isolation.level": "read_committed", "fetch.wait.max.ms": 50,
                      "topic.metadata.refresh.interval.ms": 1000, "reconnect.backoff.max.ms": 200})
        try:
            c.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in range(PARTS)])
            while not self._stop.is_set():
                for m in c.consume(500, 0.1):
                    if m.error():
                        self.errors.append(str(m.error()))
                    else:
                        self.seen.append((m.partition(), m.value()))
        except BaseException as exc:  # reported by check()
            self.errors.append(f"reader failed: {exc!r}")
        finally:
            c.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(10)

    def check(self, outcome: dict[int, str]) -> None:
        """Once it has read every committed record: nothing else but whole transactions of unknown outcome."""
        committed = {r for k, o in outcome.items() if o == "committed" for r in txn_records(k)}
        try:
            wait_for(lambda: committed <= set(self.seen), timeout=30, what="the live reader to read everything")
        finally:
            self.close()
        assert not [e for e in self.errors if e.startswith("reader failed")], self.errors
        seen = Counter(self.seen)
        assert not [r for r, n in seen.items() if n > 1], "the live reader got duplicates"
        for k, result in outcome.items():
            have = {r for r in txn_records(k) if r in seen}
            if result == "aborted":
                assert not have, f"the live reader got {len(have)} records of aborted transaction {k}"
            elif result == "unknown":
                assert have in (set(), set(txn_records(k))), f"transaction {k} half visible to the live reader"
        assert set(seen) <= {r for k in outcome for r in txn_records(k)}


def wait_in_sync(ct: ClusterThread, broker_id: int) -> None:
    cluster = ct.cluster

    def in_sync() -> bool:
        return ct.call(lambda: all(broker_id in cluster.metadata.topics[TOPIC].partitions[p].isr
                                   for p in range(PARTS)))

    wait_for(in_sync, timeout=30, what=f"broker {broker_id} back in every ISR")


def unstable_partitions(bootstrap: str) -> set[int]:
    """The partitions whose LSO a transaction holds below the high watermark."""
    lso = ck_end_offsets(bootstrap, TOPIC, PARTS, committed=True)
    hw = ck_end_offsets(bootstrap, TOPIC, PARTS, committed=False)
    return {p for p in range(PARTS) if lso[p] < hw[p]}


def test_partition_leader_stopped_mid_stream(tmp_path: Path) -> None:
    # With logs on disk: the restarted broker loads its logs (producer state and aborted-transaction index
    # rebuilt from them), truncates, catches up, then leads again.
    with cluster(tmp_path / "data") as ct:
        leader_stopped_mid_stream(ct)


def leader_stopped_mid_stream(ct: ClusterThread) -> None:
    stream = Stream(ct.bootstrap, "stream-leader")
    reader = LiveReader(ct.bootstrap)
    try:
        stream_with_leader_stops(ct, stream, reader)
    finally:
        reader.close()


def stream_with_leader_stops(ct: ClusterThread, stream: Stream, reader: LiveReader) -> None:
    first_stop, back, second_stop = 6, 10, 16
    in_flight: list[int] = []

    def stop_with_records_in_flight() -> None:
        in_flight.append(len(stream.producer))
        ct.stop_broker(1)

    def hold_markers_then_stop() -> None:
        # The commit was acknowledged (PrepareCommit) but the markers cannot reach broker 1: its partitions'
        # LSO stays behind; then broker 1 stops and the markers must go to the new leaders.
        wait_for(lambda: unstable_partitions(ct.bootstrap) == {0, 2}, what="partition 1's marker")
        ct.stop_broker(1)
        ct.faults.remove(rule.id)

    rule = None
    try:
        for k in range(N_TXNS):
            abort = k % 5 == 3
            if k == first_stop:
                # Broker 1 (leader of partitions 0 and 2) stops with half of this transaction's records in its
                # log (replicated: acks=all) and the other half in flight.
                stream.run(k, mid=lambda: None, before_commit=stop_with_records_in_flight)
                assert [ct.leader(TOPIC, p) for p in range(PARTS)] == [2, 2, 0]
            elif k == back:  # broker 1 back: in sync, then leading its partitions again
                ct.start_broker(1)
                wait_in_sync(ct, 1)
                for p in (0, 2):
                    ct.move_leader(TOPIC, p, 1)
                assert [ct.leader(TOPIC, p) for p in range(PARTS)] == [1, 2, 1]
                check_visibility(ct.bootstrap, stream.outcome)
                stream.run(k, abort=abort)
            elif k == second_stop:
                ck_wait_stable(ct.bootstrap, TOPIC, PARTS)  # the previous transaction's markers are written
                rule = ct.faults.add(api="WriteTxnMarkers", broker=1, error="NOT_LEADER_OR_FOLLOWER")
                assert stream.run(k) == "committed", stream.errors
                hold_markers_then_stop()
                assert rule.matched >= 1
            else:
                stream.run(k, abort=abort)
    finally:
        if rule is not None:
            ct.faults.remove(rule.id)
        stream.close()
    assert [ct.leader(TOPIC, p) for p in range(PARTS)] == [2, 2, 0]
    counts = Counter(stream.outcome.values())
    print(f"outcomes {dict(counts)}; {in_flight} record(s) in flight at the first stop; "
          f"client errors: {stream.errors}")
    assert counts["committed"] >= N_TXNS - N_TXNS // 5 - 2, (counts, stream.errors)
    assert stream.outcome[second_stop] == "committed"
    check_visibility(ct.bootstrap, stream.outcome)
    reader.check(stream.outcome)

    # The broker comes back as a follower, catches up, and leads its partitions again.
    ct.start_broker(1)
    wait_in_sync(ct, 1)
    check_visibility(ct.bootstrap, stream.outcome)
    for p in (0, 2):
        ct.move_leader(TOPIC, p, 1)
    assert [ct.leader(TOPIC, p) for p in range(PARTS)] == [1, 2, 1]
    check_visibility(ct.bootstrap, stream.outcome)


def test_transaction_coordinator_stopped_mid_commit() -> None:
    with cluster() as ct:
        coordinator_stopped_mid_commit(ct)


def coordinator_stopped_mid_commit(ct: ClusterThread) -> None:
    stream = Stream(ct.bootstrap, "stream-coordinator")
    stop_at = N_TXNS // 2
    hold = None
    stopped = threading.Event()
    stop_error: list[BaseException] = []

    def stopper() -> None:
        assert hold is not None
        try:
            wait_for(lambda: hold.matched >= 1, timeout=60, what="an EndTxn to be held")
            ct.stop_broker(0)
        except BaseException as exc:  # reported below
            stop_error.append(exc)
        finally:
            ct.faults.remove(hold.id)
            stopped.set()

    thread = threading.Thread(target=stopper, daemon=True)
    try:
        for k in range(N_TXNS):
            if k == stop_at:
                # Broker 0 handles this transaction's EndTxn but holds the response; it stops meanwhile, so
                # the client must retry the EndTxn with the new coordinator (broker 1).
                hold = ct.faults.add(api="EndTxn", broker=0, hold=True, count=1)
                thread.start()
                stream.run(k)
                assert stopped.wait(30) and not stop_error, stop_error
                assert ct.running_brokers == [1, 2]
            else:
                stream.run(k, abort=k % 5 == 3)
        assert ct.running_brokers == [1, 2]
    finally:
        if hold is not None:
            ct.faults.remove(hold.id)
        if thread.is_alive():
            thread.join(30)
        stream.close()
    counts = Counter(stream.outcome.values())
    print(f"outcomes {dict(counts)}; client errors: {stream.errors}")
    assert counts["committed"] >= N_TXNS - N_TXNS // 5 - 2, (counts, stream.errors)
    check_visibility(ct.bootstrap, stream.outcome)

    # Broker 0 back: the coordinator moves back to it; a new producer instance (fencing the old one) runs
    # more transactions, then everything is checked again.
    ct.start_broker(0)
    wait_in_sync(ct, 0)
    stream2 = Stream(ct.bootstrap, "stream-coordinator")
    stream2.outcome = stream.outcome
    try:
        for k in range(N_TXNS, N_TXNS + 6):
            assert stream2.run(k, abort=k % 5 == 3) == ("aborted" if k % 5 == 3 else "committed"), stream2.errors
    finally:
        stream2.close()
    check_visibility(ct.bootstrap, stream.outcome)
