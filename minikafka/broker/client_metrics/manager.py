"""The broker side of KIP-714 (Kafka's ``ClientMetricsManager`` with ``ClientMetricsInstance``).

GetTelemetrySubscriptions: a client sends a zero ``client_instance_id`` the first time and is given a new one;
the broker matches the client (its instance id, client id, software name and version from its ApiVersions
request, source address and port) against every subscription
(:mod:`~minikafka.broker.client_metrics.configs`) and answers the union of the matching subscriptions'
metric prefixes (only ``*`` when one asks for all), the lowest of their push intervals (300000 without a
match), a ``subscription_id`` that is a CRC32C of that set and interval XORed with the instance id's hash,
the codecs it accepts (zstd, lz4, gzip, snappy), ``telemetry.max.bytes`` and delta temporality.

PushTelemetry is checked as Kafka checks it, in this order: a zero instance id is INVALID_REQUEST; after a
terminating push anything more is INVALID_REQUEST; a push sooner than the push interval after the previous
one (the first push after GetTelemetrySubscriptions is always allowed, clients jitter it) is
THROTTLING_QUOTA_EXCEEDED unless it is the terminating one; a subscription id that is not the client's
current one (subscriptions changed) is UNKNOWN_SUBSCRIPTION_ID; an unknown codec is
UNSUPPORTED_COMPRESSION_TYPE; a payload larger than ``telemetry.max.bytes`` is TELEMETRY_TOO_LARGE; a payload
that does not decode is INVALID_RECORD.  A GetTelemetrySubscriptions sooner than the push interval after the
client's last request is THROTTLING_QUOTA_EXCEEDED too, unless its last push failed with
UNKNOWN_SUBSCRIPTION_ID or UNSUPPORTED_COMPRESSION_TYPE (Kafka's intent; Kafka 3.9's condition throttles
those as well).  When subscriptions change, each client's instance is re-evaluated on its next request.

Client instances are per broker (a client talks to one broker at a time), in an LRU cache of
``CLIENT_METRICS_INSTANCE_CACHE_SIZE`` (16384, Kafka's ``CACHE_MAX_SIZE``) entries; they are forgotten when every
connection that used them has closed (minikafka remembers all the instances of a connection; Kafka's
``clientConnectionIdMap`` remembers its last one only), after ``max(60 s, 3 push intervals)`` without a request, as
Kafka's expiration timer, or when the cache is full and they are the least recently used.  Expiry takes instances
off a deadline heap (:class:`~minikafka.broker.client_metrics.cache.ExpiringLruCache`): no request scans the cache.
Pushed metrics go to the :class:`~minikafka.broker.client_metrics.receiver.ClientTelemetryStore`, decompressed to
:func:`~minikafka.broker.client_metrics.receiver.max_decompressed_bytes` of ``telemetry.max.bytes`` at most.

The client software name and version come from the connection's
:class:`~minikafka.broker.request.ClientInformation` (Kafka's), which the ApiVersions handler fills in.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field


from ...common import Clock
from ...protocol.compression import CODEC_NAMES
from ...protocol.errors import ErrorCode
from ...protocol.records import crc32c
from ...protocol.types import ZERO_UUID
from ..request import RequestContext
from .cache import ExpiringLruCache
from .configs import (ALL_SUBSCRIBED_METRICS, CLIENT_ID, CLIENT_INSTANCE_ID, CLIENT_SOFTWARE_NAME,
                      CLIENT_SOFTWARE_VERSION, CLIENT_SOURCE_ADDRESS, CLIENT_SOURCE_PORT, DEFAULT_INTERVAL_MS,
                      ClientMetricsConfigStore)
from .receiver import (CACHE_EXPIRY_MS, ClientIdentity, ClientTelemetryStore, TelemetryDecodeError, kafka_uuid_str,
                       max_decompressed_bytes)

log = logging.getLogger(__name__)

# Kafka's CompressionType ids in the order Kafka prefers them: zstd, lz4, gzip, snappy.
SUPPORTED_COMPRESSION_TYPES = [4, 3, 1, 2]
METADATA_TOPIC_ID = uuid.UUID(int=1)
RESERVED_UUIDS = frozenset({ZERO_UUID, METADATA_TOPIC_ID})  # Kafka's Uuid.RESERVED
#: Kafka's ClientMetricsManager.CACHE_MAX_SIZE: the client instances a broker keeps (LRU).
CLIENT_METRICS_INSTANCE_CACHE_SIZE = 16384


class TelemetryError(Exception):
    """A GetTelemetrySubscriptions or PushTelemetry answered with an error code."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


