"""Produce (0): append record batches, idempotent sequence checks, acks 0/1/all.

acks=all (-1) on a replicated partition is refused with NOT_ENOUGH_REPLICAS when
the ISR is smaller than ``min.insync.replicas``, and otherwise answered only
when the high watermark passes the appended batches (Kafka's ``DelayedProduce``,
woken only by changes to those partitions) or after the request's
``timeout_ms`` with REQUEST_TIMED_OUT.  acks=1 answers at once.

A batch refused by the per-record checks (a keyless record on a compacted topic, a timestamp out of
``message.timestamp.{before,after}.max.ms``) gets INVALID_RECORD or INVALID_TIMESTAMP with KIP-467
``record_errors`` naming the records (v8+), and Kafka's ``error_message``.

Transactional batches that would open a transaction on a partition are first
verified with the transaction coordinator (KIP-890 part 1, through the
:class:`~minikafka.broker.services.TxnVerifier`); a partition that fails gets
the verification's error and nothing is appended to it.

Versions (Kafka 4.2's): v10+ answers a partition refused with NOT_LEADER_OR_FOLLOWER with its
``current_leader`` and lists that leader's endpoint on the request's listener in ``node_endpoints``
(KIP-951), so the client can move there without a metadata request; before v11 a partition's
TRANSACTION_ABORTABLE (KIP-890) goes out as INVALID_TXN_STATE, as Kafka's ``AddPartitionsToTxnManager``
maps it for older clients; v13 names topics by ``topic_id`` (KIP-516): an id this broker does not know
is answered UNKNOWN_TOPIC_ID, and a topic named by id is never auto-created.

With an authorizer (Kafka 3.x's ``handleProduceRequest``): a request carrying transactional batches needs
WRITE on its transactional id (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED on every partition); each topic
needs WRITE (else TOPIC_AUTHORIZATION_FAILED).  Idempotent producers are checked when they get their
producer id (InitProducerId), not here, as in Kafka 3.x.  minikafka auto-creates a missing topic on
Produce (Kafka creates it only through Metadata) only with CREATE on the cluster or the topic.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import trio

from ...common import Clock, TopicMetadata, TopicPartition
from ...protocol.api import ApiKey
from ...protocol.errors import ErrorCode
from ...protocol.records import BATCH_HEADER_SIZE, read_header
from ..config import BrokerConfig
from ..error_responses import error_response
from ..request import RequestContext
from ..services import (Authorizer, ClientQuota, DelayedOperations, MetadataCache, ProduceLog, TopicLookup,
                        TxnVerifier)
from .authorization import AclOperation, ResourceType, authorize, creatable_topics, filter_authorized
from .common import PendingAck, await_acks, current_leader, node_endpoints

if TYPE_CHECKING:
    from ...protocol import bodies as B
    from ..partition import ProduceResult

    PartitionResponse = B.ProduceResponseResponsesPartitionResponses

log = logging.getLogger(__name__)


#: The first Produce version with KIP-951 leader discovery, with TRANSACTION_ABORTABLE, with topic ids.
LEADER_DISCOVERY_VERSION = 10
TRANSACTION_ABORTABLE_VERSION = 11
ADD_PARTITION_VERSION = 12  # KIP-890 part 2: a transactional batch adds its partition to the transaction
TOPIC_ID_VERSION = 13


class ProduceHandler:
    """Kafka's ``handleProduceRequest`` over one narrow log dependency (tansu's ``produce.rs`` shape)."""

    def __init__(self, log: ProduceLog, topics: TopicLookup, delayed: DelayedOperations, quota: ClientQuota,
                 config: BrokerConfig, clock: Clock, verifier: TxnVerifier | None = None,
                 authorizer: Authorizer | None = None, metadata: MetadataCache | None = None) -> None:
        """``metadata``: where topic ids (v13) and the current leaders of KIP-951 answers are looked up
        (without it, v13 topic ids are unknown and NOT_LEADER_OR_FOLLOWER carries no leader)."""
        self.log = log
        self.metadata = metadata
        self.authorizer = authorizer
        self.verifier = verifier
        self.topics = topics
        self.delayed = delayed
        self.quota = quota
        self.config = config
        self.clock = clock

    def _min_insync_replicas(self, topic: TopicMetadata) -> int:
        value = topic.configs.get("min.insync.replicas")
        return int(value) if value is not None else self.config.min_insync_replicas

    def _max_message_bytes(self, topic: TopicMetadata) -> int:
        value = topic.configs.get("max.message.bytes")
        return int(value) if value is not None else self.config.message_max_bytes

    async def handle(self, ctx: RequestContext, req: B.ProduceRequestBody) -> B.ProduceResponseBody | None:
        acks = req["acks"]
        now_ms = self.clock.time_ms()
        responses: list[B.ProduceResponseResponses] = []
        original = req
        if ctx.api_version >= TOPIC_ID_VERSION:
            req, unknown = self._resolve_topic_ids(req)
            responses += unknown
        pending: list[PendingAck] = []
        denied: set[str] | None = None
        if self.authorizer is None:
            found = self.topics.lookup_many((td["name"] for td in req["topic_data"]), auto_create=True)
        else:
            checked = self._authorize(ctx, req, original)
            if not isinstance(checked, tuple):
                ctx.exempt_request_quota = acks == 0
                return None if acks == 0 else checked
            found, denied = checked
        unverified = (await self._verify_transactional(req, denied, ctx.api_version >= ADD_PARTITION_VERSION)
                      if req["transactional_id"] is not None else {})
        not_leader = False  # some partition answered NOT_LEADER_OR_FOLLOWER: KIP-951 leader discovery needed
        valid_acks = acks in (-1, 0, 1)
        for td in req["topic_data"]:
            parts: list[PartitionResponse] = []
            if denied and td["name"] in denied:
                responses.append({"name": td["name"], "topic_id": td["topic_id"], "partition_responses": [
                    {"index": pd["index"], "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED}
                    for pd in td["partition_data"]]})
                continue
            code, topic = found[td["name"]]
            if topic is not None and topic.is_internal:  # Kafka: "Cannot append to internal topic"
                responses.append({"name": td["name"], "topic_id": td["topic_id"], "partition_responses": [
                    {"index": pd["index"], "error_code": ErrorCode.INVALID_TOPIC_EXCEPTION,
                     "error_message": f"Cannot append to internal topic {td['name']}"} for pd in td["partition_data"]]})
                continue
            for pd in td["partition_data"]:
                index = pd["index"]
                if not valid_acks:
                    parts.append({"index": index, "error_code": ErrorCode.INVALID_REQUIRED_ACKS})
                    continue
                part = self.log.get(td["name"], index) if topic is not None else None
                if part is None or topic is None:
                    # Kafka's getPartitionOrError: a partition of the metadata this broker does not host (a
                    # reassignment moved it away) is NOT_LEADER_OR_FOLLOWER, so the client looks it up again.
                    elsewhere = topic is not None and topic.partition(index) is not None
                    error = code or (
                        ErrorCode.NOT_LEADER_OR_FOLLOWER if elsewhere else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                    not_leader = not_leader or error == ErrorCode.NOT_LEADER_OR_FOLLOWER
                    parts.append({"index": index, "error_code": error})
                    continue
                if not part.is_leader:
                    not_leader = True
                    parts.append({"index": index, "error_code": ErrorCode.NOT_LEADER_OR_FOLLOWER})
                    continue
                failed = unverified.get(part.tp) if unverified else None
                if failed == ErrorCode.TRANSACTION_ABORTABLE and ctx.api_version < TRANSACTION_ABORTABLE_VERSION:
                    failed = ErrorCode.INVALID_TXN_STATE
                if failed:
                    not_leader = not_leader or failed == ErrorCode.NOT_LEADER_OR_FOLLOWER
                    parts.append({"index": index, "error_code": failed, "error_message": failed.name})
                    continue
                min_isr = self._min_insync_replicas(topic) if acks == -1 and part.is_replicated else 0
                if min_isr and len(self.log.isr(part)) < min_isr:
                    parts.append({"index": index, "error_code": ErrorCode.NOT_ENOUGH_REPLICAS,
                                  "error_message": f"ISR {self.log.isr(part)} smaller than "
                                                   f"min.insync.replicas={min_isr}"})
                    continue
                result = self.log.append_records(part, pd["records"], now_ms, self._max_message_bytes(topic))
                not_leader = not_leader or result.error == ErrorCode.NOT_LEADER_OR_FOLLOWER
                entry = _appended(td["name"], index, result)
                parts.append(entry)
                if acks == -1 and not result.error and part.is_replicated:
                    pending.append(PendingAck(entry, part, result.last_offset + 1, min_isr))
            responses.append({"name": td["name"], "topic_id": td["topic_id"], "partition_responses": parts})
        if pending:
            deadline = trio.current_time() + max(req["timeout_ms"], 0) / 1000
            not_leader = await await_acks(self.log, self.delayed, pending, deadline) or not_leader
        leaders = (self._discover_leaders(responses) if not_leader and ctx.api_version >= LEADER_DISCOVERY_VERSION
                   else None)
        # Produce byte-rate quota on the request size; the request quota is not enforced for acks=0.
        if self.quota.quotas_enabled:
            ctx.throttle("Produce", self.quota.maybe_record_and_get_throttle_time_ms(
                ctx.user, ctx.quota_client_id, ctx.request_size))
        ctx.exempt_request_quota = acks == 0
        if acks == 0:
            return None  # acks=0: Kafka sends no response at all (a throttle still mutes the connection)
        body: B.ProduceResponseBody = {"responses": responses, "throttle_time_ms": 0}
        if leaders and self.metadata is not None:
            body["node_endpoints"] = node_endpoints(self.metadata, ctx.listener, leaders)
        return body

    def handle_single(self, ctx: RequestContext, req: B.ProduceRequestBody
                      ) -> tuple[B.ProduceResponseBody | None, bool] | None:
        """The common case of :meth:`handle` in one pass, without awaiting: one topic named (v3-v12), one
        partition this broker leads, no authorizer, no transactional id, acks 0/1 (or -1 on an unreplicated
        partition), no produce quota.  Returns None when the request needs :meth:`handle` (nothing was done
        then), else (the response body :meth:`handle` gives, whether it is a plain success: no error,
        record errors or leader discovery)."""
        if ctx.api_version >= TOPIC_ID_VERSION or self.authorizer is not None or req["transactional_id"] is not None:
            return None
        topic_data = req["topic_data"]
        if len(topic_data) != 1:
            return None
        td = topic_data[0]
        partition_data = td["partition_data"]
        acks = req["acks"]
        if len(partition_data) != 1 or acks not in (1, 0, -1) or self.quota.quotas_enabled:
            return None
        pd = partition_data[0]
        name = td["name"]
        index = pd["index"]
        part = self.log.get(name, index)
        if part is None or not part.is_leader or (acks == -1 and part.is_replicated):
            return None
        topic = self.topics.lookup_many((name,), auto_create=False)[name][1]
        if topic is None or topic.is_internal:
            return None
        result = self.log.append_records(part, pd["records"], self.clock.time_ms(), self._max_message_bytes(topic))
        ctx.exempt_request_quota = acks == 0
        error = result.error
        entry = _appended(name, index, result)
        if acks == 0:
            return None, False
        responses: list[B.ProduceResponseResponses] = [
            {"name": name, "topic_id": td["topic_id"], "partition_responses": [entry]}]
        body: B.ProduceResponseBody = {"responses": responses, "throttle_time_ms": 0}
        if error == ErrorCode.NOT_LEADER_OR_FOLLOWER and ctx.api_version >= LEADER_DISCOVERY_VERSION:
            leaders = self._discover_leaders(responses)
            if leaders and self.metadata is not None:
                body["node_endpoints"] = node_endpoints(self.metadata, ctx.listener, leaders)
        return body, not error and not result.record_errors

    def _resolve_topic_ids(self, req: B.ProduceRequestBody
                           ) -> tuple[B.ProduceRequestBody, list[B.ProduceResponseResponses]]:
        """v13: the request with each topic's name filled in from its id, and the answers for the ids this
        broker does not know (UNKNOWN_TOPIC_ID on each of their partitions, as Kafka's handleProduceRequest)."""
        known: list[B.ProduceRequestTopicData] = []
        unknown: list[B.ProduceResponseResponses] = []
        for td in req["topic_data"]:
            topic = self.metadata.get_topic_by_id(td["topic_id"]) if self.metadata is not None else None
            if topic is None:
                unknown.append({"name": "", "topic_id": td["topic_id"], "partition_responses": [
                    {"index": pd["index"], "error_code": ErrorCode.UNKNOWN_TOPIC_ID, "base_offset": -1}
                    for pd in td["partition_data"]]})
            else:
                known.append({**td, "name": topic.name})
        return {**req, "topic_data": known}, unknown

    def _discover_leaders(self, responses: list[B.ProduceResponseResponses]) -> set[int]:
        """KIP-951 (v10+): every partition answered NOT_LEADER_OR_FOLLOWER gets the leader this broker knows
        in ``current_leader``; returns the leader ids, whose endpoints the response lists."""
        leaders: set[int] = set()
        if self.metadata is None:
            return leaders
        for t in responses:
            for p in t["partition_responses"]:
                if p["error_code"] != ErrorCode.NOT_LEADER_OR_FOLLOWER:
                    continue
                name = t["name"]
                leader_id, leader_epoch = current_leader(self.metadata, self.log.get(name, p["index"]), name,
                                                         p["index"])
                p["current_leader"] = {"leader_id": leader_id, "leader_epoch": leader_epoch}
                if leader_id >= 0:
                    leaders.add(leader_id)
        return leaders

    def _authorize(self, ctx: RequestContext, req: B.ProduceRequestBody, original: B.ProduceRequestBody
                   ) -> B.ProduceResponseBody | tuple[dict[str, tuple[ErrorCode, TopicMetadata | None]], set[str]]:
        """The request's ACL checks: the error response (to the ``original`` request, every topic it named)
        when the transactional id is not authorized, else the topics looked up (auto-created only where
        CREATE is authorized) and the topics denied WRITE."""
        tid = req["transactional_id"]
        if has_transactional_records(req) and (
                tid is None or not authorize(self.authorizer, ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID,
                                             tid)):
            return error_response(ApiKey.PRODUCE, ctx.api_version, original,  # type: ignore[return-value]
                                  ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        names = {td["name"] for td in req["topic_data"]}
        allowed = filter_authorized(self.authorizer, ctx, AclOperation.WRITE, ResourceType.TOPIC, names)
        found = self.topics.lookup_many(allowed, auto_create=False)
        missing = [name for name, (_, topic) in found.items() if topic is None]
        creatable = creatable_topics(self.authorizer, ctx, missing) if missing else set()
        if creatable:
            found.update(self.topics.lookup_many(creatable, auto_create=True))
        return found, names - allowed

    async def _verify_transactional(self, req: B.ProduceRequestBody, denied: set[str] | None = None,
                                    add_partitions: bool = False) -> dict[TopicPartition, ErrorCode]:
        """KIP-890 part 1: partitions where a transactional batch would open a transaction must be in
        the producer's ongoing transaction; returns the ones that are not, with their error.  With
        ``add_partitions`` (v12+, KIP-890 part 2: the client uses transaction version 2 and sends no
        AddPartitionsToTxn) the coordinator adds them instead."""
        if self.verifier is None:
            return {}
        todo: dict[tuple[int, int], list[TopicPartition]] = {}
        for td in req["topic_data"]:
            if denied and td["name"] in denied:
                continue
            for pd in td["partition_data"]:
                records = pd["records"]
                if isinstance(records, list) or records is None or len(records) < BATCH_HEADER_SIZE:
                    continue
                h = read_header(records)
                if not h.is_transactional or h.is_control or h.producer_id < 0:
                    continue
                part = self.log.get(td["name"], pd["index"])
                if part is None or not part.is_leader or part.producers.has_ongoing_txn(h.producer_id,
                                                                                          h.producer_epoch):
                    continue
                todo.setdefault((h.producer_id, h.producer_epoch), []).append(part.tp)
        failed: dict[TopicPartition, ErrorCode] = {}
        for (pid, epoch), tps in todo.items():
            got = await self.verifier.verify(req["transactional_id"] or "", pid, epoch, tps, add_partitions)
            failed.update((tp, code) for tp, code in got.items() if code)
        return failed


def _appended(topic: str, index: int, result: ProduceResult) -> PartitionResponse:
    """A partition's answer to its append: offsets, or the error and KIP-467's record errors (v8+; older
    versions drop the field)."""
    error = result.error
    if error:
        log.debug("produce to %s-%d failed: %s", topic, index, result.message)
    entry: PartitionResponse = {
        "index": index,
        "error_code": error,
        "base_offset": result.base_offset,
        "log_append_time_ms": result.log_append_time,
        "log_start_offset": result.log_start_offset,
        "error_message": result.message if error else None,
    }
    if result.record_errors:
        entry["record_errors"] = [{"batch_index": e.batch_index, "batch_index_error_message": e.message}
                                  for e in result.record_errors]
    return entry


def has_transactional_records(req: B.ProduceRequestBody) -> bool:
    """Whether any partition's first batch is transactional (Kafka's ``RequestUtils.hasTransactionalRecords``)."""
    for td in req["topic_data"]:
        for pd in td["partition_data"]:
            records = pd["records"]
            if isinstance(records, list):
                records = records[0] if records else None
            if records is not None and len(records) >= BATCH_HEADER_SIZE and read_header(records).is_transactional:
                return True
    return False
