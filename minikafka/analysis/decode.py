"""Captured request/response pairs decoded into flat rows: the tables the analyses run on.

Pure Python, no Spark: the ``minikafka`` data source calls these in the
executors, and they are usable on their own.  Three tables:

* ``requests``: one row per request/response pair (:data:`REQUEST_SCHEMA`):
  header fields, sizes on the wire, latency, throttle time, errors, and for
  Fetch the session id/epoch and kind (sessionless, full, incremental).
* ``partitions``: one row per topic-partition named in a Produce, Fetch,
  ShareFetch or ShareAcknowledge request or response (:data:`PARTITION_SCHEMA`): offsets, record bytes and
  counts (read from the 61-byte batch headers; records are never decoded),
  high watermark and last stable offset, errors, session fields, and forgotten
  partitions.
* ``topics``: topic id -> name, from Metadata and CreateTopics responses, to
  name partitions of Fetch v13+ and share requests, which carry only topic ids.

Sizes count the whole frame including its 4-byte size prefix, as the bytes on
the wire; ``*_body_bytes`` count the body after the header (the seed figures
12031/12043/33 are body sizes).

Transactions (KIP-98; the columns after ``injected`` in ``requests`` and after
``batch_count`` in ``partitions``): control batches (attributes bit 5: the
commit/abort markers a transaction coordinator writes) are counted apart from
data batches.  ``record_bytes``, ``record_count`` and ``batch_count`` are the
data batches (a truncated trailing batch counts in ``record_bytes``, as
before); ``control_bytes`` and ``control_batch_count`` the control batches
(``record_bytes + control_bytes`` is the size of the records fields);
``commit_markers``/``abort_markers`` their control records by type (only
control batches are decoded, see :func:`~minikafka.capture.transactions.batch_counts`);
``transactional_batch_count``/``transactional_record_count`` the data batches
with the transactional bit (4) and their records.  Fetch rows carry the
request's ``isolation_level`` (0 read_uncommitted, 1 read_committed; in
``requests`` ListOffsets rows too) and
``aborted_transactions``, the entries of a partition response's aborted
transactions list (0 when null; summed over partitions in ``requests``).
``requests`` also has ``transactional_id`` (the request's top-level field:
Produce, InitProducerId, EndTxn, AddOffsetsToTxn, TxnOffsetCommit...) and, for
WriteTxnMarkers, the markers it asks for per partition in ``commit_markers``/``abort_markers``.

Security: ``principal`` (in ``requests`` since the first version) is the
principal the broker handled the request as: ``User:<name>`` after SASL
authentication, the mapped client-certificate subject on an SSL listener with
client authentication, ``User:ANONYMOUS`` otherwise (on a SASL listener, for the
ApiVersions a client may send before authenticating too), "" in pcaps (the wire
does not tell).  ``listener`` (appended last) names the listener the request
came in on (``SASL_SSL``, ``INTERNAL``...); null in pcaps and in captures
written before the capture format recorded it.

Groups (KIP-848 consumer groups, KIP-932 share groups; appended after
``listener`` in ``requests`` and after ``isolation_level`` in ``partitions``):
``group_id`` is the group a request names (wherever its declaration tags a
``groupId``: its top-level ``group_id``, or the one group of a request naming
groups in a list, as OffsetFetch v8+, DescribeGroups, DeleteGroups,
ConsumerGroupDescribe, ShareGroupDescribe, DescribeShareGroupOffsets; null when
it names several); ``member_id`` the
request's member id, or for a join that leaves it to the coordinator
(JoinGroup, ConsumerGroupHeartbeat v0) the one the response gives;
``member_epoch`` the member epoch the request carries (ConsumerGroupHeartbeat,
ShareGroupHeartbeat, OffsetFetch v9+) or Kafka's ``generation_id_or_member_epoch``
/ ``generation_id`` (OffsetCommit, TxnOffsetCommit, SyncGroup, Heartbeat: a
generation for classic groups, a member epoch for consumer groups);
``response_member_epoch`` the epoch a heartbeat response gives (or JoinGroup's
generation); ``assigned_partitions`` the partitions of a heartbeat response's
assignment (null when the response leaves the assignment unchanged).

Share groups: ShareFetch (78) and ShareAcknowledge (79) fill the Fetch columns
they have in common -- ``fetch_session_epoch`` is the ShareSessionEpoch and
``fetch_kind`` "full" (0 opens a share session), "close" (-1) or "incremental"
(``fetch_session_id`` stays null: a share session is named by group and member),
``max_wait_ms``/``min_bytes``/``max_bytes``, partition counts, and record
bytes/records/batches of ShareFetch responses counted as for Fetch -- and
one ``partitions`` row per topic-partition of their requests and responses.
``acquired_records`` counts the offsets of a ShareFetch response's acquired
ranges (the records handed to this member, a subset of the batches returned),
``redelivered_records`` those of ranges with a delivery count above 1,
``max_delivery_count`` the highest delivery count; ``accepted_records``,
``released_records`` and ``rejected_records`` count the offsets a request
acknowledges as ACCEPT (1), RELEASE (2) or REJECT (3), in ShareFetch
piggy-backed acknowledgements and ShareAcknowledge alike (an acknowledgement
batch with one type covers ``first_offset..last_offset``, one with several
has a type per offset; gaps (0) and renewals (4) are not counted).
``acknowledge_error_code`` is a partition's acknowledgement error (ShareFetch's
``acknowledge_error_code``; a ShareAcknowledge partition's ``error_code``).
Acknowledgement errors count among a response's errors (``error_count``).

:meth:`RecordDecoder.iter_rows` is the data source's path (and
:meth:`RecordDecoder.iter_all_chunks` for the three tables at once): each record's
headers and bodies are parsed once, and only the records a table needs
(:data:`TABLE_API_KEYS`); the per-record methods (``parse``, ``request_row``,
``partition_rows``, ``topic_rows``) give the same rows.  Produce and Fetch
records, nearly all of real traffic, have their rows read straight off the
frames by :mod:`minikafka.analysis.fastrows` where it can (the same rows).
"""

