"""The ``requests`` and ``partitions`` rows of Produce and Fetch records read straight off the wire bytes.

Produce and Fetch are nearly all of a capture of real traffic.  The general
path (:class:`~minikafka.analysis.decode.RecordDecoder`) parses their bodies
into Containers, walks them for error codes and builds the rows from them;
this module reads the few fields the rows need with ``struct.unpack_from`` at
offsets in the frames, counts record batches from their headers in place, and
builds the same tuples, with no Container, no memoryview of a records field
and no generic walk.

It covers the non-flexible versions whose every column comes from the wire
(Produce v5-v8, Fetch v7-v11) and the common case: anything else -- another
version, a header or body that does not parse exactly as the schema says (a
truncated frame, a null where none may be, bad UTF-8, a count larger than the
bytes left), control or transactional batches, a Produce answer for a
partition not asked -- makes :func:`fast_rows` answer None, and the caller takes
the general path, which then gives the row its ``decode_error`` or counts.  The
tests check both paths give the same rows for every version covered.

Also home to the small helpers both paths share (:func:`fetch_kind`,
:func:`error_name`, :func:`api_name_of`).
"""

from __future__ import annotations

import struct
from typing import Any

from ..capture.format import CaptureRecord
from ..capture.frames import api_name
from ..protocol.errors import ErrorCode
from ..protocol.exceptions import ProtocolError

__all__ = ["FAST_VERSIONS", "api_name_of", "error_name", "fast_rows", "fetch_kind"]

_PRODUCE, _FETCH = 0, 1
#: api key -> the versions :func:`fast_rows` reads (the others: None, the general path).
FAST_VERSIONS = {_PRODUCE: range(5, 9), _FETCH: range(7, 12)}

_API_NAMES: dict[int, str] = {}
_ERROR_NAMES: dict[int, str] = {}


def api_name_of(api_key: int) -> str:
    """:func:`~minikafka.capture.frames.api_name`, remembered."""
    name = _API_NAMES.get(api_key)
    if name is None:
        name = _API_NAMES[api_key] = api_name(api_key)
    return name


def error_name(code: int | None) -> str | None:
    """The :class:`ErrorCode` name of a code (``UNKNOWN_<code>`` for one Kafka does not define)."""
    if code is None:
        return None
    name = _ERROR_NAMES.get(code)
    if name is None:
        try:
            name = ErrorCode(code).name
        except ValueError:
            name = f"UNKNOWN_{code}"
        _ERROR_NAMES[code] = name
    return name


def fetch_kind(version: int, session_id: int, epoch: int) -> str:
    """KIP-227's request kinds: sessionless (before v7 or epoch -1 with id 0), full, incremental, close."""
    if version < 7 or (session_id == 0 and epoch == -1):
        return "sessionless"
    if epoch == 0:
        return "full"
    if epoch == -1:
        return "close"
    return "incremental"


_I16 = struct.Struct(">h").unpack_from
# A request header v1 (the non-flexible versions read here): api key, api version, correlation id, client id length.
_REQUEST_HEADER = struct.Struct(">hhih").unpack_from
#: Where the body of a response starts: after the correlation id (response header v0, non-flexible versions).
_RESPONSE_BODY = 4
_I32 = struct.Struct(">i").unpack_from
# Produce request: acks, timeout_ms (after the transactional id); a partition: index, records length.
_PRODUCE_HEAD = struct.Struct(">hi").unpack_from
_PRODUCE_PART = struct.Struct(">ii").unpack_from
# Produce response partition (v5+): index, error_code, base_offset, log_append_time_ms, log_start_offset.
_PRODUCE_ANSWER = struct.Struct(">ihqqq").unpack_from
# Fetch request (v7+): replica_id, max_wait_ms, min_bytes, max_bytes, isolation_level, session_id, session_epoch.
_FETCH_HEAD = struct.Struct(">iiiibii").unpack_from
# A Fetch request partition: v9+ partition, current_leader_epoch, fetch_offset, log_start_offset,
# partition_max_bytes; v7-v8 without the leader epoch.
_FETCH_ASK_9 = struct.Struct(">iiqqi").unpack_from
_FETCH_ASK_7 = struct.Struct(">iqqi").unpack_from
# Fetch response (v7+): throttle_time_ms, error_code, session_id; a partition: partition_index, error_code,
# high_watermark, last_stable_offset, log_start_offset.
_FETCH_RESP_HEAD = struct.Struct(">ihi").unpack_from
_FETCH_ANSWER = struct.Struct(">ihqqq").unpack_from
# A v2 record batch header: base offset, batch length, magic, attributes, last offset delta, record count
# (as minikafka.capture.transactions reads it).
_BATCH = struct.Struct(">qi4xb4xhi30xi").unpack_from
_BATCH_HEADER = 61

