"""The log of one partition as its callers use it: append, read, move the start, retention,
truncation, erasure and the cleaner's swaps, on the state kept by LogState (log_state.py).

Appends write to the page cache with os.write, which takes microseconds; the flush policy
(`flush.messages`) may then wait for an fsync in the I/O pool.

The log start offset lives in the log dir's `log-start-offset-checkpoint`, which the LogManager owns;
it plugs in `start_offset_sink`, which `make_start_offset_durable` waits for, and tells the log which
start each write of that file carried (`start_offset_checkpointed`): the log alone keeps what of its
start is durable. A log used on its own keeps its start offset in memory only.
"""
from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable

import structlog

from broker.log.batch_check import check_batches
from broker.log.batch_read import compiled_log_read
from broker.log.common import (
    NO_TIMESTAMP,
    InvalidRecordError,
    LogError,
    Offset,
    OffsetOutOfRangeError,
    PolicyViolationError,
    StartOffsetReason,
    StorageError,
)
from broker.log.compacted_keys import refuse_keyless_records
from broker.log.config import LogConfig
from broker.log.erasure import Erasure, ErasureTarget
from broker.log.free_space import is_out_of_space
from broker.log.log_state import LogState
from broker.log.results import AppendInfo, ReadBound, ReadInfo, TimestampOffset
from broker.log.retention import SegmentFacts, deletable_segments
from broker.log.segment import BatchInfo, CorruptSegmentError, LogSegment
from broker.log.timestamp_search import first_at_or_after, largest_timestamp, largest_timestamp_batch
from broker.log.txn_index import AbortedTxn
from protocol.enums import SpecialTimestamp
from protocol.errors import ErrorCode
from protocol.records import assign_offsets as stamp_batch
from protocol.records import set_log_append_time

logger = structlog.get_logger(__name__)

_INT64_MIN = -(1 << 63)


