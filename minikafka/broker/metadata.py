"""Cluster metadata: topics, their ids, partition counts, leader epochs and configs.

Models what Kafka keeps in its controller quorum and serves from each
broker's ``MetadataCache``.  Deliberate difference: a single in-process store
(persisted as one JSON file in the data dir) instead of a replicated metadata
log; the multi-broker cluster issue shares one instance between brokers.
"""

from __future__ import annotations

import json
import logging
import os
import re
import uuid
from pathlib import Path
from typing import Callable

from ..common import Node, PartitionMetadata, TopicMetadata
from ..common.types import INTERNAL_TOPICS
from ..common.hashing import partition_for_key
from ..protocol.errors import ErrorCode
from .config import StartupError

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


class MetadataError(Exception):
    """A metadata operation failed with a Kafka error code."""

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
        "partitions": [{"partition": p.partition, "leader": p.leader, "leader_epoch": p.leader_epoch,
                        "replicas": p.replicas, "isr": p.isr} for p in topic.partitions],
    }


def topic_from_json(d: dict) -> TopicMetadata:
    return TopicMetadata(
        name=d["name"],
        topic_id=uuid.UUID(d["topic_id"]),
        configs=dict(d.get("configs", {})),
        partitions=[PartitionMetadata(**p) for p in d["partitions"]],
    )


