"""Command line: ``minikafka serve`` runs a broker; ``quotas`` and ``capture`` work with brokers and captures."""

from __future__ import annotations

import argparse
import gc
import logging
import signal
import sys
from pathlib import Path

import trio

from .broker.config import BrokerConfig, StartupError

log = logging.getLogger("minikafka")

DESCRIPTION = ("minikafka: a Kafka broker in pure Python. 'minikafka serve' runs a broker; the other commands "
               "capture, analyse and replay its traffic and work with any Kafka broker as Kafka's own tools do.")


def _serve_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="run a Kafka-protocol broker")
    p.add_argument("--host", default=None, help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=None, help="port to listen on (default 9092; 0 = any free port)")
    p.add_argument("--node-id", type=int, default=None, help="broker id (default 0)")
    p.add_argument("--brokers", type=int, default=1, metavar="N",
                   help="run a cluster of N brokers (ids 0..N-1, ports port..port+N-1, logs in "
                        "<data-dir>/broker-<id>): a KRaft controller process and a process per broker, "
                        "supervised; type 'kill ID', 'pause ID', 'resume ID', 'stop ID', 'start ID', "
                        "'kill controller', 'start controller' or 'status' on stdin (default 1)")
    p.add_argument("--network-partitions", action="store_true",
                   help="with --brokers N: each process behind a proxy on a loopback address of its own "
                        "(127.0.0.10+ID, where clients then reach it), so that 'isolate ID', "
                        "'partition 0 | 1 2 controller clients' and 'heal' cut and mend its links")
    p.add_argument("--in-process", action="store_true",
                   help="with --brokers N: all brokers in this one process (what the web console, fault rules, "
                        "--capture and the 'crash ID' command work on); type 'stop ID', 'crash ID', 'start ID', "
                        "'pause ID', 'resume ID', 'isolate ID', 'partition 0 | 1 2 controller [for SECONDS]', "
                        "'heal' or 'status' on stdin (SIGUSR1 stops the highest running one, SIGUSR2 restarts "
                        "the stopped ones)")
    p.add_argument("--processes", action="store_true", help=argparse.SUPPRESS)  # (the default since --in-process)
    p.add_argument("--data-dir", type=Path, default=None,
                   help="directory for logs and state (default: none, everything in memory)")
    p.add_argument("--config", type=Path, default=None, metavar="FILE",
                   help="a Kafka server.properties file (keys that apply: num.partitions, "
                        "auto.create.topics.enable, message.max.bytes, log.segment.bytes, log.retention.*, "
                        "listeners, advertised.listeners, listener.security.protocol.map, ssl.*, sasl.*, "
                        "listener.name.<listener>.* ...)")
    p.add_argument("--advertised-host", default=None, help="host name returned to clients in metadata")
    p.add_argument("-o", "--override", action="append", default=[], metavar="KEY=VALUE",
                   help="set one server.properties key (repeatable)")
    p.add_argument("--quota", action="append", default=[], metavar="ENTITY:KEY=VALUE[,KEY=VALUE]",
                   help="a client quota at start-up, e.g. 'client-id=app1:producer_byte_rate=1048576' or "
                        "'user=alice,client-id=<default>:consumer_byte_rate=2e6,request_percentage=50' "
                        "(repeatable; change them at run time with 'minikafka quotas alter')")
    p.add_argument("--capture", type=Path, default=None, metavar="DIR",
                   help="record every request and response frame in rolling capture files in DIR "
                        "(see 'minikafka capture')")
    p.add_argument("--http-port", type=int, default=None, metavar="PORT",
                   help="serve HTTP on PORT (0 = any free port): Prometheus metrics at /metrics, fault rules "
                        "at /v1/faults and, with --brokers, broker stop/start and partition leadership "
                        "(see 'minikafka faults'); the web console at /")
    p.add_argument("--http-host", default=None, metavar="HOST",
                   help="the address the HTTP port binds (default: the broker's --host, not every interface; "
                        "0.0.0.0 for all)")
    p.add_argument("--log-level", default="INFO", help="logging level (default INFO)")


