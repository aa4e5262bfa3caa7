"""Reading broker state for the console: the running brokers, a partition's leader and its offsets.

Every read happens on the brokers' own Trio loop (the HTTP port runs there), when a console page asks:
nothing here runs, or costs anything, while no console is open.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from .context import ConsoleError

if TYPE_CHECKING:
    from ..admin_target import AdminTarget
    from ..broker import Broker
    from ..partition import Partition


class LogOffsets(NamedTuple):
    """A partition's log start offset, high watermark and log end offset on its leader (-1: unknown)."""

    log_start: int
    high_watermark: int
    log_end: int


UNKNOWN_OFFSETS = LogOffsets(-1, -1, -1)


def any_broker(target: AdminTarget) -> Broker:
    """A running broker, the lowest id (the coordinators and the metadata are shared by a cluster's
    brokers); 503 when none runs."""
    running = target.brokers()
    if not running:
        raise ConsoleError(503, "BROKER_NOT_AVAILABLE", "no broker is running")
    return running[min(running)]


def leader_partition(target: AdminTarget, topic: str, index: int) -> Partition | None:
    """The partition on the running broker leading it: the metadata's leader, else (during a leader
    change) any running replica that says it leads; None when no running broker leads it.  The one
    leader lookup of the console (offsets, lag, sizes, browsing and producing all agree)."""
    meta = target.metadata.get_topic(topic)
    running = target.brokers()
    if meta is not None and 0 <= index < meta.num_partitions:
        broker = running.get(meta.partitions[index].leader)
        if broker is not None:
            part = broker.replica_manager.get(topic, index)
            if part is not None and part.is_leader:
                return part
    for broker in running.values():
        part = broker.replica_manager.get(topic, index)
        if part is not None and part.is_leader:
            return part
    return None


def require_leader(target: AdminTarget, topic: str, index: int) -> Partition:
    """:func:`leader_partition`, or 404 (no such partition) / 503 (no running leader)."""
    meta = target.metadata.get_topic(topic)
    if meta is None or meta.partition(index) is None:
        raise ConsoleError(404, "UNKNOWN_TOPIC_OR_PARTITION", f"no partition {topic}-{index}")
    part = leader_partition(target, topic, index)
    if part is None:
        raise ConsoleError(503, "LEADER_NOT_AVAILABLE", f"{topic}-{index} has no running leader")
    return part


def leader_broker(target: AdminTarget, topic: str, index: int) -> Broker:
    """The running broker leading ``topic``-``index`` (404 unknown, 503 offline)."""
    part = require_leader(target, topic, index)
    for broker in target.brokers().values():
        if broker.replica_manager.get(topic, index) is part:
            return broker
    raise ConsoleError(503, "LEADER_NOT_AVAILABLE", f"{topic}-{index} has no running leader")


def log_offsets(target: AdminTarget, topic: str, index: int) -> LogOffsets:
    part = leader_partition(target, topic, index)
    if part is None:
        return UNKNOWN_OFFSETS
    lg = part.log
    return LogOffsets(lg.log_start_offset, lg.high_watermark, lg.log_end_offset)
