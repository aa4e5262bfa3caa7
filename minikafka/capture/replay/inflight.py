"""A replayed request between its sending and its answer (Kafka's ``NetworkClient.InFlightRequest``).

:class:`ReplayedRequest` is a captured request sent again; :class:`Waiter` a request the replay sends on its
own (a KIP-368 re-authentication, a part of a request split per leader).  The reader of the link it went on
hands the answer over (``frame``, ``received_at``) and sets ``event``; a lost request gets the event without
a frame.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import trio

from ..format import CaptureRecord
from .rewrite import _Ctx


@dataclass
class Waiter:
    """A request the replay sends on its own and waits for."""

    frame: bytearray | None = None
    received_at: float = 0.0  # Trio time
    event: trio.Event = field(default_factory=trio.Event)


@dataclass
class ReplayedRequest:
    """A captured request as replayed: its request id in the plan, the captured record, when it went out and
    what came back."""

    rid: int
    rec: CaptureRecord
    ctx: _Ctx | None  # None: sent as captured (made when the answer needs a field-by-field comparison)
    known: bool  # decodable with the protocol layer
    sent_at: float = 0.0  # Trio time
    frame: bytearray | None = None
    received_at: float = 0.0  # Trio time
    event: trio.Event = field(default_factory=trio.Event)
    body: Any = None  # the parsed request, when routed on a cluster target (for TargetCluster.observe)
    node: int | None = None  # the target node it went to (None: split per leader, or not routed)
