"""The analysis report in headless Chromium: one HTML file that fetches nothing, every chart drawn by uPlot
from the data embedded in it, legend toggles and zoom, tables sorted and filtered, nothing wider than the page.

One capture (a real broker, confluent-kafka producer and consumer) and one ``minikafka analyze`` run of every
job are shared by the module's tests; each test opens the report in a fresh page (``browser.page`` fails the
test on a JavaScript error).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from browser import chromium, page  # noqa: F401 - the fixtures
from traffic_helpers import PRODUCER_ID, make_client_capture

from minikafka.analysis.jobs import JOB_MODULES
from minikafka.analysis.jobs.plots import PALETTE, Chart, Series, as_charts, series_lines
from minikafka.analysis.report import table_html
from minikafka.cli import main as cli_main

VIEWPORT = {"width": 1024, "height": 900}
DATA = re.compile(r'<script type="application/json" id="mk-report-data">(.*?)</script>', re.DOTALL)


@dataclass
class Report:
    out: Path
    html: str
    specs: list[dict[str, Any]]

    @property
    def url(self) -> str:
        return (self.out / "report.html").resolve().as_uri()

    def spec(self, title: str) -> dict[str, Any]:
        (spec,) = [s for s in self.specs if s["title"] == title]
        return spec


@pytest.fixture(scope="module")
def report(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Report:
    pytest.importorskip("confluent_kafka")
    tmp = tmp_path_factory.mktemp("report-html")
    run = make_client_capture(tmp, n=200)
    out = tmp / "out"
    # A what-if produce quota, so the quota chart has its reference line.
    rc = cli_main(["analyze", str(run.path), "--out", str(out), "--bucket", "0.5", "--csv-only",
                   "--produce-quota", "*=20K", "--no-progress"])
    assert rc == 0
    html = (out / "report.html").read_text(encoding="utf-8")
    m = DATA.search(html)
    assert m, "no embedded chart data"
    return Report(out, html, json.loads(m.group(1))["charts"])


@pytest.fixture
def opened(page: Any, report: Report) -> Iterator[Any]:  # noqa: F811 - the fixture imported above
    """The report in a 1024 px wide page, its scripts run; any request other than the file itself fails
    the test (the report must open offline)."""
    requested: list[str] = []

    def route(r: Any) -> None:
        if r.request.url == report.url:
            r.continue_()
        else:
            requested.append(r.request.url)
            r.abort()

    page.route("**/*", route)
    page.set_viewport_size(VIEWPORT)
    page.goto(report.url)
    page.wait_for_function("window.mkReport && window.mkReport.ready")
    yield page
    assert requested == [], f"the report fetched {requested}"


def chart_index(page: Any, title: str) -> int:
    return page.evaluate("t => mkReport.charts.findIndex(u => u.mkSpec.title === t)", title)


@pytest.mark.clients
def test_one_file_with_nothing_external(report: Report) -> None:
    html = report.html
    assert not re.search(r"""(?:src|href|action)\s*=\s*["']?\s*(?:[a-z][a-z0-9+.-]*:)?//""", html, re.IGNORECASE)
    assert not re.search(r"@import|url\(\s*['\"]?\s*(?:https?:)?//", html, re.IGNORECASE)
    assert "http://" not in html and "https://" not in html  # not even in a comment
    assert "<script src" not in html and "<link" not in html and "<img" not in html
    assert "uPlot" in html and "mkTables" in html and "Permission is hereby granted" in html  # uPlot's licence
    # every job ran and drew its charts; each chart <div> has its data, and each spec its <div>
    for name in JOB_MODULES:  # every job ran (the header lists each job's status)
        assert f"<b>Job {name}</b></td><td>ok" in html, name
    ids = re.findall(r'<div class="mk-chart" data-chart="(c\d+)"', html)
    assert sorted(ids) == sorted(s["id"] for s in report.specs) and len(ids) >= 10
    for spec in report.specs:
        assert spec["series"] and all(len(s["values"]) == len(spec["x"]) for s in spec["series"])


