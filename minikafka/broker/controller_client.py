"""What a broker process asks its controller over the wire (Kafka's ``NodeToControllerChannelManager``).

:class:`ControllerClient` sends BrokerRegistration, BrokerHeartbeat, AlterPartition, AllocateProducerIds and
CreateTopics to the controller named by ``controller.quorum.bootstrap.servers``, and forwards the admin requests
of this broker's clients in an Envelope with their principal (Kafka's ``ForwardingManager``, KIP-590):
:class:`ForwardingHandler` stands in for the handler of each forwarded api key.  :class:`AlterPartitionManager`
sends a leader's ISR changes, one in flight per partition, and applies the controller's answer (Kafka's
``AlterPartitionManager`` and ``Partition.handleAlterPartitionUpdate``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import trio

from ..common import Node
from ..protocol.api import APIS, ApiKey
from ..protocol.errors import ErrorCode
from ..protocol.headers import RequestHeader, parse_response_frame, request_header_version
from ..protocol.principal import encode_principal
from .error_responses import error_response
from .inter_broker import CHANNEL_ERRORS, InterBrokerChannel, PlainConnector
from .metadata_loader import CONTROLLER_NODE, MetadataReplica
from .request import RequestContext

if TYPE_CHECKING:
    from .partition import Partition

log = logging.getLogger(__name__)

#: The admin requests a broker forwards to its controller in an Envelope (Kafka's forwarding).
FORWARDED_APIS = (ApiKey.CREATE_TOPICS, ApiKey.DELETE_TOPICS, ApiKey.CREATE_PARTITIONS, ApiKey.ELECT_LEADERS,
                  ApiKey.ALTER_PARTITION_REASSIGNMENTS, ApiKey.LIST_PARTITION_REASSIGNMENTS, ApiKey.UNREGISTER_BROKER,
                  ApiKey.CREATE_ACLS, ApiKey.DELETE_ACLS, ApiKey.ALTER_CLIENT_QUOTAS,
                  ApiKey.ALTER_USER_SCRAM_CREDENTIALS, ApiKey.CREATE_DELEGATION_TOKEN, ApiKey.RENEW_DELEGATION_TOKEN,
                  ApiKey.EXPIRE_DELEGATION_TOKEN, ApiKey.UPDATE_FEATURES)
#: Forwarded unless a resource they change is a broker's loggers (topic, broker, group and client-metrics configs are
#: records of the metadata log), as Kafka's brokers do.
FORWARDED_CONFIGS = (ApiKey.ALTER_CONFIGS, ApiKey.INCREMENTAL_ALTER_CONFIGS)
#: ``ConfigResource.Type.BROKER_LOGGER``: a broker's own.
LOCAL_RESOURCES = (8,)

VERSIONS: dict[int, int] = {ApiKey.BROKER_REGISTRATION: 4, ApiKey.BROKER_HEARTBEAT: 1, ApiKey.ALTER_PARTITION: 2,
            ApiKey.ALLOCATE_PRODUCER_IDS: 0, ApiKey.CREATE_TOPICS: 7, ApiKey.ENVELOPE: 0}


class ControllerError(Exception):
    """The controller answered with an error (``code``) or could not be reached."""

    def __init__(self, code: ErrorCode, what: str) -> None:
        super().__init__(f"{what}: {code.name}")
        self.code = code


def parse_controller_address(servers: str) -> tuple[str, int]:
    """The first ``host:port`` of ``controller.quorum.bootstrap.servers`` (ValueError when there is none)."""
    first = servers.split(",")[0].strip()
    host, sep, port = first.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError(f"not host:port: {first!r}")
    return host.strip("[]"), int(port)


class ControllerClient:
    """Requests to the controller, on one connection (a second one carries the metadata log's long polls)."""

    def __init__(self, node_id: int, address: tuple[str, int], cluster_id: str, timeout_s: float = 30.0,
                 local_address: str | None = None) -> None:
        """``local_address``: where the connections come from (None: the system's choice)."""
        self.node_id = node_id
        self.cluster_id = cluster_id
        node = Node(CONTROLLER_NODE, address[0], address[1], None)
        connector = PlainConnector(local_address)
        self.channel = InterBrokerChannel(f"broker-{node_id}-to-controller", lambda _id: node, timeout_s=timeout_s,
                                          connector=connector)
        self.fetch_channel = InterBrokerChannel(f"broker-{node_id}-metadata-fetcher", lambda _id: node,
                                                timeout_s=timeout_s, connector=connector)
        self.broker_epoch = -1

    async def request(self, api_key: int, body: dict) -> Any:
        return await self.channel.request(CONTROLLER_NODE, api_key, VERSIONS[api_key], body)

    async def register(self, incarnation_id: Any, listeners: list[dict], rack: str | None) -> int:
        """BrokerRegistration; the new broker epoch (ControllerError when refused)."""
        resp = await self.request(ApiKey.BROKER_REGISTRATION, {
            "broker_id": self.node_id, "cluster_id": self.cluster_id, "incarnation_id": incarnation_id,
            "listeners": listeners, "features": [], "rack": rack, "is_migrating_zk_broker": False, "log_dirs": [],
            "previous_broker_epoch": self.broker_epoch})
        if resp["error_code"] != ErrorCode.NONE:
            raise ControllerError(ErrorCode(resp["error_code"]), "BrokerRegistration")
        self.broker_epoch = resp["broker_epoch"]
        return self.broker_epoch

    async def heartbeat(self, metadata_offset: int, want_shut_down: bool = False) -> dict:
        return await self.request(ApiKey.BROKER_HEARTBEAT, {
            "broker_id": self.node_id, "broker_epoch": self.broker_epoch, "current_metadata_offset": metadata_offset,
            "want_fence": False, "want_shut_down": want_shut_down, "offline_log_dirs": []})

    async def allocate_producer_ids(self) -> tuple[int, int]:
        """AllocateProducerIds: (first id, count) of a new block (ControllerError when refused)."""
        resp = await self.request(ApiKey.ALLOCATE_PRODUCER_IDS, {"broker_id": self.node_id,
                                                                  "broker_epoch": self.broker_epoch})
        if resp["error_code"] != ErrorCode.NONE:
            raise ControllerError(ErrorCode(resp["error_code"]), "AllocateProducerIds")
        return resp["producer_id_start"], resp["producer_id_len"]

    async def create_topic(self, name: str, partitions: int, replication_factor: int, configs: dict[str, str]
                           ) -> ErrorCode:
        """CreateTopics of one topic (the broker's own: auto-created or internal); its error code."""
        resp = await self.request(ApiKey.CREATE_TOPICS, {"topics": [{
            "name": name, "num_partitions": partitions, "replication_factor": replication_factor, "assignments": [],
            "configs": [{"name": k, "value": v} for k, v in configs.items()]}], "timeout_ms": 30000,
            "validate_only": False})
        return ErrorCode(resp["topics"][0]["error_code"])

    async def forward(self, ctx: RequestContext, body: Any) -> Any:
        """An Envelope carrying a client's request (as its principal); the response body inside the answer.
        ControllerError when the envelope itself fails."""
        api = APIS[ctx.api_key]
        header = _request_header(ctx)
        data = header + api.request.build(body, ctx.api_version)
        resp = await self.request(ApiKey.ENVELOPE, {
            "request_data": data, "request_principal": encode_principal(ctx.principal, ctx.token_authenticated),
            "client_host_address": _host_bytes(ctx.peer)})
        if resp["error_code"] != ErrorCode.NONE or resp["response_data"] is None:
            raise ControllerError(ErrorCode(resp["error_code"]), f"Envelope of {api.name}")
        _correlation, inner = parse_response_frame(resp["response_data"], ctx.api_key, ctx.api_version)
        return inner

    async def aclose(self) -> None:
        await self.channel.aclose()
        await self.fetch_channel.aclose()


def _request_header(ctx: RequestContext) -> bytes:
    """The client's request header, as the controller will parse it from the envelope."""
    version = request_header_version(ctx.api_key, APIS[ctx.api_key].is_flexible(ctx.api_version))
    return RequestHeader.build({"request_api_key": ctx.api_key, "request_api_version": ctx.api_version,
                                "correlation_id": ctx.correlation_id, "client_id": ctx.client_id}, version)


def _host_bytes(peer: str) -> bytes:
    """A client's address as an Envelope carries it (the IP's bytes; empty when unknown)."""
    import ipaddress

    host = peer.rsplit(":", 1)[0].strip("[]")
    try:
        return ipaddress.ip_address(host).packed
    except ValueError:
        return b""


class ForwardingHandler:
    """Stands in for the handler of an admin api key on a broker whose controller is in another process: the
    request goes to the controller in an Envelope; the client gets the controller's answer (or, when the
    controller cannot be reached, the error response Kafka gives: NOT_CONTROLLER)."""

    def __init__(self, client: ControllerClient, local: Callable[[RequestContext, Any], Any] | None = None) -> None:
        """``local``: the broker's own handler, for AlterConfigs requests that change a broker's loggers."""
        self.client = client
        self.local = local

    async def handle(self, ctx: RequestContext, body: Any) -> Any:
        if self.local is not None and any(r["resource_type"] in LOCAL_RESOURCES for r in body["resources"]):
            return await self.local(ctx, body)
        try:
            return await self.client.forward(ctx, body)
        except (*CHANNEL_ERRORS, ControllerError) as exc:
            log.info("broker %d: cannot forward %s to the controller: %r", self.client.node_id,
                     APIS[ctx.api_key].name, exc)
            return error_response(ctx.api_key, ctx.api_version, body, ErrorCode.NOT_CONTROLLER)


class AlterPartitionManager:
    """A leader's ISR changes sent to the controller, at most one in flight per partition; the answer is applied
    to the broker's metadata at once (the log brings the same change later) and ``on_isr_changed(part)`` is told."""

    def __init__(self, client: ControllerClient, metadata: MetadataReplica,
                 on_isr_changed: Callable[[Partition, list[int], list[int]], None]) -> None:
        self.client = client
        self.metadata = metadata
        self.on_isr_changed = on_isr_changed
        self.nursery: trio.Nursery | None = None
        self._in_flight: set[tuple[str, int]] = set()

    def submit(self, part: Partition, isr: list[int]) -> bool:
        """Send ``isr`` for ``part`` (False: not applied yet; it is when the controller answers)."""
        key = (part.topic, part.index)
        if self.nursery is None or key in self._in_flight:
            return False
        self._in_flight.add(key)
        part.pending_isr = list(isr)
        self.nursery.start_soon(self._send, part, list(isr), part.leader_epoch)
        return False

    async def _send(self, part: Partition, isr: list[int], leader_epoch: int) -> None:
        key = (part.topic, part.index)
        try:
            topic = self.metadata.get_topic(part.topic)
            if topic is None:
                return
            before = list(topic.partitions[part.index].isr)
            resp = await self.client.request(ApiKey.ALTER_PARTITION, {
                "broker_id": self.client.node_id, "broker_epoch": self.client.broker_epoch, "topics": [{
                    "topic_id": topic.topic_id, "topic_name": topic.name, "partitions": [{
                        "partition_index": part.index, "leader_epoch": leader_epoch, "new_isr": isr,
                        "new_isr_with_epochs": [], "leader_recovery_state": 0,
                        "partition_epoch": self.metadata.partition_epoch(part.topic, part.index)}]}]})
            answer = resp["topics"][0]["partitions"][0] if resp["topics"] else {"error_code": resp["error_code"]}
            code = ErrorCode(answer["error_code"])
            if code != ErrorCode.NONE:
                log.info("broker %d: AlterPartition of %s-%d to %s refused: %s", self.client.node_id, part.topic,
                         part.index, isr, code.name)
                return
            topic = self.metadata.get_topic(part.topic)
            if topic is None or part.index >= len(topic.partitions):
                return
            pm = topic.partitions[part.index]
            if answer["leader_epoch"] == pm.leader_epoch:  # not overtaken by a later change from the log
                pm.isr = list(answer["isr"])
                self.on_isr_changed(part, before, list(pm.isr))
        except CHANNEL_ERRORS as exc:
            log.info("broker %d: AlterPartition of %s-%d failed: %r", self.client.node_id, part.topic, part.index, exc)
        finally:
            self._in_flight.discard(key)
            part.pending_isr = None
