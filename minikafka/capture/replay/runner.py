"""The replay itself on Trio: a connection per captured one, pacing, causality, in-flight limit, timeouts,
and the target's security protocol (TLS, SASL authentication and KIP-368 re-authentication)."""

from __future__ import annotations

import itertools
import logging
import random
import ssl
import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import trio

from ...client.connection import KafkaConnection, read_frame
from ...client.security import SaslAuthenticationError, SaslSession, client_ssl_context, open_stream, sasl_authenticate
from ...protocol.api import APIS, ApiKey
from ...protocol.framing import FrameDecoder, encode_frame
from ...protocol.headers import RequestHeader, request_header_version, response_correlation_id
from ..format import CaptureRecord, ReadStats
from ..reading import read_capture
from ..frames import (
    api_name,
    parse_request_frame,
    parse_response_frame,
    rewrite_correlation_id,
)
from .causality import _Order
from .compare import _INDEX_RE, _Comparison
from .options import ConnKey, ReplayOptions, SaslCredentials
from .report import ApiStats, ReplayReport
from .rewrite import (
    _REQUEST_KINDS,
    _batch_producers,
    _Ctx,
    _mapped_fields,
    _Mapper,
    rewrite_producer_ids,
)

log = logging.getLogger(__name__)

#: Requests never re-sent as captured: their tokens are single-use (a replayed connection authenticates afresh).
SASL_API_KEYS = frozenset({int(ApiKey.SASL_HANDSHAKE), int(ApiKey.SASL_AUTHENTICATE)})
#: ConsumerGroupHeartbeat and ShareGroupHeartbeat: members with member epochs (KIP-848, KIP-932).
_HEARTBEAT_KEYS = frozenset({68, 76})
#: Errors that end a replayed connection while it is being set up.
_CONNECT_ERRORS = (OSError, ConnectionError, trio.TooSlowError, trio.BrokenResourceError, trio.ClosedResourceError,
                   ssl.SSLError)


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


def connection_principal(recs: Iterable[CaptureRecord]) -> str:
    """The principal a captured connection ended with: that of its latest request, i.e. after the client
    authenticated (an ApiVersions sent before SASL authentication runs as ``User:ANONYMOUS``)."""
    latest: CaptureRecord | None = None
    for r in recs:
        if latest is None or r.receive_ns >= latest.receive_ns:
            latest = r
    return latest.principal if latest is not None else ""


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
    ctx: _Ctx
    known: bool  # decodable with the protocol layer
    sent_at: float = 0.0
    frame: bytearray | None = None
    received_at: float = 0.0
    event: trio.Event = field(default_factory=trio.Event)


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
        self.reauth_at: float | None = None  # Trio time at which to renew the SASL session (KIP-368)


ProgressCallback = Callable[[int, int], None]
"""Told (requests settled, requests in all) each time a request is answered, times out or is given up."""


