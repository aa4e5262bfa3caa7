"""The narrow services request handlers depend on, as typed Protocols.

Kafka's ``KafkaApis`` gets its collaborators (replica manager, metadata cache,
group coordinator, quota managers, fetch manager, ...) through its
constructor; here each handler takes only the ones it uses, typed by the
Protocols below, so a handler can be built and unit-tested on in-memory
storage without a socket or a broker.  The concrete classes (``ReplicaManager``,
``ClusterMetadata``, ``GroupCoordinator``, ``ClientQuotaManager``, ...) satisfy
them structurally; :class:`BrokerServices` is the bundle the broker wires and
:mod:`~minikafka.broker.handlers.registry` hands out piece by piece.
"""

from __future__ import annotations

import uuid
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from ..common import Clock, Node, OffsetAndMetadata, PartitionMetadata, TopicMetadata, TopicPartition
from ..protocol.errors import ErrorCode
from .config import BrokerConfig

if TYPE_CHECKING:
    from ..protocol.bodies import Records
    from .groups.consumer.subscription import CompiledRegex
    from .client_metrics.manager import ClientMetricsInstance
    from .features import ApiError, FeatureUpdate
    from .request import RequestContext
    from .txn import ProducerIdAndEpoch, TransactionListing, TransactionMetadata
    from .fetch_session import FetchContext, PartitionKey, PartitionRequest
    from .groups.metadata import GroupOverview, GroupSummary, JoinResult, SyncResult
    from .groups.consumer.model import (ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResult,
                                        DescribedConsumerGroup)
    from .groups.group_config import GroupConfig
    from .share.coordinator import ShareGroupDescription, ShareGroupHeartbeatResult
    from .share.manager import ShareGroupSettings
    from .share.partition import AckBatch, AcquiredRecords, FetchedBatch, ShareAcquireMode, SharePartition
    from .share.session import ShareFetchContext, TopicIdPartition
    from .purgatory import Watch
    from .quota.entity import ClientQuotaEntity
    from .partition import Partition, ProduceResult
    from .security.acl import AclBinding, AclBindingFilter, AclOperation, ResourceType
    from .security.delegation_token import CreateTokenResult, DelegationToken, TokenInformation
    from .security.scram import AlterResult, Deletion, DescribeResult, Upsertion
    from .replica_alter_log_dirs import LogDirDescription


# -- partitions and logs (Kafka's ReplicaManager) ---------------------------------------------------
class PartitionLookup(Protocol):
    """The partitions this broker hosts and their in-sync replicas."""

    def get(self, topic: str, index: int) -> Partition | None: ...

    def isr(self, part: Partition) -> list[int]: ...


class ProduceLog(PartitionLookup, Protocol):
    """Appends produce batches as leader."""

    def append_records(self, part: Partition, records: Records, now_ms: int,
                       max_message_bytes: int) -> ProduceResult: ...


class FetchLog(PartitionLookup, Protocol):
    """The leader side of follower fetches."""

    def record_follower_fetch(self, part: Partition, replica_id: int, fetch_offset: int, now_ms: int,
                              broker_epoch: int = -1) -> None: ...


class RecordsDeleter(PartitionLookup, Protocol):
    """DeleteRecords: moves a partition's log start offset."""

    def delete_records(self, part: Partition, offset: int) -> int: ...


class TxnMarkerLog(PartitionLookup, Protocol):
    """WriteTxnMarkers: appends COMMIT/ABORT markers as leader."""

    def write_txn_marker(self, part: Partition, producer_id: int, producer_epoch: int, coordinator_epoch: int,
                         commit: bool, transaction_version: int = 0) -> ErrorCode: ...


class TxnVerifier(Protocol):
    """KIP-890 part 1: asks the transaction coordinator whether partitions are in a producer's transaction
    (part 2, ``add_partitions``: has it add them)."""

    async def verify(self, transactional_id: str, producer_id: int, producer_epoch: int,
                     partitions: list[TopicPartition], add_partitions: bool = False
                     ) -> dict[TopicPartition, ErrorCode]: ...


