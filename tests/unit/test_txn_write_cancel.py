"""A client that disconnects while the coordinator writes a transactional id's state cancels its
request task: the write, the in-memory state that mirrors it and (for Prepare) the markers still
happen together (broker/txn/coordinator.py `_write`), and the id stays pending meanwhile."""

import asyncio

import pytest

from broker.txn import completion as completion_module
from broker.txn.state_log import TRANSACTION_STATE_TOPIC, TxnError, TxnMetadata, TxnState
from protocol.errors import ErrorCode
from tests.unit.test_txn_coordinator_background import coordinator, owned, wait_for
from tests.unit.test_txn_epoch_bump import _Recording

PID = 7


class _HeldStateWrites(_Recording):
    """State writes wait for `release`; `held` is set once one is waiting."""

    def __init__(self) -> None:
        super().__init__()
        self.held = asyncio.Event()
        self.release = asyncio.Event()

    async def append_records(self, batches, **kwargs):
        if any(topic == TRANSACTION_STATE_TOPIC for topic, *_ in batches):
            self.held.set()
            await self.release.wait()
        return await super().append_records(batches, **kwargs)


async def _cancelled_mid_write(replicas: _HeldStateWrites, request) -> asyncio.Task:
    task = asyncio.create_task(request)
    await replicas.held.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    return task


async def test_an_end_txn_cancelled_mid_write_still_takes_its_state_and_writes_the_markers(monkeypatch):
    monkeypatch.setattr(completion_module, "MARKER_RETRY_S", 0.01)
    replicas = _HeldStateWrites()
    txns = coordinator(replicas)
    meta = owned(txns, TxnMetadata("tid", PID, 1, 60_000, TxnState.ONGOING, {("facts", 0)}, start_ms=1,
                                   client_transaction_version=2))
    await _cancelled_mid_write(replicas, txns.end_txn_v2("tid", PID, 1, True))
    # the write is still under way: the client's retry waits, it starts no second write
    assert meta.pending
    with pytest.raises(TxnError) as retried:
        async with asyncio.timeout(5):
            await txns.end_txn_v2("tid", PID, 1, True)
    assert retried.value.error_code == ErrorCode.CONCURRENT_TRANSACTIONS
    replicas.release.set()
    await wait_for(lambda: meta.state == TxnState.COMPLETE_COMMIT)
    assert [w[:2] for w in replicas.written] == [("state", TxnState.PREPARE_COMMIT), ("marker", "facts"),
                                                  ("state", TxnState.COMPLETE_COMMIT)]
    assert meta.producer_epoch == 2 and not meta.pending
    await txns.stop()


async def test_an_add_cancelled_mid_write_still_takes_its_partitions(monkeypatch):
    replicas = _HeldStateWrites()
    txns = coordinator(replicas)
    meta = owned(txns, TxnMetadata("tid", PID, 1, 60_000, TxnState.EMPTY, set(), start_ms=-1))
    await _cancelled_mid_write(replicas, txns.add_partitions("tid", PID, 1, {("facts", 0)}))
    assert meta.pending
    replicas.release.set()
    await wait_for(lambda: not meta.pending)
    assert meta.state == TxnState.ONGOING and meta.partitions == {("facts", 0)}
    await txns.stop()
