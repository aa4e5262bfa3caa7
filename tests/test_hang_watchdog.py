"""The suite's watchdog (``tests/hang_watchdog.py``): a test that hangs holding the GIL fails, with stacks."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

HUNG = '''
import ctypes


def test_holds_the_gil():
    ctypes.PyDLL(None).sleep(600)  # a C call that keeps the GIL, as a deadlocked client's call does
'''


def test_a_test_hung_holding_the_gil_fails_with_its_stack(tmp_path: Path) -> None:
    (tmp_path / "test_hung.py").write_text(HUNG, encoding="utf-8")
    env = {**os.environ, "MINIKAFKA_TEST_HANG_S": "2", "PYTHONPATH": str(Path(__file__).parent)}
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                        "-p", "hang_watchdog", "test_hung.py"], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode != 0
    assert "Timeout (0:00:02)!" in r.stderr
    assert "test_hung.py\", line 6 in test_holds_the_gil" in r.stderr
