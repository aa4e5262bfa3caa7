"""FetchSessionHandler (client side of KIP-227): pure logic, no broker.

Mirrors the cases of Kafka's FetchSessionHandlerTest: full then incremental
builds, added/altered/removed/replaced partitions, response verification and
every way back to a full fetch; plus the wire form of the built requests.
"""

from __future__ import annotations

import dataclasses
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from minikafka.client.fetch_session import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    ZERO_UUID,
    FetchMetadata,
    FetchSessionHandler,
    PartitionData,
    TopicIdPartition,
    TopicPartition,
)
from minikafka.protocol.errors import ErrorCode
from minikafka.protocol.messages.fetch import FetchRequest, FetchResponse

MAX = 0x7FFFFFFF
TID_A = uuid.UUID(int=0xA)
TID_B = uuid.UUID(int=0xB)


def pd(topic: str, partition: int, offset: int = 0, *, topic_id=ZERO_UUID, **kw) -> PartitionData:
    return PartitionData(topic, topic_id, partition, offset, **kw)


def build(h: FetchSessionHandler, *datas: PartitionData):
    b = h.new_builder()
    for d in datas:
        b.add(d.tp, d)
    return b.build()


def resp(session_id: int, *tps, error: int = 0, throttle: int = 0, ids: dict | None = None) -> dict:
    """A FetchResponse dict naming ``tps`` (topic, partition); ``ids`` maps topic -> topic id."""
    topics: dict[str, list] = {}
    for t, p in tps:
        topics.setdefault(t, []).append({"partition_index": p, "error_code": 0, "high_watermark": 0})
    return {"throttle_time_ms": throttle, "error_code": error, "session_id": session_id,
            "responses": [{"topic": t, "topic_id": (ids or {}).get(t, ZERO_UUID), "partitions": ps}
                          for t, ps in topics.items()]}


def req(data, version: int = 7, **kw) -> dict:
    args = dict(replica_id=-1, max_wait_ms=500, min_bytes=1, max_bytes=10485760)
    args.update(kw)
    return data.to_request(version, **args)


# -- FetchMetadata -------------------------------------------------------------------------

def test_metadata_constants_and_fullness():
    assert FetchMetadata.INITIAL == FetchMetadata(0, 0)
    assert FetchMetadata.LEGACY == FetchMetadata(0, -1)
    assert FetchMetadata.INITIAL.is_full and FetchMetadata.LEGACY.is_full
    assert FetchMetadata(7, INITIAL_EPOCH).is_full and FetchMetadata(7, FINAL_EPOCH).is_full
    assert not FetchMetadata(7, 1).is_full
    with pytest.raises(AttributeError):
        FetchMetadata.INITIAL.epoch = 3  # frozen


def test_metadata_transitions():
    md = FetchMetadata.new_incremental(123)
    assert md == FetchMetadata(123, 1)
    assert md.next_incremental() == FetchMetadata(123, 2)
    assert md.next_close_existing() == FetchMetadata(123, FINAL_EPOCH)
    assert md.next_close_existing_attempt_new() == FetchMetadata(123, INITIAL_EPOCH)
    assert FetchMetadata(123, MAX).next_incremental() == FetchMetadata(123, 1)  # wraps past 0
    assert FetchMetadata(123, FINAL_EPOCH).next_incremental().epoch == FINAL_EPOCH
    assert FetchMetadata.next_epoch(-5) == FINAL_EPOCH
    assert str(FetchMetadata.INITIAL) == "(sessionId=INVALID, epoch=INITIAL)"
    assert str(FetchMetadata(5, 9)) == "(sessionId=5, epoch=9)"


# -- building ------------------------------------------------------------------------------

