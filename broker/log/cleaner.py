"""One cleaning round of one compacted log, blocking: a cleaner process runs it, never the event loop.

Kafka's algorithm (LogCleaner's Cleaner), on a snapshot of the log's closed segments taken on the loop:

1. Map the dirty section [first dirty offset, first uncleanable offset): the latest offset of every key,
   until the key map is full (then the round ends where the map ends).
2. Group the segments from the log start up to the end of the map so that no group exceeds
   `segment.bytes` (nor `segment.index.bytes` of index), and copy each group into one new segment named
   `<first base>.log.cleaned`, keeping of each record only the latest of its key, and of tombstones
   only those whose batch's delete horizon has not passed. A batch that loses records is rebuilt with
   its codec, base offset, last offset, producer fields and leader epoch; the first time it keeps a
   tombstone its base timestamp becomes the delete horizon (now + `delete.retention.ms`, KIP-534). A
   batch left empty is kept as a bare header when it is the last batch of a producer or the last
   batch of the round, so producer state and the round's end offset survive.

Transactions (cleaned_txns.py): the cleaned range ends below the last stable offset, so every
transaction in it has ended. Records of aborted transactions are never mapped and are dropped when
copying; committed ones are like any other. A marker stays while a batch of its transaction does, then
until its own delete horizon (set like a tombstone's); the cleaned segment's `.txnindex` holds the
aborted transactions whose marker it keeps, written beside it and swapped with it.

Each group is cleaned in the cleaner's process and swapped into the log on the loop
(PartitionLog.replace_segments) before the next group is cleaned, so a round needs spare disk for one
group only.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from broker.log.cleaned_txns import CleanedTxns
from broker.log.cleaner_records import kept_offsets, map_batch, retain
from broker.log.cleaner_settings import NO_IO_THROTTLE
from broker.log.cleaner_throttle import throttler_for
from broker.log.common import DELETED_SUFFIX, TopicPartition, segment_paths
from broker.log.offset_map import KeyOffsetMap
from broker.log.segment import LogSegment
from broker.log.segment_file import BatchInfo
from broker.log.txn_index import AbortedTxn, read_txn_index, txn_index_path, write_txn_index
from protocol.errors import ProtocolError
from protocol.record_format import Buffer
from protocol.records import (
    CONTROL_BIT,
    DELETE_HORIZON_BIT,
    LOG_OVERHEAD,
    TIMESTAMP_TYPE_BIT,
    BatchHeader,
    Compression,
    Record,
    RecordBatch,
    RecordBatchBuilder,
    iter_batches,
    read_header,
    with_records,
)

CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
_INT32_MAX = 2**31 - 1


class CleaningError(Exception):
    """A segment the cleaner read does not hold well-formed batches; the round is abandoned."""


@dataclass(frozen=True, slots=True)
class SegmentView:
    """A closed segment as the loop saw it when the round began. The cleaner's process opens it by its
    path (or the `.deleted` name retention may have given it since: the bytes are the same)."""

    base_offset: int
    path: Path
    size: int
    next_offset: int
    index_bytes: int
    time_index_bytes: int

    @classmethod
    def of(cls, segment: LogSegment) -> SegmentView:
        return cls(segment.base_offset, segment.log_path, segment.size, segment.next_offset,
                   len(segment.index) * 8, len(segment.time_index) * 12)


@dataclass(frozen=True, slots=True)
class CleaningJob:
    topic_partition: TopicPartition
    directory: Path
    segments: tuple[SegmentView, ...]  # every closed segment below the first uncleanable offset, oldest first
    first_dirty_offset: int
    first_uncleanable_offset: int
    now_ms: int
    delete_retention_ms: int
    segment_bytes: int
    max_index_bytes: int
    index_interval_bytes: int
    io_buffer_size: int
    # Last offset of each producer's last batch in the whole log; None when the replica does not keep
    # producer state (a follower): then each producer's last batch in the cleaned range is kept.
    producer_last_offsets: Mapping[int, int] | None
    # The log's aborted transactions that began below the first uncleanable offset (its `.txnindex`).
    aborted_txns: tuple[AbortedTxn, ...] = ()
    # Markers from this offset on stay whatever their horizon: the producer-state snapshot on disk is older,
    # and a load after a crash replays the markers it finds from there (None: no snapshot, a load replays all).
    marker_floor: int | None = None
    # This process's share of log.cleaner.io.max.bytes.per.second (cleaner_throttle.py).
    io_max_bytes_per_second: float = NO_IO_THROTTLE


@dataclass(slots=True)
class CleanerStats:
    bytes_read: int = 0
    bytes_written: int = 0
    records_read: int = 0
    records_kept: int = 0
    keyless_dropped: int = 0


@dataclass(slots=True)
class CleaningPlan:
    """What a round cleans once the dirty section is mapped: the groups, each swapped in on its own."""

    end_offset: int  # the next round's first dirty offset
    groups: list[list[SegmentView]]
    producer_last_offsets: Mapping[int, int]
    stats: CleanerStats = field(default_factory=CleanerStats)
    txns: CleanedTxns | None = None  # one walk over the whole round, group after group (Kafka's)


def open_for_reading(path: Path) -> int:
    """A closed segment's `.log`, by its path or the `.deleted` name retention may have given it since
    the loop looked (the bytes are the same)."""
    try:
        return os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return os.open(path.with_name(path.name + DELETED_SUFFIX), os.O_RDONLY)


def read_batches(view: SegmentView, io_buffer_size: int, start_position: int = 0,
                 throttle: Callable[[int], None] | None = None) -> Iterator[RecordBatch]:
    """The batches of a segment, read `io_buffer_size` bytes at a time (more for a larger batch);
    `throttle` is told of every read."""
    position = start_position
    fd = open_for_reading(view.path)
    try:
        while position < view.size:
            chunk = os.pread(fd, min(max(io_buffer_size, LOG_OVERHEAD), view.size - position), position)
            if throttle is not None:
                throttle(len(chunk))
            consumed = 0
            try:
                for batch in iter_batches(chunk, allow_partial_tail=True):
                    consumed = batch.position + batch.size
                    yield batch
            except ProtocolError as exc:
                raise CleaningError(f"{view.path} at {position + consumed}: {exc.message}") from exc
            if consumed == 0:  # one batch larger than the buffer: read exactly it
                if len(chunk) < LOG_OVERHEAD:
                    raise CleaningError(f"{view.path}: batch header cut short at {position}")
                size = int.from_bytes(chunk[8:12], "big", signed=True) + LOG_OVERHEAD
                if size <= len(chunk) or position + size > view.size:
                    raise CleaningError(f"{view.path}: batch at {position} claims {size} bytes")
                io_buffer_size = size
                continue
            position += consumed
    finally:
        os.close(fd)


def build_key_map(job: CleaningJob, key_map: KeyOffsetMap, stats: CleanerStats) -> int:
    """Map the dirty section; return the offset the round cleans up to (exclusive)."""
    key_map.clear()
    start, end = job.first_dirty_offset, job.first_uncleanable_offset
    dirty = [v for v in job.segments if v.next_offset > start and v.base_offset < end]
    txns = CleanedTxns(job.aborted_txns, dirty[0].base_offset if dirty else start)
    throttle = throttler_for(job.io_max_bytes_per_second)
    for i, view in enumerate(dirty):
        next_base = dirty[i + 1].base_offset if i + 1 < len(dirty) else end
        for batch in read_batches(view, job.io_buffer_size, throttle=throttle):
            header = batch.header()
            control = header.attributes & CONTROL_BIT
            aborted = txns.on_control_batch(batch) if control else txns.on_batch(batch)
            last_offset = header.base_offset + header.last_offset_delta
            if last_offset < start:
                continue
            if not control and not aborted:  # an aborted record must not shadow a committed one
                stats.records_read += header.records_count
                if _mapped(key_map, batch, header, view, start):  # the map is full
                    return key_map.latest_offset + 1
            key_map.cover_up_to(last_offset)
        key_map.cover_up_to(next_base - 1)
    return key_map.latest_offset + 1


def group_segments(views: list[SegmentView], segment_bytes: int, max_index_bytes: int,
                   first_uncleanable_offset: int) -> list[list[SegmentView]]:
    """Consecutive segments merged while the group's log and indexes fit one segment and its offsets a
    32-bit delta from the group's base (Kafka's groupSegmentsBySize)."""
    groups: list[list[SegmentView]] = []
    i = 0
    while i < len(views):
        group = [views[i]]
        size, index, time_index = views[i].size, views[i].index_bytes, views[i].time_index_bytes
        i += 1
        while i < len(views):
            view = views[i]
            last_offset = views[i + 1].base_offset - 1 if i + 1 < len(views) else first_uncleanable_offset - 1
            if (size + view.size > segment_bytes or index + view.index_bytes > max_index_bytes
                    or time_index + view.time_index_bytes > max_index_bytes
                    or (view.size and last_offset - group[-1].base_offset > _INT32_MAX)):
                break
            group.append(view)
            size += view.size
            index += view.index_bytes
            time_index += view.time_index_bytes
            i += 1
        groups.append(group)
    return groups


def plan(job: CleaningJob, key_map: KeyOffsetMap) -> CleaningPlan:
    """Map the dirty section and group the segments the round rewrites."""
    stats = CleanerStats()
    end_offset = build_key_map(job, key_map, stats)
    if end_offset <= job.first_dirty_offset:  # nothing dirty was mapped: nothing to rewrite
        return CleaningPlan(job.first_dirty_offset, [], {}, stats)
    in_round = [v for v in job.segments if v.base_offset < end_offset]
    producers = job.producer_last_offsets
    if producers is None:
        producers = _last_batches_of_producers(in_round, job.io_buffer_size,
                                               throttler_for(job.io_max_bytes_per_second))
    groups = group_segments(in_round, job.segment_bytes, job.max_index_bytes, job.first_uncleanable_offset)
    txns = CleanedTxns(job.aborted_txns, in_round[0].base_offset if in_round else end_offset)
    return CleaningPlan(end_offset, groups, producers, stats, txns)


def clean_group(job: CleaningJob, plan: CleaningPlan, group: list[SegmentView], key_map: KeyOffsetMap
                ) -> LogSegment:
    """Copy what `group` keeps into `<base>.log.cleaned` (with its indexes), fsynced."""
    txns = plan.txns if plan.txns is not None else CleanedTxns(job.aborted_txns, group[0].base_offset)
    return _clean_group(job, group, key_map, plan.end_offset, plan.producer_last_offsets, plan.stats, txns)


# --- a round run by calls into the cleaner's process (or a thread) ---------------------------------
# The key map stays where it was built, between the calls of one round: `begin_round` maps and plans,
# `clean_next_group` writes one group's `.cleaned` files, `end_round` frees the map and reports.

_ROUNDS: dict[int, tuple[CleaningJob, KeyOffsetMap, CleaningPlan]] = {}


def begin_round(round_id: int, job: CleaningJob, key_map_capacity: int) -> tuple[int, list[list[int]]]:
    """Map and plan; return the round's end offset and each group's segment bases."""
    key_map = KeyOffsetMap(key_map_capacity)
    round_plan = plan(job, key_map)
    _ROUNDS[round_id] = (job, key_map, round_plan)
    return round_plan.end_offset, [[view.base_offset for view in group] for group in round_plan.groups]


def clean_next_group(round_id: int, index: int) -> None:
    job, key_map, round_plan = _ROUNDS[round_id]
    clean_group(job, round_plan, round_plan.groups[index], key_map).close()


def end_round(round_id: int) -> tuple[CleanerStats, float]:
    """The round's counts and how full its key map got."""
    _job, key_map, round_plan = _ROUNDS.pop(round_id)
    return round_plan.stats, key_map.utilization


