"""The log cleaner on transactional data, on real segment files written through Partition (so the
producer table, the last stable offset and the `.txnindex` are the broker's): aborted records never
shadow committed ones and are dropped, an open transaction bounds the round, markers stay while
their transaction has batches and then until their own delete horizon, and the cleaned segments'
`.txnindex` keep what READ_COMMITTED readers need, after a restart and after an interrupted swap."""

from __future__ import annotations

import os
import uuid
from dataclasses import replace
from pathlib import Path

from broker.log import LogConfig, TopicPartition
from broker.log.cleaner import CLEANED_SUFFIX, SWAP_SUFFIX, CleaningJob, SegmentView, clean_group, plan
from broker.log.offset_map import KeyOffsetMap
from broker.log.txn_index import read_txn_index, txn_index_path
from broker.replica import AppendOrigin
from broker.replica.partition import Partition
from protocol.control_records import ControlType, build_marker_batch
from protocol.records import RecordBatch, build_batch
from tests.broker.test_log_cleaner import read_all
from tests.broker.test_log_support import FakeClock, open_manager
from tests.unit.test_partition_with_a_fake_host import FakeHost

TP = TopicPartition("facts", 0)
COMPACT = LogConfig(segment_bytes=1024, index_interval_bytes=200, file_delete_delay_ms=0, retention_ms=-1,
                    cleanup_policy=("compact",), min_cleanable_dirty_ratio=0.0)


class Writer:
    """A compacted partition led here, its cleaner told the partition's producer state and bound."""

    def __init__(self, path: Path, config: LogConfig = COMPACT) -> None:
        self.path, self.config, self.clock = path, config, FakeClock()
        self.sequences: dict[int, int] = {}
        self.filler = 0

    async def start(self) -> Partition:
        self.manager = await open_manager(self.path, self.config, clock=self.clock)
        log = await self.manager.get_or_create_log(TP)
        partition = self.partition = Partition(FakeHost(), TP, uuid.uuid4(), [1], log)
        await partition.load_producer_state()
        self.manager.cleaner.producer_last_offsets = lambda tp: {
            pid: e.last_offset for pid, e in partition.producers.producers.items()}
        self.manager.cleaner.last_stable_offset = lambda tp: partition.cleaning_bound()
        self.manager.cleaner.producer_snapshot_offset = lambda tp: partition.producers.snapshot_offset
        return partition

    async def stop(self) -> None:
        await self.partition.write_producer_snapshot()
        await self.manager.shutdown()

    async def _append(self, data: bytes) -> int:
        batch = RecordBatch(data)  # markers are the coordinator's: a client's are refused
        origin = AppendOrigin.COORDINATOR if batch.is_control else AppendOrigin.CLIENT
        result = await self.partition.append_records_as_leader(memoryview(bytearray(data)), batch, 1, origin)
        return result.base_offset

    async def plain(self, key: bytes, value: bytes | None) -> int:
        return await self._append(build_batch([(key, value, [], 1_000)]))

    async def txn(self, pid: int, pairs: list[tuple[bytes, bytes]]) -> int:
        seq = self.sequences.get(pid, 0)
        self.sequences[pid] = seq + len(pairs)
        return await self._append(build_batch([(k, v, [], 1_000) for k, v in pairs], producer_id=pid,
                                               producer_epoch=0, base_sequence=seq, is_transactional=True))

    async def end(self, pid: int, kind: ControlType) -> int:
        return await self._append(build_marker_batch(kind, pid, 0, 0, timestamp_ms=1_000))

    async def fill(self, segments: int = 2) -> None:
        """Records of keys of their own until `segments` more segments have rolled."""
        target = len(self.partition.log.segments) + segments
        while len(self.partition.log.segments) < target:
            self.filler += 1
            await self.plain(b"filler-%d" % self.filler, b"f" * 100)


def read_committed(partition: Partition) -> list[tuple[int, bytes, bytes | None]]:
    """What a READ_COMMITTED consumer gets below the last stable offset (Kafka's consumer rule: a
    transactional batch of a producer inside one of the aborted ranges the broker sends is skipped)."""
    upper = partition.last_stable_offset
    aborted = partition.aborted_transactions(partition.log_start_offset, upper)
    out = []
    for batch in read_all(partition.log):
        if batch.is_control or batch.base_offset >= upper:
            continue
        if batch.is_transactional and any(t.producer_id == batch.producer_id
                                          and t.first_offset <= batch.base_offset <= t.last_offset for t in aborted):
            continue
        out += [(r.offset, r.key, r.value) for r in batch.records() if r.offset < upper]
    return out


