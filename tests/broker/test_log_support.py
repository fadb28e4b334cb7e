"""Helpers shared by the log tests (no tests here)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterable
from pathlib import Path

from broker.log import LogConfig, LogManager, LogManagerConfig
from broker.log.io import LogIO
from protocol.records import build_batch, iter_batches

SMALL = LogConfig(segment_bytes=2048, index_interval_bytes=200, file_delete_delay_ms=0, retention_ms=-1)
QUIET = LogManagerConfig(io_threads=2)


def batch(
    count: int = 1, *, timestamp: int = 1_000, value: bytes = b"v" * 40, key: bytes | None = b"k"
) -> bytes:
    """A client batch (offsets from 0, epoch -1) of `count` records sharing `timestamp`."""
    return build_batch([(key, value, [], timestamp)] * count)


def batches_of(data: bytes) -> list[tuple[int, int, int]]:
    """(base offset, last offset, max timestamp) of every batch in `data`, CRCs checked."""
    result = []
    for view in iter_batches(data):
        view.validate()
        result.append((view.base_offset, view.last_offset, view.max_timestamp))
    return result


class FakeClock:
    def __init__(self, now: int = 1_700_000_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


async def open_manager(
    path: Path,
    config: LogConfig = SMALL,
    *,
    clock: FakeClock | None = None,
    manager_config: LogManagerConfig = QUIET,
    **kwargs: object,
) -> LogManager:
    manager = LogManager(
        path, config=manager_config, default_log_config=config, clock=clock or FakeClock(), **kwargs
    )  # type: ignore[arg-type]
    await manager.startup(background_tasks=False)
    return manager


def files(directory: Path) -> list[str]:
    return sorted(os.listdir(directory))


async def settle(io: LogIO | None = None) -> None:
    """Let zero-delay deletions and post-roll flushes run: with the log's `io`, until its background work
    is done (a loaded machine's fsync can take longer than any fixed pause); without, a few short pauses."""
    if io is not None:
        await io.drain(finish_deletions=True)
        return
    for _ in range(5):
        await asyncio.sleep(0.01)


def all_batches(path: Path) -> list[tuple[int, int, int]]:
    found = []
    for name in files(path):
        if name.endswith(".log"):
            found += batches_of((path / name).read_bytes())
    return found


def write_text(path: Path, text: str) -> None:
    path.write_text(text)


def flatten(items: Iterable[Iterable[int]]) -> list[int]:
    return [x for item in items for x in item]
