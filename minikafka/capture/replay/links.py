"""A captured connection as replayed: its links to the target's nodes (a client has one connection per broker it
talks to), opened lazily and reopened with backoff after the target closed them, a reader per link handing the
answers over by correlation id, its in-flight limit, and KIP-368 session renewal on each link.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from typing import Any

import trio

from ...client.connection import read_frame
from ...protocol.api import APIS
from ...protocol.framing import FrameDecoder, encode_frame
from ...protocol.headers import RequestHeader, request_header_version, response_correlation_id
from ..frames import parse_response_frame
from .connector import TargetConnector
from .inflight import ReplayedRequest, Waiter
from .options import ConnKey, SaslCredentials
from .report import ReplayReport

log = logging.getLogger(__name__)


class Link:
    """A replayed connection's connection to one target node."""

    def __init__(self, node: int, stream: trio.abc.Stream) -> None:
        self.node = node
        self.stream = stream
        self.inflight: set[int] = set()  # correlation ids sent here and not answered
        self.closed: str | None = None  # why the target closed it
        self.reauth_at: float | None = None  # Trio time at which to renew the SASL session (KIP-368)


class ReplayedConnection:
    """One captured connection replayed against the target (see the module docstring).  ``address`` gives a
    node's host and port (-1: the one target); ``on_answer`` is told each replayed request answered."""

    def __init__(self, key: ConnKey, client_id: str | None, connector: TargetConnector, report: ReplayReport, *,
                 max_in_flight: int, max_reconnects: int, address: Callable[[int], tuple[str, int]],
                 on_answer: Callable[[ReplayedRequest], None] | None = None, current: int = -1) -> None:
        self.key = key
        self.name = f"{key[0]}/{key[1]}"
        self.client_id = client_id
        self.connector = connector
        self.report = report
        self.max_in_flight = max(1, max_in_flight)
        self.max_reconnects = max_reconnects
        self.address = address
        self.on_answer = on_answer
        self.current = current  # the node "any" requests go to
        self.closed: str | None = None  # why the replayed connection failed
        self.links: dict[int, Link] = {}  # target node (-1: the one target) -> its connection
        self._pending: dict[int, ReplayedRequest | Waiter] = {}  # correlation id -> what awaits its answer
        self._slots = trio.Semaphore(self.max_in_flight)
        self._corr = itertools.count(1)
        self._credentials: SaslCredentials | None = None
        self._reconnects = 0
        self._drop_reported = False
        self._nursery: trio.Nursery | None = None  # where the links' readers run

    @asynccontextmanager
    async def open(self) -> AsyncIterator[None]:
        """Run the links' readers while in the block; every link is closed on the way out."""
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                yield
                nursery.cancel_scope.cancel()
        finally:
            with trio.CancelScope(shield=True):
                for link in self.links.values():
                    await trio.aclose_forcefully(link.stream)

    # -- requests in flight ---------------------------------------------------------------------

    def next_correlation_id(self) -> int:
        return next(self._corr)

    async def acquire_slot(self) -> None:
        """Until fewer than ``max_in_flight`` requests are in flight."""
        await self._slots.acquire()

    def release_slot(self) -> None:
        self._slots.release()

    def expect(self, corr: int, request: ReplayedRequest | Waiter) -> None:
        """``request`` awaits the answer with correlation id ``corr``."""
        self._pending[corr] = request

    def forget(self, corrs: Iterable[int]) -> None:
        """No answer is awaited for these correlation ids any longer."""
        for corr in corrs:
            self._pending.pop(corr, None)

    def forget_request(self, request: ReplayedRequest) -> None:
        """No answer is awaited for ``request`` any longer (it timed out)."""
        self.forget([corr for corr, r in self._pending.items() if r is request])

    # -- links ----------------------------------------------------------------------------------

    async def link(self, node: int) -> Link | None:
        """The connection to target ``node`` (-1: the one target), opened lazily and reopened (with backoff, at
        most ``max_reconnects`` times per replayed connection) after the target closed it; None (reported) if
        that fails."""
        link = self.links.get(node)
        if link is not None and link.closed is None:
            return link
        host, port = self.address(node)
        reconnect = link is not None
        attempt = 0
        while True:
            if reconnect:
                if self._reconnects >= self.max_reconnects:
                    self.failed(f"target closed the connection {self._reconnects + 1} time(s): "
                                f"{link.closed if link is not None else ''}")
                    return None
                self._reconnects += 1
                await trio.sleep(min(1.0, 0.05 * 2 ** attempt))
            try:
                opened = await self.connector.open(self.key, self.client_id, host, port)
            except ConnectionError as exc:
                attempt += 1
                # A first connection that fails is reported at once (as without routing); a reconnect retries.
                if not reconnect or self._reconnects >= self.max_reconnects:
                    self.failed(str(exc))
                    return None
                continue
            break
        if reconnect:
            self.report.reconnects += 1
        if opened.credentials is not None:
            self._credentials = opened.credentials
        link = self.links[node] = Link(node, opened.stream)
        if opened.session is not None:
            link.reauth_at = self.connector.renewal_time(opened.session)
        assert self._nursery is not None, "links are opened inside open()"
        self._nursery.start_soon(self._reader, link)
        return link

    async def send_on(self, node: int, corr: int, frame: bytes) -> bool:
        """One frame on the link to ``node``: a send that fails (the target closed the link) goes again on a
        reopened link; False if the link cannot be reopened (reported)."""
        while True:
            link = await self.link(node)
            if link is None:
                return False
            link.inflight.add(corr)
            try:
                await link.stream.send_all(encode_frame(frame))
                return True
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
                link.inflight.discard(corr)
                if link.closed is None:
                    link.closed = f"send failed: {exc!r}"

    def failed(self, error: str) -> None:
        """The replayed connection cannot go on (reported once)."""
        if self.closed is None:
            self.closed = error
            if not self._drop_reported:  # counted once per replayed connection
                self.report.connections_failed += 1
            self._drop_reported = True
            self.report.connection_errors.append({"connection": self.name, "error": error})
            log.warning("replay of connection %s: %s", self.name, error)

    async def _reader(self, link: Link) -> None:
        decoder = FrameDecoder()  # the target's responses, of any size
        error = "target closed the connection"
        try:
            while (frame := await read_frame(link.stream, decoder)) is not None:
                corr = response_correlation_id(frame)
                link.inflight.discard(corr)
                entry = self._pending.pop(corr, None)
                if entry is None:
                    self.report.unexpected_responses += 1
                    log.debug("connection %s: response with unknown correlation id %d", self.name, corr)
                    continue
                entry.frame = frame
                entry.received_at = trio.current_time()
                entry.event.set()
                if isinstance(entry, ReplayedRequest) and self.on_answer is not None:
                    self.on_answer(entry)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError, ConnectionError) as exc:
            error = f"connection error: {exc!r}"
        link.closed = error
        lost = [e for e in (self._pending.pop(c, None) for c in link.inflight) if e is not None]
        link.inflight.clear()
        if lost and not self._drop_reported and self.closed is None:
            # Requests in flight are lost; the ones still to send go on a new connection (see link).
            self._drop_reported = True
            self.report.connections_failed += 1
            self.report.connection_errors.append({"connection": self.name, "error": error})
            log.warning("replay of connection %s: %s (%d request(s) lost)", self.name, error, len(lost))
        for entry in lost:
            entry.event.set()
        with trio.CancelScope(shield=True):
            await trio.aclose_forcefully(link.stream)

    # -- KIP-368 --------------------------------------------------------------------------------

    async def renew_sessions(self) -> bool:
        """Re-authenticate the links whose SASL session is due; False if that failed (reported)."""
        now = trio.current_time()
        for link in list(self.links.values()):
            if link.reauth_at is not None and now >= link.reauth_at and link.closed is None \
                    and self.closed is None and not await self._reauthenticate(link):
                return False
        return True

    async def _reauthenticate(self, link: Link) -> bool:
        """Re-authenticate on the link once nothing is in flight; the reader task hands the answers over."""
        assert self._credentials is not None
        for _ in range(self.max_in_flight):  # drain: no request may be in flight during the exchange
            await self._slots.acquire()
        try:
            async def request(api_key: int, version: int, body: dict) -> Any:
                corr = next(self._corr)
                api = APIS[api_key]
                header = RequestHeader.build({"request_api_key": api_key, "request_api_version": version,
                                              "correlation_id": corr, "client_id": self.client_id},
                                             request_header_version(api_key, api.is_flexible(version)))
                waiter = self._pending[corr] = Waiter()
                link.inflight.add(corr)
                await link.stream.send_all(encode_frame(header + api.request.build(body, version)))
                await waiter.event.wait()
                if waiter.frame is None:
                    raise ConnectionError("the target closed the connection during re-authentication")
                return parse_response_frame(waiter.frame, api_key, version)[1]

            session = await self.connector.reauthenticate(request, self._credentials)
        except ConnectionError as exc:
            self.failed(str(exc))
            return False
        finally:
            for _ in range(self.max_in_flight):
                self._slots.release()
        link.reauth_at = self.connector.renewal_time(session)
        return True
