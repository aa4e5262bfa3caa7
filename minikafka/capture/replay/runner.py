"""The replay itself on Trio: a connection per captured one, each request paced, held for its dependencies,
rewritten, routed, sent within the in-flight limit and its answer compared.

:class:`_Replayer` composes one part per job, each in its own module: :mod:`.pacing` (when a request is due),
:mod:`.dependencies` (causality: what it waits for, what waits for it), :mod:`.rewriter` (the frame it is sent as),
:mod:`.dispatch` (routing on a cluster target), :mod:`.links` with :mod:`.connector` (a replayed connection's links
to the target: TLS, SASL, KIP-368 re-authentication) and :mod:`.outcomes` (the answer against the captured one).
The functions below read captures and run replayers (``--scale``: one per copy of the capture)."""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable
from functools import partial
from pathlib import Path
from typing import Callable, Protocol

import trio

from ...common.clock import SYSTEM_CLOCK, Clock
from ..format import CaptureRecord, ReadStats
from ..reading import read_capture
from .causality import Progress
from .connector import TargetConnector
from .dependencies import Dependencies
from .dispatch import Dispatcher
from .inflight import ReplayedRequest
from .links import ReplayedConnection
from .options import ConnKey, ReplayOptions
from .outcomes import Outcome, Outcomes
from .pacing import Pacer
from .plan import SASL_API_KEYS, ReplayPlan, build_plan, connection_principal, replayed_records
from .rename import CopyNames, copy_names
from .report import ReplayReport
from .rewrite import _Mapper
from .rewriter import RequestRewriter

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


ProgressCallback = Callable[[int, int], None]
"""Told (requests settled, requests in all) each time a request is answered, times out or is given up."""


