"""Reading record data for answers: the file slices a log returns, copied into one buffer.

Record data never waits on the disk on the event loop: the slices are read with
preadv(RWF_NOWAIT), which takes only what the page cache holds and never blocks (the common case:
consumers read what was just written), and a thread of the pool reads whatever was not cached.
Where RWF_NOWAIT is missing, reads of at most `INLINE_READ_BYTES` run inline and larger ones in the
pool. Files are pinned while read, so a segment deleted meanwhile stays open.

A connection that can send from files (plain TCP) gets FileRegions instead, when the answer is large
enough for the copy to matter: those bytes go from the page cache to the socket with sendfile
(broker/file_sender.py) and are never read here. A partition whose pages are not all in the page
cache (broker/log/page_cache.py) has them brought in first by a pool thread, with sendfile to
/dev/null: the kernel reads the pages and drops what it would have written, so nothing is copied into
the process. It costs that thread 0.02-0.03 CPU-s per GB here, as little as mmap with
MADV_POPULATE_READ without a mapping to make (nor page-aligned offsets, nor a fault past the end of a
file cut short), against 0.2 for reads into a small reused buffer and over 1 for the copy
(docs/performance.md). Only a partition still not all cached after that is copied.
"""

from __future__ import annotations

import asyncio
import errno
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, Future
from itertools import chain
from operator import attrgetter
from typing import TYPE_CHECKING, TypeVar

from broker.log import page_cache
from broker.log.file_region import FileRegion, release_slices
from broker.log.results import FileSlice

if TYPE_CHECKING:
    from broker.log.segment_file import SegmentFile

INLINE_READ_BYTES = 64 * 1024
# Below this an answer is copied: one write of a small answer costs less than a sendfile per slice.
SENDFILE_MIN_BYTES = 32 * 1024
_T = TypeVar("_T")


class SliceReader:
    def __init__(self, executor: Executor) -> None:
        self._executor = executor

    async def for_sending(self, groups: Sequence[Sequence[FileSlice]],
                          regions: list[FileRegion]) -> Sequence[memoryview | FileRegion]:
        """What `read` gives, or, when the answer is large enough, FileRegions in place of the groups
        (added to `regions` too, for the connection to release once they are sent). The groups come
        pinned (PartitionLog.read(pinned=True)): the regions take those pins over, and what is read
        instead lets them go. Pages go missing from segments just written (on this project's VM a
        proactive reclaimer, DAMON, pages the cache out): a group with pages missing has them brought
        into the page cache in the pool, still pinned, and is sent from its files if they are all there
        then; only the groups still missing pages are read and copied."""
        # The total summed in C loops (no generator frame): once per Fetch answer
        if page_cache.available() and sum(map(_LENGTH, chain.from_iterable(groups))) >= SENDFILE_MIN_BYTES:
            found = _regions_where_cached(groups, regions)
            if found is not None:
                answer, cold = found
                if cold:
                    await self._send_cold(groups, answer, cold, regions)
                return answer
        return await self.read_held(groups)

    async def _send_cold(self, groups: Sequence[Sequence[FileSlice]], answer: list[memoryview | FileRegion],
                         cold: list[tuple[int, FileRegion]], regions: list[FileRegion]) -> None:
        """Fill `answer` at the cold groups' indexes: their regions once their pages are brought into the
        page cache, or their bytes read for the groups whose pages are still missing after that (their
        regions pinned until then: a segment deleted meanwhile stays open for the read)."""
        still: list[tuple[int, FileRegion]] = []
        jobs = _PoolJobs(self._executor)
        try:
            await jobs.run(_bring_into_page_cache, [region.pieces() for _, region in cold])
            cached = page_cache.checker()
            while cold:
                index, region = cold.pop()
                if cached is not None and all(cached(fd, position, length)
                                              for fd, position, length in region.pieces()):
                    answer[index] = region
                    regions.append(region)
                else:
                    still.append((index, region))
            if still:  # read under the regions' pins (every cold group has bytes: its total is theirs)
                copies = await self._read_pinned([groups[index] for index, _ in still],
                                                 sum(region.length for _, region in still), jobs)
                for (index, _), copy in zip(still, copies, strict=True):
                    answer[index] = copy
        finally:
            # Read, cancelled, or failed: let the files go, once no pool thread uses their descriptors
            left = [region for _, region in chain(cold, still)]
            jobs.then(lambda: _release_all(left))

    async def read(self, groups: Sequence[Sequence[FileSlice]]) -> list[memoryview]:
        """The bytes of each group of file slices (one group per partition), read in one go."""
        total = sum(s.length for group in groups for s in group)
        if total == 0:
            return [memoryview(b"") for _ in groups]
        pinned = [s.file for group in groups for s in group]
        for file in pinned:
            file.pin()
        jobs = _PoolJobs(self._executor)
        try:
            return await self._read_pinned(groups, total, jobs)
        finally:
            jobs.then(lambda: _unpin_all(pinned))

    async def read_held(self, groups: Sequence[Sequence[FileSlice]]) -> list[memoryview]:
        """`read` of groups that come pinned (PartitionLog.read(pinned=True)), whose pins go once read."""
        jobs = _PoolJobs(self._executor)
        try:
            total = sum(s.length for group in groups for s in group)
            if total == 0:
                return [memoryview(b"") for _ in groups]
            return await self._read_pinned(groups, total, jobs)
        finally:
            jobs.then(lambda: release_slices(groups))

    async def _read_pinned(self, groups: Sequence[Sequence[FileSlice]], total: int,
                           jobs: _PoolJobs) -> list[memoryview]:
        """`read` of files the caller holds pinned (a segment deleted since stays readable, though a new
        pin of it is refused) until `jobs` has no read left running."""
        read = _GroupRead(groups, total)
        if _NOWAIT is not None:
            if not read.fill(_NOWAIT):
                await jobs.run(read.fill, 0)
        elif total <= INLINE_READ_BYTES:
            read.fill(0)
        else:
            await jobs.run(read.fill, 0)
        return read.views()


