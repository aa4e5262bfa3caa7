"""A synthetic capture of KIP-848 consumer-group and KIP-932 share-group traffic for the analysis tests.

One broker (0), topic "sq" (id :data:`TOPIC_ID`) with two partitions; the log holds offsets 0-9 of
partition 0 in two batches of 5 (:data:`P0_BATCHES`) and offsets 0-3 of partition 1 in one batch.
The capture (times in ms after :data:`T0_NS`):

* Metadata names the topic (ShareFetch rows carry only its id);
* consumer group "cg": member "c1" joins with ConsumerGroupHeartbeat v1 (epoch 0 -> 1, both partitions
  assigned), heartbeats (epoch 1, assignment unchanged: null), commits with OffsetCommit v9 (member
  epoch 1), fetches its offsets with OffsetFetch v9, is described (ConsumerGroupDescribe v1) and
  leaves (epoch -1);
* share group "sg": members "s1" and "s2" join with ShareGroupHeartbeat v1 (epochs 1 and 2); s1 opens
  a share session with ShareFetch v1 (epoch 0) and acquires p0 0-4 and p1 0-3, then (epoch 1)
  accepts p0 0-4 and acknowledges p1 0-3 one type per offset (accept, accept, release, reject),
  acquiring p0 5-9 and p1 2 again (delivery count 2); s2 acknowledges without a session
  (SHARE_SESSION_NOT_FOUND), then opens one and gets nothing; s1 acknowledges p0 5-9 (accept) and p1 2
  (reject) with ShareAcknowledge v1 (epoch 2; p1 answers INVALID_RECORD_STATE) and closes its session
  (epoch -1); DescribeShareGroupOffsets v1 and ShareGroupDescribe v1 describe the group.

Every expectation the tests check is stated next to the records it comes from (:data:`EXPECTED_*`).
"""

from __future__ import annotations

import uuid
from pathlib import Path

from minikafka.capture.format import CaptureRecord, encode_block, encode_record
from minikafka.protocol.api import ApiKey as K
from minikafka.protocol.records import Record, build_batch
from txn_helpers import _request, _response  # one builder of request/response frames for the synthetic captures
from minikafka.common.clock import SYSTEM_CLOCK

TOPIC = "sq"
TOPIC_ID = uuid.UUID("5a5a5a5a-0000-4000-8000-000000000001")
T0_NS = 1_700_000_000 * 10**9
C1, S1, S2 = "c1-member-uuid", "s1-member-uuid", "s2-member-uuid"


def batch(base: int, n: int) -> bytes:
    return build_batch([Record(offset_delta=i, value=b"v%d" % (base + i)) for i in range(n)], base_offset=base,
                       base_timestamp=SYSTEM_CLOCK.time_ms())


P0_BATCHES = [batch(0, 5), batch(5, 5)]
P1_BATCH = batch(0, 4)




_PEER_PORTS: dict[str, int] = {}


def record(t_ms: int, conn: str, client_id: str, key: int, version: int, corr: int, req: dict,
           resp: dict | None, latency_ms: int = 2) -> CaptureRecord:
    recv = T0_NS + t_ms * 1_000_000
    port = _PEER_PORTS.setdefault(conn, 40000 + len(_PEER_PORTS))  # a connection per client port, as on the wire
    return CaptureRecord(recv, recv + latency_ms * 1_000_000, conn, f"127.0.0.1:{port}", 0, "User:ANONYMOUS",
                         client_id, key, version, corr, _request(key, version, corr, client_id, req),
                         None if resp is None else _response(key, version, corr, resp))


def _leader() -> dict:
    return {"leader_id": 0, "leader_epoch": 0}


def share_fetch(t_ms: int, corr: int, member: str, epoch: int, asked: list[tuple[int, list]],
                answered: list[tuple[int, bytes | None, list, int]], error: int = 0,
                forgotten: list[int] | None = None) -> CaptureRecord:
    """ShareFetch v1: ``asked`` (partition, acknowledgement batches (first, last, [types])), ``answered``
    (partition, records, acquired (first, last, delivery count), acknowledge error code)."""
    req = {"group_id": "sg", "member_id": member, "share_session_epoch": epoch, "max_wait_ms": 500,
           "min_bytes": 1, "max_bytes": 1 << 20, "max_records": 500, "batch_size": 500,
           "topics": [{"topic_id": TOPIC_ID, "partitions": [
               {"partition_index": p, "acknowledgement_batches": [
                   {"first_offset": f, "last_offset": last, "acknowledge_types": types} for f, last, types in acks]}
               for p, acks in asked]}] if asked else [],
           "forgotten_topics_data": [{"topic_id": TOPIC_ID, "partitions": forgotten}] if forgotten else []}
    resp = {"throttle_time_ms": 0, "error_code": error, "error_message": None, "acquisition_lock_timeout_ms": 30000,
            "responses": [{"topic_id": TOPIC_ID, "partitions": [
                {"partition_index": p, "error_code": 0, "error_message": None, "acknowledge_error_code": ack_err,
                 "acknowledge_error_message": None, "current_leader": _leader(), "records": records,
                 "acquired_records": [{"first_offset": f, "last_offset": last, "delivery_count": dc}
                                      for f, last, dc in acquired]}
                for p, records, acquired, ack_err in answered]}] if answered else [],
            "node_endpoints": []}
    return record(t_ms, f"0-{member}-fetch", f"share-{member}", K.SHARE_FETCH, 1, corr, req, resp, latency_ms=20)


