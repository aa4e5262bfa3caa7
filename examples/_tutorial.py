"""What the tutorial scripts in examples/ share: their command line, their own broker, their figures and charts.

Every tutorial (``fetch_session_seed.py``, ``quota_live.py``, ``replication_quotas.py``,
``producer_batching.py``, ``consumer_lag.py``) takes

    --bootstrap HOST:PORT   use a running broker instead of starting one here
    --out DIR               write <name>.json (the figures it printed) and <name>*.svg (its charts) there

The documentation site's build (docs/hooks.py) runs each script with ``--out`` and puts those figures and
charts into the tutorial pages, so what the pages say is what this run measured.
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path
from typing import Any, Sequence

log = logging.getLogger(__name__)


def parser(description: str) -> argparse.ArgumentParser:
    """An argument parser with the options every tutorial takes."""
    ap = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bootstrap", default=None, metavar="HOST:PORT",
                    help="a running broker (default: start one in this process)")
    ap.add_argument("--out", type=Path, default=None, metavar="DIR",
                    help="write the figures (JSON) and charts (SVG) of this run to DIR")
    return ap


class Figures:
    """The figures one tutorial run measured, written as ``<name>.json`` beside its charts."""

    def __init__(self, name: str, out: Path | None) -> None:
        self.name = name
        self.out = out
        self.values: dict[str, Any] = {}
        if out is not None:
            out.mkdir(parents=True, exist_ok=True)

    def __setitem__(self, key: str, value: Any) -> None:
        self.values[key] = value

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    def write(self) -> None:
        if self.out is None:
            return
        path = self.out / f"{self.name}.json"
        path.write_text(json.dumps(self.values, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        print(f"figures written to {path}")

    def chart(self, suffix: str, title: str, xlabel: str, ylabel: str,
              series: Sequence[tuple[str, Sequence[float], Sequence[float]]], *, kind: str = "line",
              hline: tuple[str, float] | None = None, logy: bool = False) -> None:
        """Draw ``series`` (label, xs, ys) as ``<name>-<suffix>.svg`` in the output directory (with --out)."""
        if self.out is None:
            return
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        matplotlib.rcParams["svg.hashsalt"] = "minikafka"  # the same data draws the same file
        fig, ax = plt.subplots(figsize=(7.5, 3.6))
        for i, (label, xs, ys) in enumerate(series):
            if kind == "bar":
                width = 0.8 / len(series)
                ax.bar([x + i * width for x in range(len(xs))], ys, width=width, label=label)
                ax.set_xticks([x + width * (len(series) - 1) / 2 for x in range(len(xs))], [str(x) for x in xs])
            elif kind == "step":
                ax.step(xs, ys, where="post", label=label)
            else:
                ax.plot(xs, ys, marker="." if len(xs) < 60 else None, label=label)
        if hline is not None:
            ax.axhline(hline[1], color="grey", linestyle="--", linewidth=1, label=hline[0])
        if logy:
            ax.set_yscale("log")
        ax.set_title(title)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.grid(True, alpha=0.3)
        if len(series) > 1 or hline is not None:
            ax.legend(fontsize="small")
        fig.tight_layout()
        path = self.out / f"{self.name}-{suffix}.svg"
        fig.savefig(path, format="svg", metadata={"Date": None})
        plt.close(fig)
        print(f"chart written to {path}")


def split_bootstrap(bootstrap: str) -> tuple[str, int]:
    """``host:port`` (the first of a comma-separated list) as (host, port)."""
    host, _, port = bootstrap.split(",")[0].rpartition(":")
    return host or "127.0.0.1", int(port)
