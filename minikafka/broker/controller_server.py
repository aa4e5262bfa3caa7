"""A controller process: ``process.roles=controller`` (Kafka's ``ControllerServer``, one voter).

It keeps the cluster's metadata as the ``__cluster_metadata`` log in its data dir (replayed when it starts) and
answers the brokers of other processes on its listener (:mod:`~minikafka.broker.controller_apis`): they
register, heartbeat, fetch the log, change ISRs and forward their admin requests here.  The decisions are
:class:`~minikafka.broker.quorum_controller.QuorumController`'s, as for the brokers of one process.
"""

from __future__ import annotations

import logging
from typing import Any

import trio

from ..common import SYSTEM_CLOCK, Clock
from ..metrics import MetricConfig, Metrics
from ..protocol.api import ApiKey
from ..protocol.framing import MemoryPool
from .apis import KafkaApis
from .config import BrokerConfig, ConfigError, StartupError
from .controller_apis import (AllocateProducerIdsHandler, AlterPartitionHandler, BrokerHeartbeatHandler,
                              BrokerRegistrationHandler, EnvelopeHandler, FetchSnapshotHandler, MetadataFetchHandler,
                              MetadataLogAppends)
from .handlers.api_versions import ApiVersionsHandler
from .dynamic_config import DynamicBrokerConfig
from .client_metrics.configs import ClientMetricsConfigStore
from .groups.group_config import GroupConfigManager
from .handlers.acls import CreateAclsHandler, DeleteAclsHandler
from .handlers.delegation_tokens import (CreateDelegationTokenHandler, ExpireDelegationTokenHandler,
                                         RenewDelegationTokenHandler)
from .handlers.features import UpdateFeaturesHandler
from .handlers.quotas import AlterClientQuotasHandler
from .handlers.scram import AlterUserScramCredentialsHandler
from .security.delegation_token import DelegationTokenManager
from .security.scram import ScramCredentialStore
from .cluster_stores import (open_acl_store, open_dynamic_configs, open_features, open_quota_configs,
                             token_expiry_loop)
from .handlers.configs import AlterConfigsHandler
from .handlers.elect_leaders import ElectLeadersHandler
from .handlers.quorum import DescribeQuorumHandler, UnregisterBrokerHandler
from .handlers.reassignments import AlterPartitionReassignmentsHandler, ListPartitionReassignmentsHandler
from .handlers.registry import Handler, supported_api_versions
from .handlers.topics import CreatePartitionsHandler, CreateTopicsHandler, DeleteTopicsHandler
from .heartbeats import BrokerHeartbeatManager
from .security.authorizer import create_authorizer
from .metadata import ClusterMetadata, metadata_settings
from .quota import QuotaConfigs, QuotaManagers, ThrottledChannelReaper
from .quorum_controller import QuorumController
from .server import SocketServer, run_reaper
from .task_time import TaskTimeInstrument

log = logging.getLogger(__name__)


