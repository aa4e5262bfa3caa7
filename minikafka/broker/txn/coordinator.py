"""The transaction coordinator (Kafka's ``TransactionCoordinator`` + ``TransactionStateManager``).

Maps each transactional id to a producer id and epoch and walks its
transactions through Kafka's states (:class:`~.metadata.TransactionState`):
InitProducerId (with fencing of an older instance: an Ongoing transaction is
aborted under a bumped epoch), AddPartitionsToTxn / AddOffsetsToTxn
(Ongoing), EndTxn (PrepareCommit/PrepareAbort, answered at once; the markers
then go to every partition through the
:class:`~.markers.TransactionMarkerChannelManager` and the group offsets are
committed or dropped, and the transaction becomes CompleteCommit /
CompleteAbort).  ``transaction.timeout.ms`` is enforced by a timer that aborts
expired transactions under a bumped epoch (``abortTimedOutTransactions``), and
ids idle for ``transactional.id.expiration.ms`` are removed.  State is kept on
the replicated ``__transaction_state`` partitions (:mod:`.state_manager`, after
:meth:`TransactionCoordinator.use_partitions`; one local log without): each id
is coordinated by the leader of its partition, which loads the partition when it
becomes leader, answers a request once its record is replicated, and sends the
markers of a transaction only once its PrepareCommit/PrepareAbort is; transactions
found half-completed on load get their markers sent again, from the new
coordinator, under its coordinator epoch (the partition's leader epoch).

Deliberate differences from Kafka: one coordinator object holds the loaded
partitions of every broker of a process (each bound to the broker leading it:
elsewhere NOT_COORDINATOR); the groups of AddOffsetsToTxn are completed by a
direct call to the group coordinator rather than by markers to their
``__consumer_offsets`` partitions (which the transaction log records, as Kafka's
does).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import trio

from ...common import Clock, TopicPartition
from ...common.hashing import partition_for_key
from ...protocol.errors import ErrorCode
from ..config import BrokerConfig
from ..coordinator_runtime import CoordinatorReplica
from ..features import TRANSACTION_VERSION
from ..inter_broker import InterBrokerChannel, InterBrokerConnector
from ..log.cleaner_manager import CleanerTarget
from .markers import PartitionLeaders, TransactionMarkerChannelManager
from .metadata import MAX_EPOCH, NO_PRODUCER_EPOCH, TransactionMetadata, TransactionState
from .state_manager import TransactionStateManager

if TYPE_CHECKING:
    from ..groups.consumer.subscription import CompiledRegex

log = logging.getLogger(__name__)

S = TransactionState
E = ErrorCode


class ProducerIds(Protocol):
    next_id: int

    def generate(self) -> int: ...


class GroupTxnOffsets(Protocol):
    """The group coordinator's half of a transaction's offsets (TxnOffsetCommit, made visible on commit)."""

    def complete_txn_partition(self, partition: int, producer_id: int, commit: bool) -> None: ...

    def txn_offset_groups(self, producer_id: int) -> set[str]:
        """The groups holding offsets of the producer's open transaction."""
        ...


class FeatureLevels(Protocol):
    """The cluster's finalized feature levels (``transaction.version``)."""

    def level(self, name: str) -> int: ...


class ClusterView(PartitionLeaders, Protocol):
    """Where the markers go: partition leaders and the live brokers' addresses."""

    @property
    def live(self) -> dict: ...


@dataclass(frozen=True)
class ProducerIdAndEpoch:
    error: ErrorCode
    producer_id: int = -1
    producer_epoch: int = -1


@dataclass(frozen=True)
class TransactionListing:
    transactional_id: str
    producer_id: int
    state: str


