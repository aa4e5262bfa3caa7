"""Shared pieces of the benchmark scripts: a broker in its own process (from this or another
source tree), its CPU time, and a flat-out confluent-kafka producer."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parent.parent  # the source tree these scripts belong to


class Throughput:
    """MB/s and messages/s of a timed run, for result dataclasses with ``messages``, ``size`` and ``seconds``."""

    messages: int
    size: int
    seconds: float

    @property
    def mbs(self) -> float:
        return self.messages * self.size / 1e6 / self.seconds

    @property
    def msgs(self) -> float:
        return self.messages / self.seconds


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _tree_popen_args(tree: Path | None) -> dict[str, Any]:
    """Popen arguments making ``python`` import minikafka from ``tree`` (None: the installed one)."""
    if tree is None:
        return {}
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tree), env.get("PYTHONPATH")]))
    return {"env": env, "cwd": tree}


def minikafka_tree(tree: str | Path | None = None) -> Path:
    """The source tree a broker started with ``tree`` imports minikafka from; exits if it is not ``tree``."""
    if tree is not None:
        tree = Path(tree).resolve()
        if not (tree / "minikafka" / "__init__.py").is_file():
            raise SystemExit(f"{tree}: not a minikafka source tree")
    out = subprocess.run([sys.executable, "-c", "import minikafka; print(minikafka.__file__)"],
                         capture_output=True, text=True, check=True, **_tree_popen_args(tree)).stdout
    imported = Path(out.strip()).resolve().parent.parent
    if tree is not None and imported != tree:
        raise SystemExit(f"a broker started from {tree} would import minikafka from {imported}")
    return imported


def client_versions() -> str:
    import confluent_kafka

    # not version()[0]: confluent-kafka 2.16's version() is a string, not (string, int)
    return f"confluent-kafka {confluent_kafka.__version__}, librdkafka {confluent_kafka.libversion()[0]}"


def start_broker(port: int, *extra_args: str, profile_to: str | None = None, tree: str | Path | None = None,
                 timeout: float = 30, new_session: bool = False) -> tuple[subprocess.Popen, float]:
    """Start ``python -m minikafka serve`` on ``port`` (from source tree ``tree`` if given: PYTHONPATH and
    cwd set to it); return it and the seconds until it accepted a connection.  ``new_session``: in a session
    of its own, as ``scripts/bench peers`` starts the peers (with the kernel's scheduler autogroups, a session
    is a scheduling group: a broker sharing the benchmark's own gets less CPU than a peer in its own)."""
    cmd = [sys.executable]
    if profile_to:
        cmd += ["-m", "cProfile", "-o", profile_to]
    cmd += ["-m", "minikafka", "serve", "--port", str(port), "--log-level", "WARNING", *extra_args]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, start_new_session=new_session,
                            **_tree_popen_args(None if tree is None else Path(tree).resolve()))
    return proc, wait_accepting(proc, port, t0, timeout)


def wait_accepting(proc: subprocess.Popen, port: int, t0: float, timeout: float = 30) -> float:
    """Seconds from ``t0`` (a ``time.perf_counter()``) until a broker process listening on ``port`` accepted
    a connection; exits if it stopped or took longer than ``timeout``."""
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.05).close()
            return time.perf_counter() - t0
        except OSError:
            if proc.poll() is not None or time.perf_counter() - t0 > timeout:
                raise SystemExit("broker did not start")
            time.sleep(0.002)


def stop_broker(proc: subprocess.Popen, timeout: float = 30) -> None:
    """SIGINT (a clean shutdown, which also lets cProfile write its file), then kill if needed."""
    import signal

    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()


def cpu_seconds(proc: psutil.Process) -> float:
    """User + system CPU seconds used by a process so far."""
    t = proc.cpu_times()
    return t.user + t.system


def produce_queued(p: Any, topic: str, payload: bytes, n: int, partitions: int, start: int = 0) -> None:
    """Queue ``n`` records on a confluent-kafka producer (record i to partition i % partitions), polling
    while its queue is full."""
    for i in range(start, start + n):
        while True:
            try:
                p.produce(topic, payload, partition=i % partitions)
                break
            except BufferError:
                p.poll(0.001)


def produce_flat_out(bootstrap: str, topic: str, n: int, size: int, partitions: int = 1,
                     acks: str = "1") -> float:
    """confluent-kafka producing ``n`` messages of ``size`` bytes as fast as it can; seconds until all acked."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 1000000,
                  "queue.buffering.max.kbytes": 1048576, "queue.buffering.max.messages": 1000000,
                  "acks": acks})
    payload = os.urandom(size)
    t0 = time.perf_counter()
    produce_queued(p, topic, payload, n, partitions)
    left = p.flush(300)
    elapsed = time.perf_counter() - t0
    if left:
        raise SystemExit(f"{left} messages not delivered")
    return elapsed
