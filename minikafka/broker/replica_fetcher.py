"""Follower side of replication: Kafka's ``ReplicaFetcherManager`` and ``ReplicaFetcherThread``.

A :class:`ReplicaFetcher` runs per (follower, leader) pair, as Kafka's
``AbstractFetcherThread`` does: it keeps a partition map of fetch states (the
fetch offset is the local log end offset), first truncates partitions that
just started following (OffsetForLeaderEpoch, Kafka's
``truncateToEpochEndOffsets``), then sends one Fetch request per round with
``replica_id`` = this broker's id (from Fetch v15 in ``replica_state``, with its broker epoch: KIP-903;
from v18 with each partition's high watermark: KIP-1166), through the client-side
:class:`~minikafka.client.fetch_session.FetchSessionHandler` (KIP-227
sessions), appends what it gets with ``Log.append_as_follower``, sets its high
watermark to min(leader HW, local LEO) and records the lag per partition
(leader HW - fetch position) and their max (``MaxLag``).

The request is built in :meth:`ReplicaFetcher.build_fetch` and the response
handled in :meth:`ReplicaFetcher.process_fetch_response`.  Follower-side
replication throttling (Kafka's ``ReplicaFetcherThread.shouldFollowerThrottle``):
a partition that is not caught up, is in this broker's follower throttled
replicas, is left out of the next request while the follower quota
(:class:`~minikafka.broker.quota.replication_quota_manager.ReplicationQuotaManager`)
is exceeded; the bytes of throttled partitions received are recorded into it.

Deliberate differences: Trio tasks in the broker's nursery instead of
threads; one fetcher per leader (``num.replica.fetchers`` = 1); partitions in
error are delayed by ``replica.fetch.backoff.ms`` and left to the controller
(the shared :class:`~minikafka.broker.metadata.ClusterMetadata`) to move.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Protocol

import trio

from ..client.connection import KafkaConnection
from ..client.fetch_session import HIGH_WATERMARK_UNKNOWN, FetchRequestData, FetchSessionHandler, PartitionData
from ..common import Node, TopicMetadata, TopicPartition
from ..protocol.api import ApiKey
from ..protocol.errors import ErrorCode
from ..protocol.exceptions import ProtocolError
from ..protocol.records import CorruptRecordError
from .broker_metrics import records_size
from .config import BrokerConfig
from .inter_broker import InterBrokerConnector
from .network_links import NetworkLinks
from .partition import Partition

log = logging.getLogger(__name__)


class LeaderDirectory(Protocol):
    """Where leaders are and what topics are called (the metadata a fetcher reads)."""

    live: dict[int, Node]

    def get_topic(self, name: str) -> TopicMetadata | None: ...

    def broker_epoch(self, broker_id: int) -> int: ...


class FollowerLog(Protocol):
    """The follower side of the replica manager."""

    def append_as_follower(self, part: Partition, records: bytes | memoryview) -> None: ...

    def rebuild_producer_state(self, part: Partition) -> None: ...

    def set_follower_high_watermark(self, part: Partition, leader_hw: int) -> None: ...


class FollowerQuota(Protocol):
    """The follower replication quota (Kafka's ``ReplicationQuotaManager`` for FollowerReplication)."""

    @property
    def limited(self) -> bool: ...

    def is_throttled(self, topic: str, partition: int) -> bool: ...

    def is_quota_exceeded(self) -> bool: ...

    def record(self, value: int) -> None: ...

OFFSET_FOR_LEADER_EPOCH_VERSION = 3  # the first with replica_id


@dataclass
class PartitionFetchState:
    """One partition in a fetcher's map (Kafka's ``PartitionFetchState``)."""

    part: Partition
    truncating: bool = True  # truncate via OffsetForLeaderEpoch before the first fetch
    delayed_until: float = 0.0  # trio time; set after an error (replica.fetch.backoff.ms)
    lag: int = 0  # leader high watermark - fetch position, after the last response
    in_sync: bool = False  # Kafka's isReplicaInSync: a response has shown lag 0

    @property
    def fetch_offset(self) -> int:
        return self.part.log.log_end_offset


class ReplicaFetcher:
    """Fetches from one leader for this broker (Kafka's ``ReplicaFetcherThread``)."""

    def __init__(self, node_id: int, leader_id: int, config: BrokerConfig, metadata: LeaderDirectory,
                 log: FollowerLog, quota: FollowerQuota, connector: InterBrokerConnector | None = None,
                 links: NetworkLinks | None = None) -> None:
        """``connector``: how to reach the leader's inter-broker listener (default plain TCP); ``links``: the
        cluster's injected failures (a paused broker fetches nothing and applies no fetched records)."""
        self.connector = connector
        self.links = links
        self.node_id = node_id
        self.leader_id = leader_id
        self.config = config
        self.metadata = metadata
        self.log = log
        self.quota = quota
        self.name = f"ReplicaFetcherThread-0-{leader_id}"
        self.partitions: dict[TopicPartition, PartitionFetchState] = {}
        # Fetch v7+ has sessions (KIP-227); a follower pinned below that sends full fetches.
        self.session = FetchSessionHandler(leader_id, use_sessions=config.replica_fetch_request_version >= 7)
        self.conn: KafkaConnection | None = None
        self.cancel_scope = trio.CancelScope()
        self._changed = trio.Event()
        self.rounds = 0
        self.throttled_skips = 0  # partitions left out of a request by the follower quota
        self.bytes_in = 0  # record bytes appended (Kafka's ReplicationBytesInPerSec)

    # -- the partition map -------------------------------------------------------
    def add_partition(self, part: Partition) -> None:
        self.partitions[TopicPartition(part.topic, part.index)] = PartitionFetchState(part)
        self._wake()

    def remove_partition(self, topic: str, index: int) -> bool:
        removed = self.partitions.pop(TopicPartition(topic, index), None) is not None
        if removed:
            self._wake()
        return removed

    def _wake(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    def max_lag(self) -> int:
        return max((st.lag for st in self.partitions.values()), default=0)

    # -- the loop (AbstractFetcherThread.doWork) ---------------------------------
    async def run(self) -> None:
        cfg = self.config
        with self.cancel_scope:
            try:
                while True:
                    if not self.partitions:
                        await self._changed.wait()
                        continue
                    await self._running()
                    try:
                        conn = await self._connection()
                        with trio.fail_after((cfg.replica_socket_timeout_ms + cfg.replica_fetch_wait_max_ms) / 1000):
                            await self.truncate(conn)
                            await self.fetch_once(conn)
                    except (OSError, ConnectionError, trio.BrokenResourceError, trio.ClosedResourceError,
                            trio.TooSlowError, LookupError, ProtocolError) as exc:  # ProtocolError: a bad response
                        log.info("%s (broker %d): error talking to leader %d: %r", self.name, self.node_id,
                                 self.leader_id, exc)
                        await self._recover(exc)
                    except Exception as exc:  # a bug: logged with its traceback, never takes the broker down
                        log.exception("%s (broker %d): unexpected error", self.name, self.node_id)
                        await self._recover(exc)
            finally:
                await self._close()

    async def _running(self) -> None:
        """Return once this broker is not paused."""
        if self.links is not None and self.links.active:
            await self.links.wait_running(self.node_id)

    async def _recover(self, exc: BaseException) -> None:
        await self._close()
        self.session.handle_error(exc)
        await trio.sleep(self.config.replica_fetch_backoff_ms / 1000)

    async def _connection(self) -> KafkaConnection:
        if self.conn is None:
            endpoint = self.metadata.live.get(self.leader_id)
            if endpoint is None:
                raise LookupError(f"leader {self.leader_id} is not live")
            client_id = f"broker-{self.node_id}-fetcher-{self.leader_id}"
            if self.connector is not None:
                self.conn = await self.connector.connect(endpoint.host, endpoint.port, client_id)
            else:
                self.conn = await KafkaConnection.connect(endpoint.host, endpoint.port, client_id=client_id)
        return self.conn

    async def _close(self) -> None:
        if self.conn is not None:
            conn, self.conn = self.conn, None
            with trio.CancelScope(shield=True):
                await conn.aclose()

    # -- truncation (Kafka's truncateToEpochEndOffsets) --------------------------
    async def truncate(self, conn: KafkaConnection) -> None:
        todo = {tp: st for tp, st in self.partitions.items() if st.truncating}
        if not todo:
            return
        topics: dict[str, list[dict]] = {}
        for tp, st in todo.items():
            topics.setdefault(tp.topic, []).append({
                "partition": tp.partition, "current_leader_epoch": st.part.leader_epoch,
                "leader_epoch": st.part.log.latest_epoch()})
        body = {"replica_id": self.node_id,
                "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()]}
        resp = await conn.request(ApiKey.OFFSET_FOR_LEADER_EPOCH, OFFSET_FOR_LEADER_EPOCH_VERSION, body)
        await self._running()
        now = trio.current_time()
        for t in resp.topics:
            for p in t.partitions:
                tp = TopicPartition(t.topic, p.partition)
                state = self.partitions.get(tp)
                if state is None or tp not in todo:
                    continue
                if p.error_code:
                    log.info("%s: OffsetForLeaderEpoch for %s-%d failed: %s", self.name, tp.topic, tp.partition,
                             ErrorCode(p.error_code).name)
                    state.delayed_until = now + self.config.replica_fetch_backoff_ms / 1000
                    continue
                self._truncate_partition(state, p.leader_epoch, p.end_offset)

    def _truncate_partition(self, st: PartitionFetchState, leader_epoch: int, leader_end: int) -> None:
        """Kafka ``AbstractFetcherThread.getOffsetTruncationState``, simplified."""
        lg = st.part.log
        local_epoch = lg.latest_epoch()
        if local_epoch < 0 or leader_epoch < 0:
            target = lg.high_watermark  # no epochs to compare: the pre-KIP-101 rule
        elif leader_epoch == local_epoch:
            target = min(leader_end, lg.log_end_offset)
        else:
            _, local_end = lg.end_offset_for_epoch(leader_epoch)
            target = min(leader_end, local_end if local_end >= 0 else lg.high_watermark)
        if target < lg.log_end_offset:
            log.info("broker %d: truncating %s-%d from %d to %d (leader epoch %d ends at %d)",
                     self.node_id, lg.topic, lg.partition, lg.log_end_offset, target, leader_epoch,
                     leader_end)
            lg.truncate_to(target)
            self.log.rebuild_producer_state(st.part)
        st.truncating = False

    # -- fetching (Kafka's buildFetch / processFetchRequest) ---------------------
    def build_fetch(self) -> tuple[FetchRequestData, dict[TopicPartition, int]] | None:
        """The next fetch through the session handler, and the offsets it asks for."""
        now = trio.current_time()
        cfg = self.config
        builder = self.session.new_builder()
        offsets: dict[TopicPartition, int] = {}
        quota = self.quota
        exceeded: bool | None = None  # checked once per request, when first needed
        for tp, st in self.partitions.items():
            if st.truncating or st.delayed_until > now:
                continue
            if quota.limited and not st.in_sync and quota.is_throttled(tp.topic, tp.partition):
                if exceeded is None:
                    exceeded = quota.is_quota_exceeded()
                if exceeded:
                    self.throttled_skips += 1
                    continue
            topic = self.metadata.get_topic(tp.topic)
            if topic is None:
                continue
            lg = st.part.log
            # From v18 the follower tells the leader the high watermark it knows (KIP-1166).
            hw = lg.high_watermark if cfg.replica_fetch_request_version >= 18 else HIGH_WATERMARK_UNKNOWN
            builder.add(tp, PartitionData(tp.topic, topic.topic_id, tp.partition, lg.log_end_offset,
                                          lg.log_start_offset, cfg.replica_fetch_max_bytes, st.part.leader_epoch,
                                          high_watermark=hw))
            offsets[tp] = lg.log_end_offset
        if not offsets:
            return None
        return builder.build(), offsets

    async def fetch_once(self, conn: KafkaConnection) -> None:
        cfg = self.config
        built = self.build_fetch()
        if built is None:
            with trio.move_on_after(cfg.replica_fetch_backoff_ms / 1000):
                await self._changed.wait()
            return
        data, offsets = built
        version = cfg.replica_fetch_request_version
        body = data.to_request(version, replica_id=self.node_id, max_wait_ms=cfg.replica_fetch_wait_max_ms,
                               min_bytes=cfg.replica_fetch_min_bytes, max_bytes=cfg.replica_fetch_response_max_bytes,
                               replica_epoch=self.metadata.broker_epoch(self.node_id))
        resp = await conn.request(ApiKey.FETCH, version, body)
        await self._running()  # a broker paused meanwhile applies it once it runs again
        self.rounds += 1
        if not self.session.handle_response(resp, version):
            await trio.sleep(cfg.replica_fetch_backoff_ms / 1000)
            return
        self.process_fetch_response(self.session.response_data(resp, version), offsets)

    def process_fetch_response(self, data: dict[TopicPartition, Any], offsets: dict[TopicPartition, int]) -> None:
        """Append, move the high watermark and record the lag of each returned partition."""
        now = trio.current_time()
        backoff = self.config.replica_fetch_backoff_ms / 1000
        quota = self.quota
        for tp, pd in data.items():
            st = self.partitions.get(tp)
            # Only if still fetched from the offset asked for (not removed or truncated meanwhile).
            if st is None or st.truncating or offsets.get(tp) != st.fetch_offset:
                continue
            lg = st.part.log
            code = pd.error_code
            if code == ErrorCode.NONE:
                records = pd.records
                size = records_size(records)
                if records and quota.is_throttled(tp.topic, tp.partition):
                    quota.record(size)
                if records:
                    try:
                        self.log.append_as_follower(st.part, records)
                    except CorruptRecordError as exc:
                        log.warning("%s: bad records for %s-%d at %d: %s", self.name, tp.topic, tp.partition,
                                    offsets[tp], exc)
                        st.delayed_until = now + backoff
                        continue
                    self.bytes_in += size
                self.log.set_follower_high_watermark(st.part, pd.high_watermark)
                st.lag = max(pd.high_watermark - lg.log_end_offset, 0)
                st.in_sync = st.lag == 0
            elif code == ErrorCode.OFFSET_OUT_OF_RANGE:
                if pd.log_start_offset > lg.log_end_offset:
                    lg.truncate_fully_and_start_at(pd.log_start_offset)
                else:
                    st.truncating = True
            else:
                log.info("%s: fetch of %s-%d failed: %s", self.name, tp.topic, tp.partition, ErrorCode(code).name)
                st.delayed_until = now + backoff


class ReplicaFetcherManager:
    """This broker's fetchers, one per leader (Kafka's ``ReplicaFetcherManager``)."""

    def __init__(self, node_id: int, config: BrokerConfig, metadata: LeaderDirectory, log: FollowerLog,
                 quota: FollowerQuota, connector: InterBrokerConnector | None = None,
                 links: NetworkLinks | None = None) -> None:
        self.connector = connector
        self.links = links
        self.node_id = node_id
        self.config = config
        self.metadata = metadata
        self.log = log
        self.quota = quota
        self.fetchers: dict[int, ReplicaFetcher] = {}
        self.nursery: trio.Nursery | None = None
        self.retired_bytes_in = 0  # bytes_in of the fetchers shut down

    def start(self, nursery: trio.Nursery) -> None:
        self.nursery = nursery
        for f in self.fetchers.values():
            nursery.start_soon(f.run)

    def add_partition(self, part: Partition, leader_id: int) -> None:
        fetcher = self.fetchers.get(leader_id)
        if fetcher is None:
            fetcher = self.fetchers[leader_id] = ReplicaFetcher(self.node_id, leader_id, self.config, self.metadata,
                                                                self.log, self.quota, self.connector, self.links)
            if self.nursery is not None:
                self.nursery.start_soon(fetcher.run)
        fetcher.add_partition(part)

    def remove_partition(self, part: Partition) -> None:
        for leader_id, fetcher in list(self.fetchers.items()):
            if fetcher.remove_partition(part.topic, part.index) and not fetcher.partitions:
                # Kafka's shutdownIdleFetcherThreads
                fetcher.cancel_scope.cancel()
                del self.fetchers[leader_id]
                self.retired_bytes_in += fetcher.bytes_in

    def has_partition(self, part: Partition) -> bool:
        tp = TopicPartition(part.topic, part.index)
        return any(tp in f.partitions for f in self.fetchers.values())

    def max_lag(self) -> int:
        """``kafka.server:type=ReplicaFetcherManager,name=MaxLag,clientId=Replica``."""
        return max((f.max_lag() for f in self.fetchers.values()), default=0)

    @property
    def replication_bytes_in(self) -> int:
        """Record bytes appended from leaders so far (Kafka's ``ReplicationBytesInPerSec`` count)."""
        return self.retired_bytes_in + sum(f.bytes_in for f in self.fetchers.values())

    def metrics(self) -> dict[str, float]:
        out: dict[str, float] = {"kafka.server:type=BrokerTopicMetrics,name=ReplicationBytesInPerSec":
                                 self.replication_bytes_in}
        if not self.fetchers:
            return out
        out["kafka.server:type=ReplicaFetcherManager,name=MaxLag,clientId=Replica"] = self.max_lag()
        for f in self.fetchers.values():
            for tp, st in f.partitions.items():
                out[f"kafka.server:type=FetcherLagMetrics,name=ConsumerLag,clientId={f.name},"
                    f"topic={tp.topic},partition={tp.partition}"] = st.lag
        return out

