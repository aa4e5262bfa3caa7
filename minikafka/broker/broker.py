"""One broker: the composition root that wires components and runs them.

Models Kafka's ``KafkaServer``/``BrokerServer``: it builds the components
(metadata cache, replica manager, purgatories, fetch sessions, group
coordinator, quota managers, replication quotas), hands each handler the
services it uses (:class:`~minikafka.broker.services.BrokerServices`,
:mod:`~minikafka.broker.handlers.registry`), puts
:class:`~minikafka.broker.apis.KafkaApis` behind the
:class:`~minikafka.broker.server.SocketServer`, and runs everything inside one
Trio nursery (no hidden background tasks).  Components shared by a cluster
(:class:`~minikafka.broker.shared.SharedServices`: metadata, coordinators, ACLs...)
are passed in by the :class:`~minikafka.broker.cluster.Cluster`; a lone broker
makes its own.  A traffic capture is handed in (:mod:`~minikafka.broker.recording`).
Use :func:`serve_broker` as an async context manager from Python, or
``minikafka serve`` from the command line.
"""

from __future__ import annotations

import logging
import math
import sys
import uuid
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import trio

from ..common import SYSTEM_CLOCK, Clock, TopicMetadata
from ..metrics import MetricConfig, Metrics
from ..protocol.api import APIS
from ..protocol.errors import ErrorCode
from ..protocol.framing import MemoryPool
from .apis import KafkaApis
from .broker_metrics import BrokerMetricsObserver, server_metrics
from .config import BrokerConfig, ConfigError, StartupError, check_data_dir
from .faults import BrokerFaults, FaultInjector
from .dynamic_config import DynamicBrokerConfig
from .fetch_session import FetchManager, FetchSessionCache
from .client_metrics.manager import ClientMetricsManager
from .client_metrics.receiver import ClientTelemetryStore
from .handlers.registry import build_handlers
from .metadata import MAX_PARTITIONS_PER_BATCH, ClusterMetadata, MetadataError
from .log.cleaner_manager import CleanerConfig, LogCleaner
from .purgatory import DelayedOperationPurgatory
from .quota import QuotaManagers, ThrottledChannelReaper
from .quota.replication_quota_manager import (FOLLOWER_REPLICATION, FOLLOWER_THROTTLED_RATE,
                                              FOLLOWER_THROTTLED_REPLICAS, LEADER_REPLICATION,
                                              LEADER_THROTTLED_RATE, LEADER_THROTTLED_REPLICAS,
                                              ReplicationQuotaManager)
from .replica_alter_log_dirs import ReplicaAlterLogDirsManager
from .replica_manager import ReplicaManager
from .request import ObserverBase, RequestObserver, Response
from .server import SocketServer, run_reaper
from .security.authorizer import AclStore, StandardAuthorizer, create_authorizer
from .security.delegation_token import DelegationTokenManager
from .security.scram import ScramCredentialStore
from .recording import CaptureSupport, TrafficRecorder
from .services import BrokerServices, HandlerTimer, ShareGroupMembership, ShareGroupOffsets, SharePartitions
from .shared import SharedServices, ensure_internal_topic
from .task_time import TaskTimeInstrument
from .inter_broker import CHANNEL_ERRORS, InterBrokerChannel, InterBrokerConnector
from .network_links import CONTROLLER, NetworkLinks
from .coordinator_runtime import CoordinatorReplica
from .partition import Partition
from ..protocol.coordinator_records import OFFSETS_TOPIC, SHARE_GROUP_STATE_TOPIC, TRANSACTION_STATE_TOPIC
from .txn.verification import AddPartitionsToTxnManager

if TYPE_CHECKING:
    from .broker_lifecycle import BrokerLifecycleManager
    from .security.authenticator import SaslServerAuthenticator, SaslServerMechanism
    from .groups import GroupCoordinator
    from .partition import Partition
    from .txn import TransactionCoordinator
    from .replica_fetcher import ReplicaFetcherManager
    from .share.coordinator import ShareGroupCoordinator
    from .share.manager import SharePartitionManager
    from .share.state_coordinator import ShareCoordinator

log = logging.getLogger(__name__)


class AutoTopicCreationManager:
    """Finds topics, creating missing ones as ``auto.create.topics.enable`` does (Kafka's
    ``AutoTopicCreationManager``: one CreateTopics per request, replication capped by the cluster size).

    Like the CreateTopics it stands for, one request may not create more than KRaft's 10,000 partitions:
    beyond that every missing topic of the request gets POLICY_VIOLATION and none is created.
    """

    def __init__(self, metadata: ClusterMetadata, config: BrokerConfig) -> None:
        self.metadata = metadata
        self.config = config

    def lookup_many(self, names: Iterable[str], auto_create: bool
                    ) -> dict[str, tuple[ErrorCode, TopicMetadata | None]]:
        out: dict[str, tuple[ErrorCode, TopicMetadata | None]] = {}
        missing: list[str] = []
        for name in names:
            if name in out:
                continue
            topic = self.metadata.get_topic(name)
            out[name] = (ErrorCode.NONE, topic) if topic is not None else (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None)
            if topic is None:
                missing.append(name)
        if not missing or not auto_create or not self.config.auto_create_topics_enable:
            return out
        partitions = self.config.num_partitions
        if len(missing) * partitions > MAX_PARTITIONS_PER_BATCH:
            for name in missing:
                out[name] = (ErrorCode.POLICY_VIOLATION, None)
            return out
        rf = min(self.config.default_replication_factor, len(self.metadata.broker_ids))
        for name in missing:
            try:
                out[name] = (ErrorCode.NONE, self.metadata.create_topic(name, partitions, rf))
            except MetadataError as exc:
                out[name] = (exc.code, None)
        return out


