"""ShareFetch, ShareAcknowledge and the share-group offsets APIs on in-memory storage (no socket, no broker).

Requests and responses go through their real schemas (built and parsed at the version under test); the
share-partition manager, the share-group coordinator and the group configs are the broker's own classes.
Long polls and lock expiry run on Trio's MockClock.
"""

from __future__ import annotations

import itertools
import uuid
from typing import Any

import trio
import trio.testing

from helpers import HandlerEnv, batch, values
from minikafka.broker.groups.group_config import GroupConfigManager
from minikafka.broker.handlers.share_fetch import ShareAcknowledgeHandler, ShareFetchHandler
from minikafka.broker.handlers.share_offsets import (AlterShareGroupOffsetsHandler, DeleteShareGroupOffsetsHandler,
                                                     DescribeShareGroupOffsetsHandler)
from minikafka.broker.metadata import ClusterMetadata
from minikafka.broker.replica_manager import ReplicaManager
from minikafka.broker.request import RequestContext
from minikafka.broker.security.acl import AclBinding, AclOperation, AclPermissionType, PatternType, ResourceType
from minikafka.broker.security.authorizer import StandardAuthorizer
from minikafka.broker.share.coordinator import ShareGroupCoordinator
from minikafka.broker.share.manager import SharePartitionManager
from minikafka.broker.share.partition_state import ShareStateStore
from minikafka.protocol.api import APIS, ApiKey
from minikafka.protocol.errors import ErrorCode
from minikafka.protocol.records import Record, build_batch
from minikafka.common.clock import SYSTEM_CLOCK

_corr = itertools.count(1)
ACCEPT, RELEASE, REJECT = 1, 2, 3


class ShareEnv(HandlerEnv):
    """A broker's share services in memory on top of :class:`HandlerEnv`."""

    def __init__(self, **config: Any) -> None:
        super().__init__(**config)
        self.group_configs = GroupConfigManager(self.config)
        self.share_groups = ShareGroupCoordinator(self.config, self.metadata, self.group_configs,
                                                  clock=trio.current_time)
        self.shares = SharePartitionManager(self.config, ShareStateStore(), group_configs=self.group_configs,
                                            partitions=self.log, notify=self.delayed_fetch.check_and_complete)
        self.share_groups.group_listeners.append(self.shares.delete_group)
        self.fetch = ShareFetchHandler(self.log, self.metadata, self.shares, self.delayed_fetch, self.quotas.fetch,
                                       self.config)
        self.ack = ShareAcknowledgeHandler(self.log, self.metadata, self.shares, self.config)
        self.topic_id = uuid.UUID(int=0)

    def topic(self, name: str = "t", partitions: int = 1, **group_configs: str) -> uuid.UUID:
        self.topic_id = self.metadata.create_topic(name, partitions, 1).topic_id
        if group_configs:
            self.group_configs.set_overrides("g", {k.replace("_", "."): v for k, v in group_configs.items()})
        return self.topic_id

    def produce(self, values_: list[bytes], partition: int = 0, name: str = "t") -> None:
        part = self.log.get(name, partition)
        assert part is not None
        part.log.append_as_leader([bytearray(batch(values_))], part.leader_epoch, self.clock.time_ms())

    def offsets_handler(self, cls: Any) -> Any:
        return cls(self.shares, self.share_groups, self.metadata, self.log)


async def call(handler: Any, key: ApiKey, version: int, fields: dict, connection: str = "conn") -> Any:
    api = APIS[key]
    req = api.request.parse(api.request.build(fields, version), version)
    ctx = RequestContext(int(key), version, next(_corr), "test", connection, request_size=100)
    body = await handler.handle(ctx, req)
    return api.response.parse(api.response.build(body, version), version)


