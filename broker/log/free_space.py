"""Headroom on the log dir, so that deleting always works.

Below `log.dir.min.free.bytes` (or `log.dir.min.free.percent` of the filesystem, whichever is more)
the dir is *low*: appends of client topics are refused with KAFKA_STORAGE_ERROR, a message naming
the threshold, while the partitions stay online — reads, DeleteRecords, DeleteTopics, offset commits
(internal topics write into the headroom), checkpoints and the metadata store keep working, and
deleted files are removed at once instead of after `file.delete.delay.ms`.

The free space is read with statvfs off the event loop: every `log.dir.free.space.check.interval.ms`,
and sooner when the bytes appended since the last reading have eaten half of the margin above the
threshold. Between readings the appends are subtracted from the last figure, so the refusal starts
on time without a statvfs per produce. When space comes back (a deletion, a file removed by hand)
the next reading clears the state: writes are accepted again within one interval, no restart.

Once low, the dir takes client appends again only when a reading finds the threshold plus a margin
free (`resume_bytes`), not the threshold alone: space freed by a deletion comes back one segment at
a time, and a dir that resumed at the line would be pushed back under it by the first appends (a
follower catching up, producers retrying) before the rest is freed: refusals that flap. The margin
is the threshold again (resume at twice it, where the EbbLogDirFillingUp warning clears), but at
most a quarter of the filesystem above the threshold, so that a small disk or a large percentage
can still reach it. Leaders' produce and followers' appends go by the same state: one dir, one rule.
"""

from __future__ import annotations

import asyncio
import errno
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

from broker.log.common import StorageError

logger = structlog.get_logger(__name__)

# The errors that mean "no room", not "the disk is broken": the partition stays online.
NO_SPACE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})


