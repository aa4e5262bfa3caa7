"""What a controller process answers on its listener (Kafka's ``ControllerApis``), for brokers in other processes.

* BrokerRegistration (62), BrokerHeartbeat (63), AlterPartition (56), AllocateProducerIds (67): the brokers'
  requests, decided by :class:`~minikafka.broker.quorum_controller.QuorumController`.
* Fetch (1) of ``__cluster_metadata``-0: brokers read the metadata log from an offset, as KRaft's observers do;
  a fetch at the log's end waits up to its ``max_wait_ms`` for the next change.  The answer is the log's record
  batches as they are on disk; the high watermark is the log's end (one voter: a change is committed once it
  is fsynced).  A fetch below the log's start is answered with the latest snapshot's id (``snapshot_id``).
* FetchSnapshot (59): that snapshot's bytes from a position (KIP-630).
* Envelope (58): an admin request a broker forwards (Kafka's forwarding, KIP-590) with its client's principal
  and address; it is handled here by the same handler a broker of this process would use, and the response
  goes back inside the envelope.
* CreateTopics, DeleteTopics, CreatePartitions, DescribeQuorum and ApiVersions directly.

Deliberate differences: one voter (no Vote, BeginQuorumEpoch or EndQuorumEpoch); a forwarded request's
principal is checked here as the handler of a broker would check it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import trio

from ..protocol.api import APIS, ApiKey
from ..protocol.errors import ErrorCode
from ..protocol.exceptions import ProtocolError
from ..protocol.headers import parse_request_frame, response_header_bytes
from ..protocol.principal import decode_principal
from .metadata_log import METADATA_TOPIC, ClusterMetadataLog
from .metadata_snapshot import SnapshotId, latest_snapshot, snapshots
from .quorum_controller import QuorumController
from .request import RequestContext
from .security.listeners import EndPoint, inter_broker_listener

if TYPE_CHECKING:
    from .handlers.registry import Handler

log = logging.getLogger(__name__)

#: Security protocols by the id a BrokerRegistration's listener carries (Kafka's ``SecurityProtocol``).
SECURITY_PROTOCOLS = {0: "PLAINTEXT", 1: "SSL", 2: "SASL_PLAINTEXT", 3: "SASL_SSL"}


class BrokerRegistrationHandler:
    """BrokerRegistration: a broker of this cluster registers its listeners; the answer is its broker epoch."""

    def __init__(self, controller: QuorumController, cluster_id: str, inter_broker_listener_name: str | None,
                 inter_broker_protocol: str | None) -> None:
        self.controller = controller
        self.cluster_id = cluster_id
        self.listener_name = inter_broker_listener_name
        self.protocol = inter_broker_protocol

    async def handle(self, ctx: RequestContext, req: dict) -> dict:
        if req["cluster_id"] != self.cluster_id:
            log.warning("controller: broker %d registers for cluster %s, not %s", req["broker_id"],
                        req["cluster_id"], self.cluster_id)
            return {"throttle_time_ms": 0, "error_code": ErrorCode.INCONSISTENT_CLUSTER_ID, "broker_epoch": -1}
        endpoints = [EndPoint(lst["name"], lst["host"], lst["port"],
                              SECURITY_PROTOCOLS.get(lst["security_protocol"], "PLAINTEXT"))
                     for lst in req["listeners"]]
        try:
            inter_broker = inter_broker_listener(endpoints, self.listener_name, self.protocol)
        except ValueError as exc:
            log.warning("controller: broker %d registers no inter-broker listener: %s", req["broker_id"], exc)
            return {"throttle_time_ms": 0, "error_code": ErrorCode.INVALID_REGISTRATION, "broker_epoch": -1}
        epoch = self.controller.register_broker(
            req["broker_id"], (inter_broker.host, inter_broker.port), {e.listener: (e.host, e.port) for e in endpoints},
            {e.listener: e.security_protocol for e in endpoints}, req["rack"])
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "broker_epoch": epoch}


class BrokerHeartbeatHandler:
    """BrokerHeartbeat: a broker's session goes on (or ends in a controlled shutdown)."""

    def __init__(self, controller: QuorumController) -> None:
        self.controller = controller

    async def handle(self, ctx: RequestContext, req: dict) -> dict:
        reply = self.controller.heartbeat(req["broker_id"], req["broker_epoch"], req["current_metadata_offset"],
                                          req["want_shut_down"])
        return {"throttle_time_ms": 0, "error_code": reply.error, "is_caught_up": reply.is_caught_up,
                "is_fenced": reply.is_fenced, "should_shut_down": reply.should_shut_down}