class DelayedOperations(Protocol):
    """Waits keyed by partition (Kafka's purgatories)."""

    def watch(self, keys: Iterable[Hashable]) -> Watch: ...


# -- metadata (Kafka's MetadataCache and controller) ---------------------------------------------------
class MetadataCache(Protocol):
    """What this broker knows of the cluster."""

    def get_topic(self, name: str) -> TopicMetadata | None: ...

    def get_topic_by_id(self, topic_id: uuid.UUID) -> TopicMetadata | None: ...

    def all_topics(self) -> Iterable[TopicMetadata]: ...

    def alive_brokers(self, listener: str | None = None) -> list[Node]:
        """The live brokers at their advertised address on ``listener`` (the one a request came in on)."""
        ...

    def controller_id(self) -> int: ...

    def transaction_coordinator(self, transactional_id: str, listener: str | None = None) -> Node:
        """The broker that coordinates ``transactional_id`` (the leader of its ``__transaction_state``
        partition), at its address on ``listener``."""
        ...

    def group_coordinator(self, group_id: str, listener: str | None = None) -> Node:
        """The broker that coordinates ``group_id`` (the leader of its ``__consumer_offsets`` partition), at
        its address on ``listener``."""
        ...

    def share_coordinator(self, partition: int, listener: str | None = None) -> Node:
        """The broker leading a ``__share_group_state`` partition, at its address on ``listener``."""
        ...

    def fenced_brokers(self, listener: str | None = None) -> list[Node]:
        """The registered brokers that are not running, at their address on ``listener``."""
        ...


class TopicController(Protocol):
    """Topic creation, deletion, partitions and configs (the controller's part)."""

    @property
    def broker_ids(self) -> list[int]: ...

    def check_new_topic(self, name: str, num_partitions: int, replication_factor: int,
                        assignments: dict[int, list[int]] | None) -> None: ...

    def create_topic(self, name: str, num_partitions: int, replication_factor: int,
                     configs: dict[str, str] | None = None,
                     assignments: dict[int, list[int]] | None = None) -> TopicMetadata: ...

    def delete_topic(self, name: str) -> TopicMetadata: ...

    def add_partitions(self, name: str, new_total: int,
                       assignments: list[list[int]] | None = None) -> TopicMetadata: ...

    def set_topic_configs(self, name: str, configs: dict[str, str], replace: bool = False) -> None: ...


class PartitionReassignments(Protocol):
    """KIP-455 partition reassignments, the controller's part (Kafka's ``ReplicationControlManager``)."""

    def alter_partition_reassignments(self, changes: list[tuple[str, int, list[int] | None]],
                                      allow_replication_factor_change: bool = True
                                      ) -> list[tuple[ErrorCode, str | None]]:
        """Start (target replicas) or cancel (None) each ``(topic, partition, target)``: an error and
        message for each, in order."""
        ...

    def list_partition_reassignments(self, topics: dict[str, list[int]] | None = None
                                     ) -> list[tuple[str, list[PartitionMetadata]]]:
        """The ongoing reassignments of the given partitions (all when None), per topic."""
        ...


class LeaderElection(Protocol):
    """ElectLeaders, the controller's part (Kafka's ``ReplicationControlManager.electLeaders``)."""

    def elect_leaders(self, partitions: list[tuple[str, int]], unclean: bool = False
                      ) -> list[tuple[ErrorCode, str | None]]:
        """A preferred (or, ``unclean``, unclean) election for each ``(topic, partition)``: their error codes
        and messages, in order; the whole batch is persisted and announced once."""
        ...


class MetadataQuorum(Protocol):
    """The KRaft metadata quorum of a single-controller cluster (DescribeQuorum) and the broker
    registrations the controller keeps (UnregisterBroker)."""

    @property
    def metadata_offset(self) -> int:
        """The end offset of the (notional) metadata log: the changes the controller made so far."""
        ...

    @property
    def controller_epoch(self) -> int:
        """The metadata log's leader epoch: + 1 each time another broker became the controller."""
        ...

    def controller_id(self) -> int: ...

    def alive_brokers(self, listener: str | None = None) -> list[Node]: ...

    def broker_endpoints(self, broker_id: int) -> dict[str, Node]:
        """A running broker's listeners: name -> advertised address."""
        ...

    def unregister_broker(self, broker_id: int) -> None:
        """Remove a broker's registration; MetadataError BROKER_ID_NOT_REGISTERED if it has none."""
        ...


