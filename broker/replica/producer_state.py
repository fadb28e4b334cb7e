"""Idempotent producer state of one partition: per producer id, its epoch and its last five batches.

Checks on a client append (Kafka's `UnifiedLog.analyzeAndValidateProducerState` and
`ProducerAppendInfo`, non-transactional part):

1. A batch whose epoch and sequence range equal one of the producer's last five is a duplicate (a
   retry): it is not written again and the client gets the ORIGINAL offsets with error NONE. Modern
   Kafka never answers DUPLICATE_SEQUENCE_NUMBER; neither do we.
2. An epoch below the producer's current one: INVALID_PRODUCER_EPOCH.
3. A new (higher) epoch must start at sequence 0, the current epoch must continue at last + 1
   (wrapping after INT32_MAX): otherwise OUT_OF_ORDER_SEQUENCE_NUMBER.
4. A producer id with no state here (new, or its records were deleted or expired) may start at any
   sequence.

Persistence: the state is rebuilt at load from a snapshot plus the batch headers after it, so it
survives restarts, clean or not. The snapshot is `producer-state.json` in the partition directory:

    {"version": 1, "offset": <log end offset it covers>, "producers": {"<id>": {"epoch": e,
     "last_update_ms": t, "batches": [[first_seq, last_seq, first_offset, last_offset, timestamp], ...]}}}

written atomically (tmp, fsync, rename, fsync dir) at shutdown and every
`SNAPSHOT_INTERVAL_MS` for partitions that changed. Loading reads it if its offset is at or below the
log end offset, then scans the batch headers from there (from the log start offset when there is no
usable snapshot) without decoding records. A snapshot beyond the log end offset (the tail was lost
in a crash) is deleted and the whole log is scanned. Producers idle longer than
`producer.id.expiration.ms` (Kafka's default: one day) are forgotten.
"""

from __future__ import annotations

import json
import os
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from broker.log.checkpoint import fsync_dir
from protocol.errors import CodedError, ErrorCode
from protocol.records import BatchHeader

SNAPSHOT_FILE = "producer-state.json"
SNAPSHOT_VERSION = 1
BATCHES_TO_RETAIN = 5  # ProducerStateEntry.NUM_BATCHES_TO_RETAIN
PRODUCER_ID_EXPIRATION_MS = 86_400_000  # producer.id.expiration.ms
SNAPSHOT_INTERVAL_MS = 60_000
INT32_MAX = 2**31 - 1
NO_PRODUCER_ID = -1
NO_SEQUENCE = -1


class ProducerStateError(CodedError):
    """An idempotent batch refused by the producer checks."""


def last_sequence(base_sequence: int, last_offset_delta: int) -> int:
    """The batch's last sequence number; sequences wrap to 0 after INT32_MAX (DefaultRecordBatch)."""
    if base_sequence > INT32_MAX - last_offset_delta:
        return last_offset_delta - (INT32_MAX - base_sequence) - 1
    return base_sequence + last_offset_delta


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


class BatchMetadata(NamedTuple):  # one per idempotent batch: a NamedTuple is made in C
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int  # the batch's max timestamp as written (the append time under LogAppendTime)


@dataclass(slots=True)
class ProducerEntry:
    epoch: int
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=BATCHES_TO_RETAIN))
    last_update_ms: int = 0

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        if epoch != self.epoch:
            return None
        for batch in self.batches:
            if batch.first_seq == first_seq and batch.last_seq == last_seq:
                return batch
        return None

    def add(self, epoch: int, batch: BatchMetadata, now_ms: int) -> None:
        if epoch != self.epoch:
            self.epoch = epoch
            self.batches.clear()
        self.batches.append(batch)
        self.last_update_ms = now_ms