def open_cleaned(directory: Path, base_offset: int, index_interval_bytes: int, max_index_bytes: int,
                 now_ms: int) -> tuple[LogSegment, list[AbortedTxn]]:
    """The `.cleaned` segment another process wrote, opened with its indexes, and the aborted
    transactions of its `.txnindex` (blocking)."""
    segment = LogSegment.open(directory, base_offset, index_interval_bytes=index_interval_bytes,
                              max_index_bytes=max_index_bytes, now_ms=now_ms, suffix=CLEANED_SUFFIX)
    try:
        segment.load_indexes()
        return segment, read_txn_index(segment.txn_index_path)
    except BaseException:
        segment.close()
        raise


def remove_cleaned_files(directory: Path, base_offset: int) -> None:
    for path in (*segment_paths(directory, base_offset), txn_index_path(directory, base_offset)):
        try:
            os.unlink(path.with_name(path.name + CLEANED_SUFFIX))
        except FileNotFoundError:
            pass


def remove_segment_files(segment: LogSegment) -> None:
    """Close a cleaned segment that will not be swapped in and remove its files."""
    segment.close()
    for path in (segment.log_path, segment.index.path, segment.time_index.path, segment.txn_index_path):
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass


def _clean_group(job: CleaningJob, group: list[SegmentView], key_map: KeyOffsetMap, end_offset: int,
                 producers: Mapping[int, int], stats: CleanerStats, txns: CleanedTxns) -> LogSegment:
    cleaned = LogSegment.create(job.directory, group[0].base_offset, index_interval_bytes=job.index_interval_bytes,
                                max_index_bytes=job.max_index_bytes, now_ms=job.now_ms, suffix=CLEANED_SUFFIX)
    throttle = throttler_for(job.io_max_bytes_per_second)
    try:
        for view in group:
            for batch in read_batches(view, job.io_buffer_size, throttle=throttle):
                stats.bytes_read += batch.size
                kept = _retained(batch, view, job, key_map, end_offset, producers, stats, txns)
                if kept is not None:
                    _append(cleaned, kept)
                    stats.bytes_written += len(kept)
                    throttle(len(kept))
        kept_aborts, txns.kept_aborts = txns.kept_aborts, []
        finish_copy(cleaned, kept_aborts, group[-1].path)
    except BaseException:
        remove_segment_files(cleaned)
        raise
    return cleaned


