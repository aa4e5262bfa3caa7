"""``minikafka client-metrics``: KIP-714 client metrics subscriptions (``kafka-client-metrics.sh``).

A subscription is a CLIENT_METRICS config resource; the tool sets it with IncrementalAlterConfigs, shows it
with DescribeConfigs and lists subscriptions with ListConfigResources, as Kafka's ``ClientMetricsCommand``::

    minikafka client-metrics --bootstrap-server H:P --alter --name producers \\
        --metrics org.apache.kafka.producer. --interval 1000 --match client_id=app-.*
    minikafka client-metrics --bootstrap-server H:P --describe [--name producers]
    minikafka client-metrics --bootstrap-server H:P --list
    minikafka client-metrics --bootstrap-server H:P --delete --name producers

``--metrics`` and ``--match`` take comma-separated values (repeatable); an empty value removes that config;
``--generate-name`` names a new subscription with a random id.  Output is Kafka's tool's.
"""

from __future__ import annotations

import argparse
import base64
import uuid

from .admin import OP_DELETE, OP_SET, AdminClient
from .common import ToolError, add_bootstrap, add_command_config, command_security, set_main

RESOURCE_CLIENT_METRICS = 16
MATCH_SELECTORS = ("client_id", "client_instance_id", "client_software_name", "client_software_version",
                   "client_source_address", "client_source_port")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("client-metrics", help="manage KIP-714 client metrics subscriptions (kafka-client-metrics.sh)",
                       description="This tool helps to manipulate and describe client metrics configurations.")
    add_bootstrap(p)
    add_command_config(p)
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--alter", action="store_true", help="Alter the configuration for the client metrics resource.")
    action.add_argument("--delete", action="store_true",
                        help="Delete the configuration for the client metrics resource.")
    action.add_argument("--describe", action="store_true",
                        help="List configurations for the client metrics resource.")
    action.add_argument("--list", action="store_true", help="List the client metrics resources.")
    p.add_argument("--name", default=None, help="Name of client metrics configuration resource.")
    p.add_argument("--generate-name", action="store_true", help="Generate a UUID to use as the name.")
    p.add_argument("--interval", type=int, default=None, metavar="MS",
                   help="The metrics push interval in milliseconds.")
    p.add_argument("--metrics", action="append", default=None, metavar="m1,m2",
                   help="Telemetry metric name prefixes 'm1,m2' (* for all).")
    p.add_argument("--match", action="append", default=None, metavar="k1=v1,k2=v2",
                   help="Matching selector 'k1=v1,k2=v2' (regexes); selectors: " + ", ".join(MATCH_SELECTORS))
    set_main(p, main)


def _values(items: list[str] | None) -> str | None:
    """Repeated comma-separated option values joined as one list config (None: not given)."""
    if items is None:
        return None
    return ",".join(v.strip() for item in items for v in item.split(",") if v.strip())


def check_args(args: argparse.Namespace) -> None:
    """Kafka's ``ClientMetricsCommandOptions.checkArgs``."""
    changes = args.generate_name or args.interval is not None or args.metrics is not None or args.match is not None
    if (args.delete or args.describe) and changes:
        raise ToolError("--interval, --metrics, --match and --generate-name apply to --alter only")
    if args.list and (changes or args.name is not None):
        raise ToolError("--list takes no --name, --interval, --metrics, --match nor --generate-name")
    if args.alter and (args.name is not None) == args.generate_name:
        raise ToolError("One of --name or --generate-name must be specified with --alter.")
    if args.delete and args.name is None:
        raise ToolError("A client metrics resource name must be specified with --delete.")


def kafka_uuid() -> str:
    """A random Kafka ``Uuid`` as its ``toString`` prints it."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


async def alter(admin: AdminClient, args: argparse.Namespace) -> None:
    name = kafka_uuid() if args.generate_name else args.name
    configs: dict[str, str] = {}
    if args.interval is not None:
        configs["interval.ms"] = str(args.interval)
    for key, value in (("metrics", _values(args.metrics)), ("match", _values(args.match))):
        if value is not None:
            configs[key] = value
    ops: list[tuple[str, int, str | None]] = [(k, OP_DELETE if v == "" else OP_SET, None if v == "" else v)
                                              for k, v in configs.items()]
    await admin.alter_configs(RESOURCE_CLIENT_METRICS, name, ops)
    print(f"Altered client metrics config for {name}.")


async def delete(admin: AdminClient, name: str) -> None:
    existing = await admin.describe_configs(RESOURCE_CLIENT_METRICS, name)
    await admin.alter_configs(RESOURCE_CLIENT_METRICS, name, [(c.name, OP_DELETE, None) for c in existing])
    print(f"Deleted client metrics config for {name}.")


async def names(admin: AdminClient) -> list[str]:
    return [n for t, n in await admin.list_config_resources([RESOURCE_CLIENT_METRICS]) if t == RESOURCE_CLIENT_METRICS]


async def describe(admin: AdminClient, name: str | None) -> None:
    for entity in [name] if name is not None else await names(admin):
        print(f"Client metrics configs for {entity} are:")
        for c in await admin.describe_configs(RESOURCE_CLIENT_METRICS, entity):
            print(f"  {c.name}={c.value}")


async def main(args: argparse.Namespace) -> int:
    check_args(args)
    async with AdminClient(args.bootstrap_server, client_id="minikafka-client-metrics",
                           security=command_security(args.command_config)) as admin:
        if args.alter:
            await alter(admin, args)
        elif args.delete:
            await delete(admin, args.name)
        elif args.describe:
            await describe(admin, args.name)
        else:
            print("\n".join(await names(admin)))
    return 0
