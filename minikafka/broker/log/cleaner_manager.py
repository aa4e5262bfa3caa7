"""The broker's log cleaner service (Kafka's ``LogCleaner`` and ``LogCleanerManager``).

:class:`LogCleanerManager` keeps what Kafka's does: the cleaner checkpoint (each compacted log's
first dirty offset, in ``cleaner-offset-checkpoint`` beside the logs), the logs being cleaned, and
the choice of the filthiest log: the one with the largest dirty ratio above its
``min.cleanable.dirty.ratio``, or any whose dirty data is older than ``max.compaction.lag.ms``. Its
cleanable section ends at the first of: the last stable offset, the active segment, the first segment
younger than ``min.compaction.lag.ms``.

:class:`LogCleaner` runs ``log.cleaner.threads`` concurrent cleanings as Trio tasks, each with a cleaning
process of its own for logs in a data dir (another core, as Kafka's cleaner threads; ``minikafka.log.
cleaner.processes=false`` keeps them in the broker) and a worker thread for logs in memory; every swap is
on the broker's thread; it sleeps
``log.cleaner.backoff.ms`` when nothing is cleanable. Logs come from sources
(:meth:`LogCleaner.add_source`): the broker's partitions, and the coordinators' internal logs.

Deliberate differences from Kafka: one checkpoint file per broker log directory, keyed by the log's
name; a log that fails to clean is logged and retried after the backoff (Kafka marks it uncleanable
until restart, and counts it in ``uncleanable-partitions-count``, as this does while it keeps failing).
"""

from __future__ import annotations

import logging
import math
import os
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import trio

from minikafka.protocol.records import CorruptRecordError

from ...common import SYSTEM_CLOCK, Clock
from .cleaner import (Cleaner, CleanerStats, CleanedTransactionMetadata, CleaningJob, CleaningOutcome,
                      LogCleaningAbortedError, LogToClean, OffsetMap, Throttler, group_segments_by_size)
from .cleaning_process import CleaningProcess, CleaningProcessError
from .index import IndexCorruptError
from .segment import FileSegment, Segment, remove_segment_files
from .txn_index import AbortedTxn
from .unified import Log

log = logging.getLogger(__name__)

CHECKPOINT_FILE = "cleaner-offset-checkpoint"
_LONG_MAX = (1 << 63) - 1


class CleanerTarget(NamedTuple):
    """A compacted log and what the cleaner must know of its partition: how far it is stable, and each
    active producer's last data offset (-1: none) and epoch, whose batches must stay."""

    name: str
    log: Log
    last_stable_offset: Callable[[], int]
    active_producers: Callable[[], dict[int, tuple[int, int]]]


@dataclass
class CleanerConfig:
    """Kafka's ``CleanerConfig`` (the ``log.cleaner.*`` broker keys)."""

    enable: bool = True
    threads: int = 1
    backoff_ms: int = 15000
    dedupe_buffer_size: int = 128 << 20
    load_factor: float = 0.9
    io_max_bytes_per_second: float = math.inf
    processes: bool = True  # clean logs in a data dir in cleaning processes (minikafka's), not threads


