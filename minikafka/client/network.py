"""Connections to a Kafka cluster for minikafka's clients (Kafka's ``NetworkClient`` + ``Metadata``).

* :class:`BrokerConnection`: one TCP connection with pipelined requests
  (responses matched by correlation id by a reader task), ApiVersions
  negotiation (each request goes at the highest version both sides support),
  and KIP-219 client-side throttling (after a response with
  ``throttle_time_ms`` the connection sends nothing more until it has passed).
* :class:`Metadata` (Kafka's client-side ``Metadata``): brokers, topics, topic ids, partition leaders and
  leader epochs from Metadata responses.
* :class:`NetworkClient`: connects by node id (or through the bootstrap
  servers), keeps the metadata fresh, and owns the reader tasks in its own
  nursery: use it as ``async with NetworkClient(...) as client``.

It speaks to any Kafka broker, not only minikafka's.
"""

from __future__ import annotations

import itertools
import logging
import random
import uuid
from typing import TYPE_CHECKING, Any, Callable

import trio

from ..common import Node, PartitionMetadata, TopicMetadata
from ..protocol.api import APIS, ApiKey
from ..protocol.errors import ErrorCode
from ..protocol.exceptions import ProtocolError
from ..protocol.throttling import client_throttles_itself
from .connection import KafkaConnection

if TYPE_CHECKING:  # SASL/TLS settings: imported by whoever passes them
    from .security_config import ClientSecurity

log = logging.getLogger(__name__)

BOOTSTRAP = -1


class KafkaClientError(Exception):
    """A request failed; ``code`` is the Kafka error code when there is one (as sent: maybe a plain int)."""

    def __init__(self, message: str, code: int | None = None, retriable: bool = True) -> None:
        super().__init__(message)
        self.code = code
        self.retriable = retriable


RETRIABLE = {
    ErrorCode.CORRUPT_MESSAGE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.LEADER_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.REQUEST_TIMED_OUT, ErrorCode.NETWORK_EXCEPTION,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR,
    ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.KAFKA_STORAGE_ERROR,
    ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.OFFSET_NOT_AVAILABLE,
    ErrorCode.UNSTABLE_OFFSET_COMMIT, ErrorCode.THROTTLING_QUOTA_EXCEEDED, ErrorCode.REBALANCE_IN_PROGRESS,
    ErrorCode.SHARE_SESSION_NOT_FOUND, ErrorCode.INVALID_SHARE_SESSION_EPOCH, ErrorCode.SHARE_SESSION_LIMIT_REACHED,
    ErrorCode.UNKNOWN_TOPIC_ID,
}


def is_retriable(code: int) -> bool:
    return code in RETRIABLE


