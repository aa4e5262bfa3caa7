"""Routing replayed requests on a cluster target: the Kafka client's view of the cluster (its ``Metadata``
and the coordinator lookups of ``NetworkClient``/``ConsumerCoordinator``/``TransactionManager``), as much
as wire replay needs.

:class:`TargetCluster` starts from a bootstrap list, fetches Metadata (all topics) from the target, looks
group and transaction coordinators up with FindCoordinator (cached per key) and answers, for a parsed
request, the target node it goes to (:meth:`TargetCluster.plan`):

* Produce, Fetch, ListOffsets, OffsetForLeaderEpoch, DeleteRecords, DescribeProducers, ShareFetch and
  ShareAcknowledge: the leader of their partitions (topics by name, or by the replayed topic id);
* group APIs (JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch, DescribeGroups,
  DeleteGroups, TxnOffsetCommit, ConsumerGroupHeartbeat/Describe, ShareGroup*, share group offsets): the
  group coordinator;
* transaction APIs (InitProducerId with a transactional id, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn,
  DescribeTransactions): the transaction coordinator;
* everything else: ``None``, "any" node (the replayed connection stays where it is).

A stateless request whose partitions have different leaders (Produce, ListOffsets, OffsetForLeaderEpoch,
DeleteRecords, DescribeProducers, and a Fetch outside a fetch session: version < 7, or session id 0 with
epoch -1) is split per leader (:func:`split_request`) and the answers merged back in the captured order
(:func:`merge_responses`), as a client would have sent one request per broker.  Deliberate difference:
a request *in* a fetch or share session (the session lives on one broker; the capture has one session
where a client of the cluster would have one per leader) is sent whole to the node its session was
started on (its first partition's leader) and counted as ``unsplittable``; the target answers
NOT_LEADER_OR_FOLLOWER for the partitions it does not lead.  A batched request naming several groups or
transactional ids goes to the first one's coordinator (counted ``unsplittable`` when they differ).

Metadata is refreshed when :meth:`TargetCluster.observe` sees a topic created/deleted/extended or a
NOT_LEADER_OR_FOLLOWER / UNKNOWN_TOPIC_OR_PARTITION / UNKNOWN_TOPIC_ID / NOT_COORDINATOR answer, at most
once per ``refresh_backoff_s`` (Kafka's ``retry.backoff.ms``), and when a request names a topic it does
not know.  The control requests (ApiVersions, Metadata, FindCoordinator) go over one connection of its
own opened with the caller's ``connect`` (which does TLS and SASL as the replayed connections do).
"""

from __future__ import annotations

import logging
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

import trio

from ...client.connection import KafkaConnection
from ...protocol.api import APIS, ApiKey
from ...protocol.entities import Entity, TopicEntry, topic_entries, topic_layouts, values
from ...protocol.errors import ErrorCode
from ...protocol.schema import Message
from ...protocol.types import ZERO_UUID

log = logging.getLogger(__name__)

#: Errors that end a connection to the target (ssl.SSLError is an OSError).
CONNECTION_ERRORS = (OSError, ConnectionError, trio.TooSlowError, trio.BrokenResourceError, trio.ClosedResourceError)

TopicKey = str | UUID  # a topic's name, or its id
PartitionKey = tuple[TopicKey, int]
#: Opens a stream to (host, port) ready for requests (TLS handshake and SASL authentication done).
Connector = Callable[[str, int], Awaitable[trio.abc.Stream]]

GROUP, TRANSACTION = 0, 1  # FindCoordinator key types

#: APIs sent to the leaders of their partitions; where a request and its answer list topics and partitions is
#: read from their declarations (the first topic entries they tag, see :func:`_listed`).
_PARTITIONED = frozenset({ApiKey.PRODUCE, ApiKey.FETCH, ApiKey.LIST_OFFSETS, ApiKey.OFFSET_FOR_LEADER_EPOCH,
                          ApiKey.DELETE_RECORDS, ApiKey.DESCRIBE_PRODUCERS, ApiKey.SHARE_FETCH,
                          ApiKey.SHARE_ACKNOWLEDGE})
#: Partitioned APIs whose requests hold no state between requests: split per leader when they span leaders.
_SPLITTABLE = frozenset({ApiKey.PRODUCE, ApiKey.FETCH, ApiKey.LIST_OFFSETS, ApiKey.OFFSET_FOR_LEADER_EPOCH,
                         ApiKey.DELETE_RECORDS, ApiKey.DESCRIBE_PRODUCERS})