class BrokerSaslMechanisms:
    """The SASL mechanisms of this broker's listeners (the socket server's ``SaslMechanisms``):
    :mod:`~minikafka.broker.security.sasl` with the cluster's SCRAM credentials."""

    def __init__(self, config: BrokerConfig, scram: ScramCredentialStore, clock: Clock,
                 tokens: DelegationTokenManager | None = None) -> None:
        self.config = config
        self.scram = scram
        self.clock = clock
        self.tokens = tokens

    @property
    def authentication_error(self) -> type[Exception]:
        from .security.sasl import SaslAuthenticationError

        return SaslAuthenticationError

    def enabled(self, listener: str) -> list[str]:
        from .security.sasl import enabled_mechanisms

        mechanisms = enabled_mechanisms(self.config, listener)
        if not mechanisms:
            raise StartupError(f"listener {listener} uses SASL but enables no mechanism minikafka implements "
                               "(sasl.enabled.mechanisms: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER)")
        return mechanisms

    def create(self, listener: str, mechanism: str) -> SaslServerMechanism:
        from .security.sasl import create_mechanism

        return create_mechanism(mechanism, listener, self.config, self.scram, self.clock, self.tokens)


# The metrics of what a broker builds on first use, before it is built.
NO_SHARE_METRICS: dict[str, float] = {
    "kafka.server:type=ShareSessionCache,name=ShareSessionsCount": 0,
    "kafka.server:type=ShareSessionCache,name=SharePartitionsCount": 0,
    "kafka.server:type=share-group-metrics,name=share-partitions": 0,
    "kafka.server:type=share-group-metrics,name=acquisition-locks-expired-total": 0,
}
NO_FETCHER_METRICS: dict[str, float] = {"kafka.server:type=BrokerTopicMetrics,name=ReplicationBytesInPerSec": 0}


class _FetchersOnDemand:
    """A lone broker's replica fetchers (the replica manager's ``ReplicaFetchers``): it leads every partition, so
    they are built, and :mod:`~minikafka.broker.replica_fetcher` imported, only if a partition ever follows
    another broker (a data dir written by a cluster)."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    def add_partition(self, part: Partition, leader_id: int) -> None:
        self.broker.fetcher_manager.add_partition(part, leader_id)

    def remove_partition(self, part: Partition) -> None:
        if self.broker._fetcher_manager is not None:
            self.broker._fetcher_manager.remove_partition(part)

    def has_partition(self, part: Partition) -> bool:
        manager = self.broker._fetcher_manager
        return manager is not None and manager.has_partition(part)


class BrokerShareGroups:
    """KIP-932 share groups as a broker's handlers reach them (:class:`~minikafka.broker.services.ShareGroupAccess`):
    the cluster's share-group coordinator and this broker's share-partitions, built at their first use."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    def membership(self) -> ShareGroupMembership:
        return self.broker.share_groups

    def partitions(self) -> SharePartitions:
        return self.broker.share_partitions

    def offsets(self) -> ShareGroupOffsets:
        return self.broker.share_partitions

    def list_groups(self) -> list[tuple[str, str]]:
        return self.broker.shared.share.list_groups()

    def delete_group(self, group_id: str) -> ErrorCode:
        share = self.broker.shared.share
        return share.coordinator.delete_group(group_id) if share.built else ErrorCode.GROUP_ID_NOT_FOUND


