"""Rebuilding a partition's producer table at load: the snapshot (`producer-state.json`) when it is
usable, then the batch headers after it, read through the log (PartitionLog.read, FileSlice.headers)
off the event loop. Control batches are read whole (one small record) for their marker type; the
aborts met on the way are indexed again (the log's `.txnindex` entries from the replay's start are
dropped first), so the aborted-transaction index is right after any stop, clean or not."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import structlog

from broker.log import FileSlice, OffsetOutOfRangeError, PartitionLog, ReadBound
from broker.log.segment_file import CorruptSegmentError
from broker.replica.producer_state import ProducerStateManager, read_snapshot, remove_snapshot
from protocol.control_records import marker_type_in
from protocol.records import BatchHeader

log = structlog.get_logger("replica")

RunIO = Callable[..., Awaitable[Any]]  # runs a blocking function off the event loop
_REST_OF_LOG = 2**63 - 1  # a read's max_bytes: every batch up to the log end
_HEADERS_PER_CALL = 65_536  # headers read in one call off the loop


async def rebuild_producer_state(partition_log: PartitionLog, producers: ProducerStateManager,
                                 run_io: RunIO, expiration_ms: int) -> None:
    """Rebuild the producer table: its snapshot if it is usable (less the producers expired by
    `expiration_ms`), then the batch headers after it."""
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
            producers.clear()
        if covered is not None and covered > partition_log.log_end_offset:
            log.info("producer state snapshot is ahead of the log (its tail was lost); rebuilding",
                     partition=str(partition_log.topic_partition), snapshot_offset=covered,
                     log_end_offset=partition_log.log_end_offset)
            producers.clear()
            covered = None
        if covered is None:
            await run_io(remove_snapshot, path)
        else:
            # as Kafka loads a snapshot: without the producers expired by now (the replay may bring some back)
            producers.expire(expiration_ms, now)
            scan_from = max(covered, start)
    await run_io(partition_log.forget_aborted_txns_from, scan_from)
    # A follower appends while this reads: go on until a pass finds the log end where it stopped, so
    # the table returns complete up to the log end with nothing awaited since that check.
    scanned, covered_to = 0, scan_from
    while covered_to < (end := partition_log.log_end_offset):
        scanned += await _replay_log(partition_log, producers, run_io, covered_to, end)
        covered_to = end
    # Producers whose every batch lies below the log start offset are gone with their records (an
    # open transaction keeps its producer: its marker is still to come).
    for pid in [p for p, e in producers.producers.items() if e.last_offset < start and p not in producers.ongoing]:
        del producers.producers[pid]
    producers.high_watermark_moved(partition_log.high_watermark)  # markers replayed below it are settled
    producers.dirty = scanned > 0
    log.debug("loaded producer state", partition=str(partition_log.topic_partition), producers=len(producers),
              from_offset=scan_from, batches_scanned=scanned)


async def _replay_log(partition_log: PartitionLog, producers: ProducerStateManager, run_io: RunIO,
                      offset: int, end: int) -> int:
    """Feed the batch headers from `offset` to `end` into the producer table: the log's own read
    names the file ranges, their headers are read off the loop, a segment file at a time."""
    scanned = 0
    if offset >= end:
        return 0
    try:
        found = partition_log.read(offset, _REST_OF_LOG, bound=ReadBound.LOG_END, min_one_batch=True)
    except OffsetOutOfRangeError:
        return 0
    for piece in found.slices:
        try:
            piece.file.pin()
        except ValueError:  # the segment was deleted and its file closed meanwhile: its records are gone
            break
        try:
            position, stop = piece.position, piece.position + piece.length
            while position < stop:
                headers, position = await run_io(_headers_and_markers, piece, position)
                for header, control_type in headers:
                    if header.last_offset >= offset and header.base_offset < end:
                        aborted = producers.apply(header, control_type)
                        if aborted is not None:
                            partition_log.record_aborted_txn(aborted)
                        scanned += 1
        except CorruptSegmentError as exc:  # the file changed underneath; the log's own reads will say so
            log.warning("producer state rebuild stopped at a damaged segment",
                        partition=str(partition_log.topic_partition), error=str(exc))
            break
        finally:
            piece.file.unpin()
    return scanned


def remove_snapshot_beyond(path: Path, offset: int) -> None:
    """Blocking: remove the producer snapshot if it covers more than `offset` (the log was truncated
    there, as Kafka drops the snapshots above a truncation; -1: whatever it covers)."""
    data = read_snapshot(path)
    if data is None:
        return
    try:
        covered = int(json.loads(data)["offset"])
    except (ValueError, KeyError, TypeError):
        covered = offset + 1  # unreadable: a rebuild would drop it anyway
    if covered > offset:
        remove_snapshot(path)


def _headers_and_markers(piece: FileSlice, position: int) -> tuple[list[tuple[BatchHeader, int]], int]:
    """Blocking: the next batch headers of `piece` from `position`, each with its marker type (-1
    for data batches and control batches that are no readable marker)."""
    headers, end = piece.headers(position, _HEADERS_PER_CALL)
    found = []
    with piece.file.held() as fd:
        for header in headers:
            control_type = -1
            if header.is_control:
                control_type = marker_type_in(os.pread(fd, header.size, position))
            found.append((header, control_type))
            position += header.size
    return found, end