def test_full_then_incremental_sessions():
    h = FetchSessionHandler(1)
    d = build(h, pd("foo", 0, 0), pd("foo", 1, 10))
    assert d.is_full and d.metadata == FetchMetadata.INITIAL
    assert list(d.to_send) == [("foo", 0), ("foo", 1)]
    assert d.to_forget == [] and d.session_partitions == d.to_send
    assert h.handle_response(resp(123, ("foo", 0), ("foo", 1)), 7)
    assert h.next_metadata == FetchMetadata(123, 1)

    # Same state: an empty incremental fetch.
    d = build(h, pd("foo", 0, 0), pd("foo", 1, 10))
    assert not d.is_full and d.metadata == FetchMetadata(123, 1)
    assert d.to_send == {} and d.to_forget == []
    assert set(d.session_partitions) == {("foo", 0), ("foo", 1)}
    assert h.handle_response(resp(123), 7)
    assert h.next_metadata == FetchMetadata(123, 2)

    # foo-1 moved, bar-0 added, foo-0 dropped.
    d = build(h, pd("foo", 1, 20), pd("bar", 0, 5))
    assert d.metadata == FetchMetadata(123, 2)
    assert list(d.to_send) == [("bar", 0), ("foo", 1)]  # added first, then altered (Java's order)
    assert d.to_send[("foo", 1)].fetch_offset == 20
    assert d.to_forget == [TopicIdPartition(ZERO_UUID, "foo", 0)]
    assert set(h.session_partitions) == {("foo", 1), ("bar", 0)}
    body = req(d)
    assert body["session_id"] == 123 and body["session_epoch"] == 2
    assert [(t["topic"], [p["partition"] for p in t["partitions"]]) for t in body["topics"]] == \
        [("bar", [0]), ("foo", [1])]
    assert body["forgotten_topics_data"] == [{"topic": "foo", "topic_id": ZERO_UUID, "partitions": [0]}]
    assert h.handle_response(resp(123, ("foo", 1)), 7)
    assert h.next_metadata == FetchMetadata(123, 3)


def test_altered_partition_fields_count_as_changes():
    h = FetchSessionHandler()
    base = pd("t", 0, 5, log_start_offset=0, max_bytes=100, current_leader_epoch=1, last_fetched_epoch=1)
    build(h, base)
    h.handle_response(resp(9, ("t", 0)), 12)
    for change in [dict(log_start_offset=3), dict(max_bytes=200), dict(current_leader_epoch=2),
                   dict(last_fetched_epoch=2), dict(fetch_offset=6)]:
        d = build(h, dataclasses.replace(base, **change))
        assert list(d.to_send) == [("t", 0)], change
        h.handle_response(resp(9), 12)
        d = build(h, base)  # and back
        assert list(d.to_send) == [("t", 0)]
        h.handle_response(resp(9), 12)


def test_add_checks_the_partition_key():
    b = FetchSessionHandler().new_builder()
    with pytest.raises(ValueError):
        b.add(("a", 1), pd("a", 2))
    b.add(TopicPartition("a", 2), pd("a", 2))
    b.build()
    with pytest.raises(RuntimeError):
        b.build()


def test_topic_id_replaced():
    h = FetchSessionHandler()
    build(h, pd("foo", 0, topic_id=TID_A), pd("foo", 1, topic_id=TID_A))
    assert h.handle_response(resp(5, ("foo", 0), ("foo", 1), ids={"foo": TID_A}), 13)
    assert h.session_topic_names == {TID_A: "foo"}
    d = build(h, pd("foo", 0, topic_id=TID_B), pd("foo", 1, topic_id=TID_A))
    assert list(d.to_send) == [("foo", 0)] and d.to_send[("foo", 0)].topic_id == TID_B
    assert d.to_forget == [] and d.to_replace == [TopicIdPartition(TID_A, "foo", 0)]
    assert d.can_use_topic_ids
    # v13: the old id is forgotten, the new one fetched.
    body13 = req(d, 13)
    assert [(t["topic_id"], len(t["partitions"])) for t in body13["topics"]] == [(TID_B, 1)]
    assert body13["forgotten_topics_data"] == [{"topic": "foo", "topic_id": TID_A, "partitions": [0]}]
    # v12: forgetting foo-0 by name would drop the partition just sent; Java leaves it out.
    assert req(d, 12)["forgotten_topics_data"] == []


def test_removing_a_partition_without_topic_id_disables_topic_ids():
    h = FetchSessionHandler()
    build(h, pd("a", 0), pd("b", 0, topic_id=TID_B))
    assert h.session_topic_names == {}
    assert h.handle_response(resp(5, ("a", 0), ("b", 0)), 12)
    d = build(h, pd("b", 0, topic_id=TID_B))
    assert not d.can_use_topic_ids and d.to_forget == [TopicIdPartition(ZERO_UUID, "a", 0)]
    with pytest.raises(ValueError):
        req(d, 13)


