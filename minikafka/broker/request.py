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
    throttle_quota: str = ""  # which quota type ("Produce", "Fetch", "Request") set throttle_time_ms
    exempt_request_quota: bool = False
    notes: dict = field(default_factory=dict)

    @property
    def user(self) -> str:
        """The principal's name, as quotas see it (``ANONYMOUS`` without authentication)."""
        return self.principal.partition(":")[2] or self.principal

    @property
    def quota_client_id(self) -> str:
        return self.client_id or ""

    def throttle(self, quota_type: str, throttle_ms: int) -> None:
        """Keep the longest throttle any quota asked for, and which quota it was."""
        if throttle_ms > self.throttle_time_ms:
            self.throttle_time_ms = throttle_ms
            self.throttle_quota = quota_type
