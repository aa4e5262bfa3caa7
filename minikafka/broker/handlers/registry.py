"""Which handler answers which api key, built from the broker's services without import side effects.

Each entry is a factory that takes the :class:`~minikafka.broker.services.BrokerServices`
bundle and passes the handler only the services it declares (Kafka's
``KafkaApis`` constructor, split per handler).  :func:`build_handlers` makes
the table a :class:`~minikafka.broker.apis.KafkaApis` dispatches on; the
ApiVersions list is derived from the same table.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ...protocol.api import APIS, ApiKey
from ...protocol.errors import ErrorCode
from ..error_responses import error_response
from ..features import GROUP_VERSION, SHARE_VERSION
from ..request import RequestContext
from ..services import BrokerServices, FinalizedFeatures, GroupCoordinatorApi, TransactionCoordinatorApi
from .acls import CreateAclsHandler, DeleteAclsHandler, DescribeAclsHandler
from .api_versions import ApiVersionsHandler
from .config_resources import ListConfigResourcesHandler
from .configs import AlterConfigsHandler, DescribeConfigsHandler
from .delegation_tokens import (CreateDelegationTokenHandler, DescribeDelegationTokenHandler,
                                ExpireDelegationTokenHandler, RenewDelegationTokenHandler)
from .describe_topic_partitions import DescribeTopicPartitionsHandler
from .elect_leaders import ElectLeadersHandler
from .features import UpdateFeaturesHandler
from .fetch import FetchHandler
from .groups import (DeleteGroupsHandler, DescribeGroupsHandler, FindCoordinatorHandler, HeartbeatHandler,
                     JoinGroupHandler, LeaveGroupHandler, ListGroupsHandler, OffsetCommitHandler,
                     OffsetFetchHandler, SyncGroupHandler)
from .list_offsets import DeleteRecordsHandler, ListOffsetsHandler, OffsetForLeaderEpochHandler
from .metadata import DescribeClusterHandler, MetadataHandler
from .offset_delete import OffsetDeleteHandler
from .quorum import DescribeQuorumHandler, UnregisterBrokerHandler
from .produce import ProduceHandler
from .transactions import (AddOffsetsToTxnHandler, AddPartitionsToTxnHandler, DescribeProducersHandler,
                           DescribeTransactionsHandler, EndTxnHandler, InitProducerIdHandler, ListTransactionsHandler,
                           TxnOffsetCommitHandler, WriteTxnMarkersHandler)
from .quotas import AlterClientQuotasHandler, DescribeClientQuotasHandler
from .reassignments import AlterPartitionReassignmentsHandler, ListPartitionReassignmentsHandler
from .sasl import SaslAuthenticateHandler, SaslHandshakeHandler
from .consumer_groups import ConsumerGroupDescribeHandler, ConsumerGroupHeartbeatHandler
from .scram import AlterUserScramCredentialsHandler, DescribeUserScramCredentialsHandler
from .log_dirs import AlterReplicaLogDirsHandler, DescribeLogDirsHandler
from .telemetry import GetTelemetrySubscriptionsHandler, PushTelemetryHandler
from .topics import CreatePartitionsHandler, CreateTopicsHandler, DeleteTopicsHandler

if TYPE_CHECKING:
    from ...protocol import bodies as B

Handler = Callable[[RequestContext, Any], Awaitable[Any]]
HandlerFactory = Callable[[BrokerServices], Handler]

# Advertised minimum versions that differ from what is parsed.  Kafka 4.0 dropped
# Produce v0-2 but still advertises v0 (KAFKA-18659): librdkafka before 2.10 only
# compresses with gzip/snappy/lz4 when the broker claims Produce v0.  Requests
# below the parsed minimum still close the connection.
ADVERTISED_MIN_VERSION: dict[int, int] = {ApiKey.PRODUCE: 0}


def supported_api_versions(keys: Iterable[int]) -> list[B.ApiVersionsResponseApiKeys]:
    """The ApiVersions list for the given api keys, with their version ranges."""
    return [
        {"api_key": k, "min_version": ADVERTISED_MIN_VERSION.get(k, APIS[k].min_version),
         "max_version": APIS[k].max_version}
        for k in sorted(keys)
        if k in APIS
    ]


# The APIs of the group protocols ``group.coordinator.rebalance.protocols`` may leave out (Kafka gates them by
# the ``group.version`` and ``share.version`` features): a protocol not listed is neither advertised nor answered.
PROTOCOL_API_KEYS: Mapping[str, frozenset[int]] = {
    "consumer": frozenset({68, 69}),  # ConsumerGroupHeartbeat, ConsumerGroupDescribe
    "share": frozenset({76, 77, 78, 79, 90, 91, 92}),  # Share*, Describe/Alter/DeleteShareGroupOffsets
}


# The feature each group protocol needs finalized (Kafka 4.2's isConsumerGroupProtocolEnabled and
# isShareGroupProtocolEnabled): below level 1 its APIs are still advertised but answered UNSUPPORTED_VERSION.
PROTOCOL_FEATURES: Mapping[str, str] = {"consumer": GROUP_VERSION, "share": SHARE_VERSION}


def _feature_gated(handler: Handler, features: FinalizedFeatures, feature: str) -> Handler:
    """``handler``, answering UNSUPPORTED_VERSION while ``feature`` is not finalized (checked per request:
    UpdateFeatures may change it)."""
    async def gated(ctx: RequestContext, req: Any) -> Any:
        if features.level(feature) < 1:
            return error_response(ctx.api_key, ctx.api_version, req, ErrorCode.UNSUPPORTED_VERSION,
                                  ctx.throttle_time_ms)
        return await handler(ctx, req)
    return gated


def disabled_api_keys(rebalance_protocols: str) -> frozenset[int]:
    """The api keys of the group protocols missing from ``group.coordinator.rebalance.protocols``."""
    enabled = {p.strip().lower() for p in rebalance_protocols.split(",")}
    return frozenset(k for protocol, keys in PROTOCOL_API_KEYS.items() if protocol not in enabled for k in keys)


def _coordinator_error(coordinator: GroupCoordinatorApi | TransactionCoordinatorApi, ensure_topic: Callable[[], None],
                       node_id: int) -> Callable[[str], ErrorCode]:
    """NONE when this broker has the key's internal partition loaded, COORDINATOR_LOAD_IN_PROGRESS while it loads
    it, NOT_COORDINATOR otherwise; the internal topic is created first if it is not yet (as a FindCoordinator
    creates it)."""
    def check(key: str) -> ErrorCode:
        ensure_topic()
        return coordinator.coordinator_error(key, node_id)
    return check


def _txn_coordinator_error(s: BrokerServices) -> Callable[[str], ErrorCode]:
    """A transactional id's coordinator error here (its ``__transaction_state`` partition)."""
    return _coordinator_error(s.txn_coordinator, s.ensure_transaction_topic, s.config.node_id)


