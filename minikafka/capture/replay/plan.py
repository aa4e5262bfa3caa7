"""The replay plan: one pass over a capture that yields per-connection streams and the dependencies between them.

A captured connection is replayed as one stream, in its own order.  Between streams, the capture's happens-before
order is kept where it decides an answer (:func:`build_plan`): every request is classified by the *resources* it
reads or writes, and depends on the conflicting requests of other connections that came before it:

======================  ===========================================================  ===================
resource                written by                                                   read by
======================  ===========================================================  ===================
``("topic", t)``        CreateTopics, DeleteTopics, CreatePartitions, topic config    every request naming
                        changes, a Metadata that auto-creates ``t``                   the topic
``("topics",)``         topic creation and deletion                                  Metadata of all topics,
                                                                                     group heartbeats
``("data", t, p)``      Produce, DeleteRecords, EndTxn (its markers)                  Fetch, ListOffsets,
                                                                                     OffsetForLeaderEpoch,
                                                                                     DescribeProducers, ShareFetch
``("group", g)``        joins, syncs, heartbeats, leaves, commits, deletes            OffsetFetch, describes
``("groups",)``         group creation and deletion                                   ListGroups
``("txn", id)``         InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn   transactional Produce,
                                                                                     TxnOffsetCommit
``("share", g)``        ShareFetch, ShareAcknowledge, share-offset changes            DescribeShareGroupOffsets
``("config", type, n)`` AlterConfigs, IncrementalAlterConfigs (brokers...)           DescribeConfigs
``("acls",)``           CreateAcls, DeleteAcls                                       every request (if any)
``("quotas",)``         AlterClientQuotas                                            every request (if any)
``("scram",)``          AlterUserScramCredentials                                    DescribeUserScram...
======================  ===========================================================  ===================

Two orders, as Kafka's own semantics need them.  *Log-like* resources (topics, data, configs, ACLs, quotas) are
changed the moment a write is handled, so a request waits for every write of another connection *received*
before it (a Fetch sees the Produce that reached the broker first; two producers' batches keep their offsets), and
a write waits for the reads *answered* before it was received (a Fetch that found the log end stays empty).
*Coordinator* resources (groups, transactions, share groups) keep their order of arrival: a request waits for the
answer of every conflicting request answered before it was received, and for the others received before it to
have been *sent* (then leaves the target the captured gap between the two, at most :data:`MAX_SENT_GAP_US`, to
read them in that order): a JoinGroup still waiting for the other members when the next member joined must not be
waited for, or the rebalance would change.  Where the capture's answers tell more than its timestamps, they
decide: at max speed a Fetch long poll is sent once the writes its captured answer saw are done (a Produce saw
when its base offset is below the Fetch's high watermark; an incremental fetch reads its whole KIP-227 session,
the partitions its answer left out at their last high watermark) and is answered at once (MaxWaitMs 0), while a
Produce it did not see waits for it; a JoinGroup answered with a newer generation than one still pending when it
was received waits for that one's answer (the broker completed that rebalance first).  Values the broker makes
up (producer ids, member ids, fetch sessions, topic ids: :mod:`.rewrite`) add a dependency on the request whose
answer introduced them.  Within a connection, a request waits for its own earlier requests answered before it was
received (the client waited for them), and is otherwise pipelined.

Every dependency is expressed as "connection *c* has settled its first *n* requests": requests on one connection
are answered in order, so such prefixes are all a waiter needs (:class:`~.causality.Progress`), and a Spark task
learns another task's progress from one counter per connection (two: settled and sent).  The graph is checked to
be acyclic (Kahn's algorithm over "sent after"); the "a Produce waits for a long poll that did not see it" edges
are dropped with a warning if they would close a cycle (high watermarks lagging appends on a cluster).

The plan holds no frames (Spark tasks get it as a broadcast variable and read their connections' frames
themselves), only per request: its connection and position, its dependencies, the mapped values it introduces,
whether it needs rewriting, and whether its long-poll wait can be dropped at max speed.
"""

from __future__ import annotations

import bisect
import logging
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from ...protocol.api import APIS, ApiKey
from ...protocol.entities import Entity, TopicEntry, entity_fields, structs, topic_entries, topic_layouts, values
from ...protocol.errors import ErrorCode
from ...protocol.exceptions import ProtocolError
from ...protocol.schema import Message
from ...protocol.types import ZERO_UUID
from ..format import CaptureRecord
from ..frames import api_name, parse_request_frame, parse_response_frame
from .options import ConnKey
from .rewrite import _REQUEST_KINDS, _batch_producers, _Ctx, _mapped_fields

log = logging.getLogger(__name__)

#: Requests never re-sent as captured: their tokens are single-use (a replayed connection authenticates afresh).
SASL_API_KEYS = frozenset({int(ApiKey.SASL_HANDSHAKE), int(ApiKey.SASL_AUTHENTICATE)})
#: ConsumerGroupHeartbeat and ShareGroupHeartbeat: members with member epochs (KIP-848, KIP-932).
HEARTBEAT_KEYS = frozenset({ApiKey.CONSUMER_GROUP_HEARTBEAT, ApiKey.SHARE_GROUP_HEARTBEAT})

