"""The package type-checks: ``mypy minikafka`` from the repo root (configured in pyproject.toml's
``[tool.mypy]``) reports no errors.  Its cache is the default, git-ignored ``.mypy_cache``, so a
repeated run only re-checks what changed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_mypy_passes() -> None:
    proc = subprocess.run([sys.executable, "-m", "mypy", "minikafka"], cwd=REPO, capture_output=True,
                          text=True, timeout=600)
    if proc.returncode != 0:
        pytest.fail(f"mypy failed (exit {proc.returncode}):\n{proc.stdout}{proc.stderr}", pytrace=False)
