"""Several log directories, DescribeLogDirs (35) and AlterReplicaLogDirs (34), as Kafka has them (KIP-113).

The log manager places and finds logs in every ``log.dirs`` entry and finishes an interrupted move at
start-up; the broker describes its directories (sizes of the files, offset lag, volume sizes) and moves a
replica to another directory through a future log while it takes appends, over the wire and with
kafka-python's admin client; a cluster's brokers each answer for their own directories.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest
import trio

from helpers import batch, create, produce, read_batches, values, wait_until
from minikafka.broker.broker import Broker, serve_broker
from minikafka.broker.cluster import serve_cluster
from minikafka.broker.config import BrokerConfig, StartupError
from minikafka.broker.log import LogConfig, LogManager
from minikafka.broker.log.manager import LogDir, parse_suffixed_dir_name, suffixed_dir_name
from minikafka.broker.replica_alter_log_dirs import ReplicaAlterLogDirsManager
from minikafka.client.connection import KafkaConnection
from minikafka.protocol.api import ApiKey as K
from minikafka.protocol.errors import ErrorCode
from minikafka.common.clock import SYSTEM_CLOCK

STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
TIMEOUT = 30  # seconds any one condition may take: it only bounds a failure (the tests wait for conditions)


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


@contextmanager
def mover_held(mover: ReplicaAlterLogDirsManager) -> Iterator[Callable[[tuple[str, int]], bool]]:
    """Within the block the broker's copy task makes no progress on any move (each of its steps waits, as
    one does while a cleaning is under way), so a move stays exactly where the test put it whatever the
    speed of the machine; the test may take single steps itself with the function given.  After the
    block the copy goes on (the task looks again within 50 ms)."""
    step = mover.step
    mover.step = lambda key: False  # type: ignore[method-assign]
    try:
        yield step
    finally:
        del mover.step  # the class's own step again


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
    max_lag = "kafka.server:type=ReplicaAlterLogDirsManager,name=MaxLag,clientId=ReplicaAlterLogDirs"
    async with serve_broker(cfg) as broker:
        lm = broker.replica_manager.log_manager
        async with await KafkaConnection.connect("127.0.0.1", broker.port) as conn:
            await create(conn, "t", 1)
            for v in sent:
                assert (await produce(conn, "t", batch([v]))).error_code == 0
            assert (tmp_path / "d1" / "logs" / "t-0").is_dir()
            moving: list[bool] = []

            async def producing() -> None:
                async with await KafkaConnection.connect("127.0.0.1", broker.port) as c:
                    for i in range(100):
                        v = b"during-%d" % i
                        sent.append(v)
                        assert (await produce(c, "t", batch([v]))).error_code == 0
                        moving.append(bool(lm.future_logs))

            async with trio.open_nursery() as nursery:
                with mover_held(broker.log_dirs) as step:
                    assert await alter(conn, {d2: {"t": [0]}}) == {("t", 0): ErrorCode.NONE}
                    # The future replica, empty while the copy is held: behind by the whole log.
                    during = replicas_by_dir(await describe(conn, {"t": [0]}))
                    assert during[d2]["t", 0] == (0, len(sent), True) and during[d1]["t", 0][1:] == (0, False)
                    assert broker.metrics()[max_lag] == len(sent)
                    [future_dir] = (tmp_path / "d2" / "logs").iterdir()
                    assert future_dir.name.endswith("-future")
                    # One step of the copy (a tenth of a second's worth at 50 kB/s): part of the log.
                    assert step(("t", 0))
                    during = replicas_by_dir(await describe(conn, {"t": [0]}))
                    size, lag, future = during[d2]["t", 0]
                    assert future and 0 < lag < len(sent) and size == log_files_size(future_dir) > 0
                    assert broker.metrics()[max_lag] == lag
                    assert await alter(conn, {d2: {"t": [0]}}) == {("t", 0): ErrorCode.NONE}  # asked again:
                    assert lm.future_logs["t", 0].log_end_offset == len(sent) - lag  # the same move goes on
                    nursery.start_soon(producing)
                    await wait_until(lambda: len(moving) >= 20, TIMEOUT, "appends during the move")
                # Released: the copy catches up while the appends go on, and the replica moves.
                await wait_until(lambda: not lm.future_logs, TIMEOUT, "the move")
            assert moving[:20] == [True] * 20  # appends came while the future replica was being filled
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
    sent = [b"v%d-" % i + b"y" * 100 for i in range(20)]
    with ExitStack() as held:  # the copy stays held until the broker has stopped
        # 1 kB/s: the copy takes one batch (chunks of 100 bytes) per step.
        async with serve_broker(two_dirs(tmp_path, replica_alter_log_dirs_io_max_bytes_per_second=1000)) as broker:
            step = held.enter_context(mover_held(broker.log_dirs))
            lm = broker.replica_manager.log_manager
            async with await KafkaConnection.connect("127.0.0.1", broker.port) as conn:
                await create(conn, "t", 1)
                for v in sent:
                    await produce(conn, "t", batch([v]))
                assert await alter(conn, {d2: {"t": [0]}}) == {("t", 0): ErrorCode.NONE}
                for _ in range(5):
                    assert step(("t", 0))
                assert (lm.future_logs["t", 0].log_end_offset, lm.logs["t", 0].log_end_offset) == (5, 20)
    [future] = (tmp_path / "d2" / "logs").iterdir()
    assert future.name.endswith("-future")  # stopped mid-move, 5 of 20 batches copied
    copied = log_files_size(future)
    async with serve_broker(two_dirs(tmp_path)) as broker:
        lm = broker.replica_manager.log_manager
        await wait_until(lambda: not lm.future_logs, TIMEOUT, "the resumed move")
        moved = tmp_path / "d2" / "logs" / "t-0"
        assert broker.replica_manager.get("t", 0).log.directory == moved
        assert broker.log_dirs.bytes_copied == log_files_size(moved) - copied  # resumed where it stopped
        async with await KafkaConnection.connect("127.0.0.1", broker.port) as conn:
            assert await read_values(conn, "t") == sent


async def test_alter_replica_log_dirs_errors_and_cancellation(tmp_path: Path) -> None:
    d1, d2 = str(tmp_path / "d1"), str(tmp_path / "d2")
    async with serve_broker(two_dirs(tmp_path)) as broker:
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
            # A move (held: under way) cancelled by asking for the directory the replica is in.
            with mover_held(broker.log_dirs):
                assert await alter(conn, {d2: {"t": [0]}}) == {("t", 0): ErrorCode.NONE}
                future_dir = lm.future_logs["t", 0].directory
                assert future_dir.is_dir()
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
            with mover_held(follower.log_dirs) as step:
                async with await KafkaConnection.connect("127.0.0.1", follower.port) as fconn:
                    assert await alter(fconn, {target.path: {"t": [0]}}) == {("t", 0): ErrorCode.NONE}
                    # A future replica, empty while the copy is held (acks=all: the follower has all 60).
                    assert replicas_by_dir(await describe(fconn, {"t": [0]}))[target.path]["t", 0] == (0, 60, True)
                    assert step(("t", 0))  # some of the copy
                    for i in range(60, 90):  # replicated into the current log while the move is under way
                        sent.append(b"%d-" % i)
                        assert (await produce(conn, "t", batch([sent[-1]]))).error_code == 0
                    size, lag, future = replicas_by_dir(await describe(fconn, {"t": [0]}))[target.path]["t", 0]
                    assert future and 30 <= lag < 90 and size > 0
            for i in range(90, 120):  # and while the copy runs again
                sent.append(b"%d-" % i)
                assert (await produce(conn, "t", batch([sent[-1]]))).error_code == 0
            await wait_until(lambda: not lm.future_logs, TIMEOUT, "the move")
            moved = follower.replica_manager.get("t", 0).log
            assert lm.dir_of(moved) == target and not (source.root / "t-0").exists()
            await wait_until(lambda: moved.log_end_offset == 120 and moved.high_watermark == 120, TIMEOUT,
                             "replication")
            assert cluster.metadata.topics["t"].partitions[0].isr == [0, 1]
            assert (await produce(conn, "t", batch([b"last"]))).error_code == 0
            sent.append(b"last")
        await wait_until(lambda: moved.log_end_offset == 121, TIMEOUT, "replication after the move")
        await cluster.stop_broker(0)  # the moved replica takes over, with everything
        async with await KafkaConnection.connect("127.0.0.1", follower.port) as fconn:
            await wait_until(lambda: follower.replica_manager.get("t", 0).is_leader, TIMEOUT, "leadership")
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
            b.run(wait_until, lambda: not broker.replica_manager.log_manager.future_logs, TIMEOUT, "the move")
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


# -- moves that meet DeleteRecords, I/O errors, a cleaning, a topic deletion ------------------------------------------
def _hosting(tmp_path: Path, **mover_settings):
    """A replica manager hosting ``t-0`` (in d1) and a mover for it; the partition and the other log dir."""
    from minikafka.broker.metadata import ClusterMetadata
    from minikafka.broker.replica_alter_log_dirs import ReplicaAlterLogDirsManager
    from minikafka.broker.replica_manager import ReplicaManager

    metadata = ClusterMetadata([0])
    rm = ReplicaManager(0, two_dirs(tmp_path), metadata)
    rm.ensure_partitions(metadata.create_topic("t", 1, 1))
    mover = ReplicaAlterLogDirsManager(rm, **mover_settings)
    part = rm.get("t", 0)
    source = rm.log_manager.dir_of(part.log)
    target = next(d for d in rm.log_manager.log_dirs if d != source)
    return rm, mover, part, target


def _stored(lg) -> list[bytes]:
    return [v for chunk in lg.read(lg.log_start_offset, 1 << 20).chunks for v in values(bytes(chunk))]


def test_a_move_completes_when_the_log_start_is_inside_a_batch(tmp_path: Path) -> None:
    """DeleteRecords may put the log start inside a batch: the copy starts at that batch's base (below the log
    start) and must not take that for retention having overtaken it, before the move or during it."""
    rm, mover, part, target = _hosting(tmp_path, chunk_bytes=1)  # one batch per step
    current = part.log
    for first in (b"a", b"d", b"g", b"j"):
        current.append_as_leader([bytearray(batch([first, first * 2, first * 3]))], 0, 0)  # 3 records a batch
    current.delete_records_before(4)  # inside the batch 3-5
    assert mover.alter_replica_log_dirs({("t", 0): target.path}) == {("t", 0): ErrorCode.NONE}
    future = rm.log_manager.future_logs["t", 0]
    assert mover.step(("t", 0)) and (future.log_start_offset, future.log_end_offset) == (3, 3)  # started at 3
    assert mover.step(("t", 0)) and future.log_end_offset == 6  # the batch 3-5 copied
    current.delete_records_before(7)  # inside the next batch (6-8), whose base is where the future log ends
    for _ in range(10):
        if not rm.log_manager.future_logs:
            break
        assert mover.step(("t", 0))
    assert not rm.log_manager.future_logs, "the move never finished"
    moved = rm.get("t", 0).log
    assert moved is part.log and rm.log_manager.dir_of(moved) == target
    assert (moved.log_start_offset, moved.log_end_offset) == (7, 12)
    assert _stored(moved) == [b"g", b"gg", b"ggg", b"j", b"jj", b"jjj"]  # whole batches, from the one holding 7
    assert (mover.moves_completed, mover.moves_failed) == (1, 0)
    rm.log_manager.close_all()


@pytest.mark.parametrize("failing", ["checkpoint copy", "set aside", "commit rename"])
def test_a_swap_failing_before_its_commit_leaves_the_replica_where_it_was(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failing: str) -> None:
    """An I/O error (a full or failing disk) at any step of the swap before the future directory takes the
    partition's name: the move is abandoned, and the partition keeps its log, open and in place."""
    import minikafka.broker.log.manager as log_manager
    from minikafka.broker.replica_manager import ReplicaManager

    rm, mover, part, target = _hosting(tmp_path)
    source_dir = part.log.directory
    sent = [b"v%d" % i for i in range(3)]
    for v in sent:
        part.log.append_as_leader([bytearray(batch([v]))], 0, 0)
    real_rename, real_copy = log_manager.os.rename, log_manager.shutil.copyfile
    failed: list[str] = []

    def fail(what: str) -> None:
        failed.append(what)
        raise OSError(28, f"No space left on device (simulated {what})")

    def rename(src, dst) -> None:
        if not failed and ((failing == "set aside" and str(dst).endswith("-delete"))
                           or (failing == "commit rename" and str(src).endswith("-future"))):
            fail(failing)
        real_rename(src, dst)

    def copyfile(src, dst):
        if not failed and failing == "checkpoint copy":
            fail(failing)
        return real_copy(src, dst)

    monkeypatch.setattr(log_manager.os, "rename", rename)
    monkeypatch.setattr(log_manager.shutil, "copyfile", copyfile)
    assert mover.alter_replica_log_dirs({("t", 0): target.path}) == {("t", 0): ErrorCode.NONE}
    for _ in range(10):
        if not rm.log_manager.future_logs:
            break
        assert mover.step(("t", 0))
    assert failed == [failing] and (mover.moves_completed, mover.moves_failed) == (0, 1)
    lm = rm.log_manager
    assert not lm.future_logs and part.log is lm.logs["t", 0] and part.log.directory == source_dir
    assert not list(target.root.iterdir())  # no future log left behind
    assert [p.name for p in source_dir.parent.iterdir()] == ["t-0"]  # nothing left set aside
    part.log.append_as_leader([bytearray(batch([b"after"]))], 0, 0)  # the partition takes appends and reads
    sent.append(b"after")
    assert _stored(part.log) == sent
    lm.flush_all(True)
    monkeypatch.undo()
    assert mover.alter_replica_log_dirs({("t", 0): target.path}) == {("t", 0): ErrorCode.NONE}  # a new try
    while lm.future_logs:
        assert mover.step(("t", 0))
    assert mover.moves_completed == 1 and lm.dir_of(part.log) == target and _stored(part.log) == sent
    lm.close_all()
    again = ReplicaManager(0, two_dirs(tmp_path), rm.metadata)
    again.load()
    assert again.log_manager.dir_of(again.get("t", 0).log) == target and _stored(again.get("t", 0).log) == sent
    again.log_manager.close_all()


