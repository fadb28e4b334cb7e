"""Removing expired transactional ids (Kafka's TransactionStateManager.removeExpiredTransactionalIds):
an id without an open transaction whose last change is older than the horizon gets a tombstone in
its `__transaction_state` partition (one batch per partition and round), then leaves the coordinator's
memory, so a replay drops it too. Requests for it answer CONCURRENT_TRANSACTIONS while the tombstone
is written."""

from __future__ import annotations

from collections.abc import Callable

import structlog

from broker.aio import run_to_completion
from broker.replica import ReplicaManager
from broker.txn.state_log import TxnMetadata, TxnState, append_state, key_bytes
from protocol.errors import ErrorCode

log = structlog.get_logger("transactions")

# The states whose id may expire (Kafka's TransactionState.isExpirationAllowed): no transaction open.
EXPIRABLE = frozenset({TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT})


async def remove_expired_ids(replicas: ReplicaManager, txns: dict[str, TxnMetadata], partition_of: Callable[[str], int],
                             owns: Callable[[TxnMetadata], bool], horizon_ms: int, now_ms: int) -> int:
    """Tombstone and forget the expired ids of `txns` (those `owns` still says are the coordinator's
    once written); returns how many were removed."""
    by_index: dict[int, list[TxnMetadata]] = {}
    for meta in txns.values():
        if meta.state in EXPIRABLE and not meta.pending and meta.update_ms <= horizon_ms:
            by_index.setdefault(partition_of(meta.transactional_id), []).append(meta)
    if not by_index:
        return 0
    metas = [meta for group in by_index.values() for meta in group]
    for meta in metas:
        meta.pending = True
    try:
        results = await run_to_completion(append_state(
            replicas, {index: [(key_bytes(m.transactional_id), None) for m in group]
                       for index, group in by_index.items()}, now_ms))
    finally:
        for meta in metas:
            meta.pending = False
    removed = 0
    for index, group in by_index.items():
        if results[index][0] != ErrorCode.NONE:
            log.warning("cannot remove expired transactional ids yet", partition=index, error=results[index][0].name)
            continue
        for meta in group:
            if owns(meta):
                del txns[meta.transactional_id]
                removed += 1
    return removed
