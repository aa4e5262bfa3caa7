"""The analysis unchanged on a Spark standalone cluster: spark-submit against a master and a worker
started by the test on loopback."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

import minikafka.analysis.run as run_module
from minikafka.broker.config import BrokerConfig
from minikafka.testing import BrokerThread
from standalone import spark_bin, spark_env, standalone_cluster


def _capture(cap: Path) -> dict[int, list[int]]:
    from confluent_kafka import Consumer, Producer, TopicPartition

    with BrokerThread(BrokerConfig(port=0, capture_dir=cap)) as bt:
        p = Producer({"bootstrap.servers": bt.bootstrap, "linger.ms": 2, "client.id": "sa-producer"})
        for i in range(200):
            p.produce("sa", b"value-%d" % i)
        assert p.flush(10) == 0
        del p
        c = Consumer({"bootstrap.servers": bt.bootstrap, "group.id": "sa", "client.id": "sa-consumer",
                      "enable.auto.commit": False})
        c.assign([TopicPartition("sa", 0, 0)])
        got = 0
        deadline = time.monotonic() + 20
        while got < 200 and time.monotonic() < deadline:
            got += len([m for m in c.consume(100, timeout=1) if m.error() is None])
        c.close()
        assert got == 200
    # Counted once the broker stopped: no client is left, every request it received was answered and captured.
    return {k: list(v) for k, v in bt.broker.request_stats.items()}


@pytest.mark.slow
@pytest.mark.clients
def test_analyze_with_spark_submit_on_standalone_cluster(spark, tmp_path: Path) -> None:
    counts = _capture(tmp_path / "cap")
    out = tmp_path / "out"
    with standalone_cluster(tmp_path) as master:
        proc = subprocess.run(
            [str(spark_bin("spark-submit")), "--master", master, "--conf", "spark.ui.enabled=false",
             "--conf", "spark.executor.memory=1g", str(Path(run_module.__file__)), str(tmp_path / "cap"),
             "--out", str(out), "--jobs", "traffic,sessions"],
            env=spark_env(), capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        # The executors ran on the standalone worker: it kept a work directory for the application.
        apps = list((tmp_path / "work").glob("app-*"))
        assert len(apps) == 1 and list(apps[0].glob("*/stderr"))
    assert (out / "report.html").exists()
    html = (out / "report.html").read_text()
    assert "Traffic" in html and "Fetch-session savings" in html
    # The tables written on the cluster hold the broker's own counts.
    summary = spark.read.parquet(str(out / "traffic" / "summary.parquet")).toPandas()
    summary = summary[summary.api_name != "total"] if "total" in set(summary.api_name) else summary
    from minikafka.capture.frames import api_name

    assert dict(zip(summary.api_name, summary.requests)) == {api_name(k): v[0] for k, v in counts.items()}
    assert dict(zip(summary.api_name, summary.request_bytes)) == {api_name(k): v[1] for k, v in counts.items()}
