"""Handlers of the transaction APIs (the transaction half of Kafka's ``KafkaApis``).

InitProducerId (22, with a transactional id), AddPartitionsToTxn (24, v0-3 from
clients, v4+ batched from brokers with ``verify_only``), AddOffsetsToTxn (25),
EndTxn (26), WriteTxnMarkers (27, from the coordinator to partition leaders),
TxnOffsetCommit (28), DescribeProducers (61), DescribeTransactions (65) and
ListTransactions (66).  Coordinator APIs answer NOT_COORDINATOR on a broker
that does not have the transactional id's ``__transaction_state`` partition
loaded (COORDINATOR_LOAD_IN_PROGRESS while it loads it), and answer a state change
once its record is replicated (COORDINATOR_NOT_AVAILABLE when that times out,
NOT_COORDINATOR when the partition moved first).  Older request versions get
INVALID_PRODUCER_EPOCH where newer ones get PRODUCER_FENCED, as Kafka maps it.

KIP-890 part 2 (transaction version 2, what a client uses when ApiVersions finalizes ``transaction.version``
at 2): EndTxn v5 bumps the producer epoch at every transaction's end and answers with the epoch (and, past
the last epoch, the producer id) to use next; such a client sends no AddPartitionsToTxn or AddOffsetsToTxn:
a Produce v12+ has the partition leader add the partition (AddPartitionsToTxn v4+ without ``verify_only``)
and a TxnOffsetCommit v5 adds its group.  WriteTxnMarkers v2 carries each marker's transaction version to
the leader.  ListTransactions v2 filters by a transactional-id regular expression (KIP-1152).

With an authorizer, as Kafka's ``KafkaApis`` (3.x): InitProducerId needs WRITE on the transactional id, or
for an idempotent producer IDEMPOTENT_WRITE on the cluster or WRITE on at least one topic (KIP-679);
AddPartitionsToTxn from clients WRITE on the transactional id and on each topic, from brokers (v4+)
CLUSTER_ACTION; AddOffsetsToTxn WRITE on the transactional id and READ on the group; EndTxn WRITE on the
transactional id; WriteTxnMarkers CLUSTER_ACTION; TxnOffsetCommit WRITE on the transactional id, READ on
the group and on each topic; DescribeProducers READ on each topic; DescribeTransactions DESCRIBE on each
transactional id (listing only the topics it may describe); ListTransactions lists only the transactional
ids it may describe.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import TYPE_CHECKING

import trio

from ...common import OffsetAndMetadata, TopicPartition, partitions_by_topic
from ...protocol.api import ApiKey
from ...protocol.errors import ErrorCode
from ..error_responses import error_response
from ..groups.consumer.subscription import InvalidRegexError, compile_topic_regex
from ..request import RequestContext
from ..services import (Authorizer, DelayedOperations, GroupCoordinatorApi, MetadataCache, PartitionLookup,
                        ProducerIdGenerator, TransactionCoordinatorApi, TxnMarkerLog)
from .authorization import AclOperation, ResourceType, authorize, authorize_by_resource_type, filter_authorized
from .common import PendingAck, await_acks, check_leader, coordinates_every_group, wait_replicated

if TYPE_CHECKING:
    from ...protocol import bodies as B

log = logging.getLogger(__name__)

E = ErrorCode
# A transactional id's coordinator error on this broker: NONE, NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS.
CoordinatorError = Callable[[str], ErrorCode]


def coordinates_every_id(transactional_id: str) -> ErrorCode:
    """A broker on its own coordinates every transactional id."""
    return E.NONE
MARKER_REPLICATION_TIMEOUT_S = 30.0
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})  # Kafka's Topic.isInternal


def _txn_id_denied(authorizer: Authorizer | None, ctx: RequestContext, transactional_id: str,
                   operation: AclOperation = AclOperation.WRITE) -> bool:
    return authorizer is not None and not authorize(authorizer, ctx, operation, ResourceType.TRANSACTIONAL_ID,
                                                    transactional_id)


def _group_denied(authorizer: Authorizer | None, ctx: RequestContext, group_id: str) -> bool:
    return authorizer is not None and not authorize(authorizer, ctx, AclOperation.READ, ResourceType.GROUP, group_id)


def fenced_error(code: ErrorCode, version: int, first_version_with_fenced: int) -> ErrorCode:
    """PRODUCER_FENCED (KIP-588) only for versions that know it; INVALID_PRODUCER_EPOCH before."""
    if code == E.PRODUCER_FENCED and version < first_version_with_fenced:
        return E.INVALID_PRODUCER_EPOCH
    return code


def implicit_add_error(code: ErrorCode) -> ErrorCode:
    """An implicit AddOffsetsToTxn's error as TxnOffsetCommit v5 answers it: the coordinator being busy
    ending the previous transaction, or unreachable, is COORDINATOR_NOT_AVAILABLE (Kafka's group coordinator
    turns the verification's NOT_ENOUGH_REPLICAS into it), so the client looks it up again and retries."""
    if code in (E.CONCURRENT_TRANSACTIONS, E.COORDINATOR_LOAD_IN_PROGRESS, E.NOT_COORDINATOR):
        return E.COORDINATOR_NOT_AVAILABLE
    return code


def unknown_partitions(metadata: MetadataCache, tps: Iterable[TopicPartition]) -> set[TopicPartition]:
    out = set()
    for tp in tps:
        topic = metadata.get_topic(tp.topic)
        if topic is None or not 0 <= tp.partition < len(topic.partitions):
            out.add(tp)
    return out


class InitProducerIdHandler:
    """A producer id: for idempotent producers a new one (or, v3+, the next epoch of theirs, KIP-360);
    for a transactional id the coordinator's, fencing any older instance."""

    def __init__(self, producer_ids: ProducerIdGenerator, coordinator: TransactionCoordinatorApi,
                 coordinator_error: CoordinatorError = coordinates_every_id,
                 authorizer: Authorizer | None = None) -> None:
        self.producer_ids = producer_ids
        self.coordinator = coordinator
        self.coordinator_error = coordinator_error
        self.authorizer = authorizer

    def _authorization_error(self, ctx: RequestContext, tid: str | None) -> ErrorCode:
        if self.authorizer is None:
            return E.NONE
        if tid is not None:
            return E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED if _txn_id_denied(self.authorizer, ctx, tid) else E.NONE
        if authorize(self.authorizer, ctx, AclOperation.IDEMPOTENT_WRITE, log_if_denied=False) or \
                authorize_by_resource_type(self.authorizer, ctx, AclOperation.WRITE, ResourceType.TOPIC):
            return E.NONE
        return E.CLUSTER_AUTHORIZATION_FAILED

    async def handle(self, ctx: RequestContext, req: B.InitProducerIdRequestBody) -> B.InitProducerIdResponseBody:
        v = ctx.api_version
        tid = req["transactional_id"]
        if denied := self._authorization_error(ctx, tid):
            return {"throttle_time_ms": ctx.throttle_time_ms, "error_code": denied, "producer_id": -1,
                    "producer_epoch": -1}
        expected_pid, expected_epoch = (req["producer_id"], req["producer_epoch"]) if v >= 3 else (-1, -1)
        if tid is None:
            if expected_pid >= 0 and expected_epoch >= 0 and expected_epoch + 1 <= 32767:
                return {"throttle_time_ms": ctx.throttle_time_ms, "error_code": 0,
                        "producer_id": expected_pid, "producer_epoch": expected_epoch + 1}
            return {"throttle_time_ms": ctx.throttle_time_ms, "error_code": 0,
                    "producer_id": self.producer_ids.generate(), "producer_epoch": 0}
        if not_coordinator := self.coordinator_error(tid) or self.coordinator.write_error(tid):
            return {"throttle_time_ms": ctx.throttle_time_ms, "error_code": not_coordinator, "producer_id": -1,
                    "producer_epoch": -1}
        got = self.coordinator.init_producer_id(tid, req["transaction_timeout_ms"], expected_pid, expected_epoch)
        if not got.error and (unreplicated := await self.coordinator.replicated(tid)):
            got = replace(got, error=unreplicated)
        return {"throttle_time_ms": ctx.throttle_time_ms, "error_code": fenced_error(got.error, v, 4),
                "producer_id": got.producer_id if not got.error else -1,
                "producer_epoch": got.producer_epoch if not got.error else -1}


class AddPartitionsToTxnHandler:
    """Clients (v0-3) add partitions to their transaction; brokers (v4+) batch them, or verify (KIP-890)."""

    def __init__(self, coordinator: TransactionCoordinatorApi, metadata: MetadataCache,
                 coordinator_error: CoordinatorError = coordinates_every_id,
                 authorizer: Authorizer | None = None) -> None:
        self.coordinator = coordinator
        self.metadata = metadata
        self.coordinator_error = coordinator_error
        self.authorizer = authorizer

    async def _one(self, version: int, tid: str, pid: int, epoch: int, topics: list, verify_only: bool,
             ctx: RequestContext | None = None) -> list[B.AddPartitionsToTxnResponseResultsByTopicV3AndBelow]:
        """One transaction's partitions; ``ctx`` (client requests, v0-3) to check WRITE on the transactional
        id and on each topic."""
        tps = [TopicPartition(t["name"], p) for t in topics for p in t["partitions"]]
        results: dict[TopicPartition, ErrorCode]
        denied: set[TopicPartition] = set()
        if ctx is not None and self.authorizer is not None:
            if _txn_id_denied(self.authorizer, ctx, tid):
                return self._by_topic(version, dict.fromkeys(tps, E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED))
            writable = filter_authorized(self.authorizer, ctx, AclOperation.WRITE, ResourceType.TOPIC,
                                         {tp.topic for tp in tps} - INTERNAL_TOPICS)
            denied = {tp for tp in tps if tp.topic not in writable}
        if not_coordinator := self.coordinator_error(tid) or (not verify_only and self.coordinator.write_error(tid)):
            results = dict.fromkeys(tps, not_coordinator)
        elif verify_only:
            results = self.coordinator.verify_partitions(tid, pid, epoch, tps)
            if version < 5:  # v5 (KIP-890) brought TRANSACTION_ABORTABLE; earlier brokers know INVALID_TXN_STATE
                results = {tp: E.INVALID_TXN_STATE if code == E.TRANSACTION_ABORTABLE else code
                           for tp, code in results.items()}
        else:
            unknown = unknown_partitions(self.metadata, [tp for tp in tps if tp not in denied])
            if unknown or denied:  # Kafka: the failed ones fail, the rest are not attempted
                results = {tp: E.TOPIC_AUTHORIZATION_FAILED if tp in denied
                           else E.UNKNOWN_TOPIC_OR_PARTITION if tp in unknown else E.OPERATION_NOT_ATTEMPTED
                           for tp in tps}
            else:
                # v4+ comes from a partition leader adding for a transaction-version-2 client (KIP-890 part 2,
                # Kafka's transactionVersionForAddPartitionsToTxn); v0-3 from a client of an older version.
                code = self.coordinator.add_partitions(tid, pid, epoch, tps,
                                                       transaction_version=2 if version >= 4 else 0)
                results = dict.fromkeys(tps, code or await self.coordinator.replicated(tid))
        return self._by_topic(version, results)

    @staticmethod
    def _by_topic(version: int, results: dict[TopicPartition, ErrorCode]
                  ) -> list[B.AddPartitionsToTxnResponseResultsByTopicV3AndBelow]:
        by_topic: dict[str, list[B.AddPartitionsToTxnResponseResultsByTopicV3AndBelowResultsByPartition]] = {}
        for tp, code in results.items():
            by_topic.setdefault(tp.topic, []).append(
                {"partition_index": tp.partition, "partition_error_code": fenced_error(code, version, 2)})
        return [{"name": t, "results_by_partition": ps} for t, ps in by_topic.items()]

    async def handle(self, ctx: RequestContext, req: B.AddPartitionsToTxnRequestBody
                     ) -> B.AddPartitionsToTxnResponseBody:
        v = ctx.api_version
        if v <= 3:
            return {"throttle_time_ms": ctx.throttle_time_ms, "results_by_topic_v3_and_below": await self._one(
                v, req["v3_and_below_transactional_id"], req["v3_and_below_producer_id"],
                req["v3_and_below_producer_epoch"], req["v3_and_below_topics"], False, ctx)}
        if self.authorizer is not None and not authorize(self.authorizer, ctx, AclOperation.CLUSTER_ACTION):
            # v4+ comes from brokers (KIP-890 verification): only they may send it.
            return error_response(ApiKey.ADD_PARTITIONS_TO_TXN, v, req,  # type: ignore[return-value]
                                  E.CLUSTER_AUTHORIZATION_FAILED, ctx.throttle_time_ms)
        return {"throttle_time_ms": ctx.throttle_time_ms, "error_code": 0, "results_by_transaction": [
            {"transactional_id": t["transactional_id"],
             "topic_results": await self._one(v, t["transactional_id"], t["producer_id"], t["producer_epoch"],
                                              t["topics"], t["verify_only"])}
            for t in req["transactions"]]}


class AddOffsetsToTxnHandler:
    """The group's offsets join the transaction (Kafka adds the group's ``__consumer_offsets`` partition)."""

    def __init__(self, coordinator: TransactionCoordinatorApi,
                 coordinator_error: CoordinatorError = coordinates_every_id,
                 authorizer: Authorizer | None = None) -> None:
        self.coordinator = coordinator
        self.coordinator_error = coordinator_error
        self.authorizer = authorizer

    async def handle(self, ctx: RequestContext, req: B.AddOffsetsToTxnRequestBody) -> B.AddOffsetsToTxnResponseBody:
        if _txn_id_denied(self.authorizer, ctx, req["transactional_id"]):
            return {"throttle_time_ms": ctx.throttle_time_ms, "error_code": E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
        if _group_denied(self.authorizer, ctx, req["group_id"]):
            return {"throttle_time_ms": ctx.throttle_time_ms, "error_code": E.GROUP_AUTHORIZATION_FAILED}
        tid = req["transactional_id"]
        if not_coordinator := self.coordinator_error(tid) or self.coordinator.write_error(tid):
            return {"throttle_time_ms": ctx.throttle_time_ms, "error_code": not_coordinator}
        code = self.coordinator.add_partitions(tid, req["producer_id"], req["producer_epoch"],
                                               groups=[req["group_id"]])
        code = code or await self.coordinator.replicated(tid)
        return {"throttle_time_ms": ctx.throttle_time_ms, "error_code": fenced_error(code, ctx.api_version, 2)}


class EndTxnHandler:
    """Commit or abort: answered once the coordinator has prepared it; the markers follow."""

    def __init__(self, coordinator: TransactionCoordinatorApi,
                 coordinator_error: CoordinatorError = coordinates_every_id,
                 authorizer: Authorizer | None = None) -> None:
        self.coordinator = coordinator
        self.coordinator_error = coordinator_error
        self.authorizer = authorizer

    async def handle(self, ctx: RequestContext, req: B.EndTxnRequestBody) -> B.EndTxnResponseBody:
        if _txn_id_denied(self.authorizer, ctx, req["transactional_id"]):
            return error_response(ApiKey.END_TXN, ctx.api_version, req,  # type: ignore[return-value]
                                  E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, ctx.throttle_time_ms)
        tid = req["transactional_id"]
        if not_coordinator := self.coordinator_error(tid) or self.coordinator.write_error(tid):
            return {"throttle_time_ms": ctx.throttle_time_ms, "error_code": not_coordinator}
        v = ctx.api_version
        got = self.coordinator.end_transaction(tid, req["producer_id"], req["producer_epoch"],
                                               req["committed"], bump_epoch=v >= 5)
        if not got.error and (unreplicated := await self.coordinator.replicated(tid)):
            got = replace(got, error=unreplicated)
        return {"throttle_time_ms": ctx.throttle_time_ms, "error_code": fenced_error(got.error, v, 2),
                "producer_id": got.producer_id, "producer_epoch": got.producer_epoch}


class TxnOffsetCommitHandler:
    """Offsets committed inside a transaction: pending in the group until the transaction commits."""

    def __init__(self, groups: GroupCoordinatorApi, coordinator: TransactionCoordinatorApi,
                 metadata: MetadataCache, authorizer: Authorizer | None = None,
                 coordinator_error: Callable[[str], ErrorCode] = coordinates_every_group) -> None:
        self.groups = groups
        self.coordinator = coordinator
        self.metadata = metadata
        self.authorizer = authorizer
        self.coordinator_error = coordinator_error  # whether this broker coordinates the group (else NOT_COORDINATOR)

    async def handle(self, ctx: RequestContext, req: B.TxnOffsetCommitRequestBody) -> B.TxnOffsetCommitResponseBody:
        v = ctx.api_version
        for denied, code in ((_txn_id_denied(self.authorizer, ctx, req["transactional_id"]),
                              E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
                             (_group_denied(self.authorizer, ctx, req["group_id"]), E.GROUP_AUTHORIZATION_FAILED)):
            if denied:
                return error_response(ApiKey.TXN_OFFSET_COMMIT, v, req,  # type: ignore[return-value]
                                      code, ctx.throttle_time_ms)
        if not_coordinator := self.coordinator_error(req["group_id"]):
            return error_response(ApiKey.TXN_OFFSET_COMMIT, v, req,  # type: ignore[return-value]
                                  not_coordinator, ctx.throttle_time_ms)
        offsets: dict[TopicPartition, OffsetAndMetadata] = {}
        now_ms = self.groups.now_ms()
        for t in req["topics"]:
            for p in t["partitions"]:
                offsets[TopicPartition(t["name"], p["partition_index"])] = OffsetAndMetadata(
                    p["committed_offset"], p["committed_leader_epoch"], p["committed_metadata"] or "", now_ms)
        results: dict[TopicPartition, ErrorCode] = {}
        if self.authorizer is not None:
            readable = filter_authorized(self.authorizer, ctx, AclOperation.READ, ResourceType.TOPIC,
                                         (tp.topic for tp in offsets))
            results.update((tp, E.TOPIC_AUTHORIZATION_FAILED) for tp in offsets if tp.topic not in readable)
        unknown = unknown_partitions(self.metadata, (tp for tp in offsets if tp not in results))
        results.update(dict.fromkeys(unknown, E.UNKNOWN_TOPIC_OR_PARTITION))
        known = {tp: om for tp, om in offsets.items() if tp not in results}
        if known:
            tid = req["transactional_id"]
            # The transaction's coordinator is unknown while its partition loads or moves: the client retries.
            code = E.NONE if self.coordinator.loaded(tid) else E.COORDINATOR_NOT_AVAILABLE
            if v >= 5 and not code:  # KIP-890 part 2: the commit adds the group to the transaction
                code = self.coordinator.write_error(tid) or self.coordinator.add_partitions(
                    tid, req["producer_id"], req["producer_epoch"], groups=[req["group_id"]], transaction_version=2)
                code = implicit_add_error(code or await self.coordinator.replicated(tid))
            code = code or self.coordinator.txn_offset_commit_allowed(
                req["transactional_id"], req["producer_id"], req["producer_epoch"], req["group_id"])
            if code:
                results.update(dict.fromkeys(known, fenced_error(code, v, 3)))
            else:
                results.update(self.groups.txn_commit_offsets(
                    req["group_id"], req["producer_id"], req["member_id"] if v >= 3 else "",
                    req["group_instance_id"] if v >= 3 else None, req["generation_id"] if v >= 3 else -1, known,
                    producer_epoch=req["producer_epoch"]))
                await wait_replicated(self.groups, req["group_id"], results)
        by_topic: dict[str, list[B.TxnOffsetCommitResponseTopicsPartitions]] = {}
        for tp in offsets:
            by_topic.setdefault(tp.topic, []).append({"partition_index": tp.partition, "error_code": results[tp]})
        return {"throttle_time_ms": ctx.throttle_time_ms,
                "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]}


class WriteTxnMarkersHandler:
    """The partition-leader side of a transaction's end: append the markers, answer once they are replicated
    (Kafka appends them with acks=all)."""

    def __init__(self, log: TxnMarkerLog, delayed: DelayedOperations, authorizer: Authorizer | None = None) -> None:
        self.log = log
        self.delayed = delayed
        self.authorizer = authorizer

    async def handle(self, ctx: RequestContext, req: B.WriteTxnMarkersRequestBody) -> B.WriteTxnMarkersResponseBody:
        if not authorize(self.authorizer, ctx, AclOperation.CLUSTER_ACTION):  # only the coordinator sends it
            return error_response(ApiKey.WRITE_TXN_MARKERS, ctx.api_version, req,  # type: ignore[return-value]
                                  E.CLUSTER_AUTHORIZATION_FAILED)
        waiting: list[PendingAck] = []
        markers: list[B.WriteTxnMarkersResponseMarkers] = []
        for m in req["markers"]:
            topics: list[B.WriteTxnMarkersResponseMarkersTopics] = []
            for t in m["topics"]:
                parts: list[B.WriteTxnMarkersResponseMarkersTopicsPartitions] = []
                for index in t["partition_indexes"]:
                    part = self.log.get(t["name"], index)
                    entry: B.WriteTxnMarkersResponseMarkersTopicsPartitions = {"partition_index": index}
                    if part is None:
                        entry["error_code"] = E.UNKNOWN_TOPIC_OR_PARTITION
                    elif check_leader(part):
                        entry["error_code"] = E.NOT_LEADER_OR_FOLLOWER
                    else:
                        code = self.log.write_txn_marker(part, m["producer_id"], m["producer_epoch"],
                                                         m["coordinator_epoch"], m["transaction_result"],
                                                         m["transaction_version"] if ctx.api_version >= 2 else 0)
                        entry["error_code"] = code
                        if not code and part.is_replicated:
                            waiting.append(PendingAck(entry, part, part.log.log_end_offset))
                    parts.append(entry)
                topics.append({"name": t["name"], "partitions": parts})
            markers.append({"producer_id": m["producer_id"], "topics": topics})
        if waiting:
            await await_acks(self.log, self.delayed, waiting, trio.current_time() + MARKER_REPLICATION_TIMEOUT_S)
        return {"markers": markers}


class DescribeProducersHandler:
    """The producers a partition leader knows: epochs, last sequence, open transaction (KIP-664)."""

    def __init__(self, partitions: PartitionLookup, authorizer: Authorizer | None = None) -> None:
        self.partitions = partitions
        self.authorizer = authorizer

    async def handle(self, ctx: RequestContext, req: B.DescribeProducersRequestBody
                     ) -> B.DescribeProducersResponseBody:
        topics: list[B.DescribeProducersResponseTopics] = []
        readable = None if self.authorizer is None else filter_authorized(
            self.authorizer, ctx, AclOperation.READ, ResourceType.TOPIC, (t["name"] for t in req["topics"]))
        for t in req["topics"]:
            parts: list[B.DescribeProducersResponseTopicsPartitions] = []
            for index in t["partition_indexes"]:
                if readable is not None and t["name"] not in readable:
                    parts.append({"partition_index": index, "error_code": E.TOPIC_AUTHORIZATION_FAILED,
                                  "active_producers": []})
                    continue
                part = self.partitions.get(t["name"], index)
                if part is None:
                    parts.append({"partition_index": index, "error_code": E.UNKNOWN_TOPIC_OR_PARTITION,
                                  "active_producers": []})
                    continue
                if check_leader(part):
                    parts.append({"partition_index": index, "error_code": E.NOT_LEADER_OR_FOLLOWER,
                                  "active_producers": []})
                    continue
                parts.append({"partition_index": index, "error_code": 0, "active_producers": [
                    {"producer_id": pid, "producer_epoch": e.epoch, "last_sequence": e.last_seq,
                     "last_timestamp": e.last_timestamp, "coordinator_epoch": e.coordinator_epoch,
                     "current_txn_start_offset": e.current_txn_first_offset}
                    for pid, e in sorted(part.producers.producers.items())]})
            topics.append({"name": t["name"], "partitions": parts})
        return {"throttle_time_ms": ctx.throttle_time_ms, "topics": topics}


class DescribeTransactionsHandler:
    def __init__(self, coordinator: TransactionCoordinatorApi,
                 coordinator_error: CoordinatorError = coordinates_every_id,
                 authorizer: Authorizer | None = None) -> None:
        self.coordinator = coordinator
        self.coordinator_error = coordinator_error
        self.authorizer = authorizer

    async def handle(self, ctx: RequestContext, req: B.DescribeTransactionsRequestBody
                     ) -> B.DescribeTransactionsResponseBody:
        out: list[B.DescribeTransactionsResponseTransactionStates] = []
        for tid in req["transactional_ids"]:
            if _txn_id_denied(self.authorizer, ctx, tid, AclOperation.DESCRIBE):
                out.append({"error_code": E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "transactional_id": tid,
                            "transaction_state": "", "transaction_timeout_ms": 0, "transaction_start_time_ms": -1,
                            "producer_id": -1, "producer_epoch": -1, "topics": []})
                continue
            not_coordinator = self.coordinator_error(tid)
            meta = None if not_coordinator else self.coordinator.describe(tid)
            if meta is None:
                out.append({"error_code": not_coordinator or E.TRANSACTIONAL_ID_NOT_FOUND, "transactional_id": tid,
                            "transaction_state": "",
                            "transaction_timeout_ms": 0, "transaction_start_time_ms": -1, "producer_id": -1,
                            "producer_epoch": -1, "topics": []})
                continue
            by_topic = partitions_by_topic(sorted(meta.partitions))
            if self.authorizer is not None:  # only the topics the principal may describe
                visible = filter_authorized(self.authorizer, ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, by_topic,
                                            log_if_denied=False)
                by_topic = {t: ps for t, ps in by_topic.items() if t in visible}
            out.append({"error_code": 0, "transactional_id": tid, "transaction_state": meta.state.value,
                        "transaction_timeout_ms": meta.timeout_ms, "transaction_start_time_ms": meta.start_ms,
                        "producer_id": meta.producer_id, "producer_epoch": meta.producer_epoch,
                        "topics": [{"topic": t, "partitions": ps} for t, ps in by_topic.items()]})
        return {"throttle_time_ms": ctx.throttle_time_ms, "transaction_states": out}


STATE_NAMES = ("Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead",
               "PrepareEpochFence")


class ListTransactionsHandler:
    """The transactional ids of the ``__transaction_state`` partitions loaded on this broker (admin clients
    ask every broker and merge the answers)."""

    def __init__(self, coordinator: TransactionCoordinatorApi, broker_id: int | None = None,
                 authorizer: Authorizer | None = None) -> None:
        self.coordinator = coordinator
        self.broker_id = broker_id  # None: every loaded partition (a broker on its own)
        self.authorizer = authorizer

    async def handle(self, ctx: RequestContext, req: B.ListTransactionsRequestBody
                     ) -> B.ListTransactionsResponseBody:
        states = list(req["state_filters"] or [])
        unknown = [s for s in states if s not in STATE_NAMES]
        pattern = None
        source = req["transactional_id_pattern"] if ctx.api_version >= 2 else None
        if source:  # v2 (KIP-1152): an RE2/J expression the whole transactional id must match
            try:
                pattern = compile_topic_regex(source)
            except InvalidRegexError as exc:
                log.info("ListTransactions pattern %r is not a valid regular expression: %s", source, exc)
                return {"throttle_time_ms": ctx.throttle_time_ms, "error_code": E.INVALID_REGULAR_EXPRESSION,
                        "unknown_state_filters": [], "transaction_states": []}
        listed = self.coordinator.list_transactions(
            set(states) or None, set(req["producer_id_filters"] or []) or None,
            req["duration_filter"] if ctx.api_version >= 1 else -1, pattern, self.broker_id)
        if self.authorizer is not None:  # only the transactional ids the principal may describe
            visible = filter_authorized(self.authorizer, ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID,
                                        (t.transactional_id for t in listed), log_if_denied=False)
            listed = [t for t in listed if t.transactional_id in visible]
        return {"throttle_time_ms": ctx.throttle_time_ms, "error_code": 0, "unknown_state_filters": unknown,
                "transaction_states": [{"transactional_id": t.transactional_id, "producer_id": t.producer_id,
                                        "transaction_state": t.state} for t in listed]}
