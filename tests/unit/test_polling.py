"""tests/support/polling.py: the blocking and the event-loop waits end and fail by the same rule."""

from __future__ import annotations

import pytest

from tests.support.polling import until, wait_for


def counting_to(n: int):
    """A predicate that is falsy until its n-th call, then returns the call's number."""
    calls = 0

    def check() -> int:
        nonlocal calls
        calls += 1
        return calls if calls >= n else 0

    return check


def test_wait_for_returns_the_first_truthy_result():
    assert wait_for(counting_to(3), interval_s=0) == 3


async def test_until_returns_the_first_truthy_result():
    assert await until(counting_to(3), interval_s=0) == 3


async def test_until_awaits_a_coroutine_predicate_at_each_poll():
    check = counting_to(3)

    async def asked() -> int:
        return check()

    assert await until(asked, interval_s=0) == 3


async def test_both_fail_past_the_deadline_with_the_same_message():
    with pytest.raises(AssertionError) as blocking:
        wait_for(lambda: [], timeout_s=0.02, interval_s=0.001, what="the thing")
    with pytest.raises(AssertionError) as looping:
        await until(lambda: [], timeout_s=0.02, interval_s=0.001, what="the thing")
    assert str(blocking.value) == str(looping.value) == "the thing not reached within 0.02s; last result: []"
