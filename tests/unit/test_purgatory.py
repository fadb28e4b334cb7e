"""The purgatory: operations complete on notify or on timeout, never by polling."""

import asyncio

from broker.purgatory import Purgatory


async def test_completes_at_once_when_the_condition_already_holds():
    purgatory = Purgatory("t")
    assert await purgatory.wait(["k"], lambda: True, 60_000)
    assert len(purgatory) == 0


async def test_zero_timeout_does_not_park():
    purgatory = Purgatory("t")
    assert not await purgatory.wait(["k"], lambda: False, 0)
    assert purgatory.watched("k") == 0


async def test_notify_completes_only_when_the_condition_holds():
    purgatory = Purgatory("t")
    state = {"hw": 0}
    checks = []

    def check():
        checks.append(state["hw"])
        return state["hw"] >= 2

    task = asyncio.ensure_future(purgatory.wait(["a", "b"], check, 60_000))
    await asyncio.sleep(0)
    assert len(purgatory) == 1 and purgatory.watched("a") == purgatory.watched("b") == 1
    state["hw"] = 1
    assert purgatory.notify("a") == 0
    assert purgatory.notify("other") == 0
    state["hw"] = 2
    assert purgatory.notify("b") == 1
    assert await task is True
    assert checks == [0, 1, 2]  # tried once on arrival, then once per notify of its keys
    assert len(purgatory) == 0 and purgatory.watched("a") == purgatory.watched("b") == 0


async def test_timeout_returns_false_and_cleans_up():
    purgatory = Purgatory("t")
    assert await purgatory.wait(["k"], lambda: False, 10) is False
    assert purgatory.watched("k") == 0 and len(purgatory) == 0


async def test_cancelled_waiter_leaves_nothing_behind():
    purgatory = Purgatory("t")
    task = asyncio.ensure_future(purgatory.wait(["k"], lambda: False, 60_000))
    await asyncio.sleep(0)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert purgatory.watched("k") == 0 and len(purgatory) == 0


async def test_failing_check_completes_the_operation():
    purgatory = Purgatory("t")
    calls = []

    def check():
        calls.append(1)
        if len(calls) > 1:
            raise RuntimeError("partition went offline")
        return False

    task = asyncio.ensure_future(purgatory.wait(["k"], check, 60_000))
    await asyncio.sleep(0)
    assert purgatory.notify("k") == 1
    assert await task is True


async def test_complete_all_by_key_and_globally():
    purgatory = Purgatory("t")
    one = asyncio.ensure_future(purgatory.wait(["a"], lambda: False, 60_000))
    two = asyncio.ensure_future(purgatory.wait(["b"], lambda: False, 60_000))
    await asyncio.sleep(0)
    assert purgatory.complete_all("a") == 1
    assert await one is True and not two.done()
    assert purgatory.complete_all() == 1
    assert await two is True

