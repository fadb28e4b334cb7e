"""Transactions version 2 (KIP-890 part 2): the EndTxn v5 rules, as Kafka 4.3.1's TransactionCoordinator.

Every commit or abort bumps the producer epoch: PrepareCommit/PrepareAbort is written with epoch + 1,
the markers carry it, and EndTxn answers the producer id and epoch of the Complete state to come (a
new producer id at epoch 0 when the epoch is exhausted: its markers still carry the old id at the
last epoch, and PreviousProducerId keeps the old id so a retry is recognised). A retried EndTxn is
one whose epoch is one below the current (or, after a new producer id, the old id at its last
epoch); the table (Retry: epoch + 1 = current, Current: epoch = current; PF PRODUCER_FENCED, ITS
INVALID_TXN_STATE, NONE answered as is, EB a new epoch bump):

                    Abort: Retry  Current   Commit: Retry  Current
    Empty                  PF     EB                PF     ITS
    CompleteAbort          NONE   EB                ITS    ITS
    CompleteCommit         ITS    EB                NONE   ITS

Ongoing takes the current epoch only (EB); PrepareCommit/PrepareAbort only a retry (the same outcome
CONCURRENT_TRANSACTIONS, the other ITS). An abort from Empty or a Complete state writes no partitions
and starts its (empty) transaction now.
"""

from __future__ import annotations

from dataclasses import dataclass

from broker.txn.state_log import TxnError, TxnMetadata, TxnState
from protocol.errors import ErrorCode

MAX_EPOCH = 2**15 - 1
TV0 = 0  # transactions version 0: EndTxn below v5, no epoch bump at the end
TV2 = 2


def epoch_exhausted(epoch: int) -> bool:
    """Kafka's isProducerEpochExhausted: no room for one more bump and a fence."""
    return epoch >= MAX_EPOCH - 1


@dataclass(frozen=True)
class Prepare:
    """Write PrepareCommit/PrepareAbort with the epoch bumped (`empty`: no partitions were added)."""

    commit: bool
    empty: bool


@dataclass(frozen=True)
class Answered:
    """A retry of a completed EndTxn: answered NONE with the current producer id and epoch."""


def end_txn_verdict(meta: TxnMetadata, producer_id: int, producer_epoch: int, commit: bool) -> Prepare | Answered:
    """What an EndTxn v5 does to the id (raises TxnError with its answer when refused)."""
    retry_on_overflow = (meta.prev_producer_id == producer_id and producer_epoch == MAX_EPOCH - 1
                         and meta.producer_epoch == 0)
    retry_on_bump = meta.producer_epoch == producer_epoch + 1
    if meta.producer_id != producer_id and not retry_on_overflow:
        raise TxnError(ErrorCode.INVALID_PRODUCER_ID_MAPPING,
                       f"producer id {producer_id} is not the one of transactional id {meta.transactional_id!r}")
    # Pending before the epoch (KAFKA-18464): an EndTxn right after the last one is answered
    # CONCURRENT_TRANSACTIONS while the epoch it bumped is being written, never fenced by it.
    if meta.pending:
        raise TxnError(ErrorCode.CONCURRENT_TRANSACTIONS, f"{meta.transactional_id!r} is changing state")
    state = meta.state
    if state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
        valid = retry_on_bump
    elif state in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT):
        valid = retry_on_bump or retry_on_overflow or producer_epoch == meta.producer_epoch
    else:
        valid = producer_epoch == meta.producer_epoch
    if not valid:
        raise TxnError(ErrorCode.PRODUCER_FENCED,
                       f"epoch {producer_epoch} of producer {producer_id} is not the current {meta.producer_epoch}")
    retry = retry_on_bump or retry_on_overflow
    invalid = TxnError(ErrorCode.INVALID_TXN_STATE, f"{meta.transactional_id!r} is {state.display_name}: cannot "
                                                    f"{'commit' if commit else 'abort'} at epoch {producer_epoch}")
    if state == TxnState.ONGOING:
        return Prepare(commit, empty=False)
    if state == TxnState.COMPLETE_COMMIT:
        if commit:
            if retry:
                return Answered()
            raise invalid
        if retry:
            raise invalid
        return Prepare(False, empty=True)
    if state == TxnState.COMPLETE_ABORT:
        if commit:
            raise invalid
        return Answered() if retry else Prepare(False, empty=True)
    if state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
        if commit == (state == TxnState.PREPARE_COMMIT):
            raise TxnError(ErrorCode.CONCURRENT_TRANSACTIONS,
                           f"{meta.transactional_id!r} is completing this transaction")
        raise invalid
    if state == TxnState.EMPTY and not commit:
        return Prepare(False, empty=True)
    raise invalid