from __future__ import annotations

import contextlib
import logging
import struct
import uuid
from collections.abc import Iterable, Iterator
from typing import Any

from ..capture.format import CaptureRecord
from ..capture.groups import acknowledged as _acknowledged
from ..capture.groups import acquired as _acquired
from ..capture.groups import share_kind
from ..capture.transactions import BatchCounts, batch_counts
from ..protocol.api import APIS, ApiKey
from ..protocol.entities import Entity, entity_fields, values
from ..protocol.exceptions import ProtocolError, UnsupportedVersion
from ..protocol.headers import request_body_offset, response_body_offset
from ..protocol.messages.fetch import fetch_replica_id
from .fastrows import api_name_of, error_name, fast_rows, fetch_kind

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
    ("injected", "string"),
    # Transactions (KIP-98), appended (see the module docstring).
    ("transactional_id", "string"), ("isolation_level", "int"),
    ("control_bytes", "bigint"), ("control_batch_count", "int"), ("commit_markers", "int"), ("abort_markers", "int"),
    ("transactional_batch_count", "int"), ("transactional_record_count", "bigint"), ("aborted_transactions", "int"),
    # Security (listeners), appended (see the module docstring).
    ("listener", "string"),
    # Groups (KIP-848, KIP-932), appended (see the module docstring).
    ("group_id", "string"), ("member_id", "string"), ("member_epoch", "int"), ("response_member_epoch", "int"),
    ("assigned_partitions", "int"), ("acquired_records", "bigint"), ("redelivered_records", "bigint"),
    ("accepted_records", "bigint"), ("released_records", "bigint"), ("rejected_records", "bigint"),
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
    # Transactions (KIP-98), appended (see the module docstring).
    ("control_bytes", "bigint"), ("control_batch_count", "int"), ("commit_markers", "int"), ("abort_markers", "int"),
    ("transactional_batch_count", "int"), ("transactional_record_count", "bigint"), ("aborted_transactions", "int"),
    ("isolation_level", "int"),
    # Share groups (KIP-932), appended (see the module docstring).
    ("group_id", "string"), ("member_id", "string"), ("acquired_records", "bigint"),
    ("redelivered_records", "bigint"), ("max_delivery_count", "int"), ("accepted_records", "bigint"),
    ("released_records", "bigint"), ("rejected_records", "bigint"), ("acknowledge_error_code", "int"),
]

TOPIC_COLUMNS: list[tuple[str, str]] = [("topic_id", "string"), ("topic", "string"), ("receive_ns", "bigint")]


def ddl(columns: list[tuple[str, str]]) -> str:
    """A Spark DDL schema string for a column list."""
    return ", ".join(f"{name} {typ}" for name, typ in columns)


#: The three tables in one (``all``: one pass over a capture decodes each record once for all of them): a
#: ``table`` column (:data:`ALL_KINDS`: 0 requests, 1 partitions, 2 topics), then each table's columns with a
#: prefix (:data:`ALL_PREFIXES`); a row fills its own table's columns, the others are null.
ALL_KINDS = {"requests": 0, "partitions": 1, "topics": 2}
ALL_PREFIXES = {"requests": "r_", "partitions": "p_", "topics": "t_"}
ALL_COLUMNS: list[tuple[str, str]] = [("table", "int")] + [
    (ALL_PREFIXES[t] + name, typ) for t, cols in (("requests", REQUEST_COLUMNS), ("partitions", PARTITION_COLUMNS),
                                                  ("topics", TOPIC_COLUMNS)) for name, typ in cols]

REQUEST_SCHEMA = ddl(REQUEST_COLUMNS)
PARTITION_SCHEMA = ddl(PARTITION_COLUMNS)
TOPIC_SCHEMA = ddl(TOPIC_COLUMNS)
ALL_SCHEMA = ddl(ALL_COLUMNS)
SCHEMAS = {"requests": REQUEST_SCHEMA, "partitions": PARTITION_SCHEMA, "topics": TOPIC_SCHEMA, "all": ALL_SCHEMA}
COLUMNS = {"requests": REQUEST_COLUMNS, "partitions": PARTITION_COLUMNS, "topics": TOPIC_COLUMNS,
           "all": ALL_COLUMNS}

_ZERO_UUID = "00000000-0000-0000-0000-000000000000"
_FETCH, _PRODUCE = int(ApiKey.FETCH), int(ApiKey.PRODUCE)
_WRITE_TXN_MARKERS = int(ApiKey.WRITE_TXN_MARKERS)
_METADATA, _CREATE_TOPICS = int(ApiKey.METADATA), int(ApiKey.CREATE_TOPICS)
_TOPIC_APIS = (_METADATA, _CREATE_TOPICS)
_JOIN_GROUP = int(ApiKey.JOIN_GROUP)
_CONSUMER_GROUP_HEARTBEAT = int(ApiKey.CONSUMER_GROUP_HEARTBEAT)
_SHARE_GROUP_HEARTBEAT = int(ApiKey.SHARE_GROUP_HEARTBEAT)
_SHARE_FETCH, _SHARE_ACKNOWLEDGE = int(ApiKey.SHARE_FETCH), int(ApiKey.SHARE_ACKNOWLEDGE)
_HEARTBEATS = (_CONSUMER_GROUP_HEARTBEAT, _SHARE_GROUP_HEARTBEAT)
#: The apis whose requests name a group (a field tagged ``groupId``): the requests table's group columns.
_GROUP_APIS = frozenset(k for k, api in APIS.items()
                        if any(ef.entity == Entity.GROUP_ID for ef in entity_fields(api.request)))
