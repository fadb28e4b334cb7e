"""Polling with a deadline, for the cluster tests on the event loop (no sleeps as synchronization): the
cluster tests' bound and pace on tests/support/polling.py's `until`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from tests.support.polling import until

T = TypeVar("T")


async def eventually(check: Callable[[], T | Awaitable[T]], timeout: float = 15.0, what: str = "condition") -> T:
    """Poll `check()` (sync or async) until it returns a true value; fail with `what` at the deadline."""
    return await until(check, timeout_s=timeout, interval_s=0.02, what=what)
