"""The controller's decisions, the same whether its brokers share its process or run in their own.

Models Kafka 4's ``QuorumController`` with one voter: the brokers' sessions (fenced when their heartbeats stop
for ``broker.session.timeout.ms``), preferred leaders brought back (``auto.leader.rebalance.enable``), and what
brokers ask of it over the wire in KRaft (BrokerRegistration, BrokerHeartbeat, AlterPartition,
AllocateProducerIds; :mod:`~minikafka.broker.controller_apis`).  Its state is the
:class:`~minikafka.broker.metadata.ClusterMetadata` it changes, written as records of the ``__cluster_metadata``
log.  A :class:`~minikafka.broker.cluster.Cluster` runs one for the brokers of its process (they heartbeat by a
method call); a controller process (``process.roles=controller``) runs one behind its listener.

Deliberate differences: one voter, no Raft election; a broker that registers is unfenced at once (Kafka waits
until its first heartbeat reports that it caught up with the log: here registration waits instead, see
:class:`~minikafka.broker.broker_lifecycle.BrokerLifecycleManager`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import trio

from ..common import Clock
from ..protocol.errors import ErrorCode
from .heartbeats import BrokerHeartbeatManager
from .metadata import ClusterMetadata

log = logging.getLogger(__name__)

#: Producer ids handed to a broker at a time (Kafka's ``ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE``).
PRODUCER_ID_BLOCK_SIZE = 1000


@dataclass(frozen=True, slots=True)
class HeartbeatReply:
    """What a BrokerHeartbeat is answered with."""

    error: ErrorCode
    is_caught_up: bool = False
    is_fenced: bool = True
    should_shut_down: bool = False


class QuorumController:
    """One voter's controller over ``metadata``: sessions, fencing, leader balancing and the brokers' requests."""

    def __init__(self, metadata: ClusterMetadata, heartbeats: BrokerHeartbeatManager, clock: Clock, *,
                 session_timeout_ms: int, heartbeat_interval_ms: int, leader_imbalance_check_interval_s: float,
                 auto_leader_rebalance: bool) -> None:
        self.metadata = metadata
        self.heartbeats = heartbeats
        self.clock = clock
        self.session_timeout_ms = session_timeout_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.leader_imbalance_check_interval_s = leader_imbalance_check_interval_s
        self.auto_leader_rebalance = auto_leader_rebalance

    async def run(self) -> None:
        """Fence expired sessions and balance leaders until cancelled.  The registered brokers' sessions start now
        (those a controller took over from its log)."""
        now = self.clock.time_ms()
        for broker_id in self.metadata.live:
            if broker_id not in self.heartbeats.last_contact_ms:
                self.heartbeats.touch(broker_id, now)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._fencing_loop)
            if self.auto_leader_rebalance:
                nursery.start_soon(self._leader_balancing_loop)

    # -- sessions ---------------------------------------------------------------------------------------------
    def fence_stale_brokers(self) -> list[int]:
        """Fence every registered broker whose session expired (no heartbeat for ``broker.session.timeout.ms``),
        moving its leadership; returns the brokers fenced."""
        stale = self.heartbeats.stale(self.clock.time_ms(), self.session_timeout_ms, list(self.metadata.live))
        for broker_id in stale:
            self.heartbeats.forget(broker_id)
            moved = self.metadata.broker_stopped(broker_id)
            log.info("controller: broker %d fenced (no heartbeat for %d ms); %d partition leader(s) moved",
                     broker_id, self.session_timeout_ms, len(moved))
        return stale

    async def _fencing_loop(self) -> None:
        """:meth:`fence_stale_brokers` a few times per session timeout.  Each check waits one more turn of the
        loop first, so that heartbeats due in the same turn (after the process stalled) are taken before it."""
        interval = max(min(self.session_timeout_ms / 4, self.heartbeat_interval_ms) / 1000, 0.001)
        while True:
            await trio.sleep(interval)
            await trio.lowlevel.checkpoint()
            self.fence_stale_brokers()

    async def _leader_balancing_loop(self) -> None:
        """Every ``leader.imbalance.check.interval.seconds``, preferred leaders back where they are live and in
        sync (:meth:`ClusterMetadata.balance_leaders`)."""
        while True:
            await trio.sleep(self.leader_imbalance_check_interval_s)
            elected = self.metadata.balance_leaders()
            if elected:
                log.info("controller: %d preferred leader(s) elected", len(elected))

    # -- what brokers ask over the wire ---------------------------------------------------------------------------
    def register_broker(self, broker_id: int, inter_broker: tuple[str, int], endpoints: dict[str, tuple[str, int]],
                        protocols: dict[str, str], rack: str | None) -> int:
        """BrokerRegistration: the broker (re)registers with ``endpoints`` (listener -> advertised address) and
        its session starts; returns its new broker epoch."""
        self.metadata.broker_started(broker_id, inter_broker[0], inter_broker[1], rack, endpoints=endpoints,
                                     protocols=protocols)
        self.heartbeats.touch(broker_id, self.clock.time_ms())
        log.info("controller: broker %d registered at %s:%d (epoch %d)", broker_id, *inter_broker,
                 self.metadata.broker_epoch(broker_id))
        return self.metadata.broker_epoch(broker_id)

    def heartbeat(self, broker_id: int, broker_epoch: int, metadata_offset: int, want_shut_down: bool
                  ) -> HeartbeatReply:
        """BrokerHeartbeat (Kafka's ``BrokerHeartbeatManager`` / ``processBrokerHeartbeat``).  A broker whose
        registration is not its current one (fenced, or registered again since) gets STALE_BROKER_EPOCH and
        registers again.  ``want_shut_down``: a controlled shutdown, leadership moved off it first."""
        if self.metadata.broker_epoch(broker_id) != broker_epoch or broker_epoch < 0:
            return HeartbeatReply(ErrorCode.STALE_BROKER_EPOCH)
        self.heartbeats.touch(broker_id, self.clock.time_ms())
        if want_shut_down:
            self.heartbeats.forget(broker_id)
            moved = self.metadata.broker_stopped(broker_id)
            log.info("controller: broker %d shut down in a controlled way; %d partition leader(s) moved",
                     broker_id, len(moved))
            return HeartbeatReply(ErrorCode.NONE, is_caught_up=True, is_fenced=True, should_shut_down=True)
        caught_up = metadata_offset >= broker_epoch
        return HeartbeatReply(ErrorCode.NONE, is_caught_up=caught_up, is_fenced=False)

    def alter_partition(self, broker_id: int, broker_epoch: int, topic: str, partition: int, leader_epoch: int,
                        isr: list[int]) -> ErrorCode:
        """One partition of an AlterPartition: the leader's new ISR, refused from a stale broker
        (STALE_BROKER_EPOCH) or leader (FENCED_LEADER_EPOCH), and when it adds a replica that is not registered
        (INELIGIBLE_REPLICA)."""
        if self.metadata.broker_epoch(broker_id) != broker_epoch:
            return ErrorCode.STALE_BROKER_EPOCH
        meta = self.metadata.get_topic(topic)
        if meta is None or not 0 <= partition < len(meta.partitions):
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        pm = meta.partitions[partition]
        if pm.leader != broker_id or pm.leader_epoch != leader_epoch:
            stale = leader_epoch <= pm.leader_epoch
            return ErrorCode.FENCED_LEADER_EPOCH if stale else ErrorCode.NOT_LEADER_OR_FOLLOWER
        if not self.metadata.set_isr(topic, partition, isr, broker_id, leader_epoch):
            return ErrorCode.INELIGIBLE_REPLICA
        return ErrorCode.NONE

    def allocate_producer_ids(self, broker_id: int, broker_epoch: int) -> tuple[ErrorCode, int, int]:
        """AllocateProducerIds: the next block of producer ids for a broker (a ProducerIdsRecord in the log);
        (error, first id, block size)."""
        if self.metadata.broker_epoch(broker_id) != broker_epoch:
            return ErrorCode.STALE_BROKER_EPOCH, -1, 0
        first = self.metadata.allocate_producer_ids(broker_id, broker_epoch, PRODUCER_ID_BLOCK_SIZE)
        return ErrorCode.NONE, first, PRODUCER_ID_BLOCK_SIZE
