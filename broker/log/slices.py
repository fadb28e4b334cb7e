"""Reading record data for answers: the file slices a log returns, copied into one buffer.

Record data never waits on the disk on the event loop: the slices are read with
preadv(RWF_NOWAIT), which takes only what the page cache holds and never blocks (the common case:
consumers read what was just written), and a thread of the pool reads whatever was not cached.
Where RWF_NOWAIT is missing, reads of at most `INLINE_READ_BYTES` run inline and larger ones in the
pool. Files are pinned while read, so a segment deleted meanwhile stays open.

A connection that can send from files (plain TCP) gets FileRegions instead, for each partition whose
bytes are all in the page cache (broker/log/page_cache.py), when the answer is large enough for the
copy to matter: those bytes then go from the page cache to the socket with sendfile
(broker/file_sender.py) and are never read here.
"""

from __future__ import annotations

import asyncio
import errno
import os
from collections.abc import Sequence
from concurrent.futures import Executor
from itertools import chain
from operator import attrgetter

from broker.log import page_cache
from broker.log.file_region import FileRegion
from broker.log.results import FileSlice

INLINE_READ_BYTES = 64 * 1024
# Below this an answer is copied: one write of a small answer costs less than a sendfile per slice.
SENDFILE_MIN_BYTES = 32 * 1024


class SliceReader:
    def __init__(self, executor: Executor) -> None:
        self._executor = executor

    async def for_sending(self, groups: Sequence[Sequence[FileSlice]],
                          regions: list[FileRegion]) -> Sequence[memoryview | FileRegion]:
        """What `read` gives, or, when the answer is large enough, pinned FileRegions in place of the
        groups whose data is all in the page cache (added to `regions` too, for the connection to release
        once they are sent); the other groups are read. Pages go missing from a segment just written
        (on this project's VM, a few to 64 pages of a megabyte, with no reclaim counted): only that
        partition's bytes are then copied, not the whole answer's."""
        # The total summed in C loops (no generator frame): once per Fetch answer
        if page_cache.available() and sum(map(_LENGTH, chain.from_iterable(groups))) >= SENDFILE_MIN_BYTES:
            found = _regions_where_cached(groups, regions)
            if found is not None:
                answer, missing = found
                if missing:
                    for index, copy in zip(missing, await self.read([groups[i] for i in missing]), strict=True):
                        answer[index] = copy
                return answer
        return await self.read(groups)

    async def read(self, groups: Sequence[Sequence[FileSlice]]) -> list[memoryview]:
        """The bytes of each group of file slices (one group per partition), read in one go."""
        total = sum(s.length for group in groups for s in group)
        if total == 0:
            return [memoryview(b"") for _ in groups]
        pinned = [s.file for group in groups for s in group]
        for file in pinned:
            file.pin()
        try:
            read = _GroupRead(groups, total)
            loop = asyncio.get_running_loop()
            if _NOWAIT is not None:
                if not read.fill(_NOWAIT):
                    await loop.run_in_executor(self._executor, read.fill, 0)
            elif total <= INLINE_READ_BYTES:
                read.fill(0)
            else:
                await loop.run_in_executor(self._executor, read.fill, 0)
            return read.views()
        finally:
            for file in pinned:
                file.unpin()


_NOWAIT: int | None = getattr(os, "RWF_NOWAIT", None)
_LENGTH = attrgetter("length")
_EMPTY = memoryview(b"")


def _regions_where_cached(groups: Sequence[Sequence[FileSlice]], regions: list[FileRegion]
                          ) -> tuple[list[memoryview | FileRegion], list[int]] | None:
    """The answer with a pinned FileRegion for each group whose slices are all in the page cache (those
    regions added to `regions` too) and the indexes of the groups that are not, to be read; None when
    nothing is known to be cached or a segment file closed for good since the log answered."""
    cached = page_cache.checker()  # the kernel's check, bound once per answer
    if cached is None:
        return None
    answer: list[memoryview | FileRegion] = []
    made: list[FileRegion] = []
    missing: list[int] = []
    try:
        for group in groups:
            if not group:  # what a partition without data has (its slices are never empty)
                answer.append(_EMPTY)
                continue
            region = FileRegion(group)
            for fd, position, length in region.pieces():
                if not cached(fd, position, length):
                    region.release()
                    missing.append(len(answer))
                    answer.append(_EMPTY)  # replaced by the bytes read
                    break
            else:
                made.append(region)
                answer.append(region)
    except ValueError:  # a segment file closed for good since the log answered: read as before
        for region in made:
            region.release()
        return None
    regions += made
    return answer, missing


class _GroupRead:
    """Every slice of every group read into one buffer, resumable: `fill(RWF_NOWAIT)` stops at the
    first byte that is not in the page cache, and a later blocking `fill(0)` goes on from there. A
    read that hits the end of the file (cut underneath) ends that group early: clients ignore a
    partial trailing batch."""

    __slots__ = ("buffer", "view", "pieces", "groups", "next_piece")

    def __init__(self, groups: Sequence[Sequence[FileSlice]], total: int) -> None:
        self.buffer = bytearray(total)
        self.view = memoryview(self.buffer)
        self.groups = len(groups)
        # [group, fd, file position, buffer position, length, bytes read, cut short]
        self.pieces: list[list] = []
        position = 0
        for g, group in enumerate(groups):
            for piece in group:
                self.pieces.append([g, piece.file.fileno(), piece.position, position, piece.length, 0, False])
                position += piece.length
        self.next_piece = 0

    def fill(self, flags: int) -> bool:
        """Read on from where the last call stopped; False when RWF_NOWAIT met bytes not cached."""
        pieces, view = self.pieces, self.view
        while self.next_piece < len(pieces):
            piece = pieces[self.next_piece]
            group, fd, file_position, position, length, done, _ = piece
            previous = pieces[self.next_piece - 1] if self.next_piece else None
            if previous is not None and previous[0] == group and previous[6]:
                piece[6] = True  # the group was cut short before this slice
            else:
                while done < length:
                    try:
                        n = os.preadv(fd, [view[position + done:position + length]], file_position + done, flags)
                    except BlockingIOError:
                        piece[5] = done
                        return False
                    except OSError as exc:
                        if flags and exc.errno in (errno.EOPNOTSUPP, errno.EINVAL):  # no RWF_NOWAIT here
                            piece[5] = done
                            return False
                        raise
                    if n <= 0:
                        piece[6] = True
                        break
                    done += n
                piece[5] = done
            self.next_piece += 1
        return True

    def views(self) -> list[memoryview]:
        """One view per group: its slices' bytes up to the first one cut short."""
        starts = [None] * self.groups
        ends = [0] * self.groups
        cut = [False] * self.groups
        for group, _fd, _file_position, position, _length, done, short in self.pieces:
            if starts[group] is None:
                starts[group] = ends[group] = position
            if not cut[group]:
                ends[group] = position + done
                cut[group] = short
        return [self.view[start:end] if start is not None else memoryview(b"")
                for start, end in zip(starts, ends, strict=True)]
