"""The state of one partition's log: its segments and the offsets that describe them.

    log start offset <= high watermark <= log end offset, and first segment base <= log start offset

State changes run synchronously on the event loop, so each one is atomic with respect to the
others without locks. What may wait on the disk runs in the `LogIO` pool: fsync (`flush`),
unlinking deleted segments (after `file.delete.delay.ms`), and loading/recovery
(`load_partition_log` in opening.py, itself blocking, which the manager calls from the pool).

LogState holds that state and what keeps it true (an I/O error takes the partition offline; a roll
and a flush move the recovery point); PartitionLog (log.py) is the log callers use.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Self

import structlog

from broker.log.common import Offset, StorageError, TopicPartition
from broker.log.config import LogConfig
from broker.log.epoch import LeaderEpochCache
from broker.log.free_space import DirSpace, LowDiskSpaceError, is_out_of_space
from broker.log.io import LogIO
from broker.log.segment import CorruptSegmentError, LogSegment, SegmentFlush
from broker.log.segment_run import SegmentRun, sync_to_disk
from broker.log.txn_index import AbortedTxnIndex
from broker.resolve_generation import RESOLVE_GENERATION

logger = structlog.get_logger(__name__)

Clock = Callable[[], int]


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class LogState:
    """One partition log's segments and offsets, kept consistent: construction, the offset
    properties, going offline on I/O errors, rolling and flushing. PartitionLog (log.py) adds what
    callers do with the log."""

    def __init__(
        self,
        directory: Path,
        config: LogConfig,
        segments: list[LogSegment],
        *,
        io: LogIO | None = None,
        clock: Clock = wall_clock_ms,
        log_start_offset: int,
        recovery_point: int,
        high_watermark: int,
        epoch_cache: LeaderEpochCache | None = None,
        topic_id: uuid.UUID | None = None,
    ) -> None:
        tp = TopicPartition.from_dir_name(directory.name)
        if tp is None:
            raise ValueError(f"{directory.name!r} is not a <topic>-<partition> directory name")
        self.topic_partition = tp
        self.directory = directory
        self._config = config
        self.io = io or LogIO()
        self.clock = clock
        self.topic_id = topic_id
        self.epoch_cache = epoch_cache or LeaderEpochCache()
        self._run = SegmentRun(directory, config, segments, self.io, clock)
        # Blocking read of the `.txnindex` files: logs are made in the LogManager's pool (opening.py).
        self.aborted_txns = AbortedTxnIndex.load(directory, [s.base_offset for s in segments])
        self._log_start_offset = log_start_offset
        self._recovery_point = recovery_point
        self._high_watermark = high_watermark
        self._truncations = (
            0  # bumped by every truncation; a flush that overlaps one keeps the old recovery point
        )
        self._flush_lock = asyncio.Lock()
        self._last_flush_ms = clock()
        self.offline_reason: str | None = None
        # Set by the LogManager: writes the start offset checkpoint (group-committed) when
        # `log.start.offset.checkpoint.sync` says so or the caller forces it.
        self.start_offset_sink: Callable[[bool], Awaitable[None]] | None = None
        self._durable_log_start_offset = log_start_offset
        self.on_offline: Callable[[Self], None] | None = None
        # Set by the LogManager: the dir's free-space headroom that appends are admitted by
        # (broker/log/free_space.py); internal topics (group offsets) may write into it.
        self.space: DirSpace | None = None
        self.writes_into_reserve = False

    def __repr__(self) -> str:
        return (
            f"PartitionLog({self.topic_partition}, start={self._log_start_offset}, "
            f"hw={self._high_watermark}, end={self.log_end_offset}, segments={len(self._run)})"
        )

    @property
    def config(self) -> LogConfig:
        return self._config

    # --- offsets ---------------------------------------------------------------------------------

    @property
    def log_start_offset(self) -> Offset:
        return Offset(self._log_start_offset)

    @property
    def log_end_offset(self) -> Offset:
        return Offset(self._run.active.next_offset)

    @property
    def high_watermark(self) -> Offset:
        return Offset(self._high_watermark)

    @property
    def recovery_point(self) -> Offset:
        return Offset(self._recovery_point)

    @property
    def size_bytes(self) -> int:
        return self._run.size_bytes

    @property
    def segments(self) -> list[LogSegment]:
        """A copy of the segment list, oldest first (read-only use: tests, metrics)."""
        return self._run.all()

    @property
    def offline(self) -> bool:
        return self.offline_reason is not None

    def update_high_watermark(self, offset: int) -> Offset:
        """Set the high watermark, clamped to [log start offset, log end offset]."""
        self._check_online()
        self._high_watermark = min(max(offset, self._log_start_offset), self.log_end_offset)
        return self.high_watermark

    # --- failures --------------------------------------------------------------------------------

    def _check_online(self) -> None:
        if self.offline_reason is not None:
            raise StorageError(f"{self.topic_partition} is offline: {self.offline_reason}")

    def _fail(self: Self, action: str, exc: BaseException) -> StorageError:
        """An I/O error: this partition goes offline (others keep working); return the error to raise."""
        if self.offline_reason is None:
            self.offline_reason = f"{action}: {exc!r}"
            RESOLVE_GENERATION.bump()
            logger.error(
                "partition log offline", partition=str(self.topic_partition), action=action, error=repr(exc)
            )
            if self.on_offline is not None:
                self.on_offline(self)
        return StorageError(f"{self.topic_partition} is offline: {self.offline_reason}")

    def io_failed(self, action: str, exc: BaseException) -> StorageError:
        """An I/O error on a file kept beside the log (share-partition state): offline, as the log's own."""
        return self._fail(action, exc)

    def mark_offline(self, reason: str) -> None:
        """Offline because its log dir failed (another partition's I/O error): no listener told."""
        if self.offline_reason is None:
            self.offline_reason = reason
            RESOLVE_GENERATION.bump()

    def _out_of_space(self, segment: LogSegment, exc: BaseException) -> StorageError:
        """The disk filled during an append: the part written is cut off, and the partition stays
        online (reads and deletions go on); the dir is low until a reading finds room again."""
        try:
            segment.discard_unrecorded_tail()
        except OSError as cut:
            return self._fail("append", cut)
        if self.space is not None:
            self.space.ran_out()
        return LowDiskSpaceError(f"{self.topic_partition}: the log dir is out of space ({exc!r}); "
                                 f"delete records or topics to free space")

    @contextlib.contextmanager
    def _guard(self, action: str) -> Iterator[None]:
        self._check_online()
        try:
            yield
        except (OSError, CorruptSegmentError) as exc:
            raise self._fail(action, exc) from exc

    # --- rolling and flushing --------------------------------------------------------------------

    def _roll(self, base_offset: int) -> LogSegment:
        previous_size = self._run.active.size
        segment = self._run.roll(base_offset)
        logger.info(
            "rolled log segment",
            partition=str(self.topic_partition),
            base_offset=base_offset,
            previous_size=previous_size,
        )
        # Kafka fsyncs the finished segment right after a roll, off the append path.
        with contextlib.suppress(RuntimeError):
            self.io.spawn(self.flush(up_to=base_offset), "flush after roll")
        return segment

    async def flush(self, up_to: int | None = None) -> None:
        """fsync everything below `up_to` (default: the log end), then move the recovery point there.
        Index tails, the leader epoch checkpoint and new directory entries go to disk with it."""
        self._check_online()
        async with self._flush_lock:
            target = self.log_end_offset if up_to is None else min(up_to, self.log_end_offset)
            epochs = self.epoch_cache.entries() if self.epoch_cache.dirty else None
            wanted = [
                s
                for s in self._run.all()
                if (s.base_offset < target and s.next_offset > self._recovery_point) or s.indexes_dirty
            ]
            if not wanted and not self._run.dir_dirty and epochs is None:
                self._recovery_point = max(self._recovery_point, target)
                return
            truncations = self._truncations
            flushes: list[SegmentFlush] = []
            with self._guard("flush"):
                try:
                    for segment in wanted:
                        flushes.append(segment.prepare_flush())
                except BaseException:
                    for pending in flushes:
                        pending.abandon()
                    raise
            self.epoch_cache.dirty = False
            dir_dirty, self._run.dir_dirty = self._run.dir_dirty, False
            try:
                await self.io.run(sync_to_disk, flushes, self.directory, epochs, dir_dirty)
            except OSError as exc:
                if not is_out_of_space(exc):
                    raise self._fail("flush", exc) from exc
                # No room for the leader epoch checkpoint (or a filesystem that allocates at fsync):
                # nothing is lost from the page cache; the recovery point stays and a later flush retries.
                self.epoch_cache.dirty = self.epoch_cache.dirty or epochs is not None
                self._run.dir_dirty = self._run.dir_dirty or dir_dirty
                if self.space is not None:
                    self.space.ran_out()
                raise LowDiskSpaceError(f"{self.topic_partition}: cannot flush, out of space ({exc!r})") from exc
            for pending in flushes:
                pending.done()
            if truncations == self._truncations:
                self._recovery_point = max(self._recovery_point, target)
            self._last_flush_ms = self.clock()

    async def maybe_flush_on_time(self) -> None:
        """`flush.ms`: called by the manager's flush scheduler."""
        if not self.offline and self.clock() - self._last_flush_ms >= self.config.flush_ms:
            await self.flush()