#: APIs with sessions on the broker (fetch sessions, KIP-227; share sessions, KIP-932).
_SESSION_APIS = frozenset({ApiKey.FETCH, ApiKey.SHARE_FETCH, ApiKey.SHARE_ACKNOWLEDGE})
#: APIs sent to the coordinator of the ids their declarations tag with the kind (groups, transactions).
_COORDINATED: dict[int, Entity] = {
    **dict.fromkeys((ApiKey.JOIN_GROUP, ApiKey.SYNC_GROUP, ApiKey.HEARTBEAT, ApiKey.LEAVE_GROUP,
                     ApiKey.OFFSET_COMMIT, ApiKey.TXN_OFFSET_COMMIT, ApiKey.OFFSET_FETCH, ApiKey.DESCRIBE_GROUPS,
                     ApiKey.DELETE_GROUPS, ApiKey.CONSUMER_GROUP_HEARTBEAT, ApiKey.CONSUMER_GROUP_DESCRIBE,
                     ApiKey.SHARE_GROUP_HEARTBEAT, ApiKey.SHARE_GROUP_DESCRIBE, ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS,
                     ApiKey.ALTER_SHARE_GROUP_OFFSETS, ApiKey.DELETE_SHARE_GROUP_OFFSETS, ApiKey.OFFSET_DELETE),
                    Entity.GROUP_ID),
    **dict.fromkeys((ApiKey.INIT_PRODUCER_ID, ApiKey.ADD_PARTITIONS_TO_TXN, ApiKey.ADD_OFFSETS_TO_TXN,
                     ApiKey.END_TXN, ApiKey.DESCRIBE_TRANSACTIONS), Entity.TRANSACTIONAL_ID),
}
#: FindCoordinator's key type of each kind of coordinated id.
_KEY_TYPES = {Entity.GROUP_ID: GROUP, Entity.TRANSACTIONAL_ID: TRANSACTION}
#: Answers after which the client's metadata (or coordinator) is stale.
_STALE_METADATA = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                             ErrorCode.UNKNOWN_TOPIC_ID, ErrorCode.LEADER_NOT_AVAILABLE,
                             ErrorCode.FENCED_LEADER_EPOCH})
_STALE_COORDINATOR = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE})
_TOPIC_CHANGES = frozenset({ApiKey.CREATE_TOPICS, ApiKey.DELETE_TOPICS, ApiKey.CREATE_PARTITIONS,
                            ApiKey.ELECT_LEADERS,  # ElectLeaders moves leaders: metadata is stale after it
                            ApiKey.ALTER_PARTITION_REASSIGNMENTS})  # and reassignments move replicas


class RoutingError(ConnectionError):
    """The target cluster cannot be reached (no bootstrap server answers)."""


@dataclass
class Route:
    """Where one request goes.

    ``node`` None: any node (the replayed connection's current one).  ``parts``: the request split per
    leader (node -> body, in captured order), to be merged back with :func:`merge_responses`.
    """

    node: int | None
    parts: dict[int, Any] | None = None
    unsplittable: bool = False


# -- splitting and merging (pure) -------------------------------------------------------------------


def _version(version: int | None) -> int | None:
    """A request's version, None when the caller does not know it (the fields of every version are looked at)."""
    return None if version is None or version < 0 else version


def _listed(message: Message, version: int | None, body: Mapping[str, Any]) -> Iterator[TopicEntry]:
    """The topic entries a partitioned request or answer lists: those of the first place its declaration tags
    (Fetch's and ShareFetch's forgotten topics come after theirs)."""
    layouts = topic_layouts(message, version)
    for e in topic_entries(body, message, version):
        if e.layout is layouts[0]:
            yield e


def topic_key(entry: TopicEntry) -> TopicKey:
    """A request or response topic's key: its id when it carries one (not the zero UUID), else its name."""
    tid = entry.topic_id
    if isinstance(tid, UUID) and tid != ZERO_UUID:
        return tid
    return entry.name if entry.name is not None else ""


