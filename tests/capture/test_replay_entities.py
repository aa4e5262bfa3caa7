"""The replay's renaming, routing and planning read where a message names topics, partitions, groups and
transactional ids from its declaration (the ``entity=`` tags, :mod:`minikafka.protocol.entities`): a new API
version is handled once it is declared, and every tagged name of every API is renamed."""

from __future__ import annotations

import itertools
import re
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from minikafka.capture import CaptureRecord
from minikafka.capture.frames import parse_request_frame
from minikafka.capture.replay import build_plan, group_connections
from minikafka.capture.replay.rename import CopyNames, rename_request, rename_request_frame, unrename_response
from minikafka.capture.replay.routing import merge_responses, request_partitions, split_request
from minikafka.protocol.api import APIS, Api
from minikafka.protocol.api import ApiKey as K
from minikafka.protocol.entities import Entity, entity_fields, values
from minikafka.protocol.headers import RequestHeader, is_flexible, request_header_version, response_header_bytes
from minikafka.protocol.schema import Field, Message, f

S3 = CopyNames(3, 10)

#: What the renaming does to each kind of name (the module docstring of ``rename``).
RENAMED: dict[Entity, Callable[[Any], Any]] = {
    Entity.TOPIC_NAME: S3.topic, Entity.GROUP_ID: S3.group, Entity.TRANSACTIONAL_ID: S3.transactional_id,
    Entity.CLIENT_ID: S3.client_id, Entity.TOPIC_REGEX: S3.topic_regex,
}

# -- a made-up Produce v14: its topics move to a new array with new field names ------------------------

_PARTITION_V3_13 = [f('index', 'int32', entity='partitionIndex'), f('records', 'records', nullable='0+')]
PRODUCE_V14 = Message('ProduceRequest', 0, "3-14", '9+', [
    f('transactional_id', 'string', '3+', nullable='3+', default=None, entity='transactionalId'),
    f('acks', 'int16'),
    f('timeout_ms', 'int32'),
    f('topic_data', [f('name', 'string', entity='topicName'), f('partition_data', _PARTITION_V3_13)], '3-13'),
    f('topic_batches', [
        f('topic', 'string', entity='topicName'),
        f('batches', [f('partition_number', 'int32', entity='partitionIndex'), f('records', 'records', nullable='0+')]),
    ], '14+'),
])
PRODUCE_V14_RESPONSE = Message('ProduceResponse', 0, "3-14", '9+', [
    f('responses', [
        f('name', 'string', entity='topicName'),
        f('partition_responses', [f('index', 'int32', entity='partitionIndex'), f('error_code', 'int16'),
                                  f('base_offset', 'int64')]),
    ], '3-13'),
    f('results', [
        f('topic', 'string', entity='topicName'),
        f('partitions', [f('partition_number', 'int32', entity='partitionIndex'), f('error_code', 'int16'),
                         f('base_offset', 'int64')]),
    ], '14+'),
    f('throttle_time_ms', 'int32', default=0),
])


@pytest.fixture
def produce_v14(monkeypatch: pytest.MonkeyPatch) -> None:
    """Produce declared with a v14 (nothing else changed)."""
    monkeypatch.setitem(APIS, K.PRODUCE, Api(K.PRODUCE, PRODUCE_V14, PRODUCE_V14_RESPONSE))


def _v14(topic: str, parts: list[int], tid: str | None = None) -> dict:
    return {"transactional_id": tid, "acks": -1, "timeout_ms": 1000, "topic_batches": [
        {"topic": topic, "batches": [{"partition_number": p, "records": None} for p in parts]}]}


def _v14_answer(topic: str, parts: list[int], base: int = 0) -> dict:
    return {"throttle_time_ms": 0, "results": [{"topic": topic, "partitions": [
        {"partition_number": p, "error_code": 0, "base_offset": base} for p in parts]}]}


