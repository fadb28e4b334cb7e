"""PartitionLog on its own: append, read, offsets, timestamps, start offset, truncation, rolling, flush."""

from __future__ import annotations

import asyncio
import os
import struct
import threading
from dataclasses import replace
from pathlib import Path

import pytest
from crc32c import crc32c

import broker.log.log_state as log_state
import broker.log.segment as segment_module
from broker.log import (
    InvalidRecordError,
    LogConfig,
    OffsetOutOfRangeError,
    PartitionLog,
    PolicyViolationError,
    ReadBound,
    StartOffsetReason,
    TopicPartition,
)
from broker.log.opening import create_partition_log, load_partition_log
from protocol.enums import SpecialTimestamp
from protocol.errors import ErrorCode
from protocol.records import BATCH_HEADER_SIZE, RecordBatch, TimestampType, build_batch, iter_batches
from tests.broker.test_log_support import SMALL, FakeClock, batch, batches_of, files, open_manager, settle
from tests.support.log_start import move_start


def ts_offset(found) -> tuple[int, int]:
    return found.timestamp, found.offset


def new_log(tmp_path: Path, config: LogConfig = SMALL, clock: FakeClock | None = None) -> PartitionLog:
    return create_partition_log(tmp_path / "topic-0", config, clock=clock or FakeClock())


async def fill(log: PartitionLog, count: int, records: int = 2, ts0: int = 1000) -> None:
    for i in range(count):
        await log.append(batch(records, timestamp=ts0 + i), leader_epoch=3)
    log.update_high_watermark(log.log_end_offset)


async def test_append_assigns_offsets_and_epoch(tmp_path: Path) -> None:
    log = new_log(tmp_path)
    first = await log.append(batch(3) + batch(2), leader_epoch=5)
    assert (first.first_offset, first.last_offset, first.batches) == (0, 4, 2)
    second = await log.append(batch(1), leader_epoch=6)
    assert (second.first_offset, second.last_offset) == (5, 5)
    assert log.log_end_offset == 6 and log.high_watermark == 0
    data = log.read(0, 10_000, bound=ReadBound.LOG_END).read_bytes()
    views = list(iter_batches(data))
    assert [(v.base_offset, v.last_offset, v.partition_leader_epoch) for v in views] == [
        (0, 2, 5),
        (3, 4, 5),
        (5, 5, 6),
    ]
    assert all(v.crc_valid() for v in views)
    assert log.epoch_cache.entries() == [(5, 0), (6, 5)]
    empty = await log.append(b"")
    assert empty.batches == 0 and log.log_end_offset == 6


@pytest.mark.parametrize(
    "mangle, code",
    [
        (lambda b: b[:-1] + bytes([b[-1] ^ 1]), ErrorCode.CORRUPT_MESSAGE),  # CRC
        (lambda b: b[:-3], ErrorCode.CORRUPT_MESSAGE),  # cut short
        (lambda b: b[:16] + b"\x01" + b[17:], ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT),  # magic 1
        (lambda b: b + b"\0" * 5, ErrorCode.CORRUPT_MESSAGE),  # stray bytes
    ],
)
async def test_append_rejects_bad_input_without_writing(tmp_path: Path, mangle, code) -> None:
    log = new_log(tmp_path)
    await log.append(batch(1))
    with pytest.raises(InvalidRecordError) as info:
        await log.append(batch(1) + mangle(batch(2)))
    assert info.value.error_code == code
    assert log.log_end_offset == 1 and log.segments[-1].size == len(batch(1))


async def test_append_rejects_inconsistent_counts_and_oversized_batches(tmp_path: Path) -> None:
    log = new_log(tmp_path, replace(SMALL, max_message_bytes=500))
    wrong = bytearray(batch(3))
    struct.pack_into(">i", wrong, 57, 2)  # records_count 2 over 3 offsets, CRC recomputed
    view = RecordBatch(wrong)
    struct.pack_into(">I", wrong, 17, crc32c(bytes(wrong[21:])))
    assert view.crc_valid()
    with pytest.raises(InvalidRecordError) as info:
        await log.append(bytes(wrong))
    assert info.value.error_code == ErrorCode.INVALID_RECORD
    with pytest.raises(InvalidRecordError) as info:
        await log.append(batch(1, value=b"x" * 600))
    assert info.value.error_code == ErrorCode.MESSAGE_TOO_LARGE


