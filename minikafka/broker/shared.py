"""The services the brokers of one cluster share, built in one place.

What a Kafka cluster keeps in its controller's metadata or in replicated internal topics, minikafka keeps
once per process: topic metadata, the group, share-group and transaction coordinators, producer ids,
dynamic configs, feature levels, ACLs, SCRAM credentials, delegation tokens, per-group configs,
share-partition state, KIP-714 client-metrics subscriptions and fault rules.  :meth:`SharedServices.create`
builds them all: a lone :class:`~minikafka.broker.broker.Broker` builds its own (and runs them), a
:class:`~minikafka.broker.cluster.Cluster` builds one set, runs it and hands it to each of its brokers.
KIP-932 share groups (:class:`ShareGroupServices`) are built, and their modules imported, when first used:
most brokers never see one, and a broker's start-up is the cost of what it uses (issue 27).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import trio

from ..common import Clock
from .client_metrics.configs import ClientMetricsConfigStore
from .client_metrics.receiver import ClientTelemetryStore
from .config import BrokerConfig, ConfigError, StartupError
from .coordinator_log import SHARE_GROUP_STATE_TOPIC, compacted_log_config
from .coordinator_log import has_local_log as has_local_coordinator_log
from .dynamic_config import BROKER_RESOURCE, DynamicConfigStore
from .faults import FaultInjector
from .features import FeatureControlManager
from .groups import GroupCoordinator
from .groups.group_config import GroupConfigManager
from .groups.offset_log import has_local_log
from .heartbeats import BrokerHeartbeatManager
from .log.cleaner_manager import CleanerTarget, LogCleaner
from .metadata import ClusterMetadata, MetadataError, metadata_settings
from .network_links import NetworkLinks
from .producer_state import ProducerIdManager
from .quota.entity import QuotaConfigs
from .cluster_stores import open_acl_store, open_dynamic_configs, open_features, open_quota_configs, token_expiry_loop
from .security.authorizer import AclStore
from .security.delegation_token import DelegationTokenManager
from .security.scram import ScramCredentialStore
from .txn import TransactionCoordinator
from .txn.state_manager import has_local_log as has_local_txn_log

if TYPE_CHECKING:
    from .metadata_image import MetadataState
    from .share.coordinator import ShareGroupCoordinator
    from .share.state_coordinator import ShareCoordinator

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class SharedServices:
    """What the brokers of one cluster share (a lone broker has its own set): every field is built by
    :meth:`create`."""

    metadata: ClusterMetadata
    group_coordinator: GroupCoordinator
    producer_ids: ProducerIdManager
    # Dynamic broker configs, per broker id and cluster-wide: kept here so they survive a broker restart.
    dynamic_configs: DynamicConfigStore
    faults: FaultInjector  # rules for every broker (rules match by broker id)
    features: FeatureControlManager  # KIP-584 feature levels (records of the metadata log)
    txn_coordinator: TransactionCoordinator
    scram_credentials: ScramCredentialStore  # records of the metadata log, seeded from minikafka.scram.users
    delegation_tokens: DelegationTokenManager  # KIP-48, records of the metadata log
    acls: AclStore  # records of <data_dir>/__cluster_metadata-0
    group_configs: GroupConfigManager  # per-group dynamic configs, ConfigRecords of the metadata log
    share: ShareGroupServices  # KIP-932 share groups, built on first use
    client_metrics_configs: ClientMetricsConfigStore  # KIP-714 subscriptions, ConfigRecords of the metadata log
    client_telemetry: ClientTelemetryStore  # what clients pushed to any broker
    heartbeats: BrokerHeartbeatManager  # the brokers' sessions with the controller (the cluster fences stale ones)
    links: NetworkLinks  # paused brokers and cut links (a cluster's injected failures)
    # Client quotas by entity (minikafka.client.quotas, then ClientQuotaRecords of the metadata log): each broker
    # enforces them on its own traffic, as Kafka's brokers do.
    quota_configs: QuotaConfigs

    @classmethod
    def create(cls, config: BrokerConfig, data_dir: Path | None, broker_ids: list[int], clock: Clock,
               faults: FaultInjector | None = None) -> SharedServices:
        """Build the services of brokers ``broker_ids`` configured by ``config``, their state in ``data_dir``
        (memory without one).  ConfigError / StartupError when a setting or a saved file is not valid.

        A broker whose controller is another process (``process.roles=broker``) gets a copy of the metadata fed
        by the controller's log (:class:`~minikafka.broker.metadata_loader.MetadataReplica`), producer ids in
        blocks from the controller, and keeps no metadata state of its own in ``data_dir``."""
        metadata: ClusterMetadata
        producer_ids: ProducerIdManager
        if config.process_roles == "broker":
            from .producer_state import ProducerIdBlocks
            from .metadata_loader import MetadataReplica

            metadata, producer_ids, data_dir = MetadataReplica(**metadata_settings(config)), ProducerIdBlocks(), None
        else:
            metadata = ClusterMetadata(broker_ids, data_dir, **metadata_settings(config))
            producer_ids = ProducerIdManager()
        # Its groups live on the replicated __consumer_offsets partitions; a local log left by an earlier version
        # is opened only to be carried over into them.
        group_coordinator = GroupCoordinator(config, data_dir if has_local_log(data_dir) else None, wall_clock=clock)
        group_coordinator.use_partitions()
        features = open_features(config, data_dir, metadata)
        # Its transactional ids live on the replicated __transaction_state partitions (a local log likewise).
        txn_coordinator = TransactionCoordinator(config, data_dir if has_local_txn_log(data_dir) else None,
                                                 producer_ids, metadata, clock, group_coordinator, features=features)
        txn_coordinator.use_partitions()
        scram_credentials = ScramCredentialStore.from_config(config, data_dir, metadata)
        delegation_tokens = DelegationTokenManager.from_config(config, data_dir, clock=clock, records=metadata)
        acls = open_acl_store(data_dir, metadata)
        group_configs = GroupConfigManager(config, data_dir, metadata)
        links = NetworkLinks()
        share = ShareGroupServices(config, data_dir, metadata, group_configs, group_coordinator, clock, links)
        # The transaction coordinator's markers come from the broker it runs on (FindCoordinator's answer).
        txn_coordinator.connector.links, txn_coordinator.connector.source = links, metadata.controller_id
        return cls(metadata=metadata, group_coordinator=group_coordinator, producer_ids=producer_ids,
                   dynamic_configs=open_dynamic_configs(metadata),
                   faults=faults if faults is not None else FaultInjector(clock),
                   features=features, txn_coordinator=txn_coordinator, scram_credentials=scram_credentials,
                   delegation_tokens=delegation_tokens, acls=acls, group_configs=group_configs,
                   share=share,
                   client_metrics_configs=ClientMetricsConfigStore(data_dir, metadata),
                   client_telemetry=ClientTelemetryStore(clock), heartbeats=BrokerHeartbeatManager(),
                   links=links, quota_configs=open_quota_configs(config, metadata))

    def metadata_publishers(self) -> dict[str, list[Callable[[MetadataState], None]]]:
        """What a broker process's copy of the metadata log changes in these stores (Kafka's metadata
        publishers), by what changed in it."""
        groups, subscriptions, brokers = self.group_configs, self.client_metrics_configs, self.dynamic_configs
        return {"acls": [lambda st: self.acls.replace(st.acls)],
                "scram": [lambda st: self.scram_credentials.replace(st.scram)],
                "tokens": [lambda st: self.delegation_tokens.replace(list(st.tokens.values()))],
                "features": [lambda st: self.features.replace(st.features, st.features_offset)],
                "configs": [lambda st: groups.replace(st.configs.get(groups.resource_type, {})),
                            lambda st: subscriptions.replace(st.configs.get(subscriptions.resource_type, {})),
                            lambda st: brokers.replace(st.configs.get(BROKER_RESOURCE, {}))],
                "quotas": [lambda st: self.quota_configs.replace(st.quotas)]}

    async def start(self, nursery: trio.Nursery, config: BrokerConfig) -> None:
        """Run the coordinators in ``nursery`` (once per process: by the lone broker or the cluster), and
        the delegation tokens' expiry; returns once the transaction coordinator has loaded its state."""
        nursery.start_soon(self.group_coordinator.run)
        self.share.start(nursery)
        await nursery.start(self.txn_coordinator.run)
        nursery.start_soon(token_expiry_loop, self.delegation_tokens, config.delegation_token_expiry_check_interval_ms)

    def add_coordinator_logs(self, cleaner: LogCleaner) -> None:
        """Have ``cleaner`` compact the local ``__consumer_offsets`` and ``__transaction_state`` logs of coordinators
        used on their own (once per process, by whoever runs the coordinators; the replicated partitions are
        compacted by their brokers' cleaners)."""
        cleaner.add_source(self.group_coordinator.cleaner_targets)
        cleaner.add_source(self.txn_coordinator.cleaner_targets)

    def close(self) -> None:
        """Close the coordinators and the metadata log (by whoever runs them)."""
        self.group_coordinator.close()
        self.txn_coordinator.close()
        self.share.close()
        self.metadata.close()

    @property
    def share_groups(self) -> ShareGroupCoordinator:
        """The KIP-932 share-group coordinator (built now if it was not yet)."""
        return self.share.coordinator


