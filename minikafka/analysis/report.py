"""One self-contained HTML report from the jobs' :class:`~minikafka.analysis.jobs.Section`s.

Figures are embedded as base64 PNG ``data:`` URIs, tables are pandas
``to_html`` with escaping, the style sheet is inline: the file needs nothing
else (no scripts, fonts or CDNs) and can be mailed around.  Pure Python:
pandas and matplotlib, no Spark.
"""

from __future__ import annotations

import base64
import datetime as dt
import html
import io
import logging
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import __version__
from .jobs import Section

log = logging.getLogger(__name__)

MAX_TABLE_ROWS = 200

CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Helvetica,Arial,sans-serif;margin:0 auto;max-width:1200px;
     padding:1em 2em;color:#222;line-height:1.4}
h1{border-bottom:2px solid #446;padding-bottom:.2em}
h2{margin-top:2em;border-bottom:1px solid #99a;padding-bottom:.15em}
h3{margin-top:1.5em}
table.data{border-collapse:collapse;font-size:12px;margin:.5em 0 1em 0}
table.data th,table.data td{border:1px solid #ccd;padding:2px 6px;text-align:right;white-space:nowrap}
table.data th{background:#eef}
table.data tr:nth-child(even) td{background:#f8f8fc}
table.meta td{padding:1px 10px 1px 0;vertical-align:top}
.caption{font-weight:600;margin-top:1em}
.note{color:#666;font-size:12px}
.failed{color:#b00;font-weight:600}
.ok{color:#070}
.scroll{overflow-x:auto}
pre{background:#f4f4f4;padding:.5em;overflow-x:auto;font-size:12px}
img{max-width:100%;height:auto}
nav ul{margin:.2em 0}
"""


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


def figure_png(fig: Any, dpi: int = 96) -> bytes:
    """A matplotlib Figure (or PNG bytes already) as PNG bytes."""
    if isinstance(fig, (bytes, bytearray)):
        return bytes(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight")
    return buf.getvalue()


def table_html(df: Any, max_rows: int = MAX_TABLE_ROWS) -> str:
    """A pandas DataFrame as an escaped HTML table (the first ``max_rows`` rows, with a note if cut)."""
    n = len(df)
    shown = df.head(max_rows)
    body = shown.to_html(index=False, escape=True, border=0, classes="data", na_rep="",
                         float_format=format_float)
    note = f'<p class="note">First {max_rows:,} of {n:,} rows (all rows are in the CSV/Parquet output).</p>' \
        if n > max_rows else ""
    return f'<div class="scroll">{body}</div>{note}'


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


def _section_html(sec: Section, sid: str, level: int) -> str:
    parts = [f'<h{level} id="{sid}">{html.escape(sec.title)}</h{level}>']
    for para in sec.text:
        parts.append(f"<p>{html.escape(str(para))}</p>")
    for caption, fig in sec.figures:
        try:
            data = base64.b64encode(figure_png(fig)).decode("ascii")
        except Exception as exc:  # noqa: BLE001 - a broken figure must not lose the report
            log.warning("figure %r of %r failed: %s", caption, sec.title, exc)
            parts.append(f'<p class="failed">Figure {html.escape(caption)} failed: {html.escape(str(exc))}</p>')
            continue
        parts.append(f'<figure><img alt="{html.escape(caption, quote=True)}" src="data:image/png;base64,{data}">'
                     f"<figcaption>{html.escape(caption)}</figcaption></figure>")
    for caption, df in sec.tables:
        parts.append(f'<p class="caption">{html.escape(caption)}</p>')
        parts.append(table_html(df))
    return "\n".join(parts)


def _close_figures(items: Sequence[Section | ReportGroup]) -> None:
    """Drop the figures' canvases (no pyplot: nothing global to close, this only frees memory early)."""
    for it in items:
        for sec in it.sections if isinstance(it, ReportGroup) else [it]:
            for _caption, fig in sec.figures:
                if hasattr(fig, "clear"):
                    fig.clear()


def _fmt_time(t: dt.datetime | None) -> str:
    return t.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC" if t else "?"


def render_html(items: Sequence[Section | ReportGroup], *, title: str = "minikafka capture analysis",
                inputs: Sequence[str] = (), start: dt.datetime | None = None, end: dt.datetime | None = None,
                generated: dt.datetime | None = None, facts: Sequence[tuple[str, str]] = ()) -> str:
    """The whole report: a header (inputs, time span, generated time, version), a table of contents,
    then every section, grouped under its job's title where ``items`` holds :class:`ReportGroup`s."""
    generated = generated or dt.datetime.now(dt.UTC)
    ids = _Ids()
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
                body.append(_section_html(sec, sid, 3))
            inner = f"<ul>{''.join(sub)}</ul>" if sub else ""
            toc.append(f'<li><a href="#{gid}">{html.escape(it.title)}</a>{status}{inner}</li>')
        else:
            sid = ids(it.title)
            toc.append(f'<li><a href="#{sid}">{html.escape(it.title)}</a></li>')
            body.append(_section_html(it, sid, 2))
    span = ""
    if start and end:
        span = f"{_fmt_time(start)} to {_fmt_time(end)} ({(end - start).total_seconds():,.3f} s)"
    meta = [("Inputs", "<br>".join(html.escape(str(p)) for p in inputs) or "?"),
            ("Capture time span", html.escape(span or "?")),
            ("Generated", html.escape(_fmt_time(generated.astimezone(dt.UTC)))),
            ("minikafka version", html.escape(__version__))]
    meta += [(html.escape(k), html.escape(v)) for k, v in facts]
    meta_html = "".join(f"<tr><td><b>{k}</b></td><td>{v}</td></tr>" for k, v in meta)
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="generator" content="minikafka {html.escape(__version__)}">'
            f"<title>{html.escape(title)}</title><style>{CSS}</style></head><body>\n"
            f"<h1>{html.escape(title)}</h1>\n<table class=\"meta\">{meta_html}</table>\n"
            f"<nav><h2>Contents</h2><ul>{''.join(toc)}</ul></nav>\n" + "\n".join(body) + "\n</body></html>\n")


def write_report(path: str | Path, items: Sequence[Section | ReportGroup], **meta: Any) -> Path:
    """Render ``items`` (see :func:`render_html`) to ``path``; returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = render_html(items, **meta)
    _close_figures(items)
    path.write_text(text, encoding="utf-8")
    log.info("wrote report %s (%d bytes)", path, len(text))
    return path
