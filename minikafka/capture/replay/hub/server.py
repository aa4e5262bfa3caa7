"""The replay hub's server side (runs on the Spark driver): the state every task may need -- values the target
made up, member epochs, progress counts -- and one handler per task connection that forwards each publication
to every other task and gives a late task a snapshot.  Like Kafka's group coordinator it is one process
everybody reaches over TCP; unlike it, it only relays.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from functools import partial

import trio

from ....common import SYSTEM_CLOCK, Clock
from .codec import HubMessageError, MessageReader, int_list, nodelay
from .outbox import DEFAULT_BATCH_INTERVAL_S, Outbox

log = logging.getLogger(__name__)


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
    outbox: Outbox


class HubServer:
    """The hub's state and connection handler, on the caller's Trio loop (:class:`~.threaded.ReplayHub` runs it
    in a thread).  ``clock`` is the hub's clock, the one tasks estimate their offset to."""

    def __init__(self, clock: Clock = SYSTEM_CLOCK, batch_interval_s: float = DEFAULT_BATCH_INTERVAL_S) -> None:
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

    def _snapshot(self, outbox: Outbox) -> None:
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

    async def _writer(self, stream: trio.abc.Stream, outbox: Outbox) -> None:
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
        nodelay(stream)
        pid = next(self._ids)
        outbox = Outbox(self.clock)
        peer: _Peer | None = None
        graceful = False
        error = "closed the connection"
        async with stream, trio.open_nursery() as nursery:
            nursery.start_soon(self._writer, stream, outbox)
            reader = MessageReader(stream)
            try:
                while (msg := await reader.next()) is not None:
                    self.stats.messages_in += 1
                    op = msg.get("op")
                    if op == "pub":
                        self._publish(pid, msg)
                    elif op == "ping":
                        outbox.add_pong(msg.get("n"))
                    elif op == "hello" and peer is None:
                        peer = _Peer(str(msg.get("task", pid)), int_list(msg.get("conns")), outbox)
                        self._snapshot(outbox)  # no await in between: nothing is missed or sent twice
                        self._peers[pid] = peer
                        self.stats.clients += 1
                        log.debug("replay hub: task %s connected (%d connection(s))", peer.task, len(peer.conns))
                    elif op == "bye":
                        graceful = True
                        break
                    else:
                        log.warning("replay hub: unexpected message %r", op)
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError, HubMessageError) as exc:
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
