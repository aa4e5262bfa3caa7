"""One clock: only ``minikafka/common/clock.py`` reads the time, and components driven by a ManualClock follow it.

The first test walks the AST of every module of minikafka: an ``import time`` / ``from time import``, an attribute
of a name ``time`` (``time.time()``, ``time.sleep``) or a ``datetime.now()``-style read anywhere else fails.
Trio's clock (``trio.current_time``) is not a read of the time of day: waits keep it (``MockClock`` in tests).
Another walk checks that time is injected as a Clock, not as a callable (``now_ms: Callable[[], int]``), but for
the seconds sources of Trio waits listed in :data:`TRIO_WAIT_SOURCES`.
"""

from __future__ import annotations

import ast
import functools
import re
from collections import OrderedDict
from pathlib import Path

import pytest

from minikafka.broker.broker import Broker
from minikafka.broker.config import BrokerConfig
from minikafka.broker.coordinator_log import CoordinatorLog, compacted_log_config
from minikafka.broker.fetch_session import FetchSessionCache
from minikafka.broker.groups import GroupCoordinator
from minikafka.broker.quota import DEFAULT, ClientQuotaEntity, QuotaConfigs, QuotaManagers
from minikafka.broker.quota.throttle import ThrottledChannelReaper
from minikafka.common import OffsetAndMetadata, TopicPartition
from minikafka.common.clock import SYSTEM_CLOCK, Clock, ManualClock, SecondsClock
from minikafka.metrics import Metrics

ROOT = Path(__file__).resolve().parents[2] / "minikafka"
CLOCK = ROOT / "common" / "clock.py"
#: Reads of the wall clock through ``datetime`` / ``date``.
_DATETIME_READS = {"now", "utcnow", "today"}
#: The time sources left as callables: seconds for Trio waits.  Their deadlines are compared with
#: ``trio.current_time()`` (``trio.move_on_at``), so they must move with Trio's clock (a ``MockClock`` in tests;
#: the broker passes ``trio.current_time``), which is not a Clock: it has no wall time and must not be slept on.
TRIO_WAIT_SOURCES = {
    "broker/deadline_loop.py: DeadlineLoop.__init__(clock)",  # the timer loop of the three below
    "broker/groups/core.py: CoordinatorCore.__init__(clock)",  # session, join, sync and rebalance deadlines
    "broker/share/coordinator.py: ShareGroupCoordinator.__init__(clock)",  # share members' session deadlines
    "broker/share/manager.py: SharePartitionManager.__init__(clock)",  # acquisition lock deadlines
    "broker/quota/throttle.py: ThrottledChannelReaper.__init__(clock)",  # the throttled channels' delay queue
    "client/producer/buffer_pool.py: BufferPool.__init__(clock)",  # max.block.ms waits for memory
    "client/producer/config.py: ProducerConfig(clock)",  # the producer's waits (its SecondsClock reads it too)
}
_CLOCKISH_NAME = re.compile("now|clock|time", re.IGNORECASE)


@functools.cache
def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), str(path))


def _time_reads(path: Path) -> list[str]:
    """Where ``path`` reads the time other than through a Clock: ``line: what``."""
    found = []
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.Import):
            found += [f"{node.lineno}: import {a.name}" for a in node.names if a.name.split(".")[0] == "time"]
        elif isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").split(".")[0] == "time":
            found.append(f"{node.lineno}: from {node.module} import ...")
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "time":
            found.append(f"{node.lineno}: time.{node.attr}")
        elif (isinstance(node, ast.Attribute) and node.attr in _DATETIME_READS
              and (isinstance(node.value, ast.Name) and node.value.id in ("datetime", "date")
                   or isinstance(node.value, ast.Attribute) and node.value.attr in ("datetime", "date"))):
            found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


def test_only_the_clock_module_reads_the_time() -> None:
    reads = {str(p.relative_to(ROOT.parent)): r for p in sorted(ROOT.rglob("*.py")) if p != CLOCK
             if (r := _time_reads(p))}
    assert reads == {}


def test_the_checker_sees_time_reads(tmp_path: Path) -> None:
    src = tmp_path / "m.py"
    src.write_text("import time\nfrom time import monotonic\nimport datetime as dt\n"
                   "a = time.perf_counter()\nb = dt.datetime.now()\nc = trio.current_time()\n")
    assert _time_reads(src) == ["1: import time", "2: from time import ...", "4: time.perf_counter",
                                "5: dt.datetime.now"]
    assert _time_reads(CLOCK)  # the clock module itself reads it


def _is_time_callable(annotation: ast.expr | None) -> bool:
    """Whether an annotation is (or has in a union) ``Callable[[], int]`` or ``Callable[[], float]``."""
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        annotation = ast.parse(annotation.value, mode="eval").body
    return annotation is not None and any(
        isinstance(node, ast.Subscript) and ast.unparse(node.value).split(".")[-1] == "Callable"
        and isinstance(node.slice, ast.Tuple) and len(node.slice.elts) == 2
        and isinstance(node.slice.elts[0], ast.List) and not node.slice.elts[0].elts
        and ast.unparse(node.slice.elts[1]) in ("int", "float")
        for node in ast.walk(annotation))


