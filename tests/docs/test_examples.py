"""Every script in examples/ runs as the docs tell a user to run it, against a broker this test started.

Scripts take ``--bootstrap HOST:PORT`` (a BrokerThread started here); ``test_with_minikafka.py`` is a pytest
file and runs under pytest; ``replication_quotas.py`` looks inside its brokers and starts its own cluster.  The
tutorial scripts also get ``--out DIR`` and must write their figures and charts there.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from minikafka.testing import BrokerThread

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted(p.name for p in (ROOT / "examples").glob("*.py") if not p.name.startswith("_"))

#: How the docs run each script beyond --bootstrap: extra arguments, and the figures file it writes with --out.
RUNS: dict[str, tuple[list[str], str | None]] = {
    "fetch_session_seed.py": ([], "fetch_sessions"),
    "quota_live.py": (["--seconds", "5", "--window-num", "3"], "quotas"),
    "producer_batching.py": (["--records", "2000", "--lingers", "0,20"], "producer"),
    "consumer_lag.py": (["--backlog", "3000", "--produce-rate", "200", "--seconds", "120"], "consumer"),
    "replication_quotas.py": (["--fill-mb", "1"], "replication"),
}
OWN_CLUSTER = {"replication_quotas.py"}
PYTEST_FILES = {"test_with_minikafka.py"}


class Run:
    """One example started in a subprocess; ``result()`` waits for it (all of them run at once)."""

    def __init__(self, cmd: list[str], out: Path | None, timeout: float) -> None:
        self.cmd, self.out, self.timeout = cmd, out, timeout
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True)

    def result(self) -> tuple[int, str, str]:
        try:
            out, err = self.proc.communicate(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, err = self.proc.communicate()
            pytest.fail(f"{' '.join(self.cmd)} did not finish in {self.timeout} s:\n{out[-2000:]}{err[-2000:]}")
        return self.proc.returncode, out, err


@pytest.fixture(scope="module")
def broker():
    with BrokerThread(group_initial_rebalance_delay_ms=0) as b:
        yield b


@pytest.fixture(scope="module")
def runs(broker: BrokerThread, tmp_path_factory: pytest.TempPathFactory):
    """Every example started at once (they mostly wait on sockets and timers), as the docs run them."""
    started: dict[str, Run] = {}
    try:
        for name in EXAMPLES:
            script = f"examples/{name}"
            if name in PYTEST_FILES:
                started[name] = Run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", script],
                                    None, 300)
                continue
            extra, figures = RUNS.get(name, ([], None))
            cmd = [sys.executable, script, *extra]
            if name not in OWN_CLUSTER:
                cmd += ["--bootstrap", broker.bootstrap]
            out = None
            if figures is not None:
                out = tmp_path_factory.mktemp(figures)
                cmd += ["--out", str(out)]
            started[name] = Run(cmd, out, 240)
        yield started
    finally:
        for run in started.values():
            if run.proc.poll() is None:
                run.proc.kill()
                run.proc.communicate()


def test_examples_are_all_known() -> None:
    """A new example gets a line in RUNS (or runs with --bootstrap alone) and a line in the README."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for name in EXAMPLES:
        assert f"examples/{name}" in readme, f"{name} is not in the README's list of examples"


@pytest.mark.parametrize("name", EXAMPLES)
def test_example_runs(name: str, runs: dict[str, Run]) -> None:
    run = runs[name]
    code, stdout, stderr = run.result()
    assert code == 0, stdout[-3000:] + stderr[-3000:]
    if name in PYTEST_FILES:
        assert " passed" in stdout and "failed" not in stdout
        return
    figures = RUNS.get(name, ([], None))[1]
    if figures is not None:
        assert run.out is not None
        values = json.loads((run.out / f"{figures}.json").read_text(encoding="utf-8"))
        assert values
        assert list(run.out.glob(f"{figures}-*.svg")), "no chart written"
        if name == "fetch_session_seed.py":  # the seed's figures, against the broker started here
            assert (values["full_bytes"], values["incremental_bytes"]) == (12043, 33)
            assert "saving per fetch: 12043 / 33 bytes = 365x" in stdout
        if name == "replication_quotas.py":
            assert values["phantom_bytes"] == 18
    if name == "quickstart.py":
        assert "consumed 10 messages" in stdout