class _Replayer:
    def __init__(self, conns: dict[ConnKey, list[CaptureRecord]], options: ReplayOptions,
                 on_progress: ProgressCallback | None = None) -> None:
        self.opt = options
        self.on_progress = on_progress
        self.settled = 0
        security = options.security
        self.report = ReplayReport(options.target, options.speed, max_examples=options.max_examples,
                                   security_protocol=security.security_protocol,
                                   sasl_mechanism=security.sasl_mechanism if security.sasl else None)
        self.mapper = _Mapper()
        self.epoch_members: set[str] = set()  # filled by _prescan
        self.ssl_context: ssl.SSLContext | None = None
        if security.tls:
            self.ssl_context = client_ssl_context(security.ssl_cafile, security.ssl_certfile, security.ssl_keyfile,
                                                  security.ssl_key_password, security.ssl_check_hostname)
        self.conns: dict[ConnKey, list[tuple[int, CaptureRecord]]] = {}
        self.principals: dict[ConnKey, str] = {}
        rid = itertools.count()
        for key, recs in conns.items():
            kept = [r for r in recs if r.api_key not in SASL_API_KEYS]
            self.report.sasl_requests_skipped += len(recs) - len(kept)
            if kept:
                self.conns[key] = [(next(rid), r) for r in kept]
                self.principals[key] = connection_principal(recs)
        all_recs = [ir for recs in self.conns.values() for ir in recs]
        self.total = len(all_recs)
        if options.causality == "global":
            order = _Order(all_recs)
            self.orders = {key: order for key in self.conns}
        elif options.causality == "connection":
            self.orders = {key: _Order(recs) for key, recs in self.conns.items()}
        else:
            raise ValueError(f"causality must be 'global' or 'connection', not {options.causality!r}")
        self.first_ns = options.first_ns if options.first_ns is not None else min(
            (r.receive_ns for _, r in all_recs), default=0)
        self.introduces: dict[int, list[tuple]] = self._prescan(all_recs)
        self.t0 = 0.0

    # -- set up ---------------------------------------------------------------------------------

    def _ctx(self, rec: CaptureRecord, body: Any) -> _Ctx:
        member = body.get("member_id")
        return _Ctx(rec.broker_id, body.get("group_id") or None, self.epoch_members, rec.api_key,
                    member if isinstance(member, str) and member else None)

    def _scan_members(self, recs: list[tuple[int, CaptureRecord]]) -> None:
        """The members that heartbeat with member epochs (ConsumerGroupHeartbeat, ShareGroupHeartbeat: their
        generation fields are member epochs) and the groups several of them heartbeated to."""
        by_group: dict[str, set[str]] = defaultdict(set)
        for _rid, r in recs:
            if r.api_key not in _HEARTBEAT_KEYS or r.api_key not in APIS:
                continue
            try:
                _, body = parse_request_frame(r.request)
                members = {body.get("member_id")}
                if r.response is not None:
                    members.add(parse_response_frame(r.response, r.api_key, r.api_version)[1].get("member_id"))
            except Exception:  # noqa: BLE001, S112 - replayed as is
                continue
            for m in members:
                if isinstance(m, str) and m:
                    self.epoch_members.add(m)
                    by_group[body.get("group_id")].add(m)
        self.mapper.shared_groups.update(g for g, ms in by_group.items() if len(ms) > 1)

    def _prescan(self, recs: list[tuple[int, CaptureRecord]]) -> dict[int, list[tuple]]:
        """Which record's response first shows each mapped value (requests that need it wait for it).

        A member id a client made (ConsumerGroupHeartbeat v1, ShareGroupHeartbeat) is first seen in the
        request of the heartbeat that joins with it (member epoch 0): that heartbeat introduces it, so the
        member's other requests (ShareFetch, OffsetCommit...) wait for its answer."""
        self._scan_members(recs)
        seen: set[tuple] = set()
        out: dict[int, list[tuple]] = {}
        for rid, r in sorted(recs, key=lambda ir: ir[1].receive_ns):
            if r.api_key not in APIS or r.api_key == ApiKey.PRODUCE:
                continue
            try:
                _, body = parse_request_frame(r.request)
                ctx = self._ctx(r, body)
                keys = [k for _, _, k in _mapped_fields(body, ctx, _REQUEST_KINDS)]
                if r.api_key in _HEARTBEAT_KEYS and body.get("member_epoch") == 0 and ctx.member:
                    joined = ("member", ctx.member)
                    if joined not in seen:
                        seen.add(joined)
                        self.mapper.expect(joined)
                        out.setdefault(rid, []).append(joined)
                seen.update(keys)
                if r.response is None:
                    continue
                _, resp = parse_response_frame(r.response, r.api_key, r.api_version)
            except Exception as exc:  # replayed as is; compared as raw bytes if it does not parse
                log.debug("capture record %s v%d does not parse: %s", api_name(r.api_key), r.api_version, exc)
                continue
            for _, _, k in _mapped_fields(resp, ctx, _REQUEST_KINDS):
                if k not in seen:
                    seen.add(k)
                    self.mapper.expect(k)
                    out.setdefault(rid, []).append(k)
        return out

    # -- per request ----------------------------------------------------------------------------

    async def _prepare(self, rid: int, rec: CaptureRecord, corr: int) -> tuple[bytes, _Entry]:
        """The frame to send: correlation id replaced, mapped values rewritten."""
        try:
            if rec.api_key not in APIS:
                raise KeyError(rec.api_key)
            hdr, body = parse_request_frame(rec.request)
        except Exception:
            entry = _Entry(rid, rec, _Ctx(rec.broker_id, None), known=False)
            return rewrite_correlation_id(rec.request, corr), entry
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
            return rewrite_correlation_id(rec.request, corr), entry
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
            return rewrite_correlation_id(rec.request, corr), entry
        self.report.api(rec.api_key).rewritten += 1
        new_body = APIS[rec.api_key].request.build(body, rec.api_version)
        return rewrite_correlation_id(bytes(rec.request[:hdr.body_offset]) + new_body, corr), entry

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
                self._compare(state, entry, st)
        finally:
            self.mapper.settle(self.introduces.get(entry.rid, ()))
            self.orders[state.key].done(entry.rid)
            self._progress(1)

    def _progress(self, settled: int) -> None:
        self.settled += settled
        if self.on_progress is not None:
            self.on_progress(self.settled, self.total)

    def _compare(self, state: _ConnectionState, entry: _Entry, st: ApiStats) -> None:
        rec, frame = entry.rec, entry.frame
        assert frame is not None
        cmp = _Comparison(self.mapper, entry.ctx, st)
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

    def _not_sent(self, state: _ConnectionState, recs: list[tuple[int, CaptureRecord]]) -> None:
        state.unsent -= len(recs)
        for rid, rec in recs:
            self.report.api(rec.api_key).not_sent += 1
            self.mapper.settle(self.introduces.get(rid, ()))
            self.orders[state.key].done(rid)
        self._progress(len(recs))

    def _conn_failed(self, state: _ConnectionState, error: str) -> None:
        if state.closed is None:
            state.closed = error
            self.report.connections_failed += 1
            self.report.connection_errors.append({"connection": state.name, "error": error})
            log.warning("replay of connection %s: %s", state.name, error)

    async def _reader(self, state: _ConnectionState, stream: trio.abc.Stream) -> None:
        decoder = FrameDecoder()  # the target's responses, of any size
        error = "target closed the connection"
        try:
            while (frame := await read_frame(stream, decoder)) is not None:
                corr = response_correlation_id(frame)
                entry = state.pending.pop(corr, None)
                if entry is None:
                    self.report.unexpected_responses += 1
                    log.debug("connection %s: response with unknown correlation id %d", state.name, corr)
                    continue
                entry.frame = frame
                entry.received_at = trio.current_time()
                entry.event.set()
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            error = f"connection error: {exc!r}"
        if state.pending or state.unsent:
            self._conn_failed(state, error)
        elif state.closed is None:
            state.closed = error  # closed after the last response: nothing lost
        for entry in list(state.pending.values()):
            entry.event.set()
        state.pending.clear()

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

    async def _connect(self, state: _ConnectionState, recs: list[tuple[int, CaptureRecord]]
                       ) -> trio.abc.Stream | None:
        """A connection to the target in its security protocol: TLS handshake, then SASL authentication as
        the captured connection's principal; None (the connection's requests counted as not sent) if it fails."""
        sec = self.opt.security
        credentials: SaslCredentials | None = None
        if sec.sasl:
            principal = self.principals.get(state.key, "")
            credentials = sec.credentials_for(principal)
            if credentials is None:
                self._conn_failed(state, f"no SASL credentials for the captured principal {principal or '(unknown)'} "
                                         "(give a credentials file entry or --sasl-username/--sasl-password)")
                self._not_sent(state, recs)
                return None
        try:
            with trio.fail_after(self.opt.connect_timeout_s):
                stream = await open_stream(self.opt.host, self.opt.port, self.ssl_context)
        except _CONNECT_ERRORS as exc:
            cause = exc.__cause__ if isinstance(exc, trio.BrokenResourceError) and exc.__cause__ else exc
            self._conn_failed(state, f"connect failed: {cause!r}")
            self._not_sent(state, recs)
            return None
        if credentials is None:
            return stream
        state.credentials = credentials
        try:
            with trio.fail_after(self.opt.timeout_s):
                session = await sasl_authenticate(KafkaConnection(stream, state.client_id).request,
                                                  sec.sasl_mechanism or "", credentials.username, credentials.password)
        except (*_CONNECT_ERRORS, SaslAuthenticationError) as exc:
            if isinstance(exc, SaslAuthenticationError):
                self.report.authentication_failures += 1
            self._conn_failed(state, f"SASL authentication as {credentials.username} failed: {exc}")
            self._not_sent(state, recs)
            with trio.CancelScope(shield=True):
                await trio.aclose_forcefully(stream)
            return None
        self.report.authenticated[(self.principals.get(state.key, ""), credentials.username)] += 1
        self._schedule_reauthentication(state, session)
        return stream

    @staticmethod
    def _schedule_reauthentication(state: _ConnectionState, session: SaslSession) -> None:
        """KIP-368: renew the session between 85% and 95% of its lifetime, as Kafka's clients do."""
        if session.session_lifetime_ms > 0:
            state.reauth_at = trio.current_time() + session.session_lifetime_ms / 1000 * (0.85 + 0.1 * random.random())
        else:
            state.reauth_at = None

    async def _reauthenticate(self, state: _ConnectionState, stream: trio.abc.Stream) -> bool:
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
                await stream.send_all(encode_frame(header + api.request.build(body, version)))
                await waiter.event.wait()
                if waiter.frame is None:
                    raise ConnectionError("the target closed the connection during re-authentication")
                return parse_response_frame(waiter.frame, api_key, version)[1]

            with trio.fail_after(self.opt.timeout_s):
                session = await sasl_authenticate(request, self.opt.security.sasl_mechanism or "",
                                                  state.credentials.username, state.credentials.password)
        except (*_CONNECT_ERRORS, SaslAuthenticationError) as exc:
            if isinstance(exc, SaslAuthenticationError):
                self.report.authentication_failures += 1
            self._conn_failed(state, f"SASL re-authentication as {state.credentials.username} failed: {exc}")
            return False
        finally:
            for _ in range(state.max_in_flight):
                state.slots.release()
        self.report.reauthentications += 1
        self._schedule_reauthentication(state, session)
        return True

    async def _run_connection(self, key: ConnKey, recs: list[tuple[int, CaptureRecord]]) -> None:
        state = _ConnectionState(key, self.opt.max_in_flight)
        state.unsent = len(recs)
        state.client_id = recs[0][1].client_id
        order = self.orders[key]
        await self._pace(recs[0][1])
        stream = await self._connect(state, recs)
        if stream is None:
            return
        async with stream, trio.open_nursery() as outer:
            outer.start_soon(self._reader, state, stream)
            async with trio.open_nursery() as waiters:
                for i, (rid, rec) in enumerate(recs):
                    await self._pace(rec)
                    await order.wait(order.needed(rec))
                    if state.reauth_at is not None and trio.current_time() >= state.reauth_at \
                            and state.closed is None and not await self._reauthenticate(state, stream):
                        self._not_sent(state, recs[i:])
                        break
                    await state.slots.acquire()
                    if state.closed is not None:
                        state.slots.release()
                        self._not_sent(state, recs[i:])
                        break
                    corr = next(state.corr)
                    frame, entry = await self._prepare(rid, rec, corr)
                    if rec.response is not None:
                        state.pending[corr] = entry
                    entry.sent_at = trio.current_time()
                    try:
                        await stream.send_all(encode_frame(frame))
                    except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
                        state.pending.pop(corr, None)
                        state.slots.release()
                        self._conn_failed(state, f"send failed: {exc!r}")
                        self._not_sent(state, recs[i:])
                        break
                    state.unsent -= 1
                    self.report.api(rec.api_key).sent += 1
                    if rec.response is None:
                        state.slots.release()
                        self._finish(state, entry, "none")
                    else:
                        waiters.start_soon(self._await_response, state, entry)
            outer.cancel_scope.cancel()

    async def run(self) -> ReplayReport:
        now = trio.current_time()
        base = self.opt.base_time_ns
        self.t0 = now if base is None else now + (base - time.time_ns()) / 1e9
        started = time.perf_counter()
        self.report.connections = len(self.conns)
        async with trio.open_nursery() as nursery:
            for key, recs in self.conns.items():
                nursery.start_soon(self._run_connection, key, recs)
        # A base time in the future (Spark tasks start early) is waiting, not replaying.
        self.report.duration_s = time.perf_counter() - started - max(0.0, self.t0 - now)
        self.report.mappings = self.mapper.summary()
        return self.report


async def replay_records(conns: dict[ConnKey, list[CaptureRecord]], options: ReplayOptions,
                         on_progress: ProgressCallback | None = None) -> ReplayReport:
    """Replay connections (as :func:`group_connections` returns them) against ``options``' target."""
    replayer = _Replayer({k: v for k, v in conns.items() if v}, options, on_progress)
    log.info("replaying %d request(s) on %d connection(s) to %s", sum(len(v) for v in conns.values()),
             len(replayer.conns), options.target)
    return await replayer.run()


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
