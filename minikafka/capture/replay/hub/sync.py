"""A Spark task's side of a distributed replay: :class:`HubSync` publishes what the task's replay settles and
learns (progress counts, values the target made up, member epochs) to the hub and feeds the other tasks'
publications into it; :func:`remote_needs` says which counts other tasks wait for, so only those are published.
"""

from __future__ import annotations

import bisect
import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import trio

from ....common import SYSTEM_CLOCK, Clock
from .client import DEFAULT_CLOCK_SAMPLES, Address, HubClient, connect_hub

if TYPE_CHECKING:
    from ..causality import Progress
    from ..plan import ReplayPlan
    from ..rewrite import _Mapper

log = logging.getLogger(__name__)


class HubSync:
    """A Spark task's :class:`~minikafka.capture.replay.runner.ReplaySync`: the replay's
    :class:`~minikafka.capture.replay.causality.Progress` and :class:`~minikafka.capture.replay.rewrite._Mapper`
    published to the hub and fed with the other tasks' publications.

    ``conns`` are the plan's connection indexes this task replays, ``sizes`` the plan's requests per connection
    (a lost task's connections count as settled: the others carry on, their answers may differ)."""

    def __init__(self, address: Address, task: str, conns: Iterable[int], sizes: list[int],
                 clock: Clock = SYSTEM_CLOCK, clock_samples: int = DEFAULT_CLOCK_SAMPLES,
                 needs: dict[int, tuple[list[int], list[int]]] | None = None) -> None:
        self.address = address
        self.task = task
        self.conns = list(conns)
        self.sizes = sizes
        #: Per local connection, the settled and sent counts other tasks wait for (:func:`remote_needs`): only
        #: progress reaching one of them is published.  None: all progress.
        self.needs = needs
        self._published: dict[int, int] = {}
        self._published_sent: dict[int, int] = {}
        self._clock = clock
        self._clock_samples = clock_samples
        self.client: HubClient | None = None
        self._progress: Progress | None = None
        self._mapper: _Mapper | None = None

    def attach(self, progress: Progress, mapper: _Mapper) -> None:
        self._progress, self._mapper = progress, mapper
        progress.on_advance = self._publish_progress
        progress.on_sent = self._publish_sent
        mapper.on_learn = self._publish_value
        mapper.on_member_epoch = self._publish_member_epoch

    def _connected(self) -> HubClient:
        if self.client is None:
            raise RuntimeError("published to the replay hub before connecting (ReplaySync.run)")
        return self.client

    def _needed(self, conn: int, count: int, which: int, published: dict[int, int]) -> bool:
        if self.needs is None:
            return True
        counts = self.needs.get(conn, ((), ()))[which]
        i = bisect.bisect_right(counts, published.get(conn, 0))
        if i < len(counts) and counts[i] <= count:
            published[conn] = count
            return True
        return False

    def _publish_progress(self, conn: int, count: int) -> None:
        # A settled count is a sent count too (requests settled before Progress saw them sent publish no sent
        # count of their own).
        needed_sent = self._needed(conn, count, 1, self._published_sent)
        if self._needed(conn, count, 0, self._published) or needed_sent:
            self._connected().publish_progress(conn, count)

    def _publish_sent(self, conn: int, count: int) -> None:
        if self._needed(conn, count, 1, self._published_sent):
            self._connected().publish_sent(conn, count)

    def _publish_value(self, key: tuple, value: Any) -> None:
        self._connected().publish_value(key, value)

    def _publish_member_epoch(self, member: str, epochs: tuple[int, int]) -> None:
        self._connected().publish_member_epoch(member, epochs[0], epochs[1])

    def _remote_epoch(self, member: str, captured: int, replayed: int) -> None:
        assert self._mapper is not None
        self._mapper.note_member_epoch(member, (captured, replayed), remote=True)

    def _lost(self, task: str, conns: list[int]) -> None:
        assert self._progress is not None
        for c in conns:
            self._progress.advance(c, self.sizes[c])

    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Connected to the hub until cancelled (after :meth:`flush`, which says goodbye)."""
        progress, mapper = self._progress, self._mapper
        if progress is None or mapper is None:
            raise RuntimeError("HubSync.run before attach")
        async with connect_hub(self.address, task=self.task, conns=self.conns, on_progress=progress.advance,
                               on_sent=progress.advance_sent, on_value=mapper.apply_remote,
                               on_member_epoch=self._remote_epoch, on_lost=self._lost, clock=self._clock,
                               clock_samples=self._clock_samples) as client:
            self.client = client
            log.info("task %s connected to the replay hub at %s (clock offset %.3f ms, round trip %.3f ms)",
                     self.task, self.address, client.offset_ns / 1e6, (client.rtt_ns or 0) / 1e6)
            task_status.started()
            await trio.sleep_forever()

    async def flush(self) -> None:
        """This task's connections are done: send the rest and say goodbye."""
        if self.client is not None:
            await self.client.finish()

    def now_ns(self) -> int:
        return self.client.hub_now_ns() if self.client is not None else self._clock.time_ns()


def remote_needs(plan: ReplayPlan, share: Iterable[int]) -> dict[int, tuple[list[int], list[int]]]:
    """Per connection of ``share``, the settled and the sent counts (sorted) that requests of connections
    replayed elsewhere wait for: all the progress a task needs to publish (:class:`HubSync` ``needs``)."""
    mine = set(share)
    settled: dict[int, set[int]] = {c: set() for c in mine}
    sent: dict[int, set[int]] = {c: set() for c in mine}
    for c, start in enumerate(plan.starts):
        if c in mine:
            continue
        for rid in range(start, start + plan.sizes[c]):
            d = plan.deps[rid]
            for i in range(0, len(d), 2):
                if d[i] in mine:
                    n = d[i + 1]
                    (settled if n > 0 else sent)[d[i]].add(abs(n))
    return {c: (sorted(settled[c]), sorted(sent[c])) for c in mine}
