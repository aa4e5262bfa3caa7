"""A broker process's copy of the cluster metadata, fed by the controller's ``__cluster_metadata`` log.

Models Kafka's ``MetadataLoader`` and ``BrokerMetadataPublisher`` for a broker whose controller runs in another
process: :class:`MetadataLoader` fetches the log from the controller (Fetch of ``__cluster_metadata``-0, long
polling at its end), and :func:`apply_records` applies each record to the broker's
:class:`MetadataReplica` (topics, partitions, leaders, ISRs, topic configs, broker registrations and fencing), then
tells the broker what changed, as a publisher does, so that it leads and follows what the log says.

The replica answers the broker's reads as the in-process cluster's shared metadata does; what would change
it goes to the controller instead: a topic created by a Metadata request or a coordinator's first use is asked
for (CreateTopics) and exists once its records come back.

The rest of the log (ACLs, SCRAM credentials, delegation tokens, feature levels, group and client-metrics
configs, client quotas) is applied to the replica's :class:`~minikafka.broker.metadata_image.MetadataState` and
published to the broker's stores (:attr:`MetadataReplica.publishers`, Kafka's ``AclPublisher``,
``ScramPublisher``, ``DelegationTokenPublisher``, ``FeaturesPublisher``, ``DynamicConfigPublisher``,
``DynamicClientQuotaPublisher``).

Deliberate differences: no local copy of the log (a broker fetches from its start, or from the controller's
snapshot, when it starts).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable
from typing import Any

import trio

from ..common import Node, TopicMetadata
from ..protocol.api import ApiKey
from ..protocol.errors import ErrorCode
from ..protocol.exceptions import MetadataRecordError, ProtocolError
from ..protocol.metadata_records import MetadataRecord, decode_metadata_record
from ..protocol.records import iter_batches
from .coordinator_runtime import batch_records
from .inter_broker import CHANNEL_ERRORS, InterBrokerChannel
from .metadata import ClusterMetadata, MetadataError
from .metadata_image import MetadataState
from .metadata_log import METADATA_TOPIC, is_topic_record, replay_topic_record
from .metadata_snapshot import read_snapshot

log = logging.getLogger(__name__)

#: The Fetch version brokers read the metadata log with (flexible, topics by name).
METADATA_FETCH_VERSION = 12
#: The id the controller is reached by on a broker's channels.
CONTROLLER_NODE = -2


class TopicBeingCreated(MetadataError):
    """The topic was asked of the controller; it exists once its records reach this broker."""

    pending = True


class MetadataReplica(ClusterMetadata):
    """The cluster metadata as a broker process knows it (Kafka's ``MetadataCache`` over the ``MetadataImage``):
    written only by :func:`apply_records`; a topic it lacks is asked of the controller through
    :attr:`request_topic`."""

    def __init__(self, **settings: Any) -> None:
        """``settings``: :class:`ClusterMetadata`'s keyword arguments (:func:`metadata_settings`); no broker, no
        log: both come from the controller's records."""
        super().__init__([], None, **settings)
        # fn(name, partitions, replication factor, configs): ask the controller for a topic (set by the broker).
        self.request_topic: Callable[[str, int, int, dict[str, str]], None] | None = None
        self.partition_epochs: dict[tuple[uuid.UUID, int], int] = {}
        # The rest of the log (ACLs, SCRAM credentials, tokens, features, configs, quotas) as applied so far, and
        # Kafka's metadata publishers: by what changed (MetadataState.apply), those that take it into a store.
        self.state = MetadataState()
        self.publishers: dict[str, list[Callable[[MetadataState], None]]] = {}

    def create_topic(self, name: str, num_partitions: int, replication_factor: int,
                     configs: dict[str, str] | None = None, assignments: dict[int, list[int]] | None = None
                     ) -> TopicMetadata:
        """A topic a Metadata request auto-creates: asked of the controller; LEADER_NOT_AVAILABLE until it is
        here (what Kafka's ``AutoTopicCreationManager`` answers meanwhile)."""
        self.check_new_topic(name, num_partitions, replication_factor, assignments)
        if self.request_topic is not None:
            self.request_topic(name, num_partitions, replication_factor, dict(configs or {}))
        raise TopicBeingCreated(ErrorCode.LEADER_NOT_AVAILABLE, f"topic {name} is being created")

    def ensure_internal_topic(self, name: str, num_partitions: int, replication_factor: int,
                              configs: dict[str, str]) -> TopicMetadata:
        topic = self.topics.get(name)
        if topic is not None:
            return topic
        if self.request_topic is not None:
            self.request_topic(name, num_partitions, replication_factor, configs)
        raise TopicBeingCreated(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"{name} is being created")

    def partition_epoch(self, topic: str, partition: int) -> int:
        t = self.topics.get(topic)
        return 0 if t is None else self.partition_epochs.get((t.topic_id, partition), 0)

    def set_topic_configs(self, name: str, configs: dict[str, str], replace: bool = False) -> None:
        """A topic's configs change at the controller only (forwarded AlterConfigs); never in this copy."""
        raise MetadataError(ErrorCode.NOT_CONTROLLER, "topic configs are changed by the controller")

    def persist(self, first: list[bytes] | None = None, topics: Iterable[str] | None = None) -> None:
        """Nothing: the controller writes the log; this copy only applies it."""

    def _append(self, records: list[bytes]) -> int:
        return self.metadata_offset


def apply_records(metadata: MetadataReplica, records: Iterable[tuple[int, MetadataRecord]],
                  inter_broker_listener: str) -> dict[str, list[str]]:
    """Apply metadata records in order (Kafka's ``MetadataDelta.replay``): the topic registry and the brokers'
    registrations here, every other record to the replica's :attr:`~MetadataReplica.publishers`.  Returns each
    changed topic with the kinds of change the broker is told, in order (created or deleted alone; else
    partitions, config, leadership, reassignment)."""
    changed: dict[str, list[str]] = {}
    published: dict[str, None] = {}
    for offset, rec in records:
        d, name = rec.data, rec.name
        metadata.metadata_offset = offset + 1
        if is_topic_record(rec):
            change = replay_topic_record(rec, offset, metadata.by_id, metadata.topics, metadata.partition_epochs)
            if change is None:
                continue
            topic, kind = change
            kinds = changed.setdefault(topic, [])
            if kind in ("created", "deleted"):
                changed[topic] = [kind]
            elif kind not in kinds and not {"created", "deleted"} & set(kinds):
                kinds.append(kind)
        elif name == "RegisterBrokerRecord":
            _register(metadata, d, offset, inter_broker_listener)
        elif name in ("FenceBrokerRecord", "UnregisterBrokerRecord"):
            broker_id = d.id if name == "FenceBrokerRecord" else d.broker_id
            metadata.live.pop(broker_id, None)
            metadata.endpoints.pop(broker_id, None)
            if name == "UnregisterBrokerRecord":
                metadata.broker_ids = [b for b in metadata.broker_ids if b != broker_id]
                metadata.registrations.pop(broker_id, None)
        elif name == "UnfenceBrokerRecord":
            registration = metadata.registrations.get(d.id)
            if registration is not None:
                metadata.live[d.id], endpoints = registration
                if endpoints is not None:
                    metadata.endpoints[d.id] = endpoints
        else:
            applied = metadata.state.apply(offset, rec)
            if applied is not None:
                published[applied] = None
    if changed:
        metadata.replica_count = sum(len(p.replicas) for t in metadata.topics.values() for p in t.partitions)
    for kind in published:
        for publish in metadata.publishers.get(kind, ()):
            publish(metadata.state)
    return changed


def reset_to_snapshot(metadata: MetadataReplica, records: list[MetadataRecord], end_offset: int,
                      inter_broker_listener: str) -> list[dict[str, list[str]]]:
    """Replace the replica's whole state by a snapshot's (Kafka's ``MetadataLoader`` loading a snapshot: the
    image rebuilt, the delta against the old one published).  Returns the changes to publish, in order: the
    topics gone (or replaced by one of the same name), then the topics new and what changed in the others; every
    publisher is told, since anything of theirs may have changed."""
    old = {name: (t.topic_id, [vars(p).copy() for p in t.partitions], dict(t.configs))
           for name, t in metadata.topics.items()}
    metadata.topics.clear()
    metadata.by_id.clear()
    metadata.partition_epochs.clear()
    metadata.state = MetadataState()
    for registry in (metadata.live, metadata.endpoints, metadata.registrations, metadata.broker_epochs):
        registry.clear()
    metadata.broker_ids = []
    apply_records(metadata, [(end_offset - 1, rec) for rec in records], inter_broker_listener)
    metadata.metadata_offset = end_offset
    gone: dict[str, list[str]] = {}
    changed: dict[str, list[str]] = {}
    for name, t in metadata.topics.items():
        before = old.get(name)
        if before is None or before[0] != t.topic_id:
            if before is not None:
                gone[name] = ["deleted"]
            changed[name] = ["created"]
            continue
        parts = [vars(p) for p in t.partitions]
        kinds = ["partitions"] if len(parts) > len(before[1]) else []
        if t.configs != before[2]:
            kinds.append("config")
        pairs = list(zip(before[1], parts))
        if any((a["leader"], a["leader_epoch"], a["isr"]) != (b["leader"], b["leader_epoch"], b["isr"])
               for a, b in pairs):
            kinds.append("leadership")
        if any((a["replicas"], a["adding_replicas"], a["removing_replicas"])
               != (b["replicas"], b["adding_replicas"], b["removing_replicas"]) for a, b in pairs):
            kinds.append("reassignment")
        if kinds:
            changed[name] = kinds
    gone.update({name: ["deleted"] for name in old if name not in metadata.topics})
    for publishers in metadata.publishers.values():
        for publish in publishers:
            publish(metadata.state)
    return [gone, changed]


def _register(metadata: MetadataReplica, d: Any, offset: int, inter_broker_listener: str) -> None:
    """A RegisterBrokerRecord: the broker's listeners, its epoch, live unless registered fenced."""
    endpoints = {e.name: Node(d.broker_id, e.host, e.port, d.rack) for e in d.end_points}
    inter_broker = endpoints.get(inter_broker_listener) or next(iter(endpoints.values()), None)
    if inter_broker is None:
        return
    if d.broker_id not in metadata.broker_ids:
        metadata.broker_ids = sorted([*metadata.broker_ids, d.broker_id])
    metadata.registrations[d.broker_id] = (inter_broker, endpoints)
    metadata.broker_epochs[d.broker_id] = d.broker_epoch if d.broker_epoch >= 0 else offset
    if d.fenced:
        metadata.live.pop(d.broker_id, None)
        metadata.endpoints.pop(d.broker_id, None)
    else:
        metadata.live[d.broker_id] = inter_broker
        metadata.endpoints[d.broker_id] = endpoints


def decode_batches(records: Any) -> tuple[list[tuple[int, MetadataRecord]], int]:
    """The metadata records of fetched batches, with their offsets, and the offset after the last whole batch
    (-1: none; a record that does not decode is skipped with a warning; a partial batch at the end is left for
    the next fetch)."""
    out: list[tuple[int, MetadataRecord]] = []
    end = -1
    for h, view in iter_batches(records or b"", allow_truncated_tail=True):
        end = h.last_offset + 1
        if h.is_control:
            continue
        for rec in batch_records(h, view, f"{METADATA_TOPIC}-0"):
            try:
                out.append((rec.offset, decode_metadata_record(rec.value or b"")))
            except MetadataRecordError as exc:
                log.warning("%s-0: skipping offset %d: %s", METADATA_TOPIC, rec.offset, exc)
    return out, end


class MetadataLoader:
    """Fetches the controller's metadata log and applies it to a :class:`MetadataReplica`; ``publish(changes)``
    is told what changed after each fetch."""

    def __init__(self, metadata: MetadataReplica, channel: InterBrokerChannel, inter_broker_listener: str,
                 publish: Callable[[dict[str, list[str]]], None], *, node_id: int, max_wait_ms: int = 500,
                 backoff_s: float = 0.1) -> None:
        self.metadata = metadata
        self.channel = channel
        self.inter_broker_listener = inter_broker_listener
        self.publish = publish
        self.node_id = node_id
        self.max_wait_ms = max_wait_ms
        self.backoff_s = backoff_s
        self.offset = 0  # the next offset to fetch (all before it applied)
        self.high_watermark = -1  # the controller's log end, as last heard (-1: not yet)
        self._progress = trio.Event()

    async def wait_for_offset(self, offset: int) -> None:
        """Return once every record before ``offset`` is applied."""
        while self.offset < offset:
            await self._progress.wait()

    async def wait_caught_up(self) -> None:
        """Return once this broker has applied the controller's whole log as it was at a fetch."""
        while self.high_watermark < 0 or self.offset < self.high_watermark:
            await self._progress.wait()

    async def run(self) -> None:
        while True:
            body = {"replica_id": -1, "max_wait_ms": self.max_wait_ms if self.high_watermark >= 0 else 0,
                    "min_bytes": 1, "max_bytes": 8 << 20, "isolation_level": 0, "session_id": 0,
                    "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
                    "topics": [{"topic": METADATA_TOPIC, "partitions": [{
                        "partition": 0, "current_leader_epoch": -1, "fetch_offset": self.offset,
                        "last_fetched_epoch": -1, "log_start_offset": -1, "partition_max_bytes": 8 << 20}]}]}
            try:
                resp = await self.channel.request(CONTROLLER_NODE, ApiKey.FETCH, METADATA_FETCH_VERSION, body)
                snapshot = resp["responses"][0]["partitions"][0].get("snapshot_id") if resp["responses"] else None
                if snapshot is not None and snapshot["end_offset"] >= 0:
                    await self._load_snapshot(snapshot)
                else:
                    self._apply(resp)
            except (*CHANNEL_ERRORS, ProtocolError) as exc:
                log.debug("broker %d: metadata fetch failed: %r", self.node_id, exc)
                await trio.sleep(self.backoff_s)

    async def _load_snapshot(self, snapshot_id: dict) -> None:
        """The fetch offset is below the log's start: read the snapshot the controller named (FetchSnapshot, in
        pieces by position), take its state, and go on fetching the log after it."""
        data = bytearray()
        while True:
            resp = await self.channel.request(CONTROLLER_NODE, ApiKey.FETCH_SNAPSHOT, 0, {
                "replica_id": -1, "max_bytes": 8 << 20, "topics": [{"name": METADATA_TOPIC, "partitions": [{
                    "partition": 0, "current_leader_epoch": -1, "snapshot_id": snapshot_id,
                    "position": len(data)}]}]})
            part = resp["topics"][0]["partitions"][0] if resp["topics"] else {"error_code": resp["error_code"]}
            if part["error_code"] != ErrorCode.NONE:
                raise ProtocolError(f"metadata snapshot {snapshot_id}: {ErrorCode(part['error_code']).name}")
            data += part["unaligned_records"] or b""
            if len(data) >= part["size"] or not part["unaligned_records"]:
                break
        end = snapshot_id["end_offset"]
        records = list(read_snapshot(bytes(data), f"{METADATA_TOPIC}-0 snapshot at {end}"))
        changes = reset_to_snapshot(self.metadata, records, end, self.inter_broker_listener)
        self.offset = end
        log.info("broker %d: loaded the metadata snapshot at offset %d (%d records)", self.node_id, end, len(records))
        for change in changes:
            if change:
                self.publish(change)
        self._progress.set()
        self._progress = trio.Event()

    def _apply(self, resp: dict) -> None:
        part = resp["responses"][0]["partitions"][0]
        if part["error_code"] != ErrorCode.NONE:
            raise ProtocolError(f"metadata fetch at {self.offset}: {ErrorCode(part['error_code']).name}")
        records, end = decode_batches(part["records"])
        changes = apply_records(self.metadata, records, self.inter_broker_listener) if records else {}
        if end > self.offset:
            self.offset = end
            self.metadata.metadata_offset = end
        self.high_watermark = part["high_watermark"]
        if changes:
            self.publish(changes)
        self._progress.set()
        self._progress = trio.Event()
