"""``minikafka quotas describe|alter``: client quotas through DescribeClientQuotas/AlterClientQuotas.

Works against any broker that supports those APIs (Kafka 2.6+ or minikafka).
"""

from __future__ import annotations

import argparse
import sys

import trio

from ..protocol.api import ApiKey
from ..protocol.errors import ErrorCode
from .connection import KafkaConnection


def _entity(spec: str) -> list[dict]:
    out = []
    for item in spec.split(","):
        key, sep, value = item.strip().partition("=")
        if not sep or key not in ("user", "client-id"):
            raise SystemExit(f"bad entity {spec!r}: expected user=U and/or client-id=C")
        out.append({"entity_type": key, "entity_name": None if value in ("<default>", "") else value})
    return out


def _describe_entity(entity) -> str:
    return ",".join(f"{e.entity_type}={e.entity_name if e.entity_name is not None else '<default>'}"
                    for e in entity)


async def describe(bootstrap: str, entity: str | None) -> list[tuple[str, dict[str, float]]]:
    host, _, port = bootstrap.rpartition(":")
    components = []
    for e in _entity(entity) if entity else []:
        match_type = 1 if e["entity_name"] is None else 0
        components.append({"entity_type": e["entity_type"], "match_type": match_type, "match": e["entity_name"]})
    async with await KafkaConnection.connect(host, int(port), client_id="minikafka-quotas") as conn:
        resp = await conn.request(ApiKey.DESCRIBE_CLIENT_QUOTAS, 1, {"components": components, "strict": False})
    if resp.error_code:
        raise SystemExit(f"DescribeClientQuotas failed: {ErrorCode(resp.error_code).name}: {resp.error_message}")
    # e["values"]: `values` is also a dict method on the parsed Container.
    return [(_describe_entity(e.entity), {v.key: v.value for v in e["values"]}) for e in resp.entries or []]


async def alter(bootstrap: str, entity: str, add: list[str], delete: list[str], validate_only: bool) -> None:
    host, _, port = bootstrap.rpartition(":")
    ops = []
    for item in add:
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"--add expects KEY=VALUE, got {item!r}")
        ops.append({"key": key, "value": float(value), "remove": False})
    ops += [{"key": key, "value": 0.0, "remove": True} for key in delete]
    async with await KafkaConnection.connect(host, int(port), client_id="minikafka-quotas") as conn:
        resp = await conn.request(ApiKey.ALTER_CLIENT_QUOTAS, 1, {
            "entries": [{"entity": _entity(entity), "ops": ops}], "validate_only": validate_only})
    for e in resp.entries:
        if e.error_code:
            raise SystemExit(f"AlterClientQuotas failed: {ErrorCode(e.error_code).name}: {e.error_message}")


def run_quotas_command(args: argparse.Namespace) -> int:
    if args.quota_command == "describe":
        rows = trio.run(describe, args.bootstrap, args.entity)
        if not rows:
            print("no client quotas")
        for entity, values in rows:
            print(f"{entity}: " + ", ".join(f"{k}={v:.15g}" for k, v in sorted(values.items())))
        return 0
    trio.run(alter, args.bootstrap, args.entity, args.add, args.delete, args.validate_only)
    print(("validated" if args.validate_only else "altered") + f" quotas for {args.entity}", file=sys.stderr)
    return 0
