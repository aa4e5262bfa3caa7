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

The per-request path is kept short, as Kafka's generated code keeps it: each (api key, version) met is
looked up once into an :class:`ApiVersionEntry` (its compiled body parser and response builder, its header
layouts), the body is parsed in place after the header, the response header is written into the response's
first buffer, and each observer hook is called only on the observers that implement it (the hook lists
are rebuilt when :attr:`KafkaApis.observers` changes), so an unused hook costs nothing.  Request quota
time is charged only while some entity has a request quota (Kafka records nothing otherwise either), and
fault rules are looked at only while one exists (``FaultInjector.active``).  The common Produce (one topic,
one partition, no authorizer, transaction or quota: ``ProduceHandler.handle_single``) is answered without
awaiting, its plain success written from a per-(version, topic, partition) template of the response bytes
that the version's builder wrote once (any other answer goes through the builder; any other request through
``ProduceHandler.handle``).
"""

from __future__ import annotations

import functools
import logging
import struct
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, SupportsIndex

from ..common import Clock
from ..protocol.api import APIS, ApiKey
from ..protocol.errors import ErrorCode
from ..protocol.exceptions import ProtocolError
from ..protocol.fastpath import PARSE_ERRORS, BuildFn, ParseFn3, builder_at, parser_at
from ..protocol.headers import (encode_response_header, parse_request_header, request_header_version,
                                response_header_version, skip_header_tags)
from ..protocol.throttling import client_throttles_itself
from ..protocol.types import SegmentedWriter
from .error_responses import KafkaError, error_code_for, error_response
from .faults import (BrokerFaults, FaultPlan, merge_partition_errors, partition_errors, partition_layout,
                     split_request)
from .handlers.registry import Handler, supported_api_versions
from .quota import QuotaManagers, ThrottleCallback
from .request import ObserverBase, Request, RequestContext, RequestObserver, Response
from .services import HandlerTimer

log = logging.getLogger(__name__)


class CloseConnection(Exception):
    """The request cannot be answered; Kafka would close the connection."""


_HEADER = struct.Struct(">hhih")  # api key, api version, correlation id, client id length
_CORRELATION = struct.Struct(">i")
_ProduceTemplate = tuple[struct.Struct, bytes, bytes]
_NO_TEMPLATE: Any = object()


class ApiVersionEntry:
    """One (api key, version) as the request path uses it: compiled body parser and response builder, and
    whether its request header (v2) and response header (v1) carry a tag section."""

    __slots__ = ("api", "name", "version", "parse", "build", "request_tags", "response_tags")

    def __init__(self, key: int, version: int) -> None:
        api = self.api = APIS[key]
        self.name = api.name
        self.version = version
        flexible = api.is_flexible(version)
        self.parse: ParseFn3 = parser_at(api.request.construct(version))
        self.build: BuildFn = builder_at(api.response.construct(version))
        self.request_tags = request_header_version(key, flexible) >= 2
        self.response_tags = response_header_version(key, flexible) >= 1


def _overrides(observer: object, hook: str) -> bool:
    """Whether ``observer`` does something on ``hook`` (not :class:`ObserverBase`'s no-op)."""
    impl = getattr(type(observer), hook, None)
    return hasattr(observer, hook) if impl is None else impl is not getattr(ObserverBase, hook)


class ObserverList(list[RequestObserver]):
    """:attr:`KafkaApis.observers`: a list of :class:`RequestObserver` that tells its owner when it changes."""

    __slots__ = ("_changed",)

    def __init__(self, items: Iterable[RequestObserver], changed: Callable[[], None]) -> None:
        super().__init__(items)
        self._changed = changed

    def append(self, item: Any) -> None:
        super().append(item)
        self._changed()

    def extend(self, items: Iterable[Any]) -> None:
        super().extend(items)
        self._changed()

    def insert(self, index: SupportsIndex, item: Any) -> None:
        super().insert(index, item)
        self._changed()

    def remove(self, item: Any) -> None:
        super().remove(item)
        self._changed()

    def pop(self, index: SupportsIndex = -1) -> Any:
        item = super().pop(index)
        self._changed()
        return item

    def clear(self) -> None:
        super().clear()
        self._changed()

    def __setitem__(self, index: Any, value: Any) -> None:
        super().__setitem__(index, value)
        self._changed()

    def __delitem__(self, index: Any) -> None:
        super().__delitem__(index)
        self._changed()

    def __iadd__(self, items: Iterable[Any]) -> ObserverList:  # type: ignore[override,misc]
        super().extend(items)
        self._changed()
        return self


class KafkaApis:
    """Turns request frames into responses for one broker, through handlers given their services."""

    def __init__(self, handlers: Mapping[int, Handler], quotas: QuotaManagers, timer: HandlerTimer, clock: Clock,
                 observers: Sequence[RequestObserver] = (), faults: BrokerFaults | None = None) -> None:
        self.handlers = dict(handlers)
        self.quotas = quotas
        self.timer = timer
        self.clock = clock
        self.faults = faults
        # The fused Produce path (the handler's handle_single, when it has one) and its response templates.
        self._produce_handle = self.handlers.get(ApiKey.PRODUCE)  # the fused path is its (not a replacement's)
        produce = getattr(self._produce_handle, "__self__", None)
        self._produce_single: Callable[[RequestContext, Any], tuple[Any, bool] | None] | None = getattr(
            produce, "handle_single", None)
        self._produce_templates: dict[tuple[int, str, int], _ProduceTemplate | None] = {}
        self._entries: dict[int, ApiVersionEntry] = {}  # (api key << 16 | version) -> entry, as met
        self._on_request: tuple[Callable[[Request], None], ...] = ()
        self._on_response: tuple[Callable[[Response], None], ...] = ()
        self._on_response_sent: tuple[Callable[[Response], None], ...] = ()
        self._observers = ObserverList(observers, self._observers_changed)
        self._observers_changed()

    @property
    def faults(self) -> BrokerFaults | None:
        """The fault rules this broker applies (None: never any)."""
        return self._faults

    @faults.setter
    def faults(self, faults: BrokerFaults | None) -> None:
        self._faults = faults
        self._injector = faults.injector if faults is not None else None

    @property
    def observers(self) -> list[RequestObserver]:
        """The request observers (capture, metrics, tests), told of each request in this order."""
        return self._observers

    @observers.setter
    def observers(self, observers: Iterable[RequestObserver]) -> None:
        self._observers = ObserverList(observers, self._observers_changed)
        self._observers_changed()

    def _observers_changed(self) -> None:
        observers = list(self._observers)
        self._on_request = tuple(o.on_request for o in observers if _overrides(o, "on_request"))
        self._on_response = tuple(o.on_response for o in observers if _overrides(o, "on_response"))
        self._on_response_sent = tuple(o.on_response_sent for o in observers if _overrides(o, "on_response_sent"))

    def _entry(self, api_key: int, version: int) -> ApiVersionEntry | None:
        """The entry of a version this broker declares (None for an unknown api or version)."""
        slot = (api_key << 16) | (version & 0xFFFF)
        entry = self._entries.get(slot)
        if entry is None:
            api = APIS.get(api_key)
            if api is None or not api.request.supports(version):
                return None
            entry = self._entries[slot] = ApiVersionEntry(api_key, version)
        return entry

    # -- parsing -------------------------------------------------------------------------------
    def parse(self, frame: bytearray, connection_id: str, peer: str = "") -> Request:
        """Parse header and body; raise CloseConnection or return the request."""
        try:
            api_key, version, correlation_id, n = _HEADER.unpack_from(frame, 0)
            entry = self._entries.get((api_key << 16) | (version & 0xFFFF))
            if entry is not None:
                if n >= 0:
                    offset = 10 + n
                    client_id: str | None = str(frame[10:offset], "utf-8", "replace")
                else:
                    offset, client_id = 10, None
                if entry.request_tags:
                    if frame[offset] == 0:  # no header tags: the usual case
                        offset += 1
                    else:
                        offset = skip_header_tags(frame, offset)
        except (struct.error, IndexError, ProtocolError):  # a header that does not parse: the reference path says why
            entry = None
        if entry is None:  # that, or the first of its version, an unknown api or version: the reference path
            return self._parse(frame, connection_id, peer)
        if api_key not in self.handlers:
            raise CloseConnection(f"unknown api key {api_key}")
        size = len(frame)
        ctx = RequestContext(api_key, version, correlation_id, client_id, connection_id, peer,
                             received_ns=self.clock.monotonic_ns(), request_size=size, body_size=size - offset)
        try:
            body = entry.parse(memoryview(frame), offset, size)[0]
        except PARSE_ERRORS:  # the reference parser raises the same failure as a ProtocolError
            body = self._parse_body(entry, frame, offset)
        return Request(ctx, body, frame)

    def _parse_body(self, entry: ApiVersionEntry, frame: bytearray, offset: int) -> Any:
        try:
            return entry.api.request.parse(memoryview(frame)[offset:], entry.version)
        except ProtocolError as exc:
            raise CloseConnection(f"malformed {entry.name} v{entry.version} request: {exc}") from None

    def _parse(self, frame: bytearray, connection_id: str, peer: str) -> Request:
        """The reference parse (the first request of each version, and every failure)."""
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
        self._entry(hdr.api_key, version)  # the next request of this version takes the short path
        return Request(ctx, body, frame)

    # -- handling ------------------------------------------------------------------------------
    async def handle(self, request: Request, channel: ThrottleCallback,
                     respond: Callable[[Response], None] | None = None) -> Response:
        """Run the handler and encode its response; a throttle mutes ``channel`` through the quota.  ``respond``
        (the server's, when it can send from any task): a Fetch completed by another task's append is sent
        through it from there (``RequestContext.respond_early``), and that response is returned."""
        for on_request in self._on_request:
            on_request(request)
        ctx = request.context
        injector = self._injector
        if request.body is None:
            response = self._unsupported_api_versions(request)
        elif injector is not None and injector.active and (plan := self._faults.match(  # type: ignore[union-attr]
                ctx.api_key, ctx.api_version, ctx.client_id, request.body)) is not None:
            response = await self._run_faulted(request, plan)
        elif (ctx.api_key == ApiKey.PRODUCE and not self.quotas.request.quotas_enabled
              and (fused := self._produce_fused(request)) is not None):
            response = fused
        else:
            if respond is not None and ctx.api_key == ApiKey.FETCH:
                ctx.respond_early = functools.partial(self._respond_early, request, respond)
            # _call_handler's steps, inline on this path every request takes (one coroutine less)
            started_ns = self._handler_started(ctx)
            error = 0
            try:
                body = await self.handlers[ctx.api_key](ctx, request.body)
            except Exception as exc:  # Kafka's handleError (or a refusal the handler chose)
                body, error = self._handler_failed(ctx, request.body, exc)
            self._charge_request_time(ctx, started_ns)
            # The context no longer refers to its request (the partial did: a reference cycle per Fetch, each
            # left to the cyclic garbage collector with its frame and response)
            ctx.respond_early = None
            if ctx.early_response is not None:
                return ctx.early_response  # sent from the task that completed it (observers told there)
            response = self._encode(request, body, error)
        if ctx.throttle_time_ms:
            self.quotas.by_type(ctx.throttle_quota).throttle(ctx.user, ctx.quota_client_id, channel,
                                                             ctx.throttle_time_ms)
            response.hold_until_unmuted = (response.segments is not None
                                           and not client_throttles_itself(ctx.api_key, ctx.api_version))
        for on_response in self._on_response:
            on_response(response)
        return response

    def _respond_early(self, request: Request, respond: Callable[[Response], None], body: Any) -> None:
        """A response sent before its handler returns, by the task that completed the request (a delayed fetch
        completed by an append; never throttled): encoded and told to the observers as in ``handle``."""
        response = self._encode(request, body, 0)
        for on_response in self._on_response:
            on_response(response)
        request.context.early_response = response
        respond(response)

    def response_sent(self, response: Response) -> None:
        """The server sent the response (or, without one, finished the request)."""
        for on_response_sent in self._on_response_sent:
            on_response_sent(response)

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
        started_ns = self._handler_started(ctx)
        error = 0
        try:
            body = await self.handlers[ctx.api_key](ctx, request_body)
        except Exception as exc:  # Kafka's handleError (or a refusal the handler chose): answer, keep the connection
            body, error = self._handler_failed(ctx, request_body, exc)
        self._charge_request_time(ctx, started_ns)
        return body, error

    def _handler_started(self, ctx: RequestContext) -> int:
        """The handler's start in task time, read only while some entity has a request quota (the instrument
        that measures it is installed at its first reading); -1 otherwise."""
        started_ns = ctx.handler_started_ns = self.timer.task_ns() if self.quotas.request.quotas_enabled else -1
        return started_ns

    def _charge_request_time(self, ctx: RequestContext, started_ns: int) -> None:
        """Charge the handler's run time to the request quota (while any entity has one; 0 for a quota set
        while it ran); keep the longest throttle."""
        request_quota = self.quotas.request
        if not ctx.exempt_request_quota and not ctx.request_quota_recorded and request_quota.quotas_enabled:
            ctx.throttle("Request", request_quota.maybe_record_request_time(
                ctx.user, ctx.quota_client_id, max(self.timer.task_ns() - started_ns, 0) if started_ns >= 0 else 0))

    @staticmethod
    def _handler_failed(ctx: RequestContext, request_body: Any, exc: Exception) -> tuple[Any, int]:
        """The error response to a handler that raised, and the error code if it failed (0 for a refusal)."""
        if isinstance(exc, KafkaError):  # a refusal the handler chose (Kafka's ApiException): not a broker fault
            log.debug("%s v%d (correlation id %d) from client %r on %s answered %s: %s", APIS[ctx.api_key].name,
                      ctx.api_version, ctx.correlation_id, ctx.client_id, ctx.connection_id, exc.code.name, exc)
            return error_response(ctx.api_key, ctx.api_version, request_body, exc.code), 0
        error = error_code_for(exc)
        log.exception("error handling %s v%d (correlation id %d) from client %r on %s; answering %s",
                      APIS[ctx.api_key].name, ctx.api_version, ctx.correlation_id, ctx.client_id,
                      ctx.connection_id, ErrorCode(error).name, exc_info=exc)
        return error_response(ctx.api_key, ctx.api_version, request_body, error), error

    def _produce_fused(self, request: Request) -> Response | None:
        """The common Produce (see ``ProduceHandler.handle_single``) answered without awaiting: a plain success
        is written from a template of its response bytes (built once per version, topic and partition by the
        version's builder), with its three numbers patched in.  None: the request takes the general path."""
        ctx = request.context
        if self._produce_single is None or self.handlers.get(ApiKey.PRODUCE) is not self._produce_handle:
            return None
        try:
            got = self._produce_single(ctx, request.body)
        except Exception as exc:  # as _call_handler answers a handler that raised
            body, error = self._handler_failed(ctx, request.body, exc)
            return self._encode(request, body, error)
        if got is None:
            return None
        body, plain = got
        if body is None or not plain:
            return self._encode(request, body, 0)
        topic = body["responses"][0]
        part = topic["partition_responses"][0]
        key = (ctx.api_version, topic["name"], part["index"])
        template = self._produce_templates.get(key, _NO_TEMPLATE)
        if template is _NO_TEMPLATE:
            template = self._produce_template(key, body)
        if template is None:
            return self._encode(request, body, 0)
        layout, prefix, suffix = template
        if ctx.api_version >= 5:
            frame = layout.pack(ctx.correlation_id, prefix, part["base_offset"], part["log_append_time_ms"],
                                part["log_start_offset"], suffix)
        else:
            frame = layout.pack(ctx.correlation_id, prefix, part["base_offset"], part["log_append_time_ms"], suffix)
        return Response(request, [frame], body=body)

    def _produce_template(self, key: tuple[int, str, int], body: Any) -> _ProduceTemplate | None:
        """(the response frame's layout: correlation id, the bytes before base_offset (response header tags
        included), base_offset, log_append_time_ms and (v5+) log_start_offset, the bytes after them; those
        bytes before; those after) for a plain Produce success body; None when the layout is not that."""
        version = key[0]
        entry = self._entry(ApiKey.PRODUCE, version)
        assert entry is not None
        marks = [struct.pack(">q", 0x5A5A_0000_0000_0101 + i) for i in range(3)]
        fields = struct.Struct(">qqq" if version >= 5 else ">qq")
        topic = body["responses"][0]
        marked = {**topic["partition_responses"][0], "base_offset": 0x5A5A_0000_0000_0101,
                  "log_append_time_ms": 0x5A5A_0000_0000_0102, "log_start_offset": 0x5A5A_0000_0000_0103}
        writer = SegmentedWriter()
        if entry.response_tags:
            writer.buf.append(0)
        entry.build({**body, "responses": [{**topic, "partition_responses": [marked]}]}, writer)
        built = b"".join(writer.getsegments())
        at = built.find(marks[0])
        template: _ProduceTemplate | None = None
        if at >= 0 and built.count(marks[0]) == 1 and built[at:at + fields.size] == b"".join(marks)[:fields.size]:
            prefix, suffix = built[:at], built[at + fields.size:]
            template = (struct.Struct(f">i{len(prefix)}s{fields.format[1:]}{len(suffix)}s"), prefix, suffix)
        if len(self._produce_templates) >= 4096:
            self._produce_templates.clear()
        self._produce_templates[key] = template
        return template

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
        """The response frame's buffers for a response body (None: no response): the header written into the
        first buffer, then the body through the version's compiled builder."""
        if body is None:
            return Response(request, None)
        ctx = request.context
        if ctx.throttle_time_ms and "throttle_time_ms" in body:
            body["throttle_time_ms"] = max(body["throttle_time_ms"], ctx.throttle_time_ms)
        entry = self._entry(ctx.api_key, ctx.api_version)
        assert entry is not None  # a parsed request's version is declared
        writer = SegmentedWriter()
        writer.buf += _CORRELATION.pack(ctx.correlation_id)
        if entry.response_tags:
            writer.buf.append(0)
        try:
            entry.build(body, writer)
            segments = writer.segments  # writer.getsegments(), without the fresh buffer it leaves behind
            if writer.buf:
                segments.append(writer.buf)
        except Exception:  # a response that does not encode is a broker bug: answer with the error
            api = entry.api
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
            segments.insert(0, encode_response_header(ctx.correlation_id, 1 if entry.response_tags else 0))
        return Response(request, segments, error=error, body=body)
