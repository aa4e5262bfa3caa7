"""Shared pieces of the benchmark scripts: a broker in its own process, and its CPU time."""

from __future__ import annotations

import socket
import subprocess
import sys
import time

import psutil


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_broker(port: int, *extra_args: str, profile_to: str | None = None,
                 timeout: float = 30) -> tuple[subprocess.Popen, float]:
    """Start ``python -m minikafka serve`` on ``port``; return it and the seconds until it accepted a connection."""
    cmd = [sys.executable]
    if profile_to:
        cmd += ["-m", "cProfile", "-o", profile_to]
    cmd += ["-m", "minikafka", "serve", "--port", str(port), "--log-level", "WARNING", *extra_args]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.05).close()
            return proc, time.perf_counter() - t0
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
