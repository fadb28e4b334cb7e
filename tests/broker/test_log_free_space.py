"""The log dir's headroom (broker/log/free_space.py) with real logs: appends of client topics refused
below the threshold (and, once refused, until the threshold plus a margin is free) while the
partition stays online, internal topics writing into the reserve,
deletions that skip file.delete.delay.ms on a low dir, and a real ENOSPC (a 2 MiB tmpfs) that cuts
the torn tail and keeps the partition online. The repeated-failure log is checked with a fake clock."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from broker.config import ConfigError, build_config
from broker.log import StartOffsetReason, TopicPartition
from broker.log.free_space import DirSpace, LowDiskSpaceError, SpaceReading
from broker.log.repeated_failure import RepeatedFailure
from broker.metrics.log_dirs import LogDirSpaceCollector
from tests.broker.test_log_support import QUIET, SMALL, batch, files, open_manager, settle
from tests.support.polling import until
from tests.support.small_disk import small_filesystem

MiB = 1 << 20
CLIENT = TopicPartition("events", 0)
OFFSETS = TopicPartition("__consumer_offsets", 0)
SLOW_DELETES = replace(SMALL, file_delete_delay_ms=600_000)
HEADROOM = replace(QUIET, min_free_bytes=64 * MiB)


async def never_read(fn):
    raise AssertionError("these tests feed the readings themselves")


def low(space: DirSpace) -> None:
    space.apply(SpaceReading(free_bytes=MiB, total_bytes=1 << 30))


def roomy(space: DirSpace) -> None:
    space.apply(SpaceReading(free_bytes=512 * MiB, total_bytes=1 << 30))


async def test_below_the_threshold_client_appends_are_refused_and_the_partition_stays_online(tmp_path):
    manager = await open_manager(tmp_path, manager_config=HEADROOM, reserve_topics=frozenset({OFFSETS.topic}))
    log = await manager.get_or_create_log(CLIENT)
    offsets = await manager.get_or_create_log(OFFSETS)
    await log.append(batch(3))
    low(manager.space)
    with pytest.raises(LowDiskSpaceError, match="log.dir.min.free.bytes=67108864") as refused:
        await log.append(batch(1))
    assert refused.value.error_code.name == "KAFKA_STORAGE_ERROR"
    assert not log.offline and manager.offline_partitions == {}
    log.update_high_watermark(log.log_end_offset)
    assert log.read(0, 10_000).slices  # reads go on
    await offsets.append(batch(1))  # committed offsets write into the headroom
    roomy(manager.space)
    await log.append(batch(1))  # room again: accepted, no restart
    assert log.log_end_offset == 4 and manager.space.refused_appends == 1
    await manager.shutdown()


async def test_the_estimate_refuses_before_the_next_reading(tmp_path):
    """Between statvfs readings the bytes appended count against the last one."""
    manager = await open_manager(tmp_path, manager_config=replace(QUIET, min_free_bytes=MiB))
    log = await manager.get_or_create_log(CLIENT)
    manager.space.apply(SpaceReading(free_bytes=MiB + 300, total_bytes=1 << 30))
    await log.append(batch(1))  # about 110 bytes: still above
    await log.append(batch(1, value=b"v" * 300))  # crosses it: taken, and the dir is low from now on
    assert manager.space.low
    with pytest.raises(LowDiskSpaceError):
        await log.append(batch(1))
    await manager.shutdown()


def test_the_threshold_is_the_larger_of_bytes_and_percent(tmp_path):
    space = DirSpace(tmp_path, min_free_bytes=10 * MiB, min_free_percent=5, check_interval_ms=1000, run=never_read)
    space.apply(SpaceReading(free_bytes=40 * MiB, total_bytes=1000 * MiB))
    assert space.threshold_bytes == 50 * MiB and space.low
    assert "log.dir.min.free.percent=5" in space.describe_threshold()
    space.apply(SpaceReading(free_bytes=40 * MiB, total_bytes=100 * MiB))
    assert space.threshold_bytes == 10 * MiB and not space.low


def reading(free_mib: int, total_mib: int = 1024) -> SpaceReading:
    return SpaceReading(free_bytes=free_mib * MiB, total_bytes=total_mib * MiB)


def test_once_low_the_dir_takes_appends_again_only_at_the_threshold_plus_a_margin(tmp_path):
    """Readings crossing the threshold back and forth (a deletion freeing segments one by one while
    a follower appends) make one low streak, not one per crossing."""
    space = DirSpace(tmp_path, min_free_bytes=8 * MiB, min_free_percent=0, check_interval_ms=1000, run=never_read)
    told: list[bool] = []
    space.listeners.append(told.append)
    states = []
    for free_mib in (9, 7, 9, 12, 8, 15, 16, 12, 9, 7):
        space.apply(reading(free_mib))
        states.append(space.low)
    assert states == [False, True, True, True, True, True, False, False, False, True]
    assert told == [True, False, True] and space.times_low == 2
    assert space.resume_bytes == 16 * MiB  # twice the threshold on a disk with room
    space.apply(reading(12))
    assert "has 12582912 bytes free: it fell below 8388608 (log.dir.min.free.bytes=8388608) and takes " \
           "appends again from 16777216" in space.describe_threshold()
    gauges = {family.name: family.samples[0].value for family in LogDirSpaceCollector(space).collect()}
    assert (gauges["ebb_log_dir_below_min_free"], gauges["ebb_log_dir_free_bytes"],
            gauges["ebb_log_dir_resume_free_bytes"]) == (1, 12 * MiB, 16 * MiB)  # why 1 with 12 MiB free
    with pytest.raises(LowDiskSpaceError):
        space.admit(100)  # the same rule for every client append, a leader's or a follower's
    space.admit(100, into_reserve=True)


def test_the_margin_stays_within_reach_on_a_small_disk(tmp_path):
    space = DirSpace(tmp_path, min_free_bytes=32 * MiB, min_free_percent=0, check_interval_ms=1000, run=never_read)
    space.apply(reading(20, total_mib=64))
    assert space.low and space.resume_bytes == 40 * MiB  # a quarter of the 32 MiB above the threshold
    space.apply(reading(39, total_mib=64))
    assert space.low
    space.apply(reading(40, total_mib=64))
    assert not space.low
    percent = DirSpace(tmp_path, min_free_bytes=0, min_free_percent=60, check_interval_ms=1000, run=never_read)
    percent.apply(reading(500, total_mib=1000))
    assert percent.low and percent.resume_bytes == 700 * MiB


async def test_a_leader_on_a_dir_freed_to_just_above_its_threshold_still_refuses(tmp_path):
    manager = await open_manager(tmp_path, manager_config=replace(QUIET, min_free_bytes=8 * MiB))
    log = await manager.get_or_create_log(CLIENT)
    manager.space.apply(reading(7))
    manager.space.apply(reading(9))
    with pytest.raises(LowDiskSpaceError, match="takes appends again from 16777216"):
        await log.append(batch(1))
    manager.space.apply(reading(16))
    await log.append(batch(1))
    assert log.log_end_offset == 1
    await manager.shutdown()


async def test_on_a_low_dir_delete_records_rolls_the_active_segment_and_frees_it_at_once(tmp_path):
    manager = await open_manager(tmp_path, SLOW_DELETES, manager_config=HEADROOM)
    log = await manager.get_or_create_log(CLIENT)
    for _ in range(3):
        await log.append(batch(2))
    log.update_high_watermark(log.log_end_offset)
    assert len(log.segments) == 1
    low(manager.space)
    log.move_log_start_offset(log.high_watermark, StartOffsetReason.CLIENT_RECORD_DELETION)
    await log.make_start_offset_durable()
    # removed in the background at once (a deletion left to its 60 s delay would not be within the bound)
    await until(lambda: not any(name.endswith(".deleted") for name in files(log.directory)), timeout_s=10,
                what="the old segment's files removed")
    assert [s.base_offset for s in log.segments] == [6]
    assert files(log.directory) == ["00000000000000000006.index", "00000000000000000006.log",
                                    "00000000000000000006.timeindex"]  # not kept for file.delete.delay.ms
    await manager.shutdown()


async def test_deletions_waiting_out_their_delay_run_when_the_dir_goes_low(tmp_path):
    manager = await open_manager(tmp_path, SLOW_DELETES, manager_config=HEADROOM)
    roomy(manager.space)
    log = await manager.get_or_create_log(CLIENT)
    for _ in range(60):
        await log.append(batch(2))
    log.update_high_watermark(log.log_end_offset)
    log.move_log_start_offset(40, StartOffsetReason.CLIENT_RECORD_DELETION)
    await settle()
    waiting = [name for name in files(log.directory) if name.endswith(".deleted")]
    assert waiting  # kept for file.delete.delay.ms on a dir with room
    assert await manager.delete_log(TopicPartition("events", 0))
    low(manager.space)
    await until(lambda: not [p for p in tmp_path.iterdir() if p.name.endswith("-delete")], timeout_s=10,
                what="the deleted log's directory removed")  # at once: its delay is not waited out
    await manager.shutdown()


@pytest.fixture
def tiny_disk(tmp_path: Path):
    with small_filesystem(tmp_path / "tiny", "2m") as mount_point:
        yield mount_point


async def test_enospc_in_an_append_cuts_the_torn_tail_and_keeps_the_partition_online(tiny_disk):
    """No headroom configured: the disk itself says ENOSPC half way through a write."""
    config = replace(SMALL, segment_bytes=64 * MiB)
    manager = await open_manager(tiny_disk, config, manager_config=replace(QUIET, min_free_bytes=0))
    log = await manager.get_or_create_log(CLIENT)
    value = b"x" * 100_000
    with pytest.raises(LowDiskSpaceError, match="out of space"):
        for _ in range(100):
            await log.append(batch(1, value=value))
    assert not log.offline and manager.space.low
    active = log.segments[-1]
    assert active.log_path.stat().st_size == active.size  # nothing half written past the last batch
    log.update_high_watermark(log.log_end_offset)
    assert log.read(0, 1 << 30).next_offset == log.log_end_offset
    log.move_log_start_offset(log.log_end_offset, StartOffsetReason.CLIENT_RECORD_DELETION)
    await log.make_start_offset_durable()
    # The retired segment's files are removed in the background, at once on a low dir: only then is
    # the space back (one left to its 60 s file.delete.delay.ms would not be within the bound).
    await until(lambda: not any(name.endswith(".deleted") for name in files(log.directory)), timeout_s=10,
                what="the old segment's files removed")
    await manager.space.check()  # the deletion freed the disk: accepted again
    await log.append(batch(1, value=value))
    await manager.shutdown()


class Recorder:
    def __init__(self) -> None:
        self.lines: list[tuple[str, str, dict]] = []

    def error(self, event: str, **fields) -> None:
        self.lines.append(("error", event, fields))

    def warning(self, event: str, **fields) -> None:
        self.lines.append(("warning", event, fields))


def test_a_repeated_failure_is_logged_once_then_summarised_each_minute():
    now = [0.0]
    recorder = Recorder()
    failure = RepeatedFailure(recorder, "checkpoint write failed", clock=lambda: now[0])
    for _ in range(36):  # every 5 s for three minutes
        failure.failed(file="f")
        now[0] += 5
    failure.succeeded(file="f")
    assert [(level, event) for level, event, _ in recorder.lines] == [
        ("error", "checkpoint write failed"),
        *[("error", "checkpoint write failed (still failing)")] * 2,
        ("warning", "checkpoint write failed: works again")]
    assert [fields.get("failures") for _, _, fields in recorder.lines] == [None, 12, 12, 36]


def test_the_settings_are_read_and_checked():
    config = build_config({"log.dir.min.free.bytes": "1024", "log.dir.min.free.percent": "3",
                           "log.dir.free.space.check.interval.ms": "250"}).log_manager
    assert (config.min_free_bytes, config.min_free_percent, config.free_space_check_interval_ms) == (1024, 3, 250)
    for bad in ({"log.dir.min.free.percent": "100"}, {"log.dir.min.free.bytes": "-1"},
                {"log.dir.free.space.check.interval.ms": "0"}):
        with pytest.raises(ConfigError, match="log.dir"):
            build_config(bad)


async def test_a_follower_refused_for_space_ends_its_streak_only_once_the_dir_has_room(monkeypatch):
    # After a deletion the leader's new start is past the full follower's end: the follower resets to it,
    # an answer without an append, while the dir's last reading is still low; its next append is refused
    # again. That reset must not log the streak as over (one streak per full spell, not two).
    from types import SimpleNamespace

    import broker.replica.fetcher as fetcher_module
    from broker.config import ReplicationConfig

    recorder = Recorder()
    monkeypatch.setattr(fetcher_module, "log", recorder)
    space = DirSpace(Path("."), min_free_bytes=64 * MiB, min_free_percent=0, check_interval_ms=1_000, run=never_read)
    low(space)
    partition = SimpleNamespace(topic_partition=CLIENT, log=SimpleNamespace(space=space))
    outcomes: list = [LowDiskSpaceError("refused"), False, LowDiskSpaceError("refused"), False]

    async def apply(_partition, _answer) -> bool:
        outcome = outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    fetcher = fetcher_module.ReplicaFetcher(1, 2, lambda _: None, lambda _: None, ReplicationConfig())
    monkeypatch.setattr(fetcher, "_apply", apply)
    for _ in range(3):  # refused, reset on the low dir, refused again
        await fetcher._take(partition, None)
    roomy(space)
    await fetcher._take(partition, None)  # an append on a dir with room
    streak = [(level, event) for level, event, _ in recorder.lines if "could not apply" in event]
    assert streak == [("error", fetcher_module._APPLY_FAILED),
                      ("warning", f"{fetcher_module._APPLY_FAILED}: works again")], recorder.lines
    assert recorder.lines[-1][2]["failures"] == 2
