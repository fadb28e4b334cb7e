"""Small asyncio helpers shared by the broker's services."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

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
