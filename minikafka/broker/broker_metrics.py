"""Kafka's broker traffic metrics, counted by a request observer (no Trio, no I/O).

:class:`BrokerTopicStats` models ``kafka.server.BrokerTopicStats``: the
``kafka.server:type=BrokerTopicMetrics`` meters per topic and over all topics
(bytes and messages in, bytes out, produce and fetch requests and their
failures, replication bytes out).  :class:`RequestMetrics` models
``kafka.network.RequestMetrics`` for one request name: the ``TotalTimeMs``
histogram and ``ErrorsPerSec`` per error code.  :class:`BrokerMetricsObserver`
feeds both from the :class:`~minikafka.broker.request.Response` of every request,
and :func:`server_metrics` reads the socket server's gauges (memory pool,
connections, purgatories).

The meters report their ``Count`` under the ``...PerSec`` name (rates are
PromQL's job).  Counting stays cheap on the produce and fetch paths: sizes
are the record buffers' lengths and message counts come from the 61-byte
batch headers, never from the records themselves.  As in Kafka, a produce
partition that fails with an expected error (unknown partition, not leader,
too large, corrupt) is not a *failed* produce, and partitions of unknown
topics are not counted as produce or fetch requests.  Deliberate difference:
an acks=0 produce has no response to tell its errors, so its batches count as
appended.  Latencies use the times the request path stamped (``received_ns``
and ``sent_ns``, from the broker's injected clock).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from ..common import TopicMetadata
from ..protocol.api import APIS, ApiKey
from ..protocol.errors import ErrorCode
from ..protocol.messages.fetch import fetch_replica_id
from ..protocol.records import count_records
from ..protocol.schema import Field
from .log.validator import NO_KEY_COMPACTED_MESSAGE
from .request import ObserverBase, Response

log = logging.getLogger(__name__)

E = ErrorCode
# Kafka's ReplicaManager does not mark these as failed produce / fetch requests (they are "expected").
EXPECTED_PRODUCE_ERRORS = frozenset({E.UNKNOWN_TOPIC_OR_PARTITION, E.NOT_LEADER_OR_FOLLOWER, E.MESSAGE_TOO_LARGE,
                                     E.RECORD_LIST_TOO_LARGE, E.CORRUPT_MESSAGE, E.KAFKA_STORAGE_ERROR,
                                     E.INVALID_REQUIRED_ACKS})
EXPECTED_FETCH_ERRORS = frozenset({E.UNKNOWN_TOPIC_OR_PARTITION, E.NOT_LEADER_OR_FOLLOWER, E.UNKNOWN_LEADER_EPOCH,
                                   E.FENCED_LEADER_EPOCH, E.REPLICA_NOT_AVAILABLE, E.KAFKA_STORAGE_ERROR,
                                   E.OFFSET_OUT_OF_RANGE, E.INCONSISTENT_TOPIC_ID, E.UNKNOWN_TOPIC_ID})
REJECTED_PRODUCE_ERRORS = frozenset({E.MESSAGE_TOO_LARGE, E.RECORD_LIST_TOO_LARGE, E.CORRUPT_MESSAGE})
UNKNOWN_TOPIC_ERRORS = frozenset({E.UNKNOWN_TOPIC_OR_PARTITION, E.UNKNOWN_TOPIC_ID})

TOPIC_METRICS = "kafka.server:type=BrokerTopicMetrics,name="
REQUEST_METRICS = "kafka.network:type=RequestMetrics,name="
RESERVOIR_SIZE = 1028  # Kafka's (Yammer's) histogram reservoir
PERCENTILES = (("50thPercentile", 0.5), ("75thPercentile", 0.75), ("95thPercentile", 0.95),
               ("98thPercentile", 0.98), ("99thPercentile", 0.99), ("999thPercentile", 0.999))
API_NAMES = {int(key): api.name for key, api in APIS.items()}


class TopicDirectory(Protocol):
    """The metadata the observer reads: which topics exist, and their names by id (Fetch v13+)."""

    def get_topic(self, name: str) -> TopicMetadata | None: ...

    def get_topic_by_id(self, topic_id: uuid.UUID) -> TopicMetadata | None: ...


@dataclass(slots=True)
class TopicMeters:
    """One topic's ``BrokerTopicMetrics`` meters, as counts."""

    bytes_in: int = 0
    messages_in: int = 0
    bytes_out: int = 0
    bytes_rejected: int = 0
    total_produce: int = 0
    total_fetch: int = 0
    failed_produce: int = 0
    failed_fetch: int = 0

    FIELDS: ClassVar[dict[str, str]] = {
        "bytes_in": "BytesInPerSec", "messages_in": "MessagesInPerSec", "bytes_out": "BytesOutPerSec",
        "bytes_rejected": "BytesRejectedPerSec", "total_produce": "TotalProduceRequestsPerSec",
        "total_fetch": "TotalFetchRequestsPerSec", "failed_produce": "FailedProduceRequestsPerSec",
        "failed_fetch": "FailedFetchRequestsPerSec"}

    def add(self, other: TopicMeters) -> None:
        for attr in self.FIELDS:
            setattr(self, attr, getattr(self, attr) + getattr(other, attr))

    def metrics(self, tags: str = "") -> dict[str, float]:
        return {f"{TOPIC_METRICS}{name}{tags}": getattr(self, attr) for attr, name in self.FIELDS.items()}


