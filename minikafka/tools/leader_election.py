"""``minikafka leader-election``: preferred or unclean leader elections (``kafka-leader-election.sh``).

Same options and output as Kafka's ``LeaderElectionCommand``: ``--election-type PREFERRED|UNCLEAN`` with one
partition (``--topic`` and ``--partition``), the partitions of a JSON file (``--path-to-json-file``,
``{"partitions": [{"topic": "foo", "partition": 1}, ...]}``) or every partition (``--all-topic-partitions``).
Partitions that already have the leader the election would give are "Valid replica already elected"; any
partition whose election failed makes the exit status 1.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..common import TopicPartition
from .admin import AdminClient
from .common import ToolError, add_bootstrap, command_security, error_name, set_main

ELECTION_TYPES = {"PREFERRED": 0, "UNCLEAN": 1}
ELECTION_NOT_NEEDED = 84


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("leader-election", help="preferred or unclean leader elections (kafka-leader-election.sh)")
    add_bootstrap(p)
    p.add_argument("--admin.config", dest="admin_config", metavar="FILE", default=None,
                   help="a properties file for the admin client (security settings)")
    p.add_argument("--election-type", required=True, type=str.upper, choices=sorted(ELECTION_TYPES),
                   help="PREFERRED: the first assigned replica leads where it is in sync; UNCLEAN: a live replica "
                        "leads a partition without a leader even out of the ISR")
    scope = p.add_mutually_exclusive_group(required=True)
    scope.add_argument("--topic", help="the topic of one partition to elect a leader for (with --partition)")
    scope.add_argument("--path-to-json-file", metavar="FILE",
                       help='the partitions: {"partitions": [{"topic": "foo", "partition": 1}, ...]}')
    scope.add_argument("--all-topic-partitions", action="store_true", help="every partition of every topic")
    p.add_argument("--partition", type=int, default=None, help="the partition of --topic")
    set_main(p, main)


def parse_election_file(path: str) -> list[TopicPartition]:
    """The partitions of a replica election JSON file (Kafka's ``parseReplicaElectionData``)."""
    try:
        data = json.loads(Path(path).read_text())
    except OSError as exc:
        raise ToolError(f"cannot read {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise ToolError(f"{path} is not JSON: {exc}") from None
    if not data:
        raise ToolError("Replica election data is empty")
    if not isinstance(data, dict) or "partitions" not in data:
        raise ToolError('Replica election data is missing "partitions" field')
    try:
        partitions = [TopicPartition(str(p["topic"]), int(p["partition"])) for p in data["partitions"]]
    except (KeyError, TypeError, ValueError):
        raise ToolError('each of "partitions" needs a "topic" and a "partition"') from None
    duplicates = sorted({tp for tp in partitions if partitions.count(tp) > 1})
    if duplicates:
        raise ToolError("Replica election data contains duplicate partitions: "
                        + ",".join(f"{tp.topic}-{tp.partition}" for tp in duplicates))
    return sorted(set(partitions))


def _names(partitions: list[TopicPartition]) -> str:
    return ", ".join(f"{tp.topic}-{tp.partition}" for tp in partitions)


async def main(args: argparse.Namespace) -> int:
    election = args.election_type
    partitions: list[TopicPartition] | None = None
    if args.topic is not None:
        if args.partition is None:
            raise ToolError("--partition is required with --topic")
        partitions = [TopicPartition(args.topic, args.partition)]
    elif args.partition is not None:
        raise ToolError("--partition goes with --topic")
    elif args.path_to_json_file is not None:
        partitions = parse_election_file(args.path_to_json_file)
    async with AdminClient(args.bootstrap_server, client_id="minikafka-leader-election",
                           security=command_security(args.admin_config)) as admin:
        results = await admin.elect_leaders(ELECTION_TYPES[election], partitions)
    succeeded = sorted(tp for tp, (code, _) in results.items() if code == 0)
    noop = sorted(tp for tp, (code, _) in results.items() if code == ELECTION_NOT_NEEDED)
    failed = sorted((tp, code, message) for tp, (code, message) in results.items()
                    if code not in (0, ELECTION_NOT_NEEDED))
    if succeeded:
        print(f"Successfully completed leader election ({election}) for partitions {_names(succeeded)}")
    if noop:
        print(f"Valid replica already elected for partitions {_names(noop)}")
    for tp, code, message in failed:
        print(f"Error completing leader election ({election}) for partition: {tp.topic}-{tp.partition}: "
              f"{error_name(code)}" + (f": {message}" if message else ""))
    if failed:
        raise ToolError(f"{len(failed)} replica(s) could not be elected")
    return 0
