"""Log cleaner benchmark: `python -m bench.cleaner [--quick] [--dir PATH]`.

Prints, in one run:
  1. cleaner throughput: one round over a compacted log of keyed 1 KiB records (16 a batch, one key in
     ten kept), in MiB of log cleaned per second, next to a plain copy of the same segment files on
     the same disk (page cache);
  2. append throughput to a compacted log while a cleaning round of another log runs in a cleaner
     process (as the broker runs it), and in a thread of the broker's process (the interpreter lock
     shared with the event loop: why the broker does not), next to the same appends with no round.

--quick scales the sizes down and says so. Files go to a temporary directory under --dir.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import multiprocessing
import os
import random
import shutil
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from pathlib import Path

import structlog

from broker.log import LogConfig, LogManager, LogManagerConfig, TopicPartition
from protocol.records import build_batch

MiB = 1024 * 1024
T0 = 1_700_000_000_000


def _quiet_logs() -> None:
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))


def _row(label: str, value: str, note: str = "") -> None:
    print(f"  {label:<56} {value:>14}  {note}")


def _batches(total_mib: int, keys: int, rng: random.Random) -> list[bytes]:
    value = os.urandom(1000)
    count = total_mib * MiB // (16 * 1040)
    return [build_batch([(b"key-%d" % rng.randrange(keys), value, [], T0 + i) for _ in range(16)])
            for i in range(count)]


async def _filled(manager: LogManager, tp: TopicPartition, batches: list[bytes]):
    log = await manager.get_or_create_log(tp)
    for data in batches:
        await log.append(bytearray(data), leader_epoch=0)
    await log.append(bytearray(build_batch([(b"roll", b"x", [], T0)])), leader_epoch=0)
    log.update_high_watermark(log.log_end_offset)
    return log


async def run(root: Path, total_mib: int) -> None:
    config = LogConfig(segment_bytes=max(total_mib // 8, 1) * MiB, retention_ms=-1, cleanup_policy=("compact",),
                       min_cleanable_dirty_ratio=0.0, file_delete_delay_ms=0)
    manager = LogManager(root / "logs", config=LogManagerConfig(io_threads=2), default_log_config=config)
    await manager.startup(background_tasks=False)
    process = ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"))
    process.submit(int).result()  # started before anything is timed
    rng = random.Random(1)
    records = total_mib * MiB // 1040
    batches = _batches(total_mib, max(records // 10, 1), rng)
    log = await _filled(manager, TopicPartition("bench", 0), batches)
    closed = log.segments[:-1]
    size = sum(s.size for s in closed)
    print(f"\n1. One cleaning round: {size / MiB:.0f} MiB in {len(closed)} closed segments, "
          f"{records:,} records of ~1 KiB over {max(records // 10, 1):,} keys")
    copy_dir = root / "copy"
    copy_dir.mkdir()
    start = time.perf_counter()
    for segment in closed:
        shutil.copyfile(segment.log_path, copy_dir / segment.log_path.name)
    copy_s = time.perf_counter() - start
    start = time.perf_counter()
    assert await manager.cleaner.clean_filthiest(process)
    clean_s = time.perf_counter() - start
    _row("plain copy of the segment files", f"{size / MiB / copy_s:,.0f} MiB/s")
    _row("cleaning round (map, copy what stays, swap)", f"{size / MiB / clean_s:,.1f} MiB/s",
         f"{clean_s / copy_s:,.0f}x the copy's time; "
         f"{sum(s.size for s in log.segments[:-1]) / MiB:.1f} MiB left")

    print("\n2. Appends of 1 MiB (64 batches): delete policy, compacted, compacted while a round runs")
    payload = bytearray(b"".join(_batches(1, 10_000, rng)))
    plain_config = replace(config, cleanup_policy=("delete",))
    target = await manager.get_or_create_log(TopicPartition("plain", 0), config=plain_config)

    async def append_for(seconds: float) -> float:
        appended, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            await target.append(bytearray(payload), leader_epoch=0)
            appended += len(payload)
            await asyncio.sleep(0)
        return appended / MiB / (time.perf_counter() - start)

    async def while_cleaning(worker) -> tuple[float, float]:
        await _filled(manager, TopicPartition("bench", next(partitions)), batches)
        cleaning = asyncio.ensure_future(manager.cleaner.clean_filthiest(worker))
        await asyncio.sleep(0)
        started, speeds = time.perf_counter(), []
        while not cleaning.done():
            speeds.append(await append_for(0.5))
        assert await cleaning
        return sum(speeds) / max(len(speeds), 1), time.perf_counter() - started

    partitions = iter(range(1, 100))
    plain = await append_for(2.0)
    target = await manager.get_or_create_log(TopicPartition("appends", 0))  # compacted: keys are checked
    idle = await append_for(2.0)
    in_process, process_s = await while_cleaning(process)
    in_thread, thread_s = await while_cleaning(None)
    _row("appends to a cleanup.policy=delete log", f"{plain:,.0f} MiB/s")
    _row("appends to a compacted log, no cleaning round", f"{idle:,.0f} MiB/s",
         f"{idle / plain:.2f}x (each record's key is checked)")
    _row("appends while a round runs in a cleaner process", f"{in_process:,.0f} MiB/s",
         f"{in_process / idle:.2f}x; the round took {process_s:.1f} s")
    _row("appends while a round runs in a thread (not used)", f"{in_thread:,.0f} MiB/s",
         f"{in_thread / idle:.2f}x; the round took {thread_s:.1f} s")
    process.shutdown()
    await manager.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="32 MiB instead of 256 MiB")
    parser.add_argument("--dir", type=Path, default=None)
    args = parser.parse_args()
    _quiet_logs()
    total = 32 if args.quick else 256
    if args.quick:
        print("--quick: 32 MiB of log instead of 256 MiB")
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        asyncio.run(run(Path(tmp), total))


if __name__ == "__main__":
    main()
