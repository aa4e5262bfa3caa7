"""Run the analysis jobs over captures: Parquet and CSV tables per job, one HTML report.

::

    analyze(["capture-dir/"], "out/")           # local Spark session unless one is active
    minikafka analyze capture-dir/ --out out/
    spark-submit minikafka/analysis/run.py capture-dir/ --out out/   # the submitter's master

Output layout: ``out/<job>/<table>.parquet`` (a Spark Parquet directory),
``out/<job>/<table>.csv`` (one CSV file with a header; results are small) and
``out/report.html``.  The captures are read once (every record decoded once
for the three tables) and cached; every job module that imports is run (or
those named) on the cached tables, and a job that fails is reported without
stopping the others.  Each result table is collected by one Spark job and
written by the driver (results are small), so ``out`` only needs to be on the
driver's filesystem.
"""

from __future__ import annotations

import os
import sys

if __name__ == "__main__":  # a script (spark-submit .../run.py): import the package, not this directory's files
    _here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _here]
    try:
        import minikafka  # noqa: F401
    except ImportError:  # a source tree that is not installed
        sys.path.insert(0, os.path.dirname(os.path.dirname(_here)))

import argparse
import datetime as dt
import glob
import logging
import shutil
import traceback
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Executor, Future, ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any

from minikafka.analysis.jobs import JOB_MODULES, AnalysisOptions, has_input, job
from minikafka.common.clock import SYSTEM_CLOCK, Clock

log = logging.getLogger("minikafka.analysis.run")

FORMATS = ("parquet", "csv")


def _uri(path: Path) -> str:
    """A ``file:`` URI for a driver path, so Spark does not resolve it against a cluster's default FS."""
    return path.resolve().as_uri()


def write_csv(df: Any, dest: Path) -> Path:
    """``df`` as ONE CSV file with a header at ``dest`` (via ``coalesce(1)`` and a temporary directory)."""
    tmp = dest.with_name(f".{dest.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    (df.coalesce(1).write.mode("overwrite").option("header", True)
     .option("timestampFormat", "yyyy-MM-dd'T'HH:mm:ss.SSSSSSXXX").csv(_uri(tmp)))
    parts = sorted(glob.glob(str(tmp / "part-*")))
    if dest.is_dir():
        shutil.rmtree(dest)
    if parts:
        shutil.move(parts[0], dest)
    else:  # Spark wrote no part file (an empty result): just the header
        dest.write_text(",".join(df.columns) + "\n", encoding="utf-8")
    shutil.rmtree(tmp, ignore_errors=True)
    return dest


def _arrow_table(pdf: Any, schema: Any, timezone: str | None) -> Any:
    """``pdf`` (what ``toPandas`` made of a DataFrame of ``schema``) back as an Arrow table with the Spark
    types of ``schema``, converted as Spark's ``createDataFrame`` converts pandas."""
    import pyarrow as pa

    try:
        from pyspark.sql.pandas.conversion import create_arrow_table_from_pandas
    except ImportError:  # an older PySpark: pandas' own conversion
        return pa.Table.from_pandas(pdf, preserve_index=False)
    table = create_arrow_table_from_pandas([(pdf[f.name], f.dataType) for f in schema.fields], timezone=timezone)
    return table.rename_columns(list(schema.names))


