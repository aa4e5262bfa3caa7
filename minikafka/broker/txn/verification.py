"""The partition leader's KIP-890 checks (Kafka's ``AddPartitionsToTxnManager``).

Part 1: before a transactional batch opens a transaction on a partition, the leader asks
the transaction coordinator (AddPartitionsToTxn v5, ``verify_only``) whether the
partition was added to that producer's ongoing transaction; a hanging
transaction (a late batch after its transaction ended) is refused instead of
holding the last stable offset back forever (the coordinator answers
TRANSACTION_ABORTABLE, which the produce handler turns into INVALID_TXN_STATE for
clients before Produce v11).  Part 2: a client of transaction version 2 (Produce
v12+) sends no AddPartitionsToTxn; the leader has the coordinator add the
partition (``verify_only`` false) instead of checking it.

Errors a produce request cannot carry to clients are mapped as Kafka maps them:
coordinator trouble and CONCURRENT_TRANSACTIONS become the retriable
NOT_ENOUGH_REPLICAS, PRODUCER_FENCED becomes INVALID_PRODUCER_EPOCH, a refused
CLUSTER_ACTION (a broker principal without it) INVALID_TXN_STATE.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from ...common import Node, TopicPartition, partitions_by_topic
from ...protocol.api import ApiKey
from ...protocol.errors import ErrorCode
from ..inter_broker import CHANNEL_ERRORS, InterBrokerChannel

log = logging.getLogger(__name__)

ADD_PARTITIONS_TO_TXN_VERSION = 5
_RETRIABLE = {ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
              ErrorCode.CONCURRENT_TRANSACTIONS}


def produce_error(code: ErrorCode) -> ErrorCode:
    """A verification error as a produce response carries it."""
    if code in _RETRIABLE:
        return ErrorCode.NOT_ENOUGH_REPLICAS
    if code == ErrorCode.PRODUCER_FENCED:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    if code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED:  # not the client's to see: verification did not happen
        return ErrorCode.INVALID_TXN_STATE
    return code


class AddPartitionsToTxnManager:
    """Verifies (or adds) partitions with the coordinator over an inter-broker connection."""

    def __init__(self, channel: InterBrokerChannel, coordinator: Callable[[str], Node]) -> None:
        self.channel = channel
        self.coordinator = coordinator  # a transactional id's coordinator

    async def verify(self, transactional_id: str, producer_id: int, producer_epoch: int,
                     partitions: list[TopicPartition], add_partitions: bool = False
                     ) -> dict[TopicPartition, ErrorCode]:
        """Each partition's error (NONE: in the transaction, or added with ``add_partitions``)."""
        node = self.coordinator(transactional_id)
        if node.node_id < 0:
            return dict.fromkeys(partitions, ErrorCode.NOT_ENOUGH_REPLICAS)
        topics = partitions_by_topic(partitions)
        body = {"transactions": [{"transactional_id": transactional_id, "producer_id": producer_id,
                                  "producer_epoch": producer_epoch, "verify_only": not add_partitions,
                                  "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}]}
        try:
            resp = await self.channel.request(node.node_id, ApiKey.ADD_PARTITIONS_TO_TXN,
                                              ADD_PARTITIONS_TO_TXN_VERSION, body)
        except CHANNEL_ERRORS as exc:
            log.info("verifying %s with coordinator %d failed: %r", transactional_id, node.node_id, exc)
            return dict.fromkeys(partitions, ErrorCode.NOT_ENOUGH_REPLICAS)
        out = dict.fromkeys(partitions, ErrorCode.NOT_ENOUGH_REPLICAS)
        if resp.error_code:
            return dict.fromkeys(partitions, produce_error(ErrorCode(resp.error_code)))
        for txn in resp.results_by_transaction:
            for t in txn.topic_results:
                for p in t.results_by_partition:
                    tp = TopicPartition(t.name, p.partition_index)
                    if tp in out:
                        out[tp] = produce_error(ErrorCode(p.partition_error_code))
        return out
