"""Fault injection: rules that make the broker answer, delay, hold or drop chosen requests.

What franz-go's kfake does with request interception and librdkafka's mock
cluster with ``rd_kafka_mock_push_request_errors``/``..._set_rtt``, as a rule
engine in the request path: :class:`~minikafka.broker.apis.KafkaApis` asks the
:class:`FaultInjector` about every parsed request *before* its handler runs, so
any API can be faulted.  A :class:`FaultRule` matches on

* ``api`` (name such as ``"Produce"`` or key) and a version range
  (``min_version``/``max_version``), ``client_id`` (a glob), ``broker`` (node id);
* ``topic`` (a glob) and ``partition``: the request must name one (wherever its declaration tags a topic
  name, id or partition: :mod:`minikafka.protocol.entities`; a topic given by id, as in Fetch v13+ or
  Produce v13, is matched by the topic's name);

and acts by one or more of

* ``error``: a Kafka error name or code, for the whole response (every
  partition/resource the request named, as Kafka's ``getErrorResponse``) or,
  with ``per_partition``, only on the matching partitions while the others are
  handled normally;
* ``latency_ms``: the request waits that long before it is handled;
* ``drop``: ``"before"`` closes the connection without handling the request,
  ``"after"`` handles it and closes the connection instead of answering;
* ``hold``: the response waits ``hold_ms``, or until the rule is removed.

A rule applies to the next ``count`` matching requests (all when None), each
with ``probability``, from ``after_ms`` after it was added and for ``for_ms``.
Every matching rule applies, in the order they were added (latencies add up;
the first error, drop and hold win).  The injector is shared by a cluster's
brokers; rules are added from any thread (tests, the HTTP API) and counted per
broker, api and action (``metrics``).  Deliberate difference from kfake: rules
are data (JSON over HTTP), not callbacks.
"""

from __future__ import annotations

import fnmatch
import functools
import itertools
import logging
import random
import threading
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, fields
from typing import Any

import trio

from ..common import SYSTEM_CLOCK, Clock
from ..protocol.api import APIS
from ..protocol.entities import Entity, TopicEntry, TopicLayout, topic_entries, topic_layouts, values
from ..protocol.schema import Field, Message, struct_default
from ..protocol.errors import ErrorCode

log = logging.getLogger(__name__)

__all__ = ["FaultRule", "FaultInjector", "FaultPlan", "PER_PARTITION_APIS", "partition_layout",
           "partition_errors", "api_key_for", "error_code_for_name"]

_API_BY_NAME = {a.name.lower(): k for k, a in APIS.items()}


@dataclass(frozen=True, slots=True)
class PartitionLayout:
    """Where a request and its response list topics and partitions, from their declarations' tags: the
    top-level topic entries of each whose partitions are structs (the response's carrying an error code)."""

    request: TopicLayout
    response: TopicLayout


def _partition_structs(message: Message, version: int | None, error_code: bool) -> TopicLayout | None:
    for layout in topic_layouts(message, version):
        if len(layout.path) == 1 and not layout.single and layout.partitions and layout.partition:
            if not error_code or _has_error_code(message.fields, layout):
                return layout
    return None


def _has_error_code(fields: list[Field], layout: TopicLayout) -> bool:
    entry = next(fl for fl in fields if fl.name == layout.path[0])
    parts = next(fl for fl in entry.subfields if fl.name == layout.partitions)
    return any(fl.name == "error_code" for fl in parts.subfields)


@functools.lru_cache(maxsize=None)
def partition_layout(api_key: int, version: int | None = None) -> PartitionLayout | None:
    """The layout ``per_partition`` errors use for an api at ``version`` (None: at any version), or None when
    its responses carry no error per partition."""
    api = APIS.get(api_key)
    if api is None:
        return None
    request = _partition_structs(api.request, version, False)
    response = _partition_structs(api.response, version, True)
    return None if request is None or response is None else PartitionLayout(request, response)


#: APIs whose responses carry an error per partition (at some version): ``per_partition`` errors work on these.
PER_PARTITION_APIS: frozenset[int] = frozenset(k for k in APIS if partition_layout(k) is not None)


def api_key_for(api: str | int) -> int:
    """An api key from a name (``"Produce"``, case-insensitive) or a number; ValueError if unknown."""
    if isinstance(api, int) or (isinstance(api, str) and api.isdigit()):
        key = int(api)
        if key not in APIS:
            raise ValueError(f"unknown api key {key}")
        return key
    try:
        return _API_BY_NAME[str(api).lower()]
    except KeyError:
        raise ValueError(f"unknown api {api!r} (one of {', '.join(sorted(a.name for a in APIS.values()))})") from None


