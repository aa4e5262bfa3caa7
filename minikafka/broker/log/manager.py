"""All partition logs of the broker (Kafka's ``LogManager``).

Differences: no per-directory recovery threads, no async deletion (a deleted
log's directory is removed at once rather than renamed ``*-delete``), retention
is driven by the broker calling ``enforce_retention`` periodically.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

from ...common import SYSTEM_CLOCK, Clock
from .unified import Log, LogConfig

log = logging.getLogger(__name__)


def parse_log_dir_name(name: str) -> tuple[str, int] | None:
    """``"<topic>-<partition>"`` -> ``(topic, partition)``, None if it is not one."""
    topic, sep, part = name.rpartition("-")
    if not sep or not topic or not part.isdigit():
        return None
    return topic, int(part)


class LogManager:
    """Creates, loads, retains and deletes ``Log`` objects, in memory or under a data dir."""

    def __init__(self, data_dir: Path | None, clock: Clock = SYSTEM_CLOCK) -> None:
        self.data_dir = Path(data_dir) if data_dir is not None else None
        self.clock = clock
        if self.data_dir is not None:
            self.data_dir.mkdir(parents=True, exist_ok=True)
        self.logs: dict[tuple[str, int], Log] = {}

    def _dir_for(self, topic: str, partition: int) -> Path | None:
        return None if self.data_dir is None else self.data_dir / f"{topic}-{partition}"

    def get_or_create(self, topic: str, partition: int, config: LogConfig) -> Log:
        key = (topic, partition)
        lg = self.logs.get(key)
        if lg is None:
            lg = Log(topic, partition, config, self._dir_for(topic, partition), clock=self.clock)
            self.logs[key] = lg
        return lg

    def get(self, topic: str, partition: int) -> Log | None:
        return self.logs.get((topic, partition))

    def partitions(self, topic: str) -> list[int]:
        return sorted(p for t, p in self.logs if t == topic)

    def delete_topic(self, topic: str) -> None:
        for key in [k for k in self.logs if k[0] == topic]:
            self.logs.pop(key).delete()
        if self.data_dir is not None:  # directories of logs never opened in this process
            for d in self.data_dir.iterdir():
                parsed = parse_log_dir_name(d.name)
                if d.is_dir() and parsed is not None and parsed[0] == topic:
                    shutil.rmtree(d, ignore_errors=True)

    def load_existing(self, configs: dict[str, LogConfig],
                      replicated: set[tuple[str, int]] | frozenset = frozenset()) -> None:
        """Open and recover every ``<topic>-<partition>`` directory under the data dir;
        topics missing from *configs* get the default ``LogConfig``.  Logs in *replicated*
        keep the checkpointed high watermark (their leader advances it) instead of HW = LEO."""
        if self.data_dir is None:
            return
        for d in sorted(self.data_dir.iterdir()):
            parsed = parse_log_dir_name(d.name) if d.is_dir() else None
            if parsed is None or parsed in self.logs:
                continue
            topic, partition = parsed
            self.logs[parsed] = Log(topic, partition, configs.get(topic) or LogConfig(), d,
                                    auto_advance_hw=parsed not in replicated, clock=self.clock)
        log.info("loaded %d log(s) from %s", len(self.logs), self.data_dir)

    def enforce_retention(self, now_ms: int) -> int:
        return sum(lg.enforce_retention(now_ms) for lg in self.logs.values())

    def flush_all(self, fsync: bool = False) -> None:
        for lg in self.logs.values():
            lg.flush(fsync)

    def close_all(self) -> None:
        for lg in self.logs.values():
            lg.close()
        self.logs.clear()