def write_parquet_pandas(pdf: Any, schema: Any, dest: Path, timezone: str | None = None) -> Path:
    """A collected result as a Parquet directory at ``dest`` (one part file and ``_SUCCESS``, as Spark
    writes it; Spark and pandas read it back), written by the driver: no Spark job."""
    import pyarrow.parquet as pq

    tmp = dest.with_name(f".{dest.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    # Timestamps as INT96, as Spark writes them by default: read back alike by Spark and by pandas.
    pq.write_table(_arrow_table(pdf, schema, timezone), tmp / "part-00000.parquet",
                   use_deprecated_int96_timestamps=True)
    (tmp / "_SUCCESS").write_bytes(b"")
    if dest.is_dir():
        shutil.rmtree(dest)
    elif dest.exists():
        dest.unlink()
    tmp.rename(dest)
    return dest


def write_csv_pandas(pdf: Any, dest: Path) -> Path:
    """A collected result as ONE CSV file with a header at ``dest``, formatted as :func:`write_csv` (Spark's
    CSV writer) formats it: timestamps ISO 8601 with microseconds and zone, booleans ``true``/``false``,
    nulls empty; written by the driver: no Spark job."""
    import pandas as pd

    out = pdf.copy(deep=False)
    for col in out.columns:
        s = out[col]
        if pd.api.types.is_datetime64_any_dtype(s):
            text = s.dt.strftime("%Y-%m-%dT%H:%M:%S.%f") + ("Z" if s.dt.tz is None else s.dt.strftime("%z"))
            out[col] = text.where(s.notna(), None)
        elif pd.api.types.is_bool_dtype(s) or (s.dtype == object and s.map(type).eq(bool).any()):
            out[col] = s.map(lambda v: v if not isinstance(v, bool) else ("true" if v else "false"))
    dest.parent.mkdir(parents=True, exist_ok=True)
    if dest.is_dir():
        shutil.rmtree(dest)
    out.to_csv(dest, index=False)
    return dest


#: Result tables collected at once (their Spark queries overlap: most of a small query is latency).
COLLECT_THREADS = 6
#: Jobs run at once (building a job's queries is a run of JVM round trips; several overlap).
JOB_THREADS = 3
#: Inputs up to this many bytes get a driver JVM tuned for a run of seconds (see ``spark_session(short=...)``).
SHORT_RUN_MAX_BYTES = 256 << 20
#: Settings for the queries of a small capture, by the request count under which each applies: no
#: whole-stage code generation (compiling a query's generated code with Janino takes longer than running it
#: interpreted over some thousand rows), no adaptive execution (re-planning each small query at every stage
#: boundary costs more than it saves), aggregations of objects (``percentile_approx``'s digests) kept in
#: their hash map up to 100k groups per task (Spark sorts every row from 128 groups on), tables cached
#: uncompressed (they are small: encoding their columns costs more than it saves), and under fewer requests
#: no code generation for expressions either (``factoryMode``: Spark's interpreted fallback as the only mode).
SMALL_INPUT_CONF: tuple[tuple[int, dict[str, str]], ...] = (
    (200_000, {"spark.sql.codegen.wholeStage": "false", "spark.sql.adaptive.enabled": "false",
               "spark.sql.objectHashAggregate.sortBased.fallbackThreshold": "100000",
               "spark.sql.inMemoryColumnarStorage.compressed": "false"}),
    (20_000, {"spark.sql.codegen.factoryMode": "NO_CODEGEN"}),
)


def _small_input_conf(spark: Any, requests: int) -> Callable[[], None] | None:
    """The :data:`SMALL_INPUT_CONF` settings for a capture of ``requests`` requests, where the session's conf
    does not set the key already; returns what puts the settings back (None: nothing changed)."""
    wanted = {key: value for limit, conf in SMALL_INPUT_CONF if requests < limit for key, value in conf.items()}
    changed = {key: value for key, value in wanted.items() if spark.conf.get(key, None) is None}
    if not changed:
        return None
    for key, value in changed.items():
        spark.conf.set(key, value)

    def restore() -> None:
        for key in changed:
            spark.conf.unset(key)
    return restore


def _short_input(inputs: Sequence[str]) -> bool:
    """Whether the local files at ``inputs`` hold at most :data:`SHORT_RUN_MAX_BYTES`."""
    from minikafka.analysis.datasource import input_bytes

    size = input_bytes(list(inputs))
    return size is not None and size <= SHORT_RUN_MAX_BYTES


def _ts(ns: int | None) -> dt.datetime | None:
    return None if ns is None else dt.datetime.fromtimestamp(ns / 1e9, dt.UTC)


def _collect(results: dict[str, Any], pool: Executor | None, clock: Clock = SYSTEM_CLOCK) -> dict[str, Future]:
    """``toPandas()`` of every result, as futures: on ``pool``'s threads (each with the calling thread's Spark
    local properties: job group, scheduler pool), or one after the other here when ``pool`` is None."""
    def collect(df: Any, props: Any) -> tuple[Any, float]:
        if props is not None:
            df.sparkSession.sparkContext._jsc.sc().setLocalProperties(props)
        t = clock.monotonic()
        return df.toPandas(), clock.monotonic() - t

    out: dict[str, Future] = {}
    props = None
    for table, df in results.items():
        if pool is None:
            fut: Future = Future()
            try:
                fut.set_result(collect(df, None))
            except Exception as exc:  # noqa: BLE001 - reported with the table
                fut.set_exception(exc)
        else:
            if props is None:
                props = df.sparkSession.sparkContext._jsc.sc().getLocalProperties().clone()
            fut = pool.submit(collect, df, props)
        out[table] = fut
    return out


def _run_job(name: str, mod: Any, tables: Any, opts: AnalysisOptions, out: Path,
             formats: Sequence[str], want_report: bool, pool: Executor | None = None, clock: Clock = SYSTEM_CLOCK
             ) -> tuple[dict[str, Any], list[Any]]:
    """Run one job: its tables written and collected, its report sections; errors caught and recorded."""
    info: dict[str, Any] = {"title": getattr(mod, "TITLE", name), "status": "ok", "error": None, "stage": None,
                            "tables": {}}
    name = getattr(mod, "NAME", name)
    try:
        results = dict(mod.run(tables, opts))
    except Exception as exc:  # one job failing must not stop the others
        log.exception("job %s failed", name)
        info.update(status="failed", stage="run", error=f"{type(exc).__name__}: {exc}",
                    traceback=traceback.format_exc())
        return info, []
    frames: dict[str, Any] = {}
    timezone = None
    # Results are small: one Spark query collects each (several at once: a small query's time is mostly
    # latency), and the driver writes the files from what it holds.
    collected = _collect(results, pool, clock)
    for table, df in results.items():
        entry: dict[str, Any] = {}
        info["tables"][table] = entry
        try:
            pdf, seconds = collected[table].result()
            frames[table] = pdf
            entry["rows"] = len(pdf)
            t1 = clock.monotonic()
            if "parquet" in formats:
                if timezone is None:
                    timezone = df.sparkSession.conf.get("spark.sql.session.timeZone")
                entry["parquet"] = str(write_parquet_pandas(pdf, df.schema, out / name / f"{table}.parquet",
                                                            timezone))
            t2 = clock.monotonic()
            if "csv" in formats:
                entry["csv"] = str(write_csv_pandas(pdf, out / name / f"{table}.csv"))
            log.info("%s/%s: %d rows; collect %.2f s, parquet %.2f s, csv %.2f s", name, table, len(pdf),
                     seconds, t2 - t1, clock.monotonic() - t2)
        except Exception as exc:  # a job's (user code's) failure is reported in its info, the others go on
            log.exception("job %s: table %s failed", name, table)
            entry["error"] = f"{type(exc).__name__}: {exc}"
            info.update(status="failed", stage="write", error=f"table {table}: {type(exc).__name__}: {exc}",
                        traceback=traceback.format_exc())
    sections: list[Any] = []
    if want_report:
        try:
            sections = list(mod.report(frames, opts))
        except Exception as exc:  # a job's (user code's) report failing is reported, the others go on
            log.exception("job %s: report failed", name)
            info.update(status="failed", stage="report", error=f"report: {type(exc).__name__}: {exc}",
                        traceback=traceback.format_exc())
    return info, sections


def _decode_and_stage(inputs: list[str], load_options: dict[str, Any]) -> Any:
    """The captures decoded here and staged for a local session (:func:`~minikafka.analysis.tables.stage_arrow`)."""
    from minikafka.analysis.tables import decode_here, stage_arrow

    return stage_arrow(decode_here(inputs, load_options))


def _decoder() -> Executor:
    """Where a capture is decoded while the Spark session starts: a forked process on Linux (decoding in a
    thread holds the GIL that the session's start needs for its many calls into the JVM: measured on 2 cores,
    session and decoding took 3.3-3.6 s together in a thread, 2.9-3.0 s in a process), else a thread."""
    if sys.platform.startswith("linux"):
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        return ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("fork"))
    return ThreadPoolExecutor(1, thread_name_prefix="minikafka-decode")


