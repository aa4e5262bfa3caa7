"""All partition logs of the broker (Kafka's ``LogManager``), across its log directories.

Each log directory (Kafka's ``log.dirs``) is a :class:`LogDir`: the absolute path DescribeLogDirs reports
and AlterReplicaLogDirs names, and the directory its partition directories live in (a broker's are in
``<dir>/logs``, beside the state the first directory also holds).  A new partition goes to the directory
with the fewest logs (Kafka's ``nextLogDirs``) unless AlterReplicaLogDirs asked for one first (Kafka's
preferred log dir).  A replica being moved between directories has a *future* log,
``<topic>-<partition>.<uuid>-future`` in its destination, which
:class:`~minikafka.broker.replica_alter_log_dirs.ReplicaAlterLogDirsManager` fills from the current log
until :meth:`LogManager.replace_current_with_future` swaps it in.

Crash safety of that swap: the current log's directory is first renamed ``<topic>-<partition>.<uuid>-delete``,
then the future's renamed to ``<topic>-<partition>``, then the old one removed.  Loading finishes what a
crash interrupted: a future log beside a current one is kept (the move resumes, as Kafka's
``maybeAddLogDirFetchers``), a future log with no current one takes its place, a ``-delete`` directory goes
once the partition has a current log (and becomes it again when it has none).  An error before the future
directory's rename undoes the swap (the current directory put back and its log reopened); after that rename
the future log is the partition's, whatever fails.

Differences: no per-directory recovery threads, checkpoint files or directory failure handling (a log
directory is never offline); no async deletion (a deleted topic's directories are removed at once rather
than renamed ``*-delete``); retention is driven by the broker calling ``enforce_retention`` periodically;
two current logs of one partition found at start-up is a start-up error, as Kafka's "Duplicate log
directories".
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ...common import SYSTEM_CLOCK, Clock
from ..config import StartupError
from .epoch import CHECKPOINT_FILE as EPOCH_CHECKPOINT_FILE
from .unified import OFFSETS_CHECKPOINT_FILE, Log, LogConfig

log = logging.getLogger(__name__)

FUTURE_DIR_SUFFIX = "-future"
DELETE_DIR_SUFFIX = "-delete"
# Kafka's FutureDirPattern / DeleteDirPattern: <topic>-<partition>.<32 hex digits>-future|-delete
_SUFFIXED_DIR = re.compile(r"^(\S+)-(\d+)\.([0-9a-f]{32})(-future|-delete)$")


def parse_log_dir_name(name: str) -> tuple[str, int] | None:
    """``"<topic>-<partition>"`` -> ``(topic, partition)``, None if it is not one."""
    topic, sep, part = name.rpartition("-")
    if not sep or not topic or not part.isdigit():
        return None
    return topic, int(part)


def parse_suffixed_dir_name(name: str) -> tuple[str, int, str] | None:
    """``"<topic>-<partition>.<uuid>-future"`` (or ``-delete``) -> ``(topic, partition, suffix)``."""
    m = _SUFFIXED_DIR.match(name)
    return None if m is None else (m.group(1), int(m.group(2)), m.group(4))


def suffixed_dir_name(topic: str, partition: int, suffix: str) -> str:
    """Kafka's ``logFutureDirName`` / ``logDeleteDirName``."""
    return f"{topic}-{partition}.{uuid.uuid4().hex}{suffix}"


@dataclass(frozen=True)
class LogDir:
    """One log directory: ``path`` as the protocol names it (absolute), partition directories in ``root``."""

    path: str
    root: Path

    @classmethod
    def of(cls, directory: Path, root: Path | None = None) -> "LogDir":
        """The log directory ``directory`` (reported absolute) keeping its partitions in ``root``
        (``directory`` itself by default)."""
        return cls(os.path.abspath(directory), Path(root if root is not None else directory))


