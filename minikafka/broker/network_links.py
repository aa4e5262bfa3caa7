"""Injected network failures between the nodes of a cluster: paused brokers and cut links.

Kafka's system tests and Jepsen play these with ``SIGSTOP`` / ``SIGCONT`` and firewall rules on separate
machines; the brokers of a :class:`~minikafka.broker.cluster.Cluster` share one process, so
:class:`NetworkLinks` plays them at the points where a broker meets the network:

* a broker's socket server (:class:`LinkGate`, one per connection) neither handles a request nor writes a
  response while its broker is paused or the link to the connection's peer is cut: the peer's requests go
  unanswered, as packets are dropped (``iptables -j DROP``), until it times out or the link heals, and then
  what was queued goes through, as TCP retransmits it;
* connections a broker opens to another (replica fetchers, transaction markers, KIP-890 verification) are
  tagged with their source (:meth:`NetworkLinks.tag`), so the other side knows a broker from a client;
* the controller is a node too (:data:`CONTROLLER`): a broker cut from it or paused sends no heartbeat (the
  controller fences it after ``broker.session.timeout.ms``), gets no ISR change through (AlterPartition) and
  hears of no metadata change until it is back, when it catches up before it serves again;
* every client is the node :data:`CLIENTS`.

A network partition (:class:`NetworkPartition`) names sides: every link between nodes of different sides is
cut, in both directions; nodes it does not name keep their links.  Several partitions may hold at once; each
heals on request or after a time.

Deliberate differences from a stopped process or a firewall: a paused broker's housekeeping (log retention and
cleaning, the purgatories' expiry) goes on, though the responses it completes are held; a connection across a
cut link is still accepted (its requests then go unanswered, as after a SYN that got through); the cluster's
shared coordinators are not paused with the broker that hosts them, only the requests that reach them through
it.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from typing import Any

import trio

log = logging.getLogger(__name__)

CONTROLLER = "controller"
CLIENTS = "clients"
#: A node of the network: a broker id, :data:`CONTROLLER` or :data:`CLIENTS`.
NodeName = int | str

_TAGS_PRUNE_AT = 1024  # tagged connections kept before the closed ones are dropped


def parse_node(word: str | int) -> NodeName:
    """A node from the command line, a JSON body or code: a broker id, ``controller`` or ``clients``."""
    if isinstance(word, bool):
        raise ValueError(f"not a node: {word!r}")
    if isinstance(word, int):
        return word
    text = str(word).strip().lower()
    if text in (CONTROLLER, CLIENTS):
        return text
    return int(text)  # ValueError: not a node


@dataclass(frozen=True)
class NetworkPartition:
    """Links cut between ``sides`` (each a set of nodes), until healed (``heal_at``: trio time, or None)."""

    id: int
    sides: tuple[frozenset[NodeName], ...]
    heal_at: float | None = None

    def cuts(self, a: NodeName, b: NodeName) -> bool:
        """Whether this partition cuts the link between ``a`` and ``b``."""
        side_a = side_b = -1
        for i, side in enumerate(self.sides):
            if a in side:
                side_a = i
            if b in side:
                side_b = i
        return side_a >= 0 and side_b >= 0 and side_a != side_b

    def describe(self, now: float) -> dict[str, Any]:
        """As the HTTP port and the console show it at ``now`` (trio time): ``heals_in_s`` None if never."""
        heals_in = None if self.heal_at is None else round(max(self.heal_at - now, 0.0), 3)
        return {"id": self.id, "sides": [sorted(s, key=str) for s in self.sides], "heals_in_s": heals_in}


class NetworkLinks:
    """The paused brokers and the network partitions of a cluster (nothing, for a lone broker).

    ``active`` is False while nothing is paused or cut: the hot paths ask only that.  ``listeners`` are called
    (synchronously, before anyone waiting on a link wakes) after every change.
    """

    def __init__(self) -> None:
        self.paused: set[int] = set()
        self.partitions: dict[int, NetworkPartition] = {}
        self.active = False
        self.listeners: list[Callable[[], None]] = []
        self._changed = trio.Event()
        self._ids = itertools.count(1)
        self._tags: dict[tuple[str, int], tuple[NodeName, Any]] = {}

    # -- what holds ----------------------------------------------------------------------------------------
    def connected(self, a: NodeName, b: NodeName) -> bool:
        """Whether no partition cuts the link between ``a`` and ``b``."""
        return a == b or not any(p.cuts(a, b) for p in self.partitions.values())

    def reachable(self, broker: int, peer: NodeName) -> bool:
        """Whether ``broker`` runs (not paused) and its link to ``peer`` holds."""
        return not self.active or (broker not in self.paused and self.connected(broker, peer))

    async def wait_reachable(self, broker: int, peer: NodeName) -> None:
        """Return once :meth:`reachable` (at once when it is)."""
        while not self.reachable(broker, peer):
            await self._changed.wait()

    async def wait_running(self, broker: int) -> None:
        """Return once ``broker`` is not paused."""
        while broker in self.paused:
            await self._changed.wait()

    async def wait_change(self) -> None:
        """Return at the next change."""
        await self._changed.wait()

    # -- changes ---------------------------------------------------------------------------------------------
    def pause(self, broker: int) -> None:
        """``broker`` stops: it answers nothing, sends nothing and heartbeats no more (SIGSTOP)."""
        self.paused.add(broker)
        self._notify()

    def resume(self, broker: int) -> None:
        """``broker`` runs again (SIGCONT)."""
        self.paused.discard(broker)
        self._notify()

    def partition(self, sides: Iterable[Collection[NodeName]], heal_at: float | None = None) -> NetworkPartition:
        """Cut every link between nodes of different ``sides``; ValueError unless there are two sides or more,
        each naming a node, none named twice."""
        groups = tuple(frozenset(parse_node(n) for n in side) for side in sides)
        if len(groups) < 2 or not all(groups):
            raise ValueError("a network partition needs two sides or more, each naming a node")
        named = [n for g in groups for n in g]
        if len(named) != len(set(named)):
            raise ValueError("a node is on two sides of the partition")
        part = NetworkPartition(next(self._ids), groups, heal_at)
        self.partitions[part.id] = part
        log.info("network partition %d: links cut between %s", part.id,
                 " | ".join(" ".join(map(str, sorted(g, key=str))) for g in groups))
        self._notify()
        return part

    def heal(self, partition_id: int | None = None) -> list[NetworkPartition]:
        """Heal one partition (all without an id); returns those healed (KeyError: no such partition)."""
        if partition_id is None:
            healed = list(self.partitions.values())
            self.partitions.clear()
        else:
            healed = [self.partitions.pop(partition_id)]
        for part in healed:
            log.info("network partition %d healed", part.id)
        self._notify()
        return healed

    def heal_due(self, now: float) -> list[NetworkPartition]:
        """Heal the partitions whose time is up at ``now`` (trio time)."""
        due = [p.id for p in self.partitions.values() if p.heal_at is not None and p.heal_at <= now]
        return [h for pid in due for h in self.heal(pid)]

    def next_heal_at(self) -> float | None:
        return min((p.heal_at for p in self.partitions.values() if p.heal_at is not None), default=None)

    def forget(self, broker: int) -> None:
        """``broker`` stopped or crashed: a pause does not outlive its process."""
        if broker in self.paused:
            self.resume(broker)

    def _notify(self) -> None:
        self.active = bool(self.paused or self.partitions)
        for fn in list(self.listeners):
            fn()
        self._changed.set()
        self._changed = trio.Event()

    # -- whose connection is this ----------------------------------------------------------------------------
    def tag(self, sock: Any, source: NodeName) -> None:
        """The connection of ``sock`` (a trio socket this process opened) comes from broker ``source``."""
        try:
            addr = sock.getsockname()
        except OSError:
            return
        if len(self._tags) >= _TAGS_PRUNE_AT:
            self._tags = {a: t for a, t in self._tags.items() if t[1].fileno() != -1}
        self._tags[(addr[0], addr[1])] = (source, sock)

    def node_of(self, peername: tuple[str, int] | None) -> NodeName:
        """The node a connection with this peer address comes from: a broker that tagged it, else a client."""
        if peername is None:
            return CLIENTS
        tagged = self._tags.get(peername)
        if tagged is None or tagged[1].fileno() == -1:
            return CLIENTS
        return tagged[0]


class LinkGate:
    """One accepted connection's view of :class:`NetworkLinks`: whether its requests may be handled and its
    responses written now."""

    __slots__ = ("links", "broker", "peername")

    def __init__(self, links: NetworkLinks, broker: int, peername: tuple[str, int] | None) -> None:
        self.links = links
        self.broker = broker
        self.peername = peername

    def blocked(self) -> bool:
        links = self.links
        return links.active and not links.reachable(self.broker, links.node_of(self.peername))

    async def wait_open(self) -> None:
        """Return once the connection's link holds and its broker runs."""
        while self.blocked():
            await self.links.wait_change()