class TopicLookup(Protocol):
    """Finds topics, auto-creating missing ones where allowed (Kafka's ``AutoTopicCreationManager``)."""

    def lookup_many(self, names: Iterable[str], auto_create: bool
                    ) -> dict[str, tuple[ErrorCode, TopicMetadata | None]]: ...


class BrokerConfigs(Protocol):
    """Broker config resources for Describe/Alter(Incremental)Configs (Kafka's ``DynamicBrokerConfig``)."""

    def knows(self, resource_name: str) -> bool: ...

    def describe(self, resource_name: str) -> dict[str, tuple[str, int]]:
        """name -> (value, Kafka ConfigSource)."""
        ...

    def alter(self, resource_name: str, changes: list[tuple[str, int, str | None]], incremental: bool,
              validate_only: bool) -> None: ...


# -- groups ------------------------------------------------------------------------------------------
class ShareGroupMembership(Protocol):
    """KIP-932 share-group membership (the share half of Kafka's group coordinator): ShareGroupHeartbeat,
    ShareGroupDescribe, and what ShareFetch / ListGroups / DeleteGroups ask of it.  Implemented by
    :class:`~minikafka.broker.share.coordinator.ShareGroupCoordinator`, shared by a cluster's brokers."""

    def heartbeat(self, group_id: str, member_id: str, member_epoch: int, rack_id: str | None,
                  subscribed_topic_names: list[str] | None, client_id: str = "", client_host: str = ""
                  ) -> ShareGroupHeartbeatResult: ...

    def describe(self, group_ids: Iterable[str]) -> list[ShareGroupDescription]: ...

    def exists(self, group_id: str) -> bool: ...

    def is_member(self, group_id: str, member_id: str) -> bool: ...

    def assignment(self, group_id: str, member_id: str) -> dict[uuid.UUID, set[int]]: ...

    def list_groups(self) -> list[tuple[str, str]]:
        """(group id, state) of every share group."""
        ...

    def create_group(self, group_id: str) -> ErrorCode:
        """An Empty share group for AlterShareGroupOffsets on a group that does not exist yet."""
        ...

    def delete_group(self, group_id: str) -> ErrorCode: ...


class ShareGroupAccess(Protocol):
    """KIP-932 share groups as handlers reach them: built, and their modules imported, on first use (a broker
    nobody asks about share groups never builds them).  Implemented by the broker."""

    def membership(self) -> ShareGroupMembership: ...

    def partitions(self) -> SharePartitions: ...

    def offsets(self) -> ShareGroupOffsets: ...

    def list_groups(self) -> list[tuple[str, str]]:
        """(group id, state) of each share group, building nothing (there is none before the first use)."""
        ...

    def delete_group(self, group_id: str) -> ErrorCode:
        """DeleteGroups on a share group (GROUP_ID_NOT_FOUND before the first use, building nothing)."""
        ...