# -- request bodies ------------------------------------------------------------------------

def test_request_groups_consecutive_partitions_of_a_topic():
    h = FetchSessionHandler()
    d = build(h, pd("a", 0), pd("a", 1), pd("b", 0), pd("a", 2))
    topics = req(d)["topics"]
    assert [(t["topic"], [p["partition"] for p in t["partitions"]]) for t in topics] == \
        [("a", [0, 1]), ("b", [0]), ("a", [2])]


def test_request_fields_per_version_roundtrip():
    h = FetchSessionHandler()
    d = build(h, pd("t", 3, 42, topic_id=TID_A, log_start_offset=7, max_bytes=999, current_leader_epoch=4,
                    last_fetched_epoch=2))
    for version in (4, 6, 7, 11, 12, 13):
        body = req(d, version, replica_id=1, isolation_level=1, rack_id="r1")
        got = FetchRequest.parse(FetchRequest.build(body, version), version)
        assert got.replica_id == 1 and got.max_wait_ms == 500 and got.min_bytes == 1
        p = got.topics[0].partitions[0]
        assert (p.partition, p.fetch_offset, p.partition_max_bytes) == (3, 42, 999)
        if version >= 5:
            assert p.log_start_offset == 7
        if version >= 7:
            assert (got.session_id, got.session_epoch) == (0, 0) and got.forgotten_topics_data == []
        else:
            assert "session_id" not in body and "forgotten_topics_data" not in body
        if version >= 12:
            assert (p.current_leader_epoch, p.last_fetched_epoch) == (4, 2)
        if version >= 13:
            assert got.topics[0].topic_id == TID_A
        else:
            assert got.topics[0].topic == "t"
        if version >= 11:
            assert got.rack_id == "r1"


def test_seed_sizes_full_and_incremental():
    """The SPEC's seed: 500 partitions of one topic, 12031 B at v6, 12043 B at v7, then 33 B."""
    parts = [pd("test", i, 0, log_start_offset=0, max_bytes=1048576) for i in range(500)]
    kw = dict(replica_id=1, max_wait_ms=500, min_bytes=1, max_bytes=10485760)

    legacy = FetchSessionHandler(use_sessions=False)
    d = build(legacy, *parts)
    assert len(FetchRequest.build(d.to_request(6, **kw), 6)) == 12031
    assert len(FetchRequest.build(d.to_request(7, **kw), 7)) == 12043

    h = FetchSessionHandler()
    d = build(h, *parts)
    assert len(FetchRequest.build(d.to_request(7, **kw), 7)) == 12043
    assert h.handle_response(resp(77, *[p.tp for p in parts]), 7)
    for epoch in (1, 2, 3):
        d = build(h, *parts)
        body = d.to_request(7, **kw)
        assert (body["session_id"], body["session_epoch"]) == (77, epoch)
        assert len(FetchRequest.build(body, 7)) == 33
        assert h.handle_response(resp(77), 7)


def test_incremental_needs_v7():
    h = FetchSessionHandler()
    build(h, pd("t", 0))
    h.handle_response(resp(3, ("t", 0)), 7)
    d = build(h, pd("t", 0))
    with pytest.raises(ValueError):
        req(d, 6)


# -- responses -----------------------------------------------------------------------------

def _incremental(h: FetchSessionHandler, session_id: int = 123):
    build(h, pd("foo", 0), pd("foo", 1))
    assert h.handle_response(resp(session_id, ("foo", 0), ("foo", 1)), 7)
    build(h, pd("foo", 0), pd("foo", 1))
    assert h.next_metadata == FetchMetadata(session_id, 1)


def test_full_response_without_session_stays_full():
    h = FetchSessionHandler()
    build(h, pd("foo", 0))
    assert h.handle_response(resp(0, ("foo", 0)), 7)
    assert h.next_metadata == FetchMetadata.INITIAL
    assert build(h, pd("foo", 0)).is_full


def test_full_response_with_missing_or_extra_partitions_is_invalid():
    h = FetchSessionHandler()
    build(h, pd("foo", 0), pd("foo", 1))
    assert not h.handle_response(resp(5, ("foo", 0)), 7)  # omitted foo-1
    assert h.next_metadata == FetchMetadata.INITIAL
    build(h, pd("foo", 0))
    assert not h.handle_response(resp(5, ("foo", 0), ("bar", 0)), 7)  # extra bar-0
    assert h.next_metadata == FetchMetadata.INITIAL
    problem = h.verify_full_fetch_response_partitions([TopicPartition("bar", 0)], set(), 7)
    assert "omittedPartitions=(foo-0)" in problem and "extraPartitions=(bar-0)" in problem


