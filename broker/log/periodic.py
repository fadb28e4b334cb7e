"""The log manager's periodic jobs (retention, checkpoints, time-based flush): each runs after a first
delay and then every interval; a failed round is logged (once while it keeps failing) and the next
round tries again. An interval of LONG_MAX (Kafka's "never") starts no job."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import structlog

from broker.log.config import LONG_MAX
from broker.log.repeated_failure import RepeatedFailure

logger = structlog.get_logger(__name__)


class PeriodicJobs:
    def __init__(self) -> None:
        self._tasks: list[asyncio.Task[None]] = []

    def start(self, name: str, delay_ms: int, interval_ms: int, job: Callable[[], Awaitable[Any]]) -> None:
        if interval_ms < LONG_MAX:
            self._tasks.append(asyncio.get_running_loop().create_task(self._run(name, delay_ms, interval_ms, job)))

    @staticmethod
    async def _run(name: str, delay_ms: int, interval_ms: int, job: Callable[[], Awaitable[Any]]) -> None:
        failures = RepeatedFailure(logger, "background log task failed")
        await asyncio.sleep(delay_ms / 1000)
        while True:
            try:
                await job()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a failed round is logged; the next one tries again
                failures.failed(task=name, error=repr(exc))
            else:
                failures.succeeded(task=name)
            await asyncio.sleep(interval_ms / 1000)

    async def stop(self) -> None:
        self.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()

    def cancel(self) -> None:
        for task in self._tasks:
            task.cancel()
