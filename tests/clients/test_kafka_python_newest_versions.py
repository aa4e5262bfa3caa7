"""kafka-python 3.0 at Kafka 4.2's newest Produce (13), Fetch (18), ListOffsets (11) and Metadata (13).

kafka-python 3.0 ships Kafka 4.2's message schemas, but its KafkaProducer caps Produce at v9 and its
KafkaConsumer Fetch at v12 (``max_version`` in its sender and fetcher).  So the newest Produce and Fetch
go through kafka-python's own network client (``KafkaNetClient``) with its own request classes and record
encoding: a Produce v13 naming the topic by id, a Fetch v18 reading it back, a ListOffsets v11 with the
special timestamps; its KafkaConsumer and admin client use ListOffsets 11 and Metadata 13 by themselves.
The broker's request observer shows the versions actually spoken.  KIP-951: a Produce v13 / Fetch v18 sent
to a broker of a 2-broker cluster that does not lead the partition comes back with the leader and its
endpoint, as kafka-python parses them.
"""

from __future__ import annotations

import collections
import uuid
import warnings

import pytest

with warnings.catch_warnings():  # kafka-python 3 loads its schemas with importlib.resources' legacy API
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka  # noqa: F401
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import OffsetSpec
from kafka.net.compat import KafkaNetClient
from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest
from kafka.protocol.metadata import MetadataRequest
from kafka.protocol.producer import ProduceRequest
from kafka.record.memory_records import MemoryRecords, MemoryRecordsBuilder

from clients_common import report_client_versions  # noqa: F401  (session fixture, used via pytestmark)
from clients_common import wait_for
from minikafka.broker.request import ResponseObserver
from minikafka.protocol.api import ApiKey as K
from minikafka.protocol.errors import ErrorCode as E
from minikafka.testing import BrokerThread, ClusterThread

pytestmark = [pytest.mark.clients, pytest.mark.usefixtures("report_client_versions")]

Topic = ProduceRequest.TopicProduceData
FetchTopic = FetchRequest.FetchTopic
ListTopic = ListOffsetsRequest.ListOffsetsTopic


class VersionsSeen:
    """(api key, version) of every request the broker answers from now on.  The observer is attached and
    counts on the broker's thread; :meth:`counts` copies the counts there too."""

    def __init__(self, broker_thread: BrokerThread) -> None:
        self.broker_thread = broker_thread
        self.seen: collections.Counter = collections.Counter()
        broker = broker_thread.broker
        assert broker is not None
        broker_thread.call(lambda: broker.observe(ResponseObserver(
            lambda ctx, frame, resp: self.seen.update([(ctx.api_key, ctx.api_version)]))))

    def counts(self) -> collections.Counter:
        return self.broker_thread.call(lambda: collections.Counter(self.seen))


def records(values: list[bytes]) -> bytes:
    """A v2 record batch, as kafka-python's producer encodes one."""
    builder = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 20)
    for v in values:
        builder.append(timestamp=None, key=None, value=v, headers=[])
    builder.close()
    return builder.buffer()


def decoded(raw: bytes) -> list[bytes]:
    out: list[bytes] = []
    batches = MemoryRecords(bytes(raw))
    while batches.has_next():
        out += [r.value for r in batches.next_batch()]
    return out


def net_client(bootstrap: str) -> KafkaNetClient:
    client = KafkaNetClient(bootstrap_servers=bootstrap, client_id="kp-newest")
    client.check_version()
    return client


def topic_id_of(client: KafkaNetClient, node: int, name: str) -> uuid.UUID:
    md = client.send_and_receive(node, MetadataRequest(
        topics=[MetadataRequest.MetadataRequestTopic(name=name)], allow_auto_topic_creation=True, max_version=13))
    assert md.version == 13 and md.error_code == 0 and md.topics[0].error_code == 0
    return md.topics[0].topic_id


def produce_v13(client: KafkaNetClient, node: int, topic_id: uuid.UUID, values: list[bytes]):
    return client.send_and_receive(node, ProduceRequest(
        transactional_id=None, acks=-1, timeout_ms=5000, max_version=13,
        topic_data=[Topic(topic_id=topic_id, partition_data=[Topic.PartitionProduceData(index=0,
                                                                                        records=records(values))])]))