class LogCleanerManager:
    """Checkpoints, in-progress cleanings and the choice of the next log (Kafka's ``LogCleanerManager``)."""

    def __init__(self, checkpoint_dir: Path | None) -> None:
        self.checkpoint_path = checkpoint_dir / CHECKPOINT_FILE if checkpoint_dir is not None else None
        self.checkpoints: dict[str, int] = self._read_checkpoints()
        self.in_progress: set[str] = set()
        self.failing: dict[str, int] = {}  # name -> bytes of a log whose last cleaning failed
        self.dirtiest_ratio = 0.0
        self.time_of_last_run_ms = -1
        self.max_compaction_delay_ms = 0

    # -- checkpoints ------------------------------------------------------------------------
    def _read_checkpoints(self) -> dict[str, int]:
        out: dict[str, int] = {}
        if self.checkpoint_path is None or not self.checkpoint_path.exists():
            return out
        try:
            lines = self.checkpoint_path.read_text().splitlines()
            if lines[0].strip() != "0":
                raise ValueError(f"version {lines[0]!r}")
            for line in lines[2:2 + int(lines[1])]:
                topic, part, offset = line.rsplit(" ", 2)
                out[f"{topic}-{int(part)}"] = int(offset)
        except (ValueError, IndexError) as exc:
            log.warning("%s: unreadable (%s), cleaning from the log starts", self.checkpoint_path, exc)
            return {}
        return out

    def _write_checkpoints(self) -> None:
        if self.checkpoint_path is None:
            return
        lines = ["0", str(len(self.checkpoints))]
        for name, offset in sorted(self.checkpoints.items()):
            topic, _, part = name.rpartition("-")
            lines.append(f"{topic} {part} {offset}")
        tmp = self.checkpoint_path.with_name(self.checkpoint_path.name + ".tmp")
        self.checkpoint_path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text("\n".join(lines) + "\n")
        os.replace(tmp, self.checkpoint_path)

    def update_checkpoint(self, name: str, offset: int | None) -> None:
        if offset is None:
            self.checkpoints.pop(name, None)
        else:
            self.checkpoints[name] = offset
        self._write_checkpoints()

    # -- choosing a log (grabFilthiestCompactedLog) -------------------------------------------
    def cleanable_offsets(self, target: CleanerTarget, now_ms: int) -> tuple[int, int]:
        """``(first dirty offset, first uncleanable offset)`` (Kafka ``cleanableOffsets``)."""
        lg = target.log
        start = lg.log_start_offset
        first_dirty = self.checkpoints.get(target.name, start)
        if lg.truncated_to is not None:  # Kafka's maybeTruncateCheckpoint
            first_dirty = min(first_dirty, lg.truncated_to)
            lg.truncated_to = None
        if first_dirty < start or first_dirty > lg.log_end_offset:
            if target.name in self.checkpoints:
                log.info("%s: cleaner checkpoint %d outside [%d, %d], cleaning from the log start", target.name,
                         first_dirty, start, lg.log_end_offset)
            first_dirty = start
            self.update_checkpoint(target.name, start)
        bounds = [target.last_stable_offset(), lg.active_segment.base_offset]
        lag = max(lg.config.min_compaction_lag_ms, 0)
        if lag > 0:
            for seg in lg.segments[:-1]:
                if seg.next_offset > first_dirty and seg.largest_timestamp > now_ms - lag:
                    bounds.append(seg.base_offset)
                    break
        return first_dirty, max(first_dirty, min(bounds))

    def log_to_clean(self, target: CleanerTarget, now_ms: int) -> LogToClean:
        lg = target.log
        first_dirty, uncleanable = self.cleanable_offsets(target, now_ms)
        segments = lg.segments
        i = max(lg._segment_index(uncleanable), 0)
        first_uncleanable_seg_base = segments[min(i, len(segments) - 1)].base_offset
        lo = min(first_dirty, first_uncleanable_seg_base)
        cleanable = sum(s.size for s in segments if lo <= s.base_offset < first_uncleanable_seg_base)
        clean = sum(s.size for s in segments if s.base_offset < first_dirty and s.next_offset <= first_dirty)
        delay = self._compaction_delay(lg, first_dirty, now_ms)
        self.max_compaction_delay_ms = max(self.max_compaction_delay_ms, delay)
        # As Kafka's calculateCleanableBytes: the cleaning stops at the start of the segment holding the bound.
        return LogToClean(target.name, lg, first_dirty, first_uncleanable_seg_base, clean, cleanable,
                          need_compaction_now=delay > 0)

    @staticmethod
    def _compaction_delay(lg: Log, first_dirty: int, now_ms: int) -> int:
        """How far the oldest dirty data is past ``max.compaction.lag.ms`` (Kafka ``maxCompactionDelay``)."""
        lag = max(lg.config.max_compaction_lag_ms, 0)
        if lag >= _LONG_MAX:
            return 0
        firsts = [s.rolling_timestamp for s in lg.segments[:-1]
                  if s.next_offset > first_dirty and s.rolling_timestamp > 0]
        if not firsts:
            return 0
        until = now_ms - lag
        earliest = min(firsts)
        return until - earliest if earliest < until else 0

    def grab_filthiest(self, targets: Iterable[CleanerTarget], now_ms: int) -> LogToClean | None:
        self.time_of_last_run_ms = now_ms
        self.max_compaction_delay_ms = 0
        dirty = []
        for t in targets:
            if not t.log.config.compact or t.name in self.in_progress or t.log.num_segments < 2:
                continue
            ltc = self.log_to_clean(t, now_ms)
            if ltc.total_bytes > 0:
                dirty.append((ltc, t))
        self.dirtiest_ratio = max((ltc.cleanable_ratio for ltc, _ in dirty), default=0.0)
        cleanable = [(ltc, t) for ltc, t in dirty
                     if (ltc.need_compaction_now and ltc.cleanable_bytes > 0)
                     or ltc.cleanable_ratio > ltc.log.config.min_cleanable_dirty_ratio]
        if not cleanable:
            return None
        ltc, _ = max(cleanable, key=lambda pair: pair[0].cleanable_ratio)
        self.in_progress.add(ltc.name)
        return ltc

    def done_cleaning(self, name: str, end_offset: int | None) -> None:
        self.in_progress.discard(name)
        if end_offset is not None:
            self.update_checkpoint(name, end_offset)


