"""Per-request context handed to handlers (Kafka's ``RequestContext``), free of any I/O."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True)
class RequestContext:
    """What a handler may know about a request besides its body.

    Models ``org.apache.kafka.common.requests.RequestContext``: the header
    fields, the connection it came on and the principal.  Handlers never see
    the socket.
    """

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    connection_id: str
    peer: str = ""
    principal: str = "User:ANONYMOUS"
    listener: str = "PLAINTEXT"
    received_ns: int = 0
    request_size: int = 0
    body_size: int = 0
    throttle_time_ms: int = 0
    notes: dict = field(default_factory=dict)
