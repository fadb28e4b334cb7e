"""What the cleaner knows of transactions while it walks a log (Kafka's CleanedTransactionMetadata).

The round's aborted transactions come from the log's `.txnindex` (broker/log/txn_index.py). Walking
batches in offset order, a transaction is "ongoing aborted" from its first offset to its ABORT marker:
its data batches are dropped (never mapped, never copied). Data batches of other transactions are
committed (the cleaned range ends below the last stable offset, so none is open) and treated like any
other batch.

A marker may go only once no batch of its transaction remains: an ABORT marker is kept (and its index
entry written to the cleaned segment) when the walk met a batch of its transaction, a COMMIT marker
when the walk met a data batch of it; otherwise it is discardable, and the cleaner removes it once its
own delete horizon has passed (cleaner.py).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable

from broker.log.txn_index import AbortedTxn
from protocol.control_records import ControlType, read_marker
from protocol.errors import ProtocolError
from protocol.records import RecordBatch


class CleanedTxns:
    def __init__(self, aborted: Iterable[AbortedTxn], from_offset: int) -> None:
        """`aborted`: the log's aborted transactions; those whose marker lies below `from_offset` (where
        the walk begins) are closed already and ignored."""
        self._pending = [(t.first_offset, t.last_offset, t) for t in aborted if t.last_offset >= from_offset]
        heapq.heapify(self._pending)
        self._aborted: dict[int, AbortedTxn] = {}  # producer id -> its transaction being aborted
        self._aborted_seen: set[int] = set()  # producers whose aborted transaction had a batch in the walk
        self._committed_seen: set[int] = set()  # producers with a committed transaction's batch in the walk
        self.kept_aborts: list[AbortedTxn] = []  # index entries for the segment being written

    def _open_up_to(self, offset: int) -> None:
        while self._pending and self._pending[0][0] <= offset:
            txn = heapq.heappop(self._pending)[2]
            self._aborted.setdefault(txn.producer_id, txn)

    def on_batch(self, batch: RecordBatch) -> bool:
        """A data batch was read: True when it belongs to an aborted transaction (drop its records)."""
        if not batch.is_transactional:
            if self._pending:
                self._open_up_to(batch.last_offset)
            return False
        self._open_up_to(batch.last_offset)
        producer_id = batch.producer_id
        if producer_id in self._aborted:
            self._aborted_seen.add(producer_id)
            return True
        self._committed_seen.add(producer_id)
        return False

    def on_control_batch(self, batch: RecordBatch) -> bool:
        """A control batch was read: True when no batch of its transaction remains, so the marker may
        go once its delete horizon has passed. A kept ABORT marker's index entry joins `kept_aborts`."""
        self._open_up_to(batch.last_offset)
        try:
            control_type = read_marker(batch)[0]
        except ProtocolError:  # an empty control batch: an earlier round already emptied it
            return True
        producer_id = batch.producer_id
        if control_type == ControlType.ABORT:
            txn = self._aborted.pop(producer_id, None)
            if txn is not None and producer_id in self._aborted_seen:
                self._aborted_seen.discard(producer_id)
                self.kept_aborts.append(txn)
                return False
            return True
        if control_type == ControlType.COMMIT:
            seen = producer_id in self._committed_seen
            self._committed_seen.discard(producer_id)
            return not seen
        return False