def test_a_swap_failing_after_its_commit_keeps_the_moved_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Once the future directory has the partition's name it is the partition's log: an error opening it
    abandons nothing on disk, and a restart serves every record from the new directory."""
    import minikafka.broker.log.manager as log_manager
    from minikafka.broker.replica_manager import ReplicaManager

    rm, mover, part, target = _hosting(tmp_path)
    source = rm.log_manager.dir_of(part.log)
    sent = [b"w%d" % i for i in range(3)]
    for v in sent:
        part.log.append_as_leader([bytearray(batch([v]))], 0, 0)
    real_log = log_manager.Log

    def opening(topic, partition, config, directory, **kw):
        if directory == target.root / "t-0":
            raise OSError(5, "Input/output error (simulated)")
        return real_log(topic, partition, config, directory, **kw)

    monkeypatch.setattr(log_manager, "Log", opening)
    assert mover.alter_replica_log_dirs({("t", 0): target.path}) == {("t", 0): ErrorCode.NONE}
    for _ in range(10):
        if not rm.log_manager.future_logs:
            break
        assert mover.step(("t", 0))
    assert mover.moves_failed == 1 and not rm.log_manager.future_logs
    assert (target.root / "t-0").is_dir()  # committed: not removed as an abandoned future log
    monkeypatch.undo()
    again = ReplicaManager(0, two_dirs(tmp_path), rm.metadata)  # the broker restarts
    again.load()
    moved = again.get("t", 0).log
    assert again.log_manager.dir_of(moved) == target and _stored(moved) == sent
    assert not list(source.root.iterdir())  # the old one, set aside before the commit, is gone
    again.log_manager.close_all()


async def test_a_move_copies_nothing_while_a_cleaning_begun_before_it_is_under_way(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A cleaning that began before the move replaces the current log's segments and then advances the cleaner
    checkpoint: the copy waits for it, or the moved log would hold, below that checkpoint, records the cleaning
    removed (the keys' older values, never cleaned again)."""
    import threading

    from minikafka.broker.log.cleaner_manager import CleanerConfig, LogCleaner
    from minikafka.protocol.records import Record, build_batch, decode_records

    cleaner = LogCleaner(CleanerConfig(processes=False, dedupe_buffer_size=1 << 20), checkpoint_dir=tmp_path)
    rm, mover, part, target = _hosting(tmp_path, cleaning=cleaner.manager.in_progress.__contains__)
    cleaner.add_source(rm.cleaner_targets)
    current = part.log
    current.config = LogConfig(cleanup_policy=frozenset({"compact"}), min_cleanable_dirty_ratio=0.01)
    for round_ in range(4):  # every key in every segment: cleaning keeps only the last round below the active one
        keyed = [Record(i, i, b"k%d" % i, b"r%d" % round_) for i in range(5)]
        current.append_as_leader([bytearray(build_batch(keyed, base_timestamp=SYSTEM_CLOCK.time_ms()))], 0, 0)
        current.roll()
    last = build_batch([Record(0, 0, b"k0", b"last")], base_timestamp=SYSTEM_CLOCK.time_ms())
    current.append_as_leader([bytearray(last)], 0, 0)

    def records(lg) -> list[tuple[bytes | None, bytes | None, int]]:
        return [(r.key, r.value, r.offset) for _, view in lg.iter_batches_from(lg.log_start_offset)
                for r in decode_records(view)]

    uncleaned = records(current)
    held, mapping = threading.Event(), threading.Event()
    real_map = cleaner.threads[0].cleaner.build_offset_map

    def build_offset_map(*args, **kw):
        mapping.set()
        held.wait(30)  # the cleaning stays under way until the test has stepped the move
        return real_map(*args, **kw)

    monkeypatch.setattr(cleaner.threads[0].cleaner, "build_offset_map", build_offset_map)
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(cleaner.clean_once)
            await wait_until(mapping.is_set, 10, "the cleaning")
            assert cleaner.manager.in_progress == {"t-0"}
            assert mover.alter_replica_log_dirs({("t", 0): target.path}) == {("t", 0): ErrorCode.NONE}
            assert not mover.step(("t", 0))  # waits for the cleaning
            assert rm.log_manager.future_logs["t", 0].log_end_offset == 0 and mover.bytes_copied == 0
            held.set()
        assert cleaner.cleanings == 1 and not cleaner.manager.in_progress
        cleaned = records(current)
        assert len(cleaned) < len(uncleaned)
        while rm.log_manager.future_logs:
            assert mover.step(("t", 0))
        moved = rm.get("t", 0).log
        assert rm.log_manager.dir_of(moved) == target and records(moved) == cleaned
        checkpoint = cleaner.manager.checkpoints["t-0"]
        below = [key for key, _, offset in records(moved) if offset < checkpoint]
        assert len(below) == len(set(below)) == 5  # each key once below the cleaner checkpoint
    finally:
        held.set()
        cleaner.close()
        rm.log_manager.close_all()


