"""Several log directories, DescribeLogDirs (35) and AlterReplicaLogDirs (34), as Kafka has them (KIP-113).

The log manager places and finds logs in every ``log.dirs`` entry and finishes an interrupted move at
start-up; the broker describes its directories (sizes of the files, offset lag, volume sizes) and moves a
replica to another directory through a future log while it takes appends, over the wire and with
kafka-python's admin client; a cluster's brokers each answer for their own directories.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import trio

from helpers import batch, create, produce, read_batches, values, wait_until
from minikafka.broker.broker import Broker, serve_broker
from minikafka.broker.cluster import serve_cluster
from minikafka.broker.config import BrokerConfig, StartupError
from minikafka.broker.log import LogConfig, LogManager
from minikafka.broker.log.manager import LogDir, parse_suffixed_dir_name, suffixed_dir_name
from minikafka.client.connection import KafkaConnection
from minikafka.protocol.api import ApiKey as K
from minikafka.protocol.errors import ErrorCode

STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


def two_dirs(tmp_path: Path, **settings: object) -> BrokerConfig:
    cfg = BrokerConfig(**{"port": 0, "group_initial_rebalance_delay_ms": 0, **settings})  # type: ignore[arg-type]
    cfg.set("log.dirs", f"{tmp_path / 'd1'},{tmp_path / 'd2'}")
    return cfg


def log_files_size(directory: Path) -> int:
    return sum(p.stat().st_size for p in directory.glob("*.log"))


async def describe(conn: KafkaConnection, topics: dict[str, list[int]] | None = None, version: int = 4):
    req = None if topics is None else [{"topic": t, "partitions": ps} for t, ps in topics.items()]
    return await conn.request(K.DESCRIBE_LOG_DIRS, version, {"topics": req})


async def alter(conn: KafkaConnection, moves: dict[str, dict[str, list[int]]], version: int = 2
                ) -> dict[tuple[str, int], int]:
    resp = await conn.request(K.ALTER_REPLICA_LOG_DIRS, version, {"dirs": [
        {"path": path, "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}
        for path, topics in moves.items()]})
    return {(t.topic_name, p.partition_index): p.error_code for t in resp.results for p in t.partitions}


def replicas_by_dir(resp) -> dict[str, dict[tuple[str, int], tuple[int, int, bool]]]:
    """log dir -> (topic, partition) -> (size, offset lag, is future)."""
    return {d.log_dir: {(t.name, p.partition_index): (p.partition_size, p.offset_lag, p.is_future_key)
                        for t in d.topics for p in t.partitions} for d in resp.results}


async def read_values(conn: KafkaConnection, topic: str, partition: int = 0) -> list[bytes]:
    return [r.value for _, records in await read_batches(conn, topic, partition) for r in records]


# -- the log manager ----------------------------------------------------------------------------------------
def manager(tmp_path: Path) -> LogManager:
    return LogManager(None, log_dirs=[LogDir.of(tmp_path / "d1"), LogDir.of(tmp_path / "d2")])


def test_new_logs_go_to_the_log_dir_with_the_fewest_logs(tmp_path: Path) -> None:
    mgr = manager(tmp_path)
    for p in range(4):
        mgr.get_or_create("t", p, LogConfig())
    assert sorted(c.name for c in (tmp_path / "d1").iterdir()) == ["t-0", "t-2"]
    assert sorted(c.name for c in (tmp_path / "d2").iterdir()) == ["t-1", "t-3"]
    mgr.create_future_log("t", 0, mgr.log_dirs[1], LogConfig())  # a future log counts too (Kafka's allLogs)
    mgr.get_or_create("u", 0, LogConfig())
    assert (tmp_path / "d1" / "u-0").is_dir()
    mgr.maybe_update_preferred_log_dir("u", 1, mgr.log_dirs[1])
    mgr.get_or_create("u", 1, LogConfig())
    assert (tmp_path / "d2" / "u-1").is_dir()  # where AlterReplicaLogDirs asked, not the emptiest
    mgr.close_all()


def test_load_finds_the_logs_of_every_dir_and_refuses_a_duplicate(tmp_path: Path) -> None:
    mgr = manager(tmp_path)
    for p in range(3):
        mgr.get_or_create("t", p, LogConfig()).append_as_leader([bytearray(batch([b"v%d" % p]))], 0, 0)
    mgr.close_all()
    again = manager(tmp_path)
    again.load_existing({})
    assert sorted(again.logs) == [("t", 0), ("t", 1), ("t", 2)]
    assert [again.dir_of(again.logs["t", p]).path for p in range(3)] == [str(tmp_path / d) for d in ("d1", "d2", "d1")]
    again.close_all()
    shutil.copytree(tmp_path / "d1" / "t-0", tmp_path / "d2" / "t-0")
    with pytest.raises(StartupError, match="Duplicate log directories for t-0"):
        manager(tmp_path).load_existing({})


def _moved_logs(tmp_path: Path) -> tuple[LogManager, bytes]:
    """``t-0`` in d1 with a caught-up future log in d2, both closed as a crash would leave them."""
    mgr = manager(tmp_path)
    lg = mgr.get_or_create("t", 0, LogConfig())
    lg.append_as_leader([bytearray(batch([b"a", b"b"])), bytearray(batch([b"c"]))], 3, 0)
    future = mgr.create_future_log("t", 0, mgr.log_dirs[1], LogConfig())
    for chunk in lg.read(0, 1 << 20).chunks:
        future.append_as_follower(chunk)
    data = b"".join(bytes(c) for c in lg.read(0, 1 << 20).chunks)
    mgr.close_all()
    return mgr, data


def test_a_future_log_beside_its_current_one_is_kept_for_the_move_to_resume(tmp_path: Path) -> None:
    _moved_logs(tmp_path)
    mgr = manager(tmp_path)
    mgr.load_existing({})
    assert mgr.dir_of(mgr.logs["t", 0]).path == str(tmp_path / "d1")
    assert mgr.dir_of(mgr.future_logs["t", 0]).path == str(tmp_path / "d2")
    moved = mgr.replace_current_with_future("t", 0)
    assert moved.directory == tmp_path / "d2" / "t-0" and moved.log_end_offset == 3 and moved.latest_epoch() == 3
    assert not (tmp_path / "d1" / "t-0").exists() and list((tmp_path / "d1").iterdir()) == []
    mgr.close_all()


def test_a_swap_interrupted_after_the_old_log_was_set_aside_is_completed(tmp_path: Path) -> None:
    _, data = _moved_logs(tmp_path)
    old = tmp_path / "d1" / "t-0"
    old.rename(old.with_name(suffixed_dir_name("t", 0, "-delete")))  # the crash came right after this rename
    mgr = manager(tmp_path)
    mgr.load_existing({})
    lg = mgr.logs["t", 0]
    assert lg.directory == tmp_path / "d2" / "t-0" and not mgr.future_logs
    assert b"".join(bytes(c) for c in lg.read(0, 1 << 20).chunks) == data
    assert list((tmp_path / "d1").iterdir()) == []  # the set-aside log is gone
    mgr.close_all()


def test_a_set_aside_log_goes_once_the_moved_one_is_in_place(tmp_path: Path) -> None:
    _moved_logs(tmp_path)
    future = next((tmp_path / "d2").iterdir())
    assert parse_suffixed_dir_name(future.name)[:2] == ("t", 0)
    old = tmp_path / "d1" / "t-0"
    old.rename(old.with_name(suffixed_dir_name("t", 0, "-delete")))
    future.rename(future.with_name("t-0"))  # the crash came before the old directory was removed
    mgr = manager(tmp_path)
    mgr.load_existing({})
    assert mgr.logs["t", 0].directory == tmp_path / "d2" / "t-0" and mgr.logs["t", 0].log_end_offset == 3
    assert list((tmp_path / "d1").iterdir()) == []
    mgr.close_all()


def test_the_copy_follows_truncation_and_retention_of_the_current_log(tmp_path: Path) -> None:
    """A follower's truncation to a new leader's log, and retention past the future log's end, while moving."""
    from minikafka.broker.metadata import ClusterMetadata
    from minikafka.broker.replica_alter_log_dirs import ReplicaAlterLogDirsManager
    from minikafka.broker.replica_manager import ReplicaManager

    metadata = ClusterMetadata([0])
    rm = ReplicaManager(0, two_dirs(tmp_path), metadata)
    rm.ensure_partitions(metadata.create_topic("t", 1, 1))
    mover = ReplicaAlterLogDirsManager(rm, chunk_bytes=1)  # one batch per step
    part = rm.get("t", 0)
    current = part.log
    for epoch in (0, 0, 1, 1):
        current.append_as_leader([bytearray(batch([b"e%d" % epoch]))], epoch, 0)
    d2 = str(tmp_path / "d2")
    assert mover.alter_replica_log_dirs({("t", 0): d2}) == {("t", 0): ErrorCode.NONE}
    future = rm.log_manager.future_logs["t", 0]
    while future.log_end_offset < 4:
        assert mover.step(("t", 0))
    current.truncate_to(2)  # a new leader (epoch 2) did not have the epoch-1 records
    current.append_as_follower(bytes(batch([b"new"], base_offset=2, partition_leader_epoch=2)))
    assert mover.step(("t", 0)) and future.log_end_offset == 3  # truncated to 2, then the new batch copied
    current.append_as_leader([bytearray(batch([b"more"]))], 2, 0)
    current.roll()
    current.append_as_leader([bytearray(batch([b"last"]))], 2, 0)
    current.delete_records_before(4)  # retention past the future log's end (3): the copy starts again at 4
    assert mover.step(("t", 0)) and (future.log_start_offset, future.log_end_offset) == (4, 4)
    while rm.log_manager.future_logs:
        assert mover.step(("t", 0))
    moved = rm.get("t", 0).log
    assert moved is part.log and moved.directory == tmp_path / "d2" / "logs" / "t-0"
    assert (moved.log_start_offset, moved.log_end_offset, moved.latest_epoch()) == (4, 5, 2)
    assert [values(bytes(c)) for c in moved.read(4, 1 << 20).chunks] == [[b"last"]]
    assert mover.moves_completed == 1 and mover.bytes_copied > 0
    rm.log_manager.close_all()


