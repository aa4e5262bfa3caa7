"""Which response versions make a client honour ``throttle_time_ms`` itself (KIP-219).

Kafka's ``AbstractResponse.shouldClientThrottle``: from these versions on, a
broker answers a quota violation at once and the client backs off; before
them, the broker holds the response for the throttle time.
"""

from __future__ import annotations

from .api import ApiKey

NEVER = 1 << 15
"""Beyond any version: the response keeps ``AbstractResponse``'s default (the client never throttles)."""

# First version of each API whose clients throttle themselves; APIs not listed: from v0.
# Keyed by ApiKey members, looked up by plain api key ints (an IntEnum hashes as its value).
CLIENT_THROTTLES_FROM: dict[int, int] = {
    ApiKey.PRODUCE: 6, ApiKey.FETCH: 8, ApiKey.LIST_OFFSETS: 3, ApiKey.METADATA: 6,
    ApiKey.OFFSET_COMMIT: 4, ApiKey.OFFSET_FETCH: 4, ApiKey.FIND_COORDINATOR: 2, ApiKey.JOIN_GROUP: 3,
    ApiKey.HEARTBEAT: 2, ApiKey.LEAVE_GROUP: 2, ApiKey.SYNC_GROUP: 2, ApiKey.DESCRIBE_GROUPS: 2,
    ApiKey.LIST_GROUPS: 2, ApiKey.API_VERSIONS: 2, ApiKey.CREATE_TOPICS: 3, ApiKey.DELETE_TOPICS: 2,
    ApiKey.DELETE_RECORDS: 1, ApiKey.INIT_PRODUCER_ID: 1, ApiKey.OFFSET_FOR_LEADER_EPOCH: 2,
    ApiKey.DESCRIBE_CONFIGS: 2, ApiKey.CREATE_PARTITIONS: 1, ApiKey.DELETE_GROUPS: 1,
    ApiKey.DESCRIBE_CLIENT_QUOTAS: 1, ApiKey.ALTER_CLIENT_QUOTAS: 1,
    ApiKey.ADD_PARTITIONS_TO_TXN: 1, ApiKey.ADD_OFFSETS_TO_TXN: 1, ApiKey.END_TXN: 1, ApiKey.TXN_OFFSET_COMMIT: 1,
    # KIP-848/KIP-932 responses keep the default (checked: ConsumerGroupHeartbeat, ShareFetch in Kafka 4.2).
    ApiKey.CONSUMER_GROUP_HEARTBEAT: NEVER, ApiKey.CONSUMER_GROUP_DESCRIBE: NEVER,
    ApiKey.SHARE_GROUP_HEARTBEAT: NEVER, ApiKey.SHARE_GROUP_DESCRIBE: NEVER, ApiKey.SHARE_FETCH: NEVER,
    ApiKey.SHARE_ACKNOWLEDGE: NEVER, ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: NEVER,
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: NEVER, ApiKey.DELETE_SHARE_GROUP_OFFSETS: NEVER,
    # DescribeQuorum (a raft API, no throttle_time_ms) keeps the default too.
    ApiKey.DESCRIBE_QUORUM: NEVER,
}


def client_throttles_itself(api_key: int, version: int) -> bool:
    """True when this response version makes the client honour throttle_time_ms (KIP-219)."""
    return version >= CLIENT_THROTTLES_FROM.get(api_key, 0)
