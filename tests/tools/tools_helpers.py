"""Running the command-line tools as a user does, and checking their effects over the wire.

The checks use raw protocol requests and minikafka's producer/consumer, never the tools' own
admin client, so a tool that does the wrong thing cannot also be the one that says it did it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import trio

from minikafka.cli import main
from minikafka.client.connection import KafkaConnection
from minikafka.client.consumer import KafkaConsumer
from minikafka.client.producer import KafkaProducer
from minikafka.common import TopicPartition
from minikafka.protocol.api import ApiKey

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Result:
    rc: int
    out: str
    err: str

    @property
    def lines(self) -> list[str]:
        return self.out.splitlines()


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> Result:
    """``minikafka ARGV`` in this process; its exit status and what it printed."""
    capsys.readouterr()
    try:
        rc = main(list(argv))
    except SystemExit as exc:  # argparse errors
        rc = int(exc.code or 0)
    captured = capsys.readouterr()
    return Result(rc, captured.out, captured.err)


def run_subprocess(*argv: str, stdin: bytes | None = None, timeout: float = 60) -> Result:
    """``python -m minikafka ARGV`` as a separate process (stdin from ``stdin``)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run([sys.executable, "-m", "minikafka", *argv], input=stdin, capture_output=True,
                          timeout=timeout, env=env, cwd=ROOT)
    return Result(proc.returncode, proc.stdout.decode(), proc.stderr.decode())


def table(out: str) -> list[dict[str, str]]:
    """The rows of a table the tools print (a header line of upper-case names, then rows)."""
    lines = [line for line in out.splitlines() if line.strip()]
    header = lines[0].split()
    return [dict(zip(header, line.split())) for line in lines[1:]]


# -- effects, seen over the wire --------------------------------------------------------------------
def _first(bootstrap: str) -> tuple[str, int]:
    host, _, port = bootstrap.split(",")[0].rpartition(":")
    return host, int(port)


def request(bootstrap: str, api_key: int, version: int, body: dict) -> Any:
    """One raw request to the first bootstrap server."""
    async def go() -> Any:
        async with await KafkaConnection.connect(*_first(bootstrap), client_id="tools-test") as conn:
            return await conn.request(api_key, version, body)
    return trio.run(go)


def topic_metadata(bootstrap: str, name: str) -> Any | None:
    """A topic's Metadata entry (partitions with leader, replicas, ISR), or None if it does not exist."""
    resp = request(bootstrap, ApiKey.METADATA, 12, {"topics": [{"name": name}],
                                                     "allow_auto_topic_creation": False})
    t = resp.topics[0]
    return None if t.error_code else t


def topic_configs(bootstrap: str, name: str, resource_type: int = 2) -> dict[str, tuple[str | None, int]]:
    """DescribeConfigs of a topic (2) or broker (4): ``{name: (value, config source)}``."""
    resp = request(bootstrap, ApiKey.DESCRIBE_CONFIGS, 4, {"resources": [
        {"resource_type": resource_type, "resource_name": name, "configuration_keys": None}]})
    result = resp.results[0]
    assert result.error_code == 0, result
    return {c.name: (c.value, c.config_source) for c in result.configs}


def create_topic(bootstrap: str, name: str, partitions: int, replication_factor: int = 1) -> None:
    resp = request(bootstrap, ApiKey.CREATE_TOPICS, 7, {"topics": [
        {"name": name, "num_partitions": partitions, "replication_factor": replication_factor}],
        "timeout_ms": 10000})
    assert resp.topics[0].error_code == 0, resp


def produce(bootstrap: str, topic: str, records: list[tuple[int, bytes | None, bytes]],
            headers: list[tuple[str, bytes]] | None = None) -> None:
    """(partition, key, value) records through minikafka's producer, acknowledged."""
    async def go() -> None:
        async with KafkaProducer(bootstrap_servers=bootstrap, linger_ms=0) as p:
            futures = [await p.send(topic, v, key=k, partition=part, headers=headers) for part, k, v in records]
            for f in futures:
                await f.get()
    trio.run(go)


def consume(bootstrap: str, topic: str, partitions: list[int], count: int) -> list[Any]:
    """The first ``count`` records of ``partitions`` through minikafka's consumer (no group)."""
    async def go() -> list[Any]:
        out: list[Any] = []
        async with KafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as c:
            c.assign([TopicPartition(topic, p) for p in partitions])
            with trio.fail_after(20):
                while len(out) < count:
                    for records in (await c.poll(timeout_ms=200)).values():
                        out.extend(records)
        return out
    return trio.run(go)


def committed(bootstrap: str, group: str, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
    """The group's committed offsets (OffsetFetch by minikafka's consumer, which does not join)."""
    async def go() -> dict[TopicPartition, int]:
        async with KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False) as c:
            return {tp: om.offset for tp, om in (await c.committed_offsets(tps)).items()}
    return trio.run(go)


def commit(bootstrap: str, group: str, offsets: dict[TopicPartition, int]) -> None:
    """Commit offsets for a group without members (as a simple consumer does)."""
    async def go() -> None:
        async with KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False) as c:
            c.assign(list(offsets))
            await c.commit(dict(offsets))
    trio.run(go)
