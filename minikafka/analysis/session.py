"""The Spark session the analysis jobs run on: local by default, the submitter's under spark-submit.

``spark_session()`` returns the active session when there is one (``spark-submit``
created it, with whatever ``--master`` the user gave), else builds a local one
(``local[*]`` unless ``master`` says otherwise).  Either way the ``minikafka``
data source is registered.  Executors run the same Python as the driver
(``PYSPARK_PYTHON`` defaults to ``sys.executable``), so they decode with this
installation of minikafka, and their Python workers fork from
:mod:`minikafka.analysis.worker_daemon` (the decoder and pandas already imported);
on a real cluster, install minikafka on the workers (or ship it with ``--py-files``).
"""

from __future__ import annotations

import logging
import os
import re
import sys
from typing import Any

log = logging.getLogger(__name__)

DEFAULT_CONF = {
    "spark.ui.enabled": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.shuffle.partitions": "8",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.driver.memory": "2g",
    "spark.ui.showConsoleProgress": "false",
    # PySpark's call-site capture for error messages costs a few JVM round trips per column function; the
    # jobs build hundreds of columns.
    "spark.python.sql.dataFrameDebugging.enabled": "false",
    # Python workers forked with pandas, pyarrow and the decoder already imported.
    "spark.python.daemon.module": "minikafka.analysis.worker_daemon",
}

#: Driver JVM options for a short analysis (``spark_session(short=True)``): the C1 compiler only (a run of
#: seconds never earns back C2's compilations) and the serial collector (a small heap, few cores).
SHORT_RUN_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def local_conf(master: str) -> dict[str, str]:
    """Settings for a ``local[N]`` master: as many shuffle partitions as cores (the results are aggregates;
    more partitions than cores only add tasks)."""
    m = re.fullmatch(r"local(?:\[(\*|\d+)(?:,\d+)?\])?", master.strip())
    if m is None:
        return {}
    n = m.group(1)
    cores = 1 if n is None and master.strip() == "local" else (os.cpu_count() or 1) if n in (None, "*") else int(n)
    return {"spark.sql.shuffle.partitions": str(max(1, cores))}


def _prepare_env() -> None:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")


def session_settings(master: str | None, conf: dict[str, str] | None = None, short: bool = False) -> dict[str, str]:
    """The settings a new session gets: :data:`DEFAULT_CONF`, those of a ``local[N]`` master, ``conf``, and for
    a ``short`` run :data:`SHORT_RUN_JVM_OPTIONS` for the driver (unless ``conf`` sets its JVM options)."""
    settings = {**DEFAULT_CONF, **(local_conf(master) if master else {}), **(conf or {})}
    if short:
        settings.setdefault("spark.driver.extraJavaOptions", SHORT_RUN_JVM_OPTIONS)
    return settings


def spark_session(master: str | None = None, app_name: str = "minikafka", conf: dict[str, str] | None = None,
                  short: bool = False) -> Any:
    """The active SparkSession, or a new one (``local[*]`` by default) with :func:`session_settings`; either way
    with the data source registered.  ``short``: the new session is for a run of seconds."""
    _prepare_env()
    from pyspark.sql import SparkSession

    spark = SparkSession.getActiveSession()
    if spark is None:
        builder = SparkSession.builder.appName(app_name)
        chosen = None
        # Under spark-submit the JVM already runs (PYSPARK_GATEWAY_PORT) with the user's --master.
        if master or "PYSPARK_GATEWAY_PORT" not in os.environ:
            chosen = master or os.environ.get("MINIKAFKA_SPARK_MASTER", "local[*]")
            builder = builder.master(chosen)
        for k, v in session_settings(chosen, conf, short).items():
            builder = builder.config(k, v)
        spark = builder.getOrCreate()
        spark.sparkContext.setLogLevel("WARN")
    register(spark)
    return spark


def register(spark: Any) -> None:
    """Register the ``minikafka`` Python data source with ``spark`` (idempotent)."""
    if getattr(spark, "_minikafka_registered", False):
        return
    from .datasource import MinikafkaDataSource

    spark.dataSource.register(MinikafkaDataSource)
    spark._minikafka_registered = True
