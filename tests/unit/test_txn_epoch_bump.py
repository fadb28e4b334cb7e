"""Transactions version 2's EndTxn rules (broker/txn/tv2.py), against Kafka 4.3.1's table."""

import pytest

from broker.txn import completion as completion_module
from broker.txn.state_log import TxnError, TxnMetadata, TxnState, parse_record
from broker.txn.tv2 import MAX_EPOCH, Answered, Prepare, end_txn_verdict, epoch_exhausted
from protocol.errors import ErrorCode
from protocol.records import iter_batches
from tests.unit.test_txn_coordinator_background import FlakyReplicas, coordinator, owned, wait_for

PID = 7
EPOCH = 5


def _meta(state: TxnState, epoch: int = EPOCH, **fields) -> TxnMetadata:
    meta = TxnMetadata("t", PID, epoch, 60_000, state)
    for name, value in fields.items():
        setattr(meta, name, value)
    return meta


def _outcome(meta: TxnMetadata, epoch: int, commit: bool, producer_id: int = PID):
    try:
        verdict = end_txn_verdict(meta, producer_id, epoch, commit)
    except TxnError as exc:
        return ErrorCode(exc.error_code)
    return "NONE" if isinstance(verdict, Answered) else ("EB", verdict.empty)


# (state, request is a retry (epoch - 1) or current, commit) -> Kafka's answer
TABLE = [
    (TxnState.EMPTY, True, False, ErrorCode.PRODUCER_FENCED),
    (TxnState.EMPTY, False, False, ("EB", True)),
    (TxnState.EMPTY, True, True, ErrorCode.PRODUCER_FENCED),
    (TxnState.EMPTY, False, True, ErrorCode.INVALID_TXN_STATE),
    (TxnState.COMPLETE_ABORT, True, False, "NONE"),
    (TxnState.COMPLETE_ABORT, False, False, ("EB", True)),
    (TxnState.COMPLETE_ABORT, True, True, ErrorCode.INVALID_TXN_STATE),
    (TxnState.COMPLETE_ABORT, False, True, ErrorCode.INVALID_TXN_STATE),
    (TxnState.COMPLETE_COMMIT, True, False, ErrorCode.INVALID_TXN_STATE),
    (TxnState.COMPLETE_COMMIT, False, False, ("EB", True)),
    (TxnState.COMPLETE_COMMIT, True, True, "NONE"),
    (TxnState.COMPLETE_COMMIT, False, True, ErrorCode.INVALID_TXN_STATE),
    (TxnState.ONGOING, False, True, ("EB", False)),
    (TxnState.ONGOING, False, False, ("EB", False)),
    (TxnState.ONGOING, True, True, ErrorCode.PRODUCER_FENCED),
    (TxnState.PREPARE_COMMIT, True, True, ErrorCode.CONCURRENT_TRANSACTIONS),
    (TxnState.PREPARE_COMMIT, True, False, ErrorCode.INVALID_TXN_STATE),
    (TxnState.PREPARE_COMMIT, False, True, ErrorCode.PRODUCER_FENCED),
    (TxnState.PREPARE_ABORT, True, False, ErrorCode.CONCURRENT_TRANSACTIONS),
]


@pytest.mark.parametrize(("state", "retry", "commit", "expected"), TABLE)
def test_end_txn_v5_follows_kafkas_table(state, retry, commit, expected):
    assert _outcome(_meta(state), EPOCH - 1 if retry else EPOCH, commit) == expected


def test_an_epoch_above_the_current_one_is_fenced():
    assert _outcome(_meta(TxnState.COMPLETE_COMMIT), EPOCH + 1, True) == ErrorCode.PRODUCER_FENCED


def test_another_producer_id_is_invalid_mapping_unless_it_retries_an_overflow():
    meta = _meta(TxnState.COMPLETE_COMMIT, epoch=0, prev_producer_id=3)
    assert _outcome(meta, 0, True, producer_id=99) == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    # the old producer id at its last epoch, retrying the EndTxn that moved it to a new id
    assert _outcome(meta, MAX_EPOCH - 1, True, producer_id=3) == "NONE"
    assert _outcome(meta, MAX_EPOCH - 2, True, producer_id=3) == ErrorCode.INVALID_PRODUCER_ID_MAPPING


