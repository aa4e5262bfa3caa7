"""One self-contained HTML report from the jobs' :class:`~minikafka.analysis.jobs.Section`\\ s.

The jobs' :class:`~minikafka.analysis.jobs.plots.Chart`\\ s are embedded as JSON and drawn in the browser
with uPlot (zoom by dragging, values on hover, series toggled from the legend); tables are sortable and
filterable (``tables.js``).  uPlot, the scripts, the style sheets and the data are all inline: the one
file opens offline, fetches nothing and can be mailed around.  Pure Python (pandas for the tables), no
Spark, no plotting library.
"""

from __future__ import annotations

import datetime as dt
import html
import json
import logging
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib.resources import files
from pathlib import Path
from typing import Any

from .. import __version__, web
from ..common.clock import SYSTEM_CLOCK
from .jobs import Section
from .jobs.plots import as_charts

log = logging.getLogger(__name__)

MAX_TABLE_ROWS = 200
#: Tables with fewer rows get no filter box.
FILTER_MIN_ROWS = 4
#: Text cells longer than this wrap inside a bounded width.
LONG_CELL = 40
CHART_HINT = ("Drag across a chart to zoom in (double-click: zoom out); the legend shows the values under the "
              "cursor; click a legend entry to hide or show its series.")


@dataclass
class ReportGroup:
    """The sections of one job, under the job's title; ``error`` set when the job failed."""

    title: str
    sections: list[Section] = field(default_factory=list)
    name: str = ""
    status: str = "ok"
    error: str | None = None


def format_float(v: float) -> str:
    """Floats in tables: integers without decimals, else 4 significant digits (thousands separated)."""
    if math.isnan(v):
        return ""
    if float(v).is_integer() and abs(v) < 1e15:
        return f"{v:,.0f}"
    if abs(v) >= 100:
        return f"{v:,.1f}"
    return f"{v:.4g}"


# -- tables ---------------------------------------------------------------------------------------
def _is_missing(v: Any) -> bool:
    """None, NaN, NaT or pandas.NA (a list or an array is a value)."""
    import pandas as pd

    try:
        r = pd.isna(v)
    except (TypeError, ValueError):
        return False
    if isinstance(r, bool):
        return r
    return bool(r) if getattr(r, "ndim", 1) == 0 else False  # a numpy bool, or an array's answer


def _cell(v: Any, numeric: bool) -> str:
    """One ``<td>``: numbers right-aligned with their raw value in ``data-sort`` (tables.js sorts by it),
    text escaped, long text wrapping."""
    if _is_missing(v):
        return '<td class="num" data-sort=""></td>' if numeric else "<td></td>"
    if numeric and not isinstance(v, (bool, str)):
        try:
            f = float(v)
        except (TypeError, ValueError):
            numeric = False
        else:
            shown = format_float(f) if isinstance(v, float) or not f.is_integer() else f"{int(v):,}"
            return f'<td class="num" data-sort="{f!r}">{shown}</td>'
    text = html.escape(str(v))
    if len(text) > LONG_CELL:
        text = f'<span class="long">{text}</span>'
    return f'<td class="txt">{text}</td>'


def _header(name: Any) -> str:
    """A column name that may break after its underscores."""
    return html.escape(str(name)).replace("_", "_<wbr>")


def table_html(df: Any, max_rows: int = MAX_TABLE_ROWS, caption: str = "") -> str:
    """A pandas DataFrame as an escaped, sortable and filterable table (``class="mk-table"``) in a box that
    scrolls horizontally; the first ``max_rows`` rows, with a note if cut."""
    import pandas as pd

    n = len(df)
    shown = df.head(max_rows)
    cols = list(shown.columns)
    numeric = [pd.api.types.is_numeric_dtype(shown[c]) and not pd.api.types.is_bool_dtype(shown[c])
               for c in cols]
    head = "".join(f'<th scope="col">{_header(c)}</th>' for c in cols)
    rows = ["<tr>" + "".join(_cell(v, numeric[i]) for i, v in enumerate(r)) + "</tr>"
            for r in shown.itertuples(index=False, name=None)]
    classes = "data mk-table" + ("" if len(shown) >= FILTER_MIN_ROWS else " mk-nofilter")
    label = f' aria-label="{html.escape(caption, quote=True)}"' if caption else ""
    note = (f'<p class="note">First {max_rows:,} of {n:,} rows (all rows are in the CSV/Parquet output).</p>'
            if n > max_rows else "")
    if not rows:
        note = '<p class="note">No rows.</p>'
    return (f'<div class="tbl"><div class="scroll"><table class="{classes}"{label}><thead><tr>{head}</tr>'
            f'</thead><tbody>{"".join(rows)}</tbody></table></div><span class="mk-count"></span>{note}</div>')


