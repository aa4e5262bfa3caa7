"""Message declarations, one module per API (request and response together)."""

from .add_offsets_to_txn import AddOffsetsToTxnRequest, AddOffsetsToTxnResponse
from .add_partitions_to_txn import AddPartitionsToTxnRequest, AddPartitionsToTxnResponse
from .allocate_producer_ids import AllocateProducerIdsRequest, AllocateProducerIdsResponse
from .fetch_snapshot import FetchSnapshotRequest, FetchSnapshotResponse
from .alter_client_quotas import AlterClientQuotasRequest, AlterClientQuotasResponse
from .alter_configs import AlterConfigsRequest, AlterConfigsResponse
from .alter_partition import AlterPartitionRequest, AlterPartitionResponse
from .alter_partition_reassignments import AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse
from .alter_replica_log_dirs import AlterReplicaLogDirsRequest, AlterReplicaLogDirsResponse
from .alter_share_group_offsets import AlterShareGroupOffsetsRequest, AlterShareGroupOffsetsResponse
from .alter_user_scram_credentials import AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse
from .api_versions import ApiVersionsRequest, ApiVersionsResponse
from .broker_heartbeat import BrokerHeartbeatRequest, BrokerHeartbeatResponse
from .broker_registration import BrokerRegistrationRequest, BrokerRegistrationResponse
from .consumer_group_describe import ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse
from .consumer_group_heartbeat import ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse
from .create_acls import CreateAclsRequest, CreateAclsResponse
from .create_delegation_token import CreateDelegationTokenRequest, CreateDelegationTokenResponse
from .create_partitions import CreatePartitionsRequest, CreatePartitionsResponse
from .create_topics import CreateTopicsRequest, CreateTopicsResponse
from .delete_acls import DeleteAclsRequest, DeleteAclsResponse
from .delete_groups import DeleteGroupsRequest, DeleteGroupsResponse
from .delete_records import DeleteRecordsRequest, DeleteRecordsResponse
from .delete_share_group_offsets import DeleteShareGroupOffsetsRequest, DeleteShareGroupOffsetsResponse
from .delete_topics import DeleteTopicsRequest, DeleteTopicsResponse
from .describe_acls import DescribeAclsRequest, DescribeAclsResponse
from .describe_client_quotas import DescribeClientQuotasRequest, DescribeClientQuotasResponse
from .describe_cluster import DescribeClusterRequest, DescribeClusterResponse
from .describe_configs import DescribeConfigsRequest, DescribeConfigsResponse
from .describe_delegation_token import DescribeDelegationTokenRequest, DescribeDelegationTokenResponse
from .describe_groups import DescribeGroupsRequest, DescribeGroupsResponse
from .describe_log_dirs import DescribeLogDirsRequest, DescribeLogDirsResponse
from .describe_producers import DescribeProducersRequest, DescribeProducersResponse
from .describe_share_group_offsets import DescribeShareGroupOffsetsRequest, DescribeShareGroupOffsetsResponse
from .describe_quorum import DescribeQuorumRequest, DescribeQuorumResponse
from .describe_topic_partitions import DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse
from .describe_transactions import DescribeTransactionsRequest, DescribeTransactionsResponse
from .describe_user_scram_credentials import (DescribeUserScramCredentialsRequest,
                                              DescribeUserScramCredentialsResponse)
from .elect_leaders import ElectLeadersRequest, ElectLeadersResponse
from .end_txn import EndTxnRequest, EndTxnResponse
from .envelope import EnvelopeRequest, EnvelopeResponse
from .expire_delegation_token import ExpireDelegationTokenRequest, ExpireDelegationTokenResponse
from .fetch import FetchRequest, FetchResponse
from .get_telemetry_subscriptions import GetTelemetrySubscriptionsRequest, GetTelemetrySubscriptionsResponse
from .find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse
from .heartbeat import HeartbeatRequest, HeartbeatResponse
from .incremental_alter_configs import IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse
from .init_producer_id import InitProducerIdRequest, InitProducerIdResponse
from .join_group import JoinGroupRequest, JoinGroupResponse
from .leave_group import LeaveGroupRequest, LeaveGroupResponse
from .list_config_resources import ListConfigResourcesRequest, ListConfigResourcesResponse
from .list_groups import ListGroupsRequest, ListGroupsResponse
from .list_offsets import ListOffsetsRequest, ListOffsetsResponse
from .list_partition_reassignments import ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse
from .list_transactions import ListTransactionsRequest, ListTransactionsResponse
from .metadata import MetadataRequest, MetadataResponse
from .offset_commit import OffsetCommitRequest, OffsetCommitResponse
from .offset_delete import OffsetDeleteRequest, OffsetDeleteResponse
from .offset_fetch import OffsetFetchRequest, OffsetFetchResponse
from .offset_for_leader_epoch import OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse
from .produce import ProduceRequest, ProduceResponse
from .push_telemetry import PushTelemetryRequest, PushTelemetryResponse
from .renew_delegation_token import RenewDelegationTokenRequest, RenewDelegationTokenResponse
from .sasl_authenticate import SaslAuthenticateRequest, SaslAuthenticateResponse
from .sasl_handshake import SaslHandshakeRequest, SaslHandshakeResponse
from .share_acknowledge import ShareAcknowledgeRequest, ShareAcknowledgeResponse
from .share_fetch import ShareFetchRequest, ShareFetchResponse
from .share_group_describe import ShareGroupDescribeRequest, ShareGroupDescribeResponse
from .share_group_heartbeat import ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse
from .sync_group import SyncGroupRequest, SyncGroupResponse
from .txn_offset_commit import TxnOffsetCommitRequest, TxnOffsetCommitResponse
from .unregister_broker import UnregisterBrokerRequest, UnregisterBrokerResponse
from .update_features import UpdateFeaturesRequest, UpdateFeaturesResponse
from .write_txn_markers import WriteTxnMarkersRequest, WriteTxnMarkersResponse

