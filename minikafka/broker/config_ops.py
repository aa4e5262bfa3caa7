"""Config operations of AlterConfigs / IncrementalAlterConfigs (Kafka's ``AlterConfigOp``), shared by
topic and broker resources."""

from __future__ import annotations

from collections.abc import Callable

from ..protocol.errors import ErrorCode
from .metadata import MetadataError

OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3


def _apply_list_op(current: str | None, op: int, value: str | None) -> str | None:
    items = [x.strip() for x in (current or "").split(",") if x.strip()]
    given = [x.strip() for x in (value or "").split(",") if x.strip()]
    if op == OP_APPEND:
        items += [x for x in given if x not in items]
    else:
        items = [x for x in items if x not in given]
    return ",".join(items) if items else None


def apply_config_ops(current: dict[str, str], changes: list[tuple[str, int, str | None]],
                     validate: Callable[[str, str | None], None], list_keys: frozenset[str] | set[str],
                     unknown_op_code: ErrorCode) -> dict[str, str]:
    """The configs after applying (key, op, value) changes to a copy of ``current``.

    SET and DELETE for any key; APPEND/SUBTRACT only for ``list_keys`` (else
    INVALID_CONFIG); any other operation fails with ``unknown_op_code``.
    ``validate(key, value)`` checks each value set (None for a deletion).
    """
    new = dict(current)
    for key, op, value in changes:
        validate(key, value if op != OP_DELETE else None)
        if op == OP_SET:
            if value is None:
                raise MetadataError(ErrorCode.INVALID_REQUEST, f"Null value not supported for : {key}")
            new[key] = value
        elif op == OP_DELETE:
            new.pop(key, None)
        elif op in (OP_APPEND, OP_SUBTRACT):
            if key not in list_keys:
                raise MetadataError(ErrorCode.INVALID_CONFIG,
                                    f"Config value append is not allowed for config key: {key}")
            merged = _apply_list_op(new.get(key), op, value)
            if merged is None:
                new.pop(key, None)
            else:
                validate(key, merged)
                new[key] = merged
        else:
            raise MetadataError(unknown_op_code, f"Unknown config operation {op}")
    return new
