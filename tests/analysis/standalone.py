"""A Spark standalone cluster (one master, one worker) on loopback, started by a test."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from waiting import wait_for


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spark_bin(name: str) -> Path:
    import pyspark

    return Path(pyspark.__file__).parent / "bin" / name


def spark_env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1",
               SPARK_HOME=str(spark_bin("x").parent.parent))
    return env


def _wait_for(log: Path, text: str, proc: subprocess.Popen, timeout: float) -> None:
    def logged() -> bool:
        if log.exists() and text in log.read_text(errors="replace"):
            return True
        if proc.poll() is not None:
            raise RuntimeError(f"{log.name} exited: {log.read_text(errors='replace')[-2000:]}")
        return False

    wait_for(logged, timeout, f"{text!r} in {log}", interval=0.2)


@contextmanager
def standalone_cluster(workdir: Path, cores: int = 2, memory: str = "2g") -> Iterator[str]:
    """Start ``Master`` and ``Worker`` (spark-class) on 127.0.0.1; yield the master URL."""
    env = spark_env()
    port = _free_port()
    url = f"spark://127.0.0.1:{port}"
    procs: list[subprocess.Popen] = []
    try:
        mlog = workdir / "master.log"
        master = subprocess.Popen(
            [str(spark_bin("spark-class")), "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
             "--port", str(port), "--webui-port", str(_free_port())],
            stdout=mlog.open("wb"), stderr=subprocess.STDOUT, env=env, start_new_session=True)
        procs.append(master)
        _wait_for(mlog, "I have been elected leader", master, 60)
        wlog = workdir / "worker.log"
        worker = subprocess.Popen(
            [str(spark_bin("spark-class")), "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
             "--cores", str(cores), "--memory", memory, "--webui-port", str(_free_port()),
             "--work-dir", str(workdir / "work"), url],
            stdout=wlog.open("wb"), stderr=subprocess.STDOUT, env=env, start_new_session=True)
        procs.append(worker)
        _wait_for(wlog, "Successfully registered with master", worker, 60)
        yield url
    finally:
        for p in reversed(procs):
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in procs:
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
