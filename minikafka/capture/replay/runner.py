"""The replay itself on Trio: a connection per captured one, pacing, causality, in-flight limit, timeouts,
and the target's security protocol (TLS, SASL authentication and KIP-368 re-authentication)."""

from __future__ import annotations

import itertools
import logging
import random
import ssl
import time
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol

import trio

from ...client.connection import KafkaConnection, read_frame
from ...client.security import SaslAuthenticationError, SaslSession, client_ssl_context, open_stream, sasl_authenticate
from ...protocol.api import APIS, ApiKey
from ...protocol.framing import FrameDecoder, encode_frame
from ...protocol.headers import RequestHeader, request_header_version, response_correlation_id, response_header_bytes
from ..format import CaptureRecord, ReadStats
from ..reading import read_capture
from ..frames import (
    api_name,
    parse_request_frame,
    parse_response_frame,
    request_body_offset,
    rewrite_correlation_id,
)
from .causality import Progress
from .fastpath import fetch_answer_equal, fetch_request, zero_max_wait
from .compare import _INDEX_RE, _Comparison
from .options import ConnKey, ReplayOptions, SaslCredentials
from .rename import CopyNames, copy_names, rename_client_id, rename_request_frame, unrename_response
from .report import ApiStats, ReplayReport
from .plan import (
    SASL_API_KEYS,
    ReplayPlan,
    build_plan,
    connection_principal,
    replayed_records,
)
from .routing import CONNECTION_ERRORS, OBSERVED_APIS, ROUTED_APIS, Route, RoutingError, TargetCluster, merge_responses
from .rewrite import (
    _REQUEST_KINDS,
    _batch_producers,
    _Ctx,
    _mapped_fields,
    _Mapper,
    rewrite_producer_ids,
)

__all__ = ["SASL_API_KEYS", "ReplaySync", "connection_principal", "group_connections", "replay_capture",
           "replay_records", "run_replay", "run_replay_copies"]

log = logging.getLogger(__name__)



def group_connections(records: Iterable[CaptureRecord],
                      only: set[ConnKey] | None = None) -> dict[ConnKey, list[CaptureRecord]]:
    """The records per (broker id, connection id), each list in receive order."""
    out: dict[ConnKey, list[CaptureRecord]] = defaultdict(list)
    for r in records:
        key = (r.broker_id, r.connection_id)
        if only is None or key in only:
            out[key].append(r)
    for recs in out.values():
        recs.sort(key=lambda r: r.receive_ns)
    return dict(sorted(out.items(), key=lambda kv: kv[1][0].receive_ns))


class ReplaySync(Protocol):
    """What a replay shares with replays of the other connections elsewhere (Spark tasks: :mod:`.hub`)."""

    def attach(self, progress: Progress, mapper: _Mapper) -> None:
        """Publish local progress and values (set the hooks), apply remote ones to these."""

    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Exchange with the others until cancelled (``task_status.started()`` once connected)."""

    async def flush(self) -> None:
        """Until everything published locally has been sent (called when the local connections are done)."""

    def now_ns(self) -> int:
        """The shared clock (wall-clock ns of the coordinator) for paced modes."""


@dataclass
class _Waiter:
    """A request the replay sends on its own (a re-authentication) and waits for."""

    frame: bytearray | None = None
    received_at: float = 0.0
    event: trio.Event = field(default_factory=trio.Event)


@dataclass
class _Entry:
    rid: int
    rec: CaptureRecord
    ctx: _Ctx | None  # None: sent as captured (made when the answer needs a field-by-field comparison)
    known: bool  # decodable with the protocol layer
    sent_at: float = 0.0
    frame: bytearray | None = None
    received_at: float = 0.0
    event: trio.Event = field(default_factory=trio.Event)
    body: Any = None  # the parsed request, when routed on a cluster target (for TargetCluster.observe)
    node: int | None = None  # the target node it went to (None: split per leader, or not routed)


class _Link:
    """A replayed connection's connection to one target node (a client has one per broker it talks to)."""

    def __init__(self, node: int, stream: trio.abc.Stream) -> None:
        self.node = node
        self.stream = stream
        self.inflight: set[int] = set()  # correlation ids sent here and not answered
        self.closed: str | None = None  # why the target closed it
        self.reauth_at: float | None = None  # Trio time at which to renew the SASL session (KIP-368)