class _Replayer:
    """Replays the connections of a :class:`~.plan.ReplayPlan` (all of them, or ``local``: a Spark task's share,
    with ``sync`` bringing the others' progress and values), composing one part per job: :class:`.Pacer` (when a
    request is due), :class:`.Dependencies` (what it waits for), :class:`.RequestRewriter` (the frame it is sent
    as), :class:`.Dispatcher` (the node it goes to), :class:`.ReplayedConnection` with :class:`.TargetConnector`
    (links, TLS, SASL) and :class:`.Outcomes` (the answer against the captured one)."""

    def __init__(self, conns: dict[ConnKey, list[CaptureRecord]], options: ReplayOptions,
                 on_progress: ProgressCallback | None = None, plan: ReplayPlan | None = None,
                 sync: ReplaySync | None = None, names: CopyNames | None = None, clock: Clock = SYSTEM_CLOCK) -> None:
        self.opt = options
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
        self.total = sum(len(v) for v in self.conns.values())
        progress = Progress(plan.sizes)
        self.sync = sync
        if sync is not None:
            sync.attach(progress, self.mapper)
        elif len(self.conns) < len(plan.keys):
            for c, n in enumerate(plan.sizes):  # connections replayed nowhere: nothing to wait for
                if c not in self.conns:
                    progress.advance(c, n)
        self.clock = clock
        self.pacer = Pacer(options.speed, options.first_ns if options.first_ns is not None else plan.first_ns,
                           clock, options.base_time_ns)
        self.dependencies = Dependencies(plan, progress, self.mapper, self.conns, self.report, options.timeout_s)
        introduced_by = self.dependencies.introduced_by
        self.rewriter = RequestRewriter(plan, self.mapper, self.report, introduced_by=introduced_by,
                                        max_speed=options.speed is None, timeout_s=options.timeout_s, names=names)
        self.connector = TargetConnector(security, plan.principals, self.report,
                                         connect_timeout_s=options.connect_timeout_s, timeout_s=options.timeout_s)
        self.dispatcher = Dispatcher(self.report, address=(options.host, options.port), bootstrap=options.bootstrap,
                                     routed=options.routed, timeout_s=options.timeout_s)
        self.outcomes = Outcomes(self.mapper, self.report, introduced_by=introduced_by,
                                 epoch_members=plan.epoch_members, max_examples=options.max_examples, names=names)

    async def _control_stream(self, host: str, port: int) -> trio.abc.Stream:
        """The cluster view's own connection (Metadata, FindCoordinator), secured as the replayed ones are,
        as the first connection's principal."""
        key = self.plan.keys[min(self.conns)] if self.conns else (0, "")
        return (await self.connector.open(key, "minikafka-replay", host, port)).stream

    def _answered(self, entry: ReplayedRequest) -> None:
        """What waits for this answer goes on now; the comparison follows (it teaches no value).  Not when
        routing: the cluster view learns from the answer first."""
        if not self.dispatcher.routing:
            self.dependencies.answered(entry.rid)

    def _finish(self, conn: ReplayedConnection, entry: ReplayedRequest, outcome: Outcome) -> None:
        """Account for one request: ``outcome`` is "response", "timeout", "lost" or "none" (acks=0)."""
        try:
            if self.outcomes.account(entry, outcome):
                self.dispatcher.observe(entry)
                self.outcomes.compare(conn.name, entry)
        finally:
            self._settle([entry.rid])

    def _not_sent(self, recs: list[tuple[int, CaptureRecord]]) -> None:
        for _, rec in recs:
            self.report.api(rec.api_key).not_sent += 1
        self._settle([rid for rid, _ in recs])

    def _settle(self, rids: list[int]) -> None:
        self.dependencies.settle(rids)
        self.settled += len(rids)
        if self.on_progress is not None:
            self.on_progress(self.settled, self.total)

    async def _await_response(self, conn: ReplayedConnection, entry: ReplayedRequest) -> None:
        try:
            with trio.move_on_after(self.opt.timeout_s):
                await entry.event.wait()
            if entry.frame is not None:
                self._finish(conn, entry, "response")
            elif entry.event.is_set():
                self._finish(conn, entry, "lost")
            else:
                conn.forget_request(entry)
                self._finish(conn, entry, "timeout")
        finally:
            conn.release_slot()

    async def _run_connection(self, key: ConnKey, recs: list[tuple[int, CaptureRecord]]) -> None:
        conn = ReplayedConnection(key, recs[0][1].client_id, self.connector, self.report,
                                  max_in_flight=self.opt.max_in_flight, max_reconnects=self.opt.max_reconnects,
                                  address=self.dispatcher.address, on_answer=self._answered,
                                  current=self.dispatcher.first_node())
        await self.pacer.wait_due(recs[0][1])
        async with conn.open():
            if await conn.link(conn.current) is None:
                self._not_sent(recs)
                return
            async with trio.open_nursery() as waiters:
                for i, (rid, rec) in enumerate(recs):
                    await self.pacer.wait_due(rec)
                    await self.dependencies.wait(conn.name, rid)
                    if not await conn.renew_sessions():
                        self._not_sent(recs[i:])
                        break
                    await conn.acquire_slot()
                    if conn.closed is not None:
                        conn.release_slot()
                        self._not_sent(recs[i:])
                        break
                    corr = conn.next_correlation_id()
                    frame, entry = await self.rewriter.prepare(rid, rec, corr)
                    if not await self.dispatcher.send(conn, entry, frame, corr, waiters):
                        conn.release_slot()
                        self._not_sent(recs[i:])
                        break
                    self.dependencies.sent(rid)
                    self.report.api(rec.api_key).sent += 1
                    if rec.response is None:
                        conn.release_slot()
                        self._finish(conn, entry, "none")
                    else:
                        waiters.start_soon(self._await_response, conn, entry)

    async def run(self) -> ReplayReport:
        self.report.connections = len(self.conns)
        self.report.cross_dependencies = self.plan.cross_dependencies
        await self.dispatcher.start(self._control_stream)
        async with trio.open_nursery() as outer:
            if self.sync is not None:
                await outer.start(self.sync.run)
            self.pacer.start(self.sync.now_ns() if self.sync is not None else self.clock.time_ns())
            async with trio.open_nursery() as nursery:
                for c, recs in self.conns.items():
                    start = self.plan.starts[c]
                    nursery.start_soon(self._run_connection, self.plan.keys[c],
                                       [(start + i, r) for i, r in enumerate(recs)])
            if self.sync is not None:
                await self.sync.flush()
            outer.cancel_scope.cancel()
        self.report.duration_s = self.pacer.duration_s()
        self.report.mappings = self.mapper.summary()
        await self.dispatcher.aclose()
        return self.report


