"""``minikafka configs``: describe and alter topic and broker configs (``kafka-configs.sh``).

Through DescribeConfigs and IncrementalAlterConfigs, so for instance the replication throttles::

    minikafka configs --bootstrap-server H:P --alter --entity-type brokers --entity-default \\
        --add-config leader.replication.throttled.rate=1048576,follower.replication.throttled.rate=1048576
    minikafka configs --bootstrap-server H:P --alter --entity-type topics --entity-name t \\
        --add-config 'leader.replication.throttled.replicas=[0:1,1:2],follower.replication.throttled.replicas=*'

A value holding commas goes in square brackets, as with Kafka's tool.
"""

from __future__ import annotations

import argparse
from typing import Any

from .admin import OP_DELETE, OP_SET, RESOURCE_BROKER, RESOURCE_TOPIC, AdminClient
from .common import ToolError, add_bootstrap, set_main, split_pair

CONFIG_SOURCES = {0: "UNKNOWN", 1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG",
                  3: "DYNAMIC_DEFAULT_BROKER_CONFIG", 4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG",
                  6: "DYNAMIC_BROKER_LOGGER_CONFIG", 7: "CLIENT_METRICS_CONFIG", 8: "GROUP_CONFIG"}
ENTITY_TYPES = {"topics": RESOURCE_TOPIC, "brokers": RESOURCE_BROKER}


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("configs", help="describe or alter topic and broker configs (kafka-configs.sh)")
    add_bootstrap(p)
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--describe", action="store_true", help="show the configs")
    action.add_argument("--alter", action="store_true", help="--add-config and/or --delete-config")
    p.add_argument("--entity-type", choices=sorted(ENTITY_TYPES), default=None, help="topics or brokers")
    p.add_argument("--entity-name", default=None, help="a topic name or a broker id (none: every one)")
    p.add_argument("--entity-default", action="store_true", help="the cluster-wide broker defaults")
    p.add_argument("--topic", default=None, help="shorthand for --entity-type topics --entity-name TOPIC")
    p.add_argument("--broker", default=None, metavar="ID",
                   help="shorthand for --entity-type brokers --entity-name ID")
    p.add_argument("--broker-defaults", action="store_true",
                   help="shorthand for --entity-type brokers --entity-default")
    p.add_argument("--add-config", action="append", default=[], metavar="K=V[,K=[V1,V2]]",
                   help="configs to set (repeatable; a value with commas in square brackets)")
    p.add_argument("--delete-config", action="append", default=[], metavar="K[,K]",
                   help="configs to remove (repeatable)")
    p.add_argument("--all", action="store_true", help="--describe: every config, not only the dynamic ones")
    set_main(p, main)


def split_top_level(text: str) -> list[str]:
    """``a=1,b=[x,y],c`` -> ``["a=1", "b=[x,y]", "c"]``: commas inside square brackets do not split."""
    items: list[str] = []
    current: list[str] = []
    depth = 0
    for ch in text:
        if ch == "," and depth == 0:
            items.append("".join(current))
            current = []
            continue
        depth += {"[": 1, "]": -1}.get(ch, 0)
        current.append(ch)
    items.append("".join(current))
    return [i.strip() for i in items if i.strip()]


def parse_add_config(items: list[str]) -> dict[str, str]:
    """``--add-config`` values as {name: value}, square brackets around a value removed."""
    out = {}
    for item in (i for text in items for i in split_top_level(text)):
        key, value = split_pair(item, "--add-config")
        value = value.strip()
        if value.startswith("[") and value.endswith("]"):
            value = value[1:-1]
        out[key] = value
    return out


def entity(args: argparse.Namespace) -> tuple[int, str | None]:
    """(resource type, name: None for every one, "" for the broker default) from the options."""
    if args.topic is not None:
        return RESOURCE_TOPIC, args.topic
    if args.broker is not None:
        return RESOURCE_BROKER, args.broker
    if args.broker_defaults:
        return RESOURCE_BROKER, ""
    if args.entity_type is None:
        raise ToolError("--entity-type (topics or brokers) is required")
    rtype = ENTITY_TYPES[args.entity_type]
    if args.entity_default:
        if rtype != RESOURCE_BROKER:
            raise ToolError("--entity-default applies to --entity-type brokers")
        return rtype, ""
    if rtype == RESOURCE_BROKER and args.entity_name is not None and not args.entity_name.isdigit():
        raise ToolError(f"a broker is named by its id, not {args.entity_name!r}")
    return rtype, args.entity_name


def _title(rtype: int, name: str, everything: bool) -> str:
    kind = "All" if everything else "Dynamic"
    if rtype == RESOURCE_TOPIC:
        return f"{kind} configs for topic {name} are:"
    if name == "":
        return ("All" if everything else "Default") + " configs for brokers in the cluster are:"
    return f"{kind} configs for broker {name} are:"


def _line(c: Any) -> str:
    synonyms = ", ".join(f"{CONFIG_SOURCES.get(s.source, s.source)}:{s.name}={s.value}" for s in c.synonyms or [])
    value = "null" if c.value is None else c.value
    return f"  {c.name}={value} sensitive={str(bool(c.is_sensitive)).lower()} synonyms={{{synonyms}}}"


async def describe(admin: AdminClient, rtype: int, name: str | None, args: argparse.Namespace) -> None:
    if name is None:
        meta = await admin.metadata(None if rtype == RESOURCE_TOPIC else [])
        names = sorted(meta.topics) if rtype == RESOURCE_TOPIC else [str(b) for b in sorted(meta.brokers)]
    else:
        names = [name]
    wanted = 1 if rtype == RESOURCE_TOPIC else 3 if name == "" else 2  # the dynamic source of the entity
    for n in names:
        configs = await admin.describe_configs(rtype, n)
        print(_title(rtype, n, args.all))
        for c in sorted(configs, key=lambda c: c.name):
            if args.all or c.config_source == wanted:
                print(_line(c))


async def alter(admin: AdminClient, rtype: int, name: str | None, args: argparse.Namespace) -> None:
    if name is None:
        raise ToolError("--alter needs --entity-name (or --entity-default for brokers)")
    added = parse_add_config(args.add_config)
    deleted = [k for text in args.delete_config for k in split_top_level(text)]
    if not added and not deleted:
        raise ToolError("--alter needs --add-config or --delete-config")
    both = sorted(set(added) & set(deleted))
    if both:
        raise ToolError(f"configs both added and deleted: {', '.join(both)}")
    ops: list[tuple[str, int, str | None]] = [(k, OP_SET, v) for k, v in added.items()]
    ops += [(k, OP_DELETE, None) for k in deleted]
    await admin.alter_configs(rtype, name, ops)
    if rtype == RESOURCE_TOPIC:
        print(f"Completed updating config for topic {name}.")
    elif name == "":
        print("Completed updating default config for brokers in the cluster.")
    else:
        print(f"Completed updating config for broker {name}.")


async def main(args: argparse.Namespace) -> int:
    rtype, name = entity(args)
    async with AdminClient(args.bootstrap_server, client_id="minikafka-configs") as admin:
        if args.describe:
            await describe(admin, rtype, name, args)
        else:
            await alter(admin, rtype, name, args)
    return 0
