"""Sparse offset and time indexes in Kafka's binary formats.

`.index`: 8-byte entries, relative offset int32 and file position int32 (big-endian). An entry
(O, P) says the batch that starts at byte P of the segment ends at offset base + O.

`.timeindex`: 12-byte entries, timestamp int64 and relative offset int32. An entry (T, O) says every
record with a timestamp above T lies after offset base + O. Timestamps only grow.

The entries live in memory (two `array`s, so `bisect` runs in C); the file holds a prefix of them
and catches up on `persist`, which the segment calls when it is flushed. The file on disk can be
behind memory after a crash, which is why recovery rebuilds the indexes of unflushed segments.
"""

from __future__ import annotations

import errno
import os
import struct
from array import array
from bisect import bisect_left, bisect_right
from itertools import chain
from pathlib import Path

from broker.log.common import NO_TIMESTAMP
from broker.log.free_space import is_out_of_space
from protocol.varint import INT32_MAX


class CorruptIndexError(Exception):
    pass


class _Index:
    entry_size: int
    _entry: struct.Struct
    _key_type: str

    def __init__(self, path: Path, base_offset: int, max_entries: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max_entries
        self._keys = array(self._key_type)
        self._values = array("i")
        self._persisted = 0  # leading entries the file is known to hold
        self._low_water = 0  # smallest length since the last persist began (truncations)
        # Set on the loop before the segment's files are renamed for deletion: a write queued before
        # then must not create the file again under its old name (nothing would ever remove it).
        self.retired = False

    def __len__(self) -> int:
        return len(self._keys)

    @property
    def is_full(self) -> bool:
        return len(self._keys) >= self.max_entries

    @property
    def unpersisted(self) -> bool:
        return self._persisted != len(self._keys)

    @property
    def size_bytes(self) -> int:
        return len(self._keys) * self.entry_size

    def _append(self, key: int, value: int) -> None:
        self._keys.append(key)
        self._values.append(value)

    def _truncate_entries(self, count: int) -> None:
        if count < len(self._keys):
            del self._keys[count:]
            del self._values[count:]
            self._persisted = min(self._persisted, count)
            self._low_water = min(self._low_water, count)

    def clear(self) -> None:
        self._truncate_entries(0)

    def entries(self) -> list[tuple[int, int]]:
        return list(zip(self._keys, self._values, strict=True))

    # -- the file --

    def _decode(self, data: bytes) -> None:
        if len(data) % self.entry_size:
            raise CorruptIndexError(f"{self.path}: size {len(data)} is not a multiple of {self.entry_size}")
        for key, value in self._entry.iter_unpack(data):
            self._append(key, value)
        self._persisted = self._low_water = len(self._keys)

    def load(self) -> None:
        """Read the file into memory (blocking). A missing file is an error the caller handles."""
        self._decode(self.path.read_bytes())

    def prepare_persist(self) -> PendingIndexWrite | None:
        """On the event loop: capture what the file lacks. None if the file is up to date."""
        start, count = self._persisted, len(self._keys)
        if self.retired or (start == count and self.path.exists()):
            return None
        pairs = chain.from_iterable(zip(self._keys[start:count], self._values[start:count], strict=True))
        payload = struct.pack(">" + self._entry.format[1:] * (count - start), *pairs)
        self._low_water = count
        return PendingIndexWrite(self, start * self.entry_size, payload, count)

    def _persisted_up_to(self, count: int) -> None:
        # A truncation while the write ran leaves stale entries past the cut; the next persist redoes them.
        self._persisted = min(count, self._low_water)

    def write_all(self) -> None:
        """Blocking: replace the file with every entry in memory (after a rebuild). With no room for it
        (a full disk) the entries stay in memory, unpersisted, and the next flush writes them: a
        recovery must not need free space."""
        self._persisted = self._low_water = 0
        pending = self.prepare_persist()
        if pending is not None:
            try:
                pending.run()
            except OSError as exc:
                if not is_out_of_space(exc):
                    raise
                return
            pending.done()


class PendingIndexWrite:
    """The tail of an index that the file lacks: `run` (blocking, any thread), then `done` (on the loop)."""

    __slots__ = ("index", "position", "payload", "count")

    def __init__(self, index: _Index, position: int, payload: bytes, count: int) -> None:
        self.index, self.position, self.payload, self.count = index, position, payload, count

    def run(self) -> None:
        # `retired` is set on the loop before the segment's files are renamed for deletion: a write that
        # sees it keeps nothing (the name may even be a newer segment's by now, after a truncation).
        if self.index.retired:
            return
        try:
            fd = os.open(self.index.path, os.O_WRONLY)
        except FileNotFoundError:
            if self.index.retired:  # renamed away since the check above
                return
            fd = os.open(self.index.path, os.O_WRONLY | os.O_CREAT, 0o644)  # a new index's first write
            if self.index.retired:
                # Retired between the check and the create: the rename may have run before the file
                # existed, so this one would be left behind under the old name. Remove it, if still ours.
                try:
                    if os.path.samestat(os.fstat(fd), os.stat(self.index.path)):
                        os.unlink(self.index.path)
                except FileNotFoundError:  # renamed with the segment after all
                    pass
                os.close(fd)
                return
        try:
            os.ftruncate(fd, self.position)
            if self.payload and os.pwrite(fd, self.payload, self.position) < len(self.payload):
                raise OSError(errno.ENOSPC, "short write of an index", str(self.index.path))
            os.fsync(fd)
        finally:
            os.close(fd)

    def done(self) -> None:
        self.index._persisted_up_to(self.count)


class OffsetIndex(_Index):
    entry_size = 8
    _entry = struct.Struct(">ii")
    _key_type = "i"

    @property
    def last_offset(self) -> int:
        return self.base_offset + self._keys[-1] if self._keys else self.base_offset

    def append(self, offset: int, position: int) -> None:
        relative = offset - self.base_offset
        if not 0 <= relative <= INT32_MAX:
            raise ValueError(f"offset {offset} does not fit segment {self.base_offset}")
        if self._keys and (relative <= self._keys[-1] or position <= self._values[-1]):
            raise ValueError(f"index entry ({offset}, {position}) does not follow the last one")
        self._append(relative, position)

    def lookup(self, offset: int) -> tuple[int, int]:
        """(offset, position) of the last entry at or below `offset`; (base, 0) if none is."""
        i = bisect_right(self._keys, offset - self.base_offset) - 1
        if i < 0:
            return self.base_offset, 0
        return self.base_offset + self._keys[i], self._values[i]

    def lookup_position(self, position: int) -> int:
        """The largest indexed batch start at or below `position` (0 if none)."""
        i = bisect_right(self._values, position) - 1
        return self._values[i] if i >= 0 else 0

    def truncate_to(self, offset: int) -> None:
        """Drop entries for batches that end at or above `offset`."""
        self._truncate_entries(bisect_right(self._keys, offset - self.base_offset - 1))

    def check(self, segment_size: int) -> None:
        keys, values = self._keys, self._values
        for i in range(1, len(keys)):
            if keys[i] <= keys[i - 1] or values[i] <= values[i - 1]:
                raise CorruptIndexError(f"{self.path}: entry {i} does not follow entry {i - 1}")
        if keys and (keys[0] < 0 or values[0] < 0 or values[-1] >= segment_size):
            raise CorruptIndexError(f"{self.path}: entries point outside the segment")


class TimeIndex(_Index):
    entry_size = 12
    _entry = struct.Struct(">qi")
    _key_type = "q"

    @property
    def last_entry(self) -> tuple[int, int]:
        """(timestamp, offset) of the last entry, or (NO_TIMESTAMP, base) when empty."""
        if not self._keys:
            return NO_TIMESTAMP, self.base_offset
        return self._keys[-1], self.base_offset + self._values[-1]

    def maybe_append(self, timestamp: int, offset: int) -> None:
        """Add (timestamp, offset) if the timestamp is above the last one (the index stays monotonic)."""
        if self._keys and timestamp <= self._keys[-1]:
            return
        relative = offset - self.base_offset
        if not 0 <= relative <= INT32_MAX:
            raise ValueError(f"offset {offset} does not fit segment {self.base_offset}")
        if self._values and relative < self._values[-1]:
            raise ValueError(f"time index offset {offset} goes backwards")
        self._append(timestamp, relative)

    def lookup(self, timestamp: int) -> tuple[int, int]:
        """(timestamp, offset) of the last entry at or below `timestamp`; (NO_TIMESTAMP, base) if none."""
        i = bisect_right(self._keys, timestamp) - 1
        if i < 0:
            return NO_TIMESTAMP, self.base_offset
        return self._keys[i], self.base_offset + self._values[i]

    def truncate_to(self, offset: int) -> None:
        """Drop entries whose offset is at or above `offset`."""
        self._truncate_entries(bisect_left(self._values, offset - self.base_offset))

    def check(self, next_offset: int) -> None:
        keys, values = self._keys, self._values
        for i in range(1, len(keys)):
            if keys[i] <= keys[i - 1] or values[i] < values[i - 1]:
                raise CorruptIndexError(f"{self.path}: entry {i} does not follow entry {i - 1}")
        if values and (
            values[0] < 0 or self.base_offset + values[-1] >= max(next_offset, self.base_offset + 1)
        ):
            raise CorruptIndexError(f"{self.path}: entries point outside the segment")
