"""``minikafka analyze``: tables as Parquet and CSV, one self-contained HTML report, failing jobs isolated."""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from traffic_helpers import CaptureRun, make_client_capture
from waiting import wait_for

from minikafka.analysis import run as run_mod
from minikafka.analysis.cli import add_arguments, options_from_args
from minikafka.analysis.jobs import Section, lag, latency, replication, traffic
from minikafka.analysis.jobs.plots import Chart
from minikafka.analysis.report import render_html
from minikafka.cli import main as cli_main

BROKEN = "tl_broken_job"


@pytest.fixture(scope="module")
def client_run(tmp_path_factory: pytest.TempPathFactory) -> CaptureRun:
    pytest.importorskip("confluent_kafka")
    return make_client_capture(tmp_path_factory.mktemp("report"), n=200)


def _running(pid: int) -> bool:
    """Whether process ``pid`` runs (an orphan that exited may linger as a zombie until it is reaped)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


@pytest.fixture
def broken_job(monkeypatch: pytest.MonkeyPatch) -> None:
    """A job module whose run() raises."""
    mod = types.ModuleType(f"minikafka.analysis.jobs.{BROKEN}")
    mod.NAME, mod.TITLE = BROKEN, "A broken job"

    def boom(tables: Any, opts: Any) -> dict:
        raise RuntimeError("boom <b>not bold</b>")

    mod.run, mod.report = boom, lambda results, opts: []
    monkeypatch.setitem(sys.modules, mod.__name__, mod)


@pytest.mark.clients
def test_analyze_cli(spark: Any, client_run: CaptureRun, tmp_path: Path, capsys: pytest.CaptureFixture,
                     broken_job: None) -> None:
    out = tmp_path / "out"
    rc = cli_main(["analyze", str(client_run.path), "--out", str(out), "--bucket", "0.5",
                   "--jobs", f"traffic,latency,{BROKEN}"])
    printed = capsys.readouterr().out
    assert rc == 1  # the broken job failed; the others ran
    assert "report: " in printed and f"{BROKEN}" in printed and "failed" in printed

    html = (out / "report.html").read_text(encoding="utf-8")
    for title in (traffic.TITLE, latency.TITLE, "Bytes per second by API", "Record bytes per second by topic",
                  "Latency histogram", "Fetch: long polls apart", "A broken job", "Contents"):
        assert title in html, title
    # interactive charts: a <div> per chart, their data as JSON (the browser test draws them)
    assert html.count('<div class="mk-chart" data-chart="') >= 8 and "<figcaption>Stacked per API" in html
    data = json.loads(re.search(r'<script type="application/json" id="mk-report-data">(.*?)</script>', html,
                                re.DOTALL).group(1))
    titles = {c["title"] for c in data["charts"]}
    assert {"Requests/s", "Latency percentiles per bucket", "Requests per latency bin"} <= titles
    assert "<img" not in html and '<table class="data mk-table"' in html
    assert "boom &lt;b&gt;not bold&lt;/b&gt;" in html and "<b>not bold</b>" not in html
    assert "http://" not in html and "https://" not in html  # nothing fetched from anywhere
    assert "minikafka version" in html and str(client_run.path) in html

    expected = {k: v[0] for k, v in client_run.broker_stats.items()}
    pq = spark.read.parquet(str(out / "traffic" / "summary.parquet")).select("api_key", "requests").collect()
    assert {r.api_key: r.requests for r in pq} == expected
    csv = pd.read_csv(out / "traffic" / "summary.csv")
    assert dict(zip(csv["api_key"], csv["requests"])) == expected
    assert dict(zip(csv["api_key"], csv["request_bytes"])) == {k: v[1] for k, v in client_run.broker_stats.items()}
    for job, tables in (("traffic", ("summary", "errors", "by_api_time", "by_client", "connections",
                                     "by_topic_time", "by_topic")),
                        ("latency", ("by_api", "by_client", "by_api_time", "fetch", "histogram"))):
        for t in tables:
            assert (out / job / f"{t}.parquet").is_dir() and (out / job / f"{t}.csv").is_file(), (job, t)
    lat = pd.read_csv(out / "latency" / "by_api.csv")
    assert (lat["p50_ms"] <= lat["max_ms"]).all()
    assert not list(out.glob("*/.*.tmp"))


def test_analyze_unavailable_and_failing_jobs(spark: Any, client_run: CaptureRun, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch, broken_job: None) -> None:
    """By default every job that imports runs; one that does not import is skipped, one that fails is
    reported, and the report is still written."""
    monkeypatch.setattr(run_mod, "JOB_MODULES", ["no_such_job_module", BROKEN])
    summary = run_mod.analyze(str(client_run.path), tmp_path / "o", spark=spark, formats=("csv",))
    assert summary["jobs"]["no_such_job_module"]["status"] == "unavailable"
    assert summary["jobs"][BROKEN]["status"] == "failed" and "boom" in summary["jobs"][BROKEN]["error"]
    assert summary["failed"] == [BROKEN]
    assert summary["capture"]["requests"] == sum(v[0] for v in client_run.broker_stats.values())
    html = Path(summary["report"]).read_text()
    assert "Jobs not available" in html and "no_such_job_module" in html and "A broken job" in html


def test_jobs_without_input_start_last(spark: Any, client_run: CaptureRun, tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """A job with nothing to read in the capture starts after those with input (it is short: it fills the cores
    while the last long one ends); the summary and the report keep the order asked."""
    monkeypatch.setattr(run_mod, "JOB_THREADS", 1)  # one job at a time: they start in the order submitted
    caplog.set_level(logging.INFO, logger=run_mod.log.name)
    summary = run_mod.analyze(str(client_run.path), tmp_path / "o", jobs=["replication", "lag"], spark=spark,
                              formats=("csv",), report=False)
    assert not replication.has_input(summary["capture"]) and lag.has_input(summary["capture"])
    started = [r.getMessage().removeprefix("running job ") for r in caplog.records
               if r.getMessage().startswith("running job ")]
    assert started == ["lag", "replication"]
    assert list(summary["jobs"]) == ["replication", "lag"]
    assert all(info["status"] == "ok" for info in summary["jobs"].values())


def test_cli_leaves_its_session_only_as_the_program(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """``minikafka analyze`` run as the program leaves the session it made to its JVM (which stops it as the
    process ends: ``test_analyze_cli_new_session``); called with arguments, in a process that goes on, it
    stops it."""
    seen: list[bool] = []

    def command(args: argparse.Namespace, leave_session: bool = False) -> int:
        seen.append(leave_session)
        return 0

    monkeypatch.setattr(run_mod, "run_analyze_command", command)
    monkeypatch.setattr(sys, "argv", ["minikafka", "analyze", str(tmp_path), "--out", str(tmp_path / "o")])
    assert cli_main() == 0
    assert cli_main(["analyze", str(tmp_path), "--out", str(tmp_path / "o")]) == 0
    assert seen == [True, False]


def test_report_escapes_and_embeds() -> None:
    chart = Chart("c <i>", [0.0, 1.0, 2.0])
    chart.add("</script><b>x</b>", [1, float("nan"), 3])
    sec = Section("T <1>", text=["a & b"], tables=[("cap <x>", pd.DataFrame({"c<": ["<script>"], "n": [1.5]}))],
                  figures=[("f <g>", chart), ("empty", Chart("nothing", []))])
    html = render_html([sec, Section("T <1>")], inputs=["in<put>"])
    assert "<script>" not in html.replace("<script>\n", "") and "&lt;script&gt;" in html and "a &amp; b" in html
    assert html.count('id="t-1"') == 1 and 'id="t-1-2"' in html  # unique anchors
    assert "in&lt;put&gt;" in html and "<figcaption>f &lt;g&gt;</figcaption>" in html
    assert "</script><b>" not in html and "\\u003c/script>\\u003cb>" in html  # the label, escaped in the JSON
    data = json.loads(re.search(r'id="mk-report-data">(.*?)</script>', html, re.DOTALL).group(1))
    (spec,) = data["charts"]  # the empty chart is a "no data" note
    assert spec["series"][0]["label"] == "</script><b>x</b>" and spec["series"][0]["values"] == [1.0, None, 3.0]
    assert html.count('data-chart="') == 1 and "nothing: no data" in html


def test_options_from_args() -> None:
    p = argparse.ArgumentParser()
    add_arguments(p)
    args = p.parse_args(["cap", "--out", "o", "--bucket", "2", "--produce-quota", "*=1M", "--produce-quota",
                         "app=1048576/s", "--fetch-quota", "c1=2KiB/s", "--request-quota", "app=50%",
                         "--quota-window-num", "5", "--quota-window-size", "0.5",
                         "--leader-throttled-replicas", "t:0:1,t:1:2", "--leader-throttled-replicas", "u:*",
                         "--leader-throttled-rate", "1e6", "--csv-only"])
    o = options_from_args(args)
    assert o.bucket_seconds == 2 and o.produce_quota == {"*": 1048576.0, "app": 1048576.0}
    assert o.fetch_quota == {"c1": 2048.0} and o.request_quota == {"app": 50.0}
    assert (o.quota_window_num, o.quota_window_size_seconds) == (5, 0.5)
    assert o.leader_throttled_replicas == ["t:0:1", "t:1:2", "u:*"] and o.leader_throttled_rate == 1e6
    with pytest.raises(SystemExit):
        options_from_args(p.parse_args(["cap", "--out", "o", "--fetch-quota", "nobytes"]))


def test_cli_does_not_import_pyspark() -> None:
    code = ("import sys\nfrom minikafka.cli import main\ntry:\n    main(['analyze', '--help'])\n"
            "except SystemExit:\n    pass\nassert 'pyspark' not in sys.modules, 'pyspark imported'\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                       check=False)
    assert r.returncode == 0, r.stderr
    assert "--leader-throttled-replicas" in r.stdout


@pytest.mark.clients
def test_analyze_cli_new_session(spark: Any, client_run: CaptureRun, tmp_path: Path) -> None:
    """``minikafka analyze`` in a process of its own: its session is new (the capture decoded in the driver
    while it starts, the data source never registered, the JVM writing a class-data-sharing archive as it
    exits) and its tables are those of the same jobs run in this process's session."""
    out, cds = tmp_path / "out", tmp_path / "cds"
    env = {**os.environ, "MINIKAFKA_SPARK_CDS": str(cds)}
    r = subprocess.run([sys.executable, "-m", "minikafka", "analyze", str(client_run.path), "--out", str(out),
                        "--jobs", "traffic,latency", "--csv-only", "--no-report", "--log-level", "INFO"],
                       capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "decoded in the driver meanwhile" in r.stderr
    assert "lookup_data_sources" not in r.stderr
    assert not re.search(r"\[(warning|info)\]\[cds", r.stdout + r.stderr)
    # The JVM writes its archive as it exits, after the command: a pending archive with its JVM's pid beside it.
    (pidfile,) = cds.glob(".spark-*.pid")
    # The command left its session to the JVM, which stops it and exits once the command's process has gone.
    jvm = int(pidfile.read_text(encoding="ascii"))
    wait_for(lambda: not _running(jvm), 120, "the command's JVM to exit by itself", interval=0.1)
    here = run_mod.analyze(str(client_run.path), tmp_path / "here", jobs=["traffic", "latency"], spark=spark,
                           formats=("csv",), report=False)
    for job, info in here["jobs"].items():
        for table, entry in info["tables"].items():
            mine = pd.read_csv(entry["csv"])
            theirs = pd.read_csv(out / job / f"{table}.csv")
            pd.testing.assert_frame_equal(theirs, mine, obj=f"{job}/{table}")
