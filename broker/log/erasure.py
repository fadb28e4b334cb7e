"""Physical erasure: Ebb's own topic config `erasure.max.delay.ms` bounds how long the bytes of records
below the log start offset stay in the partition's files on this replica.

When the log start offset moves inside a segment (DeleteRecords, retention, retention.committed.groups, a
follower learning its leader's start), the batches of that segment from the one holding the start onward
are copied into a new segment named by that batch's base offset, with its indexes and `.txnindex`, off
the event loop (the log's I/O pool), and swapped in as the cleaner swaps (`.cleaned` -> `.swap` -> live,
PartitionLog.replace_segments); the old files are removed at once rather than after
`file.delete.delay.ms` (SegmentRun retires every segment that way under erasure, so retention and the
cleaner obey the same bound). A batch holding the start offset is kept whole: the offset erased up to
is the base offset of the first kept batch (`PartitionLog.erasable_offset`). A start inside the active
segment rolls it first, so that the bytes copied stop changing.

A pass starts half the bound after the move that made it due (moves in between share it), leaving the
other half for the copy itself; a bound of 0 starts at once. Batches are copied as stored, never
decoded. A kill at any point loses nothing: a `.cleaned` copy is dropped at load and the old segment
stays (the next pass copies again); a `.swap` is complete and replaces the segment it overlaps
(loader.py). A pass that fails or is overtaken is tried again (after five in a row, half the bound
later); stop() halts a running copy. What this replica has erased is `PartitionLog.erased_offset`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import structlog

from broker.log.cleaner import CLEANED_SUFFIX, SWAP_SUFFIX, finish_copy, open_for_reading, remove_segment_files
from broker.log.common import LogError, stop_for_test
from broker.log.segment import LogSegment
from broker.log.segment_file import BatchInfo, CorruptSegmentError, scan_headers
from broker.log.txn_index import AbortedTxn

if TYPE_CHECKING:
    from broker.log.log import PartitionLog

logger = structlog.get_logger(__name__)

_COPY_CHUNK = 1024 * 1024  # bytes read and appended at a time (a larger batch goes alone)
_ATTEMPTS = 5  # passes in a row that failed or whose segment changed under them before a pause
_RETRY_S = 1.0  # the least pause after those, before trying again


@dataclass(frozen=True, slots=True)
class ErasureTarget:
    """A closed segment holding bytes below the log start offset, as the loop saw it."""

    segment: LogSegment
    path: Path  # its `.log` (the copy reads it by the `.deleted` name if retention retired it meanwhile)
    position: int  # where the first kept batch begins (the segment's size: none is kept)
    new_base: int  # that batch's base offset (the start offset when none is kept)
    size: int
    next_offset: int
    aborted: tuple[AbortedTxn, ...]  # the segment's aborted transactions whose marker is kept
    truncations: int  # the log's count of truncations: one since means the bytes may differ at equal sizes


class CopyStopped(Exception):
    """The erasure was stopped (its log closes or is deleted) while its copy ran."""


def copy_tail(directory: Path, target: ErasureTarget, index_interval_bytes: int, max_index_bytes: int,
              now_ms: int, halt: threading.Event | None = None) -> LogSegment:
    """Blocking (the log's I/O pool): `<new base>.log.cleaned` holding the target's batches from its
    position on, with indexes, `.txnindex` and bytes fsynced; returned open. Once `halt` is set it
    stops at the next batch (CopyStopped) with its files removed."""
    copy = LogSegment.create(directory, target.new_base, index_interval_bytes=index_interval_bytes,
                             max_index_bytes=max_index_bytes, now_ms=now_ms, suffix=CLEANED_SUFFIX)
    try:
        fd = open_for_reading(target.path)
        try:
            infos: list[BatchInfo] = []
            chunk_start = chunk_end = target.position
            for position, header in scan_headers(fd, target.position, target.size):
                if halt is not None and halt.is_set():
                    raise CopyStopped(str(target.path))
                if infos and position + header.size - chunk_start > _COPY_CHUNK:
                    copy.append(memoryview(os.pread(fd, chunk_end - chunk_start, chunk_start)), infos)
                    infos, chunk_start = [], position
                infos.append(BatchInfo(position - chunk_start, header.base_offset, header.last_offset, header.size,
                                       header.max_timestamp, header.partition_leader_epoch))
                chunk_end = position + header.size
            if infos:
                copy.append(memoryview(os.pread(fd, chunk_end - chunk_start, chunk_start)), infos)
        finally:
            os.close(fd)
        if halt is not None and halt.is_set():
            raise CopyStopped(str(target.path))
        finish_copy(copy, list(target.aborted), target.path)
    except BaseException:
        remove_segment_files(copy)
        raise
    return copy


class Erasure:
    """The erasure passes of one PartitionLog: one at a time, started within half the bound."""

    def __init__(self, log: PartitionLog) -> None:
        self.log = log
        self._timer: asyncio.TimerHandle | None = None
        self._task: asyncio.Task[None] | None = None
        self._again = False
        self._stopped = False
        self._halt: threading.Event | None = None  # the running copy's: stop() sets it
        self.passes = 0  # segments rewritten, for tests

    def schedule(self, retry_after_s: float = 0.0) -> None:
        """The start offset moved (or the config changed, or the log was loaded, or passes failed): a
        pass is due if bytes below the start remain and erasure is on."""
        config = self.log.config
        if self._stopped or not config.erasure_enabled or self.log.offline:
            return
        if self.log.erased_offset >= self.log.erasable_offset():
            return
        if self._task is not None:
            self._again = True
            return
        if self._timer is not None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # a log used outside a loop (tests, tools): nothing runs in the background
            return
        self._timer = loop.call_later(max(config.erasure_max_delay_ms / 2000, retry_after_s), self._start)

    def resume(self) -> None:
        """The log is (again) one its manager serves: passes may run, and what is due is scheduled."""
        self._stopped = False
        self.schedule()

    def _start(self) -> None:
        self._timer = None
        self._task = self.log.io.spawn(self._run(), f"erasure of {self.log.topic_partition}")

    async def _run(self) -> None:
        try:
            attempts = 0
            while attempts < _ATTEMPTS and not self.log.offline:
                self._again = False
                try:
                    done = await self._pass()
                except (OSError, LogError, CorruptSegmentError) as exc:
                    # say, the segment retired (and unlinked at once) or truncated during the copy
                    logger.warning("erasure pass failed", partition=str(self.log.topic_partition), error=repr(exc))
                    done = False
                attempts = 0 if done else attempts + 1
                if done and not self._again:
                    return
        finally:
            self._task = None
        self.schedule(retry_after_s=_RETRY_S)  # never given up for good: what is due is tried again

    async def _pass(self) -> bool:
        """Rewrite the first segment if it holds bytes below the start; False when it changed meanwhile."""
        log = self.log
        target = log.erasure_target()
        if target is None:
            return True
        copy = await self._copy(target)
        stop_for_test("erasure-copied")
        old = target.segment
        try:
            swapped = self._swap(target, copy)
        except LogError:
            await log.io.run(remove_segment_files, copy)
            raise
        if not swapped:
            await log.io.run(remove_segment_files, copy)
            return False
        self.passes += 1
        logger.info("erased records below the log start offset", partition=str(log.topic_partition),
                    segment=old.base_offset, kept_from=target.new_base, bytes_erased=target.position,
                    bytes_kept=target.size - target.position)
        await log.flush(up_to=log.recovery_point)  # the renames reach the directory on disk
        return True

    def _swap(self, target: ErasureTarget, copy: LogSegment) -> bool:
        """Swap the copy in if the segment is still as it read it (the check and the swap in one turn of
        the loop); False otherwise. A truncation (a follower's) may have cut the segment and appended
        other batches up to the same size and next offset: the count of truncations tells."""
        log, old = self.log, target.segment
        unchanged = (old.size, old.next_offset, log.truncations) == (target.size, target.next_offset,
                                                                     target.truncations)
        return unchanged and log.replace_segments([old], copy, SWAP_SUFFIX,
                                                  between=lambda: stop_for_test("erasure-swap"),
                                                  aborted_txns=list(target.aborted))

    async def _copy(self, target: ErasureTarget) -> LogSegment:
        """copy_tail in the pool. A stop meanwhile halts it at its next batch, and the pass (a task of
        the log's LogIO) ends only once the copy has and its files are gone: `io.drain()` after
        `stop()` means nothing of this pass writes in the directory any more."""
        log, config = self.log, self.log.config
        halt = self._halt = threading.Event()
        copying = asyncio.ensure_future(log.io.run(copy_tail, log.directory, target, config.index_interval_bytes,
                                                   config.index_bytes, log.clock(), halt))
        try:
            return await asyncio.shield(copying)
        except asyncio.CancelledError:
            halt.set()
            with contextlib.suppress(Exception):  # CopyStopped: it removed its files itself
                copy = await asyncio.shield(copying)
                await log.io.run(remove_segment_files, copy)  # it had finished before it could see the halt
            raise
        finally:
            self._halt = None

    def stop(self) -> None:
        """The log closes or is deleted: a pending pass is dropped, a running copy halts (the pass ends
        when it has: wait with `log.io.drain()`), and none starts again (the next load schedules what is
        due; a kill mid-copy leaves a `.cleaned` file, which that load removes)."""
        self._stopped = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._halt is not None:
            self._halt.set()
        if self._task is not None:
            self._task.cancel()
