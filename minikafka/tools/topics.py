"""``minikafka topics``: create, list, describe, delete and add partitions to topics (``kafka-topics.sh``).

Same options and output as Kafka's tool; ``--topic`` is a regular expression for ``--list``,
``--describe``, ``--delete`` and ``--alter``, as there.  ``--describe`` reads partitions with
DescribeTopicPartitions (KIP-966, ``--partition-size-limit-per-response`` partitions a response) where the
broker offers it, with Metadata otherwise, as Kafka's admin client does; the partition lines end with the
eligible leader replicas (``Elr``, ``LastKnownElr``; ``N/A`` when Metadata described them).
"""

from __future__ import annotations

import argparse
import base64
import re
import uuid

from ..common import PartitionMetadata, TopicMetadata
from ..protocol.errors import ErrorCode
from .admin import RESOURCE_TOPIC, AdminClient
from .common import ToolError, add_bootstrap, check, parse_properties, set_main

SOURCE_DYNAMIC_TOPIC = 1


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("topics", help="create, list, describe, delete or alter topics (kafka-topics.sh)")
    add_bootstrap(p)
    action = p.add_mutually_exclusive_group(required=True)
    for name, text in (("create", "create a topic"), ("list", "list topic names"),
                       ("describe", "partitions, leaders, replicas, ISR and configs"),
                       ("delete", "delete topics"), ("alter", "add partitions (--partitions)")):
        action.add_argument(f"--{name}", action="store_true", help=text)
    p.add_argument("--topic", help="topic name (a regular expression except for --create)")
    p.add_argument("--partitions", type=int, default=None, help="partition count (--create: default the broker's)")
    p.add_argument("--replication-factor", type=int, default=None,
                   help="replicas per partition (default the broker's)")
    p.add_argument("--replica-assignment", default=None, metavar="B:B,B:B",
                   help="brokers of each partition, partitions separated by commas: 0:1,1:2")
    p.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                   help="a topic config at creation (repeatable)")
    p.add_argument("--if-not-exists", action="store_true", help="--create: no error if the topic exists")
    p.add_argument("--if-exists", action="store_true", help="--alter/--delete: no error if no topic matches")
    p.add_argument("--exclude-internal", action="store_true", help="leave internal topics out of --list/--describe")
    p.add_argument("--under-replicated-partitions", action="store_true",
                   help="--describe: only partitions whose ISR is smaller than their replicas")
    p.add_argument("--unavailable-partitions", action="store_true",
                   help="--describe: only partitions without a leader")
    p.add_argument("--partition-size-limit-per-response", type=int, default=None, metavar="N",
                   help="--describe: the most partitions one DescribeTopicPartitions response holds (default 2000)")
    set_main(p, main)


async def main(args: argparse.Namespace) -> int:
    async with AdminClient(args.bootstrap_server, client_id="minikafka-topics") as admin:
        if args.create:
            await create(admin, args)
        elif args.list:
            for name in await matching(admin, args):
                print(name)
        elif args.describe:
            await describe(admin, args)
        elif args.delete:
            await delete(admin, args)
        else:
            await alter(admin, args)
    return 0


def _require_topic(args: argparse.Namespace) -> str:
    if not args.topic:
        raise ToolError("--topic is required here")
    return args.topic


async def matching(admin: AdminClient, args: argparse.Namespace) -> list[str]:
    """Names of the topics ``--topic`` matches (all without it), sorted."""
    meta = await admin.metadata()
    try:
        pattern = re.compile(args.topic) if args.topic else None
    except re.error as exc:
        raise ToolError(f"--topic {args.topic!r} is not a regular expression: {exc}") from None
    return sorted(name for name, info in meta.topics.items()
                  if (pattern is None or pattern.fullmatch(name) or name == args.topic)
                  and not (args.exclude_internal and info.is_internal))


def _assignments(spec: str) -> list[dict]:
    try:
        return [{"partition_index": i, "broker_ids": [int(b) for b in part.split(":")]}
                for i, part in enumerate(spec.split(","))]
    except ValueError:
        raise ToolError(f"--replica-assignment expects broker ids like 0:1,1:2, got {spec!r}") from None


async def create(admin: AdminClient, args: argparse.Namespace) -> None:
    name = _require_topic(args)
    topic = {"name": name, "num_partitions": -1 if args.partitions is None else args.partitions,
             "replication_factor": -1 if args.replication_factor is None else args.replication_factor,
             "assignments": [],
             "configs": [{"name": k, "value": v} for k, v in parse_properties(args.config, "--config").items()]}
    if args.replica_assignment:
        if args.partitions is not None or args.replication_factor is not None:
            raise ToolError("--replica-assignment replaces --partitions and --replication-factor")
        topic["assignments"] = _assignments(args.replica_assignment)
    code, message = (await admin.create_topics([topic]))[name]
    if code == ErrorCode.TOPIC_ALREADY_EXISTS and args.if_not_exists:
        return
    check(code, f"cannot create topic {name!r}", message)
    print(f"Created topic {name}.")