class SharePartitions(Protocol):
    """KIP-932 share-partitions and share sessions as ShareFetch and ShareAcknowledge use them (Kafka's
    ``SharePartitionManager``).  Implemented by :class:`~minikafka.broker.share.manager.SharePartitionManager`,
    one per broker (the state it persists is kept by the share coordinator).  ``share_partition`` raises
    ``ShareStateError`` when the share coordinator cannot be read."""

    def settings(self, group_id: str) -> ShareGroupSettings: ...

    def new_context(self, group_id: str, member_id: str, epoch: int, requested: list[TopicIdPartition],
                    forgotten: list[TopicIdPartition], has_acknowledgements: bool,
                    connection_id: str = "") -> ShareFetchContext:
        """The share-session step of a ShareFetch; raises ``ShareSessionError``."""
        ...

    def acknowledge_session_update(self, group_id: str, member_id: str, epoch: int) -> None:
        """The share-session step of a ShareAcknowledge; raises ``ShareSessionError``."""
        ...

    def session_partitions(self, group_id: str, member_id: str) -> list[TopicIdPartition]: ...

    def share_partition(self, group_id: str, part: Partition) -> SharePartition: ...

    def acquire(self, group_id: str, member_id: str, part: Partition, fetched: list[FetchedBatch], *,
                max_records: int, batch_size: int = 0, mode: ShareAcquireMode = ...) -> list[AcquiredRecords]: ...

    def acknowledge(self, group_id: str, member_id: str, part: Partition, batches: list[AckBatch]) -> ErrorCode: ...

    def close_session(self, group_id: str, member_id: str, partitions: list[tuple[str, int]]) -> None: ...

    async def persisted(self, group_id: str, topic: str, partition: int) -> ErrorCode:
        """Wait until the share-partition state written so far is durable: NONE, or COORDINATOR_NOT_AVAILABLE."""
        ...


class ShareGroupOffsets(Protocol):
    """The persisted share-partition start offsets of share groups, for Describe/Alter/DeleteShareGroupOffsets
    (Kafka's ``ReadShareGroupStateSummary`` / ``InitializeShareGroupState`` / ``DeleteShareGroupState``)."""

    def start_offset(self, group_id: str, topic: str, partition: int) -> int:
        """-1 when the share-partition was never initialized."""
        ...

    def delivery_complete_count(self, group_id: str, topic: str, partition: int) -> int: ...

    def initialized_partitions(self, group_id: str) -> list[tuple[str, int]]: ...

    async def alter_start_offset(self, group_id: str, topic: str, partition: int, offset: int) -> ErrorCode:
        """Start the share-partition over at ``offset``; answered once durable (else the coordinator's error)."""
        ...

    def delete_state(self, group_id: str, topic: str, partition: int) -> bool: ...


class GroupConfigs(Protocol):
    """Per-group dynamic configs (Kafka's ``GroupConfigManager``), for Describe/Alter(Incremental)Configs on
    GROUP resources and for the coordinators' timeouts.  Implemented by
    :class:`~minikafka.broker.groups.group_config.GroupConfigManager`."""

    def group_config(self, group_id: str) -> GroupConfig: ...

    def group_ids(self) -> list[str]:
        """The groups that set configs of their own (Kafka's ``GroupConfigManager.groupIds``)."""
        ...

    def describe(self, group_id: str, include_synonyms: bool = False
                 ) -> list[tuple[str, str, int, int, list[tuple[str, str, int]]]]:
        """(name, value, Kafka ConfigSource, ConfigType, synonyms (name, value, source)) per config."""
        ...

    def alter(self, group_id: str, changes: list[tuple[str, int, str | None]], incremental: bool,
              validate_only: bool) -> None: ...


class ConsumerGroupCoordinatorApi(Protocol):
    """KIP-848 consumer groups (the consumer half of Kafka's ``GroupCoordinator``): ConsumerGroupHeartbeat
    and ConsumerGroupDescribe, by topic id.  Implemented by the group coordinator
    (its consumer-groups part, :class:`~minikafka.broker.groups.consumer.heartbeat.ConsumerGroupManager`)."""

    def consumer_group_heartbeat(self, request: ConsumerGroupHeartbeatRequest, topics: MetadataCache, *,
                                 session_timeout_ms: int | None = None, heartbeat_interval_ms: int | None = None,
                                 authorized_topics: Callable[[set[str]], set[str]] | None = None
                                 ) -> ConsumerGroupHeartbeatResult:
        """``topics`` resolves subscriptions; the timeouts are the group's (default: the broker's);
        ``authorized_topics`` filters the topics a regex resolves to."""
        ...

    async def replicated(self, group_id: str) -> ErrorCode:
        """Wait until the group's records written so far are replicated (as :class:`GroupCoordinatorApi`)."""
        ...

    def consumer_group_describe(self, group_ids: list[str]) -> list[DescribedConsumerGroup]: ...