class BrokerConnection:
    """One connection to one broker, with pipelining and version negotiation."""

    def __init__(self, node_id: int, host: str, port: int, client_id: str, request_timeout_ms: int,
                 security: ClientSecurity | None = None) -> None:
        self.node_id = node_id
        self.host = host
        self.port = port
        self.client_id = client_id
        self.security = security  # None: PLAINTEXT
        self.request_timeout_s = request_timeout_ms / 1000
        self.conn: KafkaConnection | None = None
        self.api_versions: dict[int, tuple[int, int]] = {}
        self._pending: dict[int, tuple[int, int, Any]] = {}  # a channel or a _CompletionHandler
        self._corr = itertools.count(1)
        self._send_lock = trio.Lock()
        self._throttle_until = 0.0
        self.closed = False
        self.throttle_time_ms_total = 0

    async def open(self, nursery: trio.Nursery) -> None:
        if self.security is None:
            self.conn = await KafkaConnection.connect(self.host, self.port, self.client_id)
        else:  # TLS handshake and SASL authentication first
            self.conn = await self.security.connect(self.host, self.port, self.client_id)
        nursery.start_soon(self._reader)
        resp = await self.request(ApiKey.API_VERSIONS, {"client_software_name": "minikafka",
                                                        "client_software_version": "0.1"}, version=3)
        if resp.error_code == ErrorCode.UNSUPPORTED_VERSION:
            resp = await self.request(ApiKey.API_VERSIONS, {}, version=0)
        if resp.error_code:
            raise KafkaClientError(f"ApiVersions failed: {ErrorCode(resp.error_code).name}", resp.error_code)
        self.api_versions = {a.api_key: (a.min_version, a.max_version) for a in resp.api_keys}

    def pick_version(self, api_key: int, max_version: int | None = None) -> int:
        """The highest version both sides support (optionally capped)."""
        api = APIS[api_key]
        lo, hi = api.min_version, api.max_version if max_version is None else min(api.max_version, max_version)
        if api_key in self.api_versions:
            blo, bhi = self.api_versions[api_key]
            lo, hi = max(lo, blo), min(hi, bhi)
        elif self.api_versions:
            raise KafkaClientError(f"broker {self.node_id} does not support {api.name}", retriable=False)
        if lo > hi:
            raise KafkaClientError(f"no common version of {api.name} with broker {self.node_id}", retriable=False)
        return hi

    async def request(self, api_key: int, body: dict | None = None, *, version: int | None = None,
                      expect_response: bool = True) -> Any:
        """Send a request and wait for its response (None when none is expected, e.g. acks=0)."""
        pending = await self.start_request(api_key, body, version=version, expect_response=expect_response)
        return await pending.wait()

    async def start_request(self, api_key: int, body: dict | None = None, *, version: int | None = None,
                            expect_response: bool = True) -> "PendingResponse":
        """Send a request now and return a handle to await its response later.

        Requests are written in the order ``start_request`` is called, so a caller that
        must keep several requests ordered on the wire (the producer's Sender with
        idempotence) sends them one after the other and awaits the responses elsewhere.
        """
        if self.closed or self.conn is None:
            raise KafkaClientError(f"connection to broker {self.node_id} is closed")
        if version is None:
            version = self.pick_version(api_key)
        send, recv = trio.open_memory_channel(1)
        corr = await self._send(api_key, body, version, send if expect_response else None)
        return PendingResponse(self, api_key, version, corr, recv if expect_response else None)

    async def send_request(self, api_key: int, body: dict | None, *, version: int,
                           on_response: Callable[[Any], None]) -> int:
        """Send a request now; the connection's reader calls ``on_response`` with the response, or with the
        :class:`KafkaClientError` that failed it, as soon as it arrives: no task waits for it (Java's
        ``RequestCompletionHandler``; the producer's Sender).  Returns the correlation id.  Timeouts are the
        caller's, as in Java's ``NetworkClient`` poll loop: :meth:`cancel_request` one that took too long."""
        if self.closed or self.conn is None:
            raise KafkaClientError(f"connection to broker {self.node_id} is closed")
        return await self._send(api_key, body, version, _CompletionHandler(self, api_key, version, on_response))

    def cancel_request(self, corr: int) -> bool:
        """Forget a request sent with :meth:`send_request` (it timed out): its response, if it still comes, is
        dropped and ``on_response`` is not called.  False when it already completed."""
        return self._pending.pop(corr, None) is not None

    async def _send(self, api_key: int, body: dict | None, version: int, sink: Any) -> int:
        """Write one request (in the order of the calls) and register ``sink`` (a channel, a handler, or None
        when no response is expected) for its response; returns the correlation id."""
        assert self.conn is not None
        now = trio.current_time()
        if now < self._throttle_until:
            await trio.sleep_until(self._throttle_until)  # KIP-219: back off a throttled connection
        lock = self._send_lock
        try:
            lock.acquire_nowait()  # uncontended (the usual case): no trip through the scheduler
        except trio.WouldBlock:
            await lock.acquire()
        try:
            corr = next(self._corr)
            if sink is not None:
                self._pending[corr] = (api_key, version, sink)
            try:
                await self.conn.send_segments(self.conn.encode_request_segments(api_key, version, body, corr))
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
                self._pending.pop(corr, None)
                self.closed = True
                raise KafkaClientError(f"send to broker {self.node_id} failed: {exc}") from exc
        finally:
            lock.release()
        return corr

    def settle(self, api_key: int, version: int, result: Any) -> Any:
        """A response as its requester sees it: the error of a failed one as a :class:`KafkaClientError`
        (returned, not raised), and KIP-219 throttling noted from ``throttle_time_ms``."""
        if isinstance(result, BaseException):
            err = KafkaClientError(f"broker {self.node_id}: {result}")
            err.__cause__ = result
            return err
        throttle = getattr(result, "throttle_time_ms", 0) or 0
        if throttle > 0:
            self.throttle_time_ms_total += throttle
            if client_throttles_itself(api_key, version):
                self._throttle_until = max(self._throttle_until, trio.current_time() + throttle / 1000)
        return result

    @property
    def throttled_until(self) -> float:
        """Trio time until which KIP-219 throttling keeps this connection quiet."""
        return self._throttle_until

    async def _reader(self) -> None:
        assert self.conn is not None
        try:
            while True:
                frame = await self.conn.receive_frame()
                if frame is None:
                    raise ConnectionError("broker closed the connection")
                corr = int.from_bytes(frame[:4], "big", signed=True)
                entry = self._pending.pop(corr, None)
                if entry is None:
                    log.debug("response for unknown correlation id %d from broker %d", corr, self.node_id)
                    continue
                api_key, version, send = entry
                try:
                    _, resp = self.conn.decode_response(api_key, version, frame)
                except ProtocolError as exc:  # a response we cannot parse fails that request only
                    resp = exc
                send.send_nowait(resp)
        except (trio.BrokenResourceError, trio.ClosedResourceError, ConnectionError, OSError) as exc:
            self._fail_all(exc)
        except trio.Cancelled:
            self._fail_all(ConnectionError("connection closed"))
            raise

    def _fail_all(self, exc: BaseException) -> None:
        self.closed = True
        for _, _, send in self._pending.values():
            try:
                send.send_nowait(exc)
            except trio.WouldBlock:
                pass
        self._pending.clear()

    async def aclose(self) -> None:
        self.closed = True
        if self.conn is not None:
            with trio.CancelScope(shield=True):
                await self.conn.aclose()
        self._fail_all(ConnectionError("connection closed"))


