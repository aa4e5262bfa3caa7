"""Fetch (api key 1): requests and responses, versions 4-18.

What each version means (Kafka 4.2's ``FetchRequest.json``): v12 is the first flexible version, with
epoch validation (``last_fetched_epoch``, ``diverging_epoch``) and leader discovery in ``current_leader``;
v13 (KIP-516) names topics by ``topic_id`` and may answer UNKNOWN_TOPIC_ID; v14 may answer
OFFSET_MOVED_TO_TIERED_STORAGE (KIP-405); v15 (KIP-903) moves the follower's id into the tagged
``replica_state`` (``replica_id`` and ``replica_epoch``, the broker epoch) and drops the top-level
``replica_id``; v16 (KIP-951) answers NOT_LEADER_OR_FOLLOWER and FENCED_LEADER_EPOCH with the current
leader and lists its endpoint in ``node_endpoints``; v17 (KIP-853) adds the follower's
``replica_directory_id``; v18 (KIP-1166) adds the ``high_watermark`` the fetching replica knows (max int64
when it does not take part).
"""

from typing import Any

from ..schema import Message, f, struct

FetchRequest = Message("FetchRequest", 1, "4-18", "12+", [
    f("cluster_id", "string", "12+", nullable="12+", default=None, tag=0),
    f("replica_id", "int32", "0-14", default=-1, entity="brokerId"),
    f("replica_state", struct(
        f("replica_id", "int32", "15+", default=-1, entity="brokerId"),
        f("replica_epoch", "int64", "15+", default=-1),
    ), "15+", tag=1),
    f("max_wait_ms", "int32"),
    f("min_bytes", "int32"),
    f("max_bytes", "int32", "3+", default=0x7FFFFFFF),
    f("isolation_level", "int8", "4+", default=0),
    f("session_id", "int32", "7+", default=0),
    f("session_epoch", "int32", "7+", default=-1),
    f("topics", [
        f("topic", "string", "0-12", entity="topicName"),
        f("topic_id", "uuid", "13+", entity="topicId"),
        f("partitions", [
            f("partition", "int32", entity="partitionIndex"),
            f("current_leader_epoch", "int32", "9+", default=-1),
            f("fetch_offset", "int64"),
            f("last_fetched_epoch", "int32", "12+", default=-1),
            f("log_start_offset", "int64", "5+", default=-1),
            f("partition_max_bytes", "int32"),
            f("replica_directory_id", "uuid", "17+", tag=0),
            f("high_watermark", "int64", "18+", default=0x7FFFFFFFFFFFFFFF, tag=1),
        ]),
    ]),
    f("forgotten_topics_data", [
        f("topic", "string", "7-12", entity="topicName"),
        f("topic_id", "uuid", "13+", entity="topicId"),
        f("partitions", "[]int32", "7+", entity="partitionIndex"),
    ], "7+"),
    f("rack_id", "string", "11+", default=""),
])

FetchResponse = Message("FetchResponse", 1, "4-18", "12+", [
    f("throttle_time_ms", "int32", "1+"),
    f("error_code", "int16", "7+"),
    f("session_id", "int32", "7+", default=0),
    f("responses", [
        f("topic", "string", "0-12", entity="topicName"),
        f("topic_id", "uuid", "13+", entity="topicId"),
        f("partitions", [
            f("partition_index", "int32", entity="partitionIndex"),
            f("error_code", "int16"),
            f("high_watermark", "int64"),
            f("last_stable_offset", "int64", "4+", default=-1),
            f("log_start_offset", "int64", "5+", default=-1),
            f("diverging_epoch", struct(
                f("epoch", "int32", "12+", default=-1),
                f("end_offset", "int64", "12+", default=-1),
            ), "12+", tag=0),
            f("current_leader", struct(
                f("leader_id", "int32", "12+", default=-1, entity="brokerId"),
                f("leader_epoch", "int32", "12+", default=-1),
            ), "12+", tag=1),
            f("snapshot_id", struct(
                f("end_offset", "int64", "0+", default=-1),
                f("epoch", "int32", "0+", default=-1),
            ), "12+", tag=2),
            f("aborted_transactions", [
                f("producer_id", "int64", "4+", entity="producerId"),
                f("first_offset", "int64", "4+"),
            ], "4+", nullable="4+"),
            f("preferred_read_replica", "int32", "11+", default=-1, entity="brokerId"),
            f("records", "records", nullable="0+"),
        ]),
    ]),
    f("node_endpoints", [
        f("node_id", "int32", "16+", entity="brokerId"),
        f("host", "string", "16+"),
        f("port", "int32", "16+"),
        f("rack", "string", "16+", nullable="16+", default=None),
    ], "16+", tag=0),
])


def fetch_replica_id(req: Any) -> int:
    """Kafka's ``FetchRequest.replicaId()``: who sends a parsed fetch request, at any version: the top-level
    ``replica_id`` before v15, ``replica_state.replica_id`` from v15 (KIP-903); -1 for a consumer."""
    replica_id: int = req["replica_id"]
    if replica_id < 0:
        state = req.get("replica_state")
        if state:
            replica_id = state["replica_id"]
    return replica_id


def fetch_replica_epoch(req: Any) -> int:
    """Kafka's ``FetchRequest.replicaEpoch()``: the follower's broker epoch (v15+, KIP-903), else -1."""
    state = req.get("replica_state")
    return state["replica_epoch"] if state else -1
