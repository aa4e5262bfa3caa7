"""KRaft's ``__cluster_metadata`` log as this cluster's one controller keeps it (issue 26, first step).

Kafka 4's controller keeps the cluster's metadata as records (:mod:`~minikafka.protocol.metadata_records`) in the
``__cluster_metadata`` topic's one partition, which the controllers replicate through Raft and every broker
fetches and applies.  Here the controller of a data dir's brokers writes the same records to
``<data_dir>/__cluster_metadata-0`` (Kafka's segment files: ``minikafka dump-log --cluster-metadata-decoder``
prints them) and rebuilds its topics, ACLs, SCRAM credentials, delegation tokens, feature levels, group and
client-metrics configs and client quotas from them when it starts (:func:`replay`, after the latest snapshot:
:mod:`~minikafka.broker.metadata_snapshot`).

:func:`topic_changes` turns what changed in the topic registry since the last write into Kafka's records:
``TopicRecord``, ``ConfigRecord``, ``PartitionRecord`` for a new topic or partition, ``PartitionChangeRecord``
for an ISR or leader change (a record with a leader bumps the leader epoch by one on replay, as Kafka's
``PartitionRegistration.merge`` does), a whole ``PartitionRecord`` again where more than one leader epoch passed
between two writes, ``RemoveTopicRecord``.  Brokers' registrations and fencing are written as
``RegisterBrokerRecord``, ``FenceBrokerRecord`` and ``UnregisterBrokerRecord`` (a broker's epoch is the offset
of its registration, as in KRaft); replay keeps those registered and not fenced (a restarted controller takes
them back).

Brokers in processes of their own fetch this log from a controller process and apply it
(:mod:`~minikafka.broker.metadata_loader`); the brokers of one process read the controller's state in memory.

Deliberate differences: one voter and no Raft (the log is local to the controller's data dir, its leader epoch
the controller epoch).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from ..common import SYSTEM_CLOCK, Clock, PartitionMetadata, TopicMetadata
from ..protocol.exceptions import MetadataRecordError
from ..protocol.metadata_records import MetadataRecord, decode_metadata_record, encode_metadata_record
from ..protocol.records import Record, build_batch
from .coordinator_runtime import batch_records
from .log import Log, LogConfig
from .metadata_image import AclValue, MetadataState, QuotaEntity, ScramValue, SnapshotPolicy, TokenValue

log = logging.getLogger(__name__)

METADATA_TOPIC = "__cluster_metadata"
#: ``ConfigResource.Type.TOPIC``: a ConfigRecord's resource type for a topic's config.
TOPIC_RESOURCE = 2
#: A PartitionChangeRecord's ``leader`` when the leader did not change (Kafka's ``NO_LEADER_CHANGE``).
NO_LEADER_CHANGE = -2


class ClusterMetadataLog:
    """The ``__cluster_metadata-0`` partition log of one data dir and its snapshots (Kafka's
    ``KafkaMetadataLog``, one voter)."""

    def __init__(self, data_dir: Path, clock: Clock = SYSTEM_CLOCK, policy: SnapshotPolicy | None = None) -> None:
        self.clock = clock
        self.policy = policy or SnapshotPolicy()
        self.directory = Path(data_dir) / f"{METADATA_TOPIC}-0"
        self.log = Log(METADATA_TOPIC, 0, LogConfig(segment_bytes=self.policy.segment_bytes), self.directory,
                       clock=clock)
        self.bytes_since_snapshot = 0
        self.last_snapshot_ms = clock.time_ms()

    @property
    def end_offset(self) -> int:
        return self.log.log_end_offset

    def append(self, values: list[bytes], epoch: int) -> int:
        """Append metadata records (their value bytes; no keys) as one batch of leader epoch ``epoch``, fsynced
        before it returns, as Kafka's Raft log is flushed before a change is committed; returns the offset of the
        first (-1: nothing to write)."""
        if not values:
            return -1
        now = self.clock.time_ms()
        batch = build_batch([Record(offset_delta=i, key=None, value=v) for i, v in enumerate(values)],
                            base_timestamp=now)
        first = self.log.append_as_leader([bytearray(batch)], epoch, now).first_offset
        self.log.active_segment.flush(fsync=True)  # (not Log.flush: that rewrites the checkpoint file as well)
        self.bytes_since_snapshot += len(batch)
        return first

    def records(self, start: int | None = None) -> Iterator[tuple[int, MetadataRecord]]:
        """Every record from ``start`` (the log's start by default), with its offset; one that does not decode is
        skipped with a warning."""
        lg = self.log
        for h, view in lg.iter_batches_from(lg.log_start_offset if start is None else max(start, lg.log_start_offset)):
            if h.is_control:
                continue
            for rec in batch_records(h, view, f"{METADATA_TOPIC}-0"):
                try:
                    yield rec.offset, decode_metadata_record(rec.value or b"")
                except MetadataRecordError as exc:
                    log.warning("%s-0: skipping offset %d: %s", METADATA_TOPIC, rec.offset, exc)

    def close(self) -> None:
        self.log.close()


# -- the topic registry as records ------------------------------------------------------------------------------
@dataclass(frozen=True)
class PartitionImage:
    """A partition as last written (and its partition epoch: one more per record that changed it)."""

    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]
    partition_epoch: int = 0

    @classmethod
    def of(cls, p: PartitionMetadata, partition_epoch: int = 0) -> PartitionImage:
        return cls(p.leader, p.leader_epoch, tuple(p.replicas), tuple(p.isr), tuple(p.adding_replicas),
                   tuple(p.removing_replicas), partition_epoch)

    def same(self, p: PartitionMetadata) -> bool:
        return self == PartitionImage.of(p, self.partition_epoch)


@dataclass
class TopicImage:
    """A topic as last written."""

    name: str
    topic_id: uuid.UUID
    configs: dict[str, str]
    partitions: list[PartitionImage]


def _partition_record(topic_id: uuid.UUID, index: int, p: PartitionImage) -> bytes:
    return encode_metadata_record("PartitionRecord", {
        "partition_id": index, "topic_id": topic_id, "replicas": list(p.replicas), "isr": list(p.isr),
        "removing_replicas": list(p.removing), "adding_replicas": list(p.adding), "leader": p.leader,
        "leader_epoch": p.leader_epoch, "partition_epoch": p.partition_epoch}, version=0)


def _config_record(topic: str, name: str, value: str | None) -> bytes:
    return encode_metadata_record("ConfigRecord", {"resource_type": TOPIC_RESOURCE, "resource_name": topic,
                                                   "name": name, "value": value})


def _partition_change(topic_id: uuid.UUID, index: int, old: PartitionImage, p: PartitionMetadata) -> bytes:
    """The PartitionChangeRecord from ``old`` to ``p`` (at most one leader epoch apart): the fields that changed,
    the leader whenever the epoch moved."""
    fields: dict[str, object] = {"partition_id": index, "topic_id": topic_id}
    if tuple(p.isr) != old.isr:
        fields["isr"] = list(p.isr)
    if p.leader_epoch != old.leader_epoch:
        fields["leader"] = p.leader
    if tuple(p.replicas) != old.replicas:
        fields["replicas"] = list(p.replicas)
    if tuple(p.adding_replicas) != old.adding or tuple(p.removing_replicas) != old.removing:
        fields["adding_replicas"], fields["removing_replicas"] = list(p.adding_replicas), list(p.removing_replicas)
    return encode_metadata_record("PartitionChangeRecord", fields, version=0)


def topic_image_records(topic: TopicImage) -> list[bytes]:
    """The records of a topic as written (a new topic's, or a snapshot's): TopicRecord, its ConfigRecords, its
    PartitionRecords with their partition epochs."""
    out = [encode_metadata_record("TopicRecord", {"name": topic.name, "topic_id": topic.topic_id})]
    out += [_config_record(topic.name, k, v) for k, v in topic.configs.items()]
    return out + [_partition_record(topic.topic_id, i, p) for i, p in enumerate(topic.partitions)]


def topic_changes(image: dict[str, TopicImage], topics: dict[str, TopicMetadata],
                  names: Iterable[str] | None = None) -> list[bytes]:
    """The records that take the registry from ``image`` (as last written) to ``topics``, looking only at the
    topics called ``names`` when given (what a change touched); ``image`` is updated to match."""
    out: list[bytes] = []
    looked_at = list(image) if names is None else [n for n in dict.fromkeys(names) if n in image]
    for name in looked_at:
        written, current = image[name], topics.get(name)
        if current is None or current.topic_id != written.topic_id:
            out.append(encode_metadata_record("RemoveTopicRecord", {"topic_id": written.topic_id}))
            del image[name]
    for name in (topics if names is None else dict.fromkeys(names)):
        t = topics.get(name)
        if t is None:
            continue
        old_topic = image.get(name)
        if old_topic is None:
            image[name] = TopicImage(name, t.topic_id, dict(t.configs), [PartitionImage.of(p) for p in t.partitions])
            out += topic_image_records(image[name])
            continue
        if t.configs != old_topic.configs:
            out += [_config_record(name, k, v) for k, v in t.configs.items() if old_topic.configs.get(k) != v]
            out += [_config_record(name, k, None) for k in old_topic.configs if k not in t.configs]
            old_topic.configs = dict(t.configs)
        for i, p in enumerate(t.partitions):
            if i >= len(old_topic.partitions):
                old_topic.partitions.append(PartitionImage.of(p))
                out.append(_partition_record(t.topic_id, i, old_topic.partitions[i]))
                continue
            old = old_topic.partitions[i]
            if old.same(p):
                continue
            epochs = p.leader_epoch - old.leader_epoch
            changed = (p.leader == old.leader) if epochs == 0 else epochs == 1
            new = old_topic.partitions[i] = PartitionImage.of(p, old.partition_epoch + 1)
            out.append(_partition_change(t.topic_id, i, old, p) if changed else _partition_record(t.topic_id, i, new))
    return out


@dataclass
class Replayed:
    """What the metadata log holds: the topics (and their image as written) and the rest of its state."""

    topics: dict[str, TopicMetadata]
    image: dict[str, TopicImage]
    state: MetadataState


#: The records of the topic registry (a ConfigRecord is one when its resource is a topic).
TOPIC_RECORDS = frozenset({"TopicRecord", "RemoveTopicRecord", "PartitionRecord", "PartitionChangeRecord"})


def is_topic_record(rec: MetadataRecord) -> bool:
    return rec.name in TOPIC_RECORDS or (rec.name == "ConfigRecord" and rec.data.resource_type == TOPIC_RESOURCE)


def replay_topic_record(rec: MetadataRecord, offset: int, by_id: dict[uuid.UUID, TopicMetadata],
                        by_name: dict[str, TopicMetadata], epochs: dict[tuple[uuid.UUID, int], int]
                        ) -> tuple[str, str] | None:
    """One record of the topic registry (:func:`is_topic_record`) applied to topics by id and by name and their
    partition epochs (Kafka's ``TopicsDelta.replay``); returns the topic and what changed (created, deleted,
    partitions, reassignment, leadership, config), None for a record of an unknown topic or partition."""
    d, name = rec.data, rec.name
    if name == "TopicRecord":
        by_id[d.topic_id] = by_name[d.name] = TopicMetadata(name=d.name, topic_id=d.topic_id, partitions=[])
        return d.name, "created"
    if name == "RemoveTopicRecord":
        gone = by_id.pop(d.topic_id, None)
        if gone is None or by_name.get(gone.name) is not gone:
            return None
        del by_name[gone.name]
        return gone.name, "deleted"
    if name == "ConfigRecord":
        topic = by_name.get(d.resource_name)
        if topic is None:
            return None
        if d.value is None:
            topic.configs.pop(d.name, None)
        else:
            topic.configs[d.name] = d.value
        return topic.name, "config"
    topic = by_id.get(d.topic_id)
    if topic is None or (name == "PartitionChangeRecord" and not 0 <= d.partition_id < len(topic.partitions)):
        log.warning("%s-0: offset %d: %s of unknown partition %s-%d", METADATA_TOPIC, offset, name, d.topic_id,
                    d.partition_id)
        return None
    key = (d.topic_id, d.partition_id)
    if name == "PartitionRecord":
        pm = PartitionMetadata(partition=d.partition_id, leader=d.leader, leader_epoch=d.leader_epoch,
                               replicas=list(d.replicas), isr=list(d.isr), adding_replicas=list(d.adding_replicas),
                               removing_replicas=list(d.removing_replicas))
        epochs[key] = d.partition_epoch
        if d.partition_id < len(topic.partitions):
            topic.partitions[d.partition_id] = pm
            return topic.name, "reassignment"
        topic.partitions.append(pm)
        return topic.name, "partitions"
    pm = topic.partitions[d.partition_id]  # a PartitionChangeRecord: the fields it has
    kind = "leadership"
    if d.isr is not None:
        pm.isr = list(d.isr)
    if d.leader != NO_LEADER_CHANGE:
        pm.leader, pm.leader_epoch = d.leader, pm.leader_epoch + 1
    if d.replicas is not None:
        pm.replicas, kind = list(d.replicas), "reassignment"
    if d.adding_replicas is not None:
        pm.adding_replicas = list(d.adding_replicas)
    if d.removing_replicas is not None:
        pm.removing_replicas = list(d.removing_replicas)
    epochs[key] = epochs.get(key, 0) + 1
    return topic.name, kind


def replay(records: Iterator[tuple[int, MetadataRecord]]) -> Replayed:
    """What the records describe, replayed from the log's start (Kafka's ``MetadataDelta.replay``)."""
    by_id: dict[uuid.UUID, TopicMetadata] = {}
    by_name: dict[str, TopicMetadata] = {}  # (a ConfigRecord names its topic)
    epochs: dict[tuple[uuid.UUID, int], int] = {}
    state = MetadataState()
    for offset, rec in records:
        if is_topic_record(rec):
            replay_topic_record(rec, offset, by_id, by_name, epochs)
        else:
            state.apply(offset, rec)
    topics = {t.name: t for t in by_id.values()}
    image = {t.name: TopicImage(t.name, t.topic_id, dict(t.configs),
                                [PartitionImage.of(p, epochs.get((t.topic_id, i), 0))
                                 for i, p in enumerate(t.partitions)]) for t in topics.values()}
    return Replayed(topics, image, state)


def token_records(upserted: list[TokenValue],
                  removed: list[str]) -> list[bytes]:
    """``RemoveDelegationTokenRecord`` for each removed token id, ``DelegationTokenRecord`` for each token created
    or renewed (never its HMAC: brokers derive it from the secret key)."""
    out = [encode_metadata_record("RemoveDelegationTokenRecord", {"token_id": i}) for i in removed]
    out += [encode_metadata_record("DelegationTokenRecord", {
        "owner": owner, "requester": requester, "renewers": list(renewers), "issue_timestamp": issued,
        "max_timestamp": max_ts, "expiration_timestamp": expiry, "token_id": token_id})
        for token_id, owner, requester, renewers, issued, max_ts, expiry in upserted]
    return out


def config_records(resource_type: int, resource_name: str, changes: dict[str, str | None]) -> list[bytes]:
    """A ``ConfigRecord`` per changed config of one resource (value None: the config is removed)."""
    return [encode_metadata_record("ConfigRecord", {"resource_type": resource_type, "resource_name": resource_name,
                                                    "name": name, "value": value})
            for name, value in changes.items()]


def quota_record(entity: QuotaEntity, key: str, value: float | None) -> bytes:
    """A ``ClientQuotaRecord``: ``key`` of ``entity`` set to ``value`` (None: removed)."""
    return encode_metadata_record("ClientQuotaRecord", {
        "entity": [{"entity_type": t, "entity_name": n} for t, n in entity], "key": key,
        "value": 0.0 if value is None else value, "remove": value is None})


def feature_records(levels: dict[str, int]) -> list[bytes]:
    """A ``FeatureLevelRecord`` per feature (level 0: no longer finalized)."""
    return [encode_metadata_record("FeatureLevelRecord", {"name": name, "feature_level": level})
            for name, level in levels.items()]


def scram_records(upserted: dict[tuple[str, int], ScramValue],
                  removed: list[tuple[str, int]]) -> list[bytes]:
    """``RemoveUserScramCredentialRecord`` for each removed (user, mechanism), ``UserScramCredentialRecord`` for
    each credential set."""
    out = [encode_metadata_record("RemoveUserScramCredentialRecord", {"name": u, "mechanism": m}) for u, m in removed]
    out += [encode_metadata_record("UserScramCredentialRecord", {
        "name": u, "mechanism": m, "salt": salt, "stored_key": stored, "server_key": server, "iterations": iterations})
        for (u, m), (salt, stored, server, iterations) in upserted.items()]
    return out


def acl_records(added: dict[uuid.UUID, AclValue],
                removed: list[uuid.UUID]) -> list[bytes]:
    """``RemoveAccessControlEntryRecord`` for each removed ACL id, ``AccessControlEntryRecord`` for each added."""
    out = [encode_metadata_record("RemoveAccessControlEntryRecord", {"id": i}) for i in removed]
    for acl_id, (resource_type, name, pattern_type, principal, host, operation, permission) in added.items():
        out.append(encode_metadata_record("AccessControlEntryRecord", {
            "id": acl_id, "resource_type": resource_type, "resource_name": name, "pattern_type": pattern_type,
            "principal": principal, "host": host, "operation": operation, "permission_type": permission}))
    return out


# -- brokers' registrations ---------------------------------------------------------------------------------------
#: Kafka's ``SecurityProtocol`` ids, as a RegisterBrokerRecord's endpoints carry them.
SECURITY_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}


def register_broker_record(broker_id: int, broker_epoch: int, endpoints: dict[str, tuple[str, int]],
                           protocols: dict[str, str], rack: str | None, fenced: bool = False) -> bytes:
    """A broker's registration (``RegisterBrokerRecord``, unfenced unless a snapshot holds it fenced: this
    controller has a broker serve at once); its epoch is the record's offset.  ``protocols``: each listener's
    security protocol (PLAINTEXT when unknown)."""
    return encode_metadata_record("RegisterBrokerRecord", {
        "broker_id": broker_id, "incarnation_id": uuid.uuid4(), "broker_epoch": broker_epoch,
        "end_points": [{"name": name, "host": host, "port": port,
                        "security_protocol": SECURITY_PROTOCOL_IDS.get(protocols.get(name, ""), 0)}
                       for name, (host, port) in endpoints.items()],
        "features": [], "rack": rack, "fenced": fenced}, version=1)


def producer_ids_record(broker_id: int, broker_epoch: int, next_producer_id: int) -> bytes:
    """A ``ProducerIdsRecord``: a block of producer ids went to ``broker_id``; the next block starts at
    ``next_producer_id``."""
    return encode_metadata_record("ProducerIdsRecord", {"broker_id": broker_id, "broker_epoch": broker_epoch,
                                                        "next_producer_id": next_producer_id})


def broker_record(name: str, broker_id: int, broker_epoch: int) -> bytes:
    """A ``FenceBrokerRecord`` (its fields ``id``/``epoch``) or ``UnregisterBrokerRecord``."""
    fields = ({"broker_id": broker_id, "broker_epoch": broker_epoch} if name == "UnregisterBrokerRecord"
              else {"id": broker_id, "epoch": broker_epoch})
    return encode_metadata_record(name, fields)
