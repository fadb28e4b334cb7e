"""The log cleaner of one log dir (Kafka's LogCleaner and LogCleanerManager): which compacted log to
clean next, the rounds themselves in `log.cleaner.threads` cleaner processes, and
`cleaner-offset-checkpoint`.

Every `log.cleaner.backoff.ms` (or at once when woken) each worker takes the filthiest log that is not
being cleaned: among logs with `compact` in `cleanup.policy`, those whose dirty ratio (bytes above the
first dirty offset, below the first uncleanable one, over the log's bytes) is above
`min.cleanable.dirty.ratio`, or that hold a closed segment older than `max.compaction.lag.ms`. The
uncleanable part begins at the active segment, the last stable offset (the high watermark, or the first
offset of an unfinished transaction below it), or the first segment holding a record younger than
`min.compaction.lag.ms`.

Choosing and swapping run on the loop (they look at segment metadata only); mapping keys and copying
batches (broker/log/cleaner.py) run in a cleaner process, which keeps a round's key map between the
calls of that round; `clean_filthiest(None)` runs a round in the log's I/O threads instead (tests).
After a round the log's first dirty offset goes to `cleaner-offset-checkpoint` (Kafka's text format,
version 0), which is how a test or an operator sees that a round finished.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import itertools
import multiprocessing
import os
import signal
import sys
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Executor, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import structlog

from broker.aio import wait_for
from broker.log import checkpoint
from broker.log.checkpoint_file import CheckpointFile, Offsets, nothing_more
from broker.log.cleaner import (
    SWAP_SUFFIX,
    CleaningError,
    CleaningJob,
    SegmentView,
    begin_round,
    clean_next_group,
    end_round,
    open_cleaned,
    remove_cleaned_files,
    remove_segment_files,
)
from broker.log.cleaner_stats import CleanerReadings, RoundReport
from broker.log.common import STOP_AT_ENV as STOP_AT_ENV  # where the tests look for it
from broker.log.common import CorruptCheckpointError, LogError, TopicPartition, stop_for_test
from broker.log.config import LogManagerConfig
from broker.log.io import LogIO
from broker.log.log import PartitionLog
from broker.log.log_state import Clock
from broker.log.offset_map import key_map_capacity
from broker.log.segment import LogSegment
from broker.log.segment_file import CorruptSegmentError

logger = structlog.get_logger(__name__)

CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"

T = TypeVar("T")
_PR_SET_PDEATHSIG = 1
ProducerLastOffsets = Callable[[TopicPartition], Mapping[int, int] | None]


@dataclass(frozen=True, slots=True)
class LogToClean:
    log: PartitionLog
    first_dirty_offset: int
    first_uncleanable_offset: int
    clean_bytes: int
    cleanable_bytes: int
    needs_compaction_now: bool  # a dirty closed segment is older than max.compaction.lag.ms
    compaction_delay_ms: int = 0  # how long past max.compaction.lag.ms its oldest dirty segment is (Kafka's)

    @property
    def total_bytes(self) -> int:
        return self.clean_bytes + self.cleanable_bytes

    @property
    def cleanable_ratio(self) -> float:
        return self.cleanable_bytes / self.total_bytes if self.total_bytes else 0.0


def log_to_clean(log: PartitionLog, checkpointed: int | None, now_ms: int,
                 last_stable_offset: int | None = None) -> LogToClean:
    """Kafka's cleanableOffsets and calculateCleanableBytes for one log. `last_stable_offset`: where the
    replica's first unfinished transaction begins (None: no producer state here, only the high
    watermark bounds)."""
    start, end = log.log_start_offset, log.log_end_offset
    first_dirty = checkpointed if checkpointed is not None and start <= checkpointed <= end else start
    segments = log.segments
    active = segments[-1]
    closed_dirty = [s for s in segments[:-1] if s.next_offset > first_dirty or s.base_offset >= first_dirty]
    bounds = [log.high_watermark, active.base_offset]
    if last_stable_offset is not None:  # an open transaction's records may still be aborted
        bounds.append(last_stable_offset)
    min_lag = max(log.config.min_compaction_lag_ms, 0)
    if min_lag > 0:
        bounds += [s.base_offset for s in closed_dirty if s.max_timestamp > now_ms - min_lag][:1]
    first_uncleanable = max(first_dirty, min(bounds))
    holding = [s for s in segments[:-1] if s.base_offset <= first_uncleanable < s.next_offset
               or s.base_offset >= first_uncleanable]
    uncleanable_base = holding[0].base_offset if holding else active.base_offset
    low = min(first_dirty, uncleanable_base)
    cleanable = sum(s.size for s in segments
                    if s.base_offset < uncleanable_base and (s.next_offset > low or s.base_offset >= low))
    clean = sum(s.size for s in segments if s.base_offset < first_dirty)
    first_timestamps = [s.first_batch_timestamp for s in closed_dirty if s.first_batch_timestamp > 0]
    max_lag = max(log.config.max_compaction_lag_ms, 0)
    delay = now_ms - max_lag - min(first_timestamps) if first_timestamps else 0
    # A round maps and copies whole segments: it ends where the segment holding the bound begins (Kafka's).
    return LogToClean(log, first_dirty, max(first_dirty, uncleanable_base), clean, cleanable, delay > 0,
                      max(delay, 0))


def _corrupt(exc: BaseException | None) -> bool:
    """Whether a failed round met corrupt data (the only reason to stop cleaning a log until restart),
    also when the log's storage-error handling wrapped it."""
    while exc is not None:
        if isinstance(exc, (CleaningError, CorruptSegmentError)):
            return True
        exc = exc.__cause__
    return False


