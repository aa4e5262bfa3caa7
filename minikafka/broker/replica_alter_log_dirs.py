"""A broker's log directories: describing them and moving replicas between them (KIP-113).

Models Kafka's ``ReplicaManager.describeLogDirs`` / ``alterReplicaLogDirs`` and the
``ReplicaAlterLogDirsManager`` with its ``ReplicaAlterLogDirsThread``.  AlterReplicaLogDirs gives a hosted
replica a *future* log in the destination directory
(:meth:`~minikafka.broker.log.manager.LogManager.create_future_log`); one Trio task copies the current log's
batches into it, offsets, leader epochs and all, from the future log's end, while the partition keeps taking
appends; once the future log ends where the current one does it is swapped in, in the same step (no append
can come between), and the old directory removed (Kafka's ``maybeReplaceCurrentWithFutureReplica``).  A
truncation of the current log (a follower that changed leader) truncates the future log to the offset where
their leader epochs agree, as the alter-log-dirs thread's OffsetsForLeaderEpoch against the local replica
does; retention or DeleteRecords moving the current log's start past the future log's end restarts the copy
there (at the base of the batch holding the log start).  The partition is not compacted while it moves (Kafka's
``abortAndPauseCleaning``): the replica manager leaves it out of the cleaner's targets, and a cleaning already
under way is waited for before anything is copied (Kafka aborts it instead).

A replica not hosted yet gets its directory remembered for when it is created (Kafka's preferred log dir)
and is answered REPLICA_NOT_AVAILABLE.  Asking for the directory a replica already is in cancels its move.

The copy reads ``replica.fetch.max.bytes`` at a time, yielding to other tasks after each chunk, and keeps to
``replica.alter.log.dirs.io.max.bytes.per.second`` over all moves (Kafka's ALTER_LOG_DIRS replication quota;
chunks are then a tenth of a second's worth).

Differences: the rate is set at start-up only; log directories never go offline, so KAFKA_STORAGE_ERROR
comes only from an I/O error while the future log is created (and a move failing later is abandoned, its
future log removed).  The coordinators' internal logs (one ``__consumer_offsets-0`` and so on for the broker
or cluster, in the first directory) are not replicas of this broker's replica manager: they are not listed
and do not move.  A broker keeping its logs in memory has one notional log directory, ``:memory:``
(:data:`MEMORY_LOG_DIR`), holding every partition, with unknown volume sizes (-1): sizes are the bytes the
logs hold, and no replica can move.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field

import trio

from ..common import TopicPartition
from ..protocol.errors import ErrorCode
from ..protocol.records import iter_batches
from .log import Log, OffsetOutOfRangeError
from .log.manager import FUTURE_DIR_SUFFIX, LogManager
from .partition import Partition
from .replica_manager import ReplicaManager

log = logging.getLogger(__name__)

# The one log directory a broker without a data dir reports (its logs are in memory).
MEMORY_LOG_DIR = ":memory:"
# Kafka refuses to move a replica whose future directory name would be longer than a file name may be.
_MAX_DIR_NAME = 255


@dataclass
class ReplicaLogInfo:
    """One partition's log in a log directory (DescribeLogDirs' partition entry)."""

    partition: int
    size: int
    offset_lag: int
    is_future: bool


@dataclass
class LogDirDescription:
    """One log directory as DescribeLogDirs reports it; ``topics`` holds only the partitions asked for."""

    path: str
    error: ErrorCode = ErrorCode.NONE
    topics: dict[str, list[ReplicaLogInfo]] = field(default_factory=dict)
    total_bytes: int = -1
    usable_bytes: int = -1


@dataclass
class _Move:
    """A move under way: the current log's truncation count when the future log was last compared."""

    truncations: int