def _remove_staged(decoding: Future) -> None:
    if decoding.exception() is None:
        shutil.rmtree(decoding.result().directory, ignore_errors=True)


def _session_and_tables(spark: Any, master: str | None, inputs: list[str], load_options: dict[str, Any],
                        clock: Clock = SYSTEM_CLOCK) -> tuple[Any, bool, Any]:
    """The session (``spark``, else the active one, else a new one on ``master``), whether this call created
    it, and the captures' tables (not cached yet).  A capture that a new local session would decode in the
    driver is decoded and staged in Parquet files while the session starts (:func:`_decoder`; the session's
    JVM starts in its own process), and the session then skips what only the data source needs."""
    from minikafka.analysis.session import new_session_master, spark_session
    from minikafka.analysis.tables import load_tables, master_decodes_in_driver, staged_tables

    created = False
    decoding: Future | None = None
    if spark is None:
        from pyspark.sql import SparkSession

        created = SparkSession.getActiveSession() is None
        chosen = new_session_master(master) if created else None
        decode_in = load_options.pop("decode_in", "auto")
        if chosen is not None and master_decodes_in_driver(chosen, inputs, decode_in):
            decoder = _decoder()
            decoding = decoder.submit(_decode_and_stage, inputs, load_options)
            decoder.shutdown(wait=False)
        else:
            load_options["decode_in"] = decode_in
        t0 = clock.monotonic()
        try:
            spark = spark_session(master, short=created and _short_input(inputs),
                                  register_source=decoding is None)
        except BaseException:
            if decoding is not None:  # the files staged meanwhile go with the session that did not start
                decoding.add_done_callback(_remove_staged)
            raise
        log.info("session: %.2f s", clock.monotonic() - t0)
    if decoding is not None:
        t0 = clock.monotonic()
        staged = decoding.result()
        log.info("decoded in the driver meanwhile (%.2f s more)", clock.monotonic() - t0)
        tables = staged_tables(spark, staged)
    else:
        tables = load_tables(spark, inputs, **load_options)  # decodes the captures, once (when cached)
    return spark, created, tables