def _cleaner_process() -> ProcessPoolExecutor:
    """Spawned, not forked: the broker has threads."""
    return ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"),
                               initializer=end_with_parent, initargs=(os.getpid(),))


def end_with_parent(parent_pid: int) -> None:
    """In a cleaner process: die with the broker, even when it is SIGKILLed (Linux's parent-death
    signal; elsewhere a killed broker leaves its idle cleaner process behind)."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent_pid:  # the broker died before the signal was armed
        os._exit(0)


class LogCleaner:
    def __init__(self, log_dir: Path, logs: Callable[[], Mapping[TopicPartition, PartitionLog]],
                 config: LogManagerConfig, io: LogIO, clock: Clock) -> None:
        self.log_dir = log_dir
        self._logs = logs
        self.config = config
        self._io = io
        self.clock = clock
        # Set by the replica layer: the last offset of each producer's last batch (None: not known here),
        # and the last stable offset (None: no producer state, so no transactions to wait for).
        self.producer_last_offsets: ProducerLastOffsets = lambda tp: None
        self.last_stable_offset: Callable[[TopicPartition], int | None] = lambda tp: None
        # and the offset its producer-state snapshot on disk covers (None: none there).
        self.producer_snapshot_offset: Callable[[TopicPartition], int | None] = lambda tp: None
        self._first_dirty: dict[TopicPartition, int] = {}
        self._in_progress: set[TopicPartition] = set()
        # Partitions deleted while a round on them runs: that round must not swap or record anything.
        self._cancelled: set[TopicPartition] = set()
        self._uncleanable: dict[TopicPartition, str] = {}
        self._wake = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._processes: list[ProcessPoolExecutor] = []
        self._round_ids = itertools.count(1)
        self.key_map_capacity = key_map_capacity(config.cleaner_dedupe_buffer_size, config.cleaner_threads,
                                                 config.cleaner_io_buffer_load_factor)
        self.rounds = 0  # finished rounds, for tests and metrics
        self.readings = CleanerReadings(clock())
        self.io_rate_per_process = 0.0
        self.set_io_rate(config.cleaner_io_max_bytes_per_second)
        self.checkpoint = CheckpointFile(log_dir / CLEANER_OFFSET_CHECKPOINT, io, self._checkpoint_snapshot)

    # --- lifecycle -------------------------------------------------------------------------------

    async def startup(self, *, workers: bool = True) -> None:
        """Read the checkpoint and start the workers (none when `log.cleaner.enable=false`; rounds can
        still be run by `clean_filthiest`)."""
        try:
            found = await self._io.run(checkpoint.read_offsets, self.log_dir / CLEANER_OFFSET_CHECKPOINT)
        except (CorruptCheckpointError, OSError) as exc:
            logger.warning("cleaner checkpoint unreadable; every compacted log is dirty", error=str(exc))
            found = None
        self._first_dirty = dict(found or {})
        if not (workers and self.config.cleaner_enable):
            return
        # One process per cleaner "thread": a round's CPU work (decoding, hashing, rebuilding batches)
        # would hold the interpreter lock the event loop needs.
        self._processes = [_cleaner_process() for _ in range(self.config.cleaner_threads)]
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._work(slot)) for slot in range(len(self._processes))]

    async def shutdown(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        for process in self._processes:
            await asyncio.get_running_loop().run_in_executor(None, partial(process.shutdown, cancel_futures=True))
        self._processes.clear()
        await self.checkpoint.drain()

    def abandon(self) -> None:
        """Stop without waiting (a crash in tests): the `.cleaned` files stay for the next start."""
        for task in self._tasks:
            task.cancel()
        for process in self._processes:
            process.shutdown(wait=False, cancel_futures=True)

    def wake(self) -> None:
        """Look for work now rather than after the backoff."""
        self._wake.set()

    def forget(self, tp: TopicPartition) -> None:
        """A deleted log: its checkpoint entry goes with the next write, and a round running on it is
        abandoned at its next swap."""
        if tp in self._in_progress:
            self._cancelled.add(tp)
        self._first_dirty.pop(tp, None)
        self._uncleanable.pop(tp, None)

    def set_io_rate(self, bytes_per_second: float) -> None:
        """log.cleaner.io.max.bytes.per.second, in force from the next round. Kafka's cleaner threads
        share one throttler; each process here holds its share of the rate."""
        self.io_rate_per_process = bytes_per_second / max(self.config.cleaner_threads, 1)

    @property
    def uncleanable_count(self) -> int:
        """Partitions left uncleaned until restart after meeting corrupt data."""
        return len(self._uncleanable)

    def uncleanable_bytes(self) -> int:
        """The bytes those partitions would have cleaned (Kafka's uncleanable-bytes)."""
        logs, now = self._logs(), self.clock()
        return sum(log_to_clean(log, self._first_dirty.get(tp), now, self.last_stable_offset(tp)).cleanable_bytes
                   for tp in self._uncleanable if (log := logs.get(tp)) is not None and not log.offline)

    # --- choosing --------------------------------------------------------------------------------

    def _checkpoint_snapshot(self) -> tuple[Offsets, Callable[[], None]]:
        logs = self._logs()
        return {tp: offset for tp, offset in self._first_dirty.items() if tp in logs}, nothing_more

    def filthiest(self, now_ms: int | None = None) -> LogToClean | None:
        """The log the next round should clean, None if no log needs it."""
        now = self.clock() if now_ms is None else now_ms
        candidates = []
        delay, dirtiest = 0, 0.0  # Kafka's gauges read them over every compacted log not excluded
        for tp, log in self._logs().items():
            if (not log.config.compact_enabled or log.offline or tp in self._in_progress
                    or tp in self._uncleanable):
                continue
            found = log_to_clean(log, self._first_dirty.get(tp), now, self.last_stable_offset(tp))
            delay = max(delay, found.compaction_delay_ms)
            if found.total_bytes:
                dirtiest = max(dirtiest, found.cleanable_ratio)
            if found.first_uncleanable_offset <= found.first_dirty_offset or found.total_bytes == 0:
                continue
            if ((found.needs_compaction_now and found.cleanable_bytes > 0)
                    or found.cleanable_ratio > log.config.min_cleanable_dirty_ratio):
                candidates.append(found)
        chosen = max(candidates, key=lambda c: c.cleanable_ratio, default=None)
        self.readings.looked(now, dirtiest, delay)
        return chosen

    # --- cleaning --------------------------------------------------------------------------------

    async def _work(self, slot: int) -> None:
        while True:
            try:
                cleaned = await self.clean_filthiest(self._processes[slot])
            except asyncio.CancelledError:
                raise
            except BrokenProcessPool as exc:  # the process died (killed, out of memory): a new one
                logger.error("log cleaner process died; starting another", error=repr(exc))
                self._processes[slot] = _cleaner_process()
                cleaned = False
            except Exception as exc:  # a failed round is logged; the next one tries again
                logger.error("log cleaner round failed", error=repr(exc))
                cleaned = False
            if not cleaned:
                self._wake.clear()
                with contextlib.suppress(TimeoutError):
                    await wait_for(self._wake.wait(), self.config.cleaner_backoff_ms / 1000)

    async def clean_filthiest(self, worker: Executor | None = None) -> bool:
        """One round on the filthiest log in `worker` (a cleaner process; None: the log I/O pool, for
        tests); False when no log needed cleaning."""
        chosen = self.filthiest()
        if chosen is None:
            return False
        tp = chosen.log.topic_partition
        self._in_progress.add(tp)
        try:
            await self._clean(chosen, worker, self._processes.index(worker) if worker in self._processes else -1)
        except (CleaningError, CorruptSegmentError, LogError, OSError) as exc:
            if self._logs().get(tp) is not chosen.log:  # deleted meanwhile: nothing to mark
                logger.info("log deleted while being cleaned", partition=str(tp), error=repr(exc))
            elif _corrupt(exc):  # Kafka marks such a partition uncleanable until restart rather than retrying forever
                self._uncleanable[tp] = repr(exc)
                logger.error("log cleaning failed; partition left uncleaned until restart", partition=str(tp),
                             error=repr(exc))
            else:  # the log changed (retention removed a segment), the disk is low, an I/O error: retried
                logger.warning("log cleaning round failed; retried after the backoff", partition=str(tp),
                               error=repr(exc))
        finally:
            self._in_progress.discard(tp)
            self._cancelled.discard(tp)
        return True

    def _still_current(self, log: PartitionLog) -> bool:
        """Whether `log` is still the live log of its partition (not deleted, nor deleted and
        re-created, since the round began). The caller acts on the answer with no await in between."""
        tp = log.topic_partition
        return tp not in self._cancelled and self._logs().get(tp) is log

    async def _clean(self, chosen: LogToClean, worker: Executor | None, slot: int) -> None:
        log = chosen.log
        tp = log.topic_partition
        config = log.config
        closed = {s.base_offset: s for s in log.segments[:-1] if s.base_offset < chosen.first_uncleanable_offset}
        job = CleaningJob(tp, log.directory, tuple(SegmentView.of(s) for s in closed.values()),
                          chosen.first_dirty_offset, chosen.first_uncleanable_offset, self.clock(),
                          config.delete_retention_ms, config.segment_bytes, config.index_bytes,
                          config.index_interval_bytes, self.config.cleaner_io_buffer_size,
                          self.producer_last_offsets(tp),
                          tuple(t for t in log.aborted_txns.entries
                                if t.first_offset < chosen.first_uncleanable_offset),
                          self.producer_snapshot_offset(tp), self.io_rate_per_process)
        logger.info("cleaning log", partition=str(tp), first_dirty=chosen.first_dirty_offset,
                    first_uncleanable=chosen.first_uncleanable_offset, dirty_ratio=round(chosen.cleanable_ratio, 3),
                    io_max_bytes_per_second=job.io_max_bytes_per_second)
        round_id = next(self._round_ids)
        started, delay_at_pick = time.monotonic(), self.readings.max_compaction_delay_ms
        end_offset, groups = await self._off_loop(worker, begin_round, round_id, job, self.key_map_capacity)
        try:
            for index, bases in enumerate(groups):
                if not await self._swap_group(log, job, worker, round_id, index, [closed[b] for b in bases]):
                    logger.info("log changed under the cleaner; round abandoned", partition=str(tp))
                    return
        finally:
            stats, utilization = await self._off_loop(worker, end_round, round_id)
            self.readings.last_rounds[slot] = RoundReport(stats.bytes_read, stats.bytes_written,
                                                          time.monotonic() - started,
                                                          # Kafka's: entries over slots, the load factor not applied
                                                          utilization * self.config.cleaner_io_buffer_load_factor,
                                                          delay_at_pick)
        if not self._still_current(log):  # deleted meanwhile: the offset belongs to no live log
            logger.info("log deleted under the cleaner; round abandoned", partition=str(tp))
            return
        self._first_dirty[tp] = end_offset
        await self.checkpoint.write()
        self.rounds += 1
        logger.info("cleaned log", partition=str(tp), first_dirty=end_offset, groups=len(groups),
                    bytes_read=stats.bytes_read, bytes_written=stats.bytes_written, records_read=stats.records_read,
                    records_kept=stats.records_kept, key_map_utilization=round(utilization, 3))

    async def _swap_group(self, log: PartitionLog, job: CleaningJob, worker: Executor | None, round_id: int,
                          index: int, old: list[LogSegment]) -> bool:
        await self._off_loop(worker, clean_next_group, round_id, index)
        stop_for_test("cleaned")
        base = old[0].base_offset
        try:
            cleaned, aborted = await self._io.run(open_cleaned, log.directory, base, job.index_interval_bytes,
                                                  job.max_index_bytes, job.now_ms)
        except BaseException:
            await self._io.run(remove_cleaned_files, log.directory, base)
            raise
        if not self._still_current(log):  # deleted (maybe re-created): never touch its directory
            await self._io.run(remove_segment_files, cleaned)
            return False
        try:  # no await between the check above and the swap
            swapped = log.replace_segments(old, cleaned, SWAP_SUFFIX, between=lambda: stop_for_test("swap"),
                                           aborted_txns=aborted)
        except LogError:
            await self._io.run(remove_segment_files, cleaned)
            raise
        if not swapped:
            await self._io.run(remove_segment_files, cleaned)
            return False
        await log.flush(up_to=log.recovery_point)  # the renames reach the directory on disk
        return True

    async def _off_loop(self, worker: Executor | None, fn: Callable[..., T], *args: Any) -> T:
        if worker is None:
            return await self._io.run(fn, *args)
        return await asyncio.get_running_loop().run_in_executor(worker, fn, *args)

