"""Field-by-field comparison of a captured response with the replayed one, expected differences aside."""

from __future__ import annotations

import re
from typing import Any

from ...protocol.errors import ErrorCode
from ...protocol.records import LOG_APPEND_TIME, iter_batches
from .report import ApiStats
from .rewrite import _MAPPED_KIND, _Ctx, _jsonable, _key, _Mapper

#: Response fields that differ between runs by design: counted, never compared.
IGNORED_FIELDS = frozenset({"throttle_time_ms", "cluster_id", "host", "port", "log_append_time_ms"})
_BATCH_FIELDS = ("partition_leader_epoch", "magic", "attributes", "last_offset_delta", "base_timestamp",
                 "max_timestamp", "producer_id", "producer_epoch", "base_sequence", "record_count")


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