def fetch_fields(topic_id: uuid.UUID, member: str, epoch: int, partitions: tuple[int, ...] = (0,),
                 acks: dict[int, list[tuple[int, int, list[int]]]] | None = None, max_wait_ms: int = 0,
                 max_records: int = 500, **extra: Any) -> dict:
    acks = acks or {}
    parts = [{"partition_index": p, "acknowledgement_batches": [
        {"first_offset": a, "last_offset": b, "acknowledge_types": t} for a, b, t in acks.get(p, [])]}
        for p in partitions]
    return {"group_id": "g", "member_id": member, "share_session_epoch": epoch, "max_wait_ms": max_wait_ms,
            "min_bytes": 1, "max_bytes": 1 << 20, "max_records": max_records, "batch_size": max_records,
            "topics": [{"topic_id": topic_id, "partitions": parts}] if parts else [], "forgotten_topics_data": [],
            **extra}


def ack_fields(topic_id: uuid.UUID, member: str, epoch: int, acks: dict[int, list[tuple[int, int, list[int]]]]
               ) -> dict:
    return {"group_id": "g", "member_id": member, "share_session_epoch": epoch, "topics": [
        {"topic_id": topic_id, "partitions": [
            {"partition_index": p, "acknowledgement_batches": [
                {"first_offset": a, "last_offset": b, "acknowledge_types": t} for a, b, t in batches]}
            for p, batches in acks.items()]}]}


def part0(resp: Any) -> Any:
    return resp.responses[0].partitions[0]


def acquired(p: Any) -> list[tuple[int, int, int]]:
    return [(a.first_offset, a.last_offset, a.delivery_count) for a in p.acquired_records]


async def test_share_fetch_acquires_and_piggybacks_acknowledgements() -> None:
    env = ShareEnv()
    t = env.topic()
    r = await call(env.fetch, ApiKey.SHARE_FETCH, 1, fetch_fields(t, "m1", 0))
    assert r.error_code == 0 and r.acquisition_lock_timeout_ms == 30_000
    assert part0(r).error_code == 0 and not part0(r).acquired_records  # latest: nothing before the first fetch
    env.produce([b"a", b"b", b"c"])
    env.produce([b"d", b"e"])
    r = await call(env.fetch, ApiKey.SHARE_FETCH, 1, fetch_fields(t, "m1", 1))
    assert acquired(part0(r)) == [(0, 4, 1)]
    assert values(b"".join(bytes(c) for c in [part0(r).records])) == [b"a", b"b", b"c", b"d", b"e"]
    # Accept 0-2, release 3-4: the next fetch (same request) gets 3-4 again with delivery count 2.
    r = await call(env.fetch, ApiKey.SHARE_FETCH, 2, fetch_fields(t, "m1", 2, acks={0: [(0, 2, [ACCEPT]),
                                                                                      (3, 4, [RELEASE])]}))
    assert part0(r).acknowledge_error_code == 0
    assert acquired(part0(r)) == [(3, 4, 2)]
    assert values(bytes(part0(r).records)) == [b"d", b"e"]  # only the batch holding what was acquired
    sp = env.shares.get("g", "t", 0)
    assert sp is not None and sp.start_offset == 3


async def test_records_are_shared_once_across_members(autojump_clock: trio.testing.MockClock) -> None:
    env = ShareEnv()
    t = env.topic(partitions=2, share_auto_offset_reset="earliest")
    for p in (0, 1):
        env.produce([b"%d-%d" % (p, i) for i in range(3)], partition=p)
        env.produce([b"%d-%d" % (p, i) for i in range(3, 6)], partition=p)
    r1 = await call(env.fetch, ApiKey.SHARE_FETCH, 1, fetch_fields(t, "m1", 0, (0, 1), max_records=3))
    r2 = await call(env.fetch, ApiKey.SHARE_FETCH, 1, fetch_fields(t, "m2", 0, (0, 1), max_records=3))
    r3 = await call(env.fetch, ApiKey.SHARE_FETCH, 1, fetch_fields(t, "m3", 0, (0, 1), max_records=100))
    seen: list[tuple[int, int]] = []
    for r in (r1, r2, r3):
        for p in r.responses[0].partitions:
            for first, last, count in acquired(p):
                assert count == 1
                seen.extend((p.partition_index, o) for o in range(first, last + 1))
    assert sorted(seen) == [(p, o) for p in (0, 1) for o in range(6)]


