"""``minikafka delegation-tokens``: create, renew, expire and describe delegation tokens
(``kafka-delegation-tokens.sh``, Kafka's ``DelegationTokenCommand``; KIP-48, KIP-373).

Same options, checks and output as Kafka's tool::

    minikafka delegation-tokens --bootstrap-server H:P --command-config admin.properties \\
        --create --max-life-time-period -1 --renewer-principal User:bob [--owner-principal User:carol]
    minikafka delegation-tokens ... --renew --hmac HMAC --renew-time-period -1
    minikafka delegation-tokens ... --expire --hmac HMAC --expiry-time-period -1
    minikafka delegation-tokens ... --describe [--owner-principal User:alice]

``--command-config`` is required, as Kafka requires it: brokers answer token requests only over an
authenticated connection (SASL, or TLS with a client certificate) that did not itself log in with a
token.  The HMAC is given and printed in Base64; it is the password of a SCRAM login with the token id as
user name and the ``tokenauth=true`` extension (``sasl.jaas.config=...ScramLoginModule required
username="<token id>" password="<hmac>" tokenauth="true";``).

Deliberate differences: ``--describe`` without ``--owner-principal`` asks for every token the principal
may see (owners null), as Kafka's option help says; Kafka 4's Java tool sends an empty owner list there,
which brokers answer with no token.  A usage error prints one line (``minikafka: error: ...``).
"""

from __future__ import annotations

import argparse
import base64
import binascii
import datetime as dt
from typing import Any

from .admin import AdminClient
from .common import ToolError, add_bootstrap, add_command_config, command_security, set_main

ACTIONS = ("create", "renew", "expire", "describe")
# Options each action may not take (Kafka's checkInvalidArgs).
INVALID: dict[str, tuple[str, ...]] = {
    "create": ("hmac", "renew_time_period", "expiry_time_period"),
    "renew": ("renewer_principal", "max_life_time_period", "expiry_time_period", "owner_principal"),
    "expire": ("renewer_principal", "max_life_time_period", "renew_time_period", "owner_principal"),
    "describe": ("renew_time_period", "max_life_time_period", "hmac", "expiry_time_period"),
}
REQUIRED: dict[str, tuple[str, ...]] = {
    "create": ("max_life_time_period",),
    "renew": ("hmac", "renew_time_period"),
    "expire": ("hmac", "expiry_time_period"),
    "describe": (),
}


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("delegation-tokens", help="create, renew, expire or describe delegation tokens "
                                                 "(kafka-delegation-tokens.sh)")
    add_bootstrap(p)
    add_command_config(p)
    p.add_argument("--create", action="store_true", help="create a token (--renewer-principal, "
                                                         "--max-life-time-period, --owner-principal)")
    p.add_argument("--renew", action="store_true", help="renew a token (--hmac, --renew-time-period)")
    p.add_argument("--expire", action="store_true", help="expire a token (--hmac, --expiry-time-period)")
    p.add_argument("--describe", action="store_true",
                   help="describe tokens (of the --owner-principal owners/renewers; else every token you may see)")
    p.add_argument("--owner-principal", action="append", default=[], metavar="TYPE:NAME",
                   help="--describe: an owner or renewer (repeatable); --create: the token's owner (KIP-373)")
    p.add_argument("--renewer-principal", action="append", default=[], metavar="TYPE:NAME",
                   help="--create: a principal that may renew the token (repeatable)")
    p.add_argument("--max-life-time-period", type=int, default=None, metavar="MS",
                   help="--create: the token's max life in ms (-1: the broker's delegation.token.max.lifetime.ms)")
    p.add_argument("--renew-time-period", type=int, default=None, metavar="MS",
                   help="--renew: ms until the new expiry (-1: the broker's delegation.token.expiry.time.ms)")
    p.add_argument("--expiry-time-period", type=int, default=None, metavar="MS",
                   help="--expire: ms until the token expires (-1: now)")
    p.add_argument("--hmac", default=None, help="--renew/--expire: the token's HMAC (Base64)")
    set_main(p, main)


def parse_principal(text: str) -> tuple[str, str]:
    """``Type:name`` -> (type, name), as Kafka's ``SecurityUtils.parseKafkaPrincipal``."""
    kind, sep, name = text.strip().partition(":")
    if not sep or not kind or not name:
        raise ToolError(f"Invalid principal: {text} (expected principalType:name)")
    return kind, name


