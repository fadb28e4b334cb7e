"""The one way tests wait for a condition: poll it, never time it. `wait_for` blocks, `until` runs in a
test's event loop; both give up by the same deadline with the same message (`_Deadline`)."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


class _Deadline:
    """When a wait gives up, and what it says then: what was awaited and the last result seen."""

    def __init__(self, timeout_s: float, what: str) -> None:
        self.timeout_s, self.what = timeout_s, what
        self.at = time.monotonic() + timeout_s

    def reached(self, value: object) -> bool:
        """Whether `value` ends the wait (it is truthy); past the deadline a false one fails the test."""
        if value:
            return True
        if time.monotonic() > self.at:
            raise AssertionError(f"{self.what} not reached within {self.timeout_s}s; last result: {value!r}")
        return False


def wait_for(predicate: Callable[[], T], /, timeout_s: float = 20.0, interval_s: float = 0.05,
             what: str = "condition") -> T:
    """Poll `predicate` until it returns something truthy and return that; after `timeout_s` fail with
    what was awaited and the last result (a bound on waiting, not a timing assertion)."""
    deadline = _Deadline(timeout_s, what)
    while not deadline.reached(value := predicate()):
        time.sleep(interval_s)
    return value


def holds_for(predicate: Callable[[], object], /, duration_s: float, interval_s: float = 0.05,
              what: str = "condition") -> None:
    """Poll `predicate` for `duration_s` and fail the first time it is false: that something does NOT
    happen within a window (the window is a bound the test derives, not a synchronization)."""
    deadline = time.monotonic() + duration_s
    while time.monotonic() <= deadline:
        value = predicate()
        if not value:
            raise AssertionError(f"{what} stopped holding; last result: {value!r}")
        time.sleep(interval_s)


async def until(predicate: Callable[[], T | Awaitable[T]], /, timeout_s: float = 20.0, interval_s: float = 0.01,
                what: str = "condition") -> T:
    """`wait_for` inside a test's event loop: polls without blocking the loop that does the work. The
    predicate may be a coroutine function (a check that asks a server), awaited at each poll."""
    deadline = _Deadline(timeout_s, what)
    while True:
        value = predicate()
        if inspect.isawaitable(value):
            value = await value
        if deadline.reached(value):
            return value
        await asyncio.sleep(interval_s)