def error_code_for_name(error: str | int) -> ErrorCode:
    """A Kafka error code from its name (``"NOT_LEADER_OR_FOLLOWER"``) or number; ValueError if unknown."""
    try:
        if isinstance(error, int) or str(error).lstrip("-").isdigit():
            return ErrorCode(int(error))
        return ErrorCode[str(error).upper()]
    except (KeyError, ValueError):
        raise ValueError(f"unknown Kafka error {error!r}") from None


_FIELD_TYPES: dict[str, tuple[type, ...]] = {
    "api": (str, int), "error": (str, int), "client_id": (str,), "topic": (str,), "drop": (str,),
    "min_version": (int,), "max_version": (int,), "partition": (int,), "broker": (int,), "count": (int,),
    "per_partition": (bool,), "hold": (bool,),
    "latency_ms": (int, float), "hold_ms": (int, float), "probability": (int, float), "after_ms": (int, float),
    "for_ms": (int, float),
}


@dataclass(slots=True)
class FaultRule:
    """One rule: what it matches, what it does, for how long; ``id`` and counts are the injector's."""

    api: str | int | None = None
    min_version: int | None = None
    max_version: int | None = None
    client_id: str | None = None
    topic: str | None = None
    partition: int | None = None
    broker: int | None = None
    error: str | int | None = None
    per_partition: bool = False
    latency_ms: float = 0
    drop: str | None = None  # "before" or "after"
    hold: bool = False
    hold_ms: float | None = None
    count: int | None = None
    probability: float = 1.0
    after_ms: float = 0
    for_ms: float | None = None
    # Set by the injector.
    id: int = 0
    matched: int = 0
    added_ns: int = 0
    api_key: int | None = field(default=None, repr=False)
    error_code: ErrorCode | None = field(default=None, repr=False)

    def validate(self) -> None:
        """Check and normalise the fields; ValueError explains what is wrong."""
        for f in fields(self):
            if f.name in _FIELD_TYPES:
                value = getattr(self, f.name)
                kinds = _FIELD_TYPES[f.name]
                if value is not None and (not isinstance(value, kinds) or (isinstance(value, bool)
                                                                            and bool not in kinds)):
                    raise ValueError(f"{f.name} must be {' or '.join(k.__name__ for k in kinds)}, "
                                     f"not {value!r}")
        self.api_key = None if self.api is None else api_key_for(self.api)
        if self.api_key is not None:
            self.api = APIS[self.api_key].name
        self.error_code = None if self.error is None else error_code_for_name(self.error)
        if self.error_code is not None:
            self.error = self.error_code.name
        if self.drop not in (None, "before", "after"):
            raise ValueError(f"drop must be 'before' or 'after', not {self.drop!r}")
        if self.error_code is None and not self.latency_ms and self.drop is None and not self.hold \
                and self.hold_ms is None:
            raise ValueError("a fault rule needs an action: error, latency_ms, drop, hold or hold_ms")
        if self.per_partition:
            if self.error_code is None:
                raise ValueError("per_partition needs an error")
            if self.api_key not in PER_PARTITION_APIS:
                raise ValueError("per_partition errors need api one of "
                                 + ", ".join(APIS[k].name for k in sorted(PER_PARTITION_APIS)))
        if self.partition is not None and self.topic is None:
            raise ValueError("partition needs topic")
        if self.count is not None and self.count < 1:
            raise ValueError("count must be at least 1")
        if not 0 <= self.probability <= 1:
            raise ValueError("probability must be between 0 and 1")
        for name in ("latency_ms", "after_ms"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must not be negative")
        for name in ("hold_ms", "for_ms"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise ValueError(f"{name} must not be negative")

    @property
    def remaining(self) -> int | None:
        """How many more requests the rule will fault (None: no limit)."""
        return None if self.count is None else max(self.count - self.matched, 0)

    @property
    def actions(self) -> list[str]:
        out = []
        if self.latency_ms:
            out.append(f"latency={self.latency_ms:g}ms")
        if self.drop == "before":
            out.append("drop=before")
        if self.error_code is not None:
            out.append(f"error={self.error}" + ("/partition" if self.per_partition else ""))
        if self.hold or self.hold_ms is not None:
            out.append("hold" if self.hold_ms is None else f"hold={self.hold_ms:g}ms")
        if self.drop == "after":
            out.append("drop=after")
        return out

    def describe(self) -> str:
        """``#<id> <actions>``: what capture and logs record for an injected response."""
        return f"#{self.id} " + ",".join(self.actions)

    def to_json(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self)
               if f.name not in ("api_key", "error_code", "added_ns")}
        out["remaining"] = self.remaining
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> FaultRule:
        """A rule from the JSON fields (the dataclass's field names); unknown fields are an error."""
        allowed = {f.name for f in fields(cls)} - {"id", "matched", "added_ns", "api_key", "error_code"}
        unknown = set(data) - allowed
        if unknown:
            raise ValueError(f"unknown fault rule field(s): {', '.join(sorted(unknown))}")
        return cls(**data)


@dataclass(slots=True)
class FaultPlan:
    """What the matching rules do to one request (built by :meth:`FaultInjector.match`)."""

    rules: list[FaultRule]
    latency_s: float = 0.0
    drop_before: bool = False
    error: FaultRule | None = None
    hold: FaultRule | None = None
    drop_after: bool = False
    _injector: FaultInjector | None = None

    @property
    def description(self) -> str:
        return "; ".join(r.describe() for r in self.rules)

    async def delay(self) -> None:
        if self.latency_s:
            await trio.sleep(self.latency_s)

    async def wait_hold(self) -> None:
        """Hold the response for ``hold_ms``, or until the rule is removed."""
        rule = self.hold
        if rule is None or self._injector is None:
            return
        if rule.hold_ms is not None:
            await trio.sleep(rule.hold_ms / 1000)
        else:
            await self._injector.wait_removed(rule)

    def partition_faulted(self, topic: str | None, partition: int) -> bool:
        """Whether a per-partition error applies to this partition."""
        rule = self.error
        assert rule is not None
        return _topic_matches(rule, topic) and (rule.partition is None or rule.partition == partition)


def _topic_matches(rule: FaultRule, topic: str | None) -> bool:
    return rule.topic is None or (topic is not None and fnmatch.fnmatchcase(topic, rule.topic))


TopicNames = Callable[[uuid.UUID], "str | None"]


def request_partitions(api_key: int, version: int, body: Any, topic_name: TopicNames | None = None
                       ) -> Iterator[tuple[str | None, int | None]]:
    """(topic, partition) pairs a request names (partition None where it names a topic without partitions):
    its topic entries, then any other topic names it lists."""
    api = APIS.get(api_key)
    if api is None or not api.request.supports(version):
        return
    message = api.request
    entries = topic_layouts(message, version)
    for entry in topic_entries(body, message, version):
        name = topic_of(entry, topic_name)
        if entry.partitions:
            for partition, _struct in entry.partitions:
                yield name, partition
        else:
            yield name, None
    in_entries = {lay.path + (lay.name,) for lay in entries if lay.name}
    for ef, value in values(body, message, version, Entity.TOPIC_NAME):
        if ef.path not in in_entries:
            yield value, None


def topic_of(entry: TopicEntry, topic_name: TopicNames | None) -> str | None:
    """An entry's topic name, looking up its topic id when it has no name (Fetch v13+, Produce v13)."""
    if entry.name:
        return entry.name
    if entry.topic_id is not None and topic_name is not None:
        return topic_name(entry.topic_id)
    return None


class FaultInjector:
    """The rules and their counts; thread-safe.  ``clock`` times the windows, ``rng`` the probabilities."""

    def __init__(self, clock: Clock = SYSTEM_CLOCK, rng: random.Random | None = None) -> None:
        self.clock = clock
        self.rng = rng or random.Random()
        self._lock = threading.Lock()
        self._rules: list[FaultRule] = []
        #: Whether any rule exists: the request path's one check (False: no request pays for fault injection).
        self.active = False
        self._ids = itertools.count(1)
        self._waiters: dict[int, list[tuple[trio.lowlevel.TrioToken, trio.Event]]] = {}
        #: (broker id, api name, action) -> faults injected
        self.injected: Counter[tuple[int, str, str]] = Counter()

    # -- the Python API ------------------------------------------------------------------------
    def add(self, rule: FaultRule | None = None, /, **fields_: Any) -> FaultRule:
        """Add a rule (a :class:`FaultRule` or its fields as keywords) and return it with its id."""
        rule = rule if rule is not None else FaultRule.from_json(fields_)
        rule.validate()
        with self._lock:
            rule.id = next(self._ids)
            rule.matched = 0
            rule.added_ns = self.clock.monotonic_ns()
            self._rules.append(rule)
            self.active = True
        log.info("fault rule added: %s", rule)
        return rule

    def rules(self) -> list[FaultRule]:
        with self._lock:
            return list(self._rules)

    def as_json(self) -> list[dict[str, Any]]:
        """The rules as JSON-ready dicts, with matched and remaining counts."""
        with self._lock:
            return [r.to_json() for r in self._rules]

    def remove(self, rule_id: int) -> bool:
        """Remove one rule (releasing requests it holds); False if there is none by that id."""
        with self._lock:
            kept = [r for r in self._rules if r.id != rule_id]
            found = len(kept) != len(self._rules)
            self._rules = kept
            self.active = bool(kept)
        self._release([rule_id])
        return found

    def clear(self) -> int:
        """Remove every rule (releasing held requests); returns how many there were."""
        with self._lock:
            removed = [r.id for r in self._rules]
            self._rules = []
            self.active = False
        self._release(removed)
        return len(removed)

    def metrics(self, broker_id: int) -> dict[str, float]:
        """This broker's injected-fault counts under JMX-style names."""
        with self._lock:
            counts = [(k, n) for k, n in self.injected.items() if k[0] == broker_id]
        return {f"kafka.server:type=FaultInjector,name=InjectedFaultsTotal,request={api},action={action}": n
                for (_b, api, action), n in counts}

    # -- the request path ----------------------------------------------------------------------
    def match(self, broker_id: int, api_key: int, api_version: int, client_id: str | None, body: Any,
              topic_name: TopicNames | None = None) -> FaultPlan | None:
        """The faults for one request, counting them; None when no rule applies."""
        if not self._rules:
            return None
        now = self.clock.monotonic_ns()
        plan: FaultPlan | None = None
        with self._lock:
            for rule in self._rules:
                if not self._applies(rule, now, broker_id, api_key, api_version, client_id, body, topic_name):
                    continue
                rule.matched += 1
                plan = plan or FaultPlan([], _injector=self)
                plan.rules.append(rule)
                api = APIS[api_key].name
                for action in rule.actions:
                    self.injected[(broker_id, api, action.partition("=")[0])] += 1
                plan.latency_s += rule.latency_ms / 1000
                plan.drop_before = plan.drop_before or rule.drop == "before"
                plan.drop_after = plan.drop_after or rule.drop == "after"
                if rule.error_code is not None and plan.error is None:
                    plan.error = rule
                if (rule.hold or rule.hold_ms is not None) and plan.hold is None:
                    plan.hold = rule
        return plan

    def _applies(self, rule: FaultRule, now: int, broker_id: int, api_key: int, api_version: int,
                 client_id: str | None, body: Any, topic_name: TopicNames | None) -> bool:
        if rule.count is not None and rule.matched >= rule.count:
            return False
        if rule.api_key is not None and rule.api_key != api_key:
            return False
        if rule.min_version is not None and api_version < rule.min_version:
            return False
        if rule.max_version is not None and api_version > rule.max_version:
            return False
        if rule.broker is not None and rule.broker != broker_id:
            return False
        if rule.client_id is not None and not fnmatch.fnmatchcase(client_id or "", rule.client_id):
            return False
        elapsed_ms = (now - rule.added_ns) / 1e6
        if elapsed_ms < rule.after_ms or (rule.for_ms is not None and elapsed_ms >= rule.after_ms + rule.for_ms):
            return False
        if rule.topic is not None and body is not None:
            if not any(_topic_matches(rule, t) and (rule.partition is None or rule.partition == p)
                       for t, p in request_partitions(api_key, api_version, body, topic_name)):
                return False
        elif rule.topic is not None:
            return False
        return rule.probability >= 1 or self.rng.random() < rule.probability

    async def wait_removed(self, rule: FaultRule) -> None:
        """Wait until ``rule`` is removed or cleared (from any thread)."""
        event = trio.Event()
        entry = (trio.lowlevel.current_trio_token(), event)
        with self._lock:
            if not any(r.id == rule.id for r in self._rules):
                return
            self._waiters.setdefault(rule.id, []).append(entry)
        try:
            await event.wait()
        finally:
            with self._lock:
                waiting = self._waiters.get(rule.id)
                if waiting is not None and entry in waiting:
                    waiting.remove(entry)

    def _release(self, rule_ids: list[int]) -> None:
        with self._lock:
            waiting = [w for i in rule_ids for w in self._waiters.pop(i, [])]
        for token, event in waiting:
            try:
                token.run_sync_soon(event.set)
            except trio.RunFinishedError:
                pass


@dataclass(slots=True)
class BrokerFaults:
    """The injector as one broker sees it: its node id and how it names topics given by id."""

    injector: FaultInjector
    broker_id: int
    topic_name: TopicNames | None = None

    def match(self, api_key: int, api_version: int, client_id: str | None, body: Any) -> FaultPlan | None:
        return self.injector.match(self.broker_id, api_key, api_version, client_id, body, self.topic_name)


def _entries(message: Message, version: int, layout: TopicLayout, body: Any, topic_name: TopicNames | None
             ) -> Iterator[tuple[dict, str | None, list[tuple[int, dict]]]]:
    """(entry, topic name, [(partition number, partition struct)]) of a body's topic entries at ``layout``."""
    for e in topic_entries(body, message, version):
        if e.layout == layout:
            yield e.entry, topic_of(e, topic_name), list(e.partitions)


def split_request(api_key: int, version: int, body: Any, plan: FaultPlan, topic_name: TopicNames | None
                  ) -> tuple[dict, dict]:
    """(faulted, kept): copies of a partition request's body with the partitions a per-partition
    error applies to, and with the others."""
    layout = partition_layout(api_key, version)
    assert layout is not None
    req = layout.request
    assert req.partitions is not None
    faulted_topics: list[dict] = []
    kept_topics: list[dict] = []
    for t, name, parts in _entries(APIS[api_key].request, version, req, body, topic_name):
        hit = [p for index, p in parts if plan.partition_faulted(name, index)]
        miss = [p for index, p in parts if not plan.partition_faulted(name, index)]
        if hit:
            faulted_topics.append({**t, req.partitions: hit})
        if miss:
            kept_topics.append({**t, req.partitions: miss})
    return {**body, req.path[0]: faulted_topics}, {**body, req.path[0]: kept_topics}


def partition_errors(api_key: int, version: int, faulted: dict, code: int) -> dict:
    """A response body answering every partition of ``faulted`` (a request body) with ``code``, the other
    fields at their declared defaults: for an api whose error response (Kafka's ``getErrorResponse``) carries
    only a top-level error."""
    layout = partition_layout(api_key, version)
    assert layout is not None
    req, resp = layout.request, layout.response
    assert resp.partitions is not None and resp.partition is not None
    entry_fields = _subfields(APIS[api_key].response.fields, resp.path[0])
    part_fields = _subfields(entry_fields, resp.partitions)
    topics = []
    for t, _name, parts in _entries(APIS[api_key].request, version, req, faulted, None):
        entry = struct_default(entry_fields)
        if resp.name and req.name:
            entry[resp.name] = t.get(req.name)
        if resp.topic_id and req.topic_id:
            entry[resp.topic_id] = t.get(req.topic_id)
        entry[resp.partitions] = [{**struct_default(part_fields), resp.partition: index, "error_code": code}
                                  for index, _p in parts]
        topics.append(entry)
    return {resp.path[0]: topics}


def _subfields(fields: list[Field], name: str) -> list[Field]:
    return next(fl for fl in fields if fl.name == name).subfields


def merge_partition_errors(api_key: int, version: int, handled: dict, errors: dict, plan: FaultPlan,
                           topic_name: TopicNames | None) -> dict:
    """The handler's response with the injected error entries added (and any faulted partition the
    handler answered anyway, e.g. from a fetch session, replaced by its error)."""
    layout = partition_layout(api_key, version)
    assert layout is not None
    resp = layout.response
    assert resp.partitions is not None
    by_topic: dict[str | None, dict] = {}
    merged = []
    for t, name, parts in _entries(APIS[api_key].response, version, resp, handled, topic_name):
        kept = [p for index, p in parts if not plan.partition_faulted(name, index)]
        if kept:
            entry = {**t, resp.partitions: kept}
            by_topic[name] = entry
            merged.append(entry)
    for t, name, _parts in _entries(APIS[api_key].response, version, resp, errors, topic_name):
        if name in by_topic:
            by_topic[name][resp.partitions].extend(t[resp.partitions])
        else:
            merged.append(t)
    return {**handled, resp.path[0]: merged}