class _ConnectionState:
    def __init__(self, key: ConnKey, max_in_flight: int) -> None:
        self.key = key
        self.name = f"{key[0]}/{key[1]}"
        self.pending: dict[int, _Entry | _Waiter] = {}
        self.closed: str | None = None
        self.max_in_flight = max(1, max_in_flight)
        self.slots = trio.Semaphore(self.max_in_flight)
        self.corr = itertools.count(1)
        self.unsent = 0  # requests not yet sent (or given up)
        self.client_id: str | None = None
        self.credentials: SaslCredentials | None = None
        self.links: dict[int, _Link] = {}  # target node (-1: the one target) -> its connection
        self.current = -1  # the node "any" requests go to
        self.reconnects = 0
        self.drop_reported = False
        self.nursery: trio.Nursery | None = None  # where the links' readers run


ProgressCallback = Callable[[int, int], None]
"""Told (requests settled, requests in all) each time a request is answered, times out or is given up."""


class _Replayer:
    """Replays the connections of a :class:`~.plan.ReplayPlan` (all of them, or ``local``: a Spark task's share,
    with ``sync`` bringing the others' progress and values)."""

    def __init__(self, conns: dict[ConnKey, list[CaptureRecord]], options: ReplayOptions,
                 on_progress: ProgressCallback | None = None, plan: ReplayPlan | None = None,
                 sync: ReplaySync | None = None, names: CopyNames | None = None) -> None:
        self.opt = options
        #: ``--scale``: this replayer's copy of the capture, renamed (requests) and un-renamed (responses).
        self.names = names
        self.on_progress = on_progress
        self.settled = 0
        security = options.security
        self.report = ReplayReport(options.target, options.speed, max_examples=options.max_examples,
                                   security_protocol=security.security_protocol,
                                   sasl_mechanism=security.sasl_mechanism if security.sasl else None)
        if plan is None:
            plan = build_plan(conns, options.causality, max_speed=options.speed is None)
        self.plan = plan
        self.mapper = _Mapper()
        self.mapper.shared_groups.update(plan.shared_groups)
        self.epoch_members = plan.epoch_members
        self.ssl_context: ssl.SSLContext | None = None
        if security.tls:
            self.ssl_context = client_ssl_context(security.ssl_cafile, security.ssl_certfile, security.ssl_keyfile,
                                                  security.ssl_key_password, security.ssl_check_hostname)
        index = plan.index()
        #: Connection index -> its records as replayed (the plan's order; SASL exchanges left out).
        self.conns: dict[int, list[CaptureRecord]] = {}
        for key, recs in conns.items():
            c = index.get(key)
            kept = replayed_records(recs)
            self.report.sasl_requests_skipped += len(recs) - len(kept)
            if c is None:
                continue
            if len(kept) != plan.sizes[c]:
                raise ValueError(f"connection {key[0]}/{key[1]} has {len(kept)} requests, the plan {plan.sizes[c]}")
            self.conns[c] = kept
        self.principals = plan.principals
        self.total = sum(len(v) for v in self.conns.values())
        self.progress = Progress(plan.sizes)
        self.sync = sync
        if sync is not None:
            sync.attach(self.progress, self.mapper)
        elif len(self.conns) < len(plan.keys):
            for c, n in enumerate(plan.sizes):  # connections replayed nowhere: nothing to wait for
                if c not in self.conns:
                    self.progress.advance(c, n)
        self.first_ns = options.first_ns if options.first_ns is not None else plan.first_ns
        self.introduces: dict[int, list[tuple]] = {}
        for rid, keys in plan.introduces.items():
            if plan.conn_of(rid)[0] in self.conns:
                self.introduces[rid] = keys
                for k in keys:
                    self.mapper.expect(k)
        self.t0 = 0.0
        self.cluster: TargetCluster | None = None

    async def _control_stream(self, host: str, port: int) -> trio.abc.Stream:
        """The cluster view's own connection (Metadata, FindCoordinator), secured as the replayed ones are,
        as the first connection's principal."""
        key = self.plan.keys[min(self.conns)] if self.conns else (0, "")
        state = _ConnectionState(key, 1)
        state.client_id = "minikafka-replay"
        return (await self._open(state, host, port))[0]

    async def _start_cluster(self) -> None:
        """On a cluster target (``options.routed``): its metadata, for routing; without it (the target does not
        answer) every request goes to the first bootstrap server, reported."""
        cluster = TargetCluster(self.opt.bootstrap, self._control_stream, request_timeout_s=self.opt.timeout_s)
        try:
            await cluster.start()
        except (RoutingError, ConnectionError) as exc:
            await cluster.aclose()
            self.report.connection_errors.append({"connection": "metadata", "error": f"routing off: {exc}"})
            log.warning("no metadata from the target (%s): every request goes to %s", exc, self.opt.target)
            return
        self.cluster = cluster
        log.info("routing on %d target node(s): %s", len(cluster.nodes), cluster.brokers)

    def _ctx(self, rec: CaptureRecord, body: Any) -> _Ctx:
        member = body.get("member_id")
        return _Ctx(rec.broker_id, body.get("group_id") or None, self.epoch_members, rec.api_key,
                    member if isinstance(member, str) and member else None)

    # -- per request ----------------------------------------------------------------------------

    def _raw(self, rid: int, rec: CaptureRecord, corr: int) -> bytes:
        """The captured frame with the replay's correlation id (and, at max speed, a long poll the plan answers
        at once: its MaxWaitMs set to 0)."""
        frame = bytearray(rec.request)
        frame[4:8] = corr.to_bytes(4, "big", signed=True)
        if self.opt.speed is None and self.plan.long_poll[rid]:
            zero_max_wait(frame, rec.api_version)
            self.report.long_polls_shortened += 1
        return bytes(frame)

    async def _prepare(self, rid: int, rec: CaptureRecord, corr: int) -> tuple[bytes, _Entry]:
        """The frame to send: correlation id replaced, mapped values rewritten."""
        if not self.plan.mapped[rid]:
            return self._raw(rid, rec, corr), _Entry(rid, rec, None, known=rec.api_key in APIS)
        if rec.api_key == ApiKey.FETCH:
            fast = fetch_request(bytearray(self._raw(rid, rec, corr)), rec.api_version, rec.broker_id, self.mapper)
            if fast is not None:
                if fast != rec.request:
                    self.report.api(rec.api_key).rewritten += 1
                return bytes(fast), _Entry(rid, rec, None, known=True)
        try:
            if rec.api_key not in APIS:
                raise KeyError(rec.api_key)
            hdr, body = parse_request_frame(rec.request)
        except Exception:
            entry = _Entry(rid, rec, _Ctx(rec.broker_id, None), known=False)
            return self._raw(rid, rec, corr), entry
        ctx = self._ctx(rec, body)
        entry = _Entry(rid, rec, ctx, known=True)
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
        own = self.introduces.get(rid)
        await self.mapper.wait([k for k in keys if k not in own] if own else keys, self.opt.timeout_s)
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
        if not changed:
            return self._raw(rid, rec, corr), entry
        self.report.api(rec.api_key).rewritten += 1
        if self.opt.speed is None and self.plan.long_poll[rid]:
            body["max_wait_ms"] = 0
            self.report.long_polls_shortened += 1
        new_body = APIS[rec.api_key].request.build(body, rec.api_version)
        return rewrite_correlation_id(bytes(rec.request[:hdr.body_offset]) + new_body, corr), entry

    def _rename(self, frame: bytes) -> bytes:
        """``--scale``: the request frame of this replayer's copy (names renamed, :mod:`.rename`)."""
        assert self.names is not None
        try:
            return rename_request_frame(frame, self.names)
        except Exception:  # noqa: BLE001 - an api or version minikafka does not know: its client id only
            return rename_client_id(frame, self.names)

    def _finish(self, state: _ConnectionState, entry: _Entry, outcome: str) -> None:
        """Account for one request: ``outcome`` is "response", "timeout", "lost" or "none" (acks=0)."""
        rec = entry.rec
        st = self.report.api(rec.api_key)
        try:
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
                if self.cluster is not None and rec.api_key in OBSERVED_APIS:
                    self._observe(entry)
                self._compare(state, entry, st)
        finally:
            self.mapper.settle(self.introduces.get(entry.rid, ()))
            self.progress.settle(*self.plan.conn_of(entry.rid))
            self._progress(1)

    def _observe(self, entry: _Entry) -> None:
        """Let the cluster view learn from an answer (stale leaders and coordinators, topics created)."""
        assert self.cluster is not None and entry.frame is not None
        rec = entry.rec
        try:
            _, resp = parse_response_frame(entry.frame, rec.api_key, rec.api_version)
        except Exception:  # noqa: BLE001 - compared (and reported) below
            return
        self.cluster.observe(rec.api_key, entry.body, resp, entry.node)

    def _progress(self, settled: int) -> None:
        self.settled += settled
        if self.on_progress is not None:
            self.on_progress(self.settled, self.total)

    def _compare(self, state: _ConnectionState, entry: _Entry, st: ApiStats) -> None:
        rec, frame = entry.rec, entry.frame
        assert frame is not None
        if rec.response is not None and len(frame) == len(rec.response) and frame[4:] == rec.response[4:]:
            st.equal += 1  # byte for byte (after the correlation id): nothing to compare, values map to themselves
            for key in self.introduces.get(entry.rid, ()):
                self.mapper.learn(key, key[-1])
            return
        if rec.api_key == ApiKey.FETCH and rec.response is not None and self.names is None and fetch_answer_equal(
                rec.response, frame, rec.api_version, rec.broker_id, self.mapper, st.expected_differences):
            st.equal += 1  # equal once its session id and topic ids are mapped
            return
        ctx = entry.ctx
        if ctx is None:
            try:
                ctx = self._ctx(rec, parse_request_frame(rec.request)[1]) if entry.known else None
            except Exception:  # noqa: BLE001 - compared as raw bytes
                ctx = None
            if ctx is None:
                entry.known = False
                ctx = _Ctx(rec.broker_id, None)
        cmp = _Comparison(self.mapper, ctx, st)
        if rec.response is None:
            cmp.diff("<response>", None, frame[4:])
        elif not entry.known:
            if bytes(rec.response[4:]) != bytes(frame[4:]):
                cmp.diff("<raw>", rec.response[4:], frame[4:])
        else:
            try:
                _, cap = parse_response_frame(rec.response, rec.api_key, rec.api_version)
            except Exception as exc:
                log.debug("captured %s response does not parse: %s", st.name, exc)
                if bytes(rec.response[4:]) != bytes(frame[4:]):
                    cmp.diff("<raw>", rec.response[4:], frame[4:])
                cap = None
            if cap is not None:
                try:
                    _, rep = parse_response_frame(frame, rec.api_key, rec.api_version)
                except Exception as exc:
                    cmp.diff("<body>", "parses", f"does not parse: {exc}")
                else:
                    if self.names is not None:
                        unrename_response(rec.api_key, rep, self.names)
                    cmp.compare_body(cap, rep)
        if cmp.diffs:
            st.differing += 1
            for path, c, r, expected in cmp.diffs:
                st.differing_fields[_INDEX_RE.sub("[]", path)] += 1
                if len(st.examples) < self.opt.max_examples:
                    ex = {"connection": state.name, "correlation_id": rec.correlation_id,
                          "path": path, "captured": c, "replayed": r}
                    if expected is not None:
                        ex["expected"] = expected  # the captured value mapped (e.g. producer id 1000 -> 1001)
                    st.examples.append(ex)
        else:
            st.equal += 1

    # -- per connection ---------------------------------------------------------------------------

    async def _pace(self, rec: CaptureRecord) -> None:
        if self.opt.speed is not None:
            await trio.sleep_until(self.t0 + (rec.receive_ns - self.first_ns) / 1e9 / self.opt.speed)

    async def _wait_dependencies(self, state: _ConnectionState, rid: int) -> None:
        """Until what the request depends on is done (then the captured gap after a request only sent elsewhere);
        at most the request timeout: a dependency that never settles (a Spark task lost) is reported and skipped."""
        deps = self.plan.deps[rid]
        if not deps:
            return
        waited_sent = False
        with trio.move_on_after(self.opt.timeout_s) as scope:
            waited_sent = await self.progress.wait(deps)
        if scope.cancelled_caught:
            self.report.dependency_timeouts += 1
            log.warning("replay of connection %s: request %d still waits for %s after %.0f s; sent anyway",
                        state.name, rid, self.progress.blocked_on(deps), self.opt.timeout_s)
        elif waited_sent:  # let the target read the request sent elsewhere first
            await trio.sleep(self.plan.sent_gap_us.get(rid, 0) / 1e6)

    def _not_sent(self, state: _ConnectionState, recs: list[tuple[int, CaptureRecord]]) -> None:
        state.unsent -= len(recs)
        for rid, rec in recs:
            self.report.api(rec.api_key).not_sent += 1
            self.mapper.settle(self.introduces.get(rid, ()))
            self.progress.settle(*self.plan.conn_of(rid))
        self._progress(len(recs))

    def _conn_failed(self, state: _ConnectionState, error: str) -> None:
        if state.closed is None:
            state.closed = error
            if not state.drop_reported:  # counted once per replayed connection
                self.report.connections_failed += 1
            state.drop_reported = True
            self.report.connection_errors.append({"connection": state.name, "error": error})
            log.warning("replay of connection %s: %s", state.name, error)

    async def _reader(self, state: _ConnectionState, link: _Link) -> None:
        decoder = FrameDecoder()  # the target's responses, of any size
        error = "target closed the connection"
        try:
            while (frame := await read_frame(link.stream, decoder)) is not None:
                corr = response_correlation_id(frame)
                link.inflight.discard(corr)
                entry = state.pending.pop(corr, None)
                if entry is None:
                    self.report.unexpected_responses += 1
                    log.debug("connection %s: response with unknown correlation id %d", state.name, corr)
                    continue
                entry.frame = frame
                entry.received_at = trio.current_time()
                entry.event.set()
                if type(entry) is _Entry and self.cluster is None and entry.rid not in self.introduces:
                    # What waits for this answer goes on now; the comparison follows (it teaches no value).
                    self.progress.settle(*self.plan.conn_of(entry.rid))
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError, ConnectionError) as exc:
            error = f"connection error: {exc!r}"
        link.closed = error
        lost = [e for e in (state.pending.pop(c, None) for c in link.inflight) if e is not None]
        link.inflight.clear()
        if lost and not state.drop_reported and state.closed is None:
            # Requests in flight are lost; the ones still to send go on a new connection (see _link).
            state.drop_reported = True
            self.report.connections_failed += 1
            self.report.connection_errors.append({"connection": state.name, "error": error})
            log.warning("replay of connection %s: %s (%d request(s) lost)", state.name, error, len(lost))
        for entry in lost:
            entry.event.set()
        with trio.CancelScope(shield=True):
            await trio.aclose_forcefully(link.stream)

    async def _await_response(self, state: _ConnectionState, entry: _Entry) -> None:
        try:
            with trio.move_on_after(self.opt.timeout_s):
                await entry.event.wait()
            if entry.frame is not None:
                self._finish(state, entry, "response")
            elif entry.event.is_set():
                self._finish(state, entry, "lost")
            else:
                for corr, e in list(state.pending.items()):
                    if e is entry:
                        del state.pending[corr]
                self._finish(state, entry, "timeout")
        finally:
            state.slots.release()

    async def _open(self, state: _ConnectionState, host: str, port: int) -> tuple[trio.abc.Stream, SaslSession | None]:
        """A connection to ``host:port`` in the target's security protocol: TLS handshake, then SASL
        authentication as the captured connection's principal.  Raises ConnectionError (reported)."""
        sec = self.opt.security
        credentials: SaslCredentials | None = None
        if sec.sasl:
            principal = self.principals.get(state.key, "")
            credentials = sec.credentials_for(principal)
            if credentials is None:
                raise ConnectionError(f"no SASL credentials for the captured principal {principal or '(unknown)'} "
                                      "(give a credentials file entry or --sasl-username/--sasl-password)")
        try:
            with trio.fail_after(self.opt.connect_timeout_s):
                stream = await open_stream(host, port, self.ssl_context)
        except CONNECTION_ERRORS as exc:
            cause = exc.__cause__ if isinstance(exc, trio.BrokenResourceError) and exc.__cause__ else exc
            raise ConnectionError(f"connect failed: {cause!r}") from exc
        if credentials is None:
            return stream, None
        state.credentials = credentials
        try:
            with trio.fail_after(self.opt.timeout_s):
                session = await sasl_authenticate(KafkaConnection(stream, state.client_id).request,
                                                  sec.sasl_mechanism or "", credentials.username, credentials.password)
        except (*CONNECTION_ERRORS, SaslAuthenticationError) as exc:
            if isinstance(exc, SaslAuthenticationError):
                self.report.authentication_failures += 1
            with trio.CancelScope(shield=True):
                await trio.aclose_forcefully(stream)
            raise ConnectionError(f"SASL authentication as {credentials.username} failed: {exc}") from exc
        self.report.authenticated[(self.principals.get(state.key, ""), credentials.username)] += 1
        return stream, session

    async def _link(self, state: _ConnectionState, node: int) -> _Link | None:
        """The connection to target ``node`` (-1: the one target), opened lazily and reopened (with backoff, at
        most ``max_reconnects`` times per replayed connection) after the target closed it; None (reported) if
        that fails."""
        link = state.links.get(node)
        if link is not None and link.closed is None:
            return link
        if self.cluster is not None and node >= 0:
            host, port = self.cluster.address(node)
        else:
            host, port = self.opt.host, self.opt.port
        reconnect = link is not None
        attempt = 0
        while True:
            if reconnect:
                if state.reconnects >= self.opt.max_reconnects:
                    self._conn_failed(state, f"target closed the connection {state.reconnects + 1} time(s): "
                                             f"{link.closed if link is not None else ''}")
                    return None
                state.reconnects += 1
                await trio.sleep(min(1.0, 0.05 * 2 ** attempt))
            try:
                stream, session = await self._open(state, host, port)
            except ConnectionError as exc:
                attempt += 1
                # A first connection that fails is reported at once (as without routing); a reconnect retries.
                if not reconnect or state.reconnects >= self.opt.max_reconnects:
                    self._conn_failed(state, str(exc))
                    return None
                continue
            break
        if reconnect:
            self.report.reconnects += 1
        link = state.links[node] = _Link(node, stream)
        if session is not None:
            self._schedule_reauthentication(link, session)
        assert state.nursery is not None
        state.nursery.start_soon(self._reader, state, link)
        return link

    @staticmethod
    def _schedule_reauthentication(link: _Link, session: SaslSession) -> None:
        """KIP-368: renew the session between 85% and 95% of its lifetime, as Kafka's clients do."""
        if session.session_lifetime_ms > 0:
            link.reauth_at = trio.current_time() + session.session_lifetime_ms / 1000 * (0.85 + 0.1 * random.random())
        else:
            link.reauth_at = None

    async def _reauthenticate(self, state: _ConnectionState, link: _Link) -> bool:
        """Re-authenticate on the connection (a new SaslHandshake + SaslAuthenticate exchange, KIP-368) once
        nothing is in flight; the reader task hands the answers over.  False if it failed (reported)."""
        assert state.credentials is not None
        for _ in range(state.max_in_flight):  # drain: no request may be in flight during the exchange
            await state.slots.acquire()
        try:
            async def request(api_key: int, version: int, body: dict) -> Any:
                corr = next(state.corr)
                api = APIS[api_key]
                header = RequestHeader.build({"request_api_key": api_key, "request_api_version": version,
                                              "correlation_id": corr, "client_id": state.client_id},
                                             request_header_version(api_key, api.is_flexible(version)))
                waiter = state.pending[corr] = _Waiter()
                link.inflight.add(corr)
                await link.stream.send_all(encode_frame(header + api.request.build(body, version)))
                await waiter.event.wait()
                if waiter.frame is None:
                    raise ConnectionError("the target closed the connection during re-authentication")
                return parse_response_frame(waiter.frame, api_key, version)[1]

            with trio.fail_after(self.opt.timeout_s):
                session = await sasl_authenticate(request, self.opt.security.sasl_mechanism or "",
                                                  state.credentials.username, state.credentials.password)
        except (*CONNECTION_ERRORS, SaslAuthenticationError) as exc:
            if isinstance(exc, SaslAuthenticationError):
                self.report.authentication_failures += 1
            self._conn_failed(state, f"SASL re-authentication as {state.credentials.username} failed: {exc}")
            return False
        finally:
            for _ in range(state.max_in_flight):
                state.slots.release()
        self.report.reauthentications += 1
        self._schedule_reauthentication(link, session)
        return True

    async def _run_connection(self, key: ConnKey, recs: list[tuple[int, CaptureRecord]]) -> None:
        state = _ConnectionState(key, self.opt.max_in_flight)
        state.unsent = len(recs)
        state.client_id = recs[0][1].client_id
        if self.cluster is not None:
            state.current = self.cluster.bootstrap_node
        await self._pace(recs[0][1])
        try:
            await self._replay_connection(state, recs)
        finally:
            with trio.CancelScope(shield=True):
                for link in state.links.values():
                    await trio.aclose_forcefully(link.stream)

    async def _replay_connection(self, state: _ConnectionState, recs: list[tuple[int, CaptureRecord]]) -> None:
        progress, deps, cluster = self.progress, self.plan.deps, self.cluster
        async with trio.open_nursery() as outer:
            state.nursery = outer
            if await self._link(state, state.current) is None:
                self._not_sent(state, recs)
                return
            async with trio.open_nursery() as waiters:
                for i, (rid, rec) in enumerate(recs):
                    await self._pace(rec)
                    await self._wait_dependencies(state, rid)
                    if not await self._renew_sessions(state):
                        self._not_sent(state, recs[i:])
                        break
                    await state.slots.acquire()
                    if state.closed is not None:
                        state.slots.release()
                        self._not_sent(state, recs[i:])
                        break
                    corr = next(state.corr)
                    frame, entry = await self._prepare(rid, rec, corr)
                    if self.names is not None:
                        frame = self._rename(frame)
                    route: Route | None = None
                    if cluster is not None and rec.api_key in ROUTED_APIS and entry.known:
                        route = await self._route(state, entry, frame)
                    if not await self._send(state, entry, frame, corr, route, waiters):
                        state.slots.release()
                        self._not_sent(state, recs[i:])
                        break
                    state.unsent -= 1
                    progress.mark_sent(*self.plan.conn_of(rid))
                    self.report.api(rec.api_key).sent += 1
                    if rec.response is None:
                        state.slots.release()
                        self._finish(state, entry, "none")
                    else:
                        waiters.start_soon(self._await_response, state, entry)
            outer.cancel_scope.cancel()

    async def _renew_sessions(self, state: _ConnectionState) -> bool:
        """KIP-368: re-authenticate the links whose SASL session is due; False if that failed (reported)."""
        now = trio.current_time()
        for link in list(state.links.values()):
            if link.reauth_at is not None and now >= link.reauth_at and link.closed is None \
                    and state.closed is None and not await self._reauthenticate(state, link):
                return False
        return True

    async def _route(self, state: _ConnectionState, entry: _Entry, frame: bytes) -> Route | None:
        """Where a request goes on a cluster target (None: the connection's current node)."""
        assert self.cluster is not None
        try:
            _, body = parse_request_frame(frame)
            entry.body = body
            return await self.cluster.plan(entry.rec.api_key, entry.rec.api_version, body, conn=state.key)
        except RoutingError as exc:
            log.warning("routing %s: %s", api_name(entry.rec.api_key), exc)
        except Exception as exc:  # noqa: BLE001 - does not parse: sent to the current node
            log.debug("routing %s: %r", api_name(entry.rec.api_key), exc)
        return None

    async def _send(self, state: _ConnectionState, entry: _Entry, frame: bytes, corr: int, route: Route | None,
                    waiters: trio.Nursery) -> bool:
        """Send a request (or, split per leader, its parts) on the links of its route, reopening a link the
        target closed; False if the connection failed (reported)."""
        rec = entry.rec
        if route is not None and route.parts is not None:
            assert self.cluster is not None
            offset = request_body_offset(frame)
            parts: list[tuple[int, int, bytes, _Waiter]] = []
            for node, body in route.parts.items():
                c = next(state.corr)
                part = rewrite_correlation_id(frame[:offset], c) + APIS[rec.api_key].request.build(body, rec.api_version)
                parts.append((node, c, part, _Waiter()))
            entry.sent_at = trio.current_time()
            for node, c, part, waiter in parts:
                if rec.response is not None:
                    state.pending[c] = waiter
                if not await self._send_on(state, node, c, part):
                    for _, c2, _, _ in parts:
                        state.pending.pop(c2, None)
                    return False
            self.cluster.count(rec.api_key, route, -1)
            if rec.response is not None:
                waiters.start_soon(self._merge_parts, state, entry, corr, parts)
            return True
        node = route.node if route is not None and route.node is not None else state.current
        if rec.response is not None:
            state.pending[corr] = entry
        entry.sent_at = trio.current_time()
        if not await self._send_on(state, node, corr, frame):
            state.pending.pop(corr, None)
            return False
        if self.cluster is not None:
            self.cluster.count(rec.api_key, route or Route(None), node)
            entry.node = node
        return True

    async def _send_on(self, state: _ConnectionState, node: int, corr: int, frame: bytes) -> bool:
        """One frame on the link to ``node``: a send that fails (the target closed the link) goes again on a
        reopened link; False if the link cannot be reopened (reported)."""
        while True:
            link = await self._link(state, node)
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

    async def _merge_parts(self, state: _ConnectionState, entry: _Entry, corr: int,
                           parts: list[tuple[int, int, bytes, _Waiter]]) -> None:
        """The answers to a split request's parts merged into one, in the captured order (:func:`merge_responses`)."""
        rec = entry.rec
        with trio.move_on_after(self.opt.timeout_s):
            for _, _, _, waiter in parts:
                await waiter.event.wait()
        for _, c, _, _ in parts:
            state.pending.pop(c, None)
        frames = {node: w.frame for node, _, _, w in parts if w.frame is not None}
        if len(frames) == len(parts):
            try:
                bodies = {n: parse_response_frame(f, rec.api_key, rec.api_version)[1] for n, f in frames.items()}
                merged = merge_responses(rec.api_key, rec.api_version, bodies, entry.body)
                entry.frame = bytearray(response_header_bytes(corr, rec.api_key, rec.api_version)
                                        + APIS[rec.api_key].response.build(merged, rec.api_version))
            except Exception as exc:  # noqa: BLE001 - a part does not parse: the first part's answer is compared
                log.debug("merging %s answers: %r", api_name(rec.api_key), exc)
                entry.frame = next(iter(frames.values()))
            entry.received_at = max(w.received_at for *_, w in parts)
            entry.event.set()
        elif all(w.event.is_set() for *_, w in parts):
            entry.event.set()  # a part was lost: so is the request
        # else: timed out (left to _await_response)

    async def run(self) -> ReplayReport:
        self.report.connections = len(self.conns)
        self.report.cross_dependencies = self.plan.cross_dependencies
        if self.opt.routed:
            await self._start_cluster()
        async with trio.open_nursery() as outer:
            if self.sync is not None:
                await outer.start(self.sync.run)
            now = trio.current_time()
            base = self.opt.base_time_ns
            clock_ns = self.sync.now_ns() if self.sync is not None else time.time_ns()
            self.t0 = now if base is None else now + (base - clock_ns) / 1e9
            started = time.perf_counter()
            async with trio.open_nursery() as nursery:
                for c, recs in self.conns.items():
                    start = self.plan.starts[c]
                    nursery.start_soon(self._run_connection, self.plan.keys[c],
                                       [(start + i, r) for i, r in enumerate(recs)])
            if self.sync is not None:
                await self.sync.flush()
            outer.cancel_scope.cancel()
        # A base time in the future (Spark tasks start early) is waiting, not replaying.
        self.report.duration_s = time.perf_counter() - started - max(0.0, self.t0 - now)
        self.report.mappings = self.mapper.summary()
        if self.cluster is not None:
            stats = self.cluster.stats
            self.report.routed = {api: Counter(nodes) for api, nodes in stats.routed.items()}
            self.report.split, self.report.unsplittable = stats.split, stats.unsplittable
            await self.cluster.aclose()
        return self.report