_PARTITION_APIS = (_PRODUCE, _FETCH, _METADATA, _CREATE_TOPICS, _SHARE_FETCH, _SHARE_ACKNOWLEDGE)
#: The api keys whose records a table reads (None: all); :meth:`RecordDecoder.iter_rows` skips the others,
#: so a reader may leave them out.
TABLE_API_KEYS: dict[str, frozenset[int] | None] = {
    "requests": None, "partitions": frozenset(_PARTITION_APIS), "topics": frozenset(_TOPIC_APIS), "all": None}

# Types of parsed values that hold no error code (skipped without a look inside).
_SCALAR_TYPES = frozenset({int, bool, str, bytes, memoryview, float, type(None), uuid.UUID})

_api_name = api_name_of


def batch_stats(records: Any) -> tuple[int, int, int, int, int]:
    """(bytes, records, batches, first base offset, last offset) of a records field, control batches
    included, from :func:`~minikafka.capture.transactions.batch_counts` (batch headers only)."""
    c = batch_counts(records)
    return c.size, c.records + c.control_records, c.all_batches, c.first_offset, c.last_offset


#: The fields holding error codes: ``error_code`` everywhere, ShareFetch's ``acknowledge_error_code``.
_ERROR_FIELDS = frozenset({"error_code", "acknowledge_error_code"})


def _errors(obj: Any, acc: list[int]) -> None:
    """Every non-zero error code (:data:`_ERROR_FIELDS`) in a parsed body, depth first."""
    if isinstance(obj, list):
        for item in obj:
            if type(item) not in _SCALAR_TYPES:
                _errors(item, acc)
        return
    if not isinstance(obj, dict) and not hasattr(obj, "items"):
        return
    for k, v in obj.items():
        if k in _ERROR_FIELDS:
            if v:
                acc.append(v)
        elif type(v) not in _SCALAR_TYPES and (isinstance(v, (list, dict)) or hasattr(v, "items")):
            _errors(v, acc)


def _walker_source(node: Any, ns: dict[str, Any]) -> str:
    """The name of a function (defined in ``ns``) doing what :func:`_errors` does on a Container parsed
    with the KStruct ``node``: its keys in the order the parser sets them (absent fields, fields, tagged
    fields), error codes read directly, arrays of structs walked by their own compiled function, fields
    that hold only scalars skipped, anything else (absent or tagged values) handed to :func:`_errors`."""
    from ..protocol import types as T

    name = ns["_names"].get(id(node))
    if name is not None:
        return name
    name = ns["_names"][id(node)] = f"_w{len(ns['_names'])}"
    ns["_nodes"].append(node)  # kept alive: the cache is keyed by id()
    lines = [f"def {name}(o, acc):"]

    def generic(field: str) -> None:
        lines.extend([f"    v = o[{field!r}]", "    if type(v) not in _SCALAR_TYPES:", "        _errors(v, acc)"])

    def error_code(field: str) -> None:
        lines.extend([f"    v = o[{field!r}]", "    if v:", "        acc.append(v)"])

    for field, default in node.absent:
        # An absent field reads back as its default, a fresh copy each time: skipped when the default
        # holds no error code (always so far: zeros, -1s, empty lists, structs of those).
        found: list[int] = []
        value = default() if callable(default) else default
        if field in _ERROR_FIELDS:
            if value:
                error_code(field)
            continue
        if type(value) not in _SCALAR_TYPES:
            _errors(value, found)
        if found:
            generic(field)
    for field, sub, _default in node.fields:
        if field in _ERROR_FIELDS:
            error_code(field)
        elif isinstance(sub, T.KStruct):
            lines.append(f"    {_walker_source(sub, ns)}(o[{field!r}], acc)")
        elif isinstance(sub, T.KArray):
            if isinstance(sub.subcon, T.KStruct):
                fn = _walker_source(sub.subcon, ns)
                lines.extend([f"    v = o[{field!r}]", "    if v is not None:", "        for i in v:",
                              f"            {fn}(i, acc)"])
            elif isinstance(sub.subcon, T.KArray):
                generic(field)
            # else: an array of scalars, nothing to find
        elif not isinstance(sub, (T.KString, T.KBytes, T.KUuid)) and type(sub).__name__ not in (
                "FormatField", "Flag", "UVarInt", "VarIntZigZag"):
            generic(field)
    if node.flexible:
        for field, _sub, _default in node.tagged.values():
            (error_code if field in _ERROR_FIELDS else generic)(field)
    # "_unknown_tags" (raw bytes by tag) holds no error code.
    lines.append("    return None")
    exec("\n".join(lines), ns)  # noqa: S102 - source generated from the schema above
    return name


_ERROR_WALKERS: dict[tuple[int, int], Any] = {}
_WALKER_NS: dict[str, Any] = {"_errors": _errors, "_SCALAR_TYPES": _SCALAR_TYPES, "_names": {}, "_nodes": []}


def response_errors(api_key: int, api_version: int, resp: Any) -> list[int]:
    """``_errors`` of a response body parsed for ``api_key``/``api_version``, with a function compiled
    once per version from its schema instead of a look at every value."""
    walk = _ERROR_WALKERS.get((api_key, api_version))
    if walk is None:
        try:
            node = APIS[api_key].response.construct(api_version)
            walk = _WALKER_NS[_walker_source(node, _WALKER_NS)]
        except (KeyError, UnsupportedVersion):  # no schema to compile from: the generic walk
            walk = _errors
        _ERROR_WALKERS[(api_key, api_version)] = walk
    acc: list[int] = []
    if walk is not _errors:
        try:
            walk(resp, acc)
            return acc
        except (KeyError, TypeError):  # not the shape the schema says: the generic walk decides
            acc = []
    _errors(resp, acc)
    return acc