def request_partitions(api_key: int, body: Mapping[str, Any], version: int | None = None) -> Iterator[PartitionKey]:
    """The (topic, partition) pairs a partitioned request names, in its order."""
    if api_key not in _PARTITIONED:
        return
    for e in _listed(APIS[api_key].request, _version(version), body):
        key = topic_key(e)
        for index, _ in e.partitions:
            yield key, index


def fetch_in_session(version: int, body: Mapping[str, Any]) -> bool:
    """Whether a Fetch belongs to a fetch session (KIP-227): it does unless it is a full fetch without one
    (versions < 7 have no sessions; session id 0 with epoch -1 (FINAL_EPOCH) asks for none).  Session id 0
    with epoch 0 creates a session; a session id with epoch -1 closes that session."""
    if version < 7:
        return False
    return not (body.get("session_id", 0) == 0 and body.get("session_epoch", -1) == -1)


def split_request(api_key: int, version: int, body: Mapping[str, Any],
                  leaders: Mapping[PartitionKey, int]) -> dict[int, Any]:
    """A partitioned request cut per leader: node -> a copy of ``body`` holding only that node's partitions
    (topics and partitions in the captured order; other fields copied).  A partition missing from
    ``leaders`` goes with the first partition's node.  Nodes are in the order their first partition comes."""
    message = APIS[api_key].request
    layout = topic_layouts(message, _version(version))[0]
    topics_f, parts_f = layout.path[-1], layout.partitions
    default: int | None = None
    out: dict[int, Any] = {}
    for e in _listed(message, _version(version), body):
        key = topic_key(e)
        per_node: dict[int, list] = {}
        for index, p in e.partitions:
            node = leaders.get((key, index))
            if default is None:
                default = node if node is not None else -1
            per_node.setdefault(node if node is not None else default, []).append(index if p is None else p)
        for node, parts in per_node.items():
            if node not in out:
                out[node] = _shallow(body)
                out[node][topics_f] = []
            topic = _shallow(e.entry)
            topic[parts_f] = parts
            out[node][topics_f].append(topic)
    if not out:
        return {default if default is not None else -1: body}
    first = next(iter(out.values()))
    for name, value in body.items():  # other lists (a sessionless Fetch's forgotten topics: none) go once
        if name != topics_f and isinstance(value, list):
            for part in out.values():
                part[name] = value if part is first else []
    return out


def merge_responses(api_key: int, version: int, parts: Mapping[int, Any] | list[Any],
                    request: Mapping[str, Any] | None = None) -> Any:
    """The answers to the parts of a split request as one answer: partitions in the order ``request`` names
    them (else in the order the parts give them, grouped by topic); ``throttle_time_ms`` the largest,
    a top-level ``error_code`` the first non-zero one, other scalars the first part's, other lists joined
    (without repeats, e.g. ``node_endpoints``)."""
    bodies = list(parts.values()) if isinstance(parts, Mapping) else list(parts)
    if len(bodies) == 1:
        return bodies[0]
    message = APIS[api_key].response
    layout = topic_layouts(message, _version(version))[0]
    topics_f, parts_f = layout.path[-1], layout.partitions
    merged = _shallow(bodies[0])
    topic_structs: dict[TopicKey, Any] = {}
    found: dict[PartitionKey, Any] = {}
    topic_order: list[TopicKey] = []
    for b in bodies:
        for e in _listed(message, _version(version), b):
            key = topic_key(e)
            if key not in topic_structs:
                topic_structs[key] = e
                topic_order.append(key)
            for index, p in e.partitions:
                found.setdefault((key, index), p)
    if request is not None:
        order = list(request_partitions(api_key, request, version))
        listed = set(order)
        order += [k for k in found if k not in listed]  # answered but not asked (should not happen)
    else:
        order = [(k, i) for tk in topic_order for (k, i) in found if k == tk]
    topics: list[Any] = []
    current: Any = None
    current_key: TopicKey | None = None
    for pk in order:
        p = found.get(pk)
        if p is None:
            continue
        if current is None or current_key != pk[0]:
            current, current_key = _shallow(topic_structs[pk[0]].entry), pk[0]
            current[parts_f] = []
            topics.append(current)
        current[parts_f].append(p)
    merged[topics_f] = topics
    for name, value in bodies[0].items():
        if name == topics_f:
            continue
        if name == "throttle_time_ms":
            merged[name] = max(b.get(name) or 0 for b in bodies)
        elif name == "error_code":
            merged[name] = next((b.get(name) for b in bodies if b.get(name)), 0)
        elif isinstance(value, list):
            joined: list = []
            for b in bodies:
                for item in b.get(name) or ():
                    if item not in joined:
                        joined.append(item)
            merged[name] = joined
    return merged


