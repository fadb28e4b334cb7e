"""Topic-level log settings and the log manager's own settings, under Kafka's names and defaults.

`LogConfig.from_properties({"retention.ms": "1000", ...})` takes Kafka property names; the
attributes use Python names. Ebb's own: `retention.min.timestamp` (an absolute floor in Unix ms),
`retention.committed.groups` (trim what consumer groups have committed) and `erasure.max.delay.ms`
(how long deleted bytes may stay on disk).
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from broker.property_table import apply_properties, prop
from protocol.varint import INT32_MAX

LONG_MAX = 2**63 - 1


@dataclass(frozen=True, slots=True)
class LogConfig:
    segment_bytes: int = prop("segment.bytes", 1024 * 1024 * 1024)
    segment_ms: int = prop("segment.ms", 7 * 24 * 3600 * 1000)
    segment_jitter_ms: int = prop("segment.jitter.ms", 0)
    segment_index_bytes: int = prop("segment.index.bytes", 10 * 1024 * 1024)
    index_interval_bytes: int = prop("index.interval.bytes", 4096)
    retention_ms: int = prop("retention.ms", 7 * 24 * 3600 * 1000)
    retention_bytes: int = prop("retention.bytes", -1)
    retention_min_timestamp: int | None = prop("retention.min.timestamp", None)
    # Ebb's own: trim what these consumer groups have all committed ("*": every group); acted on by
    # broker/group/trim.py, which reads it here so that it is set, altered and described like the rest.
    retention_committed_groups: tuple[str, ...] = prop("retention.committed.groups", ())
    cleanup_policy: tuple[str, ...] = prop("cleanup.policy", ("delete",))
    file_delete_delay_ms: int = prop("file.delete.delay.ms", 60_000)
    # Ebb's own: how long bytes below the log start offset may stay on disk (-1: no bound; broker/log/erasure.py).
    erasure_max_delay_ms: int = prop("erasure.max.delay.ms", -1)
    # The log cleaner (cleanup.policy=compact; broker/log/cleaner_manager.py).
    delete_retention_ms: int = prop("delete.retention.ms", 24 * 3600 * 1000)
    min_compaction_lag_ms: int = prop("min.compaction.lag.ms", 0)
    max_compaction_lag_ms: int = prop("max.compaction.lag.ms", LONG_MAX)
    min_cleanable_dirty_ratio: float = prop("min.cleanable.dirty.ratio", 0.5)
    flush_messages: int = prop("flush.messages", LONG_MAX)
    flush_ms: int = prop("flush.ms", LONG_MAX)
    message_timestamp_type: str = prop("message.timestamp.type", "CreateTime")
    # How far from the broker's clock a CreateTime record's timestamp may be (broker/log/validator.py).
    message_timestamp_after_max_ms: int = prop("message.timestamp.after.max.ms", 3_600_000)
    message_timestamp_before_max_ms: int = prop("message.timestamp.before.max.ms", LONG_MAX)
    # The codec batches are stored with ("producer": as sent) and the levels a recompression uses.
    compression_type: str = prop("compression.type", "producer")
    compression_gzip_level: int = prop("compression.gzip.level", -1)
    compression_lz4_level: int = prop("compression.lz4.level", 9)
    compression_zstd_level: int = prop("compression.zstd.level", 3)
    max_message_bytes: int = prop("max.message.bytes", 1024 * 1024 + 12)
    # Not a log setting: the leader's acks=all check (broker/handlers/k00_produce.py) reads it here so that
    # it is set, altered and described with the topic's other configs.
    min_insync_replicas: int = prop("min.insync.replicas", 1)

    def __post_init__(self) -> None:
        if not 61 <= self.segment_bytes <= INT32_MAX:
            raise ValueError(f"segment.bytes must fit a 32-bit file position, got {self.segment_bytes}")
        if self.segment_index_bytes < 4:
            raise ValueError("segment.index.bytes must be at least 4")
        if self.message_timestamp_type not in ("CreateTime", "LogAppendTime"):
            raise ValueError(f"message.timestamp.type {self.message_timestamp_type!r}")
        unknown = set(self.cleanup_policy) - {"delete", "compact"}
        if unknown:  # empty is allowed, as in Kafka 4.3: nothing is ever removed
            raise ValueError(f"cleanup.policy {','.join(self.cleanup_policy)!r}")

    @property
    def index_bytes(self) -> int:
        """The index files' size: segment.index.bytes, with room for at least one entry (Kafka accepts
        down to 4 bytes; a time index entry takes 12)."""
        return max(self.segment_index_bytes, 12)

    @property
    def delete_enabled(self) -> bool:
        """DeleteRecords and time/size/floor retention apply only under `cleanup.policy=delete`."""
        return "delete" in self.cleanup_policy

    @property
    def compact_enabled(self) -> bool:
        """The log cleaner keeps the latest record per key (closed segments only), and producers must key
        every record."""
        return "compact" in self.cleanup_policy

    @property
    def erasure_enabled(self) -> bool:
        """Bytes below the log start offset are rewritten away (and retired files removed at once)."""
        return self.erasure_max_delay_ms >= 0

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    def random_segment_jitter(self) -> int:
        """A new segment's roll jitter: below segment.jitter.ms and below segment.ms (Kafka's rule)."""
        bound = min(self.segment_jitter_ms, self.segment_ms)
        return random.randrange(bound) if bound > 0 else 0

    @classmethod
    def from_properties(cls, props: Mapping[str, Any], base: LogConfig | None = None) -> LogConfig:
        return apply_properties(base or cls(), props)


@dataclass(frozen=True, slots=True)
class LogManagerConfig:
    retention_check_interval_ms: int = prop("log.retention.check.interval.ms", 300_000)
    initial_task_delay_ms: int = prop("log.initial.task.delay.ms", 30_000)
    recovery_point_checkpoint_interval_ms: int = prop("log.flush.offset.checkpoint.interval.ms", 60_000)
    start_offset_checkpoint_interval_ms: int = prop("log.flush.start.offset.checkpoint.interval.ms", 60_000)
    # Ebb's own: the log start offset is on disk before a DeleteRecords is answered.
    start_offset_checkpoint_sync: bool = prop("log.start.offset.checkpoint.sync", True)
    high_watermark_checkpoint_interval_ms: int = prop("replica.high.watermark.checkpoint.interval.ms", 5_000)
    flush_scheduler_interval_ms: int = prop("log.flush.scheduler.interval.ms", LONG_MAX)
    io_threads: int = prop("num.recovery.threads.per.data.dir", 4)
    # Ebb's own: segment files kept open when idle (Kafka keeps every one open); the rest are
    # opened again when read. Lowered at start-up to what `ulimit -n` leaves room for.
    open_segments_max: int = prop("ebb.log.open.segments.max", 4096)
    # Ebb's own (Kafka has none): headroom kept free on the log dir, so that deleting always works.
    # Below the larger of the two, Produce to the dir's client topics is refused (broker/log/free_space.py).
    min_free_bytes: int = prop("log.dir.min.free.bytes", 32 * 1024 * 1024)
    min_free_percent: int = prop("log.dir.min.free.percent", 0)
    free_space_check_interval_ms: int = prop("log.dir.free.space.check.interval.ms", 1_000)
    # Ebb's own: how often a failed log dir (or one with partitions offline) is probed to bring it
    # back without a restart (broker/log/dir_health.py); Kafka needs a restart.
    failure_probe_interval_ms: int = prop("log.dir.failure.probe.interval.ms", 10_000)
    # The log cleaner (broker/log/cleaner_manager.py), Kafka's names and defaults.
    cleaner_enable: bool = prop("log.cleaner.enable", True)
    cleaner_threads: int = prop("log.cleaner.threads", 1)
    cleaner_dedupe_buffer_size: int = prop("log.cleaner.dedupe.buffer.size", 128 * 1024 * 1024)
    cleaner_io_buffer_size: int = prop("log.cleaner.io.buffer.size", 512 * 1024)
    cleaner_io_buffer_load_factor: float = prop("log.cleaner.io.buffer.load.factor", 0.9)
    cleaner_backoff_ms: int = prop("log.cleaner.backoff.ms", 15_000)
    # The cleaners' reads and writes together (broker/log/cleaner_throttle.py); dynamic too (dynamic_config.py).
    cleaner_io_max_bytes_per_second: float = prop("log.cleaner.io.max.bytes.per.second", 1.7976931348623157e308)

    @classmethod
    def from_properties(
        cls, props: Mapping[str, Any], base: LogManagerConfig | None = None
    ) -> LogManagerConfig:
        return apply_properties(base or cls(), props)