@pytest.mark.clients
def test_chart_data_is_the_jobs_results(report: Report) -> None:
    """The bar chart per client holds the traffic job's per-client sums; the stacked requests/s chart
    counts every request of the capture."""
    by_client = pd.read_csv(report.out / "traffic" / "by_client.csv")
    per = by_client.groupby("client_id")[["request_bytes", "response_bytes"]].sum()
    bars = report.spec("Request and response bytes per client id")
    assert PRODUCER_ID in bars["categories"]
    for label, col in (("request bytes", "request_bytes"), ("response bytes", "response_bytes")):
        (values,) = [s["values"] for s in bars["series"] if s["label"] == label]
        assert dict(zip(bars["categories"], values)) == {str(k): float(v) for k, v in per[col].items()}
    summary = pd.read_csv(report.out / "traffic" / "summary.csv")
    rps = report.spec("Requests/s")
    step = rps["x"][1] - rps["x"][0]
    total = sum(v or 0 for s in rps["series"] for v in s["values"][:-1]) * step  # the last point repeats
    assert round(total) == int(summary["requests"].sum())
    quota = report.spec("Quota bytes per second (produce request + fetch response bytes)")
    (line,) = [s for s in quota["series"] if s["label"] == "what-if quota"]
    assert set(line["values"]) == {20 * 1024} and line["dash"]


@pytest.mark.clients
def test_every_chart_is_drawn(opened: Any, report: Report) -> None:
    drawn = opened.evaluate("""() => mkReport.charts.map(u => {
        const c = u.root.querySelector("canvas");
        const px = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
        let ink = 0;
        for (let i = 3; i < px.length; i += 4) if (px[i] > 0) ink++;
        return {id: u.mkSpec.id, box: u.root.parentNode.getAttribute("data-chart"), w: c.width, h: c.height,
                css_w: c.getBoundingClientRect().width, ink: ink,
                series: u.series.slice(1).map(s => s.label),
                legend: Array.from(u.root.querySelectorAll(".u-legend .u-series .u-label")).map(e => e.textContent)};
    })""")
    assert sorted(d["id"] for d in drawn) == sorted(s["id"] for s in report.specs)
    by_id = {s["id"]: s for s in report.specs}
    for d in drawn:
        spec = by_id[d["id"]]
        labels = [s["label"] for s in spec["series"]]
        assert d["box"] == d["id"] and d["w"] > 100 and d["h"] > 100, d
        assert d["ink"] > 1000, f"chart {spec['title']!r} is blank"
        assert d["series"] == labels and d["legend"][1:] == labels, d
        assert d["css_w"] <= VIEWPORT["width"]


@pytest.mark.clients
def test_legend_toggles_a_series(opened: Any, report: Report) -> None:
    spec = report.spec("Latency percentiles per bucket")
    assert len(spec["series"]) >= 2
    i = chart_index(opened, spec["title"])
    chart = opened.locator(f'div.mk-chart[data-chart="{spec["id"]}"]')
    row = chart.locator(".u-legend tr.u-series").nth(2)  # the second series (row 0 is the x value)
    label = row.locator(".u-label").text_content()
    assert opened.evaluate("i => mkReport.charts[i].series[2].show", i) is True
    row.locator("th").click()
    assert "u-off" in (row.get_attribute("class") or "")
    assert opened.evaluate("i => mkReport.charts[i].series[2].show", i) is False
    assert opened.evaluate("i => mkReport.charts[i].series[2].label", i) == label
    row.locator("th").click()
    assert opened.evaluate("i => mkReport.charts[i].series[2].show", i) is True


@pytest.mark.clients
def test_legend_shows_the_values_under_the_cursor(opened: Any, report: Report) -> None:
    spec = report.spec("Requests/s")  # stacked: the legend shows each layer's own value, not the stack's
    i = chart_index(opened, spec["title"])
    over = opened.locator(f'div.mk-chart[data-chart="{spec["id"]}"] .u-over')
    over.scroll_into_view_if_needed()
    box = over.bounding_box()
    opened.mouse.move(box["x"] + box["width"] * 0.4, box["y"] + box["height"] / 2)
    opened.wait_for_function("i => mkReport.charts[i].cursor.idx != null", arg=i)
    idx = opened.evaluate("i => mkReport.charts[i].cursor.idx", i)
    shown = opened.locator(f'div.mk-chart[data-chart="{spec["id"]}"] .u-legend .u-series .u-value').all_text_contents()
    assert float(shown[0]) == pytest.approx(spec["x"][idx])
    assert [float(v.replace(",", "")) for v in shown[1:]] == pytest.approx([s["values"][idx] for s in spec["series"]])


