"""Broker liveness as KRaft's controller keeps it: heartbeats, and fencing when they stop.

:class:`BrokerHeartbeatManager` models the controller's ``BrokerHeartbeatManager``: every running broker of a
cluster heartbeats every ``broker.heartbeat.interval.ms`` (:meth:`touch`), and the controller fences a
broker it has not heard from for ``broker.session.timeout.ms`` (:meth:`stale`), which moves leadership off it
and drops it from every ISR, as a failed broker's partitions move in Kafka.  A broker that stops cleanly
does not wait for that: its controlled shutdown moves leadership first (:meth:`forget` ends its session).

Brokers of one process heartbeat by a method call that carries nothing else; brokers in processes of their own
send BrokerHeartbeat requests to a controller process (:mod:`~minikafka.broker.broker_lifecycle`), answered by
:class:`~minikafka.broker.quorum_controller.QuorumController` with this manager.
"""

from __future__ import annotations

from collections.abc import Iterable


class BrokerHeartbeatManager:
    """The last time (ms, the cluster's clock) each broker with a session was heard from."""

    def __init__(self) -> None:
        self.last_contact_ms: dict[int, int] = {}

    def touch(self, broker_id: int, now_ms: int) -> None:
        """A heartbeat from ``broker_id`` (its session starts with its first)."""
        self.last_contact_ms[broker_id] = now_ms

    def forget(self, broker_id: int) -> None:
        """End ``broker_id``'s session (fenced, or shut down in a controlled way)."""
        self.last_contact_ms.pop(broker_id, None)

    def stale(self, now_ms: int, session_timeout_ms: int, live: Iterable[int]) -> list[int]:
        """The ``live`` brokers whose session expired: not heard from for more than ``session_timeout_ms``."""
        return sorted(b for b in live
                      if b in self.last_contact_ms and now_ms - self.last_contact_ms[b] > session_timeout_ms)