#: A request that waits for another connection's request to be sent leaves the target the time the capture shows
#: between the two (both were received before either was answered: their order is the broker's reading order),
#: at most this long.
MAX_SENT_GAP_US = 2000

_LOG_LIKE = frozenset({"topic", "topics", "data", "config", "acls", "quotas", "scram"})

# Which APIs read or write which resources (see the module docstring).  Where a request names its topics,
# partitions, groups and transactional ids is read from its declaration (:mod:`minikafka.protocol.entities`).
K = ApiKey
_DATA_WRITE = frozenset({K.PRODUCE, K.DELETE_RECORDS})
_DATA_READ = frozenset({K.FETCH, K.LIST_OFFSETS, K.OFFSET_FOR_LEADER_EPOCH, K.DESCRIBE_PRODUCERS, K.SHARE_FETCH})
_TOPIC_LIST_WRITE = frozenset({K.CREATE_TOPICS, K.DELETE_TOPICS})
_TOPIC_WRITE = _TOPIC_LIST_WRITE | {K.CREATE_PARTITIONS, K.ELECT_LEADERS, K.ALTER_PARTITION_REASSIGNMENTS}
_GROUP_LIST_WRITE = frozenset({K.OFFSET_COMMIT, K.JOIN_GROUP, K.TXN_OFFSET_COMMIT, K.DELETE_GROUPS,
                               K.CONSUMER_GROUP_HEARTBEAT, K.SHARE_GROUP_HEARTBEAT})
_GROUP_WRITE = _GROUP_LIST_WRITE | {K.HEARTBEAT, K.LEAVE_GROUP, K.SYNC_GROUP, K.OFFSET_DELETE}
_GROUP_READ = frozenset({K.OFFSET_FETCH, K.DESCRIBE_GROUPS, K.CONSUMER_GROUP_DESCRIBE, K.SHARE_GROUP_DESCRIBE})
_SHARE_WRITE = frozenset({K.SHARE_FETCH, K.SHARE_ACKNOWLEDGE, K.ALTER_SHARE_GROUP_OFFSETS,
                          K.DELETE_SHARE_GROUP_OFFSETS})
_SHARE_READ = frozenset({K.DESCRIBE_SHARE_GROUP_OFFSETS})
_TXN_WRITE = frozenset({K.INIT_PRODUCER_ID, K.ADD_PARTITIONS_TO_TXN, K.ADD_OFFSETS_TO_TXN, K.END_TXN})
_TXN_READ = frozenset({K.TXN_OFFSET_COMMIT, K.DESCRIBE_TRANSACTIONS})
_CONFIG_READ, _CONFIG_WRITE = frozenset({K.DESCRIBE_CONFIGS}), frozenset({K.ALTER_CONFIGS, K.INCREMENTAL_ALTER_CONFIGS})
_RESOURCE_TOPIC, _RESOURCE_GROUP = 2, 32  # ConfigResource.Type
_ACL_WRITE, _ACL_READ = frozenset({K.CREATE_ACLS, K.DELETE_ACLS}), frozenset({K.DESCRIBE_ACLS})
_QUOTA_WRITE, _QUOTA_READ = frozenset({K.ALTER_CLIENT_QUOTAS}), frozenset({K.DESCRIBE_CLIENT_QUOTAS})
_SCRAM_WRITE = frozenset({K.ALTER_USER_SCRAM_CREDENTIALS})
_SCRAM_READ = frozenset({K.DESCRIBE_USER_SCRAM_CREDENTIALS})
#: Answers that tell topic ids with their names.
_TOPIC_ID_ANSWERS = frozenset({K.CREATE_TOPICS, K.METADATA, K.DESCRIBE_TOPIC_PARTITIONS})
#: The field of a partition's answer telling the offset it saw: a Produce's base offset, a Fetch's high watermark.
_SEEN_OFFSET: dict[int, str] = {K.PRODUCE: "base_offset", K.FETCH: "high_watermark"}


