"""Client metrics subscriptions (Kafka's ``ClientMetricsConfigs`` and the CLIENT_METRICS config resources).

A subscription is a config resource of type CLIENT_METRICS (16) named by the operator and set with
IncrementalAlterConfigs / AlterConfigs (``kafka-client-metrics.sh``, ``minikafka client-metrics``), with
Kafka's three keys:

* ``metrics``: a comma-separated list of metric name prefixes the matching clients push (``*``: all);
* ``interval.ms``: the push interval, 100 to 3600000 (default 300000);
* ``match``: comma-separated ``selector=regex`` items, every one of which a client must match (a full
  match, as Java's ``Matcher.matches``) for the subscription to apply; selectors ``client_instance_id``,
  ``client_id``, ``client_software_name``, ``client_software_version``, ``client_source_address``,
  ``client_source_port``.  No ``match``: every client.

Validation is Kafka's ``ClientMetricsConfigs.validate``: an empty name, an unknown key or an interval out of
range is INVALID_REQUEST; a value that does not parse or a bad match item is INVALID_CONFIG.  Deleting every
key of a subscription removes it.

:class:`ClientMetricsConfigStore` keeps every subscription, is shared by the brokers of a cluster (Kafka keeps
them in its metadata) and keeps them as ``ConfigRecord`` s of the metadata log with a data dir; listeners
(each broker's :class:`~.manager.ClientMetricsManager`) are told of each change.  Deliberate difference: match
regexes are Python's ``re`` syntax, which agrees with Java's for the usual patterns.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ...protocol.errors import ErrorCode
from ..config_ops import OP_DELETE, ConfigRecords, ResourceConfigStore, apply_config_ops
from ..metadata import MetadataError

log = logging.getLogger(__name__)

CLIENT_METRICS_CONFIGS_FILE = "client-metrics-configs.json"

SUBSCRIPTION_METRICS = "metrics"
PUSH_INTERVAL_MS = "interval.ms"
CLIENT_MATCH_PATTERN = "match"

CLIENT_INSTANCE_ID = "client_instance_id"
CLIENT_ID = "client_id"
CLIENT_SOFTWARE_NAME = "client_software_name"
CLIENT_SOFTWARE_VERSION = "client_software_version"
CLIENT_SOURCE_ADDRESS = "client_source_address"
CLIENT_SOURCE_PORT = "client_source_port"

ALL_SUBSCRIBED_METRICS = "*"
DEFAULT_INTERVAL_MS = 5 * 60 * 1000
MIN_INTERVAL_MS = 100
MAX_INTERVAL_MS = 3600000

CONFIG_NAMES = (SUBSCRIPTION_METRICS, PUSH_INTERVAL_MS, CLIENT_MATCH_PATTERN)
LIST_CONFIGS = frozenset({SUBSCRIPTION_METRICS, CLIENT_MATCH_PATTERN})
MATCH_SELECTORS = (CLIENT_INSTANCE_ID, CLIENT_ID, CLIENT_SOFTWARE_NAME, CLIENT_SOFTWARE_VERSION,
                   CLIENT_SOURCE_ADDRESS, CLIENT_SOURCE_PORT)

SOURCE_CLIENT_METRICS_CONFIG = 7  # Kafka's DescribeConfigs ConfigSource.CLIENT_METRICS_CONFIG

_INT_MIN, _INT_MAX = -2**31, 2**31 - 1


def parse_list(value: str) -> list[str]:
    """A LIST config as Kafka's ``ConfigDef`` parses it: split on commas, items trimmed; "" is empty."""
    value = value.strip()
    return [] if not value else [item.strip() for item in value.split(",")]


def parse_interval(value: str) -> int:
    """``interval.ms`` as an INT (MetadataError INVALID_CONFIG when it is not one)."""
    try:
        n = int(value.strip())
    except ValueError:
        n = None
    if n is None or not _INT_MIN <= n <= _INT_MAX:
        raise MetadataError(ErrorCode.INVALID_CONFIG,
                            f"Invalid value {value} for configuration {PUSH_INTERVAL_MS}: Not a number of type INT")
    return n


