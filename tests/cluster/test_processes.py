"""One process per broker (issue 26): a controller process and three broker processes speaking KRaft over the wire,
failed with real signals and network partitions (each node behind a proxy that cuts its links). Kafka's
replication test matrix (``replication_test.py``): clean kill, hard kill (SIGKILL) and hard bounce of a
partition's leader and of a follower, and a controller kill, and beside them a pause (SIGSTOP) and an isolation
of each, while an idempotent acks=all producer writes to a topic of RF 3 and ``min.insync.replicas=2``: every
acknowledged record is consumed exactly once, in order per partition."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

import waiting
from minikafka.supervisor.processes import CONTROLLER, ProcessCluster

pytestmark = [pytest.mark.clients, pytest.mark.slow]

#: Sessions short enough that a killed broker is fenced within seconds (any machine: the tests wait for states).
SETTINGS = {"broker.session.timeout.ms": "3000", "broker.heartbeat.interval.ms": "300",
            "replica.fetch.wait.max.ms": "100", "offsets.topic.num.partitions": "3",
            "transaction.state.log.num.partitions": "3", "num.partitions": "3", "default.replication.factor": "3",
            # The controller snapshots its metadata log every 16 KiB and keeps none of it below the latest snapshot
            # (4 KiB segments): a broker that starts reads the snapshot, then the log after it (KIP-630).
            "metadata.log.max.record.bytes.between.snapshots": "16384", "metadata.log.segment.bytes": "4096",
            "metadata.max.retention.bytes": "0",
            # ACLs on (the clients and brokers, over PLAINTEXT, are User:ANONYMOUS: a super user).
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:ANONYMOUS"}
PARTITIONS = 3
#: A request to a paused or cut-off broker given up after seconds, not librdkafka's 30-60 s (then retried: with
#: idempotence, safely), so that a client follows a new leader within the test's pace.
CLIENT_TIMEOUTS = {"request.timeout.ms": 5000, "socket.timeout.ms": 5000}


@pytest.fixture(scope="module")
def processes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProcessCluster]:
    with ProcessCluster(3, tmp_path_factory.mktemp("processes"), overrides=SETTINGS, network=True) as cluster:
        yield cluster


@pytest.fixture
def cluster(processes: ProcessCluster) -> Iterator[ProcessCluster]:
    """The module's cluster, every process running again and the network healed after each test."""
    try:
        yield processes
    finally:
        processes.heal()
        names: list[str | int] = [CONTROLLER, *processes.brokers]
        for name in names:
            if processes.state(name) == "paused":
                processes.resume(name)
            elif processes.state(name) == "stopped":
                processes.start(name)


def _metadata(bootstrap: str, topic: str):
    """The topic as a broker of ``bootstrap`` describes it (a broker that does not answer is skipped)."""
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10).topics.get(topic)


def _create_topic(cluster: ProcessCluster, topic: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 3, config={"min.insync.replicas": "2"})])[topic].result(30)

    def ready() -> bool:
        meta = _metadata(cluster.bootstrap, topic)
        return (meta is not None and meta.error is None and len(meta.partitions) == PARTITIONS
                and all(p.leader >= 0 and len(p.isrs) == 3 for p in meta.partitions.values()))

    waiting.wait_for(ready, 60, interval=0.1)


