"""One broker: configuration, metadata, partitions, group coordinator and the socket server.

Models Kafka's ``KafkaServer``/``BrokerServer``: it wires the components and
runs them inside one Trio nursery (no hidden background tasks).  Use
:func:`serve_broker` as an async context manager from Python, or
``minikafka serve`` from the command line.
"""

from __future__ import annotations

import logging
import time
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, AsyncIterator, Callable

import trio

from .config import BrokerConfig
from ..metrics import MetricConfig, Metrics
from .fetch_session import FetchManager, FetchSessionCache
from .quota import QuotaConfigs, QuotaManagers
from .quota.entity import parse_quota_spec
from .quota.replication_quota_manager import (FOLLOWER_REPLICATION, FOLLOWER_THROTTLED_RATE,
                                              FOLLOWER_THROTTLED_REPLICAS, LEADER_REPLICATION,
                                              LEADER_THROTTLED_RATE, LEADER_THROTTLED_REPLICAS,
                                              UNLIMITED, ReplicationQuotaManager)
from .task_time import TaskTimeInstrument
from .metadata import ClusterMetadata, TopicMetadata
from .producer_state import ProducerIdManager
from .replica_manager import ReplicaManager
from .server import SocketServer

if TYPE_CHECKING:
    from .cluster import Cluster
    from .groups import GroupCoordinator
    from .request import RequestContext
    from ..capture.service import CaptureService

log = logging.getLogger(__name__)