class ClusterMetadata:
    """The topic registry, persisted to ``<data_dir>/cluster-metadata.json`` when a data dir is set.

    It plays both Kafka's controller (topic creation, deletion, partitions, configs, ISR changes,
    broker failure) and every broker's ``MetadataCache`` (topics, live brokers, controller and
    coordinator), as the handlers' :class:`~minikafka.broker.services.MetadataCache` and
    :class:`~minikafka.broker.services.TopicController`.
    """

    FILE = "cluster-metadata.json"

    def __init__(self, broker_ids: list[int], data_dir: Path | None = None, *,
                 max_partitions: int = DEFAULT_MAX_PARTITIONS, offsets_topic_partitions: int = 50) -> None:
        self.broker_ids = list(broker_ids)
        self.offsets_topic_partitions = offsets_topic_partitions  # offsets.topic.num.partitions
        self.data_dir = data_dir
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
        self.listeners: list[Callable[[str, str], None]] = []
        if data_dir is not None:
            self._load()

    # -- persistence -------------------------------------------------------
    def _load(self) -> None:
        assert self.data_dir is not None
        path = self.data_dir / self.FILE
        if not path.exists():
            return
        try:
            data = json.loads(path.read_text())
            topics = [topic_from_json(d) for d in data.get("topics", [])]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise StartupError(f"cannot load the cluster metadata in {path}: {exc}") from exc
        for t in topics:
            self.topics[t.name] = t
            self.by_id[t.topic_id] = t
            self.replica_count += _replicas(t)
        log.info("loaded metadata for %d topics from %s", len(self.topics), path)

    def persist(self) -> None:
        """Write the registry atomically (write a temp file, then rename)."""
        if self.data_dir is None:
            return
        self.data_dir.mkdir(parents=True, exist_ok=True)
        path = self.data_dir / self.FILE
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"topics": [topic_to_json(t) for t in self.topics.values()]}, indent=1))
        os.replace(tmp, path)

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

    def _endpoint(self, broker_id: int, listener: str) -> Node | None:
        endpoints = self.endpoints.get(broker_id)
        if endpoints is None:  # registered without listeners (one address for everything)
            return self.live.get(broker_id)
        return endpoints.get(listener)

    def controller_id(self) -> int:
        """The node that plays the controller: the lowest live broker id."""
        return min(self.live) if self.live else min(self.broker_ids)

    def partition_leader(self, topic: str, partition: int) -> int | None:
        """The leader of a partition (-1 offline), or None when it does not exist."""
        t = self.topics.get(topic)
        if t is None or not 0 <= partition < len(t.partitions):
            return None
        return t.partitions[partition].leader

    def coordinator(self, listener: str | None = None) -> Node:
        """The transaction coordinator: the lowest live broker (-1 when none is up), at its
        address on ``listener`` (port -1 when it has no such listener)."""
        if not self.live:
            return Node(-1, "", -1)
        nid = min(self.live)
        if listener is None:
            return self.live[nid]
        return self._endpoint(nid, listener) or Node(nid, "", -1)

    def offsets_partition_leader(self, partition: int) -> int:
        """The leader of a ``__consumer_offsets`` partition (-1 when no broker is up).

        The internal topic is not materialised: its partitions are placed as Kafka's rack-unaware
        assignment with a zero start index would place them (replicas ``broker_ids[p % n]`` onward, at
        most three), and the leader is the first live replica, or any live broker when none is.
        """
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
        if nid < 0:
            return Node(-1, "", -1)
        if listener is None:
            return self.live[nid]
        return self._endpoint(nid, listener) or Node(nid, "", -1)

    # -- changes -----------------------------------------------------------
    def _assign(self, start: int, count: int, rf: int) -> list[list[int]]:
        """Kafka's rack-unaware assignment (``assignReplicasToBrokersRackUnaware``).

        Deliberate difference: the random start index and replica shift are both 0,
        so assignments are deterministic.  The first replica of partition p is broker
        p mod n; the others follow it with a shift that grows every n partitions.
        """
        n = len(self.broker_ids)
        out = []
        for p in range(start, start + count):
            first = p % n
            shift = p // n
            replicas = [self.broker_ids[first]]
            for j in range(rf - 1):
                replicas.append(self.broker_ids[(first + 1 + (shift + j) % (n - 1)) % n])
            out.append(replicas)
        return out

    @property
    def usable_brokers(self) -> int:
        """Brokers new replicas can be placed on: the live ones (all registered before any started)."""
        return len(self.live) if self.live else len(self.broker_ids)

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
        usable = self.usable_brokers
        if replication_factor > usable:
            raise MetadataError(
                ErrorCode.INVALID_REPLICATION_FACTOR,
                f"Unable to replicate the partition {replication_factor} time(s): "
                f"The target replication factor of {replication_factor} cannot be reached because only "
                f"{usable} broker(s) are registered.",
            )
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
        self.persist()
        log.info("created topic %s with %d partitions (id %s)", name, num_partitions, topic.topic_id)
        self.notify("created", name)
        return topic

    def delete_topic(self, name: str) -> TopicMetadata:
        topic = self.topics.pop(name, None)
        if topic is None:
            raise MetadataError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")
        self.by_id.pop(topic.topic_id, None)
        self.replica_count -= _replicas(topic)
        self.persist()
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
        self.persist()
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
        self.persist()
        self.notify("config", name)

    # -- multi-broker: the controller's part ----------------------------------
    def notify(self, kind: str, name: str) -> None:
        """Tell every listening broker that ``name`` changed (created/deleted/partitions/leadership)."""
        for fn in list(self.listeners):
            fn(kind, name)

    def set_isr(self, topic: str, partition: int, isr: list[int]) -> None:
        """An ISR change the leader asked for (Kafka's AlterPartition); no leader epoch bump (KRaft)."""
        pm = self.topics[topic].partitions[partition]
        pm.isr = list(isr)
        self.persist()

    def broker_stopped(self, broker_id: int) -> list[tuple[str, int]]:
        """Controller ``onBrokerFailure``: drop the broker from every ISR and move leadership
        of its partitions to the first live in-sync replica with leader epoch + 1 (no unclean
        election: with no live ISR member the partition goes offline, leader -1, ISR kept).
        Returns the partitions whose leader changed."""
        self.live.pop(broker_id, None)
        self.endpoints.pop(broker_id, None)
        moved: list[tuple[str, int]] = []
        shrunk: set[str] = set()
        for topic in self.topics.values():
            for pm in topic.partitions:
                if broker_id not in pm.replicas:
                    continue
                if pm.leader == broker_id:
                    candidates = [b for b in pm.isr if b != broker_id and b in self.live]
                    pm.leader_epoch += 1
                    if candidates:
                        pm.leader = candidates[0]
                        pm.isr = [b for b in pm.isr if b != broker_id]
                    else:
                        pm.leader = -1  # offline; the ISR keeps its last member
                    moved.append((topic.name, pm.partition))
                elif broker_id in pm.isr and len(pm.isr) > 1:
                    pm.isr = [b for b in pm.isr if b != broker_id]
                    shrunk.add(topic.name)
        self.persist()
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
        self.persist()
        self.notify("leadership", topic)
        return pm.leader_epoch

    def broker_started(self, broker_id: int, host: str, port: int, rack: str | None = None,
                       endpoints: dict[str, tuple[str, int]] | None = None) -> None:
        """A broker registered at ``host:port`` (its inter-broker listener) and, per listener name, the
        advertised ``endpoints``: offline partitions whose ISR holds it get it as leader (epoch + 1)."""
        self.live[broker_id] = Node(broker_id, host, port, rack)
        if endpoints is not None:
            self.endpoints[broker_id] = {name: Node(broker_id, h, p, rack) for name, (h, p) in endpoints.items()}
        else:
            self.endpoints.pop(broker_id, None)
        changed: set[str] = set()
        for topic in self.topics.values():
            for pm in topic.partitions:
                if pm.leader == -1 and broker_id in pm.isr:
                    pm.leader = broker_id
                    pm.leader_epoch += 1
                    changed.add(topic.name)
        if changed:
            self.persist()
        for name in sorted(changed):
            self.notify("leadership", name)