async def replay_records(conns: dict[ConnKey, list[CaptureRecord]], options: ReplayOptions,
                         on_progress: ProgressCallback | None = None, plan: ReplayPlan | None = None,
                         sync: ReplaySync | None = None) -> ReplayReport:
    """Replay connections (as :func:`group_connections` returns them) against ``options``' target.

    With a ``plan`` (of a whole capture) ``conns`` may be a part of it: the others are replayed elsewhere and
    ``sync`` brings their progress and values (without ``sync`` they count as settled)."""
    conns = {k: v for k, v in conns.items() if v}
    if options.scale > 1:
        return await _replay_copies(conns, options, on_progress, plan, sync)
    replayer = _Replayer(conns, options, on_progress, plan, sync)
    log.info("replaying %d request(s) on %d connection(s) to %s", sum(len(v) for v in conns.values()),
             len(replayer.conns), options.target)
    return await replayer.run()


async def _replay_copies(conns: dict[ConnKey, list[CaptureRecord]], options: ReplayOptions,
                         on_progress: ProgressCallback | None, plan: ReplayPlan | None,
                         sync: ReplaySync | None, copies: Iterable[int] | None = None) -> ReplayReport:
    """``--scale K``: K replayers at once (or those of ``copies``: a Spark task's share), one per copy of the
    capture under its own names (:mod:`.rename`); each copy keeps the capture's causality within itself (copies
    do not wait on each other)."""
    if sync is not None:
        raise ValueError("--scale replays whole copies: it does not take a Spark task's share of connections")
    k = options.scale
    mine = sorted(set(range(k) if copies is None else copies))
    if plan is None:
        plan = build_plan(conns, options.causality, max_speed=options.speed is None)
    settled = [0] * len(mine)
    totals = [0] * len(mine)

    def progress_of(i: int) -> ProgressCallback | None:
        if on_progress is None:
            return None

        def report(done: int, total: int) -> None:
            settled[i], totals[i] = done, total
            on_progress(sum(settled), sum(totals) if all(totals) else total * len(mine))
        return report

    replayers = [_Replayer(conns, options, progress_of(j), plan, None, copy_names(i, k)) for j, i in enumerate(mine)]
    if not replayers:
        return ReplayReport(options.target, options.speed, tasks=0)
    log.info("replaying %d of %d copies of %d request(s) on %d connection(s) to %s", len(mine), k,
             sum(len(v) for v in conns.values()), len(replayers[0].conns), options.target)
    reports: list[ReplayReport] = []

    async def run(r: _Replayer) -> None:
        reports.append(await r.run())

    async with trio.open_nursery() as nursery:
        for r in replayers:
            nursery.start_soon(run, r)
    out = ReplayReport.combine(reports)
    out.tasks, out.copy_ids = 1, set(mine)
    out.cross_dependencies = plan.cross_dependencies
    return out


