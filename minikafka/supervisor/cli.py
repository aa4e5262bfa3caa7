"""``minikafka serve --brokers N``: a controller process and N broker processes, supervised.

The brokers listen on ``--host`` at ``--port`` + id, as a one-process cluster's do; with
``--network-partitions`` each node is behind a proxy on a loopback address of its own
(:mod:`~minikafka.supervisor.network`), so that links can be cut.  Prints where each listens, reads commands on
stdin (``kill 1``, ``pause 1``, ``resume 1``, ``stop 1``, ``start 1``, ``kill controller``, ``start controller``,
``isolate 1``, ``partition 0 | 1 2 controller``, ``heal``, ``status``) and stops them all on Ctrl-C.  A process
that dies without being told to is reported, not restarted.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path

from .processes import CONTROLLER, NodeProcess, ProcessCluster, ProcessError

HELP = ("commands: kill NODE (SIGKILL) | pause NODE (SIGSTOP) | resume NODE (SIGCONT) | stop NODE (SIGTERM: "
        "a controlled shutdown) | start NODE | isolate NODE | partition NODES | NODES ... | heal | status  "
        "(NODE: a broker id or 'controller'; partition sides may also name 'clients')")


def run_command(cluster: ProcessCluster, line: str) -> list[str]:
    """One stdin command's output lines."""
    words = line.split()
    if not words:
        return []
    verb, names = words[0].lower(), words[1:]
    if verb == "status" and not names:
        return cluster.status()
    try:
        if verb == "heal" and not names:
            cluster.heal()
            return ["minikafka: network healed"]
        if verb == "partition":
            sides = [side.split() for side in " ".join(names).split("|")]
            cluster.partition(sides)  # type: ignore[arg-type]
            return [f"minikafka: network partition {' | '.join(' '.join(side) for side in sides)}"]
        if verb == "isolate" and len(names) == 1:
            cluster.isolate(names[0])
            return [f"minikafka: isolated {names[0]}"]
    except ProcessError as exc:
        return [f"minikafka: {exc}"]
    actions = {"kill": cluster.kill, "pause": cluster.pause, "resume": cluster.resume, "stop": cluster.stop,
               "start": cluster.start}
    if verb not in actions or len(names) != 1:
        return [HELP]
    try:
        actions[verb](names[0])
    except ProcessError as exc:
        return [f"minikafka: {exc}"]
    return [f"minikafka: {verb} {names[0]}: {cluster.state(names[0])}"]


def serve_processes(args: argparse.Namespace, host: str, port: int, data_dir: Path | None) -> int:
    """Run the cluster until SIGINT/SIGTERM: ``host``, ``port`` (the first broker's; 0: free ports) and
    ``data_dir`` (None: a temporary one) as configured."""
    if args.capture is not None:
        print("minikafka: --capture records the traffic of a one-process cluster: add --in-process",
              file=sys.stderr)
        return 2
    overrides = dict(item.split("=", 1) for item in args.override if "=" in item)
    if args.quota:  # (the controller writes them to the metadata log; every broker applies them)
        overrides["client.quotas"] = ";".join([*filter(None, [overrides.get("client.quotas")]), *args.quota])
    extra = ["--config", str(args.config)] if args.config else []
    if args.advertised_host:
        extra += ["--advertised-host", args.advertised_host]
    cluster = ProcessCluster(args.brokers, data_dir, host=host, base_port=port, overrides=overrides,
                             extra_args=extra, log_level=args.log_level, network=args.network_partitions)

    def reported(node: NodeProcess, code: int) -> None:
        how = f"signal {-code}" if code < 0 else f"code {code}"
        label = CONTROLLER if node.name == CONTROLLER else f"broker {node.name}"
        print(f"minikafka: {label} (pid {node.pid}) exited with {how}; not restarted", flush=True)

    cluster.on_exit = reported
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    try:
        cluster.start_all()
        if args.http_port is not None:
            from .http import serve_http

            server = serve_http(cluster, args.http_host or host, args.http_port)
            bound_host, bound_port = server.server_address[:2]
            print(f"minikafka supervisor HTTP on {bound_host!s}:{bound_port} "
                  "(minikafka cluster kill|stop|start|pause|resume NODE --http HOST:PORT)", flush=True)
        print(f"minikafka controller ready on {cluster.controller_address} (data dir {cluster.data_dir})", flush=True)
        for node in cluster.brokers.values():
            host, port = cluster.address(node)
            print(f"minikafka broker {node.name} ready on {host}:{port} (pid {node.pid})", flush=True)
        print(f"minikafka cluster of {len(cluster.brokers)} broker processes ready on {cluster.bootstrap}; "
              "Ctrl-C stops it", flush=True)
        threading.Thread(target=_read_commands, args=(cluster, stop), daemon=True).start()
        stop.wait()
    except ProcessError as exc:
        print(f"minikafka: {exc}", file=sys.stderr)
        return 1
    finally:
        cluster.close()
    return 0


def _read_commands(cluster: ProcessCluster, stop: threading.Event) -> None:
    for line in sys.stdin:
        for out in run_command(cluster, line):
            print(out, flush=True)
    if not sys.stdin.isatty():
        return  # stdin closed (a pipe): keep running until a signal
    stop.set()
