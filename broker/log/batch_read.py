"""Where a read of one segment's batches starts and stops, from its headers alone: the rule
LogSegment.read and translate_offset follow, on a descriptor the caller holds pinned.

A read returns whole batches from the one holding the offset asked, at most `max_bytes` of them (one
batch even if larger when `min_one_batch`), never past `max_position`. It starts from where the last
read of the segment stopped when the offset asked is that read's next offset (a consumer's next
fetch, the common case: no index search, and mostly no pread, since that read's walk kept the header
of the batch there), else from the offset index's entry at or below it and a walk of the headers.

broker/log/_batch_read.c is the compiled twin of `read_batches` for the first case (a consumer reading
on); it steps aside (NotImplemented) for anything else, a file cut short or a header it would not
trust included, and this code then runs and words the error. Its `run_slices` is the twin of
SegmentRun.slices for a Fetch's pinned read that stays in one segment (the lookup of the segment, its
pin and this read in one call), and its `log_read` that of PartitionLog.read for such a read of an
online log, in range. tests/unit/test_batch_read.py holds each pair equal.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.log.segment_file import header_at, scan_headers
from protocol.records import BATCH_HEADER_SIZE, LOG_OVERHEAD, BatchHeader

if TYPE_CHECKING:
    from broker.log.index import OffsetIndex

# (offset, position, header): where the last read stopped: the first offset it did not return, where
# the batch holding it starts (or the end of the file then), and that batch's header if the read's
# walk read it (None: read it when needed).
Resume = tuple[int, int, BatchHeader | None]
NO_RESUME: Resume = (-1, -1, None)


def find_batch(fd: int, offset: int, size: int, resume: Resume, index: OffsetIndex) -> tuple[int, BatchHeader] | None:
    """(position, header) of the first batch whose last offset is at or above `offset`, or None."""
    resume_offset, position, header = resume
    if offset == resume_offset and position < size:  # where the last read stopped: one header
        return position, header if header is not None else header_at(fd, position, size)
    for found in scan_headers(fd, index.lookup(offset)[1], size):
        header = found[1]
        if header.base_offset + header.last_offset_delta >= offset:  # .last_offset, no call: a fetch's path
            return found
    return None


def read_batches(fd: int, offset: int, max_bytes: int, max_position: int, min_one_batch: bool, size: int,
                 resume: Resume, index: OffsetIndex) -> tuple[int, int, int, Resume] | None:
    """(position, length, next offset, where this read stopped) of whole batches of a segment of `size`
    bytes from the one holding `offset` (below the segment's next offset), or None when none fits; the
    next offset is the first one not returned."""
    found = find_batch(fd, offset, size, resume, index)
    if found is None:
        return None
    start, first = found
    batch = first.batch_length + LOG_OVERHEAD
    if start + batch > max_position:
        return None
    end, next_offset = start + batch, first.base_offset + first.last_offset_delta + 1
    following = None  # the header at `end`, if the walk reads it
    if batch > max_bytes:
        if not min_one_batch:
            return None
    else:
        limit = min(max_position, start + max_bytes)
        # Batches are back to back and every one before the last indexed batch at or below `limit`
        # fits, so the header walk starts there instead of at `end`. Batches larger than the index
        # interval are each indexed, so that batch's header is mostly all the walk needs: its first
        # read is that header alone, not a window of record bytes (16 KiB copied per partition per
        # Fetch from librdkafka's 1 MB batches).
        for position, header in scan_headers(fd, max(end, index.lookup_position(limit)), size, BATCH_HEADER_SIZE):
            # .size and .last_offset spelled out: this loop runs for every batch a fetch returns
            batch_end = position + header.batch_length + LOG_OVERHEAD
            base = header.base_offset
            if batch_end > limit:
                end, next_offset, following = position, base, header
                break
            end, next_offset = batch_end, base + header.last_offset_delta + 1
    return start, end - start, next_offset, (next_offset, end, following)


# The compiled twins, where they are built (setup.py). compiled_read_batches is what LogSegment.read
# calls for a consumer reading on (this module otherwise); compiled_run_slices what SegmentRun.slices
# calls first for a pinned read (a Fetch's): the read above and the segment's lookup and pin in one
# call, where the read stays in one segment; compiled_log_read what PartitionLog.read calls first for
# a pinned read: its checks and bounds, then the above.
try:
    from broker.log._batch_read import log_read as compiled_log_read
    from broker.log._batch_read import read_batches as compiled_read_batches
    from broker.log._batch_read import run_slices as compiled_run_slices
except ImportError:  # pragma: no cover - the package installed without a C compiler
    compiled_read_batches = compiled_run_slices = compiled_log_read = None