async def test_released_records_wake_a_waiting_fetch(autojump_clock: trio.testing.MockClock) -> None:
    env = ShareEnv()
    t = env.topic(share_auto_offset_reset="earliest")
    env.produce([b"x", b"y"])
    r = await call(env.fetch, ApiKey.SHARE_FETCH, 1, fetch_fields(t, "m1", 0))
    assert acquired(part0(r)) == [(0, 1, 1)]
    got: list[Any] = []

    async def waiting_fetch() -> None:
        got.append(await call(env.fetch, ApiKey.SHARE_FETCH, 1, fetch_fields(t, "m2", 0, max_wait_ms=60_000)))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(waiting_fetch)
        await trio.testing.wait_all_tasks_blocked()
        assert not got and env.delayed_fetch.watched() == 2  # the partition and its share-partition
        start = trio.current_time()
        r = await call(env.ack, ApiKey.SHARE_ACKNOWLEDGE, 1, ack_fields(t, "m1", 1, {0: [(0, 0, [REJECT]),
                                                                                          (1, 1, [RELEASE])]}))
        assert part0(r).error_code == 0
    assert trio.current_time() - start < 1  # woken by the release, not at MaxWaitMs
    assert acquired(part0(got[0])) == [(1, 1, 2)] and values(bytes(part0(got[0]).records)) == [b"x", b"y"]


async def test_an_append_wakes_a_waiting_fetch(autojump_clock: trio.testing.MockClock) -> None:
    env = ShareEnv()
    t = env.topic()
    got: list[Any] = []

    async def waiting_fetch() -> None:
        got.append(await call(env.fetch, ApiKey.SHARE_FETCH, 1, fetch_fields(t, "m1", 0, max_wait_ms=60_000)))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(waiting_fetch)
        await trio.testing.wait_all_tasks_blocked()
        start = trio.current_time()
        env.produce([b"new"])
        env.delayed_fetch.check_and_complete(env.log.get("t", 0).tp)  # what the replica manager does on append
    assert trio.current_time() - start < 1 and acquired(part0(got[0])) == [(0, 0, 1)]


async def test_unacknowledged_records_come_back_after_the_lock_expires(
        autojump_clock: trio.testing.MockClock) -> None:
    env = ShareEnv()
    t = env.topic(share_auto_offset_reset="earliest", share_record_lock_duration_ms="15000")
    env.produce([b"v"])
    async with trio.open_nursery() as nursery:
        nursery.start_soon(env.shares.run)
        r = await call(env.fetch, ApiKey.SHARE_FETCH, 1, fetch_fields(t, "m1", 0))
        assert r.acquisition_lock_timeout_ms == 15_000 and acquired(part0(r)) == [(0, 0, 1)]
        start = trio.current_time()
        r = await call(env.fetch, ApiKey.SHARE_FETCH, 1, fetch_fields(t, "m2", 0, max_wait_ms=60_000))
        assert acquired(part0(r)) == [(0, 0, 2)]
        assert 15 <= trio.current_time() - start < 16  # woken by the lock expiry
        # m1's lock is gone: its late acknowledgement is refused.
        r = await call(env.ack, ApiKey.SHARE_ACKNOWLEDGE, 1, ack_fields(t, "m1", 1, {0: [(0, 0, [ACCEPT])]}))
        assert part0(r).error_code == ErrorCode.INVALID_RECORD_STATE
        env.shares.close()


