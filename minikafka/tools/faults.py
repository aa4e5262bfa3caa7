"""``minikafka faults add|list|clear --http HOST:PORT``: fault rules on a broker's HTTP port.

A thin client of the HTTP API that ``minikafka serve --http-port`` opens
(:mod:`minikafka.broker.admin_http`): ``add`` posts one rule (the options are the
rule's fields), ``list`` prints the rules with their matched and remaining counts,
``clear`` removes all rules or, with ``--id``, one.  The broker checks the rule and
its refusal is printed as the error.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import urllib.error
import urllib.request
from typing import Any

import trio

from .common import ToolError, print_table, set_main

#: option -> (rule field, type); None type: a flag
_RULE_OPTIONS: dict[str, tuple[type | None, str]] = {
    "api": (str, "api name (Produce, Fetch, Metadata ...) or key"),
    "min-version": (int, "lowest api version matched"),
    "max-version": (int, "highest api version matched"),
    "client-id": (str, "client id to match (a glob such as 'rdkafka*')"),
    "topic": (str, "topic the request must name (a glob)"),
    "partition": (int, "partition of --topic the request must name"),
    "broker": (int, "only on this broker id"),
    "error": (str, "answer with this Kafka error (name such as NOT_LEADER_OR_FOLLOWER, or code)"),
    "per-partition": (None, "--error only on the matching partitions; the others are handled"),
    "latency-ms": (float, "delay the request this long before it is handled"),
    "drop": (str, "close the connection 'before' handling the request or 'after' it (no response)"),
    "hold": (None, "hold the response until the rule is removed"),
    "hold-ms": (float, "hold the response this long"),
    "count": (int, "fault only the next N matching requests"),
    "probability": (float, "fault a matching request with this probability (0-1)"),
    "after-ms": (float, "start this long after the rule is added"),
    "for-ms": (float, "stop this long after it started"),
}


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("faults", help="add, list or clear fault rules on a broker started with --http-port")
    fsub = p.add_subparsers(dest="faults_command", required=True)
    add = fsub.add_parser("add", help="add a fault rule")
    _add_http(add)
    for option, (kind, text) in _RULE_OPTIONS.items():
        if kind is None:
            add.add_argument(f"--{option}", action="store_true", help=text)
        else:
            add.add_argument(f"--{option}", type=kind, default=None, help=text)
    set_main(add, _add)
    ls = fsub.add_parser("list", help="list the rules with their matched and remaining counts")
    _add_http(ls)
    ls.add_argument("--json", action="store_true", help="print the rules as JSON")
    set_main(ls, _list)
    clear = fsub.add_parser("clear", help="remove every rule (or one, with --id)")
    _add_http(clear)
    clear.add_argument("--id", type=int, default=None, help="remove only this rule")
    set_main(clear, _clear)


def _add_http(p: argparse.ArgumentParser) -> None:
    p.add_argument("--http", required=True, metavar="HOST:PORT", help="the broker's --http-port address")
    p.add_argument("--http-user", metavar="USER",
                   help="a Kafka user to log in as, when the broker has SASL or ACLs configured")
    p.add_argument("--http-password", metavar="PASSWORD",
                   help="that user's password (default: the MINIKAFKA_HTTP_PASSWORD environment variable)")


def _credentials(args: argparse.Namespace) -> tuple[str, str] | None:
    if args.http_user is None:
        return None
    password = args.http_password if args.http_password is not None else os.environ.get("MINIKAFKA_HTTP_PASSWORD")
    if password is None:
        raise ToolError("--http-user needs --http-password or MINIKAFKA_HTTP_PASSWORD")
    return args.http_user, password


def http_call(address: str, method: str, path: str, body: Any = None,
              credentials: tuple[str, str] | None = None) -> Any:
    """One JSON request to the broker's HTTP API (HTTP Basic with ``credentials``: a Kafka user and
    password); ToolError with the broker's message on failure."""
    url = f"http://{address}{path}" if "://" not in address else f"{address.rstrip('/')}{path}"
    data = None if body is None else json.dumps(body).encode()
    headers = {"Content-Type": "application/json"}
    if credentials is not None:
        headers["Authorization"] = "Basic " + base64.b64encode(":".join(credentials).encode()).decode()
    request = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as exc:
        try:
            detail = json.loads(exc.read())
            message = f"{detail.get('error')}: {detail.get('message')}"
        except ValueError:
            message = f"HTTP {exc.code} {exc.reason}"
        raise ToolError(message) from None
    except urllib.error.URLError as exc:
        raise ToolError(f"cannot reach {url}: {exc.reason}") from None


def rule_from_args(args: argparse.Namespace) -> dict[str, Any]:
    """The rule's JSON fields from the ``add`` options given."""
    rule: dict[str, Any] = {}
    for option, (kind, _text) in _RULE_OPTIONS.items():
        value = getattr(args, option.replace("-", "_"))
        if value is None or (kind is None and not value):
            continue
        rule[option.replace("-", "_")] = value
    return rule


def describe(rule: dict[str, Any]) -> tuple[str, str]:
    """(what it matches, what it does) for one listed rule."""
    match = [f"{k}={rule[k]}" for k in ("api", "client_id", "topic", "partition", "broker") if rule.get(k) is not None]
    if rule.get("min_version") is not None or rule.get("max_version") is not None:
        top = "" if rule.get("max_version") is None else rule["max_version"]
        match.append(f"versions={rule.get('min_version') or 0}-{top}")
    action = []
    if rule.get("latency_ms"):
        action.append(f"latency={rule['latency_ms']:g}ms")
    if rule.get("error") is not None:
        action.append(f"error={rule['error']}" + ("/partition" if rule.get("per_partition") else ""))
    if rule.get("hold") or rule.get("hold_ms") is not None:
        action.append("hold" if rule.get("hold_ms") is None else f"hold={rule['hold_ms']:g}ms")
    if rule.get("drop"):
        action.append(f"drop={rule['drop']}")
    if rule.get("probability", 1) < 1:
        action.append(f"p={rule['probability']:g}")
    return ",".join(match) or "*", ",".join(action)


async def _add(args: argparse.Namespace) -> int:
    reply = await trio.to_thread.run_sync(http_call, args.http, "POST", "/v1/faults", rule_from_args(args),
                                          _credentials(args))
    rule = reply["rule"]
    match, action = describe(rule)
    print(f"added fault rule {rule['id']}: {match} -> {action}")
    return 0


async def _list(args: argparse.Namespace) -> int:
    rules = (await trio.to_thread.run_sync(http_call, args.http, "GET", "/v1/faults", None,
                                           _credentials(args)))["rules"]
    if args.json:
        print(json.dumps(rules, indent=2))
        return 0
    print_table(["ID", "MATCH", "ACTION", "MATCHED", "REMAINING"],
                [(r["id"], *describe(r), r["matched"], "-" if r["remaining"] is None else r["remaining"])
                 for r in rules])
    return 0


async def _clear(args: argparse.Namespace) -> int:
    path = "/v1/faults" if args.id is None else f"/v1/faults/{args.id}"
    reply = await trio.to_thread.run_sync(http_call, args.http, "DELETE", path, None, _credentials(args))
    print(f"removed {reply['removed']} fault rule(s)")
    return 0


__all__ = ["add_parser", "http_call", "rule_from_args", "ToolError"]
