"""The pytest plugin as a user meets it: test files in a directory of their own (no conftest, no
project settings), run by a separate pytest that finds the plugin through its ``pytest11`` entry point."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from minikafka.capture import read_capture
from minikafka.protocol.api import ApiKey

ROOT = Path(__file__).resolve().parents[1]


def run_pytest(where: Path, *args: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
                          cwd=where, capture_output=True, text=True, timeout=600)
    print(proc.stdout[-5000:], proc.stderr[-3000:])
    return proc


def test_the_example_file_runs_with_capture(tmp_path: Path) -> None:
    shutil.copy(ROOT / "examples" / "test_with_minikafka.py", tmp_path)
    proc = run_pytest(tmp_path, "--minikafka-capture", "captures", "test_with_minikafka.py")
    assert proc.returncode == 0 and "6 passed" in proc.stdout.splitlines()[-1]
    broker_dirs = sorted(p.name for p in (tmp_path / "captures").iterdir())
    assert broker_dirs == ["broker-1", "cluster-2"]
    records = list(read_capture([tmp_path / "captures" / "broker-1"]))
    injected = [r for r in records if r.injected]
    assert {r.api_key for r in injected} == {ApiKey.PRODUCE}
    kinds = [r.injected.split(" ", 1)[1] for r in injected]
    assert kinds.count("error=NOT_LEADER_OR_FOLLOWER") == 3  # the idempotent producer's three refusals
    assert kinds.count("drop=after") == 1
    assert [r.response for r in injected if r.injected.endswith("drop=after")] == [None]  # never answered


USER_TESTS = '''
import pytest

PORTS = []


def test_rules_are_cleared_between_tests_a(minikafka_broker):
    PORTS.append(minikafka_broker.port)
    minikafka_broker.faults.add(api="Produce", latency_ms=1)
    assert minikafka_broker.capture_dir is None


def test_rules_are_cleared_between_tests_b(minikafka_broker):
    PORTS.append(minikafka_broker.port)
    assert minikafka_broker.faults.rules() == []


def test_broker_lifetime():
    assert len(set(PORTS)) == EXPECTED_BROKERS


@pytest.mark.minikafka_topic(partitions=3)
def test_topic_shape(minikafka_broker, minikafka_topic):
    assert minikafka_broker.broker.metadata.get_topic(minikafka_topic).num_partitions == 3


def test_topics_are_fresh(minikafka_broker, minikafka_topic):
    topics = minikafka_broker.broker.metadata.topics
    assert minikafka_topic in topics and topics[minikafka_topic].num_partitions == 1
    assert minikafka_topic.startswith("test_topics_are_fresh-")


def test_cluster_size_and_stop(minikafka_cluster):
    assert len(minikafka_cluster.bootstrap.split(",")) == CLUSTER_SIZE
    minikafka_cluster.stop_broker(1)
    assert 1 not in minikafka_cluster.running_brokers


def test_stopped_brokers_come_back(minikafka_cluster, minikafka_topic):
    assert minikafka_cluster.running_brokers == list(range(CLUSTER_SIZE))
    meta = minikafka_cluster.cluster.metadata.topics[minikafka_topic]
    assert len(meta.partitions[0].replicas) == min(3, CLUSTER_SIZE)
'''


def test_options_from_the_ini_file_and_the_command_line(tmp_path: Path) -> None:
    (tmp_path / "pytest.ini").write_text("[pytest]\nminikafka_brokers = 2\n")
    (tmp_path / "test_user.py").write_text("EXPECTED_BROKERS = 1\nCLUSTER_SIZE = 2\n" + USER_TESTS)
    proc = run_pytest(tmp_path, "test_user.py")
    assert proc.returncode == 0 and "7 passed" in proc.stdout.splitlines()[-1]
    # The command line wins over the ini file; a function-scoped broker is a new one for every test.
    (tmp_path / "test_user.py").write_text("EXPECTED_BROKERS = 2\nCLUSTER_SIZE = 4\n" + USER_TESTS)
    proc = run_pytest(tmp_path, "--minikafka-brokers", "4", "--minikafka-scope", "function", "test_user.py")
    assert proc.returncode == 0 and "7 passed" in proc.stdout.splitlines()[-1]


def test_bad_options_are_usage_errors(tmp_path: Path) -> None:
    (tmp_path / "pytest.ini").write_text("[pytest]\nminikafka_scope = forever\n")
    (tmp_path / "test_user.py").write_text("def test_it(minikafka_broker):\n    pass\n")
    proc = run_pytest(tmp_path, "test_user.py")
    assert proc.returncode != 0 and "minikafka_scope must be one of" in proc.stdout + proc.stderr


PROCESS_TESTS = '''
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic


def test_a_killed_broker_process_is_back_for_the_next_test_a(minikafka_processes):
    admin = AdminClient({"bootstrap.servers": minikafka_processes.bootstrap})
    admin.create_topics([NewTopic("t", 1, 2)])["t"].result(30)
    producer = Producer({"bootstrap.servers": minikafka_processes.bootstrap, "acks": "all"})
    producer.produce("t", b"v")
    assert producer.flush(30) == 0
    minikafka_processes.kill(1)
    minikafka_processes.pause("controller")
    assert minikafka_processes.state(1) == "stopped"


def test_a_killed_broker_process_is_back_for_the_next_test_b(minikafka_processes):
    assert [minikafka_processes.state(n) for n in ("controller", 0, 1)] == ["running"] * 3
'''


def test_the_processes_fixture_runs_a_controller_and_broker_processes(tmp_path: Path) -> None:
    (tmp_path / "test_processes_user.py").write_text(PROCESS_TESTS)
    (tmp_path / "pytest.ini").write_text("[pytest]\nminikafka_broker_config =\n    broker.session.timeout.ms=2000\n")
    proc = run_pytest(tmp_path, "--minikafka-brokers", "2", "test_processes_user.py")
    assert proc.returncode == 0 and "2 passed" in proc.stdout.splitlines()[-1]
