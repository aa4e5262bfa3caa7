"""``minikafka serve --brokers N``: a cluster from the command line, brokers stopped and started on stdin."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import trio

from helpers import read_until, stop_process
from minikafka.client.connection import KafkaConnection
from minikafka.protocol.api import ApiKey


@contextmanager
def serve_brokers() -> Iterator[subprocess.Popen]:
    """``minikafka serve --brokers 3`` with its stdin and stdout piped; stopped by SIGINT at the end, which it must
    exit 0 on."""
    proc = subprocess.Popen([sys.executable, "-m", "minikafka", "serve", "--brokers", "3", "--in-process",
                             "--port", "0",
                             "--log-level", "WARNING", "-o", "replica.fetch.wait.max.ms=50"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        yield proc
    finally:
        stop_process(proc, 10)
    assert proc.returncode == 0


def test_serve_brokers_cli_stop_and_start():
    with serve_brokers() as proc:
        line = read_until(proc, "ready on")
        bootstrap = line.split("ready on ")[1].split(" ")[0]
        ports = [int(hp.rsplit(":", 1)[1]) for hp in bootstrap.split(",")]
        assert len(ports) == 3

        async def brokers(port: int) -> list[int]:
            async with await KafkaConnection.connect("127.0.0.1", port) as c:
                md = await c.request(ApiKey.METADATA, 12, {"topics": None})
                return sorted(b.node_id for b in md.brokers)

        assert trio.run(brokers, ports[0]) == [0, 1, 2]
        proc.stdin.write("stop 2\n")
        proc.stdin.flush()
        read_until(proc, "stopped broker 2")
        assert trio.run(brokers, ports[0]) == [0, 1]
        proc.stdin.write("start 2\n")
        proc.stdin.flush()
        read_until(proc, "started broker 2")
        assert trio.run(brokers, ports[2]) == [0, 1, 2]


def test_serve_brokers_cli_pauses_partitions_and_heals():
    with serve_brokers() as proc:
        def command(line: str, answer: str) -> str:
            proc.stdin.write(line + "\n")
            proc.stdin.flush()
            return read_until(proc, answer)

        read_until(proc, "ready on")
        command("pause 1", "paused broker 1")
        assert "1 paused" in command("status", "broker states: ")
        command("resume 1", "resumed broker 1")
        assert "minikafka: network partition 1 cut for 30 s" in command("partition 0 | 2 controller for 30", "cut")
        command("isolate 1", "isolated broker 1 (network partition 2)")
        states = command("status", "broker states: ").strip()
        assert states == "broker states: 0 partitioned, 1 partitioned, 2 partitioned"
        assert read_until(proc, "network partition 1:").strip() == "network partition 1: 0 | 2 controller"
        assert read_until(proc, "network partition 2:").strip() == \
            "network partition 2: 1 | 0 2 clients controller"
        command("heal 1", "healed network partition 1")
        command("heal 7", "no network partition 7")
        command("heal", "healed network partition 2")
        assert command("status", "broker states: ").strip() == "broker states: 0 running, 1 running, 2 running"
        command("pause 9", "commands: ")
        command("partition 0 | 5", "no node 5")
        command("partition 0 1", "two sides")
        command("isolate 1 for soon", "could not convert")
