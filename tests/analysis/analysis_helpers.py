"""Shared helpers of the analysis job tests: captures made with real clients, and the capture's rows
decoded in plain Python (no Spark) for independent checks."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from minikafka.analysis.decode import PARTITION_COLUMNS, REQUEST_COLUMNS, RecordDecoder
from minikafka.capture import read_capture
from waiting import wait_for, wait_for_no_connections


def cached_tables(spark: Any, capture: Path) -> Any:
    """A module fixture's body: the capture's tables, cached, unpersisted when the module is done."""
    from minikafka.analysis.tables import load_tables

    t = load_tables(spark, [capture]).cache()
    yield t
    t.unpersist()


def wait_until(pred, timeout: float = 20, what: str = "condition") -> None:
    wait_for(pred, timeout, what)


def decoded(cap: Path | list[Path]) -> tuple[Any, Any]:
    """The ``requests`` and ``partitions`` rows of a capture as pandas DataFrames, decoded by
    :class:`RecordDecoder` in this process (records in capture order, topic names remembered)."""
    import pandas as pd

    paths = [cap] if isinstance(cap, (str, Path)) else list(cap)
    dec = RecordDecoder("test")
    req_rows: list[tuple] = []
    part_rows: list[tuple] = []
    for rec in read_capture(paths):
        req, resp, err = dec.parse(rec)
        list(dec.topic_rows(rec, resp))
        req_rows.append(dec.request_row(rec, req, resp, err))
        part_rows.extend(dec.partition_rows(rec, req, resp))
    return (pd.DataFrame.from_records(req_rows, columns=[c for c, _ in REQUEST_COLUMNS]),
            pd.DataFrame.from_records(part_rows, columns=[c for c, _ in PARTITION_COLUMNS]))


# -- captures made with real clients ---------------------------------------------------------------
MB = 1_000_000
PAYLOAD = b"q" * 1000
QUOTA_WINDOWS = {"quota_window_num": 2, "quota_window_size_seconds": 1}
CAPPED_QUOTA = MB  # the real broker's produce quota for client "capped", bytes/s


def quota_capture(cap: Path) -> dict[str, int]:
    """One broker, capture on, quota windows 2 x 1 s, a real produce quota of 1 MB/s for client "capped":

    * "fast" (confluent-kafka) produces 3000 x 1000-byte values paced over ~1.5 s (200 every 0.1 s), unthrottled
      (even stretched to 2.5 s by a busy machine that is over 1 MB/s in every 2 s quota window);
    * "slow" produces five 100-byte values meanwhile;
    * then "capped" produces 3000 x 1000-byte values as fast as it can, throttled by the broker.

    Returns the number of messages each client had delivered."""
    from confluent_kafka import Producer

    from minikafka.broker.config import BrokerConfig
    from minikafka.testing import BrokerThread

    delivered = {"fast": 0, "slow": 0, "capped": 0}

    def counter(name: str):
        def cb(err, _msg) -> None:
            if err is None:
                delivered[name] += 1
        return cb

    cfg = BrokerConfig(port=0, capture_dir=cap, group_initial_rebalance_delay_ms=0, **QUOTA_WINDOWS,
                       client_quotas=[f"client-id=capped:producer_byte_rate={CAPPED_QUOTA}"])
    with BrokerThread(cfg) as bt:
        bt.call(lambda: bt.broker.create_topic("qt", 1, 1))
        conf = {"bootstrap.servers": bt.bootstrap, "linger.ms": 5, "log_level": 3}
        fast = Producer({**conf, "client.id": "fast"})
        slow = Producer({**conf, "client.id": "slow"})
        for i in range(15):
            for _ in range(200):
                fast.produce("qt", PAYLOAD, on_delivery=counter("fast"))
            if i % 3 == 0:
                slow.produce("qt", b"s" * 100, on_delivery=counter("slow"))
            fast.poll(0)
            slow.poll(0)
            time.sleep(0.1)  # fixed wait: the workload's pace (200 values per 0.1 s) is what the quota job measures
        assert fast.flush(15) == 0 and slow.flush(15) == 0
        capped = Producer({**conf, "client.id": "capped"})
        for i in range(3000):
            capped.produce("qt", PAYLOAD, on_delivery=counter("capped"))
            if i % 100 == 0:
                capped.poll(0)
        assert capped.flush(30) == 0
        del fast, slow, capped
    return delivered


REP_TOPIC = "rep"
REP_PARTITIONS = 4


def replication_capture(cap: Path, fetches: int = 8) -> dict[int, int]:
    """Two brokers, capture on, topic "rep" with 4 partitions and RF 2 (leaders alternate 0, 1, 0, 1);
    a confluent-kafka producer (acks=all) sends 25 + 10 x partition values to each partition, then the
    followers keep fetching until each has the final high watermarks and each leader handled ``fetches``
    follower fetches.  Returns the messages delivered per partition."""
    from confluent_kafka import Producer

    from minikafka.broker.config import BrokerConfig
    from minikafka.protocol.api import ApiKey
    from minikafka.testing import ClusterThread

    delivered: dict[int, int] = {p: 0 for p in range(REP_PARTITIONS)}

    def cb(err, msg) -> None:
        if err is None:
            delivered[msg.partition()] += 1

    cfg = BrokerConfig(port=0, capture_dir=cap, replica_fetch_wait_max_ms=100, replica_fetch_backoff_ms=50,
                       group_initial_rebalance_delay_ms=0)
    with ClusterThread(2, cfg) as ct:
        assignments = {p: [p % 2, 1 - p % 2] for p in range(REP_PARTITIONS)}
        ct.call(lambda: ct.cluster.broker(0).create_topic(REP_TOPIC, REP_PARTITIONS, 2, assignments=assignments))
        p = Producer({"bootstrap.servers": ct.bootstrap, "client.id": "rep-producer", "acks": "all",
                      "linger.ms": 5, "log_level": 3})
        for part in range(REP_PARTITIONS):
            for i in range(25 + 10 * part):
                p.produce(REP_TOPIC, b"r%03d-" % i + b"x" * 200, partition=part, on_delivery=cb)
        assert p.flush(20) == 0
        del p

        def replicated() -> bool:
            c = ct.cluster
            return all(c.broker(b).request_stats.get(ApiKey.FETCH, [0])[0] >= fetches for b in (0, 1)) and all(
                c.broker(1 - p % 2).replica_manager.get(REP_TOPIC, p).log.high_watermark == n
                for p, n in delivered.items())

        wait_for(lambda: ct.call(replicated), 30, "the followers to have the final high watermarks")
    return delivered


LAG_TOPIC = "lagt"
LAG_MESSAGES = 1000


def lag_capture(cap: Path) -> list[tuple[float, int]]:
    """One broker, capture on: 1000 messages produced in batches of 10 (confluent-kafka), then a
    kafka-python consumer reads them slowly (one ~1.2 KB batch per fetch, 10 records per poll, 20 ms
    sleeps).  Returns (wall time, offset) of every record the consumer got, in order."""
    from confluent_kafka import Producer
    from kafka import KafkaConsumer, TopicPartition

    from minikafka.broker.config import BrokerConfig
    from minikafka.testing import BrokerThread

    seen: list[tuple[float, int]] = []
    with BrokerThread(BrokerConfig(port=0, capture_dir=cap, group_initial_rebalance_delay_ms=0)) as bt:
        bt.call(lambda: bt.broker.create_topic(LAG_TOPIC, 1, 1))
        p = Producer({"bootstrap.servers": bt.bootstrap, "client.id": "lag-producer", "linger.ms": 50,
                      "log_level": 3})
        for i in range(LAG_MESSAGES):
            p.produce(LAG_TOPIC, b"v%04d-" % i + b"y" * 94)
            if i % 10 == 9:
                assert p.flush(10) == 0
        del p
        c = KafkaConsumer(bootstrap_servers=bt.bootstrap, client_id="lag-consumer", enable_auto_commit=False,
                          auto_offset_reset="earliest", max_partition_fetch_bytes=1200, fetch_max_bytes=1200,
                          fetch_max_wait_ms=50, max_poll_records=10, request_timeout_ms=10000)
        try:
            tp = TopicPartition(LAG_TOPIC, 0)
            c.assign([tp])
            c.seek_to_beginning(tp)
            deadline = time.monotonic() + 30
            while len(seen) < LAG_MESSAGES and time.monotonic() < deadline:
                for records in c.poll(timeout_ms=200, max_records=10).values():
                    now = time.time()
                    seen.extend((now, r.offset) for r in records)
                time.sleep(0.02)  # fixed wait: a slow consumer (the lag over time is what the job measures)
        finally:
            c.close()
        wait_for_no_connections(bt)
    return seen
