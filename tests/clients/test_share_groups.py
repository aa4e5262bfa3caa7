"""confluent-kafka's ShareConsumer (librdkafka, KIP-932) consuming from share groups on the broker: ShareFetch
and ShareAcknowledge with explicit acknowledgements, records shared exactly once across members, release,
reject, lock expiry, a closing member's records coming back, the share-partition state surviving a restart,
and the share-group offsets admin APIs (through minikafka's own client connection: confluent-kafka 2.16's
AdminClient has no share-group offsets calls)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
import trio
from clients_common import (
    report_client_versions,  # noqa: F401  (session fixture, used via pytestmark)
    wait_for,
)
from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from minikafka.broker.config import BrokerConfig
from minikafka.client.connection import KafkaConnection
from minikafka.protocol.api import ApiKey
from minikafka.protocol.errors import ErrorCode
from minikafka.testing import BrokerThread

pytestmark = [pytest.mark.clients, pytest.mark.usefixtures("report_client_versions")]

FAST = {"group_share_min_heartbeat_interval_ms": 100, "group_share_heartbeat_interval_ms": 300}


def set_group_configs(b: BrokerThread, group: str, **configs: str) -> None:
    """IncrementalAlterConfigs on the GROUP resource, through confluent-kafka's AdminClient."""
    a = AdminClient({"bootstrap.servers": b.bootstrap})
    res = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry(k.replace("_", "."), v, incremental_operation=AlterConfigOpType.SET) for k, v in configs.items()])
    assert a.incremental_alter_configs([res])[res].result(timeout=10) is None


def produce(b: BrokerThread, topic: str, n: int, partitions: int = 1, tag: str = "v") -> None:
    p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 5})
    for i in range(n):
        p.produce(topic, value=b"%s%d" % (tag.encode(), i), partition=i % partitions)
    assert p.flush(10) == 0


def share_consumer(b: BrokerThread, group: str, name: str) -> ShareConsumer:
    return ShareConsumer({"bootstrap.servers": b.bootstrap, "group.id": group, "client.id": name,
                          "share.acknowledgement.mode": "explicit"})


def poll(c: ShareConsumer, timeout: float = 0.1) -> list[Any]:
    msgs = [m for m in c.poll(timeout)]
    for m in msgs:
        assert m.error() is None, m.error()
    return msgs


def members(b: BrokerThread, group: str) -> int:
    """Members holding partitions at the group's assignment epoch (reconciled)."""
    described = b.call(lambda: b.broker.share_groups.describe([group]))[0]
    return sum(1 for m in described.members if m.assignment and m.member_epoch == described.assignment_epoch)


def sessions_follow_assignments(b: BrokerThread, group: str, n: int) -> bool:
    """``n`` members reconciled, each fetching (its share session on the broker) exactly what it is assigned."""
    def check() -> bool:
        described = b.broker.share_groups.describe([group])[0]
        if len(described.members) != n:
            return False
        for m in described.members:
            if m.member_epoch != described.assignment_epoch or not m.assignment:
                return False
            fetching = {(k.topic_id, k.partition) for k in b.broker.share_partitions.session_partitions(group,
                                                                                                        m.member_id)}
            if fetching != {(t, p) for t, _, parts in m.assignment for p in parts}:
                return False
        return True
    return b.call(check)


def share_partition(b: BrokerThread, group: str, topic: str, partition: int = 0) -> Any:
    return b.call(lambda: b.broker.share_partitions.get(group, topic, partition))


def offsets_request(b: BrokerThread, key: ApiKey, version: int, body: dict) -> Any:
    async def ask() -> Any:
        async with await KafkaConnection.connect("127.0.0.1", b.port, client_id="share-admin") as conn:
            return await conn.request(key, version, body)
    return trio.run(ask)


