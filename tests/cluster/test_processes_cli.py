"""``minikafka serve --brokers N`` (issue 26): a controller and N broker processes from the command line, on the
ports a one-process cluster uses, failed (killed, paused, cut off with ``--network-partitions``) on stdin,
through the supervisor's HTTP port and ``minikafka cluster``; a process that dies on its own is reported and not
restarted; Ctrl-C stops them all."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import waiting
from helpers import read_until, stop_process
from minikafka.protocol.api import ApiKey

from test_processes import _ask

FAST = ["-o", "broker.session.timeout.ms=2000", "-o", "broker.heartbeat.interval.ms=200"]


def _brokers(address: str) -> list[int]:
    return sorted(b.node_id for b in _ask(address, ApiKey.METADATA, 12, {"topics": None}).brokers)


def _tool(*args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "minikafka", "cluster", *args], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_serve_processes_fails_processes_on_request_and_reports_one_that_dies(tmp_path):
    proc = subprocess.Popen([sys.executable, "-m", "minikafka", "serve", "--brokers", "3", "--network-partitions",
                             "--port", "0", "--http-port", "0", "--data-dir", str(tmp_path), "--log-level", "WARNING",
                             *FAST],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        http = read_until(proc, "supervisor HTTP on").split(" on ")[1].split(" ")[0]
        pids = {int(line.split("(pid ")[1].rstrip(")\n")): int(line.split("broker ")[1].split(" ")[0])
                for line in (read_until(proc, "minikafka broker") for _ in range(3))}
        bootstrap = read_until(proc, "broker processes ready on").split("ready on ")[1].split(";")[0]
        ports = bootstrap.split(",")  # (each broker behind its proxy)
        assert _brokers(ports[0]) == [0, 1, 2]
        assert (tmp_path / "controller" / "__cluster_metadata-0").is_dir()

        # stdin: SIGKILL broker 2; the controller fences it when its session expires.
        proc.stdin.write("kill 2\n")
        proc.stdin.flush()
        assert "minikafka: kill 2: stopped" in read_until(proc, "kill 2")
        waiting.wait_for(lambda: _brokers(ports[0]) == [0, 1], 60)

        # minikafka cluster, through the supervisor's HTTP port.
        assert "2: running" in _tool("start", "2", "--http", http)
        waiting.wait_for(lambda: _brokers(ports[0]) == [0, 1, 2], 60)
        status = _tool("status", "--http", http)
        assert all(f"{node}" in status for node in ("controller", "running")) and "stopped" not in status
        assert "1: paused" in _tool("pause", "1", "--http", http)
        assert "1: running" in _tool("resume", "1", "--http", http)

        # Network partitions: broker 0 cut off from the rest (the controller fences it), then healed.
        assert "network partition: 0 | 1 2 controller clients" in _tool("partition", "0", "|", "1", "2",
                                                                        "controller", "clients", "--http", http)
        waiting.wait_for(lambda: _brokers(ports[1]) == [1, 2], 60)
        assert "network healed" in _tool("heal", "--http", http)
        waiting.wait_for(lambda: _brokers(ports[1]) == [0, 1, 2], 60)
        proc.stdin.write("isolate 2\n")
        proc.stdin.flush()
        assert "minikafka: isolated 2" in read_until(proc, "isolated")
        proc.stdin.write("heal\n")
        proc.stdin.flush()
        read_until(proc, "network healed")

        # A broker killed from outside is reported, not restarted.
        victim = next(pid for pid, broker in pids.items() if broker == 1)
        os.kill(victim, signal.SIGKILL)
        assert "not restarted" in read_until(proc, "broker 1 (pid")
        rows = {line.split()[0]: line.split()[1] for line in _tool("status", "--http", http).splitlines()[1:]}
        assert rows == {"controller": "running", "0": "running", "1": "stopped", "2": "running"}
    finally:
        stop_process(proc, 60)
    assert proc.returncode == 0
    assert not any(_alive(pid) for pid in pids)  # every process stopped with the supervisor


def _quotas(address: str) -> list:
    resp = _ask(address, ApiKey.DESCRIBE_CLIENT_QUOTAS, 1, {"components": [], "strict": False})
    return [(e["entity"][0]["entity_name"], {v["key"]: v["value"] for v in e["values"]}) for e in resp["entries"]]


def _two_free_ports() -> int:
    """A port that is free, and the next one too (as they were a moment ago)."""
    import socket

    for _ in range(50):
        with socket.socket() as first:
            first.bind(("127.0.0.1", 0))
            port = first.getsockname()[1]
            with socket.socket() as second:
                try:
                    second.bind(("127.0.0.1", port + 1))
                except OSError:
                    continue
        return port
    raise AssertionError("no two consecutive free ports")


def test_serve_brokers_starts_a_process_per_broker_on_the_ports_of_a_one_process_cluster(tmp_path):
    """``serve --brokers 2`` with no other flag: a controller and two broker processes, the brokers on the host at
    consecutive ports as ``--in-process`` puts them; ``--quota`` reaches every broker (through the metadata
    log)."""
    port = _two_free_ports()
    proc = subprocess.Popen([sys.executable, "-m", "minikafka", "serve", "--brokers", "2", "--port", str(port),
                             "--data-dir", str(tmp_path), "--log-level", "WARNING",
                             "--quota", "client-id=everywhere:producer_byte_rate=1024", *FAST],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        bootstrap = read_until(proc, "broker processes ready on").split("ready on ")[1].split(";")[0]
        assert bootstrap == f"127.0.0.1:{port},127.0.0.1:{port + 1}"
        assert _brokers(bootstrap.split(",")[0]) == [0, 1]
        assert (tmp_path / "controller" / "__cluster_metadata-0").is_dir()
        for address in bootstrap.split(","):
            waiting.wait_for(lambda: _quotas(address) == [("everywhere", {"producer_byte_rate": 1024.0})], 30)
        proc.stdin.write("isolate 1\n")  # (no proxies without --network-partitions)
        proc.stdin.flush()
        assert "--network-partitions" in read_until(proc, "minikafka:")
    finally:
        stop_process(proc, 60)
    assert proc.returncode == 0


def test_serve_brokers_refuses_what_only_a_one_process_cluster_does(tmp_path):
    done = subprocess.run([sys.executable, "-m", "minikafka", "serve", "--brokers", "2", "--port", "0",
                           "--capture", str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "add --in-process" in done.stderr

