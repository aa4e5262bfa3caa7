"""The replay hub: one coordinator the processes of a distributed replay (Spark tasks) talk to over TCP.

A replay spread over several processes must keep the capture's causality
across them: a Produce replayed by one task waits for the InitProducerId that
another task replays, then sends the producer id the target gave *there*.  Each
task runs the ordinary Trio replayer on its share of the connections and
publishes to the hub what other tasks may wait for:

* progress: "connection *i* has settled its first *n* requests" (monotonic: only
  the latest count per connection matters, so counts are coalesced);
* values the target made up (the replay's captured -> replayed map: producer
  ids, member ids, fetch session ids, topic ids ...);
* member epochs (KIP-848/932: per member, the latest captured and replayed epoch).

The hub forwards every publication to every other task, which applies it
locally (its waits on dependencies then complete), and keeps the whole state so
a task that connects late starts from a snapshot.  Order: what a task published
before a progress count reaches every other task no later than that count (a
batch carries values and epochs first, then the coalesced counts; coalescing only
ever delays a count).  A task that disconnects without saying goodbye is logged
and announced to the others (``on_lost``: the connections it replayed); the hub
carries on.

The hub also serves one clock: tasks estimate the offset of their clock to the
hub's (ping/pong exchanges, keeping the sample with the smallest round trip, as
NTP's clock filter does), so paced replays (1x, Nx) share one base time across
machines: the driver picks it in hub time and each task converts it.

Like Kafka's group coordinator it is one process everybody reaches over TCP; unlike
it, it only relays (no assignment, no persistence).  Wire format: messages of a
4-byte big-endian length and a JSON object; values are JSON with a tagged encoding
for tuples (``{"t": [...]}``), UUIDs (``{"u": hex}``), bytes (``{"b": base64}``) and
dicts (``{"d": [[k, v], ...]}``) -- not pickle: nothing a peer sends is executed.
No pyspark here: the Spark job (:mod:`minikafka.analysis.replay_job`) runs
:class:`ReplayHub` on the driver and :func:`connect_hub` in each task.
"""

from __future__ import annotations

import base64
import bisect
import json
import logging
import socket
import struct
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, Self

import trio

if TYPE_CHECKING:
    from .causality import Progress
    from .plan import ReplayPlan
    from .rewrite import _Mapper

log = logging.getLogger(__name__)

_LEN = struct.Struct(">I")
#: The largest message accepted (a snapshot of a big replay's map stays far below).
MAX_MESSAGE_BYTES = 256 << 20
DEFAULT_CLOCK_SAMPLES = 5
DEFAULT_CONNECT_TIMEOUT_S = 30.0
#: The least time between two publication batches on one connection (a lone publication goes out at once).  0:
#: a batch is whatever accumulated while the previous one was being written -- a replay waits on other tasks'
#: progress hop by hop, so latency costs more than messages (100k requests at max speed on 2 tasks: 26.5 s
#: with 0, 64 s with 1 ms).
DEFAULT_BATCH_INTERVAL_S = 0.0

Clock = Callable[[], int]
"""Nanoseconds since the epoch (``time.time_ns``; injected in tests)."""
ProgressHandler = Callable[[int, int], None]
ValueHandler = Callable[[tuple, Any], None]
MemberEpochHandler = Callable[[str, int, int], None]
LostHandler = Callable[[str, list[int]], None]
Address = tuple[str, int] | str


# -- the wire --------------------------------------------------------------------------------------

def encode_value(v: Any) -> Any:
    """A JSON-able form of ``v`` (see the module docstring for the tags)."""
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, tuple):
        return {"t": [encode_value(x) for x in v]}
    if isinstance(v, list):
        return [encode_value(x) for x in v]
    if isinstance(v, uuid.UUID):
        return {"u": v.hex}
    if isinstance(v, (bytes, bytearray, memoryview)):
        return {"b": base64.b64encode(bytes(v)).decode("ascii")}
    if isinstance(v, dict):
        return {"d": [[encode_value(k), encode_value(x)] for k, x in v.items()]}
    raise TypeError(f"cannot send a {type(v).__name__} through the replay hub")


def decode_value(v: Any) -> Any:
    """The inverse of :func:`encode_value`."""
    if isinstance(v, list):
        return [decode_value(x) for x in v]
    if isinstance(v, dict):
        if "t" in v:
            return tuple(decode_value(x) for x in v["t"])
        if "u" in v:
            return uuid.UUID(hex=v["u"])
        if "b" in v:
            return base64.b64decode(v["b"])
        if "d" in v:
            return {decode_value(k): decode_value(x) for k, x in v["d"]}
        raise ValueError(f"unknown tag in {v!r}")
    return v