def _clock_callables(path: Path) -> list[str]:
    """``Qualified.name(parameter)`` of each parameter -- or class field, a dataclass's constructor parameter --
    of ``path`` named like a time source (now, clock, time) and typed as a callable returning int or float."""
    found: list[str] = []

    def visit(node: ast.AST, scope: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                found.extend(f"{scope}{child.name}({stmt.target.id})" for stmt in child.body
                             if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)
                             and _CLOCKISH_NAME.search(stmt.target.id) and _is_time_callable(stmt.annotation))
                visit(child, f"{scope}{child.name}.")
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                a = child.args
                found.extend(f"{scope}{child.name}({arg.arg})" for arg in [*a.posonlyargs, *a.args, *a.kwonlyargs]
                             if _CLOCKISH_NAME.search(arg.arg) and _is_time_callable(arg.annotation))
                visit(child, f"{scope}{child.name}.")
            else:
                visit(child, scope)

    visit(_tree(path), "")
    return found


def test_time_is_injected_as_a_clock_not_a_callable() -> None:
    found = {f"{p.relative_to(ROOT).as_posix()}: {c}" for p in sorted(ROOT.rglob("*.py")) for c in _clock_callables(p)}
    assert found - TRIO_WAIT_SOURCES == set()  # a timestamp, duration or rate source: take a ``clock: Clock``
    assert TRIO_WAIT_SOURCES - found == set()  # gone or renamed: update the list


def test_the_checker_sees_clock_callables(tmp_path: Path) -> None:
    src = tmp_path / "m.py"
    src.write_text(
        "from typing import Callable, Optional\n"
        "class A:\n"
        "    now_ms: Callable[[], int]\n"
        "    on_time: Callable[[int], int]\n"
        "    def __init__(self, clock: Callable[[], float] = f, *, time_source: 'Callable[[], int] | None' = None,\n"
        "                 on_done: Callable[[], int] = g, wall_clock: Clock = c, timeout_s: float = 1.0) -> None:\n"
        "        def inner(now: typing.Callable[[], float]) -> None: ...\n"
        "async def f(get_time: Optional[Callable[[], float]], now_ms: int) -> None: ...\n")
    assert _clock_callables(src) == ["A(now_ms)", "A.__init__(clock)", "A.__init__(time_source)",
                                     "A.__init__.inner(now)", "f(get_time)"]


@pytest.mark.parametrize("clock", [SYSTEM_CLOCK, ManualClock(), SecondsClock(lambda: 2.5, 1_700_000_000.0)])
def test_every_clock_is_a_clock(clock: Clock) -> None:
    """Each reading in each unit is the same time (the system clock's readings are a few microseconds apart)."""
    assert abs(clock.time_ns() / 1e6 - clock.time_ms()) <= 5
    assert abs(clock.time() * 1000 - clock.time_ms()) <= 5
    assert abs(clock.monotonic() * 1e9 - clock.monotonic_ns()) <= 5e6


def test_manual_clock_moves_when_told() -> None:
    clock = ManualClock(time_ms=5_000, monotonic_ns=7)
    assert (clock.time_ms(), clock.time(), clock.monotonic_ns()) == (5_000, 5.0, 7)
    clock.sleep(250)  # Kafka's MockTime.sleep: both clocks move, nothing blocks
    assert (clock.time_ms(), clock.monotonic_ns()) == (5_250, 250_000_007)
    clock.set_time_ms(6_000)
    assert (clock.time_ms(), clock.monotonic_ns()) == (6_000, 1_000_000_007)


def test_seconds_clock_reads_its_source() -> None:
    now = [1.5]
    clock = SecondsClock(lambda: now[0], wall0_s=1_000.0)
    assert (clock.monotonic(), clock.time_ms()) == (1.5, 1_001_500)
    now[0] = 2.0
    assert (clock.monotonic_ns(), clock.time()) == (2_000_000_000, 1_002.0)
    with pytest.raises(RuntimeError):
        clock.sleep(1)


# -- components on one ManualClock -----------------------------------------------------------------------------

def test_quota_managers_measure_on_the_injected_clock() -> None:
    clock = ManualClock(time_ms=1_000_000)
    configs = QuotaConfigs()
    configs.set(ClientQuotaEntity(None, DEFAULT), "producer_byte_rate", 100.0)
    managers = QuotaManagers(configs, Metrics(clock=clock), window_num=11, window_size_s=1, clock=clock)
    # 2000 bytes at once: 2000 B over the padded 10 s window = 200 B/s against 100: throttled 10 s.
    assert managers.produce.maybe_record_and_get_throttle_time_ms("u", "c", 2000) == 10_000
    clock.sleep(60_000)  # the samples have expired on the clock the managers read
    assert managers.produce.maybe_record_and_get_throttle_time_ms("u", "c", 10) == 0