#: The counts of a null or empty ``records`` field: (bytes, records, batches, first offset, last offset) and
#: zeros for the control and transactional counts (:class:`~minikafka.capture.transactions.BatchCounts`' order).
_NO_RECORDS = (0, 0, 0, -1, -1, 0, 0, 0, 0, 0, 0, 0)


class _Fallback(Exception):
    """The bytes are not the common case: the general path decides."""


def _counts(buf: memoryview, pos: int, n: int) -> tuple:
    """:func:`~minikafka.capture.transactions.batch_counts` of the ``n``-byte records field at ``pos``, for
    fields of data batches only (a control or transactional batch: :class:`_Fallback`)."""
    end = pos + n
    records = batches = 0
    first = last = -1
    while end - pos >= _BATCH_HEADER:
        base, length, magic, attributes, last_delta, count = _BATCH(buf, pos)
        if magic != 2 or length < 49 or attributes & 7 > 4 or count < 0:
            break
        size = length + 12
        if size > end - pos:
            break
        if attributes & 0x30:
            raise _Fallback
        records += count
        batches += 1
        if first < 0:
            first = base
        last = base + last_delta
        pos += size
    return (n, records, batches, first, last, 0, 0, 0, 0, 0, 0, 0)


def _string(buf: memoryview, pos: int, end: int) -> tuple[str, int]:
    """A non-nullable string (int16 length) at ``pos``: (value, next position)."""
    n = _I16(buf, pos)[0]
    pos += 2
    if n < 0 or pos + n > end:
        raise _Fallback
    return str(buf[pos:pos + n], "utf-8"), pos + n


def _skip_nullable_string(buf: memoryview, pos: int, end: int) -> int:
    """Past a nullable string (checked and decoded as the parser does, value dropped)."""
    n = _I16(buf, pos)[0]
    pos += 2
    if n < 0:
        return pos
    if pos + n > end:
        raise _Fallback
    str(buf[pos:pos + n], "utf-8")
    return pos + n


def _count(buf: memoryview, pos: int, end: int) -> int:
    """A non-nullable array's length at ``pos`` (checked as the parser does)."""
    n = _I32(buf, pos)[0]
    if n < 0 or n > end - pos - 4:
        raise _Fallback
    return n


def fast_rows(r: CaptureRecord, source: str) -> tuple[tuple, list[tuple]] | None:
    """(``requests`` row, ``partitions`` rows) of a Produce or Fetch record, the tuples
    :class:`~minikafka.analysis.decode.RecordDecoder` gives; None where it must decide (see the module)."""
    versions = FAST_VERSIONS.get(r.api_key)
    if versions is None or r.api_version not in versions:
        return None
    try:
        if r.api_key == _PRODUCE:
            return _produce(r, source)
        return _fetch(r, source)
    except (_Fallback, ProtocolError, struct.error, IndexError, UnicodeDecodeError):
        return None


def _body_offset(buf: memoryview, key: int, version: int) -> int:
    """``request_body_offset`` of a non-flexible request whose header names ``key`` and ``version`` (header v1:
    no tagged fields); another header (the parser would look for tags) or a short frame: :class:`_Fallback`."""
    if len(buf) < 10:
        raise _Fallback
    frame_key, frame_version, _corr, n = _REQUEST_HEADER(buf, 0)
    if frame_key != key or frame_version != version:
        raise _Fallback
    return 10 + n if n >= 0 else 10


