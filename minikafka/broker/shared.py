"""The services the brokers of one cluster share, built in one place.

What a Kafka cluster keeps in its controller's metadata or in replicated internal topics, minikafka keeps
once per process: topic metadata, the group, share-group and transaction coordinators, producer ids,
dynamic configs, feature levels, ACLs, SCRAM credentials, delegation tokens, per-group configs,
share-partition state, KIP-714 client-metrics subscriptions and fault rules.  :meth:`SharedServices.create`
builds them all: a lone :class:`~minikafka.broker.broker.Broker` builds its own (and runs them), a
:class:`~minikafka.broker.cluster.Cluster` builds one set, runs it and hands it to each of its brokers.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import trio

from ..common import Clock
from .client_metrics.configs import ClientMetricsConfigStore
from .client_metrics.receiver import ClientTelemetryStore
from .config import BrokerConfig, ConfigError, StartupError
from .coordinator_log import compacted_log_config
from .dynamic_config import DynamicConfigStore
from .faults import FaultInjector
from .features import FeatureControlManager, FeaturesError
from .groups import GroupCoordinator
from .groups.group_config import GroupConfigManager
from .log.cleaner_manager import LogCleaner
from .metadata import ClusterMetadata
from .producer_state import ProducerIdManager
from .security.authorizer import AclStore, AclStoreError
from .security.delegation_token import DelegationTokenManager
from .security.scram import ScramCredentialStore
from .share.coordinator import ShareGroupCoordinator
from .share.partition_state import ShareStateStore
from .txn import TransactionCoordinator


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
    features: FeatureControlManager  # KIP-584 feature levels (<data_dir>/features.json)
    txn_coordinator: TransactionCoordinator
    scram_credentials: ScramCredentialStore  # <data_dir>/__scram_credentials, seeded from minikafka.scram.users
    delegation_tokens: DelegationTokenManager  # KIP-48, kept next to the SCRAM credentials
    acls: AclStore  # <data_dir>/acls.json
    group_configs: GroupConfigManager  # per-group dynamic configs, <data_dir>/group-configs.json
    share_groups: ShareGroupCoordinator  # KIP-932 share-group membership
    # KIP-932 share-partition state (as if __share_group_state were replicated): a partition's new leader
    # reads what the old one wrote, in <data_dir>/__share_group_state-0.
    share_state: ShareStateStore
    client_metrics_configs: ClientMetricsConfigStore  # KIP-714 subscriptions, <data_dir>/client-metrics-configs.json
    client_telemetry: ClientTelemetryStore  # what clients pushed to any broker

    @classmethod
    def create(cls, config: BrokerConfig, data_dir: Path | None, broker_ids: list[int], clock: Clock,
               faults: FaultInjector | None = None) -> SharedServices:
        """Build the services of brokers ``broker_ids`` configured by ``config``, their state in ``data_dir``
        (memory without one).  ConfigError / StartupError when a setting or a saved file is not valid."""
        metadata = ClusterMetadata(broker_ids, data_dir, max_partitions=config.max_partitions,
                                   offsets_topic_partitions=config.offsets_topic_num_partitions)
        group_coordinator = GroupCoordinator(config, data_dir, wall_clock=clock)
        producer_ids = ProducerIdManager()
        features = open_features(config, data_dir)
        txn_coordinator = TransactionCoordinator(config, data_dir, producer_ids, metadata, clock, group_coordinator,
                                                 features=features)
        scram_credentials = ScramCredentialStore.from_config(config, data_dir)
        delegation_tokens = DelegationTokenManager.from_config(config, data_dir, clock=clock)
        acls = open_acl_store(data_dir)
        group_configs = GroupConfigManager(config, data_dir)
        share_groups = share_group_coordinator(config, metadata, group_configs, group_coordinator)
        share_state = share_state_store(config, data_dir, metadata, clock)
        return cls(metadata=metadata, group_coordinator=group_coordinator, producer_ids=producer_ids,
                   dynamic_configs=DynamicConfigStore(), faults=faults if faults is not None else FaultInjector(clock),
                   features=features, txn_coordinator=txn_coordinator, scram_credentials=scram_credentials,
                   delegation_tokens=delegation_tokens, acls=acls, group_configs=group_configs,
                   share_groups=share_groups, share_state=share_state,
                   client_metrics_configs=ClientMetricsConfigStore(data_dir),
                   client_telemetry=ClientTelemetryStore(clock))

    async def start(self, nursery: trio.Nursery, config: BrokerConfig) -> None:
        """Run the coordinators in ``nursery`` (once per process: by the lone broker or the cluster), and
        the delegation tokens' expiry; returns once the transaction coordinator has loaded its state."""
        nursery.start_soon(self.group_coordinator.run)
        nursery.start_soon(self.share_groups.run)
        await nursery.start(self.txn_coordinator.run)
        nursery.start_soon(token_expiry_loop, self.delegation_tokens, config.delegation_token_expiry_check_interval_ms)

    def add_coordinator_logs(self, cleaner: LogCleaner) -> None:
        """Have ``cleaner`` compact ``__consumer_offsets``, ``__transaction_state`` and ``__share_group_state``
        (once per process, by whoever runs the coordinators)."""
        cleaner.add_source(self.group_coordinator.cleaner_targets)
        cleaner.add_source(self.txn_coordinator.cleaner_targets)
        cleaner.add_source(self.share_state.cleaner_targets)

    def close(self) -> None:
        """Close the coordinators and the share-partition state (by whoever runs them)."""
        self.group_coordinator.close()
        self.share_groups.close()
        self.txn_coordinator.close()
        self.share_state.close()