def test_throttled_channel_reaper_unmutes_on_its_clock() -> None:
    clock = ManualClock()
    reaper = ThrottledChannelReaper(clock.monotonic)
    events: list[str] = []

    class Channel:
        def start_throttling(self) -> None:
            events.append("muted")

        def end_throttling(self) -> None:
            events.append("unmuted")

    reaper.add(Channel(), "Produce", 100)
    assert reaper.expire() == pytest.approx(0.1) and events == ["muted"]
    clock.sleep(99)
    reaper.expire()
    assert events == ["muted"]
    clock.sleep(1)
    assert reaper.expire() is None and events == ["muted", "unmuted"]


def test_fetch_session_cache_evicts_stale_sessions_on_its_clock() -> None:
    clock = ManualClock()
    cache = FetchSessionCache(max_entries=1, eviction_ms=1000, clock=clock)

    def create(privileged: bool) -> int:
        return cache.maybe_create_session(clock.time_ms(), privileged, 1, False, OrderedDict)

    assert create(True)  # a follower's session: only staleness evicts it for a consumer's
    clock.sleep(1000)
    assert create(False) == 0 and cache.evictions == 0
    clock.sleep(1)
    assert create(False) and cache.evictions == 1
    rate = cache.metrics()["kafka.server:type=FetchSessionCache,name=IncrementalFetchSessionEvictionsPerSec"]
    assert rate == pytest.approx(1 / 30)  # one eviction over the meter's 30 s minimum window, on the manual clock


def test_group_coordinator_stamps_and_expires_offsets_on_its_wall_clock() -> None:
    clock = ManualClock(time_ms=1_700_000_000_000)
    config = BrokerConfig(port=9092, offsets_retention_minutes=1)
    coordinator = GroupCoordinator(config, None, clock=clock.monotonic, wall_clock=clock)
    tp = TopicPartition("t", 0)
    assert coordinator.now_ms() == 1_700_000_000_000  # what the OffsetCommit handler stamps commits with
    commit = OffsetAndMetadata(5, commit_timestamp=coordinator.now_ms())
    assert coordinator.commit_offsets("g", "", None, -1, {tp: commit}) == {tp: 0}
    clock.sleep(59_999)
    assert coordinator.cleanup_group_metadata() == 0  # younger than offsets.retention.minutes: kept
    clock.sleep(1)
    assert coordinator.cleanup_group_metadata() == 1  # as old as the retention: expired (Kafka's >=)


def test_coordinator_logs_stamp_their_batches_and_markers_on_their_clock(tmp_path: Path) -> None:
    clock = ManualClock(time_ms=1_700_000_000_000)
    lg = CoordinatorLog(tmp_path, "__transaction_state", 0, compacted_log_config(1 << 20), clock=clock)
    try:
        lg.append([(b"k", b"v")], producer_id=7, producer_epoch=0, transactional=True)
        clock.sleep(5)
        assert lg.end_txn(7, commit=True)
        stamps = [(h.is_control, h.max_timestamp) for h, _ in lg.log.iter_batches_from(0)]
        assert stamps == [(False, 1_700_000_000_000), (True, 1_700_000_000_005)]
    finally:
        lg.close()


def test_the_broker_hands_its_clock_to_its_coordinators_and_stores(tmp_path: Path) -> None:
    clock = ManualClock(time_ms=1_700_000_000_000)
    config = BrokerConfig(port=0, data_dir=tmp_path)
    config.set("delegation.token.secret.key", "secret")
    broker = Broker(config, clock=clock)
    try:
        shared = broker.shared
        assert all(c is clock for c in (broker.client_metrics.clock, shared.client_telemetry.clock,
                                        shared.txn_coordinator.state.clock))
        token = shared.delegation_tokens.create_token("User:alice", "User:alice", [], -1)
        assert token.issue_timestamp == 1_700_000_000_000
        clock.sleep(7)
        # __consumer_offsets as the first FindCoordinator makes it, its replicas here, its shards loaded ...
        broker.ensure_offsets_topic()
        broker.replica_manager.ensure_partitions(broker.metadata.get_topic("__consumer_offsets"))
        tp = TopicPartition("t", 0)
        commit = OffsetAndMetadata(5, commit_timestamp=shared.group_coordinator.now_ms())
        assert shared.group_coordinator.commit_offsets("g", "", None, -1, {tp: commit}) == {tp: 0}
        # ... and the commit's batch stamped on the broker's clock.
        part = broker.replica_manager.get("__consumer_offsets", shared.group_coordinator.partition_for("g"))
        assert [h.max_timestamp for h, _ in part.log.iter_batches_from(0)] == [1_700_000_000_007]
    finally:
        broker.close()