class AlterPartitionHandler:
    """AlterPartition: leaders' ISR changes.  Each partition's answer carries the state it now has."""

    def __init__(self, controller: QuorumController) -> None:
        self.controller = controller

    async def handle(self, ctx: RequestContext, req: dict) -> dict:
        metadata = self.controller.metadata
        topics = []
        for t in req["topics"]:
            topic = (metadata.get_topic_by_id(t["topic_id"]) if ctx.api_version >= 2
                     else metadata.get_topic(t["topic_name"]))
            partitions = []
            for p in t["partitions"]:
                isr = ([e["broker_id"] for e in p["new_isr_with_epochs"]] if ctx.api_version >= 3 else p["new_isr"])
                if topic is None:
                    code = ErrorCode.UNKNOWN_TOPIC_ID if ctx.api_version >= 2 else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    partitions.append({"partition_index": p["partition_index"], "error_code": code})
                    continue
                code = self.controller.alter_partition(req["broker_id"], req["broker_epoch"], topic.name,
                                                       p["partition_index"], p["leader_epoch"], isr)
                entry: dict[str, Any] = {"partition_index": p["partition_index"], "error_code": code}
                if code == ErrorCode.NONE:
                    pm = topic.partitions[p["partition_index"]]
                    entry.update(leader_id=pm.leader, leader_epoch=pm.leader_epoch, isr=list(pm.isr),
                                 partition_epoch=metadata.partition_epoch(topic.name, pm.partition))
                partitions.append(entry)
            topics.append({"topic_name": t.get("topic_name", ""), "topic_id": t.get("topic_id"),
                           "partitions": partitions})
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "topics": topics}


class AllocateProducerIdsHandler:
    """AllocateProducerIds: a block of producer ids for a broker's transaction coordinator and idempotent
    producers."""

    def __init__(self, controller: QuorumController) -> None:
        self.controller = controller

    async def handle(self, ctx: RequestContext, req: dict) -> dict:
        code, first, size = self.controller.allocate_producer_ids(req["broker_id"], req["broker_epoch"])
        return {"throttle_time_ms": 0, "error_code": code, "producer_id_start": first, "producer_id_len": size}


class MetadataLogAppends:
    """Wakes the fetches waiting at the metadata log's end when the controller appends to it."""

    def __init__(self) -> None:
        self._event = trio.Event()

    def appended(self) -> None:
        self._event.set()
        self._event = trio.Event()

    async def wait(self, timeout_s: float) -> None:
        with trio.move_on_after(timeout_s):
            await self._event.wait()


class MetadataFetchHandler:
    """Fetch of ``__cluster_metadata``-0: the log's batches from the fetch offset, up to the partition's
    ``partition_max_bytes`` (one batch at least); at the end of the log, a wait of up to ``max_wait_ms``."""

    def __init__(self, metadata_log: ClusterMetadataLog, appends: MetadataLogAppends) -> None:
        self.log = metadata_log
        self.appends = appends

    async def handle(self, ctx: RequestContext, req: dict) -> dict:
        topics = req["topics"]
        if len(topics) != 1 or len(topics[0]["partitions"]) != 1 or topics[0].get("topic") != METADATA_TOPIC:
            return {"throttle_time_ms": 0, "error_code": ErrorCode.INVALID_REQUEST, "session_id": 0, "responses": []}
        part = topics[0]["partitions"][0]
        offset = part["fetch_offset"]
        lg = self.log.log
        if offset >= lg.log_end_offset and req["max_wait_ms"] > 0:
            await self.appends.wait(req["max_wait_ms"] / 1000)
        entry: dict[str, Any] = {"partition_index": 0, "error_code": ErrorCode.NONE,
                                 "high_watermark": lg.log_end_offset, "last_stable_offset": lg.log_end_offset,
                                 "log_start_offset": lg.log_start_offset, "aborted_transactions": None,
                                 "preferred_read_replica": -1, "records": b""}
        latest = latest_snapshot(self.log) if offset < lg.log_start_offset else None
        if latest is not None:  # (Kafka's raft Fetch: read the snapshot, then the log after it)
            entry["snapshot_id"] = {"end_offset": latest[0].end_offset, "epoch": latest[0].epoch}
        elif not lg.log_start_offset <= offset <= lg.log_end_offset:
            entry["error_code"] = ErrorCode.OFFSET_OUT_OF_RANGE
        else:
            chunks: list[bytes] = []
            size, limit = 0, part["partition_max_bytes"]
            for _header, view in lg.iter_batches_from(offset):
                if chunks and size + len(view) > limit:
                    break
                chunks.append(bytes(view))
                size += len(view)
            entry["records"] = b"".join(chunks)
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "session_id": 0,
                "responses": [{"topic": METADATA_TOPIC, "partitions": [entry]}]}