class ShareGroupServices:
    """KIP-932 share groups of a broker or cluster: the share-group coordinator (membership) and the share
    coordinator, which keeps the share-partition state on the replicated ``__share_group_state`` partitions
    (:mod:`~minikafka.broker.share.state_coordinator`).

    Both are built, and :mod:`minikafka.broker.share` imported, on first use (:meth:`build`, or reading
    :attr:`coordinator` / :attr:`state`): a ShareGroupHeartbeat, ShareFetch, a share-group offsets request, a
    broker becoming the leader of a ``__share_group_state`` partition...  Until then there is no share group
    (they live in memory), so listing them needs nothing built.  Those that build their own part when this is
    built (each broker's share-partitions) register in :attr:`on_build`."""

    def __init__(self, config: BrokerConfig, data_dir: Path | None, metadata: ClusterMetadata,
                 group_configs: GroupConfigManager, group_coordinator: GroupCoordinator, clock: Clock,
                 links: NetworkLinks | None = None) -> None:
        self._config = config
        self._data_dir = data_dir
        self._metadata = metadata
        self._group_configs = group_configs
        self._group_coordinator = group_coordinator
        self._clock = clock
        self._links = links
        self._built: tuple[ShareGroupCoordinator, ShareCoordinator] | None = None
        self._state: ShareCoordinator | None = None
        self._nursery: trio.Nursery | None = None  # where the coordinator's timer runs once started
        self._closed = False
        self.on_build: list[Callable[[], object]] = []

    @property
    def built(self) -> bool:
        return self._built is not None

    def build(self) -> tuple[ShareGroupCoordinator, ShareCoordinator]:
        """The share-group coordinator and the share coordinator, built (and started, when running) on the first
        call."""
        if self._built is None:
            state = self.state
            coordinator = share_group_coordinator(self._config, self._metadata, self._group_configs,
                                                  self._group_coordinator)
            if self._closed:  # used after the broker or cluster stopped: its state is read, never written
                coordinator.close()
            self._built = coordinator, state
            if self._nursery is not None:
                self._nursery.start_soon(coordinator.run)
            for hook in list(self.on_build):
                hook()
        return self._built

    @property
    def coordinator(self) -> ShareGroupCoordinator:
        return self.build()[0]

    @property
    def state(self) -> ShareCoordinator:
        """The share coordinator (built now if it was not yet; the share groups need not be)."""
        if self._state is None:
            state = self._state = share_coordinator(self._config, self._data_dir, self._metadata, self._clock,
                                                    self._links)
            if self._nursery is not None:
                self._nursery.start_soon(state.run_loads)
        return self._state

    def on_broker_gone(self, broker_id: int) -> None:
        """The broker stopped or crashed: the ``__share_group_state`` partitions loaded on it go."""
        if self._state is not None:
            self._state.on_broker_gone(broker_id)

    def list_groups(self) -> list[tuple[str, str]]:
        """(group id, state) of each share group, without building anything when there is none (before the first
        use, unless the group coordinator's partitions hold some)."""
        if self._built is None and self._group_coordinator.has_share_groups():
            self.build()
        return self._built[0].list_groups() if self._built is not None else []

    def start(self, nursery: trio.Nursery) -> None:
        """Run the coordinator's session timer in ``nursery`` (now if built, else once it is)."""
        self._nursery = nursery
        if self._built is not None:
            nursery.start_soon(self._built[0].run)
        if self._state is not None:
            nursery.start_soon(self._state.run_loads)

    def close(self) -> None:
        self._closed = True
        self._nursery = None
        if self._built is not None:
            self._built[0].close()