def test_a_write_in_flight_is_concurrent_transactions():
    meta = _meta(TxnState.ONGOING, pending=True)
    assert _outcome(meta, EPOCH, True) == ErrorCode.CONCURRENT_TRANSACTIONS


def test_while_a_write_is_in_flight_the_id_mapping_is_checked_first_then_pending_then_the_epoch():
    """Kafka 4.3.1's handleEndTransaction (KAFKA-18464): another producer id is
    INVALID_PRODUCER_ID_MAPPING even while the id is pending; a wrong epoch then waits with
    CONCURRENT_TRANSACTIONS rather than being fenced by the epoch the write in flight bumps."""
    meta = _meta(TxnState.PREPARE_COMMIT, pending=True, prev_producer_id=3)
    assert _outcome(meta, EPOCH, True, producer_id=99) == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    assert _outcome(meta, EPOCH, False) == ErrorCode.CONCURRENT_TRANSACTIONS  # not PRODUCER_FENCED
    overflowed = _meta(TxnState.PREPARE_ABORT, epoch=0, pending=True, prev_producer_id=3)
    assert _outcome(overflowed, MAX_EPOCH - 1, False, producer_id=3) == ErrorCode.CONCURRENT_TRANSACTIONS


def test_the_epoch_is_exhausted_one_below_the_maximum():
    assert not epoch_exhausted(MAX_EPOCH - 2)
    assert epoch_exhausted(MAX_EPOCH - 1)
    assert isinstance(end_txn_verdict(_meta(TxnState.ONGOING, epoch=MAX_EPOCH - 1), PID, MAX_EPOCH - 1, True),
                      Prepare)


class _Ids:
    def __init__(self, first: int) -> None:
        self.next = first

    async def next_id(self) -> int:
        self.next += 1
        return self.next - 1




class _Recording(FlakyReplicas):
    """Appends that succeed, each state record and marker noted; producer ids from 500."""

    def __init__(self) -> None:
        super().__init__(failures=0)
        self.written: list[tuple] = []
        self.producer_ids = _Ids(500)

    async def append_records(self, batches, **kwargs):
        for topic, _, data, batch in batches:
            header = batch.header()
            if header.is_control:
                self.written.append(("marker", topic, header.producer_id, header.producer_epoch,
                                     kwargs.get("marker_transaction_version")))
            else:
                for record in next(iter_batches(bytes(data))).records():
                    _, meta = parse_record(record.key, record.value)
                    self.written.append(("state", meta.state, meta.producer_id, meta.producer_epoch,
                                         meta.prev_producer_id, meta.next_producer_id))
        return await super().append_records(batches, **kwargs)


async def test_an_exhausted_epoch_ends_under_the_old_id_and_goes_on_under_a_new_one(monkeypatch):
    """EndTxn v5 at epoch 32766: Prepare and the markers carry the old id at 32767, the answer and
    CompleteCommit the new id at 0 with the old one as PreviousProducerId; the old id at its last
    epoch is then a retry."""
    monkeypatch.setattr(completion_module, "MARKER_RETRY_S", 0.01)
    replicas = _Recording()
    txns = coordinator(replicas)
    written = replicas.written
    meta = owned(txns, TxnMetadata("tid", PID, MAX_EPOCH - 1, 60_000, TxnState.ONGOING, {("facts", 0)},
                                   start_ms=1, client_transaction_version=2))
    assert await txns.end_txn_v2("tid", PID, MAX_EPOCH - 1, True) == (500, 0)
    await wait_for(lambda: meta.state == TxnState.COMPLETE_COMMIT)
    assert written == [
        ("state", TxnState.PREPARE_COMMIT, PID, MAX_EPOCH, -1, 500),
        ("marker", "facts", PID, MAX_EPOCH, 2),
        ("state", TxnState.COMPLETE_COMMIT, 500, 0, PID, -1),
    ]
    assert await txns.end_txn_v2("tid", PID, MAX_EPOCH - 1, True) == (500, 0)  # the old id's retry
    with pytest.raises(TxnError) as refused:
        await txns.end_txn_v2("tid", PID, MAX_EPOCH - 1, False)
    assert refused.value.error_code == ErrorCode.INVALID_TXN_STATE
    await txns.stop()


