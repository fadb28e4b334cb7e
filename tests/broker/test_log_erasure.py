"""Erasure (`erasure.max.delay.ms`, broker/log/erasure.py) on real segment files: after the log start
offset moves inside a segment the deleted values leave every file of the directory, what remains reads
back the same, a batch holding the start stays whole, `erased_offset` says how far the bytes are gone,
and a stop in the middle of a rewrite (at either point) loses nothing."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from broker.log import LogConfig, ReadBound, TopicPartition
from broker.log.cleaner import CLEANED_SUFFIX, SWAP_SUFFIX
from broker.log.common import StartOffsetReason
from protocol.records import build_batch, iter_batches
from tests.broker.test_log_support import open_manager, settle
from tests.support import polling

TP = TopicPartition("secrets", 0)
ERASING = LogConfig(segment_bytes=1024 * 1024 * 1024, index_interval_bytes=100, erasure_max_delay_ms=0)


def value(i: int) -> bytes:
    return b"secret-%05d-" % i + b"x" * 40


def dir_bytes(directory: Path) -> bytes:
    return b"".join((directory / name).read_bytes() for name in sorted(os.listdir(directory)))


def records(log) -> list[tuple[int, bytes | None]]:
    found = log.read(log.log_start_offset, 1 << 24, bound=ReadBound.LOG_END)
    return [(r.offset, r.value) for b in iter_batches(bytes(found.read_bytes())) for r in b.records()
            if r.offset >= log.log_start_offset]


async def written_log(manager, batches: int = 20, per_batch: int = 3):
    log = await manager.get_or_create_log(TP)
    for b in range(batches):
        await log.append(build_batch([(None, value(b * per_batch + i), [], 1_000) for i in range(per_batch)]),
                         leader_epoch=0)
    log.update_high_watermark(log.log_end_offset)
    return log


async def until(condition, what: str) -> None:
    await polling.until(condition, timeout_s=5.0, what=what)  # the bound these tests always had


@pytest.mark.parametrize("start", [30, 31])  # a batch boundary; inside a batch (its batch stays whole)
async def test_a_delete_inside_the_active_segment_erases_the_bytes_below(tmp_path: Path, start: int) -> None:
    manager = await open_manager(tmp_path, ERASING)
    log = await written_log(manager)
    before = records(log)
    assert log.erased_offset == 0 and len(log.segments) == 1
    log.move_log_start_offset(start)
    kept_from = start - start % 3
    assert log.erasable_offset() == kept_from
    await until(lambda: log.erased_offset == kept_from, "the rewrite")
    await settle()
    on_disk = dir_bytes(log.directory)
    assert all(value(i) not in on_disk for i in range(kept_from))
    assert all(value(i) in on_disk for i in range(kept_from, 60))
    assert records(log) == [r for r in before if r[0] >= start]
    assert log.segments[0].base_offset == kept_from and log.erasure.passes == 1
    assert not [n for n in os.listdir(log.directory) if n.endswith((".deleted", CLEANED_SUFFIX, SWAP_SUFFIX))]
    await log.append(build_batch([(None, b"after", [], 2_000)]), leader_epoch=0)  # the log goes on
    await manager.shutdown()
    manager = await open_manager(tmp_path, ERASING)  # and loads again with the same offsets
    log = manager.get_log(TP)
    assert (log.log_start_offset, log.erased_offset, log.log_end_offset) == (start, kept_from, 61)
    await manager.shutdown()


async def test_without_erasure_bytes_stay_until_whole_segments_go(tmp_path: Path) -> None:
    manager = await open_manager(tmp_path, LogConfig(segment_bytes=1024 * 1024 * 1024, file_delete_delay_ms=60_000))
    log = await written_log(manager)
    log.move_log_start_offset(30)
    await settle()
    assert log.erased_offset == 0 and log.erasable_offset() == 30
    assert value(0) in dir_bytes(log.directory)
    log.config = ERASING  # turned on later: what is due is erased
    await until(lambda: log.erased_offset == 30, "the rewrite after the config change")
    assert value(0) not in dir_bytes(log.directory)
    await manager.shutdown()


async def test_retired_segments_go_at_once_and_erased_offset_waits_for_the_unlink(tmp_path: Path) -> None:
    manager = await open_manager(tmp_path, LogConfig(segment_bytes=600, erasure_max_delay_ms=60_000))
    log = await written_log(manager)
    assert len(log.segments) > 3
    second = log.segments[2].base_offset
    log.move_log_start_offset(second, StartOffsetReason.SEGMENT_DELETION)
    # the timer for the tail rewrite waits half the bound; the whole segments were retired now
    assert log.erased_offset == 0  # the retired files are not unlinked yet
    await until(lambda: log.erased_offset == second, "the retired segments unlinked")
    assert value(0) not in dir_bytes(log.directory)
    await manager.shutdown()


@pytest.mark.parametrize("point", ["copied", "swap-started", "old-renamed"])
async def test_a_stop_in_the_middle_of_a_rewrite_loses_nothing(tmp_path: Path, point: str) -> None:
    manager = await open_manager(tmp_path, LogConfig(segment_bytes=1024 * 1024 * 1024))
    log = await written_log(manager)
    log.move_log_start_offset(31)
    expected = records(log)
    log.config = LogConfig(segment_bytes=1024 * 1024 * 1024, erasure_max_delay_ms=3_600_000)  # not run here
    target = log.erasure_target()
    from broker.log.erasure import copy_tail

    copy = copy_tail(log.directory, target, 100, log.config.index_bytes, 0)
    copy.close()
    await manager.shutdown()
    directory = log.directory
    copy_names = [n for n in os.listdir(directory) if n.endswith(CLEANED_SUFFIX)]
    assert copy_names
    if point != "copied":
        for name in copy_names:
            os.rename(directory / name, directory / name.replace(CLEANED_SUFFIX, SWAP_SUFFIX))
    if point == "old-renamed":
        for name in os.listdir(directory):
            if name.startswith(f"{0:020d}."):
                os.rename(directory / name, directory / (name + ".deleted"))
    manager = await open_manager(tmp_path, ERASING)
    log = manager.get_log(TP)
    assert records(log) == expected
    await until(lambda: log.erased_offset == 30, "erasure finished after the restart")
    assert records(log) == expected and value(29) not in dir_bytes(directory)
    assert not [n for n in os.listdir(directory) if n.endswith((".deleted", CLEANED_SUFFIX, SWAP_SUFFIX))]
    await manager.shutdown()


async def test_a_first_segment_wholly_below_the_start_is_deleted_not_copied_over_the_next(tmp_path: Path) -> None:
    # No known path leaves this state (the loader and every start move drop such segments); if one did,
    # a copy named by the start would be renamed over the next segment's live files.
    manager = await open_manager(tmp_path, LogConfig(segment_bytes=600, erasure_max_delay_ms=0))
    log = await written_log(manager)
    second = log.segments[1].base_offset
    expected = [r for r in records(log) if r[0] >= second]
    log._log_start_offset = second
    await log.erasure._pass()
    assert log.segments[0].base_offset == second and records(log) == expected
    await manager.shutdown()
    manager = await open_manager(tmp_path, LogConfig(segment_bytes=600, erasure_max_delay_ms=0))
    assert records(manager.get_log(TP)) == expected
    await manager.shutdown()


async def test_failed_passes_are_tried_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from broker.log import erasure

    real, calls = erasure.copy_tail, []

    def failing_copy(*args):
        calls.append(1)
        if len(calls) <= erasure._ATTEMPTS:  # every attempt of the first run: as a segment unlinked mid-copy
            raise FileNotFoundError("retired meanwhile")
        return real(*args)

    monkeypatch.setattr(erasure, "copy_tail", failing_copy)
    monkeypatch.setattr(erasure, "_RETRY_S", 0.05, raising=False)
    manager = await open_manager(tmp_path, ERASING)
    log = await written_log(manager)
    log.move_log_start_offset(30)
    await until(lambda: log.erased_offset == 30, "the pass after the failed ones")
    assert len(calls) == erasure._ATTEMPTS + 1 and log.erasure.passes == 1
    await manager.shutdown()


async def test_deleting_the_log_halts_a_running_copy_before_the_rename(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    from broker.log import erasure

    real, in_copy, release, finished = erasure.scan_headers, threading.Event(), threading.Event(), threading.Event()

    def held_scan(*args):
        try:
            for i, item in enumerate(real(*args)):
                if i == 1:  # the copy has its `.cleaned` files open and is under way
                    in_copy.set()
                    release.wait(10)
                yield item
        finally:
            finished.set()

    monkeypatch.setattr(erasure, "scan_headers", held_scan)
    manager = await open_manager(tmp_path, ERASING)
    log = await written_log(manager)
    log.move_log_start_offset(30)
    await until(in_copy.is_set, "the copy under way")
    deleting = asyncio.ensure_future(manager.delete_log(TP))
    await settle()
    assert not deleting.done()  # it waits for the copy, which stops at its next batch
    release.set()
    assert await deleting
    await until(finished.is_set, "the copy's end")
    await settle()
    assert not [p for p in tmp_path.rglob("*") if p.name.endswith(CLEANED_SUFFIX)]
    await manager.shutdown()


async def test_a_copy_taken_before_a_truncation_is_not_swapped_in(tmp_path: Path) -> None:
    from broker.log.erasure import copy_tail

    manager = await open_manager(tmp_path, LogConfig(segment_bytes=600, erasure_max_delay_ms=3_600_000))
    log = await written_log(manager)  # two batches of three records in each segment
    first = log.segments[0]
    assert first.next_offset == 6
    log.move_log_start_offset(4)
    target = log.erasure_target()
    assert target is not None and target.new_base == 3
    copy = copy_tail(log.directory, target, 100, log.config.index_bytes, 0)
    # A follower's truncation into the segment, then the new leader's batches up to the same size and end
    await log.truncate_to(3)
    for b in range(2):
        await log.append(build_batch([(None, value(1000 + 3 * b + i), [], 1_000) for i in range(3)]), leader_epoch=1)
    assert log.segments[0] is first and len(log.segments) == 2
    assert (first.size, first.next_offset) == (target.size, target.next_offset)
    assert not log.erasure._swap(target, copy)
    copy.close()
    log.update_high_watermark(log.log_end_offset)
    assert [v for _, v in records(log)] == [value(1000 + i) for i in range(6)]
    await manager.shutdown()


async def test_erased_offset_reads_no_file_on_the_loop_and_a_damaged_header_stays_conservative(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    from broker.log import segment, segment_run

    on_loop: list[bool] = []

    def watched(real):
        def scan(*args):
            on_loop.append(threading.current_thread() is threading.main_thread())
            return real(*args)
        return scan

    monkeypatch.setattr(segment, "scan_headers", watched(segment.scan_headers))
    monkeypatch.setattr(segment_run, "scan_headers", watched(getattr(segment_run, "scan_headers", None)),
                        raising=False)
    manager = await open_manager(tmp_path, LogConfig(segment_bytes=1024 * 1024 * 1024, erasure_max_delay_ms=3_600_000))
    log = await written_log(manager)
    with open(log.segments[0].log_path, "r+b") as f:  # the first batch's length: -1
        f.seek(8)
        f.write(b"\xff\xff\xff\xff")
    on_loop.clear()
    assert log.erased_offset == 0  # asked on the loop (a scrape, DescribeErasure): no read, no raise
    await settle()  # the pool's read found the damage: the segment's base stands
    assert log.erased_offset == 0
    assert on_loop == [False]
    await manager.shutdown()


async def test_a_copy_made_active_by_a_truncation_rolls_with_its_jitter(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Every segment draws segment.jitter.ms's roll jitter (Kafka's LogSegment.open), the erasure copy
    too: a follower's truncation into it makes it the active segment, which rolls by segment.ms."""
    monkeypatch.setattr(LogConfig, "random_segment_jitter", lambda self: 4_321)
    manager = await open_manager(tmp_path, ERASING)
    log = await written_log(manager)
    log.move_log_start_offset(30)  # rolls the active segment, then copies it from offset 30
    await until(lambda: log.erased_offset == 30, "the rewrite")
    copy = log.segments[0]
    assert copy.base_offset == 30 and len(log.segments) == 2
    await log.truncate_to(45)
    assert log.segments == [copy] and log.log_end_offset == 45
    assert copy.roll_jitter_ms == 4_321
    await manager.shutdown()