def _request_row(r: CaptureRecord, source: str, name: str, req_body: int, resp_body: int | None, throttle: Any,
                 errors: list[int], top: int, replica: int | None, acks: int | None, sess_id: int | None,
                 epoch: int | None, kind: str | None, resp_sess: int | None, max_wait: int | None,
                 min_bytes: int | None, max_bytes: int | None, n_req: int, n_resp: int | None,
                 n_forgot: int | None, rec_bytes: int | None, rec_count: int | None, txn_id: str | None,
                 isolation: int | None, zero: int | None, aborted: int | None) -> tuple:
    """A ``requests`` row, its columns in ``RecordDecoder._request_row``'s order (one tuple display: no
    concatenations); ``zero`` the six transaction counts (0, or None without a response), ``aborted`` the
    aborted transactions listed."""
    response = r.response
    if response is None:
        error_code = latency = err_name = None
        resp_bytes = 0
    else:
        error_code = top if top else (errors[0] if errors else 0)
        err_name = _ERROR_NAMES.get(error_code) or error_name(error_code)
        latency = (r.send_ns - r.receive_ns) / 1e6
        resp_bytes = len(response) + 4
    return (source, r.broker_id, r.connection_id, r.peer, r.server, r.principal, r.client_id,
            r.api_key, name, r.api_version, r.correlation_id, r.receive_ns, r.send_ns, latency,
            len(r.request) + 4, resp_bytes, req_body, resp_body, response is not None,
            throttle, error_code, err_name, len(errors),
            replica, acks, sess_id, epoch, kind, resp_sess, max_wait, min_bytes, max_bytes,
            n_req, n_resp, n_forgot, rec_bytes, rec_count, None, r.injected or None,
            txn_id, isolation, zero, zero, zero, zero, zero, zero, aborted, r.listener or None,
            None, None, None, None, None, None, None, None, None, None)