class Writer:
    """An idempotent acks=all producer writing 0, 1, 2... round-robin over the partitions until stopped."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        from confluent_kafka import Producer

        self.topic = topic
        self.producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                                  "linger.ms": 5, "message.timeout.ms": 120000, "retry.backoff.ms": 50,
                                  "reconnect.backoff.max.ms": 500, "topic.metadata.refresh.interval.ms": 1000,
                                  **CLIENT_TIMEOUTS})
        self.acked: dict[int, list[int]] = {p: [] for p in range(PARTITIONS)}
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, daemon=True)

    @property
    def count(self) -> int:
        with self._lock:
            return sum(len(v) for v in self.acked.values())

    def _delivered(self, err, msg) -> None:
        with self._lock:
            if err is not None:
                self.errors.append(str(err))
            else:
                self.acked[msg.partition()].append(int(msg.value()))

    def _run(self) -> None:
        i = 0
        while not self._stop.is_set():
            try:
                self.producer.produce(self.topic, value=str(i).encode(), partition=i % PARTITIONS,
                                      on_delivery=self._delivered)
                i += 1
            except BufferError:
                pass
            self.producer.poll(0.002)
        self.producer.flush(120)

    def __enter__(self) -> Writer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(150)

    def wait_for(self, n: int) -> None:
        waiting.wait_for(lambda: self.count >= n, 120, interval=0.05)


def _consume_all(bootstrap: str, topic: str) -> dict[int, list[int]]:
    """Every record of every partition, read from the start to the partition's end."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{topic}", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    try:
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in range(PARTITIONS)}
        consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        got: dict[int, dict[int, int]] = {p: {} for p in range(PARTITIONS)}  # by offset: a record fetched again
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]          # (a leader change) is counted once

        def drained() -> bool:
            for msg in consumer.consume(500, 0.2):
                if msg.error() is None:
                    got[msg.partition()][msg.offset()] = int(msg.value())
            # (past the transaction markers too, which are never returned)
            return all(tp.offset >= ends[tp.partition] for tp in consumer.position(tps))

        waiting.wait_for(drained, 120, interval=0)
        return {p: [v for _, v in sorted(records.items())] for p, records in got.items()}
    finally:
        consumer.close()


def _check(writer: Writer, consumed: dict[int, list[int]]) -> None:
    for p in range(PARTITIONS):
        values = consumed[p]
        assert len(values) == len(set(values)), f"partition {p}: duplicates"
        assert values == sorted(values), f"partition {p}: out of order"
        missing = set(writer.acked[p]) - set(values)
        assert not missing, f"partition {p}: {len(missing)} acknowledged record(s) lost, e.g. {sorted(missing)[:5]}"
    assert not writer.errors, writer.errors[:5]


def _victim(cluster: ProcessCluster, topic: str, role: str) -> int:
    meta = _metadata(cluster.bootstrap, topic)
    p0 = meta.partitions[0]
    return p0.leader if role == "leader" else next(r for r in p0.replicas if r != p0.leader)


@pytest.mark.parametrize("role", ["leader", "follower"])
@pytest.mark.parametrize("failure", ["clean_kill", "hard_kill", "hard_bounce", "pause", "isolate"])
def test_replication_matrix(cluster: ProcessCluster, failure: str, role: str):
    topic = f"matrix-{failure}-{role}"
    _create_topic(cluster, topic)
    with Writer(cluster.bootstrap, topic) as writer:
        writer.wait_for(300)
        victim = _victim(cluster, topic, role)
        if failure == "clean_kill":
            cluster.stop(victim)
        elif failure == "hard_kill":
            cluster.kill(victim)
        elif failure == "pause":  # SIGSTOP: fenced when its session expires, back (registered again) on SIGCONT
            cluster.pause(victim)
        elif failure == "isolate":  # cut off from the controller, the other brokers and the clients
            cluster.isolate(victim)
        else:
            cluster.restart(victim, hard=True)
        # Leadership moved (a bounced leader's old registration is fenced as it registers again), and records go
        # on being acknowledged without the victim.
        others = [b for b in cluster.brokers if b != victim]
        waiting.wait_for(lambda: _metadata(cluster.bootstrap, topic).partitions[0].leader in
                         (others if role == "leader" else cluster.brokers), 60)
        writer.wait_for(writer.count + 300)
        cluster.heal()
        if cluster.state(victim) == "paused":
            cluster.resume(victim)
        elif cluster.state(victim) == "stopped":
            cluster.start(victim)
        # The victim catches up and is back in every ISR.
        waiting.wait_for(lambda: all(len(p.isrs) == 3 for p in _metadata(cluster.bootstrap, topic).partitions.values()),
                         60)
        writer.wait_for(writer.count + 100)
    _check(writer, _consume_all(cluster.bootstrap, topic))


