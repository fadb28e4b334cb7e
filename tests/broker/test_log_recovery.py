"""Recovery after an unclean stop: torn and corrupt tails, damaged indexes, and a log start offset
that never moves backwards."""

from __future__ import annotations

import os
from pathlib import Path

from broker.log import PartitionLog, ReadBound, TopicPartition
from broker.log import checkpoint as ck
from broker.log.opening import create_partition_log, load_partition_log
from tests.broker.test_log_support import (
    SMALL,
    FakeClock,
    all_batches,
    batch,
    batches_of,
    files,
    open_manager,
)
from tests.support.log_start import move_start

TP = TopicPartition("rec", 0)


async def written_log(tmp_path: Path, batches: int, *, flush: bool = False) -> PartitionLog:
    log = create_partition_log(tmp_path / TP.dir_name, SMALL, clock=FakeClock())
    for i in range(batches):
        await log.append(batch(2, timestamp=1000 + i), leader_epoch=1 + i // 20)
    log.update_high_watermark(log.log_end_offset)
    if flush:
        await log.flush()
    log.abandon()
    return log


def reload(log: PartitionLog, **kwargs) -> tuple[PartitionLog, object]:
    return load_partition_log(log.directory, SMALL, clock=FakeClock(), **kwargs)


def check_valid(log: PartitionLog) -> list[tuple[int, int, int]]:
    """Every batch passes its CRC, offsets follow each other, and the log agrees with the files."""
    found = all_batches(log.directory)
    for (_, last, _), (base, _, _) in zip(found, found[1:], strict=False):
        assert base == last + 1
    assert (found[-1][1] + 1 if found else log.segments[0].base_offset) == log.log_end_offset
    return found


async def test_torn_tail_is_cut(tmp_path: Path) -> None:
    log = await written_log(tmp_path, 30)
    active = log.segments[-1].log_path
    size = active.stat().st_size
    os.truncate(active, size - 7)  # the last batch lost its end
    recovered, report = reload(log, recovery_point=0)
    assert recovered.log_end_offset == 58 and report.truncated_bytes == len(batch(2)) - 7
    assert report.problems and "cut short" in report.problems[-1]
    check_valid(recovered)
    assert (await recovered.append(batch(1))).first_offset == 58
    recovered.abandon()


async def test_corrupt_batch_cuts_the_rest_of_the_log(tmp_path: Path) -> None:
    log = await written_log(tmp_path, 60)
    middle = log.segments[1]
    with open(middle.log_path, "r+b") as f:
        f.seek(len(batch(2)) * 3 + 70)  # inside the 4th batch's records
        byte = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte[0] ^ 0xFF]))
    recovered, report = reload(log, recovery_point=0)
    assert recovered.log_end_offset == middle.base_offset + 6
    assert "CRC" in " ".join(report.problems)
    assert [s.base_offset for s in recovered.segments] == [0, middle.base_offset]
    assert len(report.deleted_segments) == len(log.segments) - 2
    check_valid(recovered)
    recovered.abandon()


async def test_zeroed_tail_is_cut(tmp_path: Path) -> None:
    log = await written_log(tmp_path, 5)
    with open(log.segments[-1].log_path, "ab") as f:
        f.write(b"\0" * 300)  # what a file system can show after a crash: allocated, never written
    recovered, report = reload(log, recovery_point=0)
    assert recovered.log_end_offset == 10 and report.truncated_bytes == 300
    recovered.abandon()


async def test_recovery_starts_at_the_recovery_point(tmp_path: Path) -> None:
    log = await written_log(tmp_path, 60)
    bases = [s.base_offset for s in log.segments]
    recovered, report = reload(log, recovery_point=bases[2] + 1)
    assert report.recovered_segments == bases[2:]
    assert recovered.log_end_offset == 120 and recovered.recovery_point == 120
    recovered.abandon()
    clean, report = reload(log, recovery_point=0, clean=True)
    assert report.recovered_segments == [] and clean.log_end_offset == 120
    clean.abandon()


async def test_rebuilt_indexes_equal_the_originals(tmp_path: Path) -> None:
    log = await written_log(tmp_path, 60, flush=True)
    originals = {
        p: p.read_bytes() for p in sorted(log.directory.iterdir()) if p.suffix in (".index", ".timeindex")
    }
    assert any(originals.values())
    for path in originals:
        path.unlink()
    recovered, report = reload(log, recovery_point=120)
    assert sorted(report.rebuilt_indexes + report.recovered_segments) == [s.base_offset for s in log.segments]
    rebuilt = {p: p.read_bytes() for p in originals}
    for path, content in originals.items():
        if path.suffix == ".index":
            assert rebuilt[path] == content, path.name
        else:  # the original also holds the final entry written when its segment was sealed
            assert content.startswith(rebuilt[path]), path.name
    for target in (0, 25, 77, 119):
        assert batches_of(recovered.read(target, 100, bound=ReadBound.LOG_END).read_bytes())[0][1] >= target
    recovered.abandon()


