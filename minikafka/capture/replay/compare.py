"""Field-by-field comparison of a captured response with the replayed one, expected differences aside.

Every field is compared, through the maps of :mod:`.rewrite` where the broker makes the value up;
what differs by design is counted per field path in ``ApiStats.expected_differences`` instead of
making the response "differing":

* always: :data:`IGNORED_FIELDS` (throttle time, cluster id, host/port, the client's host as a
  describe response shows it, log-append timestamps, the wall-clock times of DescribeQuorum's replicas and of
  delegation tokens) and batch CRCs;
* member lists of describe responses (DescribeGroups, ConsumerGroupDescribe, ShareGroupDescribe)
  are compared as sets, by member id (mapped), not by position;
* **membership timing** -- in a group that several members heartbeated to in the capture
  (ConsumerGroupHeartbeat, ShareGroupHeartbeat), which members are in the group when a heartbeat or a
  describe is answered depends on when each joined and heartbeated in the replay, so the epochs and
  assignments the coordinator hands out do too.  There, a heartbeat response's ``assignment`` and a
  ``member_epoch`` other than the one mapped, and in describe responses the ``members``, the
  ``group_state``, a ``group_epoch``/``assignment_epoch`` other than the one mapped, and the start
  offsets and lags of DescribeShareGroupOffsets, are expected differences, counted under their path
  with `` [membership timing]``.  In a group with one member they are compared: its epochs and
  assignments follow only from its own requests.
* **acquisition race** (KIP-932) -- which records a share consumer's ShareFetch acquires depends on
  when the records were produced and on what the other members acquired, released or let time out
  first.  ShareFetch partitions are paired by topic id (mapped) and partition, not by position; when
  a partition's acquired offset ranges (``acquired_records`` first/last offsets) are the same in both
  responses its records are compared byte for byte and only a different ``delivery_count`` is
  expected; when they differ (or the partition is answered in one response only, without an error),
  the acquired ranges and the records are expected differences under `` [acquisition race]`` and the
  member is marked as having diverged.  A member that diverged acknowledges (from the captured
  requests) records it did not acquire in the replay, so an INVALID_RECORD_STATE on either side of its
  later acknowledgements (ShareFetch ``acknowledge_error_code``, ShareAcknowledge partition
  ``error_code``) is expected too, and so are its share group's start offsets in
  DescribeShareGroupOffsets.  Top-level errors, partition fetch errors, leaders and everything else
  are compared.
* **telemetry timing** (KIP-714) -- the broker throttles a GetTelemetrySubscriptions or PushTelemetry that
  comes sooner than the client's push interval after its previous one, so whether one is answered
  THROTTLING_QUOTA_EXCEEDED depends on the replay's pace: when either side is, the difference is expected,
  under ``error_code [telemetry timing]``.
"""

from __future__ import annotations

import re
from typing import Any

from ...protocol.errors import ErrorCode
from ...protocol.exceptions import ProtocolError
from ...protocol.records import LOG_APPEND_TIME, iter_batches
from .report import ApiStats
from .rewrite import _Ctx, _jsonable, _key, _kind_of, _Mapper

#: Response fields that differ between runs by design: counted, never compared.
IGNORED_FIELDS = frozenset({"throttle_time_ms", "cluster_id", "host", "port", "log_append_time_ms", "client_host",
                            # wall-clock times a broker stamps: DescribeQuorum's replica clocks, tokens' lifetimes
                            "last_fetch_timestamp", "last_caught_up_timestamp", "issue_timestamp_ms",
                            "expiry_timestamp_ms", "max_timestamp_ms", "issue_timestamp", "expiry_timestamp",
                            "max_timestamp"})
_BATCH_FIELDS = ("partition_leader_epoch", "magic", "attributes", "last_offset_delta", "base_timestamp",
                 "max_timestamp", "producer_id", "producer_epoch", "base_sequence", "record_count")
_ERROR_FIELDS = frozenset({"error_code", "acknowledge_error_code"})

MEMBERSHIP_TIMING = " [membership timing]"
TELEMETRY_TIMING = " [telemetry timing]"
ACQUISITION_RACE = " [acquisition race]"