class PendingResponse:
    """A request already sent on a :class:`BrokerConnection`; ``await wait()`` for its response."""

    def __init__(self, conn: BrokerConnection, api_key: int, version: int, corr: int,
                 recv: trio.MemoryReceiveChannel | None) -> None:
        self.conn = conn
        self.api_key = api_key
        self.version = version
        self.corr = corr
        self._recv = recv

    async def wait(self) -> Any:
        """The response (None when none is expected); KafkaClientError on timeout or disconnect."""
        conn = self.conn
        if self._recv is None:
            return None
        with trio.move_on_after(conn.request_timeout_s) as scope:
            result = await self._recv.receive()
        if scope.cancelled_caught:
            conn._pending.pop(self.corr, None)
            raise KafkaClientError(f"request {APIS[self.api_key].name} to broker {conn.node_id} timed out",
                                   ErrorCode.REQUEST_TIMED_OUT)
        result = conn.settle(self.api_key, self.version, result)
        if isinstance(result, KafkaClientError):
            raise result
        return result


class _CompletionHandler:
    """Stands where a pending request's channel would (the reader and ``_fail_all`` call ``send_nowait``) and
    hands the settled response to a function at once."""

    __slots__ = ("conn", "api_key", "version", "fn")

    def __init__(self, conn: BrokerConnection, api_key: int, version: int, fn: Callable[[Any], None]) -> None:
        self.conn = conn
        self.api_key = api_key
        self.version = version
        self.fn = fn

    def send_nowait(self, result: Any) -> None:
        try:
            self.fn(self.conn.settle(self.api_key, self.version, result))
        except Exception:  # the requester's code must not stop the connection's reader
            log.exception("handling a %s response failed", APIS[self.api_key].name)


