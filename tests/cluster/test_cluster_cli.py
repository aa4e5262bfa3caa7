"""``minikafka serve --brokers N``: a cluster from the command line, brokers stopped and started on stdin."""

from __future__ import annotations

import signal
import subprocess
import sys

import trio

from minikafka.client.connection import KafkaConnection
from minikafka.protocol.api import ApiKey


def _read_until(proc: subprocess.Popen, needle: str, limit: int = 200) -> str:
    for _ in range(limit):
        line = proc.stdout.readline()
        if needle in line:
            return line
    raise AssertionError(f"{needle!r} not printed")


def test_serve_brokers_cli_stop_and_start():
    proc = subprocess.Popen([sys.executable, "-m", "minikafka", "serve", "--brokers", "3", "--port", "0",
                             "--log-level", "WARNING", "-o", "replica.fetch.wait.max.ms=50"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        line = _read_until(proc, "ready on")
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
        _read_until(proc, "stopped broker 2")
        assert trio.run(brokers, ports[0]) == [0, 1]
        proc.stdin.write("start 2\n")
        proc.stdin.flush()
        _read_until(proc, "started broker 2")
        assert trio.run(brokers, ports[2]) == [0, 1, 2]
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0
