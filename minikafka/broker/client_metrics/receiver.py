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
"""

from __future__ import annotations

import base64
import logging
import re
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ...protocol.compression import CompressionError, UnsupportedCodecError, decompress_bounded

log = logging.getLogger(__name__)

_INVALID_NAME = re.compile(r"[^a-zA-Z0-9_:]+")
_INVALID_LABEL = re.compile(r"[^a-zA-Z0-9_]+")
DELTA = 1  # OTLP AggregationTemporality
CACHE_EXPIRY_MS = 60 * 1000

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


#: What a pushed payload may decompress to (``telemetry.max.bytes`` bounds it compressed only): a client's
#: metrics are kilobytes; a few compressed bytes standing for gigabytes are refused, not allocated.
MAX_DECOMPRESSED_BYTES = 32 << 20


def decode_payload(compression_type: int, payload: bytes, max_size: int = MAX_DECOMPRESSED_BYTES) -> Any:
    """Decompress (Kafka's ``ClientTelemetryUtils.decompress``, bounded by ``max_size``) and parse a
    PushTelemetry payload."""
    try:
        data = decompress_bounded(compression_type, payload, max_size)
    except (CompressionError, UnsupportedCodecError) as exc:
        raise TelemetryDecodeError(f"cannot decompress the metrics: {exc}") from None
    return parse_metrics_data(data)


class ClientTelemetryStore:
    """The metrics each client instance pushed (the broker's built-in ``ClientTelemetryReceiver``)."""

    def __init__(self, now_ms: Callable[[], int]) -> None:
        self.now_ms = now_ms
        self.clients: dict[uuid.UUID, ClientTelemetry] = {}
        self.exported = 0  # pushes decoded (Kafka's plugin-export count)
        self.errors = 0  # pushes that failed to decode (plugin-error)

    # -- receiving ----------------------------------------------------------------------------------
    def export(self, identity: ClientIdentity, compression_type: int, payload: bytes, *, terminating: bool = False,
               push_interval_ms: int = 0) -> None:
        """Decode one push and merge it into the client's metrics; TelemetryDecodeError if it does not decode."""
        try:
            data = decode_payload(compression_type, payload)
        except TelemetryDecodeError:
            self.errors += 1
            raise
        self.expire()
        client = self.clients.get(identity.client_instance_id)
        if client is None:
            client = self.clients[identity.client_instance_id] = ClientTelemetry(identity)
        client.pushes += 1
        client.bytes_received += len(payload)
        client.last_push_ms = self.now_ms()
        client.expiry_ms = max(CACHE_EXPIRY_MS, 3 * push_interval_ms)
        client.terminating = terminating
        for rm in data.resource_metrics:
            client.resource.update(_attributes(rm.resource.attributes))
            for sm in rm.scope_metrics:
                for metric in sm.metrics:
                    self._merge(client, metric)
        self.exported += 1

    def _merge(self, client: ClientTelemetry, metric: Any) -> None:
        which = metric.WhichOneof("data")
        if which is None:
            return
        data = getattr(metric, which)
        if which == "gauge":
            kind = "gauge"
        elif which == "sum":
            kind = "counter" if data.is_monotonic else "updown"
        elif which in ("histogram", "exponential_histogram"):
            kind = "histogram"
        else:
            kind = "summary"
        state = client.metrics.get(metric.name)
        if state is None or state.kind != kind:
            state = client.metrics[metric.name] = _Metric(metric.name, kind)
        state.description = metric.description or state.description
        state.unit = metric.unit or state.unit
        delta = kind != "summary" and which != "gauge" and data.aggregation_temporality == DELTA
        for p in data.data_points:
            attrs = _attributes(p.attributes)
            point = state.points.get(attrs)
            if point is None:
                point = state.points[attrs] = _Point()
            point.time_unix_nano = p.time_unix_nano
            if kind in ("gauge", "counter", "updown"):
                value = _number(p)
                point.value = point.value + value if delta else value
            elif kind == "histogram":
                point.count = point.count + p.count if delta else float(p.count)
                point.total = point.total + p.sum if delta else float(p.sum)
            else:
                point.count, point.total = float(p.count), float(p.sum)
                point.quantiles = {q.quantile: q.value for q in p.quantile_values}

    # -- reading ------------------------------------------------------------------------------------
    def expire(self) -> None:
        """Forget the clients that have pushed nothing for their expiry time."""
        now = self.now_ms()
        for key in [k for k, c in self.clients.items() if now - c.last_push_ms > c.expiry_ms]:
            del self.clients[key]

    def series(self) -> Iterator[tuple[str, str, str, Labels, str, float]]:
        """(family, kind, doc, labels, part, value) of every data point of every client, for Prometheus:
        kind counter, gauge or summary; part ``value``, or for a summary ``count``, ``mean`` or a
        quantile."""
        self.expire()
        for client in list(self.clients.values()):
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
