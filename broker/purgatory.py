"""Delayed operations: requests that wait for something to happen to a partition, or for a timeout.

A request that cannot be answered yet (a Fetch below MinBytes, a Produce with acks=-1 before the
high watermark covers it, a DeleteRecords before the low watermark reaches its offset) parks here:

    done = await purgatory.wait(keys=[tp], check=lambda: partition.high_watermark >= wanted, timeout_ms=30_000)

`check` is tried at once; if it does not hold, the operation is filed under each of its keys and
tried again only when something calls `notify(key)` for one of them (an append, a high watermark or
log start offset move). Nothing polls. The result is True once `check` held, False when the timeout
passed first; the caller then builds its response from the current state, as Kafka's delayed
operations do on completion. A cancelled waiter (its connection closed) leaves nothing behind.

`check` runs inside `notify`, i.e. on the path of the append or offset move that triggered it, so it
must be cheap and must not block. An exception in `check` completes the operation: the caller
re-evaluates and reports the error in its response.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Hashable, Iterable

import structlog

from broker.metrics.requests import note_parked

log = structlog.get_logger("purgatory")


class _Waiter:
    __slots__ = ("check", "future")

    def __init__(self, check: Callable[[], bool], future: asyncio.Future[bool]) -> None:
        self.check = check
        self.future = future


class Purgatory:
    """Operations of one kind (fetch, produce, delete records), keyed by what can complete them."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._watchers: dict[Hashable, set[_Waiter]] = {}
        self._parked = 0
        self.expired = 0  # waits that ended at their timeout (a metric)

    def __len__(self) -> int:
        """Operations waiting now."""
        return self._parked

    def watched(self, key: Hashable) -> int:
        return len(self._watchers.get(key, ()))

    def watch_count(self) -> int:
        """(operation, key) pairs watched now: Kafka's PurgatorySize."""
        return sum(len(watchers) for watchers in self._watchers.values())

    async def wait(self, keys: Iterable[Hashable], check: Callable[[], bool], timeout_ms: int) -> bool:
        """True as soon as `check()` holds (now or after a `notify` of one of `keys`); False once
        `timeout_ms` has passed without it."""
        if check():
            return True
        if timeout_ms <= 0:
            return False
        loop = asyncio.get_running_loop()
        future: asyncio.Future[bool] = loop.create_future()
        waiter = _Waiter(check, future)
        keys = list(dict.fromkeys(keys))
        for key in keys:
            self._watchers.setdefault(key, set()).add(waiter)
        self._parked += 1
        timer = loop.call_later(timeout_ms / 1000, _settle, future, False)
        parked_at = loop.time()
        try:
            done = await future
            self.expired += not done
            return done
        finally:
            timer.cancel()
            note_parked(loop.time() - parked_at)  # the request's remote time
            self._parked -= 1
            for key in keys:
                watchers = self._watchers.get(key)
                if watchers is not None:
                    watchers.discard(waiter)
                    if not watchers:
                        del self._watchers[key]

    def notify(self, key: Hashable) -> int:
        """Try the operations filed under `key` again; returns how many completed."""
        watchers = self._watchers.get(key)
        if not watchers:
            return 0
        completed = 0
        for waiter in list(watchers):
            if waiter.future.done():
                continue
            try:
                ready = waiter.check()
            except Exception as exc:  # the caller re-evaluates and answers with the error
                log.warning("delayed operation check failed", purgatory=self.name, key=str(key), error=repr(exc))
                ready = True
            if ready:
                waiter.future.set_result(True)
                completed += 1
        return completed

    def complete_all(self, key: Hashable | None = None) -> int:
        """Complete every operation (under `key`, or all): a partition went away, or shutdown."""
        groups = [self._watchers.get(key, set())] if key is not None else list(self._watchers.values())
        completed = 0
        for watchers in groups:
            for waiter in list(watchers):
                if not waiter.future.done():
                    waiter.future.set_result(True)
                    completed += 1
        return completed


def _settle(future: asyncio.Future[bool], value: bool) -> None:
    if not future.done():
        future.set_result(value)