def finish_copy(copy: LogSegment, aborts: list[AbortedTxn], original: Path) -> None:
    """Make a `.cleaned` copy ready to swap in: its `.txnindex`, indexes and bytes on disk, and the
    original's modification time (retention by file time treats the copy like the original)."""
    write_txn_index(copy.txn_index_path, aborts)  # fsynced before the swap, like the segment
    copy.seal()
    copy.index.write_all()
    copy.time_index.write_all()
    with copy.file.held() as fd:
        os.fsync(fd)
    modified = _modified_ns(original)
    os.utime(copy.log_path, ns=(modified, modified))


def _retained(batch: RecordBatch, view: SegmentView, job: CleaningJob, key_map: KeyOffsetMap, end_offset: int,
              producers: Mapping[int, int], stats: CleanerStats, txns: CleanedTxns) -> bytes | memoryview | None:
    """What of `batch` the cleaned segment keeps: the batch as it is, a rebuilt batch, a bare header,
    or None (Kafka's checkBatchRetention and shouldRetainRecord)."""
    header = batch.header()
    horizon = header.base_timestamp if header.attributes & DELETE_HORIZON_BIT else None
    last_of_producer = producers.get(header.producer_id)
    last_offset = header.base_offset + header.last_offset_delta
    if header.attributes & CONTROL_BIT:
        # A producer whose last batch is a marker keeps it: it holds the producer's latest epoch.
        keep_empty = (header.producer_id >= 0 and last_of_producer in (-1, last_offset)) \
            or last_offset + 1 == end_offset
        discardable = txns.on_control_batch(batch)
        if not discardable:
            return batch.raw()
        if horizon is None:  # the first round that finds it discardable starts its delete horizon
            return _rebuilt(batch, header, list(_records(batch, view)), job.now_ms + job.delete_retention_ms, True)
        if job.now_ms < horizon or (job.marker_floor is not None and batch.base_offset >= job.marker_floor):
            return batch.raw()
        return _empty(batch, header, True) if keep_empty else None
    keep_empty = (header.producer_id >= 0 and last_of_producer == last_offset) or last_offset + 1 == end_offset
    if txns.on_batch(batch):  # an aborted transaction's records go whatever the key map says
        stats.records_read += header.last_offset_delta + 1
        return _empty(batch, header, False) if keep_empty else None
    body = _body(batch, view)
    try:
        retained = retain(body, header.records_count, header.base_offset, key_map,
                          horizon is None or job.now_ms < horizon)
    except ProtocolError as exc:
        raise CleaningError(f"{view.path}: batch at offset {batch.base_offset}: {exc.message}") from exc
    stats.records_read += header.records_count
    stats.keyless_dropped += retained.keyless_dropped
    stats.records_kept += retained.kept
    if not retained.kept:
        return _empty(batch, header, False) if keep_empty else None
    needs_horizon = retained.tombstone_kept and horizon is None
    if retained.section is None and not needs_horizon:
        return batch.raw()  # every record stays: its bytes as they are
    if needs_horizon:  # the base timestamp becomes the horizon: every kept record is written anew
        offsets = kept_offsets(body, header.records_count, header.base_offset, key_map, True)
        records = [record for record in _records(batch, view) if record.offset in offsets]
        return _rebuilt(batch, header, records, job.now_ms + job.delete_retention_ms, False)
    assert retained.section is not None and retained.max_timestamp_delta is not None
    if header.attributes & TIMESTAMP_TYPE_BIT:
        max_timestamp = header.max_timestamp
    else:
        max_timestamp = header.base_timestamp + retained.max_timestamp_delta
    return with_records(batch, retained.section, retained.kept, max_timestamp)


