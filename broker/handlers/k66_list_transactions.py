"""ListTransactions (key 66), versions 0-2 (`kafka-transactions list`, `find-hanging`).

Every transactional id the coordinator holds (in a cluster: of the `__transaction_state` partitions
this broker leads), except Dead ones, with its producer id and Kafka's
state name, that passes every filter given (TransactionStateManager.listTransactionStates):
- StateFilters: the state is one of them (names as Kafka spells them, case-sensitive); names that
  are no state come back in UnknownStateFilters (and match nothing);
- ProducerIdFilters: the producer id is one of them;
- DurationFilter (v1+), when >= 0: the transaction started more than that many milliseconds ago;
- TransactionalIdPattern (v2+), when neither null nor empty: the regular expression matches the
  whole id; one that does not compile is INVALID_REGULAR_EXPRESSION for the whole request.
Only ids the caller may DESCRIBE are listed, as Kafka filters them.

Errors: NONE, COORDINATOR_NOT_AVAILABLE (the coordinator is not running: starting or stopping),
COORDINATOR_LOAD_IN_PROGRESS (in a cluster, while any `__transaction_state` partition led here is
being loaded: Kafka answers so rather than a partial list, before it looks at the pattern),
INVALID_REGULAR_EXPRESSION.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Sized
from typing import Protocol

from broker.handlers import handles
from broker.request_context import RequestContext
from broker.security.access import Guarded, allowed
from broker.txn import TxnMetadata, TxnState
from protocol.enums import ApiKey, Operation, ResourceType
from protocol.errors import ErrorCode
from protocol.framing import Request
from protocol.messages import ListTransactionsRequest, ListTransactionsResponse

API_KEY = ApiKey.LIST_TRANSACTIONS
_Listed = ListTransactionsResponse.TransactionState
_BY_NAME = {state.display_name: state for state in TxnState}


# What is read here of the broker (its BrokerContext is one), as Protocols.
class LoadingPartitions(Protocol):
    """The coordinator's `__transaction_state` partitions (coordinator_partitions.py)."""

    @property
    def loading(self) -> Sized: ...


class ListedCoordinator(Protocol):
    """The TransactionCoordinator: whether it runs, what is loading, the ids it holds."""

    @property
    def active(self) -> bool: ...
    @property
    def partitions(self) -> LoadingPartitions: ...
    def all(self) -> Iterable[TxnMetadata]: ...


class TxnListingBroker(Guarded, Protocol):
    @property
    def transactions(self) -> ListedCoordinator: ...


def _error(code: ErrorCode) -> ListTransactionsResponse:
    return ListTransactionsResponse(throttle_time_ms=0, error_code=code, unknown_state_filters=[],
                                    transaction_states=[])


@handles(API_KEY, "0-2")
async def list_transactions(broker: TxnListingBroker, request: Request[ListTransactionsRequest],
                            connection: RequestContext) -> ListTransactionsResponse:
    version, body = request.api_version, request.body
    coordinator = broker.transactions
    if not coordinator.active:
        return _error(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    if coordinator.partitions.loading:
        return _error(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
    pattern = None
    if version >= 2 and body.transactional_id_pattern:
        try:
            pattern = re.compile(body.transactional_id_pattern)
        except re.error:
            return _error(ErrorCode.INVALID_REGULAR_EXPRESSION)
    names = list(dict.fromkeys(body.state_filters))
    states = {_BY_NAME[n] for n in names if n in _BY_NAME}
    producer_ids = set(body.producer_id_filters)
    duration = body.duration_filter if version >= 1 else -1
    now = time.time_ns() // 1_000_000
    listed = [
        _Listed(transactional_id=m.transactional_id, producer_id=m.producer_id, transaction_state=m.state.display_name)
        for m in coordinator.all()
        if m.state != TxnState.DEAD  # being expired
        and (not producer_ids or m.producer_id in producer_ids)
        and (not names or m.state in states)
        and (duration < 0 or now - m.start_ms > duration)
        and (pattern is None or pattern.fullmatch(m.transactional_id) is not None)
        and allowed(broker, connection, Operation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, m.transactional_id)]
    return ListTransactionsResponse(throttle_time_ms=0, error_code=ErrorCode.NONE,
                                    unknown_state_filters=[n for n in names if n not in _BY_NAME],
                                    transaction_states=listed)