class Metadata:
    """What a client knows of the cluster (Kafka's client-side ``Metadata``)."""

    def __init__(self) -> None:
        self.brokers: dict[int, Node] = {}
        self.topics: dict[str, TopicMetadata] = {}
        self.cluster_id: str | None = None
        self.controller_id = -1
        self.version = 0

    def update_from(self, resp: Any, requested: list[str] | None) -> None:
        self.brokers = {b.node_id: Node(b.node_id, b.host, b.port, b.rack) for b in resp.brokers}
        self.cluster_id = resp.cluster_id
        self.controller_id = resp.controller_id
        seen = set()
        for t in resp.topics:
            if t.name is None:
                continue
            seen.add(t.name)
            partitions = sorted((PartitionMetadata(p.partition_index, p.leader_id, p.leader_epoch,
                                                   list(p.replica_nodes), list(p.isr_nodes), p.error_code)
                                 for p in t.partitions), key=lambda p: p.partition)
            self.topics[t.name] = TopicMetadata(t.name, t.topic_id, partitions, error=t.error_code)
        if requested is None:  # a full refresh: forget topics that are gone
            for name in set(self.topics) - seen:
                del self.topics[name]
        self.version += 1

    def leader_for(self, topic: str, partition: int) -> int | None:
        info = self.topics.get(topic)
        p = info.partition(partition) if info else None
        if p is None or p.leader < 0 or p.error not in (0, ErrorCode.REPLICA_NOT_AVAILABLE):
            return None
        return p.leader

    def partitions_for(self, topic: str) -> list[int]:
        info = self.topics.get(topic)
        return [p.partition for p in info.partitions] if info and not info.error else []

    def topic_id(self, topic: str) -> uuid.UUID | None:
        info = self.topics.get(topic)
        return info.topic_id if info else None

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        for info in self.topics.values():
            if info.topic_id == topic_id:
                return info.name
        return None


