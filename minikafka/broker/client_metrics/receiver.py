"""What clients pushed (KIP-714): OTLP metrics decoded and kept per client instance for ``/metrics``.

Kafka hands each PushTelemetry payload to a ``ClientTelemetryReceiver`` plugin (``ClientMetricsReceiverPlugin``)
that exports it elsewhere; minikafka's receiver is built in: :class:`ClientTelemetryStore` decompresses the
payload (the codec the request names: gzip, snappy, lz4 or zstd, as Kafka's
``ClientTelemetryUtils.decompress``), decodes it as OpenTelemetry ``MetricsData`` (protobuf, through
``opentelemetry-proto``, imported on the first push only) and keeps, per client instance, the latest value of
every data point:

* a gauge, and a sum that is not monotonic: the last value pushed;
* a monotonic sum: a counter, the deltas pushed added up (Kafka asks for delta temporality), or the value
  pushed when the client sends cumulative sums;
* a histogram (or exponential histogram): its count and sum (added up from deltas likewise), a summary:
  its count, sum and quantiles.

:meth:`ClientTelemetryStore.series` gives them to the Prometheus collector
(:mod:`~minikafka.broker.prometheus`): the metric's name with ``.`` (and any character Prometheus refuses) as
``_`` — ``org.apache.kafka.producer.node.request.latency.avg`` becomes
``org_apache_kafka_producer_node_request_latency_avg`` — labelled ``client_instance_id`` (Kafka's base64
form), ``client_id`` and the data point's own attributes (``node.id`` as ``node_id``).
:meth:`ClientTelemetryStore.as_json` is the same per client, for ``GET /v1/client-metrics``.

A client's metrics are dropped once it has pushed nothing for ``max(60 s, 3 push intervals)`` (Kafka's client
instance expiry).  The store is shared by a cluster's brokers (a client may push to any of them).

Pushes need no ACL, so what the store keeps is bounded (Kafka hands payloads to a plugin and keeps nothing; these
limits are minikafka's own):

* a payload may decompress to :func:`max_decompressed_bytes` (``DECOMPRESSION_RATIO`` × ``telemetry.max.bytes``,
  at least ``MIN_DECOMPRESSED_BYTES``); beyond that it is refused as one that does not decode (INVALID_RECORD);
* a client keeps at most ``max_series_per_client`` series (a series is one data point's metric and attribute set);
  a push's series beyond that, and data points whose attributes are longer than ``MAX_ATTRIBUTES_CHARS``, are
  dropped and counted (``series_dropped``); series already kept are still updated;
* the store keeps at most ``max_clients`` clients and ``max_series`` series in all: past either, the clients that
  pushed least recently are forgotten (LRU, as Kafka's client instance cache);
* descriptions, units and resource attribute values are cut to ``MAX_TEXT_CHARS``, a client keeps
  ``MAX_RESOURCE_ATTRIBUTES`` resource attributes and a summary point ``MAX_QUANTILES`` quantiles, and a metric is
  only kept once one of its data points is.

So ``/metrics`` and ``GET /v1/client-metrics`` render at most ``max_series`` series.
"""

from __future__ import annotations

import base64
import itertools
import logging
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from ...common import SYSTEM_CLOCK, Clock
from ...protocol.compression import CompressionError, UnsupportedCodecError, decompress_bounded
from .cache import ExpiringLruCache

log = logging.getLogger(__name__)

_INVALID_NAME = re.compile(r"[^a-zA-Z0-9_:]+")
_INVALID_LABEL = re.compile(r"[^a-zA-Z0-9_]+")
DELTA = 1  # OTLP AggregationTemporality
CACHE_EXPIRY_MS = 60 * 1000

#: A pushed payload may decompress to this many times ``telemetry.max.bytes`` ...
DECOMPRESSION_RATIO = 8
#: ... and to at least this much (so a small ``telemetry.max.bytes`` does not refuse an ordinary payload).
MIN_DECOMPRESSED_BYTES = 1 << 20
#: The clients the store keeps (least recently pushing forgotten first).
MAX_CLIENTS = 4096
#: The series (data points' attribute sets) one client keeps.
MAX_SERIES_PER_CLIENT = 2048
#: The series the store keeps in all (what ``/metrics`` renders at most).
MAX_SERIES = 32768
#: A data point whose attribute keys and values add up to more characters than this is dropped.
MAX_ATTRIBUTES_CHARS = 512  # a topic name (249 characters at most), a partition and a node id fit with room to spare
#: Metric names longer than this are dropped; descriptions, units and resource attribute values are cut to it.
MAX_TEXT_CHARS = 1024
MAX_RESOURCE_ATTRIBUTES = 64
MAX_QUANTILES = 32

