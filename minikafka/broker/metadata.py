"""Cluster metadata: topics, their ids, partition counts, leader epochs and configs.

Models what Kafka keeps in its controller quorum and serves from each
broker's ``MetadataCache``.  Deliberate difference: a single in-process store
(persisted as one JSON file in the data dir) instead of a replicated metadata
log; the multi-broker cluster issue shares one instance between brokers.
"""

from __future__ import annotations

import json
import logging
import re
import uuid
from pathlib import Path
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Callable

from ..common import Node, PartitionMetadata, TopicMetadata
from ..common.types import INTERNAL_TOPICS
from ..protocol.coordinator_records import OFFSETS_TOPIC, SHARE_GROUP_STATE_TOPIC, TRANSACTION_STATE_TOPIC
from ..common.hashing import partition_for_key
from ..protocol.errors import ErrorCode
from .config import BrokerConfig, StartupError
from .metadata_image import MetadataState, SnapshotPolicy

if TYPE_CHECKING:
    from .metadata_image import AclValue, QuotaEntity, ScramValue, TokenValue
    from .metadata_log import ClusterMetadataLog, TopicImage

__all__ = ["INTERNAL_TOPICS", "ClusterMetadata", "MetadataError", "PartitionMetadata", "TopicMetadata",
           "validate_topic_name"]

log = logging.getLogger(__name__)

_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+$")
MAX_TOPIC_NAME = 249
# KRaft's ReplicationControlManager.MAX_PARTITIONS_PER_BATCH and QuorumController.MAX_RECORDS_PER_USER_OP.
MAX_PARTITIONS_PER_BATCH = 10_000
MAX_RECORDS_PER_USER_OP = 10_000
EXCESSIVE_PARTITIONS = "Excessively large number of partitions per request."
EXCESSIVE_BATCH = "Unable to perform excessively large batch operation."
# minikafka's own ceiling on partition replicas hosted by the process (Kafka has none; a laptop needs one).
DEFAULT_MAX_PARTITIONS = 50_000
#: The first producer id a cluster hands out (a lone broker's ProducerIdManager starts there too).
FIRST_PRODUCER_ID = 1000


def metadata_settings(config: BrokerConfig) -> dict[str, Any]:
    """The :class:`ClusterMetadata` keyword arguments a broker's configuration sets (the same for the controller
    of one process, a controller process and a broker process's copy)."""
    return {"max_partitions": config.max_partitions,
            "offsets_topic_partitions": config.offsets_topic_num_partitions,
            "transaction_topic_partitions": config.transaction_state_log_num_partitions,
            "unclean_leader_election": config.unclean_leader_election_enable,
            "snapshot_policy": SnapshotPolicy(
                max_bytes_between=config.metadata_log_max_record_bytes_between_snapshots,
                max_interval_ms=config.metadata_log_max_snapshot_interval_ms,
                segment_bytes=config.metadata_log_segment_bytes, retention_bytes=config.metadata_max_retention_bytes,
                retention_ms=config.metadata_max_retention_ms)}


class MetadataError(Exception):
    """A metadata operation failed with a Kafka error code."""

    pending = False  # the change was asked of a controller in another process, not refused

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def validate_topic_name(name: str) -> None:
    """Kafka's ``Topic.validate``: length, legal characters, not '.' or '..'."""
    if not name or name in (".", ".."):
        raise MetadataError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"topic name {name!r} is illegal")
    if len(name) > MAX_TOPIC_NAME:
        raise MetadataError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"topic name is longer than {MAX_TOPIC_NAME}")
    if not _LEGAL_TOPIC.match(name):
        raise MetadataError(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f"topic name {name!r} contains characters other than ASCII alphanumerics, '.', '_' and '-'",
        )


def _replicas(topic: TopicMetadata) -> int:
    return sum(len(p.replicas) for p in topic.partitions)


def topic_to_json(topic: TopicMetadata) -> dict:
    return {
        "name": topic.name,
        "topic_id": str(topic.topic_id),
        "configs": topic.configs,
        "partitions": [_partition_to_json(p) for p in topic.partitions],
    }


def _partition_to_json(p: PartitionMetadata) -> dict:
    out = {"partition": p.partition, "leader": p.leader, "leader_epoch": p.leader_epoch, "replicas": p.replicas,
           "isr": p.isr}
    if p.is_reassigning:  # an ongoing reassignment carries on after a restart
        out.update(adding_replicas=p.adding_replicas, removing_replicas=p.removing_replicas)
    return out


def topic_from_json(d: dict) -> TopicMetadata:
    return TopicMetadata(
        name=d["name"],
        topic_id=uuid.UUID(d["topic_id"]),
        configs=dict(d.get("configs", {})),
        partitions=[PartitionMetadata(**p) for p in d["partitions"]],
    )


def _lead_out_of_isr(topic: str, pm: PartitionMetadata, broker_id: int) -> None:
    """An unclean election's outcome: ``broker_id``, a replica out of the ISR, leads; the ISR is just it."""
    log.warning("unclean leader election: broker %d leads %s-%d, out of the ISR %s", broker_id, topic,
                pm.partition, pm.isr)
    pm.leader, pm.isr = broker_id, [broker_id]