def run_replay_copies(paths: Iterable[str | Path], options: ReplayOptions, copies: Iterable[int]) -> ReplayReport:
    """``--scale``: replay the copies ``copies`` (of ``options.scale``) of a whole capture, each under its own
    names, on a new Trio loop (a Spark task's share of the copies: the reports of all shares merge into one)."""
    paths = list(paths)

    async def main() -> ReplayReport:
        conns = {k: v for k, v in group_connections(read_capture(paths)).items() if v}
        return await _replay_copies(conns, options, None, None, None, list(copies))

    return trio.run(main)


async def replay_capture(paths: Iterable[str | Path], options: ReplayOptions,
                         connections: set[ConnKey] | None = None,
                         stats: ReadStats | None = None, on_progress: ProgressCallback | None = None) -> ReplayReport:
    """Read a capture (files or directories) and replay it; ``connections`` limits it to those."""
    conns = group_connections(read_capture(paths, stats), connections)
    return await replay_records(conns, options, on_progress)


def run_replay(paths: Iterable[str | Path], options: ReplayOptions,
               connections: set[ConnKey] | None = None, on_progress: ProgressCallback | None = None) -> ReplayReport:
    """:func:`replay_capture` on a new Trio loop (from synchronous code)."""
    paths = list(paths)
    return trio.run(replay_capture, paths, options, connections, None, on_progress)
