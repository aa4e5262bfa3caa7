"""Several brokers in one process sharing one controller-like metadata store.

Models what a Kafka cluster's controller does for its brokers: the shared
:class:`~minikafka.broker.metadata.ClusterMetadata` holds topic assignment
(Kafka's rack-unaware assignment), leaders, leader epochs and ISRs, and tells
every running broker of changes, as LeaderAndIsr/UpdateMetadata requests do.
Each :class:`~minikafka.broker.broker.Broker` has its own port, node id and
log directory (``<data_dir>/broker-<id>``, or memory; with several ``log.dirs``, ``<dir>/broker-<id>`` in
each of them); the metadata is KRaft's records in ``<data_dir>/__cluster_metadata-0``
(:mod:`~minikafka.broker.metadata_log`).

Brokers heartbeat to the controller every ``broker.heartbeat.interval.ms``
(:class:`~minikafka.broker.heartbeats.BrokerHeartbeatManager`).  :meth:`Cluster.stop_broker` is a controlled
shutdown: leadership of the broker's partitions moves to the first live in-sync replica with leader epoch + 1
(``onBrokerFailure``), then it stops.  :meth:`Cluster.crash_broker` stops a broker with no shutdown: it stays
registered, leader and in sync until the controller fences it, ``broker.session.timeout.ms`` after its last
heartbeat (:meth:`Cluster.fence_stale_brokers`).  New topics and partitions are placed on the registered,
unfenced brokers only, as KRaft's replica placer does.  :meth:`Cluster.start_broker` brings a broker back as
a follower that truncates via OffsetForLeaderEpoch before it fetches (a crashed one's old registration is
fenced first).

Failures are played on the brokers of the running process: :meth:`Cluster.pause_broker` stops one answering,
sending, fetching and heartbeating, as ``SIGSTOP`` does (:meth:`Cluster.resume_broker`: ``SIGCONT``), and
:meth:`Cluster.partition_network` cuts the links between sides of brokers, the controller and the clients
(:meth:`Cluster.isolate_broker`: one broker from everyone), healed on request or after a time
(:mod:`~minikafka.broker.network_links`: a request across a cut link goes unanswered, as with dropped packets).
A paused or cut-off broker misses the controller's metadata; once it hears the controller again it applies what
it missed (and registers again if it was fenced) before it serves a request, so it never acts on a stale
leader epoch, and its AlterPartition requests (ISR changes) carry its leader epoch, refused when stale.

Deliberate differences (a cluster of processes has none of them: :mod:`minikafka.supervisor.processes`, KRaft
over the wire): no KRaft quorum (the metadata is one object every broker reads; heartbeats are method calls;
request handlers of a cut-off broker still read the current metadata, where a Kafka broker would answer from its
stale copy).  Leader elections: unclean ones (a replica out of the ISR) when a
partition has no live in-sync replica and ``unclean.leader.election.enable`` allows it; preferred leaders
back every ``leader.imbalance.check.interval.seconds`` (``auto.leader.rebalance.enable``, KRaft's leader
balancing: no per-broker imbalance threshold); ElectLeaders on request.  Groups live on the replicated
``__consumer_offsets`` topic, created at the first FindCoordinator (``offsets.topic.num.partitions``,
``offsets.topic.replication.factor`` capped at the running brokers), as Kafka 4's coordinator runtime keeps
them (:mod:`~minikafka.broker.coordinator_runtime`): each partition's shard is loaded on its leader from the
partition's records (classic, consumer and share groups with their members and assignments, and offsets), a
commit, a SyncGroup completing a rebalance and a consumer or share group heartbeat are answered once their
records are replicated, and a leader change (a stop, a crash once fenced, an election) unloads the shard there
and loads it on the new leader; FindCoordinator names that leader.  The brokers share one group coordinator
object holding every loaded shard.
Transactional ids live likewise on ``__transaction_state`` (``transaction.state.log.num.partitions``,
``transaction.state.log.replication.factor`` and ``transaction.state.log.min.isr`` capped at the running
brokers; :mod:`~minikafka.broker.txn.state_manager`): each partition loaded on its leader, a state change
answered once replicated, a transaction's markers sent from its coordinator's broker over the wire
(WriteTxnMarkers) once its PrepareCommit/PrepareAbort is replicated, and resumed by the next leader when
its coordinator goes.  Share-partition state likewise on ``__share_group_state``
(``share.coordinator.state.topic.*``; :mod:`~minikafka.broker.share.state_coordinator`): written by the data
partition's leader to the leader of the key's partition, an acknowledgement answered once replicated.
SCRAM credentials and delegation tokens are kept once per process: one store each (records of the metadata
log).
ACLs likewise: one :class:`~minikafka.broker.security.authorizer.AclStore` for every broker's authorizer
(``AccessControlEntryRecord`` records in the metadata log).
"""

