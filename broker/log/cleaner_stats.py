"""What the log cleaner reports to metrics (Kafka's LogCleaner and LogCleanerManager gauges): each
cleaner's last round, and what the last choice of a log saw."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class RoundReport:
    """One finished round (Kafka's CleanerStats as the gauges read it)."""

    bytes_read: int
    bytes_written: int
    elapsed_secs: float
    buffer_utilization: float  # how full the key map got, 0..1
    max_compaction_delay_ms: int  # Kafka's PreCleanStats of the choice that started this round


@dataclass(slots=True)
class CleanerReadings:
    """Kept by the LogCleaner, read by broker/metrics/log_cleaner.py at scrape time."""

    last_run_ms: int  # when a cleaner last looked for a log to clean (Kafka's timeOfLastRun)
    dirtiest_ratio: float = 0.0  # the highest dirty ratio among cleanable logs at that look
    max_compaction_delay_ms: int = 0  # at that look: how far past max.compaction.lag.ms the worst log is
    last_rounds: dict[int, RoundReport] = field(default_factory=dict)  # by cleaner slot (-1: the I/O pool)

    def looked(self, now_ms: int, dirtiest_ratio: float, max_compaction_delay_ms: int) -> None:
        self.last_run_ms = now_ms
        self.dirtiest_ratio = dirtiest_ratio
        self.max_compaction_delay_ms = max_compaction_delay_ms

    def max_clean_time_secs(self) -> int:
        return int(max((r.elapsed_secs for r in self.last_rounds.values()), default=0.0))

    def recopy_percent(self) -> int:
        rounds = self.last_rounds.values()
        read = sum(r.bytes_read for r in rounds)
        return int(100 * sum(r.bytes_written for r in rounds) / max(read, 1))

    def max_buffer_utilization_percent(self) -> int:
        return int(100 * max((r.buffer_utilization for r in self.last_rounds.values()), default=0.0))

    def max_compaction_delay_secs(self) -> int:
        return max((r.max_compaction_delay_ms for r in self.last_rounds.values()), default=0) // 1000
