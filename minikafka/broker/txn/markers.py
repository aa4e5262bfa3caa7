"""Writing COMMIT/ABORT markers to a transaction's partitions (Kafka's ``TransactionMarkerChannelManager``).

The coordinator hands over a completed transaction (producer id, epoch, result,
partitions, transaction version); the markers go out as WriteTxnMarkers v2
requests (KIP-1228: each marker says its transaction version, so a leader fences
a transaction-version-2 marker that is not above the producer's epoch), one per
partition leader, over an :class:`~minikafka.broker.inter_broker.InterBrokerChannel`.
Partitions whose leader is unknown, offline or answers with a retriable error
are retried after a backoff against whoever leads them then, until every
partition has its marker; a deleted topic's partitions are dropped, as Kafka's
``TransactionMarkerRequestCompletionHandler`` does.
"""

from __future__ import annotations

import logging
from typing import Protocol

import trio

from ...common import TopicPartition, partitions_by_topic
from ...protocol.api import ApiKey
from ...protocol.errors import ErrorCode
from ..inter_broker import CHANNEL_ERRORS, InterBrokerChannel

log = logging.getLogger(__name__)

WRITE_TXN_MARKERS_VERSION = 2
# Errors after which the marker is not retried: it is written already, or the coordinator is stale.
_DONE = {ErrorCode.NONE, ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.TRANSACTION_COORDINATOR_FENCED,
         ErrorCode.PRODUCER_FENCED}


class PartitionLeaders(Protocol):
    def partition_leader(self, topic: str, partition: int) -> int | None:
        """The leader's id (-1 offline), or None when the partition does not exist."""


class TransactionMarkerChannelManager:
    """Sends the markers of completed transactions until each partition has one."""

    def __init__(self, channel: InterBrokerChannel, leaders: PartitionLeaders, retry_backoff_s: float = 0.05) -> None:
        self.channel = channel
        self.leaders = leaders
        self.retry_backoff_s = retry_backoff_s

    async def write_markers(self, producer_id: int, producer_epoch: int, coordinator_epoch: int, commit: bool,
                            partitions: set[TopicPartition], transaction_version: int = 0) -> None:
        """Return once every partition (still existing) has the marker."""
        pending = set(partitions)
        while pending:
            by_leader: dict[int, list[TopicPartition]] = {}
            for tp in list(pending):
                leader = self.leaders.partition_leader(tp.topic, tp.partition)
                if leader is None:
                    log.info("marker for producer %d: %s-%d no longer exists", producer_id, *tp)
                    pending.discard(tp)
                elif leader >= 0:
                    by_leader.setdefault(leader, []).append(tp)
            async with trio.open_nursery() as nursery:
                for leader, tps in by_leader.items():
                    nursery.start_soon(self._send, leader, producer_id, producer_epoch, coordinator_epoch, commit,
                                       tps, pending, transaction_version)
            if pending:
                await trio.sleep(self.retry_backoff_s)

    async def _send(self, leader: int, producer_id: int, producer_epoch: int, coordinator_epoch: int, commit: bool,
                    tps: list[TopicPartition], pending: set[TopicPartition], transaction_version: int = 0) -> None:
        topics = partitions_by_topic(tps)
        body = {"markers": [{"producer_id": producer_id, "producer_epoch": producer_epoch,
                             "transaction_result": commit, "coordinator_epoch": coordinator_epoch,
                             "transaction_version": transaction_version,
                             "topics": [{"name": t, "partition_indexes": ps} for t, ps in topics.items()]}]}
        try:
            resp = await self.channel.request(leader, ApiKey.WRITE_TXN_MARKERS, WRITE_TXN_MARKERS_VERSION, body)
        except CHANNEL_ERRORS as exc:
            log.info("markers for producer %d to broker %d failed (%r); retrying", producer_id, leader, exc)
            return
        for marker in resp.markers:
            for t in marker.topics:
                for p in t.partitions:
                    code = ErrorCode(p.error_code)
                    tp = TopicPartition(t.name, p.partition_index)
                    if code in _DONE:
                        if code:
                            log.warning("marker for producer %d on %s-%d: %s; not retried", producer_id, *tp,
                                        code.name)
                        pending.discard(tp)
                    else:
                        log.debug("marker for producer %d on %s-%d: %s; retrying", producer_id, *tp, code.name)
