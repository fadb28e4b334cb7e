"""A fixed-bucket histogram cheap enough for the request path: one bisect and two additions per
observation, no locks (everything runs on the broker's event loop). Collectors turn it into a
Prometheus histogram at scrape time."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence

# Seconds, from half a millisecond (a Produce to the page cache) to half a minute (a parked
# DeleteRecords or Produce at its default timeout).
LATENCY_BUCKETS: tuple[float, ...] = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                      1.0, 2.5, 5.0, 10.0, 30.0)


class Histogram:
    __slots__ = ("bounds", "counts", "sum")

    def __init__(self, bounds: Sequence[float] = LATENCY_BUCKETS) -> None:
        self.bounds = tuple(bounds)
        self.counts = [0] * (len(self.bounds) + 1)  # the last one is above every bound (+Inf)
        self.sum = 0.0

    def observe(self, value: float) -> None:
        # Prometheus buckets are inclusive (value <= le): bisect_left finds the first bound >= value.
        self.counts[bisect_left(self.bounds, value)] += 1
        self.sum += value

    @property
    def count(self) -> int:
        return sum(self.counts)

    def cumulative(self) -> list[tuple[str, int]]:
        """(le, observations at or below it) pairs ending with +Inf, as HistogramMetricFamily takes them."""
        running = 0
        pairs = []
        for bound, count in zip(self.bounds, self.counts, strict=False):
            running += count
            pairs.append((repr(float(bound)), running))
        pairs.append(("+Inf", running + self.counts[-1]))
        return pairs