Labels = tuple[tuple[str, str], ...]


class TelemetryDecodeError(ValueError):
    """A pushed payload that does not decompress or decode (Kafka answers INVALID_RECORD)."""


def kafka_uuid_str(value: uuid.UUID) -> str:
    """A Kafka ``Uuid.toString()``: URL-safe base64 of the 16 bytes, no padding."""
    return base64.urlsafe_b64encode(value.bytes).rstrip(b"=").decode()


def prometheus_name(otlp_name: str) -> str:
    name = _INVALID_NAME.sub("_", otlp_name).strip("_")
    return name if name and not name[0].isdigit() else "_" + name


def prometheus_label(name: str) -> str:
    name = _INVALID_LABEL.sub("_", name)
    return name if name and not name[0].isdigit() else "_" + name


@dataclass(frozen=True, slots=True)
class ClientIdentity:
    """Who pushed: Kafka's ``ClientMetricsInstanceMetadata`` attributes."""

    client_instance_id: uuid.UUID
    client_id: str
    client_software_name: str | None = None
    client_software_version: str | None = None
    client_source_address: str | None = None
    client_source_port: str | None = None


@dataclass(slots=True)
class _Point:
    """One data point's state: a value, or for a histogram/summary its count, sum and quantiles."""

    value: float = 0.0
    count: float = 0.0
    total: float = 0.0
    quantiles: dict[float, float] = field(default_factory=dict)
    time_unix_nano: int = 0


def max_decompressed_bytes(telemetry_max_bytes: int) -> int:
    """What a payload of at most ``telemetry_max_bytes`` may decompress to: ``DECOMPRESSION_RATIO`` times as much
    (OTLP metrics compress a few times over; more is a payload built to expand), ``MIN_DECOMPRESSED_BYTES`` at
    least."""
    return max(MIN_DECOMPRESSED_BYTES, DECOMPRESSION_RATIO * telemetry_max_bytes)


@dataclass(slots=True)
class _Metric:
    name: str
    kind: str  # gauge, counter, updown, histogram, summary
    description: str = ""
    unit: str = ""
    points: dict[Labels, _Point] = field(default_factory=dict)


@dataclass(slots=True)
class ClientTelemetry:
    """Everything one client instance pushed."""

    identity: ClientIdentity
    resource: dict[str, str] = field(default_factory=dict)
    metrics: dict[str, _Metric] = field(default_factory=dict)
    pushes: int = 0
    bytes_received: int = 0
    last_push_ms: int = 0
    expiry_ms: int = CACHE_EXPIRY_MS
    terminating: bool = False
    series: int = 0  # data points kept, over all metrics
    series_dropped: int = 0  # data points refused by the caps


def _any_value(v: Any) -> str:
    """An OTLP ``AnyValue`` as a label value."""
    which = v.WhichOneof("value")
    if which is None:
        return ""
    if which == "bool_value":
        return "true" if v.bool_value else "false"
    if which == "array_value":
        return ",".join(_any_value(x) for x in v.array_value.values)
    if which == "kvlist_value":
        return ",".join(f"{kv.key}={_any_value(kv.value)}" for kv in v.kvlist_value.values)
    if which == "bytes_value":
        return base64.b64encode(v.bytes_value).decode()
    return str(getattr(v, which))


def _attributes(kvs: Any) -> Labels:
    return tuple(sorted((kv.key, _any_value(kv.value)) for kv in kvs))


def _number(p: Any) -> float:
    return float(p.as_int) if p.WhichOneof("value") == "as_int" else float(p.as_double)


def parse_metrics_data(data: bytes) -> Any:
    """The OTLP ``MetricsData`` message in ``data`` (TelemetryDecodeError if it is not one)."""
    from google.protobuf.message import DecodeError
    from opentelemetry.proto.metrics.v1.metrics_pb2 import MetricsData

    message = MetricsData()
    try:
        message.ParseFromString(data)
    except DecodeError as exc:
        raise TelemetryDecodeError(f"not OTLP MetricsData: {exc}") from None
    return message


#: What a pushed payload may decompress to with the default ``telemetry.max.bytes`` (1 MiB): a client's metrics
#: are kilobytes; a few compressed bytes standing for gigabytes are refused, not allocated.
MAX_DECOMPRESSED_BYTES = max_decompressed_bytes(1 << 20)


