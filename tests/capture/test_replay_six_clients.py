"""Issue 17's acceptance: the six real clients' traffic (topics created on one connection, written and read on
others, consumer groups resumed on new connections) replays with every response equal: locally, through Spark on
``local[2]``, on a Spark standalone master/worker, and from the ``minikafka replay`` command line."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from six_clients import make_six_client_capture, watermarks

from minikafka.broker.config import BrokerConfig
from minikafka.capture.replay import ReplayOptions, ReplayReport, run_replay
from minikafka.cli import main as cli_main
from minikafka.testing import BrokerThread

pytestmark = [pytest.mark.clients,
              pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat binary not found on PATH")]

#: Requests that show the capture's cross-connection causality: each must be replayed (and answered the same).
CAUSAL_APIS = ("CreateTopics", "IncrementalAlterConfigs", "InitProducerId", "Produce", "FindCoordinator", "JoinGroup",
               "SyncGroup", "OffsetCommit", "OffsetFetch", "ListOffsets", "Fetch", "DeleteTopics", "CreatePartitions")


def _target() -> BrokerThread:
    return BrokerThread(BrokerConfig(port=0, group_initial_rebalance_delay_ms=0))


@pytest.fixture(scope="module")
def six(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    cap = tmp_path_factory.mktemp("six") / "cap"
    return cap, make_six_client_capture(cap)


def _spark_ready() -> None:
    pytest.importorskip("pyspark")
    if shutil.which("java") is None:
        pytest.skip("Spark needs Java (scripts/install-test-tools installs it)")


def _assert_all_equal(report: ReplayReport, info: dict) -> None:
    """Every captured request replayed and answered the same (SASL exchanges aside: there are none here)."""
    summary = report.summary()
    assert report.sasl_requests_skipped == 0
    assert report.requests == info["requests"] - report.sasl_requests_skipped, summary
    assert report.failed == 0 and report.connections_failed == 0 and report.connections == info["connections"], summary
    assert {st.name: st.sent for st in report.per_api.values()} == info["per_api"], summary
    differing = {st.name: st.differing for st in report.per_api.values() if st.differing}
    assert not differing, f"responses differ: {differing}\n{summary}"
    assert sum(st.equal for st in report.per_api.values()) == report.received == info["requests"], summary


def _assert_report_dict_equal(d: dict, info: dict, tasks: int) -> None:
    assert d["tasks"] == tasks and d["failed"] == 0 and d["connections_failed"] == 0, d
    assert d["requests"] == d["received"] == info["requests"], d
    assert {name: st["sent"] for name, st in d["per_api"].items()} == info["per_api"]
    differing = {name: st["examples"] for name, st in d["per_api"].items() if st["differing"]}
    assert not differing, differing


def test_capture_has_cross_connection_causality(six: tuple[Path, dict]) -> None:
    _, info = six
    assert info["seconds"] < 60, info["seconds"]
    for name in CAUSAL_APIS:
        assert info["per_api"].get(name, 0) > 0, (name, info["per_api"])
    assert info["per_api"]["InitProducerId"] >= 3  # confluent-kafka, aiokafka, minikafka (idempotent)
    assert info["per_api"]["JoinGroup"] >= 5 and info["per_api"]["OffsetCommit"] >= 5
    ids = info["client_ids"]
    for prefix in ("six-admin", "six-ck-", "six-kp-", "six-aio-", "six-kcat-", "six-mk-"):
        assert any(i.startswith(prefix) for i in ids), (prefix, ids)
    assert info["connections"] >= 15
    assert info["watermarks"] == {"six-a": {0: (0, 60), 1: (0, 60), 2: (0, 60)}, "six-b": {0: (0, 60), 1: (0, 20)}}


def test_local_replay_at_max_speed_answers_the_same(six: tuple[Path, dict]) -> None:
    cap, info = six
    with _target() as target:
        report = run_replay([cap], ReplayOptions("127.0.0.1", target.port, speed=None))
        marks = watermarks(target)
    _assert_all_equal(report, info)
    assert report.tasks == 1 and marks == info["watermarks"]


@pytest.mark.slow
def test_spark_replay_on_local_2_answers_the_same(six: tuple[Path, dict]) -> None:
    _spark_ready()
    from minikafka.analysis.replay_job import run_spark_replay

    cap, info = six
    with _target() as target:
        report = run_spark_replay([cap], ReplayOptions("127.0.0.1", target.port, speed=None),
                                  master="local[2]", partitions=2)
        marks = watermarks(target)
    assert report.tasks == 2, report.summary()  # one report per task: the connections were spread over both
    _assert_all_equal(report, info)
    assert marks == info["watermarks"]


@pytest.mark.slow
def test_cli_spark_replay_writes_report(six: tuple[Path, dict], tmp_path: Path, capsys) -> None:
    _spark_ready()
    cap, info = six
    out = tmp_path / "out.json"
    with _target() as target:
        rc = cli_main(["replay", str(cap), "--to", target.bootstrap, "--speed", "max", "--spark",
                       "--master", "local[2]", "--partitions", "2", "--report", str(out)])
        marks = watermarks(target)
    assert rc == 0
    _assert_report_dict_equal(json.loads(out.read_text()), info, tasks=2)
    assert marks == info["watermarks"]
    assert "Produce" in capsys.readouterr().out


@pytest.mark.slow
def test_spark_replay_on_standalone_cluster_answers_the_same(six: tuple[Path, dict], tmp_path: Path) -> None:
    """``minikafka replay --spark --master spark://...`` in its own process (its own Spark driver: this
    process may already hold a local session), against a master and a worker the test starts."""
    _spark_ready()
    from analysis.standalone import spark_env, standalone_cluster

    cap, info = six
    out = tmp_path / "out.json"
    with _target() as target, standalone_cluster(tmp_path) as master:
        proc = subprocess.run(
            [sys.executable, "-m", "minikafka", "replay", str(cap), "--to", target.bootstrap, "--speed", "max",
             "--spark", "--master", master, "--partitions", "2", "--report", str(out)],
            env=spark_env(), capture_output=True, text=True, timeout=600, check=False)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        marks = watermarks(target)
        # The tasks ran on the standalone worker: it kept a work directory for the application.
        apps = list((tmp_path / "work").glob("app-*"))
        assert len(apps) == 1 and list(apps[0].glob("*/stderr"))
    _assert_report_dict_equal(json.loads(out.read_text()), info, tasks=2)
    assert marks == info["watermarks"], proc.stdout