def _quotas_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("quotas", help="describe or alter client quotas on a running broker (any Kafka broker)")
    qsub = p.add_subparsers(dest="quota_command", required=True)
    d = qsub.add_parser("describe", help="list client quotas (DescribeClientQuotas)")
    d.add_argument("--bootstrap", default="localhost:9092", help="host:port of a broker")
    d.add_argument("--entity", default=None,
                   help="filter: user=U and/or client-id=C (<default> for the default entity); none = all")
    a = qsub.add_parser("alter", help="set or remove client quotas (AlterClientQuotas)")
    a.add_argument("--bootstrap", default="localhost:9092", help="host:port of a broker")
    a.add_argument("--entity", required=True, help="user=U and/or client-id=C (<default> for defaults)")
    a.add_argument("--add", action="append", default=[], metavar="KEY=VALUE",
                   help="producer_byte_rate, consumer_byte_rate or request_percentage (repeatable)")
    a.add_argument("--delete", action="append", default=[], metavar="KEY", help="a quota key to remove")
    a.add_argument("--validate-only", action="store_true")


def build_config(args: argparse.Namespace) -> BrokerConfig:
    """Config file first, then -o overrides, then explicit flags."""
    cfg = BrokerConfig.from_properties(args.config) if args.config else BrokerConfig()
    for item in args.override:
        key, sep, value = item.partition("=")
        if not sep:
            raise StartupError(f"--override expects KEY=VALUE, got {item!r}")
        cfg.set(key.strip(), value.strip())
    if args.host is not None:
        cfg.host = args.host
    if args.port is not None:
        cfg.port = args.port
    if args.node_id is not None:
        cfg.node_id = args.node_id
    if args.data_dir is not None:
        cfg.data_dir = args.data_dir
    if args.advertised_host is not None:
        cfg.advertised_host = args.advertised_host
    if getattr(args, "capture", None) is not None:
        cfg.capture_dir = args.capture
    for spec in getattr(args, "quota", []):
        from .broker.quota.entity import parse_quota_spec

        try:
            parse_quota_spec(spec)
        except ValueError as exc:
            raise StartupError(f"--quota: {exc}") from None
        cfg.client_quotas.append(spec)
    return cfg


async def _start_http(nursery: trio.Nursery, target, cfg: BrokerConfig, http_port: int | None,
                      http_host: str | None = None) -> str:
    """Start the HTTP port if asked for; returns ``", HTTP on host:port"`` for the ready line."""
    if http_port is None:
        return ""
    from .broker.admin_http import serve_admin_http

    host = http_host or cfg.host  # the broker's host unless told
    bound = await nursery.start(serve_admin_http, target, host, http_port)
    return f", HTTP on {host}:{bound}"


async def _serve_controller(cfg: BrokerConfig) -> None:
    """Run a controller (``process.roles=controller``) until SIGINT/SIGTERM."""
    from .broker.controller_server import ControllerServer

    controller = ControllerServer(cfg)
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with trio.open_nursery() as nursery:
            port = await nursery.start(controller.run)
            gc.freeze()
            gc.enable()
            print(f"minikafka controller {cfg.node_id} ready on {cfg.host}:{port} (data dir {cfg.data_dir}); "
                  "Ctrl-C stops it", flush=True)
            async for signum in signals:
                log.info("received %s, shutting down", signal.Signals(signum).name)
                nursery.cancel_scope.cancel()
                break


