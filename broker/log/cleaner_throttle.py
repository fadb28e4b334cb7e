"""`log.cleaner.io.max.bytes.per.second`: the bytes a cleaner process reads and writes, held to a rate
by sleeping in that process (Kafka's Throttler as LogCleaner uses it: counted over periods of at
least 300 ms; when a period ran faster than the rate, sleep until it would not have).

Kafka's cleaner threads share one throttler; Ebb's cleaners are processes, so each holds
rate / `log.cleaner.threads` and together they hold the rate.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from broker.log.cleaner_settings import NO_IO_THROTTLE

CHECK_INTERVAL_NS = 300_000_000  # Kafka's cleaner throttler checks every 300 ms


class Throttler:
    def __init__(self, bytes_per_second: float, *, clock_ns: Callable[[], int] = time.monotonic_ns,
                 sleep: Callable[[float], None] = time.sleep, check_interval_ns: int | None = None) -> None:
        self.rate = bytes_per_second
        self._interval = CHECK_INTERVAL_NS if check_interval_ns is None else check_interval_ns
        self._clock_ns = clock_ns
        self._sleep = sleep
        self._period_start = clock_ns()
        self._observed = 0
        self.slept_seconds = 0.0  # in total, for tests and logs
        self.observed_total = 0

    def __call__(self, observed: int) -> None:
        """Count `observed` bytes; sleep when the period's rate is above the limit."""
        if self.rate >= NO_IO_THROTTLE:
            return
        self._observed += observed
        self.observed_total += observed
        now = self._clock_ns()
        elapsed = now - self._period_start
        if elapsed <= self._interval or self._observed <= 0:
            return
        if self._observed * 1e9 / elapsed > self.rate:
            pause = self._observed / self.rate - elapsed / 1e9  # the time the period should have taken, less its own
            if pause > 0:
                self._sleep(pause)
                self.slept_seconds += pause
        self._period_start = self._clock_ns()
        self._observed = 0


_PROCESS_THROTTLER: Throttler | None = None


def throttler_for(bytes_per_second: float) -> Throttler:
    """This process's throttler (kept across rounds, as Kafka's is), at the rate a job asks for."""
    global _PROCESS_THROTTLER
    if _PROCESS_THROTTLER is None:
        _PROCESS_THROTTLER = Throttler(bytes_per_second)
    _PROCESS_THROTTLER.rate = bytes_per_second
    return _PROCESS_THROTTLER
