"""The cleaner's key map: for one cleaning round, the latest offset of each key in the dirty section.

Keys are held as their MD5 digests (16 bytes, as Kafka's SkimpyOffsetMap does), so a key of any size
costs the same; a key shorter than a digest is held as it is (no hash to compute, no collision, and no
larger than a digest; a digest is 16 bytes, so the two never meet). The map is bounded by
`log.cleaner.dedupe.buffer.size` split over `log.cleaner.threads`: once
`log.cleaner.io.buffer.load.factor` of its capacity is used, the round stops mapping and cleans only
up to the last offset it mapped; the next round goes on from there.

Kafka packs 24 bytes per key into a byte array; a Python dict entry (digest object, offset int, table
slot) costs about `ENTRY_BYTES`, so the same buffer size holds fewer keys here but bounds the same
memory.
"""

from __future__ import annotations

import hashlib

ENTRY_BYTES = 140  # measured with tracemalloc: 137 bytes a key (dict slot, 16-byte digest, int), CPython 3.12
NO_OFFSET = -1
_DIGEST_BYTES = 16


def digest(key: bytes) -> bytes:
    return hashlib.md5(key, usedforsecurity=False).digest()


def map_key(key: bytes) -> bytes:
    """What the map holds for `key` (protocol/_record_spans.c's map_key too)."""
    return key if len(key) < _DIGEST_BYTES else digest(key)


def key_map_capacity(dedupe_buffer_size: int, threads: int, load_factor: float) -> int:
    """How many keys one cleaner thread's map may hold (0: too small to clean anything)."""
    per_thread = min(dedupe_buffer_size // max(threads, 1), 2**31 - 1)
    return int(per_thread // ENTRY_BYTES * load_factor)


class KeyOffsetMap:
    __slots__ = ("capacity", "_offsets", "latest_offset")

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError("the cleaner's key map cannot hold a single key; raise log.cleaner.dedupe.buffer.size "
                             "or lower log.cleaner.threads")
        self.capacity = capacity
        self._offsets: dict[bytes, int] = {}
        self.latest_offset = NO_OFFSET  # the last offset the map covers (keys or not)

    def __len__(self) -> int:
        return len(self._offsets)

    @property
    def full(self) -> bool:
        return len(self._offsets) >= self.capacity

    def clear(self) -> None:
        self._offsets.clear()
        self.latest_offset = NO_OFFSET

    @property
    def offsets(self) -> dict[bytes, int]:
        """map_key(key) -> latest offset: for the compiled walks, which read and fill it in one call a batch."""
        return self._offsets

    def put(self, key: bytes, offset: int) -> None:
        self._offsets[map_key(key)] = offset
        if offset > self.latest_offset:
            self.latest_offset = offset

    def get(self, key: bytes) -> int:
        """The latest offset of `key`, NO_OFFSET if the round did not map it."""
        return self._offsets.get(map_key(key), NO_OFFSET)

    def cover_up_to(self, offset: int) -> None:
        """The map holds every key up to `offset` (a whole segment was read)."""
        if offset > self.latest_offset:
            self.latest_offset = offset

    @property
    def utilization(self) -> float:
        return len(self._offsets) / self.capacity