async def _serve(cfg: BrokerConfig, http_port: int | None = None, http_host: str | None = None) -> None:
    """Run the broker until SIGINT/SIGTERM, then shut it down cleanly."""
    from .broker.broker import Broker
    from .capture.recorder import CAPTURE

    # serve --capture, and the console's captures; the per-request metrics only where /metrics or the console
    # can show them
    broker = Broker(cfg, captures=CAPTURE, request_metrics=http_port is not None)
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with trio.open_nursery() as nursery:
            port = await nursery.start(broker.run)
            http = await _start_http(nursery, broker, cfg, http_port, http_host)
            # The start-up objects (modules, compiled schemas: ~45k) move to the permanent generation: a full
            # collection of a running broker then scans what it made since (27 ms -> ~0, a stall of every
            # connection, the end-to-end latency's tail). The collector was off until now (see main).
            gc.freeze()
            gc.enable()
            where = f"data dir {cfg.data_dir}" if cfg.data_dir else "in-memory storage"
            print(f"minikafka broker {cfg.node_id} ready on {cfg.host}:{port} ({where}){http}; Ctrl-C stops it",
                  flush=True)
            if len(broker.server.endpoints) > 1:  # the first listener is in the line above
                print("listeners: " + ", ".join(f"{lst.name}://{lst.endpoint.host}:{lst.bound_port} "
                                                f"({lst.endpoint.security_protocol})"
                                                for lst in broker.server.endpoints), flush=True)
            async for signum in signals:
                log.info("received %s, shutting down", signal.Signals(signum).name)
                nursery.cancel_scope.cancel()
                break


async def _cluster_commands(cluster, stdin: trio.abc.ReceiveStream) -> None:
    """Read cluster commands (:mod:`minikafka.broker.cluster_commands`) from stdin until it closes."""
    try:
        await _read_commands(cluster, stdin)
    finally:
        with trio.CancelScope(shield=True):
            await stdin.aclose()  # FdStream restores the descriptor's blocking mode


async def _read_commands(cluster, stdin: trio.abc.ReceiveStream) -> None:
    from .broker.cluster_commands import run_command

    buf = b""
    while True:
        data = await stdin.receive_some(4096)
        if not data:
            return
        buf += data
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            for out in await run_command(cluster, line.decode(errors="replace")):
                print(out, flush=True)


async def _serve_cluster(cfg: BrokerConfig, n: int, http_port: int | None = None,
                         http_host: str | None = None) -> None:
    """Run an N-broker cluster until SIGINT/SIGTERM; stdin commands or SIGUSR1/SIGUSR2 stop/restart brokers."""
    import os

    from .broker.cluster import Cluster
    from .capture.recorder import CAPTURE

    cluster = Cluster(n, cfg, captures=CAPTURE, request_metrics=http_port is not None)
    stopped: list[int] = []
    sigs = [signal.SIGINT, signal.SIGTERM, signal.SIGUSR1, signal.SIGUSR2]
    with trio.open_signal_receiver(*sigs) as signals:
        async with trio.open_nursery() as nursery:
            await nursery.start(cluster.run)
            http = await _start_http(nursery, cluster, cfg, http_port, http_host)
            gc.freeze()  # the start-up objects are never scanned again (as in _serve)
            gc.enable()
            where = f"data dir {cfg.data_dir}" if cfg.data_dir else "in-memory storage"
            print(f"minikafka cluster of {n} brokers ready on {cluster.bootstrap} ({where}){http}; Ctrl-C stops it",
                  flush=True)
            stdin = None
            try:
                fd = sys.stdin.fileno()
                # Not from a terminal the process is in the background of (reading would stop it).
                if not os.isatty(fd) or os.tcgetpgrp(fd) == os.getpgrp():
                    stdin = trio.lowlevel.FdStream(os.dup(fd))
            except (OSError, ValueError, AttributeError):
                stdin = None
            if stdin is not None:
                nursery.start_soon(_cluster_commands, cluster, stdin)
            async for signum in signals:
                if signum == signal.SIGUSR1:
                    running = sorted(cluster.brokers)
                    if len(running) > 1:
                        victim = running[-1]
                        await cluster.stop_broker(victim)
                        stopped.append(victim)
                        print(f"minikafka: stopped broker {victim}", flush=True)
                    continue
                if signum == signal.SIGUSR2:
                    while stopped:
                        bid = stopped.pop()
                        await cluster.start_broker(bid)
                        print(f"minikafka: restarted broker {bid}", flush=True)
                    continue
                log.info("received %s, shutting down", signal.Signals(signum).name)
                nursery.cancel_scope.cancel()
                break


