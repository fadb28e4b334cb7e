"""Ebb's partition log: Kafka's on-disk layout, a durable log start offset, recovery, retention,
compaction and the log dir's headroom.

manager.LogManager     one log dir: loading, creating and deleting logs, retention passes, shutdown
dir_state              what a dir holds at start: checkpoints, partition dirs, interrupted deletions
log.PartitionLog       one partition: append, read, start offset moves, truncation, retention
log_state.LogState     its segments and offsets kept consistent: offline on I/O errors, rolls, flushes
batch_check            the checks on incoming batches before a byte is written
segment_run            its segments as files: roll, find, slice, retire
segment.LogSegment     one .log file with its .index and .timeindex
segment_file           the open .log files, their budget, and the one walk over a file's batch headers
open_files             how many idle segment files may stay open under `ulimit -n`
page_cache             whether a range is in the page cache (sendfile or a read)
index                  the two sparse indexes, in Kafka's binary formats
timestamp_search       offsets by timestamp (ListOffsets), through the time index
slices, file_region    record data for answers: copied into one buffer, or sent with sendfile
results                what the log hands back (append and read results, timestamp lookups)
retention              which oldest segments retention deletes (Kafka's rules, one pure function)
checkpoint             Kafka's text checkpoint files, written atomically
checkpoint_file        a per-dir offset checkpoint written with group commit
dir_checkpoints        the dir's three offset checkpoints: what each holds, when they are written
periodic               the manager's periodic jobs (retention, checkpoints, time-based flush)
opening, loader        new and loaded (recovered) partition logs
epoch                  the leader epoch cache
io, cold_files         where blocking work runs; files written and removed off the loop (aiofiles)
free_space             the dir's headroom (`log.dir.min.free.bytes`): appends refused below it
repeated_failure       a failure that repeats on a timer, logged once and then summarised
cleaner_manager        the log cleaner (compaction): which log, when, in which process
cleaner, offset_map    one cleaning round and its key map
cleaner_records        the round's walks over one batch's records (compiled in protocol/_record_spans.c)
cleaned_txns           aborted records and expired markers dropped by a round
cleaner_throttle       `log.cleaner.io.max.bytes.per.second`, held inside a cleaner process
cleaner_stats          what the cleaner reports to metrics
txn_index              the aborted-transaction index (`.txnindex`)
erasure                rewriting a segment's tail past the log start offset (`erasure.max.delay.ms`)
dir_health             a failed dir taken offline whole, and probed back
unloaded               the partitions not loaded: why, their checkpoint entries, whether to retry
compacted_keys         refusing keyless records on compacted topics
cleaner_settings       which `log.cleaner.*` settings the cleaner honours
config                 topic and manager settings under Kafka's names
common                 names, types and errors shared by the log modules
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