def analyze(paths: str | Path | Iterable[str | Path], out_dir: str | Path, jobs: Sequence[str] | None = None,
            opts: AnalysisOptions | None = None, spark: Any = None, formats: Sequence[str] = FORMATS,
            report: bool = True, *, master: str | None = None, load_options: dict[str, Any] | None = None,
            stop_session: bool = False, on_progress: Callable[[int, int, str], None] | None = None,
            clock: Clock = SYSTEM_CLOCK) -> dict[str, Any]:
    """Run ``jobs`` (default: every job module that imports) over the captures at ``paths``.

    Writes ``out_dir/<job>/<table>.parquet`` and ``.csv`` (as ``formats`` says) and
    ``out_dir/report.html``; returns a summary: ``out_dir``, ``report`` (path or None),
    ``inputs``, ``capture`` facts (requests, connections, decode errors, first/last ns),
    ``jobs`` (name -> title, status ok/failed/unavailable, stage, error, seconds, and per table
    rows and the paths written) and ``failed`` (names of the jobs that failed).  ``spark``: a
    session to use (default: the active one, else a new one on ``master``; ``stop_session``
    stops a session this call created).  ``load_options``: data source options (``ports``...).
    ``on_progress(jobs done, jobs in all, a job running)`` is told when the jobs start, as each one
    ends, and at the end.  Jobs run several at once (:data:`JOB_THREADS`), their tables in the order asked.
    ``clock`` times the jobs (``seconds``).
    """
    from minikafka.analysis.report import ReportGroup, write_report
    from minikafka.analysis.tables import capture_facts, load_tables

    opts = opts or AnalysisOptions()
    bad = [f for f in formats if f not in FORMATS]
    if bad:
        raise ValueError(f"unknown formats {bad} (parquet, csv)")
    inputs = [str(paths)] if isinstance(paths, (str, Path)) else [str(p) for p in paths]
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    t_start = clock.monotonic()
    spark, created, tables = _session_and_tables(spark, master, inputs, dict(load_options or {}), clock)
    tables = tables.cache()
    summary: dict[str, Any] = {"out_dir": str(out), "report": None, "inputs": inputs, "jobs": {}, "failed": []}
    groups: list[Any] = []
    pool = ThreadPoolExecutor(COLLECT_THREADS, thread_name_prefix="minikafka-collect")
    job_pool = ThreadPoolExecutor(JOB_THREADS, thread_name_prefix="minikafka-job")
    restore = None
    try:
        facts = capture_facts(tables)
        summary["capture"] = facts
        log.info("capture: %s", facts)
        restore = _small_input_conf(spark, facts["requests"])
        names = list(jobs) if jobs else list(JOB_MODULES)
        modules: dict[str, Any] = {}
        for name in names:
            try:
                modules[name] = job(name)
            except Exception as exc:  # noqa: BLE001 - a job that does not import is skipped (or failed if asked)
                status = "failed" if jobs else "unavailable"
                log.warning("job %s %s: %s: %s", name, status, type(exc).__name__, exc)
                summary["jobs"][name] = {"title": name, "status": status, "stage": "import",
                                         "error": f"{type(exc).__name__}: {exc}", "tables": {}, "seconds": 0.0}
        props = spark.sparkContext._jsc.sc().getLocalProperties().clone()
        with_input = {name: has_input(mod, facts) for name, mod in modules.items()}

        def run_one(name: str) -> tuple[dict[str, Any], list[Any]]:
            spark.sparkContext._jsc.sc().setLocalProperties(props.clone())  # the caller's job group, here too
            t0 = clock.monotonic()
            log.info("running job %s", name)
            mod = modules[name]
            # A job without input in this capture runs on empty tables: the same results, no scan.
            info, sections = _run_job(name, mod, tables if with_input[name] else tables.empty(), opts, out,
                                      formats, report, pool, clock)
            info["seconds"] = round(clock.monotonic() - t0, 3)
            return info, sections

        # Several jobs at once: most of a job's time is Spark planning its small queries, one at a time.  Jobs
        # without input start last: they are short, and fill the cores while the last long one ends.
        order = sorted((n for n in names if n in modules), key=lambda n: not with_input[n])
        running = {name: job_pool.submit(run_one, name) for name in order}
        if on_progress is not None:
            on_progress(0, len(names), next(iter(running), ""))
        finished = len(names) - len(running)
        done_jobs: dict[str, tuple[dict[str, Any], list[Any]]] = {}
        for fut in as_completed(running.values()):
            name = next(n for n, f in running.items() if f is fut)
            done_jobs[name] = fut.result()
            finished += 1
            if on_progress is not None and finished < len(names):
                on_progress(finished, len(names), next((n for n in running if n not in done_jobs), ""))
        for name in names:
            if name in done_jobs:
                info, sections = done_jobs[name]
                summary["jobs"][name] = info
                groups.append(ReportGroup(info["title"], sections, name, info["status"],
                                          info.get("traceback") if info["status"] != "ok" else None))
            elif jobs:
                info = summary["jobs"][name]
                groups.append(ReportGroup(name, [], name, info["status"], info["error"]))
        summary["jobs"] = {n: summary["jobs"][n] for n in names}
        summary["failed"] = [n for n, i in summary["jobs"].items() if i["status"] == "failed"]
        if on_progress is not None:
            on_progress(len(names), len(names), "report" if report else "")
        if report:
            unavailable = [n for n, i in summary["jobs"].items() if i["status"] == "unavailable"]
            job_facts = [(n, f"{i['status']}" + (f" ({i['seconds']:.1f} s)" if i.get("seconds") else ""))
                         for n, i in summary["jobs"].items() if i["status"] != "unavailable"]
            extra = [("Requests", f"{facts['requests']:,} on {facts['connections']:,} connection(s)"),
                     ("Undecodable requests", f"{facts['decode_errors']:,}"),
                     ("Spark", f"{spark.version} ({spark.sparkContext.master})"),
                     ("Time bucket", f"{opts.bucket_seconds:g} s"),
                     *[(f"Job {n}", s) for n, s in job_facts]]
            if unavailable:
                extra.append(("Jobs not available", ", ".join(unavailable)))
            path = write_report(out / "report.html", groups, inputs=inputs, start=_ts(facts["first_ns"]),
                                end=_ts(facts["last_ns"]), facts=extra)
            summary["report"] = str(path)
    finally:
        job_pool.shutdown(wait=True)
        pool.shutdown(wait=True)
        if restore is not None:
            restore()
        tables.unpersist()
        summary["seconds"] = round(clock.monotonic() - t_start, 3)
        if created and stop_session:
            spark.stop()
    return summary


