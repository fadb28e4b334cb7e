"""Transactions version 2's EndTxn rules (broker/txn/tv2.py), against Kafka 4.3.1's table."""

import pytest

from broker.txn.state_log import TxnError, TxnMetadata, TxnState
from broker.txn.tv2 import MAX_EPOCH, Answered, Prepare, end_txn_verdict, epoch_exhausted
from protocol.errors import ErrorCode

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


def test_the_epoch_is_exhausted_one_below_the_maximum():
    assert not epoch_exhausted(MAX_EPOCH - 2)
    assert epoch_exhausted(MAX_EPOCH - 1)
    assert isinstance(end_txn_verdict(_meta(TxnState.ONGOING, epoch=MAX_EPOCH - 1), PID, MAX_EPOCH - 1, True),
                      Prepare)