def test_a_crash_while_a_topic_is_deleted_never_makes_a_future_log_the_partition_s(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Loading makes a future log with no current one the partition's log (an interrupted swap): deleting a
    topic removes future logs first, so that a crash after the first removal cannot bring a partial copy in."""
    from minikafka.broker.log import Log

    mgr = manager(tmp_path)
    lg = mgr.get_or_create("t", 0, LogConfig())
    lg.append_as_leader([bytearray(batch([b"a"])), bytearray(batch([b"b"]))], 0, 0)
    future = mgr.create_future_log("t", 0, mgr.log_dirs[1], LogConfig())
    future.append_as_follower(lg.read(0, 1, min_one_batch=True).chunks[0])  # a partial copy: one batch of two
    assert future.log_end_offset == 1

    class Crash(BaseException):
        pass

    real_delete = Log.delete

    def delete_then_crash(self: Log) -> None:
        real_delete(self)
        raise Crash  # the broker dies right after removing its first log

    monkeypatch.setattr(Log, "delete", delete_then_crash)
    with pytest.raises(Crash):
        mgr.delete_topic("t")
    monkeypatch.undo()
    for left in (*mgr.logs.values(), *mgr.future_logs.values()):  # the dead process's open files
        for seg in left.segments:
            seg.close()
    again = manager(tmp_path)
    again.load_existing({})
    assert not again.future_logs and not list((tmp_path / "d2").iterdir())  # no copy, let alone a promoted one
    assert [again.dir_of(x).path for x in again.logs.values()] == [str(tmp_path / "d1")]
    assert again.logs["t", 0].log_end_offset == 2  # the current log, as before the deletion began
    again.delete_topic("t")  # the deletion done again removes everything
    assert not again.logs and not list((tmp_path / "d1").iterdir())
    again.close_all()
