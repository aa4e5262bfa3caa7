"""Causality in the replay: a request waits for what it depends on in the :class:`~.plan.ReplayPlan`, and a
request that ends (answered, timed out, lost or given up) lets go what waits for it.

Two kinds of waiting meet here: :class:`~.causality.Progress` (connection *c* has settled, or sent, its first
*n* requests) and the values a request's answer introduces (:class:`~.rewrite._Mapper`: a producer id, a member
id...) that later requests need to be rewritten.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable, Sequence

import trio

from .causality import Progress
from .plan import ReplayPlan
from .report import ReplayReport
from .rewrite import _Mapper

log = logging.getLogger(__name__)


class Dependencies:
    """Holds requests until their dependencies settle, and settles requests (of the connections ``local``,
    replayed here) as they end."""

    def __init__(self, plan: ReplayPlan, progress: Progress, mapper: _Mapper, local: Collection[int],
                 report: ReplayReport, timeout_s: float) -> None:
        self.plan = plan
        self.progress = progress
        self.mapper = mapper
        self.report = report
        self.timeout_s = timeout_s
        #: rid -> the mapped keys its answer introduces (requests of the local connections only).
        self._introduces: dict[int, list[tuple]] = {}
        for rid, keys in plan.introduces.items():
            if plan.conn_of(rid)[0] in local:
                self._introduces[rid] = keys
                for k in keys:
                    mapper.expect(k)

    def introduced_by(self, rid: int) -> Sequence[tuple]:
        """The mapped keys the answer to request ``rid`` introduces (empty: none)."""
        return self._introduces.get(rid, ())

    async def wait(self, conn_name: str, rid: int) -> None:
        """Until what the request depends on is done (then the captured gap after a request only sent elsewhere);
        at most the request timeout: a dependency that never settles (a Spark task lost) is reported and skipped."""
        deps = self.plan.deps[rid]
        if not deps:
            return
        waited_sent = False
        with trio.move_on_after(self.timeout_s) as scope:
            waited_sent = await self.progress.wait(deps)
        if scope.cancelled_caught:
            self.report.dependency_timeouts += 1
            log.warning("replay of connection %s: request %d still waits for %s after %.0f s; sent anyway",
                        conn_name, rid, self.progress.blocked_on(deps), self.timeout_s)
        elif waited_sent:  # let the target read the request sent elsewhere first
            await trio.sleep(self.plan.sent_gap_us.get(rid, 0) / 1e6)

    def sent(self, rid: int) -> None:
        """Request ``rid`` went out (what waits for it to be sent goes on)."""
        self.progress.mark_sent(*self.plan.conn_of(rid))

    def answered(self, rid: int) -> None:
        """Request ``rid`` is answered: what waits for it goes on before the comparison, unless the answer
        introduces values (those are learnt by the comparison)."""
        if rid not in self._introduces:
            self.progress.settle(*self.plan.conn_of(rid))

    def settle(self, rids: Iterable[int]) -> None:
        """Requests ended (compared, timed out, lost or not sent): nothing is to wait for them any longer."""
        for rid in rids:
            self.mapper.settle(self.introduced_by(rid))
            self.progress.settle(*self.plan.conn_of(rid))
