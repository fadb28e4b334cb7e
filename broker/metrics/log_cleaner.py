"""The log cleaner's gauges, with the JMX exporter's names for Kafka's LogCleaner and
LogCleanerManager MBeans (broker/log/cleaner_stats.py keeps what they read)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Protocol

from prometheus_client.core import GaugeMetricFamily, Metric

from broker.log.cleaner_stats import CleanerReadings


class CleanerView(Protocol):
    log_dir: Path
    readings: CleanerReadings
    clock: Callable[[], int]

    @property
    def uncleanable_count(self) -> int: ...

    def uncleanable_bytes(self) -> int: ...


class LogCleanerCollector:
    def __init__(self, cleaner: CleanerView) -> None:
        self._cleaner = cleaner

    def collect(self) -> Iterator[Metric]:
        cleaner, readings = self._cleaner, self._cleaner.readings
        for name, text, value in (
            ("max_buffer_utilization_percent", "How full the fullest cleaner's key map got in its last round",
             readings.max_buffer_utilization_percent()),
            ("cleaner_recopy_percent", "Bytes written over bytes read by the cleaners' last rounds",
             readings.recopy_percent()),
            ("max_clean_time_secs", "The longest of the cleaners' last rounds", readings.max_clean_time_secs()),
            ("max_compaction_delay_secs", "How long past max.compaction.lag.ms the most overdue log was when "
             "a cleaner last chose a log", readings.max_compaction_delay_secs()),
        ):
            yield GaugeMetricFamily(f"kafka_log_logcleaner_{name}", text, value=value)
        yield GaugeMetricFamily("kafka_log_logcleanermanager_max_dirty_percent", "The highest dirty ratio of a "
                                "compacted log when a cleaner last looked", value=int(100 * readings.dirtiest_ratio))
        yield GaugeMetricFamily("kafka_log_logcleanermanager_time_since_last_run_ms", "Since a cleaner last "
                                "looked for a log to clean", value=max(cleaner.clock() - readings.last_run_ms, 0))
        labels, directory = ["logDirectory"], [str(cleaner.log_dir.absolute())]
        for family, value in (
            (GaugeMetricFamily("kafka_log_logcleanermanager_uncleanable_partitions_count", "Partitions whose "
                               "cleaning met corrupt data, left uncleaned until restart", labels=labels),
             cleaner.uncleanable_count),
            (GaugeMetricFamily("kafka_log_logcleanermanager_uncleanable_bytes", "The bytes those partitions "
                               "would have cleaned", labels=labels), cleaner.uncleanable_bytes()),
        ):
            family.add_metric(directory, value)
            yield family