_CONSUMER_GROUP_HEARTBEAT, _CONSUMER_GROUP_DESCRIBE = 68, 69
_SHARE_GROUP_HEARTBEAT, _SHARE_GROUP_DESCRIBE, _SHARE_FETCH, _SHARE_ACKNOWLEDGE = 76, 77, 78, 79
_DESCRIBE_SHARE_GROUP_OFFSETS = 90
_HEARTBEATS = (_CONSUMER_GROUP_HEARTBEAT, _SHARE_GROUP_HEARTBEAT)
_DESCRIBES = (_CONSUMER_GROUP_DESCRIBE, _SHARE_GROUP_DESCRIBE)
#: Fields of describe responses' groups that depend on membership timing in a group of several members (their
#: group and assignment epochs too, compared through the map: see :meth:`_Comparison.mapped`).
_DESCRIBE_TIMING = frozenset({"members", "group_state"})
_INVALID_RECORD_STATE = 121
_GET_TELEMETRY_SUBSCRIPTIONS, _PUSH_TELEMETRY = 71, 72
_THROTTLING_QUOTA_EXCEEDED = 89


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
        self.offsets_reason = ""  # DescribeShareGroupOffsets: start offsets of a group whose acquisitions race

    # -- recording ------------------------------------------------------------------------------------
    def diff(self, path: str, captured: Any, replayed: Any, expected: Any = None) -> None:
        """One difference; ``expected`` is what a mapped captured value should have come back as."""
        self.diffs.append((path, _jsonable(captured), _jsonable(replayed), _jsonable(expected)))

    def expect(self, path: str, reason: str = "") -> None:
        """One expected difference at ``path`` (indexes dropped), with its reason."""
        self.stats.expected_differences[_INDEX_RE.sub("[]", path) + reason] += 1

    def _child(self) -> _Comparison:
        return _Comparison(self.mapper, self.ctx, self.stats)

    def soft(self, path: str, cap: Any, rep: Any, expected: bool, reason: str) -> None:
        """Compares ``cap`` and ``rep``; their differences are expected (one count under ``path`` and
        ``reason``) when ``expected``, differences otherwise."""
        child = self._child()
        child.compare(cap, rep, path)
        if not child.diffs:
            return
        if expected:
            self.expect(path, reason)
        else:
            self.diffs.extend(child.diffs)

    def _shared(self, owner: Any = None) -> bool:
        """Whether the group of ``owner`` (a struct naming its group) or of the request had several
        members in the capture."""
        group = owner.get("group_id") if isinstance(owner, dict) else None
        return (group or self.ctx.group) in self.mapper.shared_groups

    # -- mapped values ------------------------------------------------------------------------------
    def mapped(self, path: str, kind: str, cap: Any, rep: Any, pid: Any = None, owner: Any = None) -> None:
        key = _key(kind, cap, self.ctx, pid, owner)
        if key is None or _key(kind, rep, self.ctx, pid, owner) is None:
            if cap != rep:
                self.diff(path, cap, rep)
            return
        known = self.mapper.values.get(key)
        if known is None:
            self.mapper.learn(key, rep)
        elif known != rep:
            if kind in ("mepoch", "gepoch") and self._shared(owner):
                self.expect(path, MEMBERSHIP_TIMING)
            else:
                self.diff(path, cap, rep, known)

    # -- the whole body ----------------------------------------------------------------------------
    def compare_body(self, cap: Any, rep: Any) -> None:
        """A response body: the api's own rules (see the module docstring), then every field."""
        api = self.ctx.api_key
        if not isinstance(cap, dict) or not isinstance(rep, dict):
            self.compare(cap, rep)
        elif api in _HEARTBEATS:
            self._dict(cap, rep, "", skip=("assignment",))
            self.soft("assignment", cap.get("assignment"), rep.get("assignment"), self._shared(), MEMBERSHIP_TIMING)
            self._note_member_epoch(cap, rep)
        elif api in (_GET_TELEMETRY_SUBSCRIPTIONS, _PUSH_TELEMETRY) and cap.get("error_code") != rep.get(
                "error_code") and _THROTTLING_QUOTA_EXCEEDED in (cap.get("error_code"), rep.get("error_code")):
            self.expect("error_code", TELEMETRY_TIMING)
        elif api == _SHARE_FETCH:
            self._dict(cap, rep, "", skip=("responses",))
            self._share_partitions("responses", cap.get("responses") or [], rep.get("responses") or [])
        elif api == _DESCRIBE_SHARE_GROUP_OFFSETS:
            self._dict(cap, rep, "", skip=("groups",))
            cg, rg = cap.get("groups") or [], rep.get("groups") or []
            if len(cg) != len(rg):
                self.diff("groups.length", len(cg), len(rg))
                return
            for i, (a, b) in enumerate(zip(cg, rg)):
                self._dict(a, b, f"groups[{i}]", skip=("topics",))
                group = a.get("group_id")
                child = self._child()
                if group in self.mapper.shared_groups:
                    child.offsets_reason = MEMBERSHIP_TIMING
                elif group in self.mapper.diverged_groups:
                    child.offsets_reason = ACQUISITION_RACE
                child.compare(a.get("topics"), b.get("topics"), f"groups[{i}].topics")
                self.diffs.extend(child.diffs)
        else:
            self.compare(cap, rep)

    def _note_member_epoch(self, cap: Any, rep: Any) -> None:
        """After a heartbeat: the epoch the member got in the capture and in the replay (requests carrying the
        captured one are sent with the replayed one)."""
        member, ce, re_ = cap.get("member_id"), cap.get("member_epoch"), rep.get("member_epoch")
        if member and isinstance(ce, int) and isinstance(re_, int) and ce > 0 and re_ > 0:
            self.mapper.note_member_epoch(member, (ce, re_))

    # -- generic ----------------------------------------------------------------------------------
    def compare(self, cap: Any, rep: Any, path: str = "") -> None:
        if isinstance(cap, dict):
            if not isinstance(rep, dict):
                self.diff(path or "<body>", cap, rep)
                return
            self._dict(cap, rep, path)
        elif isinstance(cap, list):
            if not isinstance(rep, list) or len(cap) != len(rep):
                self.diff(f"{path}.length" if path else "length", len(cap), len(rep) if isinstance(rep, list) else rep)
                return
            if cap and isinstance(cap[0], dict) and "member_id" in cap[0] and path.endswith("members"):
                cap, rep = self._by_member(cap), self._by_member(rep, mapped=False)
            for i, (a, b) in enumerate(zip(cap, rep)):
                self.compare(a, b, f"{path}[{i}]")
        elif isinstance(cap, (bytes, bytearray, memoryview)) or isinstance(rep, (bytes, bytearray, memoryview)):
            if cap is None or rep is None or bytes(cap) != bytes(rep):
                self.diff(path, cap, rep)
        elif cap != rep:
            self.diff(path, cap, rep)

    def _by_member(self, members: list, mapped: bool = True) -> list:
        """Members ordered by member id, captured ids through the member map (describe responses list them
        in no defined order)."""
        values = self.mapper.values

        def key(m: Any) -> str:
            mid = m.get("member_id") or ""
            return str(values.get(("member", mid), mid)) if mapped else str(mid)

        return sorted(members, key=key)

    def _dict(self, cap: dict, rep: dict, path: str, skip: tuple[str, ...] = ()) -> None:
        cap_pid = cap.get("producer_id")
        shared_describe = self.ctx.api_key in _DESCRIBES and "members" in cap and self._shared(cap)
        for name, cv in cap.items():
            if name.startswith("_") or name in skip:
                continue
            rv = rep.get(name)
            p = f"{path}.{name}" if path else name
            if name in IGNORED_FIELDS:
                if cv != rv:
                    self.expect(p)
                continue
            if shared_describe and name in _DESCRIBE_TIMING:
                self.soft(p, cv, rv, True, MEMBERSHIP_TIMING)
                continue
            if self.offsets_reason and name in ("start_offset", "lag"):
                if cv != rv:
                    self.expect(p, self.offsets_reason)
                continue
            kind = _kind_of(name, cap, self.ctx)
            if kind is not None and not isinstance(cv, (dict, list)) and not isinstance(rv, (dict, list)):
                self.mapped(p, kind, cv, rv, cap_pid, cap)
            elif kind == "node" and isinstance(cv, list) and isinstance(rv, list):
                if len(cv) != len(rv):
                    self.diff(p, list(cv), list(rv))
                else:
                    for i, (a, b) in enumerate(zip(cv, rv)):
                        self.mapped(f"{p}[{i}]", kind, a, b)
            elif name == "records":
                self.records(p, cv, rv)
            elif name in _ERROR_FIELDS:
                self.error(p, cv, rv)
            else:
                self.compare(cv, rv, p)

    def error(self, path: str, cv: Any, rv: Any) -> None:
        if rv is not None and rv != 0:
            self.stats.replayed_errors[_error_name(rv)] += 1
        if cv == rv:
            return
        change = f"{_error_name(cv)} -> {_error_name(rv)}"
        if (self.ctx.member is not None and self.ctx.member in self.mapper.acquisition_diverged
                and _INVALID_RECORD_STATE in (cv, rv) and self.ctx.api_key in (_SHARE_FETCH, _SHARE_ACKNOWLEDGE)):
            self.expect(f"{path} {change}", ACQUISITION_RACE)  # acknowledging records acquired differently
            return
        self.stats.error_changes[change] += 1
        self.diff(path, cv, rv)

    # -- ShareFetch ----------------------------------------------------------------------------------
    def _share_partitions(self, path: str, cap_topics: list, rep_topics: list) -> None:
        """ShareFetch partitions paired by (topic id, partition); acquisitions per the acquisition-race rule."""
        values = self.mapper.values

        def index(topics: list, mapped: bool) -> dict[tuple, Any]:
            out: dict[tuple, Any] = {}
            for t in topics:
                tid = t.get("topic_id")
                if mapped:
                    tid = values.get(("topic", tid), tid)
                for p in t.get("partitions") or ():
                    out[(tid, p.get("partition_index"))] = p
            return out

        cap_parts, rep_parts = index(cap_topics, True), index(rep_topics, False)
        ppath = f"{path}[].partitions[]"
        for key in list(cap_parts) + [k for k in rep_parts if k not in cap_parts]:
            cp, rp = cap_parts.get(key), rep_parts.get(key)
            if cp is None or rp is None:
                present: Any = cp if cp is not None else rp
                if present.get("error_code") or present.get("acknowledge_error_code"):
                    self.diff(f"{ppath}[{key[1]}]", None if cp is None else "answered",
                              None if rp is None else "answered")
                else:
                    self.expect(f"{ppath}.answered", ACQUISITION_RACE)
                    if present.get("acquired_records"):
                        self._diverged()
                continue
            ranges_c = [(a.get("first_offset"), a.get("last_offset")) for a in cp.get("acquired_records") or ()]
            ranges_r = [(a.get("first_offset"), a.get("last_offset")) for a in rp.get("acquired_records") or ()]
            if ranges_c != ranges_r:
                self._diverged()
            self._dict(cp, rp, ppath, skip=("acquired_records", "records", "acknowledge_error_code",
                                             "acknowledge_error_message"))
            self.error(f"{ppath}.acknowledge_error_code", cp.get("acknowledge_error_code"),
                       rp.get("acknowledge_error_code"))
            if cp.get("acknowledge_error_code") == rp.get("acknowledge_error_code"):
                self.compare(cp.get("acknowledge_error_message"), rp.get("acknowledge_error_message"),
                             f"{ppath}.acknowledge_error_message")
            if ranges_c != ranges_r:
                self.expect(f"{ppath}.acquired_records", ACQUISITION_RACE)
                child = self._child()
                child.records(f"{ppath}.records", cp.get("records"), rp.get("records"))
                if child.diffs:
                    self.expect(f"{ppath}.records", ACQUISITION_RACE)
                continue
            counts_c = [a.get("delivery_count") for a in cp.get("acquired_records") or ()]
            counts_r = [a.get("delivery_count") for a in rp.get("acquired_records") or ()]
            if counts_c != counts_r:
                self.expect(f"{ppath}.acquired_records.delivery_count", ACQUISITION_RACE)
            self.records(f"{ppath}.records", cp.get("records"), rp.get("records"))

    def _diverged(self) -> None:
        if self.ctx.member is not None:
            self.mapper.acquisition_diverged.add(self.ctx.member)
        if self.ctx.group is not None:
            self.mapper.diverged_groups.add(self.ctx.group)

    # -- record batches ------------------------------------------------------------------------------
    def records(self, path: str, cap: Any, rep: Any) -> None:
        """Record batches: headers field by field (CRC and log-append timestamps excepted), then records."""
        if cap is None or rep is None:
            if len(cap if cap is not None else b"") + len(rep if rep is not None else b"") > 0:
                self.diff(path, cap, rep)
            return
        try:
            cb = list(iter_batches(cap, check_crc=False, allow_truncated_tail=True))
            rb = list(iter_batches(rep, check_crc=False, allow_truncated_tail=True))
        except ProtocolError:  # not record batches: compared as bytes
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
                        self.expect(f"{path}[].{name}")
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
