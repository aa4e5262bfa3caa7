"""A broker process's copy of the metadata (issue 26): the controller's ``__cluster_metadata`` records, applied in
order, give the broker the controller's topics, leaders, ISRs, configs and broker registrations, and tell it what
changed."""

from __future__ import annotations

from pathlib import Path

import pytest

from minikafka.broker.producer_state import ProducerIdBlocks, ProducerIdsUnavailable
from minikafka.broker.metadata import ClusterMetadata, MetadataError
from minikafka.broker.metadata_loader import MetadataReplica, apply_records, decode_batches
from minikafka.broker.quorum_controller import PRODUCER_ID_BLOCK_SIZE
from minikafka.protocol.principal import decode_principal, encode_principal


def _controller(tmp_path: Path) -> ClusterMetadata:
    metadata = ClusterMetadata([], tmp_path)
    for b in range(3):
        metadata.broker_started(b, "127.0.0.1", 9100 + b, endpoints={"PLAINTEXT": ("127.0.0.1", 9100 + b),
                                                                   "CLIENTS": ("localhost", 9200 + b)})
    return metadata


def _records(metadata: ClusterMetadata, start: int = 0):
    lg = metadata.metadata_log.log
    raw = b"".join(bytes(view) for _h, view in lg.iter_batches_from(start))
    return decode_batches(raw)


def _same(replica: MetadataReplica, controller: ClusterMetadata) -> None:
    assert sorted(replica.topics) == sorted(controller.topics)
    for name, topic in controller.topics.items():
        mine = replica.topics[name]
        assert mine.topic_id == topic.topic_id and mine.configs == topic.configs
        assert [(p.leader, p.leader_epoch, p.replicas, p.isr) for p in mine.partitions] == \
            [(p.leader, p.leader_epoch, p.replicas, p.isr) for p in topic.partitions]
    assert replica.live == controller.live and replica.broker_epochs == controller.broker_epochs
    assert replica.replica_count == controller.replica_count


def test_the_records_give_the_broker_the_controllers_metadata_and_say_what_changed(tmp_path: Path):
    controller = _controller(tmp_path)
    controller.create_topic("a", 3, 3, {"retention.ms": "1000"})
    controller.create_topic("b", 2, 2)
    replica = MetadataReplica()
    records, end = _records(controller)
    changes = apply_records(replica, records, "PLAINTEXT")
    assert end == controller.metadata_offset
    assert changes == {"a": ["created"], "b": ["created"]}
    _same(replica, controller)
    assert replica.endpoints[1]["CLIENTS"].port == 9201

    # Later changes, applied from where the broker was: an ISR change, a leader moved by a fence, a config, a
    # deleted topic, new partitions.
    controller.set_isr("a", 0, [0, 1], leader=0, leader_epoch=0)
    controller.set_topic_configs("b", {"cleanup.policy": "compact"})
    controller.delete_topic("b")
    controller.add_partitions("a", 4)
    controller.broker_stopped(2)
    records, end2 = _records(controller, end)
    changes = apply_records(replica, records, "PLAINTEXT")
    _same(replica, controller)
    assert changes["a"] == ["leadership", "partitions"] and changes["b"] == ["deleted"]
    assert 2 not in replica.live and replica.metadata_offset == end2


def test_a_broker_asks_the_controller_for_a_topic_it_lacks_instead_of_making_it(tmp_path: Path):
    replica = MetadataReplica()
    apply_records(replica, _records(_controller(tmp_path))[0], "PLAINTEXT")  # three brokers registered
    asked: list[tuple] = []
    replica.request_topic = lambda *args: asked.append(args)
    with pytest.raises(MetadataError) as exc:
        replica.create_topic("auto", 1, 1)
    assert exc.value.pending and "auto" not in replica.topics
    with pytest.raises(MetadataError):
        replica.ensure_internal_topic("__consumer_offsets", 3, 1, {"cleanup.policy": "compact"})
    assert asked == [("auto", 1, 1, {}), ("__consumer_offsets", 3, 1, {"cleanup.policy": "compact"})]


