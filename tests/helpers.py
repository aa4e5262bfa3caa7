"""Raw-protocol helpers shared by the broker tests."""

from __future__ import annotations

from typing import Any

from minikafka.client.connection import KafkaConnection
from minikafka.common.clock import SYSTEM_CLOCK
from minikafka.protocol.api import ApiKey
from minikafka.protocol.records import Record, build_batch, decode_records, iter_batches
from waiting import wait_for, wait_until  # noqa: F401  (re-exported: the condition waits)

K = ApiKey


def batch(values: list[bytes], **kw) -> bytes:
    kw.setdefault("base_timestamp", SYSTEM_CLOCK.time_ms())
    return build_batch([Record(offset_delta=i, key=b"k%d" % i, value=v) for i, v in enumerate(values)], **kw)


async def create(conn: KafkaConnection, name: str, partitions: int = 1, **extra) -> None:
    resp = await conn.request(K.CREATE_TOPICS, 7, {
        "topics": [{"name": name, "num_partitions": partitions, "replication_factor": 1, **extra}],
        "timeout_ms": 1000})
    assert resp.topics[0].error_code == 0, resp


# How long an acks=all produce may wait for the in-sync followers (Produce's timeout_ms).  Generous: the answer
# comes as soon as the ISR has the records, so it only bounds a failure (a slow runner must not time out).
PRODUCE_TIMEOUT_MS = 30_000


async def produce(conn: KafkaConnection, topic: str, records: bytes, partition: int = 0, acks: int = -1,
                  version: int = 9, transactional_id: str | None = None, timeout_ms: int = PRODUCE_TIMEOUT_MS):
    resp = await conn.request(K.PRODUCE, version, {
        "acks": acks, "timeout_ms": timeout_ms, "transactional_id": transactional_id,
        "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": records}]}]})
    return resp.responses[0].partition_responses[0]


async def fetch(conn: KafkaConnection, topic: str, offset: int = 0, partition: int = 0, version: int = 12,
                max_wait_ms: int = 0, min_bytes: int = 1, topic_id=None):
    t = {"topic": topic, "topic_id": topic_id,
         "partitions": [{"partition": partition, "fetch_offset": offset, "partition_max_bytes": 1 << 20}]}
    resp = await conn.request(K.FETCH, version, {
        "replica_id": -1, "max_wait_ms": max_wait_ms, "min_bytes": min_bytes, "max_bytes": 50 << 20,
        "topics": [t]})
    return resp.responses[0].partitions[0]



async def read_batches(conn: KafkaConnection, topic: str, partition: int = 0) -> list[tuple[Any, list[Any]]]:
    """Every batch stored in the partition (data and control) with its decoded records, fetched uncommitted
    on ``conn`` from offset 0 to the end."""
    out = []
    offset = 0
    while True:
        p = await fetch(conn, topic, offset, partition)
        assert p.error_code == 0, p
        if not p.records:
            return out
        for h, view in iter_batches(p.records, allow_truncated_tail=True):
            out.append((h, decode_records(view)))
            offset = h.next_offset


async def stored_batches(port: int, topic: str, partition: int = 0) -> list[tuple[Any, list[Any]]]:
    """:func:`read_batches` on a connection of its own to the broker at ``port``."""
    async with await KafkaConnection.connect("127.0.0.1", port) as conn:
        return await read_batches(conn, topic, partition)


def damaged_variants(rng: Any, bases: list[bytes], per_base: int, header_offsets: list[int]) -> list[bytes]:
    """``per_base`` damaged copies of each base: cut short, a random byte changed, a byte at one of
    ``header_offsets`` changed, or junk appended (for checking batch scanners against iter_batches)."""
    out = []
    for base in bases:
        for _ in range(per_base):
            b = bytearray(base)
            op = rng.randrange(4)
            if op == 0:
                del b[rng.randrange(len(b)):]
            elif op == 1:
                b[rng.randrange(len(b))] = rng.randrange(256)
            elif op == 2:
                b[rng.choice(header_offsets)] = rng.randrange(256)
            else:
                b += bytes(rng.randrange(80))
            out.append(bytes(b))
    return out


