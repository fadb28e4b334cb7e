"""The log cleaner on real segment files: what a round keeps (checked against a model of Kafka's
rules), the batch headers it writes, tombstone horizons, the lag and ratio settings, the key map bound,
the checkpoint, and finishing an interrupted swap at the next start."""

from __future__ import annotations

import os
import random
from dataclasses import replace
from pathlib import Path

import pytest

from broker.config import ConfigError, known_broker_properties, load_config
from broker.log import InvalidRecordError, LogConfig, LogManagerConfig, ReadBound, TopicPartition
from broker.log.cleaner import CLEANED_SUFFIX, SWAP_SUFFIX, CleaningError, clean_group, plan
from broker.log.cleaner_manager import CLEANER_OFFSET_CHECKPOINT
from broker.log.free_space import LowDiskSpaceError
from broker.log.offset_map import ENTRY_BYTES, KeyOffsetMap
from broker.log.segment_file import CorruptSegmentError
from protocol.errors import ErrorCode
from protocol.records import Compression, RecordBatch, build_batch, iter_batches
from tests.broker.test_log_support import QUIET, FakeClock, open_manager, settle

TP = TopicPartition("facts", 0)
COMPACT = LogConfig(segment_bytes=2048, index_interval_bytes=200, file_delete_delay_ms=0, retention_ms=-1,
                    cleanup_policy=("compact",), min_cleanable_dirty_ratio=0.0)
DAY = 24 * 3600 * 1000


def keyed(pairs: list[tuple[bytes | None, bytes | None]], timestamp: int = 1_000, **kwargs) -> bytes:
    return build_batch([(k, v, [("h", b"x")], timestamp) for k, v in pairs], **kwargs)


def read_all(log) -> list[RecordBatch]:
    data = bytearray()
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        found = log.read(offset, 1 << 20, bound=ReadBound.LOG_END)
        chunk = found.read_bytes()
        if not chunk:
            break
        data += chunk
        offset = found.next_offset
    return list(iter_batches(bytes(data)))


def records(log) -> list[tuple[int, bytes | None, bytes | None]]:
    return [(r.offset, r.key, r.value) for b in read_all(log) for r in b.records()]


async def filled_log(manager, pairs_per_batch: list[list[tuple[bytes | None, bytes | None]]], **kwargs):
    log = await manager.get_or_create_log(TP)
    for pairs in pairs_per_batch:
        await log.append(keyed(pairs, **kwargs), leader_epoch=2)
    log.update_high_watermark(log.log_end_offset)
    return log


def expected_after_first_round(written: list[tuple[int, bytes, bytes | None]], end: int):
    """Kafka's rule for a round starting at offset 0: below `end` only the latest record of each key stays
    (tombstones too, on a first cleaning); from `end` on everything stays."""
    latest = {}
    for offset, key, _ in written:
        if offset < end:
            latest[key] = offset
    return [(o, k, v) for o, k, v in written if o >= end or latest[k] == o]


async def test_a_round_keeps_the_latest_record_of_each_key_and_valid_batches(tmp_path: Path) -> None:
    rng = random.Random(7)
    manager = await open_manager(tmp_path, COMPACT)
    batches = [[(b"key-%d" % rng.randrange(20), None if rng.random() < 0.1 else b"value-%d" % i)
                for _ in range(rng.randrange(1, 5))] for i in range(120)]
    log = await filled_log(manager, batches)
    written = records(log)
    originals = {(b.base_offset, b.last_offset) for b in read_all(log)}
    assert len(log.segments) > 5
    assert await manager.cleaner.clean_filthiest()
    end = manager.cleaner._first_dirty[TP]
    assert end == log.segments[-1].base_offset  # everything below the active segment was cleaned
    assert records(log) == expected_after_first_round(written, end)
    for b in read_all(log):
        assert b.crc_valid()
        # base and last offsets stay as written: the last sequence of a producer stays derivable
        assert (b.base_offset, b.last_offset) in originals
    text = (tmp_path / CLEANER_OFFSET_CHECKPOINT).read_text()
    assert text == f"0\n1\nfacts 0 {end}\n"
    assert not [n for n in os.listdir(log.directory) if n.endswith((CLEANED_SUFFIX, SWAP_SUFFIX))]
    # a restart reads what the cleaner left, indexes included
    await manager.shutdown()
    manager = await open_manager(tmp_path, COMPACT)
    assert records(manager.get_log(TP)) == expected_after_first_round(written, end)
    assert manager.cleaner._first_dirty[TP] == end
    await manager.shutdown()


