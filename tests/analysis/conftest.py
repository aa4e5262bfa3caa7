"""Fixtures for the analysis tests: one local Spark session for the whole run."""

from __future__ import annotations

import shutil

import pytest

pyspark = pytest.importorskip("pyspark")


@pytest.fixture(scope="session")
def spark():
    if shutil.which("java") is None:
        pytest.skip("Spark needs Java (scripts/install-test-tools installs it)")
    from minikafka.analysis.session import spark_session

    s = spark_session("local[2]", app_name="minikafka-tests")
    yield s
    s.stop()
