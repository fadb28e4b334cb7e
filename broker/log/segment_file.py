"""A segment's `.log` file and what is read straight from it: batch headers, one by one.

`SegmentFile` keeps the descriptor open while readers have it pinned, and `OpenSegments` bounds how
many idle ones stay open; `scan_headers` walks the batch headers of a range already known to be well
formed (the one walk over a file's headers: the log's reads, loading and producer-state recovery use
it, and protocol/records.py reads each header); `SegmentFlush` is the fsync half of a flush, run off
the event loop.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from broker.log.index import PendingIndexWrite
from protocol.records import BATCH_HEADER_SIZE, LOG_OVERHEAD, BatchHeader, read_header

_SCAN_WINDOW = 16 * 1024


class BatchInfo(NamedTuple):
    """Where an appended batch lies in its segment and what the indexes and the epoch cache need of it."""

    position: int
    base_offset: int
    last_offset: int
    size: int
    max_timestamp: int
    leader_epoch: int


class CorruptSegmentError(Exception):
    """The `.log` file does not hold what memory says it holds (damaged underneath us)."""


class SegmentFile:
    """A segment's `.log` file, open while in use and kept open while recently used.

    Every use holds the file (`with file.held() as fd:` or `pin`/`unpin` around a longer read), and
    a held file is never closed. Idle files are closed by the process's `OpenSegments` budget when
    too many are open, and opened again (by the path they have then) at their next use. Read results
    hand out `SegmentFile`s; a deleted segment's file stays usable until `file.delete.delay.ms` has
    passed so that a response being sent from it can finish; then `close` ends it for good.
    """

    __slots__ = ("path", "fd", "_pins", "_close_wanted", "_ended", "budget")

    def __init__(self, path: Path, fd: int, budget: OpenSegments | None = None) -> None:
        self.path = path
        self.fd = fd  # -1 while parked by the budget or once ended
        self._pins = 0
        self._close_wanted = False
        self._ended = False
        self.budget = budget if budget is not None else OPEN_SEGMENTS
        self.budget.opened(self)

    @property
    def closed(self) -> bool:
        return self._ended

    def pin(self) -> int:
        """Hold the file open (opening it again if the budget parked it); returns its descriptor."""
        return self.budget.pin(self)

    def unpin(self) -> None:
        self.budget.unpin(self)

    def held(self) -> SegmentFile:
        """`with file.held() as fd:` — pinned for the block (a class, not a generator: it is on every read)."""
        return self

    def __enter__(self) -> int:
        return self.budget.pin(self)

    def __exit__(self, *exc: object) -> None:
        self.budget.unpin(self)

    def fileno(self) -> int:
        """The descriptor of a file the caller has pinned."""
        if self.fd < 0:
            raise ValueError(f"{self.path} is closed")
        return self.fd

    def close(self) -> None:
        """End the file: closed now, or when its last holder lets go; never opened again."""
        self.budget.end(self)


class OpenSegments:
    """How many segment files a process keeps open: the least recently used idle ones are closed
    once more than `capacity` are open, so ten thousand partitions do not need ten thousand
    descriptors. Held files are never closed, so the count can pass `capacity` while they are.

    Thread-safe: logs are loaded in the pool while the event loop serves others.
    """

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.open_count = 0
        self.reopened = 0  # opens of parked files: how often the budget made a read open a file again
        self._idle: OrderedDict[SegmentFile, None] = OrderedDict()  # open, unpinned; oldest first
        self._lock = threading.Lock()

    def resize(self, capacity: int) -> None:
        with self._lock:
            self.capacity = capacity
            self._shrink()

    def opened(self, file: SegmentFile) -> None:
        """A new SegmentFile whose descriptor the caller has just opened."""
        with self._lock:
            if file.fd >= 0:
                self.open_count += 1
                self._idle[file] = None
                self._shrink()

    def pin(self, file: SegmentFile) -> int:
        with self._lock:
            if file._ended:
                raise ValueError(f"{file.path} is closed")
            if file.fd < 0:
                file.fd = os.open(file.path, os.O_RDWR | os.O_APPEND)
                self.open_count += 1
                self.reopened += 1
            elif file._pins == 0:
                del self._idle[file]
            file._pins += 1
            fd = file.fd
            if file._pins == 1 and self.open_count > self.capacity:
                self._shrink()
            return fd

    def unpin(self, file: SegmentFile) -> None:
        with self._lock:
            file._pins -= 1
            if file._pins:
                return
            if file._close_wanted:
                self._close(file)
            else:
                self._idle[file] = None
                if self.open_count > self.capacity:
                    self._shrink()

    def end(self, file: SegmentFile) -> None:
        with self._lock:
            if file._ended:
                return
            file._ended = True
            if file._pins:
                file._close_wanted = True
                return
            self._idle.pop(file, None)
            self._close(file)

    def _close(self, file: SegmentFile) -> None:
        if file.fd >= 0:
            fd, file.fd = file.fd, -1
            self.open_count -= 1
            os.close(fd)

    def _shrink(self) -> None:
        while self.open_count > self.capacity and self._idle:
            parked, _ = self._idle.popitem(last=False)
            self._close(parked)


# The descriptor limit (`ulimit -n`) belongs to the process, and so does this budget; the log
# manager sizes it from `ebb.log.open.segments.max` at start-up.
OPEN_SEGMENTS = OpenSegments(4096)


def scan_headers(fd: int, start: int, end: int, first_window: int = _SCAN_WINDOW) -> Iterator[tuple[int, BatchHeader]]:
    """(position, header) of each batch in [start, end) of a file already known to be well formed,
    read in windows; batch bodies larger than a window are skipped, not read. `first_window` bounds
    the first read: a walk that mostly needs one header asks for BATCH_HEADER_SIZE, so that a batch
    larger than a window costs no copy of its records."""
    position = start
    window = b""
    window_start = start
    wanted = first_window
    while position < end:
        rel = position - window_start
        if rel < 0 or rel + BATCH_HEADER_SIZE > len(window):
            window = os.pread(fd, max(BATCH_HEADER_SIZE, min(wanted, end - position)), position)
            window_start, rel, wanted = position, 0, _SCAN_WINDOW
            if len(window) < BATCH_HEADER_SIZE:
                raise CorruptSegmentError(f"batch header at {position} is cut short")
        header = read_header(window, rel)
        size = header.batch_length + LOG_OVERHEAD  # header.size without a Python call: once per batch read
        if size < BATCH_HEADER_SIZE or position + size > end:
            raise CorruptSegmentError(f"batch at {position} claims {size} bytes")
        yield position, header
        position += size


def header_at(fd: int, position: int, end: int) -> BatchHeader:
    """The header of the batch known to start at `position` of a well-formed file, read alone (no
    window: the reader needs this one header, and the batch behind it may be a megabyte)."""
    window = os.pread(fd, BATCH_HEADER_SIZE, position)
    if len(window) < BATCH_HEADER_SIZE:
        raise CorruptSegmentError(f"batch header at {position} is cut short")
    header = read_header(window, 0)
    size = header.batch_length + LOG_OVERHEAD
    if size < BATCH_HEADER_SIZE or position + size > end:
        raise CorruptSegmentError(f"batch at {position} claims {size} bytes")
    return header


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