class ClusterMetadata:
    """The topic registry, written as KRaft's metadata records to ``<data_dir>/__cluster_metadata-0`` when a data
    dir is set (:mod:`~minikafka.broker.metadata_log`; an earlier version's ``cluster-metadata.json`` is carried
    over into it once).

    It plays both Kafka's controller (topic creation, deletion, partitions, configs, ISR changes,
    broker failure) and every broker's ``MetadataCache`` (topics, live brokers, controller and
    coordinator), as the handlers' :class:`~minikafka.broker.services.MetadataCache` and
    :class:`~minikafka.broker.services.TopicController`.
    """

    FILE = "cluster-metadata.json"

    def __init__(self, broker_ids: list[int], data_dir: Path | None = None, *,
                 max_partitions: int = DEFAULT_MAX_PARTITIONS, offsets_topic_partitions: int = 50,
                 transaction_topic_partitions: int = 50, unclean_leader_election: bool = False,
                 snapshot_policy: SnapshotPolicy | None = None) -> None:
        self.broker_ids = list(broker_ids)
        # The broker default of unclean.leader.election.enable (a topic's own config overrides it).
        self.unclean_leader_election = unclean_leader_election
        self.offsets_topic_partitions = offsets_topic_partitions  # offsets.topic.num.partitions
        self.transaction_topic_partitions = transaction_topic_partitions  # transaction.state.log.num.partitions
        self.data_dir = data_dir
        self.snapshot_policy = snapshot_policy  # (with a data dir: when its metadata log is snapshotted)
        self.max_partitions = max_partitions  # partition replicas the cluster may hold (minikafka.max.partitions)
        self.replica_count = 0
        self.topics: dict[str, TopicMetadata] = {}
        self.by_id: dict[uuid.UUID, TopicMetadata] = {}
        # The brokers that are up (each registers itself when it starts) at their inter-broker listener's
        # address, the advertised address of each of their listeners (Kafka's per-listener endpoints in
        # UpdateMetadata), and callables fn(kind, topic_name) told of every change, as
        # LeaderAndIsr/UpdateMetadata tell brokers.
        self.live: dict[int, Node] = {}
        self.endpoints: dict[int, dict[str, Node]] = {}
        # Each broker's last registration (address, listeners): a stopped broker keeps it, fenced (KRaft
        # fences a broker whose heartbeats stop), until it registers again or is unregistered.
        self.registrations: dict[int, tuple[Node, dict[str, Node] | None]] = {}
        self.listeners: list[Callable[[str, str], None]] = []
        # The notional KRaft metadata log DescribeQuorum describes (one controller, no replicated log): its
        # end offset counts the changes the controller made (one per topic, partition, config, leader or ISR
        # change and per broker registration, persisted with the topics), its leader epoch goes up each time
        # another broker becomes the controller.
        self.metadata_offset = 0
        self.controller_epoch = 1
        self._controller = self.controller_id()
        # Each live broker's epoch: the metadata offset of its registration, as in KRaft (KIP-903 compares it
        # with the one a follower fetches with).
        self.broker_epochs: dict[int, int] = {}
        # With a data dir: the __cluster_metadata log and the topics as last written to it.
        self._metadata_log: ClusterMetadataLog | None = None
        self.on_append: list[Callable[[], None]] = []  # told after each write to the metadata log
        self._image: dict[str, TopicImage] = {}
        # The rest of the log as replayed at start (ACLs, SCRAM credentials, tokens, features, configs, quotas,
        # registrations): what the stores open with.
        self.state = MetadataState()
        # The first producer id of the next block AllocateProducerIds hands out (the last ProducerIdsRecord's).
        self.next_producer_id = FIRST_PRODUCER_ID
        if data_dir is not None:
            self._load()

    # -- persistence -------------------------------------------------------
    def _load(self) -> None:
        """Rebuild the topics from the ``__cluster_metadata`` log; from an earlier version's JSON file (carried
        over into the log, then removed) when the log is empty."""
        from .metadata_log import ClusterMetadataLog, replay
        from .metadata_snapshot import snapshot_and_log_records

        assert self.data_dir is not None
        legacy = self.data_dir / self.FILE
        try:
            mlog = self._metadata_log = ClusterMetadataLog(self.data_dir, policy=self.snapshot_policy)
            if mlog.end_offset > 0:
                replayed = replay(snapshot_and_log_records(mlog))
                topics, self._image, self.state = replayed.topics, replayed.image, replayed.state
                self.next_producer_id = max(self.next_producer_id, self.state.next_producer_id)
                where = str(mlog.log.directory)
            elif legacy.exists():
                topics = {t.name: t for t in (topic_from_json(d)
                                              for d in json.loads(legacy.read_text()).get("topics", []))}
                where = str(legacy)
            else:
                return
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise StartupError(f"cannot load the cluster metadata in {self.data_dir}: {exc}") from exc
        for t in topics.values():
            self.topics[t.name] = t
            self.by_id[t.topic_id] = t
            self.replica_count += _replicas(t)
        if not self._image and self.topics:  # carried over from the JSON file: written as records first
            self.persist()
            legacy.unlink()
        self.metadata_offset = mlog.end_offset
        log.info("loaded metadata for %d topics from %s", len(self.topics), where)

    def persist(self, first: list[bytes] | None = None, topics: Iterable[str] | None = None) -> None:
        """Every change comes here: what changed in ``topics`` (names; every topic when None) since the last call
        is written to the metadata log as Kafka's records, after ``first`` (in memory: one more record in a
        notional log)."""
        if self._metadata_log is None:
            self.metadata_offset += 1
            return
        from .metadata_log import topic_changes

        self._append([*(first or []), *topic_changes(self._image, self.topics, topics)])

    def _broker_records(self, name: str, broker_id: int) -> list[bytes]:
        """A FenceBrokerRecord or UnregisterBrokerRecord of ``broker_id`` at its current epoch (none in memory)."""
        if self._metadata_log is None:
            return []
        from .metadata_log import broker_record

        return [broker_record(name, broker_id, self.broker_epochs.get(broker_id, -1))]

    def _append(self, records: list[bytes]) -> int:
        """Write metadata records (in memory: count one); the offset of the first."""
        if self._metadata_log is None:
            self.metadata_offset += 1
            return self.metadata_offset
        from ..protocol.metadata_records import decode_metadata_record
        from .metadata_log import is_topic_record
        from .metadata_snapshot import maybe_snapshot, state_records

        mlog = self._metadata_log
        first = mlog.append(records, self.controller_epoch)
        self.metadata_offset = mlog.end_offset
        for i, value in enumerate(records):  # the rest of the state kept current, for snapshots
            rec = decode_metadata_record(value)
            if not is_topic_record(rec):
                self.state.apply(first + i, rec)
        maybe_snapshot(mlog, lambda: state_records(self._image, self.state), self.controller_epoch)
        for appended in self.on_append:
            appended()
        return first

    @property
    def metadata_log(self) -> ClusterMetadataLog | None:
        """The ``__cluster_metadata`` log (None in memory)."""
        return self._metadata_log

    def replayed_acls(self) -> dict[uuid.UUID, AclValue] | None:
        """The ACLs the metadata log held at start, by id (the ACL store's :class:`AclRecords`); None in memory."""
        return dict(self.state.acls) if self._metadata_log is not None else None

    def write_acls(self, added: dict[uuid.UUID, AclValue],
                   removed: list[uuid.UUID]) -> None:
        """Write ACL changes as records (in memory: count one change)."""
        if self._metadata_log is None:
            self._append([])
            return
        from .metadata_log import acl_records

        self._append(acl_records(added, removed))

    def replayed_scram(self) -> dict[tuple[str, int], ScramValue] | None:
        """The SCRAM credentials the metadata log held at start (the credential store's :class:`ScramRecords`);
        None in memory."""
        return dict(self.state.scram) if self._metadata_log is not None else None

    def write_scram(self, upserted: dict[tuple[str, int], ScramValue],
                    removed: list[tuple[str, int]]) -> None:
        """Write SCRAM credential changes as records (in memory: count one change)."""
        if self._metadata_log is None:
            self._append([])
            return
        from .metadata_log import scram_records

        self._append(scram_records(upserted, removed))

    def replayed_features(self) -> tuple[dict[str, int], int] | None:
        """The feature levels the metadata log held at start and the offset of the last (the feature manager's
        :class:`FeatureRecords`); None in memory."""
        return (dict(self.state.features), self.state.features_offset) if self._metadata_log is not None else None

    def write_features(self, levels: dict[str, int]) -> int:
        """Write feature levels as records; the offset of the last (in memory: count one change)."""
        if self._metadata_log is None:
            return self._append([])
        from .metadata_log import feature_records

        first = self._append(feature_records(levels))
        return first + len(levels) - 1

    def replayed_configs(self, resource_type: int) -> dict[str, dict[str, str]] | None:
        """The configs of every resource of ``resource_type`` (``ConfigResource.Type``: 32 a group) the metadata
        log held at start, by resource name; None in memory."""
        if self._metadata_log is None:
            return None
        return {name: dict(c) for name, c in self.state.configs.get(resource_type, {}).items()}

    def write_configs(self, resource_type: int, resource_name: str, changes: dict[str, str | None]) -> None:
        """Write one resource's config changes as ConfigRecords (None: removed; in memory: count one change)."""
        if self._metadata_log is None:
            self._append([])
            return
        from .metadata_log import config_records

        self._append(config_records(resource_type, resource_name, changes))

    def replayed_quotas(self) -> dict[QuotaEntity, dict[str, float]] | None:
        """The client quotas the metadata log held at start (the quota configs' :class:`QuotaRecords`); None in
        memory."""
        return {e: dict(v) for e, v in self.state.quotas.items()} if self._metadata_log is not None else None

    def write_quota(self, entity: QuotaEntity, key: str, value: float | None) -> None:
        """Write one quota's change as a ClientQuotaRecord (None: removed; in memory: count one change)."""
        if self._metadata_log is None:
            self._append([])
            return
        from .metadata_log import quota_record

        self._append([quota_record(entity, key, value)])

    def replayed_tokens(self) -> list[TokenValue] | None:
        """The delegation tokens the metadata log held at start (the token manager's :class:`TokenRecords`);
        None in memory."""
        return list(self.state.tokens.values()) if self._metadata_log is not None else None

    def write_tokens(self, upserted: list[TokenValue],
                     removed: list[str]) -> None:
        """Write delegation token changes as records (in memory: count one change)."""
        if self._metadata_log is None:
            self._append([])
            return
        from .metadata_log import token_records

        self._append(token_records(upserted, removed))

    def restore_registrations(self, inter_broker_listener: Callable[[dict[str, Node]], Node | None]) -> list[int]:
        """Take back the broker registrations the metadata log holds (registered and not fenced), as a KRaft
        controller that takes over knows every registered broker: each is live at the epoch it registered with
        until its session expires.  ``inter_broker_listener`` picks the address brokers reach it at.  Returns the
        brokers restored (a controller in its own process; brokers of this process register as they start)."""
        restored = []
        for broker_id, (epoch, endpoints, rack, fenced) in sorted(self.state.brokers.items()):
            if fenced:
                continue
            nodes = {name: Node(broker_id, host, port, rack) for name, (host, port) in endpoints.items()}
            node = inter_broker_listener(nodes)
            if node is None:
                continue
            if broker_id not in self.broker_ids:
                self.broker_ids = sorted([*self.broker_ids, broker_id])
            self.live[broker_id], self.endpoints[broker_id] = node, nodes
            self.registrations[broker_id] = (node, nodes)
            self.broker_epochs[broker_id] = epoch
            restored.append(broker_id)
        return restored

    def partition_epoch(self, topic: str, partition: int) -> int:
        """A partition's epoch as the metadata log has it (one more per record that changed it; 0 in memory)."""
        image = self._image.get(topic)
        return image.partitions[partition].partition_epoch if image and partition < len(image.partitions) else 0

    def allocate_producer_ids(self, broker_id: int, broker_epoch: int, size: int) -> int:
        """The next block of ``size`` producer ids for ``broker_id`` (Kafka's ``ProducerIdControlManager``:
        a ProducerIdsRecord of the next block's start); returns the block's first id."""
        first = self.next_producer_id
        self.next_producer_id += size
        if self._metadata_log is not None:
            from .metadata_log import producer_ids_record

            self._append([producer_ids_record(broker_id, broker_epoch, self.next_producer_id)])
        return first

    def close(self) -> None:
        """Close the metadata log (its file)."""
        if self._metadata_log is not None:
            self._metadata_log.close()
            self._metadata_log = None

    # -- queries -----------------------------------------------------------
    def get_topic(self, name: str) -> TopicMetadata | None:
        return self.topics.get(name)

    def get_topic_by_id(self, topic_id: uuid.UUID) -> TopicMetadata | None:
        return self.by_id.get(topic_id)

    def all_topics(self) -> list[TopicMetadata]:
        return list(self.topics.values())

    def alive_brokers(self, listener: str | None = None) -> list[Node]:
        """Every registered running broker, by id, at its address on ``listener`` (Kafka's
        ``getAliveBrokerNodes(listenerName)``: brokers without that listener are left out); without a
        listener, at its inter-broker address."""
        if listener is None:
            return [self.live[nid] for nid in sorted(self.live)]
        out = []
        for nid in sorted(self.live):
            node = self._endpoint(nid, listener)
            if node is not None:
                out.append(node)
        return out

    def fenced_brokers(self, listener: str | None = None) -> list[Node]:
        """The registered brokers that are not running (KRaft fences them), by id, at the address their last
        registration gave on ``listener`` (DescribeCluster v2's ``include_fenced_brokers``)."""
        out = []
        for nid in sorted((set(self.registrations) & set(self.broker_ids)) - set(self.live)):
            node, endpoints = self.registrations[nid]
            found = endpoints.get(listener) if listener is not None and endpoints is not None else node
            if found is not None:
                out.append(found)
        return out

    def _endpoint(self, broker_id: int, listener: str) -> Node | None:
        endpoints = self.endpoints.get(broker_id)
        if endpoints is None:  # registered without listeners (one address for everything)
            return self.live.get(broker_id)
        return endpoints.get(listener)

    def controller_id(self) -> int:
        """The node that plays the controller: the lowest live broker id (-1 when no broker is registered)."""
        return min(self.live) if self.live else min(self.broker_ids, default=-1)

    def partition_leader(self, topic: str, partition: int) -> int | None:
        """The leader of a partition (-1 offline), or None when it does not exist."""
        t = self.topics.get(topic)
        if t is None or not 0 <= partition < len(t.partitions):
            return None
        return t.partitions[partition].leader

    def ensure_internal_topic(self, name: str, num_partitions: int, replication_factor: int,
                              configs: dict[str, str]) -> TopicMetadata:
        """An internal topic (``__consumer_offsets``, ``__transaction_state``), created now if it does not exist,
        as Kafka creates it at the first FindCoordinator: ``num_partitions`` partitions with
        ``replication_factor`` replicas, capped at the registered, unfenced brokers (MetadataError
        COORDINATOR_NOT_AVAILABLE when none is)."""
        topic = self.topics.get(name)
        if topic is not None:
            return topic
        available = len(self.placement_brokers())
        if available == 0:
            raise MetadataError(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"no broker is up to host {name}")
        return self.create_topic(name, num_partitions, min(replication_factor, available), configs)

    def offsets_partition_leader(self, partition: int) -> int:
        """The leader of a ``__consumer_offsets`` partition (:meth:`internal_partition_leader`)."""
        return self.internal_partition_leader(OFFSETS_TOPIC, partition)

    def internal_partition_leader(self, name: str, partition: int) -> int:
        """The leader of an internal topic's partition (-1 when no broker is up, or when it has none).

        Once the internal topic exists (:meth:`ensure_internal_topic`), its partition's leader.  Before, the
        partitions are placed as Kafka's rack-unaware assignment with a zero start index would place them
        (replicas ``broker_ids[p % n]`` onward, at most three), and the leader is the first live replica, or
        any live broker when none is.
        """
        topic = self.topics.get(name)
        if topic is not None:
            pm = topic.partition(partition)
            return pm.leader if pm is not None and pm.leader in self.live else -1
        return self._placed_leader(partition)

    def _placed_leader(self, partition: int) -> int:
        """The first live broker of where Kafka's rack-unaware assignment would place an internal topic's
        ``partition`` (any live broker when none of those is; -1 when none is up)."""
        if not self.live:
            return -1
        ids = sorted(self.broker_ids)
        n = len(ids)
        for i in range(min(3, n)):
            candidate = ids[(partition + i) % n]
            if candidate in self.live:
                return candidate
        return min(self.live)

    def group_coordinator(self, group_id: str, listener: str | None = None) -> Node:
        """The coordinator of ``group_id``: the leader of its ``__consumer_offsets`` partition
        (``abs(groupId.hashCode) % offsets.topic.num.partitions``, Kafka's ``partitionFor``), at its
        address on ``listener`` (port -1 when it has no such listener; node -1 when no broker is up)."""
        nid = self.offsets_partition_leader(partition_for_key(group_id, self.offsets_topic_partitions))
        return self._node(nid, listener)

    def transaction_coordinator(self, transactional_id: str, listener: str | None = None) -> Node:
        """The coordinator of ``transactional_id``: the leader of its ``__transaction_state`` partition
        (``transaction.state.log.num.partitions``), at its address on ``listener`` (as :meth:`group_coordinator`)."""
        partition = partition_for_key(transactional_id, self.transaction_topic_partitions)
        return self._node(self.internal_partition_leader(TRANSACTION_STATE_TOPIC, partition), listener)

    def _node(self, nid: int, listener: str | None) -> Node:
        """Live broker ``nid`` at its address on ``listener`` (port -1 when it has no such listener; node -1 for
        no broker)."""
        if nid < 0:
            return Node(-1, "", -1)
        if listener is None:
            return self.live[nid]
        return self._endpoint(nid, listener) or Node(nid, "", -1)

    def share_coordinator(self, partition: int, listener: str | None = None) -> Node:
        """The share coordinator of a ``__share_group_state`` partition (FindCoordinator key type 2): its leader,
        at its address on ``listener`` (as :meth:`group_coordinator`)."""
        return self._node(self.internal_partition_leader(SHARE_GROUP_STATE_TOPIC, partition), listener)

    # -- changes -----------------------------------------------------------
    def _assign(self, start: int, count: int, rf: int) -> list[list[int]]:
        """Kafka's rack-unaware assignment (``assignReplicasToBrokersRackUnaware``) over the brokers new
        replicas can go to (:meth:`placement_brokers`: as KRaft's replica placer, only unfenced ones).

        Deliberate difference: the random start index and replica shift are both 0,
        so assignments are deterministic.  The first replica of partition p is broker
        p mod n; the others follow it with a shift that grows every n partitions.
        """
        ids = self.placement_brokers()
        n = len(ids)
        out = []
        for p in range(start, start + count):
            first = p % n
            shift = p // n
            replicas = [ids[first]]
            for j in range(rf - 1):
                replicas.append(ids[(first + 1 + (shift + j) % (n - 1)) % n])
            out.append(replicas)
        return out

    def placement_brokers(self) -> list[int]:
        """The brokers new replicas are placed on, by id: the running (registered, unfenced) ones, or every
        configured broker while none has started."""
        live = sorted(b for b in self.live if b in self.broker_ids)
        return live if live else list(self.broker_ids)

    @property
    def usable_brokers(self) -> int:
        """Brokers new replicas can be placed on: the live ones (all registered before any started)."""
        return len(self.placement_brokers())

    def _check_replication_factor(self, rf: int) -> None:
        """INVALID_REPLICATION_FACTOR when fewer brokers than ``rf`` can take new replicas (Kafka's message)."""
        usable = self.usable_brokers
        if rf > usable:
            raise MetadataError(
                ErrorCode.INVALID_REPLICATION_FACTOR,
                f"Unable to replicate the partition {rf} time(s): The target replication factor of {rf} cannot "
                f"be reached because only {usable} broker(s) are registered.",
            )

    def check_capacity(self, new_replicas: int) -> None:
        """POLICY_VIOLATION when ``new_replicas`` more would exceed ``minikafka.max.partitions``."""
        if self.replica_count + new_replicas > self.max_partitions:
            raise MetadataError(
                ErrorCode.POLICY_VIOLATION,
                f"Unable to create {new_replicas} partition replica(s): the cluster holds {self.replica_count} and "
                f"minikafka.max.partitions is {self.max_partitions}.")

    def check_new_topic(
        self, name: str, num_partitions: int, replication_factor: int, assignments: dict[int, list[int]] | None
    ) -> None:
        """Raise MetadataError if the topic cannot be created as asked."""
        validate_topic_name(name)
        if name in self.topics:
            raise MetadataError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        if assignments:
            if sorted(assignments) != list(range(len(assignments))):
                raise MetadataError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "partitions must be numbered 0..n-1")
            for replicas in assignments.values():
                if not replicas or len(set(replicas)) != len(replicas) or any(
                    b not in self.broker_ids for b in replicas
                ):
                    raise MetadataError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"invalid replicas {replicas}")
            self.check_capacity(sum(len(r) for r in assignments.values()))
            return
        if num_partitions <= 0:
            raise MetadataError(ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0.")
        if num_partitions > MAX_PARTITIONS_PER_BATCH:
            raise MetadataError(ErrorCode.POLICY_VIOLATION, EXCESSIVE_PARTITIONS)
        if replication_factor <= 0:
            raise MetadataError(ErrorCode.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0.")
        self._check_replication_factor(replication_factor)
        self.check_capacity(num_partitions * replication_factor)

    def create_topic(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int,
        configs: dict[str, str] | None = None,
        assignments: dict[int, list[int]] | None = None,
    ) -> TopicMetadata:
        self.check_new_topic(name, num_partitions, replication_factor, assignments)
        if assignments:
            replica_lists = [assignments[p] for p in sorted(assignments)]
        else:
            replica_lists = self._assign(0, num_partitions, replication_factor)
        topic = TopicMetadata(
            name=name,
            topic_id=uuid.uuid4(),
            partitions=[
                PartitionMetadata(partition=i, leader=r[0], leader_epoch=0, replicas=list(r), isr=list(r))
                for i, r in enumerate(replica_lists)
            ],
            configs=dict(configs or {}),
        )
        self.topics[name] = topic
        self.by_id[topic.topic_id] = topic
        self.replica_count += _replicas(topic)
        self.persist(topics=[name])
        log.info("created topic %s with %d partitions (id %s)", name, num_partitions, topic.topic_id)
        self.notify("created", name)
        return topic

    def delete_topic(self, name: str) -> TopicMetadata:
        topic = self.topics.pop(name, None)
        if topic is None:
            raise MetadataError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")
        self.by_id.pop(topic.topic_id, None)
        self.replica_count -= _replicas(topic)
        self.persist(topics=[name])
        log.info("deleted topic %s", name)
        self.notify("deleted", name)
        return topic

    def add_partitions(self, name: str, new_total: int, assignments: list[list[int]] | None = None) -> TopicMetadata:
        topic = self.topics.get(name)
        if topic is None:
            raise MetadataError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")
        current = topic.num_partitions
        if new_total < current:
            raise MetadataError(
                ErrorCode.INVALID_PARTITIONS,
                f"Topic currently has {current} partitions, which is higher than the requested {new_total}.",
            )
        if new_total == current:
            raise MetadataError(ErrorCode.INVALID_PARTITIONS, f"Topic already has {current} partitions.")
        if new_total - current > MAX_RECORDS_PER_USER_OP:
            raise MetadataError(ErrorCode.POLICY_VIOLATION, EXCESSIVE_BATCH)
        rf = topic.replication_factor
        if not assignments:  # placed on the running brokers (none when every one was unregistered)
            self._check_replication_factor(rf)
        self.check_capacity((new_total - current) * rf)
        if assignments:
            if len(assignments) != new_total - current:
                raise MetadataError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "assignment count does not match")
            lists = assignments
        else:
            lists = self._assign(current, new_total - current, rf)
        for i, r in enumerate(lists):
            topic.partitions.append(
                PartitionMetadata(partition=current + i, leader=r[0], replicas=list(r), isr=list(r))
            )
            self.replica_count += len(r)
        self.persist(topics=[name])
        self.notify("partitions", name)
        return topic

    def set_topic_configs(self, name: str, configs: dict[str, str], replace: bool = False) -> None:
        """Update (or with ``replace``, replace) a topic's configs and tell every broker
        (Kafka's topic config change notification)."""
        topic = self.topics[name]
        if replace:
            topic.configs = dict(configs)
        else:
            topic.configs.update(configs)
        self.persist(topics=[name])
        self.notify("config", name)

    # -- multi-broker: the controller's part ----------------------------------
    def notify(self, kind: str, name: str) -> None:
        """Tell every listening broker that ``name`` changed (created/deleted/partitions/leadership)."""
        for fn in list(self.listeners):
            fn(kind, name)

    def set_isr(self, topic: str, partition: int, isr: list[int], leader: int | None = None,
                leader_epoch: int | None = None) -> bool:
        """An ISR change the leader asked for (Kafka's AlterPartition); no leader epoch bump (KRaft).
        An ISR that now holds every target replica of an ongoing reassignment completes it.  As Kafka's
        controller, a change is refused (False) from a broker that no longer leads the partition at
        ``leader_epoch`` (FENCED_LEADER_EPOCH: a leader that missed its replacement) and when it adds a broker
        that is not registered (INELIGIBLE_REPLICA)."""
        pm = self.topics[topic].partitions[partition]
        stale = leader is not None and (pm.leader != leader or leader_epoch not in (None, pm.leader_epoch))
        if stale:
            log.info("AlterPartition of %s-%d from broker %d at leader epoch %s refused: the leader is %d at "
                     "epoch %d (FENCED_LEADER_EPOCH)", topic, partition, leader, leader_epoch, pm.leader,
                     pm.leader_epoch)
            return False
        if any(b not in self.broker_ids and b not in pm.isr for b in isr):
            return False
        pm.isr = list(isr)
        if pm.is_reassigning and self._change_partition(topic, pm, pm.replicas, pm.isr, pm.adding_replicas,
                                                        pm.removing_replicas):
            self.persist(topics=[topic])
            self.notify("reassignment", topic)
            return True
        self.persist(topics=[topic])
        return True

    def unclean_allowed(self, topic: TopicMetadata) -> bool:
        """Whether a replica out of the ISR may lead ``topic``'s partitions when no in-sync one is live: the
        topic's ``unclean.leader.election.enable``, else the broker default."""
        value = topic.configs.get("unclean.leader.election.enable")
        return self.unclean_leader_election if value is None else str(value).strip().lower() == "true"

    def broker_stopped(self, broker_id: int) -> list[tuple[str, int]]:
        """Controller ``onBrokerFailure``: drop the broker from every ISR and move leadership
        of its partitions to the first live in-sync replica with leader epoch + 1.  With no live ISR
        member the partition goes offline (leader -1, ISR kept), unless unclean elections are allowed
        (:meth:`unclean_allowed`): then its first live replica leads, the ISR just that one.
        Returns the partitions whose leader changed."""
        fence = self._broker_records("FenceBrokerRecord", broker_id) if broker_id in self.live else []
        self.live.pop(broker_id, None)
        self.endpoints.pop(broker_id, None)
        self._note_controller()
        moved: list[tuple[str, int]] = []
        shrunk: set[str] = set()
        for topic in self.topics.values():
            for pm in topic.partitions:
                if broker_id not in pm.replicas:
                    continue
                if pm.leader == broker_id:
                    candidates = [b for b in pm.isr if b != broker_id and b in self.live]
                    unclean = [b for b in pm.replicas if b != broker_id and b in self.live]
                    pm.leader_epoch += 1
                    if candidates:
                        pm.leader = candidates[0]
                        pm.isr = [b for b in pm.isr if b != broker_id]
                    elif unclean and self.unclean_allowed(topic):
                        _lead_out_of_isr(topic.name, pm, unclean[0])
                    else:
                        pm.leader = -1  # offline; the ISR keeps its last member
                    moved.append((topic.name, pm.partition))
                elif broker_id in pm.isr and len(pm.isr) > 1:
                    pm.isr = [b for b in pm.isr if b != broker_id]
                    shrunk.add(topic.name)
        self.persist(fence)
        for name in sorted({t for t, _ in moved} | shrunk):
            self.notify("leadership", name)
        return moved

    def move_leader(self, topic: str, partition: int, broker_id: int) -> int:
        """An operator's leader election (Kafka's ``ElectLeaders`` towards a chosen replica): ``broker_id``,
        a live in-sync replica, becomes the leader with leader epoch + 1; returns the new epoch.

        MetadataError: UNKNOWN_TOPIC_OR_PARTITION, ELIGIBLE_LEADERS_NOT_AVAILABLE (not a live ISR member),
        ELECTION_NOT_NEEDED (it leads already)."""
        meta = self.topics.get(topic)
        if meta is None or not 0 <= partition < len(meta.partitions):
            raise MetadataError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no partition {topic}-{partition}")
        pm = meta.partitions[partition]
        if pm.leader == broker_id:
            raise MetadataError(ErrorCode.ELECTION_NOT_NEEDED, f"broker {broker_id} leads {topic}-{partition} already")
        if broker_id not in pm.isr or broker_id not in self.live:
            raise MetadataError(ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE,
                                f"broker {broker_id} is not a live in-sync replica of {topic}-{partition} "
                                f"(ISR {pm.isr})")
        pm.leader = broker_id
        pm.leader_epoch += 1
        self.persist(topics=[topic])
        self.notify("leadership", topic)
        return pm.leader_epoch

    def broker_epoch(self, broker_id: int) -> int:
        """The broker epoch of a live broker (the offset of its registration), -1 when it is not live."""
        return self.broker_epochs.get(broker_id, -1) if broker_id in self.live else -1

    def broker_started(self, broker_id: int, host: str, port: int, rack: str | None = None,
                       endpoints: dict[str, tuple[str, int]] | None = None,
                       protocols: dict[str, str] | None = None) -> None:
        """A broker registered at ``host:port`` (its inter-broker listener) and, per listener name, the
        advertised ``endpoints``: offline partitions whose ISR holds it get it as leader (epoch + 1).  A broker
        that was unregistered (UnregisterBroker) registers again.  A broker registering while its previous
        registration is still live (it crashed and came back before its session expired) has that one fenced
        first, as KRaft fences a broker's old incarnation: its leadership moves to other in-sync replicas."""
        if broker_id in self.live:
            self.broker_stopped(broker_id)
        if broker_id not in self.broker_ids:
            self.broker_ids = sorted([*self.broker_ids, broker_id])
        if self._metadata_log is not None:  # its RegisterBrokerRecord: the broker epoch is its offset
            from .metadata_log import register_broker_record

            epoch = self._metadata_log.end_offset
            self._append([register_broker_record(broker_id, epoch, endpoints or {"": (host, port)},
                                                 protocols or {}, rack)])
        else:
            epoch = self._append([])
        self.live[broker_id] = Node(broker_id, host, port, rack)
        self.broker_epochs[broker_id] = epoch
        self._note_controller()
        if endpoints is not None:
            self.endpoints[broker_id] = {name: Node(broker_id, h, p, rack) for name, (h, p) in endpoints.items()}
        else:
            self.endpoints.pop(broker_id, None)
        self.registrations[broker_id] = (self.live[broker_id], self.endpoints.get(broker_id))
        changed: set[str] = set()
        for topic in self.topics.values():
            for pm in topic.partitions:
                if pm.leader != -1 or broker_id not in pm.replicas:
                    continue
                if broker_id in pm.isr:
                    pm.leader = broker_id
                elif self.unclean_allowed(topic):  # an offline partition's replica out of the ISR
                    _lead_out_of_isr(topic.name, pm, broker_id)
                else:
                    continue
                pm.leader_epoch += 1
                changed.add(topic.name)
        if changed:
            self.persist(topics=changed)
        for name in sorted(changed):
            self.notify("leadership", name)

    # -- the controller's admin operations (ElectLeaders, UnregisterBroker) ------------------------------
    def _note_controller(self) -> None:
        """A broker came or went (a stopping broker leaves ``live`` before :meth:`broker_stopped`): a new
        controller starts a new epoch of the metadata log."""
        controller = self.controller_id()
        if controller != self._controller:
            self._controller = controller
            self.controller_epoch += 1

    def elect_leaders(self, partitions: list[tuple[str, int]], unclean: bool = False
                      ) -> list[tuple[ErrorCode, str | None]]:
        """Kafka's ``ReplicationControlManager.electLeaders`` (ElectLeaders): an election (:meth:`_elect_leader`)
        for each ``(topic, partition)`` in order, one ``(error, message)`` each.  The changes of the whole request are
        persisted once and each topic that changed is told to every broker once, as Kafka's controller writes
        one batch of records per request."""
        results = [self._elect_leader(topic, partition, unclean) for topic, partition in partitions]
        changed = sorted({topic for (topic, _), (code, _) in zip(partitions, results) if code == ErrorCode.NONE})
        if changed:
            self.persist(topics=changed)
            for name in changed:
                self.notify("leadership", name)
        return results

    def _elect_leader(self, topic: str, partition: int, unclean: bool) -> tuple[ErrorCode, str | None]:
        """Kafka's ``ReplicationControlManager.electLeader`` for ElectLeaders (ELR disabled): the partition's
        error code and message; a new leader is applied in memory, the caller persists and notifies.

        Preferred (``unclean`` False): ELECTION_NOT_NEEDED when the first assigned replica leads; it becomes
        the leader when it is a live in-sync replica; else a leader that is a live ISR member stays
        (PREFERRED_LEADER_NOT_AVAILABLE), and an offline partition gets the first live ISR member.  Unclean:
        ELECTION_NOT_NEEDED when the partition has a leader; else the first live ISR member, or failing
        that the first live replica with the ISR reduced to it (data may be lost), or
        ELIGIBLE_LEADERS_NOT_AVAILABLE.  A new leader comes with leader epoch + 1."""
        meta = self.topics.get(topic)
        if meta is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"No such topic as {topic}"
        if not 0 <= partition < len(meta.partitions):
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"No such partition as {topic}-{partition}"
        pm = meta.partitions[partition]
        if (pm.leader >= 0) if unclean else (pm.leader == pm.replicas[0]):
            return ErrorCode.ELECTION_NOT_NEEDED, None
        isr = pm.isr
        if not unclean and self._valid_leader(pm.replicas[0], isr):
            leader = pm.replicas[0]
        elif self._valid_leader(pm.leader, isr):
            leader = pm.leader
        else:
            leader = next((b for b in pm.replicas if self._valid_leader(b, isr)), -1)
            if leader < 0 and unclean:
                leader = next((b for b in pm.replicas if b in self.live), -1)
                isr = [leader]
        if leader < 0 or leader == pm.leader:
            return (ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE if unclean
                    else ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE), None
        if isr != pm.isr:
            log.warning("unclean leader election: broker %d leads %s-%d, out of the ISR %s", leader, topic,
                        partition, pm.isr)
        pm.leader, pm.isr = leader, list(isr)
        pm.leader_epoch += 1
        return ErrorCode.NONE, None

    def balance_leaders(self) -> list[tuple[str, int]]:
        """KRaft's leader balancing (``auto.leader.rebalance.enable``): every partition whose preferred (first)
        replica is live and in sync but does not lead gets it back as leader (a preferred election, epoch + 1).
        Returns the partitions elected."""
        wanted = [(topic.name, pm.partition) for topic in self.topics.values() for pm in topic.partitions
                  if pm.replicas and pm.leader != pm.replicas[0] and self._valid_leader(pm.replicas[0], pm.isr)]
        if not wanted:
            return []
        results = self.elect_leaders(wanted)
        return [tp for tp, (code, _) in zip(wanted, results, strict=True) if code == ErrorCode.NONE]

    def broker_endpoints(self, broker_id: int) -> dict[str, Node]:
        """The listeners of a running broker (listener name -> its advertised address); empty when it is
        not running."""
        if broker_id not in self.live:
            return {}
        return dict(self.endpoints.get(broker_id) or {"PLAINTEXT": self.live[broker_id]})

    def unregister_broker(self, broker_id: int) -> None:
        """Kafka's ``ReplicationControlManager.unregisterBroker`` (UnregisterBroker): the broker's
        registration is removed, so new replicas are not placed on it.  A running broker is fenced as
        :meth:`broker_stopped` does (leadership and ISR membership move off it) and stays out until it
        registers again (restarts).  MetadataError BROKER_ID_NOT_REGISTERED for an id not registered."""
        if broker_id not in self.broker_ids:
            raise MetadataError(ErrorCode.BROKER_ID_NOT_REGISTERED,
                                f"Broker ID {broker_id} is not currently registered")
        self.broker_ids = [b for b in self.broker_ids if b != broker_id]
        self.registrations.pop(broker_id, None)
        self._append(self._broker_records("UnregisterBrokerRecord", broker_id))
        log.info("unregistered broker %d", broker_id)
        self.broker_stopped(broker_id)

    # -- partition reassignments (KIP-455; Kafka's ReplicationControlManager) ----------------------------
    def alter_partition_reassignments(self, changes: list[tuple[str, int, list[int] | None]],
                                      allow_replication_factor_change: bool = True
                                      ) -> list[tuple[ErrorCode, str | None]]:
        """AlterPartitionReassignments: for each ``(topic, partition, target replicas)`` start (or replace)
        a reassignment, or cancel the ongoing one when the target is None.  One ``(error, message)`` per
        change, in order; the partitions that changed are persisted and told to every broker.

        A reassignment goes as Kafka's ``changePartitionReassignment`` takes it: the replicas become the
        target followed by the current replicas not in it (``removing_replicas``), the target replicas not
        yet replicas are ``adding_replicas``; the leader's ISR expansion (:meth:`set_isr`) completes it once
        the ISR holds every target replica, and a target the ISR already holds completes at once."""
        results: list[tuple[ErrorCode, str | None]] = []
        changed: set[str] = set()
        for topic, partition, target in changes:
            try:
                if self._alter_partition_reassignment(topic, partition, target, allow_replication_factor_change):
                    changed.add(topic)
                results.append((ErrorCode.NONE, None))
            except MetadataError as exc:
                log.info("Unable to alter partition reassignment for %s:%d: %s", topic, partition, exc.message)
                results.append((exc.code, exc.message))
        if changed:
            self.persist(topics=changed)
            for name in sorted(changed):
                self.notify("reassignment", name)
        return results

    def list_partition_reassignments(self, topics: dict[str, list[int]] | None = None
                                     ) -> list[tuple[str, list[PartitionMetadata]]]:
        """ListPartitionReassignments: the partitions being reassigned, per topic (every topic when None;
        unknown topics and partitions, and those not being reassigned, are left out, as Kafka does)."""
        out: list[tuple[str, list[PartitionMetadata]]] = []
        if topics is None:
            wanted = [(t, [p.partition for p in t.partitions]) for t in self.topics.values()]
        else:
            wanted = [(self.topics[name], indexes) for name, indexes in topics.items() if name in self.topics]
        for topic, indexes in wanted:
            parts = [pm for pm in (topic.partition(i) for i in indexes) if pm is not None and pm.is_reassigning]
            if parts:
                out.append((topic.name, parts))
        return out

    def _alter_partition_reassignment(self, topic: str, partition: int, target: list[int] | None,
                                      allow_rf_change: bool) -> bool:
        meta = self.topics.get(topic)
        if meta is None:
            raise MetadataError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find a topic named {topic}.")
        pm = meta.partition(partition)
        if pm is None:
            raise MetadataError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                f"Unable to find partition {topic}:{partition}.")
        if target is None:
            return self._cancel_partition_reassignment(meta, pm)
        target = list(target)
        self._validate_manual_assignment(target)
        if not allow_rf_change:
            # KIP-860: the replication factor is the ongoing reassignment's target size while one is going on.
            current = len([r for r in pm.replicas if r not in pm.removing_replicas])
            if current != len(target):
                raise MetadataError(ErrorCode.INVALID_REPLICATION_FACTOR,
                                    f"The replication factor is changed from {current} to {len(target)}")
        # PartitionReassignmentReplicas from the current replicas (during a reassignment: all of them).  A target
        # adding no broker keeps the adding replicas still there, as Kafka's PartitionChangeBuilder keeps the
        # partition's lists when the new ones are empty (a resubmitted reassignment stays the same one).
        removing = sorted(set(pm.replicas) - set(target))
        replicas = target + removing
        adding = sorted(set(target) - set(pm.replicas)) or [r for r in pm.adding_replicas if r in replicas]
        self.check_capacity(len(replicas) - len(pm.replicas))
        return self._change_partition(topic, pm, replicas, pm.isr, adding, removing)

    def _validate_manual_assignment(self, replicas: list[int]) -> None:
        """Kafka's ``validateManualPartitionAssignment``: not empty, registered brokers, no broker twice."""
        if not replicas:
            raise MetadataError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                "The manual partition assignment includes an empty replica list.")
        previous = None
        for broker_id in sorted(replicas):
            if broker_id not in self.broker_ids:
                raise MetadataError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                    f"The manual partition assignment includes broker {broker_id}, but no such "
                                    f"broker is registered.")
            if broker_id == previous:
                raise MetadataError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                    f"The manual partition assignment includes the broker {broker_id} more than "
                                    f"once.")
            previous = broker_id

    def _cancel_partition_reassignment(self, meta: TopicMetadata, pm: PartitionMetadata) -> bool:
        """Kafka's ``cancelPartitionReassignment`` (``PartitionReassignmentRevert``): back to the original
        replicas, the adding ones dropped from the replicas and the ISR; when that empties the ISR, the first
        original replica alone, which is an unclean election (refused unless the topic allows one)."""
        if not pm.is_reassigning:
            raise MetadataError(ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, "No partition reassignment is in progress.")
        replicas = [r for r in pm.replicas if r not in pm.adding_replicas]
        isr = [r for r in pm.isr if r not in pm.adding_replicas]
        unclean = not isr
        if unclean:
            if meta.configs.get("unclean.leader.election.enable", "false").strip().lower() != "true":
                raise MetadataError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                    f"Unable to revert partition assignment for {meta.name}:{pm.partition} because "
                                    f"it would require an unclean leader election.")
            isr = [replicas[0]]
        return self._change_partition(meta.name, pm, replicas, isr, [], [], unclean=unclean)

    def _valid_leader(self, broker_id: int, isr: list[int]) -> bool:
        return broker_id in isr and broker_id in self.live

    def _change_partition(self, topic: str, pm: PartitionMetadata, replicas: list[int], isr: list[int],
                          adding: list[int], removing: list[int], *, unclean: bool = False) -> bool:
        """Kafka's ``PartitionChangeBuilder.build`` for a replica-set change: complete the reassignment if
        the ISR allows (``completeReassignmentIfNeeded``), elect a leader if the current one is no longer a
        live ISR member (the first live ISR member in replica order; Kafka's ONLINE election), bump the
        leader epoch when the leader changes or the replica set loses a broker (to fence the removed ones).
        Returns whether anything changed; the caller persists and notifies."""
        replicas, isr, adding, removing = list(replicas), list(isr), list(adding), list(removing)
        if adding or removing:  # PartitionReassignmentReplicas.maybeCompleteReassignment
            target_isr = [r for r in isr if r not in removing]
            target_replicas = [r for r in replicas if r not in removing]
            if target_isr and target_replicas and set(target_replicas) <= set(target_isr):
                replicas, isr, adding, removing = target_replicas, target_isr, [], []
        leader = pm.leader
        if not self._valid_leader(leader, isr):
            candidates = [r for r in replicas if self._valid_leader(r, isr)]
            if candidates:
                leader = candidates[0]
            elif unclean and isr and isr[0] in self.live:
                leader = isr[0]
            else:
                leader = -1
        if (replicas, isr, leader, adding, removing) == (pm.replicas, pm.isr, pm.leader, pm.adding_replicas,
                                                         pm.removing_replicas):
            return False
        if leader != pm.leader or not set(pm.replicas) <= set(replicas):
            pm.leader_epoch += 1
        was = (list(pm.replicas), pm.leader)
        self.replica_count += len(replicas) - len(pm.replicas)
        pm.replicas, pm.isr, pm.leader, pm.adding_replicas, pm.removing_replicas = (
            replicas, isr, leader, adding, removing)
        if pm.is_reassigning:
            log.info("reassigning %s-%d: replicas %s (adding %s, removing %s), leader %d", topic, pm.partition,
                     replicas, adding, removing, leader)
        else:
            log.info("%s-%d: replicas %s -> %s, leader %d -> %d (epoch %d), ISR %s", topic, pm.partition, was[0],
                     replicas, was[1], leader, pm.leader_epoch, isr)
        return True
