"""A request on its way through the broker, free of any I/O.

:class:`RequestContext` models ``org.apache.kafka.common.requests.RequestContext``
(header fields, connection, principal) plus the per-request accounting that
Kafka keeps on ``RequestChannel.Request`` (throttle decision, quota
exemptions, handler start time); :class:`Request` and :class:`Response` are
``RequestChannel.Request`` / ``Response``: what :class:`~minikafka.broker.apis.KafkaApis`
takes from the socket server and gives back to it.  :class:`RequestObserver`
is the hook capture and metrics attach to.
"""

from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Callable
from typing import Any, Protocol


@dataclass(slots=True)
class FetchTrace:
    """What a Fetch did, for observers (capture, tests): its session context and, for a follower
    fetch, the bytes recorded into the leader replication quota."""

    context: str  # "sessionless", "full", "incremental" or "error"
    session_id: int | None = None
    leader_quota_recorded: int | None = None


@dataclass(slots=True)
class ClientInformation:
    """The client software a connection named in its ApiVersions request (v3+): Kafka's ``ClientInformation``,
    kept per connection (Kafka's ``ChannelMetadataRegistry``); empty until it names one.  The socket server puts
    the connection's on every request's context and the ApiVersions handler fills it in, so other requests pay
    nothing for it."""

    software_name: str = ""
    software_version: str = ""


@dataclass(slots=True)
class RequestContext:
    """What a handler may know about a request besides its body; handlers never see the socket."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    connection_id: str
    peer: str = ""
    principal: str = "User:ANONYMOUS"
    listener: str = "PLAINTEXT"
    security_protocol: str = "PLAINTEXT"  # the listener's (Kafka's RequestContext.securityProtocol)
    token_authenticated: bool = False  # logged in with a delegation token (KafkaPrincipal.tokenAuthenticated)
    received_ns: int = 0
    request_size: int = 0
    body_size: int = 0
    throttle_time_ms: int = 0
    throttle_quota: str = ""  # which quota type ("Produce", "Fetch", "Request") set throttle_time_ms
    exempt_request_quota: bool = False
    request_quota_recorded: bool = False  # the handler charged the request quota itself (Fetch)
    handler_started_ns: int = 0  # the task's run time when the handler started (request quota)
    fetch: FetchTrace | None = None
    client_information: ClientInformation | None = None  # the connection's (None outside the socket server)
    # Set while the response may leave from another task (a delayed fetch completed by the append that made
    # it completable, Kafka's DelayedFetch.tryComplete): called with the body, it sends the response at once.
    respond_early: Callable[[Any], None] | None = None
    early_response: Response | None = None  # what respond_early sent (the handler's return value is then unused)

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


@dataclass(slots=True)
class Request:
    """A parsed request: context, body (None for an ApiVersions version the broker does not know)
    and the frame it came in (record batches in the body are views into it)."""

    context: RequestContext
    body: Any
    frame: bytearray


@dataclass(slots=True)
class Response:
    """What the socket server sends: the response buffers (header first; None when no response is due,
    e.g. acks=0), and whether it must wait until the throttled channel is unmuted (versions older than
    KIP-219, whose clients do not back off by themselves)."""

    request: Request
    segments: list | None
    hold_until_unmuted: bool = False
    error: int = 0  # the error code of an error response built because the handler failed
    body: Any = None  # the response body the segments encode (for observers; None without a response)
    sent_ns: int = 0  # monotonic ns when the response left (set by the server before on_response_sent)
    injected: str = ""  # the fault rules that produced or changed this response, if any
    close_connection: bool = False  # close the connection instead of sending (an injected drop)

    @property
    def size(self) -> int:
        """Bytes on the wire, size prefix included (0 without a response)."""
        segments = self.segments
        if segments is None:
            return 0
        size = 4
        for s in segments:
            size += s.nbytes if type(s) is memoryview else len(s)
        return size


class RequestObserver(Protocol):
    """Told of every request (capture, metrics, tests).  Kafka's request logger / metrics hooks."""

    def on_request(self, request: Request) -> None:
        """Parsed, before the handler runs (the frame is as received)."""
        ...

    def on_response(self, response: Response) -> None:
        """Handled, before the response is sent."""
        ...

    def on_response_sent(self, response: Response) -> None:
        """The response left (or, without one, the request was handled)."""
        ...


class ObserverBase:
    """A :class:`RequestObserver` that ignores everything; subclass and override what you need."""

    def on_request(self, request: Request) -> None:
        pass

    def on_response(self, response: Response) -> None:
        pass

    def on_response_sent(self, response: Response) -> None:
        pass


class ResponseObserver(ObserverBase):
    """Calls ``fn(context, request_frame, response_segments)`` for every handled request, before its
    response is sent (``response_segments`` None when none is due)."""

    def __init__(self, fn: Callable[[RequestContext, bytearray, list | None], object]) -> None:
        self.fn = fn

    def on_response(self, response: Response) -> None:
        self.fn(response.request.context, response.request.frame, response.segments)
