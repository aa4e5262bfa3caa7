"""A leader's high watermark over the maximal ISR (KIP-497): an ISR change sent to the controller and not yet
answered counts its members too, since the controller may already have committed it and elect any of them."""

from __future__ import annotations

from pathlib import Path

from helpers import batch
from minikafka.broker.config import BrokerConfig
from minikafka.broker.metadata import ClusterMetadata
from minikafka.broker.partition import ReplicaState
from minikafka.broker.replica_manager import ReplicaManager


def test_an_expansion_in_flight_holds_the_high_watermark_to_the_added_follower(tmp_path: Path) -> None:
    metadata = ClusterMetadata([0, 1, 2])
    pm = metadata.create_topic("t", 1, 3).partitions[0]
    leader = pm.leader
    follower, joining = [b for b in pm.replicas if b != leader]
    metadata.set_isr("t", 0, [leader, follower], leader, pm.leader_epoch)
    rm = ReplicaManager(leader, BrokerConfig(port=0, data_dir=tmp_path), metadata)
    rm.ensure_partitions(metadata.topics["t"])
    part = rm.get("t", 0)
    assert part.is_leader and part.log.high_watermark == 0
    part.remote = {follower: ReplicaState(follower, log_end_offset=0), joining: ReplicaState(joining, log_end_offset=0)}
    part.log.append_as_leader([bytearray(batch([b"a", b"b"]))], part.leader_epoch, 0)
    part.remote[follower].log_end_offset = 2  # the ISR has the records; the joining follower does not
    part.pending_isr = sorted([leader, follower, joining])  # the expansion sent, the controller not yet heard
    assert not rm.maybe_increment_hw(part) and part.log.high_watermark == 0
    part.remote[joining].log_end_offset = 1
    assert rm.maybe_increment_hw(part) and part.log.high_watermark == 1
    part.pending_isr = None  # refused: the ISR alone again
    assert rm.maybe_increment_hw(part) and part.log.high_watermark == 2