async def test_share_session_errors() -> None:
    env = ShareEnv()
    t = env.topic()
    r = await call(env.fetch, ApiKey.SHARE_FETCH, 1, fetch_fields(t, "m1", 3))
    assert r.error_code == ErrorCode.SHARE_SESSION_NOT_FOUND
    await call(env.fetch, ApiKey.SHARE_FETCH, 1, fetch_fields(t, "m1", 0))
    r = await call(env.fetch, ApiKey.SHARE_FETCH, 1, fetch_fields(t, "m1", 5))
    assert r.error_code == ErrorCode.INVALID_SHARE_SESSION_EPOCH
    r = await call(env.ack, ApiKey.SHARE_ACKNOWLEDGE, 1, ack_fields(t, "m1", 0, {0: [(0, 0, [ACCEPT])]}))
    assert r.error_code == ErrorCode.INVALID_SHARE_SESSION_EPOCH
    r = await call(env.fetch, ApiKey.SHARE_FETCH, 1, fetch_fields(t, "m1", 0, acks={0: [(0, 0, [ACCEPT])]}))
    assert r.error_code == ErrorCode.INVALID_REQUEST  # no acknowledgements when opening a session
    r = await call(env.fetch, ApiKey.SHARE_FETCH, 1, fetch_fields(t, "", 0))
    assert r.error_code == ErrorCode.INVALID_REQUEST
    r = await call(env.fetch, ApiKey.SHARE_FETCH, 1, fetch_fields(t, "x" * 37, 0))
    assert r.error_code == ErrorCode.INVALID_REQUEST
    small = ShareEnv(group_share_max_share_sessions=1)
    t2 = small.topic()
    await call(small.fetch, ApiKey.SHARE_FETCH, 1, fetch_fields(t2, "m1", 0))
    r = await call(small.fetch, ApiKey.SHARE_FETCH, 1, fetch_fields(t2, "m2", 0))
    assert r.error_code == ErrorCode.SHARE_SESSION_LIMIT_REACHED


async def test_partition_errors_and_invalid_acknowledgements() -> None:
    env = ShareEnv()
    t = env.topic(share_auto_offset_reset="earliest")
    env.produce([b"a", b"b"])
    unknown = uuid.uuid4()
    fields = fetch_fields(t, "m1", 0)
    fields["topics"].append({"topic_id": unknown, "partitions": [{"partition_index": 0,
                                                                   "acknowledgement_batches": []}]})
    r = await call(env.fetch, ApiKey.SHARE_FETCH, 1, fields)
    errors = {(x.topic_id, p.partition_index): p.error_code for x in r.responses for p in x.partitions}
    assert errors == {(t, 0): 0, (unknown, 0): ErrorCode.UNKNOWN_TOPIC_ID}
    r = await call(env.ack, ApiKey.SHARE_ACKNOWLEDGE, 1, ack_fields(t, "m2", 1, {0: [(0, 0, [ACCEPT])]}))
    assert r.error_code == ErrorCode.SHARE_SESSION_NOT_FOUND
    await call(env.fetch, ApiKey.SHARE_FETCH, 1, fetch_fields(t, "m2", 0))
    r = await call(env.ack, ApiKey.SHARE_ACKNOWLEDGE, 1, ack_fields(t, "m2", 1, {0: [(0, 0, [ACCEPT])]}))
    assert part0(r).error_code == ErrorCode.INVALID_RECORD_STATE  # m1 holds it
    r = await call(env.ack, ApiKey.SHARE_ACKNOWLEDGE, 1, ack_fields(t, "m2", 2, {0: [(1, 0, [ACCEPT])]}))
    assert part0(r).error_code == ErrorCode.INVALID_REQUEST
    r = await call(env.ack, ApiKey.SHARE_ACKNOWLEDGE, 1, ack_fields(t, "m2", 3, {0: [(0, 0, [4])]}))
    assert part0(r).error_code == ErrorCode.INVALID_REQUEST  # Renew needs v2
    r = await call(env.ack, ApiKey.SHARE_ACKNOWLEDGE, 2, ack_fields(t, "m2", 4, {0: [(0, 0, [4])]}))
    assert part0(r).error_code == ErrorCode.INVALID_RECORD_STATE and r.acquisition_lock_timeout_ms == 30_000


