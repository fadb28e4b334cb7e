"""A segment's open `.log` file and what is read straight from it: batch headers, one by one.

`SegmentFile` keeps the descriptor open while readers have it pinned; `scan_headers` walks the
batch headers of a range already known to be well formed; `SegmentFlush` is the fsync half of a
flush, run off the event loop.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from broker.log.index import PendingIndexWrite
from protocol.records import BATCH_HEADER_SIZE, LOG_OVERHEAD

# base_offset, batch_length, partition_leader_epoch, magic, crc, attributes, last_offset_delta,
# base_timestamp, max_timestamp: the first 43 bytes of a batch header.
_HEAD = struct.Struct(">qiibIhiqq")
_SCAN_WINDOW = 16 * 1024


class BatchInfo(NamedTuple):
    position: int
    base_offset: int
    last_offset: int
    size: int
    max_timestamp: int
    leader_epoch: int


class CorruptSegmentError(Exception):
    """The `.log` file does not hold what memory says it holds (damaged underneath us)."""


class SegmentFile:
    """The `.log` file descriptor, closed only once no reader has it pinned.

    Read results hand out `SegmentFile`s; a deleted segment's file stays open until
    `file.delete.delay.ms` has passed so that a response being sent from it can finish.
    """

    __slots__ = ("path", "fd", "_pins", "_close_wanted")

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self.fd = fd
        self._pins = 0
        self._close_wanted = False

    def fileno(self) -> int:
        if self.fd < 0:
            raise ValueError(f"{self.path} is closed")
        return self.fd

    @property
    def closed(self) -> bool:
        return self.fd < 0

    def pin(self) -> None:
        self._pins += 1

    def unpin(self) -> None:
        self._pins -= 1
        if self._pins == 0 and self._close_wanted:
            self._close_now()

    def close(self) -> None:
        if self._pins:
            self._close_wanted = True
        else:
            self._close_now()

    def _close_now(self) -> None:
        if self.fd >= 0:
            fd, self.fd = self.fd, -1
            os.close(fd)


def scan_headers(fd: int, start: int, end: int) -> Iterator[BatchInfo]:
    """Headers of the batches in [start, end) of a file already known to be well formed."""
    position = start
    window = b""
    window_start = start
    while position < end:
        rel = position - window_start
        if rel < 0 or rel + _HEAD.size > len(window):
            window = os.pread(fd, max(_HEAD.size, min(_SCAN_WINDOW, end - position)), position)
            window_start, rel = position, 0
            if len(window) < _HEAD.size:
                raise CorruptSegmentError(f"batch header at {position} is cut short")
        base, length, epoch, _magic, _crc, _attrs, delta, _first_ts, max_ts = _HEAD.unpack_from(window, rel)
        size = length + LOG_OVERHEAD
        if size < BATCH_HEADER_SIZE or position + size > end:
            raise CorruptSegmentError(f"batch at {position} claims {size} bytes")
        yield BatchInfo(position, base, base + delta, size, max_ts, epoch)
        position += size


class SegmentFlush:
    """fsync of one segment's `.log` (through a duplicated descriptor, so a concurrent close of the
    original cannot hand the number to another file) and the index tails it lacks."""

    __slots__ = ("fd", "index_writes")

    def __init__(self, fd: int, index_writes: list[PendingIndexWrite]) -> None:
        self.fd = fd
        self.index_writes = index_writes

    def run(self) -> None:
        try:
            os.fsync(self.fd)
            for write in self.index_writes:
                write.run()
        finally:
            os.close(self.fd)

    def done(self) -> None:
        for write in self.index_writes:
            write.done()

    def abandon(self) -> None:
        os.close(self.fd)
