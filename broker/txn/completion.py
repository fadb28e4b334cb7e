"""Completing a transaction (Kafka's TransactionMarkerChannelManager's caller side): once a Prepare
state is written, its markers go to every partition in rounds (broker/txn/markers.py's MarkerSender),
then the Complete state is written; both are retried until done, or until the id is no longer this
coordinator's (its new coordinator finishes the transaction). It is separate from the coordinator
because it is the one background phase of the state machine: it reads the coordinator only through
the callables it is given (ownership, the id's partition, the state write, the task spawner), and
the coordinator's state write starts it again for every Prepare it writes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, Protocol

import structlog

from broker.coordinator_partitions import CoordinatorPartitions
from broker.txn.markers import MarkerSender
from broker.txn.state_log import TopicPartitionKey, TxnError, TxnMetadata, TxnState

log = structlog.get_logger("transactions")

MARKER_RETRY_S = 0.1


class StateWrite(Protocol):
    """The coordinator's uncancellable state write (TransactionCoordinator._write)."""

    async def __call__(self, meta: TxnMetadata, state: TxnState, partitions: set[TopicPartitionKey],
                       start_ms: int, *, epoch: int, new: bool = False, complete: bool | None = None,
                       completing: bool = False, **changes: int) -> None: ...


class TxnCompletions:
    def __init__(self, sender: MarkerSender, partitions: CoordinatorPartitions,
                 partition_of: Callable[[str], int], owns: Callable[[TxnMetadata], bool], write: StateWrite,
                 spawn: Callable[[Coroutine[Any, Any, None]], asyncio.Task]) -> None:
        self._sender = sender
        self._partitions = partitions
        self._partition_of = partition_of
        self._owns = owns
        self._write = write
        self._spawn = spawn

    def start(self, meta: TxnMetadata, commit: bool) -> None:
        """The markers and the Complete state, in the background. Until Complete is written the id is
        pending (Kafka's pendingState CompleteCommit/CompleteAbort, set before EndTxn is answered): the
        producer's next EndTxn, add or InitProducerId waits with CONCURRENT_TRANSACTIONS, never
        judged against a Prepare state whose epoch transactions version 2 has already bumped (an
        EndTxn v5 at that epoch is no retry there: PRODUCER_FENCED)."""
        meta.pending = True
        self._spawn(self.complete(meta, commit))

    async def complete(self, meta: TxnMetadata, commit: bool) -> None:
        """Send the markers, then write the Complete state; retried until both are written, or until
        the id is no longer this coordinator's (its new coordinator completes the transaction)."""
        index = self._partition_of(meta.transactional_id)
        remaining = set(meta.partitions)
        while remaining:
            if not self._owns(meta):
                log.info("transaction completion handed over", transactional_id=meta.transactional_id)
                return
            coordinator_epoch = self._partitions.leader_epoch(index)
            if coordinator_epoch < 0:  # no replica here just now: never markers under a made-up epoch
                await asyncio.sleep(MARKER_RETRY_S)
                continue
            try:
                remaining = await self._sender.send_round(meta.producer_id, meta.producer_epoch, commit,
                                                          coordinator_epoch, remaining,
                                                          meta.client_transaction_version)
            except Exception as exc:  # anything unforeseen: logged, and the markers retried
                log.error("transaction marker write failed", transactional_id=meta.transactional_id,
                          error=repr(exc), exc_info=exc)
            if remaining:
                await asyncio.sleep(MARKER_RETRY_S)
        done = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
        while True:
            if not self._owns(meta):
                log.info("transaction completion handed over", transactional_id=meta.transactional_id)
                return
            try:
                if meta.next_producer_id >= 0:  # the epoch ran out: the new producer id takes over at 0
                    await self._write(meta, done, set(), meta.start_ms, epoch=0, completing=True,
                                      producer_id=meta.next_producer_id, prev_producer_id=meta.producer_id,
                                      next_producer_id=-1)
                else:
                    await self._write(meta, done, set(), meta.start_ms, epoch=meta.producer_epoch, completing=True)
                meta.pending = False
                break
            except TxnError as exc:
                log.warning("cannot complete transaction yet", transactional_id=meta.transactional_id,
                            error=exc.message)
                await asyncio.sleep(MARKER_RETRY_S)
            except Exception as exc:  # anything unforeseen: logged, and the write retried
                log.error("cannot complete transaction yet", transactional_id=meta.transactional_id,
                          error=repr(exc), exc_info=exc)
                await asyncio.sleep(MARKER_RETRY_S)
        log.info("transaction completed", transactional_id=meta.transactional_id, producer_id=meta.producer_id,
                 epoch=meta.producer_epoch, result=done.display_name)
