"""Per-group dynamic configs (Kafka's ``GroupConfig`` and ``GroupConfigManager``).

A group may override, through IncrementalAlterConfigs / AlterConfigs on a GROUP config resource
(type 32), the broker's ``group.consumer.*`` / ``group.share.*`` defaults for itself:
``consumer.session.timeout.ms``, ``consumer.heartbeat.interval.ms``, ``share.session.timeout.ms``,
``share.heartbeat.interval.ms``, ``share.record.lock.duration.ms``, ``share.delivery.count.limit``,
``share.auto.offset.reset`` (``latest`` | ``earliest`` | ``by_duration:<ISO-8601 duration>``) and
``share.isolation.level`` (``read_uncommitted`` | ``read_committed``).  Values are validated as Kafka 4.2's
``GroupConfig.validate`` does: the overrides are merged over the broker defaults, each value must parse
and be within the broker's ``group.*.min/max.*`` bounds, and a session timeout must exceed its heartbeat
interval; a violation is INVALID_CONFIG with Kafka's wording.

:class:`GroupConfigManager` keeps the overrides of every group, is shared by the brokers of a cluster (as
Kafka keeps them in its metadata) and keeps them as ``ConfigRecord`` s of the metadata log with a data dir.
:meth:`GroupConfigManager.group_config` answers the effective :class:`GroupConfig` of a group: its
overrides over the broker defaults.

Deliberate differences: the ``streams.*`` group configs and ``share.renew.acknowledge.enable`` are not
offered (minikafka has no streams groups nor KIP-1222 renewals); a group's configs exist independently
of the group, as in Kafka, and are not removed when the group is deleted unless :meth:`delete` is called.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path

from ...protocol.errors import ErrorCode
from ..config import BrokerConfig
from ..config_ops import OP_DELETE, ConfigRecords, ResourceConfigStore, apply_config_ops
from ..metadata import MetadataError

log = logging.getLogger(__name__)

GROUP_CONFIGS_FILE = "group-configs.json"

CONSUMER_SESSION_TIMEOUT_MS = "consumer.session.timeout.ms"
CONSUMER_HEARTBEAT_INTERVAL_MS = "consumer.heartbeat.interval.ms"
SHARE_SESSION_TIMEOUT_MS = "share.session.timeout.ms"
SHARE_HEARTBEAT_INTERVAL_MS = "share.heartbeat.interval.ms"
SHARE_RECORD_LOCK_DURATION_MS = "share.record.lock.duration.ms"
SHARE_DELIVERY_COUNT_LIMIT = "share.delivery.count.limit"
SHARE_AUTO_OFFSET_RESET = "share.auto.offset.reset"
SHARE_ISOLATION_LEVEL = "share.isolation.level"

# Kafka's ConfigSource and DescribeConfigsResponse ConfigType codes.
SOURCE_GROUP_CONFIG = 8
SOURCE_STATIC_BROKER = 4
SOURCE_DEFAULT = 5
TYPE_STRING = 2
TYPE_INT = 3

EARLIEST_TIMESTAMP = -2  # ListOffsetsRequest.EARLIEST_TIMESTAMP
LATEST_TIMESTAMP = -1  # ListOffsetsRequest.LATEST_TIMESTAMP

_INT_MAX = 2**31 - 1

# Java's Duration.parse grammar: [-+]PnDTnHnMn.nS, case-insensitive, at least one part.
_ISO_DURATION = re.compile(
    r"([-+]?)P(?:([-+]?[0-9]+)D)?"
    r"(T(?:([-+]?[0-9]+)H)?(?:([-+]?[0-9]+)M)?(?:([-+]?[0-9]+)(?:[.,]([0-9]{0,9}))?S)?)?",
    re.IGNORECASE)


def parse_iso_duration_ms(text: str) -> int:
    """Milliseconds of an ISO-8601 duration as Java's ``Duration.parse`` reads it (``P2D``, ``PT1H30M``,
    ``PT0.5S``); ValueError otherwise.  Sub-millisecond digits are dropped."""
    m = _ISO_DURATION.fullmatch(text)
    if m is None or m.group(3) == "T" or (m.group(2) is None and m.group(3) is None):
        raise ValueError(f"Text cannot be parsed to a Duration: {text}")
    sign, days, _, hours, minutes, seconds, fraction = m.groups()
    sec_sign = -1 if seconds is not None and seconds.startswith("-") else 1
    frac_ms = int((fraction or "").ljust(9, "0")[:3]) * sec_sign if fraction else 0
    total = (int(days or 0) * 86_400_000 + int(hours or 0) * 3_600_000 + int(minutes or 0) * 60_000
             + int(seconds or 0) * 1000 + frac_ms)
    return -total if sign == "-" else total


@dataclass(frozen=True)
class ShareAutoOffsetReset:
    """Kafka's ``ShareGroupAutoOffsetResetStrategy``: where a share partition starts when it has no state.

    ``type`` is ``earliest``, ``latest`` or ``by_duration`` (then ``duration_ms`` before now)."""

    type: str
    duration_ms: int | None = None

    @classmethod
    def parse(cls, value: str | None) -> ShareAutoOffsetReset:
        """The strategy a config value names (exact lower-case names, as Kafka); ValueError otherwise."""
        if value is None:
            raise ValueError("Auto offset reset strategy is null")
        if value in ("earliest", "latest"):
            return cls(value)
        if value == "by_duration":
            raise ValueError("<:duration> part is missing in by_duration auto offset reset strategy.")
        if value.startswith("by_duration:"):
            try:
                duration = parse_iso_duration_ms(value[len("by_duration:"):])
            except ValueError:
                raise ValueError("Unable to parse duration string in by_duration offset reset strategy.") from None
            if duration < 0:
                raise ValueError("Negative duration is not supported in by_duration offset reset strategy.")
            return cls("by_duration", duration)
        raise ValueError(f"Unknown auto offset reset strategy: {value}")

    def timestamp(self, now_ms: int) -> int:
        """The ListOffsets timestamp to look up: -2 (earliest), -1 (latest) or ``now - duration``."""
        if self.type == "earliest":
            return EARLIEST_TIMESTAMP
        if self.type == "latest":
            return LATEST_TIMESTAMP
        return now_ms - (self.duration_ms or 0)


@dataclass(frozen=True)
class GroupConfig:
    """The effective configs of one group (Kafka's ``GroupConfig``): overrides over broker defaults."""

    consumer_session_timeout_ms: int
    consumer_heartbeat_interval_ms: int
    share_session_timeout_ms: int
    share_heartbeat_interval_ms: int
    share_record_lock_duration_ms: int
    share_delivery_count_limit: int
    share_auto_offset_reset: ShareAutoOffsetReset
    share_isolation_level: str  # "read_uncommitted" or "read_committed"

    @property
    def share_read_committed(self) -> bool:
        return self.share_isolation_level == "read_committed"


@dataclass(frozen=True)
class _Key:
    """One group config: its type, Kafka's ``atLeast`` bound, the broker default attribute and bounds."""

    name: str
    config_type: int
    at_least: int | None = None
    broker_attr: str | None = None  # BrokerConfig attribute of the default (the ``group.`` synonym)
    min_attr: str | None = None
    max_attr: str | None = None
    min_config: str = ""
    max_config: str = ""
    default: str = ""  # for keys without a broker synonym


def _bounded(name: str, at_least: int, kind: str, what: str) -> _Key:
    return _Key(name, TYPE_INT, at_least, f"group_{kind}_{what}", f"group_{kind}_min_{what}",
                f"group_{kind}_max_{what}", f"group.{kind}.min.{what.replace('_', '.')}",
                f"group.{kind}.max.{what.replace('_', '.')}")


GROUP_CONFIG_KEYS: dict[str, _Key] = {k.name: k for k in (
    _bounded(CONSUMER_SESSION_TIMEOUT_MS, 1, "consumer", "session_timeout_ms"),
    _bounded(CONSUMER_HEARTBEAT_INTERVAL_MS, 1, "consumer", "heartbeat_interval_ms"),
    _bounded(SHARE_SESSION_TIMEOUT_MS, 1, "share", "session_timeout_ms"),
    _bounded(SHARE_HEARTBEAT_INTERVAL_MS, 1, "share", "heartbeat_interval_ms"),
    _bounded(SHARE_RECORD_LOCK_DURATION_MS, 1000, "share", "record_lock_duration_ms"),
    _bounded(SHARE_DELIVERY_COUNT_LIMIT, 2, "share", "delivery_count_limit"),
    _Key(SHARE_AUTO_OFFSET_RESET, TYPE_STRING, default="latest"),
    _Key(SHARE_ISOLATION_LEVEL, TYPE_STRING, default="read_uncommitted"),
)}


def _check_value(name: str, value: str) -> str | None:
    """Kafka's ``ConfigDef.parse`` problem with one value, or None."""
    key = GROUP_CONFIG_KEYS[name]
    if key.config_type == TYPE_INT:
        try:
            n = int(value.strip())
        except ValueError:
            return "Not a number of type INT"
        if not -_INT_MAX - 1 <= n <= _INT_MAX:
            return "Not a number of type INT"
        if key.at_least is not None and n < key.at_least:
            return f"Value must be at least {key.at_least}"
        return None
    if name == SHARE_AUTO_OFFSET_RESET:
        try:
            ShareAutoOffsetReset.parse(value)
        except ValueError:
            return (f"Invalid value `{value}` for configuration {name}. The value must be either 'earliest', "
                    "'latest' or of the format 'by_duration:<PnDTnHnMn.nS.>'.")
        return None
    if value not in ("read_committed", "read_uncommitted"):
        return "String must be one of: read_committed, read_uncommitted"
    return None


def validate_group_config_name(name: str, value: str | None) -> None:
    """MetadataError(INVALID_CONFIG) for an unknown group config or a value that does not parse."""
    if name not in GROUP_CONFIG_KEYS:
        raise MetadataError(ErrorCode.INVALID_CONFIG, f"Unknown group config name: {name}")
    if value is not None:
        problem = _check_value(name, value)
        if problem is not None:
            raise MetadataError(ErrorCode.INVALID_CONFIG,
                                f"Invalid value {value} for configuration {name}: {problem}")


#: ``ConfigResource.Type.GROUP``: a ConfigRecord's resource type for a group's config.
GROUP_RESOURCE = 32


class GroupConfigManager(ResourceConfigStore):
    """The dynamic configs of every group (Kafka's ``GroupConfigManager`` over the metadata's group configs),
    shared by the brokers of a cluster.  With ``records`` (a data dir's metadata log) each override is a
    ``ConfigRecord`` of the group, as in KRaft (an earlier version's ``<data_dir>/group-configs.json`` is carried
    over once); else they are saved in ``<data_dir>/group-configs.json``."""

    resource_type = GROUP_RESOURCE

    def __init__(self, config: BrokerConfig, data_dir: Path | None = None,
                 records: ConfigRecords | None = None) -> None:
        self.config = config
        self.path = Path(data_dir) / GROUP_CONFIGS_FILE if data_dir is not None else None
        self._overrides: dict[str, dict[str, str]] = {}
        self._cache: dict[str, GroupConfig] = {}
        self._default: GroupConfig = self._build({})
        # Called with a group id after its configs changed (coordinators re-read their timeouts).
        self.listeners: list[Callable[[str], None]] = []
        self._open(records)

    # -- reading ------------------------------------------------------------------------------------
    def broker_default(self, name: str) -> str:
        """The value a group has without an override (the broker's ``group.`` synonym or Kafka's default)."""
        key = GROUP_CONFIG_KEYS[name]
        if key.broker_attr is None:
            return key.default
        return str(getattr(self.config, key.broker_attr))

    def _build(self, overrides: dict[str, str]) -> GroupConfig:
        def value(name: str) -> str:
            return overrides.get(name, self.broker_default(name))

        def number(name: str) -> int:
            return int(value(name).strip())

        return GroupConfig(
            consumer_session_timeout_ms=number(CONSUMER_SESSION_TIMEOUT_MS),
            consumer_heartbeat_interval_ms=number(CONSUMER_HEARTBEAT_INTERVAL_MS),
            share_session_timeout_ms=number(SHARE_SESSION_TIMEOUT_MS),
            share_heartbeat_interval_ms=number(SHARE_HEARTBEAT_INTERVAL_MS),
            share_record_lock_duration_ms=number(SHARE_RECORD_LOCK_DURATION_MS),
            share_delivery_count_limit=number(SHARE_DELIVERY_COUNT_LIMIT),
            share_auto_offset_reset=ShareAutoOffsetReset.parse(value(SHARE_AUTO_OFFSET_RESET)),
            share_isolation_level=value(SHARE_ISOLATION_LEVEL),
        )

    def group_config(self, group_id: str) -> GroupConfig:
        """The effective configs of a group (the broker defaults when it overrides nothing)."""
        found = self._cache.get(group_id)
        if found is not None:
            return found
        return self._default

    def group_ids(self) -> list[str]:
        """The groups that set configs of their own, sorted (ListConfigResources' GROUP resources)."""
        return sorted(self._overrides)

    def overrides(self, group_id: str) -> dict[str, str]:
        """The configs a group sets itself (a copy)."""
        return dict(self._overrides.get(group_id, {}))

    def describe(self, group_id: str, include_synonyms: bool = False
                 ) -> list[tuple[str, str, int, int, list[tuple[str, str, int]]]]:
        """Every group config of a group as Kafka's ``ConfigHelper`` describes it: (name, value, source,
        config type, synonyms).  Source: GROUP_CONFIG (8) for an override, else STATIC_BROKER (4) when the
        broker sets its ``group.`` synonym away from Kafka's default, else DEFAULT (5)."""
        mine = self._overrides.get(group_id, {})
        defaults = {f.name: f.default for f in fields(BrokerConfig)}
        out: list[tuple[str, str, int, int, list[tuple[str, str, int]]]] = []
        for name in sorted(GROUP_CONFIG_KEYS):
            key = GROUP_CONFIG_KEYS[name]
            synonyms: list[tuple[str, str, int]] = []
            if name in mine:
                synonyms.append((name, mine[name], SOURCE_GROUP_CONFIG))
            if key.broker_attr is not None:
                broker_value = getattr(self.config, key.broker_attr)
                source = SOURCE_DEFAULT if broker_value == defaults.get(key.broker_attr) else SOURCE_STATIC_BROKER
                synonyms.append(("group." + name, str(broker_value), source))
            else:
                synonyms.append((name, key.default, SOURCE_DEFAULT))
            value = mine.get(name, self.broker_default(name))
            out.append((name, value, synonyms[0][2], key.config_type, synonyms if include_synonyms else []))
        return out

    # -- altering -----------------------------------------------------------------------------------
    def validate(self, overrides: dict[str, str]) -> None:
        """Kafka's ``GroupConfig.validate``: the overrides merged over the broker defaults must name known
        configs, parse, lie within the broker's min/max bounds, and each session timeout must exceed its
        heartbeat interval.  MetadataError(INVALID_CONFIG) otherwise."""
        for name, value in overrides.items():
            validate_group_config_name(name, value)
        merged = {name: overrides.get(name, self.broker_default(name)) for name in GROUP_CONFIG_KEYS}
        ints = {name: int(v.strip()) for name, v in merged.items()
                if GROUP_CONFIG_KEYS[name].config_type == TYPE_INT}
        for name, n in ints.items():
            key = GROUP_CONFIG_KEYS[name]
            assert key.min_attr is not None and key.max_attr is not None
            if n < getattr(self.config, key.min_attr):
                raise MetadataError(ErrorCode.INVALID_CONFIG,
                                    f"{name} must be greater than or equal to {key.min_config}")
            if n > getattr(self.config, key.max_attr):
                raise MetadataError(ErrorCode.INVALID_CONFIG, f"{name} must be less than or equal to {key.max_config}")
        for session, heartbeat in ((CONSUMER_SESSION_TIMEOUT_MS, CONSUMER_HEARTBEAT_INTERVAL_MS),
                                   (SHARE_SESSION_TIMEOUT_MS, SHARE_HEARTBEAT_INTERVAL_MS)):
            if ints[session] <= ints[heartbeat]:
                raise MetadataError(ErrorCode.INVALID_CONFIG, f"{session} must be greater than {heartbeat}")

    def alter(self, group_id: str, changes: list[tuple[str, int, str | None]], incremental: bool,
              validate_only: bool) -> None:
        """Apply (or only validate) IncrementalAlterConfigs operations (``incremental``) or replace the
        group's overrides by the AlterConfigs set; MetadataError on failure."""
        if not group_id:
            raise MetadataError(ErrorCode.INVALID_REQUEST, "Default group resources are not allowed.")
        for name, op, value in changes:
            if op != OP_DELETE and value is None:
                raise MetadataError(ErrorCode.INVALID_CONFIG, f"Null value not supported for group configs: {name}")
        current = self._overrides.get(group_id, {}) if incremental else {}
        new = apply_config_ops(current, changes, validate_group_config_name, frozenset(), ErrorCode.INVALID_REQUEST)
        self.validate(new)
        if validate_only:
            return
        self.set_overrides(group_id, new)

    def set_overrides(self, group_id: str, overrides: dict[str, str]) -> None:
        """Replace a group's overrides (already validated), save them and tell the listeners."""
        before = self._overrides.get(group_id, {})
        if overrides:
            self._overrides[group_id] = dict(overrides)
            self._cache[group_id] = self._build(overrides)
        else:
            self._overrides.pop(group_id, None)
            self._cache.pop(group_id, None)
        self._write(group_id, before, overrides)
        log.info("group %s configs now %s", group_id, overrides)
        for listener in list(self.listeners):
            listener(group_id)

    def _set(self, name: str, configs: dict[str, str]) -> None:
        self.set_overrides(name, configs)

    def delete(self, group_id: str) -> None:
        """Forget a group's overrides."""
        if group_id in self._overrides:
            self.set_overrides(group_id, {})

    # -- persistence --------------------------------------------------------------------------------
    def _load(self) -> None:
        if self.path is None or not self.path.exists():
            return
        try:
            data = json.loads(self.path.read_text())
            groups = data["groups"]
            if not isinstance(groups, dict):
                raise TypeError("groups is not an object")
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log.error("cannot read the group configs in %s: %s; starting without them", self.path, exc)
            return
        self._take(groups, str(self.path))

    def _take(self, groups: dict, where: str) -> None:
        """Keep the valid overrides of ``groups`` (group id -> config name -> value); a group whose overrides are
        not valid is left out, with an error logged."""
        for group_id, overrides in groups.items():
            try:
                if not isinstance(overrides, dict) or not all(isinstance(v, str) for v in overrides.values()):
                    raise TypeError("not a map of strings")
                built = self._build(overrides)
                for name, value in overrides.items():
                    validate_group_config_name(name, value)
            except (MetadataError, ValueError, TypeError) as exc:
                log.error("ignoring the saved configs of group %s: %s", group_id, exc)
                continue
            self._overrides[group_id] = dict(overrides)
            self._cache[group_id] = built
        if groups:
            log.info("loaded the configs of %d group(s) from %s", len(self._overrides), where)

    def _stored(self) -> dict[str, dict[str, str]]:
        return self._overrides

    def _save(self) -> None:
        if self.path is None:
            return
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps({"version": 1, "groups": self._overrides}, indent=1, sort_keys=True))
        os.replace(tmp, self.path)
