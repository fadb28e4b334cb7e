"""The open-segment budget's gauges: how many segment files are open, the budget, and how often a
read had to open a parked file again (a budget too small for the partitions read shows here)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric


class SegmentBudgetView(Protocol):
    capacity: int
    open_count: int
    reopened: int


class OpenSegmentsCollector:
    def __init__(self, budget: SegmentBudgetView) -> None:
        self._budget = budget

    def collect(self) -> Iterator[Metric]:
        budget = self._budget
        yield GaugeMetricFamily("ebb_log_open_segment_files", "Segment .log files open now (idle or being read)",
                                value=budget.open_count)
        yield GaugeMetricFamily("ebb_log_open_segment_files_max", "Idle segment files kept open at most "
                                "(ebb.log.open.segments.max, lowered to fit ulimit -n)", value=budget.capacity)
        yield CounterMetricFamily("ebb_log_segment_reopens", "Parked segment files opened again to be read or "
                                  "written", value=budget.reopened)