class _PoolJobs:
    """The pool jobs of one answer, run one after another, and what lets its files go: a task cancelled
    while a thread still reads or warms them (the job cannot be stopped) lets them go only once that job
    ends, or the thread would use descriptors a deleted segment's unpin closed, maybe reused for
    another file."""

    __slots__ = ("_executor", "_job")

    def __init__(self, executor: Executor) -> None:
        self._executor = executor
        self._job: Future | None = None

    async def run(self, fn: Callable[..., _T], *args: object) -> _T:
        self._job = self._executor.submit(fn, *args)
        return await asyncio.wrap_future(self._job)

    def then(self, release: Callable[[], None]) -> None:
        """`release` now when no job runs (or the last one could still be cancelled before it started),
        else on the loop once it ends."""
        job = self._job
        if job is None or job.cancel() or job.done():
            release()
            return
        loop = asyncio.get_running_loop()

        def ended(_: Future) -> None:
            try:
                loop.call_soon_threadsafe(release)
            except RuntimeError:  # the loop closed (shutting down): the files close with the process
                pass

        job.add_done_callback(ended)


def _release_all(regions: list[FileRegion]) -> None:
    for region in regions:
        region.release()


def _unpin_all(files: list[SegmentFile]) -> None:
    for file in files:
        file.unpin()


try:  # where it is built (setup.py); tests/broker/test_read_slices.py holds it equal to the loop
    from broker._file_send import regions as _compiled_regions
except ImportError:  # pragma: no cover - the package installed without a C compiler
    _compiled_regions = None
_NOWAIT: int | None = getattr(os, "RWF_NOWAIT", None)
_LENGTH = attrgetter("length")
_EMPTY = memoryview(b"")
_null: int | None = None
_null_lock = threading.Lock()


def _null_descriptor() -> int:
    """/dev/null, opened once for the process and shared by the pool's threads (sendfile keeps no
    position on it)."""
    global _null
    with _null_lock:
        if _null is None:
            _null = os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC)
        return _null


def _bring_into_page_cache(pieces_of_groups: list[list[tuple[int, int, int]]]) -> None:
    """In a pool thread: read these (descriptor, position, length) ranges into the page cache without
    copying them anywhere, by sendfile to /dev/null. A range that fails (an I/O error, a kernel that will
    not send to /dev/null) or ends early (a file cut short) is left as it is: the caller's cachestat
    check then finds pages missing and the copy that follows reads them or reports the error."""
    try:
        null = _null_descriptor()
    except OSError:  # no /dev/null to open (a bare container): every group is copied
        return
    for pieces in pieces_of_groups:
        for fd, position, length in pieces:
            end = position + length
            try:
                while position < end:
                    sent = os.sendfile(null, fd, position, end - position)
                    if sent <= 0:
                        break
                    position += sent
            except OSError:
                continue


def _regions_where_cached(groups: Sequence[Sequence[FileSlice]], regions: list[FileRegion]
                          ) -> tuple[list[memoryview | FileRegion], list[tuple[int, FileRegion]]] | None:
    """The answer with a FileRegion, taking over the groups' pins, for each group whose slices are all
    in the page cache (those regions added to `regions` too), and the groups that are not as (index in
    the answer, their region), for the caller to warm or read; None, every pin left with the groups,
    when nothing is known to be cached."""
    cached = page_cache.checker()  # the kernel's check, bound once per answer
    if cached is None:
        return None
    if _compiled_regions is not None:  # the loop below in one call (broker/_file_send.c)
        return _compiled_regions(groups, regions, cached, FileRegion, _EMPTY)
    answer: list[memoryview | FileRegion] = []
    cold: list[tuple[int, FileRegion]] = []
    for group in groups:
        if not group:  # what a partition without data has (its slices are never empty)
            answer.append(_EMPTY)
            continue
        region = FileRegion(group, True)
        for fd, position, length in region.pieces():
            if not cached(fd, position, length):
                cold.append((len(answer), region))
                answer.append(_EMPTY)  # replaced by the region or the bytes read
                break
        else:
            regions.append(region)
            answer.append(region)
    return answer, cold


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
