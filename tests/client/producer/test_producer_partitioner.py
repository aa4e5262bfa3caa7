"""murmur2 as Java's Utils.murmur2, and the same partitions as librdkafka's murmur2_random."""

from __future__ import annotations

import random

import pytest
from confluent_kafka import Producer

from minikafka.client.producer import BuiltInPartitioner, murmur2, partition_for_key, to_positive

# org.apache.kafka.common.utils.UtilsTest#testMurmur2
JAVA_VECTORS = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    bytes([ord("a"), ord("b"), ord("c")]): 479470107,
}


@pytest.mark.parametrize("data,expected", list(JAVA_VECTORS.items()))
def test_murmur2_java_vectors(data: bytes, expected: int) -> None:
    assert murmur2(data) == expected


def test_to_positive_clears_sign_bit() -> None:
    assert to_positive(-1) == 0x7FFFFFFF
    assert to_positive(-2147483648) == 0
    assert to_positive(5) == 5


@pytest.mark.clients
def test_keys_land_where_librdkafka_murmur2_random_puts_them(broker_thread) -> None:
    """2000 keys over 7 partitions: confluent-kafka with partitioner=murmur2_random (the Java-compatible
    one) picks a partition per key; ours must pick the same."""
    topic = "murmur-keys"
    broker_thread.call(lambda: broker_thread.broker.create_topic(topic, 7, 1))
    rng = random.Random(6)
    keys = [b"key-%d" % i for i in range(1000)]
    keys += [bytes(rng.randrange(256) for _ in range(rng.randrange(0, 40))) for _ in range(1000)]
    landed: dict[bytes, int] = {}

    def report(err, msg) -> None:
        assert err is None, err
        landed[msg.key()] = msg.partition()

    p = Producer({"bootstrap.servers": broker_thread.bootstrap, "partitioner": "murmur2_random",
                  "linger.ms": 5})
    for k in keys:
        p.produce(topic, value=b"v", key=k, on_delivery=report)
        p.poll(0)
    assert p.flush(30) == 0
    assert len(landed) == len(set(keys))
    mismatches = {k: (p_, partition_for_key(k, 7)) for k, p_ in landed.items() if k and partition_for_key(k, 7) != p_}
    assert not mismatches
    assert len(set(landed.values())) == 7


def test_sticky_partitioner_switches_after_batch_size_bytes() -> None:
    seq = iter([0, 1, 0, 2])
    sp = BuiltInPartitioner("t", sticky_batch_size=100, rng=lambda n: next(seq) % n)
    avail = [0, 1, 2, 3]
    first = sp.peek(avail, 4)
    for _ in range(9):
        sp.update(first, 10, avail, 4)
        assert sp.peek(avail, 4) == first
    sp.update(first, 10, avail, 4)  # 100 bytes: switch to another partition
    second = sp.peek(avail, 4)
    assert second != first
    # only partitions with a leader are chosen
    sp2 = BuiltInPartitioner("t", 1)
    for _ in range(50):
        p = sp2.peek([2, 3], 4)
        assert p in (2, 3)
        sp2.update(p, 1, [2, 3], 4)
