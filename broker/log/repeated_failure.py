"""A failure that repeats on a timer (a checkpoint on a full disk, every few seconds) is logged once
when it starts, then summarised once a minute with how often it happened, and once more when it ends
— not fifty lines in three minutes that bury everything else."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

SUMMARY_INTERVAL_S = 60.0


class RepeatedFailure:
    def __init__(self, logger: Any, event: str, *, summary_interval_s: float = SUMMARY_INTERVAL_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._logger = logger
        self.event = event
        self._interval = summary_interval_s
        self._clock = clock
        self.failing_since: float | None = None
        self._last_logged = 0.0
        self._unlogged = 0  # failures since the last line
        self.total = 0  # failures in this run of them

    def failed(self, **fields: Any) -> None:
        now = self._clock()
        self.total += 1
        if self.failing_since is None:
            self.failing_since = self._last_logged = now
            self._logger.error(self.event, **fields)
            return
        self._unlogged += 1
        if now - self._last_logged >= self._interval:
            self._logger.error(f"{self.event} (still failing)", failures=self._unlogged,
                               seconds=round(now - self._last_logged), **fields)
            self._last_logged, self._unlogged = now, 0

    def succeeded(self, **fields: Any) -> None:
        if self.failing_since is None:
            return
        self._logger.warning(f"{self.event}: works again", failures=self.total,
                             seconds=round(self._clock() - self.failing_since), **fields)
        self.failing_since, self._unlogged, self.total = None, 0, 0