async def test_log_append_time(tmp_path: Path) -> None:
    clock = FakeClock(5_000_000)
    log = new_log(tmp_path, replace(SMALL, message_timestamp_type="LogAppendTime"), clock)
    info = await log.append(batch(2, timestamp=7))
    assert info.log_append_time == 5_000_000 and info.max_timestamp == 5_000_000
    (view,) = iter_batches(log.read(0, 10_000, bound=ReadBound.LOG_END).read_bytes())
    assert view.timestamp_type == TimestampType.LOG_APPEND_TIME and view.max_timestamp == 5_000_000
    assert view.crc_valid()


async def test_log_append_time_replaces_a_create_time_ahead_of_the_broker(tmp_path: Path) -> None:
    clock = FakeClock(5_000_000)  # the producer's clock is ahead: its CreateTime must not survive
    log = new_log(tmp_path, replace(SMALL, message_timestamp_type="LogAppendTime"), clock)
    info = await log.append(batch(2, timestamp=9_000_000))
    assert info.max_timestamp == 5_000_000
    assert log.offset_for_timestamp(SpecialTimestamp.MAX_TIMESTAMP).timestamp == 5_000_000


async def test_follower_append_keeps_offsets(tmp_path: Path) -> None:
    log = new_log(tmp_path)
    await log.append(
        build_batch([(b"k", b"v", [], 1)] * 2, base_offset=10, partition_leader_epoch=4), assign_offsets=False
    )
    assert log.log_end_offset == 12 and log.epoch_cache.entries() == [(4, 10)]
    with pytest.raises(InvalidRecordError):
        await log.append(build_batch([(b"k", b"v", [], 1)], base_offset=11), assign_offsets=False)


