"""DescribeClientQuotas (48) and AlterClientQuotas (49): client quotas at run time."""

from __future__ import annotations

import logging

from ...protocol.api import ApiKey
from ...protocol.errors import ErrorCode
from ..apis import handles
from ..quota.entity import ENTITY_TYPES, QUOTA_KEYS, ClientQuotaEntity

log = logging.getLogger(__name__)


def _entity_list(entity: ClientQuotaEntity) -> list[dict]:
    return [{"entity_type": t, "entity_name": n} for t, n in entity.components().items()]


@handles(ApiKey.DESCRIBE_CLIENT_QUOTAS)
async def handle_describe_client_quotas(broker, ctx, req) -> dict:
    filters = []
    for c in req.components:
        if c.entity_type not in ENTITY_TYPES:
            return {"throttle_time_ms": 0, "error_code": ErrorCode.INVALID_REQUEST,
                    "error_message": f"Custom entity type '{c.entity_type}' not supported", "entries": None}
        if c.match_type not in (0, 1, 2) or (c.match_type == 0 and c.match is None):
            return {"throttle_time_ms": 0, "error_code": ErrorCode.INVALID_REQUEST,
                    "error_message": f"Invalid match type {c.match_type}", "entries": None}
        filters.append((c.entity_type, c.match_type, c.match))
    if len({f[0] for f in filters}) != len(filters):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.INVALID_REQUEST,
                "error_message": "Duplicate entity type in filter", "entries": None}
    entries = [
        {"entity": _entity_list(entity), "values": [{"key": k, "value": v} for k, v in sorted(values.items())]}
        for entity, values in broker.quota_configs.describe(filters, req.strict)
    ]
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "entries": entries}


def _validate(entry) -> tuple[ErrorCode, str | None, ClientQuotaEntity | None]:
    parts: dict[str, str | None] = {}
    for e in entry.entity:
        if e.entity_type not in ENTITY_TYPES:
            return ErrorCode.INVALID_REQUEST, f"Unsupported quota entity type '{e.entity_type}'", None
        if e.entity_type in parts:
            return ErrorCode.INVALID_REQUEST, f"Duplicate quota entity type '{e.entity_type}'", None
        parts[e.entity_type] = e.entity_name
    if not parts:
        return ErrorCode.INVALID_REQUEST, "Invalid empty client quota entity", None
    for op in entry.ops:
        if op.key not in QUOTA_KEYS:
            return ErrorCode.INVALID_REQUEST, f"Invalid configuration key {op.key}", None
        if not op.remove and op.value <= 0:
            return ErrorCode.INVALID_REQUEST, f"Quota {op.key} must be positive, got {op.value}", None
    return ErrorCode.NONE, None, ClientQuotaEntity.from_components(parts)


@handles(ApiKey.ALTER_CLIENT_QUOTAS)
async def handle_alter_client_quotas(broker, ctx, req) -> dict:
    results = []
    for entry in req.entries:
        code, message, entity = _validate(entry)
        if not code and not req.validate_only:
            assert entity is not None
            for op in entry.ops:
                if op.remove:
                    broker.quota_configs.remove(entity, op.key)
                else:
                    broker.quota_configs.set(entity, op.key, op.value)
            log.info("client quotas for %s now %s", entity, broker.quota_configs.get(entity))
        results.append({"error_code": code, "error_message": message,
                        "entity": [{"entity_type": e.entity_type, "entity_name": e.entity_name}
                                   for e in entry.entity]})
    return {"throttle_time_ms": 0, "entries": results}
