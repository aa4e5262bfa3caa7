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
from minikafka.analysis.jobs import AnalysisOptions
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


def _rows(df: Any) -> list[tuple]:
    """A DataFrame's rows as sortable tuples (None sorts first)."""
    return sorted((tuple((v is not None, v) for v in row) for row in df.collect()), key=repr)


@pytest.mark.clients
def test_driver_decode_gives_the_data_sources_tables(spark: Any, capture: Path) -> None:
    """A small capture decoded in the driver (staged in Parquet files on a local master, else handed to Spark
    from memory) gives the same three tables, and the same facts, as the data source decoding it in tasks;
    the staged files go with the tables."""
    from minikafka.analysis.tables import arrow_tables, capture_facts, decode_here, decodes_in_driver, load_tables

    assert decodes_in_driver(spark, str(capture))  # small, local master: "auto" decodes here
    assert not decodes_in_driver(spark, str(capture), "executors")
    here = load_tables(spark, str(capture), decode_in="driver").cache()
    in_memory = arrow_tables(spark, decode_here(str(capture)), stage=False).cache()
    tasks = load_tables(spark, str(capture), decode_in="executors", splitSize=SPLIT).cache()
    staged = here.staged
    try:
        assert here.source is None and tasks.source is not None and in_memory.staged is None
        assert staged is not None and sorted(p.name for p in staged.iterdir()) == ["partitions.parquet",
                                                                                 "requests.parquet",
                                                                                 "topics.parquet"]
        for name in ("requests", "partitions", "topics"):
            b = getattr(tasks, name)
            for a in (getattr(here, name), getattr(in_memory, name)):
                assert a.schema == b.schema, name
                assert _rows(a) == _rows(b), name
        facts = capture_facts(here)
        assert here.facts is not None and facts == capture_facts(tasks) == capture_facts(in_memory)
        assert facts["requests"] == sum(1 for _ in read_capture([capture]))
        assert 0 in facts["api_keys"] and 1 in facts["api_keys"] and facts["follower_fetches"] == 0
    finally:
        here.unpersist()
        in_memory.unpersist()
        tasks.unpersist()
    assert not staged.exists()


@pytest.mark.clients
def test_jobs_without_input_give_the_same_tables(spark: Any, capture: Path, tmp_path: Path) -> None:
    """A job whose input is not in the capture (no follower fetches: replication) runs on empty tables, and
    its tables are those the whole capture gives; jobs with input (lag, sessions: Fetch) run on the capture."""
    from minikafka.analysis.jobs import has_input, job
    from minikafka.analysis.tables import capture_facts, load_tables

    tables = load_tables(spark, str(capture)).cache()
    try:
        facts = capture_facts(tables)
        assert not has_input(job("replication"), facts)
        assert has_input(job("lag"), facts) and has_input(job("sessions"), facts) and has_input(job("traffic"), facts)
        assert not has_input(job("lag"), {**facts, "api_keys": [0, 3]})
        assert not has_input(job("sessions"), {**facts, "api_keys": [0, 3]})
        assert has_input(job("sessions"), {**facts, "api_keys": [78]})

        mod = job("replication")
        whole = {t: df.toPandas() for t, df in mod.run(tables, AnalysisOptions()).items()}
        empty = {t: df.toPandas() for t, df in mod.run(tables.empty(), AnalysisOptions()).items()}
        assert whole.keys() == empty.keys()
        for t in whole:
            assert list(whole[t].columns) == list(empty[t].columns), t
            assert whole[t].to_dict("records") == empty[t].to_dict("records"), t
        assert len(whole["replication_empty_sizes"]) > 0  # a table of no data at all, the same either way
    finally:
        tables.unpersist()

    summary = analyze(capture, tmp_path / "out", spark=spark, report=False, jobs=["replication", "lag"])
    assert summary["failed"] == []
    assert summary["jobs"]["lag"]["tables"]["lag_partitions"]["rows"] > 0  # lag ran on the capture
    assert summary["jobs"]["replication"]["tables"]["replication_empty_sizes"]["rows"] == len(
        whole["replication_empty_sizes"])


def test_python_workers_start_with_the_analysis_preloaded(spark: Any) -> None:
    """The sessions' Python worker daemon imports pandas, pyarrow and the decoder before it forks a worker."""
    from minikafka.analysis.worker_daemon import PRELOAD

    assert spark.conf.get("spark.python.daemon.module") == "minikafka.analysis.worker_daemon"

    def loaded(_rows: Any) -> Any:
        import sys

        yield [(name, name in sys.modules) for name in PRELOAD]

    (row,) = spark.sparkContext.parallelize([0], 1).mapPartitions(loaded).collect()
    assert dict(row) == dict.fromkeys(PRELOAD, True)