def parse_matching_patterns(patterns: list[str]) -> dict[str, re.Pattern[str]]:
    """Kafka's ``ClientMetricsConfigs.parseMatchingPatterns``: ``selector=regex`` items -> {selector: regex};
    MetadataError INVALID_CONFIG for an item that is not ``known_selector=valid_regex``."""
    out: dict[str, re.Pattern[str]] = {}
    for pattern in patterns:
        parts = pattern.split("=")
        while len(parts) > 1 and parts[-1] == "":  # Java's split drops trailing empty strings
            parts.pop()
        if len(parts) != 2 or parts[0].strip() not in MATCH_SELECTORS:
            raise MetadataError(ErrorCode.INVALID_CONFIG, f"Illegal client matching pattern: {pattern}")
        try:
            out[parts[0].strip()] = re.compile(parts[1].strip())
        except re.error:
            raise MetadataError(ErrorCode.INVALID_CONFIG, f"Illegal client matching pattern: {pattern}") from None
    return out


def validate_name(name: str, value: str | None) -> None:
    """A config key Kafka does not know is INVALID_REQUEST (checked as each operation is applied)."""
    if name not in CONFIG_NAMES:
        raise MetadataError(ErrorCode.INVALID_REQUEST, f"Unknown client metrics configuration: {name}")


def validate(subscription_name: str, configs: dict[str, str]) -> None:
    """Kafka's ``ClientMetricsConfigs.validate`` of a subscription's whole config set."""
    if not subscription_name:
        raise MetadataError(ErrorCode.INVALID_REQUEST, "Subscription name can't be empty")
    for key in configs:
        validate_name(key, None)
    if PUSH_INTERVAL_MS in configs:
        interval = parse_interval(configs[PUSH_INTERVAL_MS])
        if not MIN_INTERVAL_MS <= interval <= MAX_INTERVAL_MS:
            raise MetadataError(ErrorCode.INVALID_REQUEST,
                                f"Invalid value {interval} for {PUSH_INTERVAL_MS}, interval must be between 100 and "
                                "3600000 (1 hour)")
    if CLIENT_MATCH_PATTERN in configs:
        parse_matching_patterns(parse_list(configs[CLIENT_MATCH_PATTERN]))


@dataclass(frozen=True)
class SubscriptionInfo:
    """One subscription as the manager matches clients against it (Kafka's ``SubscriptionInfo``)."""

    name: str
    metrics: frozenset[str]
    interval_ms: int
    match: dict[str, re.Pattern[str]]

    @classmethod
    def of(cls, name: str, configs: dict[str, str]) -> SubscriptionInfo:
        interval = parse_interval(configs[PUSH_INTERVAL_MS]) if PUSH_INTERVAL_MS in configs else DEFAULT_INTERVAL_MS
        return cls(name, frozenset(parse_list(configs.get(SUBSCRIPTION_METRICS, ""))), interval,
                   parse_matching_patterns(parse_list(configs.get(CLIENT_MATCH_PATTERN, ""))))

    def matches(self, attributes: dict[str, str | None]) -> bool:
        """Kafka's ``ClientMetricsInstanceMetadata.isMatch``: every pattern fully matches its attribute."""
        for selector, pattern in self.match.items():
            value = attributes.get(selector)
            if value is None or pattern.fullmatch(value) is None:
                return False
        return True


#: ``ConfigResource.Type.CLIENT_METRICS``: a ConfigRecord's resource type for a subscription's config.
CLIENT_METRICS_RESOURCE = 16


