"""The brokers' Kafka metrics in the Prometheus text format (``GET /metrics``), no Trio.

:class:`KafkaCollector` is a ``prometheus_client`` custom collector over
:meth:`Broker.metrics() <minikafka.broker.broker.Broker.metrics>` of every
running broker.  It names the metrics as the Prometheus JMX exporter's Kafka
example rules name Kafka's MBeans, so dashboards built for a JVM broker work:

* ``kafka.<d>:type=<T>,name=<N>PerSec,<k>=<v>...`` (a meter's ``Count``) ->
  counter ``kafka_<d>_<t>_<n>_total{<k>="<v>"}``, e.g.
  ``kafka_server_brokertopicmetrics_bytesin_total{topic="t"}``; minikafka's own
  ``...Total`` / ``...-total`` names are counters the same way (a ``...PerSec``
  rate with such a ``...Total`` sibling is left out);
* ``kafka.<d>:type=<T>,name=<N>,...`` -> gauge ``kafka_<d>_<t>_<n>``;
* a histogram's ``<bean>:Count``, ``:Mean`` and ``:<P>thPercentile`` attributes ->
  summary ``kafka_<d>_<t>_<n>{quantile="0.<P>"}`` with ``_count`` and ``_sum``
  (the exporter has no ``_sum``; here it is ``Mean * Count``);
* client quota metrics ``<Produce|Fetch|Request>:client-id=C,user=U/<m>`` (Kafka's
  ``kafka.server:type=Produce,user=U,client-id=C``) -> gauge
  ``kafka_server_quota_<m>{resource, user, clientId}``; other sensors
  ``<G>:/<m>`` -> ``kafka_server_<g>_<m>``;
* what clients pushed (KIP-714, a broker's ``client_telemetry``,
  :class:`~minikafka.broker.client_metrics.receiver.ClientTelemetryStore`): each OTLP metric under its own
  name with ``_`` for ``.`` (``org_apache_kafka_producer_node_request_latency_avg``), labelled
  ``client_instance_id``, ``client_id`` and the data point's attributes; no ``broker`` label (a cluster's
  brokers share one store).

Names are lower-cased with invalid characters as ``_``; label names keep
their case (``clientId``, ``delayedOperation``).  A family's series that lack
one of its labels get it empty (the same series to PromQL).  Brokers of a
cluster (several brokers in one process) get a ``broker`` label with their
node id.  Call :func:`render` on the brokers' event loop (metrics are read
without locks).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    Metric,
    SummaryMetricFamily,
)
from prometheus_client.registry import Collector

log = logging.getLogger(__name__)

CONTENT_TYPE = CONTENT_TYPE_LATEST
_INVALID = re.compile(r"[^a-zA-Z0-9_:]+")
_INVALID_LABEL = re.compile(r"[^a-zA-Z0-9_]+")
_PERCENTILE = re.compile(r"(\d+)thPercentile")
_QUOTA_TAGS = re.compile(r"client-id=(.*),user=(.*)")

Labels = tuple[tuple[str, str], ...]


class TelemetrySource(Protocol):
    """KIP-714 client metrics: (family, kind, doc, labels, part, value) of every pushed data point."""

    def series(self) -> Iterator[tuple[str, str, str, Labels, str, float]]: ...


class MetricsSource(Protocol):
    """What is read of a broker: its metrics and whether it belongs to a cluster (and, when it has an
    attribute ``client_telemetry``, a :class:`TelemetrySource` of what clients pushed)."""

    @property
    def clustered(self) -> bool: ...

    def metrics(self) -> dict[str, float]: ...


Brokers = Callable[[], Mapping[int, MetricsSource]]


@dataclass(frozen=True, slots=True)
class Series:
    """Where one broker metric goes: its family, the family's type, its labels and which part of the
    family's sample it is (``value``; for a summary ``count``, ``mean`` or a quantile like ``0.99``)."""

    family: str
    kind: str  # counter, gauge or summary
    doc: str
    labels: Labels
    part: str = "value"


def safe_name(*parts: str) -> str:
    return _INVALID.sub("_", "_".join(parts)).strip("_").lower()


def safe_label(name: str) -> str:
    name = _INVALID_LABEL.sub("_", name)
    return name if name and not name[0].isdigit() else "_" + name


def _counter_base(name: str) -> str | None:
    """The name without its counter suffix (``PerSec``, ``Total``, ``-total``), None if it has none."""
    for suffix in ("PerSec", "Total", "-total"):
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[:-len(suffix)]
    return None


def jmx_series(key: str, metrics: Mapping[str, float]) -> Series | None:
    """``kafka.<domain>:type=T,name=N,k=v...[:Attribute]`` -> its series (None: not exported)."""
    domain, _, rest = key.partition(":")
    attribute = None
    head, sep, tail = rest.rpartition(":")
    if sep and "=" not in tail:
        rest, attribute = head, tail
    props = dict(p.partition("=")[::2] for p in rest.split(","))
    kind_, name = props.pop("type", ""), props.pop("name", "")
    labels = tuple((safe_label(k), v) for k, v in props.items())
    doc = f"Kafka {domain}:type={kind_},name={name}"
    if attribute is not None:  # a histogram attribute: a summary
        family = safe_name(domain, kind_, name)
        match = _PERCENTILE.fullmatch(attribute)
        if match:
            return Series(family, "summary", doc, labels, f"0.{match.group(1)}")
        if attribute in ("Count", "Mean"):
            return Series(family, "summary", doc, labels, attribute.lower())
        return None  # Max and the like: not in the exporter's rules
    base = _counter_base(name)
    if base is None:
        return Series(safe_name(domain, kind_, name), "gauge", doc, labels)
    if name.endswith("PerSec") and key.replace(f"name={name}", f"name={base}Total") in metrics:
        return None  # a rate whose count is exported under ...Total
    return Series(safe_name(domain, kind_, base), "counter", doc + " (count)", labels)


