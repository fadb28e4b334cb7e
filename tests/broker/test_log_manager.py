"""LogManager: checkpoints, the durable log start offset, group commit, deletion, retention, offline."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import replace
from pathlib import Path

import pytest
import structlog.testing

from broker.log import (
    InconsistentTopicIdError,
    LogConfig,
    LogManagerConfig,
    ReadBound,
    StartOffsetReason,
    StorageError,
    TopicPartition,
)
from broker.log import checkpoint as ck
from broker.log.segment_file import OPEN_SEGMENTS
from tests.broker.test_log_support import (
    QUIET,
    SMALL,
    FakeClock,
    batch,
    batches_of,
    files,
    open_manager,
    settle,
)
from tests.support.log_start import move_start
from tests.support.polling import until

T0 = TopicPartition("events", 0)
T1 = TopicPartition("events", 1)


async def filled(manager, tp: TopicPartition, count: int, ts0: int = 1000):
    log = await manager.get_or_create_log(tp)
    for i in range(count):
        await log.append(batch(2, timestamp=ts0 + i), leader_epoch=1)
    log.update_high_watermark(log.log_end_offset)
    return log


async def test_an_empty_partition_reloads_without_problems(tmp_path: Path) -> None:
    """A partition that never had a batch has no epochs to rebuild: no warning on a clean restart."""
    manager = await open_manager(tmp_path)
    await manager.get_or_create_log(T0)
    await manager.shutdown()
    again = await open_manager(tmp_path)
    assert again.load_reports[T0].problems == []
    await again.shutdown()


async def test_clean_shutdown_and_reload(tmp_path: Path) -> None:
    manager = await open_manager(tmp_path)
    log = await filled(manager, T0, 40)
    await move_start(log, 33)
    end = log.log_end_offset
    await manager.shutdown()
    assert ck.read_clean_shutdown(tmp_path)
    assert ck.read_offsets(tmp_path / ck.RECOVERY_POINT_CHECKPOINT) == {T0: end}
    assert ck.read_offsets(tmp_path / ck.REPLICATION_OFFSET_CHECKPOINT) == {T0: end}
    assert ck.read_offsets(tmp_path / ck.LOG_START_OFFSET_CHECKPOINT) == {T0: 33}

    again = await open_manager(tmp_path)
    assert again.had_clean_shutdown and not ck.read_clean_shutdown(tmp_path)  # marker consumed
    log = again.get_log(T0)
    assert (log.log_start_offset, log.high_watermark, log.log_end_offset) == (33, end, end)
    assert again.load_reports[T0].recovered_segments == []
    assert batches_of(log.read(33, 10**6).read_bytes())[0][0] == 32
    await again.shutdown()


async def test_a_new_log_dir_is_not_reported_as_an_unclean_stop(tmp_path: Path) -> None:
    """Issue 27: an empty data dir logged clean_shutdown=false, which reads as a crash."""
    stops = []
    for _ in range(2):
        with structlog.testing.capture_logs() as logs:
            manager = await open_manager(tmp_path / "logs")
        stops.append([{k: e[k] for k in ("new_log_dir", "clean_shutdown") if k in e}
                      for e in logs if e["event"] == "loaded logs"])
        await manager.shutdown()
    assert stops == [[{"new_log_dir": True}], [{"clean_shutdown": True}]]
    manager = await open_manager(tmp_path / "logs")
    await filled(manager, T0, 2)
    manager.abandon()  # a crash
    again = await open_manager(tmp_path / "logs")
    assert again.previous_stop() == {"clean_shutdown": False}
    await again.shutdown()


async def test_log_start_offset_is_durable_before_return(tmp_path: Path) -> None:
    manager = await open_manager(tmp_path)
    log = await filled(manager, T0, 40)
    await move_start(log, 21)
    # No flush, no shutdown: a crash now. The checkpoint already has it.
    assert ck.read_offsets(tmp_path / ck.LOG_START_OFFSET_CHECKPOINT)[T0] == 21
    manager.abandon()
    again = await open_manager(tmp_path)
    assert not again.had_clean_shutdown
    assert again.get_log(T0).log_start_offset == 21
    assert again.get_log(T0).log_end_offset == 80
    await again.shutdown()


async def test_group_commit_shares_checkpoint_writes(tmp_path: Path) -> None:
    manager = await open_manager(tmp_path)
    logs = [await filled(manager, TopicPartition("g", p), 3) for p in range(50)]
    before = manager.checkpoints.start_offsets.writes
    results = await asyncio.gather(*(move_start(log, 4) for log in logs))
    assert results == [4] * 50
    writes = manager.checkpoints.start_offsets.writes - before
    assert 1 <= writes <= 3, writes  # 50 updates, a couple of shared writes
    assert set(ck.read_offsets(tmp_path / ck.LOG_START_OFFSET_CHECKPOINT).values()) == {4}
    # A repeated request for an offset already durable does not write again.
    await move_start(logs[0], 4)
    assert manager.checkpoints.start_offsets.writes - before == writes
    await manager.shutdown()


async def test_same_offset_while_its_write_is_pending_still_waits(tmp_path: Path) -> None:
    manager = await open_manager(tmp_path)
    log = await filled(manager, T0, 5)
    first = asyncio.ensure_future(move_start(log, 6))
    await asyncio.sleep(0)  # first has moved the offset in memory; its write is under way
    assert log.log_start_offset == 6 and log.durable_log_start_offset != 6
    await move_start(log, 6)  # the no-op path must wait for durability too
    assert log.durable_log_start_offset == 6
    await first
    await manager.shutdown()


async def test_without_sync_the_start_offset_waits_for_the_interval(tmp_path: Path) -> None:
    config = replace(QUIET, start_offset_checkpoint_sync=False)
    manager = await open_manager(tmp_path, manager_config=config)
    log = await filled(manager, T0, 40)
    await move_start(log, 41)
    first_base = log.segments[0].base_offset
    assert 0 < first_base < 41
    assert ck.read_offsets(tmp_path / ck.LOG_START_OFFSET_CHECKPOINT).get(T0, 0) == 0  # Kafka's behaviour
    manager.abandon()
    again = await open_manager(tmp_path, manager_config=config)
    # Back to the first segment's base: records the deletion had covered are readable again.
    assert again.get_log(T0).log_start_offset == first_base
    await again.shutdown()


async def test_damaged_and_missing_checkpoints_are_rebuilt(tmp_path: Path, capsys) -> None:
    manager = await open_manager(tmp_path)
    await filled(manager, T0, 30)
    await filled(manager, T1, 5)
    await manager.shutdown()
    (tmp_path / ck.RECOVERY_POINT_CHECKPOINT).write_text("0\n5\ngarbage\n")
    (tmp_path / ck.REPLICATION_OFFSET_CHECKPOINT).unlink()
    (tmp_path / (ck.LOG_START_OFFSET_CHECKPOINT + ".tmp")).write_text("half")
    (tmp_path / T0.dir_name / ck.LEADER_EPOCH_CHECKPOINT).write_text("0\n9\n")
    again = await open_manager(tmp_path)
    assert "checkpoint damaged" in capsys.readouterr().out
    assert not again.had_clean_shutdown  # no recovery points: everything rescanned
    assert again.load_reports[T0].recovered_segments == [s.base_offset for s in again.get_log(T0).segments]
    assert again.get_log(T0).log_end_offset == 60
    assert again.get_log(T0).epoch_cache.entries() == [(1, 0)]
    assert ck.read_offsets(tmp_path / ck.RECOVERY_POINT_CHECKPOINT) == {T0: 60, T1: 10}
    assert ck.read_offsets(tmp_path / ck.REPLICATION_OFFSET_CHECKPOINT) == {T0: 0, T1: 0}
    assert not (tmp_path / (ck.LOG_START_OFFSET_CHECKPOINT + ".tmp")).exists()
    await again.shutdown()


async def test_topic_id_and_stale_directories(tmp_path: Path) -> None:
    manager = await open_manager(tmp_path)
    first_id, second_id = uuid.uuid4(), uuid.uuid4()
    log = await manager.get_or_create_log(T0, topic_id=first_id)
    assert ck.read_partition_metadata(log.directory / ck.PARTITION_METADATA) == first_id
    await manager.shutdown()
    again = await open_manager(tmp_path)
    assert again.get_log(T0).topic_id == first_id
    with pytest.raises(InconsistentTopicIdError):
        await again.get_or_create_log(T0, topic_id=second_id)
    await again.delete_log(T0)
    fresh = await again.get_or_create_log(T0, topic_id=second_id)
    assert fresh.topic_id == second_id
    await again.shutdown()


async def test_delete_log_renames_then_removes(tmp_path: Path) -> None:
    config = replace(SMALL, file_delete_delay_ms=60_000)
    manager = await open_manager(tmp_path, config)
    await filled(manager, T0, 10)
    await filled(manager, T1, 10)
    assert await manager.delete_log(T0) is True
    assert manager.get_log(T0) is None
    names = files(tmp_path)
    deleting = [n for n in names if n.endswith("-delete")]
    assert len(deleting) == 1 and deleting[0].startswith("events-0.") and T0.dir_name not in names
    assert T0 not in ck.read_offsets(tmp_path / ck.LOG_START_OFFSET_CHECKPOINT)
    await manager.shutdown()  # before the delay ran out: left for the next startup
    assert any(n.endswith("-delete") for n in files(tmp_path))
    again = await open_manager(tmp_path, config)
    assert not any(n.endswith("-delete") for n in files(tmp_path))
    assert again.get_log(T0) is None and again.get_log(T1).log_end_offset == 20
    await again.shutdown()


async def test_a_read_of_a_deleted_log_reopens_its_parked_files_in_the_renamed_directory(tmp_path: Path) -> None:
    """Until file.delete.delay.ms ends, a response may still be sent from a deleted log's files, and
    the open-file budget may have closed them meanwhile: they open again under the new directory."""
    config = replace(SMALL, file_delete_delay_ms=60_000)
    manager = await open_manager(tmp_path, config)
    log = await filled(manager, T0, 10)
    answer = log.read(0, 10**9, bound=ReadBound.LOG_END)
    expected = answer.read_bytes()
    assert await manager.delete_log(T0) is True
    capacity = OPEN_SEGMENTS.capacity
    OPEN_SEGMENTS.resize(0)  # every idle segment file closed
    try:
        assert all(s.file.fd < 0 for s in log.segments)
        assert answer.read_bytes() == expected
        assert all(s.file.path.parent.name.endswith("-delete") for s in log.segments)
    finally:
        OPEN_SEGMENTS.resize(capacity)
    await manager.shutdown()


async def test_delete_log_after_the_delay(tmp_path: Path) -> None:
    manager = await open_manager(tmp_path)  # file.delete.delay.ms = 0
    await filled(manager, T0, 3)
    await manager.delete_log(T0)
    await settle()
    assert not any(n.startswith("events-0") for n in files(tmp_path))
    await manager.shutdown()


async def test_leftover_deleted_segments_are_removed_at_startup(tmp_path: Path) -> None:
    config = replace(SMALL, file_delete_delay_ms=60_000)
    manager = await open_manager(tmp_path, config)
    log = await filled(manager, T0, 40)
    await move_start(log, 50)
    assert any(n.endswith(".deleted") for n in files(log.directory))
    await manager.shutdown()
    again = await open_manager(tmp_path, config)
    assert not any(n.endswith(".deleted") for n in files(again.get_log(T0).directory))
    await again.shutdown()


async def test_retention_by_time_size_and_floor(tmp_path: Path) -> None:
    clock = FakeClock(1_000_000)
    config = replace(SMALL, retention_ms=10_000)
    manager = await open_manager(tmp_path, config, clock=clock)
    log = await filled(manager, T0, 130, ts0=990_000)  # batch i has timestamp 990_000 + i
    segments = log.segments
    assert await manager.run_retention() == 0  # nothing older than 10 s yet
    clock.now = segments[1].max_timestamp + 10_001
    assert await manager.run_retention() == 2
    assert log.log_start_offset == segments[2].base_offset
    assert ck.read_offsets(tmp_path / ck.LOG_START_OFFSET_CHECKPOINT)[T0] == log.log_start_offset

    # retention.min.timestamp: an absolute floor.
    log.config = replace(config, retention_ms=-1, retention_min_timestamp=segments[3].max_timestamp + 1)
    assert await manager.run_retention() == 2
    assert log.log_start_offset == segments[4].base_offset

    # retention.bytes: keep at most this many bytes, oldest segments first.
    keep = log.segments[-1].size + log.segments[-2].size
    log.config = replace(config, retention_ms=-1, retention_bytes=keep)
    await manager.run_retention()
    assert len(log.segments) == 2 and log.size_bytes <= keep
    await settle()
    assert len([n for n in files(log.directory) if n.endswith(".log")]) == 2
    await manager.shutdown()


async def test_retention_never_passes_the_high_watermark_and_keeps_a_segment(tmp_path: Path) -> None:
    clock = FakeClock(10**12)
    manager = await open_manager(tmp_path, replace(SMALL, retention_ms=1), clock=clock)
    log = await filled(manager, T0, 60, ts0=1)
    log.update_high_watermark(log.segments[2].base_offset)  # only two segments are below the HW
    assert await manager.run_retention() == 2
    log.update_high_watermark(log.log_end_offset)
    deleted = await manager.run_retention()
    assert deleted >= 1 and len(log.segments) == 1 and log.segments[0].size == 0
    assert log.log_start_offset == log.log_end_offset == 120
    assert (await log.append(batch(1))).first_offset == 120
    await manager.shutdown()


async def test_compact_policy_keeps_time_retention_off(tmp_path: Path) -> None:
    clock = FakeClock(10**12)
    manager = await open_manager(
        tmp_path, replace(SMALL, retention_ms=1, cleanup_policy=("compact",)), clock=clock
    )
    log = await filled(manager, T0, 60, ts0=1)
    assert await manager.run_retention() == 0
    await move_start(log, 50, StartOffsetReason.LEADER_OFFSET_INCREMENTED)
    assert log.segments[0].base_offset <= 50  # but segments below the start offset still go
    await manager.shutdown()


async def test_partition_that_fails_to_load_is_offline_and_keeps_its_checkpoints(tmp_path: Path) -> None:
    manager = await open_manager(tmp_path)
    log = await filled(manager, T0, 10)
    await move_start(log, 5)
    await filled(manager, T1, 3)
    await manager.shutdown()
    segment = tmp_path / T0.dir_name / "00000000000000000000.log"
    segment.unlink()
    segment.mkdir()  # a directory where a segment file should be: opening it fails
    again = await open_manager(tmp_path)
    with pytest.raises(StorageError):
        again.get_log(T0)
    assert again.get_log(T1).log_end_offset == 6
    assert ck.read_offsets(tmp_path / ck.LOG_START_OFFSET_CHECKPOINT)[T0] == 5
    await again.shutdown()


async def test_background_tasks_run_and_stop(tmp_path: Path) -> None:
    config = LogManagerConfig(
        io_threads=2,
        initial_task_delay_ms=0,
        retention_check_interval_ms=10,
        high_watermark_checkpoint_interval_ms=10,
    )
    clock = FakeClock(10**12)
    manager = await open_manager(tmp_path, replace(SMALL, retention_ms=1), clock=clock, manager_config=config)
    manager._start_background_tasks()
    log = await filled(manager, T0, 40, ts0=1)
    checkpoint = tmp_path / ck.REPLICATION_OFFSET_CHECKPOINT
    # Both tasks ran: retention moved the start, and a high watermark checkpoint written after the
    # log was filled lists it (an earlier one may not list the partition at all).
    await until(lambda: log.log_start_offset > 0 and checkpoint.exists() and ck.read_offsets(checkpoint).get(T0) == 80,
                timeout_s=20, what="retention and the checkpoint task")
    await manager.shutdown()


def test_config_from_kafka_properties() -> None:
    config = LogConfig.from_properties(
        {
            "retention.ms": "1000",
            "cleanup.policy": "compact,delete",
            "retention.min.timestamp": "1700000000000",
            "message.timestamp.type": "LogAppendTime",
            "segment.bytes": 4096,
        }
    )
    assert config.retention_ms == 1000 and config.delete_enabled and config.log_append_time
    assert config.retention_min_timestamp == 1_700_000_000_000 and config.segment_bytes == 4096
    assert not LogConfig.from_properties({"cleanup.policy": "compact"}).delete_enabled
    manager_config = LogManagerConfig.from_properties({"log.start.offset.checkpoint.sync": "false"})
    assert manager_config.start_offset_checkpoint_sync is False
    with pytest.raises(ValueError):
        LogConfig.from_properties({"no.such.thing": 1})
    with pytest.raises(ValueError):
        LogConfig.from_properties({"cleanup.policy": "shred"})
