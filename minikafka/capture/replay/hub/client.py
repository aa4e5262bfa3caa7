"""A task's side of the replay hub: :func:`connect_hub` opens a :class:`HubClient`, which publishes (without
blocking the task's Trio loop), hands what other tasks published to callbacks, and estimates the offset of the
task's clock to the hub's (ping/pong exchanges, the sample with the smallest round trip kept, as NTP's clock
filter does).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from typing import Any

import trio

from ....common import SYSTEM_CLOCK, Clock
from .codec import HubMessageError, as_int, MessageReader, decode_value, encode_value, frame, int_list, nodelay
from .outbox import DEFAULT_BATCH_INTERVAL_S, Outbox

log = logging.getLogger(__name__)

DEFAULT_CLOCK_SAMPLES = 5
DEFAULT_CONNECT_TIMEOUT_S = 30.0

ProgressHandler = Callable[[int, int], None]
ValueHandler = Callable[[tuple, Any], None]
MemberEpochHandler = Callable[[str, int, int], None]
LostHandler = Callable[[str, list[int]], None]
Address = tuple[str, int] | str


class HubClient:
    """A task's connection to the hub: publish (non-blocking, from the task's Trio loop), and the clock offset.

    Made by :func:`connect_hub`; remote publications are handed to its callbacks as they arrive."""

    def __init__(self, stream: trio.abc.Stream, clock: Clock, on_progress: ProgressHandler | None,
                 on_value: ValueHandler | None, on_member_epoch: MemberEpochHandler | None,
                 on_lost: LostHandler | None, batch_interval_s: float = DEFAULT_BATCH_INTERVAL_S,
                 on_sent: ProgressHandler | None = None) -> None:
        self._stream = stream
        self.batch_interval_s = batch_interval_s
        self._clock = clock
        self._outbox = Outbox(clock)
        self._on_progress = on_progress
        self._on_sent = on_sent
        self._on_value = on_value
        self._on_member_epoch = on_member_epoch
        self._on_lost = on_lost
        self._pongs: dict[int, tuple[trio.Event, list[int]]] = {}
        self._pings = iter(range(1 << 62))
        self._sent = trio.Event()
        self._writing = False
        self._closing = False
        self._writer_done = trio.Event()
        self._reader_done = False
        self._reader_ended = trio.Event()
        #: Hub clock minus this task's clock, and the round trip of the sample it comes from.
        self.offset_ns = 0
        self.rtt_ns: int | None = None
        self.received_events = 0
        self.received_progress = 0

    # publishing
    def publish_progress(self, conn: int, count: int) -> None:
        """Connection ``conn`` (an index every task agrees on) has settled its first ``count`` requests."""
        self._outbox.add_progress(conn, count)

    def publish_sent(self, conn: int, count: int) -> None:
        """Connection ``conn`` has sent its first ``count`` requests (answered or not)."""
        self._outbox.add_sent(conn, count)

    def publish_value(self, key: tuple, value: Any) -> None:
        """The target made up ``value`` for the captured ``key`` (keys of
        :class:`~minikafka.capture.replay.rewrite._Mapper`)."""
        self._outbox.add_events([["v", encode_value(key), encode_value(value)]])

    def publish_member_epoch(self, member: str, captured: int, replayed: int) -> None:
        self._outbox.add_events([["e", member, captured, replayed]])

    async def flush(self) -> None:
        """Wait until everything published so far is written to the hub's connection."""
        while self._outbox.pending() or self._writing:
            if self._writer_done.is_set():
                raise trio.ClosedResourceError("the replay hub connection is closed")
            ev = self._sent
            await ev.wait()

    async def finish(self) -> None:
        """Send what is still unsent and say goodbye (the hub then forgets this task, keeping what it published;
        nothing more is published).  Idempotent."""
        self._closing = True
        self._outbox.wake()
        await self._writer_done.wait()

    @property
    def batches_sent(self) -> int:
        """Publication batches written to the hub so far."""
        return self._outbox.batches

    async def wait_closed(self) -> None:
        """Wait until the hub has closed the connection (or it broke)."""
        await self._reader_ended.wait()

    # the clock
    def to_local_ns(self, hub_ns: int) -> int:
        """A time of the hub's clock on this task's clock."""
        return hub_ns - self.offset_ns

    def hub_now_ns(self) -> int:
        return self._clock.time_ns() + self.offset_ns

    async def sync_clock(self, samples: int = DEFAULT_CLOCK_SAMPLES) -> int:
        """Estimate the offset to the hub's clock: ``samples`` ping/pong exchanges, the one with the smallest
        round trip taken (offset = hub time - midpoint of the exchange).  Returns the offset."""
        best: tuple[int, int] | None = None
        for _ in range(max(1, samples)):
            if self._reader_done:
                raise trio.ClosedResourceError("the replay hub connection is closed")
            n = next(self._pings)
            waiter: tuple[trio.Event, list[int]] = (trio.Event(), [])
            self._pongs[n] = waiter
            t0 = self._clock.time_ns()
            self._outbox.add_ping(n)
            await waiter[0].wait()
            t1 = self._clock.time_ns()
            if not waiter[1]:
                raise trio.ClosedResourceError("the replay hub closed the connection during clock sync")
            rtt = t1 - t0
            offset = waiter[1][0] - (t0 + t1) // 2
            if best is None or rtt < best[0]:
                best = (rtt, offset)
        assert best is not None
        self.rtt_ns, self.offset_ns = best
        return self.offset_ns

    # pumps
    async def _writer(self) -> None:
        last = -1e9
        try:
            while True:
                if not self._outbox.pending():
                    if self._closing:
                        break
                    await self._outbox.wait(last + self.batch_interval_s)
                data = self._outbox.take()
                if not data:
                    continue
                last = trio.current_time()
                self._writing = True
                try:
                    await self._stream.send_all(data)
                finally:
                    self._writing = False
                self._sent.set()
                self._sent = trio.Event()
            await self._stream.send_all(frame({"op": "bye"}))
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            log.warning("replay hub connection lost while publishing: %r", exc)
        finally:
            self._writer_done.set()
            self._sent.set()

    def _apply(self, msg: dict) -> None:
        for ev in msg.get("ev") or []:
            kind = ev[0]
            self.received_events += 1
            if kind == "v":
                if self._on_value is not None:
                    self._on_value(decode_value(ev[1]), decode_value(ev[2]))
            elif kind == "e":
                if self._on_member_epoch is not None:
                    self._on_member_epoch(ev[1], as_int(ev[2]), as_int(ev[3]))
            elif kind == "lost":
                log.warning("replay hub: task %s went away with %d connection(s)", ev[1], len(ev[2]))
                if self._on_lost is not None:
                    self._on_lost(ev[1], int_list(ev[2]))
        sent = msg.get("s") or []
        if self._on_sent is not None:
            for i in range(0, len(sent), 2):
                self._on_sent(sent[i], sent[i + 1])
        flat = msg.get("p") or []
        self.received_progress += len(flat) // 2
        if self._on_progress is not None:
            for i in range(0, len(flat), 2):
                self._on_progress(flat[i], flat[i + 1])

    async def _reader(self) -> None:
        reader = MessageReader(self._stream)
        try:
            while (msg := await reader.next()) is not None:
                op = msg.get("op")
                if op == "pub":
                    self._apply(msg)
                elif op == "pong":
                    waiter = self._pongs.pop(msg.get("n"), None)  # type: ignore[arg-type]
                    if waiter is not None:
                        waiter[1].append(as_int(msg.get("t")))
                        waiter[0].set()
            if not self._closing:
                log.warning("replay hub closed the connection")
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError, HubMessageError) as exc:
            if not self._closing:
                log.warning("replay hub connection lost: %r", exc)
        finally:
            self._reader_done = True
            self._reader_ended.set()
            for event, _ in self._pongs.values():
                event.set()
            self._pongs.clear()


