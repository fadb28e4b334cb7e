"""One per-dir offset checkpoint file written with group commit (Kafka's text format, broker/log/checkpoint.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import structlog

from broker.log import checkpoint
from broker.log.common import StorageError, TopicPartition
from broker.log.io import LogIO
from broker.log.repeated_failure import RepeatedFailure

logger = structlog.get_logger(__name__)

Offsets = dict[TopicPartition, int]


class CheckpointFile:
    """One per-dir offset checkpoint with group commit: `write()` returns once a write that started
    after the call has reached the disk; concurrent callers share writes."""

    def __init__(
        self, path: Path, io: LogIO, snapshot: Callable[[], tuple[Offsets, Callable[[], None]]]
    ) -> None:
        self.path = path
        self._io = io
        self._snapshot = snapshot
        self._waiters: list[asyncio.Future[None]] = []
        self._writer: asyncio.Task[None] | None = None
        self.writes = 0  # for tests and the benchmark: how many times the file was written
        self._failures = RepeatedFailure(logger, "checkpoint write failed")

    async def write(self) -> None:
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        self._waiters.append(waiter)
        if self._writer is None or self._writer.done():
            self._writer = loop.create_task(self._write_loop())
        await asyncio.shield(waiter)

    async def _write_loop(self) -> None:
        while self._waiters:
            waiters, self._waiters = self._waiters, []
            offsets, on_durable = self._snapshot()
            try:
                await self._io.write_atomically(self.path, checkpoint.format_offsets(offsets))
            except OSError as exc:
                self._failures.failed(file=str(self.path), error=repr(exc))
                for waiter in waiters:
                    if not waiter.done():
                        waiter.set_exception(StorageError(f"cannot write {self.path.name}: {exc!r}"))
                continue
            self.writes += 1
            self._failures.succeeded(file=str(self.path))
            on_durable()
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_result(None)

    async def drain(self) -> None:
        if self._writer is not None:
            await asyncio.gather(self._writer, return_exceptions=True)


def nothing_more() -> None:
    """For a checkpoint with nothing to do once its write is durable."""
    return None