class TransactionCoordinator:
    """Every transactional id's state, the markers of completing transactions, and the timeout timer."""

    def __init__(self, config: BrokerConfig, data_dir: Path | None, producer_ids: ProducerIds, cluster: ClusterView,
                 clock: Clock, group_offsets: GroupTxnOffsets | None = None,
                 features: FeatureLevels | None = None) -> None:
        """``features``: the finalized ``transaction.version`` (Kafka 4.2's default, 2, without them) is
        the version of the transactions the coordinator itself ends (timeouts, fencing)."""
        self.config = config
        self.features = features
        self.producer_ids = producer_ids
        self.clock = clock
        self.group_offsets = group_offsets
        self.cluster = cluster
        self.state = TransactionStateManager(config, data_dir, clock)
        self.state.on_load, self.state.on_unload = self._on_load, self._on_unload
        # Markers go to the leaders' inter-broker listener, in its security protocol.
        self.connector = InterBrokerConnector(config)
        self.channel = InterBrokerChannel("transaction-coordinator", lambda nid: cluster.live.get(nid),
                                          connector=self.connector)
        self.markers = TransactionMarkerChannelManager(self.channel, cluster)
        # With the partitions: the markers of a broker's loaded partitions go out from it.
        self._broker_markers: dict[int, TransactionMarkerChannelManager] = {}
        self._nursery: trio.Nursery | None = None
        self._queued: list[tuple[TransactionMetadata, bool, int, int]] = []
        # The completions under way, by __transaction_state partition (cancelled when it is unloaded).
        self._completing: dict[int, set[trio.CancelScope]] = {}
        self.completions = 0  # transactions whose markers were all written (for tests and metrics)
        self._completed = trio.Event()
        self._on_load(list(self.txns.values()))

    @property
    def txns(self) -> dict[str, TransactionMetadata]:
        """The transactional ids of the loaded partitions."""
        return self.state.txns

    # -- the __transaction_state partitions -----------------------------------------------------------------
    def use_partitions(self) -> None:
        """Keep the ids on the replicated ``__transaction_state`` partitions (:mod:`.state_manager`)."""
        self.state.use_partitions()
        self._queued.clear()  # (they resume when their partition loads)
        self._bump_producer_ids(self.state.legacy.values())

    def coordinator_error(self, transactional_id: str, broker_id: int) -> ErrorCode:
        """NONE when broker ``broker_id`` coordinates the id (has its partition loaded);
        COORDINATOR_LOAD_IN_PROGRESS while it loads it; NOT_COORDINATOR otherwise."""
        return self.state.coordinator_error(transactional_id, broker_id)

    def write_error(self, transactional_id: str) -> ErrorCode:
        """COORDINATOR_NOT_AVAILABLE while the id's state cannot be written (too few in-sync replicas)."""
        return self.state.write_error(transactional_id)

    def loaded(self, transactional_id: str) -> bool:
        """Whether some broker has the id's partition loaded (always, on its own)."""
        return self.state.shards is None or self.state.shard_of(transactional_id) is not None

    async def replicated(self, transactional_id: str) -> ErrorCode:
        """Wait until the id's state written so far is replicated (:meth:`.TransactionStateManager.replicated`)."""
        return await self.state.replicated(transactional_id)

    def on_election(self, replica: CoordinatorReplica) -> None:
        self.state.on_election(replica)

    def on_resignation(self, broker_id: int, partition: int) -> None:
        self.state.on_resignation(broker_id, partition)

    def on_broker_gone(self, broker_id: int) -> None:
        self.state.on_broker_gone(broker_id)

    def _bump_producer_ids(self, metas: Iterable[TransactionMetadata]) -> None:
        """New producer ids stay above those of ``metas`` (the block a restarted coordinator resumes after)."""
        top = max((max(m.producer_id, m.last_producer_id) for m in metas), default=-1)
        if top >= 0:
            self.producer_ids.next_id = max(self.producer_ids.next_id, top + 1)

    def _on_load(self, metas: list[TransactionMetadata]) -> None:
        """Ids a partition's load brought: producer ids move past theirs, their groups are found again, and
        transactions half-completed get their markers sent (again)."""
        self._bump_producer_ids(metas)
        self._find_groups(metas)
        for meta in metas:
            if meta.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                self._start_completion(meta, meta.state == S.PREPARE_COMMIT, meta.producer_epoch, -1)

    def _on_unload(self, partition: int) -> None:
        """The partition moved: its completions stop here (its new coordinator resumes them)."""
        for scope in self._completing.pop(partition, ()):
            scope.cancel()

    def now_ms(self) -> int:
        return self.clock.time_ms()

    def transaction_version(self) -> int:
        """The finalized ``transaction.version`` (Kafka's ``txnManager.transactionVersionLevel()``)."""
        return self.features.level(TRANSACTION_VERSION) if self.features is not None else 2

    def _offsets_partition(self, group_id: str) -> int:
        """The group's ``__consumer_offsets`` partition (Kafka's ``partitionFor``)."""
        return partition_for_key(group_id, self.config.offsets_topic_num_partitions)

    def _find_groups(self, metas: Iterable[TransactionMetadata]) -> None:
        """After a load: the groups of each transaction with ``__consumer_offsets`` partitions are those of
        these partitions holding offsets of its producer (the log records partitions, not group ids)."""
        if self.group_offsets is None:
            return
        for meta in metas:
            if meta.offsets_partitions:
                meta.groups = {g for g in self.group_offsets.txn_offset_groups(meta.producer_id)
                               if self._offsets_partition(g) in meta.offsets_partitions}

    def cleaner_targets(self) -> list[CleanerTarget]:
        """The local ``__transaction_state`` log for the log cleaner (none without one)."""
        return self.state.cleaner_targets()

    # -- running ---------------------------------------------------------------------------------
    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Send markers of completing transactions and run the timers until cancelled."""
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                for meta, commit, epoch, offset in self._queued:
                    self._start_completion(meta, commit, epoch, offset)
                self._queued.clear()
                nursery.start_soon(self.state.run_loads)
                nursery.start_soon(self._timer_loop)
                task_status.started()
                await trio.sleep_forever()
        finally:
            self._nursery = None
            with trio.CancelScope(shield=True):
                await self.channel.aclose()
                for manager in self._broker_markers.values():
                    await manager.channel.aclose()

    def close(self) -> None:
        self.state.close()

    async def _timer_loop(self) -> None:
        cfg = self.config
        abort_every = cfg.transaction_abort_timed_out_transaction_cleanup_interval_ms / 1000
        expire_every = cfg.transaction_remove_expired_transaction_cleanup_interval_ms / 1000
        next_expire = trio.current_time() + expire_every
        while True:
            await trio.sleep(abort_every)
            self.abort_timed_out_transactions()
            if trio.current_time() >= next_expire:
                self.remove_expired_transactional_ids()
                next_expire = trio.current_time() + expire_every

    async def wait_completions(self, count: int) -> None:
        """Wait until ``count`` transactions in all have had their markers written."""
        while self.completions < count:
            await self._completed.wait()

    # -- state changes ---------------------------------------------------------------------------
    def _persist(self, meta: TransactionMetadata) -> int:
        """Write ``meta``'s state; the offset of its record (-1: none to wait for)."""
        return self.state.write(meta)

    def _bump_epoch(self, meta: TransactionMetadata) -> None:
        """Next epoch; a new producer id when the epoch is exhausted (Kafka's epoch overflow handling)."""
        meta.last_producer_epoch = meta.producer_epoch
        if meta.producer_epoch >= MAX_EPOCH - 1:
            meta.last_producer_id = meta.producer_id
            meta.producer_id = self.producer_ids.generate()
            meta.producer_epoch = 0
        else:
            meta.producer_epoch += 1

    def _begin_completion(self, meta: TransactionMetadata, commit: bool) -> None:
        now = self.now_ms()
        meta.transition(S.PREPARE_COMMIT if commit else S.PREPARE_ABORT, now)
        offset = self._persist(meta)
        if offset < 0 and self.state.shards is not None:
            # Not written (the partition moved meanwhile): its next coordinator decides from what was written.
            log.info("transaction %s: %s not written; no markers sent", meta.transactional_id, meta.state.value)
            return
        self._start_completion(meta, commit, meta.producer_epoch, offset)

    def _start_completion(self, meta: TransactionMetadata, commit: bool, epoch: int, offset: int) -> None:
        if self._nursery is not None:
            self._nursery.start_soon(self._complete, meta, commit, epoch, offset)
        else:
            self._queued.append((meta, commit, epoch, offset))

    async def _complete(self, meta: TransactionMetadata, commit: bool, epoch: int, offset: int) -> None:
        """Kafka's ``sendTxnMarkersCallback`` onwards, once the Prepare* record (at ``offset``) is replicated:
        group offsets, markers, then Complete*.  Given up when the id's partition is unloaded."""
        tid = meta.transactional_id
        partition = self.state.partition_for(tid)
        with trio.CancelScope() as scope:
            self._completing.setdefault(partition, set()).add(scope)
            try:
                await self._complete_replicated(meta, commit, epoch, offset)
            finally:
                scopes = self._completing.get(partition)
                if scopes is not None:
                    scopes.discard(scope)

    async def _complete_replicated(self, meta: TransactionMetadata, commit: bool, epoch: int, offset: int) -> None:
        tid = meta.transactional_id
        while (code := await self.state.replicated(tid, offset)) == E.COORDINATOR_NOT_AVAILABLE:
            pass  # (the ISR shrinks, or the partition moves, in the end)
        if code or self.txns.get(tid) is not meta:
            return  # the partition moved: its new coordinator completes the transaction
        if self.group_offsets is not None:
            for partition in sorted(meta.offsets_partitions):
                self.group_offsets.complete_txn_partition(partition, meta.producer_id, commit)
        await self._markers_for(tid).write_markers(meta.producer_id, epoch, self.state.coordinator_epoch(tid),
                                                   commit, set(meta.partitions), meta.client_version)
        if self.txns.get(tid) is not meta:
            return
        meta.transition(S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT, self.now_ms())
        meta.partitions.clear()
        meta.groups.clear()
        meta.offsets_partitions.clear()
        self._persist(meta)
        log.debug("transaction %s (producer %d epoch %d) %s", meta.transactional_id, meta.producer_id, epoch,
                  "committed" if commit else "aborted")
        self.completions += 1
        self._completed.set()
        self._completed = trio.Event()

    def _markers_for(self, transactional_id: str) -> TransactionMarkerChannelManager:
        """Who sends the id's markers: the broker that has its partition loaded (tagged as coming from it, for
        the links of a network partition), or the coordinator's own channel on its own."""
        shard = self.state.shard_of(transactional_id)
        if shard is None:
            return self.markers
        broker_id = shard.broker_id
        manager = self._broker_markers.get(broker_id)
        if manager is None:
            connector = InterBrokerConnector(self.config, self.connector.links, lambda: broker_id)
            channel = InterBrokerChannel(f"broker-{broker_id}-transaction-markers",
                                         lambda nid: self.cluster.live.get(nid), connector=connector)
            manager = self._broker_markers[broker_id] = TransactionMarkerChannelManager(channel, self.cluster)
        return manager

    # -- InitProducerId ----------------------------------------------------------------------------
    def init_producer_id(self, transactional_id: str, timeout_ms: int, expected_producer_id: int = -1,
                         expected_epoch: int = -1) -> ProducerIdAndEpoch:
        """Kafka's ``handleInitProducerId`` for a transactional id (KIP-360 epoch bump included)."""
        if not transactional_id:
            return ProducerIdAndEpoch(E.INVALID_REQUEST)
        if timeout_ms <= 0 or timeout_ms > self.config.transaction_max_timeout_ms:
            return ProducerIdAndEpoch(E.INVALID_TRANSACTION_TIMEOUT)
        now = self.now_ms()
        meta = self.txns.get(transactional_id)
        if meta is None:
            meta = TransactionMetadata(transactional_id, self.producer_ids.generate(), 0, timeout_ms,
                                       last_update_ms=now)
            self.txns[transactional_id] = meta
            self._persist(meta)
            return ProducerIdAndEpoch(E.NONE, meta.producer_id, meta.producer_epoch)
        if meta.state.is_completing:
            return ProducerIdAndEpoch(E.CONCURRENT_TRANSACTIONS)
        if expected_producer_id >= 0:
            if expected_producer_id not in (meta.producer_id, meta.last_producer_id) or \
                    expected_epoch not in (meta.producer_epoch, meta.last_producer_epoch):
                return ProducerIdAndEpoch(E.PRODUCER_FENCED)
            if meta.state == S.EMPTY and expected_epoch == meta.last_producer_epoch:
                return ProducerIdAndEpoch(E.NONE, meta.producer_id, meta.producer_epoch)  # a retried bump
        if meta.state == S.ONGOING:
            self._fence_and_abort(meta)  # an older instance's transaction: abort it, then the caller retries
            return ProducerIdAndEpoch(E.CONCURRENT_TRANSACTIONS)
        self._bump_epoch(meta)
        meta.timeout_ms = timeout_ms
        meta.partitions.clear()
        meta.groups.clear()
        meta.offsets_partitions.clear()
        meta.transition(S.EMPTY, now)
        self._persist(meta)
        return ProducerIdAndEpoch(E.NONE, meta.producer_id, meta.producer_epoch)

    def _fence_and_abort(self, meta: TransactionMetadata) -> None:
        """``prepareFenceProducerEpoch`` then abort: the old epoch can no longer write or commit.  The abort
        is the coordinator's own, so it is of the cluster's transaction version (Kafka: server TV)."""
        meta.client_version = self.transaction_version()
        meta.transition(S.PREPARE_EPOCH_FENCE, self.now_ms())
        if meta.producer_epoch < MAX_EPOCH:
            meta.last_producer_epoch = meta.producer_epoch
            meta.producer_epoch += 1
        self._begin_completion(meta, commit=False)

    # -- AddPartitionsToTxn / AddOffsetsToTxn ------------------------------------------------------
    def _check_producer(self, meta: TransactionMetadata | None, producer_id: int, epoch: int) -> ErrorCode:
        if meta is None or meta.producer_id != producer_id:
            return E.INVALID_PRODUCER_ID_MAPPING
        if meta.producer_epoch != epoch:
            return E.PRODUCER_FENCED
        if meta.state.is_completing:
            return E.CONCURRENT_TRANSACTIONS
        if meta.state == S.DEAD:
            return E.INVALID_PRODUCER_ID_MAPPING
        return E.NONE

    def add_partitions(self, transactional_id: str, producer_id: int, epoch: int,
                       partitions: Iterable[TopicPartition] = (), groups: Iterable[str] = (),
                       transaction_version: int = 0) -> ErrorCode:
        """Kafka's ``handleAddPartitionsToTransaction`` (and AddOffsetsToTxn's group).

        ``transaction_version`` 2: added implicitly for a KIP-890 part 2 client (by a partition leader for
        Produce v12+, AddPartitionsToTxn v4+ without ``verify_only``, or by TxnOffsetCommit v5+); the
        transaction then is of that version (Kafka's ``prepareAddPartitions``)."""
        meta = self.txns.get(transactional_id)
        err = self._check_producer(meta, producer_id, epoch)
        if err:
            return err
        assert meta is not None
        now = self.now_ms()
        new_parts = set(partitions) - meta.partitions
        new_groups = set(groups) - meta.groups
        if meta.state == S.ONGOING and not new_parts and not new_groups:
            return E.NONE
        if meta.state != S.ONGOING:
            meta.start_ms = now
        meta.partitions |= new_parts
        meta.groups |= new_groups
        meta.client_version = transaction_version
        meta.offsets_partitions.update(self._offsets_partition(g) for g in new_groups)
        meta.transition(S.ONGOING, now)
        self._persist(meta)
        return E.NONE

    def verify_partitions(self, transactional_id: str, producer_id: int, epoch: int,
                          partitions: Iterable[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        """KIP-890 part 1 (AddPartitionsToTxn ``verify_only``): is each partition in the open transaction?
        One that is not gets TRANSACTION_ABORTABLE (Kafka's ``handleVerifyPartitionsInTransaction``)."""
        meta = self.txns.get(transactional_id)
        err = self._check_producer(meta, producer_id, epoch)
        out = {}
        for tp in partitions:
            if err:
                out[tp] = err
            elif meta is not None and meta.state == S.ONGOING and tp in meta.partitions:
                out[tp] = E.NONE
            else:
                out[tp] = E.TRANSACTION_ABORTABLE
        return out

    def txn_offset_commit_allowed(self, transactional_id: str, producer_id: int, epoch: int, group_id: str
                                  ) -> ErrorCode:
        """Whether a TxnOffsetCommit belongs to an open transaction that added this group."""
        meta = self.txns.get(transactional_id)
        err = self._check_producer(meta, producer_id, epoch)
        if err:
            return err
        assert meta is not None
        if meta.state != S.ONGOING:
            return E.INVALID_TXN_STATE
        if group_id not in meta.groups:
            # A partition in the transaction that no known group maps to joined before a restart, which
            # forgot its group ids: a group of that partition belongs to the transaction.
            partition = self._offsets_partition(group_id)
            if partition not in meta.offsets_partitions or \
                    any(self._offsets_partition(g) == partition for g in meta.groups):
                return E.INVALID_TXN_STATE
            meta.groups.add(group_id)
        return E.NONE

    # -- EndTxn ----------------------------------------------------------------------------------------
    def end_transaction(self, transactional_id: str, producer_id: int, epoch: int, commit: bool,
                        bump_epoch: bool = False) -> ProducerIdAndEpoch:
        """Kafka's ``handleEndTransaction``: Ongoing → Prepare*, markers sent in the background.

        ``bump_epoch`` (EndTxn v5+, KIP-890 part 2): the epoch goes up with every EndTxn and the answer
        carries the new one; a retry with the previous epoch gets the same answer."""
        meta = self.txns.get(transactional_id)
        if meta is None:
            return ProducerIdAndEpoch(E.INVALID_PRODUCER_ID_MAPPING)
        done = S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT
        preparing = S.PREPARE_COMMIT if commit else S.PREPARE_ABORT
        if bump_epoch and meta.client_version >= 2 and epoch == meta.last_producer_epoch and \
                producer_id in (meta.producer_id, meta.last_producer_id) and meta.state in (done, preparing):
            code = E.NONE if meta.state == done else E.CONCURRENT_TRANSACTIONS
            return ProducerIdAndEpoch(code, meta.producer_id, meta.producer_epoch)
        if meta.producer_id != producer_id:
            return ProducerIdAndEpoch(E.INVALID_PRODUCER_ID_MAPPING)
        if meta.producer_epoch != epoch:
            return ProducerIdAndEpoch(E.PRODUCER_FENCED)
        state = meta.state
        if state == S.ONGOING or (bump_epoch and not commit and state in (S.EMPTY, S.COMPLETE_COMMIT,
                                                                           S.COMPLETE_ABORT)):
            meta.client_version = 2 if bump_epoch else 0  # Kafka's transactionVersionForEndTxn
            if bump_epoch:
                self._bump_epoch(meta)
            self._begin_completion(meta, commit)
            return ProducerIdAndEpoch(E.NONE, meta.producer_id, meta.producer_epoch)
        if state == done:
            return ProducerIdAndEpoch(E.NONE, meta.producer_id, meta.producer_epoch)  # a retried EndTxn
        if state == preparing:
            return ProducerIdAndEpoch(E.CONCURRENT_TRANSACTIONS)
        if state == S.PREPARE_EPOCH_FENCE:
            return ProducerIdAndEpoch(E.CONCURRENT_TRANSACTIONS)
        return ProducerIdAndEpoch(E.INVALID_TXN_STATE)

    # -- timers ------------------------------------------------------------------------------------------
    def abort_timed_out_transactions(self) -> list[str]:
        """Abort (under a bumped epoch) every Ongoing transaction older than its timeout."""
        now = self.now_ms()
        aborted = []
        for meta in list(self.txns.values()):
            if meta.state == S.ONGOING and meta.start_ms >= 0 and now > meta.start_ms + meta.timeout_ms:
                log.info("transaction %s (producer %d epoch %d) timed out after %d ms: aborting",
                         meta.transactional_id, meta.producer_id, meta.producer_epoch, meta.timeout_ms)
                self._fence_and_abort(meta)
                aborted.append(meta.transactional_id)
        return aborted

    def remove_expired_transactional_ids(self) -> list[str]:
        """Remove ids idle (Empty or Complete*) for ``transactional.id.expiration.ms``."""
        now = self.now_ms()
        horizon = self.config.transactional_id_expiration_ms
        removed = []
        for tid, meta in list(self.txns.items()):
            if meta.state in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT) and now - meta.last_update_ms >= horizon:
                meta.transition(S.DEAD, now)
                self.state.remove(tid)
                del self.txns[tid]
                removed.append(tid)
        if removed:
            log.info("removed %d expired transactional id(s)", len(removed))
        return removed

    # -- DescribeTransactions / ListTransactions ---------------------------------------------------------
    def describe(self, transactional_id: str) -> TransactionMetadata | None:
        return self.txns.get(transactional_id)

    def list_transactions(self, states: set[str] | None = None, producer_ids: set[int] | None = None,
                          min_duration_ms: int = -1, pattern: CompiledRegex | None = None,
                          broker_id: int | None = None) -> list[TransactionListing]:
        """Kafka's ``listTransactionStates``: the ids in one of ``states``, of one of ``producer_ids``, Ongoing
        for at least ``min_duration_ms`` and whose transactional id ``pattern`` fully matches (each filter
        applies when given), of the partitions loaded on ``broker_id`` (every loaded one without)."""
        now = self.now_ms()
        out = []
        for meta in self.txns.values():
            if broker_id is not None and self.coordinator_error(meta.transactional_id, broker_id):
                continue
            if pattern is not None and pattern.fullmatch(meta.transactional_id) is None:
                continue
            if states and meta.state.value not in states:
                continue
            if producer_ids and meta.producer_id not in producer_ids:
                continue
            if min_duration_ms >= 0 and (meta.state != S.ONGOING or meta.start_ms < 0
                                         or now - meta.start_ms < min_duration_ms):
                continue
            out.append(TransactionListing(meta.transactional_id, meta.producer_id, meta.state.value))
        return sorted(out, key=lambda t: t.transactional_id)


__all__ = ["TransactionCoordinator", "ProducerIdAndEpoch", "TransactionListing", "NO_PRODUCER_EPOCH"]