# -- DescribeLogDirs ------------------------------------------------------------------------------------------
async def test_describe_log_dirs_reports_each_dir_with_the_sizes_of_its_files(tmp_path: Path) -> None:
    async with serve_broker(two_dirs(tmp_path)) as broker:
        async with await KafkaConnection.connect("127.0.0.1", broker.port) as conn:
            await create(conn, "t", 4)
            for p in range(4):
                for _ in range(p + 1):
                    assert (await produce(conn, "t", batch([b"x" * 100]), partition=p)).error_code == 0
            resp = await describe(conn)
            assert resp.error_code == 0
            dirs = replicas_by_dir(resp)
            d1, d2 = str(tmp_path / "d1"), str(tmp_path / "d2")
            assert list(dirs) == [d1, d2]
            assert sorted(dirs[d1]) == [("t", 0), ("t", 2)] and sorted(dirs[d2]) == [("t", 1), ("t", 3)]
            for path, replicas in dirs.items():
                for (topic, p), (size, lag, future) in replicas.items():
                    assert size == log_files_size(Path(path) / "logs" / f"{topic}-{p}") > 0
                    assert (lag, future) == (0, False)
            usage = shutil.disk_usage(tmp_path)
            for d in resp.results:
                assert d.error_code == 0 and d.total_bytes == usage.total and 0 < d.usable_bytes <= d.total_bytes
            only = replicas_by_dir(await describe(conn, {"t": [1], "missing": [0]}))
            assert only == {d1: {}, d2: {("t", 1): dirs[d2]["t", 1]}}
            v0 = await describe(conn, version=0)  # before flexible versions, without the volume sizes
            assert replicas_by_dir(v0) == dirs
    async with serve_broker(two_dirs(tmp_path)) as broker:  # a restart finds the logs of both dirs
        async with await KafkaConnection.connect("127.0.0.1", broker.port) as conn:
            assert replicas_by_dir(await describe(conn)) == dirs
            assert await read_values(conn, "t", 3) == [b"x" * 100] * 4