async def test_reads_and_timestamps_work_across_the_gaps(tmp_path: Path) -> None:
    manager = await open_manager(tmp_path, COMPACT)
    pairs = [[(b"a", b"%d" % i), (b"b", b"%d" % i)] for i in range(60)]
    log = await manager.get_or_create_log(TP)
    for i, batch_pairs in enumerate(pairs):
        await log.append(keyed(batch_pairs, timestamp=10_000 + i), leader_epoch=0)
    log.update_high_watermark(log.log_end_offset)
    await manager.cleaner.clean_filthiest()
    survivors = records(log)
    first_kept = survivors[0][0]
    assert first_kept > 0
    found = log.read(1, 1 << 20, bound=ReadBound.LOG_END)  # inside a gap: the next batch comes back
    assert next(iter_batches(found.read_bytes())).last_offset >= first_kept
    at = log.offset_for_timestamp(10_000)  # the earliest surviving record at or after it
    assert at is not None and at.offset == first_kept
    await manager.shutdown()


async def test_tombstones_stay_until_their_delete_horizon_then_go(tmp_path: Path) -> None:
    clock = FakeClock()
    config = replace(COMPACT, delete_retention_ms=DAY)
    manager = await open_manager(tmp_path, config, clock=clock)
    log = await filled_log(manager, [[(b"gone", b"v1")], [(b"gone", None)]] + [[(b"k%d" % i, b"x" * 200)]
                                                                                for i in range(30)])
    await manager.cleaner.clean_filthiest()
    assert (1, b"gone", None) in records(log)
    tomb = next(b for b in read_all(log) if b.base_offset == 1)
    assert tomb.delete_horizon_ms == clock.now + DAY  # KIP-534: the horizon is in the batch
    assert [r.timestamp for r in tomb.records()] == [1_000]  # record timestamps survive the new base
    clock.now += DAY - 1
    for i in range(30):  # more dirty data for another round
        await log.append(keyed([(b"m%d" % i, b"y" * 200)]), leader_epoch=2)
    log.update_high_watermark(log.log_end_offset)
    await manager.cleaner.clean_filthiest()
    assert (1, b"gone", None) in records(log)
    clock.now += 1
    for i in range(30):
        await log.append(keyed([(b"n%d" % i, b"z" * 200)]), leader_epoch=2)
    log.update_high_watermark(log.log_end_offset)
    await manager.cleaner.clean_filthiest()
    assert all(key != b"gone" for _, key, _ in records(log))
    await manager.shutdown()


@pytest.mark.parametrize("codec", [Compression.GZIP, Compression.SNAPPY, Compression.LZ4, Compression.ZSTD])
async def test_rebuilt_batches_keep_their_codec(tmp_path: Path, codec: Compression) -> None:
    manager = await open_manager(tmp_path, COMPACT)
    batches = [[(b"k%d" % (i % 3), b"v%d" % i), (b"u%d" % i, b"w" * 300)] for i in range(30)]
    log = await filled_log(manager, batches, compression=codec)
    await manager.cleaner.clean_filthiest()
    rebuilt = [b for b in read_all(log) if b.records_count == 1 and b.base_offset < 40]
    assert rebuilt and all(b.compression == codec and b.crc_valid() for b in rebuilt)
    assert all(b.last_offset_delta == 1 for b in rebuilt)  # the original last offset is kept
    await manager.shutdown()