def share_acknowledge(t_ms: int, corr: int, member: str, epoch: int, asked: list[tuple[int, list]],
                      errors: dict[int, int], error: int = 0) -> CaptureRecord:
    req = {"group_id": "sg", "member_id": member, "share_session_epoch": epoch,
           "topics": [{"topic_id": TOPIC_ID, "partitions": [
               {"partition_index": p, "acknowledgement_batches": [
                   {"first_offset": f, "last_offset": last, "acknowledge_types": types} for f, last, types in acks]}
               for p, acks in asked]}]}
    resp = {"throttle_time_ms": 0, "error_code": error, "error_message": None,
            "responses": [] if error else [{"topic_id": TOPIC_ID, "partitions": [
                {"partition_index": p, "error_code": errors.get(p, 0), "error_message": None,
                 "current_leader": _leader()} for p, _ in asked]}],
            "node_endpoints": []}
    return record(t_ms, f"0-{member}-fetch", f"share-{member}", K.SHARE_ACKNOWLEDGE, 1, corr, req, resp)


def _assignment(parts: list[int] | None) -> dict | None:
    return None if parts is None else {"topic_partitions": [{"topic_id": TOPIC_ID, "partitions": parts}]}


def heartbeat(t_ms: int, corr: int, key: int, group: str, member: str, epoch: int, new_epoch: int,
              parts: list[int] | None, error: int = 0) -> CaptureRecord:
    req: dict = {"group_id": group, "member_id": member, "member_epoch": epoch,
                 "subscribed_topic_names": [TOPIC] if epoch == 0 else None}
    if key == K.CONSUMER_GROUP_HEARTBEAT:
        req["rebalance_timeout_ms"] = 300000 if epoch == 0 else -1
    resp = {"throttle_time_ms": 0, "error_code": error, "error_message": None, "member_id": member,
            "member_epoch": new_epoch, "heartbeat_interval_ms": 5000, "assignment": _assignment(parts)}
    return record(t_ms, f"0-{member}-coord", member, key, 1, corr, req, resp)