def test_a_controller_kill_leaves_the_brokers_serving_and_a_restarted_controller_takes_them_back(
        cluster: ProcessCluster):
    topic = "matrix-controller-kill"
    _create_topic(cluster, topic)
    with Writer(cluster.bootstrap, topic) as writer:
        writer.wait_for(300)
        cluster.kill(CONTROLLER)
        writer.wait_for(writer.count + 300)  # the brokers serve what they lead without a controller
        cluster.start(CONTROLLER)
        # The brokers register with the restarted controller (it replayed its log), and leadership can move again.
        victim = _victim(cluster, topic, "leader")
        cluster.kill(victim)
        waiting.wait_for(lambda: _metadata(cluster.bootstrap, topic).partitions[0].leader not in (-1, victim), 60)
        writer.wait_for(writer.count + 300)
        cluster.start(victim)
    _check(writer, _consume_all(cluster.bootstrap, topic))


@pytest.mark.parametrize("client", ["kafka-python", "aiokafka"])
def test_python_clients_follow_a_killed_leader(cluster: ProcessCluster, client: str):
    """kafka-python and aiokafka producers (idempotent, acks=all) and consumers across a SIGKILL of the leader."""
    topic = f"follow-{client}"
    _create_topic(cluster, topic)
    first, second = [f"a{i}".encode() for i in range(100)], [f"b{i}".encode() for i in range(100)]
    produce, consume = (_kafka_python if client == "kafka-python" else _aiokafka)(cluster.bootstrap, topic)
    produce(first)
    victim = _victim(cluster, topic, "leader")
    cluster.kill(victim)
    produce(second)  # retried until the controller fenced the victim and a new leader took partition 0
    assert _metadata(cluster.bootstrap, topic).partitions[0].leader != victim
    cluster.start(victim)
    assert consume(len(first) + len(second)) == first + second


def _kafka_python(bootstrap: str, topic: str):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    def produce(values: list[bytes]) -> None:
        producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True, retries=1000,
                                 retry_backoff_ms=100, request_timeout_ms=30000, metadata_max_age_ms=1000)
        try:
            for v in values:
                producer.send(topic, v, partition=0).get(timeout=120)
        finally:
            producer.close()

    def consume(n: int) -> list[bytes]:
        consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
        try:
            consumer.assign([TopicPartition(topic, 0)])
            consumer.seek_to_beginning()
            got: list[bytes] = []
            waiting.wait_for(lambda: got.extend(r.value for rs in consumer.poll(500).values() for r in rs)
                             or len(got) >= n, 120, interval=0)
            return got
        finally:
            consumer.close()

    return produce, consume


def _aiokafka(bootstrap: str, topic: str):
    import asyncio

    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    async def produce_all(values: list[bytes]) -> None:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True,
                                    request_timeout_ms=120000, retry_backoff_ms=100, metadata_max_age_ms=1000)
        await producer.start()
        try:
            for v in values:
                await producer.send_and_wait(topic, v, partition=0)
        finally:
            await producer.stop()

    async def consume_all(n: int) -> list[bytes]:
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
        await consumer.start()
        try:
            tp = TopicPartition(topic, 0)
            consumer.assign([tp])
            await consumer.seek_to_beginning(tp)
            got: list[bytes] = []
            while len(got) < n:
                for records in (await consumer.getmany(timeout_ms=500)).values():
                    got += [r.value for r in records]
            return got
        finally:
            await consumer.stop()

    return (lambda values: asyncio.run(produce_all(values)),
            lambda n: asyncio.run(asyncio.wait_for(consume_all(n), 120)))


def test_admin_requests_are_forwarded_to_the_controller_and_reach_every_broker(cluster: ProcessCluster):
    """Topic configs, new partitions, a preferred leader election and a deletion, asked of any broker, are made by
    the controller (Envelope) and applied by every broker from the metadata log."""
    from confluent_kafka import ElectionType, TopicPartition
    from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewPartitions,
                                       ResourceType)

    topic = "forwarded"
    _create_topic(cluster, topic)
    first, *others = cluster.bootstrap.split(",")
    admin = AdminClient({"bootstrap.servers": first})
    resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry("retention.ms", "123456", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(30)

    def retention(bootstrap: str) -> str | None:
        other = AdminClient({"bootstrap.servers": bootstrap})  # (kept until its answer: a dropped client cancels)
        described = other.describe_configs([ConfigResource(ResourceType.TOPIC, topic)])
        return next(iter(described.values())).result(30)["retention.ms"].value

    for bootstrap in others:  # each broker serves the configs it applied from the log
        waiting.wait_for(lambda: retention(bootstrap) == "123456", 30)

    admin.create_partitions([NewPartitions(topic, PARTITIONS + 1)])[topic].result(30)
    waiting.wait_for(lambda: len(_metadata(others[-1], topic).partitions) == PARTITIONS + 1, 30)

    # Leadership moved off the preferred replica (a controlled shutdown), then back by a preferred election.
    preferred = _metadata(first, topic).partitions[0].replicas[0]
    cluster.stop(preferred)
    cluster.start(preferred)
    waiting.wait_for(lambda: preferred in _metadata(first, topic).partitions[0].isrs, 60)
    if _metadata(first, topic).partitions[0].leader != preferred:  # (unless balanced back already)
        admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition(topic, 0)]).result(30)
    waiting.wait_for(lambda: _metadata(others[0], topic).partitions[0].leader == preferred, 30)

    admin.delete_topics([topic])[topic].result(30)

    def gone(bootstrap: str) -> bool:  # (listing every topic: asking for this one would auto-create it again)
        return topic not in AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).topics

    waiting.wait_for(lambda: all(gone(b) for b in cluster.bootstrap.split(",")), 30)