class ControllerServer:
    """The controller of a cluster whose brokers run in other processes."""

    def __init__(self, config: BrokerConfig, clock: Clock = SYSTEM_CLOCK) -> None:
        if config.data_dir is None:
            raise StartupError("a controller (process.roles=controller) keeps the metadata log in its data dir: "
                               "set --data-dir")
        self.config = config
        self.node_id = config.node_id
        self.clock = clock
        self.metadata = ClusterMetadata([], config.data_dir, **metadata_settings(config))
        metadata_log = self.metadata.metadata_log
        assert metadata_log is not None
        self.appends = MetadataLogAppends()
        self.metadata.on_append.append(self.appends.appended)
        self.controller = QuorumController(
            self.metadata, BrokerHeartbeatManager(), clock, session_timeout_ms=config.broker_session_timeout_ms,
            heartbeat_interval_ms=config.broker_heartbeat_interval_ms,
            leader_imbalance_check_interval_s=config.leader_imbalance_check_interval_seconds,
            auto_leader_rebalance=config.auto_leader_rebalance_enable)
        # The brokers the log has registered are live until their sessions expire (they heartbeat at the epoch
        # they had, or register again), as a controller taking over knows every registration.
        listener = (config.inter_broker_listener_name or config.security_inter_broker_protocol or "PLAINTEXT").upper()
        restored = self.metadata.restore_registrations(
            lambda nodes: nodes.get(listener) or next(iter(nodes.values()), None))
        if restored:
            log.info("controller %d: brokers %s registered in the metadata log; their sessions start now",
                     self.node_id, restored)
        handlers = self._handlers(metadata_log)
        self.reaper = ThrottledChannelReaper(trio.current_time)
        metrics = Metrics(MetricConfig(samples=config.quota_window_num,
                                       time_window_ms=config.quota_window_size_seconds * 1000))
        quotas = QuotaManagers(QuotaConfigs(), metrics, window_num=config.quota_window_num,
                               window_size_s=config.quota_window_size_seconds, reaper=self.reaper, clock=clock)
        self.apis = KafkaApis(handlers, quotas, TaskTimeInstrument(), clock)
        self.server = SocketServer(config, self.apis, MemoryPool(config.queued_max_request_bytes))

    def _handlers(self, metadata_log: Any) -> dict[int, Handler]:
        cfg, controller, metadata = self.config, self.controller, self.metadata
        inter_broker_protocol = cfg.security_inter_broker_protocol or None
        # (ConfigRecords of brokers and the cluster default; no broker runs here)
        brokers = DynamicBrokerConfig(self.node_id, open_dynamic_configs(metadata), any_broker=True)
        # The ACLs are records of the metadata log (brokers apply them); checked here too, as Kafka's controller
        # authorizes what it is forwarded.
        try:
            authorizer = create_authorizer(cfg.authorizer_class_name, cfg.super_users,
                                           cfg.allow_everyone_if_no_acl_found, open_acl_store(cfg.data_dir, metadata))
        except ValueError as exc:
            raise ConfigError("authorizer.class.name", cfg.authorizer_class_name, str(exc)) from None
        # The stores whose changes are records of the log (brokers apply them: metadata_loader's publishers).
        groups, subscriptions = GroupConfigManager(cfg, cfg.data_dir, metadata), ClientMetricsConfigStore(
            cfg.data_dir, metadata)
        tokens = self.tokens = DelegationTokenManager.from_config(cfg, cfg.data_dir, clock=self.clock,
                                                                  records=metadata)
        scram, quotas = ScramCredentialStore.from_config(cfg, cfg.data_dir, metadata), open_quota_configs(cfg, metadata)
        features = open_features(cfg, cfg.data_dir, metadata)
        admin: dict[int, Handler] = {
            ApiKey.CREATE_TOPICS: CreateTopicsHandler(metadata, cfg, authorizer=authorizer).handle,
            ApiKey.DELETE_TOPICS: DeleteTopicsHandler(metadata, metadata, cfg, authorizer=authorizer).handle,
            ApiKey.CREATE_PARTITIONS: CreatePartitionsHandler(metadata, metadata, authorizer=authorizer).handle,
            ApiKey.ELECT_LEADERS: ElectLeadersHandler(metadata, metadata, authorizer=authorizer).handle,
            ApiKey.ALTER_PARTITION_REASSIGNMENTS: AlterPartitionReassignmentsHandler(metadata,
                                                                                     authorizer=authorizer).handle,
            ApiKey.LIST_PARTITION_REASSIGNMENTS: ListPartitionReassignmentsHandler(metadata,
                                                                                   authorizer=authorizer).handle,
            ApiKey.UNREGISTER_BROKER: UnregisterBrokerHandler(metadata, authorizer=authorizer).handle,
            ApiKey.CREATE_ACLS: CreateAclsHandler(authorizer).handle,
            ApiKey.DELETE_ACLS: DeleteAclsHandler(authorizer).handle,
            ApiKey.ALTER_USER_SCRAM_CREDENTIALS: AlterUserScramCredentialsHandler(scram, authorizer=authorizer).handle,
            ApiKey.CREATE_DELEGATION_TOKEN: CreateDelegationTokenHandler(tokens, authorizer=authorizer).handle,
            ApiKey.RENEW_DELEGATION_TOKEN: RenewDelegationTokenHandler(tokens).handle,
            ApiKey.EXPIRE_DELEGATION_TOKEN: ExpireDelegationTokenHandler(tokens).handle,
            ApiKey.UPDATE_FEATURES: UpdateFeaturesHandler(features, authorizer=authorizer).handle,
            ApiKey.ALTER_CLIENT_QUOTAS: AlterClientQuotasHandler(quotas, authorizer=authorizer).handle,
        }
        for key, incremental in ((ApiKey.ALTER_CONFIGS, False), (ApiKey.INCREMENTAL_ALTER_CONFIGS, True)):
            admin[key] = AlterConfigsHandler(metadata, metadata, brokers, incremental=incremental,
                                             authorizer=authorizer, groups=groups, client_metrics=subscriptions).handle
        handlers: dict[int, Handler] = {
            **admin,
            ApiKey.BROKER_REGISTRATION: BrokerRegistrationHandler(
                controller, cfg.cluster_id, cfg.inter_broker_listener_name or None,
                None if cfg.inter_broker_listener_name else inter_broker_protocol).handle,
            ApiKey.BROKER_HEARTBEAT: BrokerHeartbeatHandler(controller).handle,
            ApiKey.ALTER_PARTITION: AlterPartitionHandler(controller).handle,
            ApiKey.ALLOCATE_PRODUCER_IDS: AllocateProducerIdsHandler(controller).handle,
            ApiKey.FETCH: MetadataFetchHandler(metadata_log, self.appends).handle,
            ApiKey.FETCH_SNAPSHOT: FetchSnapshotHandler(metadata_log, self.node_id).handle,
            ApiKey.ENVELOPE: EnvelopeHandler(lambda: admin).handle,
            ApiKey.DESCRIBE_QUORUM: DescribeQuorumHandler(metadata, self.clock).handle,
        }
        handlers[ApiKey.API_VERSIONS] = ApiVersionsHandler(supported_api_versions(
            [*handlers, ApiKey.API_VERSIONS])).handle
        return handlers

    async def run(self, *, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
        """Serve until cancelled; started with the port it listens on."""
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(run_reaper, self.reaper)
                nursery.start_soon(self.controller.run)
                nursery.start_soon(token_expiry_loop, self.tokens,
                                   self.config.delegation_token_expiry_check_interval_ms)
                port = await nursery.start(self.server.serve)
                log.info("controller %d ready on %s:%d (metadata log at offset %d)", self.node_id, self.config.host,
                         port, self.metadata.metadata_offset)
                task_status.started(port)
        finally:
            self.metadata.close()
