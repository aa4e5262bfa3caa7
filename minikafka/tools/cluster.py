"""``minikafka cluster kill|stop|start|pause|resume|isolate NODE --http HOST:PORT``, ``cluster partition SIDES``,
``cluster heal`` and ``cluster status``: failures on the processes of a ``minikafka serve --brokers N --processes
--http-port PORT`` cluster (SIGKILL, SIGTERM, SIGSTOP, SIGCONT, links cut), through its supervisor's HTTP port
(:mod:`minikafka.supervisor.http`).  ``NODE``: a broker id or ``controller``."""

from __future__ import annotations

import argparse

import trio

from .common import ToolError, print_table, set_main
from .faults import http_call

ACTIONS = {"kill": "SIGKILL: no shutdown at all", "stop": "SIGTERM: a controlled shutdown",
           "start": "start it again on its port and data dir", "pause": "SIGSTOP", "resume": "SIGCONT",
           "isolate": "cut its links to every other node and to the clients"}


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("cluster", help="kill, stop, start, pause or resume the processes of a multi-process cluster")
    csub = p.add_subparsers(dest="cluster_command", required=True)
    for action, text in ACTIONS.items():
        a = csub.add_parser(action, help=text)
        a.add_argument("node", help="a broker id, or 'controller'")
        a.add_argument("--http", required=True, metavar="HOST:PORT", help="the supervisor's --http-port address")
        a.set_defaults(cluster_action=action)
        set_main(a, _act)
    part = csub.add_parser("partition", help="cut the links between sides, e.g. '0 | 1 2 controller clients'")
    part.add_argument("sides", nargs="+", help="node names (broker ids, controller, clients), sides split by '|'")
    part.add_argument("--http", required=True, metavar="HOST:PORT", help="the supervisor's --http-port address")
    set_main(part, _partition)
    heal = csub.add_parser("heal", help="heal every network partition")
    heal.add_argument("--http", required=True, metavar="HOST:PORT", help="the supervisor's --http-port address")
    set_main(heal, _heal)
    s = csub.add_parser("status", help="every process with its state, address and pid")
    s.add_argument("--http", required=True, metavar="HOST:PORT", help="the supervisor's --http-port address")
    set_main(s, _status)


async def _act(args: argparse.Namespace) -> int:
    node = args.node.strip().lower()
    if node != "controller" and not node.isdigit():
        raise ToolError(f"not a broker id or 'controller': {args.node}")
    path = f"/v1/controller/{args.cluster_action}" if node == "controller" else \
        f"/v1/brokers/{node}/{args.cluster_action}"
    answer = await trio.to_thread.run_sync(http_call, args.http, "POST", path)
    print(f"{answer['node']}: {answer['state']}")
    return 0


async def _partition(args: argparse.Namespace) -> int:
    sides = [[int(n) if n.isdigit() else n for n in side.split()] for side in " ".join(args.sides).split("|")]
    await trio.to_thread.run_sync(http_call, args.http, "POST", "/v1/network/partitions", {"sides": sides})
    print("network partition: " + " | ".join(" ".join(map(str, side)) for side in sides))
    return 0


async def _heal(args: argparse.Namespace) -> int:
    await trio.to_thread.run_sync(http_call, args.http, "DELETE", "/v1/network/partitions")
    print("network healed")
    return 0


async def _status(args: argparse.Namespace) -> int:
    rows = await trio.to_thread.run_sync(http_call, args.http, "GET", "/v1/brokers")
    print_table(["NODE", "STATE", "ADDRESS", "PID"],
                [[r["node"], r["state"], f"{r['host']}:{r['port']}", str(r["pid"])] for r in rows])
    return 0
