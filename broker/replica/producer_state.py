"""Idempotent producer state of one partition: per producer id, its epoch and its last five batches.

Checks on a client append (Kafka's `UnifiedLog.analyzeAndValidateProducerState` and
`ProducerAppendInfo`, non-transactional part):

1. A batch whose epoch and sequence range equal one of the producer's last five is a duplicate (a
   retry): it is not written again and the client gets the ORIGINAL offsets with error NONE. Modern
   Kafka never answers DUPLICATE_SEQUENCE_NUMBER; neither do we.
2. An epoch below the producer's current one: INVALID_PRODUCER_EPOCH.
3. A new (higher) epoch must start at sequence 0, the current epoch must continue at last + 1
   (wrapping after INT32_MAX), and at sequence 0 when it has no batch here yet (a transactions
   version 2 marker moved the producer to the epoch it carries): otherwise OUT_OF_ORDER_SEQUENCE_NUMBER.
4. A producer id with no state here (new, or its records were deleted or expired) may start at any
   sequence.
5. A producer with a transaction open here writes transactional batches only: INVALID_TXN_STATE.
6. While a transaction's first batch here is being verified (KIP-890, the guard below: Kafka's
   VerificationStateEntry), no batch past the lowest sequence seen verifying, and for transactions
   version 2 only sequence 0 while the producer has no batch here (OUT_OF_ORDER_SEQUENCE_NUMBER):
   a later batch verified after an earlier one was refused (CONCURRENT_TRANSACTIONS while the last
   transaction's markers are written) would leave a gap the client fills by resending from the
   refused one, whose sequence the partition would then refuse. An epoch below the producer's makes
   no guard (INVALID_PRODUCER_EPOCH: a zombie's would bound the live producer), and every
   transactional batch spends the guard (Kafka's updateProducers). A batch whose transaction is
   open here already presents OPEN_TRANSACTION_ONLY instead, refused (INVALID_TXN_STATE) if a marker
   ended that transaction before its append.

Transactions: a producer's first transactional batch opens its transaction here (its first offset
is remembered); the coordinator's COMMIT or ABORT marker closes it (`complete_txn`). A marker from
an older producer epoch is INVALID_PRODUCER_EPOCH, from an older coordinator epoch
TRANSACTION_COORDINATOR_FENCED. The first unstable offset is the first offset of the earliest
transaction not yet closed, or closed by a marker not yet below the high watermark; an abort
yields the aborted-transaction index entry (broker/log/txn_index.py).

Persistence: the state is rebuilt at load from a snapshot plus the batch headers after it, so it
survives restarts, clean or not. The snapshot is `producer-state.json` in the partition directory:

    {"version": 2, "offset": <log end offset it covers>, "producers": {"<id>": {"epoch": e,
     "batches": [[first_seq, last_seq, first_offset, last_offset, timestamp], ...],
     "coordinator_epoch": c, "txn_first_offset": f (-1: no transaction open),
     "last_timestamp": t (of the last batch or marker; absent in older snapshots)}}}

(version 1, before transactions, is still read: it has no open transactions.)

written atomically (tmp, fsync, rename, fsync dir) at shutdown and every
`SNAPSHOT_INTERVAL_MS` for partitions that changed. Loading reads it if its offset is at or below the
log end offset, then scans the batch headers from there (from the log start offset when there is no
usable snapshot) without decoding records. A snapshot beyond the log end offset (the tail was lost
in a crash) is deleted and the whole log is scanned. Producers idle longer than
`producer.id.expiration.ms` (a dynamic broker property, Kafka's default one day; the caller passes
the value in force), counted from the timestamp of their last batch or marker as Kafka counts it, are
forgotten, unless a transaction of theirs is open; so are verification guards (KIP-890) taken that
long ago and never spent, as Kafka drops its verification states (keyed by producer id, aged from
when they were made).
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
from broker.log.txn_index import AbortedTxn
from protocol.control_records import ControlType
from protocol.errors import CodedError, ErrorCode
from protocol.records import TRANSACTIONAL_BIT, BatchHeader
from protocol.varint import INT32_MAX

SNAPSHOT_FILE = "producer-state.json"
SNAPSHOT_VERSION = 2
_READABLE_SNAPSHOT_VERSIONS = (1, 2)
BATCHES_TO_RETAIN = 5  # ProducerStateEntry.NUM_BATCHES_TO_RETAIN
SNAPSHOT_INTERVAL_MS = 60_000
NO_PRODUCER_ID = -1
NO_SEQUENCE = -1
NO_OFFSET = -1
MAX_PRODUCER_EPOCH = 2**15 - 1


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
    coordinator_epoch: int = -1
    txn_first_offset: int = NO_OFFSET  # the open transaction's first offset here
    last_timestamp: int = -1  # of its last batch or marker here (Kafka's lastTimestamp, DescribeProducers)

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

    def add(self, epoch: int, batch: BatchMetadata) -> None:
        if epoch != self.epoch:
            self.epoch = epoch
            self.batches.clear()
        self.batches.append(batch)
        self.last_timestamp = batch.timestamp


class VerificationGuard:
    """A KIP-890 verification guard: compared by identity; `created_ms` ages it for expiry. It also
    keeps what Kafka's VerificationStateEntry keeps: the lowest sequence seen verifying at the newest
    epoch, and whether the producer is on transactions version 2 (`epoch_bump`)."""

    __slots__ = ("created_ms", "lowest_seq", "epoch", "epoch_bump")

    def __init__(self, created_ms: int, sequence: int = NO_SEQUENCE, epoch: int = -1,
                 epoch_bump: bool = False) -> None:
        self.created_ms = created_ms
        self.lowest_seq = sequence
        self.epoch = epoch
        self.epoch_bump = epoch_bump

    def saw(self, sequence: int, epoch: int) -> None:
        """Another batch verified under this guard (Kafka's maybeUpdateLowestSequenceAndEpoch)."""
        if epoch == self.epoch and sequence < self.lowest_seq:
            self.lowest_seq = sequence
        if epoch > self.epoch:
            self.epoch, self.lowest_seq = epoch, sequence


# The guard of a batch whose producer's transaction was open on the partition already when it was
# verified (start_verification's answer then; Kafka's SENTINEL with verification on): never taken, so
# it lets the batch in only while that transaction is still open, not after its marker.
OPEN_TRANSACTION_ONLY = VerificationGuard(0)


class ProducerStateManager:
    """The producer table of one partition. Not thread-safe: used on the event loop only, except
    for the blocking `load_blocking` that the caller runs in an executor (the snapshot is written by
    the log's cold-path writer, broker/log/cold_files.py)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.producers: dict[int, ProducerEntry] = {}
        # Open transactions, producer id -> first offset, in the order they opened (= offset order).
        self.ongoing: dict[int, int] = {}
        # Closed transactions whose marker the high watermark has not passed yet: (first, marker offset).
        self.unreplicated: deque[tuple[int, int]] = deque()
        self.dirty = False  # changed since the last snapshot
        # KIP-890 verification guards, producer id -> guard: taken before the coordinator is asked
        # whether a new transaction may start here, dropped by its first batch or any marker.
        self.verifying: dict[int, VerificationGuard] = {}
        # The offset the snapshot on disk covers, once loaded or written: a load replays only the markers
        # from there on, so the log cleaner keeps those (broker/log/cleaned_txns.py).
        self.snapshot_offset: int | None = None

    @property
    def snapshot_path(self) -> Path:
        return self.directory / SNAPSHOT_FILE

    def __len__(self) -> int:
        return len(self.producers)

    def clear(self) -> None:
        self.snapshot_offset = None
        self.producers.clear()
        self.ongoing.clear()
        self.unreplicated.clear()
        self.verifying.clear()

    # --- the checks on a client append -----------------------------------------------------------

    def check(self, producer_id: int, epoch: int, first_seq: int, last_seq: int,
              transactional: bool = False) -> BatchMetadata | None:
        """Validate a client batch before it is written. Returns the original batch for a duplicate,
        None for a batch to append; raises ProducerStateError otherwise."""
        entry = self.producers.get(producer_id)
        # Kafka's order: duplicate, epoch, then sequence (the verification bounds first among those).
        guard = self.verifying.get(producer_id) if self.verifying else None
        if entry is None:
            if guard is not None:
                self._check_verifying(producer_id, guard, entry, first_seq)
            return None
        if epoch == entry.epoch and entry.batches and in_sequence(entry.batches[-1].last_seq, first_seq):
            if guard is not None:  # the next batch repeats no retained one and its epoch is current
                self._check_verifying(producer_id, guard, entry, first_seq)
            self._check_txn_state(producer_id, entry, transactional)
            return None  # the usual case, the next batch: sequences only grow, so it repeats no retained batch
        duplicate = entry.find_duplicate(epoch, first_seq, last_seq)
        if duplicate is not None:
            return duplicate
        if epoch < entry.epoch:
            raise ProducerStateError(
                ErrorCode.INVALID_PRODUCER_EPOCH,
                f"producer {producer_id} epoch {epoch} is below the current epoch {entry.epoch}",
            )
        if guard is not None:
            self._check_verifying(producer_id, guard, entry, first_seq)
        if epoch > entry.epoch:
            if first_seq != 0:
                raise ProducerStateError(
                    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                    f"producer {producer_id}: new epoch {epoch} must start at sequence 0, not {first_seq}",
                )
        elif not in_sequence(entry.last_seq, first_seq):  # no batch at this epoch yet: NO_SEQUENCE, so 0
            raise ProducerStateError(
                ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                f"producer {producer_id}: sequence {first_seq} does not follow {entry.last_seq}",
            )
        self._check_txn_state(producer_id, entry, transactional)
        return None

    def check_epoch(self, producer_id: int, epoch: int) -> None:
        """The one check on a coordinator's own transactional batch: it carries no sequence."""
        entry = self.producers.get(producer_id)
        if entry is not None and epoch < entry.epoch:
            raise ProducerStateError(ErrorCode.INVALID_PRODUCER_EPOCH,
                                     f"producer {producer_id} epoch {epoch} is below the current epoch {entry.epoch}")

    @staticmethod
    def _check_verifying(producer_id: int, guard: VerificationGuard, entry: ProducerEntry | None,
                         first_seq: int) -> None:
        """Kafka's ProducerAppendInfo.checkSequence with a verification under way."""
        if guard.epoch_bump and first_seq != 0 and (entry is None or not entry.batches):
            raise ProducerStateError(
                ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                f"producer {producer_id}: sequence {first_seq}, but a transactions version 2 producer with no "
                "batch here starts at 0")
        if first_seq > guard.lowest_seq:
            raise ProducerStateError(
                ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                f"producer {producer_id}: sequence {first_seq} is past {guard.lowest_seq}, the earliest seen "
                "while its transaction is verified here")

    @staticmethod
    def _check_txn_state(producer_id: int, entry: ProducerEntry, transactional: bool) -> None:
        if entry.txn_first_offset != NO_OFFSET and not transactional:
            raise ProducerStateError(
                ErrorCode.INVALID_TXN_STATE,
                f"expected a transactional write from producer {producer_id}: its transaction opened at "
                f"offset {entry.txn_first_offset} is still open",
            )

    def update(self, producer_id: int, epoch: int, batch: BatchMetadata, transactional: bool = False) -> None:
        entry = self.producers.get(producer_id)
        if entry is None:
            entry = self.producers[producer_id] = ProducerEntry(epoch)
        entry.add(epoch, batch)
        if transactional:
            # Kafka's updateProducers: any transactional batch spends the guard, so none outlives the
            # transaction it was taken for (its lowest sequence would bound the next one's batches).
            self.verifying.pop(producer_id, None)
            if entry.txn_first_offset == NO_OFFSET:
                entry.txn_first_offset = batch.first_offset
                self.ongoing[producer_id] = batch.first_offset
        self.dirty = True

    # --- transactions ----------------------------------------------------------------------------

    def in_transaction(self, producer_id: int, epoch: int) -> bool:
        """Kafka's hasOngoingTransaction: the producer's transaction at this epoch is open here."""
        entry = self.producers.get(producer_id)
        return entry is not None and entry.epoch == epoch and entry.txn_first_offset != NO_OFFSET

    def duplicate_of(self, producer_id: int, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        """The retained batch a client's batch repeats, if any: Kafka looks for it before any other check."""
        entry = self.producers.get(producer_id)
        return None if entry is None else entry.find_duplicate(epoch, first_seq, last_seq)

    def start_verification(self, producer_id: int, epoch: int, sequence: int = NO_SEQUENCE,
                           epoch_bump: bool = False, now_ms: int | None = None) -> VerificationGuard:
        """The guard a new transaction's first batch must present (KIP-890), or OPEN_TRANSACTION_ONLY
        when the producer's transaction is open here already and needs no verification; ProducerStateError
        (INVALID_PRODUCER_EPOCH) for an epoch below the producer's. `sequence`: the
        batch's first (NO_SEQUENCE for a coordinator's offsets); `epoch_bump`: transactions version 2."""
        if self.in_transaction(producer_id, epoch):
            return OPEN_TRANSACTION_ONLY
        entry = self.producers.get(producer_id)
        if entry is not None and epoch < entry.epoch:
            # Kafka's maybeStartTransactionVerification: a fenced epoch makes no guard, whose lowest
            # sequence would then refuse the live producer's next batch.
            raise ProducerStateError(ErrorCode.INVALID_PRODUCER_EPOCH,
                                     f"producer {producer_id} epoch {epoch} is below the current epoch {entry.epoch}")
        guard = self.verifying.get(producer_id)
        if guard is None:
            guard = self.verifying[producer_id] = VerificationGuard(_now_ms() if now_ms is None else now_ms,
                                                                    sequence, epoch, epoch_bump)
        guard.saw(sequence, epoch)
        return guard

    def check_marker(self, producer_id: int, epoch: int, coordinator_epoch: int,
                     transaction_version: int = 0) -> None:
        """Refuse a marker from a fenced producer epoch or transaction coordinator. A transactions
        version 2 marker carries the epoch bumped at its end, so it must be above the producer's
        (Kafka's ProducerAppendInfo): at the same epoch only the retry of a marker already written
        (no transaction open, or the epoch at its maximum) is taken."""
        entry = self.producers.get(producer_id)
        if entry is None:
            return
        fenced = epoch <= entry.epoch if transaction_version >= 2 else epoch < entry.epoch
        retried = (transaction_version >= 2 and epoch == entry.epoch
                   and (entry.txn_first_offset == NO_OFFSET or epoch == MAX_PRODUCER_EPOCH))
        if fenced and not retried:
            relation = "at or below" if transaction_version >= 2 else "below"
            raise ProducerStateError(
                ErrorCode.INVALID_PRODUCER_EPOCH,
                f"marker for producer {producer_id} at epoch {epoch}, {relation} the current epoch {entry.epoch}",
            )
        if coordinator_epoch < entry.coordinator_epoch:
            raise ProducerStateError(
                ErrorCode.TRANSACTION_COORDINATOR_FENCED,
                f"marker for producer {producer_id} from coordinator epoch {coordinator_epoch}, below "
                f"{entry.coordinator_epoch}",
            )

    def complete_txn(self, producer_id: int, epoch: int, control_type: int, coordinator_epoch: int,
                     marker_offset: int, marker_timestamp: int) -> AbortedTxn | None:
        """A marker was written at `marker_offset`: close the producer's transaction here. Returns
        the aborted-transaction index entry for an ABORT, None for a COMMIT."""
        entry = self.producers.get(producer_id)
        if entry is None:
            entry = self.producers[producer_id] = ProducerEntry(epoch)
        elif epoch != entry.epoch:
            entry.epoch = epoch
            entry.batches.clear()
        first = entry.txn_first_offset if entry.txn_first_offset != NO_OFFSET else marker_offset
        entry.txn_first_offset = NO_OFFSET
        entry.coordinator_epoch = coordinator_epoch
        entry.last_timestamp = marker_timestamp
        self.ongoing.pop(producer_id, None)
        self.verifying.pop(producer_id, None)  # a batch verified before this marker may not reopen it
        self.unreplicated.append((first, marker_offset))
        self.dirty = True
        if control_type != ControlType.ABORT:
            return None
        # The last stable offset once this transaction is closed: the next open one, else past the marker.
        stable = next(iter(self.ongoing.values()), marker_offset + 1)
        return AbortedTxn(producer_id, first, marker_offset, stable)

    def high_watermark_moved(self, high_watermark: int) -> None:
        """Markers below the high watermark are replicated: their transactions stop holding the last
        stable offset back."""
        unreplicated = self.unreplicated
        while unreplicated and unreplicated[0][1] < high_watermark:
            unreplicated.popleft()

    def first_unstable_offset(self) -> int | None:
        """The first offset of the earliest transaction a READ_COMMITTED reader must not pass yet."""
        first = next(iter(self.ongoing.values()), None)
        for txn_first, _ in self.unreplicated:
            if first is None or txn_first < first:
                first = txn_first
        return first

    def apply(self, header: BatchHeader, control_type: int = -1) -> AbortedTxn | None:
        """Replay a batch read back from the log (no checks: it was checked when written); a control
        batch comes with its control type. Returns what an ABORT marker adds to the aborted index."""
        if header.producer_id < 0:
            return None
        entry = self.producers.get(header.producer_id)
        if entry is not None and header.producer_epoch < entry.epoch:
            return None
        if header.is_control:
            if control_type < 0:
                return None
            return self.complete_txn(header.producer_id, header.producer_epoch, control_type, -1,
                                     header.base_offset, header.max_timestamp)
        batch = BatchMetadata(header.base_sequence, last_sequence(header.base_sequence, header.last_offset_delta),
                              header.base_offset, header.last_offset, header.max_timestamp)
        self.update(header.producer_id, header.producer_epoch, batch,
                    transactional=bool(header.attributes & TRANSACTIONAL_BIT))
        return None

    def expire(self, expiration_ms: int, now_ms: int | None = None) -> int:
        """Forget producers whose last batch or marker is `expiration_ms` old or older by its
        timestamp (Kafka's rule: records stamped long ago expire their producer at once), none with
        an open transaction, and the verification guards taken that long ago; returns how many
        producers."""
        now = _now_ms() if now_ms is None else now_ms
        stale = [pid for pid, e in self.producers.items()
                 if now - e.last_timestamp >= expiration_ms and e.txn_first_offset == NO_OFFSET]
        for pid in stale:
            del self.producers[pid]
        for pid in [pid for pid, g in self.verifying.items() if now - g.created_ms >= expiration_ms]:
            del self.verifying[pid]  # not in the snapshot: the table is not dirtied
        if stale:
            self.dirty = True
        return len(stale)

    # --- snapshots -------------------------------------------------------------------------------

    def snapshot(self, offset: int) -> bytes:
        """The table as snapshot bytes (taken on the event loop, written elsewhere)."""
        producers = {
            str(pid): {"epoch": e.epoch,
                       "batches": [[b.first_seq, b.last_seq, b.first_offset, b.last_offset, b.timestamp]
                                   for b in e.batches],
                       "coordinator_epoch": e.coordinator_epoch, "txn_first_offset": e.txn_first_offset,
                       "last_timestamp": e.last_timestamp}
            for pid, e in self.producers.items()
        }
        return json.dumps({"version": SNAPSHOT_VERSION, "offset": offset, "producers": producers},
                          sort_keys=True).encode()

    def restore(self, data: bytes) -> int:
        """Load a snapshot; returns the offset it covers. ValueError if it does not parse."""
        raw = json.loads(data)
        if not isinstance(raw, dict) or raw.get("version") not in _READABLE_SNAPSHOT_VERSIONS:
            raise ValueError(f"unknown producer state snapshot version {raw.get('version')!r}")
        producers: dict[int, ProducerEntry] = {}
        for pid, item in raw["producers"].items():
            entry = ProducerEntry(int(item["epoch"]),
                                  coordinator_epoch=int(item.get("coordinator_epoch", -1)),
                                  txn_first_offset=int(item.get("txn_first_offset", NO_OFFSET)))
            for first_seq, last_seq, first_offset, last_offset, timestamp in item["batches"]:
                entry.batches.append(BatchMetadata(first_seq, last_seq, first_offset, last_offset, timestamp))
            # Snapshots before last_timestamp was kept: the last batch's, as it was then.
            entry.last_timestamp = int(item.get("last_timestamp", entry.batches[-1].timestamp if entry.batches else -1))
            producers[int(pid)] = entry
        self.producers = producers
        opened = sorted((e.txn_first_offset, pid) for pid, e in producers.items() if e.txn_first_offset != NO_OFFSET)
        self.ongoing = {pid: first for first, pid in opened}
        self.unreplicated.clear()
        self.snapshot_offset = int(raw["offset"])
        return self.snapshot_offset


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