@pytest.mark.clients
def test_stacked_layers_restack_when_one_is_hidden(opened: Any, report: Report) -> None:
    spec = report.spec("Request bytes/s (to the broker)")
    assert len(spec["series"]) >= 2
    i = chart_index(opened, spec["title"])
    raw = [s["values"] for s in spec["series"]]
    top = len(raw)  # the top layer's index in uPlot's data (0 is x)
    full = [sum(v or 0 for v in col) for col in zip(*raw)]
    assert opened.evaluate(f"i => mkReport.charts[i].data[{top}]", i) == pytest.approx(full)
    opened.locator(f'div.mk-chart[data-chart="{spec["id"]}"] .u-legend tr.u-series').nth(1).locator("th").click()
    without_first = [sum(v or 0 for v in col[1:]) for col in zip(*raw)]
    opened.wait_for_function(f"i => !mkReport.charts[i].series[1].show", arg=i)
    assert opened.evaluate(f"i => mkReport.charts[i].data[{top}]", i) == pytest.approx(without_first)


@pytest.mark.clients
def test_drag_zooms_the_panels_together(opened: Any, report: Report) -> None:
    spec = report.spec("Request bytes/s (to the broker)")
    panels = [s["id"] for s in report.specs if s["group"] == spec["group"]]
    assert len(panels) == 3
    over = opened.locator(f'div.mk-chart[data-chart="{spec["id"]}"] .u-over')
    over.scroll_into_view_if_needed()
    box = over.bounding_box()
    y = box["y"] + box["height"] / 2
    opened.mouse.move(box["x"] + box["width"] * 0.3, y)
    opened.mouse.down()
    opened.mouse.move(box["x"] + box["width"] * 0.5, y, steps=5)
    opened.mouse.move(box["x"] + box["width"] * 0.6, y, steps=5)
    opened.mouse.up()
    scales = opened.evaluate("""ids => mkReport.charts.filter(u => ids.includes(u.mkSpec.id))
                                .map(u => [u.scales.x.min, u.scales.x.max])""", panels)
    x = spec["x"]
    lo, hi = scales[0]
    assert x[0] < lo < hi < x[-1] and hi - lo < (x[-1] - x[0]) / 2
    assert all(s == pytest.approx(scales[0]) for s in scales)  # the other panels followed


@pytest.mark.clients
def test_table_sorts_and_filters(opened: Any, report: Report) -> None:
    summary = pd.read_csv(report.out / "traffic" / "summary.csv")
    table = opened.locator('table.mk-table[aria-label="Totals per API"]')
    cols = table.locator("thead th").all_text_contents()
    req = cols.index("requests")
    api = cols.index("api_name")

    def column(table: Any, i: int) -> list[str]:  # the visible cells of column i, in the table's order
        return table.locator(f"tbody tr:visible td:nth-child({i + 1})").evaluate_all(
            "cells => cells.map(c => c.getAttribute('data-sort') ?? c.textContent)")

    header = table.locator("thead th").nth(req)
    header.click()
    assert header.get_attribute("aria-sort") == "ascending"
    values = [float(v) for v in column(table, req)]
    assert values == sorted(summary["requests"].astype(float))
    header.click()
    assert header.get_attribute("aria-sort") == "descending"
    assert [float(v) for v in column(table, req)] == sorted(summary["requests"].astype(float), reverse=True)
    rows = set(zip(column(table, api), map(float, column(table, req))))  # whole rows moved
    assert rows == set(zip(summary["api_name"], summary["requests"].astype(float)))

    by_client = pd.read_csv(report.out / "traffic" / "by_client.csv")
    table = opened.locator('table.mk-table[aria-label="Per client id and API"]')
    box = table.locator("xpath=preceding-sibling::input[contains(@class, 'mk-filter')]")
    box.fill(PRODUCER_ID)
    cols = table.locator("thead th").all_text_contents()
    client, api = cols.index("client_id"), cols.index("api_name")
    expected = by_client[by_client["client_id"] == PRODUCER_ID]
    assert 0 < len(expected) < len(by_client)
    assert set(column(table, client)) == {PRODUCER_ID}
    assert sorted(column(table, api)) == sorted(expected["api_name"])
    count = table.locator("xpath=ancestor::div[@class='tbl']//span[@class='mk-count']")
    assert count.text_content() == f"{len(expected)} of {len(by_client)} rows match"
    box.fill("")
    assert len(column(table, api)) == len(by_client) and count.text_content() == ""