def _rebuilt(batch: RecordBatch, header: BatchHeader, kept: list[Record], horizon: int | None,
             is_control: bool) -> bytes:
    """`batch` with only `kept`, its codec, offsets and producer fields unchanged."""
    builder = RecordBatchBuilder(
        base_offset=header.base_offset, compression=batch.compression, timestamp_type=batch.timestamp_type,
        producer_id=header.producer_id, producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence, partition_leader_epoch=header.partition_leader_epoch,
        is_transactional=batch.is_transactional, is_control=is_control, delete_horizon_ms=horizon)
    for record in kept:
        builder.append(record.key, record.value, record.headers, record.timestamp, offset=record.offset)
    return builder.build(last_offset=batch.last_offset)


def _empty(batch: RecordBatch, header: BatchHeader, is_control: bool) -> bytes:
    """The bare header kept so that the producer's state (or the round's end offset) stays derivable."""
    builder = RecordBatchBuilder(
        base_offset=header.base_offset, compression=Compression.NONE, timestamp_type=batch.timestamp_type,
        producer_id=header.producer_id, producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence, partition_leader_epoch=header.partition_leader_epoch,
        is_transactional=batch.is_transactional, is_control=is_control)
    return builder.build(last_offset=batch.last_offset, max_timestamp=header.max_timestamp)