async def test_not_leader_names_the_leader_and_its_endpoint() -> None:
    env = ShareEnv()
    metadata = ClusterMetadata([0, 1])
    metadata.broker_started(0, "127.0.0.1", 9092)
    metadata.broker_started(1, "127.0.0.1", 9093)
    log = ReplicaManager(0, env.config, metadata, clock=env.clock)
    topic = metadata.create_topic("t", 1, 1, assignments={0: [1]})
    log.ensure_partitions(topic)
    shares = SharePartitionManager(env.config)
    handler = ShareFetchHandler(log, metadata, shares, env.delayed_fetch, env.quotas.fetch, env.config)
    r = await call(handler, ApiKey.SHARE_FETCH, 1, fetch_fields(topic.topic_id, "m1", 0))
    p = part0(r)
    assert p.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert (p.current_leader.leader_id, p.current_leader.leader_epoch) == (1, 0)
    assert [(n.node_id, n.host, n.port) for n in r.node_endpoints] == [(1, "127.0.0.1", 9093)]


async def test_record_limit_mode_and_renew_of_v2() -> None:
    env = ShareEnv()
    t = env.topic(share_auto_offset_reset="earliest")
    env.produce([b"%d" % i for i in range(10)])
    r = await call(env.fetch, ApiKey.SHARE_FETCH, 2, fetch_fields(t, "m1", 0, max_records=4, share_acquire_mode=1))
    assert acquired(part0(r)) == [(0, 3, 1)]
    r = await call(env.fetch, ApiKey.SHARE_FETCH, 2, fetch_fields(t, "m1", 1, max_records=4))
    assert acquired(part0(r)) == [(4, 9, 1)]  # batch-optimized: the rest of the batch
    renew = fetch_fields(t, "m1", 2, acks={0: [(0, 3, [4])]}, is_renew_ack=True)
    r = await call(env.fetch, ApiKey.SHARE_FETCH, 2, renew)
    assert r.error_code == ErrorCode.INVALID_REQUEST  # a renew fetch must ask for nothing
    renew.update(min_bytes=0, max_bytes=0, max_records=0)
    r = await call(env.fetch, ApiKey.SHARE_FETCH, 2, renew)
    assert r.error_code == 0 and part0(r).acknowledge_error_code == 0 and not part0(r).acquired_records


async def test_read_committed_skips_aborted_transactions_and_stops_at_the_lso() -> None:
    env = ShareEnv()
    t = env.topic(share_auto_offset_reset="earliest", share_isolation_level="read_committed")
    part = env.log.get("t", 0)
    assert part is not None

    def txn(values_: list[bytes], pid: int) -> None:
        data = build_batch([Record(offset_delta=i, value=v) for i, v in enumerate(values_)], producer_id=pid,
                           producer_epoch=0, base_sequence=0, is_transactional=True,
                           base_timestamp=SYSTEM_CLOCK.time_ms())
        assert env.log.append_records(part, data, env.clock.time_ms(), 1 << 20).error == 0

    txn([b"aborted-1", b"aborted-2"], 7)
    env.log.write_txn_marker(part, 7, 0, 0, commit=False)
    env.produce([b"plain"])
    txn([b"open"], 8)  # an open transaction holds the LSO back
    r = await call(env.fetch, ApiKey.SHARE_FETCH, 1, fetch_fields(t, "m1", 0))
    # 0-1 aborted (archived), 2 the ABORT marker (acquired: the client acknowledges it as a gap), 3 plain.
    assert acquired(part0(r)) == [(2, 3, 1)]
    got = values(bytes(part0(r).records))  # the marker batch (its control record) and the plain batch
    assert b"plain" in got and b"aborted-1" not in got and b"open" not in got
    env.log.write_txn_marker(part, 8, 0, 0, commit=True)
    r = await call(env.fetch, ApiKey.SHARE_FETCH, 1, fetch_fields(t, "m1", 1))
    assert acquired(part0(r)) == [(4, 5, 1)] and values(bytes(part0(r).records))[0] == b"open"  # + its marker


