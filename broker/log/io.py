"""Where the log's blocking work runs, and the background work it leaves behind.

Everything that may wait on the disk (fsync, unlink, rmtree, recovery scans) runs in a thread pool,
so the event loop keeps serving: blocking functions through `LogIO.run`, the cold-path writes and
removals through aiofiles on the same pool (`write_atomically`, `remove_files`, `remove_tree`;
broker/log/cold_files.py). Deletions wait `file.delete.delay.ms` first, so reads already handed a file
can finish sending it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Iterable
from concurrent.futures import Executor
from pathlib import Path
from typing import Any, TypeVar

import structlog

from broker.log import cold_files
from broker.log.segment import SegmentFile

logger = structlog.get_logger(__name__)
T = TypeVar("T")


Removal = Callable[[], Coroutine[Any, Any, None]]


class LogIO:
    def __init__(self, executor: Executor | None = None, *, urgent: Callable[[], bool] | None = None) -> None:
        self.executor = executor
        # True while the log dir is short of space: deletions run now, not after file.delete.delay.ms.
        self.urgent = urgent
        self._tasks: set[asyncio.Task[Any]] = set()
        self._timers: dict[asyncio.TimerHandle, tuple[list[SegmentFile], Removal]] = {}

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self.executor, fn, *args)

    async def write_atomically(self, path: Path, content: bytes, *, sync: bool = True) -> None:
        await cold_files.write_atomically(path, content, executor=self.executor, sync=sync)

    async def remove_files(self, paths: Iterable[Path]) -> None:
        await cold_files.remove_files(paths, executor=self.executor)

    async def remove_tree(self, path: Path) -> None:
        await cold_files.remove_tree(path, executor=self.executor)

    def spawn(self, coro: Coroutine[Any, Any, Any], what: str) -> asyncio.Task[Any]:
        """Run `coro` in the background; its failure is logged, not lost."""
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)

        def finished(t: asyncio.Task[Any]) -> None:
            self._tasks.discard(t)
            if not t.cancelled() and t.exception() is not None:
                logger.error("background log task failed", task=what, error=repr(t.exception()))

        task.add_done_callback(finished)
        return task

    def delete_later(self, delay_ms: int, files: list[SegmentFile], remove: Removal) -> None:
        """After `delay_ms`, close `files` and run `remove` (say, `lambda: io.remove_files(paths)`)."""
        loop = asyncio.get_running_loop()
        if self.urgent is not None and self.urgent():
            delay_ms = 0

        def fire() -> None:
            self._timers.pop(handle, None)
            for f in files:
                f.close()
            self.spawn(remove(), "delete files")

        handle = loop.call_later(max(delay_ms, 0) / 1000, fire)
        self._timers[handle] = (files, remove)

    def hurry(self) -> int:
        """Run every deletion still waiting out its delay now (the log dir ran short of space); a read
        still sending from a file keeps its descriptor, and the space goes when it closes."""
        due = list(self._timers.items())
        self._timers.clear()
        for handle, (files, remove) in due:
            handle.cancel()
            for f in files:
                f.close()
            self.spawn(remove(), "delete files")
        return len(due)

    async def drain(self, *, finish_deletions: bool = False) -> None:
        """Wait for background work. Deletions still waiting out their delay are either run now or
        left on disk for the next startup to finish (their files are closed either way)."""
        if finish_deletions:
            self.hurry()
        else:
            self._drop_timers()
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    def cancel_all(self) -> None:
        """Drop background work without waiting (simulated crash)."""
        self._drop_timers()
        for task in list(self._tasks):
            task.cancel()

    def _drop_timers(self) -> None:
        """Forget the deletions waiting out their delay (the next startup finishes them); close their files."""
        for handle, (files, _) in list(self._timers.items()):
            handle.cancel()
            for f in files:
                f.close()
        self._timers.clear()
