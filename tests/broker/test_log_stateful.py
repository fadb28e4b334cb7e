"""A hypothesis state machine: the log against a list of batches, through appends, reads, record
deletion, retention, erasure passes, truncation, and clean, unclean and torn-tail restarts."""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from broker.log import (
    LogConfig,
    LogManager,
    OffsetOutOfRangeError,
    ReadBound,
    TopicPartition,
)
from broker.log import checkpoint as ck
from protocol.enums import SpecialTimestamp
from protocol.records import assign_offsets, build_batch
from tests.broker.test_log_support import QUIET, FakeClock
from tests.support.log_start import move_start

TP = TopicPartition("model", 0)
CONFIG = LogConfig(segment_bytes=1200, index_interval_bytes=150, file_delete_delay_ms=0, retention_ms=-1)


@dataclass(frozen=True)
class Batch:
    base: int
    last: int
    data: bytes
    max_ts: int


class LogModel(RuleBasedStateMachine):
    @initialize()
    def open(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="ebb-model-"))
        self.loop = asyncio.new_event_loop()
        self.clock = FakeClock()
        self.manager: LogManager | None = None
        self.batches: list[Batch] = []
        self.start = self.hw = self.end = self.origin = 0
        self.epoch = 0
        self._start_manager()
        self.log = self.run(self.manager.get_or_create_log(TP))

    def run(self, coro):
        return self.loop.run_until_complete(coro)

    def _start_manager(self) -> None:
        self.manager = LogManager(self.dir, config=QUIET, default_log_config=CONFIG, clock=self.clock)
        self.run(self.manager.startup(background_tasks=False))
        self.log = self.manager.get_log(TP)

    def teardown(self) -> None:
        if getattr(self, "manager", None) is not None:
            self.run(self.manager.shutdown())
            self.loop.close()
            shutil.rmtree(self.dir, ignore_errors=True)

    # --- model helpers ---------------------------------------------------------------------------

    def _expected_read(self, offset: int, max_bytes: int, upper: int, min_one: bool) -> list[Batch]:
        out: list[Batch] = []
        total = 0
        for b in self.batches:
            if b.last < offset:
                continue
            if b.last >= upper:
                break
            if total + len(b.data) > max_bytes:
                if not out and min_one:
                    out.append(b)
                break
            out.append(b)
            total += len(b.data)
        return out

    def _live(self) -> list[Batch]:
        return [b for b in self.batches if b.last >= self.start]

    # --- rules -----------------------------------------------------------------------------------

    @rule(
        records=st.integers(1, 4),
        timestamp=st.integers(0, 1000),
        value_size=st.integers(0, 200),
        bump_epoch=st.booleans(),
    )
    def append(self, records: int, timestamp: int, value_size: int, bump_epoch: bool) -> None:
        self.epoch += bump_epoch
        raw = build_batch([(b"key", b"v" * value_size, [], timestamp)] * records)
        info = self.run(self.log.append(raw, leader_epoch=self.epoch))
        assert info.first_offset == self.end
        stamped = bytearray(raw)
        assign_offsets(stamped, 0, self.end, self.epoch)
        self.batches.append(Batch(self.end, self.end + records - 1, bytes(stamped), timestamp))
        self.end += records

    @rule(data=st.data())
    def move_high_watermark(self, data: st.DataObject) -> None:
        self.hw = data.draw(st.integers(self.start, self.end))
        assert self.log.update_high_watermark(self.hw) == self.hw

    @rule(data=st.data())
    def delete_records(self, data: st.DataObject) -> None:
        offset = data.draw(st.integers(0, self.end + 2))
        if offset > self.hw:
            with pytest.raises(OffsetOutOfRangeError):
                self.run(move_start(self.log, offset))
            return
        self.start = max(self.start, offset)
        assert self.run(move_start(self.log, offset)) == self.start

    @rule(data=st.data(), max_bytes=st.integers(0, 1500), to_end=st.booleans(), min_one=st.booleans())
    def read(self, data: st.DataObject, max_bytes: int, to_end: bool, min_one: bool) -> None:
        offset = data.draw(st.integers(max(self.start - 2, 0), self.end + 2))
        bound = ReadBound.LOG_END if to_end else ReadBound.HIGH_WATERMARK
        if offset < self.start or offset > self.end:
            with pytest.raises(OffsetOutOfRangeError):
                self.log.read(offset, max_bytes, bound=bound, min_one_batch=min_one)
            return
        upper = self.end if to_end else self.hw
        found = self.log.read(offset, max_bytes, bound=bound, min_one_batch=min_one)
        expected = self._expected_read(offset, max_bytes, upper, min_one)
        assert found.read_bytes() == b"".join(b.data for b in expected)
        assert found.next_offset == (expected[-1].last + 1 if expected else offset)

    @rule(
        timestamp=st.sampled_from(
            [SpecialTimestamp.EARLIEST, SpecialTimestamp.LATEST, SpecialTimestamp.MAX_TIMESTAMP,
             0, 1, 250, 500, 999, 1000, 1001]
        )
    )
    def offset_for_timestamp(self, timestamp: int) -> None:
        found = self.log.offset_for_timestamp(timestamp)
        live = self._live()
        expected: tuple[int, int] | None
        if timestamp == SpecialTimestamp.EARLIEST:
            expected = (-1, self.start)
        elif timestamp == SpecialTimestamp.LATEST:
            expected = (-1, self.end)
        else:
            newest = max((b.max_ts for b in live), default=-1)
            target = newest if timestamp == SpecialTimestamp.MAX_TIMESTAMP else timestamp
            hit = next((b for b in live if b.max_ts >= target), None) if target >= 0 else None
            expected = None if hit is None else (hit.max_ts, max(hit.base, self.start))
        assert (None if found is None else (found.timestamp, found.offset)) == expected

    def _segment_max(self, base: int, next_offset: int) -> int:
        return max((b.max_ts for b in self.batches if base <= b.base < next_offset), default=-1)

    def _expect_retention(self, predicate) -> None:
        segments = self.log.segments
        count = 0

        def walk(pred) -> int:
            n = 0
            for i, s in enumerate(segments):
                last = i + 1 == len(segments)
                upper = self.end if last else segments[i + 1].base_offset
                if (last and s.size == 0) or self.hw < upper or not pred(i, s):
                    break
                n += 1
            return n

        count = max(
            walk(lambda i, s: i + 1 < len(segments) and segments[i + 1].base_offset <= self.start),
            walk(predicate),
        )
        deleted = self.run(self.manager.run_retention())
        assert deleted == count
        if count:
            self.start = max(self.start, self.end if count == len(segments) else segments[count].base_offset)

    @rule(floor=st.integers(0, 1001))
    def retention_by_timestamp_floor(self, floor: int) -> None:
        self.log.config = replace(CONFIG, retention_min_timestamp=floor)
        self._expect_retention(lambda i, s: self._segment_max(s.base_offset, s.next_offset) < floor)
        self.log.config = CONFIG

    @rule(limit=st.integers(0, 4000))
    def retention_by_size(self, limit: int) -> None:
        self.log.config = replace(CONFIG, retention_bytes=limit)
        excess = self.log.size_bytes - limit

        def over(i, s) -> bool:
            nonlocal excess
            if excess - s.size < 0:
                return False
            excess -= s.size
            return True

        self._expect_retention(over)
        self.log.config = CONFIG

    @rule()
    def erase(self) -> None:
        """One erasure pass (erasure.max.delay.ms): the bytes below the batch holding the start go."""
        self.log.config = replace(CONFIG, erasure_max_delay_ms=3_600_000)  # the pass runs here, not on a timer
        self.run(self.log.erasure._pass())
        self.run(self.log.io.drain(finish_deletions=True))
        self.log.config = CONFIG
        live = self._live()
        assert self.log.erased_offset == (live[0].base if live else self.log.segments[0].base_offset)
        assert self.log.erased_offset == self.log.erasable_offset()

    @rule(data=st.data())
    def truncate(self, data: st.DataObject) -> None:
        offset = data.draw(st.integers(0, self.end))
        first_base = self.log.segments[0].base_offset
        changed = self.run(self.log.truncate_to(offset))
        assert changed == (offset < self.end)
        if not changed:
            return
        if offset < first_base:
            self.batches, self.origin = [], offset
            self.start = self.hw = self.end = offset
            return
        self.batches = [b for b in self.batches if b.last < offset]
        self.end = self.batches[-1].last + 1 if self.batches else self.origin
        self.start, self.hw = min(self.start, self.end), min(self.hw, self.end)

    @rule()
    def flush(self) -> None:
        self.run(self.log.flush())
        assert self.log.recovery_point == self.end

    @rule()
    def clean_restart(self) -> None:
        self.run(self.manager.shutdown())
        self._start_manager()
        assert self.manager.had_clean_shutdown

    @rule()
    def unclean_restart(self) -> None:
        self.manager.abandon()
        self._start_manager()
        assert self.start <= self.log.high_watermark <= self.end
        self.hw = self.log.high_watermark

    @precondition(lambda self: self.batches and self.batches[-1].last == self.end - 1)
    @rule(data=st.data())
    def torn_tail_restart(self, data: st.DataObject) -> None:
        active = self.log.segments[-1]
        if active.size == 0:
            return
        path = active.log_path
        self.manager.abandon()
        chop = data.draw(st.integers(1, len(self.batches[-1].data) - 1))
        os.truncate(path, path.stat().st_size - chop)
        lost = self.batches.pop()
        self.end = lost.base
        if self.end < self.start:  # the start offset is durable: the log restarts empty there
            self.batches, self.origin, self.end = [], self.start, self.start
        self._start_manager()
        self.hw = self.log.high_watermark
        assert self.start <= self.hw <= self.end

    # --- invariants ------------------------------------------------------------------------------

    @invariant()
    def offsets_agree(self) -> None:
        if getattr(self, "manager", None) is None:
            return
        log = self.log
        assert (log.log_start_offset, log.high_watermark, log.log_end_offset) == (
            self.start,
            self.hw,
            self.end,
        )
        assert log.segments[0].base_offset <= self.start
        durable = ck.read_offsets(self.dir / ck.LOG_START_OFFSET_CHECKPOINT) or {}
        assert durable.get(TP, 0) == self.start

    @invariant()
    def everything_readable(self) -> None:
        if getattr(self, "manager", None) is None:
            return
        got = self.log.read(self.start, 10**9, bound=ReadBound.LOG_END).read_bytes()
        assert got == b"".join(b.data for b in self._expected_read(self.start, 10**9, self.end, True))


LogModel.TestCase.settings = settings(
    max_examples=40,
    stateful_step_count=30,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TestLogModel = LogModel.TestCase
