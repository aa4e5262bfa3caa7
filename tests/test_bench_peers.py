"""``scripts/bench peers`` (issue 27's probes beside another broker): a smoke run of the real script.

The bench starts minikafka itself and a second minikafka as ``--peer-cmd`` (standing in for another
broker: a command run on a free port), runs every probe with ``--quick`` counts, and must print a figure
for every probe and broker, and a ratio for each.  No timing is asserted: figures are the bench's output.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NUMBER = re.compile(r"^\d+(\.\d+)?k?(-\d+(\.\d+)?k?)?x?$")  # a figure or a range, as the table writes them


def table_rows(out: str) -> dict[str, list[str]]:
    """The cells of the markdown table's rows by probe label, and the header under ``"probe"``."""
    rows = {}
    for line in out.splitlines():
        if line.startswith("| ") and not line.startswith("|---"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            rows[cells[0]] = cells[1:]
    return rows


def test_bench_peers_prints_every_figure_for_minikafka_and_a_started_peer() -> None:
    peer = f"{shlex.quote(sys.executable)} -m minikafka serve --port {{port}} --log-level WARNING"
    run = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench_peers.py"), "--quick",
                          "--probes", "produce,ack,e2e,round-trips,startup,throughput",
                          "--peer-cmd", f"other={peer}"],
                         capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert run.returncode == 0, run.stdout + run.stderr
    rows = table_rows(run.stdout)
    assert rows.pop("probe") == ["better", "minikafka", "other", "minikafka/other", "issue 27 target"]
    labels = [label.split(",")[0].split(" (")[0] for label in rows]
    assert labels == [
        "single-record Produce requests/s", "broker CPU per single-record Produce request",
        "produce acknowledgement p50", "produce acknowledgement p99", "end-to-end p50", "end-to-end p99",
        "Fetch requests/s", "Metadata requests/s", "OffsetCommit requests/s", "broker CPU per Fetch request",
        "broker CPU per Metadata request", "broker CPU per OffsetCommit request",
        "start to accepting connections", "idle RSS", "1 KiB produce MB/s", "1 KiB consume MB/s"]
    for label, cells in rows.items():
        better, mine, theirs, ratio = cells[:4]
        assert better in ("higher", "lower"), label
        assert NUMBER.match(mine) and NUMBER.match(theirs) and ratio.endswith("x") and NUMBER.match(ratio), \
            (label, cells)
    # every Produce request carried one record, and the round trips say what limited them
    assert run.stdout.count("1.00 records per Produce request") == 2, run.stdout
    assert len(re.findall(r"(Fetch|Metadata|OffsetCommit) v\d+: client \d+% CPU", run.stdout)) == 6, run.stdout