class GroupCoordinatorApi(ConsumerGroupCoordinatorApi, Protocol):
    """The classic group protocol (Kafka's ``GroupCoordinator``), and the consumer groups sharing its
    group namespace."""

    async def join_group(self, group_id: str, member_id: str, group_instance_id: str | None,
                         require_known_member_id: bool, support_skipping_assignment: bool, client_id: str,
                         client_host: str, rebalance_timeout_ms: int, session_timeout_ms: int,
                         protocol_type: str, protocols: list[tuple[str, bytes]],
                         reason: str | None = None, topics: MetadataCache | None = None) -> JoinResult:
        """``topics``: the broker's metadata, for a classic member joining a KIP-848 consumer group."""
        ...

    async def sync_group(self, group_id: str, generation_id: int, member_id: str, protocol_type: str | None,
                         protocol_name: str | None, group_instance_id: str | None,
                         assignments: dict[str, bytes]) -> SyncResult: ...

    def heartbeat(self, group_id: str, generation_id: int, member_id: str,
                  group_instance_id: str | None) -> ErrorCode: ...

    def leave_group(self, group_id: str, members: list[tuple[str, str | None, str | None]]
                    ) -> tuple[ErrorCode, list[tuple[str, str | None, ErrorCode]]]: ...

    def commit_offsets(self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int,
                       offsets: dict[TopicPartition, OffsetAndMetadata], *, api_version: int = 8
                       ) -> dict[TopicPartition, ErrorCode]:
        """``generation_id`` is the member epoch for a consumer group; ``api_version`` is the OffsetCommit
        version (v9+ answers GROUP_ID_NOT_FOUND / STALE_MEMBER_EPOCH)."""
        ...

    def coordinator_error(self, group_id: str, broker_id: int) -> ErrorCode:
        """NONE when broker ``broker_id`` has the group's shard loaded; COORDINATOR_LOAD_IN_PROGRESS while it
        loads it; NOT_COORDINATOR otherwise."""
        ...

    async def replicated(self, group_id: str) -> ErrorCode:
        """Wait until what was written for the group is replicated (its partition's high watermark passed it):
        NONE, NOT_COORDINATOR (leadership moved first) or REQUEST_TIMED_OUT (``offsets.commit.timeout.ms``)."""
        ...

    def fetch_offsets(self, group_id: str, partitions: list[TopicPartition] | None, require_stable: bool = False,
                      *, member_id: str | None = None, member_epoch: int = -1
                      ) -> tuple[ErrorCode, dict[TopicPartition, OffsetAndMetadata | None]]: ...

    def list_groups(self, states: set[str] | None = None, types: set[str] | None = None
                    ) -> tuple[ErrorCode, list[GroupOverview]]: ...

    def describe_group(self, group_id: str) -> tuple[ErrorCode, GroupSummary]:
        """GROUP_ID_NOT_FOUND (with ``GroupSummary.error_message``) for a group that does not exist or is
        not a classic group."""
        ...

    def delete_groups(self, group_ids: list[str]) -> dict[str, ErrorCode]: ...

    def delete_offsets(self, group_id: str, topics: dict[str, list[int]]
                       ) -> tuple[ErrorCode, dict[str, dict[int, ErrorCode]]]:
        """OffsetDelete: a group-level error (the partitions then go unanswered), else an error per
        partition (GROUP_SUBSCRIBED_TO_TOPIC or NONE)."""
        ...

    def pending_txn_partitions(self, group_id: str) -> set[TopicPartition]: ...

    def txn_commit_offsets(self, group_id: str, producer_id: int, member_id: str, group_instance_id: str | None,
                           generation_id: int, offsets: dict[TopicPartition, OffsetAndMetadata], *,
                           producer_epoch: int = -1) -> dict[TopicPartition, ErrorCode]: ...

    def now_ms(self) -> int: ...