# -- charts ---------------------------------------------------------------------------------------
class _Charts:
    """The charts of one report: their JSON specs, by id, and the ``<figure>`` that shows each figure."""

    def __init__(self) -> None:
        self.specs: list[dict[str, Any]] = []

    def figure(self, caption: str, figure: Any) -> str:
        charts = as_charts(figure)
        group = f"g{len(self.specs)}" if len(charts) > 1 else None
        parts = []
        for chart in charts:
            if chart.empty:
                parts.append(f'<div class="nodata">{html.escape(chart.title or caption)}: no data</div>')
                continue
            spec = chart.to_json()
            spec.update(id=f"c{len(self.specs)}", group=group)
            self.specs.append(spec)
            parts.append(f'<div class="mk-chart" data-chart="{spec["id"]}"></div>')
        return (f'<figure class="chart">{"".join(parts)}<figcaption>{html.escape(caption)}</figcaption>'
                f"</figure>")

    def json(self) -> str:
        """The specs as JSON safe inside a ``<script>`` element (no ``<``: no ``</script>``, no ``<!--``)."""
        text = json.dumps({"charts": self.specs}, separators=(",", ":"), allow_nan=False, ensure_ascii=False)
        return text.replace("<", "\\u003c").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


# -- page -----------------------------------------------------------------------------------------
def _script_text(text: str) -> str:
    """JavaScript safe inside an inline ``<script>`` element."""
    return re.sub(r"</(script)", r"<\\/\1", text, flags=re.IGNORECASE)


@cache
def _own(name: str) -> str:
    return files(__package__).joinpath("report_static", name).read_text(encoding="utf-8")


@cache
def page_assets() -> tuple[str, str]:
    """The report's inline style sheet and script: uPlot's CSS and the report's own; uPlot (its licence
    as a comment instead of its banner, which names its web site), tables.js and the report's script."""
    uplot = web.asset("vendor/uPlot.iife.min.js")
    uplot = re.sub(r"\A/\*!.*?\*/\s*", "", uplot, flags=re.DOTALL)
    licence = files(web.__name__).joinpath("vendor", "uPlot.LICENSE").read_text(encoding="utf-8")
    version = re.search(r"v\d+\.\d+\.\d+", web.asset("vendor/uPlot.iife.min.js"))
    head = f"/*! uPlot {version.group(0) if version else ''}, vendored in minikafka.web.\n{licence.strip()}\n*/\n"
    css = web.asset("vendor/uPlot.min.css") + "\n" + _own("report.css")
    js = "\n".join([head + uplot, web.asset("tables.js"), _own("report.js")])
    return css, _script_text(js)


class _Ids:
    def __init__(self) -> None:
        self.seen: set[str] = set()

    def __call__(self, title: str) -> str:
        base = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-") or "section"
        sid, i = base, 2
        while sid in self.seen:
            sid, i = f"{base}-{i}", i + 1
        self.seen.add(sid)
        return sid


def _section_html(sec: Section, sid: str, level: int, charts: _Charts) -> str:
    parts = [f'<h{level} id="{sid}">{html.escape(sec.title)}</h{level}>']
    for para in sec.text:
        parts.append(f"<p>{html.escape(str(para))}</p>")
    for caption, fig in sec.figures:
        try:
            parts.append(charts.figure(caption, fig))
        except Exception as exc:  # noqa: BLE001 - a broken figure must not lose the report
            log.warning("figure %r of %r failed: %s", caption, sec.title, exc)
            parts.append(f'<p class="failed">Figure {html.escape(caption)} failed: {html.escape(str(exc))}</p>')
    for caption, df in sec.tables:
        parts.append(f'<p class="caption">{html.escape(caption)}</p>')
        parts.append(table_html(df, caption=caption))
    return "\n".join(parts)