def _frame(msg: dict) -> bytes:
    data = json.dumps(msg, separators=(",", ":")).encode()
    return _LEN.pack(len(data)) + data


class _MessageReader:
    """Length-prefixed JSON messages from a stream."""

    def __init__(self, stream: trio.abc.ReceiveStream) -> None:
        self._stream = stream
        self._buf = bytearray()

    async def next(self) -> dict | None:
        """The next message, or None at a clean end of stream."""
        while True:
            if len(self._buf) >= 4:
                (size,) = _LEN.unpack_from(self._buf)
                if size > MAX_MESSAGE_BYTES:
                    raise ValueError(f"replay hub message of {size} bytes")
                if len(self._buf) >= 4 + size:
                    data = bytes(self._buf[4:4 + size])
                    del self._buf[:4 + size]
                    msg = json.loads(data)
                    if not isinstance(msg, dict):
                        raise ValueError("replay hub message is not an object")
                    return msg
            chunk = await self._stream.receive_some(1 << 16)
            if not chunk:
                if self._buf:
                    raise ValueError("replay hub stream ended inside a message")
                return None
            self._buf += chunk


def _nodelay(stream: trio.abc.Stream) -> None:
    if isinstance(stream, trio.SocketStream):
        stream.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, True)


class _Outbox:
    """What waits to go out on one connection: events in order, progress coalesced per connection, pongs.

    A batch is ``{"op": "pub", "ev": [...], "s": [conn, count ...], "p": [conn, count, conn, count ...]}``:
    events (``["v", key, value]``, ``["e", member, captured, replayed]``, already encoded), then "sent" counts,
    then settled counts, so nothing published before a count arrives after it."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self.events: list[list] = []
        self.progress: dict[int, int] = {}
        self.sent: dict[int, int] = {}
        self.pongs: list[Any] = []
        self.pings: list[int] = []
        self.batches = 0  # publication batches taken
        self._wake = trio.Event()
        self._urgent = trio.Event()  # a ping or pong: not held back by the batch interval

    def add_events(self, events: Iterable[list]) -> None:
        self.events.extend(events)
        self._wake.set()

    def add_progress(self, conn: int, count: int) -> None:
        if count > self.progress.get(conn, -1):
            self.progress[conn] = count
            self._wake.set()

    def add_sent(self, conn: int, count: int) -> None:
        if count > self.sent.get(conn, -1):
            self.sent[conn] = count
            self._wake.set()

    def add_pong(self, n: Any) -> None:
        self.pongs.append(n)
        self._wake.set()
        self._urgent.set()

    def add_ping(self, n: int) -> None:
        self.pings.append(n)
        self._wake.set()
        self._urgent.set()

    def wake(self) -> None:
        self._wake.set()

    def pending(self) -> bool:
        return bool(self.events or self.progress or self.sent or self.pongs or self.pings)

    async def wait(self, not_before: float = 0.0) -> None:
        """Until something is pending; publications (not pings/pongs) no earlier than Trio time ``not_before``."""
        await self._wake.wait()
        if trio.current_time() < not_before and not self._urgent.is_set():
            with trio.move_on_at(not_before):
                await self._urgent.wait()

    def take(self) -> bytes:
        """Everything pending as wire bytes (pongs stamped now), and empty again."""
        self._wake = trio.Event()
        self._urgent = trio.Event()
        out = b"".join(_frame({"op": "pong", "n": n, "t": self._clock()}) for n in self.pongs)
        out += b"".join(_frame({"op": "ping", "n": n}) for n in self.pings)
        if self.events or self.progress or self.sent:
            out += _frame({"op": "pub", "ev": self.events, "s": [x for kv in self.sent.items() for x in kv],
                           "p": [x for kv in self.progress.items() for x in kv]})
            self.batches += 1
        self.events, self.progress, self.sent, self.pongs, self.pings = [], {}, {}, [], []
        return out


# -- the hub (driver side) -------------------------------------------------------------------------

@dataclass
class HubStats:
    """Counters of a hub (read from any thread)."""

    clients: int = 0  # tasks that said hello
    clients_lost: int = 0  # ... and went away without goodbye
    messages_in: int = 0
    events_in: int = 0  # values and member epochs
    progress_in: int = 0  # progress counts (after the publishers' coalescing)
    bytes_out: int = 0


@dataclass
class _Peer:
    task: str
    conns: list[int]
    outbox: _Outbox


class HubServer:
    """The hub's state and connection handler, on the caller's Trio loop (:class:`ReplayHub` runs it in a
    thread)."""

    def __init__(self, clock: Clock = time.time_ns, batch_interval_s: float = DEFAULT_BATCH_INTERVAL_S) -> None:
        self.clock = clock
        self.batch_interval_s = batch_interval_s
        self.stats = HubStats()
        self._peers: dict[int, _Peer] = {}
        self._ids = iter(range(1 << 62))
        # The state a late task starts from: values (first wins, in arrival order), latest member epochs, counts.
        self._values: dict[str, list] = {}
        self._epochs: dict[str, list] = {}
        self._progress: dict[int, int] = {}
        self._sent: dict[int, int] = {}

    def _snapshot(self, outbox: _Outbox) -> None:
        outbox.add_events(self._values.values())
        outbox.add_events(self._epochs.values())
        for conn, count in self._sent.items():
            outbox.add_sent(conn, count)
        for conn, count in self._progress.items():
            outbox.add_progress(conn, count)

    def _publish(self, source: int, msg: dict) -> None:
        events = msg.get("ev") or []
        flat = msg.get("p") or []
        self.stats.events_in += len(events)
        self.stats.progress_in += len(flat) // 2
        for ev in events:
            if ev[0] == "v":
                self._values.setdefault(json.dumps(ev[1], separators=(",", ":")), ev)
            elif ev[0] == "e":
                self._epochs[ev[1]] = ev
        sent_flat = msg.get("s") or []
        counts = list(zip(flat[::2], flat[1::2]))
        sent = list(zip(sent_flat[::2], sent_flat[1::2]))
        for conn, count in counts:
            if count > self._progress.get(conn, -1):
                self._progress[conn] = count
        for conn, count in sent:
            if count > self._sent.get(conn, -1):
                self._sent[conn] = count
        for pid, peer in self._peers.items():
            if pid != source:
                if events:
                    peer.outbox.add_events(events)
                for conn, count in sent:
                    peer.outbox.add_sent(conn, count)
                for conn, count in counts:
                    peer.outbox.add_progress(conn, count)

    async def _writer(self, stream: trio.abc.Stream, outbox: _Outbox) -> None:
        last = -1e9
        while True:
            await outbox.wait(last + self.batch_interval_s)
            data = outbox.take()
            if data:
                last = trio.current_time()
                self.stats.bytes_out += len(data)
                await stream.send_all(data)

    async def handle(self, stream: trio.abc.Stream) -> None:
        """Serve one task's connection until it ends."""
        _nodelay(stream)
        pid = next(self._ids)
        outbox = _Outbox(self.clock)
        peer: _Peer | None = None
        graceful = False
        error = "closed the connection"
        async with stream, trio.open_nursery() as nursery:
            nursery.start_soon(self._writer, stream, outbox)
            reader = _MessageReader(stream)
            try:
                while (msg := await reader.next()) is not None:
                    self.stats.messages_in += 1
                    op = msg.get("op")
                    if op == "pub":
                        self._publish(pid, msg)
                    elif op == "ping":
                        outbox.add_pong(msg.get("n"))
                    elif op == "hello" and peer is None:
                        peer = _Peer(str(msg.get("task", pid)), [int(c) for c in msg.get("conns") or []], outbox)
                        self._snapshot(outbox)  # no await in between: nothing is missed or sent twice
                        self._peers[pid] = peer
                        self.stats.clients += 1
                        log.debug("replay hub: task %s connected (%d connection(s))", peer.task, len(peer.conns))
                    elif op == "bye":
                        graceful = True
                        break
                    else:
                        log.warning("replay hub: unexpected message %r", op)
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError, ValueError) as exc:
                error = f"connection error: {exc!r}"
            finally:
                self._peers.pop(pid, None)
                nursery.cancel_scope.cancel()
        if peer is not None and not graceful:
            self.stats.clients_lost += 1
            log.warning("replay hub: task %s %s without finishing; %d connection(s) of it are not replayed "
                        "further", peer.task, error, len(peer.conns))
            for other in self._peers.values():
                other.outbox.add_events([["lost", peer.task, peer.conns]])

    async def serve(self, port: int = 0, host: str | None = "0.0.0.0", *,
                    task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
        """Listen until cancelled; ``task_status.started`` gets the port."""
        async with trio.open_nursery() as nursery:
            listeners = await nursery.start(partial(trio.serve_tcp, self.handle, port, host=host))
            task_status.started(listeners[0].socket.getsockname()[1])


class ReplayHub:
    """:class:`HubServer` on its own Trio loop in a background thread, for synchronous code (the Spark driver).

    ``host`` is the address tasks are told to connect to (the driver's ``spark.driver.host``); ``bind`` the
    address listened on (all interfaces by default: executors on other machines connect)."""

    def __init__(self, host: str | None = None, port: int = 0, bind: str = "0.0.0.0",
                 clock: Clock = time.time_ns, batch_interval_s: float = DEFAULT_BATCH_INTERVAL_S) -> None:
        self.bind = bind
        self.port = port
        self.host = host or (bind if bind not in ("0.0.0.0", "::", "") else _local_address())
        self.server = HubServer(clock, batch_interval_s)
        self._thread: threading.Thread | None = None
        self._token: trio.lowlevel.TrioToken | None = None
        self._scope: trio.CancelScope | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None

    @property
    def stats(self) -> HubStats:
        return self.server.stats

    @property
    def address(self) -> tuple[str, int]:
        return self.host, self.port

    def now_ns(self) -> int:
        """The hub's clock (what tasks' clock offsets are relative to)."""
        return self.server.clock()

    def start(self) -> tuple[str, int]:
        """Start listening; returns the (host, port) tasks connect to."""
        if self._thread is not None:
            raise RuntimeError("the replay hub is already started")
        self._thread = threading.Thread(target=self._run, name="replay-hub", daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._error is not None:
            raise self._error
        log.info("replay hub listening on %s:%d (tasks connect to %s:%d)", self.bind, self.port, self.host, self.port)
        return self.address

    def _run(self) -> None:
        try:
            trio.run(self._main)
        except BaseException as exc:
            if not self._ready.is_set():
                self._error = exc
            else:
                log.exception("replay hub failed")
        finally:
            self._ready.set()

    async def _main(self) -> None:
        self._token = trio.lowlevel.current_trio_token()
        with trio.CancelScope() as scope:
            self._scope = scope
            async with trio.open_nursery() as nursery:
                self.port = await nursery.start(self.server.serve, self.port, self.bind)
                self._ready.set()

    def stop(self) -> None:
        """Stop listening and drop the tasks' connections."""
        if self._thread is None:
            return
        if self._token is not None and self._scope is not None:
            try:
                self._token.run_sync_soon(self._scope.cancel)  # from any thread, even another Trio loop's
            except trio.RunFinishedError:
                pass
        self._thread.join()
        self._thread = None

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _local_address() -> str:
    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return "127.0.0.1"


# -- a task's side ---------------------------------------------------------------------------------

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
        self._outbox = _Outbox(clock)
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
        """The target made up ``value`` for the captured ``key`` (:class:`~.rewrite._Mapper` keys)."""
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
        return self._clock() + self.offset_ns

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
            t0 = self._clock()
            self._outbox.add_ping(n)
            await waiter[0].wait()
            t1 = self._clock()
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
            await self._stream.send_all(_frame({"op": "bye"}))
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
                    self._on_member_epoch(ev[1], int(ev[2]), int(ev[3]))
            elif kind == "lost":
                log.warning("replay hub: task %s went away with %d connection(s)", ev[1], len(ev[2]))
                if self._on_lost is not None:
                    self._on_lost(ev[1], [int(c) for c in ev[2]])
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
        reader = _MessageReader(self._stream)
        try:
            while (msg := await reader.next()) is not None:
                op = msg.get("op")
                if op == "pub":
                    self._apply(msg)
                elif op == "pong":
                    waiter = self._pongs.pop(msg.get("n"), None)  # type: ignore[arg-type]
                    if waiter is not None:
                        waiter[1].append(int(msg["t"]))
                        waiter[0].set()
            if not self._closing:
                log.warning("replay hub closed the connection")
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError, ValueError) as exc:
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
                      clock: Clock = time.time_ns, clock_samples: int = DEFAULT_CLOCK_SAMPLES,
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
    _nodelay(stream)
    client = HubClient(stream, clock, on_progress, on_value, on_member_epoch, on_lost, batch_interval_s, on_sent)
    try:
        async with stream, trio.open_nursery() as nursery:
            await stream.send_all(_frame({"op": "hello", "task": task, "conns": list(conns)}))
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


class HubSync:
    """A Spark task's :class:`~.runner.ReplaySync`: the replay's :class:`~.causality.Progress` and
    :class:`~.rewrite._Mapper` published to the hub and fed with the other tasks' publications.

    ``conns`` are the plan's connection indexes this task replays, ``sizes`` the plan's requests per connection
    (a lost task's connections count as settled: the others carry on, their answers may differ)."""

    def __init__(self, address: Address, task: str, conns: Iterable[int], sizes: list[int],
                 clock: Clock = time.time_ns, clock_samples: int = DEFAULT_CLOCK_SAMPLES,
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
        return self.client.hub_now_ns() if self.client is not None else self._clock()


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