@dataclass
class ReplayPlan:
    """Per-connection streams and the dependencies between them (no frames: see the module docstring).

    Request ids (rids) number the requests connection by connection: connection ``c`` holds
    ``rids[c]`` .. ``rids[c] + sizes[c] - 1``.
    """

    keys: list[ConnKey] = field(default_factory=list)  # connection index -> captured connection
    sizes: list[int] = field(default_factory=list)  # requests per connection (SASL exchanges left out)
    starts: list[int] = field(default_factory=list)  # first rid of each connection
    #: Per rid: dependencies as a flat tuple (connection, count, connection, count, ...): "connection has
    #: settled its first count requests".
    deps: list[tuple[int, ...]] = field(default_factory=list)
    #: rid -> the mapped keys its response (or, for a joining heartbeat, its request) first shows.
    introduces: dict[int, list[tuple]] = field(default_factory=dict)
    #: Per rid: 1 if the request carries values to map (parse and rewrite it), else 0 (sent as captured).
    mapped: bytearray = field(default_factory=bytearray)
    #: Per rid: 1 if it is a long poll answered at once at max speed (sent after what its captured answer saw).
    long_poll: bytearray = field(default_factory=bytearray)
    #: rid -> µs to leave after its "sent" dependencies went out (the captured gap, at most MAX_SENT_GAP_US).
    sent_gap_us: dict[int, int] = field(default_factory=dict)
    #: Members that heartbeat with member epochs, and groups several of them heartbeated to.
    epoch_members: set[str] = field(default_factory=set)
    shared_groups: set[str] = field(default_factory=set)
    principals: dict[ConnKey, str] = field(default_factory=dict)
    first_ns: int = 0
    #: How many dependencies point at another connection (a measure of the capture's coupling).
    cross_dependencies: int = 0

    @property
    def total(self) -> int:
        return len(self.deps)

    def index(self) -> dict[ConnKey, int]:
        return {k: i for i, k in enumerate(self.keys)}

    def rid(self, conn: int, pos: int) -> int:
        return self.starts[conn] + pos

    def conn_of(self, rid: int) -> tuple[int, int]:
        """(connection, position) of a rid."""
        c = bisect.bisect_right(self.starts, rid) - 1
        return c, rid - self.starts[c]

    def components(self) -> list[list[int]]:
        """Connections grouped by the dependencies between them (union-find), biggest first."""
        parent = list(range(len(self.keys)))

        def find(x: int) -> int:
            while parent[x] != x:
                parent[x] = parent[parent[x]]
                x = parent[x]
            return x

        for c, start in enumerate(self.starts):
            for rid in range(start, start + self.sizes[c]):
                d = self.deps[rid]
                for i in range(0, len(d), 2):
                    a, b = find(c), find(d[i])
                    if a != b:
                        parent[a] = b
        groups: dict[int, list[int]] = defaultdict(list)
        for c in range(len(self.keys)):
            groups[find(c)].append(c)
        return sorted(groups.values(), key=lambda g: -sum(self.sizes[c] for c in g))


def replayed_records(recs: Iterable[CaptureRecord]) -> list[CaptureRecord]:
    """A connection's records as the replay sends them: receive order, SASL exchanges left out."""
    return [r for r in recs if r.api_key not in SASL_API_KEYS]


def connection_principal(recs: Iterable[CaptureRecord]) -> str:
    """The principal a captured connection ended with: that of its latest request, i.e. after the client
    authenticated (an ApiVersions sent before SASL authentication runs as ``User:ANONYMOUS``)."""
    latest: CaptureRecord | None = None
    for r in recs:
        if latest is None or r.receive_ns >= latest.receive_ns:
            latest = r
    return latest.principal if latest is not None else ""


def _completion_ns(r: CaptureRecord) -> int:
    return r.send_ns if r.response is not None else r.receive_ns


@dataclass
class _Op:
    conn: int
    pos: int
    recv: int
    comp: int
    write: bool
    until: int = 0  # a read: the writes received before this time are seen (its receive, or its answer)
    #: A Produce: the base offset it got; a Fetch: the high watermark it saw; a JoinGroup: the generation it
    #: joined (-1: unknown)
    offset: int = -1


