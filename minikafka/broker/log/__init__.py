"""Partition log storage, modelled on Kafka's storage layer.

``Log`` ~ UnifiedLog/LocalLog, ``segment`` ~ LogSegment, ``index`` ~
OffsetIndex/TimeIndex, ``epoch`` ~ LeaderEpochFileCache, ``LogManager`` ~
LogManager. See each module for where it deliberately differs.
"""

from minikafka.protocol.records import CorruptRecordError, InvalidRecordError

from .epoch import LeaderEpochFileCache
from .manager import LogManager
from .unified import FetchDataInfo, Log, LogAppendInfo, LogConfig, OffsetOutOfRangeError

__all__ = [
    "CorruptRecordError",
    "FetchDataInfo",
    "InvalidRecordError",
    "LeaderEpochFileCache",
    "Log",
    "LogAppendInfo",
    "LogConfig",
    "LogManager",
    "OffsetOutOfRangeError",
]