class BrokerTopicStats:
    """Kafka's ``BrokerTopicStats``: meters per topic; the all-topics meters are their sum (plus the
    topics deleted since, whose counts are kept so that the totals never go back)."""

    def __init__(self) -> None:
        self.topics: dict[str, TopicMeters] = {}
        self.retired = TopicMeters()
        self.replication_bytes_out = 0  # follower fetches (all topics only, as in Kafka)
        self.no_key_compacted_records = 0  # keyless records refused by compacted topics (all topics only)

    def topic(self, name: str) -> TopicMeters:
        meters = self.topics.get(name)
        if meters is None:
            meters = self.topics[name] = TopicMeters()
        return meters

    def all_topics(self) -> TopicMeters:
        total = TopicMeters()
        total.add(self.retired)
        for meters in self.topics.values():
            total.add(meters)
        return total

    def remove_topics(self, gone: Iterable[str]) -> None:
        """Drop the per-topic meters of deleted topics (Kafka's ``removeMetrics``), keeping their counts
        in the all-topics meters."""
        for name in list(gone):
            meters = self.topics.pop(name, None)
            if meters is not None:
                log.debug("topic %s is gone: its BrokerTopicMetrics are removed", name)
                self.retired.add(meters)

    def metrics(self) -> dict[str, float]:
        out = self.all_topics().metrics()
        out[TOPIC_METRICS + "ReplicationBytesOutPerSec"] = self.replication_bytes_out
        out[TOPIC_METRICS + "NoKeyCompactedTopicRecordsPerSec"] = self.no_key_compacted_records
        for name, meters in sorted(self.topics.items()):
            out.update(meters.metrics(f",topic={name}"))
        return out


class Histogram:
    """A Yammer histogram as Kafka's request metrics use it: count, mean, and max and percentiles over
    the last :data:`RESERVOIR_SIZE` values (Kafka's reservoir decays exponentially; this one slides)."""

    __slots__ = ("_next", "_samples", "count", "sum")

    def __init__(self) -> None:
        self.count = 0
        self.sum = 0.0
        self._samples: list[float] = []
        self._next = 0

    def update(self, value: float) -> None:
        self.count += 1
        self.sum += value
        samples = self._samples
        if len(samples) < RESERVOIR_SIZE:
            samples.append(value)
        else:
            samples[self._next] = value
            self._next = (self._next + 1) % RESERVOIR_SIZE

    @staticmethod
    def quantile(values: list[float], q: float) -> float:
        """Yammer's ``Snapshot.getValue``: linear interpolation at position q * (n + 1) of sorted values."""
        if not values:
            return 0.0
        pos = q * (len(values) + 1)
        if pos < 1:
            return values[0]
        if pos >= len(values):
            return values[-1]
        lower = values[int(pos) - 1]
        return lower + (pos - int(pos)) * (values[int(pos)] - lower)

    def attributes(self) -> dict[str, float]:
        """The JMX attributes: ``Count``, ``Mean``, ``Max`` and the percentiles (``99thPercentile`` ...)."""
        values = sorted(self._samples)
        out = {"Count": float(self.count), "Mean": self.sum / self.count if self.count else 0.0,
               "Max": values[-1] if values else 0.0}
        for attr, q in PERCENTILES:
            out[attr] = self.quantile(values, q)
        return out