class ClientMetricsConfigStore(ResourceConfigStore):
    """Every client metrics subscription's configs, shared by a cluster's brokers.  With ``records`` (a data dir's
    metadata log) each config is a ``ConfigRecord`` of the subscription, as in KRaft (an earlier version's
    ``<data_dir>/client-metrics-configs.json`` is carried over once); else saved in that file (in memory without
    a data dir)."""

    resource_type = CLIENT_METRICS_RESOURCE

    def __init__(self, data_dir: Path | None = None, records: ConfigRecords | None = None) -> None:
        self.path = Path(data_dir) / CLIENT_METRICS_CONFIGS_FILE if data_dir is not None else None
        self._configs: dict[str, dict[str, str]] = {}
        self._subscriptions: dict[str, SubscriptionInfo] = {}
        # Called with the subscription name after its configs changed (each broker's manager).
        self.listeners: list[Callable[[str], None]] = []
        self._open(records)

    # -- reading ------------------------------------------------------------------------------------
    def names(self) -> list[str]:
        """The subscriptions (Kafka's ``listClientMetricsResources``), sorted."""
        return sorted(self._configs)

    def configs(self, name: str) -> dict[str, str]:
        """A subscription's configs as set (a copy; empty for one that does not exist)."""
        return dict(self._configs.get(name, {}))

    def subscriptions(self) -> list[SubscriptionInfo]:
        return list(self._subscriptions.values())

    def describe(self, name: str) -> list[tuple[str, str, int]]:
        """(name, value, ConfigSource) of each config a subscription sets, as Kafka's ``ConfigHelper``
        describes a CLIENT_METRICS resource: only the keys set, all CLIENT_METRICS_CONFIG (7)."""
        if not name:
            raise MetadataError(ErrorCode.INVALID_REQUEST, "Client metrics subscription name must not be empty")
        return [(k, v, SOURCE_CLIENT_METRICS_CONFIG) for k, v in sorted(self._configs.get(name, {}).items())]

    # -- altering -----------------------------------------------------------------------------------
    def alter(self, name: str, changes: list[tuple[str, int, str | None]], incremental: bool,
              validate_only: bool) -> None:
        """IncrementalAlterConfigs operations (``incremental``) or the AlterConfigs replacement set;
        MetadataError on failure.  ``metrics`` and ``match`` are lists (APPEND / SUBTRACT)."""
        if not name:
            raise MetadataError(ErrorCode.INVALID_REQUEST, "Subscription name can't be empty")
        for key, op, value in changes:
            if op != OP_DELETE and value is None:
                raise MetadataError(ErrorCode.INVALID_REQUEST, f"Null value not supported for : {key}")
        current = self._configs.get(name, {}) if incremental else {}
        new = apply_config_ops(current, changes, validate_name, LIST_CONFIGS, ErrorCode.INVALID_REQUEST)
        validate(name, new)
        if validate_only:
            return
        self.set(name, new)

    def set(self, name: str, configs: dict[str, str]) -> None:
        """Replace a subscription's configs (already validated; empty removes it), save, tell the listeners."""
        before = self._configs.get(name, {})
        if configs:
            self._configs[name] = dict(configs)
            self._subscriptions[name] = SubscriptionInfo.of(name, configs)
        elif name in self._configs:
            del self._configs[name]
            del self._subscriptions[name]
        else:
            return  # Kafka ignores the removal of a subscription that does not exist
        self._write(name, before, configs)
        log.info("client metrics subscription %s now %s", name, configs or "removed")
        for listener in list(self.listeners):
            listener(name)

    def _set(self, name: str, configs: dict[str, str]) -> None:
        self.set(name, configs)

    # -- persistence --------------------------------------------------------------------------------
    def _load(self) -> None:
        if self.path is None or not self.path.exists():
            return
        try:
            data = json.loads(self.path.read_text())
            subscriptions = data["subscriptions"]
            if not isinstance(subscriptions, dict):
                raise TypeError("subscriptions is not an object")
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log.error("cannot read the client metrics subscriptions in %s: %s; starting without them", self.path, exc)
            return
        self._take(subscriptions, str(self.path))

    def _take(self, subscriptions: dict, where: str) -> None:
        """Keep the valid subscriptions of ``subscriptions`` (name -> config -> value); one not valid is left out,
        with an error logged."""
        for name, configs in subscriptions.items():
            try:
                if not isinstance(configs, dict) or not all(isinstance(v, str) for v in configs.values()):
                    raise TypeError("not a map of strings")
                validate(name, configs)
            except (MetadataError, TypeError) as exc:
                log.error("ignoring the saved client metrics subscription %s: %s", name, exc)
                continue
            self._configs[name] = dict(configs)
            self._subscriptions[name] = SubscriptionInfo.of(name, configs)
        if subscriptions:
            log.info("loaded %d client metrics subscription(s) from %s", len(self._configs), where)

    def _stored(self) -> dict[str, dict[str, str]]:
        return self._configs

    def _save(self) -> None:
        if self.path is None:
            return
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps({"version": 1, "subscriptions": self._configs}, indent=1, sort_keys=True))
        os.replace(tmp, self.path)