async def test_a_broker_in_memory_has_one_notional_log_dir() -> None:
    async with serve_broker(BrokerConfig(port=0)) as broker:
        async with await KafkaConnection.connect("127.0.0.1", broker.port) as conn:
            await create(conn, "t", 2)
            await produce(conn, "t", batch([b"v"]))
            resp = await describe(conn)
            assert [(d.log_dir, d.error_code, d.total_bytes, d.usable_bytes) for d in resp.results] == [
                (":memory:", 0, -1, -1)]
            size = broker.replica_manager.get("t", 0).log.size_in_bytes
            assert replicas_by_dir(resp)[":memory:"] == {("t", 0): (size, 0, False), ("t", 1): (0, 0, False)}
            assert await alter(conn, {":memory:": {"t": [0]}, "/tmp/elsewhere": {"t": [1]}}) == {
                ("t", 0): ErrorCode.NONE, ("t", 1): ErrorCode.LOG_DIR_NOT_FOUND}


async def test_both_apis_need_their_cluster_acl() -> None:
    async with serve_broker(BrokerConfig(port=0, authorizer_class_name=STANDARD_AUTHORIZER)) as broker:
        broker.create_topic("t", 1, 1)
        async with await KafkaConnection.connect("127.0.0.1", broker.port) as conn:
            resp = await describe(conn)
            assert (resp.error_code, list(resp.results)) == (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, [])
            assert list((await describe(conn, version=2)).results) == []  # no top-level code before v3
            assert await alter(conn, {":memory:": {"t": [0, 1]}, "/x": {"t": [0]}}) == {
                ("t", 0): ErrorCode.CLUSTER_AUTHORIZATION_FAILED, ("t", 1): ErrorCode.CLUSTER_AUTHORIZATION_FAILED}