def _produce(r: CaptureRecord, source: str) -> tuple[tuple, list[tuple]]:
    version = r.api_version
    request = r.request
    buf = memoryview(request)
    end = len(buf)
    req_off = _body_offset(buf, r.api_key, version)
    # transactional_id (nullable), acks, timeout_ms, topic_data [name, partition_data [index, records]]
    n = _I16(buf, req_off)[0]
    pos = req_off + 2
    txn_id = None
    if n >= 0:
        if pos + n > end:
            raise _Fallback
        txn_id = str(buf[pos:pos + n], "utf-8")
        pos += n
    acks = _PRODUCE_HEAD(buf, pos)[0]
    pos += 6
    asked: list[tuple[str, int, tuple]] = []
    topics = _count(buf, pos, end)
    pos += 4
    for _ in range(topics):
        name, pos = _string(buf, pos, end)
        parts = _count(buf, pos, end)
        pos += 4
        for _ in range(parts):
            index, m = _PRODUCE_PART(buf, pos)
            pos += 8
            if m < 0:
                c = _NO_RECORDS
            else:
                if pos + m > end:
                    raise _Fallback
                c = _counts(buf, pos, m)
                pos += m
            asked.append((name, index, c))
    rec_bytes = rec_count = 0
    for _n, _i, c in asked:
        rec_bytes += c[0]
        rec_count += c[1]
    response = r.response
    src, bid, conn, cid, corr, recv, send = (source, r.broker_id, r.connection_id, r.client_id, r.correlation_id,
                                             r.receive_ns, r.send_ns)
    rows: list[tuple] = []
    throttle = n_resp = resp_body = None
    errors: list[int] = []
    answers: dict[tuple[str, int], tuple[int, int, int]] = {}
    if response is not None:
        resp_off = _RESPONSE_BODY
        rbuf = memoryview(response)
        rend = len(rbuf)
        resp_body = rend - resp_off
        # responses [name, partition_responses [index, error_code, base_offset, log_append_time_ms,
        # log_start_offset, (v8) record_errors [batch_index, message], error_message]], throttle_time_ms
        pos = resp_off
        topics = _count(rbuf, pos, rend)
        pos += 4
        n_resp = 0
        for _ in range(topics):
            name, pos = _string(rbuf, pos, rend)
            parts = _count(rbuf, pos, rend)
            pos += 4
            n_resp += parts
            for _ in range(parts):
                index, error, base, _append_time, log_start = _PRODUCE_ANSWER(rbuf, pos)
                pos += 30
                if version >= 8:
                    batch_errors = _count(rbuf, pos, rend)
                    pos += 4
                    for _ in range(batch_errors):
                        pos = _skip_nullable_string(rbuf, pos + 4, rend)
                    pos = _skip_nullable_string(rbuf, pos, rend)
                if error:
                    errors.append(error)
                answers[(name, index)] = (error, base, log_start)
        throttle = _I32(rbuf, pos)[0]
    for name, index, c in asked:
        a = answers.pop((name, index), None) if answers else None
        if a is None:
            rows.append((src, bid, conn, cid, _PRODUCE, "Produce", version, corr, recv, send,
                         None, None, None, None, name, None, index, True, False, False,
                         None, None, None, None, None, None, None, None, c[0], c[1], c[2], 0, 0, 0, 0, 0, 0,
                         None, None, None, None, None, None, None, None, None, None, None))
            continue
        error, base, log_start = a
        total = c[1]
        rows.append((src, bid, conn, cid, _PRODUCE, "Produce", version, corr, recv, send,
                     None, None, None, None, name, None, index, True, True, False,
                     None, None, base, base + total - 1 if base >= 0 and total else None, None, None, log_start,
                     error, c[0], total, c[2], 0, 0, 0, 0, 0, 0,
                     None, None, None, None, None, None, None, None, None, None, None))
    if answers:  # answered but not asked: the general path's rows
        raise _Fallback
    row = _request_row(r, source, "Produce", len(request) - req_off, resp_body, throttle, errors, 0, None, acks,
                       None, None, None, None, None, None, None, len(asked), n_resp, None, rec_bytes, rec_count,
                       txn_id, None, 0, None)
    return row, rows