async def test_rolls_on_size_and_reads_across_segments(tmp_path: Path) -> None:
    log = new_log(tmp_path)
    await fill(log, 60)
    assert len(log.segments) > 3
    bases = [s.base_offset for s in log.segments]
    assert bases == sorted(bases) and all(s.size <= SMALL.segment_bytes for s in log.segments)
    everything = log.read(0, 10**9)
    assert len(everything.slices) == len(log.segments)
    assert [b[0] for b in batches_of(everything.read_bytes())] == list(range(0, 120, 2))
    # Each read is whole batches, starts at the batch holding the offset, and respects max_bytes.
    size = len(batch(2))
    for offset in (0, 1, 37, 64, 119):
        for max_bytes in (1, size, size + 1, 3 * size - 1, 5000):
            info = log.read(offset, max_bytes)
            found = batches_of(info.read_bytes())
            assert found[0][0] == offset - offset % 2
            assert info.size == max(size, max_bytes // size * size) or found[-1][1] == 119
    assert log.read(120, 100).slices == ()


async def test_read_bounds(tmp_path: Path) -> None:
    log = new_log(tmp_path)
    await fill(log, 5)
    await log.append(batch(2))  # above the high watermark
    assert log.high_watermark == 10 and log.log_end_offset == 12
    assert batches_of(log.read(0, 10**6).read_bytes())[-1][1] == 9
    assert batches_of(log.read(0, 10**6, bound=ReadBound.LOG_END).read_bytes())[-1][1] == 11
    assert log.read(10, 10**6).slices == ()  # between HW and LEO: empty, not an error
    assert log.read(12, 10**6, bound=ReadBound.LOG_END).slices == ()
    with pytest.raises(OffsetOutOfRangeError):
        log.read(13, 100)
    assert log.read(0, 10, min_one_batch=False).slices == ()
    assert len(log.read(0, 10).slices) == 1  # one batch even though larger than max_bytes


async def test_offset_for_timestamp(tmp_path: Path) -> None:
    log = new_log(tmp_path)
    timestamps = [100, 300, 200, 500, 400, 500, 250]
    for ts in timestamps:
        await log.append(batch(2, timestamp=ts), leader_epoch=1)
    log.update_high_watermark(log.log_end_offset)
    assert log.offset_for_timestamp(SpecialTimestamp.EARLIEST).offset == 0
    assert log.offset_for_timestamp(SpecialTimestamp.LATEST).offset == 14
    assert ts_offset(log.offset_for_timestamp(SpecialTimestamp.MAX_TIMESTAMP)) == (500, 6)
    for target, expected in [(0, 0), (100, 0), (101, 2), (300, 2), (301, 6), (450, 6), (500, 6)]:
        found = log.offset_for_timestamp(target)
        assert found is not None and found.offset == expected, target
    assert log.offset_for_timestamp(501) is None
    await move_start(log, 7)
    assert log.offset_for_timestamp(SpecialTimestamp.EARLIEST).offset == 7
    assert log.offset_for_timestamp(100).offset == 7  # never below the start offset
    # batch 6..7 is still half there
    assert ts_offset(log.offset_for_timestamp(SpecialTimestamp.MAX_TIMESTAMP)) == (500, 7)
    await move_start(log, 8)
    assert ts_offset(log.offset_for_timestamp(SpecialTimestamp.MAX_TIMESTAMP)) == (500, 10)  # the first 500 is gone
    await move_start(log, 12)
    assert ts_offset(log.offset_for_timestamp(SpecialTimestamp.MAX_TIMESTAMP)) == (250, 12)


async def test_offset_for_timestamp_across_segments(tmp_path: Path) -> None:
    log = new_log(tmp_path)
    await fill(log, 60, ts0=10_000)
    assert len(log.segments) > 3
    for i in (0, 17, 33, 59):
        assert log.offset_for_timestamp(10_000 + i).offset == 2 * i
    assert log.offset_for_timestamp(SpecialTimestamp.MAX_TIMESTAMP).offset == 118


async def test_move_log_start_offset(tmp_path: Path) -> None:
    log = new_log(tmp_path)
    await fill(log, 60)
    await log.append(batch(2))
    segments_before = len(log.segments)
    with pytest.raises(OffsetOutOfRangeError):
        await move_start(log, 121)  # above the high watermark
    assert await move_start(log, 45) == 45
    assert await move_start(log, 30) == 45  # no-op success
    assert log.segments[0].base_offset <= 45 < log.segments[0].next_offset
    assert len(log.segments) < segments_before
    with pytest.raises(OffsetOutOfRangeError):
        log.read(44, 100)
    assert batches_of(log.read(45, 100).read_bytes())[0][0] == 44  # the batch holding 45
    await settle(log.io)
    assert all(not name.endswith(".deleted") for name in files(log.directory))
    assert await move_start(log, 120) == 120
    assert log.read(120, 100).slices == ()


async def test_delete_records_needs_delete_policy(tmp_path: Path) -> None:
    log = new_log(tmp_path, replace(SMALL, cleanup_policy=("compact",)))
    await fill(log, 3)
    with pytest.raises(PolicyViolationError):
        await move_start(log, 2)
    # A follower copying its leader's start offset is not a client deletion.
    assert await move_start(log, 2, StartOffsetReason.LEADER_OFFSET_INCREMENTED) == 2


async def test_truncate_to(tmp_path: Path) -> None:
    log = new_log(tmp_path)
    await fill(log, 60)
    assert await log.truncate_to(200) is False
    assert await log.truncate_to(51) is True  # batch 50..51 goes whole
    assert log.log_end_offset == 50 and log.high_watermark == 50
    assert log.epoch_cache.entries() == [(3, 0)]
    await settle(log.io)
    assert batches_of(log.read(0, 10**6).read_bytes())[-1][1] == 49
    info = await log.append(batch(1), leader_epoch=4)
    assert info.first_offset == 50
    assert log.segments[-1].base_offset <= 50
    # Data on disk after a truncation and an append matches a fresh scan.
    reloaded, report = load_partition_log(log.directory, SMALL, recovery_point=0)
    assert reloaded.log_end_offset == 51 and report.truncated_bytes == 0
    reloaded.abandon()


async def test_reading_on_from_where_a_read_stopped(tmp_path: Path) -> None:
    """A segment remembers where its last read stopped (a consumer's next fetch starts there); the
    memory must answer as the index and header walk would, and must not survive a truncation that
    rewrote the file from there on."""
    log = new_log(tmp_path)
    await fill(log, 10, records=3)  # batches 0..2, 3..5, ...
    one = len(batch(3))
    first = log.read(0, 2 * one)
    assert (batches_of(first.read_bytes())[-1][1], first.next_offset) == (5, 6)
    resumed = log.read(first.next_offset, one)
    assert batches_of(resumed.read_bytes()) == batches_of(log.read(7, one).read_bytes())
    assert batches_of(resumed.read_bytes())[0][:2] == (6, 8)
    stopped = log.read(0, 3 * one)  # stops at offset 9, the batch 9..11
    assert stopped.next_offset == 9
    assert await log.truncate_to(7) is True  # batches from 6..8 on go; 6.. is written again, smaller
    await log.append(batch(1) + batch(1) + batch(5), leader_epoch=4)  # 6, 7, 8..12
    log.update_high_watermark(log.log_end_offset)
    again = log.read(9, 10**6)
    assert [b[:2] for b in batches_of(again.read_bytes())] == [(8, 12)]
    assert log.read(stopped.next_offset, 10**6).slices == again.slices


class FileReads:
    """The reads a segment read makes of its file, through the Python twin (broker/log/batch_read.py, its
    preads seen one by one) or the compiled one (broker/log/_batch_read.c, counted by the kernel for this
    thread: /proc/thread-self/io, less what reading that file costs)."""

    def __init__(self, twin: str, monkeypatch) -> None:
        self.twin = twin
        self.sizes: list[int] = []  # the Python twin's, each pread's size
        if twin == "python":
            monkeypatch.setattr(segment_module, "compiled_read_batches", None)
            real = os.pread
            monkeypatch.setattr(os, "pread", lambda fd, size, position: self.sizes.append(size)
                                or real(fd, size, position))
        else:
            assert segment_module.compiled_read_batches is not None  # built by make test's pip install -e .
            first, second = self._counters(), self._counters()
            self._overhead = (second[0] - first[0], second[1] - first[1])

    @staticmethod
    def _counters() -> tuple[int, int]:
        with open("/proc/thread-self/io", "rb") as f:
            fields = dict(line.split(b": ") for line in f.read().splitlines())
        return int(fields[b"syscr"]), int(fields[b"rchar"])

    def during(self, read):
        """(reads, bytes read) while `read()` ran, and what it returned."""
        if self.twin == "python":
            self.sizes.clear()
            got = read()
            return (len(self.sizes), sum(self.sizes)), got
        before = self._counters()
        got = read()
        after = self._counters()
        return (after[0] - before[0] - self._overhead[0], after[1] - before[1] - self._overhead[1]), got


@pytest.mark.parametrize("twin", ["compiled", "python"])
async def test_a_read_that_stopped_before_a_batch_keeps_its_header_for_the_next(tmp_path: Path, monkeypatch,
                                                                                twin: str) -> None:
    """The walk that found where a read stops has read the next batch's header: the consumer's next
    read starts there without reading its header (one pread per partition fewer), with the
    same answer as a segment that remembers nothing."""
    log = new_log(tmp_path)
    await fill(log, 10, records=3)
    one = len(batch(3))
    first = log.read(0, 2 * one)
    assert first.next_offset == 6
    kept = log.segments[0]._resume  # the segment holding offset 6
    assert kept[0] == 6 and kept[2] is not None
    reads = FileReads(twin, monkeypatch)
    (count, _), resumed = reads.during(lambda: log.read(6, 2 * one))
    assert count == 1  # the walk to where it stops; the first batch's header was kept
    assert [b[:2] for b in batches_of(resumed.read_bytes())] == [(6, 8), (9, 11)]
    log.segments[0]._resume = (kept[0], kept[1], None)
    (count, _), again = reads.during(lambda: log.read(6, 2 * one))
    assert count == 2 and again.slices == resumed.slices  # without it, its header is read too
    for segment in log.segments:
        segment._resume = (-1, -1, None)
    assert log.read(6, 2 * one).slices == resumed.slices
    whole = log.read(12, 10**6)  # runs to the end of the log: no header past it is kept
    assert whole.next_offset == 30
    await fill(log, 1, records=3)  # the batch 30..32, appended where that read stopped
    (count, size), tail = reads.during(lambda: log.read(30, 10**6))
    assert [b[:2] for b in batches_of(tail.read_bytes())] == [(30, 32)]
    assert (count, size) == (1, BATCH_HEADER_SIZE)  # its header read from the file, alone


@pytest.mark.parametrize("twin", ["compiled", "python"])
async def test_reading_on_through_large_batches_reads_their_headers_alone(tmp_path: Path, monkeypatch,
                                                                          twin: str) -> None:
    """Batches larger than the index interval are each indexed, so the walk that finds where a read
    stops needs the header of one batch: it reads that header alone, not a window of the records
    behind it (librdkafka's 1 MB batches cost a 16 KiB copy per partition per Fetch that way). The
    answers stay those of a segment that remembers nothing."""
    log = new_log(tmp_path, replace(SMALL, segment_bytes=10**7, index_interval_bytes=4096))
    value = b"v" * 30_000
    for i in range(6):
        await log.append(batch(2, timestamp=1000 + i, value=value), leader_epoch=3)
    log.update_high_watermark(log.log_end_offset)
    one = len(batch(2, value=value))
    assert log.read(0, one + one // 2).next_offset == 2
    file_reads = FileReads(twin, monkeypatch)
    reads = []
    for offset in (2, 4, 6, 8):
        (count, size), read = file_reads.during(lambda offset=offset: log.read(offset, one + one // 2))
        assert count and size <= count * BATCH_HEADER_SIZE  # headers alone
        reads.append(read)
    monkeypatch.undo()
    assert [r.next_offset for r in reads] == [4, 6, 8, 10]
    for segment in log.segments:
        segment._resume = (-1, -1, None)
    assert [log.read(offset, one + one // 2).slices for offset in (2, 4, 6, 8)] == [r.slices for r in reads]
    two = log.read(0, 2 * one + one // 2)  # a walk past one fitting batch: still right
    assert [b[:2] for b in batches_of(two.read_bytes())] == [(0, 1), (2, 3)] and two.next_offset == 4


async def test_truncate_fully_and_start_at(tmp_path: Path) -> None:
    log = new_log(tmp_path)
    await fill(log, 10)
    await log.truncate_fully_and_start_at(500)
    assert (log.log_start_offset, log.high_watermark, log.log_end_offset) == (500, 500, 500)
    assert [s.base_offset for s in log.segments] == [500]
    info = await log.append(batch(1))
    assert info.first_offset == 500
    await settle(log.io)
    assert [n for n in files(log.directory) if n.endswith(".log")] == ["00000000000000000500.log"]


async def test_roll_on_segment_ms(tmp_path: Path) -> None:
    clock = FakeClock()
    log = new_log(tmp_path, replace(SMALL, segment_ms=1000), clock)
    await log.append(batch(1, timestamp=50_000))
    await log.append(batch(1, timestamp=50_900))
    assert len(log.segments) == 1
    await log.append(batch(1, timestamp=51_001))  # more than segment.ms after the first batch
    assert len(log.segments) == 2
    await log.append(batch(1, timestamp=-1))  # no timestamps: time since the segment was created
    clock.now += 1001
    await log.append(batch(1, timestamp=-1))
    assert len(log.segments) == 3


async def test_roll_comes_its_jitter_before_segment_ms(tmp_path: Path) -> None:
    log = new_log(tmp_path, replace(SMALL, segment_ms=1000, segment_jitter_ms=5000), FakeClock())
    jitter = log.segments[-1].roll_jitter_ms
    assert 0 <= jitter < 1000  # drawn below segment.jitter.ms and below segment.ms
    await log.append(batch(1, timestamp=50_000))
    await log.append(batch(1, timestamp=50_000 + 1000 - jitter))  # not more than segment.ms - jitter
    assert len(log.segments) == 1
    await log.append(batch(1, timestamp=50_000 + 1000 - jitter + 1))
    assert len(log.segments) == 2
    assert 0 <= log.segments[-1].roll_jitter_ms < 1000  # the new segment draws its own


def test_segment_jitter_is_drawn_below_both_bounds() -> None:
    assert replace(SMALL, segment_jitter_ms=0).random_segment_jitter() == 0
    draws = {replace(SMALL, segment_ms=3, segment_jitter_ms=10).random_segment_jitter() for _ in range(200)}
    assert draws == {0, 1, 2}
    assert all(0 <= replace(SMALL, segment_ms=10_000, segment_jitter_ms=7).random_segment_jitter() < 7
               for _ in range(200))


async def test_flush_moves_recovery_point_and_writes_indexes(tmp_path: Path) -> None:
    log = new_log(tmp_path)
    await fill(log, 5)
    assert log.recovery_point == 0
    await log.flush()
    assert log.recovery_point == 10
    segment = log.segments[-1]
    assert segment.index.path.stat().st_size == len(segment.index) * 8
    assert (log.directory / "leader-epoch-checkpoint").read_text() == "0\n1\n3 0\n"


async def test_flush_messages_one(tmp_path: Path) -> None:
    log = new_log(tmp_path, replace(SMALL, flush_messages=1))
    await log.append(batch(3))
    assert log.recovery_point == 3
    await log.append(batch(1))
    assert log.recovery_point == 4


async def test_roll_flushes_the_finished_segment(tmp_path: Path) -> None:
    log = new_log(tmp_path)
    await fill(log, 30)
    await settle(log.io)
    assert len(log.segments) > 1
    assert log.recovery_point >= log.segments[-1].base_offset
    await log.close()


async def test_close_seals_the_max_timestamp_into_the_time_index(tmp_path: Path) -> None:
    log = new_log(tmp_path)
    for ts in (50, 900, 10):  # the max is not in a sparse entry: too few bytes for one
        await log.append(batch(1, timestamp=ts))
    await log.close()
    active = log.segments[-1]
    assert active.time_index.path.read_bytes() == struct.pack(">qi", 900, 1)
    reopened, report = load_partition_log(log.directory, SMALL, recovery_point=3, clean=True)
    assert report.recovered_segments == []
    assert (reopened.segments[-1].max_timestamp, reopened.segments[-1].offset_of_max_timestamp) == (900, 1)
    reopened.abandon()


async def test_flush_ms_through_the_manager(tmp_path: Path) -> None:
    clock = FakeClock()
    manager = await open_manager(tmp_path, replace(SMALL, flush_ms=1000), clock=clock)
    log = await manager.get_or_create_log(TopicPartition("flushed", 0))
    await log.append(batch(2))
    await manager.flush_due_logs()
    assert log.recovery_point == 0
    clock.now += 1000
    await manager.flush_due_logs()
    assert log.recovery_point == 2
    await manager.shutdown()


async def test_offset_for_timestamp_finds_the_record_inside_a_batch(tmp_path: Path) -> None:
    log = new_log(tmp_path)
    # one batch, out-of-order timestamps: ListOffsets answers with the first record at or after t
    await log.append(build_batch([(b"k", b"v", [], ts) for ts in (100, 300, 200, 400)]), leader_epoch=1)
    log.update_high_watermark(log.log_end_offset)
    assert ts_offset(log.offset_for_timestamp(150)) == (300, 1)
    assert ts_offset(log.offset_for_timestamp(300)) == (300, 1)
    assert ts_offset(log.offset_for_timestamp(301)) == (400, 3)
    assert ts_offset(log.offset_for_timestamp(SpecialTimestamp.MAX_TIMESTAMP)) == (400, 3)
    await move_start(log, 2)
    assert ts_offset(log.offset_for_timestamp(150)) == (200, 2)  # never below the log start offset


async def test_a_flush_after_its_segment_was_deleted_leaves_no_index_file(tmp_path: Path, monkeypatch) -> None:
    """Over months every roll queues a flush of the finished segment; when retention or a deletion
    renames that segment away before the flush runs, the flush must not create its index files again
    under the old names (they were never removed while the broker ran: one orphan per such race)."""
    gate = threading.Event()
    original = log_state.sync_to_disk

    def held(*args: object) -> None:
        gate.wait(10)
        original(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(log_state, "sync_to_disk", held)
    log = new_log(tmp_path)
    for _ in range(20):
        gate.clear()
        segments = len(log.segments)
        while len(log.segments) == segments:  # a roll: its flush of the finished segment is spawned
            await log.append(batch(2))
        log.update_high_watermark(log.log_end_offset)
        for _ in range(3):  # the flush prepares its index writes and waits in the pool
            await asyncio.sleep(0)
        await move_start(log, log.log_end_offset)  # the finished segment renamed and removed
        gate.set()
        await settle(log.io)
    names = files(log.directory)
    logs = {name.split(".")[0] for name in names if name.endswith(".log")}
    orphans = [name for name in names if name.endswith(("index", ".txnindex")) and name.split(".")[0] not in logs]
    assert orphans == []
    await log.close()
