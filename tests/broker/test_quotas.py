"""Client quotas at the protocol level: precedence, Describe/AlterClientQuotas, throttling.

Raw requests over :class:`KafkaConnection` against brokers with small quota
windows (``quota.window.size.seconds=1`` and 2 or 3 samples), so that every
throttle is a fraction of a second and each test takes a few seconds at most.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator

import pytest
import trio
import trio.testing

from minikafka.broker.broker import Broker, serve_broker
from minikafka.broker.config import BrokerConfig
from minikafka.broker.quota import DEFAULT, ClientQuotaEntity, QuotaConfigs
from minikafka.broker.quota.entity import parse_quota_spec
from minikafka.client.connection import KafkaConnection
from minikafka.metrics import java_round
from minikafka.protocol.api import ApiKey as K
from minikafka.protocol.errors import ErrorCode
from minikafka.protocol.records import iter_batches
from minikafka.broker.request import ResponseObserver

from helpers import batch, create, produce

P, C, R = "producer_byte_rate", "consumer_byte_rate", "request_percentage"


# -- helpers ------------------------------------------------------------------------------

@asynccontextmanager
async def quota_broker(*quotas: str, window_num: int = 2, timer: Any = None) -> AsyncIterator[Broker]:
    """A broker with 1 s quota windows, ``window_num`` samples and the given start-up quotas."""
    cfg = BrokerConfig(port=0, group_initial_rebalance_delay_ms=0, quota_window_num=window_num,
                       quota_window_size_seconds=1, client_quotas=list(quotas))
    async with serve_broker(cfg, timer=timer) as broker:
        yield broker


async def until(cond: Callable[[], bool]) -> None:
    """Let the other tasks run until ``cond`` holds (the Trio clock may be frozen: no sleeping)."""
    for _ in range(100_000):
        if cond():
            return
        await trio.sleep(0)
    raise AssertionError("condition never held")


async def api_versions(c: KafkaConnection) -> None:
    await c.request(K.API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})


async def connect(broker: Broker, client_id: str) -> KafkaConnection:
    return await KafkaConnection.connect("127.0.0.1", broker.port, client_id=client_id)


def produce_body(topic: str, records: bytes, acks: int = 1) -> dict:
    return {"acks": acks, "timeout_ms": 1000,
            "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": records}]}]}


def entity(**parts: str | None) -> list[dict]:
    """An entity as the quota APIs spell it; ``None`` is the default entity."""
    return [{"entity_type": k.replace("_", "-"), "entity_name": v} for k, v in parts.items()]


async def alter(conn: KafkaConnection, entries: list[tuple[list[dict], list[tuple[str, float | None]]]],
                validate_only: bool = False):
    """AlterClientQuotas; each op is (key, value) or (key, None) to remove."""
    body = {"validate_only": validate_only, "entries": [
        {"entity": ent, "ops": [{"key": k, "value": v or 0.0, "remove": v is None} for k, v in ops]}
        for ent, ops in entries]}
    return await conn.request(K.ALTER_CLIENT_QUOTAS, 1, body)


async def describe(conn: KafkaConnection, components: list[tuple[str, int, str | None]], strict: bool = False):
    return await conn.request(K.DESCRIBE_CLIENT_QUOTAS, 1, {
        "components": [{"entity_type": t, "match_type": m, "match": v} for t, m, v in components],
        "strict": strict})


def described(resp) -> dict[frozenset, dict[str, float]]:
    """{frozenset((entity_type, entity_name)): {key: value}} of a DescribeClientQuotas response."""
    assert resp.error_code == 0, resp.error_message
    return {frozenset((e.entity_type, e.entity_name) for e in entry.entity): {v.key: v.value for v in entry["values"]}
            for entry in resp.entries}


def ent(**parts: str | None) -> frozenset:
    return frozenset((k.replace("_", "-"), v) for k, v in parts.items())


# -- precedence (QuotaConfigs.resolve) -------------------------------------------------------

USER, CLIENT = "alice", "app"

# Kafka's eight levels, most specific first, with the metric tags (user, client-id) the
# matched entity gives the sensor (DefaultQuotaCallback.quotaMetricTags).
LEVELS = [
    (ClientQuotaEntity(USER, CLIENT), (USER, CLIENT)),        # /users/alice/clients/app
    (ClientQuotaEntity(USER, DEFAULT), (USER, CLIENT)),       # /users/alice/clients/<default>
    (ClientQuotaEntity(USER, None), (USER, "")),              # /users/alice
    (ClientQuotaEntity(DEFAULT, CLIENT), (USER, CLIENT)),     # /users/<default>/clients/app
    (ClientQuotaEntity(DEFAULT, DEFAULT), (USER, CLIENT)),    # /users/<default>/clients/<default>
    (ClientQuotaEntity(DEFAULT, None), (USER, "")),           # /users/<default>
    (ClientQuotaEntity(None, CLIENT), ("", CLIENT)),          # /clients/app
    (ClientQuotaEntity(None, DEFAULT), ("", CLIENT)),         # /clients/<default>
]


def test_precedence_peels_off_one_level_at_a_time():
    """All eight levels set: each removal of the winner hands over to the next level down."""
    configs = QuotaConfigs()
    for i, (e, _) in enumerate(LEVELS):
        configs.set(e, P, 1000.0 * (i + 1))
    for i, (e, tags) in enumerate(LEVELS):
        got = configs.resolve(P, USER, CLIENT)
        assert (got.bound, (got.user_tag, got.client_tag)) == (1000.0 * (i + 1), tags), f"level {i + 1}: {e}"
        configs.remove(e, P)
    got = configs.resolve(P, USER, CLIENT)
    assert got.bound is None and (got.user_tag, got.client_tag) == ("", CLIENT)


@pytest.mark.parametrize("level", range(len(LEVELS)), ids=[str(e) for e, _ in LEVELS])
def test_each_level_alone_applies_with_its_metric_tags(level):
    e, tags = LEVELS[level]
    configs = QuotaConfigs()
    configs.set(e, P, 4242)
    got = configs.resolve(P, USER, CLIENT)
    assert (got.bound, got.user_tag, got.client_tag) == (4242, *tags)
    # Every level below it loses to it, whatever its value.
    for lower, _ in LEVELS[level + 1:]:
        configs.set(lower, P, 1)
    assert configs.resolve(P, USER, CLIENT).bound == 4242


def test_precedence_is_per_quota_key_and_names_must_match():
    configs = QuotaConfigs()
    configs.set(ClientQuotaEntity(USER, CLIENT), C, 5)         # most specific, but another key
    configs.set(ClientQuotaEntity(None, DEFAULT), P, 7)
    configs.set(ClientQuotaEntity("bob", CLIENT), P, 9)         # another user: never applies to alice
    configs.set(ClientQuotaEntity(None, "other"), P, 11)        # another client id
    assert configs.resolve(P, USER, CLIENT).bound == 7
    assert configs.resolve(C, USER, CLIENT).bound == 5
    assert configs.resolve(R, USER, CLIENT).bound is None
    assert configs.resolve(P, "bob", CLIENT).bound == 9
    assert configs.resolve(P, "bob", "other").bound == 11
    # A /clients/<default> quota is per client id: each client id gets its own sensor.
    assert configs.resolve(P, USER, "x")[1:] == ("", "x")
    assert configs.resolve(P, USER, "y")[1:] == ("", "y")
    # A /users/alice quota is shared by all of alice's client ids (client-id tag empty).
    configs.set(ClientQuotaEntity(USER, None), P, 3)
    assert configs.resolve(P, USER, "x")[1:] == configs.resolve(P, USER, "y")[1:] == (USER, "")


def test_parse_quota_spec():
    assert parse_quota_spec("client-id=app1:producer_byte_rate=1048576") == (
        ClientQuotaEntity(None, "app1"), {P: 1048576.0})
    assert parse_quota_spec("user=alice,client-id=<default>:consumer_byte_rate=2e6,request_percentage=50") == (
        ClientQuotaEntity("alice", DEFAULT), {C: 2e6, R: 50.0})
    assert parse_quota_spec("user=<default>:producer_byte_rate=1") == (ClientQuotaEntity(DEFAULT, None), {P: 1.0})
    for bad in ("client-id=a", "client-id=a:bogus=1", "host=a:producer_byte_rate=1", "client-id=a:producer_byte_rate"):
        with pytest.raises(ValueError):
            parse_quota_spec(bad)


# -- DescribeClientQuotas / AlterClientQuotas ------------------------------------------------

async def test_alter_set_change_remove_and_validate_only():
    async with quota_broker() as broker:
        conn = await connect(broker, "admin")
        r = await alter(conn, [(entity(client_id="app"), [(P, 1000.0), (C, 2000.0)])])
        assert [(e.error_code, e.error_message) for e in r.entries] == [(0, None)]
        assert [(x.entity_type, x.entity_name) for x in r.entries[0].entity] == [("client-id", "app")]
        assert described(await describe(conn, [])) == {ent(client_id="app"): {P: 1000.0, C: 2000.0}}
        assert broker.quota_configs.resolve(P, "ANONYMOUS", "app").bound == 1000.0

        # Change one key, leave the other.
        await alter(conn, [(entity(client_id="app"), [(P, 1500.0)])])
        assert described(await describe(conn, [])) == {ent(client_id="app"): {P: 1500.0, C: 2000.0}}

        # validate_only: answered as if applied, nothing changes.
        r = await alter(conn, [(entity(client_id="app"), [(P, 1.0), (C, None)])], validate_only=True)
        assert r.entries[0].error_code == 0
        assert described(await describe(conn, [])) == {ent(client_id="app"): {P: 1500.0, C: 2000.0}}

        # Remove one key, then the last: the entity disappears.
        await alter(conn, [(entity(client_id="app"), [(C, None)])])
        assert described(await describe(conn, [])) == {ent(client_id="app"): {P: 1500.0}}
        await alter(conn, [(entity(client_id="app"), [(P, None)])])
        assert described(await describe(conn, [])) == {}
        assert broker.quota_configs.resolve(P, "ANONYMOUS", "app").bound is None
        # Removing what is not there is not an error.
        r = await alter(conn, [(entity(client_id="app"), [(P, None)])])
        assert r.entries[0].error_code == 0


async def test_alter_default_entity_has_a_null_name():
    async with quota_broker() as broker:
        conn = await connect(broker, "admin")
        r = await alter(conn, [(entity(client_id=None), [(P, 777.0)]),
                               (entity(user=None, client_id=None), [(C, 888.0)])])
        assert [e.error_code for e in r.entries] == [0, 0]
        assert [(x.entity_type, x.entity_name) for x in r.entries[0].entity] == [("client-id", None)]
        assert described(await describe(conn, [])) == {
            ent(client_id=None): {P: 777.0}, ent(user=None, client_id=None): {C: 888.0}}
        assert broker.quota_configs.get(ClientQuotaEntity(None, DEFAULT)) == {P: 777.0}
        # The defaults apply to any client id / user.
        assert broker.quota_configs.resolve(P, "ANONYMOUS", "whoever").bound == 777.0
        assert broker.quota_configs.resolve(C, "anyone", "whoever").bound == 888.0


async def test_alter_rejects_bad_entries_one_by_one():
    async with quota_broker() as broker:
        conn = await connect(broker, "admin")
        r = await alter(conn, [
            (entity(client_id="a"), [("bogus_rate", 5.0)]),               # invalid key
            (entity(client_id="b"), [(P, 0.0)]),                          # not positive
            (entity(client_id="c"), [(C, -3.0)]),                         # negative
            ([{"entity_type": "group", "entity_name": "g"}], [(P, 5.0)]),  # unknown entity type
            ([], [(P, 5.0)]),                                             # empty entity
            (entity(client_id="ok"), [(P, 5.0)]),                         # fine: applied despite the others
            (entity(client_id="d"), [(P, 1.0), ("bogus_rate", 1.0)]),     # one bad op: nothing applied
        ])
        codes = [(e.error_code, e.error_message) for e in r.entries]
        assert codes == [
            (ErrorCode.INVALID_REQUEST, "Invalid configuration key bogus_rate"),
            (ErrorCode.INVALID_REQUEST, f"Quota {P} must be greater than 0"),
            (ErrorCode.INVALID_REQUEST, f"Quota {C} must be greater than 0"),
            (ErrorCode.INVALID_REQUEST, "Unhandled client quota entity type: group"),
            (ErrorCode.INVALID_REQUEST, "Invalid empty client quota entity"),
            (0, None),
            (ErrorCode.INVALID_REQUEST, "Invalid configuration key bogus_rate"),
        ]
        assert [(x.entity_type, x.entity_name) for x in r.entries[3].entity] == [("group", "g")]
        assert described(await describe(conn, [])) == {ent(client_id="ok"): {P: 5.0}}


async def test_describe_filters_exact_default_any_and_strict():
    async with quota_broker() as broker:
        conn = await connect(broker, "admin")
        r = await alter(conn, [
            (entity(user="alice", client_id="app"), [(P, 1.0)]),
            (entity(user="alice", client_id=None), [(P, 2.0)]),
            (entity(user="alice"), [(C, 3.0)]),
            (entity(user=None), [(P, 4.0)]),
            (entity(client_id="app"), [(P, 5.0)]),
            (entity(client_id=None), [(R, 6.0)]),
        ])
        assert all(e.error_code == 0 for e in r.entries)
        ua, ud = ent(user="alice", client_id="app"), ent(user="alice", client_id=None)
        u, d, ca, cd = ent(user="alice"), ent(user=None), ent(client_id="app"), ent(client_id=None)
        EXACT, DEF, ANY = 0, 1, 2

        async def keys(components, strict=False) -> set:
            return set(described(await describe(conn, components, strict)))

        assert await keys([]) == {ua, ud, u, d, ca, cd}
        assert await keys([], strict=True) == set()  # strict: entities with exactly the filtered types
        assert await keys([("user", EXACT, "alice")]) == {ua, ud, u}
        assert await keys([("user", EXACT, "alice")], strict=True) == {u}
        assert await keys([("user", EXACT, "bob")]) == set()
        assert await keys([("user", DEF, None)]) == {d}
        assert await keys([("client-id", DEF, None)]) == {ud, cd}
        assert await keys([("client-id", DEF, None)], strict=True) == {cd}
        # "any specified name" matches every entity with that type, the default one included.
        assert await keys([("client-id", ANY, None)]) == {ua, ud, ca, cd}
        assert await keys([("client-id", ANY, None)], strict=True) == {ca, cd}
        assert await keys([("user", ANY, None)], strict=True) == {u, d}
        assert await keys([("user", EXACT, "alice"), ("client-id", DEF, None)]) == {ud}
        assert await keys([("user", ANY, None), ("client-id", ANY, None)], strict=True) == {ua, ud}
        assert await keys([("user", EXACT, "alice"), ("client-id", EXACT, "app")], strict=True) == {ua}
        # Values come with the entity.
        assert described(await describe(conn, [("client-id", EXACT, "app")], strict=True)) == {ca: {P: 5.0}}
        assert described(await describe(conn, [("user", EXACT, "alice")], strict=True)) == {u: {C: 3.0}}


@pytest.mark.parametrize("components, code, message", [
    ([("user", 0, None)], ErrorCode.INVALID_REQUEST,
     "Request specified MATCH_TYPE_EXACT, but set match string to null."),
    ([("user", 1, "x")], ErrorCode.INVALID_REQUEST,
     "Request specified MATCH_TYPE_DEFAULT, but also specified a match string."),
    ([("user", 2, "x")], ErrorCode.INVALID_REQUEST,
     "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string."),
    ([("user", 7, None)], ErrorCode.INVALID_REQUEST, "Unknown match type 7"),
    ([("user", 2, None), ("user", 0, "a")], ErrorCode.INVALID_REQUEST,
     "Entity type user cannot appear more than once in the filter."),
    ([("", 2, None)], ErrorCode.INVALID_REQUEST, "Invalid empty entity type."),
    ([("group", 2, None)], ErrorCode.UNSUPPORTED_VERSION, "Unsupported entity type group"),
], ids=["exact-null", "default-with-name", "any-with-name", "bad-match-type", "duplicate", "empty-type",
        "unknown-type"])
async def test_describe_rejects_bad_filters(components, code, message):
    async with quota_broker("client-id=app:producer_byte_rate=5") as broker:
        conn = await connect(broker, "admin")
        r = await describe(conn, components)
        assert (r.error_code, r.error_message, r.entries) == (code, message, None)


async def test_start_up_quotas_are_described():
    async with quota_broker("client-id=app1:producer_byte_rate=1048576",
                            "user=alice,client-id=<default>:consumer_byte_rate=2e6,request_percentage=50") as broker:
        conn = await connect(broker, "admin")
        assert described(await describe(conn, [])) == {
            ent(client_id="app1"): {P: 1048576.0},
            ent(user="alice", client_id=None): {C: 2e6, R: 50.0},
        }


# -- produce throttling -----------------------------------------------------------------------

async def test_produce_throttle_time_follows_kafkas_formula_and_mutes_the_connection(
        mock_clock: trio.testing.MockClock):
    """One produce over a young quota metric: the throttle time is Kafka's, computed by hand.

    Quota B = 900 B/s, quota.window.num N = 3, quota.window.size.seconds W = 1.
    The request is the first value the sensor records, so its sample starts at the
    record time and no time has elapsed: Rate.windowSize pads the elapsed 0 ms to
    N - 1 = 2 full windows, 2000 ms.  The rate is S / 2.0 s for a request of S bytes
    (the frame without its 4-byte size prefix, Kafka's request.sizeInBytes), and the
    throttle is round((rate - B) / B * 2000) ms (QuotaUtils.throttleTime).
    """
    B, N = 900.0, 3
    async with quota_broker(f"client-id=tiny:producer_byte_rate={B:g}", window_num=N) as broker:
        async with await connect(broker, "setup") as setup:
            await create(setup, "q")
        seen: list[tuple[int, int]] = []
        broker.observe(ResponseObserver(
            lambda ctx, frame, resp: seen.append((len(frame), ctx.throttle_time_ms))
            if ctx.api_key == K.PRODUCE else None))

        conn = await connect(broker, "tiny")
        other = await connect(broker, "tiny")  # same client id, another connection
        body = produce_body("q", batch([b"v" * 2000]))
        size = len(conn.encode_request(K.PRODUCE, 9, body, 1))
        window_ms = (N - 1) * 1000                    # 0 ms elapsed, padded to N-1 windows
        rate = size / (window_ms / 1000)              # bytes per second
        expected = java_round((rate - B) / B * window_ms)
        assert 200 < expected < 800, (size, expected)  # the test's premise: a clear, short throttle

        resp = await conn.request(K.PRODUCE, 9, body)
        answered = trio.current_time()
        assert resp.responses[0].partition_responses[0].error_code == 0
        assert resp.throttle_time_ms == expected
        assert seen == [(size, expected)]
        m = broker.metrics()
        assert m["Produce:client-id=tiny,user=/throttle-time"] == expected
        assert m["Produce:/queue-size"] == 1  # this connection is in the reaper's delay queue

        # KIP-219: the response came at once; now the connection is muted for the throttle time.
        # A request on it is read only when the reaper unmutes it; another connection is served at once.
        # (Trio's clock is frozen: the throttle passes only when the test moves it.)
        done: dict[str, float] = {}

        async def ask(c: KafkaConnection, name: str) -> None:
            await api_versions(c)
            done[name] = trio.current_time() - answered

        async with trio.open_nursery() as n:
            n.start_soon(ask, conn, "muted")
            await ask(other, "other")
            assert list(done) == ["other"] and broker.metrics()["Produce:/queue-size"] == 1
            mock_clock.jump(expected / 1000 - 0.001)
            await trio.testing.wait_all_tasks_blocked()
            assert list(done) == ["other"]  # 1 ms before the throttle ends: still muted
            mock_clock.jump(0.001)
        assert done == {"other": 0, "muted": pytest.approx(expected / 1000)}
        assert broker.metrics()["Produce:/queue-size"] == 0
        await conn.aclose()
        await other.aclose()


async def test_old_produce_version_gets_its_response_delayed_instead(mock_clock: trio.testing.MockClock):
    """Produce v5 predates KIP-219: its client does not back off, so the broker holds the response."""
    B, N = 900.0, 3
    async with quota_broker(f"client-id=<default>:producer_byte_rate={B:g}", window_num=N) as broker:
        async with await connect(broker, "setup") as setup:
            await create(setup, "q")
        conn = await connect(broker, "old-client")
        body = produce_body("q", batch([b"v" * 2000]))
        size = len(conn.encode_request(K.PRODUCE, 5, body, 1))
        window_ms = (N - 1) * 1000
        expected = java_round((size / (window_ms / 1000) - B) / B * window_ms)
        assert 200 < expected < 800

        got: list = []

        async def send() -> None:
            got.append(await conn.request(K.PRODUCE, 5, body))

        async with trio.open_nursery() as n:
            n.start_soon(send)
            await until(lambda: broker.reaper.size == 1)  # handled, throttled, the response held
            async with await connect(broker, "meanwhile") as other:
                await api_versions(other)
            assert not got  # Trio's clock is frozen: the throttle has not passed
            mock_clock.jump(expected / 1000)
        resp = got[0]
        assert resp.throttle_time_ms == expected
        assert resp.responses[0].partition_responses[0].error_code == 0
        # The delay has been served: the response left when the reaper unmuted the connection.
        assert broker.reaper.size == 0 and broker.metrics()["Produce:/queue-size"] == 0
        await api_versions(conn)
        # Each client id under a /clients/<default> quota has its own sensor.
        m = broker.metrics()
        assert "Produce:client-id=old-client,user=/byte-rate" in m
        assert m["Produce:client-id=old-client,user=/throttle-time"] == expected
        await conn.aclose()


async def test_acks0_produce_over_quota_mutes_without_a_response():
    B, N = 900.0, 3
    async with quota_broker(f"client-id=fire:producer_byte_rate={B:g}", window_num=N) as broker:
        async with await connect(broker, "setup") as setup:
            await create(setup, "q")
        conn = await connect(broker, "fire")
        body = produce_body("q", batch([b"v" * 2000]), acks=0)
        size = len(conn.encode_request(K.PRODUCE, 9, body, 1))
        expected = java_round((size / 2.0 - B) / B * 2000)
        t = trio.current_time()
        await conn.send(K.PRODUCE, 9, body)  # no response to acks=0
        resp = await conn.request(K.API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})
        assert resp.error_code == 0
        assert trio.current_time() - t >= expected / 1000 - 0.03
        assert broker.metrics()["Produce:client-id=fire,user=/throttle-time"] == expected
        await conn.aclose()


# -- fetch throttling -------------------------------------------------------------------------

async def fetch_req(conn, session_id: int, epoch: int, topics: list[dict], max_bytes: int = 50 << 20,
                    version: int = 12):
    return await conn.request(K.FETCH, version, {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": max_bytes,
        "session_id": session_id, "session_epoch": epoch, "topics": topics, "forgotten_topics_data": []})


def part(p: int = 0, offset: int = 0, max_bytes: int = 1 << 20) -> dict:
    return {"partition": p, "fetch_offset": offset, "partition_max_bytes": max_bytes, "log_start_offset": -1}


def partitions(resp) -> dict:
    return {(t.topic, p.partition_index): p for t in resp.responses for p in t.partitions}


async def test_throttled_fetch_is_empty_and_leaves_the_session_as_it_was():
    """consumer_byte_rate 2000 B/s over 2 samples of 1 s (a young metric's window is padded to 1 s).

    A full fetch of a ~1.5 KB batch stays within the quota; the incremental fetch of the next
    ~1 KB batch takes the rate over 2000 B/s: it gets an empty response with throttle_time_ms
    and its bytes are taken back.  The session survives: once the throttle window has passed,
    the next incremental fetch (next epoch) returns the batch the throttled one could not.
    """
    async with quota_broker("client-id=cons:consumer_byte_rate=2000", window_num=2) as broker:
        async with await connect(broker, "prod") as prod:
            await create(prod, "f")
            await produce(prod, "f", batch([b"a" * 1500]))
            conn = await connect(broker, "cons")
            full = await fetch_req(conn, 0, 0, [{"topic": "f", "partitions": [part()]}])
            assert full.throttle_time_ms == 0 and full.session_id > 0
            sid = full.session_id
            assert len(partitions(full)[("f", 0)].records) > 1500
            rate_metric = "Fetch:client-id=cons,user=/byte-rate"
            rate_before = broker.metrics()[rate_metric]
            session = broker.fetch_manager.cache.get(sid)
            cached = next(iter(session.partitions.values()))
            assert cached.high_watermark == 1

            await produce(prod, "f", batch([b"b" * 1000]))
        # The client moves its position to offset 1 (a changed partition) and is over quota.
        throttled = await fetch_req(conn, sid, 1, [{"topic": "f", "partitions": [part(offset=1)]}])
        t_throttled = trio.current_time()
        assert throttled.throttle_time_ms > 0
        assert (throttled.error_code, throttled.session_id, throttled.responses) == (0, sid, [])
        # The bytes of the empty response were un-recorded; the session did not learn the new
        # high watermark (update_and_generate_response never ran).
        assert broker.metrics()[rate_metric] <= rate_before
        assert cached.high_watermark == 1 and cached.fetch_offset == 1
        m = broker.metrics()
        assert m["Fetch:client-id=cons,user=/throttle-time"] == throttled.throttle_time_ms

        # Wait until the samples holding both fetches have expired (N x W = 2 s after the first).
        await trio.sleep_until(t_throttled + 2.05)
        nxt = await fetch_req(conn, sid, 2, [])
        assert nxt.error_code == 0 and nxt.throttle_time_ms == 0 and nxt.session_id == sid
        got = partitions(nxt)
        assert set(got) == {("f", 0)} and got[("f", 0)].high_watermark == 2
        assert [b.base_offset for b in _batches(got[("f", 0)].records)] == [1]
        assert cached.high_watermark == 2
        await conn.aclose()


def _batches(records: bytes):
    return [header for header, _ in iter_batches(records)]


async def test_consumer_fetch_max_bytes_is_capped_to_the_quota_window():
    """consumer_byte_rate B = 3000 B/s, N = 2, W = 1 s: a fetch may carry at most
    B x (N - 1) x W = 3000 bytes of records (Kafka's getMaxValueInQuotaWindow), so a
    consumer asking for 50 MB is not guaranteed a throttle.  A client without a fetch
    quota gets everything."""
    async with quota_broker("client-id=capped:consumer_byte_rate=3000", "client-id=small:consumer_byte_rate=3000",
                            window_num=2) as broker:
        async with await connect(broker, "prod") as prod:
            await create(prod, "cap")
            sizes = []
            for i in range(5):
                b = batch([bytes([65 + i]) * 1000])
                sizes.append(len(b))
                await produce(prod, "cap", b)
        cap = 3000 * (2 - 1) * 1
        assert broker.quotas.fetch.get_max_value_in_quota_window("ANONYMOUS", "capped") == cap
        expect_n = max(k for k in range(1, 6) if sum(sizes[:k]) <= cap)
        assert expect_n == 2

        async with await connect(broker, "capped") as conn:
            r = await fetch_req(conn, 0, -1, [{"topic": "cap", "partitions": [part()]}])
            assert r.throttle_time_ms == 0
            records = partitions(r)[("cap", 0)].records
            assert len(records) == sum(sizes[:expect_n]) <= cap
        async with await connect(broker, "small") as conn:
            # A smaller request max_bytes is kept (the cap only ever lowers it); one batch at least.
            r = await fetch_req(conn, 0, -1, [{"topic": "cap", "partitions": [part(offset=2)]}], max_bytes=10)
            assert r.throttle_time_ms == 0
            assert len(partitions(r)[("cap", 0)].records) == sizes[2]
        async with await connect(broker, "free") as conn:
            r = await fetch_req(conn, 0, -1, [{"topic": "cap", "partitions": [part()]}])
            assert len(partitions(r)[("cap", 0)].records) == sum(sizes)


# -- request quotas ----------------------------------------------------------------------------

class SteppingTimer:
    """Handler time independent of the machine: each reading is 40 us after the last (so each request
    is charged 40 us)."""

    def __init__(self) -> None:
        self.ns = 0

    def task_ns(self) -> int:
        self.ns += 40_000
        return self.ns


async def test_request_percentage_throttles_a_busy_client(mock_clock: trio.testing.MockClock):
    """request_percentage 0.01 (% of one thread) over a 1 s window allows 100 us of handler time:
    the third 40 us request exceeds it.  Kafka bounds request-quota throttles by one quota window
    (ClientRequestQuotaManager.maxThrottleTimeMs = quota.window.size.seconds)."""
    async with quota_broker("client-id=busy:request_percentage=0.01", window_num=2,
                            timer=SteppingTimer()) as broker:
        async with await connect(broker, "setup") as setup:
            for i in range(20):
                await create(setup, f"m{i}")
        conn = await connect(broker, "busy")
        idle = await connect(broker, "idle")
        throttle = 0
        for n in range(1, 201):
            r = await conn.request(K.METADATA, 12, {"topics": None, "allow_auto_topic_creation": False})
            if r.throttle_time_ms:
                throttle = r.throttle_time_ms
                break
        answered = trio.current_time()
        assert 0 < throttle <= 1000, (n, throttle)
        m = broker.metrics()
        assert m["Request:client-id=busy,user=/request-time"] > 0.01
        assert m["Request:client-id=busy,user=/throttle-time"] > 0
        assert "Request:client-id=idle,user=/request-time" not in m
        assert n == 3
        # The other client has no request quota: not throttled, not muted (only the busy one is).
        r = await idle.request(K.METADATA, 12, {"topics": None, "allow_auto_topic_creation": False})
        assert r.throttle_time_ms == 0 and broker.reaper.size == 1
        # The busy connection is muted for the throttle time (Trio's clock moves when the test says).
        async with trio.open_nursery() as nursery:
            nursery.start_soon(api_versions, conn)
            mock_clock.jump(throttle / 1000)
        assert trio.current_time() - answered == pytest.approx(throttle / 1000)
        await conn.aclose()
        await idle.aclose()


def test_request_quota_throttle_is_bounded_by_one_window():
    from minikafka.broker.quota import QuotaManagers
    from minikafka.common.clock import ManualClock
    from minikafka.metrics import Metrics

    configs = QuotaConfigs()
    configs.set(ClientQuotaEntity(None, "c"), R, 1.0)
    configs.set(ClientQuotaEntity(None, "c"), P, 1.0)
    clock = ManualClock(1_000_000)
    managers = QuotaManagers(configs, Metrics(clock=clock), window_num=11, window_size_s=1, clock=clock)
    # 1 s of handler time over a 10 s padded window = 10% against 1%: unbounded that would be 90 s.
    assert managers.request.maybe_record_request_time("u", "c", 1_000_000_000) == 1000
    # Byte-rate throttles are not bounded: 100 bytes over 10 s at 1 B/s -> (10 - 1) / 1 * 10 s.
    assert managers.produce.maybe_record_and_get_throttle_time_ms("u", "c", 100) == 90_000


# -- metrics ------------------------------------------------------------------------------------

async def test_quota_metric_names():
    async with quota_broker("user=ANONYMOUS:producer_byte_rate=1e9",
                            "client-id=reader:consumer_byte_rate=1e9",
                            "client-id=<default>:request_percentage=1000") as broker:
        async with await connect(broker, "writer") as w:
            await create(w, "mn")
            await produce(w, "mn", batch([b"x"]))
        async with await connect(broker, "reader") as r:
            await fetch_req(r, 0, -1, [{"topic": "mn", "partitions": [part()]}])
        m = broker.metrics()
        quota_names = sorted(k for k in m if k.split(":")[0] in ("Produce", "Fetch", "Request"))
        assert quota_names == [
            "Fetch:/queue-size",
            "Fetch:client-id=reader,user=/byte-rate",
            "Fetch:client-id=reader,user=/throttle-time",
            "Produce:/queue-size",
            # A /users/ANONYMOUS quota is shared by all the user's clients: empty client-id tag.
            "Produce:client-id=,user=ANONYMOUS/byte-rate",
            "Produce:client-id=,user=ANONYMOUS/throttle-time",
            "Request:/queue-size",
            "Request:client-id=reader,user=/request-time",
            "Request:client-id=reader,user=/throttle-time",
            "Request:client-id=writer,user=/request-time",
            "Request:client-id=writer,user=/throttle-time",
        ]
        assert m["Produce:client-id=,user=ANONYMOUS/byte-rate"] > 0
        assert m["Fetch:client-id=reader,user=/byte-rate"] > 0
        assert m["Produce:/queue-size"] == m["Fetch:/queue-size"] == m["Request:/queue-size"] == 0


async def test_no_quotas_no_quota_sensors(broker, conn):
    await create(conn, "nq")
    await produce(conn, "nq", batch([b"x"]))
    r = await fetch_req(conn, 0, -1, [{"topic": "nq", "partitions": [part()]}])
    assert r.throttle_time_ms == 0
    m = broker.metrics()
    assert not [k for k in m if k.endswith(("/byte-rate", "/request-time", "/throttle-time"))]
    assert m["Produce:/queue-size"] == 0