def share_group_coordinator(config: BrokerConfig, metadata: ClusterMetadata, group_configs: GroupConfigManager,
                            group_coordinator: GroupCoordinator) -> ShareGroupCoordinator:
    """The share-group coordinator of a broker or cluster: share group ids share one namespace with the
    classic/consumer groups of ``group_coordinator``."""
    from .share.coordinator import ShareGroupCoordinator

    share_groups = ShareGroupCoordinator(config, metadata, group_configs,
                                         other_group_exists=lambda group_id: group_coordinator.get_group(group_id)
                                         is not None)
    group_coordinator.share_group_exists = share_groups.exists
    # Its groups are kept on the group coordinator's __consumer_offsets partitions, as Kafka keeps them.
    share_groups.writer = group_coordinator
    group_coordinator.attach_share_groups(share_groups)
    return share_groups


def share_coordinator(config: BrokerConfig, data_dir: Path | None, metadata: ClusterMetadata, clock: Clock,
                      links: NetworkLinks | None) -> ShareCoordinator:
    """The share coordinator on the ``__share_group_state`` partitions (created at its first use), carrying over
    what a local store of an earlier version kept in ``data_dir``."""
    from .share.partition_state import ShareStateStore
    from .share.state_coordinator import ShareCoordinator

    legacy = None
    if has_local_share_log(data_dir):
        legacy = ShareStateStore(data_dir, metadata, clock=clock, config=compacted_log_config(
            config.share_coordinator_state_topic_segment_bytes, config.topic_defaults()))

    def ensure_topic() -> None:
        ensure_internal_topic(metadata, SHARE_GROUP_STATE_TOPIC, config.share_coordinator_state_topic_num_partitions,
                              config.share_coordinator_state_topic_replication_factor,
                              config.share_coordinator_state_topic_segment_bytes,
                              config.share_coordinator_state_topic_min_isr)

    def reachable(broker: int, coordinator: int) -> bool:
        return links is None or broker == coordinator or (links.reachable(broker, coordinator)
                                                          and links.reachable(coordinator, broker))

    return ShareCoordinator(config.share_coordinator_state_topic_num_partitions, metadata,
                            write_timeout_ms=config.share_coordinator_write_timeout_ms, ensure_topic=ensure_topic,
                            reachable=reachable, legacy=legacy)