@pytest.mark.clients
def test_nothing_is_wider_than_the_page(opened: Any) -> None:
    def widths() -> dict[str, Any]:
        return opened.evaluate("""() => ({
            page: document.documentElement.scrollWidth, view: window.innerWidth,
            wide: Array.from(document.querySelectorAll("*")).filter(e => e.getBoundingClientRect().right >
                  window.innerWidth + 0.5 && !e.closest(".scroll")).map(e => e.tagName + "." + e.className),
            scrolling: Array.from(document.querySelectorAll(".tbl .scroll")).filter(
                  e => e.scrollWidth > e.clientWidth).length,
            charts: mkReport.charts.map(u => [u.width, u.root.parentNode.clientWidth])})""")

    w = widths()
    assert w["page"] <= w["view"] == VIEWPORT["width"] and w["wide"] == [], w
    assert w["scrolling"] >= 1  # the widest tables scroll in their own box
    assert all(cw <= box for cw, box in w["charts"]), w["charts"]
    # the charts follow the window
    opened.set_viewport_size({"width": 640, "height": 900})
    opened.wait_for_function("() => mkReport.charts.every(u => u.width <= u.root.parentNode.clientWidth)"
                             " && mkReport.charts[0].width < 640")
    w = widths()
    assert w["page"] <= w["view"] == 640 and w["wide"] == [], w


# -- the pieces, without a browser ----------------------------------------------------------------
def test_series_lines_aligns_groups_on_the_buckets() -> None:
    t = pd.Timestamp("2026-01-01T00:00:00Z")
    df = pd.DataFrame({"client": ["a", "a", "b", "b"], "v": [1.0, 3.0, 5.0, float("nan")],
                       "bucket_start": [t, t + pd.Timedelta(seconds=2), t + pd.Timedelta(seconds=1),
                                        t + pd.Timedelta(seconds=2)]})
    chart = series_lines(df, ["client"], "v", title="t", y_label="y")
    assert chart.x == [0.0, 1.0, 2.0] and chart.labels() == ["a", "b"]
    assert chart.series_named("a").values == [1.0, None, 3.0] and chart.series_named("a").span_gaps
    assert chart.series_named("b").values == [None, 5.0, None]
    only_b = series_lines(df, ["client"], "v", keys=[("b",), ("nobody",)])
    assert only_b.labels() == ["b"]
    assert series_lines(df.iloc[:0], ["client"], "v").empty


def test_chart_json() -> None:
    chart = Chart("c", [0, 1, 2], y_scale="log")
    chart.add("a", [1, 0, float("inf")])
    chart.reference_line(2.5, "limit")
    spec = chart.to_json()
    assert spec["y_scale"] == "asinh"  # a zero: no log scale
    assert spec["series"][0] == {"label": "a", "values": [1.0, 0.0, None], "color": PALETTE[0], "dash": False,
                                 "points": True, "span_gaps": False}
    assert spec["series"][1]["values"] == [2.5] * 3 and spec["series"][1]["dash"]
    assert spec["x_legend"] == "time (s)"
    chart.series[0].values.pop()
    with pytest.raises(ValueError, match="2 values for 3 x values"):
        chart.to_json()
    with pytest.raises(TypeError):
        as_charts(["not a chart"])
    assert as_charts(Chart("x", [])) and not Chart("x", [1.0], [Series("s", [None])]).to_json()["categories"]


def test_table_cells() -> None:
    df = pd.DataFrame({"name": ["b<", "x" * 60, None], "n": [1234, 5, 7], "f": [0.5, float("nan"), 1e6],
                       "i": pd.array([1, None, 3], dtype="Int64"), "ok": [True, False, True]})
    html = table_html(df, caption="cap")
    assert '<table class="data mk-table mk-nofilter" aria-label="cap">' in html  # 3 rows: no filter box
    assert '<td class="txt">b&lt;</td>' in html and f'<span class="long">{"x" * 60}</span>' in html
    assert '<td class="num" data-sort="1234.0">1,234</td>' in html
    assert '<td class="num" data-sort="0.5">0.5</td>' in html
    assert '<td class="num" data-sort="1000000.0">1,000,000</td>' in html
    assert html.count('<td class="num" data-sort=""></td>') == 2  # NaN and NA sort first, show nothing
    assert "<td></td>" in html and '<td class="txt">True</td>' in html
    cut = table_html(pd.DataFrame({"n": range(10)}), max_rows=4)
    assert cut.count("<tr>") == 5 and "First 4 of 10 rows" in cut and "mk-nofilter" not in cut