# -- KIP-714 client metrics ------------------------------------------------------------------------------
class ClientMetricsSubscriptions(Protocol):
    """The CLIENT_METRICS config resources (Kafka's client metrics subscriptions), for
    Describe/Alter(Incremental)Configs and ListConfigResources.  Implemented by
    :class:`~minikafka.broker.client_metrics.configs.ClientMetricsConfigStore`, shared by a cluster's brokers."""

    def names(self) -> list[str]: ...

    def describe(self, name: str) -> list[tuple[str, str, int]]:
        """(config name, value, Kafka ConfigSource) of each config the subscription sets."""
        ...

    def alter(self, name: str, changes: list[tuple[str, int, str | None]], incremental: bool,
              validate_only: bool) -> None: ...


class ClientTelemetry(Protocol):
    """GetTelemetrySubscriptions and PushTelemetry (Kafka's ``ClientMetricsManager``), one per broker.
    Implemented by :class:`~minikafka.broker.client_metrics.manager.ClientMetricsManager`; failures raise
    its ``TelemetryError`` with the error code."""

    @property
    def telemetry_max_bytes(self) -> int: ...

    def get_telemetry_subscriptions(self, ctx: RequestContext, client_instance_id: uuid.UUID
                                    ) -> tuple[uuid.UUID, ClientMetricsInstance]: ...

    def push_telemetry(self, ctx: RequestContext, client_instance_id: uuid.UUID, subscription_id: int,
                       terminating: bool, compression_type: int, metrics: bytes) -> None: ...


# -- quotas, sessions, ids -------------------------------------------------------------------------------
class ClientQuota(Protocol):
    """A byte-rate quota (Kafka's Produce or Fetch ``ClientQuotaManager``)."""

    @property
    def quotas_enabled(self) -> bool: ...

    def maybe_record_and_get_throttle_time_ms(self, user: str, client_id: str, value: float,
                                              time_ms: int | None = None) -> int: ...

    def unrecord_quota_sensor(self, user: str, client_id: str, value: float, time_ms: int | None = None) -> None: ...

    def get_max_value_in_quota_window(self, user: str, client_id: str) -> float: ...


class RequestQuota(Protocol):
    """The request-percentage quota (Kafka's ``ClientRequestQuotaManager``)."""

    @property
    def quotas_enabled(self) -> bool: ...

    def maybe_record_request_time(self, user: str, client_id: str, handler_ns: int,
                                  time_ms: int | None = None) -> int: ...


class LeaderReplicationQuota(Protocol):
    """The leader side of replication throttling (Kafka's ``ReplicationQuotaManager``)."""

    @property
    def limited(self) -> bool: ...

    @property
    def throttled_partitions(self) -> dict: ...

    def is_throttled(self, topic: str, partition: int) -> bool: ...

    def is_quota_exceeded(self) -> bool: ...

    def record(self, value: int) -> None: ...


class FetchSessions(Protocol):
    """Kafka's ``FetchManager``: the fetch context of each Fetch request."""

    def new_context(self, version: int, session_id: int, epoch: int, is_follower: bool,
                    fetch_data: OrderedDict[PartitionKey, PartitionRequest],
                    to_forget: list[PartitionKey]) -> FetchContext: ...


class ClientQuotaStore(Protocol):
    """Client quota configuration by entity (Describe/AlterClientQuotas)."""

    def describe(self, filters: list[tuple[str, int, str | None]], strict: bool
                 ) -> list[tuple[ClientQuotaEntity, dict[str, float]]]: ...

    def get(self, entity: ClientQuotaEntity) -> dict[str, float]: ...

    def set(self, entity: ClientQuotaEntity, key: str, value: float) -> None: ...

    def remove(self, entity: ClientQuotaEntity, key: str) -> None: ...


