"""Operating the log cleaner: log.cleaner.io.max.bytes.per.second (the throttler's arithmetic on a fake
clock, a real round held to the rate) and what its gauges read (broker/log/cleaner_stats.py)."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import pytest

from broker.config import ConfigError, load_config
from broker.log import cleaner_throttle
from broker.log.cleaner_settings import NO_IO_THROTTLE
from broker.log.cleaner_throttle import Throttler
from tests.broker.test_log_cleaner import COMPACT, DAY, filled_log
from tests.broker.test_log_support import QUIET, FakeClock, open_manager


class FakeTime:
    def __init__(self) -> None:
        self.ns = 0
        self.sleeps: list[float] = []

    def clock(self) -> int:
        return self.ns

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.ns += int(seconds * 1e9)


def test_the_throttler_sleeps_what_a_fast_period_saved() -> None:
    fake = FakeTime()
    throttle = Throttler(1000.0, clock_ns=fake.clock, sleep=fake.sleep)
    throttle(500)  # no time has passed: not yet a period
    fake.ns += 100_000_000
    throttle(500)  # 100 ms is within the 300 ms check interval
    assert fake.sleeps == []
    fake.ns += 400_000_000
    throttle(1000)  # 2000 bytes in 0.5 s at 1000 B/s: should have taken 2 s
    assert fake.sleeps == [pytest.approx(1.5)]
    fake.ns += 2_000_000_000
    throttle(1000)  # a new period, slower than the rate: no sleep
    assert len(fake.sleeps) == 1


def test_no_limit_never_sleeps() -> None:
    fake = FakeTime()
    throttle = Throttler(NO_IO_THROTTLE, clock_ns=fake.clock, sleep=fake.sleep)
    for _ in range(10):
        fake.ns += 400_000_000
        throttle(1 << 40)
    assert fake.sleeps == []


async def test_a_round_at_a_low_rate_takes_the_time_the_rate_implies(tmp_path: Path, monkeypatch) -> None:
    # Checked at every read and write rather than every 300 ms: a round this small would otherwise end
    # inside its first period, which Kafka's throttler never holds back either.
    monkeypatch.setattr(cleaner_throttle, "CHECK_INTERVAL_NS", 0)
    monkeypatch.setattr(cleaner_throttle, "_PROCESS_THROTTLER", None)
    rate = 40_000.0
    manager = await open_manager(tmp_path, COMPACT, manager_config=replace(QUIET, cleaner_io_max_bytes_per_second=rate))
    await filled_log(manager, [[(b"key-%d" % (i % 5), b"v" * 200)] for i in range(60)])
    started = time.monotonic()
    assert await manager.cleaner.clean_filthiest()
    took = time.monotonic() - started
    throttler = cleaner_throttle._PROCESS_THROTTLER
    assert throttler is not None and throttler.rate == rate
    report = manager.cleaner.readings.last_rounds[-1]
    assert throttler.observed_total >= 2 * report.bytes_read + report.bytes_written  # mapped, copied, written
    assert throttler.observed_total > rate  # enough that the limit must bite: over a second's worth
    assert took >= throttler.observed_total / rate - 0.01
    await manager.shutdown()


@pytest.mark.parametrize("value", ["0", "-5", "NaN"])
def test_a_rate_that_never_lets_the_cleaner_finish_stops_start_up(tmp_path: Path, value: str) -> None:
    with pytest.raises(ConfigError, match="log.cleaner.io.max.bytes.per.second: must be above 0"):
        load_config(None, [f"log.dirs={tmp_path}", f"log.cleaner.io.max.bytes.per.second={value}"])


def test_a_rate_is_accepted(tmp_path: Path) -> None:
    config = load_config(None, [f"log.dirs={tmp_path}", "log.cleaner.io.max.bytes.per.second=1000000"])
    assert config.log_manager.cleaner_io_max_bytes_per_second == 1_000_000.0


async def test_a_round_reports_what_kafkas_cleaner_gauges_read(tmp_path: Path) -> None:
    clock = FakeClock()
    manager = await open_manager(tmp_path, replace(COMPACT, max_compaction_lag_ms=DAY), clock=clock)
    # Twenty batches of one key each, written at 1 s after the epoch: long past the day's lag.
    await filled_log(manager, [[(b"key-%d" % (i % 4), b"v" * 100)] for i in range(20)], timestamp=1_000)
    readings = manager.cleaner.readings
    clock.now += 5_000
    assert await manager.cleaner.clean_filthiest()
    assert readings.last_run_ms == clock.now
    assert readings.max_compaction_delay_ms == clock.now - DAY - 1_000
    assert readings.max_compaction_delay_secs() == (clock.now - DAY - 1_000) // 1000
    report = readings.last_rounds[-1]
    assert 0 < report.bytes_written < report.bytes_read
    assert readings.recopy_percent() == int(100 * report.bytes_written / report.bytes_read)
    capacity = manager.cleaner.key_map_capacity
    assert report.buffer_utilization == pytest.approx(4 / capacity * QUIET.cleaner_io_buffer_load_factor)
    assert readings.max_clean_time_secs() == 0
    assert readings.dirtiest_ratio == 1.0  # never cleaned: all of it dirty
    assert not await manager.cleaner.clean_filthiest()  # the log is clean now: only the active segment is left
    assert readings.dirtiest_ratio == 0.0 and readings.max_compaction_delay_ms == 0
    assert readings.last_rounds[-1] is report  # a look that found nothing keeps the last round's figures
    assert manager.cleaner.uncleanable_count == 0 and manager.cleaner.uncleanable_bytes() == 0
    await manager.shutdown()