def _group_coordinator_error(s: BrokerServices) -> Callable[[str], ErrorCode]:
    """A group's coordinator error here (its ``__consumer_offsets`` partition)."""
    return _coordinator_error(s.group_coordinator, s.ensure_offsets_topic, s.config.node_id)


def _built_on_first_request(factory: HandlerFactory) -> HandlerFactory:
    """``factory``, run (and the modules it imports loaded) at the handler's first request: the KIP-932 share
    group handlers cost a broker's start-up nothing until a client uses share groups."""
    def deferred(s: BrokerServices) -> Handler:
        handler: Handler | None = None

        async def first_use(ctx: RequestContext, req: Any) -> Any:
            nonlocal handler
            if handler is None:
                handler = factory(s)
            return await handler(ctx, req)
        return first_use
    return deferred


def _share_group_heartbeat(s: BrokerServices) -> Handler:
    from .share_groups import ShareGroupHeartbeatHandler
    return ShareGroupHeartbeatHandler(s.share.membership(), authorizer=s.authorizer,
                                      coordinator_error=_group_coordinator_error(s),
                                      group_writes=s.group_coordinator).handle


def _share_group_describe(s: BrokerServices) -> Handler:
    from .share_groups import ShareGroupDescribeHandler
    return ShareGroupDescribeHandler(s.share.membership(), authorizer=s.authorizer, 
        coordinator_error=_group_coordinator_error(s)).handle