def java_uuid_hash(value: uuid.UUID) -> int:
    """Kafka's ``Uuid.hashCode()`` (a signed int32)."""
    msb, lsb = value.int >> 64, value.int & (2**64 - 1)
    h = msb ^ lsb
    return _int32((h >> 32) ^ (h & 0xFFFFFFFF))


def _int32(n: int) -> int:
    n &= 0xFFFFFFFF
    return n - 2**32 if n >= 2**31 else n


def compute_subscription_id(metrics: list[str], push_interval_ms: int, client_instance_id: uuid.UUID) -> int:
    """Kafka's ``computeSubscriptionId``: CRC32C of the metric set and the interval, XOR the id's hash
    (the set printed sorted, where Kafka prints its HashSet's order)."""
    data = ("[" + ", ".join(sorted(metrics)) + "]" + str(push_interval_ms)).encode()
    return _int32(crc32c(data)) ^ java_uuid_hash(client_instance_id)


def split_peer(peer: str) -> tuple[str | None, str | None]:
    """(address, port) of a ``host:port`` / ``[v6]:port`` peer."""
    if not peer or peer == "?":
        return None, None
    if peer.startswith("["):
        host, _, rest = peer[1:].partition("]")
        return host, rest.lstrip(":") or None
    host, sep, port = peer.rpartition(":")
    return (host, port) if sep and port.isdigit() else (peer, None)


@dataclass
class ClientMetricsInstance:
    """One client instance's subscription and request times (Kafka's ``ClientMetricsInstance``)."""

    identity: ClientIdentity
    attributes: dict[str, str | None]
    subscription_id: int
    subscription_version: int
    metrics: list[str]
    push_interval_ms: int
    last_get_ms: int = 0
    last_push_ms: int = 0
    last_request_ms: int = 0
    terminating: bool = False
    last_error: ErrorCode = ErrorCode.NONE
    connection_ids: set[str] = field(default_factory=set)

    def maybe_update_get_request_timestamp(self, now_ms: int) -> bool:
        if now_ms - max(self.last_get_ms, self.last_push_ms) >= self.push_interval_ms:
            self.last_get_ms = now_ms
            return True
        return False

    def maybe_update_push_request_timestamp(self, now_ms: int) -> bool:
        # The first push after a GetTelemetrySubscriptions is accepted early: clients jitter it.
        can_accept = self.last_get_ms > self.last_push_ms or now_ms - self.last_push_ms >= self.push_interval_ms
        if can_accept:
            self.last_push_ms = now_ms
        return can_accept

    @property
    def expiry_ms(self) -> int:
        return max(CACHE_EXPIRY_MS, 3 * self.push_interval_ms)