def group_records() -> list[CaptureRecord]:
    """The capture's records in receive order."""
    recs = [
        record(0, "0-meta", "admin", K.METADATA, 12, 1, {"topics": None}, {
            "throttle_time_ms": 0, "brokers": [{"node_id": 0, "host": "localhost", "port": 9092, "rack": None}],
            "cluster_id": "c", "controller_id": 0, "topics": [
                {"error_code": 0, "name": TOPIC, "topic_id": TOPIC_ID, "is_internal": False, "partitions": [
                    {"error_code": 0, "partition_index": p, "leader_id": 0, "leader_epoch": 0,
                     "replica_nodes": [0], "isr_nodes": [0], "offline_replicas": []} for p in (0, 1)],
                 "topic_authorized_operations": -2147483648}]}),
        # Consumer group "cg" (KIP-848).
        heartbeat(10, 1, K.CONSUMER_GROUP_HEARTBEAT, "cg", C1, 0, 1, [0, 1]),
        heartbeat(20, 2, K.CONSUMER_GROUP_HEARTBEAT, "cg", C1, 1, 1, None),
        record(30, f"0-{C1}-coord", C1, K.OFFSET_COMMIT, 9, 3, {
            "group_id": "cg", "generation_id_or_member_epoch": 1, "member_id": C1, "group_instance_id": None,
            "topics": [{"name": TOPIC, "partitions": [
                {"partition_index": 0, "committed_offset": 10, "committed_leader_epoch": -1,
                 "committed_metadata": ""}]}]},
            {"throttle_time_ms": 0, "topics": [{"name": TOPIC, "partitions": [
                {"partition_index": 0, "error_code": 0}]}]}),
        record(40, f"0-{C1}-coord", C1, K.OFFSET_FETCH, 9, 4, {
            "groups": [{"group_id": "cg", "member_id": C1, "member_epoch": 1, "topics": None}],
            "require_stable": True},
            {"throttle_time_ms": 0, "groups": [{"group_id": "cg", "topics": [], "error_code": 0}]}),
        record(50, "0-admin", "admin", K.CONSUMER_GROUP_DESCRIBE, 1, 5,
               {"group_ids": ["cg"], "include_authorized_operations": False},
               {"throttle_time_ms": 0, "groups": [{
                   "error_code": 0, "error_message": None, "group_id": "cg", "group_state": "Stable",
                   "group_epoch": 1, "assignment_epoch": 1, "assignor_name": "uniform", "members": [], }]}),
        heartbeat(60, 6, K.CONSUMER_GROUP_HEARTBEAT, "cg", C1, -1, -1, None),
        # Share group "sg" (KIP-932).
        heartbeat(100, 1, K.SHARE_GROUP_HEARTBEAT, "sg", S1, 0, 1, [0, 1]),
        heartbeat(105, 1, K.SHARE_GROUP_HEARTBEAT, "sg", S2, 0, 2, [0, 1]),
        share_fetch(110, 1, S1, 0, [(0, []), (1, [])],
                    [(0, P0_BATCHES[0], [(0, 4, 1)], 0), (1, P1_BATCH, [(0, 3, 1)], 0)]),
        share_fetch(200, 2, S1, 1, [(0, [(0, 4, [1])]), (1, [(0, 3, [1, 1, 2, 3])])],
                    [(0, P0_BATCHES[1], [(5, 9, 1)], 0), (1, P1_BATCH, [(2, 2, 2)], 0)]),
        share_acknowledge(210, 1, S2, 1, [(0, [(0, 0, [1])])], {}, error=122),  # SHARE_SESSION_NOT_FOUND
        share_fetch(220, 2, S2, 0, [(0, []), (1, [])], []),
        share_acknowledge(300, 3, S1, 2, [(0, [(5, 9, [1])]), (1, [(2, 2, [3])])], {1: 121}),  # INVALID_RECORD_STATE
        share_fetch(310, 4, S1, -1, [], [], forgotten=[0, 1]),
        record(400, "0-admin", "admin", K.DESCRIBE_SHARE_GROUP_OFFSETS, 1, 6,
               {"groups": [{"group_id": "sg", "topics": [{"topic_name": TOPIC, "partitions": [0, 1]}]}]},
               {"throttle_time_ms": 0, "groups": [{"group_id": "sg", "topics": [
                   {"topic_name": TOPIC, "topic_id": TOPIC_ID, "partitions": [
                       {"partition_index": p, "start_offset": o, "leader_epoch": 0, "lag": 0, "error_code": 0,
                        "error_message": None} for p, o in ((0, 10), (1, 4))]}],
                   "error_code": 0, "error_message": None}]}),
        record(410, "0-admin", "admin", K.SHARE_GROUP_DESCRIBE, 1, 7,
               {"group_ids": ["sg"], "include_authorized_operations": False},
               {"throttle_time_ms": 0, "groups": [{
                   "error_code": 0, "error_message": None, "group_id": "sg", "group_state": "Stable",
                   "group_epoch": 2, "assignment_epoch": 2, "assignor_name": "simple", "members": []}]}),
    ]
    return sorted(recs, key=lambda r: r.receive_ns)


