"""The analyses, one module each, all with the same shape::

    NAME = "traffic"                      # used for output file names
    TITLE = "Traffic by API, client and topic"
    def run(tables: Tables, opts: AnalysisOptions) -> dict[str, DataFrame]:
        '''Spark DataFrames of results, by table name (written as Parquet and CSV).'''
    def report(results: dict[str, pandas.DataFrame], opts: AnalysisOptions) -> list[Section]:
        '''What the HTML report shows: text, small tables, charts (plots.Chart).'''

``run`` does the work on Spark (the results are small: aggregates per time
bucket, client, topic...), ``report`` only formats the collected results
(:class:`~.plots.Chart` holds a chart's data; the report draws it in the browser).

A job that reads only some requests may also say whether a capture has any::

    def has_input(facts: dict) -> bool:   # facts: see minikafka.analysis.tables.capture_facts
        '''False when none of the rows ``run`` reads are in the capture.'''

A job without input runs on empty tables (:meth:`~minikafka.analysis.tables.Tables.empty`): its results are
what the capture would give, and Spark plans them without scanning it.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any

JOB_MODULES = ["traffic", "latency", "sessions", "quotas", "replication", "lag"]


@dataclass
class AnalysisOptions:
    """Settings shared by the jobs (``minikafka analyze`` options)."""

    bucket_seconds: float = 1.0                 # time-series resolution
    # Quota what-if (quotas job): bytes/s per client id ("*" = every client), request percentage.
    produce_quota: dict[str, float] = field(default_factory=dict)
    fetch_quota: dict[str, float] = field(default_factory=dict)
    request_quota: dict[str, float] = field(default_factory=dict)
    quota_window_num: int = 11
    quota_window_size_seconds: float = 1.0
    # Replication (replication job): throttled replicas "topic:partition:broker" or "topic:*"; rate in bytes/s.
    leader_throttled_replicas: list[str] = field(default_factory=list)
    leader_throttled_rate: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class Section:
    """A part of the HTML report: a heading, paragraphs, small tables, interactive charts."""

    title: str
    text: list[str] = field(default_factory=list)          # paragraphs (plain text, escaped)
    tables: list[tuple[str, Any]] = field(default_factory=list)  # (caption, pandas.DataFrame)
    # (caption, plots.Chart, or a list of Charts: panels sharing their x axis, zoomed together)
    figures: list[tuple[str, Any]] = field(default_factory=list)


def job(name: str) -> Any:
    """The job module ``name``."""
    return importlib.import_module(f"{__name__}.{name}")


def has_input(mod: Any, facts: dict[str, Any]) -> bool:
    """Whether job module ``mod`` has rows to read in a capture with ``facts`` (True unless it says not)."""
    check = getattr(mod, "has_input", None)
    return True if check is None else bool(check(facts))


def all_jobs() -> list[Any]:
    return [job(n) for n in JOB_MODULES]