def check_args(args: argparse.Namespace) -> str:
    """The one action, with Kafka's required and invalid options checked."""
    actions = [a for a in ACTIONS if getattr(args, a)]
    if len(actions) != 1:
        raise ToolError("Command must include exactly one action: --create, --renew, --expire or --describe")
    if not args.command_config:
        raise ToolError("Missing required argument \"[command-config]\"")
    action = actions[0]
    for name in REQUIRED[action]:
        if getattr(args, name) is None:
            raise ToolError(f"Missing required argument \"[{name.replace('_', '-')}]\"")
    for name in INVALID[action]:
        value = getattr(args, name)
        if value is not None and value != []:
            raise ToolError(f"Option \"[{action}]\" can't be used with option \"[{name.replace('_', '-')}]\"")
    return action


def decode_hmac(text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise ToolError(f"the HMAC {text!r} is not Base64") from None


def date(ms: int) -> str:
    """Kafka's ``yyyy-MM-dd'T'HH:mm`` in local time."""
    return dt.datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%dT%H:%M")


def principals(items: list[str]) -> list[tuple[str, str]]:
    return [parse_principal(p) for p in items]


def java_list(items: list[str]) -> str:
    return "[" + ", ".join(items) + "]"


def print_tokens(tokens: list[dict[str, Any]]) -> None:
    """Kafka's ``printToken``: a header, then one line per token (blank lines between)."""
    row = "\n{:<15} {:<30} {:<15} {:<15} {:<25} {:<15} {:<15} {:<15}"
    print(row.format("TOKENID", "HMAC", "OWNER", "REQUESTER", "RENEWERS", "ISSUEDATE", "EXPIRYDATE", "MAXDATE"))
    for t in tokens:
        print(row.format(t["token_id"], base64.b64encode(t["hmac"]).decode(), t["owner"], t["requester"],
                         java_list(t["renewers"]), date(t["issue"]), date(t["expiry"]), date(t["max"])))


async def main(args: argparse.Namespace) -> int:
    action = check_args(args)
    async with AdminClient(args.bootstrap_server, security=command_security(args.command_config)) as admin:
        if action == "create":
            renewers = principals(args.renewer_principal)
            owners = principals(args.owner_principal)
            print(f"Calling create token operation with renewers :{java_list([f'{t}:{n}' for t, n in renewers])} , "
                  f"max-life-time-period :{args.max_life_time_period}")
            r = await admin.create_delegation_token(renewers, args.max_life_time_period,
                                                    owner=owners[0] if owners else None)
            print(f"Created delegation token with tokenId : {r.token_id}")
            requester_type = getattr(r, "token_requester_principal_type", None) or r.principal_type
            requester_name = getattr(r, "token_requester_principal_name", None) or r.principal_name
            print_tokens([{"token_id": r.token_id, "hmac": bytes(r.hmac), "owner": f"{r.principal_type}:"
                           f"{r.principal_name}", "requester": f"{requester_type}:{requester_name}",
                           "renewers": [f"{t}:{n}" for t, n in renewers], "issue": r.issue_timestamp_ms,
                           "expiry": r.expiry_timestamp_ms, "max": r.max_timestamp_ms}])
        elif action == "renew":
            print(f"Calling renew token operation with hmac :{args.hmac} , renew-time-period :"
                  f"{args.renew_time_period}")
            expiry = await admin.renew_delegation_token(decode_hmac(args.hmac), args.renew_time_period)
            print(f"Completed renew operation. New expiry date : {date(expiry)}")
        elif action == "expire":
            print(f"Calling expire token operation with hmac :{args.hmac} , expire-time-period :"
                  f"{args.expiry_time_period}")
            expiry = await admin.expire_delegation_token(decode_hmac(args.hmac), args.expiry_time_period)
            print(f"Completed expire operation. New expiry date : {date(expiry)}")
        else:
            owners = principals(args.owner_principal)
            if owners:
                print(f"Calling describe token operation for owners: {java_list([f'{t}:{n}' for t, n in owners])}")
            else:
                print("Calling describe token operation for current user.")
            tokens = await admin.describe_delegation_tokens(owners or None)
            print(f"Total number of tokens : {len(tokens)}", end="")
            print_tokens([{"token_id": t.token_id, "hmac": bytes(t.hmac),
                           "owner": f"{t.principal_type}:{t.principal_name}",
                           "requester": f"{t.token_requester_principal_type or t.principal_type}:"
                                        f"{t.token_requester_principal_name or t.principal_name}",
                           "renewers": [f"{r.principal_type}:{r.principal_name}" for r in t.renewers],
                           "issue": t.issue_timestamp, "expiry": t.expiry_timestamp, "max": t.max_timestamp}
                          for t in tokens])
    return 0