async def test_a_producers_last_batch_stays_as_an_empty_batch(tmp_path: Path) -> None:
    manager = await open_manager(tmp_path, COMPACT)
    log = await manager.get_or_create_log(TP)
    await log.append(keyed([(b"k", b"old")], producer_id=42, producer_epoch=3, base_sequence=0), leader_epoch=1)
    await log.append(keyed([(b"k", b"new")]), leader_epoch=1)
    for i in range(30):
        await log.append(keyed([(b"f%d" % i, b"x" * 200)]), leader_epoch=1)
    log.update_high_watermark(log.log_end_offset)
    manager.cleaner.producer_last_offsets = lambda tp: {42: 0}
    await manager.cleaner.clean_filthiest()
    empty = read_all(log)[0]
    assert (empty.base_offset, empty.last_offset, empty.records_count) == (0, 0, 0)
    assert (empty.producer_id, empty.producer_epoch, empty.base_sequence) == (42, 3, 0)
    assert empty.crc_valid() and empty.partition_leader_epoch == 1
    await manager.shutdown()


async def test_min_compaction_lag_holds_recent_segments_back(tmp_path: Path) -> None:
    clock = FakeClock(1_000_000)
    manager = await open_manager(tmp_path, replace(COMPACT, min_compaction_lag_ms=2000), clock=clock)
    log = await manager.get_or_create_log(TP)
    for i in range(40):  # timestamps 996_000 .. 999_900: the newest are younger than the lag
        await log.append(keyed([(b"k", b"x" * 200)], timestamp=996_000 + i * 100), leader_epoch=0)
    log.update_high_watermark(log.log_end_offset)
    chosen = manager.cleaner.filthiest()
    young = next(s for s in log.segments if s.max_timestamp > clock.now - 2000)
    assert young is not log.segments[-1]
    assert chosen is not None and chosen.first_uncleanable_offset == young.base_offset
    await manager.cleaner.clean_filthiest()
    assert [o for o, _, _ in records(log) if o < young.base_offset] == [young.base_offset - 1]
    await manager.shutdown()


async def test_dirty_ratio_and_max_compaction_lag(tmp_path: Path) -> None:
    clock = FakeClock(10 * DAY)
    config = replace(COMPACT, min_cleanable_dirty_ratio=0.99, max_compaction_lag_ms=DAY)
    manager = await open_manager(tmp_path, config, clock=clock)
    log = await manager.get_or_create_log(TP)
    for i in range(40):
        await log.append(keyed([(b"k%d" % i, b"x" * 200)], timestamp=10 * DAY), leader_epoch=0)
    log.update_high_watermark(log.log_end_offset)
    await manager.cleaner.clean_filthiest()
    for i in range(3):  # a little more: dirty, but far below the ratio
        await log.append(keyed([(b"k%d" % i, b"y" * 200)], timestamp=10 * DAY), leader_epoch=0)
    for i in range(12):
        await log.append(keyed([(b"z%d" % i, b"y" * 200)], timestamp=10 * DAY), leader_epoch=0)
    log.update_high_watermark(log.log_end_offset)
    assert manager.cleaner.filthiest() is None
    clock.now += DAY + 1  # the dirty records are now older than max.compaction.lag.ms
    chosen = manager.cleaner.filthiest()
    assert chosen is not None and chosen.needs_compaction_now
    await manager.shutdown()


async def test_small_segments_are_merged_up_to_segment_bytes(tmp_path: Path) -> None:
    manager = await open_manager(tmp_path, COMPACT)
    log = await filled_log(manager, [[(b"same", b"v" * 100)] for _ in range(80)])
    await manager.cleaner.clean_filthiest()  # groups follow the sizes before cleaning: one per segment
    after_first = len(log.segments)
    assert sum(s.size for s in log.segments[:-1]) < 200
    for _ in range(30):
        await log.append(keyed([(b"same", b"w" * 100)]), leader_epoch=2)
    log.update_high_watermark(log.log_end_offset)
    await manager.cleaner.clean_filthiest()  # now the emptied segments merge into one
    assert len(log.segments) < after_first
    assert all(s.size <= COMPACT.segment_bytes for s in log.segments)
    kept = records(log)
    assert [o for o, _, _ in kept if o < log.segments[-1].base_offset] == [log.segments[-1].base_offset - 1]
    await manager.shutdown()