PAIRS = [
    (AddOffsetsToTxnRequest, AddOffsetsToTxnResponse),
    (AddPartitionsToTxnRequest, AddPartitionsToTxnResponse),
    (AlterClientQuotasRequest, AlterClientQuotasResponse),
    (AlterConfigsRequest, AlterConfigsResponse),
    (AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse),
    (ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse),
    (AlterReplicaLogDirsRequest, AlterReplicaLogDirsResponse),
    (DescribeLogDirsRequest, DescribeLogDirsResponse),
    (AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse),
    (DescribeClientQuotasRequest, DescribeClientQuotasResponse),
    (ApiVersionsRequest, ApiVersionsResponse),
    (CreateAclsRequest, CreateAclsResponse),
    (CreateDelegationTokenRequest, CreateDelegationTokenResponse),
    (RenewDelegationTokenRequest, RenewDelegationTokenResponse),
    (ExpireDelegationTokenRequest, ExpireDelegationTokenResponse),
    (DescribeDelegationTokenRequest, DescribeDelegationTokenResponse),
    (CreatePartitionsRequest, CreatePartitionsResponse),
    (CreateTopicsRequest, CreateTopicsResponse),
    (DeleteAclsRequest, DeleteAclsResponse),
    (DeleteGroupsRequest, DeleteGroupsResponse),
    (DeleteRecordsRequest, DeleteRecordsResponse),
    (DeleteTopicsRequest, DeleteTopicsResponse),
    (DescribeAclsRequest, DescribeAclsResponse),
    (DescribeClusterRequest, DescribeClusterResponse),
    (DescribeConfigsRequest, DescribeConfigsResponse),
    (DescribeGroupsRequest, DescribeGroupsResponse),
    (DescribeProducersRequest, DescribeProducersResponse),
    (DescribeTransactionsRequest, DescribeTransactionsResponse),
    (DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse),
    (EndTxnRequest, EndTxnResponse),
    (FetchRequest, FetchResponse),
    (FindCoordinatorRequest, FindCoordinatorResponse),
    (HeartbeatRequest, HeartbeatResponse),
    (IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse),
    (InitProducerIdRequest, InitProducerIdResponse),
    (JoinGroupRequest, JoinGroupResponse),
    (LeaveGroupRequest, LeaveGroupResponse),
    (ListGroupsRequest, ListGroupsResponse),
    (ListOffsetsRequest, ListOffsetsResponse),
    (ListTransactionsRequest, ListTransactionsResponse),
    (MetadataRequest, MetadataResponse),
    (OffsetCommitRequest, OffsetCommitResponse),
    (OffsetFetchRequest, OffsetFetchResponse),
    (OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse),
    (ProduceRequest, ProduceResponse),
    (SaslAuthenticateRequest, SaslAuthenticateResponse),
    (SaslHandshakeRequest, SaslHandshakeResponse),
    (SyncGroupRequest, SyncGroupResponse),
    (TxnOffsetCommitRequest, TxnOffsetCommitResponse),
    (WriteTxnMarkersRequest, WriteTxnMarkersResponse),
    (ElectLeadersRequest, ElectLeadersResponse),
    (OffsetDeleteRequest, OffsetDeleteResponse),
    (DescribeQuorumRequest, DescribeQuorumResponse),
    (UnregisterBrokerRequest, UnregisterBrokerResponse),
    # KRaft controller-listener APIs (a broker's client listener neither offers nor answers them)
    (AlterPartitionRequest, AlterPartitionResponse),
    (EnvelopeRequest, EnvelopeResponse),
    (BrokerRegistrationRequest, BrokerRegistrationResponse),
    (BrokerHeartbeatRequest, BrokerHeartbeatResponse),
    (AllocateProducerIdsRequest, AllocateProducerIdsResponse),
    (FetchSnapshotRequest, FetchSnapshotResponse),
    (UpdateFeaturesRequest, UpdateFeaturesResponse),
    (DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse),
    (ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse),
    (ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse),
    (GetTelemetrySubscriptionsRequest, GetTelemetrySubscriptionsResponse),
    (PushTelemetryRequest, PushTelemetryResponse),
    (ListConfigResourcesRequest, ListConfigResourcesResponse),
    (ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse),
    (ShareGroupDescribeRequest, ShareGroupDescribeResponse),
    (ShareFetchRequest, ShareFetchResponse),
    (ShareAcknowledgeRequest, ShareAcknowledgeResponse),
    (DescribeShareGroupOffsetsRequest, DescribeShareGroupOffsetsResponse),
    (AlterShareGroupOffsetsRequest, AlterShareGroupOffsetsResponse),
    (DeleteShareGroupOffsetsRequest, DeleteShareGroupOffsetsResponse),
]
