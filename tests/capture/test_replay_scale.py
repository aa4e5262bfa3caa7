"""``minikafka replay --scale 10`` against ``minikafka serve --brokers 3``: a capture of real clients (confluent-kafka
producer and consumer group on a 3-broker cluster) replayed ten times at once under renamed topics, groups and
client ids, through the command line; every copy's responses compare equal (issue 17's acceptance)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from minikafka.broker.config import BrokerConfig
from minikafka.capture import read_capture
from minikafka.testing import ClusterThread

TOPIC = "scale-t"
GROUP = "scale-g"
PARTITIONS = 3
MESSAGES = 90
SCALE = 10
TIMEOUT = 60.0


def _until(fn: Any, what: str, timeout: float = TIMEOUT) -> Any:
    deadline = time.monotonic() + timeout
    while not (out := fn()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
    return out


def _capture(cap: Path) -> int:
    """confluent-kafka on a 3-broker cluster (partition p led by broker p mod 3, as on the target): a topic
    created, an idempotent producer writing every partition, then a consumer group reading it all and committing.
    Returns the requests captured."""
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    # Only the clients' traffic: no replicas of __consumer_offsets fetching from each other.
    config = BrokerConfig(port=0, capture_dir=cap, group_initial_rebalance_delay_ms=0,
                          offsets_topic_replication_factor=1)
    with ClusterThread(3, config) as cluster:
        bootstrap = cluster.bootstrap
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(TIMEOUT)
        producer = Producer({"bootstrap.servers": bootstrap, "client.id": "scale-producer", "linger.ms": 2,
                             "enable.idempotence": True, "batch.num.messages": 5})
        for i in range(MESSAGES):
            producer.produce(TOPIC, b"value-%d" % i, partition=i % PARTITIONS)
        assert producer.flush(TIMEOUT) == 0
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "client.id": "scale-consumer",
                             "auto.offset.reset": "earliest", "enable.auto.commit": False,
                             "fetch.wait.max.ms": 50, "fetch.message.max.bytes": 200})
        consumer.subscribe([TOPIC])
        got: list[Any] = []

        def consumed_all() -> bool:
            got.extend(m for m in consumer.consume(50, 0.2) if not m.error())
            return len(got) >= MESSAGES

        try:
            _until(consumed_all, "the consumer to read every message")
            consumer.commit(asynchronous=False)
        finally:
            consumer.close()
        del producer, admin
    return sum(1 for _ in read_capture([cap]))


@pytest.fixture(scope="module")
def capture(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    cap = tmp_path_factory.mktemp("scale-capture")
    return cap, _capture(cap)


@pytest.fixture
def target() -> Any:
    """``minikafka serve --brokers 3`` in its own process; yields its bootstrap list."""
    proc = subprocess.Popen([sys.executable, "-m", "minikafka", "serve", "--brokers", "3", "--in-process",
                             "--port", "0",
                             "--log-level", "WARNING", "-o", "group.initial.rebalance.delay.ms=0"],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # blocks until the cluster is up (or the process ended)
        m = re.search(r"ready on (\S+)", line)
        assert m, f"no ready line from minikafka serve: {line!r}"
        yield m.group(1)
    finally:
        proc.terminate()
        proc.wait(TIMEOUT)


def test_scale_10_on_three_brokers_every_response_equal(capture: tuple[Path, int], target: str,
                                                         tmp_path: Path) -> None:
    cap, captured = capture
    out = tmp_path / "report.json"
    run = subprocess.run([sys.executable, "-m", "minikafka", "replay", str(cap), "--to", target, "--speed", "max",
                          "--scale", str(SCALE), "--report", str(out), "--no-progress"],
                         check=False, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    summary = run.stdout
    print(summary)
    report = json.loads(out.read_text())
    assert report["copies"] == SCALE
    assert report["requests"] == report["sent"] == SCALE * captured, summary
    assert report["failed"] == 0 and report["connections_failed"] == 0, summary
    per_api = report["per_api"]
    for name in ("Produce", "Fetch", "Metadata", "FindCoordinator", "JoinGroup", "SyncGroup", "OffsetCommit",
                 "CreateTopics", "InitProducerId"):
        assert per_api[name]["sent"] >= SCALE, (name, summary)
    for name, st in per_api.items():
        assert st["differing"] == 0, (name, st["examples"], summary)
        assert st["received"] + st["no_response_expected"] == st["sent"], (name, summary)
        assert st["sent"] % SCALE == 0, name  # each copy sent the capture's requests of this api
        assert st["requests_per_s"] > 0, name
        rep = st["latency"]["replayed"]
        assert rep["count"] == st["received"]
        assert 0 <= rep["p50_ms"] <= rep["p90_ms"] <= rep["p99_ms"] <= rep["p99_9_ms"] <= rep["max_ms"], (name, rep)
        assert st["latency"]["captured"]["p50_ms"] is not None
    assert set(report["routed"]["Produce"]) == {"0", "1", "2"}, report["routed"]  # to each partition's leader
    head = next(line for line in summary.splitlines() if line.startswith("api "))
    assert all(col in head for col in ("req/s", "p50", "p90", "p99", "p99.9", "max", "captured p50"))
    assert f"{SCALE} copies under their own names" in summary
