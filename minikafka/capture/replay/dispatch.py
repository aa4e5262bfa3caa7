"""Routing in the replay: which of the target's nodes each request goes to.

On a cluster target (``ReplayOptions.routed``) a :class:`~.routing.TargetCluster` (its own control connection,
Metadata and FindCoordinator) routes requests as a client would: to the partition leader or the coordinator, a
request spanning several leaders split into one part per leader and the parts' answers merged back into one;
answers teach it stale leaders and coordinators.  Without routing (or when the target gives no metadata) every
request goes to the replayed connection's current node.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Awaitable, Callable

import trio

from ...protocol.api import APIS
from ...protocol.exceptions import ProtocolError
from ...protocol.headers import response_header_bytes
from ..frames import api_name, parse_request_frame, parse_response_frame, request_body_offset, rewrite_correlation_id
from .inflight import ReplayedRequest, Waiter
from .links import ReplayedConnection
from .report import ReplayReport
from .routing import OBSERVED_APIS, ROUTED_APIS, Route, RoutingError, TargetCluster, merge_responses

log = logging.getLogger(__name__)

#: Opens the cluster view's own connection to ``host:port``.
Connect = Callable[[str, int], Awaitable[trio.abc.Stream]]

_Part = tuple[int, int, bytes, Waiter]  # (node, correlation id, frame, its answer)


class Dispatcher:
    """Sends each request to the node it goes to (see the module docstring); ``address`` is the one target's."""

    def __init__(self, report: ReplayReport, *, address: tuple[str, int], bootstrap: list[tuple[str, int]],
                 routed: bool, timeout_s: float) -> None:
        self.report = report
        self.default_address = address
        self.bootstrap = bootstrap
        self.routed = routed
        self.timeout_s = timeout_s
        self.cluster: TargetCluster | None = None  # on a cluster target, once its metadata is known

    async def start(self, connect: Connect) -> None:
        """On a cluster target: its metadata, for routing; without it (the target does not answer) every request
        goes to the first bootstrap server, reported."""
        if not self.routed:
            return
        cluster = TargetCluster(self.bootstrap, connect, request_timeout_s=self.timeout_s)
        try:
            await cluster.start()
        except (RoutingError, ConnectionError) as exc:
            await cluster.aclose()
            self.report.connection_errors.append({"connection": "metadata", "error": f"routing off: {exc}"})
            log.warning("no metadata from the target (%s): every request goes to %s", exc, self.report.target)
            return
        self.cluster = cluster
        log.info("routing on %d target node(s): %s", len(cluster.nodes), cluster.brokers)

    @property
    def routing(self) -> bool:
        """Whether requests are routed (a cluster target that gave its metadata)."""
        return self.cluster is not None

    def first_node(self) -> int:
        """The node a replayed connection starts on (-1: the one target)."""
        return self.cluster.bootstrap_node if self.cluster is not None else -1

    def address(self, node: int) -> tuple[str, int]:
        """Host and port of target ``node`` (-1: the one target)."""
        if self.cluster is not None and node >= 0:
            return self.cluster.address(node)
        return self.default_address

    async def send(self, conn: ReplayedConnection, entry: ReplayedRequest, frame: bytes, corr: int,
                   waiters: trio.Nursery) -> bool:
        """Send a request (or, split per leader, its parts) where it goes, reopening a link the target closed;
        False if the connection failed (reported)."""
        rec = entry.rec
        route: Route | None = None
        if self.cluster is not None and rec.api_key in ROUTED_APIS and entry.known:
            route = await self._route(self.cluster, conn, entry, frame)
        if route is not None and route.parts is not None:
            return await self._send_parts(conn, entry, frame, corr, route, waiters)
        node = route.node if route is not None and route.node is not None else conn.current
        if rec.response is not None:
            conn.expect(corr, entry)
        entry.sent_at = trio.current_time()
        if not await conn.send_on(node, corr, frame):
            conn.forget([corr])
            return False
        if self.cluster is not None:
            self.cluster.count(rec.api_key, route or Route(None), node)
            entry.node = node
        return True

    async def _route(self, cluster: TargetCluster, conn: ReplayedConnection, entry: ReplayedRequest,
                     frame: bytes) -> Route | None:
        """Where a request goes on a cluster target (None: the connection's current node)."""
        try:
            _, body = parse_request_frame(frame)
            entry.body = body
            return await cluster.plan(entry.rec.api_key, entry.rec.api_version, body, conn=conn.key)
        except RoutingError as exc:
            log.warning("routing %s: %s", api_name(entry.rec.api_key), exc)
        except ProtocolError as exc:  # does not parse: sent to the current node
            log.debug("routing %s: %r", api_name(entry.rec.api_key), exc)
        return None

    async def _send_parts(self, conn: ReplayedConnection, entry: ReplayedRequest, frame: bytes, corr: int,
                          route: Route, waiters: trio.Nursery) -> bool:
        """A request split per leader: each part on its node's link, the answers merged (:meth:`_merge_parts`)."""
        assert self.cluster is not None and route.parts is not None
        rec = entry.rec
        offset = request_body_offset(frame)
        parts: list[_Part] = []
        for node, body in route.parts.items():
            c = conn.next_correlation_id()
            part = rewrite_correlation_id(frame[:offset], c) + APIS[rec.api_key].request.build(body, rec.api_version)
            parts.append((node, c, part, Waiter()))
        entry.sent_at = trio.current_time()
        for node, c, part, waiter in parts:
            if rec.response is not None:
                conn.expect(c, waiter)
            if not await conn.send_on(node, c, part):
                conn.forget(c2 for _, c2, _, _ in parts)
                return False
        self.cluster.count(rec.api_key, route, -1)
        if rec.response is not None:
            waiters.start_soon(self._merge_parts, conn, entry, corr, parts)
        return True

    async def _merge_parts(self, conn: ReplayedConnection, entry: ReplayedRequest, corr: int,
                           parts: list[_Part]) -> None:
        """The answers to a split request's parts merged into one, in the captured order (:func:`merge_responses`)."""
        rec = entry.rec
        with trio.move_on_after(self.timeout_s):
            for _, _, _, waiter in parts:
                await waiter.event.wait()
        conn.forget(c for _, c, _, _ in parts)
        frames = {node: w.frame for node, _, _, w in parts if w.frame is not None}
        if len(frames) == len(parts):
            try:
                bodies = {n: parse_response_frame(f, rec.api_key, rec.api_version)[1] for n, f in frames.items()}
                merged = merge_responses(rec.api_key, rec.api_version, bodies, entry.body)
                entry.frame = bytearray(response_header_bytes(corr, rec.api_key, rec.api_version)
                                        + APIS[rec.api_key].response.build(merged, rec.api_version))
            except ProtocolError as exc:  # a part does not parse: the first part's answer is compared
                log.debug("merging %s answers: %r", api_name(rec.api_key), exc)
                entry.frame = next(iter(frames.values()))
            entry.received_at = max(w.received_at for *_, w in parts)
            entry.event.set()
        elif all(w.event.is_set() for *_, w in parts):
            entry.event.set()  # a part was lost: so is the request
        # else: timed out (left to the replayer's wait for the answer)

    def observe(self, entry: ReplayedRequest) -> None:
        """Let the cluster view learn from an answer (stale leaders and coordinators, topics created)."""
        rec = entry.rec
        if self.cluster is None or rec.api_key not in OBSERVED_APIS:
            return
        assert entry.frame is not None
        try:
            _, resp = parse_response_frame(entry.frame, rec.api_key, rec.api_version)
        except ProtocolError as exc:  # compared (and reported) by the comparison
            log.debug("%s answer does not parse: %s", api_name(rec.api_key), exc)
            return
        self.cluster.observe(rec.api_key, entry.body, resp, entry.node)

    async def aclose(self) -> None:
        """Close the cluster view, its routing figures into the report."""
        if self.cluster is None:
            return
        stats = self.cluster.stats
        self.report.routed = {api: Counter(nodes) for api, nodes in stats.routed.items()}
        self.report.split, self.report.unsplittable = stats.split, stats.unsplittable
        await self.cluster.aclose()
