"""KafkaApis' short request path gives what the reference path gives, and the request metrics still count.

KafkaApis parses the first request of each (api key, version) through the reference path (header parser,
``Message.parse``) and later ones in place through the compiled parser; it writes responses through the
version's compiled builder with the header in the first buffer.  These tests compare both paths byte for
byte over every version of Produce, Fetch, Metadata and OffsetCommit (random bodies from the schemas),
check that malformed requests are refused with the same reasons on both, that observer hooks follow
changes to ``KafkaApis.observers``, and that a real broker's request and topic metrics count requests
handled on the short path.
"""

from __future__ import annotations

import struct
from typing import Any

import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import batch
from message_strategies import message_strategy
from minikafka.broker.apis import CloseConnection, KafkaApis
from minikafka.broker.broker import serve_broker
from minikafka.broker.broker_metrics import count_errors, count_response_errors
from minikafka.broker.config import BrokerConfig
from minikafka.broker.quota import QuotaConfigs, QuotaManagers
from minikafka.broker.request import ObserverBase, Request, RequestContext, Response
from minikafka.common.clock import ManualClock
from minikafka.metrics import Metrics
from minikafka.protocol.api import APIS, ApiKey
from minikafka.protocol.headers import encode_response_header, parse_request_header, response_header_version

FAST = settings(max_examples=10, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
HOT = (ApiKey.PRODUCE, ApiKey.FETCH, ApiKey.METADATA, ApiKey.OFFSET_COMMIT)
CASES = [pytest.param(key, v, id=f"{APIS[key].name}-v{v}")
         for key in HOT for v in range(APIS[key].min_version, APIS[key].max_version + 1)]


class ZeroTimer:
    def task_ns(self) -> int:
        return 0


class Channel:
    def start_throttling(self) -> None:
        pass

    def end_throttling(self) -> None:
        pass


def make_apis(handlers: dict[int, Any], observers: Any = ()) -> KafkaApis:
    clock = ManualClock(1_000_000)
    quotas = QuotaManagers(QuotaConfigs(), Metrics(clock=clock), clock=clock)
    return KafkaApis(handlers, quotas, ZeroTimer(), clock, observers)


def request_frame(key: int, version: int, body: dict, correlation_id: int = 7, client_id: str | None = "cli",
                  header_tags: bytes = b"\x00") -> bytearray:
    """A request frame (no size prefix); ``header_tags``: the v2 header's tag section."""
    api = APIS[key]
    raw_id = b"" if client_id is None else client_id.encode()
    head = struct.pack(">hhih", key, version, correlation_id, -1 if client_id is None else len(raw_id)) + raw_id
    if api.is_flexible(version):
        head += header_tags
    return bytearray(head + api.request.build(body, version))


def reference_parse(frame: bytearray) -> tuple[Any, Any]:
    """The header and body as the protocol package reads them."""
    hdr = parse_request_header(frame)
    return hdr, APIS[hdr.api_key].request.parse(bytes(frame[hdr.body_offset:]), hdr.api_version)


def context_fields(ctx: RequestContext) -> tuple:
    return (ctx.api_key, ctx.api_version, ctx.correlation_id, ctx.client_id, ctx.connection_id, ctx.peer,
            ctx.request_size, ctx.body_size)


async def unused(ctx: RequestContext, body: Any) -> Any:
    raise AssertionError("not called")


@pytest.mark.parametrize("key,version", CASES)
@FAST
@given(data=st.data())
def test_short_parse_reads_what_the_reference_parse_reads(key: int, version: int, data: st.DataObject) -> None:
    body = data.draw(message_strategy(APIS[key].request, version))
    client_id = data.draw(st.sampled_from([None, "", "cli", "clé"]))
    tags = data.draw(st.sampled_from([b"\x00", b"\x01\x03\x02ab"]))  # none, or one unknown header tag
    frame = request_frame(key, version, body, client_id=client_id, header_tags=tags)
    hdr, expected = reference_parse(frame)
    apis = make_apis({key: unused})
    first = apis.parse(bytearray(frame), "c-1", "peer")  # the first of its version: the reference path
    again = apis.parse(bytearray(frame), "c-1", "peer")  # then the short one
    for request in (first, again):
        assert context_fields(request.context) == (key, version, 7, hdr.client_id, "c-1", "peer", len(frame),
                                                   len(frame) - hdr.body_offset)
        assert request.body == expected


@pytest.mark.parametrize("key,version", CASES)
@FAST
@given(data=st.data())
def test_short_encode_writes_what_the_reference_build_writes(key: int, version: int, data: st.DataObject) -> None:
    api = APIS[key]
    response_body = data.draw(message_strategy(api.response, version))
    request_body = api.request.default()

    async def handler(ctx: RequestContext, body: Any) -> Any:
        return response_body

    apis = make_apis({key: handler})
    frame = request_frame(key, version, request_body, correlation_id=-5)
    expected = (encode_response_header(-5, response_header_version(key, api.is_flexible(version)))
                + api.response.build(response_body, version))

    async def run() -> None:
        for _ in range(2):
            response = await apis.handle(apis.parse(bytearray(frame), "c"), Channel())
            assert b"".join(bytes(s) for s in response.segments) == expected
            assert response.size == 4 + len(expected) and response.body is response_body

    trio.run(run)


def test_malformed_requests_are_refused_alike_on_both_paths() -> None:
    """A truncated body, an unknown api key, an unsupported version, a truncated header: the same reason
    whether or not a good request of that version came first."""
    good = request_frame(ApiKey.METADATA, 12, {"topics": None})
    bad = [good[:-3], good[:11], good[:6], bytearray(b"\x7f\x00" + good[2:]),
           bytearray(good[:2] + b"\x00\x63" + good[4:])]
    cold = make_apis({ApiKey.METADATA: unused})
    warm = make_apis({ApiKey.METADATA: unused})
    warm.parse(bytearray(good), "c")
    for frame in bad:
        reasons = []
        for apis in (cold, warm):
            with pytest.raises(CloseConnection) as exc:
                apis.parse(bytearray(frame), "c")
            reasons.append(str(exc.value))
        assert reasons[0] == reasons[1], frame


def test_observer_hooks_follow_the_observer_list() -> None:
    seen: list[str] = []

    class Requests(ObserverBase):
        def on_request(self, request: Request) -> None:
            seen.append("request")

    class Sent(ObserverBase):
        def on_response_sent(self, response: Response) -> None:
            seen.append("sent")

    async def handler(ctx: RequestContext, body: Any) -> Any:
        return {"topics": []}

    apis = make_apis({ApiKey.METADATA: handler}, [ObserverBase()])
    frame = request_frame(ApiKey.METADATA, 12, {"topics": None})

    async def one() -> None:
        response = await apis.handle(apis.parse(bytearray(frame), "c"), Channel())
        apis.response_sent(response)

    async def run() -> None:
        await one()
        assert seen == []
        requests, sent = Requests(), Sent()
        apis.observers.append(requests)
        await one()
        assert seen == ["request"]
        apis.observers += [sent]
        await one()
        assert seen == ["request", "request", "sent"]
        apis.observers.remove(requests)
        await one()
        assert seen == ["request", "request", "sent", "sent"]
        apis.observers = []
        await one()
        assert seen == ["request", "request", "sent", "sent"] and apis.observers == []

    trio.run(run)


@pytest.mark.parametrize("key", [k for k in APIS if k not in (ApiKey.PRODUCE, ApiKey.FETCH)],
                         ids=lambda k: APIS[k].name)
@FAST
@given(data=st.data())
def test_schema_guided_error_counts_equal_the_full_walk(key: int, data: st.DataObject) -> None:
    api = APIS[key]
    version = data.draw(st.integers(api.min_version, api.max_version))
    body = data.draw(message_strategy(api.response, version))
    full: dict[int, int] = {}
    guided: dict[int, int] = {}
    count_errors(body, full)
    count_response_errors(key, body, guided)
    assert guided == full


async def test_request_metrics_count_requests_on_the_short_path() -> None:
    """Produce, Fetch, Metadata and OffsetCommit through a real broker's KafkaApis, many of each: the request
    totals, error counts, total-time histograms and the topic's bytes and messages in count every one."""
    n = 25
    async with serve_broker(BrokerConfig(port=0)) as broker:
        broker.create_topic("hot", 1, 1, {})
        topic_id = broker.metadata.get_topic("hot").topic_id
        records = batch([b"value"])
        frames = {
            ApiKey.PRODUCE: request_frame(ApiKey.PRODUCE, 10, {"acks": 1, "timeout_ms": 1000, "topic_data": [
                {"name": "hot", "partition_data": [{"index": 0, "records": records}]}]}),
            ApiKey.METADATA: request_frame(ApiKey.METADATA, 13, {"topics": [{"name": "hot"}]}),
            ApiKey.OFFSET_COMMIT: request_frame(ApiKey.OFFSET_COMMIT, 9, {
                "group_id": "g", "generation_id_or_member_epoch": -1, "member_id": "",
                "topics": [{"name": "hot", "partitions": [{"partition_index": 0, "committed_offset": 1}]}]}),
            ApiKey.FETCH: request_frame(ApiKey.FETCH, 16, {
                "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20, "session_epoch": -1,
                "topics": [{"topic_id": topic_id, "partitions": [
                    {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}]}),
        }
        apis = broker.apis
        for key, frame in frames.items():
            for _ in range(n):
                response = await apis.handle(apis.parse(bytearray(frame), "c-1"), Channel())
                response.sent_ns = broker.clock.monotonic_ns()
                apis.response_sent(response)
        m = broker.metrics()
    for key in frames:
        name = APIS[key].name
        assert m[f"kafka.network:type=RequestMetrics,name=RequestsTotal,request={name}"] == n
        assert m[f"kafka.network:type=RequestMetrics,name=RequestBytesTotal,request={name}"] == n * (
            len(frames[key]) + 4)
        assert m[f"kafka.network:type=RequestMetrics,name=TotalTimeMs,request={name}:Count"] == n
        assert m[f"kafka.network:type=RequestMetrics,name=ErrorsPerSec,request={name},error=NONE"] >= n
    assert m["kafka.network:type=RequestMetrics,name=TotalTimeMs,request=FetchConsumer:Count"] == n
    topic = "kafka.server:type=BrokerTopicMetrics,name={},topic=hot"
    assert m[topic.format("MessagesInPerSec")] == n
    assert m[topic.format("BytesInPerSec")] == n * len(records)
    assert m[topic.format("TotalProduceRequestsPerSec")] == n
    assert m[topic.format("TotalFetchRequestsPerSec")] == n
    assert m[topic.format("BytesOutPerSec")] == n * n * len(records)  # each fetch reads every batch so far