async def test_final_epoch_releases_the_members_records() -> None:
    env = ShareEnv()
    t = env.topic(share_auto_offset_reset="earliest")
    env.produce([b"a", b"b", b"c"])
    await call(env.fetch, ApiKey.SHARE_FETCH, 1, fetch_fields(t, "m1", 0, max_records=1,
                                                                 batch_size=1))
    sp = env.shares.get("g", "t", 0)
    assert sp is not None and sp.acquired_by("m1") == 3
    r = await call(env.fetch, ApiKey.SHARE_FETCH, 1, fetch_fields(t, "m1", -1, acks={0: [(0, 0, [ACCEPT])]}))
    assert r.error_code == 0 and part0(r).acknowledge_error_code == 0 and not part0(r).acquired_records
    assert sp.acquired_by("m1") == 0 and sp.next_fetch_offset() == 1
    # Leaving the share group does not release by itself (as in Kafka): the final epoch above did, and a
    # closing connection does (below); a member that vanished loses its records when their locks expire.


async def test_connection_close_releases_the_members_records() -> None:
    env = ShareEnv()
    t = env.topic(share_auto_offset_reset="earliest")
    env.produce([b"a"])
    await call(env.fetch, ApiKey.SHARE_FETCH, 1, fetch_fields(t, "m1", 0), connection="c7")
    env.shares.connection_closed("c7")
    sp = env.shares.get("g", "t", 0)
    assert sp is not None and sp.acquired_by("m1") == 0 and len(env.shares.sessions) == 0