class PartitionLog(LogState):
    """LogState and what callers do with it: append, read, move the start, retention, truncation,
    erasure and the cleaner's segment swaps, close."""

    @property
    def config(self) -> LogConfig:
        return self._config

    @config.setter
    def config(self, config: LogConfig) -> None:
        """A topic config change: the segments follow it, and turning erasure on erases what is due."""
        self._config = self._run.config = config
        self.erasure.schedule()

    @functools.cached_property
    def erasure(self) -> Erasure:
        return Erasure(self)

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
        self, records: bytes | bytearray | memoryview, *, leader_epoch: int = -1, assign_offsets: bool = True,
        keys_checked: bool = False,
    ) -> AppendInfo:
        """`append` without the flush policy: never waits (the caller flushes if it must). A bytearray
        or a writable memoryview (a request frame's records) is stamped in place; read-only bytes are
        copied first. `keys_checked`: the leader's validator already read every record under this
        config (a compacted topic's keyless check would decode them a second time)."""
        self._check_online()
        if isinstance(records, bytearray) or (isinstance(records, memoryview) and not records.readonly
                                              and records.format == "B" and records.ndim == 1):
            buf = records
        else:
            buf = bytearray(records)
        now = self.clock()
        batches = check_batches(buf, self.config, from_producer=assign_offsets)
        if assign_offsets and self.config.compact_enabled and not keys_checked:
            refuse_keyless_records(buf, [batch[0] for batch in batches], self.topic_partition)
        if not batches:
            end = self.log_end_offset
            return AppendInfo(end, Offset(end - 1), NO_TIMESTAMP, NO_TIMESTAMP, self.log_start_offset, 0, 0)
        infos: list[BatchInfo] = []
        segment = self._run.active
        next_offset: int = segment.next_offset
        config = self.config
        log_append_time = assign_offsets and config.log_append_time
        max_timestamp = _INT64_MIN  # of the batches as written (the append time under LogAppendTime)
        for position, size, base, delta, max_ts, epoch in batches:
            if assign_offsets:
                base, epoch = next_offset, leader_epoch
                stamp_batch(buf, position, base, epoch)
                if log_append_time:
                    set_log_append_time(buf, position, now)
                    max_ts = now
            elif base < next_offset:
                raise InvalidRecordError(
                    ErrorCode.INVALID_RECORD,
                    f"{self.topic_partition}: batch at offset {base} is below the log end {next_offset}",
                )
            infos.append(BatchInfo(position, base, base + delta, size, max_ts, epoch))
            next_offset = base + delta + 1
            if max_ts > max_timestamp:
                max_timestamp = max_ts
        first, last = infos[0], infos[-1]
        if self.space is not None:
            self.space.admit(len(buf), into_reserve=self.writes_into_reserve)
        try:  # self._guard("append") spelled out (online checked above): a generator context manager costs ~2 µs
            if segment.should_roll(len(buf), max_timestamp, last.last_offset, config.segment_bytes, config.segment_ms,
                                   now):
                segment = self._roll(first.base_offset)
            segment.append(buf if isinstance(buf, memoryview) else memoryview(buf), infos)
        except (OSError, CorruptSegmentError) as exc:
            if isinstance(exc, OSError) and is_out_of_space(exc):
                raise self._out_of_space(segment, exc) from exc
            raise self._fail("append", exc) from exc
        if assign_offsets:  # one epoch for the whole run
            self.epoch_cache.assign(leader_epoch, first.base_offset)
        else:
            for info in infos:
                self.epoch_cache.assign(info.leader_epoch, info.base_offset)
        return AppendInfo(first.base_offset, last.last_offset, now if log_append_time else NO_TIMESTAMP,
                          max_timestamp, self._log_start_offset, len(infos), len(buf))

    # --- reading ---------------------------------------------------------------------------------

    def read(
        self,
        offset: int,
        max_bytes: int,
        *,
        bound: ReadBound = ReadBound.HIGH_WATERMARK,
        min_one_batch: bool = True,
        max_offset: int | None = None,
        pinned: bool = False,
    ) -> ReadInfo:
        """Whole batches from the one holding `offset`, at most `max_bytes` (but one batch at least
        when `min_one_batch`), never past `bound`. Nothing is copied: the result names file ranges.

        OFFSET_OUT_OF_RANGE below the log start offset or above the log end offset; an empty result
        at the bound. The first batch may begin below `offset` (and below the log start offset):
        clients skip records they did not ask for. `max_offset` bounds the read further (a
        READ_COMMITTED reader's last stable offset). `pinned`: each slice's segment file stays pinned
        once, for the caller to hand to a FileRegion or let go (broker/log/file_region.py's release_slices).
        """
        # self._guard("read") spelled out, its online check inside (once per partition of every fetch);
        # the compiled read's I/O errors are worded as the Python run's
        try:
            if pinned and compiled_log_read is not None:  # a Fetch's read in one segment: one compiled call
                found = compiled_log_read(self, offset, max_bytes, bound is ReadBound.HIGH_WATERMARK, min_one_batch,
                                          max_offset)
                if found is not NotImplemented:
                    return found
            self._check_online()
            start, end = self._log_start_offset, self._run.active.next_offset
            if offset < start or offset > end:
                raise OffsetOutOfRangeError(
                    f"{self.topic_partition}: offset {offset} is outside [{start}, {end}]"
                )
            high_watermark = self._high_watermark
            upper = high_watermark if bound is ReadBound.HIGH_WATERMARK else end
            if max_offset is not None:
                upper = min(upper, max_offset)
            slices, next_offset = self._run.slices(offset, max_bytes, upper, min_one_batch, pinned)
        except (OSError, CorruptSegmentError) as exc:
            raise self._fail("read", exc) from exc
        return ReadInfo(tuple(slices), Offset(next_offset), Offset(high_watermark), Offset(start), Offset(end))

    def offset_for_timestamp(self, timestamp: int) -> TimestampOffset | None:
        """ListOffsets at the log level. EARLIEST (-2, and -4) is the log start offset, LATEST (-1)
        the log end offset, MAX_TIMESTAMP (-3) the first batch holding the largest timestamp, and
        t >= 0 the first record at or after the log start offset whose timestamp is >= t (None if
        there is none; only the batch holding it is decoded). MAX_TIMESTAMP stays at batch
        granularity. Capping at the high watermark is the caller's business (it depends on the
        isolation level)."""
        self._check_online()
        start = self._log_start_offset
        if timestamp in (SpecialTimestamp.EARLIEST, SpecialTimestamp.EARLIEST_LOCAL):
            return TimestampOffset(NO_TIMESTAMP, Offset(start), self.epoch_cache.epoch_at(start))
        if timestamp == SpecialTimestamp.LATEST:
            return TimestampOffset(NO_TIMESTAMP, self.log_end_offset, self.epoch_cache.latest_epoch)
        with self._guard("offset for timestamp"):
            if timestamp < 0 and timestamp != SpecialTimestamp.MAX_TIMESTAMP:
                raise LogError(ErrorCode.INVALID_REQUEST, f"unknown special timestamp {timestamp}")
            segments = self._run.from_offset(start)
            if timestamp == SpecialTimestamp.MAX_TIMESTAMP:
                found = largest_timestamp_batch(segments, start)
            else:
                found = first_at_or_after(segments, timestamp, start)
        if found is None:
            return None
        return TimestampOffset(found[0], Offset(found[1]), self.epoch_cache.epoch_at(found[1]))

    # --- aborted transactions ----------------------------------------------------------------------

    def record_aborted_txn(self, entry: AbortedTxn) -> None:
        """An ABORT marker at `entry.last_offset` was written (or replayed): index it in its segment.
        It is in memory even when writing `.txnindex` fails; that failure takes the partition offline
        (KAFKA_STORAGE_ERROR), and the next load replays the marker into the index."""
        base = self._run.all()[self._run.index_of(entry.last_offset)].base_offset
        with self._guard("index aborted transaction"):
            self.aborted_txns.append(entry, base)

    def forget_aborted_txns_from(self, offset: int) -> None:
        """A producer state replay from `offset` is about to index the aborts it meets again."""
        self.aborted_txns.truncate_from(offset, [s.base_offset for s in self._run.all()])

    # --- moving the start ------------------------------------------------------------------------

    def move_log_start_offset(
        self, offset: int, reason: StartOffsetReason = StartOffsetReason.CLIENT_RECORD_DELETION
    ) -> Offset:
        """Move the log start offset up to `offset` (DeleteRecords, a leader's start seen by a
        follower) and return it. A no-op success at or below the current one; OFFSET_OUT_OF_RANGE above
        the high watermark; POLICY_VIOLATION for a client deletion without `cleanup.policy=delete`.
        Segments wholly below it are deleted. The move is in memory on return: `make_start_offset_durable`
        waits for the checkpoint, so that moving many logs first and then waiting lets one checkpoint
        write cover them all."""
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
                active = self._run.active
                if self.space is not None and self.space.low and offset > active.base_offset and active.size:
                    self._roll(self.log_end_offset)  # on a low dir the active segment goes once the start passes it
                self._delete_segments(self._run.count_wholly_below(self._log_start_offset))
            self.erasure.schedule()
        return self.log_start_offset

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

    def _delete_segments(self, count: int) -> None:
        """Drop the `count` oldest segments: renamed `.deleted` now, removed after the delay."""
        if count <= 0:
            return
        doomed = self._run.retire_oldest(count)
        self.aborted_txns.drop_below(self._run.first_base)
        logger.info(
            "deleting segments", partition=str(self.topic_partition), bases=[s.base_offset for s in doomed]
        )

    async def make_start_offset_durable(self, force: bool = False) -> None:
        """Return once the current log start offset is on disk (at once when it already is, or when
        the log keeps it in memory only). Without `force` the checkpoint is written only under
        `log.start.offset.checkpoint.sync` (else its periodic write takes the start along)."""
        if self.start_offset_sink is not None and self._durable_log_start_offset != self._log_start_offset:
            await self.start_offset_sink(force)

    @property
    def durable_log_start_offset(self) -> int:
        """The log start offset the last checkpoint write carried."""
        return self._durable_log_start_offset

    def start_offset_checkpointed(self, offset: int) -> None:
        """A write of the start offset checkpoint that carried `offset` for this log reached the disk."""
        self._durable_log_start_offset = offset

    # --- retention -------------------------------------------------------------------------------

    def retention_candidates(self, now_ms: int | None = None) -> int:
        """How many oldest segments retention would delete now (broker/log/retention.py)."""
        facts = [SegmentFacts(seg.base_offset, seg.size, largest_timestamp(seg)) for seg in self._run.all()]
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
            if count == len(self._run):
                self._roll(self.log_end_offset)  # keep an active segment
            self._delete_segments(count)
            new_start = self._run.first_base
            if new_start > self._log_start_offset:
                self._set_log_start_offset(new_start, StartOffsetReason.SEGMENT_DELETION)
        await self.make_start_offset_durable()
        return count

    # --- erasure (broker/log/erasure.py) -------------------------------------------------------------

    @property
    def erased_offset(self) -> Offset:
        """Below it no byte of a record is in any file of this replica's partition directory."""
        return Offset(self._run.erased_offset)

    def erasable_offset(self) -> Offset:
        """How far erasure can go for the current start: the base offset of the batch holding the log
        start offset (kept whole), or the start itself at a batch boundary."""
        start = self._log_start_offset
        segment = self._run.all()[self._run.index_of(start)]
        if segment.base_offset >= start:
            return Offset(start)
        with self._guard("find the batch holding the log start offset"):
            found = segment.translate_offset(start)
        return Offset(found[1].base_offset if found is not None and found[1].base_offset < start else start)

    def erasure_target(self) -> ErasureTarget | None:
        """The first segment, if it holds bytes below the log start offset, and where its kept batches
        begin; an active segment is rolled first (and deleted if all of it is below the start)."""
        start = self._log_start_offset
        if not self._config.erasure_enabled:
            return None
        with self._guard("erase"):
            # Segments wholly below the start go first (no known path leaves one: the loader and every
            # move of the start drop them): a copy named by the start would take the next one's name.
            self._delete_segments(self._run.count_wholly_below(start))
            first = self._run.all()[0]
            if first.base_offset >= start:
                return None
            found = first.translate_offset(start)
            if found is not None and found[0] == 0:
                return None  # its first batch holds the start: kept whole
            if first is self._run.active:
                self._roll(self.log_end_offset)
                if found is None:  # all of it below the start
                    self._delete_segments(self._run.count_wholly_below(start))
                    return None
        position, new_base = (first.size, start) if found is None else (found[0], found[1].base_offset)
        end = self._run.all()[1].base_offset
        if not first.base_offset < new_base < end:  # never: the copy's name must be inside its segment
            logger.error("erasure copy out of its segment", partition=str(self.topic_partition),
                         segment=first.base_offset, copy=new_base, next_segment=end)
            return None
        aborted = tuple(t for t in self.aborted_txns.entries if new_base <= t.last_offset < end)
        return ErasureTarget(first, first.log_path, position, new_base, first.size, first.next_offset, aborted,
                             self._truncations)

    @property
    def truncations(self) -> int:
        """How many truncations this log has had (an erasure copy is stale after one)."""
        return self._truncations

    # --- compaction --------------------------------------------------------------------------------

    def replace_segments(self, old: list[LogSegment], new: LogSegment, swap_suffix: str,
                         between: Callable[[], None] | None = None, aborted_txns: list[AbortedTxn] | None = None
                         ) -> bool:
        """Swap the cleaner's segment in for `old` if they are still this log's closed segments, as the
        cleaner read them (retention, truncation or a roll-back may have changed them meanwhile).
        False when they are not: the caller removes `new`. `aborted_txns`: the entries of `new`'s
        `.txnindex`, which replace those of `old` in memory."""
        self._check_online()
        segments = self._run.all()
        try:
            first = next(i for i, s in enumerate(segments) if s is old[0])
        except StopIteration:
            return False
        if segments[first : first + len(old)] != old or first + len(old) >= len(segments):
            return False
        end = segments[first + len(old)].base_offset
        if not old[0].base_offset <= new.base_offset < end:
            return False  # its name would be another segment's: renaming it in would overwrite that one
        with self._guard("swap cleaned segment"):
            self._run.replace(old, new, swap_suffix, between)
        self.aborted_txns.replace_range(new.base_offset, end, aborted_txns or [])
        self.aborted_txns.drop_below(self._run.first_base)  # an erasure copy begins above its segment's base
        return True

    # --- truncation (followers) ------------------------------------------------------------------

    async def truncate_to(self, offset: int) -> bool:
        """Remove every batch that ends at or above `offset` (a batch straddling it goes whole, so
        the log end may land below `offset`). False if there was nothing to remove."""
        self._check_online()
        if offset < 0:
            raise OffsetOutOfRangeError(f"cannot truncate to {offset}")
        if offset >= self.log_end_offset:
            return False
        if offset < self._run.first_base:
            await self.truncate_fully_and_start_at(offset)
            return True
        with self._guard("truncate"):
            self._truncations += 1
            doomed = self._run.retire_above(offset)
            removed = self._run.active.truncate_to(offset)
            end = self.log_end_offset
            self.aborted_txns.truncate_from(end, [s.base_offset for s in self._run.all()])
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
        await self.make_start_offset_durable()
        return True

    async def truncate_fully_and_start_at(self, offset: int) -> None:
        """Drop every segment and start empty at `offset` (a follower far behind its leader)."""
        self._check_online()
        if offset < 0:
            raise OffsetOutOfRangeError(f"cannot start the log at {offset}")
        with self._guard("truncate fully"):
            self._truncations += 1
            self._run.restart_at(offset)
            self.aborted_txns.clear()  # its files went with the segments
            self._log_start_offset = self._high_watermark = self._recovery_point = offset
            self.epoch_cache.clear()
        logger.info("truncated log fully", partition=str(self.topic_partition), start_offset=offset)
        await self.make_start_offset_durable()

    # --- closing ---------------------------------------------------------------------------------

    async def close(self) -> None:
        """Clean close: seal the active segment (its max timestamp into the time index), flush
        everything, finish background work, close files. Pending deletions stay for next startup."""
        self.erasure.stop()
        if not self.offline:
            self._run.active.seal()
            with contextlib.suppress(StorageError):
                await self.flush()
        await self.io.drain()
        self._run.close()

    def abandon(self) -> None:
        """Release files with no flush, as a crash would leave them (page cache aside)."""
        self.erasure.stop()
        self._run.close()
