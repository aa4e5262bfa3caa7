"""DescribeClientQuotas (48) and AlterClientQuotas (49): client quotas at run time.

With an authorizer (as Kafka): describing needs DESCRIBE_CONFIGS on the cluster, altering ALTER_CONFIGS on
the cluster; without, the request is answered CLUSTER_AUTHORIZATION_FAILED (on every entry for Alter).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ...protocol.api import ApiKey
from ...protocol.errors import ErrorCode
from ..quota.entity import ENTITY_TYPES, QUOTA_KEYS, ClientQuotaEntity
from ..error_responses import error_response
from ..request import RequestContext
from ..services import Authorizer, ClientQuotaStore
from .authorization import AclOperation, authorize

if TYPE_CHECKING:
    from ...protocol import bodies as B

log = logging.getLogger(__name__)


def _entity_list(entity: ClientQuotaEntity) -> list[B.DescribeClientQuotasResponseEntriesEntity]:
    return [{"entity_type": t, "entity_name": n} for t, n in entity.components().items()]


def _filter_error(code: ErrorCode, message: str) -> B.DescribeClientQuotasResponseBody:
    return {"throttle_time_ms": 0, "error_code": code, "error_message": message, "entries": None}


def _filter_problem(seen: set[str], c: B.DescribeClientQuotasRequestComponents) -> tuple[ErrorCode, str] | None:
    """What is wrong with one filter component, in the order of Kafka's ClientQuotasImage.describe."""
    etype, match_type, match = c["entity_type"], c["match_type"], c["match"]
    if not etype:
        return ErrorCode.INVALID_REQUEST, "Invalid empty entity type."
    if etype in seen:
        return ErrorCode.INVALID_REQUEST, f"Entity type {etype} cannot appear more than once in the filter."
    seen.add(etype)
    if etype not in ENTITY_TYPES:
        return ErrorCode.UNSUPPORTED_VERSION, f"Unsupported entity type {etype}"
    if match_type == 0 and match is None:
        return ErrorCode.INVALID_REQUEST, "Request specified MATCH_TYPE_EXACT, but set match string to null."
    if match_type == 1 and match is not None:
        return ErrorCode.INVALID_REQUEST, "Request specified MATCH_TYPE_DEFAULT, but also specified a match string."
    if match_type == 2 and match is not None:
        return ErrorCode.INVALID_REQUEST, "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string."
    if match_type not in (0, 1, 2):
        return ErrorCode.INVALID_REQUEST, f"Unknown match type {match_type}"
    return None


class DescribeClientQuotasHandler:
    def __init__(self, quotas: ClientQuotaStore, authorizer: Authorizer | None = None) -> None:
        self.quotas = quotas
        self.authorizer = authorizer

    async def handle(self, ctx: RequestContext, req: B.DescribeClientQuotasRequestBody
                     ) -> B.DescribeClientQuotasResponseBody:
        if not authorize(self.authorizer, ctx, AclOperation.DESCRIBE_CONFIGS):
            return _filter_error(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")
        filters = []
        seen: set[str] = set()
        for c in req["components"]:
            problem = _filter_problem(seen, c)
            if problem is not None:
                return _filter_error(*problem)
            filters.append((c["entity_type"], c["match_type"], c["match"]))
        entries: list[B.DescribeClientQuotasResponseEntries] = [
            {"entity": _entity_list(entity), "values": [{"key": k, "value": v} for k, v in sorted(values.items())]}
            for entity, values in self.quotas.describe(filters, req["strict"])
        ]
        return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "entries": entries}


def _validate(entry: B.AlterClientQuotasRequestEntries) -> tuple[ErrorCode, str | None, ClientQuotaEntity | None]:
    parts: dict[str, str | None] = {}
    for e in entry["entity"]:
        etype = e["entity_type"]
        if etype not in ENTITY_TYPES:
            return ErrorCode.INVALID_REQUEST, f"Unhandled client quota entity type: {etype}", None
        if etype in parts:
            return ErrorCode.INVALID_REQUEST, f"Invalid empty client quota entity, duplicate entity entry {etype}", None
        parts[etype] = e["entity_name"]
    if not parts:
        return ErrorCode.INVALID_REQUEST, "Invalid empty client quota entity", None
    for op in entry["ops"]:
        if op["key"] not in QUOTA_KEYS:
            return ErrorCode.INVALID_REQUEST, f"Invalid configuration key {op['key']}", None
        if not op["remove"] and op["value"] <= 0:
            return ErrorCode.INVALID_REQUEST, f"Quota {op['key']} must be greater than 0", None
    return ErrorCode.NONE, None, ClientQuotaEntity.from_components(parts)


class AlterClientQuotasHandler:
    def __init__(self, quotas: ClientQuotaStore, authorizer: Authorizer | None = None) -> None:
        self.quotas = quotas
        self.authorizer = authorizer

    async def handle(self, ctx: RequestContext, req: B.AlterClientQuotasRequestBody) -> B.AlterClientQuotasResponseBody:
        if not authorize(self.authorizer, ctx, AclOperation.ALTER_CONFIGS):
            return error_response(ApiKey.ALTER_CLIENT_QUOTAS, ctx.api_version, req,  # type: ignore[return-value]
                                  ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        results: list[B.AlterClientQuotasResponseEntries] = []
        for entry in req["entries"]:
            code, message, entity = _validate(entry)
            if entity is not None and not code and not req["validate_only"]:
                for op in entry["ops"]:
                    if op["remove"]:
                        self.quotas.remove(entity, op["key"])
                    else:
                        self.quotas.set(entity, op["key"], op["value"])
                log.info("client quotas for %s now %s", entity, self.quotas.get(entity))
            results.append({"error_code": code, "error_message": message,
                            "entity": [{"entity_type": e["entity_type"], "entity_name": e["entity_name"]}
                                       for e in entry["entity"]]})
        return {"throttle_time_ms": 0, "entries": results}
