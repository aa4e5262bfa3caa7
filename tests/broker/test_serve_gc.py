"""``minikafka serve`` freezes its start-up objects (``gc.freeze``) once it is ready: the full collections a
running broker makes scan only what it made since, instead of stalling every connection for tens of milliseconds
on the ~45k objects of its modules and compiled schemas (the end-to-end latency's tail, issue 27).

The test runs the real command in a subprocess, waits for its "ready" line, stops it with Ctrl-C (SIGINT) and
reads how many objects were frozen."""

from __future__ import annotations

from pathlib import Path

from test_serve_imports import serve_until_ready


def test_a_ready_broker_has_frozen_its_start_up_objects(tmp_path: Path) -> None:
    assert int(serve_until_ready(tmp_path, "str(gc.get_freeze_count())")) > 10_000


def test_a_ready_cluster_has_frozen_its_start_up_objects(tmp_path: Path) -> None:
    assert int(serve_until_ready(tmp_path, "str(gc.get_freeze_count())", "--brokers", "2",
                                  "--in-process")) > 10_000


def test_the_collector_is_off_during_start_up_and_on_once_ready(tmp_path: Path) -> None:
    """Start-up keeps the cyclic collector off (its objects are frozen once ready): a running broker collects."""
    stats = serve_until_ready(tmp_path, "repr((gc.isenabled(), [s['collections'] for s in gc.get_stats()]))")
    enabled, collections = eval(stats)
    # With it on, start-up makes ~100 young collections; off, the few counted are those of the running broker.
    assert enabled and sum(collections) < 50
