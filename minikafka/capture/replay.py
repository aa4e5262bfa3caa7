"""Wire replay of a traffic capture against another Kafka broker, comparing every response.

Resembles traffic shadowing/replay tools (``tcpreplay``, GoReplay, Kafka's
``kafka-producer-perf-test`` driven by recorded traffic) but works at the
Kafka protocol level: each captured connection is re-opened as one TCP
connection to the target and its request frames are re-sent in order, with
fresh correlation ids (a map new -> original is kept).  Every response is
decoded with :mod:`minikafka.protocol` next to the captured one and compared
field by field.

Ordering and pacing:

* within a connection requests go out in capture order with at most
  ``max_in_flight`` outstanding (Kafka clients pipeline up to 5);
* causality: a request is held until every request whose captured response was
  sent before it was received has been answered in the replay (on the same
  connection, or on any connection with ``causality="global"``, the default),
  so a consumer never fetches before the produce it saw in the capture, and a
  SyncGroup never goes out before its JoinGroup's answer;
* pacing: at ``speed`` x, request *i* is due at
  ``start + (receive_ns_i - first receive_ns of the capture) / speed``;
  ``speed=None`` ("max") sends as soon as order and causality allow.

Values a broker makes up differ between runs; they are mapped, not compared:
fetch session ids, topic ids, group member ids and generations, producer ids
and epochs (InitProducerId), node ids.  The first response that shows a value
teaches the map captured -> replayed; later requests are rewritten through it
(FetchRequest.session_id and topic ids, group requests' member id and
generation, and the producer id/epoch inside Produce record batches, whose
CRC-32C is recomputed) and later responses compared through it.  Fields that
legitimately differ (throttle time, cluster id, host/port, log-append
timestamps, batch CRCs) are counted as expected differences.

Differences from a real client: no reconnects (a connection the target closes
stays closed; its remaining requests are counted as not sent), no
metadata-driven routing (every connection goes to the one ``--to`` target), and
requests of api keys minikafka does not know are sent verbatim and compared as
raw bytes.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import logging
import math
import re
import struct
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio
from crc32c import crc32c

from ..protocol.api import APIS, ApiKey
from ..protocol.errors import ErrorCode
from ..protocol.records import LOG_APPEND_TIME, iter_batches
from ..protocol.types import ZERO_UUID
from .format import CaptureRecord, ReadStats, read_capture
from .frames import (
    api_name,
    parse_request_frame,
    parse_response_frame,
    rewrite_correlation_id,
)

log = logging.getLogger(__name__)

__all__ = [
    "ApiStats", "ConnKey", "ReplayOptions", "ReplayReport", "group_connections", "parse_speed",
    "parse_target", "replay_capture", "replay_records", "rewrite_producer_ids", "run_replay",
]

DEFAULT_MAX_IN_FLIGHT = 5
DEFAULT_TIMEOUT_S = 30.0
DEFAULT_EXAMPLES = 5

ConnKey = tuple[int, str]  # (broker id, connection id) of the capture

_SIZE = struct.Struct(">i")
_PID = struct.Struct(">q")
_EPOCH = struct.Struct(">h")
_CRC = struct.Struct(">I")
_BATCH_PID_OFFSET, _BATCH_EPOCH_OFFSET, _BATCH_CRC_OFFSET, _BATCH_ATTR_OFFSET = 43, 51, 17, 21

#: Response fields that differ between runs by design: counted, never compared.
IGNORED_FIELDS = frozenset({"throttle_time_ms", "cluster_id", "host", "port", "log_append_time_ms"})
#: Fields holding values a broker makes up, compared (and rewritten in requests) through a map.
_MAPPED_KIND = {
    "session_id": "session", "topic_id": "topic", "member_id": "member", "leader": "member",
    "generation_id": "gen", "generation_id_or_member_epoch": "gen",
    "producer_id": "pid", "producer_epoch": "epoch",
    "node_id": "node", "leader_id": "node", "controller_id": "node", "broker_id": "node",
    "replica_nodes": "node", "isr_nodes": "node", "offline_replicas": "node", "preferred_read_replica": "node",
}
#: The mapped fields rewritten in requests (node ids are only compared).
_REQUEST_KINDS = frozenset({"session", "topic", "member", "gen", "pid", "epoch"})
_BATCH_FIELDS = ("partition_leader_epoch", "magic", "attributes", "last_offset_delta", "base_timestamp",
                 "max_timestamp", "producer_id", "producer_epoch", "base_sequence", "record_count")


# ----------------------------------------------------------------------------------------------
# Options and report
# ----------------------------------------------------------------------------------------------


def parse_speed(text: str) -> float | None:
    """``"max"`` -> None, ``"2x"``/``"0.5x"``/``"2"`` -> the factor."""
    t = text.strip().lower()
    if t == "max":
        return None
    value = float(t.removesuffix("x"))
    if not value > 0 or math.isinf(value):
        raise ValueError(f"speed must be a positive factor like 1x, or max, not {text!r}")
    return value


def parse_target(text: str) -> tuple[str, int]:
    """``host:port`` (``[v6addr]:port`` too)."""
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError(f"expected HOST:PORT, got {text!r}")
    return host.strip("[]"), int(port)


@dataclass
class ReplayOptions:
    """How to replay: where to, how fast, how much to wait for."""

    host: str
    port: int
    speed: float | None = 1.0  # None = as fast as order and causality allow ("max")
    max_in_flight: int = DEFAULT_MAX_IN_FLIGHT
    timeout_s: float = DEFAULT_TIMEOUT_S
    connect_timeout_s: float = 10.0
    causality: str = "global"  # "global" | "connection"
    max_examples: int = DEFAULT_EXAMPLES
    #: Wall-clock ns at which capture time ``first_ns`` is replayed (Spark tasks share it); None = now.
    base_time_ns: int | None = None
    #: Capture time replayed at the base time; None = the first receive time of the records replayed.
    first_ns: int | None = None

    @property
    def target(self) -> str:
        return f"{self.host}:{self.port}"


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    s = sorted(values)
    return s[min(len(s) - 1, max(0, math.ceil(q * len(s)) - 1))]


@dataclass
class ApiStats:
    """What happened to one api key's requests."""

    api_key: int
    sent: int = 0
    received: int = 0
    no_response_expected: int = 0  # acks=0 produce
    equal: int = 0
    differing: int = 0
    timeouts: int = 0
    lost: int = 0  # sent, then the connection closed before the response
    not_sent: int = 0  # the connection was refused or already closed
    rewritten: int = 0  # requests whose body was rewritten through the maps
    examples: list[dict] = field(default_factory=list)
    differing_fields: Counter = field(default_factory=Counter)
    expected_differences: Counter = field(default_factory=Counter)
    error_changes: Counter = field(default_factory=Counter)
    replayed_errors: Counter = field(default_factory=Counter)
    captured_latency_ms: list[float] = field(default_factory=list)
    replayed_latency_ms: list[float] = field(default_factory=list)

    @property
    def name(self) -> str:
        return api_name(self.api_key)

    def merge(self, other: ApiStats, max_examples: int = DEFAULT_EXAMPLES) -> ApiStats:
        for name in ("sent", "received", "no_response_expected", "equal", "differing", "timeouts", "lost",
                     "not_sent", "rewritten"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.examples.extend(other.examples[:max(0, max_examples - len(self.examples))])
        for name in ("differing_fields", "expected_differences", "error_changes", "replayed_errors"):
            getattr(self, name).update(getattr(other, name))
        self.captured_latency_ms.extend(other.captured_latency_ms)
        self.replayed_latency_ms.extend(other.replayed_latency_ms)
        return self

    def to_dict(self) -> dict:
        def lat(values: list[float]) -> dict:
            p50, p99 = _percentile(values, 0.5), _percentile(values, 0.99)
            return {"p50_ms": None if p50 is None else round(p50, 3),
                    "p99_ms": None if p99 is None else round(p99, 3), "count": len(values)}

        return {
            "api_key": self.api_key, "api": self.name, "sent": self.sent, "received": self.received,
            "no_response_expected": self.no_response_expected, "equal": self.equal, "differing": self.differing,
            "timeouts": self.timeouts, "lost": self.lost, "not_sent": self.not_sent, "rewritten": self.rewritten,
            "error_changes": dict(self.error_changes), "replayed_errors": dict(self.replayed_errors),
            "differing_fields": dict(self.differing_fields.most_common()),
            "expected_differences": dict(self.expected_differences.most_common()),
            "examples": list(self.examples),
            "latency": {"captured": lat(self.captured_latency_ms), "replayed": lat(self.replayed_latency_ms)},
        }


@dataclass
class ReplayReport:
    """The outcome of one replay (or of several merged: Spark tasks)."""

    target: str
    speed: float | None
    connections: int = 0
    connections_failed: int = 0
    connection_errors: list[dict] = field(default_factory=list)
    per_api: dict[int, ApiStats] = field(default_factory=dict)
    duration_s: float = 0.0
    mappings: dict[str, dict] = field(default_factory=dict)  # kind -> {"mapped", "changed", "examples"}
    unexpected_responses: int = 0
    tasks: int = 1
    max_examples: int = DEFAULT_EXAMPLES

    def api(self, api_key: int) -> ApiStats:
        st = self.per_api.get(api_key)
        if st is None:
            st = self.per_api[api_key] = ApiStats(api_key)
        return st

    def by_name(self, name: str) -> ApiStats:
        """The stats of an api by Kafka's name ("Produce"); empty stats if it was not replayed."""
        for st in self.per_api.values():
            if st.name == name:
                return st
        return ApiStats(next((int(k) for k in ApiKey if api_name(k) == name), -1))

    def _total(self, name: str) -> int:
        return sum(getattr(s, name) for s in self.per_api.values())

    @property
    def requests(self) -> int:
        return self._total("sent") + self._total("not_sent")

    @property
    def sent(self) -> int:
        return self._total("sent")

    @property
    def received(self) -> int:
        return self._total("received")

    @property
    def failed(self) -> int:
        return self._total("timeouts") + self._total("lost") + self._total("not_sent")

    @property
    def rate(self) -> float:
        """Requests sent per second of replay."""
        return self.sent / self.duration_s if self.duration_s > 0 else 0.0

    def merge(self, other: ReplayReport) -> ReplayReport:
        """Add ``other`` (another task's report over other connections) into this one; returns self."""
        self.connections += other.connections
        self.connections_failed += other.connections_failed
        self.connection_errors.extend(other.connection_errors)
        for key, st in other.per_api.items():
            self.api(key).merge(st, self.max_examples)
        self.duration_s = max(self.duration_s, other.duration_s)
        for kind, m in other.mappings.items():
            mine = self.mappings.setdefault(kind, {"mapped": 0, "changed": 0, "examples": []})
            mine["mapped"] += m["mapped"]
            mine["changed"] += m["changed"]
            mine["examples"] = (mine["examples"] + m["examples"])[:10]
        self.unexpected_responses += other.unexpected_responses
        self.tasks += other.tasks
        return self

    @classmethod
    def combine(cls, reports: Iterable[ReplayReport]) -> ReplayReport:
        reports = list(reports)
        if not reports:
            raise ValueError("no reports to combine")
        out = cls(reports[0].target, reports[0].speed, tasks=0, max_examples=reports[0].max_examples)
        for r in reports:
            out.merge(r)
        return out

    def to_dict(self) -> dict:
        return {
            "target": self.target, "speed": "max" if self.speed is None else f"{self.speed:g}x",
            "connections": self.connections, "connections_failed": self.connections_failed,
            "connection_errors": list(self.connection_errors), "requests": self.requests, "sent": self.sent,
            "received": self.received, "failed": self.failed, "duration_s": round(self.duration_s, 3),
            "requests_per_s": round(self.rate, 1), "tasks": self.tasks,
            "unexpected_responses": self.unexpected_responses, "mappings": self.mappings,
            "per_api": {st.name: st.to_dict() for _, st in sorted(self.per_api.items())},
        }

    def summary(self) -> str:
        """A readable table (what ``minikafka replay`` prints)."""
        speed = "max speed" if self.speed is None else f"{self.speed:g}x"
        lines = [f"replayed {self.sent} of {self.requests} request(s) on {self.connections} connection(s) to "
                 f"{self.target} at {speed} in {self.duration_s:.3f} s ({self.rate:.0f} req/s)"
                 + (f", {self.tasks} task(s)" if self.tasks > 1 else "")]
        if self.connections_failed:
            lines.append(f"connections failed: {self.connections_failed}")
            for e in self.connection_errors[:5]:
                lines.append(f"  {e['connection']}: {e['error']}")
        head = (f"{'api':<18} {'sent':>6} {'recv':>6} {'equal':>6} {'differ':>6} {'tmo':>4} {'lost':>5} "
                f"{'unsent':>6} {'p50 cap/rep ms':>16} {'p99 cap/rep ms':>16}")
        lines += [head, "-" * len(head)]

        def ms(v: float | None) -> str:
            return "-" if v is None else f"{v:.1f}"

        for _, st in sorted(self.per_api.items()):
            c, r = st.captured_latency_ms, st.replayed_latency_ms
            p50 = f"{ms(_percentile(c, .5))}/{ms(_percentile(r, .5))}"
            p99 = f"{ms(_percentile(c, .99))}/{ms(_percentile(r, .99))}"
            lines.append(f"{st.name:<18} {st.sent:>6} {st.received:>6} {st.equal:>6} {st.differing:>6} "
                         f"{st.timeouts:>4} {st.lost:>5} {st.not_sent:>6} {p50:>16} {p99:>16}")
        changes = [(st.name, ch, n) for _, st in sorted(self.per_api.items()) for ch, n in st.error_changes.items()]
        if changes:
            lines.append("error code changes:")
            lines += [f"  {name}: {ch} x{n}" for name, ch, n in changes]
        examples = [(st.name, ex) for _, st in sorted(self.per_api.items()) for ex in st.examples]
        if examples:
            lines.append("differences (examples):")
            for name, ex in examples[:3 * self.max_examples]:
                mapped = f" (expected {ex['expected']!r})" if "expected" in ex else ""
                lines.append(f"  {name} corr {ex['correlation_id']} (conn {ex['connection']}): {ex['path']}: "
                             f"{ex['captured']!r} -> {ex['replayed']!r}{mapped}")
        expected = Counter()
        for st in self.per_api.values():
            expected.update(st.expected_differences)
        if expected:
            lines.append("expected differences (ignored): "
                         + ", ".join(f"{k} x{n}" for k, n in expected.most_common(8)))
        mapped = [f"{kind} {m['changed']}/{m['mapped']}" for kind, m in sorted(self.mappings.items()) if m["mapped"]]
        if mapped:
            lines.append("values mapped (changed/seen): " + ", ".join(mapped))
        return "\n".join(lines)


# ----------------------------------------------------------------------------------------------
# Maps of made-up values, and causality
# ----------------------------------------------------------------------------------------------


class _Mapper:
    """captured -> replayed values per key (``("session", broker, id)``, ``("member", id)`` ...).

    Keys some captured response is known to introduce are *expected*: a request
    that needs one waits until the record introducing it has been replayed.
    """

    def __init__(self) -> None:
        self.values: dict[tuple, Any] = {}
        self._pending: dict[tuple, trio.Event] = {}

    def expect(self, key: tuple) -> None:
        self._pending.setdefault(key, trio.Event())

    def learn(self, key: tuple, value: Any) -> None:
        if key not in self.values:
            self.values[key] = value
        ev = self._pending.pop(key, None)
        if ev is not None:
            ev.set()

    def settle(self, keys: Iterable[tuple]) -> None:
        """The records introducing ``keys`` are done: stop waiting (unmapped keys stay as captured)."""
        for k in keys:
            ev = self._pending.pop(k, None)
            if ev is not None:
                ev.set()

    async def wait(self, keys: Iterable[tuple], timeout_s: float) -> None:
        with trio.move_on_after(timeout_s):
            for k in keys:
                ev = self._pending.get(k)
                if ev is not None:
                    await ev.wait()

    def summary(self) -> dict[str, dict]:
        out: dict[str, dict] = {}
        for key, value in self.values.items():
            kind = key[0]
            m = out.setdefault(kind, {"mapped": 0, "changed": 0, "examples": []})
            m["mapped"] += 1
            captured = key[-1]
            if captured != value:
                m["changed"] += 1
                if len(m["examples"]) < 10:
                    m["examples"].append(f"{_jsonable(captured)} -> {_jsonable(value)}")
        return out


class _Order:
    """Captured happens-before: wait until every record completed (in the capture) before a time is done."""

    def __init__(self, records: list[tuple[int, CaptureRecord]]) -> None:
        ordered = sorted(records, key=lambda ir: _completion_ns(ir[1]))
        self._comp = [_completion_ns(r) for _, r in ordered]
        self._pos = {rid: i for i, (rid, _) in enumerate(ordered)}
        self._done = bytearray(len(ordered))
        self._prefix = 0
        self._waiters: list[tuple[int, int, trio.Event]] = []
        self._seq = itertools.count()

    def needed(self, rec: CaptureRecord) -> int:
        return bisect.bisect_left(self._comp, rec.receive_ns)

    def done(self, rid: int) -> None:
        pos = self._pos.get(rid)
        if pos is None or self._done[pos]:
            return
        self._done[pos] = 1
        while self._prefix < len(self._done) and self._done[self._prefix]:
            self._prefix += 1
        while self._waiters and self._waiters[0][0] <= self._prefix:
            heapq.heappop(self._waiters)[2].set()

    async def wait(self, needed: int) -> None:
        if self._prefix >= needed:
            return
        ev = trio.Event()
        heapq.heappush(self._waiters, (needed, next(self._seq), ev))
        await ev.wait()


def _completion_ns(r: CaptureRecord) -> int:
    return r.send_ns if r.response is not None else r.receive_ns


# ----------------------------------------------------------------------------------------------
# Mapped fields: keys, request rewriting, response comparison
# ----------------------------------------------------------------------------------------------


@dataclass
class _Ctx:
    broker: int
    group: str | None


def _key(kind: str, value: Any, ctx: _Ctx, pid: Any = None) -> tuple | None:
    """The map key of a mapped value, or None for "no value" sentinels (0 session, "" member, -1 ids)."""
    if kind == "session":
        return None if not value else ("session", ctx.broker, value)
    if kind == "topic":
        return None if value is None or value == ZERO_UUID else ("topic", value)
    if kind == "member":
        return ("member", value) if value else None
    if kind == "gen":
        return None if value is None or value < 0 else ("gen", ctx.group, value)
    if kind == "pid":
        return None if value is None or value < 0 else ("pid", value)
    if kind == "epoch":
        return None if value is None or value < 0 or pid is None or pid < 0 else ("epoch", pid, value)
    if kind == "node":
        return None if value is None or value < 0 else ("node", value)
    return None


def _mapped_fields(obj: Any, ctx: _Ctx, kinds: frozenset[str]) -> Iterator[tuple[dict, str, tuple]]:
    """(container, field, key) of every mapped scalar field of a parsed body (records not entered)."""
    if isinstance(obj, dict):
        pid = obj.get("producer_id")
        for name, value in obj.items():
            kind = _MAPPED_KIND.get(name)
            if kind is not None and kind in kinds and not isinstance(value, list):
                key = _key(kind, value, ctx, pid)
                if key is not None:
                    yield obj, name, key
            elif isinstance(value, (dict, list)):
                yield from _mapped_fields(value, ctx, kinds)
    elif isinstance(obj, list):
        for item in obj:
            if isinstance(item, (dict, list)):
                yield from _mapped_fields(item, ctx, kinds)


def _batch_producers(records: Any) -> Iterator[tuple[int, int]]:
    if records is None:
        return
    try:
        for h, _ in iter_batches(records, check_crc=False):
            if h.producer_id >= 0:
                yield h.producer_id, h.producer_epoch
    except Exception:  # a malformed batch is sent as captured; the target will say so
        return


def rewrite_producer_ids(records: bytes | memoryview, mapping: dict[tuple[int, int], tuple[int, int]]) -> bytes | None:
    """Record batches with (producer id, epoch) pairs replaced per ``mapping``, CRC-32C recomputed.

    Returns None when no batch changes.  The producer id (int64 at batch offset
    43) and epoch (int16 at 51) are inside the CRC, which covers offset 21 to
    the end of the batch, so the CRC (uint32 at 17) is rewritten too.
    """
    buf: bytearray | None = None
    pos = 0
    for h, view in iter_batches(records, check_crc=False):
        new = mapping.get((h.producer_id, h.producer_epoch))
        if new is not None and new != (h.producer_id, h.producer_epoch):
            if buf is None:
                buf = bytearray(records)
            _PID.pack_into(buf, pos + _BATCH_PID_OFFSET, new[0])
            _EPOCH.pack_into(buf, pos + _BATCH_EPOCH_OFFSET, new[1])
            end = pos + len(view)
            _CRC.pack_into(buf, pos + _BATCH_CRC_OFFSET, crc32c(memoryview(buf)[pos + _BATCH_ATTR_OFFSET:end]))
        pos += len(view)
    return None if buf is None else bytes(buf)


def _jsonable(v: Any) -> Any:
    if isinstance(v, (bytes, bytearray, memoryview)):
        b = bytes(v)
        return b.hex() if len(b) <= 32 else f"<{len(b)} bytes>"
    if isinstance(v, uuid.UUID):
        return str(v)
    if isinstance(v, tuple):
        return [_jsonable(x) for x in v]
    if isinstance(v, (list, dict)):
        return f"<{type(v).__name__} of {len(v)}>"
    return v


def _error_name(code: Any) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


_INDEX_RE = re.compile(r"\[\d+\]")


class _Comparison:
    """Compares one captured response body with the replayed one; learns mapped values on the way."""

    def __init__(self, mapper: _Mapper, ctx: _Ctx, stats: ApiStats) -> None:
        self.mapper = mapper
        self.ctx = ctx
        self.stats = stats
        self.diffs: list[tuple[str, Any, Any, Any]] = []

    def diff(self, path: str, captured: Any, replayed: Any, expected: Any = None) -> None:
        """One difference; ``expected`` is what a mapped captured value should have come back as."""
        self.diffs.append((path, _jsonable(captured), _jsonable(replayed), _jsonable(expected)))

    def mapped(self, path: str, kind: str, cap: Any, rep: Any, pid: Any = None) -> None:
        key = _key(kind, cap, self.ctx, pid)
        if key is None or _key(kind, rep, self.ctx, pid) is None:
            if cap != rep:
                self.diff(path, cap, rep)
            return
        known = self.mapper.values.get(key)
        if known is None:
            self.mapper.learn(key, rep)
        elif known != rep:
            self.diff(path, cap, rep, known)

    def compare(self, cap: Any, rep: Any, path: str = "") -> None:
        if isinstance(cap, dict):
            if not isinstance(rep, dict):
                self.diff(path or "<body>", cap, rep)
                return
            cap_pid = cap.get("producer_id")
            for name, cv in cap.items():
                if name.startswith("_"):
                    continue
                rv = rep.get(name)
                p = f"{path}.{name}" if path else name
                if name in IGNORED_FIELDS:
                    if cv != rv:
                        self.stats.expected_differences[_INDEX_RE.sub("[]", p)] += 1
                    continue
                kind = _MAPPED_KIND.get(name)
                if kind is not None and not isinstance(cv, (dict, list)) and not isinstance(rv, (dict, list)):
                    self.mapped(p, kind, cv, rv, cap_pid)
                elif kind == "node" and isinstance(cv, list) and isinstance(rv, list):
                    if len(cv) != len(rv):
                        self.diff(p, list(cv), list(rv))
                    else:
                        for i, (a, b) in enumerate(zip(cv, rv)):
                            self.mapped(f"{p}[{i}]", kind, a, b)
                elif name == "records":
                    self.records(p, cv, rv)
                elif name == "error_code":
                    if rv is not None and rv != 0:
                        self.stats.replayed_errors[_error_name(rv)] += 1
                    if cv != rv:
                        self.stats.error_changes[f"{_error_name(cv)} -> {_error_name(rv)}"] += 1
                        self.diff(p, cv, rv)
                else:
                    self.compare(cv, rv, p)
        elif isinstance(cap, list):
            if not isinstance(rep, list) or len(cap) != len(rep):
                self.diff(f"{path}.length" if path else "length", len(cap), len(rep) if isinstance(rep, list) else rep)
                return
            for i, (a, b) in enumerate(zip(cap, rep)):
                self.compare(a, b, f"{path}[{i}]")
        elif isinstance(cap, (bytes, bytearray, memoryview)) or isinstance(rep, (bytes, bytearray, memoryview)):
            if cap is None or rep is None or bytes(cap) != bytes(rep):
                self.diff(path, cap, rep)
        elif cap != rep:
            self.diff(path, cap, rep)

    def records(self, path: str, cap: Any, rep: Any) -> None:
        """Record batches: headers field by field (CRC and log-append timestamps excepted), then records."""
        if cap is None or rep is None:
            if len(cap if cap is not None else b"") + len(rep if rep is not None else b"") > 0:
                self.diff(path, cap, rep)
            return
        try:
            cb = list(iter_batches(cap, check_crc=False, allow_truncated_tail=True))
            rb = list(iter_batches(rep, check_crc=False, allow_truncated_tail=True))
        except Exception:
            if bytes(cap) != bytes(rep):
                self.diff(path, cap, rep)
            return
        if len(cb) != len(rb):
            self.diff(f"{path}.batches", len(cb), len(rb))
        for i, ((ch, cv), (rh, rv)) in enumerate(zip(cb, rb)):
            bp = f"{path}[{i}]"
            for name in _BATCH_FIELDS:
                a, b = getattr(ch, name), getattr(rh, name)
                if name in ("base_timestamp", "max_timestamp") and ch.timestamp_type == LOG_APPEND_TIME:
                    if a != b:
                        self.stats.expected_differences[f"{_INDEX_RE.sub('[]', path)}[].{name}"] += 1
                elif name == "producer_id":
                    self.mapped(f"{bp}.{name}", "pid", a, b)
                elif name == "producer_epoch":
                    self.mapped(f"{bp}.{name}", "epoch", a, b, ch.producer_id)
                elif a != b:
                    self.diff(f"{bp}.{name}", a, b)
            if ch.base_offset != rh.base_offset:
                self.diff(f"{bp}.base_offset", ch.base_offset, rh.base_offset)
            if bytes(cv[61:]) != bytes(rv[61:]):
                self.diff(f"{bp}.records", cv[61:], rv[61:])


# ----------------------------------------------------------------------------------------------
# The replay
# ----------------------------------------------------------------------------------------------


def group_connections(records: Iterable[CaptureRecord],
                      only: set[ConnKey] | None = None) -> dict[ConnKey, list[CaptureRecord]]:
    """The records per (broker id, connection id), each list in receive order."""
    out: dict[ConnKey, list[CaptureRecord]] = defaultdict(list)
    for r in records:
        key = (r.broker_id, r.connection_id)
        if only is None or key in only:
            out[key].append(r)
    for recs in out.values():
        recs.sort(key=lambda r: r.receive_ns)
    return dict(sorted(out.items(), key=lambda kv: kv[1][0].receive_ns))


@dataclass
class _Entry:
    rid: int
    rec: CaptureRecord
    ctx: _Ctx
    known: bool  # decodable with the protocol layer
    sent_at: float = 0.0
    frame: bytes | None = None
    received_at: float = 0.0
    event: trio.Event = field(default_factory=trio.Event)


class _ConnectionState:
    def __init__(self, key: ConnKey, max_in_flight: int) -> None:
        self.key = key
        self.name = f"{key[0]}/{key[1]}"
        self.pending: dict[int, _Entry] = {}
        self.closed: str | None = None
        self.slots = trio.Semaphore(max(1, max_in_flight))
        self.corr = itertools.count(1)
        self.unsent = 0  # requests not yet sent (or given up)


class _Replayer:
    def __init__(self, conns: dict[ConnKey, list[CaptureRecord]], options: ReplayOptions) -> None:
        self.opt = options
        self.report = ReplayReport(options.target, options.speed, max_examples=options.max_examples)
        self.mapper = _Mapper()
        self.conns: dict[ConnKey, list[tuple[int, CaptureRecord]]] = {}
        rid = itertools.count()
        for key, recs in conns.items():
            self.conns[key] = [(next(rid), r) for r in recs]
        all_recs = [ir for recs in self.conns.values() for ir in recs]
        if options.causality == "global":
            order = _Order(all_recs)
            self.orders = {key: order for key in self.conns}
        elif options.causality == "connection":
            self.orders = {key: _Order(recs) for key, recs in self.conns.items()}
        else:
            raise ValueError(f"causality must be 'global' or 'connection', not {options.causality!r}")
        self.first_ns = options.first_ns if options.first_ns is not None else min(
            (r.receive_ns for _, r in all_recs), default=0)
        self.introduces: dict[int, list[tuple]] = self._prescan(all_recs)
        self.t0 = 0.0

    # -- set up ---------------------------------------------------------------------------------

    def _prescan(self, recs: list[tuple[int, CaptureRecord]]) -> dict[int, list[tuple]]:
        """Which record's response first shows each mapped value (requests that need it wait for it)."""
        seen: set[tuple] = set()
        out: dict[int, list[tuple]] = {}
        for rid, r in sorted(recs, key=lambda ir: ir[1].receive_ns):
            if r.api_key not in APIS or r.api_key == ApiKey.PRODUCE:
                continue
            try:
                _, body = parse_request_frame(r.request)
                ctx = _Ctx(r.broker_id, body.get("group_id"))
                seen.update(k for _, _, k in _mapped_fields(body, ctx, _REQUEST_KINDS))
                if r.response is None:
                    continue
                _, resp = parse_response_frame(r.response, r.api_key, r.api_version)
            except Exception as exc:  # replayed as is; compared as raw bytes if it does not parse
                log.debug("capture record %s v%d does not parse: %s", api_name(r.api_key), r.api_version, exc)
                continue
            for _, _, k in _mapped_fields(resp, ctx, _REQUEST_KINDS):
                if k not in seen:
                    seen.add(k)
                    self.mapper.expect(k)
                    out.setdefault(rid, []).append(k)
        return out

    # -- per request ----------------------------------------------------------------------------

    async def _prepare(self, rid: int, rec: CaptureRecord, corr: int) -> tuple[bytes, _Entry]:
        """The frame to send: correlation id replaced, mapped values rewritten."""
        try:
            if rec.api_key not in APIS:
                raise KeyError(rec.api_key)
            hdr, body = parse_request_frame(rec.request)
        except Exception:
            entry = _Entry(rid, rec, _Ctx(rec.broker_id, None), known=False)
            return rewrite_correlation_id(rec.request, corr), entry
        ctx = _Ctx(rec.broker_id, body.get("group_id"))
        entry = _Entry(rid, rec, ctx, known=True)
        fields = list(_mapped_fields(body, ctx, _REQUEST_KINDS))
        producers: list[tuple[dict, list[tuple[int, int]]]] = []
        if rec.api_key == ApiKey.PRODUCE:
            for td in body.topic_data:
                for pd in td.partition_data:
                    pairs = list(_batch_producers(pd.records))
                    if pairs:
                        producers.append((pd, pairs))
        keys = [k for _, _, k in fields] + [k for _, pairs in producers for p, e in pairs
                                            for k in (("pid", p), ("epoch", p, e))]
        if not keys:
            return rewrite_correlation_id(rec.request, corr), entry
        await self.mapper.wait(keys, self.opt.timeout_s)
        values = self.mapper.values
        changed = False
        for container, name, key in fields:
            new = values.get(key)
            if new is not None and new != container[name]:
                container[name] = new
                changed = True
        for pd, pairs in producers:
            mapping = {}
            for p, e in pairs:
                np_ = values.get(("pid", p), p)
                ne = values.get(("epoch", p, e), e)
                if (np_, ne) != (p, e):
                    mapping[(p, e)] = (np_, ne)
            if mapping:
                new_records = rewrite_producer_ids(pd.records, mapping)
                if new_records is not None:
                    pd.records = new_records
                    changed = True
        if not changed:
            return rewrite_correlation_id(rec.request, corr), entry
        self.report.api(rec.api_key).rewritten += 1
        new_body = APIS[rec.api_key].request.build(body, rec.api_version)
        return rewrite_correlation_id(bytes(rec.request[:hdr.body_offset]) + new_body, corr), entry

    def _finish(self, state: _ConnectionState, entry: _Entry, outcome: str) -> None:
        """Account for one request: ``outcome`` is "response", "timeout", "lost" or "none" (acks=0)."""
        rec = entry.rec
        st = self.report.api(rec.api_key)
        try:
            if outcome == "none":
                st.no_response_expected += 1
            elif outcome == "timeout":
                st.timeouts += 1
            elif outcome == "lost":
                st.lost += 1
            else:
                st.received += 1
                st.captured_latency_ms.append(rec.latency_ns / 1e6)
                st.replayed_latency_ms.append((entry.received_at - entry.sent_at) * 1e3)
                self._compare(state, entry, st)
        finally:
            self.mapper.settle(self.introduces.get(entry.rid, ()))
            self.orders[state.key].done(entry.rid)

    def _compare(self, state: _ConnectionState, entry: _Entry, st: ApiStats) -> None:
        rec, frame = entry.rec, entry.frame
        assert frame is not None
        cmp = _Comparison(self.mapper, entry.ctx, st)
        if rec.response is None:
            cmp.diff("<response>", None, frame[4:])
        elif not entry.known:
            if bytes(rec.response[4:]) != bytes(frame[4:]):
                cmp.diff("<raw>", rec.response[4:], frame[4:])
        else:
            try:
                _, cap = parse_response_frame(rec.response, rec.api_key, rec.api_version)
            except Exception as exc:
                log.debug("captured %s response does not parse: %s", st.name, exc)
                if bytes(rec.response[4:]) != bytes(frame[4:]):
                    cmp.diff("<raw>", rec.response[4:], frame[4:])
                cap = None
            if cap is not None:
                try:
                    _, rep = parse_response_frame(frame, rec.api_key, rec.api_version)
                except Exception as exc:
                    cmp.diff("<body>", "parses", f"does not parse: {exc}")
                else:
                    cmp.compare(cap, rep)
        if cmp.diffs:
            st.differing += 1
            for path, c, r, expected in cmp.diffs:
                st.differing_fields[_INDEX_RE.sub("[]", path)] += 1
                if len(st.examples) < self.opt.max_examples:
                    ex = {"connection": state.name, "correlation_id": rec.correlation_id,
                          "path": path, "captured": c, "replayed": r}
                    if expected is not None:
                        ex["expected"] = expected  # the captured value mapped (e.g. producer id 1000 -> 1001)
                    st.examples.append(ex)
        else:
            st.equal += 1

    # -- per connection ---------------------------------------------------------------------------

    async def _pace(self, rec: CaptureRecord) -> None:
        if self.opt.speed is not None:
            await trio.sleep_until(self.t0 + (rec.receive_ns - self.first_ns) / 1e9 / self.opt.speed)

    def _not_sent(self, state: _ConnectionState, recs: list[tuple[int, CaptureRecord]]) -> None:
        state.unsent -= len(recs)
        for rid, rec in recs:
            self.report.api(rec.api_key).not_sent += 1
            self.mapper.settle(self.introduces.get(rid, ()))
            self.orders[state.key].done(rid)

    def _conn_failed(self, state: _ConnectionState, error: str) -> None:
        if state.closed is None:
            state.closed = error
            self.report.connections_failed += 1
            self.report.connection_errors.append({"connection": state.name, "error": error})
            log.warning("replay of connection %s: %s", state.name, error)

    async def _reader(self, state: _ConnectionState, stream: trio.SocketStream) -> None:
        buf = bytearray()
        error = "target closed the connection"
        try:
            while True:
                data = await stream.receive_some(1 << 16)
                if not data:
                    break
                buf += data
                while len(buf) >= 4:
                    (size,) = _SIZE.unpack_from(buf)
                    if len(buf) < 4 + size:
                        break
                    frame = bytes(buf[4:4 + size])
                    del buf[:4 + size]
                    corr = int.from_bytes(frame[:4], "big", signed=True)
                    entry = state.pending.pop(corr, None)
                    if entry is None:
                        self.report.unexpected_responses += 1
                        log.debug("connection %s: response with unknown correlation id %d", state.name, corr)
                        continue
                    entry.frame = frame
                    entry.received_at = trio.current_time()
                    entry.event.set()
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            error = f"connection error: {exc!r}"
        if state.pending or state.unsent:
            self._conn_failed(state, error)
        elif state.closed is None:
            state.closed = error  # closed after the last response: nothing lost
        for entry in list(state.pending.values()):
            entry.event.set()
        state.pending.clear()

    async def _await_response(self, state: _ConnectionState, entry: _Entry) -> None:
        try:
            with trio.move_on_after(self.opt.timeout_s):
                await entry.event.wait()
            if entry.frame is not None:
                self._finish(state, entry, "response")
            elif entry.event.is_set():
                self._finish(state, entry, "lost")
            else:
                for corr, e in list(state.pending.items()):
                    if e is entry:
                        del state.pending[corr]
                self._finish(state, entry, "timeout")
        finally:
            state.slots.release()

    async def _run_connection(self, key: ConnKey, recs: list[tuple[int, CaptureRecord]]) -> None:
        state = _ConnectionState(key, self.opt.max_in_flight)
        state.unsent = len(recs)
        order = self.orders[key]
        await self._pace(recs[0][1])
        try:
            with trio.fail_after(self.opt.connect_timeout_s):
                stream = await trio.open_tcp_stream(self.opt.host, self.opt.port)
        except (OSError, trio.TooSlowError) as exc:
            self._conn_failed(state, f"connect failed: {exc!r}")
            self._not_sent(state, recs)
            return
        async with stream, trio.open_nursery() as outer:
            outer.start_soon(self._reader, state, stream)
            async with trio.open_nursery() as waiters:
                for i, (rid, rec) in enumerate(recs):
                    await self._pace(rec)
                    await order.wait(order.needed(rec))
                    await state.slots.acquire()
                    if state.closed is not None:
                        state.slots.release()
                        self._not_sent(state, recs[i:])
                        break
                    corr = next(state.corr)
                    frame, entry = await self._prepare(rid, rec, corr)
                    if rec.response is not None:
                        state.pending[corr] = entry
                    entry.sent_at = trio.current_time()
                    try:
                        await stream.send_all(_SIZE.pack(len(frame)) + frame)
                    except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
                        state.pending.pop(corr, None)
                        state.slots.release()
                        self._conn_failed(state, f"send failed: {exc!r}")
                        self._not_sent(state, recs[i:])
                        break
                    state.unsent -= 1
                    self.report.api(rec.api_key).sent += 1
                    if rec.response is None:
                        state.slots.release()
                        self._finish(state, entry, "none")
                    else:
                        waiters.start_soon(self._await_response, state, entry)
            outer.cancel_scope.cancel()

    async def run(self) -> ReplayReport:
        now = trio.current_time()
        base = self.opt.base_time_ns
        self.t0 = now if base is None else now + (base - time.time_ns()) / 1e9
        started = time.perf_counter()
        self.report.connections = len(self.conns)
        async with trio.open_nursery() as nursery:
            for key, recs in self.conns.items():
                nursery.start_soon(self._run_connection, key, recs)
        # A base time in the future (Spark tasks start early) is waiting, not replaying.
        self.report.duration_s = time.perf_counter() - started - max(0.0, self.t0 - now)
        self.report.mappings = self.mapper.summary()
        return self.report


async def replay_records(conns: dict[ConnKey, list[CaptureRecord]], options: ReplayOptions) -> ReplayReport:
    """Replay connections (as :func:`group_connections` returns them) against ``options``' target."""
    replayer = _Replayer({k: v for k, v in conns.items() if v}, options)
    log.info("replaying %d request(s) on %d connection(s) to %s", sum(len(v) for v in conns.values()),
             len(replayer.conns), options.target)
    return await replayer.run()


async def replay_capture(paths: Iterable[str | Path], options: ReplayOptions,
                         connections: set[ConnKey] | None = None,
                         stats: ReadStats | None = None) -> ReplayReport:
    """Read a capture (files or directories) and replay it; ``connections`` limits it to those."""
    conns = group_connections(read_capture(paths, stats), connections)
    return await replay_records(conns, options)


def run_replay(paths: Iterable[str | Path], options: ReplayOptions,
               connections: set[ConnKey] | None = None) -> ReplayReport:
    """:func:`replay_capture` on a new Trio loop (from synchronous code)."""
    paths = list(paths)
    return trio.run(replay_capture, paths, options, connections)
