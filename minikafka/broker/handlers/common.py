"""Small helpers shared by handlers: leader and leader-epoch checks, the client host, the acks=all wait."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...common import TopicPartition
from ...protocol.errors import ErrorCode
from ..partition import Partition
from ..services import (ConsumerGroupCoordinatorApi, DelayedOperations, GroupCoordinatorApi, MetadataCache,
                        PartitionLookup)

# The authorized-operations fields' default when the request did not ask for them (Integer.MIN_VALUE); the
# bits themselves come from .authorization.authorized_operations.
UNREQUESTED_OPERATIONS = -2147483648


def check_leader_epoch(part: Partition, current_leader_epoch: int) -> ErrorCode:
    """Kafka's current-leader-epoch fencing: -1 skips the check."""
    if current_leader_epoch < 0 or current_leader_epoch == part.leader_epoch:
        return ErrorCode.NONE
    if current_leader_epoch < part.leader_epoch:
        return ErrorCode.FENCED_LEADER_EPOCH
    return ErrorCode.UNKNOWN_LEADER_EPOCH


def check_leader(part: Partition) -> ErrorCode:
    """NOT_LEADER_OR_FOLLOWER unless this broker leads the partition."""
    return ErrorCode.NONE if part.is_leader else ErrorCode.NOT_LEADER_OR_FOLLOWER


def leader_partition(partitions: PartitionLookup, topic: str, index: int,
                     current_leader_epoch: int = -1) -> tuple[Partition | None, ErrorCode]:
    """The partition a leader-only request addresses, or the error Kafka answers with
    (UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER, FENCED/UNKNOWN_LEADER_EPOCH)."""
    part = partitions.get(topic, index)
    if part is None:
        return None, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    err = check_leader(part) or check_leader_epoch(part, current_leader_epoch)
    return (None, err) if err else (part, ErrorCode.NONE)


def current_leader(metadata: MetadataCache, local: Partition | None, topic: str | None, index: int
                   ) -> tuple[int, int]:
    """Kafka's ``KafkaApis.getCurrentLeader`` (KIP-951): the leader id and leader epoch of a partition as this
    broker knows them, from its own replica of it when it has one, else from the metadata cache;
    (-1, -1) when the partition is unknown."""
    if local is not None:
        return local.leader_id, local.leader_epoch
    meta = metadata.get_topic(topic) if topic is not None else None
    if meta is None or not 0 <= index < len(meta.partitions):
        return -1, -1
    pm = meta.partitions[index]
    return pm.leader, pm.leader_epoch


def node_endpoints(metadata: MetadataCache, listener: str | None, leaders: set[int]) -> list[Any]:
    """The ``node_endpoints`` of a KIP-951 response: each leader named in a ``current_leader`` that is alive, at
    its address on the listener the request came in on (``getAliveBrokerNode(leaderId, listenerName)``).
    (Produce's, Fetch's and ShareFetch's entries have the same fields.)"""
    if not leaders:
        return []
    return [{"node_id": n.node_id, "host": n.host, "port": n.port, "rack": n.rack}
            for n in metadata.alive_brokers(listener) if n.node_id in leaders]


def client_host(peer: str) -> str:
    """Kafka's ``clientAddress.toString`` form ("/127.0.0.1") from a "host:port" peer."""
    if not peer or peer == "?":
        return ""
    host = peer.rsplit(":", 1)[0] if ":" in peer else peer
    return "/" + host.strip("[]")


@dataclass(slots=True)
class PendingAck:
    """A partition appended with acks=all, waiting for its high watermark to reach ``required``; its
    response ``entry`` gets the outcome (``min_isr``: NOT_ENOUGH_REPLICAS_AFTER_APPEND below it)."""

    entry: Any
    part: Partition
    required: int
    min_isr: int = 0


def _settle(log: PartitionLookup, pending: list[PendingAck]) -> bool:
    """Complete each partition whose HW reached the required offset, or that lost leadership; whether one
    lost leadership."""
    lost = False
    for item in list(pending):
        part = item.part
        if not part.is_leader or log.get(part.topic, part.index) is not part:
            item.entry["error_code"] = ErrorCode.NOT_LEADER_OR_FOLLOWER
            lost = True
        elif part.log.high_watermark >= item.required:
            if len(log.isr(part)) < item.min_isr:
                item.entry["error_code"] = ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        else:
            continue
        pending.remove(item)
    return lost


async def await_acks(log: PartitionLookup, delayed: DelayedOperations, pending: list[PendingAck],
                     deadline: float) -> bool:
    """Kafka's ``DelayedProduce`` (Produce and the markers of WriteTxnMarkers): wait, woken only by changes
    to these partitions, until each is replicated; whatever is left at ``deadline`` gets REQUEST_TIMED_OUT.
    Returns whether some partition lost its leadership meanwhile (answered NOT_LEADER_OR_FOLLOWER)."""
    lost = _settle(log, pending)
    if pending:
        with delayed.watch(item.part.tp for item in pending) as watch:
            while pending and await watch.wait(deadline):
                lost = _settle(log, pending) or lost
        lost = _settle(log, pending) or lost
    for item in pending:
        item.entry["error_code"] = ErrorCode.REQUEST_TIMED_OUT
    return lost


def failed_group_description(group_id: str, code: int, message: str | None = None) -> Any:
    """A ConsumerGroupDescribe/ShareGroupDescribe group entry that only carries an error (the two
    responses' group entries have the same fields)."""
    return {"error_code": code, "error_message": message, "group_id": group_id, "group_state": "",
            "group_epoch": 0, "assignment_epoch": 0, "assignor_name": "", "members": [],
            "authorized_operations": UNREQUESTED_OPERATIONS}


def coordinates_every_group(group_id: str) -> ErrorCode:
    """The default ``coordinator_error`` of the group handlers: a broker alone coordinates every group (NONE).
    A broker of a cluster answers NOT_COORDINATOR for a group it does not coordinate, and
    COORDINATOR_LOAD_IN_PROGRESS while it loads the group's ``__consumer_offsets`` partition."""
    return ErrorCode.NONE


async def group_write_error(coordinator: GroupCoordinatorApi | ConsumerGroupCoordinatorApi, group_id: str
                            ) -> ErrorCode:
    """Wait until what the group coordinator wrote for the group (a classic group's members at the end of a
    rebalance, a consumer group's members and assignments) is replicated, as Kafka answers a write once it is
    committed: NONE, else the error the member gets (Kafka's ``handleOperationException``): NOT_COORDINATOR when
    leadership moved, COORDINATOR_NOT_AVAILABLE when the write timed out."""
    code = await coordinator.replicated(group_id)
    if code == ErrorCode.NONE:
        return code
    return ErrorCode.NOT_COORDINATOR if code == ErrorCode.NOT_COORDINATOR else ErrorCode.COORDINATOR_NOT_AVAILABLE


async def wait_replicated(coordinator: GroupCoordinatorApi, group_id: str,
                          errors: dict[TopicPartition, ErrorCode]) -> None:
    """Offsets the group coordinator took are answered once replicated (acks=all on ``__consumer_offsets``,
    as Kafka's coordinator runtime answers a write): until then, or with the error that ended the wait (the
    coordinator moved: NOT_COORDINATOR; ``offsets.commit.timeout.ms``: REQUEST_TIMED_OUT)."""
    taken = [tp for tp, code in errors.items() if code == ErrorCode.NONE]
    if taken:
        code = await coordinator.replicated(group_id)
        if code:
            errors.update(dict.fromkeys(taken, code))
