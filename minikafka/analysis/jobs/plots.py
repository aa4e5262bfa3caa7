"""The charts of the jobs' reports, as data: what to draw, not how.

A job's ``report()`` puts :class:`Chart`\\ s (or lists of them: panels that share
their x axis) in :attr:`Section.figures`; the HTML report embeds them as JSON
and draws them with uPlot in the browser (zoom by dragging, values on hover,
series toggled from the legend).  Nothing here draws or imports a plotting
library; pandas only for :func:`series_lines`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

#: The x-axis label of the time-series charts.
TIME_AXIS = "seconds since the start of the capture"
#: Colours of the series, in order (matplotlib's "tab10", which the report used before).
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
           "#bcbd22", "#17becf")
#: A reference line's colour (a quota, a rate limit).
REFERENCE_COLOR = "#e00000"

#: ``lines``: points joined by lines; ``steps``: each value held until the next x; ``stacked``: step areas
#: stacked on each other (the legend shows each layer's own value); ``bars``: bars over categories.
ChartKind = Literal["lines", "steps", "stacked", "bars"]
#: ``asinh`` is a log-like scale that also shows zeros (matplotlib's "symlog").
Scale = Literal["linear", "log", "asinh"]

Number = float | None


def floats(values: Iterable[Any]) -> list[Number]:
    """``values`` as JSON-safe floats: NaN, infinities, None and NA become None (a gap in a line)."""
    out: list[Number] = []
    for v in values:
        try:
            f = float(v)
        except (TypeError, ValueError):
            out.append(None)
            continue
        out.append(f if math.isfinite(f) else None)
    return out


@dataclass
class Series:
    """One named series of a :class:`Chart`: a line, a layer of a stacked chart or a set of bars."""

    label: str
    values: list[Number]
    color: str | None = None      # a CSS colour; None: the palette colour of the series' position
    dash: bool = False            # a dashed line
    points: bool = True           # a marker at each value
    span_gaps: bool = False       # join the points across missing values (None)


@dataclass
class Chart:
    """One interactive chart of the report: series of values over shared x values.

    ``x`` ascending; each series has one value per x (None: no value).  A ``bars`` chart's x are the
    positions 0..n-1 of its ``categories``.  ``height`` in CSS pixels; the width follows the page.
    """

    title: str
    x: list[Number]
    series: list[Series] = field(default_factory=list)
    x_label: str = TIME_AXIS
    y_label: str = ""
    kind: ChartKind = "lines"
    x_scale: Scale = "linear"
    y_scale: Scale = "linear"
    categories: list[str] = field(default_factory=list)
    height: int = 300

    @property
    def empty(self) -> bool:
        """No x value or no series value at all: the report says "no data" instead of drawing it."""
        return not self.x or not any(v is not None for s in self.series for v in s.values)

    def labels(self) -> list[str]:
        return [s.label for s in self.series]

    def series_named(self, label: str) -> Series:
        """The series labelled ``label`` (KeyError if none)."""
        for s in self.series:
            if s.label == label:
                return s
        raise KeyError(label)

    def add(self, label: str, values: Iterable[Any], **style: Any) -> Series:
        """Append a series of ``values`` (converted with :func:`floats`); returns it."""
        s = Series(str(label), floats(values), **style)
        self.series.append(s)
        return s

    def reference_line(self, value: float, label: str, color: str = REFERENCE_COLOR) -> Series:
        """A horizontal dashed line at ``value`` over the whole x range (a quota, a rate limit)."""
        return self.add(label, [value] * len(self.x), color=color, dash=True, points=False, span_gaps=True)

    def check(self) -> None:
        """Raise ValueError if a series' length differs from the x values' (a job's bug)."""
        for s in self.series:
            if len(s.values) != len(self.x):
                raise ValueError(f"chart {self.title!r}: series {s.label!r} has {len(s.values)} values "
                                 f"for {len(self.x)} x values")
        if self.kind == "bars" and len(self.categories) != len(self.x):
            raise ValueError(f"chart {self.title!r}: {len(self.categories)} categories for {len(self.x)} bars")

    def to_json(self) -> dict[str, Any]:
        """The chart as the report's JSON (colours filled in from the palette, scales that fit the data)."""
        self.check()
        y_scale = self.y_scale
        if y_scale == "log" and any(v is not None and v <= 0 for s in self.series for v in s.values):
            y_scale = "asinh"  # a log scale cannot show zeros
        x_scale = self.x_scale
        if x_scale == "log" and any(v is not None and v <= 0 for v in self.x):
            x_scale = "asinh"
        return {
            "title": self.title, "kind": self.kind, "height": int(self.height),
            "x_label": self.x_label, "y_label": self.y_label, "x_scale": x_scale, "y_scale": y_scale,
            "x_legend": "time (s)" if self.x_label == TIME_AXIS else self.x_label,
            "categories": [str(c) for c in self.categories],
            "x": [None if v is None else float(f"{v:.9g}") for v in floats(self.x)],  # 0.30000000000000004
            "series": [{"label": s.label, "values": floats(s.values),
                        "color": s.color or PALETTE[i % len(PALETTE)], "dash": s.dash, "points": s.points,
                        "span_gaps": s.span_gaps} for i, s in enumerate(self.series)],
        }


def as_charts(figure: Chart | Sequence[Chart]) -> list[Chart]:
    """A figure of :attr:`Section.figures` (one chart, or panels sharing their x axis) as a list."""
    if isinstance(figure, Chart):
        return [figure]
    charts = list(figure)
    if not charts or not all(isinstance(c, Chart) for c in charts):
        raise TypeError(f"a figure is a Chart or a list of Charts, not {type(figure).__name__}")
    return charts


def series_lines(df: Any, label_cols: list[str], value: str, keys: list[tuple] | None = None, *,
                 title: str = "", y_label: str = "", y_scale: Scale = "linear", height: int = 300) -> Chart:
    """One line of ``value`` over ``bucket_start`` (as seconds from the frame's first bucket) per
    ``label_cols`` group, labelled with the group's values joined by spaces.

    ``keys``: only these groups (tuples of label values), in this order.  A group's missing buckets are
    bridged (its line joins the buckets it has).  An empty frame gives a chart with no series.
    """
    import pandas as pd

    chart = Chart(title, [], y_label=y_label, y_scale=y_scale, height=height)
    if df is None or df.empty:
        return chart
    times = pd.to_datetime(df["bucket_start"])
    t0 = times.min()
    grid = sorted(times.unique())
    chart.x = floats((pd.DatetimeIndex(grid) - t0).total_seconds())
    groups: dict[tuple, Any] = {}
    for k, g in df.groupby(label_cols, sort=True):
        groups[k if isinstance(k, tuple) else (k,)] = g
    for k in (keys if keys is not None else list(groups)):
        g = groups.get(tuple(k))
        if g is None:
            continue
        col = pd.Series(g[value].to_numpy(), index=pd.to_datetime(g["bucket_start"]))
        col = col.groupby(level=0).max()  # one value per bucket
        chart.add(" ".join(str(x) for x in k), col.reindex(grid).to_numpy(), span_gaps=True)
    return chart