def _frame(api_key: int, version: int, body: dict, client_id: str = "app", correlation_id: int = 1) -> bytes:
    header = RequestHeader.build({"request_api_key": api_key, "request_api_version": version,
                                  "correlation_id": correlation_id, "client_id": client_id},
                                 request_header_version(api_key, is_flexible(api_key, version)))
    return header + APIS[api_key].request.build(body, version)


def test_a_new_version_is_renamed(produce_v14: None) -> None:
    _, out = parse_request_frame(rename_request_frame(_frame(K.PRODUCE, 14, _v14("orders", [0], "tx")), S3))
    assert out.topic_batches[0].topic == "s3.orders"
    assert out.transactional_id == S3.transactional_id("tx")
    answer = PRODUCE_V14_RESPONSE.parse(PRODUCE_V14_RESPONSE.build(_v14_answer("s3.orders", [0]), 14), 14)
    unrename_response(K.PRODUCE, answer, S3, 14)
    assert answer.results[0].topic == "orders"


def test_a_new_version_is_routed_split_and_merged(produce_v14: None) -> None:
    body = PRODUCE_V14.parse(PRODUCE_V14.build(_v14("orders", [0, 1, 2]), 14), 14)
    assert list(request_partitions(K.PRODUCE, body, 14)) == [("orders", 0), ("orders", 1), ("orders", 2)]
    parts = split_request(K.PRODUCE, 14, body, {("orders", 0): 1, ("orders", 1): 2, ("orders", 2): 1})
    assert {n: [[b.partition_number for b in t.batches] for t in part.topic_batches] for n, part in parts.items()} \
        == {1: [[0, 2]], 2: [[1]]}
    merged = merge_responses(K.PRODUCE, 14, {1: _v14_answer("orders", [2, 0], 5), 2: _v14_answer("orders", [1], 7)},
                             body)
    assert [(t["topic"], [(p["partition_number"], p["base_offset"]) for p in t["partitions"]])
            for t in merged["results"]] == [("orders", [(0, 5), (1, 7), (2, 5)])]


def _record(conn: str, recv_ms: int, api_key: int, version: int, req: dict, resp: dict) -> CaptureRecord:
    """A request answered 1 ms after it was received, on connection ``conn``."""
    answer = response_header_bytes(1, api_key, version) + APIS[api_key].response.build(resp, version)
    return CaptureRecord(recv_ms * 1_000_000, (recv_ms + 1) * 1_000_000, conn, "peer", 0, "User:ANONYMOUS", conn,
                         api_key, version, 1, _frame(api_key, version, req, conn), answer)


def _list_offsets(conn: str, recv_ms: int, partition: int) -> CaptureRecord:
    return _record(conn, recv_ms, K.LIST_OFFSETS, 7, {
        "replica_id": -1, "isolation_level": 0, "topics": [{"name": "orders", "partitions": [
            {"partition_index": partition, "current_leader_epoch": -1, "timestamp": -1}]}]},
        {"throttle_time_ms": 0, "topics": [{"name": "orders", "partitions": [
            {"partition_index": partition, "error_code": 0, "timestamp": -1, "offset": 1, "leader_epoch": 0}]}]})


def test_a_new_version_is_planned(produce_v14: None) -> None:
    plan = build_plan(group_connections([
        _record("prod", 2, K.PRODUCE, 14, _v14("orders", [0]), _v14_answer("orders", [0])),
        _list_offsets("reader", 5, 0),  # reads the partition the produce wrote before it
        _list_offsets("other", 6, 1),  # another partition
    ]))
    conns = [k[1] for k in plan.keys]

    def deps(conn: str) -> dict[str, int]:
        d = plan.deps[plan.rid(conns.index(conn), 0)]
        return {conns[d[i]]: d[i + 1] for i in range(0, len(d), 2)}

    assert deps("reader") == {"prod": 1}
    assert deps("other") == {}


# -- every tagged name of every API ------------------------------------------------------------------------