def _append(cleaned: LogSegment, data: bytes | memoryview) -> None:
    kept = read_header(data)
    cleaned.append(memoryview(data), [BatchInfo(0, kept.base_offset, kept.last_offset, kept.size,
                                                kept.max_timestamp, kept.partition_leader_epoch)])


def _records(batch: RecordBatch, view: SegmentView) -> list[Record]:
    try:
        return list(batch.records())
    except ProtocolError as exc:
        raise CleaningError(f"{view.path}: batch at offset {batch.base_offset}: {exc.message}") from exc


def _body(batch: RecordBatch, view: SegmentView) -> Buffer:
    try:
        return batch.body()
    except ProtocolError as exc:
        raise CleaningError(f"{view.path}: batch at offset {batch.base_offset}: {exc.message}") from exc


def _mapped(key_map: KeyOffsetMap, batch: RecordBatch, header: BatchHeader, view: SegmentView, start: int) -> bool:
    """Map the batch's keyed records at or past `start`; True when the map filled up first."""
    try:
        return map_batch(key_map, _body(batch, view), header.records_count, header.base_offset, start)
    except ProtocolError as exc:
        raise CleaningError(f"{view.path}: batch at offset {batch.base_offset}: {exc.message}") from exc


def _modified_ns(path: Path) -> int:
    try:
        return os.stat(path).st_mtime_ns
    except FileNotFoundError:
        return os.stat(path.with_name(path.name + DELETED_SUFFIX)).st_mtime_ns


def _last_batches_of_producers(views: list[SegmentView], io_buffer_size: int,
                               throttle: Callable[[int], None]) -> dict[int, int]:
    """Without the replica's producer state: the last batch of each producer within the round."""
    last: dict[int, int] = {}
    for view in views:
        for batch in read_batches(view, io_buffer_size, throttle=throttle):
            producer_id = batch.producer_id
            if producer_id >= 0:
                last[producer_id] = batch.last_offset
    return last
