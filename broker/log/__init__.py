"""Ebb's partition log: Kafka's on-disk layout, a durable log start offset, recovery, retention.

manager.LogManager     one log dir: loading, checkpoints, topic deletion, background tasks
log.PartitionLog       one partition: append, read, offsets, truncation, retention
segment_run            its segments as files: roll, find, slice, retire
checkpoint_file        a per-dir offset checkpoint written with group commit
opening                new and loaded (recovered) partition logs
segment.LogSegment     one .log file with its .index and .timeindex
segment_file           the open .log files, their budget, and the one walk over a file's batch headers
index                  the two sparse indexes, in Kafka's binary formats
checkpoint             Kafka's text checkpoint files, written atomically
epoch                  the leader epoch cache
config                 topic and manager settings under Kafka's names
"""

from broker.log.common import (
    InconsistentTopicIdError,
    InvalidRecordError,
    LogError,
    Offset,
    OffsetOutOfRangeError,
    PolicyViolationError,
    StartOffsetReason,
    StorageError,
    TopicPartition,
)
from broker.log.config import LogConfig, LogManagerConfig
from broker.log.log import PartitionLog
from broker.log.manager import LogManager
from broker.log.results import AppendInfo, FileSlice, ReadBound, ReadInfo, TimestampOffset

__all__ = [
    "AppendInfo",
    "FileSlice",
    "InconsistentTopicIdError",
    "InvalidRecordError",
    "LogConfig",
    "LogError",
    "LogManager",
    "LogManagerConfig",
    "Offset",
    "OffsetOutOfRangeError",
    "PartitionLog",
    "PolicyViolationError",
    "ReadBound",
    "ReadInfo",
    "StartOffsetReason",
    "StorageError",
    "TimestampOffset",
    "TopicPartition",
]