def package_version() -> str:
    """The installed distribution's version (importlib.metadata), or "unknown" when not installed."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("minikafka")
    except PackageNotFoundError:
        return "unknown"


class _VersionAction(argparse.Action):
    """``--version``: argparse's own version action, but the version is looked up only when asked for
    (``importlib.metadata`` costs a broker's start-up a tenth of its time)."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS, help: str | None = None) -> None:
        super().__init__(option_strings, dest=dest, default=argparse.SUPPRESS, nargs=0,
                         help=help or "show the program's version number and exit")

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                 option_string: str | None = None) -> None:
        print(f"minikafka {package_version()}")
        parser.exit()


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The ``minikafka`` parser with every command (the documentation's CLI reference is made from it); for
    ``command`` "serve" only that one, so that starting a broker imports no other command's modules."""
    parser = argparse.ArgumentParser(prog="minikafka", description=DESCRIPTION)
    parser.add_argument("--version", action=_VersionAction)
    sub = parser.add_subparsers(dest="command", required=True)
    _serve_parser(sub)
    if command == "serve":
        return parser
    _quotas_parser(sub)
    from .capture.cli import add_parser as _capture_parser

    _capture_parser(sub)
    from .capture.replay_cli import add_parser as _replay_parser
    _replay_parser(sub)
    from .analysis.cli import add_parser as _analyze_parser
    _analyze_parser(sub)
    from .tools import add_parsers as _tools_parsers  # topics, console-*, consumer-groups, configs, perf-test
    _tools_parsers(sub)
    return parser


def _command(argv: list[str]) -> str | None:
    """The command ``argv`` names: its first argument that is no option (the top level has no option taking a
    value)."""
    return next((a for a in argv if not a.startswith("-")), None)


def main(argv: list[str] | None = None) -> int:
    """Run the command ``argv`` says (default: the program's arguments; then the process ends after it)."""
    program = argv is None
    argv = sys.argv[1:] if argv is None else argv
    command = _command(argv)
    if command != "serve":
        gc.enable()  # ``python -m minikafka`` turned it off to import this module (serve keeps it off: below)
    parser = build_parser(command)
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=getattr(logging, str(getattr(args, "log_level", "WARNING")).upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if args.command == "serve":
        from .common.reporting import find_error, run_reporting

        def serve() -> int:
            cfg = build_config(args)
            if args.brokers > 1 and not args.in_process and not cfg.process_roles:
                from .broker.config import check_data_dir
                from .supervisor.cli import serve_processes

                if cfg.data_dir is not None:
                    check_data_dir(cfg.data_dir)

                return serve_processes(args, cfg.host, cfg.port, cfg.data_dir)
            if cfg.process_roles == "controller":
                trio.run(_serve_controller, cfg)
            elif args.brokers > 1:
                trio.run(_serve_cluster, cfg, args.brokers, args.http_port, args.http_host)
            else:
                trio.run(_serve, cfg, args.http_port, args.http_host)
            print("minikafka: stopped", file=sys.stderr)
            return 0

        # A broker's start-up makes ~40k objects that live as long as it does (modules, classes, compiled
        # schemas): the cyclic collector would scan them ~90 times while they are made (a twentieth of the
        # start-up). It stays off until the broker listens, then freezes them and turns it on (_serve).
        gc.disable()
        try:
            return run_reporting(serve, lambda exc: find_error(exc, (StartupError,)))
        finally:
            gc.enable()
    if args.command == "quotas":
        from .client.quotas_cli import run_quotas_command

        return run_quotas_command(args)
    if args.command == "analyze":
        from .analysis.run import run_analyze_command

        return run_analyze_command(args, leave_session=program)
    if args.command == "replay":
        from .analysis import replay_job
        from .capture.replay_cli import run_replay_command

        return run_replay_command(args, spark=replay_job)
    if getattr(args, "run_tool", None) is not None:  # a Kafka command-line tool (minikafka.tools)
        return args.run_tool(args)
    if args.command == "capture":
        from .capture.cli import run_capture_command

        return run_capture_command(args)
    parser.error(f"unknown command {args.command}")
    return 2


if __name__ == "__main__":
    sys.exit(main())
