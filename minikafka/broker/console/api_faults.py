"""Console API: fault rules (:mod:`minikafka.broker.faults`), as ``/v1/faults`` serves them.

* ``GET /console/api/faults`` (DESCRIBE on the CLUSTER): the rules with matched and remaining counts,
  and the fields a rule has (for the page's form);
* ``POST /console/api/faults`` (ALTER on the CLUSTER): one rule as JSON (:meth:`FaultRule.from_json`,
  then :meth:`FaultRule.validate`; 400 with the reason otherwise);
* ``DELETE /console/api/faults/{id}`` and ``DELETE /console/api/faults`` (ALTER on the CLUSTER).
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from starlette.requests import Request
from starlette.routing import BaseRoute, Route

from ..faults import FaultRule
from ..security.acl import CLUSTER_NAME, AclOperation, ResourceType
from .context import ConsoleContext, ConsoleError, api, read_json

#: The fields a client sets (the injector sets ``id``, ``matched`` and the derived ones).
RULE_FIELDS = [f.name for f in fields(FaultRule)
               if f.name not in ("id", "matched", "added_ns", "api_key", "error_code")]


def field_kinds() -> dict[str, str]:
    """Each rule field's JSON kind for the page's form ("text", "number", "integer" or "boolean"), from the
    dataclass's annotations."""
    out = {}
    for f in fields(FaultRule):
        if f.name in RULE_FIELDS:
            kind = str(f.type)
            out[f.name] = ("boolean" if kind == "bool" else "text" if "str" in kind
                           else "number" if "float" in kind else "integer")
    return out


def parse_rules(data: Any) -> list[FaultRule]:
    """Fault rules from JSON (one rule object, or a list of them), each validated: all or none (400
    INVALID_RULE with the reason).  What ``POST /v1/faults`` and ``POST /console/api/faults`` accept."""
    specs = data if isinstance(data, list) else [data]
    try:
        if not all(isinstance(s, dict) for s in specs):
            raise ValueError("expected a JSON object (a rule) or a list of them")
        rules = [FaultRule.from_json(s) for s in specs]
        for rule in rules:
            rule.validate()
    except (TypeError, ValueError) as exc:
        raise ConsoleError(400, "INVALID_RULE", str(exc)) from None
    return rules


def routes(ctx: ConsoleContext) -> list[BaseRoute]:
    faults = ctx.target.faults

    async def list_rules(request: Request) -> Any:
        ctx.require(request, AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME)
        return {"rules": faults.as_json(), "fields": field_kinds()}

    async def add_rule(request: Request) -> Any:
        ctx.require(request, AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME)
        rule, = parse_rules(await read_json(request))
        return {"rule": faults.add(rule).to_json()}

    async def remove_rule(request: Request) -> Any:
        ctx.require(request, AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME)
        rule_id = request.path_params["rule_id"]
        if not faults.remove(rule_id):
            raise ConsoleError(404, "UNKNOWN_RULE", f"no fault rule {rule_id}")
        return {"removed": 1}

    async def clear(request: Request) -> Any:
        ctx.require(request, AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME)
        return {"removed": faults.clear()}

    return [Route("/console/api/faults", api(ctx, list_rules), methods=["GET"]),
            Route("/console/api/faults", api(ctx, add_rule), methods=["POST"]),
            Route("/console/api/faults", api(ctx, clear), methods=["DELETE"]),
            Route("/console/api/faults/{rule_id:int}", api(ctx, remove_rule), methods=["DELETE"])]