class TransactionCoordinatorApi(Protocol):
    """The transaction coordinator (Kafka's ``TransactionCoordinator``) as its handlers use it."""

    def init_producer_id(self, transactional_id: str, timeout_ms: int, expected_producer_id: int = -1,
                         expected_epoch: int = -1) -> ProducerIdAndEpoch: ...

    def add_partitions(self, transactional_id: str, producer_id: int, epoch: int,
                       partitions: Iterable[TopicPartition] = (), groups: Iterable[str] = (),
                       transaction_version: int = 0) -> ErrorCode: ...

    def verify_partitions(self, transactional_id: str, producer_id: int, epoch: int,
                          partitions: Iterable[TopicPartition]) -> dict[TopicPartition, ErrorCode]: ...

    def txn_offset_commit_allowed(self, transactional_id: str, producer_id: int, epoch: int,
                                  group_id: str) -> ErrorCode: ...

    def end_transaction(self, transactional_id: str, producer_id: int, epoch: int, commit: bool,
                        bump_epoch: bool = False) -> ProducerIdAndEpoch: ...

    def describe(self, transactional_id: str) -> TransactionMetadata | None: ...

    def list_transactions(self, states: set[str] | None = None, producer_ids: set[int] | None = None,
                          min_duration_ms: int = -1, pattern: CompiledRegex | None = None,
                          broker_id: int | None = None) -> list[TransactionListing]: ...

    def coordinator_error(self, transactional_id: str, broker_id: int) -> ErrorCode:
        """NONE, NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS for the id on broker ``broker_id``."""
        ...

    def write_error(self, transactional_id: str) -> ErrorCode:
        """COORDINATOR_NOT_AVAILABLE while the id's state cannot be written (too few in-sync replicas)."""
        ...

    def loaded(self, transactional_id: str) -> bool:
        """Whether some broker has the id's ``__transaction_state`` partition loaded."""
        ...

    async def replicated(self, transactional_id: str) -> ErrorCode:
        """Wait until the id's state written so far is replicated: NONE, NOT_COORDINATOR (moved) or
        COORDINATOR_NOT_AVAILABLE (timed out)."""
        ...


class FinalizedFeatures(Protocol):
    """The cluster's feature flags (KIP-584): what ApiVersions reports (Kafka's ``FinalizedFeatures``) and,
    for UpdateFeatures, the controller's ``FeatureControlManager``.  Implemented by
    :class:`~minikafka.broker.features.FeatureControlManager`."""

    @property
    def epoch(self) -> int: ...

    def level(self, name: str) -> int:
        """The finalized level of a feature (0: not finalized)."""
        ...

    def finalized(self) -> dict[str, int]: ...

    def supported(self) -> dict[str, tuple[int, int]]: ...

    def update_features(self, updates: list[FeatureUpdate], validate_only: bool = False) -> ApiError: ...


class ProducerIdGenerator(Protocol):
    def generate(self) -> int: ...


class Authorizer(Protocol):
    """Kafka's ``org.apache.kafka.server.authorizer.Authorizer`` as handlers use it: ACL checks for a
    principal (``"User:alice"``) connected from a host address, and the ACL administration behind
    CreateAcls / DescribeAcls / DeleteAcls.  A broker without ``authorizer.class.name`` has none (handlers
    then skip every check).  Implemented by :class:`~minikafka.broker.security.authorizer.StandardAuthorizer`."""

    def authorize(self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType,
                  name: str, log_if_denied: bool = True) -> bool: ...

    def authorize_by_resource_type(self, principal: str, host: str, operation: AclOperation,
                                   resource_type: ResourceType) -> bool: ...

    def authorized_operations(self, principal: str, host: str, resource_type: ResourceType, name: str) -> int: ...

    def create_acls(self, bindings: list[AclBinding]) -> list[tuple[ErrorCode, str | None]]: ...

    def delete_acls(self, filters: list[AclBindingFilter]
                    ) -> list[tuple[ErrorCode, str | None, list[AclBinding]]]: ...

    def acls(self, acl_filter: AclBindingFilter) -> list[AclBinding]: ...


class ScramCredentials(Protocol):
    """SCRAM credentials by user and mechanism, for Describe/AlterUserScramCredentials (Kafka's
    ``ScramImage.describe`` and ``ScramControlManager.alterCredentials``); one store per cluster.
    Implemented by :class:`~minikafka.broker.security.scram.ScramCredentialStore`."""

    def describe_credentials(self, users: Iterable[str] | None) -> list[DescribeResult]: ...

    def alter_credentials(self, deletions: Iterable[Deletion], upsertions: Iterable[Upsertion]
                          ) -> list[AlterResult]: ...