def fetch_v18(client: KafkaNetClient, node: int, topic_id: uuid.UUID, offset: int = 0):
    return client.send_and_receive(node, FetchRequest(
        max_wait_ms=100, min_bytes=1, max_bytes=1 << 20, isolation_level=0, session_id=0, session_epoch=-1,
        forgotten_topics_data=[], rack_id="", max_version=18,
        topics=[FetchTopic(topic_id=topic_id, partitions=[
            FetchTopic.FetchPartition(partition=0, fetch_offset=offset, partition_max_bytes=1 << 20)])]))


def test_kafka_python_speaks_produce_13_fetch_18_list_offsets_11(broker_thread: BrokerThread) -> None:
    versions = VersionsSeen(broker_thread)
    client = net_client(broker_thread.bootstrap)
    try:
        node = client.least_loaded_node()
        # ApiVersions negotiation: kafka-python settles on Kafka 4.2's newest of each.
        assert [client.api_version(req, max_version=1 << 15) for req in (
            ProduceRequest, FetchRequest, ListOffsetsRequest, MetadataRequest)] == [13, 18, 11, 13]
        tid = topic_id_of(client, node, "kp-newest")
        r = produce_v13(client, node, tid, [b"a", b"b", b"c"])
        assert r.version == 13
        [t] = r.responses
        assert t.topic_id == tid and [(p.error_code, p.base_offset) for p in t.partition_responses] == [(0, 0)]
        bad = produce_v13(client, node, uuid.uuid4(), [b"lost"])
        assert bad.responses[0].partition_responses[0].error_code == E.UNKNOWN_TOPIC_ID

        f = fetch_v18(client, node, tid)
        assert f.version == 18 and f.error_code == 0
        [fp] = f.responses[0].partitions
        assert f.responses[0].topic_id == tid and fp.high_watermark == 3
        assert decoded(fp.records) == [b"a", b"b", b"c"]
    finally:
        client.close()

    # kafka-python's own producer and consumer (Produce/Fetch capped by kafka-python itself) on the same
    # topic: the consumer's offset reset is a ListOffsets 11, its metadata Metadata 13.
    producer = KafkaProducer(bootstrap_servers=broker_thread.bootstrap, acks="all")
    producer.send("kp-newest", value=b"d", partition=0).get(timeout=10)
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=broker_thread.bootstrap, auto_offset_reset="earliest",
                             fetch_max_wait_ms=100, client_id="kp-newest-consumer")
    try:
        tp = TopicPartition("kp-newest", 0)
        consumer.assign([tp])
        got: list[bytes] = []
        wait_for(lambda: got.extend(r.value for rs in consumer.poll(200).values() for r in rs) or len(got) >= 4,
                 what="kafka-python consuming")
        assert got == [b"a", b"b", b"c", b"d"]
        assert consumer.end_offsets([tp]) == {tp: 4}
    finally:
        consumer.close()
    seen = versions.counts()
    assert seen[(K.PRODUCE, 13)] == 2 and seen[(K.FETCH, 18)] == 1
    assert seen[(K.LIST_OFFSETS, 11)] >= 2 and not any(k == K.LIST_OFFSETS and v != 11 for k, v in seen)
    assert seen[(K.METADATA, 13)] >= 2


