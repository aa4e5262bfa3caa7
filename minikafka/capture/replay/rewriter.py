"""Rewriting on the way out: the frame a captured request is replayed as.

The replay's correlation id replaces the captured one; values the target makes up (session, topic, member and
producer ids, epochs: :mod:`.rewrite`) are replaced by the ones the target gave, once known (a request waits for
the values it needs); at max speed a long poll the plan answers at once gets MaxWaitMs 0; under ``--scale`` the
names are the copy's (:mod:`.rename`).  Fetch, the hot API, goes through the byte-level :mod:`.fastpath`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from ...protocol.api import APIS, ApiKey
from ...protocol.exceptions import ProtocolError
from ..format import CaptureRecord
from ..frames import ParsedHeader, parse_request_frame, rewrite_correlation_id
from .fastpath import fetch_request, zero_max_wait
from .inflight import ReplayedRequest
from .plan import ReplayPlan
from .rename import CopyNames, rename_client_id, rename_request_frame
from .report import ReplayReport
from .rewrite import _REQUEST_KINDS, _batch_producers, _Ctx, _mapped_fields, _Mapper, rewrite_producer_ids

log = logging.getLogger(__name__)


def request_context(rec: CaptureRecord, body: Any, epoch_members: set[str]) -> _Ctx:
    """What mapping a parsed request's values needs: its broker, group, api and member."""
    member = body.get("member_id")
    return _Ctx(rec.broker_id, body.get("group_id") or None, epoch_members, rec.api_key,
                member if isinstance(member, str) and member else None)


class RequestRewriter:
    """Makes the frame each captured request is sent as (see the module docstring)."""

    def __init__(self, plan: ReplayPlan, mapper: _Mapper, report: ReplayReport, *,
                 introduced_by: Callable[[int], Sequence[tuple]], max_speed: bool, timeout_s: float,
                 names: CopyNames | None = None) -> None:
        self.plan = plan
        self.mapper = mapper
        self.report = report
        self.introduced_by = introduced_by  # a request does not wait for the values it introduces itself
        self.max_speed = max_speed
        self.timeout_s = timeout_s
        self.names = names  # --scale: this replayer's copy of the capture

    async def prepare(self, rid: int, rec: CaptureRecord, corr: int) -> tuple[bytes, ReplayedRequest]:
        """The frame to send (correlation id replaced, mapped values rewritten, renamed for the copy) and the
        request to await the answer of."""
        frame, entry = await self._rewrite(rid, rec, corr)
        if self.names is not None:
            frame = self._rename(rec, frame, self.names)
        return frame, entry

    def _raw(self, rid: int, rec: CaptureRecord, corr: int) -> bytes:
        """The captured frame with the replay's correlation id (and, at max speed, a long poll the plan answers
        at once: its MaxWaitMs set to 0)."""
        frame = bytearray(rec.request)
        frame[4:8] = corr.to_bytes(4, "big", signed=True)
        if self.max_speed and self.plan.long_poll[rid]:
            zero_max_wait(frame, rec.api_version)
            self.report.long_polls_shortened += 1
        return bytes(frame)

    async def _rewrite(self, rid: int, rec: CaptureRecord, corr: int) -> tuple[bytes, ReplayedRequest]:
        """The frame with the correlation id replaced and mapped values rewritten."""
        if not self.plan.mapped[rid]:
            return self._raw(rid, rec, corr), ReplayedRequest(rid, rec, None, known=rec.api_key in APIS)
        if rec.api_key == ApiKey.FETCH:
            fast = fetch_request(bytearray(self._raw(rid, rec, corr)), rec.api_version, rec.broker_id, self.mapper)
            if fast is not None:
                if fast != rec.request:
                    self.report.api(rec.api_key).rewritten += 1
                return bytes(fast), ReplayedRequest(rid, rec, None, known=True)
        parsed = self._parse(rec)
        if parsed is None:  # sent as captured, its answer compared as raw bytes
            return self._raw(rid, rec, corr), ReplayedRequest(rid, rec, _Ctx(rec.broker_id, None), known=False)
        hdr, body = parsed
        ctx = request_context(rec, body, self.plan.epoch_members)
        entry = ReplayedRequest(rid, rec, ctx, known=True)
        fields = list(_mapped_fields(body, ctx, _REQUEST_KINDS))
        producers: list[tuple[Any, list[tuple[int, int]]]] = []  # (partition_data, (pid, epoch) pairs)
        if rec.api_key == ApiKey.PRODUCE:
            for td in body.topic_data:
                for pd in td.partition_data:
                    pairs = list(_batch_producers(pd.records))
                    if pairs:
                        producers.append((pd, pairs))
        keys = [k for _, _, k in fields] + [k for _, pairs in producers for p, e in pairs
                                            for k in (("pid", p), ("epoch", p, e))]
        if not keys:
            return self._raw(rid, rec, corr), entry
        own = self.introduced_by(rid)
        await self.mapper.wait([k for k in keys if k not in own] if own else keys, self.timeout_s)
        if not self._apply(fields, producers):
            return self._raw(rid, rec, corr), entry
        self.report.api(rec.api_key).rewritten += 1
        if self.max_speed and self.plan.long_poll[rid]:
            body["max_wait_ms"] = 0
            self.report.long_polls_shortened += 1
        new_body = APIS[rec.api_key].request.build(body, rec.api_version)
        return rewrite_correlation_id(bytes(rec.request[:hdr.body_offset]) + new_body, corr), entry

    @staticmethod
    def _parse(rec: CaptureRecord) -> tuple[ParsedHeader, Any] | None:
        """The captured request's header and body; None for an api minikafka does not know or bytes that do not
        parse."""
        api = APIS.get(rec.api_key)
        if api is None:
            return None
        try:
            return parse_request_frame(rec.request)
        except ProtocolError as exc:
            log.debug("%s request does not parse: %s", api.name, exc)
            return None

    def _apply(self, fields: list[tuple[dict, str, tuple]], producers: list[tuple[Any, list[tuple[int, int]]]]) -> bool:
        """Replace the mapped values in the parsed body (fields, then producer ids in record batches); whether
        anything changed."""
        values = self.mapper.values
        changed = False
        for container, name, key in fields:
            new = self.mapper.member_epoch(key) if key[0] == "mepoch" else values.get(key)
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
        return changed

    @staticmethod
    def _rename(rec: CaptureRecord, frame: bytes, names: CopyNames) -> bytes:
        """``--scale``: the request frame of this replayer's copy (names renamed, :mod:`.rename`); of an api or
        version minikafka does not know (or a body that does not parse), its client id only."""
        api = APIS.get(rec.api_key)
        if api is None or not api.request.supports(rec.api_version):
            return rename_client_id(frame, names)
        try:
            return rename_request_frame(frame, names)
        except ProtocolError as exc:
            log.debug("%s request not renamed, its client id only: %s", api.name, exc)
            return rename_client_id(frame, names)