#: The transaction columns of a partition row that come from its records, when it has none.
_NO_TXN = (0, 0, 0, 0, 0, 0)


def _txn(c: BatchCounts) -> tuple[int, int, int, int, int, int]:
    """(control bytes, control batches, commit markers, abort markers, transactional batches, their records)."""
    return (c.control_bytes, c.control_batches, c.commit_markers, c.abort_markers, c.transactional_batches,
            c.transactional_records)


def _records_total(topics: Any, parts_field: str, aborted: bool = False,
                   counts: Any = batch_counts) -> tuple[int, list[int]]:
    """(partitions, totals) over the ``records`` of every partition of ``topics``; totals are data bytes,
    data records, then the :func:`_txn` columns, then (``aborted``) the aborted transactions listed."""
    n = 0
    tot = [0] * 9
    for t in topics:
        parts = t[parts_field]
        n += len(parts)
        for p in parts:
            c = counts(p["records"])
            tot[0] += c.size - c.control_bytes
            tot[1] += c.records
            if c.control_batches or c.transactional_batches:
                tot[2] += c.control_bytes
                tot[3] += c.control_batches
                tot[4] += c.commit_markers
                tot[5] += c.abort_markers
                tot[6] += c.transactional_batches
                tot[7] += c.transactional_records
            if aborted:
                tot[8] += len(p.get("aborted_transactions") or ())
    return n, tot


def _markers_requested(req: Any) -> tuple[int, int]:
    """(commit, abort) markers a WriteTxnMarkers request asks for: one per partition of each marker."""
    commits = aborts = 0
    for m in req["markers"]:
        n = sum(len(t["partition_indexes"] or ()) for t in m["topics"])
        if m["transaction_result"]:
            commits += n
        else:
            aborts += n
    return commits, aborts


#: The group columns of a request that names no group.
_NO_GROUP = (None, None, None, None, None)
#: The share columns of a ``requests`` row that is no ShareFetch/ShareAcknowledge.
_NO_SHARE_COUNTS = (None, None, None, None, None)
#: The share columns of a ``partitions`` row that is no ShareFetch/ShareAcknowledge row.
_NO_SHARE = (None,) * 9


def _str_or_none(v: Any) -> str | None:
    return v if type(v) is str and v else None


def _int_or_none(v: Any) -> int | None:
    return v if type(v) is int else None


def _group_columns(key: int, version: int, req: Any, resp: Any) -> tuple:
    """(group id, member id, member epoch, response member epoch, assigned partitions) of a group request: the
    group is the one its ``groupId`` fields name (None when they name several)."""
    member = req.get("member_id")
    epoch = req.get("member_epoch")
    if epoch is None:
        epoch = req.get("generation_id_or_member_epoch")
        if epoch is None:
            epoch = req.get("generation_id")
    gid = None
    named = [(ef, v) for ef, v in values(req, APIS[key].request, version, Entity.GROUP_ID) if v]
    if named and all(v == named[0][1] for _ef, v in named):
        ef, gid = named[0]
        if len(ef.path) == 2 and not ef.many:  # OffsetFetch v8+, DescribeShareGroupOffsets: a struct per group
            g = req[ef.path[0]][0]
            member = member or g.get("member_id")
            epoch = g.get("member_epoch") if epoch is None else epoch
    resp_epoch = assigned = None
    if resp is not None:
        if not member:
            member = resp.get("member_id")  # JoinGroup, ConsumerGroupHeartbeat v0: the coordinator names it
        if key in _HEARTBEATS:
            resp_epoch = resp.get("member_epoch")
            assignment = resp.get("assignment")
            if assignment is not None:
                assigned = 0
                for tp in assignment.get("topic_partitions") or ():
                    assigned += len(tp["partitions"] or ())
        elif key == _JOIN_GROUP:
            resp_epoch = resp.get("generation_id")
    return (_str_or_none(gid), _str_or_none(member), _int_or_none(epoch), _int_or_none(resp_epoch), assigned)


def _uuid(u: Any) -> str | None:
    if u is None:
        return None
    s = str(u)
    return None if s == _ZERO_UUID else s