async def test_a_timed_out_transaction_is_aborted_at_the_clusters_version(monkeypatch):
    """The coordinator's own abort (a timeout, a fencing InitProducerId) runs at the cluster's
    transaction version, as Kafka's: version 2 markers under the bumped epoch, and an exhausted epoch
    moves the id to a new producer id."""
    monkeypatch.setattr(completion_module, "MARKER_RETRY_S", 0.01)
    replicas = _Recording()
    txns = coordinator(replicas)
    assert txns.transaction_version == 2
    meta = owned(txns, TxnMetadata("tid", PID, MAX_EPOCH - 1, 10, TxnState.ONGOING, {("facts", 0)}, start_ms=1))
    assert await txns.abort_timed_out(now_ms=1_000) == 1
    await wait_for(lambda: meta.state == TxnState.COMPLETE_ABORT)
    assert replicas.written == [
        ("state", TxnState.PREPARE_ABORT, PID, MAX_EPOCH, -1, 500),
        ("marker", "facts", PID, MAX_EPOCH, 2),
        ("state", TxnState.COMPLETE_ABORT, 500, 0, PID, -1),
    ]
    assert meta.client_transaction_version == 2
    await txns.stop()


async def test_an_end_txn_below_v5_ends_at_version_0_what_a_produce_v12_added(monkeypatch):
    """A partition added by a Produce v12 (transactions version 2) to a transaction the producer ends with
    EndTxn v3: Kafka ends it at version 0 (no epoch bump, version 0 markers). At version 2 the markers
    under the unbumped epoch were refused by the partition, and the transaction never completed."""
    monkeypatch.setattr(completion_module, "MARKER_RETRY_S", 0.01)
    replicas = _Recording()
    txns = coordinator(replicas)
    meta = owned(txns, TxnMetadata("tid", PID, EPOCH, 60_000, TxnState.EMPTY, set()))
    assert await txns.add_partitions_answer("tid", PID, EPOCH, [("facts", 0)]) == {("facts", 0): ErrorCode.NONE}
    assert meta.client_transaction_version == 2
    await txns.end_txn("tid", PID, EPOCH, False)
    await wait_for(lambda: meta.state == TxnState.COMPLETE_ABORT)
    assert ("marker", "facts", PID, EPOCH, 0) in replicas.written
    assert meta.producer_epoch == EPOCH and meta.client_transaction_version == 0
    await txns.stop()


async def test_the_new_id_meets_concurrent_transactions_until_the_overflowing_end_completes(monkeypatch):
    """Between EndTxn v5's answer (the new id at epoch 0) and CompleteCommit, Prepare still holds the
    old id: Kafka 4.3.1 answers an add under the new id CONCURRENT_TRANSACTIONS (a change under way is
    checked before the producer id), which the producer retries, not INVALID_PRODUCER_ID_MAPPING."""
    import asyncio
    monkeypatch.setattr(completion_module, "MARKER_RETRY_S", 0.01)
    release = asyncio.Event()

    class HeldMarkers(_Recording):
        async def append_records(self, batches, **kwargs):
            if any(batch.header().is_control for *_, batch in batches):
                await release.wait()
            return await super().append_records(batches, **kwargs)

    txns = coordinator(HeldMarkers())
    meta = owned(txns, TxnMetadata("tid", PID, MAX_EPOCH - 1, 60_000, TxnState.ONGOING, {("facts", 0)},
                                   start_ms=1, client_transaction_version=2))
    assert await txns.end_txn_v2("tid", PID, MAX_EPOCH - 1, True) == (500, 0)
    with pytest.raises(TxnError) as refused:
        await txns.add_partitions("tid", 500, 0, {("facts", 0)}, client_version=2)
    assert refused.value.error_code == ErrorCode.CONCURRENT_TRANSACTIONS
    release.set()
    await wait_for(lambda: meta.state == TxnState.COMPLETE_COMMIT)
    await txns.add_partitions("tid", 500, 0, {("facts", 0)}, client_version=2)
    assert txns._txns["tid"].state == TxnState.ONGOING
    await txns.stop()