# -- AlterReplicaLogDirs ---------------------------------------------------------------------------------------
async def test_a_replica_moves_to_another_dir_while_it_takes_appends(tmp_path: Path) -> None:
    cfg = two_dirs(tmp_path, replica_alter_log_dirs_io_max_bytes_per_second=50_000)
    d1, d2 = str(tmp_path / "d1"), str(tmp_path / "d2")
    sent = [b"before-%d-" % i + b"x" * 200 for i in range(150)]
    async with serve_broker(cfg) as broker:
        async with await KafkaConnection.connect("127.0.0.1", broker.port) as conn:
            await create(conn, "t", 1)
            for v in sent:
                assert (await produce(conn, "t", batch([v]))).error_code == 0
            assert (tmp_path / "d1" / "logs" / "t-0").is_dir()
            assert await alter(conn, {d2: {"t": [0]}}) == {("t", 0): ErrorCode.NONE}
            # The future replica, behind the current one (the copy runs at 50 kB/s: about 0.8 s here).
            during = replicas_by_dir(await describe(conn, {"t": [0]}))
            size, lag, future = during[d2]["t", 0]
            assert future and 0 < lag <= len(sent) and during[d1]["t", 0][1:] == (0, False)
            max_lag = "kafka.server:type=ReplicaAlterLogDirsManager,name=MaxLag,clientId=ReplicaAlterLogDirs"
            assert 0 < broker.metrics()[max_lag] <= lag
            assert [p.name for p in (tmp_path / "d2" / "logs").iterdir()][0].endswith("-future")
            assert await alter(conn, {d2: {"t": [0]}}) == {("t", 0): ErrorCode.NONE}  # asked again: same move

            moving: list[bool] = []

            async def producing() -> None:
                async with await KafkaConnection.connect("127.0.0.1", broker.port) as c:
                    for i in range(100):
                        v = b"during-%d" % i
                        sent.append(v)
                        assert (await produce(c, "t", batch([v]))).error_code == 0
                        moving.append(bool(broker.replica_manager.log_manager.future_logs))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(producing)
                await wait_until(lambda: not broker.replica_manager.log_manager.future_logs, 20, "the move")
            assert moving[0]  # appends came while the future replica was being filled
            after = replicas_by_dir(await describe(conn, {"t": [0]}))
            new_dir = tmp_path / "d2" / "logs" / "t-0"
            assert after == {d1: {}, d2: {("t", 0): (log_files_size(new_dir), 0, False)}}
            assert not (tmp_path / "d1" / "logs" / "t-0").exists() and list((tmp_path / "d1" / "logs").iterdir()) == []
            assert await read_values(conn, "t") == sent
            assert (await produce(conn, "t", batch([b"after"]))).base_offset == len(sent)
            sent.append(b"after")
            assert broker.log_dirs.moves_completed == 1 and broker.metrics()[max_lag] == 0
    async with serve_broker(two_dirs(tmp_path)) as broker:  # a restart reads it from its new dir
        assert broker.replica_manager.get("t", 0).log.directory == tmp_path / "d2" / "logs" / "t-0"
        async with await KafkaConnection.connect("127.0.0.1", broker.port) as conn:
            assert await read_values(conn, "t") == sent