def _shallow(obj: Mapping[str, Any]) -> Any:
    """A shallow copy keeping the body's type (construct Containers read fields as attributes too)."""
    copy = getattr(obj, "copy", None)
    return copy() if copy is not None else dict(obj)


def _ids(api_key: int, body: Mapping[str, Any], version: int | None = None) -> list[str]:
    """The group or transactional ids a coordinated request names (:data:`_COORDINATED`), in order (empty
    strings and nulls left out)."""
    return [v for _, v in values(body, APIS[api_key].request, _version(version), _COORDINATED[api_key])
            if isinstance(v, str) and v]


def _error_codes(obj: Any) -> Iterator[int]:
    """Every non-zero ``error_code`` of a parsed body, at any depth."""
    if isinstance(obj, Mapping):
        for name, value in obj.items():
            if name == "error_code":
                if value:
                    yield value
            elif isinstance(value, (list, Mapping)):
                yield from _error_codes(value)
    elif isinstance(obj, list):
        for item in obj:
            if isinstance(item, (list, Mapping)):
                yield from _error_codes(item)


# -- the cluster view ---------------------------------------------------------------------------


@dataclass
class _Partition:
    leader: int
    epoch: int


@dataclass
class RoutingStats:
    """What routing did, for the report."""

    #: API name -> target node -> requests sent there (a split request counts once per node).
    routed: dict[str, Counter[int]] = field(default_factory=lambda: defaultdict(Counter))
    split: int = 0  # requests split per leader
    unsplittable: int = 0  # requests spanning leaders sent whole (in a session, or batched coordinators)
    metadata_refreshes: int = 0
    coordinator_lookups: int = 0

    def count(self, api_key: int, node: int) -> None:
        api = APIS.get(api_key)
        self.routed[api.name if api is not None else f"Unknown{api_key}"][node] += 1

    def to_dict(self) -> dict[str, Any]:
        return {"routed": {api: {str(n): c for n, c in sorted(nodes.items())} for api, nodes in
                           sorted(self.routed.items())},
                "split": self.split, "unsplittable": self.unsplittable,
                "metadata_refreshes": self.metadata_refreshes, "coordinator_lookups": self.coordinator_lookups}


def parse_bootstrap(text: str | list[str]) -> list[tuple[str, int]]:
    """``"h1:p1,h2:p2"`` (or a list of ``host:port``; ``[v6addr]:port`` too) -> [(host, port), ...]."""
    items = [s.strip() for s in (text.split(",") if isinstance(text, str) else text) if s.strip()]
    out = []
    for item in items:
        host, sep, port = item.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ValueError(f"expected HOST:PORT, got {item!r}")
        out.append((host.strip("[]"), int(port)))
    if not out:
        raise ValueError("an empty bootstrap list")
    return out


