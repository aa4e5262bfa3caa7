"""``minikafka analyze CAPTURE... --out DIR``: run the PySpark jobs over captures, write tables and a report.

The same arguments work under ``spark-submit minikafka/analysis/run.py
CAPTURE... --out DIR``.  Nothing here imports PySpark: the command does, when it runs.
"""

from __future__ import annotations

import argparse
import logging
from typing import Any

from .jobs import JOB_MODULES, AnalysisOptions

log = logging.getLogger(__name__)

_UNITS = {"": 1, "k": 1024, "m": 1024 ** 2, "g": 1024 ** 3}


def parse_rate(text: str) -> float:
    """``1048576``, ``1e6``, ``512K``, ``10M/s``, ``1GiB/s`` -> bytes per second (K/M/G are powers of 1024)."""
    t = text.strip()
    if t.lower().endswith("/s"):
        t = t[:-2]
    if t.lower().endswith("ib"):
        t = t[:-2]
    elif t.lower().endswith("b"):
        t = t[:-1]
    unit = t[-1:].lower() if t[-1:].isalpha() else ""
    if unit not in _UNITS:
        raise argparse.ArgumentTypeError(f"bad rate {text!r} (bytes/s, optionally with K, M or G)")
    num = t[:-1] if unit else t
    try:
        return float(num) * _UNITS[unit]
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad rate {text!r} (bytes/s, optionally with K, M or G)") from None


def parse_client_values(items: list[str], what: str, value: Any = parse_rate) -> dict[str, float]:
    """``CLIENT=VALUE`` items (CLIENT may be ``*``) as a dict; the last one for a client wins."""
    out: dict[str, float] = {}
    for item in items:
        client, sep, v = item.rpartition("=")
        if not sep or not v.strip():
            raise SystemExit(f"{what} expects CLIENT=VALUE, got {item!r}")
        try:
            out[client.strip() or "*"] = value(v)
        except (argparse.ArgumentTypeError, ValueError) as exc:
            raise SystemExit(f"{what}: {exc}") from None
    return out


def _percent(text: str) -> float:
    return float(text.strip().rstrip("%"))


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The ``analyze`` arguments (shared by the ``minikafka analyze`` subcommand and ``run.py``)."""
    p.add_argument("paths", nargs="+", metavar="CAPTURE",
                   help="capture directories, .mkcap files or tcpdump pcap/pcapng files")
    p.add_argument("--out", required=True, metavar="DIR", help="output directory (tables and report.html)")
    p.add_argument("--jobs", default=None, metavar="NAME,...",
                   help=f"jobs to run (default: every one that imports: {','.join(JOB_MODULES)})")
    p.add_argument("--bucket", type=float, default=1.0, metavar="SECONDS",
                   help="time-series bucket (default 1 s)")
    p.add_argument("--master", default=None, metavar="URL",
                   help="Spark master (default: the spark-submit session, else local[*])")
    p.add_argument("--port", type=int, action="append", default=[], metavar="PORT",
                   help="Kafka port in pcap inputs (repeatable; default 9092)")
    p.add_argument("--produce-quota", action="append", default=[], metavar="CLIENT=BYTES/s",
                   help="quota what-if: producer byte rate per client id, * = every client, or per Kafka "
                        "entity (user=alice=BYTES, user=alice,client-id=app=BYTES, user=<default>=BYTES; the "
                        "user is the captured principal's name) (repeatable)")
    p.add_argument("--fetch-quota", action="append", default=[], metavar="CLIENT=BYTES/s",
                   help="quota what-if: consumer byte rate per client id or entity, * = every client "
                        "(repeatable)")
    p.add_argument("--request-quota", action="append", default=[], metavar="CLIENT=PERCENT",
                   help="quota what-if: request time percentage per client id or entity (repeatable)")
    p.add_argument("--quota-window-num", type=int, default=11, metavar="N",
                   help="quota.window.num (default 11)")
    p.add_argument("--quota-window-size", type=float, default=1.0, metavar="S",
                   help="quota.window.size.seconds (default 1)")
    p.add_argument("--leader-throttled-replicas", action="append", default=[],
                   metavar="TOPIC:PARTITION:BROKER,...",
                   help="replication: throttled replicas (TOPIC:* for all of a topic; repeatable)")
    p.add_argument("--leader-throttled-rate", type=parse_rate, default=None, metavar="BYTES",
                   help="replication: leader.replication.throttled.rate in bytes/s")
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--csv-only", action="store_true", help="write CSV tables only")
    fmt.add_argument("--parquet-only", action="store_true", help="write Parquet tables only")
    p.add_argument("--no-report", action="store_true", help="do not write report.html")
    p.add_argument("--no-progress", action="store_true", help="no progress display (none when stderr is no terminal)")
    p.add_argument("--log-level", default="WARNING", help="logging level (default WARNING)")


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``analyze`` to the ``minikafka`` subcommands."""
    p = sub.add_parser("analyze", help="PySpark analysis of captures: tables (Parquet/CSV) and an HTML report")
    add_arguments(p)


def build_parser(prog: str = "minikafka analyze") -> argparse.ArgumentParser:
    """A stand-alone parser with the ``analyze`` arguments (used by ``run.py`` under spark-submit)."""
    p = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0])
    add_arguments(p)
    return p


def options_from_args(args: argparse.Namespace) -> AnalysisOptions:
    """The :class:`AnalysisOptions` the arguments ask for."""
    if args.bucket <= 0:
        raise SystemExit("--bucket must be > 0")
    replicas = [r.strip() for item in args.leader_throttled_replicas for r in item.split(",") if r.strip()]
    return AnalysisOptions(
        bucket_seconds=args.bucket,
        produce_quota=parse_client_values(args.produce_quota, "--produce-quota"),
        fetch_quota=parse_client_values(args.fetch_quota, "--fetch-quota"),
        request_quota=parse_client_values(args.request_quota, "--request-quota", _percent),
        quota_window_num=args.quota_window_num,
        quota_window_size_seconds=args.quota_window_size,
        leader_throttled_replicas=replicas,
        leader_throttled_rate=args.leader_throttled_rate,
    )


def job_names(args: argparse.Namespace) -> list[str] | None:
    if not args.jobs:
        return None
    names = [j.strip() for j in args.jobs.split(",") if j.strip()]
    bad = [j for j in names if not j.isidentifier()]
    if bad:
        raise SystemExit(f"--jobs: not job names: {', '.join(bad)} (known: {', '.join(JOB_MODULES)})")
    return names
