"""Captured request/response pairs decoded into flat rows: the tables the analyses run on.

Pure Python, no Spark: the ``minikafka`` data source calls these in the
executors, and they are usable on their own.  Three tables:

* ``requests``: one row per request/response pair (:data:`REQUEST_SCHEMA`):
  header fields, sizes on the wire, latency, throttle time, errors, and for
  Fetch the session id/epoch and kind (sessionless, full, incremental).
* ``partitions``: one row per topic-partition named in a Produce or Fetch
  request or response (:data:`PARTITION_SCHEMA`): offsets, record bytes and
  counts (read from the 61-byte batch headers; records are never decoded),
  high watermark, errors, session fields, and forgotten partitions.
* ``topics``: topic id -> name, from Metadata and CreateTopics responses, to
  name partitions of Fetch v13+ requests, which carry only topic ids.

Sizes count the whole frame including its 4-byte size prefix, as the bytes on
the wire; ``*_body_bytes`` count the body after the header (the seed figures
12031/12043/33 are body sizes).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

from ..capture.format import CaptureRecord
from ..capture.frames import api_name, parse_request_header, response_body_offset
from ..protocol.api import APIS, ApiKey
from ..protocol.errors import ErrorCode
from ..protocol.records import InvalidRecordError, iter_batches

log = logging.getLogger(__name__)

REQUEST_COLUMNS: list[tuple[str, str]] = [
    ("source", "string"), ("broker_id", "int"), ("connection_id", "string"), ("peer", "string"),
    ("server", "string"), ("principal", "string"), ("client_id", "string"),
    ("api_key", "int"), ("api_name", "string"), ("api_version", "int"), ("correlation_id", "int"),
    ("receive_ns", "bigint"), ("send_ns", "bigint"), ("latency_ms", "double"),
    ("request_bytes", "bigint"), ("response_bytes", "bigint"),
    ("request_body_bytes", "bigint"), ("response_body_bytes", "bigint"), ("has_response", "boolean"),
    ("throttle_time_ms", "int"), ("error_code", "int"), ("error_name", "string"), ("error_count", "int"),
    ("replica_id", "int"), ("acks", "int"),
    ("fetch_session_id", "int"), ("fetch_session_epoch", "int"), ("fetch_kind", "string"),
    ("response_session_id", "int"), ("max_wait_ms", "int"), ("min_bytes", "int"), ("max_bytes", "int"),
    ("request_partitions", "int"), ("response_partitions", "int"), ("forgotten_partitions", "int"),
    ("record_bytes", "bigint"), ("record_count", "bigint"), ("decode_error", "string"),
]

PARTITION_COLUMNS: list[tuple[str, str]] = [
    ("source", "string"), ("broker_id", "int"), ("connection_id", "string"), ("client_id", "string"),
    ("api_key", "int"), ("api_name", "string"), ("api_version", "int"), ("correlation_id", "int"),
    ("receive_ns", "bigint"), ("send_ns", "bigint"),
    ("replica_id", "int"), ("fetch_session_id", "int"), ("fetch_session_epoch", "int"),
    ("fetch_kind", "string"),
    ("topic", "string"), ("topic_id", "string"), ("partition", "int"),
    ("in_request", "boolean"), ("in_response", "boolean"), ("forgotten", "boolean"),
    ("fetch_offset", "bigint"), ("partition_max_bytes", "int"),
    ("base_offset", "bigint"), ("last_offset", "bigint"),
    ("high_watermark", "bigint"), ("last_stable_offset", "bigint"), ("log_start_offset", "bigint"),
    ("error_code", "int"), ("record_bytes", "bigint"), ("record_count", "bigint"), ("batch_count", "int"),
]

TOPIC_COLUMNS: list[tuple[str, str]] = [("topic_id", "string"), ("topic", "string"), ("receive_ns", "bigint")]


def ddl(columns: list[tuple[str, str]]) -> str:
    """A Spark DDL schema string for a column list."""
    return ", ".join(f"{name} {typ}" for name, typ in columns)


REQUEST_SCHEMA = ddl(REQUEST_COLUMNS)
PARTITION_SCHEMA = ddl(PARTITION_COLUMNS)
TOPIC_SCHEMA = ddl(TOPIC_COLUMNS)
SCHEMAS = {"requests": REQUEST_SCHEMA, "partitions": PARTITION_SCHEMA, "topics": TOPIC_SCHEMA}
COLUMNS = {"requests": REQUEST_COLUMNS, "partitions": PARTITION_COLUMNS, "topics": TOPIC_COLUMNS}

_ZERO_UUID = "00000000-0000-0000-0000-000000000000"
_FETCH, _PRODUCE = int(ApiKey.FETCH), int(ApiKey.PRODUCE)


def error_name(code: int | None) -> str | None:
    if code is None:
        return None
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"UNKNOWN_{code}"


def fetch_kind(version: int, session_id: int, epoch: int) -> str:
    """KIP-227's request kinds: sessionless (before v7 or epoch -1 with id 0), full, incremental, close."""
    if version < 7 or (session_id == 0 and epoch == -1):
        return "sessionless"
    if epoch == 0:
        return "full"
    if epoch == -1:
        return "close"
    return "incremental"