async def test_a_move_cut_short_by_a_stop_resumes_at_start_up(tmp_path: Path) -> None:
    d2 = str(tmp_path / "d2")
    async with serve_broker(two_dirs(tmp_path, replica_alter_log_dirs_io_max_bytes_per_second=1000)) as broker:
        async with await KafkaConnection.connect("127.0.0.1", broker.port) as conn:
            await create(conn, "t", 1)
            for i in range(20):
                await produce(conn, "t", batch([b"v%d-" % i + b"y" * 100]))
            assert await alter(conn, {d2: {"t": [0]}}) == {("t", 0): ErrorCode.NONE}
            assert broker.replica_manager.log_manager.future_logs
    futures = [p.name for p in (tmp_path / "d2" / "logs").iterdir()]
    assert len(futures) == 1 and futures[0].endswith("-future")  # stopped mid-move (1 kB/s)
    async with serve_broker(two_dirs(tmp_path)) as broker:
        await wait_until(lambda: not broker.replica_manager.log_manager.future_logs, 10, "the resumed move")
        assert broker.replica_manager.get("t", 0).log.directory == tmp_path / "d2" / "logs" / "t-0"
        async with await KafkaConnection.connect("127.0.0.1", broker.port) as conn:
            assert await read_values(conn, "t") == [b"v%d-" % i + b"y" * 100 for i in range(20)]


