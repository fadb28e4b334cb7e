"""client.aio.wait_for (the broker's too): a cancellation that arrives as the awaited thing finishes is kept.

Python 3.11's asyncio.wait_for returns the inner result then, swallowing the cancel: the full test run
hung in Broker.start's clean-up when CommittedTrimmer.stop cancelled its loop just as its wake-up event
had been set (the loop went back to waiting for its next round, and stop awaited it for ever)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from broker.aio import wait_for

ROOT = Path(__file__).resolve().parents[2]


async def _cancel_as_the_wait_finishes(waiting) -> tuple[bool, asyncio.Task]:
    event = asyncio.Event()
    task = asyncio.create_task(waiting(event.wait(), 60))
    await asyncio.sleep(0)  # the task waits on the event
    event.set()
    await asyncio.sleep(0)  # the wait has finished; the task has not resumed yet under 3.11's wait_for
    return task.cancel(), task


async def test_a_cancel_that_meets_a_finished_wait_cancels_the_task():
    asked, task = await _cancel_as_the_wait_finishes(wait_for)
    if asked:  # the task had not finished: the cancellation must be what it ends with
        with pytest.raises(asyncio.CancelledError):
            await task
    else:
        assert await task is True


async def test_asyncio_wait_for_of_this_python_is_why():
    """Documents the race the helper exists for (Python 3.12's wait_for no longer has it)."""
    asked, task = await _cancel_as_the_wait_finishes(asyncio.wait_for)
    try:
        result = await task
    except asyncio.CancelledError:
        result = None
    if sys.version_info < (3, 12):
        assert asked and result is True, "3.11's wait_for swallowed the cancellation here"


async def test_wait_for_times_out():
    with pytest.raises(TimeoutError):
        await wait_for(asyncio.Event().wait(), 0.01)


def test_the_broker_and_its_client_wait_with_their_own_wait_for_only():
    """One owner: a service loop written with asyncio.wait_for, directly or through the client's requests
    (the replica fetcher, the trimmer asking other coordinators), could hang its stop again."""
    users = [str(path.relative_to(ROOT)) for package in ("broker", "client", "protocol", "pipeline")
             for path in (ROOT / package).rglob("*.py")
             if ("asyncio.wait_for(" in (text := path.read_text()) or "from asyncio import wait_for" in text)
             and path != ROOT / "client" / "aio.py"]
    assert users == []