async def test_a_full_key_map_ends_the_round_early_and_the_next_one_goes_on(tmp_path: Path) -> None:
    small_map = LogManagerConfig(io_threads=2, cleaner_dedupe_buffer_size=ENTRY_BYTES * 12,
                                 cleaner_io_buffer_load_factor=1.0)
    manager = await open_manager(tmp_path, COMPACT, manager_config=small_map)
    batches = [[(b"k%d" % i, b"x" * 100)] for i in range(40)]
    log = await filled_log(manager, batches)
    await manager.cleaner.clean_filthiest()
    first_end = manager.cleaner._first_dirty[TP]
    assert 0 < first_end < log.segments[-1].base_offset
    await manager.cleaner.clean_filthiest()
    assert manager.cleaner._first_dirty[TP] > first_end
    assert len(records(log)) == 40  # distinct keys: nothing to drop, nothing lost
    await manager.shutdown()


def test_key_map_is_bounded() -> None:
    key_map = KeyOffsetMap(2)
    key_map.put(b"a", 1)
    key_map.put(b"a", 3)
    assert len(key_map) == 1 and key_map.get(b"a") == 3 and key_map.get(b"b") == -1 and not key_map.full
    key_map.put(b"b", 4)
    assert key_map.full and key_map.latest_offset == 4
    with pytest.raises(ValueError):
        KeyOffsetMap(0)


async def test_keyless_records_are_refused_on_a_compacted_topic(tmp_path: Path) -> None:
    manager = await open_manager(tmp_path, COMPACT)
    log = await manager.get_or_create_log(TP)
    with pytest.raises(InvalidRecordError) as refused:
        await log.append(keyed([(b"k", b"v"), (None, b"v"), (None, b"w")]), leader_epoch=0)
    error = refused.value
    assert error.error_code == ErrorCode.INVALID_RECORD
    why = "Compacted topic cannot accept message without key in topic partition facts-0"
    assert error.record_errors == [(1, why), (2, why)]
    assert error.message == ("One or more records have been rejected due to 2 record errors in total, and only "
                             f"showing the first three errors at most: [RecordError(batchIndex=1, message='{why}'), "
                             f"RecordError(batchIndex=2, message='{why}')]")
    assert log.log_end_offset == 0
    await log.append(keyed([(None, b"v")]), leader_epoch=0, assign_offsets=False)  # replication is not checked
    await manager.shutdown()


async def _cleaned_but_not_swapped(tmp_path: Path):
    """A log and the `.cleaned` segment of its first group, written but not swapped in."""
    manager = await open_manager(tmp_path, COMPACT)
    log = await filled_log(manager, [[(b"same", b"v%d" % i + b"x" * 100)] for i in range(60)])
    written = records(log)
    chosen = manager.cleaner.filthiest()
    from broker.log.cleaner import CleaningJob, SegmentView

    views = tuple(SegmentView.of(s) for s in log.segments[:-1])
    job = CleaningJob(TP, log.directory, views, chosen.first_dirty_offset, chosen.first_uncleanable_offset,
                      manager.clock(), COMPACT.delete_retention_ms, COMPACT.segment_bytes, COMPACT.segment_index_bytes,
                      COMPACT.index_interval_bytes, 4096, {})
    key_map = KeyOffsetMap(1000)
    round_plan = plan(job, key_map)
    cleaned = clean_group(job, round_plan, round_plan.groups[0], key_map)
    cleaned.close()
    await manager.shutdown()
    return log.directory, written, round_plan


