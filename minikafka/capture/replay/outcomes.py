"""Comparison in the replay: how each replayed request ended (answered, timed out, lost, no answer expected),
and the replayed answer against the captured one, counted per API in the :class:`~.report.ReplayReport`.

An answer equal byte for byte (after the correlation id), or a Fetch answer equal once its mapped values are
(:mod:`.fastpath`), is equal; any other is parsed and compared field by field (:class:`~.compare._Comparison`,
which also learns the values the target made up); what does not parse is compared as raw bytes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from ...protocol.api import ApiKey
from ...protocol.exceptions import ProtocolError
from ..frames import parse_request_frame, parse_response_frame
from .compare import _INDEX_RE, _Comparison
from .fastpath import fetch_answer_equal
from .inflight import ReplayedRequest
from .rename import CopyNames, unrename_response
from .report import ApiStats, ReplayReport
from .rewrite import _Ctx, _Mapper
from .rewriter import request_context

log = logging.getLogger(__name__)

#: How a replayed request ended: "response", "timeout", "lost" or "none" (acks=0: no answer expected).
Outcome = str


class Outcomes:
    """Accounts for each replayed request's outcome and compares its answer (see the module docstring)."""

    def __init__(self, mapper: _Mapper, report: ReplayReport, *, introduced_by: Callable[[int], Sequence[tuple]],
                 epoch_members: set[str], max_examples: int, names: CopyNames | None = None) -> None:
        self.mapper = mapper
        self.report = report
        self.introduced_by = introduced_by  # an answer equal byte for byte shows these values unchanged
        self.epoch_members = epoch_members
        self.max_examples = max_examples
        self.names = names  # --scale: answers are un-renamed before the comparison

    def account(self, entry: ReplayedRequest, outcome: Outcome) -> bool:
        """Count how a request ended; True if it was answered (then :meth:`compare` it)."""
        rec = entry.rec
        st = self.report.api(rec.api_key)
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
            return True
        return False

    def compare(self, conn_name: str, entry: ReplayedRequest) -> None:
        """Compare an answered request's answer with the captured one; differences are counted, with examples
        naming the replayed connection ``conn_name``."""
        rec, frame = entry.rec, entry.frame
        st = self.report.api(rec.api_key)
        assert frame is not None
        if rec.response is not None and len(frame) == len(rec.response) and frame[4:] == rec.response[4:]:
            st.equal += 1  # byte for byte (after the correlation id): nothing to compare, values map to themselves
            for key in self.introduced_by(entry.rid):
                self.mapper.learn(key, key[-1])
            return
        if rec.api_key == ApiKey.FETCH and rec.response is not None and self.names is None and fetch_answer_equal(
                rec.response, frame, rec.api_version, rec.broker_id, self.mapper, st.expected_differences):
            st.equal += 1  # equal once its session id and topic ids are mapped
            return
        cmp = _Comparison(self.mapper, self._context(entry), st)
        if rec.response is None:
            cmp.diff("<response>", None, frame[4:])
        elif not entry.known:
            if bytes(rec.response[4:]) != bytes(frame[4:]):
                cmp.diff("<raw>", rec.response[4:], frame[4:])
        else:
            try:
                _, cap = parse_response_frame(rec.response, rec.api_key, rec.api_version)
            except ProtocolError as exc:
                log.debug("captured %s response does not parse: %s", st.name, exc)
                if bytes(rec.response[4:]) != bytes(frame[4:]):
                    cmp.diff("<raw>", rec.response[4:], frame[4:])
                cap = None
            if cap is not None:
                try:
                    _, rep = parse_response_frame(frame, rec.api_key, rec.api_version)
                except ProtocolError as exc:
                    cmp.diff("<body>", "parses", f"does not parse: {exc}")
                else:
                    if self.names is not None:
                        unrename_response(rec.api_key, rep, self.names)
                    cmp.compare_body(cap, rep)
        self._count(conn_name, entry, st, cmp)

    def _context(self, entry: ReplayedRequest) -> _Ctx:
        """The request's mapping context (made now for a request sent as captured); a request that does not
        parse is marked unknown (its answer compared as raw bytes)."""
        rec = entry.rec
        if entry.ctx is not None:
            return entry.ctx
        if entry.known:
            try:
                return request_context(rec, parse_request_frame(rec.request)[1], self.epoch_members)
            except ProtocolError as exc:  # compared as raw bytes
                log.debug("captured %s request does not parse: %s", self.report.api(rec.api_key).name, exc)
        entry.known = False
        return _Ctx(rec.broker_id, None)

    def _count(self, conn_name: str, entry: ReplayedRequest, st: ApiStats, cmp: _Comparison) -> None:
        rec = entry.rec
        if not cmp.diffs:
            st.equal += 1
            return
        st.differing += 1
        for path, c, r, expected in cmp.diffs:
            st.differing_fields[_INDEX_RE.sub("[]", path)] += 1
            if len(st.examples) < self.max_examples:
                ex = {"connection": conn_name, "correlation_id": rec.correlation_id,
                      "path": path, "captured": c, "replayed": r}
                if expected is not None:
                    ex["expected"] = expected  # the captured value mapped (e.g. producer id 1000 -> 1001)
                st.examples.append(ex)