class TargetCluster:
    """The replay's view of a target cluster: brokers, partition leaders, coordinators (Kafka's client-side
    ``Metadata`` plus its coordinator cache).  Use ``async with`` or :meth:`start`/:meth:`aclose`."""

    def __init__(self, bootstrap: list[tuple[str, int]], connect: Connector, *, client_id: str = "minikafka-replay",
                 refresh_backoff_s: float = 0.1, request_timeout_s: float = 30.0, leader_wait_s: float = 5.0) -> None:
        if not bootstrap:
            raise ValueError("an empty bootstrap list")
        self.bootstrap = list(bootstrap)
        self._connect = connect
        self.client_id = client_id
        self.refresh_backoff_s = refresh_backoff_s
        self.request_timeout_s = request_timeout_s
        self.leader_wait_s = leader_wait_s
        self.brokers: dict[int, tuple[str, int]] = {}
        self.leaders: dict[PartitionKey, _Partition] = {}  # by name and by topic id
        self.topic_names: dict[UUID, str] = {}
        self.generation = 0  # Metadata answers applied
        self.stats = RoutingStats()
        self._stale = True
        self._last_refresh = -1e9
        self._missing: dict[TopicKey, int] = {}  # topic -> generation it was last found missing in
        self._coordinators: dict[tuple[int, str], int] = {}
        self._sessions: dict[tuple[Any, int], int] = {}  # (caller's connection key, api key) -> node
        self._conn: KafkaConnection | None = None
        self._lock = trio.Lock()  # one control request at a time

    # -- life cycle ------------------------------------------------------------------------------

    async def __aenter__(self) -> "TargetCluster":
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def start(self) -> None:
        """Connect to a bootstrap server and fetch the metadata of every topic."""
        await self.refresh(force=True)

    async def aclose(self) -> None:
        if self._conn is not None:
            conn, self._conn = self._conn, None
            with trio.CancelScope(shield=True):
                await trio.aclose_forcefully(conn.stream)

    @property
    def nodes(self) -> list[int]:
        return sorted(self.brokers)

    def address(self, node: int) -> tuple[str, int]:
        """(host, port) of a target node (as its Metadata answer advertises it)."""
        return self.brokers[node]

    @property
    def bootstrap_node(self) -> int:
        """The node of the first bootstrap server (matched by address), else the lowest node id: where a
        replayed connection starts (its "any" requests go there until one is routed elsewhere)."""
        for addr in self.bootstrap:
            for node, a in sorted(self.brokers.items()):
                if a == addr:
                    return node
        return self.nodes[0] if self.brokers else -1

    # -- control requests ------------------------------------------------------------------------

    async def _control(self) -> KafkaConnection:
        if self._conn is not None:
            return self._conn
        addresses = list(self.bootstrap) + [a for _, a in sorted(self.brokers.items()) if a not in self.bootstrap]
        last: BaseException | None = None
        for host, port in addresses:
            try:
                with trio.fail_after(self.request_timeout_s):
                    stream = await self._connect(host, port)
                    conn = KafkaConnection(stream, self.client_id)
                    try:
                        await conn.negotiate()
                    except BaseException:
                        with trio.CancelScope(shield=True):
                            await trio.aclose_forcefully(stream)
                        raise
            except CONNECTION_ERRORS as exc:
                last = exc
                log.debug("target %s:%d: %r", host, port, exc)
                continue
            self._conn = conn
            return conn
        raise RoutingError(f"no server of {', '.join(f'{h}:{p}' for h, p in addresses)} answers: {last!r}")

    def _version(self, conn: KafkaConnection, api_key: int) -> int:
        api = APIS[api_key]
        _, hi = conn.api_versions.get(api_key, (api.min_version, api.max_version))
        return min(hi, api.max_version)

    async def _request(self, api_key: int, body: dict, version: int | None = None) -> Any:
        """A control request over the control connection (reopened once if the target closed it)."""
        for attempt in range(2):
            conn = await self._control()
            v = self._version(conn, api_key) if version is None else version
            try:
                with trio.fail_after(self.request_timeout_s):
                    return v, await conn.request(api_key, v, body)
            except CONNECTION_ERRORS as exc:
                self._conn = None
                with trio.CancelScope(shield=True):
                    await trio.aclose_forcefully(conn.stream)
                if attempt:
                    raise RoutingError(f"{APIS[api_key].name} to the target failed: {exc!r}") from exc
        raise AssertionError("unreachable")

    # -- metadata --------------------------------------------------------------------------------

    async def refresh(self, *, force: bool = False) -> None:
        """Fetch Metadata (all topics) unless it is fresh; at most once per ``refresh_backoff_s`` (waiting
        out the backoff when ``force``)."""
        generation = self.generation
        async with self._lock:
            if self.generation != generation and not self._stale:
                return  # someone refreshed while we waited
            wait = self._last_refresh + self.refresh_backoff_s - trio.current_time()
            if wait > 0:
                if not force:
                    return
                await trio.sleep(wait)
            conn = await self._control()
            v = self._version(conn, ApiKey.METADATA)
            body: dict[str, Any] = {"topics": [] if v == 0 else None, "allow_auto_topic_creation": False,
                                    "include_cluster_authorized_operations": False,
                                    "include_topic_authorized_operations": False}
            _, resp = await self._request(ApiKey.METADATA, body, v)
            self._apply(resp)

    def _apply(self, resp: Any) -> None:
        brokers = {b.node_id: (b.host, b.port) for b in resp.brokers}
        leaders: dict[PartitionKey, _Partition] = {}
        names: dict[UUID, str] = {}
        for t in resp.topics:
            if t.error_code or not t.name:
                continue
            tid = t.get("topic_id")
            keys: list[TopicKey] = [t.name]
            if isinstance(tid, UUID) and tid != ZERO_UUID:
                keys.append(tid)
                names[tid] = t.name
            for p in t.partitions:
                part = _Partition(p.leader_id, p.get("leader_epoch", -1))
                for k in keys:
                    leaders[(k, p.partition_index)] = part
        self.brokers, self.leaders, self.topic_names = brokers, leaders, names
        self.generation += 1
        self._stale = False
        self._last_refresh = trio.current_time()
        self.stats.metadata_refreshes += 1
        log.debug("target metadata: %d broker(s), %d partition(s)", len(brokers), len(leaders) - len(names))

    def invalidate(self) -> None:
        """Metadata is stale: refresh before the next partition is routed (rate-limited)."""
        self._stale = True

    async def leader(self, topic: TopicKey, partition: int) -> int | None:
        """The partition's leader on the target, refreshing metadata as a client does: once when the topic is
        unknown (not again until metadata changes), and with backoff while it has no leader (up to
        ``leader_wait_s``); None if there is none."""
        if self._stale:
            await self.refresh(force=True)  # waits out the backoff: the old leader would refuse it too
        deadline = trio.current_time() + self.leader_wait_s
        while True:
            part = self.leaders.get((topic, partition))
            if part is not None and part.leader >= 0:
                return part.leader
            if part is None:
                if self._missing.get(topic) == self.generation:
                    return None  # already refreshed for it: not there (the target will say so)
                await self.refresh(force=True)
                if (topic, partition) not in self.leaders:
                    self._missing[topic] = self.generation
                    return None
                continue
            if trio.current_time() >= deadline:
                return None  # still no leader: send it anyway, the target answers
            await self.refresh(force=True)

    # -- coordinators ----------------------------------------------------------------------------

    async def coordinator(self, key_type: int, key: str) -> int | None:
        """The group (key type 0) or transaction (1) coordinator of ``key`` on the target (FindCoordinator,
        cached); None if the target names none within ``leader_wait_s``."""
        cached = self._coordinators.get((key_type, key))
        if cached is not None:
            return cached
        deadline = trio.current_time() + self.leader_wait_s
        while True:
            async with self._lock:
                cached = self._coordinators.get((key_type, key))
                if cached is not None:
                    return cached
                node, error = await self._find_coordinator(key_type, key)
            if node is not None:
                self._coordinators[(key_type, key)] = node
                return node
            if trio.current_time() >= deadline:
                log.warning("no %s coordinator for %r on the target: %s", "transaction" if key_type else "group",
                            key, _error_name(error))
                return None
            await trio.sleep(self.refresh_backoff_s)

    async def _find_coordinator(self, key_type: int, key: str) -> tuple[int | None, int]:
        self.stats.coordinator_lookups += 1
        conn = await self._control()
        v = self._version(conn, ApiKey.FIND_COORDINATOR)
        if key_type and v < 1:
            return None, ErrorCode.UNSUPPORTED_VERSION
        body = {"key": key, "key_type": key_type, "coordinator_keys": [key]}
        _, resp = await self._request(ApiKey.FIND_COORDINATOR, body, v)
        if v >= 4:
            found = next((c for c in resp.coordinators if c.key == key), None)
            if found is None:
                return None, ErrorCode.COORDINATOR_NOT_AVAILABLE
            node, error = found.node_id, found.error_code
        else:
            node, error = resp.node_id, resp.error_code
        return (node if not error and node >= 0 else None), error

    def forget_coordinator(self, key_type: int, key: str) -> None:
        self._coordinators.pop((key_type, key), None)

    # -- routing ---------------------------------------------------------------------------------

    async def route(self, api_key: int, body: Mapping[str, Any], version: int = -1, conn: Any = None) -> int | None:
        """The node a request goes to (None: any node); see :meth:`plan`."""
        return (await self.plan(api_key, version, body, conn)).node

    async def plan(self, api_key: int, version: int, body: Mapping[str, Any], conn: Any = None) -> Route:
        """Where a parsed request goes (and, for a stateless request spanning leaders, its parts per node).

        ``conn``: the caller's key of the replayed connection; a fetch or share session started on it stays
        on the node it started on.  Counts nothing: call :meth:`count` for what is sent."""
        if api_key in _PARTITIONED:
            return await self._plan_partitioned(api_key, version, body, conn)
        if api_key in _COORDINATED:
            key_type = _KEY_TYPES[_COORDINATED[api_key]]
            ids = _ids(api_key, body, version)
            if not ids:
                return Route(None)  # e.g. InitProducerId of an idempotent producer: any node
            nodes = [await self.coordinator(key_type, ids[0])]
            if len(set(ids)) > 1:
                nodes += [await self.coordinator(key_type, k) for k in dict.fromkeys(ids[1:])]
            return Route(nodes[0], unsplittable=len(set(nodes)) > 1)
        return Route(None)

    async def _plan_partitioned(self, api_key: int, version: int, body: Mapping[str, Any], conn: Any) -> Route:
        keys = list(dict.fromkeys(request_partitions(api_key, body, version)))
        leaders: dict[PartitionKey, int] = {}
        for k in keys:
            node = await self.leader(*k)
            if node is not None:
                leaders[k] = node
        nodes = list(dict.fromkeys(leaders[k] for k in keys if k in leaders))
        in_session = api_key in _SESSION_APIS and (api_key != ApiKey.FETCH or fetch_in_session(version, body))
        if in_session:
            skey = (conn, ApiKey.SHARE_FETCH if api_key == ApiKey.SHARE_ACKNOWLEDGE else api_key)
            starts = body.get("session_epoch", body.get("share_session_epoch", -1)) == 0
            node = self._sessions.get(skey) if not starts else None
            if node is None:
                node = nodes[0] if nodes else None
                if node is not None:
                    self._sessions[skey] = node
            return Route(node, unsplittable=len(nodes) > 1 or (bool(nodes) and nodes[0] != node))
        if len(nodes) <= 1:
            return Route(nodes[0] if nodes else None)
        if api_key not in _SPLITTABLE:
            return Route(nodes[0], unsplittable=True)
        return Route(nodes[0], parts=split_request(api_key, version, body, leaders))

    def _stale_partition(self, api_key: int, response: Any, node: int | None) -> bool:
        """Whether an answer shows a stale-metadata error for a partition sent to its leader (per metadata)."""
        for e in _listed(APIS[api_key].response, None, response):
            key = topic_key(e)
            for index, p in e.partitions:
                if p is not None and p.get("error_code") in _STALE_METADATA:
                    known = self.leaders.get((key, index))
                    if node is None or (known is not None and known.leader == node):
                        return True
        return False

    def count(self, api_key: int, route: Route, node: int) -> None:
        """Account for a request sent per ``route`` (``node``: where it went, for a whole one)."""
        if route.parts is not None:
            self.stats.split += 1
            for n in route.parts:
                self.stats.count(api_key, n)
        else:
            self.stats.count(api_key, node)
        if route.unsplittable:
            self.stats.unsplittable += 1

    def observe(self, api_key: int, request: Mapping[str, Any] | None, response: Any, node: int | None = None) -> None:
        """Learn from a replayed answer: topics changed or a stale leader/coordinator -> refresh.

        ``node``: where the request went (None: split per leader).  A partition answered NOT_LEADER_OR_FOLLOWER
        (or another stale-metadata error) makes metadata stale only if it went to the node metadata names its
        leader: a session fetch sent whole to one node knowingly reaches the others' partitions there."""
        if api_key in _TOPIC_CHANGES:
            self.invalidate()
            self._missing.clear()
            return
        if api_key not in ROUTED_APIS:
            return
        codes = set(_error_codes(response))
        if not codes:
            return
        if api_key in _PARTITIONED and codes & _STALE_METADATA and self._stale_partition(api_key, response, node):
            self.invalidate()
        if request is not None and codes & _STALE_COORDINATOR and api_key in _COORDINATED:
            for key in _ids(api_key, request):
                self.forget_coordinator(_KEY_TYPES[_COORDINATED[api_key]], key)


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


#: The APIs :meth:`TargetCluster.plan` routes (others go to any node), and those :meth:`TargetCluster.observe`
#: learns from.
ROUTED_APIS = _PARTITIONED | frozenset(_COORDINATED)
OBSERVED_APIS = ROUTED_APIS | _TOPIC_CHANGES
