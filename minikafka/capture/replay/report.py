"""The outcome of a replay: :class:`ApiStats` per api key, :class:`ReplayReport` (merge, summary, to_dict)."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from ...protocol.api import ApiKey
from ..frames import api_name
from .options import DEFAULT_EXAMPLES


#: The latency percentiles reported for replayed requests (name -> quantile), and for captured ones.
REPLAYED_PERCENTILES = {"p50": 0.5, "p90": 0.9, "p99": 0.99, "p99_9": 0.999, "max": 1.0}
CAPTURED_PERCENTILES = {"p50": 0.5, "p99": 0.99}


def _nearest_rank(ordered: list[float], q: float) -> float:
    """The nearest-rank percentile of a sorted, non-empty list (exact: a value of the list)."""
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def percentiles(values: list[float], quantiles: dict[str, float]) -> dict[str, float | None]:
    """``{name: nearest-rank percentile}`` of ``values`` (sorted once); None each when there are none."""
    if not values:
        return {name: None for name in quantiles}
    ordered = sorted(values)
    return {name: _nearest_rank(ordered, q) for name, q in quantiles.items()}


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

    def rate(self, duration_s: float) -> float:
        """Requests of this api sent per second over a replay of ``duration_s`` seconds."""
        return self.sent / duration_s if duration_s > 0 else 0.0

    def to_dict(self, duration_s: float | None = None) -> dict:
        """As JSON; with the replay's ``duration_s``, the api's ``requests_per_s`` too."""
        def lat(values: list[float], quantiles: dict[str, float]) -> dict:
            out: dict = {f"{name}_ms": None if v is None else round(v, 3)
                         for name, v in percentiles(values, quantiles).items()}
            out["count"] = len(values)
            return out

        return {
            "api_key": self.api_key, "api": self.name, "sent": self.sent, "received": self.received,
            "requests_per_s": None if duration_s is None else round(self.rate(duration_s), 1),
            "no_response_expected": self.no_response_expected, "equal": self.equal, "differing": self.differing,
            "timeouts": self.timeouts, "lost": self.lost, "not_sent": self.not_sent, "rewritten": self.rewritten,
            "error_changes": dict(self.error_changes), "replayed_errors": dict(self.replayed_errors),
            "differing_fields": dict(self.differing_fields.most_common()),
            "expected_differences": dict(self.expected_differences.most_common()),
            "examples": list(self.examples),
            "latency": {"captured": lat(self.captured_latency_ms, CAPTURED_PERCENTILES),
                        "replayed": lat(self.replayed_latency_ms, REPLAYED_PERCENTILES)},
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
    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str | None = None
    #: Connections authenticated, by the principal the capture recorded -> the user name they logged in with.
    authenticated: Counter = field(default_factory=Counter)
    authentication_failures: int = 0
    reauthentications: int = 0  # KIP-368: sessions renewed on a replayed connection before they expired
    #: Captured SaslHandshake/SaslAuthenticate requests left out (their tokens are single-use: each
    #: connection authenticates afresh instead).
    sasl_requests_skipped: int = 0
    #: Fetch long polls that found nothing in the capture, sent with MaxWaitMs 0 at max speed.
    long_polls_shortened: int = 0
    #: Dependencies between connections the replay kept (from the plan: see ``plan.py``).
    cross_dependencies: int = 0
    #: Requests sent without their dependencies after waiting the request timeout for them.
    dependency_timeouts: int = 0
    #: Routing on a cluster target (:mod:`.routing`): api name -> target node -> requests sent there.
    routed: dict[str, Counter] = field(default_factory=dict)
    split: int = 0  # requests split per partition leader (their parts counted in ``routed``)
    unsplittable: int = 0  # requests in a session (or naming several coordinators) spanning nodes, sent whole
    reconnects: int = 0  # connections reopened after the target closed them
    #: ``--scale``: the copies of the capture replayed at once under their own names (empty: the capture once).
    copy_ids: set[int] = field(default_factory=set)

    @property
    def copies(self) -> int:
        """How many copies of the capture were replayed (``--scale``)."""
        return len(self.copy_ids) or 1

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
        self.authenticated.update(other.authenticated)
        self.authentication_failures += other.authentication_failures
        self.reauthentications += other.reauthentications
        self.sasl_requests_skipped += other.sasl_requests_skipped
        self.long_polls_shortened += other.long_polls_shortened
        self.dependency_timeouts += other.dependency_timeouts
        self.cross_dependencies = max(self.cross_dependencies, other.cross_dependencies)
        for api, nodes in other.routed.items():
            self.routed.setdefault(api, Counter()).update(nodes)
        self.split += other.split
        self.unsplittable += other.unsplittable
        self.reconnects += other.reconnects
        self.copy_ids |= other.copy_ids
        return self

    @classmethod
    def combine(cls, reports: Iterable[ReplayReport]) -> ReplayReport:
        reports = list(reports)
        if not reports:
            raise ValueError("no reports to combine")
        first = reports[0]
        out = cls(first.target, first.speed, tasks=0, max_examples=first.max_examples,
                  security_protocol=first.security_protocol, sasl_mechanism=first.sasl_mechanism)
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
            "long_polls_shortened": self.long_polls_shortened, "cross_dependencies": self.cross_dependencies,
            "dependency_timeouts": self.dependency_timeouts,
            "routed": {api: {str(n): c for n, c in sorted(nodes.items())}
                       for api, nodes in sorted(self.routed.items())},
            "split": self.split, "unsplittable": self.unsplittable, "reconnects": self.reconnects,
            "copies": self.copies,
            "security": {
                "security_protocol": self.security_protocol, "sasl_mechanism": self.sasl_mechanism,
                "authenticated": {f"{p} as {u}": n for (p, u), n in sorted(self.authenticated.items())},
                "authentication_failures": self.authentication_failures,
                "reauthentications": self.reauthentications,
                "sasl_requests_skipped": self.sasl_requests_skipped,
            },
            "per_api": {st.name: st.to_dict(self.duration_s) for _, st in sorted(self.per_api.items())},
        }

    def _security_lines(self) -> list[str]:
        out = []
        if self.security_protocol != "PLAINTEXT" or self.authenticated or self.authentication_failures:
            line = f"security: {self.security_protocol}"
            if self.sasl_mechanism:
                n = sum(self.authenticated.values())
                who = ", ".join(f"{p or '?'} as {u} x{c}" for (p, u), c in sorted(self.authenticated.items()))
                line += (f", {n} connection(s) authenticated with {self.sasl_mechanism}" + (f" ({who})" if who else "")
                         + (f", {self.authentication_failures} refused" if self.authentication_failures else "")
                         + (f", {self.reauthentications} re-authentication(s)" if self.reauthentications else ""))
            out.append(line)
        if self.sasl_requests_skipped:
            out.append(f"captured SaslHandshake/SaslAuthenticate requests skipped: {self.sasl_requests_skipped} "
                       "(their tokens are single-use; each connection authenticated afresh instead)")
        return out

    def summary(self) -> str:
        """A readable table (what ``minikafka replay`` prints)."""
        speed = "max speed" if self.speed is None else f"{self.speed:g}x"
        lines = [f"replayed {self.sent} of {self.requests} request(s) on {self.connections} connection(s) to "
                 f"{self.target} at {speed} in {self.duration_s:.3f} s ({self.rate:.0f} req/s)"
                 + (f", {self.tasks} task(s)" if self.tasks > 1 else "")
                 + (f", {self.copies} copies under their own names" if self.copies > 1 else "")]
        lines += self._security_lines()
        if self.routed:
            lines.append("routed (api: node x requests): " + "; ".join(
                f"{api}: " + ", ".join(f"{n} x{c}" for n, c in sorted(nodes.items()))
                for api, nodes in sorted(self.routed.items()))
                + (f"; {self.split} split per leader" if self.split else "")
                + (f"; {self.unsplittable} unsplittable" if self.unsplittable else ""))
        if self.reconnects:
            lines.append(f"reconnects: {self.reconnects}")
        if self.connections_failed:
            lines.append(f"connections failed: {self.connections_failed}")
            for e in self.connection_errors[:5]:
                lines.append(f"  {e['connection']}: {e['error']}")
        if self.dependency_timeouts:
            lines.append(f"requests sent without their dependencies (waited the request timeout): "
                         f"{self.dependency_timeouts}")
        head = (f"{'api':<18} {'sent':>7} {'recv':>7} {'equal':>7} {'differ':>6} {'tmo':>4} {'lost':>5} "
                f"{'unsent':>6} {'req/s':>8} | {'replayed ms: p50':>16} {'p90':>6} {'p99':>6} {'p99.9':>7} "
                f"{'max':>7} | {'captured p50':>12} {'p99':>6}")
        lines += [head, "-" * len(head)]

        def ms(v: float | None) -> str:
            return "-" if v is None else f"{v:.1f}"

        for _, st in sorted(self.per_api.items()):
            r = percentiles(st.replayed_latency_ms, REPLAYED_PERCENTILES)
            c = percentiles(st.captured_latency_ms, CAPTURED_PERCENTILES)
            lines.append(f"{st.name:<18} {st.sent:>7} {st.received:>7} {st.equal:>7} {st.differing:>6} "
                         f"{st.timeouts:>4} {st.lost:>5} {st.not_sent:>6} {st.rate(self.duration_s):>8.0f} | "
                         f"{ms(r['p50']):>16} {ms(r['p90']):>6} {ms(r['p99']):>6} {ms(r['p99_9']):>7} "
                         f"{ms(r['max']):>7} | {ms(c['p50']):>12} {ms(c['p99']):>6}")
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
        expected: Counter[str] = Counter()
        for st in self.per_api.values():
            expected.update(st.expected_differences)
        if expected:
            lines.append("expected differences (ignored): "
                         + ", ".join(f"{k} x{n}" for k, n in expected.most_common(8)))
        mapped_counts = [f"{kind} {m['changed']}/{m['mapped']}" for kind, m in sorted(self.mappings.items())
                         if m["mapped"]]
        if mapped_counts:
            lines.append("values mapped (changed/seen): " + ", ".join(mapped_counts))
        return "\n".join(lines)
