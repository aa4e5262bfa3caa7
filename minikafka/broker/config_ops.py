"""Config operations of AlterConfigs / IncrementalAlterConfigs (Kafka's ``AlterConfigOp``), shared by
topic and broker resources; and where a resource's configs are kept as KRaft's ``ConfigRecord`` s
(:class:`ConfigRecords`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from ..protocol.errors import ErrorCode
from .metadata import MetadataError

OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3


class ConfigRecords(Protocol):
    """Where resources' configs are kept as KRaft's ``ConfigRecord`` s (the controller's metadata log): those of a
    resource type (``ConfigResource.Type``) it held when opened, by resource name (None: there is no log), and
    a change's records (a value None: the config is removed)."""

    def replayed_configs(self, resource_type: int) -> dict[str, dict[str, str]] | None: ...

    def write_configs(self, resource_type: int, resource_name: str, changes: dict[str, str | None]) -> None: ...


def config_changes(before: dict[str, str], after: dict[str, str]) -> dict[str, str | None]:
    """What a resource's configs changed from ``before`` to ``after``: each new or changed value, None for each
    config removed (what ConfigRecords carry)."""
    changes: dict[str, str | None] = {k: v for k, v in after.items() if before.get(k) != v}
    changes.update({k: None for k in before if k not in after})
    return changes


class ResourceConfigStore:
    """What a store of one resource type's configs does with the metadata log (the group and client-metrics
    config stores): with ``records`` its configs are ConfigRecords, replayed when it opens, an earlier version's
    file at ``path`` carried over once; without, the file.  A store says how to read its file (:meth:`_load`),
    take configs in (:meth:`_take`), list them (:meth:`_stored`) and save its file (:meth:`_save`)."""

    resource_type = 0
    path: Path | None = None
    records: ConfigRecords | None = None

    def _open(self, records: ConfigRecords | None) -> None:
        replayed = records.replayed_configs(self.resource_type) if records is not None else None
        self.records = records if replayed is not None else None
        if replayed is None:
            self._load()
            return
        self._take(replayed, "the metadata log")
        if not replayed and self.path is not None and self.path.exists():
            self._load()  # an earlier version's file: its configs written as records, then it goes
            for name, configs in self._stored().items():
                self._write(name, {}, configs)
            self.path.unlink()

    def _write(self, name: str, before: dict[str, str], after: dict[str, str]) -> None:
        """Keep one resource's change: what changed as ConfigRecords of the metadata log, else the file."""
        if self.records is None:
            self._save()
            return
        changes = config_changes(before, after)
        if changes:
            self.records.write_configs(self.resource_type, name, changes)

    def replace(self, configs: dict[str, dict[str, str]]) -> None:
        """The configs of this resource type a broker process's copy of its controller's metadata log holds now
        (by resource name): each resource that differs is set (its listeners told), nothing written."""
        stored = self._stored()
        for name in [*stored, *(n for n in configs if n not in stored)]:
            if stored.get(name, {}) != configs.get(name, {}):
                self._set(name, dict(configs.get(name, {})))

    def _set(self, name: str, configs: dict[str, str]) -> None:
        raise NotImplementedError

    def _load(self) -> None:
        raise NotImplementedError

    def _take(self, configs: dict, where: str) -> None:
        raise NotImplementedError

    def _stored(self) -> dict[str, dict[str, str]]:
        raise NotImplementedError

    def _save(self) -> None:
        raise NotImplementedError


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
