"""Wire replay distributed over Spark executors: each task replays a share of the capture's connections.

Resembles running many ``kafka-producer-perf-test``/``kafka-consumer-perf-test``
workers (Trogdor agents) against one cluster, but every worker replays
recorded connections with :mod:`minikafka.capture.replay` and the driver merges
their :class:`~minikafka.capture.replay.ReplayReport`\\ s.

Frames are not shipped through the driver.  The driver reads the capture once
to list its connections (and the first receive time), builds an RDD of
connection keys dealt round-robin (busiest first) into tasks with
``partitionBy``; each task reads the capture itself, keeps only its
connections' records and runs one ``trio.run`` replay of them.  Frames are the bulk of a capture (Fetch
responses especially): shipping them would pickle the whole capture through
the driver's memory and the Py4J/socket path, whereas reading is a sequential
scan each executor can do from shared storage.  The price: the capture paths
must be readable by every executor (a shared or distributed filesystem on a
real cluster; any path with ``local[N]``), and each task scans every file.

Pacing at ``Nx`` uses one wall-clock base time chosen by the driver
(``time.time_ns()`` plus ``lead_s``) and the capture's first receive time, so
connections in different tasks keep their relative timing.  Causality
(:mod:`~minikafka.capture.replay`) only holds within a task: a request does not
wait for requests of connections replayed by another task, nor for values
(producer ids, member ids, member epochs) those introduce, and the member epochs
a task rewrites requests with are those its own connections' heartbeats got.  pyspark is imported here only.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..capture.reading import read_capture
from ..capture.replay import ConnKey, ReplayOptions, ReplayReport, run_replay

log = logging.getLogger(__name__)

DEFAULT_LEAD_S = 3.0


def index_capture(paths: Iterable[str | Path]) -> tuple[dict[ConnKey, int], int | None]:
    """Requests per (broker id, connection id), and the first receive time of the capture."""
    counts: dict[ConnKey, int] = {}
    first: int | None = None
    for r in read_capture(paths):
        key = (r.broker_id, r.connection_id)
        counts[key] = counts.get(key, 0) + 1
        first = r.receive_ns if first is None else min(first, r.receive_ns)
    return counts, first


def _replay_task(paths: list[str], options: ReplayOptions):
    """The function each partition runs: replay its connections, yield one report."""

    def run(keys: Iterator[Any]) -> Iterator[ReplayReport]:
        mine = {(int(b), str(c)) for b, c in keys}
        if not mine:
            return
        logging.basicConfig(level=logging.WARNING)
        yield run_replay(paths, options, connections=mine)

    return run


def _session(master: str | None) -> Any:
    from .session import spark_session

    try:
        return spark_session(master=master, app_name="minikafka-replay")
    except ImportError as exc:  # the analysis data source failed to load; the session itself is up
        from pyspark.sql import SparkSession

        log.warning("spark session without the minikafka data source: %s", exc)
        spark = SparkSession.getActiveSession()
        if spark is None:
            raise
        return spark


def run_spark_replay(paths: Iterable[str | Path], options: ReplayOptions, master: str | None = None,
                     partitions: int | None = None, lead_s: float = DEFAULT_LEAD_S,
                     spark: Any = None) -> ReplayReport:
    """Replay a capture with its connections spread over Spark tasks; returns the merged report.

    ``partitions`` defaults to the session's default parallelism (capped at the
    number of connections).  ``master`` is passed to
    :func:`minikafka.analysis.session.spark_session` (``local[*]`` if None).
    """
    resolved = [str(Path(p).resolve()) for p in paths]
    counts, first = index_capture(resolved)
    if not counts:
        raise ValueError("the capture has no records")
    spark = spark if spark is not None else _session(master)
    sc = spark.sparkContext
    n = max(1, min(partitions or sc.defaultParallelism, len(counts)))
    keys = sorted(counts, key=lambda k: -counts[k])
    opts = replace(options, first_ns=first,
                   base_time_ns=None if options.speed is None else time.time_ns() + int(lead_s * 1e9))
    log.info("replaying %d connection(s) in %d Spark task(s)", len(keys), n)
    started = time.perf_counter()
    # Deal the connections round-robin (busiest first) into n partitions.  Not ``repartition(n)``: PySpark
    # shuffles pickled batches of elements, so a small RDD's connections may all land in one task.
    rdd = sc.parallelize([(i % n, list(k)) for i, k in enumerate(keys)], n).partitionBy(n, lambda i: i).values()
    collected: list[ReplayReport] = rdd.mapPartitions(_replay_task(resolved, opts)).collect()
    log.info("Spark replay: %d task report(s) in %.1f s", len(collected), time.perf_counter() - started)
    if not collected:
        return ReplayReport(options.target, options.speed, tasks=0)
    return ReplayReport.combine(collected)  # duration: the longest task's replay
