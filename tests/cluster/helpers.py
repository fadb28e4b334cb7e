"""Polling with a deadline, for the cluster tests on the event loop (no sleeps as synchronization); the
blocking one is tests/broker/group_wire.py's `wait_for`."""

from __future__ import annotations

import asyncio
import time


async def eventually(check, timeout: float = 15.0, what: str = "condition"):
    """Poll `check()` (sync or async) until it returns a true value; fail with `what` at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if asyncio.iscoroutine(result):
            result = await result
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)