class FetchSnapshotHandler:
    """FetchSnapshot of ``__cluster_metadata``-0: the named snapshot's bytes from ``position``, at most
    ``max_bytes`` (Kafka's ``KafkaRaftClient.handleFetchSnapshotRequest``)."""

    def __init__(self, metadata_log: ClusterMetadataLog, node_id: int) -> None:
        self.log = metadata_log
        self.node_id = node_id

    async def handle(self, ctx: RequestContext, req: dict) -> dict:
        topics = req["topics"]
        if len(topics) != 1 or len(topics[0]["partitions"]) != 1 or topics[0]["name"] != METADATA_TOPIC:
            return {"throttle_time_ms": 0, "error_code": ErrorCode.INVALID_REQUEST, "topics": []}
        part = topics[0]["partitions"][0]
        wanted = SnapshotId(part["snapshot_id"]["end_offset"], part["snapshot_id"]["epoch"])
        entry: dict[str, Any] = {"index": 0, "error_code": ErrorCode.NONE, "snapshot_id": part["snapshot_id"],
                                 "current_leader": {"leader_id": self.node_id, "leader_epoch": -1},
                                 "size": 0, "position": part["position"], "unaligned_records": b""}
        path = next((p for sid, p in snapshots(self.log.directory) if sid == wanted), None)
        data = path.read_bytes() if path is not None else None
        if data is None:
            entry["error_code"] = ErrorCode.SNAPSHOT_NOT_FOUND
        elif not 0 <= part["position"] <= len(data):
            entry["error_code"] = ErrorCode.POSITION_OUT_OF_RANGE
        else:
            entry["size"] = len(data)
            entry["unaligned_records"] = data[part["position"]:part["position"] + max(req["max_bytes"], 1)]
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE,
                "topics": [{"name": METADATA_TOPIC, "partitions": [entry]}]}


class EnvelopeHandler:
    """Envelope: the admin request inside it, handled by this controller's handler for its api key as the
    principal the broker names (Kafka's ``ControllerApis.handleEnvelopeRequest``)."""

    def __init__(self, handlers: Callable[[], Mapping[int, Handler]]) -> None:
        self._handlers = handlers

    async def handle(self, ctx: RequestContext, req: dict) -> dict:
        try:
            header, body = parse_request_frame(req["request_data"])
            principal = decode_principal(req["request_principal"]) if req["request_principal"] else ctx.principal
        except (ProtocolError, ValueError) as exc:
            log.warning("controller: an envelope from %s does not parse: %s", ctx.peer, exc)
            return {"response_data": None, "error_code": ErrorCode.INVALID_REQUEST}
        handler = self._handlers().get(header.api_key)
        if handler is None or header.api_key == ApiKey.ENVELOPE:
            return {"response_data": None, "error_code": ErrorCode.INVALID_REQUEST}
        inner = RequestContext(api_key=header.api_key, api_version=header.api_version,
                               correlation_id=header.correlation_id, client_id=header.client_id,
                               connection_id=ctx.connection_id, peer=bytes(req["client_host_address"]).hex(),
                               principal=principal, listener=ctx.listener, security_protocol=ctx.security_protocol)
        response = await handler(inner, body)
        data = (response_header_bytes(header.correlation_id, header.api_key, header.api_version)
                + APIS[header.api_key].response.build(response, header.api_version))
        return {"response_data": data, "error_code": ErrorCode.NONE}