def test_producer_id_blocks_come_from_the_controller_and_survive_its_restart(tmp_path: Path):
    controller = _controller(tmp_path)
    first = controller.allocate_producer_ids(0, controller.broker_epoch(0), PRODUCER_ID_BLOCK_SIZE)
    second = controller.allocate_producer_ids(1, controller.broker_epoch(1), PRODUCER_ID_BLOCK_SIZE)
    assert second == first + PRODUCER_ID_BLOCK_SIZE
    controller.close()
    again = ClusterMetadata([], tmp_path)  # replayed: the next block follows the last ProducerIdsRecord
    assert again.allocate_producer_ids(2, -1, PRODUCER_ID_BLOCK_SIZE) == second + PRODUCER_ID_BLOCK_SIZE

    blocks = ProducerIdBlocks()
    wanted: list[int] = []
    blocks.request_block = lambda: wanted.append(1)
    with pytest.raises(ProducerIdsUnavailable):
        blocks.generate()
    blocks.add_block(first, 10)
    assert [blocks.generate() for _ in range(10)] == list(range(first, first + 10))
    assert len(wanted) == 2  # asked again as the block ran low (once)
    blocks.add_block(second, 10)
    assert blocks.generate() == second


def test_an_envelopes_principal_is_kafkas_default_principal_data():
    data = encode_principal("User:alice")
    assert data == b"\x00\x00\x05User\x06alice\x00\x00"  # version 0, compact strings, no token, no tags
    assert decode_principal(data) == "User:alice"
    assert decode_principal(encode_principal("User:CN=broker,O=x", True)) == "User:CN=broker,O=x"


def test_a_snapshot_replaces_the_copy_and_says_what_changed_against_it(tmp_path: Path):
    """A broker that fell behind the log's start takes the controller's snapshot instead (Kafka's MetadataLoader
    loading a snapshot): its copy becomes the snapshot's, the broker is told of the topics gone, new and changed,
    and every publisher is told (here the ACLs removed meanwhile)."""
    import uuid

    from minikafka.broker.metadata_loader import reset_to_snapshot
    from minikafka.broker.metadata_snapshot import read_snapshot, state_records

    controller = _controller(tmp_path)
    controller.create_topic("kept", 2, 3)
    controller.create_topic("gone", 1, 1)
    controller.create_topic("replaced", 1, 1)
    controller.write_acls({uuid.UUID(int=7): (2, "kept", 3, "User:alice", "*", 3, 3)}, [])
    replica = MetadataReplica()
    published: list[dict] = []
    replica.publishers = {"acls": [lambda st: published.append(dict(st.acls))]}
    apply_records(replica, _records(controller)[0], "PLAINTEXT")
    assert published == [{uuid.UUID(int=7): (2, "kept", 3, "User:alice", "*", 3, 3)}]

    controller.delete_topic("gone")
    controller.delete_topic("replaced")
    controller.create_topic("replaced", 2, 2)
    controller.create_topic("new", 1, 1)
    controller.set_topic_configs("kept", {"retention.ms": "5"})
    controller.broker_stopped(2)
    controller.write_acls({}, [uuid.UUID(int=7)])
    snapshot = list(read_snapshot(_snapshot_bytes(state_records(controller._image, controller.state)), "test"))
    changes = reset_to_snapshot(replica, snapshot, controller.metadata_offset, "PLAINTEXT")
    _same(replica, controller)
    assert changes == [{"replaced": ["deleted"], "gone": ["deleted"]},
                       {"kept": ["config", "leadership"], "replaced": ["created"], "new": ["created"]}]
    assert replica.metadata_offset == controller.metadata_offset and published[-1] == {}


def _snapshot_bytes(records: list[bytes]) -> bytes:
    import tempfile

    from minikafka.broker.metadata_snapshot import SnapshotId, write_snapshot

    with tempfile.TemporaryDirectory() as directory:
        return write_snapshot(Path(directory), SnapshotId(1, 1), records, 0).read_bytes()
