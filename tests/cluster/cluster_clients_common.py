"""Real clients for the cluster tests that move a partition's leader under load (failover, reassignment):
a kafka-python consumer reading one partition on a background thread, a confluent-kafka idempotent
``acks=all`` producer that records what the cluster acknowledged, and the rewind of a consume-transform-produce
loop's consumer to its group's committed offsets.

Imported as ``cluster_clients_common`` (pytest puts ``tests/cluster`` on the path for the tests there; the name
is unique across the tree).
"""

from __future__ import annotations

import logging
import threading
import time
import warnings
from collections.abc import Callable
from typing import Any

from confluent_kafka import Producer

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaConsumer, TopicPartition

log = logging.getLogger(__name__)


def rewind_to_committed(consumer: Any, stop: threading.Event, who: str) -> None:
    """A confluent-kafka consumer back to its group's committed offsets (what an aborted transaction had read is
    read again); asked again while the group coordinator does not answer (it moves with the failures: a loop
    cannot go on without them), until ``stop`` is set.  ``who`` names the loop in the log."""
    from confluent_kafka import KafkaException
    from confluent_kafka import TopicPartition as CkTopicPartition

    while not stop.is_set():
        assignment = consumer.assignment()
        if not assignment:
            return
        try:
            committed = consumer.committed(assignment, timeout=30)
        except KafkaException as exc:
            log.info("%s: reading the committed offsets: %s", who, exc.args[0])
            continue
        for tp in committed:
            consumer.seek(CkTopicPartition(tp.topic, tp.partition, max(tp.offset, 0)))
        return


class PartitionReader:
    """kafka-python reading one partition from its beginning on a daemon thread, across leader changes (short
    metadata age and backoffs), until ``done(got)`` holds, ``timeout`` seconds pass or :meth:`stop` is
    called.  ``got`` is every (offset, value) read; :meth:`join` fails the test when the reader is still
    running or the consumer raised.  Use it as a context manager (``with PartitionReader(...).start() as r``)
    so that a failing test stops it before the cluster goes away."""

    def __init__(self, bootstrap: str, topic: str, partition: int = 0, *, done: Callable[[list], bool],
                 timeout: float, **consumer_config: Any) -> None:
        self.config = dict(bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest",
                           request_timeout_ms=5000, fetch_max_wait_ms=100, reconnect_backoff_max_ms=200,
                           metadata_max_age_ms=1000, **consumer_config)
        self.tp = TopicPartition(topic, partition)
        self.done = done
        self.timeout = timeout
        self.got: list[tuple[int, bytes]] = []
        self.error: list[BaseException] = []
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._consume, daemon=True)

    def start(self) -> "PartitionReader":
        self.thread.start()
        return self

    def stop(self, timeout: float = 30) -> None:
        """Make the reader stop at its next poll and wait (up to ``timeout`` seconds) for its consumer to close."""
        self.stopping.set()
        if self.thread.is_alive():
            self.thread.join(timeout)

    def __enter__(self) -> "PartitionReader":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _consume(self) -> None:
        try:
            consumer = KafkaConsumer(**self.config)
            try:
                consumer.assign([self.tp])
                consumer.seek_to_beginning(self.tp)
                deadline = time.monotonic() + self.timeout
                while not self.stopping.is_set() and not self.done(self.got) and time.monotonic() < deadline:
                    for records in consumer.poll(timeout_ms=100).values():
                        with self.lock:
                            self.got.extend((r.offset, r.value) for r in records)
            finally:
                consumer.close()
        except BaseException as exc:  # reported by join()
            self.error.append(exc)

    def join(self, timeout: float) -> list[tuple[int, bytes]]:
        """Wait for the reader to finish (``done`` or its own timeout); what it read.  Fails the test when
        it is still running after ``timeout`` seconds (it is then told to stop) or its consumer raised."""
        self.thread.join(timeout)
        if self.thread.is_alive():
            self.stop()
            raise AssertionError(f"the reader did not finish within {timeout}s ({len(self.got)} records read)")
        assert not self.error, self.error
        with self.lock:
            return list(self.got)


class AckedProducer:
    """A confluent-kafka idempotent ``acks=all`` producer (short backoffs, metadata refreshed every second)
    that records every acknowledged value by offset, and every delivery error."""

    def __init__(self, bootstrap: str, *, message_timeout_ms: int) -> None:
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                                  "linger.ms": 2, "message.timeout.ms": message_timeout_ms, "retry.backoff.ms": 50,
                                  "topic.metadata.refresh.interval.ms": 1000})
        self.acked: dict[int, bytes] = {}
        self.errors: list[str] = []
        self.lock = threading.Lock()

    def _on_delivery(self, err, msg) -> None:
        with self.lock:
            if err is not None:
                self.errors.append(str(err))
            else:
                self.acked[msg.offset()] = msg.value()

    def send(self, topic: str, value: bytes, partition: int = 0) -> None:
        """Produce one record, waiting for room while the local queue is full."""
        while True:
            try:
                self.producer.produce(topic, value=value, partition=partition, on_delivery=self._on_delivery)
                break
            except BufferError:
                self.producer.poll(0.05)
        self.producer.poll(0)

    def assert_acked_in_order(self, values: list[bytes], timeout: float) -> None:
        """Flush; then no delivery failed and ``values`` were acknowledged each at its own offset from 0, in
        produce order, with no gaps or duplicates."""
        assert self.producer.flush(timeout) == 0
        assert not self.errors, self.errors[:5]
        assert sorted(self.acked) == list(range(len(values)))
        assert [self.acked[o] for o in range(len(values))] == values
