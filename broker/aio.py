"""Small asyncio helpers shared by the broker's services."""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Hashable
from typing import Any, TypeVar

from client.aio import wait_for as wait_for  # the broker's one wait with a timeout (client/aio.py says why)

T = TypeVar("T")


def retrieve_exception(task: asyncio.Task) -> None:
    if not task.cancelled():
        task.exception()  # the awaiting caller saw it, or was cancelled; nobody else needs it


async def run_to_completion(coro: Coroutine[Any, Any, T]) -> T:
    """Run `coro` to its end even if the caller is cancelled (its client disconnected mid-request), so
    a change to the metadata store and the in-memory state that mirrors it happen together or not at all."""
    task = asyncio.get_running_loop().create_task(coro)
    task.add_done_callback(retrieve_exception)
    return await asyncio.shield(task)


def uncancellable(fn: Callable[..., Coroutine[Any, Any, T]]) -> Callable[..., Awaitable[T]]:
    """Decorator form of run_to_completion for a coroutine method."""

    @functools.wraps(fn)
    async def wrapper(*args, **kwargs) -> T:
        return await run_to_completion(fn(*args, **kwargs))

    return wrapper


class SharedRun:
    """At most one run of a coroutine at a time, shared by every caller that asks meanwhile; a caller
    that goes away (its client disconnected) does not interrupt it (creating an internal topic)."""

    def __init__(self, make: Callable[[], Coroutine[Any, Any, None]]) -> None:
        self._make = make
        self._task: asyncio.Task[None] | None = None

    async def run(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._make())
            self._task.add_done_callback(retrieve_exception)
        await asyncio.shield(self._task)


async def every(interval_ms: int, job: Callable[[], Awaitable[object]], logger: Any, failure: str) -> None:
    """Run `job` every `interval_ms` until cancelled; a failure is logged as `failure` and the next
    round tries again."""
    while True:
        await asyncio.sleep(interval_ms / 1000)
        try:
            await job()
        except Exception as exc:
            logger.error(failure, error=repr(exc), exc_info=exc)


class KeyedLocks:
    """An asyncio.Lock per key, made on first use and dropped when nobody holds or waits for it."""

    def __init__(self) -> None:
        self._locks: dict[Hashable, tuple[asyncio.Lock, int]] = {}

    @contextlib.asynccontextmanager
    async def held(self, key: Hashable) -> AsyncIterator[None]:
        lock, users = self._locks.get(key, (None, 0))
        if lock is None:
            lock = asyncio.Lock()
        self._locks[key] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[key]
            if users == 1:
                del self._locks[key]
            else:
                self._locks[key] = (lock, users - 1)

    def __len__(self) -> int:
        return len(self._locks)
