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
from .task_time import TaskTimeInstrument
from .metadata import ClusterMetadata, TopicMetadata
from .producer_state import ProducerIdManager
from .replica_manager import ReplicaManager
from .server import SocketServer

if TYPE_CHECKING:
    from .request import RequestContext

log = logging.getLogger(__name__)


class Broker:
    """A single Kafka broker."""

    def __init__(self, config: BrokerConfig, metadata: ClusterMetadata | None = None) -> None:
        from .groups import GroupCoordinator

        self.config = config
        self.node_id = config.node_id
        if config.data_dir is not None:
            config.data_dir.mkdir(parents=True, exist_ok=True)
        self.metadata = metadata or ClusterMetadata([config.node_id], config.data_dir)
        self.replica_manager = ReplicaManager(self)
        self.producer_ids = ProducerIdManager()
        self.group_coordinator = GroupCoordinator(config, config.data_dir)
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
        self.task_time = TaskTimeInstrument()
        self.fetch_manager = FetchManager(FetchSessionCache(
            config.max_incremental_fetch_session_cache_slots, config.min_incremental_fetch_session_eviction_ms))
        self.server = SocketServer(self)
        self.started_at = time.time()
        self.request_count = 0
        self.request_stats: dict[int, list[int]] = {}  # api key -> [requests, request bytes, response bytes]
        # Callables fn(ctx, frame, response_segments) run after each request is answered.
        self.request_observers: list[Callable[["RequestContext", bytes | bytearray, list | None], None]] = []

    @property
    def port(self) -> int:
        return self.config.port

    def brokers(self) -> list[tuple[int, str, int, str | None]]:
        """(node id, host, port, rack) of every broker in the cluster."""
        return [(self.node_id, self.config.advertised, self.config.port, None)]

    def controller_id(self) -> int:
        """The node that plays the controller (the lowest broker id)."""
        return min(self.metadata.broker_ids)

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Load state, start serving, run until cancelled, then close cleanly."""
        self.replica_manager.load()
        trio.lowlevel.add_instrument(self.task_time)
        try:
            async with trio.open_nursery() as nursery:
                self.nursery = nursery
                nursery.start_soon(self.group_coordinator.run)
                nursery.start_soon(self.quotas.reaper.run)
                nursery.start_soon(self._retention_loop)
                port = await nursery.start(self.server.serve)
                task_status.started(port)
        finally:
            self.quotas.reaper.release_all()
            try:
                trio.lowlevel.remove_instrument(self.task_time)
            except (KeyError, ValueError):
                pass
            self.close()

    def close(self) -> None:
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

    def metrics(self) -> dict[str, float]:
        """A snapshot of the broker's metrics under Kafka's JMX-style names."""
        from ..protocol.api import APIS

        out: dict[str, float] = dict(self.fetch_manager.cache.metrics())
        out.update(self.metrics_registry.snapshot())
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
