"""One log segment: a `.log` file of record batches plus its `.index` and `.timeindex` (and the
`.txnindex` of its aborted transactions, kept by broker/log/txn_index.py).

The `.log` file is opened O_APPEND, so writes land at its end even after a truncation. Appends go to
the page cache (os.write); fsync happens only in `prepare_flush`'s blocking half, which the log runs
in an executor. Reads never copy batches: they return byte ranges of the file.

Only batch headers are ever parsed here, and only the fields the log needs.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import structlog

from broker.log.batch_read import NO_RESUME, Resume, compiled_read_batches, find_batch, read_batches
from broker.log.common import DELETED_SUFFIX, LOG_SUFFIX, NO_TIMESTAMP, TXN_INDEX_SUFFIX, segment_paths
from broker.log.index import INT32_MAX, CorruptIndexError, OffsetIndex, TimeIndex
from broker.log.segment_file import (
    BatchInfo,
    CorruptSegmentError,
    SegmentFile,
    SegmentFlush,
    scan_headers,
)
from protocol.errors import ProtocolError
from protocol.records import BATCH_HEADER_SIZE, LOG_OVERHEAD, BatchHeader, RecordBatch, batch_size_at

logger = structlog.get_logger(__name__)

_RECOVERY_CHUNK = 8 * 1024 * 1024


@dataclass(slots=True)
class RecoveryResult:
    valid_bytes: int
    truncated_bytes: int
    batches: int
    reason: str | None = None
    epoch_starts: list[tuple[int, int]] = field(default_factory=list)


class LogSegment:
    def __init__(
        self,
        directory: Path,
        base_offset: int,
        file: SegmentFile,
        *,
        index_interval_bytes: int,
        max_index_bytes: int,
        created_ms: int,
        suffix: str = "",
    ) -> None:
        self.directory = directory
        self.base_offset = base_offset
        self.suffix = suffix  # "" for a live segment; the cleaner's `.cleaned`/`.swap` while it replaces others
        self.log_path, index_path, time_index_path = (
            path.with_name(path.name + suffix) for path in segment_paths(directory, base_offset))
        self.file = file
        self.index = OffsetIndex(index_path, base_offset, max_index_bytes // OffsetIndex.entry_size)
        self.time_index = TimeIndex(time_index_path, base_offset, max_index_bytes // TimeIndex.entry_size)
        self.index_interval_bytes = index_interval_bytes
        self.created_ms = created_ms
        self.roll_jitter_ms = 0  # its roll comes this much before segment.ms (the log draws it: segment.jitter.ms)
        self.size = 0
        self.next_offset = base_offset
        self.max_timestamp = NO_TIMESTAMP
        self.offset_of_max_timestamp = base_offset
        self.first_batch_timestamp = NO_TIMESTAMP
        self._bytes_since_index_entry = 0
        self.deleted = False
        # (offset, position, header) where the last read stopped: the first offset it did not return,
        # where the batch holding it starts (or the end of the file then) and that batch's header if
        # the read's walk already read it (None: read it then). A consumer's next fetch asks for exactly
        # that offset: its batch is found without the index, a header walk or, mostly, a pread. The
        # file is append-only: only a truncation rewrites it from a position on, and it forgets this.
        self._resume: Resume = NO_RESUME

    def __repr__(self) -> str:
        return f"LogSegment(base={self.base_offset}, next={self.next_offset}, size={self.size})"

    # -- creating and opening --

    @classmethod
    def create(
        cls,
        directory: Path,
        base_offset: int,
        *,
        index_interval_bytes: int,
        max_index_bytes: int,
        now_ms: int,
        suffix: str = "",
    ) -> LogSegment:
        log_path, index_path, time_index_path = (
            path.with_name(path.name + suffix) for path in segment_paths(directory, base_offset))
        file = SegmentFile(log_path, os.open(log_path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC, 0o644))
        for path in (index_path, time_index_path):
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644))
        return cls(
            directory,
            base_offset,
            file,
            index_interval_bytes=index_interval_bytes,
            max_index_bytes=max_index_bytes,
            created_ms=now_ms,
            suffix=suffix,
        )

    @classmethod
    def open(
        cls,
        directory: Path,
        base_offset: int,
        *,
        index_interval_bytes: int,
        max_index_bytes: int,
        now_ms: int,
        suffix: str = "",
    ) -> LogSegment:
        """Open an existing segment without looking at its batches (blocking). Call `load_indexes`
        or `recover` next."""
        log_path = segment_paths(directory, base_offset)[0]
        log_path = log_path.with_name(log_path.name + suffix)
        fd = os.open(log_path, os.O_RDWR | os.O_APPEND)
        size = os.fstat(fd).st_size
        segment = cls(
            directory,
            base_offset,
            SegmentFile(log_path, fd),
            index_interval_bytes=index_interval_bytes,
            max_index_bytes=max_index_bytes,
            created_ms=now_ms,
            suffix=suffix,
        )
        segment.size = size
        return segment

    def load_indexes(self) -> None:
        """Trust the flushed segment: read its indexes and the tail after the last index entry
        (blocking). Raises CorruptIndexError or CorruptSegmentError; the caller then recovers."""
        with self.file.held() as fd:
            self._load_indexes(fd)

    def _load_indexes(self, fd: int) -> None:
        if self.size > INT32_MAX:
            raise CorruptSegmentError(f"{self.log_path} is larger than a 32-bit position")
        self.index.load()
        self.time_index.load()
        self.index.check(self.size)
        tail_start = self.index.lookup(2**63 - 1)[1] if len(self.index) else 0
        self.max_timestamp, self.offset_of_max_timestamp = self.time_index.last_entry
        last: BatchHeader | None = None
        for position, batch in scan_headers(fd, tail_start, self.size):
            if batch.base_offset < self.base_offset or (
                last is not None and batch.base_offset <= last.last_offset
            ):
                raise CorruptSegmentError(f"{self.log_path}: offsets out of order at {position}")
            if batch.max_timestamp > self.max_timestamp:
                self.max_timestamp, self.offset_of_max_timestamp = batch.max_timestamp, batch.last_offset
            last = batch
        if last is not None:
            self.next_offset = last.last_offset + 1
        elif self.size:
            raise CorruptSegmentError(f"{self.log_path}: no batch after the last index entry")
        self.time_index.check(self.next_offset)
        self._bytes_since_index_entry = self.size - tail_start
        self._load_first_timestamp(fd)

    def _load_first_timestamp(self, fd: int) -> None:
        self.first_batch_timestamp = NO_TIMESTAMP
        if self.size:
            self.first_batch_timestamp = next(scan_headers(fd, 0, self.size))[1].max_timestamp

    def recover(self, max_batch_size: int) -> RecoveryResult:
        """Validate every batch, rebuild both indexes, cut the file at the first bad batch (blocking)."""
        with self.file.held() as fd:
            return self._recover(fd, max_batch_size)

    def _recover(self, fd: int, max_batch_size: int) -> RecoveryResult:
        self.index.clear()
        self.time_index.clear()
        self.next_offset = self.base_offset
        self.max_timestamp, self.offset_of_max_timestamp = NO_TIMESTAMP, self.base_offset
        self._bytes_since_index_entry = 0
        result = RecoveryResult(0, 0, 0)
        file_size = os.fstat(fd).st_size
        last_epoch = None
        position = 0
        chunk, chunk_start = b"", 0
        while position < file_size:
            rel = position - chunk_start
            if rel + LOG_OVERHEAD > len(chunk):
                chunk, chunk_start, rel = os.pread(fd, _RECOVERY_CHUNK, position), position, 0
            if rel + LOG_OVERHEAD > len(chunk):
                result.reason = "torn batch header at the end"
                break
            size = batch_size_at(chunk, rel)
            if size < BATCH_HEADER_SIZE or size > max_batch_size:
                result.reason = f"batch at {position} claims {size} bytes"
                break
            if position + size > file_size:
                result.reason = f"batch at {position} is cut short ({file_size - position} of {size} bytes)"
                break
            if rel + size > len(chunk):
                chunk, chunk_start, rel = (
                    os.pread(fd, max(size, _RECOVERY_CHUNK), position),
                    position,
                    0,
                )
                if size > len(chunk):
                    result.reason = f"batch at {position} is cut short ({len(chunk)} of {size} bytes)"
                    break
            try:
                batch = RecordBatch(chunk, rel)
                batch.validate()
            except ProtocolError as exc:
                result.reason = f"batch at {position}: {exc.message}"
                break
            base, last = batch.base_offset, batch.last_offset
            if base < max(self.base_offset, self.next_offset) or last - self.base_offset > INT32_MAX:
                result.reason = f"batch at {position} has offsets {base}..{last} out of order"
                break
            epoch = batch.partition_leader_epoch
            if epoch >= 0 and epoch != last_epoch:
                result.epoch_starts.append((epoch, base))
                last_epoch = epoch
            self._index_batch(position, size, last, batch.max_timestamp)
            self.next_offset = last + 1
            result.batches += 1
            position += size
        result.valid_bytes = position
        result.truncated_bytes = file_size - position
        if result.truncated_bytes:
            os.ftruncate(fd, position)
        self.size = position
        self._load_first_timestamp(fd)
        self.index.write_all()
        self.time_index.write_all()
        return result

    # -- appending --

    def _index_batch(self, position: int, size: int, last_offset: int, max_timestamp: int) -> None:
        # Kafka's rule: index a batch once more than index.interval.bytes lie between the last indexed
        # batch and it. Appends and recovery share this, so a rebuilt index equals the original.
        if max_timestamp > self.max_timestamp:
            self.max_timestamp, self.offset_of_max_timestamp = max_timestamp, last_offset
        if self._bytes_since_index_entry > self.index_interval_bytes:
            self.index.append(last_offset, position)
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self._bytes_since_index_entry = 0
        self._bytes_since_index_entry += size

    def append(self, data: memoryview, batches: list[BatchInfo]) -> None:
        """Write `data` (batches back to back; positions in `batches` are relative to it)."""
        start = self.size
        view = data
        with self.file.held() as fd:
            while view:
                view = view[os.write(fd, view) :]
        if start == 0 and batches:
            self.first_batch_timestamp = batches[0].max_timestamp
        for batch in batches:
            self._index_batch(start + batch.position, batch.size, batch.last_offset, batch.max_timestamp)
        self.size = start + len(data)
        if batches:
            self.next_offset = batches[-1].last_offset + 1

    def discard_unrecorded_tail(self) -> None:
        """Cut the bytes a failed append left past `size` (the disk filled half way through a write)."""
        with self.file.held() as fd:
            os.ftruncate(fd, self.size)

    def should_roll(
        self,
        incoming_bytes: int,
        incoming_max_timestamp: int,
        last_offset: int,
        segment_bytes: int,
        segment_ms: int,
        now_ms: int,
    ) -> bool:
        if self.size == 0:
            return False
        if self.size + incoming_bytes > segment_bytes:
            return True
        if self.first_batch_timestamp >= 0 and incoming_max_timestamp >= 0:
            waited = incoming_max_timestamp - self.first_batch_timestamp
        else:
            waited = now_ms - self.created_ms
        if waited > segment_ms - self.roll_jitter_ms:
            return True
        return self.index.is_full or self.time_index.is_full or last_offset - self.base_offset > INT32_MAX

    def seal(self) -> None:
        """No more appends: record the segment's max timestamp as the last time index entry, so a
        restart finds it without reading batches."""
        if self.max_timestamp >= 0:
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)

    # -- reading (headers only, bounded by the index) --

    def translate_offset(self, offset: int) -> tuple[int, BatchHeader] | None:
        """(position, header) of the first batch whose last offset is at or above `offset`, or None."""
        if offset >= self.next_offset:
            return None
        with self.file.held() as fd:
            return find_batch(fd, offset, self.size, self._resume, self.index)

    def position_of(self, offset: int) -> int:
        """Where the batch holding `offset` starts; the end of the file if no batch reaches it."""
        found = self.translate_offset(offset)
        return self.size if found is None else found[0]

    def read(
        self, offset: int, max_bytes: int, max_position: int, min_one_batch: bool, pinned: bool = False
    ) -> tuple[int, int, int] | None:
        """(position, length, next offset) of whole batches from the one holding `offset`, at most
        `max_bytes` (one batch even if larger when `min_one_batch`), never past `max_position`.
        The next offset is where a reader continues: the first offset not returned. `pinned`: a read
        that returns batches leaves the file pinned once more, for the caller to let go."""
        if offset >= self.next_offset:
            return None
        # Pinned once for the search and the walk, straight from the budget: no context manager
        # calls on every partition of every fetch
        file = self.file
        budget = file.budget
        fd = budget.pin(file)
        try:
            found = NotImplemented if compiled_read_batches is None else compiled_read_batches(
                fd, offset, max_bytes, max_position, min_one_batch, self.size, self._resume, self.index)
            if found is NotImplemented:  # not where the last read stopped, or something to word
                found = read_batches(fd, offset, max_bytes, max_position, min_one_batch, self.size, self._resume,
                                     self.index)
        except BaseException:
            budget.unpin(file)
            raise
        if found is None:
            budget.unpin(file)
            return None
        if not pinned:
            budget.unpin(file)
        start, length, next_offset, self._resume = found
        return start, length, next_offset

    def find_offset_by_timestamp(self, timestamp: int, starting_offset: int) -> tuple[int, int] | None:
        """(timestamp, offset) of the first record at or after `starting_offset` whose timestamp is at
        or above `timestamp`. Headers pick the batch (its max timestamp); only that one batch is
        decoded, because ListOffsets answers with the exact record, as Kafka does."""
        if self.max_timestamp < timestamp:
            return None
        _, indexed_offset = self.time_index.lookup(timestamp)
        start = self.index.lookup(max(indexed_offset, starting_offset))[1]
        with self.file.held() as fd:
            for position, batch in scan_headers(fd, start, self.size):
                if batch.last_offset >= starting_offset and batch.max_timestamp >= timestamp:
                    found = _first_record_at(fd, position, batch, timestamp, starting_offset)
                    if found is not None:
                        return found
        return None

    def batches(self, start_position: int = 0) -> Iterator[tuple[int, BatchHeader]]:
        """(position, header) of each batch from `start_position` (blocking reads of headers only)."""
        with self.file.held() as fd:
            yield from scan_headers(fd, start_position, self.size)

    # -- truncating --

    def truncate_to(self, offset: int) -> int:
        """Drop the batch holding `offset` and everything after it; return the bytes removed."""
        found = self.translate_offset(offset)
        if found is None:
            return 0
        position, batch = found
        removed = self.size - position
        self._resume = NO_RESUME
        with self.file.held() as fd:
            os.ftruncate(fd, position)
        self.size = position
        self.index.truncate_to(batch.base_offset)
        self.time_index.truncate_to(batch.base_offset)
        # Recompute what the cut batches contributed, exactly as a reload would.
        tail_start = self.index.lookup(2**63 - 1)[1] if len(self.index) else 0
        self.max_timestamp, self.offset_of_max_timestamp = self.time_index.last_entry
        self.next_offset = self.base_offset
        for _, info in self.batches(tail_start):
            if info.max_timestamp > self.max_timestamp:
                self.max_timestamp, self.offset_of_max_timestamp = info.max_timestamp, info.last_offset
            self.next_offset = info.last_offset + 1
        self._bytes_since_index_entry = self.size - tail_start
        if self.size == 0:
            self.first_batch_timestamp = NO_TIMESTAMP
        return removed

    # -- flushing and deleting --

    @property
    def indexes_dirty(self) -> bool:
        """Index entries exist in memory that the files do not hold yet."""
        return self.index.unpersisted or self.time_index.unpersisted

    def prepare_flush(self) -> SegmentFlush:
        """On the event loop: a handle for fsyncing this segment from another thread."""
        with self.file.held() as fd:
            duplicate = os.dup(fd)
        return SegmentFlush(
            duplicate,
            [w for w in (self.index.prepare_persist(), self.time_index.prepare_persist()) if w is not None],
        )

    def rename_to_deleted(self) -> list[Path]:
        """Rename the segment's files with the `.deleted` suffix; return the new paths."""
        self.deleted = True
        self.index.retired = self.time_index.retired = True
        renamed = []
        txn_index = self.log_path.with_suffix(TXN_INDEX_SUFFIX)  # present once a transaction aborted here
        for path in (self.log_path, self.index.path, self.time_index.path, txn_index):
            target = path.with_name(path.name + DELETED_SUFFIX)
            try:
                os.rename(path, target)
            except FileNotFoundError:
                continue
            renamed.append(target)
        self.file.path = self.log_path.with_name(self.log_path.name + DELETED_SUFFIX)
        return renamed

    @property
    def txn_index_path(self) -> Path:
        """The segment's `.txnindex` under its current suffix (the file exists once it holds an entry)."""
        return self.log_path.with_name(self.log_path.name.replace(LOG_SUFFIX, TXN_INDEX_SUFFIX, 1))

    def rename_suffix(self, suffix: str) -> None:
        """Rename the three files from the current suffix to `suffix` (the cleaner's swap: `.cleaned` ->
        `.swap` -> ""), and the `.txnindex` when there is one. Index files that were never written are
        created empty first, so every step renames all three."""
        for path in (self.index.path, self.time_index.path):
            if not path.exists():
                os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o644))
        txn_index = self.txn_index_path
        if txn_index.exists():
            os.rename(txn_index, txn_index.with_name(txn_index.name.removesuffix(self.suffix) + suffix))
        plain = segment_paths(self.directory, self.base_offset)
        targets = [path.with_name(path.name + suffix) for path in plain]
        for source, target in zip((self.log_path, self.index.path, self.time_index.path), targets, strict=True):
            os.rename(source, target)
        self.log_path, self.index.path, self.time_index.path = targets
        self.file.path = self.log_path
        self.suffix = suffix

    def close(self) -> None:
        self.file.close()


def _first_record_at(fd: int, position: int, batch: BatchHeader, timestamp: int,
                     starting_offset: int) -> tuple[int, int] | None:
    data = os.pread(fd, batch.size, position)
    try:
        for record in RecordBatch(data).records():
            if record.offset >= starting_offset and record.timestamp >= timestamp:
                return record.timestamp, record.offset
    except ProtocolError:
        # A batch whose records cannot be read still answers at batch level rather than not at all.
        return batch.max_timestamp, max(batch.base_offset, starting_offset)
    return None


__all__ = [
    "BatchInfo",
    "CorruptIndexError",
    "CorruptSegmentError",
    "LogSegment",
    "RecoveryResult",
    "SegmentFile",
    "SegmentFlush",
    "scan_headers",
]