def test_three_members_receive_each_record_once() -> None:
    with BrokerThread(BrokerConfig(port=0, **FAST)) as b:
        b.create_topic("queue", 3)
        set_group_configs(b, "sg", share_auto_offset_reset="earliest")
        consumers = [share_consumer(b, "sg", f"m{i}") for i in range(3)]
        try:
            for c in consumers:
                c.subscribe(["queue"])
            wait_for(lambda: [poll(c, 0.05) for c in consumers] and sessions_follow_assignments(b, "sg", 3),
                     timeout=30, what="three members fetching their assigned partitions")
            produce(b, "queue", 90, partitions=3)
            got: dict[str, list[tuple[int, int, int]]] = {f"m{i}": [] for i in range(3)}

            def consume() -> bool:
                for i, c in enumerate(consumers):
                    msgs = poll(c)
                    for m in msgs:
                        got[f"m{i}"].append((m.partition(), m.offset(), m.delivery_count()))
                        c.acknowledge(m, AcknowledgeType.ACCEPT)
                    if msgs:
                        c.commit_sync()
                return sum(map(len, got.values())) >= 90

            wait_for(consume, timeout=30, what="90 records consumed")
            received = [(p, o) for recs in got.values() for p, o, _ in recs]
            assert len(received) == 90 and set(received) == {(i % 3, i // 3) for i in range(90)}
            assert all(dc == 1 for recs in got.values() for _, _, dc in recs)
            assert all(got.values()), {k: len(v) for k, v in got.items()}  # each member did a share
            for p in range(3):
                sp = share_partition(b, "sg", "queue", p)
                assert (sp.start_offset, sp.batches) == (30, [])
        finally:
            for c in consumers:
                c.close()


def test_release_redelivers_and_reject_never_comes_back() -> None:
    with BrokerThread(BrokerConfig(port=0, **FAST)) as b:
        b.create_topic("work", 1)
        set_group_configs(b, "rr", share_auto_offset_reset="earliest")
        produce(b, "work", 10)
        c1, c2 = share_consumer(b, "rr", "c1"), share_consumer(b, "rr", "c2")
        seen: list[tuple[str, int, int]] = []
        try:
            c1.subscribe(["work"])
            first = wait_for(lambda: poll(c1, 0.2), timeout=30, what="c1's first records")
            for m in first:
                seen.append(("c1", m.offset(), m.delivery_count()))
                kind = {0: AcknowledgeType.RELEASE, 1: AcknowledgeType.REJECT}.get(m.offset(), AcknowledgeType.ACCEPT)
                c1.acknowledge(m, kind)
            c1.commit_sync()
            c2.subscribe(["work"])

            def redelivered() -> bool:
                for name, c in (("c2", c2), ("c1", c1)):
                    msgs = poll(c)
                    for m in msgs:
                        seen.append((name, m.offset(), m.delivery_count()))
                        c.acknowledge(m, AcknowledgeType.ACCEPT)
                    if msgs:
                        c.commit_sync()
                return len({o for _, o, _ in seen}) == 10 and any(o == 0 and dc == 2 for _, o, dc in seen)

            wait_for(redelivered, timeout=30, what="the released record delivered again")
            # Everything is done: the share-partition start offset moved past all ten records.
            wait_for(lambda: share_partition(b, "rr", "work").start_offset == 10, what="SPSO at 10")
            for _ in range(5):  # one more round of fetches from both: nothing comes back
                assert not poll(c1) and not poll(c2)
            offsets = [o for _, o, _ in seen]
            assert offsets.count(0) == 2 and offsets.count(1) == 1  # released once, rejected once
            assert sorted(set(offsets)) == list(range(10)) and len(offsets) == 11
        finally:
            c1.close()
            c2.close()


def test_unacknowledged_records_are_redelivered_after_the_lock_expires() -> None:
    cfg = BrokerConfig(port=0, group_share_min_record_lock_duration_ms=1000, **FAST)
    with BrokerThread(cfg) as b:
        b.create_topic("slow", 1)
        set_group_configs(b, "lk", share_auto_offset_reset="earliest", share_record_lock_duration_ms="2000")
        produce(b, "slow", 3)
        holder, other = share_consumer(b, "lk", "holder"), share_consumer(b, "lk", "other")
        try:
            holder.subscribe(["slow"])
            held = wait_for(lambda: poll(holder, 0.2), timeout=30, what="the holder's records")
            acquired_at = time.monotonic()
            assert [m.delivery_count() for m in held] == [1] * len(held)
            # The holder neither acknowledges nor polls again; the other member gets them once the locks expire.
            other.subscribe(["slow"])
            again: list[Any] = []

            def redelivered() -> bool:
                for m in poll(other, 0.2):
                    again.append(m)
                    other.acknowledge(m, AcknowledgeType.ACCEPT)
                if again:
                    other.commit_sync()
                return len(again) >= len(held)

            wait_for(redelivered, timeout=30, what="redelivery after the lock expired")
            assert time.monotonic() - acquired_at >= 1.9
            assert sorted(m.offset() for m in again) == sorted(m.offset() for m in held)
            assert {m.delivery_count() for m in again} == {2}
        finally:
            holder.close()
            other.close()


def test_a_closing_members_records_come_back_at_once() -> None:
    with BrokerThread(BrokerConfig(port=0, **FAST)) as b:
        b.create_topic("close", 1)
        set_group_configs(b, "cl", share_auto_offset_reset="earliest")  # 30 s locks: expiry is not what frees them
        produce(b, "close", 4)
        leaving, staying = share_consumer(b, "cl", "leaving"), share_consumer(b, "cl", "staying")
        try:
            leaving.subscribe(["close"])
            held = wait_for(lambda: poll(leaving, 0.2), timeout=30, what="records for the leaving member")
            leaving.close()  # nothing acknowledged: its session ends and its records go back
            staying.subscribe(["close"])
            got: list[Any] = []

            def take() -> bool:
                for m in poll(staying, 0.2):
                    got.append(m)
                    staying.acknowledge(m, AcknowledgeType.ACCEPT)
                if got:
                    staying.commit_sync()
                return len({m.offset() for m in got}) == 4

            wait_for(take, timeout=15, what="the other member taking every record")
            redelivered = {m.offset(): m.delivery_count() for m in got}
            assert all(redelivered[m.offset()] == 2 for m in held)
        finally:
            staying.close()


def test_share_partition_state_survives_a_restart(tmp_path: Path) -> None:
    cfg = BrokerConfig(port=0, data_dir=tmp_path / "data", **FAST)
    with BrokerThread(cfg) as b:
        b.create_topic("durable", 1)
        set_group_configs(b, "du", share_auto_offset_reset="earliest")
        produce(b, "durable", 10)
        c = share_consumer(b, "du", "first")
        accepted: set[int] = set()
        try:
            c.subscribe(["durable"])

            def accept_some() -> bool:
                msgs = poll(c, 0.2)
                for m in msgs:  # accept the even offsets, reject 9, release the other odd ones
                    kind = (AcknowledgeType.ACCEPT if m.offset() % 2 == 0 else
                            AcknowledgeType.REJECT if m.offset() == 9 else AcknowledgeType.RELEASE)
                    c.acknowledge(m, kind)
                    if kind == AcknowledgeType.ACCEPT:
                        accepted.add(m.offset())
                if msgs:
                    c.commit_sync()
                return len(accepted) == 5

            wait_for(accept_some, timeout=30, what="five records accepted")
        finally:
            c.close()
        port = b.port
    with BrokerThread(BrokerConfig(port=port, data_dir=tmp_path / "data", **FAST)) as b:
        c = share_consumer(b, "du", "second")
        got: list[Any] = []
        try:
            c.subscribe(["durable"])

            def rest() -> bool:
                for m in poll(c, 0.2):
                    got.append(m)
                    c.acknowledge(m, AcknowledgeType.ACCEPT)
                if got:
                    c.commit_sync()
                return len(got) >= 4

            wait_for(rest, timeout=30, what="the released records after the restart")
            assert sorted(m.offset() for m in got) == [1, 3, 5, 7]  # not the accepted ones, not the rejected 9
            assert {m.delivery_count() for m in got} == {2}
        finally:
            c.close()


def test_share_group_offsets_admin_apis() -> None:
    with BrokerThread(BrokerConfig(port=0, **FAST)) as b:
        b.create_topic("adm", 2)
        set_group_configs(b, "og", share_auto_offset_reset="earliest")
        produce(b, "adm", 10, partitions=2)
        c = share_consumer(b, "og", "c")
        try:
            c.subscribe(["adm"])
            count = [0]

            def consume() -> bool:
                msgs = poll(c, 0.2)
                for m in msgs:
                    c.acknowledge(m, AcknowledgeType.ACCEPT)
                count[0] += len(msgs)
                if msgs:
                    c.commit_sync()
                return count[0] >= 10

            wait_for(consume, timeout=30, what="ten records consumed")
            wait_for(lambda: all(share_partition(b, "og", "adm", p).start_offset == 5 for p in (0, 1)),
                     what="both share-partitions done")
            r = offsets_request(b, ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 1, {"groups": [{"group_id": "og",
                                                                                          "topics": None}]})
            parts = {p["partition_index"]: p for p in r["groups"][0]["topics"][0]["partitions"]}
            assert [(i, parts[i]["start_offset"], parts[i]["lag"]) for i in (0, 1)] == [(0, 5, 0), (1, 5, 0)]
            alter = {"group_id": "og", "topics": [{"topic_name": "adm", "partitions": [
                {"partition_index": 0, "start_offset": 2}]}]}
            r = offsets_request(b, ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, alter)
            assert r["error_code"] == ErrorCode.NON_EMPTY_GROUP
        finally:
            c.close()
        wait_for(lambda: members(b, "og") == 0, what="the group empty")
        r = offsets_request(b, ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, alter)
        assert r["error_code"] == 0 and r["responses"][0]["partitions"][0]["error_code"] == 0
        r = offsets_request(b, ApiKey.DELETE_SHARE_GROUP_OFFSETS, 0, {"group_id": "og",
                                                                      "topics": [{"topic_name": "nope"}]})
        assert r["responses"][0]["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        # A new member starts from the altered offset on partition 0: offsets 2-4 come again.
        again = share_consumer(b, "og", "again")
        got: list[tuple[int, int]] = []
        try:
            again.subscribe(["adm"])

            def replay() -> bool:
                msgs = poll(again, 0.2)
                for m in msgs:
                    got.append((m.partition(), m.offset()))
                    again.acknowledge(m, AcknowledgeType.ACCEPT)
                if msgs:
                    again.commit_sync()
                return len(got) >= 3

            wait_for(replay, timeout=30, what="the replayed records")
            assert sorted(got) == [(0, 2), (0, 3), (0, 4)]
        finally:
            again.close()
        wait_for(lambda: members(b, "og") == 0, what="the group empty again")
        r = offsets_request(b, ApiKey.DELETE_SHARE_GROUP_OFFSETS, 0, {"group_id": "og",
                                                                      "topics": [{"topic_name": "adm"}]})
        assert r["error_code"] == 0 and r["responses"][0]["error_code"] == 0
        r = offsets_request(b, ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 1, {"groups": [{"group_id": "og", "topics": [
            {"topic_name": "adm", "partitions": [0, 1]}]}]})
        assert [p["start_offset"] for p in r["groups"][0]["topics"][0]["partitions"]] == [-1, -1]


def test_offsets_altered_before_the_group_exists() -> None:
    """Kafka 4.2: AlterShareGroupOffsets on a share group no member has joined yet creates the group and
    initialises its share-partitions; confluent-kafka's first ShareConsumer then starts at those offsets (not
    at the latest offset, the group's ``share.auto.offset.reset``)."""
    with BrokerThread(BrokerConfig(port=0, **FAST)) as b:
        b.create_topic("early", 2)
        produce(b, "early", 10, partitions=2)  # offsets 0-4 in each partition
        alter = {"group_id": "ng", "topics": [{"topic_name": "early", "partitions": [
            {"partition_index": 0, "start_offset": 3}, {"partition_index": 1, "start_offset": 1}]}]}
        r = offsets_request(b, ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, alter)
        assert r["error_code"] == 0
        assert [(p["partition_index"], p["error_code"]) for p in r["responses"][0]["partitions"]] == [(0, 0), (1, 0)]
        assert ("ng", "Empty") in b.call(b.broker.share_groups.list_groups)
        r = offsets_request(b, ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 1, {"groups": [{"group_id": "ng", "topics": None}]})
        assert [(p["partition_index"], p["start_offset"], p["lag"])
                for p in r["groups"][0]["topics"][0]["partitions"]] == [(0, 3, 2), (1, 1, 4)]
        c = share_consumer(b, "ng", "first")
        got: list[tuple[int, int]] = []
        try:
            c.subscribe(["early"])

            def consume() -> bool:
                msgs = poll(c, 0.2)
                for m in msgs:
                    got.append((m.partition(), m.offset()))
                    c.acknowledge(m, AcknowledgeType.ACCEPT)
                if msgs:
                    c.commit_sync()
                return len(got) >= 6

            wait_for(consume, timeout=30, what="the records from the altered offsets")
            assert sorted(got) == [(0, 3), (0, 4), (1, 1), (1, 2), (1, 3), (1, 4)]
        finally:
            c.close()