async def replay_records(conns: dict[ConnKey, list[CaptureRecord]], options: ReplayOptions,
                         on_progress: ProgressCallback | None = None, plan: ReplayPlan | None = None,
                         sync: ReplaySync | None = None, *, clock: Clock = SYSTEM_CLOCK) -> ReplayReport:
    """Replay connections (as :func:`group_connections` returns them) against ``options``' target.

    With a ``plan`` (of a whole capture) ``conns`` may be a part of it: the others are replayed elsewhere and
    ``sync`` brings their progress and values (without ``sync`` they count as settled).  ``clock``: the wall
    clock of a base time and the clock of the replay's duration."""
    conns = {k: v for k, v in conns.items() if v}
    if options.scale > 1:
        return await _replay_copies(conns, options, on_progress, plan, sync, clock=clock)
    replayer = _Replayer(conns, options, on_progress, plan, sync, clock=clock)
    log.info("replaying %d request(s) on %d connection(s) to %s", sum(len(v) for v in conns.values()),
             len(replayer.conns), options.target)
    return await replayer.run()


async def _replay_copies(conns: dict[ConnKey, list[CaptureRecord]], options: ReplayOptions,
                         on_progress: ProgressCallback | None, plan: ReplayPlan | None,
                         sync: ReplaySync | None, copies: Iterable[int] | None = None, *,
                         clock: Clock = SYSTEM_CLOCK) -> ReplayReport:
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

    replayers = [_Replayer(conns, options, progress_of(j), plan, None, copy_names(i, k), clock)
                 for j, i in enumerate(mine)]
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


def run_replay_copies(paths: Iterable[str | Path], options: ReplayOptions, copies: Iterable[int], *,
                      clock: Clock = SYSTEM_CLOCK) -> ReplayReport:
    """``--scale``: replay the copies ``copies`` (of ``options.scale``) of a whole capture, each under its own
    names, on a new Trio loop (a Spark task's share of the copies: the reports of all shares merge into one)."""
    paths = list(paths)

    async def main() -> ReplayReport:
        conns = {k: v for k, v in group_connections(read_capture(paths)).items() if v}
        return await _replay_copies(conns, options, None, None, None, list(copies), clock=clock)

    return trio.run(main)


async def replay_capture(paths: Iterable[str | Path], options: ReplayOptions,
                         connections: set[ConnKey] | None = None,
                         stats: ReadStats | None = None, on_progress: ProgressCallback | None = None, *,
                         clock: Clock = SYSTEM_CLOCK) -> ReplayReport:
    """Read a capture (files or directories) and replay it; ``connections`` limits it to those."""
    conns = group_connections(read_capture(paths, stats), connections)
    return await replay_records(conns, options, on_progress, clock=clock)


def run_replay(paths: Iterable[str | Path], options: ReplayOptions,
               connections: set[ConnKey] | None = None, on_progress: ProgressCallback | None = None, *,
               clock: Clock = SYSTEM_CLOCK) -> ReplayReport:
    """:func:`replay_capture` on a new Trio loop (from synchronous code)."""
    paths = list(paths)
    return trio.run(partial(replay_capture, clock=clock), paths, options, connections, None, on_progress)
