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

    # Test captures are small: few shuffle partitions keep each job's stages short.
    s = spark_session("local[2]", app_name="minikafka-tests",
                      conf={"spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2"})
    yield s
    s.stop()
