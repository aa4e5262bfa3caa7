"""The Python worker daemon of the analysis's Spark sessions (``spark.python.daemon.module``).

PySpark's own daemon (:mod:`pyspark.daemon`) forks a worker per task; each worker then imports what its
task needs (pandas, pyarrow, the data source's decoder, a job's replay code) before doing any work.  This
daemon imports those once, before it forks, so every worker starts with them loaded -- the preloading
``gunicorn --preload`` does for web workers.  It is otherwise PySpark's daemon, unchanged.
"""

from __future__ import annotations

import importlib
import logging

log = logging.getLogger(__name__)

#: What the analysis's Python workers import: the UDF runtime and the modules its tasks run.
PRELOAD = ("pyspark.worker", "pandas", "pyarrow", "minikafka.analysis.datasource",
           "minikafka.analysis.jobs.sessions", "minikafka.analysis.jobs.quotas", "minikafka.analysis.jobs.replication")


def preload() -> None:
    """Import :data:`PRELOAD` (a module that fails to import is left to the worker that needs it)."""
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except Exception as exc:  # noqa: BLE001 - the worker imports it again and reports the error there
            log.debug("not preloaded: %s (%s)", name, exc)


if __name__ == "__main__":
    preload()
    from pyspark.daemon import manager

    manager()
