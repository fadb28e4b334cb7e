"""The log of one partition: an ordered run of segments and the offsets that describe it.

    log start offset <= high watermark <= log end offset, and first segment base <= log start offset

State changes (append, truncation, start offset moves, retention) run synchronously on the event
loop, so each one is atomic with respect to the others without locks. What may wait on the disk
runs in the `LogIO` pool: fsync (`flush`), unlinking deleted segments (after
`file.delete.delay.ms`), and loading/recovery (`PartitionLog.load`, itself blocking, which the
manager calls from the pool). Appends write to the page cache with os.write, which takes
microseconds.

The log start offset lives in the log dir's `log-start-offset-checkpoint`, which the LogManager owns;
it plugs in `start_offset_sink` so that a move is durable before `increment_log_start_offset`
returns. A log used on its own keeps its start offset in memory only.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
import uuid
from bisect import bisect_right
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

import structlog

from broker.log import checkpoint
from broker.log.common import (
    EARLIEST_LOCAL_TIMESTAMP,
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    NO_TIMESTAMP,
    InvalidRecordError,
    LogError,
    Offset,
    OffsetOutOfRangeError,
    PolicyViolationError,
    StartOffsetReason,
    StorageError,
    TopicPartition,
)
from broker.log.config import LogConfig
from broker.log.epoch import LeaderEpochCache
from broker.log.io import LogIO, unlink_all
from broker.log.loader import LoadReport, load_partition
from broker.log.retention import SegmentFacts, deletable_segments
from broker.log.segment import BatchInfo, CorruptSegmentError, LogSegment, SegmentFile, SegmentFlush
from protocol.errors import ErrorCode, ProtocolError
from protocol.records import assign_offsets as stamp_batch
from protocol.records import iter_batches, set_log_append_time

logger = structlog.get_logger(__name__)

Clock = Callable[[], int]


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class ReadBound(Enum):
    """How far a read may go: consumers stop at the high watermark, followers at the log end."""

    HIGH_WATERMARK = "high_watermark"
    LOG_END = "log_end"


@dataclass(frozen=True, slots=True)
class AppendInfo:
    first_offset: Offset
    last_offset: Offset
    log_append_time: int  # -1 under CreateTime
    max_timestamp: int
    log_start_offset: Offset
    batches: int
    size: int


@dataclass(frozen=True, slots=True)
class FileSlice:
    """Bytes [position, position + length) of a segment file: whole batches, ready to send."""

    file: SegmentFile
    position: int
    length: int

    def read(self) -> bytes:
        """Blocking: the bytes themselves (tests, small reads; the server sends from the file)."""
        return os.pread(self.file.fileno(), self.length, self.position)


@dataclass(frozen=True, slots=True)
class ReadInfo:
    slices: tuple[FileSlice, ...]
    next_offset: Offset  # where the reader continues: the first offset not returned
    high_watermark: Offset
    log_start_offset: Offset
    log_end_offset: Offset

    @property
    def size(self) -> int:
        return sum(s.length for s in self.slices)

    def read_bytes(self) -> bytes:
        """Blocking: all slices concatenated."""
        return b"".join(s.read() for s in self.slices)


@dataclass(frozen=True, slots=True)
class TimestampOffset:
    timestamp: int
    offset: Offset
    leader_epoch: int


class PartitionLog:
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
        self.config = config
        self.io = io or LogIO()
        self.clock = clock
        self.topic_id = topic_id
        self.epoch_cache = epoch_cache or LeaderEpochCache()
        self._segments = segments
        self._bases = [s.base_offset for s in segments]
        self._log_start_offset = log_start_offset
        self._recovery_point = recovery_point
        self._high_watermark = high_watermark
        self._truncations = (
            0  # bumped by every truncation; a flush that overlaps one keeps the old recovery point
        )
        self._dir_dirty = False  # files were created or renamed since the last directory fsync
        self._flush_lock = asyncio.Lock()
        self._last_flush_ms = clock()
        self.offline_reason: str | None = None
        # Set by the LogManager: makes the current log start offset durable (group-committed).
        self.start_offset_sink: Callable[[], Awaitable[None]] | None = None
        self.durable_log_start_offset = log_start_offset
        self.on_offline: Callable[[PartitionLog], None] | None = None

    def __repr__(self) -> str:
        return (
            f"PartitionLog({self.topic_partition}, start={self._log_start_offset}, "
            f"hw={self._high_watermark}, end={self.log_end_offset}, segments={len(self._segments)})"
        )

    # --- offsets ---------------------------------------------------------------------------------

    @property
    def log_start_offset(self) -> Offset:
        return Offset(self._log_start_offset)

    @property
    def log_end_offset(self) -> Offset:
        return Offset(self._segments[-1].next_offset)

    @property
    def high_watermark(self) -> Offset:
        return Offset(self._high_watermark)

    @property
    def recovery_point(self) -> Offset:
        return Offset(self._recovery_point)

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    @property
    def segments(self) -> list[LogSegment]:
        """A copy of the segment list, oldest first (read-only use: tests, metrics)."""
        return list(self._segments)

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

    def _fail(self, action: str, exc: BaseException) -> StorageError:
        """An I/O error: this partition goes offline (others keep working); return the error to raise."""
        if self.offline_reason is None:
            self.offline_reason = f"{action}: {exc!r}"
            logger.error(
                "partition log offline", partition=str(self.topic_partition), action=action, error=repr(exc)
            )
            if self.on_offline is not None:
                self.on_offline(self)
        return StorageError(f"{self.topic_partition} is offline: {self.offline_reason}")

    @contextlib.contextmanager
    def _guard(self, action: str) -> Iterator[None]:
        self._check_online()
        try:
            yield
        except (OSError, CorruptSegmentError) as exc:
            raise self._fail(action, exc) from exc

    # --- appending -------------------------------------------------------------------------------

    async def append(
        self, records: bytes | bytearray | memoryview, *, leader_epoch: int = -1, assign_offsets: bool = True
    ) -> AppendInfo:
        """Append a run of magic-2 batches as received from a producer (`assign_offsets`, the leader)
        or from a leader (follower: offsets kept). Written to the page cache; fsynced first only when
        `flush.messages` says so."""
        info = self.append_nowait(records, leader_epoch=leader_epoch, assign_offsets=assign_offsets)
        if self.log_end_offset - self._recovery_point >= self.config.flush_messages:
            await self.flush()
        return info

    def append_nowait(
        self, records: bytes | bytearray | memoryview, *, leader_epoch: int = -1, assign_offsets: bool = True
    ) -> AppendInfo:
        """`append` without the flush policy: never waits (the caller flushes if it must). A bytearray
        or a writable memoryview (a request frame's records) is stamped in place; read-only bytes are
        copied first."""
        self._check_online()
        if isinstance(records, bytearray) or (isinstance(records, memoryview) and not records.readonly
                                              and records.format == "B" and records.ndim == 1):
            buf = records
        else:
            buf = bytearray(records)
        now = self.clock()
        batches = self._validate(buf, assign_offsets)
        if not batches:
            end = self.log_end_offset
            return AppendInfo(end, Offset(end - 1), NO_TIMESTAMP, NO_TIMESTAMP, self.log_start_offset, 0, 0)
        infos: list[BatchInfo] = []
        next_offset = self.log_end_offset
        log_append_time = assign_offsets and self.config.log_append_time
        for position, size, base, delta, max_ts, epoch in batches:
            if assign_offsets:
                base, epoch = next_offset, leader_epoch
                stamp_batch(buf, position, base, epoch)
                if log_append_time:
                    set_log_append_time(buf, position, now)
                    max_ts = now
            elif base < next_offset:
                raise InvalidRecordError(
                    f"{self.topic_partition}: batch at offset {base} is below the log end {next_offset}",
                    ErrorCode.INVALID_RECORD,
                )
            infos.append(BatchInfo(position, base, base + delta, size, max_ts, epoch))
            next_offset = base + delta + 1
        with self._guard("append"):
            segment = self._segments[-1]
            max_timestamp = max(i.max_timestamp for i in infos)
            if segment.should_roll(
                len(buf),
                max_timestamp,
                infos[-1].last_offset,
                self.config.segment_bytes,
                self.config.segment_ms,
                now,
            ):
                segment = self._roll(infos[0].base_offset)
            segment.append(buf if isinstance(buf, memoryview) else memoryview(buf), infos)
        for info in infos:
            self.epoch_cache.assign(info.leader_epoch, info.base_offset)
        return AppendInfo(
            first_offset=Offset(infos[0].base_offset),
            last_offset=Offset(infos[-1].last_offset),
            log_append_time=now if log_append_time else NO_TIMESTAMP,
            max_timestamp=max_timestamp,
            log_start_offset=self.log_start_offset,
            batches=len(infos),
            size=len(buf),
        )

    def _validate(self, buf: bytearray, assign: bool) -> list[tuple[int, int, int, int, int, int]]:
        """Check framing, CRC and counts of every batch before anything is written."""
        result = []
        try:
            for batch in iter_batches(buf):
                size = batch.size
                if size > self.config.max_message_bytes:
                    raise InvalidRecordError(
                        f"batch of {size} bytes exceeds max.message.bytes {self.config.max_message_bytes}",
                        ErrorCode.MESSAGE_TOO_LARGE,
                    )
                if size > self.config.segment_bytes:
                    raise InvalidRecordError(
                        f"batch of {size} bytes exceeds segment.bytes {self.config.segment_bytes}",
                        ErrorCode.RECORD_LIST_TOO_LARGE,
                    )
                batch.validate()
                header = batch.header()
                base, epoch, delta, max_ts, count = header[0], header[2], header[6], header[8], header[12]
                if assign and (count <= 0 or count != delta + 1):
                    raise InvalidRecordError(
                        f"batch claims {count} records over {delta + 1} offsets", ErrorCode.INVALID_RECORD
                    )
                result.append((batch.position, size, base, delta, max_ts, epoch))
        except ProtocolError as exc:
            raise InvalidRecordError(exc.message, exc.error_code) from exc
        return result

    def _roll(self, base_offset: int) -> LogSegment:
        old = self._segments[-1]
        old.seal()
        segment = LogSegment.create(
            self.directory,
            base_offset,
            index_interval_bytes=self.config.index_interval_bytes,
            max_index_bytes=self.config.segment_index_bytes,
            now_ms=self.clock(),
        )
        self._segments.append(segment)
        self._bases.append(base_offset)
        self._dir_dirty = True
        logger.info(
            "rolled log segment",
            partition=str(self.topic_partition),
            base_offset=base_offset,
            previous_size=old.size,
        )
        # Kafka fsyncs the finished segment right after a roll, off the append path.
        with contextlib.suppress(RuntimeError):
            self.io.spawn(self.flush(up_to=base_offset), "flush after roll")
        return segment

    # --- reading ---------------------------------------------------------------------------------

    def _segment_index(self, offset: int) -> int:
        return max(bisect_right(self._bases, offset) - 1, 0)

    def read(
        self,
        offset: int,
        max_bytes: int,
        *,
        bound: ReadBound = ReadBound.HIGH_WATERMARK,
        min_one_batch: bool = True,
    ) -> ReadInfo:
        """Whole batches from the one holding `offset`, at most `max_bytes` (but one batch at least
        when `min_one_batch`), never past `bound`. Nothing is copied: the result names file ranges.

        OFFSET_OUT_OF_RANGE below the log start offset or above the log end offset; an empty result
        at the bound. The first batch may begin below `offset` (and below the log start offset):
        clients skip records they did not ask for.
        """
        self._check_online()
        start, end = self._log_start_offset, self.log_end_offset
        if offset < start or offset > end:
            raise OffsetOutOfRangeError(
                f"{self.topic_partition}: offset {offset} is outside [{start}, {end}]"
            )
        upper = self._high_watermark if bound is ReadBound.HIGH_WATERMARK else end
        slices: list[FileSlice] = []
        remaining = max_bytes
        with self._guard("read"):
            i = self._segment_index(offset)
            while offset < upper and i < len(self._segments) and (remaining > 0 or not slices):
                segment = self._segments[i]
                bounded = upper < segment.next_offset
                max_position = segment.position_of(upper) if bounded else segment.size
                found = segment.read(offset, remaining, max_position, min_one_batch and not slices)
                if found is None:
                    if offset < segment.next_offset:
                        break  # the next batch does not fit (size or bound)
                else:
                    position, length, next_offset = found
                    slices.append(FileSlice(segment.file, position, length))
                    remaining -= length
                    if bounded or position + length < segment.size:
                        break
                offset = max(offset, segment.next_offset)
                i += 1
        return ReadInfo(
            tuple(slices),
            Offset(next_offset if slices else offset),
            self.high_watermark,
            self.log_start_offset,
            self.log_end_offset,
        )

    def offset_for_timestamp(self, timestamp: int) -> TimestampOffset | None:
        """ListOffsets at the log level. EARLIEST (-2, and -4) is the log start offset, LATEST (-1)
        the log end offset, MAX_TIMESTAMP (-3) the first batch holding the largest timestamp, and
        t >= 0 the first record at or after the log start offset whose timestamp is >= t (None if
        there is none; only the batch holding it is decoded). MAX_TIMESTAMP stays at batch
        granularity. Capping at the high watermark is the caller's business (it depends on the
        isolation level)."""
        self._check_online()
        start = self._log_start_offset
        if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
            return TimestampOffset(NO_TIMESTAMP, Offset(start), self.epoch_cache.epoch_at(start))
        if timestamp == LATEST_TIMESTAMP:
            return TimestampOffset(NO_TIMESTAMP, self.log_end_offset, self.epoch_cache.latest_epoch)
        with self._guard("offset for timestamp"):
            if timestamp == MAX_TIMESTAMP:
                found = self._max_timestamp_batch(start)
            elif timestamp < 0:
                raise LogError(f"unknown special timestamp {timestamp}", ErrorCode.INVALID_REQUEST)
            else:
                found = None
                for segment in self._segments[self._segment_index(start) :]:
                    found = segment.find_offset_by_timestamp(timestamp, max(start, segment.base_offset))
                    if found is not None:
                        break
        if found is None:
            return None
        return TimestampOffset(found[0], Offset(found[1]), self.epoch_cache.epoch_at(found[1]))

    def _max_timestamp_batch(self, start: int) -> tuple[int, int] | None:
        best: tuple[int, int] | None = None
        first = self._segment_index(start)
        for i, segment in enumerate(self._segments[first:]):
            if segment.size == 0 or (best is not None and segment.max_timestamp <= best[0]):
                continue
            if i == 0 and segment.offset_of_max_timestamp < start:
                # The segment's maximum lies below the start offset: look only at what is left.
                candidate = None
                begin = segment.index.lookup(start)[1]
                for batch in segment.batches(begin):
                    if batch.last_offset >= start and (
                        candidate is None or batch.max_timestamp > candidate[0]
                    ):
                        candidate = (batch.max_timestamp, max(batch.base_offset, start))
            else:
                candidate = segment.find_offset_by_timestamp(
                    segment.max_timestamp, max(start, segment.base_offset)
                )
            if candidate is not None and candidate[0] >= 0 and (best is None or candidate[0] > best[0]):
                best = candidate
        return best

    # --- flushing --------------------------------------------------------------------------------

    async def flush(self, up_to: int | None = None) -> None:
        """fsync everything below `up_to` (default: the log end), then move the recovery point there.
        Index tails, the leader epoch checkpoint and new directory entries go to disk with it."""
        self._check_online()
        async with self._flush_lock:
            target = self.log_end_offset if up_to is None else min(up_to, self.log_end_offset)
            epochs = self.epoch_cache.entries() if self.epoch_cache.dirty else None
            wanted = [
                s
                for s in self._segments
                if (s.base_offset < target and s.next_offset > self._recovery_point) or s.indexes_dirty
            ]
            if not wanted and not self._dir_dirty and epochs is None:
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
            dir_dirty, self._dir_dirty = self._dir_dirty, False
            try:
                await self.io.run(_run_flush, flushes, self.directory, epochs, dir_dirty)
            except OSError as exc:
                raise self._fail("flush", exc) from exc
            for pending in flushes:
                pending.done()
            if truncations == self._truncations:
                self._recovery_point = max(self._recovery_point, target)
            self._last_flush_ms = self.clock()

    async def maybe_flush_on_time(self) -> None:
        """`flush.ms`: called by the manager's flush scheduler."""
        if not self.offline and self.clock() - self._last_flush_ms >= self.config.flush_ms:
            await self.flush()

    # --- moving the start ------------------------------------------------------------------------

    async def increment_log_start_offset(
        self, offset: int, reason: StartOffsetReason = StartOffsetReason.CLIENT_RECORD_DELETION
    ) -> Offset:
        """Move the log start offset up to `offset` (DeleteRecords). A no-op success at or below the
        current one; OFFSET_OUT_OF_RANGE above the high watermark; POLICY_VIOLATION for a client
        deletion without `cleanup.policy=delete`. Segments wholly below it are deleted. When the
        manager syncs the checkpoint (the default) the new offset is on disk on return."""
        self.move_log_start_offset(offset, reason)
        await self._make_start_offset_durable()
        return self.log_start_offset

    def move_log_start_offset(
        self, offset: int, reason: StartOffsetReason = StartOffsetReason.CLIENT_RECORD_DELETION
    ) -> None:
        """`increment_log_start_offset` up to the wait for the checkpoint: the offset has moved in memory
        on return; `make_start_offset_durable` waits for the disk. Moving many logs first and then
        waiting lets one checkpoint write cover them all."""
        self._check_online()
        if reason is StartOffsetReason.CLIENT_RECORD_DELETION and not self.config.delete_enabled:
            raise PolicyViolationError(
                f"{self.topic_partition}: records can be deleted only under cleanup.policy=delete"
            )
        if offset < 0 or offset > self._high_watermark:
            raise OffsetOutOfRangeError(
                f"{self.topic_partition}: cannot move the log start offset to {offset}; "
                f"high watermark {self._high_watermark}"
            )
        if offset > self._log_start_offset:
            self._set_log_start_offset(offset, reason)
            with self._guard("delete segments"):
                self._delete_segments(self._count_below_start())

    def _set_log_start_offset(self, offset: int, reason: StartOffsetReason) -> None:
        self._log_start_offset = offset
        self._high_watermark = max(self._high_watermark, offset)
        self._recovery_point = max(self._recovery_point, offset)
        self.epoch_cache.truncate_from_start(offset)
        logger.info(
            "incremented log start offset",
            partition=str(self.topic_partition),
            offset=offset,
            reason=reason.value,
        )

    def _count_below_start(self) -> int:
        """How many oldest segments lie wholly below the log start offset (never the last one)."""
        count = 0
        while count + 1 < len(self._segments) and self._bases[count + 1] <= self._log_start_offset:
            count += 1
        return count

    def _delete_segments(self, count: int) -> None:
        """Drop the `count` oldest segments: renamed `.deleted` now, removed after the delay."""
        if count <= 0:
            return
        doomed = self._segments[:count]
        del self._segments[:count]
        del self._bases[:count]
        renamed: list[Path] = []
        for segment in doomed:
            renamed += segment.rename_to_deleted()
        self._dir_dirty = True
        logger.info(
            "deleting segments", partition=str(self.topic_partition), bases=[s.base_offset for s in doomed]
        )
        self.io.delete_later(
            self.config.file_delete_delay_ms, [s.file for s in doomed], lambda: unlink_all(renamed)
        )

    async def _make_start_offset_durable(self) -> None:
        if self.start_offset_sink is not None and self.durable_log_start_offset != self._log_start_offset:
            await self.start_offset_sink()

    async def make_start_offset_durable(self) -> None:
        """Return once the current log start offset is on disk (at once when it already is, or when
        the log keeps it in memory only)."""
        await self._make_start_offset_durable()

    # --- retention -------------------------------------------------------------------------------

    def retention_candidates(self, now_ms: int | None = None) -> int:
        """How many oldest segments retention would delete now (broker/log/retention.py)."""
        facts = [SegmentFacts(seg.base_offset, seg.size, _largest_timestamp(seg)) for seg in self._segments]
        return deletable_segments(facts, self.config, log_start_offset=self._log_start_offset,
                                  high_watermark=self._high_watermark, log_end_offset=self.log_end_offset,
                                  now_ms=self.clock() if now_ms is None else now_ms)

    async def delete_old_segments(self, now_ms: int | None = None) -> int:
        """One retention pass: log start offset breach always; retention.ms, retention.bytes and
        retention.min.timestamp under cleanup.policy=delete. Returns the segments deleted."""
        if self.offline:
            return 0
        with self._guard("retention"):
            count = self.retention_candidates(now_ms)
            if count == 0:
                return 0
            if count == len(self._segments):
                self._roll(self.log_end_offset)  # keep an active segment
            self._delete_segments(count)
            new_start = self._bases[0]
            if new_start > self._log_start_offset:
                self._set_log_start_offset(new_start, StartOffsetReason.SEGMENT_DELETION)
        await self._make_start_offset_durable()
        return count

    # --- truncation (followers) ------------------------------------------------------------------

    async def truncate_to(self, offset: int) -> bool:
        """Remove every batch that ends at or above `offset` (a batch straddling it goes whole, so
        the log end may land below `offset`). False if there was nothing to remove."""
        self._check_online()
        if offset < 0:
            raise OffsetOutOfRangeError(f"cannot truncate to {offset}")
        if offset >= self.log_end_offset:
            return False
        if offset < self._bases[0]:
            await self.truncate_fully_and_start_at(offset)
            return True
        with self._guard("truncate"):
            self._truncations += 1
            keep = bisect_right(self._bases, offset)
            doomed = len(self._segments) - keep
            if doomed:
                tail = self._segments[keep:]
                del self._segments[keep:]
                del self._bases[keep:]
                renamed: list[Path] = []
                for segment in tail:
                    renamed += segment.rename_to_deleted()
                self._dir_dirty = True
                self.io.delete_later(
                    self.config.file_delete_delay_ms, [s.file for s in tail], lambda: unlink_all(renamed)
                )
            removed = self._segments[-1].truncate_to(offset)
            end = self.log_end_offset
            self._log_start_offset = min(self._log_start_offset, end)
            self._high_watermark = min(self._high_watermark, end)
            self._recovery_point = min(self._recovery_point, end)
            self.epoch_cache.truncate_from_end(end)
        logger.info(
            "truncated log",
            partition=str(self.topic_partition),
            offset=offset,
            log_end_offset=end,
            segments_deleted=doomed,
            bytes_removed=removed,
        )
        await self._make_start_offset_durable()
        return True

    async def truncate_fully_and_start_at(self, offset: int) -> None:
        """Drop every segment and start empty at `offset` (a follower far behind its leader)."""
        self._check_online()
        if offset < 0:
            raise OffsetOutOfRangeError(f"cannot start the log at {offset}")
        with self._guard("truncate fully"):
            self._truncations += 1
            doomed = list(self._segments)
            renamed: list[Path] = []
            for segment in doomed:
                renamed += segment.rename_to_deleted()
            self.io.delete_later(
                self.config.file_delete_delay_ms, [s.file for s in doomed], lambda: unlink_all(renamed)
            )
            fresh = LogSegment.create(
                self.directory,
                offset,
                index_interval_bytes=self.config.index_interval_bytes,
                max_index_bytes=self.config.segment_index_bytes,
                now_ms=self.clock(),
            )
            self._segments, self._bases = [fresh], [offset]
            self._dir_dirty = True
            self._log_start_offset = self._high_watermark = self._recovery_point = offset
            self.epoch_cache.clear()
        logger.info("truncated log fully", partition=str(self.topic_partition), start_offset=offset)
        await self._make_start_offset_durable()

    # --- closing ---------------------------------------------------------------------------------

    async def close(self) -> None:
        """Clean close: seal the active segment (its max timestamp into the time index), flush
        everything, finish background work, close files. Pending deletions stay for next startup."""
        if not self.offline:
            self._segments[-1].seal()
            with contextlib.suppress(StorageError):
                await self.flush()
        await self.io.drain()
        for segment in self._segments:
            segment.close()

    def abandon(self) -> None:
        """Release files with no flush, as a crash would leave them (page cache aside)."""
        for segment in self._segments:
            segment.close()

    # --- loading ---------------------------------------------------------------------------------

    @classmethod
    def create(
        cls,
        directory: Path,
        config: LogConfig,
        *,
        io: LogIO | None = None,
        clock: Clock = wall_clock_ms,
        topic_id: uuid.UUID | None = None,
        start_offset: int = 0,
        durable: bool = True,
    ) -> PartitionLog:
        """Blocking: a new, empty partition directory (partition.metadata is durable before any data).
        `durable=False` skips the fsyncs: the caller makes a whole batch durable at once (`sync_filesystem`)
        before anything is appended."""
        directory.mkdir(parents=True, exist_ok=False)
        if topic_id is not None:
            checkpoint.write_partition_metadata(directory / checkpoint.PARTITION_METADATA, topic_id, sync=durable)
        segment = LogSegment.create(
            directory,
            start_offset,
            index_interval_bytes=config.index_interval_bytes,
            max_index_bytes=config.segment_index_bytes,
            now_ms=clock(),
        )
        if durable:
            checkpoint.fsync_dir(directory)
            checkpoint.fsync_dir(directory.parent)
        return cls(
            directory,
            config,
            [segment],
            io=io,
            clock=clock,
            log_start_offset=start_offset,
            recovery_point=start_offset,
            high_watermark=start_offset,
            topic_id=topic_id,
        )

    @classmethod
    def load(
        cls,
        directory: Path,
        config: LogConfig,
        *,
        io: LogIO | None = None,
        clock: Clock = wall_clock_ms,
        log_start_offset: int | None = None,
        recovery_point: int = 0,
        high_watermark: int | None = None,
        clean: bool = False,
    ) -> tuple[PartitionLog, LoadReport]:
        """Blocking: open a partition directory. After an unclean stop, every segment from the one
        holding `recovery_point` on is validated batch by batch and cut at the first bad batch; any
        segment whose indexes do not check out is rebuilt. The log start offset never moves below
        `log_start_offset`."""
        loaded = load_partition(
            directory,
            config,
            now_ms=clock(),
            log_start_offset=log_start_offset,
            recovery_point=recovery_point,
            high_watermark=high_watermark,
            clean=clean,
        )
        log = cls(
            directory,
            config,
            loaded.segments,
            io=io,
            clock=clock,
            log_start_offset=loaded.log_start_offset,
            recovery_point=loaded.log_end_offset,
            high_watermark=loaded.high_watermark,
            epoch_cache=loaded.epoch_cache,
            topic_id=loaded.topic_id,
        )
        return log, loaded.report


def _largest_timestamp(segment: LogSegment) -> int:
    # Kafka falls back to the file's mtime for segments whose batches carry no timestamp.
    if segment.max_timestamp >= 0:
        return segment.max_timestamp
    return os.stat(segment.file.path).st_mtime_ns // 1_000_000


def _run_flush(
    flushes: list[SegmentFlush], directory: Path, epochs: list[tuple[int, int]] | None, dir_dirty: bool
) -> None:
    errors: list[BaseException] = []
    for pending in flushes:
        try:
            pending.run()
        except OSError as exc:
            errors.append(exc)
    if errors:
        raise errors[0]
    if epochs is not None:
        checkpoint.write_leader_epochs(directory / checkpoint.LEADER_EPOCH_CHECKPOINT, epochs)
    elif dir_dirty:
        checkpoint.fsync_dir(directory)