def is_out_of_space(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and exc.errno in NO_SPACE_ERRNOS


class LowDiskSpaceError(StorageError):
    """An append refused because its log dir is below its free-space threshold (or the disk said
    ENOSPC): KAFKA_STORAGE_ERROR, which clients retry; the partition stays online."""


@dataclass(frozen=True, slots=True)
class SpaceReading:
    free_bytes: int  # available to this (unprivileged-equivalent) process: f_bavail
    total_bytes: int


def read_space(directory: Path) -> SpaceReading:
    """Blocking: one statvfs of the filesystem holding `directory`."""
    stat = os.statvfs(directory)
    return SpaceReading(stat.f_bavail * stat.f_frsize, stat.f_blocks * stat.f_frsize)


Runner = Callable[[Callable[[], Any]], Awaitable[Any]]


class DirSpace:
    """The free space of one log dir and whether appends may use it."""

    def __init__(self, directory: Path, *, min_free_bytes: int, min_free_percent: int, check_interval_ms: int,
                 run: Runner) -> None:
        self.directory = directory
        self.min_free_bytes = min_free_bytes
        self.min_free_percent = min_free_percent
        self.check_interval_ms = check_interval_ms
        self._run = run
        self.free_bytes = -1  # at the last reading; -1 before the first
        self.total_bytes = 0
        self.low = False
        self.times_low = 0  # transitions into the low state (a metric)
        self.refused_appends = 0
        self._appended = 0  # bytes appended since the last reading
        self._recheck_after = 0  # appended bytes that make the next reading due now
        self._threshold = -(1 << 63)  # threshold_bytes at the last reading (before the first: never low)
        self._checking: asyncio.Task[None] | None = None
        self._timer: asyncio.Task[None] | None = None
        # Told True when the dir goes low, False when it has room again.
        self.listeners: list[Callable[[bool], None]] = []

    @property
    def threshold_bytes(self) -> int:
        return max(self.min_free_bytes, self.total_bytes * self.min_free_percent // 100)

    @property
    def resume_bytes(self) -> int:
        """The free bytes a low dir must find before it takes client appends again (the module says why)."""
        threshold = self.threshold_bytes
        return threshold + min(threshold, max(self.total_bytes - threshold, 0) // 4)

    def describe_threshold(self) -> str:
        percent = f", log.dir.min.free.percent={self.min_free_percent}" if self.min_free_percent else ""
        free, threshold = max(self.free_bytes - self._appended, 0), self.threshold_bytes
        setting = f"(log.dir.min.free.bytes={self.min_free_bytes}{percent})"
        if free < threshold:
            return f"log dir {self.directory} has {free} bytes free, below {threshold} {setting}"
        return (f"log dir {self.directory} has {free} bytes free: it fell below {threshold} {setting} and "
                f"takes appends again from {self.resume_bytes}")

    # --- the append path (event loop, no I/O) ----------------------------------------------------

    def admit(self, size: int, *, into_reserve: bool = False) -> None:
        """Count `size` bytes about to be appended, or refuse them (LowDiskSpaceError) when the dir is
        below its threshold; `into_reserve` (internal topics) writes below it."""
        if self.low and not into_reserve:
            self.refused_appends += 1
            raise LowDiskSpaceError(f"Refusing the append: {self.describe_threshold()}; delete records or "
                                    f"topics to free space")
        self._appended += size
        if self._appended >= self._recheck_after:
            self.check_soon()
        if self.free_bytes - self._appended < self._threshold:
            self._set_low(True)  # the estimate crossed it: refuse from now on; the reading confirms

    def ran_out(self) -> None:
        """The disk said ENOSPC: low now, and read it again soon."""
        self._set_low(True)
        self.check_soon()

    # --- readings ------------------------------------------------------------------------------

    def check_soon(self) -> None:
        if self._checking is None or self._checking.done():
            try:
                self._checking = asyncio.get_running_loop().create_task(self.check())
            except RuntimeError:  # no loop (a log used on its own in a test): the timer reads it
                pass

    async def check(self) -> None:
        """Read the free space now (off the loop) and update the state."""
        appended_before = self._appended
        try:
            reading: SpaceReading = await self._run(lambda: read_space(self.directory))
        except OSError as exc:
            logger.warning("cannot read the log dir's free space", log_dir=str(self.directory), error=repr(exc))
            return
        except RuntimeError:  # the I/O pool is shut down: the log manager is stopping
            return
        self.apply(reading, appended_before)

    def apply(self, reading: SpaceReading, appended_before: int | None = None) -> None:
        """Take a reading; appends made while it was under way still count against it."""
        self.free_bytes, self.total_bytes = reading.free_bytes, reading.total_bytes
        self._appended = 0 if appended_before is None else max(self._appended - appended_before, 0)
        self._threshold = self.threshold_bytes
        margin = self.free_bytes - self._threshold
        # Into the low state below the threshold, out of it only above resume_bytes.
        self._set_low(self.free_bytes - self._appended < (self.resume_bytes if self.low else self._threshold))
        # Read again once half of the margin is used (at least 1 MiB apart, so a nearly full dir is
        # not read at every append).
        self._recheck_after = max(margin // 2, 1 << 20)

    def _set_low(self, low: bool) -> None:
        if low == self.low:
            return
        self.low = low
        if low:
            self.times_low += 1
            logger.error("log dir below its free space threshold: produce refused, reads and deletes go on",
                         detail=self.describe_threshold())
        else:
            logger.warning("log dir has room again: produce accepted", log_dir=str(self.directory),
                           free_bytes=self.free_bytes, threshold_bytes=self.threshold_bytes,
                           resume_bytes=self.resume_bytes)
        for listener in self.listeners:
            listener(low)

    # --- the periodic reading ----------------------------------------------------------------------

    def start(self) -> None:
        if self._timer is None:
            self._timer = asyncio.get_running_loop().create_task(self._every_interval())

    async def _every_interval(self) -> None:
        while True:
            await self.check()
            await asyncio.sleep(self.check_interval_ms / 1000)

    async def stop(self) -> None:
        tasks = self.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def cancel(self) -> list[asyncio.Task[None]]:
        """Stop reading (the tasks are cancelled, not awaited: a simulated crash)."""
        tasks = [t for t in (self._timer, self._checking) if t is not None]
        for task in tasks:
            task.cancel()
        self._timer = self._checking = None
        return tasks