class DelegationTokens(Protocol):
    """The cluster's delegation tokens for Create/Renew/Expire/DescribeDelegationToken (Kafka's
    ``DelegationTokenControlManager`` and the broker's ``DelegationTokenManager``); principals are
    ``"User:alice"`` strings.  Implemented by
    :class:`~minikafka.broker.security.delegation_token.DelegationTokenManager`."""

    @property
    def enabled(self) -> bool: ...

    def create_token(self, owner: str, requester: str, renewers: Iterable[tuple[str, str]],
                     max_lifetime_ms: int) -> CreateTokenResult: ...

    def renew_token(self, principal: str, mac: bytes, renew_period_ms: int) -> tuple[ErrorCode, int]: ...

    def expire_token(self, principal: str, mac: bytes, expiry_period_ms: int) -> tuple[ErrorCode, int]: ...

    def tokens(self, eligible: Callable[[TokenInformation], bool]) -> list[DelegationToken]: ...


class LogDirs(Protocol):
    """This broker's log directories for DescribeLogDirs / AlterReplicaLogDirs (Kafka's
    ``ReplicaManager.describeLogDirs`` / ``alterReplicaLogDirs``), implemented by
    :class:`~minikafka.broker.replica_alter_log_dirs.ReplicaAlterLogDirsManager`."""

    def describe_log_dirs(self, partitions: set[TopicPartition] | None) -> list[LogDirDescription]: ...

    def alter_replica_log_dirs(self, dirs: dict[TopicPartition, str]) -> dict[TopicPartition, ErrorCode]: ...


class HandlerTimer(Protocol):
    """How long the current task has run (the request quota's handler time)."""

    def task_ns(self) -> int: ...




@dataclass
class BrokerServices:
    """Everything a broker offers its handlers, wired once by the broker.

    Handlers never receive this bundle: :func:`~minikafka.broker.handlers.registry.build_handlers`
    passes each handler the few services it declares.
    """

    config: BrokerConfig
    clock: Clock
    metadata: MetadataCache
    controller: TopicController
    topics: TopicLookup
    replica_manager: ProduceLog
    fetch_log: FetchLog
    records_deleter: RecordsDeleter
    delayed_fetch: DelayedOperations
    delayed_produce: DelayedOperations
    fetch_sessions: FetchSessions
    group_coordinator: GroupCoordinatorApi
    produce_quota: ClientQuota
    fetch_quota: ClientQuota
    request_quota: RequestQuota
    leader_quota: LeaderReplicationQuota
    quota_store: ClientQuotaStore
    broker_configs: BrokerConfigs
    producer_ids: ProducerIdGenerator
    timer: HandlerTimer
    txn_coordinator: TransactionCoordinatorApi
    txn_verifier: TxnVerifier
    marker_log: TxnMarkerLog
    scram_credentials: ScramCredentials
    log_dirs: LogDirs
    delegation_tokens: DelegationTokens
    group_configs: GroupConfigs
    share: ShareGroupAccess  # KIP-932 share groups, built on first use
    reassignments: PartitionReassignments
    leader_election: LeaderElection
    metadata_quorum: MetadataQuorum
    client_metrics_configs: ClientMetricsSubscriptions
    client_telemetry: ClientTelemetry
    features: FinalizedFeatures
    # Creates __consumer_offsets if it does not exist yet (its partitions place and hold the groups).
    ensure_offsets_topic: Callable[[], None]
    # Creates __transaction_state if it does not exist yet (its partitions place and hold transactional ids).
    ensure_transaction_topic: Callable[[], None]
    # Creates __share_group_state if it does not exist yet (its partitions place and hold share-partition state).
    ensure_share_state_topic: Callable[[], None]
    authorizer: Authorizer | None = None  # None: no authorizer.class.name, nothing is checked