class ProducerStateManager:
    """The producer table of one partition. Not thread-safe: used on the event loop only, except
    for the blocking `load_blocking` that the caller runs in an executor (the snapshot is written by
    the log's cold-path writer, broker/log/cold_files.py)."""

    def __init__(self, directory: Path, expiration_ms: int = PRODUCER_ID_EXPIRATION_MS) -> None:
        self.directory = directory
        self.expiration_ms = expiration_ms
        self.producers: dict[int, ProducerEntry] = {}
        self.dirty = False  # changed since the last snapshot

    @property
    def snapshot_path(self) -> Path:
        return self.directory / SNAPSHOT_FILE

    def __len__(self) -> int:
        return len(self.producers)

    # --- the checks on a client append -----------------------------------------------------------

    def check(self, producer_id: int, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        """Validate a client batch before it is written. Returns the original batch for a duplicate,
        None for a batch to append; raises ProducerStateError otherwise."""
        entry = self.producers.get(producer_id)
        if entry is None:
            return None
        if epoch == entry.epoch and entry.batches and in_sequence(entry.batches[-1].last_seq, first_seq):
            return None  # the usual case, the next batch: sequences only grow, so it repeats no retained batch
        duplicate = entry.find_duplicate(epoch, first_seq, last_seq)
        if duplicate is not None:
            return duplicate
        if epoch < entry.epoch:
            raise ProducerStateError(
                ErrorCode.INVALID_PRODUCER_EPOCH,
                f"producer {producer_id} epoch {epoch} is below the current epoch {entry.epoch}",
            )
        if epoch > entry.epoch:
            if first_seq != 0:
                raise ProducerStateError(
                    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                    f"producer {producer_id}: new epoch {epoch} must start at sequence 0, not {first_seq}",
                )
        elif entry.batches and not in_sequence(entry.last_seq, first_seq):
            raise ProducerStateError(
                ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                f"producer {producer_id}: sequence {first_seq} does not follow {entry.last_seq}",
            )
        return None

    def update(self, producer_id: int, epoch: int, batch: BatchMetadata, now_ms: int | None = None) -> None:
        now = _now_ms() if now_ms is None else now_ms
        entry = self.producers.get(producer_id)
        if entry is None:
            entry = self.producers[producer_id] = ProducerEntry(epoch)
        entry.add(epoch, batch, now)
        self.dirty = True

    def apply(self, header: BatchHeader, now_ms: int) -> None:
        """Replay a batch read back from the log (no checks: it was checked when written)."""
        if header.producer_id < 0 or header.is_control:
            return
        batch = BatchMetadata(header.base_sequence, last_sequence(header.base_sequence, header.last_offset_delta),
                              header.base_offset, header.last_offset, header.max_timestamp)
        entry = self.producers.get(header.producer_id)
        if entry is not None and header.producer_epoch < entry.epoch:
            return
        self.update(header.producer_id, header.producer_epoch, batch, now_ms)

    def expire(self, now_ms: int | None = None) -> int:
        """Forget producers idle longer than the expiration; returns how many."""
        now = _now_ms() if now_ms is None else now_ms
        stale = [pid for pid, e in self.producers.items() if now - e.last_update_ms >= self.expiration_ms]
        for pid in stale:
            del self.producers[pid]
        if stale:
            self.dirty = True
        return len(stale)

    # --- snapshots -------------------------------------------------------------------------------

    def snapshot(self, offset: int) -> bytes:
        """The table as snapshot bytes (taken on the event loop, written elsewhere)."""
        producers = {
            str(pid): {"epoch": e.epoch, "last_update_ms": e.last_update_ms,
                       "batches": [[b.first_seq, b.last_seq, b.first_offset, b.last_offset, b.timestamp]
                                   for b in e.batches]}
            for pid, e in self.producers.items()
        }
        return json.dumps({"version": SNAPSHOT_VERSION, "offset": offset, "producers": producers},
                          sort_keys=True).encode()

    def restore(self, data: bytes) -> int:
        """Load a snapshot; returns the offset it covers. ValueError if it does not parse."""
        raw = json.loads(data)
        if not isinstance(raw, dict) or raw.get("version") != SNAPSHOT_VERSION:
            raise ValueError(f"unknown producer state snapshot version {raw.get('version')!r}")
        producers: dict[int, ProducerEntry] = {}
        for pid, item in raw["producers"].items():
            entry = ProducerEntry(int(item["epoch"]), last_update_ms=int(item["last_update_ms"]))
            for first_seq, last_seq, first_offset, last_offset, timestamp in item["batches"]:
                entry.batches.append(BatchMetadata(first_seq, last_seq, first_offset, last_offset, timestamp))
            producers[int(pid)] = entry
        self.producers = producers
        return int(raw["offset"])


def read_snapshot(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def remove_snapshot(path: Path) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        return
    fsync_dir(path.parent)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000