class RequestMetrics:
    """Kafka's ``RequestMetrics`` for one request name: ``TotalTimeMs`` (received -> response sent, ms)
    and ``ErrorsPerSec`` per error code (every error code in the responses, NONE included)."""

    __slots__ = ("errors", "total_time_ms")

    def __init__(self) -> None:
        self.total_time_ms = Histogram()
        self.errors: dict[int, int] = {}

    def metrics(self, request: str) -> dict[str, float]:
        out: dict[str, float] = {}
        if self.total_time_ms.count:
            bean = f"{REQUEST_METRICS}TotalTimeMs,request={request}"
            out.update({f"{bean}:{attr}": v for attr, v in self.total_time_ms.attributes().items()})
        for code, count in sorted(self.errors.items()):
            out[f"{REQUEST_METRICS}ErrorsPerSec,request={request},error={error_name(code)}"] = count
        return out


def api_name(key: int) -> str:
    return API_NAMES.get(key, str(key))


def error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


def records_size(records: Any) -> int:
    """Bytes of a records field: one buffer or a list of chunks (stored batches sent by reference);
    byte buffers all, so that ``len`` is their size."""
    if not records:
        return 0
    if isinstance(records, list):
        return sum(map(len, records))
    return len(records)


def records_count(records: Any) -> int:
    if not records:
        return 0
    if isinstance(records, list):
        return sum(count_records(c) for c in records)
    return count_records(records)


def count_errors(body: Any, errors: dict[int, int]) -> None:
    """Count every ``error_code`` of a response body, nested entries included (Kafka's ``errorCounts``)."""
    code = body.get("error_code")
    if code is not None:
        errors[code] = errors.get(code, 0) + 1
    for value in body.values():
        if isinstance(value, list) and value and isinstance(value[0], dict):
            for item in value:
                count_errors(item, errors)


#: Where a response's error codes are: whether a struct may carry ``error_code``, and its arrays of structs
#: that may (at any depth), by field name, from the response schema (all versions).
ErrorPlan = tuple[bool, tuple[tuple[str, "ErrorPlan"], ...]]


def _error_plan(fields: list[Field]) -> ErrorPlan | None:
    nested = tuple((f.name, plan) for f in fields if f.is_array_of_structs
                   and (plan := _error_plan(f.subfields)) is not None)
    has = any(f.name == "error_code" for f in fields)
    return (has, nested) if has or nested else None


_ERROR_PLANS: dict[int, ErrorPlan] = {}


def count_response_errors(api_key: int, body: Any, errors: dict[int, int]) -> None:
    """:func:`count_errors` guided by the api's response schema: only the arrays of structs that can hold an
    ``error_code`` are walked (the same counts for bodies shaped as the schema says, without visiting every value)."""
    try:
        plan = _ERROR_PLANS[api_key]
    except KeyError:
        api = APIS.get(api_key)
        plan = _ERROR_PLANS[api_key] = (_error_plan(api.response.fields) if api is not None else None) or (True, ())
    _count_planned(plan, body, errors)


def _count_planned(plan: ErrorPlan, body: Any, errors: dict[int, int]) -> None:
    code = body.get("error_code")
    if code is not None:
        errors[code] = errors.get(code, 0) + 1
    for name, sub in plan[1]:
        items = body.get(name)
        if items and isinstance(items[0], dict):
            for item in items:
                _count_planned(sub, item, errors)