def has_local_share_log(data_dir: Path | None) -> bool:
    """Whether ``data_dir`` holds the share-partition state of an earlier version's local store (its log, or
    its JSON lines ``__share_group_state/state.log``), without importing :mod:`minikafka.broker.share`."""
    return has_local_coordinator_log(data_dir, SHARE_GROUP_STATE_TOPIC, SHARE_GROUP_STATE_TOPIC, "state.log")


def ensure_internal_topic(metadata: ClusterMetadata, name: str, partitions: int, replication_factor: int,
                          segment_bytes: int, min_isr: int | None = None) -> None:
    """Create a coordinator's compacted internal topic if it does not exist yet, as Kafka does at its first use:
    ``replication_factor`` replicas and ``min_isr`` as its ``min.insync.replicas``, both capped at the brokers new
    replicas can go to."""
    if name in metadata.topics:
        return
    configs = {"cleanup.policy": "compact", "segment.bytes": str(segment_bytes), "compression.type": "producer"}
    if min_isr is not None:
        replicas = min(replication_factor, len(metadata.placement_brokers()))
        configs["min.insync.replicas"] = str(max(1, min(min_isr, replicas)))
    try:
        metadata.ensure_internal_topic(name, partitions, replication_factor, configs)
    except MetadataError as exc:
        if not exc.pending:  # (a broker process asked its controller for it: it comes with the log)
            log.warning("cannot create %s: %s", name, exc)
