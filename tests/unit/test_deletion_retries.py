"""DeletionRetries (broker/deletion_retries.py): a marked deletion is tried again, with growing pauses,
until it goes through; one task per topic; stop() ends them."""

from __future__ import annotations

import asyncio

from broker.deletion_retries import DeletionRetries
from broker.log.common import StorageError


async def test_a_failing_deletion_is_tried_again_until_it_goes_through():
    attempts: list[str] = []
    done = asyncio.Event()

    async def finish(name: str) -> None:
        attempts.append(name)
        if len(attempts) < 3:
            raise StorageError("cannot rename for deletion")
        done.set()

    retries = DeletionRetries(finish, (StorageError,), first_delay_s=0.001, max_delay_s=0.004)
    retries.schedule("orders")
    retries.schedule("orders")  # one retry task per topic
    assert retries.pending == ["orders"]
    await asyncio.wait_for(done.wait(), 10)
    await asyncio.sleep(0)
    assert attempts == ["orders"] * 3 and retries.pending == []


async def test_stop_ends_the_retries_and_other_failures_are_not_retried():
    calls = 0

    async def finish(name: str) -> None:
        nonlocal calls
        calls += 1
        raise ValueError("a bug, not a storage failure")

    retries = DeletionRetries(finish, (StorageError,), first_delay_s=0.001)
    retries.schedule("orders")
    while retries.pending:  # the bug ends the task (and is not retried)
        await asyncio.sleep(0.001)
    assert calls == 1
    never = DeletionRetries(finish, (StorageError,), first_delay_s=60)
    never.schedule("orders")
    await never.stop()
    assert never.pending == [] and calls == 1