class BrokerMetricsObserver(ObserverBase):
    """Counts Kafka's ``BrokerTopicMetrics`` and ``RequestMetrics`` from each request and its response.

    Topic and error counts are taken before the response leaves (a client reading the metrics after
    its response sees its own request), request times when it has left.  Fetch times are recorded
    under ``Fetch`` and, as in Kafka, ``FetchConsumer`` or ``FetchFollower``.
    """

    def __init__(self, topics: TopicDirectory) -> None:
        self.directory = topics
        self.topic_stats = BrokerTopicStats()
        self.requests: dict[str, RequestMetrics] = {}
        self._by_key: dict[int, RequestMetrics] = {}  # api key -> its request name's metrics (one look-up)
        self._malformed: set[int] = set()  # api keys whose bodies could not be counted (logged once)

    def request_metrics(self, name: str) -> RequestMetrics:
        metrics = self.requests.get(name)
        if metrics is None:
            metrics = self.requests[name] = RequestMetrics()
        return metrics

    def _metrics_of(self, key: int) -> RequestMetrics:
        metrics = self._by_key.get(key)
        if metrics is None:
            metrics = self._by_key[key] = self.request_metrics(api_name(key))
        return metrics

    def on_response(self, response: Response) -> None:
        request = response.request
        key = request.context.api_key
        errors = self._metrics_of(key).errors
        body = response.body
        try:
            if key == ApiKey.PRODUCE:
                self._produce(request.body, body, errors)
            elif body is None:
                pass
            elif key == ApiKey.FETCH:
                self._fetch(request.context.api_version, fetch_replica_id(request.body) >= 0, body, errors)
            else:
                count_response_errors(key, body, errors)
        except (KeyError, IndexError, TypeError, AttributeError):  # a body not shaped as its api's: never fail
            if key not in self._malformed:  # the request over metrics
                self._malformed.add(key)
                log.exception("cannot count the metrics of a %s response (logged once per api)", api_name(key))

    def on_response_sent(self, response: Response) -> None:
        if not response.sent_ns:
            return
        ctx = response.request.context
        ms = (response.sent_ns - ctx.received_ns) / 1e6
        key = ctx.api_key
        self._metrics_of(key).total_time_ms.update(ms)
        if key == ApiKey.FETCH and response.request.body is not None:
            name = "FetchFollower" if fetch_replica_id(response.request.body) >= 0 else "FetchConsumer"
            self.request_metrics(name).total_time_ms.update(ms)

    def _produce(self, request: Any, body: Any, errors: dict[int, int]) -> None:
        """Per partition: appended (a base offset was assigned, or acks=0) -> bytes and messages in."""
        topic_data = request["topic_data"]
        if body is not None and len(topic_data) == 1:  # one partition appended: the usual case, in short
            td = topic_data[0]
            responses = body["responses"]
            if len(td["partition_data"]) == 1 and len(responses) == 1:
                parts = responses[0]["partition_responses"]
                records = td["partition_data"][0]["records"]
                if (len(parts) == 1 and not parts[0]["error_code"] and parts[0].get("base_offset", -1) >= 0
                        and records is not None and not isinstance(records, list)):
                    errors[0] = errors.get(0, 0) + 1
                    topic = self.topic_stats.topics.get(td["name"]) or self.topic_stats.topic(td["name"])
                    topic.total_produce += 1
                    topic.bytes_in += len(records)
                    topic.messages_in += count_records(records)
                    return
        responses = body["responses"] if body is not None else None
        n_responses = len(responses) if responses is not None else 0
        topics = self.topic_stats.topics
        for i, td in enumerate(request["topic_data"]):
            parts = responses[i]["partition_responses"] if responses is not None and i < n_responses else ()
            meters: TopicMeters | None = None
            for j, pd in enumerate(td["partition_data"]):
                if responses is None:  # acks=0: no response, no error to tell
                    code, appended = 0, True
                else:
                    entry = parts[j] if j < len(parts) else None
                    if entry is None:
                        code, appended = E.UNKNOWN_SERVER_ERROR, False
                    else:
                        code = entry["error_code"]
                        appended = entry.get("base_offset", -1) >= 0
                    errors[code] = errors.get(code, 0) + 1
                    if code == E.INVALID_RECORD and entry is not None:
                        self.topic_stats.no_key_compacted_records += sum(
                            1 for e in entry.get("record_errors") or ()
                            if (e.get("batch_index_error_message") or "").startswith(NO_KEY_COMPACTED_MESSAGE))
                    if code and code in UNKNOWN_TOPIC_ERRORS:
                        continue
                if meters is None:
                    meters = topics.get(td["name"]) or self.topic_stats.topic(td["name"])
                meters.total_produce += 1
                if appended:
                    records = pd["records"]
                    if records is not None and not isinstance(records, list):  # one buffer: the usual case
                        meters.bytes_in += len(records)
                        meters.messages_in += count_records(records)
                    else:
                        meters.bytes_in += records_size(records)
                        meters.messages_in += records_count(records)
                elif code in REJECTED_PRODUCE_ERRORS:
                    meters.bytes_rejected += records_size(pd["records"])
                if not appended and code not in EXPECTED_PRODUCE_ERRORS:
                    meters.failed_produce += 1

    def _fetch(self, version: int, follower: bool, body: Any, errors: dict[int, int]) -> None:
        """Per partition returned: bytes out (a follower's as replication bytes out)."""
        code = body.get("error_code")
        if code is not None:
            errors[code] = errors.get(code, 0) + 1
        for t in body["responses"]:
            name = t["topic"] if version < 13 else self._topic_name(t["topic_id"])
            meters = self.topic_stats.topic(name) if name else None
            for p in t["partitions"]:
                code = p["error_code"]
                errors[code] = errors.get(code, 0) + 1
                if meters is None or code in UNKNOWN_TOPIC_ERRORS:
                    continue
                meters.total_fetch += 1
                if code:
                    if code not in EXPECTED_FETCH_ERRORS:
                        meters.failed_fetch += 1
                elif follower:
                    self.topic_stats.replication_bytes_out += records_size(p.get("records"))
                else:
                    meters.bytes_out += records_size(p.get("records"))

    def _topic_name(self, topic_id: uuid.UUID) -> str | None:
        topic = self.directory.get_topic_by_id(topic_id)
        return topic.name if topic is not None else None

    def metrics(self) -> dict[str, float]:
        """The meters and histograms under Kafka's JMX names; a histogram's attributes are
        ``<bean>:<attribute>`` (``...,name=TotalTimeMs,request=Produce:99thPercentile``, as JmxTool prints
        them).  Meters of topics that no longer exist are dropped first."""
        stats = self.topic_stats
        stats.remove_topics(name for name in stats.topics if self.directory.get_topic(name) is None)
        out = stats.metrics()
        for name, metrics in sorted(self.requests.items()):
            out.update(metrics.metrics(name))
        return out


class MemoryPoolGauge(Protocol):
    size: int  # < 0: unbounded
    used: int


class Purgatory(Protocol):
    name: str

    def watched(self) -> int: ...


def server_metrics(pool: MemoryPoolGauge, open_connections: int, purgatories: Iterable[Purgatory],
                   listener: str = "PLAINTEXT") -> dict[str, float]:
    """Kafka's ``SocketServer`` memory pool gauges, the listener's ``connection-count`` and each
    ``DelayedOperationPurgatory``'s ``PurgatorySize`` (watch registrations)."""
    out: dict[str, float] = {"kafka.network:type=SocketServer,name=MemoryPoolUsed": pool.used}
    if pool.size >= 0:
        out["kafka.network:type=SocketServer,name=MemoryPoolAvailable"] = pool.size - pool.used
    out[f"kafka.server:type=socket-server-metrics,name=connection-count,listener={listener}"] = open_connections
    for p in purgatories:
        out[f"kafka.server:type=DelayedOperationPurgatory,name=PurgatorySize,delayedOperation={p.name}"] = p.watched()
    return out
