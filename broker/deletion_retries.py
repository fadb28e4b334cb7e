"""Topic deletions that failed part way on one broker (a full disk, a directory that could not be
renamed) are finished in the background: the mark stays in the store, and each topic is tried again
after 1, 2, 4, ... seconds (at most 30 apart) until its deletion goes through, without waiting for
the next DeleteTopics or the next start (which finish it too). A cluster's deletions are retried by
its controller instead (broker/cluster/deletion.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import structlog

from broker.log.repeated_failure import RepeatedFailure

log = structlog.get_logger("topics")

FIRST_DELAY_S = 1.0
MAX_DELAY_S = 30.0


class DeletionRetries:
    def __init__(self, finish: Callable[[str], Awaitable[None]], retry_on: tuple[type[Exception], ...],
                 *, first_delay_s: float = FIRST_DELAY_S, max_delay_s: float = MAX_DELAY_S) -> None:
        """`finish(name)` completes a marked deletion (nothing when the mark is gone); `retry_on` are
        the failures worth another try."""
        self._finish = finish
        self._retry_on = retry_on
        self._first_delay_s = first_delay_s
        self._max_delay_s = max_delay_s
        self._tasks: dict[str, asyncio.Task[None]] = {}

    @property
    def pending(self) -> list[str]:
        return sorted(self._tasks)

    def schedule(self, name: str) -> None:
        if name in self._tasks:
            return
        task = asyncio.get_running_loop().create_task(self._retry(name))
        self._tasks[name] = task
        task.add_done_callback(lambda ended: self._ended(name, ended))

    def _ended(self, name: str, task: asyncio.Task[None]) -> None:
        self._tasks.pop(name, None)
        if not task.cancelled() and task.exception() is not None:  # not a storage failure: a bug
            log.error("topic deletion retry failed for good", topic=name, error=repr(task.exception()))

    async def _retry(self, name: str) -> None:
        failures = RepeatedFailure(log, "topic deletion still failing; trying again")
        delay = self._first_delay_s
        while True:
            await asyncio.sleep(delay)
            try:
                await self._finish(name)
            except self._retry_on as exc:
                failures.failed(topic=name, error=str(exc))
                delay = min(delay * 2, self._max_delay_s)
                continue
            log.info("finished a topic deletion that had failed part way", topic=name)
            return

    async def stop(self) -> None:
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
