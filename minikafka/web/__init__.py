"""Web assets shared by the broker's console and the analysis report: vendored uPlot (MIT, 1.6.32; charts
with zoom, hover values and series toggles) and ``tables.js`` (sortable, filterable tables).

Everything is served from the installed package (no CDN): the console serves these files, the report
inlines them so that its one HTML file opens offline.
"""

from __future__ import annotations

from functools import cache
from importlib.resources import files

__all__ = ["asset", "ASSETS"]

#: The shared assets, by the name the console serves them under.
ASSETS = ("vendor/uPlot.iife.min.js", "vendor/uPlot.min.css", "tables.js")


@cache
def asset(name: str) -> str:
    """The text of one asset of this package (``"vendor/uPlot.iife.min.js"``, ``"tables.js"``, ...)."""
    if name not in ASSETS:
        raise KeyError(name)
    return files(__name__).joinpath(name).read_text(encoding="utf-8")