def test_throttled_empty_full_response():
    h = FetchSessionHandler()
    build(h, pd("foo", 0))
    assert not h.handle_response(resp(0, throttle=100), 7)
    assert h.next_metadata == FetchMetadata.INITIAL


def test_incremental_response_with_extra_partition_closes_session():
    h = FetchSessionHandler()
    _incremental(h)
    assert not h.handle_response(resp(123, ("bar", 0)), 7)
    assert h.next_metadata == FetchMetadata(123, INITIAL_EPOCH)
    d = build(h, pd("foo", 0), pd("foo", 1))
    assert d.is_full and len(d.to_send) == 2
    assert (req(d)["session_id"], req(d)["session_epoch"]) == (123, 0)


def test_incremental_response_may_omit_partitions():
    h = FetchSessionHandler()
    _incremental(h)
    assert h.handle_response(resp(123, ("foo", 1)), 7)
    assert h.next_metadata == FetchMetadata(123, 2)


def test_incremental_response_with_session_0_means_closed_by_broker():
    h = FetchSessionHandler()
    _incremental(h)
    assert h.handle_response(resp(0), 7)
    assert h.next_metadata == FetchMetadata.INITIAL
    assert build(h, pd("foo", 0), pd("foo", 1)).is_full


@pytest.mark.parametrize("error, expected", [
    (ErrorCode.FETCH_SESSION_ID_NOT_FOUND, FetchMetadata.INITIAL),
    (ErrorCode.INVALID_FETCH_SESSION_EPOCH, FetchMetadata(123, INITIAL_EPOCH)),
    (ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR, FetchMetadata(123, INITIAL_EPOCH)),
    (ErrorCode.UNKNOWN_SERVER_ERROR, FetchMetadata(123, INITIAL_EPOCH)),
])
def test_top_level_errors(error, expected):
    h = FetchSessionHandler()
    _incremental(h)
    assert not h.handle_response(resp(0, error=int(error)), 7)
    assert h.next_metadata == expected
    assert build(h, pd("foo", 0), pd("foo", 1)).is_full


def test_handle_error_and_notify_close():
    h = FetchSessionHandler()
    _incremental(h)
    h.handle_error(ConnectionError("boom"))
    assert h.next_metadata == FetchMetadata(123, INITIAL_EPOCH)
    h = FetchSessionHandler()
    _incremental(h)
    h.notify_close()
    assert h.next_metadata == FetchMetadata(123, FINAL_EPOCH)
    d = build(h, pd("foo", 0))
    assert d.is_full and (req(d)["session_id"], req(d)["session_epoch"]) == (123, -1)


def test_epoch_wraps_to_1():
    h = FetchSessionHandler()
    _incremental(h)
    h.next_metadata = FetchMetadata(123, MAX)
    build(h, pd("foo", 0), pd("foo", 1))
    assert h.handle_response(resp(123), 7)
    assert h.next_metadata == FetchMetadata(123, 1)


def test_v13_responses_are_named_by_topic_id():
    h = FetchSessionHandler()
    build(h, pd("foo", 0, topic_id=TID_A))
    r = resp(5, ("foo", 0), ids={"foo": TID_A})
    r["responses"][0]["topic"] = ""
    assert list(h.response_data(r, 13)) == [("foo", 0)]
    assert h.handle_response(r, 13)
    build(h, pd("foo", 0, topic_id=TID_A))
    unknown = resp(5, ("bar", 0), ids={"bar": TID_B})
    assert h.response_data(unknown, 13) == {}
    assert "extraIds" in h.verify_incremental_fetch_response_partitions([], {TID_B}, 13)
    assert not h.handle_response(unknown, 13)
    assert h.next_metadata == FetchMetadata(5, INITIAL_EPOCH)