def test_short_session_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """A session for a short analysis gets the JVM options for a run of seconds, unless told others."""
    from minikafka.analysis.session import SHORT_RUN_JVM_OPTIONS, session_settings

    monkeypatch.setenv("MINIKAFKA_SPARK_CDS", "off")
    short = session_settings("local[2]", short=True)
    assert short["spark.driver.extraJavaOptions"] == SHORT_RUN_JVM_OPTIONS
    assert short["spark.buffer.pageSize"] == "1m"
    assert "-Xmn400m" in SHORT_RUN_JVM_OPTIONS.split()
    assert "spark.driver.extraJavaOptions" not in session_settings("local[2]")
    assert "spark.buffer.pageSize" not in session_settings("local[2]")
    assert session_settings("local[2]", {"spark.buffer.pageSize": "4m"}, short=True)["spark.buffer.pageSize"] == "4m"
    mine = {"spark.driver.extraJavaOptions": "-Xss4m"}
    assert session_settings("local[2]", mine, short=True)["spark.driver.extraJavaOptions"] == "-Xss4m"
    assert session_settings("local[3]")["spark.sql.shuffle.partitions"] == "3"


@pytest.mark.clients
def test_records_outlive_their_split(capture: Path) -> None:
    """Records read from a split stay readable after it is read to its end or left early (they are views of
    the mapped file: it stays mapped while they live)."""
    import gc
    import itertools
    import warnings

    split = plan_splits(str(capture), SPLIT)[0]
    whole = list(read_split(split))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an exception while closing the generator would be a warning here
        reader = read_split(split)
        first = list(itertools.islice(reader, 3))
        reader.close()
        gc.collect()
    assert len(whole) > 3
    assert [bytes(r.request) for r in first] == [bytes(r.request) for r in whole[:3]]
    assert all(len(bytes(r.request)) > 0 for r in whole)


def test_class_data_sharing_archive(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A short session's JVM writes a class-data-sharing archive as it exits, to a name of its own with its pid
    beside it; a later session adopts it once that JVM is gone and starts from it."""
    import subprocess
    import sys

    from minikafka.analysis import session

    monkeypatch.setenv("MINIKAFKA_SPARK_CDS", str(tmp_path))
    monkeypatch.setattr(session, "_PENDING", [])
    first = session.class_data_sharing()
    assert "-XX:ArchiveClassesAtExit=" in first and "-Xlog:cds=off" in first
    (pending,) = session._PENDING
    assert pending.parent == tmp_path and not pending.exists()
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        session.note_driver_jvm(child.pid)  # the JVM still runs: its archive is not complete yet
        pending.write_bytes(b"archive")
        assert "-XX:ArchiveClassesAtExit=" in session.class_data_sharing()
        assert pending.exists()
    finally:
        child.communicate(b"", timeout=30)
    session._PENDING.clear()
    second = session.class_data_sharing()  # that JVM has exited: its archive is adopted
    archive = tmp_path / pending.name.split(".")[1]
    archive = archive.with_name(f"{archive.name}.jsa")
    assert second.startswith(f"-XX:SharedArchiveFile={archive} ") and archive.read_bytes() == b"archive"
    assert sorted(p.name for p in tmp_path.iterdir()) == [archive.name]
    monkeypatch.setenv("MINIKAFKA_SPARK_CDS", "off")
    assert session.class_data_sharing() == ""


def test_small_input_settings(spark: Any) -> None:
    """A small capture's queries run without whole-stage code generation or adaptive execution, keep
    ``percentile_approx``'s digests hashed and cache uncompressed; under 20k requests expressions are
    interpreted too.  Only the keys the session does not set are changed, and they are put back after."""
    from minikafka.analysis.run import _small_input_conf

    keys = ("spark.sql.codegen.wholeStage", "spark.sql.objectHashAggregate.sortBased.fallbackThreshold",
            "spark.sql.inMemoryColumnarStorage.compressed", "spark.sql.codegen.factoryMode")
    before = {k: spark.conf.get(k, None) for k in keys}
    restore = _small_input_conf(spark, 150_000)
    assert restore is not None
    try:
        assert [spark.conf.get(k, None) for k in keys] == ["false", "100000", "false", before[keys[3]]]
    finally:
        restore()
    assert {k: spark.conf.get(k, None) for k in keys} == before
    assert _small_input_conf(spark, 250_000) is None
    spark.conf.set("spark.sql.codegen.wholeStage", "true")
    try:
        restore = _small_input_conf(spark, 10_000)
        assert restore is not None
        assert spark.conf.get("spark.sql.codegen.wholeStage") == "true"
        assert spark.conf.get("spark.sql.codegen.factoryMode") == "NO_CODEGEN"
        restore()
        assert spark.conf.get("spark.sql.codegen.wholeStage") == "true"
    finally:
        spark.conf.unset("spark.sql.codegen.wholeStage")