def print_summary(summary: dict[str, Any], file: Any = None) -> None:
    """A few lines: the capture, each job's status and tables, the report path."""
    file = file or sys.stdout
    cap = summary.get("capture") or {}
    if cap:
        span = (cap["last_ns"] - cap["first_ns"]) / 1e9 if cap.get("first_ns") is not None else 0.0
        print(f"{cap['requests']:,} request(s) on {cap['connections']:,} connection(s) over {span:.3f} s"
              + (f", {cap['decode_errors']:,} undecodable" if cap.get("decode_errors") else ""), file=file)
    for name, info in summary["jobs"].items():
        tables = info.get("tables") or {}
        rows = ", ".join(f"{t} {e.get('rows', '?')}" for t, e in tables.items())
        line = f"{name:<12} {info['status']:<11}"
        if info["status"] == "ok":
            line += f" {info.get('seconds', 0):6.1f} s  {rows}"
        else:
            line += f" {info.get('stage') or ''}: {info.get('error')}"
        print(line, file=file)
    print(f"tables in {summary['out_dir']}", file=file)
    if summary.get("report"):
        print(f"report: {summary['report']}", file=file)


def run_analyze_command(args: argparse.Namespace, leave_session: bool = False) -> int:
    """Run the jobs, print a short summary and the report path; 1 if a job failed.  ``leave_session``: the
    process ends next, so a session this command created is left running: its JVM stops it as it exits, when
    this process has gone (``spark.stop()`` takes about a second, a third of it PySpark's accumulator server
    waiting out its polling interval)."""
    from minikafka.analysis.cli import job_names, options_from_args

    missing = [p for p in args.paths if "://" not in p and not Path(p).exists()]
    if missing:
        print(f"no such capture: {', '.join(missing)}")
        return 2
    opts = options_from_args(args)
    formats = ("csv",) if args.csv_only else ("parquet",) if args.parquet_only else ("parquet", "csv")
    load_options = {"ports": ",".join(str(p) for p in args.port)} if args.port else {}
    from minikafka.tools.progress import ProgressDisplay, progress_enabled

    with ProgressDisplay("analysis jobs", enabled=progress_enabled(args.no_progress)) as bar:
        summary = analyze(args.paths, args.out, jobs=job_names(args), opts=opts, formats=formats,
                          report=not args.no_report, master=args.master, load_options=load_options,
                          stop_session=not leave_session,
                          on_progress=lambda done, total, job: bar.update(completed=done, total=total, status=job))
    print_summary(summary)
    return 1 if summary["failed"] else 0


def main(argv: list[str] | None = None) -> int:
    """``spark-submit minikafka/analysis/run.py CAPTURE... --out DIR [options]`` (as ``minikafka analyze``)."""
    from minikafka.analysis.cli import build_parser

    args = build_parser("run.py").parse_args(argv)
    logging.basicConfig(level=getattr(logging, str(args.log_level).upper(), logging.WARNING),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    return run_analyze_command(args)


if __name__ == "__main__":
    sys.exit(main())