def test_acls_are_made_by_the_controller_and_applied_by_every_broker(cluster: ProcessCluster):
    """CreateAcls and DeleteAcls sent to one broker are forwarded to the controller, which writes them as
    AccessControlEntryRecords; every broker's authorizer applies them from the metadata log."""
    from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType, AdminClient,
                                       ResourcePatternType, ResourceType)

    first, *others = cluster.bootstrap.split(",")
    binding = AclBinding(ResourceType.TOPIC, "acl-topic", ResourcePatternType.LITERAL, "User:alice", "*",
                         AclOperation.READ, AclPermissionType.ALLOW)
    admin = AdminClient({"bootstrap.servers": first})
    assert admin.create_acls([binding])[binding].result(30) is None
    every = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                             AclPermissionType.ANY)

    def acls(bootstrap: str) -> list:
        other = AdminClient({"bootstrap.servers": bootstrap})  # (kept until its answer)
        return other.describe_acls(every).result(30)

    for bootstrap in others:
        waiting.wait_for(lambda: acls(bootstrap) == [binding], 30)
    admin.delete_acls([every])[every].result(30)
    for bootstrap in others:
        waiting.wait_for(lambda: acls(bootstrap) == [], 30)


def _ask(address: tuple[str, int] | str, api_key: int, version: int, body: dict):
    """One request to one broker (not any broker a client picks): ``address`` as (host, port) or "host:port"."""
    import trio

    from minikafka.client.connection import KafkaConnection

    if isinstance(address, str):
        host, port = address.rsplit(":", 1)
        address = (host, int(port))

    async def ask():
        async with await KafkaConnection.connect(*address) as conn:
            return await conn.request(api_key, version, body)

    return trio.run(ask)