def _raise_if_set(stopping: threading.Event) -> Callable[[], None]:
    def check_done() -> None:
        if stopping.is_set():
            raise LogCleaningAbortedError("the cleaner is stopping")
    return check_done


@dataclass
class _Thread:
    """One cleaner "thread" (a Trio task) and its last cleaning's figures."""

    cleaner: Cleaner
    last_stats: CleanerStats | None = None
    process: CleaningProcess = field(default_factory=CleaningProcess)


class LogCleaner:
    """Runs the cleanings of one broker (Kafka ``LogCleaner`` with its ``CleanerThread``s)."""

    def __init__(self, config: CleanerConfig, *, checkpoint_dir: Path | None = None,
                 clock: Clock = SYSTEM_CLOCK) -> None:
        self.config = config
        self.clock = clock
        self.manager = LogCleanerManager(checkpoint_dir)
        self._sources: list[Callable[[], Iterable[CleanerTarget]]] = []
        self._stopping = threading.Event()
        memory = config.dedupe_buffer_size // max(config.threads, 1)
        self.throttler = Throttler(config.io_max_bytes_per_second)
        self.threads = [_Thread(Cleaner(i, OffsetMap(memory, config.load_factor), _raise_if_set(self._stopping),
                                        self.throttler))
                        for i in range(max(config.threads, 0))]
        self._wakeup = trio.Event()
        self._finished = trio.Event()  # set (and replaced) whenever a cleaning ends
        self.cleanings = 0  # completed cleanings, for tests and metrics
        self.failures = 0

    def add_source(self, fn: Callable[[], Iterable[CleanerTarget]]) -> None:
        """Logs to clean: ``fn`` is asked on every pass, so the set may change."""
        self._sources.append(fn)

    def close(self) -> None:
        """Stop the cleaning processes (``run`` does it when cancelled)."""
        for th in self.threads:
            th.process.close()

    def forget_topic(self, topic: str) -> None:
        """Drop a deleted topic's checkpoints."""
        m = self.manager
        gone = [name for name in m.checkpoints if name.rpartition("-")[0] == topic]
        for name in gone:
            del m.checkpoints[name]
            m.failing.pop(name, None)
        if gone:
            m._write_checkpoints()

    def forget_log(self, name: str) -> None:
        """Drop one deleted log's checkpoint (``"<topic>-<partition>"``: a replica moved away), as Kafka's
        ``asyncDelete`` updates the cleaner checkpoints; a replica added back later is cleaned from its start."""
        m = self.manager
        m.failing.pop(name, None)
        if name in m.checkpoints:
            m.update_checkpoint(name, None)

    def targets(self) -> list[CleanerTarget]:
        return [t for fn in self._sources for t in fn()]

    # -- running ------------------------------------------------------------------------------
    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """The cleaner tasks, until cancelled (nothing when ``log.cleaner.enable`` is false)."""
        if not self.config.enable or not self.threads:
            task_status.started()
            await trio.sleep_forever()
        stopping = self._stopping = threading.Event()  # this run's: threads a stopped run left see theirs
        for th in self.threads:
            th.cleaner.check_done = _raise_if_set(stopping)
        try:
            async with trio.open_nursery() as nursery:
                for th in self.threads:
                    nursery.start_soon(self._loop, th)
                task_status.started()
        finally:
            stopping.set()
            self.close()

    async def _loop(self, th: _Thread) -> None:
        while True:
            cleaned = await self.clean_once(th)
            if not cleaned:
                with trio.move_on_after(self.config.backoff_ms / 1000):
                    await self._wakeup.wait()
                if self._wakeup.is_set():
                    self._wakeup = trio.Event()

    def wake(self) -> None:
        """Look for cleanable logs now rather than after the backoff."""
        self._wakeup.set()

    async def clean_once(self, th: _Thread | None = None) -> bool:
        """One cleaning of the filthiest log, if any is cleanable; True when one was cleaned."""
        th = th or self.threads[0]
        now = self.clock.time_ms()
        targets = {t.name: t for t in self.targets()}
        ltc = self.manager.grab_filthiest(targets.values(), now)
        if ltc is None:
            return False
        end: int | None = None
        try:
            end = await self._clean(th, ltc, targets[ltc.name], now)
            self.manager.failing.pop(ltc.name, None)
            self.cleanings += 1
        except LogCleaningAbortedError as exc:
            log.info("cleaning of %s aborted: %s", ltc.name, exc)
        except (OSError, CorruptRecordError, CleaningProcessError) as exc:
            self.failures += 1
            self.manager.failing[ltc.name] = ltc.log.size_in_bytes
            log.warning("cleaning of %s failed: %s", ltc.name, exc)
        finally:
            self.manager.done_cleaning(ltc.name, end)
            self._finished.set()
            self._finished = trio.Event()
        return True

    async def clean_until_idle(self, max_passes: int = 1000) -> int:
        """Clean until no log is cleanable and no cleaning is under way (tests and tools); returns the
        number of cleanings this call made."""
        n = 0
        while n < max_passes:
            if await self.clean_once():
                n += 1
            elif self.manager.in_progress:  # the cleaner's own tasks are at it: wait for them
                await self._finished.wait()
            else:
                break
        return n

    async def _clean(self, th: _Thread, ltc: LogToClean, target: CleanerTarget, now_ms: int) -> int:
        """Kafka ``Cleaner.doClean``: map the dirty section, then clean and swap group by group (a log in a
        data dir is cleaned by a cleaning process, whose groups are swapped in when it is done)."""
        lg = ltc.log
        segments = list(lg.segments[:-1])  # never the active segment
        truncations = lg.truncations
        aborted = lg.txn_index.collect_aborted(0, ltc.first_uncleanable_offset)
        producers = dict(target.active_producers())
        if lg.directory is not None and self.config.processes:
            end, stats, retained, cleaned_upto = await self._clean_in_process(
                th.process, lg, segments, ltc, aborted, producers, now_ms, truncations)
        else:
            end, stats, retained, cleaned_upto = await self._clean_in_thread(
                th.cleaner, lg, segments, ltc, aborted, producers, now_ms, truncations)
        th.last_stats = stats
        lg.txn_index.remove_markers({t.last_offset for t in aborted
                                     if t.last_offset < cleaned_upto and t.last_offset not in retained})
        log.info("cleaner %d cleaned %s (dirty section [%d, %d]): %.1f MB read, %.1f MB written in %.2f s, "
                 "%d of %d messages kept", th.cleaner.id, ltc.name, ltc.first_dirty_offset, end,
                 stats.bytes_read / 1e6, stats.bytes_written / 1e6, stats.elapsed_secs, stats.messages_written,
                 stats.messages_read)
        return end

    async def _clean_in_thread(self, cleaner: Cleaner, lg: Log, segments: list[Segment], ltc: LogToClean,
                               aborted: list[AbortedTxn], producers: dict[int, tuple[int, int]], now_ms: int,
                               truncations: int) -> tuple[int, CleanerStats, set[int], int]:
        stats = CleanerStats()
        end = await trio.to_thread.run_sync(cleaner.build_offset_map, segments, ltc.first_dirty_offset,
                                            ltc.first_uncleanable_offset, aborted, stats, abandon_on_cancel=True)
        groups = group_segments_by_size([s for s in segments if s.base_offset < end], lg.config.segment_bytes,
                                        ltc.first_uncleanable_offset)
        txns = CleanedTransactionMetadata(aborted)
        cleaned_upto = 0
        for group in groups:
            result = await trio.to_thread.run_sync(cleaner.clean_group, lg, group, txns, producers,
                                                   ltc.first_uncleanable_offset, now_ms, stats,
                                                   abandon_on_cancel=True)
            if not lg.replace_segments(result.cleaned, group, truncations):
                raise LogCleaningAbortedError(f"{ltc.name} changed while it was cleaned")
            cleaned_upto = result.cleaned.next_offset
        stats.end = SYSTEM_CLOCK.monotonic()
        return end, stats, {t.last_offset for t in txns.retained_aborts}, cleaned_upto

    async def _clean_in_process(self, process: CleaningProcess, lg: Log, segments: list[Segment], ltc: LogToClean,
                                aborted: list[AbortedTxn],
                                producers: dict[int, tuple[int, int]], now_ms: int,
                                truncations: int) -> tuple[int, CleanerStats, set[int], int]:
        assert lg.directory is not None
        cfg = self.config
        job = CleaningJob(lg.directory, lg.config,
                          [(s.base_offset, s.size, s.next_offset, s.last_modified_ms) for s in segments],
                          ltc.first_dirty_offset, ltc.first_uncleanable_offset, aborted, producers, now_ms,
                          cfg.dedupe_buffer_size // max(cfg.threads, 1), cfg.load_factor,
                          cfg.io_max_bytes_per_second)
        try:
            outcome: CleaningOutcome = await trio.to_thread.run_sync(process.run, job, abandon_on_cancel=True)
        except trio.Cancelled:
            process.close()  # the job is abandoned: so is its process (its .cleaned files go at the next try)
            raise
        by_base = {s.base_offset: s for s in segments}
        cleaned_upto = 0
        for i, (base, next_offset, replaced) in enumerate(outcome.groups):
            new = FileSegment(lg.directory, base, lg.config.index_interval_bytes, self.clock.time_ms(),
                              suffix=".cleaned")
            try:
                new.load_inactive(next_offset)
            except IndexCorruptError:
                new.recover(check_crc=False)
            if not lg.replace_segments(new, [by_base[b] for b in replaced], truncations):
                for later_base, _, _ in outcome.groups[i + 1:]:  # the rest are not swapped in either
                    remove_segment_files(lg.directory, later_base, ".cleaned")
                raise LogCleaningAbortedError(f"{ltc.name} changed while it was cleaned")
            cleaned_upto = next_offset
        return outcome.end_offset, outcome.stats, {t.last_offset for t in outcome.retained_aborts}, cleaned_upto

    # -- metrics --------------------------------------------------------------------------------
    def metrics(self) -> dict[str, float]:
        """Kafka's gauges: ``kafka.log:type=LogCleaner`` and ``kafka.log:type=LogCleanerManager``."""
        stats = [th.last_stats for th in self.threads if th.last_stats is not None]
        read = sum(s.bytes_read for s in stats)
        written = sum(s.bytes_written for s in stats)
        m = self.manager
        since = self.clock.time_ms() - m.time_of_last_run_ms if m.time_of_last_run_ms >= 0 else 0
        lc, lcm = "kafka.log:type=LogCleaner,name=", "kafka.log:type=LogCleanerManager,name="
        return {
            lc + "max-buffer-utilization-percent": 100 * max((s.buffer_utilization for s in stats), default=0.0),
            lc + "cleaner-recopy-percent": int(100 * written / max(read, 1)),
            lc + "max-clean-time-secs": max((s.elapsed_secs for s in stats if s.end), default=0.0),
            lc + "max-compaction-delay-secs": m.max_compaction_delay_ms / 1000,
            lc + "DeadThreadCount": 0,
            lcm + "max-dirty-percent": int(100 * m.dirtiest_ratio),
            lcm + "time-since-last-run-ms": since,
            lcm + "uncleanable-partitions-count": len(m.failing),
            lcm + "uncleanable-bytes": sum(m.failing.values()),
        }
