"""Which oldest segments retention deletes: Kafka's deletableSegments rules as one pure function.

A segment can go only when every offset in it is below the high watermark, and never when it is the
last one and still empty. Walking from the oldest, a rule deletes segments while it holds for each:
  - always: the next segment starts at or below the log start offset (DeleteRecords, trimming);
  - under cleanup.policy=delete: older than retention.ms (by the segment's largest timestamp),
    entirely before retention.min.timestamp (KIP-47), or while the log is over retention.bytes.
The answer is the largest count any rule reaches.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from broker.log.config import LogConfig
from broker.log.timestamp_search import largest_timestamp


@dataclass(frozen=True)
class SegmentFacts:
    base_offset: int
    size: int
    largest_timestamp: int  # the batches' max timestamp, or the file's mtime when none has one


def deletable_segments(segments: Sequence[SegmentFacts], config: LogConfig, *, log_start_offset: int,
                       high_watermark: int, log_end_offset: int, now_ms: int) -> int:
    """How many of the oldest `segments` retention deletes now."""
    return max(deletable_by_rule(segments, config, log_start_offset=log_start_offset,
                                 high_watermark=high_watermark, log_end_offset=log_end_offset,
                                 now_ms=now_ms).values())


def retention_cause(segments: Sequence[SegmentFacts], config: LogConfig, *, log_start_offset: int,
                    high_watermark: int, log_end_offset: int, now_ms: int) -> str | None:
    """The rule that deletes the most segments now (the first such in the order of the rules:
    start_offset, retention_time, retention_timestamp, retention_size), or None when none deletes any."""
    counts = deletable_by_rule(segments, config, log_start_offset=log_start_offset, high_watermark=high_watermark,
                               log_end_offset=log_end_offset, now_ms=now_ms)
    best = max(counts.values())
    return None if best == 0 else next(rule for rule, count in counts.items() if count == best)


def deletable_by_rule(segments: Sequence[SegmentFacts], config: LogConfig, *, log_start_offset: int,
                      high_watermark: int, log_end_offset: int, now_ms: int) -> dict[str, int]:
    """How many of the oldest `segments` each rule deletes now (0 for a rule not in force)."""

    def walk(holds: Callable[[int, SegmentFacts], bool]) -> int:
        count = 0
        for i, segment in enumerate(segments):
            last = i + 1 == len(segments)
            upper = log_end_offset if last else segments[i + 1].base_offset
            if (last and segment.size == 0) or high_watermark < upper or not holds(i, segment):
                break
            count += 1
        return count

    counts = dict.fromkeys(("start_offset", "retention_time", "retention_timestamp", "retention_size"), 0)
    counts["start_offset"] = walk(
        lambda i, s: i + 1 < len(segments) and segments[i + 1].base_offset <= log_start_offset)
    if not config.delete_enabled:
        return counts
    if config.retention_ms >= 0:
        counts["retention_time"] = walk(lambda i, s: now_ms - s.largest_timestamp > config.retention_ms)
    floor = config.retention_min_timestamp
    if floor is not None:
        counts["retention_timestamp"] = walk(lambda i, s: s.largest_timestamp < floor)
    if config.retention_bytes >= 0:
        excess = sum(s.size for s in segments) - config.retention_bytes

        def over_size(i: int, s: SegmentFacts) -> bool:
            nonlocal excess
            if excess - s.size < 0:
                return False
            excess -= s.size
            return True

        counts["retention_size"] = walk(over_size)
    return counts


def cause_of_next_deletion(log, now_ms: int | None) -> str | None:
    """Which rule is about to delete segments of a PartitionLog (its public view), for the metrics."""
    facts = [SegmentFacts(seg.base_offset, seg.size, largest_timestamp(seg)) for seg in log.segments]
    return retention_cause(facts, log.config, log_start_offset=log.log_start_offset,
                           high_watermark=log.high_watermark, log_end_offset=log.log_end_offset,
                           now_ms=log.clock() if now_ms is None else now_ms)
