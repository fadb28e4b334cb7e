"""ListOffsets by time over a run of segments: the first record at or after a timestamp, and the
batch holding the largest timestamp. Blocking reads of index and batch headers only."""

from __future__ import annotations

import os
from collections.abc import Sequence

from broker.log.segment import LogSegment


def first_at_or_after(segments: Sequence[LogSegment], timestamp: int, start: int) -> tuple[int, int] | None:
    """(timestamp, offset) of the first record at or after offset `start` whose timestamp is >= `timestamp`.
    `segments` begins with the one holding `start`."""
    for segment in segments:
        found = segment.find_offset_by_timestamp(timestamp, max(start, segment.base_offset))
        if found is not None:
            return found
    return None


def largest_timestamp_batch(segments: Sequence[LogSegment], start: int) -> tuple[int, int] | None:
    """(max timestamp, offset) of the first batch at or after `start` holding the largest timestamp.
    `segments` begins with the one holding `start`."""
    best: tuple[int, int] | None = None
    for i, segment in enumerate(segments):
        if segment.size == 0 or (best is not None and segment.max_timestamp <= best[0]):
            continue
        if i == 0 and segment.offset_of_max_timestamp < start:
            candidate = _largest_from(segment, start)  # the segment's maximum lies below the start
        else:
            candidate = segment.find_offset_by_timestamp(segment.max_timestamp, max(start, segment.base_offset))
        if candidate is not None and candidate[0] >= 0 and (best is None or candidate[0] > best[0]):
            best = candidate
    return best


def _largest_from(segment: LogSegment, start: int) -> tuple[int, int] | None:
    candidate = None
    for _, batch in segment.batches(segment.index.lookup(start)[1]):
        if batch.last_offset >= start and (candidate is None or batch.max_timestamp > candidate[0]):
            candidate = (batch.max_timestamp, max(batch.base_offset, start))
    return candidate


def largest_timestamp(segment: LogSegment) -> int:
    """The segment's largest timestamp for time retention; Kafka falls back to the file's mtime for
    segments whose batches carry none. Blocking (a stat)."""
    if segment.max_timestamp >= 0:
        return segment.max_timestamp
    return os.stat(segment.file.path).st_mtime_ns // 1_000_000
