"""Partition log benchmark: `python -m bench.log [--quick] [--dir PATH]`.

Prints, in one run:
  1. append throughput with 1 MiB of batches per append, next to a plain sequential os.write of the
     same bytes to a file on the same disk (and the same with a final fsync);
  2. read throughput (read() ranges, then pread of the bytes) next to plain sequential pread;
  3. recovery time after an unclean stop (full rescan: every batch's CRC checked, indexes rebuilt),
     with a warm and a cold page cache;
  4. log start offset update latency over 1,000 partitions, with and without the synchronous
     (group-committed) checkpoint.

The sizes follow the issue (1 GiB in 100 segments for recovery) unless --quick, which scales them
down and says so. Files go to a temporary directory under --dir (default: the system temp dir).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import shutil
import tempfile
import time
from pathlib import Path

import structlog

from broker.log import LogConfig, LogManager, LogManagerConfig, PartitionLog, TopicPartition
from broker.log.opening import create_partition_log, load_partition_log
from protocol.records import build_batch
from tests.support.page_cache import drop_from_page_cache

MiB = 1024 * 1024


def _quiet_logs() -> None:
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))


def _mib_of_batches(batch_bytes: int = 16 * 1024) -> bytearray:
    """About 1 MiB of 16 KiB batches (16 records of ~1 KiB each), back to back."""
    one = build_batch([(b"key-%d" % i, os.urandom(1000), [], 1_700_000_000_000 + i) for i in range(16)])
    count = MiB // len(one)
    return bytearray(one * count)


def _row(label: str, value: str, note: str = "") -> None:
    print(f"  {label:<52} {value:>16}  {note}")


async def bench_append_and_read(root: Path, total_mib: int) -> None:
    print(
        f"\n1. Append: {total_mib} MiB, 1 MiB of 16 KiB batches per append (page cache, no fsync per append)"
    )
    payload = _mib_of_batches()
    config = LogConfig(segment_bytes=1024 * MiB, retention_ms=-1)
    log = create_partition_log(root / "append-0", config)
    await log.append(bytearray(payload))  # warm up
    start = time.perf_counter()
    for _ in range(total_mib):
        await log.append(payload)  # the bytearray is stamped in place, as a produce buffer would be
    append_s = time.perf_counter() - start
    await log.flush()
    append_sync_s = time.perf_counter() - start

    plain = root / "plain.bin"
    fd = os.open(plain, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
    os.write(fd, payload)
    start = time.perf_counter()
    for _ in range(total_mib):
        os.write(fd, payload)
    plain_s = time.perf_counter() - start
    os.fsync(fd)
    plain_sync_s = time.perf_counter() - start
    os.close(fd)

    mb = total_mib * len(payload) / MiB
    _row("PartitionLog.append", f"{mb / append_s:,.0f} MiB/s", f"{append_s / total_mib * 1e6:,.0f} us/append")
    _row("plain os.write of the same bytes", f"{mb / plain_s:,.0f} MiB/s")
    _row("ratio append / plain write", f"{plain_s / append_s:.2f}x", "(goal >= 0.8x)")
    _row("with a final fsync: append", f"{mb / append_sync_s:,.0f} MiB/s")
    _row("with a final fsync: plain write", f"{mb / plain_sync_s:,.0f} MiB/s")
    _row("ratio with fsync", f"{plain_sync_s / append_sync_s:.2f}x")

    small = create_partition_log(root / "small-0", config)
    one = bytearray(build_batch([(b"k", os.urandom(1000), [], 1)]))
    count = 20_000
    start = time.perf_counter()
    for _ in range(count):
        await small.append(one)
    small_s = time.perf_counter() - start
    _row(
        "PartitionLog.append, one 1 KiB record per call",
        f"{count / small_s:,.0f} appends/s",
        f"{small_s / count * 1e6:.1f} us/append",
    )
    await small.close()

    print(f"\n2. Read: the same {total_mib} MiB front to back, 1 MiB per read (page cache)")
    log.update_high_watermark(log.log_end_offset)
    offset, calls, bytes_read = log.log_start_offset, 0, 0
    start = time.perf_counter()
    while offset < log.log_end_offset:
        info = log.read(offset, MiB)
        for piece in info.slices:
            bytes_read += len(os.pread(piece.file.fileno(), piece.length, piece.position))
        offset, calls = info.next_offset, calls + 1
    read_s = time.perf_counter() - start
    ranges_start = time.perf_counter()
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        offset = log.read(offset, MiB).next_offset
    ranges_s = time.perf_counter() - ranges_start
    fd = os.open(plain, os.O_RDONLY)
    start = time.perf_counter()
    position = 0
    while chunk := os.pread(fd, MiB, position):
        position += len(chunk)
    plain_read_s = time.perf_counter() - start
    os.close(fd)
    _row("read() + pread of the ranges", f"{bytes_read / MiB / read_s:,.0f} MiB/s")
    _row(
        "read() alone (finding batch-aligned ranges)",
        f"{ranges_s / calls * 1e6:.1f} us/read",
        f"{calls} reads",
    )
    _row("plain sequential pread", f"{position / MiB / plain_read_s:,.0f} MiB/s")
    await log.close()
    plain.unlink()


async def bench_recovery(root: Path, total_mib: int, segments: int) -> None:
    print(
        f"\n3. Recovery after an unclean stop: {total_mib} MiB in {segments} segments, full rescan "
        "(recovery point 0)"
    )
    payload = _mib_of_batches()
    chunk = bytearray(payload[: 4 * (len(payload) // 64)])  # appends of 4 batches, so segments fill evenly
    config = LogConfig(segment_bytes=len(payload) * total_mib // segments + len(chunk), retention_ms=-1)
    directory = root / "recover-0"
    log = create_partition_log(directory, config)
    for _ in range(total_mib * 16):
        await log.append(chunk)
    await log.flush()
    await log.io.drain()
    found_segments = len(log.segments)
    log.abandon()  # no clean close: the next load must validate everything

    loop = asyncio.get_running_loop()
    for label, cold in (("warm page cache", False), ("cold page cache (posix_fadvise DONTNEED)", True)):
        if cold:
            for path in directory.glob("*.log"):
                drop_from_page_cache(path)
        start = time.perf_counter()
        recovered, report = await loop.run_in_executor(
            None, lambda: load_partition_log(directory, config, recovery_point=0)
        )
        elapsed = time.perf_counter() - start
        assert recovered.log_end_offset == log.log_end_offset and not report.truncated_bytes
        recovered.abandon()
        _row(
            f"recovery, {label}",
            f"{elapsed:.2f} s",
            f"{total_mib / elapsed:,.0f} MiB/s, {found_segments} segments",
        )
    start = time.perf_counter()
    clean, _ = await loop.run_in_executor(
        None, lambda: load_partition_log(directory, config, recovery_point=log.log_end_offset, clean=True)
    )
    _row("load after a clean shutdown (no scan)", f"{(time.perf_counter() - start) * 1000:.0f} ms")
    clean.abandon()
    shutil.rmtree(directory)


async def _latencies(logs: list[PartitionLog], concurrent: bool) -> tuple[list[float], float]:
    async def one(log: PartitionLog) -> float:
        start = time.perf_counter()
        log.move_log_start_offset(log.log_start_offset + 1)
        await log.make_start_offset_durable()
        return time.perf_counter() - start

    start = time.perf_counter()
    if concurrent:
        results = list(await asyncio.gather(*(one(log) for log in logs)))
    else:
        results = [await one(log) for log in logs]
    return results, time.perf_counter() - start


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(int(q * len(ordered)), len(ordered) - 1)]


async def bench_start_offset(root: Path, partitions: int) -> None:
    print(f"\n4. Log start offset update (DeleteRecords on the log) across {partitions:,} partitions")
    one = bytearray(build_batch([(b"k", b"v" * 100, [], 1)] * 10))
    for sync in (True, False):
        directory = root / f"lso-{sync}"
        manager = LogManager(
            directory,
            config=LogManagerConfig(start_offset_checkpoint_sync=sync),
            default_log_config=LogConfig(retention_ms=-1),
        )
        await manager.startup(background_tasks=False)
        logs = []
        for p in range(partitions):
            log = await manager.get_or_create_log(TopicPartition("bench", p))
            for _ in range(5):
                await log.append(one)
            log.update_high_watermark(log.log_end_offset)
            logs.append(log)
        mode = "sync checkpoint" if sync else "no sync (Kafka: every 60 s)"
        before = manager.checkpoints.start_offsets.writes
        sequential, total = await _latencies(logs, concurrent=False)
        seq_writes = manager.checkpoints.start_offsets.writes - before
        _row(
            f"{mode}: one at a time, p50",
            f"{_pct(sequential, 0.5) * 1e3:.3f} ms",
            f"p99 {_pct(sequential, 0.99) * 1e3:.3f} ms, {seq_writes} checkpoint writes",
        )
        before = manager.checkpoints.start_offsets.writes
        concurrent, total = await _latencies(logs, concurrent=True)
        writes = manager.checkpoints.start_offsets.writes - before
        _row(
            f"{mode}: all {partitions} at once, p50",
            f"{_pct(concurrent, 0.5) * 1e3:.3f} ms",
            f"p99 {_pct(concurrent, 0.99) * 1e3:.3f} ms, all done in {total * 1e3:.1f} ms, "
            f"{writes} checkpoint writes",
        )
        await manager.shutdown()
        shutil.rmtree(directory)


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="smaller sizes (for CI)")
    parser.add_argument("--dir", default=None, help="where to put the files (default: system temp dir)")
    args = parser.parse_args()
    _quiet_logs()
    append_mib, recovery_mib, partitions = (64, 128, 1000) if args.quick else (512, 1024, 1000)
    root = Path(tempfile.mkdtemp(prefix="ebb-bench-log-", dir=args.dir))
    print(f"Ebb partition log benchmark in {root} (cpus: {os.cpu_count()})")
    if args.quick:
        print("--quick: sizes scaled down (append 64 MiB, recovery 128 MiB in 100 segments)")
    try:
        await bench_append_and_read(root, append_mib)
        await bench_recovery(root, recovery_mib, 100)
        await bench_start_offset(root, partitions)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main())