async def test_alter_replica_log_dirs_errors_and_cancellation(tmp_path: Path) -> None:
    d1, d2 = str(tmp_path / "d1"), str(tmp_path / "d2")
    async with serve_broker(two_dirs(tmp_path, replica_alter_log_dirs_io_max_bytes_per_second=1000)) as broker:
        lm = broker.replica_manager.log_manager
        async with await KafkaConnection.connect("127.0.0.1", broker.port) as conn:
            await create(conn, "t", 1)
            for i in range(20):
                await produce(conn, "t", batch([b"w" * 100]))
            assert await alter(conn, {"/no/such/dir": {"t": [0]}, "d1": {"u": [0]}, d1: {"t": [0]},
                                      d2: {"missing": [0]}}) == {
                ("t", 0): ErrorCode.NONE,  # already in d1: nothing to do
                ("u", 0): ErrorCode.LOG_DIR_NOT_FOUND,  # a relative path is no log dir
                ("missing", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
            assert not lm.future_logs
            # The last directory named wins for a partition named twice.
            assert await alter(conn, {d1: {"t": [0]}, "/no/such/dir": {"t": [0]}}) == {
                ("t", 0): ErrorCode.LOG_DIR_NOT_FOUND}
            # A partition not created yet: its directory is remembered for when it is.
            assert await alter(conn, {d1: {"t": [1]}}) == {("t", 1): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
            resp = await conn.request(K.CREATE_PARTITIONS, 3, {
                "topics": [{"name": "t", "count": 2, "assignments": None}], "timeout_ms": 1000, "validate_only": False})
            assert resp.results[0].error_code == 0
            assert lm.dir_of(lm.logs["t", 1]).path == d1  # not d2, which had fewer logs
            # A move (slow: 1 kB/s) cancelled by asking for the directory the replica is in.
            assert await alter(conn, {d2: {"t": [0]}}) == {("t", 0): ErrorCode.NONE}
            future_dir = lm.future_logs["t", 0].directory
            assert await alter(conn, {d1: {"t": [0]}}) == {("t", 0): ErrorCode.NONE}
            assert not lm.future_logs and not future_dir.exists()
            assert lm.dir_of(lm.logs["t", 0]).path == d1
            # An unusable destination: KAFKA_STORAGE_ERROR.
            shutil.rmtree(tmp_path / "d2" / "logs")
            (tmp_path / "d2" / "logs").write_text("not a directory")
            assert await alter(conn, {d2: {"t": [0]}}) == {("t", 0): ErrorCode.KAFKA_STORAGE_ERROR}
            assert await read_values(conn, "t") == [b"w" * 100] * 20


# -- a cluster -----------------------------------------------------------------------------------------------------
async def test_each_broker_of_a_cluster_answers_for_its_own_log_dirs(tmp_path: Path) -> None:
    cfg = two_dirs(tmp_path)
    async with serve_cluster(2, cfg) as cluster:
        topic = cluster.broker(0).create_topic("t", 2, 1, assignments={0: [0], 1: [1]})
        assert topic.partitions[1].replicas == [1]
        for bid in (0, 1):
            async with await KafkaConnection.connect("127.0.0.1", cluster.broker(bid).port) as conn:
                dirs = replicas_by_dir(await describe(conn))
                assert list(dirs) == [str(tmp_path / d / f"broker-{bid}") for d in ("d1", "d2")]
                assert sorted(k for replicas in dirs.values() for k in replicas) == [("t", bid)]
                # The other broker's partition exists but is not hosted here.
                other = str(tmp_path / "d2" / f"broker-{bid}")
                assert await alter(conn, {other: {"t": [1 - bid]}}) == {("t", 1 - bid): ErrorCode.REPLICA_NOT_AVAILABLE}
                assert await alter(conn, {str(tmp_path / "d2" / f"broker-{1 - bid}"): {"t": [bid]}}) == {
                    ("t", bid): ErrorCode.LOG_DIR_NOT_FOUND}  # another broker's directory


async def test_a_follower_replica_moves_while_it_replicates(tmp_path: Path) -> None:
    cfg = two_dirs(tmp_path, replica_fetch_wait_max_ms=20, replica_alter_log_dirs_io_max_bytes_per_second=50_000)
    async with serve_cluster(2, cfg) as cluster:
        cluster.broker(0).create_topic("t", 1, 2, assignments={0: [0, 1]})  # led by 0, followed by 1
        follower = cluster.broker(1)
        lm = follower.replica_manager.log_manager
        source = lm.dir_of(lm.logs["t", 0])
        target = next(d for d in lm.log_dirs if d != source)
        sent: list[bytes] = []
        async with await KafkaConnection.connect("127.0.0.1", cluster.broker(0).port) as conn:
            for i in range(60):
                sent.append(b"%d-" % i + b"r" * 200)
                assert (await produce(conn, "t", batch([sent[-1]]))).error_code == 0  # acks=all
            async with await KafkaConnection.connect("127.0.0.1", follower.port) as fconn:
                assert await alter(fconn, {target.path: {"t": [0]}}) == {("t", 0): ErrorCode.NONE}
                assert replicas_by_dir(await describe(fconn, {"t": [0]}))[target.path]["t", 0][2]  # a future replica
            for i in range(60, 120):
                sent.append(b"%d-" % i)
                assert (await produce(conn, "t", batch([sent[-1]]))).error_code == 0
            await wait_until(lambda: not lm.future_logs, 10, "the move")
            moved = follower.replica_manager.get("t", 0).log
            assert lm.dir_of(moved) == target and not (source.root / "t-0").exists()
            await wait_until(lambda: moved.log_end_offset == 120 and moved.high_watermark == 120, 10, "replication")
            assert cluster.metadata.topics["t"].partitions[0].isr == [0, 1]
            assert (await produce(conn, "t", batch([b"last"]))).error_code == 0
            sent.append(b"last")
        await wait_until(lambda: moved.log_end_offset == 121, 10, "replication after the move")
        await cluster.stop_broker(0)  # the moved replica takes over, with everything
        async with await KafkaConnection.connect("127.0.0.1", follower.port) as fconn:
            await wait_until(lambda: follower.replica_manager.get("t", 0).is_leader, 10, "leadership")
            assert await read_values(fconn, "t") == sent


# -- a real client ---------------------------------------------------------------------------------------------------
@pytest.mark.clients
def test_kafka_python_describes_and_alters_log_dirs(tmp_path: Path) -> None:
    from kafka import TopicPartitionReplica
    from kafka.admin import KafkaAdminClient
    from kafka.errors import LogDirNotFoundError, NoError

    from minikafka.testing import BrokerThread

    d1, d2 = str(tmp_path / "d1"), str(tmp_path / "d2")
    with BrokerThread(two_dirs(tmp_path)) as b:
        b.create_topic("orders", 2)
        b.create_topic("audit", 1)
        broker: Broker = b.broker  # type: ignore[assignment]

        async def fill() -> None:
            async with await KafkaConnection.connect("127.0.0.1", broker.port) as conn:
                for _ in range(3):
                    await produce(conn, "orders", batch([b"o" * 50]), partition=1)

        b.run(fill)
        admin = KafkaAdminClient(bootstrap_servers=b.bootstrap, request_timeout_ms=10000)
        try:
            [out] = admin.describe_log_dirs()
            assert out["broker"] == 0
            dirs = {d["log_dir"]: d for d in out["log_dirs"]}
            assert sorted(dirs) == [d1, d2] and all(d["error_code"] == 0 for d in dirs.values())
            found = {(t["name"], p["partition_index"]): (path, p["partition_size"])
                     for path, d in dirs.items() for t in d["topics"] for p in t["partitions"]}
            assert sorted(found) == [("audit", 0), ("orders", 0), ("orders", 1)]
            for (topic, p), (path, size) in found.items():
                assert size == log_files_size(Path(path) / "logs" / f"{topic}-{p}")
            assert found["orders", 1][1] > 0
            assert dirs[d1]["total_bytes"] == shutil.disk_usage(tmp_path).total  # v4's volume sizes
            source = found["orders", 1][0]
            target = d2 if source == d1 else d1
            result = admin.alter_replica_log_dirs({TopicPartitionReplica("orders", 1, 0): target,
                                                   TopicPartitionReplica("audit", 0, 0): "/not/a/log/dir"})
            assert result == {TopicPartitionReplica("orders", 1, 0): NoError,
                              TopicPartitionReplica("audit", 0, 0): LogDirNotFoundError}
            b.run(wait_until, lambda: not broker.replica_manager.log_manager.future_logs, 10, "the move")
            [out] = admin.describe_log_dirs({"orders": [1]})
            placed = {d["log_dir"]: [(t["name"], p["partition_index"]) for t in d["topics"] for p in t["partitions"]]
                      for d in out["log_dirs"]}
            assert placed == {target: [("orders", 1)], source: []}
        finally:
            admin.close()


# -- replay with --scale K renames the topics of both APIs ------------------------------------------------------
def test_replay_renames_the_topics_of_both_apis() -> None:
    from minikafka.capture.frames import parse_request_frame
    from minikafka.capture.replay.rename import CopyNames, rename_request_frame, unrename_response
    from minikafka.protocol.api import APIS
    from minikafka.protocol.headers import RequestHeader, request_header_version

    names = CopyNames(3, 10)

    def renamed(api_key: int, body: dict):
        api = APIS[api_key]
        header = RequestHeader.build({"request_api_key": api_key, "request_api_version": 2, "correlation_id": 1,
                                      "client_id": "app"}, request_header_version(api_key, api.is_flexible(2)))
        return parse_request_frame(rename_request_frame(header + api.request.build(body, 2), names))[1]

    def response(api_key: int, body: dict):
        msg = APIS[api_key].response
        return msg.parse(msg.build(body, 2), 2)

    out = renamed(K.DESCRIBE_LOG_DIRS, {"topics": [{"topic": "orders", "partitions": [0]}]})
    assert out.topics[0].topic == "s3.orders"
    out = renamed(K.ALTER_REPLICA_LOG_DIRS, {"dirs": [{"path": "/d",
                                                       "topics": [{"name": "orders", "partitions": [0]}]}]})
    assert out.dirs[0].topics[0].name == "s3.orders" and out.dirs[0].path == "/d"
    part = {"partition_index": 0, "partition_size": 1, "offset_lag": 0, "is_future_key": False}
    resp = response(K.DESCRIBE_LOG_DIRS, {"results": [{"error_code": 0, "log_dir": "/d", "topics": [
        {"name": n, "partitions": [part]} for n in ("s3.orders", "s1.orders")]}]})
    unrename_response(K.DESCRIBE_LOG_DIRS, resp, names)
    assert [t.name for t in resp.results[0].topics] == ["orders"]  # another copy's topic is not this one's
    resp = response(K.ALTER_REPLICA_LOG_DIRS, {"results": [{"topic_name": "s3.orders", "partitions": []}]})
    unrename_response(K.ALTER_REPLICA_LOG_DIRS, resp, names)
    assert resp.results[0].topic_name == "orders"
