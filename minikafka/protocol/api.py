"""The API registry: api keys, names, and each API's request/response declarations."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from .messages import PAIRS
from .schema import Message


class ApiKey(IntEnum):
    """Kafka's api keys (``org.apache.kafka.common.protocol.ApiKeys``), those minikafka knows."""

    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    WRITE_TXN_MARKERS = 27
    TXN_OFFSET_COMMIT = 28
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    ALTER_REPLICA_LOG_DIRS = 34
    DESCRIBE_LOG_DIRS = 35
    SASL_AUTHENTICATE = 36
    CREATE_PARTITIONS = 37
    CREATE_DELEGATION_TOKEN = 38
    RENEW_DELEGATION_TOKEN = 39
    EXPIRE_DELEGATION_TOKEN = 40
    DESCRIBE_DELEGATION_TOKEN = 41
    DELETE_GROUPS = 42
    ELECT_LEADERS = 43
    INCREMENTAL_ALTER_CONFIGS = 44
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    OFFSET_DELETE = 47
    DESCRIBE_CLIENT_QUOTAS = 48
    ALTER_CLIENT_QUOTAS = 49
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51
    DESCRIBE_QUORUM = 55
    ALTER_PARTITION = 56
    UPDATE_FEATURES = 57
    ENVELOPE = 58
    FETCH_SNAPSHOT = 59
    DESCRIBE_CLUSTER = 60
    DESCRIBE_PRODUCERS = 61
    BROKER_REGISTRATION = 62
    BROKER_HEARTBEAT = 63
    UNREGISTER_BROKER = 64
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66
    ALLOCATE_PRODUCER_IDS = 67
    CONSUMER_GROUP_HEARTBEAT = 68
    CONSUMER_GROUP_DESCRIBE = 69
    GET_TELEMETRY_SUBSCRIPTIONS = 71
    PUSH_TELEMETRY = 72
    LIST_CONFIG_RESOURCES = 74
    DESCRIBE_TOPIC_PARTITIONS = 75
    SHARE_GROUP_HEARTBEAT = 76
    SHARE_GROUP_DESCRIBE = 77
    SHARE_FETCH = 78
    SHARE_ACKNOWLEDGE = 79
    DESCRIBE_SHARE_GROUP_OFFSETS = 90
    ALTER_SHARE_GROUP_OFFSETS = 91
    DELETE_SHARE_GROUP_OFFSETS = 92


@dataclass(frozen=True)
class Api:
    """One API: its key, its request and response declarations, its version range."""

    key: ApiKey
    request: Message
    response: Message

    @property
    def name(self) -> str:
        return self.request.name.removesuffix("Request")

    @property
    def min_version(self) -> int:
        return self.request.min_version

    @property
    def max_version(self) -> int:
        return self.request.max_version

    def is_flexible(self, version: int) -> bool:
        return self.request.is_flexible(version)


APIS: dict[int, Api] = {}
for _req, _resp in PAIRS:
    assert _req.api_key == _resp.api_key
    assert (_req.min_version, _req.max_version) == (_resp.min_version, _resp.max_version)
    APIS[_req.api_key] = Api(ApiKey(_req.api_key), _req, _resp)
del _req, _resp

CONTROLLER_API_KEYS: frozenset[ApiKey] = frozenset({
    ApiKey.ALTER_PARTITION, ApiKey.ENVELOPE, ApiKey.BROKER_REGISTRATION, ApiKey.BROKER_HEARTBEAT,
    ApiKey.ALLOCATE_PRODUCER_IDS, ApiKey.FETCH_SNAPSHOT,
})
"""The APIs only a KRaft controller's listener serves (Kafka's schemas list no ``broker`` listener for them):
brokers send them to the controller; a broker's client listener neither advertises them in ApiVersions nor
answers them."""