async def test_a_stop_before_the_swap_drops_the_cleaned_files(tmp_path: Path) -> None:
    directory, written, _ = await _cleaned_but_not_swapped(tmp_path)
    assert any(n.endswith(".log" + CLEANED_SUFFIX) for n in os.listdir(directory))
    manager = await open_manager(tmp_path, COMPACT)
    assert records(manager.get_log(TP)) == written
    assert not [n for n in os.listdir(directory) if n.endswith(CLEANED_SUFFIX)]
    await manager.shutdown()


@pytest.mark.parametrize("old_renamed", [False, True])
async def test_a_stop_during_the_swap_finishes_it(tmp_path: Path, old_renamed: bool) -> None:
    directory, written, round_plan = await _cleaned_but_not_swapped(tmp_path)
    group = round_plan.groups[0]
    for name in os.listdir(directory):
        if name.endswith(CLEANED_SUFFIX):
            os.rename(directory / name, directory / name.replace(CLEANED_SUFFIX, SWAP_SUFFIX))
    if old_renamed:  # the old segments already went to `.deleted`, and the `.log` of the new one is in place
        for view in group:
            for suffix in (".log", ".index", ".timeindex"):
                path = directory / f"{view.base_offset:020d}{suffix}"
                os.rename(path, str(path) + ".deleted")
        base = f"{group[0].base_offset:020d}"
        os.rename(directory / f"{base}.log{SWAP_SUFFIX}", directory / f"{base}.log")
    manager = await open_manager(tmp_path, COMPACT)
    log = manager.get_log(TP)
    # one key only: the first group (one segment) kept nothing, the rest is as written
    assert len(group) == 1 and round_plan.end_offset > group[-1].next_offset
    assert records(log) == [r for r in written if r[0] >= group[-1].next_offset]
    assert not [n for n in os.listdir(directory) if n.endswith((SWAP_SUFFIX, CLEANED_SUFFIX, ".deleted"))]
    await settle()
    await manager.shutdown()


def test_cleaner_settings_have_kafkas_names_and_defaults() -> None:
    config = LogManagerConfig.from_properties({"log.cleaner.threads": "2", "log.cleaner.io.buffer.load.factor": "0.5"})
    assert (config.cleaner_threads, config.cleaner_io_buffer_load_factor) == (2, 0.5)
    defaults = LogManagerConfig()
    assert (defaults.cleaner_enable, defaults.cleaner_dedupe_buffer_size, defaults.cleaner_io_buffer_size,
            defaults.cleaner_backoff_ms) == (True, 128 * 1024 * 1024, 512 * 1024, 15_000)
    assert QUIET.cleaner_enable


@pytest.mark.parametrize(("setting", "problem"), [
    ("log.cleaner.io.max.bytes.per.second=0", "must be above 0"),
    ("log.cleaner.dedupe.buffer.size=100", "too small to hold a single key"),
    ("log.cleaner.threads=0", "below the minimum 1"),
    ("log.cleaner.io.buffer.load.factor=1.5", "at most 1"),
])
def test_cleaner_settings_ebb_cannot_honour_stop_start_up(tmp_path: Path, setting: str, problem: str) -> None:
    with pytest.raises(ConfigError, match=problem) as refused:
        load_config(None, [f"log.dirs={tmp_path}", setting])
    assert setting.split("=")[0] in str(refused.value)
    described = known_broker_properties(load_config(None, [f"log.dirs={tmp_path}"]))
    assert described["log.cleaner.io.max.bytes.per.second"] == "1.7976931348623157E308"  # as Kafka lists it