class Broker:
    """A single Kafka broker."""

    def __init__(self, config: BrokerConfig, metadata: ClusterMetadata | None = None,
                 cluster: "Cluster | None" = None, group_coordinator: "GroupCoordinator | None" = None) -> None:
        from .groups import GroupCoordinator
        from .replica_fetcher import ReplicaFetcherManager

        self.config = config
        self.node_id = config.node_id
        self.cluster = cluster  # set when the broker is one of a Cluster's (shared metadata)
        if config.data_dir is not None:
            config.data_dir.mkdir(parents=True, exist_ok=True)
        self.metadata = metadata or ClusterMetadata([config.node_id], config.data_dir)
        self.fetcher_manager = ReplicaFetcherManager(self)
        self.replica_manager = ReplicaManager(self)
        self.producer_ids = ProducerIdManager()
        # A cluster shares one coordinator (its state survives the coordinator broker) and runs it.
        self._owns_groups = group_coordinator is None
        self.group_coordinator = group_coordinator or GroupCoordinator(config, config.data_dir)
        self.metrics_registry = Metrics(MetricConfig(samples=config.quota_window_num,
                                                     time_window_ms=config.quota_window_size_seconds * 1000))
        self.quota_configs = QuotaConfigs()
        for spec in config.client_quotas:
            entity, values = parse_quota_spec(spec)
            for key, value in values.items():
                self.quota_configs.set(entity, key, value)
        self.quotas = QuotaManagers(self.quota_configs, self.metrics_registry,
                                    window_num=config.quota_window_num,
                                    window_size_s=config.quota_window_size_seconds)
        self.leader_quota = ReplicationQuotaManager(
            LEADER_REPLICATION, self.metrics_registry, rate=config.leader_replication_throttled_rate,
            window_num=config.replication_quota_window_num,
            window_size_s=config.replication_quota_window_size_seconds)
        self.follower_quota = ReplicationQuotaManager(
            FOLLOWER_REPLICATION, self.metrics_registry, rate=config.follower_replication_throttled_rate,
            window_num=config.replication_quota_window_num,
            window_size_s=config.replication_quota_window_size_seconds)
        rm = self.replica_manager
        self.leader_quota.set_hosted(lambda: [k for k, p in rm.partitions.items() if p.is_leader])
        self.follower_quota.set_hosted(lambda: [k for k, p in rm.partitions.items() if not p.is_leader])
        # The start-up rates, which a deleted dynamic rate falls back to.
        self.static_rates = {LEADER_THROTTLED_RATE: config.leader_replication_throttled_rate,
                             FOLLOWER_THROTTLED_RATE: config.follower_replication_throttled_rate}
        self._dynamic_configs: dict[str, str] = {}
        self._dynamic_defaults: dict[str, str] = {}
        self.refresh_replication_rates()
        self.task_time = TaskTimeInstrument()
        self.fetch_manager = FetchManager(FetchSessionCache(
            config.max_incremental_fetch_session_cache_slots, config.min_incremental_fetch_session_eviction_ms))
        self.server = SocketServer(self)
        self.started_at = time.time()
        self.request_count = 0
        self.request_stats: dict[int, list[int]] = {}  # api key -> [requests, request bytes, response bytes]
        # Callables fn(ctx, frame, response_segments) run after each request is answered.
        self.request_observers: list[Callable[["RequestContext", bytes | bytearray, list | None], None]] = []
        self.capture: "CaptureService | None" = None  # set by run() when config.capture_dir is given

    @property
    def port(self) -> int:
        return self.config.port

    def brokers(self) -> list[tuple[int, str, int, str | None]]:
        """(node id, host, port, rack) of every live broker in the cluster."""
        if self.cluster is not None and self.metadata.live:
            return [(nid, host, port, rack) for nid, (host, port, rack) in sorted(self.metadata.live.items())]
        return [(self.node_id, self.config.advertised, self.config.port, None)]

    def controller_id(self) -> int:
        """The node that plays the controller (the lowest live broker id)."""
        if self.cluster is not None and self.metadata.live:
            return min(self.metadata.live)
        return min(self.metadata.broker_ids)

    def coordinator(self) -> tuple[int, str, int]:
        """(node id, host, port) of the group coordinator: this broker alone, else the lowest live one."""
        if self.cluster is not None and self.metadata.live:
            nid = min(self.metadata.live)
            host, port, _ = self.metadata.live[nid]
            return nid, host, port
        return self.node_id, self.config.advertised, self.config.port

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Load state, start serving, run until cancelled, then close cleanly."""
        self.replica_manager.load()
        trio.lowlevel.add_instrument(self.task_time)
        try:
            async with trio.open_nursery() as nursery:
                self.nursery = nursery
                if self._owns_groups:
                    nursery.start_soon(self.group_coordinator.run)
                nursery.start_soon(self.quotas.reaper.run)
                nursery.start_soon(self._retention_loop)
                if self.config.capture_dir is not None:
                    from ..capture.service import CaptureService

                    self.capture = CaptureService(self.config.capture_dir, self.node_id)
                    nursery.start_soon(self.capture.run)
                port = await nursery.start(self.server.serve)
                if self.capture is not None:
                    self.capture.server = f"{self.config.host}:{port}"
                if self.cluster is not None:
                    self._join_cluster(nursery)
                task_status.started(port)
        finally:
            if self.cluster is not None:
                self._leave_cluster()
            self.quotas.reaper.release_all()
            try:
                trio.lowlevel.remove_instrument(self.task_time)
            except (KeyError, ValueError):
                pass
            self.close()

    # -- cluster membership ---------------------------------------------------
    def _join_cluster(self, nursery: trio.Nursery) -> None:
        """Register with the shared metadata, take up leadership and start following."""
        self.fetcher_manager.start(nursery)
        self.metadata.listeners.append(self._on_metadata_change)
        for name in list(self.metadata.topics):
            self.apply_replication_throttles(name)
        self.metadata.broker_started(self.node_id, self.config.advertised, self.config.port)
        self.replica_manager.apply_leadership()
        nursery.start_soon(self._isr_expiration_loop)

    def _leave_cluster(self) -> None:
        try:
            self.metadata.listeners.remove(self._on_metadata_change)
        except ValueError:
            pass
        self.metadata.live.pop(self.node_id, None)

    def _on_metadata_change(self, kind: str, name: str) -> None:
        """What LeaderAndIsr / UpdateMetadata requests tell a Kafka broker."""
        rm = self.replica_manager
        if kind == "deleted":
            rm.remove_topic(name)
            self.apply_replication_throttles(name)
            return
        topic = self.metadata.get_topic(name)
        if topic is None:
            return
        if kind in ("created", "config"):
            self.apply_replication_throttles(name)
            if kind == "config":
                return
        if kind in ("created", "partitions"):
            rm.ensure_partitions(topic)
        rm.apply_leadership(name)

    async def _isr_expiration_loop(self) -> None:
        """Kafka's ``isr-expiration`` task, every replica.lag.time.max.ms / 2."""
        interval = max(self.config.replica_lag_time_max_ms / 2000, 0.01)
        while True:
            await trio.sleep(interval)
            self.replica_manager.maybe_shrink_isr(int(time.time() * 1000))

    # -- replication quotas (Kafka's TopicConfigHandler / DynamicConfig for the quotas) ----
    def apply_replication_throttles(self, name: str) -> None:
        """Mark a topic's throttled replicas in the leader and follower quotas (Kafka's
        ``TopicConfigHandler.processConfigChanges`` for the throttled-replicas configs)."""
        topic = self.metadata.get_topic(name)
        configs = topic.configs if topic is not None else {}
        self.leader_quota.update_topic(name, configs.get(LEADER_THROTTLED_REPLICAS), self.node_id)
        self.follower_quota.update_topic(name, configs.get(FOLLOWER_THROTTLED_REPLICAS), self.node_id)

    @property
    def dynamic_configs(self) -> dict[str, str]:
        """This broker's dynamic configs (kept by the cluster, so they survive a restart, as
        Kafka keeps them in its metadata)."""
        if self.cluster is not None:
            return self.cluster.dynamic_broker_configs.setdefault(self.node_id, {})
        return self._dynamic_configs

    @property
    def dynamic_defaults(self) -> dict[str, str]:
        """Cluster-wide dynamic broker defaults (resource name ``""``)."""
        if self.cluster is not None:
            return self.cluster.dynamic_broker_defaults
        return self._dynamic_defaults

    def broker_config_value(self, key: str) -> tuple[str, int]:
        """(value, Kafka ConfigSource) of a dynamic broker config: per-broker (2), cluster default (3),
        static (4) or default (5)."""
        if key in self.dynamic_configs:
            return self.dynamic_configs[key], 2
        if key in self.dynamic_defaults:
            return self.dynamic_defaults[key], 3
        static = self.static_rates[key]
        if static >= 0:
            return str(static), 4
        return str(UNLIMITED), 5

    def refresh_replication_rates(self) -> None:
        """Apply the effective ``leader/follower.replication.throttled.rate`` to the quotas
        (Kafka's ``DynamicReplicationQuota.reconfigure``; the static config is left as started)."""
        for key, quota in ((LEADER_THROTTLED_RATE, self.leader_quota), (FOLLOWER_THROTTLED_RATE, self.follower_quota)):
            rate = int(self.broker_config_value(key)[0])
            if rate >= UNLIMITED:
                rate = -1
            if rate != (-1 if not quota.limited else int(quota.quota.bound)):
                quota.update_quota(rate)

    def replication_quota_metrics(self) -> dict[str, float]:
        """The replication quotas under ``kafka.server:type=...`` names."""
        out: dict[str, float] = {}
        for q in (self.leader_quota, self.follower_quota):
            prefix = f"kafka.server:type={q.replication_type},name="
            out[prefix + "byte-rate"] = q.rate()
            out[prefix + "throttled-partitions"] = q.throttled_partition_count()
            out[prefix + "recorded-bytes-total"] = q.recorded_bytes
            out[prefix + "recorded-count"] = q.recorded_count
        return out

    def close(self) -> None:
        if self._owns_groups:
            self.group_coordinator.close()
        self.replica_manager.log_manager.close_all()
        log.info("broker %d stopped", self.node_id)

    async def _retention_loop(self) -> None:
        interval = self.config.log_retention_check_interval_ms / 1000
        while True:
            await trio.sleep(interval)
            deleted = self.replica_manager.log_manager.enforce_retention(int(time.time() * 1000))
            if deleted:
                log.info("retention deleted %d segment(s)", deleted)

    # -- topic administration ----------------------------------------------
    def create_topic(
        self,
        name: str,
        num_partitions: int = -1,
        replication_factor: int = -1,
        configs: dict[str, str] | None = None,
        assignments: dict[int, list[int]] | None = None,
    ) -> TopicMetadata:
        """Create a topic (defaults from num.partitions / default.replication.factor) and its logs."""
        if num_partitions == -1:
            num_partitions = self.config.num_partitions
        if replication_factor == -1:
            replication_factor = self.config.default_replication_factor
        topic = self.metadata.create_topic(name, num_partitions, replication_factor, configs, assignments)
        self.replica_manager.ensure_partitions(topic)
        return topic

    def auto_create_topic(self, name: str) -> TopicMetadata:
        """Create a topic as auto.create.topics.enable does (replication capped by the cluster size)."""
        rf = min(self.config.default_replication_factor, len(self.metadata.broker_ids))
        return self.create_topic(name, self.config.num_partitions, rf)

    def delete_topic(self, name: str) -> None:
        self.metadata.delete_topic(name)
        self.replica_manager.remove_topic(name)

    def add_partitions(self, name: str, total: int, assignments: list[list[int]] | None = None) -> None:
        topic = self.metadata.add_partitions(name, total, assignments)
        self.replica_manager.ensure_partitions(topic)

    # -- hooks from the socket server ---------------------------------------
    def on_request_done(self, ctx: "RequestContext", frame: bytes | bytearray, response: list | None) -> None:
        self.request_count += 1
        stats = self.request_stats.get(ctx.api_key)
        if stats is None:
            stats = self.request_stats[ctx.api_key] = [0, 0, 0]
        stats[0] += 1
        stats[1] += len(frame) + 4
        if response is not None:
            stats[2] += 4 + sum(len(s) if not isinstance(s, memoryview) else s.nbytes for s in response)
        for observe in self.request_observers:
            observe(ctx, frame, response)

    def on_response_sent(self, ctx: "RequestContext", frame: bytes | bytearray | list, response: list | None) -> None:
        """Called by the socket server when capture is on, once the response left (or, without one,
        once the request was handled): hands the pair to the capture writer.  ``frame`` is the request
        as received (a list of buffers for Produce, see :mod:`minikafka.capture.produce`)."""
        if self.capture is not None:
            self.capture.record(ctx, frame, response)

    def metrics(self) -> dict[str, float]:
        """A snapshot of the broker's metrics under Kafka's JMX-style names."""
        from ..protocol.api import APIS

        out: dict[str, float] = dict(self.fetch_manager.cache.metrics())
        out.update(self.fetcher_manager.metrics())
        if self.cluster is not None:
            out.update(self.replica_manager.replication_metrics())
        out.update(self.metrics_registry.snapshot())
        out.update(self.replication_quota_metrics())
        for key, (count, req_bytes, resp_bytes) in sorted(self.request_stats.items()):
            name = APIS[key].name if key in APIS else str(key)
            out[f"kafka.network:type=RequestMetrics,name=RequestsTotal,request={name}"] = count
            out[f"kafka.network:type=RequestMetrics,name=RequestBytesTotal,request={name}"] = req_bytes
            out[f"kafka.network:type=RequestMetrics,name=ResponseBytesTotal,request={name}"] = resp_bytes
        return out

    def on_connection_closed(self, connection_id: str) -> None:
        pass


@asynccontextmanager
async def serve_broker(config: BrokerConfig | None = None, **kwargs) -> AsyncIterator[Broker]:
    """Run a broker for the duration of an ``async with`` block (port 0 picks a free port)."""
    if config is None:
        config = BrokerConfig(**{"port": 0, **kwargs})
    broker = Broker(config)
    async with trio.open_nursery() as nursery:
        await nursery.start(broker.run)
        try:
            yield broker
        finally:
            nursery.cancel_scope.cancel()
