"""The analysis decodes each capture file once and runs a bounded number of Spark jobs (issue 28, its speed).

Behaviour, not timing: the data source's ``traceDir`` option records every split a task decoded, and the
Spark jobs of one ``analyze`` are counted through the status tracker (a job group set around the call).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from traffic_helpers import make_client_capture

from minikafka.analysis.datasource import plan_splits, read_split
from minikafka.analysis.decode import ALL_KINDS, RecordDecoder
from minikafka.analysis.run import analyze
from minikafka.capture import read_capture

SPLIT = 16 << 10  # bytes per split: several splits in the test's capture file
#: Spark jobs allowed per result table (its collect, the shuffle stages AQE submits as jobs of their own,
#: broadcasts), plus a few for the whole analysis (the capture's one read and its facts, the quota groups).
JOBS_PER_TABLE = 4
JOBS = ["traffic", "sessions"]  # two jobs (14 result tables) sharing one read of the capture
JOBS_PER_ANALYSIS = 10


@pytest.fixture(scope="module")
def capture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("confluent_kafka")
    return make_client_capture(tmp_path_factory.mktemp("reads"), n=120).path


@pytest.mark.clients
def test_one_pass_gives_each_tables_rows(capture: Path) -> None:
    """The ``all`` table's single pass yields exactly the rows of the three per-table passes, in order."""
    splits = plan_splits(str(capture), SPLIT)
    rows = dict.fromkeys(ALL_KINDS, 0)
    for split in splits:
        together: dict[str, list[tuple]] = {t: [] for t in ALL_KINDS}
        for table, row in RecordDecoder("s").iter_all(read_split(split)):
            together[table].append(row)
        for table in ALL_KINDS:
            alone = list(RecordDecoder("s").iter_rows(read_split(split), table))
            assert together[table] == alone, table
            rows[table] += len(alone)
    assert rows["requests"] == sum(1 for _ in read_capture([capture]))
    assert rows["partitions"] > 0 and rows["topics"] > 0, rows


@pytest.mark.clients
def test_analysis_decodes_each_split_once(spark: Any, capture: Path, tmp_path: Path) -> None:
    trace = tmp_path / "trace"
    trace.mkdir()
    splits = plan_splits(str(capture), SPLIT)
    assert len(splits) >= 2, "the capture should span several splits"
    sc = spark.sparkContext
    group = "test-analysis-reads"
    sc.setJobGroup(group, "one analysis")
    try:
        summary = analyze(capture, tmp_path / "out", spark=spark, report=False, jobs=JOBS,
                          load_options={"splitSize": SPLIT, "traceDir": str(trace)})
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
        sc.setLocalProperty("spark.job.description", None)  # type: ignore[arg-type]
    assert summary["failed"] == [] and all(i["status"] == "ok" for i in summary["jobs"].values()), summary["jobs"]
    assert summary["capture"]["requests"] == sum(1 for _ in read_capture([capture]))

    reads = sorted(tuple(line.split("\t")[:3]) for f in trace.iterdir()
                   for line in f.read_text(encoding="utf-8").splitlines())
    # Every split decoded exactly once, for the three tables at once: the jobs share one read of the capture.
    assert reads == sorted(("all", s.path, str(s.start)) for s in splits)

    tables = sum(len(info["tables"]) for info in summary["jobs"].values())
    assert tables >= 14  # every job's tables were collected and written
    jobs = len(sc.statusTracker().getJobIdsForGroup(group))
    assert 0 < jobs <= JOBS_PER_TABLE * tables + JOBS_PER_ANALYSIS, (jobs, tables)
