"""`minikafka faults add|list|clear --http` against `minikafka serve --http-port` run as a user runs it."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator

import pytest
from tools_helpers import ROOT, request, run_cli, table

from helpers import batch
from minikafka.protocol.api import ApiKey as K
from minikafka.protocol.errors import ErrorCode as E


def serve(*argv: str) -> Iterator[tuple[str, str]]:
    """``minikafka serve ARGV --http-port 0`` in its own process: (bootstrap, HTTP address)."""
    proc = subprocess.Popen([sys.executable, "-m", "minikafka", "serve", "--port", "0", "--http-port", "0",
                             "--log-level", "WARNING", *argv], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            cwd=ROOT, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        m = re.search(r"ready on (\S+) \(.*\), HTTP on (\S+);", line)
        assert m, line
        yield m.group(1), m.group(2)
    finally:
        proc.terminate()
        proc.wait(30)


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[str, str]]:
    yield from serve()


def produce_error(bootstrap: str, topic: str) -> int:
    resp = request(bootstrap, K.PRODUCE, 9, {"acks": -1, "timeout_ms": 1000, "topic_data": [
        {"name": topic, "partition_data": [{"index": 0, "records": batch([b"x"])}]}]})
    return resp.responses[0].partition_responses[0].error_code


def test_add_list_clear(server: tuple[str, str], capsys) -> None:
    bootstrap, http = server
    r = run_cli(capsys, "faults", "add", "--http", http, "--api", "Produce", "--topic", "orders",
                "--error", "NOT_LEADER_OR_FOLLOWER", "--count", "3")
    assert r.rc == 0 and re.fullmatch(r"added fault rule (\d+): api=Produce,topic=orders -> "
                                      r"error=NOT_LEADER_OR_FOLLOWER\n", r.out), r.out
    rule_id = r.out.split()[3].rstrip(":")
    assert run_cli(capsys, "faults", "add", "--http", http, "--api", "Metadata", "--latency-ms", "5",
                   "--client-id", "rdkafka*").rc == 0
    assert produce_error(bootstrap, "orders") == E.NOT_LEADER_OR_FOLLOWER  # auto-created, then refused
    assert produce_error(bootstrap, "other") == 0
    rows = table(run_cli(capsys, "faults", "list", "--http", http).out)
    assert [(row["ID"], row["MATCHED"], row["REMAINING"]) for row in rows] == [(rule_id, "1", "2"),
                                                                                (str(int(rule_id) + 1), "0", "-")]
    r = run_cli(capsys, "faults", "list", "--http", http, "--json")
    assert '"client_id": "rdkafka*"' in r.out
    assert run_cli(capsys, "faults", "clear", "--http", http, "--id", rule_id).out == "removed 1 fault rule(s)\n"
    assert produce_error(bootstrap, "orders") == 0
    assert run_cli(capsys, "faults", "clear", "--http", http).out == "removed 1 fault rule(s)\n"
    assert table(run_cli(capsys, "faults", "list", "--http", http).out + "\n") == []


def test_refusals_are_one_line(server: tuple[str, str], capsys) -> None:
    _, http = server
    r = run_cli(capsys, "faults", "add", "--http", http, "--api", "Produce", "--error", "NO_SUCH_ERROR")
    assert r.rc == 1 and r.err == "minikafka: error: INVALID_RULE: unknown Kafka error 'NO_SUCH_ERROR'\n"
    r = run_cli(capsys, "faults", "clear", "--http", http, "--id", "12345")
    assert r.rc == 1 and r.err == "minikafka: error: UNKNOWN_RULE: no fault rule 12345\n"
    r = run_cli(capsys, "faults", "list", "--http", "127.0.0.1:1")
    assert r.rc == 1 and r.err.startswith("minikafka: error: cannot reach http://127.0.0.1:1/v1/faults")


def test_cluster_rules_pick_a_broker(capsys) -> None:
    for bootstrap, http in serve("--brokers", "3", "--in-process"):
        assert run_cli(capsys, "faults", "add", "--http", http, "--api", "Metadata", "--broker", "1",
                       "--error", "BROKER_NOT_AVAILABLE").rc == 0
        servers = bootstrap.split(",")
        codes = [request(s, K.METADATA, 12, {"topics": [{"name": "absent"}], "allow_auto_topic_creation": False}
                         ).topics[0].error_code for s in servers]
        assert codes == [E.UNKNOWN_TOPIC_OR_PARTITION, E.BROKER_NOT_AVAILABLE, E.UNKNOWN_TOPIC_OR_PARTITION]
        rows = table(run_cli(capsys, "faults", "list", "--http", http).out)
        assert rows[0]["MATCH"] == "api=Metadata,broker=1" and rows[0]["MATCHED"] == "1"