class RequestStats(ObserverBase):
    """Per-api request counts and bytes (Kafka's ``RequestMetrics`` totals), counted before the response
    leaves so that a client reading the broker's metrics after its response sees its own request."""

    def __init__(self) -> None:
        self.count = 0
        self.by_api: dict[int, list[int]] = {}  # api key -> [requests, request bytes, response bytes]

    def on_response(self, response: Response) -> None:
        ctx = response.request.context
        self.count += 1
        stats = self.by_api.get(ctx.api_key)
        if stats is None:
            stats = self.by_api[ctx.api_key] = [0, 0, 0]
        stats[0] += 1
        stats[1] += ctx.request_size + 4
        stats[2] += response.size

    def metrics(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for key, (count, req_bytes, resp_bytes) in sorted(self.by_api.items()):
            name = APIS[key].name if key in APIS else str(key)
            out[f"kafka.network:type=RequestMetrics,name=RequestsTotal,request={name}"] = count
            out[f"kafka.network:type=RequestMetrics,name=RequestBytesTotal,request={name}"] = req_bytes
            out[f"kafka.network:type=RequestMetrics,name=ResponseBytesTotal,request={name}"] = resp_bytes
        return out


def broker_authorizer(config: BrokerConfig, acls: AclStore) -> StandardAuthorizer | None:
    """The authorizer ``authorizer.class.name`` names (None: no authorization); ConfigError otherwise."""
    try:
        return create_authorizer(config.authorizer_class_name, config.super_users,
                                 config.allow_everyone_if_no_acl_found, acls)
    except ValueError as exc:
        raise ConfigError("authorizer.class.name", config.authorizer_class_name, str(exc)) from None


class Broker:
    """A single Kafka broker."""

    def __init__(self, config: BrokerConfig, shared: SharedServices | None = None, *,
                 clock: Clock = SYSTEM_CLOCK, timer: HandlerTimer | None = None,
                 faults: FaultInjector | None = None, captures: CaptureSupport | None = None,
                 request_metrics: bool = True) -> None:
        """``shared``: a cluster's services (None: a lone broker, which builds, runs and closes its own).
        ``captures``: how to capture this broker's traffic (:data:`minikafka.capture.recorder.CAPTURE`,
        handed in by whoever starts the broker); needed for ``capture_dir`` and :meth:`start_capture`.
        ``timer`` measures handler run time for request quotas (default: each Trio task's own run time,
        :class:`~minikafka.broker.task_time.TaskTimeInstrument`); tests inject a deterministic one.
        ``faults``: the fault rules of a lone broker (default: its own; a cluster's are in ``shared``).
        ``request_metrics``: count Kafka's per-request metrics (``RequestMetrics``: requests, bytes, ``TotalTimeMs``,
        ``ErrorsPerSec``; ``BrokerTopicMetrics``: bytes and messages in and out) as each response is made and sent.
        Without them (a broker nobody can ask for its metrics: ``minikafka serve`` without an HTTP port) those
        counts stay 0 and :attr:`request_stats` empty, and every request costs some 5 us less of CPU; Kafka
        always counts them."""
        self.config = config
        self.node_id = config.node_id
        self.clock = clock
        if config.capture_dir is not None and captures is None:
            raise StartupError(f"capture dir {config.capture_dir} set but the broker was given no capture "
                               "(captures=minikafka.capture.recorder.CAPTURE)")
        self.captures = captures
        for directory in config.all_log_dirs:  # data_dir first
            check_data_dir(directory)
        # A lone broker runs (and closes) its coordinators; a cluster's brokers report replication metrics.
        self.owns_shared = shared is None
        # process.roles=broker: the controller is another process, reached over the wire (register, heartbeat,
        # fetch its metadata log, AlterPartition, forwarded admin requests).
        self.remote = config.process_roles == "broker"
        self.clustered = shared is not None or self.remote
        # Set by Cluster.crash_broker: stopping leaves the registration in place, as a crashed process does.
        self.crashed = False
        if shared is None:
            shared = SharedServices.create(config, config.data_dir, [config.node_id], clock, faults)
        jaas = config.jaas_configs()
        if jaas:  # parsed here: a typo stops the broker rather than each login (the SASL modules load only then)
            from .security.sasl import validate_jaas_configs

            validate_jaas_configs(jaas)
        self.shared = shared
        self.features = shared.features
        self.group_configs = shared.group_configs
        self.client_metrics_configs = shared.client_metrics_configs
        # KIP-714: this broker's client instances, matched against the cluster's subscriptions.
        self.client_metrics = ClientMetricsManager(shared.client_metrics_configs, shared.client_telemetry,
                                                   config.telemetry_max_bytes, clock)
        # ACL authorization (Kafka's authorizer.class.name); None: every request is allowed.
        self.authorizer = broker_authorizer(config, shared.acls)
        self.txn_coordinator = shared.txn_coordinator
        self.scram_credentials = shared.scram_credentials
        self.delegation_tokens = shared.delegation_tokens
        self.faults = shared.faults
        self.metadata = shared.metadata
        self.group_coordinator = shared.group_coordinator
        # A cluster's injected failures (a pause, cut links); None for a lone broker, which has neither (a broker
        # process is paused and cut off by the operating system).
        self.links: NetworkLinks | None = shared.links if self.clustered and not self.remote else None
        # Metadata changes made while this broker could not hear the controller, applied once it can.
        self._missed_metadata: dict[tuple[str, str], None] = {}
        self.producer_ids = shared.producer_ids
        self.dynamic_config = DynamicBrokerConfig(self.node_id, shared.dynamic_configs)
        self.metrics_registry = Metrics(MetricConfig(samples=config.quota_window_num,
                                                     time_window_ms=config.quota_window_size_seconds * 1000))
        # Client quotas: configs by entity, and the managers that own muting through the reaper.
        self.quota_configs = shared.quota_configs
        self.reaper = ThrottledChannelReaper(trio.current_time)
        self.quotas = QuotaManagers(self.quota_configs, self.metrics_registry, window_num=config.quota_window_num,
                                    window_size_s=config.quota_window_size_seconds, reaper=self.reaper,
                                    clock=clock)
        self.leader_quota = self._replication_quota(LEADER_REPLICATION, config.leader_replication_throttled_rate)
        self.follower_quota = self._replication_quota(FOLLOWER_REPLICATION,
                                                      config.follower_replication_throttled_rate)
        self._tasks: trio.Nursery | None = None  # run()'s, for the tasks of what is built on first use
        self._joined = False  # registered with the metadata (run() between _join and _leave)
        self._requested_topics: set[str] = set()  # asked of a controller in another process, not yet answered
        # Partitions, their logs and the requests waiting on them.
        self.delayed_fetch = DelayedOperationPurgatory("Fetch")
        self.delayed_produce = DelayedOperationPurgatory("Produce")
        self.replica_manager = ReplicaManager(self.node_id, config, self.metadata, clock=clock,
                                              delayed_fetch=self.delayed_fetch, delayed_produce=self.delayed_produce)
        # Connections to other brokers go through the inter-broker listener (TLS, SASL as it says).
        self.inter_broker = InterBrokerConnector(config, self.links, lambda: self.node_id)
        if self.links is not None:
            self.replica_manager.controller_reachable = self._controller_reachable
        # The group coordinator's shards follow this broker's leadership of __consumer_offsets partitions.
        self.replica_manager.leadership_listener = self._on_replica_leadership
        # A lone broker leads every partition: its replica fetchers are built if one ever follows (see below).
        self._fetcher_manager: ReplicaFetcherManager | None = None
        if self.clustered:
            self.replica_manager.fetchers = self.fetcher_manager
        else:
            self.replica_manager.fetchers = _FetchersOnDemand(self)
        rm = self.replica_manager
        # The log cleaner compacts this broker's replicas of compacted topics (leaders and followers alike).
        self.log_cleaner = log_cleaner_for(config, rm.log_manager.data_dir, clock)
        # Replicas moving between this broker's log dirs (AlterReplicaLogDirs), copied by one task.
        alter_rate = config.replica_alter_log_dirs_io_max_bytes_per_second
        self.log_dirs = ReplicaAlterLogDirsManager(rm, cleaning=self.log_cleaner.manager.in_progress.__contains__,
                                                   chunk_bytes=config.replica_fetch_max_bytes,
                                                   max_bytes_per_second=None if alter_rate >= 1 << 62 else alter_rate)
        self.log_cleaner.add_source(rm.cleaner_targets)
        if self.owns_shared:  # a lone broker also compacts its coordinators' internal logs
            shared.add_coordinator_logs(self.log_cleaner)
        self.leader_quota.set_hosted(lambda: [k for k, p in rm.partitions.items() if p.is_leader])
        self.follower_quota.set_hosted(lambda: [k for k, p in rm.partitions.items() if not p.is_leader])
        # KIP-932 share-partitions this broker leads (their state is shared: a new leader reads it), built with
        # the share groups at their first use (:meth:`_build_share_partitions`).
        self._share_partitions: SharePartitionManager | None = None
        self.fetch_manager = FetchManager(FetchSessionCache(
            config.max_incremental_fetch_session_cache_slots, config.min_incremental_fetch_session_eviction_ms,
            clock=clock))
        self.task_time: HandlerTimer = timer or TaskTimeInstrument()
        # KIP-890 verification of transactional produce goes to the coordinator over the wire.
        self.txn_channel = InterBrokerChannel(f"broker-{self.node_id}-txn-verifier", self.metadata.live.get,
                                              connector=self.inter_broker)
        self.txn_verifier = AddPartitionsToTxnManager(self.txn_channel, self.metadata.transaction_coordinator)
        # The request path: services -> handlers -> KafkaApis -> socket server.
        self.request_stats_observer = RequestStats()
        self.broker_metrics_observer = BrokerMetricsObserver(self.metadata)
        handlers = build_handlers(self._services())
        self.lifecycle: BrokerLifecycleManager | None = None
        if self.remote:
            self.lifecycle = self._remote_controller(handlers)
        self.apis = KafkaApis(handlers, self.quotas, self.task_time, clock,
                              [self.request_stats_observer, self.broker_metrics_observer] if request_metrics else [],
                              BrokerFaults(self.faults, self.node_id, self._topic_name))
        self.pool = MemoryPool(config.queued_max_request_bytes)
        # SASL authentications that completed (Kafka's successful-(re)authentication-total).
        self.successful_authentications = 0
        self.successful_reauthentications = 0
        self.server = SocketServer(config, self.apis, self.pool,
                                   sasl=BrokerSaslMechanisms(config, self.scram_credentials, clock,
                                                             self.delegation_tokens),
                                   on_authenticated=self._on_authenticated,
                                   on_closed=self._connection_closed, links=self.links,
                                   processing=not self.remote)  # (a broker process: once caught up, below)
        self.capture: TrafficRecorder | None = None  # while capturing (config.capture_dir, or start_capture)
        self._capture_running: tuple[RequestObserver, trio.CancelScope, trio.Event] | None = None
        self._nursery: trio.Nursery | None = None  # run()'s, for the captures it starts while running
        self._serving = False

    def _remote_controller(self, handlers: dict) -> BrokerLifecycleManager:
        """What a broker whose controller is another process uses to reach it (``process.roles=broker``): the
        lifecycle manager (registration, heartbeats, the metadata log's loader, producer ids), AlterPartition
        for ISR changes, topics asked for, and the admin requests forwarded in an Envelope."""
        from .broker_lifecycle import BrokerLifecycleManager
        from .producer_state import ProducerIdBlocks
        from .controller_client import (FORWARDED_APIS, FORWARDED_CONFIGS, AlterPartitionManager,
                                        ControllerClient, ForwardingHandler, parse_controller_address)
        from .metadata_loader import MetadataLoader, MetadataReplica
        from .metadata_log import SECURITY_PROTOCOL_IDS

        cfg, metadata = self.config, self.metadata
        assert isinstance(metadata, MetadataReplica) and isinstance(self.producer_ids, ProducerIdBlocks)
        try:
            address = parse_controller_address(cfg.controller_quorum_bootstrap_servers)
        except ValueError as exc:
            raise ConfigError("controller.quorum.bootstrap.servers", cfg.controller_quorum_bootstrap_servers,
                              f"a broker (process.roles=broker) needs its controller's host:port: {exc}") from None
        client = self.controller_client = ControllerClient(self.node_id, address, cfg.cluster_id,
                                                           local_address=cfg.source_address or None)
        self.alter_partitions = AlterPartitionManager(client, metadata, self.replica_manager.on_isr_changed)
        self.replica_manager.alter_partition = self.alter_partitions.submit
        metadata.request_topic = self._request_topic
        metadata.publishers = self.shared.metadata_publishers()
        forwarding = ForwardingHandler(client)
        for key in FORWARDED_APIS:
            handlers[key] = forwarding.handle
        for key in FORWARDED_CONFIGS:
            handlers[key] = ForwardingHandler(client, local=handlers[key]).handle

        def publish(changes: dict[str, list[str]]) -> None:
            for name, kinds in changes.items():
                for kind in kinds:
                    metadata.notify(kind, name)

        def listeners() -> list[dict]:
            return [{"name": e.listener, "host": e.host, "port": e.port,
                     "security_protocol": SECURITY_PROTOCOL_IDS.get(e.security_protocol, 0)}
                    for e in cfg.advertised_endpoints(self.server.bound_ports)]

        loader = MetadataLoader(metadata, client.fetch_channel, cfg.inter_broker_endpoint().listener, publish,
                                node_id=self.node_id)
        return BrokerLifecycleManager(client, loader, listeners, None, cfg.broker_heartbeat_interval_ms,
                                      self.producer_ids, on_registered=self.replica_manager.apply_leadership)

    def _request_topic(self, name: str, partitions: int, replication_factor: int, configs: dict[str, str]) -> None:
        """Ask the controller for a topic this broker needs (auto-created, or a coordinator's internal topic)."""
        if self._tasks is None or name in self._requested_topics:
            return
        self._requested_topics.add(name)

        async def create() -> None:
            try:
                code = await self.controller_client.create_topic(name, partitions, replication_factor, configs)
                if code not in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS):
                    log.info("broker %d: the controller did not create %s: %s", self.node_id, name, code.name)
            except CHANNEL_ERRORS as exc:
                log.info("broker %d: cannot ask the controller for %s: %r", self.node_id, name, exc)
            finally:
                self._requested_topics.discard(name)

        self._tasks.start_soon(create)

    def _connection_closed(self, connection_id: str) -> None:
        if self._share_partitions is not None:
            self._share_partitions.connection_closed(connection_id)
        self.client_metrics.connection_closed(connection_id)

    # -- built on first use ------------------------------------------------------------------------
    @property
    def share_groups(self) -> ShareGroupCoordinator:
        """The KIP-932 share-group coordinator (shared by a cluster's brokers; built now if it was not yet)."""
        return self.shared.share_groups

    @property
    def share_partitions(self) -> SharePartitionManager:
        """This broker's KIP-932 share-partitions and share sessions (built now, with the share groups, if they
        were not yet)."""
        if self._share_partitions is None:
            self.shared.share.build()  # builds this broker's too once it has joined (_join registers for it)
        if self._share_partitions is None:
            self._build_share_partitions()
        assert self._share_partitions is not None
        return self._share_partitions

    def _build_share_partitions(self) -> None:
        """Build this broker's share-partitions (the share groups being built, or used before it joined)."""
        if self._share_partitions is not None:
            return
        from .share.manager import SharePartitionManager

        state = self.shared.share.state
        if self._share_partitions is not None:  # built by building the share groups
            return
        shares = self._share_partitions = SharePartitionManager(
            self.config, state, group_configs=self.group_configs, partitions=self.replica_manager,
            notify=self.delayed_fetch.check_and_complete, wall_clock=self.clock, broker_id=self.node_id)
        if self._tasks is not None:
            self._tasks.start_soon(shares.run)
        if self._joined:
            self.shared.share.coordinator.group_listeners.append(shares.delete_group)

    @property
    def fetcher_manager(self) -> ReplicaFetcherManager:
        """This broker's replica fetchers (a lone broker's are built now if they were not yet)."""
        if self._fetcher_manager is None:
            from .replica_fetcher import ReplicaFetcherManager

            manager = self._fetcher_manager = ReplicaFetcherManager(
                self.node_id, self.config, self.metadata, self.replica_manager, self.follower_quota, self.inter_broker,
                self.links)
            if self._tasks is not None and self._joined:
                manager.start(self._tasks)
        return self._fetcher_manager

    @property
    def client_telemetry(self) -> ClientTelemetryStore:
        """What clients pushed (KIP-714), shared by a cluster's brokers: ``/metrics`` exports it."""
        return self.shared.client_telemetry

    def _topic_name(self, topic_id: uuid.UUID) -> str | None:
        topic = self.metadata.get_topic_by_id(topic_id)
        return None if topic is None else topic.name

    def _replication_quota(self, kind: str, rate: int) -> ReplicationQuotaManager:
        cfg = self.config
        return ReplicationQuotaManager(kind, self.metrics_registry, rate=rate,
                                       window_num=cfg.replication_quota_window_num,
                                       window_size_s=cfg.replication_quota_window_size_seconds)

    def _services(self) -> BrokerServices:
        rm = self.replica_manager
        return BrokerServices(
            config=self.config, clock=self.clock, metadata=self.metadata, controller=self.metadata,
            topics=AutoTopicCreationManager(self.metadata, self.config), replica_manager=rm, fetch_log=rm,
            records_deleter=rm, delayed_fetch=self.delayed_fetch, delayed_produce=self.delayed_produce,
            fetch_sessions=self.fetch_manager, group_coordinator=self.group_coordinator,
            produce_quota=self.quotas.produce, fetch_quota=self.quotas.fetch, request_quota=self.quotas.request,
            leader_quota=self.leader_quota, quota_store=self.quota_configs, broker_configs=self.dynamic_config,
            producer_ids=self.producer_ids, timer=self.task_time, txn_coordinator=self.txn_coordinator,
            txn_verifier=self.txn_verifier, marker_log=rm, authorizer=self.authorizer,
            group_configs=self.group_configs, share=BrokerShareGroups(self),
            client_metrics_configs=self.client_metrics_configs, client_telemetry=self.client_metrics,
            reassignments=self.metadata, leader_election=self.metadata, metadata_quorum=self.metadata,
            scram_credentials=self.scram_credentials, delegation_tokens=self.delegation_tokens,
            log_dirs=self.log_dirs, features=self.features, ensure_offsets_topic=self.ensure_offsets_topic,
            ensure_transaction_topic=self.ensure_transaction_topic,
            ensure_share_state_topic=self.ensure_share_state_topic)

    # -- observers and metrics ---------------------------------------------------------------------
    def observe(self, observer: RequestObserver) -> RequestObserver:
        """Attach a request observer (capture, metrics, tests); returns it."""
        self.apis.observers.append(observer)
        return observer

    @property
    def request_stats(self) -> dict[int, list[int]]:
        """api key -> [requests, request bytes, response bytes]."""
        return self.request_stats_observer.by_api

    @property
    def request_count(self) -> int:
        return self.request_stats_observer.count

    @property
    def port(self) -> int:
        """The first listener's port."""
        return self.config.port

    @property
    def listener_ports(self) -> dict[str, int]:
        """Listener name -> the port it is bound to."""
        return self.server.bound_ports

    def bootstrap_for(self, listener: str) -> str:
        """``host:port`` clients connect to on ``listener`` (its advertised address)."""
        for e in self.config.advertised_endpoints(self.server.bound_ports):
            if e.listener == listener.upper():
                return f"{e.host}:{e.port}"
        raise KeyError(f"no advertised listener {listener}")

    def _on_authenticated(self, connection_id: str, authenticator: SaslServerAuthenticator) -> None:
        if authenticator.authentications > 1:
            self.successful_reauthentications += 1
        else:
            self.successful_authentications += 1
        log.debug("connection %s authenticated as %s with %s (authentication %d, session lifetime %d ms)",
                  connection_id, authenticator.principal, authenticator.mechanism_name,
                  authenticator.authentications, authenticator.session_lifetime_ms)

    def metrics(self) -> dict[str, float]:
        """A snapshot of the broker's metrics under Kafka's JMX-style names."""
        out: dict[str, float] = dict(self.fetch_manager.cache.metrics())
        out.update(self._share_partitions.metrics() if self._share_partitions is not None else NO_SHARE_METRICS)
        out.update(self._fetcher_manager.metrics() if self._fetcher_manager is not None else NO_FETCHER_METRICS)
        if self.clustered:
            out.update(self.replica_manager.replication_metrics())
        out.update(self.metrics_registry.snapshot())
        out.update(self.replication_quota_metrics())
        out.update(self.request_stats_observer.metrics())
        out.update(self.broker_metrics_observer.metrics())
        out.update(self.faults.metrics(self.node_id))
        out.update(self.log_cleaner.metrics())
        out.update(self.client_metrics.metrics())
        out.update(self.log_dirs.metrics())
        out.update(server_metrics(self.pool, self.server.open_connections, (self.delayed_fetch, self.delayed_produce)))
        prefix = "kafka.server:type=socket-server-metrics,name="
        out[prefix + "successful-authentication-total"] = self.successful_authentications
        out[prefix + "successful-reauthentication-total"] = self.successful_reauthentications
        out[prefix + "failed-authentication-total"] = self.server.failed_authentications
        out[prefix + "expired-connections-killed-count"] = self.server.expired_connections_killed
        return out

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

    # -- lifecycle ---------------------------------------------------------------------------------
    async def run(self, *, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
        """Load state, start serving, run until cancelled, then close cleanly."""
        self.replica_manager.load()
        if not self.remote:  # (a broker process's producer ids come in blocks from the controller)
            self.producer_ids.next_id = max(self.producer_ids.next_id, self.replica_manager.max_producer_id() + 1)
        # The task-time instrument installs itself at its first reading (only request quotas read it).
        instrument = self.task_time if isinstance(self.task_time, TaskTimeInstrument) else None
        try:
            # Capture writers run beside the broker, shielded, and stop only once its server has stopped: the
            # responses its connections finish while it shuts down are still written.
            async with trio.open_nursery() as captures:
                self._nursery = captures
                try:
                    async with trio.open_nursery() as nursery:
                        if self.owns_shared:
                            await self.shared.start(nursery, self.config)
                        self._tasks = nursery
                        nursery.start_soon(run_reaper, self.reaper)
                        nursery.start_soon(self.delayed_fetch.run_reaper)  # expires long polls and acks=all waits
                        nursery.start_soon(self.delayed_produce.run_reaper)
                        if self._share_partitions is not None:
                            nursery.start_soon(self._share_partitions.run)
                        nursery.start_soon(self._retention_loop)
                        nursery.start_soon(self.log_dirs.run)
                        await nursery.start(self.log_cleaner.run)
                        if self.config.capture_dir is not None:
                            self._start_capture(captures, self.config.capture_dir)
                        port = await nursery.start(self.server.serve)
                        if self.capture is not None:
                            self.capture.set_server(f"{self.config.host}:{port}")
                        self._join(nursery)
                        if self.lifecycle is not None:
                            self.alter_partitions.nursery = nursery
                            await self.lifecycle.start(nursery)  # (registered, the log applied up to it)
                            self.server.enable_request_processing()
                        self._serving = True
                        task_status.started(port)
                finally:
                    if self._capture_running is not None:
                        _observer, scope, done = self._capture_running
                        scope.cancel()  # the cancelled writer writes what is left, then closes its file
                        with trio.CancelScope(shield=True):
                            await done.wait()
        finally:
            self._nursery = self._tasks = None
            if self.lifecycle is not None:
                with trio.CancelScope(shield=True):
                    if not self.crashed:
                        await self.lifecycle.controlled_shutdown(5.0)
                    await self.controller_client.aclose()
            self._leave()
            with trio.CancelScope(shield=True):
                await self.txn_channel.aclose()
            self.reaper.release_all()
            if instrument is not None:
                instrument.uninstall()
            self.close()

    def _start_capture(self, nursery: trio.Nursery, directory: Path) -> TrafficRecorder:
        if self.captures is None:
            raise RuntimeError(f"broker {self.node_id} was given no capture")
        capture = self.capture = self.captures.recorder(directory, self.node_id, self.clock)
        observer = capture.observer
        # Shielded: the broker's shutdown cancels it only after the server stopped (see run), stop_capture at once.
        scope, done = trio.CancelScope(shield=True), trio.Event()

        async def write() -> None:
            try:
                with scope:
                    await capture.run()
            except Exception:  # disk full, directory gone...: the capture stops, never the broker
                log.exception("capture on broker %d failed: capture stopped", self.node_id)
                if self.capture is capture:
                    if observer in self.apis.observers:
                        self.apis.observers.remove(observer)
                    self.capture, self._capture_running = None, None
            finally:
                done.set()

        nursery.start_soon(write)
        self.observe(observer)
        self._capture_running = (observer, scope, done)
        return capture

    def start_capture(self, directory: Path) -> TrafficRecorder:
        """Start capturing this broker's traffic into ``directory`` while it runs (what ``serve
        --capture`` does from the start); RuntimeError when it already captures, is not running or was
        given no capture."""
        if self.capture is not None:
            raise RuntimeError(f"broker {self.node_id} already captures into {self.capture.directory}")
        if self._nursery is None or not self._serving:
            raise RuntimeError(f"broker {self.node_id} is not running")
        capture = self._start_capture(self._nursery, directory)
        capture.set_server(f"{self.config.host}:{self.port}")
        return capture

    async def stop_capture(self) -> TrafficRecorder | None:
        """Stop capturing: no more requests are handed over, what was is written and the file closed.
        Returns the stopped capture (None when there was none)."""
        capture, running = self.capture, self._capture_running
        self.capture, self._capture_running = None, None
        if capture is None or running is None:
            return None
        observer, scope, done = running
        if observer in self.apis.observers:
            self.apis.observers.remove(observer)
        # Let the writer hand what is queued to its worker thread first (bounded): the cancelled writer
        # writes what is left on the loop.
        with trio.move_on_after(5):
            while capture.pending_bytes and not done.is_set():
                await trio.sleep(0.05)
        scope.cancel()
        await done.wait()
        return capture

    def _join(self, nursery: trio.Nursery) -> None:
        """Register with the metadata (as a broker registers with the controller), take up leadership,
        start following and expiring the ISR."""
        self.shared.dynamic_configs.brokers[self.node_id] = self
        self.reconfigure()  # (the dynamic configs the metadata log held, or a cluster kept across a restart)
        # This broker's share-partitions are built with the share groups (now, if they are already).
        share = self.shared.share
        share.on_build.append(self._build_share_partitions)
        if share.built:
            self._build_share_partitions()
        if self._share_partitions is not None:
            share.coordinator.group_listeners.append(self._share_partitions.delete_group)
        self._joined = True
        self.reconfigure()
        if self._fetcher_manager is not None:
            self._fetcher_manager.start(nursery)
        self.metadata.listeners.append(self._on_metadata_change)
        if self.links is not None:
            self.links.listeners.append(self._on_links_change)
        for topic in self.metadata.all_topics():
            self.apply_replication_throttles(topic.name)
        if not self.remote:  # (a broker process registers with its controller over the wire: run())
            self._register()
        nursery.start_soon(self._isr_expiration_loop)
        if self.clustered and not self.remote:
            nursery.start_soon(self._heartbeat_loop)

    def _register(self) -> None:
        """Register with the controller (a new broker epoch) and take up what the metadata says this broker
        leads and follows."""
        advertised = self.config.advertised_endpoints(self.server.bound_ports)
        inter_broker = self.config.inter_broker_endpoint(self.server.bound_ports)
        self.metadata.broker_started(self.node_id, inter_broker.host, inter_broker.port,
                                     endpoints={e.listener: (e.host, e.port) for e in advertised},
                                     protocols={e.listener: e.security_protocol for e in advertised})
        self.replica_manager.apply_leadership()

    def _on_replica_leadership(self, part: Partition, leading: bool) -> None:
        """Kafka's ``onElection`` / ``onResignation``: a ``__consumer_offsets``, ``__transaction_state`` or
        ``__share_group_state`` partition this broker now leads is loaded here by its coordinator; one it no longer
        leads is unloaded."""
        if part.topic == OFFSETS_TOPIC:
            coordinator: GroupCoordinator | TransactionCoordinator | ShareCoordinator = self.group_coordinator
        elif part.topic == TRANSACTION_STATE_TOPIC:
            coordinator = self.txn_coordinator
        elif part.topic == SHARE_GROUP_STATE_TOPIC:
            coordinator = self.shared.share.state
        else:
            return
        if leading:
            coordinator.on_election(CoordinatorReplica(self.node_id, self.replica_manager, part, self.clock,
                                                       lambda: self._min_insync_replicas(part.topic)))
        else:
            coordinator.on_resignation(self.node_id, part.index)

    def _min_insync_replicas(self, topic_name: str) -> int:
        """The topic's ``min.insync.replicas`` (the broker's default when it sets none)."""
        topic = self.metadata.get_topic(topic_name)
        value = topic.configs.get("min.insync.replicas") if topic is not None else None
        return int(value) if value is not None else self.config.min_insync_replicas

    def ensure_offsets_topic(self) -> None:
        """Create ``__consumer_offsets`` if it does not exist yet (``offsets.topic.num.partitions`` partitions,
        ``offsets.topic.replication.factor`` replicas capped at the running brokers), as Kafka does at the
        first FindCoordinator for a group."""
        if OFFSETS_TOPIC not in self.metadata.topics:
            cfg = self.config
            ensure_internal_topic(self.metadata, OFFSETS_TOPIC, cfg.offsets_topic_num_partitions,
                                  cfg.offsets_topic_replication_factor, cfg.offsets_topic_segment_bytes)

    def ensure_transaction_topic(self) -> None:
        """Create ``__transaction_state`` if it does not exist yet (``transaction.state.log.num.partitions``
        partitions, ``transaction.state.log.replication.factor`` replicas and ``transaction.state.log.min.isr``
        as its ``min.insync.replicas``, both capped at the running brokers), as Kafka does at the first
        FindCoordinator for a transactional id."""
        if TRANSACTION_STATE_TOPIC not in self.metadata.topics:
            cfg = self.config
            ensure_internal_topic(self.metadata, TRANSACTION_STATE_TOPIC, cfg.transaction_state_log_num_partitions,
                                  cfg.transaction_state_log_replication_factor, cfg.transaction_state_log_segment_bytes,
                                  cfg.transaction_state_log_min_isr)

    def ensure_share_state_topic(self) -> None:
        """Create ``__share_group_state`` if it does not exist yet (``share.coordinator.state.topic.*``), as Kafka
        does at the first FindCoordinator for a share-partition."""
        self.shared.share.state.ensure_topic()

    def _controller_reachable(self) -> bool:
        """Whether this broker runs and reaches the controller (always, for a lone broker)."""
        return self.links is None or self.links.reachable(self.node_id, CONTROLLER)

    def _on_links_change(self) -> None:
        """Back in touch with the controller after a pause or a network partition: first the metadata changes
        this broker missed (it learns that it no longer leads, say), then, if the controller fenced it
        meanwhile, a new registration, as a KRaft broker's heartbeat is answered by a re-registration; only
        then are its requests served again (the links' waiters wake after their listeners)."""
        if not self._joined or not self._controller_reachable():
            return
        missed, self._missed_metadata = self._missed_metadata, {}
        for kind, name in missed:
            self._on_metadata_change(kind, name)
        if self.node_id not in self.metadata.live:
            log.info("broker %d: back in touch with the controller after being fenced; registering again",
                     self.node_id)
            self._register()
            self.shared.heartbeats.touch(self.node_id, self.clock.time_ms())

    def _leave(self) -> None:
        self.group_coordinator.on_broker_gone(self.node_id)  # its shards go, with their in-memory state
        self.txn_coordinator.on_broker_gone(self.node_id)
        self.shared.share.on_broker_gone(self.node_id)
        if self.links is not None and self._on_links_change in self.links.listeners:
            self.links.listeners.remove(self._on_links_change)
        self._missed_metadata.clear()
        if self.shared.dynamic_configs.brokers.get(self.node_id) is self:
            del self.shared.dynamic_configs.brokers[self.node_id]
        self._joined = False
        share = self.shared.share
        if self._build_share_partitions in share.on_build:
            share.on_build.remove(self._build_share_partitions)
        if self._share_partitions is not None and share.built:
            listeners = share.coordinator.group_listeners
            if self._share_partitions.delete_group in listeners:
                listeners.remove(self._share_partitions.delete_group)
        try:
            self.metadata.listeners.remove(self._on_metadata_change)
        except ValueError:
            pass
        if self.crashed:  # no controlled shutdown: registered until the controller fences it (session timeout)
            return
        self.shared.heartbeats.forget(self.node_id)
        self.metadata.live.pop(self.node_id, None)
        self.metadata.endpoints.pop(self.node_id, None)

    def _on_metadata_change(self, kind: str, name: str) -> None:
        """What LeaderAndIsr / UpdateMetadata requests tell a Kafka broker; kept for later while this broker is
        paused or cut off from the controller (:meth:`_on_links_change`)."""
        if self.links is not None and not self._controller_reachable():
            self._missed_metadata[(kind, name)] = None
            return
        rm = self.replica_manager
        if kind == "deleted":
            rm.remove_topic(name)
            self.log_cleaner.forget_topic(name)
            self.apply_replication_throttles(name)
            return
        topic = self.metadata.get_topic(name)
        if topic is None:
            return
        if kind in ("created", "config"):
            self.apply_replication_throttles(name)
            if kind == "config":
                rm.apply_log_config(topic)
                self.log_cleaner.wake()
                return
        if kind in ("created", "partitions", "reassignment"):
            rm.ensure_partitions(topic)  # a reassignment's new replicas start as followers
        if kind == "reassignment":
            for index in rm.remove_stale_replicas(topic):  # replicas moved away stop and delete their logs
                self.log_cleaner.forget_log(f"{name}-{index}")
        rm.apply_leadership(name)

    async def _heartbeat_loop(self) -> None:
        """KRaft's broker heartbeat: every ``broker.heartbeat.interval.ms`` the controller hears from this
        broker (:class:`~minikafka.broker.heartbeats.BrokerHeartbeatManager`); a broker of a cluster only.

        A running broker the controller fenced meanwhile (its session expired while the process stalled: the
        brokers share one loop) is unfenced by its next heartbeat, as KRaft's controller unfences a fenced broker
        whose heartbeats come back caught up: it registers again, and the offline partitions it is in sync for
        get it as their leader."""
        interval = max(self.config.broker_heartbeat_interval_ms / 1000, 0.001)
        while True:
            if self.links is not None:  # none while paused or cut off from the controller
                await self.links.wait_reachable(self.node_id, CONTROLLER)
            if self._joined and self.node_id not in self.metadata.live:
                await trio.lowlevel.checkpoint_if_cancelled()  # not a broker being stopped (its session ended)
                log.info("broker %d: fenced while it ran; its heartbeat unfences it", self.node_id)
                self._register()
            self.shared.heartbeats.touch(self.node_id, self.clock.time_ms())
            await trio.sleep(interval)

    async def _isr_expiration_loop(self) -> None:
        """Kafka's ``isr-expiration`` task, every replica.lag.time.max.ms / 2."""
        interval = max(self.config.replica_lag_time_max_ms / 2000, 0.01)
        while True:
            await trio.sleep(interval)
            if self.links is not None and self.links.active:
                await self.links.wait_running(self.node_id)
            self.replica_manager.maybe_shrink_isr(self.clock.time_ms())

    async def _retention_loop(self) -> None:
        interval = self.config.log_retention_check_interval_ms / 1000
        while True:
            await trio.sleep(interval)
            deleted = self.replica_manager.log_manager.enforce_retention(self.clock.time_ms())
            if deleted:
                log.info("retention deleted %d segment(s)", deleted)

    def close(self) -> None:
        if self.owns_shared:
            self.shared.close()
        if self._share_partitions is not None:
            self._share_partitions.close()
        self.client_metrics.close()
        self.replica_manager.log_manager.close_all()
        if self._serving:
            log.info("broker %d stopped", self.node_id)

    # -- replication quotas (Kafka's TopicConfigHandler / DynamicConfig for the quotas) ----------------
    def apply_replication_throttles(self, name: str) -> None:
        """Mark a topic's throttled replicas in the leader and follower quotas (Kafka's
        ``TopicConfigHandler.processConfigChanges`` for the throttled-replicas configs)."""
        topic = self.metadata.get_topic(name)
        configs = topic.configs if topic is not None else {}
        self.leader_quota.update_topic(name, configs.get(LEADER_THROTTLED_REPLICAS), self.node_id)
        self.follower_quota.update_topic(name, configs.get(FOLLOWER_THROTTLED_REPLICAS), self.node_id)

    def reconfigure(self) -> None:
        """Apply the effective ``leader/follower.replication.throttled.rate`` to the quotas
        (Kafka's ``DynamicReplicationQuota.reconfigure``; the static config is left as started)."""
        store = self.shared.dynamic_configs
        for key, quota in ((LEADER_THROTTLED_RATE, self.leader_quota), (FOLLOWER_THROTTLED_RATE, self.follower_quota)):
            rate = store.effective_rate(self.node_id, key)
            if rate != (-1 if not quota.limited else int(quota.quota.bound)):
                quota.update_quota(rate)

    # -- topic administration (conveniences for Python users and tests) -------------------------------
    def create_topic(self, name: str, num_partitions: int = -1, replication_factor: int = -1,
                     configs: dict[str, str] | None = None,
                     assignments: dict[int, list[int]] | None = None) -> TopicMetadata:
        """Create a topic (defaults from num.partitions / default.replication.factor) and its logs."""
        if num_partitions == -1:
            num_partitions = self.config.num_partitions
        if replication_factor == -1:
            replication_factor = self.config.default_replication_factor
        topic = self.metadata.create_topic(name, num_partitions, replication_factor, configs, assignments)
        self.replica_manager.ensure_partitions(topic)
        return topic

    def delete_topic(self, name: str) -> None:
        self.metadata.delete_topic(name)
        self.replica_manager.remove_topic(name)

    def add_partitions(self, name: str, total: int, assignments: list[list[int]] | None = None) -> None:
        topic = self.metadata.add_partitions(name, total, assignments)
        self.replica_manager.ensure_partitions(topic)


def log_cleaner_for(config: BrokerConfig, checkpoint_dir: Path | None, clock: Clock) -> LogCleaner:
    """A log cleaner configured by the broker's ``log.cleaner.*`` keys."""
    return LogCleaner(CleanerConfig(
        enable=config.log_cleaner_enable, threads=config.log_cleaner_threads,
        backoff_ms=config.log_cleaner_backoff_ms, dedupe_buffer_size=config.log_cleaner_dedupe_buffer_size,
        load_factor=config.log_cleaner_io_buffer_load_factor,
        io_max_bytes_per_second=(math.inf if config.log_cleaner_io_max_bytes_per_second >= sys.float_info.max
                                 else config.log_cleaner_io_max_bytes_per_second),
        processes=config.log_cleaner_processes),
        checkpoint_dir=checkpoint_dir, clock=clock)


@asynccontextmanager
async def serve_broker(config: BrokerConfig | None = None, *, clock: Clock = SYSTEM_CLOCK,
                       timer: HandlerTimer | None = None, captures: CaptureSupport | None = None,
                       request_metrics: bool = True, **kwargs: object) -> AsyncIterator[Broker]:
    """Run a broker for the duration of an ``async with`` block (port 0 picks a free port); ``captures`` and
    ``request_metrics`` as for :class:`Broker`."""
    if config is None:
        config = BrokerConfig(**{"port": 0, **kwargs})  # type: ignore[arg-type]
    broker = Broker(config, clock=clock, timer=timer, captures=captures, request_metrics=request_metrics)
    async with trio.open_nursery() as nursery:
        await nursery.start(broker.run)
        try:
            yield broker
        finally:
            nursery.cancel_scope.cancel()