def batch_stats(records: Any) -> tuple[int, int, int, int, int]:
    """(bytes, records, batches, first base offset, last offset) of a records field, from batch headers only.

    A truncated trailing batch (allowed in Fetch responses) counts in the bytes but not in the batches.
    """
    if records is None:
        return 0, 0, 0, -1, -1
    n = len(records)
    count = batches = 0
    first = last = -1
    try:
        for h, _view in iter_batches(records, check_crc=False, allow_truncated_tail=True):
            count += h.record_count
            batches += 1
            if first < 0:
                first = h.base_offset
            last = h.last_offset
    except InvalidRecordError:
        pass
    return n, count, batches, first, last


def _errors(obj: Any, acc: list[int]) -> None:
    """Every non-zero ``error_code`` in a parsed body, depth first."""
    if isinstance(obj, list):
        for item in obj:
            _errors(item, acc)
        return
    if not hasattr(obj, "items"):
        return
    for k, v in obj.items():
        if k == "error_code":
            if v:
                acc.append(v)
        elif isinstance(v, list) or hasattr(v, "items"):
            _errors(v, acc)


def _uuid(u: Any) -> str | None:
    if u is None:
        return None
    s = str(u)
    return None if s == _ZERO_UUID else s


class RecordDecoder:
    """Turns :class:`CaptureRecord`s into rows; keeps the topic-id -> name map it has seen."""

    def __init__(self, source: str = "") -> None:
        self.source = source
        self.topic_names: dict[str, str] = {}
        self.errors = 0

    # -- requests table ---------------------------------------------------------------
    def request_row(self, r: CaptureRecord, req: Any = None, resp: Any = None, err: str | None = None) -> tuple:
        """The ``requests`` row of a record (``req``/``resp`` the parsed bodies, if parsed already)."""
        req_len = len(r.request) + 4
        resp_len = 0 if r.response is None else len(r.response) + 4
        try:
            hdr = parse_request_header(r.request)
            req_body = req_len - 4 - hdr.body_offset
        except Exception:  # noqa: BLE001 - a malformed capture frame becomes a row with decode_error
            req_body = None
        resp_body = None
        if r.response is not None:
            try:
                resp_body = resp_len - 4 - response_body_offset(r.response, r.api_key, r.api_version)
            except Exception:  # noqa: BLE001
                resp_body = None
        throttle = error_code = replica = acks = None
        sess_id = sess_epoch = kind = resp_sess = max_wait = min_bytes = max_bytes = None
        n_req = n_resp = n_forgot = None
        rec_bytes = rec_count = None
        errs: list[int] = []
        if resp is not None:
            throttle = resp.get("throttle_time_ms")
            top = resp.get("error_code")
            _errors(resp, errs)
            error_code = top if top else (errs[0] if errs else 0)
        if req is not None and r.api_key == _FETCH:
            replica = req.replica_id
            max_wait, min_bytes, max_bytes = req.max_wait_ms, req.min_bytes, req.max_bytes
            sess_id = req.get("session_id", 0)
            sess_epoch = req.get("session_epoch", -1)
            kind = fetch_kind(r.api_version, sess_id, sess_epoch)
            n_req = sum(len(t.partitions) for t in req.topics)
            n_forgot = sum(len(t.partitions) for t in req.get("forgotten_topics_data") or ())
            if resp is not None:
                resp_sess = resp.get("session_id", 0)
                n_resp = sum(len(t.partitions) for t in resp.responses)
                rec_bytes = rec_count = 0
                for t in resp.responses:
                    for p in t.partitions:
                        b, c, _n, _f, _l = batch_stats(p.records)
                        rec_bytes += b
                        rec_count += c
        elif req is not None and r.api_key == _PRODUCE:
            acks = req.acks
            n_req = sum(len(t.partition_data) for t in req.topic_data)
            rec_bytes = rec_count = 0
            for t in req.topic_data:
                for p in t.partition_data:
                    b, c, _n, _f, _l = batch_stats(p.records)
                    rec_bytes += b
                    rec_count += c
            if resp is not None:
                n_resp = sum(len(t.partition_responses) for t in resp.responses)
        return (self.source, r.broker_id, r.connection_id, r.peer, r.server, r.principal, r.client_id,
                r.api_key, api_name(r.api_key), r.api_version, r.correlation_id,
                r.receive_ns, r.send_ns, (r.send_ns - r.receive_ns) / 1e6 if r.response is not None else None,
                req_len, resp_len, req_body, resp_body, r.response is not None,
                throttle, error_code, error_name(error_code), len(errs),
                replica, acks, sess_id, sess_epoch, kind, resp_sess, max_wait, min_bytes, max_bytes,
                n_req, n_resp, n_forgot, rec_bytes, rec_count, err)

    # -- partitions table -------------------------------------------------------------
    def partition_rows(self, r: CaptureRecord, req: Any, resp: Any) -> Iterator[tuple]:
        """The ``partitions`` rows of a Produce or Fetch record (nothing for other APIs)."""
        if req is None or r.api_key not in (_FETCH, _PRODUCE):
            return
        head = (self.source, r.broker_id, r.connection_id, r.client_id, r.api_key, api_name(r.api_key),
                r.api_version, r.correlation_id, r.receive_ns, r.send_ns)
        if r.api_key == _PRODUCE:
            yield from self._produce_rows(head, req, resp)
        else:
            yield from self._fetch_rows(head, r.api_version, req, resp)

    def _produce_rows(self, head: tuple, req: Any, resp: Any) -> Iterator[tuple]:
        answers: dict[tuple[str, int], Any] = {}
        if resp is not None:
            for t in resp.responses:
                for p in t.partition_responses:
                    answers[(t.name, p.index)] = p
        for t in req.topic_data:
            for p in t.partition_data:
                b, c, n, first, last = batch_stats(p.records)
                a = answers.pop((t.name, p.index), None)
                base = a.base_offset if a is not None else None
                last_off = base + c - 1 if a is not None and base is not None and base >= 0 and c else None
                yield head + (None, None, None, None, t.name, None, p.index, True, a is not None, False,
                              None, None, base, last_off, None, None,
                              a.get("log_start_offset") if a is not None else None,
                              a.error_code if a is not None else None, b, c, n)
        for (topic, index), a in answers.items():  # answered but not asked: should not happen
            yield head + (None, None, None, None, topic, None, index, False, True, False, None, None,
                          a.base_offset, None, None, None, a.get("log_start_offset"), a.error_code, 0, 0, 0)

    def _topic(self, t: Any, version: int) -> tuple[str | None, str | None]:
        if version >= 13:
            tid = _uuid(t.topic_id)
            return self.topic_names.get(tid) if tid else None, tid
        return t.topic, None

    def _fetch_rows(self, head: tuple, version: int, req: Any, resp: Any) -> Iterator[tuple]:
        sess_id = req.get("session_id", 0)
        epoch = req.get("session_epoch", -1)
        sess = (req.replica_id, sess_id, epoch, fetch_kind(version, sess_id, epoch))
        asked: dict[tuple, Any] = {}
        for t in req.topics:
            topic, tid = self._topic(t, version)
            for p in t.partitions:
                asked[(tid or topic, p.partition)] = (topic, tid, p)
        answered: dict[tuple, Any] = {}
        if resp is not None:
            for t in resp.responses:
                topic, tid = self._topic(t, version)
                for p in t.partitions:
                    answered[(tid or topic, p.partition_index)] = (topic, tid, p)
        for key in list(asked) + [k for k in answered if k not in asked]:
            q = asked.get(key)
            a = answered.get(key)
            topic, tid, _ = q or a
            qp = q[2] if q else None
            ap = a[2] if a else None
            b, c, n, first, last = batch_stats(ap.records) if ap is not None else (0, 0, 0, -1, -1)
            yield head + sess + (topic, tid, key[1], q is not None, a is not None, False,
                                 qp.fetch_offset if qp else None, qp.partition_max_bytes if qp else None,
                                 first if n else None, last if n else None,
                                 ap.high_watermark if ap else None, ap.last_stable_offset if ap else None,
                                 ap.log_start_offset if ap else None, ap.error_code if ap else None, b, c, n)
        for t in req.get("forgotten_topics_data") or ():
            topic, tid = self._topic(t, version)
            for part in t.partitions:
                yield head + sess + (topic, tid, part, False, False, True) + (None,) * 8 + (0, 0, 0)

    # -- topics table -----------------------------------------------------------------
    def topic_rows(self, r: CaptureRecord, resp: Any) -> Iterator[tuple]:
        """(topic id, name) pairs from Metadata and CreateTopics responses (also remembered)."""
        if resp is None or r.api_key not in (int(ApiKey.METADATA), int(ApiKey.CREATE_TOPICS)):
            return
        for t in resp.topics:
            tid = _uuid(t.get("topic_id"))
            name = t.get("name")
            if tid and name:
                self.topic_names[tid] = name
                yield (tid, name, r.receive_ns)

    # -- all tables ---------------------------------------------------------------------
    def parse(self, r: CaptureRecord) -> tuple[Any, Any, str | None]:
        """(request body, response body, error) of a record; bodies are None where they do not parse."""
        api = APIS.get(r.api_key)
        if api is None:
            return None, None, f"unknown api key {r.api_key}"
        req = resp = None
        try:
            hdr = parse_request_header(r.request)
            req = api.request.parse(memoryview(r.request)[hdr.body_offset:], r.api_version)
            if r.response is not None:
                off = response_body_offset(r.response, r.api_key, r.api_version)
                resp = api.response.parse(memoryview(r.response)[off:], r.api_version)
        except Exception as exc:  # noqa: BLE001 - recorded in the row, never fatal
            self.errors += 1
            return req, resp, f"{type(exc).__name__}: {exc}"[:200]
        return req, resp, None

    def rows(self, r: CaptureRecord, table: str) -> Iterator[tuple]:
        """The rows of ``table`` ("requests", "partitions" or "topics") for one record."""
        req, resp, err = self.parse(r)
        if table == "requests":
            list(self.topic_rows(r, resp))
            yield self.request_row(r, req, resp, err)
        elif table == "partitions":
            list(self.topic_rows(r, resp))
            yield from self.partition_rows(r, req, resp)
        elif table == "topics":
            yield from self.topic_rows(r, resp)
        else:
            raise ValueError(f"unknown table {table!r} (requests, partitions, topics)")
