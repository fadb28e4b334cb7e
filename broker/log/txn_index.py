"""The aborted-transaction index of one partition log: Kafka's `.txnindex`, one file per segment.

Each entry is 34 bytes, big-endian, appended when an ABORT marker is written:

    version int16 (0) | producer_id int64 | first_offset int64 | last_offset int64 | last_stable_offset int64

`last_offset` is the marker's offset, so an entry lives in the file of the segment holding its
marker; `last_stable_offset` is the partition's first unstable offset once the transaction ended.
A READ_COMMITTED fetch from offset F whose data ends before U is told every aborted transaction with
last_offset >= F and first_offset < U; entries are in marker order and their last stable offsets
only grow, so the search stops at the first entry whose last stable offset reaches U.

All entries are also held in memory (a fetch must not read files). Appends write to the page cache
(os.write, like the log's own appends). A producer state snapshot covering offset S makes the files
durable first (`take_unsynced`, `fsync_files`), and a load replays the log from S, dropping and
writing again the entries from there on (broker/replica/producer_recovery.py): so the index is
whole after any stop. Removing a segment's records removes its entries (the file goes with the
segment: LogSegment.rename_to_deleted).
"""

from __future__ import annotations

import bisect
import os
import struct
from pathlib import Path
from typing import NamedTuple

import structlog

from broker.log.common import TXN_INDEX_SUFFIX, segment_prefix

logger = structlog.get_logger(__name__)

_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size
ENTRY_VERSION = 0


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int  # the ABORT marker's offset
    last_stable_offset: int


def txn_index_path(directory: Path, base_offset: int) -> Path:
    prefix = directory / segment_prefix(base_offset)
    return prefix.with_name(prefix.name + TXN_INDEX_SUFFIX)


def write_txn_index(path: Path, entries: list[AbortedTxn]) -> None:
    """Blocking: `path` holds exactly `entries`, fsynced (the cleaner's new segment); none: no file."""
    if not entries:
        path.unlink(missing_ok=True)
        return
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, b"".join(_ENTRY.pack(ENTRY_VERSION, *entry) for entry in entries))
        os.fsync(fd)
    finally:
        os.close(fd)


def read_txn_index(path: Path) -> list[AbortedTxn]:
    """Blocking: the entries of one file (none if it is missing); a torn last entry is dropped."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    entries = []
    for position in range(0, len(data) - ENTRY_SIZE + 1, ENTRY_SIZE):
        version, producer_id, first, last, stable = _ENTRY.unpack_from(data, position)
        if version != ENTRY_VERSION:
            logger.warning("unknown aborted transaction index entry version; the rest is ignored",
                           path=str(path), version=version, position=position)
            break
        entries.append(AbortedTxn(producer_id, first, last, stable))
    return entries


class AbortedTxnIndex:
    """Every aborted transaction whose marker is still in the log, in marker order."""

    def __init__(self, directory: Path, entries: list[AbortedTxn] | None = None) -> None:
        self.directory = directory
        self._entries: list[AbortedTxn] = entries or []
        self._last_offsets = [e.last_offset for e in self._entries]
        self._unsynced: set[Path] = set()

    @classmethod
    def load(cls, directory: Path, segment_bases: list[int]) -> AbortedTxnIndex:
        """Blocking: read the files of the given segments."""
        entries: list[AbortedTxn] = []
        for base in segment_bases:
            entries += read_txn_index(txn_index_path(directory, base))
        entries.sort(key=lambda e: e.last_offset)
        return cls(directory, entries)

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def entries(self) -> list[AbortedTxn]:
        return list(self._entries)

    def append(self, entry: AbortedTxn, segment_base: int) -> None:
        """Record an abort whose marker went into the segment starting at `segment_base`. A replay
        that meets a marker the index already holds adds nothing."""
        if self._last_offsets and entry.last_offset <= self._last_offsets[-1]:
            return
        # In memory first: the marker is in the log already, so read_committed readers must skip the
        # transaction even if the file write below fails (that OSError is the caller's storage error).
        self._entries.append(entry)
        self._last_offsets.append(entry.last_offset)
        path = txn_index_path(self.directory, segment_base)
        self._unsynced.add(path)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, _ENTRY.pack(ENTRY_VERSION, *entry))
        finally:
            os.close(fd)

    def take_unsynced(self) -> list[Path]:
        """The files written since the last call, for `fsync_files` off the event loop."""
        paths, self._unsynced = list(self._unsynced), set()
        return paths

    def still_unsynced(self, paths: list[Path]) -> None:
        """An fsync of `paths` failed: the next snapshot tries again."""
        self._unsynced.update(paths)

    def collect(self, fetch_offset: int, upper_offset: int) -> list[AbortedTxn]:
        """The aborted transactions a reader of [fetch_offset, upper_offset) must skip."""
        found: list[AbortedTxn] = []
        if not self._entries:  # most logs: no transaction ever aborted (a READ_COMMITTED fetch asks each time)
            return found
        for i in range(bisect.bisect_left(self._last_offsets, fetch_offset), len(self._entries)):
            entry = self._entries[i]
            if entry.first_offset < upper_offset:
                found.append(entry)
            if entry.last_stable_offset >= upper_offset:
                break
        return found

    def truncate_from(self, offset: int, segment_bases: list[int]) -> None:
        """Blocking only in the rare case it has work: forget entries whose marker is at or above
        `offset` (a truncated log, or a replay about to write them again) and cut their files."""
        cut = bisect.bisect_left(self._last_offsets, offset)
        if cut == len(self._entries):
            return
        del self._entries[cut:]
        del self._last_offsets[cut:]
        for i, base in enumerate(segment_bases):
            end = segment_bases[i + 1] if i + 1 < len(segment_bases) else None
            if end is not None and end <= offset:
                continue
            keep = sum(1 for e in self._entries if e.last_offset >= base and (end is None or e.last_offset < end))
            path = txn_index_path(self.directory, base)
            try:
                if keep:
                    os.truncate(path, keep * ENTRY_SIZE)
                else:
                    os.unlink(path)
            except FileNotFoundError:
                continue

    def clear(self) -> None:
        self._entries.clear()
        self._last_offsets.clear()

    def replace_range(self, first: int, end: int, entries: list[AbortedTxn]) -> None:
        """The cleaner swapped in a segment for [first, end): its markers' entries are now `entries`
        (the aborted transactions it still holds records of, read from its new file)."""
        low, high = bisect.bisect_left(self._last_offsets, first), bisect.bisect_left(self._last_offsets, end)
        self._entries[low:high] = entries
        self._last_offsets[low:high] = [e.last_offset for e in entries]

    def drop_below(self, offset: int) -> None:
        """Forget entries whose marker lies below `offset`: their segments were deleted (the files
        went with them)."""
        cut = bisect.bisect_left(self._last_offsets, offset)
        if cut:
            del self._entries[:cut]
            del self._last_offsets[:cut]


def fsync_files(paths: list[Path]) -> None:
    """Blocking: fsync index files (one deleted meanwhile went with its segment)."""
    for path in paths:
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            continue
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