def test_quotas_scram_credentials_group_and_broker_configs_are_records_every_broker_applies(cluster: ProcessCluster):
    """AlterClientQuotas, AlterUserScramCredentials and IncrementalAlterConfigs of a group and of the cluster's
    broker default sent to one broker are forwarded to the controller, which writes ClientQuotaRecord,
    UserScramCredentialRecord and ConfigRecords; every broker serves them from its copy of the metadata log (and
    they are gone from every broker once removed the same way)."""
    from minikafka.protocol.api import ApiKey

    first, *others = [cluster.address(node) for node in cluster.brokers.values()]
    quota = {"entity": [{"entity_type": "client-id", "entity_name": "log-app"}],
             "ops": [{"key": "producer_byte_rate", "value": 2048.0, "remove": False}]}
    resp = _ask(first, ApiKey.ALTER_CLIENT_QUOTAS, 1, {"entries": [quota], "validate_only": False})
    assert resp["entries"][0]["error_code"] == 0, resp
    resp = _ask(first, ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, {"deletions": [], "upsertions": [{
        "name": "log-user", "mechanism": 1, "iterations": 4096, "salt": b"salt" * 4, "salted_password": b"k" * 32}]})
    assert resp["results"][0]["error_code"] == 0, resp
    group_config = {"resource_type": 32, "resource_name": "log-group", "configs": [
        {"name": "consumer.session.timeout.ms", "config_operation": 0, "value": "50000"}]}
    broker_default = {"resource_type": 4, "resource_name": "", "configs": [
        {"name": "leader.replication.throttled.rate", "config_operation": 0, "value": "7000000"}]}
    resp = _ask(first, ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [group_config, broker_default],
                                                             "validate_only": False})
    assert [r["error_code"] for r in resp["responses"]] == [0, 0], resp

    def state(address: tuple[str, int]) -> tuple:
        quotas = _ask(address, ApiKey.DESCRIBE_CLIENT_QUOTAS, 1, {"components": [], "strict": False})["entries"]
        users = _ask(address, ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, {"users": None})["results"]
        configs = _ask(address, ApiKey.DESCRIBE_CONFIGS, 4, {"resources": [{
            "resource_type": 32, "resource_name": "log-group", "configuration_keys": ["consumer.session.timeout.ms"]}],
            "include_synonyms": False, "include_documentation": False})["results"][0]["configs"]
        own = [node_id for node_id, node in cluster.brokers.items() if cluster.address(node) == address][0]
        rate = _ask(address, ApiKey.DESCRIBE_CONFIGS, 4, {"resources": [{
            "resource_type": 4, "resource_name": str(own),
            "configuration_keys": ["leader.replication.throttled.rate"]}],
            "include_synonyms": False, "include_documentation": False})["results"][0]["configs"]
        return ({(e["entity"][0]["entity_name"], v["key"], v["value"]) for e in quotas for v in e["values"]},
                {(u["user"], c["mechanism"], c["iterations"]) for u in users for c in u["credential_infos"]},
                {c["value"] for c in configs} | {c["value"] for c in rate})

    for address in [first, *others]:
        waiting.wait_for(lambda: state(address) == ({("log-app", "producer_byte_rate", 2048.0)},
                                                     {("log-user", 1, 4096)}, {"50000", "7000000"}), 30)
    quota["ops"] = [{"key": "producer_byte_rate", "value": 0.0, "remove": True}]
    _ask(others[0], ApiKey.ALTER_CLIENT_QUOTAS, 1, {"entries": [quota], "validate_only": False})
    _ask(others[0], ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, {"upsertions": [],
                                                            "deletions": [{"name": "log-user", "mechanism": 1}]})
    group_config["configs"][0]["config_operation"] = broker_default["configs"][0]["config_operation"] = 1  # DELETE
    _ask(others[0], ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [group_config, broker_default],
                                                          "validate_only": False})
    for address in [first, *others]:
        waiting.wait_for(lambda: state(address)[:2] == (set(), set()) and not {"50000", "7000000"} & state(address)[2],
                         30)


def test_a_broker_that_starts_after_the_log_was_cleaned_reads_the_controllers_snapshot(cluster: ProcessCluster):
    """The controller snapshots the metadata log and deletes the segments below the snapshot; a broker started
    afterwards is told the snapshot's id when it fetches offset 0, reads it with FetchSnapshot, and serves the
    same topics as the others (those deleted before the snapshot included: gone)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    directory = cluster.data_dir / CONTROLLER / "__cluster_metadata-0"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    cluster.stop(2)
    names: list[str] = []
    batches = iter(range(1000))

    def cleaned_below_a_snapshot() -> bool:
        """More topics (some deleted again) until the log starts after a snapshot."""
        batch = [f"snap-{next(batches)}-{i}" for i in range(10)]
        for future in admin.create_topics([NewTopic(n, 1, 2) for n in batch]).values():
            future.result(30)
        admin.delete_topics(batch[:2])[batch[0]].result(30)
        names.extend(batch[2:])
        segments = sorted(directory.glob("*.log"))
        return bool(list(directory.glob("*.checkpoint"))) and int(segments[0].stem) > 0

    waiting.wait_for(cleaned_below_a_snapshot, 120)
    cluster.start(2)
    address = "%s:%d" % cluster.address(cluster.brokers[2])

    def served() -> set[str]:
        topics = AdminClient({"bootstrap.servers": address}).list_topics(timeout=10).topics
        return {t for t in topics if t.startswith("snap-")}

    waiting.wait_for(lambda: served() == set(names), 30)
    assert "loaded the metadata snapshot" in (cluster.data_dir / "broker-2.log").read_text()
    admin.delete_topics(names)

