"""Consumer settings (Java's ``org.apache.kafka.clients.consumer.ConsumerConfig``).

Names are the Java property names in snake_case (``fetch.min.bytes`` ->
``fetch_min_bytes``); :meth:`ConsumerConfig.from_kwargs` also accepts the
dotted Java spelling.  Defaults are Java's unless noted.

Deliberate differences:

- ``queued_max_chunks`` has no counterpart in the Java consumer of today; it is
  the old Scala consumer's ``queued.max.message.chunks`` (seed 004): the
  capacity of the bounded queue of fetched chunks (one chunk = the records of
  one partition from one fetch response, at most ``max_partition_fetch_bytes``).
  When the queue is full the fetcher blocks and sends no more fetches, so a
  slow application back-pressures fetching; buffered data is bounded by about
  ``queued_max_chunks x max_partition_fetch_bytes``.  The Scala default was 2;
  ours is 100 (chunks here are per partition, not per stream).
- ``enable_fetch_sessions`` switches KIP-227 sessions off (every fetch is a
  sessionless full fetch); Java has no such switch.
- ``max_poll_interval_ms`` is used as the JoinGroup rebalance timeout, as in
  Java, but it is not enforced on the application (no poll timer leaves the
  group).

Group protocols (KIP-848): ``group_protocol`` is ``"classic"`` (the default:
JoinGroup/SyncGroup, client-side assignors) or ``"consumer"``
(ConsumerGroupHeartbeat, the broker assigns; ``group_remote_assignor`` names
the broker's assignor, e.g. ``"uniform"`` or ``"range"``, None lets the broker
choose).  As Java's ``ConsumerConfig``, the classic-only settings
(``partition_assignment_strategy``, ``heartbeat_interval_ms``,
``session_timeout_ms``: the broker owns the session and the interval under the
consumer protocol) are rejected with ``group_protocol="consumer"`` and
``group_remote_assignor`` with ``"classic"``.  Java rejects any explicit
setting; here a setting is "set" when it differs from its default (a
dataclass cannot tell an explicit default from an omitted one).
"""

from __future__ import annotations

import dataclasses
import socket
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ConsumerConfig", "ISOLATION_LEVELS", "OFFSET_RESET_STRATEGIES", "GROUP_PROTOCOLS",
           "CONSUMER_PROTOCOL_UNSUPPORTED_CONFIGS", "CLASSIC_PROTOCOL_UNSUPPORTED_CONFIGS"]

ISOLATION_LEVELS = {"read_uncommitted": 0, "read_committed": 1}
OFFSET_RESET_STRATEGIES = ("earliest", "latest", "none")
GROUP_PROTOCOLS = ("classic", "consumer")
_DEFAULT_ASSIGNMENT_STRATEGY = ["range", "roundrobin"]
#: Java's ``CONSUMER_PROTOCOL_UNSUPPORTED_CONFIGS`` / ``CLASSIC_PROTOCOL_UNSUPPORTED_CONFIGS``.
CONSUMER_PROTOCOL_UNSUPPORTED_CONFIGS = ("partition_assignment_strategy", "heartbeat_interval_ms",
                                         "session_timeout_ms")
CLASSIC_PROTOCOL_UNSUPPORTED_CONFIGS = ("group_remote_assignor",)


@dataclass
class ConsumerConfig:
    """Every setting of :class:`~minikafka.client.consumer.KafkaConsumer`."""

    bootstrap_servers: str | list[str] = "localhost:9092"
    client_id: str = field(default_factory=lambda: f"minikafka-consumer-{socket.gethostname()}")
    group_id: str | None = None
    group_instance_id: str | None = None
    auto_offset_reset: str = "latest"
    enable_auto_commit: bool = True
    auto_commit_interval_ms: int = 5000
    fetch_min_bytes: int = 1
    fetch_max_wait_ms: int = 500
    fetch_max_bytes: int = 52428800
    max_partition_fetch_bytes: int = 1048576
    max_poll_records: int = 500
    session_timeout_ms: int = 45000
    heartbeat_interval_ms: int = 3000
    max_poll_interval_ms: int = 300000
    partition_assignment_strategy: list[str] = field(default_factory=lambda: list(_DEFAULT_ASSIGNMENT_STRATEGY))
    group_protocol: str = "classic"
    group_remote_assignor: str | None = None
    isolation_level: str = "read_uncommitted"
    queued_max_chunks: int = 100
    enable_fetch_sessions: bool = True
    check_crcs: bool = True
    request_timeout_ms: int = 30000
    retry_backoff_ms: int = 100
    metadata_max_age_ms: int = 300000
    default_api_timeout_ms: int = 60000
    metrics_num_samples: int = 2
    metrics_sample_window_ms: int = 30000

    def __post_init__(self) -> None:
        if self.auto_offset_reset not in OFFSET_RESET_STRATEGIES:
            raise ValueError(f"auto_offset_reset must be one of {OFFSET_RESET_STRATEGIES}")
        if self.isolation_level not in ISOLATION_LEVELS:
            raise ValueError(f"isolation_level must be one of {sorted(ISOLATION_LEVELS)}")
        if self.queued_max_chunks < 1:
            raise ValueError("queued_max_chunks must be at least 1")
        if self.max_poll_records < 1:
            raise ValueError("max_poll_records must be at least 1")
        if isinstance(self.partition_assignment_strategy, str):
            self.partition_assignment_strategy = [s.strip() for s in self.partition_assignment_strategy.split(",")]
        if self.heartbeat_interval_ms >= self.session_timeout_ms:
            raise ValueError("heartbeat_interval_ms must be lower than session_timeout_ms")
        self.group_protocol = str(self.group_protocol).lower()
        if self.group_protocol not in GROUP_PROTOCOLS:
            raise ValueError(f"group_protocol must be one of {GROUP_PROTOCOLS}")
        unsupported = (CONSUMER_PROTOCOL_UNSUPPORTED_CONFIGS if self.group_protocol == "consumer"
                       else CLASSIC_PROTOCOL_UNSUPPORTED_CONFIGS)
        defaults = {f.name: f.default if f.default_factory is dataclasses.MISSING else f.default_factory()
                    for f in dataclasses.fields(self)}
        for name in unsupported:
            if getattr(self, name) != defaults[name]:
                raise ValueError(f"{name} cannot be set when group_protocol={self.group_protocol!r}")

    @property
    def uses_consumer_protocol(self) -> bool:
        """True with ``group_protocol="consumer"`` (KIP-848)."""
        return self.group_protocol == "consumer"

    @property
    def isolation_level_id(self) -> int:
        return ISOLATION_LEVELS[self.isolation_level]

    @classmethod
    def from_kwargs(cls, **kwargs: Any) -> "ConsumerConfig":
        """Build from keyword settings; ``"fetch.min.bytes"`` spellings are accepted too."""
        names = {f.name for f in dataclasses.fields(cls)}
        out: dict[str, Any] = {}
        for key, value in kwargs.items():
            k = key.replace(".", "_").replace("-", "_")
            if k not in names:
                raise TypeError(f"unknown consumer setting {key!r}")
            out[k] = value
        return cls(**out)