def _share_fetch(s: BrokerServices) -> Handler:
    from .share_fetch import ShareFetchHandler
    return ShareFetchHandler(s.fetch_log, s.metadata, s.share.partitions(), s.delayed_fetch, s.fetch_quota, s.config,
                             authorizer=s.authorizer).handle


def _share_acknowledge(s: BrokerServices) -> Handler:
    from .share_fetch import ShareAcknowledgeHandler
    return ShareAcknowledgeHandler(s.fetch_log, s.metadata, s.share.partitions(), s.config,
                                   authorizer=s.authorizer).handle


def _describe_share_group_offsets(s: BrokerServices) -> Handler:
    from .share_offsets import DescribeShareGroupOffsetsHandler
    return DescribeShareGroupOffsetsHandler(s.share.offsets(), s.share.membership(), s.metadata, s.fetch_log,
                                            _group_coordinator_error(s), authorizer=s.authorizer).handle


def _alter_share_group_offsets(s: BrokerServices) -> Handler:
    from .share_offsets import AlterShareGroupOffsetsHandler
    return AlterShareGroupOffsetsHandler(s.share.offsets(), s.share.membership(), s.metadata, s.fetch_log,
                                         _group_coordinator_error(s), authorizer=s.authorizer).handle


def _delete_share_group_offsets(s: BrokerServices) -> Handler:
    from .share_offsets import DeleteShareGroupOffsetsHandler
    return DeleteShareGroupOffsetsHandler(s.share.offsets(), s.share.membership(), s.metadata, s.fetch_log,
                                          _group_coordinator_error(s), authorizer=s.authorizer).handle