class NetworkClient:
    """Connections by node id plus cluster metadata; ``async with`` owns the reader tasks."""

    def __init__(self, bootstrap_servers: str | list[str], client_id: str = "minikafka",
                 request_timeout_ms: int = 30000, metadata_max_age_ms: int = 300000,
                 retry_backoff_ms: int = 100, security: ClientSecurity | None = None) -> None:
        if isinstance(bootstrap_servers, str):
            bootstrap_servers = [s.strip() for s in bootstrap_servers.split(",") if s.strip()]
        self.bootstrap = [(h, int(p)) for h, _, p in (s.rpartition(":") for s in bootstrap_servers)]
        self.client_id = client_id
        self.security = security  # None: PLAINTEXT connections
        self.request_timeout_ms = request_timeout_ms
        self.metadata_max_age_s = metadata_max_age_ms / 1000
        self.retry_backoff_s = retry_backoff_ms / 1000
        self.metadata = Metadata()
        self._connections: dict[int, BrokerConnection] = {}
        self._connecting: dict[int, trio.Lock] = {}
        self._metadata_lock = trio.Lock()
        self._last_metadata = -1e9
        self._wanted_topics: set[str] = set()
        self._nursery: trio.Nursery | None = None
        self._nursery_cm: Any = None

    async def __aenter__(self) -> "NetworkClient":
        self._nursery_cm = trio.open_nursery()
        self._nursery = await self._nursery_cm.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> bool | None:
        await self.close()
        assert self._nursery is not None
        self._nursery.cancel_scope.cancel()
        return await self._nursery_cm.__aexit__(*exc)

    async def close(self) -> None:
        for c in list(self._connections.values()):
            await c.aclose()
        self._connections.clear()

    @property
    def nursery(self) -> trio.Nursery:
        assert self._nursery is not None, "use NetworkClient as `async with`"
        return self._nursery

    async def connection(self, node_id: int) -> BrokerConnection:
        """The open connection to ``node_id`` (BOOTSTRAP: any reachable bootstrap server)."""
        conn = self._connections.get(node_id)
        if conn is not None and not conn.closed:
            return conn
        lock = self._connecting.setdefault(node_id, trio.Lock())
        async with lock:
            conn = self._connections.get(node_id)
            if conn is not None and not conn.closed:
                return conn
            if node_id == BOOTSTRAP:
                targets = list(self.bootstrap)
                random.shuffle(targets)
            else:
                if node_id not in self.metadata.brokers:
                    await self.refresh_metadata(force=True)
                if node_id not in self.metadata.brokers:
                    raise KafkaClientError(f"unknown broker {node_id}")
                _, host, port, _ = self.metadata.brokers[node_id]
                targets = [(host, port)]
            last: Exception | None = None
            for host, port in targets:
                conn = BrokerConnection(node_id, host, port, self.client_id, self.request_timeout_ms, self.security)
                try:
                    await conn.open(self.nursery)
                except (OSError, KafkaClientError, ConnectionError) as exc:
                    last = exc
                    await conn.aclose()
                    continue
                self._connections[node_id] = conn
                return conn
            raise KafkaClientError(f"cannot connect to {'bootstrap servers' if node_id == BOOTSTRAP else node_id}: "
                                   f"{last}")

    async def any_connection(self) -> BrokerConnection:
        for nid, conn in self._connections.items():
            if not conn.closed:
                return conn
        if self.metadata.brokers:
            for nid in self.metadata.brokers:
                try:
                    return await self.connection(nid)
                except KafkaClientError:
                    continue
        return await self.connection(BOOTSTRAP)

    async def request(self, node_id: int, api_key: int, body: dict | None = None, **kw: Any) -> Any:
        conn = await self.connection(node_id)
        return await conn.request(api_key, body, **kw)

    def want_topics(self, topics: list[str]) -> None:
        self._wanted_topics.update(topics)

    async def refresh_metadata(self, topics: list[str] | None = None, *, force: bool = False,
                               allow_auto_create: bool = True) -> Metadata:
        """Fetch metadata for the wanted topics (plus ``topics``), at most once per backoff unless forced."""
        if topics:
            self._wanted_topics.update(topics)
        async with self._metadata_lock:
            now = trio.current_time()
            if not force and now - self._last_metadata < self.retry_backoff_s and not topics:
                return self.metadata
            conn = await self.any_connection()
            wanted = sorted(self._wanted_topics)
            version = conn.pick_version(ApiKey.METADATA)
            body = {"topics": [{"name": t} for t in wanted], "allow_auto_topic_creation": allow_auto_create}
            resp = await conn.request(ApiKey.METADATA, body, version=version)
            self.metadata.update_from(resp, wanted)
            self._last_metadata = trio.current_time()
            return self.metadata

    async def leader(self, topic: str, partition: int, *, attempts: int = 20) -> int:
        """The partition's leader, refreshing metadata (with backoff) until one is known."""
        for _ in range(attempts):
            leader = self.metadata.leader_for(topic, partition)
            if leader is not None:
                return leader
            await self.refresh_metadata([topic], force=True)
            leader = self.metadata.leader_for(topic, partition)
            if leader is not None:
                return leader
            await trio.sleep(self.retry_backoff_s)
        raise KafkaClientError(f"no leader for {topic}-{partition}", ErrorCode.LEADER_NOT_AVAILABLE)

    def invalidate(self, node_id: int | None = None) -> None:
        """Mark metadata stale (after NOT_LEADER and similar); drop a broken connection."""
        self._last_metadata = -1e9
        if node_id is not None:
            conn = self._connections.pop(node_id, None)
            if conn is not None:
                self.nursery.start_soon(conn.aclose)