async def test_damaged_index_of_a_flushed_segment_is_rebuilt(tmp_path: Path) -> None:
    log = await written_log(tmp_path, 60, flush=True)
    first = log.segments[0]
    first.index.path.write_bytes(os.urandom(13))
    recovered, report = reload(log, recovery_point=120)
    assert 0 in report.rebuilt_indexes and any("rebuilding" in p for p in report.problems)
    assert recovered.log_end_offset == 120
    assert len(recovered.segments[0].index) > 0
    recovered.abandon()


async def test_log_start_offset_never_moves_back_even_when_the_log_is_shorter(tmp_path: Path) -> None:
    log = await written_log(tmp_path, 10)
    for path in log.directory.iterdir():
        if path.suffix == ".log":
            os.truncate(path, 0)  # the data never reached the disk, but the checkpoint did
    recovered, report = reload(log, recovery_point=0, log_start_offset=15)
    assert (recovered.log_start_offset, recovered.log_end_offset) == (15, 15)
    assert recovered.segments[0].base_offset == 15
    assert (await recovered.append(batch(1))).first_offset == 15
    recovered.abandon()
    # And from a checkpoint inside the data: the first segment's base does not pull it back.
    log = await written_log(tmp_path / "b", 60)
    recovered, _ = reload(log, recovery_point=0, log_start_offset=61)
    assert recovered.log_start_offset == 61
    assert recovered.segments[0].base_offset <= 61 < recovered.segments[0].next_offset
    recovered.abandon()


async def test_segments_below_the_start_offset_that_came_back_are_dropped(tmp_path: Path) -> None:
    log = await written_log(tmp_path, 60)
    # A crash undid the rename of deleted segments; the checkpoint says they are gone.
    recovered, report = reload(log, recovery_point=0, log_start_offset=log.segments[2].base_offset + 1)
    assert recovered.segments[0].base_offset == log.segments[2].base_offset
    assert report.deleted_segments == [log.segments[0].base_offset, log.segments[1].base_offset]
    recovered.abandon()


async def test_leftovers_are_cleaned(tmp_path: Path) -> None:
    log = await written_log(tmp_path, 5)
    (log.directory / "00000000000000000003.log.deleted").write_bytes(b"x")
    (log.directory / "00000000000000000099.index").write_bytes(b"")  # index without a log
    (log.directory / "leader-epoch-checkpoint.tmp").write_text("0\n")
    recovered, report = reload(log, recovery_point=0)
    assert report.leftovers_removed == 3
    assert files(log.directory) == [
        "00000000000000000000.index",
        "00000000000000000000.log",
        "00000000000000000000.timeindex",
        "leader-epoch-checkpoint",
    ]
    recovered.abandon()


async def test_epochs_are_rederived_after_a_crash(tmp_path: Path) -> None:
    log = await written_log(tmp_path, 60)  # epochs 1, 2, 3 from offsets 0, 40, 80
    (log.directory / ck.LEADER_EPOCH_CHECKPOINT).unlink(missing_ok=True)
    recovered, _ = reload(log, recovery_point=0)
    assert recovered.epoch_cache.entries() == [(1, 0), (2, 40), (3, 80)]
    assert ck.read_leader_epochs(log.directory / ck.LEADER_EPOCH_CHECKPOINT) == [(1, 0), (2, 40), (3, 80)]
    recovered.abandon()
    clean, _ = reload(log, recovery_point=120, clean=True)  # a clean start reads the file
    assert clean.epoch_cache.entries() == [(1, 0), (2, 40), (3, 80)]
    clean.abandon()


async def test_unclean_restart_through_the_manager(tmp_path: Path) -> None:
    manager = await open_manager(tmp_path)
    log = await manager.get_or_create_log(TP)
    for i in range(50):
        await log.append(batch(2, timestamp=i))
    log.update_high_watermark(100)
    await move_start(log, 30)
    active = log.segments[-1].log_path
    manager.abandon()
    os.truncate(active, active.stat().st_size - 1)
    again = await open_manager(tmp_path)
    recovered = again.get_log(TP)
    assert (recovered.log_start_offset, recovered.log_end_offset) == (30, 98)
    assert again.load_reports[TP].truncated_bytes > 0
    assert recovered.high_watermark == 30  # the HW checkpoint was never written; clamped to the start
    check_valid(recovered)
    await again.shutdown()