class ReplicaAlterLogDirsManager:
    """Describes the broker's log directories and moves its replicas between them (see the module doc).

    ``cleaning(name)``: whether the log cleaner is compacting the log named ``<topic>-<partition>`` now.
    ``chunk_bytes``: how much the copy reads at a time before yielding; ``max_bytes_per_second``: the copy's
    rate over all moves (None: unlimited)."""

    def __init__(self, replica_manager: ReplicaManager, *, cleaning: Callable[[str], bool] = lambda name: False,
                 chunk_bytes: int = 1 << 20, max_bytes_per_second: float | None = None) -> None:
        self.replica_manager = replica_manager
        self.log_manager = replica_manager.log_manager
        self.cleaning = cleaning
        self.rate = max_bytes_per_second
        if self.rate is not None:
            chunk_bytes = min(chunk_bytes, int(self.rate / 10))
        self.chunk_bytes = max(chunk_bytes, 1)
        self.bytes_copied = 0
        self._moves: dict[tuple[str, int], _Move] = {}
        self._wakeup = trio.Event()
        self.moves_completed = 0
        self.moves_failed = 0

    # -- DescribeLogDirs (Kafka's ReplicaManager.describeLogDirs) -------------------------------------
    def describe_log_dirs(self, partitions: set[TopicPartition] | None) -> list[LogDirDescription]:
        """Each log directory with the current and future logs it holds of ``partitions`` (None: all)."""
        lm = self.log_manager

        def wanted(key: tuple[str, int]) -> bool:
            return partitions is None or TopicPartition(*key) in partitions

        if not lm.log_dirs:
            memory = LogDirDescription(MEMORY_LOG_DIR)
            for key, lg in sorted(lm.logs.items()):
                if wanted(key):
                    memory.topics.setdefault(key[0], []).append(self._info(key, lg, False))
            return [memory]
        out = []
        for d in lm.log_dirs:
            desc = LogDirDescription(d.path)
            try:
                usage = shutil.disk_usage(d.root)
            except OSError as exc:
                log.warning("log dir %s cannot be described: %s", d.path, exc)
                out.append(LogDirDescription(d.path, ErrorCode.KAFKA_STORAGE_ERROR))
                continue
            desc.total_bytes, desc.usable_bytes = usage.total, usage.free
            for logs, is_future in ((lm.logs, False), (lm.future_logs, True)):
                for key, lg in sorted(logs.items()):
                    if wanted(key) and lm.dir_of(lg) == d:
                        desc.topics.setdefault(key[0], []).append(self._info(key, lg, is_future))
            out.append(desc)
        return out

    def _info(self, key: tuple[str, int], lg: Log, is_future: bool) -> ReplicaLogInfo:
        return ReplicaLogInfo(key[1], lg.size_in_bytes, self._offset_lag(key, lg, is_future), is_future)

    def _offset_lag(self, key: tuple[str, int], lg: Log, is_future: bool) -> int:
        """Kafka's ``getLogEndOffsetLag``: a future log's distance to the current log's end; the current
        log's end's distance to its high watermark (0 but for a follower behind)."""
        current = self.log_manager.logs.get(key)
        if current is None:
            return -1
        if is_future:
            return current.log_end_offset - lg.log_end_offset
        return max(current.high_watermark - lg.log_end_offset, 0)

    # -- AlterReplicaLogDirs (Kafka's ReplicaManager.alterReplicaLogDirs) ---------------------------------
    def alter_replica_log_dirs(self, dirs: dict[TopicPartition, str]) -> dict[TopicPartition, ErrorCode]:
        """Move each replica to the log directory named (absolute path); an error per partition."""
        return {tp: self._alter(tp, path) for tp, path in dirs.items()}

    def _alter(self, tp: TopicPartition, path: str) -> ErrorCode:
        lm, rm = self.log_manager, self.replica_manager
        topic, index = tp
        if len(f"{topic}-{index}.{'0' * 32}{FUTURE_DIR_SUFFIX}") > _MAX_DIR_NAME:
            return ErrorCode.INVALID_TOPIC_EXCEPTION
        part = rm.get(topic, index)
        if not lm.log_dirs:  # in memory: the notional directory is the only one, and every replica is in it
            if path != MEMORY_LOG_DIR:
                return ErrorCode.LOG_DIR_NOT_FOUND
            return ErrorCode.NONE if part is not None else self._not_hosted(topic, index)
        log_dir = lm.log_dir(path)
        if log_dir is None:
            return ErrorCode.LOG_DIR_NOT_FOUND
        future = lm.get_future(topic, index)
        if part is not None and future is not None and lm.dir_of(future) != log_dir:
            self._stop(tp)  # a move elsewhere (or back) replaces the one under way
        lm.maybe_update_preferred_log_dir(topic, index, log_dir)
        if part is None:
            return self._not_hosted(topic, index)
        if lm.dir_of(part.log) == log_dir or lm.get_future(topic, index) is not None:
            return ErrorCode.NONE
        try:
            lm.create_future_log(topic, index, log_dir, part.log.config)
        except OSError as exc:
            log.warning("cannot create the future log of %s-%d in %s: %s", topic, index, path, exc)
            return ErrorCode.KAFKA_STORAGE_ERROR
        self._moves[(topic, index)] = _Move(part.log.truncations)
        log.info("moving the replica of %s-%d from %s to %s", topic, index, _dir_name(lm, part.log), log_dir.path)
        self._wakeup.set()
        return ErrorCode.NONE

    def _not_hosted(self, topic: str, index: int) -> ErrorCode:
        """Kafka's answer for a replica this broker does not have: REPLICA_NOT_AVAILABLE for a partition
        that exists (it may be created here later), UNKNOWN_TOPIC_OR_PARTITION otherwise."""
        meta = self.replica_manager.metadata.get_topic(topic)
        if meta is not None and 0 <= index < meta.num_partitions:
            return ErrorCode.REPLICA_NOT_AVAILABLE
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    def _stop(self, tp: TopicPartition) -> None:
        self._moves.pop((tp.topic, tp.partition), None)
        self.log_manager.delete_future_log(tp.topic, tp.partition)

    # -- the copy (Kafka's ReplicaAlterLogDirsThread) ----------------------------------------------------
    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Copy and swap until cancelled; moves found at start-up (future logs loaded) resume."""
        task_status.started()
        while True:
            progressed = False
            for key in list(self.log_manager.future_logs):
                copied = self.bytes_copied
                progressed = self.step(key) or progressed
                copied = self.bytes_copied - copied
                await trio.sleep(copied / self.rate if self.rate and copied else 0)
            if progressed:
                continue
            # Nothing to copy: no move, or only moves waiting for a cleaning to end (checked again soon).
            with trio.move_on_after(0.05 if self.log_manager.future_logs else float("inf")):
                await self._wakeup.wait()
            self._wakeup = trio.Event()

    def step(self, key: tuple[str, int]) -> bool:
        """One piece of work on one move: copy a chunk, truncate, or swap; False when it must wait."""
        lm = self.log_manager
        future = lm.future_logs.get(key)
        if future is None:
            self._moves.pop(key, None)
            return False
        part = self.replica_manager.get(*key)
        if part is None or lm.logs.get(key) is not part.log:  # the replica is gone: so is its move
            log.info("abandoning the move of %s-%d: the replica is gone", *key)
            self._stop(TopicPartition(*key))
            return True
        try:
            return self._step(key, part, future)
        except (OSError, OffsetOutOfRangeError, ValueError) as exc:
            self.moves_failed += 1
            log.warning("moving the replica of %s-%d failed, the move is abandoned: %s", key[0], key[1], exc)
            self._stop(TopicPartition(*key))
            return True

    def _step(self, key: tuple[str, int], part: Partition, future: Log) -> bool:
        current = part.log
        move = self._moves.get(key)
        if move is None:  # a move found at start-up: first make sure the future log agrees with the current one
            move = self._moves[key] = _Move(-1)
        if self.cleaning(f"{key[0]}-{key[1]}"):
            # A cleaning that began before the move replaces segments of the current log and then advances
            # the cleaner checkpoint: nothing is copied (or swapped) until it is done, so that the future log
            # holds only what that checkpoint describes.  No new cleaning starts while the partition moves.
            return False
        if move.truncations != current.truncations or future.log_end_offset > current.log_end_offset:
            _truncate_to_common_epoch(current, future)
            move.truncations = current.truncations
        if future.log_end_offset < current.log_start_offset and future.log_end_offset != _first_batch_base(current):
            _restart(current, future)  # retention or DeleteRecords went past it: start again there
            return True
        if future.log_end_offset < current.log_end_offset:
            # The future log may end at the base of the batch holding the log start (DeleteRecords inside a
            # batch), below the log start: the read starts at the log start, and returns that batch.
            got = current.read(max(future.log_end_offset, current.log_start_offset), self.chunk_bytes,
                               min_one_batch=True)
            for chunk in got.chunks:
                future.append_as_follower(chunk)
            self.bytes_copied += got.size
            return True
        old_dir = _dir_name(self.log_manager, current)
        self.replica_manager.replace_current_with_future(part)
        self._moves.pop(key, None)
        self.moves_completed += 1
        log.info("the replica of %s-%d moved from %s to %s", key[0], key[1], old_dir,
                 _dir_name(self.log_manager, part.log))
        return True

    def max_lag(self) -> int:
        """The largest offset lag of a future replica behind its current one (0 without moves)."""
        lm = self.log_manager
        return max((lm.logs[key].log_end_offset - future.log_end_offset for key, future in lm.future_logs.items()
                    if key in lm.logs), default=0)

    def metrics(self) -> dict[str, float]:
        """Kafka's ``ReplicaAlterLogDirsManager`` gauges (``FailedPartitionsCount`` counts the moves abandoned
        since start-up) and the bytes copied."""
        tag = ",clientId=ReplicaAlterLogDirs"
        prefix = "kafka.server:type=ReplicaAlterLogDirsManager,name="
        return {prefix + "MaxLag" + tag: self.max_lag(), prefix + "FailedPartitionsCount" + tag: self.moves_failed,
                prefix + "DeadThreadCount" + tag: 0,
                "kafka.server:type=FetcherStats,name=BytesTotal,clientId=ReplicaAlterLogDirsThread-0":
                    self.bytes_copied}


def _dir_name(lm: LogManager, lg: Log) -> str:
    d = lm.dir_of(lg)
    return d.path if d is not None else MEMORY_LOG_DIR


def _first_batch_base(current: Log) -> int:
    """The base offset of the current log's batch holding its log start offset (below the log start when
    DeleteRecords or retention put it inside a batch); the log start offset when the log has no batch there."""
    got = current.read(current.log_start_offset, 1, min_one_batch=True)
    for chunk in got.chunks:
        for h, _ in iter_batches(chunk, check_crc=False):
            return h.base_offset
    return current.log_start_offset


def _restart(current: Log, future: Log) -> None:
    """Empty the future log and start it at the current log's first batch (the one holding its log start)."""
    future.truncate_fully_and_start_at(_first_batch_base(current))


def _truncate_to_common_epoch(current: Log, future: Log) -> None:
    """Truncate the future log to where it and the current log agree, by leader epoch (Kafka's
    OffsetsForLeaderEpoch truncation, against the local replica); no epochs to compare: start again."""
    while future.log_end_offset > future.log_start_offset:
        epoch = future.latest_epoch()
        if epoch < 0:
            _restart(current, future)
            return
        _, end = current.end_offset_for_epoch(epoch)
        if end < 0:
            _restart(current, future)
            return
        target = min(future.log_end_offset, end, current.log_end_offset)
        if target >= future.log_end_offset:
            return
        future.truncate_to(target)


__all__ = ["LogDirDescription", "MEMORY_LOG_DIR", "ReplicaAlterLogDirsManager", "ReplicaLogInfo"]
