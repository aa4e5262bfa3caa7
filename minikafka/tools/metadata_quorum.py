"""``minikafka metadata-quorum``: the KRaft metadata quorum (``kafka-metadata-quorum.sh describe``).

``describe --status`` prints Kafka's summary (cluster id, leader, epoch, high watermark, follower lag, voters
and observers); ``describe --replication`` its table of each replica of the metadata log (``--human-readable``:
times as "N ms ago").  Both from DescribeQuorum, as Kafka's tool; ``--bootstrap-controller`` is accepted as
another name for ``--bootstrap-server`` (a minikafka broker answers for its controller).
"""

from __future__ import annotations

import argparse
import base64
import uuid
from typing import Any

from ..common.clock import SYSTEM_CLOCK, Clock
from .admin import AdminClient
from .common import ToolError, command_security, set_main


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("metadata-quorum", help="describe the KRaft metadata quorum (kafka-metadata-quorum.sh)")
    connection = p.add_mutually_exclusive_group(required=True)
    connection.add_argument("--bootstrap-server", metavar="HOST:PORT", help="the broker(s) to connect to")
    connection.add_argument("--bootstrap-controller", metavar="HOST:PORT",
                            help="the controller(s) to connect to (here: any broker)")
    p.add_argument("--command-config", metavar="FILE", default=None,
                   help="a properties file for the admin client (security settings)")
    commands = p.add_subparsers(dest="command", required=True)
    describe = commands.add_parser("describe", help="describe the metadata quorum")
    describe.add_argument("--status", action="store_true", help="a short summary of the quorum status")
    describe.add_argument("--replication", action="store_true", help="the replication status of each replica")
    describe.add_argument("--human-readable", action="store_true", help="--replication: times as 'N ms ago'")
    set_main(p, main)


def uuid_text(value: uuid.UUID) -> str:
    """A ``Uuid`` as Kafka prints it (URL-safe base64 without padding)."""
    return base64.urlsafe_b64encode(value.bytes).rstrip(b"=").decode()


def _pretty_table(headers: list[str], rows: list[list[str]]) -> None:
    """Kafka's ``ToolsUtils.prettyPrintTable``: each value padded to its column's width, then a tab."""
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]
    for row in [headers, *rows]:
        print("".join(v.ljust(w) + "\t" for v, w in zip(row, widths)))


def _replica(state: Any, endpoints: list[str]) -> str:
    directory_id = state.replica_directory_id
    directory = "null" if directory_id == uuid.UUID(int=0) else f'"{uuid_text(directory_id)}"'
    text = f'{{"id": {state.replica_id}, "directoryId": {directory}'
    if endpoints:
        text += ", \"endpoints\": [" + ", ".join(f'"{e}"' for e in endpoints) + "]"
    return text + "}"


async def main(args: argparse.Namespace, clock: Clock = SYSTEM_CLOCK) -> int:
    if args.status == args.replication:
        raise ToolError("One of --status or --replication must be specified with describe sub-command"
                        if not args.status else
                        "Only one of --status or --replication should be specified with describe sub-command")
    if args.status and args.human_readable:
        raise ToolError("The option --human-readable is only supported along with --replication")
    bootstrap = args.bootstrap_server or args.bootstrap_controller
    async with AdminClient(bootstrap, client_id="minikafka-metadata-quorum",
                           security=command_security(args.command_config)) as admin:
        resp = await admin.describe_quorum()
        cluster_id = (await admin.metadata([])).cluster_id
    partition = resp.topics[0].partitions[0]
    voters, observers = list(partition.current_voters), list(partition.observers)
    leader = next((v for v in voters if v.replica_id == partition.leader_id), None)
    if leader is None:
        raise ToolError(f"the quorum's leader {partition.leader_id} is not among its voters")
    if args.replication:
        now = clock.time_ms()

        def when(ts: int) -> str:
            return "-1" if ts < 0 else f"{max(now - ts, 0)} ms ago" if args.human_readable else str(ts)

        rows = [[str(r.replica_id), uuid_text(r.replica_directory_id), str(r.log_end_offset),
                 str(leader.log_end_offset - r.log_end_offset), when(r.last_fetch_timestamp),
                 when(r.last_caught_up_timestamp), status]
                for status, replicas in (("Leader", [leader]),
                                         ("Follower", [v for v in voters if v is not leader]),
                                         ("Observer", observers))
                for r in replicas]
        _pretty_table(["NodeId", "DirectoryId", "LogEndOffset", "Lag", "LastFetchTimestamp", "LastCaughtUpTimestamp",
                       "Status"], rows)
        return 0
    lagging = min(voters, key=lambda v: v.log_end_offset)
    if lagging is leader:
        lag_time = 0
    elif leader.last_caught_up_timestamp >= 0 and lagging.last_caught_up_timestamp >= 0:
        lag_time = leader.last_caught_up_timestamp - lagging.last_caught_up_timestamp
    else:
        lag_time = -1
    nodes = {n.node_id: [f"{lst.name}://{'[' + lst.host + ']' if ':' in lst.host else lst.host}:{lst.port}"
                         for lst in n.listeners] for n in getattr(resp, "nodes", None) or []}
    print(f"ClusterId:              {cluster_id}\n"
          f"LeaderId:               {partition.leader_id}\n"
          f"LeaderEpoch:            {partition.leader_epoch}\n"
          f"HighWatermark:          {partition.high_watermark}\n"
          f"MaxFollowerLag:         {leader.log_end_offset - lagging.log_end_offset}\n"
          f"MaxFollowerLagTimeMs:   {lag_time}\n"
          f"CurrentVoters:          [{', '.join(_replica(v, nodes.get(v.replica_id, [])) for v in voters)}]\n"
          f"CurrentObservers:       [{', '.join(_replica(o, nodes.get(o.replica_id, [])) for o in observers)}]")
    return 0