def _fmt_time(t: dt.datetime | None) -> str:
    return t.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC" if t else "?"


def render_html(items: Sequence[Section | ReportGroup], *, title: str = "minikafka capture analysis",
                inputs: Sequence[str] = (), start: dt.datetime | None = None, end: dt.datetime | None = None,
                generated: dt.datetime | None = None, facts: Sequence[tuple[str, str]] = ()) -> str:
    """The whole report: a header (inputs, time span, generated time, version), a table of contents,
    then every section, grouped under its job's title where ``items`` holds :class:`ReportGroup`\\ s."""
    generated = generated or dt.datetime.fromtimestamp(SYSTEM_CLOCK.time(), dt.UTC)
    ids = _Ids()
    charts = _Charts()
    toc: list[str] = []
    body: list[str] = []
    for it in items:
        if isinstance(it, ReportGroup):
            gid = ids(it.title)
            status = "" if it.status == "ok" else f' <span class="failed">({html.escape(it.status)})</span>'
            sub: list[str] = []
            body.append(f'<h2 id="{gid}">{html.escape(it.title)}{status}</h2>')
            if it.error:
                body.append(f"<pre>{html.escape(it.error)}</pre>")
            for sec in it.sections:
                sid = ids(f"{it.name or it.title}-{sec.title}")
                sub.append(f'<li><a href="#{sid}">{html.escape(sec.title)}</a></li>')
                body.append(_section_html(sec, sid, 3, charts))
            inner = f"<ul>{''.join(sub)}</ul>" if sub else ""
            toc.append(f'<li><a href="#{gid}">{html.escape(it.title)}</a>{status}{inner}</li>')
        else:
            sid = ids(it.title)
            toc.append(f'<li><a href="#{sid}">{html.escape(it.title)}</a></li>')
            body.append(_section_html(it, sid, 2, charts))
    span = ""
    if start and end:
        span = f"{_fmt_time(start)} to {_fmt_time(end)} ({(end - start).total_seconds():,.3f} s)"
    meta = [("Inputs", "<br>".join(html.escape(str(p)) for p in inputs) or "?"),
            ("Capture time span", html.escape(span or "?")),
            ("Generated", html.escape(_fmt_time(generated.astimezone(dt.UTC)))),
            ("minikafka version", html.escape(__version__))]
    meta += [(html.escape(k), html.escape(v)) for k, v in facts]
    meta_html = "".join(f"<tr><td><b>{k}</b></td><td>{v}</td></tr>" for k, v in meta)
    css, js = page_assets()
    hint = f'<p class="hint">{html.escape(CHART_HINT)}</p>' if charts.specs else ""
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f'<meta name="generator" content="minikafka {html.escape(__version__)}">'
            f"<title>{html.escape(title)}</title>\n<style>\n{css}\n</style></head><body>\n"
            f"<h1>{html.escape(title)}</h1>\n<table class=\"meta\">{meta_html}</table>\n"
            f"<noscript><p>The charts and the table sorting need JavaScript.</p></noscript>\n"
            f"<nav><h2>Contents</h2><ul>{''.join(toc)}</ul></nav>\n{hint}\n" + "\n".join(body) +
            f'\n<script type="application/json" id="mk-report-data">{charts.json()}</script>\n'
            f"<script>\n{js}\n</script>\n</body></html>\n")


def write_report(path: str | Path, items: Sequence[Section | ReportGroup], **meta: Any) -> Path:
    """Render ``items`` (see :func:`render_html`) to ``path``; returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = render_html(items, **meta)
    path.write_text(text, encoding="utf-8")
    log.info("wrote report %s (%d bytes)", path, len(text))
    return path
