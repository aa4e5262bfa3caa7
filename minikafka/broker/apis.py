"""Request dispatch (Kafka's ``KafkaApis``): header parsing, version checks, handler lookup.

``KafkaApis.parse`` reads one request frame (without its size prefix);
``KafkaApis.handle`` returns the response frame payload as a list of buffers
(record batches are passed by reference, never copied), or ``None`` when no
response is due
(acks=0 produce).  It raises :class:`CloseConnection` where Kafka would close
the connection (unknown api key, unsupported version of an api other than
ApiVersions, a body that does not parse).  It never touches a socket.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any, Awaitable, Callable

from ..protocol.api import APIS, ApiKey
from ..protocol.errors import ErrorCode
from ..protocol.headers import (
    encode_response_header,
    parse_request_header_prefix,
    response_header_version,
    skip_header_tags,
)
from .request import RequestContext

if TYPE_CHECKING:
    from .broker import Broker

log = logging.getLogger(__name__)

Handler = Callable[["Broker", RequestContext, Any], Awaitable[dict | None]]
HANDLERS: dict[int, Handler] = {}


def handles(key: ApiKey) -> Callable[[Handler], Handler]:
    """Register ``fn`` as the handler of api ``key``."""

    def deco(fn: Handler) -> Handler:
        HANDLERS[int(key)] = fn
        return fn

    return deco


class CloseConnection(Exception):
    """The request cannot be answered; Kafka would close the connection."""


# Advertised minimum versions that differ from what is parsed.  Kafka 4.0 dropped
# Produce v0-2 but still advertises v0 (KAFKA-18659): librdkafka before 2.10 only
# compresses with gzip/snappy/lz4 when the broker claims Produce v0.  Requests
# below the parsed minimum still close the connection.
ADVERTISED_MIN_VERSION = {ApiKey.PRODUCE: 0}


def supported_api_versions() -> list[dict]:
    """The ApiVersions list: every api with a handler, and its version range."""
    return [
        {"api_key": k, "min_version": ADVERTISED_MIN_VERSION.get(k, APIS[k].min_version),
         "max_version": APIS[k].max_version}
        for k in sorted(HANDLERS)
        if k in APIS
    ]


class KafkaApis:
    """Turns request frames into response frames for one broker."""

    def __init__(self, broker: "Broker") -> None:
        from . import handlers  # noqa: F401  (registers every handler)

        self.broker = broker

    def parse(self, frame: bytes | memoryview, connection_id: str, peer: str = "") -> tuple[RequestContext, Any]:
        """Parse header and body; raise CloseConnection or return (ctx, request)."""
        try:
            hdr = parse_request_header_prefix(frame)
        except Exception as exc:  # too short for a header
            raise CloseConnection(f"malformed request header ({exc})") from None
        ctx = RequestContext(
            api_key=hdr.api_key,
            api_version=hdr.api_version,
            correlation_id=hdr.correlation_id,
            client_id=hdr.client_id,
            connection_id=connection_id,
            peer=peer,
            received_ns=time.monotonic_ns(),
            request_size=len(frame),
        )
        api = APIS.get(hdr.api_key)
        if api is None or hdr.api_key not in HANDLERS:
            raise CloseConnection(f"unknown api key {hdr.api_key}")
        version = hdr.api_version
        if not api.request.supports(version):
            if hdr.api_key == ApiKey.API_VERSIONS:
                return ctx, None  # answered with UNSUPPORTED_VERSION in a v0 body
            raise CloseConnection(
                f"unsupported version {version} of {api.name} (supported {api.min_version}-{api.max_version})"
            )
        try:
            off = hdr.body_offset
            if api.is_flexible(version):
                off = skip_header_tags(frame, off)
            ctx.body_size = len(frame) - off
            req = api.request.parse(memoryview(frame)[off:], version)
        except Exception as exc:
            raise CloseConnection(f"malformed {api.name} v{version} request: {exc}") from None
        return ctx, req

    def _apply_request_quota(self, ctx: RequestContext, handler_ns: int) -> None:
        """Charge the handler's run time to the request quota; remember the longest throttle."""
        quotas = self.broker.quotas
        if not ctx.exempt_request_quota and not ctx.notes.get("request_quota_done"):
            ctx.throttle("Request", quotas.request.maybe_record_request_time(
                ctx.user, ctx.quota_client_id, handler_ns))
        if ctx.throttle_time_ms:
            quotas.by_type(ctx.throttle_quota).record_throttle(ctx.user, ctx.quota_client_id,
                                                               ctx.throttle_time_ms)

    async def handle(self, ctx: RequestContext, req: Any) -> list | None:
        """Run the handler and encode its response: a list of buffers (header first), or None."""
        api = APIS[ctx.api_key]
        version = ctx.api_version
        if req is None and ctx.api_key == ApiKey.API_VERSIONS:
            # Unknown ApiVersions version: error 35 in a v0 body (KIP-511).
            body = APIS[ApiKey.API_VERSIONS].response.build(
                {"error_code": ErrorCode.UNSUPPORTED_VERSION, "api_keys": supported_api_versions()}, 0
            )
            return [encode_response_header(ctx.correlation_id, 0), body]
        broker = self.broker
        started_ns = ctx.notes["task_ns_start"] = broker.task_time.task_ns()
        resp = await HANDLERS[ctx.api_key](broker, ctx, req)
        self._apply_request_quota(ctx, broker.task_time.task_ns() - started_ns)
        if resp is None:
            return None
        if ctx.throttle_time_ms and "throttle_time_ms" in resp:
            resp["throttle_time_ms"] = max(resp["throttle_time_ms"], ctx.throttle_time_ms)
        flexible = api.is_flexible(version)
        header = encode_response_header(ctx.correlation_id, response_header_version(ctx.api_key, flexible))
        segments = api.response.build_segments(resp, version)
        segments.insert(0, header)
        return segments
