"""The log dir's free space against its headroom (log.dir.min.free.bytes / .percent): what an alert
on a filling disk reads before produce is refused (broker/log/free_space.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric


class DirSpaceView(Protocol):
    directory: Path
    free_bytes: int
    low: bool
    times_low: int
    refused_appends: int

    @property
    def threshold_bytes(self) -> int: ...
    @property
    def resume_bytes(self) -> int: ...


class DirHealthView(Protocol):
    directory: Path
    failures: int
    recoveries: int

    @property
    def failed(self) -> bool: ...


class LogDirHealthCollector:
    """A log dir taken offline by an I/O error, and brought back by its probe (broker/log/dir_health.py)."""

    def __init__(self, health: DirHealthView) -> None:
        self._health = health

    def collect(self) -> Iterator[Metric]:
        health = self._health
        labels, value = ["log_dir"], [str(health.directory)]
        for family, reading in (
            (GaugeMetricFamily("ebb_log_dir_offline", "1 while the log dir is offline after an I/O error: "
                               "its partitions answer KAFKA_STORAGE_ERROR", labels=labels), int(health.failed)),
            (CounterMetricFamily("ebb_log_dir_failures", "Times an I/O error took the log dir offline",
                                 labels=labels), health.failures),
            (CounterMetricFamily("ebb_log_dir_recoveries", "Times the log dir came back online without a "
                                 "restart", labels=labels), health.recoveries),
        ):
            family.add_metric(value, reading)
            yield family


class LogDirSpaceCollector:
    def __init__(self, space: DirSpaceView) -> None:
        self._space = space

    def collect(self) -> Iterator[Metric]:
        space = self._space
        labels, value = ["log_dir"], [str(space.directory)]
        for family, reading in (
            (GaugeMetricFamily("ebb_log_dir_free_bytes", "Free bytes on the log dir's filesystem at the last "
                               "reading", labels=labels), space.free_bytes),
            (GaugeMetricFamily("ebb_log_dir_min_free_bytes", "The headroom kept free: below it produce is "
                               "refused (log.dir.min.free.bytes, .percent)", labels=labels), space.threshold_bytes),
            (GaugeMetricFamily("ebb_log_dir_resume_free_bytes", "The free bytes a dir below its headroom needs "
                               "before produce is accepted again", labels=labels), space.resume_bytes),
            (GaugeMetricFamily("ebb_log_dir_below_min_free", "1 while the log dir is below its headroom: "
                               "produce refused, reads and deletes go on", labels=labels), int(space.low)),
            (CounterMetricFamily("ebb_log_dir_below_min_free_transitions", "Times the log dir went below its "
                                 "headroom", labels=labels), space.times_low),
            (CounterMetricFamily("ebb_log_dir_refused_appends", "Appends refused for want of free space",
                                 labels=labels), space.refused_appends),
        ):
            family.add_metric(value, reading)
            yield family