async def test_a_log_with_nothing_dirty_below_the_high_watermark_is_left_alone(tmp_path: Path) -> None:
    manager = await open_manager(tmp_path, COMPACT)
    log = await manager.get_or_create_log(TP)
    for _ in range(30):
        await log.append(keyed([(b"k", b"x" * 200)]), leader_epoch=0)
    log.update_high_watermark(0)  # nothing replicated yet: nothing may be cleaned
    assert manager.cleaner.filthiest() is None
    assert not await manager.cleaner.clean_filthiest()
    log.update_high_watermark(log.log_end_offset)
    assert await manager.cleaner.clean_filthiest()
    await manager.shutdown()


@pytest.mark.parametrize("codec", list(Compression))
def test_the_key_check_reads_keys_as_the_record_decoder_does(codec: Compression) -> None:
    from broker.log.compacted_keys import _keyless_records

    rng = random.Random(int(codec))
    for _ in range(20):
        pairs = [(None if rng.random() < 0.3 else os.urandom(rng.randrange(0, 300)),
                  None if rng.random() < 0.2 else os.urandom(rng.randrange(0, 3000)))
                 for _ in range(rng.randrange(1, 40))]
        batch = RecordBatch(keyed(pairs, compression=codec))
        decoded = [i for i, r in enumerate(batch.records()) if r.key is None]
        assert _keyless_records(bytes(batch.body()), batch.records_count) == decoded
    with pytest.raises(InvalidRecordError) as broken:  # a record claiming more bytes than the batch holds
        from broker.log.compacted_keys import refuse_keyless_records

        data = bytearray(keyed([(b"k", b"v")]))
        data[61] = 0x7E  # the first record's length varint: 63 bytes
        refuse_keyless_records(data, [0], TP)
    # Kafka's record iterator throws InvalidRecordException: INVALID_RECORD (decompression_bombs in
    # tests/differential/test_produce_validation_against_kafka.py has Kafka answer it on a compacted topic)
    assert broken.value.error_code == ErrorCode.INVALID_RECORD


@pytest.mark.parametrize("seed", range(4))
async def test_rounds_over_time_match_a_model_of_kafkas_rules(tmp_path: Path, seed: int) -> None:
    """Appends, clock steps and rounds at random; after each round the log holds what Kafka's rules
    leave: below the round's end the latest record of each key, a tombstone only until the delete
    horizon its batch got in the first round that kept it; everything from the end on."""
    rng = random.Random(seed)
    clock = FakeClock(10**12)
    manager = await open_manager(tmp_path, replace(COMPACT, delete_retention_ms=1000), clock=clock)
    log = await manager.get_or_create_log(TP)
    model: dict[int, tuple[bytes, bytes | None, int]] = {}  # offset -> key, value, batch number
    horizons: dict[int, int] = {}
    expired_tombstones = 0
    for batch_number in range(400):
        pairs = [(b"k%d" % rng.randrange(40), None if rng.random() < 0.25 else b"v%d" % batch_number + b"x" * 60)
                 for _ in range(rng.randrange(1, 4))]
        appended = await log.append(keyed(pairs), leader_epoch=0)
        for i, (key, value) in enumerate(pairs):
            model[appended.first_offset + i] = (key, value, batch_number)
        if rng.random() > 0.08:
            continue
        log.update_high_watermark(log.log_end_offset)
        clock.now += rng.choice([0, 300, 700, 1500, 3000])
        if not await manager.cleaner.clean_filthiest():
            continue
        end = manager.cleaner._first_dirty[TP]
        latest = {key: offset for offset, (key, _, _) in sorted(model.items()) if offset < end}
        kept_tombstone_batches = set()
        for offset, (key, value, number) in sorted(model.items()):
            if offset >= end:
                continue
            expired = value is None and number in horizons and clock.now >= horizons[number]
            expired_tombstones += expired and latest[key] == offset
            if latest[key] != offset or expired:
                del model[offset]
            elif value is None:
                kept_tombstone_batches.add(number)
        for number in kept_tombstone_batches:
            horizons.setdefault(number, clock.now + 1000)
        assert records(log) == [(offset, key, value) for offset, (key, value, _) in sorted(model.items())]
        assert all(b.crc_valid() for b in read_all(log))
    assert expired_tombstones and len(model) < log.log_end_offset  # the run dropped records and tombstones
    await manager.shutdown()