class LogManager:
    """Creates, loads, retains, moves and deletes ``Log`` objects, in memory or under log directories.

    ``LogManager(data_dir)`` keeps partitions directly in ``data_dir`` (one log directory); ``log_dirs``
    names several (the first is ``data_dir``, where the cleaner keeps its checkpoint)."""

    def __init__(self, data_dir: Path | None, clock: Clock = SYSTEM_CLOCK, *,
                 log_dirs: Sequence[LogDir] | None = None) -> None:
        if log_dirs is None:
            log_dirs = [LogDir.of(Path(data_dir))] if data_dir is not None else []
        self.log_dirs: list[LogDir] = list(log_dirs)
        self.data_dir: Path | None = self.log_dirs[0].root if self.log_dirs else None
        self.clock = clock
        for d in self.log_dirs:
            d.root.mkdir(parents=True, exist_ok=True)
        self.logs: dict[tuple[str, int], Log] = {}
        self.future_logs: dict[tuple[str, int], Log] = {}  # replicas being moved to another log dir
        # Where AlterReplicaLogDirs asked a partition not hosted yet to be created (Kafka's preferredLogDirs).
        self.preferred_dirs: dict[tuple[str, int], LogDir] = {}

    # -- log directories -------------------------------------------------------------------
    def log_dir(self, path: str) -> LogDir | None:
        """The log directory an absolute path names (as AlterReplicaLogDirs gives it), None if none."""
        if not os.path.isabs(path):
            return None
        wanted = os.path.normpath(path)
        return next((d for d in self.log_dirs if os.path.normpath(d.path) == wanted), None)

    def dir_of(self, lg: Log) -> LogDir | None:
        """The log directory holding ``lg`` (None in memory)."""
        if lg.directory is None:
            return None
        parent = lg.directory.parent
        return next((d for d in self.log_dirs if d.root == parent), None)

    def next_log_dirs(self) -> list[LogDir]:
        """Log directories by how many logs (current and future) they hold, fewest first; ties in
        configured order (Kafka's ``nextLogDirs``)."""
        counts = {d.root: 0 for d in self.log_dirs}
        for lg in (*self.logs.values(), *self.future_logs.values()):
            if lg.directory is not None and lg.directory.parent in counts:
                counts[lg.directory.parent] += 1
        return sorted(self.log_dirs, key=lambda d: counts[d.root])

    def maybe_update_preferred_log_dir(self, topic: str, partition: int, log_dir: LogDir) -> None:
        """Remember where to create a partition not hosted yet (Kafka's ``maybeUpdatePreferredLogDir``);
        nothing when its current or future log already is there."""
        key = (topic, partition)
        if any(lg is not None and self.dir_of(lg) == log_dir for lg in (self.logs.get(key), self.future_logs.get(key))):
            return
        self.preferred_dirs[key] = log_dir

    # -- logs --------------------------------------------------------------------------------
    def get_or_create(self, topic: str, partition: int, config: LogConfig) -> Log:
        key = (topic, partition)
        lg = self.logs.get(key)
        if lg is None:
            directory = None
            if self.log_dirs:
                target = self.preferred_dirs.pop(key, None) or self.next_log_dirs()[0]
                directory = target.root / f"{topic}-{partition}"
            lg = Log(topic, partition, config, directory, clock=self.clock)
            self.logs[key] = lg
            if directory is not None:
                log.info("created log for partition %s-%d in %s", topic, partition, directory)
        return lg

    def get(self, topic: str, partition: int) -> Log | None:
        return self.logs.get((topic, partition))

    def get_future(self, topic: str, partition: int) -> Log | None:
        return self.future_logs.get((topic, partition))

    def partitions(self, topic: str) -> list[int]:
        return sorted(p for t, p in self.logs if t == topic)

    def delete_topic(self, topic: str) -> None:
        """Remove every log of ``topic``: future logs first, as :meth:`delete_partition`, since loading makes
        a future log with no current one the partition's log (a crash in between must not bring a copy back)."""
        for key in [k for k in self.future_logs if k[0] == topic]:
            self.future_logs.pop(key).delete()
        for key in [k for k in self.logs if k[0] == topic]:
            self.logs.pop(key).delete()
        for key in [k for k in self.preferred_dirs if k[0] == topic]:
            del self.preferred_dirs[key]
        strays = []  # directories of logs never opened in this process
        for d in self.log_dirs:
            for child in d.root.iterdir():
                parsed = parse_log_dir_name(child.name) or parse_suffixed_dir_name(child.name)
                if child.is_dir() and parsed is not None and parsed[0] == topic:
                    strays.append(child)
        for child in sorted(strays, key=lambda c: not c.name.endswith(FUTURE_DIR_SUFFIX)):  # futures first
            shutil.rmtree(child, ignore_errors=True)

    def delete_partition(self, topic: str, partition: int) -> None:
        """Remove one partition's current and future logs, also one never opened in this process (its
        replica left this broker: Kafka's StopReplica with deletePartition)."""
        key = (topic, partition)
        self.delete_future_log(topic, partition)
        self.preferred_dirs.pop(key, None)
        lg = self.logs.pop(key, None)
        if lg is not None:
            lg.delete()
        for d in self.log_dirs:
            stray = d.root / f"{topic}-{partition}"
            if stray.is_dir():
                shutil.rmtree(stray, ignore_errors=True)

    # -- moving a replica between log directories (KIP-113) --------------------------------------
    def create_future_log(self, topic: str, partition: int, log_dir: LogDir, config: LogConfig) -> Log:
        """The future log of a replica moving to ``log_dir`` (Kafka's ``getOrCreateLog(isFuture = true)``):
        empty, in ``<topic>-<partition>.<uuid>-future``; the one there already if the move is under way."""
        key = (topic, partition)
        existing = self.future_logs.get(key)
        if existing is not None:
            return existing
        current = self.logs.get(key)
        if current is None or self.dir_of(current) == log_dir:
            raise ValueError(f"no future log for {topic}-{partition} in its current log dir {log_dir.path}")
        lg = Log(topic, partition, config, log_dir.root / suffixed_dir_name(topic, partition, FUTURE_DIR_SUFFIX),
                 auto_advance_hw=False, clock=self.clock)
        self.future_logs[key] = lg
        self.preferred_dirs.pop(key, None)
        log.info("created future log for partition %s-%d in %s", topic, partition, lg.directory)
        return lg

    def delete_future_log(self, topic: str, partition: int) -> None:
        """Abandon a move: remove the future log (Kafka's ``removeFutureLocalReplica``)."""
        lg = self.future_logs.pop((topic, partition), None)
        if lg is not None:
            lg.delete()
            log.info("removed future log of partition %s-%d", topic, partition)

    def replace_current_with_future(self, topic: str, partition: int) -> Log:
        """Swap a caught-up future log in for the current one (Kafka's ``replaceCurrentWithFutureLog``): the
        caller made sure both end at the same offset.  The new current log keeps the old one's log start
        offset, high watermark, leader epochs and aborted-transaction index; the old one's directory goes.

        An error before the commit point (the rename of the future directory) leaves the partition as it was:
        the current log in its directory, open (reopened if it had been closed: then ``self.logs`` holds the
        new object), and the future log closed but still in ``future_logs`` for the caller to abandon.  After
        the commit point the future log is the partition's log, whatever fails: it leaves ``future_logs``
        first, so no caller deletes it (an error opening it leaves the partition unusable until a restart,
        which loads it)."""
        key = (topic, partition)
        src, dst = self.logs[key], self.future_logs[key]
        assert src.directory is not None and dst.directory is not None
        if src.log_end_offset != dst.log_end_offset:
            raise ValueError(f"future log of {topic}-{partition} ends at {dst.log_end_offset}, "
                             f"the current one at {src.log_end_offset}")
        src_dir, future_dir = src.directory, dst.directory
        src.flush()  # its offsets checkpoint, as closing would write it (no append comes before the swap)
        dst.close()
        for name in (EPOCH_CHECKPOINT_FILE, OFFSETS_CHECKPOINT_FILE):  # the current log's, exactly
            source, target = src_dir / name, future_dir / name
            if source.exists():
                tmp = target.with_name(name + ".tmp")
                shutil.copyfile(source, tmp)
                os.replace(tmp, target)
            else:
                target.unlink(missing_ok=True)
        doomed = src_dir.with_name(suffixed_dir_name(topic, partition, DELETE_DIR_SUFFIX))
        final = future_dir.with_name(f"{topic}-{partition}")
        set_aside = False
        try:
            src.close()
            os.rename(src_dir, doomed)
            set_aside = True
            os.rename(future_dir, final)  # the commit point
        except BaseException:
            self._restore_current(key, src, src_dir, doomed if set_aside else None)
            raise
        del self.future_logs[key]
        new = Log(topic, partition, src.config, final, auto_advance_hw=src.auto_advance_hw, clock=self.clock)
        new.txn_index = src.txn_index
        self.logs[key] = new
        shutil.rmtree(doomed, ignore_errors=True)
        log.info("the log of partition %s-%d moved from %s to %s", topic, partition, src_dir.parent, final.parent)
        return new

    def _restore_current(self, key: tuple[str, int], src: Log, src_dir: Path, doomed: Path | None) -> None:
        """Undo a swap that failed before its commit point: the current directory back in place (from
        ``doomed`` if it was set aside) and the current log reopened there, in ``self.logs``."""
        directory = src_dir
        if doomed is not None:
            try:
                os.rename(doomed, src_dir)
            except OSError as exc:  # it stays set aside (start-up makes it the partition's log again)
                log.error("cannot put %s back as %s: %s", doomed, src_dir, exc)
                directory = doomed
        for seg in src.segments:  # whatever a failed close left open
            with contextlib.suppress(OSError):
                seg.close()
        again = Log(key[0], key[1], src.config, directory, auto_advance_hw=src.auto_advance_hw, clock=self.clock)
        again.txn_index = src.txn_index
        self.logs[key] = again
        log.warning("the swap of partition %s-%d failed: its log stays in %s", key[0], key[1], directory)

    # -- start-up ---------------------------------------------------------------------------
    def load_existing(self, configs: dict[str, LogConfig],
                      replicated: set[tuple[str, int]] | frozenset = frozenset()) -> None:
        """Open and recover every ``<topic>-<partition>`` directory in every log directory (and the future
        logs of moves under way); topics missing from *configs* get the default ``LogConfig``.  Logs in
        *replicated* keep the checkpointed high watermark (their leader advances it) instead of HW = LEO."""
        if not self.log_dirs:
            return
        futures: list[tuple[tuple[str, int], Path]] = []
        doomed: list[tuple[tuple[str, int], Path]] = []
        for d in self.log_dirs:
            for child in sorted(d.root.iterdir()):
                if not child.is_dir():
                    continue
                suffixed = parse_suffixed_dir_name(child.name)
                if suffixed is not None:
                    key = (suffixed[0], suffixed[1])
                    (futures if suffixed[2] == FUTURE_DIR_SUFFIX else doomed).append((key, child))
                    continue
                parsed = parse_log_dir_name(child.name)
                if parsed is None:
                    continue
                if parsed in self.logs:
                    other = self.logs[parsed].directory
                    if other is not None and other != child:
                        raise StartupError(f"Duplicate log directories for {parsed[0]}-{parsed[1]} are found in "
                                           f"both {other} and {child}: remove one of them")
                    continue
                self.logs[parsed] = self._open(parsed, child, configs, replicated)
        for key, path in futures:
            current = self.logs.get(key)
            if key in self.future_logs or (current is not None and current.directory is not None
                                           and current.directory.parent == path.parent):
                log.warning("removing future log %s: the partition has one already or is in that log dir", path)
                shutil.rmtree(path, ignore_errors=True)
            elif key in self.logs:  # a move under way: resumed
                self.future_logs[key] = self._open(key, path, configs, frozenset(), future=True)
            else:  # the swap was interrupted after the current log was set aside: the future log replaces it
                final = path.with_name(f"{key[0]}-{key[1]}")
                os.rename(path, final)
                log.info("completed the move of partition %s-%d to %s", key[0], key[1], path.parent)
                self.logs[key] = self._open(key, final, configs, replicated)
        for key, path in doomed:
            if key in self.logs:
                shutil.rmtree(path, ignore_errors=True)
            else:  # set aside by a swap that never found its future log: it is the partition's log again
                final = path.with_name(f"{key[0]}-{key[1]}")
                os.rename(path, final)
                log.warning("restored %s as the log of partition %s-%d", final, key[0], key[1])
                self.logs[key] = self._open(key, final, configs, replicated)
        log.info("loaded %d log(s) (%d being moved) from %s", len(self.logs), len(self.future_logs),
                 ", ".join(d.path for d in self.log_dirs))

    def _open(self, key: tuple[str, int], directory: Path, configs: dict[str, LogConfig],
              replicated: set[tuple[str, int]] | frozenset, future: bool = False) -> Log:
        topic, partition = key
        return Log(topic, partition, configs.get(topic) or LogConfig(), directory,
                   auto_advance_hw=not future and key not in replicated, clock=self.clock)

    # -- upkeep -------------------------------------------------------------------------------
    def enforce_retention(self, now_ms: int) -> int:
        return sum(lg.enforce_retention(now_ms) for lg in self.logs.values())

    def flush_all(self, fsync: bool = False) -> None:
        for lg in (*self.logs.values(), *self.future_logs.values()):
            lg.flush(fsync)

    def close_all(self) -> None:
        for lg in (*self.logs.values(), *self.future_logs.values()):
            lg.close()
        self.logs.clear()
        self.future_logs.clear()