_SCALARS: dict[str, Any] = {"bool": False, "float64": 0.0, "uuid": uuid.UUID(int=1), "bytes": b"", "records": b""}


def _body(fields: list[Field], version: int, names: Iterator[str], name: Callable[[Field, str], str]) -> dict:
    """A body of ``fields`` at ``version``: one element per array, ``name(field, s)`` with a distinct string ``s``
    per string (also in lists), zeros elsewhere."""
    out: dict[str, Any] = {}
    for fl in fields:
        if not fl.present(version):
            continue
        if fl.subfields:
            sub = _body(fl.subfields, version, names, name)
            out[fl.name] = [sub] if fl.is_array_of_structs else sub
            continue
        assert isinstance(fl.type, str)
        scalar = fl.type.removeprefix("[]")
        value = name(fl, next(names)) if scalar == "string" else _SCALARS.get(scalar, 0)
        out[fl.name] = [value] if fl.type.startswith("[]") else value
    return out


def _versions() -> Iterator[tuple[int, int]]:
    for key, api in sorted(APIS.items()):
        for version in range(api.min_version, api.max_version + 1):
            yield key, version


def _tagged(body: Any, message: Message, version: int) -> list[tuple[Entity, Any]]:
    """The renamed kinds of names in ``body``: one per tagged field (checked), as :func:`_body` sets them."""
    out = [(ef.entity, v) for ef, v in values(body, message, version, RENAMED)]
    assert len(out) == sum(ef.entity in RENAMED for ef in entity_fields(message, version)), message.name
    return out


@pytest.mark.parametrize("key, version", list(_versions()))
def test_every_tagged_name_is_renamed_and_back(key: int, version: int) -> None:
    api = APIS[key]
    names = (f"name{i}" for i in itertools.count())
    request = api.request.parse(api.request.build(_body(api.request.fields, version, names, lambda _, s: s),
                                                  version), version)
    before = _tagged(request, api.request, version)
    rename_request(key, request, S3, version)
    after = _tagged(request, api.request, version)
    assert len(after) == len(before)
    for (kind, old), (_, new) in zip(before, after):
        assert new == RENAMED[kind](old) != old, (api.name, version, kind, old, new)
    api.request.build(request, version)  # still a valid body

    def renamed(fl: Field, s: str) -> str:
        return RENAMED[Entity(fl.entity)](s) if fl.entity in RENAMED else s

    response = api.response.parse(api.response.build(_body(api.response.fields, version, names, renamed), version),
                                  version)
    before = _tagged(response, api.response, version)
    unrename_response(key, response, S3, version)
    after = _tagged(response, api.response, version)
    assert len(after) == len(before)
    for (kind, old), (_, new) in zip(before, after):
        assert new == re.search(r"name\d+", old)[0] != old, (api.name, version, kind, old, new)  # type: ignore[index]


_LEADER_APIS = (K.PRODUCE, K.FETCH, K.LIST_OFFSETS, K.OFFSET_FOR_LEADER_EPOCH, K.DELETE_RECORDS, K.DESCRIBE_PRODUCERS,
                K.SHARE_FETCH, K.SHARE_ACKNOWLEDGE)


@pytest.mark.parametrize("key, version", [(k, v) for k, v in _versions() if k in _LEADER_APIS])
def test_every_version_of_a_partitioned_api_names_its_partitions(key: int, version: int) -> None:
    """Routing finds the partition of every version's request and answer (their tags say where it is)."""
    api = APIS[key]
    names = (f"name{i}" for i in itertools.count())
    request = api.request.parse(api.request.build(_body(api.request.fields, version, names, lambda _, s: s),
                                                  version), version)
    [(topic, partition)] = request_partitions(key, request, version)
    assert partition == 0 and topic in ("name0", "name1", uuid.UUID(int=1)), topic
    answer = _body(api.response.fields, version, names, lambda _, s: s)
    merged = merge_responses(key, version, [answer, answer], request)  # one partition, answered twice: once
    assert merged == answer
