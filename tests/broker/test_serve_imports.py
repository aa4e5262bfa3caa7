"""``minikafka serve`` imports what its configuration uses and nothing more (issue 27's start-up rule): a plain
broker loads no other command (analysis, replay, the Kafka-style tools), no HTTP stack, console or Spark, no
capture writer or reader without ``--capture``, no SASL or TLS module and no SCRAM library without a SASL or SSL
listener, no package metadata (only ``--version`` reads it), no type-only modules, no share groups before a client
uses them and no replica fetchers for a lone broker; and it counts the per-request metrics only when its HTTP port
can show them.

The test runs the real command in a subprocess, waits until it says it is ready, stops it with Ctrl-C
(SIGINT) and reads the modules it had loaded."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from waiting import wait_for

# Loaded only by other commands or configurations (``--http-port``, ``--capture``, SASL listeners, ``analyze``,
# ``replay``, the tools...), by the type checker (``protocol.bodies``) or on first use (``crc32c``: the first
# record batch, importing it reads package metadata; share groups; replica fetchers).
NOT_FOR_A_PLAIN_BROKER = (
    "minikafka.analysis", "minikafka.capture.replay", "minikafka.capture.replay_cli", "minikafka.tools",
    "minikafka.broker.console", "minikafka.broker.admin_http", "minikafka.web",
    "minikafka.capture.format", "minikafka.capture.reading", "minikafka.capture.pcapread",
    "minikafka.capture.service", "minikafka.capture.writer", "minikafka.capture.observer",
    "minikafka.protocol.bodies", "scramp", "crc32c", "importlib.metadata",
    # SASL and TLS (loaded by a SASL or SSL listener, the inter-broker one included)
    "minikafka.broker.security.sasl", "minikafka.broker.security.jaas", "minikafka.broker.security.authenticator",
    "minikafka.broker.security.ssl", "minikafka.client.security",
    # KIP-932 share groups (built at their first use) and a lone broker's replica fetchers (built if a partition
    # ever follows another broker).
    "minikafka.broker.share", "minikafka.broker.handlers.share_fetch", "minikafka.broker.handlers.share_groups",
    "minikafka.broker.handlers.share_offsets", "minikafka.broker.replica_fetcher", "minikafka.client.fetch_session",
    "pyspark", "pandas", "pyarrow", "matplotlib", "starlette", "hypercorn",
)

RUN = """
import atexit, gc, os, runpy, sys
out, report = sys.argv[1], sys.argv[2]
exec(os.environ.get("SERVE_SETUP", ""))
atexit.register(lambda: open(out, "w").write(eval(report)))
sys.argv = ["minikafka", "serve", "--port", sys.argv[3]] + sys.argv[4:]
runpy.run_module("minikafka", run_name="__main__", alter_sys=True)
"""


def serve_until_ready(tmp_path: Path, report: str, *args: str, setup: str = "") -> str:
    """Run the real ``minikafka serve [args]`` until it says it is ready, stop it with Ctrl-C (SIGINT) and
    return ``report`` (a Python expression over ``sys``, ``gc`` and what ``setup`` defined: Python run before
    the command) as it evaluated when the process exited."""
    out, log = tmp_path / "report.txt", tmp_path / "stdout.txt"
    env = {**os.environ, "SERVE_SETUP": setup}
    with log.open("w") as stdout:
        # --port 0: free ports for every broker (a free port P said nothing of P + 1, the second broker's)
        proc = subprocess.Popen([sys.executable, "-c", RUN, str(out), report, "0", *args],
                                stdout=stdout, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, env=env)
    try:
        wait_for(lambda: proc.poll() is not None or "ready on" in log.read_text(), timeout=60,
                 what="the broker to say it is ready")
        assert proc.poll() is None, "the broker ended before it was ready"
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return out.read_text()


def test_a_plain_broker_imports_no_other_command(tmp_path: Path) -> None:
    modules = serve_until_ready(tmp_path, '"\\n".join(sorted(sys.modules))').split()
    assert "minikafka.broker.broker" in modules  # the list is the broker's
    loaded = [m for m in modules if m.startswith(NOT_FOR_A_PLAIN_BROKER) and
              (m in NOT_FOR_A_PLAIN_BROKER or m.startswith(tuple(p + "." for p in NOT_FOR_A_PLAIN_BROKER)))]
    assert not loaded, f"minikafka serve imported modules it does not use: {loaded}"


# Each Broker the command builds: the request observers its KafkaApis calls ("none": not one).
OBSERVERS_SETUP = """
import minikafka.broker.broker as _broker
_init = _broker.Broker.__init__
OBSERVED = []

def _observed(self, *args, **kwargs):
    _init(self, *args, **kwargs)
    OBSERVED.append(",".join(sorted(type(o).__name__ for o in self.apis.observers)) or "none")

_broker.Broker.__init__ = _observed
"""


COUNTING = "BrokerMetricsObserver,RequestStats"


@pytest.mark.parametrize("args, observers", [
    ((), "none"),
    (("--http-port", "0"), COUNTING),
    (("--brokers", "2", "--in-process"), "none|none"),
    (("--brokers", "2", "--in-process", "--http-port", "0"), f"{COUNTING}|{COUNTING}"),
])
def test_request_metrics_are_counted_only_where_they_can_be_read(tmp_path: Path, args: tuple[str, ...],
                                                                  observers: str) -> None:
    """The per-request metrics (``RequestMetrics``, ``BrokerTopicMetrics``) cost every request some CPU: a broker
    counts them only when its HTTP port can show them (``/metrics``, the console)."""
    assert serve_until_ready(tmp_path, '"|".join(OBSERVED)', *args, setup=OBSERVERS_SETUP) == observers
