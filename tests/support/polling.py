"""The one way tests wait for a condition: poll it, never time it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(predicate: Callable[[], T], /, timeout_s: float = 20.0, interval_s: float = 0.05,
             what: str = "condition") -> T:
    """Poll `predicate` until it returns something truthy and return that; after `timeout_s` fail with
    what was awaited and the last result (a bound on waiting, not a timing assertion)."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached within {timeout_s}s; last result: {value!r}")
        time.sleep(interval_s)


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


async def until(predicate: Callable[[], T], /, timeout_s: float = 20.0, interval_s: float = 0.01,
                what: str = "condition") -> T:
    """`wait_for` inside a test's event loop: polls without blocking the loop that does the work."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached within {timeout_s}s; last result: {value!r}")
        await asyncio.sleep(interval_s)