def topic_id_text(topic_id: uuid.UUID | None) -> str:
    """A topic id as Kafka prints a ``Uuid`` (URL-safe base64 without padding)."""
    if topic_id is None:
        return "-"
    return base64.urlsafe_b64encode(topic_id.bytes).rstrip(b"=").decode()


async def _overrides(admin: AdminClient, name: str) -> str:
    configs = await admin.describe_configs(RESOURCE_TOPIC, name)
    return ",".join(f"{c.name}={c.value}" for c in configs
                    if (c.config_source == SOURCE_DYNAMIC_TOPIC if c.config_source >= 0 else not c.is_default))


def _maybe_list(nodes: list[int] | None) -> list[int] | None:
    return None if nodes is None else list(nodes)


def _ids(nodes: list[int] | None) -> str:
    return "N/A" if nodes is None else ",".join(map(str, nodes))


def _describe_partitions(info: TopicMetadata, args: argparse.Namespace,
                         elr: dict[int, tuple[list[int] | None, list[int] | None]] | None = None) -> list[str]:
    """The partition lines; ``elr``: each partition's eligible leader replicas and last known ELR, as
    DescribeTopicPartitions gave them (None: described by Metadata, which has none)."""
    lines = []
    for p in info.partitions:
        if args.under_replicated_partitions and len(p.isr) >= len(p.replicas):
            continue
        if args.unavailable_partitions and p.leader >= 0:
            continue
        leader = str(p.leader) if p.leader >= 0 else "none"
        eligible, last_known = elr.get(p.partition, (None, None)) if elr is not None else (None, None)
        lines.append(f"\tTopic: {info.name}\tPartition: {p.partition}\tLeader: {leader}\t"
                     f"Replicas: {','.join(map(str, p.replicas))}\tIsr: {','.join(map(str, p.isr))}\t"
                     f"Elr: {_ids(eligible)}\tLastKnownElr: {_ids(last_known)}")
    return lines


async def _described(admin: AdminClient, names: list[str], args: argparse.Namespace
                     ) -> dict[str, tuple[TopicMetadata, dict[int, tuple[list[int] | None, list[int] | None]] | None]]:
    """Each topic's partitions, through DescribeTopicPartitions when the broker offers it (with each partition's
    ELR), else from the Metadata already fetched."""
    limit = args.partition_size_limit_per_response
    found = await admin.describe_topic_partitions(names, 2000 if limit is None else limit) if names else None
    if found is None:
        meta = admin.client.metadata
        return {name: (meta.topics[name], None) for name in names}
    out: dict[str, tuple[TopicMetadata, dict[int, tuple[list[int] | None, list[int] | None]] | None]] = {}
    for name in names:
        if name not in found:
            raise ToolError(f"topic {name!r} was not described")
        code, topic, partitions = found[name]
        check(code, f"topic {name!r}")
        info = TopicMetadata(name, topic.topic_id, sorted(
            (PartitionMetadata(p.partition_index, p.leader_id, p.leader_epoch, list(p.replica_nodes),
                               list(p.isr_nodes), p.error_code) for p in partitions), key=lambda p: p.partition))
        out[name] = (info, {p.partition_index: (_maybe_list(p.eligible_leader_replicas), _maybe_list(p.last_known_elr))
                            for p in partitions})
    return out


async def describe(admin: AdminClient, args: argparse.Namespace) -> None:
    names = await matching(admin, args)
    if args.topic and not names and not args.if_exists:
        raise ToolError(f"topic {args.topic!r} does not exist")
    only_partitions = args.under_replicated_partitions or args.unavailable_partitions
    described = await _described(admin, names, args)
    for name in names:
        info, elr = described[name]
        if info.error:
            check(info.error, f"topic {name!r}")
        lines = _describe_partitions(info, args, elr)
        if not only_partitions:
            print(f"Topic: {name}\tTopicId: {topic_id_text(info.topic_id)}\tPartitionCount: {info.num_partitions}\t"
                  f"ReplicationFactor: {info.replication_factor}\tConfigs: {await _overrides(admin, name)}")
        for line in lines:
            print(line)


async def _targets(admin: AdminClient, args: argparse.Namespace) -> list[str]:
    _require_topic(args)
    names = await matching(admin, args)
    if not names and not args.if_exists:
        raise ToolError(f"topic {args.topic!r} does not exist")
    return names


async def delete(admin: AdminClient, args: argparse.Namespace) -> None:
    names = await _targets(admin, args)
    if not names:
        return
    for name, (code, message) in sorted((await admin.delete_topics(names)).items()):
        check(code, f"cannot delete topic {name!r}", message)


async def alter(admin: AdminClient, args: argparse.Namespace) -> None:
    if args.partitions is None:
        raise ToolError("--alter needs --partitions (topic configs change with `minikafka configs`)")
    names = await _targets(admin, args)
    if not names:
        return
    for name, (code, message) in sorted((await admin.create_partitions({n: args.partitions for n in names})).items()):
        check(code, f"cannot add partitions to {name!r}", message)
    print("Adding partitions succeeded!")