def share_group_coordinator(config: BrokerConfig, metadata: ClusterMetadata, group_configs: GroupConfigManager,
                            group_coordinator: GroupCoordinator) -> ShareGroupCoordinator:
    """The share-group coordinator of a broker or cluster: share group ids share one namespace with the
    classic/consumer groups of ``group_coordinator``."""
    share_groups = ShareGroupCoordinator(config, metadata, group_configs,
                                         other_group_exists=lambda group_id: group_coordinator.get_group(group_id)
                                         is not None)
    group_coordinator.share_group_exists = share_groups.exists
    return share_groups


def open_features(config: BrokerConfig, data_dir: Path | None) -> FeatureControlManager:
    """The cluster's feature levels: those saved in ``data_dir``, else ``minikafka.bootstrap.features``
    (ConfigError when that is not valid, StartupError when the saved ones cannot be read)."""
    try:
        settings = FeatureControlManager.parse_settings(config.bootstrap_features)
    except FeaturesError as exc:
        raise ConfigError("minikafka.bootstrap.features", config.bootstrap_features, str(exc)) from None
    try:
        return FeatureControlManager(data_dir, settings)
    except FeaturesError as exc:
        raise StartupError(str(exc)) from None


def open_acl_store(data_dir: Path | None) -> AclStore:
    """The ACLs saved in ``data_dir`` (none in memory); StartupError when they cannot be read."""
    try:
        return AclStore(data_dir)
    except AclStoreError as exc:
        raise StartupError(str(exc)) from None


def share_state_store(config: BrokerConfig, data_dir: Path | None, metadata: ClusterMetadata,
                      clock: Clock) -> ShareStateStore:
    """The ``__share_group_state`` store, a compacted log in ``data_dir`` (in memory without one)."""
    return ShareStateStore(data_dir, metadata, clock=clock, config=compacted_log_config(
        config.share_coordinator_state_topic_segment_bytes, config.topic_defaults()))


async def token_expiry_loop(tokens: DelegationTokenManager, interval_ms: int) -> None:
    """Remove expired delegation tokens every ``delegation.token.expiry.check.interval.ms`` (the KRaft
    controller's periodic ``sweepExpiredDelegationTokens``); one loop per cluster."""
    while True:
        await trio.sleep(interval_ms / 1000)
        tokens.expire_tokens()
