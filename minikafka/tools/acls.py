"""``minikafka acls``: add, remove and list ACLs (``kafka-acls.sh``, Kafka's ``AclCommand``).

Same options, checks and output as Kafka's tool, through CreateAcls / DescribeAcls / DeleteAcls
(:class:`~minikafka.tools.admin.AdminClient`):

* resources: ``--topic``, ``--group``, ``--transactional-id``, ``--delegation-token``, ``--user-principal``
  (each repeatable) and ``--cluster``, named with ``--resource-pattern-type`` (LITERAL by default; PREFIXED;
  ANY and MATCH only to list or remove);
* who: ``--allow-principal`` / ``--deny-principal`` (``Type:name``, repeatable) from ``--allow-host`` /
  ``--deny-host`` (default ``*``); what: ``--operation`` (Kafka's names: Read, Write, Create, Delete, Alter,
  Describe, ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite, CreateTokens, DescribeTokens,
  All; repeatable; default All);
* ``--producer`` (WRITE, DESCRIBE, CREATE on the topics; WRITE, DESCRIBE on the transactional ids;
  IDEMPOTENT_WRITE on the cluster with ``--idempotent``) and ``--consumer`` (READ, DESCRIBE on the topics,
  READ on the groups), as Kafka expands them;
* ``--remove`` asks before deleting unless ``--force``; without principals it removes every ACL of the
  resource; ``--list`` with ``--principal`` shows only that principal's ACLs.

``--command-config`` names the admin client's properties file (``security.protocol``, ``sasl.*``, ``ssl.*``),
so the tool can log in as a super user on a secured listener.

Deliberate differences: a usage error prints one line (``minikafka: error: ...``, status 1) rather than
the usage text; an unknown ``--operation`` is refused by name (Kafka reports it as unsupported by the
resource type); ``--operation`` also accepts the upper-case enum names with underscores (CLUSTER_ACTION);
listings are sorted by resource (Kafka prints them in hash order).  No ``--bootstrap-controller``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from typing import Any

from ..common.acl import (CLUSTER_NAME, SUPPORTED_OPERATIONS, WILDCARD_HOST, AclOperation, AclPermissionType,
                          PatternType, ResourceType, pascal_name)
from .admin import AdminClient
from .common import ToolError, add_bootstrap, add_command_config, command_security, error_name, set_main

Pattern = tuple[ResourceType, str | None, PatternType]  # a ResourcePattern or ResourcePatternFilter
Entry = tuple[str, str, AclOperation, AclPermissionType]  # an AccessControlEntry

OPERATIONS = tuple(op for op in AclOperation if op not in (AclOperation.UNKNOWN, AclOperation.ANY))
PRODUCER_TOPIC_OPS = (AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.CREATE)
PRODUCER_TXN_OPS = (AclOperation.WRITE, AclOperation.DESCRIBE)
CONSUMER_TOPIC_OPS = (AclOperation.READ, AclOperation.DESCRIBE)
CLUSTER_FILTER: Pattern = (ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("acls", help="add, remove or list ACLs (kafka-acls.sh)")
    add_bootstrap(p)
    add_command_config(p)
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--add", action="store_true", help="add ACLs")
    action.add_argument("--remove", action="store_true", help="remove ACLs")
    action.add_argument("--list", action="store_true", help="list ACLs (of the given resources, else all)")
    res = p.add_argument_group("resources")
    res.add_argument("--topic", action="append", default=[], help="a topic ('*': all topics); repeatable")
    res.add_argument("--group", action="append", default=[], help="a consumer group ('*': all groups); repeatable")
    res.add_argument("--cluster", action="store_true", help="the cluster")
    res.add_argument("--transactional-id", action="append", default=[], help="a transactional id; repeatable")
    res.add_argument("--delegation-token", action="append", default=[], help="a delegation token id; repeatable")
    res.add_argument("--user-principal", action="append", default=[],
                     help="a user principal as the resource (CreateTokens, DescribeTokens); repeatable")
    res.add_argument("--resource-pattern-type", type=pattern_type, default=PatternType.LITERAL,
                     metavar="LITERAL|PREFIXED|ANY|MATCH",
                     help="how resource names match (default LITERAL; ANY and MATCH only for --list/--remove)")
    who = p.add_argument_group("ACLs")
    who.add_argument("--allow-principal", action="append", default=[], metavar="TYPE:NAME",
                     help="principal allowed (User:alice; User:* for everyone); repeatable")
    who.add_argument("--deny-principal", action="append", default=[], metavar="TYPE:NAME",
                     help="principal denied (deny wins over allow); repeatable")
    who.add_argument("--allow-host", action="append", default=[], help="host the allowed principals may use "
                                                                     "(default *); repeatable")
    who.add_argument("--deny-host", action="append", default=[], help="host the denied principals are denied "
                                                                    "from (default *); repeatable")
    who.add_argument("--operation", action="append", default=[],
                     help="operation allowed or denied (default All): "
                          + ", ".join(pascal_name(op) for op in OPERATIONS) + "; repeatable")
    who.add_argument("--principal", action="append", default=[], metavar="TYPE:NAME",
                     help="--list: only the ACLs of this principal; repeatable")
    who.add_argument("--producer", action="store_true",
                     help="producer ACLs: WRITE, DESCRIBE, CREATE on --topic, WRITE, DESCRIBE on --transactional-id")
    who.add_argument("--consumer", action="store_true",
                     help="consumer ACLs: READ, DESCRIBE on --topic, READ on --group")
    who.add_argument("--idempotent", action="store_true", help="with --producer: IDEMPOTENT_WRITE on the cluster")
    p.add_argument("--force", action="store_true", help="do not ask for confirmation")
    set_main(p, main)


def pattern_type(text: str) -> PatternType:
    """``--resource-pattern-type``: a PatternType name, any case (not UNKNOWN)."""
    try:
        value = PatternType[text.strip().upper()]
    except KeyError:
        value = PatternType.UNKNOWN
    if value == PatternType.UNKNOWN:
        raise argparse.ArgumentTypeError(f"Unknown resource-pattern-type: {text}")
    return value


def operation(text: str) -> AclOperation:
    """An ``--operation`` name as Kafka's ``SecurityUtils.operation`` reads it (Pascal case, or upper case;
    also with underscores)."""
    key = text.strip().upper().replace("_", "")
    for op in OPERATIONS:
        if op.name.replace("_", "") == key:
            return op
    raise ToolError(f"unknown operation {text!r} (valid: {', '.join(pascal_name(op) for op in OPERATIONS)})")


def parse_principal(text: str) -> str:
    """``Type:name`` (Kafka's ``SecurityUtils.parseKafkaPrincipal``)."""
    text = text.strip()
    kind, sep, _ = text.partition(":")
    if not sep or not kind:
        raise ToolError(f"expected a string in format principalType:principalName but got {text}")
    return text


def pattern_text(p: Pattern) -> str:
    """Kafka's ``ResourcePattern`` / ``ResourcePatternFilter`` ``toString``."""
    rt, name, pt = p
    return f"ResourcePattern(resourceType={rt.name}, name={'<any>' if name is None else name}, patternType={pt.name})"


def entry_text(e: Entry) -> str:
    """Kafka's ``AccessControlEntry`` ``toString``."""
    principal, host, op, perm = e
    return f"(principal={principal}, host={host}, operation={op.name}, permissionType={perm.name})"


def _entries_block(entries: Iterable[Entry]) -> str:
    return "\n".join("\t" + entry_text(e) for e in entries)


# -- checks (Kafka's AclCommandOptions.checkArgs) -----------------------------------------------------------
def check_args(args: argparse.Namespace) -> None:
    if args.list:
        for opt in ("producer", "consumer", "allow_host", "allow_principal", "deny_host", "deny_principal"):
            if getattr(args, opt):
                raise ToolError(f"Option \"--list\" can't be used with option \"--{opt.replace('_', '-')}\"")
    for role in ("producer", "consumer"):
        if getattr(args, role):
            for opt in ("operation", "deny_principal", "deny_host"):
                if getattr(args, opt):
                    raise ToolError(f"Option \"--{role}\" can't be used with option \"--{opt.replace('_', '-')}\"")
    if args.principal and not args.list:
        raise ToolError("The --principal option is only available if --list is set")
    if args.producer and not args.topic:
        raise ToolError("With --producer you must specify a --topic")
    if args.idempotent and not args.producer:
        raise ToolError("The --idempotent option is only available if --producer is set")
    if args.consumer and (not args.topic or not args.group
                          or (not args.producer and (args.cluster or args.transactional_id))):
        raise ToolError("With --consumer you must specify a --topic and a --group and no --cluster or "
                        "--transactional-id option should be specified.")


# -- what the options name ---------------------------------------------------------------------------------
def resource_filters(args: argparse.Namespace, required: bool = True) -> list[Pattern]:
    """The resources (patterns, or filters for --list/--remove) the options name, in option order."""
    pt = args.resource_pattern_type
    out: dict[Pattern, None] = {}
    for name in args.topic:
        out[(ResourceType.TOPIC, name.strip(), pt)] = None
    if pt == PatternType.LITERAL and (args.cluster or args.idempotent):
        out[CLUSTER_FILTER] = None
    for name in args.group:
        out[(ResourceType.GROUP, name.strip(), pt)] = None
    for name in args.transactional_id:
        out[(ResourceType.TRANSACTIONAL_ID, name, pt)] = None
    for name in args.delegation_token:
        out[(ResourceType.DELEGATION_TOKEN, name.strip(), pt)] = None
    for name in args.user_principal:
        out[(ResourceType.USER, name.strip(), pt)] = None
    if not out and required:
        raise ToolError("You must provide at least one resource: --topic <topic> or --cluster or --group <group> or "
                        "--delegation-token <Delegation Token ID>")
    return list(out)


def entries(args: argparse.Namespace, operations: Iterable[AclOperation]) -> list[Entry]:
    """Every (principal, host, operation, permission) the principal/host options give for ``operations``."""
    ops = list(dict.fromkeys(operations))
    out: dict[Entry, None] = {}
    for principals, hosts, perm in ((args.allow_principal, args.allow_host, AclPermissionType.ALLOW),
                                    (args.deny_principal, args.deny_host, AclPermissionType.DENY)):
        names = list(dict.fromkeys(parse_principal(p) for p in principals))
        if not names:
            continue
        for principal in names:
            for op in ops:
                for host in dict.fromkeys(h.strip() for h in hosts) if hosts else [WILDCARD_HOST]:
                    out[(principal, host, op, perm)] = None
    return list(out)


def filter_to_acls(args: argparse.Namespace) -> dict[Pattern, list[Entry]]:
    """Kafka's ``getResourceFilterToAcls``: each resource and the ACLs to add or remove on it."""
    out: dict[Pattern, list[Entry]] = {}
    filters = resource_filters(args)
    if not args.producer and not args.consumer:
        ops = [operation(o) for o in args.operation] or [AclOperation.ALL]
        acls = entries(args, ops)
        out.update({f: acls for f in filters})
    if args.producer:
        for f in filters:
            if f[0] == ResourceType.TOPIC:
                out[f] = entries(args, PRODUCER_TOPIC_OPS)
            elif f[0] == ResourceType.TRANSACTIONAL_ID:
                out[f] = entries(args, PRODUCER_TXN_OPS)
        if args.idempotent:
            out[CLUSTER_FILTER] = entries(args, [AclOperation.IDEMPOTENT_WRITE])
    if args.consumer:
        for f in filters:
            if f[0] == ResourceType.TOPIC:
                out[f] = list(dict.fromkeys(entries(args, CONSUMER_TOPIC_OPS) + out.get(f, [])))
            elif f[0] == ResourceType.GROUP:
                out[f] = list(dict.fromkeys(entries(args, [AclOperation.READ]) + out.get(f, [])))
    for (rt, _, _), acls in out.items():
        valid = set(SUPPORTED_OPERATIONS.get(rt, ())) | {AclOperation.ALL}
        if any(e[2] not in valid for e in acls):
            raise ToolError(f"ResourceType {rt.name} only supports operations "
                            + ", ".join(pascal_name(op) for op in OPERATIONS if op in valid and op != AclOperation.ALL)
                            + ", All")
    return out


def creation(p: Pattern, e: Entry) -> dict[str, Any]:
    return {"resource_type": int(p[0]), "resource_name": p[1], "resource_pattern_type": int(p[2]),
            "principal": e[0], "host": e[1], "operation": int(e[2]), "permission_type": int(e[3])}


def binding_filter(p: Pattern, e: Entry | None) -> dict[str, Any]:
    """A DescribeAcls/DeleteAcls filter: the resource filter and the exact entry (any entry for None)."""
    principal, host, op, perm = e if e is not None else (None, None, AclOperation.ANY, AclPermissionType.ANY)
    return {"resource_type_filter": int(p[0]), "resource_name_filter": p[1], "pattern_type_filter": int(p[2]),
            "principal_filter": principal, "host_filter": host, "operation": int(op), "permission_type": int(perm)}


# -- actions -----------------------------------------------------------------------------------------------
async def main(args: argparse.Namespace) -> int:
    check_args(args)
    security = command_security(args.command_config)
    if args.add:
        resource_acls = filter_to_acls(args)  # usage errors before connecting
        if args.resource_pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
            raise ToolError(f"A '--resource-pattern-type' value of '{args.resource_pattern_type.name}' is not "
                            "valid when adding acls.")
        if any(not acls for acls in resource_acls.values()):
            raise ToolError("You must specify one of: --allow-principal, --deny-principal when trying to add ACLs.")
    async with AdminClient(args.bootstrap_server, client_id="minikafka-acls", security=security) as admin:
        if args.add:
            await add(admin, resource_acls)
        elif args.remove:
            await remove(admin, args)
        else:
            await list_acls(admin, args)
    return 0


async def add(admin: AdminClient, resource_acls: dict[Pattern, list[Entry]]) -> None:
    for pattern, acls in resource_acls.items():
        print(f"Adding ACLs for resource `{pattern_text(pattern)}`: \n {_entries_block(acls)} \n")
        results = await admin.create_acls([creation(pattern, e) for e in acls])
        for e, (code, message) in zip(acls, results):
            if code:
                raise ToolError(f"cannot add ACL {entry_text(e)} on {pattern_text(pattern)}: "
                                f"{error_name(code)}" + (f": {message}" if message else ""))


def confirm(args: argparse.Namespace, question: str) -> bool:
    if args.force:
        return True
    print(question, flush=True)
    answer = sys.stdin.readline()
    return answer.strip().lower() == "y"


async def remove(admin: AdminClient, args: argparse.Namespace) -> None:
    for pattern, acls in filter_to_acls(args).items():
        if not acls:
            if confirm(args, f"Are you sure you want to delete all ACLs for resource filter "
                             f"`{pattern_text(pattern)}`? (y/n)"):
                await admin.delete_acls([binding_filter(pattern, None)])
        elif confirm(args, f"Are you sure you want to remove ACLs: \n {_entries_block(acls)} \n from resource "
                           f"filter `{pattern_text(pattern)}`? (y/n)"):
            await admin.delete_acls([binding_filter(pattern, e) for e in acls])


async def current_acls(admin: AdminClient, filters: list[Pattern]) -> dict[Pattern, list[Entry]]:
    """The ACLs the filters select (all without filters), by resource pattern, sorted by resource."""
    found: dict[Pattern, dict[Entry, None]] = {}
    queries = [binding_filter(f, None) for f in filters] or [
        binding_filter((ResourceType.ANY, None, PatternType.ANY), None)]
    for query in queries:
        for r in await admin.describe_acls(query):
            key: Pattern = (ResourceType(r.resource_type), r.resource_name, PatternType(r.pattern_type))
            bucket = found.setdefault(key, {})
            for a in r.acls:
                bucket[(a.principal, a.host, AclOperation(a.operation), AclPermissionType(a.permission_type))] = None
    return {k: list(found[k]) for k in sorted(found, key=lambda p: (int(p[0]), p[1] or "", int(p[2])))}


def print_resource_acls(resource_acls: dict[Pattern, list[Entry]]) -> None:
    for pattern, acls in resource_acls.items():
        print(f"Current ACLs for resource `{pattern_text(pattern)}`: \n {_entries_block(acls)} \n")


async def list_acls(admin: AdminClient, args: argparse.Namespace) -> None:
    resource_acls = await current_acls(admin, resource_filters(args, required=False))
    principals = list(dict.fromkeys(parse_principal(p) for p in args.principal))
    if not principals:
        print_resource_acls(resource_acls)
        return
    for principal in principals:
        print(f"ACLs for principal `{principal}`")
        print_resource_acls({p: [e for e in acls if e[0] == principal] for p, acls in resource_acls.items()
                             if any(e[0] == principal for e in acls)})

