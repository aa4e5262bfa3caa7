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


def _filter_error(code: ErrorCode, message: str) -> dict:
    return {"throttle_time_ms": 0, "error_code": code, "error_message": message, "entries": None}


@handles(ApiKey.DESCRIBE_CLIENT_QUOTAS)
async def handle_describe_client_quotas(broker, ctx, req) -> dict:
    # Validation in the order of Kafka's ClientQuotasImage.describe.
    filters = []
    seen: set[str] = set()
    for c in req.components:
        if not c.entity_type:
            return _filter_error(ErrorCode.INVALID_REQUEST, "Invalid empty entity type.")
        if c.entity_type in seen:
            return _filter_error(ErrorCode.INVALID_REQUEST,
                                 f"Entity type {c.entity_type} cannot appear more than once in the filter.")
        seen.add(c.entity_type)
        if c.entity_type not in ENTITY_TYPES:
            return _filter_error(ErrorCode.UNSUPPORTED_VERSION, f"Unsupported entity type {c.entity_type}")
        if c.match_type == 0 and c.match is None:
            return _filter_error(ErrorCode.INVALID_REQUEST,
                                 "Request specified MATCH_TYPE_EXACT, but set match string to null.")
        if c.match_type == 1 and c.match is not None:
            return _filter_error(ErrorCode.INVALID_REQUEST,
                                 "Request specified MATCH_TYPE_DEFAULT, but also specified a match string.")
        if c.match_type == 2 and c.match is not None:
            return _filter_error(ErrorCode.INVALID_REQUEST,
                                 "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.")
        if c.match_type not in (0, 1, 2):
            return _filter_error(ErrorCode.INVALID_REQUEST, f"Unknown match type {c.match_type}")
        filters.append((c.entity_type, c.match_type, c.match))
    entries = [
        {"entity": _entity_list(entity), "values": [{"key": k, "value": v} for k, v in sorted(values.items())]}
        for entity, values in broker.quota_configs.describe(filters, req.strict)
    ]
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "entries": entries}


def _validate(entry) -> tuple[ErrorCode, str | None, ClientQuotaEntity | None]:
    parts: dict[str, str | None] = {}
    for e in entry.entity:
        if e.entity_type not in ENTITY_TYPES:
            return ErrorCode.INVALID_REQUEST, f"Unhandled client quota entity type: {e.entity_type}", None
        if e.entity_type in parts:
            return (ErrorCode.INVALID_REQUEST,
                    f"Invalid empty client quota entity, duplicate entity entry {e.entity_type}", None)
        parts[e.entity_type] = e.entity_name
    if not parts:
        return ErrorCode.INVALID_REQUEST, "Invalid empty client quota entity", None
    for op in entry.ops:
        if op.key not in QUOTA_KEYS:
            return ErrorCode.INVALID_REQUEST, f"Invalid configuration key {op.key}", None
        if not op.remove and op.value <= 0:
            return ErrorCode.INVALID_REQUEST, f"Quota {op.key} must be greater than 0", None
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