@pytest.mark.parametrize("recreate", [False, True])
async def test_a_round_whose_log_is_deleted_before_the_swap_leaves_the_new_log_alone(
        tmp_path: Path, recreate: bool) -> None:
    import broker.log.cleaner_manager as cleaner_manager

    manager = await open_manager(tmp_path, COMPACT)
    old = await filled_log(manager, [[(b"same", b"v%d" % i + b"x" * 100)] for i in range(60)])
    old_segments = list(old.segments)
    new_log = None
    new_written: list = []
    new_files: list[str] = []
    real_open_cleaned = cleaner_manager.open_cleaned

    async def open_then_delete(*args):  # the topic goes (and comes back) while the `.cleaned` file opens
        nonlocal new_log, new_written, new_files
        opened = real_open_cleaned(*args)
        assert await manager.delete_log(TP)
        if recreate:
            new_log = await filled_log(manager, [[(b"same", b"new%d" % i + b"y" * 100)] for i in range(40)])
            new_written = records(new_log)
            await new_log.flush()  # its files settled: a flush after a roll may still be writing a checkpoint
            new_files = sorted(os.listdir(new_log.directory))
        return opened

    real_run = manager.cleaner._io.run

    async def run(fn, *args):
        if fn is real_open_cleaned:
            return await open_then_delete(*args)
        return await real_run(fn, *args)

    manager.cleaner._io.run = run
    assert await manager.cleaner.clean_filthiest()
    manager.cleaner._io.run = real_run
    assert list(old.segments) == old_segments  # the deleted log was not swapped into
    assert TP not in manager.cleaner._first_dirty and TP not in manager.cleaner._uncleanable
    assert manager.cleaner.rounds == 0 and not manager.health.failed  # nor the log dir failed
    if recreate:
        assert manager.get_log(TP) is new_log
        assert records(new_log) == new_written
        await new_log.flush()
        assert sorted(os.listdir(new_log.directory)) == new_files
    await manager.shutdown()


@pytest.mark.parametrize(("error", "uncleanable"), [
    (FileNotFoundError(2, "retention removed a segment mid-round"), False),
    (LowDiskSpaceError("the log dir is out of space"), False),
    (CleaningError("a batch is not well-formed"), True),
    (CorruptSegmentError("the file changed underneath"), True),
])
async def test_only_corrupt_data_leaves_a_log_uncleanable(tmp_path: Path, monkeypatch, error: Exception,
                                                         uncleanable: bool) -> None:
    import broker.log.cleaner_manager as cleaner_manager

    manager = await open_manager(tmp_path, COMPACT)
    await filled_log(manager, [[(b"same", b"v%d" % i + b"x" * 100)] for i in range(60)])
    real_begin_round = cleaner_manager.begin_round

    def failing_begin_round(*args):
        raise error

    monkeypatch.setattr(cleaner_manager, "begin_round", failing_begin_round)
    assert await manager.cleaner.clean_filthiest()
    assert (TP in manager.cleaner._uncleanable) == uncleanable
    assert manager.cleaner.uncleanable_count == int(uncleanable)  # Kafka's uncleanable-partitions-count
    # and uncleanable-bytes: the closed segments the round would have cleaned (the active one is not)
    log = manager.get_log(TP)
    assert log is not None and len(log.segments) > 2
    closed = sum(s.size for s in log.segments[:-1])
    assert manager.cleaner.uncleanable_bytes() == (closed if uncleanable else 0)
    monkeypatch.setattr(cleaner_manager, "begin_round", real_begin_round)
    # a changed log or a full disk: the next round (after the backoff) cleans it
    assert await manager.cleaner.clean_filthiest() == (not uncleanable)
    assert manager.cleaner.rounds == (0 if uncleanable else 1)
    await manager.shutdown()