class ClientMetricsManager:
    """One broker's client metrics instances, answering GetTelemetrySubscriptions and PushTelemetry."""

    def __init__(self, subscriptions: ClientMetricsConfigStore, receiver: ClientTelemetryStore,
                 telemetry_max_bytes: int, clock: Clock,
                 cache_size: int = CLIENT_METRICS_INSTANCE_CACHE_SIZE) -> None:
        self.subscriptions = subscriptions
        self.receiver = receiver
        self.telemetry_max_bytes = telemetry_max_bytes
        self.clock = clock
        self.instances: ExpiringLruCache[uuid.UUID, ClientMetricsInstance] = ExpiringLruCache(
            cache_size, self._forget_connections)
        self.subscription_version = 0
        self._connections: dict[str, set[uuid.UUID]] = {}  # connection id -> the instances it used
        # Kafka's client-metrics sensors.
        self.throttle_count = 0
        self.unknown_subscription_requests = 0
        subscriptions.listeners.append(self._subscriptions_changed)

    def close(self) -> None:
        if self._subscriptions_changed in self.subscriptions.listeners:
            self.subscriptions.listeners.remove(self._subscriptions_changed)

    def _subscriptions_changed(self, name: str) -> None:
        self.subscription_version += 1

    @property
    def max_decompressed_bytes(self) -> int:
        """What a pushed payload may decompress to (refused as INVALID_RECORD beyond it)."""
        return max_decompressed_bytes(self.telemetry_max_bytes)

    # -- the connection's lifetime ------------------------------------------------------------------
    def connection_closed(self, connection_id: str) -> None:
        """Kafka's ``ClientConnectionDisconnectListener``: forget the client instances of the connection
        (those that no other open connection used)."""
        for instance_id in self._connections.pop(connection_id, ()):
            instance = self.instances.get(instance_id)
            if instance is not None:
                instance.connection_ids.discard(connection_id)
                if not instance.connection_ids:
                    self.instances.pop(instance_id)

    def _forget_connections(self, instance_id: uuid.UUID, instance: ClientMetricsInstance) -> None:
        """An instance expired or was evicted: its connections no longer hold it."""
        for conn in instance.connection_ids:
            ids = self._connections.get(conn)
            if ids is not None:
                ids.discard(instance_id)
                if not ids:
                    del self._connections[conn]

    # -- instances ----------------------------------------------------------------------------------
    def _identity(self, instance_id: uuid.UUID, ctx: RequestContext) -> ClientIdentity:
        info = ctx.client_information
        name: str | None = None
        version: str | None = None
        if info is not None and (info.software_name or info.software_version):
            name, version = info.software_name, info.software_version
        address, port = split_peer(ctx.peer)
        return ClientIdentity(instance_id, ctx.client_id or "", name, version, address, port)

    def _new_instance_id(self) -> uuid.UUID:
        while True:
            candidate = uuid.uuid4()
            if candidate not in RESERVED_UUIDS and candidate not in self.instances:
                return candidate

    def _create(self, identity: ClientIdentity) -> ClientMetricsInstance:
        """Kafka's ``createClientInstance``: the union of the matching subscriptions."""
        attributes: dict[str, str | None] = {
            CLIENT_INSTANCE_ID: kafka_uuid_str(identity.client_instance_id), CLIENT_ID: identity.client_id,
            CLIENT_SOFTWARE_NAME: identity.client_software_name,
            CLIENT_SOFTWARE_VERSION: identity.client_software_version,
            CLIENT_SOURCE_ADDRESS: identity.client_source_address, CLIENT_SOURCE_PORT: identity.client_source_port}
        interval = DEFAULT_INTERVAL_MS
        metrics: set[str] = set()
        everything = False
        for info in self.subscriptions.subscriptions():
            if info.matches(attributes):
                everything = everything or ALL_SUBSCRIBED_METRICS in info.metrics
                metrics |= info.metrics
                interval = min(interval, info.interval_ms)
        if everything:
            metrics = {ALL_SUBSCRIBED_METRICS}
        chosen = sorted(metrics)
        return ClientMetricsInstance(identity, attributes,
                                     compute_subscription_id(chosen, interval, identity.client_instance_id),
                                     self.subscription_version, chosen, interval)

    def _instance(self, instance_id: uuid.UUID, ctx: RequestContext, now_ms: int) -> ClientMetricsInstance:
        """The client's instance, created (or re-evaluated after a subscription change) as needed; the most
        recently used, expiring ``expiry_ms`` from now."""
        self.instances.expire(now_ms)
        instance = self.instances.get(instance_id)
        if instance is None:
            instance = self._create(self._identity(instance_id, ctx))
            self.instances.put(instance_id, instance, now_ms + instance.expiry_ms)
        elif instance.subscription_version < self.subscription_version:
            renewed = self._create(instance.identity)
            renewed.connection_ids = instance.connection_ids
            instance = renewed
            self.instances.put(instance_id, instance, now_ms + instance.expiry_ms)
        else:
            self.instances.touch(instance_id, now_ms + instance.expiry_ms)
        instance.last_request_ms = now_ms
        if ctx.connection_id not in instance.connection_ids:
            instance.connection_ids.add(ctx.connection_id)
            self._connections.setdefault(ctx.connection_id, set()).add(instance_id)
        return instance

    # -- the two requests ---------------------------------------------------------------------------
    def get_telemetry_subscriptions(self, ctx: RequestContext, client_instance_id: uuid.UUID
                                    ) -> tuple[uuid.UUID, ClientMetricsInstance]:
        """Kafka's ``processGetTelemetrySubscriptionRequest``: the (possibly new) instance id and its
        instance; TelemetryError THROTTLING_QUOTA_EXCEEDED when asked too soon."""
        now = self.clock.time_ms()
        instance_id = client_instance_id if client_instance_id != ZERO_UUID else self._new_instance_id()
        instance = self._instance(instance_id, ctx, now)
        if (not instance.maybe_update_get_request_timestamp(now)
                and instance.last_error not in (ErrorCode.UNKNOWN_SUBSCRIPTION_ID,
                                                ErrorCode.UNSUPPORTED_COMPRESSION_TYPE)):
            self.throttle_count += 1
            raise TelemetryError(ErrorCode.THROTTLING_QUOTA_EXCEEDED,
                                 f"Request from the client [{kafka_uuid_str(instance_id)}] arrived before the next "
                                 "push interval time")
        if instance.last_error != ErrorCode.NONE:
            instance.last_get_ms = now
        instance.last_error = ErrorCode.NONE
        return instance_id, instance

    def push_telemetry(self, ctx: RequestContext, client_instance_id: uuid.UUID, subscription_id: int,
                       terminating: bool, compression_type: int, metrics: bytes) -> None:
        """Kafka's ``processPushTelemetryRequest``; TelemetryError with the error code on failure."""
        if client_instance_id in RESERVED_UUIDS:
            raise TelemetryError(ErrorCode.INVALID_REQUEST,
                                 f"Invalid request from the client [{kafka_uuid_str(client_instance_id)}], invalid "
                                 "client instance id")
        now = self.clock.time_ms()
        instance = self._instance(client_instance_id, ctx, now)
        try:
            self._validate_push(instance, subscription_id, terminating, compression_type, metrics, now)
        except TelemetryError as exc:
            instance.last_error = exc.code
            raise
        finally:
            instance.terminating = terminating
        if metrics:
            try:
                self.receiver.export(instance.identity, compression_type, metrics, terminating=terminating,
                                     push_interval_ms=instance.push_interval_ms,
                                     max_size=self.max_decompressed_bytes)
            except TelemetryDecodeError as exc:
                instance.last_error = ErrorCode.INVALID_RECORD
                log.warning("cannot export the metrics of client instance %s: %s",
                            kafka_uuid_str(client_instance_id), exc)
                raise TelemetryError(ErrorCode.INVALID_RECORD, str(exc)) from None
        instance.last_error = ErrorCode.NONE

    def _validate_push(self, instance: ClientMetricsInstance, subscription_id: int, terminating: bool,
                       compression_type: int, metrics: bytes, now: int) -> None:
        who = kafka_uuid_str(instance.identity.client_instance_id)
        if instance.terminating:
            raise TelemetryError(ErrorCode.INVALID_REQUEST,
                                 f"Client [{who}] sent the previous request with state terminating to TRUE, can not "
                                 "accept any requests after that")
        if not instance.maybe_update_push_request_timestamp(now) and not terminating:
            self.throttle_count += 1
            raise TelemetryError(ErrorCode.THROTTLING_QUOTA_EXCEEDED,
                                 f"Request from the client [{who}] arrived before the next push interval time")
        if subscription_id != instance.subscription_id:
            self.unknown_subscription_requests += 1
            raise TelemetryError(ErrorCode.UNKNOWN_SUBSCRIPTION_ID,
                                 f"Unknown client subscription id for the client [{who}]")
        if compression_type not in CODEC_NAMES:
            raise TelemetryError(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
                                 f"Unknown compression type [{compression_type}] is received in telemetry request "
                                 f"from [{who}]")
        if len(metrics) > self.telemetry_max_bytes:
            raise TelemetryError(ErrorCode.TELEMETRY_TOO_LARGE,
                                 f"Telemetry request from [{who}] is larger than the maximum allowed size "
                                 f"[{self.telemetry_max_bytes}]")

    # -- broker metrics -----------------------------------------------------------------------------
    def metrics(self) -> dict[str, float]:
        """Kafka's ``client-metrics`` group (``kafka.server:type=client-metrics``)."""
        prefix = "kafka.server:type=client-metrics,name="
        return {prefix + "instance-count": len(self.instances),
                prefix + "throttle-total": self.throttle_count,
                prefix + "unknown-subscription-request-total": self.unknown_subscription_requests,
                prefix + "plugin-export-total": self.receiver.exported,
                prefix + "plugin-error-total": self.receiver.errors,
                # minikafka's own: what the caps of the shared store dropped.
                prefix + "instance-eviction-total": self.instances.evictions,
                prefix + "series-dropped-total": self.receiver.series_dropped}
