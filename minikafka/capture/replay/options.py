"""How to replay: :class:`ReplayOptions` (target, speed, in-flight limit, timeouts, causality) and their parsing."""

from __future__ import annotations

import math
from dataclasses import dataclass

DEFAULT_MAX_IN_FLIGHT = 5
DEFAULT_TIMEOUT_S = 30.0
DEFAULT_EXAMPLES = 5

ConnKey = tuple[int, str]  # (broker id, connection id) of the capture


def parse_speed(text: str) -> float | None:
    """``"max"`` -> None, ``"2x"``/``"0.5x"``/``"2"`` -> the factor."""
    t = text.strip().lower()
    if t == "max":
        return None
    value = float(t.removesuffix("x"))
    if not value > 0 or math.isinf(value):
        raise ValueError(f"speed must be a positive factor like 1x, or max, not {text!r}")
    return value


def parse_target(text: str) -> tuple[str, int]:
    """``host:port`` (``[v6addr]:port`` too)."""
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError(f"expected HOST:PORT, got {text!r}")
    return host.strip("[]"), int(port)


@dataclass
class ReplayOptions:
    """How to replay: where to, how fast, how much to wait for."""

    host: str
    port: int
    speed: float | None = 1.0  # None = as fast as order and causality allow ("max")
    max_in_flight: int = DEFAULT_MAX_IN_FLIGHT
    timeout_s: float = DEFAULT_TIMEOUT_S
    connect_timeout_s: float = 10.0
    causality: str = "global"  # "global" | "connection"
    max_examples: int = DEFAULT_EXAMPLES
    #: Wall-clock ns at which capture time ``first_ns`` is replayed (Spark tasks share it); None = now.
    base_time_ns: int | None = None
    #: Capture time replayed at the base time; None = the first receive time of the records replayed.
    first_ns: int | None = None

    @property
    def target(self) -> str:
        return f"{self.host}:{self.port}"
