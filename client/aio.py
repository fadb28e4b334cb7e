"""asyncio helpers shared by the client and the broker (which uses the client to reach other brokers)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")


async def wait_for(awaitable: Awaitable[T], timeout_s: float | None) -> T:
    """`awaitable`'s result, or TimeoutError after `timeout_s`: asyncio.wait_for as Python 3.12 made it,
    awaited in the caller's own task under asyncio.timeout. Python 3.11's wait_for returns the result of
    an awaitable that finished as the caller was cancelled, and so swallows the cancellation: a service
    loop stopped at that moment (its wake-up event just set, a fetch answer just in) runs on, and the stop
    awaiting it hangs."""
    async with asyncio.timeout(timeout_s):
        return await awaitable
