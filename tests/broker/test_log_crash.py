"""The crash test: a child process appends and deletes records and is SIGKILLed at random points,
many times. After each kill, recovery must leave a valid prefix of what the child wrote (every batch
passes its CRC, offsets run on, each record holds its own offset), lose nothing the child saw
acknowledged (SIGKILL keeps the page cache), and keep the log start offset at or above every
deletion that had returned."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import random
import select
import signal
import time
from dataclasses import replace
from pathlib import Path

from broker.log import LogConfig, LogManager, LogManagerConfig, ReadBound, TopicPartition
from broker.log.config import LONG_MAX
from protocol.records import build_batch, iter_batches
from tests.support.log_start import move_start

TP = TopicPartition("crash", 0)
KILLS = 30
CONFIG = LogConfig(
    segment_bytes=16 * 1024,
    index_interval_bytes=1024,
    file_delete_delay_ms=0,
    retention_ms=-1,
    retention_bytes=150_000,
)
MANAGER = LogManagerConfig(io_threads=2)


def _child(directory: str, seed: int, out: int) -> None:
    rng = random.Random(seed)
    flush_messages = rng.choice([LONG_MAX, LONG_MAX, 7, 1])

    async def work() -> None:
        config = replace(CONFIG, flush_messages=flush_messages)
        manager = LogManager(directory, config=MANAGER, default_log_config=config)
        await manager.startup(background_tasks=False)
        log = await manager.get_or_create_log(TP)
        os.write(out, b"R\n")
        step = 0
        while True:
            step += 1
            roll = rng.random()
            if roll < 0.75:
                end = log.log_end_offset
                count = rng.randint(1, 8)
                size = rng.choice([10, 100, 1000, 1800])
                records = [
                    (None, str(end + i).encode().ljust(size, b"."), [], 1000 + end + i) for i in range(count)
                ]
                info = await log.append(build_batch(records), leader_epoch=seed)
                log.update_high_watermark(log.log_end_offset)
                os.write(out, b"A %d\n" % info.last_offset)
            elif roll < 0.95:
                target = rng.randint(log.log_start_offset, log.high_watermark)
                await move_start(log, target)
                os.write(out, b"D %d\n" % target)
            elif roll < 0.98:
                await manager.run_retention()
            else:
                await log.flush()
            if step % 16 == 0:
                await asyncio.sleep(0)  # let post-roll flushes and deletions run

    asyncio.run(work())


def _read_until_ready(fd: int) -> bytes:
    buffered = b""
    deadline = time.monotonic() + 20
    while b"R\n" not in buffered:
        ready, _, _ = select.select([fd], [], [], max(deadline - time.monotonic(), 0))
        assert ready, "child did not start"
        chunk = os.read(fd, 65536)
        assert chunk, "child died before it was ready"
        buffered += chunk
    return buffered


def _drain(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 65536):
        chunks.append(chunk)
    return b"".join(chunks)


async def _verify(directory: Path, min_start: int, min_end: int) -> tuple[int, int]:
    manager = LogManager(directory, config=MANAGER, default_log_config=CONFIG)
    await manager.startup(background_tasks=False)
    try:
        assert not manager.offline_partitions
        log = manager.get_log(TP)
        assert log is not None
        start, end = log.log_start_offset, log.log_end_offset
        assert start >= min_start, f"log start offset {start} is below a returned deletion at {min_start}"
        assert end >= min_end, f"log end offset {end} lost acknowledged appends up to {min_end}"
        data = log.read(start, 10**9, bound=ReadBound.LOG_END).read_bytes()
        expected_offset = None
        for view in iter_batches(data):
            view.validate()
            assert expected_offset is None or view.base_offset == expected_offset
            for record in view.records():
                assert record.value is not None
                assert record.value.rstrip(b".") == str(record.offset).encode()
            expected_offset = view.next_offset
        assert expected_offset is None or expected_offset == end
        assert data == b"" or next(iter(iter_batches(data))).last_offset >= start
        return start, end
    finally:
        manager.abandon()  # leave it as a crash would: the next child recovers as well


def test_sigkill_at_random_points(tmp_path: Path) -> None:
    context = multiprocessing.get_context("fork")
    rng = random.Random(20240601)
    min_start = min_end = 0
    kills_mid_work = 0
    for round_number in range(KILLS):
        read_fd, write_fd = os.pipe()
        child = context.Process(target=_child, args=(str(tmp_path), round_number, write_fd), daemon=True)
        child.start()
        os.close(write_fd)
        try:
            if round_number % 5 == 4:
                # Now and then the kill lands during the child's own startup and recovery.
                output = b""
                time.sleep(rng.uniform(0, 0.03))
            else:
                output = _read_until_ready(read_fd)
                time.sleep(rng.uniform(0, 0.06))
            os.kill(child.pid, signal.SIGKILL)
            child.join()
            output += _drain(read_fd)
        finally:
            os.close(read_fd)
        assert child.exitcode == -signal.SIGKILL
        words = output.decode().split()
        if words and words[0] == "R":
            words = words[1:]
        pairs = list(zip(words[::2], words[1::2], strict=True))
        acked = [int(v) for k, v in pairs if k == "A"]
        deleted = [int(v) for k, v in pairs if k == "D"]
        kills_mid_work += bool(acked or deleted)
        min_start = max([min_start, *deleted])
        min_end = max([min_end, *(a + 1 for a in acked)])
        start, end = asyncio.run(_verify(tmp_path, min_start, min_end))
        min_start, min_end = start, end  # neither may ever go back
    assert kills_mid_work >= KILLS // 3
