"""Rebalance callbacks (Java's ``ConsumerRebalanceListener``).

Pass a listener to :meth:`KafkaConsumer.subscribe`; both group protocols call it:

- ``on_partitions_revoked(partitions)``: the member gives these partitions up
  while still in the group (after committing them when auto-commit is on), so
  the application can commit what it processed;
- ``on_partitions_assigned(partitions)``: newly assigned partitions, before
  they are fetched (called after every reconciliation, maybe with an empty set,
  as Java does);
- ``on_partitions_lost(partitions)``: the member was fenced or expelled, so the
  partitions may already belong to another member: nothing may be committed
  for them.  The default calls ``on_partitions_revoked`` (as Java's default).

Each method may be a plain function or a coroutine function.  Deliberate
differences from Java: the classic protocol (eager) calls them from ``poll``
as Java; the consumer protocol (KIP-848) calls them from the consumer's
background task, where Java's background thread hands them to the
application thread's next ``poll``; an exception raised by a callback is
logged and raised from the next ``poll`` while the reconciliation goes on
(Java leaves the member unacknowledged until the broker fences it).
"""

from __future__ import annotations

import inspect
import logging
from typing import Any

from ..fetch_session import TopicPartition

log = logging.getLogger(__name__)

__all__ = ["ConsumerRebalanceListener", "invoke_listener"]


class ConsumerRebalanceListener:
    """No-op callbacks to override (Java's ``ConsumerRebalanceListener``)."""

    def on_partitions_revoked(self, partitions: set[TopicPartition]) -> Any:
        return None

    def on_partitions_assigned(self, partitions: set[TopicPartition]) -> Any:
        return None

    def on_partitions_lost(self, partitions: set[TopicPartition]) -> Any:
        return self.on_partitions_revoked(partitions)


async def invoke_listener(listener: Any, method: str, partitions: set[TopicPartition]) -> BaseException | None:
    """Call ``listener.<method>(partitions)`` (awaiting it if it is a coroutine); the exception it raised, if any.

    A listener without the method (a duck-typed object) is skipped; ``on_partitions_lost`` falls back
    to ``on_partitions_revoked`` as Java's default method does.
    """
    if listener is None:
        return None
    fn = getattr(listener, method, None)
    if fn is None and method == "on_partitions_lost":
        fn = getattr(listener, "on_partitions_revoked", None)
    if fn is None:
        return None
    try:
        result = fn(set(partitions))
        if inspect.isawaitable(result):
            await result
    except Exception as exc:  # the application's code: reported, never kills the consumer's tasks
        log.error("rebalance listener %s(%s) failed: %r", method, sorted(partitions), exc)
        return exc
    return None
