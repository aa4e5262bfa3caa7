"""Dynamic broker configs (Kafka's ``DynamicBrokerConfig`` with the broker half of ``ConfigAdminManager``).

Only the replication quota rates ``leader.replication.throttled.rate`` and
``follower.replication.throttled.rate`` change at run time, per broker (the
resource name is a broker id) or cluster-wide (the name ``""``).  The values
live in a :class:`DynamicConfigStore` that a cluster shares between its brokers;
with a data dir they are ``ConfigRecord`` s of resource type BROKER in the
metadata log, as Kafka keeps them (replayed at start; a broker process takes
them from its copy of the controller's log).  Each running broker registers a
:class:`ReconfigurableBroker` to be described and told of changes.
:class:`DynamicBrokerConfig` is one broker's view of it, the handlers'
:class:`~minikafka.broker.services.BrokerConfigs`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Protocol

from ..protocol.errors import ErrorCode
from .config import BrokerConfig
from .config_ops import ConfigRecords, apply_config_ops, config_changes
from .metadata import MetadataError
from .quota.replication_quota_manager import FOLLOWER_THROTTLED_RATE, LEADER_THROTTLED_RATE, UNLIMITED

log = logging.getLogger(__name__)

DYNAMIC_BROKER_CONFIGS = (LEADER_THROTTLED_RATE, FOLLOWER_THROTTLED_RATE)
#: ``ConfigResource.Type.BROKER``: a ConfigRecord's resource type for a broker's (or the cluster default) config.
BROKER_RESOURCE = 4
SOURCE_DYNAMIC_BROKER = 2
SOURCE_DYNAMIC_DEFAULT_BROKER = 3
SOURCE_STATIC_BROKER = 4
SOURCE_DEFAULT = 5


class ReconfigurableBroker(Protocol):
    """A running broker as dynamic configs see it."""

    @property
    def config(self) -> BrokerConfig: ...

    def reconfigure(self) -> None:
        """Apply the effective dynamic values (Kafka's ``Reconfigurable.reconfigure``)."""
        ...


@dataclass
class DynamicConfigStore:
    """Dynamic broker configs per broker id and cluster-wide defaults, plus the running brokers."""

    per_broker: dict[int, dict[str, str]] = field(default_factory=dict)
    defaults: dict[str, str] = field(default_factory=dict)
    brokers: dict[int, ReconfigurableBroker] = field(default_factory=dict)
    records: ConfigRecords | None = None  # where a change is written (the metadata log), if anywhere

    def attach(self, records: ConfigRecords) -> None:
        """Take the broker configs the metadata log holds and write each change there."""
        replayed = records.replayed_configs(BROKER_RESOURCE)
        if replayed is not None:
            self._take(replayed)
            self.records = records

    def replace(self, configs: dict[str, dict[str, str]]) -> None:
        """The broker configs a broker process's copy of its controller's metadata log holds now (by resource
        name: ``""`` the cluster default, else a broker id): taken, the running brokers reconfigured."""
        self._take(configs)
        for broker in list(self.brokers.values()):
            broker.reconfigure()

    def _take(self, configs: dict[str, dict[str, str]]) -> None:
        self.defaults = dict(configs.get("", {}))
        self.per_broker = {int(name): dict(values) for name, values in configs.items() if name.isdigit()}

    def value(self, node_id: int, key: str) -> tuple[str, int]:
        """(value, Kafka ConfigSource) of a dynamic config: per-broker (2), cluster default (3),
        static (4) or default (5)."""
        mine = self.per_broker.get(node_id, {})
        if key in mine:
            return mine[key], SOURCE_DYNAMIC_BROKER
        if key in self.defaults:
            return self.defaults[key], SOURCE_DYNAMIC_DEFAULT_BROKER
        broker = self.brokers.get(node_id)
        static = -1
        if broker is not None:
            cfg = broker.config
            static = (cfg.leader_replication_throttled_rate if key == LEADER_THROTTLED_RATE
                      else cfg.follower_replication_throttled_rate)
        if static >= 0:
            return str(static), SOURCE_STATIC_BROKER
        return str(UNLIMITED), SOURCE_DEFAULT

    def effective_rate(self, node_id: int, key: str) -> int:
        """The rate in force (bytes/s), -1 for unlimited."""
        rate = int(self.value(node_id, key)[0])
        return -1 if rate >= UNLIMITED else rate


def _check_rate(name: str, value: str | None) -> None:
    if name not in DYNAMIC_BROKER_CONFIGS:
        raise MetadataError(ErrorCode.INVALID_CONFIG, f"Cannot update these configs dynamically: Set({name})")
    if value is not None:
        try:
            ok = int(value) >= 0
        except ValueError:
            ok = False
        if not ok:
            raise MetadataError(ErrorCode.INVALID_CONFIG, f"Invalid value {value} for configuration {name}: "
                                                          "Expected a non-negative long")


class DynamicBrokerConfig:
    """One broker's handle on the dynamic configs: describes broker resources and alters them."""

    def __init__(self, node_id: int, store: DynamicConfigStore, any_broker: bool = False) -> None:
        """``any_broker``: a resource may name any broker id, running here or not (a controller's view)."""
        self.node_id = node_id
        self.store = store
        self.any_broker = any_broker

    def _target(self, name: str) -> int | None:
        if name in ("", str(self.node_id)):
            return self.node_id
        if name.isdigit() and (self.any_broker or int(name) in self.store.brokers):
            return int(name)
        return None

    def knows(self, resource_name: str) -> bool:
        return self._target(resource_name) is not None

    def describe(self, resource_name: str) -> dict[str, tuple[str, int]]:
        """The configs of the broker a resource names (this one for ``""``)."""
        node_id = self._target(resource_name)
        if node_id is None or node_id not in self.store.brokers:
            raise MetadataError(ErrorCode.INVALID_REQUEST, f"Unexpected broker id {resource_name}")
        cfg = self.store.brokers[node_id].config
        static = {
            "broker.id": str(node_id),
            "num.partitions": str(cfg.num_partitions),
            "auto.create.topics.enable": str(cfg.auto_create_topics_enable).lower(),
            "default.replication.factor": str(cfg.default_replication_factor),
            "message.max.bytes": str(cfg.message_max_bytes),
            "socket.request.max.bytes": str(cfg.socket_request_max_bytes),
            "log.segment.bytes": str(cfg.log_segment_bytes),
            "log.retention.ms": str(cfg.log_retention_ms),
            "log.retention.bytes": str(cfg.log_retention_bytes),
            "delete.topic.enable": str(cfg.delete_topic_enable).lower(),
            "min.insync.replicas": str(cfg.min_insync_replicas),
            "replication.quota.window.num": str(cfg.replication_quota_window_num),
            "replication.quota.window.size.seconds": str(cfg.replication_quota_window_size_seconds),
        }
        out = {name: (value, SOURCE_STATIC_BROKER) for name, value in static.items()}
        for name in DYNAMIC_BROKER_CONFIGS:
            out[name] = self.store.value(node_id, name)
        return out

    def alter(self, resource_name: str, changes: list[tuple[str, int, str | None]], incremental: bool,
              validate_only: bool) -> None:
        """Apply (or only validate) changes to a broker resource; raise MetadataError on failure."""
        if resource_name == "":
            targets = list(self.store.brokers)
            values = self.store.defaults
        else:
            node_id = self._target(resource_name)
            if node_id is None:
                raise MetadataError(ErrorCode.INVALID_REQUEST, f"Unexpected broker id {resource_name}")
            targets = [node_id]
            values = self.store.per_broker.setdefault(node_id, {})
        # Broker configs have no list values; an unknown operation stays INVALID_CONFIG here.
        new = apply_config_ops(values if incremental else {}, changes, _check_rate, frozenset(),
                               ErrorCode.INVALID_CONFIG)
        if validate_only:
            return
        changes_written = config_changes(values, new)
        values.clear()
        values.update(new)
        if self.store.records is not None and changes_written:
            self.store.records.write_configs(BROKER_RESOURCE, resource_name, changes_written)
        for nid in targets:
            broker = self.store.brokers.get(nid)
            if broker is not None:
                broker.reconfigure()
        log.info("broker %s dynamic configs now %s", resource_name or "<default>", new)
