"""Producer configuration (Kafka's ``ProducerConfig``), Java names in snake_case.

Deliberate differences from the Java client:

* ``linger_ms`` defaults to 5, as Kafka 3.x's producer uses in practice (KIP-1030 makes 5 the
  default from Kafka 4.0; SPEC section 6 notes 0 for older clients).  Pass ``linger_ms=0`` for
  the old behaviour.
* ``retries`` defaults to 2**31-1 (Integer.MAX_VALUE) as in Java; delivery.timeout.ms bounds it.
* ``clock`` (seconds, default ``trio.current_time``) is injectable so tests can run on trio's
  MockClock; the producer's metrics and deadlines follow it.  Record timestamps come from ``wall_clock``, a
  :class:`~minikafka.common.clock.Clock` (Java's ``System.currentTimeMillis``).
* Java's dotted names are accepted too: ``ProducerConfig.from_dict({"linger.ms": 10})``.
* ``transactional_id`` implies idempotence (as Java's ``postProcessAndValidateIdempotenceConfigs``):
  left at None, ``enable_idempotence`` becomes True; explicitly False is an error.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Callable

import trio

from ...common.clock import SYSTEM_CLOCK, Clock

INT_MAX = 2**31 - 1

COMPRESSION_CODECS = {"none": 0, None: 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


@dataclass
class ProducerConfig:
    """Settings of :class:`~minikafka.client.producer.KafkaProducer` (``ProducerConfig``)."""

    bootstrap_servers: str | list[str] = "localhost:9092"
    client_id: str = ""
    acks: int | str = "all"
    linger_ms: float = 5
    batch_size: int = 16384
    buffer_memory: int = 33554432
    max_block_ms: int = 60000
    max_request_size: int = 1048576
    max_in_flight_requests_per_connection: int = 5
    retries: int = INT_MAX
    retry_backoff_ms: int = 100
    delivery_timeout_ms: int = 120000
    request_timeout_ms: int = 30000
    metadata_max_age_ms: int = 300000
    compression_type: str | None = "none"
    enable_idempotence: bool | None = None  # None: on unless acks/retries/in-flight conflict (Java 3.2+)
    partitioner: Callable[..., int] | None = None
    partitioner_ignore_keys: bool = False
    key_serializer: Callable[[Any], bytes | None] | None = None
    value_serializer: Callable[[Any], bytes | None] | None = None
    metrics_sample_window_ms: int = 30000
    metrics_num_samples: int = 2
    transactional_id: str | None = None  # set: a transactional producer (implies idempotence)
    transaction_timeout_ms: int = 60000
    clock: Callable[[], float] = field(default=trio.current_time, repr=False)
    wall_clock: Clock = field(default=SYSTEM_CLOCK, repr=False)

    def __post_init__(self) -> None:
        if isinstance(self.acks, str):
            a = self.acks.strip().lower()
            self.acks = -1 if a in ("all", "-1") else int(a)
        if self.acks not in (-1, 0, 1):
            raise ValueError(f"acks must be all, -1, 0 or 1, not {self.acks!r}")
        if self.compression_type not in COMPRESSION_CODECS:
            raise ValueError(f"unknown compression.type {self.compression_type!r}")
        if self.transactional_id is not None:
            if not self.transactional_id:
                raise ValueError("transactional.id must not be empty")
            if self.enable_idempotence is False:
                raise ValueError("Cannot set a transactional.id without also enabling idempotence.")
            self.enable_idempotence = True
        if self.transaction_timeout_ms <= 0:
            raise ValueError("transaction.timeout.ms must be positive")
        if self.enable_idempotence is None:
            # Java: idempotence defaults to true but is silently disabled when the user set
            # conflicting configs without setting enable.idempotence explicitly.
            self.enable_idempotence = (self.acks == -1 and self.retries > 0
                                       and self.max_in_flight_requests_per_connection <= 5)
        if self.enable_idempotence:
            # ProducerConfig.postProcessAndValidateIdempotenceConfigs
            if self.acks != -1:
                raise ValueError("enable.idempotence requires acks=all")
            if self.max_in_flight_requests_per_connection > 5:
                raise ValueError("enable.idempotence requires max.in.flight.requests.per.connection <= 5")
            if self.retries < 1:
                raise ValueError("enable.idempotence requires retries > 0")
        if self.delivery_timeout_ms < self.linger_ms + self.request_timeout_ms:
            raise ValueError("delivery.timeout.ms should be >= linger.ms + request.timeout.ms")
        if self.batch_size <= 0 or self.buffer_memory < self.batch_size:
            raise ValueError("batch.size must be > 0 and <= buffer.memory")

    @property
    def compression_codec(self) -> int:
        return COMPRESSION_CODECS[self.compression_type]

    @classmethod
    def from_dict(cls, settings: dict[str, Any]) -> "ProducerConfig":
        """Build from snake_case or Java dotted names (``linger.ms``)."""
        names = {f.name for f in fields(cls)}
        kw: dict[str, Any] = {}
        for k, v in settings.items():
            key = k.replace(".", "_")
            if key not in names:
                raise TypeError(f"unknown producer setting {k!r}")
            kw[key] = v
        return cls(**kw)