from __future__ import annotations

import dataclasses
import logging
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, AsyncIterator

import trio

from ..common import SYSTEM_CLOCK, Clock
from .broker import Broker, log_cleaner_for
from .config import BrokerConfig, ConfigError, StartupError, check_data_dir
from .network_links import CLIENTS, CONTROLLER, NetworkPartition, NodeName
from .quorum_controller import QuorumController
from .recording import CaptureSupport
from .security.listeners import ListenerError, parse_listeners
from .services import HandlerTimer
from .shared import SharedServices

if TYPE_CHECKING:
    from .share.coordinator import ShareGroupCoordinator

log = logging.getLogger(__name__)


class Cluster:
    """N brokers (ids 0..N-1) on ports ``port..port+N-1`` (or free ports when ``port`` is 0); with several
    ``listeners``, each listener's port + broker id (0 stays 0: a free port)."""

    def __init__(self, num_brokers: int = 3, config: BrokerConfig | None = None, *, clock: Clock = SYSTEM_CLOCK,
                 timer: HandlerTimer | None = None, captures: CaptureSupport | None = None,
                 request_metrics: bool = True, **settings: Any) -> None:
        """``captures``: how the brokers capture their traffic; ``request_metrics``: whether they count the
        per-request metrics (both as for :class:`Broker`)."""
        base = config or BrokerConfig(**{"port": 0, **settings})
        self.clock = clock
        self.timer = timer
        if base.capture_dir is not None and captures is None:
            raise StartupError(f"capture dir {base.capture_dir} set but the cluster was given no capture "
                               "(captures=minikafka.capture.recorder.CAPTURE)")
        self.captures = captures
        self.request_metrics = request_metrics
        self.base_config = base
        self.data_dir: Path | None = Path(base.data_dir) if base.data_dir is not None else None
        if self.data_dir is not None:
            check_data_dir(self.data_dir)
        ids = list(range(num_brokers))
        # One set of shared services for every broker (SharedServices), run by the cluster.
        self.shared = SharedServices.create(base, self.data_dir, ids, clock)
        self.metadata = self.shared.metadata
        self.faults = self.shared.faults  # one rule set for every broker (rules match by broker id)
        self.group_coordinator = self.shared.group_coordinator
        self.txn_coordinator = self.shared.txn_coordinator
        self.links = self.shared.links  # paused brokers and network partitions
        self.controller = QuorumController(
            self.metadata, self.shared.heartbeats, clock, session_timeout_ms=base.broker_session_timeout_ms,
            heartbeat_interval_ms=base.broker_heartbeat_interval_ms,
            leader_imbalance_check_interval_s=base.leader_imbalance_check_interval_seconds,
            auto_leader_rebalance=base.auto_leader_rebalance_enable)
        _warn_if_brokers_unauthorized(base)
        # The coordinators' internal logs are compacted once for the cluster (each broker compacts its replicas).
        self.log_cleaner = log_cleaner_for(base, self.data_dir, clock)
        self.shared.add_coordinator_logs(self.log_cleaner)
        self.configs: dict[int, BrokerConfig] = {
            i: dataclasses.replace(
                base, node_id=i, port=base.port + i if base.port else 0,
                listeners=_shift_ports(base, base.listeners, i),
                advertised_listeners=_shift_ports(base, base.advertised_listeners, i),
                data_dir=self.data_dir / f"broker-{i}" if self.data_dir is not None else None,
                log_dirs=[d / f"broker-{i}" for d in base.all_log_dirs],  # log.dirs: broker-<id> in each
                client_quotas=list(base.client_quotas), extra=dict(base.extra))
            for i in ids
        }
        self.brokers: dict[int, Broker] = {}
        self._scopes: dict[int, trio.CancelScope] = {}
        self._stopped: dict[int, trio.Event] = {}
        self._nursery: trio.Nursery | None = None

    @property
    def broker_ids(self) -> list[int]:
        return list(self.configs)

    @property
    def share_groups(self) -> ShareGroupCoordinator:
        """The cluster's KIP-932 share-group coordinator (built on first use, as by a ShareGroupHeartbeat)."""
        return self.shared.share_groups

    @property
    def bootstrap(self) -> str:
        """``host:port`` of every running broker, comma separated."""
        return ",".join(f"{self.configs[i].advertised}:{self.configs[i].port}" for i in sorted(self.brokers))

    def bootstrap_for(self, listener: str) -> str:
        """``host:port`` of every running broker on ``listener`` (its advertised address), comma separated."""
        return ",".join(self.brokers[i].bootstrap_for(listener) for i in sorted(self.brokers))

    def broker(self, broker_id: int) -> Broker:
        return self.brokers[broker_id]

    def leader(self, topic: str, partition: int) -> int:
        """The leader of a partition as the metadata has it (-1 if offline)."""
        return self.metadata.topics[topic].partitions[partition].leader

    # -- lifecycle -----------------------------------------------------------
    async def run(self, *, task_status: trio.TaskStatus[Cluster] = trio.TASK_STATUS_IGNORED) -> None:
        """Start every broker, then run until cancelled."""
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                await self.shared.start(nursery, self.base_config)
                await nursery.start(self.log_cleaner.run)
                nursery.start_soon(self.controller.run)  # fencing and leader balancing
                nursery.start_soon(self._healing_loop)
                for i in self.broker_ids:
                    await self.start_broker(i)
                task_status.started(self)
                await trio.sleep_forever()
        finally:
            self.shared.close()

    async def start_broker(self, broker_id: int) -> Broker:
        """Start (or restart) one broker on its port and log dir."""
        assert self._nursery is not None, "the cluster is not running"
        if broker_id in self.brokers:
            return self.brokers[broker_id]
        broker = Broker(self.configs[broker_id], self.shared, clock=self.clock, timer=self.timer,
                        captures=self.captures, request_metrics=self.request_metrics)
        await self._nursery.start(self._run_broker, broker)
        log.info("cluster: broker %d started on port %d", broker_id, broker.port)
        return broker

    async def _run_broker(self, broker: Broker, *,
                          task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        bid = broker.node_id
        done = self._stopped[bid] = trio.Event()
        scope = self._scopes[bid] = trio.CancelScope()
        try:
            with scope:
                async with trio.open_nursery() as nursery:
                    await nursery.start(broker.run)
                    self.brokers[bid] = broker
                    task_status.started()
        finally:
            self.brokers.pop(bid, None)
            self._scopes.pop(bid, None)
            done.set()

    async def stop_broker(self, broker_id: int) -> None:
        """Stop one broker cleanly, as a controlled shutdown does: leadership moves off it first (the
        controller's ``onBrokerFailure`` for a broker that asked to shut down), then it stops (its logs closed)."""
        scope = self._scopes.get(broker_id)
        if scope is None:
            return
        moved = self.metadata.broker_stopped(broker_id)  # its session ends as it leaves (Broker._leave)
        scope.cancel()
        await self._stopped[broker_id].wait()
        self.links.forget(broker_id)  # a pause ends with the process
        log.info("cluster: broker %d stopped; %d partition leader(s) moved", broker_id, len(moved))

    async def crash_broker(self, broker_id: int) -> None:
        """Crash one broker: it stops at once, with no controlled shutdown, and its in-memory state is lost
        (its data dir is kept).  It stays registered, leader of its partitions and in their ISRs, until the
        controller fences it after ``broker.session.timeout.ms`` without a heartbeat; then leadership moves."""
        broker = self.brokers.get(broker_id)
        scope = self._scopes.get(broker_id)
        if broker is None or scope is None:
            return
        broker.crashed = True
        scope.cancel()
        await self._stopped[broker_id].wait()
        self.links.forget(broker_id)
        log.info("cluster: broker %d crashed; fenced when its session (%d ms) expires", broker_id,
                 self.configs[broker_id].broker_session_timeout_ms)

    # -- pauses and network partitions -------------------------------------------------------------------------
    def pause_broker(self, broker_id: int) -> None:
        """Pause a running broker, as ``SIGSTOP`` does: it handles no request and writes no response (its
        clients' requests wait, unanswered), fetches nothing, and sends no heartbeat, so the controller fences it
        after ``broker.session.timeout.ms``.  KeyError: not running."""
        if broker_id not in self.brokers:
            raise KeyError(f"broker {broker_id} is not running")
        self.links.pause(broker_id)
        log.info("cluster: broker %d paused", broker_id)

    def resume_broker(self, broker_id: int) -> None:
        """Resume a paused broker (``SIGCONT``): it first applies the metadata it missed (and registers again if
        it was fenced), then answers what waited."""
        if broker_id in self.links.paused:
            self.links.resume(broker_id)
            log.info("cluster: broker %d resumed", broker_id)

    def partition_network(self, sides: list[list[NodeName]], heal_after_s: float | None = None
                          ) -> NetworkPartition:
        """Cut every link between nodes of different ``sides`` (broker ids, ``"controller"``, ``"clients"``),
        in both directions, until :meth:`heal_network` or for ``heal_after_s`` seconds.  ValueError: not two
        sides or more, or a node this cluster does not have."""
        known: set[NodeName] = {*self.configs, CONTROLLER, CLIENTS}
        for side in sides:
            for node in side:
                if node not in known:
                    raise ValueError(f"no node {node!r} (nodes: {sorted(known, key=str)})")
        heal_at = trio.current_time() + heal_after_s if heal_after_s is not None else None
        return self.links.partition(sides, heal_at)

    def isolate_broker(self, broker_id: int, heal_after_s: float | None = None) -> NetworkPartition:
        """Cut one broker off from the other brokers, the controller and the clients (its cable pulled)."""
        others: list[NodeName] = [b for b in self.configs if b != broker_id]
        return self.partition_network([[broker_id], [*others, CONTROLLER, CLIENTS]], heal_after_s)

    def heal_network(self, partition_id: int | None = None) -> list[NetworkPartition]:
        """Heal one network partition, or all of them; KeyError: no such partition."""
        return self.links.heal(partition_id)

    def heal_broker(self, broker_id: int) -> list[NetworkPartition]:
        """Heal every network partition that names ``broker_id``."""
        named = [p.id for p in self.links.partitions.values() if any(broker_id in side for side in p.sides)]
        return [h for pid in named for h in self.links.heal(pid)]

    def broker_state(self, broker_id: int) -> str:
        """``running``, ``paused``, ``partitioned`` (a network partition names it), ``crashed`` (gone and not yet
        fenced: still registered, leader and in sync) or ``stopped`` (its registration fenced)."""
        if broker_id in self.brokers:
            if broker_id in self.links.paused:
                return "paused"
            if any(broker_id in side for p in self.links.partitions.values() for side in p.sides):
                return "partitioned"
            return "running"
        return "crashed" if broker_id in self.metadata.live else "stopped"

    async def _healing_loop(self) -> None:
        """Heal each network partition whose time is up."""
        links = self.links
        while True:
            due = links.next_heal_at()
            with trio.move_on_at(due if due is not None else float("inf")):
                await links.wait_change()
            links.heal_due(trio.current_time())

    def fence_stale_brokers(self) -> list[int]:
        """The controller's check (:meth:`QuorumController.fence_stale_brokers`); returns the brokers fenced."""
        return self.controller.fence_stale_brokers()

    async def restart_broker(self, broker_id: int) -> Broker:
        await self.stop_broker(broker_id)
        return await self.start_broker(broker_id)


def _shift_ports(base: BrokerConfig, value: str, broker_id: int) -> str:
    """A ``listeners`` or ``advertised.listeners`` value for broker ``broker_id``: every non-zero port + id
    (brokers of one process on ports base+i, per listener)."""
    if not value or broker_id == 0:
        return value
    try:
        endpoints = parse_listeners(value, base.protocol_map())
    except ListenerError as exc:
        key = "listeners" if value == base.listeners else "advertised.listeners"
        raise ConfigError(key, value, str(exc)) from None
    return ",".join(e.with_port(e.port + broker_id if e.port else 0).connection_string for e in endpoints)


def _warn_if_brokers_unauthorized(config: BrokerConfig) -> None:
    """Kafka requires the brokers' own principal to be a super user when an authorizer is on: over a
    PLAINTEXT inter-broker listener that principal is ``User:ANONYMOUS``.  Say so once at start-up."""
    if not config.authorizer_class_name:
        return
    try:
        protocol = config.inter_broker_endpoint().security_protocol
    except Exception:  # noqa: BLE001 - listener errors are reported where the listeners are bound
        return
    supers = {p.strip() for p in config.super_users.split(";")}
    if protocol == "PLAINTEXT" and "User:ANONYMOUS" not in supers and "User:*" not in supers:
        log.warning("authorizer on with a PLAINTEXT inter-broker listener: replica fetches and transaction "
                    "markers come from User:ANONYMOUS, which needs to be in super.users (as in Kafka)")


@asynccontextmanager
async def serve_cluster(num_brokers: int = 3, config: BrokerConfig | None = None, *,
                        captures: CaptureSupport | None = None, **settings) -> AsyncIterator[Cluster]:
    """Run a cluster for the duration of an ``async with`` block (port 0: free ports)."""
    cluster = Cluster(num_brokers, config, captures=captures, **settings)
    async with trio.open_nursery() as nursery:
        await nursery.start(cluster.run)
        try:
            yield cluster
        finally:
            nursery.cancel_scope.cancel()
