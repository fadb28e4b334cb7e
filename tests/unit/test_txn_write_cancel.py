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


def _tv2_id(txns, epoch: int, state: TxnState, partitions=frozenset(), tid: str = "tid",
            producer_id: int = PID) -> TxnMetadata:
    """An id of a transactions version 2 producer, held by the coordinator."""
    return owned(txns, TxnMetadata(tid, producer_id, epoch, 60_000, state, set(partitions), start_ms=1,
                                   client_transaction_version=2))


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
    meta = _tv2_id(txns, 1, TxnState.ONGOING, {("facts", 0)})
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


async def test_two_adds_checked_before_either_write_started_leave_one_write_and_the_id_free():
    """Kafka Streams' producer on transactions version 2: two leaders add partitions of one new
    transaction at once (its Produce and its TxnOffsetCommit). Both checks ran before the first write's
    task did; the second wrote over the first, lost its partitions and left the id pending for good, so
    every later add was CONCURRENT_TRANSACTIONS and the transaction was never timed out."""
    replicas = _HeldStateWrites()
    txns = coordinator(replicas)
    meta = _tv2_id(txns, 1, TxnState.COMPLETE_COMMIT)
    first = asyncio.create_task(txns.add_partitions("tid", PID, 1, {("facts", 0)}, client_version=2))
    second = asyncio.create_task(txns.add_partitions("tid", PID, 1, {("facts", 1)}, client_version=2))
    await replicas.held.wait()
    replicas.release.set()
    answers = await asyncio.gather(first, second, return_exceptions=True)
    assert answers[0] is None
    assert isinstance(answers[1], TxnError) and answers[1].error_code == ErrorCode.CONCURRENT_TRANSACTIONS
    assert not meta.pending and meta.state == TxnState.ONGOING and meta.partitions == {("facts", 0)}
    # the retry is added to the same transaction
    await txns.add_partitions("tid", PID, 1, {("facts", 1)}, client_version=2)
    assert meta.partitions == {("facts", 0), ("facts", 1)} and not meta.pending
    assert await txns.abort_timed_out(now_ms=meta.start_ms + 61_000) == 1
    await wait_for(lambda: meta.state == TxnState.COMPLETE_ABORT and not meta.pending)
    await txns.stop()


class _FirstStateWriteHeld(_HeldStateWrites):
    """Only the first state write waits for `release`."""

    async def append_records(self, batches, **kwargs):
        if any(topic == TRANSACTION_STATE_TOPIC for topic, *_ in batches) and not self.held.is_set():
            self.held.set()
            await self.release.wait()
        return await _Recording.append_records(self, batches, **kwargs)


async def test_a_timed_out_transaction_committed_while_an_earlier_one_is_aborted_is_not_aborted(monkeypatch):
    """The timeout sweep picks every expired transaction first and aborts them one after another: one
    whose producer commits it meanwhile is left committed (it was aborted after its CompleteCommit)."""
    monkeypatch.setattr(completion_module, "MARKER_RETRY_S", 0.01)
    replicas = _FirstStateWriteHeld()
    txns = coordinator(replicas)
    first = _tv2_id(txns, 1, TxnState.ONGOING, {("facts", 0)}, tid="a")
    second = _tv2_id(txns, 1, TxnState.ONGOING, {("facts", 1)}, tid="b", producer_id=PID + 1)
    sweep = asyncio.create_task(txns.abort_timed_out(now_ms=61_002))
    await replicas.held.wait()
    assert await txns.end_txn_v2("b", PID + 1, 1, True) == (PID + 1, 2)
    await wait_for(lambda: second.state == TxnState.COMPLETE_COMMIT and not second.pending)
    replicas.release.set()
    await sweep
    await wait_for(lambda: first.state == TxnState.COMPLETE_ABORT and not first.pending)
    assert second.state == TxnState.COMPLETE_COMMIT and second.producer_epoch == 2
    assert [w[1] for w in replicas.written if w[0] == "state" and w[2] == PID + 1] == [
        TxnState.PREPARE_COMMIT, TxnState.COMPLETE_COMMIT]
    await txns.stop()


async def test_two_init_producer_ids_of_a_new_id_give_it_one_producer_id():
    """Both found no metadata for the id: each took its own producer id and wrote it, and both producers
    believed the id theirs."""
    replicas = _HeldStateWrites()
    txns = coordinator(replicas)
    first = asyncio.create_task(txns.init_producer_id("new", 60_000, -1, -1))
    second = asyncio.create_task(txns.init_producer_id("new", 60_000, -1, -1))
    await replicas.held.wait()
    replicas.release.set()
    answers = await asyncio.gather(first, second, return_exceptions=True)
    assert isinstance(answers[1], TxnError) and answers[1].error_code == ErrorCode.CONCURRENT_TRANSACTIONS
    assert answers[0] == (txns.get("new").producer_id, 0)
    assert [w[1] for w in replicas.written if w[0] == "state"] == [TxnState.EMPTY]
    # the retry fences the first instance's epoch, as any second InitProducerId does
    assert await txns.init_producer_id("new", 60_000, -1, -1) == (answers[0][0], 1)


class _HeldNextId:
    """The producer id block's claim waits on the metadata store: the first claim waits for `release`."""

    def __init__(self, txns) -> None:
        self.release = asyncio.Event()
        self.claimed = asyncio.Event()
        self._real = txns.replicas.producer_ids.next_id
        self._held = False
        txns.replicas.producer_ids.next_id = self.next_id

    async def next_id(self) -> int:
        if not self._held:
            self._held = True
            self.claimed.set()
            await self.release.wait()
        return await self._real()


async def test_an_init_producer_id_waiting_for_a_new_producer_id_does_not_drop_a_transaction_opened_meanwhile():
    """The epoch ran out: while InitProducerId waited for a new producer id, the old instance opened a
    transaction; the init then wrote Empty over it, and no markers ever closed it (a hanging transaction)."""
    replicas = _Recording()
    txns = coordinator(replicas)
    meta = _tv2_id(txns, 32766, TxnState.COMPLETE_COMMIT)
    held = _HeldNextId(txns)
    init = asyncio.create_task(txns.init_producer_id("tid", 60_000, PID, 32766))
    await held.claimed.wait()
    await txns.add_partitions("tid", PID, 32766, {("facts", 0)}, client_version=2)
    held.release.set()
    with pytest.raises(TxnError) as refused:
        await init
    assert refused.value.error_code == ErrorCode.CONCURRENT_TRANSACTIONS
    assert meta.state == TxnState.ONGOING and meta.partitions == {("facts", 0)} and not meta.pending
    await txns.stop()


async def test_a_timeout_abort_waiting_for_a_new_producer_id_leaves_a_commit_made_meanwhile(monkeypatch):
    monkeypatch.setattr(completion_module, "MARKER_RETRY_S", 0.01)
    replicas = _Recording()
    txns = coordinator(replicas)
    meta = _tv2_id(txns, 32766, TxnState.ONGOING, {("facts", 0)})
    held = _HeldNextId(txns)
    sweep = asyncio.create_task(txns.abort_timed_out(now_ms=61_002))
    await held.claimed.wait()
    await txns.end_txn_v2("tid", PID, 32766, True)
    await wait_for(lambda: meta.state == TxnState.COMPLETE_COMMIT and not meta.pending)
    held.release.set()
    await sweep
    assert [w[1] for w in replicas.written if w[0] == "state"] == [TxnState.PREPARE_COMMIT, TxnState.COMPLETE_COMMIT]
    assert meta.state == TxnState.COMPLETE_COMMIT and not meta.pending
    await txns.stop()