def latest(records: list[tuple[int, bytes, bytes | None]]) -> dict[bytes, bytes | None]:
    return {key: value for _, key, value in records}


def every_value(partition: Partition) -> list[bytes | None]:
    return [r.value for b in read_all(partition.log) if not b.is_control for r in b.records()]


def index_files(partition: Partition) -> list:
    log = partition.log
    return [e for s in log.segments for e in read_txn_index(txn_index_path(log.directory, s.base_offset))]


async def test_an_aborted_record_never_shadows_the_committed_value_and_is_dropped(tmp_path: Path) -> None:
    writer = Writer(tmp_path)
    partition = await writer.start()
    await writer.plain(b"k1", b"plain-1")
    await writer.txn(10, [(b"k1", b"committed-1"), (b"k2", b"committed-2")])
    await writer.end(10, ControlType.COMMIT)
    await writer.fill(1)
    await writer.txn(11, [(b"k1", b"aborted-1"), (b"k3", b"aborted-3")])  # would shadow k1's commit
    await writer.fill(1)
    await writer.txn(11, [(b"k2", b"aborted-2")])  # the same aborted transaction, a segment later
    await writer.end(11, ControlType.ABORT)
    await writer.plain(b"k4", b"plain-4")
    await writer.fill(2)
    before = read_committed(partition)
    assert latest(before)[b"k1"] == b"committed-1" and b"k3" not in latest(before)

    assert await writer.manager.cleaner.clean_filthiest()
    after = read_committed(partition)
    assert latest(after) == latest(before)
    assert set(after) <= set(before) and len(after) < len(before)
    assert not [v for v in every_value(partition) if v and v.startswith(b"aborted")]
    # producer 11's last batch stays as a bare header, so its ABORT marker and index entry stay too
    entries = partition.log.aborted_txns.entries
    assert [e.producer_id for e in entries] == [11] and index_files(partition) == entries

    await writer.stop()
    partition = await writer.start()  # the cleaned segments and their `.txnindex` come back
    assert read_committed(partition) == after and partition.log.aborted_txns.entries == entries
    await writer.stop()


async def test_an_open_transaction_bounds_the_round(tmp_path: Path) -> None:
    writer = Writer(tmp_path)
    partition = await writer.start()
    await writer.plain(b"k", b"old")
    await writer.plain(b"k", b"newer")
    await writer.fill(1)
    opened = await writer.txn(12, [(b"k", b"open")])
    await writer.plain(b"k", b"after-the-open-one")
    await writer.fill(2)
    assert partition.last_stable_offset == opened
    assert await writer.manager.cleaner.clean_filthiest()
    assert writer.manager.cleaner._first_dirty[TP] <= opened
    values = every_value(partition)
    assert b"old" not in values and b"open" in values and b"after-the-open-one" in values
    await writer.end(12, ControlType.ABORT)
    await writer.fill(1)
    assert await writer.manager.cleaner.clean_filthiest()
    assert b"open" not in every_value(partition)
    assert latest(read_committed(partition))[b"k"] == b"after-the-open-one"
    await writer.stop()


