"""Plot helpers shared by the jobs' reports (matplotlib axes, pandas frames)."""

from __future__ import annotations

from typing import Any


def series_lines(ax: Any, df: Any, label_cols: list[str], value: str, keys: list[tuple] | None = None) -> None:
    """One line of ``value`` over ``bucket_start`` (seconds from the first bucket) per ``label_cols`` group.

    ``keys``: only these groups (tuples of label values); "no data" on an empty frame.
    """
    import pandas as pd

    if df is None or df.empty:
        ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
        return
    t0 = pd.to_datetime(df["bucket_start"]).min()
    for k, g in df.groupby(label_cols, sort=True):
        k = k if isinstance(k, tuple) else (k,)
        if keys is not None and k not in keys:
            continue
        g = g.sort_values("bucket_start")
        ax.plot((pd.to_datetime(g["bucket_start"]) - t0).dt.total_seconds(), g[value], marker=".",
                label=" ".join(str(x) for x in k))
    ax.legend(fontsize=7, loc="upper right")
    ax.grid(alpha=0.3)
