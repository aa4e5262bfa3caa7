"""Request dispatch (Kafka's ``KafkaApis``): header parsing, version checks, handlers, error responses.

:meth:`KafkaApis.parse` turns one request frame (without its size prefix)
into a :class:`~minikafka.broker.request.Request`, or raises
:class:`CloseConnection` where Kafka closes the connection (a frame too short
for a header, an unknown api key, an unsupported version of an api other than
ApiVersions, a body that does not parse).  :meth:`KafkaApis.handle` runs the
api's handler and returns a :class:`~minikafka.broker.request.Response` for the
socket server to send: the response buffers (record batches passed by
reference, never copied) and whether the throttled channel must be unmuted
first.  As in ``KafkaApis.handleError``, a handler that raises gets its
request answered with the error response (UNKNOWN_SERVER_ERROR or the mapped
code), logged once; the connection stays open.  A handler that raises
:class:`~minikafka.broker.error_responses.KafkaError` (Kafka's ``ApiException``: a refusal it chose) gets
the error response with that code, logged at debug level only.  Quota throttles are applied
through the quota managers with the connection's throttle callback (Kafka's
``sendResponseMaybeThrottle``); observers (capture, metrics) are told of each
request and response.  It never touches a socket.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from ..common import Clock
from ..protocol.api import APIS, ApiKey
from ..protocol.errors import ErrorCode
from ..protocol.exceptions import ProtocolError
from ..protocol.headers import encode_response_header, parse_request_header, response_header_version
from ..protocol.throttling import client_throttles_itself
from .error_responses import KafkaError, error_code_for, error_response
from .faults import (BrokerFaults, FaultPlan, merge_partition_errors, partition_errors, partition_layout,
                     split_request)
from .handlers.registry import Handler, supported_api_versions
from .quota import QuotaManagers, ThrottleCallback
from .request import Request, RequestContext, RequestObserver, Response
from .services import HandlerTimer

log = logging.getLogger(__name__)


class CloseConnection(Exception):
    """The request cannot be answered; Kafka would close the connection."""


class KafkaApis:
    """Turns request frames into responses for one broker, through handlers given their services."""

    def __init__(self, handlers: Mapping[int, Handler], quotas: QuotaManagers, timer: HandlerTimer, clock: Clock,
                 observers: Sequence[RequestObserver] = (), faults: BrokerFaults | None = None) -> None:
        self.handlers = dict(handlers)
        self.quotas = quotas
        self.timer = timer
        self.clock = clock
        self.observers: list[RequestObserver] = list(observers)
        self.faults = faults

    # -- parsing -------------------------------------------------------------------------------
    def parse(self, frame: bytearray, connection_id: str, peer: str = "") -> Request:
        """Parse header and body; raise CloseConnection or return the request."""
        try:
            hdr = parse_request_header(frame)
        except ProtocolError as exc:  # too short for a header, or truncated header tags
            raise CloseConnection(f"malformed request header ({exc})") from None
        ctx = RequestContext(
            api_key=hdr.api_key, api_version=hdr.api_version, correlation_id=hdr.correlation_id,
            client_id=hdr.client_id, connection_id=connection_id, peer=peer,
            received_ns=self.clock.monotonic_ns(), request_size=len(frame),
        )
        api = APIS.get(hdr.api_key)
        if api is None or hdr.api_key not in self.handlers:
            raise CloseConnection(f"unknown api key {hdr.api_key}")
        version = hdr.api_version
        if not api.request.supports(version):
            if hdr.api_key == ApiKey.API_VERSIONS:
                return Request(ctx, None, frame)  # answered with UNSUPPORTED_VERSION in a v0 body
            raise CloseConnection(
                f"unsupported version {version} of {api.name} (supported {api.min_version}-{api.max_version})")
        ctx.body_size = len(frame) - hdr.body_offset
        try:
            body = api.request.parse(memoryview(frame)[hdr.body_offset:], version)
        except ProtocolError as exc:
            raise CloseConnection(f"malformed {api.name} v{version} request: {exc}") from None
        return Request(ctx, body, frame)

    # -- handling ------------------------------------------------------------------------------
    async def handle(self, request: Request, channel: ThrottleCallback) -> Response:
        """Run the handler and encode its response; a throttle mutes ``channel`` through the quota."""
        for observer in self.observers:
            observer.on_request(request)
        ctx = request.context
        if request.body is None:
            response = self._unsupported_api_versions(request)
        elif self.faults is not None and (plan := self.faults.match(ctx.api_key, ctx.api_version, ctx.client_id,
                                                                    request.body)) is not None:
            response = await self._run_faulted(request, plan)
        else:
            response = await self._run_handler(request)
        if ctx.throttle_time_ms:
            self.quotas.by_type(ctx.throttle_quota).throttle(ctx.user, ctx.quota_client_id, channel,
                                                             ctx.throttle_time_ms)
            response.hold_until_unmuted = (response.segments is not None
                                           and not client_throttles_itself(ctx.api_key, ctx.api_version))
        for observer in self.observers:
            observer.on_response(response)
        return response

    def response_sent(self, response: Response) -> None:
        """The server sent the response (or, without one, finished the request)."""
        for observer in self.observers:
            observer.on_response_sent(response)

    def _unsupported_api_versions(self, request: Request) -> Response:
        """An ApiVersions version the broker does not know: error 35 in a v0 body (KIP-511)."""
        body = APIS[ApiKey.API_VERSIONS].response.build(
            {"error_code": ErrorCode.UNSUPPORTED_VERSION, "api_keys": supported_api_versions(self.handlers)}, 0)
        return Response(request, [encode_response_header(request.context.correlation_id, 0), body])

    async def _run_handler(self, request: Request) -> Response:
        body, error = await self._call_handler(request.context, request.body)
        return self._encode(request, body, error)

    async def _call_handler(self, ctx: RequestContext, request_body: Any) -> tuple[Any, int]:
        """The handler's response body (None: no response is due) and the error code if it failed."""
        started_ns = ctx.handler_started_ns = self.timer.task_ns()
        error = 0
        try:
            body = await self.handlers[ctx.api_key](ctx, request_body)
        except KafkaError as exc:  # a refusal the handler chose (Kafka's ApiException): not a broker fault
            log.debug("%s v%d (correlation id %d) from client %r on %s answered %s: %s", APIS[ctx.api_key].name,
                      ctx.api_version, ctx.correlation_id, ctx.client_id, ctx.connection_id, exc.code.name, exc)
            body = error_response(ctx.api_key, ctx.api_version, request_body, exc.code)
        except Exception as exc:  # Kafka's handleError: answer the request, keep the connection
            error = error_code_for(exc)
            log.exception("error handling %s v%d (correlation id %d) from client %r on %s; answering %s",
                          APIS[ctx.api_key].name, ctx.api_version, ctx.correlation_id, ctx.client_id,
                          ctx.connection_id, ErrorCode(error).name)
            body = error_response(ctx.api_key, ctx.api_version, request_body, error)
        self._apply_request_quota(ctx, self.timer.task_ns() - started_ns)
        return body, error

    async def _run_faulted(self, request: Request, plan: FaultPlan) -> Response:
        """Apply injected faults (:mod:`.faults`): latency, then a drop, an error instead of (or, per
        partition, besides) the handler, a held response, a drop instead of the response."""
        ctx = request.context
        await plan.delay()
        rule = plan.error
        # Per-partition errors where this version lists partitions in request and response, else whole.
        layout = partition_layout(ctx.api_key, ctx.api_version) if rule is not None and rule.per_partition else None
        if plan.drop_before:
            response = Response(request, None, close_connection=True)
        elif rule is None:
            response = await self._run_handler(request)
        elif layout is None:
            assert rule.error_code is not None
            no_response = ctx.api_key == ApiKey.PRODUCE and request.body["acks"] == 0
            body = None if no_response else error_response(ctx.api_key, ctx.api_version, request.body,
                                                           rule.error_code)
            response = self._encode(request, body, rule.error_code)
        else:
            assert self.faults is not None and rule.error_code is not None
            names = self.faults.topic_name
            faulted, kept = split_request(ctx.api_key, ctx.api_version, request.body, plan, names)
            body, error = await self._call_handler(ctx, kept)
            if body is not None:
                errors = error_response(ctx.api_key, ctx.api_version, faulted, rule.error_code)
                if not errors.get(layout.response.path[0]):
                    # Its error response has a top-level error only: each faulted partition answers the error.
                    errors = partition_errors(ctx.api_key, ctx.api_version, faulted, rule.error_code)
                body = merge_partition_errors(ctx.api_key, ctx.api_version, body, errors, plan, names)
            response = self._encode(request, body, error)
        if not plan.drop_before:
            await plan.wait_hold()
        if plan.drop_after:
            response.segments = None
            response.close_connection = True
        response.injected = plan.description
        log.debug("injected %s into %s v%d (correlation id %d) from client %r on %s", response.injected,
                  APIS[ctx.api_key].name, ctx.api_version, ctx.correlation_id, ctx.client_id, ctx.connection_id)
        return response

    def _encode(self, request: Request, body: Any, error: int) -> Response:
        """The response frame's buffers for a response body (None: no response)."""
        ctx = request.context
        api = APIS[ctx.api_key]
        if body is None:
            return Response(request, None)
        if ctx.throttle_time_ms and "throttle_time_ms" in body:
            body["throttle_time_ms"] = max(body["throttle_time_ms"], ctx.throttle_time_ms)
        header = encode_response_header(ctx.correlation_id,
                                        response_header_version(ctx.api_key, api.is_flexible(ctx.api_version)))
        try:
            segments = api.response.build_segments(body, ctx.api_version)
        except Exception:  # a response that does not encode is a broker bug: answer with the error
            error = ErrorCode.UNKNOWN_SERVER_ERROR
            log.exception("could not encode the %s v%d response to correlation id %d; answering %s",
                          api.name, ctx.api_version, ctx.correlation_id, ErrorCode(error).name)
            try:
                segments = api.response.build_segments(
                    error_response(ctx.api_key, ctx.api_version, request.body, error, ctx.throttle_time_ms),
                    ctx.api_version)
            except Exception as exc:  # a bug in the error response too: the connection closes (logged above)
                raise CloseConnection(f"cannot encode even an error response to {api.name} "
                                      f"v{ctx.api_version}: {exc}") from exc
        segments.insert(0, header)
        return Response(request, segments, error=error, body=body)

    def _apply_request_quota(self, ctx: RequestContext, handler_ns: int) -> None:
        """Charge the handler's run time to the request quota; remember the longest throttle."""
        if not ctx.exempt_request_quota and not ctx.request_quota_recorded:
            ctx.throttle("Request", self.quotas.request.maybe_record_request_time(
                ctx.user, ctx.quota_client_id, handler_ns))