class RecordDecoder:
    """Turns :class:`CaptureRecord`s into rows; keeps the topic-id -> name map it has seen.

    ``errors`` counts the records whose bodies did not parse, among those a table needed parsed
    (every record for ``requests``; Produce, Fetch, ShareFetch, ShareAcknowledge, Metadata and CreateTopics
    for ``partitions``; Metadata and CreateTopics for ``topics``).
    """

    def __init__(self, source: str = "", fast: bool = True) -> None:
        self.source = source
        #: Produce and Fetch rows read straight off the frames where :mod:`~minikafka.analysis.fastrows` can
        #: (the same rows; False: every record through the Containers, as the tests compare).
        self.fast = fast
        self.topic_names: dict[str, str] = {}
        self.errors = 0
        #: batch_counts, or (in :meth:`iter_all`) the same remembering its answers for the record at hand:
        #: its requests row and its partitions rows count the same records fields.
        self._counts: Any = batch_counts

    # -- parsing ------------------------------------------------------------------------
    def _decode(self, r: CaptureRecord) -> tuple[Any, Any, str | None, int | None, int | None]:
        """(request body, response body, error, request body size, response body size) of a record.

        The bodies and error as :meth:`parse` gives them, the sizes as :meth:`request_row` computes
        them (None where the header does not parse), with each header read once.
        """
        request = r.request
        response = r.response
        key = r.api_key
        version = r.api_version
        hdr_exc = resp_exc = None
        req_off = resp_off = None
        try:
            req_off = request_body_offset(request)
        except ProtocolError as exc:  # a malformed capture frame becomes a row with decode_error
            hdr_exc = exc
        if response is not None:
            try:
                resp_off = response_body_offset(response, key, version)
            except ProtocolError as exc:
                resp_exc = exc
        req_body = None if req_off is None else len(request) - req_off
        resp_body = None if resp_off is None or response is None else len(response) - resp_off
        api = APIS.get(key)
        if api is None:
            return None, None, f"unknown api key {key}", req_body, resp_body
        req = resp = None
        try:
            if hdr_exc is not None:
                raise hdr_exc
            req = api.request.parse(memoryview(request)[req_off:], version)
            if response is not None:
                if resp_exc is not None:
                    raise resp_exc
                resp = api.response.parse(memoryview(response)[resp_off:], version)
        except ProtocolError as exc:  # recorded in the row, never fatal
            self.errors += 1
            return req, resp, f"{type(exc).__name__}: {exc}"[:200], req_body, resp_body
        return req, resp, None, req_body, resp_body

    def parse(self, r: CaptureRecord) -> tuple[Any, Any, str | None]:
        """(request body, response body, error) of a record; bodies are None where they do not parse."""
        req, resp, err, _q, _a = self._decode(r)
        return req, resp, err

    # -- requests table ---------------------------------------------------------------
    def request_row(self, r: CaptureRecord, req: Any = None, resp: Any = None, err: str | None = None) -> tuple:
        """The ``requests`` row of a record (``req``/``resp`` the parsed bodies, if parsed already)."""
        try:
            req_body = len(r.request) - request_body_offset(r.request)
        except ProtocolError:  # a malformed capture frame becomes a row with decode_error
            req_body = None
        resp_body = None
        if r.response is not None:
            try:
                resp_body = len(r.response) - response_body_offset(r.response, r.api_key, r.api_version)
            except ProtocolError:
                resp_body = None
        return self._request_row(r, req, resp, err, req_body, resp_body)

    def _request_row(self, r: CaptureRecord, req: Any, resp: Any, err: str | None,
                     req_body: int | None, resp_body: int | None) -> tuple:
        response = r.response
        key = r.api_key
        throttle = error_code = replica = acks = None
        sess_id = sess_epoch = kind = resp_sess = max_wait = min_bytes = max_bytes = None
        n_req = n_resp = n_forgot = None
        rec_bytes = rec_count = None
        txn_id = isolation = None
        txn: tuple = (None,) * 7
        errs: list[int] = []
        if resp is not None:
            throttle = resp.get("throttle_time_ms")
            top = resp.get("error_code")
            errs = response_errors(key, r.api_version, resp)
            error_code = top if top else (errs[0] if errs else 0)
        if req is not None:
            tid = req.get("transactional_id")
            if type(tid) is str:
                txn_id = tid
            level = req.get("isolation_level")  # Fetch, ListOffsets
            if type(level) is int:
                isolation = level
        if req is not None and key == _FETCH:
            replica = fetch_replica_id(req)  # v15+: in replica_state (KIP-903)
            max_wait, min_bytes, max_bytes = req["max_wait_ms"], req["min_bytes"], req["max_bytes"]
            sess_id = req.get("session_id", 0)
            sess_epoch = req.get("session_epoch", -1)
            kind = fetch_kind(r.api_version, sess_id, sess_epoch)
            n_req = 0
            for t in req["topics"]:
                n_req += len(t["partitions"])
            n_forgot = 0
            for t in req.get("forgotten_topics_data") or ():
                n_forgot += len(t["partitions"])
            if resp is not None:
                resp_sess = resp.get("session_id", 0)
                n_resp, tot = _records_total(resp["responses"], "partitions", aborted=True,
                                              counts=self._counts)
                rec_bytes, rec_count = tot[0], tot[1]
                txn = tuple(tot[2:9])
        elif req is not None and key == _PRODUCE:
            acks = req["acks"]
            n_req, tot = _records_total(req["topic_data"], "partition_data", counts=self._counts)
            rec_bytes, rec_count = tot[0], tot[1]
            txn = (*tot[2:8], None)
            if resp is not None:
                n_resp = 0
                for t in resp["responses"]:
                    n_resp += len(t["partition_responses"])
        elif req is not None and key == _WRITE_TXN_MARKERS:
            try:
                commits, aborts = _markers_requested(req)
                txn = (None, None, commits, aborts, None, None, None)
            except (KeyError, TypeError):  # not the shape minikafka's declaration has
                pass
        group: tuple = _NO_GROUP
        share: tuple = _NO_SHARE_COUNTS
        if req is not None and key in _GROUP_APIS:
            try:
                group = _group_columns(key, r.api_version, req, resp)
            except (KeyError, TypeError, AttributeError):  # not the shape minikafka's declaration has
                pass
            if key == _SHARE_FETCH or key == _SHARE_ACKNOWLEDGE:
                sess_epoch = req.get("share_session_epoch")
                if type(sess_epoch) is int:
                    kind = share_kind(sess_epoch)
                acc = [0, 0, 0]
                n_req = 0
                for t in req["topics"]:
                    n_req += len(t["partitions"])
                    for p in t["partitions"]:
                        _acknowledged(p["acknowledgement_batches"], acc)
                acquired = redelivered = None
                if key == _SHARE_FETCH:
                    max_wait, min_bytes, max_bytes = req["max_wait_ms"], req["min_bytes"], req["max_bytes"]
                    n_forgot = 0
                    for t in req.get("forgotten_topics_data") or ():
                        n_forgot += len(t["partitions"])
                    if resp is not None:
                        n_resp, tot = _records_total(resp["responses"], "partitions", counts=self._counts)
                        rec_bytes, rec_count = tot[0], tot[1]
                        txn = (*tot[2:8], None)
                        acquired = redelivered = 0
                        for t in resp["responses"]:
                            for p in t["partitions"]:
                                a, again, _top = _acquired(p["acquired_records"])
                                acquired += a
                                redelivered += again
                elif resp is not None:
                    n_resp = 0
                    for t in resp["responses"]:
                        n_resp += len(t["partitions"])
                share = (acquired, redelivered, acc[0], acc[1], acc[2])
        return (self.source, r.broker_id, r.connection_id, r.peer, r.server, r.principal, r.client_id,
                key, _api_name(key), r.api_version, r.correlation_id,
                r.receive_ns, r.send_ns, (r.send_ns - r.receive_ns) / 1e6 if response is not None else None,
                len(r.request) + 4, 0 if response is None else len(response) + 4, req_body, resp_body,
                response is not None,
                throttle, error_code, error_name(error_code), len(errs),
                replica, acks, sess_id, sess_epoch, kind, resp_sess, max_wait, min_bytes, max_bytes,
                n_req, n_resp, n_forgot, rec_bytes, rec_count, err, r.injected or None,
                txn_id, isolation, *txn, r.listener or None, *group, *share)

    # -- partitions table -------------------------------------------------------------
    def partition_rows(self, r: CaptureRecord, req: Any, resp: Any) -> Iterator[tuple]:
        """The ``partitions`` rows of a Produce, Fetch, ShareFetch or ShareAcknowledge record (nothing for
        other APIs)."""
        return iter(self._partition_rows(r, req, resp))

    def _partition_rows(self, r: CaptureRecord, req: Any, resp: Any) -> list[tuple]:
        key = r.api_key
        if req is None:
            return []
        if key != _FETCH and key != _PRODUCE:
            if key == _SHARE_FETCH or key == _SHARE_ACKNOWLEDGE:
                head = (self.source, r.broker_id, r.connection_id, r.client_id, key, _api_name(key),
                        r.api_version, r.correlation_id, r.receive_ns, r.send_ns)
                return self._share_rows(head, key, req, resp)
            return []
        head = (self.source, r.broker_id, r.connection_id, r.client_id, key, _api_name(key),
                r.api_version, r.correlation_id, r.receive_ns, r.send_ns)
        if key == _PRODUCE:
            return self._produce_rows(head, req, resp)
        return self._fetch_rows(head, r.api_version, req, resp)

    def _produce_topic(self, t: Any) -> tuple[str | None, str | None]:
        """A Produce topic entry's (name, topic id): v13 names topics by id (the name looked up in the topics
        seen), earlier versions by name."""
        tid = _uuid(t.get("topic_id"))
        if tid:
            return t["name"] or self.topic_names.get(tid), tid
        return t["name"], None

    def _produce_rows(self, head: tuple, req: Any, resp: Any) -> list[tuple]:
        out = []
        answers: dict[tuple[str | None, int], Any] = {}
        if resp is not None:
            for t in resp["responses"]:
                name, tid = self._produce_topic(t)
                for p in t["partition_responses"]:
                    answers[(tid or name, p["index"])] = p
        for t in req["topic_data"]:
            name, tid = self._produce_topic(t)
            for p in t["partition_data"]:
                bc = self._counts(p["records"])
                b, c, n = bc.size - bc.control_bytes, bc.records, bc.batches
                tail = _txn(bc) + (None, None)
                index = p["index"]
                a = answers.pop((tid or name, index), None) if answers else None
                if a is not None:
                    base = a["base_offset"]
                    total = c + bc.control_records
                    last_off = base + total - 1 if base is not None and base >= 0 and total else None
                    out.append(head + (None, None, None, None, name, tid, index, True, True, False,
                                       None, None, base, last_off, None, None,
                                       a.get("log_start_offset"), a["error_code"], b, c, n) + tail + _NO_SHARE)
                else:
                    out.append(head + (None, None, None, None, name, tid, index, True, False, False,
                                       None, None, None, None, None, None, None, None, b, c, n) + tail
                               + _NO_SHARE)
        for (topic, index), a in answers.items():  # answered but not asked: should not happen
            name = self.topic_names.get(topic, topic) if topic else topic
            tid = topic if topic in self.topic_names else None
            out.append(head + (None, None, None, None, name, tid, index, False, True, False, None, None,
                               a["base_offset"], None, None, None, a.get("log_start_offset"), a["error_code"],
                               0, 0, 0) + _NO_TXN + (None, None) + _NO_SHARE)
        return out

    def _topic(self, t: Any, version: int) -> tuple[str | None, str | None]:
        if version >= 13:
            tid = _uuid(t["topic_id"])
            return self.topic_names.get(tid) if tid else None, tid
        return t["topic"], None

    def _fetch_rows(self, head: tuple, version: int, req: Any, resp: Any) -> list[tuple]:
        out = []
        sess_id = req.get("session_id", 0)
        epoch = req.get("session_epoch", -1)
        sess = (fetch_replica_id(req), sess_id, epoch, fetch_kind(version, sess_id, epoch))
        isolation = req.get("isolation_level", 0)
        asked: dict[tuple, Any] = {}
        for t in req["topics"]:
            topic, tid = self._topic(t, version)
            for p in t["partitions"]:
                asked[(tid or topic, p["partition"])] = (topic, tid, p)
        answered: dict[tuple, Any] = {}
        if resp is not None:
            for t in resp["responses"]:
                topic, tid = self._topic(t, version)
                for p in t["partitions"]:
                    answered[(tid or topic, p["partition_index"])] = (topic, tid, p)
        keys = list(asked)
        if answered:
            keys += [k for k in answered if k not in asked]
        for key in keys:
            q = asked.get(key)
            a = answered.get(key)
            topic, tid, _ = q or answered[key]  # every key was asked or answered
            answer: tuple
            if a is not None:
                ap = a[2]
                bc = self._counts(ap["records"])
                any_batch = bc.batches or bc.control_batches
                answer = (bc.first_offset if any_batch else None, bc.last_offset if any_batch else None,
                          ap["high_watermark"], ap["last_stable_offset"], ap["log_start_offset"], ap["error_code"],
                          bc.size - bc.control_bytes, bc.records, bc.batches) + _txn(bc) + (
                              len(ap.get("aborted_transactions") or ()), isolation)
            else:
                answer = (None, None, None, None, None, None, 0, 0, 0) + _NO_TXN + (None, isolation)
            if q is not None:
                qp = q[2]
                ask = (qp["fetch_offset"], qp["partition_max_bytes"])
            else:
                ask = (None, None)
            out.append(head + sess + (topic, tid, key[1], q is not None, a is not None, False) + ask + answer
                       + _NO_SHARE)
        for t in req.get("forgotten_topics_data") or ():
            topic, tid = self._topic(t, version)
            for part in t["partitions"]:
                out.append(head + sess + (topic, tid, part, False, False, True) + (None,) * 8 + (0, 0, 0)
                           + _NO_TXN + (None, isolation) + _NO_SHARE)
        return out

    def _share_topic(self, t: Any) -> tuple[str | None, str | None]:
        tid = _uuid(t["topic_id"])
        return self.topic_names.get(tid) if tid else None, tid

    def _share_rows(self, head: tuple, key: int, req: Any, resp: Any) -> list[tuple]:
        """ShareFetch/ShareAcknowledge rows: one per topic-partition asked, answered or forgotten."""
        epoch = req.get("share_session_epoch")
        sess = (None, None, epoch, share_kind(epoch) if type(epoch) is int else None)
        group = (_str_or_none(req.get("group_id")), _str_or_none(req.get("member_id")))
        fetch = key == _SHARE_FETCH
        asked: dict[tuple, Any] = {}
        for t in req["topics"]:
            topic, tid = self._share_topic(t)
            for p in t["partitions"]:
                asked[(tid, p["partition_index"])] = (topic, tid, p)
        answered: dict[tuple, Any] = {}
        if resp is not None:
            for t in resp["responses"]:
                topic, tid = self._share_topic(t)
                for p in t["partitions"]:
                    answered[(tid, p["partition_index"])] = (topic, tid, p)
        keys = list(asked)
        if answered:
            keys += [k for k in answered if k not in asked]
        out = []
        for k in keys:
            q = asked.get(k)
            a = answered.get(k)
            topic, tid, _ = q or answered[k]
            acc = [0, 0, 0]
            max_bytes = None
            if q is not None:
                _acknowledged(q[2]["acknowledgement_batches"], acc)
                max_bytes = q[2].get("partition_max_bytes")  # ShareFetch v0 only
            acquired: tuple = (None, None, None)
            if a is not None:
                ap = a[2]
                if fetch:
                    bc = self._counts(ap["records"])
                    any_batch = bc.batches or bc.control_batches
                    answer = (bc.first_offset if any_batch else None, bc.last_offset if any_batch else None,
                              None, None, None, ap["error_code"], bc.size - bc.control_bytes, bc.records,
                              bc.batches) + _txn(bc) + (None, None)
                    acquired = _acquired(ap["acquired_records"])
                    ack_error = ap["acknowledge_error_code"]
                else:
                    answer = (None, None, None, None, None, ap["error_code"], 0, 0, 0) + _NO_TXN + (None, None)
                    ack_error = ap["error_code"]
            else:
                answer = (None, None, None, None, None, None, 0, 0, 0) + _NO_TXN + (None, None)
                ack_error = None
            out.append(head + sess + (topic, tid, k[1], q is not None, a is not None, False, None, max_bytes)
                       + answer + group + acquired + (acc[0], acc[1], acc[2], ack_error))
        for t in req.get("forgotten_topics_data") or ():
            topic, tid = self._share_topic(t)
            for part in t["partitions"]:
                out.append(head + sess + (topic, tid, part, False, False, True) + (None,) * 8 + (0, 0, 0)
                           + _NO_TXN + (None, None) + group + (None,) * 7)
        return out

    # -- topics table -----------------------------------------------------------------
    def topic_rows(self, r: CaptureRecord, resp: Any) -> Iterator[tuple]:
        """(topic id, name) pairs from Metadata and CreateTopics responses (also remembered)."""
        return iter(self._topic_rows(r, resp))

    def _topic_rows(self, r: CaptureRecord, resp: Any) -> list[tuple]:
        if resp is None or r.api_key not in _TOPIC_APIS:
            return []
        out = []
        for t in resp["topics"]:
            tid = _uuid(t.get("topic_id"))
            name = t.get("name")
            if tid and name:
                self.topic_names[tid] = name
                out.append((tid, name, r.receive_ns))
        return out

    # -- all tables ---------------------------------------------------------------------
    def rows(self, r: CaptureRecord, table: str) -> Iterator[tuple]:
        """The rows of ``table`` ("requests", "partitions" or "topics") for one record."""
        return self.iter_rows((r,), table)

    def iter_rows(self, records: Iterable[CaptureRecord], table: str) -> Iterator[tuple]:
        """The rows of ``table`` for every record of ``records``, in order.

        Only the records a table needs are parsed: all of them for ``requests``; Produce, Fetch,
        ShareFetch and ShareAcknowledge (their rows) and Metadata and CreateTopics (the topic ids
        Fetch v13+ and the share requests name) for ``partitions``; Metadata and CreateTopics for
        ``topics``.  The others give no rows there.
        """
        decode, fast = self._decode, self._fast
        if table == "requests":
            request_row = self._request_row
            for r in records:
                rows = fast(r)
                if rows is not None:
                    yield rows[0]
                    continue
                req, resp, err, req_body, resp_body = decode(r)
                if resp is not None and r.api_key in _TOPIC_APIS:
                    self._topic_rows(r, resp)
                yield request_row(r, req, resp, err, req_body, resp_body)
        elif table == "partitions":
            partition_rows = self._partition_rows
            for r in records:
                key = r.api_key
                if key not in _PARTITION_APIS:
                    continue
                rows = fast(r)
                if rows is not None:
                    yield from rows[1]
                    continue
                req, resp, _err, _q, _a = decode(r)
                if key in _TOPIC_APIS:
                    if resp is not None:
                        self._topic_rows(r, resp)
                    continue
                yield from partition_rows(r, req, resp)
        elif table == "topics":
            for r in records:
                if r.api_key not in _TOPIC_APIS or r.response is None:
                    continue
                _req, resp, _err, _q, _a = decode(r)
                yield from self._topic_rows(r, resp)
        elif table == "all":
            width = {t: len(COLUMNS[t]) for t in ALL_KINDS}
            before = {t: sum(width[u] for u in list(ALL_KINDS)[:i]) for i, t in enumerate(ALL_KINDS)}
            pad = {t: ((None,) * before[t], (None,) * (len(ALL_COLUMNS) - 1 - before[t] - width[t]))
                   for t in ALL_KINDS}
            for kind, row in self.iter_all(records):
                head, tail = pad[kind]
                yield (ALL_KINDS[kind], *head, *row, *tail)
        else:
            raise ValueError(f"unknown table {table!r} (requests, partitions, topics, all)")

    def iter_all(self, records: Iterable[CaptureRecord]) -> Iterator[tuple[str, tuple]]:
        """(table, row) for the rows of all three tables, every record decoded once: a record's topic rows
        (Metadata, CreateTopics), then its ``requests`` row, then its ``partitions`` rows -- the rows the
        three :meth:`iter_rows` passes give, each table's in the same order."""
        fast = self._fast
        with self._counts_per_record() as memo:
            for r in records:
                rows = fast(r)
                if rows is not None:
                    yield "requests", rows[0]
                    for row in rows[1]:
                        yield "partitions", row
                    continue
                yield from self._decoded_rows(r, memo)

    def iter_all_chunks(self, records: Iterable[CaptureRecord], size: int) -> Iterator[tuple[str, list[tuple]]]:
        """:meth:`iter_all`'s rows as (table, rows) chunks: each table's rows in order, in lists of about
        ``size`` rows (a list is handed over once a record has made it ``size`` rows or more; each table's
        last list shorter).  The data source's path: Produce and Fetch records (:mod:`.fastrows`) go
        straight into the lists, with no (table, row) pair per row."""
        pending: dict[str, list[tuple]] = {t: [] for t in ALL_KINDS}
        req, part = pending["requests"], pending["partitions"]
        fast = self._fast
        with self._counts_per_record() as memo:
            for r in records:
                rows = fast(r)
                if rows is not None:
                    req.append(rows[0])
                    if rows[1]:
                        part.extend(rows[1])
                    if len(req) < size and len(part) < size:
                        continue
                else:
                    for table, row in self._decoded_rows(r, memo):
                        pending[table].append(row)
                for table, got in pending.items():
                    if len(got) >= size:
                        yield table, got
                        pending[table] = []
                req, part = pending["requests"], pending["partitions"]
        for table, got in pending.items():
            if got:
                yield table, got

    def _fast(self, r: CaptureRecord) -> tuple[tuple, list[tuple]] | None:
        """:func:`.fastrows.fast_rows` of a Produce or Fetch record (its ``requests`` row, its ``partitions``
        rows) when the fast path is on; None for any other record, or one the general decoder must make."""
        key = r.api_key
        if self.fast and (key == _PRODUCE or key == _FETCH):
            return fast_rows(r, self.source)
        return None

    @contextlib.contextmanager
    def _counts_per_record(self) -> Iterator[dict]:
        """While rows are made: a records field's batch counts computed once for its record's ``requests``
        and ``partitions`` rows (the memo, emptied for each record by :meth:`_decoded_rows`)."""
        memo: dict[int, tuple[Any, BatchCounts]] = {}

        def counts(records: Any) -> BatchCounts:
            hit = memo.get(id(records))
            if hit is not None and hit[0] is records:
                return hit[1]
            c = batch_counts(records)
            if records is not None:
                memo[id(records)] = (records, c)  # the object kept: its id is not reused meanwhile
            return c

        self._counts = counts
        try:
            yield memo
        finally:
            self._counts = batch_counts

    def _decoded_rows(self, r: CaptureRecord, memo: dict) -> Iterator[tuple[str, tuple]]:
        """A record's (table, row) pairs by the general decoder (any api; the fast path's fallback)."""
        memo.clear()
        req, resp, err, req_body, resp_body = self._decode(r)
        key = r.api_key
        if key in _TOPIC_APIS:
            if resp is not None:
                for row in self._topic_rows(r, resp):
                    yield "topics", row
            yield "requests", self._request_row(r, req, resp, err, req_body, resp_body)
            return
        yield "requests", self._request_row(r, req, resp, err, req_body, resp_body)
        if key in _PARTITION_APIS:
            for row in self._partition_rows(r, req, resp):
                yield "partitions", row