def values(records: bytes) -> list[bytes]:
    """The record values in a fetched records blob."""
    return [r.value for _, v in iter_batches(records) for r in decode_records(v)]


async def api_versions_v0(stream, correlation_id: int = 1, client_id: str = "probe", trailing: int = 0) -> bytes:
    """Send an ApiVersions v0 request on a raw Trio stream (``trailing`` ignored bytes make it large, as
    Kafka ignores bytes after a body) and return its response frame (without the size prefix)."""
    from minikafka.protocol.headers import RequestHeader
    from minikafka.protocol.framing import NEED_DATA, Frame, FrameDecoder

    frame = RequestHeader.build({"request_api_key": 18, "request_api_version": 0, "correlation_id": correlation_id,
                                 "client_id": client_id}, 1) + bytes(trailing)
    await stream.send_all(len(frame).to_bytes(4, "big") + frame)
    decoder = FrameDecoder()
    while (event := decoder.next_event()) is NEED_DATA:
        decoder.receive_data(await stream.receive_some(65536))
    assert isinstance(event, Frame), f"the broker closed the connection ({event})"
    return bytes(event.payload)


class HandlerEnv:
    """One broker's services in memory for handler tests (no socket): node 0 registered at 127.0.0.1:9092,
    a replica manager that creates the partitions of every topic the metadata creates, quotas, fetch sessions."""

    def __init__(self, **config: Any) -> None:
        from minikafka.broker.broker import AutoTopicCreationManager
        from minikafka.broker.config import BrokerConfig
        from minikafka.broker.fetch_session import FetchManager, FetchSessionCache
        from minikafka.broker.metadata import ClusterMetadata
        from minikafka.broker.purgatory import DelayedOperationPurgatory
        from minikafka.broker.quota import QuotaConfigs, QuotaManagers, ThrottledChannelReaper
        from minikafka.broker.quota.replication_quota_manager import LEADER_REPLICATION, ReplicationQuotaManager
        from minikafka.broker.replica_manager import ReplicaManager
        from minikafka.common import ManualClock
        from minikafka.metrics import Metrics

        self.config = BrokerConfig(port=9092, **config)
        self.clock = ManualClock()
        self.metadata = ClusterMetadata([0])
        self.metadata.broker_started(0, "127.0.0.1", 9092)
        self.delayed_fetch = DelayedOperationPurgatory("Fetch")
        self.delayed_produce = DelayedOperationPurgatory("Produce")
        self.log = ReplicaManager(0, self.config, self.metadata, clock=self.clock,
                                  delayed_fetch=self.delayed_fetch, delayed_produce=self.delayed_produce)
        self.metadata.listeners.append(lambda kind, name: self.log.ensure_partitions(self.metadata.topics[name])
                                       if kind == "created" else None)
        metrics = Metrics(clock=self.clock)
        self.quota_configs = QuotaConfigs()
        self.quotas = QuotaManagers(self.quota_configs, metrics, reaper=ThrottledChannelReaper(),
                                    clock=self.clock)
        self.leader_quota = ReplicationQuotaManager(LEADER_REPLICATION, metrics)
        self.topics = AutoTopicCreationManager(self.metadata, self.config)
        self.sessions = FetchManager(FetchSessionCache())


def stop_process(proc: Any, timeout: float = 60) -> int:
    """SIGINT a ``minikafka serve`` subprocess (Ctrl-C), SIGKILL if it has not exited after ``timeout`` seconds;
    its exit code."""
    import signal
    import subprocess

    proc.send_signal(signal.SIGINT)
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait()


def read_until(proc: Any, needle: str, limit: int = 200) -> str:
    """The first line of a subprocess's text stdout holding ``needle`` (AssertionError within ``limit`` lines)."""
    for _ in range(limit):
        line = proc.stdout.readline()
        if needle in line:
            return line
    raise AssertionError(f"{needle!r} not printed")
