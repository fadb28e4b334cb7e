"""The ordered segments of one partition directory and the file work on them.

A `SegmentRun` knows files, not offsets' meaning: it rolls a new active segment, finds the segment
holding an offset, cuts whole batches into file slices, and retires segments (renamed `.deleted` at
once, unlinked by the LogIO pool after `file.delete.delay.ms`, or at once under `erasure.max.delay.ms`).
The PartitionLog decides which offsets are valid and when to call these.

It also knows the lowest offset whose bytes may still be in a file of the directory (`erased_offset`):
the first batch of the first segment, or of a retired segment not unlinked yet. Asked on the loop (a
metrics scrape, DescribeErasure, every start move), it reads no file there: the first segment's first
header is read once per first segment in the I/O pool, its base offset standing in until then.
"""

from __future__ import annotations

import asyncio
import os
from bisect import bisect_right
from collections.abc import Callable
from pathlib import Path

from broker.log import checkpoint
from broker.log.batch_read import compiled_run_slices
from broker.log.cleaner import open_for_reading
from broker.log.config import LogConfig
from broker.log.file_region import release_slices
from broker.log.io import LogIO
from broker.log.results import FileSlice
from broker.log.segment import LogSegment, SegmentFlush
from broker.log.segment_file import CorruptSegmentError, scan_headers