class _Planner:
    """The pass over the capture behind :func:`build_plan`."""

    def __init__(self, conns: dict[ConnKey, list[CaptureRecord]], causality: str, max_speed: bool) -> None:
        self.max_speed = max_speed
        if causality not in ("global", "connection"):
            raise ValueError(f"causality must be 'global' or 'connection', not {causality!r}")
        self.causality = causality
        self.plan = ReplayPlan()
        self.records: list[list[CaptureRecord]] = []
        for key, recs in conns.items():
            kept = replayed_records(recs)
            if not kept:
                continue
            self.plan.starts.append(sum(self.plan.sizes))
            self.plan.keys.append(key)
            self.plan.sizes.append(len(kept))
            self.plan.principals[key] = connection_principal(recs)
            self.records.append(kept)
        n = sum(self.plan.sizes)
        self.plan.mapped = bytearray(n)
        self.plan.long_poll = bytearray(n)
        self.plan.first_ns = min((recs[0].receive_ns for recs in self.records), default=0)
        self.ops: dict[tuple, list[_Op]] = defaultdict(list)
        self.extra: list[list[tuple[int, int]]] = [[] for _ in range(n)]  # per rid: (conn, count) deps
        self.topic_names: dict[Any, str] = {}
        self.existing: set[str] = set()
        self.txn_partitions: dict[str, set[tuple[str, int]]] = defaultdict(set)
        self.txn_groups: dict[str, set[str]] = defaultdict(set)
        self._offsets: dict[tuple[str, int], int] = {}
        self._generation = -1
        self._sessions: dict[int, set[tuple[str, int]]] = {}  # connection -> partitions of its fetch session
        self._session_partitions: set[tuple[str, int]] = set()
        self._last_hw: dict[tuple[int, str, int], int] = {}
        #: "A write waits for a read answered late that did not see it" (the read's answer shows it): kept unless
        #: it closes a cycle (high watermarks behind appends on a cluster).
        self.unseen: list[tuple[int, int, int]] = []  # (write rid, read conn, read count)
        self.woken: set[int] = set()  # long polls sent after the write that woke them in the capture

    # -- pass 0: what the whole capture tells -------------------------------------------------------

    def _scan_members_and_ids(self) -> None:
        """Members with member epochs (their generation fields are member epochs), the groups several of them
        heartbeated to, and captured topic ids -> names (from Metadata/CreateTopics answers)."""
        by_group: dict[Any, set[str]] = defaultdict(set)
        for recs in self.records:
            for r in recs:
                if r.api_key in HEARTBEAT_KEYS and r.api_key in APIS:
                    try:
                        _, body = parse_request_frame(r.request)
                        members = {body.get("member_id")}
                        if r.response is not None:
                            members.add(parse_response_frame(r.response, r.api_key, r.api_version)[1].get("member_id"))
                    except ProtocolError:  # noqa: S112 - replayed as is
                        continue
                    group = next((g for _, g in values(body, APIS[r.api_key].request, r.api_version,
                                                       Entity.GROUP_ID)), None)
                    for m in members:
                        if isinstance(m, str) and m:
                            self.plan.epoch_members.add(m)
                            by_group[group].add(m)
                elif r.api_key in _TOPIC_ID_ANSWERS and r.response is not None:
                    try:
                        _, resp = parse_response_frame(r.response, r.api_key, r.api_version)
                    except ProtocolError:  # noqa: S112 - the capture's answer does not parse: no names from it
                        continue
                    for e in topic_entries(resp, APIS[r.api_key].response, r.api_version):
                        tid, name = e.topic_id, e.name
                        if tid is not None and name:
                            self.topic_names[tid] = name
        self.plan.shared_groups.update(g for g, ms in by_group.items() if len(ms) > 1)

    # -- pass 1: resources, mapped values, long polls ---------------------------------------------------

    def run(self) -> ReplayPlan:
        self._scan_members_and_ids()
        order = sorted(((r.receive_ns, c, pos) for c, recs in enumerate(self.records) for pos, r in enumerate(recs)))
        has_acl_writes = any(r.api_key in _ACL_WRITE for recs in self.records for r in recs)
        has_quota_writes = any(r.api_key in _QUOTA_WRITE for recs in self.records for r in recs)
        self.lists_groups = any(r.api_key == ApiKey.LIST_GROUPS for recs in self.records for r in recs)
        seen: set[tuple] = set()
        introducer: dict[tuple, int] = {}
        for _, c, pos in order:
            r = self.records[c][pos]
            rid = self.plan.starts[c] + pos
            body = resp = None
            if r.api_key in APIS:
                try:
                    _, body = parse_request_frame(r.request)
                except ProtocolError as exc:  # sent as captured; compared as raw bytes
                    log.debug("capture record %s v%d does not parse: %s", api_name(r.api_key), r.api_version, exc)
            if body is not None:
                ctx = _Ctx(r.broker_id, body.get("group_id") or None, self.plan.epoch_members, r.api_key,
                           body.get("member_id") if isinstance(body.get("member_id"), str) else None)
                named = self._named(APIS[r.api_key].request, r.api_version, body)
                keys = _request_keys(r.api_key, body, ctx, named)
                if r.api_key == ApiKey.PRODUCE:
                    for entry in named.listed:
                        for _, pd in entry.partitions:
                            for p, e in _batch_producers(pd.get("records")):
                                keys += [("pid", p), ("epoch", p, e)]
                if keys:
                    self.plan.mapped[rid] = 1
                for k in keys:
                    src = introducer.get(k)
                    if src is not None:
                        sc, spos = self.plan.conn_of(src)
                        self.extra[rid].append((sc, spos + 1))
                if r.api_key in HEARTBEAT_KEYS and body.get("member_epoch") == 0 and ctx.member:
                    joined = ("member", ctx.member)
                    if joined not in seen:
                        seen.add(joined)
                        introducer[joined] = rid
                        self.plan.introduces.setdefault(rid, []).append(joined)
                seen.update(keys)
                if r.response is not None:
                    try:
                        _, resp = parse_response_frame(r.response, r.api_key, r.api_version)
                    except ProtocolError as exc:
                        log.debug("captured %s response does not parse: %s", api_name(r.api_key), exc)
                if resp is not None:
                    for k in _response_keys(r.api_key, r.api_version, resp, ctx):
                        if k not in seen:
                            seen.add(k)
                            introducer[k] = rid
                            self.plan.introduces.setdefault(rid, []).append(k)
                if self.max_speed and r.api_key == ApiKey.FETCH and resp is not None and body.get("max_wait_ms"):
                    recs = self.records[c]
                    if pos + 1 == len(recs) or recs[pos + 1].receive_ns >= r.send_ns:
                        self.plan.long_poll[rid] = 1  # nothing pipelined behind it: answer it at once, later
                if self.causality == "global":
                    self._offsets = self._data_offsets(r.api_key, r.api_version, resp) if resp is not None else {}
                    self._generation = -1
                    if r.api_key == ApiKey.JOIN_GROUP and resp is not None and not resp.get("error_code"):
                        self._generation = resp.get("generation_id", -1)
                    if r.api_key == ApiKey.FETCH:
                        self._fetch_session(c, body, named)
                    for res, write in self._resources(r, body, resp, named):
                        self._op(res, c, pos, r, write)
            if self.causality == "global":
                if has_acl_writes and r.api_key not in _ACL_WRITE:
                    self._op(("acls",), c, pos, r, False)
                if has_quota_writes and r.api_key not in _QUOTA_WRITE:
                    self._op(("quotas",), c, pos, r, False)
        return self._finish()

    def _op(self, res: tuple, c: int, pos: int, r: CaptureRecord, write: bool) -> None:
        comp = _completion_ns(r)
        data = res[0] == "data"
        late = bool(self.plan.long_poll[self.plan.starts[c] + pos]) and data
        if data:
            offset = self._offsets.get(res[1:], -1)
        else:
            offset = self._generation if res[0] == "group" else -1
        self.ops[res].append(_Op(c, pos, r.receive_ns, comp, write, comp if late else r.receive_ns, offset))

    def _fetch_session(self, c: int, body: Any, named: _Named) -> None:
        """The partitions a Fetch reads (KIP-227: an incremental fetch reads its whole session, not only the
        partitions it lists) and, for those its answer left out (unchanged), the high watermark last seen."""
        epoch = body.get("session_epoch", -1)
        parts = set(self._partitions(named.listed))
        if epoch is not None and epoch > 0:
            parts |= self._sessions.get(c, set())
            parts -= set(self._partitions(named.others))  # its forgotten topics
        self._sessions[c] = parts
        self._session_partitions = parts
        last = self._last_hw
        for tp in parts:
            if tp in self._offsets:
                last[(c, *tp)] = self._offsets[tp]
            elif (c, *tp) in last:
                self._offsets[tp] = last[(c, *tp)]

    def _data_offsets(self, api_key: int, version: int, resp: Any) -> dict[tuple[str, int], int]:
        """Produce: each partition's base offset; Fetch: each partition's high watermark (what it saw)."""
        out: dict[tuple[str, int], int] = {}
        field = _SEEN_OFFSET.get(api_key)
        if field is None:
            return out
        for e in topic_entries(resp, APIS[api_key].response, version):
            name = self._topic(e)
            for index, p in e.partitions:
                if name and p is not None and not p.get("error_code"):
                    out[(name, index)] = p.get(field, -1)
        return out

    def _topic(self, e: TopicEntry) -> str | None:
        """A topic entry's name: its name field, else the name of its topic id."""
        if isinstance(e.name, str) and e.name:
            return e.name
        return self.topic_names.get(e.topic_id) if e.topic_id is not None else None

    def _partitions(self, entries: Iterable[TopicEntry]) -> Iterator[tuple[str, int]]:
        for e in entries:
            name = self._topic(e)
            if name is None:
                continue
            for index, _ in e.partitions:
                if index is not None:
                    yield name, index

    def _named(self, message: Message, version: int, body: Any) -> _Named:
        """What a request names (one walk over its tagged fields)."""
        entries = list(topic_entries(body, message, version))
        first = next(iter(topic_layouts(message, version)), None)
        named = _Named([e for e in entries if e.layout is first], [e for e in entries if e.layout is not first],
                       {n for e in entries for n in [self._topic(e)] if n}, [], [])
        if not _names_beside_entries(message, version):
            return named
        for ef, x in values(body, message, version, _NAMED_KINDS):
            if not isinstance(x, str) or not x:
                continue
            if ef.entity == Entity.GROUP_ID:
                named.groups.append(x)
            elif ef.entity == Entity.TRANSACTIONAL_ID:
                named.tids.append(x)
            elif ef.many:  # lists of topic names (the others are in topic entries)
                named.topics.add(x)
        return named

    def _txn_partitions(self, message: Message, version: int, body: Any, tid: str) -> Iterator[tuple[str, int]]:
        """The partitions a request lists with transactional id ``tid``: those of the struct naming it
        (AddPartitionsToTxn v0-3: the body; v4+: each of its transactions)."""
        for ef in entity_fields(message, version):
            if ef.entity != Entity.TRANSACTIONAL_ID:
                continue
            scope = ef.path[:-1]
            for struct in structs(body, scope):
                if struct.get(ef.path[-1]) == tid:
                    yield from self._partitions(topic_entries(_within(struct, scope), message, version))

    def _resources(self, r: CaptureRecord, body: Any, resp: Any, named: _Named) -> Iterator[tuple[tuple, bool]]:
        """(resource, written?) of one request; see the module docstring."""
        k, v = r.api_key, r.api_version
        message = APIS[k].request
        names, groups, tids, listed = named.topics, named.groups, named.tids, named.listed
        if k == ApiKey.PRODUCE:
            for name, p in self._partitions(listed):
                yield ("data", name, p), True
            for tid in tids:
                yield ("txn", tid), False
            for name in names:
                yield ("topic", name), False
            return
        if k == ApiKey.FETCH:
            for name, p in self._session_partitions:
                yield ("data", name, p), False
        elif k in _DATA_READ or k in _DATA_WRITE:
            for name, p in self._partitions(listed):
                yield ("data", name, p), k in _DATA_WRITE
        if k == ApiKey.METADATA:
            if body.get(topic_layouts(message, v)[0].path[0]) is None:  # a null topic list: all topics
                yield ("topics",), False
            auto = v < 4 or bool(body.get("allow_auto_topic_creation"))
            answered = {e.name: e.entry.get("error_code") for e in topic_entries(resp, APIS[k].response, v)} \
                if resp else {}
            for name in names:
                creates = auto and name not in self.existing and \
                    answered.get(name) in (ErrorCode.NONE, ErrorCode.LEADER_NOT_AVAILABLE)
                yield ("topic", name), creates
                if creates:
                    yield ("topics",), True
            self.existing.update(n for n, e in answered.items() if e == 0 and n)
            return
        for name in names:
            yield ("topic", name), k in _TOPIC_WRITE
        if k in _TOPIC_LIST_WRITE:
            yield ("topics",), True
            if k == ApiKey.CREATE_TOPICS:
                self.existing.update(names)
            else:
                self.existing.difference_update(names)
        if k in HEARTBEAT_KEYS:
            yield ("topics",), False
        for g in groups:
            if k in _GROUP_WRITE or k in _GROUP_READ:
                yield ("group", g), k in _GROUP_WRITE
            if k in _SHARE_WRITE or k in _SHARE_READ:
                yield ("share", g), k in _SHARE_WRITE
            if k in _GROUP_LIST_WRITE and self.lists_groups:
                yield ("groups",), True
        if k == ApiKey.LIST_GROUPS:
            yield ("groups",), False
        for tid in tids:
            if k in _TXN_WRITE or k in _TXN_READ:
                yield ("txn", tid), k in _TXN_WRITE
            if k == ApiKey.ADD_PARTITIONS_TO_TXN:
                self.txn_partitions[tid].update(self._txn_partitions(message, v, body, tid))
            elif k == ApiKey.ADD_OFFSETS_TO_TXN:
                self.txn_groups[tid].update(groups)
            elif k == ApiKey.END_TXN:
                for name, p in self.txn_partitions.pop(tid, ()):
                    yield ("data", name, p), True
                for g in self.txn_groups.pop(tid, ()):
                    yield ("group", g), True
        if k in _CONFIG_READ or k in _CONFIG_WRITE:
            for res in body.get("resources") or ():
                rtype, rname = res.get("resource_type"), res.get("resource_name")
                if rtype == _RESOURCE_TOPIC:
                    yield ("topic", rname), k in _CONFIG_WRITE
                elif rtype == _RESOURCE_GROUP:
                    yield ("group", rname), k in _CONFIG_WRITE
                else:
                    yield ("config", rtype, rname), k in _CONFIG_WRITE
        if k in _ACL_WRITE or k in _ACL_READ:
            yield ("acls",), k in _ACL_WRITE
        if k in _QUOTA_WRITE or k in _QUOTA_READ:
            yield ("quotas",), k in _QUOTA_WRITE
        if k in _SCRAM_WRITE or k in _SCRAM_READ:
            yield ("scram",), k in _SCRAM_WRITE

    # -- dependencies -------------------------------------------------------------------------------

    def _finish(self) -> ReplayPlan:
        plan = self.plan
        deps: list[dict[int, int]] = [{} for _ in range(sum(plan.sizes))]
        sent: list[dict[int, int]] = [{} for _ in range(sum(plan.sizes))]
        late_seen: dict[int, list[tuple[int, int]]] = defaultdict(list)
        # Within a connection: the requests answered before this one was received.
        for c, recs in enumerate(self.records):
            comps = [_completion_ns(r) for r in recs]
            done = 0  # requests of this connection answered before the current one was received (a prefix)
            best = 0
            for pos, r in enumerate(recs):
                while done < pos and comps[done] < r.receive_ns:
                    done += 1
                # acks=0 produces complete at once, out of order: take the furthest answered request too.
                best = max(best, done)
                if best:
                    deps[plan.starts[c] + pos][c] = min(best, pos)
        for rid, extra in enumerate(self.extra):
            for c, n in extra:
                d = deps[rid]
                if d.get(c, 0) < n:
                    d[c] = n
        for res, ops in self.ops.items():
            _resource_deps(ops, res[0] in _LOG_LIKE, deps, sent, plan.starts, self.unseen, late_seen)
        for rid, writes in late_seen.items():
            # The writes a long poll saw that reached the broker while it waited (they woke it).  One: sent right
            # after it, the poll is answered as in the capture -- at once if it is in, else woken by it -- one round
            # trip less than waiting for its answer.  Several: sent once all are done, answered at once.
            d = deps[rid]
            if len(set(writes)) == 1:
                c, last = writes[0][0], writes[0][1] + 1
                if sent[rid].get(c, 0) < last:
                    sent[rid][c] = last
                plan.long_poll[rid] = 0
                self.woken.add(rid)
            else:
                for c, pos in writes:
                    if d.get(c, 0) < pos + 1:
                        d[c] = pos + 1
        out: list[tuple[int, ...]] = []
        cross = 0
        for rid, d in enumerate(deps):
            c, pos = plan.conn_of(rid)
            own = d.get(c)
            if own is not None and own > pos:  # never wait for oneself or later requests of one's own connection
                d[c] = pos
            pairs = [x for cc, n in sorted(d.items()) if n > 0 for x in (cc, n)]
            # "sent" dependencies (count negated) where more is needed sent than settled
            sent_pairs = [(cc, n) for cc, n in sorted(sent[rid].items()) if cc != c and n > d.get(cc, 0)]
            pairs += [x for cc, n in sent_pairs for x in (cc, -n)]
            out.append(tuple(pairs))
            cross += sum(1 for i in range(0, len(pairs), 2) if pairs[i] != c)
            if sent_pairs and rid not in self.woken:
                recv = self.records[c][pos].receive_ns
                gap = min(recv - self.records[cc][n - 1].receive_ns for cc, n in sent_pairs)
                plan.sent_gap_us[rid] = max(0, min(MAX_SENT_GAP_US, gap // 1000))
        plan.deps, plan.cross_dependencies = out, cross
        if self.unseen:
            with_unseen = [list(d) for d in out]
            for rid, c, n in self.unseen:
                with_unseen[rid] += [c, n]
            candidate = [tuple(d) for d in with_unseen]
            if _acyclic(plan, candidate):
                plan.deps, plan.cross_dependencies = candidate, cross + len(self.unseen)
                return plan
            log.warning("replay plan: %d write(s) after long polls that did not see them left unordered "
                        "(their order closes a cycle)", len(self.unseen))
        if not _acyclic(plan, plan.deps):
            raise ValueError("the capture's dependencies form a cycle")  # a bug in the rules above
        return plan


class _Before:
    """Per connection, the position of its last op (of some set) that happened before a time."""

    def __init__(self, ops: Iterable[_Op], completion: bool) -> None:
        per: dict[int, list[tuple[int, int]]] = defaultdict(list)
        for o in ops:
            per[o.conn].append((o.comp if completion else o.recv, o.pos))
        self._conns: list[tuple[int, list[int], list[int]]] = []
        for c, items in per.items():
            items.sort()
            best, maxpos = -1, []
            for _, pos in items:
                best = max(best, pos)
                maxpos.append(best)
            self._conns.append((c, [t for t, _ in items], maxpos))

    def merge_into(self, d: dict[int, int], t: int, own: int) -> None:
        """``d[c] >= pos + 1`` for every other connection's last op before ``t``."""
        for c, times, maxpos in self._conns:
            if c == own:
                continue
            n = bisect.bisect_left(times, t)
            if n and d.get(c, 0) < maxpos[n - 1] + 1:
                d[c] = maxpos[n - 1] + 1


def _resource_deps(ops: list[_Op], log_like: bool, deps: list[dict[int, int]], sent: list[dict[int, int]],
                   starts: list[int], unseen: list[tuple[int, int, int]],
                   late_seen: dict[int, list[tuple[int, int]]]) -> None:
    """Add one resource's dependencies (see the module docstring): per request and other connection, how many of
    its requests must have settled (``deps``) or at least been sent (``sent``); a long poll answered late collects
    in ``late_seen`` the writes its answer saw, and in ``unseen`` those that wait for it."""
    writes = [o for o in ops if o.write]
    if not writes:
        return
    reads = [o for o in ops if not o.write]
    if log_like:
        w_recv, r_comp = _Before(writes, False), _Before(reads, True)
        window: list[_Op] = []
        times: list[int] = []
        for o in ops:
            d = deps[starts[o.conn] + o.pos]
            if o.write:
                w_recv.merge_into(d, o.recv, o.conn)
                r_comp.merge_into(d, o.recv, o.conn)
                continue
            w_recv.merge_into(d, o.recv, o.conn)
            if o.until == o.recv:
                continue
            # A long poll answered at once, later (max speed): the writes received while it waited are before it
            # if its answer saw them (base offset below its high watermark), else after it.
            if not window:
                window = sorted(writes, key=lambda w: w.recv)
                times = [w.recv for w in window]
            for w in window[bisect.bisect_left(times, o.recv):bisect.bisect_left(times, o.until)]:
                if w.conn == o.conn:
                    continue
                seen = w.offset < o.offset if w.offset >= 0 and o.offset >= 0 else w.comp < o.until
                if seen:
                    late_seen[starts[o.conn] + o.pos].append((w.conn, w.pos))
                else:
                    unseen.append((starts[w.conn] + w.pos, o.conn, o.pos + 1))
        return
    w_recv, w_comp = _Before(writes, False), _Before(writes, True)
    a_recv, a_comp = _Before(ops, False), _Before(ops, True)
    joins = sorted((o for o in ops if o.offset >= 0), key=lambda o: o.recv)
    join_times = [o.recv for o in joins]
    for o in ops:
        rid = starts[o.conn] + o.pos
        d = deps[rid]
        (a_comp if o.write else w_comp).merge_into(d, o.recv, o.conn)
        (a_recv if o.write else w_recv).merge_into(sent[rid], o.recv, o.conn)
        if o.offset >= 0:
            # A JoinGroup still waiting when this one was received, but answered with an older generation: the
            # broker completed that rebalance before it read this one.
            for j in joins[:bisect.bisect_left(join_times, o.recv)]:
                if j.conn != o.conn and j.comp >= o.recv and j.offset < o.offset and d.get(j.conn, 0) < j.pos + 1:
                    d[j.conn] = j.pos + 1


def _request_keys(api_key: int, body: Any, ctx: _Ctx, named: _Named) -> list[tuple]:
    """The mapped keys a request carries (the hot APIs without walking every field: a Produce's are in its record
    batches (and its topic ids), a Fetch's are its session id and topic ids)."""
    if api_key == ApiKey.PRODUCE or api_key == ApiKey.FETCH:
        out: list[tuple] = []
        sid = body.get("session_id") if api_key == ApiKey.FETCH else None
        if sid:
            out.append(("session", ctx.broker, sid))
        for e in (*named.listed, *named.others):
            if e.topic_id is not None and e.topic_id != ZERO_UUID:
                out.append(("topic", e.topic_id))
        if api_key == ApiKey.FETCH or not out:
            return out
    return [k for _, _, k in _mapped_fields(body, ctx, _REQUEST_KINDS)]


def _response_keys(api_key: int, version: int, resp: Any, ctx: _Ctx) -> list[tuple]:
    """The mapped keys an answer shows (a Produce's none that a request carries; a Fetch's its session id)."""
    if api_key == ApiKey.PRODUCE:
        return []
    if api_key == ApiKey.FETCH:
        sid = resp.get("session_id")
        return [("session", ctx.broker, sid)] if sid else []
    return [k for _, _, k in _mapped_fields(resp, ctx, _REQUEST_KINDS)]


def _acyclic(plan: ReplayPlan, deps: list[tuple[int, ...]]) -> bool:
    """Whether every request can be sent (Kahn's algorithm over "sent after": a connection's previous request,
    and the last request of every dependency)."""
    n = len(deps)
    indeg = [0] * n
    out: list[list[int]] = [[] for _ in range(n)]
    for c, start in enumerate(plan.starts):
        for rid in range(start, start + plan.sizes[c]):
            if rid > start:
                out[rid - 1].append(rid)
                indeg[rid] += 1
            d = deps[rid]
            for i in range(0, len(d), 2):
                src = plan.starts[d[i]] + abs(d[i + 1]) - 1
                if src != rid:
                    out[src].append(rid)
                    indeg[rid] += 1
    ready = [r for r in range(n) if indeg[r] == 0]
    seen = 0
    while ready:
        r = ready.pop()
        seen += 1
        for x in out[r]:
            indeg[x] -= 1
            if indeg[x] == 0:
                ready.append(x)
    return seen == n


@dataclass
class _Named:
    """What a request names: the topic entries it lists first (Fetch's and ShareFetch's forgotten topics come
    after theirs), every topic (by name, or by a captured topic id), its group and transactional ids."""

    listed: list[TopicEntry]
    others: list[TopicEntry]
    topics: set[str]
    groups: list[str]
    tids: list[str]


_NAMED_KINDS = frozenset({Entity.TOPIC_NAME, Entity.GROUP_ID, Entity.TRANSACTIONAL_ID})


@lru_cache(maxsize=None)
def _names_beside_entries(message: Message, version: int) -> bool:
    """Whether ``message`` names groups, transactional ids or lists of topic names (what :class:`_Named` holds
    besides topic entries): most requests (Fetch...) do not, and need no second walk."""
    return any(ef.entity in _NAMED_KINDS and (ef.many or ef.entity != Entity.TOPIC_NAME)
               for ef in entity_fields(message, version))


def _within(struct: Any, path: tuple[str, ...]) -> Any:
    """A body holding only ``struct`` at ``path`` (to read the topic entries under it)."""
    for name in reversed(path):
        struct = {name: [struct]}
    return struct


def build_plan(conns: dict[ConnKey, list[CaptureRecord]], causality: str = "global",
               max_speed: bool = False) -> ReplayPlan:
    """The :class:`ReplayPlan` of captured connections (as :func:`~.runner.group_connections` returns them:
    each in receive order); ``causality="connection"`` keeps only each connection's own order.  ``max_speed``:
    Fetch long polls are sent once the writes received before their captured answer are done, and answered at
    once (MaxWaitMs 0): no waiting, and the answer the capture saw."""
    return _Planner(conns, causality, max_speed).run()
