"""Which fetched batches a reader hands over: Kafka's consumer rule (Fetcher's CompletedFetch), by header.

Control batches (transaction markers) are never data. Under READ_COMMITTED a Fetch answer also lists the
aborted transactions in its range as (producer id, first offset): from a batch at or after its first
offset on, that producer's transactional batches are aborted data, until its ABORT marker ends the
transaction. A batch is dropped whole from its header; only an aborted producer's marker is decoded, to
tell ABORT from COMMIT.
"""

from __future__ import annotations

from collections.abc import Iterable

from protocol.control_records import ControlType, read_marker
from protocol.records import RecordBatch


class BatchFilter:
    """One partition's share of one Fetch answer; call `skip` on its batches in order."""

    __slots__ = ("_pending", "_aborted")

    def __init__(self, aborted_transactions: Iterable[tuple[int, int]] | None = None) -> None:
        # (first offset, producer id), latest first so that pop() takes the earliest
        self._pending = sorted(((first, pid) for pid, first in aborted_transactions or ()), reverse=True)
        self._aborted: set[int] = set()

    def skip(self, batch: RecordBatch) -> bool:
        """True when `batch` holds no record to hand over: a control batch, or aborted transactional data."""
        if not self._pending and not self._aborted:
            return batch.is_control  # READ_UNCOMMITTED, or nothing aborted in range
        producer_id = batch.producer_id
        if producer_id >= 0:
            last = batch.last_offset
            while self._pending and self._pending[-1][0] <= last:
                self._aborted.add(self._pending.pop()[1])
        if batch.is_control:
            if producer_id in self._aborted and read_marker(batch)[0] == ControlType.ABORT:
                self._aborted.discard(producer_id)
            return True
        return batch.is_transactional and producer_id in self._aborted
