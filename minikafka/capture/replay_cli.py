"""``minikafka replay CAPTURE... --to HOST:PORT``: re-send a capture's traffic to a broker and compare.

See :mod:`minikafka.capture.replay` (one Trio process) and
:mod:`minikafka.analysis.replay_job` (connections spread over Spark tasks).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import logging
from pathlib import Path

from .format import capture_files
from .replay import (
    DEFAULT_EXAMPLES,
    DEFAULT_MAX_IN_FLIGHT,
    DEFAULT_TIMEOUT_S,
    ReplayOptions,
    ReplayReport,
)

log = logging.getLogger(__name__)

DEFAULT_SPARK_THRESHOLD = 64


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("replay", help="replay a traffic capture against a broker and compare the responses")
    p.add_argument("paths", nargs="+", metavar="CAPTURE", help="capture directories or .mkcap files")
    p.add_argument("--to", required=True, metavar="HOST:PORT", help="the broker to replay against")
    p.add_argument("--speed", default="1x",
                   help="pacing: 1x keeps the captured timing, 2x/0.5x scales it, max sends as fast as "
                        "order allows (default 1x)")
    p.add_argument("--max-in-flight", type=int, default=DEFAULT_MAX_IN_FLIGHT, metavar="N",
                   help=f"requests outstanding per connection (default {DEFAULT_MAX_IN_FLIGHT})")
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, metavar="SECONDS",
                   help=f"per-request timeout (default {DEFAULT_TIMEOUT_S:g})")
    p.add_argument("--causality", choices=("global", "connection"), default="global",
                   help="hold a request until what completed before it in the capture has completed: on any "
                        "connection (global, default) or on its own connection only")
    p.add_argument("--examples", type=int, default=DEFAULT_EXAMPLES, metavar="K",
                   help=f"example differences kept per api (default {DEFAULT_EXAMPLES})")
    p.add_argument("--report", type=Path, default=None, metavar="OUT.json", help="write the report as JSON")
    p.add_argument("--spark", action="store_true", help="spread the connections over Spark tasks")
    p.add_argument("--spark-threshold", type=int, default=DEFAULT_SPARK_THRESHOLD, metavar="N",
                   help="use Spark (if pyspark is installed) when the capture has more than N connections "
                        f"(default {DEFAULT_SPARK_THRESHOLD})")
    p.add_argument("--master", default=None, help="Spark master (default local[*])")
    p.add_argument("--partitions", type=int, default=None, metavar="N", help="Spark tasks (default: parallelism)")
    p.add_argument("--no-progress", action="store_true", help="no progress display (none when stderr is no terminal)")
    p.add_argument("--log-level", default="WARNING", help="logging level (default WARNING)")


def options_from_args(args: argparse.Namespace) -> ReplayOptions:
    from .replay import parse_speed, parse_target

    try:
        host, port = parse_target(args.to)
        speed = parse_speed(args.speed)
    except ValueError as exc:
        raise SystemExit(f"minikafka replay: {exc}") from None
    return ReplayOptions(host, port, speed=speed, max_in_flight=args.max_in_flight, timeout_s=args.timeout,
                         causality=args.causality, max_examples=args.examples)


def _use_spark(args: argparse.Namespace) -> bool:
    if args.spark:
        return True
    if importlib.util.find_spec("pyspark") is None:
        return False
    from ..analysis.replay_job import index_capture

    counts, _ = index_capture(args.paths)
    return len(counts) > args.spark_threshold


def run_replay_command(args: argparse.Namespace) -> int:
    if not capture_files(args.paths):
        print("no capture files found")
        return 1
    options = options_from_args(args)
    report: ReplayReport
    if _use_spark(args):
        from ..analysis.replay_job import run_spark_replay

        report = run_spark_replay(args.paths, options, master=args.master, partitions=args.partitions)
    else:
        from ..tools.progress import ProgressDisplay, progress_enabled
        from .replay import run_replay

        with ProgressDisplay("replaying requests", enabled=progress_enabled(args.no_progress)) as bar:
            report = run_replay(args.paths, options,
                                on_progress=lambda done, total: bar.update(completed=done, total=total))
    print(report.summary())
    if args.report is not None:
        args.report.parent.mkdir(parents=True, exist_ok=True)
        args.report.write_text(json.dumps(report.to_dict(), indent=2, default=str) + "\n")
        print(f"report written to {args.report}")
    return 0 if report.sent else 1