def test_kafka_python_lists_special_offsets(broker_thread: BrokerThread) -> None:
    """kafka-python's admin ``list_partition_offsets`` with -4 (earliest local) and -5 (latest tiered), and
    -6 (earliest pending upload, which its OffsetSpec lacks) in its own ListOffsets v11: answered as Kafka
    answers them for a topic without tiered storage."""
    versions = VersionsSeen(broker_thread)
    producer = KafkaProducer(bootstrap_servers=broker_thread.bootstrap, acks="all")
    for i in range(3):
        producer.send("kp-offsets", value=b"%d" % i, partition=0)
    producer.flush(10)
    producer.close()
    tp = TopicPartition("kp-offsets", 0)
    admin = KafkaAdminClient(bootstrap_servers=broker_thread.bootstrap, request_timeout_ms=10000)
    try:
        def offsets(spec):
            got = admin.list_partition_offsets({tp: spec})[tp]
            return got.offset, got.timestamp, got.leader_epoch

        assert offsets(OffsetSpec.EARLIEST) == (0, -1, 0)
        assert offsets(OffsetSpec.EARLIEST_LOCAL) == (0, -1, 0)  # no tiered storage: the whole log is local
        assert offsets(OffsetSpec.LATEST) == (3, -1, 0)
        assert offsets(OffsetSpec.LATEST_TIERED) == (-1, -1, None)  # nothing tiered (leader epoch -1)
    finally:
        admin.close()
    client = net_client(broker_thread.bootstrap)
    try:
        r = client.send_and_receive(client.least_loaded_node(), ListOffsetsRequest(
            replica_id=-1, isolation_level=0, timeout_ms=5000, max_version=11,
            topics=[ListTopic(name="kp-offsets", partitions=[
                ListTopic.ListOffsetsPartition(partition_index=0, timestamp=-6)])]))
        [p] = r.topics[0].partitions
        assert (r.version, p.error_code, p.offset, p.timestamp, p.leader_epoch) == (11, 0, -1, -1, -1)
    finally:
        client.close()
    assert {v for k, v in versions.counts() if k == K.LIST_OFFSETS} == {11}


def test_kafka_python_reads_metadata_v13_error_code(broker_thread: BrokerThread) -> None:
    """KIP-1102: a failed Metadata v13 carries its error at the top level (here REBOOTSTRAP_REQUIRED, injected
    as a proxy or an operator would), as kafka-python decodes it."""
    client = net_client(broker_thread.bootstrap)
    try:
        node = client.least_loaded_node()
        topic_id_of(client, node, "kp-md")
        broker_thread.faults.add(api="Metadata", error="REBOOTSTRAP_REQUIRED", count=1)
        md = client.send_and_receive(node, MetadataRequest(
            topics=[MetadataRequest.MetadataRequestTopic(name="kp-md")], allow_auto_topic_creation=False,
            max_version=13))
        assert (md.version, md.error_code) == (13, E.REBOOTSTRAP_REQUIRED)
        assert md.topics[0].error_code == E.REBOOTSTRAP_REQUIRED
    finally:
        client.close()


def test_kafka_python_learns_the_leader_from_a_non_leader() -> None:
    """KIP-951: kafka-python's Produce v13 and Fetch v18 sent to the broker that does not lead the partition
    come back NOT_LEADER_OR_FOLLOWER with ``current_leader`` and the leader's ``node_endpoints``; the
    produce then goes to that endpoint."""
    with ClusterThread(2, group_initial_rebalance_delay_ms=0) as ct:
        ct.create_topic("kp-951", 1, 1)
        leader = ct.leader("kp-951", 0)
        other = 1 - leader
        client = net_client(ct.bootstrap)
        try:
            tid = topic_id_of(client, client.least_loaded_node(), "kp-951")
            r = produce_v13(client, other, tid, [b"x"])
            [p] = r.responses[0].partition_responses
            assert p.error_code == E.NOT_LEADER_OR_FOLLOWER
            assert (p.current_leader.leader_id, p.current_leader.leader_epoch) == (leader, 0)
            [endpoint] = r.node_endpoints
            assert endpoint.node_id == leader
            assert f"{endpoint.host}:{endpoint.port}" in ct.bootstrap.split(",")
            assert produce_v13(client, endpoint.node_id, tid, [b"x"]).responses[0] \
                .partition_responses[0].error_code == 0
            f = fetch_v18(client, other, tid)
            [fp] = f.responses[0].partitions
            assert fp.error_code == E.NOT_LEADER_OR_FOLLOWER and fp.current_leader.leader_id == leader
            assert [n.node_id for n in f.node_endpoints] == [leader]
        finally:
            client.close()
