"""``minikafka replay CAPTURE... --to HOST:PORT``: re-send a capture's traffic to a broker and compare.

See :mod:`minikafka.capture.replay` (one Trio process) and
:mod:`minikafka.analysis.replay_job` (connections spread over Spark tasks).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import logging
import os
from collections.abc import Sized
from pathlib import Path
from typing import Protocol

from ..client.security import SASL_MECHANISMS, SECURITY_PROTOCOLS
from .format import capture_files
from .replay import (
    DEFAULT_EXAMPLES,
    DEFAULT_MAX_IN_FLIGHT,
    DEFAULT_TIMEOUT_S,
    ReplayOptions,
    ReplayReport,
    ReplaySecurity,
    load_credentials,
)

log = logging.getLogger(__name__)

DEFAULT_SPARK_THRESHOLD = 64


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("replay", help="replay a traffic capture against a broker and compare the responses")
    p.add_argument("paths", nargs="+", metavar="CAPTURE", help="capture directories or .mkcap files")
    p.add_argument("--to", required=True, metavar="HOST:PORT[,HOST:PORT...]",
                   help="the broker to replay against, or a cluster's bootstrap servers (with two or more, "
                        "requests go to partition leaders and coordinators as a client's would)")
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
    p.add_argument("--scale", type=int, default=1, metavar="K",
                   help="replay the capture K times at once, copy i under its own names (topics, groups, "
                        "transactional and client ids prefixed s<i>.; internal __ topics kept): a load test from "
                        "real traffic (default 1)")
    p.add_argument("--spark", action="store_true", help="spread the connections over Spark tasks")
    p.add_argument("--spark-threshold", type=int, default=DEFAULT_SPARK_THRESHOLD, metavar="N",
                   help="use Spark (if pyspark is installed) when the capture has more than N connections "
                        f"(default {DEFAULT_SPARK_THRESHOLD})")
    p.add_argument("--master", default=None, help="Spark master (default local[*])")
    p.add_argument("--partitions", type=int, default=None, metavar="N", help="Spark tasks (default: parallelism)")
    p.add_argument("--no-progress", action="store_true", help="no progress display (none when stderr is no terminal)")
    p.add_argument("--log-level", default="WARNING", help="logging level (default WARNING)")
    sec = p.add_argument_group(
        "security", "reaching a secured target, as a Kafka client's security.protocol, sasl.* and ssl.* settings. "
        "On SASL protocols every replayed connection authenticates first, as the principal the capture recorded "
        "for it (its entry in --sasl-credentials, else --sasl-username); captured SaslHandshake/SaslAuthenticate "
        "requests are never re-sent (their tokens are single-use)")
    sec.add_argument("--security-protocol", choices=SECURITY_PROTOCOLS, default="PLAINTEXT",
                     help="security.protocol of the target's listener (default PLAINTEXT)")
    sec.add_argument("--sasl-mechanism", choices=SASL_MECHANISMS, default=None, help="sasl.mechanism")
    sec.add_argument("--sasl-username", default=None, metavar="NAME",
                     help="sasl.username for connections without an entry in --sasl-credentials")
    sec.add_argument("--sasl-password", default=None, metavar="PASSWORD",
                     help="sasl.password of --sasl-username (default: the MINIKAFKA_SASL_PASSWORD environment "
                          "variable, which keeps it out of the process list)")
    sec.add_argument("--sasl-credentials", type=Path, default=None, metavar="FILE.json",
                     help='per-principal credentials: a JSON object mapping captured principals ("User:alice" or '
                          '"alice") to a password or to {"username": ..., "password": ...}')
    sec.add_argument("--ssl-cafile", default=None, metavar="CA.pem",
                     help="ssl.truststore.location: PEM CA certificate(s) to trust (default: the system's)")
    sec.add_argument("--ssl-certfile", default=None, metavar="CERT.pem",
                     help="ssl.keystore.location: PEM client certificate chain for mutual TLS (with its key, or "
                          "the key in --ssl-keyfile)")
    sec.add_argument("--ssl-keyfile", default=None, metavar="KEY.pem", help="the client certificate's PEM key")
    sec.add_argument("--ssl-endpoint-identification-algorithm", choices=("https", "none"), default="https",
                     help="ssl.endpoint.identification.algorithm: https checks the target's host name against "
                          "its certificate (default), none does not")


def security_from_args(args: argparse.Namespace) -> ReplaySecurity:
    """The :class:`ReplaySecurity` of the command line (SystemExit with the reason when inconsistent)."""
    try:
        credentials = load_credentials(args.sasl_credentials) if args.sasl_credentials is not None else {}
        password = args.sasl_password
        if password is None and args.sasl_username:
            password = os.environ.get("MINIKAFKA_SASL_PASSWORD")
        return ReplaySecurity(args.security_protocol, args.sasl_mechanism, args.sasl_username, password, credentials,
                              args.ssl_cafile, args.ssl_certfile, args.ssl_keyfile,
                              ssl_check_hostname=args.ssl_endpoint_identification_algorithm == "https")
    except ValueError as exc:
        raise SystemExit(f"minikafka replay: {exc}") from None


def options_from_args(args: argparse.Namespace) -> ReplayOptions:
    from .replay import parse_speed
    from .replay.routing import parse_bootstrap

    try:
        bootstrap = parse_bootstrap(args.to)
        speed = parse_speed(args.speed)
        if args.scale < 1:
            raise ValueError(f"--scale must be 1 or more, not {args.scale}")
    except ValueError as exc:
        raise SystemExit(f"minikafka replay: {exc}") from None
    host, port = bootstrap[0]
    return ReplayOptions(host, port, bootstrap=bootstrap, speed=speed, max_in_flight=args.max_in_flight,
                         timeout_s=args.timeout,
                         causality=args.causality, max_examples=args.examples, security=security_from_args(args),
                         scale=args.scale)


class SparkReplay(Protocol):
    """The replay over Spark tasks (:mod:`minikafka.analysis.replay_job`, handed in by the command line:
    the analysis builds on the capture, never the other way round)."""

    def index_capture(self, paths: list[Path]) -> Sized: ...

    def run_spark_replay(self, paths: list[Path], options: ReplayOptions, *, master: str | None,
                         partitions: int | None) -> ReplayReport: ...


def _use_spark(args: argparse.Namespace, spark: SparkReplay | None) -> bool:
    if args.spark:
        return True
    if spark is None or importlib.util.find_spec("pyspark") is None:
        return False
    return len(spark.index_capture(args.paths)) > args.spark_threshold


def run_replay_command(args: argparse.Namespace, spark: SparkReplay | None = None) -> int:
    """``minikafka replay``; ``spark``: the Spark replay (``--spark``, or more than ``--spark-threshold``
    connections with pyspark installed)."""
    options = options_from_args(args)
    if not capture_files(args.paths):
        print("no capture files found")
        return 1
    report: ReplayReport
    if _use_spark(args, spark):
        if spark is None:
            raise SystemExit("minikafka replay: --spark needs the analysis package (minikafka.analysis)")
        report = spark.run_spark_replay(args.paths, options, master=args.master, partitions=args.partitions)
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
