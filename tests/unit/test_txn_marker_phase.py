"""While a transaction's markers are written (Prepare* written, Complete* not yet), its id is changing
state, as Kafka 4.3.1's pendingState CompleteCommit/CompleteAbort: the producer's next request meets
CONCURRENT_TRANSACTIONS and retries, never a verdict against the epoch Prepare already bumped.

franz-go's TestTxnEtl met it: EndTxn v5 commit at epoch 1 answered (id, 2); the session's next
transaction produced nothing and ended with EndTxn v5 abort at epoch 2 while the commit's markers were
still being written, which was answered PRODUCER_FENCED (PrepareCommit takes only a retry at epoch 1),
a fatal error for the producer."""

from __future__ import annotations

import asyncio

import pytest

from broker.txn import completion as completion_module
from broker.txn.state_log import TxnError, TxnMetadata, TxnState
from protocol.errors import ErrorCode
from tests.unit.test_txn_coordinator_background import FlakyReplicas, coordinator, owned, wait_for

PID = 7


class _Ids:
    async def next_id(self) -> int:
        return 500


class HeldMarkers(FlakyReplicas):
    """Markers wait for `release`; state records are written at once, the first `failures` raising."""

    def __init__(self) -> None:
        super().__init__(failures=0)
        self.release = asyncio.Event()
        self.producer_ids = _Ids()

    async def append_records(self, batches, **kwargs):
        if any(batch.header().is_control for *_, batch in batches):
            await self.release.wait()
        return await super().append_records(batches, **kwargs)


async def _refused(call) -> ErrorCode:
    with pytest.raises(TxnError) as refused:
        await call
    return ErrorCode(refused.value.error_code)


@pytest.fixture
def fast_retries(monkeypatch):
    monkeypatch.setattr(completion_module, "MARKER_RETRY_S", 0.01)


async def test_the_next_end_txn_v5_during_the_markers_is_concurrent_transactions(fast_retries):
    replicas = HeldMarkers()
    txns = coordinator(replicas)
    meta = owned(txns, TxnMetadata("tid", PID, 1, 60_000, TxnState.ONGOING, {("facts", 0)}, start_ms=1,
                                   client_transaction_version=2))
    assert await txns.end_txn_v2("tid", PID, 1, True) == (PID, 2)
    # the producer goes on at epoch 2 before the commit's markers are written
    assert await _refused(txns.end_txn_v2("tid", PID, 2, False)) == ErrorCode.CONCURRENT_TRANSACTIONS
    assert await _refused(txns.add_partitions("tid", PID, 2, {("facts", 0)}, client_version=2)) \
        == ErrorCode.CONCURRENT_TRANSACTIONS
    assert await _refused(txns.init_producer_id("tid", 60_000, PID, 2)) == ErrorCode.CONCURRENT_TRANSACTIONS
    assert await _refused(txns.end_txn_v2("tid", PID, 1, True)) == ErrorCode.CONCURRENT_TRANSACTIONS  # a retry
    replicas.release.set()
    await wait_for(lambda: meta.state == TxnState.COMPLETE_COMMIT and not meta.pending)
    # the retried abort now ends the (empty) transaction with the epoch bumped
    assert await txns.end_txn_v2("tid", PID, 2, False) == (PID, 3)
    # no markers to write: its completion, started with the Prepare write, may have ended already
    assert meta.producer_epoch == 3 and meta.state in (TxnState.PREPARE_ABORT, TxnState.COMPLETE_ABORT)
    await wait_for(lambda: meta.state == TxnState.COMPLETE_ABORT and not meta.pending)
    await txns.stop()


async def test_the_id_stays_changing_state_while_the_complete_write_is_retried(fast_retries):
    replicas = HeldMarkers()
    replicas.release.set()
    txns = coordinator(replicas)
    meta = owned(txns, TxnMetadata("tid", PID, 1, 60_000, TxnState.ONGOING, {("facts", 0)}, start_ms=1,
                                   client_transaction_version=2))
    gate = asyncio.Event()
    writes = 0
    append = replicas.append_records

    async def complete_write_fails_until_gate(batches, **kwargs):
        nonlocal writes
        if not any(batch.header().is_control for *_, batch in batches):
            writes += 1
            if writes > 1 and not gate.is_set():  # the Complete write, until the test lets it through
                raise RuntimeError("unforeseen")
        return await append(batches, **kwargs)

    replicas.append_records = complete_write_fails_until_gate  # type: ignore[method-assign]
    assert await txns.end_txn_v2("tid", PID, 1, True) == (PID, 2)
    await wait_for(lambda: writes >= 3)  # the Complete write failed at least twice
    assert meta.state == TxnState.PREPARE_COMMIT
    assert await _refused(txns.end_txn_v2("tid", PID, 2, True)) == ErrorCode.CONCURRENT_TRANSACTIONS
    gate.set()
    await wait_for(lambda: meta.state == TxnState.COMPLETE_COMMIT and not meta.pending)
    await txns.stop()


async def test_an_end_txn_v4_abort_during_the_commits_markers_is_concurrent_transactions(fast_retries):
    """Transactions version 1 keeps the epoch; Kafka answers the change under way before the state."""
    replicas = HeldMarkers()
    txns = coordinator(replicas)
    meta = owned(txns, TxnMetadata("tid", PID, 4, 60_000, TxnState.ONGOING, {("facts", 0)}, start_ms=1))
    await txns.end_txn("tid", PID, 4, True)
    assert await _refused(txns.end_txn("tid", PID, 4, False)) == ErrorCode.CONCURRENT_TRANSACTIONS
    # Kafka 4.3.1 (KAFKA-18464): the id, then the change under way, then the epoch
    assert await _refused(txns.end_txn("tid", PID, 3, False)) == ErrorCode.CONCURRENT_TRANSACTIONS
    assert await _refused(txns.end_txn("tid", PID + 1, 4, False)) == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    replicas.release.set()
    await wait_for(lambda: meta.state == TxnState.COMPLETE_COMMIT and not meta.pending)
    assert await _refused(txns.end_txn("tid", PID, 4, False)) == ErrorCode.INVALID_TXN_STATE
    await txns.stop()


async def test_a_transaction_found_prepared_at_load_is_changing_state_until_complete(fast_retries):
    replicas = HeldMarkers()
    txns = coordinator(replicas)
    meta = owned(txns, TxnMetadata("tid", PID, 3, 60_000, TxnState.PREPARE_ABORT, {("facts", 0)}, start_ms=1,
                                   client_transaction_version=2))
    txns._complete_prepared([meta])
    assert await _refused(txns.end_txn_v2("tid", PID, 3, False)) == ErrorCode.CONCURRENT_TRANSACTIONS
    replicas.release.set()
    await wait_for(lambda: meta.state == TxnState.COMPLETE_ABORT and not meta.pending)
    await txns.stop()