def parse_address(address: Address) -> tuple[str, int]:
    if isinstance(address, str):
        host, _, port = address.rpartition(":")
        return host.strip("[]") or "127.0.0.1", int(port)
    return address[0], int(address[1])


@asynccontextmanager
async def connect_hub(address: Address, *, task: str = "", conns: Iterable[int] = (),
                      on_progress: ProgressHandler | None = None, on_value: ValueHandler | None = None,
                      on_member_epoch: MemberEpochHandler | None = None, on_lost: LostHandler | None = None,
                      on_sent: ProgressHandler | None = None,
                      clock: Clock = SYSTEM_CLOCK, clock_samples: int = DEFAULT_CLOCK_SAMPLES,
                      connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S,
                      batch_interval_s: float = DEFAULT_BATCH_INTERVAL_S) -> AsyncIterator[HubClient]:
    """Connect a task to the hub at ``address`` ("host:port" or a tuple) for the ``async with`` body.

    ``task`` names it in logs, ``conns`` are the connection indexes it replays (announced to the others if
    it goes away).  What the hub holds already (a snapshot) and then what other tasks publish are handed to
    the callbacks, in publication order per publisher, from this Trio loop.  The clock offset is estimated
    before the body runs.  On exit what is still unsent is flushed and the task says goodbye."""
    host, port = parse_address(address)
    with trio.fail_after(connect_timeout_s):
        stream = await trio.open_tcp_stream(host, port)
    nodelay(stream)
    client = HubClient(stream, clock, on_progress, on_value, on_member_epoch, on_lost, batch_interval_s, on_sent)
    try:
        async with stream, trio.open_nursery() as nursery:
            await stream.send_all(frame({"op": "hello", "task": task, "conns": list(conns)}))
            nursery.start_soon(client._reader)
            nursery.start_soon(client._writer)
            with trio.fail_after(connect_timeout_s):
                await client.sync_clock(clock_samples)
            try:
                yield client
            except BaseException:
                nursery.cancel_scope.cancel()  # no goodbye (unless finish() said it): the others are told
                raise
            with trio.move_on_after(connect_timeout_s) as scope:
                scope.shield = True
                await client.finish()
            nursery.cancel_scope.cancel()
    except BaseExceptionGroup as group:  # the pumps never raise: what the body raised, unwrapped
        if len(group.exceptions) == 1:
            raise group.exceptions[0] from None
        raise