def write_group_capture(directory: Path) -> Path:
    """The capture as one ``.mkcap`` file in ``directory``; returns the directory."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "capture-0-0.mkcap").write_bytes(encode_block([encode_record(r) for r in group_records()]))
    return directory


# -- expectations ----------------------------------------------------------------------------------------
#: Per ShareFetch/ShareAcknowledge request of the capture (in order): (api, member, share session epoch, kind,
#: acquired, redelivered, accepted, released, rejected, records returned, error name).
EXPECTED_SHARE_REQUESTS = [
    ("ShareFetch", S1, 0, "full", 9, 0, 0, 0, 0, 9, "NONE"),
    ("ShareFetch", S1, 1, "incremental", 6, 1, 7, 1, 1, 9, "NONE"),
    ("ShareAcknowledge", S2, 1, "incremental", None, None, 1, 0, 0, None, "SHARE_SESSION_NOT_FOUND"),
    ("ShareFetch", S2, 0, "full", 0, 0, 0, 0, 0, 0, "NONE"),
    ("ShareAcknowledge", S1, 2, "incremental", None, None, 5, 0, 1, None, "INVALID_RECORD_STATE"),
    ("ShareFetch", S1, -1, "close", 0, 0, 0, 0, 0, 0, "NONE"),
]
#: The share group's totals over its ShareFetch responses and acknowledgements.
EXPECTED_SHARE_TOTALS = {"acquired": 15, "redelivered": 1, "accepted": 13, "released": 1, "rejected": 2,
                         "records": 18, "record_bytes": len(P0_BATCHES[0]) + len(P0_BATCHES[1]) + 2 * len(P1_BATCH)}


# -- a capture made with real clients ------------------------------------------------------------------
CLIENT_MESSAGES = 90
CLIENT_SETTINGS = dict(group_consumer_heartbeat_interval_ms=500, group_consumer_min_heartbeat_interval_ms=100,
                       group_share_min_heartbeat_interval_ms=100, group_share_heartbeat_interval_ms=300,
                       group_initial_rebalance_delay_ms=0)


def client_group_capture(cap: Path) -> dict[str, int]:
    """One broker, capture on; topics "kt" (6 partitions) and "st" (3) created with CreateTopics, the share
    group "sg" set to ``share.auto.offset.reset=earliest`` with IncrementalAlterConfigs (resource GROUP):

    * 90 values are produced to "kt", then three confluent-kafka consumers with ``group.protocol=consumer``
      join group "cg" and share its partitions, committing each value consumed at once (OffsetCommit v9,
      member epochs); one member leaves half-way and the others take over;
    * two confluent-kafka ShareConsumers (explicit acknowledgement) consume "st": 45 values produced
      before, 45 while they consume; a value ending in 7 is released the first time (redelivered), one
      ending in 3 rejected, the others accepted.

    Returns what the clients saw: values consumed from "kt", acknowledgements by type, share records
    received (redeliveries included)."""
    from analysis_helpers import wait_until
    from confluent_kafka import AcknowledgeType, Consumer, Producer, ShareConsumer
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        NewTopic,
        ResourceType,
    )

    from minikafka.broker.config import BrokerConfig
    from minikafka.testing import BrokerThread

    n = CLIENT_MESSAGES
    seen = {"consumed": 0, "accepted": 0, "released": 0, "rejected": 0, "share_received": 0}
    with BrokerThread(BrokerConfig(port=0, capture_dir=cap, **CLIENT_SETTINGS)) as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap, "log_level": 3})
        for f in admin.create_topics([NewTopic("kt", 6, 1), NewTopic("st", 3, 1)]).values():
            f.result(10)
        res = ConfigResource(ResourceType.GROUP, "sg", incremental_configs=[ConfigEntry(
            "share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
        admin.incremental_alter_configs([res])[res].result(10)
        p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 5, "client.id": "producer", "log_level": 3})
        consumers = [Consumer({"bootstrap.servers": b.bootstrap, "group.id": "cg", "client.id": f"kc{i}",
                               "group.protocol": "consumer", "enable.auto.commit": False,
                               "auto.offset.reset": "earliest", "fetch.wait.max.ms": 100, "log_level": 3})
                     for i in range(3)]
        # Everything is produced before the members fetch: a Fetch long poll woken by a produce could be
        # answered otherwise in the replay (the produce may be held longer than the poll waits).
        for i in range(n):
            p.produce("kt", b"k%d" % i, partition=i % 6)
        for i in range(n // 2):
            p.produce("st", b"s%d" % i, partition=i % 3)
        assert p.flush(10) == 0
        for c in consumers:
            c.subscribe(["kt"])
        consumed: set[bytes] = set()

        def consume() -> bool:
            for c in consumers:
                for m in c.consume(50, 0.05):
                    if m.error() is None:
                        consumed.add(m.value())
                        seen["consumed"] += 1
                        c.commit(message=m, asynchronous=False)
            if len(consumers) == 3 and len(consumed) > n // 2:
                consumers.pop().close()  # a member leaves; the others take its partitions over
            return len(consumed) == n

        wait_until(consume, 30, "the consumer group to consume everything")
        for c in consumers:
            c.close()

        shares = [ShareConsumer({"bootstrap.servers": b.bootstrap, "group.id": "sg", "client.id": f"sc{i}",
                                 "share.acknowledgement.mode": "explicit", "log_level": 3}) for i in range(2)]
        for s in shares:
            s.subscribe(["st"])
        done: set[bytes] = set()
        released: set[bytes] = set()
        produced = [False]

        def share_consume(p: Producer = p) -> bool:
            for s in shares:
                for m in s.poll(0.05):
                    if m.error() is not None:
                        continue
                    seen["share_received"] += 1
                    v = m.value()
                    if v.endswith(b"7") and v not in released:
                        released.add(v)
                        s.acknowledge(m, AcknowledgeType.RELEASE)
                        seen["released"] += 1
                    elif v.endswith(b"3"):
                        s.acknowledge(m, AcknowledgeType.REJECT)
                        seen["rejected"] += 1
                        done.add(v)
                    else:
                        s.acknowledge(m)
                        seen["accepted"] += 1
                        done.add(v)
                s.commit_async()
            if not produced[0] and len(done) >= n // 4:
                for i in range(n // 2, n):
                    p.produce("st", b"s%d" % i, partition=i % 3)
                assert p.flush(10) == 0
                produced[0] = True
            return len(done) == n

        wait_until(share_consume, 30, "the share group to consume everything")
        for s in shares:
            s.commit_sync()
            s.close()
        del share_consume, p, admin
    return seen