def _fetch(r: CaptureRecord, source: str) -> tuple[tuple, list[tuple]]:
    version = r.api_version
    request = r.request
    buf = memoryview(request)
    end = len(buf)
    req_off = _body_offset(buf, r.api_key, version)
    # replica_id, max_wait_ms, min_bytes, max_bytes, isolation_level, session_id, session_epoch,
    # topics [topic, partitions [...]], forgotten_topics_data [topic, partitions [int32]], (v11) rack_id
    replica, max_wait, min_bytes, max_bytes, isolation, sess_id, epoch = _FETCH_HEAD(buf, req_off)
    if replica < -1:  # fetch_replica_id looks in the (absent) replica_state: the general path
        raise _Fallback
    pos = req_off + 25
    ask_part, ask_size = (_FETCH_ASK_9, 28) if version >= 9 else (_FETCH_ASK_7, 24)
    asked: dict[tuple[str, int], tuple[str, int, int]] = {}
    n_req = 0
    topics = _count(buf, pos, end)
    pos += 4
    for _ in range(topics):
        topic, pos = _string(buf, pos, end)
        parts = _count(buf, pos, end)
        pos += 4
        n_req += parts
        for _ in range(parts):
            p = ask_part(buf, pos)
            pos += ask_size
            asked[(topic, p[0])] = (topic, p[-3], p[-1])  # fetch_offset, partition_max_bytes
    forgotten: list[tuple[str, int]] = []
    topics = _count(buf, pos, end)
    pos += 4
    for _ in range(topics):
        topic, pos = _string(buf, pos, end)
        parts = _count(buf, pos, end)
        pos += 4
        for _ in range(parts):
            forgotten.append((topic, _I32(buf, pos)[0]))
            pos += 4
    if version >= 11:
        _rack, pos = _string(buf, pos, end)
    kind = fetch_kind(version, sess_id, epoch)
    response = r.response
    errors: list[int] = []
    throttle = top = resp_sess = n_resp = rec_bytes = rec_count = resp_body = aborted_total = zero = None
    answered: dict[tuple[str, int], tuple] = {}
    if response is not None:
        resp_off = _RESPONSE_BODY
        rbuf = memoryview(response)
        rend = len(rbuf)
        resp_body = rend - resp_off
        # throttle_time_ms, error_code, session_id, responses [topic, partitions [partition_index,
        # error_code, high_watermark, last_stable_offset, log_start_offset, aborted_transactions
        # (nullable) [producer_id, first_offset], (v11) preferred_read_replica, records (nullable)]]
        throttle, top, resp_sess = _FETCH_RESP_HEAD(rbuf, resp_off)
        if top:
            errors.append(top)
        pos = resp_off + 10
        topics = _count(rbuf, pos, rend)
        pos += 4
        n_resp = rec_bytes = rec_count = aborted_total = zero = 0
        for _ in range(topics):
            topic, pos = _string(rbuf, pos, rend)
            parts = _count(rbuf, pos, rend)
            pos += 4
            n_resp += parts
            for _ in range(parts):
                index, error, hw, lso, log_start = _FETCH_ANSWER(rbuf, pos)
                pos += 30
                aborted = _I32(rbuf, pos)[0]
                pos += 4
                if aborted < 0:
                    aborted = 0
                elif aborted > rend - pos:
                    raise _Fallback
                else:
                    pos += 16 * aborted
                if version >= 11:
                    pos += 4
                m = _I32(rbuf, pos)[0]
                pos += 4
                if m < 0:
                    c = _NO_RECORDS
                else:
                    if pos + m > rend:
                        raise _Fallback
                    c = _counts(rbuf, pos, m)
                    pos += m
                if error:
                    errors.append(error)
                rec_bytes += c[0]
                rec_count += c[1]
                aborted_total += aborted
                answered[(topic, index)] = (topic, hw, lso, log_start, error, aborted, c)
    src, bid, conn, cid, corr, recv, send = (source, r.broker_id, r.connection_id, r.client_id, r.correlation_id,
                                             r.receive_ns, r.send_ns)
    rows: list[tuple] = []
    keys = list(asked)
    if answered:
        keys += [k for k in answered if k not in asked]
    for k in keys:
        q = asked.get(k)
        a = answered.get(k)
        offset: int | None
        part_max: int | None
        if q is not None:
            topic, offset, part_max = q
        else:
            topic = a[0]  # type: ignore[index]
            offset = part_max = None
        if a is not None:
            _t, hw, lso, log_start, error, aborted, c = a
            any_batch = c[2]
            rows.append((src, bid, conn, cid, _FETCH, "Fetch", version, corr, recv, send,
                         replica, sess_id, epoch, kind, topic, None, k[1], q is not None, True, False,
                         offset, part_max, c[3] if any_batch else None, c[4] if any_batch else None, hw, lso,
                         log_start, error, c[0], c[1], c[2], 0, 0, 0, 0, 0, 0, aborted, isolation,
                         None, None, None, None, None, None, None, None, None))
        else:
            rows.append((src, bid, conn, cid, _FETCH, "Fetch", version, corr, recv, send,
                         replica, sess_id, epoch, kind, topic, None, k[1], True, False, False,
                         offset, part_max, None, None, None, None, None, None, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                         None, isolation, None, None, None, None, None, None, None, None, None))
    for topic, part in forgotten:
        rows.append((src, bid, conn, cid, _FETCH, "Fetch", version, corr, recv, send,
                     replica, sess_id, epoch, kind, topic, None, part, False, False, True,
                     None, None, None, None, None, None, None, None, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                     None, isolation, None, None, None, None, None, None, None, None, None))
    row = _request_row(r, source, "Fetch", len(request) - req_off, resp_body, throttle, errors, top or 0, replica,
                       None, sess_id, epoch, kind, resp_sess, max_wait, min_bytes, max_bytes, n_req, n_resp,
                       len(forgotten), rec_bytes, rec_count, None, isolation, zero, aborted_total)
    return row, rows