async def test_markers_stay_while_their_data_does_then_until_their_delete_horizon(tmp_path: Path) -> None:
    writer = Writer(tmp_path, replace(COMPACT, delete_retention_ms=1_000))
    partition = await writer.start()
    await writer.txn(20, [(b"a", b"committed-a")])
    commit = await writer.end(20, ControlType.COMMIT)
    await writer.txn(21, [(b"b", b"aborted-b")])
    abort = await writer.end(21, ControlType.ABORT)
    for pid in (20, 21):  # each producer's last batch elsewhere, so nothing keeps those batches
        await writer.txn(pid, [(b"later-%d" % pid, b"x")])
        await writer.end(pid, ControlType.COMMIT)
    await writer.plain(b"a", b"plain-a")  # shadows the committed record
    await writer.fill(2)

    def marker_offsets() -> list[int]:
        return [b.base_offset for b in read_all(partition.log) if b.is_control]

    def horizons() -> dict[int, int | None]:
        return {b.base_offset: b.delete_horizon_ms for b in read_all(partition.log) if b.is_control}

    assert await writer.manager.cleaner.clean_filthiest()  # the data goes; the markers saw it, so they stay
    assert b"committed-a" not in every_value(partition) and b"aborted-b" not in every_value(partition)
    assert {commit, abort} <= set(marker_offsets()) and horizons()[commit] is None
    assert [e.last_offset for e in partition.log.aborted_txns.entries] == [abort]

    await writer.fill(1)
    assert await writer.manager.cleaner.clean_filthiest()  # no data left: the horizon starts
    assert horizons()[commit] == horizons()[abort] == writer.clock.now + 1_000
    assert partition.log.aborted_txns.entries == [] and index_files(partition) == []

    writer.clock.now += 1_000
    await writer.fill(1)
    assert await writer.manager.cleaner.clean_filthiest()
    assert commit not in marker_offsets() and abort not in marker_offsets()
    assert len(marker_offsets()) == 2  # the later commits stay: their producers' data is still there
    assert latest(read_committed(partition))[b"a"] == b"plain-a"
    await writer.stop()
    partition = await writer.start()  # no transaction left open by the removed markers
    assert partition.last_stable_offset == partition.high_watermark
    await writer.stop()


async def test_a_marker_newer_than_the_producer_snapshot_stays_until_a_snapshot_covers_it(tmp_path: Path) -> None:
    writer = Writer(tmp_path, replace(COMPACT, delete_retention_ms=0))
    partition = await writer.start()
    await writer.txn(40, [(b"a", b"committed-a")])
    assert await partition.write_producer_snapshot()  # holds the transaction open; a crash replays from here
    commit = await writer.end(40, ControlType.COMMIT)
    await writer.txn(40, [(b"later", b"x")])
    await writer.end(40, ControlType.COMMIT)
    await writer.plain(b"a", b"plain-a")
    await writer.fill(2)

    def markers() -> list[int]:
        return [b.base_offset for b in read_all(partition.log) if b.is_control]

    for _ in range(3):  # the data goes, the horizon is set, then passes: only the snapshot keeps the marker
        assert await writer.manager.cleaner.clean_filthiest()
        await writer.fill(1)
    assert b"committed-a" not in every_value(partition) and commit in markers()
    assert await partition.write_producer_snapshot()
    assert await writer.manager.cleaner.clean_filthiest()
    assert commit not in markers()
    writer.manager.abandon()  # a crash: the load replays from the last snapshot
    partition = await writer.start()
    assert partition.last_stable_offset == partition.high_watermark
    await writer.stop()


async def test_an_interrupted_swap_brings_the_cleaned_txnindex_in(tmp_path: Path) -> None:
    writer = Writer(tmp_path, replace(COMPACT, segment_bytes=4096))
    partition = await writer.start()
    await writer.txn(30, [(b"k", b"aborted")])
    abort = await writer.end(30, ControlType.ABORT)
    await writer.plain(b"k", b"plain")
    await writer.fill(2)
    log, cleaner = partition.log, writer.manager.cleaner
    chosen = cleaner.filthiest()
    job = CleaningJob(TP, log.directory, tuple(SegmentView.of(s) for s in log.segments[:-1]),
                      chosen.first_dirty_offset, chosen.first_uncleanable_offset, writer.clock(),
                      COMPACT.delete_retention_ms, 4096, COMPACT.segment_index_bytes, COMPACT.index_interval_bytes,
                      4096, {30: 0}, tuple(log.aborted_txns.entries))
    key_map = KeyOffsetMap(1000)
    round_plan = plan(job, key_map)
    clean_group(job, round_plan, round_plan.groups[0], key_map).close()
    await writer.stop()
    directory = log.directory
    assert (directory / f"{0:020d}.txnindex{CLEANED_SUFFIX}").exists()
    for name in os.listdir(directory):
        if name.endswith(CLEANED_SUFFIX):
            os.rename(directory / name, directory / name.replace(CLEANED_SUFFIX, SWAP_SUFFIX))
    partition = await writer.start()
    assert not [n for n in os.listdir(directory) if n.endswith((SWAP_SUFFIX, CLEANED_SUFFIX))]
    assert [e.last_offset for e in partition.log.aborted_txns.entries] == [abort] == \
        [e.last_offset for e in index_files(partition)]
    assert b"aborted" not in every_value(partition)
    assert latest(read_committed(partition))[b"k"] == b"plain"
    await writer.stop()
