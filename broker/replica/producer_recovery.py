"""Rebuilding a partition's producer table at load: the snapshot (`<offset>.snapshot`) when it is
usable, then the batch headers after it, scanned from the segment files off the event loop."""

from __future__ import annotations

import os
import time
from collections.abc import Awaitable, Callable
from typing import Any

import structlog

from broker.log import OffsetOutOfRangeError, PartitionLog, ReadBound
from broker.replica.producer_state import ProducerStateManager, read_snapshot, remove_snapshot, scan_headers

log = structlog.get_logger("replica")

RunIO = Callable[..., Awaitable[Any]]  # runs a blocking function off the event loop


async def rebuild_producer_state(partition_log: PartitionLog, producers: ProducerStateManager,
                                 run_io: RunIO) -> None:
    """Rebuild the producer table: its snapshot if it is usable, then the batch headers after it."""
    path = producers.snapshot_path
    data = await run_io(read_snapshot, path)
    start = partition_log.log_start_offset
    scan_from: int = start
    now = time.time_ns() // 1_000_000
    if data is not None:
        try:
            covered = producers.restore(data)
        except (ValueError, KeyError, TypeError) as exc:
            log.warning("producer state snapshot unreadable; rebuilding from the log",
                        partition=str(partition_log.topic_partition), error=repr(exc))
            covered = None
            producers.producers.clear()
        if covered is not None and covered > partition_log.log_end_offset:
            log.info("producer state snapshot is ahead of the log (its tail was lost); rebuilding",
                     partition=str(partition_log.topic_partition), snapshot_offset=covered,
                     log_end_offset=partition_log.log_end_offset)
            producers.producers.clear()
            covered = None
        if covered is None:
            await run_io(remove_snapshot, path)
        else:
            scan_from = max(covered, start)
    scanned = await _replay_log(partition_log, producers, run_io, scan_from, now)
    # Producers whose every batch lies below the log start offset are gone with their records.
    for pid in [p for p, e in producers.producers.items() if e.last_offset < start]:
        del producers.producers[pid]
    producers.expire(now)
    producers.dirty = scanned > 0
    log.debug("loaded producer state", partition=str(partition_log.topic_partition), producers=len(producers),
              from_offset=scan_from, batches_scanned=scanned)


async def _replay_log(partition_log: PartitionLog, producers: ProducerStateManager, run_io: RunIO,
                      offset: int, now_ms: int) -> int:
    """Feed the batch headers from `offset` to the log end into the producer table, one segment
    file at a time (the log finds where `offset` lies; the files are scanned off the loop)."""
    scanned = 0
    end = partition_log.log_end_offset
    while offset < end:
        try:
            first = partition_log.read(offset, 1, bound=ReadBound.LOG_END, min_one_batch=True)
        except OffsetOutOfRangeError:
            break
        if not first.slices:
            break
        piece, before = first.slices[0], offset
        piece.file.pin()
        try:
            position = piece.position
            while True:
                headers, position = await run_io(_scan_chunk, piece.file.fileno(), position)
                if not headers:
                    break
                for header in headers:
                    if header.last_offset >= offset and header.base_offset < end:
                        producers.apply(header, now_ms)
                        scanned += 1
                offset = max(offset, headers[-1].last_offset + 1)
        finally:
            piece.file.unpin()
        if offset == before:
            break
    return scanned


def _scan_chunk(fd: int, position: int, limit: int = 65_536) -> tuple[list, int]:
    """Blocking: up to `limit` batch headers from `position` to the end of the file, and where the
    next chunk starts."""
    size = os.fstat(fd).st_size
    headers = []
    for header in scan_headers(fd, position, size - position):
        headers.append(header)
        position = header.end_position
        if len(headers) >= limit:
            break
    return headers, position