def test_parsed_response_containers_are_accepted():
    h = FetchSessionHandler()
    build(h, pd("foo", 0))
    raw = FetchResponse.build({"throttle_time_ms": 0, "error_code": 0, "session_id": 42, "responses": [
        {"topic": "foo", "partitions": [{"partition_index": 0, "error_code": 0, "high_watermark": 0,
                                         "aborted_transactions": None, "records": None}]}]}, 7)
    assert h.handle_response(FetchResponse.parse(raw, 7), 7)
    assert h.next_metadata == FetchMetadata(42, 1)


def test_v6_responses_never_start_a_session():
    h = FetchSessionHandler()
    d = build(h, pd("foo", 0))
    assert "session_id" not in req(d, 6)
    raw = FetchResponse.build({"throttle_time_ms": 0, "responses": [
        {"topic": "foo", "partitions": [{"partition_index": 0, "error_code": 0, "high_watermark": 0,
                                         "aborted_transactions": None, "records": None}]}]}, 6)
    assert h.handle_response(FetchResponse.parse(raw, 6), 6)
    assert h.next_metadata == FetchMetadata.INITIAL


# -- sessions switched off -----------------------------------------------------------------

def test_use_sessions_false_is_always_a_sessionless_full_fetch():
    h = FetchSessionHandler(use_sessions=False)
    assert h.next_metadata == FetchMetadata.LEGACY
    for _ in range(3):
        d = build(h, pd("foo", 0), pd("foo", 1))
        assert d.is_full and len(d.to_send) == 2
        body = req(d)
        assert (body["session_id"], body["session_epoch"], body["forgotten_topics_data"]) == (0, -1, [])
        assert h.handle_response(resp(99, ("foo", 0), ("foo", 1)), 7)  # a session id is ignored
        assert h.next_metadata == FetchMetadata.LEGACY
    assert not h.handle_response(resp(0, error=int(ErrorCode.FETCH_SESSION_ID_NOT_FOUND)), 7)
    h.handle_error(OSError())
    h.notify_close()
    assert h.next_metadata == FetchMetadata.LEGACY


# -- property: the broker's view of the session always equals what the client wants ------

_states = st.dictionaries(
    st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(0, 3)),
    st.tuples(st.integers(0, 3), st.integers(0, 1)),
    max_size=12,
)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(_states, st.sampled_from(["ok", "ok", "ok", "closed", "error", "lost"])),
                min_size=1, max_size=12))
def test_broker_view_matches_wanted_partitions(steps):
    """Replay built requests into a model of the broker's session cache (KIP-227 rules)."""
    h = FetchSessionHandler()
    broker: dict[TopicPartition, PartitionData] | None = None  # the session the broker holds
    next_id = 1
    for wanted, outcome in steps:
        datas = [pd(t, p, off, max_bytes=100 + mb) for (t, p), (off, mb) in wanted.items()]
        d = build(h, *datas)
        body = req(d)
        sent = {TopicPartition(t["topic"], p["partition"]): (p["fetch_offset"], p["partition_max_bytes"])
                for t in body["topics"] for p in t["partitions"]}
        if d.is_full:
            assert sent == {tp: (x.fetch_offset, x.max_bytes) for tp, x in ((x.tp, x) for x in datas)}
            view = dict(sent)
        else:
            assert broker is not None and body["session_id"] == session_id and body["session_epoch"] == epoch
            view = dict(broker)
            for f in body["forgotten_topics_data"]:
                for p in f["partitions"]:
                    del view[TopicPartition(f["topic"], p)]
            view.update(sent)
        assert view == {x.tp: (x.fetch_offset, x.max_bytes) for x in datas}
        if outcome == "lost":
            h.handle_error(ConnectionError())
            broker = None
            continue
        if outcome == "error":
            assert not h.handle_response(resp(0, error=int(ErrorCode.INVALID_FETCH_SESSION_EPOCH)), 7)
            broker = None
            continue
        if d.is_full:
            session_id, epoch = (0, 0) if outcome == "closed" else (next_id, 1)
            next_id += 1
            assert h.handle_response(resp(session_id, *view), 7)
            broker = view if session_id else None
        else:
            if outcome == "closed":
                assert h.handle_response(resp(0), 7)
                broker = None
            else:
                assert h.handle_response(resp(session_id), 7)
                broker = view
                epoch += 1
        assert h.next_metadata == (FetchMetadata(session_id, epoch) if broker is not None
                                   else FetchMetadata.INITIAL)