# -- share-group offsets ----------------------------------------------------------------------------------
async def test_share_group_offsets_admin() -> None:
    env = ShareEnv()
    t = env.topic(partitions=2, share_auto_offset_reset="earliest")
    env.produce([b"a", b"b", b"c"])
    describe = env.offsets_handler(DescribeShareGroupOffsetsHandler)
    alter = env.offsets_handler(AlterShareGroupOffsetsHandler)
    delete = env.offsets_handler(DeleteShareGroupOffsetsHandler)
    r = await call(describe, ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 1, {"groups": [{"group_id": "g", "topics": None}]})
    assert r.groups[0].error_code == ErrorCode.GROUP_ID_NOT_FOUND
    member = str(uuid.uuid4())
    assert env.share_groups.heartbeat("g", member, 0, None, ["t"]).error == 0
    r = await call(env.fetch, ApiKey.SHARE_FETCH, 1, fetch_fields(t, member, 0, (0, 1)))
    await call(env.ack, ApiKey.SHARE_ACKNOWLEDGE, 1, ack_fields(t, member, 1, {0: [(0, 1, [ACCEPT])]}))
    r = await call(describe, ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 1,
                   {"groups": [{"group_id": "g", "topics": [{"topic_name": "t", "partitions": [0, 1, 5]}]}]})
    parts = {p.partition_index: p for p in r.groups[0].topics[0].partitions}
    assert (parts[0].start_offset, parts[0].lag, parts[0].error_code) == (2, 1, 0)
    assert (parts[1].start_offset, parts[1].lag) == (0, 0)
    assert parts[5].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    alter_fields = {"group_id": "g", "topics": [{"topic_name": "t", "partitions": [{"partition_index": 0,
                                                                                       "start_offset": 0}]}]}
    r = await call(alter, ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, alter_fields)
    assert r.error_code == ErrorCode.NON_EMPTY_GROUP
    env.share_groups.heartbeat("g", member, -1, None, None)  # the group is Empty now
    r = await call(alter, ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, alter_fields)
    assert r.error_code == 0 and r.responses[0].partitions[0].error_code == 0
    r = await call(describe, ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 0, {"groups": [{"group_id": "g", "topics": None}]})
    assert [(p.partition_index, p.start_offset) for p in r.groups[0].topics[0].partitions] == [(0, 0), (1, 0)]
    r = await call(env.fetch, ApiKey.SHARE_FETCH, 1, fetch_fields(t, "m9", 0))
    assert acquired(part0(r)) == [(0, 2, 1)]  # delivered again from the altered start offset
    env.shares.release_member("g", "m9")
    r = await call(delete, ApiKey.DELETE_SHARE_GROUP_OFFSETS, 0, {"group_id": "g", "topics": [{"topic_name": "t"},
                                                                                             {"topic_name": "nope"}]})
    assert [(x.topic_name, x.error_code) for x in r.responses] == [("t", 0), ("nope", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
    assert env.shares.start_offset("g", "t", 0) == -1 and env.shares.initialized_partitions("g") == []


async def test_alter_share_group_offsets_creates_a_new_group() -> None:
    """Kafka 4.2 (KAFKA-19662): offsets altered for a share group that does not exist yet create it Empty, and
    its first member starts from them; a group of another kind keeps its id (GROUP_ID_NOT_FOUND)."""
    env = ShareEnv()
    t = env.topic(partitions=2)  # share.auto.offset.reset: latest
    env.produce([b"a", b"b", b"c", b"d"])
    env.share_groups.other_group_exists = lambda group_id: group_id == "classic"
    alter = env.offsets_handler(AlterShareGroupOffsetsHandler)
    describe = env.offsets_handler(DescribeShareGroupOffsetsHandler)
    fields = {"group_id": "fresh", "topics": [{"topic_name": "t", "partitions": [
        {"partition_index": 0, "start_offset": 1}, {"partition_index": 7, "start_offset": 0}]},
        {"topic_name": "nope", "partitions": [{"partition_index": 0, "start_offset": 0}]}]}
    r = await call(alter, ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, fields)
    assert r.error_code == 0
    assert [(x.topic_name, [(p.partition_index, p.error_code) for p in x.partitions]) for x in r.responses] == [
        ("t", [(0, 0), (7, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]), ("nope", [(0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)])]
    assert env.share_groups.list_groups() == [("fresh", "Empty")]
    r = await call(describe, ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 1, {"groups": [{"group_id": "fresh", "topics": None}]})
    assert [(p.partition_index, p.start_offset, p.lag) for p in r.groups[0].topics[0].partitions] == [(0, 1, 3)]
    member = str(uuid.uuid4())
    assert env.share_groups.heartbeat("fresh", member, 0, None, ["t"]).error == 0
    r = await call(env.fetch, ApiKey.SHARE_FETCH, 1, fetch_fields(t, member, 0, group_id="fresh"))
    assert acquired(part0(r)) == [(1, 3, 1)]  # offsets 1-3, not from the latest offset
    # Another kind of group with the id; an empty id.
    r = await call(alter, ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, {**fields, "group_id": "classic"})
    assert (r.error_code, r.responses) == (ErrorCode.GROUP_ID_NOT_FOUND, [])
    r = await call(alter, ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, {**fields, "group_id": ""})
    assert r.error_code == ErrorCode.INVALID_GROUP_ID
    assert env.share_groups.list_groups() == [("fresh", "Stable")]


async def test_share_fetch_needs_read_on_the_group_and_the_topics() -> None:
    env = ShareEnv()
    t = env.topic(share_auto_offset_reset="earliest")
    secret = env.metadata.create_topic("secret", 1, 1).topic_id
    env.produce([b"a"])
    authorizer = StandardAuthorizer()
    fetch = ShareFetchHandler(env.log, env.metadata, env.shares, env.delayed_fetch, env.quotas.fetch, env.config,
                              authorizer=authorizer)
    ack = ShareAcknowledgeHandler(env.log, env.metadata, env.shares, env.config, authorizer=authorizer)

    async def as_alice(handler: Any, key: ApiKey, fields: dict) -> Any:
        api = APIS[key]
        req = api.request.parse(api.request.build(fields, 1), 1)
        ctx = RequestContext(int(key), 1, next(_corr), "test", "conn", peer="10.0.0.1:5000", principal="User:alice")
        return api.response.parse(api.response.build(await handler.handle(ctx, req), 1), 1)

    fields = fetch_fields(t, "m1", 0)
    fields["topics"].append({"topic_id": secret, "partitions": [{"partition_index": 0,
                                                                  "acknowledgement_batches": []}]})
    r = await as_alice(fetch, ApiKey.SHARE_FETCH, fields)
    assert r.error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
    authorizer.create_acls([AclBinding.of(rt, name, PatternType.LITERAL, "User:alice", "*", AclOperation.READ,
                                          AclPermissionType.ALLOW)
                            for rt, name in ((ResourceType.GROUP, "g"), (ResourceType.TOPIC, "t"))])
    r = await as_alice(fetch, ApiKey.SHARE_FETCH, fields)
    errors = {x.topic_id: x.partitions[0].error_code for x in r.responses}
    assert errors == {t: 0, secret: ErrorCode.TOPIC_AUTHORIZATION_FAILED}
    r = await as_alice(ack, ApiKey.SHARE_ACKNOWLEDGE, ack_fields(secret, "m1", 1, {0: [(0, 0, [ACCEPT])]}))
    assert part0(r).error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED


async def test_hostile_values_are_answered_not_allocated() -> None:
    env = ShareEnv()
    t = env.topic(share_auto_offset_reset="earliest")
    env.produce([b"a", b"b"])
    r = await call(env.fetch, ApiKey.SHARE_FETCH, 1, fetch_fields(t, "m1", 0, max_records=-5, max_wait_ms=-1))
    assert r.error_code == 0 and not part0(r).acquired_records
    r = await call(env.fetch, ApiKey.SHARE_FETCH, 1, fetch_fields(t, "m1", 1))
    assert acquired(part0(r)) == [(0, 1, 1)]
    huge = (1 << 62, [ACCEPT])
    r = await call(env.ack, ApiKey.SHARE_ACKNOWLEDGE, 1, ack_fields(t, "m1", 2, {0: [(0, huge[0], huge[1])]}))
    assert part0(r).error_code == ErrorCode.INVALID_RECORD_STATE  # a range beyond what is in flight
    r = await call(env.ack, ApiKey.SHARE_ACKNOWLEDGE, 1, ack_fields(t, "m1", 3, {0: [(-4, 1, [ACCEPT])]}))
    assert part0(r).error_code == ErrorCode.INVALID_REQUEST
    r = await call(env.ack, ApiKey.SHARE_ACKNOWLEDGE, 1, ack_fields(t, "m1", 4, {0: [(0, 1 << 40, [1, 1, 1])]}))
    assert part0(r).error_code == ErrorCode.INVALID_REQUEST  # per-offset types must match the range
    sp = env.shares.get("g", "t", 0)
    assert sp is not None and sp.acquired_by("m1") == 2 and len(sp.batches) == 1


async def test_deleting_a_share_group_forgets_its_share_partitions() -> None:
    env = ShareEnv()
    t = env.topic(share_auto_offset_reset="earliest")
    env.produce([b"a"])
    member = str(uuid.uuid4())
    assert env.share_groups.heartbeat("g", member, 0, None, ["t"]).error == 0
    r = await call(env.fetch, ApiKey.SHARE_FETCH, 1, fetch_fields(t, member, 0, acks=None))
    assert acquired(part0(r)) == [(0, 0, 1)]
    env.share_groups.heartbeat("g", member, -1, None, None)
    assert env.share_groups.delete_group("g") == ErrorCode.NONE
    assert env.shares.initialized_partitions("g") == [] and env.shares.get("g", "t", 0) is None