def decode_payload(compression_type: int, payload: bytes, max_size: int = MAX_DECOMPRESSED_BYTES) -> Any:
    """Decompress (Kafka's ``ClientTelemetryUtils.decompress``, bounded by ``max_size``: TelemetryDecodeError
    beyond it) and parse a PushTelemetry payload."""
    try:
        data = decompress_bounded(compression_type, payload, max_size)
    except (CompressionError, UnsupportedCodecError) as exc:
        raise TelemetryDecodeError(f"cannot decompress the metrics: {exc}") from None
    return parse_metrics_data(data)


class ClientTelemetryStore:
    """The metrics each client instance pushed (the broker's built-in ``ClientTelemetryReceiver``), within the
    caps the module describes."""

    def __init__(self, clock: Clock = SYSTEM_CLOCK, *, max_clients: int = MAX_CLIENTS,
                 max_series_per_client: int = MAX_SERIES_PER_CLIENT, max_series: int = MAX_SERIES) -> None:
        self.clock = clock
        self.max_series_per_client = max_series_per_client
        self.max_series = max_series
        self.clients: ExpiringLruCache[uuid.UUID, ClientTelemetry] = ExpiringLruCache(max_clients, self._forgotten)
        self.total_series = 0  # series kept, over all clients
        self.exported = 0  # pushes decoded (Kafka's plugin-export count)
        self.errors = 0  # pushes that failed to decode (plugin-error)
        self.series_dropped = 0  # data points refused by the caps (minikafka's own)

    def _forgotten(self, key: uuid.UUID, client: ClientTelemetry) -> None:
        self.total_series -= client.series

    # -- receiving ----------------------------------------------------------------------------------
    def export(self, identity: ClientIdentity, compression_type: int, payload: bytes, *, terminating: bool = False,
               push_interval_ms: int = 0, max_size: int = MAX_DECOMPRESSED_BYTES) -> None:
        """Decode one push (decompressed to ``max_size`` at most) and merge it into the client's metrics;
        TelemetryDecodeError if it does not decode."""
        try:
            data = decode_payload(compression_type, payload, max_size)
        except TelemetryDecodeError:
            self.errors += 1
            raise
        now = self.clock.time_ms()
        self.clients.expire(now)
        key = identity.client_instance_id
        expiry_ms = max(CACHE_EXPIRY_MS, 3 * push_interval_ms)
        client = self.clients.get(key)
        if client is None:
            client = ClientTelemetry(identity)
            self.clients.put(key, client, now + expiry_ms)
        else:
            self.clients.touch(key, now + expiry_ms)
        client.pushes += 1
        client.bytes_received += len(payload)
        client.last_push_ms = now
        client.expiry_ms = expiry_ms
        client.terminating = terminating
        before, dropped = client.series, client.series_dropped
        for rm in data.resource_metrics:
            self._resource(client, rm.resource.attributes)
            for sm in rm.scope_metrics:
                for metric in sm.metrics:
                    self._merge(client, metric)
        self.total_series += client.series - before
        if client.series_dropped > dropped:
            self.series_dropped += client.series_dropped - dropped
            log.debug("client instance %s: %d data points over the caps dropped", kafka_uuid_str(key),
                      client.series_dropped - dropped)
        while self.total_series > self.max_series and len(self.clients) > 1:
            self.clients.pop_oldest()  # the pushing client is the most recent: never it
        self.exported += 1

    @staticmethod
    def _resource(client: ClientTelemetry, kvs: Any) -> None:
        for k, v in _attributes(kvs):
            if k in client.resource or len(client.resource) < MAX_RESOURCE_ATTRIBUTES:
                client.resource[k[:MAX_TEXT_CHARS]] = v[:MAX_TEXT_CHARS]

    def _merge(self, client: ClientTelemetry, metric: Any) -> None:
        which = metric.WhichOneof("data")
        if which is None:
            return
        data = getattr(metric, which)
        if len(metric.name) > MAX_TEXT_CHARS:
            client.series_dropped += len(data.data_points)
            return
        if which == "gauge":
            kind = "gauge"
        elif which == "sum":
            kind = "counter" if data.is_monotonic else "updown"
        elif which in ("histogram", "exponential_histogram"):
            kind = "histogram"
        else:
            kind = "summary"
        state = client.metrics.get(metric.name)
        if state is not None and state.kind != kind:  # the same name as another type now: start again
            client.series -= len(state.points)
            del client.metrics[metric.name]
            state = None
        fresh = state is None
        if state is None:
            state = _Metric(metric.name, kind)
        delta = kind != "summary" and which != "gauge" and data.aggregation_temporality == DELTA
        for p in data.data_points:
            attrs = _attributes(p.attributes)
            point = state.points.get(attrs)
            if point is None:
                if (client.series >= self.max_series_per_client
                        or sum(len(k) + len(v) for k, v in attrs) > MAX_ATTRIBUTES_CHARS):
                    client.series_dropped += 1
                    continue
                point = state.points[attrs] = _Point()
                client.series += 1
            point.time_unix_nano = p.time_unix_nano
            if kind in ("gauge", "counter", "updown"):
                value = _number(p)
                point.value = point.value + value if delta else value
            elif kind == "histogram":
                point.count = point.count + p.count if delta else float(p.count)
                point.total = point.total + p.sum if delta else float(p.sum)
            else:
                point.count, point.total = float(p.count), float(p.sum)
                point.quantiles = {q.quantile: q.value for q in itertools.islice(p.quantile_values, MAX_QUANTILES)}
        if fresh and state.points:  # a metric is kept once one of its data points is
            client.metrics[metric.name] = state
        if not fresh or state.points:
            state.description = metric.description[:MAX_TEXT_CHARS] or state.description
            state.unit = metric.unit[:MAX_TEXT_CHARS] or state.unit

    # -- reading ------------------------------------------------------------------------------------
    def expire(self) -> None:
        """Forget the clients that have pushed nothing for their expiry time."""
        self.clients.expire(self.clock.time_ms())

    def series(self) -> Iterator[tuple[str, str, str, Labels, str, float]]:
        """(family, kind, doc, labels, part, value) of every data point of every client, for Prometheus:
        kind counter, gauge or summary; part ``value``, or for a summary ``count``, ``mean`` or a
        quantile."""
        self.expire()
        for client in self.clients.values():
            ident = client.identity
            base: Labels = (("client_instance_id", kafka_uuid_str(ident.client_instance_id)),
                            ("client_id", ident.client_id))
            taken = {k for k, _ in base}
            for metric in list(client.metrics.values()):
                family = prometheus_name(metric.name)
                kind = {"counter": "counter", "histogram": "summary", "summary": "summary"}.get(metric.kind, "gauge")
                doc = metric.description or f"KIP-714 client metric {metric.name}"
                for attrs, point in list(metric.points.items()):
                    labels = base + tuple((n, v) for n, v in ((prometheus_label(k), v) for k, v in attrs)
                                          if n not in taken)
                    if kind != "summary":
                        yield family, kind, doc, labels, "value", point.value
                        continue
                    yield family, kind, doc, labels, "count", point.count
                    yield family, kind, doc, labels, "mean", point.total / point.count if point.count else 0.0
                    for q, v in sorted(point.quantiles.items()):
                        if 0 < q < 1:
                            yield family, kind, doc, labels, f"{q:g}", v

    def as_json(self, client_instance_id: str | None = None) -> list[dict[str, Any]]:
        """Every client's identity and latest metrics (or only the one named by its Kafka id)."""
        self.expire()
        out = []
        for client in self.clients.values():
            ident = client.identity
            cid = kafka_uuid_str(ident.client_instance_id)
            if client_instance_id is not None and client_instance_id not in (cid, str(ident.client_instance_id)):
                continue
            out.append({
                "client_instance_id": cid, "client_id": ident.client_id,
                "client_software_name": ident.client_software_name,
                "client_software_version": ident.client_software_version,
                "client_source_address": ident.client_source_address,
                "client_source_port": ident.client_source_port,
                "resource": dict(client.resource), "pushes": client.pushes, "bytes_received": client.bytes_received,
                "last_push_ms": client.last_push_ms, "terminating": client.terminating,
                "series": client.series, "series_dropped": client.series_dropped,
                "metrics": [{
                    "name": m.name, "type": m.kind, "description": m.description, "unit": m.unit,
                    "points": [{"attributes": dict(attrs), "time_unix_nano": p.time_unix_nano,
                                **({"value": p.value} if m.kind in ("gauge", "counter", "updown")
                                   else {"count": p.count, "sum": p.total,
                                         **({"quantiles": {f"{q:g}": v for q, v in sorted(p.quantiles.items())}}
                                            if m.kind == "summary" else {})})}
                               for attrs, p in m.points.items()]}
                    for m in sorted(client.metrics.values(), key=lambda m: m.name)],
            })
        return out

    def metric_names(self, client_instance_id: uuid.UUID) -> set[str]:
        """The names of the metrics a client pushed (empty when it pushed none)."""
        client = self.clients.get(client_instance_id)
        return set(client.metrics) if client is not None else set()
