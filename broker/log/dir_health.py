"""A log dir that truly failed (an I/O error: EIO, EROFS — not a full disk, see free_space.py) is
taken offline whole, as Kafka's LogDirFailureChannel does: every partition on it answers
KAFKA_STORAGE_ERROR from then on, since one error on a disk says little about which files are safe.

Kafka stops there (a broker whose only dir failed exits, and a dir comes back only with a restart).
Ebb keeps running and probes the dir every `log.dir.failure.probe.interval.ms`, off the event loop:
write a small file, fsync it, read it back, remove it. When a probe passes, the owner reloads the
offline partitions from disk with recovery (as after a crash); once all are back the dir is online
again. The same loop brings back partitions that failed to load for want of space (or for an I/O
error) once the disk lets the probe write: no restart either way.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from pathlib import Path

import structlog

from broker.aio import wait_for
from broker.log.common import TMP_SUFFIX
from broker.log.free_space import Runner
from broker.log.repeated_failure import RepeatedFailure
from broker.resolve_generation import RESOLVE_GENERATION

logger = structlog.get_logger(__name__)

# A leftover (a crash mid-probe) is removed at start-up like any other .tmp file in the dir.
PROBE_FILE = "ebb-dir-probe" + TMP_SUFFIX
_PROBE_BYTES = os.urandom(4096)


def probe_dir(directory: Path) -> None:
    """Blocking: write, fsync, read back and remove a small file; OSError if the dir cannot."""
    path = directory / PROBE_FILE
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, _PROBE_BYTES)
        os.fsync(fd)
        if os.pread(fd, len(_PROBE_BYTES), 0) != _PROBE_BYTES:
            raise OSError(f"{path}: read back differs from what was written")
    finally:
        os.close(fd)
    os.unlink(path)


class DirHealth:
    """Whether the dir failed, and the probe loop that brings it (and its offline partitions) back.

    `reload` is the owner's: load every offline partition again; True when none is left offline."""

    def __init__(self, directory: Path, *, probe_interval_ms: int, run: Runner,
                 reload: Callable[[], Awaitable[bool]]) -> None:
        self.directory = directory
        self.probe_interval_ms = probe_interval_ms
        self._run = run
        self._reload = reload
        self.failed_reason: str | None = None
        self.failures = 0  # times the dir was taken offline (a metric)
        self.recoveries = 0  # times it came back without a restart (a metric)
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._stopped = False
        # Told True when the dir fails and False when it is back (in a cluster: the controller is told).
        self.listeners: list[Callable[[bool], None]] = []

    @property
    def failed(self) -> bool:
        return self.failed_reason is not None

    def fail(self, reason: str) -> bool:
        """Take the dir offline (once); True if it was online until now. Probing starts."""
        if self.failed_reason is not None:
            return False
        self.failed_reason = reason
        RESOLVE_GENERATION.bump()
        self.failures += 1
        logger.error("log dir failed: every partition on it is offline until a probe finds it healthy",
                     log_dir=str(self.directory), reason=reason, probe_interval_ms=self.probe_interval_ms)
        self.retry()
        self._tell(True)
        return True

    def _tell(self, failed: bool) -> None:
        for listener in self.listeners:
            try:
                listener(failed)
            except Exception:  # a listener's bug must not stop the dir from going offline or coming back
                logger.exception("log dir listener failed", log_dir=str(self.directory))

    def retry(self, *, now: bool = False) -> None:
        """Something is offline: probe until it is back. `now`: do not wait out the interval (the dir
        has room again)."""
        if self._stopped:
            return
        if now:
            self._wake.set()
        if self._task is None or self._task.done():
            try:
                self._task = asyncio.get_running_loop().create_task(self._probe_until_back())
            except RuntimeError:  # no loop: a log manager used synchronously in a test
                pass

    async def _probe_until_back(self) -> None:
        failures = RepeatedFailure(logger, "log dir probe failed", summary_interval_s=60.0)
        while True:
            try:
                await wait_for(self._wake.wait(), self.probe_interval_ms / 1000)
            except TimeoutError:
                pass
            self._wake.clear()
            try:
                await self._run(lambda: probe_dir(self.directory))
            except OSError as exc:
                failures.failed(log_dir=str(self.directory), error=repr(exc))
                continue
            except RuntimeError:  # the I/O pool is shut down: the log manager is stopping
                return
            failures.succeeded(log_dir=str(self.directory))
            try:
                if await self._reload():
                    break
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a bug must not end the probing: the dir would stay down for good
                logger.exception("reloading the log dir's offline partitions failed", log_dir=str(self.directory),
                                 error=repr(exc))
        if self.failed_reason is not None:
            self.recoveries += 1
            logger.warning("log dir healthy again: its partitions are reloaded and online",
                           log_dir=str(self.directory), was=self.failed_reason)
            self.failed_reason = None
            RESOLVE_GENERATION.bump()
            self._tell(False)

    async def stop(self) -> None:
        self._stopped = True
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    def cancel(self) -> None:
        self._stopped = True
        if self._task is not None:
            self._task.cancel()
            self._task = None