HANDLER_FACTORIES: Mapping[ApiKey, HandlerFactory] = {
    ApiKey.PRODUCE: lambda s: ProduceHandler(s.replica_manager, s.topics, s.delayed_produce, s.produce_quota,
                                             s.config, s.clock, s.txn_verifier,
                                             authorizer=s.authorizer, metadata=s.metadata).handle,
    ApiKey.FETCH: lambda s: FetchHandler(s.fetch_log, s.metadata, s.fetch_sessions, s.delayed_fetch,
                                         s.fetch_quota, s.request_quota, s.leader_quota, s.timer, s.config,
                                         s.clock, authorizer=s.authorizer).handle,
    ApiKey.LIST_OFFSETS: lambda s: ListOffsetsHandler(s.replica_manager, authorizer=s.authorizer).handle,
    ApiKey.METADATA: lambda s: MetadataHandler(s.metadata, s.topics, s.config, authorizer=s.authorizer).handle,
    ApiKey.OFFSET_COMMIT: lambda s: OffsetCommitHandler(s.group_coordinator, s.metadata, authorizer=s.authorizer,
                                                        coordinator_error=_group_coordinator_error(s)).handle,
    ApiKey.OFFSET_FETCH: lambda s: OffsetFetchHandler(s.group_coordinator, authorizer=s.authorizer,
                                                      coordinator_error=_group_coordinator_error(s),
                                                      metadata=s.metadata).handle,
    ApiKey.FIND_COORDINATOR: lambda s: FindCoordinatorHandler(
        s.metadata, authorizer=s.authorizer,
        share_state_partitions=s.config.share_coordinator_state_topic_num_partitions,
        ensure_offsets_topic=s.ensure_offsets_topic, ensure_transaction_topic=s.ensure_transaction_topic,
        ensure_share_state_topic=s.ensure_share_state_topic).handle,
    ApiKey.JOIN_GROUP: lambda s: JoinGroupHandler(s.group_coordinator, authorizer=s.authorizer,
                                                  coordinator_error=_group_coordinator_error(s),
                                                  metadata=s.metadata).handle,
    ApiKey.HEARTBEAT: lambda s: HeartbeatHandler(s.group_coordinator, authorizer=s.authorizer,
                                                 coordinator_error=_group_coordinator_error(s)).handle,
    ApiKey.LEAVE_GROUP: lambda s: LeaveGroupHandler(s.group_coordinator, authorizer=s.authorizer,
                                                    coordinator_error=_group_coordinator_error(s)).handle,
    ApiKey.SYNC_GROUP: lambda s: SyncGroupHandler(s.group_coordinator, authorizer=s.authorizer,
                                                  coordinator_error=_group_coordinator_error(s)).handle,
    ApiKey.DESCRIBE_GROUPS: lambda s: DescribeGroupsHandler(s.group_coordinator, authorizer=s.authorizer,
                                                            coordinator_error=_group_coordinator_error(s)).handle,
    ApiKey.LIST_GROUPS: lambda s: ListGroupsHandler(s.group_coordinator, authorizer=s.authorizer,
                                                    coordinator_error=_group_coordinator_error(s),
                                                    share_groups=s.share.list_groups).handle,
    ApiKey.API_VERSIONS: lambda s: ApiVersionsHandler(supported_api_versions(
        set(HANDLER_FACTORIES) - disabled_api_keys(s.config.group_coordinator_rebalance_protocols)),
        s.features).handle,
    ApiKey.UPDATE_FEATURES: lambda s: UpdateFeaturesHandler(s.features, authorizer=s.authorizer).handle,
    ApiKey.CREATE_TOPICS: lambda s: CreateTopicsHandler(s.controller, s.config, authorizer=s.authorizer).handle,
    ApiKey.DELETE_TOPICS: lambda s: DeleteTopicsHandler(s.controller, s.metadata, s.config,
                                                                authorizer=s.authorizer).handle,
    ApiKey.DELETE_RECORDS: lambda s: DeleteRecordsHandler(s.records_deleter, authorizer=s.authorizer).handle,
    ApiKey.INIT_PRODUCER_ID: lambda s: InitProducerIdHandler(s.producer_ids, s.txn_coordinator,
                                                             _txn_coordinator_error(s), authorizer=s.authorizer).handle,
    ApiKey.ADD_PARTITIONS_TO_TXN: lambda s: AddPartitionsToTxnHandler(s.txn_coordinator, s.metadata,
                                                                      _txn_coordinator_error(s),
                                                                      authorizer=s.authorizer).handle,
    ApiKey.ADD_OFFSETS_TO_TXN: lambda s: AddOffsetsToTxnHandler(s.txn_coordinator, _txn_coordinator_error(s),
                                                                authorizer=s.authorizer).handle,
    ApiKey.END_TXN: lambda s: EndTxnHandler(s.txn_coordinator, _txn_coordinator_error(s),
                                            authorizer=s.authorizer).handle,
    ApiKey.WRITE_TXN_MARKERS: lambda s: WriteTxnMarkersHandler(s.marker_log, s.delayed_produce,
                                                               authorizer=s.authorizer).handle,
    ApiKey.TXN_OFFSET_COMMIT: lambda s: TxnOffsetCommitHandler(s.group_coordinator, s.txn_coordinator,
                                                               s.metadata, authorizer=s.authorizer,
                                                               coordinator_error=_group_coordinator_error(s)).handle,
    ApiKey.DESCRIBE_PRODUCERS: lambda s: DescribeProducersHandler(s.replica_manager, authorizer=s.authorizer).handle,
    ApiKey.DESCRIBE_TRANSACTIONS: lambda s: DescribeTransactionsHandler(s.txn_coordinator,
                                                                        _txn_coordinator_error(s),
                                                                        authorizer=s.authorizer).handle,
    ApiKey.LIST_TRANSACTIONS: lambda s: ListTransactionsHandler(s.txn_coordinator, s.config.node_id,
                                                                  authorizer=s.authorizer).handle,
    ApiKey.OFFSET_FOR_LEADER_EPOCH: lambda s: OffsetForLeaderEpochHandler(s.replica_manager,
                                                                          authorizer=s.authorizer).handle,
    ApiKey.DESCRIBE_CONFIGS: lambda s: DescribeConfigsHandler(s.metadata, s.broker_configs, s.config,
                                                              authorizer=s.authorizer,
                                                              groups=s.group_configs,
                                                              client_metrics=s.client_metrics_configs).handle,
    ApiKey.ALTER_CONFIGS: lambda s: AlterConfigsHandler(s.controller, s.metadata, s.broker_configs,
                                                        incremental=False, authorizer=s.authorizer,
                                                        groups=s.group_configs,
                                                        client_metrics=s.client_metrics_configs).handle,
    ApiKey.CREATE_PARTITIONS: lambda s: CreatePartitionsHandler(s.controller, s.metadata,
                                                                authorizer=s.authorizer).handle,
    ApiKey.DELETE_GROUPS: lambda s: DeleteGroupsHandler(s.group_coordinator, authorizer=s.authorizer,
                                                        coordinator_error=_group_coordinator_error(s),
                                                        delete_share_group=s.share.delete_group).handle,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: lambda s: AlterConfigsHandler(s.controller, s.metadata, s.broker_configs,
                                                                    incremental=True, authorizer=s.authorizer,
                                                                    groups=s.group_configs,
                                                                    client_metrics=s.client_metrics_configs).handle,
    ApiKey.DESCRIBE_CLIENT_QUOTAS: lambda s: DescribeClientQuotasHandler(s.quota_store, authorizer=s.authorizer).handle,
    ApiKey.ALTER_CLIENT_QUOTAS: lambda s: AlterClientQuotasHandler(s.quota_store, authorizer=s.authorizer).handle,
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: lambda s: DescribeUserScramCredentialsHandler(
        s.scram_credentials, authorizer=s.authorizer).handle,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: lambda s: AlterUserScramCredentialsHandler(
        s.scram_credentials, authorizer=s.authorizer).handle,
    ApiKey.CREATE_DELEGATION_TOKEN: lambda s: CreateDelegationTokenHandler(
        s.delegation_tokens, authorizer=s.authorizer).handle,
    ApiKey.RENEW_DELEGATION_TOKEN: lambda s: RenewDelegationTokenHandler(s.delegation_tokens).handle,
    ApiKey.EXPIRE_DELEGATION_TOKEN: lambda s: ExpireDelegationTokenHandler(s.delegation_tokens).handle,
    ApiKey.DESCRIBE_DELEGATION_TOKEN: lambda s: DescribeDelegationTokenHandler(
        s.delegation_tokens, authorizer=s.authorizer).handle,
    ApiKey.DESCRIBE_CLUSTER: lambda s: DescribeClusterHandler(s.metadata, s.config, authorizer=s.authorizer).handle,
    ApiKey.DESCRIBE_LOG_DIRS: lambda s: DescribeLogDirsHandler(s.log_dirs, authorizer=s.authorizer).handle,
    ApiKey.ALTER_REPLICA_LOG_DIRS: lambda s: AlterReplicaLogDirsHandler(s.log_dirs, authorizer=s.authorizer).handle,
    ApiKey.DESCRIBE_ACLS: lambda s: DescribeAclsHandler(s.authorizer).handle,
    ApiKey.CREATE_ACLS: lambda s: CreateAclsHandler(s.authorizer).handle,
    ApiKey.DELETE_ACLS: lambda s: DeleteAclsHandler(s.authorizer).handle,
    ApiKey.CONSUMER_GROUP_HEARTBEAT: lambda s: ConsumerGroupHeartbeatHandler(
        s.group_coordinator, s.metadata, s.group_configs, authorizer=s.authorizer,
        coordinator_error=_group_coordinator_error(s)).handle,
    ApiKey.CONSUMER_GROUP_DESCRIBE: lambda s: ConsumerGroupDescribeHandler(
        s.group_coordinator, s.metadata, authorizer=s.authorizer,
        coordinator_error=_group_coordinator_error(s)).handle,
    # KIP-932 share groups: built at their first request.
    ApiKey.SHARE_GROUP_HEARTBEAT: _built_on_first_request(_share_group_heartbeat),
    ApiKey.SHARE_GROUP_DESCRIBE: _built_on_first_request(_share_group_describe),
    ApiKey.SHARE_FETCH: _built_on_first_request(_share_fetch),
    ApiKey.SHARE_ACKNOWLEDGE: _built_on_first_request(_share_acknowledge),
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: _built_on_first_request(_describe_share_group_offsets),
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: _built_on_first_request(_alter_share_group_offsets),
    ApiKey.DELETE_SHARE_GROUP_OFFSETS: _built_on_first_request(_delete_share_group_offsets),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: lambda s: AlterPartitionReassignmentsHandler(
        s.reassignments, authorizer=s.authorizer).handle,
    ApiKey.LIST_PARTITION_REASSIGNMENTS: lambda s: ListPartitionReassignmentsHandler(
        s.reassignments, authorizer=s.authorizer).handle,
    ApiKey.GET_TELEMETRY_SUBSCRIPTIONS: lambda s: GetTelemetrySubscriptionsHandler(s.client_telemetry).handle,
    ApiKey.PUSH_TELEMETRY: lambda s: PushTelemetryHandler(s.client_telemetry).handle,
    ApiKey.LIST_CONFIG_RESOURCES: lambda s: ListConfigResourcesHandler(
        s.metadata, s.client_metrics_configs, s.group_configs, authorizer=s.authorizer).handle,
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: lambda s: DescribeTopicPartitionsHandler(s.metadata, s.config,
                                                                               authorizer=s.authorizer).handle,
    ApiKey.OFFSET_DELETE: lambda s: OffsetDeleteHandler(s.group_coordinator, s.metadata, authorizer=s.authorizer,
                                                        coordinator_error=_group_coordinator_error(s)).handle,
    ApiKey.ELECT_LEADERS: lambda s: ElectLeadersHandler(s.leader_election, s.metadata,
                                                        authorizer=s.authorizer).handle,
    ApiKey.DESCRIBE_QUORUM: lambda s: DescribeQuorumHandler(s.metadata_quorum, s.clock,
                                                            authorizer=s.authorizer).handle,
    ApiKey.UNREGISTER_BROKER: lambda s: UnregisterBrokerHandler(s.metadata_quorum, authorizer=s.authorizer).handle,
    ApiKey.SASL_HANDSHAKE: lambda s: SaslHandshakeHandler().handle,
    ApiKey.SASL_AUTHENTICATE: lambda s: SaslAuthenticateHandler().handle,
}


def build_handlers(services: BrokerServices,
                   factories: Mapping[ApiKey, HandlerFactory] = HANDLER_FACTORIES) -> dict[int, Handler]:
    """One handler per api key, each given only the services it uses; those of a group protocol gated by
    its feature level (:data:`PROTOCOL_FEATURES`)."""
    disabled = disabled_api_keys(services.config.group_coordinator_rebalance_protocols)
    handlers = {int(key): factory(services) for key, factory in factories.items() if key not in disabled}
    for protocol, feature in PROTOCOL_FEATURES.items():
        for key in PROTOCOL_API_KEYS[protocol] & handlers.keys():
            handlers[key] = _feature_gated(handlers[key], services.features, feature)
    return handlers