class SegmentRun:
    def __init__(
        self, directory: Path, config: LogConfig, segments: list[LogSegment], io: LogIO, clock: Callable[[], int]
    ) -> None:
        if not segments:
            raise ValueError("a partition log has at least one segment")
        self.directory = directory
        self.config = config
        self.io = io
        self.clock = clock
        self._segments = segments
        for segment in segments:  # opened ones draw their jitter again, as Kafka's do at load
            segment.roll_jitter_ms = config.random_segment_jitter()
        self._bases = [s.base_offset for s in segments]
        self.dir_dirty = False  # files were created or renamed since the last directory fsync
        # Retired segments not unlinked yet: a retirement's number -> its lowest base offset.
        self._unremoved: dict[int, int] = {}
        self._retirements = 0
        self._first_stored: tuple[LogSegment, int] | None = None  # (first segment, its first batch's base)
        self._reading_first: LogSegment | None = None  # the first segment whose first header the pool reads

    def __len__(self) -> int:
        return len(self._segments)

    @property
    def active(self) -> LogSegment:
        return self._segments[-1]

    @property
    def first_base(self) -> int:
        return self._bases[0]

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    @property
    def erased_offset(self) -> int:
        """Below it no byte of a record is in a file of the directory (conservative: a segment's base
        stands for its first batch until that batch is read)."""
        return min([self.first_stored_offset(), *self._unremoved.values()])

    def first_stored_offset(self) -> int:
        """The base offset of the first segment's first batch (its base when it holds none, or until
        the pool has read that header: conservative)."""
        first = self._segments[0]
        if first.size == 0:
            return first.base_offset
        if self._first_stored is not None and self._first_stored[0] is first:
            return self._first_stored[1]
        try:
            asyncio.get_running_loop()
        except RuntimeError:  # no loop (tools, tests): nothing to block but the caller
            self._first_stored = (first, first_batch_base(first.log_path, first.size, first.base_offset))
            return self._first_stored[1]
        if self._reading_first is not first:
            self._reading_first = first
            self.io.spawn(self._read_first_stored(first), f"first batch of {first.log_path}")
        return first.base_offset

    async def _read_first_stored(self, first: LogSegment) -> None:
        try:
            found = await self.io.run(first_batch_base, first.log_path, first.size, first.base_offset)
        finally:
            if self._reading_first is first:
                self._reading_first = None
        self._first_stored = (first, found)

    def all(self) -> list[LogSegment]:
        """A copy of the list, oldest first."""
        return list(self._segments)

    def index_of(self, offset: int) -> int:
        """The segment holding `offset` (the first one for offsets below it)."""
        return max(bisect_right(self._bases, offset) - 1, 0)

    def from_offset(self, offset: int) -> list[LogSegment]:
        """The segments from the one holding `offset` on."""
        return self._segments[self.index_of(offset) :]

    def count_wholly_below(self, offset: int) -> int:
        """How many oldest segments hold only offsets below `offset` (never the active one)."""
        count = 0
        while count + 1 < len(self._segments) and self._bases[count + 1] <= offset:
            count += 1
        return count

    def new_segment(self, base_offset: int) -> LogSegment:
        segment = LogSegment.create(
            self.directory,
            base_offset,
            index_interval_bytes=self.config.index_interval_bytes,
            max_index_bytes=self.config.index_bytes,
            now_ms=self.clock(),
        )
        segment.roll_jitter_ms = self.config.random_segment_jitter()
        return segment

    def roll(self, base_offset: int) -> LogSegment:
        """Seal the active segment and start a new one at `base_offset`."""
        self._segments[-1].seal()
        segment = self.new_segment(base_offset)
        self._segments.append(segment)
        self._bases.append(base_offset)
        self.dir_dirty = True
        return segment

    def retire_oldest(self, count: int) -> list[LogSegment]:
        doomed = self._segments[:count]
        del self._segments[:count]
        del self._bases[:count]
        self._retire(doomed)
        return doomed

    def retire_above(self, offset: int) -> int:
        """Retire every segment whose base is above `offset`; the one holding it stays. Returns how many."""
        keep = bisect_right(self._bases, offset)
        doomed = self._segments[keep:]
        del self._segments[keep:]
        del self._bases[keep:]
        self._retire(doomed)
        return len(doomed)

    def replace(self, old: list[LogSegment], new: LogSegment, swap_suffix: str,
                between: Callable[[], None] | None = None) -> None:
        """Put the cleaner's (or erasure's) `new` in place of the consecutive closed segments `old` (the
        caller has checked they are still here). Each rename is atomic and a restart finishes what a crash
        interrupts (loader.py): `.cleaned` -> `.swap`, the old files -> `.deleted`, `.swap` -> final."""
        first = self._segments.index(old[0])
        # Made outside (LogSegment.create), it draws its roll jitter as new_segment's do: a truncation
        # may make it the active segment.
        new.roll_jitter_ms = self.config.random_segment_jitter()
        new.rename_suffix(swap_suffix)
        self._segments[first : first + len(old)] = [new]
        self._bases[first : first + len(old)] = [new.base_offset]
        self._retire(old)
        if between is not None:  # a test's stop point
            between()
        new.rename_suffix("")

    def restart_at(self, offset: int) -> None:
        """Retire every segment and start over with one empty segment at `offset`."""
        doomed = self._segments
        self._retire(doomed)
        self._segments, self._bases = [self.new_segment(offset)], [offset]
        self.dir_dirty = True

    def _retire(self, doomed: list[LogSegment]) -> None:
        if not doomed:
            return
        renamed: list[Path] = []
        for segment in doomed:
            renamed += segment.rename_to_deleted()
        self.dir_dirty = True
        files = [s.file for s in doomed]
        self._retirements += 1
        token = self._retirements
        self._unremoved[token] = min(s.base_offset for s in doomed)

        async def remove() -> None:
            await self.io.remove_files(renamed)
            self._unremoved.pop(token, None)

        # Under erasure no reader is waited for: one still sending from a file keeps its blocks until it closes it.
        delay = 0 if self.config.erasure_enabled else self.config.file_delete_delay_ms
        self.io.delete_later(delay, files, remove)

    def slices(self, offset: int, max_bytes: int, upper: int, min_one_batch: bool, pinned: bool = False
               ) -> tuple[list[FileSlice], int]:
        """Whole batches from the one holding `offset`, at most `max_bytes` (one batch at least when
        `min_one_batch`), none reaching `upper`. Returns the slices and the offset a reader continues at.
        `pinned`: each slice's file stays pinned once for the caller (LogSegment.read)."""
        if pinned and compiled_run_slices is not None:  # a Fetch's read in one segment: one compiled call
            found = compiled_run_slices(self._segments, self._bases, offset, max_bytes, upper, min_one_batch)
            if found is not NotImplemented:
                return found
        slices: list[FileSlice] = []
        remaining = max_bytes
        i = self.index_of(offset)
        next_offset = offset
        try:
            while offset < upper and i < len(self._segments) and (remaining > 0 or not slices):
                segment = self._segments[i]
                bounded = upper < segment.next_offset
                max_position = segment.position_of(upper) if bounded else segment.size
                found = segment.read(offset, remaining, max_position, min_one_batch and not slices, pinned)
                if found is None:
                    if offset < segment.next_offset and segment.size:
                        break  # the next batch does not fit (size or bound); a cleaned segment may be empty
                else:
                    position, length, next_offset = found
                    slices.append(FileSlice(segment.file, position, length))
                    remaining -= length
                    if bounded or position + length < segment.size:
                        break
                offset = max(offset, segment.next_offset)
                i += 1
        except BaseException:
            if pinned:  # a later segment failed: the pins taken so far go with the read
                release_slices((slices,))
            raise
        return slices, (next_offset if slices else offset)

    def close(self) -> None:
        for segment in self._segments:
            segment.close()


def first_batch_base(path: Path, size: int, base_offset: int) -> int:
    """Blocking: the base offset of the first batch of the segment at `path` (by its `.deleted` name
    if it was retired meanwhile); `base_offset` when it holds none or cannot be read (conservative:
    the caller's next file operation reports a damaged or missing file)."""
    try:
        fd = open_for_reading(path)
    except OSError:
        return base_offset
    try:
        found = next(scan_headers(fd, 0, size), None)
    except (OSError, CorruptSegmentError, ValueError):
        return base_offset
    finally:
        os.close(fd)
    return found[1].base_offset if found is not None else base_offset


def sync_to_disk(
    flushes: list[SegmentFlush], directory: Path, epochs: list[tuple[int, int]] | None, dir_dirty: bool
) -> None:
    """Blocking (the LogIO pool): fsync the prepared segments, then write the leader epoch checkpoint,
    whose atomic rename syncs the directory too; otherwise sync the directory if entries changed."""
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