def sensor_series(key: str) -> Series | None:
    """A metrics-registry key ``Group:k=v,.../name``: client quota metrics get the exporter's quota name."""
    group, _, rest = key.partition(":")
    tags, _, name = rest.rpartition("/")
    if not name:
        return None
    quota = _QUOTA_TAGS.fullmatch(tags)
    if quota is not None:
        labels: Labels = (("resource", group), ("user", quota.group(2)), ("clientId", quota.group(1)))
        return Series(safe_name("kafka_server_quota", name), "gauge",
                      f"Kafka client quota metric {name} per resource, user and client id", labels)
    labels = tuple((safe_label(k), v) for k, v in (t.partition("=")[::2] for t in tags.split(",") if t))
    base = _counter_base(name)
    kind = "counter" if base is not None else "gauge"
    return Series(safe_name("kafka_server", group, base or name), kind, f"Kafka kafka.server:type={group} {name}",
                  labels)


def series_of(key: str, metrics: Mapping[str, float]) -> Series | None:
    return jmx_series(key, metrics) if key.startswith("kafka.") else sensor_series(key)


@dataclass
class _Family:
    """One metric family being assembled: its series by labels (a summary's parts by name)."""

    name: str
    kind: str
    doc: str
    labelnames: dict[str, None] = field(default_factory=dict)  # ordered set
    values: dict[Labels, dict[str, float]] = field(default_factory=dict)

    def add(self, s: Series, value: float) -> None:
        for label, _ in s.labels:
            self.labelnames.setdefault(label)
        self.values.setdefault(s.labels, {}).setdefault(s.part, value)  # the first of duplicates wins

    def build(self) -> Metric:
        names = list(self.labelnames)
        rows = [([dict(labels).get(n, "") for n in names], parts) for labels, parts in self.values.items()]
        if self.kind == "summary":
            summary = SummaryMetricFamily(self.name, self.doc, labels=names)
            for values, parts in rows:
                count = parts.get("count", 0.0)
                summary.add_metric(values, count_value=int(count), sum_value=parts.get("mean", 0.0) * count)
                for part, v in parts.items():
                    if part.startswith("0."):  # a quantile
                        summary.add_sample(self.name, {**dict(zip(names, values)), "quantile": part}, v)
            return summary
        family = (CounterMetricFamily(self.name, self.doc, labels=names) if self.kind == "counter"
                  else GaugeMetricFamily(self.name, self.doc, labels=names))
        for values, parts in rows:
            family.add_metric(values, parts["value"])
        return family


class KafkaCollector(Collector):
    """A ``prometheus_client`` collector over the brokers ``brokers()`` returns (``{node id: broker}``,
    read at each scrape so that stopped brokers disappear)."""

    def __init__(self, brokers: Brokers) -> None:
        self.brokers = brokers

    def collect(self) -> Iterator[Metric]:
        brokers = self.brokers()
        labelled = len(brokers) > 1 or any(b.clustered for b in brokers.values())
        families: dict[str, _Family] = {}
        for node_id, broker in sorted(brokers.items()):
            node: Labels = (("broker", str(node_id)),) if labelled else ()
            metrics = broker.metrics()
            for key, value in metrics.items():
                s = series_of(key, metrics)
                if s is None:
                    continue
                fam = families.get(s.family)
                if fam is None:
                    fam = families[s.family] = _Family(s.family, s.kind, s.doc)
                elif fam.kind != s.kind:
                    log.warning("metric %s maps to %s, already a %s: skipped", key, s.family, fam.kind)
                    continue
                fam.add(Series(s.family, s.kind, s.doc, s.labels + node, s.part), value)
        for source in _telemetry_sources(brokers):
            for family, kind, doc, labels, part, value in source.series():
                fam = families.get(family)
                if fam is None:
                    fam = families[family] = _Family(family, kind, doc)
                elif fam.kind != kind:
                    continue  # a client metric whose name another metric of another type already has
                fam.add(Series(family, kind, doc, labels, part), value)
        for fam in families.values():
            yield fam.build()


def _telemetry_sources(brokers: Mapping[int, MetricsSource]) -> list[TelemetrySource]:
    """The distinct client telemetry stores of the brokers (a cluster's brokers share one)."""
    out: dict[int, TelemetrySource] = {}
    for broker in brokers.values():
        source = getattr(broker, "client_telemetry", None)
        if source is not None:
            out.setdefault(id(source), source)
    return list(out.values())


def render(brokers: Brokers) -> bytes:
    """The Prometheus text exposition of the brokers' metrics (serve with :data:`CONTENT_TYPE`)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(KafkaCollector(brokers))
    return generate_latest(registry)
